// SPDX-License-Identifier: GPL-2.0
//! `struct net_device`, as far as rsiw needs it.

use core::ptr::NonNull;

#[cfg(rsiw_kunit)]
use kernel::str::CStrExt;
use kernel::types::Opaque;

use super::super::ib::PortState;
use super::super::sys;

/// A borrowed net_device.
///
/// # Invariants
///
/// Wraps a live, registered `struct net_device`; a `&NetDev` is only handed
/// out for as long as a reference to the net_device is held by someone.
#[repr(transparent)]
pub(crate) struct NetDev(Opaque<sys::net_device>);

impl NetDev {
    /// # Safety
    ///
    /// `ptr` must be a valid net_device that stays alive for `'a`.
    pub(crate) unsafe fn from_raw<'a>(ptr: *mut sys::net_device) -> &'a Self {
        // SAFETY: `NetDev` is a transparent wrapper; validity per contract.
        unsafe { &*ptr.cast::<Self>() }
    }

    pub(crate) fn as_raw(&self) -> *mut sys::net_device {
        self.0.get()
    }

    /// The interface name, NUL-padded as in the C struct.
    pub(crate) fn name(&self) -> [u8; sys::IFNAMSIZ as usize] {
        // SAFETY: by the type invariant the net_device is alive; the name
        // is a fixed-size array inside it.
        let name = unsafe { (*self.as_raw()).name };
        // `c_char` is `u8` in the kernel on every architecture.
        name
    }

    /// The hardware address if it is a 6-byte MAC.
    pub(crate) fn mac(&self) -> Option<[u8; 6]> {
        let dev = self.as_raw();
        // SAFETY: by the type invariant the net_device is alive.
        let (len, addr) = unsafe { ((*dev).addr_len, (*dev).dev_addr) };
        if usize::from(len) < 6 || addr.is_null() {
            return None;
        }
        let mut mac = [0u8; 6];
        // SAFETY: `dev_addr` holds `addr_len` >= 6 valid bytes while the
        // device is registered.
        unsafe { core::ptr::copy_nonoverlapping(addr, mac.as_mut_ptr(), 6) };
        Some(mac)
    }

    pub(crate) fn mtu(&self) -> u32 {
        // SAFETY: by the type invariant the net_device is alive. A racing
        // MTU change gives the old or the new value; both are fine.
        unsafe { core::ptr::read_volatile(&raw const (*self.as_raw()).mtu) }
    }

    pub(crate) fn max_mtu(&self) -> u32 {
        // SAFETY: as for `mtu`.
        unsafe { (*self.as_raw()).max_mtu }
    }

    /// Whether rsiw can run over this kind of link: Ethernet-like and
    /// loopback devices carry TCP/IP, which is all iWARP needs.
    pub(crate) fn qualified(&self) -> bool {
        // SAFETY: by the type invariant the net_device is alive.
        let ty = u32::from(unsafe { (*self.as_raw()).type_ });
        matches!(
            ty,
            sys::ARPHRD_ETHER | sys::ARPHRD_IEEE802 | sys::ARPHRD_NONE | sys::ARPHRD_LOOPBACK
        )
    }

    /// The interface index.
    pub(crate) fn ifindex(&self) -> i32 {
        // SAFETY: by the type invariant the net_device is alive.
        unsafe { (*self.as_raw()).ifindex }
    }

    pub(crate) fn port_state(&self) -> PortState {
        // SAFETY: by the type invariant the net_device is alive.
        match unsafe { sys::rsiw_port_state(self.as_raw()) } {
            sys::ib_port_state_IB_PORT_ACTIVE => PortState::Active,
            _ => PortState::Down,
        }
    }
}

/// An owned reference to a net_device (`dev_put` on drop).
///
/// # Invariants
///
/// Holds one reference to a live net_device.
pub(crate) struct NetDevRef(NonNull<sys::net_device>);

impl NetDevRef {
    /// Takes over a reference the caller holds.
    ///
    /// # Safety
    ///
    /// `ptr` must be a net_device with a reference owned by the caller,
    /// which the new `NetDevRef` takes over.
    pub(crate) unsafe fn from_owned(ptr: *mut sys::net_device) -> Option<Self> {
        NonNull::new(ptr).map(Self)
    }

    #[cfg(rsiw_kunit)]
    /// Looks up a device by name in the initial network namespace.
    pub(crate) fn by_name(name: &kernel::str::CStr) -> Option<Self> {
        // SAFETY: `init_net` is a valid static namespace and `name` is a
        // NUL-terminated string; the result carries a reference or is null.
        let ptr =
            unsafe { sys::dev_get_by_name(&raw mut sys::init_net, name.as_char_ptr().cast()) };
        // SAFETY: `dev_get_by_name` returns a reference we now own.
        unsafe { Self::from_owned(ptr) }
    }
}

impl core::ops::Deref for NetDevRef {
    type Target = NetDev;

    fn deref(&self) -> &NetDev {
        // SAFETY: the held reference keeps the net_device alive as long as
        // `self`.
        unsafe { NetDev::from_raw(self.0.as_ptr()) }
    }
}

impl Drop for NetDevRef {
    fn drop(&mut self) {
        // SAFETY: by the type invariant we own one reference.
        unsafe { sys::rsiw_dev_put(self.0.as_ptr()) };
    }
}

// SAFETY: a net_device reference may be dropped and used from any thread.
unsafe impl Send for NetDevRef {}
// SAFETY: `NetDev`'s methods only read through the pointer.
unsafe impl Sync for NetDevRef {}

/// The ifindex of the net_device in `net` that owns the local address
/// `addr` (an IPv4-mapped IPv6 address counts as IPv4).
pub(crate) fn owner_of(net: super::socket::Net, addr: &super::socket::SockAddr) -> Option<i32> {
    let (raw, _) = addr.to_raw();
    // SAFETY: `net` is live (its invariant); `raw` is a valid address.
    let ifindex = unsafe { sys::rsiw_addr_owner(net.as_ptr(), &raw) };
    (ifindex > 0).then_some(ifindex)
}
