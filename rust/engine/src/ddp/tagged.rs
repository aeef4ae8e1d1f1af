// SPDX-License-Identifier: GPL-2.0
//! Tagged buffer placement validation (RFC 5041 sections 3.2, 5.2 and 7.2;
//! RFC 5042 section 5 for the STag/stream association).
//!
//! The caller owns the STag table; the engine only asks it for a region's
//! description and decides whether the segment may be placed.

use core::ops::BitOr;

use crate::error::{self, TermError};

/// Access rights of a registered region.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Access(u8);

impl Access {
    /// No rights.
    pub const NONE: Self = Self(0);
    /// Local writes (sink of our own RDMA Read Responses).
    pub const LOCAL_WRITE: Self = Self(1);
    /// Remote RDMA Read (source of Read Responses).
    pub const REMOTE_READ: Self = Self(2);
    /// Remote RDMA Write (and RDMA Commit).
    pub const REMOTE_WRITE: Self = Self(4);
    /// Remote atomics (RFC 7306).
    pub const REMOTE_ATOMIC: Self = Self(8);
    /// RDMA Commit may target the region (verbs: `IB_ACCESS_FLUSH_GLOBAL`
    /// or `IB_ACCESS_FLUSH_PERSISTENT`); how durable a commit makes it is
    /// [`Region::durable`].
    pub const COMMIT: Self = Self(16);

    /// Whether every right in `need` is granted.
    #[inline]
    pub const fn contains(self, need: Self) -> bool {
        self.0 & need.0 == need.0
    }

    /// These rights but those of `other` (a QP that grants its peer
    /// fewer rights than a region does, say).
    #[inline]
    #[must_use]
    pub const fn without(self, other: Self) -> Self {
        Self(self.0 & !other.0)
    }
}

impl BitOr for Access {
    type Output = Self;

    fn bitor(self, rhs: Self) -> Self {
        Self(self.0 | rhs.0)
    }
}

/// What the STag table knows about a region.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Region {
    /// TO of the region's first octet.
    pub base_to: u64,
    /// Region length in octets.
    pub len: u64,
    /// Granted rights.
    pub access: Access,
    /// Protection domain; must be the stream's (RFC 5042 5.1).
    pub pd: u32,
    /// False once invalidated or deregistered.
    pub valid: bool,
    /// Registered with the durability attribute (RDMA Commit draft 3.1):
    /// a commit makes the data persistent, not only visible.
    pub durable: bool,
    /// The host's identity of the registration this region describes,
    /// unique for the table's life: a new registration behind the same
    /// STag (an index reused after deregistration, a fast-register with a
    /// key that came round again) has another. Every later access the
    /// engine makes on the strength of a check ([`TaggedPlacement::reg`],
    /// a Read Response's source) names it, and the host refuses the
    /// access unless the STag still names this registration.
    pub reg: u64,
}

/// The caller's STag lookup.
pub trait StagTable {
    /// The region `stag` names, if any.
    fn lookup(&self, stag: u32) -> Option<Region>;
}

/// Place `len` octets at `stag`/`to` (the caller copies the payload).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TaggedPlacement {
    /// Target STag.
    pub stag: u32,
    /// Target TO of the first octet.
    pub to: u64,
    /// Octets to place.
    pub len: u32,
    /// The registration the segment was validated against
    /// ([`Region::reg`]).
    pub reg: u64,
}

/// Which layer's protection codes a check reports (DDP's for incoming
/// tagged segments, RDMAP's for Read Request sources and atomic targets,
/// RFC 5040 section 7.2).
#[derive(Debug, Clone, Copy)]
pub(crate) struct ProtectionCodes {
    pub(crate) invalid_stag: TermError,
    pub(crate) not_assoc: TermError,
    pub(crate) to_wrap: TermError,
    pub(crate) bounds: TermError,
    pub(crate) access: TermError,
}

impl ProtectionCodes {
    /// DDP tagged buffer errors. DDP has no access code: access rights
    /// are RDMAP's (RFC 5040 7.2 "access rights violation"), as in siw.
    pub(crate) const DDP: Self = Self {
        invalid_stag: error::ddp::T_INVALID_STAG,
        not_assoc: error::ddp::T_STAG_NOT_ASSOC,
        to_wrap: error::ddp::T_TO_WRAP,
        bounds: error::ddp::T_BASE_BOUNDS,
        access: error::rdmap::ACCESS,
    };
    /// RDMAP remote protection errors.
    pub(crate) const RDMAP: Self = Self {
        invalid_stag: error::rdmap::INVALID_STAG,
        not_assoc: error::rdmap::STAG_NOT_ASSOC,
        to_wrap: error::rdmap::TO_WRAP,
        bounds: error::rdmap::BASE_BOUNDS,
        access: error::rdmap::ACCESS,
    };
}

/// Checks `len` octets at `stag`/`to` against the table, in this order:
/// STag known and valid, same PD, access rights, TO wrap (last octet past
/// 2^64 - 1), base and bounds.
pub(crate) fn check_region<S: StagTable + ?Sized>(
    table: &S,
    pd: u32,
    stag: u32,
    to: u64,
    len: u64,
    need: Access,
    codes: &ProtectionCodes,
) -> Result<Region, TermError> {
    let region = table
        .lookup(stag)
        .filter(|r| r.valid)
        .ok_or(codes.invalid_stag)?;
    if region.pd != pd {
        return Err(codes.not_assoc);
    }
    if !region.access.contains(need) {
        return Err(codes.access);
    }
    if len > 0 && to.checked_add(len - 1).is_none() {
        return Err(codes.to_wrap);
    }
    let off = to.checked_sub(region.base_to).ok_or(codes.bounds)?;
    if off > region.len || len > region.len - off {
        return Err(codes.bounds);
    }
    Ok(region)
}

/// Validates an incoming tagged DDP segment of `len` payload octets (RFC
/// 5041 section 7.2 tagged buffer errors). `need` is the right the RDMAP
/// message requires (REMOTE_WRITE for RDMA Write, LOCAL_WRITE for a Read
/// Response's sink); a missing right is RDMAP's access violation.
pub fn validate_tagged<S: StagTable + ?Sized>(
    table: &S,
    pd: u32,
    stag: u32,
    to: u64,
    len: u32,
    need: Access,
) -> Result<TaggedPlacement, TermError> {
    let region = check_region(
        table,
        pd,
        stag,
        to,
        u64::from(len),
        need,
        &ProtectionCodes::DDP,
    )?;
    Ok(TaggedPlacement {
        stag,
        to,
        len,
        reg: region.reg,
    })
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A tiny table: STag 0x100 = [0x1000, 0x2000) writable in PD 1,
    /// 0x200 invalidated, 0x300 in PD 2, 0x400 read-only, 0x500 ends at
    /// 2^64 - 1 (the whole top page, all rights), 0x600 atomic-capable and durable.
    pub(crate) struct Table;

    pub(crate) const PD: u32 = 1;

    impl StagTable for Table {
        fn lookup(&self, stag: u32) -> Option<Region> {
            let rw =
                Access::REMOTE_WRITE | Access::REMOTE_READ | Access::LOCAL_WRITE | Access::COMMIT;
            let r = |base_to, len, access, pd, valid| Region {
                base_to,
                len,
                access,
                pd,
                valid,
                durable: false,
                reg: u64::from(stag),
            };
            Some(match stag {
                0x100 => r(0x1000, 0x1000, rw, PD, true),
                0x200 => r(0x1000, 0x1000, rw, PD, false),
                0x300 => r(0x1000, 0x1000, rw, 2, true),
                0x400 => r(0x1000, 0x1000, Access::REMOTE_READ, PD, true),
                0x500 => r(
                    u64::MAX - 0xFFF,
                    0x1000,
                    rw | Access::REMOTE_ATOMIC,
                    PD,
                    true,
                ),
                0x600 => Region {
                    durable: true,
                    reg: 0x600,
                    ..r(0x8000, 0x100, rw | Access::REMOTE_ATOMIC, PD, true)
                },
                _ => return None,
            })
        }
    }

    const W: Access = Access::REMOTE_WRITE;

    #[test]
    fn every_tagged_error() {
        let t = Table;
        assert_eq!(
            validate_tagged(&t, PD, 0x100, 0x1000, 0x1000, W)
                .unwrap()
                .len,
            0x1000
        );
        assert_eq!(
            validate_tagged(&t, PD, 0x999, 0x1000, 1, W),
            Err(error::ddp::T_INVALID_STAG)
        );
        assert_eq!(
            validate_tagged(&t, PD, 0x200, 0x1000, 1, W),
            Err(error::ddp::T_INVALID_STAG)
        );
        assert_eq!(
            validate_tagged(&t, PD, 0x300, 0x1000, 1, W),
            Err(error::ddp::T_STAG_NOT_ASSOC)
        );
        assert_eq!(
            validate_tagged(&t, PD, 0x400, 0x1000, 1, W),
            Err(error::rdmap::ACCESS)
        );
        assert_eq!(
            validate_tagged(&t, PD, 0x100, 0xFFF, 1, W),
            Err(error::ddp::T_BASE_BOUNDS)
        );
        assert_eq!(
            validate_tagged(&t, PD, 0x100, 0x1FFF, 2, W),
            Err(error::ddp::T_BASE_BOUNDS)
        );
        assert_eq!(
            validate_tagged(&t, PD, 0x500, u64::MAX, 2, W),
            Err(error::ddp::T_TO_WRAP)
        );
        // Last octet exactly at 2^64 - 1 and zero-length at the very end.
        assert!(validate_tagged(&t, PD, 0x500, u64::MAX, 1, W).is_ok());
        assert!(validate_tagged(&t, PD, 0x100, 0x2000, 0, W).is_ok());
        assert_eq!(
            validate_tagged(&t, PD, 0x100, 0x2001, 0, W),
            Err(error::ddp::T_BASE_BOUNDS)
        );
    }

    #[test]
    fn rdmap_codes() {
        let c = &ProtectionCodes::RDMAP;
        let t = Table;
        let need = Access::REMOTE_READ;
        assert_eq!(
            check_region(&t, PD, 0x999, 0, 1, need, c),
            Err(error::rdmap::INVALID_STAG)
        );
        assert_eq!(
            check_region(&t, PD, 0x300, 0x1000, 1, need, c),
            Err(error::rdmap::STAG_NOT_ASSOC)
        );
        assert_eq!(
            check_region(&t, PD, 0x100, 0, 1, need, c),
            Err(error::rdmap::BASE_BOUNDS)
        );
        assert_eq!(
            check_region(&t, PD, 0x500, u64::MAX, 9, need, c),
            Err(error::rdmap::TO_WRAP)
        );
        assert_eq!(
            check_region(&t, PD, 0x100, 0x1000, 1, Access::REMOTE_ATOMIC, c),
            Err(error::rdmap::ACCESS)
        );
    }
}
