// SPDX-License-Identifier: GPL-2.0
//! The memory cgroup an object's later allocations are charged to.
//!
//! `__GFP_ACCOUNT` charges the cgroup of the task that allocates. An
//! object made by a process but filled in later from a kernel thread (a
//! work item) would charge that later memory to no one: [`MemCgroup`]
//! keeps the creator's cgroup and [`MemCgroup::charge`] makes it the one
//! charged for a scope (the kernel's `set_active_memcg`).

use super::super::sys;
use core::ptr::NonNull;

/// A counted reference to a memory cgroup (none when the kernel has the
/// controller off).
pub(crate) struct MemCgroup(Option<NonNull<sys::mem_cgroup>>);

// SAFETY: a counted reference to a memory cgroup may be used and dropped
// from any task; the cgroup lives until the reference is put.
unsafe impl Send for MemCgroup {}
// SAFETY: `charge` only reads the pointer; the kernel's scope is per task.
unsafe impl Sync for MemCgroup {}

impl MemCgroup {
    /// The calling task's memory cgroup (the root one for a kernel thread).
    pub(crate) fn current() -> Self {
        // SAFETY: takes a reference on the current task's memory cgroup,
        // put in `drop`; NULL when the controller is off.
        Self(NonNull::new(unsafe { sys::rsiw_memcg_get_current() }))
    }

    /// Runs `f` with this cgroup charged for its `__GFP_ACCOUNT`
    /// allocations (task context), then restores the previous scope.
    pub(crate) fn charge<R>(&self, f: impl FnOnce() -> R) -> R {
        let Some(m) = self.0 else { return f() };
        // SAFETY: `m` is a counted reference held by `self`, which
        // outlives the scope; the previous scope is restored below, so
        // scopes nest as `set_active_memcg` requires.
        let old = unsafe { sys::rsiw_memcg_set_active(m.as_ptr()) };
        let r = f();
        // SAFETY: restores the scope saved above.
        unsafe { sys::rsiw_memcg_set_active(old) };
        r
    }
}

impl Drop for MemCgroup {
    fn drop(&mut self) {
        if let Some(m) = self.0 {
            // SAFETY: puts the reference `current` took.
            unsafe { sys::rsiw_memcg_put(m.as_ptr()) };
        }
    }
}
