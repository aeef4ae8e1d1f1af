// SPDX-License-Identifier: GPL-2.0
//! Listeners: a listening TCP socket whose work item accepts connections and
//! starts one passive cep per socket.

use super::*;

// ---- listeners ----------------------------------------------------------

pub(crate) struct ListenerInner {
    pub(super) sock: Option<TcpSocket>,
    pub(super) target: Option<Arc<dyn CmEventTarget>>,
}

/// A listening endpoint (`iw_create_listen`).
#[pin_data]
pub(crate) struct Listener {
    pub(super) id: u64,
    pub(super) cfg: CmConfig,
    /// Bound on connections in negotiation or awaiting the ULP.
    pub(super) backlog: usize,
    #[pin]
    pub(super) inner: Mutex<ListenerInner>,
    #[pin]
    pub(super) work: Work<Listener>,
}

impl_has_work! {
    impl HasWork<Self> for Listener { self.work }
}

impl WorkItem for Listener {
    type Pointer = Arc<Listener>;

    fn run(this: Arc<Listener>) {
        this.accept_all();
    }
}

pub(crate) struct ListenWake(Arc<Listener>);

impl SocketEvents for ListenWake {
    fn data_ready(&self, _rx: &SockRx<'_>) {
        kick_listener(&self.0);
    }
}

/// Accepts per run at most this many, then requeues (fairness).
pub(crate) const ACCEPT_BATCH: usize = 32;

impl Listener {
    pub(crate) fn accept_all(self: &Arc<Self>) {
        let g = self.inner.lock();
        let (Some(sock), Some(target)) = (g.sock.as_ref(), g.target.as_ref()) else {
            return;
        };
        for _ in 0..ACCEPT_BATCH {
            match sock.accept() {
                Ok(Some(s)) => self.start(s, target),
                Ok(None) => return,
                Err(e) => {
                    cm_log!("cm: accept failed: {:?}\n", e);
                    return;
                }
            }
        }
        kick_listener(self);
    }

    /// Starts the MPA exchange on an accepted connection, within the
    /// backlog.
    pub(crate) fn start(&self, s: TcpSocket, target: &Arc<dyn CmEventTarget>) {
        let pending = crate::cm::registry::lock::with(|r| {
            r.ceps
                .iter()
                .filter(|c| c.listener == self.id && c.pending.load(Ordering::Relaxed))
                .count()
        })
        .unwrap_or(usize::MAX);
        if pending >= self.backlog {
            cm_log!("cm: listener backlog full, dropping a connection\n");
            return;
        }
        if let Err(e) = start_passive(s, self.id, self.cfg.clone(), target.clone()) {
            cm_log!("cm: cannot start a connection: {:?}\n", e);
        }
    }

    pub(crate) fn close(&self) {
        let (sock, target) = {
            let mut g = self.inner.lock();
            (g.sock.take(), g.target.take())
        };
        // Unhooks, then releases the socket and its accept queue.
        drop(sock);
        drop(target);
    }
}

/// `iw_create_listen`: listens on `addr` in `net`; returns the listener's
/// id (the listening `iw_cm_id`'s `provider_data`).
pub(crate) fn listen(
    net: Net,
    addr: SockAddr,
    backlog: i32,
    opts: ListenOpts,
    cfg: CmConfig,
    target: Arc<dyn CmEventTarget>,
) -> Result<u64> {
    let backlog = backlog.clamp(1, 1024);
    // A wildcard listener of a device on the loopback device needs no
    // socket of its own: the loopback catcher is it.
    let loopback = opts.bound_dev_if == Some(crate::cm::wildcard::LOOPBACK_IFINDEX);
    let sock = if loopback {
        None
    } else {
        Some(TcpSocket::listen_with(net, addr, backlog, opts)?)
    };
    let port = match &sock {
        Some(s) => s.local_addr()?.port(),
        None => addr.port(),
    };
    let inner = ListenerInner {
        sock: None,
        target: Some(target),
    };
    let l = Arc::pin_init(
        pin_init!(Listener {
            id: next_id(),
            cfg,
            backlog: backlog as usize,
            inner <- new_mutex!(inner, "rsiw_cm_listener"),
            work <- new_work!("rsiw_cm_listener"),
        }),
        GFP_KERNEL,
    )?;
    if let Some(mut sock) = sock {
        sock.hook(Arc::new(ListenWake(l.clone()), GFP_KERNEL)?)?;
        l.inner.lock().sock = Some(sock);
    }
    if let Err(e) = crate::cm::registry::lock::with(|r| r.listeners.push(l.clone(), GFP_KERNEL)) {
        l.close();
        return Err(e);
    }
    if let Some(ifindex) = opts.bound_dev_if {
        // Wildcard: connections between local addresses come over lo.
        if let Err(e) =
            crate::cm::wildcard::join(net, addr.with_port(port), opts.v6only, ifindex, l.id)
        {
            destroy_listener(l.id);
            return Err(e);
        }
    }
    kick_listener(&l);
    Ok(l.id)
}

/// A connection the loopback catcher accepted for listener `lid`.
pub(crate) fn adopt(lid: u64, sock: TcpSocket) {
    let l = crate::cm::registry::lock::with(|r| r.listeners.iter().find(|l| l.id == lid).cloned());
    if let Ok(Some(l)) = l {
        let g = l.inner.lock();
        if let Some(target) = g.target.as_ref() {
            l.start(sock, target);
        }
    }
}

#[cfg(rsiw_kunit)]
/// The address a listener is bound to (its port when asked for port 0).
pub(crate) fn listener_addr(id: u64) -> Result<SockAddr> {
    let l = crate::cm::registry::lock::with(|r| r.listeners.iter().find(|l| l.id == id).cloned())?
        .ok_or(ENOENT)?;
    let g = l.inner.lock();
    g.sock.as_ref().ok_or(ENOENT)?.local_addr()
}

/// `iw_destroy_listen`: closes the listener and every connection it
/// accepted that was not handed off yet (in negotiation or awaiting the
/// ULP's accept/reject, which then fail with `ECONNRESET`).
pub(crate) fn destroy_listener(id: u64) {
    let l = crate::cm::registry::lock::with(|r| {
        let pos = r.listeners.iter().position(|l| l.id == id)?;
        r.listeners.remove(pos).ok()
    });
    if let Ok(Some(l)) = l {
        l.close();
    }
    crate::cm::wildcard::leave(id);
    // The listener's socket is gone: no new ceps for it from here.
    let mine = crate::cm::registry::lock::with(|r| {
        let mut v = KVec::new();
        for c in r.ceps.iter().filter(|c| c.listener == id) {
            let _ = v.push(c.clone(), GFP_KERNEL);
        }
        v
    });
    if let Ok(ceps) = mine {
        for c in ceps.iter() {
            c.close_if_pending();
        }
    }
}
