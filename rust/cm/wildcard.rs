// SPDX-License-Identifier: GPL-2.0
//! Wildcard listeners and connections between local addresses.
//!
//! A wildcard listener of a device listens on its own net_device only
//! (`SO_BINDTODEVICE`, as siw does, so listeners of several devices and
//! drivers share a port). A connection from a local address to a local
//! address, though, arrives on the loopback device, which such a socket
//! never sees. So every wildcard listener also joins a [`Catcher`]: one
//! socket per (namespace, address, port) bound to the loopback device,
//! shared by the devices listening there, that hands each connection to
//! the listener of the device whose net_device owns the connection's
//! local address (the address the peer dialled).

use kernel::{
    impl_has_work, new_mutex, new_work,
    prelude::*,
    sync::{Arc, Mutex},
    workqueue::{Work, WorkItem},
};

use crate::{
    cm,
    ffi::{
        self,
        net::socket::{ListenOpts, Net, SockAddr, SockRx, SocketEvents, TcpSocket},
    },
};

/// The loopback device's ifindex in every namespace.
pub(crate) const LOOPBACK_IFINDEX: i32 = 1;

struct Inner {
    sock: Option<TcpSocket>,
    /// (ifindex of a listening device's net_device, listener id)
    members: KVec<(i32, u64)>,
}

/// The loopback side of the wildcard listeners on one address and port.
#[pin_data]
pub(crate) struct Catcher {
    /// The namespace's identity (`Net::id`).
    net: usize,
    addr: SockAddr,
    #[pin]
    inner: Mutex<Inner>,
    #[pin]
    work: Work<Catcher>,
}

impl_has_work! {
    impl HasWork<Self> for Catcher { self.work }
}

impl WorkItem for Catcher {
    type Pointer = Arc<Catcher>;

    fn run(this: Arc<Catcher>) {
        this.dispatch();
    }
}

struct Wake(Arc<Catcher>);

impl SocketEvents for Wake {
    fn data_ready(&self, _rx: &SockRx<'_>) {
        kick(&self.0);
    }
}

fn kick(c: &Arc<Catcher>) {
    if let Some(q) = crate::ffi::runtime::cm_queue() {
        let _ = q.enqueue(c.clone());
    }
}

/// Accepts per run at most this many, then requeues (fairness).
const BATCH: usize = 32;

impl Catcher {
    fn dispatch(self: &Arc<Self>) {
        for _ in 0..BATCH {
            // The registry lock comes before ours (`leave`): hand over
            // with ours dropped.
            let (s, lid) = {
                let g = self.inner.lock();
                let Some(sock) = g.sock.as_ref() else { return };
                let s = match sock.accept() {
                    Ok(Some(s)) => s,
                    Ok(None) | Err(_) => return,
                };
                let owner = s
                    .local_addr()
                    .ok()
                    .and_then(|a| ffi::net::netdev::owner_of(s.net(), &a));
                let lid = owner.and_then(|ifx| g.members.iter().find(|m| m.0 == ifx).map(|m| m.1));
                (s, lid)
            };
            match lid {
                // The listener applies its backlog and starts the MPA exchange.
                Some(lid) => cm::adopt(lid, s),
                // No listening device owns the address: refuse (close).
                None => drop(s),
            }
        }
        kick(self);
    }
}

/// Joins listener `lid` of the device on `ifindex` to the catcher for
/// `addr` (a wildcard address with its port) in `net`, creating it.
pub(crate) fn join(net: Net, addr: SockAddr, v6only: bool, ifindex: i32, lid: u64) -> Result {
    let found = crate::cm::registry::lock::with(|r| {
        r.catchers
            .iter()
            .find(|c| c.net == net.id() && c.addr == addr)
            .cloned()
    })?;
    if let Some(c) = found {
        c.inner.lock().members.push((ifindex, lid), GFP_KERNEL)?;
        return Ok(());
    }
    let opts = ListenOpts {
        bound_dev_if: Some(LOOPBACK_IFINDEX),
        v6only,
    };
    let mut sock = TcpSocket::listen_with(net, addr, 128, opts)?;
    let mut members = KVec::new();
    members.push((ifindex, lid), GFP_KERNEL)?;
    let c = Arc::pin_init(
        pin_init!(Catcher {
            net: net.id(),
            addr,
            inner <- new_mutex!(Inner { sock: None, members }, "rsiw_cm_catcher"),
            work <- new_work!("rsiw_cm_catcher"),
        }),
        GFP_KERNEL,
    )?;
    sock.hook(Arc::new(Wake(c.clone()), GFP_KERNEL)?)?;
    c.inner.lock().sock = Some(sock);
    crate::cm::registry::lock::with(|r| r.catchers.push(c.clone(), GFP_KERNEL))??;
    kick(&c);
    Ok(())
}

/// Listener `lid` leaves its catcher; the last one out closes it.
pub(crate) fn leave(lid: u64) {
    let empty = crate::cm::registry::lock::with(|r| {
        let mut out = None;
        r.catchers.retain(|c| {
            let mut g = c.inner.lock();
            g.members.retain(|m| m.1 != lid);
            if g.members.is_empty() {
                out = g.sock.take();
                false
            } else {
                true
            }
        });
        out
    });
    // Unhooks and releases the socket outside the registry lock.
    drop(empty);
}

/// Module teardown: closes every catcher.
pub(crate) fn shutdown(catchers: KVec<Arc<Catcher>>) {
    for c in catchers.iter() {
        drop(c.inner.lock().sock.take());
    }
}
