// SPDX-License-Identifier: GPL-2.0
//! What the CRC tests share.

/// `n` pseudo-random octets (a multiplicative hash of the index), the
/// same for the same `seed`.
pub fn data(n: usize, seed: u32) -> Vec<u8> {
    (0..n as u32)
        .map(|i| (i.wrapping_add(seed).wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect()
}
