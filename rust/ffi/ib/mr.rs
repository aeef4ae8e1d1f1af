// SPDX-License-Identifier: GPL-2.0
//! Memory regions: [`MrOps`], the `ib_mr` objects the driver allocates
//! ([`IbMr`]), and the generic MR entry points (`get_dma_mr`,
//! `reg_user_mr`, `alloc_mr`, `map_mr_sg`, `dereg_mr`).

use core::{
    marker::PhantomData,
    ptr,
    sync::atomic::{AtomicPtr, Ordering},
};

use kernel::{error::from_result, ffi::c_int, prelude::*, sync::Arc, types::Opaque};

use super::super::{
    mem::pages::{access, KernelMemory, MrPages, PagesKind, Umem},
    object::CoreObj,
    sys,
};
use super::device::{dev_data, err_ptr, pd_data, Driver};

/// The kind of MR `alloc_mr` asks for (`enum ib_mr_type`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum MrType {
    /// `IB_MR_TYPE_MEM_REG`: registered by fast-register WRs.
    MemReg,
    /// Any other type (SG_GAPS, integrity, ...).
    Other,
}

/// A driver's memory region, held as `Arc<Self>` by the `ib_mr`.
#[vtable]
pub(crate) trait MrOps<D: Driver>: Send + Sync + Sized {
    /// `get_dma_mr`: an MR over all of kernel memory.
    fn get_dma(dev: &D::Device, pd: &D::Pd, access: u32, mem: KernelMemory) -> Result<Arc<Self>>;
    /// `reg_user_mr`, before any page is pinned: may the registration go on?
    fn check_user(dev: &D::Device, length: u64, access: u32) -> Result;
    /// `reg_user_mr` over the pinned `pages` (the first octet `offset`
    /// into the first page).
    fn reg_user(
        dev: &D::Device,
        pd: &D::Pd,
        iova: u64,
        length: u64,
        offset: u64,
        access: u32,
        pages: MrPages,
    ) -> Result<Arc<Self>>;
    /// `alloc_mr`.
    fn alloc(dev: &D::Device, pd: &D::Pd, mr_type: MrType, max_num_sg: u32) -> Result<Arc<Self>>;
    /// Makes a new MR reachable by its key; returns the key (lkey, and
    /// rkey with remote access).
    fn publish(dev: &D::Device, mr: &Arc<Self>) -> Result<u32>;
    /// Gives back what a new MR that was never published holds.
    fn discard(dev: &D::Device);
    /// `dereg_mr`: unreachable, invalid, its memory detached (nothing
    /// touches the pages after this returns).
    fn dereg(dev: &D::Device, mr: &Arc<Self>);
    /// `map_mr_sg`: runs `f` on the MR's page list (which `f` fills), as
    /// the MR's own rules allow; returns what `f` returned.
    fn map_sg(&self, f: &mut dyn FnMut(&mut MrPages) -> Result<(c_int, u64)>) -> Result<c_int>;
}

/// The driver part of an `ib_mr`.
struct MrHandle<D: Driver> {
    mr: Arc<D::Mr>,
    /// Keeps user pages pinned until deregistration.
    _umem: Option<Umem>,
    /// The page list `map_mr_sg` fills, while it runs (for `set_page`).
    mapping: AtomicPtr<MrPages>,
}

type MrObj<D> = CoreObj<sys::ib_mr, MrHandle<D>>;

/// An `ib_mr` of `D`, borrowed: what a QP gets from an `IB_WR_REG_MR`.
///
/// # Invariants
///
/// Wraps an `ib_mr` made by this module for `D`, alive while borrowed.
#[repr(transparent)]
pub(crate) struct IbMr<D: Driver>(Opaque<sys::ib_mr>, PhantomData<D>);

impl<D: Driver> IbMr<D> {
    /// # Safety
    ///
    /// `mr` must be an `ib_mr` of a `D` device, alive for `'a`.
    pub(in crate::ffi) unsafe fn from_raw<'a>(mr: *mut sys::ib_mr) -> &'a Self {
        // SAFETY: transparent wrapper; validity per the contract.
        unsafe { &*mr.cast::<Self>() }
    }

    /// The MR.
    pub(crate) fn mr(&self) -> &Arc<D::Mr> {
        // SAFETY: by the type invariant the `ib_mr` is ours and alive, so
        // its handle is initialised.
        unsafe { &MrObj::<D>::data(self.0.get()).mr }
    }

    /// `iova` and `length` as `ib_map_mr_sg` (and the consumer) left them.
    pub(crate) fn iova_length(&self) -> (u64, u64) {
        // SAFETY: the `ib_mr` is alive; plain fields the consumer owns and
        // does not change while a WR naming the MR is being posted.
        unsafe { ((*self.0.get()).iova, (*self.0.get()).length) }
    }
}

pub(super) fn install_ops<D: Driver>(ops: &mut sys::ib_device_ops) {
    ops.get_dma_mr = Some(get_dma_mr::<D>);
    ops.dereg_mr = Some(dereg_mr::<D>);
    ops.reg_user_mr = Some(reg_user_mr::<D>);
    ops.alloc_mr = Some(alloc_mr::<D>);
    ops.map_mr_sg = Some(map_mr_sg::<D>);
}

/// Wraps `mr` in a new `ib_mr`, then publishes it and sets lkey (and
/// rkey, with remote access) to its key. On failure nothing is published
/// and the MR is given back.
fn publish<D: Driver>(
    dev: &D::Device,
    mr: Arc<D::Mr>,
    umem: Option<Umem>,
    remote: bool,
) -> Result<*mut sys::ib_mr> {
    let handle = MrHandle::<D> {
        mr: mr.clone(),
        _umem: umem,
        mapping: AtomicPtr::new(ptr::null_mut()),
    };
    let ib = MrObj::<D>::new_boxed(handle).inspect_err(|_| D::Mr::discard(dev))?;
    match D::Mr::publish(dev, &mr) {
        Ok(key) => {
            // SAFETY: `ib` is a fresh zeroed `ib_mr` no one else sees yet;
            // the core fills in device, pd and type after we return.
            unsafe {
                (*ib).lkey = key;
                (*ib).rkey = if remote { key } else { 0 };
            }
            Ok(ib)
        }
        Err(e) => {
            // SAFETY: never published; ours alone.
            unsafe { MrObj::<D>::free_boxed(ib) };
            D::Mr::discard(dev);
            Err(e)
        }
    }
}

fn to_ptr(result: Result<*mut sys::ib_mr>) -> *mut sys::ib_mr {
    result.unwrap_or_else(err_ptr)
}

/// # Safety
///
/// Only the RDMA core calls this, as the `get_dma_mr` callback of the
/// `ib_device_ops` this file fills in, with the pointers it passes valid for the
/// call and, for an object, one of `D`'s it created through this file.
unsafe extern "C" fn get_dma_mr<D: Driver>(pd: *mut sys::ib_pd, access: c_int) -> *mut sys::ib_mr {
    // SAFETY: the core passes one of `D`'s live PDs, whose device is `D`'s.
    let (dev, pd) = unsafe { (dev_data::<D>((*pd).device), pd_data::<D>(pd)) };
    let access = access as u32;
    to_ptr(
        D::Mr::get_dma(dev, pd, access, KernelMemory::new())
            .and_then(|mr| publish::<D>(dev, mr, None, access & access::REMOTE != 0)),
    )
}

/// # Safety
///
/// Only the RDMA core calls this, as the `reg_user_mr` callback of the
/// `ib_device_ops` this file fills in, with the pointers it passes valid for the
/// call and, for an object, one of `D`'s it created through this file.
unsafe extern "C" fn reg_user_mr<D: Driver>(
    pd: *mut sys::ib_pd,
    start: u64,
    length: u64,
    virt_addr: u64,
    access: c_int,
    _dmah: *mut sys::ib_dmah,
    _udata: *mut sys::ib_udata,
) -> *mut sys::ib_mr {
    // SAFETY: the core passes one of `D`'s live PDs, whose device is `D`'s.
    let (ib_dev, dev, pd) =
        unsafe { ((*pd).device, dev_data::<D>((*pd).device), pd_data::<D>(pd)) };
    let access = access as u32;
    to_ptr((|| {
        D::Mr::check_user(dev, length, access)?;
        let umem = Umem::get(ib_dev, start, length, access)?;
        let pages = umem.pages(length)?;
        let offset = umem.offset();
        let mr = D::Mr::reg_user(dev, pd, virt_addr, length, offset, access, pages)?;
        publish::<D>(dev, mr, Some(umem), access & access::REMOTE != 0)
    })())
}

/// # Safety
///
/// Only the RDMA core calls this, as the `alloc_mr` callback of the
/// `ib_device_ops` this file fills in, with the pointers it passes valid for the
/// call and, for an object, one of `D`'s it created through this file.
unsafe extern "C" fn alloc_mr<D: Driver>(
    pd: *mut sys::ib_pd,
    mr_type: sys::ib_mr_type,
    max_num_sg: u32,
) -> *mut sys::ib_mr {
    // SAFETY: the core passes one of `D`'s live PDs, whose device is `D`'s.
    let (dev, pd) = unsafe { (dev_data::<D>((*pd).device), pd_data::<D>(pd)) };
    let mr_type = if mr_type == sys::ib_mr_type_IB_MR_TYPE_MEM_REG {
        MrType::MemReg
    } else {
        MrType::Other
    };
    to_ptr(
        D::Mr::alloc(dev, pd, mr_type, max_num_sg).and_then(|mr| publish::<D>(dev, mr, None, true)),
    )
}

/// `ib_sg_to_pages` callback: appends one page address to the list
/// `map_mr_sg` is filling.
///
/// # Safety
///
/// Only the RDMA core calls this, as the `set_page` callback of the
/// `ib_device_ops` this file fills in, with the pointers it passes valid for the
/// call and, for an object, one of `D`'s it created through this file.
unsafe extern "C" fn set_page<D: Driver>(ib: *mut sys::ib_mr, addr: u64) -> c_int {
    // SAFETY: called from `ib_sg_to_pages` inside our `map_mr_sg` on this
    // live MR.
    let h = unsafe { MrObj::<D>::data(ib) };
    let pages = h.mapping.load(Ordering::Relaxed);
    if pages.is_null() {
        return EINVAL.to_errno();
    }
    // SAFETY: `map_mr_sg` set `mapping` to the list it holds exclusively
    // (under the MR's lock, on this thread) for the duration of the call.
    let pages = unsafe { &mut *pages };
    match pages.push_entry(addr as usize) {
        Ok(()) => 0,
        Err(e) => e.to_errno(),
    }
}

/// # Safety
///
/// Only the RDMA core calls this, as the `map_mr_sg` callback of the
/// `ib_device_ops` this file fills in, with the pointers it passes valid for the
/// call and, for an object, one of `D`'s it created through this file.
unsafe extern "C" fn map_mr_sg<D: Driver>(
    ib: *mut sys::ib_mr,
    sg: *mut sys::scatterlist,
    sg_nents: c_int,
    sg_offset: *mut u32,
) -> c_int {
    // SAFETY: `ib` is one of `D`'s live MRs (the core only calls its own
    // device's ops); it has already set `ib->page_size`.
    let (h, page_size) = unsafe { (MrObj::<D>::data(ib), (*ib).page_size as usize) };
    if !page_size.is_power_of_two() {
        return EINVAL.to_errno();
    }
    from_result(|| {
        h.mr.map_sg(&mut |pages| {
            pages.reset(PagesKind::VirtDma, page_size);
            h.mapping.store(ptr::from_mut(pages), Ordering::Relaxed);
            // SAFETY: the core's arguments are passed through; `set_page`
            // only runs during the call, with `mapping` set.
            let n =
                unsafe { sys::ib_sg_to_pages(ib, sg, sg_nents, sg_offset, Some(set_page::<D>)) };
            h.mapping.store(ptr::null_mut(), Ordering::Relaxed);
            // SAFETY: `ib_sg_to_pages` set `iova` to the first octet's address.
            let first = unsafe { (*ib).iova } as usize & (page_size - 1);
            Ok((n, first as u64))
        })
    })
}

/// # Safety
///
/// Only the RDMA core calls this, as the `dereg_mr` callback of the
/// `ib_device_ops` this file fills in, with the pointers it passes valid for the
/// call and, for an object, one of `D`'s it created through this file.
unsafe extern "C" fn dereg_mr<D: Driver>(ib: *mut sys::ib_mr, _udata: *mut sys::ib_udata) -> c_int {
    // SAFETY: `ib` is one of `D`'s; its device is alive. The core calls
    // this once and never uses `ib` after.
    let (dev, h) = unsafe { (dev_data::<D>((*ib).device), MrObj::<D>::data(ib)) };
    // Unreachable and detached from its memory first: no copy runs or
    // starts after this, so the umem can be released.
    D::Mr::dereg(dev, &h.mr);
    // SAFETY: as above; drops the handle (and releases the umem).
    unsafe { MrObj::<D>::free_boxed(ib) };
    0
}
