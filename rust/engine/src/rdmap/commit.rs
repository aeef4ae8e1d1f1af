// SPDX-License-Identifier: GPL-2.0
//! RDMA Commit at the responder (draft-talpey-rdma-commit-00 sections 4.2,
//! 4.3 and 4.5).
//!
//! A malformed request or one beyond IRD terminates the stream (the draft
//! keeps RFC 5040/7306 error processing for those). Everything about the
//! regions themselves is a [`Status`] in the Commit Response: the draft
//! says errors in making data durable must not terminate, and rsiw treats
//! protection failures the same way because no data moves.
//!
//! Ordering: the engine validates a Commit only when its segment is reached
//! in the stream, after every earlier RDMA Write segment has been validated
//! and handed to the caller; the caller must finish placing those before it
//! runs the flushes, so a Commit never passes earlier Writes (section 3.3).
//! Responses leave in request order through the [`Irq`].

use super::queue::{InboundRequest, Irq};
use crate::ddp::{check_region, Access, ProtectionCodes, StagTable};
use crate::error::{self, TermError};
use crate::wire::commit::{Region, Request, ResponseRepr, Status, MAX_REGIONS};

/// A validated Commit Request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CommitPlan<'a> {
    /// Request Identifier to echo.
    pub request_id: u32,
    /// Outcome of validation; `Success` means "flush, then answer".
    pub status: Status,
    request: Request<&'a [u8]>,
}

impl<'a> CommitPlan<'a> {
    /// Regions the caller must commit, in order (only when validation
    /// succeeded, empty regions left out). The caller makes each as durable
    /// as its registration says: a [`crate::ddp::Region::durable`] region
    /// persistent, any other only visible (section 3.1: a commit of a
    /// non-durable region does not require durability).
    pub fn flushes(&self) -> impl Iterator<Item = Region> + '_ {
        let ok = self.status == Status::Success;
        self.request.regions().filter(move |r| ok && r.len > 0)
    }

    /// The Commit Response once the flushes ran (`flushed_ok` false if any
    /// failed: [`Status::NotDurable`]).
    pub fn response(&self, flushed_ok: bool) -> ResponseRepr {
        let status = match self.status {
            Status::Success if !flushed_ok => Status::NotDurable,
            s => s,
        };
        ResponseRepr {
            request_id: self.request_id,
            status,
        }
    }
}

/// Validates a Commit Request and takes its IRD credit. IRD exceeded is
/// `ddp::U_NO_BUFFER`; then the status: more than [`MAX_REGIONS`] is
/// `Limit`; per region in order, an invalid or foreign STag, or one without
/// the commit right ([`Access::COMMIT`]), is `Access` and a TO wrap or
/// bounds violation is `Bounds`.
pub fn validate_commit<'a, S: StagTable + ?Sized, const N: usize>(
    req: &Request<&'a [u8]>,
    table: &S,
    pd: u32,
    irq: &mut Irq<N>,
) -> Result<CommitPlan<'a>, TermError> {
    let request_id = req.request_id();
    irq.admit(InboundRequest::Commit { request_id })?;
    let status = if req.region_count() > MAX_REGIONS {
        Status::Limit
    } else {
        req.regions()
            .find_map(|r| {
                let codes = &ProtectionCodes::RDMAP;
                match check_region(
                    table,
                    pd,
                    r.stag,
                    r.to,
                    u64::from(r.len),
                    Access::COMMIT,
                    codes,
                ) {
                    Ok(_) => None,
                    Err(e) if e == error::rdmap::BASE_BOUNDS || e == error::rdmap::TO_WRAP => {
                        Some(Status::Bounds)
                    }
                    Err(_) => Some(Status::Access),
                }
            })
            .unwrap_or(Status::Success)
    };
    Ok(CommitPlan {
        request_id,
        status,
        request: *req,
    })
}
