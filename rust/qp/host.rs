// SPDX-License-Identifier: GPL-2.0
//! The engine's view of the kernel (`engine::qp::Host`): queues, CQs and
//! registered memory, and the mapping of engine completions to work
//! completions.

use super::*;
use crate::ffi::mem::pages::access;

/// Engine events collected during one engine call: the engine's own
/// [`Event`]s, a few octets each (a Terminate received is its error; the
/// engine keeps the whole message), as a list is made on every call.
#[derive(Default)]
pub(crate) struct Events {
    pub(super) list: [Option<Event>; 8],
    pub(super) n: usize,
}

impl Events {
    pub(crate) fn push(&mut self, e: Event) {
        if let Some(slot) = self.list.get_mut(self.n) {
            *slot = Some(e);
            self.n += 1;
        }
    }

    pub(crate) fn iter(&self) -> impl Iterator<Item = &Event> {
        self.list[..self.n].iter().flatten()
    }
}

/// The engine's view of the kernel: queues, CQs and registered memory.
pub(crate) struct QpHost<'a> {
    pub(super) qp: &'a Qp,
    pub(super) st: &'a mut HostState,
    pub(super) events: &'a mut Events,
    /// Zero-copy TX round being filled: the pages referenced so far.
    pub(super) zc: Option<&'a mut Segments>,
}

/// Most local entries (registration, invalidation) one look at the send
/// queue carries out (`sq_next_into`).
const MAX_LOCAL_RUN: usize = 64;

/// A local memory problem ends the stream with a local catastrophic error.
pub(crate) fn local_err(_: MrError) -> TermError {
    error::rdmap::LOCAL_CATA
}

/// The rest of a tagged segment refused after its header was accepted
/// (its STag names another registration now, or none): the DDP tagged
/// buffer error the header's own check would have given (RFC 5041 7.2),
/// as siw answers, not a local catastrophic error.
fn tagged_sink_err(e: MrError) -> TermError {
    use error::ddp;
    match e {
        MrError::InvalidStag | MrError::State => ddp::T_INVALID_STAG,
        MrError::Pd => ddp::T_STAG_NOT_ASSOC,
        MrError::Access | MrError::NotPersistent => error::rdmap::ACCESS,
        MrError::Wrap => ddp::T_TO_WRAP,
        MrError::Bounds | MrError::Misaligned => ddp::T_BASE_BOUNDS,
    }
}

/// A send WR's own SGE fails its checks (lkey, PD, rights, bounds): the WR
/// completes with `IB_WC_LOC_PROT_ERR`, as on siw and rxe (a protection
/// error on the send queue, see `wc_status`; nothing goes to the peer).
pub(crate) fn local_source_err(_: MrError) -> TermError {
    error::rdmap::PROT_UNSPECIFIED
}

/// Reads `buf.len()` octets of a send WR's source from its SGEs, each one
/// checked as the source check checks it (its MR's state, key, PD and
/// bounds), under the MR's lock once.
fn gather(qp: &Qp, mrs: &MrCache, sges: &[Sge], buf: &mut [u8]) -> Result<(), TermError> {
    let stags = qp.links.device().stags();
    let mut done = 0;
    for sge in sges {
        if done == buf.len() {
            break;
        }
        let n = (sge.len as usize).min(buf.len() - done);
        let dst = &mut buf[done..done + n];
        mrs.with(
            sge.lkey,
            || stags.get(sge.lkey),
            |mr| mr.copy_from_as(sge.lkey, Grant::local(qp.pd, 0), sge.addr, dst),
        )
        .map_err(local_source_err)?;
        done += n;
    }
    if done == buf.len() {
        Ok(())
    } else {
        Err(error::rdmap::PROT_UNSPECIFIED)
    }
}

impl QpHost<'_> {
    pub(crate) fn stags(&self) -> &crate::mem::mr::StagTable {
        self.qp.links.device().stags()
    }

    /// Runs `f` on the MR `stag` names, through the stream's cache of
    /// recent MRs (see [`MrCache`]).
    pub(crate) fn with_mr<R>(
        &self,
        stag: u32,
        f: impl FnMut(&Mr) -> Result<R, MrError>,
    ) -> Result<R, MrError> {
        self.st.mrs.with(stag, || self.stags().get(stag), f)
    }

    /// Copies between `sges` (starting `offset` bytes in) and `buf`.
    pub(crate) fn scatter_gather(
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
            let addr = sge
                .addr
                .checked_add(offset)
                .ok_or(error::rdmap::LOCAL_CATA)?;
            let pd = self.qp.pd;
            match to_sges {
                Some(data) => {
                    let need = access::LOCAL_WRITE;
                    self.with_mr(sge.lkey, |mr| {
                        mr.copy_to_as(
                            sge.lkey,
                            Grant::local(pd, need),
                            addr,
                            &data[done..done + n],
                        )
                    })
                    .map_err(local_err)?;
                }
                None => {
                    let dst = &mut buf[done..done + n];
                    self.with_mr(sge.lkey, |mr| {
                        mr.copy_from_as(sge.lkey, Grant::local(pd, 0), addr, dst)
                    })
                    .map_err(local_err)?;
                }
            }
            done += n;
            offset = 0;
        }
        if done == want {
            Ok(())
        } else {
            Err(error::rdmap::LOCAL_CATA)
        }
    }

    /// Takes the receive WR for the message being received off the RQ or
    /// SRQ, unless one is taken already; whether there is one
    /// (`st.claimed`). A process's ring entry is read and checked once,
    /// into its place.
    // Out of line: on the message path's hot list (bench/hot-functions.txt),
    // and called from every receive step (`rq_peek`, `place_recv`, `rq_pop`).
    #[inline(never)]
    pub(crate) fn claim(&mut self) -> bool {
        if self.st.claimed.is_none() {
            match self.qp.links.srq() {
                Some(srq) => self.st.claimed = srq.pop(),
                None => {
                    if let Some(rq) = Option::as_mut(&mut *self.qp.rq.lock()) {
                        rq.pop_into(&mut self.st.claimed);
                    }
                }
            }
        }
        self.st.claimed.is_some()
    }
}

impl crate::ddp::StagTable for QpHost<'_> {
    fn lookup(&self, stag: u32) -> Option<Region> {
        // A cached MR whose key moved on is no answer: ask the table.
        let mut r = self
            .with_mr(stag, |mr| mr.region(stag).ok_or(MrError::InvalidStag))
            .ok()?;
        // The peer has on this stream only the remote rights the QP
        // grants it (`IB_QP_ACCESS_FLAGS`; rdma_cm's iw_cm sets Write and
        // Read). Atomics are the MR's alone: iw_cm never sets the QP's
        // atomic right, and rsiw's atomics over rdma_cm predate this.
        let qp = self.qp.remote_access();
        if qp & access::REMOTE_WRITE == 0 {
            r.access = r.access.without(crate::ddp::Access::REMOTE_WRITE);
        }
        if qp & access::REMOTE_READ == 0 {
            r.access = r.access.without(crate::ddp::Access::REMOTE_READ);
        }
        Some(r)
    }
}

impl Host for QpHost<'_> {
    fn sq_next(&mut self) -> Option<SendWr> {
        let mut wr = SendWr::EMPTY;
        self.sq_next_into(&mut wr).then_some(wr)
    }

    fn sq_next_into(&mut self, out: &mut SendWr) -> bool {
        // Local entries (registration, invalidation) are carried out here,
        // under the stream lock, and one that fails does not fail the QP:
        // at most `MAX_LOCAL_RUN` of them per call, then the TX run stops
        // and a new one takes the rest (a process posting them as fast as
        // they are taken must not hold the lock for ever).
        for _ in 0..MAX_LOCAL_RUN {
            // Into the current entry's place: the engine asks for the next
            // WR once it is done with the current one's local data, and an
            // entry is a few hundred octets (see `SendQueue::pop_into`).
            {
                let mut sq = self.qp.sq.lock();
                if !sq.take_for_tx(&mut self.st.cur.sqe) {
                    return false;
                }
                self.st.sq_drained = sq.drained();
            }
            let Some(sqe) = self.st.cur.sqe.as_ref() else {
                return false;
            };
            let (wr_id, signaled) = (sqe.wr_id, sqe.signaled);
            match &sqe.kind {
                SqeKind::Wire(w) => {
                    let mut handle = self.st.next_handle & !MASKED_HANDLE;
                    self.st.next_handle = handle.wrapping_add(1);
                    if sqe.masked {
                        handle |= MASKED_HANDLE;
                    }
                    let mut flags = match self.qp.sig_all {
                        true => w.flags.with(crate::engine::qp::Flags::SIGNALED),
                        false => w.flags,
                    };
                    if sqe.inv_local.is_some() {
                        // The engine invalidates the sink (`local.stag`,
                        // the STag `inv_local` names) once the response
                        // is placed, signaled or not.
                        flags = flags.with(crate::engine::qp::Flags::INVALIDATE_SINK);
                    }
                    self.st.cur.handle = handle;
                    QpStats::bump(&self.qp.stats.tx_msgs, 1);
                    // Built in the engine's place for it, after every
                    // call: the WR's one copy on its way to the engine.
                    *out = SendWr {
                        local: Local { handle, ..w.local },
                        flags,
                        ..*w
                    };
                    return true;
                }
                &SqeKind::RegMr { stag, ref req } => {
                    // No WR's local data is here now.
                    self.st.cur.handle = NO_HANDLE;
                    let res = self
                        .stags()
                        .get(stag)
                        .map(|mr| mr.fast_register(self.qp.pd, req));
                    self.local_done(
                        wr_id,
                        signaled,
                        WcOpcode::RegMr,
                        matches!(res, Some(Ok(()))),
                    );
                }
                &SqeKind::LocalInv { stag } => {
                    self.st.cur.handle = NO_HANDLE;
                    let res = self.stags().invalidate(stag, self.qp.pd);
                    self.local_done(wr_id, signaled, WcOpcode::LocalInv, res.is_ok());
                }
            }
        }
        // More may be posted: a later TX run looks (this one, refused the
        // kick, runs again when it stops: `tx_release`).
        self.st.sq_drained = false;
        if let Some(qp) = self.qp.links.qp_arc() {
            qp.kick();
        }
        false
    }

    fn sq_drained(&mut self) -> bool {
        // What was posted after the look is the doorbell's or, for a
        // process's ring with `RSIW_RING_SQ_ACTIVE`, `Qp::ring_idle`'s.
        core::mem::take(&mut self.st.sq_drained)
    }

    fn sq_flush_next(&mut self) -> Option<SendWr> {
        // One flush pass (`SendQueue::flush_pop_into`): local entries
        // included, at most what was posted when the flush began.
        loop {
            if !self.qp.sq.lock().flush_pop_into(&mut self.st.cur.sqe) {
                return None;
            }
            let sqe = self.st.cur.sqe.as_ref()?;
            let op = match sqe.kind {
                // Only its completion is left, whose opcode (a masked
                // atomic's too) `complete` reads from the entry.
                SqeKind::Wire(wr) => return Some(wr),
                // Flushed, not carried out: no registration or
                // invalidation happens after the QP failed.
                SqeKind::RegMr { .. } => WcOpcode::RegMr,
                SqeKind::LocalInv { .. } => WcOpcode::LocalInv,
            };
            let wr_id = sqe.wr_id;
            self.st.cur.handle = NO_HANDLE;
            self.send_wc(self.qp.wc(wr_id, op, WcStatus::WrFlushErr, 0));
        }
    }

    fn rq_peek(&mut self) -> Option<RecvWr> {
        // Taken at the first look, off the QP's own RQ or the SRQ: the
        // engine looks when a message for it arrives, which takes it (the
        // engine's next `rq_pop` is this WR; a stream that fails flushes
        // it through `rq_flush_next`). So its entry is read and checked
        // once: the length the engine checks is the one placed into.
        if !self.claim() {
            return None;
        }
        self.st.claimed.as_ref().map(|r| RecvWr {
            wr_id: r.wr_id,
            len: r.len(),
        })
    }

    fn rq_pop(&mut self) -> Option<RecvWr> {
        if !self.claim() {
            return None;
        }
        let (wr_id, len, bad) = self
            .st
            .claimed
            .as_ref()
            .map(|r| (r.wr_id, r.len(), r.bad))?;
        self.st.claimed = None;
        self.st.recv_bad = bad.then_some(wr_id);
        Some(RecvWr { wr_id, len })
    }

    fn rq_flush_next(&mut self) -> Option<RecvWr> {
        if self.st.claimed.is_none() {
            // On an SRQ only what this QP took is flushed: the SRQ's other
            // WRs stay for the other QPs on it (verbs, QP to Error).
            if self.qp.links.has_srq() {
                return None;
            }
            // The QP's own RQ: one flush pass (`RecvQueue::flush_pop_into`).
            let taken = Option::as_mut(&mut *self.qp.rq.lock())
                .is_some_and(|rq| rq.flush_pop_into(&mut self.st.claimed));
            if !taken {
                return None;
            }
        }
        self.rq_pop()
    }

    fn complete(&mut self, c: crate::engine::qp::Completion) {
        let (cq, opcode) = match c.queue {
            WorkQueue::Send => {
                let placed = match c.opcode {
                    CompOp::FetchAdd | CompOp::CmpSwap | CompOp::AtomicOther => {
                        self.st.atomic_done.take()
                    }
                    _ => None,
                };
                // A flushed atomic had no result: the opcode of an error
                // completion is best effort (the verbs leave it undefined).
                let masked = match placed {
                    Some(m) if c.status != Status::Flushed => m,
                    _ => self
                        .st
                        .cur
                        .sqe
                        .as_ref()
                        .is_some_and(|s| s.masked && c.wr_id == s.wr_id),
                };
                (self.qp.links.send_cq(), send_opcode(c.opcode, masked))
            }
            WorkQueue::Recv => match self.qp.links.recv_cq() {
                Some(cq) => (cq, recv_opcode(c.opcode)),
                None => return,
            },
        };
        let mut status = wc_status(c.status, c.queue);
        // A process's ring entry that failed its checks: a local QP
        // operation error, whatever the engine made of it.
        let bad = match c.queue {
            WorkQueue::Send => self
                .st
                .cur
                .sqe
                .as_ref()
                .is_some_and(|s| s.invalid && s.wr_id == c.wr_id),
            WorkQueue::Recv => self.st.recv_bad.take_if(|id| *id == c.wr_id).is_some(),
        };
        if bad && status != WcStatus::WrFlushErr {
            status = WcStatus::LocQpOpErr;
        }
        let mut wc = self.qp.wc(c.wr_id, opcode, status, c.byte_len);
        if c.queue == WorkQueue::Recv && wc.status == WcStatus::Success {
            QpStats::bump(&self.qp.stats.rx_msgs, 1);
        }
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
        _crc: &C, // the ffi layer sums the pages with `ModuleCrc32c`, as `C` is
        state: Option<u32>,
    ) -> Option<Result<Option<u32>, TermError>> {
        match *src {
            PayloadRef::Local { local, offset } => self.ref_local(&local, offset, len, state),
            PayloadRef::Tagged { stag, reg, to } => {
                let stags = self.qp.links.device().stags();
                let refs = self.zc.as_deref_mut()?;
                let Some(mr) = stags.get(stag) else {
                    return Some(Err(error::rdmap::INVALID_STAG));
                };
                let grant = Grant::validated(self.qp.pd, access::REMOTE_READ, reg);
                match mr.ref_pages(stag, grant, to, len, refs, state) {
                    Ok(Some(c)) => Some(Ok(c)),
                    Ok(None) => None,
                    Err(e) => Some(Err(crate::mem::atomic::remote_err(e))),
                }
            }
        }
    }

    fn read_source(&mut self, wr: &Local, offset: u32, dst: &mut [u8]) -> Result<(), TermError> {
        // By reference: an entry is a few hundred octets.
        let sqe = match &self.st.cur.sqe {
            Some(s) if self.st.cur.handle == wr.handle => s,
            _ => return Err(error::rdmap::LOCAL_CATA),
        };
        if sqe.inline_len > 0 {
            let start = offset as usize;
            let src = sqe
                .inline
                .get(start..start + dst.len())
                .ok_or(error::rdmap::LOCAL_CATA)?;
            dst.copy_from_slice(src);
            return Ok(());
        }
        // Its errors are the SGEs' own (MR checks).
        self.scatter_gather(sqe.sges(), u64::from(offset), dst, None)
            .map_err(|_| error::rdmap::PROT_UNSPECIFIED)
    }

    fn check_source(&mut self, wr: &Local, len: u32) -> Result<(), TermError> {
        // By reference: an entry is a few hundred octets.
        let sqe = match &self.st.cur.sqe {
            Some(s) if self.st.cur.handle == wr.handle => s,
            _ => return Err(error::rdmap::LOCAL_CATA),
        };
        if sqe.invalid {
            // A process's ring entry that failed its checks.
            return Err(error::rdmap::LOCAL_CATA);
        }
        if sqe.inline_len > 0 {
            return Ok(()); // copied at post time
        }
        if len as usize <= MAX_INLINE {
            // A small message: its source read now, with its checks under
            // one MR lock (not one for the checks and one for the read),
            // into the entry's unused inline buffer. From here on the WR
            // is an inline one (read from there, never sent by reference).
            let (qp, st) = (self.qp, &mut *self.st);
            let Some(Sqe {
                sges,
                num_sge,
                inline,
                inline_len,
                ..
            }) = st.cur.sqe.as_mut()
            else {
                return Err(error::rdmap::LOCAL_CATA);
            };
            let sges = sges.get(..usize::from(*num_sge)).unwrap_or(&[]);
            gather(qp, &st.mrs, sges, &mut inline[..len as usize])?;
            *inline_len = len as u16;
            return Ok(());
        }
        let mut left = u64::from(len);
        for sge in sqe.sges() {
            if left == 0 {
                break;
            }
            let n = u64::from(sge.len).min(left);
            let pd = self.qp.pd;
            self.with_mr(sge.lkey, |mr| mr.check(sge.lkey, pd, sge.addr, n, 0))
                .map_err(local_source_err)?;
            left -= n;
        }
        if left == 0 {
            Ok(())
        } else {
            Err(error::rdmap::PROT_UNSPECIFIED)
        }
    }

    fn read_tagged(
        &mut self,
        stag: u32,
        reg: u64,
        to: u64,
        dst: &mut [u8],
    ) -> Result<(), TermError> {
        // Checked in full against the registration the request was
        // validated against: the MR may have changed since.
        let grant = Grant::validated(self.qp.pd, access::REMOTE_READ, reg);
        // A source that changed since its request is the remote
        // protection error the request's check would have given (RFC
        // 5040 7.2).
        self.with_mr(stag, |mr| mr.copy_from_as(stag, grant, to, dst))
            .map_err(crate::mem::atomic::remote_err)
    }

    fn place_tagged(&mut self, stag: u32, reg: u64, to: u64, data: &[u8]) -> Result<(), TermError> {
        // Every chunk checked in full against the registration its header
        // was validated against (a Write's sink has REMOTE_WRITE, a Read
        // Response's LOCAL_WRITE, and REMOTE_WRITE needs LOCAL_WRITE): the
        // rest of an FPDU may come long after its header.
        let grant = Grant::validated(self.qp.pd, access::LOCAL_WRITE, reg);
        self.with_mr(stag, |mr| mr.copy_to_as(stag, grant, to, data))
            .map_err(tagged_sink_err)
    }

    fn place_recv(&mut self, _wr: &RecvWr, offset: u32, data: &[u8]) -> Result<(), TermError> {
        if !self.claim() {
            return Err(error::ddp::U_NO_BUFFER);
        }
        let rqe = self.st.claimed.as_ref().ok_or(error::ddp::U_NO_BUFFER)?;
        self.scatter_gather(rqe.sges(), u64::from(offset), &mut [], Some(data))
    }

    fn atomic(&mut self, plan: &AtomicPlan) -> Result<u64, TermError> {
        crate::mem::atomic::respond(self.qp.links.device(), self.qp.pd, plan)
    }

    fn write_atomic_result(&mut self, wr: &Local, original: u64) -> Result<(), TermError> {
        // The engine completes this atomic right after (if signaled).
        self.st.atomic_done = Some(wr.handle & MASKED_HANDLE != 0);
        crate::mem::atomic::place_result(self.qp.links.device(), self.qp.pd, wr, original)
    }

    fn make_durable(&mut self, region: &commit::Region) -> bool {
        crate::mem::commit::commit_region(self.stags(), self.qp.pd, region)
    }

    fn invalidate(&mut self, stag: u32) -> Result<(), TermError> {
        self.stags()
            .invalidate_remote(stag, self.qp.pd)
            .map_err(|_| error::rdmap::CANT_INVALIDATE)
    }

    fn invalidate_local(&mut self, stag: u32) -> Result<(), TermError> {
        self.stags().invalidate(stag, self.qp.pd).map_err(local_err)
    }
}

impl QpHost<'_> {
    pub(crate) fn local_done(&mut self, wr_id: u64, signaled: bool, op: WcOpcode, ok: bool) {
        if ok && !(signaled || self.qp.sig_all) {
            return;
        }
        let status = if ok {
            WcStatus::Success
        } else {
            WcStatus::LocProtErr
        };
        self.send_wc(self.qp.wc(wr_id, op, status, 0));
    }

    /// A send-queue completion: delivered now, or after the peer has
    /// acknowledged payload sent by reference before it (`send_order`).
    pub(crate) fn send_wc(&mut self, wc: Completion) {
        let round_refs = self.zc.as_ref().is_some_and(|r| !r.is_empty());
        if let Some(wc) = self.st.order.route(wc, round_refs) {
            let _ = self.qp.links.send_cq().push(wc); // a full CQ raises IB_EVENT_CQ_ERR itself
        }
    }

    /// Zero-copy TX of a send WR's local data: its SGEs' pages.
    pub(crate) fn ref_local(
        &mut self,
        local: &Local,
        offset: u32,
        len: usize,
        crc: Option<u32>,
    ) -> Option<Result<Option<u32>, TermError>> {
        let qp = self.qp;
        let sqe = match &self.st.cur.sqe {
            Some(s) if self.st.cur.handle == local.handle => s,
            _ => return Some(Err(error::rdmap::LOCAL_CATA)),
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
                let addr = sge
                    .addr
                    .checked_add(offset)
                    .ok_or(error::rdmap::LOCAL_CATA)?;
                let mr = stags.get(sge.lkey).ok_or(error::rdmap::PROT_UNSPECIFIED)?;
                match mr
                    .ref_pages(sge.lkey, Grant::local(qp.pd, 0), addr, n, refs, crc)
                    .map_err(local_source_err)?
                {
                    Some(c) => crc = c,
                    None => return Ok(None),
                }
                done += n;
                offset = 0;
            }
            if done == len {
                Ok(Some(crc))
            } else {
                Err(error::rdmap::LOCAL_CATA)
            }
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

pub(crate) fn wire_opcode(wr: &SendWr, masked: bool) -> WcOpcode {
    use crate::engine::qp::SendOp::*;
    match wr.op {
        Send { .. } | Immediate { .. } => WcOpcode::Send,
        Write { .. } | WriteImm { .. } => WcOpcode::RdmaWrite,
        Read { .. } => WcOpcode::RdmaRead,
        Atomic {
            op: crate::engine::wire::atomic::AtomicOp::CmpSwap,
            ..
        } => {
            if masked {
                WcOpcode::MaskedCompSwap
            } else {
                WcOpcode::CompSwap
            }
        }
        Atomic { .. } => {
            if masked {
                WcOpcode::MaskedFetchAdd
            } else {
                WcOpcode::FetchAdd
            }
        }
        Commit { .. } => WcOpcode::Flush,
    }
}

pub(crate) fn send_opcode(op: CompOp, masked: bool) -> WcOpcode {
    match op {
        CompOp::Send | CompOp::Immediate => WcOpcode::Send,
        CompOp::Write | CompOp::WriteImm => WcOpcode::RdmaWrite,
        CompOp::Read => WcOpcode::RdmaRead,
        CompOp::FetchAdd | CompOp::AtomicOther => {
            if masked {
                WcOpcode::MaskedFetchAdd
            } else {
                WcOpcode::FetchAdd
            }
        }
        CompOp::CmpSwap => {
            if masked {
                WcOpcode::MaskedCompSwap
            } else {
                WcOpcode::CompSwap
            }
        }
        CompOp::Commit => WcOpcode::Flush,
        CompOp::Recv | CompOp::RecvImm => WcOpcode::Send,
    }
}

pub(crate) fn recv_opcode(op: CompOp) -> WcOpcode {
    match op {
        CompOp::RecvImm => WcOpcode::RecvRdmaWithImm,
        _ => WcOpcode::Recv,
    }
}

pub(crate) fn wc_status(s: Status, q: WorkQueue) -> WcStatus {
    match s {
        Status::Success => WcStatus::Success,
        Status::Flushed => WcStatus::WrFlushErr,
        Status::LocalError(e) if e.layer == error::Layer::Rdmap && e.etype == 0x1 => {
            if q == WorkQueue::Send {
                WcStatus::LocProtErr
            } else {
                WcStatus::LocAccessErr
            }
        }
        Status::LocalError(_) => WcStatus::LocQpOpErr,
        Status::CommitFailed(s) => crate::mem::commit::wc_status(s),
        Status::RemoteError(e) => remote_wc_status(e),
    }
}

/// The peer's Terminate, as the status of the request it ended: remote
/// protection errors (RDMAP 0x1, DDP tagged) are access errors, an opcode
/// or version the peer does not support (e.g. RFC 7306 to Linux siw) an
/// invalid request, anything else a remote operation error.
pub(crate) fn remote_wc_status(e: TermError) -> WcStatus {
    use error::{ddp, rdmap, Layer};
    let invalid_request = [
        rdmap::UNEXPECTED_OPCODE,
        rdmap::INVALID_VERSION,
        ddp::U_INVALID_QN,
        ddp::U_INVALID_VERSION,
    ];
    match (e.layer, e.etype) {
        (Layer::Rdmap, t) if t == rdmap::INVALID_STAG.etype => WcStatus::RemAccessErr,
        (Layer::Ddp, t) if t == ddp::T_INVALID_STAG.etype => WcStatus::RemAccessErr,
        _ if invalid_request.contains(&e) => WcStatus::RemInvReqErr,
        _ => WcStatus::RemOpErr,
    }
}
