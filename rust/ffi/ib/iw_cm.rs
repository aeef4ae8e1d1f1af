// SPDX-License-Identifier: GPL-2.0
//! The iw_cm provider: [`IwCmOps`], the events a connection reports
//! ([`CmEvent`]) through a held `iw_cm_id` ([`CmId`]), and the generic
//! `iw_*` entry points.
//!
//! `provider_data` of a listening `iw_cm_id` and of a passive one (set by
//! `iw_cm` from the `CONNECT_REQUEST` event) is a number the driver gives
//! (an id it looks up), never a pointer: an event `iw_cm` drops leaks
//! nothing, and a stale number finds nothing.

use core::ptr::{self, NonNull};

use kernel::{
    error::from_result,
    ffi::{c_int, c_void},
    prelude::*,
};

use super::super::{net::socket::SockAddr, sys};
use super::device::{Driver, IbDevice};
use super::qp::QpLinks;

/// `enum iw_cm_event_type`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum CmEventKind {
    ConnectRequest,
    ConnectReply,
    Established,
    Disconnect,
    Close,
}

/// `struct iw_cm_event`; `private_data` is borrowed (iw_cm copies it).
#[derive(Clone, Copy, Debug)]
pub(crate) struct CmEvent<'a> {
    pub(crate) kind: CmEventKind,
    /// 0 or a negative errno.
    pub(crate) status: i32,
    pub(crate) local: Option<SockAddr>,
    pub(crate) remote: Option<SockAddr>,
    pub(crate) private_data: &'a [u8],
    /// `CONNECT_REQUEST`: the driver's number for the connection, handed
    /// back in `iw_accept`/`iw_reject`.
    pub(crate) provider_data: usize,
    pub(crate) ird: u8,
    pub(crate) ord: u8,
}

/// `iw_cm_conn_param` (what `iw_connect`/`iw_accept` pass).
pub(crate) struct ConnParams<'a> {
    pub(crate) ird: u32,
    pub(crate) ord: u32,
    pub(crate) private_data: &'a [u8],
}

/// A reference on an `iw_cm_id` (`add_ref` on creation, `rem_ref` on
/// drop); events go to its `event_handler`.
///
/// # Invariants
///
/// Points to an `iw_cm_id` created by `iw_cm` (so `add_ref`, `rem_ref`
/// and `event_handler` are set) on which this value holds one reference.
pub(crate) struct CmId(NonNull<sys::iw_cm_id>);

// SAFETY: iw_cm's reference count and event handler may be used from any
// thread and context (the handler queues work under an irq-safe lock).
unsafe impl Send for CmId {}
// SAFETY: as above; `&CmId` only delivers events.
unsafe impl Sync for CmId {}

impl CmId {
    /// Takes a reference on `id`.
    ///
    /// # Safety
    ///
    /// `id` must be a live `iw_cm_id` created by `iw_cm`.
    unsafe fn new(id: *mut sys::iw_cm_id) -> Result<Self> {
        let nn = NonNull::new(id).ok_or(EINVAL)?;
        // SAFETY: live per the contract; iw_cm sets these in
        // `iw_create_cm_id`.
        let (add, has_rem, has_handler) = unsafe {
            (
                (*id).add_ref,
                (*id).rem_ref.is_some(),
                (*id).event_handler.is_some(),
            )
        };
        let (Some(add), true, true) = (add, has_rem, has_handler) else {
            return Err(EINVAL);
        };
        // SAFETY: live per the contract.
        unsafe { add(id) };
        // INVARIANT: the reference was just taken.
        Ok(Self(nn))
    }

    /// Delivers `ev` to the id's handler. May be called in any context,
    /// with spinlocks held (the handler queues the event).
    pub(crate) fn deliver(&self, ev: &CmEvent<'_>) -> Result {
        let event = match ev.kind {
            CmEventKind::ConnectRequest => sys::iw_cm_event_type_IW_CM_EVENT_CONNECT_REQUEST,
            CmEventKind::ConnectReply => sys::iw_cm_event_type_IW_CM_EVENT_CONNECT_REPLY,
            CmEventKind::Established => sys::iw_cm_event_type_IW_CM_EVENT_ESTABLISHED,
            CmEventKind::Disconnect => sys::iw_cm_event_type_IW_CM_EVENT_DISCONNECT,
            CmEventKind::Close => sys::iw_cm_event_type_IW_CM_EVENT_CLOSE,
        };
        let mut e = sys::iw_cm_event {
            event,
            status: ev.status,
            ..Default::default()
        };
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
        // event and the private data before returning.
        let ret = unsafe {
            match (*id).event_handler {
                Some(h) => h(id, &mut e),
                None => EINVAL.to_errno(),
            }
        };
        kernel::error::to_result(ret)
    }
}

impl CmId {
    /// Whether the caller of the `iw_connect`/`iw_accept` this id came
    /// with owns the QP of `links`, so may attach it to the connection: a
    /// process's QP only its own process (the task that calls, as ucma
    /// calls synchronously from the process's write()), a kernel QP only a
    /// kernel caller (`rsiw_iw_caller_owns_qp`). Meaningful only inside
    /// that `iw_connect`/`iw_accept` call (it looks at `current`).
    pub(crate) fn caller_owns<D: Driver>(&self, links: &QpLinks<D>) -> bool {
        let qp = links.raw_qp();
        if qp.is_null() {
            return false;
        }
        // SAFETY: `self.0` is a live iw_cm_id (type invariant); `qp` is
        // the live `ib_qp` of a QP not yet destroyed (the caller found it
        // in its device's QP table, which `destroy_qp` leaves before the
        // core frees it; see `QpLinks`). The helper only reads their
        // fields and `current`.
        unsafe { sys::rsiw_iw_caller_owns_qp(self.0.as_ptr(), qp) }
    }
}

impl Drop for CmId {
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

/// A driver's iWARP connection management.
#[vtable]
pub(crate) trait IwCmOps: Driver {
    /// `iw_create_listen` on `addr` (`v6only`: the id's AF_ONLY); returns
    /// the listener's number for `iw_destroy_listen`.
    fn create_listen(
        dev: &IbDevice<Self>,
        addr: SockAddr,
        backlog: i32,
        v6only: bool,
        id: CmId,
    ) -> Result<usize>;
    /// `iw_destroy_listen` of the listener numbered `listener`.
    fn destroy_listen(listener: usize);
    /// `iw_connect` from `local` to `remote` for the QP numbered `qpn`.
    fn connect(
        dev: &IbDevice<Self>,
        local: SockAddr,
        remote: SockAddr,
        params: &ConnParams<'_>,
        qpn: u32,
        id: CmId,
    ) -> Result;
    /// `iw_accept` of the connection numbered `conn` (its CONNECT_REQUEST's
    /// `provider_data`) for the QP numbered `qpn`; `id` is the passive
    /// id, or why no reference could be taken on it. On `Err` the
    /// connection is closed.
    fn accept(
        dev: &IbDevice<Self>,
        conn: usize,
        params: &ConnParams<'_>,
        qpn: u32,
        id: Result<CmId>,
    ) -> Result;
    /// `iw_reject` of the connection numbered `conn`.
    fn reject(conn: usize, private_data: &[u8]) -> Result;
}

pub(super) fn install_ops<D: IwCmOps>(ops: &mut sys::ib_device_ops) {
    ops.iw_create_listen = Some(iw_create_listen::<D>);
    ops.iw_destroy_listen = Some(iw_destroy_listen::<D>);
    ops.iw_connect = Some(iw_connect::<D>);
    ops.iw_accept = Some(iw_accept::<D>);
    ops.iw_reject = Some(iw_reject::<D>);
}

// iw_cm calls these in process context with a live `iw_cm_id` of one of
// `D`'s devices (`id->device`), and for connect/accept a valid conn_param.

/// # Safety
///
/// `id` must be a live `iw_cm_id` of one of `D`'s devices.
unsafe fn device_of<'a, D: Driver>(id: *mut sys::iw_cm_id) -> &'a IbDevice<D> {
    // SAFETY: per the contract the device is `D`'s and alive for the call.
    unsafe { IbDevice::from_raw((*id).device) }
}

/// # Safety
///
/// `p` must be a valid `iw_cm_conn_param` whose private data stays valid
/// for `'a`.
unsafe fn conn_params<'a>(p: *const sys::iw_cm_conn_param) -> (ConnParams<'a>, u32) {
    // SAFETY: per the contract.
    let p = unsafe { &*p };
    let private_data = if p.private_data.is_null() || p.private_data_len == 0 {
        &[][..]
    } else {
        // SAFETY: iw_cm's contract: `private_data_len` readable bytes.
        unsafe {
            core::slice::from_raw_parts(
                p.private_data.cast::<u8>(),
                usize::from(p.private_data_len),
            )
        }
    };
    (
        ConnParams {
            ird: p.ird,
            ord: p.ord,
            private_data,
        },
        p.qpn,
    )
}

/// Takes the number the driver stored in `provider_data`.
///
/// # Safety
///
/// `id` must be a live `iw_cm_id`.
unsafe fn take_provider_data(id: *mut sys::iw_cm_id) -> usize {
    // SAFETY: per the contract; iw_cm serialises these calls per cm_id.
    let p = unsafe { core::mem::replace(&mut (*id).provider_data, ptr::null_mut()) };
    p.addr()
}

/// # Safety
///
/// Only the iWARP CM (`iw_cm`) calls this, as the `create_listen` callback of the
/// `iw_cm_verbs` this file fills in, with the pointers it passes valid for the
/// call and, for an object, one of `D`'s it created through this file.
unsafe extern "C" fn iw_create_listen<D: IwCmOps>(id: *mut sys::iw_cm_id, backlog: c_int) -> c_int {
    from_result(|| {
        // SAFETY: iw_cm passes a live cm_id of `D`'s device.
        let dev = unsafe { device_of::<D>(id) };
        // SAFETY: `m_local_addr` is a sockaddr_storage inside the live id.
        let addr =
            unsafe { SockAddr::from_raw(&raw const (*id).m_local_addr) }.ok_or(EAFNOSUPPORT)?;
        // SAFETY: plain field of the live id.
        let v6only = unsafe { (*id).afonly() };
        // SAFETY: live cm_id from iw_cm.
        let cm_id = unsafe { CmId::new(id) }?;
        let listener = D::create_listen(dev, addr, backlog, v6only, cm_id)?;
        // SAFETY: plain field of the live id; iw_cm does not use it.
        unsafe { (*id).provider_data = ptr::without_provenance_mut(listener) };
        Ok(0)
    })
}

/// # Safety
///
/// Only the iWARP CM (`iw_cm`) calls this, as the `destroy_listen` callback of the
/// `iw_cm_verbs` this file fills in, with the pointers it passes valid for the
/// call and, for an object, one of `D`'s it created through this file.
unsafe extern "C" fn iw_destroy_listen<D: IwCmOps>(id: *mut sys::iw_cm_id) -> c_int {
    // SAFETY: iw_cm passes the live listening cm_id.
    let listener = unsafe { take_provider_data(id) };
    if listener != 0 {
        D::destroy_listen(listener);
    }
    0
}

/// # Safety
///
/// Only the iWARP CM (`iw_cm`) calls this, as the `connect` callback of the
/// `iw_cm_verbs` this file fills in, with the pointers it passes valid for the
/// call and, for an object, one of `D`'s it created through this file.
unsafe extern "C" fn iw_connect<D: IwCmOps>(
    id: *mut sys::iw_cm_id,
    param: *mut sys::iw_cm_conn_param,
) -> c_int {
    from_result(|| {
        // SAFETY: iw_cm passes a live cm_id of `D`'s device and its params;
        // the private data is used before returning.
        let (dev, (p, qpn)) = unsafe { (device_of::<D>(id), conn_params(param)) };
        // SAFETY: sockaddr_storage fields of the live id.
        let (local, remote) = unsafe {
            (
                SockAddr::from_raw(&raw const (*id).m_local_addr),
                SockAddr::from_raw(&raw const (*id).m_remote_addr),
            )
        };
        let (local, remote) = (local.ok_or(EAFNOSUPPORT)?, remote.ok_or(EAFNOSUPPORT)?);
        // SAFETY: live cm_id from iw_cm.
        let cm_id = unsafe { CmId::new(id) }?;
        D::connect(dev, local, remote, &p, qpn, cm_id)?;
        Ok(0)
    })
}

/// # Safety
///
/// Only the iWARP CM (`iw_cm`) calls this, as the `accept` callback of the
/// `iw_cm_verbs` this file fills in, with the pointers it passes valid for the
/// call and, for an object, one of `D`'s it created through this file.
unsafe extern "C" fn iw_accept<D: IwCmOps>(
    id: *mut sys::iw_cm_id,
    param: *mut sys::iw_cm_conn_param,
) -> c_int {
    // SAFETY: iw_cm passes the passive cm_id it made for our CONNECT_REQUEST.
    let conn = unsafe { take_provider_data(id) };
    from_result(|| {
        // SAFETY: as above, with valid params used before returning.
        let (dev, (p, qpn)) = unsafe { (device_of::<D>(id), conn_params(param)) };
        // SAFETY: live cm_id from iw_cm.
        let cm_id = unsafe { CmId::new(id) };
        D::accept(dev, conn, &p, qpn, cm_id)?;
        Ok(0)
    })
}

/// # Safety
///
/// Only the iWARP CM (`iw_cm`) calls this, as the `reject` callback of the
/// `iw_cm_verbs` this file fills in, with the pointers it passes valid for the
/// call and, for an object, one of `D`'s it created through this file.
unsafe extern "C" fn iw_reject<D: IwCmOps>(
    id: *mut sys::iw_cm_id,
    pdata: *const c_void,
    len: u8,
) -> c_int {
    // SAFETY: iw_cm passes the passive cm_id it made for our CONNECT_REQUEST.
    let conn = unsafe { take_provider_data(id) };
    let private_data = if pdata.is_null() || len == 0 {
        &[][..]
    } else {
        // SAFETY: iw_cm's contract: `len` readable bytes for the call.
        unsafe { core::slice::from_raw_parts(pdata.cast::<u8>(), usize::from(len)) }
    };
    match D::reject(conn, private_data) {
        Ok(()) => 0,
        Err(e) => e.to_errno(),
    }
}
