// SPDX-License-Identifier: GPL-2.0
//! Self-tests of zero-copy TX: payload goes to TCP by page reference
//! (`MSG_ZEROCOPY` with rsiw's own notification), a WR completes only
//! once TCP is done with its pages, so a consumer may rewrite its buffer
//! the moment it sees the completion; slab memory and small payloads are
//! copied; the copying path still works when zero-copy is off.
//!
//! The big buffers are vmalloc memory: large kmalloc memory is frozen
//! pages (reference count 0), which TCP refuses to splice (`sendpage_ok`),
//! so rsiw copies it.

use kernel::prelude::*;

#[cfg(rsiw_kunit)]
#[kunit_tests(rsiw_zcopy)]
mod tests {
    use core::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};

    use kernel::{
        prelude::*,
        sync::Arc,
        time::{delay::fsleep, Delta},
    };

    use crate::{
        device::counters::HwCounter,
        ffi::{
            consumer::cq::{WC_RECV, WC_SUCCESS},
            consumer::qp::*,
            consumer::zcopy::skb_keeps_page,
            net::zcopy::{Notif, ZcOwner},
        },
        selftest::util::{check, with_pair, Pair},
    };

    const LEN: usize = 1024 * 1024;

    fn pattern(seed: u8, buf: &mut [u8]) {
        for (i, b) in buf.iter_mut().enumerate() {
            *b = seed
                .wrapping_add((i * 7) as u8)
                .wrapping_add((i >> 9) as u8);
        }
    }

    /// Waits until `dst` equals `want` (the responder places as data
    /// arrives, after the requester's completion).
    fn placed(dst: &[u8], want: &[u8]) -> bool {
        for _ in 0..5000 {
            // The peer places into `dst` behind this shared borrow, which
            // the compiler may take as unchanging for the whole call (and
            // compare once): read it afresh each time.
            if core::hint::black_box(dst) == want {
                return true;
            }
            fsleep(Delta::from_millis(1));
        }
        false
    }

    /// A signaled RDMA Write of `src` to `dst` from A, and its successful
    /// completion.
    fn write_done(p: &Pair<'_>, wr_id: u64, src: &[u8], dst: u64) -> Result {
        p.a.post(
            wr_id,
            WR_WRITE,
            &[Seg::of(src, p.lkey)],
            Some((p.rkey, dst)),
            true,
        )?;
        write_completed(p, wr_id)
    }

    /// A's next completion: the RDMA Write `wr_id`, successful.
    fn write_completed(p: &Pair<'_>, wr_id: u64) -> Result {
        let wc = p.cq_a.poll_one(10_000).ok_or(ETIMEDOUT)?;
        check!((wc.wr_id, wc.status, wc.opcode) == (wr_id, WC_SUCCESS, WC_RDMA_WRITE));
        Ok(())
    }

    fn no_terminate(p: &Pair<'_>) -> bool {
        let (sa, sb) = (
            p.a.qp::<crate::device::Rsiw>().stream_status(),
            p.b.qp::<crate::device::Rsiw>().stream_status(),
        );
        sa.terminate_sent.is_none()
            && sa.terminate_received.is_none()
            && sb.terminate_sent.is_none()
            && !sa.failed
            && !sb.failed
    }

    /// Writes of 1 MiB from vmalloc memory, the source rewritten the
    /// moment each completes: the peer still gets every original octet
    /// with a good CRC (a page changed under TCP after the completion
    /// would fail the CRC and end in a Terminate), nearly all payload went
    /// by reference, and completions waited for TCP to release the pages.
    /// Returns A's zero-copy statistics and the device's counters
    /// (octets, batches, copied batches).
    fn rewrite_after_completion(zc: Option<u32>) -> Result<((u64, u64, u64), [u64; 3])> {
        let mut src = VVec::from_elem(0u8, LEN, GFP_KERNEL)?;
        let mut want = VVec::from_elem(0u8, LEN, GFP_KERNEL)?;
        let mut dst = VVec::from_elem(0u8, LEN, GFP_KERNEL)?;
        let dst_addr = dst.as_mut_ptr() as u64;
        let mut stats = (0, 0, 0);
        let mut counters = [0; 3];
        with_pair(
            c"rsiw_kt_zc0",
            true,
            |a, b| {
                a.qp::<crate::device::Rsiw>().set_zcopy_min(zc);
                b.qp::<crate::device::Rsiw>().set_zcopy_min(zc);
            },
            |p| {
                for round in 0..6u8 {
                    pattern(round.wrapping_mul(31).wrapping_add(1), &mut src);
                    want.copy_from_slice(&src);
                    write_done(p, u64::from(round), &src, dst_addr)?;
                    // The consumer owns the buffer again: reuse it at once.
                    src.fill(0xEE);
                    check!(placed(&dst, &want));
                    check!(no_terminate(p));
                }
                stats = p.a.qp::<crate::device::Rsiw>().zcopy_stats();
                // B sent nothing by reference: the device's octets are A's.
                check!(p.b.qp::<crate::device::Rsiw>().zcopy_stats().0 == 0);
                let qp = p.a.qp::<crate::device::Rsiw>();
                let c = qp.device_counters();
                counters = [
                    HwCounter::TxZcopyOctets,
                    HwCounter::TxZcopyBatches,
                    HwCounter::TxZcopyCopied,
                ]
                .map(|k| c.get(k));
                Ok(())
            },
        )?;
        Ok((stats, counters))
    }

    #[test]
    fn writes_go_by_reference_and_buffers_are_free_on_completion() -> Result {
        let ((refs, literal, deferred), [octets, batches, copied]) =
            rewrite_after_completion(Some(1024))?;
        pr_info!("rsiw kunit: zero-copy writes: {} octets by reference, {} literal, {} completions deferred; {} batches, {} copied\n", refs, literal, deferred, batches, copied);
        // All but each message's last FPDU, which is short of the 1024
        // octets that go by reference (1 MiB = 728 FPDUs of 1440 + 256).
        check!(refs >= 6 * (LEN as u64 - 1024));
        // Headers and trailers only: about 26 octets per 1440-octet FPDU.
        check!(literal < refs / 20);
        check!(deferred >= 6);
        // The hw counters (`rdma statistic`) tell the same: every batch was
        // released (each completion waited for its own), and each was
        // copied on the way, as loopback delivers to a local socket
        // (`skb_orphan_frags_rx`); over a NIC none is (the two-guest
        // interop checks that).
        check!(octets == refs);
        check!(batches >= 6);
        check!(copied == batches);
        Ok(())
    }

    /// With the module's defaults (`zcopy_local` off) over loopback, a
    /// route that stays in the host: bulk payload goes from the registered
    /// pages for TCP to copy (rsiw makes no copy of its own), with no
    /// notification, and each WR completes once TCP has all of it. The
    /// source rewritten the moment each completes still arrives intact.
    #[test]
    fn local_route_tcp_copies_from_the_pages() -> Result {
        check!(!crate::module_parameters::zcopy_local.value());
        let ((refs, literal, _), [octets, batches, copied]) = rewrite_after_completion(None)?;
        pr_info!(
            "rsiw kunit: writes over loopback: {} octets from the pages, {} literal\n",
            refs,
            literal
        );
        // All but each message's last FPDU, as above, and the stream's
        // first round: a stream starts on rounds through rsiw's buffer and
        // turns to the pages once a round fills it (1 KiB).
        check!(refs >= 6 * (LEN as u64 - 1024) - 2048);
        check!(literal < refs / 20);
        // Not zero-copy: no notification was sent or released.
        check!((octets, batches, copied) == (0, 0, 0));
        Ok(())
    }

    /// Such a stream turns to the pages for bulk only: after a 64 KiB
    /// Write, the first small Write's round references no pages and turns
    /// the stream back to rounds through rsiw's buffer, where the rest go
    /// (no more octets pass through the page rounds).
    #[test]
    fn local_route_small_writes_after_bulk_use_the_buffer() -> Result {
        const BIG: usize = 64 * 1024;
        let mut src = VVec::from_elem(0u8, BIG, GFP_KERNEL)?;
        let mut dst = VVec::from_elem(0u8, BIG, GFP_KERNEL)?;
        let dst_addr = dst.as_mut_ptr() as u64;
        with_pair(
            c"rsiw_kt_zc3",
            true,
            |_, _| {},
            |p| {
                let qp = p.a.qp::<crate::device::Rsiw>();
                pattern(3, &mut src);
                for round in 0..3u64 {
                    write_done(p, round, &src, dst_addr)?;
                }
                check!(placed(&dst, &src));
                let (refs0, lit0, _) = qp.zcopy_stats();
                check!(refs0 > 0);
                for i in 0..8u8 {
                    src[..64].fill(i);
                    write_done(p, 10 + u64::from(i), &src[..64], dst_addr)?;
                    check!(placed(&dst[..64], &src[..64]));
                }
                let (refs1, lit1, _) = qp.zcopy_stats();
                check!(refs1 == refs0);
                // One small FPDU (header, 64 octets, CRC) at most.
                check!(lit1 - lit0 < 128);
                check!(no_terminate(p));
                Ok(())
            },
        )
    }

    /// The round that turns a stream TCP copies back to copying rounds
    /// (literal octets only: here the small Write planned while the stream
    /// still sends from the pages) is taken by TCP only in part, as by a
    /// full socket. The rest of that round leaves before the next Write's
    /// FPDU, which goes by a copying round: the peer places every Write,
    /// with no Terminate. (When that rest was left behind unsent, the
    /// stream went out of step: here the receiver placed
    /// the out-of-step stream through the global rkey, and the guest
    /// oopsed.)
    #[test]
    fn local_route_back_to_copying_after_a_short_send() -> Result {
        const BIG: usize = 64 * 1024;
        let mut src = VVec::from_elem(0u8, BIG + 128, GFP_KERNEL)?;
        let mut dst = VVec::from_elem(0u8, BIG + 128, GFP_KERNEL)?;
        let dst_addr = dst.as_mut_ptr() as u64;
        with_pair(
            c"rsiw_kt_zc7",
            true,
            |_, _| {},
            |p| {
                let qp = p.a.qp::<crate::device::Rsiw>();
                let qpn = crate::cm::CmQp::qpn(&*qp);
                pattern(5, &mut src);
                // The bulk Write's first round from the pages sends 10
                // octets and waits: the stream stays on page rounds.
                crate::qp::short_zc_send_once(qpn, 10, false);
                p.a.post(
                    0,
                    WR_WRITE,
                    &[Seg::of(&src[..BIG], p.lkey)],
                    Some((p.rkey, dst_addr)),
                    true,
                )?;
                check!(crate::ffi::runtime::wait_ms(10_000, || {
                    !crate::qp::short_zc_send_pending()
                }));
                // The small Write's post runs the TX work: the bulk's rest,
                // then the small Write in a round of its own, with no page,
                // of which 10 octets go.
                crate::qp::short_zc_send_once(qpn, 10, true);
                p.a.post(
                    1,
                    WR_WRITE,
                    &[Seg::of(&src[BIG..BIG + 64], p.lkey)],
                    Some((p.rkey, dst_addr + BIG as u64)),
                    true,
                )?;
                write_completed(p, 0)?;
                write_completed(p, 1)?;
                check!(!crate::qp::short_zc_send_pending());
                check!(qp.zcopy_stats().0 > 0);
                // The next Write's post runs it again: the small Write's
                // rest goes first.
                write_done(p, 2, &src[BIG + 64..BIG + 128], dst_addr + BIG as u64 + 64)?;
                check!(placed(&dst, &src));
                check!(no_terminate(p));
                Ok(())
            },
        )
    }

    /// Bulk from memory TCP may not take by page (large kmalloc memory:
    /// frozen pages) goes through rsiw's buffer, grown for it, not through
    /// the literal page a few KiB a round.
    #[test]
    fn local_route_bulk_from_slab_uses_the_buffer() -> Result {
        const BIG: usize = 64 * 1024;
        let mut src = KVec::from_elem(0u8, BIG, GFP_KERNEL)?;
        let mut dst = VVec::from_elem(0u8, BIG, GFP_KERNEL)?;
        let dst_addr = dst.as_mut_ptr() as u64;
        with_pair(
            c"rsiw_kt_zc4",
            true,
            |_, _| {},
            |p| {
                for round in 0..16u8 {
                    pattern(round.wrapping_mul(13), &mut src);
                    write_done(p, u64::from(round), &src, dst_addr)?;
                    check!(placed(&dst, &src));
                }
                let (refs, literal, _) = p.a.qp::<crate::device::Rsiw>().zcopy_stats();
                pr_info!("rsiw kunit: bulk from kmalloc memory over loopback: {} octets from the pages, {} through page rounds\n", refs, literal);
                check!(refs == 0);
                // A page round (at most a page of literal octets) after
                // each 64 KiB copying round, not four in five octets.
                check!(literal < 16 * BIG as u64 / 4);
                check!(no_terminate(p));
                Ok(())
            },
        )
    }

    #[test]
    fn copying_tx_when_zero_copy_is_off() -> Result {
        let ((refs, literal, deferred), counters) = rewrite_after_completion(Some(0))?;
        check!((refs, literal, deferred) == (0, 0, 0));
        check!(counters == [0, 0, 0]);
        Ok(())
    }

    /// A Read Response goes out of the responder's memory by reference;
    /// a Send from slab memory (kmalloc) is copied, small payloads too.
    #[test]
    fn read_responses_by_reference_slab_copied() -> Result {
        let mut src = VVec::from_elem(0u8, LEN, GFP_KERNEL)?;
        let mut back = VVec::from_elem(0u8, LEN, GFP_KERNEL)?;
        pattern(77, &mut src);
        let src_addr = src.as_mut_ptr() as u64;
        with_pair(
            c"rsiw_kt_zc1",
            true,
            |a, b| {
                a.qp::<crate::device::Rsiw>().set_zcopy_min(Some(1024));
                b.qp::<crate::device::Rsiw>().set_zcopy_min(Some(1024));
            },
            |p| {
                // A reads B's memory: B sends the Read Response.
                p.a.post(
                    1,
                    WR_READ,
                    &[Seg::of_mut(&mut back, p.lkey)],
                    Some((p.rkey, src_addr)),
                    true,
                )?;
                let wc = p.cq_a.poll_one(10_000).ok_or(ETIMEDOUT)?;
                check!(
                    (wc.wr_id, wc.status, wc.opcode, wc.byte_len)
                        == (1, WC_SUCCESS, WC_RDMA_READ, LEN as u32)
                );
                check!(back[..] == src[..]);
                let (b_refs, _, _) = p.b.qp::<crate::device::Rsiw>().zcopy_stats();
                check!(b_refs >= LEN as u64 - 1024);

                // 3000 octets of kmalloc memory (slab): copied, not spliced.
                let mut small = KVec::from_elem(0u8, 3000, GFP_KERNEL)?;
                pattern(5, &mut small);
                let mut got = KVec::from_elem(0u8, 3000, GFP_KERNEL)?;
                p.b.post_recv(9, Seg::of_mut(&mut got, p.lkey))?;
                let (before, lit_before, _) = p.a.qp::<crate::device::Rsiw>().zcopy_stats();
                p.a.post(2, WR_SEND, &[Seg::of(&small, p.lkey)], None, true)?;
                let wc = p.cq_a.poll_one(10_000).ok_or(ETIMEDOUT)?;
                check!((wc.wr_id, wc.status) == (2, WC_SUCCESS));
                let wc = p.cq_b.poll_one(10_000).ok_or(ETIMEDOUT)?;
                check!(
                    (wc.wr_id, wc.status, wc.opcode, wc.byte_len) == (9, WC_SUCCESS, WC_RECV, 3000)
                );
                check!(got[..] == small[..]);
                let (after, lit_after, _) = p.a.qp::<crate::device::Rsiw>().zcopy_stats();
                check!(after == before);
                check!(lit_after >= lit_before + 3000);
                check!(no_terminate(p));
                Ok(())
            },
        )
    }

    /// What a notification's owner is told: how often, which batch, and
    /// whether the stack copied the pages.
    struct Probe {
        released: AtomicU32,
        token: AtomicU64,
        copied: AtomicBool,
    }

    impl ZcOwner for Probe {
        fn released(this: &Arc<Self>, token: u64, copied: bool) {
            this.token.store(token, Ordering::Relaxed);
            this.copied.store(copied, Ordering::Relaxed);
            this.released.fetch_add(1, Ordering::Release);
        }
    }

    /// TCP clones every skb it transmits: the clone must leave the queued
    /// skb on rsiw's pages (`SKBFL_DONT_ORPHAN`). Otherwise the stack
    /// copies them at the first transmit, and a pure zero-copy skb, whose
    /// pages TCP never charged to the socket, turns into one it uncharges
    /// when freed (`sk_forward_alloc` left over at close). Delivery to a
    /// local socket does copy, and the owner hears so.
    #[test]
    fn transmit_clones_keep_the_pages_local_delivery_copies() -> Result {
        for (local, keeps) in [(false, true), (true, false)] {
            let probe = Arc::new(
                Probe {
                    released: AtomicU32::new(0),
                    token: AtomicU64::new(0),
                    copied: AtomicBool::new(false),
                },
                GFP_KERNEL,
            )?;
            let mut notif = Notif::new(probe.clone())?;
            notif.set_token(7);
            check!(skb_keeps_page(&notif, local)? == keeps);
            // The notification's own reference still holds it.
            check!(probe.released.load(Ordering::Acquire) == 0);
            drop(notif);
            check!(probe.released.load(Ordering::Acquire) == 1);
            check!(probe.token.load(Ordering::Relaxed) == 7);
            check!(probe.copied.load(Ordering::Relaxed) != keeps);
        }
        Ok(())
    }
}

/// Transmit throughput, copying against zero-copy: RDMA Writes over a
/// loopback connection, up to 8 in flight, each configuration moving
/// `tx_bench_mib` MiB (0: a short run of 4). Figures are printed, never
/// asserted on; the data of the last Write of each run is checked.
#[cfg(rsiw_kunit)]
#[kunit_tests(rsiw_tx_bench)]
mod bench {
    use kernel::{
        prelude::*,
        time::{Instant, Monotonic},
    };

    use crate::{
        ffi::{consumer::cq::WC_SUCCESS, consumer::qp::*},
        selftest::util::{check, with_pair_emss},
    };

    fn run(zc_min: u32, crc: bool, emss: usize, msg: usize, total_mib: usize) -> Result<u64> {
        let mut src = VVec::from_elem(0u8, msg, GFP_KERNEL)?;
        let mut dst = VVec::from_elem(0u8, msg, GFP_KERNEL)?;
        for (i, b) in src.iter_mut().enumerate() {
            *b = (i * 13 + 7) as u8;
        }
        let dst_addr = dst.as_mut_ptr() as u64;
        // (checked_div: objtool does not know the divide-by-zero panic.)
        let count = (total_mib * 1024 * 1024)
            .checked_div(msg)
            .unwrap_or(1)
            .max(1) as u64;
        let mut rate = 0;
        with_pair_emss(
            c"rsiw_kt_txb",
            crc,
            emss,
            |a, b| {
                a.qp::<crate::device::Rsiw>().set_zcopy_min(Some(zc_min));
                b.qp::<crate::device::Rsiw>().set_zcopy_min(Some(zc_min));
            },
            |p| {
                let start = Instant::<Monotonic>::now();
                let (mut posted, mut done) = (0u64, 0u64);
                while done < count {
                    while posted < count && posted - done < 8 {
                        p.a.post(
                            posted,
                            WR_WRITE,
                            &[Seg::of(&src, p.lkey)],
                            Some((p.rkey, dst_addr)),
                            true,
                        )?;
                        posted += 1;
                    }
                    let wc = p.cq_a.poll_one(10_000).ok_or(ETIMEDOUT)?;
                    check!(wc.status == WC_SUCCESS);
                    done += 1;
                }
                let micros = (start.elapsed().as_nanos() / 1000).max(1) as u64;
                let kib = count.saturating_mul(msg as u64 / 1024);
                rate = kib
                    .saturating_mul(1_000_000)
                    .checked_div(micros)
                    .unwrap_or(0)
                    / 1024; // MiB/s
                            // Placement trails the requester's completion: wait for it.
                for _ in 0..5000 {
                    if core::hint::black_box(&dst[..]) == &src[..] {
                        break;
                    }
                    kernel::time::delay::fsleep(kernel::time::Delta::from_millis(1));
                }
                check!(dst[..] == src[..]);
                Ok(())
            },
        )?;
        Ok(rate)
    }

    #[test]
    fn write_throughput_copy_vs_zero_copy() -> Result {
        let mib = match crate::module_parameters::tx_bench_mib.value() {
            0 => 4,
            n => n as usize,
        };
        // EMSS 1460: FPDUs of an Ethernet link; 65483: those of lo.
        for emss in [1460, 65483] {
            for crc in [false, true] {
                for msg in [64 * 1024, 1024 * 1024] {
                    let copy = run(0, crc, emss, msg, mib)?;
                    let zc = run(1024, crc, emss, msg, mib)?;
                    pr_info!(
                        "rsiw tx bench: EMSS {:>5}, Write {:>4} KiB, CRC {:<3}: copy {:>5} MiB/s, zero-copy {:>5} MiB/s ({} MiB each)\n",
                        emss,
                        msg / 1024,
                        if crc { "on" } else { "off" },
                        copy,
                        zc,
                        mib
                    );
                }
            }
        }
        Ok(())
    }
}
