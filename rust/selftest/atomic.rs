// SPDX-License-Identifier: GPL-2.0
//! RFC 7306 atomics end to end through the kernel verbs: kernel QPs joined
//! by loopback TCP connections (MPA settled, as in `rsiw_qp_datapath`), the
//! semantics of every atomic verb, the error paths, and a concurrent
//! stress routine that doubles as the atomic ops/s benchmark.

use kernel::prelude::*;

/// `assert!` outside a `#[test]` fn is core's and would BUG the kernel:
/// helpers report a failed check as an error, which fails the test.
macro_rules! check {
    ($c:expr) => {
        if !$c {
            pr_err!(
                "rsiw kunit: check failed (line {}): {}\n",
                line!(),
                stringify!($c)
            );
            return Err(EBADMSG);
        }
    };
}

/// Connections, QP ends and the stress routine, shared by the suites.
#[cfg(rsiw_kunit)]
pub(crate) mod harness {
    use core::sync::atomic::{AtomicI32, AtomicU32, AtomicUsize, Ordering};

    use kernel::{
        prelude::*,
        sync::Arc,
        time::{delay::fsleep, Delta, Instant, Monotonic},
        workqueue,
    };

    use crate::{
        engine::mpa::startup::StreamParams,
        engine::{
            mpa::negotiate::{Framing, RtrMode},
            wire::mpa::Rtr,
        },
        ffi::{
            consumer::cq::{KCq, RawWc, WC_SUCCESS, WC_WR_FLUSH_ERR},
            consumer::device::Found,
            consumer::mr::{KMr, KPd},
            consumer::qp::*,
            mem::pages::access,
            net::netdev::NetDevRef,
            net::socket::TcpSocket,
        },
        qp::{QpState, MAX_IRD, MAX_ORD},
        selftest::util::{negotiated, EMSS},
    };

    /// Creates a device on `lo`, runs `f`, unregisters the device.
    pub(crate) fn with_device(name: &CStr, f: impl FnOnce(&Found) -> Result) -> Result {
        let lo = NetDevRef::by_name(c"lo").ok_or(ENODEV)?;
        crate::device::verbs::create(name, &lo, false)?;
        let dev = Found::by_netdev(&lo).ok_or(ENODEV)?;
        let r = f(&dev);
        dev.unregister();
        r
    }

    /// A QP with its own CQ (the QP drops first).
    pub(crate) struct End {
        pub(crate) qp: KQp,
        pub(crate) cq: KCq,
    }

    impl End {
        fn new(dev: &Found, pd: &KPd, depth: u32) -> Result<Self> {
            let cq = KCq::create(dev, 2 * depth)?;
            let qp = KQp::create(pd, &cq, &cq, depth)?;
            qp.modify(QpState::Init)?;
            Ok(Self { qp, cq })
        }
    }

    pub(crate) fn params(initiator: bool) -> StreamParams {
        let framing = Framing {
            crc: false,
            markers_tx: false,
            markers_rx: false,
        };
        negotiated(
            framing,
            MAX_IRD as u16,
            MAX_ORD as u16,
            Some(RtrMode::Zero(Rtr::Write)),
            initiator,
        )
    }

    /// A connected pair: (requester, responder).
    pub(crate) fn connect(dev: &Found, pd: &KPd, depth: u32) -> Result<(End, End)> {
        let a = End::new(dev, pd, depth)?;
        let b = End::new(dev, pd, depth)?;
        let (sa, sb) = TcpSocket::loopback_pair()?;
        a.qp.qp::<crate::device::Rsiw>()
            .attach(sa, &params(true), EMSS, &[])?;
        b.qp.qp::<crate::device::Rsiw>()
            .attach(sb, &params(false), EMSS, &[])?;
        Ok((a, b))
    }

    /// A fast-registered MR over `mem` with `rights`, its TO range starting
    /// at `iova` (the buffer's address if `None`); returns (MR, STag).
    /// Atomic targets need one: the PD's global rkey grants remote read
    /// and write only (what the core asks `get_dma_mr` for).
    pub(crate) fn fast_reg(
        dev: &Found,
        pd: &KPd,
        mem: &mut [u8],
        iova: Option<u64>,
        rights: u32,
    ) -> Result<(KMr, u32)> {
        let mr = KMr::alloc(pd, 4)?;
        check!(mr.map_buf(dev, mem, 4096)? == 1);
        mr.update_key(0x31);
        let (stag, _) = mr.keys();
        let mut req = crate::mem::mr::FastReg::of(mr.ib::<crate::device::Rsiw>(), stag, rights);
        if let Some(iova) = iova {
            req.iova = iova;
        }
        mr.ib::<crate::device::Rsiw>()
            .mr()
            .fast_register(pd.pd::<crate::device::Rsiw>().id(), &req)?;
        Ok((mr, stag))
    }

    /// Remote atomics and everything else.
    pub(crate) const ALL_RIGHTS: u32 =
        access::LOCAL_WRITE | access::REMOTE_READ | access::REMOTE_WRITE | access::REMOTE_ATOMIC;

    /// Word `i` of `mem`, host order.
    pub(crate) fn word(mem: &[u8], i: usize) -> u64 {
        let mut b = [0u8; 8];
        b.copy_from_slice(&mem[8 * i..8 * i + 8]);
        u64::from_ne_bytes(b)
    }

    pub(crate) fn set_word(mem: &mut [u8], i: usize, v: u64) {
        mem[8 * i..8 * i + 8].copy_from_slice(&v.to_ne_bytes());
    }

    /// One requester of the stress routine.
    struct Worker {
        end: End,
        lkey: u32,
        rkey: u32,
        /// Address of the word it adds 1 to, `ops` times.
        target: u64,
        /// Address of its `ops` result slots (slot k: WR k's original).
        results: u64,
        ops: usize,
        error: AtomicI32,
        /// Stop at the first failed completion instead of failing (the
        /// invalidation race): the rest must be flushed.
        tolerate: bool,
        /// Successful completions so far (all before any failure).
        ok: AtomicUsize,
        /// The status of the first failed completion (`WC_SUCCESS`: none).
        failed: AtomicU32,
    }

    /// WRs in flight per QP (more than the ORD, so the SQ queues some).
    const WINDOW: usize = 48;
    const SQ_DEPTH: u32 = 64;
    /// A worker gives up after this long without a completion.
    const STALL_NS: i64 = 20_000_000_000;

    /// Posts `ops` FetchAdds of 1, keeping `WINDOW` in flight, and polls.
    /// Completions come in order; with `tolerate`, posting stops at the
    /// first failure and every WR after it must be flushed.
    fn hammer(w: &Worker) -> Result {
        let (mut posted, mut completed) = (0usize, 0usize);
        let mut stopped = false;
        let mut progress = Instant::<Monotonic>::now();
        let mut wcs = [RawWc::default(); 8];
        let add1 = AtomicArgs {
            compare_add: 1,
            ..Default::default()
        };
        while completed < posted || (!stopped && completed < w.ops) {
            while !stopped && posted < w.ops && posted - completed < WINDOW {
                let seg = Seg {
                    addr: w.results + 8 * posted as u64,
                    len: 8,
                    lkey: w.lkey,
                };
                match w.end.qp.post_atomic(
                    posted as u64,
                    WR_ATOMIC_FA,
                    &[seg],
                    w.rkey,
                    w.target,
                    add1,
                ) {
                    Ok(()) => posted += 1,
                    // The QP went to Error under us: what was posted is flushed.
                    Err(_) if w.tolerate => stopped = true,
                    Err(e) => return Err(e),
                }
            }
            let n = w.end.cq.poll(&mut wcs);
            if n <= 0 {
                if progress.elapsed().as_nanos() > STALL_NS {
                    return Err(ETIMEDOUT);
                }
                fsleep(Delta::from_micros(20));
                continue;
            }
            for wc in &wcs[..n as usize] {
                let first_failure = w.tolerate && !stopped && wc.status != WC_SUCCESS;
                let flushed = w.tolerate && stopped && wc.status == WC_WR_FLUSH_ERR;
                let good = wc.status == WC_SUCCESS && wc.opcode == WC_FETCH_ADD && !stopped;
                if wc.wr_id as usize != completed || !(good || first_failure || flushed) {
                    pr_err!(
                        "rsiw kunit: atomic wc {:?} (completion {})\n",
                        wc,
                        completed
                    );
                    return Err(EIO);
                }
                if good {
                    w.ok.fetch_add(1, Ordering::Relaxed);
                } else if first_failure {
                    w.failed.store(wc.status, Ordering::Relaxed);
                    stopped = true;
                }
                completed += 1;
            }
            progress = Instant::<Monotonic>::now();
        }
        Ok(())
    }

    /// Marks the word after the hammered ones: it must stay untouched.
    const SENTINEL: u64 = 0x5A5A_A5A5_0123_4567;

    /// `qps` requesters, each on its own connection and CQ, each in its
    /// own work item on the unbound workqueue (so they run on every CPU at
    /// once, and so do the responders' RX softirqs), add 1 to word
    /// `i % words` of one buffer, `ops` times each, keeping many requests
    /// in flight. Checks that every word ends at the number of adds it got
    /// and that the original values returned for a word are exactly 0, 1,
    /// ..., n - 1 (no update lost or duplicated), increasing per QP.
    /// Returns atomic operations per second (for information only).
    pub(crate) fn stress(dev: &Found, qps: usize, words: usize, ops: usize) -> Result<u64> {
        run(dev, qps, words, ops, None)
    }

    /// Ends the registration of the hammered MR during a run: gets the
    /// sum of the QPs' successful completions so far, the STag, the PD.
    pub(crate) type EndRegistration<'a> =
        &'a mut dyn FnMut(&dyn Fn() -> usize, u32, &KPd) -> Result;

    /// [`stress`] with `qps` QPs on distinct words of the one MR while
    /// `end` ends its registration. Then every QP's atomics must be k
    /// successes with originals 0..k, then one `IB_WC_REM_ACCESS_ERR` and
    /// flushes; its word ends at k plus at most the atomics in flight
    /// (executed, but their responses dropped for the Terminate); the
    /// memory must not change after `end` returned; each responder sent
    /// Invalid STag. Returns the atomics that succeeded.
    pub(crate) fn stress_ended(
        dev: &Found,
        qps: usize,
        ops: usize,
        end: EndRegistration<'_>,
    ) -> Result<u64> {
        run(dev, qps, qps, ops, Some(end))
    }

    fn run(
        dev: &Found,
        qps: usize,
        words: usize,
        ops: usize,
        mut end: Option<EndRegistration<'_>>,
    ) -> Result<u64> {
        if qps == 0 || words == 0 || words > qps || (end.is_some() && words != qps) {
            return Err(EINVAL);
        }
        let pd = KPd::alloc(dev, false)?;
        let lkey = pd.local_dma_lkey();
        // Declared before the QPs: dropped after them (no late placement).
        let mut target = KVec::from_elem(0u8, 8 * (words + 1), GFP_KERNEL)?;
        set_word(&mut target, words, SENTINEL);
        let tbase = target.as_ptr() as u64;
        let mut results = KVVec::from_elem(u64::MAX, qps * ops, GFP_KERNEL)?;
        let rbase = results.as_mut_ptr() as u64;
        // One MR over all the words: distinct words of it do not serialise.
        let (mr, rkey) = fast_reg(dev, &pd, &mut target, None, ALL_RIGHTS)?;
        let mut responders = KVec::with_capacity(qps, GFP_KERNEL)?;
        let mut workers: KVec<Arc<Worker>> = KVec::with_capacity(qps, GFP_KERNEL)?;
        for i in 0..qps {
            let (a, b) = connect(dev, &pd, SQ_DEPTH)?;
            responders.push(b, GFP_KERNEL)?;
            let w = Worker {
                end: a,
                lkey,
                rkey,
                target: tbase + 8 * (i % words) as u64,
                results: rbase + (8 * i * ops) as u64,
                ops,
                error: AtomicI32::new(0),
                tolerate: end.is_some(),
                ok: AtomicUsize::new(0),
                failed: AtomicU32::new(WC_SUCCESS),
            };
            workers.push(Arc::new(w, GFP_KERNEL)?, GFP_KERNEL)?;
        }

        let done = Arc::new(AtomicUsize::new(0), GFP_KERNEL)?;
        let start = Instant::<Monotonic>::now();
        let mut spawned = 0;
        for w in workers.iter() {
            let (w, d) = (w.clone(), done.clone());
            let job = move || {
                if let Err(e) = hammer(&w) {
                    w.error.store(e.to_errno(), Ordering::Relaxed);
                }
                // Only the test thread may destroy the QPs (before the
                // device goes): drop this reference before reporting.
                drop(w);
                d.fetch_add(1, Ordering::Release);
            };
            if workqueue::system_unbound()
                .try_spawn(GFP_KERNEL, job)
                .is_ok()
            {
                spawned += 1;
            }
        }
        let mut ended = Ok(None);
        if let Some(end) = end.as_mut() {
            let progress = || {
                workers
                    .iter()
                    .map(|w| w.ok.load(Ordering::Relaxed))
                    .sum::<usize>()
            };
            ended = end(&progress, rkey, &pd).and_then(|()| {
                let mut snapshot = KVec::with_capacity(target.len(), GFP_KERNEL)?;
                snapshot.extend_from_slice(&target, GFP_KERNEL)?;
                Ok(Some(snapshot))
            });
        }
        // Workers end by themselves (done, failed, or stalled).
        while done.load(Ordering::Acquire) < spawned {
            fsleep(Delta::from_millis(1));
        }
        let nanos = start.elapsed().as_nanos().max(1) as u64;
        check!(spawned == qps);
        for w in workers.iter() {
            let e = w.error.load(Ordering::Relaxed);
            if e != 0 {
                pr_err!("rsiw kunit: atomic stress worker failed: {}\n", e);
                return Err(Error::from_errno(e));
            }
        }
        match ended? {
            None => verify(&target, &results, qps, words, ops)?,
            Some(snapshot) => {
                check!(target[..] == snapshot[..]);
                check!(word(&target, words) == SENTINEL);
                let mut total = 0;
                for (i, w) in workers.iter().enumerate() {
                    let ok = w.ok.load(Ordering::Relaxed);
                    check!(ok < ops && w.failed.load(Ordering::Relaxed) == WC_REM_ACCESS_ERR);
                    // Completed atomics are in the word; so may be a few
                    // whose responses the responder's Terminate replaced
                    // (it goes out after the FPDU in flight, queued
                    // responses are dropped: the verbs leave the target of
                    // a failed atomic undefined). At most the ones in flight.
                    let v = word(&target, i);
                    check!(v >= ok as u64 && v <= (ok + WINDOW) as u64);
                    check!((0..ok).all(|k| results[i * ops + k] == k as u64));
                    check!(results[i * ops + ok..(i + 1) * ops]
                        .iter()
                        .all(|&r| r == u64::MAX));
                    total += ok;
                }
                for b in responders.iter() {
                    let mut sent = None;
                    for _ in 0..2000 {
                        sent =
                            b.qp.qp::<crate::device::Rsiw>()
                                .stream_status()
                                .terminate_sent;
                        if sent.is_some() {
                            break;
                        }
                        fsleep(Delta::from_millis(1));
                    }
                    check!(sent == Some(crate::engine::error::rdmap::INVALID_STAG));
                }
                drop(workers);
                drop(responders);
                drop(mr);
                return Ok(total as u64);
            }
        }
        drop(workers);
        drop(responders);
        drop(mr);
        Ok((qps * ops) as u64 * 1_000_000_000 / nanos)
    }

    fn verify(target: &[u8], results: &[u64], qps: usize, words: usize, ops: usize) -> Result {
        check!(word(target, words) == SENTINEL);
        for w in 0..words {
            // QPs `w`, `w + words`, ... add to this word.
            let total = (qps - w).div_ceil(words) * ops;
            check!(word(target, w) == total as u64);
            let mut seen = KVVec::from_elem(false, total, GFP_KERNEL)?;
            for q in (w..qps).step_by(words) {
                let mine = &results[q * ops..(q + 1) * ops];
                check!(mine.windows(2).all(|p| p[0] < p[1]));
                for &orig in mine {
                    check!(orig < total as u64);
                    check!(!seen[orig as usize]);
                    seen[orig as usize] = true;
                }
            }
        }
        Ok(())
    }
}

/// Every atomic verb between two kernel QPs, and what is refused.
#[cfg(rsiw_kunit)]
#[kunit_tests(rsiw_atomic)]
mod semantics {
    use kernel::prelude::*;

    use super::harness::{connect, fast_reg, set_word, with_device, word, End, ALL_RIGHTS};
    use crate::{
        engine::error as term,
        ffi::{
            consumer::cq::{RawWc, WC_SUCCESS},
            consumer::device::Found,
            consumer::mr::KPd,
            consumer::qp::*,
            mem::pages::access,
        },
        mem::mr::MrError,
        qp::QpState,
    };

    /// Posts one atomic on `a` and waits for its completion.
    fn run(
        a: &End,
        wr_id: u64,
        opcode: u32,
        res: Seg,
        rkey: u32,
        addr: u64,
        args: AtomicArgs,
    ) -> Result<RawWc> {
        a.qp.post_atomic(wr_id, opcode, &[res], rkey, addr, args)?;
        a.cq.poll_one(5000).ok_or(ETIMEDOUT)
    }

    fn args(compare_add: u64, compare_add_mask: u64, swap: u64, swap_mask: u64) -> AtomicArgs {
        AtomicArgs {
            compare_add,
            compare_add_mask,
            swap,
            swap_mask,
        }
    }

    fn verbs(dev: &Found) -> Result {
        // What the device promises.
        let (hca, masked_hca, qp_rd_atom, init_rd_atom, res_rd_atom) = dev.atomic_attrs();
        check!(hca && masked_hca);
        check!(qp_rd_atom == 32 && init_rd_atom == 32 && res_rd_atom >= 32);

        let pd = KPd::alloc(dev, false)?;
        let lkey = pd.local_dma_lkey();
        let (a, b) = connect(dev, &pd, 16)?;
        // Word 0 is the target, word 1 a neighbour that must stay as is.
        let mut target = KVec::from_elem(0u8, 16, GFP_KERNEL)?;
        let (_mr, rkey) = fast_reg(dev, &pd, &mut target, None, ALL_RIGHTS)?;
        let mut res = KVec::from_elem(0u64, 32, GFP_KERNEL)?;
        let t = target.as_ptr() as u64;
        let rbase = res.as_mut_ptr() as u64;
        let r = |i: u64| Seg {
            addr: rbase + 8 * i,
            len: 8,
            lkey,
        };
        set_word(&mut target, 1, 0x5A5A);

        // FetchAdd.
        set_word(&mut target, 0, 10);
        let wc = run(&a, 1, WR_ATOMIC_FA, r(0), rkey, t, args(5, 0, 0, 0))?;
        check!((wc.wr_id, wc.status, wc.opcode) == (1, WC_SUCCESS, WC_FETCH_ADD));
        check!(res[0] == 10 && word(&target, 0) == 15);
        // 64-bit wrap.
        set_word(&mut target, 0, u64::MAX);
        run(&a, 2, WR_ATOMIC_FA, r(1), rkey, t, args(2, 0, 0, 0))?;
        check!(res[1] == u64::MAX && word(&target, 0) == 1);

        // CmpSwap, equal then not equal.
        set_word(&mut target, 0, 15);
        let wc = run(&a, 3, WR_ATOMIC_CS, r(2), rkey, t, args(15, 0, 100, 0))?;
        check!((wc.wr_id, wc.status, wc.opcode) == (3, WC_SUCCESS, WC_COMP_SWAP));
        check!(res[2] == 15 && word(&target, 0) == 100);
        let wc = run(&a, 4, WR_ATOMIC_CS, r(3), rkey, t, args(7, 0, 1, 0))?;
        check!((wc.status, wc.opcode) == (WC_SUCCESS, WC_COMP_SWAP));
        check!(res[3] == 100 && word(&target, 0) == 100);

        // Masked FetchAdd (RFC 7306 5.1.1): the mask bits are field MSBs
        // whose carry is dropped. Two 32-bit fields: the low one wraps to
        // 0 without carrying into the high one (a plain add gives 7 << 32).
        set_word(&mut target, 0, 0x0000_0005_FFFF_FFFF);
        let wc = run(
            &a,
            5,
            WR_MASKED_FA,
            r(4),
            rkey,
            t,
            args(0x0000_0001_0000_0001, 0x8000_0000_8000_0000, 0, 0),
        )?;
        check!((wc.wr_id, wc.status, wc.opcode) == (5, WC_SUCCESS, WC_MASKED_FETCH_ADD));
        check!(res[4] == 0x0000_0005_FFFF_FFFF && word(&target, 0) == 0x0000_0006_0000_0000);
        // Eight byte fields.
        set_word(&mut target, 0, 0xFF01_FF01_FF01_FF01);
        run(
            &a,
            6,
            WR_MASKED_FA,
            r(5),
            rkey,
            t,
            args(0x0101_0101_0101_0101, 0x8080_8080_8080_8080, 0, 0),
        )?;
        check!(res[5] == 0xFF01_FF01_FF01_FF01 && word(&target, 0) == 0x0002_0002_0002_0002);

        // Masked CmpSwap (5.1.2): compare only under the compare mask,
        // swap only the swap mask's bits.
        set_word(&mut target, 0, 0x1234);
        let wc = run(
            &a,
            7,
            WR_MASKED_CS,
            r(6),
            rkey,
            t,
            args(0x0034, 0xFF, 0xAB00, 0xFF00),
        )?;
        check!((wc.wr_id, wc.status, wc.opcode) == (7, WC_SUCCESS, WC_MASKED_COMP_SWAP));
        check!(res[6] == 0x1234 && word(&target, 0) == 0xAB34);
        let wc = run(
            &a,
            8,
            WR_MASKED_CS,
            r(7),
            rkey,
            t,
            args(0x0035, 0xFF, 0, u64::MAX),
        )?;
        check!((wc.status, wc.opcode) == (WC_SUCCESS, WC_MASKED_COMP_SWAP));
        check!(res[7] == 0xAB34 && word(&target, 0) == 0xAB34);
        // Differences outside the compare mask do not matter.
        run(
            &a,
            9,
            WR_MASKED_CS,
            r(8),
            rkey,
            t,
            args(0xFF34, 0x00FF, u64::MAX, 0xF),
        )?;
        check!(res[8] == 0xAB34 && word(&target, 0) == 0xAB3F);

        // Many in flight, masked and plain interleaved: each completes in
        // order with its own opcode and the value it saw.
        set_word(&mut target, 0, 0);
        for i in 0..12u64 {
            let (op, a_) = if i % 2 == 0 {
                (WR_ATOMIC_FA, args(1, 0, 0, 0))
            } else {
                (WR_MASKED_FA, args(1, 0, 0, 0))
            };
            a.qp.post_atomic(100 + i, op, &[r(10 + i)], rkey, t, a_)?;
        }
        for i in 0..12u64 {
            let wc = a.cq.poll_one(5000).ok_or(ETIMEDOUT)?;
            let want = if i % 2 == 0 {
                WC_FETCH_ADD
            } else {
                WC_MASKED_FETCH_ADD
            };
            check!((wc.wr_id, wc.status, wc.opcode) == (100 + i, WC_SUCCESS, want));
            check!(res[(10 + i) as usize] == i);
        }
        check!(word(&target, 0) == 12);

        // Refused at post time: misaligned remote address, a result buffer
        // under 8 octets, more than one SGE. Nothing is sent.
        check!(
            a.qp.post_atomic(20, WR_ATOMIC_FA, &[r(20)], rkey, t + 4, args(1, 0, 0, 0))
                == Err(EINVAL)
        );
        let short = Seg { len: 4, ..r(21) };
        check!(
            a.qp.post_atomic(21, WR_ATOMIC_CS, &[short], rkey, t, args(12, 0, 0, 0)) == Err(EINVAL)
        );
        check!(
            a.qp.post_atomic(22, WR_MASKED_FA, &[r(22), r(23)], rkey, t, args(1, 0, 0, 0))
                == Err(EINVAL)
        );
        check!(a.cq.poll_one(50).is_none());
        check!(word(&target, 0) == 12 && word(&target, 1) == 0x5A5A);
        check!(
            a.qp.qp::<crate::device::Rsiw>().ib_state() == QpState::Rts
                && b.qp.qp::<crate::device::Rsiw>().ib_state() == QpState::Rts
        );
        drop(a);
        drop(b);
        Ok(())
    }

    #[test]
    fn atomic_verbs() -> Result {
        with_device(c"rsiw_at0", verbs)
    }

    /// Posts a FetchAdd to `stag`/`to` that the responder must refuse:
    /// the requester's completion has `status`, the responder sent
    /// `sent`, memory is untouched, both QPs end in Error.
    fn refused(
        dev: &Found,
        pd: &KPd,
        stag: u32,
        to: u64,
        status: u32,
        sent: term::TermError,
        mem: &[u8],
    ) -> Result {
        let (a, b) = connect(dev, pd, 16)?;
        let mut before = KVec::from_elem(0u8, mem.len(), GFP_KERNEL)?;
        before.copy_from_slice(mem);
        let mut res = KVec::from_elem(0xEEu64, 1, GFP_KERNEL)?;
        let seg = Seg {
            addr: res.as_mut_ptr() as u64,
            len: 8,
            lkey: pd.local_dma_lkey(),
        };
        let wc = run(&a, 77, WR_ATOMIC_FA, seg, stag, to, args(1, 0, 0, 0))?;
        if (wc.wr_id, wc.status) != (77, status) {
            pr_err!(
                "rsiw kunit: wr_id {} status {}, expected 77 status {}\n",
                wc.wr_id,
                wc.status,
                status
            );
        }
        check!((wc.wr_id, wc.status) == (77, status));
        // Each side records its Terminate right after the engine call that
        // sent or received it (the completion may be polled before).
        for _ in 0..2000 {
            let (sa, sb) = (
                a.qp.qp::<crate::device::Rsiw>().stream_status(),
                b.qp.qp::<crate::device::Rsiw>().stream_status(),
            );
            if sa.terminate_received.is_some() && sb.terminate_sent.is_some() {
                break;
            }
            kernel::time::delay::fsleep(kernel::time::Delta::from_millis(1));
        }
        check!(
            b.qp.qp::<crate::device::Rsiw>()
                .stream_status()
                .terminate_sent
                == Some(sent)
        );
        check!(
            a.qp.qp::<crate::device::Rsiw>()
                .stream_status()
                .terminate_received
                == Some(sent)
        );
        check!(
            a.qp.qp::<crate::device::Rsiw>().ib_state() == QpState::Err
                && b.qp.qp::<crate::device::Rsiw>().ib_state() == QpState::Err
        );
        check!(res[0] == 0xEE);
        check!(mem[..] == before[..]);
        drop(a);
        drop(b);
        Ok(())
    }

    fn errors(dev: &Found) -> Result {
        let pd = KPd::alloc(dev, true)?;
        let mut mem = KVec::from_elem(0x77u8, 8192, GFP_KERNEL)?;
        // An 8-aligned spot 256 octets into a page.
        let base = mem.as_ptr() as usize;
        let off = (4096 - base % 4096) + 256;
        let va = (base + off) as u64;
        let rw = access::LOCAL_WRITE | access::REMOTE_READ | access::REMOTE_WRITE;

        // No IB_ACCESS_REMOTE_ATOMIC: RDMAP Remote Protection, Access
        // Rights Violation; the requester sees IB_WC_REM_ACCESS_ERR.
        {
            let (_mr, stag) = fast_reg(dev, &pd, &mut mem[off..off + 64], None, rw)?;
            refused(
                dev,
                &pd,
                stag,
                va,
                WC_REM_ACCESS_ERR,
                term::rdmap::ACCESS,
                &mem,
            )?;
            // A stale key: Invalid STag.
            refused(
                dev,
                &pd,
                stag ^ 1,
                va,
                WC_REM_ACCESS_ERR,
                term::rdmap::INVALID_STAG,
                &mem,
            )?;
        }

        // Aligned TO, misaligned memory (iova 4 past an 8-octet boundary
        // while the buffer is aligned): RFC 7306 8.2's catastrophic error,
        // Remote Operation, seen as IB_WC_REM_OP_ERR.
        {
            let rights = rw | access::REMOTE_ATOMIC;
            let (mr, stag) = fast_reg(dev, &pd, &mut mem[off..off + 64], Some(0x1_0004), rights)?;
            let table = dev.device::<crate::device::Rsiw>().data().stags();
            let m = table.get(stag).ok_or(EINVAL)?;
            check!(
                m.with_word(
                    stag,
                    pd.pd::<crate::device::Rsiw>().id(),
                    0x1_0008,
                    0,
                    |w| w.load()
                )
                .err()
                    == Some(MrError::Misaligned)
            );
            // 4 octets further the word is aligned in memory, and it is the
            // word the DMA MR names by address: one physical word, one lock.
            let phys = m.with_word(
                stag,
                pd.pd::<crate::device::Rsiw>().id(),
                0x1_000C,
                0,
                |w| w.phys(),
            )?;
            let lkey = pd.local_dma_lkey();
            let dma = table.get(lkey).ok_or(EINVAL)?;
            check!(
                dma.with_word(lkey, pd.pd::<crate::device::Rsiw>().id(), va + 8, 0, |w| w
                    .phys())?
                    == phys
            );
            check!(
                m.with_word(
                    stag,
                    pd.pd::<crate::device::Rsiw>().id(),
                    0x1_000C,
                    0,
                    |w| w.load()
                )? == 0x7777_7777_7777_7777
            );
            refused(
                dev,
                &pd,
                stag,
                0x1_0008,
                WC_REM_OP_ERR,
                term::rdmap::CATA_STREAM,
                &mem,
            )?;
            drop(mr);
        }
        Ok(())
    }

    #[test]
    fn atomic_errors_leave_memory_untouched() -> Result {
        with_device(c"rsiw_at1", errors)
    }
}

/// Many QPs on two or more connections hammer one word and neighbouring
/// words at once: no update lost or duplicated.
#[cfg(rsiw_kunit)]
#[kunit_tests(rsiw_atomic_stress)]
mod stress {
    use kernel::{
        prelude::*,
        time::{delay::fsleep, Delta, Instant, Monotonic},
    };

    use super::harness::{stress, stress_ended, with_device};
    use crate::ffi::consumer::mr::KPd;

    /// Four QPs hammer distinct words of one MR; once they made progress
    /// the MR is invalidated (then, in a second run, deregistered: out of
    /// the STag table and detached) under them. Checked in
    /// `stress_ended`: completed atomics have the right originals and
    /// values, the rest fail with `IB_WC_REM_ACCESS_ERR` (Terminate,
    /// Invalid STag) or are flushed, memory is frozen once the end of the
    /// registration returned.
    #[test]
    fn end_of_registration_under_fetch_adds_in_flight() -> Result {
        with_device(c"rsiw_at8", |dev| {
            for dereg in [false, true] {
                let mut end = |progress: &dyn Fn() -> usize, stag: u32, pd: &KPd| -> Result {
                    let start = Instant::<Monotonic>::now();
                    while progress() < 100 && start.elapsed().as_millis() < 10_000 {
                        fsleep(Delta::from_micros(200));
                    }
                    let table = dev.device::<crate::device::Rsiw>().data().stags();
                    if dereg {
                        table.deregister(&table.get(stag).ok_or(EINVAL)?);
                        Ok(())
                    } else {
                        Ok(table.invalidate(stag, pd.pd::<crate::device::Rsiw>().id())?)
                    }
                };
                let done = stress_ended(dev, 4, 100_000, &mut end)?;
                let what = if dereg {
                    "deregistration"
                } else {
                    "invalidation"
                };
                pr_info!(
                    "rsiw atomic stress: {} under 4 QPs: ok, {} FetchAdds completed before it\n",
                    what,
                    done
                );
            }
            Ok(())
        })
    }

    #[test]
    fn concurrent_fetch_add_same_and_neighbouring_words() -> Result {
        with_device(c"rsiw_at2", |dev| {
            // (QPs, words): all on one word, two neighbouring words with
            // two QPs each, every QP on its own neighbouring word.
            for (qps, words) in [(4, 1), (4, 2), (4, 4)] {
                let rate = stress(dev, qps, words, 200)?;
                pr_info!(
                    "rsiw atomic stress: {} QPs on {} word(s): ok, {} ops/s\n",
                    qps,
                    words,
                    rate
                );
            }
            Ok(())
        })
    }
}

/// Atomic ops/s for 1, 4 and 16 QPs on one word and on distinct words of
/// one MR (the words of a run are always in one MR). Prints only;
/// `atomic_bench_ops` sets the FetchAdds per QP (`bench/bench.sh
/// --vm-atomics`).
#[cfg(rsiw_kunit)]
#[kunit_tests(rsiw_atomic_bench)]
mod bench {
    use kernel::prelude::*;

    use super::harness::{stress, with_device};

    #[test]
    fn fetch_add_ops_per_second() -> Result {
        let ops = match crate::module_parameters::atomic_bench_ops.value() {
            0 => 64,
            n => n as usize,
        };
        with_device(c"rsiw_at3", |dev| {
            for qps in [1usize, 4, 16] {
                for (words, what) in [(1, "one word"), (qps, "distinct words, one MR")] {
                    let rate = stress(dev, qps, words, ops)?;
                    pr_info!(
                        "rsiw atomic bench: {:>2} QPs, {:<22}, {} ops/QP: {:>8} ops/s\n",
                        qps,
                        what,
                        ops,
                        rate
                    );
                }
            }
            Ok(())
        })
    }
}
