// SPDX-License-Identifier: GPL-2.0
//! Kernel consumers' MR verbs for the self-tests.

use core::ptr;

use kernel::{ffi::c_int, prelude::*};

use crate::ffi::consumer::device::Found;
use crate::ffi::{
    ib::{device::pd_data, Driver, IbMr},
    sys,
};

/// A PD from `ib_alloc_pd`.
pub(crate) struct KPd(*mut sys::ib_pd);

fn is_err<T>(p: *mut T) -> bool {
    p.is_null() || (p as usize) > usize::MAX - 4095
}

impl KPd {
    pub(crate) fn alloc(dev: &Found, unsafe_global_rkey: bool) -> Result<Self> {
        let flags = if unsafe_global_rkey {
            sys::ib_pd_flags_IB_PD_UNSAFE_GLOBAL_RKEY
        } else {
            0
        };
        // SAFETY: device held by `dev`; static name.
        let pd = unsafe { sys::__ib_alloc_pd(dev.raw(), flags, c"rsiw_kunit".as_char_ptr()) };
        if is_err(pd) {
            return Err(ENOMEM);
        }
        Ok(Self(pd))
    }

    pub(crate) fn raw(&self) -> *mut sys::ib_pd {
        self.0
    }

    /// The driver's PD behind it (made on a `D` device).
    pub(crate) fn pd<D: Driver>(&self) -> &D::Pd {
        // SAFETY: the PD is alive until drop, made on a `D` device.
        unsafe { pd_data::<D>(self.0) }
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

    /// The MR as a `D` device's (a `D` device made it).
    pub(crate) fn ib<D: Driver>(&self) -> &IbMr<D> {
        // SAFETY: alive until drop, made on a `D` device.
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
            if n < 0 {
                Err(Error::from_errno(n))
            } else {
                Ok(n)
            }
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
