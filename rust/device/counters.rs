// SPDX-License-Identifier: GPL-2.0
//! The device's hw counters, reported per port through the RDMA core's hw
//! stats (`rdma statistic show link rsiw0/1`, sysfs
//! `ports/1/hw_counters/`). Monotonic, device-wide, summed over QPs.

use core::sync::atomic::{AtomicU64, Ordering};

use crate::engine::error::TermError;

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
    /// FPDUs whose MPA CRC did not match (each ends its stream with a
    /// Terminate: one per connection at most).
    RxCrcErrors = 5,
    /// Other protocol errors found in what a peer sent (malformed or
    /// invalid FPDUs, DDP and RDMAP errors: bad STag, bounds, access, ...),
    /// each answered with a Terminate.
    RxProtocolErrors = 6,
    /// MPA Replies with the Reject bit this end sent (the ULP rejected the
    /// connection, or the Request was unacceptable).
    MpaRejectSent = 7,
    /// MPA Replies with the Reject bit received from peers.
    MpaRejectReceived = 8,
    /// Connections that ran out of time: TCP connect, the peer's MPA
    /// Request or Reply, the initiator's RTR (10 s each by default).
    CmTimeouts = 9,
    /// Connections that failed otherwise before full operation: TCP
    /// refused or reset, an unusable MPA frame, an accept that failed.
    CmFailures = 10,
    /// Connections handed to a QP after MPA (both sides count).
    CmEstablished = 11,
    /// Octets of iWARP streams read by a QP's RX work instead of the
    /// receive softirq (bulk on loopback and veth, `rx_offload_min`).
    RxWorkOctets = 12,
}

impl HwCounter {
    pub(crate) const COUNT: usize = 13;

    /// What a Terminate this end sends for `err` counts as: a CRC error, or
    /// another protocol error in what the peer sent; nothing for this
    /// end's own failures (local catastrophic errors, a send WR's bad SGE).
    pub(crate) fn for_local_terminate(err: TermError) -> Option<Self> {
        use crate::engine::error::{ddp, llp, rdmap};
        if err == llp::CRC {
            Some(Self::RxCrcErrors)
        } else if [
            rdmap::LOCAL_CATA,
            ddp::LOCAL_CATA,
            llp::LOCAL_CATA,
            rdmap::PROT_UNSPECIFIED,
        ]
        .contains(&err)
        {
            None
        } else {
            Some(Self::RxProtocolErrors)
        }
    }
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
    assert!(HwCounter::RxCrcErrors as usize == c::RX_CRC_ERRORS);
    assert!(HwCounter::RxProtocolErrors as usize == c::RX_PROTOCOL_ERRORS);
    assert!(HwCounter::MpaRejectSent as usize == c::MPA_REJECT_SENT);
    assert!(HwCounter::MpaRejectReceived as usize == c::MPA_REJECT_RECEIVED);
    assert!(HwCounter::CmTimeouts as usize == c::CM_TIMEOUTS);
    assert!(HwCounter::CmFailures as usize == c::CM_FAILURES);
    assert!(HwCounter::CmEstablished as usize == c::CM_ESTABLISHED);
    assert!(HwCounter::RxWorkOctets as usize == c::RX_WORK_OCTETS);
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
