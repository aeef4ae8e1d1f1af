// SPDX-License-Identifier: GPL-2.0
//! Completion queues.
//!
//! A CQ is a fixed ring of [`Completion`]s, allocated at create and
//! resize, behind an irq-safe spinlock: [`Cq::push`] may run in any
//! context (the QP's RX softirq, its TX work, flush on destroy) and never
//! allocates. When the ring is full a push fails and the CQ raises
//! `IB_EVENT_CQ_ERR`: no completion is overwritten. The event is raised
//! once for the CQ's life, at its first overrun: the verbs make a CQ
//! overrun an affiliated asynchronous error after which the CQ has lost
//! completions for good (the consumer destroys it; hardware RNICs put the
//! CQ in error). rsiw still queues completions that later find room, but
//! never raises the event again, so a process that keeps a CQ full (ring
//! posting refuses thousands of CQEs per doorbell) cannot queue one
//! unaccounted event allocation per refused CQE on uverbs' async queue.
//! A QP's completions are purged from a kernel-side CQ when the QP is
//! destroyed ([`Cq::purge`]): none may name an `ib_qp` the core frees. The
//! consumer's completion handler runs outside the lock, once per arming
//! (`ib_req_notify_cq`), for the next completion or, when armed for
//! solicited only, the next solicited or unsuccessful one.

use kernel::prelude::*;

pub(crate) use crate::ffi::ib::{Arm, Completion, CqNotifier, WcOpcode, WcQp, WcStatus};
use crate::{
    ffi::ib::abi,
    ffi::ib::rsiw_cqe,
    ffi::sync::{new_spinlock_irq, SpinLockIrq},
    ring::CompletionRing,
};

mod verbs;

/// A full CQ refused a completion; `first`: the CQ's first overrun (the
/// one `IB_EVENT_CQ_ERR` is raised for).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Overflow {
    pub(crate) first: bool,
}

/// The ring and its arming; pure logic, no locking. A process's CQ
/// (`user`) has its completions in the ring it maps, none here.
pub(crate) struct CqRing {
    entries: KVVec<Completion>,
    head: usize,
    count: usize,
    arm: Arm,
    user: Option<CompletionRing>,
    /// The CQ refused a completion once (its overrun was reported).
    overrun: bool,
}

impl CqRing {
    /// A ring of `cqe` entries (at least one).
    pub(crate) fn new(cqe: usize) -> Result<Self> {
        Ok(Self {
            entries: Self::alloc(cqe)?,
            head: 0,
            count: 0,
            arm: Arm::None,
            user: None,
            overrun: false,
        })
    }

    /// A process's CQ: its completions go to `ring`.
    pub(crate) fn new_user(ring: CompletionRing) -> Self {
        Self {
            entries: KVVec::new(),
            head: 0,
            count: 0,
            arm: Arm::None,
            user: Some(ring),
            overrun: false,
        }
    }

    fn alloc(cqe: usize) -> Result<KVVec<Completion>> {
        if cqe == 0 {
            return Err(EINVAL);
        }
        Ok(KVVec::from_elem(
            Completion::default(),
            cqe,
            GFP_KERNEL_ACCOUNT,
        )?)
    }

    #[cfg(rsiw_kunit)]
    pub(crate) fn capacity(&self) -> usize {
        self.entries.len()
    }

    pub(crate) fn len(&self) -> usize {
        match &self.user {
            Some(r) => r.len() as usize,
            None => self.count,
        }
    }

    /// The CQ refuses a completion: `Overflow::first` for its first
    /// overrun only.
    fn overflow(&mut self) -> Overflow {
        let first = !self.overrun;
        self.overrun = true;
        Overflow { first }
    }

    /// Queues `c`; `Ok(true)` if the consumer is to be notified (and the
    /// CQ is disarmed), `Err(Overflow)` if the ring is full. A process's
    /// arming (the ring's `armed` word) fires at most once per arm: it is
    /// taken with a compare-exchange back to unarmed.
    pub(crate) fn push(&mut self, c: Completion) -> Result<bool, Overflow> {
        if let Some(ring) = self.user.as_mut() {
            if !ring.push(&user_cqe(&c)) {
                return Err(self.overflow());
            }
            let fires = c.solicited || c.status != WcStatus::Success;
            // Armed by the process (in the ring) or by a command.
            let by_cmd = match self.arm {
                Arm::Next => true,
                Arm::Solicited => fires,
                Arm::None => false,
            };
            if by_cmd {
                self.arm = Arm::None;
            }
            return Ok(ring.take_user_arm(fires) | by_cmd);
        }
        let cap = self.entries.len();
        if self.count == cap {
            return Err(self.overflow());
        }
        let tail = (self.head + self.count) % cap;
        self.entries[tail] = c;
        self.count += 1;
        let notify = match self.arm {
            Arm::Next => true,
            Arm::Solicited => c.solicited || c.status != WcStatus::Success,
            Arm::None => false,
        };
        if notify {
            self.arm = Arm::None;
        }
        Ok(notify)
    }

    pub(crate) fn pop(&mut self) -> Option<Completion> {
        // A process polls its own ring.
        if self.count == 0 {
            return None;
        }
        let c = self.entries[self.head];
        self.head = (self.head + 1) % self.entries.len();
        self.count -= 1;
        Some(c)
    }

    /// Drops every queued completion of `qp` (it is being destroyed),
    /// keeping the others in order; returns how many went. A process's
    /// ring holds no `ib_qp` pointer, only numbers: nothing to do there.
    pub(crate) fn purge(&mut self, qp: WcQp) -> usize {
        if self.user.is_some() || self.count == 0 {
            return 0;
        }
        let cap = self.entries.len();
        let mut kept = 0;
        for i in 0..self.count {
            let c = self.entries[(self.head + i) % cap];
            if c.qp != qp {
                self.entries[(self.head + kept) % cap] = c;
                kept += 1;
            }
        }
        let gone = self.count - kept;
        self.count = kept;
        gone
    }

    /// `ib_req_notify_cq`: arms (never weakening an arming for the next
    /// completion); returns whether completions are queued (for
    /// `IB_CQ_REPORT_MISSED_EVENTS`).
    pub(crate) fn arm(&mut self, how: Arm) -> bool {
        self.arm = match (self.arm, how) {
            (Arm::Next, _) | (_, Arm::Next) => Arm::Next,
            (Arm::Solicited, _) | (_, Arm::Solicited) => Arm::Solicited,
            _ => Arm::None,
        };
        self.len() > 0
    }

    /// Moves the queued completions, in order, into `new` (which must
    /// hold them all) and returns the old storage.
    fn replace(
        &mut self,
        mut new: KVVec<Completion>,
    ) -> Result<KVVec<Completion>, KVVec<Completion>> {
        if new.len() < self.count || new.is_empty() || self.user.is_some() {
            return Err(new);
        }
        let count = self.count;
        for slot in new.iter_mut().take(count) {
            // `count` entries are queued, so `pop` cannot fail here.
            *slot = self.pop().unwrap_or_default();
        }
        self.head = 0;
        self.count = count;
        Ok(core::mem::replace(&mut self.entries, new))
    }
}

/// A completion queue.
#[pin_data]
pub(crate) struct Cq {
    #[pin]
    ring: SpinLockIrq<CqRing>,
    notifier: CqNotifier,
}

impl Cq {
    pub(crate) fn new(cqe: usize, notifier: CqNotifier) -> Result<impl PinInit<Self, Error>> {
        let ring = CqRing::new(cqe)?;
        Ok(try_pin_init!(Cq {
            ring <- new_spinlock_irq!(ring, "rsiw_cq"),
            notifier,
        }? Error))
    }

    /// A process's CQ, its completions in `ring`.
    pub(crate) fn new_user(
        ring: CompletionRing,
        notifier: CqNotifier,
    ) -> impl PinInit<Self, Error> {
        try_pin_init!(Cq {
            ring <- new_spinlock_irq!(CqRing::new_user(ring), "rsiw_cq"),
            notifier,
        }? Error)
    }

    /// Whether the CQ is a process's ring.
    pub(crate) fn is_user(&self) -> bool {
        self.ring.lock().user.is_some()
    }

    /// Queues a completion (any context, no allocation). Calls the
    /// consumer's completion handler if the CQ was armed for it. A full CQ
    /// refuses the completion with `ENOSPC`; its first refusal raises
    /// `IB_EVENT_CQ_ERR` (once for the CQ's life, see the module doc).
    ///
    /// Callers may hold the pushing QP's stream lock (`SpinLockBh`; every
    /// engine callback and flush does) and its queue locks: the consumer's
    /// handlers run under them (see `CqNotifier`). The CQ's own lock is
    /// dropped before any handler runs.
    pub(crate) fn push(&self, c: Completion) -> Result {
        let res = self.ring.lock().push(c);
        match res {
            Ok(true) => {
                self.notifier.completion();
                Ok(())
            }
            Ok(false) => Ok(()),
            Err(Overflow { first }) => {
                if first {
                    self.notifier.overflow();
                }
                Err(ENOSPC)
            }
        }
    }

    /// Takes up to `max` completions, oldest first, handing each to `f`;
    /// returns how many.
    pub(crate) fn poll(&self, max: usize, mut f: impl FnMut(usize, &Completion)) -> usize {
        let mut ring = self.ring.lock();
        let mut n = 0;
        while n < max {
            let Some(c) = ring.pop() else { break };
            f(n, &c);
            n += 1;
        }
        n
    }

    /// `destroy_qp`: drops the completions of the QP `qp` names from a
    /// kernel-side CQ before the core frees its `ib_qp` (a poll would hand
    /// the freed pointer to the consumer in `wc->qp`), as hardware drivers
    /// clean their CQs at destroy. Returns how many went.
    pub(crate) fn purge(&self, qp: WcQp) -> usize {
        self.ring.lock().purge(qp)
    }

    /// Arms the CQ; `true` if completions are already queued.
    pub(crate) fn arm(&self, how: Arm) -> bool {
        self.ring.lock().arm(how)
    }

    /// Completions queued.
    #[cfg(rsiw_kunit)]
    pub(crate) fn len(&self) -> usize {
        self.ring.lock().len()
    }

    #[cfg(rsiw_kunit)]
    /// Ring size.
    pub(crate) fn capacity(&self) -> usize {
        self.ring.lock().capacity()
    }

    /// Resizes the ring to `cqe` entries, keeping the queued completions;
    /// `EINVAL` if they would not fit.
    pub(crate) fn resize(&self, cqe: usize) -> Result {
        if self.is_user() {
            // The process maps the ring: a new size needs a new mapping,
            // which the ABI has no command for (yet).
            return Err(EOPNOTSUPP);
        }
        let new = CqRing::alloc(cqe)?;
        // The old storage is freed after the lock is dropped.
        let old = self.ring.lock().replace(new);
        match old {
            Ok(old) => {
                drop(old);
                Ok(())
            }
            Err(new) => {
                drop(new);
                Err(EINVAL)
            }
        }
    }
}

/// A completion as the ABI's `rsiw_cqe` (`ibv_wc` opcode and status values).
fn user_cqe(c: &Completion) -> rsiw_cqe {
    let mut e = rsiw_cqe {
        wr_id: c.wr_id,
        opcode: ibv_opcode(c.opcode),
        status: ibv_status(c.status),
        byte_len: c.byte_len,
        qp_num: c.qp_num,
        vendor_err: c.vendor_err,
        ..rsiw_cqe::default()
    };
    if let Some(imm) = c.imm {
        e.imm_inv = imm.to_be();
        e.flags |= abi::CQE_WITH_IMM;
    } else if let Some(stag) = c.invalidated {
        e.imm_inv = stag;
        e.flags |= abi::CQE_WITH_INV;
    }
    e
}

/// `enum ibv_wc_opcode` (`enum ib_uverbs_wc_opcode`).
fn ibv_opcode(o: WcOpcode) -> u8 {
    use WcOpcode::*;
    match o {
        Send => 0,
        RdmaWrite => 1,
        RdmaRead => 2,
        CompSwap | MaskedCompSwap => 3,
        FetchAdd | MaskedFetchAdd => 4,
        LocalInv => 6,
        RegMr => 5, // IBV_WC_BIND_MW: no user REG_MR exists
        Flush => 8,
        AtomicWrite => 9,
        Recv => 128,
        RecvRdmaWithImm => 129,
    }
}

/// `enum ibv_wc_status`: the verbs' order, as `enum ib_wc_status`.
fn ibv_status(s: WcStatus) -> u8 {
    use WcStatus::*;
    match s {
        Success => 0,
        LocLenErr => 1,
        LocQpOpErr => 2,
        LocEecOpErr => 3,
        LocProtErr => 4,
        WrFlushErr => 5,
        MwBindErr => 6,
        BadRespErr => 7,
        LocAccessErr => 8,
        RemInvReqErr => 9,
        RemAccessErr => 10,
        RemOpErr => 11,
        RetryExcErr => 12,
        RnrRetryExcErr => 13,
        LocRddViolErr => 14,
        RemInvRdReqErr => 15,
        RemAbortErr => 16,
        InvEecnErr => 17,
        InvEecStateErr => 18,
        FatalErr => 19,
        RespTimeoutErr => 20,
        GeneralErr => 21,
    }
}

#[cfg(rsiw_kunit)]
#[kunit_tests(rsiw_cq_ring)]
mod tests {
    use super::*;

    fn c(wr_id: u64) -> Completion {
        Completion {
            wr_id,
            byte_len: wr_id as u32,
            ..Completion::default()
        }
    }

    #[test]
    fn fifo_and_full_ring_refuses() -> Result {
        let mut r = CqRing::new(3)?;
        assert_eq!(r.pop(), None);
        for i in 1..=3 {
            assert_eq!(r.push(c(i)), Ok(false));
        }
        // Full: the fourth is refused, nothing is overwritten.
        assert_eq!(r.push(c(4)), Err(Overflow { first: true }));
        assert_eq!(r.len(), 3);
        assert_eq!(r.pop().map(|c| c.wr_id), Some(1));
        assert_eq!(r.push(c(5)), Ok(false));
        let order: [u64; 3] = [2, 3, 5];
        for want in order {
            assert_eq!(r.pop().map(|c| c.wr_id), Some(want));
        }
        assert_eq!(r.pop(), None);
        assert_eq!(CqRing::new(0).err(), Some(EINVAL));
        Ok(())
    }

    /// Only the CQ's first overrun is reported: every later refusal, in
    /// the same episode or after the consumer made room, is not.
    #[test]
    fn overrun_is_reported_once() -> Result {
        let mut r = CqRing::new(2)?;
        assert_eq!(r.push(c(1)), Ok(false));
        assert_eq!(r.push(c(2)), Ok(false));
        assert_eq!(r.push(c(3)), Err(Overflow { first: true }));
        for i in 4..1000 {
            assert_eq!(r.push(c(i)), Err(Overflow { first: false }));
        }
        // Room again: queued, and a new overrun stays unreported.
        assert_eq!(r.pop().map(|c| c.wr_id), Some(1));
        assert_eq!(r.push(c(1000)), Ok(false));
        assert_eq!(r.push(c(1001)), Err(Overflow { first: false }));
        Ok(())
    }

    /// A destroyed QP's completions go, the others stay in order, with
    /// the ring wrapped.
    #[test]
    fn purge_drops_only_that_qps_completions() -> Result {
        let a = WcQp::from_addr(0x1000);
        let b = WcQp::from_addr(0x2000);
        let of = |wr_id: u64, qp: WcQp| Completion {
            wr_id,
            qp,
            ..Completion::default()
        };
        let mut r = CqRing::new(5)?;
        for i in 0..3 {
            r.push(of(i, a)).map_err(|_| EINVAL)?;
        }
        r.pop();
        r.pop();
        // Wrapped: [2a, 3b, 4a, 5b] from head 2.
        for (i, q) in [(3, b), (4, a), (5, b)] {
            r.push(of(i, q)).map_err(|_| EINVAL)?;
        }
        assert_eq!(r.purge(a), 2);
        assert_eq!(r.len(), 2);
        assert_eq!(r.pop().map(|c| (c.wr_id, c.qp)), Some((3, b)));
        assert_eq!(r.pop().map(|c| (c.wr_id, c.qp)), Some((5, b)));
        assert_eq!(r.pop(), None);
        assert_eq!(r.purge(b), 0);
        // Still a working FIFO of 5.
        for i in 10..15 {
            assert_eq!(r.push(of(i, b)), Ok(false));
        }
        assert_eq!(r.pop().map(|c| c.wr_id), Some(10));
        Ok(())
    }

    #[test]
    fn arming_is_one_shot() -> Result {
        let mut r = CqRing::new(8)?;
        assert_eq!(r.push(c(1)), Ok(false));
        // Report missed events: one is queued.
        assert!(r.arm(Arm::Next));
        assert_eq!(r.push(c(2)), Ok(true));
        // Disarmed after notifying.
        assert_eq!(r.push(c(3)), Ok(false));
        while r.pop().is_some() {}
        assert!(!r.arm(Arm::Next));
        Ok(())
    }

    #[test]
    fn solicited_arming() -> Result {
        let mut r = CqRing::new(8)?;
        r.arm(Arm::Solicited);
        assert_eq!(r.push(c(1)), Ok(false));
        let sol = Completion {
            solicited: true,
            ..c(2)
        };
        assert_eq!(r.push(sol), Ok(true));
        // Unsuccessful completions notify a solicited arming too.
        r.arm(Arm::Solicited);
        let err = Completion {
            status: WcStatus::WrFlushErr,
            ..c(3)
        };
        assert_eq!(r.push(err), Ok(true));
        // Solicited never weakens next-completion arming.
        r.arm(Arm::Next);
        r.arm(Arm::Solicited);
        assert_eq!(r.push(c(4)), Ok(true));
        Ok(())
    }

    #[test]
    fn resize_keeps_order() -> Result {
        let mut r = CqRing::new(4)?;
        for i in 1..=4 {
            r.push(c(i)).map_err(|_| EINVAL)?;
        }
        r.pop();
        r.pop();
        r.push(c(5)).map_err(|_| EINVAL)?; // wraps around
                                           // Too small for the three queued.
        assert!(r.replace(CqRing::alloc(2)?).is_err());
        assert_eq!(r.len(), 3);
        assert!(r.replace(CqRing::alloc(6)?).is_ok());
        assert_eq!(r.capacity(), 6);
        assert_eq!(r.len(), 3);
        for i in 6..=8 {
            assert_eq!(r.push(c(i)), Ok(false));
        }
        let mut got = KVec::new();
        while let Some(x) = r.pop() {
            got.push(x.wr_id, GFP_KERNEL)?;
        }
        assert_eq!(&got[..], &[3, 4, 5, 6, 7, 8]);
        Ok(())
    }
}
