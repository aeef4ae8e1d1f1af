// SPDX-License-Identifier: GPL-2.0
//! Queue pairs (RC): the send and receive queues, and the iWARP stream
//! that runs them — the protocol engine's `qp::Qp` driven by the socket.
//!
//! Contexts and locks:
//! - `post_send`/`post_recv` (any context) take only the queue locks and
//!   schedule the TX work item.
//! - RX runs in the socket's `data_ready` (softirq, socket locked), or,
//!   for bulk on a route that stays in the host, in the RX work item
//!   (`RxCtl`): each linear chunk of the skb goes through `engine.rx`,
//!   which places payload straight into registered memory (one copy).
//! - TX runs in one TX run at a time (`TxCtl`): the TX work item, or a
//!   process's doorbell inline. The run holds the TX-owned state (the
//!   copy buffer, the zero-copy round) for its duration; each round fills
//!   it from the engine under the stream lock, then sends it with the lock
//!   dropped (sending may sleep), so the bytes leave in the order the
//!   engine produced them.
//! - Every call into the engine goes through `Qp::engine_session`: the
//!   stream lock, a host view, the call, the lock dropped, then the events
//!   and the TX kick.
//! - Lock order: TX-owned state → stream → queue (SQ, RQ/SRQ) → CQ / STag
//!   table; TX-owned state → socket.

mod flush;
mod host;
pub(crate) mod send_order;
mod sq;
pub(crate) mod srq;
mod stats;
mod stream;
mod table;
mod tx;
mod verbs;

pub(crate) use self::host::*;
pub(crate) use self::sq::*;
pub(crate) use self::stats::QpStats;
pub(crate) use self::table::*;
#[cfg(rsiw_kunit)]
pub(crate) use self::tx::{short_zc_send_once, short_zc_send_pending};

use core::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicU8, Ordering};

use kernel::{
    impl_has_hr_timer, new_mutex, new_work,
    prelude::*,
    sync::{Arc, ArcBorrow, Mutex},
    time::{
        hrtimer::{
            ArcHrTimerHandle, HrTimer, HrTimerCallback, HrTimerCallbackContext, HrTimerPointer,
            HrTimerRestart, RelativeMode,
        },
        Delta, Monotonic,
    },
    workqueue::{impl_has_work, Work, WorkItem},
};

use self::{
    flush::FlushQueue,
    send_order::SendOrder,
    srq::{RecvQueue, Rqe, Sge, MAX_SGE},
};
use crate::{
    cm::{CmEventSink, CmQp, Stream},
    cq::{Completion, WcOpcode, WcStatus},
    ddp::Region,
    device::{counters::HwCounter, Rsiw},
    engine::{
        crc::Crc32c,
        error::{self, TermError},
        mpa::startup::StreamParams,
        qp::{
            CompOp, Event, Host, Local, PayloadRef, Piece, QpConfig, RecvWr, SendWr,
            State as EngineState, Status, TxPlan, WorkQueue,
        },
        rdmap::AtomicPlan,
        wire::commit,
    },
    ffi::{
        crc::ModuleCrc32c,
        ib::QpNotifier,
        mem::memcg::MemCgroup,
        net::{
            socket::{SockRx, SocketEvents, TcpSocket, TcpState},
            zcopy::{Batch, LiteralPage, Notif, Segments, ZcOwner},
        },
        sync::{new_spinlock_bh, new_spinlock_irq, SpinLockBh, SpinLockIrq},
    },
    mem::mr::{FastReg, Grant, Mr, MrCache, MrError},
};

/// The remote rights a QP can grant (`IB_QP_ACCESS_FLAGS`).
pub(crate) const QP_REMOTE_RIGHTS: u32 = crate::ffi::mem::pages::access::REMOTE_WRITE
    | crate::ffi::mem::pages::access::REMOTE_READ
    | crate::ffi::mem::pages::access::REMOTE_ATOMIC;

/// Largest ORD/IRD a QP can negotiate (the engine's queue capacities).
pub(crate) const MAX_ORD: usize = 32;
/// See [`MAX_ORD`].
pub(crate) const MAX_IRD: usize = 32;
/// Largest inline payload of a send WR.
pub(crate) const MAX_INLINE: usize = 128;
/// TX buffer of the copying path: the engine fills it, the socket drains
/// it. Allocated at the first copying round, not at QP creation, at
/// `TX_BUF_SMALL` octets: enough for the control messages of a connection
/// (MPA's RTR, Terminate), Sends and Writes up to most of a KiB (inline
/// data included) and atomics, so a QP that never moves bulk data holds
/// no more (a 1 KiB kmalloc object). The first round that fills it (bulk
/// traffic) has the next one take `TX_BUF`; an FPDU larger than the
/// buffer goes out in pieces over rounds, as the engine's output resumes.
pub(super) const TX_BUF: usize = 64 * 1024;
pub(super) const TX_BUF_SMALL: usize = 1024;
/// Zero-copy TX: pieces of one round (literal runs and payload; about
/// two per FPDU, so a 64 KiB round of 1460-octet FPDUs fits).
const ZC_PIECES: usize = 128;
/// Zero-copy TX: page segments of one round.
const ZC_SEGMENTS: usize = 128;
/// Zero-copy TX: literal octets a round needs at least (a few headers).
const ZC_LITERAL_MIN: usize = 512;
/// How long a torn-down QP's socket waits for the peer to acknowledge
/// the pages TCP still holds before it is reset (`Qp::detach`).
const ZC_ACK_GRACE_MS: u32 = 1000;
/// How long a graceful close (`Qp::close`) may drain before it becomes an
/// abortive one (`Qp::close_timed_out`).
pub(crate) const CLOSE_TIMEOUT_MS: i64 = 5000;

type Engine = crate::engine::qp::Qp<MAX_ORD, MAX_IRD, crate::engine::qp::NoStartup>;

pub(crate) use crate::ffi::ib::QpState;

/// The test build's `kunit_terminate_after_mib`: whether a QP that has
/// received `rx_bytes` octets is the one to end its stream with a
/// Terminate now (once per module load).
#[cfg(rsiw_kunit)]
fn injected_terminate_due(rx_bytes: u64) -> bool {
    static DONE: AtomicBool = AtomicBool::new(false);
    let mib = u64::from(crate::module_parameters::kunit_terminate_after_mib.value());
    mib != 0 && rx_bytes >= mib << 20 && !DONE.swap(true, Ordering::Relaxed)
}

/// The links of an rsiw QP to its CQs, SRQ and device.
pub(crate) type QpLinks = crate::ffi::ib::QpLinks<Rsiw>;

/// The local data of the send WR the engine is working on.
struct CurWr {
    handle: u64,
    sqe: Option<Sqe>,
}

/// What the engine's host keeps between calls (under the engine lock).
struct HostState {
    cur: CurWr,
    /// A receive WQE taken off the RQ/SRQ for the message being received.
    claimed: Option<Rqe>,
    /// The wr_id of a process's receive entry that failed its checks and
    /// was taken for a message: its completion is an error.
    recv_bad: Option<u64>,
    next_handle: u64,
    /// Whether the atomic whose result was just placed is masked, for its
    /// completion (`write_atomic_result` sees the WR's handle, `complete`
    /// only its wr_id).
    atomic_done: Option<bool>,
    /// Send-queue completions waiting for the peer's acknowledgement of
    /// payload sent by reference (zero-copy TX).
    order: SendOrder,
    /// The MRs of the stream's last two STags (`QpHost::with_mr`).
    mrs: MrCache,
    /// The send queue had nothing after the WR `sq_next` took last
    /// (`Host::sq_drained`).
    sq_drained: bool,
}

/// The zero-copy round's state (part of [`TxOwned`]).
struct ZeroCopyTx {
    /// FPDU payloads of at least `zcopy_min` octets go by reference on
    /// this stream (the engine has the size); false: the stream copies.
    from_pages: bool,
    /// TCP copies the payload it gets by reference (a route whose receiver
    /// is in this host, see [`Qp::zcopy_mode`]): a batch's completions
    /// are due once all of it is sent, no notification is involved.
    tcp_copies: bool,
    /// The send-order id of the batch TCP copies, until all of it is sent.
    copy_batch: Option<u64>,
    /// The batch being sent took no page (a small message after bulk on
    /// a stream TCP copies): the stream goes back to copying rounds once
    /// all of it has left, not before, or its rest would never be sent.
    to_copy: bool,
    /// The stream's send order has its ring (see `Qp::attach`).
    order_ring: bool,
    /// Where a round's literal octets go.
    lit: LiteralPage,
    /// Pages the engine's host referenced while filling a round.
    refs: Segments,
    /// The plan of the round being filled.
    pieces: KVec<Piece>,
    /// The round being sent.
    batch: Batch,
    /// The notification for the next batch with pages (allocated before
    /// the round, which runs under a spinlock).
    notif: Option<Notif>,
    /// Octets sent by reference and copied (statistics).
    ref_octets: u64,
    literal_octets: u64,
}

impl ZeroCopyTx {
    /// The round's lists, allocated at the first zero-copy round (process
    /// context, no spinlock held): a connected QP that never sends holds
    /// none of them.
    fn ensure_lists(&mut self) -> Result {
        self.refs.reserve_total(ZC_SEGMENTS)?;
        self.batch.reserve_total(ZC_PIECES + ZC_SEGMENTS)?;
        if self.pieces.len() < ZC_PIECES {
            self.pieces
                .resize(ZC_PIECES, Piece::Literal(0), GFP_KERNEL_ACCOUNT)?;
        }
        Ok(())
    }
}

/// Handle bit marking a masked atomic (`Local::handle` travels with the
/// request to `write_atomic_result`).
const MASKED_HANDLE: u64 = 1 << 63;
/// The handle of no WR: the current entry is a local one (a registration
/// or an invalidation), whose data no engine call may read.
const NO_HANDLE: u64 = u64::MAX;

/// The copying rounds' buffer (part of [`TxOwned`]).
struct CopyTx {
    /// `buf[off..len]` are bytes the engine produced that the socket has
    /// not taken yet. Allocated and zeroed by the first copying round at
    /// `TX_BUF_SMALL`, and once more at `TX_BUF` after a round filled it
    /// (`grow`): a round fills it without clearing it again.
    buf: KVec<u8>,
    off: usize,
    len: usize,
    /// A round filled the small buffer: the next round with nothing
    /// pending takes a `TX_BUF` one.
    grow: bool,
}

impl CopyTx {
    /// Octets a copying round left unsent.
    fn pending(&self) -> bool {
        self.off < self.len
    }
}

/// What only the TX run touches, held by the run's owner for the whole
/// run (`Qp::tx_rounds`): a round fills it under the stream lock and sends
/// from it with that lock dropped, with no lock to take it back.
struct TxOwned {
    copy: CopyTx,
    zc: ZeroCopyTx,
}

/// Who may transmit, and what tells the TX run to act.
///
/// Two kinds of TX run exist: the TX work item (`Qp::run_tx`) and a
/// process's doorbell sending in its own context (`Qp::tx_inline`). The
/// workqueue alone would give the work item what it needs: it clears a
/// work's pending bit, behind a full barrier, before the work runs, so a
/// work queued while it runs runs once more, after it and never beside it
/// (`Queue::enqueue` hands back a work already queued). It knows nothing
/// of the inline run, so the two exclude each other here:
///
/// - `kick` sets `queued` and queues the work unless it was set; the work
///   clears it first thing. (It stands for the pending bit, which the
///   kernel crate does not show: `detach` reads it, and a kick while the
///   work is queued costs no reference count.)
/// - A run transmits only while it holds `running` (compare-exchange).
///   The doorbell takes it or kicks, never waits.
/// - The work takes it (`Qp::tx_acquire`), or stores `missed` and reads
///   `running` again: clear by then, it tries again; set, it ends.
/// - A run ends (`Qp::tx_release`) by clearing `running`, then taking
///   `missed`: set, it kicks.
///
/// Invariant: every kick is followed by a run that takes `running` after
/// it. The refused work's store of `missed` then load of `running`, and
/// the owner's store of `running` then load of `missed`, are all
/// `SeqCst`, so at least one load sees the other side's store: the
/// refused work takes `running` itself, or the owner kicks it again. Both
/// may happen (a `missed` left by a work that then won costs one spare
/// run); neither never does.
#[pin_data]
struct TxCtl {
    /// The TX work item is queued (`Qp::kick`).
    queued: AtomicBool,
    /// A TX run (the work item, or a process's doorbell inline) owns the
    /// transmit side.
    running: AtomicBool,
    /// The work item was refused while another run went on: the owner
    /// kicks it when it ends.
    missed: AtomicBool,
    /// The TX run is sending or the socket did not take everything: a
    /// `write_space` must kick it.
    blocked: AtomicBool,
    /// Send our FIN once everything queued has left.
    fin_pending: AtomicBool,
    /// Set by the close timer, read by the TX run.
    close_expired: AtomicBool,
    /// The TX run's own state: locked by the run's owner for the run, and
    /// otherwise only briefly (`attach`, `detach`, the self-tests'
    /// statistics).
    #[pin]
    owned: Mutex<TxOwned>,
}

/// The RX work item's flags (`Qp::rx_offload`).
struct RxCtl {
    /// The RX work is queued.
    queued: AtomicBool,
    /// The RX work runs (its events included): `detach` waits it out.
    running: AtomicBool,
    /// When the RX work was last queued (`clock_us`).
    queued_at: AtomicU32,
    /// Until when (`clock_us`) `data_ready` reads everything itself: the
    /// RX work started late, no CPU was free for it.
    inline_until: AtomicU32,
    /// The stream's route stays in the host (loopback, veth): its receive
    /// softirq runs on the sending CPU, and bulk reads go to the RX work.
    local: AtomicBool,
}

/// Zero-copy TX as the rest of the QP sees it, without the TX run's lock.
struct ZcCtl {
    /// The next TX round sends by page reference (`ZeroCopyTx::from_pages`
    /// is set): a TX round of a copying stream skips the zero-copy round.
    /// On a stream whose pages TCP copies (`copies`) the rounds set and
    /// clear it: set by a copy round the buffer ended (bulk), cleared by a
    /// round that referenced no pages (small messages keep the copying
    /// round, which costs less than a batch of pages).
    on: AtomicBool,
    /// The stream sends payload from the pages for TCP to copy
    /// (`ZeroCopyTx::tcp_copies`).
    copies: AtomicBool,
    /// The TX run waits for page releases (too many batches out).
    stalled: AtomicBool,
    /// Torn down: a late page release only drops its reference.
    detached: AtomicBool,
    /// This QP's batches TCP has not released yet.
    live: AtomicU32,
    /// Completions that waited for page releases (statistics).
    deferred: AtomicU64,
}

/// The self-tests' knobs of a QP; the production module has none.
#[cfg(rsiw_kunit)]
struct TestHooks {
    /// The zero-copy threshold for the next stream (`u32::MAX`: the
    /// module parameter), always by reference.
    zc_min: AtomicU32,
    /// Bulk goes to the RX work whoever sent it (their senders are kernel
    /// threads) and however late it starts.
    rx_forced: AtomicBool,
}

/// State that only changes under the stream lock.
struct StreamState {
    engine: Option<KBox<Engine>>,
    host: HostState,
    /// The socket is gone: everything flushed, nothing more to send.
    /// Cleared by the next stream's `attach`: a QP that failed may be
    /// reset and connected again.
    dead: bool,
}

/// What the QP reports about its stream, for the CM and tests.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct StreamStatus {
    pub(crate) ready: bool,
    pub(crate) closed: bool,
    pub(crate) failed: bool,
    /// `IB_EVENT_QP_LAST_WQE_REACHED` was raised for this Error (a QP on
    /// an SRQ: once per Error, until a reset).
    pub(crate) last_wqe: bool,
    pub(crate) terminate_sent: Option<TermError>,
    pub(crate) terminate_received: Option<TermError>,
}

/// Creation parameters.
pub(crate) struct QpInit {
    pub(crate) qpn: u32,
    pub(crate) pd: u32,
    pub(crate) max_send_wr: u32,
    pub(crate) max_recv_wr: u32,
    pub(crate) max_send_sge: u32,
    pub(crate) max_recv_sge: u32,
    pub(crate) max_inline: u32,
    pub(crate) sig_all: bool,
    pub(crate) links: QpLinks,
    /// A process's rings (a QP made with `RSIW_CREATE_RINGS`).
    pub(crate) sq_ring: Option<crate::ring::WqRing<crate::ffi::ib::rsiw_sqe>>,
    pub(crate) rq_ring: Option<crate::ring::WqRing<crate::ffi::ib::rsiw_rqe>>,
}

/// Every QP state, indexed by [`state_index`] (`Qp::state_now`).
const STATES: [QpState; 7] = [
    QpState::Reset,
    QpState::Init,
    QpState::Rtr,
    QpState::Rts,
    QpState::Sqd,
    QpState::Sqe,
    QpState::Err,
];

/// `s`'s index in [`STATES`].
const fn state_index(s: QpState) -> u8 {
    match s {
        QpState::Reset => 0,
        QpState::Init => 1,
        QpState::Rtr => 2,
        QpState::Rts => 3,
        QpState::Sqd => 4,
        QpState::Sqe => 5,
        QpState::Err => 6,
    }
}

/// One RC queue pair.
#[pin_data]
pub(crate) struct Qp {
    qpn: u32,
    pd: u32,
    /// A process's QP with shared rings: it posts there, not through
    /// commands.
    rings: bool,
    sig_all: bool,
    max_send_sge: u32,
    max_inline: u32,
    /// Device, CQs, SRQ and `ib_qp` this QP belongs to.
    links: QpLinks,
    notifier: QpNotifier,
    #[pin]
    sq: SpinLockIrq<SendQueue>,
    /// Own receive queue (absent with an SRQ).
    #[pin]
    rq: SpinLockIrq<Option<RecvQueue>>,
    /// The engine and the socket's side of the stream: process context
    /// and the socket's softirq callbacks, never a hard interrupt.
    #[pin]
    stream: SpinLockBh<StreamState>,
    #[pin]
    ib_state: SpinLockIrq<(QpState, StreamStatus)>,
    /// `ib_state`'s state, stored under its lock: read without it by the
    /// paths that only look (a doorbell, a TX run).
    state_now: AtomicU8,
    /// The TCP connection; only process context touches it.
    #[pin]
    sock: Mutex<Option<TcpSocket>>,
    /// The iw_cm's channel for this connection, from the hand-off on.
    #[pin]
    cm: SpinLockIrq<Option<CmEventSink>>,
    #[pin]
    tx_work: Work<Qp>,
    /// Reads a bulk stream's queued data in process context, off the
    /// softirq of the CPU that received it (`rx_offload`).
    #[pin]
    rx_work: Work<Qp, 1>,
    #[pin]
    tx: TxCtl,
    rx: RxCtl,
    zc: ZcCtl,
    /// `detach` waits the TX and RX work out: a run that starts from now
    /// on touches nothing of the QP's links and ends at once. Cleared by
    /// a reset (the QP may connect again), never after `destroy_qp`.
    works_closed: AtomicBool,
    /// The stream ends without an error: the peer's FIN (not a reset) or
    /// the ULP moving the QP to Error. WRs are flushed, the iw_cm sees a
    /// disconnect, no `IB_EVENT_QP_FATAL` is raised.
    quiet_end: AtomicBool,
    /// What `rdma resource show qp -dd` reports.
    stats: QpStats,
    /// The remote rights of `IB_QP_ACCESS_FLAGS` (`IB_ACCESS_REMOTE_*`),
    /// all of them until the consumer sets them ([`Qp::remote_access`]).
    remote_access: AtomicU32,
    /// Bounds a graceful close: armed by `close`, cancelled by `detach`.
    #[pin]
    close_timer: HrTimer<Qp>,
    #[pin]
    close_handle: SpinLockIrq<Option<ArcHrTimerHandle<Qp>>>,
    /// The memory cgroup of the task that created the QP: it pays for
    /// what the stream allocates later, also from the CM's or the TX
    /// work item (the engine, the send-order ring, TX buffers).
    memcg: MemCgroup,
    #[cfg(rsiw_kunit)]
    hooks: TestHooks,
}

impl_has_work! {
    impl HasWork<Self> for Qp { self.tx_work }
    impl HasWork<Self, 1> for Qp { self.rx_work }
}

impl_has_hr_timer! {
    impl HasHrTimer<Self> for Qp {
        mode: RelativeMode<Monotonic>,
        field: self.close_timer
    }
}

impl HrTimerCallback for Qp {
    type Pointer<'a> = Arc<Self>;

    fn run(this: ArcBorrow<'_, Self>, _ctx: HrTimerCallbackContext<'_, Self>) -> HrTimerRestart {
        // Hard interrupt context (the handle holds a reference, so this
        // one is not the last): note it and let the TX work act.
        this.tx.close_expired.store(true, Ordering::Release);
        Arc::from(this).kick();
        HrTimerRestart::NoRestart
    }
}

impl Qp {
    pub(crate) fn new(init: QpInit, notifier: QpNotifier) -> Result<Arc<Self>> {
        let rings = init.sq_ring.is_some();
        let sq = match init.sq_ring {
            Some(ring) => SendQueue::new_user(UserSq {
                ring,
                max_sge: init.max_send_sge as usize,
                max_inline: init.max_inline as usize,
                active: false,
                stopped_at: 0,
            }),
            None => SendQueue::new(init.max_send_wr as usize)?,
        };
        let rq = match (init.links.has_srq(), init.rq_ring) {
            (true, _) => None,
            (false, Some(ring)) => Some(RecvQueue::new_user(ring, init.max_recv_sge as usize)?),
            (false, None) => Some(RecvQueue::new(
                init.max_recv_wr as usize,
                init.max_recv_sge as usize,
            )?),
        };
        let zc = ZeroCopyTx {
            from_pages: false,
            tcp_copies: false,
            copy_batch: None,
            to_copy: false,
            order_ring: false,
            lit: LiteralPage::new(),
            refs: Segments::new(),
            batch: Batch::new(),
            pieces: KVec::new(),
            notif: None,
            ref_octets: 0,
            literal_octets: 0,
        };
        let stream = StreamState {
            engine: None,
            host: HostState {
                cur: CurWr {
                    handle: 0,
                    sqe: None,
                },
                claimed: None,
                recv_bad: None,
                next_handle: 1,
                atomic_done: None,
                order: SendOrder::new(2 * init.max_send_wr as usize + MAX_ORD + 8),
                mrs: MrCache::default(),
                sq_drained: false,
            },
            dead: false,
        };
        let owned = TxOwned {
            copy: CopyTx {
                buf: KVec::new(),
                off: 0,
                len: 0,
                grow: false,
            },
            zc,
        };
        Arc::pin_init(
            try_pin_init!(Qp {
                qpn: init.qpn,
                pd: init.pd,
                rings,
                sig_all: init.sig_all,
                max_send_sge: init.max_send_sge,
                max_inline: init.max_inline,
                links: init.links,
                notifier,
                sq <- new_spinlock_irq!(sq, "rsiw_qp_sq"),
                rq <- new_spinlock_irq!(rq, "rsiw_qp_rq"),
                stream <- new_spinlock_bh!(stream, "rsiw_qp_stream"),
                // An RNIC's QP is created idle, ready for receives: it reads
                // back INIT (siw's IDLE does; rdma-core's test_query_rc_qp
                // expects INIT of a RNIC). RESET is reached from Error only.
                ib_state <- new_spinlock_irq!((QpState::Init, StreamStatus::default()), "rsiw_qp_state"),
                state_now: AtomicU8::new(state_index(QpState::Init)),
                sock <- new_mutex!(None, "rsiw_qp_sock"),
                cm <- new_spinlock_irq!(None, "rsiw_qp_cm"),
                tx_work <- new_work!("rsiw_qp_tx"),
                rx_work <- new_work!("rsiw_qp_rx"),
                tx <- pin_init!(TxCtl {
                    queued: AtomicBool::new(false),
                    running: AtomicBool::new(false),
                    missed: AtomicBool::new(false),
                    blocked: AtomicBool::new(false),
                    fin_pending: AtomicBool::new(false),
                    close_expired: AtomicBool::new(false),
                    owned <- new_mutex!(owned, "rsiw_qp_tx"),
                }),
                rx: RxCtl {
                    queued: AtomicBool::new(false),
                    running: AtomicBool::new(false),
                    queued_at: AtomicU32::new(0),
                    inline_until: AtomicU32::new(0),
                    local: AtomicBool::new(false),
                },
                zc: ZcCtl {
                    on: AtomicBool::new(false),
                    copies: AtomicBool::new(false),
                    stalled: AtomicBool::new(false),
                    detached: AtomicBool::new(false),
                    live: AtomicU32::new(0),
                    deferred: AtomicU64::new(0),
                },
                works_closed: AtomicBool::new(false),
                quiet_end: AtomicBool::new(false),
                stats: QpStats::new(),
                remote_access: AtomicU32::new(QP_REMOTE_RIGHTS),
                close_timer <- HrTimer::new(),
                close_handle <- new_spinlock_irq!(None, "rsiw_qp_close"),
                memcg: MemCgroup::current(),
                #[cfg(rsiw_kunit)]
                hooks: TestHooks { zc_min: AtomicU32::new(u32::MAX), rx_forced: AtomicBool::new(false) },
            }? Error),
            GFP_KERNEL_ACCOUNT,
        )
    }

    /// The remote rights the QP grants its peer (`IB_QP_ACCESS_FLAGS`'s
    /// `IB_ACCESS_REMOTE_{WRITE,READ,ATOMIC}`): a peer's Write, Read
    /// Request or atomic on a QP without the right is to be refused
    /// (Terminate, remote access error) whatever the MR grants: the
    /// engine's validators see regions through [`QpHost`]'s lookup, which
    /// takes away the Write and Read rights the QP does not grant.
    pub(crate) fn remote_access(&self) -> u32 {
        self.remote_access.load(Ordering::Relaxed)
    }

    /// What connecting (the iw_cm's connect or accept) grants: remote
    /// Write and Read besides what the QP had (see `cm::iw_cm::find_qp`).
    pub(crate) fn grant_connection_rights(&self) {
        use crate::ffi::mem::pages::access;
        self.remote_access.fetch_or(
            access::REMOTE_WRITE | access::REMOTE_READ,
            Ordering::Relaxed,
        );
    }

    /// `modify_qp` with `IB_QP_ACCESS_FLAGS`: only the remote rights
    /// mean anything for a QP (`LOCAL_WRITE` is accepted and ignored).
    pub(crate) fn set_access_flags(&self, flags: u32) {
        self.remote_access
            .store(flags & QP_REMOTE_RIGHTS, Ordering::Relaxed);
    }

    pub(crate) fn qpn(&self) -> u32 {
        self.qpn
    }

    pub(crate) fn links(&self) -> &QpLinks {
        &self.links
    }

    /// (max_send_wr, max_recv_wr, max_send_sge, max_recv_sge, max_inline)
    pub(crate) fn caps(&self) -> (u32, u32, u32, u32, u32) {
        let send_wr = self.sq.lock().capacity() as u32;
        let (recv_wr, recv_sge) = match self.rq.lock().as_ref() {
            Some(rq) => (rq.capacity() as u32, rq.max_sge() as u32),
            None => (0, 0),
        };
        (
            send_wr,
            recv_wr,
            self.max_send_sge,
            recv_sge,
            self.max_inline,
        )
    }

    #[cfg(rsiw_kunit)]
    /// What the stream reported (Terminates sent and received, ...).
    pub(crate) fn stream_status(&self) -> StreamStatus {
        self.ib_state.lock().1
    }

    /// The QP's state: a snapshot, as it was when taken under the lock.
    pub(crate) fn ib_state(&self) -> QpState {
        STATES
            .get(usize::from(self.state_now.load(Ordering::Acquire)))
            .copied()
            .unwrap_or(QpState::Err)
    }

    /// Changes the state held in `cur` (under `ib_state`'s lock) to
    /// `new`, tracing the change (`rsiw_qp_state`).
    fn set_state(&self, cur: &mut QpState, new: QpState) {
        if *cur != new {
            crate::ffi::trace::qp_state(self.qpn, *cur, new);
            *cur = new;
            self.state_now.store(state_index(new), Ordering::Release);
        }
    }

    /// Moves the QP to `new` (see [`Self::set_state`]).
    pub(crate) fn enter(&self, new: QpState) {
        let mut st = self.ib_state.lock();
        self.set_state(&mut st.0, new);
    }

    /// What MPA settled for the stream (framing, RTR), once attached.
    #[cfg(rsiw_kunit)]
    pub(crate) fn negotiated(
        &self,
    ) -> Option<(
        crate::engine::mpa::negotiate::Framing,
        Option<crate::engine::mpa::negotiate::RtrMode>,
    )> {
        self.stream
            .lock()
            .engine
            .as_deref()
            .map(|e| (e.framing(), e.rtr_mode()))
    }

    /// The TCP state of the QP's connection, for the self-tests.
    #[cfg(rsiw_kunit)]
    pub(crate) fn tcp_state(&self) -> Option<TcpState> {
        self.sock.lock().as_ref().map(|s| s.state())
    }

    // ---- posting -------------------------------------------------------

    /// Queues a send WR (`ib_post_send`). In Error the WR completes at once
    /// with a flush error, as the verbs require.
    pub(crate) fn post_send(self: &Arc<Self>, sqe: Sqe) -> Result {
        if self.rings {
            return Err(EINVAL); // the process posts through its ring
        }
        if usize::from(sqe.num_sge) > self.max_send_sge as usize
            || usize::from(sqe.inline_len) > self.max_inline as usize
        {
            return Err(EINVAL);
        }
        match self.ib_state() {
            QpState::Reset => return Err(EINVAL),
            QpState::Err => {
                // Completes with a flush error behind every older WR: the
                // TX work flushes what is queued on a failed QP once the
                // engine owes no flush of its own (`flush_queues`), or the
                // engine's own flush takes it. Never here: a consumer may
                // post from its completion handler, which can run under
                // this QP's stream lock (a flush's completions).
                self.sq.lock().push(sqe)?;
                self.kick();
                return Ok(());
            }
            _ => {}
        }
        self.sq.lock().push(sqe)?;
        self.kick();
        Ok(())
    }

    /// Queues a receive WR (`ib_post_recv`) on the QP's own RQ.
    pub(crate) fn post_recv(self: &Arc<Self>, rqe: Rqe) -> Result {
        if self.ib_state() == QpState::Reset || self.rings {
            return Err(EINVAL);
        }
        {
            let mut guard = self.rq.lock();
            let rq = Option::as_mut(&mut *guard).ok_or(EINVAL)?; // QPs with an SRQ post there
            rq.push(rqe)?;
        }
        // A message may be waiting for this buffer: nothing to do here, the
        // engine retries on the next FPDU (iWARP has no RNR: a Send without
        // a posted receive already failed the stream). On a failed QP the
        // TX work flushes it, as for `post_send`.
        if self.ib_state() == QpState::Err {
            self.kick();
        }
        Ok(())
    }

    /// A completion of this QP; one in error is counted and traced
    /// (`rsiw_wr_error`).
    fn wc(&self, wr_id: u64, opcode: WcOpcode, status: WcStatus, byte_len: u32) -> Completion {
        if status != WcStatus::Success {
            QpStats::add(&self.stats.wr_errors, 1);
            crate::ffi::trace::wr_error(self.qpn, wr_id, opcode, status);
        }
        Completion {
            wr_id,
            status,
            opcode,
            byte_len,
            qp: self.links.wc_qp(),
            qp_num: self.qpn,
            ..Completion::default()
        }
    }

    /// A process's doorbell on its send ring: the TX work looks at the
    /// ring (in Error: what was posted is flushed).
    pub(crate) fn doorbell_send(self: &Arc<Self>) -> Result {
        if !self.rings {
            return Err(EINVAL);
        }
        match self.ib_state() {
            QpState::Reset => Err(EINVAL),
            QpState::Err => {
                self.flush_queues();
                Ok(())
            }
            _ => {
                self.tx_inline();
                Ok(())
            }
        }
    }

    /// A process's doorbell on its receive ring: only needed in Error,
    /// to flush what it posted.
    pub(crate) fn doorbell_recv(self: &Arc<Self>) -> Result {
        if !self.rings || self.links.has_srq() {
            return Err(EINVAL);
        }
        if self.ib_state() == QpState::Err {
            self.flush_queues();
        }
        Ok(())
    }

    /// In Error: tells a process with rings (their error flag, after which
    /// it rings the doorbell for whatever it posts), then completes with
    /// flush errors, in posting order, what the queues hold: WRs posted to
    /// the failed QP, or while it was failing. Each queue only once the
    /// engine (if any) owes no flush of its own; until then that flush
    /// takes them, behind what it holds. Under the stream lock, which
    /// every flush holds, so none comes in between. The flag goes first,
    /// so an entry posted meanwhile is flushed here, by its doorbell or by
    /// that flush.
    pub(crate) fn flush_queues(self: &Arc<Self>) {
        if self.rings {
            self.sq
                .lock()
                .set_flag(crate::ffi::ib::abi::RING_ERROR, true);
            if let Some(rq) = self.rq.lock().as_ref() {
                rq.set_error(true);
            }
        }
        let recv_done = {
            let mut st = self.stream.lock();
            let st = &mut *st;
            let engine = st.engine.as_deref();
            if engine.is_none_or(|e| e.send_flushed()) {
                // Completions held for page releases come first.
                self.drain_order_of(&mut st.host);
                // One pass: what was posted when it began (`flush_pop`).
                loop {
                    let sqe = self.sq.lock().flush_pop();
                    let Some(sqe) = sqe else { break };
                    self.flush_sqe(&sqe);
                }
            }
            let recv_done = engine.is_none_or(|e| e.recv_flushed());
            if recv_done {
                self.flush_recv();
            }
            recv_done
        };
        if recv_done && self.links.has_srq() {
            // The receive this QP took from the SRQ is flushed: it takes
            // no more. Once per Error, outside every lock of ours.
            let first = {
                let mut s = self.ib_state.lock();
                s.0 == QpState::Err && !core::mem::replace(&mut s.1.last_wqe, true)
            };
            if first {
                self.notifier.last_wqe_reached();
            }
        }
    }

    /// `destroy_qp`: the rings go now, in process context and while their
    /// context lives (their mmap entries belong to it), not whenever the
    /// last reference to the QP does (a page release from TCP may hold
    /// one). What is left of the QP sees empty queues.
    pub(crate) fn release_rings(&self) {
        let sq = self.sq.lock().user.take();
        let rq = Option::as_mut(&mut *self.rq.lock()).and_then(|rq| rq.take_user());
        drop(sq);
        drop(rq);
    }

    fn flush_sqe(&self, sqe: &Sqe) {
        let op = match sqe.kind {
            SqeKind::Wire(wr) => wire_opcode(&wr, sqe.masked),
            SqeKind::RegMr { .. } => WcOpcode::RegMr,
            SqeKind::LocalInv { .. } => WcOpcode::LocalInv,
        };
        let _ = self
            .links
            .send_cq()
            .push(self.wc(sqe.wr_id, op, WcStatus::WrFlushErr, 0));
    }

    // ---- state ---------------------------------------------------------

    /// `ib_modify_qp` with a new state. RTS is only reached through
    /// [`Self::attach`] (the CM), as for every iWARP RNIC.
    pub(crate) fn modify_state(self: &Arc<Self>, new: QpState) -> Result {
        let cur = self.ib_state();
        use QpState as S;
        let ok = matches!(
            (cur, new),
            (S::Reset, S::Reset | S::Init)
                | (S::Init, S::Init | S::Rtr)
                | (S::Rtr, S::Rtr)
                | (S::Rts, S::Rts | S::Sqd)
                | (S::Sqd, S::Sqd)
                | (_, S::Err)
                | (S::Err, S::Reset)
        );
        if !ok {
            // A QP the stream's end already put in Error is not drained
            // again: SQD is a no-op there, as for siw and iw_cm's own
            // disconnect (librdmacm's `rdma_disconnect` asks for SQD first
            // on iWARP, and the peer's FIN may have come before).
            if (cur, new) == (S::Err, S::Sqd) {
                return Ok(());
            }
            return Err(EINVAL);
        }
        match new {
            S::Err => self.fail(),
            S::Sqd => self.close(),
            S::Reset => {
                self.detach();
                {
                    let mut st = self.ib_state.lock();
                    self.set_state(&mut st.0, S::Reset);
                    st.1.last_wqe = false;
                }
                // The works may run again (the QP may connect again).
                self.works_closed.store(false, Ordering::SeqCst);
                // Error is over: new entries are the QP's again.
                self.sq
                    .lock()
                    .set_flag(crate::ffi::ib::abi::RING_ERROR, false);
                if let Some(rq) = self.rq.lock().as_ref() {
                    rq.set_error(false);
                }
            }
            s => self.enter(s),
        }
        Ok(())
    }

    // ---- zero-copy TX ----------------------------------------------------

    /// The device's hw counters (`rdma statistic`).
    #[cfg(rsiw_kunit)]
    pub(crate) fn device_counters(&self) -> &crate::device::counters::HwCounters {
        self.links.device().counters()
    }

    // ---- engine plumbing -----------------------------------------------

    /// The one way into the engine: `body` makes its calls through
    /// [`EngineCalls::call`], each under the stream lock with a host view;
    /// then, every lock dropped, the events they produced are handled and
    /// TX is kicked if the engine has octets to send (but from the TX run,
    /// which goes on sending itself).
    pub(super) fn engine_session<R>(
        &self,
        caller: Caller<'_>,
        body: impl FnOnce(&mut EngineCalls<'_>) -> R,
    ) -> R {
        let mut calls = EngineCalls {
            qp: self,
            events: Events::default(),
            wants_tx: false,
        };
        let r = body(&mut calls);
        let EngineCalls {
            events, wants_tx, ..
        } = calls;
        match caller {
            Caller::TxRun(this) => this.handle_events(&events),
            Caller::Process(this) => this.after_engine(&events, wants_tx),
            Caller::Callback => {
                if let Some(this) = self.links.qp_arc() {
                    this.after_engine(&events, wants_tx);
                }
            }
        }
        r
    }

    /// One engine call in a session of its own from process context (see
    /// [`Self::engine_session`]). `None` if the QP has no stream.
    fn with_engine<R>(
        self: &Arc<Self>,
        f: impl FnOnce(&mut Engine, &mut QpHost<'_>) -> R,
    ) -> Option<R> {
        self.engine_session(Caller::Process(self), |calls| {
            calls.call(None, |e, h, _| f(e, h))
        })
    }

    /// What follows a session's engine calls: their events, then the TX
    /// kick if the engine wants to send.
    fn after_engine(self: &Arc<Self>, events: &Events, wants_tx: bool) {
        self.handle_events(events);
        if wants_tx {
            self.kick();
        }
    }

    /// Leftover stream octets from the CM (`attach`): their own session.
    fn rx_chunk(self: &Arc<Self>, chunk: &[u8]) -> usize {
        self.engine_session(Caller::Process(self), |calls| self.rx_engine(calls, chunk))
    }

    /// One chunk of the stream into the engine (a session's call). Counted
    /// under the stream lock, as every write of `rx_bytes` is. The engine
    /// consumes every byte it is given.
    fn rx_engine(&self, calls: &mut EngineCalls<'_>, chunk: &[u8]) -> usize {
        calls
            .call(None, |engine, host, _| {
                let n = engine.rx(host, &ModuleCrc32c, chunk);
                QpStats::bump(&self.stats.rx_bytes, n as u64);
                #[cfg(rsiw_kunit)]
                if injected_terminate_due(self.stats.rx_bytes.load(Ordering::Relaxed)) {
                    engine.terminate(host, error::rdmap::LOCAL_CATA);
                }
                n
            })
            .unwrap_or(chunk.len())
    }

    fn handle_events(self: &Arc<Self>, events: &Events) {
        for e in events.iter() {
            let mut st = self.ib_state.lock();
            let was_failed = st.1.failed;
            match e {
                Event::Ready | Event::Established => st.1.ready = true,
                Event::Closed => st.1.closed = true,
                Event::LocalTerminate(err) => {
                    if crate::ffi::runtime::ratelimited() {
                        pr_warn!(
                            "qp {}: protocol error, sending Terminate (layer {:?} type {:#x} code {:#04x})\n",
                            self.qpn, err.layer, err.etype, err.code
                        );
                    }
                    let counters = self.links.device().counters();
                    counters.add(HwCounter::TerminateSent, 1);
                    if let Some(c) = HwCounter::for_local_terminate(*err) {
                        counters.add(c, 1);
                    }
                    QpStats::add(&self.stats.terminate_sent, 1);
                    crate::ffi::trace::terminate(
                        self.qpn,
                        true,
                        err.layer as u8,
                        err.etype,
                        err.code,
                    );
                    st.1.failed = true;
                    st.1.terminate_sent = Some(*err);
                    self.set_state(&mut st.0, QpState::Err);
                }
                Event::TerminateReceived(t) => {
                    if crate::ffi::runtime::ratelimited() {
                        pr_warn!(
                            "qp {}: peer sent Terminate (layer {:?} type {:#x} code {:#04x})\n",
                            self.qpn,
                            t.layer,
                            t.etype,
                            t.code
                        );
                    }
                    self.links
                        .device()
                        .counters()
                        .add(HwCounter::TerminateReceived, 1);
                    QpStats::add(&self.stats.terminate_received, 1);
                    crate::ffi::trace::terminate(self.qpn, false, t.layer as u8, t.etype, t.code);
                    st.1.failed = true;
                    st.1.terminate_received = Some(*t);
                    self.set_state(&mut st.0, QpState::Err);
                }
                Event::ConnectionLost | Event::NegotiationFailed(_) | Event::Rejected => {
                    st.1.failed = true;
                    self.set_state(&mut st.0, QpState::Err);
                }
                Event::ConnectRequest => {}
            }
            // A graceful close by the peer (its FIN) is no error of the
            // QP: the WRs are flushed, the iw_cm sees a disconnect. And one
            // QP_FATAL per failure: a reset after a Terminate is the same
            // failure.
            let graceful =
                matches!(e, Event::ConnectionLost) && self.quiet_end.load(Ordering::Acquire);
            let fatal = !was_failed
                && !graceful
                && matches!(
                    e,
                    Event::LocalTerminate(_) | Event::TerminateReceived(_) | Event::ConnectionLost
                );
            let now_err = st.0 == QpState::Err;
            drop(st);
            if now_err {
                self.flush_queues();
            }
            if matches!(
                e,
                Event::LocalTerminate(_) | Event::TerminateReceived(_) | Event::ConnectionLost
            ) {
                // Completions waiting for acknowledgements will not get
                // them; the engine's flushes queued behind them.
                self.drain_order();
            }
            if fatal {
                self.notifier.fatal();
                // TX sends what is left (the Terminate) and then closes.
                self.kick();
            }
            if matches!(e, Event::Closed | Event::ConnectionLost) {
                // The stream is over: our FIN follows what is still queued.
                self.tx.fin_pending.store(true, Ordering::Release);
                self.kick();
            }
            if matches!(e, Event::Ready) {
                // WRs posted while the responder waited for the RTR are on
                // the SQ, which the engine cannot see: send them now.
                self.kick();
            }
            let sink = self.cm.lock().clone();
            if let Some(sink) = sink {
                match e {
                    // Passive side: the initiator's RTR arrived.
                    Event::Ready => sink.established(),
                    Event::Closed => sink.closed(),
                    // The TCP connection is gone (FIN or reset): as siw,
                    // DISCONNECT then CLOSE, so rdma_cm reports
                    // DISCONNECTED without waiting for the ULP.
                    Event::ConnectionLost => {
                        sink.disconnected();
                        sink.closed();
                    }
                    e if fatal || matches!(e, Event::NegotiationFailed(_)) => sink.disconnected(),
                    _ => {}
                }
            }
        }
    }
}

/// Who acts on what a session of engine calls produced, once the stream
/// lock is dropped (`Qp::engine_session`).
#[derive(Clone, Copy)]
pub(super) enum Caller<'a> {
    /// The TX run: it handles the events and goes on sending itself.
    TxRun(&'a Arc<Qp>),
    /// Process context holding the QP's reference: the events, then a TX
    /// kick if the engine wants to send.
    Process(&'a Arc<Qp>),
    /// A socket callback, where only `&Qp` is at hand (the hook's `Arc`
    /// keeps the QP alive): the same, through a reference from the links.
    Callback,
}

/// A session of engine calls (`Qp::engine_session`): the events they
/// produced and whether the engine wants to send.
pub(super) struct EngineCalls<'a> {
    qp: &'a Qp,
    events: Events,
    wants_tx: bool,
}

impl EngineCalls<'_> {
    /// One engine call: `f` runs under the stream lock with the engine, a
    /// host view (with `zc`, the page list of a zero-copy round being
    /// planned) and the stream's `dead` flag. `None` if the QP has no
    /// engine.
    #[inline(always)]
    pub(super) fn call<R>(
        &mut self,
        zc: Option<&mut Segments>,
        f: impl FnOnce(&mut Engine, &mut QpHost<'_>, &mut bool) -> R,
    ) -> Option<R> {
        let mut st = self.qp.stream.lock();
        let st = &mut *st;
        let engine = st.engine.as_deref_mut()?;
        let mut host = QpHost {
            qp: self.qp,
            st: &mut st.host,
            events: &mut self.events,
            zc,
        };
        let r = f(engine, &mut host, &mut st.dead);
        self.wants_tx |= engine.wants_tx();
        Some(r)
    }
}

// The device reports these limits; a peer must never be promised more
// reads than the engine's queues hold.
const _: () = assert!(MAX_ORD == crate::device::limits::DEFAULT_LIMITS.max_ord as usize);
const _: () = assert!(MAX_IRD == crate::device::limits::DEFAULT_LIMITS.max_ird as usize);
// A QP is one `Arc` allocation: on a kernel without lock debugging (whose
// locks are larger) it fits the 2 KiB kmalloc cache with its reference
// count. One octet more and every QP end takes 4 KiB.
#[cfg(not(any(CONFIG_DEBUG_SPINLOCK, CONFIG_DEBUG_LOCK_ALLOC, CONFIG_DEBUG_MUTEXES)))]
const _: () = assert!(
    core::mem::size_of::<Qp>() + 8 <= 2048,
    "struct Qp outgrew kmalloc-2k"
);
