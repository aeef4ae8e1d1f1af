// SPDX-License-Identifier: GPL-2.0
//! Persistent memory at the C boundary, for RDMA Commit (`IB_WR_FLUSH`):
//! which pages are persistent, writing CPU caches back to them, and the
//! barriers that order a commit's answer after its data.
//!
//! A page counts as persistent when the kernel mapped it as DAX memory
//! (a ZONE_DEVICE page whose pgmap is fs-DAX or device-DAX, i.e. an
//! NVDIMM namespace in fsdax or devdax mode) and its physical range lies
//! in persistent-memory resources only (`IORES_DESC_PERSISTENT_MEMORY`,
//! or `_LEGACY` for `memmap=!` emulation). Both are needed: virtio-fs DAX
//! windows are fs-DAX pages in host memory, and device-DAX also serves
//! volatile soft-reserved memory. Without the kernel's persistent-memory
//! API (`CONFIG_ARCH_HAS_PMEM_API`) nothing is.

use super::super::sys;

const PAGE_SIZE: usize = kernel::page::PAGE_SIZE;

/// Whether this kernel can write caches back to persistent memory.
pub(crate) fn flush_supported() -> bool {
    // SAFETY: reads a compile-time configuration value.
    unsafe { sys::rsiw_has_pmem_api() }
}

/// `ib_device_attr.device_cap_flags` bits for RDMA Commit: global flush
/// always (placement is CPU stores), persistent flush where the kernel can
/// write caches back to persistent memory.
pub(crate) fn device_flush_caps() -> u64 {
    let mut caps = sys::ib_device_cap_flags_IB_DEVICE_FLUSH_GLOBAL as u64;
    if flush_supported() {
        caps |= sys::ib_device_cap_flags_IB_DEVICE_FLUSH_PERSISTENT as u64;
    }
    caps
}

/// Whether `page` is persistent memory (see the module comment).
///
/// # Safety
///
/// `page` must be null or a valid `struct page` (a pinned page, or the
/// page of a mapped direct-map address) for the call.
pub(super) unsafe fn page_is_persistent(page: *mut sys::page) -> bool {
    if page.is_null() || !flush_supported() {
        return false;
    }
    // SAFETY: `page` is valid per the contract; both predicates only read
    // the page and the iomem resource tree (under its lock).
    unsafe {
        sys::rsiw_page_is_dax(page)
            && sys::rsiw_phys_is_pmem(sys::rsiw_page_to_phys(page), PAGE_SIZE)
    }
}

/// Whether every page of the kernel virtual range `[addr, addr + len)`
/// is persistent memory. Addresses outside the direct map are not.
pub(in crate::ffi) fn virt_is_persistent(addr: usize, len: usize) -> bool {
    let Some(end) = addr.checked_add(len) else {
        return false;
    };
    let mut page_addr = addr & !(PAGE_SIZE - 1);
    while page_addr < end {
        // SAFETY: `rsiw_virt_to_page` checks `virt_addr_valid` and returns
        // null for anything else; the page it returns is a valid `struct
        // page` of the direct map.
        let ok = unsafe { page_is_persistent(sys::rsiw_virt_to_page(page_addr as *const _)) };
        if !ok {
            return false;
        }
        page_addr += PAGE_SIZE;
    }
    true
}

/// Orders the write-backs issued so far before anything that follows:
/// once it returns, they reached the persistence domain (`pmem_wmb`).
pub(crate) fn persistence_barrier() {
    // SAFETY: a barrier.
    unsafe { sys::rsiw_pmem_wmb() }
}

/// Orders the stores issued so far (data placement) before anything that
/// follows (the commit's answer): global visibility (`wmb`).
pub(crate) fn visibility_barrier() {
    // SAFETY: a barrier.
    unsafe { sys::rsiw_wmb() }
}
