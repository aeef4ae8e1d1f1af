// SPDX-License-Identifier: GPL-2.0
//! KUnit suite `rsiw_cm`: MPA negotiation between kernel sockets on
//! 127.0.0.1, without iw_cm.

use super::*;

/// MPA negotiation between kernel sockets on 127.0.0.1 through the passive
/// and active paths, without iw_cm: events go to recorders, streams to a
/// test-double QP. Raw sockets play misbehaving peers.
#[cfg(rsiw_kunit)]
#[kunit_tests(rsiw_cm)]
mod cases {
    use super::*;
    use crate::{
        device::DEFAULT_LIMITS,
        engine::{
            error::llp,
            mpa::negotiate::RtrMode,
            wire::mpa::{Enhanced, Kind, Repr, Rtr},
        },
    };

    struct Rec {
        kind: CmEventKind,
        status: i32,
        pdata: KVec<u8>,
        provider: usize,
        ird: u8,
        ord: u8,
    }

    #[pin_data]
    struct Recorder {
        #[pin]
        evs: SpinLockIrq<KVec<Rec>>,
    }

    impl CmEventTarget for Recorder {
        fn deliver(&self, ev: &CmEvent<'_>) -> Result {
            let mut pdata = KVec::new();
            pdata.extend_from_slice(ev.private_data, GFP_ATOMIC)?;
            let r = Rec {
                kind: ev.kind,
                status: ev.status,
                pdata,
                provider: ev.provider_data,
                ird: ev.ird,
                ord: ev.ord,
            };
            self.evs.lock().push(r, GFP_ATOMIC)?;
            Ok(())
        }
    }

    /// (kind, status, private data, provider_data, ird, ord)
    type Ev = (CmEventKind, i32, KVec<u8>, usize, u8, u8);

    impl Recorder {
        fn new() -> Result<Arc<Self>> {
            Arc::pin_init(
                pin_init!(Recorder { evs <- new_spinlock_irq!(KVec::new()) }),
                GFP_KERNEL,
            )
        }

        /// The `n`th event (from 0), waiting up to `ms`.
        fn wait(&self, n: usize, ms: u32) -> Option<Ev> {
            let mut out = None;
            wait_until(ms, || {
                let g = self.evs.lock();
                let Some(r) = g.get(n) else { return false };
                let mut pd = KVec::new();
                let _ = pd.extend_from_slice(&r.pdata, GFP_ATOMIC);
                out = Some((r.kind, r.status, pd, r.provider, r.ird, r.ord));
                true
            });
            out
        }

        fn count(&self) -> usize {
            self.evs.lock().len()
        }
    }

    #[pin_data]
    struct TestQp {
        refuse: bool,
        #[pin]
        got: Mutex<Option<(Stream, CmEventSink)>>,
    }

    impl CmQp for TestQp {
        fn attach(&self, stream: Stream, cm: CmEventSink) -> Result {
            if self.refuse {
                return Err(ENOMEM);
            }
            *self.got.lock() = Some((stream, cm));
            Ok(())
        }

        fn qpn(&self) -> u32 {
            7
        }
    }

    impl TestQp {
        fn new(refuse: bool) -> Result<Arc<Self>> {
            Arc::pin_init(
                pin_init!(TestQp { refuse, got <- new_mutex!(None) }),
                GFP_KERNEL,
            )
        }

        fn params(&self) -> Option<StreamParams> {
            self.got.lock().as_ref().map(|(s, _)| s.params)
        }

        fn sink(&self) -> Option<CmEventSink> {
            self.got.lock().as_ref().map(|(_, c)| c.clone())
        }

        fn take(&self) -> Option<(Stream, CmEventSink)> {
            self.got.lock().take()
        }
    }

    const LO: SockAddr = SockAddr::V4 {
        addr: [127, 0, 0, 1],
        port: 0,
    };

    fn wait_until(ms: u32, mut cond: impl FnMut() -> bool) -> bool {
        for _ in 0..ms {
            if cond() {
                return true;
            }
            fsleep(Delta::from_millis(1));
        }
        cond()
    }

    fn check(c: bool) -> Result {
        if c {
            Ok(())
        } else {
            Err(EINVAL)
        }
    }

    /// Timeouts roomy enough for a KASAN/lockdep kernel under TCG: the
    /// tests that wait for a timeout set a short one themselves.
    fn cfg() -> CmConfig {
        // Independent of the module parameters (mpa_crc, p2p_rtr,
        // rtr_delay_ms).
        CmConfig {
            crc: CrcPolicy::IfPeerAsks,
            mpa_timeout_ms: 3000,
            rtr_timeout_ms: 3000,
            p2p: Some(RtrSet::ALL),
            rtr_delay_ms: 0,
            ..CmConfig::for_device(&DEFAULT_LIMITS)
        }
    }

    /// Counters of a device, for the tests that check what the CM counts.
    fn counters() -> Result<Arc<HwCounters>> {
        Ok(Arc::new(HwCounters::new(), GFP_KERNEL)?)
    }

    fn params<'a>(ird: u32, ord: u32, pd: &'a [u8]) -> ConnParams<'a> {
        ConnParams {
            ird,
            ord,
            private_data: pd,
        }
    }

    fn listen_lo(c: CmConfig) -> Result<(u64, u16, Arc<Recorder>)> {
        let rec = Recorder::new()?;
        let id = listen(Net::init(), LO, 8, ListenOpts::default(), c, rec.clone())?;
        let port = listener_addr(id)?.port();
        Ok((id, port, rec))
    }

    /// No cep left once everything settled.
    fn no_leaks() -> bool {
        wait_until(2000, || live_ceps() == 0)
    }

    /// Reads what is queued on `sock` into `out` for up to `ms`, until
    /// `want` bytes are there.
    fn read_into(sock: &TcpSocket, out: &mut KVec<u8>, want: usize, ms: u32) -> bool {
        wait_until(ms, || {
            sock.read(&mut |c: &[u8]| {
                let n = c.len().min(want.saturating_sub(out.len()));
                match out.extend_from_slice(&c[..n], GFP_ATOMIC) {
                    Ok(()) => n,
                    Err(_) => 0,
                }
            });
            out.len() >= want
        })
    }

    /// A whole connection through both paths: returns the client's and
    /// server's recorders and QPs.
    struct Pair {
        lid: u64,
        crec: Arc<Recorder>,
        srec: Arc<Recorder>,
        cqp: Arc<TestQp>,
        sqp: Arc<TestQp>,
        req: Ev,
    }

    fn pair(
        ccfg: CmConfig,
        scfg: CmConfig,
        cp: &ConnParams<'_>,
        sp: &ConnParams<'_>,
    ) -> Result<Pair> {
        let (lid, port, lrec) = listen_lo(scfg)?;
        let (crec, cqp) = (Recorder::new()?, TestQp::new(false)?);
        connect(
            Net::init(),
            LO,
            LO.with_port(port),
            ccfg,
            cp,
            cqp.clone(),
            crec.clone(),
        )?;
        let req = lrec.wait(0, 3000).ok_or(ETIMEDOUT)?;
        check(req.0 == CmEventKind::ConnectRequest && req.1 == 0)?;
        let (srec, sqp) = (Recorder::new()?, TestQp::new(false)?);
        accept(req.3 as u64, sp, &*sqp, srec.clone())?;
        let rep = crec.wait(0, 3000).ok_or(ETIMEDOUT)?;
        check(rep.0 == CmEventKind::ConnectReply && rep.1 == 0)?;
        Ok(Pair {
            lid,
            crec,
            srec,
            cqp,
            sqp,
            req,
        })
    }

    #[test]
    fn accept_exchanges_private_data_and_ird_ord() -> Result {
        let (kc, ks) = (counters()?, counters()?);
        let (ccfg, scfg) = (
            CmConfig {
                counters: Some(kc.clone()),
                ..cfg()
            },
            CmConfig {
                counters: Some(ks.clone()),
                ..cfg()
            },
        );
        let p = pair(
            ccfg,
            scfg,
            &params(8, 4, b"client-pd"),
            &params(4, 8, b"server-pd"),
        )?;
        // Each side counts the connection once, as established.
        assert_eq!(
            (
                kc.get(HwCounter::CmEstablished),
                ks.get(HwCounter::CmEstablished)
            ),
            (1, 1)
        );
        assert_eq!(
            kc.get(HwCounter::CmFailures) + ks.get(HwCounter::CmFailures),
            0
        );
        // The request as the listener saw it: the client's data, and in
        // rdma_cm's terms (event.ird = the ORD the server may use, <= client
        // IRD; event.ord = the IRD it grants, <= client ORD).
        assert_eq!(&p.req.2[..], b"client-pd");
        assert_eq!((p.req.4, p.req.5), (8, 4));
        let rep = p.crec.wait(0, 10).ok_or(EINVAL)?;
        assert_eq!(&rep.2[..], b"server-pd");
        // CONNECT_REPLY likewise: (client ORD, client IRD).
        assert_eq!((rep.4, rep.5), (4, 8));
        let (cp, sp) = (p.cqp.params().ok_or(EINVAL)?, p.sqp.params().ok_or(EINVAL)?);
        assert!(cp.initiator && !sp.initiator);
        assert_eq!((cp.ird, cp.ord, sp.ird, sp.ord), (8, 4, 4, 8));
        assert_eq!(cp.rtr, Some(RtrMode::Zero(Rtr::Write)));
        assert_eq!(sp.rtr, cp.rtr);
        // Passive ESTABLISHED waits for the QP to see the RTR.
        assert_eq!(p.srec.count(), 0);
        p.sqp.sink().ok_or(EINVAL)?.established();
        let est = p.srec.wait(0, 100).ok_or(EINVAL)?;
        assert_eq!(
            (est.0, est.1, est.4, est.5),
            (CmEventKind::Established, 0, 8, 4)
        );
        // Peer FIN, then teardown: DISCONNECT, CLOSE; nothing after.
        let ssink = p.sqp.sink().ok_or(EINVAL)?;
        ssink.disconnected();
        ssink.closed();
        ssink.closed();
        assert!(ssink.is_closed());
        assert_eq!(
            p.srec.wait(1, 100).map(|e| e.0),
            Some(CmEventKind::Disconnect)
        );
        assert_eq!(p.srec.wait(2, 100).map(|e| e.0), Some(CmEventKind::Close));
        // The client's QP drops its stream and sink without a word: CLOSE.
        drop(ssink);
        drop(p.cqp.take());
        assert_eq!(p.crec.wait(1, 100).map(|e| e.0), Some(CmEventKind::Close));
        drop(p.sqp.take());
        assert_eq!(p.srec.count(), 3);
        assert_eq!(p.crec.count(), 2);
        destroy_listener(p.lid);
        assert!(no_leaks());
        Ok(())
    }

    #[test]
    fn every_rtr_kind_and_client_server() -> Result {
        let kinds = [Some(Rtr::Send), Some(Rtr::Write), Some(Rtr::Read), None];
        for k in kinds {
            let ccfg = CmConfig {
                p2p: k.map(RtrSet::one),
                ..cfg()
            };
            let p = pair(ccfg, cfg(), &params(4, 4, b""), &params(4, 4, b""))?;
            let (cp, sp) = (p.cqp.params().ok_or(EINVAL)?, p.sqp.params().ok_or(EINVAL)?);
            assert_eq!(cp.rtr, k.map(RtrMode::Zero));
            assert_eq!(sp.rtr, cp.rtr);
            if k.is_none() {
                // Client-server: the CM reports ESTABLISHED itself.
                assert_eq!(
                    p.srec.wait(0, 200).map(|e| (e.0, e.1)),
                    Some((CmEventKind::Established, 0))
                );
            } else {
                assert_eq!(p.srec.count(), 0);
                p.sqp.sink().ok_or(EINVAL)?.established();
                assert_eq!(
                    p.srec.wait(0, 100).map(|e| e.0),
                    Some(CmEventKind::Established)
                );
            }
            drop(p.cqp.take());
            drop(p.sqp.take());
            destroy_listener(p.lid);
        }
        // Read RTR works with IRD 0 on the responder's side too.
        let ccfg = CmConfig {
            p2p: Some(RtrSet::one(Rtr::Read)),
            ..cfg()
        };
        let p = pair(ccfg, cfg(), &params(4, 4, b""), &params(0, 4, b""))?;
        assert_eq!(
            p.sqp.params().and_then(|s| s.rtr),
            Some(RtrMode::Zero(Rtr::Read))
        );
        drop(p.cqp.take());
        drop(p.sqp.take());
        destroy_listener(p.lid);
        // A responder without a common RTR kind refuses: ECONNREFUSED.
        let (lid, port, lrec) = listen_lo(CmConfig {
            rtr: RtrSet::one(Rtr::Send),
            ..cfg()
        })?;
        let (crec, cqp) = (Recorder::new()?, TestQp::new(false)?);
        let ccfg = CmConfig {
            p2p: Some(RtrSet::one(Rtr::Write)),
            ..cfg()
        };
        connect(
            Net::init(),
            LO,
            LO.with_port(port),
            ccfg,
            &params(4, 4, b""),
            cqp.clone(),
            crec,
        )
        .and(Ok(()))?;
        assert!(no_leaks());
        assert_eq!(lrec.count(), 0);
        destroy_listener(lid);
        assert!(cqp.params().is_none());
        Ok(())
    }

    #[test]
    fn crc_and_markers_follow_the_request() -> Result {
        for (crc, markers) in [(false, false), (true, false), (false, true), (true, true)] {
            let ccfg = CmConfig {
                crc: if crc {
                    CrcPolicy::Required
                } else {
                    CrcPolicy::IfPeerAsks
                },
                markers,
                ..cfg()
            };
            let p = pair(ccfg, cfg(), &params(2, 2, b"x"), &params(2, 2, b"y"))?;
            let (cp, sp) = (p.cqp.params().ok_or(EINVAL)?, p.sqp.params().ok_or(EINVAL)?);
            assert_eq!((cp.framing.crc, sp.framing.crc), (crc, crc));
            // The client asked for markers on what it receives.
            assert_eq!(
                (cp.framing.markers_rx, sp.framing.markers_tx),
                (markers, markers)
            );
            assert!(!cp.framing.markers_tx && !sp.framing.markers_rx);
            drop(p.cqp.take());
            drop(p.sqp.take());
            destroy_listener(p.lid);
        }
        assert!(no_leaks());
        Ok(())
    }

    #[test]
    fn reject_carries_private_data() -> Result {
        // Each side counts in its own device counters.
        let (ks, kc) = (counters()?, counters()?);
        let (lid, port, lrec) = listen_lo(CmConfig {
            counters: Some(ks.clone()),
            ..cfg()
        })?;
        let (crec, cqp) = (Recorder::new()?, TestQp::new(false)?);
        let ccfg = CmConfig {
            counters: Some(kc.clone()),
            ..cfg()
        };
        connect(
            Net::init(),
            LO,
            LO.with_port(port),
            ccfg,
            &params(4, 4, b"please"),
            cqp.clone(),
            crec.clone(),
        )?;
        let req = lrec.wait(0, 3000).ok_or(ETIMEDOUT)?;
        assert_eq!(&req.2[..], b"please");
        reject(req.3 as u64, b"go away")?;
        let rep = crec.wait(0, 3000).ok_or(ETIMEDOUT)?;
        assert_eq!(
            (rep.0, rep.1),
            (CmEventKind::ConnectReply, -(ECONNREFUSED.to_errno().abs()))
        );
        assert_eq!(&rep.2[..], b"go away");
        assert!(cqp.params().is_none());
        assert_eq!(
            (
                ks.get(HwCounter::MpaRejectSent),
                ks.get(HwCounter::MpaRejectReceived)
            ),
            (1, 0)
        );
        assert_eq!(
            (
                kc.get(HwCounter::MpaRejectSent),
                kc.get(HwCounter::MpaRejectReceived)
            ),
            (0, 1)
        );
        assert_eq!(
            kc.get(HwCounter::CmFailures) + kc.get(HwCounter::CmEstablished),
            0
        );
        // The id is gone: a second accept or reject finds nothing.
        assert_eq!(reject(req.3 as u64, b""), Err(ECONNRESET));
        destroy_listener(lid);
        assert!(no_leaks());
        Ok(())
    }

    #[test]
    fn qp_refusing_the_stream_fails_accept_and_connect() -> Result {
        let (lid, port, lrec) = listen_lo(cfg())?;
        let (crec, cqp) = (Recorder::new()?, TestQp::new(true)?);
        connect(
            Net::init(),
            LO,
            LO.with_port(port),
            cfg(),
            &params(4, 4, b""),
            cqp,
            crec.clone(),
        )?;
        let req = lrec.wait(0, 3000).ok_or(ETIMEDOUT)?;
        let (srec, sqp) = (Recorder::new()?, TestQp::new(true)?);
        assert_eq!(
            accept(req.3 as u64, &params(4, 4, b""), &*sqp, srec.clone()),
            Err(ENOMEM)
        );
        // The client got the Reply, its QP refused too: CONNECT_REPLY -EINVAL.
        let rep = crec.wait(0, 3000).ok_or(ETIMEDOUT)?;
        assert_eq!(
            (rep.0, rep.1),
            (CmEventKind::ConnectReply, -(EINVAL.to_errno().abs()))
        );
        // A failed accept precludes events.
        fsleep(Delta::from_millis(50));
        assert_eq!(srec.count(), 0);
        destroy_listener(lid);
        assert!(no_leaks());
        Ok(())
    }

    #[test]
    fn silent_peers_time_out() -> Result {
        let k = counters()?;
        let quick = CmConfig {
            mpa_timeout_ms: 200,
            counters: Some(k.clone()),
            ..cfg()
        };
        // Passive: a client that connects and says nothing is dropped.
        let (lid, port, lrec) = listen_lo(quick.clone())?;
        let raw = TcpSocket::connect(Net::init(), LO.with_port(port), false)?;
        assert!(wait_until(500, || live_ceps() == 1));
        assert!(wait_until(3000, || raw.state().is_closing()));
        assert!(no_leaks());
        assert_eq!(lrec.count(), 0);
        destroy_listener(lid);
        // Active: a server that accepts and never replies: -ETIMEDOUT.
        let server = TcpSocket::listen(Net::init(), LO, 4)?;
        let port = server.local_addr()?.port();
        let (crec, cqp) = (Recorder::new()?, TestQp::new(false)?);
        connect(
            Net::init(),
            LO,
            LO.with_port(port),
            quick,
            &params(4, 4, b""),
            cqp,
            crec.clone(),
        )?;
        let rep = crec.wait(0, 3000).ok_or(ETIMEDOUT)?;
        assert_eq!(
            (rep.0, rep.1),
            (CmEventKind::ConnectReply, -(ETIMEDOUT.to_errno().abs()))
        );
        assert!(no_leaks());
        // One timeout each side, nothing else.
        assert_eq!(
            (k.get(HwCounter::CmTimeouts), k.get(HwCounter::CmFailures)),
            (2, 0)
        );
        Ok(())
    }

    #[test]
    fn garbage_and_early_close_are_dropped() -> Result {
        let (lid, port, lrec) = listen_lo(cfg())?;
        // Not MPA at all.
        let raw = TcpSocket::connect(Net::init(), LO.with_port(port), false)?;
        send_all(&raw, b"GET / HTTP/1.1\r\nHost: rsiw\r\n\r\n")?;
        assert!(wait_until(2000, || raw.state().is_closing()));
        // A valid key but PD_Length above 512.
        let raw2 = TcpSocket::connect(Net::init(), LO.with_port(port), false)?;
        let mut bad = [0u8; 20];
        bad[..16].copy_from_slice(b"MPA ID Req Frame");
        bad[16..].copy_from_slice(&[0x00, 0x01, 0x02, 0x01]);
        send_all(&raw2, &bad)?;
        assert!(wait_until(2000, || raw2.state().is_closing()));
        // Half a request, then the peer closes.
        let raw3 = TcpSocket::connect(Net::init(), LO.with_port(port), false)?;
        send_all(&raw3, b"MPA ID Req")?;
        raw3.shutdown();
        assert!(no_leaks());
        assert_eq!(lrec.count(), 0);
        destroy_listener(lid);
        // Active: connecting to a closed port: -ECONNREFUSED.
        let k = counters()?;
        let kcfg = || CmConfig {
            counters: Some(k.clone()),
            ..cfg()
        };
        let closed = TcpSocket::listen(Net::init(), LO, 1)?.local_addr()?.port();
        let crec = Recorder::new()?;
        connect(
            Net::init(),
            LO,
            LO.with_port(closed),
            kcfg(),
            &params(4, 4, b""),
            TestQp::new(false)?,
            crec.clone(),
        )?;
        let rep = crec.wait(0, 3000).ok_or(ETIMEDOUT)?;
        assert_eq!(
            (rep.0, rep.1),
            (CmEventKind::ConnectReply, -(ECONNREFUSED.to_errno().abs()))
        );
        // Active: the server closes after reading the request: -ECONNRESET.
        let server = TcpSocket::listen(Net::init(), LO, 4)?;
        let port = server.local_addr()?.port();
        let crec = Recorder::new()?;
        connect(
            Net::init(),
            LO,
            LO.with_port(port),
            kcfg(),
            &params(4, 4, b""),
            TestQp::new(false)?,
            crec.clone(),
        )?;
        let mut s = None;
        assert!(wait_until(2000, || {
            s = server.accept().ok().flatten();
            s.is_some()
        }));
        let s = s.ok_or(ENOTCONN)?;
        let mut req = KVec::new();
        assert!(read_into(&s, &mut req, 20, 2000));
        s.shutdown();
        let rep = crec.wait(0, 3000).ok_or(ETIMEDOUT)?;
        assert_eq!(
            (rep.0, rep.1),
            (CmEventKind::ConnectReply, -(ECONNRESET.to_errno().abs()))
        );
        // Active: a reply with a bad key: -EINVAL.
        let crec = Recorder::new()?;
        connect(
            Net::init(),
            LO,
            LO.with_port(port),
            kcfg(),
            &params(4, 4, b""),
            TestQp::new(false)?,
            crec.clone(),
        )?;
        let mut s = None;
        assert!(wait_until(2000, || {
            s = server.accept().ok().flatten();
            s.is_some()
        }));
        send_all(
            s.as_ref().ok_or(ENOTCONN)?,
            b"MPA ID Req Frame\x00\x02\x00\x00",
        )?;
        let rep = crec.wait(0, 3000).ok_or(ETIMEDOUT)?;
        assert_eq!(
            (rep.0, rep.1),
            (CmEventKind::ConnectReply, -(EINVAL.to_errno().abs()))
        );
        assert!(no_leaks());
        // Refused, reset, unusable: three failures, no timeout or reject.
        assert_eq!(k.get(HwCounter::CmFailures), 3);
        assert_eq!(
            k.get(HwCounter::CmTimeouts) + k.get(HwCounter::MpaRejectReceived),
            0
        );
        Ok(())
    }

    fn pattern(i: usize) -> u8 {
        (i * 7 + i / 253) as u8
    }

    #[test]
    fn bytes_after_the_mpa_frames_reach_the_handoff() -> Result {
        const N: usize = 6000;
        let mut data = KVec::with_capacity(N, GFP_KERNEL)?;
        for i in 0..N {
            data.push(pattern(i), GFP_KERNEL)?;
        }
        // Passive: a raw initiator sends its Request and, in the same send,
        // the first stream bytes; more right after the Reply.
        let (lid, port, lrec) = listen_lo(cfg())?;
        let raw = TcpSocket::connect(Net::init(), LO.with_port(port), false)?;
        let icfg = CmConfig { p2p: None, ..cfg() }.initiator(4, 4, b"raw");
        let mut ini = new_initiator(&icfg)?;
        let mut buf = KVec::new();
        buf.extend_from_slice(ini.transmit(), GFP_KERNEL)?;
        ini.sent(buf.len());
        buf.extend_from_slice(&data[..1000], GFP_KERNEL)?;
        send_all(&raw, &buf)?;
        let ev = lrec.wait(0, 3000).ok_or(ETIMEDOUT)?;
        let (srec, sqp) = (Recorder::new()?, TestQp::new(false)?);
        accept(ev.3 as u64, &params(4, 4, b"ok"), &*sqp, srec)?;
        assert!(wait_until(3000, || {
            read_reply(&raw, &mut ini);
            ini.phase() == startup::Phase::Established
        }));
        send_all(&raw, &data[1000..])?;
        let (stream, _sink) = sqp.take().ok_or(EINVAL)?;
        let mut got = KVec::new();
        got.extend_from_slice(&stream.leftover, GFP_KERNEL)?;
        assert!(read_into(&stream.sock, &mut got, N, 3000));
        assert!(got.len() == N && got[..] == data[..]);
        drop(stream);
        destroy_listener(lid);

        // Active: a raw responder sends its Reply and the first stream
        // bytes in one send.
        let server = TcpSocket::listen(Net::init(), LO, 4)?;
        let port = server.local_addr()?.port();
        let (crec, cqp) = (Recorder::new()?, TestQp::new(false)?);
        let ccfg = CmConfig { p2p: None, ..cfg() };
        connect(
            Net::init(),
            LO,
            LO.with_port(port),
            ccfg,
            &params(4, 4, b""),
            cqp.clone(),
            crec.clone(),
        )?;
        let mut s = None;
        assert!(wait_until(2000, || {
            s = server.accept().ok().flatten();
            s.is_some()
        }));
        let s = s.ok_or(ENOTCONN)?;
        let mut res = raw_responder(&s)?;
        res.accept(&cfg().responder(4, 4), b"srv")
            .map_err(|_| EINVAL)?;
        let mut out = KVec::new();
        out.extend_from_slice(res.transmit(), GFP_KERNEL)?;
        out.extend_from_slice(&data, GFP_KERNEL)?;
        send_all(&s, &out)?;
        let ev = crec.wait(0, 3000).ok_or(ETIMEDOUT)?;
        assert_eq!((ev.0, ev.1), (CmEventKind::ConnectReply, 0));
        assert_eq!(&ev.2[..], b"srv");
        let (stream, _sink) = cqp.take().ok_or(EINVAL)?;
        let mut got = KVec::new();
        got.extend_from_slice(&stream.leftover, GFP_KERNEL)?;
        assert!(read_into(&stream.sock, &mut got, N, 3000));
        assert!(got.len() == N && got[..] == data[..]);
        drop(stream);
        assert!(no_leaks());
        Ok(())
    }

    /// A raw responder on `s`: the cep's Request read and judged valid.
    fn raw_responder(s: &TcpSocket) -> Result<KBox<Responder>> {
        let mut res = KBox::new(Responder::new(&cfg().responder(4, 4)), GFP_KERNEL)?;
        check(wait_until(2000, || {
            read_request(s, &mut res);
            res.phase() == startup::Phase::Decide
        }))?;
        Ok(res)
    }

    /// The next connection `server` accepts, within 2 s.
    fn accept_raw(server: &TcpSocket) -> Result<TcpSocket> {
        let mut s = None;
        check(wait_until(2000, || {
            s = server.accept().ok().flatten();
            s.is_some()
        }))?;
        s.ok_or(ENOTCONN)
    }

    /// A Reply built by hand (a responder's checks bypassed).
    fn reply_bytes(enhanced: Option<Enhanced>) -> Result<KVec<u8>> {
        let r = Repr {
            kind: Kind::Reply,
            markers: false,
            crc: false,
            reject: false,
            rev: 2,
            enhanced,
            private_data: b"",
        };
        let mut b = KVec::from_elem(0u8, r.buffer_len(), GFP_KERNEL)?;
        r.emit_bytes(&mut b).map_err(|_| EINVAL)?;
        Ok(b)
    }

    #[test]
    fn unusable_reply_sends_a_terminate_only_where_rfc6581_asks() -> Result {
        let server = TcpSocket::listen(Net::init(), LO, 4)?;
        let port = server.local_addr()?.port();
        // The initiator offers a Write RTR only; the Reply picks Read: no
        // matching RTR (RFC 6581 section 9, LLP code 7), in a Terminate.
        let ccfg = CmConfig {
            p2p: Some(RtrSet::one(Rtr::Write)),
            ..cfg()
        };
        let crec = Recorder::new()?;
        connect(
            Net::init(),
            LO,
            LO.with_port(port),
            ccfg.clone(),
            &params(4, 4, b""),
            TestQp::new(false)?,
            crec.clone(),
        )?;
        let s = accept_raw(&server)?;
        drop(raw_responder(&s)?);
        let e = Enhanced {
            ird: 4,
            ord: 4,
            p2p: true,
            rtr: RtrSet::one(Rtr::Read),
        };
        let rep = reply_bytes(Some(e))?;
        send_all(&s, &rep)?;
        let ev = crec.wait(0, 3000).ok_or(ETIMEDOUT)?;
        assert_eq!(
            (ev.0, ev.1),
            (CmEventKind::ConnectReply, -(EINVAL.to_errno().abs()))
        );
        // What the peer gets is the Terminate an initiator fed the same
        // Reply queues (code 7, framed as the Reply negotiated), then FIN.
        let mut twin = new_initiator(&ccfg.initiator(4, 4, b""))?;
        let request_len = twin.transmit().len();
        twin.sent(request_len);
        assert_eq!(twin.receive(&ModuleCrc32c, &rep), rep.len());
        let f = match twin.poll() {
            Some(startup::Event::Failed(f)) => f,
            _ => return Err(EINVAL),
        };
        assert!(f.terminate && f.error == llp::NO_MATCHING_RTR);
        let want = twin.transmit();
        assert!(!want.is_empty());
        assert!(wait_until(3000, || s.state().is_closing()));
        let mut got = KVec::new();
        read_into(&s, &mut got, want.len() + 1, 10);
        assert!(got[..] == want[..]);
        // A Reply with a bad key (invalid, LLP code 4): closed without
        // a Terminate.
        let crec = Recorder::new()?;
        connect(
            Net::init(),
            LO,
            LO.with_port(port),
            cfg(),
            &params(4, 4, b""),
            TestQp::new(false)?,
            crec.clone(),
        )?;
        let s = accept_raw(&server)?;
        drop(raw_responder(&s)?);
        send_all(&s, b"MPA ID Req Frame\x00\x02\x00\x00")?;
        let ev = crec.wait(0, 3000).ok_or(ETIMEDOUT)?;
        assert_eq!(
            (ev.0, ev.1),
            (CmEventKind::ConnectReply, -(EINVAL.to_errno().abs()))
        );
        assert!(wait_until(3000, || s.state().is_closing()));
        let mut got = KVec::new();
        read_into(&s, &mut got, 1, 10);
        assert!(got.is_empty());
        assert!(no_leaks());
        Ok(())
    }

    #[test]
    fn listener_destroy_cleans_up_pending_connections() -> Result {
        let (lid, port, lrec) = listen_lo(cfg())?;
        // One silent, one waiting for the ULP's accept.
        let silent = TcpSocket::connect(Net::init(), LO.with_port(port), false)?;
        let (crec, cqp) = (Recorder::new()?, TestQp::new(false)?);
        connect(
            Net::init(),
            LO,
            LO.with_port(port),
            cfg(),
            &params(4, 4, b""),
            cqp,
            crec.clone(),
        )?;
        let req = lrec.wait(0, 3000).ok_or(ETIMEDOUT)?;
        assert!(wait_until(1000, || live_ceps() == 3));
        destroy_listener(lid);
        assert!(no_leaks());
        assert!(wait_until(2000, || silent.state().is_closing()));
        // The client learns the connection is gone.
        let rep = crec.wait(0, 3000).ok_or(ETIMEDOUT)?;
        assert_eq!(
            (rep.0, rep.1),
            (CmEventKind::ConnectReply, -(ECONNRESET.to_errno().abs()))
        );
        let srec = Recorder::new()?;
        let sqp = TestQp::new(false)?;
        assert_eq!(
            accept(req.3 as u64, &params(4, 4, b""), &*sqp, srec),
            Err(ECONNRESET)
        );
        // The port is free again.
        let again = listen(
            Net::init(),
            LO.with_port(port),
            1,
            ListenOpts::default(),
            cfg(),
            Recorder::new()?,
        )?;
        destroy_listener(again);
        Ok(())
    }

    #[test]
    fn missing_rtr_times_out_with_established_then_close() -> Result {
        let scfg = CmConfig {
            rtr_timeout_ms: 300,
            ..cfg()
        };
        let p = pair(cfg(), scfg, &params(4, 4, b""), &params(4, 4, b""))?;
        // The server's QP never sees the RTR.
        let e = p.srec.wait(0, 2000).ok_or(ETIMEDOUT)?;
        assert_eq!(
            (e.0, e.1),
            (CmEventKind::Established, -(ETIMEDOUT.to_errno().abs()))
        );
        assert_eq!(p.srec.wait(1, 100).map(|e| e.0), Some(CmEventKind::Close));
        let sink = p.sqp.sink().ok_or(EINVAL)?;
        assert!(sink.is_closed());
        // Late reports change nothing.
        sink.established();
        sink.closed();
        assert_eq!(p.srec.count(), 2);
        drop(sink);
        drop(p.cqp.take());
        drop(p.sqp.take());
        destroy_listener(p.lid);
        assert!(no_leaks());
        Ok(())
    }

    #[test]
    fn sink_orders_events_whatever_the_qp_reports() -> Result {
        // Passive: close before the hand-off completes, then arm.
        let rec = Recorder::new()?;
        let s = CmEventSink::new(rec.clone(), Phase::AwaitEstablished, 3, 5)?;
        s.disconnected();
        s.closed();
        assert_eq!(rec.count(), 0);
        s.arm();
        assert_eq!(
            rec.wait(0, 10).map(|e| (e.0, e.1, e.4, e.5)),
            Some((
                CmEventKind::Established,
                -(ECONNRESET.to_errno().abs()),
                5,
                3
            ))
        );
        assert_eq!(rec.wait(1, 10).map(|e| e.0), Some(CmEventKind::Close));
        // Active: the QP loses the connection before CONNECT_REPLY.
        let rec = Recorder::new()?;
        let s = CmEventSink::new(rec.clone(), Phase::AwaitReply, 1, 1)?;
        s.arm();
        s.closed();
        assert_eq!(rec.count(), 0);
        s.connect_reply(b"", None, None);
        assert_eq!(
            rec.wait(0, 10).map(|e| (e.0, e.1)),
            Some((CmEventKind::ConnectReply, -(ECONNRESET.to_errno().abs())))
        );
        drop(s);
        assert_eq!(rec.count(), 1);
        // Unarmed (attach failed): no event at all.
        let rec = Recorder::new()?;
        drop(CmEventSink::new(
            rec.clone(),
            Phase::AwaitEstablished,
            1,
            1,
        )?);
        assert_eq!(rec.count(), 0);
        Ok(())
    }
}
