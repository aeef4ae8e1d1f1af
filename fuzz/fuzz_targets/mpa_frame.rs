// SPDX-License-Identifier: GPL-2.0
//! MPA Request/Reply parsing and both sides of the negotiation, with
//! arbitrary bytes as request and reply and configurations taken from the
//! input.
#![no_main]

use libfuzzer_sys::fuzz_target;
use rsiw_engine::mpa::negotiate::{
    check_reply, judge_request, request, CrcPolicy, InitiatorConfig, ResponderConfig,
};
use rsiw_engine::wire::mpa::{frame_len, Frame, Kind, Repr, RtrSet};

fn crc(b: u8) -> CrcPolicy {
    match b % 3 {
        0 => CrcPolicy::IfPeerAsks,
        1 => CrcPolicy::Required,
        _ => CrcPolicy::Never,
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((cfg, rest)) = data.split_first_chunk::<8>() else {
        return;
    };
    let split = usize::from(cfg[7]).min(rest.len());
    let (a, b) = rest.split_at(split);
    let rtr = |x: u8| RtrSet::from_flags(x & 1 != 0, x & 2 != 0, x & 4 != 0);
    let icfg = InitiatorConfig {
        crc: crc(cfg[0]),
        markers: cfg[0] & 0x10 != 0,
        enhanced: cfg[0] & 0x20 != 0,
        ird: u16::from(cfg[1]) | if cfg[0] & 0x40 != 0 { 0x3F00 } else { 0 },
        ord: u16::from(cfg[2]),
        p2p: (cfg[0] & 0xA0 == 0xA0).then(|| rtr(cfg[3])),
        private_data: b.get(..usize::from(cfg[3] >> 3)).unwrap_or(&[]),
    };
    let rcfg = ResponderConfig {
        max_rev: 1 + (cfg[4] & 1),
        crc: crc(cfg[4] >> 1),
        markers: cfg[4] & 0x10 != 0,
        ird: u16::from(cfg[5]),
        ord: u16::from(cfg[6]),
        min_ord: u16::from(cfg[6] >> 4),
        rtr: rtr(cfg[4] >> 5),
    };
    let _ = frame_len(a, Kind::Request);
    let _ = frame_len(b, Kind::Reply);
    if let Ok(req) = Repr::parse(&Frame::new_unchecked(a)) {
        let mut out = [0u8; 600];
        match judge_request(&rcfg, &req) {
            Ok(offer) => {
                if let Ok(rep) = offer.accept(b) {
                    let _ = rep.emit_bytes(&mut out);
                }
            }
            Err(rej) => {
                if let Ok(rep) = rej.reply(a) {
                    let _ = rep.emit_bytes(&mut out);
                }
            }
        }
        // Re-encoding a parsed frame reproduces its fields.
        let mut again = [0u8; 600];
        if let Ok(n) = req.emit_bytes(&mut again) {
            assert_eq!(Repr::parse_bytes(&again[..n]), Ok(req));
        }
    }
    if request(&icfg).is_ok() {
        if let Ok(rep) = Repr::parse(&Frame::new_unchecked(b)) {
            let _ = check_reply(&icfg, &rep);
        }
    }
});
