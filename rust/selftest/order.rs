// SPDX-License-Identifier: GPL-2.0
//! Posting while the QP goes to Error: every WR completes once, each
//! queue in posting order (the verbs promise it; `ib_drain_qp` and every
//! ULP that counts its completions rely on it).
//!
//! A worker keeps Reads, Writes and receives in flight on one QP of a
//! connected pair while the test thread ends the stream: the ULP moving
//! the QP to Error (`Qp::fail`: the QP shows Error before the engine
//! hears of it) or the peer going (its FIN: the engine flushes before
//! the QP shows Error). Posts that fall between the two must queue
//! behind the flush or complete after it, never ahead of older WRs and
//! never left uncompleted.

use kernel::prelude::*;

#[cfg(rsiw_kunit)]
#[kunit_tests(rsiw_flush_order)]
mod tests {
    use core::sync::atomic::{AtomicI32, AtomicUsize, Ordering};

    use kernel::{
        prelude::*,
        sync::Arc,
        time::{delay::fsleep, Delta, Instant, Monotonic},
        workqueue,
    };

    use crate::{
        device::Rsiw,
        ffi::{
            consumer::{
                cq::{
                    KCq, RawWc, NEXT_COMP, REPOST_WR_ID, WC_RECV, WC_SEND, WC_SUCCESS,
                    WC_WR_FLUSH_ERR,
                },
                flush::{post_reg_mr, WC_REG_MR},
                mr::{KMr, KPd},
                qp::*,
            },
            net::socket::TcpSocket,
        },
        qp::QpState,
        selftest::{
            atomic::harness::{connect, fast_reg, params, with_device, End, ALL_RIGHTS},
            util::EMSS,
        },
    };

    /// `assert!` outside a `#[test]` fn would BUG the kernel: report.
    macro_rules! check {
        ($c:expr) => {
            if !$c {
                pr_err!(
                    "rsiw kunit: check failed (line {}): {}\n",
                    line!(),
                    stringify!($c)
                );
                return Err(EBADMSG);
            }
        };
    }

    const DEPTH: u32 = 64;
    /// WRs in flight per queue (the CQ holds both queues' worth).
    const WINDOW: usize = 40;
    /// WRs posted to each queue after the first failed completion: they
    /// take the paths of a QP in Error.
    const AFTER: usize = 12;
    const ROUNDS: usize = 60;
    const STALL_NS: i64 = 10_000_000_000;

    struct Worker {
        end: End,
        lkey: u32,
        rkey: u32,
        /// Local buffer (8 octets per slot) and the peer's MR.
        local: u64,
        remote: u64,
        /// Send completions seen so far (for the test thread's timing).
        sent: AtomicUsize,
        error: AtomicI32,
    }

    /// One queue's bookkeeping: posted, completed, and whether a failed
    /// completion was seen. WRs posted after that must be flushed; ones
    /// posted before may still succeed after an older one was flushed (a
    /// Write sent behind a Read whose response never came: its completion
    /// waited for the Read's, its data went out).
    #[derive(Default)]
    struct Queue {
        posted: usize,
        completed: usize,
        failed: bool,
        /// `posted` when the first failed completion was seen.
        failed_at: usize,
        after: usize,
    }

    impl Queue {
        fn wants_post(&self) -> bool {
            self.posted - self.completed < WINDOW && (!self.failed || self.after < AFTER)
        }

        fn posted_one(&mut self) {
            self.posted += 1;
            if self.failed {
                self.after += 1;
            }
        }

        fn complete(&mut self, wc: &RawWc, what: &str) -> Result {
            let late = self.failed && self.completed >= self.failed_at;
            let ok = match wc.status {
                WC_SUCCESS => !late,
                WC_WR_FLUSH_ERR => true,
                _ => false,
            };
            if wc.wr_id as usize != self.completed || !ok {
                pr_err!(
                    "rsiw kunit: {} completion {}: {:?}\n",
                    what,
                    self.completed,
                    wc
                );
                return Err(EIO);
            }
            if wc.status != WC_SUCCESS && !self.failed {
                self.failed = true;
                self.failed_at = self.posted;
            }
            self.completed += 1;
            Ok(())
        }

        fn done(&self) -> bool {
            self.failed && self.after == AFTER && self.completed == self.posted
        }
    }

    fn work(w: &Worker) -> Result {
        let (mut s, mut r) = (Queue::default(), Queue::default());
        let mut wcs = [RawWc::default(); 16];
        let mut progress = Instant::<Monotonic>::now();
        while !(s.done() && r.done()) {
            while s.wants_post() {
                // Alternate Reads (which wait for their responses) and
                // Writes of 8 octets, each into its own slot.
                let slot = (s.posted % 64) as u64;
                let seg = Seg {
                    addr: w.local + 8 * slot,
                    len: 8,
                    lkey: w.lkey,
                };
                let op = if s.posted % 2 == 0 { WR_READ } else { WR_WRITE };
                w.end.qp.post(
                    s.posted as u64,
                    op,
                    &[seg],
                    Some((w.rkey, w.remote + 8 * slot)),
                    true,
                )?;
                s.posted_one();
            }
            while r.wants_post() {
                let slot = (64 + r.posted % 64) as u64;
                w.end.qp.post_recv(
                    r.posted as u64,
                    Seg {
                        addr: w.local + 8 * slot,
                        len: 8,
                        lkey: w.lkey,
                    },
                )?;
                r.posted_one();
            }
            let n = w.end.cq.poll(&mut wcs);
            if n <= 0 {
                if progress.elapsed().as_nanos() > STALL_NS {
                    pr_err!(
                        "rsiw kunit: stalled: send {}/{}, recv {}/{}\n",
                        s.completed,
                        s.posted,
                        r.completed,
                        r.posted
                    );
                    return Err(ETIMEDOUT);
                }
                fsleep(Delta::from_micros(20));
                continue;
            }
            for wc in &wcs[..n as usize] {
                if wc.opcode == WC_RECV {
                    r.complete(wc, "recv")?;
                } else {
                    s.complete(wc, "send")?;
                    w.sent.store(s.completed, Ordering::Relaxed);
                }
            }
            progress = Instant::<Monotonic>::now();
        }
        Ok(())
    }

    /// One round: the worker runs on QP `a`; after `at` send completions
    /// `a` (the ULP) or `b` (the peer) goes to Error.
    fn round(
        dev: &crate::ffi::consumer::device::Found,
        pd: &KPd,
        at: usize,
        local_end: bool,
    ) -> Result {
        let lkey = pd.local_dma_lkey();
        // Declared before the QPs: dropped after them.
        let mut local = KVec::from_elem(0u8, 8 * 128, GFP_KERNEL)?;
        let mut remote = KVec::from_elem(0u8, 8 * 64, GFP_KERNEL)?;
        let (mr, rkey) = fast_reg(dev, pd, &mut remote, None, ALL_RIGHTS)?;
        let (a, b) = connect(dev, pd, DEPTH)?;
        let w = Arc::new(
            Worker {
                end: a,
                lkey,
                rkey,
                local: local.as_mut_ptr() as u64,
                remote: remote.as_ptr() as u64,
                sent: AtomicUsize::new(0),
                error: AtomicI32::new(0),
            },
            GFP_KERNEL,
        )?;
        let done = Arc::new(AtomicUsize::new(0), GFP_KERNEL)?;
        let (wk, d) = (w.clone(), done.clone());
        let job = move || {
            if let Err(e) = work(&wk) {
                wk.error.store(e.to_errno(), Ordering::Relaxed);
            }
            drop(wk);
            d.store(1, Ordering::Release);
        };
        workqueue::system_unbound().try_spawn(GFP_KERNEL, job)?;
        let start = Instant::<Monotonic>::now();
        while w.sent.load(Ordering::Relaxed) < at && done.load(Ordering::Acquire) == 0 {
            if start.elapsed().as_nanos() > STALL_NS {
                break;
            }
            fsleep(Delta::from_micros(50));
        }
        let ended = if local_end {
            w.end.qp.modify(QpState::Err)
        } else {
            b.qp.modify(QpState::Err)
        };
        while done.load(Ordering::Acquire) == 0 {
            fsleep(Delta::from_millis(1));
        }
        ended?;
        let e = w.error.load(Ordering::Relaxed);
        if e != 0 {
            return Err(Error::from_errno(e));
        }
        check!(w.sent.load(Ordering::Relaxed) >= at);
        drop(w);
        drop(b);
        drop(mr);
        drop(local);
        drop(remote);
        Ok(())
    }

    /// The next completions on `cq` are exactly these (`wr_id`, opcode),
    /// in this order, each `IB_WC_WR_FLUSH_ERR`; nothing follows them.
    fn expect_flushes(cq: &KCq, want: &[(u64, u32)]) -> Result {
        for &(id, opcode) in want {
            let wc = cq.poll_one(2000).ok_or(ETIMEDOUT)?;
            if (wc.wr_id, wc.status, wc.opcode) != (id, WC_WR_FLUSH_ERR, opcode) {
                pr_err!(
                    "rsiw kunit: expected {:#x} (opcode {}) flushed: {:?}\n",
                    id,
                    opcode,
                    wc
                );
                return Err(EIO);
            }
        }
        check!(cq.poll_one(50).is_none());
        Ok(())
    }

    /// A memory registration left on the send queue when the stream
    /// ends is flushed with the WRs around it, in order, not carried out
    /// (the engine's flush takes the queue's rest through the host, which
    /// carries local operations out when it hands WRs to a live stream).
    #[test]
    fn a_registration_left_on_the_queue_is_flushed_not_carried_out() -> Result {
        with_device(c"rsiw_ord2", |dev| {
            let pd = KPd::alloc(dev, false)?;
            let lkey = pd.local_dma_lkey();
            let cq = KCq::create(dev, 16)?;
            let qp = KQp::create(&pd, &cq, &cq, 8)?;
            qp.modify(QpState::Init)?;
            // The responder's end of a connection whose initiator (a bare
            // socket) never sends its RTR: the engine takes no WR, what is
            // posted stays on the send queue.
            let (_initiator, sock) = TcpSocket::loopback_pair()?;
            qp.qp::<Rsiw>().attach(sock, &params(false), EMSS, &[])?;
            let buf = KVec::from_elem(0u8, 64, GFP_KERNEL)?;
            let mut mem = KVec::from_elem(0u8, 4096, GFP_KERNEL)?;
            let mr = KMr::alloc(&pd, 4)?;
            check!(mr.map_buf(dev, &mut mem, 4096)? == 1);
            mr.update_key(0x44);
            let stag = mr.keys().0;
            qp.post(1, WR_SEND, &[Seg::of(&buf, lkey)], None, true)?;
            post_reg_mr(&qp, 2, &mr, ALL_RIGHTS)?;
            qp.post(3, WR_SEND, &[Seg::of(&buf, lkey)], None, true)?;
            check!(cq.poll_one(100).is_none());
            qp.modify(QpState::Err)?;
            expect_flushes(&cq, &[(1, WC_SEND), (2, WC_REG_MR), (3, WC_SEND)])?;
            let table = dev.device::<Rsiw>().data().stags();
            check!(table.get(stag).is_some_and(|m| !m.is_valid(stag)));
            drop(qp);
            Ok(())
        })
    }

    /// A consumer that reposts a receive from its completion handler
    /// while its QP fails: the handler runs as the engine flushes, under
    /// the QP's stream lock, and its post must neither wait for that lock
    /// nor complete ahead of the older receives.
    #[test]
    fn a_handler_reposting_on_a_flush_completion_neither_blocks_nor_jumps_the_queue() -> Result {
        with_device(c"rsiw_ord3", |dev| {
            let pd = KPd::alloc(dev, false)?;
            let lkey = pd.local_dma_lkey();
            let (a, b) = connect(dev, &pd, 16)?;
            let mut buf = KVec::from_elem(0u8, 8 * 4, GFP_KERNEL)?;
            let base = buf.as_mut_ptr() as u64;
            for i in 0..4u64 {
                a.qp.post_recv(
                    i,
                    Seg {
                        addr: base + 8 * i,
                        len: 8,
                        lkey,
                    },
                )?;
            }
            {
                let _hook = a.cq.repost_from_handler(&a.qp);
                check!(a.cq.req_notify(NEXT_COMP) == 0);
                a.qp.modify(QpState::Err)?;
                let recv = |id| (id, WC_RECV);
                expect_flushes(
                    &a.cq,
                    &[recv(0), recv(1), recv(2), recv(3), recv(REPOST_WR_ID)],
                )?;
            }
            check!(a.cq.seen().reposted() == Some(0));
            drop(a);
            drop(b);
            drop(buf);
            Ok(())
        })
    }

    /// Rounds end the stream from the QP's side and from the peer's, after
    /// a varying number of completions (so at varying points of the
    /// worker's loop).
    #[test]
    fn posts_racing_the_error_state_complete_once_and_in_order() -> Result {
        with_device(c"rsiw_ord", |dev| {
            let pd = KPd::alloc(dev, false)?;
            for i in 0..ROUNDS {
                let at = 8 + (i * 37) % 120;
                round(dev, &pd, at, i % 2 == 0)?;
            }
            pr_info!(
                "rsiw flush order: {} rounds: every WR completed once, in order\n",
                ROUNDS
            );
            Ok(())
        })
    }
}
