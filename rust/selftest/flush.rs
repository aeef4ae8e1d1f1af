// SPDX-License-Identifier: GPL-2.0
//! RDMA Commit (`IB_WR_FLUSH`) through the kernel verbs: registration
//! policy (persistent flush only on persistent memory), global flush end
//! to end and its ordering after RDMA Writes, error statuses that leave
//! the stream up, and persistent flush into a pmem device when the guest
//! has one (`/dev/pmem0` as an fsdax namespace, tests/commit/pmem.sh).

use kernel::prelude::*;

/// What the pmem case writes to the start of `/dev/pmem0`; the guest
/// script reads it back after rmmod (16-octet lines, like `yes`).
pub(crate) const PMEM_LINE: &[u8; 16] = b"rsiw-pmem-flush\n";
/// Octets written and committed there.
pub(crate) const PMEM_LEN: usize = 256 * 1024;

#[cfg(rsiw_kunit)]
#[kunit_tests(rsiw_flush)]
mod tests {
    use kernel::prelude::*;

    use super::{PMEM_LEN, PMEM_LINE};
    use crate::{
        engine::{
            ddp::{Access, StagTable as _},
            mpa::negotiate::{Framing, RtrMode},
            wire::mpa::Rtr,
        },
        ffi::{
            consumer::cq::{KCq, RawWc, WC_RECV, WC_SEND, WC_SUCCESS},
            consumer::device::Found,
            consumer::flush::*,
            consumer::mr::{KMr, KPd},
            consumer::pmem::{virt_persistent, PmemDev},
            consumer::qp::*,
            mem::pages::access,
            net::netdev::NetDevRef,
            net::socket::TcpSocket,
        },
        mem::mr::{FastReg, MrError},
        qp::QpState,
    };

    use crate::engine::mpa::startup::StreamParams;
    use crate::selftest::util::{check, negotiated, EMSS};

    const RW: u32 = access::LOCAL_WRITE | access::REMOTE_WRITE;
    /// Responder buffer: 64 pages, mapped by one fast-register MR.
    const LEN: usize = 256 * 1024;
    const CHUNK: usize = 32 * 1024;

    /// The next completion within `ms` milliseconds (a timeout is logged
    /// with the caller's line).
    #[track_caller]
    fn poll_one(cq: &KCq, ms: u32) -> Result<RawWc> {
        let line = core::panic::Location::caller().line();
        cq.poll_one(ms).ok_or_else(|| {
            pr_err!(
                "rsiw kunit: no completion within {} ms (line {})\n",
                ms,
                line
            );
            ETIMEDOUT
        })
    }

    fn fill(seed: u8, buf: &mut [u8]) {
        for (i, b) in buf.iter_mut().enumerate() {
            *b = seed
                .wrapping_add((i * 13) as u8)
                .wrapping_add((i >> 9) as u8);
        }
    }

    fn params(initiator: bool) -> StreamParams {
        let framing = Framing {
            crc: true,
            markers_tx: false,
            markers_rx: false,
        };
        negotiated(framing, 8, 8, Some(RtrMode::Zero(Rtr::Write)), initiator)
    }

    /// Two connected QPs: `a` issues, `b` responds. Fields drop in order:
    /// QPs before their CQs and PD.
    struct Pair {
        a: KQp,
        b: KQp,
        cq_a: KCq,
        cq_b: KCq,
        pd: KPd,
    }

    /// Runs `f` on a fresh device on lo with a connected QP pair.
    fn with_pair(name: &'static CStr, f: impl FnOnce(&Found, &Pair) -> Result) -> Result {
        let lo = NetDevRef::by_name(c"lo").ok_or(ENODEV)?;
        crate::device::verbs::create(name, &lo, false)?;
        let dev = Found::by_netdev(&lo).ok_or(ENODEV)?;
        let res = (|| {
            let pd = KPd::alloc(&dev, true)?;
            let (cq_a, cq_b) = (KCq::create(&dev, 128)?, KCq::create(&dev, 128)?);
            let a = KQp::create(&pd, &cq_a, &cq_a, 64)?;
            let b = KQp::create(&pd, &cq_b, &cq_b, 64)?;
            a.modify(QpState::Init)?;
            b.modify(QpState::Init)?;
            let (sa, sb) = TcpSocket::loopback_pair()?;
            a.qp::<crate::device::Rsiw>()
                .attach(sa, &params(true), EMSS, &[])?;
            b.qp::<crate::device::Rsiw>()
                .attach(sb, &params(false), EMSS, &[])?;
            let p = Pair {
                a,
                b,
                cq_a,
                cq_b,
                pd,
            };
            f(&dev, &p)
        })();
        if let Err(e) = &res {
            pr_err!("rsiw kunit: {:?} failed: {:?}\n", name, e);
        }
        dev.unregister();
        res
    }

    /// Fast-registers `buf` at the responder through its QP (`IB_WR_REG_MR`
    /// with `key`, `acc`); returns the MR and the completion status.
    fn reg_at_b(dev: &Found, p: &Pair, buf: &mut [u8], key: u8, acc: u32) -> Result<(KMr, u32)> {
        let mr = KMr::alloc(&p.pd, (buf.len() / 4096 + 2) as u32)?;
        check!(mr.map_buf(dev, buf, 4096)? == 1);
        mr.update_key(key);
        post_reg_mr(&p.b, 0x4E6, &mr, acc)?;
        let wc = poll_one(&p.cq_b, 5000)?;
        check!((wc.wr_id, wc.opcode) == (0x4E6, WC_REG_MR));
        Ok((mr, wc.status))
    }

    /// RDMA Writes of `src` in `CHUNK`s (unsignaled) to `rkey`/`iova`,
    /// then a Flush of it all; returns the Flush's completion.
    fn write_then_flush(p: &Pair, src: &[u8], rkey: u32, iova: u64, wr_id: u64) -> Result<RawWc> {
        let lkey = p.pd.local_dma_lkey();
        for (i, c) in src.chunks(CHUNK).enumerate() {
            let off = (i * CHUNK) as u64;
            p.a.post(
                wr_id * 100 + i as u64,
                WR_WRITE,
                &[Seg::of(c, lkey)],
                Some((rkey, iova + off)),
                false,
            )?;
        }
        post_flush(&p.a, wr_id, rkey, iova, src.len() as u32, false)?;
        poll_one(&p.cq_a, 10000)
    }

    #[test]
    fn registration_policy() -> Result {
        let lo = NetDevRef::by_name(c"lo").ok_or(ENODEV)?;
        crate::device::verbs::create(c"rsiw_flreg0", &lo, false)?;
        let dev = Found::by_netdev(&lo).ok_or(ENODEV)?;
        // Global flush always; persistent where the kernel has the pmem API
        // (x86-64 has).
        assert_eq!(
            device_caps(&dev),
            (true, cfg!(CONFIG_ARCH_HAS_PMEM_API = "y"))
        );
        let data = dev.device::<crate::device::Rsiw>().data();
        let table = data.stags();
        {
            let pd = KPd::alloc(&dev, false)?;
            let mut buf = KVec::from_elem(0u8, 3 * 4096, GFP_KERNEL)?;
            // kmalloc'd RAM is not persistent memory.
            assert!(!virt_persistent(buf.as_ptr() as usize, buf.len()));
            let mr = KMr::alloc(&pd, 4)?;
            assert_eq!(mr.map_buf(&dev, &mut buf[..8192], 4096)?, 1);
            let (iova, len) = mr.iova_len();
            let stag = mr.keys().0;
            let req = |acc| FastReg {
                key: stag,
                iova,
                length: len,
                access: acc,
            };
            // Persistent flush over RAM is refused; the MR stays invalid.
            let persistent = req(RW | access::FLUSH_PERSISTENT);
            assert_eq!(
                mr.ib::<crate::device::Rsiw>()
                    .mr()
                    .fast_register(pd.pd::<crate::device::Rsiw>().id(), &persistent),
                Err(MrError::NotPersistent)
            );
            assert_eq!(table.lookup(stag).map(|r| r.valid), Some(false));
            // Global flush is fine on any memory: commit right, not durable.
            mr.ib::<crate::device::Rsiw>().mr().fast_register(
                pd.pd::<crate::device::Rsiw>().id(),
                &req(RW | access::FLUSH_GLOBAL),
            )?;
            let r = table.lookup(stag).ok_or(EINVAL)?;
            assert!(r.valid && r.access.contains(Access::COMMIT) && !r.durable);
            // Committing it orders stores; a region past its end does not.
            let pdid = pd.pd::<crate::device::Rsiw>().id();
            assert_eq!(table.commit(stag, pdid, iova, len), Ok(()));
            assert_eq!(
                table.commit(stag, pdid, iova + len, 1),
                Err(MrError::Bounds)
            );
            // Another PD's QP may not commit it.
            assert_eq!(table.commit(stag, pdid + 1, iova, len), Err(MrError::Pd));
            // The PD's local DMA MR has no flush right.
            let lkey = pd.local_dma_lkey();
            assert!(!table
                .lookup(lkey)
                .ok_or(EINVAL)?
                .access
                .contains(Access::COMMIT));
            assert_eq!(
                table.commit(lkey, pdid, buf.as_ptr() as u64, 8),
                Err(MrError::Access)
            );
            drop(mr);

            // A DMA MR spans all memory: persistent flush refused, global fine.
            let before = data.mr_count();
            let get_dma = |access| {
                <crate::mem::mr::Mr as crate::ffi::ib::MrOps<crate::device::Rsiw>>::get_dma(
                    data,
                    pd.pd::<crate::device::Rsiw>(),
                    access,
                    kernel_memory(),
                )
            };
            let dma = get_dma(RW | access::FLUSH_PERSISTENT);
            assert_eq!(dma.err(), Some(EOPNOTSUPP));
            assert_eq!(data.mr_count(), before);
            let dma = get_dma(RW | access::FLUSH_GLOBAL)?;
            drop(dma);
            <crate::mem::mr::Mr as crate::ffi::ib::MrOps<crate::device::Rsiw>>::discard(data);
            assert_eq!(data.mr_count(), before);
        }
        dev.unregister();
        Ok(())
    }

    #[test]
    fn global_flush_completes_after_writes_are_placed() -> Result {
        let res = with_pair(c"rsiw_flglob0", |dev, p| {
            let mut dst = KVec::from_elem(0u8, LEN, GFP_KERNEL)?;
            let mut src = KVec::from_elem(0u8, LEN, GFP_KERNEL)?;
            // Persistent flush over RAM, through the QP: REG_MR fails.
            let (bad, st) = reg_at_b(
                dev,
                p,
                &mut dst[..4096],
                0x11,
                RW | access::FLUSH_PERSISTENT,
            )?;
            check!(st == WC_LOC_PROT_ERR);
            // Not registered: invalid, and the new key does not name it.
            check!(!bad.ib::<crate::device::Rsiw>().mr().is_valid(bad.keys().1));
            check!(dev
                .device::<crate::device::Rsiw>()
                .data()
                .stags()
                .lookup(bad.keys().1)
                .is_none());
            // Global flush: registered.
            let (mr, st) = reg_at_b(dev, p, &mut dst, 0x22, RW | access::FLUSH_GLOBAL)?;
            check!(st == WC_SUCCESS);
            let (rkey, iova) = (mr.keys().1, mr.iova_len().0);
            // Each round: 8 Writes of 32 KiB, then a Flush. When the Flush
            // completes, every Write before it is placed (checked at once,
            // no waiting).
            for round in 0..4u8 {
                fill(round.wrapping_mul(37).wrapping_add(1), &mut src);
                let wc = write_then_flush(p, &src, rkey, iova, 10 + u64::from(round))?;
                check!(
                    (wc.wr_id, wc.status, wc.opcode)
                        == (10 + u64::from(round), WC_SUCCESS, WC_FLUSH)
                );
                check!(wc.vendor_err == 0);
                check!(dst[..] == src[..]);
            }
            check!(
                p.a.qp::<crate::device::Rsiw>().ib_state() == QpState::Rts
                    && p.b.qp::<crate::device::Rsiw>().ib_state() == QpState::Rts
            );
            Ok(())
        });
        assert!(res.is_ok());
        Ok(())
    }

    #[test]
    fn flush_errors_leave_the_stream_up() -> Result {
        let res = with_pair(c"rsiw_flerr0", |dev, p| {
            let mut dst = KVec::from_elem(0u8, 8192, GFP_KERNEL)?;
            let (mr, st) = reg_at_b(dev, p, &mut dst[..4096], 0x33, RW | access::FLUSH_GLOBAL)?;
            check!(st == WC_SUCCESS);
            let (rkey, iova) = (mr.keys().1, mr.iova_len().0);
            let expect = |wr_id: u64, status: u32, vendor: u32| -> Result {
                let wc = poll_one(&p.cq_a, 5000)?;
                check!(
                    (wc.wr_id, wc.status, wc.opcode, wc.vendor_err)
                        == (wr_id, status, WC_FLUSH, vendor)
                );
                Ok(())
            };
            // No flush right (the PD's global rkey: remote write only):
            // draft status 3 (Access), a remote access error.
            post_flush(
                &p.a,
                1,
                p.pd.unsafe_global_rkey(),
                dst.as_ptr() as u64,
                64,
                false,
            )?;
            expect(1, WC_REM_ACCESS_ERR, 3)?;
            // Past the MR's end: status 2 (Bounds).
            post_flush(&p.a, 2, rkey, iova + 4000, 200, false)?;
            expect(2, WC_REM_ACCESS_ERR, 2)?;
            // Stale key: status 3 (Access).
            post_flush(&p.a, 3, rkey ^ 0x01, iova, 64, false)?;
            expect(3, WC_REM_ACCESS_ERR, 3)?;
            // Zero octets at a valid place: nothing to commit, success.
            post_flush(&p.a, 4, rkey, iova, 0, false)?;
            expect(4, WC_SUCCESS, 0)?;
            // A flush carries no data: INLINE is refused at post time.
            check!(post_flush(&p.a, 5, rkey, iova, 8, true) == Err(EINVAL));
            // The stream is up: a Send still goes through, both QPs in RTS.
            let lkey = p.pd.local_dma_lkey();
            let msg = *b"still connected";
            let mut back = [0u8; 32];
            p.b.post_recv(50, Seg::of(&back, lkey))?;
            p.a.post(51, WR_SEND, &[Seg::of(&msg, lkey)], None, true)?;
            let wc = poll_one(&p.cq_a, 5000)?;
            check!((wc.wr_id, wc.status, wc.opcode) == (51, WC_SUCCESS, WC_SEND));
            let wc = poll_one(&p.cq_b, 5000)?;
            check!(
                (wc.wr_id, wc.status, wc.opcode, wc.byte_len)
                    == (50, WC_SUCCESS, WC_RECV, msg.len() as u32)
            );
            back[31] ^= 0; // written by the device behind Rust's back
            check!(back[..msg.len()] == msg[..]);
            check!(
                p.a.qp::<crate::device::Rsiw>().ib_state() == QpState::Rts
                    && p.b.qp::<crate::device::Rsiw>().ib_state() == QpState::Rts
            );
            // And a good Flush after all that.
            post_flush(&p.a, 6, rkey, iova, 4096, false)?;
            expect(6, WC_SUCCESS, 0)?;
            Ok(())
        });
        assert!(res.is_ok());
        Ok(())
    }

    #[test]
    fn pmem_persistent_flush() -> Result {
        let devt = crate::module_parameters::kunit_pmem_dev.value();
        if devt == 0 {
            mark_skipped(c"no pmem device: rsiw.kunit_pmem_dev=0 (tests/commit/pmem.sh sets it)");
            return Ok(());
        }
        let mut pm = PmemDev::open(devt, PMEM_LEN)?;
        // An fsdax namespace of (legacy) pmem: DAX pages in a pmem resource.
        assert!(pm.is_persistent());
        pm.bytes().fill(0);
        let res = with_pair(c"rsiw_flpmem0", |dev, p| {
            let (mr, st) = reg_at_b(dev, p, pm.bytes(), 0x44, RW | access::FLUSH_PERSISTENT)?;
            check!(st == WC_SUCCESS);
            let (rkey, iova) = (mr.keys().1, mr.iova_len().0);
            check!(dev
                .device::<crate::device::Rsiw>()
                .data()
                .stags()
                .lookup(rkey)
                .is_some_and(|r| r.durable));
            let mut src = KVec::from_elem(0u8, PMEM_LEN, GFP_KERNEL)?;
            for line in src.chunks_mut(PMEM_LINE.len()) {
                line.copy_from_slice(PMEM_LINE);
            }
            let wc = write_then_flush(p, &src, rkey, iova, 20)?;
            check!(
                (wc.wr_id, wc.status, wc.opcode, wc.vendor_err) == (20, WC_SUCCESS, WC_FLUSH, 0)
            );
            check!(pm.bytes()[..] == src[..]);
            // A sub-range commit too (unaligned, inside one cache line).
            post_flush(&p.a, 21, rkey, iova + 4097, 3, false)?;
            let wc = poll_one(&p.cq_a, 5000)?;
            check!((wc.wr_id, wc.status, wc.opcode) == (21, WC_SUCCESS, WC_FLUSH));
            pr_info!(
                "rsiw kunit: {} octets written and committed to /dev/pmem0\n",
                PMEM_LEN
            );
            Ok(())
        });
        assert!(res.is_ok());
        Ok(())
    }
}
