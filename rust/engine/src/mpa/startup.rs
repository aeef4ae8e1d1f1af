// SPDX-License-Identifier: GPL-2.0
//! MPA startup (RFC 5044 section 7.1, RFC 6581 sections 8, 9 and 10): one
//! sans-IO state machine per role, [`Initiator`] and [`Responder`].
//!
//! Each machine is fed the peer's octets ([`Initiator::receive`],
//! [`Responder::receive`]: it takes octets up to the last one of the peer's
//! MPA frame and never one more, so whatever follows stays with the caller
//! for the stream), holds the octets to send ([`Initiator::transmit`], then
//! [`Initiator::sent`]) and reports what happened ([`Initiator::poll`]):
//!
//! * Responder: [`Event::Request`] when a valid Request arrived; the caller
//!   looks at it and calls [`Responder::accept`] (with its own IRD/ORD) or
//!   [`Responder::reject`] (with its own private data).
//! * Both: [`Event::Established`] with the [`StreamParams`] the stream runs
//!   with (initiator: when the Reply is checked; responder: `accept`
//!   returns them).
//! * Initiator: [`Event::Rejected`] when the responder set R.
//! * Both: [`Event::Failed`] with the error, and whether the error goes out
//!   in a Terminate ([`rfc6581`] has one predicate per rule).
//!
//! After `Rejected` or `Failed` the caller sends what
//! [`Initiator::transmit`] still holds (a Terminate, a rejecting Reply)
//! and closes the connection. The machines do no I/O and know no time:
//! timeouts, the socket and any delay before the RTR are the caller's. The
//! decisions are the pure functions of [`super::negotiate`]; the RTR
//! message itself is the stream's first FPDU and belongs to the QP
//! ([`StreamParams::rtr_to_send`], [`StreamParams::rtr_expected`]).

use core::fmt;

use crate::crc::Crc32c;
use crate::ddp::INITIAL_MSN;
use crate::error::{llp, TermError};
use crate::mpa::negotiate::{
    check_reply, judge_request, request, Framing, InitiatorConfig, Negotiated, Offer, Refused,
    ResponderConfig, RtrMode,
};
use crate::wire::mpa::{frame_len, Enhanced, Error, Kind, Repr, Rtr, HEADER_LEN, MAX_PRIVATE_DATA};
use crate::wire::terminate;

/// Longest MPA Request/Reply frame.
pub const MAX_FRAME: usize = HEADER_LEN + MAX_PRIVATE_DATA;

/// Room for the Terminate FPDU of a failed startup (2 + 18 + 4 octets of
/// ULPDU, pad, CRC, one marker: 32).
const MAX_TERMINATE: usize = 64;

/// The RFC 6581 rules on how an initiator reports a Reply it cannot use:
/// one predicate per rule, true for the errors the rule sends in a
/// Terminate (framed as the Reply negotiated) before the connection
/// closes. Errors of RFC 5044 (an invalid frame, LLP code 4) close the
/// connection without one.
///
/// A responder never sends a Terminate during startup: it reports its
/// errors in a Reply with R set ([`super::negotiate::Rejection`], RFC 6581
/// section 9: "Responder CAN reject connection request ... and specify in
/// MPA Reject frame Responder required ORD"; section 7: the provider "CAN
/// generate reject reply message indicating which RTR message types it
/// supports"), since no FPDU may precede its Reply (RFC 5044 7.1).
pub mod rfc6581 {
    use crate::error::TermError;

    const LOCAL_CATASTROPHIC: u8 = 5;
    const INSUFFICIENT_IRD: u8 = 6;
    const NO_MATCHING_RTR: u8 = 7;

    /// Section 9: "If Initiator does not have sufficient resources to
    /// satisfy Responder ORD it MUST terminate the connection ... and MUST
    /// send termination message to Responder indicating insufficient
    /// resources. Thus, TERM message MUST contain Layer 2, Error Type 3,
    /// Error Code 6."
    pub const fn insufficient_ird_goes_in_terminate(error: TermError) -> bool {
        matches!(error.llp_code(), Some(INSUFFICIENT_IRD))
    }

    /// Section 9: "If Initiator CAN NOT generate any of the Responder
    /// supported RTR messages, then it MUST terminate the connection ...
    /// and MUST send termination message to Responder indicating no
    /// matching RTR option. Thus, TERM message MUST contain Layer 2, Error
    /// Type 3, Error Code 7."
    pub const fn no_matching_rtr_goes_in_terminate(error: TermError) -> bool {
        matches!(error.llp_code(), Some(NO_MATCHING_RTR))
    }

    /// Section 9: "Initiator or Responder MUST generate the TERM message
    /// that contains Layer 2, Error Type 3, Error Code 5 when it encounters
    /// any error locally for which the special Error Code is not defined
    /// in section Section 8 before resetting the connection."
    pub const fn local_catastrophic_goes_in_terminate(error: TermError) -> bool {
        matches!(error.llp_code(), Some(LOCAL_CATASTROPHIC))
    }

    /// Whether any of the rules above sends `error` in a Terminate.
    pub const fn goes_in_terminate(error: TermError) -> bool {
        insufficient_ird_goes_in_terminate(error)
            || no_matching_rtr_goes_in_terminate(error)
            || local_catastrophic_goes_in_terminate(error)
    }
}

/// ULP private data, owned: at most 512 octets (RFC 5044 7.1.1).
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct PrivateData {
    buf: [u8; MAX_PRIVATE_DATA],
    len: u16,
}

impl PrivateData {
    /// No private data.
    pub const EMPTY: PrivateData = PrivateData {
        buf: [0; MAX_PRIVATE_DATA],
        len: 0,
    };

    /// A copy of `bytes`; `None` above 512 octets.
    pub fn new(bytes: &[u8]) -> Option<Self> {
        let mut pd = Self::EMPTY;
        pd.buf.get_mut(..bytes.len())?.copy_from_slice(bytes);
        pd.len = u16::try_from(bytes.len()).ok()?;
        Some(pd)
    }

    /// The octets.
    pub fn as_bytes(&self) -> &[u8] {
        self.buf.get(..usize::from(self.len)).unwrap_or(&[])
    }
}

impl Default for PrivateData {
    fn default() -> Self {
        Self::EMPTY
    }
}

impl fmt::Debug for PrivateData {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("PrivateData")
            .field(&self.as_bytes())
            .finish()
    }
}

/// What the MPA exchange settled: everything the stream runs with. The
/// fields up to `rtr` are [`Negotiated`]'s (see there); the peer's private
/// data is kept apart, owned ([`PrivateData`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[allow(missing_docs)]
pub struct StreamParams {
    pub rev: u8,
    pub framing: Framing,
    pub enhanced: bool,
    pub ird: u16,
    pub ord: u16,
    pub auto_ird_ord: bool,
    pub peer: Option<Enhanced>,
    pub rtr: Option<RtrMode>,
    /// This end sent the MPA Request (it sends the RTR).
    pub initiator: bool,
    /// The peer's ULP private data.
    pub private_data: PrivateData,
}

impl StreamParams {
    fn new(n: &Negotiated<'_>, initiator: bool) -> Self {
        StreamParams {
            rev: n.rev,
            framing: n.framing,
            enhanced: n.enhanced,
            ird: n.ird,
            ord: n.ord,
            auto_ird_ord: n.auto_ird_ord,
            peer: n.peer,
            rtr: n.rtr,
            initiator,
            // A parsed frame holds at most 512 octets of private data.
            private_data: PrivateData::new(n.private_data).unwrap_or_default(),
        }
    }

    /// Initiator: the zero-length message its first FPDU must be (RFC 6581
    /// section 9: "the first message sent by Initiator MUST be an RTR").
    pub fn rtr_to_send(&self) -> Option<Rtr> {
        match (self.initiator, self.rtr) {
            (true, Some(RtrMode::Zero(k))) => Some(k),
            _ => None,
        }
    }

    /// Responder: the zero-length message the initiator's first FPDU must
    /// be; it sends nothing before (RFC 6581 section 5).
    pub fn rtr_expected(&self) -> Option<Rtr> {
        match (self.initiator, self.rtr) {
            (false, Some(RtrMode::Zero(k))) => Some(k),
            _ => None,
        }
    }
}

/// Why the startup failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Failure {
    /// The error, for the local report.
    pub error: TermError,
    /// The error goes out in a Terminate ([`rfc6581::goes_in_terminate`]),
    /// queued in the machine's transmit octets.
    pub terminate: bool,
    /// The peer's enhanced data, if its frame carried any.
    pub peer: Option<Enhanced>,
}

/// What a machine reports, once each ([`Initiator::poll`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Event {
    /// Responder: a valid Request; the parameters are what accepting it
    /// with the responder's configuration gives (the initiator's private
    /// data, the IRD/ORD the ULP may use). Call [`Responder::accept`] or
    /// [`Responder::reject`].
    Request(StreamParams),
    /// Initiator: the Reply accepted the connection.
    Established(StreamParams),
    /// Initiator: the responder set R (RFC 6581 section 9: its IRD/ORD go
    /// to the ULP).
    Rejected {
        /// The responder's enhanced data, if any.
        peer: Option<Enhanced>,
        /// The responder's private data.
        private_data: PrivateData,
    },
    /// The startup failed; send [`Initiator::transmit`] and close.
    Failed(Failure),
}

/// Where a machine is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    /// Waiting for (the rest of) the peer's frame.
    AwaitFrame,
    /// Responder: the Request is valid; the caller decides.
    Decide,
    /// The exchange is done; the stream takes over.
    Established,
    /// Initiator: rejected by the responder. Responder: the caller
    /// rejected.
    Rejected,
    /// Failed.
    Failed(Failure),
}

/// The peer's frame as it arrives.
#[derive(Clone, Debug)]
struct FrameRx {
    buf: [u8; MAX_FRAME],
    have: usize,
    kind: Kind,
}

impl FrameRx {
    const fn new(kind: Kind) -> Self {
        FrameRx {
            buf: [0; MAX_FRAME],
            have: 0,
            kind,
        }
    }

    /// Takes octets of `input` up to the frame's last; returns how many
    /// and whether the frame is complete.
    fn take(&mut self, input: &[u8]) -> Result<(usize, bool), Error> {
        let mut used = 0;
        loop {
            let want = frame_len(self.frame(), self.kind)?.unwrap_or(HEADER_LEN);
            if self.have >= want {
                return Ok((used, true));
            }
            let rest = input.get(used..).unwrap_or(&[]);
            let n = (want - self.have).min(rest.len());
            if n == 0 {
                return Ok((used, false));
            }
            let (Some(d), Some(s)) = (self.buf.get_mut(self.have..self.have + n), rest.get(..n))
            else {
                return Err(Error::Truncated);
            };
            d.copy_from_slice(s);
            self.have += n;
            used += n;
        }
    }

    fn frame(&self) -> &[u8] {
        self.buf.get(..self.have).unwrap_or(&[])
    }

    /// The complete frame, parsed.
    fn repr(&self) -> Result<Repr<'_>, Error> {
        Repr::parse_bytes(self.frame())
    }
}

/// Octets to send, in order.
#[derive(Clone, Debug)]
struct TxBuf {
    buf: [u8; MAX_FRAME + MAX_TERMINATE],
    len: usize,
    off: usize,
}

impl TxBuf {
    const fn new() -> Self {
        TxBuf {
            buf: [0; MAX_FRAME + MAX_TERMINATE],
            len: 0,
            off: 0,
        }
    }

    fn pending(&self) -> &[u8] {
        self.buf.get(self.off..self.len).unwrap_or(&[])
    }

    fn sent(&mut self, n: usize) {
        self.off = self.off.saturating_add(n).min(self.len);
    }

    /// Room after what is pending (compacting first).
    fn room(&mut self) -> &mut [u8] {
        if self.off > 0 {
            self.buf.copy_within(self.off..self.len, 0);
            self.len -= self.off;
            self.off = 0;
        }
        self.buf.get_mut(self.len..).unwrap_or(&mut [])
    }

    fn push_frame(&mut self, repr: &Repr<'_>) -> Result<(), Error> {
        let n = repr.emit_bytes(self.room())?;
        self.len += n;
        Ok(())
    }

    /// Queues the Terminate FPDU carrying `error`, framed by `framing` at
    /// the start of the stream (MSN 1 on the Terminate queue).
    fn push_terminate<C: Crc32c + ?Sized>(
        &mut self,
        crc: &C,
        framing: Framing,
        error: TermError,
    ) -> bool {
        let mut seg = [0u8; MAX_TERMINATE];
        let Some(n) = terminate::Repr::for_error(error, None).emit_segment(INITIAL_MSN, &mut seg)
        else {
            return false;
        };
        let seg = seg.get(..n).unwrap_or(&[]);
        match framing.tx().write(crc, seg, &[], self.room()) {
            Ok(w) => {
                self.len += w;
                true
            }
            Err(_) => false,
        }
    }
}

/// Where an exchange is, and whether the caller has been told.
#[derive(Clone, Copy, Debug)]
struct Progress {
    phase: Phase,
    reported: bool,
}

impl Progress {
    const fn new() -> Self {
        Self {
            phase: Phase::AwaitFrame,
            reported: true,
        }
    }

    fn set(&mut self, phase: Phase) {
        self.phase = phase;
        self.reported = false;
    }

    /// The phase, once after each change.
    fn take(&mut self) -> Option<Phase> {
        (!core::mem::replace(&mut self.reported, true)).then_some(self.phase)
    }
}

/// The MPA initiator: sends the Request, checks the Reply.
#[derive(Clone, Debug)]
pub struct Initiator {
    /// The settings without the private data (already in the Request).
    cfg: InitiatorConfig<'static>,
    rx: FrameRx,
    tx: TxBuf,
    progress: Progress,
}

impl Initiator {
    /// Builds the Request from `cfg` and queues it. Errors: private data
    /// above [`super::negotiate::max_private_data`], IRD/ORD above 0x3FFF,
    /// peer-to-peer without enhanced setup.
    pub fn new(cfg: &InitiatorConfig<'_>) -> Result<Self, Error> {
        let req = request(cfg)?;
        let mut m = Initiator {
            cfg: InitiatorConfig {
                private_data: &[],
                ..*cfg
            },
            rx: FrameRx::new(Kind::Reply),
            tx: TxBuf::new(),
            progress: Progress::new(),
        };
        m.tx.push_frame(&req)?;
        Ok(m)
    }

    /// Octets to send now, in order (the Request; after a failure, the
    /// Terminate).
    pub fn transmit(&self) -> &[u8] {
        self.tx.pending()
    }

    /// `n` octets of [`Initiator::transmit`] were sent.
    pub fn sent(&mut self, n: usize) {
        self.tx.sent(n)
    }

    /// Takes the peer's octets up to the last one of its Reply and returns
    /// how many it took: the rest (the stream's first octets) stays with
    /// the caller. Takes nothing once the Reply is complete. `crc` frames
    /// the Terminate a failure may need.
    pub fn receive<C: Crc32c + ?Sized>(&mut self, crc: &C, input: &[u8]) -> usize {
        if self.progress.phase != Phase::AwaitFrame {
            return 0;
        }
        let (used, complete) = match self.rx.take(input) {
            Ok(t) => t,
            Err(e) => {
                self.fail(e.term(), false, None);
                return input.len();
            }
        };
        if complete {
            self.check(crc);
        }
        used
    }

    fn check<C: Crc32c + ?Sized>(&mut self, crc: &C) {
        let outcome = match self.rx.repr() {
            Err(e) => Err(Refused::Failed {
                error: e.term(),
                framing: None,
                peer: None,
            }),
            Ok(rep) => check_reply(&self.cfg, &rep).map(|_| ()),
        };
        match outcome {
            Ok(()) => self.set(Phase::Established),
            Err(Refused::Rejected { .. }) => self.set(Phase::Rejected),
            Err(Refused::Failed {
                error,
                framing,
                peer,
            }) => {
                let terminate = match framing {
                    Some(f) if rfc6581::goes_in_terminate(error) => {
                        self.tx.push_terminate(crc, f, error)
                    }
                    _ => false,
                };
                self.fail(error, terminate, peer);
            }
        }
    }

    fn set(&mut self, phase: Phase) {
        self.progress.set(phase);
    }

    fn fail(&mut self, error: TermError, terminate: bool, peer: Option<Enhanced>) {
        self.set(Phase::Failed(Failure {
            error,
            terminate,
            peer,
        }));
    }

    /// Where the exchange is.
    pub fn phase(&self) -> Phase {
        self.progress.phase
    }

    /// What happened since the last call, once.
    pub fn poll(&mut self) -> Option<Event> {
        match self.progress.take()? {
            Phase::AwaitFrame | Phase::Decide => None,
            Phase::Established => self.params().map(Event::Established),
            Phase::Rejected => {
                let rep = self.rx.repr().ok();
                Some(Event::Rejected {
                    peer: rep.and_then(|r| r.enhanced),
                    private_data: PrivateData::new(self.peer_private_data()).unwrap_or_default(),
                })
            }
            Phase::Failed(f) => Some(Event::Failed(f)),
        }
    }

    /// The stream's parameters, once established.
    pub fn params(&self) -> Option<StreamParams> {
        if self.progress.phase != Phase::Established {
            return None;
        }
        let rep = self.rx.repr().ok()?;
        let n = check_reply(&self.cfg, &rep).ok()?;
        Some(StreamParams::new(&n, true))
    }

    /// The responder's ULP private data, once its Reply is complete.
    pub fn peer_private_data(&self) -> &[u8] {
        self.rx.repr().map(|r| r.private_data).unwrap_or(&[])
    }
}

/// The MPA responder: judges the Request, sends the caller's Reply.
#[derive(Clone, Debug)]
pub struct Responder {
    cfg: ResponderConfig,
    rx: FrameRx,
    tx: TxBuf,
    progress: Progress,
}

impl Responder {
    /// A responder that judges the Request against `cfg` (the most it
    /// could accept; [`Responder::accept`] takes the caller's own).
    pub const fn new(cfg: &ResponderConfig) -> Self {
        Responder {
            cfg: *cfg,
            rx: FrameRx::new(Kind::Request),
            tx: TxBuf::new(),
            progress: Progress::new(),
        }
    }

    /// The configuration the Request is judged against.
    pub fn config(&self) -> &ResponderConfig {
        &self.cfg
    }

    /// Octets to send now, in order (the Reply).
    pub fn transmit(&self) -> &[u8] {
        self.tx.pending()
    }

    /// `n` octets of [`Responder::transmit`] were sent.
    pub fn sent(&mut self, n: usize) {
        self.tx.sent(n)
    }

    /// Takes the peer's octets up to the last one of its Request and
    /// returns how many it took; the rest stays with the caller. Octets
    /// that arrive while the caller decides fail the startup (RFC 5044
    /// 7.1: the initiator sends nothing between its Request and the
    /// Reply).
    pub fn receive(&mut self, input: &[u8]) -> usize {
        match self.progress.phase {
            Phase::AwaitFrame => {}
            Phase::Decide if !input.is_empty() => {
                self.fail(llp::INVALID_REQ_RESP, None);
                return 0;
            }
            _ => return 0,
        }
        let (used, complete) = match self.rx.take(input) {
            Ok(t) => t,
            Err(e) => {
                self.fail(e.term(), None);
                return input.len();
            }
        };
        if complete {
            self.judge();
        }
        used
    }

    fn judge(&mut self) {
        let verdict = match self.rx.repr() {
            Err(e) => Err((e.term(), None, None)),
            Ok(req) => match judge_request(&self.cfg, &req) {
                Ok(_) => Ok(()),
                Err(rej) => {
                    let reply = if rej.send_reply {
                        rej.reply(&[]).ok()
                    } else {
                        None
                    };
                    Err((rej.error, reply, req.enhanced))
                }
            },
        };
        match verdict {
            Ok(()) => self.set(Phase::Decide),
            Err((error, reply, peer)) => {
                if let Some(r) = reply {
                    // Only the Request is buffered, so the Reply fits.
                    let _ = self.tx.push_frame(&r);
                }
                self.fail(error, peer);
            }
        }
    }

    fn set(&mut self, phase: Phase) {
        self.progress.set(phase);
    }

    fn fail(&mut self, error: TermError, peer: Option<Enhanced>) {
        self.set(Phase::Failed(Failure {
            error,
            terminate: false,
            peer,
        }));
    }

    /// Where the exchange is.
    pub fn phase(&self) -> Phase {
        self.progress.phase
    }

    /// What happened since the last call, once.
    pub fn poll(&mut self) -> Option<Event> {
        match self.progress.take()? {
            Phase::Decide => self
                .offer(&self.cfg)
                .ok()
                .map(|o| Event::Request(StreamParams::new(&o.negotiated, false))),
            Phase::Failed(f) => Some(Event::Failed(f)),
            _ => None,
        }
    }

    /// The pending Request judged against `cfg`.
    fn offer(&self, cfg: &ResponderConfig) -> Result<Offer<'_>, TermError> {
        if self.progress.phase != Phase::Decide {
            return Err(llp::LOCAL_CATA);
        }
        let req = self.rx.repr().map_err(|e| e.term())?;
        judge_request(cfg, &req).map_err(|r| r.error)
    }

    /// Accepts the pending Request with the caller's settings `cfg` (its
    /// IRD/ORD) and private data: queues the Reply and returns the
    /// stream's parameters. On `Err` (no Request pending; `cfg` cannot
    /// accept it, e.g. an IRD too small for the only RTR kind; private
    /// data too long) nothing changed: the caller may try other settings,
    /// [`Responder::reject`] or close.
    pub fn accept(
        &mut self,
        cfg: &ResponderConfig,
        private_data: &[u8],
    ) -> Result<StreamParams, TermError> {
        let offer = self.offer(cfg)?;
        let reply = offer.accept(private_data).map_err(|e| e.term())?;
        let params = StreamParams::new(&offer.negotiated, false);
        // `push_frame` queues nothing on error.
        self.tx.push_frame(&reply).map_err(|e| e.term())?;
        self.progress.phase = Phase::Established;
        Ok(params)
    }

    /// Rejects the pending Request: queues a Reply with R set carrying
    /// `private_data` (the caller closes once it is sent). On `Err`
    /// nothing changed.
    pub fn reject(&mut self, private_data: &[u8]) -> Result<(), TermError> {
        let offer = self.offer(&self.cfg)?;
        let reply = offer.reject(private_data).map_err(|e| e.term())?;
        // `push_frame` queues nothing on error.
        self.tx.push_frame(&reply).map_err(|e| e.term())?;
        self.progress.phase = Phase::Rejected;
        Ok(())
    }

    /// The initiator's ULP private data, once its Request is complete.
    pub fn peer_private_data(&self) -> &[u8] {
        self.rx.repr().map(|r| r.private_data).unwrap_or(&[])
    }
}

#[cfg(test)]
mod tests;
