// SPDX-License-Identifier: GPL-2.0
//! Self-tests of the RX work: on a route that stays in the host
//! (loopback here, veth in the VM) the receive softirq runs on the
//! sender's CPU, in the sender's context. When a process's system call
//! sent a bulk stream (`rx_offload_min` octets queued), the stream is read
//! in a work item instead, which may run on another CPU; small messages,
//! and bulk a kernel thread sent (rsiw's TX work, as for every kernel
//! consumer), are still read in the softirq.
//!
//! The senders here are kernel threads (the TX work), so the first two
//! cases let the receiving QP take the work whoever sent and however late
//! it starts (`force_rx_work`); the VM's userspace suite checks the real
//! trigger over veth (perftest's doorbells, `rx_work_octets`).

use kernel::prelude::*;

#[cfg(rsiw_kunit)]
#[kunit_tests(rsiw_rx_work)]
mod tests {
    use kernel::prelude::*;

    use crate::{
        device::counters::HwCounter,
        ffi::consumer::{
            cq::{WC_RECV, WC_SEND, WC_SUCCESS, WC_WR_FLUSH_ERR},
            qp::*,
        },
        qp::QpState,
        selftest::util::{check, with_pair, Pair},
    };

    fn pattern(seed: u8, buf: &mut [u8]) {
        for (i, b) in buf.iter_mut().enumerate() {
            *b = seed
                .wrapping_add((i * 13) as u8)
                .wrapping_add((i >> 11) as u8);
        }
    }

    fn healthy(p: &Pair<'_>) -> bool {
        let (sa, sb) = (
            p.a.qp::<crate::device::Rsiw>().stream_status(),
            p.b.qp::<crate::device::Rsiw>().stream_status(),
        );
        sa.terminate_sent.is_none() && sb.terminate_sent.is_none() && !sa.failed && !sb.failed
    }

    /// `n` Sends of `msg` octets into posted receives, each a new pattern
    /// in the one source buffer (rewritten the moment its Send completes):
    /// every receive completes in order with its length and every octet
    /// lands. `forced`: B takes the RX work for a kernel thread's
    /// stream too, and whenever it starts. Returns B's octets read in all and by the RX work.
    fn sends(name: &'static CStr, msg: usize, n: usize, forced: bool) -> Result<(u64, u64)> {
        let mut src = VVec::from_elem(0u8, msg, GFP_KERNEL)?;
        let mut want = VVec::from_elem(0u8, msg * n, GFP_KERNEL)?;
        let dst = VVec::from_elem(0u8, msg * n, GFP_KERNEL)?;
        let mut split = (0, 0);
        with_pair(
            name,
            false,
            |_, b| {
                if forced {
                    b.qp::<crate::device::Rsiw>().force_rx_work();
                }
            },
            |p| {
                for i in 0..n {
                    p.b.post_recv(
                        100 + i as u64,
                        Seg::of(&dst[i * msg..(i + 1) * msg], p.lkey),
                    )?;
                    pattern(i as u8 + 1, &mut src);
                    want[i * msg..(i + 1) * msg].copy_from_slice(&src);
                    p.a.post(i as u64, WR_SEND, &[Seg::of(&src, p.lkey)], None, true)?;
                    let wc = p.cq_a.poll_one(10_000).ok_or(ETIMEDOUT)?;
                    check!((wc.wr_id, wc.status, wc.opcode) == (i as u64, WC_SUCCESS, WC_SEND));
                    let wc = p.cq_b.poll_one(10_000).ok_or(ETIMEDOUT)?;
                    check!(
                        (wc.wr_id, wc.status, wc.opcode, wc.byte_len)
                            == (100 + i as u64, WC_SUCCESS, WC_RECV, msg as u32)
                    );
                }
                check!(dst[..] == want[..]);
                check!(healthy(p));
                // Each test has a device of its own: its counter is B's.
                let b = p.b.qp::<crate::device::Rsiw>();
                split = (
                    b.rx_bytes(),
                    b.device_counters().get(HwCounter::RxWorkOctets),
                );
                Ok(())
            },
        )?;
        Ok(split)
    }

    /// A bulk stream: Sends of 256 KiB. Most of B's stream is read by the
    /// RX work (what arrives while the work reads waits in TCP's backlog,
    /// which the work's `release_sock` hands back to it).
    #[test]
    fn bulk_stream_is_read_by_the_rx_work() -> Result {
        check!(crate::module_parameters::rx_offload_min.value() == 32 * 1024);
        let (rx, work) = sends(c"rsiw_kt_rxw0", 256 * 1024, 12, true)?;
        pr_info!(
            "rsiw kunit: bulk sends: {} octets read, {} by the RX work\n",
            rx,
            work
        );
        check!(rx >= 12 * 256 * 1024);
        check!(work >= rx / 2);
        Ok(())
    }

    /// Small messages never queue enough for the work: the softirq reads
    /// them all, and a small message's round trip pays no work item.
    #[test]
    fn small_messages_are_read_in_the_softirq() -> Result {
        let (rx, work) = sends(c"rsiw_kt_rxw1", 64, 64, true)?;
        check!(rx >= 64 * 64);
        check!(work == 0);
        Ok(())
    }

    /// Bulk a kernel thread sent (rsiw's TX work: every kernel consumer's
    /// traffic, and Read responses) is read in the softirq: the thread has
    /// nothing to get back to, and the hop would only add latency.
    #[test]
    fn a_kernel_threads_bulk_is_read_in_the_softirq() -> Result {
        let (rx, work) = sends(c"rsiw_kt_rxw2", 256 * 1024, 4, false)?;
        check!(rx >= 4 * 256 * 1024);
        check!(work == 0);
        Ok(())
    }

    /// The receiver is moved to Error while its RX work reads a bulk
    /// stream, two messages in: every receive completes once, in order,
    /// whole and with its data until the first flushed one, flushed after
    /// it; every Send of the sender completes once; and the teardown (the
    /// QP's `detach`, which waits the work out) ends.
    #[test]
    fn error_while_the_rx_work_reads() -> Result {
        const MSG: usize = 256 * 1024;
        const N: usize = 12;
        let mut src = VVec::from_elem(0u8, MSG, GFP_KERNEL)?;
        pattern(7, &mut src);
        let dst = VVec::from_elem(0u8, MSG * N, GFP_KERNEL)?;
        with_pair(
            c"rsiw_kt_rxw3",
            false,
            |_, b| b.qp::<crate::device::Rsiw>().force_rx_work(),
            |p| {
                for i in 0..N {
                    p.b.post_recv(
                        100 + i as u64,
                        Seg::of(&dst[i * MSG..(i + 1) * MSG], p.lkey),
                    )?;
                }
                for i in 0..N {
                    p.a.post(i as u64, WR_SEND, &[Seg::of(&src, p.lkey)], None, true)?;
                }
                // Two messages in, read by the work: the error comes while
                // it reads the third or between two of its runs.
                for i in 0..2 {
                    let wc = p.cq_b.poll_one(10_000).ok_or(ETIMEDOUT)?;
                    check!(
                        (wc.wr_id, wc.status, wc.byte_len)
                            == (100 + i as u64, WC_SUCCESS, MSG as u32)
                    );
                    check!(dst[i * MSG..(i + 1) * MSG] == src[..]);
                }
                let b = p.b.qp::<crate::device::Rsiw>();
                check!(b.device_counters().get(HwCounter::RxWorkOctets) > 0);
                p.b.modify(QpState::Err)?;
                let mut flushed = false;
                let mut whole = 2;
                for i in 2..N {
                    let wc = p.cq_b.poll_one(10_000).ok_or(ETIMEDOUT)?;
                    check!(wc.wr_id == 100 + i as u64);
                    if wc.status == WC_SUCCESS {
                        check!(!flushed);
                        check!((wc.opcode, wc.byte_len) == (WC_RECV, MSG as u32));
                        check!(dst[i * MSG..(i + 1) * MSG] == src[..]);
                        whole += 1;
                    } else {
                        check!(wc.status == WC_WR_FLUSH_ERR);
                        flushed = true;
                    }
                }
                check!(p.cq_b.poll_one(20).is_none());
                let mut seen = [false; N];
                for _ in 0..N {
                    let wc = p.cq_a.poll_one(10_000).ok_or(ETIMEDOUT)?;
                    let i = wc.wr_id as usize;
                    check!(i < N && !seen[i]);
                    seen[i] = true;
                }
                pr_info!(
                    "rsiw kunit: error while the RX work reads: {} of {} receives whole\n",
                    whole,
                    N
                );
                Ok(())
            },
        )
    }
}
