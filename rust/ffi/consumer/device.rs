// SPDX-License-Identifier: GPL-2.0
//! Kernel consumers' view of a device, for the self-tests: the same calls
//! an in-kernel ULP makes (`ib_query_port`, `ib_alloc_pd`).

use core::ptr;

use kernel::prelude::*;

use crate::ffi::{
    ib::{device::DRIVER_ID, Driver, IbDevice},
    net::netdev::NetDevRef,
    sys,
};

/// A registered device found through the core by its net_device.
pub(crate) struct Found(*mut sys::ib_device);

impl Found {
    pub(crate) fn by_netdev(nd: &NetDevRef) -> Option<Self> {
        // SAFETY: `nd` is alive; the result is held or null.
        let ib = unsafe { sys::ib_device_get_by_netdev(nd.as_raw(), DRIVER_ID) };
        (!ib.is_null()).then(|| Self(ib))
    }

    pub(crate) fn raw(&self) -> *mut sys::ib_device {
        self.0
    }

    /// The device as a `D` device (rsiw's driver id: `D` is rsiw's driver).
    pub(crate) fn device<D: Driver>(&self) -> &IbDevice<D> {
        // SAFETY: the held reference keeps our device alive.
        unsafe { IbDevice::from_raw(self.0) }
    }

    /// `ib_query_port` through the core: (port active, gid_tbl_len).
    pub(crate) fn query_port(&self) -> Result<(bool, i32)> {
        let mut attr = sys::ib_port_attr::default();
        // SAFETY: device held, `attr` a valid local.
        let ret = unsafe { sys::ib_query_port(self.0, 1, &mut attr) };
        kernel::error::to_result(ret)?;
        Ok((
            attr.state == sys::ib_port_state_IB_PORT_ACTIVE,
            attr.gid_tbl_len,
        ))
    }

    /// The transport the core derives from the node type.
    pub(crate) fn is_iwarp(&self) -> bool {
        // SAFETY: device held; `node_type` is plain data set at creation.
        let transport = unsafe { sys::rdma_node_get_transport(u32::from((*self.0).node_type)) };
        transport == sys::rdma_transport_type_RDMA_TRANSPORT_IWARP
    }

    /// Allocates and frees a PD the way kernel ULPs do.
    pub(crate) fn alloc_dealloc_pd(&self, count: impl FnOnce() -> u32) -> Result<u32> {
        // SAFETY: device held; the name is a static C string.
        let pd = unsafe { sys::__ib_alloc_pd(self.0, 0, c"rsiw_kunit".as_char_ptr()) };
        // NULL or ERR_PTR(-errno).
        if pd.is_null() || (pd as usize) > usize::MAX - 4096 {
            return Err(ENOMEM);
        }
        let during = count();
        // SAFETY: `pd` was just allocated and is not used after.
        unsafe { sys::ib_dealloc_pd_user(pd, ptr::null_mut()) };
        Ok(during)
    }

    /// What the core cached from `query_device` about atomics:
    /// (atomic_cap is HCA, masked_atomic_cap is HCA, max_qp_rd_atom,
    /// max_qp_init_rd_atom, max_res_rd_atom).
    pub(crate) fn atomic_attrs(&self) -> (bool, bool, u32, u32, u32) {
        // SAFETY: device held; `attrs` is filled at registration.
        let a = unsafe { &(*self.0).attrs };
        let hca = sys::ib_atomic_cap_IB_ATOMIC_HCA;
        (
            a.atomic_cap == hca,
            a.masked_atomic_cap == hca,
            a.max_qp_rd_atom,
            a.max_qp_init_rd_atom,
            a.max_res_rd_atom,
        )
    }

    /// Unregisters the device (what `rdma link delete` does).
    pub(crate) fn unregister(self) {
        // SAFETY: consumes our reference.
        unsafe { sys::ib_unregister_device_and_put(self.0) };
        core::mem::forget(self);
    }
}

impl Drop for Found {
    fn drop(&mut self) {
        // SAFETY: we hold one reference.
        unsafe { sys::ib_device_put(self.0) };
    }
}
