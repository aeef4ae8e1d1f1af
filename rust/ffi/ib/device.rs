// SPDX-License-Identifier: GPL-2.0
//! The `ib_device`: [`Driver`], the trait a driver implements for the
//! device, its PDs and user contexts; [`IbDevice`], the device as the
//! driver borrows it; registration; and the `ib_device_ops` table, whose
//! entries are the generic adapters of this folder.

use core::{marker::PhantomData, mem::size_of, ptr};

use kernel::{
    error::from_result,
    ffi::c_int,
    prelude::*,
    str::{CStr, CStrExt},
    sync::Arc,
    types::Opaque,
};

use super::super::{
    net::netdev::{NetDev, NetDevRef},
    object::{CoreObj, Slot},
    sys,
};
use super::{
    cq::CqOps,
    iw_cm::IwCmOps,
    mr::MrOps,
    qp::QpOps,
    settings::{Settings, SettingsGroup},
    srq::SrqOps,
    umap::Udata,
};

/// Driver id of rsiw's devices (its uapi header), reported to userspace
/// and used to find the devices again.
pub(crate) const DRIVER_ID: u32 = sys::RSIW_DRIVER_ID;
/// uverbs ABI version of the userspace interface (its uapi header).
const ABI_VERSION: u32 = sys::RSIW_ABI_VERSION;
/// The uverbs write commands of a user data path through the kernel's
/// verbs, beyond the core's default set: posting to a QP or SRQ, polling
/// and arming a CQ.
const USER_DATA_PATH_CMDS: u64 = (1 << sys::ib_uverbs_write_cmds_IB_USER_VERBS_CMD_POST_SEND)
    | (1 << sys::ib_uverbs_write_cmds_IB_USER_VERBS_CMD_POST_RECV)
    | (1 << sys::ib_uverbs_write_cmds_IB_USER_VERBS_CMD_POST_SRQ_RECV)
    | (1 << sys::ib_uverbs_write_cmds_IB_USER_VERBS_CMD_POLL_CQ)
    | (1 << sys::ib_uverbs_write_cmds_IB_USER_VERBS_CMD_REQ_NOTIFY_CQ);

/// `ib_device_attr.device_cap_flags` and `kernel_cap_flags` bits.
pub(crate) mod caps {
    use super::sys;
    pub(crate) const MEM_MGT_EXTENSIONS: u64 =
        sys::ib_device_cap_flags_IB_DEVICE_MEM_MGT_EXTENSIONS as u64;
    /// Kernel capability: user MRs may outlive their PD's uverbs object.
    pub(crate) const ALLOW_USER_UNREG: u64 = sys::ib_kernel_cap_flags_IBK_ALLOW_USER_UNREG as u64;
}

/// The port hw counters, indexed as the C names (`enum rsiw_hw_counter`)
/// that `alloc_hw_port_stats` registers.
pub(crate) mod hw_counters {
    use super::sys;
    pub(crate) const COUNT: usize = sys::rsiw_hw_counter_RSIW_HW_COUNTERS as usize;
    pub(crate) const TX_ZCOPY_OCTETS: usize = sys::rsiw_hw_counter_RSIW_HW_TX_ZCOPY_OCTETS as usize;
    pub(crate) const TX_ZCOPY_BATCHES: usize =
        sys::rsiw_hw_counter_RSIW_HW_TX_ZCOPY_BATCHES as usize;
    pub(crate) const TX_ZCOPY_COPIED: usize = sys::rsiw_hw_counter_RSIW_HW_TX_ZCOPY_COPIED as usize;
    pub(crate) const TERMINATE_SENT: usize = sys::rsiw_hw_counter_RSIW_HW_TERMINATE_SENT as usize;
    pub(crate) const TERMINATE_RECEIVED: usize =
        sys::rsiw_hw_counter_RSIW_HW_TERMINATE_RECEIVED as usize;
    pub(crate) const RX_CRC_ERRORS: usize = sys::rsiw_hw_counter_RSIW_HW_RX_CRC_ERRORS as usize;
    pub(crate) const RX_PROTOCOL_ERRORS: usize =
        sys::rsiw_hw_counter_RSIW_HW_RX_PROTOCOL_ERRORS as usize;
    pub(crate) const MPA_REJECT_SENT: usize = sys::rsiw_hw_counter_RSIW_HW_MPA_REJECT_SENT as usize;
    pub(crate) const MPA_REJECT_RECEIVED: usize =
        sys::rsiw_hw_counter_RSIW_HW_MPA_REJECT_RECEIVED as usize;
    pub(crate) const CM_TIMEOUTS: usize = sys::rsiw_hw_counter_RSIW_HW_CM_TIMEOUTS as usize;
    pub(crate) const CM_FAILURES: usize = sys::rsiw_hw_counter_RSIW_HW_CM_FAILURES as usize;
    pub(crate) const CM_ESTABLISHED: usize = sys::rsiw_hw_counter_RSIW_HW_CM_ESTABLISHED as usize;
    pub(crate) const RX_WORK_OCTETS: usize = sys::rsiw_hw_counter_RSIW_HW_RX_WORK_OCTETS as usize;
}

/// Atomic capability (`enum ib_atomic_cap`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) enum AtomicCap {
    #[default]
    None,
    /// Atomic with respect to other atomics through this device.
    Hca,
    /// Atomic with respect to every access.
    #[allow(dead_code)]
    Glob,
}

/// What `query_device` reports (`struct ib_device_attr`, the fields an
/// iWARP device sets).
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct DeviceAttr {
    pub(crate) device_cap_flags: u64,
    pub(crate) kernel_cap_flags: u64,
    pub(crate) atomic_cap: AtomicCap,
    pub(crate) masked_atomic_cap: AtomicCap,
    pub(crate) max_mr_size: u64,
    pub(crate) page_size_cap: u64,
    pub(crate) vendor_id: u32,
    pub(crate) vendor_part_id: u32,
    pub(crate) sys_image_guid: [u8; 8],
    pub(crate) max_qp: u32,
    pub(crate) max_qp_wr: u32,
    pub(crate) max_send_sge: u32,
    pub(crate) max_recv_sge: u32,
    pub(crate) max_sge_rd: u32,
    pub(crate) max_cq: u32,
    pub(crate) max_cqe: u32,
    pub(crate) max_mr: u32,
    pub(crate) max_pd: u32,
    pub(crate) max_qp_rd_atom: u32,
    pub(crate) max_qp_init_rd_atom: u32,
    pub(crate) max_res_rd_atom: u32,
    pub(crate) max_srq: u32,
    pub(crate) max_srq_wr: u32,
    pub(crate) max_srq_sge: u32,
    pub(crate) max_fast_reg_page_list_len: u32,
}

/// A port's logical state (`enum ib_port_state`, as far as a net_device
/// can tell).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum PortState {
    Down,
    Active,
}

/// What `query_port` reports beyond what the adapter derives (speed and
/// width from the net_device, the iWARP port capabilities).
#[derive(Clone, Copy, Debug)]
pub(crate) struct PortAttr {
    pub(crate) state: PortState,
    pub(crate) gid_tbl_len: u32,
    /// `enum ib_mtu` values.
    pub(crate) max_mtu: u32,
    pub(crate) active_mtu: u32,
}

/// The driver behind a class of devices: its object types and the verbs
/// of the device itself.
#[vtable]
pub(crate) trait Driver: Sized + Send + Sync + 'static {
    /// The device's Rust part.
    type Device: Send + Sync;
    /// A protection domain's Rust part.
    type Pd: Send + Sync;
    /// A user context's Rust part.
    type Ucontext: Send + Sync;
    type Cq: CqOps<Self>;
    type Srq: SrqOps<Self>;
    type Qp: QpOps<Self>;
    type Mr: MrOps<Self>;

    /// `query_device`.
    fn query_device(dev: &Self::Device) -> DeviceAttr;
    /// `query_port` of the one port.
    fn query_port(dev: &IbDevice<Self>) -> Result<PortAttr>;
    /// `query_gid`.
    fn query_gid(dev: &Self::Device, index: u32) -> Result<[u8; 16]>;
    /// The port hw counter `index` (see [`hw_counters`]).
    fn hw_counter(dev: &Self::Device, index: usize) -> u64;
    /// `alloc_pd`.
    fn alloc_pd(dev: &Self::Device) -> Result<Self::Pd>;
    /// `dealloc_pd`, before the PD's Rust part is dropped.
    fn dealloc_pd(dev: &Self::Device, pd: &Self::Pd);
    /// `alloc_ucontext`.
    /// `alloc_ucontext`, with the provider's request and the response
    /// (`udata`; none from a process that passed no driver data).
    fn alloc_ucontext(dev: &Self::Device, udata: &mut Udata<'_>) -> Result<Self::Ucontext>;
    /// `dealloc_ucontext`, before the context's Rust part is dropped.
    fn dealloc_ucontext(dev: &Self::Device, uctx: &Self::Ucontext);
    /// `disassociate_ucontext`: the device leaves a process that still has
    /// it open (moved to another network namespace, unregistered); the core
    /// has destroyed the context's objects and zapped its core-managed
    /// mappings, the driver drops any mapping of its own. Having it lets
    /// the core do that instead of waiting for the process to close.
    fn disassociate_ucontext(dev: &Self::Device, uctx: &Self::Ucontext);
    /// The QP numbered `qpn` (`iw_get_qp`, the iw_cm's connect and accept).
    fn qp_by_num(dev: &Self::Device, qpn: u32) -> Option<Arc<Self::Qp>>;
}

pub(super) type DevObj<D> = CoreObj<sys::ib_device, DevData<D>>;

/// What a device's allocation holds after the `ib_device`: the driver's
/// part and the sysfs attributes of its settings, which the core's
/// `device_group` points at until the device is freed.
pub(super) struct DevData<D: Driver> {
    data: D::Device,
    _settings: KBox<SettingsGroup>,
}

pub(super) type PdObj<D> = CoreObj<sys::ib_pd, <D as Driver>::Pd>;
type UctxObj<D> = CoreObj<sys::ib_ucontext, <D as Driver>::Ucontext>;

/// A device of driver `D`, borrowed from the RDMA core.
///
/// # Invariants
///
/// The wrapped `ib_device` was allocated by [`register_device`] for `D`
/// (so it is a `DevObj<D>` with initialised data) and is alive while the
/// `&IbDevice` is.
#[repr(transparent)]
pub(crate) struct IbDevice<D: Driver>(Opaque<sys::ib_device>, PhantomData<D>);

impl<D: Driver> IbDevice<D> {
    /// # Safety
    ///
    /// `ib` must be an ib_device registered for `D` that stays alive for `'a`.
    pub(in crate::ffi) unsafe fn from_raw<'a>(ib: *mut sys::ib_device) -> &'a Self {
        // SAFETY: transparent wrapper; validity per the contract.
        unsafe { &*ib.cast::<Self>() }
    }

    pub(super) fn as_raw(&self) -> *mut sys::ib_device {
        self.0.get()
    }

    /// The driver's part of the device.
    pub(crate) fn data(&self) -> &D::Device {
        // SAFETY: by the type invariant this is a live `DevObj<D>` whose
        // data was initialised before the core could see it.
        &unsafe { DevObj::<D>::data(self.as_raw()) }.data
    }

    /// The net_device the port is bound to, with a reference held.
    pub(crate) fn netdev(&self) -> Option<NetDevRef> {
        // SAFETY: the device is alive; the core returns a held reference
        // or null.
        let nd = unsafe { sys::ib_device_get_netdev(self.as_raw(), 1) };
        // SAFETY: we own the reference `ib_device_get_netdev` took.
        unsafe { NetDevRef::from_owned(nd) }
    }
}

/// The driver's part of a PD the core passes with an object.
///
/// # Safety
///
/// `pd` must be a live PD of a device of `D`, initialised by `alloc_pd`,
/// alive for `'a`.
pub(in crate::ffi) unsafe fn pd_data<'a, D: Driver>(pd: *mut sys::ib_pd) -> &'a D::Pd {
    // SAFETY: per the contract.
    unsafe { PdObj::<D>::data(pd) }
}

/// The driver's part of the device of a core object (`obj->device`).
///
/// # Safety
///
/// `ib` must be a live device of `D`, alive for `'a`.
pub(super) unsafe fn dev_data<'a, D: Driver>(ib: *mut sys::ib_device) -> &'a D::Device {
    // SAFETY: per the contract.
    unsafe { IbDevice::<D>::from_raw(ib) }.data()
}

/// What a new device shows besides the driver's part.
pub(crate) struct DeviceInfo<T> {
    /// The driver's part.
    pub(crate) data: T,
    /// `node_guid` (and the base of the GIDs), in network byte order.
    pub(crate) node_guid: [u8; 8],
    /// `node_desc`, as `ibv_devinfo` and sysfs show it.
    pub(crate) node_desc: &'static [u8],
    /// The name came from the user (`rdma link add NAME`), not a pattern.
    pub(crate) user_named: bool,
}

/// A random locally administered MAC, for a net_device that has none.
pub(crate) fn random_mac() -> [u8; 6] {
    let mut random = [0u8; 6];
    // SAFETY: `random` is 6 writable bytes, as `eth_random_addr` needs.
    unsafe { sys::rsiw_random_mac(random.as_mut_ptr()) };
    random
}

/// The ops table of `D`, with the device's settings group. Built at run
/// time because `owner` is only known to the loaded module;
/// `ib_set_device_ops` copies it into the device.
fn device_ops<D: IwCmOps + Settings>(settings: *const sys::attribute_group) -> sys::ib_device_ops {
    let mut ops = sys::ib_device_ops {
        owner: <<D as Driver>::OwnerModule as kernel::ModuleMetadata>::THIS_MODULE
            .as_ptr()
            .cast(),
        driver_id: DRIVER_ID,
        uverbs_abi_ver: ABI_VERSION,
        ..Default::default()
    };

    ops.device_group = settings;
    ops.dealloc_driver = Some(dealloc_driver::<D>);
    ops.query_device = Some(query_device::<D>);
    ops.query_port = Some(query_port::<D>);
    ops.get_port_immutable = Some(get_port_immutable::<D>);
    ops.query_gid = Some(query_gid::<D>);
    ops.alloc_hw_port_stats = Some(alloc_hw_port_stats);
    ops.get_hw_stats = Some(get_hw_stats::<D>);
    ops.alloc_pd = Some(alloc_pd::<D>);
    ops.dealloc_pd = Some(dealloc_pd::<D>);
    ops.alloc_ucontext = Some(alloc_ucontext::<D>);
    ops.dealloc_ucontext = Some(dealloc_ucontext::<D>);
    ops.disassociate_ucontext = Some(disassociate_ucontext::<D>);
    ops.size_ib_pd = PdObj::<D>::SIZE;
    ops.size_ib_ucontext = UctxObj::<D>::SIZE;
    super::cq::install_ops::<D>(&mut ops);
    super::srq::install_ops::<D>(&mut ops);
    super::qp::install_ops::<D>(&mut ops);
    super::mr::install_ops::<D>(&mut ops);
    super::iw_cm::install_ops::<D>(&mut ops);
    super::umap::install_ops(&mut ops);
    ops
}

/// Creates and registers a device named `name` on `netdev`
/// (`rdma link add NAME type rsiw netdev IF`): one per net_device.
pub(crate) fn register_device<D: IwCmOps + Settings>(
    name: &CStr,
    netdev: &NetDev,
    info: DeviceInfo<D::Device>,
) -> Result {
    if !netdev.qualified() {
        return Err(EINVAL);
    }
    // SAFETY: `netdev` is alive; the core returns a held device or null.
    let existing = unsafe { sys::ib_device_get_by_netdev(netdev.as_raw(), DRIVER_ID) };
    if !existing.is_null() {
        // SAFETY: we hold the reference `ib_device_get_by_netdev` took.
        unsafe { sys::ib_device_put(existing) };
        return Err(EEXIST);
    }

    let settings = SettingsGroup::new::<D>()?;
    let group = settings.as_ptr();

    // SAFETY: `netdev` is alive; `_ib_alloc_device` returns a zeroed
    // allocation of the requested size or null.
    let ib =
        unsafe { sys::_ib_alloc_device(DevObj::<D>::SIZE, sys::rsiw_dev_net(netdev.as_raw())) };
    if ib.is_null() {
        return Err(ENOMEM);
    }
    // SAFETY: `ib` is a fresh allocation of `DevObj::SIZE` bytes. The
    // group moves in as a box: its address, in the ops, stays valid until
    // `dealloc_driver` drops it, after the core has removed the device's
    // sysfs files.
    unsafe {
        DevObj::<D>::init(
            ib,
            DevData {
                data: info.data,
                _settings: settings,
            },
        )
    };

    let ops = device_ops::<D>(group);
    // SAFETY: `ib` is a valid, not yet registered device that only this
    // thread sees; the fields written are plain data.
    let ret = unsafe {
        let d = &mut *ib;
        d.node_guid = u64::from_ne_bytes(info.node_guid);
        d.node_type = sys::RDMA_NODE_RNIC as u8;
        copy_cstr(&mut d.node_desc, info.node_desc);
        d.phys_port_cnt = 1;
        d.num_comp_vectors = sys::rsiw_num_possible_cpus() as c_int;
        d.iw_driver_flags = sys::iw_flags_IW_F_NO_PORT_MAP;
        // User QPs and CQs go through the kernel's verbs: libibverbs'
        // post/poll/arm calls are uverbs commands (providers/rsiw), which
        // the core only serves for drivers that ask.
        d.uverbs_cmd_mask |= USER_DATA_PATH_CMDS;
        let ifname = netdev.name();
        copy_cstr(&mut d.iw_ifname, &ifname);
        sys::ib_set_device_ops(ib, &ops);
        if info.user_named {
            sys::rsiw_mark_name_assigned_by_user(ib);
        }
        let ret = sys::ib_device_set_netdev(ib, netdev.as_raw(), 1);
        if ret == 0 {
            sys::ib_register_device(ib, name.as_char_ptr().cast(), ptr::null_mut())
        } else {
            ret
        }
    };
    if ret != 0 {
        // SAFETY: registration failed, so the device is still ours alone;
        // `ib_dealloc_device` runs `dealloc_driver`, dropping the data.
        unsafe { sys::ib_dealloc_device(ib) };
        return Err(Error::from_errno(ret));
    }
    Ok(())
}

/// Unregisters every device of rsiw's driver id (module unload).
pub(crate) fn unregister_all() {
    // SAFETY: plain call; the core walks its device list.
    unsafe { sys::ib_unregister_driver(DRIVER_ID) };
}

/// Queues the unregistration of the device bound to `netdev`, if any
/// (the net_device is going away).
pub(crate) fn unregister_for_netdev(netdev: &NetDev) {
    // SAFETY: `netdev` is alive during the notifier call.
    let ib = unsafe { sys::ib_device_get_by_netdev(netdev.as_raw(), DRIVER_ID) };
    if !ib.is_null() {
        // SAFETY: `ib` is held by the reference just taken, dropped after.
        unsafe {
            sys::ib_unregister_device_queued(ib);
            sys::ib_device_put(ib);
        }
    }
}

/// `ERR_PTR(e)`: the errno encoded in a pointer, as C callers expect.
pub(super) fn err_ptr<T>(e: Error) -> *mut T {
    ptr::without_provenance_mut(e.to_errno() as isize as usize)
}

/// Copies `src` (up to its first NUL) into a C char array, NUL-terminated
/// and truncated to fit.
fn copy_cstr(dst: &mut [u8], src: &[u8]) {
    let len = src.iter().position(|&b| b == 0).unwrap_or(src.len());
    let len = len.min(dst.len().saturating_sub(1));
    for (d, &s) in dst.iter_mut().zip(&src[..len]) {
        *d = s;
    }
    if let Some(d) = dst.get_mut(len) {
        *d = 0;
    }
}

fn atomic_cap(c: AtomicCap) -> sys::ib_atomic_cap {
    match c {
        AtomicCap::None => sys::ib_atomic_cap_IB_ATOMIC_NONE,
        AtomicCap::Hca => sys::ib_atomic_cap_IB_ATOMIC_HCA,
        AtomicCap::Glob => sys::ib_atomic_cap_IB_ATOMIC_GLOB,
    }
}

// ---- ib_device_ops entry points ----------------------------------------
//
// Each is called by the RDMA core with pointers it guarantees valid for the
// duration of the call; the device pointers are always `D`'s (the core only
// calls a device's own ops).

/// # Safety
///
/// Only the RDMA core calls this, as the `dealloc_driver` callback of the
/// `ib_device_ops` this file fills in, with the pointers it passes valid for the
/// call and, for an object, one of `D`'s it created through this file.
unsafe extern "C" fn dealloc_driver<D: Driver>(ib: *mut sys::ib_device) {
    // SAFETY: the core calls this once, from `ib_dealloc_device`, after
    // which the device is freed: nobody uses the data again.
    unsafe { DevObj::<D>::drop_data(ib) };
}

/// # Safety
///
/// Only the RDMA core calls this, as the `query_device` callback of the
/// `ib_device_ops` this file fills in, with the pointers it passes valid for the
/// call and, for an object, one of `D`'s it created through this file.
unsafe extern "C" fn query_device<D: Driver>(
    ib: *mut sys::ib_device,
    attr: *mut sys::ib_device_attr,
    _udata: *mut sys::ib_udata,
) -> c_int {
    // SAFETY: `ib` is one of `D`'s live devices.
    let a = D::query_device(unsafe { dev_data::<D>(ib) });
    // SAFETY: `attr` is valid for writes for the call, per the core.
    let attr = unsafe { &mut *attr };
    attr.device_cap_flags = a.device_cap_flags;
    attr.kernel_cap_flags = a.kernel_cap_flags;
    attr.atomic_cap = atomic_cap(a.atomic_cap);
    attr.masked_atomic_cap = atomic_cap(a.masked_atomic_cap);
    attr.max_mr_size = a.max_mr_size;
    attr.page_size_cap = a.page_size_cap;
    attr.vendor_id = a.vendor_id;
    attr.vendor_part_id = a.vendor_part_id;
    attr.sys_image_guid = u64::from_ne_bytes(a.sys_image_guid);
    attr.max_qp = a.max_qp;
    attr.max_qp_wr = a.max_qp_wr;
    attr.max_send_sge = a.max_send_sge;
    attr.max_recv_sge = a.max_recv_sge;
    attr.max_sge_rd = a.max_sge_rd;
    attr.max_cq = a.max_cq;
    attr.max_cqe = a.max_cqe;
    attr.max_mr = a.max_mr;
    attr.max_pd = a.max_pd;
    attr.max_qp_rd_atom = a.max_qp_rd_atom;
    attr.max_qp_init_rd_atom = a.max_qp_init_rd_atom;
    attr.max_res_rd_atom = a.max_res_rd_atom;
    attr.max_srq = a.max_srq;
    attr.max_srq_wr = a.max_srq_wr;
    attr.max_srq_sge = a.max_srq_sge;
    attr.max_fast_reg_page_list_len = a.max_fast_reg_page_list_len;
    0
}

/// # Safety
///
/// Only the RDMA core calls this, as the `alloc_hw_port_stats` callback of the
/// `ib_device_ops` this file fills in, with the pointers it passes valid for the
/// call and, for an object, one of `D`'s it created through this file.
unsafe extern "C" fn alloc_hw_port_stats(
    _ib: *mut sys::ib_device,
    _port: u32,
) -> *mut sys::rdma_hw_stats {
    // SAFETY: allocates a stats struct the core owns and frees.
    unsafe { sys::rsiw_alloc_hw_port_stats() }
}

/// Fills every counter of the device (its one port's are the device's).
///
/// # Safety
///
/// Only the RDMA core calls this, as the `get_hw_stats` callback of the
/// `ib_device_ops` this file fills in, with the pointers it passes valid for the
/// call and, for an object, one of `D`'s it created through this file.
unsafe extern "C" fn get_hw_stats<D: Driver>(
    ib: *mut sys::ib_device,
    stats: *mut sys::rdma_hw_stats,
    _port: u32,
    _index: c_int,
) -> c_int {
    // SAFETY: `ib` is one of `D`'s live devices.
    let dev = unsafe { dev_data::<D>(ib) };
    for i in 0..hw_counters::COUNT {
        // SAFETY: `stats` is the struct `alloc_hw_port_stats` allocated,
        // valid and locked by the core for the call; the index is checked.
        unsafe { sys::rsiw_hw_stats_set(stats, i as u32, D::hw_counter(dev, i)) };
    }
    hw_counters::COUNT as c_int
}

/// # Safety
///
/// Only the RDMA core calls this, as the `query_port` callback of the
/// `ib_device_ops` this file fills in, with the pointers it passes valid for the
/// call and, for an object, one of `D`'s it created through this file.
unsafe extern "C" fn query_port<D: Driver>(
    ib: *mut sys::ib_device,
    port: u32,
    attr: *mut sys::ib_port_attr,
) -> c_int {
    // SAFETY: `ib` is one of `D`'s live devices.
    let dev = unsafe { IbDevice::<D>::from_raw(ib) };
    let p = match D::query_port(dev) {
        Ok(p) => p,
        Err(e) => return e.to_errno(),
    };
    // SAFETY: `attr` is valid for writes for the call, per the core.
    unsafe {
        ptr::write_bytes(attr, 0, 1);
        let a = &mut *attr;
        let ret = sys::ib_get_eth_speed(ib, port, &mut a.active_speed, &mut a.active_width);
        if ret != 0 {
            return ret;
        }
        a.state = match p.state {
            PortState::Active => sys::ib_port_state_IB_PORT_ACTIVE,
            PortState::Down => sys::ib_port_state_IB_PORT_DOWN,
        };
        a.phys_state = match p.state {
            PortState::Active => sys::ib_port_phys_state_IB_PORT_PHYS_STATE_LINK_UP as u8,
            PortState::Down => sys::ib_port_phys_state_IB_PORT_PHYS_STATE_DISABLED as u8,
        };
        a.gid_tbl_len = p.gid_tbl_len as c_int;
        a.max_msg_sz = u32::MAX;
        a.max_mtu = p.max_mtu;
        a.active_mtu = p.active_mtu;
        // An iWARP port: connections through the iw_cm.
        a.port_cap_flags = sys::ib_port_capability_mask_bits_IB_PORT_CM_SUP
            | sys::ib_port_capability_mask_bits_IB_PORT_DEVICE_MGMT_SUP;
    }
    0
}

/// # Safety
///
/// Only the RDMA core calls this, as the `get_port_immutable` callback of the
/// `ib_device_ops` this file fills in, with the pointers it passes valid for the
/// call and, for an object, one of `D`'s it created through this file.
unsafe extern "C" fn get_port_immutable<D: Driver>(
    ib: *mut sys::ib_device,
    port: u32,
    imm: *mut sys::ib_port_immutable,
) -> c_int {
    let mut attr: sys::ib_port_attr = Default::default();
    // SAFETY: `attr` is a local; `ib` is `D`'s and live.
    let ret = unsafe { query_port::<D>(ib, port, &mut attr) };
    if ret != 0 {
        return ret;
    }
    // SAFETY: `imm` is valid for writes for the call, per the core.
    unsafe {
        (*imm).gid_tbl_len = attr.gid_tbl_len;
        (*imm).core_cap_flags = sys::RDMA_CORE_PORT_IWARP;
    }
    0
}

/// # Safety
///
/// Only the RDMA core calls this, as the `query_gid` callback of the
/// `ib_device_ops` this file fills in, with the pointers it passes valid for the
/// call and, for an object, one of `D`'s it created through this file.
unsafe extern "C" fn query_gid<D: Driver>(
    ib: *mut sys::ib_device,
    _port: u32,
    index: c_int,
    gid: *mut sys::ib_gid,
) -> c_int {
    // SAFETY: `ib` is one of `D`'s live devices.
    let dev = unsafe { dev_data::<D>(ib) };
    let index = u32::try_from(index).map_err(|_| EINVAL);
    match index.and_then(|i| D::query_gid(dev, i)) {
        Ok(raw) => {
            // SAFETY: `gid` is valid for writes for the call.
            unsafe { (*gid).raw = raw };
            0
        }
        Err(e) => e.to_errno(),
    }
}

/// # Safety
///
/// Only the RDMA core calls this, as the `alloc_pd` callback of the
/// `ib_device_ops` this file fills in, with the pointers it passes valid for the
/// call and, for an object, one of `D`'s it created through this file.
unsafe extern "C" fn alloc_pd<D: Driver>(pd: *mut sys::ib_pd, _udata: *mut sys::ib_udata) -> c_int {
    from_result(|| {
        // SAFETY: the core set `pd->device` to one of `D`'s live devices.
        let dev = unsafe { dev_data::<D>((*pd).device) };
        let data = D::alloc_pd(dev)?;
        let mut filled = false;
        // SAFETY: the core allocated `pd` with `size_ib_pd` = `PdObj::SIZE`.
        unsafe { Slot::<_, D::Pd>::new(pd, &mut filled) }.write(data);
        Ok(0)
    })
}

/// # Safety
///
/// Only the RDMA core calls this, as the `dealloc_pd` callback of the
/// `ib_device_ops` this file fills in, with the pointers it passes valid for the
/// call and, for an object, one of `D`'s it created through this file.
unsafe extern "C" fn dealloc_pd<D: Driver>(
    pd: *mut sys::ib_pd,
    _udata: *mut sys::ib_udata,
) -> c_int {
    // SAFETY: `pd` was initialised by `alloc_pd` and the core calls this
    // once, before freeing it; its device outlives it.
    let (dev, data) = unsafe { (dev_data::<D>((*pd).device), PdObj::<D>::data(pd)) };
    D::dealloc_pd(dev, data);
    // SAFETY: as above; nothing uses the data after this.
    unsafe { PdObj::<D>::drop_data(pd) };
    0
}

/// # Safety
///
/// Only the RDMA core calls this, as the `alloc_ucontext` callback of the
/// `ib_device_ops` this file fills in, with the pointers it passes valid for the
/// call and, for an object, one of `D`'s it created through this file.
unsafe extern "C" fn alloc_ucontext<D: Driver>(
    uctx: *mut sys::ib_ucontext,
    udata: *mut sys::ib_udata,
) -> c_int {
    from_result(|| {
        // SAFETY: the core set `uctx->device` to one of `D`'s live devices.
        let dev = unsafe { dev_data::<D>((*uctx).device) };
        // SAFETY: the command's udata (never null for a context) and the
        // context being made.
        let mut udata = unsafe { Udata::new(udata, uctx) }.ok_or(EINVAL)?;
        let data = D::alloc_ucontext(dev, &mut udata)?;
        let mut filled = false;
        // SAFETY: allocated by the core with `UctxObj::SIZE` bytes.
        unsafe { Slot::<_, D::Ucontext>::new(uctx, &mut filled) }.write(data);
        Ok(0)
    })
}

/// # Safety
///
/// Only the RDMA core calls this, as the `dealloc_ucontext` callback of the
/// `ib_device_ops` this file fills in, with the pointers it passes valid for the
/// call and, for an object, one of `D`'s it created through this file.
unsafe extern "C" fn dealloc_ucontext<D: Driver>(uctx: *mut sys::ib_ucontext) {
    // SAFETY: initialised by `alloc_ucontext`; called once before the free.
    let (dev, data) = unsafe { (dev_data::<D>((*uctx).device), UctxObj::<D>::data(uctx)) };
    D::dealloc_ucontext(dev, data);
    // SAFETY: as above.
    unsafe { UctxObj::<D>::drop_data(uctx) };
}

/// # Safety
///
/// Only the RDMA core calls this, as the `disassociate_ucontext` callback of the
/// `ib_device_ops` this file fills in, with the pointers it passes valid for the
/// call and, for an object, one of `D`'s it created through this file.
unsafe extern "C" fn disassociate_ucontext<D: Driver>(uctx: *mut sys::ib_ucontext) {
    // SAFETY: initialised by `alloc_ucontext` and not yet deallocated (the
    // core disassociates a live context, before `dealloc_ucontext`).
    let (dev, data) = unsafe { (dev_data::<D>((*uctx).device), UctxObj::<D>::data(uctx)) };
    D::disassociate_ucontext(dev, data);
}

const _: () = assert!(size_of::<sys::ib_device>() > 0);
