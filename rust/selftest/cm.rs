// SPDX-License-Identifier: GPL-2.0
//! End-to-end self-tests through rdma_cm, as a kernel ULP uses rsiw: two
//! rsiw devices on the guest's veth pair (`rsiwkt0` 10.98.0.1 / fd98::1,
//! `rsiwkt1` 10.98.0.2 / fd98::2, set up by tests/core/foundation.sh
//! before insmod), a listener on one, a client bound to the other, and
//! every operation rsiw supports exchanged with the memory checked.
//!
//! [`harness`] is reusable: [`harness::CmPair`] gives a connected pair of
//! QPs with PDs, CQs and event queues.

#[cfg(rsiw_kunit)]
use kernel::prelude::*;

#[cfg(rsiw_kunit)]
pub(crate) mod harness {
    use kernel::prelude::*;

    use crate::ffi::{
        consumer::device::Found, consumer::rdma_cm::*, net::netdev::NetDevRef,
        net::socket::SockAddr,
    };

    pub(crate) use crate::selftest::util::check;

    pub(crate) const V4_SERVER: SockAddr = SockAddr::V4 {
        addr: [10, 98, 0, 1],
        port: 0,
    };
    pub(crate) const V4_CLIENT: SockAddr = SockAddr::V4 {
        addr: [10, 98, 0, 2],
        port: 0,
    };
    pub(crate) const V6_SERVER: SockAddr = SockAddr::V6 {
        addr: [0xfd, 0x98, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1],
        port: 0,
        scope_id: 0,
    };
    pub(crate) const V6_CLIENT: SockAddr = SockAddr::V6 {
        addr: [0xfd, 0x98, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2],
        port: 0,
        scope_id: 0,
    };

    pub(crate) const V4_ANY: SockAddr = SockAddr::V4 {
        addr: [0; 4],
        port: 0,
    };
    pub(crate) const V6_ANY: SockAddr = SockAddr::V6 {
        addr: [0; 16],
        port: 0,
        scope_id: 0,
    };

    /// Event and completion waits (TCG guests are slow).
    pub(crate) const WAIT_MS: u32 = 5000;

    /// The guest's test netdev `name`, or a clear failure.
    pub(crate) fn netdev(name: &CStr) -> Result<NetDevRef> {
        NetDevRef::by_name(name).ok_or_else(|| {
            pr_err!(
                "rsiw kunit: netdev {} missing: the rdma_cm suites need the guest's veth pairs (tests/core/foundation.sh creates them before insmod)\n",
                name
            );
            ENODEV
        })
    }

    /// rsiw devices on named netdevs, unregistered on drop.
    pub(crate) struct Devices(KVec<Found>);

    impl Devices {
        /// One rsiw device per `(device name, netdev name)`.
        pub(crate) fn create(list: &[(&CStr, &CStr)]) -> Result<Self> {
            let mut v = KVec::new();
            for (name, nd) in list {
                let nd = netdev(nd)?;
                crate::device::verbs::create(name, &nd, false)?;
                v.push(Found::by_netdev(&nd).ok_or(ENODEV)?, GFP_KERNEL)?;
            }
            Ok(Self(v))
        }

        /// The `i`th device created.
        pub(crate) fn get(&self, i: usize) -> Result<&Found> {
            self.0.get(i).ok_or(ENODEV)
        }

        /// rsiw_cm0 on rsiwkt0 (the server side), rsiw_cm1 on rsiwkt1.
        pub(crate) fn pair() -> Result<Self> {
            Self::create(&[(c"rsiw_cm0", c"rsiwkt0"), (c"rsiw_cm1", c"rsiwkt1")])
        }
    }

    impl Drop for Devices {
        fn drop(&mut self) {
            while let Some(f) = self.0.pop() {
                f.unregister();
            }
        }
    }

    /// One end: its id (and QP), CQs, PD; fields drop in this order.
    pub(crate) struct Side {
        pub(crate) id: CmId,
        pub(crate) scq: Cq,
        pub(crate) rcq: Cq,
        pub(crate) pd: Pd,
        pub(crate) qp_events: Pin<KBox<QpEvents>>,
    }

    impl Side {
        /// PD, CQs and an RC QP (`wr` deep) on the id's device.
        pub(crate) fn equip(id: CmId, wr: u32) -> Result<Self> {
            let dev = id.device();
            let pd = Pd::alloc(dev)?;
            let (scq, rcq) = (Cq::create(dev, 2 * wr)?, Cq::create(dev, 2 * wr)?);
            let qp_events = KBox::pin(QpEvents::default(), GFP_KERNEL)?;
            id.create_qp(&pd, &scq, &rcq, wr, &qp_events)?;
            Ok(Self {
                id,
                scq,
                rcq,
                pd,
                qp_events,
            })
        }

        pub(crate) fn qp(&self) -> QpRef {
            self.id.qp()
        }

        pub(crate) fn lkey(&self) -> u32 {
            self.pd.lkey()
        }

        pub(crate) fn rkey(&self) -> u32 {
            self.pd.rkey()
        }

        pub(crate) fn fatal_events(&self) -> u32 {
            self.qp_events
                .fatal
                .load(core::sync::atomic::Ordering::Relaxed)
        }

        /// The next send completion, which must be `(wr_id, SUCCESS, opcode)`.
        pub(crate) fn send_done(&self, wr_id: u64, opcode: u32) -> Result<Wc> {
            let wc = self.scq.poll(WAIT_MS).ok_or(ETIMEDOUT)?;
            if (wc.wr_id, wc.status, wc.opcode) != (wr_id, WC_SUCCESS, opcode) {
                pr_err!(
                    "rsiw kunit: send wc {:?}, expected wr_id {} opcode {}\n",
                    wc,
                    wr_id,
                    opcode
                );
                return Err(EIO);
            }
            Ok(wc)
        }

        /// The next receive completion, which must be `(wr_id, SUCCESS, opcode)`.
        pub(crate) fn recv_done(&self, wr_id: u64, opcode: u32) -> Result<Wc> {
            let wc = self.rcq.poll(WAIT_MS).ok_or(ETIMEDOUT)?;
            if (wc.wr_id, wc.status, wc.opcode) != (wr_id, WC_SUCCESS, opcode) {
                pr_err!(
                    "rsiw kunit: recv wc {:?}, expected wr_id {} opcode {}\n",
                    wc,
                    wr_id,
                    opcode
                );
                return Err(EIO);
            }
            Ok(wc)
        }
    }

    /// How to connect.
    pub(crate) struct PairOpts<'a> {
        /// The listener's address (port 0: rdma_cm picks one).
        pub(crate) listen: SockAddr,
        /// Where the client connects (the listener's port is filled in).
        pub(crate) to: SockAddr,
        /// The client's source address (selects its device).
        pub(crate) from: SockAddr,
        pub(crate) client_pd: &'a [u8],
        pub(crate) server_pd: &'a [u8],
        /// (responder_resources, initiator_depth) of connect and accept.
        pub(crate) client_rr_id: (u8, u8),
        pub(crate) server_rr_id: (u8, u8),
        pub(crate) wr: u32,
    }

    impl PairOpts<'static> {
        pub(crate) fn v4() -> Self {
            Self {
                listen: V4_SERVER,
                to: V4_SERVER,
                from: V4_CLIENT,
                client_pd: b"",
                server_pd: b"",
                client_rr_id: (4, 4),
                server_rr_id: (4, 4),
                wr: 16,
            }
        }
    }

    /// What an event carried.
    pub(crate) struct Seen {
        pub(crate) private_data: KVec<u8>,
        /// (initiator_depth, responder_resources)
        pub(crate) id_rr: (u8, u8),
    }

    impl Seen {
        fn of(e: &CmEv) -> Result<Self> {
            let mut private_data = KVec::new();
            private_data.extend_from_slice(&e.private_data, GFP_KERNEL)?;
            Ok(Self {
                private_data,
                id_rr: (e.initiator_depth, e.responder_resources),
            })
        }
    }

    /// A connection made through rdma_cm: client and server ends, the
    /// listener, and what CONNECT_REQUEST and both ESTABLISHED carried.
    pub(crate) struct CmPair {
        pub(crate) client: Side,
        pub(crate) server: Side,
        #[expect(
            dead_code,
            reason = "held, not read: the listener lives as long as the pair"
        )]
        pub(crate) listener: CmId,
        pub(crate) request: Seen,
        pub(crate) client_est: Seen,
        pub(crate) server_est: Seen,
    }

    /// A listening id on `addr`; returns it and its port.
    pub(crate) fn listen(addr: SockAddr) -> Result<(CmId, u16)> {
        let l = CmId::new()?;
        if matches!(addr, SockAddr::V6 { .. }) {
            l.set_afonly(true)?;
        }
        l.bind(addr)?;
        l.listen(8)?;
        let port = l.local_addr().map_or(0, |a| a.port());
        check!(port != 0);
        Ok((l, port))
    }

    /// A client id resolved from `from` to `to`, equipped with a QP.
    pub(crate) fn client(from: SockAddr, to: SockAddr, wr: u32) -> Result<Side> {
        let c = CmId::new()?;
        c.resolve(Some(from), to, 2000)?;
        Side::equip(c, wr)
    }

    impl CmPair {
        pub(crate) fn connect(o: &PairOpts<'_>) -> Result<Self> {
            let (listener, port) = listen(o.listen)?;
            let client = client(o.from, o.to.with_port(port), o.wr)?;
            client
                .id
                .connect(o.client_pd, o.client_rr_id.0, o.client_rr_id.1)?;
            let mut req = listener.events().expect(CONNECT_REQUEST, WAIT_MS)?;
            let request = Seen::of(&req)?;
            let conn = req.conn.take().ok_or(EINVAL)?;
            let server = Side::equip(conn, o.wr)?;
            server
                .id
                .accept(o.server_pd, o.server_rr_id.0, o.server_rr_id.1)?;
            let client_est = Seen::of(&client.id.events().expect(ESTABLISHED, WAIT_MS)?)?;
            let server_est = Seen::of(&server.id.events().expect(ESTABLISHED, WAIT_MS)?)?;
            Ok(Self {
                client,
                server,
                listener,
                request,
                client_est,
                server_est,
            })
        }

        /// `rdma_disconnect` by the client: DISCONNECTED on both sides,
        /// no QP_FATAL anywhere.
        pub(crate) fn disconnect(&self) -> Result {
            self.client.id.disconnect()?;
            self.client.id.events().expect(DISCONNECTED, WAIT_MS)?;
            self.server.id.events().expect(DISCONNECTED, WAIT_MS)?;
            check!(self.client.fatal_events() == 0 && self.server.fatal_events() == 0);
            Ok(())
        }
    }

    /// A buffer filled with a pattern from `seed`.
    pub(crate) fn pattern(seed: u8, len: usize) -> Result<KVec<u8>> {
        let mut v = KVec::with_capacity(len, GFP_KERNEL)?;
        for i in 0..len {
            v.push(
                seed.wrapping_add((i * 7) as u8)
                    .wrapping_add((i >> 8) as u8),
                GFP_KERNEL,
            )?;
        }
        Ok(v)
    }

    /// Polls `cond` every millisecond for up to [`WAIT_MS`].
    pub(crate) fn wait_for(mut cond: impl FnMut() -> bool) -> bool {
        for _ in 0..WAIT_MS {
            if cond() {
                return true;
            }
            kernel::time::delay::fsleep(kernel::time::Delta::from_millis(1));
        }
        cond()
    }

    /// Waits until `buf` equals `want` (RDMA Writes land behind our back).
    pub(crate) fn lands(buf: &[u8], want: &[u8]) -> bool {
        for _ in 0..WAIT_MS {
            // SAFETY-free volatile-ish read: compare through a fresh borrow.
            if core::hint::black_box(buf) == want {
                return true;
            }
            kernel::time::delay::fsleep(kernel::time::Delta::from_millis(1));
        }
        false
    }

    /// Send, Send with Solicited Event, inline Send, Send with Invalidate,
    /// RDMA Write, Write with Immediate, RDMA Read and Read with local
    /// invalidate from `a` to `b`, data checked at the other end.
    /// What the ends of an exchange support beyond the common verbs.
    #[derive(Clone, Copy)]
    pub(crate) struct Caps {
        /// Both ends do Write with Immediate (Linux siw does not; then a
        /// plain Write places the same data).
        pub(crate) write_imm: bool,
        /// The receiver's CQ armed for solicited completions is notified
        /// by a Send with Solicited Event (Linux siw's is not: its receive
        /// completion ignores the solicited flag).
        pub(crate) solicited_notify: bool,
    }

    impl Caps {
        pub(crate) const ALL: Caps = Caps {
            write_imm: true,
            solicited_notify: true,
        };
    }

    pub(crate) fn exchange_all(a: &Side, b: &Side, seed: u8, caps: Caps) -> Result {
        let write_imm = caps.write_imm;
        const LEN: usize = 20000; // several FPDUs
        let src = pattern(seed, LEN)?;
        let mut dst = KVec::from_elem(0u8, LEN, GFP_KERNEL)?;
        let dst_addr = dst.as_mut_ptr() as u64;
        let (al, bl) = (a.lkey(), b.lkey());

        // Send -> Recv.
        b.qp().post_recv(100, Seg::of(&dst, bl))?;
        a.qp().post(1, Op::Send, Some(Seg::of(&src, al)))?;
        a.send_done(1, WC_SEND)?;
        let wc = b.recv_done(100, WC_RECV)?;
        check!(wc.byte_len == LEN as u32 && dst[..] == src[..]);

        // Solicited Event: a CQ armed for solicited completions is
        // notified by the solicited Send only.
        b.rcq.arm(true)?;
        let n0 = b.rcq.notifications();
        let small = pattern(seed ^ 0x55, 300)?;
        b.qp().post_recv(101, Seg::of(&dst, bl))?;
        a.qp().post(2, Op::Send, Some(Seg::of(&small, al)))?;
        a.send_done(2, WC_SEND)?;
        b.recv_done(101, WC_RECV)?;
        kernel::time::delay::fsleep(kernel::time::Delta::from_millis(20));
        check!(b.rcq.notifications() == n0);
        b.qp().post_recv(102, Seg::of(&dst, bl))?;
        a.qp()
            .post(3, Op::SendSolicited, Some(Seg::of(&small, al)))?;
        a.send_done(3, WC_SEND)?;
        b.recv_done(102, WC_RECV)?;
        if caps.solicited_notify {
            // The handler may run just after the completion is pollable.
            check!(wait_for(|| b.rcq.notifications() == n0 + 1));
            check!(b.rcq.notifications() == n0 + 1);
        }
        check!(dst[..300] == small[..]);

        // Inline Send: the source may change right after posting.
        let mut inl = pattern(seed ^ 0x33, 60)?;
        let want = pattern(seed ^ 0x33, 60)?;
        b.qp().post_recv(103, Seg::of(&dst, bl))?;
        a.qp().post(4, Op::SendInline, Some(Seg::of(&inl, 0)))?;
        inl.fill(0);
        a.send_done(4, WC_SEND)?;
        let wc = b.recv_done(103, WC_RECV)?;
        check!(wc.byte_len == 60 && dst[..60] == want[..]);

        // RDMA Write into b's memory (global rkey).
        let wsrc = pattern(seed ^ 0x0f, LEN)?;
        a.qp().post(
            5,
            Op::Write {
                rkey: b.rkey(),
                addr: dst_addr,
            },
            Some(Seg::of(&wsrc, al)),
        )?;
        a.send_done(5, WC_WRITE)?;
        check!(lands(&dst, &wsrc));

        // Write with Immediate: data placed, then b's receive completes
        // with the immediate.
        let isrc = pattern(seed ^ 0x77, 4000)?;
        if write_imm {
            b.qp().post_recv(104, Seg::of(&small, bl))?;
            a.qp().post(
                6,
                Op::WriteImm {
                    rkey: b.rkey(),
                    addr: dst_addr,
                    imm: 0x1234_5678,
                },
                Some(Seg::of(&isrc, al)),
            )?;
            a.send_done(6, WC_WRITE)?;
            let wc = b.recv_done(104, WC_RECV_IMM)?;
            check!(wc.wc_flags & WITH_IMM != 0 && u32::from_be(wc.ex) == 0x1234_5678);
            check!(dst[..4000] == isrc[..]);
        } else {
            a.qp().post(
                6,
                Op::Write {
                    rkey: b.rkey(),
                    addr: dst_addr,
                },
                Some(Seg::of(&isrc, al)),
            )?;
            a.send_done(6, WC_WRITE)?;
            check!(lands(&dst[..4000], &isrc));
        }

        // RDMA Read of b's memory into a fresh buffer.
        let back = KVec::from_elem(0u8, LEN, GFP_KERNEL)?;
        a.qp().post(
            7,
            Op::Read {
                rkey: b.rkey(),
                addr: dst_addr,
            },
            Some(Seg::of(&back, al)),
        )?;
        let wc = a.send_done(7, WC_READ)?;
        check!(wc.byte_len == LEN as u32);
        check!(back[..4000] == isrc[..] && back[4000..] == wsrc[4000..]);

        // Send with Invalidate: b registers an MR, a's Send invalidates it.
        let mut mrbuf = KVec::from_elem(0u8, 8192, GFP_KERNEL)?;
        let mr = FrMr::map(&b.pd, &mut mrbuf)?;
        b.qp().post_reg_mr(105, &mr, 0x5a)?;
        b.send_done(105, WC_REG_MR)?;
        let (_, rkey, _) = mr.keys();
        b.qp().post_recv(106, Seg::of(&dst, bl))?;
        a.qp()
            .post(8, Op::SendInv { rkey }, Some(Seg::of(&small, al)))?;
        a.send_done(8, WC_SEND)?;
        let wc = b.recv_done(106, WC_RECV)?;
        check!(wc.wc_flags & WITH_INVALIDATE != 0 && wc.ex == rkey);
        check!(dst[..300] == small[..]);
        drop(mr);

        // RDMA Read with local invalidate: the sink is a fast-registered
        // MR at a, invalidated when the data is in.
        let mut sink = KVec::from_elem(0u8, 8192, GFP_KERNEL)?;
        let smr = FrMr::map(&a.pd, &mut sink)?;
        a.qp().post_reg_mr(9, &smr, 0x3c)?;
        a.send_done(9, WC_REG_MR)?;
        let (slkey, _, siova) = smr.keys();
        let seg = Seg {
            addr: siova,
            len: 4000,
            lkey: slkey,
        };
        a.qp().post(
            10,
            Op::ReadInv {
                rkey: b.rkey(),
                addr: dst_addr,
            },
            Some(seg),
        )?;
        let wc = a.send_done(10, WC_READ)?;
        // b's memory: the Send with Invalidate's 300 bytes over the
        // Write with Immediate's data.
        check!(wc.byte_len == 4000 && sink[..300] == small[..] && sink[300..4000] == isrc[300..]);
        drop(smr);
        Ok(())
    }
}

#[cfg(rsiw_kunit)]
#[kunit_tests(rsiw_rdma_cm)]
mod tests {
    use kernel::prelude::*;

    use super::harness::*;
    use crate::ffi::{
        consumer::rdma_cm::*,
        net::socket::{Net, TcpSocket, TcpState},
    };

    /// Receives posted on both sides, then the client's `rdma_disconnect`:
    /// DISCONNECTED on both, the receives flushed, no QP_FATAL.
    fn graceful_close(p: &CmPair) -> Result {
        let buf = KVec::from_elem(0u8, 64, GFP_KERNEL)?;
        p.client
            .qp()
            .post_recv(900, Seg::of(&buf, p.client.lkey()))?;
        p.server
            .qp()
            .post_recv(901, Seg::of(&buf, p.server.lkey()))?;
        p.disconnect()?;
        let wc = p.server.rcq.poll(WAIT_MS).ok_or(ETIMEDOUT)?;
        check!((wc.wr_id, wc.status) == (901, WC_WR_FLUSH_ERR));
        let wc = p.client.rcq.poll(WAIT_MS).ok_or(ETIMEDOUT)?;
        check!((wc.wr_id, wc.status) == (900, WC_WR_FLUSH_ERR));
        // The peer's QP is in Error now: a new send is flushed too.
        p.server
            .qp()
            .post(902, Op::Send, Some(Seg::of(&buf, p.server.lkey())))?;
        let wc = p.server.scq.poll(WAIT_MS).ok_or(ETIMEDOUT)?;
        check!((wc.wr_id, wc.status) == (902, WC_WR_FLUSH_ERR));
        check!(p.client.fatal_events() == 0 && p.server.fatal_events() == 0);
        Ok(())
    }

    #[test]
    fn ipv4_connect_exchange_disconnect() -> Result {
        let _devs = Devices::pair()?;
        let o = PairOpts {
            client_pd: b"hello from the client",
            server_pd: b"hello from the server",
            // (responder_resources = IRD, initiator_depth = ORD)
            client_rr_id: (5, 3),
            server_rr_id: (2, 4),
            ..PairOpts::v4()
        };
        let p = CmPair::connect(&o)?;
        check!(&p.request.private_data[..] == b"hello from the client");
        check!(&p.client_est.private_data[..] == b"hello from the server");
        // The request offers the server the client's IRD as its ORD and
        // asks for the client's ORD as its IRD.
        check!(p.request.id_rr == (5, 3));
        // Client: ORD = min(3, server IRD 2), IRD = the server's ORD 4.
        check!(p.client_est.id_rr == (2, 4));
        check!(p.server_est.id_rr == (4, 2));
        exchange_all(&p.client, &p.server, 1, Caps::ALL)?;
        exchange_all(&p.server, &p.client, 2, Caps::ALL)?;
        graceful_close(&p)?;
        Ok(())
    }

    /// RFC 7306 atomics and RDMA Commit between two rsiw devices through
    /// rdma_cm: FetchAdd and CmpSwap on a word of an MR registered with
    /// REMOTE_ATOMIC, then Writes and a Flush (global) that completes only
    /// after them. Both directions.
    #[test]
    fn atomics_and_commit_through_rdma_cm() -> Result {
        let _devs = Devices::pair()?;
        let p = CmPair::connect(&PairOpts::v4())?;
        for (a, b) in [(&p.client, &p.server), (&p.server, &p.client)] {
            let mut target = KVec::from_elem(0u8, 8192, GFP_KERNEL)?;
            target[..8].copy_from_slice(&40u64.to_ne_bytes());
            let mr = FrMr::map(&b.pd, &mut target)?;
            b.qp()
                .post_reg_mr_access(50, &mr, 0x21, ACCESS_REMOTE_ATOMIC | ACCESS_FLUSH_GLOBAL)?;
            b.send_done(50, WC_REG_MR)?;
            let (_, rkey, iova) = mr.keys();
            let orig = KVec::from_elem(0u8, 8, GFP_KERNEL)?;
            let word = |buf: &[u8]| {
                u64::from_ne_bytes([
                    buf[0], buf[1], buf[2], buf[3], buf[4], buf[5], buf[6], buf[7],
                ])
            };

            a.qp()
                .post_atomic(51, rkey, iova, 2, None, Seg::of(&orig, a.lkey()))?;
            a.send_done(51, WC_FETCH_ADD)?;
            check!(word(&orig) == 40 && word(core::hint::black_box(&target[..8])) == 42);
            // Compare matches: swapped; then it no longer does.
            a.qp()
                .post_atomic(52, rkey, iova, 42, Some(7), Seg::of(&orig, a.lkey()))?;
            a.send_done(52, WC_COMP_SWAP)?;
            check!(word(&orig) == 42 && word(core::hint::black_box(&target[..8])) == 7);
            a.qp()
                .post_atomic(53, rkey, iova, 42, Some(9), Seg::of(&orig, a.lkey()))?;
            a.send_done(53, WC_COMP_SWAP)?;
            check!(word(&orig) == 7 && word(core::hint::black_box(&target[..8])) == 7);

            // Writes, then a Flush of the range: at its completion every
            // Write before it is placed (the Commit is ordered after them).
            let data = pattern(0x61, 4096)?;
            for (i, chunk) in data.chunks(1024).enumerate() {
                let off = 4096 + (i * 1024) as u64;
                a.qp().post(
                    60 + i as u64,
                    Op::Write {
                        rkey,
                        addr: iova + off,
                    },
                    Some(Seg::of(chunk, a.lkey())),
                )?;
            }
            a.qp().post_flush(70, rkey, iova + 4096, 4096)?;
            for i in 0..4 {
                a.send_done(60 + i, WC_WRITE)?;
            }
            a.send_done(70, WC_FLUSH)?;
            check!(core::hint::black_box(&target[4096..]) == &data[..]);
            drop(mr);
        }
        p.disconnect()?;
        Ok(())
    }

    #[test]
    fn ipv6_connect_exchange_disconnect() -> Result {
        let _devs = Devices::pair()?;
        let o = PairOpts {
            listen: V6_SERVER,
            to: V6_SERVER,
            from: V6_CLIENT,
            client_pd: b"v6?",
            server_pd: b"v6!",
            ..PairOpts::v4()
        };
        let p = CmPair::connect(&o)?;
        check!(&p.request.private_data[..] == b"v6?" && &p.client_est.private_data[..] == b"v6!");
        exchange_all(&p.client, &p.server, 3, Caps::ALL)?;
        graceful_close(&p)?;
        Ok(())
    }

    #[test]
    fn wildcard_listeners_accept_v4_and_v6() -> Result {
        let devs = Devices::pair()?;
        let server_dev = devs.get(0)?.raw();
        for (any, to, from) in [
            (V4_ANY, V4_SERVER, V4_CLIENT),
            (V6_ANY, V6_SERVER, V6_CLIENT),
        ] {
            let o = PairOpts {
                listen: any,
                to,
                from,
                client_pd: b"anyone?",
                server_pd: b"here",
                ..PairOpts::v4()
            };
            let p = CmPair::connect(&o)?;
            check!(
                &p.request.private_data[..] == b"anyone?"
                    && &p.client_est.private_data[..] == b"here"
            );
            // The device owning the dialled address took the connection.
            check!(p.server.id.device() == server_dev);
            exchange_all(&p.client, &p.server, 5, Caps::ALL)?;
            graceful_close(&p)?;
        }
        Ok(())
    }

    #[test]
    fn reject_reaches_the_client_with_private_data() -> Result {
        let _devs = Devices::pair()?;
        let (listener, port) = listen(V4_SERVER)?;
        let c = client(V4_CLIENT, V4_SERVER.with_port(port), 4)?;
        c.id.connect(b"may I?", 4, 4)?;
        let mut req = listener.events().expect(CONNECT_REQUEST, WAIT_MS)?;
        check!(&req.private_data[..] == b"may I?");
        let conn = req.conn.take().ok_or(EINVAL)?;
        conn.reject(b"no, go away")?;
        let rej = c.id.events().expect(REJECTED, WAIT_MS)?;
        check!(&rej.private_data[..] == b"no, go away");
        check!(rej.status == -(ECONNREFUSED.to_errno().abs()));
        drop(conn);
        drop(c);
        drop(listener);
        Ok(())
    }

    /// A connection from the client address's port `q` to the listener
    /// on `port`, where TCP cannot use `q`: the stream goes over another
    /// port of the same address, the client's id keeps `q`, the server
    /// sees the stream's port, and data and the close work.
    fn connect_around_port(listener: &CmId, port: u16, q: u16) -> Result {
        let c = client(V4_CLIENT.with_port(q), V4_SERVER.with_port(port), 16)?;
        check!(c.id.local_addr().map(|a| a.port()) == Some(q));
        c.id.connect(b"", 4, 4)?;
        let mut req = listener.events().expect(CONNECT_REQUEST, WAIT_MS)?;
        let conn = req.conn.take().ok_or(EINVAL)?;
        let peer = conn.remote_addr().ok_or(EINVAL)?;
        let server = Side::equip(conn, 16)?;
        server.id.accept(b"", 4, 4)?;
        c.id.events().expect(ESTABLISHED, WAIT_MS)?;
        server.id.events().expect(ESTABLISHED, WAIT_MS)?;
        check!(peer.port() != q && peer.port() != 0);
        check!(c.id.local_addr().map(|a| a.port()) == Some(q));
        exchange_all(&c, &server, 9, Caps::ALL)?;
        c.id.disconnect()?;
        c.id.events().expect(DISCONNECTED, WAIT_MS)?;
        server.id.events().expect(DISCONNECTED, WAIT_MS)?;
        check!(c.fatal_events() == 0 && server.fatal_events() == 0);
        Ok(())
    }

    /// rdma_cm picks a client's port in its own port space, which TCP's
    /// does not see: a plain TCP socket may hold the same port (here one
    /// bound without `SO_REUSEADDR`; in the field, a TIME_WAIT of a plain
    /// TCP connection): `bind` fails with `EADDRINUSE`.
    #[test]
    fn client_port_held_by_tcp() -> Result {
        let _devs = Devices::pair()?;
        let blocker = TcpSocket::bound_exclusive(Net::init(), V4_CLIENT)?;
        let q = blocker.local_addr()?.port();
        check!(q != 0);
        let (listener, port) = listen(V4_SERVER)?;
        connect_around_port(&listener, port, q)?;
        drop(blocker);
        Ok(())
    }

    /// TCP already has the connection's four-tuple (a socket from the same
    /// port, with `SO_REUSEADDR`, connected to the same listener, which
    /// waits for its MPA request): `bind` succeeds, `connect` fails with
    /// `EADDRNOTAVAIL`.
    #[test]
    fn client_four_tuple_in_use() -> Result {
        let _devs = Devices::pair()?;
        let (listener, port) = listen(V4_SERVER)?;
        let to = V4_SERVER.with_port(port);
        let plain = TcpSocket::unconnected(Net::init(), &to)?;
        plain.bind(V4_CLIENT)?;
        let q = plain.local_addr()?.port();
        check!(q != 0);
        plain.start_connect(to)?;
        check!(wait_for(|| plain.state() == TcpState::Established));
        connect_around_port(&listener, port, q)?;
        drop(plain);
        Ok(())
    }

    #[test]
    fn server_disconnects_first() -> Result {
        let _devs = Devices::pair()?;
        let p = CmPair::connect(&PairOpts::v4())?;
        exchange_all(&p.client, &p.server, 4, Caps::ALL)?;
        p.server.id.disconnect()?;
        p.server.id.events().expect(DISCONNECTED, WAIT_MS)?;
        p.client.id.events().expect(DISCONNECTED, WAIT_MS)?;
        // The client's disconnect after the peer's is a no-op.
        p.client.id.disconnect()?;
        check!(p.client.fatal_events() == 0 && p.server.fatal_events() == 0);
        Ok(())
    }
}
