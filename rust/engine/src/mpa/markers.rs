// SPDX-License-Identifier: GPL-2.0
//! MPA markers (RFC 5044 sections 4.2 and 4.3).
//!
//! ```text
//!  0                   1                   2                   3
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |           RESERVED            |            FPDUPTR            |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! ```
//!
//! When the receiver of a direction asked for them (its M bit), the sender
//! puts a marker at every 512th octet of that direction's TCP stream,
//! counting from the first octet after the MPA Request/Reply (the start of
//! full operation phase: offset 0 holds the first marker). Positions are
//! kept modulo 2^32 like TCP sequence numbers; 2^32 is a multiple of 512,
//! so the grid survives the wrap.
//!
//! FPDUPTR is the distance back from the marker to the first octet of the
//! FPDU it sits in (the ULPDU_LENGTH field, or the marker itself when the
//! marker falls exactly where an FPDU starts; then FPDUPTR is 0 and the
//! marker counts as part of that FPDU, like the first marker, which RFC
//! 5044 section 4.3 places "immediately preceding the first FPDU" with
//! FPDUPTR 0x0000). Its 2 low bits are sent as zero and ignored on
//! receipt; RESERVED is sent as zero and not checked. The FPDU's CRC
//! covers the markers inside it (Wireshark's dissector computes it the
//! same way). A mismatch is error code 3 only once the CRC is known good
//! (RFC 5044 section 8); `mpa::rx` holds it until then.
//!
//! Because FPDUs, markers and the grid are all 4-octet aligned, a marker
//! never splits ULPDU_LENGTH or the CRC field.

use crate::error::{llp, TermError};
use crate::wire::fpdu::{MARKER_INTERVAL, MARKER_LEN};

const INTERVAL: u32 = MARKER_INTERVAL as u32;

/// Whether a marker sits at stream offset `pos`.
#[inline]
pub const fn is_marker_pos(pos: u32) -> bool {
    pos % INTERVAL == 0
}

/// Octets from `pos` to the next marker position (0 if `pos` is one).
#[inline]
pub const fn to_next_marker(pos: u32) -> u32 {
    (INTERVAL - pos % INTERVAL) % INTERVAL
}

/// How many markers a sender inserts into an FPDU of `unmarked_len` octets
/// (header, ULPDU, pad, CRC) that starts at stream offset `start`.
///
/// Marker `k` sits after `d + 508 k` FPDU octets, `d` being the distance to
/// the first marker position; it is inside the FPDU iff at least one FPDU
/// octet follows it. A marker exactly at the FPDU's end belongs to the next.
pub const fn count(start: u32, unmarked_len: usize) -> usize {
    let d = to_next_marker(start) as usize;
    if unmarked_len <= d {
        0
    } else {
        (unmarked_len - d).div_ceil(MARKER_INTERVAL - MARKER_LEN)
    }
}

/// On-wire length of an FPDU of `unmarked_len` octets starting at `start`.
#[inline]
pub const fn wire_len(start: u32, unmarked_len: usize) -> usize {
    unmarked_len.saturating_add(MARKER_LEN * count(start, unmarked_len))
}

/// The marker for position `marker_pos` inside the FPDU starting at
/// `fpdu_start` (RESERVED zero, FPDUPTR = distance, low bits zero).
#[inline]
pub const fn encode(marker_pos: u32, fpdu_start: u32) -> [u8; 4] {
    let ptr = (marker_pos.wrapping_sub(fpdu_start) as u16) & !3;
    let [hi, lo] = ptr.to_be_bytes();
    [0, 0, hi, lo]
}

/// FPDUPTR of a received marker (RESERVED ignored).
#[inline]
pub const fn fpduptr(marker: [u8; 4]) -> u16 {
    u16::from_be_bytes([marker[2], marker[3]])
}

/// Checks a received marker at `marker_pos` against the FPDU the receiver
/// is in: mismatch is "Marker and ULPDU pointer mismatch" (RFC 5044
/// section 8, LLP code 3). Compared modulo 2^16 with the 2 low bits
/// ignored; an FPDU longer than 64 KiB wraps FPDUPTR.
pub const fn check(marker: [u8; 4], marker_pos: u32, fpdu_start: u32) -> Result<u16, TermError> {
    let got = fpduptr(marker);
    let want = marker_pos.wrapping_sub(fpdu_start) as u16;
    if got & !3 == want & !3 {
        Ok(got)
    } else {
        Err(llp::MARKER)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn positions() {
        assert!(is_marker_pos(0) && is_marker_pos(512) && is_marker_pos(0xFFFF_FE00));
        assert!(!is_marker_pos(4) && !is_marker_pos(511));
        assert_eq!(to_next_marker(0), 0);
        assert_eq!(to_next_marker(4), 508);
        assert_eq!(to_next_marker(0xFFFF_FFFC), 4);
    }

    #[test]
    fn counts() {
        // FPDU at the origin: the first marker precedes its header.
        assert_eq!(count(0, 8), 1);
        // 508 octets fit between two markers: a 508-octet FPDU at 0 has
        // one marker, the next marker (at 512) belongs to the next FPDU.
        assert_eq!(count(0, 508), 1);
        assert_eq!(count(0, 512), 2);
        assert_eq!(count(4, 508), 0);
        assert_eq!(count(4, 512), 1);
        assert_eq!(count(500, 16), 1);
        assert_eq!(count(500, 12), 0);
        assert_eq!(count(500, 8), 0);
        assert_eq!(wire_len(0, 1460), 1460 + 4 * 3);
        // Across the 2^32 wrap.
        assert_eq!(count(0xFFFF_FFF8, 16), 1);
        assert_eq!(wire_len(0, usize::MAX), usize::MAX);
    }

    #[test]
    fn encode_and_check() {
        // Golden: marker 512 octets into an FPDU that started at offset 0
        // (after the first marker): RESERVED 00 00, FPDUPTR 0x0200.
        assert_eq!(encode(512, 0), [0, 0, 0x02, 0x00]);
        assert_eq!(encode(512, 512), [0, 0, 0, 0]);
        assert_eq!(encode(8, 0xFFFF_FFF0), [0, 0, 0, 0x18]);
        assert_eq!(check([0xAB, 0xCD, 0x02, 0x03], 512, 0), Ok(0x0203));
        assert_eq!(check([0, 0, 0x02, 0x04], 512, 0), Err(llp::MARKER));
        assert_eq!(fpduptr([1, 2, 3, 4]), 0x0304);
    }

    #[test]
    fn first_marker_and_fpdu_start_marker() {
        // RFC 5044 section 4.3: markers go "immediately preceding the first
        // FPDU of full operation phase, and at every 512th octet of the TCP
        // octet stream thereafter", so "the first MPA Marker has an FPDUPTR
        // value of 0x0000". Same grid as Wireshark's MPA dissector (relative
        // to the sequence number of the first FPDU octet).
        assert!(is_marker_pos(0));
        assert_eq!(encode(0, 0), [0, 0, 0, 0]);
        assert_eq!(count(0, 8), 1);
        // A later marker that falls exactly where an FPDU starts is the
        // same case: it precedes that FPDU's ULPDU_LENGTH, FPDUPTR 0.
        assert_eq!(encode(1024, 1024), [0, 0, 0, 0]);
        assert_eq!(check([0, 0, 0, 0], 1024, 1024), Ok(0));
        // A marker after the previous FPDU's last octet is not in it.
        assert_eq!(count(1024 - 16, 16), 0);
    }

    proptest! {
        #[test]
        fn count_matches_walk(start in any::<u32>().prop_map(|s| s & !3), len in (2usize..20000).prop_map(|l| l * 4)) {
            // Walk the stream octet by octet (4 at a time: all aligned).
            let (mut pos, mut left, mut n) = (start, len, 0usize);
            while left > 0 {
                if is_marker_pos(pos) {
                    n += 1;
                    pos = pos.wrapping_add(4);
                }
                pos = pos.wrapping_add(4);
                left -= 4;
            }
            prop_assert_eq!(count(start, len), n);
            prop_assert_eq!(wire_len(start, len), len + 4 * n);
        }

        #[test]
        fn encode_check_round_trip(start in any::<u32>(), dist in 0u32..65536) {
            let pos = start.wrapping_add(dist & !3);
            prop_assert!(check(encode(pos, start), pos, start).is_ok());
        }
    }
}
