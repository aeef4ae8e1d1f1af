// SPDX-License-Identifier: GPL-2.0
//! The send queue: its entries (WRs as the driver holds them), how a WR
//! becomes one (which verb maps to which RDMAP operation, shared with the
//! kernel WRs of `verbs.rs`; a process's ring entry read and checked as it
//! is taken), and the ring.

use super::{
    flush::{FlushQueue, NO_PASS},
    *,
};
use crate::{
    engine::{
        qp::{Flags, Remote, SendOp},
        wire::{
            atomic::AtomicOp,
            commit::{Region, RequestRepr},
        },
    },
    ffi::ib::{abi, rsiw_sqe, AtomicFields, WrOpcode},
    ring::{Entry, WqRing},
};

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
    /// A process's ring entry that failed the checks a posted WR gets: it
    /// goes to the engine as a Send whose source check fails, so it
    /// completes with an error (`IB_WC_LOC_QP_OP_ERR`) and the stream ends
    /// with a Local Catastrophic Terminate, as for any local error.
    pub(crate) invalid: bool,
}

impl Sqe {
    /// An entry of no data yet (a placeholder kind, no SGEs, no inline
    /// data), for the conversions to fill in.
    pub(crate) fn new(wr_id: u64, signaled: bool) -> Self {
        Sqe {
            wr_id,
            signaled,
            kind: SqeKind::LocalInv { stag: 0 },
            sges: [Sge::default(); MAX_SGE],
            num_sge: 0,
            inline: [0; MAX_INLINE],
            inline_len: 0,
            masked: false,
            inv_local: None,
            invalid: false,
        }
    }

    /// Makes this entry a new one of no data (as [`Self::new`]) without
    /// clearing its SGE and inline arrays, which are read only up to
    /// `num_sge` and `inline_len`: an entry is a few hundred octets, and a
    /// slot that is refilled for every message should not be cleared and
    /// moved whole each time. The first SGE is cleared, as the conversions
    /// read it whatever the count.
    pub(crate) fn reset(&mut self, wr_id: u64, signaled: bool) {
        self.wr_id = wr_id;
        self.signaled = signaled;
        self.kind = SqeKind::LocalInv { stag: 0 };
        self.sges[0] = Sge::default();
        self.num_sge = 0;
        self.inline_len = 0;
        self.masked = false;
        self.inv_local = None;
        self.invalid = false;
    }

    pub(crate) fn sges(&self) -> &[Sge] {
        &self.sges[..usize::from(self.num_sge).min(MAX_SGE)]
    }
}

/// A process's send ring and the limits its entries are checked against.
pub(crate) struct UserSq {
    pub(super) ring: WqRing<rsiw_sqe>,
    pub(super) max_sge: usize,
    pub(super) max_inline: usize,
    /// `RSIW_RING_SQ_ACTIVE` is set: by the TX run's first look at the
    /// ring ([`SendQueue::take_for_tx`]), cleared when the run stops
    /// ([`SendQueue::tx_stopped`]).
    pub(super) active: bool,
    /// The producer index as the last TX run to stop read it.
    pub(super) stopped_at: u32,
}

impl UserSq {
    /// Sets or clears a flag of the ring, behind a full barrier before
    /// the next load (a flag store, then a producer index load).
    fn set_flag(&self, flag: u32, on: bool) {
        self.ring.set_flag(flag, on);
        self.ring.fence();
    }
}

/// The send queue: a fixed ring, or a process's ring (`user`).
pub(crate) struct SendQueue {
    pub(super) ring: KVVec<Option<Sqe>>,
    /// The kernel ring's oldest entry and how many it holds (`u32`: a
    /// queue is at most `max_qp_wr` deep, and `Qp` must stay small).
    pub(super) head: u32,
    pub(super) count: u32,
    pub(super) user: Option<UserSq>,
    /// Entries the flush pass under way may still take
    /// ([`FlushQueue::flush_pop_into`]; [`NO_PASS`]: none under way).
    flush_left: u32,
}

impl SendQueue {
    pub(crate) fn new(max_wr: usize) -> Result<Self> {
        // No room at all (`max_send_wr` 0): every post is refused.
        Ok(Self {
            ring: KVVec::from_elem(None, max_wr, GFP_KERNEL_ACCOUNT)?,
            head: 0,
            count: 0,
            user: None,
            flush_left: NO_PASS,
        })
    }

    pub(crate) fn new_user(user: UserSq) -> Self {
        Self {
            ring: KVVec::new(),
            head: 0,
            count: 0,
            user: Some(user),
            flush_left: NO_PASS,
        }
    }

    /// Entries the queue holds at most.
    pub(crate) fn capacity(&self) -> usize {
        match &self.user {
            Some(u) => u.ring.entries() as usize,
            None => self.ring.len(),
        }
    }

    /// Sets or clears a flag of a process's ring.
    pub(crate) fn set_flag(&self, flag: u32, on: bool) {
        if let Some(u) = &self.user {
            u.set_flag(flag, on);
        }
    }

    /// A TX run stops: a process's ring loses `RSIW_RING_SQ_ACTIVE` (a
    /// post from now on rings the doorbell). Whether the run must go again:
    /// the producer index, read behind a full barrier after that, is one
    /// no take has read (an entry posted without a doorbell while the flag
    /// was set) and no earlier stop has gone again for. `false` for a
    /// kernel queue.
    pub(crate) fn tx_stopped(&mut self) -> bool {
        let Some(u) = self.user.as_mut() else {
            return false;
        };
        u.set_flag(crate::ffi::ib::abi::RING_SQ_ACTIVE, false);
        u.active = false;
        let prod = u.ring.producer();
        let last = core::mem::replace(&mut u.stopped_at, prod);
        prod != u.ring.seen() && last != prod
    }

    /// [`Self::pop_into`] for the TX run. A process's ring gets
    /// `RSIW_RING_SQ_ACTIVE` first, behind a full barrier before the
    /// producer index is read: a post that finds the flag needs no
    /// doorbell, as the run looks at the ring again before it stops
    /// ([`Self::tx_stopped`]). Only a run that looks at the ring sets it.
    pub(crate) fn take_for_tx(&mut self, dst: &mut Option<Sqe>) -> bool {
        if let Some(u) = self.user.as_mut().filter(|u| !u.active) {
            u.set_flag(crate::ffi::ib::abi::RING_SQ_ACTIVE, true);
            u.active = true;
        }
        self.pop_into(dst)
    }

    /// Whether the last entry taken was the last one posted when it was
    /// taken.
    pub(crate) fn drained(&self) -> bool {
        match &self.user {
            Some(u) => u.ring.drained(),
            None => self.count == 0,
        }
    }

    pub(crate) fn push(&mut self, sqe: Sqe) -> Result {
        if self.user.is_some() {
            return Err(EINVAL); // the process posts through its ring
        }
        if self.count as usize == self.ring.len() {
            return Err(ENOMEM);
        }
        let tail = (self.head as usize + self.count as usize) % self.ring.len();
        self.ring[tail] = Some(sqe);
        self.count += 1;
        Ok(())
    }

    /// Takes the next entry into `dst` (false, and `dst` untouched, if
    /// there is none). A process's entry is converted in place, into the
    /// entry `dst` already holds if any (see [`Sqe::reset`]).
    // Out of line, its body in it: it is on the message path's hot list
    // (bench/hot-functions.txt), the flush's copy of the body is cold.
    #[inline(never)]
    pub(crate) fn pop_into(&mut self, dst: &mut Option<Sqe>) -> bool {
        self.flush_left = NO_PASS;
        self.take_into(dst)
    }
}

impl FlushQueue for SendQueue {
    type Entry = Sqe;

    fn flush_left(&mut self) -> &mut u32 {
        &mut self.flush_left
    }

    fn posted(&self) -> u32 {
        match &self.user {
            Some(u) => u.ring.len(),
            None => self.count,
        }
    }

    #[inline(always)]
    fn take_into(&mut self, dst: &mut Option<Sqe>) -> bool {
        if let Some(u) = self.user.as_mut() {
            match u.ring.take() {
                None => return false,
                Some(Entry::Posted(e)) => convert_user_send_into(&e, u.max_sge, u.max_inline, dst),
                Some(Entry::Broken) => *dst = Some(invalid_sqe(0)),
            }
            return true;
        }
        if self.count == 0 {
            return false;
        }
        *dst = self.ring[self.head as usize].take();
        self.head = ((self.head as usize + 1) % self.ring.len()) as u32;
        self.count -= 1;
        dst.is_some()
    }
}

/// What a send WR's operation needs beyond its SGEs and flags, from a
/// kernel WR or a process's ring entry.
pub(super) struct OpFields {
    pub(super) remote: Option<Remote>,
    /// Write with Immediate's immediate, as stored (big endian).
    pub(super) imm_be: Option<u32>,
    /// Send with Invalidate's remote STag, Local Invalidate's local one.
    pub(super) invalidate: Option<u32>,
    pub(super) atomic: Option<AtomicFields>,
}

/// The rest of a send WR's conversion, the same for kernel WRs and ring
/// entries: `sqe` holds the SGEs (or the inline data), `f` the flags,
/// `len` the data length; the opcode and `x` make the operation.
pub(super) fn finish_send(
    sqe: &mut Sqe,
    opcode: WrOpcode,
    f: Flags,
    mut len: u32,
    x: &OpFields,
) -> Result {
    let local = Local {
        stag: sqe.sges[0].lkey,
        to: sqe.sges[0].addr,
        handle: 0,
    };
    let remote = || x.remote.ok_or(EINVAL);
    let op = match opcode {
        WrOpcode::Send => SendOp::Send { invalidate: None },
        WrOpcode::SendWithInv => SendOp::Send {
            invalidate: Some(x.invalidate.ok_or(EINVAL)?),
        },
        WrOpcode::RdmaWrite => SendOp::Write { remote: remote()? },
        WrOpcode::RdmaWriteWithImm => SendOp::WriteImm {
            remote: remote()?,
            // RFC 7306 carries 8 octets; the verbs' 32-bit immediate goes
            // first, in network order (engine `immediate::Repr::from_imm32`).
            data: imm8(x.imm_be.ok_or(EINVAL)?),
        },
        WrOpcode::RdmaRead | WrOpcode::RdmaReadWithInv => {
            // One sink, as on the wire (an inline entry has no SGE).
            if sqe.num_sge != 1 {
                return Err(EINVAL);
            }
            if opcode == WrOpcode::RdmaReadWithInv {
                // What rdma_rw uses on iWARP: the sink MR goes with the Read.
                // The key is the sink's own (sge[0].lkey), as for siw.
                sqe.inv_local = Some(sqe.sges[0].lkey);
            }
            SendOp::Read { remote: remote()? }
        }
        WrOpcode::LocalInv => {
            sqe.kind = SqeKind::LocalInv {
                stag: x.invalidate.ok_or(EINVAL)?,
            };
            sqe.num_sge = 0;
            return Ok(());
        }
        WrOpcode::AtomicFetchAdd
        | WrOpcode::AtomicCmpSwap
        | WrOpcode::MaskedAtomicFetchAdd
        | WrOpcode::MaskedAtomicCmpSwap => {
            if sqe.num_sge != 1 || sqe.sges[0].len < 8 {
                return Err(EINVAL); // one result buffer of 8 octets
            }
            let (op, masked) = atomic_op(opcode, &x.atomic.ok_or(EINVAL)?)?;
            sqe.masked = masked;
            len = 8;
            op
        }
        // A Send with Immediate has no iWARP wire form (RFC 7306 has Write
        // with Immediate only): refused, see Documentation/extensions.md.
        // So are memory windows, Atomic Write (no wire form either) and
        // anything unknown.
        _ => return Err(EOPNOTSUPP),
    };
    sqe.kind = SqeKind::Wire(SendWr {
        wr_id: sqe.wr_id,
        flags: f,
        op,
        len,
        local,
    });
    Ok(())
}

/// A flush, from a kernel WR or a ring entry: an RDMA Commit of `region`,
/// no local data.
pub(super) fn commit_sqe(sqe: &mut Sqe, f: Flags, region: Region) -> Result {
    let request = RequestRepr::new(0, &[region]).ok_or(EINVAL)?;
    sqe.num_sge = 0;
    let local = Local {
        stag: 0,
        to: 0,
        handle: 0,
    };
    sqe.kind = SqeKind::Wire(SendWr {
        wr_id: sqe.wr_id,
        flags: f,
        op: SendOp::Commit { request },
        len: 0,
        local,
    });
    Ok(())
}

/// An atomic WR as the RFC 7306 request (section 5.1: FetchAdd's Compare
/// fields unused, Compare Mask all ones; an unmasked CmpSwap compares and
/// swaps all 64 bits) and whether it is a masked verb. The remote address
/// must be 8-octet aligned: `EINVAL` otherwise, at post time.
fn atomic_op(opcode: WrOpcode, a: &AtomicFields) -> Result<(SendOp, bool)> {
    if a.remote_addr % 8 != 0 {
        return Err(EINVAL);
    }
    let remote = Remote {
        stag: a.rkey,
        to: a.remote_addr,
    };
    let (op, add_swap, add_swap_mask, compare, compare_mask, masked) = match opcode {
        WrOpcode::AtomicFetchAdd => (AtomicOp::FetchAdd, a.compare_add, 0, 0, u64::MAX, false),
        WrOpcode::MaskedAtomicFetchAdd => (
            AtomicOp::FetchAdd,
            a.compare_add,
            a.compare_add_mask,
            0,
            u64::MAX,
            true,
        ),
        WrOpcode::AtomicCmpSwap => (
            AtomicOp::CmpSwap,
            a.swap,
            u64::MAX,
            a.compare_add,
            u64::MAX,
            false,
        ),
        _ => (
            AtomicOp::CmpSwap,
            a.swap,
            a.swap_mask,
            a.compare_add,
            a.compare_add_mask,
            true,
        ),
    };
    Ok((
        SendOp::Atomic {
            op,
            remote,
            add_swap,
            add_swap_mask,
            compare,
            compare_mask,
        },
        masked,
    ))
}

fn imm8(imm_be: u32) -> [u8; 8] {
    let b = imm_be.to_ne_bytes(); // already big endian in memory
    [b[0], b[1], b[2], b[3], 0, 0, 0, 0]
}

/// A process's send ring entry as a send queue entry, into `dst` in place
/// (see [`Sqe::reset`]), with the checks a posted WR gets
/// (`convert_send`, `Qp::post_send`): SGE count and inline length within
/// the QP's, lengths that add up, a known opcode with its fields. One that
/// fails them is `invalid` (see [`Sqe::invalid`], [`invalid_sqe`]); the
/// keys are checked when the WR runs, as for every WR.
fn convert_user_send_into(e: &rsiw_sqe, max_sge: usize, max_inline: usize, dst: &mut Option<Sqe>) {
    let signaled = e.flags & abi::SQE_SIGNALED != 0;
    let sqe = match dst {
        Some(s) => {
            s.reset(e.wr_id, signaled);
            s
        }
        None => dst.insert(Sqe::new(e.wr_id, signaled)),
    };
    if user_send(e, max_sge, max_inline, sqe).is_err() {
        *sqe = invalid_sqe(e.wr_id);
    }
}

/// [`convert_user_send_into`] into a new entry (the tests').
#[cfg(rsiw_kunit)]
fn convert_user_send(e: &rsiw_sqe, max_sge: usize, max_inline: usize) -> Sqe {
    let mut s = None;
    convert_user_send_into(e, max_sge, max_inline, &mut s);
    s.unwrap_or_else(|| invalid_sqe(e.wr_id))
}

/// What an entry that failed its checks becomes: a signaled one-octet Send
/// from no memory, refused by the source check.
fn invalid_sqe(wr_id: u64) -> Sqe {
    let local = Local {
        stag: 0,
        to: 0,
        handle: 0,
    };
    let op = SendOp::Send { invalidate: None };
    Sqe {
        kind: SqeKind::Wire(SendWr {
            wr_id,
            flags: Flags::SIGNALED,
            op,
            len: 1,
            local,
        }),
        invalid: true,
        ..Sqe::new(wr_id, true)
    }
}

/// The conversion of [`convert_user_send_into`], into `sqe` (reset for
/// the entry).
fn user_send(e: &rsiw_sqe, max_sge: usize, max_inline: usize, sqe: &mut Sqe) -> Result {
    let mut f = Flags::NONE;
    let signaled = e.flags & abi::SQE_SIGNALED != 0;
    if signaled {
        f = f.with(Flags::SIGNALED);
    }
    if e.flags & abi::SQE_SOLICITED != 0 {
        f = f.with(Flags::SOLICITED);
    }
    if e.flags & abi::SQE_FENCE != 0 {
        f = f.with(Flags::FENCE);
    }
    let inline = e.flags & abi::SQE_INLINE != 0;
    let mut len: u32 = 0;
    if inline {
        let n = e.length as usize;
        if n > max_inline.min(MAX_INLINE) || n > abi::MAX_INLINE {
            return Err(EINVAL);
        }
        let data = e.inline_data();
        sqe.inline[..n].copy_from_slice(&data[..n]);
        sqe.inline_len = n as u16;
        len = n as u32;
        if n > 0 {
            f = f.with(Flags::INLINE);
        }
    } else {
        let n = usize::from(e.num_sge);
        if n > max_sge.min(MAX_SGE) {
            return Err(EINVAL);
        }
        for (d, s) in sqe.sges.iter_mut().zip(&e.sges()[..n]) {
            *d = Sge {
                addr: s.addr,
                len: s.length,
                lkey: s.lkey,
            };
            len = len.checked_add(s.length).ok_or(EINVAL)?;
        }
        sqe.num_sge = n as u8;
    }
    let opcode = match u32::from(e.opcode) {
        abi::WR_SEND => WrOpcode::Send,
        abi::WR_SEND_WITH_INV => WrOpcode::SendWithInv,
        abi::WR_RDMA_WRITE => WrOpcode::RdmaWrite,
        abi::WR_RDMA_WRITE_WITH_IMM => WrOpcode::RdmaWriteWithImm,
        abi::WR_RDMA_READ => WrOpcode::RdmaRead,
        abi::WR_LOCAL_INV => WrOpcode::LocalInv,
        abi::WR_ATOMIC_CMP_AND_SWP => WrOpcode::AtomicCmpSwap,
        abi::WR_ATOMIC_FETCH_AND_ADD => WrOpcode::AtomicFetchAdd,
        abi::WR_MASKED_ATOMIC_CMP_AND_SWP => WrOpcode::MaskedAtomicCmpSwap,
        abi::WR_MASKED_ATOMIC_FETCH_AND_ADD => WrOpcode::MaskedAtomicFetchAdd,
        abi::WR_FLUSH => {
            // Placement type: the responder's registration decides (draft
            // 3.1); selectivity (`RSIW_SQE_FLUSH_MR`): the wire names
            // ranges only, so an MR flush is the range the process names.
            if inline || e.flush_type == 0 || e.flush_type & !3 != 0 {
                return Err(EINVAL);
            }
            return commit_sqe(
                sqe,
                f,
                Region {
                    stag: e.rkey,
                    len: e.length,
                    to: e.remote_addr,
                },
            );
        }
        // Send with Immediate (no iWARP wire form), memory windows, Atomic
        // Write (no iWARP wire form) and anything unknown.
        _ => return Err(EOPNOTSUPP),
    };
    let fields = OpFields {
        remote: Some(Remote {
            stag: e.rkey,
            to: e.remote_addr,
        }),
        imm_be: Some(e.imm_inv),
        invalidate: Some(e.imm_inv),
        atomic: Some(AtomicFields {
            remote_addr: e.remote_addr,
            rkey: e.rkey,
            compare_add: e.compare_add,
            swap: e.swap,
            compare_add_mask: e.compare_add_mask,
            swap_mask: e.swap_mask,
        }),
    };
    finish_send(sqe, opcode, f, len, &fields)
}

#[cfg(rsiw_kunit)]
#[kunit_tests(rsiw_ring_sqe)]
mod tests {
    use super::*;

    fn sqe(opcode: u32) -> rsiw_sqe {
        let mut e = rsiw_sqe {
            wr_id: 42,
            opcode: opcode as u8,
            flags: abi::SQE_SIGNALED,
            ..rsiw_sqe::default()
        };
        e.num_sge = 1;
        e.rkey = 0x100;
        e.remote_addr = 0x2000;
        e
    }

    fn with_sge(mut e: rsiw_sqe, n: usize, len: u32) -> rsiw_sqe {
        e.num_sge = n as u8;
        for x in e.sges_mut().iter_mut().take(n) {
            *x = crate::ffi::ib::rsiw_sge {
                addr: 0x1000,
                length: len,
                lkey: 0x200,
            };
        }
        e
    }

    fn is_invalid(e: &rsiw_sqe) -> bool {
        convert_user_send(e, 2, 64).invalid
    }

    #[test]
    fn valid_entries_convert() {
        let s = convert_user_send(&with_sge(sqe(abi::WR_RDMA_WRITE), 2, 100), 2, 64);
        assert!(!s.invalid && s.signaled && s.num_sge == 2 && s.wr_id == 42);
        match s.kind {
            SqeKind::Wire(w) => {
                assert_eq!(w.len, 200);
                assert!(
                    matches!(w.op, SendOp::Write { remote } if remote.stag == 0x100 && remote.to == 0x2000)
                );
            }
            _ => panic!("not a wire WR"),
        }
        let s = convert_user_send(&with_sge(sqe(abi::WR_ATOMIC_FETCH_AND_ADD), 1, 8), 2, 64);
        assert!(!s.invalid && matches!(s.kind, SqeKind::Wire(w) if w.len == 8));
        let mut m = with_sge(sqe(abi::WR_MASKED_ATOMIC_CMP_AND_SWP), 1, 8);
        m.swap_mask = 0xff;
        assert!(convert_user_send(&m, 2, 64).masked);
        let mut l = sqe(abi::WR_LOCAL_INV);
        l.imm_inv = 0x1234;
        assert!(matches!(
            convert_user_send(&l, 2, 64).kind,
            SqeKind::LocalInv { stag: 0x1234 }
        ));
        let mut f = sqe(abi::WR_FLUSH);
        f.flush_type = 2;
        f.length = 4096;
        assert!(!is_invalid(&f));
        let mut i = sqe(abi::WR_SEND);
        i.flags |= abi::SQE_INLINE;
        i.length = 64;
        let s = convert_user_send(&i, 2, 64);
        assert!(!s.invalid && s.inline_len == 64);
    }

    #[test]
    fn bad_entries_are_invalid() {
        // Unknown and unsupported opcodes.
        for op in [3u32, 8, 10, 11, 15, 0x77, 0xff] {
            assert!(is_invalid(&with_sge(sqe(op), 1, 8)));
        }
        // More SGEs than the QP's (2) or than an entry holds.
        assert!(is_invalid(&with_sge(sqe(abi::WR_SEND), 3, 8)));
        let mut many = sqe(abi::WR_SEND);
        many.num_sge = 200;
        assert!(is_invalid(&many));
        // Lengths that overflow 32 bits.
        assert!(is_invalid(&with_sge(sqe(abi::WR_SEND), 2, u32::MAX)));
        // Inline longer than the QP's (64) or the entry's.
        let mut i = sqe(abi::WR_SEND);
        i.flags |= abi::SQE_INLINE;
        i.length = 65;
        assert!(is_invalid(&i));
        i.length = u32::MAX;
        assert!(is_invalid(&i));
        // A Read with two sinks; an atomic with a short or second buffer,
        // or misaligned.
        assert!(is_invalid(&with_sge(sqe(abi::WR_RDMA_READ), 2, 8)));
        assert!(is_invalid(&with_sge(sqe(abi::WR_ATOMIC_CMP_AND_SWP), 1, 4)));
        let mut a = with_sge(sqe(abi::WR_ATOMIC_FETCH_AND_ADD), 1, 8);
        a.remote_addr = 0x2004;
        assert!(is_invalid(&a));
        // A flush with no or an unknown placement type, or inline.
        let mut f = sqe(abi::WR_FLUSH);
        assert!(is_invalid(&f));
        f.flush_type = 4;
        assert!(is_invalid(&f));
        f.flush_type = 1;
        f.flags |= abi::SQE_INLINE;
        assert!(is_invalid(&f));
        // What an invalid entry becomes: a signaled one-octet Send.
        let s = convert_user_send(&many, 2, 64);
        assert!(s.invalid && s.signaled && s.wr_id == 42);
        assert!(matches!(s.kind, SqeKind::Wire(w) if w.len == 1));
    }
}
