// SPDX-License-Identifier: GPL-2.0
//! RDMA Write, Read Request and Read Response rules (RFC 5040 sections
//! 4.4, 5.3 and 7.2).

use super::queue::{InboundRequest, Irq};
use crate::ddp::{
    check_region, validate_tagged, Access, ProtectionCodes, Segmenter, StagTable, TaggedPlacement,
};
use crate::error::{self, TermError};
use crate::wire::rdmap::{Control, Opcode, ReadRequestRepr};

/// The Read Response the responder owes: read `len` octets from
/// `src_stag`/`src_to` and send them tagged to `sink_stag`/`sink_to`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ReadResponsePlan {
    /// Requester's Data Sink STag.
    pub sink_stag: u32,
    /// Requester's Data Sink TO.
    pub sink_to: u64,
    /// Local Data Source STag.
    pub src_stag: u32,
    /// Local Data Source TO.
    pub src_to: u64,
    /// RDMA Read Message Size.
    pub len: u32,
    /// The source's registration as validated ([`crate::ddp::Region::reg`];
    /// 0 for a zero-length Read, which reads nothing).
    pub src_reg: u64,
}

impl ReadResponsePlan {
    /// The Read Response's segments for `mulpdu`. For a segment with payload
    /// range `r`, the caller reads from `src_to + r.start`.
    pub fn segments(&self, mulpdu: usize) -> Result<Segmenter, TermError> {
        Segmenter::tagged(
            Control::new(Opcode::ReadResponse).to_byte(),
            self.sink_stag,
            self.sink_to,
            self.len,
            mulpdu,
        )
    }
}

/// Validates an RDMA Read Request at the responder and takes its IRD
/// credit (released by popping the [`Irq`] once the last Read Response
/// segment is sent). Order: IRD (`ddp::U_NO_BUFFER`), sink range wrap
/// (`rdmap::TO_WRAP`), then the source with RDMAP remote protection codes
/// and REMOTE_READ. A zero-length Read touches no memory and is not
/// checked against the table (as siw, which queues it without an SGE).
pub fn validate_read_request<S: StagTable + ?Sized, const N: usize>(
    req: &ReadRequestRepr,
    table: &S,
    pd: u32,
    irq: &mut Irq<N>,
) -> Result<ReadResponsePlan, TermError> {
    if irq.is_full() {
        return Err(error::ddp::U_NO_BUFFER);
    }
    if req.size > 0 && req.sink_to.checked_add(u64::from(req.size) - 1).is_none() {
        return Err(error::rdmap::TO_WRAP);
    }
    let mut src_reg = 0;
    if req.size > 0 {
        src_reg = check_region(
            table,
            pd,
            req.src_stag,
            req.src_to,
            u64::from(req.size),
            Access::REMOTE_READ,
            &ProtectionCodes::RDMAP,
        )?
        .reg;
    }
    let plan = ReadResponsePlan {
        sink_stag: req.sink_stag,
        sink_to: req.sink_to,
        src_stag: req.src_stag,
        src_to: req.src_to,
        len: req.size,
        src_reg,
    };
    irq.admit(InboundRequest::Read(plan))?;
    Ok(plan)
}

/// Validates an RDMA Write segment: DDP tagged checks plus REMOTE_WRITE.
pub fn validate_write<S: StagTable + ?Sized>(
    table: &S,
    pd: u32,
    stag: u32,
    to: u64,
    len: u32,
) -> Result<TaggedPlacement, TermError> {
    validate_tagged(table, pd, stag, to, len, Access::REMOTE_WRITE)
}

/// Validates a Read Response segment against the local sink region (after
/// [`super::Orq::on_read_response`]): DDP tagged checks plus LOCAL_WRITE.
pub fn validate_read_response<S: StagTable + ?Sized>(
    table: &S,
    pd: u32,
    stag: u32,
    to: u64,
    len: u32,
) -> Result<TaggedPlacement, TermError> {
    validate_tagged(table, pd, stag, to, len, Access::LOCAL_WRITE)
}
