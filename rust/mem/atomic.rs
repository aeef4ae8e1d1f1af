// SPDX-License-Identifier: GPL-2.0
//! RFC 7306 atomics in the driver: the responder's read-modify-write on
//! registered memory, under the device's lock table, and the requester's
//! placement of the original value. The engine did the wire work and the
//! validation (AOpCode, STag, PD, REMOTE_ATOMIC, bounds, alignment).

use crate::{
    device::Device,
    engine::{
        error::{self, TermError},
        qp::Local,
        rdmap::{atomic_execute, AtomicPlan},
    },
    ffi::mem::pages::access,
    mem::atomic_locks::AtomicLocks,
    mem::mr::{Mr, MrError},
};

/// Executes a validated Atomic Request on the target word in place and
/// returns the original value. The checks (STag, PD, REMOTE_ATOMIC,
/// bounds, alignment) run again under the MR's lock (the MR may have been
/// invalidated since the engine looked), then,
/// with the MR's lock released and an in-flight pin on the MR (see
/// `crate::mem::mr`), the word's load, compute and store run under its lock in
/// the device's table: atomics on distinct words of one MR run in
/// parallel. On any error nothing is written.
pub(crate) fn respond(dev: &Device, pd: u32, plan: &AtomicPlan) -> Result<u64, TermError> {
    let mr = dev
        .stags()
        .get(plan.stag)
        .ok_or(error::rdmap::INVALID_STAG)?;
    respond_on(&mr, dev.atomic_locks(), pd, plan)
}

/// [`respond`] on the MR `plan.stag` resolved to, with the lock table
/// `locks` (the self-tests call it from several work items at once).
pub(crate) fn respond_on(
    mr: &Mr,
    locks: &AtomicLocks,
    pd: u32,
    plan: &AtomicPlan,
) -> Result<u64, TermError> {
    mr.with_word(plan.stag, pd, plan.to, access::REMOTE_ATOMIC, |word| {
        locks.with(word.phys(), || {
            let (new, original) = atomic_execute(word.load(), &plan.request)?;
            if let Some(v) = new {
                word.store(v);
            }
            Ok(original)
        })
    })
    .map_err(remote_err)?
}

/// Stores an Atomic Response's original value (host order, as the verbs
/// define it) into the requester's 8-octet local buffer.
pub(crate) fn place_result(
    dev: &Device,
    pd: u32,
    local: &Local,
    original: u64,
) -> Result<(), TermError> {
    let grant = crate::mem::mr::Grant::local(pd, access::LOCAL_WRITE);
    dev.stags()
        .get(local.stag)
        .ok_or(MrError::InvalidStag)
        .and_then(|mr| mr.copy_to_as(local.stag, grant, local.to, &original.to_ne_bytes()))
        .map_err(|_| error::rdmap::LOCAL_CATA)
}

/// An MR check failing at the responder, as the RDMAP error the engine
/// would have reported (RFC 5040 7.2, RFC 7306 8.2 for alignment).
pub(crate) fn remote_err(e: MrError) -> TermError {
    match e {
        MrError::InvalidStag | MrError::State => error::rdmap::INVALID_STAG,
        MrError::Pd => error::rdmap::STAG_NOT_ASSOC,
        MrError::Access | MrError::NotPersistent => error::rdmap::ACCESS,
        MrError::Wrap => error::rdmap::TO_WRAP,
        MrError::Bounds => error::rdmap::BASE_BOUNDS,
        MrError::Misaligned => error::rdmap::CATA_STREAM,
    }
}
