// SPDX-License-Identifier: GPL-2.0
//! Interoperability with Linux siw in the same kernel, through rdma_cm:
//! siw on `rsiwkt2` (10.98.1.1, `rdma link add siwkt0 type siw`) and an
//! rsiw device on its veth peer `rsiwkt3` (10.98.1.2), both set up by
//! tests/core/foundation.sh before insmod. Each side as initiator and as
//! responder, MPA CRC off and on, and the peer-to-peer RTR kinds siw
//! answers, with the kind negotiated checked on the rsiw QP.

#[cfg(rsiw_kunit)]
use kernel::prelude::*;

#[cfg(rsiw_kunit)]
#[kunit_tests(rsiw_siw_interop)]
mod tests {
    use kernel::prelude::*;

    use crate::{
        engine::{
            mpa::negotiate::{CrcPolicy, RtrMode},
            wire::mpa::{Rtr, RtrSet},
        },
        ffi::{consumer::rdma_cm::*, net::socket::SockAddr},
        selftest::cm::harness::*,
    };

    const SIW: SockAddr = SockAddr::V4 {
        addr: [10, 98, 1, 1],
        port: 0,
    };
    const RSIW: SockAddr = SockAddr::V4 {
        addr: [10, 98, 1, 2],
        port: 0,
    };

    /// The rsiw device on rsiwkt3, after checking siw sits on rsiwkt2.
    fn setup() -> Result<Devices> {
        let siw_nd = netdev(c"rsiwkt2")?;
        if !device_on(&siw_nd, DRIVER_SIW) {
            pr_err!("rsiw kunit: no siw device on rsiwkt2: the guest loads siw and runs `rdma link add siwkt0 type siw netdev rsiwkt2` before insmod (tests/core/foundation.sh)\n");
            return Err(ENODEV);
        }
        Devices::create(&[(c"rsiw_si0", c"rsiwkt3")])
    }

    /// The framing and RTR the rsiw end of `p` negotiated.
    fn negotiated(s: &Side) -> Result<(bool, Option<RtrMode>)> {
        let qp = s.qp().rsiw::<crate::device::Rsiw>().ok_or(EINVAL)?;
        let (f, rtr) = qp.negotiated().ok_or(ENOTCONN)?;
        Ok((f.crc, rtr))
    }

    /// Traffic both ways (siw has no Write with Immediate, and its CQ
    /// misses solicited events), then the initiator disconnects:
    /// DISCONNECTED on both, no QP_FATAL at rsiw.
    fn exchange_and_close(p: &CmPair, rsiw: &Side) -> Result {
        let to = |s: &Side| Caps {
            write_imm: false,
            solicited_notify: core::ptr::eq(s, rsiw),
        };
        exchange_all(&p.client, &p.server, 11, to(&p.server))?;
        exchange_all(&p.server, &p.client, 12, to(&p.client))?;
        p.client.id.disconnect()?;
        p.client.id.events().expect(DISCONNECTED, WAIT_MS)?;
        p.server.id.events().expect(DISCONNECTED, WAIT_MS)?;
        check!(rsiw.fatal_events() == 0);
        Ok(())
    }

    #[test]
    fn rsiw_initiator_siw_responder_rtr_and_crc() -> Result {
        let devs = setup()?;
        let tuning = devs
            .get(0)?
            .device::<crate::device::Rsiw>()
            .data()
            .cm_tuning();
        // siw arms its RTR receive path only after sending its Reply: over
        // lo an immediate RTR beats it (and the connection hangs, then
        // iw_cm BUG()s on siw's CLOSE in CONN_RECV at cleanup).
        tuning.set_rtr_delay_ms(Some(50));
        // siw answers a zero-length Write or Read RTR (it prefers Write).
        // Offered a zero-length Send only, siw answers Write all the same,
        // which rsiw then refuses; siw's listener then sees its peer close
        // while it waits for the RTR, a path iw_cm BUG()s on: not run.
        for (kind, crc) in [
            (Rtr::Write, false),
            (Rtr::Read, false),
            (Rtr::Write, true),
            (Rtr::Read, true),
        ] {
            tuning.set_p2p(Some(Some(RtrSet::one(kind))));
            tuning.set_crc(Some(if crc {
                CrcPolicy::Required
            } else {
                CrcPolicy::IfPeerAsks
            }));
            let o = PairOpts {
                listen: SIW,
                to: SIW,
                from: RSIW,
                client_pd: b"rsiw calling",
                server_pd: b"siw here",
                ..PairOpts::v4()
            };
            let p = CmPair::connect(&o)?;
            check!(&p.request.private_data[..] == b"rsiw calling");
            check!(&p.client_est.private_data[..] == b"siw here");
            check!(negotiated(&p.client)? == (crc, Some(RtrMode::Zero(kind))));
            exchange_and_close(&p, &p.client)?;
        }
        // The RTR-less client-server mode (`p2p_rtr=0`).
        tuning.set_p2p(Some(None));
        tuning.set_crc(Some(CrcPolicy::IfPeerAsks));
        let o = PairOpts {
            listen: SIW,
            to: SIW,
            from: RSIW,
            ..PairOpts::v4()
        };
        let p = CmPair::connect(&o)?;
        check!(negotiated(&p.client)? == (false, None));
        exchange_and_close(&p, &p.client)?;
        tuning.set_p2p(None);
        tuning.set_crc(None);
        tuning.set_rtr_delay_ms(None);
        Ok(())
    }

    /// RFC 7306 opcodes to a peer that does not know them (siw): its
    /// Terminate is reported on the request it refused, the QP fails once,
    /// nothing hangs. (siw sends Terminates best effort: when its close
    /// wins, the request is flushed instead; either way an error.)
    ///
    /// siw means RDMAP / remote operation / unexpected opcode (0x0206),
    /// but its `struct iwarp_terminate` declares the layer and error type
    /// as `__be32` bitfields, which on a little-endian host swaps the two
    /// nibbles of the first octet: on the wire it says 0x20 0x06, which
    /// RFC 5040 section 4.8 reads as layer LLP, type 0, code 6.
    #[test]
    fn rfc7306_to_siw_ends_in_its_terminate() -> Result {
        let devs = setup()?;
        let tuning = devs
            .get(0)?
            .device::<crate::device::Rsiw>()
            .data()
            .cm_tuning();
        tuning.set_rtr_delay_ms(Some(50));
        let o = PairOpts {
            listen: SIW,
            to: SIW,
            from: RSIW,
            ..PairOpts::v4()
        };
        // RDMAP 0x0206 as siw puts it on the wire (see above).
        let unexpected_opcode = crate::engine::error::TermError::from_bits(0x2006).ok_or(EINVAL)?;

        // An Atomic Request: the FetchAdd completes with the peer's reason.
        let p = CmPair::connect(&o)?;
        let mut target = KVec::from_elem(0u8, 4096, GFP_KERNEL)?;
        let orig = KVec::from_elem(0u8, 8, GFP_KERNEL)?;
        let addr = target.as_mut_ptr() as u64;
        p.client.qp().post_atomic(
            1,
            p.server.rkey(),
            addr,
            1,
            None,
            Seg::of(&orig, p.client.lkey()),
        )?;
        let wc = p.client.scq.poll(WAIT_MS).ok_or(ETIMEDOUT)?;
        let qp = p.client.qp().rsiw::<crate::device::Rsiw>().ok_or(EINVAL)?;
        check!(wc.wr_id == 1);
        if wc.status == WC_REM_OP_ERR {
            // The completion can be polled before the QP has recorded the
            // Terminate (events are handled after the engine call).
            check!(wait_for(
                || qp.stream_status().terminate_received == Some(unexpected_opcode)
            ));
            check!(wait_for(|| p.client.fatal_events() == 1));
        } else {
            // siw sends its Terminate best effort, racing its own close of
            // the connection: without it the request is flushed.
            check!(wc.status == WC_WR_FLUSH_ERR && qp.stream_status().terminate_received.is_none());
        }
        // Later work is flushed at once.
        p.client
            .qp()
            .post(2, Op::Send, Some(Seg::of(&orig, p.client.lkey())))?;
        let wc = p.client.scq.poll(WAIT_MS).ok_or(ETIMEDOUT)?;
        check!((wc.wr_id, wc.status) == (2, WC_WR_FLUSH_ERR));
        check!(target.iter().all(|&b| b == 0));
        drop(p);

        // Write with Immediate: siw places the Write, then refuses the
        // Immediate Data message; its receive is flushed, not completed.
        let p = CmPair::connect(&o)?;
        let rbuf = KVec::from_elem(0u8, 64, GFP_KERNEL)?;
        p.server
            .qp()
            .post_recv(10, Seg::of(&rbuf, p.server.lkey()))?;
        let src = pattern(0x42, 512)?;
        let rkey = p.server.rkey();
        p.client.qp().post(
            3,
            Op::WriteImm { rkey, addr, imm: 5 },
            Some(Seg::of(&src, p.client.lkey())),
        )?;
        // The Write leaves (and completes) before the Terminate comes back.
        let wc = p.client.scq.poll(WAIT_MS).ok_or(ETIMEDOUT)?;
        check!(wc.wr_id == 3);
        let qp = p.client.qp().rsiw::<crate::device::Rsiw>().ok_or(EINVAL)?;
        // The stream ends (with siw's Terminate, unless siw's close beat it).
        check!(wait_for(
            || qp.stream_status().failed || qp.stream_status().closed
        ));
        let t = qp.stream_status().terminate_received;
        check!(t.is_none() || t == Some(unexpected_opcode));
        let wc = p.server.rcq.poll(WAIT_MS).ok_or(ETIMEDOUT)?;
        check!((wc.wr_id, wc.status) == (10, WC_WR_FLUSH_ERR));
        check!(lands(&target[..512], &src));
        drop(p);
        tuning.set_rtr_delay_ms(None);
        Ok(())
    }

    #[test]
    fn siw_initiator_rsiw_responder_crc() -> Result {
        let devs = setup()?;
        let tuning = devs
            .get(0)?
            .device::<crate::device::Rsiw>()
            .data()
            .cm_tuning();
        // siw never asks for CRC: the responder's policy decides.
        for crc in [false, true] {
            tuning.set_crc(Some(if crc {
                CrcPolicy::Required
            } else {
                CrcPolicy::IfPeerAsks
            }));
            let o = PairOpts {
                listen: RSIW,
                to: RSIW,
                from: SIW,
                client_pd: b"siw calling",
                server_pd: b"rsiw here",
                ..PairOpts::v4()
            };
            let p = CmPair::connect(&o)?;
            check!(&p.request.private_data[..] == b"siw calling");
            check!(&p.client_est.private_data[..] == b"rsiw here");
            // siw is never peer-to-peer as initiator.
            check!(negotiated(&p.server)? == (crc, None));
            exchange_and_close(&p, &p.server)?;
        }
        tuning.set_crc(None);
        Ok(())
    }
}
