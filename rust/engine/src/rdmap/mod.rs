// SPDX-License-Identifier: GPL-2.0
//! RDMAP message semantics (RFC 5040, RFC 7306, draft-talpey-rdma-commit).
//!
//! [`decode`] turns one DDP segment into a typed [`Inbound`] message after
//! the stateless checks (DDP version, QN range, RDMAP version, opcode,
//! buffer model and queue per opcode, single-segment rules, header
//! lengths). The stateful checks follow, per message kind:
//!
//! - untagged segments: [`crate::ddp::UntaggedRx::accept`];
//! - RDMA Write: [`validate_write`]; Read Response: [`Orq::on_read_response`]
//!   then [`validate_read_response`];
//! - Read Request: [`validate_read_request`] (IRD, source protection);
//! - Atomic Request: [`validate_atomic`] + [`atomic_execute`];
//! - Commit Request: [`validate_commit`]; responses: [`Orq`] matching.

mod atomic;
mod commit;
mod queue;
mod read;

pub use atomic::{
    atomic_execute, cmp_swap_masked, fetch_add_masked, fetch_add_masked_rfc, validate_atomic,
    AtomicPlan, OPERAND_LEN, UNSUPPORTED_AOPCODE,
};
pub use commit::{validate_commit, CommitPlan};
pub use queue::{InboundRequest, Irq, Orq, OutboundRequest, RequestQueue};
pub use read::{validate_read_request, validate_read_response, validate_write, ReadResponsePlan};

use crate::error::{self, TermError};
use crate::wire::ddp::{self as ddpw, Model, Segment};
use crate::wire::rdmap::{qn, Control, Opcode, ReadRequest, ReadRequestRepr, RDMAP_VERSION};
use crate::wire::MALFORMED;
use crate::wire::{atomic as atomicw, commit as commitw, immediate, terminate};

/// The RDMAP header of a decoded message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Body<'a> {
    /// Write, Read Response, Send variants: ULP data in [`Inbound::payload`].
    Data,
    /// RDMA Read Request.
    ReadRequest(ReadRequestRepr),
    /// Terminate.
    Terminate(terminate::Repr),
    /// Immediate Data (with or without SE).
    Immediate(immediate::Repr),
    /// Atomic Request.
    AtomicRequest(atomicw::RequestRepr),
    /// Atomic Response.
    AtomicResponse(atomicw::ResponseRepr),
    /// Commit Request (a view: any number of regions).
    CommitRequest(commitw::Request<&'a [u8]>),
    /// Commit Response.
    CommitResponse(commitw::ResponseRepr),
}

/// One decoded DDP segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Inbound<'a> {
    /// The DDP header.
    pub ddp: ddpw::Repr,
    /// The RDMAP opcode.
    pub opcode: Opcode,
    /// The RDMAP header.
    pub body: Body<'a>,
    /// ULP payload (empty for header-only messages).
    pub payload: &'a [u8],
    /// Octets after the DDP header (RDMAP header and payload): what an
    /// untagged message consumes of its buffer, for
    /// [`crate::ddp::UntaggedRx::accept`].
    pub ddp_payload_len: usize,
}

impl Inbound<'_> {
    /// The STag to invalidate: Send with Invalidate variants always, a
    /// Commit Request when non-zero (commit draft 4.1: "optionally").
    pub fn invalidate_stag(&self) -> Option<u32> {
        match self.ddp.model {
            Model::Untagged { rsvd_ulp, .. } if self.opcode.carries_invalidate_stag() => {
                (self.opcode != Opcode::CommitRequest || rsvd_ulp != 0).then_some(rsvd_ulp)
            }
            _ => None,
        }
    }
}

/// Validates the STag of a Send with Invalidate (or a Commit Request's
/// optional one) before the caller invalidates it (RFC 5040 5.4, 7.2): an
/// STag of another protection domain is "STag not associated with RDMAP
/// Stream"; unknown or already invalid is "STag cannot be Invalidated".
pub fn validate_invalidate<S: crate::ddp::StagTable + ?Sized>(
    table: &S,
    pd: u32,
    stag: u32,
) -> Result<u32, TermError> {
    let r = table.lookup(stag).ok_or(error::rdmap::CANT_INVALIDATE)?;
    if r.pd != pd {
        return Err(error::rdmap::STAG_NOT_ASSOC);
    }
    if !r.valid {
        return Err(error::rdmap::CANT_INVALIDATE);
    }
    Ok(stag)
}

/// Decodes a DDP segment (the MPA ULPDU), in this order:
/// 1. length of the DDP header (malformed: RDMAP unspecified),
/// 2. DDP version (`T_`/`U_INVALID_VERSION`), QN 0..=3 (`U_INVALID_QN`),
/// 3. RDMAP version (`INVALID_VERSION`), opcode defined
///    (`UNEXPECTED_OPCODE`),
/// 4. the opcode's buffer model and queue (RFC 5040 4.2 table, RFC 7306
///    figure 2, commit draft table 1): mismatch is `UNEXPECTED_OPCODE`,
/// 5. header-only messages are single segments (L = 1, MO = 0) with their
///    exact header length (malformed otherwise).
pub fn decode(segment: &[u8]) -> Result<Inbound<'_>, TermError> {
    let seg = Segment::new_checked(segment)?;
    let ddp = ddpw::Repr::parse(&seg)?;
    if let Model::Untagged { qn, .. } = ddp.model {
        if qn as usize >= qn::COUNT {
            return Err(error::ddp::U_INVALID_QN);
        }
    }
    let ctrl = Control::from_byte(ddp.ulp_ctrl);
    if ctrl.version != RDMAP_VERSION {
        return Err(error::rdmap::INVALID_VERSION);
    }
    let opcode = Opcode::from_u8(ctrl.opcode).ok_or(error::rdmap::UNEXPECTED_OPCODE)?;
    match ddp.model {
        Model::Tagged { .. } if !opcode.tagged() => return Err(error::rdmap::UNEXPECTED_OPCODE),
        Model::Untagged { qn, .. } if opcode.queue() != Some(qn) => {
            return Err(error::rdmap::UNEXPECTED_OPCODE)
        }
        Model::Untagged { mo, .. } if opcode.single_segment() && (mo != 0 || !ddp.last) => {
            return Err(MALFORMED)
        }
        _ => {}
    }
    let rest: &[u8] = segment.get(seg.header_len()..).unwrap_or(&[]);
    let ddp_payload_len = rest.len();
    let header_only = |body| {
        Ok(Inbound {
            ddp,
            opcode,
            body,
            payload: &[],
            ddp_payload_len,
        })
    };
    match opcode {
        Opcode::Write
        | Opcode::ReadResponse
        | Opcode::Send
        | Opcode::SendInvalidate
        | Opcode::SendSe
        | Opcode::SendSeInvalidate => Ok(Inbound {
            ddp,
            opcode,
            body: Body::Data,
            payload: rest,
            ddp_payload_len,
        }),
        Opcode::ReadRequest => {
            if rest.len() != crate::wire::rdmap::READ_REQUEST_LEN {
                return Err(MALFORMED);
            }
            header_only(Body::ReadRequest(ReadRequestRepr::parse(
                &ReadRequest::new_checked(rest)?,
            )))
        }
        Opcode::Terminate => header_only(Body::Terminate(terminate::Repr::parse(
            &terminate::Header::new_checked(rest)?,
        )?)),
        Opcode::ImmediateData | Opcode::ImmediateDataSe => header_only(Body::Immediate(
            immediate::Repr::parse(&immediate::Header::new_checked(rest)?),
        )),
        Opcode::AtomicRequest => header_only(Body::AtomicRequest(atomicw::RequestRepr::parse(
            &atomicw::Request::new_checked(rest)?,
        ))),
        Opcode::AtomicResponse => header_only(Body::AtomicResponse(atomicw::ResponseRepr::parse(
            &atomicw::Response::new_checked(rest)?,
        ))),
        Opcode::CommitRequest => {
            header_only(Body::CommitRequest(commitw::Request::new_checked(rest)?))
        }
        Opcode::CommitResponse => header_only(Body::CommitResponse(commitw::ResponseRepr::parse(
            &commitw::Response::new_checked(rest)?,
        ))),
    }
}

#[cfg(test)]
mod tests;
