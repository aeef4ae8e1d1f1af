// SPDX-License-Identifier: GPL-2.0
//! Work requests as the core passes them: safe views over `ib_send_wr`
//! (and the larger WR its opcode implies) and `ib_recv_wr`, and the walk of
//! a WR chain that reports the first refused WR in `bad_wr`.

use core::{marker::PhantomData, ptr, slice};

use kernel::{
    ffi::c_int,
    prelude::*,
    uaccess::{UserPtr, UserSlice},
};

use super::super::sys;
use super::{device::Driver, mr::IbMr, Sge};

/// A send WR's opcode (`enum ib_wr_opcode`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum WrOpcode {
    Send,
    SendWithInv,
    SendWithImm,
    RdmaWrite,
    RdmaWriteWithImm,
    RdmaRead,
    RdmaReadWithInv,
    RegMr,
    LocalInv,
    AtomicFetchAdd,
    AtomicCmpSwap,
    MaskedAtomicFetchAdd,
    MaskedAtomicCmpSwap,
    Flush,
    /// Any other opcode (`IB_WR_ATOMIC_WRITE`, driver-private ones, ...).
    Other(u32),
}

impl WrOpcode {
    fn from_raw(op: u32) -> Self {
        match op {
            sys::ib_wr_opcode_IB_WR_SEND => Self::Send,
            sys::ib_wr_opcode_IB_WR_SEND_WITH_INV => Self::SendWithInv,
            sys::ib_wr_opcode_IB_WR_SEND_WITH_IMM => Self::SendWithImm,
            sys::ib_wr_opcode_IB_WR_RDMA_WRITE => Self::RdmaWrite,
            sys::ib_wr_opcode_IB_WR_RDMA_WRITE_WITH_IMM => Self::RdmaWriteWithImm,
            sys::ib_wr_opcode_IB_WR_RDMA_READ => Self::RdmaRead,
            sys::ib_wr_opcode_IB_WR_RDMA_READ_WITH_INV => Self::RdmaReadWithInv,
            sys::ib_wr_opcode_IB_WR_REG_MR => Self::RegMr,
            sys::ib_wr_opcode_IB_WR_LOCAL_INV => Self::LocalInv,
            sys::ib_wr_opcode_IB_WR_ATOMIC_FETCH_AND_ADD => Self::AtomicFetchAdd,
            sys::ib_wr_opcode_IB_WR_ATOMIC_CMP_AND_SWP => Self::AtomicCmpSwap,
            sys::ib_wr_opcode_IB_WR_MASKED_ATOMIC_FETCH_AND_ADD => Self::MaskedAtomicFetchAdd,
            sys::ib_wr_opcode_IB_WR_MASKED_ATOMIC_CMP_AND_SWP => Self::MaskedAtomicCmpSwap,
            sys::ib_wr_opcode_IB_WR_FLUSH => Self::Flush,
            other => Self::Other(other),
        }
    }
}

/// A send WR's `send_flags`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct SendFlags {
    pub(crate) signaled: bool,
    pub(crate) solicited: bool,
    pub(crate) fence: bool,
    pub(crate) inline: bool,
}

/// The remote side of an RDMA WR (`ib_rdma_wr`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct RdmaFields {
    pub(crate) remote_addr: u64,
    pub(crate) rkey: u32,
}

/// An atomic WR's fields (`ib_atomic_wr`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct AtomicFields {
    pub(crate) remote_addr: u64,
    pub(crate) rkey: u32,
    pub(crate) compare_add: u64,
    pub(crate) compare_add_mask: u64,
    pub(crate) swap: u64,
    pub(crate) swap_mask: u64,
}

/// A fast-register WR's fields (`ib_reg_wr`).
pub(crate) struct RegFields<'a, D: Driver> {
    pub(crate) mr: &'a IbMr<D>,
    pub(crate) key: u32,
    pub(crate) access: u32,
}

/// One `ib_send_wr` of a chain the core passed to `post_send`.
///
/// # Invariants
///
/// `wr` is a valid WR whose containing WR type is the one its opcode
/// implies (`ib_rdma_wr`, `ib_atomic_wr`, `ib_reg_wr`), its SGE list has
/// `num_sge` entries, and a `reg_wr`'s MR is an MR of a `D` device alive
/// while the WR is posted. For a kernel QP (`user` false) inline SGEs name
/// readable kernel memory (the `IB_SEND_INLINE` contract); a user QP's are
/// the caller's user addresses (uverbs `POST_SEND`, in the caller's context).
pub(crate) struct SendWrRef<'a, D: Driver> {
    wr: &'a sys::ib_send_wr,
    user: bool,
    _driver: PhantomData<D>,
}

impl<'a, D: Driver> SendWrRef<'a, D> {
    /// # Safety
    ///
    /// `wr` must satisfy the type invariants for `'a`.
    pub(super) unsafe fn from_raw(wr: *const sys::ib_send_wr, user: bool) -> Self {
        Self {
            // SAFETY: valid for `'a` per the contract.
            wr: unsafe { &*wr },
            user,
            _driver: PhantomData,
        }
    }

    fn ptr(&self) -> *const sys::ib_send_wr {
        ptr::from_ref(self.wr)
    }

    pub(crate) fn wr_id(&self) -> u64 {
        // SAFETY: reading the union as the integer both members are.
        unsafe { self.wr.__bindgen_anon_1.wr_id }
    }

    pub(crate) fn opcode(&self) -> WrOpcode {
        WrOpcode::from_raw(self.wr.opcode)
    }

    pub(crate) fn flags(&self) -> SendFlags {
        let f = self.wr.send_flags;
        SendFlags {
            signaled: f & sys::ib_send_flags_IB_SEND_SIGNALED != 0,
            solicited: f & sys::ib_send_flags_IB_SEND_SOLICITED != 0,
            fence: f & sys::ib_send_flags_IB_SEND_FENCE != 0,
            inline: f & sys::ib_send_flags_IB_SEND_INLINE != 0,
        }
    }

    /// The SGE list; `EINVAL` for a negative count or a missing list.
    pub(crate) fn sges(&self) -> Result<&'a [Sge]> {
        sge_list(self.wr.sg_list, self.wr.num_sge)
    }

    /// Copies the first `dst.len()` octets an inline SGE names (at most
    /// its length) into `dst`: user memory for a user QP (`EFAULT` for a
    /// bad address), kernel memory otherwise. `EINVAL` unless the WR is
    /// inline.
    pub(crate) fn read_inline(&self, sge: &Sge, dst: &mut [u8]) -> Result {
        if !self.flags().inline || dst.len() > sge.len as usize {
            return Err(EINVAL);
        }
        if self.user {
            let src = UserSlice::new(UserPtr::from_addr(sge.addr as usize), dst.len());
            src.reader().read_slice(dst)
        } else {
            // SAFETY: by the type invariant an inline SGE of a kernel WR
            // names `sge.len` readable octets of kernel memory.
            unsafe {
                ptr::copy_nonoverlapping(
                    sge.addr as usize as *const u8,
                    dst.as_mut_ptr(),
                    dst.len(),
                )
            };
            Ok(())
        }
    }

    /// The key of a Send with Invalidate or a Local Invalidate.
    pub(crate) fn invalidate_rkey(&self) -> Option<u32> {
        matches!(self.opcode(), WrOpcode::SendWithInv | WrOpcode::LocalInv)
            // SAFETY: the union member of these opcodes.
            .then(|| unsafe { self.wr.ex.invalidate_rkey })
    }

    /// The immediate data of a WITH_IMM opcode, as stored (big endian).
    pub(crate) fn imm_data_be(&self) -> Option<u32> {
        matches!(
            self.opcode(),
            WrOpcode::SendWithImm | WrOpcode::RdmaWriteWithImm
        )
        // SAFETY: the union member of these opcodes.
        .then(|| unsafe { self.wr.ex.imm_data })
    }

    /// The remote address and key of an RDMA or flush WR (`ib_rdma_wr`).
    pub(crate) fn rdma(&self) -> Option<RdmaFields> {
        use WrOpcode::*;
        matches!(
            self.opcode(),
            RdmaWrite | RdmaWriteWithImm | RdmaRead | RdmaReadWithInv | Flush
        )
        .then(|| {
            // SAFETY: by the type invariant these opcodes come in an
            // `ib_rdma_wr` (flush too, by rsiw's convention).
            let r = unsafe { &*self.ptr().cast::<sys::ib_rdma_wr>() };
            RdmaFields {
                remote_addr: r.remote_addr,
                rkey: r.rkey,
            }
        })
    }

    /// The fields of an atomic WR (`ib_atomic_wr`).
    pub(crate) fn atomic(&self) -> Option<AtomicFields> {
        use WrOpcode::*;
        matches!(
            self.opcode(),
            AtomicFetchAdd | AtomicCmpSwap | MaskedAtomicFetchAdd | MaskedAtomicCmpSwap
        )
        .then(|| {
            // SAFETY: by the type invariant these come in an `ib_atomic_wr`.
            let a = unsafe { &*self.ptr().cast::<sys::ib_atomic_wr>() };
            AtomicFields {
                remote_addr: a.remote_addr,
                rkey: a.rkey,
                compare_add: a.compare_add,
                compare_add_mask: a.compare_add_mask,
                swap: a.swap,
                swap_mask: a.swap_mask,
            }
        })
    }

    /// The fields of a fast-register WR (`ib_reg_wr`).
    pub(crate) fn reg(&self) -> Option<RegFields<'a, D>> {
        (self.opcode() == WrOpcode::RegMr).then(|| {
            // SAFETY: by the type invariant a REG_MR WR is an `ib_reg_wr`
            // whose MR is `D`'s and alive while the WR is posted.
            let reg = unsafe { &*self.ptr().cast::<sys::ib_reg_wr>() };
            // SAFETY: as above, `reg.mr` is `D`'s live MR.
            let mr = unsafe { IbMr::from_raw(reg.mr) };
            RegFields {
                mr,
                key: reg.key,
                access: reg.access as u32,
            }
        })
    }
}

/// One `ib_recv_wr` of a chain the core passed to `post_recv` or
/// `post_srq_recv`.
pub(crate) struct RecvWrRef<'a>(&'a sys::ib_recv_wr);

impl<'a> RecvWrRef<'a> {
    pub(crate) fn wr_id(&self) -> u64 {
        // SAFETY: `wr_id` is the union member kernel WRs set (or `wr_cqe`,
        // same bits).
        unsafe { self.0.__bindgen_anon_1.wr_id }
    }

    /// The SGE list; `EINVAL` for a negative count or a missing list.
    pub(crate) fn sges(&self) -> Result<&'a [Sge]> {
        sge_list(self.0.sg_list, self.0.num_sge)
    }
}

/// An SGE list as the core passes it, viewed in place.
fn sge_list<'a>(list: *mut sys::ib_sge, num: c_int) -> Result<&'a [Sge]> {
    let n = usize::try_from(num).map_err(|_| EINVAL)?;
    if n == 0 {
        return Ok(&[]);
    }
    if list.is_null() {
        return Err(EINVAL);
    }
    // SAFETY: the WR's list has `num_sge` entries (the core's contract),
    // alive while the WR is being posted; `Sge` is laid out as `ib_sge`.
    Ok(unsafe { slice::from_raw_parts(list.cast::<Sge>(), n) })
}

/// Walks a send WR chain, handing each WR to `post`. On the first failure
/// sets `*bad_wr` to that WR and returns the error.
///
/// # Safety
///
/// `wr` must be a valid chain as the core passes it to `post_send`, each
/// WR satisfying [`SendWrRef`]'s invariants with `user`; `bad_wr` valid
/// for writes (or null).
pub(super) unsafe fn post_send_chain<D: Driver>(
    mut wr: *const sys::ib_send_wr,
    bad_wr: *mut *const sys::ib_send_wr,
    user: bool,
    mut post: impl FnMut(&SendWrRef<'_, D>) -> Result,
) -> c_int {
    while !wr.is_null() {
        // SAFETY: per the contract.
        let view = unsafe { SendWrRef::<D>::from_raw(wr, user) };
        if let Err(e) = post(&view) {
            if !bad_wr.is_null() {
                // SAFETY: `bad_wr` is valid for writes when non-null.
                unsafe { *bad_wr = wr };
            }
            return e.to_errno();
        }
        wr = view.wr.next;
    }
    0
}

/// Walks a receive WR chain, handing each WR to `post`. On the first
/// failure sets `*bad_wr` to that WR and returns the error; `*bad_wr` is
/// untouched on success.
///
/// # Safety
///
/// `wr` must be a valid chain as the core passes it to `post_recv` /
/// `post_srq_recv`; `bad_wr` valid for writes (or null).
pub(super) unsafe fn post_recv_chain(
    mut wr: *const sys::ib_recv_wr,
    bad_wr: *mut *const sys::ib_recv_wr,
    mut post: impl FnMut(&RecvWrRef<'_>) -> Result,
) -> c_int {
    while !wr.is_null() {
        // SAFETY: per the contract `wr` is a valid WR.
        let view = RecvWrRef(unsafe { &*wr });
        if let Err(e) = post(&view) {
            if !bad_wr.is_null() {
                // SAFETY: per the contract.
                unsafe { *bad_wr = wr };
            }
            return e.to_errno();
        }
        wr = view.0.next;
    }
    0
}
