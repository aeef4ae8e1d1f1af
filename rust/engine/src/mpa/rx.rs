// SPDX-License-Identifier: GPL-2.0
//! Incremental FPDU receiver (RFC 5044 sections 4.1 to 4.4 and 6).
//!
//! [`Rx`] is fed one direction's TCP byte stream in chunks of any size,
//! down to one octet, and turns it into [`Event`]s. It never copies
//! payload: it buffers only ULPDU_LENGTH, the first few ULPDU octets the
//! upper layer asked for (at most [`MAX_HEADER`]), a marker and the CRC
//! field. It strips markers and pad, checks markers (FPDUPTR) and the CRC
//! incrementally through [`Crc32c`], and fails with a [`TermError`].
//!
//! The CRC is not fed field by field: when an FPDU's octets first need it,
//! it runs in one call over everything of that FPDU the input holds up to
//! the CRC field (ULPDU_LENGTH, header, payload, markers, pad), and the
//! events that follow only count those octets down. An FPDU that lies
//! whole in one input costs one CRC call, one split across inputs one per
//! input; an accelerated CRC32c gets the largest spans there are.
//!
//! # Driving it
//!
//! ```text
//! let mut off = 0;
//! while off < chunk.len() {
//!     let step = rx.poll(&crc, &chunk[off..])?;        // Err: send Terminate
//!     match step.event {
//!         Some(Event::Header { ulpdu_len }) => {
//!             // rx.header(): the first min(ulpdu_len, header_len) octets.
//!             // If the upper layer needs more (e.g. the opcode says the
//!             // header is longer), call rx.extend_header(n) now.
//!         }
//!         Some(Event::Payload(r)) => { /* copy chunk[off..][r] to its target */ }
//!         Some(Event::Complete) => { /* FPDU done, CRC (if on) good */ }
//!         Some(Event::Marker { .. }) | None => {}
//!     }
//!     off += step.consumed;
//! }
//! ```
//!
//! Each `poll` stops at the first event, so payload ranges are always
//! sub-ranges of the slice given to that call; `event == None` means all
//! of it was consumed and more stream is needed. In the kernel the chunks
//! are the linear pieces of the skbs `tcp_read_sock` hands over; payload
//! goes straight from the skb to the destination pages (one copy). The host
//! endpoint feeds what `read()` returned.
//!
//! After an error every further `poll` returns the same error.

use core::ops::Range;

use crate::crc::Crc32c;
use crate::error::{llp, TermError};
use crate::mpa::markers;
use crate::wire::fpdu::{fpdu_len, pad_len, CRC_LEN, MARKER_LEN};

/// The most ULPDU header octets [`Rx`] buffers: DDP untagged header (18)
/// plus the largest RDMAP header, the RFC 7306 Atomic Request (52), is 70;
/// rounded up with room to spare.
pub const MAX_HEADER: usize = 96;

/// Receiver settings for one direction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RxConfig {
    /// CRC negotiated on: check the CRC field (otherwise it is ignored).
    pub crc: bool,
    /// We asked for markers (our M bit): expect and strip them.
    pub markers: bool,
    /// ULPDU octets to buffer before [`Event::Header`] (clamped to
    /// [`MAX_HEADER`]); [`Rx::extend_header`] can raise it per FPDU.
    pub header_len: usize,
}

/// What [`Rx::poll`] found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Event {
    /// A new FPDU's ULPDU_LENGTH and its first octets are known; read them
    /// with [`Rx::header`]. Payload (if any) follows.
    Header {
        /// ULPDU_LENGTH.
        ulpdu_len: u16,
    },
    /// The next ULPDU octets after the header are `input[range]`.
    Payload(Range<usize>),
    /// A marker was checked and skipped.
    Marker {
        /// Its FPDUPTR.
        fpduptr: u16,
    },
    /// The FPDU ended; its CRC matched (or CRC is off).
    Complete,
}

/// Result of one [`Rx::poll`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Step {
    /// Input octets consumed (the next call starts after them).
    pub consumed: usize,
    /// The event, or `None` when all input was consumed without one.
    pub event: Option<Event>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    /// Collecting ULPDU_LENGTH (`have` octets so far).
    Len { have: u8 },
    /// Collecting header octets.
    Header,
    /// Header event given; payload not started yet.
    HeaderReady,
    /// Passing payload octets through.
    Payload,
    /// Skipping pad octets.
    Pad,
    /// Collecting the CRC field.
    Crc,
}

/// The incremental receiver; see the module docs.
#[derive(Clone, Debug)]
pub struct Rx {
    cfg: RxConfig,
    state: State,
    /// Stream offset of the next input octet.
    pos: u32,
    /// Stream offset where the current FPDU started.
    fpdu_start: u32,
    crc: u32,
    /// Octets from `pos` on that `crc` already covers: the CRC runs ahead
    /// over as much of the FPDU as the input holds, in one call.
    crc_ahead: usize,
    /// Stream offset of the current FPDU's CRC field (once its
    /// ULPDU_LENGTH is known).
    crc_at: u32,
    len_buf: [u8; 2],
    ulpdu_len: u16,
    hdr: [u8; MAX_HEADER],
    hdr_have: usize,
    hdr_want: usize,
    body_left: usize,
    pad_left: usize,
    tail: [u8; 4],
    tail_have: usize,
    /// Octets of a marker collected so far; `Some` while inside one.
    marker: Option<usize>,
    mbuf: [u8; 4],
    /// A marker of the current FPDU disagreed with ULPDU_LENGTH framing
    /// while CRC is on: reported at the FPDU's end if its CRC is good.
    marker_err: Option<TermError>,
    error: Option<TermError>,
}

impl Rx {
    /// A receiver at the start of full operation phase (stream offset 0 is
    /// the first octet after the peer's MPA Request/Reply).
    pub fn new(cfg: RxConfig) -> Self {
        Self::at(cfg, 0)
    }

    /// A receiver whose next octet has stream offset `pos` and starts an FPDU.
    pub fn at(cfg: RxConfig, pos: u32) -> Self {
        let cfg = RxConfig {
            header_len: cfg.header_len.min(MAX_HEADER),
            ..cfg
        };
        Rx {
            cfg,
            state: State::Len { have: 0 },
            pos,
            fpdu_start: pos,
            crc: 0,
            crc_ahead: 0,
            crc_at: pos,
            len_buf: [0; 2],
            ulpdu_len: 0,
            hdr: [0; MAX_HEADER],
            hdr_have: 0,
            hdr_want: 0,
            body_left: 0,
            pad_left: 0,
            tail: [0; 4],
            tail_have: 0,
            marker: None,
            mbuf: [0; 4],
            marker_err: None,
            error: None,
        }
    }

    /// The settings.
    pub fn config(&self) -> RxConfig {
        self.cfg
    }

    /// Stream offset of the next octet expected.
    pub fn position(&self) -> u32 {
        self.pos
    }

    /// ULPDU_LENGTH of the current FPDU (valid from [`Event::Header`]).
    pub fn ulpdu_len(&self) -> u16 {
        self.ulpdu_len
    }

    /// The header octets buffered for the current FPDU.
    pub fn header(&self) -> &[u8] {
        self.hdr.get(..self.hdr_have).unwrap_or(&[])
    }

    /// Whether the receiver sits between FPDUs (a clean place to stop).
    pub fn at_boundary(&self) -> bool {
        self.state == State::Len { have: 0 } && self.marker.is_none()
    }

    /// The error that stopped the receiver, if any.
    pub fn error(&self) -> Option<TermError> {
        self.error
    }

    /// Right after [`Event::Header`]: buffer the first `total` ULPDU octets
    /// (capped by ULPDU_LENGTH) before payload starts; another
    /// [`Event::Header`] follows when they are in. Returns `false` (and
    /// changes nothing) if called at any other time or with `total` above
    /// [`MAX_HEADER`].
    pub fn extend_header(&mut self, total: usize) -> bool {
        if self.state != State::HeaderReady || total > MAX_HEADER {
            return false;
        }
        let want = total.min(usize::from(self.ulpdu_len));
        if want > self.hdr_have {
            self.hdr_want = want;
            self.state = State::Header;
        }
        true
    }

    fn fail(&mut self, e: TermError) -> Result<Step, TermError> {
        self.error = Some(e);
        Err(e)
    }

    /// Consumes input up to the first event; see the module docs.
    pub fn poll<C: Crc32c + ?Sized>(&mut self, crc: &C, input: &[u8]) -> Result<Step, TermError> {
        self.step(crc, input, &mut [])
    }

    /// The fast path for an FPDU that lies whole in `input`: at an FPDU
    /// boundary, markers off, with all of the FPDU (ULPDU_LENGTH, ULPDU,
    /// pad, CRC) at the start of `input`, checks its CRC (if on) in one
    /// call, consumes it and returns the ULPDU's range in `input` and the
    /// octets consumed. The same stream through [`Rx::poll`] gives
    /// [`Event::Header`], [`Event::Payload`] and [`Event::Complete`] for
    /// it, with the payload placed before the CRC is known; here nothing
    /// reaches the upper layer from an FPDU whose CRC fails.
    ///
    /// `Ok(None)` (nothing consumed) when any condition does not hold:
    /// drive [`Rx::poll`] then. Calls of both may be mixed.
    pub fn whole<C: Crc32c + ?Sized>(
        &mut self,
        crc: &C,
        input: &[u8],
    ) -> Result<Option<(Range<usize>, usize)>, TermError> {
        if let Some(e) = self.error {
            return Err(e);
        }
        if self.cfg.markers || self.state != (State::Len { have: 0 }) || self.marker.is_some() {
            return Ok(None);
        }
        let Some(&[a, b]) = input.get(..2) else {
            return Ok(None);
        };
        let ulpdu_len = usize::from(u16::from_be_bytes([a, b]));
        let len = fpdu_len(ulpdu_len);
        let (Some(covered), Some(field)) =
            (input.get(..len - CRC_LEN), input.get(len - CRC_LEN..len))
        else {
            return Ok(None);
        };
        if self.cfg.crc {
            let mut got = [0u8; CRC_LEN];
            got.copy_from_slice(field);
            if u32::from_le_bytes(got) != crc.checksum(covered) {
                // The CRC field is the FPDU's last: the stream stops there.
                self.pos = self.pos.wrapping_add(len as u32);
                self.error = Some(llp::CRC);
                return Err(llp::CRC);
            }
        }
        // len < 2^17: the cast is exact; offsets wrap like TCP.
        self.pos = self.pos.wrapping_add(len as u32);
        self.fpdu_start = self.pos;
        self.ulpdu_len = ulpdu_len as u16;
        Ok(Some((2..2 + ulpdu_len, len)))
    }

    /// [`Rx::poll`] that also places payload: an [`Event::Payload`]`(r)`
    /// has `r.len() <= dst.len()` and `input[r]` has been copied to
    /// `dst[..r.len()]`. Without markers the copy goes through
    /// [`Crc32c::copy_append`], so that each payload octet is read once
    /// for the copy and the CRC together: payload octets are not CRC'd
    /// ahead of the copy, the CRC runs ahead only over ULPDU_LENGTH and the
    /// header. With markers (payload cut every 508 octets) the CRC runs
    /// ahead over the FPDU as in [`Rx::poll`] and the copy is plain. With an
    /// empty `dst` this is [`Rx::poll`]. Calls of both may be mixed.
    pub fn poll_into<C: Crc32c + ?Sized>(
        &mut self,
        crc: &C,
        input: &[u8],
        dst: &mut [u8],
    ) -> Result<Step, TermError> {
        self.step(crc, input, dst)
    }

    // Inlined into both callers: `poll` gets a copy where the placement
    // branches fold away.
    #[inline(always)]
    fn step<C: Crc32c + ?Sized>(
        &mut self,
        crc: &C,
        input: &[u8],
        dst: &mut [u8],
    ) -> Result<Step, TermError> {
        // With markers, payload comes in pieces of at most 508 octets
        // between them: one CRC call ahead over the FPDU and plain copies
        // beat a fused call per piece.
        let place = !dst.is_empty();
        let fuse = place && !self.cfg.markers;
        if let Some(e) = self.error {
            return Err(e);
        }
        let mut i = 0usize;
        loop {
            // Leaving HeaderReady needs no input.
            if self.state == State::HeaderReady {
                self.state = if self.body_left > 0 {
                    State::Payload
                } else {
                    State::Pad
                };
                self.pad_left = pad_len(usize::from(self.ulpdu_len));
            }
            let Some(rest) = input.get(i..) else {
                return Ok(Step {
                    consumed: input.len(),
                    event: None,
                });
            };
            if self.state == State::Pad && self.pad_left == 0 {
                self.state = State::Crc;
                self.tail_have = 0;
            }
            if rest.is_empty() {
                return Ok(Step {
                    consumed: i,
                    event: None,
                });
            }

            // Markers come first: one is due at every 512th octet.
            if self.cfg.markers && (self.marker.is_some() || markers::is_marker_pos(self.pos)) {
                let have = self.marker.unwrap_or(0);
                let n = (MARKER_LEN - have).min(rest.len());
                let (Some(src), Some(dst)) = (rest.get(..n), self.mbuf.get_mut(have..have + n))
                else {
                    return self.fail(llp::MARKER);
                };
                dst.copy_from_slice(src);
                self.consume_crc(crc, rest, n, fuse);
                i += n;
                if have + n < MARKER_LEN {
                    self.marker = Some(have + n);
                    continue;
                }
                self.marker = None;
                let at = self.pos.wrapping_sub(MARKER_LEN as u32);
                // RFC 5044 section 8, code 3 applies "in the event that the
                // CRC is valid": with CRC on, a mismatch is held until the
                // FPDU's CRC is checked (a bad CRC is reported as code 2).
                match markers::check(self.mbuf, at, self.fpdu_start) {
                    Ok(fpduptr) => {
                        return Ok(Step {
                            consumed: i,
                            event: Some(Event::Marker { fpduptr }),
                        });
                    }
                    Err(e) if self.cfg.crc => {
                        self.marker_err.get_or_insert(e);
                        return Ok(Step {
                            consumed: i,
                            event: Some(Event::Marker {
                                fpduptr: markers::fpduptr(self.mbuf),
                            }),
                        });
                    }
                    Err(e) => return self.fail(e),
                }
            }
            let room = if self.cfg.markers {
                markers::to_next_marker(self.pos) as usize
            } else {
                usize::MAX
            };
            let avail = rest.len().min(room);

            match self.state {
                State::Len { have } => {
                    let have = usize::from(have);
                    let n = (2 - have).min(avail);
                    if let (Some(src), Some(dst)) =
                        (rest.get(..n), self.len_buf.get_mut(have..have + n))
                    {
                        dst.copy_from_slice(src);
                    }
                    self.consume_crc(crc, rest, n, fuse);
                    i += n;
                    if have + n < 2 {
                        self.state = State::Len {
                            have: (have + n) as u8,
                        };
                        continue;
                    }
                    self.ulpdu_len = u16::from_be_bytes(self.len_buf);
                    self.crc_at = self.crc_field_at(self.ulpdu_len);
                    self.hdr_have = 0;
                    self.hdr_want = self.cfg.header_len.min(usize::from(self.ulpdu_len));
                    self.state = State::Header;
                    if self.hdr_want == 0 {
                        return Ok(self.header_ready(i));
                    }
                }
                State::Header => {
                    let n = (self.hdr_want - self.hdr_have).min(avail);
                    if let (Some(src), Some(dst)) = (
                        rest.get(..n),
                        self.hdr.get_mut(self.hdr_have..self.hdr_have + n),
                    ) {
                        dst.copy_from_slice(src);
                    }
                    self.consume_crc(crc, rest, n, fuse);
                    self.hdr_have += n;
                    i += n;
                    if self.hdr_have == self.hdr_want {
                        return Ok(self.header_ready(i));
                    }
                }
                State::Payload => {
                    let mut n = self.body_left.min(avail);
                    if place {
                        n = n.min(dst.len());
                    }
                    if fuse {
                        self.place(crc, rest, n, dst);
                    } else {
                        self.consume_crc(crc, rest, n, false);
                        if let (true, Some(s), Some(d)) = (place, rest.get(..n), dst.get_mut(..n)) {
                            d.copy_from_slice(s);
                        }
                    }
                    self.body_left -= n;
                    if self.body_left == 0 {
                        self.state = State::Pad;
                    }
                    let start = i;
                    i += n;
                    return Ok(Step {
                        consumed: i,
                        event: Some(Event::Payload(start..i)),
                    });
                }
                State::Pad => {
                    // RFC 5044 4.1: pad is ignored on receipt, except for the CRC.
                    let n = self.pad_left.min(avail);
                    self.consume_crc(crc, rest, n, fuse);
                    self.pad_left -= n;
                    i += n;
                }
                State::Crc => {
                    let n = (CRC_LEN - self.tail_have).min(avail);
                    if let (Some(src), Some(dst)) = (
                        rest.get(..n),
                        self.tail.get_mut(self.tail_have..self.tail_have + n),
                    ) {
                        dst.copy_from_slice(src);
                    }
                    self.tail_have += n;
                    self.pos = self.pos.wrapping_add(n as u32);
                    i += n;
                    if self.tail_have < CRC_LEN {
                        continue;
                    }
                    if self.cfg.crc && u32::from_le_bytes(self.tail) != self.crc {
                        return self.fail(llp::CRC);
                    }
                    if let Some(e) = self.marker_err.take() {
                        return self.fail(e);
                    }
                    self.state = State::Len { have: 0 };
                    self.fpdu_start = self.pos;
                    self.crc = 0;
                    self.crc_ahead = 0;
                    return Ok(Step {
                        consumed: i,
                        event: Some(Event::Complete),
                    });
                }
                State::HeaderReady => {}
            }
        }
    }

    fn header_ready(&mut self, consumed: usize) -> Step {
        self.body_left = usize::from(self.ulpdu_len) - self.hdr_have;
        self.state = State::HeaderReady;
        Step {
            consumed,
            event: Some(Event::Header {
                ulpdu_len: self.ulpdu_len,
            }),
        }
    }

    /// Stream offset of the CRC field of the FPDU that started at
    /// `fpdu_start` with a ULPDU of `ulpdu_len` octets.
    fn crc_field_at(&self, ulpdu_len: u16) -> u32 {
        let len = fpdu_len(usize::from(ulpdu_len));
        let wire = if self.cfg.markers {
            markers::wire_len(self.fpdu_start, len)
        } else {
            len
        };
        // wire < 2^17: the cast is exact; offsets wrap like TCP.
        self.fpdu_start
            .wrapping_add(wire as u32)
            .wrapping_sub(CRC_LEN as u32)
    }

    /// How many octets of `rest` (starting at `pos`) belong to the current
    /// FPDU before its CRC field, as far as known: up to the CRC field
    /// once ULPDU_LENGTH is known, or peeked from `rest` at the start of an
    /// FPDU; 0 when unknown (ULPDU_LENGTH or a marker split across inputs).
    fn crc_span(&self, rest: &[u8]) -> usize {
        let end = match self.state {
            State::Len { have: 0 } if self.marker.is_none() => {
                // A marker never splits ULPDU_LENGTH (both 4-aligned).
                let off = if self.cfg.markers && markers::is_marker_pos(self.pos) {
                    MARKER_LEN
                } else {
                    0
                };
                match rest.get(off..off + 2) {
                    Some(&[a, b]) => self.crc_field_at(u16::from_be_bytes([a, b])),
                    _ => return 0,
                }
            }
            State::Len { .. } => return 0,
            _ => self.crc_at,
        };
        (end.wrapping_sub(self.pos) as usize).min(rest.len())
    }

    /// Consumes `rest[..n]`, octets the CRC covers, and advances the stream
    /// offset. The CRC is not extended piece by piece: when `rest[..n]` is
    /// not covered yet, it runs over everything of this FPDU that `rest`
    /// holds up to the CRC field (markers included), in one call, and
    /// the following pieces only count down what it covered. They are the
    /// same stream octets whichever input slice brings them again.
    ///
    /// `fuse` ([`Rx::poll_into`]): payload octets are left to
    /// [`Rx::place`], the CRC runs ahead at most to the end of the header
    /// octets still wanted.
    fn consume_crc<C: Crc32c + ?Sized>(&mut self, crc: &C, rest: &[u8], n: usize, fuse: bool) {
        if self.cfg.crc {
            if self.crc_ahead < n {
                let span = self.crc_span(rest);
                let span = if fuse {
                    span.min(self.header_span(rest))
                } else {
                    span
                };
                let end = span.max(n);
                if let Some(b) = rest.get(self.crc_ahead..end) {
                    self.crc = crc.append(self.crc, b);
                }
                self.crc_ahead = end;
            }
            self.crc_ahead -= n;
        }
        self.pos = self.pos.wrapping_add(n as u32);
    }
}

impl Rx {
    /// With [`Rx::poll_into`]: how many octets of `rest` the CRC may run
    /// ahead over without reaching payload. Counted as if no marker lay
    /// in between (a marker only makes it stop short of the payload); 0
    /// while payload is due.
    fn header_span(&self, rest: &[u8]) -> usize {
        match self.state {
            State::Len { have: 0 } if self.marker.is_none() => {
                let off = if self.cfg.markers && markers::is_marker_pos(self.pos) {
                    MARKER_LEN
                } else {
                    0
                };
                match rest.get(off..off + 2) {
                    Some(&[a, b]) => {
                        let hdr = self
                            .cfg
                            .header_len
                            .min(usize::from(u16::from_be_bytes([a, b])));
                        off + 2 + hdr
                    }
                    _ => 0,
                }
            }
            State::Header => self.hdr_want - self.hdr_have,
            State::Pad | State::Crc => usize::MAX,
            State::Len { .. } | State::HeaderReady | State::Payload => 0,
        }
    }

    /// Places `rest[..n]`, payload octets, into `dst[..n]` and advances
    /// the stream offset; the octets the CRC has not covered yet are
    /// copied and summed in one pass.
    fn place<C: Crc32c + ?Sized>(&mut self, crc: &C, rest: &[u8], n: usize, dst: &mut [u8]) {
        let (Some(src), Some(dst)) = (rest.get(..n), dst.get_mut(..n)) else {
            return;
        };
        let covered = if self.cfg.crc {
            self.crc_ahead.min(n)
        } else {
            n
        };
        let (s0, s1) = src.split_at(covered);
        let (d0, d1) = dst.split_at_mut(covered);
        d0.copy_from_slice(s0);
        if !s1.is_empty() {
            self.crc = crc.copy_append(self.crc, s1, d1);
        }
        if self.cfg.crc {
            self.crc_ahead -= covered;
        }
        self.pos = self.pos.wrapping_add(n as u32);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crc::SoftCrc32c;
    use crate::mpa::tx::tests::stream;
    use crate::mpa::Tx;
    use proptest::prelude::*;
    use std::vec;
    use std::vec::Vec;

    /// Received FPDU: header octets + payload octets, per FPDU.
    type Got = Vec<(u16, Vec<u8>)>;

    /// Feeds `s` to an Rx in chunks of the given sizes (cycled).
    fn run(cfg: RxConfig, s: &[u8], chunks: &[usize]) -> Result<(Got, usize), TermError> {
        run_with(cfg, s, chunks, &[], &SoftCrc32c)
    }

    /// [`run`] through [`Rx::poll_into`] with destinations of `caps`
    /// octets (cycled per call; 0 is [`Rx::poll`]), none when `caps` is
    /// empty.
    fn run_with<C: Crc32c>(
        cfg: RxConfig,
        s: &[u8],
        chunks: &[usize],
        caps: &[usize],
        crc: &C,
    ) -> Result<(Got, usize), TermError> {
        let mut rx = Rx::new(cfg);
        let mut calls = 0usize;
        let mut dst = [0xA5u8; 2048];
        let mut got: Got = Vec::new();
        let mut markers = 0;
        let mut at = 0;
        let mut k = 0;
        let mut cur = Vec::new();
        while at < s.len() {
            let n = chunks[k % chunks.len()].clamp(1, s.len() - at);
            k += 1;
            let chunk = &s[at..at + n];
            let mut off = 0;
            while off < chunk.len() {
                let cap = caps.get(calls % caps.len().max(1)).copied().unwrap_or(0);
                calls += 1;
                dst.fill(0xA5);
                let step = rx.poll_into(crc, &chunk[off..], &mut dst[..cap])?;
                assert!(step.consumed <= chunk.len() - off);
                match step.event {
                    Some(Event::Header { ulpdu_len }) => {
                        assert!(rx.header().len() <= cfg.header_len.min(MAX_HEADER));
                        cur = rx.header().to_vec();
                        assert_eq!(ulpdu_len, rx.ulpdu_len());
                    }
                    Some(Event::Payload(r)) => {
                        assert!(!r.is_empty());
                        if cap > 0 {
                            // Placed: exactly the range, nothing beyond it.
                            assert!(r.len() <= cap);
                            assert_eq!(&dst[..r.len()], &chunk[off..][r.clone()]);
                            assert!(dst[r.len()..cap].iter().all(|&x| x == 0xA5));
                        }
                        cur.extend_from_slice(&chunk[off..][r]);
                    }
                    Some(Event::Complete) => {
                        assert_eq!(cur.len(), usize::from(rx.ulpdu_len()));
                        got.push((rx.ulpdu_len(), core::mem::take(&mut cur)));
                    }
                    Some(Event::Marker { .. }) => markers += 1,
                    None => assert_eq!(step.consumed, chunk.len() - off),
                }
                off += step.consumed;
            }
            at += n;
        }
        assert!(rx.at_boundary());
        Ok((got, markers))
    }

    /// Feeds `s` in chunks, each FPDU that lies whole in what is left of
    /// a chunk through [`Rx::whole`], the rest through [`Rx::poll`].
    /// Returns the ULPDUs, how many went the fast way, and whether the
    /// receiver ended between FPDUs.
    fn run_whole(
        cfg: RxConfig,
        s: &[u8],
        chunks: &[usize],
    ) -> Result<(Vec<Vec<u8>>, usize, bool), TermError> {
        let mut rx = Rx::new(cfg);
        let (mut got, mut cur, mut fast) = (Vec::new(), Vec::new(), 0);
        let (mut at, mut k) = (0, 0);
        while at < s.len() {
            let n = chunks[k % chunks.len()].clamp(1, s.len() - at);
            k += 1;
            let chunk = &s[at..at + n];
            let mut off = 0;
            while off < chunk.len() {
                let before = rx.position();
                if let Some((r, used)) = rx.whole(&SoftCrc32c, &chunk[off..])? {
                    assert!(cur.is_empty());
                    assert_eq!(rx.position(), before.wrapping_add(used as u32));
                    assert!(rx.at_boundary());
                    assert_eq!(r.len(), usize::from(rx.ulpdu_len()));
                    got.push(chunk[off..][r].to_vec());
                    off += used;
                    fast += 1;
                    continue;
                }
                assert_eq!(rx.position(), before);
                let step = rx.poll(&SoftCrc32c, &chunk[off..])?;
                match step.event {
                    Some(Event::Header { .. }) => cur = rx.header().to_vec(),
                    Some(Event::Payload(r)) => cur.extend_from_slice(&chunk[off..][r]),
                    Some(Event::Complete) => got.push(core::mem::take(&mut cur)),
                    _ => {}
                }
                off += step.consumed;
            }
            at += n;
        }
        Ok((got, fast, rx.at_boundary()))
    }

    #[test]
    fn whole_takes_only_a_whole_fpdu_at_a_boundary() {
        let msgs = vec![vec![5u8; 40], vec![6u8; 3]];
        let s = stream(true, false, &msgs);
        let first = fpdu_len(40);
        let mut rx = Rx::new(cfg(true, false, 2));
        // One octet short of the first FPDU: nothing consumed.
        assert_eq!(rx.whole(&SoftCrc32c, &s[..first - 1]), Ok(None));
        assert_eq!(rx.whole(&SoftCrc32c, &s[..1]), Ok(None));
        assert_eq!(rx.position(), 0);
        // Mid-FPDU (after poll took the length and header): not at a boundary.
        let st = rx.poll(&SoftCrc32c, &s).unwrap();
        assert!(matches!(st.event, Some(Event::Header { ulpdu_len: 40 })));
        assert_eq!(rx.whole(&SoftCrc32c, &s[st.consumed..]), Ok(None));
        let mut off = st.consumed;
        while !rx.at_boundary() {
            off += rx.poll(&SoftCrc32c, &s[off..]).unwrap().consumed;
        }
        assert_eq!(off, first);
        // The second FPDU whole: ULPDU range and length consumed.
        assert_eq!(
            rx.whole(&SoftCrc32c, &s[off..]),
            Ok(Some((2..5, s.len() - first)))
        );
        assert_eq!(rx.position() as usize, s.len());
        assert_eq!(rx.ulpdu_len(), 3);
        // Markers on: never (payload is cut by markers).
        let s = stream(false, true, &msgs);
        assert_eq!(
            Rx::new(cfg(false, true, 2)).whole(&SoftCrc32c, &s),
            Ok(None)
        );
    }

    #[test]
    fn whole_fails_a_bad_crc_and_stays_failed() {
        let msgs = vec![vec![1u8; 40]];
        let mut s = stream(true, false, &msgs);
        s[10] ^= 0x80;
        let mut rx = Rx::new(cfg(true, false, 2));
        assert_eq!(rx.whole(&SoftCrc32c, &s), Err(llp::CRC));
        assert_eq!(rx.error(), Some(llp::CRC));
        assert_eq!(rx.poll(&SoftCrc32c, &s), Err(llp::CRC));
        assert_eq!(rx.whole(&SoftCrc32c, &s), Err(llp::CRC));
        // CRC off: the field is not checked.
        let s = stream(false, false, &msgs);
        let mut t = s.clone();
        t[10] ^= 0x80;
        let mut rx = Rx::new(cfg(false, false, 2));
        assert_eq!(rx.whole(&SoftCrc32c, &t), Ok(Some((2..42, s.len()))));
    }

    fn cfg(crc: bool, markers: bool, header_len: usize) -> RxConfig {
        RxConfig {
            crc,
            markers,
            header_len,
        }
    }

    #[test]
    fn one_byte_at_a_time_with_markers() {
        let msgs: Vec<Vec<u8>> = (0..5).map(|i| vec![i as u8; 300 + 97 * i]).collect();
        let s = stream(true, true, &msgs);
        let (got, markers) = run(cfg(true, true, 28), &s, &[1]).unwrap();
        assert_eq!(got.iter().map(|g| g.1.clone()).collect::<Vec<_>>(), msgs);
        assert_eq!(markers, s.len().div_ceil(512));
    }

    #[test]
    fn crc_error_is_reported_and_sticky() {
        let msgs = vec![vec![1u8; 40], vec![2u8; 40]];
        let mut s = stream(true, false, &msgs);
        s[10] ^= 0x80;
        assert_eq!(run(cfg(true, false, 8), &s, &[7]), Err(llp::CRC));
        // CRC off: the same corruption passes through.
        let (got, _) = run(cfg(false, false, 8), &s, &[7]).unwrap();
        assert_eq!(got.len(), 2);
        let mut rx = Rx::new(cfg(true, false, 8));
        let mut off = 0;
        let e = loop {
            match rx.poll(&SoftCrc32c, &s[off..]) {
                Ok(st) => off += st.consumed,
                Err(e) => break e,
            }
        };
        assert_eq!(e, llp::CRC);
        assert_eq!(rx.poll(&SoftCrc32c, &s), Err(llp::CRC));
        assert_eq!(rx.error(), Some(llp::CRC));
    }

    #[test]
    fn marker_mismatch() {
        let msgs = vec![vec![9u8; 1000]];
        let mut s = stream(false, true, &msgs);
        s[512 + 3] ^= 4; // FPDUPTR of the second marker
        assert_eq!(run(cfg(false, true, 8), &s, &[64]), Err(llp::MARKER));
        // Low 2 bits and RESERVED are ignored.
        let mut s = stream(false, true, &msgs);
        s[512 + 3] |= 3;
        s[512] = 0xFF;
        assert!(run(cfg(false, true, 8), &s, &[64]).is_ok());
        // With CRC on, a changed RESERVED fails the CRC (markers are covered).
        let mut s = stream(true, true, &msgs);
        s[512] = 0xFF;
        assert_eq!(run(cfg(true, true, 8), &s, &[64]), Err(llp::CRC));
    }

    #[test]
    fn marker_error_only_when_crc_is_valid() {
        // RFC 5044 section 8, error code 3: "In the event that the CRC is
        // valid, received MPA Marker (if enabled) and 'ULPDU Length' fields
        // do not agree on the start of an FPDU."
        let msgs = vec![vec![9u8; 1000], vec![3u8; 20]];
        // A wrong FPDUPTR under a CRC that covers it: the CRC fails first.
        let mut s = stream(true, true, &msgs);
        s[512 + 3] ^= 4;
        assert_eq!(run(cfg(true, true, 8), &s, &[64]), Err(llp::CRC));
        // A sender that computes its CRC over the wrong FPDUPTR: CRC valid,
        // the marker mismatch (code 3) is reported at the FPDU's end, not
        // at the marker; the following FPDU is never started.
        let mut s = stream(true, true, &msgs);
        s[512 + 3] ^= 4;
        refresh_crc(&mut s, 1000);
        let mut rx = Rx::new(cfg(true, true, 8));
        let (mut off, mut saw_marker_after_bad) = (0, false);
        let e = loop {
            match rx.poll(&SoftCrc32c, &s[off..]) {
                Ok(st) => {
                    if off + st.consumed == 516 {
                        saw_marker_after_bad = matches!(st.event, Some(Event::Marker { .. }));
                    }
                    off += st.consumed;
                }
                Err(e) => break e,
            }
        };
        assert!(saw_marker_after_bad);
        assert_eq!(e, llp::MARKER);
        assert_eq!(rx.position() as usize, wire_len_of_first(1000));
        // CRC off: no CRC to wait for, the marker fails at once.
        let mut s = stream(false, true, &msgs);
        s[512 + 3] ^= 4;
        let mut rx = Rx::new(cfg(false, true, 8));
        let mut off = 0;
        let e = loop {
            match rx.poll(&SoftCrc32c, &s[off..]) {
                Ok(st) => off += st.consumed,
                Err(e) => break e,
            }
        };
        assert_eq!((e, off), (llp::MARKER, 512));
    }

    /// Wire length of a first FPDU (starting at offset 0, markers on) with
    /// `ulpdu` octets.
    fn wire_len_of_first(ulpdu: usize) -> usize {
        markers::wire_len(0, crate::wire::fpdu::fpdu_len(ulpdu))
    }

    /// Recomputes the CRC of the first FPDU of a marked stream in place
    /// (covering its markers, RFC 5044 section 4.4), as a sender would.
    fn refresh_crc(s: &mut [u8], ulpdu: usize) {
        let n = wire_len_of_first(ulpdu);
        let c = SoftCrc32c.append(0, &s[..n - CRC_LEN]);
        s[n - CRC_LEN..n].copy_from_slice(&c.to_le_bytes());
    }

    #[test]
    fn zero_length_ulpdu_and_short_ulpdu() {
        let msgs = vec![vec![], vec![5u8; 3], vec![6u8; 100]];
        let s = stream(true, false, &msgs);
        let (got, _) = run(cfg(true, false, 28), &s, &[3, 1, 5]).unwrap();
        assert_eq!(got, vec![(0, vec![]), (3, vec![5; 3]), (100, vec![6; 100])]);
    }

    #[test]
    fn extend_header() {
        let msg: Vec<u8> = (0..200u8).collect();
        let s = stream(true, true, core::slice::from_ref(&msg));
        let mut rx = Rx::new(cfg(true, true, 2));
        assert!(!rx.extend_header(10));
        let mut off = 0;
        let mut headers = Vec::new();
        let mut payload = Vec::new();
        loop {
            let st = rx.poll(&SoftCrc32c, &s[off..]).unwrap();
            match st.event {
                Some(Event::Header { .. }) => {
                    headers.push(rx.header().to_vec());
                    if rx.header().len() == 2 {
                        assert!(!rx.extend_header(MAX_HEADER + 1));
                        assert!(rx.extend_header(18));
                    }
                }
                Some(Event::Payload(r)) => payload.extend_from_slice(&s[off..][r]),
                Some(Event::Complete) => break,
                _ => {}
            }
            off += st.consumed;
        }
        assert_eq!(headers, vec![msg[..2].to_vec(), msg[..18].to_vec()]);
        assert_eq!(payload, msg[18..]);
        assert_eq!(rx.position() as usize, s.len());
    }

    #[test]
    fn empty_input() {
        let mut rx = Rx::new(cfg(true, true, 8));
        assert_eq!(
            rx.poll(&SoftCrc32c, &[]),
            Ok(Step {
                consumed: 0,
                event: None
            })
        );
        assert!(rx.at_boundary());
        assert_eq!(rx.config().header_len, 8);
        assert_eq!(
            Rx::new(cfg(true, true, 1000)).config().header_len,
            MAX_HEADER
        );
    }

    /// A CRC32c that records the length of every call.
    struct Spans(core::cell::RefCell<Vec<usize>>);

    impl Crc32c for Spans {
        fn append(&self, crc: u32, data: &[u8]) -> u32 {
            self.0.borrow_mut().push(data.len());
            SoftCrc32c.append(crc, data)
        }
    }

    /// With the whole stream in one input, the CRC runs once per FPDU over
    /// everything before its CRC field (markers included), however many
    /// events the FPDU yields.
    #[test]
    fn one_crc_call_per_fpdu() {
        let msgs: Vec<Vec<u8>> = (0..6).map(|i| vec![i as u8; 1 + 700 * i]).collect();
        for markers in [false, true] {
            let s = stream(true, markers, &msgs);
            let spans = Spans(Default::default());
            let mut rx = Rx::new(cfg(true, markers, 14));
            let (mut off, mut events, mut fpdus) = (0, 0, 0);
            while off < s.len() {
                let st = rx.poll(&spans, &s[off..]).unwrap();
                events += 1;
                if st.event == Some(Event::Complete) {
                    fpdus += 1;
                }
                off += st.consumed;
            }
            assert_eq!(fpdus, msgs.len());
            assert!(events > 2 * fpdus);
            // Each FPDU's span: its wire length less the CRC field.
            let mut tx = Tx::new(true, markers);
            let want: Vec<usize> = msgs
                .iter()
                .map(|m| {
                    let w = tx.fpdu(m, &[]).unwrap();
                    w.wire_len() - CRC_LEN
                })
                .collect();
            assert_eq!(*spans.0.borrow(), want, "markers {markers}");
        }
    }

    /// A CRC32c that records every call: `(length, fused)`, and checks
    /// that a fused call's destination holds the source.
    struct Calls(core::cell::RefCell<Vec<(usize, bool)>>);

    impl Crc32c for Calls {
        fn append(&self, crc: u32, data: &[u8]) -> u32 {
            self.0.borrow_mut().push((data.len(), false));
            SoftCrc32c.append(crc, data)
        }
        fn copy_append(&self, crc: u32, src: &[u8], dst: &mut [u8]) -> u32 {
            assert_eq!(src.len(), dst.len());
            dst.copy_from_slice(src);
            self.0.borrow_mut().push((src.len(), true));
            SoftCrc32c.append(crc, src)
        }
    }

    /// With [`Rx::poll_into`] and the whole stream in one input, each
    /// FPDU costs one CRC call over ULPDU_LENGTH and the header, one fused
    /// copy+CRC over the payload and (with pad) one over the pad: the
    /// payload is never summed ahead of its copy.
    #[test]
    fn poll_into_fuses_payload_copy_and_crc() {
        let msgs: Vec<Vec<u8>> = (0..6).map(|i| vec![i as u8; 15 + 201 * i]).collect();
        let s = stream(true, false, &msgs);
        let calls = Calls(Default::default());
        let (got, _) = run_with(cfg(true, false, 14), &s, &[s.len()], &[2048], &calls).unwrap();
        assert_eq!(got.into_iter().map(|g| g.1).collect::<Vec<_>>(), msgs);
        let mut want = Vec::new();
        for m in &msgs {
            want.push((2 + 14, false));
            want.push((m.len() - 14, true));
            let pad = pad_len(m.len());
            if pad > 0 {
                want.push((pad, false));
            }
        }
        assert_eq!(*calls.0.borrow(), want);
        // Fused octets: every payload octet, once.
        let fused: usize = calls.0.borrow().iter().filter(|c| c.1).map(|c| c.0).sum();
        assert_eq!(fused, msgs.iter().map(|m| m.len() - 14).sum::<usize>());
    }

    proptest! {
        /// [`Rx::poll_into`] (mixed with [`Rx::poll`] where a cap is 0)
        /// yields the same ULPDUs as the sender sent, places exactly the
        /// payload ranges, and with CRC on sums every octet once.
        #[test]
        fn poll_into_over_any_chunking_reproduces_tx(
            msgs in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..1200), 1..6),
            chunks in proptest::collection::vec(1usize..700, 1..10),
            caps in proptest::collection::vec(0usize..900, 1..6),
            crc: bool, markers: bool, header_len in 0usize..120,
        ) {
            let s = stream(crc, markers, &msgs);
            let calls = Calls(Default::default());
            let (got, nm) = run_with(cfg(crc, markers, header_len), &s, &chunks, &caps, &calls).unwrap();
            prop_assert_eq!(&got.into_iter().map(|g| g.1).collect::<Vec<_>>(), &msgs);
            prop_assert_eq!(nm, if markers { s.len().div_ceil(512) } else { 0 });
            let summed: usize = calls.0.borrow().iter().map(|c| c.0).sum();
            prop_assert_eq!(summed, if crc { s.len() - CRC_LEN * msgs.len() } else { 0 });
        }

        /// [`Rx::whole`] where an FPDU lies whole in the input, [`Rx::poll`]
        /// elsewhere, over any chunking: the same ULPDUs as sent, and a
        /// chunk that holds the whole stream takes every FPDU the fast way.
        #[test]
        fn whole_mixed_with_poll_reproduces_tx(
            msgs in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..1200), 1..6),
            chunks in proptest::collection::vec(1usize..3000, 1..10),
            crc: bool,
        ) {
            let s = stream(crc, false, &msgs);
            let (got, _, end) = run_whole(cfg(crc, false, 2), &s, &chunks).unwrap();
            prop_assert_eq!(&got, &msgs);
            prop_assert!(end);
            let (got, fast, end) = run_whole(cfg(crc, false, 2), &s, &[s.len()]).unwrap();
            prop_assert_eq!(&got, &msgs);
            prop_assert_eq!(fast, msgs.len());
            prop_assert!(end);
        }

        /// Any flipped bit of a CRC'd stream fails [`Rx::whole`] / [`Rx::poll`]
        /// with a CRC (or, for a flipped length, framing) error, never
        /// delivering a corrupted ULPDU whole.
        #[test]
        fn whole_catches_any_flipped_bit(
            msgs in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..1500), 1..4),
            chunks in proptest::collection::vec(1usize..3000, 1..6),
            at in any::<proptest::sample::Index>(), bit in 0u8..8,
        ) {
            let mut s = stream(true, false, &msgs);
            let i = at.index(s.len());
            s[i] ^= 1 << bit;
            match run_whole(cfg(true, false, 2), &s, &chunks) {
                Err(e) => prop_assert_eq!(e, llp::CRC),
                // A ULPDU_LENGTH flipped longer leaves the stream short of
                // the FPDU it now announces: the ones before it arrived
                // intact, nothing of it or after it.
                Ok((got, _, end)) => {
                    prop_assert!(!end);
                    prop_assert!(got.len() < msgs.len());
                    prop_assert_eq!(&got[..], &msgs[..got.len()]);
                }
            }
        }

        /// As `any_flipped_bit_is_caught`, through [`Rx::poll_into`].
        #[test]
        fn poll_into_catches_any_flipped_bit(
            msgs in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..1500), 1..4),
            chunks in proptest::collection::vec(1usize..900, 1..6),
            caps in proptest::collection::vec(0usize..900, 1..6),
            markers: bool, at in any::<proptest::sample::Index>(), bit in 0u8..8,
        ) {
            let mut s = stream(true, markers, &msgs);
            let i = at.index(s.len());
            s[i] ^= 1 << bit;
            let mut rx = Rx::new(cfg(true, markers, 14));
            let mut dst = [0u8; 900];
            let (mut at, mut k, mut done, mut failed) = (0, 0, 0, false);
            'feed: while at < s.len() {
                let n = chunks[k % chunks.len()].min(s.len() - at);
                let cap = caps[k % caps.len()];
                k += 1;
                let chunk = &s[at..at + n];
                let mut off = 0;
                while off < chunk.len() {
                    match rx.poll_into(&SoftCrc32c, &chunk[off..], &mut dst[..cap]) {
                        Ok(st) => {
                            done += usize::from(st.event == Some(Event::Complete));
                            off += st.consumed;
                        }
                        Err(_) => {
                            failed = true;
                            break 'feed;
                        }
                    }
                }
                at += n;
            }
            prop_assert!(failed || done < msgs.len() || !rx.at_boundary());
        }

        #[test]
        fn rx_over_any_chunking_reproduces_tx(
            msgs in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..1200), 1..6),
            chunks in proptest::collection::vec(1usize..700, 1..10),
            crc: bool, markers: bool, header_len in 0usize..120,
        ) {
            let s = stream(crc, markers, &msgs);
            let (got, nm) = run(cfg(crc, markers, header_len), &s, &chunks).unwrap();
            prop_assert_eq!(got.into_iter().map(|g| g.1).collect::<Vec<_>>(), msgs);
            prop_assert_eq!(nm, if markers { s.len().div_ceil(512) } else { 0 });
        }

        /// The CRC that runs ahead covers every octet once: a bit flipped
        /// anywhere in a CRC-protected stream (markers, pad and the CRC
        /// field included), under any chunking, stops the receiver.
        #[test]
        fn any_flipped_bit_is_caught(
            msgs in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..1500), 1..4),
            chunks in proptest::collection::vec(1usize..900, 1..6),
            markers: bool, at in any::<proptest::sample::Index>(), bit in 0u8..8,
        ) {
            let mut s = stream(true, markers, &msgs);
            let i = at.index(s.len());
            s[i] ^= 1 << bit;
            let mut rx = Rx::new(cfg(true, markers, 14));
            let (mut at, mut k, mut done, mut failed) = (0, 0, 0, false);
            'feed: while at < s.len() {
                let n = chunks[k % chunks.len()].min(s.len() - at);
                k += 1;
                let chunk = &s[at..at + n];
                let mut off = 0;
                while off < chunk.len() {
                    match rx.poll(&SoftCrc32c, &chunk[off..]) {
                        Ok(st) => {
                            done += usize::from(st.event == Some(Event::Complete));
                            off += st.consumed;
                        }
                        Err(_) => {
                            failed = true;
                            break 'feed;
                        }
                    }
                }
                at += n;
            }
            prop_assert!(failed || done < msgs.len() || !rx.at_boundary());
        }

        #[test]
        fn rx_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..3000),
                           chunks in proptest::collection::vec(1usize..300, 1..6),
                           crc: bool, markers: bool, header_len in 0usize..200, ext in 0usize..200) {
            let mut rx = Rx::new(cfg(crc, markers, header_len));
            let mut at = 0;
            let mut k = 0;
            'outer: while at < bytes.len() {
                let n = chunks[k % chunks.len()].min(bytes.len() - at);
                k += 1;
                let chunk = &bytes[at..at + n];
                let mut off = 0;
                while off < chunk.len() {
                    match rx.poll(&SoftCrc32c, &chunk[off..]) {
                        Ok(st) => {
                            if let Some(Event::Payload(r)) = &st.event {
                                prop_assert!(r.end <= chunk.len() - off);
                            }
                            if let Some(Event::Header { .. }) = st.event {
                                rx.extend_header(ext);
                            }
                            prop_assert!(st.consumed <= chunk.len() - off);
                            off += st.consumed;
                        }
                        Err(_) => break 'outer,
                    }
                }
                at += n;
            }
        }
    }
}
