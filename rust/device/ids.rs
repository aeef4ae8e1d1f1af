// SPDX-License-Identifier: GPL-2.0
//! Object numbers unique among the live objects that hold them: the PD
//! ids every isolation check compares (`Mr::check_all`, the engine's
//! `check_region`, fast registration, invalidation).
//!
//! A number is taken from an XArray of the live ones with a cyclic
//! cursor, and given back when its object goes. A number in use is
//! skipped however many times the cursor laps, so no two live objects
//! ever share one (a wrapping counter would hand a live kernel PD's id to
//! a process after 2^32 allocations); a freed one comes back only after a
//! lap, not at once.

use kernel::{
    prelude::*,
    xarray::{AllocKind, XArray},
};

use crate::ffi::sync::{new_spinlock_irq, SpinLockIrq};

/// Live object numbers, 1..=u32::MAX (0 is never handed out).
///
/// Every Rust `XArray` shares one lockdep class and the STag table's is
/// taken from softirq under an irq-safe lock: this one is too, with
/// atomic node allocation, to keep the class's usage consistent (as
/// `QpTable`).
#[pin_data]
pub(crate) struct IdTable {
    /// Next number to try; holding this lock is what gives access to `xa`.
    #[pin]
    cursor: SpinLockIrq<u32>,
    /// Number -> itself, for each live number.
    #[pin]
    xa: XArray<KBox<u32>>,
}

impl IdTable {
    pub(crate) fn new() -> impl PinInit<Self> {
        pin_init!(IdTable {
            cursor <- new_spinlock_irq!(1, "rsiw_id_table"),
            xa <- XArray::new(AllocKind::Alloc),
        })
    }

    /// A number no live object holds. The callers bound the live objects
    /// (`max_pd`) far below the number space, so the search ends after at
    /// most that many occupied slots; `ENOSPC` if every number is live.
    pub(crate) fn alloc(&self) -> Result<u32> {
        let mut slot = KBox::new(0u32, GFP_KERNEL_ACCOUNT)?;
        let mut cursor = self.cursor.lock();
        let mut xa = self.xa.lock();
        let mut id = *cursor;
        let mut tries = 0u32;
        while id == 0 || xa.get(id as usize).is_some() {
            id = id.wrapping_add(1);
            tries += 1;
            if tries == u32::MAX {
                return Err(ENOSPC);
            }
        }
        *slot = id;
        // Node allocation under the irq-safe lock: atomic.
        xa.store(id as usize, slot, GFP_ATOMIC)
            .map_err(|_| ENOMEM)?;
        *cursor = id.wrapping_add(1);
        Ok(id)
    }

    /// Gives `id` back (its object is gone).
    pub(crate) fn free(&self, id: u32) {
        let _cursor = self.cursor.lock();
        let mut xa = self.xa.lock();
        let slot = xa.remove(id as usize);
        drop(xa);
        drop(_cursor);
        if slot.is_none() {
            kernel::pr_warn_once!("freeing an id that is not live\n");
        }
    }

    /// Test hook: the next search starts at `id` (e.g. just below the
    /// wrap), instead of after 2^32 allocations.
    #[cfg(rsiw_kunit)]
    pub(crate) fn set_cursor(&self, id: u32) {
        *self.cursor.lock() = id;
    }
}

#[cfg(rsiw_kunit)]
#[kunit_tests(rsiw_ids)]
mod tests {
    use super::*;

    /// The cursor wraps around a live number: it is never handed out
    /// again while its holder lives, and comes back once freed.
    #[test]
    fn live_id_is_never_handed_out_again() -> Result {
        let t = KBox::pin_init(IdTable::new(), GFP_KERNEL)?;
        // A long-lived holder (a kernel ULP's PD) at 1, as on a fresh device.
        let kernel_pd = t.alloc()?;
        assert_eq!(kernel_pd, 1);
        let low = t.alloc()?;
        assert_eq!(low, 2);
        // 2^32 allocations later: the cursor is at the wrap.
        t.set_cursor(u32::MAX - 1);
        let a = t.alloc()?;
        let b = t.alloc()?;
        assert_eq!((a, b), (u32::MAX - 1, u32::MAX));
        // Wrapping: 0 is skipped and so are the live 1 and 2.
        let c = t.alloc()?;
        assert_eq!(c, 3);
        assert!(c != kernel_pd && c != low);
        // Right at a live number: skipped.
        t.set_cursor(kernel_pd);
        let d = t.alloc()?;
        assert_eq!(d, 4);
        // Freed, it comes back when the cursor reaches it.
        t.free(low);
        t.set_cursor(low);
        assert_eq!(t.alloc()?, low);
        for id in [kernel_pd, low, a, b, c, d] {
            t.free(id);
        }
        Ok(())
    }

    /// Many live numbers around the wrap: every one handed out is unique.
    #[test]
    fn ids_are_unique_among_the_live_across_the_wrap() -> Result {
        let t = KBox::pin_init(IdTable::new(), GFP_KERNEL)?;
        let mut live = KVec::new();
        for _ in 0..64 {
            live.push(t.alloc()?, GFP_KERNEL)?;
        }
        t.set_cursor(u32::MAX - 31);
        for _ in 0..128 {
            live.push(t.alloc()?, GFP_KERNEL)?;
        }
        for i in 0..live.len() {
            assert!(live[i] != 0);
            for j in i + 1..live.len() {
                assert!(live[i] != live[j]);
            }
        }
        for id in live.iter() {
            t.free(*id);
        }
        Ok(())
    }
}
