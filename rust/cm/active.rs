// SPDX-License-Identifier: GPL-2.0
//! The active side (RFC 5044 section 7.1, RFC 6581): connect, send the
//! engine `Initiator`'s Request, feed it the Reply, then hand the stream
//! to the QP (which sends the RTR), or report why not (with the machine's
//! Terminate when RFC 6581 asks for one).

use super::*;

impl Cep {
    // Not inlined, here and in `pump_request`: the machines' events are
    // large, so each pump keeps its own frame off the work item's.
    #[inline(never)]
    pub(super) fn pump_active(self: &Arc<Self>, g: &mut CepInner, expired: bool) {
        let Some(state) = g.sock.as_ref().map(|s| s.state()) else {
            self.fail_active(g, errno(ECONNRESET));
            return;
        };
        if g.phase == CepPhase::Connecting {
            match state {
                TcpState::Established | TcpState::CloseWait => {
                    if let Err(e) = self.send_request(g) {
                        cm_log!("cm: sending the MPA request failed: {:?}\n", e);
                        self.count(HwCounter::CmFailures);
                        self.fail_active(g, errno(ECONNRESET));
                        return;
                    }
                    self.set_phase(g, CepPhase::AwaitReply);
                }
                TcpState::SynSent | TcpState::SynRecv => {
                    if expired {
                        self.count(HwCounter::CmTimeouts);
                        self.fail_active(g, errno(ETIMEDOUT));
                    }
                    return;
                }
                _ => {
                    let refused = g.sock.as_ref().and_then(|s| s.error()) == Some(ECONNREFUSED);
                    let status = if refused { ECONNREFUSED } else { ECONNRESET };
                    self.count(HwCounter::CmFailures);
                    self.fail_active(g, errno(status));
                    return;
                }
            }
        }
        let (Some(sock), Some(a)) = (g.sock.as_ref(), g.active.as_mut()) else {
            return;
        };
        // As in `pump_request`: the state before the read.
        let closing = sock.state().is_closing();
        read_reply(sock, &mut a.mpa);
        match a.mpa.poll() {
            None => {
                if expired {
                    self.trace_mpa_end(true, "failed", 0);
                    self.count(HwCounter::CmTimeouts);
                    self.fail_active(g, errno(ETIMEDOUT));
                } else if closing {
                    self.trace_mpa_end(true, "failed", 0);
                    self.count(HwCounter::CmFailures);
                    self.fail_active(g, errno(ECONNRESET));
                }
            }
            Some(startup::Event::Established(params)) => self.hand_off_active(g, &params),
            Some(startup::Event::Rejected { private_data, .. }) => {
                self.trace_mpa_end(true, "rejected", 0);
                self.count(HwCounter::MpaRejectReceived);
                self.report_failure(g, errno(ECONNREFUSED), private_data.as_bytes());
                self.close_locked(g, None);
            }
            Some(startup::Event::Failed(f)) => {
                // RFC 6581 section 9: the machine queued a Terminate in
                // the negotiated framing if the error goes in one.
                if f.terminate {
                    let _ = send_all(sock, a.mpa.transmit());
                }
                cm_log!("cm: MPA reply unusable ({:#06x})\n", f.error.to_bits());
                self.trace_mpa_end(true, "failed", f.error.to_bits());
                self.count(HwCounter::CmFailures);
                self.fail_active(g, errno(EINVAL));
            }
            Some(startup::Event::Request(_)) => {
                self.trace_mpa_end(true, "failed", 0);
                self.count(HwCounter::CmFailures);
                self.fail_active(g, errno(EINVAL));
            }
        }
    }

    /// The TCP connection is up: the machine's Request goes out.
    pub(super) fn send_request(&self, g: &mut CepInner) -> Result {
        let (Some(sock), Some(a)) = (g.sock.as_ref(), g.active.as_mut()) else {
            return Err(ENOTCONN);
        };
        send_all(sock, a.mpa.transmit())?;
        let n = a.mpa.transmit().len();
        a.mpa.sent(n);
        Ok(())
    }

    /// The Reply accepted the connection: the stream goes to the QP, then
    /// `CONNECT_REPLY` with the responder's private data.
    #[inline(never)]
    pub(super) fn hand_off_active(self: &Arc<Self>, g: &mut CepInner, params: &StreamParams) {
        self.trace_mpa_ok(params);
        let (Some(target), Some(active)) = (g.target.clone(), g.active.take()) else {
            self.close_locked(g, None);
            return;
        };
        let sink = match CmEventSink::new(target, Phase::AwaitReply, params.ird, params.ord) {
            Ok(s) => s,
            Err(e) => {
                self.count(HwCounter::CmFailures);
                self.fail_active(g, errno(e));
                return;
            }
        };
        let Some(mut sock) = g.sock.take() else {
            self.count(HwCounter::CmFailures);
            self.fail_active(g, errno(ECONNRESET));
            return;
        };
        let (local, remote) = (sock.local_addr().ok(), sock.peer_addr().ok());
        g.local = local.or(g.local);
        g.remote = remote.or(g.remote);
        sock.unhook();
        if params.rtr_to_send().is_some() && self.cfg.rtr_delay_ms > 0 {
            // What the peer sends meanwhile stays queued in the socket.
            fsleep(Delta::from_millis(i64::from(self.cfg.rtr_delay_ms)));
        }
        let stream = Stream {
            sock,
            params: *params,
            leftover: KVec::new(),
        };
        match active.qp.attach(stream, sink.clone()) {
            Ok(()) => {
                self.count(HwCounter::CmEstablished);
                sink.arm();
                sink.connect_reply(active.mpa.peer_private_data(), local, remote);
                self.close_locked(g, None);
            }
            Err(e) => {
                cm_log!("cm: QP {} refused the stream: {:?}\n", active.qp.qpn(), e);
                self.count(HwCounter::CmFailures);
                self.fail_active(g, errno(EINVAL));
            }
        }
    }
}

// ---- active side --------------------------------------------------------

/// The machine with the Request queued (private data too long: `EINVAL`).
/// Its own frame: the machine passes through the stack on its way to the
/// heap.
#[inline(never)]
pub(super) fn new_initiator(cfg: &InitiatorConfig<'_>) -> Result<KBox<Initiator>> {
    let b = KBox::<Initiator>::new_uninit(GFP_KERNEL)?;
    match Initiator::new(cfg) {
        Ok(m) => Ok(KBox::write(b, m)),
        Err(_) => Err(EINVAL),
    }
}

/// A socket for `remote` bound to `local`. rdma_cm chose `local`'s port
/// in its own port space, which TCP's does not see: a plain TCP socket
/// may hold the port (a TIME_WAIT of a connection that did not set
/// `SO_REUSEADDR` conflicts even with ours), and then `bind` fails with
/// `EADDRINUSE`. The same address with a port TCP picks does, as with an
/// iWARP port mapper: the iw_cm keeps the port the consumer knows and
/// records the one the stream uses (`m_local_addr`) from CONNECT_REPLY,
/// which reports the socket's own address. Linux siw fails the connect.
fn bind_local(net: Net, local: SockAddr, remote: &SockAddr) -> Result<TcpSocket> {
    let sock = TcpSocket::unconnected(net, remote)?;
    match sock.bind(local) {
        Err(e) if e == EADDRINUSE && local.port() != 0 => sock.bind(local.with_port(0))?,
        r => r?,
    }
    Ok(sock)
}

/// `iw_connect`: starts connecting `local` → `remote` in `net` and
/// returns at once; the outcome is one `CONNECT_REPLY` on `target`
/// (status 0 after `qp` took the stream, else `-ECONNREFUSED` with the
/// peer's private data if it rejected, `-ECONNRESET`, `-ETIMEDOUT`,
/// `-EINVAL` for an unusable reply). On `Err` no event follows.
pub(crate) fn connect(
    net: Net,
    local: SockAddr,
    remote: SockAddr,
    cfg: CmConfig,
    p: &ConnParams<'_>,
    qp: Arc<dyn CmQp>,
    target: Arc<dyn CmEventTarget>,
) -> Result<u64> {
    let (ird, ord) = cfg.ird_ord(p.ird, p.ord)?;
    let mpa = new_initiator(&cfg.initiator(ird, ord, p.private_data))?;
    let first = bind_local(net, local, &remote)?;
    let mpa_timeout_ms = cfg.mpa_timeout_ms;
    let cep = Cep::new(0, cfg, CepPhase::Connecting)?;
    let mut g = cep.inner.lock();
    let start = |mut sock: TcpSocket, w: Arc<CepWake>| -> Result<TcpSocket> {
        sock.hook(w)?;
        sock.start_connect(remote)?;
        Ok(sock)
    };
    let r = Arc::new(CepWake(cep.clone()), GFP_KERNEL)
        .map_err(Error::from)
        .and_then(|w| {
            match start(first, w.clone()) {
                // TCP already has this four-tuple (another socket's connection,
                // or its TIME_WAIT): the same address with another port, as for
                // a port in use.
                Err(e) if e == EADDRNOTAVAIL && local.port() != 0 => {
                    start(bind_local(net, local.with_port(0), &remote)?, w)
                }
                r => r,
            }
        });
    let sock = match r {
        Ok(sock) => sock,
        Err(e) => {
            cep.close_locked(&mut g, None);
            return Err(e);
        }
    };
    g.sock = Some(sock);
    g.active = Some(Active { qp, mpa });
    g.target = Some(target);
    g.remote = Some(remote);
    cep.trace_phase(&mut g, "-");
    cep.arm_timer(&mut g, mpa_timeout_ms);
    drop(g);
    kick_cep(&cep);
    Ok(cep.id)
}
