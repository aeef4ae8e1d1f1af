// SPDX-License-Identifier: GPL-2.0
//! The verbs, in safe Rust: what each `ib_device_ops` entry does once
//! `ffi::device` has turned its raw arguments into rsiw's types.

use kernel::{prelude::*, sync::Arc};

use crate::{
    device::{Device, PortAttrs},
    ffi::{
        mr::{KernelMemory, MrPages},
        netdev::NetDev,
    },
};

pub(crate) use crate::mr::Mr;

/// A protection domain: a number, unique among the device's live PDs,
/// that MRs and QPs compare (the engine's `pd`).
pub(crate) struct Pd {
    id: u32,
}

impl Pd {
    pub(crate) fn id(&self) -> u32 {
        self.id
    }
}

/// A userspace context (one per open uverbs file).
pub(crate) struct Ucontext;

/// Runs `make` within the device's `max_mr`; the MR is accounted until
/// [`discard_mr`] or [`dereg_mr`].
fn new_mr(dev: &Device, make: impl FnOnce() -> Result<Arc<Mr>>) -> Result<Arc<Mr>> {
    dev.alloc_mr()?;
    make().inspect_err(|_| dev.dealloc_mr())
}

/// A DMA MR (the core makes one per kernel PD for its local DMA key, and
/// one with remote rights for `IB_PD_UNSAFE_GLOBAL_RKEY`).
/// A DMA MR spans all of kernel memory, which rsiw cannot vouch for:
/// persistent flush is refused on it (global flush is fine).
pub(crate) fn get_dma_mr(dev: &Device, pd: u32, access: u32, mem: KernelMemory) -> Result<Arc<Mr>> {
    crate::mr::check_access_flags(access)?;
    if access & crate::ffi::mr::access::FLUSH_PERSISTENT != 0 {
        crate::flush::refused_persistent("DMA MR");
        return Err(EOPNOTSUPP);
    }
    new_mr(dev, || Mr::new_dma(pd, access, mem))
}

/// Checks a user registration's arguments before any page is pinned.
pub(crate) fn check_user_mr(_dev: &Device, length: u64, access: u32) -> Result {
    crate::mr::check_access_flags(access)?;
    if length == 0 || length > isize::MAX as u64 {
        return Err(EINVAL);
    }
    Ok(())
}

/// A user MR over pinned pages.
pub(crate) fn reg_user_mr(
    dev: &Device,
    pd: u32,
    iova: u64,
    length: u64,
    first_offset: u64,
    access: u32,
    pages: MrPages,
) -> Result<Arc<Mr>> {
    new_mr(dev, || Mr::new_user(pd, iova, length, first_offset, access, pages))
}

/// A fast-register MR (`IB_MR_TYPE_MEM_REG`) for up to `max_num_sg` pages.
pub(crate) fn alloc_mr(dev: &Device, pd: u32, max_num_sg: u32) -> Result<Arc<Mr>> {
    if max_num_sg == 0 || max_num_sg > dev.limits().max_fast_reg_page_list_len {
        return Err(EINVAL);
    }
    new_mr(dev, || Mr::new_fast_reg(pd, max_num_sg as usize))
}

/// Publishes an MR in the STag table; returns its STag.
pub(crate) fn publish_mr(dev: &Device, mr: &Arc<Mr>) -> Result<u32> {
    dev.stags().insert(mr)
}

/// Gives back the accounting of an MR that was never published.
pub(crate) fn discard_mr(dev: &Device) {
    dev.dealloc_mr();
}

/// Deregisters a published MR: out of the table, invalid, memory
/// detached (no copy runs after this returns).
pub(crate) fn dereg_mr(dev: &Device, mr: &Arc<Mr>) {
    dev.stags().deregister(mr);
    dev.dealloc_mr();
}

pub(crate) fn alloc_pd(dev: &Device) -> Result<Pd> {
    dev.alloc_pd()?;
    Ok(Pd { id: dev.next_pd_id() })
}

pub(crate) fn dealloc_pd(dev: &Device) {
    dev.dealloc_pd();
}

pub(crate) fn alloc_ucontext(dev: &Device) -> Result<Ucontext> {
    dev.alloc_ucontext()?;
    Ok(Ucontext)
}

pub(crate) fn dealloc_ucontext(dev: &Device) {
    dev.dealloc_ucontext();
}

/// Port attributes follow the net_device: link state, MTU.
pub(crate) fn query_port(netdev: &NetDev) -> PortAttrs {
    PortAttrs {
        state: netdev.port_state(),
        mtu: netdev.mtu(),
        max_mtu: netdev.max_mtu(),
        gid_tbl_len: 1,
    }
}
