// SPDX-License-Identifier: GPL-2.0
//! The benches' three-lane CRC32c (benches/common/hwcrc.rs) against the
//! `crc32c` crate and the engine's bitwise reference, so that no bench
//! figure comes from a wrong checksum or a wrong copy.

#[allow(dead_code)]
#[path = "../benches/common/hwcrc.rs"]
mod hwcrc;

use hwcrc::HwCrc;
use proptest::prelude::*;
use rsiw_engine::crc::{Crc32c, SoftCrc32c};

mod common;
use common::data;

#[test]
fn known_vectors() {
    let c = HwCrc::new();
    assert_eq!(c.checksum(&[0u8; 32]), 0x8A91_36AA);
    assert_eq!(c.checksum(b"123456789"), 0xE306_9283);
    // Every lane length and tail: 0..3 KiB, and past one 3 x 8 KiB block.
    let d = data(70_000, 1);
    for n in (0..3072).chain([24_575, 24_576, 24_577, 49_200, 65_536, 70_000]) {
        assert_eq!(c.checksum(&d[..n]), crc32c::crc32c(&d[..n]), "{n} octets");
    }
    assert_eq!(c.checksum(&d[..1500]), SoftCrc32c.checksum(&d[..1500]));
}

proptest! {
    #[test]
    fn append_and_copy_append_match(
        n in 0usize..20_000, cut in any::<proptest::sample::Index>(), seed: u32, pre: u32,
    ) {
        let c = HwCrc::new();
        let d = data(n, seed);
        let (a, b) = d.split_at(cut.index(n + 1));
        let want = crc32c::crc32c_append(crc32c::crc32c_append(pre, a), b);
        prop_assert_eq!(c.append(c.append(pre, a), b), want);
        let mut dst = vec![0xEEu8; b.len() + 8];
        prop_assert_eq!(c.copy_append(c.append(pre, a), b, &mut dst[..b.len()]), want);
        prop_assert_eq!(&dst[..b.len()], b);
        prop_assert!(dst[b.len()..].iter().all(|&x| x == 0xEE));
    }
}
