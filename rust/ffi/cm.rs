// SPDX-License-Identifier: GPL-2.0
//! The `iw_cm` provider entry points (`ib_device_ops.iw_*`), the CM's
//! workqueue and registry, and [`CmIdRef`], the `iw_cm_id` reference the
//! safe CM (`crate::cm`) delivers events through.
//!
//! `provider_data` of a listening `iw_cm_id` and of a passive one (set by
//! `iw_cm` from the `CONNECT_REQUEST` event) is an id the CM looks up in
//! its registry, never a pointer: an event `iw_cm` drops (listener being
//! destroyed, allocation failure) leaks nothing, and a stale id finds
//! nothing (`-ECONNRESET`).

use core::{
    ptr::{self, NonNull},
    sync::atomic::{AtomicBool, AtomicPtr, Ordering},
};

use kernel::{
    error::from_result,
    ffi::{c_int, c_void},
    prelude::*,
    sync::Arc,
    workqueue::Queue,
};

use super::{
    device::IbDevice,
    socket::{ListenOpts, Net, SockAddr},
    sys,
};
use crate::cm::{self, CmConfig, CmEvent, CmEventKind, CmEventTarget, CmQp, ConnParams, Registry};

// ---- runtime: workqueue and registry ------------------------------------

static WQ: AtomicPtr<sys::workqueue_struct> = AtomicPtr::new(ptr::null_mut());
/// The QPs' transmit work (`Qp::kick`): its own queue rather than the
/// system one, as it must make progress in memory reclaim (a storage ULP
/// such as NVMe-oF sends through it).
static TX_WQ: AtomicPtr<sys::workqueue_struct> = AtomicPtr::new(ptr::null_mut());
static REGISTRY_READY: AtomicBool = AtomicBool::new(false);

kernel::sync::global_lock! {
    // SAFETY: `Runtime::new` initialises it once, before `REGISTRY_READY`
    // is set; `with_registry` locks it only after that.
    unsafe(uninit) static CM_REGISTRY: Mutex<Registry> = Registry::new();
}

/// The module-lifetime state: the CM's and the QPs' workqueues (and the
/// CM registry). Dropped at module unload after every device is gone (so
/// after every QP, whose teardown waits for its TX work): closes what is
/// left, then drains and destroys the workqueues.
pub(crate) struct Runtime(());

impl Runtime {
    pub(crate) fn new() -> Result<Self> {
        if !REGISTRY_READY.load(Ordering::Acquire) {
            // SAFETY: module init runs once; the flag is only set here.
            unsafe { CM_REGISTRY.init() };
            REGISTRY_READY.store(true, Ordering::Release);
        }
        // SAFETY: plain allocation call.
        let wq = unsafe { sys::rsiw_cm_wq_alloc() };
        if wq.is_null() {
            return Err(ENOMEM);
        }
        // SAFETY: plain allocation call.
        let tx = unsafe { sys::rsiw_tx_wq_alloc() };
        if tx.is_null() {
            // SAFETY: just allocated, never used.
            unsafe { sys::destroy_workqueue(wq) };
            return Err(ENOMEM);
        }
        WQ.store(wq, Ordering::Release);
        TX_WQ.store(tx, Ordering::Release);
        Ok(Self(()))
    }
}

impl Drop for Runtime {
    fn drop(&mut self) {
        // Sockets unhooked and timers cancelled: nothing queues work after
        // this (the work items of closed ceps/listeners return at once).
        cm::shutdown();
        // Zero-copy notifications call into this module when TCP frees
        // the last skb with a QP's pages; the sockets are closed, so that
        // is soon.
        for _ in 0..10_000 {
            if super::zcopy::live_notifs() == 0 {
                break;
            }
            kernel::time::delay::fsleep(kernel::time::Delta::from_millis(1));
        }
        if super::zcopy::live_notifs() != 0 {
            pr_err!("{} zero-copy notifications still held by the network stack\n", super::zcopy::live_notifs());
        }
        for q in [&WQ, &TX_WQ] {
            let wq = q.swap(ptr::null_mut(), Ordering::AcqRel);
            if !wq.is_null() {
                // SAFETY: allocated in `new`; no enqueuer is left (above;
                // the QPs are gone with the devices), and
                // `destroy_workqueue` drains what is still queued.
                unsafe { sys::destroy_workqueue(wq) };
            }
        }
    }
}

/// The CM's workqueue, while the module is loaded.
pub(crate) fn queue() -> Option<&'static Queue> {
    let wq = WQ.load(Ordering::Acquire);
    if wq.is_null() {
        return None;
    }
    // SAFETY: the workqueue lives until `Runtime::drop`, which first stops
    // every user (`cm::shutdown`) and only then destroys it.
    Some(unsafe { Queue::from_raw(wq.cast()) })
}

/// The QPs' transmit workqueue, while the module is loaded.
pub(crate) fn tx_queue() -> Option<&'static Queue> {
    let wq = TX_WQ.load(Ordering::Acquire);
    if wq.is_null() {
        return None;
    }
    // SAFETY: destroyed only in `Runtime::drop`, after every device and so
    // every QP (whose teardown waits for its TX work) is gone.
    Some(unsafe { Queue::from_raw(wq.cast()) })
}

/// Runs `f` on the registry (process context: it is a mutex).
pub(crate) fn with_registry<R>(f: impl FnOnce(&mut Registry) -> R) -> Result<R> {
    if !REGISTRY_READY.load(Ordering::Acquire) {
        return Err(ENODEV);
    }
    let mut g = CM_REGISTRY.lock();
    Ok(f(&mut g))
}

/// Rate limit for peer-driven log messages.
pub(crate) fn ratelimited() -> bool {
    // SAFETY: plain call on a static ratelimit state.
    unsafe { sys::rsiw_cm_ratelimit() }
}

// ---- iw_cm_id references --------------------------------------------------

/// A reference on an `iw_cm_id` (`add_ref` on creation, `rem_ref` on
/// drop); events go to its `event_handler`.
///
/// # Invariants
///
/// Points to an `iw_cm_id` created by `iw_cm` (so `add_ref`, `rem_ref`
/// and `event_handler` are set) on which this value holds one reference.
pub(crate) struct CmIdRef(NonNull<sys::iw_cm_id>);

// SAFETY: iw_cm's reference count and event handler may be used from any
// thread and context (the handler queues work under an irq-safe lock).
unsafe impl Send for CmIdRef {}
// SAFETY: as above; `&CmIdRef` only delivers events.
unsafe impl Sync for CmIdRef {}

impl CmIdRef {
    /// Takes a reference on `id`.
    ///
    /// # Safety
    ///
    /// `id` must be a live `iw_cm_id` created by `iw_cm`.
    unsafe fn new(id: *mut sys::iw_cm_id) -> Result<Arc<dyn CmEventTarget>> {
        let nn = NonNull::new(id).ok_or(EINVAL)?;
        // SAFETY: live per the contract; iw_cm sets these in
        // `iw_create_cm_id`.
        let (add, has_rem, has_handler) =
            unsafe { ((*id).add_ref, (*id).rem_ref.is_some(), (*id).event_handler.is_some()) };
        let (Some(add), true, true) = (add, has_rem, has_handler) else {
            return Err(EINVAL);
        };
        // SAFETY: live per the contract.
        unsafe { add(id) };
        // INVARIANT: the reference was just taken; dropping `r` on an
        // allocation failure gives it back.
        let r = Self(nn);
        Ok(Arc::new(r, GFP_ATOMIC)?)
    }
}

impl Drop for CmIdRef {
    fn drop(&mut self) {
        let id = self.0.as_ptr();
        // SAFETY: we hold a reference (type invariant), so `id` is alive.
        unsafe {
            if let Some(rem) = (*id).rem_ref {
                rem(id);
            }
        }
    }
}

impl CmEventTarget for CmIdRef {
    fn deliver(&self, ev: &CmEvent<'_>) -> Result {
        let mut e = sys::iw_cm_event::default();
        e.event = match ev.kind {
            CmEventKind::ConnectRequest => sys::iw_cm_event_type_IW_CM_EVENT_CONNECT_REQUEST,
            CmEventKind::ConnectReply => sys::iw_cm_event_type_IW_CM_EVENT_CONNECT_REPLY,
            CmEventKind::Established => sys::iw_cm_event_type_IW_CM_EVENT_ESTABLISHED,
            CmEventKind::Disconnect => sys::iw_cm_event_type_IW_CM_EVENT_DISCONNECT,
            CmEventKind::Close => sys::iw_cm_event_type_IW_CM_EVENT_CLOSE,
        };
        e.status = ev.status;
        if let Some(a) = ev.local {
            e.local_addr = a.to_raw().0;
        }
        if let Some(a) = ev.remote {
            e.remote_addr = a.to_raw().0;
        }
        // The field is a u8; MPA allows more, iw_cm passes at most 255.
        let len = ev.private_data.len().min(usize::from(u8::MAX));
        if len > 0 {
            e.private_data = ev.private_data.as_ptr().cast_mut().cast();
            e.private_data_len = len as u8;
        }
        e.provider_data = ptr::without_provenance_mut(ev.provider_data);
        e.ird = ev.ird;
        e.ord = ev.ord;
        let id = self.0.as_ptr();
        // SAFETY: `id` is alive (type invariant); the handler copies the
        // event and the private data (for CONNECT_REQUEST/REPLY, the only
        // events carrying any) before returning.
        let ret = unsafe {
            match (*id).event_handler {
                Some(h) => h(id, &mut e),
                None => EINVAL.to_errno(),
            }
        };
        kernel::error::to_result(ret)
    }
}

// ---- integration: QPs -----------------------------------------------------

/// The QP `qpn` of `dev` as the CM's hand-off target (the device's QP
/// table, as `iw_get_qp` sees it).
fn find_qp(dev: &IbDevice, qpn: u32) -> Option<Arc<dyn CmQp>> {
    let qp: Arc<crate::qp::Qp> = dev.data().qps().get(qpn)?;
    Some(qp)
}

/// Installs the `iw_cm` provider entry points (the QP hooks `iw_get_qp`,
/// `iw_add_ref`, `iw_rem_ref` are `ffi::qp`'s).
pub(crate) fn install_ops(ops: &mut sys::ib_device_ops) {
    ops.iw_create_listen = Some(iw_create_listen);
    ops.iw_destroy_listen = Some(iw_destroy_listen);
    ops.iw_connect = Some(iw_connect);
    ops.iw_accept = Some(iw_accept);
    ops.iw_reject = Some(iw_reject);
}

// ---- iw_cm entry points ---------------------------------------------------
//
// iw_cm calls these in process context with a live `iw_cm_id` of one of
// our devices (`id->device`), and for connect/accept a valid conn_param.

/// The CM settings and network namespace of `id`'s device.
///
/// # Safety
///
/// `id` must be a live `iw_cm_id` of one of our devices.
unsafe fn device_of<'a>(id: *mut sys::iw_cm_id) -> (&'a IbDevice, CmConfig) {
    // SAFETY: per the contract the device is ours and alive for the call.
    let dev = unsafe { IbDevice::from_raw((*id).device) };
    let cfg = dev.data().cm_tuning().apply(CmConfig::for_device(&dev.data().attrs().limits));
    (dev, cfg)
}

/// # Safety
///
/// `p` must be a valid `iw_cm_conn_param` whose private data stays valid
/// for `'a`.
unsafe fn conn_params<'a>(p: *const sys::iw_cm_conn_param) -> ConnParams<'a> {
    // SAFETY: per the contract.
    let p = unsafe { &*p };
    let private_data = if p.private_data.is_null() || p.private_data_len == 0 {
        &[][..]
    } else {
        // SAFETY: iw_cm's contract: `private_data_len` readable bytes.
        unsafe { core::slice::from_raw_parts(p.private_data.cast::<u8>(), usize::from(p.private_data_len)) }
    };
    ConnParams { ird: p.ird, ord: p.ord, private_data }
}

/// Takes the id the CM stored in `provider_data`.
///
/// # Safety
///
/// `id` must be a live `iw_cm_id`.
unsafe fn take_provider_id(id: *mut sys::iw_cm_id) -> u64 {
    // SAFETY: per the contract; iw_cm serialises these calls per cm_id.
    let p = unsafe { core::mem::replace(&mut (*id).provider_data, ptr::null_mut()) };
    p.addr() as u64
}

unsafe extern "C" fn iw_create_listen(id: *mut sys::iw_cm_id, backlog: c_int) -> c_int {
    from_result(|| {
        // SAFETY: iw_cm passes a live cm_id of our device.
        let (dev, cfg) = unsafe { device_of(id) };
        let nd = dev.netdev().ok_or(ENODEV)?;
        // SAFETY: `m_local_addr` is a sockaddr_storage inside the live id.
        let addr = unsafe { SockAddr::from_raw(&raw const (*id).m_local_addr) }.ok_or(EAFNOSUPPORT)?;
        let opts = ListenOpts {
            // A wildcard listener of this device hears this device only.
            bound_dev_if: addr.is_wildcard().then(|| nd.ifindex()),
            // SAFETY: plain field of the live id.
            v6only: unsafe { (*id).afonly() },
        };
        // SAFETY: live cm_id from iw_cm.
        let target = unsafe { CmIdRef::new(id) }?;
        let lid = cm::listen(Net::of(&nd), addr, backlog, opts, cfg, target)?;
        // SAFETY: plain field of the live id; iw_cm does not use it.
        unsafe { (*id).provider_data = ptr::without_provenance_mut(lid as usize) };
        Ok(0)
    })
}

unsafe extern "C" fn iw_destroy_listen(id: *mut sys::iw_cm_id) -> c_int {
    // SAFETY: iw_cm passes the live listening cm_id.
    let lid = unsafe { take_provider_id(id) };
    if lid != 0 {
        cm::destroy_listener(lid);
    }
    0
}

unsafe extern "C" fn iw_connect(id: *mut sys::iw_cm_id, param: *mut sys::iw_cm_conn_param) -> c_int {
    from_result(|| {
        // SAFETY: iw_cm passes a live cm_id of our device and its params.
        let (dev, cfg) = unsafe { device_of(id) };
        // SAFETY: as above; the private data is copied by `cm::connect`.
        let p = unsafe { conn_params(param) };
        let nd = dev.netdev().ok_or(ENODEV)?;
        // SAFETY: sockaddr_storage fields of the live id.
        let (local, remote) = unsafe {
            (
                SockAddr::from_raw(&raw const (*id).m_local_addr),
                SockAddr::from_raw(&raw const (*id).m_remote_addr),
            )
        };
        let (local, remote) = (local.ok_or(EAFNOSUPPORT)?, remote.ok_or(EAFNOSUPPORT)?);
        // SAFETY: valid params per iw_cm.
        let qp = find_qp(dev, unsafe { (*param).qpn }).ok_or(EINVAL)?;
        // SAFETY: live cm_id from iw_cm.
        let target = unsafe { CmIdRef::new(id) }?;
        cm::connect(Net::of(&nd), local, remote, cfg, &p, qp, target)?;
        Ok(0)
    })
}

unsafe extern "C" fn iw_accept(id: *mut sys::iw_cm_id, param: *mut sys::iw_cm_conn_param) -> c_int {
    // SAFETY: iw_cm passes the passive cm_id it made for our CONNECT_REQUEST.
    let cep = unsafe { take_provider_id(id) };
    from_result(|| {
        // SAFETY: as above, with valid params.
        let (dev, _) = unsafe { device_of(id) };
        // SAFETY: as above; used before returning.
        let p = unsafe { conn_params(param) };
        // SAFETY: valid params per iw_cm.
        let Some(qp) = find_qp(dev, unsafe { (*param).qpn }) else {
            cm::abort(cep);
            return Err(EINVAL);
        };
        // SAFETY: live cm_id from iw_cm.
        let target = match unsafe { CmIdRef::new(id) } {
            Ok(t) => t,
            Err(e) => {
                cm::abort(cep);
                return Err(e);
            }
        };
        cm::accept(cep, &p, &*qp, target)?;
        Ok(0)
    })
}

unsafe extern "C" fn iw_reject(id: *mut sys::iw_cm_id, pdata: *const c_void, len: u8) -> c_int {
    // SAFETY: iw_cm passes the passive cm_id it made for our CONNECT_REQUEST.
    let cep = unsafe { take_provider_id(id) };
    let private_data = if pdata.is_null() || len == 0 {
        &[][..]
    } else {
        // SAFETY: iw_cm's contract: `len` readable bytes for the call.
        unsafe { core::slice::from_raw_parts(pdata.cast::<u8>(), usize::from(len)) }
    };
    match cm::reject(cep, private_data) {
        Ok(()) => 0,
        Err(e) => e.to_errno(),
    }
}
