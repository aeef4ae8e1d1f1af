// SPDX-License-Identifier: GPL-2.0
//! Driver objects the RDMA core allocates for us.
//!
//! The core allocates `ib_device`, `ib_pd`, `ib_ucontext`, ... with the size
//! the driver declares (`size_ib_pd`, `_ib_alloc_device(size)`), zeroed, and
//! requires its own struct at offset 0. [`CoreObj`] is that layout: the C
//! struct first, rsiw's Rust state after it. The core owns the allocation;
//! rsiw initialises and drops only its part, in the create and destroy
//! callbacks.

use core::{marker::PhantomData, mem::size_of, ptr};

use kernel::{alloc::KBox, prelude::*, types::Opaque};

/// A core-allocated object: C base `B` at offset 0, Rust data `T` after it.
///
/// # Invariants
///
/// Between [`CoreObj::init`] and [`CoreObj::drop_data`] on the same base
/// pointer, `data` is initialised. The base is only reached through
/// `Opaque`, because the C side mutates it concurrently.
#[repr(C)]
pub(crate) struct CoreObj<B, T> {
    base: Opaque<B>,
    data: T,
}

impl<B, T> CoreObj<B, T> {
    /// The size to give the core for its allocation.
    pub(crate) const SIZE: usize = size_of::<Self>();

    /// Writes the Rust part of a freshly allocated object.
    ///
    /// # Safety
    ///
    /// `base` must point to an allocation of at least [`Self::SIZE`] bytes
    /// made for this type by the core, whose Rust part is not initialised.
    pub(crate) unsafe fn init(base: *mut B, data: T) {
        let obj = base.cast::<Self>();
        // SAFETY: per the function's contract `obj` is valid for writes of
        // `Self`; `addr_of_mut!` creates no reference to the C part.
        unsafe { ptr::write(ptr::addr_of_mut!((*obj).data), data) };
    }

    /// Writes the Rust part of a freshly allocated object in place, for
    /// data that must not move (locks, XArrays): the core never moves its
    /// allocation, so the data is pinned until [`Self::drop_data`].
    ///
    /// # Safety
    ///
    /// As for [`Self::init`]. On error the Rust part is left uninitialised.
    pub(crate) unsafe fn pin_init(base: *mut B, init: impl PinInit<T, Error>) -> Result {
        let obj = base.cast::<Self>();
        // SAFETY: per the contract the slot is valid for writes, not
        // initialised, and stays at this address until `drop_data`; on
        // error `__pinned_init` leaves nothing to drop.
        unsafe { init.__init(ptr::addr_of_mut!((*obj).data)) }
    }

    /// The Rust part of an object.
    ///
    /// # Safety
    ///
    /// `base` must point to an object of this type initialised with
    /// [`Self::init`] and not yet dropped, that outlives `'a`.
    pub(crate) unsafe fn data<'a>(base: *mut B) -> &'a T {
        let obj = base.cast::<Self>();
        // SAFETY: per the contract `data` is initialised and lives for `'a`;
        // only the Rust part is borrowed, never the C part.
        unsafe { &*ptr::addr_of!((*obj).data) }
    }

    /// Drops the Rust part before the core frees the object.
    ///
    /// # Safety
    ///
    /// As for [`Self::data`]; afterwards no reference to the data may
    /// remain and the data must not be used again.
    pub(crate) unsafe fn drop_data(base: *mut B) {
        let obj = base.cast::<Self>();
        // SAFETY: per the contract the data is initialised and unaliased.
        unsafe { ptr::drop_in_place(ptr::addr_of_mut!((*obj).data)) };
    }

    /// Allocates an object the driver owns (the core allocates `ib_mr`
    /// through the driver): a zeroed C part and `data`, on the heap.
    /// Returns the base pointer the core sees.
    pub(crate) fn new_boxed(data: T) -> Result<*mut B> {
        let obj = KBox::new(
            Self {
                base: Opaque::zeroed(),
                data,
            },
            GFP_KERNEL_ACCOUNT,
        )?;
        Ok(KBox::into_raw(obj).cast::<B>())
    }

    /// Frees an object made by [`Self::new_boxed`], dropping its data.
    ///
    /// # Safety
    ///
    /// `base` must come from [`Self::new_boxed`] and not be used again.
    pub(crate) unsafe fn free_boxed(base: *mut B) {
        // SAFETY: per the contract `base` is the pointer `KBox::into_raw`
        // returned for a `Self`.
        drop(unsafe { KBox::from_raw(base.cast::<Self>()) });
    }
}

/// The Rust part of a core-allocated object, still to be written: what a
/// driver's create callback fills, once. The adapter that made the slot
/// refuses a create that returns `Ok` without filling it.
pub(crate) struct Slot<'a, B, T> {
    base: *mut B,
    filled: &'a mut bool,
    _data: PhantomData<T>,
}

impl<'a, B, T> Slot<'a, B, T> {
    /// # Safety
    ///
    /// As for [`CoreObj::init`]: `base` points to a fresh allocation of
    /// `CoreObj::<B, T>::SIZE` bytes whose Rust part is not initialised;
    /// `filled` is false.
    pub(crate) unsafe fn new(base: *mut B, filled: &'a mut bool) -> Self {
        Self {
            base,
            filled,
            _data: PhantomData,
        }
    }

    /// Writes the object's Rust part.
    pub(crate) fn write(self, data: T) {
        // SAFETY: per `new`'s contract, and the slot is consumed: written
        // at most once.
        unsafe { CoreObj::<B, T>::init(self.base, data) };
        *self.filled = true;
    }

    /// Initialises the object's Rust part in place (it never moves).
    pub(crate) fn pin_init(self, init: impl PinInit<T, Error>) -> Result {
        // SAFETY: as for `write`; on error nothing is initialised.
        unsafe { CoreObj::<B, T>::pin_init(self.base, init) }?;
        *self.filled = true;
        Ok(())
    }
}
