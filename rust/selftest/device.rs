// SPDX-License-Identifier: GPL-2.0
//! In-kernel self-tests that need a registered device: they create one on
//! the loopback net_device and drive it through the RDMA core the way a
//! kernel ULP does.

use kernel::prelude::*;

#[cfg(rsiw_kunit)]
#[kunit_tests(rsiw_registration)]
mod tests {
    use kernel::prelude::*;

    use crate::{
        ffi::ib::PortState,
        ffi::{consumer::device::Found, net::netdev::NetDevRef},
    };

    #[test]
    fn loopback_device_serves_kernel_verbs() -> Result {
        let lo = NetDevRef::by_name(c"lo").ok_or(ENODEV)?;
        crate::device::verbs::create(c"rsiw_kunit0", &lo, false)?;
        let found = Found::by_netdev(&lo).ok_or(ENODEV)?;

        assert!(found.is_iwarp());
        let (active, gid_tbl_len) = found.query_port()?;
        assert_eq!(active, lo.port_state() == PortState::Active);
        assert_eq!(gid_tbl_len, 1);
        // The GID is lo's (all-zero) address, as rdma_cm expects.
        assert_eq!(
            found.device::<crate::device::Rsiw>().data().mac(),
            lo.mac().unwrap_or([1; 6])
        );

        // One PD exists while allocated, none after.
        assert_eq!(
            found.alloc_dealloc_pd(|| found.device::<crate::device::Rsiw>().data().pd_count())?,
            1
        );
        assert_eq!(found.device::<crate::device::Rsiw>().data().pd_count(), 0);

        // One device per net_device.
        assert_eq!(
            crate::device::verbs::create(c"rsiw_kunit1", &lo, false),
            Err(EEXIST)
        );

        found.unregister();
        assert!(Found::by_netdev(&lo).is_none());
        Ok(())
    }
}

#[cfg(rsiw_kunit)]
#[kunit_tests(rsiw_socket)]
mod socket_tests {
    use kernel::{
        prelude::*,
        sync::Arc,
        time::{delay::fsleep, Delta},
    };

    use crate::ffi::net::socket::{Net, SockAddr, SockRx, SocketEvents, TcpSocket, TcpState};
    use crate::ffi::sync::{new_spinlock_irq, SpinLockIrq};

    /// Collects what arrives and the last TCP state seen. The callbacks
    /// run in softirq and the test reads in process context: irq-safe.
    #[pin_data]
    struct Sink {
        #[pin]
        inner: SpinLockIrq<SinkState>,
    }

    struct SinkState {
        data: KVec<u8>,
        state: Option<TcpState>,
        calls: usize,
    }

    impl SocketEvents for Sink {
        fn data_ready(&self, rx: &SockRx<'_>) {
            {
                let mut g = self.inner.lock();
                g.calls += 1;
                g.state = Some(rx.state());
            }
            // Lock per chunk, not around the read: `tcp_read_sock` may send
            // an ACK, which must not run with interrupts off (as the QP's
            // RX does it).
            rx.read(&mut |chunk: &[u8]| match self
                .inner
                .lock()
                .data
                .extend_from_slice(chunk, GFP_ATOMIC)
            {
                Ok(()) => chunk.len(),
                Err(_) => 0,
            });
        }

        fn state_change(&self, rx: &SockRx<'_>) {
            self.inner.lock().state = Some(rx.state());
        }
    }

    fn pattern(i: usize) -> u8 {
        (i * 31 + i / 251) as u8
    }

    /// Polls `cond` every millisecond for up to `ms` milliseconds.
    fn wait_until(ms: u32, mut cond: impl FnMut() -> bool) -> bool {
        for _ in 0..ms {
            if cond() {
                return true;
            }
            fsleep(Delta::from_millis(1));
        }
        cond()
    }

    #[test]
    fn loopback_stream_arrives_whole_and_in_order() -> Result {
        let any = SockAddr::V4 {
            addr: [127, 0, 0, 1],
            port: 0,
        };
        let listener = TcpSocket::listen(Net::init(), any, 4)?;
        let port = listener.local_addr()?.port();
        assert!(port != 0);

        let client = TcpSocket::connect(Net::init(), any.with_port(port), false)?;
        assert_eq!(client.state(), TcpState::Established);
        let mut server = None;
        assert!(wait_until(2000, || {
            server = listener.accept().ok().flatten();
            server.is_some()
        }));
        let mut server = server.ok_or(ENOTCONN)?;
        assert_eq!(server.peer_addr()?, client.local_addr()?);

        let sink = Arc::pin_init(
            pin_init!(Sink {
                inner <- new_spinlock_irq!(SinkState { data: KVec::new(), state: None, calls: 0 }),
            }),
            GFP_KERNEL,
        )?;
        // Bytes sent before the hook are read from process context.
        assert_eq!(client.send(&[b"early"], false)?, 5);
        assert!(wait_until(2000, || {
            let mut early = [0u8; 5];
            let mut got = 0;
            server.read(&mut |c: &[u8]| {
                let n = c.len().min(early.len() - got);
                early[got..got + n].copy_from_slice(&c[..n]);
                got += n;
                n
            });
            got == 5 && &early == b"early"
        }));
        server.hook(sink.clone())?;

        // 256 KiB: more than the socket buffers, so sends come back short
        // and the receiver sees many skbs and fragments.
        const LEN: usize = 256 * 1024;
        let mut buf = KVec::with_capacity(LEN, GFP_KERNEL)?;
        for i in 0..LEN {
            buf.push(pattern(i), GFP_KERNEL)?;
        }
        let mut sent = 0;
        let mut tries = 0;
        while sent < LEN && tries < 20_000 {
            tries += 1;
            match client.send(&[&buf[sent..]], false) {
                Ok(n) => sent += n,
                Err(e) if e == EAGAIN => fsleep(Delta::from_millis(1)),
                Err(e) => return Err(e),
            }
        }
        assert_eq!(sent, LEN);
        assert!(wait_until(5000, || sink.inner.lock().data.len() >= LEN));
        {
            let g = sink.inner.lock();
            assert_eq!(g.data.len(), LEN);
            assert!(g.calls > 0);
            assert!(g.data.iter().enumerate().all(|(i, &b)| b == pattern(i)));
        }

        // The peer's FIN is reported as a state change.
        client.shutdown();
        assert!(wait_until(2000, || matches!(
            sink.inner.lock().state,
            Some(s) if s.is_closing()
        )));
        server.unhook();
        Ok(())
    }

    #[test]
    fn connect_to_a_closed_port_is_refused() {
        let any = SockAddr::V4 {
            addr: [127, 0, 0, 1],
            port: 0,
        };
        // Find a free port by binding and closing a listener.
        let port = match TcpSocket::listen(Net::init(), any, 1).and_then(|l| l.local_addr()) {
            Ok(a) => a.port(),
            Err(_) => 0,
        };
        assert!(port != 0);
        // The namespace of a net_device: lo lives in the initial one.
        let net = match crate::ffi::net::netdev::NetDevRef::by_name(c"lo") {
            Some(lo) => Net::of(&lo),
            None => Net::init(),
        };
        let r = TcpSocket::connect(net, any.with_port(port), false);
        assert!(matches!(r, Err(e) if e == ECONNREFUSED));
    }
}

/// Two QPs on one device joined by a kernel TCP connection (MPA already
/// settled: `attach` with the parameters a CM would have negotiated), driven
/// through the kernel verbs as a ULP drives them.
#[cfg(rsiw_kunit)]
#[kunit_tests(rsiw_qp_datapath)]
mod qp_datapath {
    use kernel::{
        prelude::*,
        time::{delay::fsleep, Delta},
    };

    use crate::{
        ffi::{
            consumer::cq::{
                KCq, WC_RECV, WC_RECV_RDMA_WITH_IMM, WC_SEND, WC_SUCCESS, WC_WR_FLUSH_ERR, WITH_IMM,
            },
            consumer::device::Found,
            consumer::mr::KPd,
            consumer::qp::*,
            net::netdev::NetDevRef,
            net::socket::TcpSocket,
        },
        qp::QpState,
    };

    use crate::selftest::util::{check, stream_params as params, EMSS};

    fn pattern(seed: u8, buf: &mut [u8]) {
        for (i, b) in buf.iter_mut().enumerate() {
            *b = seed
                .wrapping_add((i * 7) as u8)
                .wrapping_add((i >> 8) as u8);
        }
    }

    fn run(crc: bool, markers: bool) -> Result {
        let lo = NetDevRef::by_name(c"lo").ok_or(ENODEV)?;
        crate::device::verbs::create(c"rsiw_qpt0", &lo, false)?;
        let dev = Found::by_netdev(&lo).ok_or(ENODEV)?;
        {
            let pd = KPd::alloc(&dev, true)?;
            let (lkey, rkey) = (pd.local_dma_lkey(), pd.unsafe_global_rkey());
            let (cq_a, cq_b) = (KCq::create(&dev, 64)?, KCq::create(&dev, 64)?);
            let a = KQp::create(&pd, &cq_a, &cq_a, 16)?;
            let b = KQp::create(&pd, &cq_b, &cq_b, 16)?;
            a.modify(QpState::Init)?;
            b.modify(QpState::Init)?;

            const LEN: usize = 20000; // several FPDUs
            let mut src = KVec::from_elem(0u8, LEN, GFP_KERNEL)?;
            let mut dst = KVec::from_elem(0u8, LEN, GFP_KERNEL)?;
            // The device writes here behind Rust's back: hand out a
            // mutable pointer so the compiler never assumes it unchanged.
            let dst_addr = dst.as_mut_ptr() as u64;
            pattern(3, &mut src);
            b.post_recv(100, Seg::of(&dst, lkey))?;

            let (sa, sb) = TcpSocket::loopback_pair()?;
            a.qp::<crate::device::Rsiw>()
                .attach(sa, &params(true, crc, markers), EMSS, &[])?;
            b.qp::<crate::device::Rsiw>()
                .attach(sb, &params(false, crc, markers), EMSS, &[])?;

            // Send -> Recv.
            a.post(1, WR_SEND, &[Seg::of(&src, lkey)], None, true)?;
            let wc = cq_a.poll_one(5000).ok_or(ETIMEDOUT)?;
            check!((wc.wr_id, wc.status, wc.opcode) == (1, WC_SUCCESS, WC_SEND));
            let wc = cq_b.poll_one(5000).ok_or(ETIMEDOUT)?;
            check!(
                (wc.wr_id, wc.status, wc.opcode, wc.byte_len)
                    == (100, WC_SUCCESS, WC_RECV, LEN as u32)
            );
            check!(src[..] == dst[..]);
            check!(
                a.qp::<crate::device::Rsiw>().ib_state() == QpState::Rts
                    && b.qp::<crate::device::Rsiw>().ib_state() == QpState::Rts
            );

            // RDMA Write: A's buffer into B's memory (the global rkey).
            pattern(9, &mut src);
            a.post(
                2,
                WR_WRITE,
                &[Seg::of(&src, lkey)],
                Some((rkey, dst_addr)),
                true,
            )?;
            let wc = cq_a.poll_one(5000).ok_or(ETIMEDOUT)?;
            check!((wc.wr_id, wc.status, wc.opcode) == (2, WC_SUCCESS, WC_RDMA_WRITE));
            // The Write's completion at A means the data left; B places it
            // as it arrives: wait for it.
            let mut same = false;
            for _ in 0..5000 {
                if &src[..] == core::hint::black_box(&dst[..]) {
                    same = true;
                    break;
                }
                fsleep(Delta::from_millis(1));
            }
            check!(same);

            // RDMA Read: B's memory back into a fresh buffer at A.
            let mut back = KVec::from_elem(0u8, LEN, GFP_KERNEL)?;
            a.post(
                3,
                WR_READ,
                &[Seg::of(&back, lkey)],
                Some((rkey, dst_addr)),
                true,
            )?;
            let wc = cq_a.poll_one(5000).ok_or(ETIMEDOUT)?;
            check!(
                (wc.wr_id, wc.status, wc.opcode, wc.byte_len)
                    == (3, WC_SUCCESS, WC_RDMA_READ, LEN as u32)
            );
            check!(back[..] == src[..]);
            back[0] ^= 1; // keep `back` mutable-borrowed semantics honest

            // Write with Immediate (RFC 7306: Write, then Immediate Data):
            // the target's receive completes with the immediate after the
            // data is placed.
            pattern(21, &mut src);
            b.post_recv(102, Seg::of(&back, lkey))?;
            a.post_write_imm(5, Seg::of(&src[..4000], lkey), rkey, dst_addr, 0x1234_5678)?;
            let wc = cq_a.poll_one(5000).ok_or(ETIMEDOUT)?;
            check!((wc.wr_id, wc.status, wc.opcode) == (5, WC_SUCCESS, WC_RDMA_WRITE));
            let wc = cq_b.poll_one(5000).ok_or(ETIMEDOUT)?;
            check!((wc.wr_id, wc.status, wc.opcode) == (102, WC_SUCCESS, WC_RECV_RDMA_WITH_IMM));
            check!(wc.wc_flags & WITH_IMM != 0);
            check!(u32::from_be(wc.ex) == 0x1234_5678);
            check!(dst[..4000] == src[..4000]);

            // Unsupported verbs are refused, not dropped.
            check!(
                a.post(4, WR_SEND_WITH_IMM, &[Seg::of(&src[..8], lkey)], None, true)
                    == Err(EOPNOTSUPP)
            );

            // Error flushes posted receives.
            b.post_recv(101, Seg::of(&dst, lkey))?;
            b.modify(QpState::Err)?;
            let wc = cq_b.poll_one(5000).ok_or(ETIMEDOUT)?;
            check!((wc.wr_id, wc.status) == (101, WC_WR_FLUSH_ERR));
            drop(a);
            drop(b);
        }
        dev.unregister();
        Ok(())
    }

    #[test]
    fn send_write_read_crc() -> Result {
        run(true, false)
    }

    #[test]
    fn send_write_read_markers_no_crc() -> Result {
        run(false, true)
    }

    /// A Send of a few FPDUs from `from` to `to` (its receive posted
    /// first): both completions and the data checked.
    fn send_one(
        (from, from_cq): (&KQp, &KCq),
        (to, to_cq): (&KQp, &KCq),
        lkey: u32,
        id: u64,
    ) -> Result {
        const LEN: usize = 4000;
        let mut src = KVec::from_elem(0u8, LEN, GFP_KERNEL)?;
        let mut dst = KVec::from_elem(0u8, LEN, GFP_KERNEL)?;
        pattern(id as u8, &mut src);
        to.post_recv(id + 100, Seg::of_mut(&mut dst, lkey))?;
        from.post(id, WR_SEND, &[Seg::of(&src, lkey)], None, true)?;
        let wc = from_cq.poll_one(5000).ok_or(ETIMEDOUT)?;
        check!((wc.wr_id, wc.status, wc.opcode) == (id, WC_SUCCESS, WC_SEND));
        let wc = to_cq.poll_one(5000).ok_or(ETIMEDOUT)?;
        check!(
            (wc.wr_id, wc.status, wc.opcode, wc.byte_len)
                == (id + 100, WC_SUCCESS, WC_RECV, LEN as u32)
        );
        check!(&src[..] == core::hint::black_box(&dst[..]));
        Ok(())
    }

    /// A QP that failed is reset and connected again, as the verbs allow
    /// (Error, Reset, Init, then the CM's hand-off): the new stream sends
    /// and receives, with none of the last stream's end (`dead`) or
    /// failure left.
    #[test]
    fn a_reset_qp_connects_again() -> Result {
        crate::selftest::util::with_pair(
            c"rsiw_qpt1",
            true,
            |_, _| {},
            |p| {
                let (a, b) = ((p.a, p.cq_a), (p.b, p.cq_b));
                let qp = |q: &KQp| q.qp::<crate::device::Rsiw>();
                send_one(a, b, p.lkey, 1)?;
                send_one(b, a, p.lkey, 2)?;
                for q in [p.a, p.b] {
                    q.modify(QpState::Err)?;
                }
                check!(qp(p.a).stream_status().failed);
                for q in [p.a, p.b] {
                    q.modify(QpState::Reset)?;
                    q.modify(QpState::Init)?;
                }
                // Nothing was outstanding: nothing flushed.
                check!(p.cq_a.poll_one(1).is_none() && p.cq_b.poll_one(1).is_none());
                let (sa, sb) = TcpSocket::loopback_pair()?;
                qp(p.a).attach(sa, &params(true, true, false), EMSS, &[])?;
                qp(p.b).attach(sb, &params(false, true, false), EMSS, &[])?;
                check!(!qp(p.a).stream_status().failed && !qp(p.b).stream_status().failed);
                send_one(a, b, p.lkey, 3)?;
                send_one(b, a, p.lkey, 4)?;
                check!(qp(p.a).ib_state() == QpState::Rts && qp(p.b).ib_state() == QpState::Rts);
                Ok(())
            },
        )
    }
}
