// SPDX-License-Identifier: GPL-2.0
//! Module-lifetime services: the workqueues of connection management and
//! of the QPs' transmit and receive work ([`Workqueues`]), a rate limit for log lines
//! a peer can provoke ([`ratelimited`]), a bounded wait ([`wait_ms`]),
//! and [`global_mutex!`], a mutex around a module-global value.

use core::{
    ptr,
    sync::atomic::{AtomicPtr, Ordering},
};

use kernel::{prelude::*, workqueue::Queue};

use super::{net::zcopy, sys};

static WQ: AtomicPtr<sys::workqueue_struct> = AtomicPtr::new(ptr::null_mut());
/// The QPs' transmit work: its own queue rather than the system one, as
/// it must make progress in memory reclaim (a storage ULP such as NVMe-oF
/// sends through it).
static TX_WQ: AtomicPtr<sys::workqueue_struct> = AtomicPtr::new(ptr::null_mut());
/// The QPs' RX work (bulk streams on local routes).
static RX_WQ: AtomicPtr<sys::workqueue_struct> = AtomicPtr::new(ptr::null_mut());

/// The module's workqueues, from module init to module exit. Its owner
/// drops it after every user is stopped (every device, and so every QP,
/// gone; the CM shut down): it waits for the zero-copy notifications the
/// network stack still holds, then drains and destroys the queues.
pub(crate) struct Workqueues(());

impl Workqueues {
    pub(crate) fn new() -> Result<Self> {
        // SAFETY: plain allocation call.
        let wq = unsafe { sys::rsiw_cm_wq_alloc() };
        if wq.is_null() {
            return Err(ENOMEM);
        }
        // SAFETY: plain allocation call.
        let tx = unsafe { sys::rsiw_tx_wq_alloc() };
        // SAFETY: plain allocation call.
        let rx = unsafe { sys::rsiw_rx_wq_alloc() };
        if tx.is_null() || rx.is_null() {
            for q in [wq, tx, rx] {
                if !q.is_null() {
                    // SAFETY: just allocated, never used.
                    unsafe { sys::destroy_workqueue(q) };
                }
            }
            return Err(ENOMEM);
        }
        WQ.store(wq, Ordering::Release);
        TX_WQ.store(tx, Ordering::Release);
        RX_WQ.store(rx, Ordering::Release);
        Ok(Self(()))
    }
}

impl Drop for Workqueues {
    fn drop(&mut self) {
        // Zero-copy notifications call into this module when TCP frees
        // the last skb with a QP's pages; the sockets are closed, so that
        // is soon (10 s of wall-clock time at most).
        if !wait_ms(10_000, || zcopy::live_notifs() == 0) {
            pr_err!(
                "{} zero-copy notifications still held by the network stack\n",
                zcopy::live_notifs()
            );
        }
        for q in [&WQ, &TX_WQ, &RX_WQ] {
            let wq = q.swap(ptr::null_mut(), Ordering::AcqRel);
            if !wq.is_null() {
                // SAFETY: allocated in `new`; no enqueuer is left (the
                // owner's contract), and `destroy_workqueue` drains what
                // is still queued.
                unsafe { sys::destroy_workqueue(wq) };
            }
        }
    }
}

/// Waits until `done` holds, for at most `ms` milliseconds of wall-clock
/// time (polling every millisecond: under load a sleep can take far
/// longer than asked, so the bound is not a count of sleeps); whether it
/// holds. Sleeps.
pub(crate) fn wait_ms(ms: u32, mut done: impl FnMut() -> bool) -> bool {
    use kernel::time::{delay::fsleep, Delta, Instant, Monotonic};
    let start = Instant::<Monotonic>::now();
    let limit = Delta::from_millis(i64::from(ms));
    loop {
        if done() {
            return true;
        }
        if start.elapsed() >= limit {
            return done();
        }
        fsleep(Delta::from_millis(1));
    }
}

/// Lets the scheduler run another task here if one is due: a resched
/// point for a long loop in process context, which a kernel without
/// preemption (`PREEMPT_NONE`/`VOLUNTARY`: Debian's default, User-Mode
/// Linux's only mode) needs so the loop does not hold its CPU. Nothing on
/// a preemptible kernel. May sleep. Used by the KUnit suites' busy
/// callers.
#[cfg(rsiw_kunit)]
pub(crate) fn cond_resched() {
    // SAFETY: no argument, no memory touched; a call in atomic context
    // would be a bug the kernel reports (might_sleep), not unsafety.
    unsafe { sys::rsiw_cond_resched() }
}

fn queue_of(q: &AtomicPtr<sys::workqueue_struct>) -> Option<&'static Queue> {
    let wq = q.load(Ordering::Acquire);
    if wq.is_null() {
        return None;
    }
    // SAFETY: the workqueue lives until `Workqueues::drop`, which runs only
    // after every user is stopped.
    Some(unsafe { Queue::from_raw(wq.cast()) })
}

/// The connection manager's workqueue, while the module is loaded.
pub(crate) fn cm_queue() -> Option<&'static Queue> {
    queue_of(&WQ)
}

/// The QPs' transmit workqueue, while the module is loaded.
pub(crate) fn tx_queue() -> Option<&'static Queue> {
    queue_of(&TX_WQ)
}

/// The QPs' receive workqueue, while the module is loaded.
pub(crate) fn rx_queue() -> Option<&'static Queue> {
    queue_of(&RX_WQ)
}

/// The monotonic clock in units of 1.024 µs, wrapping every 73 minutes:
/// for intervals far shorter (compare with `wrapping_sub`).
pub(crate) fn clock_us() -> u32 {
    // SAFETY: plain call.
    unsafe { sys::rsiw_clock_us() }
}

/// Rate limit for log lines a peer or a user can provoke.
pub(crate) fn ratelimited() -> bool {
    // SAFETY: plain call on a static ratelimit state.
    unsafe { sys::rsiw_cm_ratelimit() }
}

/// A mutex around a module-global value, usable once `init` has run:
///
/// ```ignore
/// ffi::runtime::global_mutex! { pub(crate) mod registry: Registry = Registry::new(); }
/// registry::init();
/// registry::with(|r| ...)?; // Err(ENODEV) before `init`
/// ```
macro_rules! global_mutex {
    ($vis:vis mod $name:ident: $ty:ty = $init:expr;) => {
        $vis mod $name {
            #[allow(unused_imports)]
            use super::*;
            use core::sync::atomic::{AtomicBool, Ordering};

            kernel::sync::global_lock! {
                // SAFETY: `init` below runs `LOCK.init()` once (the
                // `STARTED` exchange), and `with` locks only after
                // `READY` says it has.
                unsafe(uninit) static LOCK: Mutex<$ty> = $init;
            }
            static STARTED: AtomicBool = AtomicBool::new(false);
            static READY: AtomicBool = AtomicBool::new(false);

            /// Initialises the value (module init; later calls do nothing).
            pub(crate) fn init() {
                if STARTED.compare_exchange(false, true, Ordering::AcqRel, Ordering::Acquire).is_ok() {
                    // SAFETY: first and only call, per the exchange.
                    unsafe { LOCK.init() };
                    READY.store(true, Ordering::Release);
                }
            }

            /// Runs `f` on the value under the mutex (process context);
            /// `ENODEV` before `init`.
            pub(crate) fn with<R>(f: impl FnOnce(&mut $ty) -> R) -> kernel::error::Result<R> {
                if !READY.load(Ordering::Acquire) {
                    return Err(kernel::error::code::ENODEV);
                }
                let mut g = LOCK.lock();
                Ok(f(&mut g))
            }
        }
    };
}
pub(crate) use global_mutex;
