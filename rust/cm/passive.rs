// SPDX-License-Identifier: GPL-2.0
//! The passive side (RFC 5044 section 7.1, RFC 6581): feed the Request to
//! the engine's `Responder`, report CONNECT_REQUEST, then accept (the
//! machine's Reply, the RTR watch) or reject (a Reply with R set).

use super::*;

impl Cep {
    #[inline(never)]
    pub(super) fn pump_request(self: &Arc<Self>, g: &mut CepInner, expired: bool) {
        let (Some(sock), Some(m)) = (g.sock.as_ref(), g.passive.as_deref_mut()) else {
            self.close_locked(g, None);
            return;
        };
        // The state before the read: if the peer had closed by then, all
        // it sent before its FIN is queued and the read below sees it
        // (checked after, a FIN processed during the read would hide data
        // that arrived with it).
        let closing = sock.state().is_closing();
        read_request(sock, m);
        match m.poll() {
            None => {
                if expired {
                    cm_log!("cm: no MPA request in time, closing\n");
                    self.trace_mpa_end(false, "failed", 0);
                    self.count(HwCounter::CmTimeouts);
                    self.close_locked(g, None);
                } else if closing {
                    self.trace_mpa_end(false, "failed", 0);
                    self.count(HwCounter::CmFailures);
                    self.close_locked(g, None);
                }
            }
            Some(startup::Event::Request(p)) => self.offer(g, &p),
            Some(startup::Event::Failed(f)) => {
                // A Reply with R set, if the machine refused with one.
                let reply = m.transmit();
                let rejected = !reply.is_empty() && send_all(sock, reply).is_ok();
                cm_log!(
                    "cm: MPA request refused ({:#06x}), closing\n",
                    f.error.to_bits()
                );
                if rejected {
                    self.trace_mpa_end(false, "reject_sent", f.error.to_bits());
                    self.count(HwCounter::MpaRejectSent);
                } else {
                    self.trace_mpa_end(false, "failed", f.error.to_bits());
                    self.count(HwCounter::CmFailures);
                }
                self.close_locked(g, None);
            }
            Some(_) => {
                self.trace_mpa_end(false, "failed", 0);
                self.count(HwCounter::CmFailures);
                self.close_locked(g, None);
            }
        }
    }

    /// A valid Request: `CONNECT_REQUEST` with what the responder could
    /// grant, then the ULP decides.
    pub(super) fn offer(self: &Arc<Self>, g: &mut CepInner, p: &StreamParams) {
        let (Some(sock), Some(target)) = (g.sock.as_ref(), g.target.take()) else {
            self.close_locked(g, None);
            return;
        };
        send_event(
            &*target,
            &CmEvent {
                kind: CmEventKind::ConnectRequest,
                status: 0,
                local: sock.local_addr().ok(),
                remote: sock.peer_addr().ok(),
                private_data: p.private_data.as_bytes(),
                provider_data: self.id as usize,
                // rdma_cm turns `ird` into the ULP's initiator_depth (its
                // ORD) and `ord` into responder_resources (its IRD):
                // report what each may be given the peer's offer.
                ird: clamp_u8(p.ord),
                ord: clamp_u8(p.ird),
            },
        );
        drop(g.timer.take());
        self.set_phase(g, CepPhase::AwaitAccept);
    }

    /// `iw_accept`: MPA Reply with the ULP's private data and IRD/ORD,
    /// then the stream goes to `qp`.
    pub(super) fn accept(
        self: &Arc<Self>,
        p: &ConnParams<'_>,
        qp: &dyn CmQp,
        target: Arc<dyn CmEventTarget>,
    ) -> Result {
        let mut g = self.inner.lock();
        if g.phase != CepPhase::AwaitAccept || g.sock.is_none() {
            self.close_locked(&mut g, None);
            return Err(ECONNRESET);
        }
        let r = self.accept_locked(&mut g, p, qp, target);
        if r.is_err() {
            self.trace_mpa_end(false, "failed", 0);
            self.count(HwCounter::CmFailures);
            self.close_locked(&mut g, None);
        }
        r
    }

    pub(super) fn accept_locked(
        self: &Arc<Self>,
        g: &mut CepInner,
        p: &ConnParams<'_>,
        qp: &dyn CmQp,
        target: Arc<dyn CmEventTarget>,
    ) -> Result {
        let (ird, ord) = self.cfg.ird_ord(p.ird, p.ord)?;
        let m = g.passive.as_deref_mut().ok_or(ECONNRESET)?;
        // The ULP's IRD/ORD; an IRD of 0 still grants the one credit a
        // zero-length Read RTR needs. A refused `accept` changes nothing.
        let params = m
            .accept(&self.cfg.responder(ird, ord), p.private_data)
            .or_else(|_| m.accept(&self.cfg.responder(ird.max(1), ord), p.private_data))
            .map_err(|_| EINVAL)?;
        let sink = CmEventSink::new(target, Phase::AwaitEstablished, params.ird, params.ord)?;
        if let Some(s) = g.sock.as_ref() {
            g.local = s.local_addr().ok().or(g.local);
            g.remote = s.peer_addr().ok().or(g.remote);
        }
        let mut sock = g.sock.take().ok_or(ECONNRESET)?;
        // From here the CM no longer looks at the socket: what the peer
        // sends after its Request stays queued for the QP.
        sock.unhook();
        send_all(&sock, m.transmit())?;
        let watch_rtr = params.rtr_expected().is_some();
        qp.attach(
            Stream {
                sock,
                params,
                leftover: KVec::new(),
            },
            sink.clone(),
        )?;
        self.trace_mpa_ok(&params);
        self.count(HwCounter::CmEstablished);
        sink.arm();
        self.pending.store(false, Ordering::Relaxed);
        if watch_rtr {
            // The sink kicks us when the wait ends (we hold our lock:
            // that run sees WatchRtr).
            sink.watch(self.clone());
            if !sink.is_waiting() {
                // The RTR came before the watch: nothing left to watch.
                drop(sink.unwatch());
                self.close_locked(g, None);
                return Ok(());
            }
            self.set_phase(g, CepPhase::WatchRtr);
            g.sink = Some(sink);
            self.arm_timer(g, self.cfg.rtr_timeout_ms);
        } else {
            sink.established();
            self.close_locked(g, None);
        }
        Ok(())
    }

    /// `iw_reject`: MPA Reply with R set and the ULP's private data.
    pub(super) fn reject(&self, private_data: &[u8]) -> Result {
        let mut g = self.inner.lock();
        let g2 = &mut *g;
        let r = match (g2.phase, g2.sock.as_ref(), g2.passive.as_deref_mut()) {
            (CepPhase::AwaitAccept, Some(sock), Some(m)) => m
                .reject(private_data)
                .map_err(|_| EINVAL)
                .and_then(|()| send_all(sock, m.transmit())),
            _ => Err(ECONNRESET),
        };
        if r.is_ok() {
            self.trace_mpa_end(false, "reject_sent", 0);
            self.count(HwCounter::MpaRejectSent);
        }
        self.close_locked(&mut g, None);
        r
    }
}

/// Starts a passive cep on an accepted socket.
pub(crate) fn start_passive(
    sock: TcpSocket,
    listener: u64,
    cfg: CmConfig,
    target: Arc<dyn CmEventTarget>,
) -> Result {
    let mpa = KBox::new(
        Responder::new(&cfg.responder(cfg.max_ird, cfg.max_ord)),
        GFP_KERNEL,
    )?;
    let mpa_timeout_ms = cfg.mpa_timeout_ms;
    let cep = Cep::new(listener, cfg, CepPhase::AwaitRequest)?;
    let mut sock = sock;
    let r = {
        let mut g = cep.inner.lock();
        g.passive = Some(mpa);
        let r = Arc::new(CepWake(cep.clone()), GFP_KERNEL)
            .map_err(Error::from)
            .and_then(|w| sock.hook(w));
        match r {
            Ok(()) => {
                g.sock = Some(sock);
                g.target = Some(target);
                cep.trace_phase(&mut g, "-");
                cep.arm_timer(&mut g, mpa_timeout_ms);
                Ok(())
            }
            Err(e) => {
                cep.close_locked(&mut g, None);
                Err(e)
            }
        }
    };
    // Data that arrived before the hook is read by the first run.
    kick_cep(&cep);
    r
}

/// `iw_accept` on the cep `id` reported in `CONNECT_REQUEST`. On `Err`
/// the connection is closed and no event follows.
pub(crate) fn accept(
    id: u64,
    p: &ConnParams<'_>,
    qp: &dyn CmQp,
    target: Arc<dyn CmEventTarget>,
) -> Result {
    find_cep(id).ok_or(ECONNRESET)?.accept(p, qp, target)
}

/// `iw_reject` on the cep `id`: Reply with R set, then close.
pub(crate) fn reject(id: u64, private_data: &[u8]) -> Result {
    find_cep(id).ok_or(ECONNRESET)?.reject(private_data)
}

/// Drops the cep `id` without a reply (accept impossible, e.g. no QP).
pub(crate) fn abort(id: u64) {
    if let Some(c) = find_cep(id) {
        c.close(None);
    }
}
