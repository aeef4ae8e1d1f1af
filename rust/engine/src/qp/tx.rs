// SPDX-License-Identifier: GPL-2.0
//! The transmit scheduler (RFC 5040 sections 5 and 6, RFC 7306 sections 5
//! and 6, RFC 6581 section 9 for the RTR): turns the startup octets, the
//! Terminate, the RTR, responses (IRQ) and send queue work into FPDUs for
//! the [`FpduEncoder`](super::FpduEncoder).

use super::encoder::{Src, TX_HDR};
use super::plan::{Out, SliceOut, TxPlan};
use super::{
    seq_lt, sq_opcode, CompOp, Completion, CurWqe, Event, Host, IrqAux, Local, OrqAux, Qp, SendOp,
    SendWr, StartupSlot, State, Status, WorkQueue,
};
use crate::crc::Crc32c;
use crate::ddp::Segmenter;
use crate::error::{self, TermError};
use crate::mpa::negotiate::RtrMode;
use crate::rdmap::{InboundRequest, OutboundRequest};
use crate::wire::atomic as atomicw;
use crate::wire::commit as commitw;
use crate::wire::ddp::{Model, Repr as DdpRepr, Segment};
use crate::wire::immediate;
use crate::wire::mpa::Rtr;
use crate::wire::rdmap::{qn, Control, Opcode, ReadRequest, ReadRequestRepr};
/// What to do when the FPDU in flight is complete.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub(crate) enum Done {
    #[default]
    Nothing,
    /// The control frame (not an FPDU).
    Terminate,
    /// The send queue entry's message segment; `last`: its last FPDU.
    Sq { last: bool },
    /// An IRQ response segment; `last`: pop the IRQ.
    Resp { last: bool },
}

/// The message being segmented (messages are never interleaved).
#[derive(Clone, Debug)]
pub(crate) enum Msg {
    Sq(Segmenter, Src),
    /// A Read Response: its source STag, registration and TO.
    Resp(Segmenter, u32, u64, u64),
}

/// Transmit-side state kept in [`Qp`] beyond the encoder.
#[derive(Clone, Debug, Default)]
pub(crate) struct TxState {
    pub(crate) done: Done,
    pub(crate) msg: Option<Msg>,
}

fn ddp_header(buf: &mut [u8], repr: &DdpRepr) -> usize {
    let n = repr.buffer_len();
    if let Some(b) = buf.get_mut(..n) {
        repr.emit(&mut Segment::new_unchecked(b));
    }
    n
}

fn untagged(op: Opcode, rsvd_ulp: u32, q: u32, msn: u32) -> DdpRepr {
    DdpRepr {
        last: true,
        ulp_ctrl: Control::new(op).to_byte(),
        model: Model::Untagged {
            rsvd_ulp,
            qn: q,
            msn,
            mo: 0,
        },
    }
}

impl<const ORD: usize, const IRD: usize, S: StartupSlot> Qp<ORD, IRD, S> {
    fn next_msn(&mut self, q: u32) -> u32 {
        match self.msn.get_mut(q as usize) {
            Some(m) => {
                let v = *m;
                *m = m.wrapping_add(1);
                v
            }
            None => 0,
        }
    }

    /// Fills `out` with the next octets to send; returns how many. All of
    /// them must be sent, in order.
    pub fn tx<H: Host + ?Sized, C: Crc32c + ?Sized>(
        &mut self,
        host: &mut H,
        crc: &C,
        out: &mut [u8],
    ) -> usize {
        self.tx_to(host, crc, &mut SliceOut { buf: out, at: 0 })
    }

    /// Like [`Qp::tx`], into a zero-copy plan: payload the host accepts by
    /// reference ([`Host::payload_by_ref`]) is not copied. Returns the
    /// stream octets planned; all must be sent, in the plan's order.
    pub fn tx_plan<H: Host + ?Sized, C: Crc32c + ?Sized>(
        &mut self,
        host: &mut H,
        crc: &C,
        plan: &mut TxPlan<'_>,
    ) -> usize {
        self.tx_to(host, crc, plan)
    }

    /// Payloads of at least `min` octets go by reference when the output
    /// is a [`TxPlan`] and the host takes them (`None`: always copy).
    pub fn set_tx_ref_min(&mut self, min: Option<usize>) {
        self.enc.set_ref_min(min);
    }

    fn tx_to<H: Host + ?Sized, C: Crc32c + ?Sized, O: Out + ?Sized>(
        &mut self,
        host: &mut H,
        crc: &C,
        out: &mut O,
    ) -> usize {
        let mut at = 0;
        self.sq_dry = false;
        // The MPA startup's octets first.
        let src = self.startup.get().transmit();
        if !src.is_empty() {
            let d = out.reserve(src.len());
            let n = d.len();
            if let Some(s) = src.get(..n) {
                d.copy_from_slice(s);
            }
            if let Some(st) = self.startup.get_mut() {
                st.sent(n);
            }
            at += n;
        }
        while out.room() > 0 && self.startup.get().transmit().is_empty() {
            if !self.enc.busy() && !self.plan(host) {
                break;
            }
            let w = self.enc.write_to(host, crc, out);
            at += w.len;
            if let (Some(e), Done::Sq { .. }, Some(c)) = (w.error, self.txs.done, self.cur.as_mut())
            {
                // The request whose data could not be read completes with
                // the error once its FPDU is out; the stream terminates.
                c.error = Some(e);
            }
            // A Read Response's source refused now (it changed since the
            // request's check) is the remote protection error that check
            // would have given (RFC 5040 7.2); a local request's data that
            // cannot be read is a local catastrophic error.
            let resp = matches!(self.txs.done, Done::Resp { .. });
            if w.finished {
                self.fpdu_done(host);
            }
            if let Some(e) = w.error {
                self.fail(host, if resp { e } else { error::rdmap::LOCAL_CATA }, None);
            }
            if w.len == 0 && !w.finished {
                break; // the output is full
            }
        }
        at
    }

    /// Like [`Qp::tx`] over several buffers, filled in order.
    pub fn tx_vectored<H: Host + ?Sized, C: Crc32c + ?Sized>(
        &mut self,
        host: &mut H,
        crc: &C,
        outs: &mut [&mut [u8]],
    ) -> usize {
        let mut total = 0;
        for o in outs.iter_mut() {
            let n = self.tx(host, crc, o);
            total += n;
            if n < o.len() {
                break;
            }
        }
        total
    }

    fn fpdu_done<H: Host + ?Sized>(&mut self, host: &mut H) {
        let done = core::mem::take(&mut self.txs.done);
        match done {
            Done::Nothing => {}
            Done::Terminate => {
                self.term_sent = true;
                self.state = State::Error;
            }
            Done::Sq { last } => {
                if let Some(c) = self.cur.as_ref().and_then(|c| c.error.map(|e| (c.wr, e))) {
                    self.cur = None;
                    self.txs.msg = None;
                    host.complete(Completion::new(
                        WorkQueue::Send,
                        c.0.wr_id,
                        sq_opcode(&c.0.op),
                        Status::LocalError(c.1),
                        0,
                    ));
                } else if last {
                    self.sq_wqe_sent(host);
                }
            }
            Done::Resp { last } => {
                if last {
                    self.irq.pop();
                    self.irq_aux.pop();
                    self.txs.msg = None;
                }
            }
        }
        if self.flush_pending {
            self.flush_send(host);
        }
        self.check_closed(host);
    }

    /// The current WQE's last FPDU is out.
    fn sq_wqe_sent<H: Host + ?Sized>(&mut self, host: &mut H) {
        // Not `let Some(c) = self.cur`: that copies the whole WR.
        let Some(c) = self.cur.as_mut() else { return };
        self.txs.msg = None;
        match c.wr.op {
            SendOp::WriteImm { .. } if !c.imm_phase => {
                c.imm_phase = true;
            }
            SendOp::Read { .. } | SendOp::Atomic { .. } | SendOp::Commit { .. } => {
                // Completes with the response.
                self.cur = None;
            }
            _ => {
                let signaled = c.wr.flags.contains(super::Flags::SIGNALED);
                let comp = Completion::new(
                    WorkQueue::Send,
                    c.wr.wr_id,
                    sq_opcode(&c.wr.op),
                    Status::Success,
                    c.wr.len,
                );
                let seq = c.seq;
                self.cur = None;
                if signaled {
                    self.sq_complete(host, seq, comp);
                }
            }
        }
    }

    /// Starts the next FPDU; `false` if there is nothing to send now.
    fn plan<H: Host + ?Sized>(&mut self, host: &mut H) -> bool {
        // Only the send queue can have work (the common last look of a
        // round): ask it before clearing a header buffer.
        if (self.term.is_none() || self.term_sent)
            && self.rtr_to_send.is_none()
            && self.txs.msg.is_none()
            && self.irq.front().is_none()
            && self.cur.is_none()
            && !self.take_sq_wr(host)
        {
            return false;
        }
        let mut hdr = [0u8; TX_HDR];
        self.plan_in(host, &mut hdr)
    }

    /// Makes the SQ's next WR the current one (`cur`), if the stream may
    /// start one; whether it did.
    fn take_sq_wr<H: Host + ?Sized>(&mut self, host: &mut H) -> bool {
        if self.state != State::Rts || self.tx_gated || self.held.is_full() || self.sq_dry {
            return false;
        }
        // The host writes the WR into its place here, not through a
        // return value and a move (two copies of it).
        let seq = self.next_seq;
        let c = self.cur.insert(CurWqe {
            wr: SendWr::EMPTY,
            seq,
            imm_phase: false,
            started: false,
            error: None,
        });
        if !host.sq_next_into(&mut c.wr) {
            self.cur = None;
            return false;
        }
        self.sq_dry = host.sq_drained();
        self.next_seq = seq.wrapping_add(1);
        true
    }

    /// [`Self::plan`] with the header built in `hdr`, all zeros. A step
    /// that only sets up the next one (a message to segment, a refused
    /// WR) looks again with the same `hdr`, which it has not written:
    /// one cleared buffer per FPDU, not one per step.
    fn plan_in<H: Host + ?Sized>(&mut self, host: &mut H, hdr: &mut [u8; TX_HDR]) -> bool {
        if let (Some(t), false) = (self.term, self.term_sent) {
            let msn = self.next_msn(qn::TERMINATE);
            let Some(n) = t.emit_segment(msn, hdr) else {
                return false;
            };
            self.txs.msg = None;
            self.txs.done = Done::Terminate;
            return self.enc.start(hdr.get(..n).unwrap_or(&[]), Src::None, 0);
        }
        if !matches!(self.state, State::Rts | State::Closing) || self.tx_gated {
            return false;
        }
        if let Some(k) = self.rtr_to_send.take() {
            let n = match k {
                Rtr::Write => ddp_header(
                    hdr,
                    &DdpRepr {
                        last: true,
                        ulp_ctrl: Control::new(Opcode::Write).to_byte(),
                        model: Model::Tagged { stag: 0, to: 0 },
                    },
                ),
                Rtr::Send => {
                    let msn = self.next_msn(qn::SEND);
                    ddp_header(hdr, &untagged(Opcode::Send, 0, qn::SEND, msn))
                }
                Rtr::Read => {
                    let r = OutboundRequest::Read {
                        sink_stag: 0,
                        sink_to: 0,
                        len: 0,
                    };
                    let aux = OrqAux {
                        seq: self.next_seq,
                        wr_id: 0,
                        local: Local::default(),
                        signaled: false,
                        opcode: CompOp::Read,
                        len: 0,
                        internal: true,
                        invalidate: false,
                    };
                    if !self.orq.try_issue(r) || self.orq_aux.push(aux).is_err() {
                        self.fail(host, error::rdmap::LOCAL_CATA, None);
                        return false;
                    }
                    let msn = self.next_msn(qn::READ_REQUEST);
                    let d = ddp_header(
                        hdr,
                        &untagged(Opcode::ReadRequest, 0, qn::READ_REQUEST, msn),
                    );
                    let rr = ReadRequestRepr {
                        sink_stag: 0,
                        sink_to: 0,
                        size: 0,
                        src_stag: 0,
                        src_to: 0,
                    };
                    if let Some(b) = hdr.get_mut(d..d + rr.buffer_len()) {
                        rr.emit(&mut ReadRequest::new_unchecked(b));
                    }
                    d + rr.buffer_len()
                }
            };
            self.txs.done = Done::Nothing;
            return self.enc.start(hdr.get(..n).unwrap_or(&[]), Src::None, 0);
        }
        // Continue the message being segmented.
        if let Some(m) = self.txs.msg.as_mut() {
            let (seg, src, resp) = match m {
                Msg::Sq(s, src) => (s.next(), *src, false),
                Msg::Resp(s, stag, reg, to) => (
                    s.next(),
                    Src::Tagged {
                        stag: *stag,
                        reg: *reg,
                        to: *to,
                    },
                    true,
                ),
            };
            let Some((repr, range)) = seg else {
                self.txs.msg = None;
                return self.plan_in(host, hdr);
            };
            let n = ddp_header(hdr, &repr);
            let off = u32::try_from(range.start).unwrap_or(u32::MAX);
            let src = match src {
                Src::Local { local, offset } => Src::Local {
                    local,
                    offset: offset.saturating_add(off),
                },
                Src::Tagged { stag, reg, to } => Src::Tagged {
                    stag,
                    reg,
                    to: to.wrapping_add(u64::from(off)),
                },
                Src::None => Src::None,
            };
            self.txs.done = if resp {
                Done::Resp { last: repr.last }
            } else {
                Done::Sq { last: repr.last }
            };
            return self
                .enc
                .start(hdr.get(..n).unwrap_or(&[]), src, range.len());
        }
        // Responses before new send queue work.
        if let (Some(&front), Some(&aux)) = (self.irq.front(), self.irq_aux.front()) {
            return self.plan_response(host, front, aux, hdr);
        }
        self.plan_sq(host, hdr)
    }

    fn plan_response<H: Host + ?Sized>(
        &mut self,
        host: &mut H,
        front: InboundRequest,
        aux: IrqAux,
        hdr: &mut [u8; TX_HDR],
    ) -> bool {
        match (front, aux) {
            (InboundRequest::Read(plan), _) => match plan.segments(self.mulpdu) {
                Ok(s) => {
                    self.txs.msg = Some(Msg::Resp(s, plan.src_stag, plan.src_reg, plan.src_to));
                    self.plan_in(host, hdr)
                }
                Err(e) => {
                    self.fail(host, e, None);
                    self.plan_in(host, hdr)
                }
            },
            (InboundRequest::Atomic { request_id }, IrqAux::Atomic { original }) => {
                let msn = self.next_msn(qn::RESPONSE);
                let d = ddp_header(hdr, &untagged(Opcode::AtomicResponse, 0, qn::RESPONSE, msn));
                let r = atomicw::ResponseRepr {
                    request_id,
                    original,
                };
                if let Some(b) = hdr.get_mut(d..d + r.buffer_len()) {
                    r.emit(&mut atomicw::Response::new_unchecked(b));
                }
                self.txs.done = Done::Resp { last: true };
                self.enc
                    .start(hdr.get(..d + r.buffer_len()).unwrap_or(&[]), Src::None, 0)
            }
            (InboundRequest::Commit { request_id }, IrqAux::Commit { status }) => {
                let msn = self.next_msn(qn::RESPONSE);
                let d = ddp_header(hdr, &untagged(Opcode::CommitResponse, 0, qn::RESPONSE, msn));
                let r = commitw::ResponseRepr { request_id, status };
                if let Some(b) = hdr.get_mut(d..d + r.buffer_len()) {
                    r.emit(&mut commitw::Response::new_unchecked(b));
                }
                self.txs.done = Done::Resp { last: true };
                self.enc
                    .start(hdr.get(..d + r.buffer_len()).unwrap_or(&[]), Src::None, 0)
            }
            _ => {
                // IRQ and its results out of step: cannot happen.
                self.fail(host, error::rdmap::LOCAL_CATA, None);
                self.plan_in(host, hdr)
            }
        }
    }

    fn plan_sq<H: Host + ?Sized>(&mut self, host: &mut H, hdr: &mut [u8; TX_HDR]) -> bool {
        if self.cur.is_none() && !self.take_sq_wr(host) {
            return false;
        }
        // The WR (about 200 octets, for a Commit's regions) is copied
        // once out of `cur`: the closures below take the QP itself.
        let Some(c) = self.cur.as_ref() else {
            return false;
        };
        let (wr, c_seq, c_started, c_imm_phase) = (c.wr, c.seq, c.started, c.imm_phase);
        let needs_credit = matches!(
            wr.op,
            SendOp::Read { .. } | SendOp::Atomic { .. } | SendOp::Commit { .. }
        );
        if !c_started && wr.flags.contains(super::Flags::FENCE) && !self.orq.is_empty() {
            return false;
        }
        if !c_started && needs_credit && self.orq.is_full() {
            return false;
        }
        if let Some(cc) = self.cur.as_mut() {
            cc.started = true;
        }
        let se = wr.flags.contains(super::Flags::SOLICITED);
        let ctrl = |op| Control::new(op).to_byte();
        // A WR refused before any of it went out: it completes with the
        // error, and the stream ends (verbs: the QP goes to Error).
        let local_err = |qp: &mut Self, host: &mut H, hdr: &mut [u8; TX_HDR], e: TermError| {
            qp.cur = None;
            host.complete(Completion::new(
                WorkQueue::Send,
                wr.wr_id,
                sq_opcode(&wr.op),
                Status::LocalError(e),
                0,
            ));
            qp.fail(host, error::rdmap::LOCAL_CATA, None);
            qp.plan_in(host, hdr)
        };
        // Send and Write: the WR's local data, segmented.
        let local_msg = |qp: &mut Self,
                         host: &mut H,
                         hdr: &mut [u8; TX_HDR],
                         s: Result<Segmenter, TermError>| match s {
            Ok(mut s) => {
                let src = Src::Local {
                    local: wr.local,
                    offset: 0,
                };
                if s.segment_count() == 1 {
                    // A message of one FPDU (every small one) starts here:
                    // not kept in `txs.msg` for another pass of `plan_in`
                    // to take its only segment.
                    if let Some((repr, range)) = s.next() {
                        let n = ddp_header(hdr, &repr);
                        qp.txs.done = Done::Sq { last: true };
                        return qp.enc.start(hdr.get(..n).unwrap_or(&[]), src, range.len());
                    }
                }
                qp.txs.msg = Some(Msg::Sq(s, src));
                qp.plan_in(host, hdr)
            }
            Err(e) => local_err(qp, host, hdr, e),
        };
        let credit = |qp: &mut Self, r: OutboundRequest, opcode: CompOp| -> bool {
            let aux = OrqAux {
                seq: c_seq,
                wr_id: wr.wr_id,
                local: wr.local,
                signaled: wr.flags.contains(super::Flags::SIGNALED),
                opcode,
                len: wr.len,
                internal: false,
                invalidate: matches!(wr.op, SendOp::Read { .. })
                    && wr.flags.contains(super::Flags::INVALIDATE_SINK),
            };
            qp.orq.try_issue(r) && qp.orq_aux.push(aux).is_ok()
        };
        let sends_local = match wr.op {
            SendOp::Send { .. } => true,
            SendOp::Write { .. } | SendOp::WriteImm { .. } => !c_imm_phase,
            _ => false,
        };
        if sends_local && wr.len > 0 {
            if let Err(e) = host.check_source(&wr.local, wr.len) {
                return local_err(self, host, hdr, e);
            }
        }
        match wr.op {
            SendOp::Send { invalidate } => {
                let op = match (invalidate.is_some(), se) {
                    (false, false) => Opcode::Send,
                    (false, true) => Opcode::SendSe,
                    (true, false) => Opcode::SendInvalidate,
                    (true, true) => Opcode::SendSeInvalidate,
                };
                let msn = self.next_msn(qn::SEND);
                let s = Segmenter::untagged(
                    ctrl(op),
                    invalidate.unwrap_or(0),
                    qn::SEND,
                    msn,
                    wr.len,
                    self.mulpdu,
                );
                local_msg(self, host, hdr, s)
            }
            SendOp::Write { remote } | SendOp::WriteImm { remote, .. } if !c_imm_phase => {
                let s = Segmenter::tagged(
                    ctrl(Opcode::Write),
                    remote.stag,
                    remote.to,
                    wr.len,
                    self.mulpdu,
                );
                local_msg(self, host, hdr, s)
            }
            SendOp::Immediate { data } | SendOp::WriteImm { data, .. } => {
                let op = if se {
                    Opcode::ImmediateDataSe
                } else {
                    Opcode::ImmediateData
                };
                let msn = self.next_msn(qn::SEND);
                let d = ddp_header(hdr, &untagged(op, 0, qn::SEND, msn));
                let r = immediate::Repr { data };
                if let Some(b) = hdr.get_mut(d..d + r.buffer_len()) {
                    r.emit(&mut immediate::Header::new_unchecked(b));
                }
                self.txs.done = Done::Sq { last: true };
                self.enc
                    .start(hdr.get(..d + r.buffer_len()).unwrap_or(&[]), Src::None, 0)
            }
            SendOp::Read { remote } => {
                let r = OutboundRequest::Read {
                    sink_stag: wr.local.stag,
                    sink_to: wr.local.to,
                    len: wr.len,
                };
                if !credit(self, r, CompOp::Read) {
                    return local_err(self, host, hdr, error::rdmap::LOCAL_CATA);
                }
                let msn = self.next_msn(qn::READ_REQUEST);
                let d = ddp_header(
                    hdr,
                    &untagged(Opcode::ReadRequest, 0, qn::READ_REQUEST, msn),
                );
                let rr = ReadRequestRepr {
                    sink_stag: wr.local.stag,
                    sink_to: wr.local.to,
                    size: wr.len,
                    src_stag: remote.stag,
                    src_to: remote.to,
                };
                if let Some(b) = hdr.get_mut(d..d + rr.buffer_len()) {
                    rr.emit(&mut ReadRequest::new_unchecked(b));
                }
                self.txs.done = Done::Sq { last: true };
                self.enc
                    .start(hdr.get(..d + rr.buffer_len()).unwrap_or(&[]), Src::None, 0)
            }
            SendOp::Atomic {
                op,
                remote,
                add_swap,
                add_swap_mask,
                compare,
                compare_mask,
            } => {
                let request_id = self.next_req_id;
                self.next_req_id = self.next_req_id.wrapping_add(1);
                if !credit(
                    self,
                    OutboundRequest::Atomic { request_id },
                    sq_opcode(&wr.op),
                ) {
                    return local_err(self, host, hdr, error::rdmap::LOCAL_CATA);
                }
                let msn = self.next_msn(qn::READ_REQUEST);
                let d = ddp_header(
                    hdr,
                    &untagged(Opcode::AtomicRequest, 0, qn::READ_REQUEST, msn),
                );
                let r = atomicw::RequestRepr {
                    op,
                    request_id,
                    stag: remote.stag,
                    to: remote.to,
                    add_swap,
                    add_swap_mask,
                    compare,
                    compare_mask,
                };
                if let Some(b) = hdr.get_mut(d..d + r.buffer_len()) {
                    r.emit(&mut atomicw::Request::new_unchecked(b));
                }
                self.txs.done = Done::Sq { last: true };
                self.enc
                    .start(hdr.get(..d + r.buffer_len()).unwrap_or(&[]), Src::None, 0)
            }
            SendOp::Commit { request } => {
                let request_id = self.next_req_id;
                self.next_req_id = self.next_req_id.wrapping_add(1);
                let Some(r) = commitw::RequestRepr::new(request_id, request.regions()) else {
                    return local_err(self, host, hdr, error::rdmap::LOCAL_CATA);
                };
                if !credit(self, OutboundRequest::Commit { request_id }, CompOp::Commit) {
                    return local_err(self, host, hdr, error::rdmap::LOCAL_CATA);
                }
                let msn = self.next_msn(qn::READ_REQUEST);
                let d = ddp_header(
                    hdr,
                    &untagged(Opcode::CommitRequest, 0, qn::READ_REQUEST, msn),
                );
                if let Some(b) = hdr.get_mut(d..d + r.buffer_len()) {
                    r.emit(&mut commitw::Request::new_unchecked(b));
                }
                self.txs.done = Done::Sq { last: true };
                self.enc
                    .start(hdr.get(..d + r.buffer_len()).unwrap_or(&[]), Src::None, 0)
            }
            SendOp::Write { .. } => false,
        }
    }

    /// Called by the RX path when an ORQ entry completed: releases the
    /// held completions behind it.
    pub(crate) fn orq_completed<H: Host + ?Sized>(
        &mut self,
        host: &mut H,
        aux: OrqAux,
        status: Status,
        original: Option<u64>,
    ) {
        if !aux.internal && (aux.signaled || status != Status::Success) {
            let mut c = Completion::new(
                WorkQueue::Send,
                aux.wr_id,
                aux.opcode,
                status,
                if aux.opcode == CompOp::Read {
                    aux.len
                } else {
                    0
                },
            );
            c.atomic_original = original;
            // Older held completions go first.
            self.release_held_before(host, aux.seq);
            host.complete(c);
        }
        self.release_held(host);
        self.check_closed(host);
    }

    fn release_held_before<H: Host + ?Sized>(&mut self, host: &mut H, seq: u32) {
        while let Some(&(s, c)) = self.held.front() {
            if !seq_lt(s, seq) {
                break;
            }
            self.held.pop();
            host.complete(c);
        }
    }

    /// Called when the responder saw the initiator's first FPDU or RTR.
    pub(crate) fn ungate<H: Host + ?Sized>(&mut self, host: &mut H) {
        self.tx_gated = false;
        if let State::AwaitRtr(_) = self.state {
            self.state = State::Rts;
            host.event(Event::Ready);
        }
    }

    /// Whether the RTR kind needs a specific handling (used by rx).
    pub(crate) fn rtr_kind(&self) -> Option<Rtr> {
        match self.rtr {
            Some(RtrMode::Zero(k)) => Some(k),
            _ => None,
        }
    }
}
