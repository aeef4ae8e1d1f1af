// SPDX-License-Identifier: GPL-2.0
//! FPDU emission (RFC 5044 sections 4.1 to 4.4), zero-copy and zero-alloc.
//!
//! [`Tx`] keeps one direction's stream offset (for markers) and the
//! negotiated CRC/marker settings. [`Tx::fpdu`] plans one FPDU around the
//! caller's ULPDU (a header slice plus any number of payload slices) and
//! returns an [`FpduWriter`], an iterator of [`Segment`]s in wire order:
//! borrowed [`Segment::Data`] slices of the caller's buffers (send them as
//! they are: iovec/bvec entries pointing at the payload pages) and small
//! [`Segment::Inline`] pieces the engine made (ULPDU_LENGTH, markers, pad,
//! CRC; at most 4 octets each, copy them somewhere that lives until the
//! send completes). The CRC is computed while the segments are produced, so
//! the trailer comes last, as on the wire.
//!
//! [`Tx::write`] is the one-copy variant that writes the whole FPDU into a
//! caller buffer (host endpoint, tests), the CRC fused with the payload
//! copy ([`Crc32c::copy_append`]).
//!
//! The stream offset advances when the FPDU is planned: every planned FPDU
//! must then be sent completely, in order.

use crate::crc::Crc32c;
use crate::mpa::markers;
use crate::wire::fpdu::{self, CRC_LEN, HEADER_LEN, MARKER_LEN, MAX_ULPDU};

/// Why an FPDU could not be planned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TxError {
    /// The ULPDU is longer than 65535 octets.
    TooLong,
    /// The output buffer of [`Tx::write`] is too short.
    BufferTooSmall,
}

/// One direction's sender state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Tx {
    crc: bool,
    markers: bool,
    pos: u32,
}

impl Tx {
    /// A sender at the start of full operation phase (stream offset 0, the
    /// first octet after our MPA Request/Reply). `crc`: negotiated CRC;
    /// `markers`: the peer asked for markers (its M bit).
    pub const fn new(crc: bool, markers: bool) -> Self {
        Tx {
            crc,
            markers,
            pos: 0,
        }
    }

    /// Offset of the next octet in the stream, relative to the marker
    /// origin, modulo 2^32.
    pub const fn position(&self) -> u32 {
        self.pos
    }

    /// Whether CRC is on.
    pub const fn crc(&self) -> bool {
        self.crc
    }

    /// Whether markers are inserted.
    pub const fn markers(&self) -> bool {
        self.markers
    }

    /// On-wire length of the next FPDU for a ULPDU of `ulpdu_len` octets.
    pub const fn wire_len(&self, ulpdu_len: usize) -> usize {
        let len = fpdu::fpdu_len(ulpdu_len);
        if self.markers {
            markers::wire_len(self.pos, len)
        } else {
            len
        }
    }

    /// MULPDU for an effective MSS of `emss` ([`fpdu::mulpdu`]).
    pub const fn mulpdu(&self, emss: usize) -> usize {
        fpdu::mulpdu(emss, self.markers)
    }

    /// Plans the next FPDU carrying `header` followed by the `payload`
    /// slices, and advances the stream offset past it.
    pub fn fpdu<'a>(
        &mut self,
        header: &'a [u8],
        payload: &'a [&'a [u8]],
    ) -> Result<FpduWriter<'a>, TxError> {
        let mut ulpdu_len = header.len();
        for p in payload {
            ulpdu_len = ulpdu_len.saturating_add(p.len());
        }
        if ulpdu_len > MAX_ULPDU {
            return Err(TxError::TooLong);
        }
        let wire_len = self.wire_len(ulpdu_len);
        let start = self.pos;
        // wire_len < 2^17: the cast is exact, the add wraps like TCP.
        self.pos = self.pos.wrapping_add(wire_len as u32);
        Ok(FpduWriter {
            header,
            payload,
            ulpdu_len: ulpdu_len as u16,
            wire_len,
            crc_on: self.crc,
            markers: self.markers,
            start,
            pos: start,
            crc: 0,
            phase: Phase::Len,
            part: 0,
            off: 0,
        })
    }

    /// Writes the next FPDU (markers, pad and CRC included) into `out`,
    /// returning its length. Nothing is written and the offset is kept when
    /// `out` is too short.
    ///
    /// Without markers every octet is touched once: ULPDU_LENGTH and the
    /// header are copied and summed in one call, each payload slice goes
    /// through [`Crc32c::copy_append`] (copy and CRC in one pass where the
    /// implementation fuses them), then the pad. With markers the payload
    /// is cut every 508 octets, where a fused call per piece costs more
    /// than it saves: every octet is copied once, markers spliced in by
    /// span, and the CRC runs afterwards in one call over the whole FPDU
    /// as it lies in `out` (markers included).
    pub fn write<C: Crc32c + ?Sized>(
        &mut self,
        crc: &C,
        header: &[u8],
        payload: &[&[u8]],
        out: &mut [u8],
    ) -> Result<usize, TxError> {
        let mut ulpdu_len = header.len();
        for p in payload {
            ulpdu_len = ulpdu_len.saturating_add(p.len());
        }
        if ulpdu_len > MAX_ULPDU {
            return Err(TxError::TooLong);
        }
        let wire_len = self.wire_len(ulpdu_len);
        let Some(out) = out.get_mut(..wire_len) else {
            return Err(TxError::BufferTooSmall);
        };
        let Some(body_len) = wire_len.checked_sub(CRC_LEN) else {
            return Err(TxError::BufferTooSmall);
        };
        if !self.markers {
            return Ok(self.write_plain(crc, header, payload, ulpdu_len, out, body_len));
        }
        let mut w = SpanWriter {
            out,
            at: 0,
            pos: self.pos,
            start: self.pos,
            markers: self.markers,
        };
        // ulpdu_len <= MAX_ULPDU: the cast is exact.
        w.put(&(ulpdu_len as u16).to_be_bytes());
        w.put(header);
        for p in payload {
            w.put(p);
        }
        w.put([0u8; 4].get(..fpdu::pad_len(ulpdu_len)).unwrap_or(&[]));
        // A marker due right before the CRC field is inside this FPDU.
        w.marker_if_due();
        let out = w.out;
        let v = match (self.crc, out.get(..body_len)) {
            (true, Some(body)) => crc.checksum(body),
            _ => 0,
        };
        if let Some(d) = out.get_mut(body_len..) {
            d.copy_from_slice(&v.to_le_bytes());
        }
        // wire_len < 2^17: the cast is exact, the add wraps like TCP.
        self.pos = self.pos.wrapping_add(wire_len as u32);
        Ok(wire_len)
    }
}

impl Tx {
    /// [`Tx::write`] without markers: `out` is exactly the FPDU
    /// (`body_len` octets, then the CRC field). Length and header are
    /// summed in one call, each payload piece copied and summed in one.
    fn write_plain<C: Crc32c + ?Sized>(
        &mut self,
        crc: &C,
        header: &[u8],
        payload: &[&[u8]],
        ulpdu_len: usize,
        out: &mut [u8],
        body_len: usize,
    ) -> usize {
        let crc_on = self.crc;
        let head = 2 + header.len();
        let mut v = 0;
        if let Some(d) = out.get_mut(..head) {
            // ulpdu_len <= MAX_ULPDU: the cast is exact.
            let (len, hdr) = d.split_at_mut(2);
            len.copy_from_slice(&(ulpdu_len as u16).to_be_bytes());
            hdr.copy_from_slice(header);
            if crc_on {
                v = crc.append(0, d);
            }
        }
        let mut at = head;
        for p in payload {
            if let Some(d) = out.get_mut(at..at + p.len()) {
                if crc_on {
                    v = crc.copy_append(v, p, d);
                } else {
                    d.copy_from_slice(p);
                }
            }
            at += p.len();
        }
        if let Some(d) = out.get_mut(at..body_len) {
            d.fill(0);
            if crc_on && !d.is_empty() {
                v = crc.append(v, d);
            }
        }
        if let Some(d) = out.get_mut(body_len..) {
            d.copy_from_slice(&v.to_le_bytes());
        }
        // The FPDU is < 2^17 octets: the cast is exact, the add wraps like TCP.
        self.pos = self.pos.wrapping_add(out.len() as u32);
        out.len()
    }
}

/// Copies an FPDU's fields into one buffer, inserting markers.
struct SpanWriter<'o> {
    out: &'o mut [u8],
    at: usize,
    /// Stream offset of `out[at]`.
    pos: u32,
    /// Stream offset of the FPDU's first octet.
    start: u32,
    markers: bool,
}

impl SpanWriter<'_> {
    /// Writes the marker due at the current position, if any.
    #[inline]
    fn marker_if_due(&mut self) {
        if self.markers && markers::is_marker_pos(self.pos) {
            let m = markers::encode(self.pos, self.start);
            if let Some(d) = self.out.get_mut(self.at..self.at + MARKER_LEN) {
                d.copy_from_slice(&m);
            }
            self.at += MARKER_LEN;
            self.pos = self.pos.wrapping_add(MARKER_LEN as u32);
        }
    }

    /// Copies `bytes`, split only where markers are due.
    #[inline]
    fn put(&mut self, mut bytes: &[u8]) {
        while !bytes.is_empty() {
            let n = if self.markers {
                self.marker_if_due();
                bytes.len().min(markers::to_next_marker(self.pos) as usize)
            } else {
                bytes.len()
            };
            let Some((head, rest)) = bytes.split_at_checked(n) else {
                return;
            };
            if let Some(d) = self.out.get_mut(self.at..self.at + n) {
                d.copy_from_slice(head);
            }
            self.at += n;
            self.pos = self.pos.wrapping_add(n as u32);
            bytes = rest;
        }
    }
}

/// A piece of an FPDU in wire order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Segment<'a> {
    /// Octets made by the engine (at most 4).
    Inline(Inline),
    /// A sub-slice of the caller's header or payload.
    Data(&'a [u8]),
}

impl Segment<'_> {
    /// The octets of this segment.
    pub fn bytes(&self) -> &[u8] {
        match self {
            Segment::Inline(i) => i.bytes(),
            Segment::Data(d) => d,
        }
    }
}

/// Up to 4 octets made by the engine.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Inline {
    buf: [u8; 4],
    len: u8,
}

impl Inline {
    fn new(buf: [u8; 4], len: usize) -> Self {
        Inline {
            buf,
            len: len.min(4) as u8,
        }
    }

    /// The octets.
    pub fn bytes(&self) -> &[u8] {
        self.buf.get(..usize::from(self.len)).unwrap_or(&[])
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    Len,
    Body,
    Pad,
    Crc,
    Done,
}

/// Produces one FPDU's segments; see the module docs.
#[derive(Clone, Debug)]
pub struct FpduWriter<'a> {
    header: &'a [u8],
    payload: &'a [&'a [u8]],
    ulpdu_len: u16,
    wire_len: usize,
    crc_on: bool,
    markers: bool,
    start: u32,
    pos: u32,
    crc: u32,
    phase: Phase,
    /// 0: header, n: payload[n - 1].
    part: usize,
    off: usize,
}

impl<'a> FpduWriter<'a> {
    /// Total on-wire length of this FPDU.
    pub fn wire_len(&self) -> usize {
        self.wire_len
    }

    /// ULPDU_LENGTH of this FPDU.
    pub fn ulpdu_len(&self) -> u16 {
        self.ulpdu_len
    }

    /// Stream offset of this FPDU's first octet.
    pub fn start(&self) -> u32 {
        self.start
    }

    fn part(&self, i: usize) -> Option<&'a [u8]> {
        if i == 0 {
            Some(self.header)
        } else {
            self.payload.get(i - 1).copied()
        }
    }

    fn emit<C: Crc32c + ?Sized>(&mut self, crc: &C, bytes: &[u8]) {
        if self.crc_on {
            self.crc = crc.append(self.crc, bytes);
        }
        self.pos = self.pos.wrapping_add(bytes.len() as u32);
    }

    /// The next segment, `None` once the CRC field has been produced.
    pub fn next_segment<C: Crc32c + ?Sized>(&mut self, crc: &C) -> Option<Segment<'a>> {
        if self.phase == Phase::Done {
            return None;
        }
        if self.markers && markers::is_marker_pos(self.pos) {
            let m = markers::encode(self.pos, self.start);
            self.emit(crc, &m);
            return Some(Segment::Inline(Inline::new(m, 4)));
        }
        let room = if self.markers {
            markers::to_next_marker(self.pos) as usize
        } else {
            usize::MAX
        };
        match self.phase {
            Phase::Len => {
                let [a, b] = self.ulpdu_len.to_be_bytes();
                let v = [a, b, 0, 0];
                self.emit(crc, &[a, b]);
                self.phase = Phase::Body;
                Some(Segment::Inline(Inline::new(v, HEADER_LEN)))
            }
            Phase::Body => {
                while let Some(p) = self.part(self.part) {
                    let rest = p.get(self.off..).unwrap_or(&[]);
                    if rest.is_empty() {
                        self.part += 1;
                        self.off = 0;
                        continue;
                    }
                    let n = rest.len().min(room);
                    let chunk = rest.get(..n).unwrap_or(&[]);
                    self.off += n;
                    self.emit(crc, chunk);
                    return Some(Segment::Data(chunk));
                }
                self.phase = Phase::Pad;
                self.next_segment(crc)
            }
            Phase::Pad => {
                self.phase = Phase::Crc;
                let n = fpdu::pad_len(usize::from(self.ulpdu_len));
                if n == 0 {
                    return self.next_segment(crc);
                }
                let z = [0u8; 4];
                self.emit(crc, z.get(..n).unwrap_or(&[]));
                Some(Segment::Inline(Inline::new(z, n)))
            }
            Phase::Crc => {
                self.phase = Phase::Done;
                let v = if self.crc_on { self.crc } else { 0 };
                self.pos = self.pos.wrapping_add(CRC_LEN as u32);
                Some(Segment::Inline(Inline::new(v.to_le_bytes(), CRC_LEN)))
            }
            Phase::Done => None,
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::crc::SoftCrc32c;
    use crate::wire::fpdu::{Frame, Repr};
    use proptest::prelude::*;
    use std::vec;
    use std::vec::Vec;

    #[test]
    fn no_markers_matches_wire_repr() {
        let mut tx = Tx::new(true, false);
        let mut out = [0u8; 64];
        let n = tx
            .write(&SoftCrc32c, b"hdr", &[b"pay", b"", b"load"], &mut out)
            .unwrap();
        let mut want = [0u8; 64];
        Repr {
            ulpdu: b"hdrpayload",
        }
        .emit(&mut Frame::new_unchecked(&mut want[..]), Some(&SoftCrc32c))
        .unwrap();
        assert_eq!(n, 16);
        assert_eq!(&out[..n], &want[..16]);
        assert_eq!(tx.position(), 16);
    }

    /// Golden vector with markers, worked out by hand (RFC 5044 sections
    /// 4.1-4.3): at stream offset 0 an FPDU with a 510-octet ULPDU of 0x11.
    /// Unmarked length 2 + 510 + 0 pad + 4 = 516. Layout on the wire:
    /// `[0..4]` marker 00 00 00 00 (FPDUPTR 0, the FPDU starts here),
    /// `[4..6]` length 01 FE, `[6..512]` the first 506 ULPDU octets,
    /// `[512..516]` marker 00 00 02 00 (512 octets from the FPDU start),
    /// `[516..520]` the last 4 ULPDU octets, `[520..524]` CRC over
    /// octets 0..520 (markers included), little-endian. Total 524.
    #[test]
    fn golden_with_markers() {
        let ulpdu = [0x11u8; 510];
        let mut tx = Tx::new(true, true);
        assert_eq!(tx.wire_len(510), 524);
        let mut out = [0u8; 524];
        assert_eq!(tx.write(&SoftCrc32c, &ulpdu, &[], &mut out), Ok(524));
        let mut want = [0x11u8; 524];
        want[..4].copy_from_slice(&[0, 0, 0, 0]);
        want[4..6].copy_from_slice(&[0x01, 0xFE]);
        want[512..516].copy_from_slice(&[0, 0, 0x02, 0x00]);
        let c = crc32c::crc32c(&want[..520]);
        want[520..].copy_from_slice(&c.to_le_bytes());
        assert_eq!(out, want);
        assert_eq!(tx.position(), 524);
    }

    /// A CRC32c that records every call: `(length, fused)`.
    struct Calls(core::cell::RefCell<Vec<(usize, bool)>>);

    impl Crc32c for Calls {
        fn append(&self, crc: u32, data: &[u8]) -> u32 {
            self.0.borrow_mut().push((data.len(), false));
            SoftCrc32c.append(crc, data)
        }
        fn copy_append(&self, crc: u32, src: &[u8], dst: &mut [u8]) -> u32 {
            dst.copy_from_slice(src);
            self.0.borrow_mut().push((src.len(), true));
            SoftCrc32c.append(crc, src)
        }
    }

    /// Without markers `write` sums each payload slice while copying it
    /// (one fused call per slice) and the small fields in one call per run
    /// of them; with markers it sums the FPDU once after copying it.
    #[test]
    fn write_fuses_payload_copy_and_crc() {
        let payload = [5u8; 1430];
        let calls = Calls(Default::default());
        let mut out = [0u8; 2048];
        let n = Tx::new(true, false)
            .write(
                &calls,
                &[1u8; 14],
                &[&payload[..1000], &payload[1000..]],
                &mut out,
            )
            .unwrap();
        // Length + header, the two pieces, the pad (2 + 1444 = 1446 -> 2).
        assert_eq!(
            *calls.0.borrow(),
            [(16, false), (1000, true), (430, true), (2, false)]
        );
        let mut want = [0u8; 2048];
        let m = Tx::new(true, false)
            .write(&SoftCrc32c, &[1u8; 14], &[&payload], &mut want)
            .unwrap();
        assert_eq!(&out[..n], &want[..m]);
        // Markers: one CRC call over the whole FPDU, markers included.
        calls.0.borrow_mut().clear();
        let n = Tx::new(true, true)
            .write(&calls, &[1u8; 14], &[&payload], &mut out)
            .unwrap();
        assert_eq!(*calls.0.borrow(), [(n - CRC_LEN, false)]);
        // CRC off: nothing summed, with or without markers.
        for markers in [false, true] {
            calls.0.borrow_mut().clear();
            let n = Tx::new(false, markers)
                .write(&calls, &[1u8; 14], &[&payload], &mut out)
                .unwrap();
            assert!(calls.0.borrow().is_empty());
            assert_eq!(out[n - CRC_LEN..n], [0; 4]);
        }
    }

    #[test]
    fn segments_are_zero_copy() {
        let payload = [7u8; 1000];
        let parts: [&[u8]; 1] = [&payload];
        let mut tx = Tx::new(false, true);
        let mut w = tx.fpdu(b"0123456789abcdef", &parts).unwrap();
        let mut n_data = 0;
        let mut total = 0;
        while let Some(s) = w.next_segment(&SoftCrc32c) {
            if let Segment::Data(d) = s {
                // Every data segment points into the caller's buffers.
                let inside = |buf: &[u8]| {
                    let r = buf.as_ptr_range();
                    r.start <= d.as_ptr() && d.as_ptr_range().end <= r.end
                };
                assert!(inside(&payload) || inside(b"0123456789abcdef"));
                n_data += 1;
            }
            total += s.bytes().len();
        }
        assert_eq!(total, w.wire_len());
        assert!(n_data >= 3);
        assert_eq!(w.next_segment(&SoftCrc32c), None);
    }

    #[test]
    fn errors() {
        let big = vec![0u8; 65536];
        let mut tx = Tx::new(false, false);
        assert_eq!(tx.fpdu(&big, &[]).err(), Some(TxError::TooLong));
        let mut out = [0u8; 11];
        assert_eq!(
            tx.write(&SoftCrc32c, b"abc", &[], &mut out),
            Err(TxError::BufferTooSmall)
        );
        assert_eq!(tx.position(), 0);
        assert_eq!(tx.mulpdu(1460), 1454);
        assert_eq!(Tx::new(true, true).wire_len(usize::MAX), usize::MAX);
        assert!(!tx.crc() && !tx.markers());
    }

    /// Writes FPDUs for `msgs` starting at `pos` and returns the stream.
    pub(crate) fn stream(crc: bool, markers: bool, msgs: &[Vec<u8>]) -> Vec<u8> {
        let mut tx = Tx::new(crc, markers);
        let mut out = Vec::new();
        for m in msgs {
            let mut buf = vec![0u8; tx.wire_len(m.len())];
            let n = tx.write(&SoftCrc32c, m, &[], &mut buf).unwrap();
            assert_eq!(n, buf.len());
            out.extend_from_slice(&buf);
        }
        out
    }

    /// The FPDU as [`FpduWriter`] produces it: one CRC append per segment.
    fn by_segments(tx: &mut Tx, header: &[u8], payload: &[&[u8]]) -> Vec<u8> {
        let mut w = tx.fpdu(header, payload).unwrap();
        let mut v = Vec::new();
        while let Some(s) = w.next_segment(&SoftCrc32c) {
            v.extend_from_slice(s.bytes());
        }
        assert_eq!(v.len(), w.wire_len());
        v
    }

    proptest! {
        /// `write` (one copy, one CRC call over the FPDU) produces exactly
        /// the octets of the segment path (a CRC append per segment), at
        /// any stream offset (markers at every place relative to the
        /// FPDU, across the 2^32 wrap) and any cut of the payload.
        #[test]
        fn write_matches_segments(
            start in prop_oneof![any::<u32>(), (0u32..64).prop_map(|k| 0u32.wrapping_sub(k * 4))]
                .prop_map(|s| s & !3),
            header in proptest::collection::vec(any::<u8>(), 0..40),
            payload in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..700), 0..5),
            crc: bool, markers: bool,
        ) {
            let parts: Vec<&[u8]> = payload.iter().map(Vec::as_slice).collect();
            let mut a = Tx { crc, markers, pos: start };
            let mut b = a;
            let want = by_segments(&mut a, &header, &parts);
            let mut out = vec![0xEEu8; want.len() + 3];
            let n = b.write(&SoftCrc32c, &header, &parts, &mut out).unwrap();
            prop_assert_eq!(&out[..n], &want[..]);
            prop_assert_eq!(out[n..].to_vec(), vec![0xEEu8; 3]);
            prop_assert_eq!(a, b);
            // One octet short: nothing written, offset kept.
            let mut c = Tx { crc, markers, pos: start };
            let mut short = vec![0xEEu8; want.len() - 1];
            prop_assert_eq!(c.write(&SoftCrc32c, &header, &parts, &mut short), Err(TxError::BufferTooSmall));
            prop_assert!(short.iter().all(|&x| x == 0xEE));
            prop_assert_eq!(c.position(), start);
        }

        #[test]
        fn wire_len_and_positions(msgs in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..1500), 1..8), markers: bool, crc: bool) {
            let s = stream(crc, markers, &msgs);
            let mut tx = Tx::new(crc, markers);
            let mut total = 0usize;
            for m in &msgs {
                total += tx.wire_len(m.len());
                let w = tx.fpdu(m, &[]).unwrap();
                prop_assert_eq!(w.start() as usize + w.wire_len(), total);
            }
            prop_assert_eq!(s.len(), total);
            prop_assert_eq!(s.len() % 4, 0);
            if markers {
                // Every 512th octet starts a marker whose FPDUPTR is a
                // multiple of 4 below 64 KiB.
                for at in (0..s.len()).step_by(512) {
                    prop_assert_eq!(&s[at..at + 2], &[0, 0]);
                    prop_assert_eq!(s[at + 3] & 3, 0);
                }
            }
        }
    }
}
