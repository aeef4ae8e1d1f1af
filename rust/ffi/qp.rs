// SPDX-License-Identifier: GPL-2.0
//! Queue pairs at the C boundary: the QP entry points of `ib_device_ops`,
//! work request conversion (`ib_send_wr` chains), the QP's links to its
//! CQs, SRQ and device, and the iw_cm's QP hooks.

use core::{
    ptr,
    sync::atomic::{AtomicU32, Ordering},
};

use kernel::{
    error::from_result,
    ffi::c_int,
    prelude::*,
    sync::Arc,
    uaccess::{UserPtr, UserSlice},
};

use super::{
    cq::{IbCq, WcQp},
    device::IbDevice,
    object::CoreObj,
    srq::{post_recv_chain, IbSrq},
    sys,
};
use crate::{
    cq::Cq,
    device::Device,
    engine::{
        qp::{Flags, Local, Remote, SendOp, SendWr},
        wire::atomic::AtomicOp,
    },
    qp::{IbState, Qp, QpInit, Sqe, SqeKind, MAX_INLINE, MAX_IRD, MAX_ORD},
    srq::{Sge, Srq, MAX_SGE},
};

/// The driver data of an `ib_qp`.
pub(crate) struct QpData {
    qp: Arc<Qp>,
    /// References the iw_cm holds (`iw_add_ref`/`iw_rem_ref`).
    cm_refs: AtomicU32,
}

type QpObj = CoreObj<sys::ib_qp, QpData>;
type PdObj = CoreObj<sys::ib_pd, crate::verbs::Pd>;

pub(crate) const SIZE: usize = QpObj::SIZE;

/// What a QP is attached to, as C pointers the core keeps alive for the
/// QP's lifetime (it holds references on the CQs, SRQ and PD while the QP
/// exists and destroys QPs before their device).
///
/// # Invariants
///
/// `qp` is the `ib_qp` whose data holds the QP (set once it exists);
/// `send_cq`/`recv_cq` are rsiw CQs, `srq` null or an rsiw SRQ, `dev` the
/// device; all alive while the QP is not destroyed. The QP only uses its
/// links before `destroy_qp` returns (it detaches in `destroy_qp`).
pub(crate) struct QpLinks {
    qp: *mut sys::ib_qp,
    send_cq: *mut sys::ib_cq,
    recv_cq: *mut sys::ib_cq,
    srq: *mut sys::ib_srq,
    dev: *mut sys::ib_device,
}

// SAFETY: the pointed-to objects may be used from any thread (their Rust
// parts are `Sync`); the pointers do not change after creation.
unsafe impl Send for QpLinks {}
// SAFETY: as above.
unsafe impl Sync for QpLinks {}

impl QpLinks {
    pub(crate) fn has_srq(&self) -> bool {
        !self.srq.is_null()
    }

    pub(crate) fn srq(&self) -> Option<&Srq> {
        // SAFETY: by the invariant, an rsiw SRQ alive while the QP is.
        (!self.srq.is_null()).then(|| unsafe { IbSrq::from_raw(self.srq) }.srq())
    }

    pub(crate) fn send_cq(&self) -> &Cq {
        // SAFETY: by the invariant, an rsiw CQ alive while the QP is.
        unsafe { IbCq::from_raw(self.send_cq) }.cq()
    }

    pub(crate) fn recv_cq(&self) -> Option<&Cq> {
        // SAFETY: as for `send_cq`.
        (!self.recv_cq.is_null()).then(|| unsafe { IbCq::from_raw(self.recv_cq) }.cq())
    }

    pub(crate) fn device(&self) -> &Device {
        // SAFETY: the device outlives its QPs.
        unsafe { IbDevice::from_raw(self.dev) }.data()
    }

    pub(crate) fn wc_qp(&self) -> WcQp {
        WcQp::from_raw(self.qp)
    }

    /// A new reference to the QP (for socket callbacks, which only have
    /// `&Qp`); `None` before the `ib_qp` is set up.
    pub(crate) fn qp_arc(&self) -> Option<Arc<Qp>> {
        // SAFETY: by the invariant the `ib_qp`'s data holds the QP while
        // the QP is in use.
        (!self.qp.is_null()).then(|| unsafe { QpObj::data(self.qp) }.qp.clone())
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
        let qp = self.0;
        // SAFETY: by the invariant `qp` is alive; the handler is the
        // consumer's, called without rsiw locks held.
        unsafe {
            if let Some(handler) = (*qp).event_handler {
                let mut ev = sys::ib_event::default();
                ev.device = (*qp).device;
                ev.element.qp = qp;
                ev.event = sys::ib_event_type_IB_EVENT_QP_FATAL;
                handler(&mut ev, (*qp).qp_context);
            }
        }
    }
}

/// QP numbers → QPs, for `iw_get_qp`.
static NEXT_QPN: AtomicU32 = AtomicU32::new(1);

pub(super) unsafe extern "C" fn create_qp(
    ibqp: *mut sys::ib_qp,
    attr: *mut sys::ib_qp_init_attr,
    _udata: *mut sys::ib_udata,
) -> c_int {
    from_result(|| {
        // SAFETY: the core passes a QP whose device, PD and attributes are
        // valid for the call; the CQs and SRQ named are the consumer's.
        let (dev, attr) = unsafe { (IbDevice::from_raw((*ibqp).device), &mut *attr) };
        // A user QP (non-null `udata`) is posted to through uverbs
        // commands (`USER_DATA_PATH_CMDS`): the same QP as a kernel one.
        if attr.qp_type != sys::ib_qp_type_IB_QPT_RC || attr.send_cq.is_null() {
            return Err(EOPNOTSUPP);
        }
        let l = *dev.data().limits();
        let cap = &mut attr.cap;
        // A QP may have no room in either queue (a receive-only or
        // send-only end, as qperf makes); posts to it are refused.
        if cap.max_send_wr > l.max_qp_wr
            || cap.max_recv_wr > l.max_qp_wr
            || cap.max_send_sge > l.max_sge
            || cap.max_recv_sge > l.max_sge
            || cap.max_inline_data > MAX_INLINE as u32
            || (attr.srq.is_null() && attr.recv_cq.is_null())
        {
            return Err(EINVAL);
        }
        // SAFETY: the core set `ibqp->pd` to one of our live PDs.
        let pd = unsafe { PdObj::data((*ibqp).pd) }.id();
        dev.data().alloc_qp()?;
        let qpn = NEXT_QPN.fetch_add(1, Ordering::Relaxed) & 0x00FF_FFFF;
        let links = QpLinks {
            qp: ibqp,
            send_cq: attr.send_cq,
            recv_cq: attr.recv_cq,
            srq: attr.srq,
            dev: dev.as_raw_ptr(),
        };
        let init = QpInit {
            qpn,
            pd,
            max_send_wr: cap.max_send_wr,
            max_recv_wr: cap.max_recv_wr,
            max_send_sge: cap.max_send_sge.max(1),
            max_recv_sge: cap.max_recv_sge.max(1),
            max_inline: cap.max_inline_data,
            sig_all: attr.sq_sig_type == sys::ib_sig_type_IB_SIGNAL_ALL_WR,
            links,
        };
        let qp = Qp::new(init, QpNotifier(ibqp)).inspect_err(|_| dev.data().dealloc_qp())?;
        if let Err(e) = dev.data().qps().insert(qpn, qp.clone()) {
            dev.data().dealloc_qp();
            return Err(e);
        }
        // SAFETY: the core allocated `ibqp` with `size_ib_qp` = `SIZE`.
        unsafe {
            QpObj::init(ibqp, QpData { qp: qp.clone(), cm_refs: AtomicU32::new(0) });
            (*ibqp).qp_num = qpn;
        }
        // Report what we granted (no hidden rounding).
        cap.max_inline_data = cap.max_inline_data.min(MAX_INLINE as u32);
        Ok(0)
    })
}

pub(super) unsafe extern "C" fn destroy_qp(ibqp: *mut sys::ib_qp, _udata: *mut sys::ib_udata) -> c_int {
    // SAFETY: one of our QPs; the core calls this once, in process context.
    let (dev, data) = unsafe { (IbDevice::from_raw((*ibqp).device), QpObj::data(ibqp)) };
    let qp = data.qp.clone();
    qp.detach();
    // The iw_cm drops its references when it handles the CLOSE the detach
    // above delivered (on its own workqueue). The core frees the QP when
    // this returns, so wait for them however long it takes (as siw does):
    // an `iw_rem_ref` after that would touch freed memory.
    let mut waited_ms = 0u32;
    while data.cm_refs.load(Ordering::Acquire) != 0 {
        kernel::time::delay::fsleep(kernel::time::Delta::from_millis(1));
        waited_ms = waited_ms.wrapping_add(1);
        if waited_ms % 10_000 == 0 {
            pr_warn!("destroy_qp: still waiting for the iw_cm to release qp {}\n", qp.qpn());
        }
    }
    dev.data().qps().remove(qp.qpn());
    // SAFETY: as above; nothing uses the data after this.
    unsafe { QpObj::drop_data(ibqp) };
    dev.data().dealloc_qp();
    drop(qp);
    0
}

fn ib_state(s: sys::ib_qp_state) -> Result<IbState> {
    Ok(match s {
        sys::ib_qp_state_IB_QPS_RESET => IbState::Reset,
        sys::ib_qp_state_IB_QPS_INIT => IbState::Init,
        sys::ib_qp_state_IB_QPS_RTR => IbState::Rtr,
        sys::ib_qp_state_IB_QPS_RTS => IbState::Rts,
        sys::ib_qp_state_IB_QPS_SQD => IbState::Sqd,
        sys::ib_qp_state_IB_QPS_SQE => IbState::Sqe,
        sys::ib_qp_state_IB_QPS_ERR => IbState::Err,
        _ => return Err(EINVAL),
    })
}

fn c_state(s: IbState) -> sys::ib_qp_state {
    match s {
        IbState::Reset => sys::ib_qp_state_IB_QPS_RESET,
        IbState::Init => sys::ib_qp_state_IB_QPS_INIT,
        IbState::Rtr => sys::ib_qp_state_IB_QPS_RTR,
        IbState::Rts => sys::ib_qp_state_IB_QPS_RTS,
        IbState::Sqd => sys::ib_qp_state_IB_QPS_SQD,
        IbState::Sqe => sys::ib_qp_state_IB_QPS_SQE,
        IbState::Err => sys::ib_qp_state_IB_QPS_ERR,
    }
}

pub(super) unsafe extern "C" fn modify_qp(
    ibqp: *mut sys::ib_qp,
    attr: *mut sys::ib_qp_attr,
    mask: c_int,
    _udata: *mut sys::ib_udata,
) -> c_int {
    from_result(|| {
        // From userspace (`udata`) or the kernel: the same rules.
        // SAFETY: one of our QPs; `attr` valid for the call.
        let (data, attr) = unsafe { (QpObj::data(ibqp), &*attr) };
        let mask = mask as u32;
        if mask & sys::ib_qp_attr_mask_IB_QP_MAX_QP_RD_ATOMIC != 0
            && attr.max_rd_atomic as usize > MAX_ORD
        {
            return Err(EINVAL);
        }
        if mask & sys::ib_qp_attr_mask_IB_QP_MAX_DEST_RD_ATOMIC != 0
            && attr.max_dest_rd_atomic as usize > MAX_IRD
        {
            return Err(EINVAL);
        }
        if mask & sys::ib_qp_attr_mask_IB_QP_STATE != 0 {
            data.qp.modify_state(ib_state(attr.qp_state)?)?;
        }
        Ok(0)
    })
}

pub(super) unsafe extern "C" fn query_qp(
    ibqp: *mut sys::ib_qp,
    attr: *mut sys::ib_qp_attr,
    _mask: c_int,
    init: *mut sys::ib_qp_init_attr,
) -> c_int {
    // SAFETY: one of our QPs; `attr`/`init` valid for writes for the call.
    unsafe {
        let data = QpObj::data(ibqp);
        let q = &data.qp;
        ptr::write_bytes(attr, 0, 1);
        ptr::write_bytes(init, 0, 1);
        let a = &mut *attr;
        a.qp_state = c_state(q.ib_state());
        a.cur_qp_state = a.qp_state;
        a.max_rd_atomic = MAX_ORD as u8;
        a.max_dest_rd_atomic = MAX_IRD as u8;
        let caps = q.caps();
        a.cap.max_send_wr = caps.0;
        a.cap.max_recv_wr = caps.1;
        a.cap.max_send_sge = caps.2;
        a.cap.max_recv_sge = caps.3;
        a.cap.max_inline_data = caps.4;
        let i = &mut *init;
        i.cap = a.cap;
        i.qp_type = sys::ib_qp_type_IB_QPT_RC;
        i.send_cq = (*ibqp).send_cq;
        i.recv_cq = (*ibqp).recv_cq;
        i.srq = (*ibqp).srq;
    }
    0
}

/// Converts one `ib_send_wr` (and the larger WR it heads, by opcode).
///
/// # Safety
///
/// `wr` must be a valid WR as the core passes it to `post_send`, with the
/// containing WR type its opcode implies. For a kernel QP (`user`
/// false), its SGE addresses of inline data must be readable kernel memory
/// (the `IB_SEND_INLINE` contract); a user QP's are the caller's user
/// addresses (uverbs `POST_SEND`, in the caller's context).
unsafe fn convert_send(wr: *const sys::ib_send_wr, user: bool) -> Result<Sqe> {
    // SAFETY: per the contract.
    let w = unsafe { &*wr };
    let flags = w.send_flags;
    let mut f = Flags::NONE;
    if flags & sys::ib_send_flags_IB_SEND_SIGNALED != 0 {
        f = f.with(Flags::SIGNALED);
    }
    if flags & sys::ib_send_flags_IB_SEND_SOLICITED != 0 {
        f = f.with(Flags::SOLICITED);
    }
    if flags & sys::ib_send_flags_IB_SEND_FENCE != 0 {
        f = f.with(Flags::FENCE);
    }
    let num_sge = usize::try_from(w.num_sge).map_err(|_| EINVAL)?;
    if num_sge > MAX_SGE {
        return Err(EINVAL);
    }
    let mut sqe = Sqe {
        // SAFETY: reading the union as the integer both members are.
        wr_id: unsafe { w.__bindgen_anon_1.wr_id },
        signaled: f.contains(Flags::SIGNALED),
        kind: SqeKind::LocalInv { stag: 0 },
        sges: [Sge::default(); MAX_SGE],
        num_sge: num_sge as u8,
        inline: [0; MAX_INLINE],
        inline_len: 0,
        masked: false,
        inv_local: None,
    };
    let mut len: u32 = 0;
    for i in 0..num_sge {
        // SAFETY: `sg_list` has `num_sge` entries.
        let s = unsafe { &*w.sg_list.add(i) };
        sqe.sges[i] = Sge { addr: s.addr, len: s.length, lkey: s.lkey };
        len = len.checked_add(s.length).ok_or(EINVAL)?;
    }
    if w.opcode == sys::ib_wr_opcode_IB_WR_FLUSH {
        // SAFETY: the core hands FLUSH over as an `ib_rdma_wr` (rsiw's
        // convention, see `flush_op`).
        return flush_op(unsafe { &*wr.cast::<sys::ib_rdma_wr>() }, sqe, f, len);
    }
    if flags & sys::ib_send_flags_IB_SEND_INLINE != 0 && len > 0 {
        if len as usize > MAX_INLINE {
            return Err(EINVAL);
        }
        let mut off = 0usize;
        for s in &sqe.sges[..num_sge] {
            let n = s.len as usize;
            if user {
                // `off + n <= MAX_INLINE` was checked; a bad address is
                // the caller's EFAULT.
                let dst = sqe.inline.get_mut(off..off + n).ok_or(EINVAL)?;
                let src = UserSlice::new(UserPtr::from_addr(s.addr as usize), n);
                src.reader().read_slice(dst)?;
            } else {
                // SAFETY: inline SGEs name readable kernel memory of `len`
                // bytes (contract); `off + n <= MAX_INLINE` was checked.
                unsafe { ptr::copy_nonoverlapping(s.addr as usize as *const u8, sqe.inline.as_mut_ptr().add(off), n) };
            }
            off += n;
        }
        sqe.inline_len = len as u16;
        f = f.with(Flags::INLINE);
    }
    let local = Local { stag: sqe.sges[0].lkey, to: sqe.sges[0].addr, handle: 0 };
    // SAFETY (for the container casts below): the core hands us the WR
    // type that matches the opcode (`rdma_wr`, `atomic_wr`, `reg_wr`).
    let rdma = || unsafe { &*wr.cast::<sys::ib_rdma_wr>() };
    let op = match w.opcode {
        sys::ib_wr_opcode_IB_WR_SEND => SendOp::Send { invalidate: None },
        sys::ib_wr_opcode_IB_WR_SEND_WITH_INV => SendOp::Send {
            // SAFETY: the union member for SEND_WITH_INV.
            invalidate: Some(unsafe { w.ex.invalidate_rkey }),
        },
        sys::ib_wr_opcode_IB_WR_RDMA_WRITE => {
            SendOp::Write { remote: Remote { stag: rdma().rkey, to: rdma().remote_addr } }
        }
        sys::ib_wr_opcode_IB_WR_RDMA_WRITE_WITH_IMM => SendOp::WriteImm {
            remote: Remote { stag: rdma().rkey, to: rdma().remote_addr },
            // RFC 7306 carries 8 octets; the verbs' 32-bit immediate goes
            // first, in network order (engine `immediate::Repr::from_imm32`).
            // SAFETY: the union member for WITH_IMM opcodes (big endian).
            data: imm8(unsafe { w.ex.imm_data }),
        },
        sys::ib_wr_opcode_IB_WR_RDMA_READ | sys::ib_wr_opcode_IB_WR_RDMA_READ_WITH_INV => {
            if num_sge != 1 {
                return Err(EINVAL); // one sink, as on the wire
            }
            if w.opcode == sys::ib_wr_opcode_IB_WR_RDMA_READ_WITH_INV {
                // What rdma_rw uses on iWARP: the sink MR goes with the Read.
                // The key is the sink's own (sge[0].lkey), as for siw.
                sqe.inv_local = Some(sqe.sges[0].lkey);
            }
            SendOp::Read { remote: Remote { stag: rdma().rkey, to: rdma().remote_addr } }
        }
        sys::ib_wr_opcode_IB_WR_REG_MR => {
            // SAFETY: the opcode says this is an `ib_reg_wr`.
            let reg = unsafe { &*wr.cast::<sys::ib_reg_wr>() };
            // SAFETY: the MR is one of ours, alive while the WR is posted.
            let ibmr = unsafe { super::mr::IbMr::from_raw(reg.mr) };
            sqe.kind = SqeKind::RegMr { stag: ibmr.mr().stag(), req: ibmr.fast_reg(reg.key, reg.access as u32) };
            sqe.num_sge = 0;
            return Ok(sqe);
        }
        sys::ib_wr_opcode_IB_WR_LOCAL_INV => {
            // SAFETY: the union member for LOCAL_INV.
            sqe.kind = SqeKind::LocalInv { stag: unsafe { w.ex.invalidate_rkey } };
            sqe.num_sge = 0;
            return Ok(sqe);
        }
        sys::ib_wr_opcode_IB_WR_ATOMIC_FETCH_AND_ADD
        | sys::ib_wr_opcode_IB_WR_ATOMIC_CMP_AND_SWP
        | sys::ib_wr_opcode_IB_WR_MASKED_ATOMIC_FETCH_AND_ADD
        | sys::ib_wr_opcode_IB_WR_MASKED_ATOMIC_CMP_AND_SWP => {
            if num_sge != 1 || sqe.sges[0].len < 8 {
                return Err(EINVAL); // one result buffer of 8 octets
            }
            // SAFETY: the opcode says this is an `ib_atomic_wr`.
            let (op, masked) = atomic_op(w.opcode, unsafe { &*wr.cast::<sys::ib_atomic_wr>() })?;
            sqe.masked = masked;
            len = 8;
            op
        }
        // A Send with Immediate has no iWARP wire form (RFC 7306 has Write
        // with Immediate only): refused, see Documentation/extensions.md.
        _ => return Err(EOPNOTSUPP),
    };
    sqe.kind = SqeKind::Wire(SendWr { wr_id: sqe.wr_id, flags: f, op, len, local });
    Ok(sqe)
}

/// `IB_WR_FLUSH` as an RDMA Commit of one region. The kernel's send WR has
/// no flush fields, so rsiw takes them as rxe does for kernel WRs: the
/// `ib_rdma_wr`'s `rkey`/`remote_addr` name the first octet, the SGE
/// lengths add up to the range's length (the SGEs name no local data and
/// are not used). Placement type and selectivity have no place in the WR
/// nor on the wire: the responder's registration decides (draft 3.1).
fn flush_op(rdma: &sys::ib_rdma_wr, mut sqe: Sqe, f: Flags, len: u32) -> Result<Sqe> {
    if rdma.wr.send_flags & sys::ib_send_flags_IB_SEND_INLINE != 0 {
        return Err(EINVAL); // a flush carries no data
    }
    let region = crate::engine::wire::commit::Region { stag: rdma.rkey, len, to: rdma.remote_addr };
    let request = crate::engine::wire::commit::RequestRepr::new(0, &[region]).ok_or(EINVAL)?;
    sqe.num_sge = 0;
    let local = Local { stag: 0, to: 0, handle: 0 };
    sqe.kind = SqeKind::Wire(SendWr { wr_id: sqe.wr_id, flags: f, op: SendOp::Commit { request }, len: 0, local });
    Ok(sqe)
}

/// An atomic WR as the RFC 7306 request (section 5.1: FetchAdd's Compare
/// fields unused, Compare Mask all ones; an unmasked CmpSwap compares and
/// swaps all 64 bits) and whether it is a masked verb. The remote address
/// must be 8-octet aligned: `EINVAL` otherwise, at post time.
fn atomic_op(opcode: u32, a: &sys::ib_atomic_wr) -> Result<(SendOp, bool)> {
    if a.remote_addr % 8 != 0 {
        return Err(EINVAL);
    }
    let remote = Remote { stag: a.rkey, to: a.remote_addr };
    let (op, add_swap, add_swap_mask, compare, compare_mask, masked) = match opcode {
        sys::ib_wr_opcode_IB_WR_ATOMIC_FETCH_AND_ADD => (AtomicOp::FetchAdd, a.compare_add, 0, 0, u64::MAX, false),
        sys::ib_wr_opcode_IB_WR_MASKED_ATOMIC_FETCH_AND_ADD => {
            (AtomicOp::FetchAdd, a.compare_add, a.compare_add_mask, 0, u64::MAX, true)
        }
        sys::ib_wr_opcode_IB_WR_ATOMIC_CMP_AND_SWP => {
            (AtomicOp::CmpSwap, a.swap, u64::MAX, a.compare_add, u64::MAX, false)
        }
        _ => (AtomicOp::CmpSwap, a.swap, a.swap_mask, a.compare_add, a.compare_add_mask, true),
    };
    Ok((SendOp::Atomic { op, remote, add_swap, add_swap_mask, compare, compare_mask }, masked))
}

fn imm8(imm_be: u32) -> [u8; 8] {
    let b = imm_be.to_ne_bytes(); // already big endian in memory
    [b[0], b[1], b[2], b[3], 0, 0, 0, 0]
}

pub(super) unsafe extern "C" fn post_send(
    ibqp: *mut sys::ib_qp,
    mut wr: *const sys::ib_send_wr,
    bad_wr: *mut *const sys::ib_send_wr,
) -> c_int {
    // SAFETY: one of our QPs; `uobject` is set by uverbs for user QPs.
    let (qp, user) = unsafe { (&QpObj::data(ibqp).qp, !(*ibqp).uobject.is_null()) };
    while !wr.is_null() {
        // SAFETY: `wr` is a valid WR of the chain the core passed (uverbs
        // for a user QP: inline SGEs name the caller's memory).
        let res = unsafe { convert_send(wr, user) }.and_then(|sqe| qp.post_send(sqe));
        if let Err(e) = res {
            if !bad_wr.is_null() {
                // SAFETY: `bad_wr` is valid for writes when non-null.
                unsafe { *bad_wr = wr };
            }
            return e.to_errno();
        }
        // SAFETY: as above.
        wr = unsafe { (*wr).next };
    }
    0
}

pub(super) unsafe extern "C" fn post_recv(
    ibqp: *mut sys::ib_qp,
    wr: *const sys::ib_recv_wr,
    bad_wr: *mut *const sys::ib_recv_wr,
) -> c_int {
    // SAFETY: one of our QPs; the chain and `bad_wr` as the core passes them.
    unsafe {
        let qp = &QpObj::data(ibqp).qp;
        if !(*ibqp).srq.is_null() {
            return EINVAL.to_errno();
        }
        post_recv_chain(wr, bad_wr, |rqe| qp.post_recv(rqe))
    }
}

pub(super) unsafe extern "C" fn iw_add_ref(ibqp: *mut sys::ib_qp) {
    // SAFETY: the iw_cm passes a live QP of ours.
    unsafe { QpObj::data(ibqp) }.cm_refs.fetch_add(1, Ordering::AcqRel);
}

pub(super) unsafe extern "C" fn iw_rem_ref(ibqp: *mut sys::ib_qp) {
    // SAFETY: as above; `destroy_qp` waits for these references.
    let refs = unsafe { &QpObj::data(ibqp).cm_refs };
    let _ = refs.fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| n.checked_sub(1));
}

pub(super) unsafe extern "C" fn iw_get_qp(ibdev: *mut sys::ib_device, qpn: c_int) -> *mut sys::ib_qp {
    // SAFETY: one of our devices.
    let dev = unsafe { IbDevice::from_raw(ibdev) };
    u32::try_from(qpn)
        .ok()
        .and_then(|n| dev.data().qps().get(n))
        .map_or(ptr::null_mut(), |qp| qp.links().qp)
}

/// The QP of an `ib_qp` (for the CM).
///
/// # Safety
///
/// `ibqp` must be a live QP of rsiw.
pub(crate) unsafe fn qp_of(ibqp: *mut sys::ib_qp) -> Arc<Qp> {
    // SAFETY: per the contract.
    unsafe { QpObj::data(ibqp) }.qp.clone()
}

/// Kernel consumers' view of QPs, for the self-tests: QPs created through
/// the core (`ib_create_qp_kernel`) and driven through the ops table as
/// `ib_post_send`/`ib_post_recv`/`ib_modify_qp` do.
#[cfg(CONFIG_KUNIT = "y")]
pub(crate) mod testing {
    use super::*;
    use crate::ffi::{cq::testing::KCq, mr::testing::KPd, socket::TcpSocket};
    use crate::qp::StreamParams;

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
            Self { addr: buf.as_ptr() as u64, len: buf.len() as u32, lkey }
        }

        /// A segment the device writes: the address comes from a mutable
        /// borrow, so the compiler never assumes the buffer unchanged.
        pub(crate) fn of_mut(buf: &mut [u8], lkey: u32) -> Self {
            Self { addr: buf.as_mut_ptr() as u64, len: buf.len() as u32, lkey }
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

        fn create_with(
            pd: &KPd,
            scq: &KCq,
            rcq: &KCq,
            wr: u32,
            handler: Option<unsafe extern "C" fn(*mut sys::ib_event, *mut c_void)>,
        ) -> Result<Self> {
            let mut attr = sys::ib_qp_init_attr::default();
            attr.event_handler = handler;
            attr.send_cq = scq.raw();
            attr.recv_cq = rcq.raw();
            attr.cap.max_send_wr = wr;
            attr.cap.max_recv_wr = wr;
            attr.cap.max_send_sge = 2;
            attr.cap.max_recv_sge = 2;
            attr.cap.max_inline_data = 64;
            attr.qp_type = sys::ib_qp_type_IB_QPT_RC;
            attr.sq_sig_type = sys::ib_sig_type_IB_SIGNAL_REQ_WR;
            // SAFETY: PD and CQs are live; `attr` valid for the call.
            let qp = unsafe { sys::ib_create_qp_kernel(pd.raw(), &mut attr, c"rsiw_kunit".as_ptr().cast()) };
            if qp.is_null() || (qp as usize) > usize::MAX - 4095 {
                return Err(if qp.is_null() { ENOMEM } else { Error::from_errno(qp as isize as c_int) });
            }
            Ok(Self(qp))
        }

        pub(crate) fn raw(&self) -> *mut sys::ib_qp {
            self.0
        }

        pub(crate) fn qp(&self) -> Arc<Qp> {
            // SAFETY: alive until drop.
            unsafe { qp_of(self.0) }
        }

        pub(crate) fn modify(&self, state: IbState) -> Result {
            let mut attr = sys::ib_qp_attr::default();
            attr.qp_state = c_state(state);
            // SAFETY: alive; the ops entry as `ib_modify_qp` calls it.
            to_result(unsafe {
                modify_qp(self.0, &mut attr, sys::ib_qp_attr_mask_IB_QP_STATE as c_int, ptr::null_mut())
            })
        }

        pub(crate) fn attach(&self, sock: TcpSocket, params: StreamParams) -> Result {
            self.qp().attach(sock, params, &[])
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
            let flags = if signaled { sys::ib_send_flags_IB_SEND_SIGNALED } else { 0 };
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
                *s = sys::ib_sge { addr: g.addr, length: g.len, lkey: g.lkey };
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
        pub(crate) fn post_write_imm(&self, wr_id: u64, seg: Seg, rkey: u32, addr: u64, imm: u32) -> Result {
            let mut sge = sys::ib_sge { addr: seg.addr, length: seg.len, lkey: seg.lkey };
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
                *s = sys::ib_sge { addr: g.addr, length: g.len, lkey: g.lkey };
            }
            let mut wr = sys::ib_rdma_wr::default();
            wr.wr.__bindgen_anon_1.wr_id = wr_id;
            wr.wr.sg_list = sges.as_mut_ptr();
            wr.wr.num_sge = segs.len().min(2) as c_int;
            wr.wr.opcode = WR_WRITE_IMM;
            wr.wr.send_flags = sys::ib_send_flags_IB_SEND_SIGNALED
                | if solicited { sys::ib_send_flags_IB_SEND_SOLICITED } else { 0 };
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
                *s = sys::ib_sge { addr: g.addr, length: g.len, lkey: g.lkey };
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
            let mut sge = sys::ib_sge { addr: seg.addr, length: seg.len, lkey: seg.lkey };
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
        other: AtomicU32,
    }

    pub(crate) static QP_EVENTS: QpEventLog = QpEventLog { fatal: AtomicU32::new(0), other: AtomicU32::new(0) };

    impl QpEventLog {
        fn reset(&self) {
            self.fatal.store(0, Ordering::Relaxed);
            self.other.store(0, Ordering::Relaxed);
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

    unsafe extern "C" fn count_qp_event(ev: *mut sys::ib_event, _ctx: *mut c_void) {
        // SAFETY: the core passes an event valid for the call.
        let kind = unsafe { (*ev).event };
        let counter = if kind == sys::ib_event_type_IB_EVENT_QP_FATAL { &QP_EVENTS.fatal } else { &QP_EVENTS.other };
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
}
