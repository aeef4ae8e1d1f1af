// SPDX-License-Identifier: GPL-2.0
//! Scale soak as a kernel ULP: N
//! connected QP pairs at once through rdma_cm between two rsiw devices on
//! the guest's veth pair (`rsiwkt0` 10.98.0.1 server / `rsiwkt1`
//! 10.98.0.2 client, as `rsiw_rdma_cm`), traffic on every one, all torn
//! down; R rounds; after each the devices' object counts are back where
//! they were. N and R are the test build's module parameters
//! `kunit_scale_qps` (default 16) and `kunit_scale_rounds` (default 2):
//! the defaults run at every insmod of the test module,
//! `tests/stress/soak-kernel.sh` runs N = 1024.
//!
//! Each connection as a ULP builds it: PDs without the global rkey, a send
//! and a receive CQ and an RC QP per side, the client's receive buffer for
//! RDMA Writes fast-registered (`IB_WR_REG_MR`). Traffic: a Send client
//! to server, an RDMA Write (two FPDUs) and a Send server to client, every
//! octet checked (each connection's data is its own, so a payload that
//! lands in another connection's buffer is caught).

#[cfg(rsiw_kunit)]
use kernel::prelude::*;

#[cfg(rsiw_kunit)]
#[kunit_tests(rsiw_scale)]
mod tests {
    use kernel::{
        prelude::*,
        time::{delay::fsleep, Delta, Instant, Monotonic},
    };

    use crate::{
        device::Limits,
        ffi::consumer::{flush::mark_skipped, rdma_cm::*},
        selftest::cm::harness::{check, Devices, Side, V4_CLIENT, V4_SERVER},
    };

    /// Connections opened before their requests are accepted: within the
    /// listener's backlog, and few enough that the last one's MPA Request
    /// is answered well inside rsiw's 10 s MPA timeout under TCG.
    const BATCH: usize = 32;
    const BACKLOG: i32 = 2 * BATCH as i32;
    /// Bound on every event and completion wait (TCG, 1024 connections).
    const WAIT: u32 = 30_000;
    /// Work requests per queue (at most three are outstanding).
    const WR: u32 = 8;

    const SEND_LEN: usize = 512; // client -> server
    const WRITE_LEN: usize = 2048; // server -> client: two FPDUs
    const REPLY_LEN: usize = 64; // server -> client
    /// The test's own buffers per connection (kmalloc'd: they are in the
    /// slab figures `soak-kernel.sh` prints).
    const BUF_OCTETS: usize = 2 * SEND_LEN + WRITE_LEN + 4096 + 2 * REPLY_LEN;

    /// One connection's memory: sources and sinks of its traffic.
    struct Bufs {
        c_tx: KVec<u8>,
        s_rx: KVec<u8>,
        s_wsrc: KVec<u8>,
        /// The client's fast-registered Write sink (one page).
        c_wdst: KVec<u8>,
        s_tx: KVec<u8>,
        c_rx: KVec<u8>,
    }

    /// Octets from an xorshift seeded with `tag` (connection, round and
    /// stream): each connection's data differs from every other's.
    fn fill(buf: &mut [u8], tag: u32) {
        let mut x = tag.wrapping_mul(0x9E37_79B1) | 1;
        for b in buf.iter_mut() {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            *b = x as u8;
        }
    }

    impl Bufs {
        fn new(round: u32, i: usize) -> Result<Self> {
            let tag = (round << 24) ^ ((i as u32) << 2);
            let data = |len: usize, stream: u32| -> Result<KVec<u8>> {
                let mut v = KVec::from_elem(0u8, len, GFP_KERNEL)?;
                fill(&mut v, tag ^ stream);
                Ok(v)
            };
            let zero = |len: usize| KVec::from_elem(0u8, len, GFP_KERNEL);
            Ok(Self {
                c_tx: data(SEND_LEN, 1)?,
                s_rx: zero(SEND_LEN)?,
                s_wsrc: data(WRITE_LEN, 2)?,
                c_wdst: zero(4096)?,
                s_tx: data(REPLY_LEN, 3)?,
                c_rx: zero(REPLY_LEN)?,
            })
        }
    }

    /// One connection; fields drop in order: the MR before the client's
    /// PD, the memory after both QPs.
    struct Conn {
        mr: Option<FrMr>,
        client: Side,
        server: Option<Side>,
        b: Bufs,
    }

    impl Conn {
        fn server(&self) -> Result<&Side> {
            self.server.as_ref().ok_or(ENOTCONN)
        }
    }

    /// PD (no global rkey), CQs and an RC QP on the id's device.
    fn equip(id: CmId) -> Result<Side> {
        let dev = id.device();
        let pd = Pd::alloc_local(dev)?;
        let (scq, rcq) = (Cq::create(dev, 2 * WR)?, Cq::create(dev, 2 * WR)?);
        let qp_events = KBox::pin(QpEvents::default(), GFP_KERNEL)?;
        id.create_qp(&pd, &scq, &rcq, WR, &qp_events)?;
        Ok(Side {
            id,
            scq,
            rcq,
            pd,
            qp_events,
        })
    }

    /// `r`, with what failed and where logged.
    fn at<T>(r: Result<T>, round: u32, i: usize, n: usize, what: &str) -> Result<T> {
        r.inspect_err(|e| {
            pr_err!(
                "rsiw kunit: rsiw_scale round {}: connection {} of {}: {} failed: {:?}\n",
                round,
                i,
                n,
                what,
                e
            )
        })
    }

    /// The next completion on `cq`, which must be `(wr_id, SUCCESS, opcode)`.
    fn done(cq: &Cq, wr_id: u64, opcode: u32) -> Result<Wc> {
        let wc = cq.poll(WAIT).ok_or_else(|| {
            pr_err!(
                "rsiw kunit: rsiw_scale: no completion of wr {} within {} ms\n",
                wr_id,
                WAIT
            );
            ETIMEDOUT
        })?;
        if (wc.wr_id, wc.status, wc.opcode) != (wr_id, WC_SUCCESS, opcode) {
            pr_err!(
                "rsiw kunit: rsiw_scale: wc {:?}, expected wr_id {} opcode {}\n",
                wc,
                wr_id,
                opcode
            );
            return Err(EIO);
        }
        Ok(wc)
    }

    /// What the devices (server 0, client 1) and the CM hold.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    struct Counts {
        qps: [u32; 2],
        cqs: [u32; 2],
        pds: [u32; 2],
        mrs: [u32; 2],
        srqs: [u32; 2],
        ceps: usize,
    }

    fn counts(devs: &Devices) -> Result<Counts> {
        let mut c = Counts {
            qps: [0; 2],
            cqs: [0; 2],
            pds: [0; 2],
            mrs: [0; 2],
            srqs: [0; 2],
            ceps: 0,
        };
        for d in 0..2 {
            let dev = devs.get(d)?.device::<crate::device::Rsiw>().data();
            c.qps[d] = dev.qp_count();
            c.cqs[d] = dev.cq_count();
            c.pds[d] = dev.pd_count();
            c.mrs[d] = dev.mr_count();
            c.srqs[d] = dev.srq_count();
        }
        c.ceps = crate::cm::live_ceps();
        Ok(c)
    }

    /// Fails clearly, before opening anything, when N connections need
    /// more objects on a device than its limits allow.
    fn fits(n: usize, lim: &Limits, base: &Counts) -> Result {
        let mrs = base.mrs[0].max(base.mrs[1]);
        let need = [
            ("QPs", n, base.qps[0].max(base.qps[1]), lim.max_qp, "max_qp"),
            (
                "CQs",
                2 * n,
                base.cqs[0].max(base.cqs[1]),
                lim.max_cq,
                "max_cq",
            ),
            ("PDs", n, base.pds[0].max(base.pds[1]), lim.max_pd, "max_pd"),
            // At most two per connection: a PD's local DMA MR, the client's FR MR.
            ("MRs", 2 * n, mrs, lim.max_mr, "max_mr"),
        ];
        for (what, want, held, max, name) in need {
            if want.saturating_add(held as usize) > max as usize {
                pr_err!(
                    "rsiw kunit: rsiw_scale: kunit_scale_qps={} needs {} {} on each device ({} held already), over its {} of {}: not attempted\n",
                    n, want, what, held, name, max
                );
                return Err(E2BIG);
            }
        }
        Ok(())
    }

    /// Opens `n` connections in batches: clients resolved and equipped,
    /// their connects, the requests accepted (matched by the index in the
    /// private data), then ESTABLISHED on both ends of each.
    fn open(listener: &CmId, port: u16, n: usize, round: u32, conns: &mut KVec<Conn>) -> Result {
        let to = V4_SERVER.with_port(port);
        let mut first = 0;
        while first < n {
            let end = (first + BATCH).min(n);
            for i in first..end {
                let id = at(CmId::new(), round, i, n, "rdma_create_id")?;
                at(
                    id.resolve(Some(V4_CLIENT), to, 2000),
                    round,
                    i,
                    n,
                    "address and route resolution",
                )?;
                let client = at(equip(id), round, i, n, "client PD, CQs and QP")?;
                let b = at(Bufs::new(round, i), round, i, n, "buffers")?;
                conns.push(
                    Conn {
                        mr: None,
                        client,
                        server: None,
                        b,
                    },
                    GFP_KERNEL,
                )?;
            }
            for (i, c) in conns.iter().enumerate().skip(first) {
                let mut pd = [b'S', round as u8, 0, 0, 0, 0];
                pd[2..].copy_from_slice(&(i as u32).to_le_bytes());
                at(c.client.id.connect(&pd, 4, 4), round, i, n, "rdma_connect")?;
            }
            for _ in first..end {
                let mut req = at(
                    listener.events().expect(CONNECT_REQUEST, WAIT),
                    round,
                    first,
                    n,
                    "CONNECT_REQUEST",
                )?;
                let p = &req.private_data;
                check!(p.len() == 6 && p[..2] == [b'S', round as u8]);
                let i = u32::from_le_bytes([p[2], p[3], p[4], p[5]]) as usize;
                check!((first..end).contains(&i) && conns[i].server.is_none());
                let id = req.conn.take().ok_or(EINVAL)?;
                let server = at(equip(id), round, i, n, "server PD, CQs and QP")?;
                at(server.id.accept(b"", 4, 4), round, i, n, "rdma_accept")?;
                conns[i].server = Some(server);
            }
            for (i, c) in conns.iter().enumerate().skip(first) {
                at(
                    c.client.id.events().expect(ESTABLISHED, WAIT).map(|_| ()),
                    round,
                    i,
                    n,
                    "client ESTABLISHED",
                )?;
                at(
                    c.server()?
                        .id
                        .events()
                        .expect(ESTABLISHED, WAIT)
                        .map(|_| ()),
                    round,
                    i,
                    n,
                    "server ESTABLISHED",
                )?;
            }
            first = end;
        }
        Ok(())
    }

    /// On every connection at once: the client's Write sink registered,
    /// a Send to the server, a Write and a Send back; every completion
    /// and every octet checked.
    fn traffic(conns: &mut KVec<Conn>, round: u32) -> Result {
        let n = conns.len();
        for (i, c) in conns.iter_mut().enumerate() {
            let mr = at(
                FrMr::map(&c.client.pd, &mut c.b.c_wdst),
                round,
                i,
                n,
                "ib_alloc_mr + ib_map_mr_sg",
            )?;
            at(
                c.client.qp().post_reg_mr(1, &mr, (i as u8) ^ 0x5a),
                round,
                i,
                n,
                "post REG_MR",
            )?;
            c.mr = Some(mr);
        }
        for (i, c) in conns.iter().enumerate() {
            at(
                done(&c.client.scq, 1, WC_REG_MR).map(|_| ()),
                round,
                i,
                n,
                "REG_MR",
            )?;
        }
        for (i, c) in conns.iter().enumerate() {
            let (s, cl, b) = (c.server()?, &c.client, &c.b);
            at(
                s.qp().post_recv(10, Seg::of(&b.s_rx, s.lkey())),
                round,
                i,
                n,
                "server post_recv",
            )?;
            at(
                cl.qp().post_recv(11, Seg::of(&b.c_rx, cl.lkey())),
                round,
                i,
                n,
                "client post_recv",
            )?;
        }
        for (i, c) in conns.iter().enumerate() {
            let (s, cl, b) = (c.server()?, &c.client, &c.b);
            let (_, rkey, iova) = c.mr.as_ref().ok_or(EINVAL)?.keys();
            at(
                cl.qp().post(2, Op::Send, Some(Seg::of(&b.c_tx, cl.lkey()))),
                round,
                i,
                n,
                "client Send",
            )?;
            let w = Op::Write { rkey, addr: iova };
            at(
                s.qp().post(3, w, Some(Seg::of(&b.s_wsrc, s.lkey()))),
                round,
                i,
                n,
                "server RDMA Write",
            )?;
            at(
                s.qp().post(4, Op::Send, Some(Seg::of(&b.s_tx, s.lkey()))),
                round,
                i,
                n,
                "server Send",
            )?;
        }
        for (i, c) in conns.iter().enumerate() {
            let (s, cl, b) = (c.server()?, &c.client, &c.b);
            at(
                done(&cl.scq, 2, WC_SEND).map(|_| ()),
                round,
                i,
                n,
                "client Send completion",
            )?;
            let wc = at(done(&s.rcq, 10, WC_RECV), round, i, n, "server receive")?;
            check!(
                wc.byte_len == SEND_LEN as u32 && core::hint::black_box(&b.s_rx[..]) == &b.c_tx[..]
            );
            at(
                done(&s.scq, 3, WC_WRITE).map(|_| ()),
                round,
                i,
                n,
                "server Write completion",
            )?;
            at(
                done(&s.scq, 4, WC_SEND).map(|_| ()),
                round,
                i,
                n,
                "server Send completion",
            )?;
            // The Send was placed after the Write (RDMAP ordering): at its
            // completion the Write's data is in the sink, and only there.
            let wc = at(done(&cl.rcq, 11, WC_RECV), round, i, n, "client receive")?;
            check!(
                wc.byte_len == REPLY_LEN as u32
                    && core::hint::black_box(&b.c_rx[..]) == &b.s_tx[..]
            );
            let sink = core::hint::black_box(&b.c_wdst[..]);
            check!(sink[..WRITE_LEN] == b.s_wsrc[..] && sink[WRITE_LEN..].iter().all(|&x| x == 0));
        }
        Ok(())
    }

    /// Every client disconnects; DISCONNECTED at both ends of each, no
    /// QP_FATAL anywhere.
    fn close(conns: &KVec<Conn>, round: u32) -> Result {
        let n = conns.len();
        for (i, c) in conns.iter().enumerate() {
            at(c.client.id.disconnect(), round, i, n, "rdma_disconnect")?;
        }
        for (i, c) in conns.iter().enumerate() {
            let s = c.server()?;
            at(
                c.client.id.events().expect(DISCONNECTED, WAIT).map(|_| ()),
                round,
                i,
                n,
                "client DISCONNECTED",
            )?;
            at(
                s.id.events().expect(DISCONNECTED, WAIT).map(|_| ()),
                round,
                i,
                n,
                "server DISCONNECTED",
            )?;
            check!(c.client.fatal_events() == 0 && s.fatal_events() == 0);
        }
        Ok(())
    }

    /// Polls until the counts are `want`, for up to [`WAIT`] ms.
    fn settle(devs: &Devices, want: &Counts) -> Result<Counts> {
        let mut now = counts(devs)?;
        for _ in 0..WAIT / 10 {
            if now == *want {
                break;
            }
            fsleep(Delta::from_millis(10));
            now = counts(devs)?;
        }
        Ok(now)
    }

    fn ms(t: Instant<Monotonic>) -> i64 {
        t.elapsed().as_millis()
    }

    #[test]
    fn qps_open_carry_traffic_close_and_leave_nothing() -> Result {
        let n = crate::module_parameters::kunit_scale_qps.value() as usize;
        let rounds = crate::module_parameters::kunit_scale_rounds.value();
        if n == 0 || rounds == 0 {
            mark_skipped(c"kunit_scale_qps=0 or kunit_scale_rounds=0");
            return Ok(());
        }
        let devs = Devices::create(&[(c"rsiw_scale0", c"rsiwkt0"), (c"rsiw_scale1", c"rsiwkt1")])?;
        let base = counts(&devs)?;
        for d in 0..2 {
            fits(
                n,
                devs.get(d)?.device::<crate::device::Rsiw>().data().limits(),
                &base,
            )?;
        }
        pr_info!(
            "rsiw kunit: rsiw_scale: {} connections x {} rounds (test buffers {} octets per connection)\n",
            n, rounds, BUF_OCTETS
        );
        for round in 0..rounds {
            let t = Instant::<Monotonic>::now();
            let listener = CmId::new()?;
            listener.bind(V4_SERVER)?;
            listener.listen(BACKLOG)?;
            let port = listener.local_addr().map_or(0, |a| a.port());
            check!(port != 0);
            let mut conns = KVec::with_capacity(n, GFP_KERNEL)?;
            open(&listener, port, n, round, &mut conns)?;
            let t_open = ms(t);
            // Every object accounted while they are all up.
            let up = counts(&devs)?;
            let n32 = n as u32;
            for d in 0..2 {
                check!(up.qps[d] == base.qps[d] + n32 && up.cqs[d] == base.cqs[d] + 2 * n32);
                check!(up.pds[d] == base.pds[d] + n32);
            }
            if round == 0 {
                pr_info!(
                    "rsiw kunit: rsiw_scale: objects while up {:?}, before {:?}\n",
                    up,
                    base
                );
            }
            let t = Instant::<Monotonic>::now();
            traffic(&mut conns, round)?;
            let t_traffic = ms(t);
            check!(counts(&devs)?.mrs[1] >= base.mrs[1] + n32);
            let t = Instant::<Monotonic>::now();
            close(&conns, round)?;
            drop(conns);
            drop(listener);
            let after = settle(&devs, &base)?;
            let t_close = ms(t);
            pr_info!(
                "rsiw kunit: rsiw_scale round {}: {} connections up in {} ms, traffic on all in {} ms, torn down in {} ms\n",
                round, n, t_open, t_traffic, t_close
            );
            if after != base {
                pr_err!(
                    "rsiw kunit: rsiw_scale round {}: objects {:?} after teardown, {:?} before\n",
                    round,
                    after,
                    base
                );
                return Err(EBADMSG);
            }
        }
        pr_info!("rsiw kunit: rsiw_scale: {} rounds of {} connections: every object back to the baseline\n", rounds, n);
        Ok(())
    }
}
