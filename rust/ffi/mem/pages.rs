// SPDX-License-Identifier: GPL-2.0
//! Registered memory: pinned user memory (`ib_umem`) and the only code
//! that touches registered memory, [`MrPages`] and [`KernelMemory`]; the
//! `IB_ACCESS_*` flags. The MR entry points are `ffi::ib::mr`.
//!
//! Memory validity is the registration contract: a kernel consumer that
//! maps pages to an MR (or uses its PD's DMA MR) guarantees them for the
//! life of the registration, user memory is pinned by `ib_umem` until
//! deregistration (for writing only if the registration grants a write
//! right: every write path here refuses pages pinned read-only, see
//! [`MrPages`]). The caller (the driver's MR) checks every access against
//! the registration (state, key, PD, rights, bounds, and the registration
//! an earlier validation named) under the MR's lock before calling in
//! here, and deregistration detaches the memory under that lock before
//! the pages are unpinned. Atomics touch their word after the MR's lock is
//! released, under an in-flight pin the end of a registration waits for
//! (see [`WordAt`]).

use core::{mem::MaybeUninit, ptr};

use kernel::{
    ffi::{c_int, c_void},
    prelude::*,
};

use super::super::{
    net::zcopy::{self, Segments},
    sys,
};

/// `IB_ACCESS_*` flags, as the consumer passes them.
pub(crate) mod access {
    use super::sys;
    pub(crate) const LOCAL_WRITE: u32 = sys::ib_access_flags_IB_ACCESS_LOCAL_WRITE;
    pub(crate) const REMOTE_WRITE: u32 = sys::ib_access_flags_IB_ACCESS_REMOTE_WRITE;
    pub(crate) const REMOTE_READ: u32 = sys::ib_access_flags_IB_ACCESS_REMOTE_READ;
    pub(crate) const REMOTE_ATOMIC: u32 = sys::ib_access_flags_IB_ACCESS_REMOTE_ATOMIC;
    pub(crate) const MW_BIND: u32 = sys::ib_access_flags_IB_ACCESS_MW_BIND;
    #[cfg(rsiw_kunit)]
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
pub(in crate::ffi) enum PagesKind {
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
    /// Whether the memory may be written: user pages only if the umem
    /// pinned them for writing (`FOLL_WRITE`, which the core asks for only
    /// when the registration grants a write right). Every write path of
    /// this list ([`MrPages::write`], a span located for a write, an
    /// atomic's word) refuses otherwise, whatever its caller checked: a
    /// page pinned read-only may be a file's page cache the process can
    /// only read.
    writable: bool,
}

impl MrPages {
    /// Empties the list for a new mapping of `kind` pages of `page_size`.
    pub(in crate::ffi) fn reset(&mut self, kind: PagesKind, page_size: usize) {
        self.kind = kind;
        self.page_size = page_size;
        // Only fast-register lists are refilled: kernel memory.
        self.writable = true;
        self.entries.clear();
    }

    /// Appends one page address; `ENOMEM` past the list's capacity.
    pub(in crate::ffi) fn push_entry(&mut self, addr: usize) -> Result {
        self.entries.push_within_capacity(addr).map_err(|_| ENOMEM)
    }

    /// An empty list for a fast-register MR with room for `max` pages.
    pub(crate) fn for_fast_reg(max: usize) -> Result<Self> {
        Ok(Self {
            kind: PagesKind::VirtDma,
            entries: KVVec::with_capacity(max, GFP_KERNEL_ACCOUNT)?,
            page_size: PAGE_SIZE,
            // Kernel memory the consumer mapped (`ib_sg_to_pages`).
            writable: true,
        })
    }

    /// Whether the pages may be written (see the field).
    #[cfg(rsiw_kunit)]
    pub(crate) fn writable(&self) -> bool {
        self.writable
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
        self.writable = other.writable;
        Ok(())
    }

    /// Copies `src` to the octet at `pos` from the start of the first page.
    /// `EACCES` if the pages may not be written.
    pub(crate) fn write(&self, pos: u64, src: &[u8]) -> Result {
        if !self.writable {
            return Err(EACCES);
        }
        let mut done = 0;
        self.walk(pos, src.len(), |entry, off, n| {
            // SAFETY: `entry` is an entry of this list (a kernel virtual
            // address the consumer mapped on this virt-DMA device, or a
            // page the MR's umem pinned for writing: `writable` is checked
            // above); `walk` keeps `off + n` within its block.
            unsafe { piece_write(self.kind, entry, off, &src[done..done + n]) };
            done += n;
        })
    }

    /// Copies the octets at `pos` from the start of the first page to `dst`.
    pub(crate) fn read(&self, pos: u64, dst: &mut [u8]) -> Result {
        let mut done = 0;
        let len = dst.len();
        self.walk(pos, len, |entry, off, n| {
            // SAFETY: as in `write`.
            unsafe { piece_read(self.kind, entry, off, &mut dst[done..done + n]) };
            done += n;
        })
    }

    /// Whether every octet of `len` at `pos` lies in persistent memory
    /// (see `ffi::pmem`); false if the range is not inside the pages.
    pub(crate) fn is_persistent(&self, pos: u64, len: u64) -> bool {
        let Ok(len) = usize::try_from(len) else {
            return false;
        };
        let mut ok = true;
        let walked = self.walk(pos, len, |entry, off, n| {
            ok &= match self.kind {
                PagesKind::VirtDma => super::pmem::virt_is_persistent(entry + off, n),
                // SAFETY: `entry` is a page pinned by the MR's umem.
                PagesKind::Page => unsafe {
                    super::pmem::page_is_persistent(entry as *mut sys::page)
                },
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
            PagesKind::Page => unsafe {
                sys::rsiw_wb_cache_pmem_page(entry as *mut sys::page, off, n)
            },
        })
    }

    /// Locates the 8-octet word at `pos` from the start of the first page
    /// (RFC 7306 atomics). `EINVAL` unless the word is 8-octet aligned in
    /// memory (so it never straddles a page), `EFAULT` unless it lies
    /// inside the pages.
    /// `EACCES` if the pages may not be written (an atomic may store).
    pub(crate) fn word_at(&self, pos: u64) -> Result<WordAt> {
        if !self.writable {
            return Err(EACCES);
        }
        if pos % WORD != 0 || self.page_size % WORD as usize != 0 {
            return Err(EINVAL);
        }
        let mut piece = None;
        self.walk(pos, WORD as usize, |entry, off, n| {
            piece = Some((entry, off, n))
        })?;
        let Some((entry, off, n)) = piece else {
            return Err(EFAULT);
        };
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
                Ok(WordAt {
                    place: Place::Virt(addr as *mut u64),
                    phys,
                })
            }
            PagesKind::Page => {
                let page = entry as *mut sys::page;
                // SAFETY: `entry` is a page pinned by the MR's umem.
                let phys = unsafe { sys::rsiw_page_phys(page) } + off as u64;
                Ok(WordAt {
                    place: Place::Page(page, off),
                    phys,
                })
            }
        }
    }

    /// Locates the `len` octets at `pos` from the start of the first page
    /// for a copy after the MR's lock is released (see [`SpanAt`]):
    /// `EFAULT` unless they lie inside the pages, `E2BIG` if they span more
    /// than [`SPAN_PIECES`] pages (the caller copies under its lock then).
    /// The caller's `span` is filled in place: it is a few hundred
    /// octets, and the copy of a small message should not move it around.
    /// A span located for a write of pages that may not be written is
    /// `EACCES`; one located for a read can only read.
    pub(crate) fn span_at(&self, pos: u64, len: usize, write: bool, span: &mut SpanAt) -> Result {
        if write && !self.writable {
            return Err(EACCES);
        }
        span.reset(self.kind, len, write);
        let mut fits = true;
        self.walk(pos, len, |entry, off, n| fits &= span.push(entry, off, n))?;
        if fits {
            Ok(())
        } else {
            Err(E2BIG)
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
    /// Made only by the entry points that hand it to the driver.
    pub(in crate::ffi) fn new() -> Self {
        Self(())
    }

    #[cfg(rsiw_kunit)]
    pub(in crate::ffi) fn for_tests() -> Self {
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
        // and does not wrap. Only its consumer gets here: the MR's every
        // access is checked for its PD (ids unique among the live PDs) and
        // its registration under the MR's lock first (`mem::mr::Grant`).
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
    pub(crate) fn ref_pages(
        &self,
        addr: u64,
        len: usize,
        out: &mut Segments,
        crc: Option<u32>,
    ) -> Option<Option<u32>> {
        let addr = Self::check(addr, len).ok()?;
        // SAFETY: as in `write`.
        unsafe { zcopy::ref_kernel_range(addr, len, out, crc) }
    }

    /// Locates `len` octets at `addr` for a copy (see [`MrPages::span_at`]).
    pub(crate) fn span_at(&self, addr: u64, len: usize, write: bool, span: &mut SpanAt) -> Result {
        let addr = Self::check(addr, len)?;
        span.reset(PagesKind::VirtDma, len, write);
        span.push(addr, 0, len);
        Ok(())
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
        Ok(WordAt {
            place: Place::Virt(addr as *mut u64),
            phys,
        })
    }
}

/// Copies `chunk` to `off` octets into the block `entry` names.
///
/// # Safety
///
/// `entry` is a live entry of kind `kind` (a mapped kernel virtual address
/// of a virt-DMA block, or a `struct page` pinned for writing), and
/// `off + chunk.len()` lies within its block. (The list's `writable` is
/// what says a user page was pinned for writing: its write paths check it
/// before they call this.)
unsafe fn piece_write(kind: PagesKind, entry: usize, off: usize, chunk: &[u8]) {
    match kind {
        // SAFETY: per the contract, the range is mapped kernel memory.
        PagesKind::VirtDma => unsafe {
            ptr::copy_nonoverlapping(chunk.as_ptr(), (entry + off) as *mut u8, chunk.len())
        },
        // SAFETY: per the contract, a page pinned for writing,
        // `off + len <= PAGE_SIZE`.
        PagesKind::Page => unsafe {
            sys::rsiw_copy_to_page(
                entry as *mut sys::page,
                off,
                chunk.as_ptr().cast(),
                chunk.len(),
            )
        },
    }
}

/// Copies `off` octets into the block `entry` names into `chunk`.
///
/// # Safety
///
/// As [`piece_write`].
unsafe fn piece_read(kind: PagesKind, entry: usize, off: usize, chunk: &mut [u8]) {
    match kind {
        // SAFETY: per the contract.
        PagesKind::VirtDma => unsafe {
            ptr::copy_nonoverlapping((entry + off) as *const u8, chunk.as_mut_ptr(), chunk.len())
        },
        // SAFETY: per the contract.
        PagesKind::Page => unsafe {
            sys::rsiw_copy_from_page(
                entry as *mut sys::page,
                off,
                chunk.as_mut_ptr().cast(),
                chunk.len(),
            )
        },
    }
}

/// Per-page pieces a located span holds at most: 64 KiB that does not
/// start on a page boundary, in 4 KiB pages.
pub(crate) const SPAN_PIECES: usize = 17;

/// A located span of registered memory, for a copy in or out without the
/// MR's lock (copies of one MR from several CPUs run in parallel). Same
/// contract as [`WordAt`]: the caller checked the access under the MR's
/// lock and holds an in-flight pin on the MR from locating the span until
/// the copy returns, with local interrupts off; whatever ends the
/// registration waits for the pins to drain. Not `Send`.
pub(crate) struct SpanAt {
    kind: PagesKind,
    /// `(entry, offset, count)` per page, as [`MrPages::walk`] gives them;
    /// the first `n` are set. Left uninitialised beyond them: a span is
    /// made for every copy, most of one or two pieces, and clearing all of
    /// them was the larger part of a small copy's cost.
    pieces: [MaybeUninit<(usize, usize, usize)>; SPAN_PIECES],
    n: usize,
    len: usize,
    /// Located for a write (of memory that may be written).
    write: bool,
    _not_send: core::marker::PhantomData<*mut u8>,
}

impl SpanAt {
    /// A span of nothing, for [`MrPages::span_at`] to fill.
    pub(crate) fn new() -> Self {
        Self {
            kind: PagesKind::VirtDma,
            pieces: [const { MaybeUninit::uninit() }; SPAN_PIECES],
            n: 0,
            len: 0,
            write: false,
            _not_send: core::marker::PhantomData,
        }
    }

    fn reset(&mut self, kind: PagesKind, len: usize, write: bool) {
        self.kind = kind;
        self.n = 0;
        self.len = len;
        self.write = write;
    }

    /// Appends a piece; false if there is no room.
    fn push(&mut self, entry: usize, off: usize, n: usize) -> bool {
        match self.pieces.get_mut(self.n) {
            Some(p) => {
                p.write((entry, off, n));
                self.n += 1;
                true
            }
            None => false,
        }
    }

    fn pieces(&self) -> &[(usize, usize, usize)] {
        let set = self.pieces.get(..self.n).unwrap_or(&[]);
        // SAFETY: `push` wrote every piece below `n` (and `n` never exceeds
        // the array); `MaybeUninit<T>` has the layout of `T`.
        unsafe { &*(core::ptr::from_ref(set) as *const [(usize, usize, usize)]) }
    }

    /// Copies `src` (exactly the span's length) into the span; `EACCES`
    /// unless it was located for a write.
    pub(crate) fn write(&self, src: &[u8]) -> Result {
        if !self.write {
            return Err(EACCES);
        }
        if src.len() != self.len {
            return Err(EINVAL);
        }
        let mut done = 0;
        for &(entry, off, n) in self.pieces() {
            let chunk = src.get(done..done + n).ok_or(EINVAL)?;
            // SAFETY: a piece `span_at` located inside the registration's
            // mapping (as `MrPages::write` checks it), for a write (so of
            // pages that may be written: checked above); the caller's
            // in-flight pin keeps the registration, hence the memory.
            unsafe { piece_write(self.kind, entry, off, chunk) };
            done += n;
        }
        Ok(())
    }

    /// Copies the span into `dst` (exactly the span's length).
    pub(crate) fn read(&self, dst: &mut [u8]) -> Result {
        if dst.len() != self.len {
            return Err(EINVAL);
        }
        let mut done = 0;
        for &(entry, off, n) in self.pieces() {
            let chunk = dst.get_mut(done..done + n).ok_or(EINVAL)?;
            // SAFETY: as in `write`.
            unsafe { piece_read(self.kind, entry, off, chunk) };
            done += n;
        }
        Ok(())
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
/// lock and touched after it is released: the caller holds an in-flight
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
        Self {
            ptr,
            phys,
            _life: core::marker::PhantomData,
        }
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
pub(crate) struct Umem(ptr::NonNull<sys::ib_umem>);

// SAFETY: the umem is owned; `ib_umem_release` may run on any thread.
unsafe impl Send for Umem {}
// SAFETY: shared references only read it.
unsafe impl Sync for Umem {}

impl Umem {
    pub(in crate::ffi) fn get(
        dev: *mut sys::ib_device,
        start: u64,
        len: u64,
        access: u32,
    ) -> Result<Self> {
        let start = usize::try_from(start).map_err(|_| EINVAL)?;
        let len = usize::try_from(len).map_err(|_| EINVAL)?;
        // SAFETY: `dev` is a live device; the call pins the pages of the
        // current process's range or returns an ERR_PTR.
        let umem =
            unsafe { sys::rsiw_umem_get(dev, start as kernel::ffi::c_ulong, len, access as c_int) };
        if (umem as usize) > usize::MAX - 4095 {
            return Err(Error::from_errno(umem as isize as c_int));
        }
        ptr::NonNull::new(umem).map(Self).ok_or(ENOMEM)
    }

    /// The pinned pages, in order.
    pub(crate) fn pages(&self, len: u64) -> Result<MrPages> {
        // SAFETY: the umem is alive.
        let offset = unsafe { sys::rsiw_umem_offset(self.0.as_ptr()) } as u64;
        let n = offset
            .checked_add(len)
            .ok_or(EINVAL)?
            .div_ceil(PAGE_SIZE as u64);
        let n = usize::try_from(n).map_err(|_| EINVAL)?;
        let mut entries = KVVec::<usize>::from_elem(0, n, GFP_KERNEL_ACCOUNT)?;
        // SAFETY: `entries` has room for `n` pointers; the umem is alive.
        let got = unsafe { sys::rsiw_umem_pages(self.0.as_ptr(), entries.as_mut_ptr().cast(), n) };
        if got != n {
            return Err(EFAULT);
        }
        // SAFETY: the umem is alive.
        let writable = unsafe { sys::rsiw_umem_writable(self.0.as_ptr()) };
        Ok(MrPages {
            kind: PagesKind::Page,
            entries,
            page_size: PAGE_SIZE,
            writable,
        })
    }

    pub(crate) fn offset(&self) -> u64 {
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

#[cfg(rsiw_kunit)]
#[kunit_tests(rsiw_pages)]
mod tests {
    use super::*;

    /// 20 blocks of 256 octets over `buf` (a virt-DMA list, as
    /// `ib_sg_to_pages` fills a fast-register MR's).
    fn blocks(buf: &mut KVec<u8>) -> Result<MrPages> {
        let base = buf.as_mut_ptr() as usize;
        let mut entries = KVVec::with_capacity(20, GFP_KERNEL)?;
        for i in 0..20 {
            entries.push(base + i * 256, GFP_KERNEL)?;
        }
        Ok(MrPages {
            kind: PagesKind::VirtDma,
            entries,
            page_size: 256,
            writable: true,
        })
    }

    /// A located span copies what the walk under the MR's lock copies; a
    /// span of more than `SPAN_PIECES` blocks is refused (`E2BIG`, the
    /// caller copies under its lock), one outside the list too.
    #[test]
    fn span_copies_match_the_walk() -> Result {
        let mut buf = KVec::from_elem(0u8, 20 * 256, GFP_KERNEL)?;
        let pages = blocks(&mut buf)?;
        let mut src = KVec::with_capacity(1000, GFP_KERNEL)?;
        for i in 0..1000u32 {
            src.push((i * 7 + 3) as u8, GFP_KERNEL)?;
        }
        // 1000 octets from 100 on: 5 blocks, the first and last partly.
        let mut span = SpanAt::new();
        pages.span_at(100, 1000, true, &mut span)?;
        span.write(&src)?;
        let mut back = KVec::from_elem(0u8, 1000, GFP_KERNEL)?;
        pages.read(100, &mut back)?;
        assert!(back[..] == src[..]);
        let mut again = KVec::from_elem(0u8, 1000, GFP_KERNEL)?;
        span.read(&mut again)?;
        assert!(again[..] == src[..]);
        // Nothing before or after it was touched.
        assert!(buf[..100].iter().all(|&b| b == 0));
        assert!(buf[1100..].iter().all(|&b| b == 0));
        // The span's length exactly.
        assert_eq!(span.write(&src[..999]), Err(EINVAL));
        // SPAN_PIECES blocks fit, one octet more is one block too many.
        let mut s = SpanAt::new();
        assert!(pages.span_at(0, SPAN_PIECES * 256, true, &mut s).is_ok());
        assert_eq!(
            pages.span_at(0, SPAN_PIECES * 256 + 1, true, &mut s).err(),
            Some(E2BIG)
        );
        assert_eq!(
            pages
                .span_at(255, SPAN_PIECES * 256 - 254, true, &mut s)
                .err(),
            Some(E2BIG)
        );
        // Outside the list.
        assert_eq!(
            pages.span_at(20 * 256 - 10, 11, true, &mut s).err(),
            Some(EFAULT)
        );
        // A span filled again holds only its new pieces: 10 octets at 300.
        pages.span_at(300, 10, true, &mut s)?;
        s.write(&src[..10])?;
        let mut ten = [0u8; 10];
        pages.read(300, &mut ten)?;
        assert!(ten[..] == src[..10]);
        Ok(())
    }

    /// Pages that may not be written (a user registration pinned without
    /// FOLL_WRITE) refuse every write path, whatever the caller checked:
    /// a write, a span located for a write, a read-located span written,
    /// an atomic's word. Reads work.
    #[test]
    fn read_only_pages_are_never_written() -> Result {
        let mut buf = KVec::from_elem(0x11u8, 20 * 256, GFP_KERNEL)?;
        let mut pages = blocks(&mut buf)?;
        pages.writable = false;
        assert_eq!(pages.write(0, &[1, 2, 3]).err(), Some(EACCES));
        let mut s = SpanAt::new();
        assert_eq!(pages.span_at(0, 600, true, &mut s).err(), Some(EACCES));
        pages.span_at(0, 600, false, &mut s)?;
        let src = KVec::from_elem(0x22u8, 600, GFP_KERNEL)?;
        assert_eq!(s.write(&src).err(), Some(EACCES));
        assert_eq!(pages.word_at(8).err(), Some(EACCES));
        let mut back = [0u8; 16];
        pages.read(0, &mut back)?;
        assert!(back.iter().all(|&b| b == 0x11));
        assert!(buf.iter().all(|&b| b == 0x11));
        // A copy of the list keeps the restriction.
        let mut other = MrPages::for_fast_reg(20)?;
        other.copy_from(&pages)?;
        assert!(!other.writable());
        Ok(())
    }
}
