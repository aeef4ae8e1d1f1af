// SPDX-License-Identifier: GPL-2.0
//! Shared receive queues at the C boundary: the SRQ entry points, the
//! `ib_recv_wr` chain walk (shared with the QP's `post_recv`) and the SRQ
//! limit event.

use core::ptr;

use kernel::{error::from_result, ffi::c_int, prelude::*};

use super::{device::IbDevice, object::CoreObj, sys};
use crate::srq::{Rqe, Sge, Srq, MAX_SGE};

type SrqObj = CoreObj<sys::ib_srq, Srq>;
type PdObj = CoreObj<sys::ib_pd, crate::verbs::Pd>;

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
    /// `IB_EVENT_SRQ_LIMIT_REACHED` through `srq->event_handler`, if set.
    pub(crate) fn limit_reached(&self) {
        let srq = self.0;
        // SAFETY: by the invariant `srq` is alive.
        let (handler, ctx, device) = unsafe { ((*srq).event_handler, (*srq).srq_context, (*srq).device) };
        if let Some(handler) = handler {
            let mut ev = sys::ib_event::default();
            ev.device = device;
            ev.element.srq = srq;
            ev.event = sys::ib_event_type_IB_EVENT_SRQ_LIMIT_REACHED;
            // SAFETY: the consumer's handler with a valid event for the call.
            unsafe { handler(&mut ev, ctx) };
        }
    }
}

/// An SRQ of ours, borrowed (what the QP gets from `init_attr->srq`; the
/// core keeps it alive while QPs use it).
#[repr(transparent)]
pub(crate) struct IbSrq(kernel::types::Opaque<sys::ib_srq>);

impl IbSrq {
    /// # Safety
    ///
    /// `srq` must be an SRQ created by rsiw's [`create_srq`], alive for `'a`.
    pub(crate) unsafe fn from_raw<'a>(srq: *mut sys::ib_srq) -> &'a Self {
        // SAFETY: transparent wrapper; validity per the contract.
        unsafe { &*srq.cast::<Self>() }
    }

    pub(crate) fn srq(&self) -> &Srq {
        // SAFETY: by the contract of `from_raw` the data is initialised.
        unsafe { SrqObj::data(self.0.get()) }
    }
}

/// Walks a consumer's `ib_recv_wr` chain, converting each WR to an [`Rqe`]
/// and handing it to `post`. On the first failure (too many SGEs:
/// `EINVAL`; `post`'s error, `ENOMEM` when full) sets `*bad_wr` to that WR
/// and returns the error; `*bad_wr` is untouched on success.
///
/// # Safety
///
/// `wr` must be a valid chain as the core passes it to `post_recv` /
/// `post_srq_recv`; `bad_wr` valid for writes (or null).
pub(crate) unsafe fn post_recv_chain(
    mut wr: *const sys::ib_recv_wr,
    bad_wr: *mut *const sys::ib_recv_wr,
    mut post: impl FnMut(Rqe) -> Result,
) -> c_int {
    while !wr.is_null() {
        // SAFETY: per the contract `wr` is a valid WR.
        let w = unsafe { &*wr };
        let res = usize::try_from(w.num_sge)
            .ok()
            .filter(|&n| n <= MAX_SGE && (n == 0 || !w.sg_list.is_null()))
            .ok_or(EINVAL)
            .and_then(|n| {
                let mut sges = [Sge::default(); MAX_SGE];
                for (i, s) in sges.iter_mut().take(n).enumerate() {
                    // SAFETY: `sg_list` has `num_sge` entries.
                    let g = unsafe { &*w.sg_list.add(i) };
                    *s = Sge { addr: g.addr, len: g.length, lkey: g.lkey };
                }
                // SAFETY: `wr_id` is the union member kernel WRs set (or
                // `wr_cqe`, same bits).
                let wr_id = unsafe { w.__bindgen_anon_1.wr_id };
                Rqe::new(wr_id, &sges[..n])
            })
            .and_then(&mut post);
        if let Err(e) = res {
            if !bad_wr.is_null() {
                // SAFETY: per the contract.
                unsafe { *bad_wr = wr };
            }
            return e.to_errno();
        }
        wr = w.next;
    }
    0
}

pub(super) unsafe extern "C" fn create_srq(
    ibsrq: *mut sys::ib_srq,
    init: *mut sys::ib_srq_init_attr,
    _udata: *mut sys::ib_udata,
) -> c_int {
    from_result(|| {
        // SAFETY: the core set `device` and `pd` (ours, live) and passes a
        // valid `init`.
        let (dev, init, pd) = unsafe { (IbDevice::from_raw((*ibsrq).device), &mut *init, (*ibsrq).pd) };
        // A user SRQ is posted to through uverbs (`POST_SRQ_RECV`).
        if init.srq_type != sys::ib_srq_type_IB_SRQT_BASIC {
            return Err(EOPNOTSUPP);
        }
        let l = dev.data().limits();
        let a = init.attr;
        if a.max_wr == 0 || a.max_wr > l.max_srq_wr || a.max_sge > l.max_sge || a.srq_limit > a.max_wr {
            return Err(EINVAL);
        }
        // SAFETY: `pd` is one of our initialised PDs.
        let pd_id = unsafe { PdObj::data(pd).id() };
        dev.data().alloc_srq()?;
        let res = Srq::new(pd_id, a.max_wr, a.max_sge, a.srq_limit, SrqNotifier(ibsrq)).and_then(|i| {
            // SAFETY: the core allocated `ibsrq` with `size_ib_srq` =
            // `SrqObj::SIZE`; the notifier points to it (its invariant).
            unsafe { SrqObj::pin_init(ibsrq, i) }
        });
        if let Err(e) = res {
            dev.data().dealloc_srq();
            return Err(e);
        }
        Ok(0)
    })
}

pub(super) unsafe extern "C" fn modify_srq(
    ibsrq: *mut sys::ib_srq,
    attr: *mut sys::ib_srq_attr,
    mask: sys::ib_srq_attr_mask,
    _udata: *mut sys::ib_udata,
) -> c_int {
    // SAFETY: one of our live SRQs; `attr` valid for the call.
    let (srq, attr) = unsafe { (IbSrq::from_raw(ibsrq).srq(), &*attr) };
    if mask & sys::ib_srq_attr_mask_IB_SRQ_MAX_WR != 0 {
        return EOPNOTSUPP.to_errno();
    }
    if mask & !sys::ib_srq_attr_mask_IB_SRQ_LIMIT != 0 {
        return EINVAL.to_errno();
    }
    if mask & sys::ib_srq_attr_mask_IB_SRQ_LIMIT != 0 {
        if let Err(e) = srq.set_limit(attr.srq_limit) {
            return e.to_errno();
        }
    }
    0
}

pub(super) unsafe extern "C" fn query_srq(ibsrq: *mut sys::ib_srq, attr: *mut sys::ib_srq_attr) -> c_int {
    // SAFETY: one of our live SRQs; `attr` valid for writes for the call.
    let (srq, attr) = unsafe { (IbSrq::from_raw(ibsrq).srq(), &mut *attr) };
    let q = srq.query();
    attr.max_wr = q.max_wr;
    attr.max_sge = q.max_sge;
    attr.srq_limit = q.limit;
    0
}

pub(super) unsafe extern "C" fn destroy_srq(ibsrq: *mut sys::ib_srq, _udata: *mut sys::ib_udata) -> c_int {
    // SAFETY: initialised by `create_srq`; the core calls this once, with
    // no QP left on the SRQ, before freeing it.
    let dev = unsafe { IbDevice::from_raw((*ibsrq).device) };
    // SAFETY: as above.
    unsafe { SrqObj::drop_data(ibsrq) };
    dev.data().dealloc_srq();
    0
}

pub(super) unsafe extern "C" fn post_srq_recv(
    ibsrq: *mut sys::ib_srq,
    wr: *const sys::ib_recv_wr,
    bad_wr: *mut *const sys::ib_recv_wr,
) -> c_int {
    // SAFETY: one of our live SRQs.
    let srq = unsafe { IbSrq::from_raw(ibsrq).srq() };
    // SAFETY: the core's chain and bad_wr pointer.
    unsafe { post_recv_chain(wr, bad_wr, |rqe| srq.post(rqe)) }
}

/// Kernel consumers' SRQ verbs for the self-tests.
#[cfg(CONFIG_KUNIT = "y")]
pub(crate) mod testing {
    use core::sync::atomic::{AtomicU32, Ordering};

    use super::*;
    use crate::ffi::mr::testing::KPd;

    pub(crate) const SRQ_LIMIT: u32 = sys::ib_srq_attr_mask_IB_SRQ_LIMIT;
    pub(crate) const SRQ_MAX_WR: u32 = sys::ib_srq_attr_mask_IB_SRQ_MAX_WR;

    unsafe extern "C" fn on_event(ev: *mut sys::ib_event, ctx: *mut c_void) {
        // SAFETY: `ctx` is the counter of the `KSrq`; `ev` valid for the call.
        let (n, ev) = unsafe { (&*ctx.cast::<AtomicU32>(), &*ev) };
        if ev.event == sys::ib_event_type_IB_EVENT_SRQ_LIMIT_REACHED {
            n.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// An SRQ from `ib_create_srq`, counting limit events.
    pub(crate) struct KSrq {
        srq: *mut sys::ib_srq,
        limit_events: Pin<KBox<AtomicU32>>,
    }

    impl KSrq {
        pub(crate) fn create(pd: &KPd, max_wr: u32, max_sge: u32, limit: u32) -> Result<Self> {
            let limit_events = KBox::pin(AtomicU32::new(0), GFP_KERNEL)?;
            let mut init = sys::ib_srq_init_attr {
                event_handler: Some(on_event),
                srq_context: ptr::from_ref::<AtomicU32>(&limit_events).cast_mut().cast(),
                srq_type: sys::ib_srq_type_IB_SRQT_BASIC,
                ..Default::default()
            };
            init.attr = sys::ib_srq_attr { max_wr, max_sge, srq_limit: limit };
            // SAFETY: PD alive; the context outlives the SRQ.
            let srq = unsafe { sys::ib_create_srq_user(pd.raw(), &mut init, ptr::null_mut(), ptr::null_mut()) };
            if srq.is_null() {
                return Err(ENOMEM);
            }
            if (srq as usize) > usize::MAX - 4095 {
                return Err(Error::from_errno(srq as isize as c_int));
            }
            Ok(Self { srq, limit_events })
        }

        pub(crate) fn srq(&self) -> &Srq {
            // SAFETY: alive until drop.
            unsafe { IbSrq::from_raw(self.srq).srq() }
        }

        pub(crate) fn limit_events(&self) -> u32 {
            self.limit_events.load(Ordering::Relaxed)
        }

        /// `ib_post_srq_recv` of a chain of WRs with ids `ids`, each with
        /// `nsge` SGEs; returns the result and the index of `bad_wr`.
        pub(crate) fn post(&self, ids: &[u64], nsge: usize) -> (i32, Option<usize>) {
            let mut sges = [sys::ib_sge { addr: 0x1000, length: 64, lkey: 0x100 }; 8];
            let mut wrs: [sys::ib_recv_wr; 8] = Default::default();
            let n = ids.len().min(8);
            let base = wrs.as_mut_ptr();
            for i in 0..n {
                // SAFETY: `i < n <= 8`, in bounds of both arrays.
                unsafe {
                    let w = &mut *base.add(i);
                    w.__bindgen_anon_1.wr_id = ids[i];
                    w.sg_list = sges.as_mut_ptr();
                    w.num_sge = nsge as c_int;
                    w.next = if i + 1 < n { base.add(i + 1) } else { ptr::null_mut() };
                }
            }
            let mut bad: *const sys::ib_recv_wr = ptr::null();
            // SAFETY: SRQ alive; the chain lives for the call.
            let ret = unsafe { sys::rsiw_ib_post_srq_recv(self.srq, base, &mut bad) };
            let idx = (!bad.is_null()).then(|| (bad as usize - base as usize) / size_of::<sys::ib_recv_wr>());
            (ret, idx)
        }

        /// `ib_modify_srq`.
        pub(crate) fn modify(&self, mask: u32, max_wr: u32, limit: u32) -> i32 {
            let mut attr = sys::ib_srq_attr { max_wr, max_sge: 0, srq_limit: limit };
            // SAFETY: SRQ alive; `attr` a valid local.
            unsafe { sys::ib_modify_srq(self.srq, &mut attr, mask) }
        }

        /// `ib_query_srq`: (max_wr, max_sge, srq_limit).
        pub(crate) fn query(&self) -> Result<(u32, u32, u32)> {
            let mut attr = sys::ib_srq_attr::default();
            // SAFETY: SRQ alive; `attr` a valid local.
            kernel::error::to_result(unsafe { sys::ib_query_srq(self.srq, &mut attr) })?;
            Ok((attr.max_wr, attr.max_sge, attr.srq_limit))
        }
    }

    impl Drop for KSrq {
        fn drop(&mut self) {
            // SAFETY: created by `create`, not used after.
            unsafe { sys::ib_destroy_srq_user(self.srq, ptr::null_mut()) };
        }
    }
}
