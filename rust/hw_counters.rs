// SPDX-License-Identifier: GPL-2.0
//! The device's hw counters, reported per port through the RDMA core's hw
//! stats (`rdma statistic show link rsiw0/1`, sysfs
//! `ports/1/hw_counters/`). Monotonic, device-wide, summed over QPs.

use core::sync::atomic::{AtomicU64, Ordering};

/// A counter: the index is the C side's (`enum rsiw_hw_counter`, checked
/// at compile time in `ffi::device`), which also holds the names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u32)]
pub(crate) enum HwCounter {
    /// Payload octets handed to TCP by page reference (zero-copy).
    TxZcopyOctets = 0,
    /// Zero-copy batches whose pages TCP has released.
    TxZcopyBatches = 1,
    /// Of those, batches the stack copied before it released them (local
    /// delivery, `skb_orphan_frags_rx`; a device that cannot hold pages).
    TxZcopyCopied = 2,
    /// Terminate messages sent (protocol errors found here).
    TerminateSent = 3,
    /// Terminate messages received from peers.
    TerminateReceived = 4,
}

impl HwCounter {
    pub(crate) const COUNT: usize = 5;
    pub(crate) const ALL: [Self; Self::COUNT] = [
        Self::TxZcopyOctets,
        Self::TxZcopyBatches,
        Self::TxZcopyCopied,
        Self::TerminateSent,
        Self::TerminateReceived,
    ];
}

/// The values, updated from any context.
pub(crate) struct HwCounters([AtomicU64; HwCounter::COUNT]);

impl HwCounters {
    pub(crate) const fn new() -> Self {
        Self([const { AtomicU64::new(0) }; HwCounter::COUNT])
    }

    pub(crate) fn add(&self, c: HwCounter, n: u64) {
        self.0[c as usize].fetch_add(n, Ordering::Relaxed);
    }

    pub(crate) fn get(&self, c: HwCounter) -> u64 {
        self.0[c as usize].load(Ordering::Relaxed)
    }
}
