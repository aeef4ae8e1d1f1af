// SPDX-License-Identifier: GPL-2.0
//! The QP-to-iw_cm event sink: orders ESTABLISHED, DISCONNECT and CLOSE
//! whatever the QP reports, and ends a connection that never saw its RTR.

use super::*;

/// Phases of an `iw_cm` connection as the sink sees them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Phase {
    /// Passive, accepted: `ESTABLISHED` not delivered yet (RTR pending).
    AwaitEstablished,
    /// Active: `CONNECT_REPLY` not delivered yet.
    AwaitReply,
    Established,
    Disconnected,
    Closed,
}

pub(crate) struct SinkState {
    pub(super) phase: Phase,
    /// The hand-off succeeded; before, reports are only recorded.
    pub(super) armed: bool,
    pub(super) est_pending: bool,
    pub(super) close_pending: bool,
    pub(super) target: Option<Arc<dyn CmEventTarget>>,
    pub(super) ird: u8,
    pub(super) ord: u8,
    /// Passive: the cep watching the RTR deadline, kicked when the wait
    /// ends so it goes at once instead of at its timer.
    pub(super) watcher: Option<Arc<Cep>>,
}

#[pin_data(PinnedDrop)]
pub(crate) struct SinkShared {
    #[pin]
    pub(super) state: SpinLockIrq<SinkState>,
}

/// The QP's channel to `iw_cm` (holds the `iw_cm_id` reference).
///
/// Keeps the event order `iw_cm` requires whatever the QP reports and
/// when: `ESTABLISHED` (passive) or `CONNECT_REPLY` (active) first, at
/// most one `DISCONNECT`, then exactly one `CLOSE`, after which the
/// `iw_cm_id` reference is dropped; later reports are ignored. Callable
/// from any context (softirq included). Dropping the last clone without
/// [`Self::closed`] closes.
#[derive(Clone)]
pub(crate) struct CmEventSink(Arc<SinkShared>);

impl CmEventSink {
    pub(crate) fn new(
        target: Arc<dyn CmEventTarget>,
        phase: Phase,
        ird: u16,
        ord: u16,
    ) -> Result<Self> {
        let st = SinkState {
            phase,
            armed: false,
            est_pending: false,
            close_pending: false,
            target: Some(target),
            ird: clamp_u8(ird),
            ord: clamp_u8(ord),
            watcher: None,
        };
        Ok(Self(Arc::pin_init(
            pin_init!(SinkShared { state <- new_spinlock_irq!(st, "rsiw_cm_sink") }),
            GFP_KERNEL,
        )?))
    }

    /// Passive side: the RTR arrived (or none was negotiated); the
    /// connection is in full operation.
    pub(crate) fn established(&self) {
        let watcher = {
            let mut g = self.0.state.lock();
            if !g.armed {
                g.est_pending = true;
                return;
            }
            if g.phase == Phase::AwaitEstablished {
                deliver(&g, CmEventKind::Established, 0);
                g.phase = Phase::Established;
            }
            g.watcher.take()
        };
        if let Some(c) = watcher {
            kick_cep(&c);
        }
    }

    /// Passive side: `cep` watches the RTR deadline.
    pub(crate) fn watch(&self, cep: Arc<Cep>) {
        self.0.state.lock().watcher = Some(cep);
    }

    /// The watching cep is closing: no reference cycle left behind.
    pub(crate) fn unwatch(&self) -> Option<Arc<Cep>> {
        self.0.state.lock().watcher.take()
    }

    /// The peer closed its direction (FIN) in full operation.
    pub(crate) fn disconnected(&self) {
        let mut g = self.0.state.lock();
        if g.armed && g.phase == Phase::Established {
            deliver(&g, CmEventKind::Disconnect, 0);
            g.phase = Phase::Disconnected;
        }
    }

    /// The connection is gone (torn down, reset, lost): the last event.
    pub(crate) fn closed(&self) {
        let watcher = {
            let mut g = self.0.state.lock();
            if !g.armed {
                g.close_pending = true;
                return;
            }
            close_locked(&mut g, -(ECONNRESET.to_errno().abs()));
            g.watcher.take()
        };
        if let Some(c) = watcher {
            kick_cep(&c);
        }
    }

    #[cfg(rsiw_kunit)]
    /// Whether `CLOSE` was delivered (the CM gave up or the QP closed).
    pub(crate) fn is_closed(&self) -> bool {
        self.0.state.lock().phase == Phase::Closed
    }

    /// The hand-off succeeded: reports count from now on.
    pub(crate) fn arm(&self) {
        let mut g = self.0.state.lock();
        g.armed = true;
        if core::mem::take(&mut g.est_pending) && g.phase == Phase::AwaitEstablished {
            deliver(&g, CmEventKind::Established, 0);
            g.phase = Phase::Established;
        }
        if g.close_pending && g.phase != Phase::AwaitReply {
            close_locked(&mut g, -(ECONNRESET.to_errno().abs()));
        }
    }

    /// Active side: reports `CONNECT_REPLY` with success, or with
    /// `-ECONNRESET` if the QP already lost the connection.
    pub(crate) fn connect_reply(
        &self,
        private_data: &[u8],
        local: Option<SockAddr>,
        remote: Option<SockAddr>,
    ) {
        let mut g = self.0.state.lock();
        if g.phase != Phase::AwaitReply {
            return;
        }
        let status = if g.close_pending {
            -(ECONNRESET.to_errno().abs())
        } else {
            0
        };
        if let Some(t) = &g.target {
            send_event(
                &**t,
                &CmEvent {
                    kind: CmEventKind::ConnectReply,
                    status,
                    local,
                    remote,
                    private_data,
                    provider_data: 0,
                    // As for CONNECT_REQUEST: event.ird is the ORD we may
                    // use, event.ord the IRD we grant (rdma_cm's mapping).
                    ird: g.ord,
                    ord: g.ird,
                },
            );
        }
        if status == 0 {
            g.phase = Phase::Established;
        } else {
            g.phase = Phase::Closed;
            g.target = None;
        }
    }

    /// RTR timeout: if still waiting, `ESTABLISHED` (`-ETIMEDOUT`, as
    /// `iw_cm` needs it before `CLOSE`) and `CLOSE`. True if it expired.
    pub(crate) fn expire(&self) -> bool {
        let mut g = self.0.state.lock();
        if g.phase != Phase::AwaitEstablished {
            return false;
        }
        close_locked(&mut g, -(ETIMEDOUT.to_errno().abs()));
        true
    }

    pub(crate) fn is_waiting(&self) -> bool {
        self.0.state.lock().phase == Phase::AwaitEstablished
    }
}

pub(crate) fn deliver(g: &SinkState, kind: CmEventKind, status: i32) {
    if let Some(t) = &g.target {
        send_event(
            &**t,
            &CmEvent {
                kind,
                status,
                local: None,
                remote: None,
                private_data: &[],
                provider_data: 0,
                ird: g.ord,
                ord: g.ird,
            },
        );
    }
}

/// Delivers what `iw_cm` needs to end the connection and drops the
/// `iw_cm_id` reference. `status`: of the `ESTABLISHED` that a passive
/// connection still waiting for its RTR gets first.
pub(crate) fn close_locked(g: &mut SinkState, status: i32) {
    match g.phase {
        Phase::Closed => return,
        // CONNECT_REPLY is the CM's to send; it will carry the failure.
        Phase::AwaitReply => {
            g.close_pending = true;
            return;
        }
        Phase::AwaitEstablished => {
            deliver(g, CmEventKind::Established, status);
            deliver(g, CmEventKind::Close, 0);
        }
        Phase::Established | Phase::Disconnected => deliver(g, CmEventKind::Close, 0),
    }
    g.phase = Phase::Closed;
    g.target = None;
}

#[pinned_drop]
impl PinnedDrop for SinkShared {
    fn drop(self: Pin<&mut Self>) {
        let mut g = self.state.lock();
        if g.armed {
            if g.phase == Phase::AwaitReply {
                // Dropped before the CM reported the reply: cannot happen
                // (the CM holds a clone until then); keep iw_cm consistent.
                g.close_pending = true;
            } else {
                close_locked(&mut g, -(ECONNRESET.to_errno().abs()));
            }
        }
    }
}
