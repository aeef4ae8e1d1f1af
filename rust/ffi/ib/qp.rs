// SPDX-License-Identifier: GPL-2.0
//! Queue pairs: [`QpOps`], what a QP is linked to ([`QpLinks`]), its
//! asynchronous events ([`QpNotifier`]), its attributes, and the generic QP
//! entry points, the iw_cm's QP hooks (`iw_add_ref`, `iw_rem_ref`,
//! `iw_get_qp`) among them.

use core::{
    marker::PhantomData,
    ptr,
    sync::atomic::{AtomicU32, Ordering},
};

use kernel::{
    error::from_result,
    ffi::c_int,
    prelude::*,
    str::{CStr, CStrExt},
    sync::Arc,
};

use super::super::{object::CoreObj, sys};
use super::{
    cq::{cq_data, WcQp},
    device::{dev_data, pd_data, Driver},
    event::{raise, Element},
    srq::srq_data,
    umap::Udata,
    wr::{post_recv_chain, post_send_chain, RecvWrRef, SendWrRef},
};

/// The QP states of the verbs (`enum ib_qp_state`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum QpState {
    Reset,
    Init,
    Rtr,
    Rts,
    Sqd,
    Sqe,
    Err,
}

impl QpState {
    fn from_raw(s: sys::ib_qp_state) -> Result<Self> {
        Ok(match s {
            sys::ib_qp_state_IB_QPS_RESET => Self::Reset,
            sys::ib_qp_state_IB_QPS_INIT => Self::Init,
            sys::ib_qp_state_IB_QPS_RTR => Self::Rtr,
            sys::ib_qp_state_IB_QPS_RTS => Self::Rts,
            sys::ib_qp_state_IB_QPS_SQD => Self::Sqd,
            sys::ib_qp_state_IB_QPS_SQE => Self::Sqe,
            sys::ib_qp_state_IB_QPS_ERR => Self::Err,
            _ => return Err(EINVAL),
        })
    }

    pub(in crate::ffi) fn to_raw(self) -> sys::ib_qp_state {
        match self {
            Self::Reset => sys::ib_qp_state_IB_QPS_RESET,
            Self::Init => sys::ib_qp_state_IB_QPS_INIT,
            Self::Rtr => sys::ib_qp_state_IB_QPS_RTR,
            Self::Rts => sys::ib_qp_state_IB_QPS_RTS,
            Self::Sqd => sys::ib_qp_state_IB_QPS_SQD,
            Self::Sqe => sys::ib_qp_state_IB_QPS_SQE,
            Self::Err => sys::ib_qp_state_IB_QPS_ERR,
        }
    }
}

/// A QP's queue sizes (`struct ib_qp_cap`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct QpCaps {
    pub(crate) max_send_wr: u32,
    pub(crate) max_recv_wr: u32,
    pub(crate) max_send_sge: u32,
    pub(crate) max_recv_sge: u32,
    pub(crate) max_inline_data: u32,
}

/// What `create_qp` asks for (`struct ib_qp_init_attr`). The driver may
/// lower `cap` to what it grants; the consumer sees the result.
#[derive(Clone, Copy, Debug)]
pub(crate) struct QpInitAttr {
    /// A reliable connected QP (`IB_QPT_RC`).
    pub(crate) rc: bool,
    pub(crate) has_send_cq: bool,
    pub(crate) has_recv_cq: bool,
    pub(crate) has_srq: bool,
    /// `IB_SIGNAL_ALL_WR`.
    pub(crate) sig_all: bool,
    pub(crate) cap: QpCaps,
}

/// What `modify_qp` changes (the attributes its mask names).
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct QpAttrMod {
    pub(crate) state: Option<QpState>,
    /// ORD (`IB_QP_MAX_QP_RD_ATOMIC`).
    pub(crate) max_rd_atomic: Option<u8>,
    /// IRD (`IB_QP_MAX_DEST_RD_ATOMIC`).
    pub(crate) max_dest_rd_atomic: Option<u8>,
    /// `IB_QP_ACCESS_FLAGS` (`IB_ACCESS_*`).
    pub(crate) access_flags: Option<u32>,
}

/// What `query_qp` reports.
#[derive(Clone, Copy, Debug)]
pub(crate) struct QpAttr {
    pub(crate) state: QpState,
    pub(crate) max_rd_atomic: u8,
    pub(crate) max_dest_rd_atomic: u8,
    pub(crate) cap: QpCaps,
}

/// A driver's queue pair, held as `Arc<Self>` by the `ib_qp`.
#[vtable]
pub(crate) trait QpOps<D: Driver>: Send + Sync + Sized {
    /// `create_qp`: checks `attr` (lowering `attr.cap` to what it grants)
    /// and makes the QP; returns it and its number.
    fn create(
        dev: &D::Device,
        pd: &D::Pd,
        attr: &mut QpInitAttr,
        links: QpLinks<D>,
        notifier: QpNotifier,
        udata: Option<&mut Udata<'_>>,
    ) -> Result<(Arc<Self>, u32)>;
    /// `post_send` with no WR: a process's doorbell (its SQ ring).
    fn doorbell_send(_this: &Arc<Self>) -> Result {
        Err(EINVAL)
    }
    /// `post_recv` with no WR: a process's doorbell (its RQ ring).
    fn doorbell_recv(_this: &Arc<Self>) -> Result {
        Err(EINVAL)
    }
    /// The links the QP was made with.
    fn links(&self) -> &QpLinks<D>;
    /// `destroy_qp`, first step: ends the stream and flushes the queues
    /// (the iw_cm then drops its references).
    fn detach(this: &Arc<Self>);
    /// `destroy_qp`, last step: the iw_cm holds no reference any more;
    /// before the `ib_qp`'s hold on the QP is dropped.
    fn destroyed(this: &Arc<Self>, dev: &D::Device);
    /// `modify_qp`.
    fn modify(this: &Arc<Self>, attr: &QpAttrMod) -> Result;
    /// `query_qp`.
    fn query(&self) -> QpAttr;
    /// `post_send`, one WR of the chain.
    fn post_send(this: &Arc<Self>, wr: &SendWrRef<'_, D>) -> Result;
    /// `post_recv`, one WR of the chain.
    fn post_recv(this: &Arc<Self>, wr: &RecvWrRef<'_>) -> Result;
    /// `fill_res_qp_entry`: the driver's attributes of the QP in
    /// `rdma resource show qp -dd` (process context).
    fn res_attrs(&self, out: &mut ResAttrs<'_>) -> Result;
}

/// The driver attributes of a resource in an rdma netlink message
/// (`rdma_nl_put_driver_*` into the message's driver table).
pub(crate) struct ResAttrs<'a> {
    msg: *mut sys::sk_buff,
    _msg: PhantomData<&'a mut sys::sk_buff>,
}

impl ResAttrs<'_> {
    fn put(ret: c_int) -> Result {
        if ret == 0 {
            Ok(())
        } else {
            Err(EMSGSIZE)
        }
    }

    pub(crate) fn u32(&mut self, name: &CStr, value: u32) -> Result {
        // SAFETY: `msg` is the message being built (valid for 'a); `name`
        // is NUL-terminated and copied into it.
        Self::put(unsafe {
            sys::rdma_nl_put_driver_u32(self.msg, name.as_char_ptr().cast(), value)
        })
    }

    pub(crate) fn u64(&mut self, name: &CStr, value: u64) -> Result {
        // SAFETY: as for `u32`.
        Self::put(unsafe {
            sys::rdma_nl_put_driver_u64(self.msg, name.as_char_ptr().cast(), value)
        })
    }

    pub(crate) fn string(&mut self, name: &CStr, value: &CStr) -> Result {
        // SAFETY: as for `u32`; `value` is NUL-terminated too.
        Self::put(unsafe {
            sys::rdma_nl_put_driver_string(
                self.msg,
                name.as_char_ptr().cast(),
                value.as_char_ptr().cast(),
            )
        })
    }
}

/// What a QP is attached to, as C pointers the core keeps alive for the
/// QP's lifetime (it holds references on the CQs, SRQ and PD while the QP
/// exists and destroys QPs before their device).
///
/// # Invariants
///
/// `qp` is the `ib_qp` whose data holds the QP (set once it exists);
/// `send_cq`/`recv_cq` are `D` CQs (`recv_cq` may be null), `srq` null or a
/// `D` SRQ, `dev` the `D` device; all alive while the QP is not destroyed.
/// The QP only uses its links before `destroy_qp` returns (it detaches in
/// `destroy_qp`).
pub(crate) struct QpLinks<D: Driver> {
    qp: *mut sys::ib_qp,
    send_cq: *mut sys::ib_cq,
    recv_cq: *mut sys::ib_cq,
    srq: *mut sys::ib_srq,
    dev: *mut sys::ib_device,
    _driver: PhantomData<D>,
}

// SAFETY: the pointed-to objects may be used from any thread (their Rust
// parts are `Send + Sync`); the pointers do not change after creation.
unsafe impl<D: Driver> Send for QpLinks<D> {}
// SAFETY: as above.
unsafe impl<D: Driver> Sync for QpLinks<D> {}

impl<D: Driver> QpLinks<D> {
    pub(crate) fn has_srq(&self) -> bool {
        !self.srq.is_null()
    }

    pub(crate) fn srq(&self) -> Option<&D::Srq> {
        // SAFETY: by the invariant, a `D` SRQ alive while the QP is.
        (!self.srq.is_null()).then(|| unsafe { srq_data::<D>(self.srq) })
    }

    pub(crate) fn send_cq(&self) -> &D::Cq {
        // SAFETY: by the invariant, a `D` CQ alive while the QP is.
        unsafe { cq_data::<D>(self.send_cq) }
    }

    pub(crate) fn recv_cq(&self) -> Option<&D::Cq> {
        // SAFETY: as for `send_cq`.
        (!self.recv_cq.is_null()).then(|| unsafe { cq_data::<D>(self.recv_cq) })
    }

    pub(crate) fn device(&self) -> &D::Device {
        // SAFETY: the device outlives its QPs.
        unsafe { dev_data::<D>(self.dev) }
    }

    pub(crate) fn wc_qp(&self) -> WcQp {
        WcQp::from_raw(self.qp)
    }

    /// The `ib_qp` (null before it is set up).
    pub(in crate::ffi) fn raw_qp(&self) -> *mut sys::ib_qp {
        self.qp
    }

    /// A new reference to the QP (for socket callbacks, which only have
    /// `&Qp`); `None` before the `ib_qp` is set up.
    pub(crate) fn qp_arc(&self) -> Option<Arc<D::Qp>> {
        // SAFETY: by the invariant the `ib_qp`'s data holds the QP while
        // the QP is in use.
        (!self.qp.is_null()).then(|| unsafe { QpObj::<D>::data(self.qp) }.qp.clone())
    }
}

/// Raises the QP's asynchronous events (`ib_qp.event_handler`).
///
/// # Invariants
///
/// Points to the live `ib_qp` of the QP holding it (see [`QpLinks`]).
pub(crate) struct QpNotifier(*mut sys::ib_qp);

// SAFETY: the handler fields are set by the core before `create_qp`.
unsafe impl Send for QpNotifier {}
// SAFETY: as above.
unsafe impl Sync for QpNotifier {}

impl QpNotifier {
    /// `IB_EVENT_QP_FATAL`: the stream failed (Terminate, reset).
    pub(crate) fn fatal(&self) {
        // SAFETY: by the invariant the QP is alive; callers hold no lock.
        unsafe { raise(Element::Qp(self.0), sys::ib_event_type_IB_EVENT_QP_FATAL) };
    }

    /// `IB_EVENT_QP_LAST_WQE_REACHED`: a QP on an SRQ is in Error and will
    /// take no more WRs from it (what it took is flushed). `ib_drain_qp`
    /// of such a QP waits for it.
    pub(crate) fn last_wqe_reached(&self) {
        // SAFETY: by the invariant the QP is alive; callers hold no lock.
        unsafe {
            raise(
                Element::Qp(self.0),
                sys::ib_event_type_IB_EVENT_QP_LAST_WQE_REACHED,
            )
        };
    }
}

/// The driver data of an `ib_qp`.
struct QpData<D: Driver> {
    qp: Arc<D::Qp>,
    /// References the iw_cm holds (`iw_add_ref`/`iw_rem_ref`).
    cm_refs: AtomicU32,
}

type QpObj<D> = CoreObj<sys::ib_qp, QpData<D>>;

#[cfg(rsiw_kunit)]
/// The QP of an `ib_qp`.
///
/// # Safety
///
/// `ibqp` must be a live QP of a `D` device.
pub(in crate::ffi) unsafe fn qp_of<D: Driver>(ibqp: *mut sys::ib_qp) -> Arc<D::Qp> {
    // SAFETY: per the contract.
    unsafe { QpObj::<D>::data(ibqp) }.qp.clone()
}

pub(super) fn install_ops<D: Driver>(ops: &mut sys::ib_device_ops) {
    ops.create_qp = Some(create_qp::<D>);
    ops.destroy_qp = Some(destroy_qp::<D>);
    ops.modify_qp = Some(modify_qp::<D>);
    ops.query_qp = Some(query_qp::<D>);
    ops.post_send = Some(post_send::<D>);
    ops.post_recv = Some(post_recv::<D>);
    ops.iw_add_ref = Some(iw_add_ref::<D>);
    ops.iw_rem_ref = Some(iw_rem_ref::<D>);
    ops.iw_get_qp = Some(iw_get_qp::<D>);
    ops.fill_res_qp_entry = Some(fill_res_qp_entry::<D>);
    ops.size_ib_qp = QpObj::<D>::SIZE;
}

/// # Safety
///
/// Only the RDMA core calls this, as the `create_qp` callback of the
/// `ib_device_ops` this file fills in, with the pointers it passes valid for the
/// call and, for an object, one of `D`'s it created through this file.
unsafe extern "C" fn create_qp<D: Driver>(
    ibqp: *mut sys::ib_qp,
    attr: *mut sys::ib_qp_init_attr,
    udata: *mut sys::ib_udata,
) -> c_int {
    from_result(|| {
        // SAFETY: the core passes a QP whose device, PD and attributes are
        // valid for the call; the CQs and SRQ named are the consumer's,
        // of this device.
        let (dev, pd, attr) = unsafe {
            (
                dev_data::<D>((*ibqp).device),
                pd_data::<D>((*ibqp).pd),
                &mut *attr,
            )
        };
        let c = &attr.cap;
        let mut init = QpInitAttr {
            rc: attr.qp_type == sys::ib_qp_type_IB_QPT_RC,
            has_send_cq: !attr.send_cq.is_null(),
            has_recv_cq: !attr.recv_cq.is_null(),
            has_srq: !attr.srq.is_null(),
            sig_all: attr.sq_sig_type == sys::ib_sig_type_IB_SIGNAL_ALL_WR,
            cap: QpCaps {
                max_send_wr: c.max_send_wr,
                max_recv_wr: c.max_recv_wr,
                max_send_sge: c.max_send_sge,
                max_recv_sge: c.max_recv_sge,
                max_inline_data: c.max_inline_data,
            },
        };
        // INVARIANT: the pointers are the core's, of this QP; `qp`'s data
        // is set below, before the QP can be reached through the `ib_qp`.
        let links = QpLinks {
            qp: ibqp,
            send_cq: attr.send_cq,
            recv_cq: attr.recv_cq,
            srq: attr.srq,
            // SAFETY: as above.
            dev: unsafe { (*ibqp).device },
            _driver: PhantomData,
        };
        // SAFETY: the command's udata (null from a kernel consumer).
        let mut udata = unsafe { Udata::new(udata, ptr::null_mut()) };
        let (qp, qpn) = D::Qp::create(dev, pd, &mut init, links, QpNotifier(ibqp), udata.as_mut())?;
        // SAFETY: the core allocated `ibqp` with `size_ib_qp` = `QpObj::SIZE`.
        unsafe {
            QpObj::<D>::init(
                ibqp,
                QpData {
                    qp,
                    cm_refs: AtomicU32::new(0),
                },
            );
            (*ibqp).qp_num = qpn;
        }
        // Report what was granted (no hidden rounding).
        attr.cap.max_send_wr = init.cap.max_send_wr;
        attr.cap.max_recv_wr = init.cap.max_recv_wr;
        attr.cap.max_send_sge = init.cap.max_send_sge;
        attr.cap.max_recv_sge = init.cap.max_recv_sge;
        attr.cap.max_inline_data = init.cap.max_inline_data;
        Ok(0)
    })
}

/// # Safety
///
/// Only the RDMA core calls this, as the `destroy_qp` callback of the
/// `ib_device_ops` this file fills in, with the pointers it passes valid for the
/// call and, for an object, one of `D`'s it created through this file.
unsafe extern "C" fn destroy_qp<D: Driver>(
    ibqp: *mut sys::ib_qp,
    _udata: *mut sys::ib_udata,
) -> c_int {
    // SAFETY: one of `D`'s QPs; the core calls this once, in process context.
    let (dev, data, qpn) = unsafe {
        (
            dev_data::<D>((*ibqp).device),
            QpObj::<D>::data(ibqp),
            (*ibqp).qp_num,
        )
    };
    let qp = data.qp.clone();
    D::Qp::detach(&qp);
    // The iw_cm drops its references when it handles the CLOSE the detach
    // above delivered (on its own workqueue). The core frees the QP when
    // this returns, so wait for them however long it takes (as siw does):
    // an `iw_rem_ref` after that would touch freed memory.
    let mut waited_ms = 0u32;
    while data.cm_refs.load(Ordering::Acquire) != 0 {
        kernel::time::delay::fsleep(kernel::time::Delta::from_millis(1));
        waited_ms = waited_ms.wrapping_add(1);
        if waited_ms % 10_000 == 0 {
            pr_warn!(
                "destroy_qp: still waiting for the iw_cm to release qp {}\n",
                qpn
            );
        }
    }
    D::Qp::destroyed(&qp, dev);
    // SAFETY: as above; nothing uses the data after this.
    unsafe { QpObj::<D>::drop_data(ibqp) };
    drop(qp);
    0
}

/// # Safety
///
/// Only the RDMA core calls this, as the `modify_qp` callback of the
/// `ib_device_ops` this file fills in, with the pointers it passes valid for the
/// call and, for an object, one of `D`'s it created through this file.
unsafe extern "C" fn modify_qp<D: Driver>(
    ibqp: *mut sys::ib_qp,
    attr: *mut sys::ib_qp_attr,
    mask: c_int,
    _udata: *mut sys::ib_udata,
) -> c_int {
    from_result(|| {
        // From userspace (`udata`) or the kernel: the same rules.
        // SAFETY: one of `D`'s QPs; `attr` valid for the call.
        let (data, attr) = unsafe { (QpObj::<D>::data(ibqp), &*attr) };
        let mask = mask as u32;
        let m = QpAttrMod {
            state: if mask & sys::ib_qp_attr_mask_IB_QP_STATE != 0 {
                Some(QpState::from_raw(attr.qp_state)?)
            } else {
                None
            },
            max_rd_atomic: (mask & sys::ib_qp_attr_mask_IB_QP_MAX_QP_RD_ATOMIC != 0)
                .then_some(attr.max_rd_atomic),
            max_dest_rd_atomic: (mask & sys::ib_qp_attr_mask_IB_QP_MAX_DEST_RD_ATOMIC != 0)
                .then_some(attr.max_dest_rd_atomic),
            access_flags: (mask & sys::ib_qp_attr_mask_IB_QP_ACCESS_FLAGS != 0)
                .then_some(attr.qp_access_flags as u32),
        };
        D::Qp::modify(&data.qp, &m)?;
        Ok(0)
    })
}

/// # Safety
///
/// Only the RDMA core calls this, as the `query_qp` callback of the
/// `ib_device_ops` this file fills in, with the pointers it passes valid for the
/// call and, for an object, one of `D`'s it created through this file.
unsafe extern "C" fn query_qp<D: Driver>(
    ibqp: *mut sys::ib_qp,
    attr: *mut sys::ib_qp_attr,
    _mask: c_int,
    init: *mut sys::ib_qp_init_attr,
) -> c_int {
    // SAFETY: one of `D`'s QPs.
    let q = unsafe { QpObj::<D>::data(ibqp) }.qp.query();
    // SAFETY: `attr`/`init` valid for writes for the call; `ibqp` live.
    unsafe {
        ptr::write_bytes(attr, 0, 1);
        ptr::write_bytes(init, 0, 1);
        let a = &mut *attr;
        a.qp_state = q.state.to_raw();
        a.cur_qp_state = a.qp_state;
        a.max_rd_atomic = q.max_rd_atomic;
        a.max_dest_rd_atomic = q.max_dest_rd_atomic;
        a.cap.max_send_wr = q.cap.max_send_wr;
        a.cap.max_recv_wr = q.cap.max_recv_wr;
        a.cap.max_send_sge = q.cap.max_send_sge;
        a.cap.max_recv_sge = q.cap.max_recv_sge;
        a.cap.max_inline_data = q.cap.max_inline_data;
        let i = &mut *init;
        i.cap = a.cap;
        i.qp_type = sys::ib_qp_type_IB_QPT_RC;
        i.send_cq = (*ibqp).send_cq;
        i.recv_cq = (*ibqp).recv_cq;
        i.srq = (*ibqp).srq;
    }
    0
}

/// # Safety
///
/// Only the RDMA core calls this, as the `post_send` callback of the
/// `ib_device_ops` this file fills in, with the pointers it passes valid for the
/// call and, for an object, one of `D`'s it created through this file.
unsafe extern "C" fn post_send<D: Driver>(
    ibqp: *mut sys::ib_qp,
    wr: *const sys::ib_send_wr,
    bad_wr: *mut *const sys::ib_send_wr,
) -> c_int {
    // SAFETY: one of `D`'s QPs; `uobject` is set by uverbs for user QPs.
    let (qp, user) = unsafe { (&QpObj::<D>::data(ibqp).qp, !(*ibqp).uobject.is_null()) };
    if wr.is_null() {
        // uverbs with no WR: a process rings the doorbell of its ring.
        return D::Qp::doorbell_send(qp).map_or_else(|e| e.to_errno(), |()| 0);
    }
    // SAFETY: the core's chain (uverbs for a user QP: inline SGEs name the
    // caller's memory) and bad_wr pointer.
    unsafe { post_send_chain::<D>(wr, bad_wr, user, |wr| D::Qp::post_send(qp, wr)) }
}

/// # Safety
///
/// Only the RDMA core calls this, as the `post_recv` callback of the
/// `ib_device_ops` this file fills in, with the pointers it passes valid for the
/// call and, for an object, one of `D`'s it created through this file.
unsafe extern "C" fn post_recv<D: Driver>(
    ibqp: *mut sys::ib_qp,
    wr: *const sys::ib_recv_wr,
    bad_wr: *mut *const sys::ib_recv_wr,
) -> c_int {
    // SAFETY: one of `D`'s QPs.
    let qp = unsafe { &QpObj::<D>::data(ibqp).qp };
    if wr.is_null() {
        // uverbs with no WR: a process rings the doorbell of its ring.
        return D::Qp::doorbell_recv(qp).map_or_else(|e| e.to_errno(), |()| 0);
    }
    // SAFETY: the chain and `bad_wr` as the core passes them.
    unsafe { post_recv_chain(wr, bad_wr, |wr| D::Qp::post_recv(qp, wr)) }
}

/// # Safety
///
/// Only the RDMA core calls this, as the `add_ref` callback of the
/// `ib_device_ops` this file fills in, with the pointers it passes valid for the
/// call and, for an object, one of `D`'s it created through this file.
unsafe extern "C" fn iw_add_ref<D: Driver>(ibqp: *mut sys::ib_qp) {
    // SAFETY: the iw_cm passes a live QP of ours.
    unsafe { QpObj::<D>::data(ibqp) }
        .cm_refs
        .fetch_add(1, Ordering::AcqRel);
}

/// # Safety
///
/// Only the RDMA core calls this, as the `rem_ref` callback of the
/// `ib_device_ops` this file fills in, with the pointers it passes valid for the
/// call and, for an object, one of `D`'s it created through this file.
unsafe extern "C" fn iw_rem_ref<D: Driver>(ibqp: *mut sys::ib_qp) {
    // SAFETY: as above; `destroy_qp` waits for these references.
    let refs = unsafe { &QpObj::<D>::data(ibqp).cm_refs };
    let _ = refs.fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| n.checked_sub(1));
}

/// # Safety
///
/// Only the RDMA core calls this, as the `get_qp` callback of the
/// `ib_device_ops` this file fills in, with the pointers it passes valid for the
/// call and, for an object, one of `D`'s it created through this file.
unsafe extern "C" fn iw_get_qp<D: Driver>(
    ibdev: *mut sys::ib_device,
    qpn: c_int,
) -> *mut sys::ib_qp {
    // SAFETY: one of `D`'s devices.
    let dev = unsafe { dev_data::<D>(ibdev) };
    u32::try_from(qpn)
        .ok()
        .and_then(|n| D::qp_by_num(dev, n))
        .map_or(ptr::null_mut(), |qp| qp.links().qp)
}

/// # Safety
///
/// Only the RDMA core calls this, as the `fill_res_qp_entry` callback of the
/// `ib_device_ops` this file fills in, with the pointers it passes valid for the
/// call and, for an object, one of `D`'s it created through this file.
unsafe extern "C" fn fill_res_qp_entry<D: Driver>(
    msg: *mut sys::sk_buff,
    ibqp: *mut sys::ib_qp,
) -> c_int {
    // SAFETY: nldev passes a QP of ours it holds a restrack reference on
    // (destroy waits for it), and the message it is building.
    let qp = unsafe { &QpObj::<D>::data(ibqp).qp };
    // SAFETY: as above.
    let nest = unsafe { sys::rsiw_nl_driver_nest_start(msg) };
    if nest.is_null() {
        return EMSGSIZE.to_errno();
    }
    let mut out = ResAttrs {
        msg,
        _msg: PhantomData,
    };
    match qp.res_attrs(&mut out) {
        Ok(()) => {
            // SAFETY: `nest` was opened in `msg` above.
            unsafe { sys::rsiw_nl_nest_end(msg, nest) };
            0
        }
        Err(e) => {
            // SAFETY: as above; drops what the driver put after it.
            unsafe { sys::rsiw_nl_nest_cancel(msg, nest) };
            e.to_errno()
        }
    }
}
