// SPDX-License-Identifier: GPL-2.0
//! Queues shared with a process: the rings of `include/uapi/rdma/rsiw-abi.h`
//! over memory the process maps ([`SharedRing`]).
//!
//! A work queue ring ([`WqRing`]: SQ, RQ, SRQ) is produced by the process
//! and consumed here; a completion ring ([`CqRing`]) the other way round.
//! The side that consumes keeps its own copy of its index: what the
//! process writes into the control block is read once per use, never
//! trusted to be consistent. A producer index more than a ring ahead of
//! ours is a broken ring ([`Entry::Broken`]: the consumer skips to it and
//! fails the queue); a consumer index that runs ahead of our producer
//! reads as an empty CQ.

use core::marker::PhantomData;

use kernel::prelude::*;

use crate::ffi::ib::{abi, rsiw_ring_info, SharedRing, Udata, UserAbi};

/// Most entries a ring may have (the device's largest queue, rounded up).
const MAX_ENTRIES: u32 = 1 << 20;
// A flush pass takes at most a ring's worth (`qp::flush::FlushQueue`):
// within the engine's own bound.
const _: () = assert!(MAX_ENTRIES as usize <= crate::engine::qp::MAX_FLUSH);
const _: () = {
    let l = crate::device::DEFAULT_LIMITS;
    assert!(l.max_cqe.next_power_of_two() <= MAX_ENTRIES);
    assert!(l.max_qp_wr.next_power_of_two() <= MAX_ENTRIES);
    assert!(l.max_srq_wr.next_power_of_two() <= MAX_ENTRIES);
};

/// The ring's entry count for a queue of `depth`: the next power of two
/// (at least 1).
pub(crate) fn entries_for(depth: u32) -> Result<u32> {
    let n = depth.max(1).checked_next_power_of_two().ok_or(EINVAL)?;
    if n > MAX_ENTRIES {
        return Err(EINVAL);
    }
    Ok(n)
}

/// The memory of a ring of `entries` entries of `T`.
fn alloc<T>(udata: &Udata<'_>, entries: u32) -> Result<SharedRing> {
    let len = abi::RING_HDR + (entries as usize) * core::mem::size_of::<T>();
    SharedRing::new(udata, len)
}

fn info(mem: &SharedRing, entries: u32) -> rsiw_ring_info {
    rsiw_ring_info {
        offset: mem.offset(),
        size: mem.len() as u32,
        entries,
    }
}

/// What a work queue ring yields.
pub(crate) enum Entry<T> {
    /// A copy of the next entry (unchecked).
    Posted(T),
    /// The producer index claimed more entries than the ring holds.
    Broken,
}

/// A work queue ring: the process produces entries of `T`, the kernel
/// consumes them.
pub(crate) struct WqRing<T: UserAbi> {
    mem: SharedRing,
    entries: u32,
    /// Our consumer index (the control block's copy is for the process).
    cons: u32,
    /// The producer index [`Self::take`] last read: what was posted up to
    /// it has been looked at.
    seen: u32,
    _t: PhantomData<T>,
}

impl<T: UserAbi> WqRing<T> {
    /// A ring of [`entries_for`]`(depth)` entries.
    pub(crate) fn new(udata: &Udata<'_>, depth: u32) -> Result<Self> {
        let entries = entries_for(depth)?;
        Ok(Self {
            mem: alloc::<T>(udata, entries)?,
            entries,
            cons: 0,
            seen: 0,
            _t: PhantomData,
        })
    }

    pub(crate) fn entries(&self) -> u32 {
        self.entries
    }

    /// What the process maps.
    pub(crate) fn info(&self) -> rsiw_ring_info {
        info(&self.mem, self.entries)
    }

    /// Entries posted and not consumed (a producer index that claims more
    /// than a ring's worth is read as a full ring).
    pub(crate) fn len(&self) -> u32 {
        self.posted().1.min(self.entries)
    }

    /// The process's producer index and how many entries it claims past
    /// ours (more than `entries`: a broken ring).
    fn posted(&self) -> (u32, u32) {
        let prod = self.mem.load(abi::PRODUCER);
        (prod, prod.wrapping_sub(self.cons))
    }

    /// What the process posted next, if anything. One look at the
    /// producer index per call: a loop that takes until `None` while the
    /// process keeps posting never ends, so a loop that must (a flush)
    /// takes at most [`Self::len`] as it was when it began.
    pub(crate) fn take(&mut self) -> Option<Entry<T>> {
        let (prod, n) = self.posted();
        self.seen = prod;
        if n == 0 {
            return None;
        }
        if n > self.entries {
            // More than the ring holds: whatever is there is not what the
            // process meant. Skip it all, once.
            self.cons = prod;
            self.mem.store(abi::CONSUMER, self.cons);
            return Some(Entry::Broken);
        }
        let e = self.mem.read(self.slot(self.cons));
        self.cons = self.cons.wrapping_add(1);
        self.mem.store(abi::CONSUMER, self.cons);
        Some(Entry::Posted(e))
    }

    fn slot(&self, idx: u32) -> usize {
        abi::RING_HDR + ((idx & (self.entries - 1)) as usize) * core::mem::size_of::<T>()
    }

    /// The producer index the last [`Self::take`] read.
    pub(crate) fn seen(&self) -> u32 {
        self.seen
    }

    /// Whether the last [`Self::take`] left nothing the process had
    /// posted by then.
    pub(crate) fn drained(&self) -> bool {
        self.seen == self.cons
    }

    /// The process's producer index, as it is now.
    pub(crate) fn producer(&self) -> u32 {
        self.mem.load(abi::PRODUCER)
    }

    /// A copy of the oldest entry, left on the ring (`None` also for a
    /// broken ring: [`Self::take`] reports it). The self-tests' only: an
    /// entry the driver uses is taken first and read once.
    #[cfg(rsiw_kunit)]
    pub(crate) fn peek(&self) -> Option<T> {
        let n = self.posted().1;
        (n > 0 && n <= self.entries).then(|| self.mem.read(self.slot(self.cons)))
    }

    /// Sets (or clears) a flag of the control block.
    pub(crate) fn set_flag(&self, flag: u32, on: bool) {
        if on {
            self.mem.set_bits(abi::FLAGS, flag);
        } else {
            self.mem.clear_bits(abi::FLAGS, flag);
        }
    }

    /// A full barrier between a flag store and a producer load.
    pub(crate) fn fence(&self) {
        self.mem.fence();
    }
}

/// A completion ring: the kernel produces, the process consumes.
pub(crate) struct CompletionRing {
    mem: SharedRing,
    entries: u32,
    /// Our producer index.
    prod: u32,
}

impl CompletionRing {
    pub(crate) fn new(udata: &Udata<'_>, depth: u32) -> Result<Self> {
        let entries = entries_for(depth)?;
        Ok(Self {
            mem: alloc::<crate::ffi::ib::rsiw_cqe>(udata, entries)?,
            entries,
            prod: 0,
        })
    }

    pub(crate) fn entries(&self) -> u32 {
        self.entries
    }

    pub(crate) fn info(&self) -> rsiw_ring_info {
        info(&self.mem, self.entries)
    }

    /// Entries the process has not consumed (a consumer index ahead of
    /// ours reads as none).
    pub(crate) fn len(&self) -> u32 {
        let cons = self.mem.load(abi::CONSUMER);
        let n = self.prod.wrapping_sub(cons);
        if n > self.entries {
            0
        } else {
            n
        }
    }

    /// Writes `cqe`; false (and the overflow flag set) if the ring is full.
    pub(crate) fn push(&mut self, cqe: &crate::ffi::ib::rsiw_cqe) -> bool {
        let cons = self.mem.load(abi::CONSUMER);
        let used = self.prod.wrapping_sub(cons);
        if used >= self.entries && used <= u32::MAX / 2 {
            self.mem.set_bits(abi::FLAGS, abi::RING_CQ_OVERFLOW);
            return false;
        }
        let off = abi::RING_HDR
            + ((self.prod & (self.entries - 1)) as usize) * core::mem::size_of_val(cqe);
        self.mem.write(off, cqe);
        self.prod = self.prod.wrapping_add(1);
        self.mem.store(abi::PRODUCER, self.prod);
        true
    }

    /// Takes the process's arming if the new completion fires it (any
    /// completion fires `RSIW_CQ_ARM_NEXT`, a solicited or unsuccessful
    /// one `RSIW_CQ_ARM_SOLICITED`); true if it did.
    pub(crate) fn take_user_arm(&self, solicited_or_error: bool) -> bool {
        match self.mem.load(abi::ARMED) {
            abi::CQ_ARM_NEXT => self.mem.compare_exchange(abi::ARMED, abi::CQ_ARM_NEXT, 0),
            abi::CQ_ARM_SOLICITED if solicited_or_error => {
                self.mem
                    .compare_exchange(abi::ARMED, abi::CQ_ARM_SOLICITED, 0)
            }
            _ => false,
        }
    }
}
