// SPDX-License-Identifier: GPL-2.0
//! User verbs: the driver data of a uverbs command ([`Udata`]: its request
//! and response structs) and memory shared with the process
//! ([`SharedRing`]: zeroed kernel memory a process maps through its
//! context's file, `rdma_user_mmap_entry`, and the `mmap`/`mmap_free`
//! entry points).
//!
//! Shared memory is written by a process at any time. Everything read from
//! it is a copy (volatile, whole words or whole structs of plain integers,
//! any bit pattern valid) that the driver checks after copying; indices are
//! read and written with atomics.

use core::{
    marker::PhantomData,
    mem::{size_of, MaybeUninit},
    ptr::{self, NonNull},
    sync::atomic::{AtomicU32, Ordering},
};

use kernel::{alloc::KBox, error::from_result, ffi::c_int, prelude::*};

use super::super::sys;

/// The ABI structs of `include/uapi/rdma/rsiw-abi.h`: plain integers, so
/// any bit pattern is a valid value and any value may be copied out.
///
/// # Safety
///
/// Implementors are `repr(C)` structs (or unions) of integers only.
pub(crate) unsafe trait UserAbi: Copy + Default {}

/// A create request's common fields.
pub(crate) trait CreateReq: UserAbi {
    fn flags(&self) -> u32;
    fn reserved(&self) -> u32;
}

macro_rules! create_req {
    ($($name:ident),*) => {
        $(impl CreateReq for sys::$name {
            fn flags(&self) -> u32 { self.flags }
            fn reserved(&self) -> u32 { self.reserved }
        })*
    };
}

macro_rules! abi_types {
    ($($name:ident),* $(,)?) => {
        $(
            // SAFETY: a bindgen struct of `include/uapi/rdma/rsiw-abi.h`,
            // made of integers (and arrays and unions of them) only.
            unsafe impl UserAbi for sys::$name {}
        )*
    };
}

#[cfg(rsiw_kunit)]
pub(crate) use sys::rsiw_sge;
pub(crate) use sys::{
    rsiw_alloc_ucontext_req, rsiw_alloc_ucontext_resp, rsiw_cqe, rsiw_create_cq_req,
    rsiw_create_cq_resp, rsiw_create_qp_req, rsiw_create_qp_resp, rsiw_create_srq_req,
    rsiw_create_srq_resp, rsiw_ring_info, rsiw_rqe, rsiw_sqe,
};

abi_types!(
    rsiw_alloc_ucontext_req,
    rsiw_alloc_ucontext_resp,
    rsiw_create_cq_req,
    rsiw_create_cq_resp,
    rsiw_create_qp_req,
    rsiw_create_qp_resp,
    rsiw_create_srq_req,
    rsiw_create_srq_resp,
    rsiw_ring_info,
    rsiw_sqe,
    rsiw_rqe,
    rsiw_cqe,
    rsiw_sge,
);
create_req!(rsiw_create_cq_req, rsiw_create_qp_req, rsiw_create_srq_req);

/// The ABI's constants, typed for the driver.
pub(crate) mod abi {
    use super::sys;
    pub(crate) const VERSION: u32 = sys::RSIW_ABI_VERSION;
    pub(crate) const RING_HDR: usize = sys::RSIW_RING_HDR as usize;
    pub(crate) const RING_ERROR: u32 = sys::RSIW_RING_ERROR;
    pub(crate) const RING_SQ_ACTIVE: u32 = sys::RSIW_RING_SQ_ACTIVE;
    pub(crate) const RING_CQ_OVERFLOW: u32 = sys::RSIW_RING_CQ_OVERFLOW;
    pub(crate) const CREATE_RINGS: u32 = sys::RSIW_CREATE_RINGS;
    pub(crate) const MAX_SGE: usize = sys::RSIW_MAX_SGE as usize;
    pub(crate) const MAX_INLINE: usize = sys::RSIW_MAX_INLINE as usize;
    pub(crate) const SQE_SIGNALED: u8 = sys::RSIW_SQE_SIGNALED as u8;
    pub(crate) const SQE_SOLICITED: u8 = sys::RSIW_SQE_SOLICITED as u8;
    pub(crate) const SQE_FENCE: u8 = sys::RSIW_SQE_FENCE as u8;
    pub(crate) const SQE_INLINE: u8 = sys::RSIW_SQE_INLINE as u8;
    pub(crate) const CQE_WITH_IMM: u8 = sys::RSIW_CQE_WITH_IMM as u8;
    pub(crate) const CQE_WITH_INV: u8 = sys::RSIW_CQE_WITH_INV as u8;
    pub(crate) const CQ_ARM_NEXT: u32 = sys::RSIW_CQ_ARM_NEXT;
    pub(crate) const CQ_ARM_SOLICITED: u32 = sys::RSIW_CQ_ARM_SOLICITED;
    /// Send ring opcodes (`enum rsiw_wr_opcode`).
    pub(crate) const WR_SEND: u32 = sys::rsiw_wr_opcode_RSIW_WR_SEND;
    pub(crate) const WR_SEND_WITH_INV: u32 = sys::rsiw_wr_opcode_RSIW_WR_SEND_WITH_INV;
    pub(crate) const WR_RDMA_WRITE: u32 = sys::rsiw_wr_opcode_RSIW_WR_RDMA_WRITE;
    pub(crate) const WR_RDMA_WRITE_WITH_IMM: u32 = sys::rsiw_wr_opcode_RSIW_WR_RDMA_WRITE_WITH_IMM;
    pub(crate) const WR_RDMA_READ: u32 = sys::rsiw_wr_opcode_RSIW_WR_RDMA_READ;
    pub(crate) const WR_LOCAL_INV: u32 = sys::rsiw_wr_opcode_RSIW_WR_LOCAL_INV;
    pub(crate) const WR_FLUSH: u32 = sys::rsiw_wr_opcode_RSIW_WR_FLUSH;
    pub(crate) const WR_ATOMIC_CMP_AND_SWP: u32 = sys::rsiw_wr_opcode_RSIW_WR_ATOMIC_CMP_AND_SWP;
    pub(crate) const WR_ATOMIC_FETCH_AND_ADD: u32 =
        sys::rsiw_wr_opcode_RSIW_WR_ATOMIC_FETCH_AND_ADD;
    pub(crate) const WR_MASKED_ATOMIC_CMP_AND_SWP: u32 =
        sys::rsiw_wr_opcode_RSIW_WR_MASKED_ATOMIC_CMP_AND_SWP;
    pub(crate) const WR_MASKED_ATOMIC_FETCH_AND_ADD: u32 =
        sys::rsiw_wr_opcode_RSIW_WR_MASKED_ATOMIC_FETCH_AND_ADD;
    /// Offsets of the control block's words.
    pub(crate) const PRODUCER: usize = core::mem::offset_of!(sys::rsiw_ring_ctl, producer);
    pub(crate) const CONSUMER: usize = core::mem::offset_of!(sys::rsiw_ring_ctl, consumer);
    pub(crate) const FLAGS: usize = core::mem::offset_of!(sys::rsiw_ring_ctl, flags);
    pub(crate) const ARMED: usize = core::mem::offset_of!(sys::rsiw_ring_ctl, armed);
    const _: () = assert!(core::mem::size_of::<sys::rsiw_ring_ctl>() <= RING_HDR);
    const _: () = assert!(core::mem::size_of::<sys::rsiw_sqe>() == 192);
    const _: () = assert!(core::mem::size_of::<sys::rsiw_rqe>() == 112);
    const _: () = assert!(core::mem::size_of::<sys::rsiw_cqe>() == 32);
}

impl sys::rsiw_sqe {
    /// The SGEs (whatever the process wrote; a copy of ours).
    pub(crate) fn sges(&self) -> &[sys::rsiw_sge; abi::MAX_SGE] {
        // SAFETY: both members of the union are plain integers, so either
        // view of its octets is valid.
        unsafe { &self.__bindgen_anon_1.sge }
    }

    /// The SGEs, to write an entry (the self-tests).
    #[cfg(rsiw_kunit)]
    pub(crate) fn sges_mut(&mut self) -> &mut [sys::rsiw_sge; abi::MAX_SGE] {
        // SAFETY: as for `sges`; any value written is valid for either view.
        unsafe { &mut self.__bindgen_anon_1.sge }
    }

    /// The inline data area.
    pub(crate) fn inline_data(&self) -> &[u8; abi::MAX_INLINE] {
        // SAFETY: as for `sges`.
        unsafe { &self.__bindgen_anon_1.inline_data }
    }
}

/// The driver data of one uverbs command: the process's request (`inbuf`)
/// and the response (`outbuf`), and the user context the command runs in.
///
/// # Invariants
///
/// `raw` is the core's `ib_udata` of the running command and `uctx` its
/// context, both valid for `'a`.
pub(crate) struct Udata<'a> {
    raw: *mut sys::ib_udata,
    uctx: *mut sys::ib_ucontext,
    _cmd: PhantomData<&'a mut sys::ib_udata>,
}

impl Udata<'_> {
    /// # Safety
    ///
    /// `raw` is null or the `ib_udata` of a running uverbs command, and
    /// `uctx` its context (null: looked up through the command's attribute
    /// bundle), both valid for the returned lifetime.
    pub(in crate::ffi) unsafe fn new<'b>(
        raw: *mut sys::ib_udata,
        uctx: *mut sys::ib_ucontext,
    ) -> Option<Udata<'b>> {
        if raw.is_null() {
            return None;
        }
        let uctx = if uctx.is_null() {
            // SAFETY: per the contract a command's udata, inside its bundle.
            unsafe { sys::rsiw_udata_ucontext(raw) }
        } else {
            uctx
        };
        // INVARIANT: per the contract.
        Some(Udata {
            raw,
            uctx,
            _cmd: PhantomData,
        })
    }

    /// Octets of request the process passed.
    pub(crate) fn in_len(&self) -> usize {
        // SAFETY: by the invariant.
        unsafe { (*self.raw).inlen }
    }

    /// The request, as far as the process passed it (the rest zero).
    pub(crate) fn read<T: UserAbi>(&self) -> Result<T> {
        let mut v = T::default();
        let n = self.in_len().min(size_of::<T>());
        // SAFETY: `v` has room for `n <= size_of::<T>()` octets, any of
        // which are a valid `T` (`UserAbi`); `raw` is valid (invariant).
        let r = unsafe { sys::rsiw_copy_from_udata(ptr::from_mut(&mut v).cast(), self.raw, n) };
        if r != 0 {
            return Err(EFAULT);
        }
        Ok(v)
    }

    /// The request, as [`Self::read`], for a request struct the driver
    /// knows whole: octets the process passed beyond it (a newer ABI's
    /// fields) must be zero, or `EOPNOTSUPP`. Its reserved fields and
    /// flags are the caller's to check.
    pub(crate) fn read_req<T: UserAbi>(&self) -> Result<T> {
        let v = self.read::<T>()?;
        // SAFETY: `raw` is valid (invariant); the helper only reads the
        // request through the core's copy-from-user.
        if !unsafe { sys::rsiw_udata_cleared_from(self.raw, size_of::<T>()) } {
            return Err(EOPNOTSUPP);
        }
        Ok(v)
    }

    /// A create request (`rsiw_create_{cq,qp,srq}_req`), checked: its
    /// reserved field zero (`EINVAL`), no flag but `RSIW_CREATE_RINGS`
    /// and nothing beyond the struct (`EOPNOTSUPP`), so a later ABI can
    /// give them a meaning.
    pub(crate) fn read_create_req<T: CreateReq>(&self) -> Result<T> {
        let req = self.read_req::<T>()?;
        if req.reserved() != 0 {
            return Err(EINVAL);
        }
        if req.flags() & !abi::CREATE_RINGS != 0 {
            return Err(EOPNOTSUPP);
        }
        Ok(req)
    }

    /// Writes the response, as far as the process has room for it.
    pub(crate) fn write<T: UserAbi>(&mut self, v: &T) -> Result {
        // SAFETY: by the invariant.
        let room = unsafe { (*self.raw).outlen };
        let n = room.min(size_of::<T>());
        // SAFETY: `v` is `n` readable octets; `raw` valid.
        let r = unsafe { sys::rsiw_copy_to_udata(self.raw, ptr::from_ref(v).cast(), n) };
        if r != 0 {
            return Err(EFAULT);
        }
        Ok(())
    }
}

/// What an mmap entry of ours is: the core's entry first (the core hands
/// it back to `mmap` and `mmap_free`), then the memory it maps.
#[repr(C)]
struct Entry {
    rdma: sys::rdma_user_mmap_entry,
    /// vmalloc memory (zeroed, charged to the process's memory cgroup) of `len` octets, freed with the entry.
    addr: *mut u8,
    len: usize,
}

/// Zeroed kernel memory mapped into a process (one `mmap` offset on its
/// context's file).
///
/// # Invariants
///
/// `entry` is an inserted mmap entry (allocated by [`SharedRing::new`],
/// freed by `mmap_free` once the core drops its last reference); while this
/// handle lives the entry is not removed, so its memory is valid for
/// `len` octets, page aligned.
pub(crate) struct SharedRing {
    entry: NonNull<Entry>,
    addr: *mut u8,
    len: usize,
    offset: u64,
}

// SAFETY: the memory is shared with a process anyway; every access is
// atomic or volatile.
unsafe impl Send for SharedRing {}
// SAFETY: as above.
unsafe impl Sync for SharedRing {}

impl SharedRing {
    /// `len` octets (rounded up to pages) of zeroed memory the process of
    /// `udata`'s context can map at [`Self::offset`].
    pub(crate) fn new(udata: &Udata<'_>, len: usize) -> Result<Self> {
        let len = len
            .checked_next_multiple_of(kernel::page::PAGE_SIZE)
            .ok_or(EINVAL)?;
        if len == 0 {
            return Err(EINVAL);
        }
        // SAFETY: plain allocation; freed in `mmap_free` (or below).
        let addr = unsafe { sys::rsiw_vmalloc_user(len as kernel::ffi::c_ulong) }.cast::<u8>();
        if addr.is_null() {
            return Err(ENOMEM);
        }
        let boxed = match KBox::new(
            Entry {
                // SAFETY: all-zero is the core's expected initial entry.
                rdma: unsafe { MaybeUninit::zeroed().assume_init() },
                addr,
                len,
            },
            GFP_KERNEL_ACCOUNT,
        ) {
            Ok(b) => b,
            Err(e) => {
                // SAFETY: allocated above, never shared.
                unsafe { sys::rsiw_vfree(addr.cast()) };
                return Err(e.into());
            }
        };
        let entry = KBox::into_raw(boxed);
        // SAFETY: `entry` is ours, zeroed; `uctx` the command's context.
        let r = unsafe {
            sys::rdma_user_mmap_entry_insert(udata.uctx, ptr::addr_of_mut!((*entry).rdma), len)
        };
        if r != 0 {
            // SAFETY: not inserted: still only ours.
            unsafe {
                sys::rsiw_vfree(addr.cast());
                drop(KBox::from_raw(entry));
            }
            return Err(Error::from_errno(r));
        }
        // SAFETY: inserted above; the offset is fixed from now on.
        let offset = unsafe { sys::rsiw_user_mmap_get_offset(ptr::addr_of!((*entry).rdma)) };
        // INVARIANT: inserted and not removed until `drop`.
        Ok(Self {
            // SAFETY: `into_raw` never returns null.
            entry: unsafe { NonNull::new_unchecked(entry) },
            addr,
            len,
            offset,
        })
    }

    /// The `mmap` offset.
    pub(crate) fn offset(&self) -> u64 {
        self.offset
    }

    /// Octets mapped.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    fn word(&self, off: usize) -> &AtomicU32 {
        assert!(off % 4 == 0 && off + 4 <= self.len);
        // SAFETY: in bounds and aligned (checked), valid while `self` is
        // (invariant); an `AtomicU32` may alias memory another party
        // changes atomically (the process's loads and stores).
        unsafe { AtomicU32::from_ptr(self.addr.add(off).cast()) }
    }

    /// The word at `off` (acquire).
    pub(crate) fn load(&self, off: usize) -> u32 {
        self.word(off).load(Ordering::Acquire)
    }

    /// Stores `v` at `off` (release).
    pub(crate) fn store(&self, off: usize, v: u32) {
        self.word(off).store(v, Ordering::Release)
    }

    /// Sets bits at `off`.
    pub(crate) fn set_bits(&self, off: usize, bits: u32) {
        self.word(off).fetch_or(bits, Ordering::AcqRel);
    }

    /// Clears bits at `off`.
    pub(crate) fn clear_bits(&self, off: usize, bits: u32) {
        self.word(off).fetch_and(!bits, Ordering::AcqRel);
    }

    /// Replaces `cur` with `new` at `off` if it is still `cur`.
    pub(crate) fn compare_exchange(&self, off: usize, cur: u32, new: u32) -> bool {
        self.word(off)
            .compare_exchange(cur, new, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
    }

    /// A full barrier (`smp_mb`), for a store followed by a load of
    /// another word the process stores to.
    pub(crate) fn fence(&self) {
        core::sync::atomic::fence(Ordering::SeqCst);
    }

    /// A copy of the `T` at `off`, whatever the process wrote there.
    pub(crate) fn read<T: UserAbi>(&self, off: usize) -> T {
        assert!(off % 8 == 0 && off + size_of::<T>() <= self.len);
        // SAFETY: in bounds and 8-aligned (checked; the ABI structs need
        // no more); any bit pattern is a `T` (`UserAbi`); volatile, as the
        // process may write concurrently.
        unsafe { ptr::read_volatile(self.addr.add(off).cast::<T>()) }
    }

    /// Writes `v` at `off` (the process reads it after an index store
    /// with release order).
    pub(crate) fn write<T: UserAbi>(&self, off: usize, v: &T) {
        assert!(off % 8 == 0 && off + size_of::<T>() <= self.len);
        // SAFETY: as for `read`.
        unsafe { ptr::write_volatile(self.addr.add(off).cast::<T>(), *v) }
    }
}

impl Drop for SharedRing {
    fn drop(&mut self) {
        // No new mapping from now on; the core frees the entry and its
        // memory (`mmap_free`) once no mapping is being set up. Pages
        // mapped into the process stay until it unmaps them (they are
        // referenced by its page tables).
        // SAFETY: inserted (invariant), removed once, here.
        unsafe { sys::rdma_user_mmap_entry_remove(ptr::addr_of_mut!((*self.entry.as_ptr()).rdma)) };
    }
}

pub(super) fn install_ops(ops: &mut sys::ib_device_ops) {
    ops.mmap = Some(mmap);
    ops.mmap_free = Some(mmap_free);
}

/// # Safety
///
/// Only the RDMA core calls this, as the `mmap` callback of the
/// `ib_device_ops` this file fills in, with the pointers it passes valid for the
/// call and, for an object, one of `D`'s it created through this file.
unsafe extern "C" fn mmap(uctx: *mut sys::ib_ucontext, vma: *mut sys::vm_area_struct) -> c_int {
    from_result(|| {
        // SAFETY: the core's context and the vma being set up; the entry
        // found (a reference held) matches the vma's offset and length.
        let rdma = unsafe { sys::rdma_user_mmap_entry_get(uctx, vma) };
        if rdma.is_null() {
            return Err(EINVAL);
        }
        // SAFETY: every entry of an rsiw context is an `Entry` (`rdma`
        // first), alive while referenced.
        let entry = unsafe { &*rdma.cast::<Entry>() };
        // SAFETY: zeroed vmalloc memory of `len` octets; the core checked
        // the vma's length against the entry's.
        let r = unsafe { sys::rsiw_remap_vmalloc_range(vma, entry.addr.cast()) };
        // SAFETY: the reference taken above.
        unsafe { sys::rdma_user_mmap_entry_put(rdma) };
        if r != 0 {
            return Err(Error::from_errno(r));
        }
        Ok(0)
    })
}

/// # Safety
///
/// Only the RDMA core calls this, as the `mmap_free` callback of the
/// `ib_device_ops` this file fills in, with the pointers it passes valid for the
/// call and, for an object, one of `D`'s it created through this file.
unsafe extern "C" fn mmap_free(rdma: *mut sys::rdma_user_mmap_entry) {
    // SAFETY: the last reference to an `Entry` made by `SharedRing::new`.
    let entry = unsafe { KBox::from_raw(rdma.cast::<Entry>()) };
    // SAFETY: the entry's memory, no longer reachable by the driver (its
    // handle removed the entry) nor by a new mapping.
    unsafe { sys::rsiw_vfree(entry.addr.cast()) };
}
