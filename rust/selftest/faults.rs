// SPDX-License-Identifier: GPL-2.0
//! Failure paths of a connected kernel QP. The test plays the peer on the
//! raw end of the TCP connection: it sends hand-built bad FPDUs (valid
//! frames from the engine's wire builders, then corrupted) and checks the
//! Terminate that comes back, or it resets the connection mid-transfer.
//! Either way the QP must go to Error, complete every work request exactly
//! once (flushed), raise one `IB_EVENT_QP_FATAL`, and not hang.

use kernel::prelude::*;

#[cfg(rsiw_kunit)]
#[kunit_tests(rsiw_faults)]
mod cases {
    use kernel::{
        prelude::*,
        time::{delay::fsleep, Delta},
    };

    use crate::{
        device::counters::HwCounter,
        engine::{
            error::{self, TermError},
            mpa::negotiate::Framing,
            rdmap::{decode, Body},
            wire::{
                ddp::{self, Model},
                fpdu,
                rdmap::{qn, Control, Opcode, ReadRequest, ReadRequestRepr, READ_REQUEST_LEN},
                terminate,
            },
        },
        ffi::{
            consumer::cq::{KCq, RawWc, WC_SUCCESS, WC_WR_FLUSH_ERR},
            consumer::device::Found,
            consumer::mr::{KMr, KPd},
            consumer::qp::*,
            crc::{self, KernelCrc32c},
            mem::pages::access,
            net::netdev::NetDevRef,
            net::socket::TcpSocket,
        },
        qp::QpState,
    };

    use crate::selftest::util::{check, negotiated, EMSS};

    /// A remote STag the QP's Reads name: the peer never answers them.
    const PEER_STAG: u32 = 0x0012_3400;
    /// A send WR that waits (fenced) behind the unanswered Read.
    const READ_WR: u64 = 1;
    const FENCED_WR: u64 = 2;

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

    /// A device on lo, one PD, one CQ and a watched QP attached (as MPA
    /// initiator, no RTR) to one end of a TCP connection; the test holds
    /// the other end. Torn down in drop, QP first, so a failed check does
    /// not leave the device behind.
    struct Rig {
        qp: Option<KQp>,
        peer: Option<TcpSocket>,
        cq: Option<KCq>,
        pd: Option<KPd>,
        dev: Option<Found>,
        crc: bool,
        lkey: u32,
        rkey: u32,
    }

    impl Rig {
        fn new(crc: bool, ird: u16) -> Result<Self> {
            let lo = NetDevRef::by_name(c"lo").ok_or(ENODEV)?;
            crate::device::verbs::create(c"rsiw_fault0", &lo, false)?;
            let mut rig = Rig {
                qp: None,
                peer: None,
                cq: None,
                pd: None,
                dev: None,
                crc,
                lkey: 0,
                rkey: 0,
            };
            rig.dev = Some(Found::by_netdev(&lo).ok_or(ENODEV)?);
            let dev = rig.dev.as_ref().ok_or(ENODEV)?;
            let pd = KPd::alloc(dev, true)?;
            (rig.lkey, rig.rkey) = (pd.local_dma_lkey(), pd.unsafe_global_rkey());
            let cq = KCq::create(dev, 64)?;
            let qp = KQp::create_watched(&pd, &cq, &cq, 16)?;
            rig.pd = Some(pd);
            rig.cq = Some(cq);
            qp.modify(QpState::Init)?;
            let (mine, theirs) = TcpSocket::loopback_pair()?;
            let framing = Framing {
                crc,
                markers_tx: false,
                markers_rx: false,
            };
            let params = negotiated(framing, ird, 8, None, true);
            qp.qp::<crate::device::Rsiw>()
                .attach(mine, &params, EMSS, &[])?;
            rig.qp = Some(qp);
            rig.peer = Some(theirs);
            Ok(rig)
        }

        fn qp(&self) -> Result<&KQp> {
            self.qp.as_ref().ok_or(EINVAL)
        }

        fn peer(&self) -> Result<&TcpSocket> {
            self.peer.as_ref().ok_or(ENOTCONN)
        }

        fn cq(&self) -> Result<&KCq> {
            self.cq.as_ref().ok_or(EINVAL)
        }

        /// Sends all of `bytes` from the peer (bounded retries).
        fn peer_send(&self, bytes: &[u8]) -> Result {
            let mut sent = 0;
            for _ in 0..5000 {
                if sent == bytes.len() {
                    return Ok(());
                }
                match self.peer()?.send(&[&bytes[sent..]], false) {
                    Ok(n) => sent += n,
                    Err(e) if e == EAGAIN => fsleep(Delta::from_millis(1)),
                    Err(e) => return Err(e),
                }
            }
            if sent == bytes.len() {
                Ok(())
            } else {
                Err(ETIMEDOUT)
            }
        }

        /// Wraps a DDP segment in an FPDU (CRC as negotiated).
        fn fpdu(&self, ulpdu: &[u8]) -> Result<KVec<u8>> {
            let repr = fpdu::Repr { ulpdu };
            let mut buf = KVec::from_elem(0u8, repr.buffer_len(), GFP_KERNEL)?;
            // The kernel's crc32c(), whichever CRC32c the module runs:
            // the peer is an independent implementation on the wire.
            let crc = self.crc.then_some(&KernelCrc32c);
            repr.emit(&mut fpdu::Frame::new_unchecked(&mut buf[..]), crc)
                .map_err(|_| EINVAL)?;
            Ok(buf)
        }

        /// Reads the QP's FPDUs from the peer socket until a Terminate
        /// arrives (other messages, such as the Read Request, are skipped)
        /// and returns its layer/type/code, decoded by the engine.
        fn read_terminate(&self, ms: u32) -> Result<TermError> {
            self.read_until(ms, |body| match body {
                Body::Terminate(t) => Some(t.error),
                _ => None,
            })
        }

        /// Reads the QP's FPDUs from the peer socket until `pick` makes
        /// something of one (the others are skipped).
        fn read_until<T>(&self, ms: u32, mut pick: impl FnMut(Body<'_>) -> Option<T>) -> Result<T> {
            let peer = self.peer()?;
            let mut buf = KVec::with_capacity(64 * 1024, GFP_KERNEL)?;
            let mut pos = 0usize;
            for _ in 0..ms {
                // The reader runs in atomic context: GFP_ATOMIC.
                peer.read(
                    &mut |chunk: &[u8]| match buf.extend_from_slice(chunk, GFP_ATOMIC) {
                        Ok(()) => chunk.len(),
                        Err(_) => 0,
                    },
                );
                while buf.len() - pos >= fpdu::HEADER_LEN {
                    let ulen = usize::from(u16::from_be_bytes([buf[pos], buf[pos + 1]]));
                    let total = fpdu::fpdu_len(ulen);
                    if buf.len() - pos < total {
                        break;
                    }
                    let frame = fpdu::Frame::new_unchecked(&buf[pos..pos + total]);
                    let crc = self.crc.then_some(&KernelCrc32c);
                    let repr = fpdu::Repr::parse(&frame, crc).map_err(|_| EBADMSG)?;
                    if let Some(t) = decode(repr.ulpdu).ok().and_then(|msg| pick(msg.body)) {
                        return Ok(t);
                    }
                    pos += total;
                }
                fsleep(Delta::from_millis(1));
            }
            Err(ETIMEDOUT)
        }

        /// Polls until every id of `want` completed; fails on an id that
        /// completes twice or is not expected. Returns the completions.
        fn completions(&self, want: &[u64], ms: u32) -> Result<KVec<RawWc>> {
            let mut got: KVec<RawWc> = KVec::new();
            for _ in 0..ms {
                let mut wc = [RawWc::default(); 8];
                let n = self.cq()?.poll(&mut wc);
                for w in &wc[..n.max(0) as usize] {
                    check!(want.contains(&w.wr_id));
                    check!(!got.iter().any(|g| g.wr_id == w.wr_id));
                    got.push(*w, GFP_KERNEL)?;
                }
                if got.len() == want.len() {
                    break;
                }
                if n <= 0 {
                    fsleep(Delta::from_millis(1));
                }
            }
            if got.len() != want.len() {
                let qp = self.qp()?.qp::<crate::device::Rsiw>();
                pr_err!(
                    "rsiw kunit: {} of {} completions, QP {:?}, TCP {:?}, fatal {}\n",
                    got.len(),
                    want.len(),
                    qp.ib_state(),
                    qp.tcp_state(),
                    QP_EVENTS.fatal()
                );
                for w in got.iter() {
                    pr_err!("rsiw kunit:   wr_id {} status {}\n", w.wr_id, w.status);
                }
            }
            check!(got.len() == want.len());
            Ok(got)
        }
    }

    impl Drop for Rig {
        fn drop(&mut self) {
            drop(self.qp.take()); // destroy: detaches with bounded waits
            drop(self.peer.take());
            drop(self.cq.take());
            drop(self.pd.take());
            if let Some(dev) = self.dev.take() {
                dev.unregister();
            }
        }
    }

    fn segment(hdr: ddp::Repr, payload: &[u8]) -> Result<KVec<u8>> {
        let hlen = hdr.buffer_len();
        let mut seg = KVec::from_elem(0u8, hlen, GFP_KERNEL)?;
        hdr.emit(&mut ddp::Segment::new_unchecked(&mut seg[..]));
        seg.extend_from_slice(payload, GFP_KERNEL)?;
        Ok(seg)
    }

    fn send_segment(msn: u32, mo: u32, last: bool, payload: &[u8]) -> Result<KVec<u8>> {
        let hdr = ddp::Repr {
            last,
            ulp_ctrl: Control::new(Opcode::Send).to_byte(),
            model: Model::Untagged {
                rsvd_ulp: 0,
                qn: qn::SEND,
                msn,
                mo,
            },
        };
        segment(hdr, payload)
    }

    fn write_segment(stag: u32, to: u64, payload: &[u8]) -> Result<KVec<u8>> {
        let hdr = ddp::Repr {
            last: true,
            ulp_ctrl: Control::new(Opcode::Write).to_byte(),
            model: Model::Tagged { stag, to },
        };
        segment(hdr, payload)
    }

    fn read_request(msn: u32, req: ReadRequestRepr) -> Result<KVec<u8>> {
        let mut body = [0u8; READ_REQUEST_LEN];
        req.emit(&mut ReadRequest::new_unchecked(&mut body[..]));
        let hdr = ddp::Repr {
            last: true,
            ulp_ctrl: Control::new(Opcode::ReadRequest).to_byte(),
            model: Model::Untagged {
                rsvd_ulp: 0,
                qn: qn::READ_REQUEST,
                msn,
                mo: 0,
            },
        };
        segment(hdr, &body)
    }

    /// The common script: a Read (never answered) and a fenced Send behind
    /// it are outstanding and `recvs` are posted; the peer sends `bad`. The
    /// QP must answer with a Terminate carrying `want`, be in Error, flush
    /// all of them, flush WRs posted afterwards at once, raise QP_FATAL
    /// once and close the connection.
    fn expect_terminate(
        rig: &Rig,
        local: &[u8],
        recvs: &[u64],
        bad: &[u8],
        want: TermError,
    ) -> Result {
        let qp = rig.qp()?;
        let seg = Seg::of(&local[..64], rig.lkey);
        qp.post(READ_WR, WR_READ, &[seg], Some((PEER_STAG, 0x1000)), true)?;
        qp.post_with(FENCED_WR, WR_SEND, &[seg], None, SEND_SIGNALED | SEND_FENCE)?;
        check!(qp.qp::<crate::device::Rsiw>().ib_state() == QpState::Rts);

        rig.peer_send(bad)?;
        let got = rig.read_terminate(3000)?;
        if got != want {
            pr_err!("rsiw kunit: Terminate {:?}, expected {:?}\n", got, want);
        }
        check!(got == want);
        check!(wait_until(2000, || qp
            .qp::<crate::device::Rsiw>()
            .ib_state()
            == QpState::Err));
        // The device counts it: a CRC error or another protocol error.
        let counters = qp.qp::<crate::device::Rsiw>();
        let counters = counters.device_counters();
        let (crc, proto) = (
            counters.get(HwCounter::RxCrcErrors),
            counters.get(HwCounter::RxProtocolErrors),
        );
        check!(if want == error::llp::CRC {
            (crc, proto) == (1, 0)
        } else {
            (crc, proto) == (0, 1)
        });

        let mut ids = KVec::new();
        ids.extend_from_slice(&[READ_WR, FENCED_WR], GFP_KERNEL)?;
        ids.extend_from_slice(recvs, GFP_KERNEL)?;
        for wc in rig.completions(&ids, 3000)?.iter() {
            check!(wc.status == WC_WR_FLUSH_ERR);
        }
        // Posting to a QP in Error completes at once, flushed.
        qp.post(3, WR_SEND, &[seg], None, true)?;
        qp.post_recv(300, Seg::of(&local[..64], rig.lkey))?;
        for wc in rig.completions(&[3, 300], 1000)?.iter() {
            check!(wc.status == WC_WR_FLUSH_ERR);
        }

        // The connection is closed after the Terminate (FIN reaches the
        // peer), and that is not a second fatal event.
        check!(wait_until(3000, || rig
            .peer()
            .is_ok_and(|p| p.state().is_closing())));
        fsleep(Delta::from_millis(20));
        check!(QP_EVENTS.fatal() == 1);
        check!(QP_EVENTS.other() == 0);
        Ok(())
    }

    /// A Send of `len` octets into a posted 64-octet receive, framed and
    /// then passed to `corrupt`; the receive must be flushed.
    fn bad_send(crc: bool, len: usize, corrupt: impl FnOnce(&mut [u8]), want: TermError) -> Result {
        let local = KVec::from_elem(0u8, 4096, GFP_KERNEL)?;
        let rig = Rig::new(crc, 8)?;
        rig.qp()?
            .post_recv(200, Seg::of(&local[1024..1088], rig.lkey))?;
        let payload = KVec::from_elem(0x5Au8, len, GFP_KERNEL)?;
        let mut frame = rig.fpdu(&send_segment(1, 0, true, &payload)?)?;
        corrupt(&mut frame);
        expect_terminate(&rig, &local, &[200], &frame, want)
    }

    /// With CRC on, a Send each way between the QP and the peer, which
    /// frames and checks with the kernel's `crc32c()`: run once with the
    /// module on its slicing-by-16 table and once on `crc32c()`, so the
    /// table meets an independent CRC32c on real FPDUs (a Send of 700
    /// octets: the 16-octet steps and the byte tail).
    #[test]
    fn either_module_crc_meets_crc32c_on_the_wire() -> Result {
        let was = crc::uses_table();
        let res = (|| -> Result {
            for table in [true, false] {
                crc::use_table(table);
                let mut local = KVec::with_capacity(4096, GFP_KERNEL)?;
                for i in 0..4096u32 {
                    local.push((i.wrapping_mul(2_654_435_761) >> 11) as u8, GFP_KERNEL)?;
                }
                let rig = Rig::new(true, 8)?;
                let qp = rig.qp()?;
                // Peer -> QP: placed and completed, not terminated.
                qp.post_recv(200, Seg::of(&local[2048..3072], rig.lkey))?;
                rig.peer_send(&rig.fpdu(&send_segment(1, 0, true, &local[..700])?)?)?;
                let wc = rig.completions(&[200], 3000)?;
                check!(wc[0].status == WC_SUCCESS && wc[0].byte_len == 700);
                // QP -> peer: the peer's parse checks the CRC (a mismatch
                // is EBADMSG, and fails the test).
                qp.post(5, WR_SEND, &[Seg::of(&local[..700], rig.lkey)], None, true)?;
                let data = rig.read_until(3000, |body| match body {
                    Body::Data => Some(true),
                    Body::Terminate(_) => Some(false),
                    _ => None,
                })?;
                check!(data);
                check!(rig.completions(&[5], 3000)?[0].status == WC_SUCCESS);
                check!(qp.qp::<crate::device::Rsiw>().ib_state() == QpState::Rts);
            }
            Ok(())
        })();
        crc::use_table(was);
        res
    }

    #[test]
    fn mpa_crc_error_is_llp_crc() -> Result {
        bad_send(
            true,
            32,
            |f| {
                let last = f.len() - 1;
                f[last] ^= 0x01;
            },
            error::llp::CRC,
        )
    }

    #[test]
    fn bad_ddp_version_is_untagged_invalid_version() -> Result {
        // Octet 2 of the FPDU is the DDP control field: DV in its low bits.
        bad_send(
            false,
            32,
            |f| f[2] = (f[2] & !0x03) | 0x02,
            error::ddp::U_INVALID_VERSION,
        )
    }

    #[test]
    fn bad_rdmap_version_is_invalid_version() -> Result {
        let ctrl = Control {
            version: 0,
            opcode: Opcode::Send as u8,
        }
        .to_byte();
        bad_send(false, 32, |f| f[3] = ctrl, error::rdmap::INVALID_VERSION)
    }

    #[test]
    fn undefined_opcode_is_unexpected_opcode() -> Result {
        let ctrl = Control {
            version: 1,
            opcode: 14,
        }
        .to_byte();
        bad_send(false, 32, |f| f[3] = ctrl, error::rdmap::UNEXPECTED_OPCODE)
    }

    #[test]
    fn send_longer_than_the_receive_is_too_long() -> Result {
        bad_send(false, 100, |_| {}, error::ddp::U_TOO_LONG)
    }

    #[test]
    fn send_without_a_posted_receive_is_no_buffer() -> Result {
        let local = KVec::from_elem(0u8, 4096, GFP_KERNEL)?;
        let rig = Rig::new(false, 8)?;
        let frame = rig.fpdu(&send_segment(1, 0, true, &[7u8; 32])?)?;
        expect_terminate(&rig, &local, &[], &frame, error::ddp::U_NO_BUFFER)
    }

    #[test]
    fn write_to_an_unknown_stag_is_invalid_stag() -> Result {
        let local = KVec::from_elem(0u8, 4096, GFP_KERNEL)?;
        let rig = Rig::new(false, 8)?;
        let bogus = (rig.rkey & 0xFFFF_FF00).wrapping_add(0x0100_0000) | 0x11;
        let frame = rig.fpdu(&write_segment(bogus, local.as_ptr() as u64, &[1u8; 16])?)?;
        expect_terminate(&rig, &local, &[], &frame, error::ddp::T_INVALID_STAG)
    }

    /// A fast-registered MR over one page of `buf` with `rights`; returns
    /// the MR, its STag and IOVA.
    fn page_mr(rig: &Rig, buf: &mut [u8], rights: u32) -> Result<(KMr, u32, u64)> {
        let (dev, pd) = (
            rig.dev.as_ref().ok_or(ENODEV)?,
            rig.pd.as_ref().ok_or(EINVAL)?,
        );
        let mr = KMr::alloc(pd, 2)?;
        let off = 4096 - (buf.as_ptr() as usize % 4096);
        check!(mr.map_buf(dev, &mut buf[off..off + 4096], 4096)? == 1);
        mr.update_key(0x37);
        let (stag, _) = mr.keys();
        mr.ib::<crate::device::Rsiw>()
            .mr()
            .fast_register(
                pd.pd::<crate::device::Rsiw>().id(),
                &crate::mem::mr::FastReg::of(mr.ib::<crate::device::Rsiw>(), stag, rights),
            )
            .map_err(|_| EINVAL)?;
        let iova = mr.iova_len().0;
        Ok((mr, stag, iova))
    }

    #[test]
    fn write_past_the_region_is_base_bounds() -> Result {
        let local = KVec::from_elem(0u8, 4096, GFP_KERNEL)?;
        let mut target = KVec::from_elem(0u8, 3 * 4096, GFP_KERNEL)?;
        let rig = Rig::new(false, 8)?;
        let rw = access::LOCAL_WRITE | access::REMOTE_WRITE;
        let (mr, stag, iova) = page_mr(&rig, &mut target, rw)?;
        // 16 octets from 8 before the end of the page.
        let frame = rig.fpdu(&write_segment(stag, iova + 4096 - 8, &[2u8; 16])?)?;
        expect_terminate(&rig, &local, &[], &frame, error::ddp::T_BASE_BOUNDS)?;
        // Deregister the MR before its device goes.
        drop(mr);
        drop(rig);
        check!(target.iter().all(|&b| b == 0)); // nothing was placed
        Ok(())
    }

    #[test]
    fn write_without_remote_write_is_access_violation() -> Result {
        let local = KVec::from_elem(0u8, 4096, GFP_KERNEL)?;
        let mut target = KVec::from_elem(0u8, 3 * 4096, GFP_KERNEL)?;
        let rig = Rig::new(false, 8)?;
        let ro = access::LOCAL_WRITE | access::REMOTE_READ;
        let (mr, stag, iova) = page_mr(&rig, &mut target, ro)?;
        let frame = rig.fpdu(&write_segment(stag, iova, &[3u8; 16])?)?;
        expect_terminate(&rig, &local, &[], &frame, error::rdmap::ACCESS)?;
        // Deregister the MR before its device goes.
        drop(mr);
        drop(rig);
        check!(target.iter().all(|&b| b == 0));
        Ok(())
    }

    /// A Write places through the MR the stream then keeps in its cache
    /// (`MrCache`); the MR is invalidated, or deregistered, and the next
    /// Write to the same STag is refused as if nothing were cached:
    /// Invalid STag, nothing more placed.
    fn write_after_the_cached_mr_goes(dereg: bool) -> Result {
        let local = KVec::from_elem(0u8, 4096, GFP_KERNEL)?;
        let mut target = KVec::from_elem(0u8, 3 * 4096, GFP_KERNEL)?;
        let off = 4096 - (target.as_ptr() as usize % 4096); // page_mr's page
        let rig = Rig::new(false, 8)?;
        let rw = access::LOCAL_WRITE | access::REMOTE_WRITE;
        let (mr, stag, iova) = page_mr(&rig, &mut target, rw)?;
        rig.peer_send(&rig.fpdu(&write_segment(stag, iova, &[4u8; 16])?)?)?;
        check!(wait_until(2000, || core::hint::black_box(
            &target[off..off + 16]
        )
        .iter()
        .all(|&b| b == 4)));
        let mut kept = None;
        if dereg {
            drop(mr);
        } else {
            let pd = rig
                .pd
                .as_ref()
                .ok_or(EINVAL)?
                .pd::<crate::device::Rsiw>()
                .id();
            check!(mr
                .ib::<crate::device::Rsiw>()
                .mr()
                .invalidate(stag, pd)
                .is_ok());
            kept = Some(mr);
        }
        let frame = rig.fpdu(&write_segment(stag, iova, &[5u8; 16])?)?;
        expect_terminate(&rig, &local, &[], &frame, error::ddp::T_INVALID_STAG)?;
        // Deregister the MR before its device goes.
        drop(kept);
        drop(rig);
        check!(target[off..off + 16].iter().all(|&b| b == 4));
        check!(target[..off].iter().all(|&b| b == 0) && target[off + 16..].iter().all(|&b| b == 0));
        Ok(())
    }

    #[test]
    fn write_after_the_cached_mr_is_invalidated_is_invalid_stag() -> Result {
        write_after_the_cached_mr_goes(false)
    }

    #[test]
    fn write_after_the_cached_mr_is_deregistered_is_invalid_stag() -> Result {
        write_after_the_cached_mr_goes(true)
    }

    #[test]
    fn read_requests_beyond_ird_are_no_buffer() -> Result {
        let local = KVec::from_elem(0u8, 4096, GFP_KERNEL)?;
        let rig = Rig::new(false, 1)?; // IRD 1
        let req = ReadRequestRepr {
            sink_stag: PEER_STAG,
            sink_to: 0,
            size: 16,
            src_stag: rig.rkey,
            src_to: local.as_ptr() as u64,
        };
        // Both in one TCP send: the second arrives before the first is
        // answered, with IRD 1.
        let mut both = rig.fpdu(&read_request(1, req)?)?;
        both.extend_from_slice(&rig.fpdu(&read_request(2, req)?)?, GFP_KERNEL)?;
        expect_terminate(&rig, &local, &[], &both, error::ddp::U_NO_BUFFER)
    }

    /// The peer refuses the QP's Read with a Terminate and closes at once,
    /// its FIN in the Terminate's segment (`MSG_MORE` holds the Terminate
    /// back until the shutdown adds the FIN to it): TCP reports the close
    /// before the data, and the QP must still read the Terminate and end
    /// the Read with the peer's error, not a flush.
    #[test]
    fn terminate_with_the_peers_fin_in_one_segment() -> Result {
        let local = KVec::from_elem(0u8, 4096, GFP_KERNEL)?;
        let rig = Rig::new(false, 8)?;
        let qp = rig.qp()?;
        let seg = Seg::of(&local[..64], rig.lkey);
        qp.post(READ_WR, WR_READ, &[seg], Some((PEER_STAG, 0x1000)), true)?;
        qp.post_recv(100, seg)?;
        check!(qp.qp::<crate::device::Rsiw>().ib_state() == QpState::Rts);
        // The peer refuses the Read once it has it: a Terminate that
        // overtook it (the TX work still to run) could only flush it.
        rig.read_until(3000, |body| {
            matches!(body, Body::ReadRequest(_)).then_some(())
        })?;

        let refusal = terminate::Repr::for_error(error::rdmap::INVALID_STAG, None);
        let mut ulpdu = KVec::from_elem(
            0u8,
            ddp::UNTAGGED_HEADER_LEN + terminate::MAX_LEN,
            GFP_KERNEL,
        )?;
        let n = refusal.emit_segment(1, &mut ulpdu).ok_or(EINVAL)?;
        let frame = rig.fpdu(&ulpdu[..n])?;
        check!(rig.peer()?.send(&[&frame], true)? == frame.len());
        rig.peer()?.shutdown();

        let wcs = rig.completions(&[READ_WR, 100], 3000)?;
        for wc in wcs.iter() {
            let want = if wc.wr_id == READ_WR {
                WC_REM_ACCESS_ERR
            } else {
                WC_WR_FLUSH_ERR
            };
            if wc.status != want {
                pr_err!(
                    "rsiw kunit: wr_id {} status {}, expected {}\n",
                    wc.wr_id,
                    wc.status,
                    want
                );
            }
            check!(wc.status == want);
        }
        check!(
            qp.qp::<crate::device::Rsiw>()
                .stream_status()
                .terminate_received
                == Some(error::rdmap::INVALID_STAG)
        );
        check!(qp.qp::<crate::device::Rsiw>().ib_state() == QpState::Err);
        fsleep(Delta::from_millis(20));
        check!(QP_EVENTS.fatal() == 1);
        Ok(())
    }

    /// Every posted id completed once, successfully or flushed, and at
    /// least one (still queued or in flight at the reset) was flushed.
    fn all_done_some_flushed(wcs: &[RawWc]) -> bool {
        wcs.iter()
            .all(|w| w.status == WC_SUCCESS || w.status == WC_WR_FLUSH_ERR)
            && wcs.iter().any(|w| w.status == WC_WR_FLUSH_ERR)
    }

    #[test]
    fn peer_reset_while_the_qp_sends() -> Result {
        // 14 MiB: more than both sockets' buffers hold at their largest
        // (zero-copy TX completes a WR as soon as the peer's TCP has it).
        const LEN: usize = 1024 * 1024;
        const WRITES: u64 = 14;
        let src = KVVec::from_elem(0xA5u8, LEN, GFP_KERNEL)?;
        let local = KVec::from_elem(0u8, 4096, GFP_KERNEL)?;
        let mut rig = Rig::new(false, 8)?;
        let qp = rig.qp()?;
        qp.post_recv(100, Seg::of(&local[..2048], rig.lkey))?;
        qp.post_recv(101, Seg::of(&local[2048..], rig.lkey))?;
        for id in 1..=WRITES {
            qp.post(
                id,
                WR_WRITE,
                &[Seg::of(&src, rig.lkey)],
                Some((PEER_STAG, 0)),
                true,
            )?;
        }
        qp.post(
            WRITES + 1,
            WR_SEND,
            &[Seg::of(&src[..4096], rig.lkey)],
            None,
            true,
        )?;
        // The peer reads nothing: TX stalls on a full socket.
        fsleep(Delta::from_millis(200));
        check!(qp.qp::<crate::device::Rsiw>().ib_state() == QpState::Rts);
        check!(QP_EVENTS.fatal() == 0);

        rig.peer.take().ok_or(ENOTCONN)?.abort();
        let mut ids = KVec::new();
        for id in 1..=WRITES + 1 {
            ids.push(id, GFP_KERNEL)?;
        }
        ids.extend_from_slice(&[100, 101], GFP_KERNEL)?;
        let wcs = rig.completions(&ids, 5000)?;
        check!(all_done_some_flushed(&wcs));
        check!(wcs
            .iter()
            .filter(|w| w.wr_id >= 100)
            .all(|w| w.status == WC_WR_FLUSH_ERR));
        // The last Write and the Send cannot have left before the reset.
        check!(wcs
            .iter()
            .any(|w| w.wr_id == WRITES + 1 && w.status == WC_WR_FLUSH_ERR));
        let qp = rig.qp()?;
        check!(qp.qp::<crate::device::Rsiw>().ib_state() == QpState::Err);
        fsleep(Delta::from_millis(20));
        check!(QP_EVENTS.fatal() == 1);
        Ok(())
    }

    /// A graceful close (SQD: the iw_cm's disconnect) while a Read is
    /// outstanding that the peer never answers (its host or the link is
    /// gone) ends within the close bound: the Read, the fenced Send behind
    /// it and the receive flushed, the QP in Error, our FIN sent, no
    /// QP_FATAL (the ULP asked for the close). Without the bound the QP
    /// drained for as long as TCP kept the connection (nvmet-rdma's queue
    /// release, and the removal of its device, waited that long).
    #[test]
    fn graceful_close_with_an_unanswered_read_is_bounded() -> Result {
        let local = KVec::from_elem(0u8, 4096, GFP_KERNEL)?;
        let rig = Rig::new(false, 8)?;
        let qp = rig.qp()?;
        let seg = Seg::of(&local[..64], rig.lkey);
        qp.post_recv(100, Seg::of(&local[1024..2048], rig.lkey))?;
        qp.post(READ_WR, WR_READ, &[seg], Some((PEER_STAG, 0x1000)), true)?;
        qp.post_with(FENCED_WR, WR_SEND, &[seg], None, SEND_SIGNALED | SEND_FENCE)?;
        // The Read Request is out; the peer keeps it.
        rig.read_until(3000, |body| {
            matches!(body, Body::ReadRequest(_)).then_some(())
        })?;
        qp.modify(QpState::Sqd)?;
        // Draining: nothing completes while the Read is outstanding.
        fsleep(Delta::from_millis(500));
        check!(qp.qp::<crate::device::Rsiw>().ib_state() == QpState::Sqd);
        let mut wc = [RawWc::default(); 4];
        check!(rig.cq()?.poll(&mut wc) == 0);
        // Then, within the bound (and some slack), all flushed.
        let bound = crate::qp::CLOSE_TIMEOUT_MS as u32 + 3000;
        for w in rig.completions(&[READ_WR, FENCED_WR, 100], bound)?.iter() {
            check!(w.status == WC_WR_FLUSH_ERR);
        }
        check!(qp.qp::<crate::device::Rsiw>().ib_state() == QpState::Err);
        check!(wait_until(3000, || rig
            .peer()
            .is_ok_and(|p| p.state().is_closing())));
        fsleep(Delta::from_millis(20));
        check!(QP_EVENTS.fatal() == 0);
        Ok(())
    }

    #[test]
    fn peer_reset_while_the_qp_receives() -> Result {
        let local = KVec::from_elem(0u8, 4 * 16384, GFP_KERNEL)?;
        let mut rig = Rig::new(false, 8)?;
        let qp = rig.qp()?;
        for i in 0..4usize {
            qp.post_recv(
                100 + i as u64,
                Seg::of(&local[i * 16384..(i + 1) * 16384], rig.lkey),
            )?;
        }
        qp.post(
            READ_WR,
            WR_READ,
            &[Seg::of(&local[..64], rig.lkey)],
            Some((PEER_STAG, 0)),
            true,
        )?;
        // The first segments of a Send the peer never finishes.
        let part = KVec::from_elem(0x3Cu8, 1000, GFP_KERNEL)?;
        let mut burst = rig.fpdu(&send_segment(1, 0, false, &part)?)?;
        burst.extend_from_slice(
            &rig.fpdu(&send_segment(1, 1000, false, &part)?)?,
            GFP_KERNEL,
        )?;
        rig.peer_send(&burst)?;
        fsleep(Delta::from_millis(50));
        check!(qp.qp::<crate::device::Rsiw>().ib_state() == QpState::Rts);

        rig.peer.take().ok_or(ENOTCONN)?.abort();
        let wcs = rig.completions(&[READ_WR, 100, 101, 102, 103], 5000)?;
        check!(wcs.iter().all(|w| w.status == WC_WR_FLUSH_ERR));
        let qp = rig.qp()?;
        check!(qp.qp::<crate::device::Rsiw>().ib_state() == QpState::Err);
        fsleep(Delta::from_millis(20));
        check!(QP_EVENTS.fatal() == 1);
        // A disconnect after the stream ended (iw_cm and librdmacm ask for
        // SQD): a no-op on a QP in Error, which stays there.
        qp.modify(QpState::Sqd)?;
        check!(qp.qp::<crate::device::Rsiw>().ib_state() == QpState::Err);
        // What the verbs do not allow is still refused.
        check!(qp.modify(QpState::Rts).is_err());
        Ok(())
    }
}
