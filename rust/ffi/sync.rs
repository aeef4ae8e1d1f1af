// SPDX-License-Identifier: GPL-2.0
//! The driver's two spinlocks, as `kernel::sync::lock::Lock`s with
//! backends of their own that call the kernel's out-of-line lock
//! functions directly:
//!
//! - [`SpinLockIrq`]: the kernel's `spin_lock_irq_disable` (interrupts off
//!   while held, nestable in any order: only the outermost holder turns
//!   them back on), for state a consumer may reach from any context.
//! - [`SpinLockBh`]: `spin_lock_bh`, for state that process context and
//!   the network stack's softirq share and no hard interrupt touches. It
//!   leaves interrupts on, so a long critical section does not delay them
//!   (nor hide its own time from a sampling profiler, whose timer
//!   interrupt would wait for the unlock). Never taken with interrupts
//!   disabled: its unlock enables bottom halves.
//!
//! Why not `kernel::sync::SpinLockIrq`: an out-of-tree module calls the
//! kernel crate's C helpers as functions (the kernel inlines them only
//! into itself), so each of its lock/unlock pairs costs two wrapper calls
//! and a call of an empty `spin_assert_is_held` (lockdep off) around the
//! two that do the work. Under QEMU's TCG, where a message's time goes in
//! calls and returns, those were a fifth of the lock calls on the message
//! path (`bench/bench.sh --stamp`). These backends make the two calls that do the work and
//! assert under lockdep only.
//!
//! A `spinlock_t` begins with its `raw_spinlock_t` (`rlock`) except under
//! PREEMPT_RT, where it is a sleeping lock these backends do not support
//! (refused at build time, as are kernels that inline the `_bh` forms).

use kernel::{bindings, sync::lock::Backend};

#[cfg(CONFIG_PREEMPT_RT)]
compile_error!(
    "rsiw's spinlock backends call the raw spinlock functions: PREEMPT_RT is not supported"
);
// Architectures that inline these (ARCH_INLINE_SPIN_*, not x86) export
// no function to call.
#[cfg(any(
    CONFIG_INLINE_SPIN_LOCK_BH,
    CONFIG_INLINE_SPIN_UNLOCK_BH,
    CONFIG_INLINE_SPIN_TRYLOCK_BH
))]
compile_error!("rsiw's SpinLockBh calls _raw_spin_lock_bh and its pair, which this kernel inlines");

/// `spinlock_t`'s `raw_spinlock_t`, its first member.
fn raw(ptr: *mut bindings::spinlock_t) -> *mut bindings::raw_spinlock_t {
    ptr.cast()
}

/// Both backends' `init`: a `spinlock_t` with its lockdep class.
///
/// # Safety
///
/// `ptr` valid for writes, `name` and `key` valid for reads as long as
/// the lock lives.
unsafe fn init(
    ptr: *mut bindings::spinlock_t,
    name: *const kernel::ffi::c_char,
    key: *mut bindings::lock_class_key,
) {
    // SAFETY: the caller's contract.
    unsafe { bindings::__spin_lock_init(ptr, name, key) }
}

/// Both backends' `assert_is_held`: lockdep's check, nothing without
/// lockdep (no call of an empty helper).
///
/// # Safety
///
/// `ptr` is an initialised lock.
#[inline]
unsafe fn assert_held(_ptr: *mut bindings::spinlock_t) {
    // SAFETY: the caller's contract.
    #[cfg(CONFIG_LOCKDEP)]
    unsafe {
        bindings::spin_assert_is_held(_ptr)
    }
}

/// The backend of [`SpinLockIrq`].
pub(crate) struct SpinLockIrqBackend;

/// A spinlock held with local interrupts off (nestable, see the module).
pub(crate) type SpinLockIrq<T> = kernel::sync::lock::Lock<T, SpinLockIrqBackend>;

// SAFETY: the kernel's `spinlock_t` gives mutual exclusion; `lock`,
// `try_lock` and `unlock` are the `_irq_disable`/`_irq_enable` forms of
// one lock, paired, as the kernel's own `SpinLockIrqBackend` pairs them.
unsafe impl Backend for SpinLockIrqBackend {
    type State = bindings::spinlock_t;
    type GuardState = ();

    unsafe fn init(
        ptr: *mut Self::State,
        name: *const kernel::ffi::c_char,
        key: *mut bindings::lock_class_key,
    ) {
        // SAFETY: the caller's contract, passed on.
        unsafe { init(ptr, name, key) }
    }

    #[inline]
    unsafe fn lock(ptr: *mut Self::State) -> Self::GuardState {
        // SAFETY: `ptr` is an initialised lock (the caller's contract),
        // whose first member is its raw lock (not PREEMPT_RT, above).
        unsafe { bindings::_raw_spin_lock_irq_disable(raw(ptr)) }
    }

    #[inline]
    unsafe fn try_lock(ptr: *mut Self::State) -> Option<Self::GuardState> {
        // SAFETY: as for `lock` (no raw form of it is exported).
        (unsafe { bindings::spin_trylock_irq_disable(ptr) } != 0).then_some(())
    }

    #[inline]
    unsafe fn unlock(ptr: *mut Self::State, _guard_state: &Self::GuardState) {
        // SAFETY: `ptr` is initialised and held by the caller.
        #[cfg(not(CONFIG_INLINE_SPIN_UNLOCK_IRQ))]
        unsafe {
            bindings::_raw_spin_unlock_irq_enable(raw(ptr))
        }
        // A kernel without preemption (User-Mode Linux's, for one) inlines
        // the unlock and exports no function for it: the kernel's helper.
        // SAFETY: as above.
        #[cfg(CONFIG_INLINE_SPIN_UNLOCK_IRQ)]
        unsafe {
            bindings::spin_unlock_irq_enable(ptr)
        }
    }

    #[inline]
    unsafe fn assert_is_held(ptr: *mut Self::State) {
        // SAFETY: the caller's contract, passed on.
        unsafe { assert_held(ptr) }
    }
}

/// A [`SpinLockIrq`] initialiser with a lock class of its own (one per
/// call site, as the kernel's `new_spinlock_irq!`).
macro_rules! new_spinlock_irq {
    ($inner:expr $(, $name:literal)? $(,)?) => {
        $crate::ffi::sync::SpinLockIrq::new($inner, kernel::optional_name!($($name)?), kernel::static_lock_class!())
    };
}
pub(crate) use new_spinlock_irq;

/// The backend of [`SpinLockBh`].
pub(crate) struct SpinLockBhBackend;

/// A `spinlock_t` taken with `spin_lock_bh`.
pub(crate) type SpinLockBh<T> = kernel::sync::lock::Lock<T, SpinLockBhBackend>;

// SAFETY: the kernel's `spinlock_t` gives mutual exclusion; `lock`,
// `try_lock` and `unlock` are the `_bh` forms of one lock, paired.
unsafe impl Backend for SpinLockBhBackend {
    type State = bindings::spinlock_t;
    type GuardState = ();

    unsafe fn init(
        ptr: *mut Self::State,
        name: *const kernel::ffi::c_char,
        key: *mut bindings::lock_class_key,
    ) {
        // SAFETY: the caller's contract, passed on.
        unsafe { init(ptr, name, key) }
    }

    #[inline]
    unsafe fn lock(ptr: *mut Self::State) -> Self::GuardState {
        // SAFETY: `ptr` is an initialised lock (the caller's contract),
        // whose first member is its raw lock.
        unsafe { bindings::_raw_spin_lock_bh(raw(ptr)) }
    }

    #[inline]
    unsafe fn try_lock(ptr: *mut Self::State) -> Option<Self::GuardState> {
        // SAFETY: as for `lock`.
        (unsafe { bindings::_raw_spin_trylock_bh(raw(ptr)) } != 0).then_some(())
    }

    #[inline]
    unsafe fn unlock(ptr: *mut Self::State, _guard_state: &Self::GuardState) {
        // SAFETY: `ptr` is initialised and held by the caller.
        unsafe { bindings::_raw_spin_unlock_bh(raw(ptr)) }
    }

    #[inline]
    unsafe fn assert_is_held(ptr: *mut Self::State) {
        // SAFETY: the caller's contract, passed on.
        unsafe { assert_held(ptr) }
    }
}

/// A [`SpinLockBh`] initialiser with a lock class of its own (one per call
/// site, as the kernel's `new_spinlock!`).
macro_rules! new_spinlock_bh {
    ($inner:expr, $name:literal $(,)?) => {
        $crate::ffi::sync::SpinLockBh::new(
            $inner,
            kernel::c_str!($name),
            kernel::static_lock_class!(),
        )
    };
}
pub(crate) use new_spinlock_bh;
