// SPDX-License-Identifier: GPL-2.0
//! Self-tests of RFC 7306 Immediate Data through the kernel verbs: the
//! completion rules of `IB_WR_RDMA_WRITE_WITH_IMM` (an RDMA Write followed
//! by an Immediate Data message), the SE variant, the zero-length form (the
//! Immediate Data message alone as far as memory goes), the responder with
//! no receive posted, and the refused `IB_WR_SEND_WITH_IMM`.

use kernel::prelude::*;

#[cfg(rsiw_kunit)]
#[kunit_tests(rsiw_immediate)]
mod tests {
    use core::sync::atomic::Ordering;

    use kernel::{
        prelude::*,
        time::{delay::fsleep, Delta},
    };

    use crate::{
        ffi::{
            consumer::cq::{
                KCq, SOLICITED, WC_RECV_RDMA_WITH_IMM, WC_SUCCESS, WC_WR_FLUSH_ERR, WITH_IMM,
            },
            consumer::qp::*,
        },
        qp::QpState,
    };

    use crate::selftest::util::check;

    /// A connected pair on a device on `lo` (CRC on): A (requester) and
    /// B (responder), each with its own CQ; `f` gets them with the PD's
    /// local DMA lkey and global rkey.
    fn with_pair(
        name: &'static CStr,
        f: impl FnOnce(&KQp, &KCq, &KQp, &KCq, u32, u32) -> Result,
    ) -> Result {
        crate::selftest::util::with_pair(
            name,
            true,
            |_, _| {},
            |p| f(p.a, p.cq_a, p.b, p.cq_b, p.lkey, p.rkey),
        )
    }

    #[test]
    fn write_with_imm_completes_after_its_data() -> Result {
        with_pair(c"rsiw_kt_imm0", |a, cq_a, b, cq_b, lkey, rkey| {
            // Many FPDUs of Write before the Immediate Data message: when
            // the receive completes, every byte must already be in place.
            const LEN: usize = 256 * 1024;
            let mut src = KVec::from_elem(0u8, LEN, GFP_KERNEL)?;
            let mut dst = KVec::from_elem(0u8, LEN, GFP_KERNEL)?;
            let dst_addr = dst.as_mut_ptr() as u64;
            for (i, b) in src.iter_mut().enumerate() {
                *b = (i as u8).wrapping_mul(31).wrapping_add((i >> 9) as u8) | 1;
            }
            let rbuf = KVec::from_elem(0u8, 16, GFP_KERNEL)?;
            b.post_recv(200, Seg::of(&rbuf, lkey))?;
            a.post_write_imm_ex(
                1,
                &[Seg::of(&src, lkey)],
                rkey,
                dst_addr,
                0xA1B2_C3D4,
                false,
            )?;

            let wc = cq_b.poll_one(10000).ok_or(ETIMEDOUT)?;
            // Compare before anything else can land: the completion is
            // the only ordering point the consumer has.
            check!(dst[..] == src[..]);
            check!((wc.wr_id, wc.status, wc.opcode) == (200, WC_SUCCESS, WC_RECV_RDMA_WITH_IMM));
            check!(wc.wc_flags & WITH_IMM != 0);
            check!(u32::from_be(wc.ex) == 0xA1B2_C3D4);
            // Nothing lands in the receive buffer: the immediate is in the WC.
            check!(rbuf.iter().all(|&x| x == 0));
            let wc = cq_a.poll_one(5000).ok_or(ETIMEDOUT)?;
            check!((wc.wr_id, wc.status, wc.opcode) == (1, WC_SUCCESS, WC_RDMA_WRITE));
            Ok(())
        })
    }

    #[test]
    fn solicited_immediate_raises_the_solicited_event() -> Result {
        with_pair(c"rsiw_kt_imm1", |a, cq_a, b, cq_b, lkey, rkey| {
            let src = KVec::from_elem(7u8, 64, GFP_KERNEL)?;
            let mut dst = KVec::from_elem(0u8, 64, GFP_KERNEL)?;
            let dst_addr = dst.as_mut_ptr() as u64;
            let rbuf = KVec::from_elem(0u8, 8, GFP_KERNEL)?;

            // Armed for solicited only: a plain Immediate Data completes
            // without an event...
            check!(cq_b.req_notify(SOLICITED) == 0);
            b.post_recv(300, Seg::of(&rbuf, lkey))?;
            a.post_write_imm_ex(1, &[Seg::of(&src, lkey)], rkey, dst_addr, 1, false)?;
            let wc = cq_b.poll_one(5000).ok_or(ETIMEDOUT)?;
            check!((wc.wr_id, wc.status, wc.opcode) == (300, WC_SUCCESS, WC_RECV_RDMA_WITH_IMM));
            check!(cq_b.seen().comp.load(Ordering::Relaxed) == 0);

            // ...Immediate Data with SE (IB_SEND_SOLICITED) raises it.
            b.post_recv(301, Seg::of(&rbuf, lkey))?;
            a.post_write_imm_ex(2, &[Seg::of(&src, lkey)], rkey, dst_addr, 2, true)?;
            let wc = cq_b.poll_one(5000).ok_or(ETIMEDOUT)?;
            check!((wc.wr_id, wc.status, wc.opcode) == (301, WC_SUCCESS, WC_RECV_RDMA_WITH_IMM));
            check!(u32::from_be(wc.ex) == 2);
            check!(cq_b.seen().comp.load(Ordering::Relaxed) == 1);
            for id in [1u64, 2] {
                let wc = cq_a.poll_one(5000).ok_or(ETIMEDOUT)?;
                check!((wc.wr_id, wc.status) == (id, WC_SUCCESS));
            }
            check!(dst[..] == src[..]);
            Ok(())
        })
    }

    #[test]
    fn zero_length_write_with_imm_carries_only_the_immediate() -> Result {
        with_pair(c"rsiw_kt_imm2", |a, cq_a, b, cq_b, lkey, rkey| {
            let mut dst = KVec::from_elem(0x5Au8, 32, GFP_KERNEL)?;
            let dst_addr = dst.as_mut_ptr() as u64;
            let rbuf = KVec::from_elem(0u8, 8, GFP_KERNEL)?;
            b.post_recv(400, Seg::of(&rbuf, lkey))?;
            a.post_write_imm_ex(1, &[], rkey, dst_addr, 0xFEED_0001, false)?;
            let wc = cq_b.poll_one(5000).ok_or(ETIMEDOUT)?;
            check!((wc.wr_id, wc.status, wc.opcode) == (400, WC_SUCCESS, WC_RECV_RDMA_WITH_IMM));
            check!(u32::from_be(wc.ex) == 0xFEED_0001);
            check!(dst.iter().all(|&x| x == 0x5A));
            let wc = cq_a.poll_one(5000).ok_or(ETIMEDOUT)?;
            check!((wc.wr_id, wc.status) == (1, WC_SUCCESS));
            Ok(())
        })
    }

    #[test]
    fn immediate_without_a_receive_ends_the_stream() -> Result {
        with_pair(c"rsiw_kt_imm3", |a, cq_a, b, cq_b, lkey, rkey| {
            let src = KVec::from_elem(3u8, 128, GFP_KERNEL)?;
            let mut dst = KVec::from_elem(0u8, 128, GFP_KERNEL)?;
            let dst_addr = dst.as_mut_ptr() as u64;
            // No receive posted at B: the Immediate Data message has no
            // buffer (RFC 5041 untagged error), B terminates the stream.
            a.post_write_imm_ex(1, &[Seg::of(&src, lkey)], rkey, dst_addr, 9, false)?;
            let mut both = false;
            for _ in 0..5000 {
                if a.qp::<crate::device::Rsiw>().ib_state() == QpState::Err
                    && b.qp::<crate::device::Rsiw>().ib_state() == QpState::Err
                {
                    both = true;
                    break;
                }
                fsleep(Delta::from_millis(1));
            }
            check!(both);
            // B found no buffer for the Immediate Data (RFC 5041 untagged
            // buffer error, "no buffer available"); A received it.
            let no_buffer = crate::engine::error::ddp::U_NO_BUFFER;
            check!(b.qp::<crate::device::Rsiw>().stream_status().terminate_sent == Some(no_buffer));
            check!(
                a.qp::<crate::device::Rsiw>()
                    .stream_status()
                    .terminate_received
                    == Some(no_buffer)
            );
            // The Write itself had been placed before the Immediate failed.
            check!(dst[..] == src[..]);
            // The WR reports; later ones are flushed, receives too.
            let wc = cq_a.poll_one(5000).ok_or(ETIMEDOUT)?;
            check!(wc.wr_id == 1);
            check!(a
                .post(2, WR_SEND, &[Seg::of(&src, lkey)], None, true)
                .is_ok());
            let wc = cq_a.poll_one(5000).ok_or(ETIMEDOUT)?;
            check!((wc.wr_id, wc.status) == (2, WC_WR_FLUSH_ERR));
            let rbuf = KVec::from_elem(0u8, 8, GFP_KERNEL)?;
            b.post_recv(500, Seg::of(&rbuf, lkey))?;
            let wc = cq_b.poll_one(5000).ok_or(ETIMEDOUT)?;
            check!((wc.wr_id, wc.status) == (500, WC_WR_FLUSH_ERR));
            Ok(())
        })
    }

    #[test]
    fn send_with_imm_is_refused() -> Result {
        with_pair(c"rsiw_kt_imm4", |a, cq_a, _b, _cq_b, lkey, _rkey| {
            let src = KVec::from_elem(1u8, 16, GFP_KERNEL)?;
            // iWARP has no Send with Immediate (RFC 7306 composes only
            // Write with Immediate): a clear error, nothing queued.
            check!(
                a.post(1, WR_SEND_WITH_IMM, &[Seg::of(&src, lkey)], None, true) == Err(EOPNOTSUPP)
            );
            check!(cq_a.poll_one(50).is_none());
            check!(a.qp::<crate::device::Rsiw>().ib_state() == QpState::Rts);
            Ok(())
        })
    }
}
