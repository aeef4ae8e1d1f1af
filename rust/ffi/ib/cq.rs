// SPDX-License-Identifier: GPL-2.0
//! Completion queues: [`CqOps`], the work completion as the verbs define it
//! ([`Completion`], [`WcStatus`], [`WcOpcode`]), the [`WcWriter`] a poll
//! fills, the consumer callbacks a CQ raises ([`CqNotifier`]), and the
//! generic CQ entry points.

use core::{marker::PhantomData, ptr};

use kernel::{error::from_result, ffi::c_int, prelude::*};

use super::super::{
    object::{CoreObj, Slot},
    sys,
};
use super::{
    device::{dev_data, Driver},
    event::{raise, Element},
    umap::Udata,
};

/// Status of a completion, mirroring `enum ib_wc_status`.
#[allow(dead_code)] // All of them, for the driver to map to.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) enum WcStatus {
    #[default]
    Success,
    LocLenErr,
    LocQpOpErr,
    LocEecOpErr,
    LocProtErr,
    WrFlushErr,
    MwBindErr,
    BadRespErr,
    LocAccessErr,
    RemInvReqErr,
    RemAccessErr,
    RemOpErr,
    RetryExcErr,
    RnrRetryExcErr,
    LocRddViolErr,
    RemInvRdReqErr,
    RemAbortErr,
    InvEecnErr,
    InvEecStateErr,
    FatalErr,
    RespTimeoutErr,
    GeneralErr,
}

/// What completed, mirroring `enum ib_wc_opcode`.
#[allow(dead_code)] // All of them, for the driver to map to.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) enum WcOpcode {
    #[default]
    Send,
    RdmaWrite,
    RdmaRead,
    CompSwap,
    FetchAdd,
    LocalInv,
    RegMr,
    MaskedCompSwap,
    MaskedFetchAdd,
    Flush,
    AtomicWrite,
    /// A receive completed (Send arrived).
    Recv,
    /// A receive consumed by an RDMA Write with Immediate.
    RecvRdmaWithImm,
}

/// The QP a completion belongs to, for `wc->qp`. Null for none.
///
/// The consumer dereferences it (uverbs' `POLL_CQ` reads
/// `wc->qp->qp_num`, kernel ULPs their QP's fields), so it must name a
/// live `ib_qp` whenever a poll hands it out. It is valid until the
/// QP's `destroy_qp` returns, and `destroy_qp` purges every completion
/// naming the QP from the kernel-side CQs it completes to
/// (`Cq::purge`, before the core frees the `ib_qp`); a process's ring
/// CQ keeps only the QP's number.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct WcQp(*mut sys::ib_qp);

impl Default for WcQp {
    fn default() -> Self {
        Self(ptr::null_mut())
    }
}

// SAFETY: Rust code never dereferences the pointer (it is compared and
// copied into `wc->qp`), so moving or sharing the value between threads
// cannot race; the consumer's use of it in `wc->qp` is safe because no
// completion naming a destroyed QP stays in a CQ (see above).
unsafe impl Send for WcQp {}
// SAFETY: as above.
unsafe impl Sync for WcQp {}

impl WcQp {
    pub(in crate::ffi) fn from_raw(qp: *mut sys::ib_qp) -> Self {
        Self(qp)
    }

    /// A made-up QP identity for the CQ's own tests (never handed to a
    /// consumer).
    #[cfg(rsiw_kunit)]
    pub(crate) fn from_addr(addr: usize) -> Self {
        Self(ptr::without_provenance_mut(addr))
    }
}

/// One work completion, as a QP hands it to its CQ.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Completion {
    pub(crate) wr_id: u64,
    pub(crate) status: WcStatus,
    pub(crate) opcode: WcOpcode,
    pub(crate) byte_len: u32,
    /// Immediate data (host order; `ex.imm_data` gets it big-endian), sets
    /// `IB_WC_WITH_IMM`.
    pub(crate) imm: Option<u32>,
    /// STag a Send with Invalidate invalidated, sets `IB_WC_WITH_INVALIDATE`.
    pub(crate) invalidated: Option<u32>,
    /// The QP (`wc->qp`) and its number (`wc->src_qp`).
    pub(crate) qp: WcQp,
    pub(crate) qp_num: u32,
    /// The message asked for a solicited event.
    pub(crate) solicited: bool,
    /// `wc->vendor_err` (a failed RDMA Commit's status).
    pub(crate) vendor_err: u32,
}

/// How a CQ is armed (`ib_req_notify_cq`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Arm {
    None,
    /// `IB_CQ_SOLICITED`: the next solicited or unsuccessful completion.
    Solicited,
    /// `IB_CQ_NEXT_COMP`: the next completion.
    Next,
}

/// Calls the consumer's handlers of the CQ it lives in.
///
/// # Invariants
///
/// Points to the `ib_cq` whose driver data holds this notifier (made in
/// `create_cq`), so it is valid whenever the notifier is reachable.
pub(crate) struct CqNotifier(*mut sys::ib_cq);

// SAFETY: the `ib_cq` may be used from any thread; the handler fields are
// set by the core before `create_cq` and not changed after.
unsafe impl Send for CqNotifier {}
// SAFETY: as above.
unsafe impl Sync for CqNotifier {}

/// What is held when a [`CqNotifier`] calls the consumer: never the CQ's
/// own lock, but the pushing QP's stream lock (a `spin_lock_bh`: bottom
/// halves off, in softirq or process context) and possibly its queue
/// locks (irq-safe spinlocks, so interrupts may be off), since every
/// engine callback and flush completes under them. The handler therefore
/// runs atomically: it must not sleep and must not call back into the
/// same QP's `modify_qp`/`destroy_qp` (that takes the stream lock: a
/// self-deadlock). It may post to the QP (`post_send`/`post_recv` take
/// only the queue locks, which the pushing paths hold only around a
/// pop or push, never across a CQ push) and poll or arm the CQ. The
/// core's handlers (uverbs' event queues, `ib_cq_completion_*` queueing
/// work or a softirq poll) keep to this, as they must for hardware
/// drivers that call them from interrupt context.
impl CqNotifier {
    /// `cq->comp_handler(cq, cq->cq_context)`, if set.
    pub(crate) fn completion(&self) {
        let cq = self.0;
        // SAFETY: by the invariant `cq` is alive.
        let (handler, ctx) = unsafe { ((*cq).comp_handler, (*cq).cq_context) };
        if let Some(handler) = handler {
            // SAFETY: the consumer's handler for this CQ, with its context.
            // Called without the CQ's lock but possibly under the pushing
            // QP's stream lock (BHs off) — an atomic context, which the
            // handler contract of the core allows (hardware drivers call it
            // from hard interrupts); see the comment above this impl.
            unsafe { handler(cq, ctx) };
        }
    }

    /// Raises `IB_EVENT_CQ_ERR` (the CQ overflowed).
    pub(crate) fn overflow(&self) {
        // SAFETY: by the invariant the CQ is alive. Called without the
        // CQ's lock, possibly under the pushing QP's stream lock: `raise`
        // allows an atomic context and forbids only locks the handler
        // may take (see its contract).
        unsafe { raise(Element::Cq(self.0), sys::ib_event_type_IB_EVENT_CQ_ERR) };
    }
}

/// The consumer's `ib_wc` array a poll fills.
///
/// # Invariants
///
/// `wc` has room for `cap` entries, valid for writes while the writer lives.
pub(crate) struct WcWriter<'a> {
    wc: *mut sys::ib_wc,
    cap: usize,
    len: usize,
    _array: PhantomData<&'a mut [sys::ib_wc]>,
}

impl WcWriter<'_> {
    /// Room left.
    pub(crate) fn remaining(&self) -> usize {
        self.cap - self.len
    }

    /// Writes `c` into the next entry; false when the array is full.
    pub(crate) fn push(&mut self, c: &Completion) -> bool {
        if self.len == self.cap {
            return false;
        }
        // SAFETY: `len < cap` entries of room, by the invariant.
        fill_wc(unsafe { &mut *self.wc.add(self.len) }, c);
        self.len += 1;
        true
    }
}

/// A driver's completion queue.
#[vtable]
pub(crate) trait CqOps<D: Driver>: Send + Sync + Sized {
    /// `create_cq` of `cqe` entries (the core's request, unchecked):
    /// fills `slot` and returns the number of entries granted.
    /// `udata`: a process's CQ (its request and the response).
    fn create(
        dev: &D::Device,
        cqe: u32,
        notifier: CqNotifier,
        slot: CqSlot<'_, D>,
        udata: Option<&mut Udata<'_>>,
    ) -> Result<u32>;
    /// `destroy_cq`, before the CQ's Rust part is dropped (no QP uses it).
    fn destroy(&self, dev: &D::Device);
    /// `resize_user_cq`: returns the number of entries granted.
    fn resize(&self, dev: &D::Device, cqe: u32) -> Result<u32>;
    /// `poll_cq`: moves completions into `out`; returns how many.
    fn poll(&self, out: &mut WcWriter<'_>) -> usize;
    /// `req_notify_cq`: returns whether completions are already queued.
    fn arm(&self, how: Arm) -> bool;
}

/// The slot a [`CqOps::create`] fills.
pub(crate) type CqSlot<'a, D> = Slot<'a, sys::ib_cq, <D as Driver>::Cq>;
type CqObj<D> = CoreObj<sys::ib_cq, <D as Driver>::Cq>;

/// The driver's part of a CQ the core names.
///
/// # Safety
///
/// `cq` must be a live CQ of a `D` device made by `create_cq`, alive for `'a`.
pub(in crate::ffi) unsafe fn cq_data<'a, D: Driver>(cq: *mut sys::ib_cq) -> &'a D::Cq {
    // SAFETY: per the contract the data is initialised.
    unsafe { CqObj::<D>::data(cq) }
}

pub(super) fn install_ops<D: Driver>(ops: &mut sys::ib_device_ops) {
    ops.create_cq = Some(create_cq::<D>);
    ops.destroy_cq = Some(destroy_cq::<D>);
    if <D::Cq as CqOps<D>>::HAS_RESIZE {
        ops.resize_user_cq = Some(resize_user_cq::<D>);
    }
    ops.poll_cq = Some(poll_cq::<D>);
    ops.req_notify_cq = Some(req_notify_cq::<D>);
    ops.size_ib_cq = CqObj::<D>::SIZE;
}

pub(in crate::ffi) fn wc_status(s: WcStatus) -> sys::ib_wc_status {
    use WcStatus::*;
    match s {
        Success => sys::ib_wc_status_IB_WC_SUCCESS,
        LocLenErr => sys::ib_wc_status_IB_WC_LOC_LEN_ERR,
        LocQpOpErr => sys::ib_wc_status_IB_WC_LOC_QP_OP_ERR,
        LocEecOpErr => sys::ib_wc_status_IB_WC_LOC_EEC_OP_ERR,
        LocProtErr => sys::ib_wc_status_IB_WC_LOC_PROT_ERR,
        WrFlushErr => sys::ib_wc_status_IB_WC_WR_FLUSH_ERR,
        MwBindErr => sys::ib_wc_status_IB_WC_MW_BIND_ERR,
        BadRespErr => sys::ib_wc_status_IB_WC_BAD_RESP_ERR,
        LocAccessErr => sys::ib_wc_status_IB_WC_LOC_ACCESS_ERR,
        RemInvReqErr => sys::ib_wc_status_IB_WC_REM_INV_REQ_ERR,
        RemAccessErr => sys::ib_wc_status_IB_WC_REM_ACCESS_ERR,
        RemOpErr => sys::ib_wc_status_IB_WC_REM_OP_ERR,
        RetryExcErr => sys::ib_wc_status_IB_WC_RETRY_EXC_ERR,
        RnrRetryExcErr => sys::ib_wc_status_IB_WC_RNR_RETRY_EXC_ERR,
        LocRddViolErr => sys::ib_wc_status_IB_WC_LOC_RDD_VIOL_ERR,
        RemInvRdReqErr => sys::ib_wc_status_IB_WC_REM_INV_RD_REQ_ERR,
        RemAbortErr => sys::ib_wc_status_IB_WC_REM_ABORT_ERR,
        InvEecnErr => sys::ib_wc_status_IB_WC_INV_EECN_ERR,
        InvEecStateErr => sys::ib_wc_status_IB_WC_INV_EEC_STATE_ERR,
        FatalErr => sys::ib_wc_status_IB_WC_FATAL_ERR,
        RespTimeoutErr => sys::ib_wc_status_IB_WC_RESP_TIMEOUT_ERR,
        GeneralErr => sys::ib_wc_status_IB_WC_GENERAL_ERR,
    }
}

pub(in crate::ffi) fn wc_opcode(o: WcOpcode) -> sys::ib_wc_opcode {
    use WcOpcode::*;
    match o {
        Send => sys::ib_wc_opcode_IB_WC_SEND,
        RdmaWrite => sys::ib_wc_opcode_IB_WC_RDMA_WRITE,
        RdmaRead => sys::ib_wc_opcode_IB_WC_RDMA_READ,
        CompSwap => sys::ib_wc_opcode_IB_WC_COMP_SWAP,
        FetchAdd => sys::ib_wc_opcode_IB_WC_FETCH_ADD,
        LocalInv => sys::ib_wc_opcode_IB_WC_LOCAL_INV,
        RegMr => sys::ib_wc_opcode_IB_WC_REG_MR,
        MaskedCompSwap => sys::ib_wc_opcode_IB_WC_MASKED_COMP_SWAP,
        MaskedFetchAdd => sys::ib_wc_opcode_IB_WC_MASKED_FETCH_ADD,
        Flush => sys::ib_wc_opcode_IB_WC_FLUSH,
        AtomicWrite => sys::ib_wc_opcode_IB_WC_ATOMIC_WRITE,
        Recv => sys::ib_wc_opcode_IB_WC_RECV,
        RecvRdmaWithImm => sys::ib_wc_opcode_IB_WC_RECV_RDMA_WITH_IMM,
    }
}

/// Writes `c` into the consumer's `ib_wc`.
fn fill_wc(wc: &mut sys::ib_wc, c: &Completion) {
    *wc = sys::ib_wc::default();
    wc.__bindgen_anon_1.wr_id = c.wr_id;
    wc.status = wc_status(c.status);
    wc.opcode = wc_opcode(c.opcode);
    wc.byte_len = c.byte_len;
    wc.qp = c.qp.0;
    wc.src_qp = c.qp_num;
    wc.vendor_err = c.vendor_err;
    let mut flags = 0;
    if let Some(imm) = c.imm {
        wc.ex.imm_data = imm.to_be();
        flags |= sys::ib_wc_flags_IB_WC_WITH_IMM;
    } else if let Some(stag) = c.invalidated {
        wc.ex.invalidate_rkey = stag;
        flags |= sys::ib_wc_flags_IB_WC_WITH_INVALIDATE;
    }
    wc.wc_flags = flags as c_int;
}

/// # Safety
///
/// Only the RDMA core calls this, as the `create_cq` callback of the
/// `ib_device_ops` this file fills in, with the pointers it passes valid for the
/// call and, for an object, one of `D`'s it created through this file.
unsafe extern "C" fn create_cq<D: Driver>(
    ibcq: *mut sys::ib_cq,
    attr: *const sys::ib_cq_init_attr,
    attrs: *mut sys::uverbs_attr_bundle,
) -> c_int {
    from_result(|| {
        // SAFETY: the core set `ibcq->device` to one of `D`'s live devices
        // and passes a valid `attr` for the call.
        let (dev, attr) = unsafe { (dev_data::<D>((*ibcq).device), &*attr) };
        // No creation flag is supported.
        if attr.flags != 0 {
            return Err(EOPNOTSUPP);
        }
        let mut filled = false;
        // SAFETY: the core allocated `ibcq` with `size_ib_cq` = `CqObj::SIZE`.
        let slot = unsafe { CqSlot::<D>::new(ibcq, &mut filled) };
        // INVARIANT: the notifier points to the CQ whose data holds it.
        // SAFETY: a user command's bundle (null for a kernel consumer),
        // valid for the call; its udata and context are the command's.
        let mut udata = unsafe { Udata::new(sys::rsiw_attrs_udata(attrs), ptr::null_mut()) };
        let cqe = D::Cq::create(dev, attr.cqe, CqNotifier(ibcq), slot, udata.as_mut())?;
        if !filled {
            return Err(EINVAL);
        }
        // SAFETY: `ibcq` is valid; the core reads `cqe` after we return.
        unsafe { (*ibcq).cqe = cqe as c_int };
        Ok(0)
    })
}

/// # Safety
///
/// Only the RDMA core calls this, as the `destroy_cq` callback of the
/// `ib_device_ops` this file fills in, with the pointers it passes valid for the
/// call and, for an object, one of `D`'s it created through this file.
unsafe extern "C" fn destroy_cq<D: Driver>(
    ibcq: *mut sys::ib_cq,
    _udata: *mut sys::ib_udata,
) -> c_int {
    // SAFETY: `ibcq` was initialised by `create_cq`; the core calls this
    // once, with no QP left on the CQ, before freeing it.
    let (dev, cq) = unsafe { (dev_data::<D>((*ibcq).device), cq_data::<D>(ibcq)) };
    cq.destroy(dev);
    // SAFETY: as above; nothing uses the data after this.
    unsafe { CqObj::<D>::drop_data(ibcq) };
    0
}

/// # Safety
///
/// Only the RDMA core calls this, as the `resize_user_cq` callback of the
/// `ib_device_ops` this file fills in, with the pointers it passes valid for the
/// call and, for an object, one of `D`'s it created through this file.
unsafe extern "C" fn resize_user_cq<D: Driver>(
    ibcq: *mut sys::ib_cq,
    cqe: u32,
    _udata: *mut sys::ib_udata,
) -> c_int {
    from_result(|| {
        // SAFETY: one of `D`'s live, initialised CQs.
        let (dev, cq) = unsafe { (dev_data::<D>((*ibcq).device), cq_data::<D>(ibcq)) };
        let cqe = cq.resize(dev, cqe)?;
        // SAFETY: `ibcq` is valid; `cqe` is what the core reports.
        unsafe { (*ibcq).cqe = cqe as c_int };
        Ok(0)
    })
}

/// # Safety
///
/// Only the RDMA core calls this, as the `poll_cq` callback of the
/// `ib_device_ops` this file fills in, with the pointers it passes valid for the
/// call and, for an object, one of `D`'s it created through this file.
unsafe extern "C" fn poll_cq<D: Driver>(
    ibcq: *mut sys::ib_cq,
    num_entries: c_int,
    wc: *mut sys::ib_wc,
) -> c_int {
    // SAFETY: one of `D`'s live, initialised CQs.
    let cq = unsafe { cq_data::<D>(ibcq) };
    let cap = usize::try_from(num_entries).unwrap_or(0);
    // INVARIANT: the consumer passes room for `num_entries` entries.
    let mut out = WcWriter {
        wc,
        cap,
        len: 0,
        _array: PhantomData,
    };
    cq.poll(&mut out);
    out.len as c_int
}

/// # Safety
///
/// Only the RDMA core calls this, as the `req_notify_cq` callback of the
/// `ib_device_ops` this file fills in, with the pointers it passes valid for the
/// call and, for an object, one of `D`'s it created through this file.
unsafe extern "C" fn req_notify_cq<D: Driver>(
    ibcq: *mut sys::ib_cq,
    flags: sys::ib_cq_notify_flags,
) -> c_int {
    // SAFETY: one of `D`'s live, initialised CQs.
    let cq = unsafe { cq_data::<D>(ibcq) };
    let how = match flags & sys::ib_cq_notify_flags_IB_CQ_SOLICITED_MASK {
        sys::ib_cq_notify_flags_IB_CQ_NEXT_COMP => Arm::Next,
        sys::ib_cq_notify_flags_IB_CQ_SOLICITED => Arm::Solicited,
        0 => Arm::None,
        _ => Arm::Next,
    };
    let queued = cq.arm(how);
    c_int::from(flags & sys::ib_cq_notify_flags_IB_CQ_REPORT_MISSED_EVENTS != 0 && queued)
}
