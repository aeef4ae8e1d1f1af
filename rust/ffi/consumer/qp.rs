// SPDX-License-Identifier: GPL-2.0
//! Kernel consumers' view of QPs, for the self-tests: QPs created through
//! the core (`ib_create_qp_kernel`) and driven through the ops table as
//! `ib_post_send`/`ib_post_recv`/`ib_modify_qp` do.

use core::{
    ptr,
    sync::atomic::{AtomicU32, Ordering},
};

use kernel::{ffi::c_int, prelude::*, sync::Arc};

use crate::ffi::{
    consumer::{cq::KCq, mr::KPd},
    ib::{qp::qp_of, Driver, QpState},
    sys,
};

/// `ib_modify_qp` of a kernel QP as the core calls the device's op.
///
/// # Safety
///
/// `qp` must be a live QP; `attr` valid for the call.
unsafe fn modify_qp(qp: *mut sys::ib_qp, attr: *mut sys::ib_qp_attr, mask: c_int) -> c_int {
    // SAFETY: per the contract; every device sets `modify_qp`.
    unsafe {
        match (*(*qp).device).ops.modify_qp {
            Some(f) => f(qp, attr, mask, ptr::null_mut()),
            None => EOPNOTSUPP.to_errno(),
        }
    }
}

/// `ib_post_send`.
///
/// # Safety
///
/// `qp` must be a live kernel QP; the WR chain valid for the call.
pub(crate) unsafe fn post_send(
    qp: *mut sys::ib_qp,
    wr: *const sys::ib_send_wr,
    bad: *mut *const sys::ib_send_wr,
) -> c_int {
    // SAFETY: per the contract.
    unsafe { sys::rsiw_ib_post_send(qp, wr, bad) }
}

/// `ib_post_recv`.
///
/// # Safety
///
/// As for [`post_send`].
unsafe fn post_recv(
    qp: *mut sys::ib_qp,
    wr: *const sys::ib_recv_wr,
    bad: *mut *const sys::ib_recv_wr,
) -> c_int {
    // SAFETY: per the contract.
    unsafe { sys::rsiw_ib_post_recv(qp, wr, bad) }
}

/// One local data segment: address (kernel VA) and length, with the
/// PD's local DMA key.
#[derive(Clone, Copy)]
pub(crate) struct Seg {
    pub(crate) addr: u64,
    pub(crate) len: u32,
    pub(crate) lkey: u32,
}

impl Seg {
    pub(crate) fn of(buf: &[u8], lkey: u32) -> Self {
        Self {
            addr: buf.as_ptr() as u64,
            len: buf.len() as u32,
            lkey,
        }
    }

    /// A segment the device writes: the address comes from a mutable
    /// borrow, so the compiler never assumes the buffer unchanged.
    pub(crate) fn of_mut(buf: &mut [u8], lkey: u32) -> Self {
        Self {
            addr: buf.as_mut_ptr() as u64,
            len: buf.len() as u32,
            lkey,
        }
    }
}

pub(crate) struct KQp(*mut sys::ib_qp);

impl KQp {
    pub(crate) fn create(pd: &KPd, scq: &KCq, rcq: &KCq, wr: u32) -> Result<Self> {
        Self::create_with(pd, scq, rcq, wr, None)
    }

    /// A QP whose asynchronous events are counted in [`QP_EVENTS`].
    pub(crate) fn create_watched(pd: &KPd, scq: &KCq, rcq: &KCq, wr: u32) -> Result<Self> {
        QP_EVENTS.reset();
        Self::create_with(pd, scq, rcq, wr, Some(count_qp_event))
    }

    /// A QP that takes its receives from `srq`, its events counted in
    /// [`QP_EVENTS`] (reset).
    pub(crate) fn create_on_srq(
        pd: &KPd,
        scq: &KCq,
        rcq: &KCq,
        wr: u32,
        srq: &super::srq::KSrq,
    ) -> Result<Self> {
        QP_EVENTS.reset();
        Self::create_full(pd, scq, rcq, wr, Some(count_qp_event), srq.raw())
    }

    fn create_with(
        pd: &KPd,
        scq: &KCq,
        rcq: &KCq,
        wr: u32,
        handler: Option<unsafe extern "C" fn(*mut sys::ib_event, *mut c_void)>,
    ) -> Result<Self> {
        Self::create_full(pd, scq, rcq, wr, handler, ptr::null_mut())
    }

    fn create_full(
        pd: &KPd,
        scq: &KCq,
        rcq: &KCq,
        wr: u32,
        handler: Option<unsafe extern "C" fn(*mut sys::ib_event, *mut c_void)>,
        srq: *mut sys::ib_srq,
    ) -> Result<Self> {
        let mut attr = sys::ib_qp_init_attr {
            event_handler: handler,
            srq,
            send_cq: scq.raw(),
            recv_cq: rcq.raw(),
            cap: sys::ib_qp_cap {
                max_send_wr: wr,
                max_recv_wr: wr,
                max_send_sge: 2,
                max_recv_sge: 2,
                max_inline_data: 64,
                ..Default::default()
            },
            qp_type: sys::ib_qp_type_IB_QPT_RC,
            sq_sig_type: sys::ib_sig_type_IB_SIGNAL_REQ_WR,
            ..Default::default()
        };
        // SAFETY: PD, CQs (and SRQ, if any) are live; `attr` valid for
        // the call.
        let qp =
            unsafe { sys::ib_create_qp_kernel(pd.raw(), &mut attr, c"rsiw_kunit".as_char_ptr()) };
        if qp.is_null() || (qp as usize) > usize::MAX - 4095 {
            return Err(if qp.is_null() {
                ENOMEM
            } else {
                Error::from_errno(qp as isize as c_int)
            });
        }
        Ok(Self(qp))
    }

    pub(crate) fn raw(&self) -> *mut sys::ib_qp {
        self.0
    }

    /// The driver's QP behind it (a `D` device's QP).
    pub(crate) fn qp<D: Driver>(&self) -> Arc<D::Qp> {
        // SAFETY: alive until drop; made on a `D` device by the caller's
        // choice of device.
        unsafe { qp_of::<D>(self.0) }
    }

    pub(crate) fn modify(&self, state: QpState) -> Result {
        let mut attr = sys::ib_qp_attr {
            qp_state: state.to_raw(),
            ..Default::default()
        };
        // SAFETY: alive; the ops entry as `ib_modify_qp` calls it.
        to_result(unsafe {
            modify_qp(self.0, &mut attr, sys::ib_qp_attr_mask_IB_QP_STATE as c_int)
        })
    }

    /// Posts one send WR of `opcode` with `segs`; `rdma` = (rkey, remote addr).
    pub(crate) fn post(
        &self,
        wr_id: u64,
        opcode: u32,
        segs: &[Seg],
        rdma: Option<(u32, u64)>,
        signaled: bool,
    ) -> Result {
        let flags = if signaled {
            sys::ib_send_flags_IB_SEND_SIGNALED
        } else {
            0
        };
        self.post_with(wr_id, opcode, segs, rdma, flags)
    }

    /// As [`Self::post`], with the `ib_send_flags` given.
    pub(crate) fn post_with(
        &self,
        wr_id: u64,
        opcode: u32,
        segs: &[Seg],
        rdma: Option<(u32, u64)>,
        send_flags: i32,
    ) -> Result {
        let mut sges = [sys::ib_sge::default(); 2];
        for (s, g) in sges.iter_mut().zip(segs) {
            *s = sys::ib_sge {
                addr: g.addr,
                length: g.len,
                lkey: g.lkey,
            };
        }
        let mut wr = sys::ib_rdma_wr::default();
        wr.wr.__bindgen_anon_1.wr_id = wr_id;
        wr.wr.sg_list = sges.as_mut_ptr();
        wr.wr.num_sge = segs.len() as c_int;
        wr.wr.opcode = opcode;
        wr.wr.send_flags = send_flags;
        if let Some((rkey, addr)) = rdma {
            wr.rkey = rkey;
            wr.remote_addr = addr;
        }
        let mut bad: *const sys::ib_send_wr = ptr::null();
        // SAFETY: alive; the WR and SGEs live across the call (the QP
        // copies them).
        to_result(unsafe { post_send(self.0, &wr.wr, &mut bad) })
    }

    /// RDMA Write with Immediate (`imm` in host order).
    pub(crate) fn post_write_imm(
        &self,
        wr_id: u64,
        seg: Seg,
        rkey: u32,
        addr: u64,
        imm: u32,
    ) -> Result {
        let mut sge = sys::ib_sge {
            addr: seg.addr,
            length: seg.len,
            lkey: seg.lkey,
        };
        let mut wr = sys::ib_rdma_wr::default();
        wr.wr.__bindgen_anon_1.wr_id = wr_id;
        wr.wr.sg_list = &mut sge;
        wr.wr.num_sge = 1;
        wr.wr.opcode = WR_WRITE_IMM;
        wr.wr.send_flags = sys::ib_send_flags_IB_SEND_SIGNALED;
        wr.wr.ex.imm_data = imm.to_be();
        wr.rkey = rkey;
        wr.remote_addr = addr;
        let mut bad: *const sys::ib_send_wr = ptr::null();
        // SAFETY: as for `post`.
        to_result(unsafe { post_send(self.0, &wr.wr, &mut bad) })
    }

    /// RDMA Write with Immediate over `segs` (none: zero length),
    /// optionally solicited (Immediate Data with SE).
    pub(crate) fn post_write_imm_ex(
        &self,
        wr_id: u64,
        segs: &[Seg],
        rkey: u32,
        addr: u64,
        imm: u32,
        solicited: bool,
    ) -> Result {
        let mut sges = [sys::ib_sge::default(); 2];
        for (s, g) in sges.iter_mut().zip(segs) {
            *s = sys::ib_sge {
                addr: g.addr,
                length: g.len,
                lkey: g.lkey,
            };
        }
        let mut wr = sys::ib_rdma_wr::default();
        wr.wr.__bindgen_anon_1.wr_id = wr_id;
        wr.wr.sg_list = sges.as_mut_ptr();
        wr.wr.num_sge = segs.len().min(2) as c_int;
        wr.wr.opcode = WR_WRITE_IMM;
        wr.wr.send_flags = sys::ib_send_flags_IB_SEND_SIGNALED
            | if solicited {
                sys::ib_send_flags_IB_SEND_SOLICITED
            } else {
                0
            };
        wr.wr.ex.imm_data = imm.to_be();
        wr.rkey = rkey;
        wr.remote_addr = addr;
        let mut bad: *const sys::ib_send_wr = ptr::null();
        // SAFETY: as for `post`.
        to_result(unsafe { post_send(self.0, &wr.wr, &mut bad) })
    }

    /// An atomic WR (`opcode` one of the `WR_*ATOMIC*`): the original
    /// value lands in `segs[0]` (more than one is refused by the QP).
    pub(crate) fn post_atomic(
        &self,
        wr_id: u64,
        opcode: u32,
        segs: &[Seg],
        rkey: u32,
        addr: u64,
        args: AtomicArgs,
    ) -> Result {
        let mut sges = [sys::ib_sge::default(); 2];
        for (s, g) in sges.iter_mut().zip(segs) {
            *s = sys::ib_sge {
                addr: g.addr,
                length: g.len,
                lkey: g.lkey,
            };
        }
        let mut wr = sys::ib_atomic_wr::default();
        wr.wr.__bindgen_anon_1.wr_id = wr_id;
        wr.wr.sg_list = sges.as_mut_ptr();
        wr.wr.num_sge = segs.len().min(2) as c_int;
        wr.wr.opcode = opcode;
        wr.wr.send_flags = sys::ib_send_flags_IB_SEND_SIGNALED;
        wr.remote_addr = addr;
        wr.compare_add = args.compare_add;
        wr.compare_add_mask = args.compare_add_mask;
        wr.swap = args.swap;
        wr.swap_mask = args.swap_mask;
        wr.rkey = rkey;
        let mut bad: *const sys::ib_send_wr = ptr::null();
        // SAFETY: as for `post`.
        to_result(unsafe { post_send(self.0, &wr.wr, &mut bad) })
    }

    pub(crate) fn post_recv(&self, wr_id: u64, seg: Seg) -> Result {
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
        // SAFETY: as for `post`.
        to_result(unsafe { post_recv(self.0, &wr, &mut bad) })
    }
}

/// The operands of an `ib_atomic_wr`.
#[derive(Clone, Copy, Default)]
pub(crate) struct AtomicArgs {
    pub(crate) compare_add: u64,
    pub(crate) compare_add_mask: u64,
    pub(crate) swap: u64,
    pub(crate) swap_mask: u64,
}

// SAFETY: the verbs on a kernel QP (`ib_post_send`, `ib_post_recv`,
// `ib_modify_qp`) may be called from any thread, concurrently.
unsafe impl Send for KQp {}
// SAFETY: as above.
unsafe impl Sync for KQp {}

impl Drop for KQp {
    fn drop(&mut self) {
        // SAFETY: created by `ib_create_qp_kernel`, destroyed once.
        unsafe { sys::ib_destroy_qp_user(self.0, ptr::null_mut()) };
    }
}

/// Asynchronous events of the QP made by [`KQp::create_watched`]
/// (KUnit cases run one at a time; each such QP resets the counts).
pub(crate) struct QpEventLog {
    fatal: AtomicU32,
    last_wqe: AtomicU32,
    other: AtomicU32,
}

pub(crate) static QP_EVENTS: QpEventLog = QpEventLog {
    fatal: AtomicU32::new(0),
    last_wqe: AtomicU32::new(0),
    other: AtomicU32::new(0),
};

impl QpEventLog {
    fn reset(&self) {
        self.fatal.store(0, Ordering::Relaxed);
        self.last_wqe.store(0, Ordering::Relaxed);
        self.other.store(0, Ordering::Relaxed);
    }

    /// `IB_EVENT_QP_LAST_WQE_REACHED` events seen.
    pub(crate) fn last_wqe(&self) -> u32 {
        self.last_wqe.load(Ordering::Acquire)
    }

    /// `IB_EVENT_QP_FATAL` events seen.
    pub(crate) fn fatal(&self) -> u32 {
        self.fatal.load(Ordering::Acquire)
    }

    /// Any other QP event seen.
    pub(crate) fn other(&self) -> u32 {
        self.other.load(Ordering::Acquire)
    }
}

/// # Safety
///
/// Only the RDMA core calls this, as the handler this file registers,
/// with the context pointer given at registration and its other
/// pointers valid for the call.
unsafe extern "C" fn count_qp_event(ev: *mut sys::ib_event, _ctx: *mut c_void) {
    // SAFETY: the core passes an event valid for the call.
    let kind = unsafe { (*ev).event };
    let counter = match kind {
        sys::ib_event_type_IB_EVENT_QP_FATAL => &QP_EVENTS.fatal,
        sys::ib_event_type_IB_EVENT_QP_LAST_WQE_REACHED => &QP_EVENTS.last_wqe,
        _ => &QP_EVENTS.other,
    };
    counter.fetch_add(1, Ordering::AcqRel);
}

pub(crate) const SEND_SIGNALED: i32 = sys::ib_send_flags_IB_SEND_SIGNALED;
pub(crate) const SEND_FENCE: i32 = sys::ib_send_flags_IB_SEND_FENCE;
pub(crate) const WR_SEND: u32 = sys::ib_wr_opcode_IB_WR_SEND;
pub(crate) const WR_WRITE: u32 = sys::ib_wr_opcode_IB_WR_RDMA_WRITE;
pub(crate) const WR_READ: u32 = sys::ib_wr_opcode_IB_WR_RDMA_READ;
pub(crate) const WR_WRITE_IMM: u32 = sys::ib_wr_opcode_IB_WR_RDMA_WRITE_WITH_IMM;
pub(crate) const WR_ATOMIC_FA: u32 = sys::ib_wr_opcode_IB_WR_ATOMIC_FETCH_AND_ADD;
pub(crate) const WR_ATOMIC_CS: u32 = sys::ib_wr_opcode_IB_WR_ATOMIC_CMP_AND_SWP;
pub(crate) const WR_MASKED_FA: u32 = sys::ib_wr_opcode_IB_WR_MASKED_ATOMIC_FETCH_AND_ADD;
pub(crate) const WR_MASKED_CS: u32 = sys::ib_wr_opcode_IB_WR_MASKED_ATOMIC_CMP_AND_SWP;
pub(crate) const WR_SEND_WITH_IMM: u32 = sys::ib_wr_opcode_IB_WR_SEND_WITH_IMM;
pub(crate) const WC_FETCH_ADD: u32 = sys::ib_wc_opcode_IB_WC_FETCH_ADD;
pub(crate) const WC_COMP_SWAP: u32 = sys::ib_wc_opcode_IB_WC_COMP_SWAP;
pub(crate) const WC_MASKED_FETCH_ADD: u32 = sys::ib_wc_opcode_IB_WC_MASKED_FETCH_ADD;
pub(crate) const WC_MASKED_COMP_SWAP: u32 = sys::ib_wc_opcode_IB_WC_MASKED_COMP_SWAP;
pub(crate) const WC_REM_ACCESS_ERR: u32 = sys::ib_wc_status_IB_WC_REM_ACCESS_ERR;
pub(crate) const WC_REM_OP_ERR: u32 = sys::ib_wc_status_IB_WC_REM_OP_ERR;
pub(crate) const WC_RDMA_WRITE: u32 = sys::ib_wc_opcode_IB_WC_RDMA_WRITE;
pub(crate) const WC_RDMA_READ: u32 = sys::ib_wc_opcode_IB_WC_RDMA_READ;

use kernel::{error::to_result, ffi::c_void};
