// SPDX-License-Identifier: GPL-2.0
//! A flush pass over a work queue (the send queue, a receive queue): the
//! bound that lets a flush loop end however fast entries are posted.

/// `flush_left` of a queue with no flush pass under way.
pub(super) const NO_PASS: u32 = u32::MAX;

/// A work queue a flush takes entries off, in passes.
///
/// A pass takes at most as many entries as were posted when it began (at
/// most a ring's worth: a broken index counts as a full ring), so a loop
/// that takes until `false` ends however fast entries are posted (a
/// process's other thread moving the producer index, a ULP posting from
/// its completion handler). `false` ends the pass; what was posted after
/// its start is the next pass's (a post or doorbell to a failed QP
/// flushes what it sees). A take that is not a flush's ends the pass under
/// way (the queue's `pop_into` sets [`Self::flush_left`] to [`NO_PASS`]).
pub(super) trait FlushQueue {
    /// What the queue holds.
    type Entry;

    /// Entries the pass under way may still take ([`NO_PASS`]: none
    /// under way).
    fn flush_left(&mut self) -> &mut u32;

    /// Entries posted now (a process's ring: at most its size).
    fn posted(&self) -> u32;

    /// Takes the head entry into `dst` (false, `dst` untouched, if there
    /// is none).
    fn take_into(&mut self, dst: &mut Option<Self::Entry>) -> bool;

    /// The next entry of the pass into `dst`, as `take_into`; `false`
    /// ends the pass.
    fn flush_pop_into(&mut self, dst: &mut Option<Self::Entry>) -> bool {
        if *self.flush_left() == NO_PASS {
            *self.flush_left() = self.posted();
        }
        if *self.flush_left() == 0 || !self.take_into(dst) {
            *self.flush_left() = NO_PASS;
            return false;
        }
        *self.flush_left() -= 1;
        true
    }

    /// [`Self::flush_pop_into`] into a new entry.
    fn flush_pop(&mut self) -> Option<Self::Entry> {
        let mut e = None;
        self.flush_pop_into(&mut e);
        e
    }
}
