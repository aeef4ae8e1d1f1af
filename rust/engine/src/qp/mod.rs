// SPDX-License-Identifier: GPL-2.0
//! The per-stream QP protocol state machine: MPA negotiation, RFC 6581
//! RTR, RDMAP/DDP transmit and receive, Terminate and flush.
//!
//! Sans-IO and allocation-free. One [`Qp`] drives one TCP stream. The
//! caller owns everything else and lends it through the [`Host`] trait on
//! every call: the send and receive queues (the engine pulls the next work
//! request), the completion queue (the engine pushes completions), the
//! STag table and memory (the engine asks the host to read source data,
//! place payload, run an atomic, make a region durable, invalidate an
//! STag; it never touches memory itself), and event delivery.
//!
//! # Driving it
//!
//! ```text
//! qp = Qp::new(QpConfig { pd, emss });
//! qp.connect(&initiator_cfg) / qp.listen(&responder_cfg);
//! loop {
//!     // TX (work item, may sleep around it, not inside the Host calls):
//!     let n = qp.tx(&mut host, &crc, &mut buf);  // bytes to send, in order
//!     send(&buf[..n]);                           // all of them, eventually
//!     // RX (tcp_read_sock actor, softirq: Host calls must not sleep):
//!     qp.rx(&mut host, &crc, chunk);             // consumes all of `chunk`
//!     // events arrive through Host::event; e.g. on ConnectRequest the
//!     // responder calls qp.accept(private_data) or qp.reject(..).
//!     if qp.wants_tx() { schedule TX }
//! }
//! qp.on_connection_lost(&mut host);              // TCP reset / FIN
//! ```
//!
//! Every byte [`Qp::tx`] returns is committed: the stream offset, markers
//! and CRC already account for it, so the caller must send all of them in
//! order (partial sends: keep the rest and send it first next time). A
//! buffer of any size works, down to one octet: the engine stops inside an
//! FPDU and resumes there. Payload is copied once, by
//! [`Host::read_source`] / [`Host::read_tagged`], from registered memory
//! straight into the output buffer.
//!
//! [`Qp::rx`] takes the TCP byte stream in chunks of any size. Payload is
//! never buffered: [`Host::place_tagged`] / [`Host::place_recv`] get
//! sub-slices of the chunk (in the kernel, of the skb). Requests (Read,
//! Atomic, Commit), invalidations, Terminates and completions are acted on
//! only once the FPDU's CRC has been checked.
//!
//! # Rules implemented
//!
//! * Send queue order: work requests are started in posting order; their
//!   completions are delivered in posting order even when a later Send
//!   finishes before an earlier Read's response arrives (up to [`HOLD`]
//!   completions are held; the SQ stalls beyond that).
//! * ORD: a Read, Atomic or Commit waits while ORD requests are
//!   outstanding (RFC 5040 6.4, RFC 7306 5.2, commit draft 4.2.1). Fence:
//!   waits until every earlier Read/Atomic/Commit has completed.
//! * IRD: inbound requests beyond IRD are DDP "no buffer"; responses leave
//!   in request order, before further send-queue messages. Messages are
//!   never interleaved on the wire (Linux siw cannot reassemble that).
//! * Write with Immediate = RDMA Write then Immediate Data (RFC 7306 6):
//!   the immediate completes at the target after the data is placed.
//! * Any protocol error: a Terminate (RFC 5040 7, RFC 7306 8.1) with
//!   copied headers is sent after the FPDU in flight, then every
//!   outstanding work request, queued request and posted receive is
//!   completed with [`Status::Flushed`]. A received Terminate is reported
//!   ([`Event::TerminateReceived`]) and flushes the same way.
//! * Client-server (RFC 5044 7.1): a responder sends no FPDU before the
//!   initiator's first one. Peer-to-peer (RFC 6581): the initiator's first
//!   FPDU is the negotiated zero-length Send, Write or Read; the responder
//!   expects exactly that (anything else: LLP error 7) and hides it from
//!   the ULP.
//!
//! See `Documentation/engine-qp.md` for the design discussion.

mod plan;
mod rx;
mod tx;

#[cfg(test)]
mod tests;

use crate::crc::Crc32c;
use crate::ddp::{StagTable, UntaggedRx};
use crate::error::TermError;
use crate::mpa::negotiate::{Framing, InitiatorConfig, ResponderConfig, RtrMode};
use crate::mpa::rx::{Rx, MAX_HEADER};
use crate::mpa::startup::{self, Initiator, Responder, StreamParams};
use crate::mpa::tx::Tx;
use crate::rdmap::{AtomicPlan, Irq, Orq, RequestQueue};
use crate::wire::atomic::AtomicOp;
use crate::wire::commit::{self as commitw, Status as CommitStatus};
use crate::wire::mpa::Rtr;
use crate::wire::terminate;

pub use plan::{PayloadRef, Piece, TxPlan};
pub use tx::FpduEncoder;

/// Completions held back to keep send-queue completion order.
pub const HOLD: usize = 32;

/// Largest MPA Request/Reply frame.
pub const MAX_MPA_FRAME: usize = startup::MAX_FRAME;

/// Work request flags.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Flags(u8);

impl Flags {
    /// No flags.
    pub const NONE: Flags = Flags(0);
    /// Generate a completion on success (errors always complete).
    pub const SIGNALED: Flags = Flags(1);
    /// Ask for a solicited event (Send and Immediate Data variants).
    pub const SOLICITED: Flags = Flags(2);
    /// Do not start before every earlier Read/Atomic/Commit completed.
    pub const FENCE: Flags = Flags(4);
    /// Data is inline (the host's `read_source` serves it; no meaning to
    /// the engine beyond being passed through).
    pub const INLINE: Flags = Flags(8);

    /// Whether all flags of `f` are set.
    pub const fn contains(self, f: Flags) -> bool {
        self.0 & f.0 == f.0
    }

    /// Union.
    #[must_use]
    pub const fn with(self, f: Flags) -> Flags {
        Flags(self.0 | f.0)
    }
}

/// Local data of a work request: the host interprets it in
/// [`Host::read_source`] (e.g. an SGE list it keeps under `handle`). For an
/// RDMA Read, `stag`/`to` are the Data Sink advertised to the peer.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Local {
    /// Local STag (lkey) of the first SGE / the Read sink.
    pub stag: u32,
    /// Tagged offset (address) of the first octet.
    pub to: u64,
    /// Opaque host handle.
    pub handle: u64,
}

/// A remote buffer.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Remote {
    /// Remote STag.
    pub stag: u32,
    /// Remote tagged offset.
    pub to: u64,
}

/// What a send work request does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SendOp {
    /// Send (with SE if [`Flags::SOLICITED`]; with Invalidate if `Some`).
    Send {
        /// STag the peer must invalidate.
        invalidate: Option<u32>,
    },
    /// RDMA Write of `len` octets to `remote`.
    Write {
        /// Data sink.
        remote: Remote,
    },
    /// RDMA Read of `len` octets from `remote` into `local.stag/to`.
    Read {
        /// Data source.
        remote: Remote,
    },
    /// RFC 7306 atomic on the 8 octets at `remote`; the original value goes
    /// to [`Host::write_atomic_result`].
    Atomic {
        /// FetchAdd, CmpSwap (or an unsupported code, to probe the peer).
        op: AtomicOp,
        /// Target.
        remote: Remote,
        /// Add data or swap data.
        add_swap: u64,
        /// Add mask (field boundaries) or swap mask.
        add_swap_mask: u64,
        /// Compare data (CmpSwap).
        compare: u64,
        /// Compare mask (CmpSwap; all ones for a plain compare).
        compare_mask: u64,
    },
    /// RFC 7306 Immediate Data (SE if [`Flags::SOLICITED`]).
    Immediate {
        /// The 8 octets.
        data: [u8; 8],
    },
    /// RDMA Write followed by Immediate Data (RFC 7306 section 6).
    WriteImm {
        /// Data sink.
        remote: Remote,
        /// The immediate data.
        data: [u8; 8],
    },
    /// RDMA Commit of the regions (request id is assigned by the engine).
    Commit {
        /// The regions.
        request: commitw::RequestRepr,
    },
}

/// A send queue entry as the host hands it over.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SendWr {
    /// ULP cookie, returned in the completion.
    pub wr_id: u64,
    /// Flags.
    pub flags: Flags,
    /// The operation.
    pub op: SendOp,
    /// Local data length (Send, Write, Read size); ignored otherwise.
    pub len: u32,
    /// Local data.
    pub local: Local,
}

/// A receive queue entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct RecvWr {
    /// ULP cookie.
    pub wr_id: u64,
    /// Buffer length.
    pub len: u32,
}

/// Which queue a completion belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum WorkQueue {
    /// Send queue.
    Send,
    /// Receive queue.
    Recv,
}

/// Completion opcode.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CompOp {
    /// Send (any variant).
    Send,
    /// RDMA Write.
    Write,
    /// RDMA Read.
    Read,
    /// Atomic FetchAdd.
    FetchAdd,
    /// Atomic CmpSwap.
    CmpSwap,
    /// Atomic with another AOpCode.
    AtomicOther,
    /// Immediate Data sent.
    Immediate,
    /// Write with Immediate sent.
    WriteImm,
    /// RDMA Commit.
    Commit,
    /// A Send arrived.
    Recv,
    /// Immediate Data arrived.
    RecvImm,
}

/// Completion status.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Status {
    /// Done.
    Success,
    /// Flushed: the stream failed before the request could finish.
    Flushed,
    /// A local error on this request (e.g. the host could not read its
    /// source data); the stream was terminated with this error.
    LocalError(TermError),
    /// The Commit Response carried this non-success status.
    CommitFailed(CommitStatus),
    /// The peer terminated the stream with this error while the request
    /// was the oldest outstanding one (the others are [`Status::Flushed`]).
    RemoteError(TermError),
}

/// One completion.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Completion {
    /// Queue.
    pub queue: WorkQueue,
    /// The work request's cookie.
    pub wr_id: u64,
    /// What completed.
    pub opcode: CompOp,
    /// Outcome.
    pub status: Status,
    /// Octets transferred (received Send: message length).
    pub byte_len: u32,
    /// Immediate data (received Immediate Data).
    pub imm: Option<[u8; 8]>,
    /// STag invalidated by a received Send with Invalidate.
    pub invalidated: Option<u32>,
    /// The received message asked for a solicited event.
    pub solicited: bool,
    /// Atomic original value (also given to `write_atomic_result`).
    pub atomic_original: Option<u64>,
}

impl Completion {
    fn new(queue: WorkQueue, wr_id: u64, opcode: CompOp, status: Status, byte_len: u32) -> Self {
        Completion {
            queue,
            wr_id,
            opcode,
            status,
            byte_len,
            imm: None,
            invalidated: None,
            solicited: false,
            atomic_original: None,
        }
    }
}

/// Connection and error events.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Event {
    /// Responder: a valid MPA Request arrived; call [`Qp::accept`] or
    /// [`Qp::reject`] ([`Qp::peer_private_data`] has its private data).
    ConnectRequest,
    /// MPA exchange done (initiator: Reply checked; responder: Reply
    /// queued). Sending work is possible now (subject to RTR rules).
    Established,
    /// The stream is in RTS: the RTR (if any) was sent or received.
    Ready,
    /// Initiator: the responder rejected the connection.
    Rejected,
    /// Negotiation failed with this error; the caller closes the socket.
    NegotiationFailed(TermError),
    /// The engine detected this protocol error and is sending a Terminate.
    LocalTerminate(TermError),
    /// The peer sent a Terminate.
    TerminateReceived(terminate::Repr),
    /// The TCP connection was lost.
    ConnectionLost,
    /// Graceful close finished: nothing outstanding; close the socket.
    Closed,
}

/// What the caller lends the engine on every call. Must not sleep (the RX
/// path runs in softirq context in the kernel).
pub trait Host: StagTable {
    /// Takes the next send work request off the send queue.
    fn sq_next(&mut self) -> Option<SendWr>;
    /// The receive queue's head, if any.
    fn rq_peek(&self) -> Option<RecvWr>;
    /// Removes the receive queue's head.
    fn rq_pop(&mut self) -> Option<RecvWr>;
    /// Delivers a completion (the host must not lose it: a full CQ is its
    /// own fatal error).
    fn complete(&mut self, c: Completion);
    /// Delivers an event.
    fn event(&mut self, e: Event);

    /// Copies `dst.len()` octets of `wr`'s local data, starting `offset`
    /// octets into it, into `dst`.
    fn read_source(&mut self, wr: &Local, offset: u32, dst: &mut [u8]) -> Result<(), TermError>;
    /// Validates the `len` octets of `wr`'s local data before the first of
    /// them goes out, so that a WR with a bad SGE fails whole. A message
    /// whose data cannot be read once it has started still goes out (the
    /// framing needs it) with zeros, and the stream terminates; the peer
    /// would take a Send of zeros for a good one.
    fn check_source(&mut self, wr: &Local, len: u32) -> Result<(), TermError> {
        let _ = (wr, len);
        Ok(())
    }
    /// Zero-copy transmit ([`Qp::tx_plan`]): the host may take `len`
    /// payload octets of `src` by reference (recording them, in stream
    /// order, for its send) instead of having them copied. It validates
    /// the source as `read_source`/`read_tagged` would and, when `crc` is
    /// `Some(state)`, returns the CRC32c state extended over the octets.
    /// `None`: declined (e.g. memory that cannot be sent by reference),
    /// the engine copies; `Some(Err)`: invalid, the engine copies and the
    /// copy reports the error.
    fn payload_by_ref<C: Crc32c + ?Sized>(
        &mut self,
        src: &PayloadRef,
        len: usize,
        crc: &C,
        state: Option<u32>,
    ) -> Option<Result<Option<u32>, TermError>> {
        let _ = (src, len, crc, state);
        None
    }
    /// Copies local registered memory at `stag`/`to` into `dst` (Read
    /// Response source; already validated against the STag table).
    fn read_tagged(&mut self, stag: u32, to: u64, dst: &mut [u8]) -> Result<(), TermError>;
    /// Places payload at `stag`/`to` (already validated).
    fn place_tagged(&mut self, stag: u32, to: u64, data: &[u8]) -> Result<(), TermError>;
    /// Places payload at `offset` into the receive buffer `wr` (the RQ head).
    fn place_recv(&mut self, wr: &RecvWr, offset: u32, data: &[u8]) -> Result<(), TermError>;
    /// Runs a validated atomic under the host's atomic lock (use
    /// [`crate::rdmap::atomic_execute`]) and returns the original value.
    fn atomic(&mut self, plan: &AtomicPlan) -> Result<u64, TermError>;
    /// Stores an atomic's original value into the requester's local buffer.
    fn write_atomic_result(&mut self, wr: &Local, original: u64) -> Result<(), TermError>;
    /// Makes a region durable (RDMA Commit); `false` on failure.
    fn make_durable(&mut self, region: &commitw::Region) -> bool;
    /// Invalidates a local STag (remote invalidation, already validated).
    fn invalidate(&mut self, stag: u32) -> Result<(), TermError>;
}

/// Static settings of a QP.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QpConfig {
    /// Protection domain the stream belongs to.
    pub pd: u32,
    /// Effective MSS: the FPDU size is derived from it (RFC 5044 MULPDU).
    pub emss: usize,
}

/// The in-band MPA startup ([`Qp::connect`], [`Qp::listen`]): the
/// [`startup`] machine of this end's role, kept for its transmit octets
/// and the peer's private data.
#[derive(Clone, Debug)]
pub(crate) enum Startup {
    /// Established directly ([`Qp::establish`]) or not started.
    None,
    Initiator(Initiator),
    Responder(Responder),
}

impl Startup {
    fn transmit(&self) -> &[u8] {
        match self {
            Startup::None => &[],
            Startup::Initiator(m) => m.transmit(),
            Startup::Responder(m) => m.transmit(),
        }
    }

    fn sent(&mut self, n: usize) {
        match self {
            Startup::None => {}
            Startup::Initiator(m) => m.sent(n),
            Startup::Responder(m) => m.sent(n),
        }
    }

    fn poll(&mut self) -> Option<startup::Event> {
        match self {
            Startup::None => None,
            Startup::Initiator(m) => m.poll(),
            Startup::Responder(m) => m.poll(),
        }
    }

    fn peer_private_data(&self) -> &[u8] {
        match self {
            Startup::None => &[],
            Startup::Initiator(m) => m.peer_private_data(),
            Startup::Responder(m) => m.peer_private_data(),
        }
    }
}

/// QP state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum State {
    /// Nothing started.
    Idle,
    /// Initiator: Request queued/sent, waiting for the Reply.
    AwaitReply,
    /// Responder: waiting for the Request.
    AwaitRequest,
    /// Responder: Request received, waiting for [`Qp::accept`].
    OfferPending,
    /// Responder: waiting for the initiator's RTR message.
    AwaitRtr(Rtr),
    /// Ready to send.
    Rts,
    /// Graceful close requested: draining.
    Closing,
    /// Terminate pending or being sent.
    Terminate,
    /// Failed; everything flushed.
    Error,
    /// Closed cleanly.
    Closed,
}

/// Send queue entry in progress.
#[derive(Clone, Copy, Debug)]
pub(crate) struct CurWqe {
    pub(crate) wr: SendWr,
    pub(crate) seq: u32,
    /// For WriteImm: the Write part is done, the Immediate is next.
    pub(crate) imm_phase: bool,
    /// At least one FPDU has been started.
    pub(crate) started: bool,
    /// Reading its data failed: complete with this error.
    pub(crate) error: Option<TermError>,
}

/// Send-side bookkeeping of an outstanding Read/Atomic/Commit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct OrqAux {
    pub(crate) seq: u32,
    pub(crate) wr_id: u64,
    pub(crate) local: Local,
    pub(crate) signaled: bool,
    pub(crate) opcode: CompOp,
    pub(crate) len: u32,
    /// Internal (RTR Read): no completion.
    pub(crate) internal: bool,
}

/// The result owed with an inbound request, parallel to the IRQ.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum IrqAux {
    Read,
    Atomic { original: u64 },
    Commit { status: CommitStatus },
}

/// The per-stream QP engine. `ORD` and `IRD` are the largest ORD/IRD
/// the QP can be negotiated to.
#[derive(Clone, Debug)]
pub struct Qp<const ORD: usize, const IRD: usize> {
    pub(crate) cfg: QpConfig,
    pub(crate) state: State,
    pub(crate) initiator: bool,
    /// The MPA startup; its octets go out before any FPDU.
    pub(crate) startup: Startup,
    /// Negotiated values.
    pub(crate) framing: Framing,
    pub(crate) ird: u16,
    pub(crate) ord: u16,
    pub(crate) rtr: Option<RtrMode>,
    pub(crate) mulpdu: usize,
    /// Responder in client-server mode: no FPDU before the initiator's first.
    pub(crate) tx_gated: bool,
    /// Initiator p2p: the RTR message still has to go out.
    pub(crate) rtr_to_send: Option<Rtr>,

    // ---- transmit ----
    pub(crate) enc: FpduEncoder,
    pub(crate) tx: Tx,
    pub(crate) txs: tx::TxState,
    pub(crate) cur: Option<CurWqe>,
    pub(crate) next_seq: u32,
    pub(crate) msn: [u32; 4],
    pub(crate) next_req_id: u32,
    pub(crate) orq: Orq<ORD>,
    pub(crate) orq_aux: RequestQueue<OrqAux, ORD>,
    pub(crate) held: RequestQueue<(u32, Completion), HOLD>,
    pub(crate) irq: Irq<IRD>,
    pub(crate) irq_aux: RequestQueue<IrqAux, IRD>,
    /// Terminate to send after the FPDU in flight.
    pub(crate) term: Option<terminate::Repr>,
    pub(crate) term_sent: bool,
    /// Flush the send side once the FPDU in flight is out.
    pub(crate) flush_pending: bool,
    /// The peer's Terminate, for the oldest request the flush completes.
    pub(crate) remote_term: Option<TermError>,

    // ---- receive ----
    pub(crate) mpa_rx: Rx,
    pub(crate) urx: UntaggedRx,
    pub(crate) rxc: rx::RxCur,
    pub(crate) got_fpdu: bool,
}

impl<const ORD: usize, const IRD: usize> Qp<ORD, IRD> {
    /// A QP in [`State::Idle`].
    pub fn new(cfg: QpConfig) -> Self {
        let framing = Framing {
            crc: false,
            markers_tx: false,
            markers_rx: false,
        };
        Qp {
            cfg,
            state: State::Idle,
            initiator: false,
            startup: Startup::None,
            framing,
            ird: 0,
            ord: 0,
            rtr: None,
            mulpdu: 0,
            tx_gated: false,
            rtr_to_send: None,
            enc: FpduEncoder::new(false, false),
            tx: Tx::new(false, false),
            txs: tx::TxState::default(),
            cur: None,
            next_seq: 0,
            msn: [crate::ddp::INITIAL_MSN; 4],
            next_req_id: 1,
            orq: RequestQueue::new(0),
            orq_aux: RequestQueue::new(0),
            held: RequestQueue::new(HOLD as u32),
            irq: RequestQueue::new(0),
            irq_aux: RequestQueue::new(0),
            term: None,
            term_sent: false,
            flush_pending: false,
            remote_term: None,
            mpa_rx: Rx::new(crate::mpa::rx::RxConfig {
                crc: false,
                markers: false,
                header_len: 2,
            }),
            urx: UntaggedRx::new(),
            rxc: rx::RxCur::new(),
            got_fpdu: false,
        }
    }

    /// The state.
    pub fn state(&self) -> State {
        self.state
    }

    /// Negotiated framing (valid from [`Event::Established`]).
    pub fn framing(&self) -> Framing {
        self.framing
    }

    /// Negotiated IRD and ORD (clamped to the const capacities).
    pub fn ird_ord(&self) -> (u16, u16) {
        (self.ird, self.ord)
    }

    /// The RTR mode in use (peer-to-peer), if any.
    pub fn rtr_mode(&self) -> Option<RtrMode> {
        self.rtr
    }

    /// MULPDU in use for transmitted FPDUs.
    pub fn mulpdu(&self) -> usize {
        self.mulpdu
    }

    /// The peer's MPA private data (valid once its frame arrived; empty
    /// for a QP started with [`Qp::establish`]).
    pub fn peer_private_data(&self) -> &[u8] {
        self.startup.peer_private_data()
    }

    /// Starts as initiator: queues the MPA Request.
    pub fn connect(&mut self, cfg: &InitiatorConfig<'_>) -> Result<(), TermError> {
        if self.state != State::Idle {
            return Err(crate::error::llp::LOCAL_CATA);
        }
        self.startup = Startup::Initiator(Initiator::new(cfg).map_err(|e| e.term())?);
        self.initiator = true;
        self.state = State::AwaitReply;
        Ok(())
    }

    /// Starts as responder: waits for the MPA Request.
    pub fn listen(&mut self, cfg: &ResponderConfig) -> Result<(), TermError> {
        if self.state != State::Idle {
            return Err(crate::error::llp::LOCAL_CATA);
        }
        self.startup = Startup::Responder(Responder::new(cfg));
        self.initiator = false;
        self.state = State::AwaitRequest;
        Ok(())
    }

    /// The responder machine while a Request waits for the decision.
    fn pending_request(&mut self) -> Result<&mut Responder, TermError> {
        match (&mut self.startup, self.state) {
            (Startup::Responder(m), State::OfferPending) => Ok(m),
            _ => Err(crate::error::llp::LOCAL_CATA),
        }
    }

    /// Responder: accepts the pending request with `private_data`.
    pub fn accept<H: Host + ?Sized>(
        &mut self,
        host: &mut H,
        private_data: &[u8],
    ) -> Result<(), TermError> {
        let m = self.pending_request()?;
        let cfg = *m.config();
        let params = m.accept(&cfg, private_data)?;
        self.establish_params(&params);
        host.event(Event::Established);
        if self.state == State::Rts {
            host.event(Event::Ready);
        }
        Ok(())
    }

    /// Responder: rejects the pending request; the caller closes the
    /// socket once [`Qp::tx`] has returned the Reply.
    pub fn reject<H: Host + ?Sized>(
        &mut self,
        host: &mut H,
        private_data: &[u8],
    ) -> Result<(), TermError> {
        self.pending_request()?.reject(private_data)?;
        self.state = State::Closed;
        self.flush_all(host);
        Ok(())
    }

    /// Enters full operation with what an MPA startup settled (the
    /// [`startup`] machine's [`StreamParams`]).
    pub fn establish_params(&mut self, p: &StreamParams) {
        self.establish(p.framing, p.ird, p.ord, p.rtr, p.initiator);
    }

    /// Enters full operation with the given negotiated parameters. Used by
    /// the negotiation paths, and directly by tests and fuzzing (and by a
    /// driver whose connection manager did the MPA exchange itself).
    /// `initiator`: this end sent the MPA Request (it sends the RTR).
    pub fn establish(
        &mut self,
        framing: Framing,
        ird: u16,
        ord: u16,
        rtr: Option<RtrMode>,
        initiator: bool,
    ) {
        self.framing = framing;
        let ird = if ird == crate::wire::mpa::IRD_ORD_NO_AUTO {
            IRD as u16
        } else {
            ird
        };
        let ord = if ord == crate::wire::mpa::IRD_ORD_NO_AUTO {
            ORD as u16
        } else {
            ord
        };
        self.ird = ird.min(u16::try_from(IRD).unwrap_or(u16::MAX));
        self.ord = ord.min(u16::try_from(ORD).unwrap_or(u16::MAX));
        // An RTR Read needs one credit even with ORD/IRD 0.
        if matches!(rtr, Some(RtrMode::Zero(Rtr::Read))) {
            if initiator && self.ord == 0 {
                self.ord = u16::from(ORD > 0);
            }
            if !initiator && self.ird == 0 {
                self.ird = u16::from(IRD > 0);
            }
        }
        self.rtr = rtr;
        self.initiator = initiator;
        self.tx = framing.tx();
        let ref_min = self.enc.ref_min();
        self.enc = FpduEncoder::new(framing.crc, framing.markers_tx);
        self.enc.set_ref_min(ref_min);
        self.mulpdu = self
            .tx
            .mulpdu(self.cfg.emss)
            .min(crate::wire::fpdu::MAX_ULPDU);
        self.mpa_rx = framing.rx(2);
        self.orq = RequestQueue::new(u32::from(self.ord));
        self.orq_aux = RequestQueue::new(u32::from(self.ord));
        self.irq = RequestQueue::new(u32::from(self.ird));
        self.irq_aux = RequestQueue::new(u32::from(self.ird));
        self.rtr_to_send = match (initiator, rtr) {
            (true, Some(RtrMode::Zero(k))) => Some(k),
            _ => None,
        };
        self.state = match (initiator, rtr) {
            (false, Some(RtrMode::Zero(k))) => State::AwaitRtr(k),
            _ => State::Rts,
        };
        // RFC 5044 7.1: without an RTR the initiator's first FPDU opens
        // the responder's direction (also RFC 6581's ULP-level Send).
        self.tx_gated = !initiator && !matches!(rtr, Some(RtrMode::Zero(_)));
    }

    /// Requests a graceful close: no new work requests are started; when
    /// everything outstanding is done, [`Event::Closed`] is delivered.
    pub fn close<H: Host + ?Sized>(&mut self, host: &mut H) {
        if matches!(self.state, State::Rts | State::AwaitRtr(_)) {
            self.state = State::Closing;
            self.check_closed(host);
        }
    }

    pub(crate) fn check_closed<H: Host + ?Sized>(&mut self, host: &mut H) {
        if self.state == State::Closing
            && self.cur.is_none()
            && self.orq.is_empty()
            && self.irq.is_empty()
            && self.held.is_empty()
            && !self.enc.busy()
        {
            self.state = State::Closed;
            self.flush_all(host);
            host.event(Event::Closed);
        }
    }

    /// The TCP connection is gone (reset, FIN, timeout): fails the stream
    /// and flushes everything (nothing more can be sent).
    pub fn on_connection_lost<H: Host + ?Sized>(&mut self, host: &mut H) {
        match self.state {
            State::Error | State::Closed => self.flush_all(host),
            _ => {
                self.state = State::Error;
                self.term = None;
                self.enc.abandon();
                host.event(Event::ConnectionLost);
                self.flush_all(host);
            }
        }
    }

    /// Whether [`Qp::tx`] has something to send without new work requests.
    pub fn wants_tx(&self) -> bool {
        !self.startup.transmit().is_empty()
            || self.enc.busy()
            || (self.term.is_some() && !self.term_sent)
            || (!self.tx_gated
                && matches!(self.state, State::Rts | State::Closing)
                && (!self.irq.is_empty() || self.cur.is_some() || self.rtr_to_send.is_some()))
    }

    /// Whether the stream failed or closed (the caller closes the socket
    /// once [`Qp::wants_tx`] is false).
    pub fn is_done(&self) -> bool {
        matches!(self.state, State::Error | State::Closed)
    }

    /// Completes every outstanding request with [`Status::Flushed`]: the
    /// send side in posting order (held successes, outstanding requests,
    /// the one in progress, then everything still on the host's send
    /// queue), then every posted receive. Only in [`State::Error`] or
    /// [`State::Closed`]; call it again after posting to a failed QP.
    pub fn flush<H: Host + ?Sized>(&mut self, host: &mut H) {
        if matches!(self.state, State::Error | State::Closed) {
            self.flush_all(host);
        }
    }

    pub(crate) fn flush_all<H: Host + ?Sized>(&mut self, host: &mut H) {
        if self.enc.busy() && self.cur.is_some() {
            // The FPDU in flight still reads the current request's data:
            // flush the send side once it is out (tx does that).
            self.flush_pending = true;
        } else {
            self.flush_send(host);
        }
        // Receives: the one being filled and the rest.
        self.rxc.abort();
        while let Some(r) = host.rq_pop() {
            host.complete(Completion::new(
                WorkQueue::Recv,
                r.wr_id,
                CompOp::Recv,
                Status::Flushed,
                0,
            ));
        }
        // Inbound requests will never be answered.
        while self.irq.pop().is_some() {}
        while self.irq_aux.pop().is_some() {}
    }

    pub(crate) fn flush_send<H: Host + ?Sized>(&mut self, host: &mut H) {
        self.flush_pending = false;
        // After a Terminate from the peer, the oldest request in progress
        // (awaiting its response, or being sent) carries the peer's
        // reason; the rest, and WRs never started, are flushed.
        let mut remote = self.remote_term.take();
        // Merge held completions and ORQ entries by sequence number.
        loop {
            let h = self.held.front().map(|x| x.0);
            let o = self.orq_aux.front().map(|x| x.seq);
            let take_held = match (h, o) {
                (None, None) => break,
                (Some(_), None) => true,
                (None, Some(_)) => false,
                (Some(a), Some(b)) => seq_lt(a, b),
            };
            if take_held {
                if let Some((_, c)) = self.held.pop() {
                    host.complete(c);
                }
            } else {
                self.orq.pop();
                if let Some(a) = self.orq_aux.pop() {
                    if !a.internal {
                        host.complete(Completion::new(
                            WorkQueue::Send,
                            a.wr_id,
                            a.opcode,
                            remote.take().map_or(Status::Flushed, Status::RemoteError),
                            0,
                        ));
                    }
                }
            }
        }
        if let Some(c) = self.cur.take() {
            host.complete(Completion::new(
                WorkQueue::Send,
                c.wr.wr_id,
                sq_opcode(&c.wr.op),
                remote.take().map_or(Status::Flushed, Status::RemoteError),
                0,
            ));
        }
        self.rtr_to_send = None;
        while let Some(wr) = host.sq_next() {
            host.complete(Completion::new(
                WorkQueue::Send,
                wr.wr_id,
                sq_opcode(&wr.op),
                Status::Flushed,
                0,
            ));
        }
    }

    /// Fails the stream with `err`: queue a Terminate copying the headers
    /// of `offending` (the DDP segment's header octets, of a segment that
    /// was `seg_len` long), report it, flush.
    pub(crate) fn fail<H: Host + ?Sized>(
        &mut self,
        host: &mut H,
        err: TermError,
        offending: Option<(&[u8], u16)>,
    ) {
        if matches!(self.state, State::Terminate | State::Error | State::Closed) {
            return;
        }
        let mut t = terminate::Repr::for_error(err, offending.map(|o| o.0));
        if let (Some(d), Some((_, len))) = (t.ddp.as_mut(), offending) {
            if d.segment_len.is_some() {
                d.segment_len = Some(len);
            }
        }
        let established = !matches!(
            self.state,
            State::Idle | State::AwaitReply | State::AwaitRequest | State::OfferPending
        );
        host.event(Event::LocalTerminate(err));
        if established {
            self.term = Some(t);
            self.term_sent = false;
            self.state = State::Terminate;
        } else {
            self.state = State::Error;
        }
        self.flush_all(host);
    }

    /// Delivers a send-queue completion in posting order.
    pub(crate) fn sq_complete<H: Host + ?Sized>(&mut self, host: &mut H, seq: u32, c: Completion) {
        let must_hold =
            !self.held.is_empty() || self.orq_aux.front().is_some_and(|a| seq_lt(a.seq, seq));
        if must_hold {
            if let Err(c) = self.held.push((seq, c)) {
                // Cannot happen: the SQ stalls while `held` is full.
                host.complete(c.1);
            }
        } else {
            host.complete(c);
        }
    }

    /// Releases held completions no longer behind an outstanding request.
    pub(crate) fn release_held<H: Host + ?Sized>(&mut self, host: &mut H) {
        while let Some(&(seq, c)) = self.held.front() {
            if self.orq_aux.front().is_some_and(|a| seq_lt(a.seq, seq)) {
                break;
            }
            self.held.pop();
            host.complete(c);
        }
    }
}

/// Wrapping sequence comparison.
pub(crate) fn seq_lt(a: u32, b: u32) -> bool {
    (b.wrapping_sub(a) as i32) > 0
}

pub(crate) fn sq_opcode(op: &SendOp) -> CompOp {
    match op {
        SendOp::Send { .. } => CompOp::Send,
        SendOp::Write { .. } => CompOp::Write,
        SendOp::Read { .. } => CompOp::Read,
        SendOp::Atomic {
            op: AtomicOp::FetchAdd,
            ..
        } => CompOp::FetchAdd,
        SendOp::Atomic {
            op: AtomicOp::CmpSwap,
            ..
        } => CompOp::CmpSwap,
        SendOp::Atomic { .. } => CompOp::AtomicOther,
        SendOp::Immediate { .. } => CompOp::Immediate,
        SendOp::WriteImm { .. } => CompOp::WriteImm,
        SendOp::Commit { .. } => CompOp::Commit,
    }
}

/// The header buffer size the receive path uses.
pub(crate) const RX_HDR: usize = MAX_HEADER;
