// SPDX-License-Identifier: GPL-2.0
//! One rsiw device: the RNIC bound to one net_device, its identity and the
//! limits it enforces. Safe Rust; `ffi::device` owns the `ib_device` around it.

pub(crate) mod counters;
pub(crate) mod crc;
pub(crate) mod ids;
pub(crate) mod limits;
mod settings;
pub(crate) mod verbs;

pub(crate) use limits::{Limits, DEFAULT_LIMITS, VENDOR_ID};

use core::sync::atomic::{AtomicU32, Ordering};

use kernel::{prelude::*, sync::Arc};

use crate::mem::{atomic_locks::AtomicLocks, mr::StagTable};

/// What `query_device` reports, in Rust terms.
#[derive(Clone, Copy, Debug)]
pub(crate) struct DeviceAttrs {
    pub(crate) limits: Limits,
    /// EUI-64 derived from the MAC, in network byte order.
    pub(crate) sys_image_guid: [u8; 8],
    pub(crate) vendor_id: u32,
    pub(crate) vendor_part_id: u32,
}

/// The driver: the type the RDMA core's traits (`ffi::ib`) are implemented
/// for, naming rsiw's objects (`device::verbs`).
pub(crate) struct Rsiw;

/// An rsiw device as the core hands it out.
pub(crate) type IbDevice = crate::ffi::ib::IbDevice<Rsiw>;

/// rsiw's per-device state.
pub(crate) struct Device {
    /// The MAC the GID and GUIDs derive from (random for devices without one).
    mac: [u8; 6],
    vendor_part_id: u32,
    limits: Limits,
    pds: ObjectCount,
    ucontexts: ObjectCount,
    mrs: ObjectCount,
    cqs: ObjectCount,
    srqs: ObjectCount,
    qp_count: ObjectCount,
    /// QP number -> QP (`iw_get_qp`).
    qps: Pin<KBox<crate::qp::QpTable>>,
    /// PD numbers for the STag table's PD checks (the engine's `pd: u32`),
    /// unique among the live PDs.
    pd_ids: Pin<KBox<ids::IdTable>>,
    /// STag index -> MR (`crate::mem::mr`).
    stags: Pin<KBox<StagTable>>,
    /// Overrides of the CM's MPA settings for this device (its sysfs
    /// settings, `device::settings`).
    cm_tuning: crate::cm::tuning::CmTuning,
    /// Serialises RFC 7306 atomics per target word (`crate::mem::atomic_locks`).
    atomic_locks: Pin<KVBox<AtomicLocks>>,
    /// What `rdma statistic` reports.
    /// Shared with the CM's connection endpoints, which may outlive the
    /// device for a moment.
    counters: Arc<crate::device::counters::HwCounters>,
}

impl Device {
    pub(crate) fn new(mac: [u8; 6], vendor_part_id: u32) -> Result<Self> {
        Ok(Self {
            mac,
            vendor_part_id,
            limits: DEFAULT_LIMITS,
            pds: ObjectCount::new(),
            ucontexts: ObjectCount::new(),
            mrs: ObjectCount::new(),
            cqs: ObjectCount::new(),
            srqs: ObjectCount::new(),
            qp_count: ObjectCount::new(),
            qps: KBox::pin_init(crate::qp::QpTable::new(), GFP_KERNEL)?,
            pd_ids: KBox::pin_init(ids::IdTable::new(), GFP_KERNEL)?,
            stags: KBox::pin_init(StagTable::new(), GFP_KERNEL)?,
            cm_tuning: crate::cm::tuning::CmTuning::new(),
            atomic_locks: KVBox::pin_init(AtomicLocks::new(), GFP_KERNEL)?,
            counters: Arc::new(crate::device::counters::HwCounters::new(), GFP_KERNEL)?,
        })
    }

    /// The limits the verbs enforce (and `query_device` reports).
    pub(crate) fn limits(&self) -> &Limits {
        &self.limits
    }

    /// The device's STag table.
    pub(crate) fn stags(&self) -> &StagTable {
        &self.stags
    }

    /// Overrides of the CM's MPA settings for this device.
    pub(crate) fn cm_tuning(&self) -> &crate::cm::tuning::CmTuning {
        &self.cm_tuning
    }

    /// The device's atomic lock table.
    pub(crate) fn atomic_locks(&self) -> &AtomicLocks {
        &self.atomic_locks
    }

    /// The device's hw counters.
    pub(crate) fn counters(&self) -> &Arc<crate::device::counters::HwCounters> {
        &self.counters
    }

    /// Accounts for a new CQ within `max_cq`.
    pub(crate) fn alloc_qp(&self) -> Result {
        self.qp_count.get(self.limits.max_qp)
    }

    pub(crate) fn dealloc_qp(&self) {
        self.qp_count.put();
    }

    pub(crate) fn qps(&self) -> &crate::qp::QpTable {
        &self.qps
    }

    #[cfg(rsiw_kunit)]
    pub(crate) fn qp_count(&self) -> u32 {
        self.qp_count.count()
    }

    pub(crate) fn alloc_cq(&self) -> Result {
        self.cqs.get(self.limits.max_cq)
    }

    pub(crate) fn dealloc_cq(&self) {
        self.cqs.put();
    }

    #[cfg(rsiw_kunit)]
    pub(crate) fn cq_count(&self) -> u32 {
        self.cqs.count()
    }

    /// Accounts for a new SRQ within `max_srq`.
    pub(crate) fn alloc_srq(&self) -> Result {
        self.srqs.get(self.limits.max_srq)
    }

    pub(crate) fn dealloc_srq(&self) {
        self.srqs.put();
    }

    #[cfg(rsiw_kunit)]
    pub(crate) fn srq_count(&self) -> u32 {
        self.srqs.count()
    }

    #[cfg(rsiw_kunit)]
    pub(crate) fn mac(&self) -> [u8; 6] {
        self.mac
    }

    /// The node GUID: EUI-64 from the MAC, as siw and Ethernet RDMA devices do.
    pub(crate) fn node_guid(&self) -> [u8; 8] {
        eui64_from_mac(self.mac)
    }

    pub(crate) fn attrs(&self) -> DeviceAttrs {
        DeviceAttrs {
            limits: self.limits,
            sys_image_guid: self.node_guid(),
            vendor_id: VENDOR_ID,
            vendor_part_id: self.vendor_part_id,
        }
    }

    /// The one GID of the port: the MAC in the first six bytes, zero after,
    /// as iWARP devices report it (the address itself is in the IP layer).
    pub(crate) fn gid(&self, index: u32) -> Result<[u8; 16]> {
        if index != 0 {
            return Err(EINVAL);
        }
        let mut gid = [0u8; 16];
        gid[..6].copy_from_slice(&self.mac);
        Ok(gid)
    }

    /// Accounts for a new protection domain, within `max_pd`, and
    /// returns its number: one no live PD of the device holds.
    pub(crate) fn alloc_pd(&self) -> Result<u32> {
        self.pds.get(self.limits.max_pd)?;
        self.pd_ids.alloc().inspect_err(|_| self.pds.put())
    }

    /// The PD numbered `id` is gone: its number may be handed out again.
    pub(crate) fn dealloc_pd(&self, id: u32) {
        self.pd_ids.free(id);
        self.pds.put();
    }

    /// Test hook: the next PD number is searched from `id`.
    #[cfg(rsiw_kunit)]
    pub(crate) fn set_next_pd_id(&self, id: u32) {
        self.pd_ids.set_cursor(id);
    }

    pub(crate) fn alloc_ucontext(&self) -> Result {
        // One per open uverbs file; bounded like PDs so a process cannot pin
        // unbounded kernel memory.
        self.ucontexts.get(self.limits.max_pd)
    }

    pub(crate) fn dealloc_ucontext(&self) {
        self.ucontexts.put();
    }

    /// Accounts for a new memory region within `max_mr` (its STag comes
    /// from the STag table when it is published).
    pub(crate) fn alloc_mr(&self) -> Result {
        self.mrs.get(self.limits.max_mr)
    }

    pub(crate) fn dealloc_mr(&self) {
        self.mrs.put();
    }

    #[cfg(rsiw_kunit)]
    pub(crate) fn mr_count(&self) -> u32 {
        self.mrs.count()
    }

    #[cfg(rsiw_kunit)]
    pub(crate) fn pd_count(&self) -> u32 {
        self.pds.count()
    }
}

/// A bounded object counter.
struct ObjectCount(AtomicU32);

impl ObjectCount {
    const fn new() -> Self {
        Self(AtomicU32::new(0))
    }

    fn get(&self, max: u32) -> Result {
        self.0
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| {
                (n < max).then(|| n + 1)
            })
            .map(|_| ())
            .map_err(|_| ENOMEM)
    }

    fn put(&self) {
        let prev = self.0.fetch_sub(1, Ordering::Relaxed);
        if prev == 0 {
            kernel::pr_warn_once!("object count underflow\n");
            self.0.store(0, Ordering::Relaxed);
        }
    }

    #[cfg(rsiw_kunit)]
    fn count(&self) -> u32 {
        self.0.load(Ordering::Relaxed)
    }
}

/// Modified EUI-64 from a 48-bit MAC (RFC 4291 appendix A): insert FF:FE in
/// the middle and flip the universal/local bit.
pub(crate) fn eui64_from_mac(mac: [u8; 6]) -> [u8; 8] {
    [
        mac[0] ^ 0x02,
        mac[1],
        mac[2],
        0xFF,
        0xFE,
        mac[3],
        mac[4],
        mac[5],
    ]
}

/// The MAC a device uses: the net_device's hardware address, or a random
/// locally administered unicast one when it has no 6-byte address (tun,
/// raw IP). An all-zero address (loopback) is kept: rdma_cm finds an
/// iWARP device by matching its GID against the net_device's address.
pub(crate) fn device_mac(dev_addr: Option<[u8; 6]>, random: [u8; 6]) -> [u8; 6] {
    match dev_addr {
        Some(mac) => mac,
        None => {
            let mut mac = random;
            mac[0] = (mac[0] & 0xFE) | 0x02;
            mac
        }
    }
}

/// MTU in bytes to the IB MTU enum's value (IB_MTU_256 = 1 .. IB_MTU_4096 = 5),
/// rounding down as `ib_mtu_int_to_enum` does.
pub(crate) fn ib_mtu_enum(mtu: u32) -> u32 {
    match mtu {
        4096.. => 5,
        2048.. => 4,
        1024.. => 3,
        512.. => 2,
        _ => 1,
    }
}

#[cfg(rsiw_kunit)]
#[kunit_tests(rsiw_device)]
mod tests {
    use super::*;

    #[test]
    fn eui64_flips_universal_local_bit() {
        let guid = eui64_from_mac([0x52, 0x54, 0x00, 0x12, 0x34, 0x56]);
        assert_eq!(guid, [0x50, 0x54, 0x00, 0xFF, 0xFE, 0x12, 0x34, 0x56]);
    }

    #[test]
    fn missing_mac_becomes_local_unicast() {
        let mac = device_mac(None, [0xFF, 1, 2, 3, 4, 5]);
        assert_eq!(mac, [0xFE, 1, 2, 3, 4, 5]);
        assert_eq!(mac[0] & 0x01, 0); // unicast
        assert_eq!(mac[0] & 0x02, 0x02); // locally administered
        let real = [0x02, 0xAA, 0xBB, 0xCC, 0xDD, 0xEE];
        assert_eq!(device_mac(Some(real), [9; 6]), real);
        // Loopback's all-zero address is kept (rdma_cm matches on it).
        assert_eq!(device_mac(Some([0; 6]), [9; 6]), [0; 6]);
    }

    #[test]
    fn gid_is_mac_then_zero() -> Result {
        let dev = Device::new([1, 2, 3, 4, 5, 6], 1)?;
        assert_eq!(
            dev.gid(0),
            Ok([1, 2, 3, 4, 5, 6, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0])
        );
        assert_eq!(dev.gid(1), Err(EINVAL));
        Ok(())
    }

    #[test]
    fn pd_count_is_bounded() -> Result {
        let mut dev = Device::new([2, 0, 0, 0, 0, 1], 1)?;
        dev.limits.max_pd = 2;
        let a = dev.alloc_pd()?;
        let b = dev.alloc_pd()?;
        assert!(a != b);
        assert_eq!(dev.alloc_pd(), Err(ENOMEM));
        dev.dealloc_pd(a);
        assert_eq!(dev.pd_count(), 1);
        let c = dev.alloc_pd()?;
        assert!(c != b);
        dev.dealloc_pd(b);
        dev.dealloc_pd(c);
        Ok(())
    }

    /// PD numbers never collide with a live PD's, even once the numbers
    /// wrap (a process allocating 2^32 PDs must not get a kernel PD's).
    #[test]
    fn pd_id_of_a_live_pd_is_never_reused() -> Result {
        let dev = Device::new([2, 0, 0, 0, 0, 1], 1)?;
        let kernel_pd = dev.alloc_pd()?;
        // The cursor about to wrap, as after 2^32 alloc/dealloc pairs.
        dev.set_next_pd_id(u32::MAX);
        let last = dev.alloc_pd()?;
        assert_eq!(last, u32::MAX);
        dev.dealloc_pd(last);
        for _ in 0..4 {
            let id = dev.alloc_pd()?;
            assert!(id != kernel_pd && id != 0);
            dev.dealloc_pd(id);
        }
        // Right at the live id: skipped.
        dev.set_next_pd_id(kernel_pd);
        let id = dev.alloc_pd()?;
        assert!(id != kernel_pd);
        dev.dealloc_pd(id);
        dev.dealloc_pd(kernel_pd);
        assert_eq!(dev.pd_count(), 0);
        Ok(())
    }

    #[test]
    fn mr_cq_srq_counts_are_bounded() -> Result {
        let mut dev = Device::new([2, 0, 0, 0, 0, 1], 1)?;
        dev.limits.max_mr = 1;
        dev.limits.max_cq = 1;
        dev.limits.max_srq = 1;
        assert_eq!(dev.alloc_mr(), Ok(()));
        assert_eq!(dev.alloc_mr(), Err(ENOMEM));
        assert_eq!(dev.alloc_cq(), Ok(()));
        assert_eq!(dev.alloc_cq(), Err(ENOMEM));
        assert_eq!(dev.alloc_srq(), Ok(()));
        assert_eq!(dev.alloc_srq(), Err(ENOMEM));
        assert_eq!((dev.mr_count(), dev.cq_count(), dev.srq_count()), (1, 1, 1));
        dev.dealloc_mr();
        dev.dealloc_cq();
        dev.dealloc_srq();
        assert_eq!((dev.mr_count(), dev.cq_count(), dev.srq_count()), (0, 0, 0));
        Ok(())
    }

    #[test]
    fn mtu_rounds_down_to_ib_enum() {
        assert_eq!(ib_mtu_enum(1500), 3);
        assert_eq!(ib_mtu_enum(9000), 5);
        assert_eq!(ib_mtu_enum(65536), 5);
        assert_eq!(ib_mtu_enum(2048), 4);
        assert_eq!(ib_mtu_enum(68), 1);
    }
}
