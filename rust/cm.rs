// SPDX-License-Identifier: GPL-2.0
//! Connection management: the iWARP side of `iw_cm` in safe Rust.
//!
//! * [`Listener`]: a listening TCP socket; its `data_ready` only schedules
//!   the listener's work item, which accepts and starts one passive
//!   connection endpoint ([`Cep`]) per socket.
//! * [`Cep`]: one connection in MPA negotiation. Passive: reads the MPA
//!   Request (bounded by [`CmConfig::mpa_timeout_ms`]), judges it and
//!   reports `CONNECT_REQUEST`; then [`accept`] or [`reject`]. Active
//!   ([`connect`]): non-blocking TCP connect, MPA Request, Reply checked,
//!   `CONNECT_REPLY`.
//! * The hand-off: on success the socket, unhooked from the CM, goes to the
//!   QP as a [`Stream`] through [`CmQp::attach`], together with a
//!   [`CmEventSink`] through which the QP reports `ESTABLISHED` (passive,
//!   after the RTR), `DISCONNECT` and `CLOSE`.
//!
//! The CM reads the socket only up to the last octet of the MPA frame
//! (`tcp_read_sock` with a consumer that stops there), so whatever the peer
//! sends after it stays queued in the socket for the QP. Unlike siw, no
//! FPDU arriving between the MPA exchange and the QP taking over is lost.
//!
//! All work runs on the CM's workqueue (`ffi::cm`); every wait is bounded
//! by a timer; sockets are non-blocking. Events reach `iw_cm` through the
//! [`CmEventTarget`] trait (`ffi::cm::CmIdRef` holds an `iw_cm_id`
//! reference); the KUnit tests implement it with a recorder.

use core::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use kernel::{
    impl_has_hr_timer, impl_has_work, new_mutex, new_spinlock_irq, new_work,
    prelude::*,
    sync::{Arc, ArcBorrow, Mutex, SpinLockIrq},
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
    device::Limits,
    engine::{
        error::TermError,
        mpa::negotiate::{
            check_reply, judge_request, max_private_data, request, CrcPolicy, Framing,
            InitiatorConfig, Refused, ResponderConfig, RtrMode,
        },
        wire::{
            mpa::{frame_len, Kind, Repr, RtrSet, HEADER_LEN, IRD_ORD_MASK, MAX_PRIVATE_DATA},
            terminate,
        },
    },
    ffi::{
        self,
        crc::KernelCrc32c,
        socket::{ListenOpts, Net, SockAddr, SockRx, SocketEvents, TcpSocket, TcpState},
    },
};

/// Longest MPA Request/Reply frame.
const MAX_FRAME: usize = HEADER_LEN + MAX_PRIVATE_DATA;
/// Sending a frame on a fresh socket: retries 1 ms apart when the socket
/// buffer is full (it never is for a frame this small; bounded anyway).
const SEND_TRIES: u32 = 1000;

/// Logs a CM message driven by a peer, rate limited.
macro_rules! cm_log {
    ($($arg:tt)*) => {
        if $crate::ffi::cm::ratelimited() {
            kernel::pr_info!($($arg)*);
        }
    };
}

// ---- configuration ------------------------------------------------------

/// The device's MPA settings and the CM's timeouts.
#[derive(Clone, Copy, Debug)]
pub(crate) struct CmConfig {
    /// CRC: used if the peer asks (`IfPeerAsks`) or always (`Required`).
    pub(crate) crc: CrcPolicy,
    /// Ask for markers on what we receive (we always honour the peer's M).
    pub(crate) markers: bool,
    /// Initiator: peer-to-peer mode with these RTR kinds (`None`:
    /// client-server).
    pub(crate) p2p: Option<RtrSet>,
    /// Responder: the RTR kinds accepted from a peer-to-peer initiator.
    pub(crate) rtr: RtrSet,
    /// Device limits for IRD/ORD.
    pub(crate) max_ird: u16,
    pub(crate) max_ord: u16,
    /// Bound on TCP connect + MPA exchange (each side).
    pub(crate) mpa_timeout_ms: u32,
    /// Responder: bound on the wait for the initiator's RTR after accept.
    pub(crate) rtr_timeout_ms: u32,
    /// Initiator: wait this long after the MPA Reply before the RTR goes
    /// out. Linux siw as responder arms its RTR receive path only after
    /// sending its Reply and misses an RTR that comes first (a connection
    /// that then never establishes); over a fast link a delay avoids it.
    pub(crate) rtr_delay_ms: u32,
}

impl CmConfig {
    /// MPA Rev 2, enhanced (RFC 6581) with IRD/ORD, CRC if the peer asks
    /// (always with the `mpa_crc` module parameter), markers honoured,
    /// peer-to-peer offering the RTR kinds of the `p2p_rtr` module
    /// parameter (default: every kind), 10 s timeouts.
    pub(crate) fn for_device(limits: &Limits) -> Self {
        let cap = |v: u32| u16::try_from(v).unwrap_or(u16::MAX).min(IRD_ORD_MASK - 1);
        let crc = if crate::module_parameters::mpa_crc.value() {
            CrcPolicy::Required
        } else {
            CrcPolicy::IfPeerAsks
        };
        Self {
            crc,
            markers: false,
            p2p: crate::cm_tuning::offered_rtr(),
            rtr: RtrSet::ALL,
            max_ird: cap(limits.max_ird),
            max_ord: cap(limits.max_ord),
            mpa_timeout_ms: 10_000,
            rtr_timeout_ms: 10_000,
            rtr_delay_ms: crate::module_parameters::rtr_delay_ms.value().min(1000),
        }
    }

    fn responder(&self, ird: u16, ord: u16) -> ResponderConfig {
        ResponderConfig {
            max_rev: 2,
            crc: self.crc,
            markers: self.markers,
            ird,
            ord,
            min_ord: 0,
            rtr: self.rtr,
        }
    }

    fn initiator<'a>(&self, ird: u16, ord: u16, private_data: &'a [u8]) -> InitiatorConfig<'a> {
        InitiatorConfig {
            crc: self.crc,
            markers: self.markers,
            enhanced: true,
            ird,
            ord,
            p2p: self.p2p,
            private_data,
        }
    }

    /// The ULP's IRD/ORD, checked against the device limits.
    fn ird_ord(&self, ird: u32, ord: u32) -> Result<(u16, u16)> {
        let ird = u16::try_from(ird).map_err(|_| EINVAL)?;
        let ord = u16::try_from(ord).map_err(|_| EINVAL)?;
        if ird > self.max_ird || ord > self.max_ord {
            return Err(EINVAL);
        }
        Ok((ird, ord))
    }
}

/// `iw_cm_conn_param` in Rust terms (what `iw_connect`/`iw_accept` pass).
pub(crate) struct ConnParams<'a> {
    pub(crate) ird: u32,
    pub(crate) ord: u32,
    pub(crate) private_data: &'a [u8],
}

// ---- events -------------------------------------------------------------

/// `enum iw_cm_event_type`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum CmEventKind {
    ConnectRequest,
    ConnectReply,
    Established,
    Disconnect,
    Close,
}

/// `struct iw_cm_event`; `private_data` is borrowed (iw_cm copies it).
#[derive(Clone, Copy, Debug)]
pub(crate) struct CmEvent<'a> {
    pub(crate) kind: CmEventKind,
    /// 0 or a negative errno.
    pub(crate) status: i32,
    pub(crate) local: Option<SockAddr>,
    pub(crate) remote: Option<SockAddr>,
    pub(crate) private_data: &'a [u8],
    /// `CONNECT_REQUEST`: the cep's id, handed back in `iw_accept`/`iw_reject`.
    pub(crate) provider_data: usize,
    pub(crate) ird: u8,
    pub(crate) ord: u8,
}

/// Where events go: an `iw_cm_id` (`ffi::cm::CmIdRef`, which holds a
/// reference on it until dropped) or a test recorder. `deliver` may be
/// called in any context, with spinlocks held: it must not sleep.
pub(crate) trait CmEventTarget: Send + Sync {
    fn deliver(&self, ev: &CmEvent<'_>) -> Result;
}

fn clamp_u8(v: u16) -> u8 {
    u8::try_from(v).unwrap_or(u8::MAX)
}

fn send_event(target: &dyn CmEventTarget, ev: &CmEvent<'_>) {
    if let Err(e) = target.deliver(ev) {
        cm_log!("cm: event {:?} not delivered: {:?}\n", ev.kind, e);
    }
}

// ---- the hand-off to the QP ---------------------------------------------

/// What the MPA exchange settled, for `Qp::establish`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct StreamParams {
    pub(crate) framing: Framing,
    pub(crate) ird: u16,
    pub(crate) ord: u16,
    /// Peer-to-peer RTR (`None`: client-server).
    pub(crate) rtr: Option<RtrMode>,
    /// This end sent the MPA Request (it sends the RTR).
    pub(crate) initiator: bool,
}

/// A connection in full operation, handed to the QP.
///
/// `sock` is connected, non-blocking and not hooked; the stream positions
/// of both directions are right after the MPA frames. The peer's first
/// octets after its MPA frame are `leftover` (what the CM read past the
/// frame: today always empty, the CM stops at the frame's end) followed by
/// whatever is queued in `sock`.
pub(crate) struct Stream {
    pub(crate) sock: TcpSocket,
    pub(crate) params: StreamParams,
    pub(crate) leftover: KVec<u8>,
}

/// The QP side of the hand-off.
///
/// `attach` runs in process context. It must hook the socket first, then
/// consume `leftover` and the data already queued (`TcpSocket::read`),
/// and check `sock.state()` (the peer may have closed before the hook),
/// so that no octet and no close is missed. On `Err` the QP keeps neither
/// the stream (dropping it closes the connection) nor the sink.
pub(crate) trait CmQp: Send + Sync {
    fn attach(&self, stream: Stream, cm: CmEventSink) -> Result;
    fn qpn(&self) -> u32;
}

/// Phases of an `iw_cm` connection as the sink sees them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    /// Passive, accepted: `ESTABLISHED` not delivered yet (RTR pending).
    AwaitEstablished,
    /// Active: `CONNECT_REPLY` not delivered yet.
    AwaitReply,
    Established,
    Disconnected,
    Closed,
}

struct SinkState {
    phase: Phase,
    /// The hand-off succeeded; before, reports are only recorded.
    armed: bool,
    est_pending: bool,
    close_pending: bool,
    target: Option<Arc<dyn CmEventTarget>>,
    ird: u8,
    ord: u8,
    /// Passive: the cep watching the RTR deadline, kicked when the wait
    /// ends so it goes at once instead of at its timer.
    watcher: Option<Arc<Cep>>,
}

#[pin_data(PinnedDrop)]
struct SinkShared {
    #[pin]
    state: SpinLockIrq<SinkState>,
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
    fn new(target: Arc<dyn CmEventTarget>, phase: Phase, ird: u16, ord: u16) -> Result<Self> {
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
    fn watch(&self, cep: Arc<Cep>) {
        self.0.state.lock().watcher = Some(cep);
    }

    /// The watching cep is closing: no reference cycle left behind.
    fn unwatch(&self) -> Option<Arc<Cep>> {
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

    /// Whether `CLOSE` was delivered (the CM gave up or the QP closed).
    pub(crate) fn is_closed(&self) -> bool {
        self.0.state.lock().phase == Phase::Closed
    }

    /// The hand-off succeeded: reports count from now on.
    fn arm(&self) {
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
    fn connect_reply(&self, private_data: &[u8], local: Option<SockAddr>, remote: Option<SockAddr>) {
        let mut g = self.0.state.lock();
        if g.phase != Phase::AwaitReply {
            return;
        }
        let status = if g.close_pending { -(ECONNRESET.to_errno().abs()) } else { 0 };
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
    fn expire(&self) -> bool {
        let mut g = self.0.state.lock();
        if g.phase != Phase::AwaitEstablished {
            return false;
        }
        close_locked(&mut g, -(ETIMEDOUT.to_errno().abs()));
        true
    }

    fn is_waiting(&self) -> bool {
        self.0.state.lock().phase == Phase::AwaitEstablished
    }
}

fn deliver(g: &SinkState, kind: CmEventKind, status: i32) {
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
fn close_locked(g: &mut SinkState, status: i32) {
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

// ---- registry -----------------------------------------------------------

/// Every live listener and cep, for lookups by id (`provider_data`) and
/// for teardown. Lives in `ffi::cm` (a global lock).
pub(crate) struct Registry {
    ceps: KVec<Arc<Cep>>,
    listeners: KVec<Arc<Listener>>,
    /// Loopback sockets of wildcard listeners (`crate::cm_loopback`).
    pub(crate) catchers: KVec<Arc<crate::cm_loopback::Catcher>>,
}

impl Registry {
    pub(crate) const fn new() -> Self {
        Self { ceps: KVec::new(), listeners: KVec::new(), catchers: KVec::new() }
    }
}

static NEXT_ID: AtomicU64 = AtomicU64::new(1);

fn next_id() -> u64 {
    NEXT_ID.fetch_add(1, Ordering::Relaxed)
}

fn find_cep(id: u64) -> Option<Arc<Cep>> {
    ffi::cm::with_registry(|r| r.ceps.iter().find(|c| c.id == id).cloned()).ok().flatten()
}

fn unregister_cep(id: u64) {
    let _ = ffi::cm::with_registry(|r| r.ceps.retain(|c| c.id != id));
}

/// Live ceps (tests: nothing leaks).
pub(crate) fn live_ceps() -> usize {
    ffi::cm::with_registry(|r| r.ceps.len()).unwrap_or(0)
}

/// Module teardown: closes every listener and every cep still in the CM
/// (connections in negotiation are reported failed to `iw_cm`).
pub(crate) fn shutdown() {
    let taken = ffi::cm::with_registry(|r| {
        (core::mem::take(&mut r.listeners), core::mem::take(&mut r.ceps), core::mem::take(&mut r.catchers))
    });
    if let Ok((listeners, ceps, catchers)) = taken {
        crate::cm_loopback::shutdown(catchers);
        for l in listeners.iter() {
            l.close();
        }
        for c in ceps.iter() {
            c.close(Some(-(ECONNRESET.to_errno().abs())));
        }
    }
}

// ---- socket I/O ---------------------------------------------------------

/// Reads into `rx` up to the last octet of one MPA frame of `kind`, never
/// past it. `Ok(true)`: the frame is complete.
fn read_frame(sock: &TcpSocket, rx: &mut KVec<u8>, kind: Kind) -> Result<bool> {
    let mut bad = false;
    sock.read(&mut |chunk: &[u8]| {
        let mut used = 0;
        while used < chunk.len() {
            let need = match frame_len(rx, kind) {
                Err(_) => {
                    bad = true;
                    break;
                }
                Ok(None) => HEADER_LEN.saturating_sub(rx.len()).max(1),
                Ok(Some(total)) => total.saturating_sub(rx.len()),
            };
            if need == 0 {
                break;
            }
            let n = need.min(chunk.len() - used);
            // Within the capacity reserved at creation: never allocates.
            if rx.extend_from_slice(&chunk[used..used + n], GFP_ATOMIC).is_err() {
                bad = true;
                break;
            }
            used += n;
        }
        used
    });
    match frame_len(rx, kind) {
        Err(_) => Err(EPROTO),
        _ if bad => Err(EPROTO),
        Ok(Some(total)) => Ok(total == rx.len()),
        Ok(None) => Ok(false),
    }
}

/// Sends all of `bytes` (bounded retries while the socket is full).
fn send_all(sock: &TcpSocket, bytes: &[u8]) -> Result {
    let mut off = 0;
    let mut tries = 0;
    while off < bytes.len() {
        match sock.send(&[&bytes[off..]], false) {
            Ok(n) if n > 0 => off += n,
            Ok(_) | Err(EAGAIN) => {
                tries += 1;
                if tries > SEND_TRIES {
                    return Err(ETIMEDOUT);
                }
                fsleep(Delta::from_millis(1));
            }
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

fn send_frame(sock: &TcpSocket, repr: &Repr<'_>) -> Result {
    let mut buf = [0u8; MAX_FRAME];
    let len = repr.emit_bytes(&mut buf).map_err(|_| EINVAL)?;
    send_all(sock, &buf[..len])
}

/// RFC 6581 section 9: an initiator that cannot use the Reply (LLP errors
/// 5 to 7) sends a Terminate in the negotiated framing before closing.
fn send_terminate(sock: &TcpSocket, framing: Framing, error: TermError) {
    let mut seg = [0u8; 64];
    let Some(n) = terminate::Repr::for_error(error, None).emit_segment(1, &mut seg) else {
        return;
    };
    let mut out = [0u8; 128];
    let mut tx = framing.tx();
    if let Ok(len) = tx.write(&KernelCrc32c, &seg[..n], &[], &mut out) {
        let _ = send_all(sock, &out[..len]);
    }
}

fn kick_cep(cep: &Arc<Cep>) {
    if let Some(q) = ffi::cm::queue() {
        let _ = q.enqueue(cep.clone());
    }
}

fn kick_listener(l: &Arc<Listener>) {
    if let Some(q) = ffi::cm::queue() {
        let _ = q.enqueue(l.clone());
    }
}

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

/// The active side's request parameters and QP.
struct Active {
    qp: Arc<dyn CmQp>,
    ird: u16,
    ord: u16,
    private_data: KVec<u8>,
}

struct CepInner {
    phase: CepPhase,
    sock: Option<TcpSocket>,
    /// The peer's MPA frame as it arrives (capacity `MAX_FRAME`).
    rx: KVec<u8>,
    timer: Option<ArcHrTimerHandle<Cep>>,
    /// Passive: the listener's `iw_cm_id` (for `CONNECT_REQUEST`); active:
    /// the connecting `iw_cm_id`.
    target: Option<Arc<dyn CmEventTarget>>,
    active: Option<Active>,
    sink: Option<CmEventSink>,
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
        let rx = KVec::with_capacity(MAX_FRAME, GFP_KERNEL)?;
        let inner = CepInner {
            phase,
            sock: None,
            rx,
            timer: None,
            target: None,
            active: None,
            sink: None,
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
        ffi::cm::with_registry(|r| r.ceps.push(cep.clone(), GFP_KERNEL))??;
        Ok(cep)
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
        g.phase = CepPhase::Closed;
        self.pending.store(false, Ordering::Relaxed);
        drop(g.timer.take());
        drop(g.sock.take());
        drop(g.target.take());
        drop(g.active.take());
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
                    cm_log!("cm: no RTR from the initiator in time\n");
                    self.close_locked(&mut g, None);
                }
            }
        }
    }

    fn pump_request(self: &Arc<Self>, g: &mut CepInner, expired: bool) {
        let Some(sock) = g.sock.as_ref() else {
            self.close_locked(g, None);
            return;
        };
        // The state before the read: if the peer had closed by then, all
        // it sent before its FIN is queued and the read below sees it
        // (checked after, a FIN processed during the read would hide data
        // that arrived with it).
        let closing = sock.state().is_closing();
        match read_frame(sock, &mut g.rx, Kind::Request) {
            Err(_) => {
                cm_log!("cm: invalid MPA request, closing\n");
                self.close_locked(g, None);
            }
            Ok(false) => {
                if expired {
                    cm_log!("cm: no MPA request in time, closing\n");
                    self.close_locked(g, None);
                } else if closing {
                    self.close_locked(g, None);
                }
            }
            Ok(true) => self.judge(g),
        }
    }

    /// A complete Request: reject it or report `CONNECT_REQUEST`.
    fn judge(self: &Arc<Self>, g: &mut CepInner) {
        let target = g.target.take();
        let cfg = self.cfg.responder(self.cfg.max_ird, self.cfg.max_ord);
        let offered = {
            let (Some(sock), Some(target)) = (g.sock.as_ref(), target.as_ref()) else {
                self.close_locked(g, None);
                return;
            };
            match Repr::parse_bytes(&g.rx) {
                Err(_) => false,
                Ok(req) => match judge_request(&cfg, &req) {
                    Err(rej) => {
                        if rej.send_reply {
                            if let Ok(rep) = rej.reply(&[]) {
                                let _ = send_frame(sock, &rep);
                            }
                        }
                        cm_log!("cm: MPA request refused ({:#06x})\n", rej.error.to_bits());
                        false
                    }
                    Ok(offer) => {
                        let n = offer.negotiated;
                        send_event(
                            &**target,
                            &CmEvent {
                                kind: CmEventKind::ConnectRequest,
                                status: 0,
                                local: sock.local_addr().ok(),
                                remote: sock.peer_addr().ok(),
                                private_data: n.private_data,
                                provider_data: self.id as usize,
                                // rdma_cm turns `ird` into the ULP's
                                // initiator_depth (its ORD) and `ord` into
                                // responder_resources (its IRD): report what
                                // each may be given the peer's offer.
                                ird: clamp_u8(n.ord),
                                ord: clamp_u8(n.ird),
                            },
                        );
                        true
                    }
                },
            }
        };
        if offered {
            drop(g.timer.take());
            g.phase = CepPhase::AwaitAccept;
        } else {
            self.close_locked(g, None);
        }
    }

    fn pump_active(self: &Arc<Self>, g: &mut CepInner, expired: bool) {
        let Some(state) = g.sock.as_ref().map(|s| s.state()) else {
            self.fail_active(g, errno(ECONNRESET));
            return;
        };
        if g.phase == CepPhase::Connecting {
            match state {
                TcpState::Established | TcpState::CloseWait => {
                    if let Err(e) = self.send_request(g) {
                        cm_log!("cm: sending the MPA request failed: {:?}\n", e);
                        self.fail_active(g, errno(ECONNRESET));
                        return;
                    }
                    g.phase = CepPhase::AwaitReply;
                }
                TcpState::SynSent | TcpState::SynRecv => {
                    if expired {
                        self.fail_active(g, errno(ETIMEDOUT));
                    }
                    return;
                }
                _ => {
                    let refused = g.sock.as_ref().and_then(|s| s.error()) == Some(ECONNREFUSED);
                    let status = if refused { ECONNREFUSED } else { ECONNRESET };
                    self.fail_active(g, errno(status));
                    return;
                }
            }
        }
        let Some(sock) = g.sock.as_ref() else { return };
        // As in `pump_request`: the state before the read.
        let closing = sock.state().is_closing();
        match read_frame(sock, &mut g.rx, Kind::Reply) {
            Err(_) => {
                cm_log!("cm: invalid MPA reply\n");
                self.fail_active(g, errno(EINVAL));
            }
            Ok(false) => {
                if expired {
                    self.fail_active(g, errno(ETIMEDOUT));
                } else if closing {
                    self.fail_active(g, errno(ECONNRESET));
                }
            }
            Ok(true) => self.check(g),
        }
    }

    fn send_request(&self, g: &mut CepInner) -> Result {
        let (Some(sock), Some(a)) = (g.sock.as_ref(), g.active.as_ref()) else {
            return Err(ENOTCONN);
        };
        let req = request(&self.cfg.initiator(a.ird, a.ord, &a.private_data)).map_err(|_| EINVAL)?;
        send_frame(sock, &req)
    }

    /// A complete Reply: hand off, or report why not.
    fn check(self: &Arc<Self>, g: &mut CepInner) {
        enum Outcome {
            Ok(StreamParams),
            Rejected,
            Failed(Option<(Framing, TermError)>),
        }
        let Some(a) = g.active.as_ref() else {
            self.close_locked(g, None);
            return;
        };
        let icfg = self.cfg.initiator(a.ird, a.ord, &[]);
        let outcome = match Repr::parse_bytes(&g.rx) {
            Err(_) => Outcome::Failed(None),
            Ok(rep) => match check_reply(&icfg, &rep) {
                Ok(n) => Outcome::Ok(StreamParams {
                    framing: n.framing,
                    ird: n.ird,
                    ord: n.ord,
                    rtr: n.rtr,
                    initiator: true,
                }),
                Err(Refused::Rejected { .. }) => Outcome::Rejected,
                Err(Refused::Failed { error, framing, .. }) => {
                    let term = matches!(error.llp_code(), Some(5..=7));
                    Outcome::Failed(framing.filter(|_| term).map(|f| (f, error)))
                }
            },
        };
        // The peer's private data: the frame minus header and enhanced data.
        let pd_off = match Repr::parse_bytes(&g.rx) {
            Ok(r) => g.rx.len() - r.private_data.len(),
            Err(_) => g.rx.len(),
        };
        match outcome {
            Outcome::Rejected => {
                let rx = core::mem::take(&mut g.rx);
                self.report_failure(g, errno(ECONNREFUSED), &rx[pd_off..]);
                self.close_locked(g, None);
            }
            Outcome::Failed(term) => {
                if let (Some((f, e)), Some(sock)) = (term, g.sock.as_ref()) {
                    send_terminate(sock, f, e);
                }
                cm_log!("cm: MPA reply unusable\n");
                self.fail_active(g, errno(EINVAL));
            }
            Outcome::Ok(params) => self.hand_off_active(g, params, pd_off),
        }
    }

    fn hand_off_active(self: &Arc<Self>, g: &mut CepInner, params: StreamParams, pd_off: usize) {
        let (Some(target), Some(active)) = (g.target.clone(), g.active.take()) else {
            self.close_locked(g, None);
            return;
        };
        let sink = match CmEventSink::new(target, Phase::AwaitReply, params.ird, params.ord) {
            Ok(s) => s,
            Err(e) => {
                self.fail_active(g, errno(e));
                return;
            }
        };
        let Some(mut sock) = g.sock.take() else {
            self.fail_active(g, errno(ECONNRESET));
            return;
        };
        let (local, remote) = (sock.local_addr().ok(), sock.peer_addr().ok());
        sock.unhook();
        if matches!(params.rtr, Some(RtrMode::Zero(_))) && self.cfg.rtr_delay_ms > 0 {
            // What the peer sends meanwhile stays queued in the socket.
            fsleep(Delta::from_millis(i64::from(self.cfg.rtr_delay_ms)));
        }
        let stream = Stream { sock, params, leftover: KVec::new() };
        match active.qp.attach(stream, sink.clone()) {
            Ok(()) => {
                sink.arm();
                sink.connect_reply(&g.rx[pd_off..], local, remote);
                self.close_locked(g, None);
            }
            Err(e) => {
                cm_log!("cm: QP {} refused the stream: {:?}\n", active.qp.qpn(), e);
                self.fail_active(g, errno(EINVAL));
            }
        }
    }

    /// `iw_accept`: MPA Reply with the ULP's private data and IRD/ORD,
    /// then the stream goes to `qp`.
    fn accept(
        self: &Arc<Self>,
        p: &ConnParams<'_>,
        qp: &dyn CmQp,
        target: Arc<dyn CmEventTarget>,
    ) -> Result {
        let mut g = self.inner.lock();
        if g.phase != CepPhase::AwaitAccept || g.sock.is_none() {
            self.close_locked(&mut g, None);
            return Err(ECONNRESET);
        }
        let r = self.accept_locked(&mut g, p, qp, target);
        if r.is_err() {
            self.close_locked(&mut g, None);
        }
        r
    }

    fn accept_locked(
        self: &Arc<Self>,
        g: &mut CepInner,
        p: &ConnParams<'_>,
        qp: &dyn CmQp,
        target: Arc<dyn CmEventTarget>,
    ) -> Result {
        let (ird, ord) = self.cfg.ird_ord(p.ird, p.ord)?;
        let mut buf = [0u8; MAX_FRAME];
        let (len, params) = {
            let req = Repr::parse_bytes(&g.rx).map_err(|_| EPROTO)?;
            // The ULP's IRD/ORD; an IRD of 0 still grants the one credit
            // a zero-length Read RTR needs.
            let offer = judge_request(&self.cfg.responder(ird, ord), &req)
                .or_else(|_| judge_request(&self.cfg.responder(ird.max(1), ord), &req))
                .map_err(|_| EINVAL)?;
            let rep = offer.accept(p.private_data).map_err(|_| EINVAL)?;
            let len = rep.emit_bytes(&mut buf).map_err(|_| EINVAL)?;
            let n = offer.negotiated;
            let params =
                StreamParams { framing: n.framing, ird: n.ird, ord: n.ord, rtr: n.rtr, initiator: false };
            (len, params)
        };
        let sink = CmEventSink::new(target, Phase::AwaitEstablished, params.ird, params.ord)?;
        let mut sock = g.sock.take().ok_or(ECONNRESET)?;
        // From here the CM no longer looks at the socket: what the peer
        // sends after its Request stays queued for the QP.
        sock.unhook();
        send_all(&sock, &buf[..len])?;
        qp.attach(Stream { sock, params, leftover: KVec::new() }, sink.clone())?;
        sink.arm();
        self.pending.store(false, Ordering::Relaxed);
        if matches!(params.rtr, Some(RtrMode::Zero(_))) {
            // The sink kicks us when the wait ends (we hold our lock:
            // that run sees WatchRtr).
            sink.watch(self.clone());
            g.phase = CepPhase::WatchRtr;
            g.sink = Some(sink);
            self.arm_timer(g, self.cfg.rtr_timeout_ms);
        } else {
            sink.established();
            self.close_locked(g, None);
        }
        Ok(())
    }

    /// `iw_reject`: MPA Reply with R set and the ULP's private data.
    fn reject(&self, private_data: &[u8]) -> Result {
        let mut g = self.inner.lock();
        let r = match (g.phase, g.sock.as_ref()) {
            (CepPhase::AwaitAccept, Some(sock)) => {
                let cfg = self.cfg.responder(self.cfg.max_ird, self.cfg.max_ord);
                let req = Repr::parse_bytes(&g.rx).map_err(|_| EPROTO);
                let rep = req.and_then(|req| match judge_request(&cfg, &req) {
                    Ok(offer) => offer.reject(private_data).map_err(|_| EINVAL),
                    Err(rej) => rej.reply(private_data).map_err(|_| EINVAL),
                });
                rep.and_then(|rep| send_frame(sock, &rep))
            }
            _ => Err(ECONNRESET),
        };
        self.close_locked(&mut g, None);
        r
    }

    /// Closes a cep of a listener being destroyed, unless handed off.
    fn close_if_pending(&self) {
        let mut g = self.inner.lock();
        if matches!(g.phase, CepPhase::AwaitRequest | CepPhase::AwaitAccept) {
            self.close_locked(&mut g, None);
        }
    }
}

/// Starts a passive cep on an accepted socket.
fn start_passive(
    sock: TcpSocket,
    listener: u64,
    cfg: CmConfig,
    target: Arc<dyn CmEventTarget>,
) -> Result {
    let cep = Cep::new(listener, cfg, CepPhase::AwaitRequest)?;
    let mut sock = sock;
    let r = {
        let mut g = cep.inner.lock();
        let r = Arc::new(CepWake(cep.clone()), GFP_KERNEL)
            .map_err(Error::from)
            .and_then(|w| sock.hook(w));
        match r {
            Ok(()) => {
                g.sock = Some(sock);
                g.target = Some(target);
                cep.arm_timer(&mut g, cfg.mpa_timeout_ms);
                Ok(())
            }
            Err(e) => {
                cep.close_locked(&mut g, None);
                Err(e)
            }
        }
    };
    // Data that arrived before the hook is read by the first run.
    kick_cep(&cep);
    r
}

// ---- active side --------------------------------------------------------

/// `iw_connect`: starts connecting `local` → `remote` in `net` and
/// returns at once; the outcome is one `CONNECT_REPLY` on `target`
/// (status 0 after `qp` took the stream, else `-ECONNREFUSED` with the
/// peer's private data if it rejected, `-ECONNRESET`, `-ETIMEDOUT`,
/// `-EINVAL` for an unusable reply). On `Err` no event follows.
pub(crate) fn connect(
    net: Net,
    local: SockAddr,
    remote: SockAddr,
    cfg: CmConfig,
    p: &ConnParams<'_>,
    qp: Arc<dyn CmQp>,
    target: Arc<dyn CmEventTarget>,
) -> Result<u64> {
    let (ird, ord) = cfg.ird_ord(p.ird, p.ord)?;
    if p.private_data.len() > max_private_data(true) {
        return Err(EINVAL);
    }
    let mut private_data = KVec::new();
    private_data.extend_from_slice(p.private_data, GFP_KERNEL)?;
    let mut sock = TcpSocket::unconnected(net, &remote)?;
    sock.bind(local)?;
    let cep = Cep::new(0, cfg, CepPhase::Connecting)?;
    let mut g = cep.inner.lock();
    let r = Arc::new(CepWake(cep.clone()), GFP_KERNEL)
        .map_err(Error::from)
        .and_then(|w| sock.hook(w))
        .and_then(|()| sock.start_connect(remote));
    if let Err(e) = r {
        drop(sock);
        cep.close_locked(&mut g, None);
        return Err(e);
    }
    g.sock = Some(sock);
    g.active = Some(Active { qp, ird, ord, private_data });
    g.target = Some(target);
    cep.arm_timer(&mut g, cfg.mpa_timeout_ms);
    drop(g);
    kick_cep(&cep);
    Ok(cep.id)
}

/// `iw_accept` on the cep `id` reported in `CONNECT_REQUEST`. On `Err`
/// the connection is closed and no event follows.
pub(crate) fn accept(
    id: u64,
    p: &ConnParams<'_>,
    qp: &dyn CmQp,
    target: Arc<dyn CmEventTarget>,
) -> Result {
    find_cep(id).ok_or(ECONNRESET)?.accept(p, qp, target)
}

/// `iw_reject` on the cep `id`: Reply with R set, then close.
pub(crate) fn reject(id: u64, private_data: &[u8]) -> Result {
    find_cep(id).ok_or(ECONNRESET)?.reject(private_data)
}

/// Drops the cep `id` without a reply (accept impossible, e.g. no QP).
pub(crate) fn abort(id: u64) {
    if let Some(c) = find_cep(id) {
        c.close(None);
    }
}

// ---- listeners ----------------------------------------------------------

struct ListenerInner {
    sock: Option<TcpSocket>,
    target: Option<Arc<dyn CmEventTarget>>,
}

/// A listening endpoint (`iw_create_listen`).
#[pin_data]
pub(crate) struct Listener {
    id: u64,
    cfg: CmConfig,
    /// Bound on connections in negotiation or awaiting the ULP.
    backlog: usize,
    #[pin]
    inner: Mutex<ListenerInner>,
    #[pin]
    work: Work<Listener>,
}

impl_has_work! {
    impl HasWork<Self> for Listener { self.work }
}

impl WorkItem for Listener {
    type Pointer = Arc<Listener>;

    fn run(this: Arc<Listener>) {
        this.accept_all();
    }
}

struct ListenWake(Arc<Listener>);

impl SocketEvents for ListenWake {
    fn data_ready(&self, _rx: &SockRx<'_>) {
        kick_listener(&self.0);
    }
}

/// Accepts per run at most this many, then requeues (fairness).
const ACCEPT_BATCH: usize = 32;

impl Listener {
    fn accept_all(self: &Arc<Self>) {
        let g = self.inner.lock();
        let (Some(sock), Some(target)) = (g.sock.as_ref(), g.target.as_ref()) else {
            return;
        };
        for _ in 0..ACCEPT_BATCH {
            match sock.accept() {
                Ok(Some(s)) => self.start(s, target),
                Ok(None) => return,
                Err(e) => {
                    cm_log!("cm: accept failed: {:?}\n", e);
                    return;
                }
            }
        }
        kick_listener(self);
    }

    /// Starts the MPA exchange on an accepted connection, within the
    /// backlog.
    fn start(&self, s: TcpSocket, target: &Arc<dyn CmEventTarget>) {
        let pending = ffi::cm::with_registry(|r| {
            r.ceps
                .iter()
                .filter(|c| c.listener == self.id && c.pending.load(Ordering::Relaxed))
                .count()
        })
        .unwrap_or(usize::MAX);
        if pending >= self.backlog {
            cm_log!("cm: listener backlog full, dropping a connection\n");
            return;
        }
        if let Err(e) = start_passive(s, self.id, self.cfg, target.clone()) {
            cm_log!("cm: cannot start a connection: {:?}\n", e);
        }
    }

    fn close(&self) {
        let (sock, target) = {
            let mut g = self.inner.lock();
            (g.sock.take(), g.target.take())
        };
        // Unhooks, then releases the socket and its accept queue.
        drop(sock);
        drop(target);
    }
}

/// `iw_create_listen`: listens on `addr` in `net`; returns the listener's
/// id (the listening `iw_cm_id`'s `provider_data`).
pub(crate) fn listen(
    net: Net,
    addr: SockAddr,
    backlog: i32,
    opts: ListenOpts,
    cfg: CmConfig,
    target: Arc<dyn CmEventTarget>,
) -> Result<u64> {
    let backlog = backlog.clamp(1, 1024);
    // A wildcard listener of a device on the loopback device needs no
    // socket of its own: the loopback catcher is it.
    let loopback = opts.bound_dev_if == Some(crate::cm_loopback::LOOPBACK_IFINDEX);
    let sock = if loopback { None } else { Some(TcpSocket::listen_with(net, addr, backlog, opts)?) };
    let port = match &sock {
        Some(s) => s.local_addr()?.port(),
        None => addr.port(),
    };
    let inner = ListenerInner { sock: None, target: Some(target) };
    let l = Arc::pin_init(
        pin_init!(Listener {
            id: next_id(),
            cfg,
            backlog: backlog as usize,
            inner <- new_mutex!(inner, "rsiw_cm_listener"),
            work <- new_work!("rsiw_cm_listener"),
        }),
        GFP_KERNEL,
    )?;
    if let Some(mut sock) = sock {
        sock.hook(Arc::new(ListenWake(l.clone()), GFP_KERNEL)?)?;
        l.inner.lock().sock = Some(sock);
    }
    if let Err(e) = ffi::cm::with_registry(|r| r.listeners.push(l.clone(), GFP_KERNEL)) {
        l.close();
        return Err(e);
    }
    if let Some(ifindex) = opts.bound_dev_if {
        // Wildcard: connections between local addresses come over lo.
        if let Err(e) = crate::cm_loopback::join(net, addr.with_port(port), opts.v6only, ifindex, l.id) {
            destroy_listener(l.id);
            return Err(e);
        }
    }
    kick_listener(&l);
    Ok(l.id)
}

/// A connection the loopback catcher accepted for listener `lid`.
pub(crate) fn adopt(lid: u64, sock: TcpSocket) {
    let l = ffi::cm::with_registry(|r| r.listeners.iter().find(|l| l.id == lid).cloned());
    if let Ok(Some(l)) = l {
        let g = l.inner.lock();
        if let Some(target) = g.target.as_ref() {
            l.start(sock, target);
        }
    }
}

/// The address a listener is bound to (its port when asked for port 0).
pub(crate) fn listener_addr(id: u64) -> Result<SockAddr> {
    let l = ffi::cm::with_registry(|r| r.listeners.iter().find(|l| l.id == id).cloned())?
        .ok_or(ENOENT)?;
    let g = l.inner.lock();
    g.sock.as_ref().ok_or(ENOENT)?.local_addr()
}

/// `iw_destroy_listen`: closes the listener and every connection it
/// accepted that was not handed off yet (in negotiation or awaiting the
/// ULP's accept/reject, which then fail with `ECONNRESET`).
pub(crate) fn destroy_listener(id: u64) {
    let l = ffi::cm::with_registry(|r| {
        let pos = r.listeners.iter().position(|l| l.id == id)?;
        r.listeners.remove(pos).ok()
    });
    if let Ok(Some(l)) = l {
        l.close();
    }
    crate::cm_loopback::leave(id);
    // The listener's socket is gone: no new ceps for it from here.
    let mine = ffi::cm::with_registry(|r| {
        let mut v = KVec::new();
        for c in r.ceps.iter().filter(|c| c.listener == id) {
            let _ = v.push(c.clone(), GFP_KERNEL);
        }
        v
    });
    if let Ok(ceps) = mine {
        for c in ceps.iter() {
            c.close_if_pending();
        }
    }
}

/// MPA negotiation between kernel sockets on 127.0.0.1 through the passive
/// and active paths, without iw_cm: events go to recorders, streams to a
/// test-double QP. Raw sockets play misbehaving peers.
#[kunit_tests(rsiw_cm)]
mod tests {
    use super::*;
    use crate::{device::DEFAULT_LIMITS, engine::wire::mpa::Rtr};

    struct Rec {
        kind: CmEventKind,
        status: i32,
        pdata: KVec<u8>,
        provider: usize,
        ird: u8,
        ord: u8,
    }

    #[pin_data]
    struct Recorder {
        #[pin]
        evs: SpinLockIrq<KVec<Rec>>,
    }

    impl CmEventTarget for Recorder {
        fn deliver(&self, ev: &CmEvent<'_>) -> Result {
            let mut pdata = KVec::new();
            pdata.extend_from_slice(ev.private_data, GFP_ATOMIC)?;
            let r = Rec {
                kind: ev.kind,
                status: ev.status,
                pdata,
                provider: ev.provider_data,
                ird: ev.ird,
                ord: ev.ord,
            };
            self.evs.lock().push(r, GFP_ATOMIC)?;
            Ok(())
        }
    }

    /// (kind, status, private data, provider_data, ird, ord)
    type Ev = (CmEventKind, i32, KVec<u8>, usize, u8, u8);

    impl Recorder {
        fn new() -> Result<Arc<Self>> {
            Arc::pin_init(pin_init!(Recorder { evs <- new_spinlock_irq!(KVec::new()) }), GFP_KERNEL)
        }

        /// The `n`th event (from 0), waiting up to `ms`.
        fn wait(&self, n: usize, ms: u32) -> Option<Ev> {
            let mut out = None;
            wait_until(ms, || {
                let g = self.evs.lock();
                let Some(r) = g.get(n) else { return false };
                let mut pd = KVec::new();
                let _ = pd.extend_from_slice(&r.pdata, GFP_ATOMIC);
                out = Some((r.kind, r.status, pd, r.provider, r.ird, r.ord));
                true
            });
            out
        }

        fn count(&self) -> usize {
            self.evs.lock().len()
        }
    }

    #[pin_data]
    struct TestQp {
        refuse: bool,
        #[pin]
        got: Mutex<Option<(Stream, CmEventSink)>>,
    }

    impl CmQp for TestQp {
        fn attach(&self, stream: Stream, cm: CmEventSink) -> Result {
            if self.refuse {
                return Err(ENOMEM);
            }
            *self.got.lock() = Some((stream, cm));
            Ok(())
        }

        fn qpn(&self) -> u32 {
            7
        }
    }

    impl TestQp {
        fn new(refuse: bool) -> Result<Arc<Self>> {
            Arc::pin_init(pin_init!(TestQp { refuse, got <- new_mutex!(None) }), GFP_KERNEL)
        }

        fn params(&self) -> Option<StreamParams> {
            self.got.lock().as_ref().map(|(s, _)| s.params)
        }

        fn sink(&self) -> Option<CmEventSink> {
            self.got.lock().as_ref().map(|(_, c)| c.clone())
        }

        fn take(&self) -> Option<(Stream, CmEventSink)> {
            self.got.lock().take()
        }
    }

    const LO: SockAddr = SockAddr::V4 { addr: [127, 0, 0, 1], port: 0 };

    fn wait_until(ms: u32, mut cond: impl FnMut() -> bool) -> bool {
        for _ in 0..ms {
            if cond() {
                return true;
            }
            fsleep(Delta::from_millis(1));
        }
        cond()
    }

    fn check(c: bool) -> Result {
        if c {
            Ok(())
        } else {
            Err(EINVAL)
        }
    }

    /// Timeouts roomy enough for a KASAN/lockdep kernel under TCG: the
    /// tests that wait for a timeout set a short one themselves.
    fn cfg() -> CmConfig {
        // Independent of the module parameters (mpa_crc, p2p_rtr,
        // rtr_delay_ms).
        CmConfig {
            crc: CrcPolicy::IfPeerAsks,
            mpa_timeout_ms: 3000,
            rtr_timeout_ms: 3000,
            p2p: Some(RtrSet::ALL),
            rtr_delay_ms: 0,
            ..CmConfig::for_device(&DEFAULT_LIMITS)
        }
    }

    fn params<'a>(ird: u32, ord: u32, pd: &'a [u8]) -> ConnParams<'a> {
        ConnParams { ird, ord, private_data: pd }
    }

    fn listen_lo(c: CmConfig) -> Result<(u64, u16, Arc<Recorder>)> {
        let rec = Recorder::new()?;
        let id = listen(Net::init(), LO, 8, ListenOpts::default(), c, rec.clone())?;
        let port = listener_addr(id)?.port();
        Ok((id, port, rec))
    }

    /// No cep left once everything settled.
    fn no_leaks() -> bool {
        wait_until(2000, || live_ceps() == 0)
    }

    /// Reads what is queued on `sock` into `out` for up to `ms`, until
    /// `want` bytes are there.
    fn read_into(sock: &TcpSocket, out: &mut KVec<u8>, want: usize, ms: u32) -> bool {
        wait_until(ms, || {
            sock.read(&mut |c: &[u8]| {
                let n = c.len().min(want.saturating_sub(out.len()));
                match out.extend_from_slice(&c[..n], GFP_ATOMIC) {
                    Ok(()) => n,
                    Err(_) => 0,
                }
            });
            out.len() >= want
        })
    }

    /// A whole connection through both paths: returns the client's and
    /// server's recorders and QPs.
    struct Pair {
        lid: u64,
        crec: Arc<Recorder>,
        srec: Arc<Recorder>,
        cqp: Arc<TestQp>,
        sqp: Arc<TestQp>,
        req: Ev,
    }

    fn pair(ccfg: CmConfig, scfg: CmConfig, cp: &ConnParams<'_>, sp: &ConnParams<'_>) -> Result<Pair> {
        let (lid, port, lrec) = listen_lo(scfg)?;
        let (crec, cqp) = (Recorder::new()?, TestQp::new(false)?);
        connect(Net::init(), LO, LO.with_port(port), ccfg, cp, cqp.clone(), crec.clone())?;
        let req = lrec.wait(0, 3000).ok_or(ETIMEDOUT)?;
        check(req.0 == CmEventKind::ConnectRequest && req.1 == 0)?;
        let (srec, sqp) = (Recorder::new()?, TestQp::new(false)?);
        accept(req.3 as u64, sp, &*sqp, srec.clone())?;
        let rep = crec.wait(0, 3000).ok_or(ETIMEDOUT)?;
        check(rep.0 == CmEventKind::ConnectReply && rep.1 == 0)?;
        Ok(Pair { lid, crec, srec, cqp, sqp, req })
    }

    #[test]
    fn accept_exchanges_private_data_and_ird_ord() -> Result {
        let p = pair(cfg(), cfg(), &params(8, 4, b"client-pd"), &params(4, 8, b"server-pd"))?;
        // The request as the listener saw it: the client's data, and in
        // rdma_cm's terms (event.ird = the ORD the server may use, <= client
        // IRD; event.ord = the IRD it grants, <= client ORD).
        assert_eq!(&p.req.2[..], b"client-pd");
        assert_eq!((p.req.4, p.req.5), (8, 4));
        let rep = p.crec.wait(0, 10).ok_or(EINVAL)?;
        assert_eq!(&rep.2[..], b"server-pd");
        // CONNECT_REPLY likewise: (client ORD, client IRD).
        assert_eq!((rep.4, rep.5), (4, 8));
        let (cp, sp) = (p.cqp.params().ok_or(EINVAL)?, p.sqp.params().ok_or(EINVAL)?);
        assert!(cp.initiator && !sp.initiator);
        assert_eq!((cp.ird, cp.ord, sp.ird, sp.ord), (8, 4, 4, 8));
        assert_eq!(cp.rtr, Some(RtrMode::Zero(Rtr::Write)));
        assert_eq!(sp.rtr, cp.rtr);
        // Passive ESTABLISHED waits for the QP to see the RTR.
        assert_eq!(p.srec.count(), 0);
        p.sqp.sink().ok_or(EINVAL)?.established();
        let est = p.srec.wait(0, 100).ok_or(EINVAL)?;
        assert_eq!((est.0, est.1, est.4, est.5), (CmEventKind::Established, 0, 8, 4));
        // Peer FIN, then teardown: DISCONNECT, CLOSE; nothing after.
        let ssink = p.sqp.sink().ok_or(EINVAL)?;
        ssink.disconnected();
        ssink.closed();
        ssink.closed();
        assert!(ssink.is_closed());
        assert_eq!(p.srec.wait(1, 100).map(|e| e.0), Some(CmEventKind::Disconnect));
        assert_eq!(p.srec.wait(2, 100).map(|e| e.0), Some(CmEventKind::Close));
        // The client's QP drops its stream and sink without a word: CLOSE.
        drop(ssink);
        drop(p.cqp.take());
        assert_eq!(p.crec.wait(1, 100).map(|e| e.0), Some(CmEventKind::Close));
        drop(p.sqp.take());
        assert_eq!(p.srec.count(), 3);
        assert_eq!(p.crec.count(), 2);
        destroy_listener(p.lid);
        assert!(no_leaks());
        Ok(())
    }

    #[test]
    fn every_rtr_kind_and_client_server() -> Result {
        let kinds = [Some(Rtr::Send), Some(Rtr::Write), Some(Rtr::Read), None];
        for k in kinds {
            let ccfg = CmConfig { p2p: k.map(RtrSet::one), ..cfg() };
            let p = pair(ccfg, cfg(), &params(4, 4, b""), &params(4, 4, b""))?;
            let (cp, sp) = (p.cqp.params().ok_or(EINVAL)?, p.sqp.params().ok_or(EINVAL)?);
            assert_eq!(cp.rtr, k.map(RtrMode::Zero));
            assert_eq!(sp.rtr, cp.rtr);
            if k.is_none() {
                // Client-server: the CM reports ESTABLISHED itself.
                assert_eq!(p.srec.wait(0, 200).map(|e| (e.0, e.1)), Some((CmEventKind::Established, 0)));
            } else {
                assert_eq!(p.srec.count(), 0);
                p.sqp.sink().ok_or(EINVAL)?.established();
                assert_eq!(p.srec.wait(0, 100).map(|e| e.0), Some(CmEventKind::Established));
            }
            drop(p.cqp.take());
            drop(p.sqp.take());
            destroy_listener(p.lid);
        }
        // Read RTR works with IRD 0 on the responder's side too.
        let ccfg = CmConfig { p2p: Some(RtrSet::one(Rtr::Read)), ..cfg() };
        let p = pair(ccfg, cfg(), &params(4, 4, b""), &params(0, 4, b""))?;
        assert_eq!(p.sqp.params().and_then(|s| s.rtr), Some(RtrMode::Zero(Rtr::Read)));
        drop(p.cqp.take());
        drop(p.sqp.take());
        destroy_listener(p.lid);
        // A responder without a common RTR kind refuses: ECONNREFUSED.
        let (lid, port, lrec) = listen_lo(CmConfig { rtr: RtrSet::one(Rtr::Send), ..cfg() })?;
        let (crec, cqp) = (Recorder::new()?, TestQp::new(false)?);
        let ccfg = CmConfig { p2p: Some(RtrSet::one(Rtr::Write)), ..cfg() };
        connect(Net::init(), LO, LO.with_port(port), ccfg, &params(4, 4, b""), cqp.clone(), crec)
            .and(Ok(()))?;
        assert!(no_leaks());
        assert_eq!(lrec.count(), 0);
        destroy_listener(lid);
        assert!(cqp.params().is_none());
        Ok(())
    }

    #[test]
    fn crc_and_markers_follow_the_request() -> Result {
        for (crc, markers) in [(false, false), (true, false), (false, true), (true, true)] {
            let ccfg = CmConfig {
                crc: if crc { CrcPolicy::Required } else { CrcPolicy::IfPeerAsks },
                markers,
                ..cfg()
            };
            let p = pair(ccfg, cfg(), &params(2, 2, b"x"), &params(2, 2, b"y"))?;
            let (cp, sp) = (p.cqp.params().ok_or(EINVAL)?, p.sqp.params().ok_or(EINVAL)?);
            assert_eq!((cp.framing.crc, sp.framing.crc), (crc, crc));
            // The client asked for markers on what it receives.
            assert_eq!((cp.framing.markers_rx, sp.framing.markers_tx), (markers, markers));
            assert!(!cp.framing.markers_tx && !sp.framing.markers_rx);
            drop(p.cqp.take());
            drop(p.sqp.take());
            destroy_listener(p.lid);
        }
        assert!(no_leaks());
        Ok(())
    }

    #[test]
    fn reject_carries_private_data() -> Result {
        let (lid, port, lrec) = listen_lo(cfg())?;
        let (crec, cqp) = (Recorder::new()?, TestQp::new(false)?);
        connect(Net::init(), LO, LO.with_port(port), cfg(), &params(4, 4, b"please"), cqp.clone(), crec.clone())?;
        let req = lrec.wait(0, 3000).ok_or(ETIMEDOUT)?;
        assert_eq!(&req.2[..], b"please");
        reject(req.3 as u64, b"go away")?;
        let rep = crec.wait(0, 3000).ok_or(ETIMEDOUT)?;
        assert_eq!((rep.0, rep.1), (CmEventKind::ConnectReply, -(ECONNREFUSED.to_errno().abs())));
        assert_eq!(&rep.2[..], b"go away");
        assert!(cqp.params().is_none());
        // The id is gone: a second accept or reject finds nothing.
        assert_eq!(reject(req.3 as u64, b""), Err(ECONNRESET));
        destroy_listener(lid);
        assert!(no_leaks());
        Ok(())
    }

    #[test]
    fn qp_refusing_the_stream_fails_accept_and_connect() -> Result {
        let (lid, port, lrec) = listen_lo(cfg())?;
        let (crec, cqp) = (Recorder::new()?, TestQp::new(true)?);
        connect(Net::init(), LO, LO.with_port(port), cfg(), &params(4, 4, b""), cqp, crec.clone())?;
        let req = lrec.wait(0, 3000).ok_or(ETIMEDOUT)?;
        let (srec, sqp) = (Recorder::new()?, TestQp::new(true)?);
        assert_eq!(accept(req.3 as u64, &params(4, 4, b""), &*sqp, srec.clone()), Err(ENOMEM));
        // The client got the Reply, its QP refused too: CONNECT_REPLY -EINVAL.
        let rep = crec.wait(0, 3000).ok_or(ETIMEDOUT)?;
        assert_eq!((rep.0, rep.1), (CmEventKind::ConnectReply, -(EINVAL.to_errno().abs())));
        // A failed accept precludes events.
        fsleep(Delta::from_millis(50));
        assert_eq!(srec.count(), 0);
        destroy_listener(lid);
        assert!(no_leaks());
        Ok(())
    }

    #[test]
    fn silent_peers_time_out() -> Result {
        let quick = CmConfig { mpa_timeout_ms: 200, ..cfg() };
        // Passive: a client that connects and says nothing is dropped.
        let (lid, port, lrec) = listen_lo(quick)?;
        let raw = TcpSocket::connect(Net::init(), LO.with_port(port), false)?;
        assert!(wait_until(500, || live_ceps() == 1));
        assert!(wait_until(3000, || raw.state().is_closing()));
        assert!(no_leaks());
        assert_eq!(lrec.count(), 0);
        destroy_listener(lid);
        // Active: a server that accepts and never replies: -ETIMEDOUT.
        let server = TcpSocket::listen(Net::init(), LO, 4)?;
        let port = server.local_addr()?.port();
        let (crec, cqp) = (Recorder::new()?, TestQp::new(false)?);
        connect(Net::init(), LO, LO.with_port(port), quick, &params(4, 4, b""), cqp, crec.clone())?;
        let rep = crec.wait(0, 3000).ok_or(ETIMEDOUT)?;
        assert_eq!((rep.0, rep.1), (CmEventKind::ConnectReply, -(ETIMEDOUT.to_errno().abs())));
        assert!(no_leaks());
        Ok(())
    }

    #[test]
    fn garbage_and_early_close_are_dropped() -> Result {
        let (lid, port, lrec) = listen_lo(cfg())?;
        // Not MPA at all.
        let raw = TcpSocket::connect(Net::init(), LO.with_port(port), false)?;
        send_all(&raw, b"GET / HTTP/1.1\r\nHost: rsiw\r\n\r\n")?;
        assert!(wait_until(2000, || raw.state().is_closing()));
        // A valid key but PD_Length above 512.
        let raw2 = TcpSocket::connect(Net::init(), LO.with_port(port), false)?;
        let mut bad = [0u8; 20];
        bad[..16].copy_from_slice(b"MPA ID Req Frame");
        bad[16..].copy_from_slice(&[0x00, 0x01, 0x02, 0x01]);
        send_all(&raw2, &bad)?;
        assert!(wait_until(2000, || raw2.state().is_closing()));
        // Half a request, then the peer closes.
        let raw3 = TcpSocket::connect(Net::init(), LO.with_port(port), false)?;
        send_all(&raw3, b"MPA ID Req")?;
        raw3.shutdown();
        assert!(no_leaks());
        assert_eq!(lrec.count(), 0);
        destroy_listener(lid);
        // Active: connecting to a closed port: -ECONNREFUSED.
        let closed = TcpSocket::listen(Net::init(), LO, 1)?.local_addr()?.port();
        let crec = Recorder::new()?;
        connect(Net::init(), LO, LO.with_port(closed), cfg(), &params(4, 4, b""), TestQp::new(false)?, crec.clone())?;
        let rep = crec.wait(0, 3000).ok_or(ETIMEDOUT)?;
        assert_eq!((rep.0, rep.1), (CmEventKind::ConnectReply, -(ECONNREFUSED.to_errno().abs())));
        // Active: the server closes after reading the request: -ECONNRESET.
        let server = TcpSocket::listen(Net::init(), LO, 4)?;
        let port = server.local_addr()?.port();
        let crec = Recorder::new()?;
        connect(Net::init(), LO, LO.with_port(port), cfg(), &params(4, 4, b""), TestQp::new(false)?, crec.clone())?;
        let mut s = None;
        assert!(wait_until(2000, || {
            s = server.accept().ok().flatten();
            s.is_some()
        }));
        let s = s.ok_or(ENOTCONN)?;
        let mut req = KVec::new();
        assert!(read_into(&s, &mut req, 20, 2000));
        s.shutdown();
        let rep = crec.wait(0, 3000).ok_or(ETIMEDOUT)?;
        assert_eq!((rep.0, rep.1), (CmEventKind::ConnectReply, -(ECONNRESET.to_errno().abs())));
        // Active: a reply with a bad key: -EINVAL.
        let crec = Recorder::new()?;
        connect(Net::init(), LO, LO.with_port(port), cfg(), &params(4, 4, b""), TestQp::new(false)?, crec.clone())?;
        let mut s = None;
        assert!(wait_until(2000, || {
            s = server.accept().ok().flatten();
            s.is_some()
        }));
        send_all(s.as_ref().ok_or(ENOTCONN)?, b"MPA ID Req Frame\x00\x02\x00\x00")?;
        let rep = crec.wait(0, 3000).ok_or(ETIMEDOUT)?;
        assert_eq!((rep.0, rep.1), (CmEventKind::ConnectReply, -(EINVAL.to_errno().abs())));
        assert!(no_leaks());
        Ok(())
    }

    fn pattern(i: usize) -> u8 {
        (i * 7 + i / 253) as u8
    }

    #[test]
    fn bytes_after_the_mpa_frames_reach_the_handoff() -> Result {
        const N: usize = 6000;
        let mut data = KVec::with_capacity(N, GFP_KERNEL)?;
        for i in 0..N {
            data.push(pattern(i), GFP_KERNEL)?;
        }
        // Passive: a raw initiator sends its Request and, in the same send,
        // the first stream bytes; more right after the Reply.
        let (lid, port, lrec) = listen_lo(cfg())?;
        let raw = TcpSocket::connect(Net::init(), LO.with_port(port), false)?;
        let icfg = CmConfig { p2p: None, ..cfg() }.initiator(4, 4, b"raw");
        let req = request(&icfg).map_err(|_| EINVAL)?;
        let mut buf = KVec::from_elem(0u8, req.buffer_len(), GFP_KERNEL)?;
        req.emit_bytes(&mut buf).map_err(|_| EINVAL)?;
        buf.extend_from_slice(&data[..1000], GFP_KERNEL)?;
        send_all(&raw, &buf)?;
        let ev = lrec.wait(0, 3000).ok_or(ETIMEDOUT)?;
        let (srec, sqp) = (Recorder::new()?, TestQp::new(false)?);
        accept(ev.3 as u64, &params(4, 4, b"ok"), &*sqp, srec)?;
        let mut rep = KVec::new();
        assert!(read_frame_for_test(&raw, &mut rep));
        send_all(&raw, &data[1000..])?;
        let (stream, _sink) = sqp.take().ok_or(EINVAL)?;
        let mut got = KVec::new();
        got.extend_from_slice(&stream.leftover, GFP_KERNEL)?;
        assert!(read_into(&stream.sock, &mut got, N, 3000));
        assert!(got.len() == N && got[..] == data[..]);
        drop(stream);
        destroy_listener(lid);

        // Active: a raw responder sends its Reply and the first stream
        // bytes in one send.
        let server = TcpSocket::listen(Net::init(), LO, 4)?;
        let port = server.local_addr()?.port();
        let (crec, cqp) = (Recorder::new()?, TestQp::new(false)?);
        let ccfg = CmConfig { p2p: None, ..cfg() };
        connect(Net::init(), LO, LO.with_port(port), ccfg, &params(4, 4, b""), cqp.clone(), crec.clone())?;
        let mut s = None;
        assert!(wait_until(2000, || {
            s = server.accept().ok().flatten();
            s.is_some()
        }));
        let s = s.ok_or(ENOTCONN)?;
        let mut reqb = KVec::with_capacity(MAX_FRAME, GFP_KERNEL)?;
        assert!(wait_until(2000, || matches!(read_frame(&s, &mut reqb, Kind::Request), Ok(true))));
        let req = Repr::parse_bytes(&reqb).map_err(|_| EINVAL)?;
        let offer = judge_request(&cfg().responder(4, 4), &req).map_err(|_| EINVAL)?;
        let rep = offer.accept(b"srv").map_err(|_| EINVAL)?;
        let mut out = KVec::from_elem(0u8, rep.buffer_len(), GFP_KERNEL)?;
        rep.emit_bytes(&mut out).map_err(|_| EINVAL)?;
        out.extend_from_slice(&data, GFP_KERNEL)?;
        send_all(&s, &out)?;
        let ev = crec.wait(0, 3000).ok_or(ETIMEDOUT)?;
        assert_eq!((ev.0, ev.1), (CmEventKind::ConnectReply, 0));
        assert_eq!(&ev.2[..], b"srv");
        let (stream, _sink) = cqp.take().ok_or(EINVAL)?;
        let mut got = KVec::new();
        got.extend_from_slice(&stream.leftover, GFP_KERNEL)?;
        assert!(read_into(&stream.sock, &mut got, N, 3000));
        assert!(got.len() == N && got[..] == data[..]);
        drop(stream);
        assert!(no_leaks());
        Ok(())
    }

    /// Reads an MPA Reply from a raw socket.
    fn read_frame_for_test(sock: &TcpSocket, rx: &mut KVec<u8>) -> bool {
        if rx.reserve(MAX_FRAME, GFP_KERNEL).is_err() {
            return false;
        }
        wait_until(3000, || matches!(read_frame(sock, rx, Kind::Reply), Ok(true)))
    }

    #[test]
    fn listener_destroy_cleans_up_pending_connections() -> Result {
        let (lid, port, lrec) = listen_lo(cfg())?;
        // One silent, one waiting for the ULP's accept.
        let silent = TcpSocket::connect(Net::init(), LO.with_port(port), false)?;
        let (crec, cqp) = (Recorder::new()?, TestQp::new(false)?);
        connect(Net::init(), LO, LO.with_port(port), cfg(), &params(4, 4, b""), cqp, crec.clone())?;
        let req = lrec.wait(0, 3000).ok_or(ETIMEDOUT)?;
        assert!(wait_until(1000, || live_ceps() == 3));
        destroy_listener(lid);
        assert!(no_leaks());
        assert!(wait_until(2000, || silent.state().is_closing()));
        // The client learns the connection is gone.
        let rep = crec.wait(0, 3000).ok_or(ETIMEDOUT)?;
        assert_eq!((rep.0, rep.1), (CmEventKind::ConnectReply, -(ECONNRESET.to_errno().abs())));
        let srec = Recorder::new()?;
        let sqp = TestQp::new(false)?;
        assert_eq!(accept(req.3 as u64, &params(4, 4, b""), &*sqp, srec), Err(ECONNRESET));
        // The port is free again.
        let again = listen(Net::init(), LO.with_port(port), 1, ListenOpts::default(), cfg(), Recorder::new()?)?;
        destroy_listener(again);
        Ok(())
    }

    #[test]
    fn missing_rtr_times_out_with_established_then_close() -> Result {
        let scfg = CmConfig { rtr_timeout_ms: 300, ..cfg() };
        let p = pair(cfg(), scfg, &params(4, 4, b""), &params(4, 4, b""))?;
        // The server's QP never sees the RTR.
        let e = p.srec.wait(0, 2000).ok_or(ETIMEDOUT)?;
        assert_eq!((e.0, e.1), (CmEventKind::Established, -(ETIMEDOUT.to_errno().abs())));
        assert_eq!(p.srec.wait(1, 100).map(|e| e.0), Some(CmEventKind::Close));
        let sink = p.sqp.sink().ok_or(EINVAL)?;
        assert!(sink.is_closed());
        // Late reports change nothing.
        sink.established();
        sink.closed();
        assert_eq!(p.srec.count(), 2);
        drop(sink);
        drop(p.cqp.take());
        drop(p.sqp.take());
        destroy_listener(p.lid);
        assert!(no_leaks());
        Ok(())
    }

    #[test]
    fn sink_orders_events_whatever_the_qp_reports() -> Result {
        // Passive: close before the hand-off completes, then arm.
        let rec = Recorder::new()?;
        let s = CmEventSink::new(rec.clone(), Phase::AwaitEstablished, 3, 5)?;
        s.disconnected();
        s.closed();
        assert_eq!(rec.count(), 0);
        s.arm();
        assert_eq!(rec.wait(0, 10).map(|e| (e.0, e.1, e.4, e.5)), Some((CmEventKind::Established, -(ECONNRESET.to_errno().abs()), 5, 3)));
        assert_eq!(rec.wait(1, 10).map(|e| e.0), Some(CmEventKind::Close));
        // Active: the QP loses the connection before CONNECT_REPLY.
        let rec = Recorder::new()?;
        let s = CmEventSink::new(rec.clone(), Phase::AwaitReply, 1, 1)?;
        s.arm();
        s.closed();
        assert_eq!(rec.count(), 0);
        s.connect_reply(b"", None, None);
        assert_eq!(rec.wait(0, 10).map(|e| (e.0, e.1)), Some((CmEventKind::ConnectReply, -(ECONNRESET.to_errno().abs()))));
        drop(s);
        assert_eq!(rec.count(), 1);
        // Unarmed (attach failed): no event at all.
        let rec = Recorder::new()?;
        drop(CmEventSink::new(rec.clone(), Phase::AwaitEstablished, 1, 1)?);
        assert_eq!(rec.count(), 0);
        Ok(())
    }
}
