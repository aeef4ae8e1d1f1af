// SPDX-License-Identifier: GPL-2.0
//! The MPA startup machines (`mpa::startup`) fed arbitrary octets in
//! arbitrary chunks, with configurations and the responder's decision
//! taken from the input: no panic, never an octet taken past the peer's
//! frame, and each outcome consistent with the phase.
#![no_main]

use libfuzzer_sys::fuzz_target;
use rsiw_engine::crc::SoftCrc32c;
use rsiw_engine::mpa::negotiate::{CrcPolicy, InitiatorConfig, ResponderConfig};
use rsiw_engine::mpa::startup::{Event, Initiator, Phase, Responder};
use rsiw_engine::wire::mpa::{Repr, RtrSet};

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
    let rtr = |x: u8| RtrSet::from_flags(x & 1 != 0, x & 2 != 0, x & 4 != 0);
    let chunk = usize::from(cfg[7] % 64).max(1);
    let mut taken = 0;
    if cfg[0] & 0x80 != 0 {
        let icfg = InitiatorConfig {
            crc: crc(cfg[0]),
            markers: cfg[0] & 0x10 != 0,
            enhanced: cfg[0] & 0x20 != 0,
            ird: u16::from(cfg[1]),
            ord: u16::from(cfg[2]),
            p2p: (cfg[0] & 0x20 != 0 && cfg[3] & 8 != 0).then(|| rtr(cfg[3])),
            private_data: rest.get(..usize::from(cfg[3] >> 4)).unwrap_or(&[]),
        };
        let Ok(mut m) = Initiator::new(&icfg) else {
            return;
        };
        for c in rest.chunks(chunk) {
            let n = m.receive(&SoftCrc32c, c);
            assert!(n <= c.len());
            taken += n;
            if let Some(Event::Established(p)) = m.poll() {
                assert!(p.initiator);
                assert_eq!(m.params(), Some(p));
                // Exactly the Reply was taken.
                let rep = Repr::parse_bytes(&rest[..taken]).unwrap();
                assert_eq!(rep.buffer_len(), taken);
            }
        }
        if m.phase() != Phase::Established {
            assert_eq!(m.params(), None);
        }
        let t = m.transmit().len();
        m.sent(t);
        assert!(m.transmit().is_empty());
    } else {
        let rcfg = ResponderConfig {
            max_rev: 1 + (cfg[4] & 1),
            crc: crc(cfg[4] >> 1),
            markers: cfg[4] & 0x10 != 0,
            ird: u16::from(cfg[5]),
            ord: u16::from(cfg[6]),
            min_ord: u16::from(cfg[6] >> 4),
            rtr: rtr(cfg[4] >> 5),
        };
        let mut m = Responder::new(&rcfg);
        for c in rest.chunks(chunk) {
            let n = m.receive(c);
            assert!(n <= c.len());
            taken += n;
            if let Some(Event::Request(p)) = m.poll() {
                assert!(!p.initiator);
                // Exactly the Request was taken.
                let req = Repr::parse_bytes(&rest[..taken]).unwrap();
                assert_eq!(req.buffer_len(), taken);
                assert_eq!(p.private_data.as_bytes(), m.peer_private_data());
                let pd = rest.get(..usize::from(cfg[1])).unwrap_or(&[]);
                match cfg[2] % 3 {
                    0 => {
                        if let Ok(q) = m.accept(&rcfg, pd) {
                            assert_eq!(m.phase(), Phase::Established);
                            assert_eq!(q.framing, p.framing);
                            assert!(!m.transmit().is_empty());
                        } else {
                            assert_eq!(m.phase(), Phase::Decide);
                        }
                    }
                    1 if m.reject(pd).is_ok() => assert_eq!(m.phase(), Phase::Rejected),
                    _ => {}
                }
            }
        }
    }
});
