// SPDX-License-Identifier: GPL-2.0
//! Shared receive queues: [`SrqOps`], the SRQ limit event
//! ([`SrqNotifier`]) and the generic SRQ entry points.

use core::ptr;

use kernel::{error::from_result, ffi::c_int, prelude::*};

use super::super::{
    object::{CoreObj, Slot},
    sys,
};
use super::{
    device::{dev_data, pd_data, Driver},
    event::{raise, Element},
    umap::Udata,
    wr::{post_recv_chain, RecvWrRef},
};

/// Raises the SRQ's events.
///
/// # Invariants
///
/// Points to the `ib_srq` whose driver data holds this notifier.
pub(crate) struct SrqNotifier(*mut sys::ib_srq);

// SAFETY: the `ib_srq` may be used from any thread; the handler fields are
// set by the core before `create_srq` and not changed after.
unsafe impl Send for SrqNotifier {}
// SAFETY: as above.
unsafe impl Sync for SrqNotifier {}

impl SrqNotifier {
    /// `IB_EVENT_SRQ_LIMIT_REACHED`.
    pub(crate) fn limit_reached(&self) {
        // SAFETY: by the invariant the SRQ is alive. Callers have dropped
        // the SRQ's queue lock, but may hold the claiming QP's stream lock
        // (a receive taken by the engine): `raise` allows that.
        unsafe {
            raise(
                Element::Srq(self.0),
                sys::ib_event_type_IB_EVENT_SRQ_LIMIT_REACHED,
            )
        };
    }
}

/// An SRQ's attributes (`struct ib_srq_attr`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct SrqAttr {
    pub(crate) max_wr: u32,
    pub(crate) max_sge: u32,
    pub(crate) srq_limit: u32,
}

/// Which attributes a `modify_srq` changes (`enum ib_srq_attr_mask`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct SrqAttrMask {
    /// `IB_SRQ_MAX_WR`: resize.
    pub(crate) max_wr: bool,
    /// `IB_SRQ_LIMIT`: arm the limit event.
    pub(crate) limit: bool,
    /// Bits no verb defines.
    pub(crate) unknown: bool,
}

/// A driver's shared receive queue.
#[vtable]
pub(crate) trait SrqOps<D: Driver>: Send + Sync + Sized {
    /// `create_srq` of a basic SRQ in `pd`: fills `slot`.
    /// `udata`: a process's SRQ (its request and the response).
    fn create(
        dev: &D::Device,
        pd: &D::Pd,
        attr: &SrqAttr,
        notifier: SrqNotifier,
        slot: SrqSlot<'_, D>,
        udata: Option<&mut Udata<'_>>,
    ) -> Result;
    /// `post_srq_recv` with no WR: a process's doorbell (its SRQ ring).
    fn doorbell(&self) -> Result {
        Err(EINVAL)
    }
    /// `destroy_srq`, before the SRQ's Rust part is dropped (no QP uses it).
    fn destroy(&self, dev: &D::Device);
    /// `modify_srq`.
    fn modify(&self, attr: &SrqAttr, mask: SrqAttrMask) -> Result;
    /// `query_srq`.
    fn query(&self) -> SrqAttr;
    /// `post_srq_recv`, one WR of the chain.
    fn post_recv(&self, wr: &RecvWrRef<'_>) -> Result;
}

/// The slot a [`SrqOps::create`] fills.
pub(crate) type SrqSlot<'a, D> = Slot<'a, sys::ib_srq, <D as Driver>::Srq>;
type SrqObj<D> = CoreObj<sys::ib_srq, <D as Driver>::Srq>;

/// The driver's part of an SRQ the core names.
///
/// # Safety
///
/// `srq` must be a live SRQ of a `D` device made by `create_srq`, alive
/// for `'a`.
pub(in crate::ffi) unsafe fn srq_data<'a, D: Driver>(srq: *mut sys::ib_srq) -> &'a D::Srq {
    // SAFETY: per the contract the data is initialised.
    unsafe { SrqObj::<D>::data(srq) }
}

pub(super) fn install_ops<D: Driver>(ops: &mut sys::ib_device_ops) {
    ops.create_srq = Some(create_srq::<D>);
    ops.modify_srq = Some(modify_srq::<D>);
    ops.query_srq = Some(query_srq::<D>);
    ops.destroy_srq = Some(destroy_srq::<D>);
    ops.post_srq_recv = Some(post_srq_recv::<D>);
    ops.size_ib_srq = SrqObj::<D>::SIZE;
}

/// # Safety
///
/// Only the RDMA core calls this, as the `create_srq` callback of the
/// `ib_device_ops` this file fills in, with the pointers it passes valid for the
/// call and, for an object, one of `D`'s it created through this file.
unsafe extern "C" fn create_srq<D: Driver>(
    ibsrq: *mut sys::ib_srq,
    init: *mut sys::ib_srq_init_attr,
    udata: *mut sys::ib_udata,
) -> c_int {
    from_result(|| {
        // SAFETY: the core set `device` and `pd` (`D`'s, live) and passes a
        // valid `init`.
        let (dev, init, pd) = unsafe {
            (
                dev_data::<D>((*ibsrq).device),
                &*init,
                pd_data::<D>((*ibsrq).pd),
            )
        };
        // XRC and tag-matching SRQs are not supported.
        if init.srq_type != sys::ib_srq_type_IB_SRQT_BASIC {
            return Err(EOPNOTSUPP);
        }
        let a = init.attr;
        let attr = SrqAttr {
            max_wr: a.max_wr,
            max_sge: a.max_sge,
            srq_limit: a.srq_limit,
        };
        let mut filled = false;
        // SAFETY: the core allocated `ibsrq` with `size_ib_srq` = `SrqObj::SIZE`.
        let slot = unsafe { SrqSlot::<D>::new(ibsrq, &mut filled) };
        // INVARIANT: the notifier points to the SRQ whose data holds it.
        // SAFETY: the command's udata (null from a kernel consumer).
        let mut udata = unsafe { Udata::new(udata, ptr::null_mut()) };
        D::Srq::create(dev, pd, &attr, SrqNotifier(ibsrq), slot, udata.as_mut())?;
        if !filled {
            return Err(EINVAL);
        }
        Ok(0)
    })
}

/// # Safety
///
/// Only the RDMA core calls this, as the `modify_srq` callback of the
/// `ib_device_ops` this file fills in, with the pointers it passes valid for the
/// call and, for an object, one of `D`'s it created through this file.
unsafe extern "C" fn modify_srq<D: Driver>(
    ibsrq: *mut sys::ib_srq,
    attr: *mut sys::ib_srq_attr,
    mask: sys::ib_srq_attr_mask,
    _udata: *mut sys::ib_udata,
) -> c_int {
    // SAFETY: one of `D`'s live SRQs; `attr` valid for the call.
    let (srq, a) = unsafe { (srq_data::<D>(ibsrq), &*attr) };
    let known = sys::ib_srq_attr_mask_IB_SRQ_MAX_WR | sys::ib_srq_attr_mask_IB_SRQ_LIMIT;
    let mask = SrqAttrMask {
        max_wr: mask & sys::ib_srq_attr_mask_IB_SRQ_MAX_WR != 0,
        limit: mask & sys::ib_srq_attr_mask_IB_SRQ_LIMIT != 0,
        unknown: mask & !known != 0,
    };
    let attr = SrqAttr {
        max_wr: a.max_wr,
        max_sge: a.max_sge,
        srq_limit: a.srq_limit,
    };
    match srq.modify(&attr, mask) {
        Ok(()) => 0,
        Err(e) => e.to_errno(),
    }
}

/// # Safety
///
/// Only the RDMA core calls this, as the `query_srq` callback of the
/// `ib_device_ops` this file fills in, with the pointers it passes valid for the
/// call and, for an object, one of `D`'s it created through this file.
unsafe extern "C" fn query_srq<D: Driver>(
    ibsrq: *mut sys::ib_srq,
    attr: *mut sys::ib_srq_attr,
) -> c_int {
    // SAFETY: one of `D`'s live SRQs; `attr` valid for writes for the call.
    let (srq, attr) = unsafe { (srq_data::<D>(ibsrq), &mut *attr) };
    let q = srq.query();
    attr.max_wr = q.max_wr;
    attr.max_sge = q.max_sge;
    attr.srq_limit = q.srq_limit;
    0
}

/// # Safety
///
/// Only the RDMA core calls this, as the `destroy_srq` callback of the
/// `ib_device_ops` this file fills in, with the pointers it passes valid for the
/// call and, for an object, one of `D`'s it created through this file.
unsafe extern "C" fn destroy_srq<D: Driver>(
    ibsrq: *mut sys::ib_srq,
    _udata: *mut sys::ib_udata,
) -> c_int {
    // SAFETY: initialised by `create_srq`; the core calls this once, with
    // no QP left on the SRQ, before freeing it.
    let (dev, srq) = unsafe { (dev_data::<D>((*ibsrq).device), srq_data::<D>(ibsrq)) };
    srq.destroy(dev);
    // SAFETY: as above; nothing uses the data after this.
    unsafe { SrqObj::<D>::drop_data(ibsrq) };
    0
}

/// # Safety
///
/// Only the RDMA core calls this, as the `post_srq_recv` callback of the
/// `ib_device_ops` this file fills in, with the pointers it passes valid for the
/// call and, for an object, one of `D`'s it created through this file.
unsafe extern "C" fn post_srq_recv<D: Driver>(
    ibsrq: *mut sys::ib_srq,
    wr: *const sys::ib_recv_wr,
    bad_wr: *mut *const sys::ib_recv_wr,
) -> c_int {
    // SAFETY: one of `D`'s live SRQs.
    let srq = unsafe { srq_data::<D>(ibsrq) };
    if wr.is_null() {
        // uverbs with no WR: a process rings the doorbell of its ring.
        return match srq.doorbell() {
            Ok(()) => 0,
            Err(e) => e.to_errno(),
        };
    }
    // SAFETY: the core's chain and bad_wr pointer.
    unsafe { post_recv_chain(wr, bad_wr, |wr| srq.post_recv(wr)) }
}
