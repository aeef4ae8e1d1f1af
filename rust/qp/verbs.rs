// SPDX-License-Identifier: GPL-2.0
//! The QP verbs: rsiw's implementation of the RDMA core's QP trait —
//! create within the device's limits, modify, query, destroy — and the
//! reading of a kernel consumer's send WR, which the send queue's
//! conversion (`sq.rs`) makes an entry of.

use core::sync::atomic::{AtomicU32, Ordering};

use kernel::{prelude::*, sync::Arc};

use super::{
    sq::{commit_sqe, finish_send, OpFields},
    srq::{Rqe, MAX_SGE},
    Qp, QpInit, QpLinks, Sqe, SqeKind, MAX_INLINE, MAX_IRD, MAX_ORD,
};
use crate::{
    device::{verbs::Pd, Device, Rsiw},
    engine::{
        qp::{Flags, Remote},
        wire::commit::Region,
    },
    ffi::ib::{
        abi, rsiw_create_qp_req, rsiw_create_qp_resp, rsiw_rqe, rsiw_sqe, QpAttr, QpAttrMod,
        QpCaps, QpInitAttr, QpNotifier, QpOps, RecvWrRef, ResAttrs, SendWrRef, Udata, WrOpcode,
    },
    ring::WqRing,
};

/// The `IB_QP_ACCESS_FLAGS` bits a consumer may pass: the rights, and
/// the MR-only options ULPs pass along (`RELAXED_ORDERING`).
const QP_ACCESS_KNOWN: u32 = {
    use crate::ffi::mem::pages::access::*;
    LOCAL_WRITE | REMOTE_WRITE | REMOTE_READ | REMOTE_ATOMIC | MW_BIND | RELAXED_ORDERING | FLUSH
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
        udata: Option<&mut Udata<'_>>,
    ) -> Result<(Arc<Self>, u32)> {
        // RC only, with a send CQ. A process's QP has shared rings if it
        // asks (an ABI 2 provider does); otherwise it is posted to through
        // uverbs commands, as a kernel consumer's.
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
        let (sq_ring, rq_ring) = match udata {
            Some(u)
                if u.read_create_req::<rsiw_create_qp_req>()?.flags & abi::CREATE_RINGS != 0 =>
            {
                let sq = WqRing::<rsiw_sqe>::new(u, cap.max_send_wr)?;
                let rq = if attr.has_srq {
                    None
                } else {
                    Some(WqRing::<rsiw_rqe>::new(u, cap.max_recv_wr)?)
                };
                let resp = rsiw_create_qp_resp {
                    sq: sq.info(),
                    rq: rq.as_ref().map(|r| r.info()).unwrap_or_default(),
                };
                u.write(&resp)?;
                // The rings' sizes are what the process gets.
                cap.max_send_wr = sq.entries();
                if let Some(rq) = &rq {
                    cap.max_recv_wr = rq.entries();
                }
                (Some(sq), rq)
            }
            _ => (None, None),
        };
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
            sq_ring,
            rq_ring,
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
        // Detached: nothing completes to the CQs any more. The core frees
        // the `ib_qp` once this returns, so no completion in a kernel-side
        // CQ may keep naming it (`wc->qp`, which uverbs' POLL_CQ and ULPs
        // dereference): the flushes `detach` queued go, as hardware
        // drivers clean their CQs at destroy.
        let me = this.links().wc_qp();
        this.links().send_cq().purge(me);
        if let Some(cq) = this.links().recv_cq() {
            cq.purge(me);
        }
        this.release_rings();
        dev.qps().remove(this.qpn());
        dev.dealloc_qp();
    }

    fn modify(this: &Arc<Self>, attr: &QpAttrMod) -> Result {
        // From userspace or the kernel: the same rules.
        if attr.max_rd_atomic.is_some_and(|n| usize::from(n) > MAX_ORD)
            || attr
                .max_dest_rd_atomic
                .is_some_and(|n| usize::from(n) > MAX_IRD)
        {
            return Err(EINVAL);
        }
        // Only flags the verbs define (unknown bits: EINVAL, as for MRs).
        if attr.access_flags.is_some_and(|f| f & !QP_ACCESS_KNOWN != 0) {
            return Err(EINVAL);
        }
        if let Some(state) = attr.state {
            this.modify_state(state)?;
        }
        if let Some(flags) = attr.access_flags {
            this.set_access_flags(flags);
        }
        Ok(())
    }

    fn query(&self) -> QpAttr {
        let c = self.caps();
        QpAttr {
            state: self.ib_state(),
            max_rd_atomic: MAX_ORD as u8,
            max_dest_rd_atomic: MAX_IRD as u8,
            cap: QpCaps {
                max_send_wr: c.0,
                max_recv_wr: c.1,
                max_send_sge: c.2,
                max_recv_sge: c.3,
                max_inline_data: c.4,
            },
        }
    }

    fn post_send(this: &Arc<Self>, wr: &SendWrRef<'_, Rsiw>) -> Result {
        this.post_send(convert_send(wr)?)
    }

    fn doorbell_send(this: &Arc<Self>) -> Result {
        this.doorbell_send()
    }

    fn doorbell_recv(this: &Arc<Self>) -> Result {
        this.doorbell_recv()
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
        num_sge: sges.len() as u8,
        ..Sqe::new(wr.wr_id(), flags.signaled)
    };
    let mut len: u32 = 0;
    for (d, s) in sqe.sges.iter_mut().zip(sges) {
        *d = *s;
        len = len.checked_add(s.len).ok_or(EINVAL)?;
    }
    let opcode = wr.opcode();
    if opcode == WrOpcode::Flush {
        flush_op(wr, &mut sqe, f, len)?;
        return Ok(sqe);
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
    if opcode == WrOpcode::RegMr {
        let reg = wr.reg().ok_or(EINVAL)?;
        let req = crate::mem::mr::FastReg::of(reg.mr, reg.key, reg.access);
        sqe.kind = SqeKind::RegMr {
            stag: reg.mr.mr().stag(),
            req,
        };
        sqe.num_sge = 0;
        return Ok(sqe);
    }
    let fields = OpFields {
        remote: wr.rdma().map(|r| Remote {
            stag: r.rkey,
            to: r.remote_addr,
        }),
        imm_be: wr.imm_data_be(),
        invalidate: wr.invalidate_rkey(),
        atomic: wr.atomic(),
    };
    finish_send(&mut sqe, opcode, f, len, &fields)?;
    Ok(sqe)
}

/// `IB_WR_FLUSH` as an RDMA Commit of one region. The kernel's send WR has
/// no flush fields, so rsiw takes them as rxe does for kernel WRs: the
/// `ib_rdma_wr`'s `rkey`/`remote_addr` name the first octet, the SGE
/// lengths add up to the range's length (the SGEs name no local data and
/// are not used). Placement type and selectivity have no place in the WR
/// nor on the wire: the responder's registration decides (draft 3.1).
fn flush_op(wr: &SendWrRef<'_, Rsiw>, sqe: &mut Sqe, f: Flags, len: u32) -> Result {
    if wr.flags().inline {
        return Err(EINVAL); // a flush carries no data
    }
    let r = wr.rdma().ok_or(EINVAL)?;
    commit_sqe(
        sqe,
        f,
        Region {
            stag: r.rkey,
            len,
            to: r.remote_addr,
        },
    )
}
