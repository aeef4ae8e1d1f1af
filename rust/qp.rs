// SPDX-License-Identifier: GPL-2.0
//! Queue pairs (RC): the send and receive queues, and the iWARP stream
//! that runs them — the protocol engine's `qp::Qp` driven by the socket.
//!
//! Contexts and locks:
//! - `post_send`/`post_recv` (any context) take only the queue locks and
//!   schedule the TX work item.
//! - RX runs in the socket's `data_ready` (softirq, socket locked): each
//!   linear chunk of the skb goes through `engine.rx`, which places payload
//!   straight into registered memory (one copy).
//! - TX runs in a work item: it fills a buffer from `engine.tx` under the
//!   engine lock, then sends it with the lock dropped (sending may sleep).
//!   A work item never runs concurrently with itself, so the bytes leave in
//!   the order the engine produced them.
//! - Lock order: engine → queue (SQ, RQ/SRQ) → CQ / STag table.

use core::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};

use kernel::{
    new_mutex, new_spinlock_irq, new_work,
    prelude::*,
    sync::{Arc, Mutex, SpinLockIrq},
    workqueue::{impl_has_work, Work, WorkItem},
};

use crate::{
    cq::{Completion as Wc, WcOpcode, WcStatus},
    hw_counters::HwCounter,
    ddp::Region,
    engine::{
        error::{self as term, TermError},
        mpa::negotiate::{Framing, RtrMode},
        crc::Crc32c,
        qp::{
            CompOp, Completion as EngineCompletion, Event, Host, Local, PayloadRef, Piece, QpConfig,
            RecvWr, SendWr, State as EngineState, Status, TxPlan, WorkQueue,
        },
        rdmap::AtomicPlan,
        wire::commit as commitw,
    },
    cm::{CmEventSink, CmQp, Stream as CmStream},
    ffi::{
        crc::KernelCrc32c,
        qp::{QpLinks, QpNotifier},
        socket::{SockRx, SocketEvents, TcpSocket, TcpState},
        zcopy::{Batch, LiteralPage, Notif, Segments, ZcOwner},
    },
    mr::{self as mrmod, FastReg},
    send_order::SendOrder,
    srq::{Rqe, RecvQueue, Sge, MAX_SGE},
};

/// Largest ORD/IRD a QP can negotiate (the engine's queue capacities).
pub(crate) const MAX_ORD: usize = 32;
/// See [`MAX_ORD`].
pub(crate) const MAX_IRD: usize = 32;
/// Largest inline payload of a send WR.
pub(crate) const MAX_INLINE: usize = 128;
/// TX buffer: the engine fills it, the socket drains it.
const TX_BUF: usize = 64 * 1024;
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

type Engine = crate::engine::qp::Qp<MAX_ORD, MAX_IRD>;

/// The IB-level QP state consumers see (`ib_qp_state`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum IbState {
    Reset,
    Init,
    Rtr,
    Rts,
    Sqd,
    Sqe,
    Err,
}

/// A send queue entry.
#[derive(Clone, Copy)]
pub(crate) enum SqeKind {
    /// Goes on the wire through the engine.
    Wire(SendWr),
    /// `IB_WR_REG_MR`: fast-register an MR (local, in SQ order).
    RegMr { stag: u32, req: FastReg },
    /// `IB_WR_LOCAL_INV`.
    LocalInv { stag: u32 },
}

/// A posted send WR with its local data.
#[derive(Clone, Copy)]
pub(crate) struct Sqe {
    pub(crate) wr_id: u64,
    pub(crate) signaled: bool,
    pub(crate) kind: SqeKind,
    pub(crate) sges: [Sge; MAX_SGE],
    pub(crate) num_sge: u8,
    pub(crate) inline: [u8; MAX_INLINE],
    pub(crate) inline_len: u16,
    /// Report a masked atomic's opcode in its completion.
    pub(crate) masked: bool,
    /// `IB_WR_RDMA_READ_WITH_INV`: invalidate this local STag (the Read's
    /// sink) when the Read completes.
    pub(crate) inv_local: Option<u32>,
}

impl Sqe {
    fn sges(&self) -> &[Sge] {
        &self.sges[..usize::from(self.num_sge).min(MAX_SGE)]
    }
}

/// The send queue: a fixed ring.
struct SendQueue {
    ring: KVVec<Option<Sqe>>,
    head: usize,
    count: usize,
}

impl SendQueue {
    fn new(max_wr: usize) -> Result<Self> {
        // No room at all (`max_send_wr` 0): every post is refused.
        Ok(Self { ring: KVVec::from_elem(None, max_wr, GFP_KERNEL)?, head: 0, count: 0 })
    }

    fn push(&mut self, sqe: Sqe) -> Result {
        if self.count == self.ring.len() {
            return Err(ENOMEM);
        }
        let tail = (self.head + self.count) % self.ring.len();
        self.ring[tail] = Some(sqe);
        self.count += 1;
        Ok(())
    }

    fn pop(&mut self) -> Option<Sqe> {
        if self.count == 0 {
            return None;
        }
        let sqe = self.ring[self.head].take();
        self.head = (self.head + 1) % self.ring.len();
        self.count -= 1;
        sqe
    }
}

/// Reads whose sink STag is invalidated at completion (READ_WITH_INV),
/// at most one per ORD credit.
#[derive(Default)]
struct ReadInvs {
    list: [(u64, u32); MAX_ORD],
    n: usize,
}

impl ReadInvs {
    fn add(&mut self, wr_id: u64, stag: u32) {
        if let Some(slot) = self.list.get_mut(self.n) {
            *slot = (wr_id, stag);
            self.n += 1;
        }
    }

    fn take(&mut self, wr_id: u64) -> Option<u32> {
        let i = self.list[..self.n].iter().position(|&(w, _)| w == wr_id)?;
        let stag = self.list[i].1;
        self.list.copy_within(i + 1..self.n, i);
        self.n -= 1;
        Some(stag)
    }
}

/// The local data of the send WR the engine is working on.
struct CurWr {
    handle: u64,
    sqe: Option<Sqe>,
    read_invs: ReadInvs,
}

/// What the engine's host keeps between calls (under the engine lock).
struct HostState {
    cur: CurWr,
    /// A receive WQE taken off the RQ/SRQ for the message being received.
    claimed: Option<Rqe>,
    next_handle: u64,
    /// Whether the atomic whose result was just placed is masked, for its
    /// completion (`write_atomic_result` sees the WR's handle, `complete`
    /// only its wr_id).
    atomic_done: Option<bool>,
    /// Send-queue completions waiting for the peer's acknowledgement of
    /// payload sent by reference (zero-copy TX).
    order: SendOrder,
}

/// Zero-copy TX state; only the TX work touches it.
struct ZeroCopyTx {
    /// FPDU payloads of at least this many octets go by reference on this
    /// stream; `None`: the stream copies.
    min: Option<usize>,
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

/// Handle bit marking a masked atomic (`Local::handle` travels with the
/// request to `write_atomic_result`).
const MASKED_HANDLE: u64 = 1 << 63;

/// State that only changes under the engine lock.
struct Stream {
    engine: Option<KBox<Engine>>,
    host: HostState,
    /// Bytes the engine produced that the socket has not taken yet.
    tx: KVec<u8>,
    tx_off: usize,
    /// The socket is gone: everything flushed, nothing more to send.
    dead: bool,
}

/// The parameters MPA negotiation settled (from the CM, or a test).
#[derive(Clone, Copy, Debug)]
pub(crate) struct StreamParams {
    pub(crate) framing: Framing,
    pub(crate) ird: u16,
    pub(crate) ord: u16,
    pub(crate) rtr: Option<RtrMode>,
    pub(crate) initiator: bool,
    /// Effective MSS of the connection.
    pub(crate) emss: usize,
}

/// What the QP reports about its stream, for the CM and tests.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct StreamStatus {
    pub(crate) ready: bool,
    pub(crate) closed: bool,
    pub(crate) failed: bool,
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
}

/// One RC queue pair.
#[pin_data]
pub(crate) struct Qp {
    qpn: u32,
    pd: u32,
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
    #[pin]
    stream: SpinLockIrq<Stream>,
    #[pin]
    ib_state: SpinLockIrq<(IbState, StreamStatus)>,
    /// The TCP connection; only process context touches it.
    #[pin]
    sock: Mutex<Option<TcpSocket>>,
    /// The iw_cm's channel for this connection, from the hand-off on.
    #[pin]
    cm: SpinLockIrq<Option<CmEventSink>>,
    #[pin]
    tx_work: Work<Qp>,
    tx_queued: AtomicBool,
    tx_running: AtomicBool,
    /// The stream ends without an error: the peer's FIN (not a reset) or
    /// the ULP moving the QP to Error. WRs are flushed, the iw_cm sees a
    /// disconnect, no `IB_EVENT_QP_FATAL` is raised.
    quiet_end: AtomicBool,
    /// Send our FIN once everything queued has left (TX work).
    fin_pending: AtomicBool,
    #[pin]
    zc: Mutex<ZeroCopyTx>,
    /// The self-tests' choice of zero-copy threshold (`u32::MAX`: the
    /// module parameter).
    zc_min_override: AtomicU32,
    /// The TX work is sending or the socket did not take everything: a
    /// `write_space` must kick it.
    tx_blocked: AtomicBool,
    /// Completions that waited for page releases (statistics).
    zc_deferred: AtomicU64,
    /// This QP's batches TCP has not released yet.
    zc_live: AtomicU32,
    /// Torn down: a late page release only drops its reference.
    zc_detached: AtomicBool,
    /// The TX work waits for page releases (too many batches out).
    zc_stalled: AtomicBool,
}

impl_has_work! {
    impl HasWork<Self> for Qp { self.tx_work }
}

impl Qp {
    pub(crate) fn new(init: QpInit, notifier: QpNotifier) -> Result<Arc<Self>> {
        let sq = SendQueue::new(init.max_send_wr as usize)?;
        let rq = if init.links.has_srq() {
            None
        } else {
            Some(RecvQueue::new(init.max_recv_wr as usize, init.max_recv_sge as usize)?)
        };
        let zc = ZeroCopyTx {
            min: None,
            lit: LiteralPage::new(),
            refs: Segments::with_capacity(ZC_SEGMENTS)?,
            batch: Batch::with_capacity(ZC_PIECES + ZC_SEGMENTS)?,
            pieces: KVec::from_elem(Piece::Literal(0), ZC_PIECES, GFP_KERNEL)?,
            notif: None,
            ref_octets: 0,
            literal_octets: 0,
        };
        let stream = Stream {
            engine: None,
            host: HostState {
                cur: CurWr { handle: 0, sqe: None, read_invs: ReadInvs::default() },
                claimed: None,
                next_handle: 1,
                atomic_done: None,
                order: SendOrder::new(2 * init.max_send_wr as usize + MAX_ORD + 8)?,
            },
            tx: KVec::with_capacity(TX_BUF, GFP_KERNEL)?,
            tx_off: 0,
            dead: false,
        };
        Arc::pin_init(
            try_pin_init!(Qp {
                qpn: init.qpn,
                pd: init.pd,
                sig_all: init.sig_all,
                max_send_sge: init.max_send_sge,
                max_inline: init.max_inline,
                links: init.links,
                notifier,
                sq <- new_spinlock_irq!(sq, "rsiw_qp_sq"),
                rq <- new_spinlock_irq!(rq, "rsiw_qp_rq"),
                stream <- new_spinlock_irq!(stream, "rsiw_qp_stream"),
                ib_state <- new_spinlock_irq!((IbState::Reset, StreamStatus::default()), "rsiw_qp_state"),
                sock <- new_mutex!(None, "rsiw_qp_sock"),
                cm <- new_spinlock_irq!(None, "rsiw_qp_cm"),
                tx_work <- new_work!("rsiw_qp_tx"),
                tx_queued: AtomicBool::new(false),
                tx_running: AtomicBool::new(false),
                quiet_end: AtomicBool::new(false),
                fin_pending: AtomicBool::new(false),
                zc <- new_mutex!(zc, "rsiw_qp_zc"),
                zc_min_override: AtomicU32::new(u32::MAX),
                tx_blocked: AtomicBool::new(false),
                zc_deferred: AtomicU64::new(0),
                zc_live: AtomicU32::new(0),
                zc_detached: AtomicBool::new(false),
                zc_stalled: AtomicBool::new(false),
            }? Error),
            GFP_KERNEL,
        )
    }

    pub(crate) fn qpn(&self) -> u32 {
        self.qpn
    }

    pub(crate) fn links(&self) -> &QpLinks {
        &self.links
    }

    /// (max_send_wr, max_recv_wr, max_send_sge, max_recv_sge, max_inline)
    pub(crate) fn caps(&self) -> (u32, u32, u32, u32, u32) {
        let send_wr = self.sq.lock().ring.len() as u32;
        let (recv_wr, recv_sge) = match self.rq.lock().as_ref() {
            Some(rq) => (rq.capacity() as u32, rq.max_sge() as u32),
            None => (0, 0),
        };
        (send_wr, recv_wr, self.max_send_sge, recv_sge, self.max_inline)
    }

    /// What the stream reported (Terminates sent and received, ...).
    pub(crate) fn stream_status(&self) -> StreamStatus {
        self.ib_state.lock().1
    }

    pub(crate) fn ib_state(&self) -> IbState {
        self.ib_state.lock().0
    }

    /// What MPA settled for the stream (framing, RTR), once attached.
    #[cfg(CONFIG_KUNIT = "y")]
    pub(crate) fn negotiated(&self) -> Option<(Framing, Option<RtrMode>)> {
        self.stream.lock().engine.as_deref().map(|e| (e.framing(), e.rtr_mode()))
    }

    /// The TCP state of the QP's connection, for the self-tests.
    #[cfg(CONFIG_KUNIT = "y")]
    pub(crate) fn tcp_state(&self) -> Option<TcpState> {
        self.sock.lock().as_ref().map(|s| s.state())
    }

    // ---- posting -------------------------------------------------------

    /// Queues a send WR (`ib_post_send`). In Error the WR completes at once
    /// with a flush error, as the verbs require.
    pub(crate) fn post_send(self: &Arc<Self>, sqe: Sqe) -> Result {
        if usize::from(sqe.num_sge) > self.max_send_sge as usize
            || usize::from(sqe.inline_len) > self.max_inline as usize
        {
            return Err(EINVAL);
        }
        match self.ib_state() {
            IbState::Reset => return Err(EINVAL),
            IbState::Err => {
                self.flush_sqe(&sqe);
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
        if self.ib_state() == IbState::Reset {
            return Err(EINVAL);
        }
        if self.ib_state() == IbState::Err {
            self.links.recv_cq().map(|cq| {
                cq.push(self.wc(rqe.wr_id, WcOpcode::Recv, WcStatus::WrFlushErr, 0))
            });
            return Ok(());
        }
        let mut guard = self.rq.lock();
        let rq = Option::as_mut(&mut *guard).ok_or(EINVAL)?; // QPs with an SRQ post there
        rq.push(rqe)?;
        // A message may be waiting for this buffer: nothing to do here, the
        // engine retries on the next FPDU (iWARP has no RNR: a Send without
        // a posted receive already failed the stream).
        Ok(())
    }

    fn wc(&self, wr_id: u64, opcode: WcOpcode, status: WcStatus, byte_len: u32) -> Wc {
        Wc {
            wr_id,
            status,
            opcode,
            byte_len,
            qp: self.links.wc_qp(),
            qp_num: self.qpn,
            ..Wc::default()
        }
    }

    fn flush_sqe(&self, sqe: &Sqe) {
        let op = match sqe.kind {
            SqeKind::Wire(wr) => wire_opcode(&wr, sqe.masked),
            SqeKind::RegMr { .. } => WcOpcode::RegMr,
            SqeKind::LocalInv { .. } => WcOpcode::LocalInv,
        };
        let _ = self.links.send_cq().push(self.wc(sqe.wr_id, op, WcStatus::WrFlushErr, 0));
    }

    // ---- state ---------------------------------------------------------

    /// `ib_modify_qp` with a new state. RTS is only reached through
    /// [`Self::attach`] (the CM), as for every iWARP RNIC.
    pub(crate) fn modify_state(self: &Arc<Self>, new: IbState) -> Result {
        let cur = self.ib_state();
        use IbState as S;
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
            return Err(EINVAL);
        }
        match new {
            S::Err => self.fail(),
            S::Sqd => self.close(),
            S::Reset => {
                self.detach();
                self.ib_state.lock().0 = S::Reset;
            }
            s => self.ib_state.lock().0 = s,
        }
        Ok(())
    }

    /// Hands an established TCP connection to the QP after MPA
    /// negotiation: the socket is hooked, the engine takes over, the QP is
    /// in RTS. `leftover` are stream bytes already read past the MPA frame.
    pub(crate) fn attach(
        self: &Arc<Self>,
        mut sock: TcpSocket,
        params: StreamParams,
        leftover: &[u8],
    ) -> Result {
        match self.ib_state() {
            IbState::Init | IbState::Rtr => {}
            _ => return Err(EINVAL),
        }
        let ird = usize::from(params.ird).min(MAX_IRD) as u16;
        let ord = usize::from(params.ord).min(MAX_ORD) as u16;
        // A new stream (a QP may be reset and connected again).
        self.quiet_end.store(false, Ordering::Release);
        self.fin_pending.store(false, Ordering::Release);
        let mut engine = KBox::new(Engine::new(QpConfig { pd: self.pd, emss: params.emss }), GFP_KERNEL)?;
        engine.establish(params.framing, ird, ord, params.rtr, params.initiator);
        let zc_min = self.zcopy_min(sock.loopback_route());
        engine.set_tx_ref_min(zc_min);
        self.zc_detached.store(false, Ordering::Release);
        {
            let mut zc = self.zc.lock();
            zc.min = zc_min;
            zc.batch.clear();
            zc.refs.clear();
        }
        self.stream.lock().engine = Some(engine);
        self.ib_state.lock().0 = IbState::Rts;
        // Hook first, then read what arrived before: nothing is lost.
        sock.hook(self.clone())?;
        *self.sock.lock() = Some(sock);
        if !leftover.is_empty() {
            self.rx_chunk(leftover);
        }
        if let Some(s) = self.sock.lock().as_ref() {
            s.read(&mut |chunk| self.rx_chunk(chunk));
        }
        self.kick();
        Ok(())
    }

    /// Graceful close (`IB_QPS_SQD` from the iw_cm): drain, then FIN.
    fn close(self: &Arc<Self>) {
        self.ib_state.lock().0 = IbState::Sqd;
        self.with_engine(|e, h| e.close(h));
        self.kick();
    }

    /// Moves to Error: flushes everything; the socket is shut down.
    fn fail(self: &Arc<Self>) {
        self.ib_state.lock().0 = IbState::Err;
        // Asked for by the ULP (or the QP's teardown): not a fatal error.
        self.quiet_end.store(true, Ordering::Release);
        let had_engine = self.with_engine(|e, h| e.on_connection_lost(h)).is_some();
        if !had_engine {
            // Never connected: flush the queues ourselves.
            while let Some(sqe) = self.sq.lock().pop() {
                self.flush_sqe(&sqe);
            }
            self.flush_recv();
        }
        self.stream.lock().dead = true;
        self.drain_order();
        if let Some(s) = self.sock.lock().as_ref() {
            s.shutdown();
        }
        self.end_cm();
    }

    /// The connection is over for the iw_cm: DISCONNECT (if it was up),
    /// then CLOSE, on which the iw_cm drops its references on the cm_id
    /// and on this QP (`iw_rem_ref`; `destroy_qp` waits for them). Once.
    fn end_cm(&self) {
        let sink = self.cm.lock().take();
        if let Some(sink) = sink {
            sink.disconnected();
            sink.closed();
        }
    }

    fn flush_recv(&self) {
        loop {
            let rqe = Option::as_mut(&mut *self.rq.lock()).and_then(|rq| rq.pop());
            let Some(rqe) = rqe else { break };
            if let Some(cq) = self.links.recv_cq() {
                let _ = cq.push(self.wc(rqe.wr_id, WcOpcode::Recv, WcStatus::WrFlushErr, 0));
            }
        }
    }

    /// Disconnects and waits until no callback or TX work uses the QP
    /// (`destroy_qp`, `IB_QPS_RESET`). Sleeps.
    pub(crate) fn detach(self: &Arc<Self>) {
        if self.ib_state() != IbState::Err {
            self.fail();
        }
        // Already in Error (a Terminate, a reset): the iw_cm may not have
        // had its CLOSE yet, and holds a reference on the QP until then.
        self.end_cm();
        let mut sock = self.sock.lock().take();
        if let Some(s) = sock.as_mut() {
            s.unhook();
        }
        // The TX work holds a reference and checks `dead`; wait it out.
        for _ in 0..5000 {
            if !self.tx_queued.load(Ordering::Acquire) && !self.tx_running.load(Ordering::Acquire) {
                break;
            }
            kernel::time::delay::fsleep(kernel::time::Delta::from_millis(1));
        }
        {
            // The unsent batch and the spare notification hold references
            // (the notification one on this QP).
            let mut zc = self.zc.lock();
            zc.batch.clear();
            zc.refs.clear();
            zc.notif = None;
        }
        // TCP keeps sent skbs with our pages until the peer acknowledges
        // them (the FIN went out in `fail`): the socket stays open for the
        // ACKs a while. A peer that does not acknowledge gets a reset,
        // which frees the queued skbs now: no notification may outlive the
        // module, whose code it calls.
        if let Some(s) = sock {
            if self.wait_zc_released(ZC_ACK_GRACE_MS) {
                drop(s);
            } else {
                s.abort();
            }
        }
        // What the reset left (skbs in a device's queue): soon freed.
        self.wait_zc_released(5000);
        {
            let _st = self.stream.lock();
            self.zc_detached.store(true, Ordering::Release);
        }
        self.drain_order();
        let mut st = self.stream.lock();
        st.engine = None;
        st.host.claimed = None;
    }

    // ---- zero-copy TX ----------------------------------------------------

    /// Waits up to `ms` for TCP to release every batch of this QP's pages;
    /// whether it did. Sleeps.
    fn wait_zc_released(&self, ms: u32) -> bool {
        for _ in 0..ms {
            if self.zc_live.load(Ordering::Acquire) == 0 {
                return true;
            }
            kernel::time::delay::fsleep(kernel::time::Delta::from_millis(1));
        }
        self.zc_live.load(Ordering::Acquire) == 0
    }

    /// The FPDU payload size from which a new stream sends by reference
    /// (`zcopy_min`, or the self-tests' override); `None`: copy. A
    /// connection over a loopback device copies: the stack copies every
    /// zero-copy skb it delivers locally (`skb_orphan_frags_rx`), so the
    /// references would only add work (`scripts/bench.sh --vm-tx`).
    fn zcopy_min(&self, loopback: bool) -> Option<usize> {
        let v = match self.zc_min_override.load(Ordering::Relaxed) {
            u32::MAX if loopback => 0,
            u32::MAX => crate::module_parameters::zcopy_min.value(),
            v => v,
        };
        (v > 0).then_some(v as usize)
    }

    /// Overrides `zcopy_min` for the next stream (`None`: the parameter).
    #[cfg(CONFIG_KUNIT = "y")]
    pub(crate) fn set_zcopy_min(&self, min: Option<u32>) {
        self.zc_min_override.store(min.unwrap_or(u32::MAX), Ordering::Relaxed);
    }

    /// Zero-copy statistics: octets sent by reference, literal octets
    /// (headers, trailers, copied payload) of zero-copy rounds, and
    /// completions that waited for the peer's acknowledgement.
    #[cfg(CONFIG_KUNIT = "y")]
    pub(crate) fn zcopy_stats(&self) -> (u64, u64, u64) {
        let zc = self.zc.lock();
        (zc.ref_octets, zc.literal_octets, self.zc_deferred.load(Ordering::Relaxed))
    }

    /// The device's hw counters (`rdma statistic`).
    #[cfg(CONFIG_KUNIT = "y")]
    pub(crate) fn device_counters(&self) -> &crate::hw_counters::HwCounters {
        self.links.device().counters()
    }

    /// The stream is over: deliver every waiting send completion (a flush
    /// error for what the peer had not acknowledged).
    fn drain_order(&self) {
        let mut st = self.stream.lock();
        let qp = self;
        st.host.order.drain(|wc| {
            let _ = qp.links.send_cq().push(wc);
        });
    }

    // ---- engine plumbing -----------------------------------------------

    /// Runs `f` on the engine with a host view, then handles the events
    /// it produced. `None` if the QP has no stream.
    fn with_engine<R>(
        self: &Arc<Self>,
        f: impl FnOnce(&mut Engine, &mut QpHost<'_>) -> R,
    ) -> Option<R> {
        let mut events = Events::default();
        let (r, wants_tx) = {
            let mut st = self.stream.lock();
            let st = &mut *st;
            let engine = st.engine.as_deref_mut()?;
            let mut host = QpHost { qp: self, st: &mut st.host, events: &mut events, zc: None };
            let r = f(engine, &mut host);
            (r, engine.wants_tx())
        };
        self.handle_events(&events);
        if wants_tx {
            self.kick();
        }
        Some(r)
    }

    fn rx_chunk(self: &Arc<Self>, chunk: &[u8]) -> usize {
        // The engine consumes every byte it is given.
        self.with_engine(|e, h| e.rx(h, &KernelCrc32c, chunk)).unwrap_or(chunk.len())
    }

    fn handle_events(self: &Arc<Self>, events: &Events) {
        for e in events.iter() {
            let mut st = self.ib_state.lock();
            let was_failed = st.1.failed;
            match e {
                Event::Ready | Event::Established => st.1.ready = true,
                Event::Closed => st.1.closed = true,
                Event::LocalTerminate(err) => {
                    if crate::ffi::cm::ratelimited() {
                        pr_warn!(
                            "qp {}: protocol error, sending Terminate (layer {:?} type {:#x} code {:#04x})\n",
                            self.qpn, err.layer, err.etype, err.code
                        );
                    }
                    self.links.device().counters().add(HwCounter::TerminateSent, 1);
                    st.1.failed = true;
                    st.1.terminate_sent = Some(*err);
                    st.0 = IbState::Err;
                }
                Event::TerminateReceived(t) => {
                    if crate::ffi::cm::ratelimited() {
                        pr_warn!(
                            "qp {}: peer sent Terminate (layer {:?} type {:#x} code {:#04x})\n",
                            self.qpn, t.error.layer, t.error.etype, t.error.code
                        );
                    }
                    self.links.device().counters().add(HwCounter::TerminateReceived, 1);
                    st.1.failed = true;
                    st.1.terminate_received = Some(t.error);
                    st.0 = IbState::Err;
                }
                Event::ConnectionLost | Event::NegotiationFailed(_) | Event::Rejected => {
                    st.1.failed = true;
                    st.0 = IbState::Err;
                }
                Event::ConnectRequest => {}
            }
            // A graceful close by the peer (its FIN) is no error of the
            // QP: the WRs are flushed, the iw_cm sees a disconnect. And one
            // QP_FATAL per failure: a reset after a Terminate is the same
            // failure.
            let graceful = matches!(e, Event::ConnectionLost) && self.quiet_end.load(Ordering::Acquire);
            let fatal = !was_failed
                && !graceful
                && matches!(e, Event::LocalTerminate(_) | Event::TerminateReceived(_) | Event::ConnectionLost);
            drop(st);
            if matches!(e, Event::LocalTerminate(_) | Event::TerminateReceived(_) | Event::ConnectionLost) {
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
                self.fin_pending.store(true, Ordering::Release);
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

    /// Schedules the TX work (idempotent).
    fn kick(self: &Arc<Self>) {
        if self.tx_queued.swap(true, Ordering::AcqRel) {
            return;
        }
        match crate::ffi::cm::tx_queue() {
            Some(q) => {
                if q.enqueue(self.clone()).is_err() {
                    // Already queued (a race with the flag): it will run.
                }
            }
            // The module is going away: no device, so no QP, is left to
            // send (unreachable while a QP lives).
            None => self.tx_queued.store(false, Ordering::Release),
        }
    }

    /// The TX work: fill from the engine, send, until the engine has
    /// nothing more or the socket is full (then `write_space` kicks again).
    fn run_tx(self: &Arc<Self>) {
        self.tx_running.store(true, Ordering::Release);
        self.tx_queued.store(false, Ordering::Release);
        for _ in 0..64 {
            match self.tx_round() {
                TxRound::More => continue,
                TxRound::Done => {
                    self.tx_running.store(false, Ordering::Release);
                    return;
                }
            }
        }
        // Be fair to other work items: continue in a new run.
        self.tx_running.store(false, Ordering::Release);
        self.kick();
    }

    /// One TX round: zero-copy if the stream sends by reference.
    fn tx_round(self: &Arc<Self>) -> TxRound {
        let mut zc = self.zc.lock();
        // Octets a copying round left unsent go first (a zero-copy round
        // falls back to copying when it has no page for its headers).
        let copy_pending = {
            let st = self.stream.lock();
            st.tx_off < st.tx.len()
        };
        if zc.min.is_some() && !copy_pending {
            self.tx_round_zc(&mut zc)
        } else {
            drop(zc);
            self.tx_round_copy()
        }
    }

    /// Takes the pending TX bytes (producing them from the engine if there
    /// are none), sends what the socket takes, puts the rest back.
    fn tx_round_copy(self: &Arc<Self>) -> TxRound {
        let mut events = Events::default();
        let mut failed_out = false;
        let taken = {
            let mut st = self.stream.lock();
            let st = &mut *st;
            if st.dead {
                None
            } else if st.tx_off < st.tx.len() {
                Some((core::mem::take(&mut st.tx), st.tx_off))
            } else if let Some(engine) = st.engine.as_deref_mut() {
                st.tx.clear();
                st.tx_off = 0;
                if st.tx.resize(TX_BUF, 0, GFP_ATOMIC).is_err() {
                    None
                } else {
                    let mut host = QpHost { qp: self, st: &mut st.host, events: &mut events, zc: None };
                    let n = engine.tx(&mut host, &KernelCrc32c, &mut st.tx);
                    st.tx.truncate(n);
                    if n == 0 && engine.state() == EngineState::Error {
                        // The Terminate, if any, is in the socket: flush what
                        // was posted while the stream failed, then close the
                        // LLP stream (a Terminate is the stream's last message).
                        engine.flush(&mut host);
                        st.dead = true;
                        failed_out = true;
                    }
                    (n > 0).then(|| (core::mem::take(&mut st.tx), 0))
                }
            } else {
                None
            }
        };
        self.handle_events(&events);
        if failed_out {
            if let Some(s) = self.sock.lock().as_ref() {
                s.shutdown();
            }
            // The stream ended with our Terminate.
            self.end_cm();
        }
        let Some((buf, mut off)) = taken else {
            if self.fin_pending.swap(false, Ordering::AcqRel) {
                // Everything the engine produced has left: FIN.
                if let Some(s) = self.sock.lock().as_ref() {
                    s.shutdown();
                }
            }
            return TxRound::Done;
        };

        self.tx_blocked.store(true, Ordering::Release);
        let sent = match self.sock.lock().as_ref() {
            Some(s) => s.send(&[&buf[off..]], false),
            None => Err(ENOTCONN),
        };
        let lost = match sent {
            Ok(n) => {
                off += n;
                false
            }
            Err(e) => e != EAGAIN,
        };
        let blocked = off < buf.len();
        self.tx_blocked.store(blocked, Ordering::Release);
        {
            let mut st = self.stream.lock();
            st.tx = buf;
            st.tx_off = off;
        }
        if lost {
            self.with_engine(|e, h| e.on_connection_lost(h));
            TxRound::Done
        } else if blocked {
            TxRound::Done // write_space kicks us again
        } else {
            TxRound::More
        }
    }
}

impl ZcOwner for Qp {
    /// TCP is done with the pages of batch `token` (any context): deliver
    /// the completions that waited for them.
    fn released(this: &Arc<Self>, token: u64, copied: bool) {
        if token == 0 {
            return; // a spare notification, never sent
        }
        let counters = this.links.device().counters();
        counters.add(HwCounter::TxZcopyBatches, 1);
        if copied {
            counters.add(HwCounter::TxZcopyCopied, 1);
        }
        let stalled = {
            let mut st = this.stream.lock();
            // Checked under the lock `detach` sets it under: once `detach`
            // returns, no completion reaches the (then freed) CQ.
            if !this.zc_detached.load(Ordering::Acquire) {
                let qp = &**this;
                st.host.order.released(token, |wc| {
                    let _ = qp.links.send_cq().push(wc);
                });
            }
            this.zc_stalled.swap(false, Ordering::AcqRel)
        };
        this.zc_live.fetch_sub(1, Ordering::AcqRel);
        if stalled && !this.zc_detached.load(Ordering::Acquire) {
            this.kick();
        }
    }
}

impl Qp {
    /// A zero-copy TX round: plan the next octets from the engine (payload
    /// by page reference, literal octets into the literal page), send the
    /// batch by page reference (`MSG_ZEROCOPY` with the batch's
    /// notification, `MSG_SPLICE_PAGES` for literal octets only), keep
    /// what the socket did not take
    /// for the next round, then deliver the send completions the peer's
    /// acknowledgements allow.
    fn tx_round_zc(self: &Arc<Self>, zc: &mut ZeroCopyTx) -> TxRound {
        let mut events = Events::default();
        let mut failed_out = false;
        let mut broken = false;
        if zc.batch.remaining() == 0 {
            if zc.lit.ensure(ZC_LITERAL_MIN).is_err() {
                // No page for the headers now: copy this round.
                return self.tx_round_copy();
            }
            if zc.notif.is_none() {
                match self.links.qp_arc().map(Notif::new) {
                    Some(Ok(n)) => zc.notif = Some(n),
                    _ => return self.tx_round_copy(),
                }
            }
        }
        let have = {
            let mut st = self.stream.lock();
            let st = &mut *st;
            if st.dead {
                zc.batch.clear();
                false
            } else if zc.batch.remaining() > 0 {
                true
            } else if !st.host.order.can_plan() {
                // Too many batches TCP has not released: a release kicks.
                self.zc_stalled.store(true, Ordering::Release);
                false
            } else if let Some(engine) = st.engine.as_deref_mut() {
                let ZeroCopyTx { lit, refs, pieces, .. } = &mut *zc;
                let (n, np) = {
                    let mut plan = TxPlan::new(lit.free_mut(), pieces, TX_BUF);
                    let mut host = QpHost { qp: self, st: &mut st.host, events: &mut events, zc: Some(refs) };
                    let n = engine.tx_plan(&mut host, &KernelCrc32c, &mut plan);
                    (n, plan.pieces().len())
                };
                if zc.refs.is_empty() {
                    st.host.order.no_batch();
                } else if let Some(mut notif) = zc.notif.take() {
                    notif.set_token(st.host.order.new_batch());
                    self.zc_live.fetch_add(1, Ordering::AcqRel);
                    zc.batch.set_notif(notif);
                }
                for i in 0..np {
                    let ok = match zc.pieces[i] {
                        Piece::Literal(l) => {
                            zc.literal_octets += l as u64;
                            zc.lit.take(l).is_some_and(|seg| zc.batch.segments().push(seg).is_ok())
                        }
                        Piece::Host(l) => {
                            zc.ref_octets += l as u64;
                            self.links.device().counters().add(HwCounter::TxZcopyOctets, l as u64);
                            zc.refs.move_front(l, zc.batch.segments())
                        }
                    };
                    broken |= !ok;
                }
                broken |= !zc.refs.is_empty();
                zc.refs.clear();
                if n == 0 && engine.state() == EngineState::Error {
                    let mut host = QpHost { qp: self, st: &mut st.host, events: &mut events, zc: None };
                    engine.flush(&mut host);
                    st.dead = true;
                    failed_out = true;
                }
                n > 0
            } else {
                false
            }
        };
        self.zc_deferred.store(self.stream.lock().host.order.deferred(), Ordering::Relaxed);
        self.handle_events(&events);
        if failed_out {
            self.drain_order();
            if let Some(s) = self.sock.lock().as_ref() {
                s.shutdown();
            }
            self.end_cm();
        }
        if broken {
            // Cannot happen (the plan and the pages are built together):
            // the stream would be corrupt, so it ends here.
            if crate::ffi::cm::ratelimited() {
                pr_err!("qp {}: zero-copy round out of step, closing\n", self.qpn);
            }
            zc.batch.clear();
            self.with_engine(|e, h| e.on_connection_lost(h));
            return TxRound::Done;
        }
        if !have {
            if self.fin_pending.swap(false, Ordering::AcqRel) {
                if let Some(s) = self.sock.lock().as_ref() {
                    s.shutdown();
                }
            }
            return TxRound::Done;
        }
        self.tx_blocked.store(true, Ordering::Release);
        let sent = match self.sock.lock().as_ref() {
            Some(s) => s.send_pages(&mut zc.batch),
            None => Err(ENOTCONN),
        };
        let lost = matches!(sent, Err(e) if e != EAGAIN);
        let blocked = zc.batch.remaining() > 0;
        self.tx_blocked.store(blocked, Ordering::Release);
        if lost {
            zc.batch.clear();
            self.with_engine(|e, h| e.on_connection_lost(h));
            TxRound::Done
        } else if blocked {
            TxRound::Done // write_space kicks us again
        } else {
            TxRound::More
        }
    }
}

enum TxRound {
    More,
    Done,
}

impl CmQp for Qp {
    /// The CM's hand-off after MPA: the stream goes to the engine; the
    /// active side's CONNECT_REPLY and a passive side without RTR are
    /// established at once, a passive side with an RTR when it arrives.
    fn attach(&self, stream: CmStream, cm: CmEventSink) -> Result {
        let this = self.links.qp_arc().ok_or(EINVAL)?;
        let p = stream.params;
        let params = StreamParams {
            framing: p.framing,
            ird: p.ird,
            ord: p.ord,
            rtr: p.rtr,
            initiator: p.initiator,
            emss: stream.sock.mss().clamp(536, 65495) as usize,
        };
        if crate::ffi::cm::ratelimited() {
            pr_info!(
                "qp {} connected as {}: CRC {}, markers tx {} rx {}, IRD {} ORD {}, RTR {:?}\n",
                self.qpn,
                if p.initiator { "initiator" } else { "responder" },
                if p.framing.crc { "on" } else { "off" },
                p.framing.markers_tx,
                p.framing.markers_rx,
                p.ird,
                p.ord,
                p.rtr
            );
        }
        let waits_for_rtr = !p.initiator && matches!(p.rtr, Some(RtrMode::Zero(_)));
        *this.cm.lock() = Some(cm.clone());
        if let Err(e) = this.attach(stream.sock, params, &stream.leftover) {
            *this.cm.lock() = None; // on error the QP keeps neither
            return Err(e);
        }
        if !waits_for_rtr {
            cm.established();
        }
        Ok(())
    }

    fn qpn(&self) -> u32 {
        self.qpn
    }
}

impl WorkItem for Qp {
    type Pointer = Arc<Qp>;

    fn run(this: Arc<Qp>) {
        this.run_tx();
    }
}

impl SocketEvents for Qp {
    fn data_ready(&self, rx: &SockRx<'_>) {
        self.rx_queued(rx);
    }

    fn write_space(&self) {
        // Only a TX work that could not send everything needs the room.
        if self.tx_blocked.load(Ordering::Acquire) {
            self.after_callback(&Events::default(), true);
        }
    }

    fn state_change(&self, rx: &SockRx<'_>) {
        let state = rx.state();
        if state.is_closing() {
            // What arrived before the FIN or reset comes first: TCP reports
            // a FIN merged into the last segment (a Terminate followed by
            // the peer's close) before that segment's `data_ready`.
            self.rx_queued(rx);
            // FIN received (a reset leaves the socket in Close).
            if matches!(state, TcpState::CloseWait | TcpState::Closing | TcpState::LastAck | TcpState::TimeWait) {
                self.quiet_end.store(true, Ordering::Release);
            }
            let mut events = Events::default();
            let mut was_done = false;
            {
                let mut st = self.stream.lock();
                let st = &mut *st;
                if let Some(engine) = st.engine.as_deref_mut() {
                    let mut host = QpHost { qp: self, st: &mut st.host, events: &mut events, zc: None };
                    if engine.is_done() {
                        was_done = true;
                    } else {
                        engine.on_connection_lost(&mut host);
                    }
                }
            }
            self.after_callback(&events, false);
            if was_done {
                // The stream had already ended (a Terminate either way):
                // the peer's FIN or reset closes it for the iw_cm.
                self.end_cm();
            }
        }
    }
}

impl Qp {
    /// Hands the socket's queued data to the engine (inside a socket
    /// callback, where `self` is the `Arc<Qp>` the hook holds; the engine
    /// needs an Arc to schedule TX, so go through the stream lock).
    fn rx_queued(&self, rx: &SockRx<'_>) {
        let mut events = Events::default();
        let mut wants_tx = false;
        rx.read(&mut |chunk| {
            let mut st = self.stream.lock();
            let st = &mut *st;
            let Some(engine) = st.engine.as_deref_mut() else { return chunk.len() };
            let mut host = QpHost { qp: self, st: &mut st.host, events: &mut events, zc: None };
            let n = engine.rx(&mut host, &KernelCrc32c, chunk);
            wants_tx |= engine.wants_tx();
            n
        });
        self.after_callback(&events, wants_tx);
    }

    /// Event handling and TX scheduling from a socket callback, where only
    /// `&Qp` is at hand: the hook's `Arc` keeps the QP alive, so take a new
    /// reference from the links for the work item.
    fn after_callback(&self, events: &Events, wants_tx: bool) {
        if let Some(this) = self.links.qp_arc() {
            this.handle_events(events);
            if wants_tx {
                this.kick();
            }
        }
    }
}

/// Engine events collected during one engine call.
#[derive(Default)]
struct Events {
    list: [Option<Event>; 8],
    n: usize,
}

impl Events {
    fn push(&mut self, e: Event) {
        if let Some(slot) = self.list.get_mut(self.n) {
            *slot = Some(e);
            self.n += 1;
        }
    }

    fn iter(&self) -> impl Iterator<Item = &Event> {
        self.list.iter().flatten()
    }
}

/// The engine's view of the kernel: queues, CQs and registered memory.
struct QpHost<'a> {
    qp: &'a Qp,
    st: &'a mut HostState,
    events: &'a mut Events,
    /// Zero-copy TX round being filled: the pages referenced so far.
    zc: Option<&'a mut Segments>,
}

/// A local memory problem ends the stream with a local catastrophic error.
fn local_err(_: mrmod::MrError) -> TermError {
    term::rdmap::LOCAL_CATA
}

/// A send WR's own SGE fails its checks (lkey, PD, rights, bounds): the WR
/// completes with `IB_WC_LOC_PROT_ERR`, as on siw and rxe (a protection
/// error on the send queue, see `wc_status`; nothing goes to the peer).
fn local_source_err(_: mrmod::MrError) -> TermError {
    term::rdmap::PROT_UNSPECIFIED
}

impl QpHost<'_> {
    fn stags(&self) -> &crate::mr::StagTable {
        self.qp.links.device().stags()
    }

    /// Copies between `sges` (starting `offset` bytes in) and `buf`.
    fn scatter_gather(
        &self,
        sges: &[Sge],
        mut offset: u64,
        buf: &mut [u8],
        to_sges: Option<&[u8]>,
    ) -> Result<(), TermError> {
        let mut done = 0usize;
        let want = to_sges.map_or(buf.len(), |d| d.len());
        for sge in sges {
            if done == want {
                break;
            }
            let len = u64::from(sge.len);
            if offset >= len {
                offset -= len;
                continue;
            }
            let n = ((len - offset) as usize).min(want - done);
            let addr = sge.addr.checked_add(offset).ok_or(term::rdmap::LOCAL_CATA)?;
            match to_sges {
                Some(data) => {
                    self.stags()
                        .check(sge.lkey, self.qp.pd, addr, n as u64, crate::ffi::mr::access::LOCAL_WRITE)
                        .map_err(local_err)?
                        .copy_to(sge.lkey, addr, &data[done..done + n])
                        .map_err(local_err)?;
                }
                None => {
                    self.stags()
                        .check(sge.lkey, self.qp.pd, addr, n as u64, 0)
                        .map_err(local_err)?
                        .copy_from(sge.lkey, addr, &mut buf[done..done + n])
                        .map_err(local_err)?;
                }
            }
            done += n;
            offset = 0;
        }
        if done == want {
            Ok(())
        } else {
            Err(term::rdmap::LOCAL_CATA)
        }
    }

    fn claim(&mut self) -> Option<Rqe> {
        if self.st.claimed.is_none() {
            self.st.claimed = match self.qp.links.srq() {
                Some(srq) => srq.pop(),
                None => Option::as_mut(&mut *self.qp.rq.lock()).and_then(|rq| rq.pop()),
            };
        }
        self.st.claimed
    }
}

impl crate::ddp::StagTable for QpHost<'_> {
    fn lookup(&self, stag: u32) -> Option<Region> {
        self.stags().lookup(stag)
    }
}

impl Host for QpHost<'_> {
    fn sq_next(&mut self) -> Option<SendWr> {
        loop {
            let sqe = self.qp.sq.lock().pop()?;
            match sqe.kind {
                SqeKind::Wire(mut wr) => {
                    let mut handle = self.st.next_handle & !MASKED_HANDLE;
                    self.st.next_handle = handle.wrapping_add(1);
                    if sqe.masked {
                        handle |= MASKED_HANDLE;
                    }
                    wr.local.handle = handle;
                    if self.qp.sig_all {
                        wr.flags = wr.flags.with(crate::engine::qp::Flags::SIGNALED);
                    }
                    self.st.cur.handle = handle;
                    self.st.cur.sqe = Some(sqe);
                    if let Some(stag) = sqe.inv_local {
                        self.st.cur.read_invs.add(sqe.wr_id, stag);
                    }
                    return Some(wr);
                }
                SqeKind::RegMr { stag, req } => {
                    let res = self.stags().get(stag).map(|mr| mr.fast_register(self.qp.pd, &req));
                    self.local_done(&sqe, WcOpcode::RegMr, matches!(res, Some(Ok(()))));
                }
                SqeKind::LocalInv { stag } => {
                    let res = self.stags().invalidate(stag, self.qp.pd);
                    self.local_done(&sqe, WcOpcode::LocalInv, res.is_ok());
                }
            }
        }
    }

    fn rq_peek(&self) -> Option<RecvWr> {
        // Peeking claims (an SRQ is shared: the WQE must be ours from the
        // first segment on); `rq_peek` takes `&self`, so claim lazily via
        // the queues' own state.
        if let Some(r) = self.st.claimed {
            return Some(RecvWr { wr_id: r.wr_id, len: r.len() });
        }
        let head = match self.qp.links.srq() {
            Some(srq) => srq.peek().map(|r| (r.wr_id, r.len())),
            None => self.qp.rq.lock().as_ref().and_then(|rq| rq.peek().map(|r| (r.wr_id, r.len()))),
        };
        head.map(|(wr_id, len)| RecvWr { wr_id, len })
    }

    fn rq_pop(&mut self) -> Option<RecvWr> {
        let r = self.claim()?;
        self.st.claimed = None;
        Some(RecvWr { wr_id: r.wr_id, len: r.len() })
    }

    fn complete(&mut self, c: EngineCompletion) {
        let mut c = c;
        if c.queue == WorkQueue::Send && c.opcode == CompOp::Read {
            if let Some(stag) = self.st.cur.read_invs.take(c.wr_id) {
                // The data is placed: now the sink may go (READ_WITH_INV).
                if c.status == Status::Success && self.stags().invalidate(stag, self.qp.pd).is_err() {
                    c.status = Status::LocalError(term::rdmap::LOCAL_CATA);
                }
            }
        }
        let (cq, opcode) = match c.queue {
            WorkQueue::Send => {
                let placed = match c.opcode {
                    CompOp::FetchAdd | CompOp::CmpSwap | CompOp::AtomicOther => self.st.atomic_done.take(),
                    _ => None,
                };
                // A flushed atomic had no result: the opcode of an error
                // completion is best effort (the verbs leave it undefined).
                let masked = match placed {
                    Some(m) if c.status != Status::Flushed => m,
                    _ => self.st.cur.sqe.is_some_and(|s| s.masked && c.wr_id == s.wr_id),
                };
                (self.qp.links.send_cq(), send_opcode(c.opcode, masked))
            }
            WorkQueue::Recv => match self.qp.links.recv_cq() {
                Some(cq) => (cq, recv_opcode(c.opcode)),
                None => return,
            },
        };
        let mut wc = self.qp.wc(c.wr_id, opcode, wc_status(c.status, c.queue), c.byte_len);
        wc.imm = c.imm.map(|b| u32::from_be_bytes([b[0], b[1], b[2], b[3]]));
        wc.invalidated = c.invalidated;
        wc.solicited = c.solicited;
        if let Status::CommitFailed(s) = c.status {
            wc.vendor_err = s.to_u32(); // the draft's status, for the consumer
        }
        if c.queue == WorkQueue::Send {
            self.send_wc(wc);
        } else {
            let _ = cq.push(wc); // a full CQ raises IB_EVENT_CQ_ERR itself
        }
    }

    fn event(&mut self, e: Event) {
        self.events.push(e);
    }

    fn payload_by_ref<C: Crc32c + ?Sized>(
        &mut self,
        src: &PayloadRef,
        len: usize,
        _crc: &C, // the pages' CRC is the kernel's crc32c, as `KernelCrc32c`
        state: Option<u32>,
    ) -> Option<Result<Option<u32>, TermError>> {
        match *src {
            PayloadRef::Local { local, offset } => self.ref_local(&local, offset, len, state),
            PayloadRef::Tagged { stag, to } => {
                let stags = self.qp.links.device().stags();
                let refs = self.zc.as_deref_mut()?;
                let Some(mr) = stags.get(stag) else {
                    return Some(Err(term::rdmap::LOCAL_CATA));
                };
                match mr.ref_pages(stag, to, len, refs, state) {
                    Ok(Some(c)) => Some(Ok(c)),
                    Ok(None) => None,
                    Err(e) => Some(Err(local_err(e))),
                }
            }
        }
    }

    fn read_source(&mut self, wr: &Local, offset: u32, dst: &mut [u8]) -> Result<(), TermError> {
        let sqe = match self.st.cur.sqe {
            Some(s) if self.st.cur.handle == wr.handle => s,
            _ => return Err(term::rdmap::LOCAL_CATA),
        };
        if sqe.inline_len > 0 {
            let start = offset as usize;
            let src = sqe.inline.get(start..start + dst.len()).ok_or(term::rdmap::LOCAL_CATA)?;
            dst.copy_from_slice(src);
            return Ok(());
        }
        // Its errors are the SGEs' own (MR checks).
        self.scatter_gather(sqe.sges(), u64::from(offset), dst, None)
            .map_err(|_| term::rdmap::PROT_UNSPECIFIED)
    }

    fn check_source(&mut self, wr: &Local, len: u32) -> Result<(), TermError> {
        let sqe = match self.st.cur.sqe {
            Some(s) if self.st.cur.handle == wr.handle => s,
            _ => return Err(term::rdmap::LOCAL_CATA),
        };
        if sqe.inline_len > 0 {
            return Ok(()); // copied at post time
        }
        let mut left = u64::from(len);
        for sge in sqe.sges() {
            if left == 0 {
                break;
            }
            let n = u64::from(sge.len).min(left);
            self.stags().check(sge.lkey, self.qp.pd, sge.addr, n, 0).map_err(local_source_err)?;
            left -= n;
        }
        if left == 0 {
            Ok(())
        } else {
            Err(term::rdmap::PROT_UNSPECIFIED)
        }
    }

    fn read_tagged(&mut self, stag: u32, to: u64, dst: &mut [u8]) -> Result<(), TermError> {
        self.stags().copy_from_mr(stag, to, dst).map_err(local_err)
    }

    fn place_tagged(&mut self, stag: u32, to: u64, data: &[u8]) -> Result<(), TermError> {
        self.stags().copy_to_mr(stag, to, data).map_err(local_err)
    }

    fn place_recv(&mut self, _wr: &RecvWr, offset: u32, data: &[u8]) -> Result<(), TermError> {
        let rqe = self.claim().ok_or(term::ddp::U_NO_BUFFER)?;
        self.scatter_gather(rqe.sges(), u64::from(offset), &mut [], Some(data))
    }

    fn atomic(&mut self, plan: &AtomicPlan) -> Result<u64, TermError> {
        crate::atomic::respond(self.qp.links.device(), self.qp.pd, plan)
    }

    fn write_atomic_result(&mut self, wr: &Local, original: u64) -> Result<(), TermError> {
        // The engine completes this atomic right after (if signaled).
        self.st.atomic_done = Some(wr.handle & MASKED_HANDLE != 0);
        crate::atomic::place_result(self.qp.links.device(), self.qp.pd, wr, original)
    }

    fn make_durable(&mut self, region: &commitw::Region) -> bool {
        crate::flush::commit_region(self.stags(), region)
    }

    fn invalidate(&mut self, stag: u32) -> Result<(), TermError> {
        self.stags().invalidate(stag, self.qp.pd).map_err(|_| term::rdmap::CANT_INVALIDATE)
    }
}

impl QpHost<'_> {
    fn local_done(&mut self, sqe: &Sqe, op: WcOpcode, ok: bool) {
        if ok && !(sqe.signaled || self.qp.sig_all) {
            return;
        }
        let status = if ok { WcStatus::Success } else { WcStatus::LocProtErr };
        self.send_wc(self.qp.wc(sqe.wr_id, op, status, 0));
    }

    /// A send-queue completion: delivered now, or after the peer has
    /// acknowledged payload sent by reference before it (`send_order`).
    fn send_wc(&mut self, wc: Wc) {
        let round_refs = self.zc.as_ref().is_some_and(|r| !r.is_empty());
        if let Some(wc) = self.st.order.route(wc, round_refs) {
            let _ = self.qp.links.send_cq().push(wc); // a full CQ raises IB_EVENT_CQ_ERR itself
        }
    }

    /// Zero-copy TX of a send WR's local data: its SGEs' pages.
    fn ref_local(
        &mut self,
        local: &Local,
        offset: u32,
        len: usize,
        crc: Option<u32>,
    ) -> Option<Result<Option<u32>, TermError>> {
        let qp = self.qp;
        let sqe = match self.st.cur.sqe {
            Some(s) if self.st.cur.handle == local.handle => s,
            _ => return Some(Err(term::rdmap::LOCAL_CATA)),
        };
        if sqe.inline_len > 0 {
            return None; // inline data lives in the SQE: copied
        }
        let refs = self.zc.as_deref_mut()?;
        let stags = qp.links.device().stags();
        let mark = refs.len();
        let (mut crc, mut offset, mut done) = (crc, u64::from(offset), 0usize);
        let res = (|| {
            for sge in sqe.sges() {
                if done == len {
                    break;
                }
                let sl = u64::from(sge.len);
                if offset >= sl {
                    offset -= sl;
                    continue;
                }
                let n = ((sl - offset) as usize).min(len - done);
                let addr = sge.addr.checked_add(offset).ok_or(term::rdmap::LOCAL_CATA)?;
                let mr = stags.check(sge.lkey, qp.pd, addr, n as u64, 0).map_err(local_source_err)?;
                match mr.ref_pages(sge.lkey, addr, n, refs, crc).map_err(local_source_err)? {
                    Some(c) => crc = c,
                    None => return Ok(None),
                }
                done += n;
                offset = 0;
            }
            if done == len { Ok(Some(crc)) } else { Err(term::rdmap::LOCAL_CATA) }
        })();
        match res {
            Ok(Some(c)) => Some(Ok(c)),
            Ok(None) => {
                refs.truncate(mark);
                None
            }
            Err(e) => {
                refs.truncate(mark);
                Some(Err(e))
            }
        }
    }
}

fn wire_opcode(wr: &SendWr, masked: bool) -> WcOpcode {
    use crate::engine::qp::SendOp::*;
    match wr.op {
        Send { .. } | Immediate { .. } => WcOpcode::Send,
        Write { .. } | WriteImm { .. } => WcOpcode::RdmaWrite,
        Read { .. } => WcOpcode::RdmaRead,
        Atomic { op: crate::engine::wire::atomic::AtomicOp::CmpSwap, .. } => {
            if masked { WcOpcode::MaskedCompSwap } else { WcOpcode::CompSwap }
        }
        Atomic { .. } => {
            if masked { WcOpcode::MaskedFetchAdd } else { WcOpcode::FetchAdd }
        }
        Commit { .. } => WcOpcode::Flush,
    }
}

fn send_opcode(op: CompOp, masked: bool) -> WcOpcode {
    match op {
        CompOp::Send | CompOp::Immediate => WcOpcode::Send,
        CompOp::Write | CompOp::WriteImm => WcOpcode::RdmaWrite,
        CompOp::Read => WcOpcode::RdmaRead,
        CompOp::FetchAdd | CompOp::AtomicOther => {
            if masked { WcOpcode::MaskedFetchAdd } else { WcOpcode::FetchAdd }
        }
        CompOp::CmpSwap => {
            if masked { WcOpcode::MaskedCompSwap } else { WcOpcode::CompSwap }
        }
        CompOp::Commit => WcOpcode::Flush,
        CompOp::Recv | CompOp::RecvImm => WcOpcode::Send,
    }
}

fn recv_opcode(op: CompOp) -> WcOpcode {
    match op {
        CompOp::RecvImm => WcOpcode::RecvRdmaWithImm,
        _ => WcOpcode::Recv,
    }
}

fn wc_status(s: Status, q: WorkQueue) -> WcStatus {
    match s {
        Status::Success => WcStatus::Success,
        Status::Flushed => WcStatus::WrFlushErr,
        Status::LocalError(e) if e.layer == term::Layer::Rdmap && e.etype == 0x1 => {
            if q == WorkQueue::Send { WcStatus::LocProtErr } else { WcStatus::LocAccessErr }
        }
        Status::LocalError(_) => WcStatus::LocQpOpErr,
        Status::CommitFailed(s) => crate::flush::wc_status(s),
        Status::RemoteError(e) => remote_wc_status(e),
    }
}

/// The peer's Terminate, as the status of the request it ended: remote
/// protection errors (RDMAP 0x1, DDP tagged) are access errors, an opcode
/// or version the peer does not support (e.g. RFC 7306 to Linux siw) an
/// invalid request, anything else a remote operation error.
fn remote_wc_status(e: TermError) -> WcStatus {
    use term::{ddp, rdmap, Layer};
    let invalid_request = [rdmap::UNEXPECTED_OPCODE, rdmap::INVALID_VERSION, ddp::U_INVALID_QN, ddp::U_INVALID_VERSION];
    match (e.layer, e.etype) {
        (Layer::Rdmap, t) if t == rdmap::INVALID_STAG.etype => WcStatus::RemAccessErr,
        (Layer::Ddp, t) if t == ddp::T_INVALID_STAG.etype => WcStatus::RemAccessErr,
        _ if invalid_request.contains(&e) => WcStatus::RemInvReqErr,
        _ => WcStatus::RemOpErr,
    }
}

/// QP numbers to QPs, for the iw_cm's `iw_get_qp`.
///
/// Every Rust `XArray` shares one lockdep class (they are initialised at
/// one C call site), and the STag table's is taken from softirq under an
/// irq-safe lock: so this one is too, with atomic allocation, to keep the
/// class's usage consistent.
#[pin_data]
pub(crate) struct QpTable {
    #[pin]
    lock: SpinLockIrq<()>,
    #[pin]
    xa: kernel::xarray::XArray<Arc<Qp>>,
}

impl QpTable {
    pub(crate) fn new() -> impl PinInit<Self> {
        pin_init!(QpTable {
            lock <- new_spinlock_irq!((), "rsiw_qp_table"),
            xa <- kernel::xarray::XArray::new(kernel::xarray::AllocKind::Alloc),
        })
    }

    pub(crate) fn insert(&self, qpn: u32, qp: Arc<Qp>) -> Result {
        let _irq = self.lock.lock();
        let mut xa = self.xa.lock();
        if xa.get(qpn as usize).is_some() {
            return Err(EBUSY);
        }
        xa.store(qpn as usize, qp, GFP_ATOMIC).map_err(|_| ENOMEM)?;
        Ok(())
    }

    // The XArray guard is a named local declared after `_irq` so that it
    // drops first: a temporary in a block's tail expression would outlive
    // `_irq` (edition 2021), releasing the irq-safe lock, and re-enabling
    // interrupts, with the XArray lock still held (lockdep caught it).

    pub(crate) fn get(&self, qpn: u32) -> Option<Arc<Qp>> {
        let _irq = self.lock.lock();
        let xa = self.xa.lock();
        let qp = xa.get(qpn as usize).map(Arc::from);
        drop(xa);
        qp
    }

    pub(crate) fn remove(&self, qpn: u32) -> Option<Arc<Qp>> {
        let _irq = self.lock.lock();
        let mut xa = self.xa.lock();
        let removed = xa.remove(qpn as usize);
        drop(xa);
        drop(_irq);
        // The last reference may go here: outside the locks.
        removed
    }
}

// The device reports these limits; a peer must never be promised more
// reads than the engine's queues hold.
const _: () = assert!(MAX_ORD == crate::device::DEFAULT_LIMITS.max_ord as usize);
const _: () = assert!(MAX_IRD == crate::device::DEFAULT_LIMITS.max_ird as usize);
