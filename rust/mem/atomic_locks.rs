// SPDX-License-Identifier: GPL-2.0
//! The per-device atomic lock table: RFC 7306 atomics at the responder run
//! their read-modify-write under one of a fixed set of irq-safe spinlocks,
//! chosen by the target word's physical address.
//!
//! Why by physical address: two QPs may name one word through different
//! MRs (a DMA MR and a user MR over the same page, two fast-registered
//! MRs, ...); only the physical address is the same for all of them. Why a
//! table: atomics on different words proceed in parallel (up to hash
//! collisions), while any two atomics on the same 8-octet word from any QP
//! of the device are serialised, and the original value is read under the
//! same lock (no lost update, no torn value).
//!
//! What it does not do: serialise against the CPU or other devices. A CPU
//! store between the lock holder's load and store is lost; that is why the
//! device reports `IB_ATOMIC_HCA`, not `IB_ATOMIC_GLOB` (see
//! Documentation/extensions.md).
//!
//! RX runs in softirq (the socket's `data_ready`) and in process context
//! (the hand-off reads what arrived first): the locks are irq-safe. One
//! lock is held at a time, innermost (after the QP's engine lock), so they
//! never nest. The MR's lock is not held: the caller pins the MR instead
//! (`crate::mem::mr`, `Mr::with_word`), so the table is the only point where
//! atomics serialise and distinct words of one MR proceed in parallel.

use kernel::prelude::*;

use crate::ffi::sync::{new_spinlock_irq, SpinLockIrq};

/// Locks in the table (a power of two).
pub(crate) const LOCKS: usize = 1024;
const INDEX_BITS: u32 = LOCKS.trailing_zeros();
/// 2^64 / golden ratio: Fibonacci hashing spreads consecutive keys evenly.
const FIB: u64 = 0x9E37_79B9_7F4A_7C15;

/// The lock table.
#[pin_data]
pub(crate) struct AtomicLocks {
    #[pin]
    locks: [SpinLockIrq<()>; LOCKS],
}

impl AtomicLocks {
    pub(crate) fn new() -> impl PinInit<Self> {
        pin_init!(AtomicLocks {
            // One lock class for all: they never nest.
            locks <- pin_init::pin_init_array_from_fn(|_| new_spinlock_irq!((), "rsiw_atomic_word")),
        })
    }

    /// The lock of the 8-octet word at physical address `phys` (its low
    /// three bits are ignored: the word is the unit).
    pub(crate) fn index(phys: u64) -> usize {
        ((phys >> 3).wrapping_mul(FIB) >> (64 - INDEX_BITS)) as usize
    }

    /// Runs `f` holding the lock of the word at `phys`.
    pub(crate) fn with<R>(&self, phys: u64, f: impl FnOnce() -> R) -> R {
        let _guard = self.locks[Self::index(phys) % LOCKS].lock();
        f()
    }
}

const _: () = assert!(LOCKS.is_power_of_two());

#[cfg(rsiw_kunit)]
#[kunit_tests(rsiw_atomic_locks)]
mod tests {
    use super::*;

    /// Distinct lock indices of `n` consecutive words from `base`.
    fn distinct(base: u64, n: u64) -> usize {
        let mut seen = [false; LOCKS];
        let mut count = 0;
        for i in 0..n {
            let idx = AtomicLocks::index(base + 8 * i);
            if !seen[idx] {
                seen[idx] = true;
                count += 1;
            }
        }
        count
    }

    #[test]
    fn same_word_same_lock() {
        for base in [0x1000u64, 0x1234_5678, 0x7654_3210_0008] {
            let w = base & !7;
            // Any octet of the word, any time: one lock.
            for b in 0..8 {
                assert_eq!(AtomicLocks::index(w + b), AtomicLocks::index(w));
            }
            assert!(AtomicLocks::index(w) < LOCKS);
        }
        // Stable: a pure function of the address (fixed values).
        assert_eq!(AtomicLocks::index(0), 0);
        assert_eq!(AtomicLocks::index(8), (FIB >> (64 - INDEX_BITS)) as usize);
    }

    #[test]
    fn neighbouring_words_spread() {
        for base in [0x1000u64, 0x1234_5000, 0x7654_3210_0000] {
            // The words of a cache line never share a lock ...
            assert_eq!(distinct(base, 8), 8);
            assert_eq!(distinct(base + 0x40, 16), 16);
            // ... and a page's 512 words spread over (almost) 512 locks.
            assert!(distinct(base, 512) >= 500);
        }
        // The same offset in consecutive pages does not collide either.
        let mut seen = [false; LOCKS];
        for p in 0..64u64 {
            let idx = AtomicLocks::index(0x10_0000 + p * 0x1000 + 0x80);
            assert!(!seen[idx]);
            seen[idx] = true;
        }
    }

    #[test]
    fn table_serialises_and_releases() -> Result {
        let t = KBox::pin_init(AtomicLocks::new(), GFP_KERNEL)?;
        let mut v = 0u64;
        for i in 0..100u64 {
            t.with(0x2000 + 8 * (i % 4), || v += i);
        }
        assert_eq!(v, 4950);
        // The lock is released on return: taking it again does not spin.
        t.with(0x2000, || ());
        t.with(0x2000, || ());
        Ok(())
    }
}
