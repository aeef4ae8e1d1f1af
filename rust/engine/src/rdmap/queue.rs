// SPDX-License-Identifier: GPL-2.0
//! IRD/ORD accounting and response ordering (RFC 5040 section 6.4, RFC
//! 7306 section 5.2).
//!
//! RDMA Read Requests, Atomic Requests (RFC 7306 5.2: "reuse ... ORD/IRD")
//! and Commit Requests (commit draft 4.2.1: same QN and flow control) share
//! one credit pool per direction. Responses go out, and come back, in
//! request order: RFC 5040 5.5 for Reads, RFC 7306 5.2.2 item 8 and the
//! section 7 table (a Read Response is not generated before an earlier
//! Atomic Response and vice versa), and the commit draft 4.3 ("similar to
//! ... an Atomic operation"). A bounded FIFO per direction therefore both
//! counts credits and enforces the order.

use crate::error::{self, TermError};
use crate::wire::{atomic, commit};

/// A fixed-capacity FIFO whose usable depth is the negotiated IRD or ORD
/// (at most `N`).
#[derive(Debug, Clone)]
pub struct RequestQueue<T: Copy, const N: usize> {
    slots: [Option<T>; N],
    head: usize,
    len: usize,
    limit: usize,
}

impl<T: Copy, const N: usize> RequestQueue<T, N> {
    /// A queue admitting `limit` outstanding requests (clamped to `N`).
    pub fn new(limit: u32) -> Self {
        let limit = usize::try_from(limit).unwrap_or(N).min(N);
        Self {
            slots: [None; N],
            head: 0,
            len: 0,
            limit,
        }
    }

    /// Outstanding requests.
    #[inline]
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether nothing is outstanding.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Whether all credits are in use.
    #[inline]
    pub fn is_full(&self) -> bool {
        self.len >= self.limit
    }

    /// Appends, or gives the item back if all credits are in use.
    pub fn push(&mut self, item: T) -> Result<(), T> {
        if self.is_full() || N == 0 {
            return Err(item);
        }
        let i = (self.head + self.len) % N;
        match self.slots.get_mut(i) {
            Some(slot) => {
                *slot = Some(item);
                self.len += 1;
                Ok(())
            }
            None => Err(item),
        }
    }

    /// The oldest outstanding request.
    pub fn front(&self) -> Option<&T> {
        if self.len == 0 {
            return None;
        }
        self.slots.get(self.head).and_then(Option::as_ref)
    }

    /// Removes the oldest request (its credit is free again).
    pub fn pop(&mut self) -> Option<T> {
        if self.len == 0 || N == 0 {
            return None;
        }
        let item = self.slots.get_mut(self.head).and_then(Option::take);
        self.head = (self.head + 1) % N;
        self.len -= 1;
        item
    }
}

/// A request the local peer sent and awaits a response for (ORQ entry).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum OutboundRequest {
    /// RDMA Read: the Read Response must land in this sink range.
    Read {
        /// Data Sink STag advertised in the request.
        sink_stag: u32,
        /// Data Sink TO.
        sink_to: u64,
        /// RDMA Read Message Size.
        len: u32,
    },
    /// Atomic Request with its Request Identifier.
    Atomic {
        /// Request Identifier.
        request_id: u32,
    },
    /// Commit Request with its Request Identifier.
    Commit {
        /// Request Identifier.
        request_id: u32,
    },
}

/// A request received and not yet fully answered (IRQ entry).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum InboundRequest {
    /// Read Response to send.
    Read(super::ReadResponsePlan),
    /// Atomic Response to send for this Request Identifier.
    Atomic {
        /// Request Identifier.
        request_id: u32,
    },
    /// Commit Response to send.
    Commit {
        /// Request Identifier.
        request_id: u32,
    },
}

/// The requester's outstanding queue (ORD).
pub type Orq<const N: usize> = RequestQueue<OutboundRequest, N>;
/// The responder's inbound request queue (IRD).
pub type Irq<const N: usize> = RequestQueue<InboundRequest, N>;

impl<const N: usize> RequestQueue<InboundRequest, N> {
    /// Takes an IRD credit for an inbound request. Exceeding IRD means the
    /// peer used a QN 1 buffer that was never available: DDP "no buffer"
    /// (RFC 5041 7.2; siw reports RDMAP catastrophic-stream instead).
    pub fn admit(&mut self, r: InboundRequest) -> Result<(), TermError> {
        self.push(r).map_err(|_| error::ddp::U_NO_BUFFER)
    }
}

impl<const N: usize> RequestQueue<OutboundRequest, N> {
    /// Records a request about to be sent; `false` means ORD is reached and
    /// the request must wait (RFC 5040 6.4: never exceed ORD).
    pub fn try_issue(&mut self, r: OutboundRequest) -> bool {
        self.push(r).is_ok()
    }

    /// Checks a Read Response segment against the oldest outstanding
    /// request, which must be a Read (else Unexpected OpCode), with the
    /// same sink STag (else DDP invalid STag) and a TO range inside the
    /// requested sink range (else base/bounds). On the last segment the
    /// Read completes and is returned; its credit is free.
    pub fn on_read_response(
        &mut self,
        stag: u32,
        to: u64,
        len: u32,
        last: bool,
    ) -> Result<Option<OutboundRequest>, TermError> {
        let Some(&OutboundRequest::Read {
            sink_stag,
            sink_to,
            len: total,
        }) = self.front()
        else {
            return Err(error::rdmap::UNEXPECTED_OPCODE);
        };
        if stag != sink_stag {
            return Err(error::ddp::T_INVALID_STAG);
        }
        let off = to.checked_sub(sink_to).ok_or(error::ddp::T_BASE_BOUNDS)?;
        if off > u64::from(total) || u64::from(len) > u64::from(total) - off {
            return Err(error::ddp::T_BASE_BOUNDS);
        }
        Ok(if last { self.pop() } else { None })
    }

    /// Matches an Atomic Response: the oldest request must be an Atomic
    /// (else Unexpected OpCode) with the same Request Identifier (else
    /// "Remote Operation Error, unspecified").
    pub fn on_atomic_response(
        &mut self,
        r: &atomic::ResponseRepr,
    ) -> Result<OutboundRequest, TermError> {
        match self.front() {
            Some(&OutboundRequest::Atomic { request_id }) if request_id == r.request_id => {
                self.pop().ok_or(error::rdmap::LOCAL_CATA)
            }
            Some(OutboundRequest::Atomic { .. }) => Err(error::rdmap::OP_UNSPECIFIED),
            _ => Err(error::rdmap::UNEXPECTED_OPCODE),
        }
    }

    /// Matches a Commit Response like [`Self::on_atomic_response`].
    pub fn on_commit_response(
        &mut self,
        r: &commit::ResponseRepr,
    ) -> Result<OutboundRequest, TermError> {
        match self.front() {
            Some(&OutboundRequest::Commit { request_id }) if request_id == r.request_id => {
                self.pop().ok_or(error::rdmap::LOCAL_CATA)
            }
            Some(OutboundRequest::Commit { .. }) => Err(error::rdmap::OP_UNSPECIFIED),
            _ => Err(error::rdmap::UNEXPECTED_OPCODE),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::commit::Status;
    use proptest::prelude::*;

    #[test]
    fn shared_ord_and_in_order_matching() {
        let mut orq: Orq<4> = RequestQueue::new(3);
        assert!(orq.try_issue(OutboundRequest::Read {
            sink_stag: 9,
            sink_to: 0x100,
            len: 64
        }));
        assert!(orq.try_issue(OutboundRequest::Atomic { request_id: 1 }));
        assert!(orq.try_issue(OutboundRequest::Commit { request_id: 2 }));
        // ORD 3 reached by three different request kinds.
        assert!(!orq.try_issue(OutboundRequest::Atomic { request_id: 3 }));
        // The atomic response may not overtake the read.
        let ar = atomic::ResponseRepr {
            request_id: 1,
            original: 0,
        };
        assert_eq!(
            orq.on_atomic_response(&ar),
            Err(error::rdmap::UNEXPECTED_OPCODE)
        );
        assert_eq!(
            orq.on_read_response(8, 0x100, 32, false),
            Err(error::ddp::T_INVALID_STAG)
        );
        assert_eq!(
            orq.on_read_response(9, 0xFF, 32, false),
            Err(error::ddp::T_BASE_BOUNDS)
        );
        assert_eq!(
            orq.on_read_response(9, 0x120, 33, false),
            Err(error::ddp::T_BASE_BOUNDS)
        );
        assert_eq!(orq.on_read_response(9, 0x100, 32, false), Ok(None));
        assert!(orq.on_read_response(9, 0x120, 32, true).unwrap().is_some());
        let bad_id = atomic::ResponseRepr {
            request_id: 7,
            original: 0,
        };
        assert_eq!(
            orq.on_atomic_response(&bad_id),
            Err(error::rdmap::OP_UNSPECIFIED)
        );
        assert!(orq.on_atomic_response(&ar).is_ok());
        let cr = commit::ResponseRepr {
            request_id: 2,
            status: Status::Success,
        };
        assert_eq!(
            orq.on_commit_response(&commit::ResponseRepr {
                request_id: 5,
                ..cr
            }),
            Err(error::rdmap::OP_UNSPECIFIED)
        );
        assert!(orq.on_commit_response(&cr).is_ok());
        assert!(orq.is_empty());
        assert_eq!(
            orq.on_commit_response(&cr),
            Err(error::rdmap::UNEXPECTED_OPCODE)
        );
        assert_eq!(
            orq.on_read_response(9, 0x100, 1, true),
            Err(error::rdmap::UNEXPECTED_OPCODE)
        );
    }

    #[test]
    fn ird_exceeded_is_no_buffer() {
        let mut irq: Irq<2> = RequestQueue::new(8); // clamped to N = 2
        assert!(irq.admit(InboundRequest::Atomic { request_id: 1 }).is_ok());
        assert!(irq.admit(InboundRequest::Commit { request_id: 2 }).is_ok());
        assert_eq!(
            irq.admit(InboundRequest::Atomic { request_id: 3 }),
            Err(error::ddp::U_NO_BUFFER)
        );
        assert_eq!(irq.pop(), Some(InboundRequest::Atomic { request_id: 1 }));
        assert!(irq.admit(InboundRequest::Atomic { request_id: 3 }).is_ok());
        let mut zero: Irq<0> = RequestQueue::new(1);
        assert_eq!(
            zero.admit(InboundRequest::Atomic { request_id: 1 }),
            Err(error::ddp::U_NO_BUFFER)
        );
        assert_eq!(zero.pop(), None);
    }

    proptest! {
        #[test]
        fn fifo_model(ops in proptest::collection::vec(any::<Option<u8>>(), 0..100), limit in 0u32..10) {
            let mut q: RequestQueue<u8, 6> = RequestQueue::new(limit);
            let mut model = std::collections::VecDeque::new();
            let cap = (limit as usize).min(6);
            for op in ops {
                match op {
                    Some(v) => {
                        let ok = q.push(v).is_ok();
                        prop_assert_eq!(ok, model.len() < cap);
                        if ok { model.push_back(v); }
                    }
                    None => prop_assert_eq!(q.pop(), model.pop_front()),
                }
                prop_assert_eq!(q.len(), model.len());
                prop_assert_eq!(q.front().copied(), model.front().copied());
            }
        }
    }
}
