// SPDX-License-Identifier: GPL-2.0
//! Segmentation of one DDP message into segments whose ULPDU (DDP header
//! and payload) fits the LLP's MULPDU (RFC 5041 sections 5.1 and 6).
//!
//! Tagged segments carry increasing TOs, untagged ones the same MSN with
//! increasing MOs; only the last has L set. A zero-length message is one
//! empty segment with L set.

use core::ops::Range;

use crate::error::{self, TermError};
use crate::wire::ddp::{Model, Repr, TAGGED_HEADER_LEN, UNTAGGED_HEADER_LEN};

/// Iterator over `(header, payload range within the message)`.
#[derive(Debug, Clone)]
pub struct Segmenter {
    ulp_ctrl: u8,
    first: Model,
    msg_len: usize,
    max_payload: usize,
    offset: usize,
    done: bool,
}

impl Segmenter {
    /// Segments a tagged message of `msg_len` octets placed at `stag`/`to`.
    ///
    /// Errors: MULPDU too small for a header and one octet is a local
    /// error (`ddp::LOCAL_CATA`); a message whose last octet's TO would
    /// pass 2^64 - 1 is `T_TO_WRAP` (RFC 5041 section 7.2).
    pub fn tagged(
        ulp_ctrl: u8,
        stag: u32,
        to: u64,
        msg_len: u32,
        mulpdu: usize,
    ) -> Result<Self, TermError> {
        if msg_len > 0 && to.checked_add(u64::from(msg_len) - 1).is_none() {
            return Err(error::ddp::T_TO_WRAP);
        }
        Self::new(
            ulp_ctrl,
            Model::Tagged { stag, to },
            msg_len,
            mulpdu,
            TAGGED_HEADER_LEN,
        )
    }

    /// Segments an untagged message on `qn` with `msn` (`rsvd_ulp` is
    /// RDMAP's Invalidate STag or 0).
    pub fn untagged(
        ulp_ctrl: u8,
        rsvd_ulp: u32,
        qn: u32,
        msn: u32,
        msg_len: u32,
        mulpdu: usize,
    ) -> Result<Self, TermError> {
        Self::new(
            ulp_ctrl,
            Model::Untagged {
                rsvd_ulp,
                qn,
                msn,
                mo: 0,
            },
            msg_len,
            mulpdu,
            UNTAGGED_HEADER_LEN,
        )
    }

    fn new(
        ulp_ctrl: u8,
        first: Model,
        msg_len: u32,
        mulpdu: usize,
        hdr: usize,
    ) -> Result<Self, TermError> {
        let max_payload = mulpdu
            .checked_sub(hdr)
            .filter(|&m| m > 0)
            .ok_or(error::ddp::LOCAL_CATA)?;
        let msg_len = usize::try_from(msg_len).map_err(|_| error::ddp::LOCAL_CATA)?;
        Ok(Self {
            ulp_ctrl,
            first,
            msg_len,
            max_payload,
            offset: 0,
            done: false,
        })
    }

    /// Number of segments the message takes.
    pub fn segment_count(&self) -> usize {
        self.msg_len.div_ceil(self.max_payload).max(1)
    }
}

impl Iterator for Segmenter {
    type Item = (Repr, Range<usize>);

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        let start = self.offset;
        let left = self.msg_len.saturating_sub(start);
        let len = left.min(self.max_payload);
        let end = start + len;
        let last = end >= self.msg_len;
        // `start` < 2^32 (msg_len is a u32) and, for tagged, to + start
        // cannot wrap (checked in the constructor).
        let model = match self.first {
            Model::Tagged { stag, to } => Model::Tagged {
                stag,
                to: to.wrapping_add(start as u64),
            },
            Model::Untagged {
                rsvd_ulp, qn, msn, ..
            } => Model::Untagged {
                rsvd_ulp,
                qn,
                msn,
                mo: u32::try_from(start).unwrap_or(u32::MAX),
            },
        };
        self.offset = end;
        self.done = last;
        Some((
            Repr {
                last,
                ulp_ctrl: self.ulp_ctrl,
                model,
            },
            start..end,
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::vec::Vec;

    #[test]
    fn tagged_three_segments() {
        let s: Vec<_> = Segmenter::tagged(0x40, 7, 0x1000, 25, 14 + 10)
            .unwrap()
            .collect();
        assert_eq!(s.len(), 3);
        assert_eq!(s[0].1, 0..10);
        assert_eq!(s[2].1, 20..25);
        assert_eq!(
            s[1].0.model,
            Model::Tagged {
                stag: 7,
                to: 0x100A
            }
        );
        assert!(!s[0].0.last && !s[1].0.last && s[2].0.last);
    }

    #[test]
    fn zero_length_is_one_segment() {
        let s: Vec<_> = Segmenter::untagged(0x43, 0, 0, 1, 0, 100)
            .unwrap()
            .collect();
        assert_eq!(s.len(), 1);
        assert!(s[0].0.last);
        assert_eq!(s[0].1, 0..0);
    }

    #[test]
    fn errors() {
        assert_eq!(
            Segmenter::tagged(0, 0, 0, 1, 14).err(),
            Some(error::ddp::LOCAL_CATA)
        );
        assert_eq!(
            Segmenter::untagged(0, 0, 0, 1, 1, 18).err(),
            Some(error::ddp::LOCAL_CATA)
        );
        assert_eq!(
            Segmenter::tagged(0, 0, u64::MAX, 2, 100).err(),
            Some(error::ddp::T_TO_WRAP)
        );
        // The last octet at 2^64 - 1 is not a wrap.
        assert!(Segmenter::tagged(0, 0, u64::MAX, 1, 100).is_ok());
    }

    proptest! {
        #[test]
        fn covers_exactly(len in 0u32..5000, mulpdu in 19usize..600, tagged: bool, to in any::<u64>()) {
            let to = to % (u64::MAX - 5000);
            let seg = if tagged {
                Segmenter::tagged(0x40, 1, to, len, mulpdu).unwrap()
            } else {
                Segmenter::untagged(0x43, 0, 0, 9, len, mulpdu).unwrap()
            };
            let count = seg.segment_count();
            let all: Vec<_> = seg.collect();
            prop_assert_eq!(all.len(), count);
            let mut next = 0usize;
            for (i, (h, r)) in all.iter().enumerate() {
                prop_assert_eq!(r.start, next);
                prop_assert!(h.buffer_len() + r.len() <= mulpdu);
                prop_assert_eq!(h.last, i + 1 == all.len());
                match h.model {
                    Model::Tagged { stag, to: t } => {
                        prop_assert_eq!(stag, 1);
                        prop_assert_eq!(t, to + r.start as u64);
                    }
                    Model::Untagged { msn, mo, .. } => {
                        prop_assert_eq!(msn, 9);
                        prop_assert_eq!(mo as usize, r.start);
                    }
                }
                if i + 1 < all.len() {
                    prop_assert!(!r.is_empty());
                }
                next = r.end;
            }
            prop_assert_eq!(next, len as usize);
        }
    }
}
