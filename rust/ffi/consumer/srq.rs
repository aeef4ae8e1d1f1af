// SPDX-License-Identifier: GPL-2.0
//! Kernel consumers' SRQ verbs for the self-tests.

use core::sync::atomic::{AtomicU32, Ordering};

use core::ptr;

use kernel::{ffi::c_int, prelude::*};

use crate::ffi::consumer::mr::KPd;
use crate::ffi::{
    ib::{srq::srq_data, Driver},
    sys,
};

pub(crate) const SRQ_LIMIT: u32 = sys::ib_srq_attr_mask_IB_SRQ_LIMIT;
pub(crate) const SRQ_MAX_WR: u32 = sys::ib_srq_attr_mask_IB_SRQ_MAX_WR;

/// # Safety
///
/// Only the RDMA core calls this, as the handler this file registers,
/// with the context pointer given at registration and its other
/// pointers valid for the call.
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
        init.attr = sys::ib_srq_attr {
            max_wr,
            max_sge,
            srq_limit: limit,
        };
        // SAFETY: PD alive; the context outlives the SRQ.
        let srq = unsafe {
            sys::ib_create_srq_user(pd.raw(), &mut init, ptr::null_mut(), ptr::null_mut())
        };
        if srq.is_null() {
            return Err(ENOMEM);
        }
        if (srq as usize) > usize::MAX - 4095 {
            return Err(Error::from_errno(srq as isize as c_int));
        }
        Ok(Self { srq, limit_events })
    }

    pub(crate) fn raw(&self) -> *mut sys::ib_srq {
        self.srq
    }

    /// `ib_post_srq_recv` of one WR over `seg`.
    pub(crate) fn post_seg(&self, wr_id: u64, seg: super::qp::Seg) -> Result {
        let mut sge = sys::ib_sge {
            addr: seg.addr,
            length: seg.len,
            lkey: seg.lkey,
        };
        let mut wr = sys::ib_recv_wr::default();
        wr.__bindgen_anon_1.wr_id = wr_id;
        wr.sg_list = &mut sge;
        wr.num_sge = 1;
        let mut bad: *const sys::ib_recv_wr = ptr::null();
        // SAFETY: SRQ alive; the WR and SGE live for the call (copied).
        kernel::error::to_result(unsafe { sys::rsiw_ib_post_srq_recv(self.srq, &wr, &mut bad) })
    }

    /// The driver's SRQ behind it (a `D` device's SRQ).
    pub(crate) fn srq<D: Driver>(&self) -> &D::Srq {
        // SAFETY: alive until drop, made on a `D` device.
        unsafe { srq_data::<D>(self.srq) }
    }

    pub(crate) fn limit_events(&self) -> u32 {
        self.limit_events.load(Ordering::Relaxed)
    }

    /// `ib_post_srq_recv` of a chain of WRs with ids `ids`, each with
    /// `nsge` SGEs; returns the result and the index of `bad_wr`.
    pub(crate) fn post(&self, ids: &[u64], nsge: usize) -> (i32, Option<usize>) {
        let mut sges = [sys::ib_sge {
            addr: 0x1000,
            length: 64,
            lkey: 0x100,
        }; 8];
        let mut wrs: [sys::ib_recv_wr; 8] = Default::default();
        let n = ids.len().min(8);
        let base = wrs.as_mut_ptr();
        for (i, &id) in ids.iter().enumerate().take(n) {
            // SAFETY: `i < n <= 8`, in bounds of both arrays.
            unsafe {
                let w = &mut *base.add(i);
                w.__bindgen_anon_1.wr_id = id;
                w.sg_list = sges.as_mut_ptr();
                w.num_sge = nsge as c_int;
                w.next = if i + 1 < n {
                    base.add(i + 1)
                } else {
                    ptr::null_mut()
                };
            }
        }
        let mut bad: *const sys::ib_recv_wr = ptr::null();
        // SAFETY: SRQ alive; the chain lives for the call.
        let ret = unsafe { sys::rsiw_ib_post_srq_recv(self.srq, base, &mut bad) };
        let idx =
            (!bad.is_null()).then(|| (bad as usize - base as usize) / size_of::<sys::ib_recv_wr>());
        (ret, idx)
    }

    /// `ib_modify_srq`.
    pub(crate) fn modify(&self, mask: u32, max_wr: u32, limit: u32) -> i32 {
        let mut attr = sys::ib_srq_attr {
            max_wr,
            max_sge: 0,
            srq_limit: limit,
        };
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
