// SPDX-License-Identifier: GPL-2.0
//! Atomics and the MR's in-flight pins (`crate::mem::mr`): the responder's
//! read-modify-write runs without the MR's lock, so atomics on distinct
//! words of one MR run in parallel, and whatever ends a registration
//! waits for the atomics already past their checks. The callers here run
//! `atomic::respond_on` (the responder's whole path after the engine:
//! checks, pin, lock table, RFC 7306 arithmetic) directly from work items:
//! no QP and no TCP, so many more races per second than over the wire.

use kernel::prelude::*;

/// Callers of `respond_on` in work items.
#[cfg(rsiw_kunit)]
mod callers {
    use core::sync::atomic::{AtomicUsize, Ordering};

    use kernel::{
        new_mutex,
        prelude::*,
        sync::{Arc, Mutex},
        time::{delay::fsleep, Delta, Instant, Monotonic},
        workqueue,
    };

    use crate::{
        engine::{error as term, rdmap::AtomicPlan, wire::atomic::RequestRepr},
        ffi::runtime::cond_resched,
        mem::atomic::respond_on,
        mem::atomic_locks::AtomicLocks,
        mem::mr::Mr,
        selftest::util::check,
    };

    /// A lock table the work items can share. The device's is not
    /// reachable from them; this one is the same code.
    pub(crate) type Locks = Arc<Pin<KVBox<AtomicLocks>>>;

    pub(crate) fn locks() -> Result<Locks> {
        Ok(Arc::new(
            KVBox::pin_init(AtomicLocks::new(), GFP_KERNEL)?,
            GFP_KERNEL,
        )?)
    }

    /// A caller stops after this many refusals.
    pub(crate) const REFUSALS: usize = 16;

    /// What one caller saw.
    pub(crate) struct Outcome {
        /// The originals of the calls that succeeded, in order.
        pub(crate) originals: KVVec<u64>,
        pub(crate) refused: usize,
        /// A refusal other than Invalid STag, or a success after a refusal.
        pub(crate) wrong: bool,
        /// When the calls began and ended.
        pub(crate) span: Option<(Instant<Monotonic>, Instant<Monotonic>)>,
    }

    /// FetchAdd 1 on one word through one STag, `ops` times or until
    /// [`REFUSALS`] refusals.
    #[pin_data]
    pub(crate) struct Caller {
        mr: Arc<Mr>,
        locks: Locks,
        pd: u32,
        plan: AtomicPlan,
        ops: usize,
        /// Callers of the run that started (they start together).
        started: Arc<AtomicUsize>,
        callers: usize,
        /// Successes so far.
        pub(crate) ok: AtomicUsize,
        #[pin]
        pub(crate) out: Mutex<Outcome>,
    }

    impl Caller {
        #[expect(
            clippy::too_many_arguments,
            reason = "a test caller's whole setup, named at each call"
        )]
        pub(crate) fn new(
            mr: &Arc<Mr>,
            locks: &Locks,
            pd: u32,
            stag: u32,
            to: u64,
            ops: usize,
            started: &Arc<AtomicUsize>,
            callers: usize,
        ) -> Result<Arc<Self>> {
            let originals = KVVec::with_capacity(ops, GFP_KERNEL)?;
            Arc::pin_init(
                pin_init!(Caller {
                    mr: mr.clone(),
                    locks: locks.clone(),
                    pd,
                    plan: AtomicPlan { stag, to, request: RequestRepr::fetch_add(0, stag, to, 1, 0) },
                    ops,
                    started: started.clone(),
                    callers,
                    ok: AtomicUsize::new(0),
                    out <- new_mutex!(Outcome { originals, refused: 0, wrong: false, span: None }),
                }),
                GFP_KERNEL,
            )
        }

        fn run(&self) {
            let mut out = self.out.lock();
            // Start together (sleeping: more callers than CPUs must get
            // to run), give up waiting after a second.
            self.started.fetch_add(1, Ordering::AcqRel);
            let wait = Instant::<Monotonic>::now();
            while self.started.load(Ordering::Acquire) < self.callers
                && wait.elapsed().as_millis() < 1000
            {
                fsleep(Delta::from_micros(50));
            }
            let start = Instant::<Monotonic>::now();
            for i in 0..self.ops {
                // More callers than CPUs, and the thread that ends the
                // registration, must all get to run on a kernel without
                // preemption too.
                if i % 256 == 255 {
                    cond_resched();
                }
                match respond_on(&self.mr, &self.locks, self.pd, &self.plan) {
                    Ok(original) => {
                        out.wrong |= out.refused > 0;
                        // Room for `ops` was reserved: never fails.
                        out.wrong |= out.originals.push_within_capacity(original).is_err();
                        self.ok.fetch_add(1, Ordering::Relaxed);
                    }
                    Err(e) => {
                        out.wrong |= e != term::rdmap::INVALID_STAG;
                        out.refused += 1;
                        if out.refused >= REFUSALS {
                            break;
                        }
                    }
                }
            }
            out.span = Some((start, Instant::<Monotonic>::now()));
        }
    }

    /// Runs every caller in its own work item on the unbound workqueue
    /// (on every CPU at once), `during` on this thread meanwhile, then
    /// waits for the callers (they end by themselves).
    pub(crate) fn run_all(callers: &[Arc<Caller>], during: impl FnOnce() -> Result) -> Result {
        let done = Arc::new(AtomicUsize::new(0), GFP_KERNEL)?;
        let mut spawned = 0;
        for c in callers {
            let (c, d) = (c.clone(), done.clone());
            let job = move || {
                c.run();
                drop(c);
                d.fetch_add(1, Ordering::Release);
            };
            if workqueue::system_unbound()
                .try_spawn(GFP_KERNEL, job)
                .is_ok()
            {
                spawned += 1;
            }
        }
        let r = during();
        while done.load(Ordering::Acquire) < spawned {
            fsleep(Delta::from_millis(1));
        }
        check!(spawned == callers.len());
        r
    }

    /// Checks the originals the callers `on` of one word got: each
    /// caller's strictly increasing, all of them together exactly 0, 1,
    /// ..., `total` - 1 (no update lost or duplicated).
    pub(crate) fn check_word(callers: &[Arc<Caller>], on: &[usize], total: u64) -> Result {
        let n = usize::try_from(total).map_err(|_| EINVAL)?;
        let mut seen = KVVec::from_elem(false, n, GFP_KERNEL)?;
        let mut count = 0;
        for &i in on {
            let out = callers[i].out.lock();
            check!(!out.wrong);
            check!(out.originals.windows(2).all(|p| p[0] < p[1]));
            for &o in out.originals.iter() {
                check!(o < total && !seen[o as usize]);
                seen[o as usize] = true;
                count += 1;
            }
        }
        check!(count == n);
        Ok(())
    }
}

#[cfg(rsiw_kunit)]
mod cases {
    use core::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

    use kernel::{
        prelude::*,
        sync::Arc,
        time::{delay::fsleep, Delta, Instant, Monotonic},
        workqueue,
    };

    use super::callers::{check_word, locks, run_all, Caller};
    use crate::{
        ffi::{consumer::device::Found, consumer::mr::KPd},
        mem::mr::MrError,
        selftest::atomic::harness::{fast_reg, set_word, word, ALL_RIGHTS},
        selftest::util::check,
    };

    /// How the callers use one buffer of `words + 1` words.
    #[derive(Clone, Copy, PartialEq, Eq)]
    pub(crate) enum Layout {
        /// Caller i on word i, one MR.
        DistinctWordsOneMr,
        /// All on word 0, one MR.
        SameWord,
        /// Caller i on word i through its own MR.
        DistinctMrs,
    }

    /// Marks the word after the used ones: it must stay untouched.
    const SENTINEL: u64 = 0xA5A5_5A5A_7654_3210;

    /// `n` callers, each `ops` FetchAdds of 1 laid out as `layout`, all
    /// at once; checks every result. Returns the ops/s from the first
    /// caller's start to the last one's end (information only).
    pub(crate) fn parallel(dev: &Found, layout: Layout, n: usize, ops: usize) -> Result<u64> {
        let pd = KPd::alloc(dev, false)?;
        let locks = locks()?;
        let started = Arc::new(AtomicUsize::new(0), GFP_KERNEL)?;
        // Declared before the MRs: outlives them.
        let mut mem = KVec::from_elem(0u8, 8 * (n + 1), GFP_KERNEL)?;
        set_word(&mut mem, n, SENTINEL);
        let base = mem.as_ptr() as u64;
        let mut mrs = KVec::with_capacity(n, GFP_KERNEL)?;
        let mut callers = KVec::with_capacity(n, GFP_KERNEL)?;
        for i in 0..n {
            let w = if layout == Layout::SameWord { 0 } else { i };
            if i == 0 || layout == Layout::DistinctMrs {
                // An MR over just this caller's word, or one over all.
                let len = if layout == Layout::DistinctMrs {
                    8
                } else {
                    8 * n
                };
                mrs.push(
                    fast_reg(dev, &pd, &mut mem[8 * w..8 * w + len], None, ALL_RIGHTS)?,
                    GFP_KERNEL,
                )?;
            }
            let (kmr, stag) = mrs.last().ok_or(EINVAL)?;
            let c = Caller::new(
                kmr.ib::<crate::device::Rsiw>().mr(),
                &locks,
                pd.pd::<crate::device::Rsiw>().id(),
                *stag,
                base + 8 * w as u64,
                ops,
                &started,
                n,
            )?;
            callers.push(c, GFP_KERNEL)?;
        }
        run_all(&callers, || Ok(()))?;
        let (mut first, mut last) = (None, None);
        for c in callers.iter() {
            let out = c.out.lock();
            check!(out.refused == 0 && out.originals.len() == ops);
            let (s, e) = out.span.ok_or(EINVAL)?;
            // Instants only subtract (no ordering).
            first = Some(first.map_or(
                s,
                |f: Instant<Monotonic>| if (s - f).as_nanos() < 0 { s } else { f },
            ));
            last = Some(last.map_or(
                e,
                |l: Instant<Monotonic>| if (e - l).as_nanos() > 0 { e } else { l },
            ));
        }
        let (first, last) = first.zip(last).ok_or(EINVAL)?;
        let nanos = (last - first).as_nanos().max(1) as u64;
        if layout == Layout::SameWord {
            check!(word(&mem, 0) == (n * ops) as u64);
            check!(n <= 4);
            check_word(&callers, &[0, 1, 2, 3][..n], (n * ops) as u64)?;
        } else {
            for i in 0..n {
                check!(word(&mem, i) == ops as u64);
                check_word(&callers, &[i], ops as u64)?;
            }
        }
        check!(word(&mem, n) == SENTINEL);
        drop(callers);
        drop(mrs);
        Ok((n * ops) as u64 * 1_000_000_000 / nanos)
    }

    /// One MR over words 0, 1 and a sentinel: callers 0 and 1 on word 0,
    /// caller 2 on word 1. Once each made progress this thread
    /// invalidates the MR (or deregisters it: drops the `ib_mr`). Every
    /// call either succeeded with a right original or was refused with
    /// Invalid STag, none succeeded after a refusal, every caller was
    /// refused (the end of the registration came while they ran), and
    /// the memory did not change after the invalidation returned.
    fn race(dev: &Found, dereg: bool) -> Result {
        const OPS: usize = 1 << 20;
        let pd = KPd::alloc(dev, false)?;
        let locks = locks()?;
        let started = Arc::new(AtomicUsize::new(0), GFP_KERNEL)?;
        let mut mem = KVec::from_elem(0u8, 24, GFP_KERNEL)?;
        set_word(&mut mem, 2, SENTINEL);
        let base = mem.as_ptr() as u64;
        let (kmr, stag) = fast_reg(dev, &pd, &mut mem, None, ALL_RIGHTS)?;
        let mut callers = KVec::with_capacity(3, GFP_KERNEL)?;
        for w in [0u64, 0, 1] {
            callers.push(
                Caller::new(
                    kmr.ib::<crate::device::Rsiw>().mr(),
                    &locks,
                    pd.pd::<crate::device::Rsiw>().id(),
                    stag,
                    base + 8 * w,
                    OPS,
                    &started,
                    3,
                )?,
                GFP_KERNEL,
            )?;
        }
        let mut kmr = Some(kmr);
        let mut after = [0u64; 3];
        run_all(&callers, || {
            let start = Instant::<Monotonic>::now();
            // Every caller well under way.
            while callers.iter().any(|c| c.ok.load(Ordering::Relaxed) < 500)
                && start.elapsed().as_millis() < 10_000
            {
                fsleep(Delta::from_micros(200));
            }
            if dereg {
                drop(kmr.take());
            } else {
                dev.device::<crate::device::Rsiw>()
                    .data()
                    .stags()
                    .invalidate(stag, pd.pd::<crate::device::Rsiw>().id())?;
            }
            after = [word(&mem, 0), word(&mem, 1), word(&mem, 2)];
            Ok(())
        })?;
        check!([word(&mem, 0), word(&mem, 1), word(&mem, 2)] == after);
        check!(after[2] == SENTINEL);
        for c in callers.iter() {
            let out = c.out.lock();
            check!(out.refused == super::callers::REFUSALS && !out.wrong);
        }
        check_word(&callers, &[0, 1], after[0])?;
        check_word(&callers, &[2], after[1])?;
        pr_info!(
            "rsiw atomic pin: {} raced with {} + {} FetchAdds in flight\n",
            if dereg {
                "deregistration"
            } else {
                "invalidation"
            },
            after[0],
            after[1]
        );
        drop(kmr);
        Ok(())
    }

    pub(crate) fn races(dev: &Found) -> Result {
        race(dev, false)?;
        race(dev, true)
    }

    /// How long an atomic stays inside its read-modify-write here.
    const HOLD_NS: i64 = 100_000_000;

    struct Flags {
        inside: AtomicBool,
        finished: AtomicBool,
        exited: AtomicBool,
    }

    /// A work item's atomic sits inside its read-modify-write (interrupts
    /// off, pin held) for [`HOLD_NS`]; meanwhile this thread invalidates
    /// (then: deregisters) the MR. That must not return before the atomic
    /// finished; afterwards the word holds its store and new atomics are
    /// refused. Only a run where this thread saw the atomic inside before
    /// ending the registration proves anything (the work item may run on
    /// this thread's CPU instead): each case is retried until one did.
    pub(crate) fn end_waits(dev: &Found) -> Result {
        let pd = KPd::alloc(dev, false)?;
        let mut mem = KVec::from_elem(0u8, 16, GFP_KERNEL)?;
        let to = mem.as_ptr() as u64;
        let pd_id = pd.pd::<crate::device::Rsiw>().id();
        let mut stores = 0u64;
        for dereg in [false, true] {
            let mut overlapped = false;
            let mut tries = 0;
            while !overlapped && tries < 5 {
                tries += 1;
                let (kmr, stag) = fast_reg(dev, &pd, &mut mem, None, ALL_RIGHTS)?;
                let mr = kmr.ib::<crate::device::Rsiw>().mr().clone();
                let f = Arc::new(
                    Flags {
                        inside: AtomicBool::new(false),
                        finished: AtomicBool::new(false),
                        exited: AtomicBool::new(false),
                    },
                    GFP_KERNEL,
                )?;
                let (m, g) = (mr.clone(), f.clone());
                let job = move || {
                    let _ = m.with_word(stag, pd_id, to, 0, |w| {
                        g.inside.store(true, Ordering::Release);
                        let t = Instant::<Monotonic>::now();
                        while t.elapsed().as_nanos() < HOLD_NS {
                            core::hint::spin_loop();
                        }
                        w.store(w.load() + 1);
                        g.finished.store(true, Ordering::Release);
                    });
                    drop(m);
                    g.exited.store(true, Ordering::Release);
                };
                workqueue::system_unbound().try_spawn(GFP_KERNEL, job)?;
                // Spin (preemptible): keeps this CPU busy, so the work
                // item tends to run on another one.
                let start = Instant::<Monotonic>::now();
                while !f.inside.load(Ordering::Acquire) && start.elapsed().as_millis() < 5000 {
                    core::hint::spin_loop();
                }
                let inside = f.inside.load(Ordering::Acquire);
                overlapped = inside && !f.finished.load(Ordering::Acquire);
                let mut kmr = Some(kmr);
                if dereg {
                    drop(kmr.take());
                } else {
                    dev.device::<crate::device::Rsiw>()
                        .data()
                        .stags()
                        .invalidate(stag, pd.pd::<crate::device::Rsiw>().id())?;
                }
                let finished = f.finished.load(Ordering::Acquire);
                while !f.exited.load(Ordering::Acquire) {
                    fsleep(Delta::from_millis(1));
                }
                stores += 1;
                check!(inside && finished);
                check!(word(&mem, 0) == stores);
                check!(
                    mr.with_word(stag, pd_id, to, 0, |w| w.load()).err()
                        == Some(MrError::InvalidStag)
                );
                drop(kmr);
            }
            let what = if dereg {
                "deregistration"
            } else {
                "invalidation"
            };
            pr_info!(
                "rsiw atomic pin: {} waited for an atomic in progress (try {})\n",
                what,
                tries
            );
            check!(overlapped);
        }
        Ok(())
    }
}

/// Atomics on distinct words of one MR in parallel, and the end of a
/// registration against atomics in flight.
#[cfg(rsiw_kunit)]
#[kunit_tests(rsiw_atomic_pin)]
mod pin {
    use kernel::prelude::*;

    use super::cases::{end_waits, parallel, races, Layout};
    use crate::selftest::atomic::harness::with_device;

    #[test]
    fn end_of_registration_waits_for_atomic_in_progress() -> Result {
        with_device(c"rsiw_at4", end_waits)
    }

    #[test]
    fn invalidation_and_deregistration_race_atomics() -> Result {
        with_device(c"rsiw_at5", races)
    }

    #[test]
    fn parallel_callers_on_one_mr() -> Result {
        with_device(c"rsiw_at6", |dev| {
            for (layout, what) in [
                (Layout::DistinctWordsOneMr, "distinct words, one MR"),
                (Layout::SameWord, "one word"),
                (Layout::DistinctMrs, "distinct MRs"),
            ] {
                let rate = parallel(dev, layout, 2, 5000)?;
                pr_info!("rsiw atomic pin: 2 callers, {}: ok, {} ops/s\n", what, rate);
            }
            Ok(())
        })
    }
}

/// `respond_on` calls per second from 1, 2 and 4 work items, without QPs
/// or TCP: distinct words of one MR, one word, distinct MRs; best of three
/// runs each. Prints only (`bench/bench.sh --vm-atomics`).
#[cfg(rsiw_kunit)]
#[kunit_tests(rsiw_atomic_bench_direct)]
mod bench {
    use kernel::prelude::*;

    use super::cases::{parallel, Layout};
    use crate::selftest::atomic::harness::with_device;

    #[test]
    fn respond_calls_per_second() -> Result {
        let ops = match crate::module_parameters::atomic_bench_ops.value() {
            0 => 5000,
            n => 10 * n as usize,
        };
        with_device(c"rsiw_at7", |dev| {
            for n in [1usize, 2, 4] {
                for (layout, what) in [
                    (Layout::DistinctWordsOneMr, "distinct words, one MR"),
                    (Layout::SameWord, "one word"),
                    (Layout::DistinctMrs, "distinct MRs"),
                ] {
                    // Best of three: a host descheduling a vCPU only slows.
                    let mut rate = 0;
                    for _ in 0..3 {
                        rate = rate.max(parallel(dev, layout, n, ops)?);
                    }
                    pr_info!("rsiw atomic bench direct: {} callers, {:<22}, {} ops each: {:>9} ops/s (best of 3)\n", n, what, ops, rate);
                }
            }
            Ok(())
        })
    }
}
