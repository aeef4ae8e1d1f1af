// SPDX-License-Identifier: GPL-2.0
//! The QP verbs: rsiw's implementation of the RDMA core's QP trait —
//! create within the device's limits, modify, query, destroy — and the
//! conversion of a posted send WR into a send queue entry (which verb maps
//! to which RDMAP operation).

use core::sync::atomic::{AtomicU32, Ordering};

use kernel::{prelude::*, sync::Arc};

use super::{
    srq::{Rqe, Sge, MAX_SGE},
    Qp, QpInit, QpLinks, Sqe, SqeKind, MAX_INLINE, MAX_IRD, MAX_ORD,
};
use crate::{
    device::{verbs::Pd, Device, Rsiw},
    engine::{
        qp::{Flags, Local, Remote, SendOp, SendWr},
        wire::{
            atomic::AtomicOp,
            commit::{Region, RequestRepr},
        },
    },
    ffi::ib::{
        AtomicFields, QpAttr, QpAttrMod, QpCaps, QpInitAttr, QpNotifier, QpOps, RecvWrRef, ResAttrs, SendWrRef, WrOpcode,
    },
};

/// Numbers QPs (24 bits, as the verbs' `qp_num`).
static NEXT_QPN: AtomicU32 = AtomicU32::new(1);

#[vtable]
impl QpOps<Rsiw> for Qp {
    fn create(
        dev: &Device,
        pd: &Pd,
        attr: &mut QpInitAttr,
        links: QpLinks,
        notifier: QpNotifier,
    ) -> Result<(Arc<Self>, u32)> {
        // A user QP is posted to through uverbs commands: the same QP as
        // a kernel one. RC only, with a send CQ.
        if !attr.rc || !attr.has_send_cq {
            return Err(EOPNOTSUPP);
        }
        let l = dev.limits();
        let cap = &mut attr.cap;
        // A QP may have no room in either queue (a receive-only or
        // send-only end, as qperf makes); posts to it are refused.
        if cap.max_send_wr > l.max_qp_wr
            || cap.max_recv_wr > l.max_qp_wr
            || cap.max_send_sge > l.max_sge
            || cap.max_recv_sge > l.max_sge
            || cap.max_inline_data > MAX_INLINE as u32
            || (!attr.has_srq && !attr.has_recv_cq)
        {
            return Err(EINVAL);
        }
        dev.alloc_qp()?;
        let qpn = NEXT_QPN.fetch_add(1, Ordering::Relaxed) & 0x00FF_FFFF;
        let init = QpInit {
            qpn,
            pd: pd.id(),
            max_send_wr: cap.max_send_wr,
            max_recv_wr: cap.max_recv_wr,
            max_send_sge: cap.max_send_sge.max(1),
            max_recv_sge: cap.max_recv_sge.max(1),
            max_inline: cap.max_inline_data,
            sig_all: attr.sig_all,
            links,
        };
        let qp = Qp::new(init, notifier).inspect_err(|_| dev.dealloc_qp())?;
        if let Err(e) = dev.qps().insert(qpn, qp.clone()) {
            dev.dealloc_qp();
            return Err(e);
        }
        Ok((qp, qpn))
    }

    fn links(&self) -> &QpLinks {
        Qp::links(self)
    }

    fn detach(this: &Arc<Self>) {
        Qp::detach(this);
    }

    fn destroyed(this: &Arc<Self>, dev: &Device) {
        dev.qps().remove(this.qpn());
        dev.dealloc_qp();
    }

    fn modify(this: &Arc<Self>, attr: &QpAttrMod) -> Result {
        // From userspace or the kernel: the same rules.
        if attr.max_rd_atomic.is_some_and(|n| usize::from(n) > MAX_ORD)
            || attr.max_dest_rd_atomic.is_some_and(|n| usize::from(n) > MAX_IRD)
        {
            return Err(EINVAL);
        }
        if let Some(state) = attr.state {
            this.modify_state(state)?;
        }
        Ok(())
    }

    fn query(&self) -> QpAttr {
        let c = self.caps();
        QpAttr {
            state: self.ib_state(),
            max_rd_atomic: MAX_ORD as u8,
            max_dest_rd_atomic: MAX_IRD as u8,
            cap: QpCaps { max_send_wr: c.0, max_recv_wr: c.1, max_send_sge: c.2, max_recv_sge: c.3, max_inline_data: c.4 },
        }
    }

    fn post_send(this: &Arc<Self>, wr: &SendWrRef<'_, Rsiw>) -> Result {
        this.post_send(convert_send(wr)?)
    }

    fn post_recv(this: &Arc<Self>, wr: &RecvWrRef<'_>) -> Result {
        // A QP on an SRQ receives through the SRQ.
        if this.links().has_srq() {
            return Err(EINVAL);
        }
        this.post_recv(Rqe::new(wr.wr_id(), wr.sges()?)?)
    }

    fn res_attrs(&self, out: &mut ResAttrs<'_>) -> Result {
        self.fill_res(out)
    }
}

/// Converts one posted send WR into a send queue entry.
fn convert_send(wr: &SendWrRef<'_, Rsiw>) -> Result<Sqe> {
    let flags = wr.flags();
    let mut f = Flags::NONE;
    if flags.signaled {
        f = f.with(Flags::SIGNALED);
    }
    if flags.solicited {
        f = f.with(Flags::SOLICITED);
    }
    if flags.fence {
        f = f.with(Flags::FENCE);
    }
    let sges = wr.sges()?;
    if sges.len() > MAX_SGE {
        return Err(EINVAL);
    }
    let mut sqe = Sqe {
        wr_id: wr.wr_id(),
        signaled: flags.signaled,
        kind: SqeKind::LocalInv { stag: 0 },
        sges: [Sge::default(); MAX_SGE],
        num_sge: sges.len() as u8,
        inline: [0; MAX_INLINE],
        inline_len: 0,
        masked: false,
        inv_local: None,
    };
    let mut len: u32 = 0;
    for (d, s) in sqe.sges.iter_mut().zip(sges) {
        *d = *s;
        len = len.checked_add(s.len).ok_or(EINVAL)?;
    }
    let opcode = wr.opcode();
    if opcode == WrOpcode::Flush {
        return flush_op(wr, sqe, f, len);
    }
    if flags.inline && len > 0 {
        if len as usize > MAX_INLINE {
            return Err(EINVAL);
        }
        let mut off = 0usize;
        for s in sges {
            let n = s.len as usize;
            // `off + n <= MAX_INLINE` was checked; a bad user address is
            // the caller's EFAULT.
            wr.read_inline(s, sqe.inline.get_mut(off..off + n).ok_or(EINVAL)?)?;
            off += n;
        }
        sqe.inline_len = len as u16;
        f = f.with(Flags::INLINE);
    }
    let local = Local { stag: sqe.sges[0].lkey, to: sqe.sges[0].addr, handle: 0 };
    let remote = || wr.rdma().map(|r| Remote { stag: r.rkey, to: r.remote_addr }).ok_or(EINVAL);
    let op = match opcode {
        WrOpcode::Send => SendOp::Send { invalidate: None },
        WrOpcode::SendWithInv => SendOp::Send { invalidate: wr.invalidate_rkey() },
        WrOpcode::RdmaWrite => SendOp::Write { remote: remote()? },
        WrOpcode::RdmaWriteWithImm => SendOp::WriteImm {
            remote: remote()?,
            // RFC 7306 carries 8 octets; the verbs' 32-bit immediate goes
            // first, in network order (engine `immediate::Repr::from_imm32`).
            data: imm8(wr.imm_data_be().ok_or(EINVAL)?),
        },
        WrOpcode::RdmaRead | WrOpcode::RdmaReadWithInv => {
            if sges.len() != 1 {
                return Err(EINVAL); // one sink, as on the wire
            }
            if opcode == WrOpcode::RdmaReadWithInv {
                // What rdma_rw uses on iWARP: the sink MR goes with the Read.
                // The key is the sink's own (sge[0].lkey), as for siw.
                sqe.inv_local = Some(sqe.sges[0].lkey);
            }
            SendOp::Read { remote: remote()? }
        }
        WrOpcode::RegMr => {
            let reg = wr.reg().ok_or(EINVAL)?;
            let req = crate::mem::mr::FastReg::of(reg.mr, reg.key, reg.access);
            sqe.kind = SqeKind::RegMr { stag: reg.mr.mr().stag(), req };
            sqe.num_sge = 0;
            return Ok(sqe);
        }
        WrOpcode::LocalInv => {
            sqe.kind = SqeKind::LocalInv { stag: wr.invalidate_rkey().ok_or(EINVAL)? };
            sqe.num_sge = 0;
            return Ok(sqe);
        }
        WrOpcode::AtomicFetchAdd
        | WrOpcode::AtomicCmpSwap
        | WrOpcode::MaskedAtomicFetchAdd
        | WrOpcode::MaskedAtomicCmpSwap => {
            if sges.len() != 1 || sqe.sges[0].len < 8 {
                return Err(EINVAL); // one result buffer of 8 octets
            }
            let (op, masked) = atomic_op(opcode, &wr.atomic().ok_or(EINVAL)?)?;
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
fn flush_op(wr: &SendWrRef<'_, Rsiw>, mut sqe: Sqe, f: Flags, len: u32) -> Result<Sqe> {
    if wr.flags().inline {
        return Err(EINVAL); // a flush carries no data
    }
    let r = wr.rdma().ok_or(EINVAL)?;
    let region = Region { stag: r.rkey, len, to: r.remote_addr };
    let request = RequestRepr::new(0, &[region]).ok_or(EINVAL)?;
    sqe.num_sge = 0;
    let local = Local { stag: 0, to: 0, handle: 0 };
    sqe.kind = SqeKind::Wire(SendWr { wr_id: sqe.wr_id, flags: f, op: SendOp::Commit { request }, len: 0, local });
    Ok(sqe)
}

/// An atomic WR as the RFC 7306 request (section 5.1: FetchAdd's Compare
/// fields unused, Compare Mask all ones; an unmasked CmpSwap compares and
/// swaps all 64 bits) and whether it is a masked verb. The remote address
/// must be 8-octet aligned: `EINVAL` otherwise, at post time.
fn atomic_op(opcode: WrOpcode, a: &AtomicFields) -> Result<(SendOp, bool)> {
    if a.remote_addr % 8 != 0 {
        return Err(EINVAL);
    }
    let remote = Remote { stag: a.rkey, to: a.remote_addr };
    let (op, add_swap, add_swap_mask, compare, compare_mask, masked) = match opcode {
        WrOpcode::AtomicFetchAdd => (AtomicOp::FetchAdd, a.compare_add, 0, 0, u64::MAX, false),
        WrOpcode::MaskedAtomicFetchAdd => (AtomicOp::FetchAdd, a.compare_add, a.compare_add_mask, 0, u64::MAX, true),
        WrOpcode::AtomicCmpSwap => (AtomicOp::CmpSwap, a.swap, u64::MAX, a.compare_add, u64::MAX, false),
        _ => (AtomicOp::CmpSwap, a.swap, a.swap_mask, a.compare_add, a.compare_add_mask, true),
    };
    Ok((SendOp::Atomic { op, remote, add_swap, add_swap_mask, compare, compare_mask }, masked))
}

fn imm8(imm_be: u32) -> [u8; 8] {
    let b = imm_be.to_ne_bytes(); // already big endian in memory
    [b[0], b[1], b[2], b[3], 0, 0, 0, 0]
}
