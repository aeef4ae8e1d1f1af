// SPDX-License-Identifier: GPL-2.0
//! RFC 7306 atomics at the responder: request validation and the masked
//! read-modify-write as pure functions (sections 5.1.1, 5.1.2, 5.2.1, 8.2).

use crate::ddp::{check_region, Access, ProtectionCodes, StagTable};
use crate::error::{self, TermError};
use crate::wire::atomic::{AtomicOp, RequestRepr};

/// Octets an atomic operation touches.
pub const OPERAND_LEN: u64 = 8;

/// The error for an AOpCode the RNIC does not support (RFC 7306 5.2.1
/// item 4, e.g. draft-03's Swap, reserved in the RFC's registry).
///
/// RFC 7306 section 1.1 says an unsupported Atomic Operation is reported
/// as "a Remote Operation Error or Unexpected OpCode error". Unexpected
/// OpCode (RFC 5040 7.2: layer RDMAP, type 2 Remote Operation, code 0x06)
/// is both: it has the Remote Operation error type and names the fault
/// exactly (an operation code this RNIC does not implement), and it is
/// what a requester probing for atomic support (section 1.1) expects back.
pub const UNSUPPORTED_AOPCODE: TermError = error::rdmap::UNEXPECTED_OPCODE;

/// Masked FetchAdd (RFC 7306 section 5.1.1): every bit set in `mask` is
/// the most significant bit of a field and the carry out of it is
/// discarded; mask 0 is a plain 64-bit wrapping add.
///
/// Branch-free form of the RFC pseudocode ([`fetch_add_masked_rfc`]): add
/// with the field MSBs cleared, so no carry can leave a field (a carry
/// into an MSB position stops there), then put each MSB's own sum bit
/// back with XOR. The tests check it equals the pseudocode bit for bit.
#[inline]
pub fn fetch_add_masked(original: u64, add: u64, mask: u64) -> u64 {
    ((original & !mask).wrapping_add(add & !mask)) ^ ((original ^ add) & mask)
}

/// The RFC 7306 section 5.1.1 pseudocode transcribed literally: a 64-step
/// ripple-carry add that drops the carry out of each `mask` bit. The
/// reference for [`fetch_add_masked`] (about 20 times slower).
pub fn fetch_add_masked_rfc(original: u64, add: u64, mask: u64) -> u64 {
    let mut bit_location: u64 = 1;
    let mut carry: u64 = 0;
    let mut remote: u64 = 0;
    for bit in 0..64u32 {
        if bit != 0 {
            bit_location <<= 1;
        }
        let val1 = (original & bit_location) >> bit;
        let val2 = (add & bit_location) >> bit;
        let sum = carry + val1 + val2;
        carry = (sum & 2) >> 1;
        if sum & 1 != 0 {
            remote |= bit_location;
        }
        carry = u64::from(carry != 0 && mask & bit_location == 0);
    }
    remote
}

/// Masked CmpSwap (RFC 7306 section 5.1.2): `Some(new)` if the masked
/// compare matches, `None` (memory unchanged) otherwise.
pub fn cmp_swap_masked(
    original: u64,
    compare: u64,
    compare_mask: u64,
    swap: u64,
    swap_mask: u64,
) -> Option<u64> {
    if (compare ^ original) & compare_mask == 0 {
        Some((original & !swap_mask) | (swap & swap_mask))
    } else {
        None
    }
}

/// The read-modify-write for `req` on the 64-bit value `old` (already in
/// host order): `(value to write back or None, original value to return)`.
/// Unsupported AOpCodes are [`UNSUPPORTED_AOPCODE`] and touch nothing.
pub fn atomic_execute(old: u64, req: &RequestRepr) -> Result<(Option<u64>, u64), TermError> {
    match req.op {
        AtomicOp::FetchAdd => Ok((
            Some(fetch_add_masked(old, req.add_swap, req.add_swap_mask)),
            old,
        )),
        AtomicOp::CmpSwap => Ok((
            cmp_swap_masked(
                old,
                req.compare,
                req.compare_mask,
                req.add_swap,
                req.add_swap_mask,
            ),
            old,
        )),
        AtomicOp::Unsupported(_) => Err(UNSUPPORTED_AOPCODE),
    }
}

/// What the caller must do for a valid Atomic Request: under its atomic
/// lock, read 8 octets at `stag`/`to`, run [`atomic_execute`], write back,
/// and answer `request_id` with the original value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct AtomicPlan {
    /// Target STag.
    pub stag: u32,
    /// Target TO (8-octet aligned).
    pub to: u64,
    /// The request, for [`atomic_execute`].
    pub request: RequestRepr,
}

/// Validates an Atomic Request (IRD is the caller's queue, see
/// [`super::RequestQueue`]). Order: AOpCode supported, STag valid and
/// associated, REMOTE_ATOMIC right, TO wrap, bounds of the 8 octets (RDMAP
/// remote protection codes, RFC 5040 7.2), then 64-bit alignment:
/// "Catastrophic error, localized to RDMAP Stream" (RFC 7306 8.2).
///
/// Alignment is checked on the TO: rsiw regions map TO to addresses with
/// the same residue modulo 8 (VA-based TOs, page-aligned zero-based ones).
pub fn validate_atomic<S: StagTable + ?Sized>(
    req: &RequestRepr,
    table: &S,
    pd: u32,
) -> Result<AtomicPlan, TermError> {
    if let AtomicOp::Unsupported(_) = req.op {
        return Err(UNSUPPORTED_AOPCODE);
    }
    check_region(
        table,
        pd,
        req.stag,
        req.to,
        OPERAND_LEN,
        Access::REMOTE_ATOMIC,
        &ProtectionCodes::RDMAP,
    )?;
    if req.to % OPERAND_LEN != 0 {
        return Err(error::rdmap::CATA_STREAM);
    }
    Ok(AtomicPlan {
        stag: req.stag,
        to: req.to,
        request: *req,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ddp::tagged_tests::{Table, PD};
    use proptest::prelude::*;

    /// Independent model: split at mask bits into fields, add each field
    /// modulo its width.
    fn per_field_model(a: u64, b: u64, mask: u64) -> u64 {
        let mut out = 0u64;
        let mut lo = 0u32;
        for bit in 0..64u32 {
            if mask & (1 << bit) != 0 || bit == 63 {
                let width = bit - lo + 1;
                let fmask = if width == 64 {
                    u64::MAX
                } else {
                    ((1u64 << width) - 1) << lo
                };
                let sum = ((a & fmask) >> lo).wrapping_add((b & fmask) >> lo);
                out |= (sum << lo) & fmask;
                lo = bit + 1;
            }
        }
        out
    }

    #[test]
    fn fetch_add_examples() {
        // Plain 64-bit add with mask 0, including the wrap.
        assert_eq!(fetch_add_masked(u64::MAX, 2, 0), 1);
        // Two 32-bit fields: 0xFFFFFFFF + 1 does not carry into the upper.
        assert_eq!(
            fetch_add_masked(
                0x0000_0005_FFFF_FFFF,
                0x0000_0001_0000_0001,
                0x8000_0000_8000_0000
            ),
            0x0000_0006_0000_0000
        );
        // Eight byte fields.
        assert_eq!(
            fetch_add_masked(
                0xFF01_FF01_FF01_FF01,
                0x0101_0101_0101_0101,
                0x8080_8080_8080_8080
            ),
            0x0002_0002_0002_0002
        );
        // The fast form equals the pseudocode on carry-heavy corners.
        for (a, b, m) in [
            (u64::MAX, u64::MAX, 0),
            (u64::MAX, 1, 1),
            (u64::MAX, u64::MAX, 1 << 63),
            (1 << 63, 1 << 63, 1 << 62),
        ] {
            assert_eq!(fetch_add_masked(a, b, m), fetch_add_masked_rfc(a, b, m));
        }
    }

    #[test]
    fn cmp_swap_examples() {
        let req = RequestRepr::cmp_swap(1, 0x600, 0x8000, 0xAAAA, 0xFF00, 0x1234, 0xFFFF);
        assert_eq!(atomic_execute(0x1234, &req), Ok((Some(0xAA34), 0x1234)));
        assert_eq!(atomic_execute(0x1235, &req), Ok((None, 0x1235)));
        let fa = RequestRepr::fetch_add(2, 0x600, 0x8000, 5, 0);
        assert_eq!(atomic_execute(10, &fa), Ok((Some(15), 10)));
    }

    #[test]
    fn validation_errors() {
        let t = Table;
        let ok = RequestRepr::fetch_add(1, 0x600, 0x8008, 1, 0);
        assert_eq!(validate_atomic(&ok, &t, PD).unwrap().to, 0x8008);
        let mut swap = ok;
        swap.op = AtomicOp::Unsupported(AtomicOp::DRAFT_SWAP);
        assert_eq!(
            validate_atomic(&swap, &t, PD),
            Err(error::rdmap::UNEXPECTED_OPCODE)
        );
        assert_eq!(
            atomic_execute(0, &swap),
            Err(error::rdmap::UNEXPECTED_OPCODE)
        );
        let mis = RequestRepr { to: 0x8004, ..ok };
        assert_eq!(
            validate_atomic(&mis, &t, PD),
            Err(error::rdmap::CATA_STREAM)
        );
        let oob = RequestRepr { to: 0x8100, ..ok };
        assert_eq!(
            validate_atomic(&oob, &t, PD),
            Err(error::rdmap::BASE_BOUNDS)
        );
        let noat = RequestRepr {
            stag: 0x100,
            to: 0x1000,
            ..ok
        };
        assert_eq!(validate_atomic(&noat, &t, PD), Err(error::rdmap::ACCESS));
        let bad = RequestRepr { stag: 0x999, ..ok };
        assert_eq!(
            validate_atomic(&bad, &t, PD),
            Err(error::rdmap::INVALID_STAG)
        );
        let other_pd = RequestRepr {
            stag: 0x300,
            to: 0x1000,
            ..ok
        };
        assert_eq!(
            validate_atomic(&other_pd, &t, PD),
            Err(error::rdmap::STAG_NOT_ASSOC)
        );
        let wrap = RequestRepr {
            stag: 0x500,
            to: u64::MAX - 6,
            ..ok
        };
        assert_eq!(validate_atomic(&wrap, &t, PD), Err(error::rdmap::TO_WRAP));
    }

    proptest! {
        #[test]
        fn mask_zero_is_wrapping_add(a: u64, b: u64) {
            prop_assert_eq!(fetch_add_masked(a, b, 0), a.wrapping_add(b));
        }

        #[test]
        fn all_ones_mask_is_xor(a: u64, b: u64) {
            // Every bit is its own 1-bit field: no carries at all.
            prop_assert_eq!(fetch_add_masked(a, b, u64::MAX), a ^ b);
            prop_assert_eq!(fetch_add_masked_rfc(a, b, u64::MAX), a ^ b);
            prop_assert_eq!(fetch_add_masked_rfc(a, b, 0), a.wrapping_add(b));
        }

        #[test]
        fn fields_add_independently(a: u64, b: u64, mask: u64) {
            let r = fetch_add_masked(a, b, mask);
            prop_assert_eq!(r, per_field_model(a, b, mask));
            prop_assert_eq!(r, fetch_add_masked_rfc(a, b, mask));
        }

        #[test]
        fn cmp_swap_bitwise(orig: u64, cmp: u64, cmask: u64, swap: u64, smask: u64) {
            let matches = (0..64).all(|i| (cmask >> i) & 1 == 0 || (orig >> i) & 1 == (cmp >> i) & 1);
            let got = cmp_swap_masked(orig, cmp, cmask, swap, smask);
            prop_assert_eq!(got.is_some(), matches);
            if let Some(new) = got {
                for i in 0..64 {
                    let want = if (smask >> i) & 1 == 1 { (swap >> i) & 1 } else { (orig >> i) & 1 };
                    prop_assert_eq!((new >> i) & 1, want);
                }
            }
        }
    }
}
