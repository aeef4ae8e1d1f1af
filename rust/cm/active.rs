// SPDX-License-Identifier: GPL-2.0
//! The active side (RFC 5044 section 7.1, RFC 6581): connect, send the MPA
//! Request, check the Reply, send the RTR and hand the stream to the QP.

use super::*;

impl Cep {
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
                        self.fail_active(g, errno(ECONNRESET));
                        return;
                    }
                    g.phase = CepPhase::AwaitReply;
                }
                TcpState::SynSent | TcpState::SynRecv => {
                    if expired {
                        self.fail_active(g, errno(ETIMEDOUT));
                    }
                    return;
                }
                _ => {
                    let refused = g.sock.as_ref().and_then(|s| s.error()) == Some(ECONNREFUSED);
                    let status = if refused { ECONNREFUSED } else { ECONNRESET };
                    self.fail_active(g, errno(status));
                    return;
                }
            }
        }
        let Some(sock) = g.sock.as_ref() else { return };
        // As in `pump_request`: the state before the read.
        let closing = sock.state().is_closing();
        match read_frame(sock, &mut g.rx, Kind::Reply) {
            Err(_) => {
                cm_log!("cm: invalid MPA reply\n");
                self.fail_active(g, errno(EINVAL));
            }
            Ok(false) => {
                if expired {
                    self.fail_active(g, errno(ETIMEDOUT));
                } else if closing {
                    self.fail_active(g, errno(ECONNRESET));
                }
            }
            Ok(true) => self.check(g),
        }
    }

    pub(super) fn send_request(&self, g: &mut CepInner) -> Result {
        let (Some(sock), Some(a)) = (g.sock.as_ref(), g.active.as_ref()) else {
            return Err(ENOTCONN);
        };
        let req = request(&self.cfg.initiator(a.ird, a.ord, &a.private_data)).map_err(|_| EINVAL)?;
        send_frame(sock, &req)
    }

    /// A complete Reply: hand off, or report why not.
    pub(super) fn check(self: &Arc<Self>, g: &mut CepInner) {
        enum Outcome {
            Ok(StreamParams),
            Rejected,
            Failed(Option<(Framing, TermError)>),
        }
        let Some(a) = g.active.as_ref() else {
            self.close_locked(g, None);
            return;
        };
        let icfg = self.cfg.initiator(a.ird, a.ord, &[]);
        let outcome = match Repr::parse_bytes(&g.rx) {
            Err(_) => Outcome::Failed(None),
            Ok(rep) => match check_reply(&icfg, &rep) {
                Ok(n) => Outcome::Ok(StreamParams {
                    framing: n.framing,
                    ird: n.ird,
                    ord: n.ord,
                    rtr: n.rtr,
                    initiator: true,
                }),
                Err(Refused::Rejected { .. }) => Outcome::Rejected,
                Err(Refused::Failed { error, framing, .. }) => {
                    let term = matches!(error.llp_code(), Some(5..=7));
                    Outcome::Failed(framing.filter(|_| term).map(|f| (f, error)))
                }
            },
        };
        // The peer's private data: the frame minus header and enhanced data.
        let pd_off = match Repr::parse_bytes(&g.rx) {
            Ok(r) => g.rx.len() - r.private_data.len(),
            Err(_) => g.rx.len(),
        };
        match outcome {
            Outcome::Rejected => {
                let rx = core::mem::take(&mut g.rx);
                self.report_failure(g, errno(ECONNREFUSED), &rx[pd_off..]);
                self.close_locked(g, None);
            }
            Outcome::Failed(term) => {
                if let (Some((f, e)), Some(sock)) = (term, g.sock.as_ref()) {
                    send_terminate(sock, f, e);
                }
                cm_log!("cm: MPA reply unusable\n");
                self.fail_active(g, errno(EINVAL));
            }
            Outcome::Ok(params) => self.hand_off_active(g, params, pd_off),
        }
    }

    pub(super) fn hand_off_active(self: &Arc<Self>, g: &mut CepInner, params: StreamParams, pd_off: usize) {
        let (Some(target), Some(active)) = (g.target.clone(), g.active.take()) else {
            self.close_locked(g, None);
            return;
        };
        let sink = match CmEventSink::new(target, Phase::AwaitReply, params.ird, params.ord) {
            Ok(s) => s,
            Err(e) => {
                self.fail_active(g, errno(e));
                return;
            }
        };
        let Some(mut sock) = g.sock.take() else {
            self.fail_active(g, errno(ECONNRESET));
            return;
        };
        let (local, remote) = (sock.local_addr().ok(), sock.peer_addr().ok());
        sock.unhook();
        if matches!(params.rtr, Some(RtrMode::Zero(_))) && self.cfg.rtr_delay_ms > 0 {
            // What the peer sends meanwhile stays queued in the socket.
            fsleep(Delta::from_millis(i64::from(self.cfg.rtr_delay_ms)));
        }
        let stream = Stream { sock, params, leftover: KVec::new() };
        match active.qp.attach(stream, sink.clone()) {
            Ok(()) => {
                sink.arm();
                sink.connect_reply(&g.rx[pd_off..], local, remote);
                self.close_locked(g, None);
            }
            Err(e) => {
                cm_log!("cm: QP {} refused the stream: {:?}\n", active.qp.qpn(), e);
                self.fail_active(g, errno(EINVAL));
            }
        }
    }
}

// ---- active side --------------------------------------------------------

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
    if p.private_data.len() > max_private_data(true) {
        return Err(EINVAL);
    }
    let mut private_data = KVec::new();
    private_data.extend_from_slice(p.private_data, GFP_KERNEL)?;
    let mut sock = TcpSocket::unconnected(net, &remote)?;
    sock.bind(local)?;
    let cep = Cep::new(0, cfg, CepPhase::Connecting)?;
    let mut g = cep.inner.lock();
    let r = Arc::new(CepWake(cep.clone()), GFP_KERNEL)
        .map_err(Error::from)
        .and_then(|w| sock.hook(w))
        .and_then(|()| sock.start_connect(remote));
    if let Err(e) = r {
        drop(sock);
        cep.close_locked(&mut g, None);
        return Err(e);
    }
    g.sock = Some(sock);
    g.active = Some(Active { qp, ird, ord, private_data });
    g.target = Some(target);
    cep.arm_timer(&mut g, cfg.mpa_timeout_ms);
    drop(g);
    kick_cep(&cep);
    Ok(cep.id)
}
