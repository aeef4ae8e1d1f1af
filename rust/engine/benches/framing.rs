// SPDX-License-Identifier: GPL-2.0
//! MPA framing throughput: build FPDUs with `Tx` (CRC on) and parse them
//! back with `Rx`, copying the payload to its destination, for 4 KiB and
//! 64 KiB messages cut at the MULPDU of a 1448-octet EMSS with a 14-octet
//! DDP tagged header. The reference is CRC32c alone over the same bytes
//! with the `crc32c` crate (SSE4.2 when available): the physical limit,
//! since tx and rx each run the CRC once over every octet.

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use rsiw_engine::crc::Crc32c;
use rsiw_engine::mpa::{Event, Rx, RxConfig, Tx};
use std::hint::black_box;
use std::time::Duration;

struct HwCrc;

impl Crc32c for HwCrc {
    fn append(&self, crc: u32, data: &[u8]) -> u32 {
        crc32c::crc32c_append(crc, data)
    }
}

const EMSS: usize = 1448;
const DDP_HDR: usize = 14;

/// Frames `msg` into `wire`; returns the bytes written.
fn build(tx: &mut Tx, msg: &[u8], wire: &mut [u8]) -> usize {
    let chunk = tx.mulpdu(EMSS) - DDP_HDR;
    let hdr = [0x41u8; DDP_HDR];
    let mut at = 0;
    for part in msg.chunks(chunk) {
        at += tx.write(&HwCrc, &hdr, &[part], &mut wire[at..]).unwrap();
    }
    at
}

/// Parses `wire`, placing payload into `dst`; returns FPDUs seen.
fn parse(rx: &mut Rx, wire: &[u8], dst: &mut [u8]) -> usize {
    let mut placed = 0;
    let mut fpdus = 0;
    for piece in wire.chunks(65536) {
        let mut off = 0;
        while off < piece.len() {
            let step = rx.poll(&HwCrc, &piece[off..]).unwrap();
            match step.event {
                Some(Event::Payload(r)) => {
                    let src = &piece[off..][r];
                    dst[placed..placed + src.len()].copy_from_slice(src);
                    placed += src.len();
                }
                Some(Event::Complete) => fpdus += 1,
                _ => {}
            }
            off += step.consumed;
        }
    }
    fpdus
}

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("mpa_framing");
    g.warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2))
        .sample_size(20);
    for size in [4096usize, 65536] {
        let msg: Vec<u8> = (0..size).map(|i| (i * 7) as u8).collect();
        let mut wire = vec![0u8; size * 2];
        let mut dst = vec![0u8; size];
        g.throughput(Throughput::Bytes(size as u64));
        for markers in [false, true] {
            let name = if markers {
                "tx+rx crc+markers"
            } else {
                "tx+rx crc"
            };
            g.bench_with_input(BenchmarkId::new(name, size), &msg, |b, msg| {
                b.iter(|| {
                    let mut tx = Tx::new(true, markers);
                    let n = build(&mut tx, msg, &mut wire);
                    let mut rx = Rx::new(RxConfig {
                        crc: true,
                        markers,
                        header_len: DDP_HDR,
                    });
                    black_box(parse(&mut rx, &wire[..n], &mut dst))
                })
            });
        }
        let mut tx = Tx::new(true, false);
        let n = build(&mut tx, &msg, &mut wire);
        g.bench_with_input(
            BenchmarkId::new("crc32c x1 (reference)", size),
            &wire[..n],
            |b, w| b.iter(|| black_box(crc32c::crc32c(black_box(w)))),
        );
        g.bench_with_input(
            BenchmarkId::new("crc32c x2 (reference)", size),
            &wire[..n],
            |b, w| {
                b.iter(|| black_box(crc32c::crc32c(black_box(w)) ^ crc32c::crc32c(black_box(w))))
            },
        );
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
