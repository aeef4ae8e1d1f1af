// SPDX-License-Identifier: GPL-2.0
//! What a device reports and enforces: a leaf (it imports nothing of the
//! driver), so the QP, CQ and CM code can size themselves from it without
//! depending on the device.

/// Limits the device reports through `query_device` and enforces. Keep the
/// two in one place so they cannot drift apart.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Limits {
    pub(crate) max_qp: u32,
    pub(crate) max_qp_wr: u32,
    pub(crate) max_ord: u32,
    pub(crate) max_ird: u32,
    pub(crate) max_sge: u32,
    pub(crate) max_sge_rd: u32,
    pub(crate) max_cq: u32,
    pub(crate) max_cqe: u32,
    pub(crate) max_mr: u32,
    pub(crate) max_pd: u32,
    pub(crate) max_srq: u32,
    pub(crate) max_srq_wr: u32,
    pub(crate) max_inline: u32,
    pub(crate) max_fast_reg_page_list_len: u32,
}

/// The defaults: generous for a software device, small enough that a
/// runaway consumer hits a limit before it exhausts memory.
pub(crate) const DEFAULT_LIMITS: Limits = Limits {
    max_qp: 16 * 1024,
    max_qp_wr: 16 * 1024,
    // The QP engine's ORQ/IRQ capacities (qp::MAX_ORD, qp::MAX_IRD).
    max_ord: 32,
    max_ird: 32,
    max_sge: 6,
    max_sge_rd: 1,
    max_cq: 32 * 1024,
    // libfabric's RDM endpoint over verbs (ofi_rxm, what MPI's OFI layers
    // use) asks for a CQ of (tx + rx size) x universe size: 262 144 at its
    // defaults (512 + 512, 256). A user CQ ring entry is 32 octets, so the
    // largest ring is 32 MiB, charged to the caller's memory cgroup.
    max_cqe: 1 << 20,
    max_mr: 256 * 1024,
    max_pd: 16 * 1024,
    max_srq: 4 * 1024,
    max_srq_wr: 16 * 1024,
    max_inline: 128,
    max_fast_reg_page_list_len: 256,
};

/// Vendor id reported in `query_device`: no IEEE OUI is registered for
/// rsiw, so the all-ones 24-bit value rxe reports too (0 reads as "not
/// set" to rdma-core's tests).
pub(crate) const VENDOR_ID: u32 = 0x00FF_FFFF;
