// SPDX-License-Identifier: GPL-2.0
//! Connection management: the iWARP side of `iw_cm` in safe Rust.
//!
//! * [`Listener`]: a listening TCP socket; its `data_ready` only schedules
//!   the listener's work item, which accepts and starts one passive
//!   connection endpoint ([`Cep`]) per socket.
//! * [`Cep`]: one connection in MPA negotiation, driving the engine's
//!   sans-IO startup machine (`engine::mpa::startup`): the machine judges
//!   the frames, negotiates and decides what goes in a Terminate (RFC 6581
//!   section 9); the cep does the I/O, the timers and the `iw_cm` events.
//!   Passive: a [`Responder`] reads the MPA Request (bounded by
//!   [`CmConfig::mpa_timeout_ms`]), then `CONNECT_REQUEST`; then [`accept`]
//!   or [`reject`]. Active ([`connect`]): non-blocking TCP connect, an
//!   [`Initiator`] sends the Request and checks the Reply, `CONNECT_REPLY`.
//! * The hand-off: on success the socket, unhooked from the CM, goes to the
//!   QP as a [`Stream`] (with the machine's [`StreamParams`]) through
//!   [`CmQp::attach`], together with a [`CmEventSink`] through which the QP
//!   reports `ESTABLISHED` (passive, after the RTR), `DISCONNECT` and
//!   `CLOSE`.
//!
//! The CM reads the socket only up to the last octet of the MPA frame
//! (`tcp_read_sock` with a consumer that stops where the machine stops
//! taking), so whatever the peer sends after it stays queued in the socket
//! for the QP. Unlike siw, no FPDU arriving between the MPA exchange and
//! the QP taking over is lost.
//!
//! All work runs on the CM's workqueue (`ffi::runtime`); every wait is bounded
//! by a timer; sockets are non-blocking. Events reach `iw_cm` through the
//! [`CmEventTarget`] trait (`ffi::ib::CmId` holds an `iw_cm_id`
//! reference); the KUnit tests implement it with a recorder.

pub(crate) mod tuning;
pub(crate) mod wildcard;

use core::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use kernel::{
    impl_has_hr_timer, impl_has_work, new_mutex, new_work,
    prelude::*,
    sync::{Arc, ArcBorrow, Mutex},
    time::{
        delay::fsleep,
        hrtimer::{
            ArcHrTimerHandle, HrTimer, HrTimerCallback, HrTimerCallbackContext, HrTimerPointer,
            HrTimerRestart, RelativeMode,
        },
        Delta, Monotonic,
    },
    workqueue::{Work, WorkItem},
};

use crate::{
    device::{
        counters::{HwCounter, HwCounters},
        limits::Limits,
    },
    engine::{
        mpa::{
            negotiate::{CrcPolicy, InitiatorConfig, ResponderConfig},
            startup::{self, Initiator, Responder, StreamParams},
        },
        wire::mpa::{RtrSet, IRD_ORD_MASK},
    },
    ffi::{
        crc::ModuleCrc32c,
        net::socket::{ListenOpts, Net, SockAddr, SockRx, SocketEvents, TcpSocket, TcpState},
        sync::{new_spinlock_irq, SpinLockIrq},
        trace,
    },
};

/// Sending a frame on a fresh socket: retries 1 ms apart when the socket
/// buffer is full (it never is for a frame this small; bounded anyway).
const SEND_TRIES: u32 = 1000;

/// Logs a CM message driven by a peer, rate limited.
macro_rules! cm_log {
    ($($arg:tt)*) => {
        if $crate::ffi::runtime::ratelimited() {
            kernel::pr_info!($($arg)*);
        }
    };
}

mod active;
mod config;
mod event;
mod handoff;
mod io;
mod iw_cm;
mod listener;
mod passive;
pub(crate) mod registry;
mod sink;
#[cfg(rsiw_kunit)]
mod tests;

pub(crate) use self::active::*;
pub(crate) use self::config::*;
pub(crate) use self::event::*;
pub(crate) use self::handoff::*;
pub(crate) use self::io::*;
pub(crate) use self::iw_cm::Runtime;
pub(crate) use self::listener::*;
pub(crate) use self::passive::*;
pub(crate) use self::registry::*;
pub(crate) use self::sink::*;

// ---- connection endpoints -----------------------------------------------

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum CepPhase {
    /// Active: TCP connect in progress.
    Connecting,
    /// Active: Request sent, waiting for the Reply.
    AwaitReply,
    /// Passive: waiting for the Request.
    AwaitRequest,
    /// Passive: `CONNECT_REQUEST` delivered, waiting for accept/reject.
    AwaitAccept,
    /// Passive, handed off: watching the RTR deadline.
    WatchRtr,
    Closed,
}

impl CepPhase {
    /// The name in `rsiw_cm_state` events.
    fn name(self) -> &'static str {
        match self {
            Self::Connecting => "connecting",
            Self::AwaitReply => "await_reply",
            Self::AwaitRequest => "await_request",
            Self::AwaitAccept => "await_accept",
            Self::WatchRtr => "watch_rtr",
            Self::Closed => "closed",
        }
    }
}

/// The active side's MPA machine and QP.
struct Active {
    qp: Arc<dyn CmQp>,
    /// Holds the Request until it is sent, then takes the Reply (boxed:
    /// about 1.2 KiB).
    mpa: KBox<Initiator>,
}

struct CepInner {
    phase: CepPhase,
    sock: Option<TcpSocket>,
    /// Passive: the MPA machine that takes the Request and queues the
    /// Reply (boxed: about 1.2 KiB).
    passive: Option<KBox<Responder>>,
    timer: Option<ArcHrTimerHandle<Cep>>,
    /// Passive: the listener's `iw_cm_id` (for `CONNECT_REQUEST`); active:
    /// the connecting `iw_cm_id`.
    target: Option<Arc<dyn CmEventTarget>>,
    active: Option<Active>,
    sink: Option<CmEventSink>,
    /// The connection's addresses as last seen (for trace events after
    /// the socket went to the QP).
    local: Option<SockAddr>,
    remote: Option<SockAddr>,
}

/// A connection endpoint during MPA negotiation.
#[pin_data]
pub(crate) struct Cep {
    id: u64,
    /// The listener that accepted it (0: active side).
    listener: u64,
    cfg: CmConfig,
    /// Set by the timer, read by the work item.
    expired: AtomicBool,
    /// Passive, not handed off or closed yet: counts against the backlog.
    pending: AtomicBool,
    #[pin]
    inner: Mutex<CepInner>,
    #[pin]
    work: Work<Cep>,
    #[pin]
    timer: HrTimer<Cep>,
}

impl_has_work! {
    impl HasWork<Self> for Cep { self.work }
}

impl_has_hr_timer! {
    impl HasHrTimer<Self> for Cep {
        mode: RelativeMode<Monotonic>,
        field: self.timer
    }
}

impl WorkItem for Cep {
    type Pointer = Arc<Cep>;

    fn run(this: Arc<Cep>) {
        this.pump();
    }
}

impl HrTimerCallback for Cep {
    type Pointer<'a> = Arc<Self>;

    fn run(this: ArcBorrow<'_, Self>, _ctx: HrTimerCallbackContext<'_, Self>) -> HrTimerRestart {
        // Hard interrupt context: only note it and let the work item act.
        this.expired.store(true, Ordering::Release);
        kick_cep(&Arc::from(this));
        HrTimerRestart::NoRestart
    }
}

/// Socket callbacks of a cep: schedule its work item, nothing else.
struct CepWake(Arc<Cep>);

impl SocketEvents for CepWake {
    fn data_ready(&self, _rx: &SockRx<'_>) {
        kick_cep(&self.0);
    }

    fn write_space(&self) {}

    fn state_change(&self, _rx: &SockRx<'_>) {
        kick_cep(&self.0);
    }
}

fn errno(e: Error) -> i32 {
    -(e.to_errno().abs())
}

impl Cep {
    fn new(listener: u64, cfg: CmConfig, phase: CepPhase) -> Result<Arc<Self>> {
        let inner = CepInner {
            phase,
            sock: None,
            passive: None,
            timer: None,
            target: None,
            active: None,
            sink: None,
            local: None,
            remote: None,
        };
        let pending = listener != 0;
        let cep = Arc::pin_init(
            pin_init!(Cep {
                id: next_id(),
                listener,
                cfg,
                expired: AtomicBool::new(false),
                pending: AtomicBool::new(pending),
                inner <- new_mutex!(inner, "rsiw_cm_cep"),
                work <- new_work!("rsiw_cm_cep"),
                timer <- HrTimer::new(),
            }),
            GFP_KERNEL,
        )?;
        crate::cm::registry::lock::with(|r| r.ceps.push(cep.clone(), GFP_KERNEL))??;
        Ok(cep)
    }

    /// Counts a connection outcome in the device's counters.
    fn count(&self, c: HwCounter) {
        if let Some(k) = &self.cfg.counters {
            k.add(c, 1);
        }
    }

    /// Moves to `new`, tracing the change (`rsiw_cm_state`).
    fn set_phase(&self, g: &mut CepInner, new: CepPhase) {
        let old = g.phase;
        g.phase = new;
        if old != new {
            self.trace_phase(g, old.name());
        }
    }

    /// `rsiw_cm_state` from `old` to the current phase, with the
    /// connection's addresses (refreshed while the cep has the socket).
    fn trace_phase(&self, g: &mut CepInner, old: &str) {
        if !trace::cm_state_enabled() {
            return;
        }
        if let Some(s) = g.sock.as_ref() {
            g.local = s.local_addr().ok().or(g.local);
            g.remote = s.peer_addr().ok().or(g.remote);
        }
        trace::cm_state(self.id, g.local, g.remote, old, g.phase.name());
    }

    /// `rsiw_mpa` for an exchange that ended without a stream.
    fn trace_mpa_end(&self, initiator: bool, result: &str, error: u16) {
        trace::mpa(&trace::MpaResult {
            cm_id: self.id,
            initiator,
            result,
            rtr: "-",
            error,
            ..Default::default()
        });
    }

    /// `rsiw_mpa` for a negotiated stream.
    fn trace_mpa_ok(&self, p: &StreamParams) {
        use crate::engine::{mpa::negotiate::RtrMode, wire::mpa::Rtr};
        let rtr = match p.rtr {
            None => "none",
            Some(RtrMode::Zero(Rtr::Send)) => "send",
            Some(RtrMode::Zero(Rtr::Write)) => "write",
            Some(RtrMode::Zero(Rtr::Read)) => "read",
            Some(RtrMode::UlpSend) => "ulp_send",
        };
        trace::mpa(&trace::MpaResult {
            cm_id: self.id,
            initiator: p.initiator,
            result: "accepted",
            rev: p.rev,
            crc: p.framing.crc,
            markers_tx: p.framing.markers_tx,
            markers_rx: p.framing.markers_rx,
            ird: p.ird,
            ord: p.ord,
            rtr,
            error: 0,
        });
    }

    /// (Re)starts the timer; the work item sees `expired` when it fires.
    fn arm_timer(self: &Arc<Self>, g: &mut CepInner, ms: u32) {
        drop(g.timer.take());
        self.expired.store(false, Ordering::Release);
        g.timer = Some(self.clone().start(Delta::from_millis(i64::from(ms))));
    }

    /// Ends the cep: timer cancelled, socket released, references dropped,
    /// out of the registry. `notify`: an active cep that has not reported
    /// its reply reports `CONNECT_REPLY` with this status, a handed-off
    /// passive one still waiting for its RTR reports its close.
    fn close_locked(&self, g: &mut CepInner, notify: Option<i32>) {
        if g.phase == CepPhase::Closed {
            return;
        }
        if let Some(status) = notify {
            match g.phase {
                CepPhase::Connecting | CepPhase::AwaitReply => self.report_failure(g, status, &[]),
                CepPhase::WatchRtr => {
                    if let Some(s) = &g.sink {
                        s.closed();
                    }
                }
                _ => {}
            }
        }
        self.set_phase(g, CepPhase::Closed);
        self.pending.store(false, Ordering::Relaxed);
        drop(g.timer.take());
        drop(g.sock.take());
        drop(g.target.take());
        drop(g.active.take());
        drop(g.passive.take());
        // Our caller holds a reference: this is never the last one.
        drop(g.sink.as_ref().and_then(|s| s.unwatch()));
        drop(g.sink.take());
        unregister_cep(self.id);
    }

    fn close(&self, notify: Option<i32>) {
        let mut g = self.inner.lock();
        self.close_locked(&mut g, notify);
    }

    /// Active side: `CONNECT_REPLY` with an error (the cep closes after).
    fn report_failure(&self, g: &CepInner, status: i32, private_data: &[u8]) {
        if let Some(t) = &g.target {
            let (local, remote) = match &g.sock {
                Some(s) => (s.local_addr().ok(), s.peer_addr().ok()),
                None => (None, None),
            };
            send_event(
                &**t,
                &CmEvent {
                    kind: CmEventKind::ConnectReply,
                    status,
                    local,
                    remote,
                    private_data,
                    provider_data: 0,
                    ird: 0,
                    ord: 0,
                },
            );
        }
    }

    fn fail_active(&self, g: &mut CepInner, status: i32) {
        self.report_failure(g, status, &[]);
        self.close_locked(g, None);
    }

    /// The work item: advances negotiation as far as the socket allows.
    fn pump(self: &Arc<Self>) {
        let mut g = self.inner.lock();
        let expired = self.expired.load(Ordering::Acquire);
        match g.phase {
            CepPhase::Closed => {}
            CepPhase::AwaitRequest => self.pump_request(&mut g, expired),
            CepPhase::Connecting | CepPhase::AwaitReply => self.pump_active(&mut g, expired),
            CepPhase::AwaitAccept => {
                // The peer gave up while the ULP decides: accept/reject
                // will find no socket and fail with ECONNRESET.
                if g.sock.as_ref().is_some_and(|s| s.state().is_closing()) {
                    drop(g.sock.take());
                }
            }
            CepPhase::WatchRtr => {
                let waiting = g.sink.as_ref().is_some_and(|s| s.is_waiting());
                if !waiting {
                    self.close_locked(&mut g, None);
                } else if expired {
                    if let Some(s) = &g.sink {
                        s.expire();
                    }
                    self.count(HwCounter::CmTimeouts);
                    cm_log!("cm: no RTR from the initiator in time\n");
                    self.close_locked(&mut g, None);
                }
            }
        }
    }

    /// Closes a cep of a listener being destroyed, unless handed off.
    fn close_if_pending(&self) {
        let mut g = self.inner.lock();
        if matches!(g.phase, CepPhase::AwaitRequest | CepPhase::AwaitAccept) {
            self.close_locked(&mut g, None);
        }
    }
}
