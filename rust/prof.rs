// SPDX-License-Identifier: GPL-2.0
//! Phase timing of the message path, for latency work (not a feature).
//!
//! The test kernels have no function tracer, and under TCG sampling
//! attributes time to function entries only roughly, so the time of a
//! 64-byte message is split by timing the steps of the message path
//! directly: `make RSIW_PROF=1 modules` builds with `--cfg rsiw_prof`,
//! and then every [`Phase`] a [`Probe`] covers sums its time and calls,
//! and every [`REPORT_EVERY`] doorbells the module prints the sums
//! (`rsiw: prof PHASE: calls C avg A ns, per doorbell D ns`) and starts
//! over. `tools/vmtest/latprof.sh` runs `qperf -cm1 rc_lat` on such a
//! build and prints the means of those lines (`Documentation/performance.md`).
//! Nested probes include each other, and each costs two clock reads.
//!
//! In a normal build a [`Probe`] is a zero-sized value with nothing to
//! do: no code, no data.

/// A step of the message path.
#[derive(Clone, Copy)]
#[cfg_attr(not(rsiw_prof), allow(dead_code))]
pub(crate) enum Phase {
    /// A process's send doorbell, whole (the system call's driver part).
    Doorbell,
    /// The TX rounds a doorbell runs in the caller's context.
    TxRun,
    /// A run's stop: clearing the ring's "TX running" flag (set inside
    /// [`Phase::SqNext`], by the run's first look at the ring).
    TxRingFlags,
    /// A copying round up to the engine call (buffer, stream lock).
    TxPreEngine,
    /// The engine's TX call (WQE read, source checks and copy, the FPDU,
    /// the send completion).
    TxEngine,
    /// `kernel_sendmsg` (over veth: the peer's receive runs inside it).
    TxSockSend,
    /// The round's end after the send.
    TxPostSend,
    /// A socket data-ready callback, whole.
    RxCallback,
    /// The engine's RX call (headers, placement, the receive completion).
    RxEngine,
    /// Event handling after the RX call.
    RxAfter,
    /// Host: reading (and converting) the next SQ entry.
    SqNext,
    /// Host: a send's source checks.
    CheckSource,
    /// Host: a send's source copy.
    ReadSource,
    /// Host: a completion (CQ entry and notification).
    Complete,
    /// Host: a CQ's notification (the consumer's completion handler).
    CqNotify,
    /// Host: placing an untagged payload into the receive WQE's buffers.
    PlaceRecv,
    /// Host: looking at the next receive WQE.
    RqPeek,
}

/// Doorbells between two reports.
#[cfg_attr(not(rsiw_prof), allow(dead_code))]
pub(crate) const REPORT_EVERY: u64 = 4096;

#[cfg(rsiw_prof)]
mod imp {
    use super::{Phase, REPORT_EVERY};
    use core::sync::atomic::{AtomicU64, Ordering};
    use kernel::{
        prelude::*,
        time::{Instant, Monotonic},
    };

    const N: usize = Phase::RqPeek as usize + 1;
    const NAMES: [&str; N] = [
        "doorbell",
        "tx_run",
        "tx_ring_flags",
        "tx_pre_engine",
        "tx_engine",
        "tx_sock_send",
        "tx_post_send",
        "rx_callback",
        "rx_engine",
        "rx_after",
        "sq_next",
        "check_source",
        "read_source",
        "complete",
        "cq_notify",
        "place_recv",
        "rq_peek",
    ];
    static SUM: [AtomicU64; N] = [const { AtomicU64::new(0) }; N];
    static CALLS: [AtomicU64; N] = [const { AtomicU64::new(0) }; N];

    /// Times a [`Phase`] from its start to its drop.
    pub(crate) struct Probe(Instant<Monotonic>, Phase);

    impl Probe {
        pub(crate) fn start(p: Phase) -> Self {
            Probe(Instant::<Monotonic>::now(), p)
        }
    }

    impl Drop for Probe {
        fn drop(&mut self) {
            let ns = u64::try_from(self.0.elapsed().as_nanos()).unwrap_or(0);
            let i = self.1 as usize;
            SUM[i].fetch_add(ns, Ordering::Relaxed);
            let calls = CALLS[i].fetch_add(1, Ordering::Relaxed) + 1;
            if matches!(self.1, Phase::Doorbell) && calls >= REPORT_EVERY {
                report();
            }
        }
    }

    fn report() {
        let doorbells = CALLS[Phase::Doorbell as usize].swap(0, Ordering::Relaxed).max(1);
        for (i, name) in NAMES.iter().enumerate() {
            let sum = SUM[i].swap(0, Ordering::Relaxed);
            let calls = if i == Phase::Doorbell as usize { doorbells } else { CALLS[i].swap(0, Ordering::Relaxed) };
            if calls > 0 {
                pr_info!("prof {}: calls {} avg {} ns, per doorbell {} ns\n", name, calls, sum / calls, sum / doorbells);
            }
        }
    }
}

#[cfg(not(rsiw_prof))]
mod imp {
    use super::Phase;

    /// Nothing (a build without `rsiw_prof`).
    pub(crate) struct Probe;

    impl Probe {
        #[inline(always)]
        pub(crate) fn start(_: Phase) -> Self {
            Probe
        }
    }
}

pub(crate) use imp::Probe;
