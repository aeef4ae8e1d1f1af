// SPDX-License-Identifier: GPL-2.0
//! RDMAP control field, opcodes and the RDMA Read Request header
//! (RFC 5040 section 4, RFC 7306 section 4, draft-talpey-rdma-commit-00
//! section 4.1).
//!
//! The RDMAP control field is DDP's first RsvdULP octet:
//!
//! ```text
//!  0 1 2 3 4 5 6 7
//! +-+-+-+-+-+-+-+-+
//! | RV|R|  Opcode |   RV = 01b; R reserved; Opcode 5 bits
//! +-+-+-+-+-+-+-+-+
//! ```
//!
//! RFC 5040 and RFC 7306 (figure 1) draw a 2-bit Rsv and a 4-bit opcode;
//! the RDMA Commit draft (its figure 1 and the 5-digit opcodes 01100b and
//! 01101b) widens the opcode to 5 bits taken from the low Rsv bit. Every
//! defined opcode has that bit clear, so the octets are identical to what
//! Linux siw (`RDMAP_MASK_OPCODE = 0x0f`) sends and reads; a set bit 4
//! just names an opcode nobody defines (Unexpected OpCode). The remaining
//! reserved bit is sent as zero and ignored on receive.

use super::{be, Field, MALFORMED};
use crate::error::TermError;

/// The only RDMAP version (RFC 5040 section 4.1: RV = 01b).
pub const RDMAP_VERSION: u8 = 1;

const MASK_RV: u8 = 0xC0;
const SHIFT_RV: u8 = 6;
const MASK_OPCODE: u8 = 0x1F;

/// The RDMAP control octet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Control {
    /// RV (2 bits).
    pub version: u8,
    /// Opcode (5 bits, not necessarily a defined one).
    pub opcode: u8,
}

impl Control {
    /// Control octet for `op` with RV = 1.
    #[inline]
    pub const fn new(op: Opcode) -> Self {
        Self {
            version: RDMAP_VERSION,
            opcode: op as u8,
        }
    }

    /// Splits the octet; the reserved bit is ignored.
    #[inline]
    pub const fn from_byte(b: u8) -> Self {
        Self {
            version: (b & MASK_RV) >> SHIFT_RV,
            opcode: b & MASK_OPCODE,
        }
    }

    /// The octet, reserved bit zero.
    #[inline]
    pub const fn to_byte(self) -> u8 {
        ((self.version << SHIFT_RV) & MASK_RV) | (self.opcode & MASK_OPCODE)
    }
}

/// RDMAP message opcodes: RFC 5040 section 4.2 (0-7), RFC 7306 section 4.1
/// figure 2 (8-11) and draft-talpey-rdma-commit-00 section 4.1 (12, 13).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Opcode {
    /// RDMA Write (0000b).
    Write = 0,
    /// RDMA Read Request (0001b).
    ReadRequest = 1,
    /// RDMA Read Response (0010b).
    ReadResponse = 2,
    /// Send (0011b).
    Send = 3,
    /// Send with Invalidate (0100b).
    SendInvalidate = 4,
    /// Send with Solicited Event (0101b).
    SendSe = 5,
    /// Send with Solicited Event and Invalidate (0110b).
    SendSeInvalidate = 6,
    /// Terminate (0111b).
    Terminate = 7,
    /// Immediate Data (1000b, RFC 7306).
    ImmediateData = 8,
    /// Immediate Data with Solicited Event (1001b, RFC 7306).
    ImmediateDataSe = 9,
    /// Atomic Request (1010b, RFC 7306).
    AtomicRequest = 10,
    /// Atomic Response (1011b, RFC 7306).
    AtomicResponse = 11,
    /// RDMA Commit Request (01100b, commit draft).
    CommitRequest = 12,
    /// RDMA Commit Response (01101b, commit draft).
    CommitResponse = 13,
}

/// Untagged queue numbers (RFC 5040 section 5.1, RFC 7306 section 10.2).
pub mod qn {
    /// Send, Send variants and Immediate Data.
    pub const SEND: u32 = 0;
    /// RDMA Read Request, Atomic Request, Commit Request.
    pub const READ_REQUEST: u32 = 1;
    /// Terminate.
    pub const TERMINATE: u32 = 2;
    /// Atomic Response, Commit Response (RFC 7306).
    pub const RESPONSE: u32 = 3;
    /// Number of queues.
    pub const COUNT: usize = 4;
}

impl Opcode {
    /// The opcode for a 5-bit value, `None` if undefined.
    pub const fn from_u8(v: u8) -> Option<Self> {
        Some(match v {
            0 => Self::Write,
            1 => Self::ReadRequest,
            2 => Self::ReadResponse,
            3 => Self::Send,
            4 => Self::SendInvalidate,
            5 => Self::SendSe,
            6 => Self::SendSeInvalidate,
            7 => Self::Terminate,
            8 => Self::ImmediateData,
            9 => Self::ImmediateDataSe,
            10 => Self::AtomicRequest,
            11 => Self::AtomicResponse,
            12 => Self::CommitRequest,
            13 => Self::CommitResponse,
            _ => return None,
        })
    }

    /// Whether the message uses the tagged buffer model (RFC 5040 4.2).
    #[inline]
    pub const fn tagged(self) -> bool {
        matches!(self, Self::Write | Self::ReadResponse)
    }

    /// The untagged queue the message must use, `None` for tagged ones
    /// (RFC 5040 4.2 table, RFC 7306 figure 2, commit draft table 1).
    pub const fn queue(self) -> Option<u32> {
        match self {
            Self::Write | Self::ReadResponse => None,
            Self::Send
            | Self::SendInvalidate
            | Self::SendSe
            | Self::SendSeInvalidate
            | Self::ImmediateData
            | Self::ImmediateDataSe => Some(qn::SEND),
            Self::ReadRequest | Self::AtomicRequest | Self::CommitRequest => Some(qn::READ_REQUEST),
            Self::Terminate => Some(qn::TERMINATE),
            Self::AtomicResponse | Self::CommitResponse => Some(qn::RESPONSE),
        }
    }

    /// Whether DDP's RsvdULP octets 1..5 carry an Invalidate STag (Send
    /// with Invalidate variants; the Commit draft also allows one).
    #[inline]
    pub const fn carries_invalidate_stag(self) -> bool {
        matches!(
            self,
            Self::SendInvalidate | Self::SendSeInvalidate | Self::CommitRequest
        )
    }

    /// Whether the message asks for a Solicited Event.
    #[inline]
    pub const fn solicited(self) -> bool {
        matches!(
            self,
            Self::SendSe | Self::SendSeInvalidate | Self::ImmediateDataSe
        )
    }

    /// Whether the message must be a single DDP segment (L = 1, MO = 0):
    /// everything that carries a fixed RDMAP header rather than ULP data.
    #[inline]
    pub const fn single_segment(self) -> bool {
        matches!(
            self,
            Self::ReadRequest
                | Self::Terminate
                | Self::ImmediateData
                | Self::ImmediateDataSe
                | Self::AtomicRequest
                | Self::AtomicResponse
                | Self::CommitRequest
                | Self::CommitResponse
        )
    }

    /// Fixed RDMAP header octets after the DDP header (minimum for the
    /// variable-length Terminate and Commit Request).
    pub const fn header_len(self) -> usize {
        match self {
            Self::ReadRequest => READ_REQUEST_LEN,
            Self::Terminate => TERMINATE_CONTROL_LEN,
            Self::ImmediateData | Self::ImmediateDataSe => super::immediate::HEADER_LEN,
            Self::AtomicRequest => super::atomic::REQUEST_LEN,
            Self::AtomicResponse => super::atomic::RESPONSE_LEN,
            Self::CommitRequest => super::commit::REQUEST_MIN_LEN,
            Self::CommitResponse => super::commit::RESPONSE_LEN,
            _ => 0,
        }
    }
}

/// RDMA Read Request header length (RFC 5040 section 4.4).
pub const READ_REQUEST_LEN: usize = 28;

/// Terminate Control length, the fixed part of a Terminate header (RFC
/// 5040 section 4.8); [`super::terminate`] builds on it, so it lives here
/// with the other RDMAP header lengths the receive path needs.
pub const TERMINATE_CONTROL_LEN: usize = 4;

mod field {
    use super::Field;

    pub(super) const SINK_STAG: Field = 0..4;
    pub(super) const SINK_TO: Field = 4..12;
    pub(super) const SIZE: Field = 12..16;
    pub(super) const SRC_STAG: Field = 16..20;
    pub(super) const SRC_TO: Field = 20..28;
}

/// View of the RDMA Read Request header (RFC 5040 section 4.4), the
/// octets right after the untagged DDP header; siw's `iwarp_rdma_rreq`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReadRequest<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> ReadRequest<T> {
    /// Wraps without a length check.
    pub const fn new_unchecked(buffer: T) -> Self {
        Self { buffer }
    }

    /// Wraps and checks the 28 octets are there.
    pub fn new_checked(buffer: T) -> Result<Self, TermError> {
        if buffer.as_ref().len() < READ_REQUEST_LEN {
            return Err(MALFORMED);
        }
        Ok(Self { buffer })
    }

    /// Data Sink STag (the requester's buffer).
    #[inline]
    pub fn sink_stag(&self) -> u32 {
        be::u32_at(self.buffer.as_ref(), field::SINK_STAG)
    }

    /// Data Sink Tagged Offset.
    #[inline]
    pub fn sink_to(&self) -> u64 {
        be::u64_at(self.buffer.as_ref(), field::SINK_TO)
    }

    /// RDMA Read Message Size.
    #[inline]
    pub fn size(&self) -> u32 {
        be::u32_at(self.buffer.as_ref(), field::SIZE)
    }

    /// Data Source STag (the responder's buffer).
    #[inline]
    pub fn src_stag(&self) -> u32 {
        be::u32_at(self.buffer.as_ref(), field::SRC_STAG)
    }

    /// Data Source Tagged Offset.
    #[inline]
    pub fn src_to(&self) -> u64 {
        be::u64_at(self.buffer.as_ref(), field::SRC_TO)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> ReadRequest<T> {
    /// Sets the Data Sink STag.
    #[inline]
    pub fn set_sink_stag(&mut self, v: u32) {
        be::set_u32(self.buffer.as_mut(), field::SINK_STAG, v);
    }

    /// Sets the Data Sink TO.
    #[inline]
    pub fn set_sink_to(&mut self, v: u64) {
        be::set_u64(self.buffer.as_mut(), field::SINK_TO, v);
    }

    /// Sets the RDMA Read Message Size.
    #[inline]
    pub fn set_size(&mut self, v: u32) {
        be::set_u32(self.buffer.as_mut(), field::SIZE, v);
    }

    /// Sets the Data Source STag.
    #[inline]
    pub fn set_src_stag(&mut self, v: u32) {
        be::set_u32(self.buffer.as_mut(), field::SRC_STAG, v);
    }

    /// Sets the Data Source TO.
    #[inline]
    pub fn set_src_to(&mut self, v: u64) {
        be::set_u64(self.buffer.as_mut(), field::SRC_TO, v);
    }
}

/// A parsed RDMA Read Request header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ReadRequestRepr {
    /// Data Sink STag.
    pub sink_stag: u32,
    /// Data Sink TO.
    pub sink_to: u64,
    /// RDMA Read Message Size.
    pub size: u32,
    /// Data Source STag.
    pub src_stag: u32,
    /// Data Source TO.
    pub src_to: u64,
}

impl ReadRequestRepr {
    /// Parses a checked view.
    pub fn parse<T: AsRef<[u8]>>(v: &ReadRequest<T>) -> Self {
        Self {
            sink_stag: v.sink_stag(),
            sink_to: v.sink_to(),
            size: v.size(),
            src_stag: v.src_stag(),
            src_to: v.src_to(),
        }
    }

    /// Header octets.
    #[inline]
    pub const fn buffer_len(&self) -> usize {
        READ_REQUEST_LEN
    }

    /// Writes the header.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, v: &mut ReadRequest<T>) {
        v.set_sink_stag(self.sink_stag);
        v.set_sink_to(self.sink_to);
        v.set_size(self.size);
        v.set_src_stag(self.src_stag);
        v.set_src_to(self.src_to);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn opcode_values_match_specs() {
        // RFC 5040 4.2, RFC 7306 figure 2 / section 10, commit draft table 1.
        let table = [
            (0b0000, Opcode::Write, None),
            (0b0001, Opcode::ReadRequest, Some(1)),
            (0b0010, Opcode::ReadResponse, None),
            (0b0011, Opcode::Send, Some(0)),
            (0b0100, Opcode::SendInvalidate, Some(0)),
            (0b0101, Opcode::SendSe, Some(0)),
            (0b0110, Opcode::SendSeInvalidate, Some(0)),
            (0b0111, Opcode::Terminate, Some(2)),
            (0b1000, Opcode::ImmediateData, Some(0)),
            (0b1001, Opcode::ImmediateDataSe, Some(0)),
            (0b1010, Opcode::AtomicRequest, Some(1)),
            (0b1011, Opcode::AtomicResponse, Some(3)),
            (0b01100, Opcode::CommitRequest, Some(1)),
            (0b01101, Opcode::CommitResponse, Some(3)),
        ];
        for (v, op, q) in table {
            assert_eq!(Opcode::from_u8(v), Some(op));
            assert_eq!(op as u8, v);
            assert_eq!(op.queue(), q);
            assert_eq!(op.tagged(), q.is_none());
        }
        for v in 14..=0x1F {
            assert_eq!(Opcode::from_u8(v), None);
        }
    }

    #[test]
    fn control_octet() {
        // RV=01, opcode Read Request -> 0x41; Commit Response -> 0x4D.
        assert_eq!(Control::new(Opcode::ReadRequest).to_byte(), 0x41);
        assert_eq!(Control::new(Opcode::CommitResponse).to_byte(), 0x4D);
        // The reserved bit (0x20) is ignored; opcode bit 4 (0x10) is kept.
        assert_eq!(
            Control::from_byte(0x61),
            Control {
                version: 1,
                opcode: 1
            }
        );
        assert_eq!(
            Control::from_byte(0x51),
            Control {
                version: 1,
                opcode: 0x11
            }
        );
        assert_eq!(Control::from_byte(0x81).version, 2);
    }

    // RFC 5040 section 4.4 figure: sink STag 0x0A0B0C0D, sink TO
    // 0x1000, size 0x2000, source STag 0x01020304, source TO
    // 0xFFFF_0000_0000_0008.
    const RREQ: [u8; 28] = [
        0x0A, 0x0B, 0x0C, 0x0D, 0, 0, 0, 0, 0, 0, 0x10, 0x00, 0, 0, 0x20, 0x00, 0x01, 0x02, 0x03,
        0x04, 0xFF, 0xFF, 0, 0, 0, 0, 0, 0x08,
    ];

    #[test]
    fn read_request_golden() {
        let r = ReadRequestRepr::parse(&ReadRequest::new_checked(&RREQ[..]).unwrap());
        assert_eq!(
            r,
            ReadRequestRepr {
                sink_stag: 0x0A0B_0C0D,
                sink_to: 0x1000,
                size: 0x2000,
                src_stag: 0x0102_0304,
                src_to: 0xFFFF_0000_0000_0008
            }
        );
        let mut out = [0u8; 28];
        r.emit(&mut ReadRequest::new_unchecked(&mut out[..]));
        assert_eq!(out, RREQ);
        assert!(ReadRequest::new_checked(&RREQ[..27]).is_err());
    }

    proptest! {
        #[test]
        fn read_request_round_trip(sink_stag: u32, sink_to: u64, size: u32, src_stag: u32, src_to: u64) {
            let r = ReadRequestRepr { sink_stag, sink_to, size, src_stag, src_to };
            let mut b = [0u8; READ_REQUEST_LEN];
            r.emit(&mut ReadRequest::new_unchecked(&mut b[..]));
            prop_assert_eq!(ReadRequestRepr::parse(&ReadRequest::new_checked(&b[..]).unwrap()), r);
        }

        #[test]
        fn control_round_trip(version in 0u8..4, opcode in 0u8..32) {
            let c = Control { version, opcode };
            prop_assert_eq!(Control::from_byte(c.to_byte()), c);
        }
    }
}
