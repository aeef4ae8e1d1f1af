// SPDX-License-Identifier: GPL-2.0
//! The MPA FPDU (framed PDU), RFC 5044 section 4.1, without markers:
//!
//! ```text
//!  0                   1                   2                   3
//!  0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |          ULPDU_LENGTH         |                               |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+                               +
//! ~                     ULPDU (DDP segment)                       ~
//! |                               +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |                               |  PAD (0-3 octets, zero)       |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |                     CRC (CRC32c or zero)                      |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! ```
//!
//! ULPDU_LENGTH counts the ULPDU only. The pad makes header + ULPDU + pad
//! a multiple of 4. The CRC field is always present; with CRC negotiated
//! off it is sent as zero and not checked. The CRC covers ULPDU_LENGTH,
//! ULPDU and pad (and any markers inside the FPDU, see [`crate::mpa::markers`])
//! and is sent in the byte order the `crc32c` finished value has on
//! little-endian machines — the same bytes Linux siw and iSCSI (RFC 3720
//! appendix B.4) put on the wire.
//!
//! Markers are inserted and removed by [`crate::mpa`]; this view is the
//! marker-free FPDU.

use crate::crc::Crc32c;

/// Length of ULPDU_LENGTH.
pub const HEADER_LEN: usize = 2;
/// Length of the CRC field.
pub const CRC_LEN: usize = 4;
/// Smallest FPDU: header, 2 bytes of pad, CRC (a zero-length ULPDU).
pub const MIN_LEN: usize = 8;
/// Length of a marker (RFC 5044 section 4.2).
pub const MARKER_LEN: usize = 4;
/// Markers sit every 512 octets of the TCP stream (RFC 5044 section 4.3).
pub const MARKER_INTERVAL: usize = 512;
/// Largest ULPDU_LENGTH.
pub const MAX_ULPDU: usize = u16::MAX as usize;

mod field {
    pub type Field = core::ops::Range<usize>;
    pub const ULPDU_LENGTH: Field = 0..2;
    pub const ULPDU: usize = 2;
}

/// Why an FPDU could not be parsed or emitted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Error {
    /// The buffer is shorter than the FPDU its length field announces.
    Truncated,
    /// The ULPDU does not fit the 16-bit length field.
    TooLong,
    /// The CRC does not match (only checked when CRC is negotiated).
    BadCrc,
}

impl Error {
    /// The Terminate triplet (RFC 5044 section 8).
    pub const fn term(self) -> crate::error::TermError {
        match self {
            Error::BadCrc => crate::error::llp::CRC,
            // A length that overruns what the peer sent can only be a
            // corrupted stream; report it like the CRC would.
            Error::Truncated | Error::TooLong => crate::error::llp::CRC,
        }
    }
}

/// Result of this module.
pub type Result<T> = core::result::Result<T, Error>;

/// Pad octets after a ULPDU of `ulpdu_len` (RFC 5044 section 4.1).
#[inline]
pub const fn pad_len(ulpdu_len: usize) -> usize {
    ulpdu_len.wrapping_add(HEADER_LEN).wrapping_neg() & 3
}

/// Marker-free FPDU length for a ULPDU of `ulpdu_len`: header, ULPDU,
/// pad, CRC. A multiple of 4 (saturating for absurd lengths).
#[inline]
pub const fn fpdu_len(ulpdu_len: usize) -> usize {
    ulpdu_len.saturating_add(HEADER_LEN + CRC_LEN + pad_len(ulpdu_len))
}

/// The largest ULPDU that fits a TCP segment of `emss` payload octets
/// (RFC 5044 section 4 "FPDU size considerations"):
///
/// * markers off: `MULPDU = EMSS - (6 + EMSS mod 4)`
/// * markers on: `MULPDU = EMSS - (6 + 4 * ceil(EMSS / 512) + EMSS mod 4)`
///
/// 6 is ULPDU_LENGTH + CRC; `EMSS mod 4` keeps the FPDU a multiple of 4;
/// the marker term is the worst case of markers a segment can hold.
/// Saturates at 0 for absurdly small segments and at 65535.
pub const fn mulpdu(emss: usize, markers: bool) -> usize {
    let mut overhead = HEADER_LEN + CRC_LEN + emss % 4;
    if markers {
        overhead += MARKER_LEN * emss.div_ceil(MARKER_INTERVAL);
    }
    let m = emss.saturating_sub(overhead);
    if m > MAX_ULPDU {
        MAX_ULPDU
    } else {
        m
    }
}

/// A view of a marker-free FPDU.
#[derive(Debug, Clone, Copy)]
pub struct Frame<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Frame<T> {
    /// Wraps a buffer without checks; getters return zero/empty when short.
    pub const fn new_unchecked(buffer: T) -> Self {
        Frame { buffer }
    }

    /// Wraps a buffer that holds at least the FPDU its header announces.
    pub fn new_checked(buffer: T) -> Result<Self> {
        let f = Self::new_unchecked(buffer);
        f.check_len()?;
        Ok(f)
    }

    /// `Err(Truncated)` unless the whole FPDU is in the buffer.
    pub fn check_len(&self) -> Result<()> {
        let len = self.buffer.as_ref().len();
        if len < HEADER_LEN || len < self.total_len() {
            return Err(Error::Truncated);
        }
        Ok(())
    }

    /// Consumes the view.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// ULPDU_LENGTH.
    #[inline]
    pub fn ulpdu_len(&self) -> u16 {
        match self.buffer.as_ref().get(field::ULPDU_LENGTH) {
            Some(&[a, b]) => u16::from_be_bytes([a, b]),
            _ => 0,
        }
    }

    /// Header + ULPDU + pad + CRC.
    #[inline]
    pub fn total_len(&self) -> usize {
        fpdu_len(usize::from(self.ulpdu_len()))
    }

    /// Where the CRC field starts (= bytes the CRC covers).
    #[inline]
    fn crc_at(&self) -> usize {
        self.total_len() - CRC_LEN
    }

    /// The ULPDU.
    #[inline]
    pub fn ulpdu(&self) -> &[u8] {
        let end = field::ULPDU + usize::from(self.ulpdu_len());
        self.buffer.as_ref().get(field::ULPDU..end).unwrap_or(&[])
    }

    /// The pad octets.
    #[inline]
    pub fn pad(&self) -> &[u8] {
        let start = field::ULPDU + usize::from(self.ulpdu_len());
        self.buffer
            .as_ref()
            .get(start..self.crc_at())
            .unwrap_or(&[])
    }

    /// The CRC field as the finished CRC32c value.
    #[inline]
    pub fn crc(&self) -> u32 {
        let at = self.crc_at();
        match self.buffer.as_ref().get(at..at + CRC_LEN) {
            Some(&[a, b, c, d]) => u32::from_le_bytes([a, b, c, d]),
            _ => 0,
        }
    }

    /// The CRC32c over header, ULPDU and pad.
    pub fn compute_crc<C: Crc32c + ?Sized>(&self, crc: &C) -> u32 {
        let covered = self.buffer.as_ref().get(..self.crc_at()).unwrap_or(&[]);
        crc.checksum(covered)
    }

    /// Whether the CRC field matches.
    pub fn check_crc<C: Crc32c + ?Sized>(&self, crc: &C) -> bool {
        self.check_len().is_ok() && self.compute_crc(crc) == self.crc()
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Frame<T> {
    /// Sets ULPDU_LENGTH.
    #[inline]
    pub fn set_ulpdu_len(&mut self, len: u16) {
        if let Some(dst) = self.buffer.as_mut().get_mut(field::ULPDU_LENGTH) {
            dst.copy_from_slice(&len.to_be_bytes());
        }
    }

    /// The ULPDU area.
    #[inline]
    pub fn ulpdu_mut(&mut self) -> &mut [u8] {
        let end = field::ULPDU + usize::from(self.ulpdu_len());
        self.buffer
            .as_mut()
            .get_mut(field::ULPDU..end)
            .unwrap_or(&mut [])
    }

    /// Zeroes the pad (RFC 5044 section 4.1: pad MUST be zero when sent).
    #[inline]
    pub fn clear_pad(&mut self) {
        let start = field::ULPDU + usize::from(self.ulpdu_len());
        let end = self.crc_at();
        if let Some(p) = self.buffer.as_mut().get_mut(start..end) {
            p.fill(0);
        }
    }

    /// Writes the CRC field.
    #[inline]
    pub fn set_crc(&mut self, value: u32) {
        let at = self.crc_at();
        if let Some(dst) = self.buffer.as_mut().get_mut(at..at + CRC_LEN) {
            dst.copy_from_slice(&value.to_le_bytes());
        }
    }

    /// Computes and writes the CRC (or zero when `crc` is `None`).
    pub fn fill_crc<C: Crc32c + ?Sized>(&mut self, crc: Option<&C>) {
        let v = match crc {
            Some(c) => self.compute_crc(c),
            None => 0,
        };
        self.set_crc(v);
    }
}

/// A marker-free FPDU in parsed form.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Repr<'a> {
    /// The ULPDU.
    pub ulpdu: &'a [u8],
}

impl<'a> Repr<'a> {
    /// Parses a whole FPDU, checking the CRC when `crc` is given (CRC
    /// negotiated on) and ignoring the CRC field and pad contents otherwise.
    pub fn parse<C: Crc32c + ?Sized>(frame: &Frame<&'a [u8]>, crc: Option<&C>) -> Result<Repr<'a>> {
        frame.check_len()?;
        if let Some(c) = crc {
            if !frame.check_crc(c) {
                return Err(Error::BadCrc);
            }
        }
        let buf: &'a [u8] = frame.buffer;
        let end = field::ULPDU + usize::from(frame.ulpdu_len());
        let ulpdu = buf.get(field::ULPDU..end).ok_or(Error::Truncated)?;
        Ok(Repr { ulpdu })
    }

    /// Marker-free bytes [`Repr::emit`] writes.
    pub fn buffer_len(&self) -> usize {
        fpdu_len(self.ulpdu.len())
    }

    /// Writes the FPDU: length, ULPDU, zero pad, CRC (zero when `crc` is
    /// `None`). `Err(TooLong)` above 65535 bytes, `Err(Truncated)` for a
    /// short buffer.
    pub fn emit<T, C>(&self, frame: &mut Frame<T>, crc: Option<&C>) -> Result<()>
    where
        T: AsRef<[u8]> + AsMut<[u8]>,
        C: Crc32c + ?Sized,
    {
        let len = u16::try_from(self.ulpdu.len()).map_err(|_| Error::TooLong)?;
        if frame.buffer.as_ref().len() < self.buffer_len() {
            return Err(Error::Truncated);
        }
        frame.set_ulpdu_len(len);
        frame.ulpdu_mut().copy_from_slice(self.ulpdu);
        frame.clear_pad();
        frame.fill_crc(crc);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crc::SoftCrc32c;
    use proptest::prelude::*;
    use std::vec;

    /// RFC 3720 appendix B.4 test vectors, 32 bytes each, with their CRCs
    /// as sent on the wire (the iSCSI table lists the wire bytes):
    /// zeros "aa 36 91 8a", ones "43 ab a8 62", 00..1f "4e 79 dd 46",
    /// 1f..00 "5c db 3f 11".
    #[test]
    fn crc_vectors_rfc3720_b4() {
        let inc: [u8; 32] = core::array::from_fn(|i| i as u8);
        let dec: [u8; 32] = core::array::from_fn(|i| 31 - i as u8);
        for (data, wire) in [
            ([0u8; 32], [0xaa, 0x36, 0x91, 0x8a]),
            ([0xffu8; 32], [0x43, 0xab, 0xa8, 0x62]),
            (inc, [0x4e, 0x79, 0xdd, 0x46]),
            (dec, [0x5c, 0xdb, 0x3f, 0x11]),
        ] {
            assert_eq!(SoftCrc32c.checksum(&data).to_le_bytes(), wire);
            assert_eq!(crc32c::crc32c(&data).to_le_bytes(), wire);
        }
    }

    /// Golden FPDU worked out by hand (RFC 5044 section 4.1 layout): ULPDU
    /// of 30 zero bytes -> length 0x001E, 30 zeros, pad 0 (2 + 30 = 32),
    /// CRC32c over 00 1E + 30 zeros. The header+ULPDU is then 32 bytes:
    /// `00 1e 00*30`; its CRC32c was checked against the `crc32c` crate.
    #[test]
    fn golden_fpdu() {
        let ulpdu = [0u8; 30];
        let mut buf = [0xEEu8; 36];
        Repr { ulpdu: &ulpdu }
            .emit(&mut Frame::new_unchecked(&mut buf[..]), Some(&SoftCrc32c))
            .unwrap();
        let mut covered = [0u8; 32];
        covered[1] = 0x1E;
        assert_eq!(&buf[..32], &covered);
        assert_eq!(&buf[32..], &crc32c::crc32c(&covered).to_le_bytes());
        // CRC off: field zero.
        Repr { ulpdu: &ulpdu }
            .emit(&mut Frame::new_unchecked(&mut buf[..]), None::<&SoftCrc32c>)
            .unwrap();
        assert_eq!(&buf[32..], &[0, 0, 0, 0]);
    }

    /// The smallest FPDU: zero-length ULPDU, 2 bytes pad, CRC = CRC32c of
    /// `00 00 00 00`, which is 0x48674BC7 (wire `c7 4b 67 48`).
    #[test]
    fn golden_empty_fpdu() {
        let mut buf = [0xEEu8; 8];
        Repr { ulpdu: &[] }
            .emit(&mut Frame::new_unchecked(&mut buf[..]), Some(&SoftCrc32c))
            .unwrap();
        assert_eq!(buf, [0, 0, 0, 0, 0xc7, 0x4b, 0x67, 0x48]);
        assert_eq!(crc32c::crc32c(&[0u8; 4]), 0x4867_4BC7);
    }

    #[test]
    fn pad_and_len() {
        assert_eq!([0, 1, 2, 3, 4, 5].map(pad_len), [2, 1, 0, 3, 2, 1]);
        assert_eq!(fpdu_len(0), MIN_LEN);
        assert_eq!(fpdu_len(2), 8);
        assert_eq!(fpdu_len(3), 12);
        assert_eq!(fpdu_len(65535), 2 + 65535 + 3 + 4);
        assert_eq!(fpdu_len(usize::MAX), usize::MAX);
        let _ = pad_len(usize::MAX);
        for n in 0..100 {
            assert_eq!(fpdu_len(n) % 4, 0);
        }
    }

    #[test]
    fn mulpdu_rules() {
        // 1460-byte Ethernet EMSS: 1460 - 6 = 1454 without markers; with
        // markers 1460 - (6 + 4*3 + 0) = 1442.
        assert_eq!(mulpdu(1460, false), 1454);
        assert_eq!(mulpdu(1460, true), 1442);
        assert_eq!(fpdu_len(1454), 1460);
        assert_eq!(fpdu_len(1442) + 3 * MARKER_LEN, 1460);
        // EMSS mod 4 != 0.
        assert_eq!(mulpdu(1461, false), 1454);
        assert_eq!(mulpdu(1463, false), 1454);
        assert_eq!(mulpdu(1464, false), 1458);
        assert_eq!(mulpdu(8960, true), 8960 - (6 + 4 * 18));
        assert_eq!(mulpdu(3, true), 0);
        assert_eq!(mulpdu(usize::MAX, true), MAX_ULPDU);
        assert_eq!(mulpdu(70000, false), MAX_ULPDU);
        // The FPDU always fits the segment, markers included.
        for emss in 8..5000 {
            assert!(fpdu_len(mulpdu(emss, false)) <= emss, "{emss}");
            let m = mulpdu(emss, true);
            let worst =
                fpdu_len(m) + MARKER_LEN * fpdu_len(m).div_ceil(MARKER_INTERVAL - MARKER_LEN);
            assert!(m == 0 || worst <= emss + MARKER_LEN, "{emss}");
        }
    }

    #[test]
    fn views_and_errors() {
        let mut buf = [0u8; 12];
        let mut f = Frame::new_unchecked(&mut buf[..]);
        f.set_ulpdu_len(3);
        f.ulpdu_mut().copy_from_slice(b"abc");
        f.clear_pad();
        f.fill_crc(Some(&SoftCrc32c));
        assert_eq!(f.total_len(), 12);
        assert_eq!(f.pad(), &[0, 0, 0][..]);
        assert_eq!(f.ulpdu(), b"abc");
        assert!(f.check_crc(&SoftCrc32c));
        let f = Frame::new_checked(&buf[..]).unwrap();
        assert_eq!(
            Repr::parse(&f, Some(&SoftCrc32c)),
            Ok(Repr { ulpdu: b"abc" })
        );
        let mut bad = buf;
        bad[3] ^= 1;
        let f = Frame::new_unchecked(&bad[..]);
        assert_eq!(Repr::parse(&f, Some(&SoftCrc32c)), Err(Error::BadCrc));
        assert_eq!(
            Repr::parse(&f, None::<&SoftCrc32c>),
            Ok(Repr { ulpdu: b"acc" })
        );
        assert_eq!(Error::BadCrc.term(), crate::error::llp::CRC);
        assert!(Frame::new_checked(&buf[..11]).is_err());
        assert!(Frame::new_checked(&buf[..1]).is_err());
        let f = Frame::new_unchecked(&buf[..4]);
        assert_eq!((f.ulpdu(), f.crc()), (&[][..], 0));
        let big = vec![0u8; 65536];
        let mut out = vec![0u8; 70000];
        assert_eq!(
            Repr { ulpdu: &big }.emit(&mut Frame::new_unchecked(&mut out[..]), None::<&SoftCrc32c>),
            Err(Error::TooLong)
        );
        assert_eq!(
            Repr { ulpdu: b"abc" }.emit(
                &mut Frame::new_unchecked(&mut out[..11]),
                None::<&SoftCrc32c>
            ),
            Err(Error::Truncated)
        );
    }

    proptest! {
        #[test]
        fn round_trip(ulpdu in proptest::collection::vec(any::<u8>(), 0..2000), crc_on: bool) {
            let repr = Repr { ulpdu: &ulpdu };
            let mut buf = vec![0xA5u8; repr.buffer_len()];
            let c = if crc_on { Some(&SoftCrc32c) } else { None };
            repr.emit(&mut Frame::new_unchecked(&mut buf[..]), c).unwrap();
            let f = Frame::new_checked(&buf[..]).unwrap();
            prop_assert_eq!(f.crc() == 0, !crc_on || f.compute_crc(&SoftCrc32c) == 0);
            prop_assert_eq!(Repr::parse(&f, c).unwrap(), repr);
            prop_assert!(f.pad().iter().all(|&b| b == 0));
        }

        #[test]
        fn parse_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
            let f = Frame::new_unchecked(&bytes[..]);
            let _ = (f.ulpdu(), f.pad(), f.crc(), f.total_len());
            let _ = Repr::parse(&f, Some(&SoftCrc32c));
        }
    }
}
