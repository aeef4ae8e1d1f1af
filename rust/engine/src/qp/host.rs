// SPDX-License-Identifier: GPL-2.0
//! The host interface of the QP (RFC 5040 sections 5 and 6, RFC 7306
//! section 5): the queues, the completion queue, the STag table and the
//! memory the engine asks the caller for; it never touches memory itself.

use crate::crc::Crc32c;
use crate::ddp::StagTable;
use crate::error::TermError;
use crate::rdmap::AtomicPlan;
use crate::wire::commit as commitw;

#[allow(unused_imports)] // Doc links.
use super::Qp;
use super::{Completion, Event, Local, PayloadRef, RecvWr, SendWr};

/// What the caller lends the engine on every call. Must not sleep (the RX
/// path runs in softirq context in the kernel).
pub trait Host: StagTable {
    /// Takes the next send work request off the send queue.
    fn sq_next(&mut self) -> Option<SendWr>;
    /// Asked right after [`Host::sq_next`] gave a WR: whether the send
    /// queue was empty after it when it was taken. `true` spares the
    /// engine another look at the queue in the same [`Qp::tx`] call (the
    /// host must then see to it that a WR posted meanwhile gets a later
    /// call). By default `false`: the engine asks again.
    fn sq_drained(&mut self) -> bool {
        false
    }
    /// [`Host::sq_next`] into `wr`, left as it was when there is none;
    /// whether there was one. The engine takes the next WR through this,
    /// into its place for the current one: a host that builds the WR there
    /// saves a copy of it (about 150 octets) per message.
    fn sq_next_into(&mut self, wr: &mut SendWr) -> bool {
        match self.sq_next() {
            Some(w) => {
                *wr = w;
                true
            }
            None => false,
        }
    }
    /// Takes the next send work request off the send queue to flush it
    /// (the stream has ended: it must not be carried out). By default
    /// [`Host::sq_next`]; a host that carries out some requests itself
    /// inside `sq_next` (local memory registration and invalidation, say)
    /// completes those as flushed here instead.
    fn sq_flush_next(&mut self) -> Option<SendWr> {
        self.sq_next()
    }
    /// The receive queue's head, if any. The host may take it off its
    /// queue here, as long as the next [`Host::rq_pop`] gives this WR.
    fn rq_peek(&mut self) -> Option<RecvWr>;
    /// Removes the receive queue's head.
    fn rq_pop(&mut self) -> Option<RecvWr>;
    /// Takes the next receive work request to flush (the stream has
    /// ended). By default [`Host::rq_pop`]. A host whose receives come from
    /// a queue shared with other QPs (an SRQ) gives only the one this QP
    /// took for a message in progress: the others stay for the other QPs.
    /// A flush asks at most [`super::MAX_FLUSH`] times (see there).
    fn rq_flush_next(&mut self) -> Option<RecvWr> {
        self.rq_pop()
    }
    /// Delivers a completion (the host must not lose it: a full CQ is its
    /// own fatal error).
    fn complete(&mut self, c: Completion);
    /// Delivers an event.
    fn event(&mut self, e: Event);

    /// Copies `dst.len()` octets of `wr`'s local data, starting `offset`
    /// octets into it, into `dst`.
    fn read_source(&mut self, wr: &Local, offset: u32, dst: &mut [u8]) -> Result<(), TermError>;
    /// Validates the `len` octets of `wr`'s local data before the first of
    /// them goes out, so that a WR with a bad SGE fails whole. A message
    /// whose data cannot be read once it has started still goes out (the
    /// framing needs it) with zeros, and the stream terminates; the peer
    /// would take a Send of zeros for a good one.
    fn check_source(&mut self, wr: &Local, len: u32) -> Result<(), TermError> {
        let _ = (wr, len);
        Ok(())
    }
    /// Zero-copy transmit ([`Qp::tx_plan`]): the host may take `len`
    /// payload octets of `src` by reference (recording them, in stream
    /// order, for its send) instead of having them copied. It validates
    /// the source as `read_source`/`read_tagged` would and, when `crc` is
    /// `Some(state)`, returns the CRC32c state extended over the octets.
    /// `None`: declined (e.g. memory that cannot be sent by reference),
    /// the engine copies; `Some(Err)`: invalid, the engine copies and the
    /// copy reports the error.
    fn payload_by_ref<C: Crc32c + ?Sized>(
        &mut self,
        src: &PayloadRef,
        len: usize,
        crc: &C,
        state: Option<u32>,
    ) -> Option<Result<Option<u32>, TermError>> {
        let _ = (src, len, crc, state);
        None
    }
    /// Copies local registered memory at `stag`/`to` into `dst` (a Read
    /// Response's source, validated against the STag table when the
    /// request came). `reg` is the registration it was validated against
    /// ([`crate::ddp::Region::reg`]): the host must refuse the copy unless
    /// `stag` still names that registration, valid, in the stream's PD
    /// with REMOTE_READ, and `to` is in bounds (the request may be
    /// answered long after its check).
    fn read_tagged(
        &mut self,
        stag: u32,
        reg: u64,
        to: u64,
        dst: &mut [u8],
    ) -> Result<(), TermError>;
    /// Places a chunk of a tagged segment's payload at `stag`/`to`; the
    /// segment was validated at its header against the registration
    /// `reg`. The rest of an FPDU may come much later: the host must
    /// refuse the chunk unless `stag` still names `reg`, valid, in the
    /// stream's PD, writable, and `to` is in bounds.
    fn place_tagged(&mut self, stag: u32, reg: u64, to: u64, data: &[u8]) -> Result<(), TermError>;
    /// Places payload at `offset` into the receive buffer `wr` (the RQ head).
    fn place_recv(&mut self, wr: &RecvWr, offset: u32, data: &[u8]) -> Result<(), TermError>;
    /// Runs a validated atomic under the host's atomic lock (use
    /// [`crate::rdmap::atomic_execute`]) and returns the original value.
    fn atomic(&mut self, plan: &AtomicPlan) -> Result<u64, TermError>;
    /// Stores an atomic's original value into the requester's local buffer.
    fn write_atomic_result(&mut self, wr: &Local, original: u64) -> Result<(), TermError>;
    /// Makes a region durable (RDMA Commit); `false` on failure.
    fn make_durable(&mut self, region: &commitw::Region) -> bool;
    /// Invalidates a local STag (remote invalidation, already validated).
    fn invalidate(&mut self, stag: u32) -> Result<(), TermError>;
    /// Invalidates the sink of a Read with Local Invalidate
    /// ([`super::Flags::INVALIDATE_SINK`]) once its response is placed. By
    /// default as [`Host::invalidate`]; a host that allows remote
    /// invalidation of fewer kinds of memory than local invalidation
    /// tells them apart here.
    fn invalidate_local(&mut self, stag: u32) -> Result<(), TermError> {
        self.invalidate(stag)
    }
}
