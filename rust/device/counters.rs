// SPDX-License-Identifier: GPL-2.0
//! The device's hw counters, reported per port through the RDMA core's hw
//! stats (`rdma statistic show link rsiw0/1`, sysfs
//! `ports/1/hw_counters/`). Monotonic, device-wide, summed over QPs.

use core::sync::atomic::{AtomicU64, Ordering};

/// A counter: the index is the C side's (`enum rsiw_hw_counter`, checked
/// at compile time below), which also holds the names.
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
}

// The Rust counters index the C names.
const _: () = {
    use crate::ffi::ib::hw_counters as c;
    assert!(HwCounter::COUNT == c::COUNT);
    assert!(HwCounter::TxZcopyOctets as usize == c::TX_ZCOPY_OCTETS);
    assert!(HwCounter::TxZcopyBatches as usize == c::TX_ZCOPY_BATCHES);
    assert!(HwCounter::TxZcopyCopied as usize == c::TX_ZCOPY_COPIED);
    assert!(HwCounter::TerminateSent as usize == c::TERMINATE_SENT);
    assert!(HwCounter::TerminateReceived as usize == c::TERMINATE_RECEIVED);
};

/// The values, updated from any context.
pub(crate) struct HwCounters([AtomicU64; HwCounter::COUNT]);

impl HwCounters {
    pub(crate) const fn new() -> Self {
        Self([const { AtomicU64::new(0) }; HwCounter::COUNT])
    }

    pub(crate) fn add(&self, c: HwCounter, n: u64) {
        self.0[c as usize].fetch_add(n, Ordering::Relaxed);
    }

    #[cfg(rsiw_kunit)]
    pub(crate) fn get(&self, c: HwCounter) -> u64 {
        self.0[c as usize].load(Ordering::Relaxed)
    }

    /// The counter at `index` (0 past the last).
    pub(crate) fn get_index(&self, index: usize) -> u64 {
        self.0.get(index).map_or(0, |c| c.load(Ordering::Relaxed))
    }
}
