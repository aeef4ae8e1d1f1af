// SPDX-License-Identifier: GPL-2.0
//! Stream failure, flush and send-queue completion order (RFC 5040
//! sections 5.3 and 7, RFC 7306 section 8.1): a protocol error queues a
//! Terminate and completes every outstanding work request with
//! [`Status::Flushed`] in posting order.

use super::{
    sq_opcode, CompOp, Completion, Event, Host, Qp, StartupSlot, State, Status, WorkQueue,
};
use crate::error::TermError;
use crate::wire::terminate;

/// Most work requests one flush takes from each of the host's queues. A
/// queue the host shares with a process may be refilled as fast as it is
/// taken from: a flush that took until the queue was empty would never
/// end. A host bounds what it gives a flush to what was posted when it
/// began (rsiw's rings: what the producer index said then, at most a
/// ring); this is the engine's own bound, the largest queue a host may
/// have. What is posted after a flush is the next flush's, which the
/// host asks for ([`Qp::flush`]) when it is posted to the failed QP.
pub const MAX_FLUSH: usize = 1 << 20;

impl<const ORD: usize, const IRD: usize, S: StartupSlot> Qp<ORD, IRD, S> {
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
        // Receives: the one being filled and the rest (of a queue of the
        // QP's own: see `Host::rq_flush_next`).
        self.rxc.abort();
        for _ in 0..MAX_FLUSH {
            let Some(r) = host.rq_flush_next() else { break };
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
        // A Read, atomic or Commit whose request FPDU was cut short by the
        // connection's loss is both the current WQE and in the ORQ (issued
        // when its FPDU started): it completes once, from the ORQ.
        let cur_seq = self.cur.map(|c| c.seq);
        let mut cur_issued = false;
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
                    // (An internal entry, the RTR Read, shares the next WR's seq.)
                    cur_issued |= !a.internal && Some(a.seq) == cur_seq;
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
        if let Some(c) = self.cur.take().filter(|_| !cur_issued) {
            host.complete(Completion::new(
                WorkQueue::Send,
                c.wr.wr_id,
                sq_opcode(&c.wr.op),
                remote.take().map_or(Status::Flushed, Status::RemoteError),
                0,
            ));
        }
        self.rtr_to_send = None;
        for _ in 0..MAX_FLUSH {
            let Some(wr) = host.sq_flush_next() else {
                break;
            };
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
