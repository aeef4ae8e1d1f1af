// SPDX-License-Identifier: GPL-2.0
//! The RDMA core seen from a driver: `#[vtable]` traits a driver
//! implements ([`Driver`] for the device and its PDs, [`CqOps`], [`SrqOps`],
//! [`QpOps`], [`MrOps`], [`IwCmOps`], [`Settings`] for its sysfs
//! attributes), the generic `extern "C"` adapters the `ib_device_ops`
//! table and the attributes point at, safe views over what the core
//! passes in (work requests, attributes) and out (work completions), and
//! handles over the core's objects.
//!
//! Shaped like the kernel crate's own abstractions
//! (`kernel::block::mq::Operations` + `OperationsVTable<T>`,
//! `kernel::net::phy::Driver` + `Adapter<T>`): nothing here names a type
//! of the driver above; the driver picks its types through [`Driver`]'s
//! associated types.

pub(crate) mod cq;
pub(crate) mod device;
mod event;
pub(crate) mod iw_cm;
pub(crate) mod link;
pub(crate) mod mr;
pub(crate) mod qp;
pub(crate) mod settings;
pub(crate) mod srq;
mod umap;
mod wr;

#[cfg(rsiw_kunit)]
pub(crate) use self::umap::rsiw_sge;
pub(crate) use self::{
    cq::{Arm, Completion, CqNotifier, CqOps, CqSlot, WcOpcode, WcQp, WcStatus, WcWriter},
    device::{
        caps, hw_counters, random_mac, register_device, AtomicCap, DeviceAttr, DeviceInfo, Driver,
        IbDevice, PortAttr, PortState,
    },
    iw_cm::{CmEvent, CmEventKind, CmId, ConnParams, IwCmOps},
    link::{LinkOps, Registration},
    mr::{IbMr, MrOps, MrType},
    qp::{QpAttr, QpAttrMod, QpCaps, QpInitAttr, QpLinks, QpNotifier, QpOps, QpState, ResAttrs},
    settings::{Settings, ShowBuf},
    srq::{SrqAttr, SrqAttrMask, SrqNotifier, SrqOps, SrqSlot},
    umap::{
        abi, rsiw_alloc_ucontext_req, rsiw_alloc_ucontext_resp, rsiw_cqe, rsiw_create_cq_req,
        rsiw_create_cq_resp, rsiw_create_qp_req, rsiw_create_qp_resp, rsiw_create_srq_req,
        rsiw_create_srq_resp, rsiw_ring_info, rsiw_rqe, rsiw_sqe, SharedRing, Udata, UserAbi,
    },
    wr::{AtomicFields, RecvWrRef, SendWrRef, WrOpcode},
};

/// A scatter/gather element, laid out as `struct ib_sge` so that a work
/// request's SGE list is viewed in place.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Sge {
    pub(crate) addr: u64,
    pub(crate) len: u32,
    pub(crate) lkey: u32,
}

const _: () = {
    use core::mem::{offset_of, size_of};
    assert!(size_of::<Sge>() == size_of::<super::sys::ib_sge>());
    assert!(offset_of!(Sge, addr) == offset_of!(super::sys::ib_sge, addr));
    assert!(offset_of!(Sge, len) == offset_of!(super::sys::ib_sge, length));
    assert!(offset_of!(Sge, lkey) == offset_of!(super::sys::ib_sge, lkey));
};
