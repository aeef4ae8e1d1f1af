// SPDX-License-Identifier: GPL-2.0
//! Zero-copy transmit at the C boundary: references to the pages payload
//! is sent from, the page a round's literal octets (headers, markers, pad,
//! CRC, copied payload) are written to, and the batch of page segments
//! handed to TCP by reference (`MSG_ZEROCOPY` with a notification, or
//! `MSG_SPLICE_PAGES` for literal octets only) or for TCP to copy (a
//! route whose receiver is in this host: see [`Batch::set_copy`]).
//!
//! TCP takes its own page reference for every segment it splices and
//! keeps it until the skb is freed, so a [`PageRef`] is only needed until
//! `sock_sendmsg` has taken its segment: between the fill under the stream
//! lock and the send, the MR may be deregistered and its pages unpinned.
//! The *contents* are another matter: TCP retransmits from the pages, and
//! an skb looped to a local receiver would carry them into its queue. So a
//! batch with the consumer's pages goes with a [`Notif`] (`MSG_ZEROCOPY`
//! with the sender's own `ubuf_info`, as io_uring's send zerocopy): TCP
//! reports when no skb refers to the pages any more, a local receiver gets
//! a copy, and only then does the owner ([`ZcOwner`]) complete what
//! waited for the pages.

use core::ptr::NonNull;

use kernel::{ffi::c_void, prelude::*, sync::Arc};

use super::super::{crc::ModuleCrc32c, sys};
use crate::engine::crc::Crc32c as _;

const PAGE_SIZE: usize = kernel::page::PAGE_SIZE;

/// A counted reference on a page TCP may splice (not slab, in use).
///
/// # Invariants
///
/// Holds one reference on the page, dropped on drop.
pub(crate) struct PageRef(NonNull<sys::page>);

// SAFETY: a page reference may be taken and dropped from any context.
unsafe impl Send for PageRef {}
// SAFETY: `&PageRef` only reads the page through the kernel's helpers.
unsafe impl Sync for PageRef {}

impl PageRef {
    /// A reference on `page` if TCP may splice it (`sendpage_ok`).
    ///
    /// # Safety
    ///
    /// `page` is null or a valid page that stays allocated for the call
    /// (pinned or mapped by the caller).
    pub(super) unsafe fn new(page: *mut sys::page) -> Option<Self> {
        let p = NonNull::new(page)?;
        // SAFETY: `page` is valid (caller); sendpage_ok only reads flags.
        if !unsafe { sys::rsiw_sendpage_ok(page) } {
            return None;
        }
        // SAFETY: as above; the reference is ours until drop.
        unsafe { sys::rsiw_get_page(page) };
        Some(Self(p))
    }

    /// The page holding kernel virtual address `addr` (direct map or
    /// vmalloc), if TCP may splice it.
    ///
    /// # Safety
    ///
    /// `addr` is kernel memory the caller may read (it stays mapped and
    /// allocated for the call).
    pub(super) unsafe fn of_kaddr(addr: usize) -> Option<Self> {
        // SAFETY: `addr` is valid kernel memory (caller); the helper only
        // translates it.
        unsafe { Self::new(sys::rsiw_kaddr_to_page(addr as *const kernel::ffi::c_void)) }
    }

    /// CRC32c state `crc` extended over `len` octets at `off`, by the
    /// module's CRC32c.
    fn crc(&self, off: usize, len: usize, crc: u32) -> u32 {
        debug_assert!(off + len <= PAGE_SIZE);
        // SAFETY: we hold a reference, so the page stays allocated; `off +
        // len` is within it (the segment constructors keep it so). Mapped
        // and unmapped around the read on this thread, nothing sleeps in
        // between, and the slice does not outlive the mapping.
        unsafe {
            let base = sys::rsiw_kmap_local_page(self.0.as_ptr()).cast::<u8>();
            let crc = ModuleCrc32c.append(crc, core::slice::from_raw_parts(base.add(off), len));
            sys::rsiw_kunmap_local(base.cast());
            crc
        }
    }

    fn as_ptr(&self) -> *mut sys::page {
        self.0.as_ptr()
    }
}

impl Clone for PageRef {
    fn clone(&self) -> Self {
        // SAFETY: we hold a reference, so the page is valid.
        unsafe { sys::rsiw_get_page(self.0.as_ptr()) };
        Self(self.0)
    }
}

impl Drop for PageRef {
    fn drop(&mut self) {
        // SAFETY: the reference taken at construction (type invariant).
        unsafe { sys::rsiw_put_page(self.0.as_ptr()) };
    }
}

/// `len` octets at `off` in a referenced page.
pub(crate) struct Segment {
    page: PageRef,
    off: u32,
    len: u32,
}

impl Segment {
    /// A segment of `page`; `None` if it does not fit in one page.
    pub(super) fn new(page: PageRef, off: usize, len: usize) -> Option<Self> {
        if len == 0 || off.checked_add(len)? > PAGE_SIZE {
            return None;
        }
        Some(Self {
            page,
            off: off as u32,
            len: len as u32,
        })
    }

    pub(crate) fn len(&self) -> usize {
        self.len as usize
    }

    /// CRC32c state `crc` extended over the segment's octets.
    pub(crate) fn crc(&self, crc: u32) -> u32 {
        self.page.crc(self.off as usize, self.len as usize, crc)
    }
}

/// A bounded list of segments in stream order (no allocation after
/// creation: it is filled under the stream's spinlock).
pub(crate) struct Segments {
    list: KVec<Segment>,
}

impl Segments {
    /// An empty list that allocates nothing until [`Self::reserve_total`].
    pub(crate) const fn new() -> Self {
        Self { list: KVec::new() }
    }

    /// Room for `n` segments in all (allocates: process context, no
    /// spinlock held); nothing to do once there is.
    pub(crate) fn reserve_total(&mut self, n: usize) -> Result {
        if self.list.capacity() < n {
            self.list.reserve(n - self.list.len(), GFP_KERNEL_ACCOUNT)?;
        }
        Ok(())
    }

    /// Appends `seg`; gives it back when full.
    pub(crate) fn push(&mut self, seg: Segment) -> Result<(), Segment> {
        self.list.push_within_capacity(seg).map_err(|e| e.0)
    }

    pub(crate) fn len(&self) -> usize {
        self.list.len()
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.list.is_empty()
    }

    /// Drops the segments from `n` on (a declined offer rolls back).
    pub(crate) fn truncate(&mut self, n: usize) {
        self.list.truncate(n);
    }

    /// Takes the segments out in order (the list keeps its room); what
    /// the [`Drain`] does not move is dropped with it.
    pub(crate) fn drain(&mut self) -> Drain<'_> {
        Drain(self.list.drain_all())
    }

    pub(crate) fn clear(&mut self) {
        self.list.clear();
    }

    /// Octets in all segments.
    pub(crate) fn octets(&self) -> usize {
        self.list.iter().map(Segment::len).sum()
    }
}

/// The segments of a [`Segments`], taken off its front in order.
pub(crate) struct Drain<'a>(kernel::alloc::kvec::DrainAll<'a, Segment>);

impl Drain<'_> {
    /// Moves segments covering exactly `len` octets to `dst`; `false` if
    /// they do not (nothing is lost: the caller fails the round).
    pub(crate) fn move_front(&mut self, mut len: usize, dst: &mut Segments) -> bool {
        while len > 0 {
            let Some(seg) = self.0.next() else {
                return false;
            };
            if seg.len() > len {
                return false;
            }
            len -= seg.len();
            if dst.push(seg).is_err() {
                return false;
            }
        }
        true
    }

    /// Whether every segment was moved.
    pub(crate) fn is_empty(&self) -> bool {
        self.0.size_hint().0 == 0
    }
}

/// Appends `len` octets at kernel virtual address `addr`, page by page,
/// to `out` and returns the CRC state extended over them (if asked);
/// `None` (with `out` as before) when a page cannot be spliced or `out`
/// is full.
///
/// # Safety
///
/// `[addr, addr + len)` is kernel memory the caller may read for the call.
pub(in crate::ffi) unsafe fn ref_kernel_range(
    mut addr: usize,
    mut len: usize,
    out: &mut Segments,
    mut crc: Option<u32>,
) -> Option<Option<u32>> {
    let mark = out.len();
    while len > 0 {
        let off = addr % PAGE_SIZE;
        let n = (PAGE_SIZE - off).min(len);
        // SAFETY: `addr` is inside the caller's range.
        let seg = unsafe { PageRef::of_kaddr(addr) }.and_then(|p| Segment::new(p, off, n));
        let Some(seg) = seg else {
            out.truncate(mark);
            return None;
        };
        crc = crc.map(|c| seg.crc(c));
        if out.push(seg).is_err() {
            out.truncate(mark);
            return None;
        }
        addr += n;
        len -= n;
    }
    Some(crc)
}

/// Appends `len` octets at `off` of `page` (within it) to `out`, as
/// [`ref_kernel_range`].
///
/// # Safety
///
/// `page` is a valid page pinned by the caller for the call.
pub(in crate::ffi) unsafe fn ref_page_range(
    page: *mut sys::page,
    off: usize,
    len: usize,
    out: &mut Segments,
    crc: Option<u32>,
) -> Option<Option<u32>> {
    // SAFETY: `page` is valid (caller).
    let seg = Segment::new(unsafe { PageRef::new(page) }?, off, len)?;
    let crc = crc.map(|c| seg.crc(c));
    out.push(seg).ok()?;
    Some(crc)
}

/// The page a QP writes literal octets to. Append-only: octets handed to
/// TCP are never rewritten (TCP may retransmit them); a full page is
/// replaced by a fresh one, which TCP's own references keep the old one
/// alive for.
pub(crate) struct LiteralPage {
    page: Option<PageRef>,
    used: usize,
}

impl LiteralPage {
    pub(crate) const fn new() -> Self {
        Self {
            page: None,
            used: 0,
        }
    }

    /// Makes sure at least `min` octets are free (allocates: process
    /// context, no spinlock held).
    pub(crate) fn ensure(&mut self, min: usize) -> Result {
        if self.page.is_some() && PAGE_SIZE - self.used >= min {
            return Ok(());
        }
        // SAFETY: allocating a page has no preconditions.
        let raw = unsafe { sys::rsiw_alloc_tx_page() };
        // SAFETY: a page we just allocated (count 1, not slab).
        let page = unsafe { PageRef::new(raw) };
        if !raw.is_null() {
            // SAFETY: drop the allocation's reference: `PageRef::new` took
            // its own (or, if it refused, this frees the page).
            unsafe { sys::rsiw_put_page(raw) };
        }
        self.page = Some(page.ok_or(ENOMEM)?);
        self.used = 0;
        Ok(())
    }

    /// The free octets, to be filled in order.
    pub(crate) fn free_mut(&mut self) -> &mut [u8] {
        let Some(page) = self.page.as_ref() else {
            return &mut [];
        };
        // SAFETY: a lowmem page (GFP_KERNEL) we allocated, so it has a
        // kernel address; octets from `used` on were never handed to
        // anyone (TCP only references octets before `used`), so this is
        // the only access to them while `&mut self` is borrowed.
        unsafe {
            let base = sys::rsiw_page_address(page.as_ptr()).cast::<u8>();
            core::slice::from_raw_parts_mut(base.add(self.used), PAGE_SIZE - self.used)
        }
    }

    /// The next `len` octets written into [`Self::free_mut`], as a segment
    /// (they are never written again).
    pub(crate) fn take(&mut self, len: usize) -> Option<Segment> {
        let page = self.page.as_ref()?.clone();
        let seg = Segment::new(page, self.used, len)?;
        self.used += len;
        Some(seg)
    }
}

/// What is told when the pages of a batch are released.
pub(crate) trait ZcOwner: Send + Sync + 'static {
    /// No skb refers to the pages of the batch `token` any more; `copied`:
    /// the stack copied them on the way (a local receiver). Any context
    /// (it runs where TCP frees or copies the last skb).
    fn released(this: &Arc<Self>, token: u64, copied: bool);
}

/// A zero-copy notification: TCP holds a reference for every skb that
/// refers to the batch's pages, the batch one until it is sent.
///
/// # Invariants
///
/// Holds one reference on a live `rsiw_zc_notif`, which owns a reference
/// on its owner (`Arc::into_raw`) given back in `release_tramp`.
pub(crate) struct Notif(pub(in crate::ffi) NonNull<sys::rsiw_zc_notif>);

// SAFETY: the notification is refcounted by the kernel and may be put
// from any thread.
unsafe impl Send for Notif {}
// SAFETY: `&Notif` allows nothing.
unsafe impl Sync for Notif {}

impl Notif {
    /// A notification for `owner` (process context: allocates).
    pub(crate) fn new<T: ZcOwner>(owner: Arc<T>) -> Result<Self> {
        let raw = Arc::into_raw(owner);
        // SAFETY: `release_tramp::<T>` matches the callback type; it gets
        // `raw` back exactly once, when the last reference goes.
        let n = unsafe { sys::rsiw_zc_alloc(Some(release_tramp::<T>), raw.cast_mut().cast()) };
        match NonNull::new(n) {
            Some(n) => Ok(Self(n)),
            None => {
                // SAFETY: not handed to C: take the reference back.
                drop(unsafe { Arc::from_raw(raw) });
                Err(ENOMEM)
            }
        }
    }

    /// The batch id `released` reports (set before the first send).
    pub(crate) fn set_token(&mut self, token: u64) {
        // SAFETY: we hold a reference (type invariant).
        unsafe { sys::rsiw_zc_set_token(self.0.as_ptr(), token) };
    }
}

impl Drop for Notif {
    fn drop(&mut self) {
        // SAFETY: the reference this value holds (type invariant).
        unsafe { sys::rsiw_zc_put(self.0.as_ptr()) };
    }
}

/// The C callback: gives the owner reference back and reports.
///
/// # Safety
///
/// Only the C zero-copy notification calls this, once per `Notif`, with
/// the `owner` pointer `Notif::new` gave it.
unsafe extern "C" fn release_tramp<T: ZcOwner>(owner: *mut c_void, token: u64, copied: bool) {
    // SAFETY: `owner` came from `Arc::into_raw` in `Notif::new` and the
    // kernel calls this once per notification.
    let this = unsafe { Arc::<T>::from_raw(owner.cast_const().cast()) };
    T::released(&this, token, copied);
}

/// Notifications not yet released, device-wide (module unload waits).
pub(crate) fn live_notifs() -> i32 {
    // SAFETY: reads an atomic counter.
    unsafe { sys::rsiw_zc_live() }
}

/// Segments being sent, in stream order, with the `bio_vec`s for
/// `sock_sendmsg`; what the socket did not take stays for the next send.
pub(crate) struct Batch {
    segs: Segments,
    vecs: KVec<sys::bio_vec>,
    /// Octets of `segs` already sent.
    sent: usize,
    /// With the consumer's pages: tells when TCP is done with them.
    notif: Option<Notif>,
    /// With the consumer's pages, for TCP to copy as it takes them.
    copy: bool,
}

// SAFETY: the `bio_vec`s only name pages the segments hold references on;
// page references may be used and dropped from any thread.
unsafe impl Send for Batch {}
// SAFETY: as above; `&Batch` does not touch the pages.
unsafe impl Sync for Batch {}

impl Batch {
    /// An empty batch that allocates nothing until [`Self::reserve_total`].
    pub(crate) const fn new() -> Self {
        Self {
            segs: Segments::new(),
            vecs: KVec::new(),
            sent: 0,
            notif: None,
            copy: false,
        }
    }

    /// Room for `n` segments in all (process context, no spinlock held).
    pub(crate) fn reserve_total(&mut self, n: usize) -> Result {
        self.segs.reserve_total(n)?;
        if self.vecs.capacity() < n {
            self.vecs.reserve(n - self.vecs.len(), GFP_KERNEL_ACCOUNT)?;
        }
        Ok(())
    }

    pub(crate) fn segments(&mut self) -> &mut Segments {
        &mut self.segs
    }

    /// Octets still to send.
    pub(crate) fn remaining(&self) -> usize {
        self.segs.octets() - self.sent
    }

    /// Drops everything (sent, or the connection is gone); the sender's
    /// reference on the notification goes with it.
    pub(crate) fn clear(&mut self) {
        self.segs.clear();
        self.vecs.clear();
        self.sent = 0;
        self.notif = None;
        self.copy = false;
    }

    /// The batch carries the consumer's pages: `notif` reports when TCP
    /// is done with them.
    pub(crate) fn set_notif(&mut self, notif: Notif) {
        self.notif = Some(notif);
    }

    /// The batch carries the consumer's pages and TCP copies them as it
    /// takes them (no `MSG_SPLICE_PAGES`, no notification): once all of
    /// the batch is sent, nothing refers to the pages. For a receiver in
    /// this host, where the stack would copy a zero-copy skb anyway
    /// (`skb_orphan_frags_rx`), this is the one copy on the way out,
    /// instead of rsiw's into its buffer and then TCP's.
    pub(crate) fn set_copy(&mut self) {
        self.copy = true;
    }

    /// The unsent octets as `bio_vec`s: (array, count, octets,
    /// notification or null, whether TCP copies them).
    pub(super) fn bio_vecs(
        &mut self,
    ) -> (*mut sys::bio_vec, u32, usize, *mut sys::rsiw_zc_notif, bool) {
        self.vecs.clear();
        let mut skip = self.sent;
        let mut total = 0;
        for s in self.segs.list.iter() {
            if skip >= s.len() {
                skip -= s.len();
                continue;
            }
            let v = sys::bio_vec {
                bv_page: s.page.as_ptr(),
                bv_len: s.len - skip as u32,
                bv_offset: s.off + skip as u32,
            };
            total += v.bv_len as usize;
            skip = 0;
            // Same capacity as `segs`: never fails.
            let _ = self.vecs.push_within_capacity(v);
        }
        let notif = self
            .notif
            .as_ref()
            .map_or(core::ptr::null_mut(), |n| n.0.as_ptr());
        (
            self.vecs.as_mut_ptr(),
            self.vecs.len() as u32,
            total,
            notif,
            self.copy,
        )
    }

    /// `n` more octets were sent; the batch is cleared once all are.
    pub(super) fn advance(&mut self, n: usize) {
        self.sent += n;
        if self.sent >= self.segs.octets() {
            self.clear();
        }
    }
}
