// SPDX-License-Identifier: GPL-2.0
//! Receive side (RFC 5044 7.1 and 4, RFC 5041, RFC 5040 with RFC 7306):
//! the MPA frame goes to the [`startup`](crate::mpa::startup) machine
//! during negotiation, then FPDUs through the MPA
//! [`Rx`](crate::mpa::Rx), DDP/RDMAP validation, streaming placement and
//! completions.

use super::{
    CompOp, Completion, Event, Host, IrqAux, Qp, RecvWr, Startup, StartupSlot, State, Status,
    WorkQueue, RX_HDR,
};
use crate::crc::Crc32c;
use crate::ddp::RecvQueues;
use crate::error::{self, llp, TermError};
use crate::mpa::negotiate::RtrMode;
use crate::mpa::rx::Event as MpaEvent;
use crate::mpa::startup::Event as StartupEvent;
use crate::rdmap::{self, Body, InboundRequest};
use crate::wire::commit::Status as CommitStatus;
use crate::wire::ddp::{Model, Segment, TAGGED_HEADER_LEN, UNTAGGED_HEADER_LEN};
use crate::wire::mpa::Rtr;
use crate::wire::rdmap::{Control, Opcode};
use crate::wire::MALFORMED;

/// Posted buffer lengths per queue, for [`crate::ddp::UntaggedRx::accept`].
struct Posted([Option<u32>; 4]);

impl RecvQueues for Posted {
    fn posted_len(&self, q: u32) -> Option<u32> {
        self.0.get(q as usize).copied().flatten()
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Stage {
    /// Waiting for the first 2 ULPDU octets.
    Start,
    /// Header extended; waiting for the rest of it.
    Extended,
    /// Header processed; payload (if any) flows.
    Body,
    /// This FPDU is being ignored (after an error).
    Skip,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Action {
    None,
    /// Placement into the registration `reg` the header was validated
    /// against (never whatever the STag names by the time a chunk comes).
    Tagged {
        stag: u32,
        reg: u64,
        to: u64,
    },
    Recv {
        wr: RecvWr,
        mo: u32,
    },
}

/// Per-FPDU receive state.
#[derive(Clone, Debug)]
pub(crate) struct RxCur {
    hdr: [u8; RX_HDR],
    hdr_len: usize,
    ulpdu_len: u16,
    stage: Stage,
    action: Action,
    placed: u32,
    /// Received Send: complete the RQE at the end of this FPDU.
    recv_last: Option<(u32, Opcode)>,
    /// Read Response whose last segment this is.
    read_done: Option<super::OrqAux>,
    /// A data message (Write, Read Response, Send variants), decoded at
    /// its header, with the STag it invalidates: its completion needs no
    /// second decode.
    data: Option<Option<u32>>,
    /// This FPDU is the RTR message.
    rtr: bool,
}

impl RxCur {
    pub(crate) const fn new() -> Self {
        RxCur {
            hdr: [0; RX_HDR],
            hdr_len: 0,
            ulpdu_len: 0,
            stage: Stage::Start,
            action: Action::None,
            placed: 0,
            recv_last: None,
            read_done: None,
            data: None,
            rtr: false,
        }
    }

    /// Forgets the message in progress (the stream failed).
    pub(crate) fn abort(&mut self) {
        self.stage = Stage::Skip;
        self.action = Action::None;
        self.recv_last = None;
        self.read_done = None;
        self.data = None;
    }

    fn hdr(&self) -> &[u8] {
        self.hdr.get(..self.hdr_len).unwrap_or(&[])
    }

    /// Copies `h` (the first octets of the ULPDU) as the header buffered.
    fn set_hdr(&mut self, h: &[u8]) {
        let n = h.len().min(RX_HDR);
        if let (Some(d), Some(s)) = (self.hdr.get_mut(..n), h.get(..n)) {
            d.copy_from_slice(s);
        }
        self.hdr_len = n;
    }
}

fn rdmap_header_len(op: Opcode, ulpdu_len: usize, ddp_len: usize) -> usize {
    match op {
        Opcode::Terminate | Opcode::CommitRequest => ulpdu_len,
        _ => ddp_len + op.header_len(),
    }
}

impl<const ORD: usize, const IRD: usize, S: StartupSlot> Qp<ORD, IRD, S> {
    /// Takes the next chunk of the TCP byte stream. Always consumes all of
    /// it (after a failure the rest is ignored).
    pub fn rx<H: Host + ?Sized, C: Crc32c + ?Sized>(
        &mut self,
        host: &mut H,
        crc: &C,
        input: &[u8],
    ) -> usize {
        let mut off = 0;
        if matches!(
            self.state,
            State::AwaitReply | State::AwaitRequest | State::OfferPending
        ) {
            off = self.rx_startup(host, crc, input);
            if self.state == State::OfferPending && off < input.len() {
                // Octets behind the Request: the machine fails the startup.
                let rest = input.get(off..).unwrap_or(&[]);
                off += self.rx_startup(host, crc, rest);
            }
        }
        while off < input.len() {
            if !matches!(self.state, State::Rts | State::Closing | State::AwaitRtr(_)) {
                break;
            }
            let Some(rest) = input.get(off..) else { break };
            // An FPDU that lies whole in this chunk goes in one step.
            match self.mpa_rx.whole(crc, rest) {
                Ok(Some((ulpdu, used))) => {
                    if let Some(u) = rest.get(ulpdu) {
                        self.rx_fpdu(host, u);
                    }
                    off = off.saturating_add(used);
                    continue;
                }
                Ok(None) => {}
                Err(e) => {
                    self.fail(host, e, None);
                    break;
                }
            }
            let step = match self.mpa_rx.poll(crc, rest) {
                Ok(s) => s,
                Err(e) => {
                    self.fail(host, e, None);
                    break;
                }
            };
            let no_event = step.event.is_none();
            match step.event {
                Some(MpaEvent::Header { ulpdu_len }) => self.on_header(host, ulpdu_len),
                Some(MpaEvent::Payload(r)) => {
                    if let Some(d) = rest.get(r) {
                        self.on_payload(host, d);
                    }
                }
                Some(MpaEvent::Complete) => self.on_complete(host),
                Some(MpaEvent::Marker { .. }) | None => {}
            }
            off = off.saturating_add(step.consumed.max(usize::from(no_event)));
        }
        input.len()
    }

    /// Feeds the startup machine; returns the octets it took (all of
    /// them once the startup failed: the rest is ignored).
    fn rx_startup<H: Host + ?Sized, C: Crc32c + ?Sized>(
        &mut self,
        host: &mut H,
        crc: &C,
        input: &[u8],
    ) -> usize {
        let Some(st) = self.startup.get_mut() else {
            return input.len();
        };
        let used = match st {
            Startup::Initiator(m) => m.receive(crc, input),
            Startup::Responder(m) => m.receive(input),
            Startup::None => return input.len(),
        };
        match st.poll() {
            None => used,
            Some(StartupEvent::Request(_)) => {
                self.state = State::OfferPending;
                host.event(Event::ConnectRequest);
                used
            }
            Some(StartupEvent::Established(p)) => {
                self.establish_params(&p);
                host.event(Event::Established);
                host.event(Event::Ready);
                used
            }
            Some(StartupEvent::Rejected { .. }) => {
                self.state = State::Closed;
                host.event(Event::Rejected);
                self.flush_all(host);
                input.len()
            }
            Some(StartupEvent::Failed(f)) => {
                // The machine queued the Terminate (RFC 6581 9) or the
                // rejecting Reply, if any; `tx` sends it.
                self.state = State::Error;
                host.event(if f.terminate {
                    Event::LocalTerminate(f.error)
                } else {
                    Event::NegotiationFailed(f.error)
                });
                self.flush_all(host);
                input.len()
            }
        }
    }

    fn rx_fail<H: Host + ?Sized>(&mut self, host: &mut H, e: TermError) {
        let len = self.rxc.ulpdu_len;
        let hdr = self.rxc.hdr;
        let n = self.rxc.hdr_len;
        self.rxc.abort();
        self.fail(host, e, hdr.get(..n).map(|h| (h, len)));
    }

    fn on_header<H: Host + ?Sized>(&mut self, host: &mut H, ulpdu_len: u16) {
        self.rxc.set_hdr(self.mpa_rx.header());
        if let Some(want) = self.header_in(host, ulpdu_len) {
            self.mpa_rx.extend_header(want);
        }
    }

    /// The first header octets of an FPDU (or, in stage `Extended`, all
    /// of them) are in `rxc.hdr`. Returns the header length to buffer when
    /// the opcode's header is longer than what is there; the caller
    /// extends the header and calls again.
    fn header_in<H: Host + ?Sized>(&mut self, host: &mut H, ulpdu_len: u16) -> Option<usize> {
        let n = self.rxc.hdr_len;
        if self.rxc.stage != Stage::Extended {
            // A new FPDU.
            self.rxc.ulpdu_len = ulpdu_len;
            self.rxc.action = Action::None;
            self.rxc.placed = 0;
            self.rxc.recv_last = None;
            self.rxc.read_done = None;
            self.rxc.data = None;
            self.rxc.rtr = false;
            if ulpdu_len == 0 {
                // RFC 6581 draft: a zero-length FULPDU as the RTR.
                self.rxc.stage = Stage::Body;
                if self.state == State::AwaitRtr(Rtr::Send) {
                    self.rxc.rtr = true;
                } else {
                    self.rx_fail(host, MALFORMED);
                }
                return None;
            }
            let h = self.rxc.hdr();
            let (Some(&c0), Some(&c1)) = (h.first(), h.get(1)) else {
                self.rxc.stage = Stage::Body;
                self.rx_fail(host, MALFORMED);
                return None;
            };
            let tagged = c0 & 0x80 != 0;
            let ddp_len = if tagged {
                TAGGED_HEADER_LEN
            } else {
                UNTAGGED_HEADER_LEN
            };
            let want = match Opcode::from_u8(Control::from_byte(c1).opcode) {
                Some(op) => rdmap_header_len(op, usize::from(ulpdu_len), ddp_len),
                None => ddp_len,
            }
            .min(RX_HDR);
            let reachable = want.min(usize::from(ulpdu_len));
            if reachable > n {
                self.rxc.stage = Stage::Extended;
                return Some(want);
            }
        }
        self.rxc.stage = Stage::Body;
        self.full_header(host);
        None
    }

    /// A whole FPDU whose ULPDU is `ulpdu` (its CRC checked): the same
    /// steps as the events [`crate::mpa::Rx::poll`] gives for it, without
    /// the per-event state machine.
    fn rx_fpdu<H: Host + ?Sized>(&mut self, host: &mut H, ulpdu: &[u8]) {
        let ulpdu_len = u16::try_from(ulpdu.len()).unwrap_or(u16::MAX);
        // As the MPA receiver buffers it: the first two octets, then as
        // many as the opcode's header has.
        self.rxc.set_hdr(ulpdu.get(..2).unwrap_or(ulpdu));
        if let Some(want) = self.header_in(host, ulpdu_len) {
            self.rxc.set_hdr(ulpdu.get(..want).unwrap_or(ulpdu));
            self.header_in(host, ulpdu_len);
        }
        if self.rxc.stage == Stage::Body {
            if let Some(p) = ulpdu.get(self.rxc.hdr_len..).filter(|p| !p.is_empty()) {
                self.on_payload(host, p);
            }
        }
        self.on_complete(host);
    }

    /// The whole header (DDP + RDMAP) is in `rxc.hdr`.
    fn full_header<H: Host + ?Sized>(&mut self, host: &mut H) {
        let hdr = self.rxc.hdr;
        let hdr = hdr.get(..self.rxc.hdr_len).unwrap_or(&[]);
        let msg = match rdmap::decode(hdr) {
            Ok(m) => m,
            Err(e) => {
                // A Commit Request too long to buffer is answered with Limit.
                if self.oversize_commit() {
                    return;
                }
                return self.rx_fail(host, e);
            }
        };
        let ddp_len = msg.ddp.buffer_len();
        let payload_len = usize::from(self.rxc.ulpdu_len).saturating_sub(ddp_len);
        let payload32 = u32::try_from(payload_len).unwrap_or(u32::MAX);
        if let State::AwaitRtr(k) = self.state {
            let ok = match (k, msg.opcode, msg.body) {
                (Rtr::Write, Opcode::Write, _) => payload_len == 0 && msg.ddp.last,
                (Rtr::Send, Opcode::Send, _) => payload_len == 0 && msg.ddp.last,
                (Rtr::Read, Opcode::ReadRequest, Body::ReadRequest(r)) => r.size == 0,
                _ => false,
            };
            if !ok {
                return self.rx_fail(host, llp::NO_MATCHING_RTR);
            }
            self.rxc.rtr = true;
            if k != Rtr::Send {
                // Send is accounted for (MSN) at the end of the FPDU.
                return;
            }
        }
        if matches!(msg.body, Body::Data) && !self.rxc.rtr {
            self.rxc.data = Some(msg.invalidate_stag());
        }
        match msg.ddp.model {
            Model::Tagged { stag, to } => {
                if msg.opcode == Opcode::ReadResponse {
                    // Validate only: the credit and the ORQ entry go when the
                    // FPDU is complete (CRC checked), so no later completion
                    // can overtake this Read's in between.
                    if let Err(e) = self.orq.on_read_response(stag, to, payload32, false) {
                        return self.rx_fail(host, e);
                    }
                    if msg.ddp.last {
                        self.rxc.read_done = self.orq_aux.front().copied();
                    }
                    if payload_len > 0 {
                        match rdmap::validate_read_response(host, self.cfg.pd, stag, to, payload32)
                        {
                            Ok(p) => {
                                self.rxc.action = Action::Tagged {
                                    stag,
                                    reg: p.reg,
                                    to,
                                }
                            }
                            Err(e) => self.rx_fail(host, e),
                        }
                    }
                } else if payload_len > 0 {
                    // A zero-length Write (e.g. an RTR) touches nothing.
                    match rdmap::validate_write(host, self.cfg.pd, stag, to, payload32) {
                        Ok(p) => {
                            self.rxc.action = Action::Tagged {
                                stag,
                                reg: p.reg,
                                to,
                            }
                        }
                        Err(e) => self.rx_fail(host, e),
                    }
                }
            }
            Model::Untagged { .. } if matches!(msg.body, Body::Data) && !self.rxc.rtr => {
                // Send variants: streamed into the RQ head.
                let head = host.rq_peek();
                let posted = Posted([head.map(|r| r.len), None, None, None]);
                let p = match self.urx.accept(&msg.ddp, payload_len, &posted) {
                    Ok(p) => p,
                    Err(e) => return self.rx_fail(host, e),
                };
                if p.last {
                    if let Some(stag) = msg.invalidate_stag() {
                        if let Err(e) = rdmap::validate_invalidate(host, self.cfg.pd, stag) {
                            return self.rx_fail(host, e);
                        }
                    }
                    self.rxc.recv_last = Some((p.mo.saturating_add(p.len), msg.opcode));
                }
                if let Some(wr) = head {
                    self.rxc.action = Action::Recv { wr, mo: p.mo };
                }
            }
            Model::Untagged { .. } => {}
        }
    }

    /// A Commit Request longer than the header buffer: answer Limit.
    fn oversize_commit(&mut self) -> bool {
        let h = self.rxc.hdr();
        let is_commit = h
            .get(1)
            .and_then(|&c| Opcode::from_u8(Control::from_byte(c).opcode))
            == Some(Opcode::CommitRequest);
        usize::from(self.rxc.ulpdu_len) > RX_HDR
            && is_commit
            && h.first().is_some_and(|&c| c & 0x80 == 0)
    }

    fn on_payload<H: Host + ?Sized>(&mut self, host: &mut H, data: &[u8]) {
        if self.rxc.stage != Stage::Body {
            return;
        }
        let off = self.rxc.placed;
        let r = match self.rxc.action {
            Action::None => Ok(()),
            Action::Tagged { stag, reg, to } => {
                host.place_tagged(stag, reg, to.wrapping_add(u64::from(off)), data)
            }
            Action::Recv { wr, mo } => host.place_recv(&wr, mo.saturating_add(off), data),
        };
        self.rxc.placed = off.saturating_add(u32::try_from(data.len()).unwrap_or(u32::MAX));
        if let Err(e) = r {
            self.rx_fail(host, e);
        }
    }

    fn on_complete<H: Host + ?Sized>(&mut self, host: &mut H) {
        let stage = core::mem::replace(&mut self.rxc.stage, Stage::Start);
        if stage != Stage::Body
            || !matches!(self.state, State::Rts | State::Closing | State::AwaitRtr(_))
        {
            return;
        }
        self.complete_fpdu(host);
        if !self.got_fpdu && matches!(self.state, State::Rts | State::Closing) {
            self.got_fpdu = true;
            if self.tx_gated && self.rtr_kind().is_none() {
                self.ungate(host);
            }
        }
    }

    fn complete_fpdu<H: Host + ?Sized>(&mut self, host: &mut H) {
        if self.rxc.ulpdu_len == 0 {
            // Zero-length FULPDU RTR (checked in on_header).
            self.ungate(host);
            return;
        }
        // (Never set for the RTR message: full_header decided both.)
        if let Some(invalidate) = self.rxc.data.take() {
            return self.complete_data(host, invalidate);
        }
        let hdr = self.rxc.hdr;
        let hdr = hdr.get(..self.rxc.hdr_len).unwrap_or(&[]);
        if self.oversize_commit() {
            let id = hdr.get(UNTAGGED_HEADER_LEN..UNTAGGED_HEADER_LEN + 4);
            let request_id = id.map_or(0, |b| u32::from_be_bytes([b[0], b[1], b[2], b[3]]));
            return self.admit_commit(host, request_id, CommitStatus::Limit);
        }
        let Ok(msg) = rdmap::decode(hdr) else { return };
        let pd = self.cfg.pd;
        if self.rxc.rtr {
            match msg.body {
                Body::ReadRequest(r) => {
                    if let Err(e) = self.urx.accept(
                        &msg.ddp,
                        msg.ddp_payload_len,
                        &Posted([None, Some(u32::MAX), None, None]),
                    ) {
                        return self.rx_fail(host, e);
                    }
                    match rdmap::validate_read_request(&r, host, pd, &mut self.irq) {
                        Ok(_) => {
                            let _ = self.irq_aux.push(IrqAux::Read);
                        }
                        Err(e) => return self.rx_fail(host, e),
                    }
                }
                Body::Data if msg.opcode == Opcode::Send => {
                    if let Err(e) =
                        self.urx
                            .accept(&msg.ddp, 0, &Posted([Some(0), None, None, None]))
                    {
                        return self.rx_fail(host, e);
                    }
                }
                _ => {}
            }
            self.ungate(host);
            return;
        }
        match msg.body {
            Body::Data => self.complete_data(host, msg.invalidate_stag()),
            Body::Immediate(imm) => {
                let head = host.rq_peek();
                let posted = Posted([head.map(|_| u32::MAX), None, None, None]);
                if let Err(e) = self.urx.accept(&msg.ddp, msg.ddp_payload_len, &posted) {
                    return self.rx_fail(host, e);
                }
                let Some(wr) = host.rq_pop() else {
                    return self.rx_fail(host, error::ddp::U_NO_BUFFER);
                };
                let mut c = Completion::new(
                    WorkQueue::Recv,
                    wr.wr_id,
                    CompOp::RecvImm,
                    Status::Success,
                    0,
                );
                c.imm = Some(imm.data);
                c.solicited = msg.opcode.solicited();
                host.complete(c);
            }
            Body::ReadRequest(r) => {
                let posted = Posted([None, (!self.irq.is_full()).then_some(u32::MAX), None, None]);
                if let Err(e) = self.urx.accept(&msg.ddp, msg.ddp_payload_len, &posted) {
                    return self.rx_fail(host, e);
                }
                match rdmap::validate_read_request(&r, host, pd, &mut self.irq) {
                    Ok(_) => {
                        let _ = self.irq_aux.push(IrqAux::Read);
                    }
                    Err(e) => self.rx_fail(host, e),
                }
            }
            Body::AtomicRequest(req) => {
                let posted = Posted([None, (!self.irq.is_full()).then_some(u32::MAX), None, None]);
                if let Err(e) = self.urx.accept(&msg.ddp, msg.ddp_payload_len, &posted) {
                    return self.rx_fail(host, e);
                }
                let plan = match rdmap::validate_atomic(&req, host, pd) {
                    Ok(p) => p,
                    Err(e) => return self.rx_fail(host, e),
                };
                let original = match host.atomic(&plan) {
                    Ok(v) => v,
                    Err(e) => return self.rx_fail(host, e),
                };
                if let Err(e) = self.irq.admit(InboundRequest::Atomic {
                    request_id: req.request_id,
                }) {
                    return self.rx_fail(host, e);
                }
                let _ = self.irq_aux.push(IrqAux::Atomic { original });
            }
            Body::CommitRequest(req) => {
                let posted = Posted([None, (!self.irq.is_full()).then_some(u32::MAX), None, None]);
                if let Err(e) = self.urx.accept(&msg.ddp, msg.ddp_payload_len, &posted) {
                    return self.rx_fail(host, e);
                }
                let plan = match rdmap::validate_commit(&req, host, pd, &mut self.irq) {
                    Ok(p) => p,
                    Err(e) => return self.rx_fail(host, e),
                };
                let mut regions =
                    [crate::wire::commit::Region::default(); crate::wire::commit::MAX_REGIONS];
                let mut count = 0;
                for (d, r) in regions.iter_mut().zip(plan.flushes()) {
                    *d = r;
                    count += 1;
                }
                let mut ok = true;
                for r in regions.iter().take(count) {
                    ok &= host.make_durable(r);
                }
                let resp = plan.response(ok);
                if resp.status == CommitStatus::Success {
                    if let Some(stag) = msg.invalidate_stag() {
                        let r = rdmap::validate_invalidate(host, pd, stag)
                            .and_then(|s| host.invalidate(s));
                        if let Err(e) = r {
                            return self.rx_fail(host, e);
                        }
                    }
                }
                let _ = self.irq_aux.push(IrqAux::Commit {
                    status: resp.status,
                });
            }
            Body::AtomicResponse(r) => {
                if let Err(e) = self.urx.accept(
                    &msg.ddp,
                    msg.ddp_payload_len,
                    &Posted([None, None, None, Some(u32::MAX)]),
                ) {
                    return self.rx_fail(host, e);
                }
                if let Err(e) = self.orq.on_atomic_response(&r) {
                    return self.rx_fail(host, e);
                }
                let Some(aux) = self.orq_aux.pop() else {
                    return self.rx_fail(host, error::rdmap::LOCAL_CATA);
                };
                let status = match host.write_atomic_result(&aux.local, r.original) {
                    Ok(()) => Status::Success,
                    Err(e) => Status::LocalError(e),
                };
                self.orq_completed(host, aux, status, Some(r.original));
            }
            Body::CommitResponse(r) => {
                if let Err(e) = self.urx.accept(
                    &msg.ddp,
                    msg.ddp_payload_len,
                    &Posted([None, None, None, Some(u32::MAX)]),
                ) {
                    return self.rx_fail(host, e);
                }
                if let Err(e) = self.orq.on_commit_response(&r) {
                    return self.rx_fail(host, e);
                }
                let Some(aux) = self.orq_aux.pop() else {
                    return self.rx_fail(host, error::rdmap::LOCAL_CATA);
                };
                let status = match r.status {
                    CommitStatus::Success => Status::Success,
                    s => Status::CommitFailed(s),
                };
                self.orq_completed(host, aux, status, None);
            }
            Body::Terminate(t) => {
                host.event(Event::TerminateReceived(t.error));
                self.state = State::Error;
                self.term = None;
                self.remote_term = Some(t.error);
                self.peer_term = Some(t);
                self.flush_all(host);
            }
        }
    }

    /// The end of a data message's FPDU (Write, Read Response, Send
    /// variants); `invalidate`: the STag a Send with Invalidate names.
    fn complete_data<H: Host + ?Sized>(&mut self, host: &mut H, invalidate: Option<u32>) {
        if let Some((len, op)) = self.rxc.recv_last.take() {
            let mut c = Completion::new(WorkQueue::Recv, 0, CompOp::Recv, Status::Success, len);
            c.solicited = op.solicited();
            if let Some(stag) = invalidate {
                if let Err(e) = host.invalidate(stag) {
                    return self.rx_fail(host, e);
                }
                c.invalidated = Some(stag);
            }
            match host.rq_pop() {
                Some(wr) => c.wr_id = wr.wr_id,
                None => return self.rx_fail(host, error::ddp::U_NO_BUFFER),
            }
            host.complete(c);
        }
        if self.rxc.read_done.take().is_some() {
            self.orq.pop();
            if let Some(aux) = self.orq_aux.pop() {
                // Every octet of the response is placed (this is the end
                // of its last FPDU): the sink may go now, whether or not
                // the Read is signaled, and before the consumer hears of
                // it (it may register the MR again at once).
                if aux.invalidate && !aux.internal {
                    if let Err(e) = host.invalidate_local(aux.local.stag) {
                        self.orq_completed(host, aux, Status::LocalError(e), None);
                        return self.fail(host, error::rdmap::LOCAL_CATA, None);
                    }
                }
                self.orq_completed(host, aux, Status::Success, None);
            }
        }
    }

    fn admit_commit<H: Host + ?Sized>(
        &mut self,
        host: &mut H,
        request_id: u32,
        status: CommitStatus,
    ) {
        // MSN accounting on QN 1 like any request.
        let seg = Segment::new_unchecked(self.rxc.hdr());
        let ddp = crate::wire::ddp::Repr::parse(&seg);
        let posted = Posted([None, (!self.irq.is_full()).then_some(u32::MAX), None, None]);
        let payload = usize::from(self.rxc.ulpdu_len).saturating_sub(UNTAGGED_HEADER_LEN);
        let r = ddp.and_then(|d| self.urx.accept(&d, payload, &posted));
        if let Err(e) = r {
            return self.rx_fail(host, e);
        }
        if let Err(e) = self.irq.admit(InboundRequest::Commit { request_id }) {
            return self.rx_fail(host, e);
        }
        let _ = self.irq_aux.push(IrqAux::Commit { status });
    }

    /// Responder: the RTR kind still awaited, if any.
    pub fn awaiting_rtr(&self) -> Option<Rtr> {
        match (self.state, self.rtr) {
            (State::AwaitRtr(k), Some(RtrMode::Zero(_))) => Some(k),
            _ => None,
        }
    }
}
