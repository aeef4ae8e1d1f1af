// SPDX-License-Identifier: GPL-2.0
//! Completion queues at the C boundary: the CQ entry points, `ib_wc`
//! filling, and the consumer callbacks (`comp_handler`, `event_handler`)
//! a CQ calls.

use core::ptr;

use kernel::{error::from_result, ffi::c_int, prelude::*};

use super::{device::IbDevice, object::CoreObj, sys};
use crate::cq::{Arm, Completion, Cq, WcOpcode, WcStatus};

type CqObj = CoreObj<sys::ib_cq, Cq>;

/// The QP a completion belongs to, for `wc->qp`. Null for none.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct WcQp(*mut sys::ib_qp);

impl Default for WcQp {
    fn default() -> Self {
        Self(ptr::null_mut())
    }
}

// SAFETY: only an identity handed back to the consumer in `wc->qp`; rsiw
// never dereferences it.
unsafe impl Send for WcQp {}
// SAFETY: as above.
unsafe impl Sync for WcQp {}

impl WcQp {
    /// The QP's `ib_qp`, as the QP code has it.
    #[allow(dead_code)] // For the QP code.
    pub(crate) fn from_raw(qp: *mut sys::ib_qp) -> Self {
        Self(qp)
    }
}

/// Calls the consumer's handlers of the CQ it lives in.
///
/// # Invariants
///
/// Points to the `ib_cq` whose driver data holds this notifier (set in
/// [`create_cq`]), so it is valid whenever the notifier is reachable.
pub(crate) struct CqNotifier(*mut sys::ib_cq);

// SAFETY: the `ib_cq` may be used from any thread; the handler fields are
// set by the core before `create_cq` and not changed after.
unsafe impl Send for CqNotifier {}
// SAFETY: as above.
unsafe impl Sync for CqNotifier {}

impl CqNotifier {
    /// `cq->comp_handler(cq, cq->cq_context)`, if set.
    pub(crate) fn completion(&self) {
        let cq = self.0;
        // SAFETY: by the invariant `cq` is alive.
        let (handler, ctx) = unsafe { ((*cq).comp_handler, (*cq).cq_context) };
        if let Some(handler) = handler {
            // SAFETY: the consumer's handler for this CQ, with its context;
            // called without any rsiw lock held.
            unsafe { handler(cq, ctx) };
        }
    }

    /// Raises `IB_EVENT_CQ_ERR` through `cq->event_handler`, if set.
    pub(crate) fn overflow(&self) {
        let cq = self.0;
        // SAFETY: by the invariant `cq` is alive.
        let (handler, ctx, device) = unsafe { ((*cq).event_handler, (*cq).cq_context, (*cq).device) };
        if let Some(handler) = handler {
            let mut ev = sys::ib_event::default();
            ev.device = device;
            ev.element.cq = cq;
            ev.event = sys::ib_event_type_IB_EVENT_CQ_ERR;
            // SAFETY: the consumer's handler with a valid event for the call.
            unsafe { handler(&mut ev, ctx) };
        }
    }
}

/// A CQ of ours, borrowed: what the QP gets from `send_cq`/`recv_cq`.
/// The core keeps a CQ alive while QPs use it (`usecnt`).
#[repr(transparent)]
pub(crate) struct IbCq(kernel::types::Opaque<sys::ib_cq>);

impl IbCq {
    /// # Safety
    ///
    /// `cq` must be a CQ created by rsiw's [`create_cq`], alive for `'a`.
    pub(crate) unsafe fn from_raw<'a>(cq: *mut sys::ib_cq) -> &'a Self {
        // SAFETY: transparent wrapper; validity per the contract.
        unsafe { &*cq.cast::<Self>() }
    }

    pub(crate) fn cq(&self) -> &Cq {
        // SAFETY: by the contract of `from_raw` the data is initialised.
        unsafe { CqObj::data(self.0.get()) }
    }
}

fn wc_status(s: WcStatus) -> sys::ib_wc_status {
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

fn wc_opcode(o: WcOpcode) -> sys::ib_wc_opcode {
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

/// The ring size for a requested `cqe`: at least 1, at most `max_cqe`.
fn checked_cqe(dev: &IbDevice, cqe: u32) -> Result<usize> {
    if cqe == 0 || cqe > dev.data().limits().max_cqe {
        return Err(EINVAL);
    }
    Ok(cqe as usize)
}

pub(super) unsafe extern "C" fn create_cq(
    ibcq: *mut sys::ib_cq,
    attr: *const sys::ib_cq_init_attr,
    _attrs: *mut sys::uverbs_attr_bundle,
) -> c_int {
    from_result(|| {
        // SAFETY: the core set `ibcq->device` to one of our live devices
        // and passes a valid `attr` for the call.
        let (dev, attr) = unsafe { (IbDevice::from_raw((*ibcq).device), &*attr) };
        // A user CQ is polled and armed through uverbs commands
        // (`USER_DATA_PATH_CMDS`): the same CQ as a kernel consumer's.
        if attr.flags != 0 {
            return Err(EOPNOTSUPP);
        }
        let cqe = checked_cqe(dev, attr.cqe)?;
        dev.data().alloc_cq()?;
        let res = Cq::new(cqe, CqNotifier(ibcq)).and_then(|init| {
            // SAFETY: the core allocated `ibcq` with `size_ib_cq` =
            // `CqObj::SIZE`; the notifier points to it (its invariant).
            unsafe { CqObj::pin_init(ibcq, init) }
        });
        if let Err(e) = res {
            dev.data().dealloc_cq();
            return Err(e);
        }
        // SAFETY: `ibcq` is valid; the core reads `cqe` after we return.
        unsafe { (*ibcq).cqe = cqe as c_int };
        Ok(0)
    })
}

pub(super) unsafe extern "C" fn destroy_cq(ibcq: *mut sys::ib_cq, _udata: *mut sys::ib_udata) -> c_int {
    // SAFETY: `ibcq` was initialised by `create_cq`; the core calls this
    // once, with no QP left on the CQ, before freeing it.
    let dev = unsafe { IbDevice::from_raw((*ibcq).device) };
    // SAFETY: as above.
    unsafe { CqObj::drop_data(ibcq) };
    dev.data().dealloc_cq();
    0
}

pub(super) unsafe extern "C" fn resize_user_cq(
    ibcq: *mut sys::ib_cq,
    cqe: u32,
    _udata: *mut sys::ib_udata,
) -> c_int {
    from_result(|| {
        // SAFETY: one of our live, initialised CQs.
        let (dev, cq) = unsafe { (IbDevice::from_raw((*ibcq).device), IbCq::from_raw(ibcq).cq()) };
        let cqe = checked_cqe(dev, cqe)?;
        cq.resize(cqe)?;
        // SAFETY: `ibcq` is valid; `cqe` is what the core reports.
        unsafe { (*ibcq).cqe = cqe as c_int };
        Ok(0)
    })
}

pub(super) unsafe extern "C" fn poll_cq(ibcq: *mut sys::ib_cq, num_entries: c_int, wc: *mut sys::ib_wc) -> c_int {
    // SAFETY: one of our live, initialised CQs.
    let cq = unsafe { IbCq::from_raw(ibcq).cq() };
    let max = usize::try_from(num_entries).unwrap_or(0);
    let n = cq.poll(max, |i, c| {
        // SAFETY: the consumer passes room for `num_entries` entries and
        // `i < num_entries`.
        fill_wc(unsafe { &mut *wc.add(i) }, c)
    });
    n as c_int
}

pub(super) unsafe extern "C" fn req_notify_cq(ibcq: *mut sys::ib_cq, flags: sys::ib_cq_notify_flags) -> c_int {
    // SAFETY: one of our live, initialised CQs.
    let cq = unsafe { IbCq::from_raw(ibcq).cq() };
    let how = match flags & sys::ib_cq_notify_flags_IB_CQ_SOLICITED_MASK {
        sys::ib_cq_notify_flags_IB_CQ_NEXT_COMP => Arm::Next,
        sys::ib_cq_notify_flags_IB_CQ_SOLICITED => Arm::Solicited,
        0 => Arm::None,
        _ => Arm::Next,
    };
    let queued = cq.arm(how);
    c_int::from(flags & sys::ib_cq_notify_flags_IB_CQ_REPORT_MISSED_EVENTS != 0 && queued)
}

/// Kernel consumers' CQ verbs for the self-tests.
#[cfg(CONFIG_KUNIT = "y")]
pub(crate) mod testing {
    use core::sync::atomic::{AtomicU32, Ordering};

    use super::*;
    use crate::ffi::device::testing::Found;

    pub(crate) const WC_SUCCESS: u32 = sys::ib_wc_status_IB_WC_SUCCESS;
    pub(crate) const WC_WR_FLUSH_ERR: u32 = sys::ib_wc_status_IB_WC_WR_FLUSH_ERR;
    pub(crate) const WC_SEND: u32 = sys::ib_wc_opcode_IB_WC_SEND;
    pub(crate) const WC_RECV: u32 = sys::ib_wc_opcode_IB_WC_RECV;
    pub(crate) const WC_RECV_RDMA_WITH_IMM: u32 = sys::ib_wc_opcode_IB_WC_RECV_RDMA_WITH_IMM;
    pub(crate) const WITH_IMM: i32 = sys::ib_wc_flags_IB_WC_WITH_IMM as i32;
    pub(crate) const WITH_INVALIDATE: i32 = sys::ib_wc_flags_IB_WC_WITH_INVALIDATE as i32;
    pub(crate) const NEXT_COMP: u32 = sys::ib_cq_notify_flags_IB_CQ_NEXT_COMP;
    pub(crate) const SOLICITED: u32 = sys::ib_cq_notify_flags_IB_CQ_SOLICITED;
    pub(crate) const REPORT_MISSED: u32 = sys::ib_cq_notify_flags_IB_CQ_REPORT_MISSED_EVENTS;

    /// What the consumer's handlers saw.
    #[derive(Default)]
    pub(crate) struct Seen {
        pub(crate) comp: AtomicU32,
        pub(crate) cq_err: AtomicU32,
        pub(crate) wrong_cq: AtomicU32,
    }

    /// An `ib_wc` as raw numbers.
    #[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
    pub(crate) struct RawWc {
        pub(crate) wr_id: u64,
        pub(crate) status: u32,
        pub(crate) opcode: u32,
        pub(crate) byte_len: u32,
        pub(crate) qp: usize,
        pub(crate) src_qp: u32,
        pub(crate) wc_flags: i32,
        /// `ex` as stored (imm_data is big-endian).
        pub(crate) ex: u32,
        pub(crate) vendor_err: u32,
    }

    /// A CQ created through the core, with counting handlers.
    pub(crate) struct KCq {
        cq: *mut sys::ib_cq,
        seen: Pin<KBox<Seen>>,
    }

    unsafe extern "C" fn on_comp(cq: *mut sys::ib_cq, ctx: *mut c_void) {
        // SAFETY: `ctx` is the `Seen` of the `KCq` owning `cq`.
        let seen = unsafe { &*ctx.cast::<Seen>() };
        seen.comp.fetch_add(1, Ordering::Relaxed);
        let _ = cq;
    }

    unsafe extern "C" fn on_event(ev: *mut sys::ib_event, ctx: *mut c_void) {
        // SAFETY: `ctx` is the `Seen` of the `KCq`; `ev` valid for the call.
        let (seen, ev) = unsafe { (&*ctx.cast::<Seen>(), &*ev) };
        if ev.event == sys::ib_event_type_IB_EVENT_CQ_ERR {
            seen.cq_err.fetch_add(1, Ordering::Relaxed);
        }
        // SAFETY: for a CQ event `element.cq` is the active member.
        if unsafe { ev.element.cq }.is_null() {
            seen.wrong_cq.fetch_add(1, Ordering::Relaxed);
        }
    }

    fn err_of<T>(p: *mut T) -> Option<Error> {
        if p.is_null() {
            Some(ENOMEM)
        } else if (p as usize) > usize::MAX - 4095 {
            Some(Error::from_errno(p as isize as c_int))
        } else {
            None
        }
    }

    impl KCq {
        /// `ib_create_cq(dev, comp, event, ctx, {cqe})`.
        pub(crate) fn create(dev: &Found, cqe: u32) -> Result<Self> {
            let seen = KBox::pin(Seen::default(), GFP_KERNEL)?;
            let attr = sys::ib_cq_init_attr { cqe, ..Default::default() };
            let ctx = ptr::from_ref::<Seen>(&seen).cast_mut().cast();
            // SAFETY: device held; handlers and context outlive the CQ
            // (destroyed in drop before `seen`).
            let cq = unsafe {
                sys::__ib_create_cq(dev.raw(), Some(on_comp), Some(on_event), ctx, &attr, c"rsiw_kunit".as_ptr().cast())
            };
            if let Some(e) = err_of(cq) {
                return Err(e);
            }
            Ok(Self { cq, seen })
        }

        /// `ib_alloc_cq(dev, NULL, cqe, 0, IB_POLL_DIRECT)`, freed at once;
        /// returns the `cqe` the CQ reported.
        pub(crate) fn alloc_free_direct(dev: &Found, cqe: i32) -> Result<i32> {
            // SAFETY: device held.
            let cq = unsafe {
                sys::__ib_alloc_cq(dev.raw(), ptr::null_mut(), cqe, 0, sys::ib_poll_context_IB_POLL_DIRECT, c"rsiw_kunit".as_ptr().cast())
            };
            if let Some(e) = err_of(cq) {
                return Err(e);
            }
            // SAFETY: just allocated; freed once.
            unsafe {
                let n = (*cq).cqe;
                sys::ib_free_cq(cq);
                Ok(n)
            }
        }

        pub(crate) fn raw(&self) -> *mut sys::ib_cq {
            self.cq
        }

        pub(crate) fn seen(&self) -> &Seen {
            &self.seen
        }

        pub(crate) fn cq(&self) -> &Cq {
            // SAFETY: alive until drop.
            unsafe { IbCq::from_raw(self.cq).cq() }
        }

        pub(crate) fn wc_qp(&self) -> WcQp {
            // Any recognisable pointer will do: it is only handed back.
            WcQp(self.cq.cast())
        }

        pub(crate) fn reported_cqe(&self) -> i32 {
            // SAFETY: alive.
            unsafe { (*self.cq).cqe }
        }

        /// `ib_poll_cq` into `out`; returns the count.
        pub(crate) fn poll(&self, out: &mut [RawWc]) -> i32 {
            let mut wc: [sys::ib_wc; 8] = Default::default();
            let n = out.len().min(wc.len());
            // SAFETY: CQ alive; `wc` has room for `n` entries.
            let got = unsafe { sys::rsiw_ib_poll_cq(self.cq, n as c_int, wc.as_mut_ptr()) };
            for (o, w) in out.iter_mut().zip(wc.iter()).take(got.max(0) as usize) {
                // SAFETY: reading plain unions the driver just wrote.
                *o = unsafe {
                    RawWc {
                        wr_id: w.__bindgen_anon_1.wr_id,
                        status: w.status,
                        opcode: w.opcode,
                        byte_len: w.byte_len,
                        qp: w.qp as usize,
                        src_qp: w.src_qp,
                        wc_flags: w.wc_flags,
                        ex: w.ex.invalidate_rkey,
                        vendor_err: w.vendor_err,
                    }
                };
            }
            got
        }

        /// The next completion, polling every millisecond for up to `ms`.
        pub(crate) fn poll_one(&self, ms: u32) -> Option<RawWc> {
            for _ in 0..ms {
                let mut wc = [RawWc::default(); 1];
                if self.poll(&mut wc) == 1 {
                    return Some(wc[0]);
                }
                kernel::time::delay::fsleep(kernel::time::Delta::from_millis(1));
            }
            None
        }

        /// `ib_req_notify_cq`.
        pub(crate) fn req_notify(&self, flags: u32) -> i32 {
            // SAFETY: CQ alive.
            unsafe { sys::rsiw_ib_req_notify_cq(self.cq, flags) }
        }

        /// The device's `resize_user_cq` op, called as uverbs would.
        pub(crate) fn resize(&self, cqe: u32) -> i32 {
            // SAFETY: CQ alive; our own op.
            unsafe { resize_user_cq(self.cq, cqe, ptr::null_mut()) }
        }
    }

    // SAFETY: `ib_poll_cq` and `ib_req_notify_cq` may be called from any
    // thread; the counters in `seen` are atomics.
    unsafe impl Send for KCq {}
    // SAFETY: as above.
    unsafe impl Sync for KCq {}

    impl Drop for KCq {
        fn drop(&mut self) {
            // SAFETY: created by `create`, not used after.
            unsafe { sys::ib_destroy_cq_user(self.cq, ptr::null_mut()) };
        }
    }
}
