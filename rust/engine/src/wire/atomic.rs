// SPDX-License-Identifier: GPL-2.0
//! Atomic Operation Request and Response headers (RFC 7306 sections 5.2.1
//! and 5.2.2, figures 4 and 6; appendix A.1 and A.2).
//!
//! ```text
//! Request (52 octets after the untagged DDP header, QN 1)
//! 0..4    Reserved (28 bits) | AOpCode (4 bits)
//! 4..8    Request Identifier
//! 8..12   Remote STag
//! 12..20  Remote Tagged Offset
//! 20..28  Add or Swap Data
//! 28..36  Add or Swap Mask
//! 36..44  Compare Data
//! 44..52  Compare Mask
//!
//! Response (12 octets after the untagged DDP header, QN 3)
//! 0..4    Original Request Identifier
//! 4..12   Original Remote Data Value
//! ```
//!
//! RFC 7306 section 4 says the Atomic Response "RDMAP header" is 32 bytes;
//! figure 6 and appendix A.2 show 12 octets, and 32 is what the whole frame
//! header comes to when the MPA length (2) and DDP header (18) are counted.
//! The figure is what goes on the wire, so the header here is 12 octets.

use super::{be, Field, MALFORMED};
use crate::error::TermError;

/// Atomic Request header octets.
pub const REQUEST_LEN: usize = 52;
/// Atomic Response header octets.
pub const RESPONSE_LEN: usize = 12;

mod field {
    use super::Field;

    pub(super) const AOPCODE_WORD: Field = 0..4;
    pub(super) const REQUEST_ID: Field = 4..8;
    pub(super) const STAG: Field = 8..12;
    pub(super) const TO: Field = 12..20;
    pub(super) const ADD_SWAP: Field = 20..28;
    pub(super) const ADD_SWAP_MASK: Field = 28..36;
    pub(super) const COMPARE: Field = 36..44;
    pub(super) const COMPARE_MASK: Field = 44..52;

    pub(super) const ORIG_REQUEST_ID: Field = 0..4;
    pub(super) const ORIG_VALUE: Field = 4..12;
}

const MASK_AOPCODE: u32 = 0xF;

/// Atomic Operation Code (RFC 7306 figure 5, section 10.1).
///
/// Only FetchAdd (0000b) and CmpSwap (0010b) are defined. Swap (0001b)
/// existed in draft-ietf-storm-rdmap-ext-03 and is "Reserved" in the RFC's
/// registry; it and every other value parse as [`AtomicOp::Unsupported`]
/// so the responder can answer with the RFC's error (see
/// `crate::rdmap::atomic_execute`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AtomicOp {
    /// Masked fetch-and-add (RFC 7306 section 5.1.1).
    FetchAdd,
    /// Masked compare-and-swap (RFC 7306 section 5.1.2).
    CmpSwap,
    /// Any other 4-bit code.
    Unsupported(u8),
}

impl AtomicOp {
    /// FetchAdd's code.
    pub const FETCH_ADD: u8 = 0b0000;
    /// Swap's code in draft-03, reserved in RFC 7306.
    pub const DRAFT_SWAP: u8 = 0b0001;
    /// CmpSwap's code.
    pub const CMP_SWAP: u8 = 0b0010;

    /// From the 4-bit field.
    #[inline]
    pub const fn from_bits(v: u8) -> Self {
        match v & 0xF {
            Self::FETCH_ADD => Self::FetchAdd,
            Self::CMP_SWAP => Self::CmpSwap,
            other => Self::Unsupported(other),
        }
    }

    /// The 4-bit field.
    #[inline]
    pub const fn to_bits(self) -> u8 {
        match self {
            Self::FetchAdd => Self::FETCH_ADD,
            Self::CmpSwap => Self::CMP_SWAP,
            Self::Unsupported(v) => v & 0xF,
        }
    }
}

/// View of an Atomic Request header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Request<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Request<T> {
    /// Wraps without a length check.
    pub const fn new_unchecked(buffer: T) -> Self {
        Self { buffer }
    }

    /// Wraps and checks the message is exactly 52 octets (RFC 7306 figure 3:
    /// no ULP payload is allowed).
    pub fn new_checked(buffer: T) -> Result<Self, TermError> {
        if buffer.as_ref().len() != REQUEST_LEN {
            return Err(MALFORMED);
        }
        Ok(Self { buffer })
    }

    /// AOpCode; the 28 reserved bits are ignored on receive.
    #[inline]
    pub fn op(&self) -> AtomicOp {
        let w = be::u32_at(self.buffer.as_ref(), field::AOPCODE_WORD);
        AtomicOp::from_bits((w & MASK_AOPCODE) as u8)
    }

    /// Request Identifier.
    #[inline]
    pub fn request_id(&self) -> u32 {
        be::u32_at(self.buffer.as_ref(), field::REQUEST_ID)
    }

    /// Remote STag.
    #[inline]
    pub fn stag(&self) -> u32 {
        be::u32_at(self.buffer.as_ref(), field::STAG)
    }

    /// Remote Tagged Offset.
    #[inline]
    pub fn to(&self) -> u64 {
        be::u64_at(self.buffer.as_ref(), field::TO)
    }

    /// Add or Swap Data.
    #[inline]
    pub fn add_swap(&self) -> u64 {
        be::u64_at(self.buffer.as_ref(), field::ADD_SWAP)
    }

    /// Add or Swap Mask.
    #[inline]
    pub fn add_swap_mask(&self) -> u64 {
        be::u64_at(self.buffer.as_ref(), field::ADD_SWAP_MASK)
    }

    /// Compare Data.
    #[inline]
    pub fn compare(&self) -> u64 {
        be::u64_at(self.buffer.as_ref(), field::COMPARE)
    }

    /// Compare Mask.
    #[inline]
    pub fn compare_mask(&self) -> u64 {
        be::u64_at(self.buffer.as_ref(), field::COMPARE_MASK)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Request<T> {
    /// Sets the AOpCode word (reserved bits zero).
    #[inline]
    pub fn set_op(&mut self, op: AtomicOp) {
        be::set_u32(
            self.buffer.as_mut(),
            field::AOPCODE_WORD,
            u32::from(op.to_bits()),
        );
    }

    /// Sets the Request Identifier.
    #[inline]
    pub fn set_request_id(&mut self, v: u32) {
        be::set_u32(self.buffer.as_mut(), field::REQUEST_ID, v);
    }

    /// Sets the Remote STag.
    #[inline]
    pub fn set_stag(&mut self, v: u32) {
        be::set_u32(self.buffer.as_mut(), field::STAG, v);
    }

    /// Sets the Remote TO.
    #[inline]
    pub fn set_to(&mut self, v: u64) {
        be::set_u64(self.buffer.as_mut(), field::TO, v);
    }

    /// Sets Add or Swap Data.
    #[inline]
    pub fn set_add_swap(&mut self, v: u64) {
        be::set_u64(self.buffer.as_mut(), field::ADD_SWAP, v);
    }

    /// Sets Add or Swap Mask.
    #[inline]
    pub fn set_add_swap_mask(&mut self, v: u64) {
        be::set_u64(self.buffer.as_mut(), field::ADD_SWAP_MASK, v);
    }

    /// Sets Compare Data.
    #[inline]
    pub fn set_compare(&mut self, v: u64) {
        be::set_u64(self.buffer.as_mut(), field::COMPARE, v);
    }

    /// Sets Compare Mask.
    #[inline]
    pub fn set_compare_mask(&mut self, v: u64) {
        be::set_u64(self.buffer.as_mut(), field::COMPARE_MASK, v);
    }
}

/// A parsed Atomic Request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RequestRepr {
    /// AOpCode.
    pub op: AtomicOp,
    /// Request Identifier, echoed in the response.
    pub request_id: u32,
    /// Remote STag.
    pub stag: u32,
    /// Remote TO (must be 64-bit aligned).
    pub to: u64,
    /// Add Data (FetchAdd) or Swap Data (CmpSwap).
    pub add_swap: u64,
    /// Add Mask (FetchAdd) or Swap Mask (CmpSwap).
    pub add_swap_mask: u64,
    /// Compare Data (CmpSwap; zero otherwise).
    pub compare: u64,
    /// Compare Mask (CmpSwap; all ones otherwise).
    pub compare_mask: u64,
}

impl RequestRepr {
    /// A FetchAdd request with the fields RFC 7306 says to send for unused
    /// ones (Compare Data 0, Compare Mask all ones).
    pub const fn fetch_add(request_id: u32, stag: u32, to: u64, add: u64, add_mask: u64) -> Self {
        Self {
            op: AtomicOp::FetchAdd,
            request_id,
            stag,
            to,
            add_swap: add,
            add_swap_mask: add_mask,
            compare: 0,
            compare_mask: u64::MAX,
        }
    }

    /// A CmpSwap request.
    pub const fn cmp_swap(
        request_id: u32,
        stag: u32,
        to: u64,
        swap: u64,
        swap_mask: u64,
        compare: u64,
        compare_mask: u64,
    ) -> Self {
        Self {
            op: AtomicOp::CmpSwap,
            request_id,
            stag,
            to,
            add_swap: swap,
            add_swap_mask: swap_mask,
            compare,
            compare_mask,
        }
    }

    /// Parses a checked view.
    pub fn parse<T: AsRef<[u8]>>(v: &Request<T>) -> Self {
        Self {
            op: v.op(),
            request_id: v.request_id(),
            stag: v.stag(),
            to: v.to(),
            add_swap: v.add_swap(),
            add_swap_mask: v.add_swap_mask(),
            compare: v.compare(),
            compare_mask: v.compare_mask(),
        }
    }

    /// Header octets.
    #[inline]
    pub const fn buffer_len(&self) -> usize {
        REQUEST_LEN
    }

    /// Writes the header.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, v: &mut Request<T>) {
        v.set_op(self.op);
        v.set_request_id(self.request_id);
        v.set_stag(self.stag);
        v.set_to(self.to);
        v.set_add_swap(self.add_swap);
        v.set_add_swap_mask(self.add_swap_mask);
        v.set_compare(self.compare);
        v.set_compare_mask(self.compare_mask);
    }
}

/// View of an Atomic Response header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Response<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Response<T> {
    /// Wraps without a length check.
    pub const fn new_unchecked(buffer: T) -> Self {
        Self { buffer }
    }

    /// Wraps and checks the message is exactly 12 octets.
    pub fn new_checked(buffer: T) -> Result<Self, TermError> {
        if buffer.as_ref().len() != RESPONSE_LEN {
            return Err(MALFORMED);
        }
        Ok(Self { buffer })
    }

    /// Original Request Identifier.
    #[inline]
    pub fn request_id(&self) -> u32 {
        be::u32_at(self.buffer.as_ref(), field::ORIG_REQUEST_ID)
    }

    /// Original Remote Data Value.
    #[inline]
    pub fn original(&self) -> u64 {
        be::u64_at(self.buffer.as_ref(), field::ORIG_VALUE)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Response<T> {
    /// Sets the Original Request Identifier.
    #[inline]
    pub fn set_request_id(&mut self, v: u32) {
        be::set_u32(self.buffer.as_mut(), field::ORIG_REQUEST_ID, v);
    }

    /// Sets the Original Remote Data Value.
    #[inline]
    pub fn set_original(&mut self, v: u64) {
        be::set_u64(self.buffer.as_mut(), field::ORIG_VALUE, v);
    }
}

/// A parsed Atomic Response.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ResponseRepr {
    /// Original Request Identifier.
    pub request_id: u32,
    /// Original Remote Data Value.
    pub original: u64,
}

impl ResponseRepr {
    /// Parses a checked view.
    pub fn parse<T: AsRef<[u8]>>(v: &Response<T>) -> Self {
        Self {
            request_id: v.request_id(),
            original: v.original(),
        }
    }

    /// Header octets.
    #[inline]
    pub const fn buffer_len(&self) -> usize {
        RESPONSE_LEN
    }

    /// Writes the header.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, v: &mut Response<T>) {
        v.set_request_id(self.request_id);
        v.set_original(self.original);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    // RFC 7306 figure 4, CmpSwap (AOpCode 0010b), request id 7, STag
    // 0x00ABCDEF, TO 0x1000, swap 0x1111.., swap mask all ones, compare
    // 0x2222.., compare mask 0xFFFF_FFFF_0000_0000.
    const REQ: [u8; 52] = [
        0, 0, 0, 0x02, 0, 0, 0, 7, 0x00, 0xAB, 0xCD, 0xEF, 0, 0, 0, 0, 0, 0, 0x10, 0x00, 0x11,
        0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF,
        0x22, 0x22, 0x22, 0x22, 0x22, 0x22, 0x22, 0x22, 0xFF, 0xFF, 0xFF, 0xFF, 0, 0, 0, 0,
    ];

    #[test]
    fn request_golden() {
        let r = RequestRepr::parse(&Request::new_checked(&REQ[..]).unwrap());
        assert_eq!(
            r,
            RequestRepr::cmp_swap(
                7,
                0x00AB_CDEF,
                0x1000,
                0x1111_1111_1111_1111,
                u64::MAX,
                0x2222_2222_2222_2222,
                0xFFFF_FFFF_0000_0000
            )
        );
        let mut out = [0xEEu8; 52];
        r.emit(&mut Request::new_unchecked(&mut out[..]));
        assert_eq!(out, REQ);
        assert!(Request::new_checked(&REQ[..51]).is_err());
    }

    #[test]
    fn reserved_bits_ignored_and_aopcodes() {
        let mut b = REQ;
        b[0] = 0xFF;
        b[3] = 0xF0; // reserved bits set, AOpCode FetchAdd
        assert_eq!(
            Request::new_checked(&b[..]).unwrap().op(),
            AtomicOp::FetchAdd
        );
        b[3] = 0x01; // draft-03 Swap
        assert_eq!(
            Request::new_checked(&b[..]).unwrap().op(),
            AtomicOp::Unsupported(AtomicOp::DRAFT_SWAP)
        );
        for v in 0..16u8 {
            assert_eq!(AtomicOp::from_bits(v).to_bits(), v);
        }
    }

    #[test]
    fn response_golden() {
        // RFC 7306 figure 6: request id 7, original 0x0123456789ABCDEF.
        let b = [0, 0, 0, 7, 0x01, 0x23, 0x45, 0x67, 0x89, 0xAB, 0xCD, 0xEF];
        let r = ResponseRepr::parse(&Response::new_checked(&b[..]).unwrap());
        assert_eq!(
            r,
            ResponseRepr {
                request_id: 7,
                original: 0x0123_4567_89AB_CDEF
            }
        );
        let mut out = [0u8; 12];
        r.emit(&mut Response::new_unchecked(&mut out[..]));
        assert_eq!(out, b);
        assert!(Response::new_checked(&[0u8; 32][..]).is_err());
    }

    proptest! {
        #[test]
        fn request_round_trip(op in 0u8..16, id: u32, stag: u32, to: u64, a: u64, am: u64, c: u64, cm: u64) {
            let r = RequestRepr {
                op: AtomicOp::from_bits(op), request_id: id, stag, to,
                add_swap: a, add_swap_mask: am, compare: c, compare_mask: cm,
            };
            let mut b = [0u8; REQUEST_LEN];
            r.emit(&mut Request::new_unchecked(&mut b[..]));
            prop_assert_eq!(RequestRepr::parse(&Request::new_checked(&b[..]).unwrap()), r);
        }

        #[test]
        fn response_round_trip(request_id: u32, original: u64) {
            let r = ResponseRepr { request_id, original };
            let mut b = [0u8; RESPONSE_LEN];
            r.emit(&mut Response::new_unchecked(&mut b[..]));
            prop_assert_eq!(ResponseRepr::parse(&Response::new_checked(&b[..]).unwrap()), r);
        }
    }
}
