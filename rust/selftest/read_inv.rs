// SPDX-License-Identifier: GPL-2.0
//! RDMA Read with Local Invalidate as the kernel's `rdma_rw` posts it on
//! iWARP, the path nvmet-rdma reads a host's write data by: a pool of
//! fast-register sinks, each use a chain of `IB_WR_REG_MR` with the next
//! key and `IB_WR_RDMA_READ_WITH_INV` into it, every WR unsignaled but
//! the chain's last, more Reads at once than ORD credits, responses of
//! many FPDUs, and the same MRs registered again as soon as the signaled
//! Read completes. Every sink must be invalidated once its response is
//! placed, signaled or not, or its next registration fails and the
//! Read after it meets an Invalid STag. And the QP's own remote rights
//! (`IB_QP_ACCESS_FLAGS`) bound what the peer may do whatever an MR
//! grants.

use kernel::prelude::*;

#[cfg(rsiw_kunit)]
#[kunit_tests(rsiw_read_inv)]
mod tests {
    use kernel::prelude::*;

    use crate::{ffi::consumer::rdma_cm::*, selftest::cm::harness::*};

    /// Sinks in the pool (three times the ORD credits the pair has).
    const MRS: usize = 12;
    /// One sink: 17 pages and a bit, many FPDUs per response.
    const LEN: usize = 16 * 4096 + 4196;
    const ROUNDS: u8 = 5;

    #[test]
    fn pooled_sinks_are_invalidated_by_every_read() -> Result {
        let _devs = Devices::pair()?;
        let p = CmPair::connect(&PairOpts {
            wr: 4 * MRS as u32,
            ..PairOpts::v4()
        })?;
        let (a, b) = (&p.client, &p.server);
        let mut bufs = KVec::with_capacity(MRS, GFP_KERNEL)?;
        let mut mrs = KVec::with_capacity(MRS, GFP_KERNEL)?;
        for _ in 0..MRS {
            let mut buf = KVec::from_elem(0u8, LEN, GFP_KERNEL)?;
            mrs.push(FrMr::map(&a.pd, &mut buf)?, GFP_KERNEL)?;
            bufs.push(buf, GFP_KERNEL)?;
        }
        for round in 0..ROUNDS {
            // What the "host" holds this round, at b (its global rkey).
            let src = pattern(0x40 ^ round, MRS * LEN)?;
            let src_addr = src.as_ptr() as u64;
            for buf in bufs.iter_mut() {
                buf.fill(0);
            }
            for (i, mr) in mrs.iter().enumerate() {
                // The next key, as ib_inc_rkey gives it.
                let key = round
                    .wrapping_mul(MRS as u8)
                    .wrapping_add(i as u8)
                    .wrapping_add(1);
                a.qp().post_reg_mr_with(0, mr, key, 0, false)?;
                let (lkey, _, iova) = mr.keys();
                let last = i == MRS - 1;
                let seg = Seg {
                    addr: iova,
                    len: LEN as u32,
                    lkey,
                };
                let op = Op::ReadInv {
                    rkey: b.rkey(),
                    addr: src_addr + (i * LEN) as u64,
                };
                a.qp().post_with(
                    if last { 1000 + u64::from(round) } else { 0 },
                    op,
                    Some(seg),
                    last,
                )?;
            }
            // The chain's one completion, and nothing before it (a failed
            // registration or Read completes in error, signaled or not).
            let wc = a.send_done(1000 + u64::from(round), WC_READ)?;
            check!(wc.byte_len == LEN as u32);
            for (i, buf) in bufs.iter().enumerate() {
                check!(buf[..] == src[i * LEN..(i + 1) * LEN]);
            }
        }
        // Every sink is invalid again: a signaled registration of each
        // succeeds (registering a valid MR is refused).
        for (i, mr) in mrs.iter().enumerate() {
            a.qp()
                .post_reg_mr_with(2000 + i as u64, mr, 0xF0, 0, true)?;
            a.send_done(2000 + i as u64, WC_REG_MR)?;
        }
        check!(a.scq.poll(0).is_none());
        check!(a.fatal_events() == 0 && b.fatal_events() == 0);
        p.disconnect()?;
        drop(mrs);
        Ok(())
    }

    /// A QP whose consumer took away the peer's Write and Read rights
    /// (`IB_QP_ACCESS_FLAGS`) refuses them although the MR (the global
    /// rkey) grants both: the Write is not placed, the initiator's Write
    /// is not acknowledged and the Read completes with a remote access
    /// error; the responder's QP ends (it sent the Terminate).
    #[test]
    fn qp_access_flags_bound_the_peers_rights() -> Result {
        let _devs = Devices::pair()?;
        for read in [false, true] {
            let p = CmPair::connect(&PairOpts::v4())?;
            let (a, b) = (&p.client, &p.server);
            let qp = b.qp().rsiw::<crate::device::Rsiw>().ok_or(EINVAL)?;
            qp.set_access_flags(0);
            let target = KVec::from_elem(0x11u8, 4096, GFP_KERNEL)?;
            let src = pattern(0x22, 4096)?;
            let op = match read {
                false => Op::Write {
                    rkey: b.rkey(),
                    addr: target.as_ptr() as u64,
                },
                true => Op::Read {
                    rkey: b.rkey(),
                    addr: target.as_ptr() as u64,
                },
            };
            a.qp().post(7, op, Some(Seg::of(&src, a.lkey())))?;
            let wc = a.scq.poll(WAIT_MS).ok_or(ETIMEDOUT)?;
            // A Write completes once sent (iWARP has no Write ack); a
            // Read completes with the responder's Terminate.
            check!(wc.wr_id == 7 && (!read || wc.status == WC_REM_ACCESS_ERR));
            check!(wait_for(|| b.fatal_events() > 0));
            check!(target.iter().all(|&x| x == 0x11));
            if read {
                check!(src[..] == pattern(0x22, 4096)?[..]);
            }
        }
        Ok(())
    }
}
