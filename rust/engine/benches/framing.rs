// SPDX-License-Identifier: GPL-2.0
//! MPA framing + CRC32c throughput on the host, printed as a table next to
//! CRC32c alone over the same bytes (not a test: nothing here passes or
//! fails on speed).
//!
//! Messages of 4 KiB and 64 KiB are cut at the MULPDU of a 1448-octet EMSS
//! with a 14-octet DDP tagged header, as the QP does, CRC on, markers off
//! and on:
//!
//! * `tx`: [`Tx::write`] frames each piece into one wire buffer (payload
//!   copy fused with the CRC, markers, pad, CRC field);
//! * `rx`: [`Rx::poll_into`] parses that wire and places the payload in
//!   its destination (the placement copy, fused with the CRC);
//! * `rx poll+copy`: [`Rx::poll`] (CRC ahead over each FPDU) and the
//!   caller's copy of each payload range, a second pass over the octets;
//! * `rx poll`: [`Rx::poll`] alone, the payload not copied: the engine's
//!   parsing and CRC without the placement;
//! * `rx whole`: [`Rx::whole`] per FPDU (markers off), the receive fast
//!   path of the QP for an FPDU that lies whole in its input: one CRC call
//!   over the FPDU and the header checks, the payload not copied;
//! * `tx+rx`: `tx` then `rx`, as one iteration.
//!
//! Every case and reference uses the same CRC32c function, `HwCrc`
//! (benches/common/hwcrc.rs: three interleaved `crc32` chains over any
//! span of 192 octets or more, fused copy). References, measured in the
//! same rounds: `crc32c x1` is CRC32c over the whole wire in one call (the
//! physical limit of `tx` and of `rx`, each of which must run the CRC over
//! every octet once), `crc32c x2` twice that (the limit of `tx+rx`),
//! `crc32c per FPDU` one call per FPDU (the granularity MPA imposes),
//! `copy+crc32c per FPDU` the payload of each FPDU copied and summed in
//! one fused call (the bound of `tx` and `rx`, which must also copy),
//! `crate x1` / `crate per FPDU` the same with the `crc32c` crate (the
//! implementation the bench used before), `table per FPDU` with the
//! engine's slicing-by-16 `TableCrc32c` (what rsiw.ko runs where the CPU's
//! `crc32` instruction is emulated), and `memcpy` the message once.
//!
//! All figures are message octets per second. The CPU may be shared: each
//! case is timed in `--rounds N` (default 15) rounds of about 20 ms,
//! interleaved with the other cases, and the table shows the best and the
//! median round; a ratio is best over best of two cases of the same run.
//!
//! `cargo bench --bench framing -- [--rounds N] [--no-refs] [CASE]`: CASE
//! (e.g. `"rx markers"`) runs that case alone with the references (without
//! them with `--no-refs`, e.g. under `perf record`).

use rsiw_engine::crc::{Crc32c, TableCrc32c};
use rsiw_engine::mpa::{Event, Rx, RxConfig, Tx};
use rsiw_engine::wire::fpdu;
use std::hint::black_box;
use std::time::{Duration, Instant};

#[path = "common/hwcrc.rs"]
mod hwcrc;
use hwcrc::HwCrc;

const EMSS: usize = 1448;
const DDP_HDR: usize = 14;
const ROUND: Duration = Duration::from_millis(20);

/// Frames `msg` into `wire`; returns the bytes written.
fn build(crc: &HwCrc, tx: &mut Tx, msg: &[u8], wire: &mut [u8]) -> usize {
    let chunk = tx.mulpdu(EMSS) - DDP_HDR;
    let hdr = [0x41u8; DDP_HDR];
    let mut at = 0;
    for part in msg.chunks(chunk) {
        at += tx.write(crc, &hdr, &[part], &mut wire[at..]).unwrap();
    }
    at
}

/// Parses `wire`, placing payload into `dst` with [`Rx::poll_into`];
/// returns FPDUs seen.
fn parse(crc: &HwCrc, rx: &mut Rx, wire: &[u8], dst: &mut [u8]) -> usize {
    let mut placed = 0;
    let mut fpdus = 0;
    for piece in wire.chunks(65536) {
        let mut off = 0;
        while off < piece.len() {
            let step = rx
                .poll_into(crc, &piece[off..], &mut dst[placed..])
                .unwrap();
            match step.event {
                Some(Event::Payload(r)) => placed += r.len(),
                Some(Event::Complete) => fpdus += 1,
                _ => {}
            }
            off += step.consumed;
        }
    }
    assert_eq!(placed, dst.len());
    fpdus
}

/// [`parse`] with [`Rx::poll`] and, given `dst`, the caller's copy of
/// each payload range (without it the engine's parsing and CRC alone);
/// returns FPDUs seen.
fn parse_poll(crc: &HwCrc, rx: &mut Rx, wire: &[u8], mut dst: Option<&mut [u8]>) -> usize {
    let mut placed = 0;
    let mut fpdus = 0;
    for piece in wire.chunks(65536) {
        let mut off = 0;
        while off < piece.len() {
            let step = rx.poll(crc, &piece[off..]).unwrap();
            match step.event {
                Some(Event::Payload(r)) => {
                    if let Some(dst) = dst.as_deref_mut() {
                        let src = &piece[off..][r];
                        dst[placed..placed + src.len()].copy_from_slice(src);
                        placed += src.len();
                    }
                }
                Some(Event::Complete) => fpdus += 1,
                _ => {}
            }
            off += step.consumed;
        }
    }
    fpdus
}

/// Checks every FPDU of a marker-less `wire` with [`Rx::whole`] (one CRC
/// call over the FPDU, as the QP's receive does for an FPDU that lies
/// whole in an skb) without placing the payload; returns payload octets.
fn parse_whole(crc: &HwCrc, rx: &mut Rx, wire: &[u8]) -> usize {
    let mut off = 0;
    let mut payload = 0;
    while off < wire.len() {
        let (r, n) = rx.whole(crc, &wire[off..]).unwrap().unwrap();
        payload += r.len() - DDP_HDR;
        off += n;
    }
    payload
}

fn rx_for(markers: bool) -> Rx {
    Rx::new(RxConfig {
        crc: true,
        markers,
        header_len: DDP_HDR,
    })
}

/// The wire spans (FPDU starts and ends) of a marker-less stream.
fn fpdu_spans(msg_len: usize) -> Vec<(usize, usize)> {
    let chunk = fpdu::mulpdu(EMSS, false) - DDP_HDR;
    let mut at = 0;
    let mut v = Vec::new();
    let mut left = msg_len;
    while left > 0 {
        let n = left.min(chunk);
        let len = fpdu::fpdu_len(DDP_HDR + n);
        v.push((at, at + len - fpdu::CRC_LEN));
        at += len;
        left -= n;
    }
    v
}

struct Case<'a> {
    name: String,
    size: usize,
    run: Box<dyn FnMut() + 'a>,
    iters: u64,
    ns: Vec<f64>,
}

impl Case<'_> {
    fn calibrate(&mut self) {
        let mut iters = 1u64;
        loop {
            let t = Instant::now();
            for _ in 0..iters {
                (self.run)();
            }
            let e = t.elapsed();
            if e >= ROUND / 4 {
                let per = e.as_secs_f64() / iters as f64;
                self.iters = ((ROUND.as_secs_f64() / per) as u64).max(1);
                return;
            }
            iters *= 2;
        }
    }

    fn round(&mut self) {
        let t = Instant::now();
        for _ in 0..self.iters {
            (self.run)();
        }
        self.ns
            .push(t.elapsed().as_nanos() as f64 / self.iters as f64);
    }

    /// Best and median throughput in GiB/s of message octets.
    fn gib(&self) -> (f64, f64) {
        let mut v = self.ns.clone();
        v.sort_by(f64::total_cmp);
        let g = |ns: f64| self.size as f64 / ns * 1e9 / f64::from(1u32 << 30);
        (g(v[0]), g(v[v.len() / 2]))
    }
}

fn case<'a>(name: &str, size: usize, run: Box<dyn FnMut() + 'a>) -> Case<'a> {
    Case {
        name: name.into(),
        size,
        run,
        iters: 0,
        ns: Vec::new(),
    }
}

/// A reference case: `sum` called once per FPDU span of `wire` (the
/// granularity MPA imposes), the results folded so none is optimised away;
/// `size` message octets per run.
fn per_fpdu<'a>(
    name: &str,
    size: usize,
    wire: &'a [u8],
    spans: &[(usize, usize)],
    sum: impl Fn(&[u8]) -> u32 + 'a,
) -> Case<'a> {
    let spans = spans.to_vec();
    case(
        name,
        size,
        Box::new(move || {
            let mut x = 0;
            for &(a, b) in &spans {
                x ^= sum(black_box(&wire[a..b]));
            }
            black_box(x);
        }),
    )
}

/// The bench's CRC32c agrees with the `crc32c` crate (append and fused
/// copy) on every length up to 2 KiB and a few long ones, so that no
/// figure comes from a wrong checksum.
fn check_crc(crc: &HwCrc) {
    let data: Vec<u8> = (0..70_000u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    let mut dst = vec![0u8; data.len()];
    let lens = (0..2048).chain([4096, 24_575, 24_576, 24_577, 65_536, 70_000]);
    for n in lens {
        let (a, b) = data[..n].split_at(n / 3);
        let want = crc32c::crc32c(&data[..n]);
        assert_eq!(crc.append(crc.checksum(a), b), want, "append, {n} octets");
        dst[..n].fill(0);
        let c = crc.copy_append(crc.checksum(a), b, &mut dst[..b.len()]);
        assert_eq!(c, want, "copy_append, {n} octets");
        assert_eq!(&dst[..b.len()], b, "copy_append copy, {n} octets");
    }
}

fn main() {
    let mut rounds = 15usize;
    let mut filter = None;
    let mut refs = true;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        if a == "--no-refs" {
            refs = false;
        } else if a == "--rounds" {
            rounds = args.next().and_then(|n| n.parse().ok()).unwrap_or(rounds);
        } else if !a.starts_with('-') {
            filter = Some(a);
        }
    }
    let crc = &HwCrc::new();
    check_crc(crc);
    let sizes = [4096usize, 65536];
    let msgs: Vec<Vec<u8>> = sizes
        .iter()
        .map(|&s| (0..s).map(|i| (i * 7) as u8).collect())
        .collect();
    // One wire per size and marker setting, built once for the rx cases.
    let wires: Vec<Vec<Vec<u8>>> = msgs
        .iter()
        .map(|m| {
            [false, true]
                .iter()
                .map(|&mk| {
                    let mut w = vec![0u8; m.len() * 2];
                    let n = build(crc, &mut Tx::new(true, mk), m, &mut w);
                    w.truncate(n);
                    w
                })
                .collect()
        })
        .collect();

    let mut cases: Vec<Case> = Vec::new();
    for (k, msg) in msgs.iter().enumerate() {
        let size = msg.len();
        for (mi, markers) in [false, true].into_iter().enumerate() {
            let sfx = if markers { " markers" } else { "" };
            let wire = &wires[k][mi];
            let mut out = vec![0u8; size * 2];
            cases.push(case(
                &format!("tx{sfx}"),
                size,
                Box::new(move || {
                    let mut tx = Tx::new(true, markers);
                    black_box(build(crc, &mut tx, black_box(msg), &mut out));
                }),
            ));
            let mut dst = vec![0u8; size];
            cases.push(case(
                &format!("rx{sfx}"),
                size,
                Box::new(move || {
                    let mut rx = rx_for(markers);
                    black_box(parse(crc, &mut rx, black_box(wire), &mut dst));
                }),
            ));
            let mut dst = vec![0u8; size];
            cases.push(case(
                &format!("rx poll+copy{sfx}"),
                size,
                Box::new(move || {
                    let mut rx = rx_for(markers);
                    black_box(parse_poll(crc, &mut rx, black_box(wire), Some(&mut dst)));
                }),
            ));
            cases.push(case(
                &format!("rx poll{sfx}"),
                size,
                Box::new(move || {
                    let mut rx = rx_for(markers);
                    black_box(parse_poll(crc, &mut rx, black_box(wire), None));
                }),
            ));
            if !markers {
                cases.push(case(
                    "rx whole",
                    size,
                    Box::new(move || {
                        let mut rx = rx_for(false);
                        black_box(parse_whole(crc, &mut rx, black_box(wire)));
                    }),
                ));
            }
            let mut out = vec![0u8; size * 2];
            let mut dst = vec![0u8; size];
            cases.push(case(
                &format!("tx+rx{sfx}"),
                size,
                Box::new(move || {
                    let mut tx = Tx::new(true, markers);
                    let n = build(crc, &mut tx, black_box(msg), &mut out);
                    let mut rx = rx_for(markers);
                    black_box(parse(crc, &mut rx, &out[..n], &mut dst));
                }),
            ));
        }
        let wire = &wires[k][0];
        cases.push(case(
            "crc32c x1",
            size,
            Box::new(move || {
                black_box(crc.checksum(black_box(wire)));
            }),
        ));
        cases.push(case(
            "crc32c x2",
            size,
            Box::new(move || {
                black_box(crc.checksum(black_box(wire)) ^ crc.checksum(black_box(wire)));
            }),
        ));
        let spans = fpdu_spans(size);
        cases.push(per_fpdu("crc32c per FPDU", size, wire, &spans, move |d| {
            crc.checksum(d)
        }));
        // The payload of each FPDU copied and summed in one fused call:
        // what `tx` and `rx` cost at best with a placement copy.
        let pay: Vec<(usize, usize)> = spans.iter().map(|&(a, b)| (a + 2 + DDP_HDR, b)).collect();
        let mut dst = vec![0u8; size];
        cases.push(case(
            "copy+crc32c per FPDU",
            size,
            Box::new(move || {
                let mut x = 0;
                let mut at = 0;
                for &(a, b) in &pay {
                    let n = b - a;
                    x ^= crc.copy_append(0, black_box(&wire[a..b]), &mut dst[at..at + n]);
                    at += n;
                }
                black_box((x, &mut dst));
            }),
        ));
        cases.push(case(
            "crate x1",
            size,
            Box::new(move || {
                black_box(crc32c::crc32c(black_box(wire)));
            }),
        ));
        cases.push(per_fpdu(
            "crate per FPDU",
            size,
            wire,
            &spans,
            crc32c::crc32c,
        ));
        cases.push(per_fpdu("table per FPDU", size, wire, &spans, |d| {
            TableCrc32c.checksum(d)
        }));
        let mut dst = vec![0u8; size];
        cases.push(case(
            "memcpy",
            size,
            Box::new(move || {
                dst.copy_from_slice(black_box(msg));
                black_box(&mut dst);
            }),
        ));
    }
    // A FILTER argument keeps the cases whose name is exactly it, plus
    // the references (e.g. `cargo bench --bench framing -- "rx markers"`).
    if let Some(f) = &filter {
        cases.retain(|c| {
            &c.name == f
                || refs && (c.name.starts_with("crc32c") || c.name.starts_with("copy+"))
                || refs && (c.name.starts_with("crate") || c.name.starts_with("table"))
                || refs && c.name == "memcpy"
        });
    }
    for c in &mut cases {
        c.calibrate();
    }
    for r in 0..rounds {
        eprint!("\rround {}/{rounds}", r + 1);
        for c in &mut cases {
            c.round();
        }
    }
    eprintln!();

    println!(
        "MPA framing + CRC32c, CRC on, EMSS {EMSS}, {rounds} rounds (GiB/s of message octets), CRC32c: {}",
        if crc.accelerated() {
            "three-lane crc32+pclmul (benches/common/hwcrc.rs)"
        } else {
            "crc32c crate (no SSE 4.2/PCLMULQDQ)"
        }
    );
    println!();
    println!("| size | case | best | median | best / CRC32c ref |");
    println!("|---|---|---|---|---|");
    for size in sizes {
        let of = |name: &str| {
            cases
                .iter()
                .find(|c| c.size == size && c.name == name)
                .map(|c| c.gib().0)
                .unwrap_or(f64::NAN)
        };
        let (x1, x2) = (of("crc32c x1"), of("crc32c x2"));
        for c in cases.iter().filter(|c| c.size == size) {
            let (best, med) = c.gib();
            let ratio = if x1.is_nan() {
                String::new()
            } else if c.name.starts_with("tx+rx") {
                format!("{:.0}% of x2", 100.0 * best / x2)
            } else if c.name.starts_with("tx")
                || c.name.starts_with("rx")
                || c.name.ends_with("per FPDU") && !c.name.starts_with("crate")
            {
                format!("{:.0}% of x1", 100.0 * best / x1)
            } else {
                String::new()
            };
            println!(
                "| {} KiB | {} | {best:.2} | {med:.2} | {ratio} |",
                size / 1024,
                c.name
            );
        }
    }
}
