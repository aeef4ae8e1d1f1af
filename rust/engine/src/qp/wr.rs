// SPDX-License-Identifier: GPL-2.0
//! The work request, completion and event vocabulary of the QP (RFC 5040
//! section 5 and RFC 7306 sections 5 and 6 for the operations): what the
//! host hands the engine and what it gets back.

use crate::error::TermError;
use crate::wire::atomic::AtomicOp;
use crate::wire::commit::{self as commitw, Status as CommitStatus};

#[allow(unused_imports)] // Doc links.
use super::{Host, Qp};

/// Work request flags.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Flags(u8);

impl Flags {
    /// No flags.
    pub const NONE: Flags = Flags(0);
    /// Generate a completion on success (errors always complete).
    pub const SIGNALED: Flags = Flags(1);
    /// Ask for a solicited event (Send and Immediate Data variants).
    pub const SOLICITED: Flags = Flags(2);
    /// Do not start before every earlier Read/Atomic/Commit completed.
    pub const FENCE: Flags = Flags(4);
    /// Data is inline (the host's `read_source` serves it; no meaning to
    /// the engine beyond being passed through).
    pub const INLINE: Flags = Flags(8);
    /// RDMA Read with Local Invalidate (`IB_WR_RDMA_READ_WITH_INV`): once
    /// every octet of the response is placed, and before the Read
    /// completes (signaled or not), the sink's STag (`local.stag`) is
    /// invalidated through [`Host::invalidate_local`].
    pub const INVALIDATE_SINK: Flags = Flags(16);

    /// Whether all flags of `f` are set.
    pub const fn contains(self, f: Flags) -> bool {
        self.0 & f.0 == f.0
    }

    /// Union.
    #[must_use]
    pub const fn with(self, f: Flags) -> Flags {
        Flags(self.0 | f.0)
    }
}

/// Local data of a work request: the host interprets it in
/// [`Host::read_source`] (e.g. an SGE list it keeps under `handle`). For an
/// RDMA Read, `stag`/`to` are the Data Sink advertised to the peer.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Local {
    /// Local STag (lkey) of the first SGE / the Read sink.
    pub stag: u32,
    /// Tagged offset (address) of the first octet.
    pub to: u64,
    /// Opaque host handle.
    pub handle: u64,
}

/// A remote buffer.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Remote {
    /// Remote STag.
    pub stag: u32,
    /// Remote tagged offset.
    pub to: u64,
}

/// What a send work request does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SendOp {
    /// Send (with SE if [`Flags::SOLICITED`]; with Invalidate if `Some`).
    Send {
        /// STag the peer must invalidate.
        invalidate: Option<u32>,
    },
    /// RDMA Write of `len` octets to `remote`.
    Write {
        /// Data sink.
        remote: Remote,
    },
    /// RDMA Read of `len` octets from `remote` into `local.stag/to`.
    Read {
        /// Data source.
        remote: Remote,
    },
    /// RFC 7306 atomic on the 8 octets at `remote`; the original value goes
    /// to [`Host::write_atomic_result`].
    Atomic {
        /// FetchAdd, CmpSwap (or an unsupported code, to probe the peer).
        op: AtomicOp,
        /// Target.
        remote: Remote,
        /// Add data or swap data.
        add_swap: u64,
        /// Add mask (field boundaries) or swap mask.
        add_swap_mask: u64,
        /// Compare data (CmpSwap).
        compare: u64,
        /// Compare mask (CmpSwap; all ones for a plain compare).
        compare_mask: u64,
    },
    /// RFC 7306 Immediate Data (SE if [`Flags::SOLICITED`]).
    Immediate {
        /// The 8 octets.
        data: [u8; 8],
    },
    /// RDMA Write followed by Immediate Data (RFC 7306 section 6).
    WriteImm {
        /// Data sink.
        remote: Remote,
        /// The immediate data.
        data: [u8; 8],
    },
    /// RDMA Commit of the regions (request id is assigned by the engine).
    Commit {
        /// The regions.
        request: commitw::RequestRepr,
    },
}

/// A send queue entry as the host hands it over.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SendWr {
    /// ULP cookie, returned in the completion.
    pub wr_id: u64,
    /// Flags.
    pub flags: Flags,
    /// The operation.
    pub op: SendOp,
    /// Local data length (Send, Write, Read size); ignored otherwise.
    pub len: u32,
    /// Local data.
    pub local: Local,
}

impl SendWr {
    /// A zero-length unsignaled Send: a place for [`Host::sq_next_into`]
    /// to fill, cheap to write (no Commit regions).
    pub const EMPTY: SendWr = SendWr {
        wr_id: 0,
        flags: Flags::NONE,
        op: SendOp::Send { invalidate: None },
        len: 0,
        local: Local {
            stag: 0,
            to: 0,
            handle: 0,
        },
    };
}

/// A receive queue entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct RecvWr {
    /// ULP cookie.
    pub wr_id: u64,
    /// Buffer length.
    pub len: u32,
}

/// Which queue a completion belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum WorkQueue {
    /// Send queue.
    Send,
    /// Receive queue.
    Recv,
}

/// Completion opcode.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CompOp {
    /// Send (any variant).
    Send,
    /// RDMA Write.
    Write,
    /// RDMA Read.
    Read,
    /// Atomic FetchAdd.
    FetchAdd,
    /// Atomic CmpSwap.
    CmpSwap,
    /// Atomic with another AOpCode.
    AtomicOther,
    /// Immediate Data sent.
    Immediate,
    /// Write with Immediate sent.
    WriteImm,
    /// RDMA Commit.
    Commit,
    /// A Send arrived.
    Recv,
    /// Immediate Data arrived.
    RecvImm,
}

/// Completion status.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Status {
    /// Done.
    Success,
    /// Flushed: the stream failed before the request could finish.
    Flushed,
    /// A local error on this request (e.g. the host could not read its
    /// source data); the stream was terminated with this error.
    LocalError(TermError),
    /// The Commit Response carried this non-success status.
    CommitFailed(CommitStatus),
    /// The peer terminated the stream with this error while the request
    /// was the oldest outstanding one (the others are [`Status::Flushed`]).
    RemoteError(TermError),
}

/// One completion.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Completion {
    /// Queue.
    pub queue: WorkQueue,
    /// The work request's cookie.
    pub wr_id: u64,
    /// What completed.
    pub opcode: CompOp,
    /// Outcome.
    pub status: Status,
    /// Octets transferred (received Send: message length).
    pub byte_len: u32,
    /// Immediate data (received Immediate Data).
    pub imm: Option<[u8; 8]>,
    /// STag invalidated by a received Send with Invalidate.
    pub invalidated: Option<u32>,
    /// The received message asked for a solicited event.
    pub solicited: bool,
    /// Atomic original value (also given to `write_atomic_result`).
    pub atomic_original: Option<u64>,
}

impl Completion {
    pub(crate) fn new(
        queue: WorkQueue,
        wr_id: u64,
        opcode: CompOp,
        status: Status,
        byte_len: u32,
    ) -> Self {
        Completion {
            queue,
            wr_id,
            opcode,
            status,
            byte_len,
            imm: None,
            invalidated: None,
            solicited: false,
            atomic_original: None,
        }
    }
}

/// Connection and error events.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Event {
    /// Responder: a valid MPA Request arrived; call [`Qp::accept`] or
    /// [`Qp::reject`] ([`Qp::peer_private_data`] has its private data).
    ConnectRequest,
    /// MPA exchange done (initiator: Reply checked; responder: Reply
    /// queued). Sending work is possible now (subject to RTR rules).
    Established,
    /// The stream is in RTS: the RTR (if any) was sent or received.
    Ready,
    /// Initiator: the responder rejected the connection.
    Rejected,
    /// Negotiation failed with this error; the caller closes the socket.
    NegotiationFailed(TermError),
    /// The engine detected this protocol error and is sending a Terminate.
    LocalTerminate(TermError),
    /// The peer sent a Terminate with this error ([`Qp::peer_terminate`]
    /// has the whole message: events stay a few octets each).
    TerminateReceived(TermError),
    /// The TCP connection was lost.
    ConnectionLost,
    /// Graceful close finished: nothing outstanding; close the socket.
    Closed,
}

pub(crate) fn sq_opcode(op: &SendOp) -> CompOp {
    match op {
        SendOp::Send { .. } => CompOp::Send,
        SendOp::Write { .. } => CompOp::Write,
        SendOp::Read { .. } => CompOp::Read,
        SendOp::Atomic {
            op: AtomicOp::FetchAdd,
            ..
        } => CompOp::FetchAdd,
        SendOp::Atomic {
            op: AtomicOp::CmpSwap,
            ..
        } => CompOp::CmpSwap,
        SendOp::Atomic { .. } => CompOp::AtomicOther,
        SendOp::Immediate { .. } => CompOp::Immediate,
        SendOp::WriteImm { .. } => CompOp::WriteImm,
        SendOp::Commit { .. } => CompOp::Commit,
    }
}
