// SPDX-License-Identifier: GPL-2.0
//! Memory regions at the C boundary: the `ib_mr` objects rsiw allocates,
//! the MR entry points (`get_dma_mr`, `reg_user_mr`, `alloc_mr`,
//! `map_mr_sg`, `dereg_mr`), pinned user memory (`ib_umem`) and the only
//! code that touches registered memory: [`MrPages`] and [`KernelMemory`].
//!
//! Memory validity is the registration contract: a kernel consumer that
//! maps pages to an MR (or uses its PD's DMA MR) guarantees them for the
//! life of the registration, user memory is pinned by `ib_umem` until
//! deregistration. `crate::mr` checks every access against the
//! registration (state, key, bounds) under the MR's lock before calling
//! in here, and deregistration detaches the memory under that lock before
//! the pages are unpinned. Atomics touch their word after the MR's lock is
//! released, under an in-flight pin the end of a registration waits for
//! (see [`WordAt`] and `crate::mr`).

use core::{
    ptr,
    sync::atomic::{AtomicPtr, Ordering},
};

use kernel::{
    error::from_result,
    ffi::{c_int, c_void},
    prelude::*,
    sync::Arc,
};

use super::{
    device::IbDevice,
    object::CoreObj,
    sys,
    zcopy::{self, Segments},
};
use crate::{
    mr::{FastReg, Mr},
    verbs,
};

/// `IB_ACCESS_*` flags, as the consumer passes them.
pub(crate) mod access {
    use super::sys;
    pub(crate) const LOCAL_WRITE: u32 = sys::ib_access_flags_IB_ACCESS_LOCAL_WRITE;
    pub(crate) const REMOTE_WRITE: u32 = sys::ib_access_flags_IB_ACCESS_REMOTE_WRITE;
    pub(crate) const REMOTE_READ: u32 = sys::ib_access_flags_IB_ACCESS_REMOTE_READ;
    pub(crate) const REMOTE_ATOMIC: u32 = sys::ib_access_flags_IB_ACCESS_REMOTE_ATOMIC;
    pub(crate) const MW_BIND: u32 = sys::ib_access_flags_IB_ACCESS_MW_BIND;
    pub(crate) const ZERO_BASED: u32 = sys::ib_access_flags_IB_ZERO_BASED;
    pub(crate) const ON_DEMAND: u32 = sys::ib_access_flags_IB_ACCESS_ON_DEMAND;
    pub(crate) const RELAXED_ORDERING: u32 = sys::ib_access_flags_IB_ACCESS_RELAXED_ORDERING;
    /// RDMA Commit (`IB_WR_FLUSH`) may make placed data visible.
    pub(crate) const FLUSH_GLOBAL: u32 = sys::ib_access_flags_IB_ACCESS_FLUSH_GLOBAL;
    /// RDMA Commit may make placed data persistent (persistent memory only).
    pub(crate) const FLUSH_PERSISTENT: u32 = sys::ib_access_flags_IB_ACCESS_FLUSH_PERSISTENT;
    /// Either flush right: the region accepts RDMA Commit.
    pub(crate) const FLUSH: u32 = FLUSH_GLOBAL | FLUSH_PERSISTENT;
    /// Everything rsiw understands (relaxed ordering is meaningless for a
    /// software device and accepted).
    pub(crate) const SUPPORTED: u32 =
        LOCAL_WRITE | REMOTE_WRITE | REMOTE_READ | REMOTE_ATOMIC | RELAXED_ORDERING | FLUSH;
    /// An rkey is only handed out with one of these.
    pub(crate) const REMOTE: u32 = REMOTE_WRITE | REMOTE_READ | REMOTE_ATOMIC;
}

const PAGE_SIZE: usize = kernel::page::PAGE_SIZE;

/// What an MR's entries are.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum PagesKind {
    /// Addresses from `ib_sg_to_pages` on a virt-DMA device: kernel virtual
    /// addresses of `page_size` blocks (`ib_virt_dma_to_ptr`).
    VirtDma,
    /// `struct page *` of pinned user pages, `PAGE_SIZE` each.
    Page,
}

/// The page list of a registered region. Only this module fills it, from
/// what the kernel handed over (`ib_sg_to_pages`, `ib_umem`).
pub(crate) struct MrPages {
    kind: PagesKind,
    entries: KVVec<usize>,
    page_size: usize,
}

impl MrPages {
    /// An empty list for a fast-register MR with room for `max` pages.
    pub(crate) fn for_fast_reg(max: usize) -> Result<Self> {
        Ok(Self {
            kind: PagesKind::VirtDma,
            entries: KVVec::with_capacity(max, GFP_KERNEL)?,
            page_size: PAGE_SIZE,
        })
    }

    /// Octets the pages cover.
    pub(crate) fn span(&self) -> u64 {
        (self.entries.len() as u64).saturating_mul(self.page_size as u64)
    }

    /// Makes `self` a copy of `other` without allocating (fast-register
    /// commits the mapped list); `ENOSPC` if it does not fit.
    pub(crate) fn copy_from(&mut self, other: &MrPages) -> Result {
        if other.entries.len() > self.entries.capacity() {
            return Err(ENOSPC);
        }
        self.entries.clear();
        for &e in other.entries.iter() {
            self.entries.push_within_capacity(e).map_err(|_| ENOSPC)?;
        }
        self.kind = other.kind;
        self.page_size = other.page_size;
        Ok(())
    }

    /// Copies `src` to the octet at `pos` from the start of the first page.
    pub(crate) fn write(&self, pos: u64, src: &[u8]) -> Result {
        let mut done = 0;
        self.walk(pos, src.len(), |entry, off, n| {
            let chunk = &src[done..done + n];
            match self.kind {
                // SAFETY: `entry` is a kernel virtual address the consumer
                // mapped with `ib_dma_map_sg` on this virt-DMA device and
                // gave to the MR; `walk` keeps `off + n <= page_size`, the
                // block size of the mapping.
                PagesKind::VirtDma => unsafe {
                    ptr::copy_nonoverlapping(chunk.as_ptr(), (entry + off) as *mut u8, n)
                },
                // SAFETY: `entry` is a page pinned by the MR's umem;
                // `off + n <= PAGE_SIZE`.
                PagesKind::Page => unsafe {
                    sys::rsiw_copy_to_page(entry as *mut sys::page, off, chunk.as_ptr().cast(), n)
                },
            }
            done += n;
        })
    }

    /// Copies the octets at `pos` from the start of the first page to `dst`.
    pub(crate) fn read(&self, pos: u64, dst: &mut [u8]) -> Result {
        let mut done = 0;
        let len = dst.len();
        self.walk(pos, len, |entry, off, n| {
            let chunk = &mut dst[done..done + n];
            match self.kind {
                // SAFETY: as in `write`.
                PagesKind::VirtDma => unsafe {
                    ptr::copy_nonoverlapping((entry + off) as *const u8, chunk.as_mut_ptr(), n)
                },
                // SAFETY: as in `write`.
                PagesKind::Page => unsafe {
                    sys::rsiw_copy_from_page(entry as *mut sys::page, off, chunk.as_mut_ptr().cast(), n)
                },
            }
            done += n;
        })
    }

    /// Whether every octet of `len` at `pos` lies in persistent memory
    /// (see `ffi::pmem`); false if the range is not inside the pages.
    pub(crate) fn is_persistent(&self, pos: u64, len: u64) -> bool {
        let Ok(len) = usize::try_from(len) else { return false };
        let mut ok = true;
        let walked = self.walk(pos, len, |entry, off, n| {
            ok &= match self.kind {
                PagesKind::VirtDma => super::pmem::virt_is_persistent(entry + off, n),
                // SAFETY: `entry` is a page pinned by the MR's umem.
                PagesKind::Page => unsafe { super::pmem::page_is_persistent(entry as *mut sys::page) },
            };
        });
        walked.is_ok() && ok
    }

    /// Writes the CPU cache lines of `len` octets at `pos` back to memory
    /// (`arch_wb_cache_pmem`); the caller issues the persistence barrier.
    pub(crate) fn write_back(&self, pos: u64, len: usize) -> Result {
        self.walk(pos, len, |entry, off, n| match self.kind {
            // SAFETY: as in `write`: mapped kernel memory of the MR.
            PagesKind::VirtDma => unsafe { sys::rsiw_wb_cache_pmem((entry + off) as *mut _, n) },
            // SAFETY: as in `write`: a pinned page, `off + n <= PAGE_SIZE`.
            PagesKind::Page => unsafe { sys::rsiw_wb_cache_pmem_page(entry as *mut sys::page, off, n) },
        })
    }

    /// Locates the 8-octet word at `pos` from the start of the first page
    /// (RFC 7306 atomics). `EINVAL` unless the word is 8-octet aligned in
    /// memory (so it never straddles a page), `EFAULT` unless it lies
    /// inside the pages.
    pub(crate) fn word_at(&self, pos: u64) -> Result<WordAt> {
        if pos % WORD != 0 || self.page_size % WORD as usize != 0 {
            return Err(EINVAL);
        }
        let mut piece = None;
        self.walk(pos, WORD as usize, |entry, off, n| piece = Some((entry, off, n)))?;
        let Some((entry, off, n)) = piece else { return Err(EFAULT) };
        if n != WORD_LEN {
            return Err(EFAULT);
        }
        match self.kind {
            PagesKind::VirtDma => {
                let addr = entry.checked_add(off).ok_or(EFAULT)?;
                // SAFETY: as in `write`: the consumer's kernel mapping of
                // the block, `off + 8 <= page_size`; `addr` is 8-aligned
                // (block addresses are page_size aligned, `pos` is 8-aligned).
                let phys = unsafe { sys::rsiw_kaddr_phys(addr as *const c_void) };
                Ok(WordAt { place: Place::Virt(addr as *mut u64), phys })
            }
            PagesKind::Page => {
                let page = entry as *mut sys::page;
                // SAFETY: `entry` is a page pinned by the MR's umem.
                let phys = unsafe { sys::rsiw_page_phys(page) } + off as u64;
                Ok(WordAt { place: Place::Page(page, off), phys })
            }
        }
    }

    /// Splits `len` octets at `pos` into per-page pieces `(entry, offset,
    /// count)`; `EFAULT` unless all of them lie inside the pages.
    fn walk(&self, pos: u64, len: usize, mut f: impl FnMut(usize, usize, usize)) -> Result {
        let end = pos.checked_add(len as u64).ok_or(EFAULT)?;
        if end > self.span() || self.page_size == 0 {
            return Err(EFAULT);
        }
        let (mut pos, mut left) = (pos as usize, len);
        while left > 0 {
            let (idx, off) = (pos / self.page_size, pos % self.page_size);
            let entry = *self.entries.get(idx).ok_or(EFAULT)?;
            let n = left.min(self.page_size - off);
            f(entry, off, n);
            pos += n;
            left -= n;
        }
        Ok(())
    }

    /// Zero-copy TX: appends the `len` octets at `pos` to `out` as page
    /// references and returns the CRC state extended over them (if
    /// asked); `None` (nothing appended) if the range is outside the
    /// pages, a page cannot be spliced, or `out` is full.
    pub(crate) fn ref_pages(
        &self,
        pos: u64,
        len: usize,
        out: &mut Segments,
        mut crc: Option<u32>,
    ) -> Option<Option<u32>> {
        let mark = out.len();
        let mut ok = true;
        let walked = self.walk(pos, len, |entry, off, n| {
            if !ok {
                return;
            }
            let r = match self.kind {
                // SAFETY: as in `write`: mapped kernel memory of the block.
                PagesKind::VirtDma => unsafe { zcopy::ref_kernel_range(entry + off, n, out, crc) },
                // SAFETY: as in `write`: a page pinned by the MR's umem.
                PagesKind::Page => unsafe {
                    zcopy::ref_page_range(entry as *mut sys::page, off, n, out, crc)
                },
            };
            match r {
                Some(c) => crc = c,
                None => ok = false,
            }
        });
        if walked.is_err() || !ok {
            out.truncate(mark);
            return None;
        }
        Some(crc)
    }
}

/// All of kernel memory, addressed by kernel virtual address: a DMA MR on
/// a virt-DMA device (`ib_uses_virt_dma`), whose "DMA addresses" are the
/// consumer's kernel pointers. Only made by [`get_dma_mr`].
pub(crate) struct KernelMemory(());

impl KernelMemory {
    #[cfg(CONFIG_KUNIT = "y")]
    pub(super) fn for_tests() -> Self {
        Self(())
    }

    fn check(addr: u64, len: usize) -> Result<usize> {
        let addr = usize::try_from(addr).map_err(|_| EFAULT)?;
        // Never address the zero page or wrap around.
        if addr < PAGE_SIZE || addr.checked_add(len).is_none() {
            return Err(EFAULT);
        }
        Ok(addr)
    }

    pub(crate) fn write(&self, addr: u64, src: &[u8]) -> Result {
        let addr = Self::check(addr, src.len())?;
        // SAFETY: a DMA MR lets its consumer name any kernel memory it owns
        // by address (the contract of `ib_get_dma_mr`/`local_dma_lkey` on a
        // virt-DMA device, as for siw and rxe); the address is non-null
        // and does not wrap.
        unsafe { ptr::copy_nonoverlapping(src.as_ptr(), addr as *mut u8, src.len()) };
        Ok(())
    }

    pub(crate) fn read(&self, addr: u64, dst: &mut [u8]) -> Result {
        let addr = Self::check(addr, dst.len())?;
        // SAFETY: as in `write`.
        unsafe { ptr::copy_nonoverlapping(addr as *const u8, dst.as_mut_ptr(), dst.len()) };
        Ok(())
    }

    /// Zero-copy TX: as [`MrPages::ref_pages`] for `len` octets at kernel
    /// address `addr` (slab memory, e.g. from `kmalloc`, is refused: TCP
    /// cannot splice it, the engine copies it instead).
    pub(crate) fn ref_pages(&self, addr: u64, len: usize, out: &mut Segments, crc: Option<u32>) -> Option<Option<u32>> {
        let addr = Self::check(addr, len).ok()?;
        // SAFETY: as in `write`.
        unsafe { zcopy::ref_kernel_range(addr, len, out, crc) }
    }

    /// Locates the 8-octet word at `addr`; `EINVAL` unless `addr` is
    /// 8-aligned (see [`MrPages::word_at`]).
    pub(crate) fn word_at(&self, addr: u64) -> Result<WordAt> {
        let addr = Self::check(addr, WORD_LEN)?;
        if addr % WORD_LEN != 0 {
            return Err(EINVAL);
        }
        // SAFETY: as in `write`; `addr` is non-null and does not wrap.
        let phys = unsafe { sys::rsiw_kaddr_phys(addr as *const c_void) };
        Ok(WordAt { place: Place::Virt(addr as *mut u64), phys })
    }
}

/// Where a located word is.
enum Place {
    /// A kernel virtual address (DMA MR, fast-register MR).
    Virt(*mut u64),
    /// A pinned user page and the word's offset in it.
    Page(*mut sys::page, usize),
}

/// An 8-octet aligned word of registered memory, located under the MR's
/// lock and touched after it is released: `crate::mr` holds an in-flight
/// pin on the MR from locating the word until [`WordAt::with`] returns,
/// and whatever ends the registration (invalidation, fast-register,
/// deregistration) waits for the pins to drain before the consumer may
/// reuse the memory or the umem is released. Not `Send` (raw pointers):
/// used on the thread that located it, with local interrupts off.
pub(crate) struct WordAt {
    place: Place,
    phys: u64,
}

impl WordAt {
    /// Runs `f` on the word in place.
    pub(crate) fn with<R>(self, f: impl FnOnce(&mut Word<'_>) -> R) -> R {
        match self.place {
            // SAFETY: located by `word_at` (8-aligned, inside the mapping
            // the registration covers); the caller's in-flight pin keeps
            // the registration, hence the memory, for the call.
            Place::Virt(ptr) => f(&mut unsafe { Word::new(ptr, self.phys) }),
            // SAFETY: the page is pinned by the MR's umem, which the
            // in-flight pin keeps (deregistration drains the pins before
            // the umem is released); `off + 8 <= PAGE_SIZE`. Mapped and
            // unmapped around `f` on this thread (no sleeping inside: the
            // caller has interrupts off).
            Place::Page(page, off) => unsafe {
                let base = sys::rsiw_kmap_local_page(page).cast::<u8>();
                let r = f(&mut Word::new(base.add(off).cast::<u64>(), self.phys));
                sys::rsiw_kunmap_local(base.cast());
                r
            },
        }
    }
}

/// Octets of an RFC 7306 atomic operand.
const WORD: u64 = 8;
const WORD_LEN: usize = 8;

/// One 8-octet aligned word of registered memory, in place: the target of
/// an RFC 7306 atomic. Loads and stores are single aligned 64-bit accesses
/// (never torn for a CPU reading the word concurrently).
///
/// # Invariants
///
/// `ptr` is 8-aligned and valid for reads and writes for `'a`; `phys` is
/// the physical address of the word.
pub(crate) struct Word<'a> {
    ptr: *mut u64,
    phys: u64,
    _life: core::marker::PhantomData<&'a mut u64>,
}

impl Word<'_> {
    /// # Safety
    ///
    /// `ptr` must be 8-aligned and valid for reads and writes while the
    /// `Word` exists; `phys` its physical address.
    unsafe fn new(ptr: *mut u64, phys: u64) -> Self {
        Self { ptr, phys, _life: core::marker::PhantomData }
    }

    /// The physical address (the key of the device's atomic lock table).
    pub(crate) fn phys(&self) -> u64 {
        self.phys
    }

    /// The value, in host order.
    pub(crate) fn load(&self) -> u64 {
        // SAFETY: by the invariant. Volatile: the memory belongs to the
        // consumer and may change behind the compiler's back.
        unsafe { ptr::read_volatile(self.ptr) }
    }

    /// Stores `v` (host order).
    pub(crate) fn store(&mut self, v: u64) {
        // SAFETY: by the invariant.
        unsafe { ptr::write_volatile(self.ptr, v) }
    }
}

/// Pinned user memory (`ib_umem`), released on drop (may sleep: only
/// dropped in process context, by `dereg_mr` or a failed registration).
struct Umem(ptr::NonNull<sys::ib_umem>);

// SAFETY: the umem is owned; `ib_umem_release` may run on any thread.
unsafe impl Send for Umem {}
// SAFETY: shared references only read it.
unsafe impl Sync for Umem {}

impl Umem {
    fn get(dev: *mut sys::ib_device, start: u64, len: u64, access: u32) -> Result<Self> {
        let start = usize::try_from(start).map_err(|_| EINVAL)?;
        let len = usize::try_from(len).map_err(|_| EINVAL)?;
        // SAFETY: `dev` is a live device; the call pins the pages of the
        // current process's range or returns an ERR_PTR.
        let umem = unsafe { sys::rsiw_umem_get(dev, start as _, len, access as c_int) };
        if (umem as usize) > usize::MAX - 4095 {
            return Err(Error::from_errno(umem as isize as c_int));
        }
        ptr::NonNull::new(umem).map(Self).ok_or(ENOMEM)
    }

    /// The pinned pages, in order.
    fn pages(&self, len: u64) -> Result<MrPages> {
        // SAFETY: the umem is alive.
        let offset = unsafe { sys::rsiw_umem_offset(self.0.as_ptr()) } as u64;
        let n = offset.checked_add(len).ok_or(EINVAL)?.div_ceil(PAGE_SIZE as u64);
        let n = usize::try_from(n).map_err(|_| EINVAL)?;
        let mut entries = KVVec::<usize>::from_elem(0, n, GFP_KERNEL)?;
        // SAFETY: `entries` has room for `n` pointers; the umem is alive.
        let got = unsafe {
            sys::rsiw_umem_pages(self.0.as_ptr(), entries.as_mut_ptr().cast(), n)
        };
        if got != n {
            return Err(EFAULT);
        }
        Ok(MrPages { kind: PagesKind::Page, entries, page_size: PAGE_SIZE })
    }

    fn offset(&self) -> u64 {
        // SAFETY: the umem is alive.
        unsafe { sys::rsiw_umem_offset(self.0.as_ptr()) as u64 }
    }
}

impl Drop for Umem {
    fn drop(&mut self) {
        // SAFETY: we own the umem; nothing refers to its pages any more
        // (the MR's memory was detached first).
        unsafe { sys::ib_umem_release(self.0.as_ptr()) };
    }
}

/// The driver part of an `ib_mr`.
pub(crate) struct MrHandle {
    mr: Arc<Mr>,
    /// Keeps user pages pinned until deregistration.
    _umem: Option<Umem>,
    /// The page list `map_mr_sg` fills, while it runs (for `set_page`).
    mapping: AtomicPtr<MrPages>,
}

type MrObj = CoreObj<sys::ib_mr, MrHandle>;
type PdObj = CoreObj<sys::ib_pd, verbs::Pd>;

/// An `ib_mr` of ours, borrowed: what the QP gets from an `IB_WR_REG_MR`.
#[repr(transparent)]
pub(crate) struct IbMr(kernel::types::Opaque<sys::ib_mr>);

impl IbMr {
    /// # Safety
    ///
    /// `mr` must be an `ib_mr` of an rsiw device, alive for `'a`.
    pub(crate) unsafe fn from_raw<'a>(mr: *mut sys::ib_mr) -> &'a Self {
        // SAFETY: transparent wrapper; validity per the contract.
        unsafe { &*mr.cast::<Self>() }
    }

    /// The MR.
    pub(crate) fn mr(&self) -> &Arc<Mr> {
        // SAFETY: by the type invariant the `ib_mr` is ours and alive, so
        // its handle is initialised.
        unsafe { &MrObj::data(self.0.get()).mr }
    }

    /// The fast-register request of an `IB_WR_REG_MR` for this MR: iova
    /// and length as `ib_map_mr_sg` (and the consumer) left them, the new
    /// key and access from the work request.
    pub(crate) fn fast_reg(&self, key: u32, access: u32) -> FastReg {
        // SAFETY: the `ib_mr` is alive; plain fields the consumer owns and
        // does not change while the WR is being posted.
        let (iova, length) = unsafe { ((*self.0.get()).iova, (*self.0.get()).length) };
        FastReg { key, iova, length, access }
    }
}

fn pd_id(pd: *mut sys::ib_pd) -> u32 {
    // SAFETY: the core passes one of our live, initialised PDs.
    unsafe { PdObj::data(pd).id() }
}

/// Wraps `mr` in a new `ib_mr`, then publishes it in the device's STag
/// table and sets lkey (and rkey, with remote access) to its STag. On
/// failure nothing is published and the MR is accounted back.
fn publish(
    dev: &crate::device::Device,
    mr: Arc<Mr>,
    umem: Option<Umem>,
    remote: bool,
) -> Result<*mut sys::ib_mr> {
    let handle = MrHandle { mr: mr.clone(), _umem: umem, mapping: AtomicPtr::new(ptr::null_mut()) };
    let ib = MrObj::new_boxed(handle).inspect_err(|_| verbs::discard_mr(dev))?;
    match verbs::publish_mr(dev, &mr) {
        Ok(stag) => {
            // SAFETY: `ib` is a fresh zeroed `ib_mr` no one else sees yet;
            // the core fills in device, pd and type after we return.
            unsafe {
                (*ib).lkey = stag;
                (*ib).rkey = if remote { stag } else { 0 };
            }
            Ok(ib)
        }
        Err(e) => {
            // SAFETY: never published; ours alone.
            unsafe { MrObj::free_boxed(ib) };
            verbs::discard_mr(dev);
            Err(e)
        }
    }
}

fn to_ptr(result: Result<*mut sys::ib_mr>) -> *mut sys::ib_mr {
    result.unwrap_or_else(super::device::err_ptr)
}

pub(super) unsafe extern "C" fn get_dma_mr(pd: *mut sys::ib_pd, access: c_int) -> *mut sys::ib_mr {
    // SAFETY: the core passes one of our live PDs, whose device is ours.
    let dev = unsafe { IbDevice::from_raw((*pd).device) };
    let access = access as u32;
    to_ptr(
        verbs::get_dma_mr(dev.data(), pd_id(pd), access, KernelMemory(()))
            .and_then(|mr| publish(dev.data(), mr, None, access & access::REMOTE != 0)),
    )
}

pub(super) unsafe extern "C" fn reg_user_mr(
    pd: *mut sys::ib_pd,
    start: u64,
    length: u64,
    virt_addr: u64,
    access: c_int,
    _dmah: *mut sys::ib_dmah,
    _udata: *mut sys::ib_udata,
) -> *mut sys::ib_mr {
    // SAFETY: the core passes one of our live PDs, whose device is ours.
    let (ib_dev, dev) = unsafe { ((*pd).device, IbDevice::from_raw((*pd).device)) };
    let access = access as u32;
    to_ptr((|| {
        verbs::check_user_mr(dev.data(), length, access)?;
        let umem = Umem::get(ib_dev, start, length, access)?;
        let pages = umem.pages(length)?;
        let offset = umem.offset();
        let mr = verbs::reg_user_mr(dev.data(), pd_id(pd), virt_addr, length, offset, access, pages)?;
        publish(dev.data(), mr, Some(umem), access & access::REMOTE != 0)
    })())
}

pub(super) unsafe extern "C" fn alloc_mr(
    pd: *mut sys::ib_pd,
    mr_type: sys::ib_mr_type,
    max_num_sg: u32,
) -> *mut sys::ib_mr {
    // SAFETY: the core passes one of our live PDs, whose device is ours.
    let dev = unsafe { IbDevice::from_raw((*pd).device) };
    if mr_type != sys::ib_mr_type_IB_MR_TYPE_MEM_REG {
        return to_ptr(Err(EOPNOTSUPP));
    }
    to_ptr(
        verbs::alloc_mr(dev.data(), pd_id(pd), max_num_sg)
            .and_then(|mr| publish(dev.data(), mr, None, true)),
    )
}

/// `ib_sg_to_pages` callback: appends one page address to the list
/// `map_mr_sg` is filling.
unsafe extern "C" fn set_page(ib: *mut sys::ib_mr, addr: u64) -> c_int {
    // SAFETY: called from `ib_sg_to_pages` inside our `map_mr_sg` on this
    // live MR.
    let h = unsafe { MrObj::data(ib) };
    let pages = h.mapping.load(Ordering::Relaxed);
    if pages.is_null() {
        return EINVAL.to_errno();
    }
    // SAFETY: `map_mr_sg` set `mapping` to the list it holds exclusively
    // (under the MR's lock, on this thread) for the duration of the call.
    let pages = unsafe { &mut *pages };
    match pages.entries.push_within_capacity(addr as usize) {
        Ok(()) => 0,
        Err(_) => ENOMEM.to_errno(),
    }
}

pub(super) unsafe extern "C" fn map_mr_sg(
    ib: *mut sys::ib_mr,
    sg: *mut sys::scatterlist,
    sg_nents: c_int,
    sg_offset: *mut u32,
) -> c_int {
    // SAFETY: `ib` is one of our live MRs (the core only calls its own
    // device's ops); it has already set `ib->page_size`.
    let (h, page_size) = unsafe { (MrObj::data(ib), (*ib).page_size as usize) };
    if !page_size.is_power_of_two() {
        return EINVAL.to_errno();
    }
    from_result(|| {
        h.mr.map_fast_reg(|pages| {
            pages.kind = PagesKind::VirtDma;
            pages.page_size = page_size;
            pages.entries.clear();
            h.mapping.store(ptr::from_mut(pages), Ordering::Relaxed);
            // SAFETY: the core's arguments are passed through; `set_page`
            // only runs during the call, with `mapping` set.
            let n = unsafe { sys::ib_sg_to_pages(ib, sg, sg_nents, sg_offset, Some(set_page)) };
            h.mapping.store(ptr::null_mut(), Ordering::Relaxed);
            // SAFETY: `ib_sg_to_pages` set `iova` to the first octet's address.
            let first = unsafe { (*ib).iova } as usize & (page_size - 1);
            Ok((n, first as u64))
        })
    })
}

pub(super) unsafe extern "C" fn dereg_mr(ib: *mut sys::ib_mr, _udata: *mut sys::ib_udata) -> c_int {
    // SAFETY: `ib` is one of ours; its device is alive. The core calls
    // this once and never uses `ib` after.
    let dev = unsafe { IbDevice::from_raw((*ib).device) };
    // SAFETY: as above.
    let h = unsafe { MrObj::data(ib) };
    // Out of the table and detached from its memory first: no copy runs
    // or starts after this, so the umem can be released.
    verbs::dereg_mr(dev.data(), &h.mr);
    // SAFETY: as above; drops the handle (and releases the umem).
    unsafe { MrObj::free_boxed(ib) };
    0
}

/// Kernel consumers' MR verbs for the self-tests.
#[cfg(CONFIG_KUNIT = "y")]
pub(crate) mod testing {
    use super::*;
    use crate::ffi::device::testing::Found;

    /// A PD from `ib_alloc_pd`.
    pub(crate) struct KPd(*mut sys::ib_pd);

    fn is_err<T>(p: *mut T) -> bool {
        p.is_null() || (p as usize) > usize::MAX - 4095
    }

    impl KPd {
        pub(crate) fn alloc(dev: &Found, unsafe_global_rkey: bool) -> Result<Self> {
            let flags = if unsafe_global_rkey { sys::ib_pd_flags_IB_PD_UNSAFE_GLOBAL_RKEY } else { 0 };
            // SAFETY: device held by `dev`; static name.
            let pd = unsafe { sys::__ib_alloc_pd(dev.raw(), flags, c"rsiw_kunit".as_ptr().cast()) };
            if is_err(pd) {
                return Err(ENOMEM);
            }
            Ok(Self(pd))
        }

        pub(crate) fn raw(&self) -> *mut sys::ib_pd {
            self.0
        }

        pub(crate) fn id(&self) -> u32 {
            pd_id(self.0)
        }

        pub(crate) fn local_dma_lkey(&self) -> u32 {
            // SAFETY: the PD is alive.
            unsafe { (*self.0).local_dma_lkey }
        }

        pub(crate) fn unsafe_global_rkey(&self) -> u32 {
            // SAFETY: the PD is alive.
            unsafe { (*self.0).unsafe_global_rkey }
        }
    }

    impl Drop for KPd {
        fn drop(&mut self) {
            // SAFETY: allocated by `alloc`, not used after.
            unsafe { sys::ib_dealloc_pd_user(self.0, ptr::null_mut()) };
        }
    }

    /// A fast-register MR from `ib_alloc_mr`.
    pub(crate) struct KMr(*mut sys::ib_mr);

    impl KMr {
        pub(crate) fn alloc(pd: &KPd, max_num_sg: u32) -> Result<Self> {
            // SAFETY: the PD is alive.
            let mr = unsafe { sys::ib_alloc_mr(pd.0, sys::ib_mr_type_IB_MR_TYPE_MEM_REG, max_num_sg) };
            if is_err(mr) {
                return Err(Error::from_errno(mr as isize as c_int));
            }
            Ok(Self(mr))
        }

        pub(crate) fn raw(&self) -> *mut sys::ib_mr {
            self.0
        }

        pub(crate) fn ib(&self) -> &IbMr {
            // SAFETY: alive until drop.
            unsafe { IbMr::from_raw(self.0) }
        }

        pub(crate) fn keys(&self) -> (u32, u32) {
            // SAFETY: alive.
            unsafe { ((*self.0).lkey, (*self.0).rkey) }
        }

        pub(crate) fn iova_len(&self) -> (u64, u64) {
            // SAFETY: alive.
            unsafe { ((*self.0).iova, (*self.0).length) }
        }

        /// `ib_update_fast_reg_key`: the consumer's new key byte.
        pub(crate) fn update_key(&self, key: u8) {
            // SAFETY: alive; the consumer owns the key fields.
            unsafe {
                let m = &mut *self.0;
                m.lkey = (m.lkey & 0xFFFF_FF00) | u32::from(key);
                m.rkey = (m.rkey & 0xFFFF_FF00) | u32::from(key);
            }
        }

        /// `ib_dma_map_sg` + `ib_map_mr_sg` of one buffer; returns the
        /// number of sg entries mapped (or the error).
        pub(crate) fn map_buf(&self, dev: &Found, buf: &mut [u8], page_size: u32) -> Result<c_int> {
            let mut sg = sys::scatterlist::default();
            // SAFETY: `sg` and `buf` are valid for the call; on a virt-DMA
            // device mapping only stores the kernel address.
            unsafe {
                sys::rsiw_sg_init_one(&mut sg, buf.as_mut_ptr().cast(), buf.len() as u32);
                if sys::rsiw_ib_dma_map_sg(dev.raw(), &mut sg, 1) != 1 {
                    return Err(EIO);
                }
                let n = sys::ib_map_mr_sg(self.0, &mut sg, 1, ptr::null_mut(), page_size);
                sys::rsiw_ib_dma_unmap_sg(dev.raw(), &mut sg, 1);
                if n < 0 { Err(Error::from_errno(n)) } else { Ok(n) }
            }
        }
    }

    impl Drop for KMr {
        fn drop(&mut self) {
            // SAFETY: allocated by `alloc`, not used after.
            unsafe { sys::ib_dereg_mr_user(self.0, ptr::null_mut()) };
        }
    }

    pub(crate) fn uses_virt_dma(dev: &Found) -> bool {
        // SAFETY: device held.
        unsafe { sys::rsiw_ib_uses_virt_dma(dev.raw()) }
    }

    /// An `ib_alloc_mr` of a type rsiw does not support.
    pub(crate) fn alloc_mr_type_err(pd: &KPd) -> c_int {
        // SAFETY: the PD is alive; a success is deregistered at once.
        unsafe {
            let mr = sys::ib_alloc_mr(pd.0, sys::ib_mr_type_IB_MR_TYPE_SG_GAPS, 4);
            if is_err(mr) {
                return mr as isize as c_int;
            }
            sys::ib_dereg_mr_user(mr, ptr::null_mut());
            0
        }
    }
}
