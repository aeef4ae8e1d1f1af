// SPDX-License-Identifier: GPL-2.0
//! In-kernel TCP sockets: the lower layer protocol of the iWARP stream.
//!
//! [`TcpSocket`] owns a `struct socket`; [`TcpSocket::hook`] replaces its
//! `sk_data_ready`, `sk_write_space` and `sk_state_change` callbacks with
//! trampolines into a [`SocketEvents`] implementation, as siw does. Receive
//! happens inside `data_ready` (softirq, socket locked) through
//! [`SockRx::read`], which runs `tcp_read_sock` and hands the consumer the
//! skb data in linear chunks (`skb_seq_read`): the consumer places payload
//! straight from them, so received data is copied exactly once.

use core::{marker::PhantomData, mem::size_of, ptr, ptr::NonNull};

use kernel::{
    ffi::{c_int, c_uint, c_void},
    prelude::*,
    sync::Arc,
};

use super::{super::sys, netdev::NetDev};

/// A TCP endpoint address.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SockAddr {
    V4 {
        addr: [u8; 4],
        port: u16,
    },
    V6 {
        addr: [u8; 16],
        port: u16,
        scope_id: u32,
    },
}

impl SockAddr {
    pub(crate) fn port(&self) -> u16 {
        match *self {
            Self::V4 { port, .. } | Self::V6 { port, .. } => port,
        }
    }

    /// The unspecified address (0.0.0.0 or ::): listen on every address.
    pub(crate) fn is_wildcard(&self) -> bool {
        match self {
            Self::V4 { addr, .. } => *addr == [0; 4],
            Self::V6 { addr, .. } => *addr == [0; 16],
        }
    }

    pub(crate) fn with_port(self, port: u16) -> Self {
        match self {
            Self::V4 { addr, .. } => Self::V4 { addr, port },
            Self::V6 { addr, scope_id, .. } => Self::V6 {
                addr,
                port,
                scope_id,
            },
        }
    }

    fn family(&self) -> c_int {
        match self {
            Self::V4 { .. } => sys::AF_INET as c_int,
            Self::V6 { .. } => sys::AF_INET6 as c_int,
        }
    }

    /// The C form, in a `sockaddr_storage`, and its length.
    pub(in crate::ffi) fn to_raw(self) -> (sys::__kernel_sockaddr_storage, c_int) {
        let mut ss = sys::__kernel_sockaddr_storage::default();
        let len = match self {
            Self::V4 { addr, port } => {
                let sin = sys::sockaddr_in {
                    sin_family: sys::AF_INET as sys::__kernel_sa_family_t,
                    sin_port: port.to_be(),
                    sin_addr: sys::in_addr {
                        s_addr: u32::from_ne_bytes(addr),
                    },
                    ..Default::default()
                };
                // SAFETY: `sockaddr_storage` is larger than and as aligned
                // as `sockaddr_in`; both are plain data.
                unsafe { ptr::write((&raw mut ss).cast(), sin) };
                size_of::<sys::sockaddr_in>()
            }
            Self::V6 {
                addr,
                port,
                scope_id,
            } => {
                let mut sin6 = sys::sockaddr_in6 {
                    sin6_family: sys::AF_INET6 as kernel::ffi::c_ushort,
                    sin6_port: port.to_be(),
                    sin6_scope_id: scope_id,
                    ..Default::default()
                };
                sin6.sin6_addr.in6_u.u6_addr8 = addr;
                // SAFETY: as above, for `sockaddr_in6`.
                unsafe { ptr::write((&raw mut ss).cast(), sin6) };
                size_of::<sys::sockaddr_in6>()
            }
        };
        (ss, len as c_int)
    }

    /// Parses a C socket address; `None` for families other than IPv4/6.
    ///
    /// # Safety
    ///
    /// `ss` must point to a readable `sockaddr_storage`.
    pub(crate) unsafe fn from_raw(ss: *const sys::__kernel_sockaddr_storage) -> Option<Self> {
        // SAFETY: readable per the contract; the family says which view
        // of the storage is valid.
        unsafe {
            match u32::from((*ss).__bindgen_anon_1.__bindgen_anon_1.ss_family) {
                sys::AF_INET => {
                    let sin = &*ss.cast::<sys::sockaddr_in>();
                    Some(Self::V4 {
                        addr: sin.sin_addr.s_addr.to_ne_bytes(),
                        port: u16::from_be(sin.sin_port),
                    })
                }
                sys::AF_INET6 => {
                    let sin6 = &*ss.cast::<sys::sockaddr_in6>();
                    Some(Self::V6 {
                        addr: sin6.sin6_addr.in6_u.u6_addr8,
                        port: u16::from_be(sin6.sin6_port),
                        scope_id: sin6.sin6_scope_id,
                    })
                }
                _ => None,
            }
        }
    }
}

/// TCP connection states (`include/net/tcp_states.h`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum TcpState {
    Established,
    SynSent,
    SynRecv,
    FinWait1,
    FinWait2,
    TimeWait,
    Close,
    CloseWait,
    LastAck,
    Listen,
    Closing,
    Other(u8),
}

impl TcpState {
    fn from_raw(s: u8) -> Self {
        match u32::from(s) {
            sys::TCP_ESTABLISHED => Self::Established,
            sys::TCP_SYN_SENT => Self::SynSent,
            sys::TCP_SYN_RECV => Self::SynRecv,
            sys::TCP_FIN_WAIT1 => Self::FinWait1,
            sys::TCP_FIN_WAIT2 => Self::FinWait2,
            sys::TCP_TIME_WAIT => Self::TimeWait,
            sys::TCP_CLOSE => Self::Close,
            sys::TCP_CLOSE_WAIT => Self::CloseWait,
            sys::TCP_LAST_ACK => Self::LastAck,
            sys::TCP_LISTEN => Self::Listen,
            sys::TCP_CLOSING => Self::Closing,
            _ => Self::Other(s),
        }
    }

    /// The peer closed or the connection is gone: no more data will come.
    pub(crate) fn is_closing(self) -> bool {
        !matches!(
            self,
            Self::Established | Self::SynSent | Self::SynRecv | Self::Listen
        )
    }
}

/// The network namespace sockets are created in.
///
/// # Invariants
///
/// Points to a live `struct net` for as long as the value is used: the
/// initial namespace, or that of a net_device the caller holds.
#[derive(Clone, Copy)]
pub(crate) struct Net(*mut sys::net);

impl Net {
    #[cfg(rsiw_kunit)]
    pub(crate) fn init() -> Self {
        Self(&raw mut sys::init_net)
    }

    /// The namespace's identity (for comparisons; never dereferenced).
    pub(crate) fn id(&self) -> usize {
        self.0 as usize
    }

    pub(super) fn as_ptr(&self) -> *mut sys::net {
        self.0
    }

    pub(crate) fn of(netdev: &NetDev) -> Self {
        // SAFETY: the net_device is alive, so is its namespace.
        Self(unsafe { sys::rsiw_dev_net(netdev.as_raw()) })
    }
}

/// What a hooked socket reports. Called with the socket locked (by TCP's
/// receive path in softirq, or by the process that owns the socket lock),
/// and possibly in atomic context: no sleeping.
pub(crate) trait SocketEvents: Send + Sync + 'static {
    /// Data arrived; read it with `rx.read`.
    fn data_ready(&self, rx: &SockRx<'_>);
    /// Send buffer space became available after a short send.
    fn write_space(&self) {}
    /// The TCP state changed (connected, peer closed, reset, ...); the new
    /// state is `rx.state()`. Data may still be queued: a FIN that TCP
    /// merged into the last data segment reports the state change before
    /// `data_ready`.
    fn state_change(&self, _rx: &SockRx<'_>) {}
}

/// The receive side of a socket inside `data_ready`.
pub(crate) struct SockRx<'a> {
    sk: *mut sys::sock,
    _callback: PhantomData<&'a ()>,
}

impl SockRx<'_> {
    /// Reads queued data: `f` is given linear chunks of the stream in
    /// order and returns how many bytes of each it consumed; reading stops
    /// at the first chunk not consumed whole. Returns the bytes consumed.
    pub(crate) fn read(&self, f: &mut dyn FnMut(&[u8]) -> usize) -> usize {
        // SAFETY: inside a socket callback the socket is locked and alive.
        unsafe { read_sock(self.sk, f) }
    }

    pub(crate) fn state(&self) -> TcpState {
        // SAFETY: the socket is alive during the callback.
        TcpState::from_raw(unsafe { sys::rsiw_sk_state(self.sk) })
    }

    /// Octets received in order and not yet read.
    pub(crate) fn queued(&self) -> u32 {
        // SAFETY: the socket is alive during the callback.
        unsafe { sys::rsiw_sk_rx_queued(self.sk) }
    }

    /// The callback runs in a process's context (its system call sent
    /// the data, on a route that stays in the host), not a kernel
    /// thread's (a work item's, `ksoftirqd`).
    pub(crate) fn in_process(&self) -> bool {
        // SAFETY: plain call.
        unsafe { sys::rsiw_current_is_process() }
    }
}

/// A socket callback (`sk_data_ready` and the like).
type SkCallback = Option<unsafe extern "C" fn(*mut sys::sock)>;

/// The callbacks a hooked socket had before, and its handler.
///
/// Not generic over the handler on purpose: TCP loads `sk->sk_data_ready`
/// without `sk_callback_lock` and calls it; the trampoline only then takes
/// the lock and loads `sk_user_data`. In between, the socket may have been
/// unhooked and hooked again by another owner (a listener's child: the
/// inherited listener trampoline, then the CM's hooks; the CM's, then the
/// QP's). A trampoline per handler type would then run one type's code on
/// another type's hooks. With one trampoline and dynamic dispatch, a late
/// call always reaches whatever handler is installed when it looks.
struct Hooks {
    events: Arc<dyn SocketEvents>,
    data_ready: SkCallback,
    write_space: SkCallback,
    state_change: SkCallback,
}

/// An in-kernel TCP socket.
///
/// # Invariants
///
/// `sock` is a socket this value created or accepted and releases on drop;
/// if `hooks` is set, it is owned by this value and is the socket's
/// `sk_user_data` (tagged `SK_USER_DATA_NOCOPY`), installed by `hook`.
pub(crate) struct TcpSocket {
    sock: NonNull<sys::socket>,
    hooks: Option<NonNull<Hooks>>,
}

// SAFETY: socket calls may be made from any thread; the callbacks and the
// hook state are protected by `sk_callback_lock`.
unsafe impl Send for TcpSocket {}
// SAFETY: the `&self` methods are socket calls the kernel serialises itself
// (`lock_sock` inside sendmsg/getsockname/...).
unsafe impl Sync for TcpSocket {}

impl TcpSocket {
    fn create(net: Net, family: c_int) -> Result<Self> {
        let mut sock: *mut sys::socket = ptr::null_mut();
        // SAFETY: `net` is live (type invariant of `Net`); `kern = 0` makes
        // the socket hold a reference on the namespace, as user sockets do,
        // so it cannot outlive it.
        kernel::error::to_result(unsafe {
            sys::__sock_create(
                net.0,
                family,
                sys::sock_type_SOCK_STREAM as c_int,
                sys::IPPROTO_TCP as c_int,
                &mut sock,
                0,
            )
        })?;
        let sock = NonNull::new(sock).ok_or(ENOMEM)?;
        Ok(Self { sock, hooks: None })
    }

    fn sk(&self) -> *mut sys::sock {
        // SAFETY: the socket is alive (type invariant) and has a `sock`.
        unsafe { (*self.sock.as_ptr()).sk }
    }

    #[cfg(rsiw_kunit)]
    /// A listening socket on `addr` (port 0: an ephemeral port).
    pub(crate) fn listen(net: Net, addr: SockAddr, backlog: i32) -> Result<Self> {
        let s = Self::create(net, addr.family())?;
        s.bind(addr)?;
        // SAFETY: the socket is alive and bound.
        kernel::error::to_result(unsafe { sys::kernel_listen(s.sock.as_ptr(), backlog) })?;
        Ok(s)
    }

    #[cfg(rsiw_kunit)]
    /// A socket bound to `addr` without `SO_REUSEADDR` (port 0: an
    /// ephemeral port), as a plain TCP application's: it holds the port
    /// against every other bind.
    pub(crate) fn bound_exclusive(net: Net, addr: SockAddr) -> Result<Self> {
        let s = Self::create(net, addr.family())?;
        s.bind_as_is(addr)?;
        Ok(s)
    }

    #[cfg(rsiw_kunit)]
    /// Connects to `addr`. Blocking: call from process context that may
    /// sleep; `nonblocking` returns at once and reports the outcome through
    /// the state change callback.
    pub(crate) fn connect(net: Net, addr: SockAddr, nonblocking: bool) -> Result<Self> {
        let s = Self::create(net, addr.family())?;
        s.set_nodelay();
        let (raw, len) = addr.to_raw();
        let flags = if nonblocking {
            sys::O_NONBLOCK as c_int
        } else {
            0
        };
        // SAFETY: a fresh socket; `raw` is a valid address of `len` bytes.
        let ret = unsafe {
            sys::kernel_connect(
                s.sock.as_ptr(),
                (&raw const raw).cast_mut().cast(),
                len,
                flags,
            )
        };
        if ret == 0 || (nonblocking && ret == EINPROGRESS.to_errno()) {
            Ok(s)
        } else {
            Err(Error::from_errno(ret))
        }
    }

    /// Accepts a pending connection; `Ok(None)` if there is none.
    pub(crate) fn accept(&self) -> Result<Option<Self>> {
        let mut new: *mut sys::socket = ptr::null_mut();
        // SAFETY: `self` is a live listening socket.
        let ret =
            unsafe { sys::kernel_accept(self.sock.as_ptr(), &mut new, sys::O_NONBLOCK as c_int) };
        if ret == EAGAIN.to_errno() {
            return Ok(None);
        }
        kernel::error::to_result(ret)?;
        let sock = NonNull::new(new).ok_or(ENOMEM)?;
        let s = Self { sock, hooks: None };
        if let Some(h) = self.hooks {
            // `sk_clone_lock` copied the listener's callbacks, i.e. our
            // trampolines (its `sk_user_data` was not copied: NOCOPY).
            // Give the child what it would have had without the hook.
            // SAFETY: `h` is the listener's installed `Hooks` (type
            // invariant), alive and unchanged while `&self` is held; the
            // child is alive and its callbacks are changed under its
            // callback lock, as in `hook`.
            unsafe {
                let sk = s.sk();
                sys::rsiw_sk_callback_write_lock(sk);
                let h = h.as_ptr();
                let mut cbs = sys::rsiw_sk_cbs::default();
                sys::rsiw_sk_get_cbs(sk, &mut cbs);
                cbs.data_ready = (*h).data_ready;
                cbs.write_space = (*h).write_space;
                cbs.state_change = (*h).state_change;
                sys::rsiw_sk_set_cbs(sk, &cbs);
                sys::rsiw_sk_callback_write_unlock(sk);
            }
        }
        s.set_nodelay();
        Ok(Some(s))
    }

    /// Disables Nagle: FPDUs are sent as they are built.
    pub(crate) fn set_nodelay(&self) {
        // SAFETY: the socket is alive.
        unsafe { sys::tcp_sock_set_nodelay(self.sk()) };
    }

    fn name(&self, peer: bool) -> Result<SockAddr> {
        let mut ss = sys::__kernel_sockaddr_storage::default();
        // SAFETY: the socket is alive; `ss` is large enough for any address.
        let ret = unsafe {
            if peer {
                sys::kernel_getpeername(self.sock.as_ptr(), (&raw mut ss).cast())
            } else {
                sys::kernel_getsockname(self.sock.as_ptr(), (&raw mut ss).cast())
            }
        };
        if ret < 0 {
            return Err(Error::from_errno(ret));
        }
        // SAFETY: `ss` was filled in by the kernel.
        unsafe { SockAddr::from_raw(&ss) }.ok_or(EAFNOSUPPORT)
    }

    /// The socket's namespace (alive while the socket is: it holds a
    /// reference on it).
    pub(crate) fn net(&self) -> Net {
        // SAFETY: the socket is alive.
        Net(unsafe { sys::rsiw_sock_net(self.sk()) })
    }

    pub(crate) fn local_addr(&self) -> Result<SockAddr> {
        self.name(false)
    }

    pub(crate) fn peer_addr(&self) -> Result<SockAddr> {
        self.name(true)
    }

    pub(crate) fn state(&self) -> TcpState {
        // SAFETY: the socket is alive.
        TcpState::from_raw(unsafe { sys::rsiw_sk_state(self.sk()) })
    }

    /// The connection's MSS: the largest TCP payload a segment carries.
    pub(crate) fn mss(&self) -> u32 {
        // SAFETY: the socket is alive.
        unsafe { sys::rsiw_tcp_mss(self.sk()) }
    }

    /// Segments TCP retransmitted on this connection (tcp_info's
    /// `total_retrans`).
    pub(crate) fn total_retrans(&self) -> u32 {
        // SAFETY: the socket is alive.
        unsafe { sys::rsiw_tcp_total_retrans(self.sk()) }
    }

    /// Whether the peer has stopped acknowledging: a retransmission timer
    /// expired since it last acknowledged new data (`icsk_retransmits`).
    pub(crate) fn peer_silent(&self) -> bool {
        // SAFETY: the socket is alive.
        unsafe { sys::rsiw_tcp_unanswered_rtos(self.sk()) > 0 }
    }

    /// Sends the concatenation of `bufs` without blocking. Returns how many
    /// bytes the socket took (possibly fewer than offered), or `EAGAIN`
    /// when it took none; `write_space` is called when room frees up.
    /// `more` hints that another send follows at once (`MSG_MORE`).
    pub(crate) fn send(&self, bufs: &[&[u8]], more: bool) -> Result<usize> {
        let mut vecs = [sys::kvec::default(); 8];
        let n = bufs.len().min(vecs.len());
        let mut total = 0usize;
        for (v, b) in vecs.iter_mut().zip(bufs) {
            v.iov_base = b.as_ptr().cast_mut().cast();
            v.iov_len = b.len();
            total += b.len();
        }
        if total == 0 {
            return Ok(0);
        }
        let mut msg = sys::msghdr {
            msg_flags: sys::MSG_DONTWAIT | sys::MSG_NOSIGNAL | if more { sys::MSG_MORE } else { 0 },
            ..Default::default()
        };
        // SAFETY: the socket is alive; the kvecs point into `bufs`, which
        // outlive the call, and are only read by the kernel.
        let ret = unsafe {
            sys::kernel_sendmsg(self.sock.as_ptr(), &mut msg, vecs.as_mut_ptr(), n, total)
        };
        if ret < 0 {
            Err(Error::from_errno(ret))
        } else {
            Ok(ret as usize)
        }
    }

    /// Whether the connection's route stays in this host: a loopback
    /// device, or a veth pair (whose other end is here by construction,
    /// in this namespace or another).
    pub(crate) fn local_route(&self) -> bool {
        // SAFETY: the socket is alive; the helper takes and drops its own
        // reference on the route.
        unsafe { sys::rsiw_sk_local_route(self.sk()) }
    }

    /// Sends the unsent part of `batch` by page reference without
    /// blocking, as [`Self::send`]; the batch advances by what the socket
    /// took. TCP takes its own page references. With a notification in the
    /// batch (`MSG_ZEROCOPY`), TCP reports when no skb refers to the pages
    /// any more, and a local receiver gets a copy (`skb_orphan_frags_rx`),
    /// never the pages themselves. A batch TCP copies
    /// ([`super::zcopy::Batch::set_copy`]) is in TCP's own memory for what
    /// the call took.
    /// At most `limit` octets go in this call.
    pub(crate) fn send_pages(
        &self,
        batch: &mut super::zcopy::Batch,
        limit: usize,
    ) -> Result<usize> {
        let (vecs, n, total, notif, copy) = batch.bio_vecs();
        let total = total.min(limit);
        if total == 0 {
            return Ok(0);
        }
        // SAFETY: the socket is alive; the bio_vecs describe `total` octets
        // of pages the batch holds references on until they are sent; the
        // notification, if any, is the batch's and it holds a reference.
        let ret =
            unsafe { sys::rsiw_sock_send_pages(self.sock.as_ptr(), vecs, n, total, notif, copy) };
        if ret < 0 {
            return Err(Error::from_errno(ret));
        }
        batch.advance(ret as usize);
        Ok(ret as usize)
    }

    /// Reads queued data from process context (for data that arrived
    /// before the socket was hooked); see [`SockRx::read`]. `f` runs in
    /// atomic context (the skb pages are mapped): it must not sleep, so
    /// any allocation in it is `GFP_ATOMIC`.
    pub(crate) fn read(&self, f: &mut dyn FnMut(&[u8]) -> usize) -> usize {
        let sk = self.sk();
        // SAFETY: the socket is alive; `tcp_read_sock` needs the socket
        // lock, which `lock_sock_nested`/`release_sock` take and drop.
        unsafe {
            sys::lock_sock_nested(sk, 0);
            let n = read_sock(sk, f);
            sys::release_sock(sk);
            n
        }
    }

    /// Shuts down both directions (FIN to the peer; no more sends).
    pub(crate) fn shutdown(&self) {
        // SAFETY: the socket is alive.
        unsafe { sys::kernel_sock_shutdown(self.sock.as_ptr(), sys::sock_shutdown_cmd_SHUT_RDWR) };
    }

    /// Routes the socket's callbacks to `events` until [`Self::unhook`] or
    /// drop. Data already queued is not reported: read it with
    /// [`Self::read`] after hooking.
    pub(crate) fn hook<T: SocketEvents>(&mut self, events: Arc<T>) -> Result {
        if self.hooks.is_some() {
            return Err(EBUSY);
        }
        let sk = self.sk();
        let events: Arc<dyn SocketEvents> = events;
        let hooks = KBox::new(
            Hooks {
                events,
                data_ready: None,
                write_space: None,
                state_change: None,
            },
            GFP_KERNEL,
        )?;
        let hooks = NonNull::from(KBox::leak(hooks));
        // SAFETY: the socket is alive; the callback fields and
        // `sk_user_data` are changed under `sk_callback_lock`, which the
        // trampolines take for reading.
        unsafe {
            sys::rsiw_sk_callback_write_lock(sk);
            let h = hooks.as_ptr();
            let mut old = sys::rsiw_sk_cbs::default();
            sys::rsiw_sk_get_cbs(sk, &mut old);
            (*h).data_ready = old.data_ready;
            (*h).write_space = old.write_space;
            (*h).state_change = old.state_change;
            // NOCOPY: a socket cloned from this one (a listener's child
            // connection) must not inherit a pointer to these hooks, which
            // go away with this socket; the child's inherited trampolines
            // then find no hooks and do nothing until `accept` gives the
            // child the listener's original callbacks.
            let new = sys::rsiw_sk_cbs {
                data_ready: Some(data_ready_tramp),
                write_space: Some(write_space_tramp),
                state_change: Some(state_change_tramp),
                user_data: h.cast::<c_void>().map_addr(|a| a | NOCOPY),
            };
            sys::rsiw_sk_set_cbs(sk, &new);
            sys::rsiw_sk_callback_write_unlock(sk);
        }
        // INVARIANT: the hooks are installed and owned by `self.hooks`.
        self.hooks = Some(hooks);
        Ok(())
    }

    /// Restores the socket's own callbacks. When this returns, no callback
    /// into the former handler runs or will run.
    pub(crate) fn unhook(&mut self) {
        let Some(hooks) = self.hooks.take() else {
            return;
        };
        let sk = self.sk();
        let h = hooks.as_ptr();
        // SAFETY: `h` was installed on this socket by `hook` (type
        // invariant) and is removed once. Trampolines hold the callback
        // lock for reading while they use the hooks, so once the write lock
        // is released with the original callbacks back and `sk_user_data`
        // cleared, nothing references `h`.
        unsafe {
            sys::rsiw_sk_callback_write_lock(sk);
            let orig = sys::rsiw_sk_cbs {
                data_ready: (*h).data_ready,
                write_space: (*h).write_space,
                state_change: (*h).state_change,
                user_data: ptr::null_mut(),
            };
            sys::rsiw_sk_set_cbs(sk, &orig);
            sys::rsiw_sk_callback_write_unlock(sk);
            drop(KBox::from_raw(h));
        }
    }
}

/// Options of a listening socket.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct ListenOpts {
    /// Only accept connections arriving on this interface (a wildcard
    /// listener of one RDMA device, as siw binds it).
    pub(crate) bound_dev_if: Option<i32>,
    /// IPv6 only (`IPV6_V6ONLY`, `iw_cm_id->afonly`).
    pub(crate) v6only: bool,
}

impl TcpSocket {
    /// An unconnected stream socket for `addr`'s family, to [`Self::bind`]
    /// and [`Self::start_connect`] after hooking it.
    pub(crate) fn unconnected(net: Net, addr: &SockAddr) -> Result<Self> {
        let s = Self::create(net, addr.family())?;
        s.set_nodelay();
        Ok(s)
    }

    /// Binds to `addr` (`SO_REUSEADDR` set); port 0: an ephemeral port.
    pub(crate) fn bind(&self, addr: SockAddr) -> Result {
        // SAFETY: the socket is alive.
        unsafe { sys::sock_set_reuseaddr(self.sk()) };
        self.bind_as_is(addr)
    }

    /// Binds to `addr` with the socket's options as they are.
    fn bind_as_is(&self, addr: SockAddr) -> Result {
        let (raw, len) = addr.to_raw();
        // SAFETY: the socket is alive; `raw` is a valid address of `len` bytes.
        kernel::error::to_result(unsafe {
            sys::kernel_bind(self.sock.as_ptr(), (&raw const raw).cast_mut().cast(), len)
        })
    }

    /// Starts a non-blocking connect to `addr`; the outcome is reported
    /// through `state_change` (Established, or Close with [`Self::error`]).
    pub(crate) fn start_connect(&self, addr: SockAddr) -> Result {
        let (raw, len) = addr.to_raw();
        // SAFETY: the socket is alive; `raw` is a valid address of `len` bytes.
        let ret = unsafe {
            sys::kernel_connect(
                self.sock.as_ptr(),
                (&raw const raw).cast_mut().cast(),
                len,
                sys::O_NONBLOCK as c_int,
            )
        };
        if ret == 0 || ret == EINPROGRESS.to_errno() {
            Ok(())
        } else {
            Err(Error::from_errno(ret))
        }
    }

    /// A listening socket on `addr` with `opts`.
    pub(crate) fn listen_with(
        net: Net,
        addr: SockAddr,
        backlog: i32,
        opts: ListenOpts,
    ) -> Result<Self> {
        let s = Self::create(net, addr.family())?;
        if let Some(ifindex) = opts.bound_dev_if {
            // SAFETY: a fresh, unbound socket no one else sees; siw sets
            // the field the same way before bind.
            unsafe { sys::rsiw_sk_bind_dev_if(s.sk(), ifindex) };
        }
        if opts.v6only && matches!(addr, SockAddr::V6 { .. }) {
            // SAFETY: the socket is alive.
            kernel::error::to_result(unsafe { sys::rsiw_sock_set_v6only(s.sk()) })?;
        }
        s.bind(addr)?;
        // SAFETY: a bound socket.
        kernel::error::to_result(unsafe { sys::kernel_listen(s.sock.as_ptr(), backlog) })?;
        Ok(s)
    }

    /// The socket's pending error (e.g. `ECONNREFUSED` after a failed
    /// connect), if any; not cleared.
    pub(crate) fn error(&self) -> Option<Error> {
        // SAFETY: the socket is alive.
        let e = unsafe { sys::rsiw_sock_error(self.sk()) };
        (e != 0).then(|| Error::from_errno(-e.abs()))
    }
}

/// What the self-tests need: loopback connections and a misbehaving peer.
#[cfg(rsiw_kunit)]
impl TcpSocket {
    /// A connected pair on 127.0.0.1, (connecting end, accepted end).
    pub(crate) fn loopback_pair() -> Result<(TcpSocket, TcpSocket)> {
        let any = SockAddr::V4 {
            addr: [127, 0, 0, 1],
            port: 0,
        };
        let l = TcpSocket::listen(Net::init(), any, 2)?;
        let port = l.local_addr()?.port();
        let c = TcpSocket::connect(Net::init(), any.with_port(port), false)?;
        for _ in 0..2000 {
            if let Some(s) = l.accept()? {
                return Ok((c, s));
            }
            kernel::time::delay::fsleep(kernel::time::Delta::from_millis(1));
        }
        Err(ETIMEDOUT)
    }
}

impl TcpSocket {
    /// Aborts the connection the way a crashed peer does: `SO_LINGER` with
    /// a zero timeout, then release, so TCP sends a reset, not a FIN (a
    /// torn-down QP whose pages TCP still holds; the self-tests' peers).
    pub(crate) fn abort(self) {
        // SAFETY: the socket is alive; `sock_no_linger` takes the socket
        // lock itself. The release in `drop` then sees the zero linger.
        unsafe { sys::sock_no_linger(self.sk()) };
        drop(self);
    }
}

impl Drop for TcpSocket {
    fn drop(&mut self) {
        self.unhook();
        // SAFETY: we own the socket (type invariant); nothing uses it after.
        unsafe { sys::sock_release(self.sock.as_ptr()) };
    }
}

/// `SK_USER_DATA_NOCOPY`, the flag bit `hook` sets in `sk_user_data`.
const NOCOPY: usize = sys::SK_USER_DATA_NOCOPY as usize;

/// The pointer in `sk_user_data` without flag bits (`__sk_user_data`).
///
/// # Safety
///
/// `sk` must be a live socket.
unsafe fn user_data_ptr(sk: *mut sys::sock) -> *mut c_void {
    // SAFETY: per the contract; the flag bits are the low three (the
    // `Hooks` allocation is at least 8-byte aligned).
    let p = unsafe { sys::rsiw_sk_user_data(sk) };
    p.map_addr(|a| a & !7)
}

/// Runs `f` on the hooks of `sk`, if rsiw's are installed.
///
/// # Safety
///
/// `sk` must be a live socket whose `sk_user_data`, if set, is a `Hooks`
/// (the trampolines run on sockets rsiw hooked, or on a listener's child
/// that inherited them, whose `sk_user_data` NOCOPY cleared).
unsafe fn with_hooks(sk: *mut sys::sock, f: impl FnOnce(&Hooks)) {
    // SAFETY: per the contract; the read lock keeps the hooks installed
    // (and so alive) until it is dropped.
    unsafe {
        sys::rsiw_sk_callback_read_lock(sk);
        let h = user_data_ptr(sk).cast::<Hooks>();
        if !h.is_null() {
            f(&*h);
        }
        sys::rsiw_sk_callback_read_unlock(sk);
    }
}

/// # Safety
///
/// Only the socket calls this, as the `sk_data_ready` callback that
/// `Hooks` installs, with its own `sk`.
unsafe extern "C" fn data_ready_tramp(sk: *mut sys::sock) {
    // SAFETY: installed only with a `Hooks`; the socket is locked by the
    // caller (TCP's receive path).
    unsafe {
        with_hooks(sk, |h| {
            h.events.data_ready(&SockRx {
                sk,
                _callback: PhantomData,
            })
        })
    };
}

/// # Safety
///
/// Only the socket calls this, as the `sk_write_space` callback that `Hooks`
/// installs, with its own `sk`.
unsafe extern "C" fn write_space_tramp(sk: *mut sys::sock) {
    // SAFETY: as for `data_ready_tramp`.
    unsafe { with_hooks(sk, |h| h.events.write_space()) };
}

/// # Safety
///
/// Only the socket calls this, as the `sk_state_change` callback that `Hooks`
/// installs, with its own `sk`.
unsafe extern "C" fn state_change_tramp(sk: *mut sys::sock) {
    // SAFETY: as for `data_ready_tramp`: TCP changes the state of a socket
    // it has locked (the receive path, timers under `bh_lock_sock`,
    // `shutdown` and `close` under `lock_sock`).
    unsafe {
        with_hooks(sk, |h| {
            h.events.state_change(&SockRx {
                sk,
                _callback: PhantomData,
            })
        })
    };
}

/// The reader closure behind `read_descriptor_t.arg.data`.
type Reader<'a> = &'a mut dyn FnMut(&[u8]) -> usize;

/// `tcp_read_sock` with `f` as the consumer.
///
/// # Safety
///
/// `sk` must be a live TCP socket locked by the caller.
unsafe fn read_sock(sk: *mut sys::sock, mut f: Reader<'_>) -> usize {
    // A non-zero count: keep reading; the actor zeroes it to stop.
    let mut desc = sys::read_descriptor_t {
        count: 1,
        ..Default::default()
    };
    desc.arg.data = (&raw mut f).cast();
    // SAFETY: per the contract; `desc` and the reader live across the call.
    let ret = unsafe { sys::rsiw_tcp_read_sock(sk, &mut desc, Some(read_actor)) };
    usize::try_from(ret).unwrap_or(0)
}

/// # Safety
///
/// Only `tcp_read_sock` calls this, as the read actor `read_sock` passes
/// it, with the descriptor that call set up and an skb it holds.
unsafe extern "C" fn read_actor(
    desc: *mut sys::read_descriptor_t,
    skb: *mut sys::sk_buff,
    offset: c_uint,
    len: usize,
) -> c_int {
    // SAFETY: `desc` is the descriptor `read_sock` passed, whose data is a
    // live `Reader`; `skb` holds `len` bytes from `offset`, which
    // `skb_seq_read` hands out as mapped linear chunks.
    unsafe {
        let f = &mut *(*desc).arg.data.cast::<Reader<'_>>();
        let len_u32 = u32::try_from(len).unwrap_or(u32::MAX);
        let mut st = sys::skb_seq_state::default();
        sys::skb_prepare_seq_read(skb, offset, offset.saturating_add(len_u32), &mut st);
        let mut consumed: u32 = 0;
        loop {
            let mut data: *const u8 = ptr::null();
            let n = sys::skb_seq_read(consumed, &mut data, &mut st);
            if n == 0 || data.is_null() {
                break; // end of range; skb_seq_read cleaned up
            }
            let chunk = core::slice::from_raw_parts(data, n as usize);
            let used = f(chunk).min(chunk.len());
            consumed += used as u32;
            if used < chunk.len() {
                sys::skb_abort_seq_read(&mut st);
                (*desc).count = 0; // the consumer is full: stop reading
                break;
            }
        }
        consumed as c_int
    }
}
