// SPDX-License-Identifier: GPL-2.0
//! RDMA Commit (draft-talpey-rdma-commit-00) as the verbs' `IB_WR_FLUSH`:
//! what the responder does for each committed region, how a Commit
//! Response's status completes the requester's WR, and the log line for a
//! refused persistent registration. The wire side is the engine's
//! (`rdmap::commit`); memory is `mr.rs` and `ffi::pmem`.

use kernel::prelude::*;

use crate::{
    cq::WcStatus,
    engine::wire::commit::{Region, Status},
    mem::mr::StagTable,
};

/// Responder: commits one region of a validated Commit Request (persistent
/// MR: cache lines written back, then `pmem_wmb`; otherwise a store
/// barrier). A failure becomes the response's status (NotDurable); the
/// stream goes on.
pub(crate) fn commit_region(table: &StagTable, pd: u32, r: &Region) -> bool {
    match table.commit(r.stag, pd, r.to, u64::from(r.len)) {
        Ok(()) => true,
        Err(e) => {
            if crate::ffi::runtime::ratelimited() {
                pr_warn!(
                    "RDMA Commit of STag {:#x} ({} octets at {:#x}) failed: {:?}\n",
                    r.stag,
                    r.len,
                    r.to,
                    e
                );
            }
            false
        }
    }
}

/// Requester: the work completion status of a Commit Response that did not
/// report success. The draft's status also goes to `wc.vendor_err`.
pub(crate) fn wc_status(s: Status) -> WcStatus {
    match s {
        Status::Success => WcStatus::Success,
        // Outside the region, or an STag that is invalid, foreign or has
        // no flush right: the responder refused the access.
        Status::Bounds | Status::Access => WcStatus::RemAccessErr,
        // More regions than the responder takes: an invalid request.
        Status::Limit => WcStatus::RemInvReqErr,
        // The responder could not make the data durable (or said something
        // rsiw does not know): the remote operation failed.
        Status::NotDurable | Status::Other(_) => WcStatus::RemOpErr,
    }
}

/// Logs (rate-limited) why a registration asking for persistent flush was
/// refused.
pub(crate) fn refused_persistent(what: &str) {
    if crate::ffi::runtime::ratelimited() {
        pr_warn!(
            "{} with IB_ACCESS_FLUSH_PERSISTENT refused: not (all) persistent memory (needs fs-DAX/device-DAX pages of an NVDIMM or pmem region)\n",
            what
        );
    }
}
