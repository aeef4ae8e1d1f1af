// SPDX-License-Identifier: GPL-2.0
//! The resumable FPDU encoder (RFC 5044 sections 4.1 to 4.3: length,
//! markers, pad, CRC32c): one FPDU at a time into output of any size,
//! payload copied from the host or taken by reference.

use super::plan::{Out, PayloadRef, SliceOut};
use super::{Host, Local};
use crate::crc::Crc32c;
use crate::error::{self, TermError};
use crate::mpa::markers;
use crate::wire::commit as commitw;
use crate::wire::fpdu::{fpdu_len, pad_len, CRC_LEN, HEADER_LEN, MARKER_LEN};

/// Largest ULPDU header the engine sends: untagged DDP header plus a
/// Commit Request with the most regions.
pub const TX_HDR: usize = 18 + commitw::ID_LEN + commitw::REGION_LEN * commitw::MAX_REGIONS;

/// Where an FPDU's payload comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Src {
    /// No payload.
    None,
    /// A send work request's local data, from `offset`.
    Local { local: Local, offset: u32 },
    /// Registered memory (Read Response source) of the registration `reg`.
    Tagged { stag: u32, reg: u64, to: u64 },
}

impl Src {
    /// The payload `off` octets in, as the host names it (`None`: no payload).
    fn at(self, off: u32) -> Option<PayloadRef> {
        match self {
            Src::Local { local, offset } => Some(PayloadRef::Local {
                local,
                offset: offset.saturating_add(off),
            }),
            Src::Tagged { stag, reg, to } => Some(PayloadRef::Tagged {
                stag,
                reg,
                to: to.wrapping_add(u64::from(off)),
            }),
            Src::None => None,
        }
    }
}

/// Reads payload from `src` into `d`; on failure `d` is zeroed (the
/// octets still go out) and the error returned.
fn read_payload<H: Host + ?Sized>(
    host: &mut H,
    src: Option<PayloadRef>,
    d: &mut [u8],
) -> Option<TermError> {
    let r = match src {
        None => Err(error::rdmap::LOCAL_CATA),
        Some(PayloadRef::Local { local, offset }) => host.read_source(&local, offset, d),
        Some(PayloadRef::Tagged { stag, reg, to }) => host.read_tagged(stag, reg, to, d),
    };
    let e = r.err();
    if e.is_some() {
        d.fill(0);
    }
    e
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    Len,
    Hdr,
    Payload,
    Pad,
    Crc,
}

#[derive(Clone, Copy, Debug)]
struct Cur {
    start: u32,
    ulpdu_len: u16,
    /// The header's length (its octets are [`FpduEncoder::hdr`]'s first).
    hdr_len: usize,
    src: Src,
    payload_len: usize,
    phase: Phase,
    off: usize,
    /// Marker octets already written (0: not inside a marker).
    moff: usize,
    mpos: u32,
    crc: u32,
}

/// A resumable FPDU encoder for one direction: writes an FPDU (length,
/// header, payload pulled from the host, markers, pad, CRC) into output
/// buffers of any size, continuing where the last call stopped. Produces
/// exactly the octets of [`crate::mpa::Tx::write`].
#[derive(Clone, Debug)]
pub struct FpduEncoder {
    crc_on: bool,
    markers: bool,
    /// Offer FPDU payloads of at least this many octets to the host by
    /// reference (`None`: always copy).
    ref_min: Option<usize>,
    pos: u32,
    cur: Option<Cur>,
    /// The header of the FPDU in progress, in its first `Cur::hdr_len`
    /// octets; the rest is stale and never read. Kept here rather than in
    /// `Cur`, so starting an FPDU does not clear it.
    hdr: [u8; TX_HDR],
}

/// Result of [`FpduEncoder::write`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Written {
    /// Octets written.
    pub len: usize,
    /// The FPDU was completed by this call.
    pub finished: bool,
    /// Reading the payload failed (zeros were sent instead).
    pub error: Option<TermError>,
}

impl FpduEncoder {
    /// An encoder at stream offset 0.
    pub const fn new(crc_on: bool, markers: bool) -> Self {
        FpduEncoder {
            crc_on,
            markers,
            ref_min: None,
            pos: 0,
            cur: None,
            hdr: [0; TX_HDR],
        }
    }

    /// Payloads of at least `min` octets are offered to the host by
    /// reference when the output can take them (`None`: never).
    pub fn set_ref_min(&mut self, min: Option<usize>) {
        self.ref_min = min;
    }

    pub(crate) fn ref_min(&self) -> Option<usize> {
        self.ref_min
    }

    /// Whether an FPDU is in progress.
    pub fn busy(&self) -> bool {
        self.cur.is_some()
    }

    /// Stream offset of the next octet.
    pub fn position(&self) -> u32 {
        self.pos
    }

    /// Drops the FPDU in progress (the connection is gone).
    pub fn abandon(&mut self) {
        self.cur = None;
    }

    /// Starts an FPDU with `hdr` followed by `payload_len` octets from
    /// `src`. `false` if one is in progress or the sizes are out of range.
    pub(crate) fn start(&mut self, hdr: &[u8], src: Src, payload_len: usize) -> bool {
        let total = hdr.len().saturating_add(payload_len);
        let (Ok(ulpdu_len), false, true) = (
            u16::try_from(total),
            self.cur.is_some(),
            hdr.len() <= TX_HDR,
        ) else {
            return false;
        };
        if let Some(d) = self.hdr.get_mut(..hdr.len()) {
            d.copy_from_slice(hdr);
        }
        self.cur = Some(Cur {
            start: self.pos,
            ulpdu_len,
            hdr_len: hdr.len(),
            src,
            payload_len,
            phase: Phase::Len,
            off: 0,
            moff: 0,
            mpos: 0,
            crc: 0,
        });
        true
    }

    /// Writes as much of the FPDU in progress as fits into `out`.
    pub fn write<H: Host + ?Sized, C: Crc32c + ?Sized>(
        &mut self,
        host: &mut H,
        crc: &C,
        out: &mut [u8],
    ) -> Written {
        self.write_to(host, crc, &mut SliceOut { buf: out, at: 0 })
    }

    /// Writes as much of the FPDU in progress as `out` takes. Payload
    /// chunks of at least `ref_min` octets are offered to the host by
    /// reference first ([`Host::payload_by_ref`]) when `out` can
    /// record them; otherwise, or when the host declines, they are copied.
    pub(crate) fn write_to<H: Host + ?Sized, C: Crc32c + ?Sized, O: Out + ?Sized>(
        &mut self,
        host: &mut H,
        crc: &C,
        out: &mut O,
    ) -> Written {
        let mut res = Written {
            len: 0,
            finished: false,
            error: None,
        };
        let crc_on = self.crc_on;
        let markers_on = self.markers;
        let ref_min = self.ref_min;
        let hdr = &self.hdr;
        let Some(cur) = self.cur.as_mut() else {
            return res;
        };
        // A whole marker-free FPDU whose payload is copied (the slow path
        // below would not offer it by reference) into one literal span.
        if !markers_on && cur.phase == Phase::Len && cur.off == 0 {
            let offer = cur.src != Src::None
                && cur.payload_len > 0
                && ref_min.is_some_and(|m| cur.payload_len >= m)
                && out.can_ref();
            let total = fpdu_len(usize::from(cur.ulpdu_len));
            if !offer && out.literal_room() >= total {
                let d = out.reserve(total);
                if d.len() == total {
                    res.error = Self::encode_whole(host, crc, crc_on, cur, hdr, d);
                    self.pos = self.pos.wrapping_add(total as u32);
                    self.cur = None;
                    res.len = total;
                    res.finished = true;
                    return res;
                }
            }
        }
        let mut at = 0usize;
        let mut pos = self.pos;
        while out.room() > 0 {
            if markers_on && (cur.moff > 0 || markers::is_marker_pos(pos)) {
                if cur.moff == 0 {
                    cur.mpos = pos;
                }
                let m = markers::encode(cur.mpos, cur.start);
                let d = out.reserve(MARKER_LEN - cur.moff);
                let n = d.len();
                if n == 0 {
                    break;
                }
                if let Some(s) = m.get(cur.moff..cur.moff + n) {
                    d.copy_from_slice(s);
                    if crc_on {
                        cur.crc = crc.append(cur.crc, s);
                    }
                }
                at += n;
                pos = pos.wrapping_add(n as u32);
                cur.moff = (cur.moff + n) % MARKER_LEN;
                continue;
            }
            let room = if markers_on {
                markers::to_next_marker(pos) as usize
            } else {
                usize::MAX
            };
            let n;
            let before = cur.phase;
            match cur.phase {
                Phase::Len => {
                    let b = cur.ulpdu_len.to_be_bytes();
                    let d = out.reserve((2 - cur.off).min(room));
                    n = d.len();
                    if let Some(s) = b.get(cur.off..cur.off + n) {
                        d.copy_from_slice(s);
                        if crc_on {
                            cur.crc = crc.append(cur.crc, d);
                        }
                    }
                    cur.off += n;
                    if cur.off == 2 {
                        cur.phase = Phase::Hdr;
                        cur.off = 0;
                    }
                }
                Phase::Hdr => {
                    let d = out.reserve((cur.hdr_len - cur.off).min(room));
                    n = d.len();
                    if let Some(s) = hdr.get(cur.off..cur.off + n) {
                        d.copy_from_slice(s);
                        if crc_on {
                            cur.crc = crc.append(cur.crc, d);
                        }
                    }
                    cur.off += n;
                    if cur.off == cur.hdr_len {
                        cur.phase = Phase::Payload;
                        cur.off = 0;
                    }
                }
                Phase::Payload => {
                    let want = (cur.payload_len - cur.off).min(room).min(out.room());
                    let off32 = u32::try_from(cur.off).unwrap_or(u32::MAX);
                    let by_ref = cur.src.at(off32);
                    let taken = match (by_ref, ref_min) {
                        (Some(r), Some(min))
                            if want > 0 && cur.payload_len >= min && out.can_ref() =>
                        {
                            let state = crc_on.then_some(cur.crc);
                            match host.payload_by_ref(&r, want, crc, state) {
                                Some(Ok(c)) => {
                                    out.push_ref(want);
                                    if let Some(c) = c {
                                        cur.crc = c;
                                    }
                                    true
                                }
                                // Refused (memory it cannot reference) or
                                // invalid: copy, which reports the error.
                                _ => false,
                            }
                        }
                        _ => false,
                    };
                    if taken {
                        n = want;
                    } else {
                        let d = out.reserve(want);
                        n = d.len();
                        if n > 0 {
                            if let Some(e) = read_payload(host, by_ref, d) {
                                res.error.get_or_insert(e);
                            }
                            if crc_on {
                                cur.crc = crc.append(cur.crc, d);
                            }
                        }
                    }
                    cur.off += n;
                    if cur.off == cur.payload_len {
                        cur.phase = Phase::Pad;
                        cur.off = 0;
                    }
                }
                Phase::Pad => {
                    let pad = pad_len(usize::from(cur.ulpdu_len));
                    let d = out.reserve((pad - cur.off).min(room));
                    n = d.len();
                    d.fill(0);
                    if crc_on && n > 0 {
                        cur.crc = crc.append(cur.crc, d);
                    }
                    cur.off += n;
                    if cur.off == pad {
                        cur.phase = Phase::Crc;
                        cur.off = 0;
                    }
                }
                Phase::Crc => {
                    let v = if crc_on { cur.crc } else { 0 }.to_le_bytes();
                    let d = out.reserve((CRC_LEN - cur.off).min(room));
                    n = d.len();
                    if let Some(s) = v.get(cur.off..cur.off + n) {
                        d.copy_from_slice(s);
                    }
                    cur.off += n;
                    at += n;
                    pos = pos.wrapping_add(n as u32);
                    if cur.off == CRC_LEN {
                        res.finished = true;
                        break;
                    }
                    if n == 0 {
                        break;
                    }
                    continue;
                }
            }
            if n == 0 && cur.phase == before {
                // The output is full (an empty phase moves on instead).
                break;
            }
            at += n;
            pos = pos.wrapping_add(n as u32);
        }
        self.pos = pos;
        if res.finished {
            self.cur = None;
        }
        res.len = at;
        res
    }

    /// Encodes the FPDU `cur` (not started, markers off) into `d`, which
    /// is exactly its length; returns the payload read's error, if any
    /// (its octets are sent as zeros, as the resumable path does).
    fn encode_whole<H: Host + ?Sized, C: Crc32c + ?Sized>(
        host: &mut H,
        crc: &C,
        crc_on: bool,
        cur: &Cur,
        hdr: &[u8; TX_HDR],
        d: &mut [u8],
    ) -> Option<TermError> {
        let mut error = None;
        let body_end = HEADER_LEN + usize::from(cur.ulpdu_len);
        let (covered, field) = d.split_at_mut_checked(d.len().saturating_sub(CRC_LEN))?;
        if let Some(l) = covered.get_mut(..HEADER_LEN) {
            l.copy_from_slice(&cur.ulpdu_len.to_be_bytes());
        }
        let hdr_end = HEADER_LEN + cur.hdr_len;
        if let (Some(h), Some(s)) = (covered.get_mut(HEADER_LEN..hdr_end), hdr.get(..cur.hdr_len)) {
            h.copy_from_slice(s);
        }
        if let Some(p) = covered.get_mut(hdr_end..body_end).filter(|p| !p.is_empty()) {
            error = read_payload(host, cur.src.at(0), p);
        }
        if let Some(pad) = covered.get_mut(body_end..) {
            pad.fill(0);
        }
        let v = if crc_on { crc.checksum(covered) } else { 0 };
        if field.len() == CRC_LEN {
            field.copy_from_slice(&v.to_le_bytes());
        }
        error
    }
}
