// SPDX-License-Identifier: GPL-2.0
//! Terminate message (RFC 5040 section 4.8 for the format and codes,
//! section 7 for what is copied, RFC 7306 section 8.1 for its messages).
//!
//! After an untagged DDP header on QN 2 (opcode 0111b, L = 1, MO = 0):
//!
//! ```text
//! 0       Layer (4) | EType (4)
//! 1       Error Code
//! 2..4    M | D | R | Reserved (13 bits)
//! 4..6    DDP Segment Length            (present when D is set)
//! 6..     Terminated DDP Header, 14 or 18 octets by its own T bit (D)
//! ..      Terminated RDMA Header, up to 28 octets (R)
//! ```
//!
//! M says the DDP Segment Length is valid, D that the offending segment's
//! DDP header is copied, R that its RDMAP header (only a Read Request has
//! one in RFC 5040: 28 octets) is copied. This is the layout of Linux
//! siw's `struct iwarp_terminate` plus the copied `iwarp_ctrl` headers and
//! of Wireshark's dissector. siw sets R for protection errors on Sends but
//! then copies only the DDP header, so the parser takes whatever is left,
//! up to 28 octets, as the RDMA header.

use super::ddp as ddpw;
use super::rdmap::{Control, Opcode, READ_REQUEST_LEN, TERMINATE_CONTROL_LEN};
use super::{be, Field, MALFORMED};
use crate::error::{self, Layer, TermError};

/// Terminate Control octets (the minimum Terminate header).
pub const MIN_LEN: usize = TERMINATE_CONTROL_LEN;
/// Octets of a copied RDMA header (the Read Request header).
pub const RDMA_HEADER_LEN: usize = READ_REQUEST_LEN;
/// Largest Terminate header: control, length, untagged DDP, RDMA header.
pub const MAX_LEN: usize = MIN_LEN + 2 + ddpw::UNTAGGED_HEADER_LEN + RDMA_HEADER_LEN;

mod field {
    use super::Field;

    pub(super) const ERROR: Field = 0..2;
    pub(super) const HDRCT: usize = 2;
    pub(super) const RSVD: usize = 3;
    pub(super) const SEG_LEN: Field = 4..6;
    pub(super) const DDP_HEADER: usize = 6;
}

const FLAG_M: u8 = 0x80;
const FLAG_D: u8 = 0x40;
const FLAG_R: u8 = 0x20;

/// View of a Terminate header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Header<T> {
    /// Wraps without a length check.
    pub const fn new_unchecked(buffer: T) -> Self {
        Self { buffer }
    }

    /// Wraps and checks the control field and, if D is set, the DDP
    /// Segment Length and the whole copied DDP header are present.
    pub fn new_checked(buffer: T) -> Result<Self, TermError> {
        let h = Self { buffer };
        if h.buffer.as_ref().len() < MIN_LEN {
            return Err(MALFORMED);
        }
        if h.d() {
            let need = field::DDP_HEADER.saturating_add(h.ddp_header_len());
            if h.buffer.as_ref().len() <= field::DDP_HEADER || h.buffer.as_ref().len() < need {
                return Err(MALFORMED);
            }
        }
        Ok(h)
    }

    /// The layer/etype/code, `None` for an undefined layer.
    #[inline]
    pub fn error(&self) -> Option<TermError> {
        TermError::from_bits(be::u16_at(self.buffer.as_ref(), field::ERROR))
    }

    #[inline]
    fn hdrct(&self) -> u8 {
        be::u8_at(self.buffer.as_ref(), field::HDRCT)
    }

    /// M: DDP Segment Length valid.
    #[inline]
    pub fn m(&self) -> bool {
        self.hdrct() & FLAG_M != 0
    }

    /// D: Terminated DDP Header included.
    #[inline]
    pub fn d(&self) -> bool {
        self.hdrct() & FLAG_D != 0
    }

    /// R: Terminated RDMA Header included.
    #[inline]
    pub fn r(&self) -> bool {
        self.hdrct() & FLAG_R != 0
    }

    /// DDP Segment Length (meaningful if M and D).
    #[inline]
    pub fn segment_len(&self) -> u16 {
        be::u16_at(self.buffer.as_ref(), field::SEG_LEN)
    }

    /// Length of the copied DDP header, from its T bit (0 without D).
    fn ddp_header_len(&self) -> usize {
        if !self.d() {
            return 0;
        }
        match self.buffer.as_ref().get(field::DDP_HEADER) {
            Some(c) if c & 0x80 != 0 => ddpw::TAGGED_HEADER_LEN,
            _ => ddpw::UNTAGGED_HEADER_LEN,
        }
    }

    /// The copied DDP header (empty without D).
    pub fn terminated_ddp_header(&self) -> &[u8] {
        let s = field::DDP_HEADER;
        self.buffer
            .as_ref()
            .get(s..s + self.ddp_header_len())
            .unwrap_or(&[])
    }

    /// The copied RDMA header, up to 28 octets (empty without R).
    pub fn terminated_rdma_header(&self) -> &[u8] {
        if !self.r() {
            return &[];
        }
        let s = if self.d() {
            field::DDP_HEADER + self.ddp_header_len()
        } else {
            MIN_LEN
        };
        let rest = self.buffer.as_ref().get(s..).unwrap_or(&[]);
        rest.get(..RDMA_HEADER_LEN).unwrap_or(rest)
    }
}

/// Up to `N` copied header octets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct HeaderCopy<const N: usize> {
    bytes: [u8; N],
    len: usize,
}

impl<const N: usize> HeaderCopy<N> {
    /// Copies up to `N` octets of `src`.
    pub fn new(src: &[u8]) -> Self {
        let mut bytes = [0u8; N];
        let mut len = 0;
        for (d, s) in bytes.iter_mut().zip(src) {
            *d = *s;
            len += 1;
        }
        Self { bytes, len }
    }

    /// The copied octets.
    pub fn as_bytes(&self) -> &[u8] {
        self.bytes.get(..self.len).unwrap_or(&[])
    }
}

/// The copied DDP part of a Terminate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TerminatedDdp {
    /// DDP Segment Length, `Some` iff M is set.
    pub segment_len: Option<u16>,
    /// The offending segment's DDP header (14 or 18 octets).
    pub header: HeaderCopy<{ ddpw::UNTAGGED_HEADER_LEN }>,
}

/// A parsed Terminate header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Repr {
    /// Layer, error type and code.
    pub error: TermError,
    /// Copied DDP header (D, and M for its length).
    pub ddp: Option<TerminatedDdp>,
    /// Copied RDMA header (R).
    pub rdma: Option<HeaderCopy<RDMA_HEADER_LEN>>,
}

impl Repr {
    /// The Terminate to send for `error`, copying headers from the
    /// offending DDP segment (`None` when the error is not tied to an
    /// incoming message, RFC 7306 8.1 case 1: no headers).
    ///
    /// - LLP errors and local catastrophic errors copy nothing.
    /// - A bad DDP version copies nothing: the header layout is unknown
    ///   (as siw does).
    /// - Otherwise the DDP header is copied with M and D, the segment
    ///   length being the whole DDP segment (header and payload): RFC 5041
    ///   section 2 defines a DDP Segment as "the smallest unit of data
    ///   transfer for the DDP protocol. It includes a DDP Header and ULP
    ///   Payload (if present)", and section 7.1 asks DDP to report "the
    ///   length of the DDP Segment" with the header. (siw reports the
    ///   length without the DDP/RDMAP headers; receivers only display it.)
    /// - R and the 28-octet header only for a Read Request: it is the
    ///   only RFC 5040 message with an RDMAP header of that size, and
    ///   RFC 7306 8.1 leaves the RDMA header out for its messages.
    pub fn for_error(error: TermError, offending: Option<&[u8]>) -> Self {
        let none = Self {
            error,
            ddp: None,
            rdma: None,
        };
        let Some(seg) = offending else { return none };
        let local_cata = error.etype == 0;
        let bad_version =
            error == error::ddp::T_INVALID_VERSION || error == error::ddp::U_INVALID_VERSION;
        if error.layer == Layer::Llp || local_cata || bad_version {
            return none;
        }
        let Ok(view) = ddpw::Segment::new_checked(seg) else {
            return none;
        };
        let hlen = view.header_len();
        let header = HeaderCopy::new(seg.get(..hlen).unwrap_or(&[]));
        let segment_len = Some(u16::try_from(seg.len()).unwrap_or(u16::MAX));
        let is_rreq = !view.tagged()
            && view.qn() == super::rdmap::qn::READ_REQUEST
            && Opcode::from_u8(Control::from_byte(view.rsvd_ulp()).opcode)
                == Some(Opcode::ReadRequest);
        let rdma = match view.payload().get(..RDMA_HEADER_LEN) {
            Some(h) if is_rreq => Some(HeaderCopy::new(h)),
            _ => None,
        };
        Self {
            error,
            ddp: Some(TerminatedDdp {
                segment_len,
                header,
            }),
            rdma,
        }
    }

    /// Parses a checked view; an undefined layer is malformed.
    pub fn parse<T: AsRef<[u8]>>(h: &Header<T>) -> Result<Self, TermError> {
        let error = h.error().ok_or(MALFORMED)?;
        let ddp = if h.d() {
            Some(TerminatedDdp {
                segment_len: if h.m() { Some(h.segment_len()) } else { None },
                header: HeaderCopy::new(h.terminated_ddp_header()),
            })
        } else {
            None
        };
        let rdma = if h.r() {
            Some(HeaderCopy::new(h.terminated_rdma_header()))
        } else {
            None
        };
        Ok(Self { error, ddp, rdma })
    }

    /// Header octets.
    pub fn buffer_len(&self) -> usize {
        let d = self.ddp.map_or(0, |d| 2 + d.header.as_bytes().len());
        let r = self.rdma.map_or(0, |r| r.as_bytes().len());
        MIN_LEN + d + r
    }

    /// Writes the header into `buf` (at least [`Self::buffer_len`]).
    pub fn emit(&self, buf: &mut [u8]) {
        be::set_u16(buf, field::ERROR, self.error.to_bits());
        let mut hdrct = 0;
        let mut at = MIN_LEN;
        if let Some(d) = &self.ddp {
            hdrct |= FLAG_D;
            if let Some(l) = d.segment_len {
                hdrct |= FLAG_M;
                be::set_u16(buf, field::SEG_LEN, l);
            } else {
                be::set_u16(buf, field::SEG_LEN, 0);
            }
            let h = d.header.as_bytes();
            be::put(buf, field::DDP_HEADER..field::DDP_HEADER + h.len(), h);
            at = field::DDP_HEADER + h.len();
        }
        if let Some(r) = &self.rdma {
            hdrct |= FLAG_R;
            let h = r.as_bytes();
            be::put(buf, at..at + h.len(), h);
        }
        be::set_u8(buf, field::HDRCT, hdrct);
        be::set_u8(buf, field::RSVD, 0);
    }

    /// Writes a complete Terminate DDP segment (untagged header on QN 2 with
    /// `msn`, MO 0, L = 1, RDMAP opcode Terminate) and returns its length,
    /// or `None` if `buf` is too small.
    pub fn emit_segment(&self, msn: u32, buf: &mut [u8]) -> Option<usize> {
        let total = ddpw::UNTAGGED_HEADER_LEN + self.buffer_len();
        let out = buf.get_mut(..total)?;
        let hdr = ddpw::Repr {
            last: true,
            ulp_ctrl: Control::new(Opcode::Terminate).to_byte(),
            model: ddpw::Model::Untagged {
                rsvd_ulp: 0,
                qn: super::rdmap::qn::TERMINATE,
                msn,
                mo: 0,
            },
        };
        let mut seg = ddpw::Segment::new_unchecked(&mut *out);
        hdr.emit(&mut seg);
        self.emit(seg.payload_mut());
        Some(total)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    // An RDMA Read Request segment (RFC 5040 4.4): untagged, L, QN 1, MSN 5,
    // MO 0, then sink STag 1, sink TO 0x10, size 0x20, source STag 2,
    // source TO 0x30.
    fn rreq() -> [u8; 46] {
        let mut b = [0u8; 46];
        b[..18].copy_from_slice(&[0x41, 0x41, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 5, 0, 0, 0, 0]);
        b[18..46].copy_from_slice(&[
            0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0x10, 0, 0, 0, 0x20, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0,
            0x30,
        ]);
        b
    }

    #[test]
    fn golden_read_request_access_error() {
        // RDMAP remote protection / access (0x0102) on a Read Request:
        // M|D|R = 0xE0, segment length 46, 18 + 28 copied octets.
        let seg = rreq();
        let t = Repr::for_error(error::rdmap::ACCESS, Some(&seg));
        let mut out = [0u8; MAX_LEN];
        let n = t.buffer_len();
        assert_eq!(n, MAX_LEN);
        t.emit(&mut out[..n]);
        assert_eq!(&out[..6], &[0x01, 0x02, 0xE0, 0x00, 0x00, 46]);
        assert_eq!(&out[6..], &seg[..]);
        let back = Repr::parse(&Header::new_checked(&out[..n]).unwrap()).unwrap();
        assert_eq!(back, t);
    }

    #[test]
    fn golden_full_segment_ddp_error() {
        // DDP untagged "invalid MSN range" (0x1203) on a tagged-less Send:
        // the whole Terminate segment, worked out from RFC 5040 4.8/7.1.
        let send = [
            0x41u8, 0x43, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 9, 0, 0, 0, 0, 0xDD,
        ];
        let t = Repr::for_error(error::ddp::U_MSN_RANGE, Some(&send));
        let mut out = [0u8; 64];
        let n = t.emit_segment(1, &mut out).unwrap();
        let want: [u8; 42] = [
            0x41, 0x47, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 1, 0, 0, 0, 0, // DDP QN 2, MSN 1
            0x12, 0x03, 0xC0, 0x00, 0x00, 19, // control M|D, length 19
            0x41, 0x43, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 9, 0, 0, 0, 0, // copied header
        ];
        assert_eq!(&out[..n], &want[..]);
        assert!(t.rdma.is_none());
    }

    #[test]
    fn which_errors_copy_what() {
        let seg = rreq();
        for e in [
            error::ddp::T_INVALID_VERSION,
            error::llp::CRC,
            error::rdmap::LOCAL_CATA,
        ] {
            let t = Repr::for_error(e, Some(&seg));
            assert!(t.ddp.is_none() && t.rdma.is_none(), "{e:?}");
        }
        assert_eq!(
            Repr::for_error(error::rdmap::CATA_STREAM, None).buffer_len(),
            MIN_LEN
        );
        let tagged = [0xC1u8, 0x40, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0];
        let t = Repr::for_error(error::ddp::T_BASE_BOUNDS, Some(&tagged));
        assert_eq!(t.ddp.unwrap().header.as_bytes(), &tagged[..]);
        assert_eq!(t.buffer_len(), MIN_LEN + 2 + 14);
    }

    #[test]
    fn incoming_send_error_copies_ddp_header_only() {
        // RFC 5040 section 7 (mirrored for RFC 7306 messages by RFC 7306
        // section 8.1 item 2): for errors on an incoming Write, Read
        // Response or Send, "the Error Type, Error Code, and Terminated DDP
        // Header fields are included in the Terminate Message, but the
        // Terminated RDMA Header field is set to zero"; only an incoming
        // Read Request also carries the Terminated RDMA Header.
        let send = [
            0x41u8, 0x43, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 7, 0, 0, 0, 0, 1, 2, 3, 4, 5,
        ];
        for e in [
            error::rdmap::ACCESS,
            error::ddp::U_TOO_LONG,
            error::rdmap::CANT_INVALIDATE,
        ] {
            let t = Repr::for_error(e, Some(&send));
            assert!(t.rdma.is_none(), "{e:?}");
            let d = t.ddp.unwrap();
            assert_eq!(d.header.as_bytes(), &send[..18]);
            // DDP Segment Length: header and payload (RFC 5041 section 2).
            assert_eq!(d.segment_len, Some(23));
            let mut out = [0u8; MAX_LEN];
            t.emit(&mut out[..t.buffer_len()]);
            assert_eq!(out[2], 0xC0, "M|D, no R");
        }
        let t = Repr::for_error(error::rdmap::ACCESS, Some(&rreq()));
        assert!(t.rdma.is_some() && t.ddp.is_some());
    }

    #[test]
    fn no_incoming_message_copies_nothing() {
        // RFC 7306 section 8.1 item 1 (RFC 5040 section 7 likewise): errors
        // "not directly associated with an incoming Message": "the
        // Terminated DDP Header and Terminated RDMA Header fields are set to
        // zero" - sent here as absent (hdrct M, D, R clear).
        let t = Repr::for_error(error::rdmap::CATA_STREAM, None);
        let mut out = [0xFFu8; MIN_LEN];
        t.emit(&mut out);
        assert_eq!(out, [0x02, 0x07, 0x00, 0x00]);
        // A segment too short for its own DDP header has no header to copy.
        let t = Repr::for_error(error::rdmap::OP_UNSPECIFIED, Some(&[0x41, 0x43, 0, 0][..]));
        assert!(t.ddp.is_none() && t.rdma.is_none());
        assert_eq!(t.buffer_len(), MIN_LEN);
    }

    #[test]
    fn siw_style_r_without_rdma_header() {
        // siw: M|D|R with only the 18-octet DDP header of a Send.
        let mut b = [0u8; 24];
        b[..4].copy_from_slice(&[0x01, 0x02, 0xE0, 0]);
        b[4..6].copy_from_slice(&[0, 4]);
        b[6] = 0x41;
        let t = Repr::parse(&Header::new_checked(&b[..]).unwrap()).unwrap();
        assert_eq!(t.rdma.unwrap().as_bytes(), &[] as &[u8]);
        assert_eq!(t.ddp.unwrap().segment_len, Some(4));
    }

    #[test]
    fn malformed() {
        assert!(Header::new_checked(&[0u8; 3][..]).is_err());
        // D set but the copied header is cut short.
        assert!(Header::new_checked(&[0x01, 0x02, 0x40, 0, 0, 4, 0x41][..]).is_err());
        // Undefined layer 3.
        let h = Header::new_checked(&[0x30, 0, 0, 0][..]).unwrap();
        assert!(Repr::parse(&h).is_err());
    }

    fn arb_repr() -> impl Strategy<Value = Repr> {
        let err = (0u16..3, 0u16..16, any::<u8>()).prop_map(|(l, t, c)| {
            TermError::from_bits((l << 12) | (t << 8) | u16::from(c)).unwrap()
        });
        let ddp = proptest::option::of((
            any::<bool>(),
            proptest::option::of(any::<u16>()),
            any::<[u8; 18]>(),
        ))
        .prop_map(|o| {
            o.map(|(tagged, segment_len, mut h)| {
                h[0] = if tagged { h[0] | 0x80 } else { h[0] & 0x7F };
                let n = if tagged { 14 } else { 18 };
                TerminatedDdp {
                    segment_len,
                    header: HeaderCopy::new(&h[..n]),
                }
            })
        });
        let rdma = proptest::option::of((any::<[u8; 28]>(), 0usize..=28))
            .prop_map(|o| o.map(|(b, n)| HeaderCopy::new(&b[..n])));
        (err, ddp, rdma).prop_map(|(error, ddp, rdma)| Repr { error, ddp, rdma })
    }

    proptest! {
        #[test]
        fn round_trip(t in arb_repr()) {
            let mut b = [0u8; MAX_LEN];
            let n = t.buffer_len();
            t.emit(&mut b[..n]);
            let back = Repr::parse(&Header::new_checked(&b[..n]).unwrap()).unwrap();
            prop_assert_eq!(back, t);
        }

        #[test]
        fn never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..64), e in any::<u16>()) {
            if let Ok(h) = Header::new_checked(&bytes[..]) {
                let _ = Repr::parse(&h);
            }
            if let Some(err) = TermError::from_bits(e & 0x2FFF) {
                let t = Repr::for_error(err, Some(&bytes));
                let mut out = [0u8; 128];
                prop_assert!(t.emit_segment(0, &mut out).is_some());
            }
        }
    }
}
