// SPDX-License-Identifier: GPL-2.0
//! Memory regions and the per-device STag table.
//!
//! An STag (RFC 5040 2.1) is a 24-bit index, fixed for the MR's life, and
//! an 8-bit key the consumer may change on every fast-register
//! (`ib_update_fast_reg_key`); a user or DMA MR's key is the next of a
//! counter at its registration. The table maps index to `Arc<Mr>`; index 0
//! is never used. Lookups hand out `Arc`s, so an MR a QP still refers to
//! outlives its deregistration, but its memory does not: deregistration
//! takes the MR out of the table and detaches its memory under the MR's
//! lock, and every copy into or out of an MR checks state, key, PD, rights
//! and bounds under that lock (and, for an access the engine validated
//! earlier, that the STag still names the registration it was validated
//! against: [`Grant`]) and copies under it or under an in-flight pin that
//! deregistration waits for. Once `dereg_mr` returns, no copy runs or can
//! start, and user pages can be unpinned.
//!
//! Locking: `StagTable::lock` (irq-safe spinlock) serialises the XArray
//! and the index cursor; `Mr::state` (irq-safe spinlock) protects one MR's
//! registration and memory. The table lock is never held while taking an
//! MR's lock. Both may be taken from any context (the RX softirq).
//!
//! Atomics do not hold the MR's lock for their read-modify-write, so
//! atomics on distinct words of one MR run in parallel and the device's
//! atomic lock table (`crate::mem::atomic_locks`) is their only serialisation
//! point. [`Mr::with_word`] disables local interrupts, checks state, key
//! and bounds and locates the word under the MR's lock, takes an
//! *in-flight pin* (`Mr::in_flight`) there, releases the lock, runs the
//! read-modify-write (which takes the table lock of the word), and drops
//! the pin, all before interrupts come back on. Everything that ends a
//! registration or replaces its memory first makes it unreachable under
//! the MR's lock (invalid, or memory detached: no new pin can be taken)
//! and then spins until the pins drain ([`Mr::drain`]): invalidation
//! (local, remote, Read with Invalidate), deregistration (before the
//! memory is dropped and the umem released) and fast-register (before it
//! swaps the page list; normally already drained by the invalidation).
//! The spin is safe in any context, holding any lock: a pin holder runs
//! with interrupts off, so it is never preempted or interrupted by the
//! waiter on its own CPU, and it needs no lock but one table lock, which
//! no waiter holds and whose holders take nothing else. The MR lock and
//! the table locks never nest. Copies (`copy_to`, `copy_from`) work the
//! same way: checks and the location of the span (at most
//! [`crate::ffi::mem::pages::SPAN_PIECES`] pages; a longer one is copied
//! under the lock) under the lock, the copy under a pin with interrupts
//! off, so copies through one MR from several CPUs run in parallel.
//! `commit` runs under the lock. An RDMA Write into a word is not
//! serialised against an atomic on it (the verbs only make atomics atomic
//! with respect to each other).

use core::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use kernel::{
    interrupt::local_interrupt_disable,
    prelude::*,
    sync::Arc,
    xarray::{AllocKind, XArray},
};

use crate::{
    engine::ddp::{self, Access, Region},
    ffi::{
        mem::pages::{access as ib, KernelMemory, MrPages, SpanAt, Word},
        net::zcopy::Segments,
        sync::{new_spinlock_irq, SpinLockIrq},
    },
};

/// Largest STag index (24 bits).
pub(crate) const MAX_STAG_INDEX: u32 = 0x00FF_FFFF;

/// Copies of at most this many octets run under the MR's lock (see
/// `Mr::copy_pinned`): a small message's copy is cheaper than locating
/// its span and pinning the MR around a copy outside the lock.
pub(crate) const LOCKED_COPY_MAX: usize = 512;

/// Registration identities ([`Region::reg`]): a new one for every
/// registration (a user or DMA MR's creation, each fast-register), never
/// reused: 2^64 registrations do not happen. An access the engine
/// validated names the identity it was validated against, so an STag
/// that comes to name another registration meanwhile (its MR
/// deregistered and the index given to a new MR, or fast-registered
/// again with a key that came round) is refused, not followed.
static NEXT_REG: AtomicU64 = AtomicU64::new(1);

fn next_reg() -> u64 {
    NEXT_REG.fetch_add(1, Ordering::Relaxed)
}

/// Keys of new user and DMA MRs: the next at each registration, as
/// hardware RNICs vary theirs, so that an STag kept past its MR's
/// deregistration names the next MR at its index only once in 256.
static NEXT_KEY: AtomicU32 = AtomicU32::new(1);

fn next_key() -> u8 {
    if stag_reuse() {
        return 0;
    }
    NEXT_KEY.fetch_add(1, Ordering::Relaxed) as u8
}

/// The test build's `kunit_stag_reuse`: STags come back at once, with the
/// same key (never in the production module).
fn stag_reuse() -> bool {
    #[cfg(rsiw_kunit)]
    {
        crate::module_parameters::kunit_stag_reuse.value()
    }
    #[cfg(not(rsiw_kunit))]
    {
        false
    }
}

/// What an access through an MR is checked against besides the MR's
/// state, key and bounds (always checked): the accessing QP's PD, the
/// rights it needs and, for an access the engine validated earlier (the
/// rest of a tagged segment, a Read Response's source), the registration
/// it was validated against.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Grant {
    pub(crate) pd: u32,
    /// `IB_ACCESS_*` (0: local read).
    pub(crate) need: u32,
    /// [`Region::reg`] of the validation, if the access rests on one.
    pub(crate) reg: Option<u64>,
}

impl Grant {
    /// A local access of a QP of `pd` needing `need` (its own SGEs).
    pub(crate) const fn local(pd: u32, need: u32) -> Self {
        Self {
            pd,
            need,
            reg: None,
        }
    }

    /// The continuation of an access the engine validated against the
    /// registration `reg`.
    pub(crate) const fn validated(pd: u32, need: u32, reg: u64) -> Self {
        Self {
            pd,
            need,
            reg: Some(reg),
        }
    }
}

/// Octets a persistent RDMA Commit writes back per hold of the MR's lock
/// ([`Mr::commit`]): a region may be 4 GiB, and the lock keeps interrupts
/// off.
pub(crate) const COMMIT_STEP: u64 = 1 << 20;

/// The index part of an STag.
pub(crate) const fn stag_index(stag: u32) -> u32 {
    stag >> 8
}

/// The consumer-owned key part of an STag.
pub(crate) const fn stag_key(stag: u32) -> u8 {
    stag as u8
}

/// Why an access to an MR was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum MrError {
    /// No such STag, wrong key, or not valid (invalidated, deregistered).
    InvalidStag,
    /// The MR belongs to another protection domain.
    Pd,
    /// The MR does not grant the right.
    Access,
    /// The last octet would be past 2^64 - 1.
    Wrap,
    /// Outside the registered region.
    Bounds,
    /// The operation does not apply to this MR or its state (fast-register
    /// of a valid MR, invalidation of a non fast-register MR, ...).
    State,
    /// `IB_ACCESS_FLUSH_PERSISTENT` on memory that is not persistent.
    NotPersistent,
    /// An atomic's 8 octets are not 8-octet aligned in memory.
    Misaligned,
}

impl MrError {
    pub(crate) fn to_error(self) -> Error {
        match self {
            MrError::InvalidStag
            | MrError::State
            | MrError::NotPersistent
            | MrError::Misaligned => EINVAL,
            MrError::Pd | MrError::Access => EACCES,
            MrError::Wrap | MrError::Bounds => EFAULT,
        }
    }
}

impl From<MrError> for Error {
    fn from(e: MrError) -> Error {
        e.to_error()
    }
}

/// A page list's refusal as an MR error: a write into memory that may
/// not be written is an access error, anything else out of bounds.
fn pages_err(e: Error) -> MrError {
    if e == EACCES {
        MrError::Access
    } else {
        MrError::Bounds
    }
}

/// The engine's rights for `IB_ACCESS_*` flags. Local read is always
/// granted and has no flag.
pub(crate) fn engine_access(flags: u32) -> Access {
    let mut a = Access::NONE;
    if flags & ib::LOCAL_WRITE != 0 {
        a = a | Access::LOCAL_WRITE;
    }
    if flags & ib::REMOTE_READ != 0 {
        a = a | Access::REMOTE_READ;
    }
    if flags & ib::REMOTE_WRITE != 0 {
        a = a | Access::REMOTE_WRITE;
    }
    if flags & ib::REMOTE_ATOMIC != 0 {
        a = a | Access::REMOTE_ATOMIC;
    }
    if flags & ib::FLUSH != 0 {
        a = a | Access::COMMIT;
    }
    a
}

/// The longest registration, the device's `max_mr_size`: a user MR's
/// length is at most `isize::MAX` octets (`reg_user_mr` refuses more with
/// `EINVAL`).
pub(crate) const MAX_MR_SIZE: u64 = isize::MAX as u64;

/// Checks access flags for a registration: only known flags, and remote
/// write or atomic only together with local write (IB spec 10.6.3.1).
pub(crate) fn check_access_flags(flags: u32) -> Result<(), MrError> {
    if flags & !ib::SUPPORTED != 0 {
        return Err(MrError::Access);
    }
    if flags & (ib::REMOTE_WRITE | ib::REMOTE_ATOMIC) != 0 && flags & ib::LOCAL_WRITE == 0 {
        return Err(MrError::Access);
    }
    Ok(())
}

/// Offset of `len` octets at `to` in the region `[iova, iova + size)`:
/// wrap first, then base and bounds (the engine's order).
pub(crate) fn region_offset(iova: u64, size: u64, to: u64, len: u64) -> Result<u64, MrError> {
    if len > 0 && to.checked_add(len - 1).is_none() {
        return Err(MrError::Wrap);
    }
    let off = to.checked_sub(iova).ok_or(MrError::Bounds)?;
    if off > size || len > size - off {
        return Err(MrError::Bounds);
    }
    Ok(off)
}

/// What kind of MR.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum MrKind {
    /// All of kernel memory by address (`get_dma_mr`).
    Dma,
    /// Pinned user memory (`reg_user_mr`).
    User,
    /// Fast-register MR (`alloc_mr`): mapped with `map_mr_sg`, valid
    /// between `IB_WR_REG_MR` and an invalidation.
    FastReg,
}

/// Where an MR's octets are.
enum Memory {
    /// Detached (deregistered).
    None,
    Kernel(KernelMemory),
    Pages(MrPages),
}

/// A fast-register request (`IB_WR_REG_MR`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct FastReg {
    /// The new STag (index must be the MR's; key is the new key).
    pub(crate) key: u32,
    /// First octet's address (TO) and length, from the `ib_mr`.
    pub(crate) iova: u64,
    pub(crate) length: u64,
    /// `IB_ACCESS_*`.
    pub(crate) access: u32,
}

impl FastReg {
    /// The fast-register request of an `IB_WR_REG_MR` for `mr`: iova and
    /// length as `ib_map_mr_sg` (and the consumer) left them, the new key
    /// and access from the work request.
    pub(crate) fn of(
        mr: &crate::ffi::ib::IbMr<crate::device::Rsiw>,
        key: u32,
        access: u32,
    ) -> Self {
        let (iova, length) = mr.iova_length();
        Self {
            key,
            iova,
            length,
            access,
        }
    }
}

struct MrState {
    key: u8,
    valid: bool,
    /// This registration's identity (see [`NEXT_REG`]).
    reg: u64,
    iova: u64,
    len: u64,
    /// `IB_ACCESS_*` granted.
    access: u32,
    /// Offset of `iova` from the start of the first page.
    first_offset: u64,
    mem: Memory,
    /// Fast-register: the list `map_mr_sg` fills and `REG_MR` commits, and
    /// the first octet's offset in its first page.
    mapped: Option<MrPages>,
    mapped_offset: u64,
    /// Every octet of the mapped list from `mapped_offset` on is
    /// persistent memory (found by `map_fast_reg`, outside this lock).
    mapped_pmem: bool,
}

/// The direction and buffer of a copy through an MR.
enum CopyDir<'a> {
    To(&'a [u8]),
    From(&'a mut [u8]),
}

impl CopyDir<'_> {
    fn len(&self) -> usize {
        match self {
            CopyDir::To(s) => s.len(),
            CopyDir::From(d) => d.len(),
        }
    }
}

/// A memory region.
#[pin_data]
pub(crate) struct Mr {
    /// STag index, set once when the MR is published.
    index: AtomicU32,
    pd: u32,
    kind: MrKind,
    /// Atomics between locating their word and finishing with it (see the
    /// module doc): taken under `state`'s lock, dropped without it.
    in_flight: AtomicU32,
    #[pin]
    state: SpinLockIrq<MrState>,
}

impl Mr {
    fn new(pd: u32, kind: MrKind, st: MrState) -> Result<Arc<Self>> {
        Arc::pin_init(
            pin_init!(Mr {
                index: AtomicU32::new(0),
                pd,
                kind,
                in_flight: AtomicU32::new(0),
                state <- new_spinlock_irq!(st, "rsiw_mr"),
            }),
            GFP_KERNEL_ACCOUNT,
        )
    }

    /// A DMA MR: all kernel memory, valid until deregistered.
    pub(crate) fn new_dma(pd: u32, access: u32, mem: KernelMemory) -> Result<Arc<Self>> {
        Self::new(
            pd,
            MrKind::Dma,
            MrState {
                key: next_key(),
                valid: true,
                reg: next_reg(),
                iova: 0,
                len: u64::MAX,
                access,
                first_offset: 0,
                mem: Memory::Kernel(mem),
                mapped: None,
                mapped_offset: 0,
                mapped_pmem: false,
            },
        )
    }

    /// A user MR over pinned pages: `iova` names the octet at
    /// `first_offset` in the first page.
    pub(crate) fn new_user(
        pd: u32,
        iova: u64,
        len: u64,
        first_offset: u64,
        access: u32,
        pages: MrPages,
    ) -> Result<Arc<Self>> {
        if first_offset
            .checked_add(len)
            .is_none_or(|end| end > pages.span())
        {
            return Err(EINVAL);
        }
        if access & ib::FLUSH_PERSISTENT != 0 && !pages.is_persistent(first_offset, len) {
            crate::mem::commit::refused_persistent("user MR");
            return Err(EINVAL);
        }
        if len > 0 && iova.checked_add(len - 1).is_none() {
            return Err(EINVAL);
        }
        Self::new(
            pd,
            MrKind::User,
            MrState {
                key: next_key(),
                valid: true,
                reg: next_reg(),
                iova,
                len,
                access,
                first_offset,
                mem: Memory::Pages(pages),
                mapped: None,
                mapped_offset: 0,
                mapped_pmem: false,
            },
        )
    }

    /// A fast-register MR for up to `max_pages` pages, invalid until
    /// registered.
    pub(crate) fn new_fast_reg(pd: u32, max_pages: usize) -> Result<Arc<Self>> {
        Self::new(
            pd,
            MrKind::FastReg,
            MrState {
                key: 0,
                valid: false,
                // Each `REG_MR` gives it one.
                reg: 0,
                iova: 0,
                len: 0,
                access: 0,
                first_offset: 0,
                mem: Memory::Pages(MrPages::for_fast_reg(max_pages)?),
                mapped: Some(MrPages::for_fast_reg(max_pages)?),
                mapped_offset: 0,
                mapped_pmem: false,
            },
        )
    }

    /// The STag as registered now (index and current key).
    pub(crate) fn stag(&self) -> u32 {
        (self.index.load(Ordering::Relaxed) << 8) | u32::from(self.state.lock().key)
    }

    /// The region the engine's validators see, if `stag` names this MR
    /// with its current key. A deregistered MR (its memory detached) has none: the table no
    /// longer names it, and a cached reference must ask the table again.
    pub(crate) fn region(&self, stag: u32) -> Option<Region> {
        let st = self.state.lock();
        (st.key == stag_key(stag) && !matches!(st.mem, Memory::None)).then(|| Region {
            base_to: st.iova,
            len: st.len,
            access: engine_access(st.access),
            pd: self.pd,
            valid: st.valid,
            durable: st.access & ib::FLUSH_PERSISTENT != 0,
            reg: st.reg,
        })
    }

    #[cfg(rsiw_kunit)]
    /// Whether `stag` is valid and its key current (no other check).
    pub(crate) fn is_valid(&self, stag: u32) -> bool {
        let st = self.state.lock();
        st.valid && st.key == stag_key(stag)
    }

    /// Every check for an access of `len` octets at `to` through `stag`,
    /// in the engine's order: STag valid with this key, PD, rights `need`
    /// (`IB_ACCESS_*`; 0 = local read), wrap, bounds.
    pub(crate) fn check(
        &self,
        stag: u32,
        pd: u32,
        to: u64,
        len: u64,
        need: u32,
    ) -> Result<(), MrError> {
        self.check_all(&self.state.lock(), stag, pd, to, len, need)
            .map(|_| ())
    }

    /// [`Mr::check`] under the lock; returns the offset of `to` in the region.
    fn check_all(
        &self,
        st: &MrState,
        stag: u32,
        pd: u32,
        to: u64,
        len: u64,
        need: u32,
    ) -> Result<u64, MrError> {
        Self::check_locked(st, stag, to, len)?;
        if self.pd != pd {
            return Err(MrError::Pd);
        }
        if st.access & need != need {
            return Err(MrError::Access);
        }
        region_offset(st.iova, st.len, to, len)
    }

    fn check_locked(st: &MrState, stag: u32, _to: u64, _len: u64) -> Result<(), MrError> {
        if !st.valid || st.key != stag_key(stag) || matches!(st.mem, Memory::None) {
            return Err(MrError::InvalidStag);
        }
        Ok(())
    }

    /// Copies `src` to `to` through `stag` with no PD or rights check (the
    /// self-tests' raw access; the driver's copies go through
    /// [`Mr::copy_to_as`]).
    #[cfg(rsiw_kunit)]
    pub(crate) fn copy_to(&self, stag: u32, to: u64, src: &[u8]) -> Result<(), MrError> {
        self.copy_pinned(stag, None, to, CopyDir::To(src))
    }

    /// Copies from `to` through `stag` into `dst` (as [`Mr::copy_to`]).
    #[cfg(rsiw_kunit)]
    pub(crate) fn copy_from(&self, stag: u32, to: u64, dst: &mut [u8]) -> Result<(), MrError> {
        self.copy_pinned(stag, None, to, CopyDir::From(dst))
    }

    /// Copies `src` to `to` through `stag` after every check of
    /// [`Mr::check`] for `grant` (and its registration, if it names one):
    /// one lock for the checks and the copy.
    ///
    /// The copy itself runs after the lock is released, under an in-flight
    /// pin with local interrupts off, as an atomic's read-modify-write
    /// does (see the module doc): copies through one MR from several CPUs
    /// (QPs sharing a buffer, the receive softirq and a sender) do not
    /// serialise on its lock.
    pub(crate) fn copy_to_as(
        &self,
        stag: u32,
        grant: Grant,
        to: u64,
        src: &[u8],
    ) -> Result<(), MrError> {
        self.copy_pinned(stag, Some(grant), to, CopyDir::To(src))
    }

    /// [`Mr::copy_to_as`] the other way.
    pub(crate) fn copy_from_as(
        &self,
        stag: u32,
        grant: Grant,
        to: u64,
        dst: &mut [u8],
    ) -> Result<(), MrError> {
        self.copy_pinned(stag, Some(grant), to, CopyDir::From(dst))
    }

    /// A copy at `to` through `stag`: checked under the MR's lock, then run
    /// on the located span after the lock is released (under an in-flight
    /// pin, local interrupts off), or under the lock for a span longer
    /// than [`crate::ffi::mem::pages::SPAN_PIECES`] pages or a copy of at
    /// most [`LOCKED_COPY_MAX`] octets. A write into pages pinned without
    /// write permission fails in the page list itself.
    fn copy_pinned(
        &self,
        stag: u32,
        grant: Option<Grant>,
        to: u64,
        mut c: CopyDir<'_>,
    ) -> Result<(), MrError> {
        let len = c.len();
        let write = matches!(c, CopyDir::To(_));
        // Filled in place under the lock (see `span_at`).
        let mut span = SpanAt::new();
        let irqs_off = {
            let st = self.state.lock();
            let off = self.checks(&st, stag, grant, to, len as u64)?;
            // Where the copy starts: a DMA MR's address, or the offset in
            // the page list.
            let pos = match &st.mem {
                Memory::Kernel(_) => to,
                _ => st.first_offset.checked_add(off).ok_or(MrError::Bounds)?,
            };
            // A small copy is done under the lock: locating its span and
            // pinning the MR would cost more than the copy.
            let located = match &st.mem {
                _ if len <= LOCKED_COPY_MAX => Err(E2BIG),
                Memory::Kernel(k) => k.span_at(pos, len, write, &mut span),
                Memory::Pages(p) => p.span_at(pos, len, write, &mut span),
                Memory::None => return Err(MrError::InvalidStag),
            };
            match located {
                Ok(()) => {
                    // Interrupts stay off from here until the pin is
                    // dropped: disabled again inside the lock's own
                    // disabling, which the unlock undoes (they nest), so a
                    // copy under the lock does not pay for it.
                    let irqs_off = local_interrupt_disable();
                    // Under the lock: whoever ends the registration takes
                    // the lock after this and waits for the pin.
                    self.in_flight.fetch_add(1, Ordering::Relaxed);
                    irqs_off
                }
                Err(e) if e == E2BIG => {
                    let res = match (&st.mem, &mut c) {
                        (Memory::Kernel(k), CopyDir::To(src)) => k.write(pos, src),
                        (Memory::Kernel(k), CopyDir::From(dst)) => k.read(pos, dst),
                        (Memory::Pages(p), CopyDir::To(src)) => p.write(pos, src),
                        (Memory::Pages(p), CopyDir::From(dst)) => p.read(pos, dst),
                        (Memory::None, _) => return Err(MrError::InvalidStag),
                    };
                    return res.map_err(pages_err);
                }
                Err(e) => return Err(pages_err(e)),
            }
        };
        let res = match &mut c {
            CopyDir::To(src) => span.write(src),
            CopyDir::From(dst) => span.read(dst),
        };
        // Release: the copy is done before a drain sees 0.
        self.in_flight.fetch_sub(1, Ordering::Release);
        drop(irqs_off);
        res.map_err(pages_err)
    }

    /// A copy's checks under the lock: all of them for `grant`, including
    /// its registration if it names one (the self-tests' raw copies:
    /// state, key and bounds only). Returns the offset of `to` in the
    /// region.
    fn checks(
        &self,
        st: &MrState,
        stag: u32,
        grant: Option<Grant>,
        to: u64,
        len: u64,
    ) -> Result<u64, MrError> {
        match grant {
            Some(g) => {
                if g.reg.is_some_and(|reg| reg != st.reg) {
                    return Err(MrError::InvalidStag);
                }
                self.check_all(st, stag, g.pd, to, len, g.need)
            }
            None => {
                Self::check_locked(st, stag, to, len)?;
                region_offset(st.iova, st.len, to, len)
            }
        }
    }

    /// RDMA Commit of `len` octets at `to` through `stag` by a QP of `pd`
    /// (checked like a copy): written back to persistent memory if the MR
    /// grants `FLUSH_PERSISTENT`, made visible if it grants `FLUSH_GLOBAL`.
    /// The write-back of a region (up to 4 GiB) runs in steps of
    /// [`COMMIT_STEP`] octets, each under the MR's lock with its checks
    /// again (the same registration), so interrupts are on between steps
    /// and the memory cannot go away during one; a registration that ends
    /// in the middle fails the commit.
    pub(crate) fn commit(&self, stag: u32, pd: u32, to: u64, len: u64) -> Result<(), MrError> {
        let mut done = 0u64;
        let mut reg = None;
        loop {
            let st = self.state.lock();
            Self::check_locked(&st, stag, to, len)?;
            if self.pd != pd {
                return Err(MrError::Pd);
            }
            if *reg.get_or_insert(st.reg) != st.reg {
                return Err(MrError::InvalidStag);
            }
            let off = region_offset(st.iova, st.len, to, len)?;
            if st.access & ib::FLUSH_PERSISTENT == 0 {
                return if st.access & ib::FLUSH_GLOBAL != 0 {
                    crate::ffi::mem::pmem::visibility_barrier();
                    Ok(())
                } else {
                    Err(MrError::Access)
                };
            }
            // Registration made sure these pages are persistent memory.
            let Memory::Pages(p) = &st.mem else {
                return Err(MrError::NotPersistent);
            };
            let n = (len - done).min(COMMIT_STEP);
            let pos = st
                .first_offset
                .checked_add(off + done)
                .ok_or(MrError::Bounds)?;
            p.write_back(pos, n as usize).map_err(|_| MrError::Bounds)?;
            done += n;
            drop(st);
            if done == len {
                crate::ffi::mem::pmem::persistence_barrier();
                return Ok(());
            }
        }
    }

    /// Runs `f` on the aligned 8-octet word at `to` through `stag`, in
    /// place, after every check of [`Mr::check`] for a QP of `pd` needing
    /// `need`: the target of an RFC 7306 atomic. The MR's lock is taken
    /// once per atomic: the checks and the word's location run under it;
    /// `f` runs after it is released, under an in-flight pin and with
    /// local interrupts off (see the module doc). The caller serialises
    /// atomics on the word (the device's `AtomicLocks`, keyed by
    /// `Word::phys`).
    pub(crate) fn with_word<R>(
        &self,
        stag: u32,
        pd: u32,
        to: u64,
        need: u32,
        f: impl FnOnce(&mut Word<'_>) -> R,
    ) -> Result<R, MrError> {
        let irqs_off = local_interrupt_disable();
        let word = {
            let st = self.state.lock();
            let off = self.check_all(&st, stag, pd, to, 8, need)?;
            let word = match &st.mem {
                Memory::Kernel(k) => k.word_at(to),
                Memory::Pages(p) => {
                    p.word_at(st.first_offset.checked_add(off).ok_or(MrError::Bounds)?)
                }
                Memory::None => return Err(MrError::InvalidStag),
            };
            let word = word.map_err(|e| {
                if e == EINVAL {
                    MrError::Misaligned
                } else {
                    pages_err(e)
                }
            })?;
            // Under the lock: whoever ends the registration takes the lock
            // after this and waits for the pin, or before and we failed.
            self.in_flight.fetch_add(1, Ordering::Relaxed);
            word
        };
        let r = word.with(f);
        // Release: the read-modify-write is done before a drain sees 0.
        self.in_flight.fetch_sub(1, Ordering::Release);
        drop(irqs_off);
        Ok(r)
    }

    /// Waits until no atomic or copy holds an in-flight pin. The caller made the
    /// registration unreachable under the MR's lock first, so no new pin
    /// can be taken; the holders run a few instructions with interrupts
    /// off and need no lock the caller may hold (see the module doc).
    fn drain(&self) {
        while self.in_flight.load(Ordering::Acquire) != 0 {
            core::hint::spin_loop();
        }
    }

    /// `map_mr_sg`: lets `f` refill the mapped page list of a fast-register
    /// MR; `f` returns `ib_sg_to_pages`'s result and the first octet's
    /// offset in the first page. The registration in force is untouched
    /// until the next `REG_MR`.
    pub(crate) fn map_fast_reg(
        &self,
        f: impl FnOnce(&mut MrPages) -> Result<(i32, u64)>,
    ) -> Result<i32> {
        if self.kind != MrKind::FastReg {
            return Err(EINVAL);
        }
        // The list is filled, and its persistence found, outside the MR's
        // lock: the persistence test reads the iomem resource tree under
        // `resource_lock`, which others take with softirqs on, and the MR's
        // lock is taken in the receive softirq (lockdep on the debug
        // kernel: SOFTIRQ-safe -> SOFTIRQ-unsafe). Meanwhile the list is
        // out of the MR: a `REG_MR` racing its own `map_mr_sg` (the ULP's
        // bug) fails as an MR in the wrong state.
        let mut pages = self.state.lock().mapped.take().ok_or(EINVAL)?;
        let res = f(&mut pages);
        let pmem = match res {
            Ok((_, first)) => {
                pages.span() > first && pages.is_persistent(first, pages.span() - first)
            }
            Err(_) => false,
        };
        let mut st = self.state.lock();
        st.mapped = Some(pages);
        st.mapped_pmem = pmem;
        let (n, first) = res?;
        st.mapped_offset = first;
        Ok(n)
    }

    /// `IB_WR_REG_MR`: registers the mapped pages with a new key, iova,
    /// length and rights. The MR must be a fast-register MR of `pd` in the
    /// invalid state, the key's index its own, the region inside the
    /// mapped pages, the rights consistent.
    pub(crate) fn fast_register(&self, pd: u32, req: &FastReg) -> Result<(), MrError> {
        if self.kind != MrKind::FastReg {
            return Err(MrError::State);
        }
        if self.pd != pd {
            return Err(MrError::Pd);
        }
        if stag_index(req.key) != self.index.load(Ordering::Relaxed) {
            return Err(MrError::InvalidStag);
        }
        check_access_flags(req.access)?;
        if req.length > 0 && req.iova.checked_add(req.length - 1).is_none() {
            return Err(MrError::Wrap);
        }
        let mut st = self.state.lock();
        if st.valid {
            return Err(MrError::State);
        }
        let st = &mut *st;
        let (Some(mapped), Memory::Pages(active)) = (st.mapped.as_ref(), &mut st.mem) else {
            return Err(MrError::State);
        };
        if st
            .mapped_offset
            .checked_add(req.length)
            .is_none_or(|end| end > mapped.span())
        {
            return Err(MrError::Bounds);
        }
        // Persistent from `mapped_offset` to the end of the list, so in
        // the part of it `req` registers (inside the list, checked above).
        if req.access & ib::FLUSH_PERSISTENT != 0 && !st.mapped_pmem {
            crate::mem::commit::refused_persistent("fast-register MR");
            return Err(MrError::NotPersistent);
        }
        // An invalidation racing with this one drains before it returns;
        // wait here too, so the list never changes under an atomic.
        self.drain();
        active.copy_from(mapped).map_err(|_| MrError::Bounds)?;
        st.first_offset = st.mapped_offset;
        st.key = stag_key(req.key);
        st.iova = req.iova;
        st.len = req.length;
        st.access = req.access;
        st.reg = next_reg();
        st.valid = true;
        Ok(())
    }

    /// Invalidates an MR through `stag` (Local Invalidate, a Read with
    /// Local Invalidate's sink): the key must be current and the PD the
    /// QP's. Invalidating an invalid MR is an error.
    pub(crate) fn invalidate(&self, stag: u32, pd: u32) -> Result<(), MrError> {
        self.invalidate_as(stag, pd, false)
    }

    /// Invalidation by the peer (Send with Invalidate): as
    /// [`Mr::invalidate`], and only of a fast-register MR. The verbs allow
    /// remote invalidation of fast-registered memory (and memory windows,
    /// which rsiw does not have), never of a process's `reg_user_mr`
    /// registration, which would be revoked for good by any peer that
    /// guesses its STag.
    pub(crate) fn invalidate_remote(&self, stag: u32, pd: u32) -> Result<(), MrError> {
        self.invalidate_as(stag, pd, true)
    }

    fn invalidate_as(&self, stag: u32, pd: u32, remote: bool) -> Result<(), MrError> {
        let mut st = self.state.lock();
        if st.key != stag_key(stag) || !st.valid {
            return Err(MrError::InvalidStag);
        }
        if self.pd != pd {
            return Err(MrError::Pd);
        }
        // A fast-registered MR until its next registration; a process's
        // MR for good by its own Local Invalidate (it has no fast
        // registration: its keys are revoked until it is deregistered, as
        // with siw), never by the peer. All of kernel memory never.
        if self.kind == MrKind::Dma || (remote && self.kind != MrKind::FastReg) {
            return Err(MrError::State);
        }
        st.valid = false;
        drop(st);
        // Once this returns the consumer may reuse the memory.
        self.drain();
        Ok(())
    }

    /// Deregistration: invalid, memory detached, in-flight atomics
    /// drained. Returns the memory so the caller drops it outside the lock
    /// (page lists may be vmalloc'ed).
    fn detach(&self) -> (Memory, Option<MrPages>) {
        let mut st = self.state.lock();
        st.valid = false;
        let mem = core::mem::replace(&mut st.mem, Memory::None);
        let mapped = st.mapped.take();
        drop(st);
        self.drain();
        (mem, mapped)
    }
}

/// The per-device STag table.
#[pin_data]
pub(crate) struct StagTable {
    /// Next index to try (cyclic, so a freed STag is not reused at once).
    /// Holding this lock is what gives access to `xa`.
    #[pin]
    lock: SpinLockIrq<u32>,
    #[pin]
    xa: XArray<Arc<Mr>>,
}

impl StagTable {
    pub(crate) fn new() -> impl PinInit<Self> {
        pin_init!(StagTable {
            lock <- new_spinlock_irq!(1, "rsiw_stag_table"),
            xa <- XArray::new(AllocKind::Alloc),
        })
    }

    /// Publishes `mr` under a fresh index and returns its STag. The caller
    /// bounds the number of MRs (`max_mr`) well below the index space, so
    /// a free index is found.
    pub(crate) fn insert(&self, mr: &Arc<Mr>) -> Result<u32> {
        let mut cursor = self.lock.lock();
        let mut xa = self.xa.lock();
        if stag_reuse() {
            *cursor = 1;
        }
        let mut index = *cursor;
        let mut tries = 0u32;
        while xa.get(index as usize).is_some() {
            index = if index >= MAX_STAG_INDEX {
                1
            } else {
                index + 1
            };
            tries += 1;
            if tries >= MAX_STAG_INDEX {
                return Err(ENOSPC);
            }
        }
        mr.index.store(index, Ordering::Relaxed);
        // Node allocation under the irq-safe table lock: atomic.
        xa.store(index as usize, mr.clone(), GFP_ATOMIC)?;
        *cursor = if index >= MAX_STAG_INDEX {
            1
        } else {
            index + 1
        };
        drop(xa);
        drop(cursor);
        // With the MR's key (a user or DMA MR's varies per registration).
        Ok(mr.stag())
    }

    /// The MR with `stag`'s index (the key is not checked here).
    pub(crate) fn get(&self, stag: u32) -> Option<Arc<Mr>> {
        let index = stag_index(stag);
        if index == 0 {
            return None;
        }
        let _cursor = self.lock.lock();
        let xa = self.xa.lock();
        xa.get(index as usize).map(Arc::from)
    }

    fn remove(&self, mr: &Mr) -> Option<Arc<Mr>> {
        let index = mr.index.load(Ordering::Relaxed);
        let _cursor = self.lock.lock();
        let mut xa = self.xa.lock();
        // Only if the slot holds this very MR.
        match xa.get(index as usize) {
            Some(found) if core::ptr::eq(&*found, mr) => xa.remove(index as usize),
            _ => None,
        }
    }

    /// Deregisters `mr`: out of the table, then invalid and detached from
    /// its memory. Afterwards no copy or atomic runs or can start.
    pub(crate) fn deregister(&self, mr: &Arc<Mr>) {
        let removed = self.remove(mr);
        let detached = mr.detach();
        drop(detached);
        drop(removed);
    }

    /// Every check for an access through `stag` (see [`Mr::check`]);
    /// returns the MR (the self-tests'; an access checks and copies
    /// under one lock, [`Mr::copy_to_as`]).
    #[cfg(rsiw_kunit)]
    pub(crate) fn check(
        &self,
        stag: u32,
        pd: u32,
        to: u64,
        len: u64,
        need: u32,
    ) -> Result<Arc<Mr>, MrError> {
        let mr = self.get(stag).ok_or(MrError::InvalidStag)?;
        mr.check(stag, pd, to, len, need)?;
        Ok(mr)
    }

    /// Copies `src` into the MR `stag` names at `to` (the self-tests'; a
    /// QP goes through its [`MrCache`]).
    #[cfg(rsiw_kunit)]
    pub(crate) fn copy_to_mr(&self, stag: u32, to: u64, src: &[u8]) -> Result<(), MrError> {
        self.get(stag)
            .ok_or(MrError::InvalidStag)?
            .copy_to(stag, to, src)
    }

    /// Copies from the MR `stag` names at `to` into `dst` (as
    /// [`StagTable::copy_to_mr`]).
    #[cfg(rsiw_kunit)]
    pub(crate) fn copy_from_mr(&self, stag: u32, to: u64, dst: &mut [u8]) -> Result<(), MrError> {
        self.get(stag)
            .ok_or(MrError::InvalidStag)?
            .copy_from(stag, to, dst)
    }

    /// RDMA Commit of a region of the MR `stag` names on a QP of `pd`
    /// (see [`Mr::commit`]).
    pub(crate) fn commit(&self, stag: u32, pd: u32, to: u64, len: u64) -> Result<(), MrError> {
        self.get(stag)
            .ok_or(MrError::InvalidStag)?
            .commit(stag, pd, to, len)
    }

    /// `IB_WR_LOCAL_INV` (or a Read with Local Invalidate) of `stag` by
    /// a QP of `pd`.
    pub(crate) fn invalidate(&self, stag: u32, pd: u32) -> Result<(), MrError> {
        self.get(stag)
            .ok_or(MrError::InvalidStag)?
            .invalidate(stag, pd)
    }

    /// Remote invalidation (Send with Invalidate) of `stag` on a QP of
    /// `pd`: fast-register MRs only (see [`Mr::invalidate_remote`]).
    pub(crate) fn invalidate_remote(&self, stag: u32, pd: u32) -> Result<(), MrError> {
        self.get(stag)
            .ok_or(MrError::InvalidStag)?
            .invalidate_remote(stag, pd)
    }
}

/// The MRs of the last two STags a QP's stream used, most recent first.
/// The FPDUs of a message and the SGEs of a queue's WRs name the same few
/// STags, so most accesses skip the device's table (its lock, the
/// XArray's and a reference count). An entry is a shortcut, never a
/// decision: an access that fails on a cached MR (invalidated,
/// deregistered, or its index since given to another MR) asks the table
/// again. A deregistered MR an entry still holds has no memory left
/// ([`StagTable::deregister`] detaches it); it is dropped when its entry
/// is replaced or the cache goes with its QP.
#[derive(Default)]
pub(crate) struct MrCache(core::cell::Cell<[CachedMr; 2]>);

/// A cache slot: the STag and the MR it named when cached.
type CachedMr = Option<(u32, Arc<Mr>)>;

impl MrCache {
    /// Runs `f` on the MR `stag` names: a cached one first, then the one
    /// `get` finds (the table's) if that fails or none is cached, which
    /// is cached when `f` succeeds on it. `f` must leave the MR as it was
    /// when it fails (an MR's copies check before they copy).
    pub(crate) fn with<R>(
        &self,
        stag: u32,
        get: impl FnOnce() -> Option<Arc<Mr>>,
        mut f: impl FnMut(&Mr) -> Result<R, MrError>,
    ) -> Result<R, MrError> {
        let slot = |ents: &[Option<(u32, Arc<Mr>)>; 2]| {
            ents.iter()
                .position(|e| matches!(e, Some((s, _)) if *s == stag))
        };
        let mut ents = self.0.take();
        if let Some(i) = slot(&ents) {
            if let Some(Ok(v)) = ents[i].as_ref().map(|(_, mr)| f(mr)) {
                ents.swap(0, i);
                self.0.set(ents);
                return Ok(v);
            }
        }
        self.0.set(ents);
        let mr = get().ok_or(MrError::InvalidStag)?;
        let v = f(&mr)?;
        let mut ents = self.0.take();
        // The entry of `stag` if there is one (its MR failed), else the
        // older one, makes room; its MR is dropped once the cache is whole.
        let i = slot(&ents).unwrap_or(1);
        let old = ents[i].replace((stag, mr));
        ents.swap(0, i);
        self.0.set(ents);
        drop(old);
        Ok(v)
    }
}

impl ddp::StagTable for StagTable {
    fn lookup(&self, stag: u32) -> Option<Region> {
        self.get(stag)?.region(stag)
    }
}

#[cfg(rsiw_kunit)]
#[kunit_tests(rsiw_mr)]
mod tests {
    use super::*;

    #[test]
    fn stag_split() {
        assert_eq!(stag_index(0x1234_56AB), 0x12_3456);
        assert_eq!(stag_key(0x1234_56AB), 0xAB);
    }

    #[test]
    fn access_mapping() {
        assert_eq!(engine_access(0), Access::NONE);
        let all =
            engine_access(ib::LOCAL_WRITE | ib::REMOTE_READ | ib::REMOTE_WRITE | ib::REMOTE_ATOMIC);
        assert!(all.contains(
            Access::LOCAL_WRITE
                | Access::REMOTE_READ
                | Access::REMOTE_WRITE
                | Access::REMOTE_ATOMIC
        ));
        let r = engine_access(ib::REMOTE_READ);
        assert!(r.contains(Access::REMOTE_READ));
        assert!(!r.contains(Access::REMOTE_WRITE));
        assert!(!r.contains(Access::LOCAL_WRITE));
        assert!(!engine_access(ib::LOCAL_WRITE).contains(Access::REMOTE_WRITE));
        // Either flush right grants the commit right, nothing else does.
        assert!(engine_access(ib::FLUSH_GLOBAL).contains(Access::COMMIT));
        assert!(engine_access(ib::FLUSH_PERSISTENT).contains(Access::COMMIT));
        assert!(!engine_access(ib::LOCAL_WRITE | ib::REMOTE_WRITE).contains(Access::COMMIT));
    }

    #[test]
    fn access_flag_rules() {
        assert_eq!(
            check_access_flags(ib::LOCAL_WRITE | ib::REMOTE_WRITE),
            Ok(())
        );
        assert_eq!(check_access_flags(ib::REMOTE_READ), Ok(()));
        assert_eq!(
            check_access_flags(ib::FLUSH_GLOBAL | ib::FLUSH_PERSISTENT),
            Ok(())
        );
        assert_eq!(check_access_flags(ib::REMOTE_WRITE), Err(MrError::Access));
        assert_eq!(check_access_flags(ib::REMOTE_ATOMIC), Err(MrError::Access));
        assert_eq!(check_access_flags(ib::MW_BIND), Err(MrError::Access));
        assert_eq!(
            check_access_flags(ib::ON_DEMAND | ib::LOCAL_WRITE),
            Err(MrError::Access)
        );
        assert_eq!(check_access_flags(ib::ZERO_BASED), Err(MrError::Access));
    }

    #[test]
    fn bounds_and_wrap() {
        assert_eq!(region_offset(0x1000, 0x1000, 0x1000, 0x1000), Ok(0));
        assert_eq!(region_offset(0x1000, 0x1000, 0x1800, 0x800), Ok(0x800));
        assert_eq!(
            region_offset(0x1000, 0x1000, 0x1801, 0x800),
            Err(MrError::Bounds)
        );
        assert_eq!(
            region_offset(0x1000, 0x1000, 0xFFF, 1),
            Err(MrError::Bounds)
        );
        assert_eq!(region_offset(0x1000, 0x1000, 0x2000, 0), Ok(0x1000));
        assert_eq!(
            region_offset(0x1000, 0x1000, 0x2001, 0),
            Err(MrError::Bounds)
        );
        assert_eq!(region_offset(0, u64::MAX, u64::MAX, 2), Err(MrError::Wrap));
        assert_eq!(
            region_offset(0, u64::MAX, u64::MAX - 1, 1),
            Ok(u64::MAX - 1)
        );
        // A huge length cannot overflow the bounds arithmetic.
        assert_eq!(
            region_offset(0x1000, 0x1000, 0x1000, u64::MAX - 0x1000),
            Err(MrError::Bounds)
        );
    }

    #[test]
    fn fast_reg_lifecycle_in_table() -> Result {
        let table = KBox::pin_init(StagTable::new(), GFP_KERNEL)?;
        let mr = Mr::new_fast_reg(7, 4)?;
        let stag = table.insert(&mr)?;
        assert!(stag_index(stag) != 0);
        assert_eq!(mr.stag(), stag);
        // Invalid until registered: lookups see it invalid, copies fail.
        assert_eq!(
            ddp::StagTable::lookup(&*table, stag).map(|r| r.valid),
            Some(false)
        );
        assert_eq!(table.copy_to_mr(stag, 0, &[1]), Err(MrError::InvalidStag));
        // Nothing mapped: a non-empty region is out of bounds.
        let req = FastReg {
            key: stag | 0x5A,
            iova: 0x1000,
            length: 16,
            access: ib::LOCAL_WRITE,
        };
        assert_eq!(mr.fast_register(7, &req), Err(MrError::Bounds));
        // Wrong PD, wrong index, bad rights.
        assert_eq!(mr.fast_register(8, &req), Err(MrError::Pd));
        let other = FastReg {
            key: stag.wrapping_add(0x100),
            ..req
        };
        assert_eq!(mr.fast_register(7, &other), Err(MrError::InvalidStag));
        let bad = FastReg {
            access: ib::REMOTE_WRITE,
            length: 0,
            ..req
        };
        assert_eq!(mr.fast_register(7, &bad), Err(MrError::Access));
        // A zero-length registration needs no pages.
        let empty = FastReg { length: 0, ..req };
        assert_eq!(mr.fast_register(7, &empty), Ok(()));
        let new = stag | 0x5A;
        assert_eq!(mr.stag(), new);
        assert!(mr.is_valid(new));
        assert!(!mr.is_valid(stag));
        // Registering again while valid is a state error.
        assert_eq!(mr.fast_register(7, &empty), Err(MrError::State));
        // Old key cannot invalidate; other PD cannot; then it works once.
        assert_eq!(table.invalidate(stag, 7), Err(MrError::InvalidStag));
        assert_eq!(table.invalidate(new, 8), Err(MrError::Pd));
        assert_eq!(table.invalidate(new, 7), Ok(()));
        assert_eq!(table.invalidate(new, 7), Err(MrError::InvalidStag));
        table.deregister(&mr);
        assert!(table.get(new).is_none());
        // Index 0 never resolves.
        assert!(table.get(0x5A).is_none());
        Ok(())
    }

    /// The cache answers from its entries, never against the MRs: a hit
    /// skips the table, a cached MR that fails (invalidated, deregistered)
    /// sends the access to the table, and what the table names replaces it.
    #[test]
    fn mr_cache_is_only_a_shortcut() -> Result {
        let table = KBox::pin_init(StagTable::new(), GFP_KERNEL)?;
        let reg = |mr: &Arc<Mr>, key: u8| -> Result<u32> {
            let stag = table.insert(mr)? | u32::from(key);
            mr.fast_register(
                7,
                &FastReg {
                    key: stag,
                    iova: 0,
                    length: 0,
                    access: ib::LOCAL_WRITE,
                },
            )?;
            Ok(stag)
        };
        let a = Mr::new_fast_reg(7, 1)?;
        let sa = reg(&a, 0x11)?;
        let check = |stag: u32| move |mr: &Mr| mr.check(stag, 7, 0, 0, 0);
        let cache = MrCache::default();
        // A miss asks the table; the MR is then cached.
        assert_eq!(cache.with(sa, || table.get(sa), check(sa)), Ok(()));
        assert_eq!(cache.with(sa, || None, check(sa)), Ok(()));
        // Another STag: two entries, the least recent goes at the third.
        let b = Mr::new_fast_reg(7, 1)?;
        let sb = reg(&b, 0x22)?;
        assert_eq!(cache.with(sb, || table.get(sb), check(sb)), Ok(()));
        assert_eq!(cache.with(sa, || None, check(sa)), Ok(()));
        assert_eq!(cache.with(sb, || None, check(sb)), Ok(()));
        let c = Mr::new_fast_reg(7, 1)?;
        let sc = reg(&c, 0x33)?;
        assert_eq!(cache.with(sc, || table.get(sc), check(sc)), Ok(()));
        assert_eq!(cache.with(sb, || None, check(sb)), Ok(()));
        assert_eq!(
            cache.with(sa, || None, check(sa)),
            Err(MrError::InvalidStag)
        );
        // Invalidated: the cached MR fails, so does the table's (the same).
        table.invalidate(sb, 7)?;
        let mut asked = false;
        assert_eq!(
            cache.with(
                sb,
                || {
                    asked = true;
                    table.get(sb)
                },
                check(sb)
            ),
            Err(MrError::InvalidStag)
        );
        assert!(asked);
        // Deregistered while cached, its STag since naming another MR
        // (`get` plays the table: its cursor comes back to an index only
        // after 2^24 registrations): the access reaches the new MR, which
        // then replaces the old one in the cache.
        table.deregister(&c);
        let d = Mr::new_fast_reg(7, 1)?;
        let _ = reg(&d, 0x33)?;
        assert_eq!(c.check(sc, 7, 0, 0, 0), Err(MrError::InvalidStag));
        assert_eq!(cache.with(sc, || Some(d.clone()), check(sc)), Ok(()));
        assert_eq!(
            cache.with(sc, || None, |mr: &Mr| Ok(core::ptr::eq(mr, &*d))),
            Ok(true)
        );
        for mr in [&a, &b, &d] {
            table.deregister(mr);
        }
        Ok(())
    }

    #[test]
    fn indices_are_unique_and_cycle() -> Result {
        let table = KBox::pin_init(StagTable::new(), GFP_KERNEL)?;
        let a = Mr::new_fast_reg(1, 1)?;
        let b = Mr::new_fast_reg(1, 1)?;
        let sa = table.insert(&a)?;
        let sb = table.insert(&b)?;
        assert!(sa != sb);
        table.deregister(&a);
        // A freed index is not handed out again right away.
        let c = Mr::new_fast_reg(1, 1)?;
        let sc = table.insert(&c)?;
        assert!(sc != sa && sc != sb);
        assert!(table.get(sa).is_none());
        assert!(table.get(sb).is_some());
        // Deregistering twice, or an MR never inserted, is harmless.
        table.deregister(&a);
        let d = Mr::new_fast_reg(1, 1)?;
        table.deregister(&d);
        assert!(table.get(sb).is_some());
        table.deregister(&b);
        table.deregister(&c);
        Ok(())
    }
}

/// Zero-copy transmit: payload sent straight from an MR's pages.
impl Mr {
    /// Appends the `len` octets at `to` through `stag` to `out` as page
    /// references (checks as [`Mr::copy_from_as`] for `grant`) and returns the CRC state
    /// extended over them (if asked). `Ok(None)`: the memory cannot be
    /// sent by reference (slab, or `out` full); nothing was appended.
    pub(crate) fn ref_pages(
        &self,
        stag: u32,
        grant: Grant,
        to: u64,
        len: usize,
        out: &mut Segments,
        crc: Option<u32>,
    ) -> Result<Option<Option<u32>>, MrError> {
        let st = self.state.lock();
        let off = self.checks(&st, stag, Some(grant), to, len as u64)?;
        Ok(match &st.mem {
            Memory::Kernel(k) => k.ref_pages(to, len, out, crc),
            Memory::Pages(p) => p.ref_pages(
                st.first_offset.checked_add(off).ok_or(MrError::Bounds)?,
                len,
                out,
                crc,
            ),
            Memory::None => return Err(MrError::InvalidStag),
        })
    }
}
