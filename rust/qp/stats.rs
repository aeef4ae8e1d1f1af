// SPDX-License-Identifier: GPL-2.0
//! Per-QP statistics (`rdma resource show qp -dd`): relaxed atomics
//! bumped where the QP already does the work, read only when asked. The
//! message path's counters have one writer at a time ([`QpStats::bump`]);
//! the others may be bumped from anywhere ([`QpStats::add`]).

use core::sync::atomic::{AtomicU64, Ordering};

use kernel::{prelude::*, str::CStr};

use super::{Qp, QpState};
use crate::ffi::ib::ResAttrs;

/// What a QP counts over its lifetime (every stream it had).
pub(crate) struct QpStats {
    /// Octets of the iWARP stream handed to TCP (FPDUs with their MPA
    /// framing, Terminates). Written by the TX run (one at a time).
    pub(crate) tx_bytes: AtomicU64,
    /// Octets of the stream taken from TCP after the MPA exchange.
    /// Written under the stream lock.
    pub(crate) rx_bytes: AtomicU64,
    /// Send WRs that went on the wire (Send, Write, Read, atomics,
    /// Commit), signaled or not. Written under the stream lock.
    pub(crate) tx_msgs: AtomicU64,
    /// Receive WRs completed successfully (Sends received). Written
    /// under the stream lock.
    pub(crate) rx_msgs: AtomicU64,
    /// Payload octets sent by page reference (zero-copy). Written by the
    /// TX run.
    pub(crate) tx_zcopy_bytes: AtomicU64,
    /// Work completions with an error status (flushes included).
    pub(crate) wr_errors: AtomicU64,
    pub(crate) terminate_sent: AtomicU64,
    pub(crate) terminate_received: AtomicU64,
}

impl QpStats {
    pub(crate) const fn new() -> Self {
        Self {
            tx_bytes: AtomicU64::new(0),
            rx_bytes: AtomicU64::new(0),
            tx_msgs: AtomicU64::new(0),
            rx_msgs: AtomicU64::new(0),
            tx_zcopy_bytes: AtomicU64::new(0),
            wr_errors: AtomicU64::new(0),
            terminate_sent: AtomicU64::new(0),
            terminate_received: AtomicU64::new(0),
        }
    }

    pub(crate) fn add(c: &AtomicU64, n: u64) {
        c.fetch_add(n, Ordering::Relaxed);
    }

    /// [`Self::add`] for a counter whose writers are serialized (the
    /// stream lock, or the one TX run): a load and a store, no locked
    /// instruction on the message path. Readers still see whole values.
    pub(crate) fn bump(c: &AtomicU64, n: u64) {
        c.store(c.load(Ordering::Relaxed).wrapping_add(n), Ordering::Relaxed);
    }

    fn get(c: &AtomicU64) -> u64 {
        c.load(Ordering::Relaxed)
    }
}

fn state_name(s: QpState) -> &'static CStr {
    match s {
        QpState::Reset => c"RESET",
        QpState::Init => c"INIT",
        QpState::Rtr => c"RTR",
        QpState::Rts => c"RTS",
        QpState::Sqd => c"SQD",
        QpState::Sqe => c"SQE",
        QpState::Err => c"ERR",
    }
}

impl Qp {
    /// Octets of the stream read from TCP.
    #[cfg(rsiw_kunit)]
    pub(crate) fn rx_bytes(&self) -> u64 {
        QpStats::get(&self.stats.rx_bytes)
    }

    /// The QP's driver attributes for `rdma resource show qp -dd`.
    pub(crate) fn fill_res(&self, out: &mut ResAttrs<'_>) -> Result {
        let s = &self.stats;
        out.string(c"qp_state", state_name(self.ib_state()))?;
        out.u64(c"tx_bytes", QpStats::get(&s.tx_bytes))?;
        out.u64(c"rx_bytes", QpStats::get(&s.rx_bytes))?;
        out.u64(c"tx_msgs", QpStats::get(&s.tx_msgs))?;
        out.u64(c"rx_msgs", QpStats::get(&s.rx_msgs))?;
        out.u64(c"tx_zcopy_bytes", QpStats::get(&s.tx_zcopy_bytes))?;
        out.u64(c"wr_errors", QpStats::get(&s.wr_errors))?;
        out.u64(c"terminate_sent", QpStats::get(&s.terminate_sent))?;
        out.u64(c"terminate_received", QpStats::get(&s.terminate_received))?;
        // The TCP connection's retransmitted segments, while it has one.
        if let Some(n) = self.sock.lock().as_ref().map(|s| s.total_retrans()) {
            out.u32(c"tcp_retrans", n)?;
        }
        Ok(())
    }
}
