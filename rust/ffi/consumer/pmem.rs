// SPDX-License-Identifier: GPL-2.0
//! A pmem block device's DAX mapping for the self-tests: the kernel
//! address of its first octets, as a DAX filesystem would use them.

use crate::ffi::{mem::pmem::*, sys};
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
        let pages = len.div_ceil(kernel::page::PAGE_SIZE);
        let mut kaddr: *mut c_void = core::ptr::null_mut();
        let mut pfn: kernel::ffi::c_ulong = 0;
        let want = kernel::ffi::c_long::try_from(pages).unwrap_or(kernel::ffi::c_long::MAX);
        // SAFETY: `dax` is a live dax device we hold a reference on.
        let n = unsafe { sys::rsiw_dax_direct_access(dax, 0, want, &mut kaddr, &mut pfn) };
        let dev = Self {
            file,
            dax,
            kaddr: kaddr.cast(),
            len,
        };
        if n < want || kaddr.is_null() {
            return Err(if n < 0 {
                Error::from_errno(n as i32)
            } else {
                ERANGE
            });
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
