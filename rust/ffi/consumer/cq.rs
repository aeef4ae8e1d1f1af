// SPDX-License-Identifier: GPL-2.0
//! Kernel consumers' CQ verbs for the self-tests.

use core::sync::atomic::{AtomicI32, AtomicPtr, AtomicU32, Ordering};

use core::ptr;

use kernel::{ffi::c_int, prelude::*};

use crate::ffi::consumer::device::Found;
use crate::ffi::{
    ib::{
        cq::{cq_data, WcQp},
        Driver,
    },
    sys,
};

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
    /// A QP the completion handler posts one receive to, as a consumer
    /// reposting from its handler does (`KCq::repost_from_handler`); the
    /// first handler call takes it.
    repost: AtomicPtr<sys::ib_qp>,
    /// Handler calls that may be using `repost` (its guard waits for them).
    repost_busy: AtomicU32,
    /// What that post returned, plus one (0: no post yet).
    reposted: AtomicI32,
}

impl Seen {
    /// What the handler's post returned (`None`: it has not posted).
    pub(crate) fn reposted(&self) -> Option<i32> {
        match self.reposted.load(Ordering::SeqCst) {
            0 => None,
            v => Some(v - 1),
        }
    }
}

/// The `wr_id` of the receive the handler posts.
pub(crate) const REPOST_WR_ID: u64 = 0x5245_504f_5354; // "REPOST"

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

/// # Safety
///
/// Only the RDMA core calls this, as the handler this file registers,
/// with the context pointer given at registration and its other
/// pointers valid for the call.
unsafe extern "C" fn on_comp(cq: *mut sys::ib_cq, ctx: *mut c_void) {
    // SAFETY: `ctx` is the `Seen` of the `KCq` owning `cq`.
    let seen = unsafe { &*ctx.cast::<Seen>() };
    seen.comp.fetch_add(1, Ordering::Relaxed);
    let _ = cq;
    // Counted busy before the pointer is taken: a guard that clears it
    // afterwards waits for this call.
    seen.repost_busy.fetch_add(1, Ordering::SeqCst);
    let qp = seen.repost.swap(ptr::null_mut(), Ordering::SeqCst);
    if !qp.is_null() {
        let mut wr = sys::ib_recv_wr::default();
        wr.__bindgen_anon_1.wr_id = REPOST_WR_ID;
        let mut bad: *const sys::ib_recv_wr = ptr::null();
        // SAFETY: the `Repost` guard that set `qp` borrows its `KQp` and,
        // when dropped, waits for this call (`repost_busy`) before the
        // borrow ends; a zero-length receive has no SGE to read.
        let rc = unsafe { sys::rsiw_ib_post_recv(qp, &wr, &mut bad) };
        seen.reposted.store(rc + 1, Ordering::SeqCst);
    }
    seen.repost_busy.fetch_sub(1, Ordering::SeqCst);
}

/// While alive, the CQ's completion handler posts one zero-length receive
/// (`REPOST_WR_ID`) to a QP from inside its first call
/// ([`KCq::repost_from_handler`]).
pub(crate) struct Repost<'a> {
    seen: &'a Seen,
    _qp: core::marker::PhantomData<&'a super::qp::KQp>,
}

impl Drop for Repost<'_> {
    fn drop(&mut self) {
        self.seen.repost.store(ptr::null_mut(), Ordering::SeqCst);
        while self.seen.repost_busy.load(Ordering::SeqCst) != 0 {
            core::hint::spin_loop();
        }
    }
}

/// # Safety
///
/// Only the RDMA core calls this, as the handler this file registers,
/// with the context pointer given at registration and its other
/// pointers valid for the call.
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
        let attr = sys::ib_cq_init_attr {
            cqe,
            ..Default::default()
        };
        let ctx = ptr::from_ref::<Seen>(&seen).cast_mut().cast();
        // SAFETY: device held; handlers and context outlive the CQ
        // (destroyed in drop before `seen`).
        let cq = unsafe {
            sys::__ib_create_cq(
                dev.raw(),
                Some(on_comp),
                Some(on_event),
                ctx,
                &attr,
                c"rsiw_kunit".as_char_ptr(),
            )
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
            sys::__ib_alloc_cq(
                dev.raw(),
                ptr::null_mut(),
                cqe,
                0,
                sys::ib_poll_context_IB_POLL_DIRECT,
                c"rsiw_kunit".as_char_ptr(),
            )
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

    /// The driver's CQ behind it (a `D` device's CQ).
    pub(crate) fn cq<D: Driver>(&self) -> &D::Cq {
        // SAFETY: alive until drop, made on a `D` device.
        unsafe { cq_data::<D>(self.cq) }
    }

    pub(crate) fn wc_qp(&self) -> WcQp {
        // Any recognisable pointer will do: it is only handed back.
        WcQp::from_raw(self.cq.cast())
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

    /// Has the completion handler post one receive to `qp` from inside
    /// its next call, as a consumer reposting from its handler does;
    /// until the guard is dropped.
    pub(crate) fn repost_from_handler<'a>(&'a self, qp: &'a super::qp::KQp) -> Repost<'a> {
        self.seen.repost.store(qp.raw(), Ordering::SeqCst);
        Repost {
            seen: &self.seen,
            _qp: core::marker::PhantomData,
        }
    }

    /// `ib_req_notify_cq`.
    pub(crate) fn req_notify(&self, flags: u32) -> i32 {
        // SAFETY: CQ alive.
        unsafe { sys::rsiw_ib_req_notify_cq(self.cq, flags) }
    }

    /// The device's `resize_user_cq` op, called as uverbs would.
    pub(crate) fn resize(&self, cqe: u32) -> i32 {
        // SAFETY: CQ alive; our own op.
        unsafe {
            match (*(*self.cq).device).ops.resize_user_cq {
                Some(f) => f(self.cq, cqe, ptr::null_mut()),
                None => EOPNOTSUPP.to_errno(),
            }
        }
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
