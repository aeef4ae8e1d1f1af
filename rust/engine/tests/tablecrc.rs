// SPDX-License-Identifier: GPL-2.0
//! The engine's slicing-by-16 CRC32c (`TableCrc32c`, which rsiw.ko uses
//! where it measures faster than the kernel's `crc32c()`) against the
//! `crc32c` crate: every length, any cut, any prefix state, the fused copy.

use proptest::prelude::*;
use rsiw_engine::crc::{Crc32c, TableCrc32c};

mod common;
use common::data;

#[test]
fn every_length_to_4k_and_a_64k_message() {
    let d = data(65_536, 3);
    for n in (0..4097).chain([9000, 65_535, 65_536]) {
        assert_eq!(
            TableCrc32c.checksum(&d[..n]),
            crc32c::crc32c(&d[..n]),
            "{n} octets"
        );
    }
    // Unaligned starts: the loads are unaligned word loads.
    for off in 1..16 {
        assert_eq!(
            TableCrc32c.checksum(&d[off..off + 1500]),
            crc32c::crc32c(&d[off..off + 1500])
        );
    }
}

proptest! {
    #[test]
    fn append_and_copy_append_match_the_crate(
        n in 0usize..20_000, cut in any::<proptest::sample::Index>(), seed: u32, pre: u32,
        dst_off in 0usize..16,
    ) {
        let c = TableCrc32c;
        let d = data(n, seed);
        let (a, b) = d.split_at(cut.index(n + 1));
        let want = crc32c::crc32c_append(crc32c::crc32c_append(pre, a), b);
        prop_assert_eq!(c.append(c.append(pre, a), b), want);
        let mut dst = vec![0xEEu8; b.len() + 24];
        let out = &mut dst[dst_off..dst_off + b.len()];
        prop_assert_eq!(c.copy_append(c.append(pre, a), b, out), want);
        prop_assert_eq!(&dst[dst_off..dst_off + b.len()], b);
        prop_assert!(dst[..dst_off].iter().chain(&dst[dst_off + b.len()..]).all(|&x| x == 0xEE));
    }
}
