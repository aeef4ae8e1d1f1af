// SPDX-License-Identifier: GPL-2.0
//! Receive queues: the ring of posted receive WRs a QP's own RQ and a
//! shared receive queue (SRQ) are made of, and the SRQ around it (limit
//! arming and `IB_EVENT_SRQ_LIMIT_REACHED`).
//!
//! The ring is allocated at create and never grows: posting fails with
//! `ENOMEM` when it is full. An SRQ's ring is behind an irq-safe spinlock:
//! `post` runs in the consumer's context, `pop` in the QP's RX softirq.

use kernel::prelude::*;

use super::flush::{FlushQueue, NO_PASS};
pub(crate) use crate::ffi::ib::{Sge, SrqAttr};
use crate::{
    device::{verbs::Pd, Device, Rsiw, DEFAULT_LIMITS},
    ffi::ib::{
        abi, rsiw_create_srq_req, rsiw_create_srq_resp, rsiw_rqe, RecvWrRef, SrqAttrMask,
        SrqNotifier, SrqOps, SrqSlot, Udata,
    },
    ffi::sync::{new_spinlock_irq, SpinLockIrq},
    ring::{Entry, WqRing},
};

/// Most SGEs a receive WR may carry.
pub(crate) const MAX_SGE: usize = DEFAULT_LIMITS.max_sge as usize;

/// A posted receive WR.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Rqe {
    pub(crate) wr_id: u64,
    num_sge: u8,
    sge: [Sge; MAX_SGE],
    /// A process's ring entry that failed its checks: no buffer, and its
    /// completion reports `IB_WC_LOC_QP_OP_ERR`.
    pub(crate) bad: bool,
}

const _: () = assert!(MAX_SGE == abi::MAX_SGE);

impl Rqe {
    /// A receive WR; `EINVAL` with more than `MAX_SGE` entries.
    pub(crate) fn new(wr_id: u64, sges: &[Sge]) -> Result<Self> {
        if sges.len() > MAX_SGE {
            return Err(EINVAL);
        }
        let mut rqe = Rqe {
            wr_id,
            num_sge: sges.len() as u8,
            ..Rqe::default()
        };
        rqe.sge[..sges.len()].copy_from_slice(sges);
        Ok(rqe)
    }

    /// A process's ring entry, checked as [`Rqe::new`] checks a WR: one
    /// with more than `max_sge` SGEs is `bad`.
    #[cfg(rsiw_kunit)]
    fn from_user(r: &rsiw_rqe, max_sge: usize) -> Self {
        let mut rqe = Rqe::default();
        rqe.set_from_user(r, max_sge);
        rqe
    }

    /// [`Rqe::from_user`] into this WR, in place (SGEs past the entry's
    /// count are left as they were: they are not read).
    fn set_from_user(&mut self, r: &rsiw_rqe, max_sge: usize) {
        let n = r.num_sge as usize;
        self.wr_id = r.wr_id;
        if n > max_sge.min(MAX_SGE) {
            self.num_sge = 0;
            self.bad = true;
            return;
        }
        for (d, s) in self.sge.iter_mut().zip(&r.sge[..n]) {
            *d = Sge {
                addr: s.addr,
                len: s.length,
                lkey: s.lkey,
            };
        }
        self.num_sge = n as u8;
        self.bad = false;
    }

    pub(crate) fn sges(&self) -> &[Sge] {
        &self.sge[..usize::from(self.num_sge)]
    }

    /// Total buffer length (saturating).
    pub(crate) fn len(&self) -> u32 {
        self.sges()
            .iter()
            .fold(0u32, |a, s| a.saturating_add(s.len))
    }
}

/// A fixed ring of receive WRs, or a process's ring (`user`: it posts
/// there, never through `push`).
pub(crate) struct RecvQueue {
    ring: KVVec<Rqe>,
    /// The kernel ring's oldest WR and how many it holds (`u32`: a queue
    /// is at most `max_qp_wr` deep, and `Qp` must stay small).
    head: u32,
    count: u32,
    max_sge: usize,
    user: Option<WqRing<rsiw_rqe>>,
    /// WRs the flush pass under way may still take
    /// ([`FlushQueue::flush_pop_into`]; [`NO_PASS`]: none under way).
    flush_left: u32,
}

impl RecvQueue {
    /// Room for `max_wr` WRs of up to `max_sge` SGEs (none: a QP that
    /// takes no Sends).
    pub(crate) fn new(max_wr: usize, max_sge: usize) -> Result<Self> {
        if max_sge > MAX_SGE {
            return Err(EINVAL);
        }
        Ok(Self {
            ring: KVVec::from_elem(Rqe::default(), max_wr, GFP_KERNEL_ACCOUNT)?,
            head: 0,
            count: 0,
            max_sge,
            user: None,
            flush_left: NO_PASS,
        })
    }

    /// A process's receive ring of WRs of up to `max_sge` SGEs.
    pub(crate) fn new_user(ring: WqRing<rsiw_rqe>, max_sge: usize) -> Result<Self> {
        if max_sge > MAX_SGE {
            return Err(EINVAL);
        }
        Ok(Self {
            ring: KVVec::new(),
            head: 0,
            count: 0,
            max_sge,
            user: Some(ring),
            flush_left: NO_PASS,
        })
    }

    /// Takes a process's ring away (the queue is empty from then on).
    pub(crate) fn take_user(&mut self) -> Option<WqRing<rsiw_rqe>> {
        self.user.take()
    }

    /// Whether a process posts to this queue through its ring.
    pub(crate) fn is_user(&self) -> bool {
        self.user.is_some()
    }

    /// Sets or clears the ring's error flag (the QP is in Error: the
    /// process asks for a flush of what it posts).
    pub(crate) fn set_error(&self, on: bool) {
        if let Some(r) = &self.user {
            r.set_flag(abi::RING_ERROR, on);
            r.fence();
        }
    }

    pub(crate) fn capacity(&self) -> usize {
        match &self.user {
            Some(r) => r.entries() as usize,
            None => self.ring.len(),
        }
    }

    pub(crate) fn max_sge(&self) -> usize {
        self.max_sge
    }

    pub(crate) fn len(&self) -> usize {
        match &self.user {
            Some(r) => r.len() as usize,
            None => self.count as usize,
        }
    }

    /// Queues `rqe`: `EINVAL` if it has too many SGEs (or the queue is a
    /// process's ring), `ENOMEM` if full.
    pub(crate) fn push(&mut self, rqe: Rqe) -> Result {
        if usize::from(rqe.num_sge) > self.max_sge || self.user.is_some() {
            return Err(EINVAL);
        }
        if self.count as usize == self.ring.len() {
            return Err(ENOMEM);
        }
        let tail = (self.head as usize + self.count as usize) % self.ring.len();
        self.ring[tail] = rqe;
        self.count += 1;
        Ok(())
    }

    /// The head WR (a copy), left queued (the self-tests': the driver
    /// takes a WR before it reads it, and reads it once).
    #[cfg(rsiw_kunit)]
    pub(crate) fn peek(&self) -> Option<Rqe> {
        if let Some(r) = &self.user {
            return r.peek().map(|e| Rqe::from_user(&e, self.max_sge));
        }
        (self.count > 0).then(|| self.ring[self.head as usize])
    }

    /// Takes the head WR into `dst` (false, `dst` untouched, if there is
    /// none): a process's entry is converted into its place.
    // Out of line, its body in it: it is on the message path's hot list
    // (bench/hot-functions.txt), the flush's copy of the body is cold.
    #[inline(never)]
    pub(crate) fn pop_into(&mut self, dst: &mut Option<Rqe>) -> bool {
        self.flush_left = NO_PASS;
        self.take_into(dst)
    }

    pub(crate) fn pop(&mut self) -> Option<Rqe> {
        let mut rqe = None;
        self.pop_into(&mut rqe);
        rqe
    }
}

impl FlushQueue for RecvQueue {
    type Entry = Rqe;

    fn flush_left(&mut self) -> &mut u32 {
        &mut self.flush_left
    }

    fn posted(&self) -> u32 {
        match &self.user {
            Some(r) => r.len(),
            None => self.count,
        }
    }

    #[inline(always)]
    fn take_into(&mut self, dst: &mut Option<Rqe>) -> bool {
        if let Some(r) = self.user.as_mut() {
            match r.take() {
                None => return false,
                Some(Entry::Posted(e)) => dst
                    .get_or_insert_with(Rqe::default)
                    .set_from_user(&e, self.max_sge),
                Some(Entry::Broken) => {
                    *dst = Some(Rqe {
                        bad: true,
                        ..Rqe::default()
                    })
                }
            }
            return true;
        }
        if self.count == 0 {
            return false;
        }
        *dst = Some(self.ring[self.head as usize]);
        self.head = ((self.head as usize + 1) % self.ring.len()) as u32;
        self.count -= 1;
        true
    }
}

struct SrqInner {
    rq: RecvQueue,
    /// Armed limit (0: not armed).
    limit: u32,
}

/// A shared receive queue.
#[pin_data]
pub(crate) struct Srq {
    #[pin]
    inner: SpinLockIrq<SrqInner>,
    pd: u32,
    notifier: SrqNotifier,
}

impl Srq {
    pub(crate) fn new(
        pd: u32,
        max_wr: u32,
        max_sge: u32,
        limit: u32,
        notifier: SrqNotifier,
        user: Option<WqRing<rsiw_rqe>>,
    ) -> Result<impl PinInit<Self, Error>> {
        if limit > max_wr {
            return Err(EINVAL);
        }
        let rq = match user {
            Some(ring) => RecvQueue::new_user(ring, max_sge as usize)?,
            None => RecvQueue::new(max_wr as usize, max_sge as usize)?,
        };
        Ok(try_pin_init!(Srq {
            inner <- new_spinlock_irq!(SrqInner { rq, limit }, "rsiw_srq"),
            pd,
            notifier,
        }? Error))
    }

    #[cfg(rsiw_kunit)]
    pub(crate) fn pd(&self) -> u32 {
        self.pd
    }

    /// Posts one receive WR (`EINVAL` too many SGEs, `ENOMEM` full).
    pub(crate) fn post(&self, rqe: Rqe) -> Result {
        self.inner.lock().push(rqe)
    }

    /// Takes the oldest WR (any context): a QP takes it when a message for
    /// it arrives, and reads it once (no look before). When the number
    /// left drops below an armed limit, the limit is disarmed and
    /// `IB_EVENT_SRQ_LIMIT_REACHED` raised, outside the lock.
    pub(crate) fn pop(&self) -> Option<Rqe> {
        let (rqe, fire) = {
            let mut inner = self.inner.lock();
            let rqe = inner.rq.pop();
            let fire = rqe.is_some() && inner.limit != 0 && (inner.rq.len() as u32) < inner.limit;
            if fire {
                inner.limit = 0;
            }
            (rqe, fire)
        };
        if fire {
            self.notifier.limit_reached();
        }
        rqe
    }

    /// Arms (or with 0 disarms) the limit; `EINVAL` above the queue size.
    pub(crate) fn set_limit(&self, limit: u32) -> Result {
        let mut inner = self.inner.lock();
        if limit as usize > inner.rq.capacity() {
            return Err(EINVAL);
        }
        inner.limit = limit;
        Ok(())
    }

    pub(crate) fn query(&self) -> SrqAttr {
        let inner = self.inner.lock();
        SrqAttr {
            max_wr: inner.rq.capacity() as u32,
            max_sge: inner.rq.max_sge() as u32,
            srq_limit: inner.limit,
        }
    }

    #[cfg(rsiw_kunit)]
    pub(crate) fn len(&self) -> usize {
        self.inner.lock().rq.len()
    }
}

impl SrqInner {
    fn push(&mut self, rqe: Rqe) -> Result {
        self.rq.push(rqe)
    }
}

#[cfg(rsiw_kunit)]
#[kunit_tests(rsiw_recv_queue)]
mod tests {
    use super::*;

    fn sge(n: u32) -> Sge {
        Sge {
            addr: 0x1000 * u64::from(n),
            len: n,
            lkey: 0x100,
        }
    }

    #[test]
    fn rqe_sge_limits() -> Result {
        let r = Rqe::new(7, &[sge(1), sge(2)])?;
        assert_eq!(r.sges(), &[sge(1), sge(2)]);
        assert_eq!(r.len(), 3);
        let many = [sge(1); MAX_SGE + 1];
        assert_eq!(Rqe::new(1, &many).err(), Some(EINVAL));
        assert_eq!(Rqe::new(1, &[])?.len(), 0);
        let big = Rqe::new(
            1,
            &[
                Sge {
                    len: u32::MAX,
                    ..sge(1)
                },
                sge(5),
            ],
        )?;
        assert_eq!(big.len(), u32::MAX);
        Ok(())
    }

    #[test]
    fn ring_fifo_full_and_sge_cap() -> Result {
        let mut q = RecvQueue::new(2, 1)?;
        assert_eq!(q.push(Rqe::new(1, &[sge(1)])?), Ok(()));
        assert_eq!(q.push(Rqe::new(2, &[sge(1), sge(2)])?), Err(EINVAL));
        assert_eq!(q.push(Rqe::new(2, &[])?), Ok(()));
        assert_eq!(q.push(Rqe::new(3, &[])?), Err(ENOMEM));
        assert_eq!(q.peek().map(|r| r.wr_id), Some(1));
        assert_eq!(q.pop().map(|r| r.wr_id), Some(1));
        assert_eq!(q.push(Rqe::new(4, &[])?), Ok(()));
        assert_eq!(q.pop().map(|r| r.wr_id), Some(2));
        assert_eq!(q.pop().map(|r| r.wr_id), Some(4));
        assert_eq!(q.pop(), None);
        // No room at all: every post is refused.
        let mut empty = RecvQueue::new(0, 1)?;
        assert_eq!(empty.push(Rqe::default()).err(), Some(ENOMEM));
        assert!(empty.pop().is_none());
        assert_eq!(RecvQueue::new(1, MAX_SGE + 1).err(), Some(EINVAL));
        Ok(())
    }
}

#[vtable]
impl SrqOps<Rsiw> for Srq {
    fn create(
        dev: &Device,
        pd: &Pd,
        attr: &SrqAttr,
        notifier: SrqNotifier,
        slot: SrqSlot<'_, Rsiw>,
        udata: Option<&mut Udata<'_>>,
    ) -> Result {
        let l = dev.limits();
        if attr.max_wr == 0
            || attr.max_wr > l.max_srq_wr
            || attr.max_sge > l.max_sge
            || attr.srq_limit > attr.max_wr
        {
            return Err(EINVAL);
        }
        let (ring, max_wr) = match udata {
            Some(u)
                if u.read_create_req::<rsiw_create_srq_req>()?.flags & abi::CREATE_RINGS != 0 =>
            {
                let ring = WqRing::<rsiw_rqe>::new(u, attr.max_wr)?;
                u.write(&rsiw_create_srq_resp { rq: ring.info() })?;
                let n = ring.entries();
                (Some(ring), n)
            }
            _ => (None, attr.max_wr),
        };
        dev.alloc_srq()?;
        Srq::new(
            pd.id(),
            max_wr,
            attr.max_sge,
            attr.srq_limit,
            notifier,
            ring,
        )
        .and_then(|init| slot.pin_init(init))
        .inspect_err(|_| dev.dealloc_srq())
    }

    fn destroy(&self, dev: &Device) {
        dev.dealloc_srq();
    }

    /// Only the limit can change: an SRQ does not resize.
    fn modify(&self, attr: &SrqAttr, mask: SrqAttrMask) -> Result {
        if mask.max_wr {
            return Err(EOPNOTSUPP);
        }
        if mask.unknown {
            return Err(EINVAL);
        }
        if mask.limit {
            self.set_limit(attr.srq_limit)?;
        }
        Ok(())
    }

    fn query(&self) -> SrqAttr {
        Srq::query(self)
    }

    fn post_recv(&self, wr: &RecvWrRef<'_>) -> Result {
        self.post(Rqe::new(wr.wr_id(), wr.sges()?)?)
    }

    /// Nothing to do: QPs take from the ring when a message arrives.
    fn doorbell(&self) -> Result {
        if self.inner.lock().rq.is_user() {
            Ok(())
        } else {
            Err(EINVAL)
        }
    }
}
