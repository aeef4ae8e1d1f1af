// SPDX-License-Identifier: GPL-2.0
//! Untagged reassembly validation (RFC 5041 sections 5.3, 6 and 7.2).
//!
//! rsiw runs DDP over MPA/TCP and processes segments in stream order, so on
//! each queue the segments of one message arrive in order and the next
//! message starts after the previous one's L segment. Per queue the engine
//! keeps the MSN of the message being received and how many octets of it
//! have arrived; a segment must continue exactly there.

use crate::error::{self, TermError};
use crate::wire::ddp::{Model, Repr};
use crate::wire::rdmap::qn;

/// First MSN on every queue (RFC 5041 section 5.3: MSN starts at 1).
pub const INITIAL_MSN: u32 = 1;

/// The caller's posted untagged buffers: QN 0 is the receive queue, QN 1
/// the inbound read/atomic/commit request slots (IRD), QN 2 the Terminate
/// buffer, QN 3 the atomic/commit response slots (ORD).
pub trait RecvQueues {
    /// Length of the buffer that will take the next message on `qn`,
    /// `None` if nothing is posted.
    fn posted_len(&self, qn: u32) -> Option<u32>;
}

/// Place `len` octets at offset `mo` of the buffer for (`qn`, `msn`); if
/// `last`, the message (of `mo + len` octets) is complete and the buffer
/// is consumed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct UntaggedPlacement {
    /// Queue Number.
    pub qn: u32,
    /// Message Sequence Number.
    pub msn: u32,
    /// Message Offset of the first octet.
    pub mo: u32,
    /// Payload octets in this segment.
    pub len: u32,
    /// L: the message is complete.
    pub last: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Queue {
    expected_msn: u32,
    received: u32,
}

/// Per-stream untagged receive state for QN 0..=3.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UntaggedRx {
    queues: [Queue; qn::COUNT],
}

impl Default for UntaggedRx {
    fn default() -> Self {
        Self::new()
    }
}

impl UntaggedRx {
    /// Fresh stream: every queue expects MSN 1 at MO 0.
    pub const fn new() -> Self {
        Self {
            queues: [Queue {
                expected_msn: INITIAL_MSN,
                received: 0,
            }; qn::COUNT],
        }
    }

    /// The MSN the next segment on `qn` must carry.
    pub fn expected_msn(&self, qn: u32) -> Option<u32> {
        self.queues.get(qn as usize).map(|q| q.expected_msn)
    }

    /// Validates an untagged segment with `payload_len` octets after the
    /// DDP header and, on success, advances the queue. Checks, in order:
    /// QN in 0..=3 (`U_INVALID_QN`), MSN equal to the expected one
    /// (`U_MSN_RANGE`), a posted buffer (`U_NO_BUFFER`), MO equal to the
    /// octets received so far (`U_INVALID_MO`), MO + length within the
    /// buffer (`U_TOO_LONG`). The DDP version was checked by
    /// [`Repr::parse`]. A tagged header is a caller bug: `ddp::LOCAL_CATA`.
    pub fn accept<B: RecvQueues + ?Sized>(
        &mut self,
        hdr: &Repr,
        payload_len: usize,
        bufs: &B,
    ) -> Result<UntaggedPlacement, TermError> {
        let Model::Untagged { qn, msn, mo, .. } = hdr.model else {
            return Err(error::ddp::LOCAL_CATA);
        };
        let q = self
            .queues
            .get_mut(qn as usize)
            .ok_or(error::ddp::U_INVALID_QN)?;
        if msn != q.expected_msn {
            return Err(error::ddp::U_MSN_RANGE);
        }
        let cap = bufs.posted_len(qn).ok_or(error::ddp::U_NO_BUFFER)?;
        if mo != q.received {
            return Err(error::ddp::U_INVALID_MO);
        }
        let len = u32::try_from(payload_len).map_err(|_| error::ddp::U_TOO_LONG)?;
        let end = mo
            .checked_add(len)
            .filter(|&e| e <= cap)
            .ok_or(error::ddp::U_TOO_LONG)?;
        if hdr.last {
            q.expected_msn = q.expected_msn.wrapping_add(1);
            q.received = 0;
        } else {
            q.received = end;
        }
        Ok(UntaggedPlacement {
            qn,
            msn,
            mo,
            len,
            last: hdr.last,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Bufs([Option<u32>; 4]);

    impl RecvQueues for Bufs {
        fn posted_len(&self, qn: u32) -> Option<u32> {
            self.0.get(qn as usize).copied().flatten()
        }
    }

    fn seg(qn: u32, msn: u32, mo: u32, last: bool) -> Repr {
        Repr {
            last,
            ulp_ctrl: 0x43,
            model: Model::Untagged {
                rsvd_ulp: 0,
                qn,
                msn,
                mo,
            },
        }
    }

    #[test]
    fn two_segment_message_then_next() {
        let b = Bufs([Some(100), None, None, None]);
        let mut rx = UntaggedRx::new();
        let p = rx.accept(&seg(0, 1, 0, false), 60, &b).unwrap();
        assert_eq!(
            p,
            UntaggedPlacement {
                qn: 0,
                msn: 1,
                mo: 0,
                len: 60,
                last: false
            }
        );
        assert!(rx.accept(&seg(0, 1, 60, true), 40, &b).unwrap().last);
        assert_eq!(rx.expected_msn(0), Some(2));
        assert!(rx.accept(&seg(0, 2, 0, true), 0, &b).is_ok());
    }

    #[test]
    fn every_untagged_error() {
        let b = Bufs([Some(100), None, Some(64), Some(12)]);
        let mut rx = UntaggedRx::new();
        assert_eq!(
            rx.accept(&seg(4, 1, 0, true), 1, &b),
            Err(error::ddp::U_INVALID_QN)
        );
        assert_eq!(
            rx.accept(&seg(u32::MAX, 1, 0, true), 1, &b),
            Err(error::ddp::U_INVALID_QN)
        );
        assert_eq!(
            rx.accept(&seg(0, 2, 0, true), 1, &b),
            Err(error::ddp::U_MSN_RANGE)
        );
        assert_eq!(
            rx.accept(&seg(1, 1, 0, true), 1, &b),
            Err(error::ddp::U_NO_BUFFER)
        );
        assert_eq!(
            rx.accept(&seg(0, 1, 4, true), 1, &b),
            Err(error::ddp::U_INVALID_MO)
        );
        assert_eq!(
            rx.accept(&seg(0, 1, 0, true), 101, &b),
            Err(error::ddp::U_TOO_LONG)
        );
        // Nothing above changed the state.
        assert_eq!(rx, UntaggedRx::new());
        let tagged = Repr {
            last: true,
            ulp_ctrl: 0x40,
            model: Model::Tagged { stag: 1, to: 0 },
        };
        assert_eq!(rx.accept(&tagged, 0, &b), Err(error::ddp::LOCAL_CATA));
    }

    #[test]
    fn msn_wraps_modulo_2_32() {
        let b = Bufs([Some(8); 4]);
        let mut rx = UntaggedRx::new();
        rx.queues[3].expected_msn = u32::MAX;
        rx.accept(&seg(3, u32::MAX, 0, true), 8, &b).unwrap();
        assert_eq!(rx.expected_msn(3), Some(0));
        rx.accept(&seg(3, 0, 0, true), 8, &b).unwrap();
        assert_eq!(rx.expected_msn(3), Some(1));
    }
}
