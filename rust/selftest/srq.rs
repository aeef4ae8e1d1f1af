// SPDX-License-Identifier: GPL-2.0
//! QPs sharing one SRQ through the kernel verbs: the end of one QP's
//! stream flushes only what that QP took from the SRQ, never the WRs the
//! other QPs on it are to receive into, and raises
//! `IB_EVENT_QP_LAST_WQE_REACHED` (which `ib_drain_qp` of an SRQ QP waits
//! for) once.

use kernel::prelude::*;

#[cfg(rsiw_kunit)]
#[kunit_tests(rsiw_srq)]
mod tests {
    use kernel::prelude::*;

    use crate::{
        ffi::{
            consumer::cq::{KCq, WC_RECV, WC_SUCCESS},
            consumer::device::Found,
            consumer::mr::KPd,
            consumer::qp::{KQp, Seg, QP_EVENTS, WR_SEND},
            consumer::srq::KSrq,
            net::netdev::NetDevRef,
            net::socket::TcpSocket,
            runtime::wait_ms,
        },
        qp::QpState,
        selftest::util::{check, stream_params, EMSS},
    };

    type Rsiw = crate::device::Rsiw;

    /// Receive buffers posted to the SRQ, and their size.
    const NBUF: usize = 4;
    const BUF: usize = 256;

    fn connect(a: &KQp, b: &KQp) -> Result {
        a.modify(QpState::Init)?;
        b.modify(QpState::Init)?;
        let (sa, sb) = TcpSocket::loopback_pair()?;
        a.qp::<Rsiw>()
            .attach(sa, &stream_params(true, true, false), EMSS, &[])?;
        b.qp::<Rsiw>()
            .attach(sb, &stream_params(false, true, false), EMSS, &[])?;
        Ok(())
    }

    /// Two streams a1-b1 and a2-b2; b1 and b2 receive from one SRQ. a1
    /// fails (the ULP moves it to Error: FIN), so b1's stream ends: none
    /// of the SRQ's WRs completes on b1 (it took none), the SRQ still
    /// holds every one, b1 gets one Last WQE Reached; then a2's Send lands
    /// in the SRQ's first WR through b2, with its data.
    fn peer_close(dev: &Found) -> Result {
        let pd = KPd::alloc(dev, true)?;
        let lkey = pd.local_dma_lkey();
        let (cq_a1, cq_a2) = (KCq::create(dev, 64)?, KCq::create(dev, 64)?);
        let (cq_b1, cq_b2) = (KCq::create(dev, 64)?, KCq::create(dev, 64)?);
        let srq = KSrq::create(&pd, 16, 1, 0)?;
        let mut rbuf = KVec::from_elem(0u8, NBUF * BUF, GFP_KERNEL)?;
        let mut src = KVec::from_elem(0u8, 200, GFP_KERNEL)?;
        for (i, b) in src.iter_mut().enumerate() {
            *b = (i as u8).wrapping_mul(7).wrapping_add(3);
        }
        // QPs after the SRQ and CQs: they drop first.
        let a1 = KQp::create(&pd, &cq_a1, &cq_a1, 16)?;
        let a2 = KQp::create(&pd, &cq_a2, &cq_a2, 16)?;
        let b1 = KQp::create_on_srq(&pd, &cq_b1, &cq_b1, 16, &srq)?;
        let b2 = KQp::create_on_srq(&pd, &cq_b2, &cq_b2, 16, &srq)?;
        connect(&a1, &b1)?;
        connect(&a2, &b2)?;
        for (i, chunk) in rbuf.chunks_mut(BUF).enumerate() {
            srq.post_seg(100 + i as u64, Seg::of_mut(chunk, lkey))?;
        }
        check!(srq.srq::<Rsiw>().len() == NBUF);

        a1.modify(QpState::Err)?;
        let b1q = b1.qp::<Rsiw>();
        check!(wait_ms(5000, || b1q.ib_state() == QpState::Err));
        // Nothing of the SRQ completes on b1 (its flush comes with the
        // failure, before the state is Error).
        let stray = cq_b1.poll_one(200);
        if let Some(wc) = stray {
            pr_err!(
                "rsiw kunit: b1 completed SRQ WR {} (status {}), {} left on the SRQ\n",
                wc.wr_id,
                wc.status,
                srq.srq::<Rsiw>().len()
            );
        }
        check!(stray.is_none());
        check!(srq.srq::<Rsiw>().len() == NBUF);
        check!(wait_ms(2000, || QP_EVENTS.last_wqe() >= 1));
        check!(QP_EVENTS.last_wqe() == 1);
        check!(QP_EVENTS.fatal() == 0);

        // b2 still receives, into the SRQ's oldest WR.
        a2.post(1, WR_SEND, &[Seg::of(&src, lkey)], None, true)?;
        let wc = cq_b2.poll_one(5000).ok_or(ETIMEDOUT)?;
        check!((wc.wr_id, wc.status, wc.opcode, wc.byte_len) == (100, WC_SUCCESS, WC_RECV, 200));
        check!(rbuf[..200] == src[..]);
        let wc = cq_a2.poll_one(5000).ok_or(ETIMEDOUT)?;
        check!((wc.wr_id, wc.status) == (1, WC_SUCCESS));
        check!(srq.srq::<Rsiw>().len() == NBUF - 1);
        check!(b2.qp::<Rsiw>().ib_state() == QpState::Rts);
        // b1 leaves no second event on its way out; b2's teardown adds
        // its own.
        b1.modify(QpState::Err)?;
        check!(QP_EVENTS.last_wqe() == 1);
        drop((a1, b1, a2, b2));
        Ok(())
    }

    #[test]
    fn srq_peer_close_keeps_the_other_qps_receives() -> Result {
        let lo = NetDevRef::by_name(c"lo").ok_or(ENODEV)?;
        crate::device::verbs::create(c"rsiw_kunit_srq2", &lo, false)?;
        let dev = Found::by_netdev(&lo).ok_or(ENODEV)?;
        let r = peer_close(&dev);
        if let Err(e) = &r {
            pr_err!("rsiw kunit: srq peer close failed: {:?}\n", e);
        }
        dev.unregister();
        r
    }
}
