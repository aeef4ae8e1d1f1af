// SPDX-License-Identifier: GPL-2.0
//! The verbs, in safe Rust: what each `ib_device_ops` entry does once
//! `ffi::device` has turned its raw arguments into rsiw's types.

use kernel::prelude::*;

use crate::{
    device::{Device, PortAttrs},
    ffi::netdev::NetDev,
};

/// A protection domain. It carries no state yet: MRs and QPs check their
/// PD by identity (the core's `ib_pd` pointer).
pub(crate) struct Pd;

/// A userspace context (one per open uverbs file).
pub(crate) struct Ucontext;

/// A memory region. Only DMA MRs exist yet (the core makes one per kernel
/// PD for its local DMA key): all of memory, local access, no remote
/// access unless asked for. Registered MRs come with the STag table.
pub(crate) struct Mr {
    stag: u32,
    access: u32,
}

impl Mr {
    pub(crate) fn stag(&self) -> u32 {
        self.stag
    }

    pub(crate) fn access(&self) -> u32 {
        self.access
    }
}

pub(crate) fn get_dma_mr(dev: &Device, access: u32) -> Result<Mr> {
    let stag = dev.alloc_mr()?;
    Ok(Mr { stag, access })
}

pub(crate) fn dereg_mr(dev: &Device) {
    dev.dealloc_mr();
}

pub(crate) fn alloc_pd(dev: &Device) -> Result<Pd> {
    dev.alloc_pd()?;
    Ok(Pd)
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
