// SPDX-License-Identifier: GPL-2.0
//! A spinlock that keeps bottom halves (softirqs) off its CPU while held,
//! the kernel's `spin_lock_bh`: for state that process context and the
//! network stack's softirq share and no hard interrupt touches. Unlike
//! [`kernel::sync::SpinLockIrq`] it leaves interrupts on, so a long
//! critical section does not delay them (nor hide its own time from a
//! sampling profiler, whose timer interrupt would wait for the unlock).
//! Never taken with interrupts disabled: its unlock enables bottom halves.

use kernel::{bindings, sync::lock::Backend};

use super::sys;

/// The backend of [`SpinLockBh`].
pub(crate) struct SpinLockBhBackend;

/// A `spinlock_t` taken with `spin_lock_bh`.
pub(crate) type SpinLockBh<T> = kernel::sync::lock::Lock<T, SpinLockBhBackend>;

// SAFETY: the kernel's `spinlock_t` gives mutual exclusion; `lock`,
// `try_lock` and `unlock` are the `_bh` forms of one lock, paired.
unsafe impl Backend for SpinLockBhBackend {
    type State = bindings::spinlock_t;
    type GuardState = ();

    unsafe fn init(ptr: *mut Self::State, name: *const kernel::ffi::c_char, key: *mut bindings::lock_class_key) {
        // SAFETY: the caller's contract: `ptr` valid for writes, `name`
        // and `key` valid for reads as long as the lock lives.
        unsafe { bindings::__spin_lock_init(ptr, name, key) }
    }

    unsafe fn lock(ptr: *mut Self::State) -> Self::GuardState {
        // SAFETY: `ptr` is an initialised lock (the caller's contract);
        // the two bindings name the same C type.
        unsafe { sys::rsiw_spin_lock_bh(ptr.cast()) }
    }

    unsafe fn try_lock(ptr: *mut Self::State) -> Option<Self::GuardState> {
        // SAFETY: as for `lock`.
        (unsafe { sys::rsiw_spin_trylock_bh(ptr.cast()) } != 0).then_some(())
    }

    unsafe fn unlock(ptr: *mut Self::State, _guard_state: &Self::GuardState) {
        // SAFETY: `ptr` is initialised and held by the caller.
        unsafe { sys::rsiw_spin_unlock_bh(ptr.cast()) }
    }

    unsafe fn assert_is_held(ptr: *mut Self::State) {
        // SAFETY: `ptr` is an initialised lock.
        unsafe { bindings::spin_assert_is_held(ptr) }
    }
}

/// A [`SpinLockBh`] initialiser with a lock class of its own (one per call
/// site, as the kernel's `new_spinlock!`).
macro_rules! new_spinlock_bh {
    ($inner:expr, $name:literal $(,)?) => {
        $crate::ffi::sync::SpinLockBh::new($inner, kernel::c_str!($name), kernel::static_lock_class!())
    };
}
pub(crate) use new_spinlock_bh;
