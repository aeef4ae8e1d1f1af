// SPDX-License-Identifier: GPL-2.0
//! The send queue: its entries (WRs as the driver holds them) and the ring.

use super::*;
use crate::{
    ffi::ib::rsiw_sqe,
    ring::{Entry, WqRing},
};

/// A send queue entry.
#[derive(Clone, Copy)]
pub(crate) enum SqeKind {
    /// Goes on the wire through the engine.
    Wire(SendWr),
    /// `IB_WR_REG_MR`: fast-register an MR (local, in SQ order).
    RegMr { stag: u32, req: FastReg },
    /// `IB_WR_LOCAL_INV`.
    LocalInv { stag: u32 },
}

/// A posted send WR with its local data.
#[derive(Clone, Copy)]
pub(crate) struct Sqe {
    pub(crate) wr_id: u64,
    pub(crate) signaled: bool,
    pub(crate) kind: SqeKind,
    pub(crate) sges: [Sge; MAX_SGE],
    pub(crate) num_sge: u8,
    pub(crate) inline: [u8; MAX_INLINE],
    pub(crate) inline_len: u16,
    /// Report a masked atomic's opcode in its completion.
    pub(crate) masked: bool,
    /// `IB_WR_RDMA_READ_WITH_INV`: invalidate this local STag (the Read's
    /// sink) when the Read completes.
    pub(crate) inv_local: Option<u32>,
    /// A process's ring entry that failed the checks a posted WR gets: it
    /// goes to the engine as a Send whose source check fails, so it
    /// completes with an error (`IB_WC_LOC_QP_OP_ERR`) and the stream ends
    /// with a Local Catastrophic Terminate, as for any local error.
    pub(crate) invalid: bool,
}

impl Sqe {
    /// An entry of no data yet (a placeholder kind, no SGEs, no inline
    /// data), for the conversions to fill in.
    pub(crate) fn new(wr_id: u64, signaled: bool) -> Self {
        Sqe {
            wr_id,
            signaled,
            kind: SqeKind::LocalInv { stag: 0 },
            sges: [Sge::default(); MAX_SGE],
            num_sge: 0,
            inline: [0; MAX_INLINE],
            inline_len: 0,
            masked: false,
            inv_local: None,
            invalid: false,
        }
    }

    /// Makes this entry a new one of no data (as [`Self::new`]) without
    /// clearing its SGE and inline arrays, which are read only up to
    /// `num_sge` and `inline_len`: an entry is a few hundred octets, and a
    /// slot that is refilled for every message should not be cleared and
    /// moved whole each time. The first SGE is cleared, as the conversions
    /// read it whatever the count.
    pub(crate) fn reset(&mut self, wr_id: u64, signaled: bool) {
        self.wr_id = wr_id;
        self.signaled = signaled;
        self.kind = SqeKind::LocalInv { stag: 0 };
        self.sges[0] = Sge::default();
        self.num_sge = 0;
        self.inline_len = 0;
        self.masked = false;
        self.inv_local = None;
        self.invalid = false;
    }

    pub(crate) fn sges(&self) -> &[Sge] {
        &self.sges[..usize::from(self.num_sge).min(MAX_SGE)]
    }
}

/// A process's send ring and the limits its entries are checked against.
pub(crate) struct UserSq {
    pub(super) ring: WqRing<rsiw_sqe>,
    pub(super) max_sge: usize,
    pub(super) max_inline: usize,
    /// `RSIW_RING_SQ_ACTIVE` is set: by the TX run's first look at the
    /// ring ([`SendQueue::take_for_tx`]), cleared when the run stops
    /// ([`SendQueue::tx_stopped`]).
    pub(super) active: bool,
    /// The producer index as the last TX run to stop read it.
    pub(super) stopped_at: u32,
}

impl UserSq {
    /// Sets or clears a flag of the ring, behind a full barrier before
    /// the next load (a flag store, then a producer index load).
    fn set_flag(&self, flag: u32, on: bool) {
        self.ring.set_flag(flag, on);
        self.ring.fence();
    }
}

/// `flush_left` of a queue with no flush pass under way.
pub(super) const NO_PASS: u32 = u32::MAX;

/// The send queue: a fixed ring, or a process's ring (`user`).
pub(crate) struct SendQueue {
    pub(super) ring: KVVec<Option<Sqe>>,
    /// The kernel ring's oldest entry and how many it holds (`u32`: a
    /// queue is at most `max_qp_wr` deep, and `Qp` must stay small).
    pub(super) head: u32,
    pub(super) count: u32,
    pub(super) user: Option<UserSq>,
    /// Entries the flush pass under way may still take
    /// ([`Self::flush_pop_into`]; [`NO_PASS`]: none under way).
    flush_left: u32,
}

impl SendQueue {
    pub(crate) fn new(max_wr: usize) -> Result<Self> {
        // No room at all (`max_send_wr` 0): every post is refused.
        Ok(Self {
            ring: KVVec::from_elem(None, max_wr, GFP_KERNEL_ACCOUNT)?,
            head: 0,
            count: 0,
            user: None,
            flush_left: NO_PASS,
        })
    }

    pub(crate) fn new_user(user: UserSq) -> Self {
        Self {
            ring: KVVec::new(),
            head: 0,
            count: 0,
            user: Some(user),
            flush_left: NO_PASS,
        }
    }

    /// Entries the queue holds at most.
    pub(crate) fn capacity(&self) -> usize {
        match &self.user {
            Some(u) => u.ring.entries() as usize,
            None => self.ring.len(),
        }
    }

    /// Sets or clears a flag of a process's ring.
    pub(crate) fn set_flag(&self, flag: u32, on: bool) {
        if let Some(u) = &self.user {
            u.set_flag(flag, on);
        }
    }

    /// A TX run stops: a process's ring loses `RSIW_RING_SQ_ACTIVE` (a
    /// post from now on rings the doorbell). Whether the run must go again:
    /// the producer index, read behind a full barrier after that, is one
    /// no take has read (an entry posted without a doorbell while the flag
    /// was set) and no earlier stop has gone again for. `false` for a
    /// kernel queue.
    pub(crate) fn tx_stopped(&mut self) -> bool {
        let Some(u) = self.user.as_mut() else {
            return false;
        };
        u.set_flag(crate::ffi::ib::abi::RING_SQ_ACTIVE, false);
        u.active = false;
        let prod = u.ring.producer();
        let last = core::mem::replace(&mut u.stopped_at, prod);
        prod != u.ring.seen() && last != prod
    }

    /// [`Self::pop_into`] for the TX run. A process's ring gets
    /// `RSIW_RING_SQ_ACTIVE` first, behind a full barrier before the
    /// producer index is read: a post that finds the flag needs no
    /// doorbell, as the run looks at the ring again before it stops
    /// ([`Self::tx_stopped`]). Only a run that looks at the ring sets it.
    pub(crate) fn take_for_tx(&mut self, dst: &mut Option<Sqe>) -> bool {
        if let Some(u) = self.user.as_mut().filter(|u| !u.active) {
            u.set_flag(crate::ffi::ib::abi::RING_SQ_ACTIVE, true);
            u.active = true;
        }
        self.pop_into(dst)
    }

    /// Whether the last entry taken was the last one posted when it was
    /// taken.
    pub(crate) fn drained(&self) -> bool {
        match &self.user {
            Some(u) => u.ring.drained(),
            None => self.count == 0,
        }
    }

    pub(crate) fn push(&mut self, sqe: Sqe) -> Result {
        if self.user.is_some() {
            return Err(EINVAL); // the process posts through its ring
        }
        if self.count as usize == self.ring.len() {
            return Err(ENOMEM);
        }
        let tail = (self.head as usize + self.count as usize) % self.ring.len();
        self.ring[tail] = Some(sqe);
        self.count += 1;
        Ok(())
    }

    /// Takes the next entry into `dst` (false, and `dst` untouched, if
    /// there is none). A process's entry is converted in place, into the
    /// entry `dst` already holds if any (see [`Sqe::reset`]).
    // Out of line, its body in it: it is on the message path's hot list
    // (bench/hot-functions.txt), the flush's copy of the body is cold.
    #[inline(never)]
    pub(crate) fn pop_into(&mut self, dst: &mut Option<Sqe>) -> bool {
        self.flush_left = NO_PASS;
        self.take_into(dst)
    }

    /// [`Self::pop_into`] for a flush: a pass takes at most as many entries
    /// as were posted when it began (at most a ring's worth: a broken
    /// index counts as a full ring), so a loop that takes until `false`
    /// ends however fast entries are posted (a process's other thread
    /// moving the producer index, a ULP posting from its completion
    /// handler). `false` ends the pass; what was posted after its start
    /// is the next pass's (a post or doorbell to a failed QP flushes what
    /// it sees).
    pub(crate) fn flush_pop_into(&mut self, dst: &mut Option<Sqe>) -> bool {
        if self.flush_left == NO_PASS {
            self.flush_left = self.posted();
        }
        if self.flush_left == 0 || !self.take_into(dst) {
            self.flush_left = NO_PASS;
            return false;
        }
        self.flush_left -= 1;
        true
    }

    /// [`Self::flush_pop_into`] into a new entry.
    pub(crate) fn flush_pop(&mut self) -> Option<Sqe> {
        let mut sqe = None;
        self.flush_pop_into(&mut sqe);
        sqe
    }

    /// Entries posted now (a process's ring: at most its size).
    fn posted(&self) -> u32 {
        match &self.user {
            Some(u) => u.ring.len(),
            None => self.count,
        }
    }

    #[inline(always)]
    fn take_into(&mut self, dst: &mut Option<Sqe>) -> bool {
        if let Some(u) = self.user.as_mut() {
            match u.ring.take() {
                None => return false,
                Some(Entry::Posted(e)) => {
                    super::verbs::convert_user_send_into(&e, u.max_sge, u.max_inline, dst)
                }
                Some(Entry::Broken) => *dst = Some(super::verbs::invalid_sqe(0)),
            }
            return true;
        }
        if self.count == 0 {
            return false;
        }
        *dst = self.ring[self.head as usize].take();
        self.head = ((self.head as usize + 1) % self.ring.len()) as u32;
        self.count -= 1;
        dst.is_some()
    }
}
