// SPDX-License-Identifier: GPL-2.0
//! The incremental FPDU receiver fed arbitrary bytes in arbitrary chunks,
//! with the marker/CRC settings, header length and chunk sizes taken from
//! the input; then a round trip of the same bytes as ULPDUs through the
//! sender and the receiver. The receiver places payload itself
//! (`Rx::poll_into`, fused copy + CRC) into a destination whose size comes
//! from the input too (0: `Rx::poll`). With the input's fast bit set, an
//! FPDU that lies whole in what is left of a chunk goes through
//! `Rx::whole` instead, mixed with the streaming calls.
#![no_main]

use libfuzzer_sys::fuzz_target;
use rsiw_engine::crc::Crc32c;
use rsiw_engine::mpa::{Event, Rx, RxConfig, Tx};

struct HwCrc;

impl Crc32c for HwCrc {
    fn append(&self, crc: u32, data: &[u8]) -> u32 {
        crc32c::crc32c_append(crc, data)
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((cfg, rest)) = data.split_first_chunk::<4>() else {
        return;
    };
    let crc_on = cfg[0] & 1 != 0;
    let markers = cfg[0] & 2 != 0;
    let ext = usize::from(cfg[0] >> 2);
    let header_len = usize::from(cfg[1]);
    let chunk = |k: usize| 1 + usize::from(cfg[2 + k % 2]);
    let cap = usize::from(cfg[2] ^ cfg[3]);
    let fast = cfg[0] & 0x80 != 0;
    let mut dst = [0u8; 256];

    // Arbitrary stream: must never panic, ranges stay inside the input.
    let mut rx = Rx::new(RxConfig {
        crc: crc_on,
        markers,
        header_len,
    });
    let (mut at, mut k) = (0, 0);
    'outer: while at < rest.len() {
        let n = chunk(k).min(rest.len() - at);
        k += 1;
        let piece = &rest[at..at + n];
        let mut off = 0;
        while off < piece.len() {
            if fast {
                let before = rx.position();
                match rx.whole(&HwCrc, &piece[off..]) {
                    Ok(Some((r, used))) => {
                        assert!(used <= piece.len() - off && r.start == 2 && r.end + 4 <= used);
                        assert!(rx.at_boundary());
                        assert_eq!(rx.position(), before.wrapping_add(used as u32));
                        off += used;
                        continue;
                    }
                    Ok(None) => assert_eq!(rx.position(), before),
                    Err(_) => break 'outer,
                }
            }
            match rx.poll_into(&HwCrc, &piece[off..], &mut dst[..cap]) {
                Ok(step) => {
                    assert!(step.consumed <= piece.len() - off);
                    match step.event {
                        Some(Event::Payload(r)) => {
                            assert!(r.end <= piece.len() - off && !r.is_empty());
                            if cap > 0 {
                                assert!(r.len() <= cap);
                                assert_eq!(&dst[..r.len()], &piece[off..][r]);
                            }
                        }
                        Some(Event::Header { .. }) => {
                            assert!(rx.header().len() <= usize::from(rx.ulpdu_len()));
                            rx.extend_header(ext);
                        }
                        None => assert_eq!(step.consumed, piece.len() - off),
                        _ => {}
                    }
                    off += step.consumed;
                }
                Err(_) => break 'outer,
            }
        }
        at += n;
    }

    // Round trip: the input cut into ULPDUs of the chunk sizes.
    let mut tx = Tx::new(crc_on, markers);
    let mut wire = Vec::new();
    let mut msgs = Vec::new();
    let (mut at, mut k) = (0, 0);
    while at < rest.len() {
        let n = (chunk(k) * 7).min(rest.len() - at);
        k += 1;
        let m = &rest[at..at + n];
        let mut buf = vec![0u8; tx.wire_len(m.len())];
        assert_eq!(
            tx.write(&HwCrc, &m[..n / 3], &[&m[n / 3..]], &mut buf),
            Ok(buf.len())
        );
        wire.extend_from_slice(&buf);
        msgs.push(m);
        at += n;
    }
    let mut rx = Rx::new(RxConfig {
        crc: crc_on,
        markers,
        header_len,
    });
    let mut got: Vec<u8> = Vec::new();
    let mut done = 0;
    for piece in wire.chunks(chunk(0)) {
        let mut off = 0;
        while off < piece.len() {
            if fast {
                if let Some((r, used)) = rx.whole(&HwCrc, &piece[off..]).expect("valid stream") {
                    assert!(rx.at_boundary());
                    assert_eq!(&piece[off..][r], msgs[done]);
                    done += 1;
                    off += used;
                    continue;
                }
            }
            let step = rx
                .poll_into(&HwCrc, &piece[off..], &mut dst[..cap])
                .expect("valid stream");
            match step.event {
                Some(Event::Header { .. }) => got = rx.header().to_vec(),
                Some(Event::Payload(r)) => {
                    if cap > 0 {
                        assert_eq!(&dst[..r.len()], &piece[off..][r.clone()]);
                    }
                    got.extend_from_slice(&piece[off..][r]);
                }
                Some(Event::Complete) => {
                    assert_eq!(got.as_slice(), msgs[done]);
                    done += 1;
                }
                _ => {}
            }
            off += step.consumed;
        }
    }
    assert_eq!(done, msgs.len());
});
