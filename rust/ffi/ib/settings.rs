// SPDX-License-Identifier: GPL-2.0
//! A device's settings as sysfs attributes of its `ib_device`
//! (`/sys/class/infiniband/NAME/ATTR`): [`Settings`], the trait a driver
//! implements (the names, reading and writing one), and the attribute
//! group each device carries (`ib_device_ops.device_group`), built when
//! the device is and freed with it.

use core::{fmt, ptr};

use kernel::{
    ffi::c_char,
    prelude::*,
    str::{CStr, CStrExt},
    types::Opaque,
};

use super::super::sys;
use super::device::{dev_data, Driver};

/// A driver's per-device settings.
pub(crate) trait Settings: Driver {
    /// The attributes' names, in the order [`Settings::show`] and
    /// [`Settings::store`] number them. Each is readable by everyone and
    /// writable by root only (mode 0644).
    const NAMES: &'static [&'static CStr];
    /// Writes the current value of setting `index` of `dev` to `out`, as
    /// one line.
    fn show(dev: &Self::Device, index: usize, out: &mut ShowBuf<'_>) -> fmt::Result;
    /// Sets setting `index` of `dev` from what a writer gave (as written,
    /// with any trailing newline; at most a page).
    fn store(dev: &Self::Device, index: usize, input: &[u8]) -> Result;
}

/// The page a sysfs `show` fills: writes beyond it fail, never overflow.
pub(crate) struct ShowBuf<'a> {
    buf: &'a mut [u8],
    len: usize,
}

impl fmt::Write for ShowBuf<'_> {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        let end = self.len.checked_add(s.len()).ok_or(fmt::Error)?;
        let dst = self.buf.get_mut(self.len..end).ok_or(fmt::Error)?;
        dst.copy_from_slice(s.as_bytes());
        self.len = end;
        Ok(())
    }
}

/// A `device_attribute` and the setting it stands for.
#[repr(C)]
struct SettingAttr {
    /// First: sysfs passes a pointer to it, which is one to the whole.
    dev_attr: sys::device_attribute,
    index: usize,
}

/// A device's attribute group: its attributes, the NULL-terminated list
/// of them the group points at, and the group, each on the heap at an
/// address that does not change while the group lives.
///
/// # Invariants
///
/// `_list` holds a pointer to each attribute of `_attrs`, then NULL;
/// `group.attrs` points at `_list`'s first element. Neither vector is
/// resized after [`SettingsGroup::new`]; both are only read through the
/// group.
pub(super) struct SettingsGroup {
    _attrs: KVec<SettingAttr>,
    _list: KVec<*mut sys::attribute>,
    group: Opaque<sys::attribute_group>,
}

// SAFETY: the pointers inside point at the group's own heap memory, which
// sysfs only reads; nothing of it is thread-bound.
unsafe impl Send for SettingsGroup {}
// SAFETY: as above; `&SettingsGroup` only hands out the group's address.
unsafe impl Sync for SettingsGroup {}

impl SettingsGroup {
    /// The attributes of `D`'s settings.
    pub(super) fn new<D: Settings>() -> Result<KBox<Self>> {
        let n = D::NAMES.len();
        let mut attrs = KVec::with_capacity(n, GFP_KERNEL)?;
        for index in 0..n {
            let dev_attr = sys::device_attribute::default();
            attrs.push(SettingAttr { dev_attr, index }, GFP_KERNEL)?;
        }
        let mut list = KVec::with_capacity(n + 1, GFP_KERNEL)?;
        for (a, name) in attrs.iter_mut().zip(D::NAMES) {
            let dev_attr = ptr::addr_of_mut!(a.dev_attr);
            // SAFETY: `dev_attr` is valid for writes, at its final address
            // (the vector is full and never grows); the name is static.
            unsafe {
                sys::rsiw_setting_attr_init(
                    dev_attr,
                    name.as_char_ptr().cast(),
                    Some(show::<D>),
                    Some(store::<D>),
                )
            };
            list.push(ptr::addr_of_mut!(a.dev_attr.attr), GFP_KERNEL)?;
        }
        list.push(ptr::null_mut(), GFP_KERNEL)?;
        let mut group = sys::attribute_group::default();
        // SAFETY: `group` is a local; `list` is NULL-terminated and stays
        // where it is while the group lives (the invariant).
        unsafe { sys::rsiw_attr_group_init(&mut group, list.as_mut_ptr()) };
        // INVARIANT: `list` as built above; moving the vectors into the
        // box moves their headers, not the elements the pointers name.
        Ok(KBox::new(
            Self {
                _attrs: attrs,
                _list: list,
                group: Opaque::new(group),
            },
            GFP_KERNEL,
        )?)
    }

    /// The group, for `ib_device_ops.device_group`: valid while `self` is.
    pub(super) fn as_ptr(&self) -> *const sys::attribute_group {
        self.group.get()
    }
}

/// The `SettingAttr` and the device data behind a sysfs call.
///
/// # Safety
///
/// `dev` must be the `struct device` of a live, registered device of `D`,
/// and `attr` one of the attributes of its [`SettingsGroup`], both valid
/// for `'a`.
unsafe fn setting<'a, D: Driver>(
    dev: *mut sys::device,
    attr: *mut sys::device_attribute,
) -> (&'a D::Device, usize) {
    // SAFETY: per the contract: `dev` is embedded in one of `D`'s
    // ib_devices (its core device, or a compat device of it in another
    // network namespace, whose owner is the same ib_device), which is
    // registered, so its data is initialised.
    let data = unsafe { dev_data::<D>(sys::rsiw_device_to_ibdev(dev)) };
    // SAFETY: `attr` is the first field of a `SettingAttr` (`repr(C)`).
    let index = unsafe { (*attr.cast::<SettingAttr>()).index };
    (data, index)
}

/// # Safety
///
/// Only sysfs calls this, as the `show` of an attribute in a
/// [`SettingsGroup`] of `D`, for the device the group belongs to, which it
/// keeps registered for the call, with `buf` a page.
unsafe extern "C" fn show<D: Settings>(
    dev: *mut sys::device,
    attr: *mut sys::device_attribute,
    buf: *mut c_char,
) -> isize {
    // SAFETY: per the function's contract.
    let (data, index) = unsafe { setting::<D>(dev, attr) };
    // SAFETY: sysfs hands `show` a page of its own, zeroed, for the call;
    // the last octet is left alone (sysfs warns of a full page).
    let page =
        unsafe { core::slice::from_raw_parts_mut(buf.cast::<u8>(), kernel::page::PAGE_SIZE - 1) };
    let mut out = ShowBuf { buf: page, len: 0 };
    match D::show(data, index, &mut out) {
        Ok(()) => out.len as isize,
        Err(fmt::Error) => EOVERFLOW.to_errno() as isize,
    }
}

/// # Safety
///
/// Only sysfs calls this, as the `store` of an attribute in a
/// [`SettingsGroup`] of `D`, for the device the group belongs to, which it
/// keeps registered for the call, with `buf` holding `count` octets.
unsafe extern "C" fn store<D: Settings>(
    dev: *mut sys::device,
    attr: *mut sys::device_attribute,
    buf: *const c_char,
    count: usize,
) -> isize {
    // SAFETY: per the function's contract.
    let (data, index) = unsafe { setting::<D>(dev, attr) };
    // SAFETY: sysfs passes `count` readable octets (at most a page) for
    // the call.
    let input = unsafe { core::slice::from_raw_parts(buf.cast::<u8>(), count) };
    match D::store(data, index, input) {
        Ok(()) => count as isize,
        Err(e) => e.to_errno() as isize,
    }
}
