// SPDX-License-Identifier: GPL-2.0
//! When a send-queue completion may be delivered under zero-copy TX.
//!
//! A WR whose payload went to TCP by page reference is not done when its
//! last FPDU is handed over: TCP retransmits from the consumer's pages
//! until the peer acknowledges them, and a consumer that reuses a buffer
//! on completion would change data already covered by a sent CRC (the
//! peer then terminates the stream) or, without CRC, corrupt it silently.
//! So the completion of anything sent after referenced pages waits until
//! TCP has released those pages (the batch's notification,
//! `ffi::net::zcopy::Notif`), and later completions queue behind it: the send
//! queue completes in order.
//!
//! Batches that carry the consumer's pages are numbered from 1; a
//! completion waits for its batch and every earlier one.

use kernel::prelude::*;

use crate::cq::{Completion, WcStatus};

/// Batches whose release can be tracked at once; the TX work stops
/// planning new ones while this many are outstanding.
pub(crate) const MAX_BATCHES: usize = 256;
const _: () = assert!(MAX_BATCHES % 64 == 0);

/// What a queued completion waits for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Wait {
    /// Nothing of its own: only its predecessors.
    Now,
    /// The batch being filled (pages were referenced in it before the
    /// completion): becomes `Batch` when the round is planned.
    Round,
    /// The release of this batch and every earlier one.
    Batch(u64),
}

/// Released batches beyond `done_upto`, one bit per id modulo
/// `MAX_BATCHES`.
#[derive(Clone, Copy, Default)]
struct DoneSet([u64; MAX_BATCHES / 64]);

impl DoneSet {
    fn slot(id: u64) -> (usize, u64) {
        let i = (id % MAX_BATCHES as u64) as usize;
        (i / 64, 1 << (i % 64))
    }

    fn get(&self, id: u64) -> bool {
        let (w, bit) = Self::slot(id);
        self.0[w] & bit != 0
    }

    fn set(&mut self, id: u64, on: bool) {
        let (w, bit) = Self::slot(id);
        if on {
            self.0[w] |= bit;
        } else {
            self.0[w] &= !bit;
        }
    }
}

/// The send-queue completions held for page releases, in order.
///
/// Only a stream that sends by page reference holds any: the ring is
/// allocated when such a stream starts (charged to the memory cgroup of
/// the QP's creator), so a QP whose stream copies (every connection over a
/// local route, by default) carries none.
pub(crate) struct SendOrder {
    ring: KVVec<Option<(Completion, Wait)>>,
    /// The ring's size once reserved: every outstanding send WR.
    cap: usize,
    head: usize,
    count: usize,
    /// The next batch id.
    next: u64,
    /// Every batch up to this one is released.
    done_upto: u64,
    /// Released batches beyond `done_upto` (they may be released out of
    /// order).
    done: DoneSet,
    /// Completions that waited (statistics and the self-tests).
    deferred: u64,
}

impl SendOrder {
    /// Room for `cap` completions (every outstanding send WR) once a
    /// ring is installed ([`Self::set_ring`]).
    pub(crate) fn new(cap: usize) -> Self {
        Self {
            ring: KVVec::new(),
            cap: cap.max(1),
            head: 0,
            count: 0,
            next: 1,
            done_upto: 0,
            done: DoneSet::default(),
            deferred: 0,
        }
    }

    /// The ring of a stream that sends by page reference, allocated in
    /// process context before the stream starts; `None` if there is one.
    pub(crate) fn ring_needed(&self) -> Option<usize> {
        self.ring.is_empty().then_some(self.cap)
    }

    /// A ring of `cap` empty entries, for [`Self::set_ring`].
    pub(crate) fn alloc_ring(cap: usize) -> Result<KVVec<Option<(Completion, Wait)>>> {
        let mut ring = KVVec::with_capacity(cap, GFP_KERNEL_ACCOUNT)?;
        for _ in 0..cap {
            ring.push(None, GFP_KERNEL)?;
        }
        Ok(ring)
    }

    /// Installs a ring from [`Self::alloc_ring`] unless one is there.
    pub(crate) fn set_ring(&mut self, ring: KVVec<Option<(Completion, Wait)>>) {
        if self.ring.is_empty() && self.count == 0 {
            self.ring = ring;
            self.head = 0;
        }
    }

    #[cfg(rsiw_kunit)]
    /// Room for `cap` completions, ring included.
    fn with_ring(cap: usize) -> Result<Self> {
        let mut o = Self::new(cap);
        o.set_ring(Self::alloc_ring(cap)?);
        Ok(o)
    }

    #[cfg(rsiw_kunit)]
    /// Whether completions are waiting.
    pub(crate) fn is_waiting(&self) -> bool {
        self.count > 0
    }

    /// Completions that had to wait so far.
    pub(crate) fn deferred(&self) -> u64 {
        self.deferred
    }

    /// Batches sent and not yet released.
    pub(crate) fn outstanding(&self) -> u64 {
        self.next - 1 - self.done_upto
    }

    /// Whether another batch with pages may be planned.
    pub(crate) fn can_plan(&self) -> bool {
        self.outstanding() < MAX_BATCHES as u64
    }

    /// Routes a send-queue completion: `Some(wc)` to deliver now, `None`
    /// if it was queued. `round_refs`: the round being filled has already
    /// referenced pages.
    pub(crate) fn route(&mut self, wc: Completion, round_refs: bool) -> Option<Completion> {
        let wait = if round_refs {
            Wait::Round
        } else if self.outstanding() > 0 {
            Wait::Batch(self.next - 1)
        } else {
            Wait::Now
        };
        if wait == Wait::Now && self.count == 0 {
            return Some(wc);
        }
        if self.count == self.ring.len() {
            // Cannot happen (room for every outstanding WR, and a stream
            // that references pages has its ring); never lose it.
            return Some(wc);
        }
        let tail = (self.head + self.count) % self.ring.len();
        self.ring[tail] = Some((wc, wait));
        self.count += 1;
        if wait != Wait::Now {
            self.deferred += 1;
        }
        None
    }

    /// The round just planned referenced pages: its batch id, which the
    /// completions routed during the round now wait for.
    pub(crate) fn new_batch(&mut self) -> u64 {
        let id = self.next;
        self.next += 1;
        for i in 0..self.count {
            let idx = (self.head + i) % self.ring.len();
            if let Some((_, w @ Wait::Round)) = self.ring[idx].as_mut() {
                *w = Wait::Batch(id);
            }
        }
        id
    }

    /// The round just planned referenced no pages after all (or its batch
    /// could not be sent): its completions wait only for what came before.
    pub(crate) fn no_batch(&mut self) {
        let prev = (self.outstanding() > 0).then_some(self.next - 1);
        for i in 0..self.count {
            let idx = (self.head + i) % self.ring.len();
            if let Some((_, w @ Wait::Round)) = self.ring[idx].as_mut() {
                *w = prev.map_or(Wait::Now, Wait::Batch);
            }
        }
    }

    /// TCP released the pages of batch `id`: hands the completions now
    /// due to `deliver`, in order.
    pub(crate) fn released(&mut self, id: u64, deliver: impl FnMut(Completion)) {
        if id > self.done_upto && id < self.next && id - self.done_upto <= MAX_BATCHES as u64 {
            self.done.set(id, true);
        }
        loop {
            let id = self.done_upto + 1;
            if id >= self.next || !self.done.get(id) {
                break;
            }
            self.done.set(id, false);
            self.done_upto = id;
        }
        self.deliver_due(deliver);
    }

    fn deliver_due(&mut self, mut deliver: impl FnMut(Completion)) {
        while let Some((wc, wait)) = self.front() {
            match wait {
                Wait::Batch(b) if b > self.done_upto => break,
                Wait::Round => break,
                _ => {}
            }
            self.pop();
            deliver(wc);
        }
    }

    /// The stream is over: everything queued is delivered, in order; a
    /// success whose pages TCP had not released completes with a flush
    /// error (the peer may not have it). Batch ids go on (late releases of
    /// this stream's batches are ignored by id).
    pub(crate) fn drain(&mut self, mut deliver: impl FnMut(Completion)) {
        while let Some((mut wc, wait)) = self.front() {
            let unreleased = match wait {
                Wait::Round => true,
                Wait::Batch(b) => b > self.done_upto,
                Wait::Now => false,
            };
            if unreleased && wc.status == WcStatus::Success {
                wc.status = WcStatus::WrFlushErr;
            }
            self.pop();
            deliver(wc);
        }
        // Forget the outstanding batches: whatever TCP still holds is of a
        // dead stream.
        self.done = DoneSet::default();
        self.done_upto = self.next - 1;
    }

    fn front(&self) -> Option<(Completion, Wait)> {
        if self.count == 0 {
            return None;
        }
        self.ring[self.head]
    }

    fn pop(&mut self) {
        self.ring[self.head] = None;
        self.head = (self.head + 1) % self.ring.len();
        self.count -= 1;
    }
}

#[cfg(rsiw_kunit)]
#[kunit_tests(rsiw_send_order)]
mod tests {
    use super::*;

    fn wc(id: u64) -> Completion {
        Completion {
            wr_id: id,
            ..Completion::default()
        }
    }

    fn ids(v: &KVec<Completion>) -> KVec<u64> {
        let mut out = KVec::new();
        for w in v.iter() {
            let _ = out.push(w.wr_id, GFP_KERNEL);
        }
        out
    }

    #[test]
    fn completions_wait_for_their_batch_in_order() -> Result {
        let mut o = SendOrder::with_ring(8)?;
        let mut got = KVec::new();
        // Nothing referenced: delivered at once.
        assert_eq!(o.route(wc(1), false).map(|w| w.wr_id), Some(1));
        // WR 2 referenced pages in round A, WR 3 in round B.
        assert!(o.route(wc(2), true).is_none());
        let a = o.new_batch();
        assert!(o.route(wc(3), true).is_none());
        let b = o.new_batch();
        // WR 4 copied, but comes after referenced pages: it waits too.
        assert!(o.route(wc(4), false).is_none());
        assert_eq!(o.outstanding(), 2);
        // B released first: nothing may overtake WR 2.
        o.released(b, |w| got.push(w, GFP_KERNEL).unwrap());
        assert!(got.is_empty());
        o.released(a, |w| got.push(w, GFP_KERNEL).unwrap());
        assert_eq!(&ids(&got)[..], &[2, 3, 4]);
        assert_eq!(o.outstanding(), 0);
        assert!(!o.is_waiting());
        assert_eq!(o.deferred(), 3);
        Ok(())
    }

    #[test]
    fn a_copying_stream_needs_no_ring() -> Result {
        let mut o = SendOrder::new(8);
        assert_eq!(o.ring_needed(), Some(8));
        // Nothing referenced, nothing outstanding: delivered at once.
        for id in 1..=20 {
            assert_eq!(o.route(wc(id), false).map(|w| w.wr_id), Some(id));
        }
        assert_eq!(o.deferred(), 0);
        o.set_ring(SendOrder::alloc_ring(8)?);
        assert_eq!(o.ring_needed(), None);
        assert!(o.route(wc(21), true).is_none());
        let a = o.new_batch();
        let mut got = KVec::new();
        o.released(a, |w| got.push(w, GFP_KERNEL).unwrap());
        assert_eq!(&ids(&got)[..], &[21]);
        Ok(())
    }

    #[test]
    fn batches_released_out_of_order_across_the_window() -> Result {
        // More batches than MAX_BATCHES over time, each released after the
        // next one: every completion comes out once, in order.
        let mut o = SendOrder::with_ring(8)?;
        let mut got = KVec::new();
        let mut prev = None;
        for id in 1..=(3 * MAX_BATCHES as u64) {
            assert!(o.route(wc(id), true).is_none());
            let b = o.new_batch();
            if let Some(p) = prev.take() {
                o.released(b, |w| got.push(w, GFP_KERNEL).unwrap());
                o.released(p, |w| got.push(w, GFP_KERNEL).unwrap());
            } else {
                prev = Some(b);
            }
        }
        if let Some(p) = prev {
            o.released(p, |w| got.push(w, GFP_KERNEL).unwrap());
        }
        assert_eq!(got.len(), 3 * MAX_BATCHES);
        assert!(got.iter().enumerate().all(|(i, w)| w.wr_id == i as u64 + 1));
        assert_eq!(o.outstanding(), 0);
        Ok(())
    }

    #[test]
    fn a_round_without_pages_does_not_wait() -> Result {
        let mut o = SendOrder::with_ring(8)?;
        let mut got = KVec::new();
        assert!(o.route(wc(1), true).is_none());
        o.no_batch();
        o.released(0, |w| got.push(w, GFP_KERNEL).unwrap());
        assert_eq!(&ids(&got)[..], &[1]);
        Ok(())
    }

    #[test]
    fn drain_flushes_what_was_not_released() -> Result {
        let mut o = SendOrder::with_ring(8)?;
        let mut got = KVec::new();
        assert!(o.route(wc(1), true).is_none());
        let a = o.new_batch();
        assert!(o.route(wc(2), true).is_none());
        let _b = o.new_batch();
        o.released(a, |w| got.push(w, GFP_KERNEL).unwrap());
        assert_eq!(&ids(&got)[..], &[1]);
        assert!(o
            .route(
                Completion {
                    status: WcStatus::WrFlushErr,
                    ..wc(3)
                },
                false
            )
            .is_none());
        o.drain(|w| got.push(w, GFP_KERNEL).unwrap());
        assert_eq!(&ids(&got)[..], &[1, 2, 3]);
        assert_eq!(got[0].status, WcStatus::Success);
        assert_eq!(got[1].status, WcStatus::WrFlushErr);
        assert!(o.can_plan() && o.outstanding() == 0);
        // A late release of the dead stream's batch changes nothing.
        o.released(a + 1, |w| got.push(w, GFP_KERNEL).unwrap());
        assert_eq!(got.len(), 3);
        assert_eq!(o.route(wc(4), false).map(|w| w.wr_id), Some(4));
        Ok(())
    }
}
