// SPDX-License-Identifier: GPL-2.0
//! Self-tests of the CQ, MR and SRQ verbs through the RDMA core's kernel
//! API (`ib_create_cq`, `ib_poll_cq`, `ib_req_notify_cq`, `ib_alloc_pd`,
//! `ib_alloc_mr`, `ib_map_mr_sg`, `ib_create_srq`, ...) on a device on
//! `lo`, with the QP side played by the Rust APIs the QP code calls
//! (`Cq::push`, `Mr::fast_register`, `StagTable::copy_to_mr`, `Srq::pop`).

use kernel::prelude::*;

#[cfg(rsiw_kunit)]
#[kunit_tests(rsiw_verbs_core)]
mod tests {
    use core::sync::atomic::Ordering;

    use kernel::prelude::*;

    use crate::{
        cq::{Completion, WcOpcode, WcStatus},
        engine::ddp::{self, validate_tagged, Access, StagTable as _},
        ffi::{
            consumer::cq::*,
            consumer::device::Found,
            consumer::mr::*,
            consumer::qp::{KQp, Seg, WR_SEND},
            consumer::srq::*,
            mem::pages::access,
            net::netdev::NetDevRef,
        },
        mem::mr::{Grant, MrError},
        qp::QpState,
    };

    fn lo_device(name: &'static CStr) -> Result<(NetDevRef, Found)> {
        let lo = NetDevRef::by_name(c"lo").ok_or(ENODEV)?;
        crate::device::verbs::create(name, &lo, false)?;
        let found = Found::by_netdev(&lo).ok_or(ENODEV)?;
        Ok((lo, found))
    }

    #[test]
    fn cq_create_poll_notify_overflow_resize() -> Result {
        let (_lo, found) = lo_device(c"rsiw_kunit_cq")?;
        let max_cqe = found
            .device::<crate::device::Rsiw>()
            .data()
            .limits()
            .max_cqe;

        // ib_alloc_cq: the ring has the size asked for; too large: EINVAL.
        assert_eq!(KCq::alloc_free_direct(&found, 16), Ok(16));
        assert_eq!(
            KCq::alloc_free_direct(&found, max_cqe as i32 + 1).err(),
            Some(EINVAL)
        );
        assert_eq!(found.device::<crate::device::Rsiw>().data().cq_count(), 0);

        let cq = KCq::create(&found, 4)?;
        assert_eq!(cq.reported_cqe(), 4);
        assert_eq!(found.device::<crate::device::Rsiw>().data().cq_count(), 1);
        let qp = cq.wc_qp();

        // Every ib_wc field the QP can set.
        let recv_imm = Completion {
            wr_id: 0x1111,
            opcode: WcOpcode::RecvRdmaWithImm,
            byte_len: 100,
            imm: Some(0x1122_3344),
            qp,
            qp_num: 5,
            ..Completion::default()
        };
        let flushed = Completion {
            wr_id: 0x2222,
            status: WcStatus::WrFlushErr,
            qp,
            qp_num: 5,
            ..Completion::default()
        };
        let recv_inv = Completion {
            wr_id: 0x3333,
            opcode: WcOpcode::Recv,
            byte_len: 7,
            invalidated: Some(0x00AB_CD01),
            qp,
            qp_num: 5,
            ..Completion::default()
        };
        cq.cq::<crate::device::Rsiw>().push(recv_imm)?;
        cq.cq::<crate::device::Rsiw>().push(flushed)?;
        cq.cq::<crate::device::Rsiw>().push(recv_inv)?;
        // Not armed: no completion event.
        assert_eq!(cq.seen().comp.load(Ordering::Relaxed), 0);

        let mut wc = [RawWc::default(); 8];
        assert_eq!(cq.poll(&mut wc), 3);
        let qp_addr = wc[0].qp;
        assert!(qp_addr != 0);
        assert_eq!(
            wc[0],
            RawWc {
                wr_id: 0x1111,
                status: WC_SUCCESS,
                opcode: WC_RECV_RDMA_WITH_IMM,
                byte_len: 100,
                qp: qp_addr,
                src_qp: 5,
                wc_flags: WITH_IMM,
                ex: 0x1122_3344u32.to_be(),
                vendor_err: 0,
            }
        );
        assert_eq!(wc[1].wr_id, 0x2222);
        assert_eq!(wc[1].status, WC_WR_FLUSH_ERR);
        assert_eq!(wc[1].opcode, WC_SEND);
        assert_eq!(wc[1].wc_flags, 0);
        assert_eq!(
            wc[2],
            RawWc {
                wr_id: 0x3333,
                status: WC_SUCCESS,
                opcode: WC_RECV,
                byte_len: 7,
                qp: qp_addr,
                src_qp: 5,
                wc_flags: WITH_INVALIDATE,
                ex: 0x00AB_CD01,
                vendor_err: 0,
            }
        );
        assert_eq!(cq.poll(&mut wc), 0);

        // Arming: empty CQ reports nothing missed; the next push notifies
        // once; a re-arm with a completion queued reports it.
        assert_eq!(cq.req_notify(NEXT_COMP | REPORT_MISSED), 0);
        cq.cq::<crate::device::Rsiw>().push(Completion {
            wr_id: 1,
            ..Completion::default()
        })?;
        assert_eq!(cq.seen().comp.load(Ordering::Relaxed), 1);
        cq.cq::<crate::device::Rsiw>().push(Completion {
            wr_id: 2,
            ..Completion::default()
        })?;
        assert_eq!(cq.seen().comp.load(Ordering::Relaxed), 1);
        assert_eq!(cq.req_notify(NEXT_COMP | REPORT_MISSED), 1);
        assert_eq!(cq.poll(&mut wc), 2);
        // That arming stays until the next completion.
        cq.cq::<crate::device::Rsiw>().push(Completion {
            wr_id: 3,
            ..Completion::default()
        })?;
        assert_eq!(cq.seen().comp.load(Ordering::Relaxed), 2);

        // Solicited arming: a plain success does not notify, a solicited
        // one does (no missed-event report without the flag).
        assert_eq!(cq.req_notify(SOLICITED), 0);
        cq.cq::<crate::device::Rsiw>().push(Completion {
            wr_id: 4,
            ..Completion::default()
        })?;
        assert_eq!(cq.seen().comp.load(Ordering::Relaxed), 2);
        cq.cq::<crate::device::Rsiw>().push(Completion {
            wr_id: 5,
            solicited: true,
            ..Completion::default()
        })?;
        assert_eq!(cq.seen().comp.load(Ordering::Relaxed), 3);
        assert_eq!(cq.poll(&mut wc), 3);
        assert_eq!([wc[0].wr_id, wc[1].wr_id, wc[2].wr_id], [3, 4, 5]);

        // Overflow: the fifth of four is refused, CQ_ERR raised, the four
        // queued ones are intact.
        for i in 10..14 {
            cq.cq::<crate::device::Rsiw>().push(Completion {
                wr_id: i,
                ..Completion::default()
            })?;
        }
        assert_eq!(cq.seen().cq_err.load(Ordering::Relaxed), 0);
        assert_eq!(
            cq.cq::<crate::device::Rsiw>().push(Completion {
                wr_id: 14,
                ..Completion::default()
            }),
            Err(ENOSPC)
        );
        assert_eq!(cq.seen().cq_err.load(Ordering::Relaxed), 1);
        assert_eq!(cq.seen().wrong_cq.load(Ordering::Relaxed), 0);
        // Every later refusal is not reported again (one unaccounted
        // event allocation per refused CQE on uverbs' async queue
        // before): the overrun is the CQ's, once.
        for i in 15..1015 {
            assert_eq!(
                cq.cq::<crate::device::Rsiw>().push(Completion {
                    wr_id: i,
                    ..Completion::default()
                }),
                Err(ENOSPC)
            );
        }
        assert_eq!(cq.seen().cq_err.load(Ordering::Relaxed), 1);
        assert_eq!(cq.poll(&mut wc), 4);
        assert_eq!(
            [wc[0].wr_id, wc[1].wr_id, wc[2].wr_id, wc[3].wr_id],
            [10, 11, 12, 13]
        );
        // Drained and overrun again: still the one event.
        for i in 30..35 {
            let _ = cq.cq::<crate::device::Rsiw>().push(Completion {
                wr_id: i,
                ..Completion::default()
            });
        }
        assert_eq!(cq.seen().cq_err.load(Ordering::Relaxed), 1);
        assert_eq!(cq.poll(&mut wc), 4);

        // Resize keeps queued completions; cannot shrink below them.
        for i in 20..23 {
            cq.cq::<crate::device::Rsiw>().push(Completion {
                wr_id: i,
                ..Completion::default()
            })?;
        }
        assert_eq!(cq.resize(2), EINVAL.to_errno());
        assert_eq!(cq.resize(max_cqe + 1), EINVAL.to_errno());
        assert_eq!(cq.resize(8), 0);
        assert_eq!(cq.reported_cqe(), 8);
        assert_eq!(cq.cq::<crate::device::Rsiw>().capacity(), 8);
        for i in 23..28 {
            cq.cq::<crate::device::Rsiw>().push(Completion {
                wr_id: i,
                ..Completion::default()
            })?;
        }
        assert_eq!(cq.poll(&mut wc), 8);
        assert_eq!(wc[0].wr_id, 20);
        assert_eq!(wc[7].wr_id, 27);

        drop(cq);
        assert_eq!(found.device::<crate::device::Rsiw>().data().cq_count(), 0);
        found.unregister();
        Ok(())
    }

    #[test]
    fn mr_dma_fast_reg_invalidate_dereg() -> Result {
        let (_lo, found) = lo_device(c"rsiw_kunit_mr")?;
        let data = found.device::<crate::device::Rsiw>().data();
        let table = data.stags();
        assert!(uses_virt_dma(&found));

        // A kernel PD's DMA MR: local access to kernel memory by address.
        let pd = KPd::alloc(&found, false)?;
        assert_eq!(data.mr_count(), 1);
        let lkey = pd.local_dma_lkey();
        assert!(lkey >> 8 != 0);
        let r = table.lookup(lkey).ok_or(EINVAL)?;
        assert!(r.valid && r.pd == pd.pd::<crate::device::Rsiw>().id());
        assert!(r.access.contains(Access::LOCAL_WRITE));
        assert!(!r.access.contains(Access::REMOTE_READ));
        let mut buf = KVec::from_elem(0u8, 3 * 4096 + 200, GFP_KERNEL)?;
        let base = buf.as_ptr() as u64;
        table.copy_to_mr(lkey, base + 10, b"rsiw")?;
        assert_eq!(&buf[10..14], b"rsiw");
        let mut back = [0u8; 4];
        table.copy_from_mr(lkey, base + 10, &mut back)?;
        assert_eq!(&back, b"rsiw");
        assert_eq!(
            table.copy_to_mr(lkey ^ 1, base, b"x"),
            Err(MrError::InvalidStag)
        );
        assert_eq!(table.copy_to_mr(lkey, 0, b"x"), Err(MrError::Bounds));
        assert_eq!(table.copy_to_mr(0, base, b"x"), Err(MrError::InvalidStag));
        // Full checks: local write granted, remote write not, PD enforced.
        assert!(table
            .check(
                lkey,
                pd.pd::<crate::device::Rsiw>().id(),
                base,
                4,
                access::LOCAL_WRITE
            )
            .is_ok());
        assert_eq!(
            table
                .check(
                    lkey,
                    pd.pd::<crate::device::Rsiw>().id(),
                    base,
                    4,
                    access::REMOTE_WRITE
                )
                .err(),
            Some(MrError::Access)
        );
        assert_eq!(
            table
                .check(lkey, pd.pd::<crate::device::Rsiw>().id() + 1, base, 4, 0)
                .err(),
            Some(MrError::Pd)
        );

        // IB_PD_UNSAFE_GLOBAL_RKEY: a DMA MR with remote rights and an rkey.
        {
            let gpd = KPd::alloc(&found, true)?;
            let rkey = gpd.unsafe_global_rkey();
            assert!(rkey != 0);
            let r = table.lookup(rkey).ok_or(EINVAL)?;
            assert!(r
                .access
                .contains(Access::REMOTE_READ | Access::REMOTE_WRITE));
        }

        // alloc_mr limits and types.
        let max = data.limits().max_fast_reg_page_list_len;
        assert_eq!(KMr::alloc(&pd, max + 1).err(), Some(EINVAL));
        assert_eq!(alloc_mr_type_err(&pd), EOPNOTSUPP.to_errno());
        let before = data.mr_count();
        let mr = KMr::alloc(&pd, 4)?;
        assert_eq!(data.mr_count(), before + 1);
        let (l, r) = mr.keys();
        assert!(l == r && l >> 8 != 0);
        assert_eq!(table.lookup(l).map(|r| r.valid), Some(false));

        // Map 2 pages + 50 octets starting 100 octets into a page.
        let len = 2 * 4096 + 50;
        let off = 4096 - (base as usize % 4096) + 100; // 100 octets into a page
        let mapped = mr.map_buf(&found, &mut buf[off..off + len], 4096)?;
        assert_eq!(mapped, 1);
        let iova = base + off as u64;
        assert_eq!(mr.iova_len(), (iova, len as u64));

        // IB_WR_REG_MR with a new key (what the QP does).
        mr.update_key(0x42);
        let (stag, _) = mr.keys();
        assert_eq!(stag & 0xFF, 0x42);
        let rw = access::LOCAL_WRITE | access::REMOTE_WRITE | access::REMOTE_READ;
        let req = crate::mem::mr::FastReg::of(mr.ib::<crate::device::Rsiw>(), stag, rw);
        assert_eq!(
            mr.ib::<crate::device::Rsiw>()
                .mr()
                .fast_register(pd.pd::<crate::device::Rsiw>().id() + 1, &req),
            Err(MrError::Pd)
        );
        mr.ib::<crate::device::Rsiw>()
            .mr()
            .fast_register(pd.pd::<crate::device::Rsiw>().id(), &req)?;
        assert_eq!(
            mr.ib::<crate::device::Rsiw>()
                .mr()
                .fast_register(pd.pd::<crate::device::Rsiw>().id(), &req),
            Err(MrError::State)
        );
        // The old key no longer names it.
        assert!(table.lookup(l).is_none());

        // A copy across the page boundary lands in the right place.
        let mut pattern = [0u8; 300];
        for (i, b) in pattern.iter_mut().enumerate() {
            *b = i as u8 ^ 0x5A;
        }
        let at = iova + 4000;
        table.copy_to_mr(stag, at, &pattern)?;
        assert_eq!(&buf[off + 4000..off + 4300], &pattern[..]);
        let mut back = [0u8; 300];
        table.copy_from_mr(stag, at, &mut back)?;
        assert_eq!(back, pattern);
        // Last octet fits; one past does not.
        table.copy_to_mr(stag, iova + len as u64 - 1, &[7])?;
        assert_eq!(buf[off + len - 1], 7);
        assert_eq!(
            table.copy_to_mr(stag, iova + len as u64 - 1, &[7, 7]),
            Err(MrError::Bounds)
        );
        assert_eq!(table.copy_to_mr(stag, iova - 1, &[7]), Err(MrError::Bounds));

        // The engine's validators on the kernel table.
        let pdid = pd.pd::<crate::device::Rsiw>().id();
        assert!(validate_tagged(table, pdid, stag, iova, 16, Access::REMOTE_WRITE).is_ok());
        assert!(validate_tagged(table, pdid + 1, stag, iova, 16, Access::REMOTE_WRITE).is_err());
        assert!(validate_tagged(table, pdid, stag, iova, 16, Access::REMOTE_ATOMIC).is_err());
        assert!(validate_tagged(table, pdid, stag ^ 0x01, iova, 16, Access::REMOTE_WRITE).is_err());
        assert!(validate_tagged(
            table,
            pdid,
            stag,
            iova + len as u64,
            1,
            Access::REMOTE_WRITE
        )
        .is_err());

        // Invalidation (local or remote): key must match; afterwards no access.
        let held = table.get(stag).ok_or(EINVAL)?;
        assert_eq!(
            table.invalidate(stag ^ 0x01, pdid),
            Err(MrError::InvalidStag)
        );
        table.invalidate(stag, pdid)?;
        assert_eq!(
            table.copy_to_mr(stag, iova, &[1]),
            Err(MrError::InvalidStag)
        );
        assert_eq!(
            ddp::StagTable::lookup(table, stag).map(|r| r.valid),
            Some(false)
        );
        // Registered again (new key), then deregistered while a reference
        // is held: the reference cannot reach the memory.
        mr.update_key(0x43);
        let (stag2, _) = mr.keys();
        mr.ib::<crate::device::Rsiw>().mr().fast_register(
            pdid,
            &crate::mem::mr::FastReg::of(mr.ib::<crate::device::Rsiw>(), stag2, rw),
        )?;
        assert!(held.copy_to(stag2, iova, &[9]).is_ok());
        // Local invalidate of a DMA MR is refused, and so is a peer's.
        assert_eq!(table.invalidate(lkey, pdid), Err(MrError::State));
        assert_eq!(table.invalidate_remote(lkey, pdid), Err(MrError::State));

        // An access the engine validated names the registration it was
        // validated against: the rest of a tagged segment reaches that
        // registration only, never the next one behind the same STag,
        // even with the same key (a key that came round), and every
        // chunk is checked for PD and rights too.
        {
            let reg_of = |s: u32| {
                ddp::StagTable::lookup(table, s)
                    .map(|r| r.reg)
                    .ok_or(EINVAL)
            };
            let r2 = reg_of(stag2)?;
            let w = |reg| Grant::validated(pdid, access::LOCAL_WRITE, reg);
            assert_eq!(held.copy_to_as(stag2, w(r2), iova, &[3]), Ok(()));
            assert_eq!(buf[off], 3);
            assert_eq!(
                held.copy_to_as(
                    stag2,
                    Grant::validated(pdid + 1, access::LOCAL_WRITE, r2),
                    iova,
                    &[4]
                ),
                Err(MrError::Pd)
            );
            assert_eq!(
                held.copy_to_as(
                    stag2,
                    Grant::validated(pdid, access::REMOTE_ATOMIC, r2),
                    iova,
                    &[4]
                ),
                Err(MrError::Access)
            );
            // Invalidated and registered again with the very same key.
            table.invalidate(stag2, pdid)?;
            mr.ib::<crate::device::Rsiw>().mr().fast_register(
                pdid,
                &crate::mem::mr::FastReg::of(mr.ib::<crate::device::Rsiw>(), stag2, rw),
            )?;
            let r3 = reg_of(stag2)?;
            assert!(r3 != r2);
            assert_eq!(
                held.copy_to_as(stag2, w(r2), iova, &[5]),
                Err(MrError::InvalidStag)
            );
            let mut one = [0u8];
            assert_eq!(
                held.copy_from_as(
                    stag2,
                    Grant::validated(pdid, access::REMOTE_READ, r2),
                    iova,
                    &mut one
                ),
                Err(MrError::InvalidStag)
            );
            // Nothing reached the new registration.
            assert_eq!(buf[off], 3);
            assert_eq!(held.copy_to_as(stag2, w(r3), iova, &[6]), Ok(()));
            assert_eq!(buf[off], 6);
        }

        // Too many pages for the MR: map fails (fewer entries mapped).
        let small = KMr::alloc(&pd, 2)?;
        assert!(small.map_buf(&found, &mut buf[off..off + len], 4096)? < 1);
        drop(small);

        drop(mr);
        assert_eq!(data.mr_count(), before);
        assert!(table.get(stag2).is_none());
        assert_eq!(held.copy_to(stag2, iova, &[1]), Err(MrError::InvalidStag));
        assert_eq!(
            held.copy_from(stag2, iova, &mut [0]),
            Err(MrError::InvalidStag)
        );
        drop(held);

        drop(pd);
        assert_eq!(data.mr_count(), 0);
        found.unregister();
        Ok(())
    }

    /// A QP may have no room in its send or receive queue (a receive-only
    /// or send-only end, as qperf makes): created, and posts refused.
    #[test]
    fn a_qp_without_room_refuses_posts() -> Result {
        let (_lo, found) = lo_device(c"rsiw_kunit_qp0")?;
        let pd = KPd::alloc(&found, true)?;
        let cq = KCq::create(&found, 4)?;
        let qp = KQp::create(&pd, &cq, &cq, 0)?;
        qp.modify(QpState::Init)?;
        let mut buf = [0u8; 8];
        let lkey = pd.local_dma_lkey();
        assert_eq!(
            qp.post(1, WR_SEND, &[Seg::of(&buf, lkey)], None, true)
                .err(),
            Some(ENOMEM)
        );
        assert_eq!(
            qp.post_recv(2, Seg::of_mut(&mut buf, lkey)).err(),
            Some(ENOMEM)
        );
        drop(qp);
        drop(cq);
        drop(pd);
        found.unregister();
        Ok(())
    }

    /// `destroy_qp` leaves no completion of the QP in a kernel-side CQ:
    /// its flushed receives go with it (a later poll would hand out the
    /// freed `ib_qp` in `wc->qp`, which uverbs' POLL_CQ dereferences),
    /// another QP's stay, in order.
    #[test]
    fn destroyed_qps_completions_are_purged() -> Result {
        let (_lo, found) = lo_device(c"rsiw_kunit_qpd")?;
        let pd = KPd::alloc(&found, true)?;
        let cq = KCq::create(&found, 16)?;
        let live = KQp::create(&pd, &cq, &cq, 8)?;
        let gone = KQp::create(&pd, &cq, &cq, 8)?;
        live.modify(QpState::Init)?;
        gone.modify(QpState::Init)?;
        let mut buf = [0u8; 8];
        let lkey = pd.local_dma_lkey();
        for i in 0..4 {
            gone.post_recv(i, Seg::of_mut(&mut buf, lkey))?;
        }
        live.post_recv(100, Seg::of_mut(&mut buf, lkey))?;
        live.post_recv(101, Seg::of_mut(&mut buf, lkey))?;
        // Both fail: their receives are flushed into the CQ, interleaved.
        gone.modify(QpState::Err)?;
        live.modify(QpState::Err)?;
        let live_qp = live.raw() as usize;
        let mut n = 0;
        for _ in 0..1000 {
            n = cq.cq::<crate::device::Rsiw>().len();
            if n >= 6 {
                break;
            }
            kernel::time::delay::fsleep(kernel::time::Delta::from_millis(1));
        }
        assert_eq!(n, 6);
        drop(gone);
        let mut wc = [RawWc::default(); 8];
        let got = cq.poll(&mut wc);
        assert_eq!(got, 2);
        assert_eq!(
            (wc[0].wr_id, wc[0].status, wc[0].qp),
            (100, WC_WR_FLUSH_ERR, live_qp)
        );
        assert_eq!(
            (wc[1].wr_id, wc[1].status, wc[1].qp),
            (101, WC_WR_FLUSH_ERR, live_qp)
        );
        drop(live);
        drop(cq);
        drop(pd);
        found.unregister();
        Ok(())
    }

    #[test]
    fn srq_create_post_limit_event() -> Result {
        let (_lo, found) = lo_device(c"rsiw_kunit_srq")?;
        let data = found.device::<crate::device::Rsiw>().data();
        let l = *data.limits();
        let pd = KPd::alloc(&found, false)?;

        assert_eq!(
            KSrq::create(&pd, l.max_srq_wr + 1, 1, 0).err(),
            Some(EINVAL)
        );
        assert_eq!(KSrq::create(&pd, 4, l.max_sge + 1, 0).err(), Some(EINVAL));
        assert_eq!(KSrq::create(&pd, 4, 1, 5).err(), Some(EINVAL));
        assert_eq!(data.srq_count(), 0);

        let srq = KSrq::create(&pd, 4, 2, 0)?;
        assert_eq!(data.srq_count(), 1);
        assert_eq!(srq.query(), Ok((4, 2, 0)));
        assert_eq!(
            srq.srq::<crate::device::Rsiw>().pd(),
            pd.pd::<crate::device::Rsiw>().id()
        );

        assert_eq!(srq.post(&[1, 2, 3], 1), (0, None));
        // Full after one more: the second of the chain is bad_wr.
        assert_eq!(srq.post(&[4, 5], 2), (ENOMEM.to_errno(), Some(1)));
        assert_eq!(srq.srq::<crate::device::Rsiw>().len(), 4);
        // Too many SGEs: the first is bad.
        assert_eq!(srq.post(&[6], 3), (EINVAL.to_errno(), Some(0)));

        assert_eq!(srq.modify(SRQ_MAX_WR, 8, 0), EOPNOTSUPP.to_errno());
        assert_eq!(srq.modify(SRQ_LIMIT, 0, 5), EINVAL.to_errno());
        assert_eq!(srq.modify(SRQ_LIMIT, 0, 3), 0);
        assert_eq!(srq.query(), Ok((4, 2, 3)));

        // 4 -> 3 left: not below the limit; 3 -> 2: event, disarmed.
        let first = srq.srq::<crate::device::Rsiw>().pop().ok_or(EINVAL)?;
        assert_eq!(first.wr_id, 1);
        assert_eq!(first.sges().len(), 1);
        assert_eq!(
            (
                first.sges()[0].addr,
                first.sges()[0].len,
                first.sges()[0].lkey
            ),
            (0x1000, 64, 0x100)
        );
        assert_eq!(srq.limit_events(), 0);
        assert_eq!(
            srq.srq::<crate::device::Rsiw>().pop().map(|r| r.wr_id),
            Some(2)
        );
        assert_eq!(srq.limit_events(), 1);
        assert_eq!(srq.query(), Ok((4, 2, 0)));
        assert_eq!(
            srq.srq::<crate::device::Rsiw>().pop().map(|r| r.wr_id),
            Some(3)
        );
        let last = srq.srq::<crate::device::Rsiw>().pop().ok_or(EINVAL)?;
        assert_eq!((last.wr_id, last.sges().len()), (4, 2));
        assert_eq!(srq.srq::<crate::device::Rsiw>().pop(), None);
        assert_eq!(srq.limit_events(), 1);

        drop(srq);
        assert_eq!(data.srq_count(), 0);
        drop(pd);
        found.unregister();
        Ok(())
    }
}
