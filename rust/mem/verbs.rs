// SPDX-License-Identifier: GPL-2.0
//! The MR verbs: rsiw's implementation of the RDMA core's MR trait
//! (`get_dma_mr`, `reg_user_mr`, `alloc_mr`, `map_mr_sg`, `dereg_mr`),
//! within the device's `max_mr`.

use kernel::{ffi::c_int, prelude::*, sync::Arc};

use super::mr::{check_access_flags, Mr, MAX_MR_SIZE};
use crate::{
    device::{verbs::Pd, Device, Rsiw},
    ffi::{
        ib::{MrOps, MrType},
        mem::pages::{access, KernelMemory, MrPages},
    },
};

/// Runs `make` within the device's `max_mr`; the MR is accounted until
/// `discard` or `dereg`.
fn new_mr(dev: &Device, make: impl FnOnce() -> Result<Arc<Mr>>) -> Result<Arc<Mr>> {
    dev.alloc_mr()?;
    make().inspect_err(|_| dev.dealloc_mr())
}

/// Access flags for features rsiw does not have (memory windows,
/// on-demand paging) are refused with `EOPNOTSUPP`, the verbs' way of
/// saying "not supported" (applications and test suites skip on it);
/// other unknown or inconsistent flags stay `EACCES`/`EINVAL`.
fn refuse_unsupported(access: u32) -> Result {
    if access & (access::MW_BIND | access::ON_DEMAND) != 0 {
        return Err(EOPNOTSUPP);
    }
    Ok(())
}

#[vtable]
impl MrOps<Rsiw> for Mr {
    /// A DMA MR (the core makes one per kernel PD for its local DMA key,
    /// and one with remote rights for `IB_PD_UNSAFE_GLOBAL_RKEY`). It spans
    /// all of kernel memory, which rsiw cannot vouch for: persistent flush
    /// is refused on it (global flush is fine).
    fn get_dma(dev: &Device, pd: &Pd, access: u32, mem: KernelMemory) -> Result<Arc<Self>> {
        refuse_unsupported(access)?;
        check_access_flags(access)?;
        if access & access::FLUSH_PERSISTENT != 0 {
            super::commit::refused_persistent("DMA MR");
            return Err(EOPNOTSUPP);
        }
        new_mr(dev, || Mr::new_dma(pd.id(), access, mem))
    }

    /// A user registration's arguments, checked before any page is pinned.
    fn check_user(_dev: &Device, length: u64, access: u32) -> Result {
        refuse_unsupported(access)?;
        check_access_flags(access)?;
        if length == 0 || length > MAX_MR_SIZE {
            return Err(EINVAL);
        }
        Ok(())
    }

    /// A user MR over pinned pages.
    fn reg_user(
        dev: &Device,
        pd: &Pd,
        iova: u64,
        length: u64,
        offset: u64,
        access: u32,
        pages: MrPages,
    ) -> Result<Arc<Self>> {
        new_mr(dev, || {
            Mr::new_user(pd.id(), iova, length, offset, access, pages)
        })
    }

    /// A fast-register MR (`IB_MR_TYPE_MEM_REG`) for up to `max_num_sg`
    /// pages; no other type.
    fn alloc(dev: &Device, pd: &Pd, mr_type: MrType, max_num_sg: u32) -> Result<Arc<Self>> {
        if mr_type != MrType::MemReg {
            return Err(EOPNOTSUPP);
        }
        if max_num_sg == 0 || max_num_sg > dev.limits().max_fast_reg_page_list_len {
            return Err(EINVAL);
        }
        new_mr(dev, || Mr::new_fast_reg(pd.id(), max_num_sg as usize))
    }

    /// Publishes the MR in the STag table; its STag is the key.
    fn publish(dev: &Device, mr: &Arc<Self>) -> Result<u32> {
        dev.stags().insert(mr)
    }

    fn discard(dev: &Device) {
        dev.dealloc_mr();
    }

    /// Out of the table, invalid, memory detached (no copy runs after
    /// this returns).
    fn dereg(dev: &Device, mr: &Arc<Self>) {
        dev.stags().deregister(mr);
        dev.dealloc_mr();
    }

    fn map_sg(&self, f: &mut dyn FnMut(&mut MrPages) -> Result<(c_int, u64)>) -> Result<c_int> {
        self.map_fast_reg(f)
    }
}
