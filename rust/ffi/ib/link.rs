// SPDX-License-Identifier: GPL-2.0
//! Module-wide registrations: a driver's rdma link type
//! (`rdma link add NAME type TYPE netdev IF`, [`LinkOps`]) and the
//! net_device notifier that removes a device when its net_device goes away.

use core::marker::PhantomData;

use kernel::{
    ffi::{c_char, c_int, c_ulong, c_void},
    prelude::*,
    str::{CStr, CStrExt},
    types::Opaque,
};

use super::super::{net::netdev::NetDev, sys};
use super::device;

/// A driver's rdma link type.
#[vtable]
pub(crate) trait LinkOps: Send + Sync + Sized + 'static {
    /// The link type's name, as `rdma link add ... type NAME` spells it
    /// (the module alias `rdma-link-NAME` lets the core load the module
    /// on demand).
    const TYPE: &'static CStr;
    /// `rdma link add NAME type TYPE netdev IF`: creates and registers a
    /// device named `name` on `netdev`.
    fn newlink(name: &CStr, netdev: &NetDev) -> Result;
}

/// Holds the link type and the notifier registered while it lives.
///
/// # Invariants
///
/// Both C structs are registered from `new` until `drop`, at addresses
/// that do not move (they are boxed).
pub(crate) struct Registration<T: LinkOps> {
    link_ops: KBox<Opaque<sys::rdma_link_ops>>,
    notifier: KBox<Opaque<sys::notifier_block>>,
    _ops: PhantomData<T>,
}

// SAFETY: the registered structs are only touched by the C side under its
// own locks, and by `drop`, which may run on any thread.
unsafe impl<T: LinkOps> Send for Registration<T> {}
// SAFETY: `&Registration` gives no access to anything.
unsafe impl<T: LinkOps> Sync for Registration<T> {}

impl<T: LinkOps> Registration<T> {
    pub(crate) fn new() -> Result<Self> {
        let ops = sys::rdma_link_ops {
            type_: T::TYPE.as_char_ptr().cast(),
            newlink: Some(newlink::<T>),
            ..Default::default()
        };
        let link_ops = KBox::new(Opaque::new(ops), GFP_KERNEL)?;

        let nb = sys::notifier_block {
            notifier_call: Some(netdev_event),
            ..Default::default()
        };
        let notifier = KBox::new(Opaque::new(nb), GFP_KERNEL)?;

        // SAFETY: `notifier` is boxed, so its address is stable until we
        // unregister it in `drop`.
        kernel::error::to_result(unsafe { sys::register_netdevice_notifier(notifier.get()) })?;
        // SAFETY: as above for `link_ops`; the `type` string is static.
        unsafe { sys::rdma_link_register(link_ops.get()) };
        // INVARIANT: both are registered now.
        Ok(Self {
            link_ops,
            notifier,
            _ops: PhantomData,
        })
    }
}

impl<T: LinkOps> Drop for Registration<T> {
    fn drop(&mut self) {
        // SAFETY: registered in `new` (type invariant). No new device can be
        // linked after this returns; then every existing one is removed
        // before the notifier that would remove them goes.
        unsafe { sys::rdma_link_unregister(self.link_ops.get()) };
        device::unregister_all();
        // SAFETY: registered in `new`.
        unsafe { sys::unregister_netdevice_notifier(self.notifier.get()) };
    }
}

/// # Safety
///
/// Only the RDMA netlink core calls this, as the `newlink` callback of the
/// `rdma_link_ops` this file fills in, with the pointers it passes valid for the
/// call and, for an object, one of `D`'s it created through this file.
unsafe extern "C" fn newlink<T: LinkOps>(name: *const c_char, ndev: *mut sys::net_device) -> c_int {
    // SAFETY: the core passes a NUL-terminated name and a net_device it
    // holds a reference to for the duration of the call.
    let (name, nd) = unsafe { (CStr::from_char_ptr(name.cast()), NetDev::from_raw(ndev)) };
    match T::newlink(name, nd) {
        Ok(()) => 0,
        Err(e) => e.to_errno(),
    }
}

/// # Safety
///
/// Only the RDMA netlink core calls this, as the `netdev_event` callback of the
/// `rdma_link_ops` this file fills in, with the pointers it passes valid for the
/// call and, for an object, one of `D`'s it created through this file.
unsafe extern "C" fn netdev_event(
    _nb: *mut sys::notifier_block,
    event: c_ulong,
    info: *mut c_void,
) -> c_int {
    if event == sys::netdev_cmd_NETDEV_UNREGISTER as c_ulong {
        // SAFETY: netdevice notifiers get a `netdev_notifier_info` whose
        // device is alive for the call.
        let nd = unsafe { NetDev::from_raw(sys::rsiw_notifier_dev(info)) };
        device::unregister_for_netdev(nd);
    }
    sys::NOTIFY_DONE as c_int
}
