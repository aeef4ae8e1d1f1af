// SPDX-License-Identifier: GPL-2.0
//! MPA Request and Reply frames (RFC 5044 section 7.1.1) with the enhanced
//! connection setup data of RFC 6581 (draft-ietf-storm-mpa-peer-connect-05,
//! sections 6 and 9).
//!
//! ```text
//!  0                   1                   2                   3
//!  0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |        Key: "MPA ID Req Frame" or "MPA ID Rep Frame"          |  0..16
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |M|C|R|S| Res   |     Rev       |          PD_Length            | 16..20
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |A|B|        IRD                |C|D|        ORD                | 20..24 (if S)
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! ~                  ULP private data                             ~
//! ```
//!
//! The bit positions match Linux siw (`drivers/infiniband/sw/siw/iwarp.h`):
//! `MPA_RR_FLAG_MARKERS` 0x80, `_CRC` 0x40, `_REJECT` 0x20, `_ENHANCED`
//! 0x10 in byte 16; `MPA_V2_PEER_TO_PEER` 0x8000 and
//! `MPA_V2_ZERO_LENGTH_RTR` 0x4000 in the IRD word, `MPA_V2_RDMA_WRITE_RTR`
//! 0x8000 and `MPA_V2_RDMA_READ_RTR` 0x4000 in the ORD word,
//! `MPA_IRD_ORD_MASK` 0x3FFF.

use core::fmt;

/// The request key, RFC 5044 section 7.1.1: `4D 50 41 20 49 44 20 52 65 71 20 46 72 61 6D 65`.
pub const KEY_REQ: [u8; 16] = *b"MPA ID Req Frame";
/// The reply key: `4D 50 41 20 49 44 20 52 65 70 20 46 72 61 6D 65`.
pub const KEY_REP: [u8; 16] = *b"MPA ID Rep Frame";
/// Length of the fixed part (key, flags, Rev, PD_Length).
pub const HEADER_LEN: usize = 20;
/// RFC 5044 section 7.1.1: PD_Length MUST NOT exceed 512 (siw: `MPA_MAX_PRIVDATA`),
/// RFC 6581 section 6: including the enhanced data.
pub const MAX_PRIVATE_DATA: usize = 512;
/// Length of the RFC 6581 section 9 IRD/ORD word pair.
pub const ENHANCED_LEN: usize = 4;
/// Largest IRD/ORD value; RFC 6581 section 9: all ones means "no automatic
/// IRD/ORD negotiation, the ULP configures them".
pub const IRD_ORD_MASK: u16 = 0x3FFF;
/// Alias of [`IRD_ORD_MASK`] under its meaning in RFC 6581 section 9.
pub const IRD_ORD_NO_AUTO: u16 = IRD_ORD_MASK;

/// MPA revision 1 (RFC 5044).
pub const REV_1: u8 = 1;
/// MPA revision 2 (RFC 6581 section 6: needed for any enhanced feature).
pub const REV_2: u8 = 2;

mod field {
    pub(super) use super::super::Field;

    pub const KEY: Field = 0..16;
    pub const FLAGS: usize = 16;
    pub const REV: usize = 17;
    pub const PD_LEN: Field = 18..20;
    pub const PRIVATE_DATA: usize = 20;

    pub const FLAG_M: u8 = 0x80;
    pub const FLAG_C: u8 = 0x40;
    pub const FLAG_R: u8 = 0x20;
    pub const FLAG_S: u8 = 0x10;
    pub const FLAG_RES: u8 = 0x0F;

    // Enhanced data, relative to the start of the private data.
    pub const IRD: Field = 0..2;
    pub const ORD: Field = 2..4;
    pub const IRD_A: u16 = 0x8000;
    pub const IRD_B: u16 = 0x4000;
    pub const ORD_C: u16 = 0x8000;
    pub const ORD_D: u16 = 0x4000;
}

/// Why a request/reply frame could not be parsed or emitted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Error {
    /// Fewer bytes than the header or than `20 + PD_Length`.
    Truncated,
    /// The key is neither the request nor the reply key (or not the expected one).
    BadKey,
    /// Rev is neither 1 nor 2.
    BadRevision,
    /// PD_Length above 512 (RFC 5044 section 7.1.1).
    PrivateDataTooLong,
    /// S set with rev 2 but fewer than 4 bytes of private data, or IRD/ORD
    /// above 0x3FFF on emit.
    BadEnhanced,
    /// The output buffer is shorter than [`Repr::buffer_len`].
    BufferTooSmall,
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = match self {
            Error::Truncated => "truncated MPA request/reply",
            Error::BadKey => "bad MPA key",
            Error::BadRevision => "unsupported MPA revision",
            Error::PrivateDataTooLong => "MPA private data longer than 512",
            Error::BadEnhanced => "bad enhanced connection data",
            Error::BufferTooSmall => "buffer too small",
        };
        f.write_str(s)
    }
}

impl Error {
    /// The Terminate triplet for this error: all are "invalid request/reply"
    /// (RFC 5044 section 8, LLP code 4).
    pub const fn term(self) -> crate::error::TermError {
        crate::error::llp::INVALID_REQ_RESP
    }
}

/// Result of this module.
pub type Result<T> = core::result::Result<T, Error>;

/// Request or reply, as told by the key.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kind {
    /// "MPA ID Req Frame", sent by the initiator.
    Request,
    /// "MPA ID Rep Frame", sent by the responder.
    Reply,
}

impl Kind {
    /// The 16-byte key of this kind.
    pub const fn key(self) -> &'static [u8; 16] {
        match self {
            Kind::Request => &KEY_REQ,
            Kind::Reply => &KEY_REP,
        }
    }
}

/// How many bytes the whole frame takes, from a prefix of the stream.
///
/// `Ok(None)` while fewer than [`HEADER_LEN`] bytes are known; then checks
/// the key against `expect` and PD_Length against 512, so a receiver can stop
/// reading early on garbage (RFC 5044 section 7.1.2: an invalid frame closes
/// the connection).
pub fn frame_len(prefix: &[u8], expect: Kind) -> Result<Option<usize>> {
    let Some(head) = prefix.get(..HEADER_LEN) else {
        // A key mismatch can be seen before the full header has arrived.
        let n = prefix.len().min(16);
        if prefix.get(..n) != expect.key().get(..n) {
            return Err(Error::BadKey);
        }
        return Ok(None);
    };
    let frame = Frame::new_unchecked(head);
    if &frame.key() != expect.key() {
        return Err(Error::BadKey);
    }
    let pd = usize::from(frame.pd_len());
    if pd > MAX_PRIVATE_DATA {
        return Err(Error::PrivateDataTooLong);
    }
    Ok(Some(HEADER_LEN + pd))
}

/// A read/write view of an MPA request or reply frame.
#[derive(Debug, Clone, Copy)]
pub struct Frame<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Frame<T> {
    /// Wraps a buffer without checking its length; getters then return
    /// zeroes/empty slices instead of panicking on short buffers.
    pub const fn new_unchecked(buffer: T) -> Self {
        Frame { buffer }
    }

    /// Wraps a buffer, checking it holds the header and the private data.
    pub fn new_checked(buffer: T) -> Result<Self> {
        let f = Self::new_unchecked(buffer);
        f.check_len()?;
        Ok(f)
    }

    /// `Err(Truncated)` unless the buffer holds `20 + PD_Length` bytes.
    pub fn check_len(&self) -> Result<()> {
        let len = self.buffer.as_ref().len();
        if len < HEADER_LEN || len < self.total_len() {
            return Err(Error::Truncated);
        }
        Ok(())
    }

    /// Consumes the view, returning the buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    #[inline]
    fn byte(&self, at: usize) -> u8 {
        self.buffer.as_ref().get(at).copied().unwrap_or(0)
    }

    #[inline]
    fn be16(&self, r: field::Field) -> u16 {
        match self.buffer.as_ref().get(r) {
            Some(&[a, b]) => u16::from_be_bytes([a, b]),
            _ => 0,
        }
    }

    /// The 16-byte key (zeroes if the buffer is short).
    #[inline]
    pub fn key(&self) -> [u8; 16] {
        let mut k = [0u8; 16];
        if let Some(src) = self.buffer.as_ref().get(field::KEY) {
            k.copy_from_slice(src);
        }
        k
    }

    /// Request or reply, `None` for any other key.
    #[inline]
    pub fn kind(&self) -> Option<Kind> {
        match &self.key() {
            k if k == &KEY_REQ => Some(Kind::Request),
            k if k == &KEY_REP => Some(Kind::Reply),
            _ => None,
        }
    }

    /// M: the sender wants markers on the FPDUs it receives (RFC 5044 7.1.1).
    #[inline]
    pub fn marker_flag(&self) -> bool {
        self.byte(field::FLAGS) & field::FLAG_M != 0
    }

    /// C: the sender wants CRC32c in both directions.
    #[inline]
    pub fn crc_flag(&self) -> bool {
        self.byte(field::FLAGS) & field::FLAG_C != 0
    }

    /// R: reply only, the connection is rejected.
    #[inline]
    pub fn reject_flag(&self) -> bool {
        self.byte(field::FLAGS) & field::FLAG_R != 0
    }

    /// S: private data starts with the RFC 6581 enhanced data. Only
    /// meaningful with Rev 2: in Rev 1 it is a reserved bit.
    #[inline]
    pub fn enhanced_flag(&self) -> bool {
        self.byte(field::FLAGS) & field::FLAG_S != 0
    }

    /// The 4 reserved bits (siw uses one for its GSO experiment); sent as
    /// zero, not checked on receipt (RFC 5044 7.1.1).
    #[inline]
    pub fn reserved(&self) -> u8 {
        self.byte(field::FLAGS) & field::FLAG_RES
    }

    /// Rev.
    #[inline]
    pub fn rev(&self) -> u8 {
        self.byte(field::REV)
    }

    /// PD_Length.
    #[inline]
    pub fn pd_len(&self) -> u16 {
        self.be16(field::PD_LEN)
    }

    /// `20 + PD_Length`.
    #[inline]
    pub fn total_len(&self) -> usize {
        HEADER_LEN + usize::from(self.pd_len())
    }

    /// The whole private data (with the enhanced data if any); as much as
    /// the buffer holds.
    #[inline]
    pub fn private_data(&self) -> &[u8] {
        let buf = self.buffer.as_ref();
        let end = self.total_len().min(buf.len());
        buf.get(field::PRIVATE_DATA..end).unwrap_or(&[])
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Frame<T> {
    #[inline]
    fn set_flag(&mut self, mask: u8, on: bool) {
        if let Some(b) = self.buffer.as_mut().get_mut(field::FLAGS) {
            if on {
                *b |= mask;
            } else {
                *b &= !mask;
            }
        }
    }

    /// Writes the key.
    #[inline]
    pub fn set_key(&mut self, key: &[u8; 16]) {
        if let Some(dst) = self.buffer.as_mut().get_mut(field::KEY) {
            dst.copy_from_slice(key);
        }
    }

    /// Sets M.
    #[inline]
    pub fn set_marker_flag(&mut self, on: bool) {
        self.set_flag(field::FLAG_M, on)
    }

    /// Sets C.
    #[inline]
    pub fn set_crc_flag(&mut self, on: bool) {
        self.set_flag(field::FLAG_C, on)
    }

    /// Sets R.
    #[inline]
    pub fn set_reject_flag(&mut self, on: bool) {
        self.set_flag(field::FLAG_R, on)
    }

    /// Sets S.
    #[inline]
    pub fn set_enhanced_flag(&mut self, on: bool) {
        self.set_flag(field::FLAG_S, on)
    }

    /// Sets the reserved bits (low 4 bits of `v`).
    #[inline]
    pub fn set_reserved(&mut self, v: u8) {
        if let Some(b) = self.buffer.as_mut().get_mut(field::FLAGS) {
            *b = (*b & !field::FLAG_RES) | (v & field::FLAG_RES);
        }
    }

    /// Sets Rev.
    #[inline]
    pub fn set_rev(&mut self, rev: u8) {
        if let Some(b) = self.buffer.as_mut().get_mut(field::REV) {
            *b = rev;
        }
    }

    /// Sets PD_Length.
    #[inline]
    pub fn set_pd_len(&mut self, len: u16) {
        if let Some(dst) = self.buffer.as_mut().get_mut(field::PD_LEN) {
            dst.copy_from_slice(&len.to_be_bytes());
        }
    }

    /// The private data area as far as the buffer and PD_Length allow.
    #[inline]
    pub fn private_data_mut(&mut self) -> &mut [u8] {
        let end = self.total_len().min(self.buffer.as_ref().len());
        self.buffer
            .as_mut()
            .get_mut(field::PRIVATE_DATA..end)
            .unwrap_or(&mut [])
    }
}

/// A set of RTR (ready-to-receive) message kinds, RFC 6581 section 9 flags
/// B, C and D.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct RtrSet(u8);

/// One RTR message kind (RFC 6581 section 9).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Rtr {
    /// B: a zero-length FPDU (draft-05) / zero-length Send (RFC 6581); siw
    /// `MPA_V2_ZERO_LENGTH_RTR`.
    Send,
    /// C: a zero-length RDMA Write; siw `MPA_V2_RDMA_WRITE_RTR`.
    Write,
    /// D: a zero-length RDMA Read; siw `MPA_V2_RDMA_READ_RTR`.
    Read,
}

impl Rtr {
    const fn bit(self) -> u8 {
        match self {
            Rtr::Send => 1,
            Rtr::Write => 2,
            Rtr::Read => 4,
        }
    }
}

impl RtrSet {
    /// No kind.
    pub const EMPTY: RtrSet = RtrSet(0);
    /// All three kinds.
    pub const ALL: RtrSet = RtrSet(7);

    /// The set holding one kind.
    pub const fn one(r: Rtr) -> Self {
        RtrSet(r.bit())
    }

    /// Builds a set from the three flags B (Send), C (Write), D (Read).
    pub const fn from_flags(send: bool, write: bool, read: bool) -> Self {
        RtrSet((send as u8) | ((write as u8) << 1) | ((read as u8) << 2))
    }

    /// This set with `r` added.
    #[must_use]
    pub const fn with(self, r: Rtr) -> Self {
        RtrSet(self.0 | r.bit())
    }

    /// This set without `r`.
    #[must_use]
    pub const fn without(self, r: Rtr) -> Self {
        RtrSet(self.0 & !r.bit())
    }

    /// Whether `r` is in the set.
    pub const fn contains(self, r: Rtr) -> bool {
        self.0 & r.bit() != 0
    }

    /// Kinds in both sets.
    #[must_use]
    pub const fn intersect(self, other: RtrSet) -> RtrSet {
        RtrSet(self.0 & other.0)
    }

    /// Whether the set is empty.
    pub const fn is_empty(self) -> bool {
        self.0 == 0
    }
}

/// RFC 6581 section 9 enhanced connection data: IRD, ORD, the peer-to-peer
/// flag A and the RTR kinds (only meaningful when A is set: "B, C, D MUST be
/// set to zero on transmit and ignored on receive" otherwise).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Enhanced {
    /// IRD, 14 bits (0x3FFF: no automatic negotiation).
    pub ird: u16,
    /// ORD, 14 bits.
    pub ord: u16,
    /// A: peer-to-peer model requested (request) / confirmed (reply).
    pub p2p: bool,
    /// B/C/D: RTR kinds supported (request) or accepted (reply); empty
    /// unless `p2p`.
    pub rtr: RtrSet,
}

impl Enhanced {
    /// Parses the 4 bytes at the start of the private data.
    pub fn parse(bytes: &[u8]) -> Result<Self> {
        let (Some(&[i0, i1]), Some(&[o0, o1])) = (bytes.get(field::IRD), bytes.get(field::ORD))
        else {
            return Err(Error::BadEnhanced);
        };
        let ird = u16::from_be_bytes([i0, i1]);
        let ord = u16::from_be_bytes([o0, o1]);
        let p2p = ird & field::IRD_A != 0;
        let rtr = if p2p {
            RtrSet::from_flags(
                ird & field::IRD_B != 0,
                ord & field::ORD_C != 0,
                ord & field::ORD_D != 0,
            )
        } else {
            RtrSet::EMPTY
        };
        Ok(Enhanced {
            ird: ird & IRD_ORD_MASK,
            ord: ord & IRD_ORD_MASK,
            p2p,
            rtr,
        })
    }

    /// Writes the 4 bytes; `Err(BadEnhanced)` if IRD or ORD exceeds 14 bits.
    pub fn emit(&self, out: &mut [u8]) -> Result<()> {
        if self.ird > IRD_ORD_MASK || self.ord > IRD_ORD_MASK {
            return Err(Error::BadEnhanced);
        }
        let Some(out) = out.get_mut(..ENHANCED_LEN) else {
            return Err(Error::BufferTooSmall);
        };
        let mut ird = self.ird;
        let mut ord = self.ord;
        if self.p2p {
            ird |= field::IRD_A;
            if self.rtr.contains(Rtr::Send) {
                ird |= field::IRD_B;
            }
            if self.rtr.contains(Rtr::Write) {
                ord |= field::ORD_C;
            }
            if self.rtr.contains(Rtr::Read) {
                ord |= field::ORD_D;
            }
        }
        let [a, b] = ird.to_be_bytes();
        let [c, d] = ord.to_be_bytes();
        out.copy_from_slice(&[a, b, c, d]);
        Ok(())
    }
}

/// A parsed request or reply.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Repr<'a> {
    /// Request or reply.
    pub kind: Kind,
    /// M.
    pub markers: bool,
    /// C.
    pub crc: bool,
    /// R (replies only; parsed as sent).
    pub reject: bool,
    /// Rev: 1 or 2.
    pub rev: u8,
    /// The RFC 6581 data: `Some` iff Rev is 2 and S is set.
    pub enhanced: Option<Enhanced>,
    /// The ULP's private data (after the enhanced data, if any).
    pub private_data: &'a [u8],
}

impl<'a> Repr<'a> {
    /// Parses and validates a frame: key, Rev 1 or 2 (RFC 6581 section 6:
    /// a Rev 2 host MUST keep accepting Rev 1), PD_Length at most 512, and
    /// for Rev 2 with S the 4 enhanced bytes. Reserved bits are ignored
    /// (RFC 5044 section 7.1.1). Bytes after `20 + PD_Length` are ignored.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(frame: &Frame<&'a T>) -> Result<Repr<'a>> {
        frame.check_len()?;
        let kind = frame.kind().ok_or(Error::BadKey)?;
        if usize::from(frame.pd_len()) > MAX_PRIVATE_DATA {
            return Err(Error::PrivateDataTooLong);
        }
        let rev = frame.rev();
        if rev != REV_1 && rev != REV_2 {
            return Err(Error::BadRevision);
        }
        let b: &'a T = frame.buffer;
        let buf: &'a [u8] = b.as_ref();
        let pd = buf
            .get(field::PRIVATE_DATA..frame.total_len())
            .ok_or(Error::Truncated)?;
        let (enhanced, private_data) = if rev >= REV_2 && frame.enhanced_flag() {
            let e = Enhanced::parse(pd)?;
            (Some(e), pd.get(ENHANCED_LEN..).unwrap_or(&[]))
        } else {
            (None, pd)
        };
        Ok(Repr {
            kind,
            markers: frame.marker_flag(),
            crc: frame.crc_flag(),
            reject: frame.reject_flag(),
            rev,
            enhanced,
            private_data,
        })
    }

    /// Parses a slice that must hold exactly one frame: trailing bytes are
    /// an error (RFC 5044 section 7.1.2: no FPDU may follow before the
    /// exchange completes; siw checks the same).
    pub fn parse_bytes(bytes: &'a [u8]) -> Result<Repr<'a>> {
        let frame = Frame::new_checked(bytes)?;
        if bytes.len() != frame.total_len() {
            return Err(Error::Truncated);
        }
        Self::parse(&frame)
    }

    /// PD_Length this frame will carry.
    pub fn pd_len(&self) -> usize {
        self.private_data.len()
            + if self.enhanced.is_some() {
                ENHANCED_LEN
            } else {
                0
            }
    }

    /// Bytes [`Repr::emit`] writes.
    pub fn buffer_len(&self) -> usize {
        HEADER_LEN + self.pd_len()
    }

    /// Writes the frame into the start of `frame`'s buffer. Reserved bits
    /// are written as zero. Errors: private data above 512 bytes, Rev
    /// other than 1/2, enhanced data with Rev 1, IRD/ORD above 0x3FFF,
    /// short buffer.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, frame: &mut Frame<T>) -> Result<()> {
        let pd_len = self.pd_len();
        if pd_len > MAX_PRIVATE_DATA {
            return Err(Error::PrivateDataTooLong);
        }
        if self.rev != REV_1 && self.rev != REV_2 {
            return Err(Error::BadRevision);
        }
        if self.enhanced.is_some() && self.rev < REV_2 {
            return Err(Error::BadEnhanced);
        }
        if frame.buffer.as_ref().len() < self.buffer_len() {
            return Err(Error::BufferTooSmall);
        }
        frame.set_key(self.kind.key());
        if let Some(b) = frame.buffer.as_mut().get_mut(field::FLAGS) {
            *b = 0;
        }
        frame.set_marker_flag(self.markers);
        frame.set_crc_flag(self.crc);
        frame.set_reject_flag(self.reject);
        frame.set_enhanced_flag(self.enhanced.is_some());
        frame.set_rev(self.rev);
        // pd_len <= 512 was checked above.
        frame.set_pd_len(pd_len as u16);
        let pd = frame.private_data_mut();
        let ulp = match &self.enhanced {
            Some(e) => {
                e.emit(pd)?;
                pd.get_mut(ENHANCED_LEN..).ok_or(Error::BufferTooSmall)?
            }
            None => pd,
        };
        let dst = ulp
            .get_mut(..self.private_data.len())
            .ok_or(Error::BufferTooSmall)?;
        dst.copy_from_slice(self.private_data);
        Ok(())
    }

    /// Emits into a plain byte buffer, returning the length written.
    pub fn emit_bytes(&self, out: &mut [u8]) -> Result<usize> {
        let len = self.buffer_len();
        let out = out.get_mut(..len).ok_or(Error::BufferTooSmall)?;
        self.emit(&mut Frame::new_unchecked(out))?;
        Ok(len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::vec::Vec;

    // RFC 5044 section 7.1.1 / RFC 6581 section 6 figure: the key bytes.
    const REQ_KEY_HEX: [u8; 16] = [
        0x4D, 0x50, 0x41, 0x20, 0x49, 0x44, 0x20, 0x52, 0x65, 0x71, 0x20, 0x46, 0x72, 0x61, 0x6D,
        0x65,
    ];
    const REP_KEY_HEX: [u8; 16] = [
        0x4D, 0x50, 0x41, 0x20, 0x49, 0x44, 0x20, 0x52, 0x65, 0x70, 0x20, 0x46, 0x72, 0x61, 0x6D,
        0x65,
    ];

    #[test]
    fn keys_match_rfc_figure() {
        assert_eq!(KEY_REQ, REQ_KEY_HEX);
        assert_eq!(KEY_REP, REP_KEY_HEX);
    }

    /// Golden vector worked out by hand from the RFC 5044 section 7.1.1 and
    /// RFC 6581 sections 6 and 9 figures: a Rev 2 request with M=0, C=1,
    /// R=0, S=1, IRD 16 with A and B, ORD 8 with C, private data "hi".
    /// Byte 16 = 0b0101_0000 (C|S) = 0x50; Rev = 0x02; PD_Length = 6;
    /// IRD word = 0x8000|0x4000|16 = 0xC010; ORD word = 0x8000|8 = 0x8008.
    const GOLDEN_REQ: [u8; 26] = [
        0x4D, 0x50, 0x41, 0x20, 0x49, 0x44, 0x20, 0x52, 0x65, 0x71, 0x20, 0x46, 0x72, 0x61, 0x6D,
        0x65, //
        0x50, 0x02, 0x00, 0x06, //
        0xC0, 0x10, 0x80, 0x08, //
        b'h', b'i',
    ];

    #[test]
    fn golden_request_parse_and_emit() {
        let r = Repr::parse_bytes(&GOLDEN_REQ).unwrap();
        assert_eq!(
            r,
            Repr {
                kind: Kind::Request,
                markers: false,
                crc: true,
                reject: false,
                rev: 2,
                enhanced: Some(Enhanced {
                    ird: 16,
                    ord: 8,
                    p2p: true,
                    rtr: RtrSet::one(Rtr::Send).with(Rtr::Write)
                }),
                private_data: b"hi",
            }
        );
        let mut out = [0xAAu8; 26];
        assert_eq!(r.emit_bytes(&mut out), Ok(26));
        assert_eq!(out, GOLDEN_REQ);
    }

    /// Golden Rev 1 reject reply: M=1, R=1 (0x80|0x20 = 0xA0), Rev 1, no data.
    #[test]
    fn golden_v1_reply() {
        let mut bytes = [0u8; 20];
        bytes[..16].copy_from_slice(&REP_KEY_HEX);
        bytes[16] = 0xA0;
        bytes[17] = 0x01;
        let r = Repr::parse_bytes(&bytes).unwrap();
        assert_eq!(r.kind, Kind::Reply);
        assert!(r.markers && r.reject && !r.crc);
        assert_eq!((r.rev, r.enhanced, r.private_data), (1, None, &[][..]));
        let mut out = [0u8; 20];
        r.emit_bytes(&mut out).unwrap();
        assert_eq!(out, bytes);
    }

    #[test]
    fn flag_bits_match_siw() {
        // siw: MPA_RR_FLAG_MARKERS 0x8000, _CRC 0x4000, _REJECT 0x2000,
        // _ENHANCED 0x1000 on the big-endian 16-bit word at offset 16.
        let mut b = [0u8; 20];
        let mut f = Frame::new_unchecked(&mut b[..]);
        f.set_marker_flag(true);
        assert_eq!(f.into_inner()[16], 0x80);
        for bit in [0x40u8, 0x20, 0x10] {
            let mut f = Frame::new_unchecked([0u8; 20]);
            match bit {
                0x40 => f.set_crc_flag(true),
                0x20 => f.set_reject_flag(true),
                _ => f.set_enhanced_flag(true),
            }
            assert_eq!(f.into_inner()[16], bit);
        }
        // MPA_V2 bits.
        let mut e = [0u8; 4];
        Enhanced {
            ird: 0x3FFF,
            ord: 0x3FFF,
            p2p: true,
            rtr: RtrSet::ALL,
        }
        .emit(&mut e)
        .unwrap();
        assert_eq!(e, [0xFF, 0xFF, 0xFF, 0xFF]);
        Enhanced {
            ird: 1,
            ord: 2,
            p2p: true,
            rtr: RtrSet::one(Rtr::Read),
        }
        .emit(&mut e)
        .unwrap();
        assert_eq!(e, [0x80, 0x01, 0x40, 0x02]);
        Enhanced {
            ird: 1,
            ord: 2,
            p2p: true,
            rtr: RtrSet::one(Rtr::Write),
        }
        .emit(&mut e)
        .unwrap();
        assert_eq!(e, [0x80, 0x01, 0x80, 0x02]);
    }

    #[test]
    fn getters_and_setters() {
        let mut b = [0u8; 24];
        let mut f = Frame::new_unchecked(&mut b[..]);
        f.set_key(&KEY_REQ);
        f.set_rev(2);
        f.set_pd_len(4);
        f.set_reserved(0xF);
        f.set_crc_flag(true);
        assert_eq!(f.reserved(), 0xF);
        assert_eq!(f.rev(), 2);
        assert_eq!(f.pd_len(), 4);
        assert_eq!(f.total_len(), 24);
        assert!(f.crc_flag() && !f.marker_flag() && !f.reject_flag() && !f.enhanced_flag());
        assert_eq!(f.kind(), Some(Kind::Request));
        f.private_data_mut().copy_from_slice(&[1, 2, 3, 4]);
        assert_eq!(f.private_data(), &[1, 2, 3, 4]);
        f.set_reserved(0);
        assert_eq!(f.reserved(), 0);
        assert_eq!(b[16], 0x40);
    }

    #[test]
    fn reserved_bits_ignored_on_receive() {
        let mut b = GOLDEN_REQ;
        b[16] |= 0x0F; // siw's GSO bit is 0x08
        let r = Repr::parse_bytes(&b).unwrap();
        assert_eq!(r, Repr::parse_bytes(&GOLDEN_REQ).unwrap());
    }

    #[test]
    fn s_bit_is_reserved_in_rev_1() {
        let mut b = GOLDEN_REQ;
        b[17] = 1;
        let r = Repr::parse_bytes(&b).unwrap();
        assert_eq!(r.enhanced, None);
        assert_eq!(r.private_data.len(), 6);
    }

    #[test]
    fn a_clear_ignores_bcd() {
        // RFC 6581 section 9: B, C, D ignored on receive when A is zero.
        let e = Enhanced::parse(&[0x40, 0x05, 0xC0, 0x06]).unwrap();
        assert_eq!(
            e,
            Enhanced {
                ird: 5,
                ord: 6,
                p2p: false,
                rtr: RtrSet::EMPTY
            }
        );
        // ... and sent as zero.
        let mut out = [0u8; 4];
        Enhanced {
            ird: 5,
            ord: 6,
            p2p: false,
            rtr: RtrSet::ALL,
        }
        .emit(&mut out)
        .unwrap();
        assert_eq!(out, [0x00, 0x05, 0x00, 0x06]);
    }

    #[test]
    fn errors() {
        assert_eq!(Repr::parse_bytes(&GOLDEN_REQ[..19]), Err(Error::Truncated));
        assert_eq!(Repr::parse_bytes(&GOLDEN_REQ[..25]), Err(Error::Truncated));
        let mut long = [0u8; 27];
        long[..26].copy_from_slice(&GOLDEN_REQ);
        assert_eq!(Repr::parse_bytes(&long), Err(Error::Truncated));
        let mut b = GOLDEN_REQ;
        b[0] = b'X';
        assert_eq!(Repr::parse_bytes(&b), Err(Error::BadKey));
        for rev in [0u8, 3, 255] {
            let mut b = GOLDEN_REQ;
            b[17] = rev;
            assert_eq!(Repr::parse_bytes(&b), Err(Error::BadRevision));
        }
        // S with fewer than 4 bytes of private data.
        let mut b = [0u8; 22];
        b[..16].copy_from_slice(&KEY_REP);
        b[16] = 0x10;
        b[17] = 2;
        b[19] = 2;
        assert_eq!(Repr::parse_bytes(&b), Err(Error::BadEnhanced));
        // PD_Length 513.
        let mut b = std::vec![0u8; 20 + 513];
        b[..16].copy_from_slice(&KEY_REQ);
        b[17] = 1;
        b[18..20].copy_from_slice(&513u16.to_be_bytes());
        assert_eq!(Repr::parse_bytes(&b), Err(Error::PrivateDataTooLong));
        assert_eq!(frame_len(&b, Kind::Request), Err(Error::PrivateDataTooLong));
        assert_eq!(Error::BadKey.term(), crate::error::llp::INVALID_REQ_RESP);
    }

    #[test]
    fn frame_len_incremental() {
        for n in 0..20 {
            assert_eq!(frame_len(&GOLDEN_REQ[..n], Kind::Request), Ok(None));
        }
        assert_eq!(frame_len(&GOLDEN_REQ[..20], Kind::Request), Ok(Some(26)));
        assert_eq!(frame_len(&GOLDEN_REQ[..3], Kind::Reply), Ok(None));
        assert_eq!(
            frame_len(&GOLDEN_REQ[..10], Kind::Reply),
            Err(Error::BadKey)
        );
        assert_eq!(frame_len(b"GET ", Kind::Request), Err(Error::BadKey));
    }

    #[test]
    fn emit_errors() {
        let big = [0u8; 509];
        let r = Repr {
            kind: Kind::Request,
            markers: false,
            crc: false,
            reject: false,
            rev: 2,
            enhanced: Some(Enhanced::default()),
            private_data: &big,
        };
        let mut out = [0u8; 600];
        assert_eq!(r.emit_bytes(&mut out), Err(Error::PrivateDataTooLong));
        let r = Repr {
            private_data: &big[..508],
            ..r
        };
        assert_eq!(r.emit_bytes(&mut out), Ok(532));
        assert_eq!(r.emit_bytes(&mut out[..531]), Err(Error::BufferTooSmall));
        let r1 = Repr { rev: 1, ..r };
        assert_eq!(r1.emit_bytes(&mut out), Err(Error::BadEnhanced));
        let r3 = Repr {
            rev: 3,
            enhanced: None,
            ..r
        };
        assert_eq!(r3.emit_bytes(&mut out), Err(Error::BadRevision));
        let rb = Repr {
            enhanced: Some(Enhanced {
                ird: 0x4000,
                ..Enhanced::default()
            }),
            ..r
        };
        assert_eq!(rb.emit_bytes(&mut out), Err(Error::BadEnhanced));
    }

    type ArbRepr = (
        Kind,
        bool,
        bool,
        bool,
        u8,
        Option<(u16, u16, bool, u8)>,
        Vec<u8>,
    );

    fn arb_repr() -> impl Strategy<Value = ArbRepr> {
        (
            prop_oneof![Just(Kind::Request), Just(Kind::Reply)],
            any::<bool>(),
            any::<bool>(),
            any::<bool>(),
            1u8..=2,
            proptest::option::of((0u16..=0x3FFF, 0u16..=0x3FFF, any::<bool>(), 0u8..8)),
            proptest::collection::vec(any::<u8>(), 0..=508),
        )
    }

    proptest! {
        #[test]
        fn round_trip((kind, m, c, r, rev, enh, pd) in arb_repr()) {
            let enhanced = if rev == 2 {
                enh.map(|(ird, ord, p2p, rtr)| Enhanced {
                    ird, ord, p2p,
                    rtr: if p2p { RtrSet(rtr) } else { RtrSet::EMPTY },
                })
            } else { None };
            let repr = Repr { kind, markers: m, crc: c, reject: r, rev, enhanced, private_data: &pd };
            let mut buf = std::vec![0u8; repr.buffer_len()];
            prop_assert_eq!(repr.emit_bytes(&mut buf), Ok(buf.len()));
            prop_assert_eq!(frame_len(&buf, kind), Ok(Some(buf.len())));
            let back = Repr::parse_bytes(&buf).unwrap();
            prop_assert_eq!(back, repr);
        }

        #[test]
        fn parse_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..600)) {
            let _ = Repr::parse_bytes(&bytes);
            let _ = frame_len(&bytes, Kind::Request);
            let f = Frame::new_unchecked(&bytes[..]);
            let _ = (f.key(), f.kind(), f.rev(), f.pd_len(), f.private_data(), f.reserved());
        }
    }
}
