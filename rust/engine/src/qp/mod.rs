// SPDX-License-Identifier: GPL-2.0
//! The per-stream QP protocol state machine (RFC 5040, RFC 5041 and RFC
//! 7306 over RFC 5044 with RFC 6581): MPA startup through the
//! [`startup`] machine, the RTR, RDMAP/DDP transmit
//! and receive, Terminate and flush.
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
//! // Either the MPA startup in-band (the startup machine runs inside):
//! qp.connect(&initiator_cfg) / qp.listen(&responder_cfg);
//! // or run mpa::startup::{Initiator, Responder} outside (the kernel CM,
//! // iwarp-endpoint), then hand over, octets read past the frame first:
//! qp.establish_params(&params); qp.rx(&mut host, &crc, leftover);
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

mod encoder;
mod flush;
mod host;
mod plan;
mod rx;
mod tx;
mod wr;

#[cfg(test)]
mod bench_small;
#[cfg(test)]
mod tests;

use crate::ddp::UntaggedRx;
use crate::error::TermError;
use crate::mpa::negotiate::{Framing, InitiatorConfig, ResponderConfig, RtrMode};
use crate::mpa::rx::{Rx, MAX_HEADER};
use crate::mpa::startup::{self, Initiator, Responder, StreamParams};
use crate::mpa::tx::Tx;
use crate::rdmap::{Irq, Orq, RequestQueue};
use crate::wire::commit::Status as CommitStatus;
use crate::wire::mpa::Rtr;
use crate::wire::terminate;

pub use encoder::FpduEncoder;
pub use host::Host;
pub use plan::{PayloadRef, Piece, TxPlan};
pub use wr::{
    CompOp, Completion, Event, Flags, Local, RecvWr, Remote, SendOp, SendWr, Status, WorkQueue,
};

pub(crate) use flush::seq_lt;
pub use flush::MAX_FLUSH;
pub(crate) use wr::sq_opcode;

/// Completions held back to keep send-queue completion order.
pub const HOLD: usize = 32;

/// Largest MPA Request/Reply frame.
pub const MAX_MPA_FRAME: usize = startup::MAX_FRAME;

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
pub enum Startup {
    /// Established directly ([`Qp::establish`]) or not started.
    None,
    /// This end sent the MPA Request.
    Initiator(Initiator),
    /// This end waits for (or answered) the MPA Request.
    Responder(Responder),
}

/// Where a [`Qp`] keeps its in-band MPA startup. [`Startup`] itself holds
/// one inline (about 1.2 KiB); [`NoStartup`] is for hosts that run the
/// startup outside and hand over with [`Qp::establish_params`] (the
/// kernel's CM), whose QPs then carry none of it.
pub trait StartupSlot: Clone + core::fmt::Debug {
    /// An empty slot.
    const EMPTY: Self;
    /// The startup held ([`Startup::None`] when there is none).
    fn get(&self) -> &Startup;
    /// The startup held, to drive it.
    fn get_mut(&mut self) -> Option<&mut Startup>;
    /// Holds `s`; `false` when this slot cannot.
    fn put(&mut self, s: Startup) -> bool;
}

impl StartupSlot for Startup {
    const EMPTY: Self = Startup::None;
    fn get(&self) -> &Startup {
        self
    }
    fn get_mut(&mut self) -> Option<&mut Startup> {
        Some(self)
    }
    fn put(&mut self, s: Startup) -> bool {
        *self = s;
        true
    }
}

/// A slot that holds no startup: [`Qp::connect`] and [`Qp::listen`] fail.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NoStartup;

impl StartupSlot for NoStartup {
    const EMPTY: Self = NoStartup;
    fn get(&self) -> &Startup {
        &Startup::None
    }
    fn get_mut(&mut self) -> Option<&mut Startup> {
        None
    }
    fn put(&mut self, _: Startup) -> bool {
        false
    }
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
    /// A Read whose sink is invalidated once its response is placed
    /// ([`super::Flags::INVALIDATE_SINK`]).
    pub(crate) invalidate: bool,
}

/// The result owed with an inbound request, parallel to the IRQ.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum IrqAux {
    Read,
    Atomic { original: u64 },
    Commit { status: CommitStatus },
}

/// The per-stream QP engine. `ORD` and `IRD` are the largest ORD/IRD
/// the QP can be negotiated to; `S` keeps the in-band MPA startup.
#[derive(Clone, Debug)]
pub struct Qp<const ORD: usize, const IRD: usize, S: StartupSlot = Startup> {
    pub(crate) cfg: QpConfig,
    pub(crate) state: State,
    pub(crate) initiator: bool,
    /// The MPA startup; its octets go out before any FPDU.
    pub(crate) startup: S,
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
    /// The host said the send queue was empty after the WR it gave last
    /// ([`Host::sq_drained`]): no further look at it in this [`Qp::tx`]
    /// call.
    pub(crate) sq_dry: bool,

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
    /// The peer's Terminate as received ([`Qp::peer_terminate`]).
    pub(crate) peer_term: Option<terminate::Repr>,

    // ---- receive ----
    pub(crate) mpa_rx: Rx,
    pub(crate) urx: UntaggedRx,
    pub(crate) rxc: rx::RxCur,
    pub(crate) got_fpdu: bool,
}

impl<const ORD: usize, const IRD: usize, S: StartupSlot> Qp<ORD, IRD, S> {
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
            startup: S::EMPTY,
            framing,
            ird: 0,
            ord: 0,
            rtr: None,
            mulpdu: 0,
            tx_gated: false,
            rtr_to_send: None,
            sq_dry: false,
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
            peer_term: None,
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

    /// The Terminate the peer sent, with the headers it copied
    /// ([`Event::TerminateReceived`] carries its error alone).
    pub fn peer_terminate(&self) -> Option<&terminate::Repr> {
        self.peer_term.as_ref()
    }

    /// MULPDU in use for transmitted FPDUs.
    pub fn mulpdu(&self) -> usize {
        self.mulpdu
    }

    /// The peer's MPA private data (valid once its frame arrived; empty
    /// for a QP started with [`Qp::establish`]).
    pub fn peer_private_data(&self) -> &[u8] {
        self.startup.get().peer_private_data()
    }

    /// Starts as initiator: queues the MPA Request.
    pub fn connect(&mut self, cfg: &InitiatorConfig<'_>) -> Result<(), TermError> {
        if self.state != State::Idle {
            return Err(crate::error::llp::LOCAL_CATA);
        }
        let m = Initiator::new(cfg).map_err(|e| e.term())?;
        if !self.startup.put(Startup::Initiator(m)) {
            return Err(crate::error::llp::LOCAL_CATA);
        }
        self.initiator = true;
        self.state = State::AwaitReply;
        Ok(())
    }

    /// Starts as responder: waits for the MPA Request.
    pub fn listen(&mut self, cfg: &ResponderConfig) -> Result<(), TermError> {
        if self.state != State::Idle {
            return Err(crate::error::llp::LOCAL_CATA);
        }
        if !self.startup.put(Startup::Responder(Responder::new(cfg))) {
            return Err(crate::error::llp::LOCAL_CATA);
        }
        self.initiator = false;
        self.state = State::AwaitRequest;
        Ok(())
    }

    /// The responder machine while a Request waits for the decision.
    fn pending_request(&mut self) -> Result<&mut Responder, TermError> {
        match (self.startup.get_mut(), self.state) {
            (Some(Startup::Responder(m)), State::OfferPending) => Ok(m),
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

    /// Ends the stream for a local error the host found outside the
    /// engine's own checks (a consumer's queue it cannot use, a fault a
    /// test injects): the Terminate goes out after the FPDU in flight, the
    /// queues are flushed, as for a malformed FPDU from the peer.
    pub fn terminate<H: Host + ?Sized>(&mut self, host: &mut H, err: TermError) {
        self.fail(host, err, None);
    }

    /// Whether [`Qp::tx`] has something to send without new work requests.
    pub fn wants_tx(&self) -> bool {
        !self.startup.get().transmit().is_empty()
            || self.enc.busy()
            || (self.term.is_some() && !self.term_sent)
            || (!self.tx_gated
                && matches!(self.state, State::Rts | State::Closing)
                && (!self.irq.is_empty() || self.cur.is_some() || self.rtr_to_send.is_some()))
    }

    /// Whether the stream has ended (failed, terminating or closed) and
    /// the engine has flushed every send request it took: what is on the
    /// host's send queue was posted since and may complete at once, in
    /// order. Until then, a request posted to a QP its host already shows
    /// in Error queues behind the ones the engine will still flush: the
    /// host moved to Error before telling the engine
    /// ([`Qp::on_connection_lost`]), or the send side's flush waits for
    /// the FPDU in flight. The send queue completes in posting order.
    pub fn send_flushed(&self) -> bool {
        self.recv_flushed() && !self.flush_pending
    }

    /// Like [`Qp::send_flushed`] for the receive queue, which the engine
    /// flushes as soon as the stream ends.
    pub fn recv_flushed(&self) -> bool {
        matches!(self.state, State::Terminate | State::Error | State::Closed)
    }

    /// Whether the stream failed or closed (the caller closes the socket
    /// once [`Qp::wants_tx`] is false).
    pub fn is_done(&self) -> bool {
        matches!(self.state, State::Error | State::Closed)
    }
}

/// The header buffer size the receive path uses.
pub(crate) const RX_HDR: usize = MAX_HEADER;
