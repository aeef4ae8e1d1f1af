// SPDX-License-Identifier: GPL-2.0
//! The device's verbs: rsiw's implementation of the RDMA core's device
//! trait (query_device, query_port, query_gid, hw counters, PDs, user
//! contexts, QP lookup) and of its link type (`rdma link add ... type
//! rsiw`). The other objects' verbs live with them: `cq::verbs`,
//! `qp::verbs`, `qp::srq`, `mem::verbs`, `cm::iw_cm`.

use core::sync::atomic::{AtomicU32, Ordering};

use kernel::{prelude::*, str::CStr, sync::Arc};

use super::{device_mac, ib_mtu_enum, Device, IbDevice, Rsiw};
use crate::{
    cq::Cq,
    ffi::{
        ib::{
            self, abi, caps, rsiw_alloc_ucontext_req, rsiw_alloc_ucontext_resp, rsiw_cqe, rsiw_rqe,
            rsiw_sqe, AtomicCap, DeviceAttr, DeviceInfo, LinkOps, PortAttr, Udata,
        },
        mem::pmem,
        net::netdev::NetDev,
    },
    mem::mr::{Mr, MAX_MR_SIZE},
    qp::{srq::Srq, Qp},
};

/// node_desc as `ibv_devinfo` and sysfs show it.
const NODE_DESC: &[u8] = b"rsiw iWARP software RNIC";

/// Numbers devices for `vendor_part_id`, as siw does.
static NEXT_PART_ID: AtomicU32 = AtomicU32::new(1);

/// A protection domain: a number, unique among the device's live PDs by
/// construction (`device::ids`), that MRs and QPs compare (the engine's
/// `pd`).
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

#[vtable]
impl ib::Driver for Rsiw {
    type Device = Device;
    type Pd = Pd;
    type Ucontext = Ucontext;
    type Cq = Cq;
    type Srq = Srq;
    type Qp = Qp;
    type Mr = Mr;

    fn query_device(dev: &Device) -> DeviceAttr {
        let a = dev.attrs();
        let l = &a.limits;
        DeviceAttr {
            device_cap_flags: caps::MEM_MGT_EXTENSIONS | pmem::device_flush_caps(),
            kernel_cap_flags: caps::ALLOW_USER_UNREG,
            // RFC 7306 atomics, masked ones too, are atomic with respect to
            // every other atomic through this device (its lock table), not
            // to CPU accesses or other devices: HCA, not GLOB
            // (crate::mem::atomic_locks).
            atomic_cap: AtomicCap::Hca,
            masked_atomic_cap: AtomicCap::Hca,
            max_mr_size: MAX_MR_SIZE,
            page_size_cap: kernel::page::PAGE_SIZE as u64,
            vendor_id: a.vendor_id,
            vendor_part_id: a.vendor_part_id,
            sys_image_guid: a.sys_image_guid,
            max_qp: l.max_qp,
            max_qp_wr: l.max_qp_wr,
            max_send_sge: l.max_sge,
            max_recv_sge: l.max_sge,
            max_sge_rd: l.max_sge_rd,
            max_cq: l.max_cq,
            max_cqe: l.max_cqe,
            max_mr: l.max_mr,
            max_pd: l.max_pd,
            // Reads and atomics share IRD/ORD (RFC 7306 5.2): as responder
            // per QP (IRD), as initiator (ORD), and responder resources
            // device-wide.
            max_qp_rd_atom: l.max_ird,
            max_qp_init_rd_atom: l.max_ord,
            max_res_rd_atom: l.max_qp.saturating_mul(l.max_ird),
            max_srq: l.max_srq,
            max_srq_wr: l.max_srq_wr,
            max_srq_sge: l.max_sge,
            max_fast_reg_page_list_len: l.max_fast_reg_page_list_len,
        }
    }

    /// Port attributes follow the net_device: link state, MTU.
    fn query_port(dev: &IbDevice) -> Result<PortAttr> {
        let nd = dev.netdev().ok_or(ENODEV)?;
        Ok(PortAttr {
            state: nd.port_state(),
            gid_tbl_len: 1,
            max_mtu: ib_mtu_enum(nd.max_mtu()),
            active_mtu: ib_mtu_enum(nd.mtu()),
        })
    }

    fn query_gid(dev: &Device, index: u32) -> Result<[u8; 16]> {
        dev.gid(index)
    }

    fn hw_counter(dev: &Device, index: usize) -> u64 {
        dev.counters().get_index(index)
    }

    fn alloc_pd(dev: &Device) -> Result<Pd> {
        Ok(Pd {
            id: dev.alloc_pd()?,
        })
    }

    fn dealloc_pd(dev: &Device, pd: &Pd) {
        dev.dealloc_pd(pd.id);
    }

    /// A provider that sends a request names the ABI it speaks (only
    /// this module's is accepted) and learns the ring entry sizes; one
    /// that sends nothing gets a version 1 context (commands only).
    fn alloc_ucontext(dev: &Device, udata: &mut Udata<'_>) -> Result<Ucontext> {
        if udata.in_len() > 0 {
            let req = udata.read_req::<rsiw_alloc_ucontext_req>()?;
            if req.abi_version != abi::VERSION || req.reserved != 0 {
                return Err(EINVAL);
            }
        }
        let resp = rsiw_alloc_ucontext_resp {
            abi_version: abi::VERSION,
            sqe_size: core::mem::size_of::<rsiw_sqe>() as u32,
            rqe_size: core::mem::size_of::<rsiw_rqe>() as u32,
            cqe_size: core::mem::size_of::<rsiw_cqe>() as u32,
            max_sge: abi::MAX_SGE as u32,
            max_inline: abi::MAX_INLINE as u32,
            ring_hdr: abi::RING_HDR as u32,
            reserved: 0,
        };
        udata.write(&resp)?;
        dev.alloc_ucontext()?;
        Ok(Ucontext)
    }

    fn dealloc_ucontext(dev: &Device, _uctx: &Ucontext) {
        dev.dealloc_ucontext();
    }

    fn disassociate_ucontext(_dev: &Device, _uctx: &Ucontext) {
        // The core has destroyed the context's QPs, CQs, SRQs, MRs and
        // PDs; their rings' mmap entries went with them, and the pages a
        // process still maps are its own until it unmaps them (nothing of
        // the kernel's is in them), so nothing is left. Having the op lets
        // `rdma dev set rsiwN netns NS` move a device and lets rmmod and
        // `rdma link delete` proceed while a process holds the device open.
    }

    fn qp_by_num(dev: &Device, qpn: u32) -> Option<Arc<Qp>> {
        dev.qps().get(qpn)
    }
}

#[vtable]
impl LinkOps for Rsiw {
    const TYPE: &'static CStr = c"rsiw";

    fn newlink(name: &CStr, netdev: &NetDev) -> Result {
        create(name, netdev, true)
    }
}

/// Creates and registers a device named `name` on `netdev`; its MAC (and
/// so its GID and GUIDs) is the net_device's, or random when it has none.
pub(crate) fn create(name: &CStr, netdev: &NetDev, user_named: bool) -> Result {
    let mac = device_mac(netdev.mac(), ib::random_mac());
    let data = Device::new(mac, NEXT_PART_ID.fetch_add(1, Ordering::Relaxed))?;
    let node_guid = data.node_guid();
    ib::register_device::<Rsiw>(
        name,
        netdev,
        DeviceInfo {
            data,
            node_guid,
            node_desc: NODE_DESC,
            user_named,
        },
    )
}
