// SPDX-License-Identifier: GPL-2.0
//! Per-message cost of a 64-octet Send through the engine (no CRC, no
//! markers): A's `tx` reading one Send WR into its FPDU, B's `rx` parsing
//! it, placing it into a posted receive and completing it. A lean host
//! (fixed buffers, no allocation) keeps host callbacks out of the numbers
//! as far as possible.
//!
//!   cargo test --release -p rsiw-engine bench_small -- --ignored --nocapture

use super::*;
use crate::crc::SoftCrc32c;
use crate::ddp::{Region, StagTable};
use std::boxed::Box;
use std::collections::VecDeque;
use std::time::Instant;
use std::vec;

const PD: u32 = 7;
const LEN: usize = 64;

struct Lean {
    sq: VecDeque<SendWr>,
    rq: VecDeque<RecvWr>,
    src: [u8; LEN],
    dst: [u8; LEN],
    comps: u64,
    last: Option<Completion>,
}

impl Lean {
    fn new() -> Self {
        Lean {
            sq: VecDeque::with_capacity(1024),
            rq: VecDeque::with_capacity(1024),
            src: core::array::from_fn(|i| i as u8),
            dst: [0; LEN],
            comps: 0,
            last: None,
        }
    }
}

impl StagTable for Lean {
    fn lookup(&self, _stag: u32) -> Option<Region> {
        None
    }
}

impl Host for Lean {
    fn sq_next(&mut self) -> Option<SendWr> {
        self.sq.pop_front()
    }
    fn rq_peek(&mut self) -> Option<RecvWr> {
        self.rq.front().copied()
    }
    fn rq_pop(&mut self) -> Option<RecvWr> {
        self.rq.pop_front()
    }
    fn complete(&mut self, c: Completion) {
        self.comps += 1;
        self.last = Some(c);
    }
    fn event(&mut self, _e: Event) {}
    fn read_source(&mut self, _wr: &Local, offset: u32, dst: &mut [u8]) -> Result<(), TermError> {
        let o = offset as usize;
        dst.copy_from_slice(&self.src[o..o + dst.len()]);
        Ok(())
    }
    fn read_tagged(&mut self, _: u32, _: u64, _: u64, _: &mut [u8]) -> Result<(), TermError> {
        Err(crate::error::rdmap::LOCAL_CATA)
    }
    fn place_tagged(&mut self, _: u32, _: u64, _: u64, _: &[u8]) -> Result<(), TermError> {
        Err(crate::error::rdmap::LOCAL_CATA)
    }
    fn place_recv(&mut self, _wr: &RecvWr, offset: u32, data: &[u8]) -> Result<(), TermError> {
        let o = offset as usize;
        self.dst[o..o + data.len()].copy_from_slice(data);
        Ok(())
    }
    fn atomic(&mut self, _: &crate::rdmap::AtomicPlan) -> Result<u64, TermError> {
        Err(crate::error::rdmap::LOCAL_CATA)
    }
    fn write_atomic_result(&mut self, _: &Local, _: u64) -> Result<(), TermError> {
        Err(crate::error::rdmap::LOCAL_CATA)
    }
    fn make_durable(&mut self, _: &crate::wire::commit::Region) -> bool {
        false
    }
    fn invalidate(&mut self, _: u32) -> Result<(), TermError> {
        Err(crate::error::rdmap::LOCAL_CATA)
    }
}

/// The kernel's QP type.
type Qk = Qp<32, 32, NoStartup>;

fn pair() -> (Box<Qk>, Box<Qk>) {
    let f = Framing {
        crc: false,
        markers_tx: false,
        markers_rx: false,
    };
    let mut a = Box::new(Qk::new(QpConfig { pd: PD, emss: 1460 }));
    let mut b = Box::new(Qk::new(QpConfig { pd: PD, emss: 1460 }));
    a.establish(f, 32, 32, None, true);
    b.establish(f, 32, 32, None, false);
    (a, b)
}

fn send_wr(i: u64) -> SendWr {
    SendWr {
        wr_id: i,
        flags: Flags::SIGNALED,
        op: SendOp::Send { invalidate: None },
        len: LEN as u32,
        local: Local {
            stag: 0x15A,
            to: 0x1000,
            handle: 0,
        },
    }
}

fn n_iters() -> u64 {
    std::env::var("RSIW_BENCH_N")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(200_000)
}

/// Cost of one `Instant::now()` pair, to subtract.
fn timer_overhead() -> f64 {
    let k = 1_000_000u32;
    let mut acc = 0u128;
    for _ in 0..k {
        let t0 = Instant::now();
        let t1 = Instant::now();
        acc += (t1 - t0).as_nanos();
    }
    acc as f64 / f64::from(k)
}

#[test]
#[ignore = "a benchmark"]
fn bench_small_send() {
    let n = n_iters();
    let (mut a, mut b) = pair();
    let (mut ha, mut hb) = (Lean::new(), Lean::new());
    let mut buf = vec![0u8; 65536];
    let over = timer_overhead();

    // Interleaved: post, tx, rx, one message at a time.
    let run = |a: &mut Qk, b: &mut Qk, ha: &mut Lean, hb: &mut Lean, buf: &mut [u8], n: u64| {
        let (mut ttx, mut trx) = (0u128, 0u128);
        for i in 0..n {
            hb.rq.push_back(RecvWr {
                wr_id: i,
                len: LEN as u32,
            });
            ha.sq.push_back(send_wr(i));
            let t0 = Instant::now();
            let k = a.tx(ha, &SoftCrc32c, buf);
            let t1 = Instant::now();
            b.rx(hb, &SoftCrc32c, &buf[..k]);
            let t2 = Instant::now();
            ttx += (t1 - t0).as_nanos();
            trx += (t2 - t1).as_nanos();
            assert_eq!(k, 88);
        }
        (ttx, trx)
    };
    // Warm up.
    run(&mut a, &mut b, &mut ha, &mut hb, &mut buf, n / 10);
    ha.comps = 0;
    hb.comps = 0;
    let (ttx, trx) = run(&mut a, &mut b, &mut ha, &mut hb, &mut buf, n);
    assert_eq!((ha.comps, hb.comps), (n, n));
    assert_eq!(hb.dst, ha.src);
    let c = hb.last.unwrap();
    assert_eq!(
        (c.opcode, c.status, c.byte_len),
        (CompOp::Recv, Status::Success, LEN as u32)
    );
    let nf = n as f64;
    std::println!(
        "bench_small interleaved: n={n} timer={over:.1} ns  TX {:.1} ns/msg  RX {:.1} ns/msg  (raw TX {:.1} RX {:.1})",
        ttx as f64 / nf - over,
        trx as f64 / nf - over,
        ttx as f64 / nf,
        trx as f64 / nf,
    );

    // Batched: B batches of 256; 256 tx calls (one FPDU each, out sized
    // to it), then 256 rx calls; one timer pair per batch.
    const B: usize = 256;
    const F: usize = 88;
    let mut wire = vec![0u8; B * F];
    let batches = (n as usize).div_ceil(B);
    let (mut ttx, mut trx) = (0u128, 0u128);
    for bi in 0..batches {
        for j in 0..B {
            let i = (bi * B + j) as u64;
            hb.rq.push_back(RecvWr {
                wr_id: i,
                len: LEN as u32,
            });
            ha.sq.push_back(send_wr(i));
        }
        let t0 = Instant::now();
        for ch in wire.chunks_exact_mut(F) {
            a.tx(&mut ha, &SoftCrc32c, ch);
        }
        let t1 = Instant::now();
        for ch in wire.chunks_exact(F) {
            b.rx(&mut hb, &SoftCrc32c, ch);
        }
        let t2 = Instant::now();
        ttx += (t1 - t0).as_nanos();
        trx += (t2 - t1).as_nanos();
    }
    assert!(ha.sq.is_empty() && hb.rq.is_empty());
    assert_eq!(b.state(), State::Rts);
    let m = (batches * B) as f64;
    std::println!(
        "bench_small batched:     n={} TX {:.1} ns/msg  RX {:.1} ns/msg",
        batches * B,
        ttx as f64 / m,
        trx as f64 / m
    );
    std::println!(
        "sizes: Qp<32,32,NoStartup>={} SendWr={} CurWqe={} Completion={} FpduEncoder={} RxCur={}",
        core::mem::size_of::<Qk>(),
        core::mem::size_of::<SendWr>(),
        core::mem::size_of::<CurWqe>(),
        core::mem::size_of::<Completion>(),
        core::mem::size_of::<FpduEncoder>(),
        core::mem::size_of::<rx::RxCur>(),
    );
}
