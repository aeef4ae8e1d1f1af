// SPDX-License-Identifier: GPL-2.0
//! The `ib_device` and its `ib_device_ops`: allocation, registration and
//! the C entry points of the verbs, each a thin adapter that converts raw
//! pointers into rsiw's types and calls safe code in `crate::verbs`.

use core::{
    mem::size_of,
    ptr,
    sync::atomic::{AtomicU32, Ordering},
};

use kernel::{
    error::from_result,
    ffi::c_int,
    prelude::*,
    str::{CStr, CStrExt},
};

use super::{netdev::NetDev, object::CoreObj, sys};
use super::mr::{alloc_mr, dereg_mr, get_dma_mr, map_mr_sg, reg_user_mr};
use super::cq::{create_cq, destroy_cq, poll_cq, req_notify_cq, resize_user_cq};
use super::srq::{create_srq, destroy_srq, modify_srq, post_srq_recv, query_srq};
use crate::{
    device::{self, Device, PortState},
    verbs,
};

/// Driver id reported to userspace and used to find our devices.
pub(crate) const DRIVER_ID: u32 = sys::RSIW_DRIVER_ID;
/// uverbs ABI version of rsiw's userspace interface.
const ABI_VERSION: u32 = sys::RSIW_ABI_VERSION;
/// The uverbs write commands of the user data path, beyond the core's
/// default set: posting to a QP or SRQ, polling and arming a CQ.
const USER_DATA_PATH_CMDS: u64 = (1 << sys::ib_uverbs_write_cmds_IB_USER_VERBS_CMD_POST_SEND)
    | (1 << sys::ib_uverbs_write_cmds_IB_USER_VERBS_CMD_POST_RECV)
    | (1 << sys::ib_uverbs_write_cmds_IB_USER_VERBS_CMD_POST_SRQ_RECV)
    | (1 << sys::ib_uverbs_write_cmds_IB_USER_VERBS_CMD_POLL_CQ)
    | (1 << sys::ib_uverbs_write_cmds_IB_USER_VERBS_CMD_REQ_NOTIFY_CQ);
/// node_desc as `ibv_devinfo` and sysfs show it.
const NODE_DESC: &[u8] = b"rsiw iWARP software RNIC";

type DevObj = CoreObj<sys::ib_device, Device>;
type PdObj = CoreObj<sys::ib_pd, verbs::Pd>;
type UctxObj = CoreObj<sys::ib_ucontext, verbs::Ucontext>;

/// Numbers devices for `vendor_part_id`, as siw does.
static NEXT_PART_ID: AtomicU32 = AtomicU32::new(1);

/// A device rsiw created, borrowed from the RDMA core.
///
/// # Invariants
///
/// The wrapped `ib_device` was allocated by [`create`] (so it is a
/// `DevObj`) and is alive while the `&IbDevice` is.
#[repr(transparent)]
pub(crate) struct IbDevice(kernel::types::Opaque<sys::ib_device>);

impl IbDevice {
    /// # Safety
    ///
    /// `ib` must be an ib_device created by [`create`] that stays alive for `'a`.
    pub(super) unsafe fn from_raw<'a>(ib: *mut sys::ib_device) -> &'a Self {
        // SAFETY: transparent wrapper; validity per the contract.
        unsafe { &*ib.cast::<Self>() }
    }

    fn as_raw(&self) -> *mut sys::ib_device {
        self.0.get()
    }

    /// The C device, for links that the core keeps alive (see `ffi::qp`).
    pub(crate) fn as_raw_ptr(&self) -> *mut sys::ib_device {
        self.0.get()
    }

    /// rsiw's state for this device.
    pub(crate) fn data(&self) -> &Device {
        // SAFETY: by the type invariant this is a live `DevObj` whose data
        // was initialised in `create` before the core could see it.
        unsafe { DevObj::data(self.as_raw()) }
    }

    /// The net_device the port is bound to, with a reference held.
    pub(crate) fn netdev(&self) -> Option<super::netdev::NetDevRef> {
        // SAFETY: the device is alive; the core returns a held reference
        // or null.
        let nd = unsafe { sys::ib_device_get_netdev(self.as_raw(), 1) };
        // SAFETY: we own the reference `ib_device_get_netdev` took.
        unsafe { super::netdev::NetDevRef::from_owned(nd) }
    }
}

/// The device operations. Built at run time because `owner` is only known
/// to the loaded module; `ib_set_device_ops` copies them into the device.
fn device_ops() -> sys::ib_device_ops {
    let mut ops = sys::ib_device_ops::default();
    ops.owner = <crate::RsiwModule as kernel::ModuleMetadata>::THIS_MODULE.as_ptr().cast();
    ops.driver_id = DRIVER_ID;
    ops.uverbs_abi_ver = ABI_VERSION;

    ops.dealloc_driver = Some(dealloc_driver);
    ops.query_device = Some(query_device);
    ops.query_port = Some(query_port);
    ops.get_port_immutable = Some(get_port_immutable);
    ops.query_gid = Some(query_gid);
    ops.alloc_hw_port_stats = Some(alloc_hw_port_stats);
    ops.get_hw_stats = Some(get_hw_stats);
    ops.alloc_pd = Some(alloc_pd);
    ops.dealloc_pd = Some(dealloc_pd);
    ops.get_dma_mr = Some(get_dma_mr);
    ops.dereg_mr = Some(dereg_mr);
    ops.reg_user_mr = Some(reg_user_mr);
    ops.alloc_mr = Some(alloc_mr);
    ops.map_mr_sg = Some(map_mr_sg);
    ops.alloc_ucontext = Some(alloc_ucontext);
    ops.dealloc_ucontext = Some(dealloc_ucontext);
    super::cm::install_ops(&mut ops);

    ops.create_cq = Some(create_cq);
    ops.destroy_cq = Some(destroy_cq);
    ops.resize_user_cq = Some(resize_user_cq);
    ops.poll_cq = Some(poll_cq);
    ops.req_notify_cq = Some(req_notify_cq);

    ops.create_srq = Some(create_srq);
    ops.modify_srq = Some(modify_srq);
    ops.query_srq = Some(query_srq);
    ops.destroy_srq = Some(destroy_srq);
    ops.post_srq_recv = Some(post_srq_recv);

    ops.size_ib_cq = CoreObj::<sys::ib_cq, crate::cq::Cq>::SIZE;
    ops.size_ib_srq = CoreObj::<sys::ib_srq, crate::srq::Srq>::SIZE;

    ops.create_qp = Some(super::qp::create_qp);
    ops.destroy_qp = Some(super::qp::destroy_qp);
    ops.modify_qp = Some(super::qp::modify_qp);
    ops.query_qp = Some(super::qp::query_qp);
    ops.post_send = Some(super::qp::post_send);
    ops.post_recv = Some(super::qp::post_recv);
    ops.iw_add_ref = Some(super::qp::iw_add_ref);
    ops.iw_rem_ref = Some(super::qp::iw_rem_ref);
    ops.iw_get_qp = Some(super::qp::iw_get_qp);
    ops.size_ib_qp = super::qp::SIZE;
    ops.size_ib_pd = PdObj::SIZE;
    ops.size_ib_ucontext = UctxObj::SIZE;
    ops
}

/// Creates and registers a device named `name` on `netdev`
/// (`rdma link add NAME type rsiw netdev IF`).
pub(crate) fn create(name: &CStr, netdev: &NetDev, user_named: bool) -> Result {
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

    let mut random = [0u8; 6];
    // SAFETY: `random` is 6 writable bytes, as `eth_random_addr` needs.
    unsafe { sys::rsiw_random_mac(random.as_mut_ptr()) };
    let mac = device::device_mac(netdev.mac(), random);
    let data = Device::new(mac, NEXT_PART_ID.fetch_add(1, Ordering::Relaxed))?;
    let guid = data.node_guid();

    // SAFETY: `netdev` is alive; `_ib_alloc_device` returns a zeroed
    // allocation of the requested size or null.
    let ib = unsafe { sys::_ib_alloc_device(DevObj::SIZE, sys::rsiw_dev_net(netdev.as_raw())) };
    if ib.is_null() {
        return Err(ENOMEM);
    }
    // SAFETY: `ib` is a fresh allocation of `DevObj::SIZE` bytes.
    unsafe { DevObj::init(ib, data) };

    let ops = device_ops();
    // SAFETY: `ib` is a valid, not yet registered device that only this
    // thread sees; the fields written are plain data.
    let ret = unsafe {
        let d = &mut *ib;
        d.node_guid = u64::from_ne_bytes(guid);
        d.node_type = sys::RDMA_NODE_RNIC as u8;
        copy_cstr(&mut d.node_desc, NODE_DESC);
        d.phys_port_cnt = 1;
        d.num_comp_vectors = sys::rsiw_num_possible_cpus() as c_int;
        d.iw_driver_flags = sys::iw_flags_IW_F_NO_PORT_MAP;
        // User QPs and CQs go through the kernel's verbs: libibverbs'
        // post/poll/arm calls are uverbs commands (tools/provider), which
        // the core only serves for drivers that ask.
        d.uverbs_cmd_mask |= USER_DATA_PATH_CMDS;
        let ifname = netdev.name();
        copy_cstr(&mut d.iw_ifname, &ifname);
        sys::ib_set_device_ops(ib, &ops);
        if user_named {
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

/// Unregisters every rsiw device (module unload).
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

// ---- ib_device_ops entry points ----------------------------------------
//
// Each is called by the RDMA core with pointers it guarantees valid for the
// duration of the call; the device pointers are always ours (the core only
// calls a device's own ops).

unsafe extern "C" fn dealloc_driver(ib: *mut sys::ib_device) {
    // SAFETY: the core calls this once, from `ib_dealloc_device`, after
    // which the device is freed: nobody uses the data again.
    unsafe { DevObj::drop_data(ib) };
}

unsafe extern "C" fn query_device(
    ib: *mut sys::ib_device,
    attr: *mut sys::ib_device_attr,
    _udata: *mut sys::ib_udata,
) -> c_int {
    // SAFETY: `ib` is one of our live devices.
    let dev = unsafe { IbDevice::from_raw(ib) };
    let a = dev.data().attrs();
    let l = &a.limits;
    // SAFETY: `attr` is valid for writes for the call, per the core.
    let attr = unsafe { &mut *attr };
    attr.device_cap_flags = sys::ib_device_cap_flags_IB_DEVICE_MEM_MGT_EXTENSIONS as u64
        | super::pmem::device_flush_caps();
    attr.kernel_cap_flags = sys::ib_kernel_cap_flags_IBK_ALLOW_USER_UNREG as u64;
    // RFC 7306 atomics, masked ones too, are atomic with respect to every
    // other atomic through this device (its lock table), not to CPU
    // accesses or other devices: HCA, not GLOB (crate::atomic_locks).
    attr.atomic_cap = sys::ib_atomic_cap_IB_ATOMIC_HCA;
    attr.masked_atomic_cap = sys::ib_atomic_cap_IB_ATOMIC_HCA;
    attr.max_mr_size = u64::MAX;
    attr.page_size_cap = kernel::page::PAGE_SIZE as u64;
    attr.vendor_id = a.vendor_id;
    attr.vendor_part_id = a.vendor_part_id;
    attr.sys_image_guid = u64::from_ne_bytes(a.sys_image_guid);
    attr.max_qp = l.max_qp as _;
    attr.max_qp_wr = l.max_qp_wr as _;
    attr.max_send_sge = l.max_sge as _;
    attr.max_recv_sge = l.max_sge as _;
    attr.max_sge_rd = l.max_sge_rd as _;
    attr.max_cq = l.max_cq as _;
    attr.max_cqe = l.max_cqe as _;
    attr.max_mr = l.max_mr as _;
    attr.max_pd = l.max_pd as _;
    // Reads and atomics share IRD/ORD (RFC 7306 5.2): as responder per QP
    // (IRD), as initiator (ORD), and responder resources device-wide.
    attr.max_qp_rd_atom = l.max_ird as _;
    attr.max_qp_init_rd_atom = l.max_ord as _;
    attr.max_res_rd_atom = l.max_qp.saturating_mul(l.max_ird) as _;
    attr.max_srq = l.max_srq as _;
    attr.max_srq_wr = l.max_srq_wr as _;
    attr.max_srq_sge = l.max_sge as _;
    attr.max_fast_reg_page_list_len = l.max_fast_reg_page_list_len;
    0
}

// The Rust counters index the C names (`enum rsiw_hw_counter`).
const _: () = {
    use crate::hw_counters::HwCounter as C;
    assert!(C::COUNT == sys::rsiw_hw_counter_RSIW_HW_COUNTERS as usize);
    assert!(C::TxZcopyOctets as u32 == sys::rsiw_hw_counter_RSIW_HW_TX_ZCOPY_OCTETS);
    assert!(C::TxZcopyBatches as u32 == sys::rsiw_hw_counter_RSIW_HW_TX_ZCOPY_BATCHES);
    assert!(C::TxZcopyCopied as u32 == sys::rsiw_hw_counter_RSIW_HW_TX_ZCOPY_COPIED);
    assert!(C::TerminateSent as u32 == sys::rsiw_hw_counter_RSIW_HW_TERMINATE_SENT);
    assert!(C::TerminateReceived as u32 == sys::rsiw_hw_counter_RSIW_HW_TERMINATE_RECEIVED);
};

unsafe extern "C" fn alloc_hw_port_stats(_ib: *mut sys::ib_device, _port: u32) -> *mut sys::rdma_hw_stats {
    // SAFETY: allocates a stats struct the core owns and frees.
    unsafe { sys::rsiw_alloc_hw_port_stats() }
}

/// Fills every counter of the device (its one port's are the device's).
unsafe extern "C" fn get_hw_stats(
    ib: *mut sys::ib_device,
    stats: *mut sys::rdma_hw_stats,
    _port: u32,
    _index: c_int,
) -> c_int {
    // SAFETY: `ib` is one of our live devices.
    let dev = unsafe { IbDevice::from_raw(ib) };
    let counters = dev.data().counters();
    for c in crate::hw_counters::HwCounter::ALL {
        // SAFETY: `stats` is the struct `alloc_hw_port_stats` allocated,
        // valid and locked by the core for the call; the index is checked.
        unsafe { sys::rsiw_hw_stats_set(stats, c as u32, counters.get(c)) };
    }
    crate::hw_counters::HwCounter::COUNT as c_int
}

unsafe extern "C" fn query_port(
    ib: *mut sys::ib_device,
    port: u32,
    attr: *mut sys::ib_port_attr,
) -> c_int {
    // SAFETY: `ib` is one of our live devices.
    let dev = unsafe { IbDevice::from_raw(ib) };
    let Some(nd) = dev.netdev() else {
        return ENODEV.to_errno();
    };
    let p = verbs::query_port(&nd);
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
        a.max_mtu = device::ib_mtu_enum(p.max_mtu);
        a.active_mtu = device::ib_mtu_enum(p.mtu);
        a.port_cap_flags = sys::ib_port_capability_mask_bits_IB_PORT_CM_SUP
            | sys::ib_port_capability_mask_bits_IB_PORT_DEVICE_MGMT_SUP;
    }
    0
}

unsafe extern "C" fn get_port_immutable(
    ib: *mut sys::ib_device,
    port: u32,
    imm: *mut sys::ib_port_immutable,
) -> c_int {
    // SAFETY: `attr` is a local; `ib` is ours and live.
    let mut attr: sys::ib_port_attr = Default::default();
    // SAFETY: as above.
    let ret = unsafe { query_port(ib, port, &mut attr) };
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

unsafe extern "C" fn query_gid(
    ib: *mut sys::ib_device,
    _port: u32,
    index: c_int,
    gid: *mut sys::ib_gid,
) -> c_int {
    // SAFETY: `ib` is one of our live devices.
    let dev = unsafe { IbDevice::from_raw(ib) };
    let index = u32::try_from(index).map_err(|_| EINVAL);
    match index.and_then(|i| dev.data().gid(i)) {
        Ok(raw) => {
            // SAFETY: `gid` is valid for writes for the call.
            unsafe { (*gid).raw = raw };
            0
        }
        Err(e) => e.to_errno(),
    }
}

unsafe extern "C" fn alloc_pd(pd: *mut sys::ib_pd, _udata: *mut sys::ib_udata) -> c_int {
    from_result(|| {
        // SAFETY: the core set `pd->device` to one of our live devices.
        let dev = unsafe { IbDevice::from_raw((*pd).device) };
        let data = verbs::alloc_pd(dev.data())?;
        // SAFETY: the core allocated `pd` with `size_ib_pd` = `PdObj::SIZE`.
        unsafe { PdObj::init(pd, data) };
        Ok(0)
    })
}

unsafe extern "C" fn dealloc_pd(pd: *mut sys::ib_pd, _udata: *mut sys::ib_udata) -> c_int {
    // SAFETY: `pd` was initialised by `alloc_pd` and the core calls this
    // once, before freeing it; its device outlives it.
    let dev = unsafe { IbDevice::from_raw((*pd).device) };
    // SAFETY: as above.
    unsafe { PdObj::drop_data(pd) };
    verbs::dealloc_pd(dev.data());
    0
}

unsafe extern "C" fn alloc_ucontext(
    uctx: *mut sys::ib_ucontext,
    _udata: *mut sys::ib_udata,
) -> c_int {
    from_result(|| {
        // SAFETY: the core set `uctx->device` to one of our live devices.
        let dev = unsafe { IbDevice::from_raw((*uctx).device) };
        let data = verbs::alloc_ucontext(dev.data())?;
        // SAFETY: allocated by the core with `UctxObj::SIZE` bytes.
        unsafe { UctxObj::init(uctx, data) };
        Ok(0)
    })
}

unsafe extern "C" fn dealloc_ucontext(uctx: *mut sys::ib_ucontext) {
    // SAFETY: initialised by `alloc_ucontext`; called once before the free.
    let dev = unsafe { IbDevice::from_raw((*uctx).device) };
    // SAFETY: as above.
    unsafe { UctxObj::drop_data(uctx) };
    verbs::dealloc_ucontext(dev.data());
}

const _: () = assert!(size_of::<DevObj>() >= size_of::<sys::ib_device>());

/// Kernel consumers' view of a device, for the self-tests: the same calls
/// an in-kernel ULP makes (`ib_query_port`, `ib_alloc_pd`).
#[cfg(CONFIG_KUNIT = "y")]
pub(crate) mod testing {
    use super::*;
    use crate::ffi::netdev::NetDevRef;

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

        pub(crate) fn device(&self) -> &IbDevice {
            // SAFETY: the held reference keeps our device alive.
            unsafe { IbDevice::from_raw(self.0) }
        }

        /// `ib_query_port` through the core: (port active, gid_tbl_len).
        pub(crate) fn query_port(&self) -> Result<(bool, i32)> {
            let mut attr = sys::ib_port_attr::default();
            // SAFETY: device held, `attr` a valid local.
            let ret = unsafe { sys::ib_query_port(self.0, 1, &mut attr) };
            kernel::error::to_result(ret)?;
            Ok((attr.state == sys::ib_port_state_IB_PORT_ACTIVE, attr.gid_tbl_len))
        }

        /// The transport the core derives from the node type.
        pub(crate) fn is_iwarp(&self) -> bool {
            // SAFETY: device held; `node_type` is plain data set at creation.
            let transport = unsafe { sys::rdma_node_get_transport(u32::from((*self.0).node_type)) };
            transport == sys::rdma_transport_type_RDMA_TRANSPORT_IWARP
        }

        /// Allocates and frees a PD the way kernel ULPs do.
        pub(crate) fn alloc_dealloc_pd(&self) -> Result<u32> {
            // SAFETY: device held; the name is a static C string.
            let pd = unsafe { sys::__ib_alloc_pd(self.0, 0, c"rsiw_kunit".as_ptr().cast()) };
            // NULL or ERR_PTR(-errno).
            if pd.is_null() || (pd as usize) > usize::MAX - 4096 {
                return Err(ENOMEM);
            }
            let during = self.device().data().pd_count();
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
            (a.atomic_cap == hca, a.masked_atomic_cap == hca, a.max_qp_rd_atom, a.max_qp_init_rd_atom, a.max_res_rd_atom)
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
}
