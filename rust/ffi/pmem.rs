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

use super::sys;

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
pub(super) fn virt_is_persistent(addr: usize, len: usize) -> bool {
    let Some(end) = addr.checked_add(len) else { return false };
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

/// A pmem block device's DAX mapping for the self-tests: the kernel
/// address of its first octets, as a DAX filesystem would use them.
#[cfg(CONFIG_KUNIT = "y")]
pub(crate) mod testing {
    use super::*;
    use kernel::{ffi::c_void, prelude::*};


    pub(crate) struct PmemDev {
        file: *mut sys::file,
        dax: *mut sys::dax_device,
        kaddr: *mut u8,
        len: usize,
    }

    fn err_of<T>(p: *mut T) -> Option<Error> {
        if p.is_null() {
            Some(ENODEV)
        } else if (p as usize) > usize::MAX - 4095 {
            Some(Error::from_errno(p as isize as i32))
        } else {
            None
        }
    }

    impl PmemDev {
        /// Opens the block device `devt` (a pmem device with struct pages:
        /// an fsdax namespace) and maps its first `len` octets. By number,
        /// not path: KUnit cases run in kthreads, whose root is not the
        /// guest's root filesystem.
        pub(crate) fn open(devt: u32, len: usize) -> Result<Self> {
            // SAFETY: plain arguments; returns a file or an ERR_PTR.
            let file = unsafe { sys::rsiw_bdev_open_rw(devt) };
            if let Some(e) = err_of(file) {
                return Err(e);
            }
            let mut start: u64 = 0;
            // SAFETY: `file` is an open block device file.
            let dax = unsafe { sys::rsiw_fs_dax_get(file, &mut start) };
            if dax.is_null() || start != 0 {
                // SAFETY: opened above; `dax` null or ours.
                unsafe {
                    if !dax.is_null() {
                        sys::rsiw_fs_put_dax(dax);
                    }
                    sys::fput(file);
                }
                return Err(EOPNOTSUPP); // not DAX-capable (raw mode?)
            }
            let pages = len.div_ceil(PAGE_SIZE);
            let mut kaddr: *mut c_void = core::ptr::null_mut();
            let mut pfn: kernel::ffi::c_ulong = 0;
            // SAFETY: `dax` is a live dax device we hold a reference on.
            let n = unsafe { sys::rsiw_dax_direct_access(dax, 0, pages as _, &mut kaddr, &mut pfn) };
            let dev = Self { file, dax, kaddr: kaddr.cast(), len };
            if n < pages as _ || kaddr.is_null() {
                return Err(if n < 0 { Error::from_errno(n as i32) } else { ERANGE });
            }
            Ok(dev)
        }

        /// The mapped octets. The device (and the RDMA device, through an
        /// MR) writes here behind Rust's back: compare through this slice
        /// only after the writes completed.
        pub(crate) fn bytes(&mut self) -> &mut [u8] {
            // SAFETY: `dax_direct_access` mapped `len` octets at `kaddr`
            // (kernel memory, valid while the device is open); `&mut self`
            // keeps this the only slice.
            unsafe { core::slice::from_raw_parts_mut(self.kaddr, self.len) }
        }

        /// Whether rsiw counts the mapping as persistent memory.
        pub(crate) fn is_persistent(&self) -> bool {
            virt_is_persistent(self.kaddr as usize, self.len)
        }
    }

    impl Drop for PmemDev {
        fn drop(&mut self) {
            // SAFETY: taken in `open`, released once.
            unsafe {
                sys::rsiw_fs_put_dax(self.dax);
                sys::fput(self.file);
            }
        }
    }

    /// Whether a kernel address (e.g. of a kmalloc buffer) counts as
    /// persistent memory.
    pub(crate) fn virt_persistent(addr: usize, len: usize) -> bool {
        virt_is_persistent(addr, len)
    }
}
