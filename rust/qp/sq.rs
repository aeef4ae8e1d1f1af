// SPDX-License-Identifier: GPL-2.0
//! The send queue: its entries (WRs as the driver holds them) and the ring.

use super::*;

/// A send queue entry.
#[derive(Clone, Copy)]
pub(crate) enum SqeKind {
    /// Goes on the wire through the engine.
    Wire(SendWr),
    /// `IB_WR_REG_MR`: fast-register an MR (local, in SQ order).
    RegMr { stag: u32, req: FastReg },
    /// `IB_WR_LOCAL_INV`.
    LocalInv { stag: u32 },
}

/// A posted send WR with its local data.
#[derive(Clone, Copy)]
pub(crate) struct Sqe {
    pub(crate) wr_id: u64,
    pub(crate) signaled: bool,
    pub(crate) kind: SqeKind,
    pub(crate) sges: [Sge; MAX_SGE],
    pub(crate) num_sge: u8,
    pub(crate) inline: [u8; MAX_INLINE],
    pub(crate) inline_len: u16,
    /// Report a masked atomic's opcode in its completion.
    pub(crate) masked: bool,
    /// `IB_WR_RDMA_READ_WITH_INV`: invalidate this local STag (the Read's
    /// sink) when the Read completes.
    pub(crate) inv_local: Option<u32>,
}

impl Sqe {
    pub(crate) fn sges(&self) -> &[Sge] {
        &self.sges[..usize::from(self.num_sge).min(MAX_SGE)]
    }
}

/// The send queue: a fixed ring.
pub(crate) struct SendQueue {
    pub(super) ring: KVVec<Option<Sqe>>,
    pub(super) head: usize,
    pub(super) count: usize,
}

impl SendQueue {
    pub(crate) fn new(max_wr: usize) -> Result<Self> {
        // No room at all (`max_send_wr` 0): every post is refused.
        Ok(Self { ring: KVVec::from_elem(None, max_wr, GFP_KERNEL_ACCOUNT)?, head: 0, count: 0 })
    }

    pub(crate) fn push(&mut self, sqe: Sqe) -> Result {
        if self.count == self.ring.len() {
            return Err(ENOMEM);
        }
        let tail = (self.head + self.count) % self.ring.len();
        self.ring[tail] = Some(sqe);
        self.count += 1;
        Ok(())
    }

    pub(crate) fn pop(&mut self) -> Option<Sqe> {
        if self.count == 0 {
            return None;
        }
        let sqe = self.ring[self.head].take();
        self.head = (self.head + 1) % self.ring.len();
        self.count -= 1;
        sqe
    }
}
