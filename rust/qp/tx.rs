// SPDX-License-Identifier: GPL-2.0
//! Transmit: the TX work item and its rounds, copying (a buffer the engine
//! fills) or zero-copy (FPDU headers around the registered pages).

use super::*;

impl Qp {
    /// Schedules the TX work (idempotent).
    pub(crate) fn kick(self: &Arc<Self>) {
        if self.tx.queued.swap(true, Ordering::AcqRel) {
            return;
        }
        match crate::ffi::runtime::tx_queue() {
            Some(q) => {
                if q.enqueue::<Arc<Qp>, 0>(self.clone()).is_err() {
                    // Already queued (a race with the flag): it will run.
                }
            }
            // The module is going away: no device, so no QP, is left to
            // send (unreachable while a QP lives).
            None => self.tx.queued.store(false, Ordering::Release),
        }
    }

    /// The TX work: fill from the engine, send, until the engine has
    /// nothing more or the socket is full (then `write_space` kicks again).
    pub(crate) fn run_tx(self: &Arc<Self>) {
        self.tx.queued.store(false, Ordering::Release);
        if self.tx_acquire() {
            self.tx_rounds();
        }
    }

    /// A process's doorbell (process context, may sleep): sends at once in
    /// the caller's context rather than waking the TX work, unless a TX
    /// run is going on (which looks at the ring before it stops; else the
    /// work is kicked, `TxCtl`). A process busy-polling its CQ ring then
    /// does not have to yield its CPU to a kernel worker for its sends to
    /// leave.
    pub(crate) fn tx_inline(self: &Arc<Self>) {
        if self
            .tx
            .running
            .compare_exchange(false, true, Ordering::SeqCst, Ordering::SeqCst)
            .is_ok()
        {
            self.tx_rounds();
        } else {
            self.kick();
        }
    }

    /// Makes the TX work the one TX run, or leaves the owner a note
    /// (`missed`) to kick it when it ends; if that run ended meanwhile,
    /// this one runs after all (the protocol: `TxCtl`).
    fn tx_acquire(&self) -> bool {
        loop {
            if self
                .tx
                .running
                .compare_exchange(false, true, Ordering::SeqCst, Ordering::SeqCst)
                .is_ok()
            {
                return true;
            }
            self.tx.missed.store(true, Ordering::SeqCst);
            if self.tx.running.load(Ordering::SeqCst) {
                return false;
            }
        }
    }

    /// Ends a TX run; a work refused meanwhile is queued again (`TxCtl`).
    fn tx_release(self: &Arc<Self>) {
        self.tx.running.store(false, Ordering::SeqCst);
        // Read before the swap (a locked instruction): a note is rare.
        if self.tx.missed.load(Ordering::SeqCst) && self.tx.missed.swap(false, Ordering::SeqCst) {
            self.kick();
        }
    }

    /// Fill from the engine, send, until the engine has nothing more or the
    /// socket is full (then `write_space` kicks again). The caller owns the
    /// run (`TxCtl::running`); it holds the TX-owned state for all its
    /// rounds.
    fn tx_rounds(self: &Arc<Self>) {
        // After the run went (`running` set, `SeqCst`): `detach` either
        // waits for this run, or stored the flag before it looked at the
        // run flags, and this load sees it.
        if self.works_closed.load(Ordering::SeqCst) {
            self.tx_release();
            return;
        }
        // Read first: the swap is a locked instruction, and the flag is
        // almost never set.
        if self.tx.close_expired.load(Ordering::Relaxed)
            && self.tx.close_expired.swap(false, Ordering::AcqRel)
        {
            self.close_timed_out();
        }
        if self.ib_state() == QpState::Err {
            // What was posted to the failed QP, or while it failed: flushed
            // here, in order behind the engine's own flushes.
            self.flush_queues();
        }
        // A process's send ring gets `RSIW_RING_SQ_ACTIVE` (no doorbell
        // needed while this runs) at the run's first look at it
        // (`SendQueue::take_for_tx`), under the lock that look takes.
        let mut owned = self.tx.owned.lock();
        for _ in 0..64 {
            match self.tx_round(&mut owned) {
                TxRound::More => continue,
                TxRound::Done => {
                    drop(owned);
                    self.ring_idle();
                    self.tx_release();
                    return;
                }
            }
        }
        // Be fair to other work items: continue in a new run.
        drop(owned);
        self.tx_release();
        self.kick();
    }

    /// The TX run stops: a process posting from now on rings the
    /// doorbell. One that posted while the flag was still set (and so did
    /// not) left a producer index the run has not read: run again, once
    /// per new index (the engine may be unable to take the entries yet,
    /// e.g. out of ORD credits; it is kicked again when they return). An
    /// index the run read when it took entries needs nothing more: the
    /// common case of a run that took everything, which must not cost a
    /// second run.
    fn ring_idle(self: &Arc<Self>) {
        if !self.rings {
            return;
        }
        let again = self.sq.lock().tx_stopped();
        if again {
            self.kick();
        }
    }

    /// One TX round: zero-copy if the stream sends by reference.
    fn tx_round(self: &Arc<Self>, owned: &mut TxOwned) -> TxRound {
        // Octets a copying round left unsent go first (a zero-copy round
        // falls back to copying when it has no page for its headers).
        if self.zc.on.load(Ordering::Acquire) && owned.zc.from_pages && !owned.copy.pending() {
            self.tx_round_zc(owned)
        } else {
            self.tx_round_copy(&mut owned.copy)
        }
    }

    /// Sends the pending TX octets (producing them from the engine if there
    /// are none); what the socket does not take stays for the next round.
    fn tx_round_copy(self: &Arc<Self>, tx: &mut CopyTx) -> TxRound {
        // The buffer comes with the first copying round, allocated in
        // process context before the stream lock: a connected QP that never
        // copies holds none, one that never fills `TX_BUF_SMALL` holds no
        // more (see `TX_BUF`).
        let want = if tx.grow { TX_BUF } else { TX_BUF_SMALL };
        if tx.buf.len() < want && !tx.pending() {
            if let Ok(buf) = self
                .memcg
                .charge(|| KVec::from_elem(0u8, want, GFP_KERNEL_ACCOUNT))
            {
                tx.buf = buf;
            }
        }
        let mut failed_out = false;
        let mut drained = false;
        let have = self.engine_session(Caller::TxRun(self), |calls| {
            calls
                .call(None, |engine, host, dead| {
                    if *dead {
                        return false;
                    }
                    if tx.pending() {
                        return true;
                    }
                    tx.off = 0;
                    tx.len = 0;
                    if tx.buf.is_empty() {
                        // The process-context allocation failed: try here.
                        if let Ok(buf) = KVec::from_elem(0u8, TX_BUF_SMALL, GFP_ATOMIC) {
                            tx.buf = buf;
                        }
                    }
                    if tx.buf.is_empty() {
                        return false; // no buffer (the allocation failed): next round
                    }
                    let n = engine.tx(host, &ModuleCrc32c, &mut tx.buf);
                    // The buffer, not the engine, ended the round: bulk. A
                    // stream whose pages TCP copies sends it from the pages
                    // from the next round on (and grows its buffer only for
                    // bulk that cannot go from them, `zc_plan`); any other
                    // grows its buffer.
                    if n == tx.buf.len() || engine.wants_tx() {
                        if self.zc.copies.load(Ordering::Relaxed) {
                            self.zc.on.store(true, Ordering::Relaxed);
                        } else if tx.buf.len() < TX_BUF {
                            tx.grow = true;
                        }
                    }
                    // Room was left and nothing is half sent: the engine had no
                    // more to give (another post meanwhile finds this run going
                    // and has it run again, `TxCtl::missed`).
                    drained = n < tx.buf.len() && !engine.wants_tx() && !engine.is_done();
                    if n == 0 && engine.state() == EngineState::Error {
                        // The Terminate, if any, is in the socket: flush what
                        // was posted while the stream failed, then close the
                        // LLP stream (a Terminate is the stream's last message).
                        engine.flush(host);
                        *dead = true;
                        failed_out = true;
                    }
                    tx.len = n;
                    n > 0
                })
                .unwrap_or(false)
        });
        if failed_out {
            // The stream ended with our Terminate.
            self.end_stream_out();
        }
        if !have {
            self.fin_if_pending();
            return TxRound::Done;
        }

        self.tx.blocked.store(true, Ordering::Release);
        let sent = match self.sock.lock().as_ref() {
            Some(s) => s.send(&[&tx.buf[tx.off..tx.len]], false),
            None => Err(ENOTCONN),
        };
        let lost = match sent {
            Ok(n) => {
                QpStats::bump(&self.stats.tx_bytes, n as u64);
                tx.off += n;
                false
            }
            Err(e) => e != EAGAIN,
        };
        match self.round_end(lost, tx.pending()) {
            // All of it left and the engine had no more: no second round
            // to find nothing (a message's one round trip of the locks).
            TxRound::More if drained => {
                self.fin_if_pending();
                TxRound::Done
            }
            r => r,
        }
    }

    /// The end of a TX round that sent: the socket is gone (`lost`), full
    /// (`blocked`: `write_space` kicks the work again) or took it all.
    fn round_end(self: &Arc<Self>, lost: bool, blocked: bool) -> TxRound {
        self.tx.blocked.store(blocked, Ordering::Release);
        if lost {
            self.with_engine(|e, h| e.on_connection_lost(h));
            TxRound::Done
        } else if blocked {
            TxRound::Done
        } else {
            TxRound::More
        }
    }

    /// Everything the engine produced has left: the FIN, if the stream's
    /// end asked for one.
    fn fin_if_pending(&self) {
        if self.tx.fin_pending.load(Ordering::Relaxed)
            && self.tx.fin_pending.swap(false, Ordering::AcqRel)
        {
            self.shutdown_sock();
        }
    }

    /// The FPDU payload size from which a new stream sends from the
    /// registered pages (`zcopy_min`, or the self-tests' override; `None`:
    /// through rsiw's own buffer), and whether TCP copies those pages. On
    /// a route that stays in the host (loopback, veth) the stack copies
    /// every zero-copy skb it delivers (`skb_orphan_frags_rx`), so there
    /// TCP copies the pages as it takes them, which is the one copy on the
    /// way out, and a WR completes once TCP has all of it; `zcopy_local`
    /// sends by reference there too (`MSG_ZEROCOPY`, completions after
    /// TCP's release), for tests of that path. The self-tests' override
    /// always sends by reference.
    pub(crate) fn zcopy_mode(&self, local: bool) -> (Option<usize>, bool) {
        #[cfg(rsiw_kunit)]
        {
            let v = self.hooks.zc_min.load(Ordering::Relaxed);
            if v != u32::MAX {
                return ((v > 0).then_some(v as usize), false);
            }
        }
        let min = crate::module_parameters::zcopy_min.value();
        let copies = local && !crate::module_parameters::zcopy_local.value();
        ((min > 0).then_some(min as usize), copies)
    }

    /// Overrides `zcopy_min` for the next stream (`None`: the parameter).
    #[cfg(rsiw_kunit)]
    pub(crate) fn set_zcopy_min(&self, min: Option<u32>) {
        self.hooks
            .zc_min
            .store(min.unwrap_or(u32::MAX), Ordering::Relaxed);
    }

    /// Zero-copy statistics: octets sent by reference, literal octets
    /// (headers, trailers, copied payload) of zero-copy rounds, and
    /// completions that waited for the peer's acknowledgement.
    #[cfg(rsiw_kunit)]
    pub(crate) fn zcopy_stats(&self) -> (u64, u64, u64) {
        let owned = self.tx.owned.lock();
        (
            owned.zc.ref_octets,
            owned.zc.literal_octets,
            self.zc.deferred.load(Ordering::Relaxed),
        )
    }

    /// The stream is over: deliver every waiting send completion (a flush
    /// error for what the peer had not acknowledged).
    pub(crate) fn drain_order(&self) {
        self.drain_order_of(&mut self.stream.lock().host);
    }

    /// [`Self::drain_order`] under the stream lock the caller holds.
    pub(super) fn drain_order_of(&self, host: &mut HostState) {
        host.order.drain(|wc| {
            let _ = self.links.send_cq().push(wc);
        });
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
            this.release_batch(&mut st, token);
            this.zc.stalled.swap(false, Ordering::AcqRel)
        };
        this.zc.live.fetch_sub(1, Ordering::AcqRel);
        if stalled && !this.zc.detached.load(Ordering::Acquire) {
            this.kick();
        }
    }
}

/// What the stream lock's part of a zero-copy plan found (`Qp::zc_plan`).
enum Planned {
    /// Nothing to send: the stream is dead, too many batches are out, or
    /// the QP has no engine.
    Nothing,
    /// The last batch has octets the socket did not take yet.
    Rest,
    /// A new plan of `n` octets in `pieces` pieces; `no_pages`: it took no
    /// page.
    New {
        n: usize,
        pieces: usize,
        no_pages: bool,
    },
}

/// What a zero-copy round sends (`Qp::zc_plan`).
enum ZcPlan {
    /// Nothing (or the stream is dead).
    Idle,
    /// The batch; `no_pages`: this round planned one that took no page.
    Send { no_pages: bool },
    /// The plan and its pages disagree.
    Broken,
}

impl Qp {
    /// A zero-copy TX round, in three steps: prepare what a new batch
    /// needs (`zc_prepare`), plan the next octets from the engine (payload
    /// by page reference, literal octets into the literal page:
    /// `zc_plan`), send the batch and settle (`zc_send`).
    fn tx_round_zc(self: &Arc<Self>, owned: &mut TxOwned) -> TxRound {
        if owned.zc.batch.remaining() == 0 && !self.zc_prepare(&mut owned.zc) {
            // No page for the headers, no lists, ring or notification
            // now: copy this round.
            return self.tx_round_copy(&mut owned.copy);
        }
        match self.zc_plan(owned) {
            ZcPlan::Send { no_pages } => self.zc_send(&mut owned.zc, no_pages),
            ZcPlan::Idle => {
                // Nothing planned (or the stream is dead): nothing left to send.
                self.zc_batch_gone(&mut owned.zc);
                self.fin_if_pending();
                TxRound::Done
            }
            ZcPlan::Broken => {
                // Cannot happen (the plan and the pages are built
                // together): the stream would be corrupt, so it ends here.
                if crate::ffi::runtime::ratelimited() {
                    pr_err!("qp {}: zero-copy round out of step, closing\n", self.qpn);
                }
                owned.zc.batch.clear();
                self.zc_batch_gone(&mut owned.zc);
                self.with_engine(|e, h| e.on_connection_lost(h));
                TxRound::Done
            }
        }
    }

    /// Before a new batch: the round's lists and literal page, the send
    /// order's ring and the batch's notification, allocated in process
    /// context (the plan runs under the stream lock). False if one is
    /// missing: the round copies.
    fn zc_prepare(&self, zc: &mut ZeroCopyTx) -> bool {
        let ready = self
            .memcg
            .charge(|| zc.lit.ensure(ZC_LITERAL_MIN).is_ok() && zc.ensure_lists().is_ok());
        if !ready {
            return false;
        }
        if !zc.order_ring {
            let need = self.stream.lock().host.order.ring_needed();
            if let Some(cap) = need {
                match self.memcg.charge(|| SendOrder::alloc_ring(cap)) {
                    Ok(ring) => self.stream.lock().host.order.set_ring(ring),
                    Err(_) => return false,
                }
            }
            zc.order_ring = true;
        }
        if zc.notif.is_none() && !zc.tcp_copies {
            match self.links.qp_arc().map(Notif::new) {
                Some(Ok(n)) => zc.notif = Some(n),
                _ => return false,
            }
        }
        true
    }

    /// Plans the round under the stream lock (one engine call) and lays
    /// the plan out as the batch to send.
    fn zc_plan(self: &Arc<Self>, owned: &mut TxOwned) -> ZcPlan {
        let TxOwned { copy, zc } = owned;
        let mut failed_out = false;
        let planned = {
            let ZeroCopyTx {
                tcp_copies,
                copy_batch,
                to_copy,
                lit,
                refs,
                pieces,
                batch,
                notif,
                ..
            } = &mut *zc;
            self.engine_session(Caller::TxRun(self), |calls| {
                calls
                    .call(Some(refs), |engine, host, dead| {
                        let planned = if *dead {
                            batch.clear();
                            *copy_batch = None;
                            Planned::Nothing
                        } else if batch.remaining() > 0 {
                            Planned::Rest
                        } else if !host.st.order.can_plan() {
                            // Too many batches TCP has not released: a release kicks.
                            self.zc.stalled.store(true, Ordering::Release);
                            Planned::Nothing
                        } else {
                            let mut plan = TxPlan::new(lit.free_mut(), pieces, TX_BUF);
                            let n = engine.tx_plan(host, &ModuleCrc32c, &mut plan);
                            let np = plan.pieces().len();
                            let no_pages = host.zc.as_deref().is_none_or(Segments::is_empty);
                            if no_pages {
                                host.st.order.no_batch();
                                if *tcp_copies {
                                    // No payload went from the pages: back to
                                    // copying rounds once this batch has left
                                    // (a copying round never looks at it). If
                                    // that was bulk all the same (memory TCP
                                    // cannot take by page, e.g. slab), with a
                                    // buffer for it, not the literal page's
                                    // few KiB a round.
                                    *to_copy = true;
                                    if engine.wants_tx() {
                                        copy.grow = true;
                                    }
                                }
                            } else if *tcp_copies {
                                *copy_batch = Some(host.st.order.new_batch());
                                batch.set_copy();
                            } else if let Some(mut next) = notif.take() {
                                next.set_token(host.st.order.new_batch());
                                self.zc.live.fetch_add(1, Ordering::AcqRel);
                                batch.set_notif(next);
                            }
                            if n == 0 && engine.state() == EngineState::Error {
                                host.zc = None;
                                engine.flush(host);
                                *dead = true;
                                failed_out = true;
                            }
                            Planned::New {
                                n,
                                pieces: np,
                                no_pages,
                            }
                        };
                        self.zc
                            .deferred
                            .store(host.st.order.deferred(), Ordering::Relaxed);
                        planned
                    })
                    .unwrap_or(Planned::Nothing)
            })
        };
        if failed_out {
            self.drain_order();
            self.end_stream_out();
        }
        match planned {
            Planned::Nothing => ZcPlan::Idle,
            Planned::Rest => ZcPlan::Send { no_pages: false },
            Planned::New { pieces, .. } if !self.zc_fill_batch(zc, pieces) => ZcPlan::Broken,
            Planned::New { n, no_pages, .. } if n > 0 => ZcPlan::Send { no_pages },
            Planned::New { .. } => ZcPlan::Idle,
        }
    }

    /// Lays the first `np` pieces of the plan out as the batch: literal
    /// runs from the literal page, payload from the referenced pages in
    /// plan order, taken off the front. False if the two do not match.
    fn zc_fill_batch(&self, zc: &mut ZeroCopyTx, np: usize) -> bool {
        let mut ok = true;
        let mut refs = zc.refs.drain();
        for piece in &zc.pieces[..np] {
            ok &= match *piece {
                Piece::Literal(l) => {
                    zc.literal_octets += l as u64;
                    zc.lit
                        .take(l)
                        .is_some_and(|seg| zc.batch.segments().push(seg).is_ok())
                }
                Piece::Host(l) => {
                    zc.ref_octets += l as u64;
                    if !zc.tcp_copies {
                        QpStats::bump(&self.stats.tx_zcopy_bytes, l as u64);
                        self.links
                            .device()
                            .counters()
                            .add(HwCounter::TxZcopyOctets, l as u64);
                    }
                    refs.move_front(l, zc.batch.segments())
                }
            };
        }
        ok && refs.is_empty()
    }

    /// Sends the batch by page reference (`MSG_ZEROCOPY` with the batch's
    /// notification, `MSG_SPLICE_PAGES` for literal octets only), keeps
    /// what the socket did not take for the next round, and delivers the
    /// send completions a batch TCP copied allows.
    fn zc_send(self: &Arc<Self>, zc: &mut ZeroCopyTx, no_pages: bool) -> TxRound {
        self.tx.blocked.store(true, Ordering::Release);
        let sent = match self.sock.lock().as_ref() {
            Some(s) => s.send_pages(&mut zc.batch, self.zc_send_limit(no_pages)),
            None => Err(ENOTCONN),
        };
        if let Ok(n) = sent {
            QpStats::bump(&self.stats.tx_bytes, n as u64);
        }
        let lost = matches!(sent, Err(e) if e != EAGAIN);
        if lost {
            // Its completions stay unreleased: the stream's end flushes them.
            zc.batch.clear();
            zc.copy_batch = None;
        }
        if zc.batch.remaining() == 0 {
            if let Some(id) = zc.copy_batch.take() {
                // TCP has copied all of it: the pages are the consumer's again.
                self.release_batch(&mut self.stream.lock(), id);
            }
            self.zc_batch_gone(zc);
        }
        self.round_end(lost, zc.batch.remaining() > 0)
    }

    /// The round's batch has all left (or is dropped): a round that took
    /// no page turns the stream back to copying rounds now.
    fn zc_batch_gone(&self, zc: &mut ZeroCopyTx) {
        if core::mem::take(&mut zc.to_copy) {
            self.zc.on.store(false, Ordering::Relaxed);
        }
    }
}

/// Self-tests: QP number and octets of the one zero-copy round that TCP
/// takes only in part (`short_zc_send_once`).
#[cfg(rsiw_kunit)]
static SHORT_ZC_SEND: core::sync::atomic::AtomicU64 = core::sync::atomic::AtomicU64::new(0);

/// Self-tests: the next zero-copy round of QP `qpn` (with `no_pages`, the
/// next that took no page: the round that turns a stream TCP copies back
/// to copying rounds) gives TCP at most `octets` (below 2^31), as a
/// socket that fills does; the round comes back blocked.
#[cfg(rsiw_kunit)]
pub(crate) fn short_zc_send_once(qpn: u32, octets: u32, no_pages: bool) {
    let only = if no_pages { 1u64 << 31 } else { 0 };
    SHORT_ZC_SEND.store(
        (u64::from(qpn) << 32) | only | u64::from(octets & 0x7fff_ffff),
        Ordering::Release,
    );
}

/// Self-tests: whether the round armed by [`short_zc_send_once`] is still
/// to come.
#[cfg(rsiw_kunit)]
pub(crate) fn short_zc_send_pending() -> bool {
    SHORT_ZC_SEND.load(Ordering::Acquire) != 0
}

impl Qp {
    /// The most octets a zero-copy round gives TCP in one call: all it
    /// has, but in the self-tests' one short round (`no_pages`: the round
    /// took none).
    #[inline(always)]
    fn zc_send_limit(&self, no_pages: bool) -> usize {
        #[cfg(rsiw_kunit)]
        {
            let armed = SHORT_ZC_SEND.load(Ordering::Acquire);
            if armed != 0
                && armed >> 32 == u64::from(self.qpn)
                && (no_pages || armed & (1 << 31) == 0)
                && SHORT_ZC_SEND
                    .compare_exchange(armed, 0, Ordering::AcqRel, Ordering::Relaxed)
                    .is_ok()
            {
                return (armed & 0x7fff_ffff) as usize;
            }
        }
        let _ = no_pages;
        usize::MAX
    }
}

impl Qp {
    /// Batch `id` no longer needs its pages (TCP released them, or copied
    /// all of it on a route that stays in the host): delivers the
    /// completions that waited for it, under the stream lock the caller
    /// holds. None once `detach` ran: it sets the flag under that lock, so
    /// once it returns no completion reaches the (then freed) CQ.
    fn release_batch(&self, st: &mut StreamState, id: u64) {
        if !self.zc.detached.load(Ordering::Acquire) {
            st.host.order.released(id, |wc| {
                let _ = self.links.send_cq().push(wc);
            });
        }
    }
}

/// Whether a TX run goes on with another round.
pub(crate) enum TxRound {
    More,
    Done,
}

impl WorkItem for Qp {
    type Pointer = Arc<Qp>;

    fn run(this: Arc<Qp>) {
        this.run_tx();
    }
}
