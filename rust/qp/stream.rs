// SPDX-License-Identifier: GPL-2.0
//! The QP's iWARP stream: taking the socket from the CM (attach), the socket
//! callbacks, and the end of the stream (close, fail, detach).

use super::*;
use crate::ffi::runtime::{clock_us, wait_ms};

/// The RX work started this long after it was queued (`clock_us` units,
/// about µs): no CPU was free for it, e.g. both busy-polling.
const RX_WORK_LATE_US: u32 = 250;
/// Then bulk is read in the softirq for this long before the work is
/// tried again: a probe in a busy machine costs one late start.
const RX_INLINE_HOLD_US: u32 = 50_000;

impl Qp {
    /// Hands an established TCP connection to the QP after MPA
    /// negotiation: the socket is hooked, the engine takes over, the QP is
    /// in RTS. `params` are what the MPA exchange settled, `emss` the
    /// connection's effective MSS (FPDU size); `leftover` are stream bytes
    /// already read past the MPA frame.
    pub(crate) fn attach(
        self: &Arc<Self>,
        mut sock: TcpSocket,
        params: &StreamParams,
        emss: usize,
        leftover: &[u8],
    ) -> Result {
        match self.ib_state() {
            QpState::Init | QpState::Rtr => {}
            _ => return Err(EINVAL),
        }
        // A new stream (a QP may be reset and connected again).
        self.quiet_end.store(false, Ordering::Release);
        self.tx.close_expired.store(false, Ordering::Release);
        self.tx.fin_pending.store(false, Ordering::Release);
        // The active side attaches from the CM's work item: what the
        // stream allocates is charged to the QP's creator all the same.
        let mut engine = self.memcg.charge(|| {
            KBox::new(
                Engine::new(QpConfig { pd: self.pd, emss }),
                GFP_KERNEL_ACCOUNT,
            )
        })?;
        // IRD/ORD clamped to the engine's queues (MAX_IRD, MAX_ORD).
        engine.establish_params(params);
        let local = sock.local_route();
        self.rx.local.store(local, Ordering::Release);
        let (zc_min, tcp_copies) = self.zcopy_mode(local);
        // A stream that sends by page reference holds its completions
        // until TCP releases the pages: their ring comes with it. (One
        // whose pages TCP copies gets it at its first round from the
        // pages: most connections on such routes never make one.)
        if zc_min.is_some() && !tcp_copies {
            let need = self.stream.lock().host.order.ring_needed();
            if let Some(cap) = need {
                let ring = self.memcg.charge(|| SendOrder::alloc_ring(cap))?;
                self.stream.lock().host.order.set_ring(ring);
            }
        }
        engine.set_tx_ref_min(zc_min);
        self.zc.detached.store(false, Ordering::Release);
        {
            let mut owned = self.tx.owned.lock();
            // Octets the last stream's copying round left unsent are not
            // this stream's.
            owned.copy.off = 0;
            owned.copy.len = 0;
            let zc = &mut owned.zc;
            zc.from_pages = zc_min.is_some();
            zc.tcp_copies = tcp_copies;
            zc.order_ring = !tcp_copies;
            zc.copy_batch = None;
            zc.to_copy = false;
            zc.batch.clear();
            zc.refs.clear();
        }
        // A stream whose pages TCP copies starts on copying rounds.
        self.zc
            .copies
            .store(zc_min.is_some() && tcp_copies, Ordering::Release);
        self.zc
            .on
            .store(zc_min.is_some() && !tcp_copies, Ordering::Release);
        {
            let mut st = self.stream.lock();
            st.engine = Some(engine);
            st.dead = false;
        }
        {
            // What the last stream reported (its failure, above all: one
            // `IB_EVENT_QP_FATAL` per failure) is not this stream's.
            let mut st = self.ib_state.lock();
            st.1 = StreamStatus::default();
            self.set_state(&mut st.0, QpState::Rts);
        }
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

    /// Graceful close (`IB_QPS_SQD` from the iw_cm): drain, then FIN. A
    /// drain that cannot finish (a Read the peer never answers, a socket
    /// that never empties: the peer or the link is gone) becomes an
    /// abortive close after [`CLOSE_TIMEOUT_MS`] (`close_timed_out`).
    /// Without the bound a ULP that waits for its outstanding WRs after
    /// the disconnect (nvmet-rdma releasing a queue, and so a device's
    /// removal) waits as long as TCP keeps the dead connection.
    pub(crate) fn close(self: &Arc<Self>) {
        self.enter(QpState::Sqd);
        self.with_engine(|e, h| e.close(h));
        {
            let mut h = self.close_handle.lock();
            if h.is_none() {
                *h = Some(self.clone().start(Delta::from_millis(CLOSE_TIMEOUT_MS)));
            }
        }
        self.kick();
    }

    /// The close timer fired (TX work): a QP still draining fails, as if
    /// the ULP had asked for Error: everything flushed, our FIN, the
    /// iw_cm's DISCONNECT and CLOSE, no `IB_EVENT_QP_FATAL`.
    pub(super) fn close_timed_out(self: &Arc<Self>) {
        let draining = self.ib_state() == QpState::Sqd
            && self
                .stream
                .lock()
                .engine
                .as_deref()
                .is_some_and(|e| !e.is_done());
        if draining {
            self.fail();
        }
    }

    /// Moves to Error: flushes everything; the socket is shut down.
    pub(crate) fn fail(self: &Arc<Self>) {
        self.enter(QpState::Err);
        // Asked for by the ULP (or the QP's teardown): not a fatal error.
        self.quiet_end.store(true, Ordering::Release);
        // The engine flushes what it holds; `flush_queues` then delivers
        // the completions held for page releases and flushes what is left
        // on the queues (all of them if it never connected): the engine,
        // its connection lost, owes no flush after this.
        self.with_engine(|e, h| e.on_connection_lost(h));
        self.stream.lock().dead = true;
        self.flush_queues();
        self.end_stream_out();
    }

    /// Our direction of the stream ends (FIN) and the CM hears of it.
    pub(super) fn end_stream_out(&self) {
        self.shutdown_sock();
        self.end_cm();
    }

    /// Shuts the socket's sending side down (FIN), if there is a socket.
    pub(super) fn shutdown_sock(&self) {
        if let Some(s) = self.sock.lock().as_ref() {
            s.shutdown();
        }
    }

    /// The connection is over for the iw_cm: DISCONNECT (if it was up),
    /// then CLOSE, on which the iw_cm drops its references on the cm_id
    /// and on this QP (`iw_rem_ref`; `destroy_qp` waits for them). Once.
    pub(crate) fn end_cm(&self) {
        let sink = self.cm.lock().take();
        if let Some(sink) = sink {
            sink.disconnected();
            sink.closed();
        }
    }

    /// Flushes the QP's own RQ: one pass, what was posted when it began
    /// (`RecvQueue::flush_pop`). An SRQ is not this QP's to flush.
    pub(crate) fn flush_recv(&self) {
        loop {
            let rqe = Option::as_mut(&mut *self.rq.lock()).and_then(|rq| rq.flush_pop());
            let Some(rqe) = rqe else { break };
            if let Some(cq) = self.links.recv_cq() {
                let _ = cq.push(self.wc(rqe.wr_id, WcOpcode::Recv, WcStatus::WrFlushErr, 0));
            }
        }
    }

    /// Disconnects and waits until no callback or TX work uses the QP
    /// (`destroy_qp`, `IB_QPS_RESET`). Sleeps.
    pub(crate) fn detach(self: &Arc<Self>) {
        // A close timer still armed is cancelled (with its reference).
        let timer = self.close_handle.lock().take();
        drop(timer);
        if self.ib_state() != QpState::Err {
            self.fail();
        }
        // Already in Error (a Terminate, a reset): the iw_cm may not have
        // had its CLOSE yet, and holds a reference on the QP until then.
        self.end_cm();
        let mut sock = self.sock.lock().take();
        if let Some(s) = sock.as_mut() {
            s.unhook();
        }
        // The TX and RX work hold references and use the QP's links (its
        // CQs, the SRQ), which `destroy_qp` hands back to the core when
        // this returns: no run may be going on or start that uses them.
        // From the flag on, a run that starts ends at once (`tx_rounds`,
        // `run_rx`: they look after raising their run flag, all `SeqCst`);
        // the runs going on now are waited out, however long they take (a
        // run is bounded: at most 64 rounds, non-blocking sends, bounded
        // flushes). A run going on with no run flag yet (queued, or
        // between its queued and run flags) is one that looks at the flag.
        self.works_closed.store(true, Ordering::SeqCst);
        let idle = || {
            !self.tx.queued.load(Ordering::SeqCst)
                && !self.tx.running.load(Ordering::SeqCst)
                && !self.rx.queued.load(Ordering::SeqCst)
                && !self.rx.running.load(Ordering::SeqCst)
        };
        let mut waited_s = 0u32;
        while !wait_ms(10_000, idle) {
            waited_s = waited_s.saturating_add(10);
            pr_warn!(
                "qp {}: teardown has waited {} s for its TX/RX work\n",
                self.qpn,
                waited_s
            );
        }
        {
            // The unsent batch and the spare notification hold references
            // (the notification one on this QP).
            let mut owned = self.tx.owned.lock();
            let zc = &mut owned.zc;
            zc.batch.clear();
            zc.refs.clear();
            zc.notif = None;
        }
        // TCP keeps sent skbs with our pages until the peer acknowledges
        // them (the FIN went out in `fail`): the socket stays open for the
        // ACKs a while. A peer that does not acknowledge gets a reset,
        // which frees the queued skbs now: no notification may outlive the
        // module, whose code it calls. A peer TCP already retransmits to
        // unanswered (a link or address gone) gets it at once: a process
        // tearing down many such QPs must not wait the grace for each.
        if let Some(s) = sock {
            if !s.peer_silent() && self.wait_zc_released(ZC_ACK_GRACE_MS) {
                drop(s);
            } else {
                s.abort();
            }
        }
        // What the reset left (skbs in a device's queue): soon freed.
        self.wait_zc_released(5000);
        {
            let _st = self.stream.lock();
            self.zc.detached.store(true, Ordering::Release);
        }
        self.drain_order();
        let mut st = self.stream.lock();
        st.engine = None;
        st.host.claimed = None;
    }

    /// Waits up to `ms` for TCP to release every batch of this QP's pages;
    /// whether it did. Sleeps.
    pub(crate) fn wait_zc_released(&self, ms: u32) -> bool {
        wait_ms(ms, || self.zc.live.load(Ordering::Acquire) == 0)
    }
}

/// The EMSS the engine sizes FPDUs by (RFC 5044 MULPDU): one TCP segment,
/// or `fpdu_segs_local` of them on a route that stays in the host, where
/// no wire segments the stream and every FPDU costs its framing, its
/// placement lookups and its CRC call on both ends whatever its size (a
/// 64 KiB message is 45 FPDUs at MTU 1500, 3 at 16 segments).
fn fpdu_emss(mss: u32, local: bool) -> usize {
    let segs = if local {
        crate::module_parameters::fpdu_segs_local
            .value()
            .clamp(1, 64)
    } else {
        1
    };
    (mss.clamp(536, 65495) as usize)
        .saturating_mul(segs as usize)
        .min(65495)
}

impl CmQp for Qp {
    /// The CM's hand-off after MPA: the stream goes to the engine; the
    /// active side's CONNECT_REPLY and a passive side without RTR are
    /// established at once, a passive side with an RTR when it arrives.
    fn attach(&self, stream: Stream, cm: CmEventSink) -> Result {
        let this = self.links.qp_arc().ok_or(EINVAL)?;
        let p = &stream.params;
        let emss = fpdu_emss(stream.sock.mss(), stream.sock.local_route());
        if crate::ffi::runtime::ratelimited() {
            pr_info!(
                "qp {} connected as {}: CRC {}, markers tx {} rx {}, IRD {} ORD {}, RTR {:?}\n",
                self.qpn,
                if p.initiator {
                    "initiator"
                } else {
                    "responder"
                },
                if p.framing.crc { "on" } else { "off" },
                p.framing.markers_tx,
                p.framing.markers_rx,
                p.ird,
                p.ord,
                p.rtr
            );
        }
        let waits_for_rtr = p.rtr_expected().is_some();
        *this.cm.lock() = Some(cm.clone());
        if let Err(e) = this.attach(stream.sock, p, emss, &stream.leftover) {
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

impl SocketEvents for Qp {
    fn data_ready(&self, rx: &SockRx<'_>) {
        // A bulk stream on a local route, sent by a process's system call
        // (a doorbell): read in the RX work, on another CPU than this
        // softirq's, so the process gets back to posting; unless the work
        // started late not long ago (no CPU free for it). Sent by a kernel
        // thread (a TX work answering Reads), the thread has nothing to
        // get back to: reading here costs no hop.
        if self.rx.local.load(Ordering::Relaxed) {
            let min = crate::module_parameters::rx_offload_min.value();
            let forced = self.rx_work_forced();
            if min != 0
                && rx.queued() >= min
                && (forced || rx.in_process() && !self.rx_work_held_off())
            {
                if let Some(this) = self.links.qp_arc() {
                    if this.rx_offload() {
                        return;
                    }
                }
            }
        }
        self.rx_queued(rx);
    }

    fn write_space(&self) {
        // Only a TX work that could not send everything needs the room.
        if self.tx.blocked.load(Ordering::Acquire) {
            if let Some(this) = self.links.qp_arc() {
                this.kick();
            }
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
            if matches!(
                state,
                TcpState::CloseWait | TcpState::Closing | TcpState::LastAck | TcpState::TimeWait
            ) {
                self.quiet_end.store(true, Ordering::Release);
            }
            let was_done = self.engine_session(Caller::Callback, |calls| {
                calls.call(None, |engine, host, _| {
                    let done = engine.is_done();
                    if !done {
                        engine.on_connection_lost(host);
                    }
                    done
                })
            });
            if was_done == Some(true) {
                // The stream had already ended (a Terminate either way):
                // the peer's FIN or reset closes it for the iw_cm.
                self.end_cm();
            }
        }
    }
}

impl Qp {
    /// Hands the socket's queued data to the engine (inside a socket
    /// callback, where `self` is the `Arc<Qp>` the hook holds).
    pub(crate) fn rx_queued(&self, rx: &SockRx<'_>) {
        self.engine_session(Caller::Callback, |calls| {
            rx.read(&mut |chunk| self.rx_engine(calls, chunk))
        });
    }

    /// Self-tests: bulk goes to the RX work also when a kernel thread sent
    /// it (theirs always is), and also when it started late recently (a
    /// test thread polling on one CPU and the TX work on the other leave
    /// none free).
    #[cfg(rsiw_kunit)]
    pub(crate) fn force_rx_work(&self) {
        self.hooks.rx_forced.store(true, Ordering::Relaxed);
    }

    /// Whether the self-tests forced bulk to the RX work
    /// ([`Self::force_rx_work`]); never in the production module.
    #[inline(always)]
    fn rx_work_forced(&self) -> bool {
        #[cfg(rsiw_kunit)]
        {
            self.hooks.rx_forced.load(Ordering::Relaxed)
        }
        #[cfg(not(rsiw_kunit))]
        {
            false
        }
    }

    /// Whether `data_ready` reads bulk itself for now (the RX work started
    /// late recently).
    fn rx_work_held_off(&self) -> bool {
        let until = self.rx.inline_until.load(Ordering::Relaxed);
        until != 0 && (clock_us().wrapping_sub(until) as i32) < 0
    }

    /// Schedules the RX work (idempotent). False if it cannot run (the
    /// module is going away): read in the callback then.
    pub(crate) fn rx_offload(self: &Arc<Self>) -> bool {
        if self.rx.queued.swap(true, Ordering::AcqRel) {
            return true;
        }
        self.rx.queued_at.store(clock_us(), Ordering::Relaxed);
        match crate::ffi::runtime::rx_queue() {
            Some(q) => {
                // Already queued (a race with the flag): it will run.
                let _ = q.enqueue::<Arc<Qp>, 1>(self.clone());
                true
            }
            None => {
                self.rx.queued.store(false, Ordering::Release);
                false
            }
        }
    }

    /// The RX work: reads what the socket holds in process context (the
    /// socket owned: what arrives meanwhile waits in its backlog, which
    /// `release_sock` then hands to TCP here).
    fn run_rx(self: &Arc<Self>) {
        // Running before no longer queued: `detach` never sees neither
        // while a run is about to start.
        self.rx.running.store(true, Ordering::SeqCst);
        self.rx.queued.store(false, Ordering::SeqCst);
        // As for the TX run (`tx_rounds`): after `RxCtl::running`.
        if self.works_closed.load(Ordering::SeqCst) {
            self.rx.running.store(false, Ordering::SeqCst);
            return;
        }
        // Late: every CPU was busy (processes busy-polling on the others,
        // say), and waiting for one costs more than reading in the
        // softirq. Read there for a while, then try again. (Counting late
        // starts in a row before holding off did no better for bulk and
        // raised the busy-polling latency: Documentation/performance.md.)
        let now = clock_us();
        if now.wrapping_sub(self.rx.queued_at.load(Ordering::Relaxed)) > RX_WORK_LATE_US {
            self.rx
                .inline_until
                .store(now.wrapping_add(RX_INLINE_HOLD_US), Ordering::Relaxed);
        }
        self.rx_read();
        self.rx.running.store(false, Ordering::SeqCst);
    }

    fn rx_read(self: &Arc<Self>) {
        self.engine_session(Caller::Process(self), |calls| {
            let sock = self.sock.lock();
            let Some(s) = sock.as_ref() else { return };
            // Counted as the stream's octets read meanwhile: what TCP's
            // backlog held is read in `release_sock`, inside `read`, by
            // this work's own `data_ready` calls.
            let before = self.stats.rx_bytes.load(Ordering::Relaxed);
            s.read(&mut |chunk| self.rx_engine(calls, chunk));
            let n = self
                .stats
                .rx_bytes
                .load(Ordering::Relaxed)
                .wrapping_sub(before);
            self.links
                .device()
                .counters()
                .add(HwCounter::RxWorkOctets, n);
        });
    }
}

impl WorkItem<1> for Qp {
    type Pointer = Arc<Qp>;

    fn run(this: Arc<Qp>) {
        this.run_rx();
    }
}

#[cfg(rsiw_kunit)]
#[kunit_tests(rsiw_fpdu_size)]
mod tests {
    use super::fpdu_emss;

    #[test]
    fn fpdus_span_segments_only_on_local_routes() {
        let segs = crate::module_parameters::fpdu_segs_local
            .value()
            .clamp(1, 64) as usize;
        // A route off the host: one TCP segment per FPDU (RFC 5044).
        assert_eq!(fpdu_emss(1448, false), 1448);
        assert_eq!(fpdu_emss(8948, false), 8948);
        // Loopback, veth: `fpdu_segs_local` segments, within MPA's 16-bit
        // length.
        assert_eq!(fpdu_emss(1448, true), (1448 * segs).min(65495));
        assert!(fpdu_emss(65483, true) <= 65495);
        // A nonsense MSS is bounded either way.
        assert_eq!(fpdu_emss(0, false), 536);
        assert_eq!(fpdu_emss(u32::MAX, false), 65495);
    }
}
