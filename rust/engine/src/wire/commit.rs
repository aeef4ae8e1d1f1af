// SPDX-License-Identifier: GPL-2.0
//! RDMA Commit Request and Response (draft-talpey-rdma-commit-00 sections
//! 4.2.1 and 4.2.2, appendix A).
//!
//! ```text
//! Request (after the untagged DDP header, QN 1)
//! 0..4    Request Identifier
//! 4..8    Data Sink STag      \
//! 8..12   Data Sink Length     | region 0
//! 12..20  Data Sink TO        /
//! 20..36  further regions, same 16-octet layout ("..." in figure 2)
//!
//! Response (after the untagged DDP header, QN 3)
//! 0..4    Original Request Identifier
//! 4..8    Status
//! ```
//!
//! The draft leaves the "..." open ("additional region identifiers ...
//! TBD") and says commit "act[s] on a list of { handle, offset, length }
//! regions"; rsiw encodes extra regions exactly like the first one, so the
//! message length is 4 + 16 * n with n >= 1. The draft's appendix figures
//! omit the DDP Message Offset word; RFC 5041's untagged header always has
//! it, and rsiw keeps it.
//!
//! Status values are "to be specified" by the draft (zero is success);
//! rsiw's are [`Status`]. Per the draft (section 4.5), protection and
//! durability failures of a well-formed request are reported in the status,
//! not by a Terminate: the data is not lost and the stream stays up.

use super::{be, Field, MALFORMED};
use crate::error::TermError;

/// Octets before the first region.
pub const ID_LEN: usize = 4;
/// Octets per region.
pub const REGION_LEN: usize = 16;
/// Smallest request: id and one region.
pub const REQUEST_MIN_LEN: usize = ID_LEN + REGION_LEN;
/// Response octets.
pub const RESPONSE_LEN: usize = 8;
/// Most regions rsiw processes in one request; more get [`Status::Limit`].
pub const MAX_REGIONS: usize = 8;

mod field {
    use super::Field;

    pub(super) const REQUEST_ID: Field = 0..4;
    // Inside a region.
    pub(super) const R_STAG: Field = 0..4;
    pub(super) const R_LEN: Field = 4..8;
    pub(super) const R_TO: Field = 8..16;

    pub(super) const ORIG_REQUEST_ID: Field = 0..4;
    pub(super) const STATUS: Field = 4..8;
}

/// Commit Response status (rsiw's values; the draft defines only 0).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Status {
    /// 0: every byte of every region is durable.
    Success,
    /// 1: the responder could not make the data durable (flush or device
    /// failure); the data is still placed.
    NotDurable,
    /// 2: a region lies outside its STag's bounds, or TO + length wraps.
    Bounds,
    /// 3: a region's STag is invalid, not associated with this stream, or
    /// lacks remote write access.
    Access,
    /// 4: more regions than the responder processes ([`MAX_REGIONS`]).
    Limit,
    /// Any other value received from a peer.
    Other(u32),
}

impl Status {
    /// The 32-bit wire value.
    pub const fn to_u32(self) -> u32 {
        match self {
            Self::Success => 0,
            Self::NotDurable => 1,
            Self::Bounds => 2,
            Self::Access => 3,
            Self::Limit => 4,
            Self::Other(v) => v,
        }
    }

    /// From the wire value.
    pub const fn from_u32(v: u32) -> Self {
        match v {
            0 => Self::Success,
            1 => Self::NotDurable,
            2 => Self::Bounds,
            3 => Self::Access,
            4 => Self::Limit,
            v => Self::Other(v),
        }
    }
}

/// One { STag, length, TO } region to commit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Region {
    /// Data Sink STag.
    pub stag: u32,
    /// Data Sink Length.
    pub len: u32,
    /// Data Sink Tagged Offset.
    pub to: u64,
}

impl Region {
    fn parse(b: &[u8]) -> Self {
        Self {
            stag: be::u32_at(b, field::R_STAG),
            len: be::u32_at(b, field::R_LEN),
            to: be::u64_at(b, field::R_TO),
        }
    }

    fn emit(&self, b: &mut [u8]) {
        be::set_u32(b, field::R_STAG, self.stag);
        be::set_u32(b, field::R_LEN, self.len);
        be::set_u64(b, field::R_TO, self.to);
    }
}

/// View of a Commit Request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Request<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Request<T> {
    /// Wraps without a length check.
    pub const fn new_unchecked(buffer: T) -> Self {
        Self { buffer }
    }

    /// Wraps and checks the length is 4 + 16 * n, n >= 1; anything else is
    /// malformed ("Remote Operation Error, unspecified").
    pub fn new_checked(buffer: T) -> Result<Self, TermError> {
        let len = buffer.as_ref().len();
        if len < REQUEST_MIN_LEN || (len - ID_LEN) % REGION_LEN != 0 {
            return Err(MALFORMED);
        }
        Ok(Self { buffer })
    }

    /// Request Identifier.
    #[inline]
    pub fn request_id(&self) -> u32 {
        be::u32_at(self.buffer.as_ref(), field::REQUEST_ID)
    }

    /// Number of regions.
    #[inline]
    pub fn region_count(&self) -> usize {
        self.buffer.as_ref().len().saturating_sub(ID_LEN) / REGION_LEN
    }

    /// The regions, in order.
    pub fn regions(&self) -> impl Iterator<Item = Region> + '_ {
        self.buffer
            .as_ref()
            .get(ID_LEN..)
            .unwrap_or(&[])
            .chunks_exact(REGION_LEN)
            .map(Region::parse)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Request<T> {
    /// Sets the Request Identifier.
    #[inline]
    pub fn set_request_id(&mut self, v: u32) {
        be::set_u32(self.buffer.as_mut(), field::REQUEST_ID, v);
    }

    /// Sets region `i` (ignored if the buffer has no room for it).
    pub fn set_region(&mut self, i: usize, r: &Region) {
        let start = i.saturating_mul(REGION_LEN).saturating_add(ID_LEN);
        if let Some(b) = self
            .buffer
            .as_mut()
            .get_mut(start..start.saturating_add(REGION_LEN))
        {
            r.emit(b);
        }
    }
}

/// A Commit Request with up to [`MAX_REGIONS`] regions (the requester's
/// form; responders validate through the [`Request`] view, which has no
/// limit, and answer [`Status::Limit`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RequestRepr {
    /// Request Identifier.
    pub request_id: u32,
    regions: [Region; MAX_REGIONS],
    count: usize,
}

impl RequestRepr {
    /// A request for 1..=[`MAX_REGIONS`] regions, `None` otherwise.
    pub fn new(request_id: u32, regions: &[Region]) -> Option<Self> {
        if regions.is_empty() || regions.len() > MAX_REGIONS {
            return None;
        }
        let mut r = [Region::default(); MAX_REGIONS];
        for (dst, src) in r.iter_mut().zip(regions) {
            *dst = *src;
        }
        Some(Self {
            request_id,
            regions: r,
            count: regions.len(),
        })
    }

    /// The regions.
    pub fn regions(&self) -> &[Region] {
        self.regions.get(..self.count).unwrap_or(&[])
    }

    /// Parses a checked view; more than [`MAX_REGIONS`] regions is an error.
    pub fn parse<T: AsRef<[u8]>>(v: &Request<T>) -> Result<Self, TermError> {
        if v.region_count() > MAX_REGIONS {
            return Err(MALFORMED);
        }
        let mut regions = [Region::default(); MAX_REGIONS];
        let mut count = 0;
        for (dst, src) in regions.iter_mut().zip(v.regions()) {
            *dst = src;
            count += 1;
        }
        Ok(Self {
            request_id: v.request_id(),
            regions,
            count,
        })
    }

    /// Message octets.
    #[inline]
    pub const fn buffer_len(&self) -> usize {
        ID_LEN + REGION_LEN * self.count
    }

    /// Writes the message.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, v: &mut Request<T>) {
        v.set_request_id(self.request_id);
        for (i, r) in self.regions().iter().enumerate() {
            v.set_region(i, r);
        }
    }
}

/// View of a Commit Response.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Response<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Response<T> {
    /// Wraps without a length check.
    pub const fn new_unchecked(buffer: T) -> Self {
        Self { buffer }
    }

    /// Wraps and checks the message is exactly 8 octets.
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

    /// Status.
    #[inline]
    pub fn status(&self) -> Status {
        Status::from_u32(be::u32_at(self.buffer.as_ref(), field::STATUS))
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Response<T> {
    /// Sets the Original Request Identifier.
    #[inline]
    pub fn set_request_id(&mut self, v: u32) {
        be::set_u32(self.buffer.as_mut(), field::ORIG_REQUEST_ID, v);
    }

    /// Sets the Status.
    #[inline]
    pub fn set_status(&mut self, s: Status) {
        be::set_u32(self.buffer.as_mut(), field::STATUS, s.to_u32());
    }
}

/// A parsed Commit Response.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ResponseRepr {
    /// Original Request Identifier.
    pub request_id: u32,
    /// Status.
    pub status: Status,
}

impl ResponseRepr {
    /// Parses a checked view.
    pub fn parse<T: AsRef<[u8]>>(v: &Response<T>) -> Self {
        Self {
            request_id: v.request_id(),
            status: v.status(),
        }
    }

    /// Message octets.
    #[inline]
    pub const fn buffer_len(&self) -> usize {
        RESPONSE_LEN
    }

    /// Writes the message.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, v: &mut Response<T>) {
        v.set_request_id(self.request_id);
        v.set_status(self.status);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    // Commit draft figure 2: request id 0x55, region STag 0x00001234,
    // length 4096, TO 0x7F00_0000_1000; second region STag 0x99, length 8,
    // TO 0x40.
    const REQ: [u8; 36] = [
        0, 0, 0, 0x55, 0, 0, 0x12, 0x34, 0, 0, 0x10, 0, 0, 0, 0x7F, 0, 0, 0, 0x10, 0, 0, 0, 0,
        0x99, 0, 0, 0, 8, 0, 0, 0, 0, 0, 0, 0, 0x40,
    ];

    #[test]
    fn request_golden() {
        let v = Request::new_checked(&REQ[..]).unwrap();
        assert_eq!(v.region_count(), 2);
        let r = RequestRepr::parse(&v).unwrap();
        let want = [
            Region {
                stag: 0x1234,
                len: 4096,
                to: 0x7F00_0000_1000,
            },
            Region {
                stag: 0x99,
                len: 8,
                to: 0x40,
            },
        ];
        assert_eq!(r, RequestRepr::new(0x55, &want).unwrap());
        let mut out = [0u8; 36];
        r.emit(&mut Request::new_unchecked(&mut out[..]));
        assert_eq!(out, REQ);
    }

    #[test]
    fn request_lengths() {
        assert!(Request::new_checked(&REQ[..20]).is_ok());
        assert!(Request::new_checked(&REQ[..19]).is_err());
        assert!(Request::new_checked(&REQ[..21]).is_err());
        assert!(Request::new_checked(&[0u8; 4][..]).is_err());
        let big = [0u8; ID_LEN + REGION_LEN * (MAX_REGIONS + 1)];
        let v = Request::new_checked(&big[..]).unwrap();
        assert_eq!(v.region_count(), MAX_REGIONS + 1);
        assert!(RequestRepr::parse(&v).is_err());
        assert!(RequestRepr::new(1, &[]).is_none());
    }

    #[test]
    fn response_golden() {
        // Commit draft figure 4 (without the MO the figure omits): id 0x55,
        // status 3 (rsiw: access).
        let b = [0, 0, 0, 0x55, 0, 0, 0, 3];
        let r = ResponseRepr::parse(&Response::new_checked(&b[..]).unwrap());
        assert_eq!(
            r,
            ResponseRepr {
                request_id: 0x55,
                status: Status::Access
            }
        );
        let mut out = [0u8; 8];
        r.emit(&mut Response::new_unchecked(&mut out[..]));
        assert_eq!(out, b);
    }

    fn arb_region() -> impl Strategy<Value = Region> {
        (any::<u32>(), any::<u32>(), any::<u64>()).prop_map(|(stag, len, to)| Region {
            stag,
            len,
            to,
        })
    }

    proptest! {
        #[test]
        fn request_round_trip(id: u32, regions in proptest::collection::vec(arb_region(), 1..=MAX_REGIONS)) {
            let r = RequestRepr::new(id, &regions).unwrap();
            let mut b = [0u8; ID_LEN + REGION_LEN * MAX_REGIONS];
            let len = r.buffer_len();
            r.emit(&mut Request::new_unchecked(&mut b[..len]));
            prop_assert_eq!(RequestRepr::parse(&Request::new_checked(&b[..len]).unwrap()).unwrap(), r);
        }

        #[test]
        fn response_round_trip(request_id: u32, status: u32) {
            let r = ResponseRepr { request_id, status: Status::from_u32(status) };
            prop_assert_eq!(r.status.to_u32(), status);
            let mut b = [0u8; RESPONSE_LEN];
            r.emit(&mut Response::new_unchecked(&mut b[..]));
            prop_assert_eq!(ResponseRepr::parse(&Response::new_checked(&b[..]).unwrap()), r);
        }
    }
}
