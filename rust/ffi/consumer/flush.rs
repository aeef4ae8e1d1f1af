// SPDX-License-Identifier: GPL-2.0
//! RDMA Commit as a kernel consumer posts it: `IB_WR_FLUSH` and
//! `IB_WR_REG_MR` through the ops table, and the device's flush
//! capabilities.

use core::ptr;

use kernel::{error::to_result, ffi::c_int, prelude::*};

use crate::ffi::{
    consumer::device::Found,
    consumer::{
        mr::KMr,
        qp::{post_send, KQp},
    },
    mem::pages::KernelMemory,
    sys,
};

pub(crate) use sys::{
    ib_wc_opcode_IB_WC_FLUSH as WC_FLUSH, ib_wc_opcode_IB_WC_REG_MR as WC_REG_MR,
    ib_wc_status_IB_WC_LOC_PROT_ERR as WC_LOC_PROT_ERR,
};

/// `IB_WR_FLUSH` of `len` octets at `rkey`/`addr` (rsiw's convention:
/// an `ib_rdma_wr`, the length in the SGE).
pub(crate) fn post_flush(
    qp: &KQp,
    wr_id: u64,
    rkey: u32,
    addr: u64,
    len: u32,
    inline: bool,
) -> Result {
    let mut sge = sys::ib_sge {
        addr: 0,
        length: len,
        lkey: 0,
    };
    let mut wr = sys::ib_rdma_wr::default();
    wr.wr.__bindgen_anon_1.wr_id = wr_id;
    wr.wr.sg_list = &mut sge;
    wr.wr.num_sge = 1;
    wr.wr.opcode = sys::ib_wr_opcode_IB_WR_FLUSH;
    wr.wr.send_flags = sys::ib_send_flags_IB_SEND_SIGNALED;
    if inline {
        wr.wr.send_flags |= sys::ib_send_flags_IB_SEND_INLINE;
    }
    wr.rkey = rkey;
    wr.remote_addr = addr;
    let mut bad: *const sys::ib_send_wr = ptr::null();
    // SAFETY: the QP is alive; the WR and SGE live across the call.
    to_result(unsafe { post_send(qp.raw(), &wr.wr, &mut bad) })
}

/// `IB_WR_REG_MR` of `mr` (as mapped) with its current key and `access`.
pub(crate) fn post_reg_mr(qp: &KQp, wr_id: u64, mr: &KMr, access: u32) -> Result {
    let mut wr = sys::ib_reg_wr::default();
    wr.wr.__bindgen_anon_1.wr_id = wr_id;
    wr.wr.opcode = sys::ib_wr_opcode_IB_WR_REG_MR;
    wr.wr.send_flags = sys::ib_send_flags_IB_SEND_SIGNALED;
    wr.mr = mr.raw();
    wr.key = mr.keys().0;
    wr.access = access as c_int;
    let mut bad: *const sys::ib_send_wr = ptr::null();
    // SAFETY: QP and MR are alive; the WR lives across the call.
    to_result(unsafe { post_send(qp.raw(), &wr.wr, &mut bad) })
}

/// The device's (global, persistent) flush capabilities.
pub(crate) fn device_caps(dev: &Found) -> (bool, bool) {
    // SAFETY: the device is held; the core filled `attrs` at registration.
    let caps = unsafe { (*dev.raw()).attrs.device_cap_flags };
    (
        caps & sys::ib_device_cap_flags_IB_DEVICE_FLUSH_GLOBAL as u64 != 0,
        caps & sys::ib_device_cap_flags_IB_DEVICE_FLUSH_PERSISTENT as u64 != 0,
    )
}

/// All of kernel memory, for a DMA MR made through `verbs`.
pub(crate) fn kernel_memory() -> KernelMemory {
    KernelMemory::for_tests()
}

/// Marks the running KUnit test skipped (it still has to return).
pub(crate) fn mark_skipped(reason: &CStr) {
    // SAFETY: a NUL-terminated string, copied by the callee.
    unsafe { sys::rsiw_kunit_mark_skipped(reason.as_char_ptr().cast()) }
}
