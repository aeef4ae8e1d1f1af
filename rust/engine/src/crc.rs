// SPDX-License-Identifier: GPL-2.0
//! CRC32c (Castagnoli), as MPA uses it (RFC 5044 section 6.1 and appendix).
//!
//! The engine's framing code never picks an implementation: everything
//! goes through the [`Crc32c`] trait. The kernel has an accelerated
//! `crc32c()` (the CPU's `crc32` instruction), the host benches use their
//! own; [`TableCrc32c`] is a portable table-driven one, for CPUs where the
//! instruction is slow (an emulated CPU: QEMU's TCG runs `crc32` as a
//! bitwise loop, ~4x slower than this table in the guest).

/// A CRC32c implementation.
///
/// `append(crc, data)` takes the finished CRC32c of some preceding bytes
/// (`0` for none) and returns the finished CRC32c of those bytes followed by
/// `data`. This is the convention of the `crc32c` crate's `crc32c_append`;
/// an implementation over a raw register (like the kernel's `crc32c()`)
/// computes `!raw(!crc, data)`.
pub trait Crc32c {
    /// CRC32c of the preceding bytes (`crc`) extended by `data`.
    fn append(&self, crc: u32, data: &[u8]) -> u32;

    /// CRC32c of `data` alone.
    fn checksum(&self, data: &[u8]) -> u32 {
        self.append(0, data)
    }

    /// Copies `src` into `dst` and returns `append(crc, src)`. An
    /// implementation that can fuse the two (load, sum, store) touches
    /// each octet once; this default copies, then sums the copy while it
    /// is still in cache. Only the first `min(src.len(), dst.len())`
    /// octets are copied and summed (the engine passes equal lengths).
    fn copy_append(&self, crc: u32, src: &[u8], dst: &mut [u8]) -> u32 {
        let n = src.len().min(dst.len());
        match (src.get(..n), dst.get_mut(..n)) {
            (Some(s), Some(d)) => {
                d.copy_from_slice(s);
                self.append(crc, d)
            }
            _ => crc,
        }
    }
}

/// A bitwise reference implementation, slow but dependency-free. Only for
/// tests that must not depend on the caller's implementation.
#[derive(Clone, Copy, Debug, Default)]
pub struct SoftCrc32c;

impl Crc32c for SoftCrc32c {
    fn append(&self, crc: u32, data: &[u8]) -> u32 {
        let mut reg = !crc;
        for &byte in data {
            reg ^= u32::from(byte);
            for _ in 0..8 {
                let lsb = reg & 1;
                reg >>= 1;
                if lsb != 0 {
                    reg ^= POLY;
                }
            }
        }
        !reg
    }
}

/// The reflected Castagnoli polynomial.
const POLY: u32 = 0x82F6_3B78;

/// Slicing-by-16 tables: `TABLES[0]` is the byte-at-a-time table, and
/// `TABLES[k][b]` is the register contribution of byte `b` followed by
/// `k` zero octets.
static TABLES: [[u32; 256]; 16] = tables();

const fn tables() -> [[u32; 256]; 16] {
    let mut t = [[0u32; 256]; 16];
    let mut i = 0;
    while i < 256 {
        let mut c = i as u32;
        let mut k = 0;
        while k < 8 {
            c = (c >> 1) ^ (0u32.wrapping_sub(c & 1) & POLY);
            k += 1;
        }
        t[0][i] = c;
        i += 1;
    }
    let mut s = 1;
    while s < 16 {
        let mut i = 0;
        while i < 256 {
            let p = t[s - 1][i];
            t[s][i] = (p >> 8) ^ t[0][(p & 0xff) as usize];
            i += 1;
        }
        s += 1;
    }
    t
}

/// The register after the 16 octets `c` (one 128-bit load, sixteen
/// table lookups).
#[inline(always)]
fn step16(t: &[[u32; 256]; 16], reg: u32, c: &[u8; 16]) -> u32 {
    let v = u128::from_le_bytes(*c);
    let lo = (v as u64) ^ u64::from(reg);
    let hi = (v >> 64) as u64;
    let b = |w: u64, k: u32| usize::from((w >> (8 * k)) as u8);
    t[15][b(lo, 0)]
        ^ t[14][b(lo, 1)]
        ^ t[13][b(lo, 2)]
        ^ t[12][b(lo, 3)]
        ^ t[11][b(lo, 4)]
        ^ t[10][b(lo, 5)]
        ^ t[9][b(lo, 6)]
        ^ t[8][b(lo, 7)]
        ^ t[7][b(hi, 0)]
        ^ t[6][b(hi, 1)]
        ^ t[5][b(hi, 2)]
        ^ t[4][b(hi, 3)]
        ^ t[3][b(hi, 4)]
        ^ t[2][b(hi, 5)]
        ^ t[1][b(hi, 6)]
        ^ t[0][b(hi, 7)]
}

#[inline(always)]
fn step1(t: &[[u32; 256]; 16], reg: u32, byte: u8) -> u32 {
    t[0][usize::from(reg as u8 ^ byte)] ^ (reg >> 8)
}

/// CRC32c by slicing-by-16 tables (16 KiB, built at compile time): 16
/// octets per step with two word loads and sixteen independent lookups.
/// Pure integer code: no FPU state, no CPU feature. On hardware with a
/// `crc32` instruction it is several times slower than that instruction;
/// where the instruction is emulated it is several times faster (the
/// kernel module measures both at load and uses the faster).
#[derive(Clone, Copy, Debug, Default)]
pub struct TableCrc32c;

impl Crc32c for TableCrc32c {
    fn append(&self, crc: u32, mut data: &[u8]) -> u32 {
        let t = &TABLES;
        let mut reg = !crc;
        while let Some((c, rest)) = data.split_first_chunk::<16>() {
            reg = step16(t, reg, c);
            data = rest;
        }
        for &byte in data {
            reg = step1(t, reg, byte);
        }
        !reg
    }

    /// Fused: each 16-octet step stores the block it loaded.
    fn copy_append(&self, crc: u32, src: &[u8], dst: &mut [u8]) -> u32 {
        let n = src.len().min(dst.len());
        let (Some(mut s), Some(mut d)) = (src.get(..n), dst.get_mut(..n)) else {
            return crc;
        };
        let t = &TABLES;
        let mut reg = !crc;
        // `s` and `d` have the same length: both split or neither.
        while let Some((sc, sr)) = s.split_first_chunk::<16>() {
            let Some((dc, dr)) = core::mem::take(&mut d).split_first_chunk_mut::<16>() else {
                break;
            };
            *dc = *sc;
            reg = step16(t, reg, sc);
            (s, d) = (sr, dr);
        }
        for (out, &byte) in d.iter_mut().zip(s) {
            *out = byte;
            reg = step1(t, reg, byte);
        }
        !reg
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn soft_crc_known_vector() {
        // RFC 3720 appendix B.4: 32 bytes of zeros -> 0x8A9136AA.
        assert_eq!(SoftCrc32c.checksum(&[0u8; 32]), 0x8A91_36AA);
        // The classic "123456789" check value for CRC-32C.
        assert_eq!(SoftCrc32c.checksum(b"123456789"), 0xE306_9283);
    }

    #[test]
    fn append_composes() {
        let data = b"iWARP over TCP with MPA framing";
        let (a, b) = data.split_at(11);
        assert_eq!(
            SoftCrc32c.append(SoftCrc32c.checksum(a), b),
            SoftCrc32c.checksum(data)
        );
    }

    #[test]
    fn copy_append_copies_and_sums() {
        let data = b"iWARP over TCP with MPA framing";
        let (a, b) = data.split_at(11);
        let mut dst = [0u8; 40];
        let c = SoftCrc32c.copy_append(SoftCrc32c.checksum(a), b, &mut dst[..b.len()]);
        assert_eq!(c, SoftCrc32c.checksum(data));
        assert_eq!(&dst[..b.len()], b);
        assert!(dst[b.len()..].iter().all(|&x| x == 0));
        // Unequal lengths: the common prefix only.
        let mut short = [0u8; 5];
        assert_eq!(
            SoftCrc32c.copy_append(0, b, &mut short),
            SoftCrc32c.checksum(&b[..5])
        );
        assert_eq!(&short, &b[..5]);
    }

    #[test]
    fn table_crc_matches_bitwise_at_every_length_and_cut() {
        let data: [u8; 300] = core::array::from_fn(|i| (i * 131 + 7) as u8);
        assert_eq!(TableCrc32c.checksum(&[0u8; 32]), 0x8A91_36AA);
        assert_eq!(TableCrc32c.checksum(b"123456789"), 0xE306_9283);
        for len in 0..data.len() {
            let want = SoftCrc32c.checksum(&data[..len]);
            assert_eq!(TableCrc32c.checksum(&data[..len]), want, "len {len}");
            // Any cut, any start alignment: append composes.
            for cut in [0, 1, 7, 15, 16, 17, len / 2, len] {
                let cut = cut.min(len);
                let (a, b) = data[..len].split_at(cut);
                assert_eq!(
                    TableCrc32c.append(TableCrc32c.checksum(a), b),
                    want,
                    "len {len} cut {cut}"
                );
            }
        }
    }

    #[test]
    fn table_copy_append_copies_and_sums() {
        let data: [u8; 77] = core::array::from_fn(|i| (i * 31 + 1) as u8);
        for len in [0, 1, 15, 16, 17, 33, 77] {
            let mut dst = [0xAAu8; 80];
            let c = TableCrc32c.copy_append(5, &data[..len], &mut dst[..len]);
            assert_eq!(c, SoftCrc32c.append(5, &data[..len]), "len {len}");
            assert_eq!(&dst[..len], &data[..len]);
            assert!(
                dst[len..].iter().all(|&x| x == 0xAA),
                "len {len}: wrote past the end"
            );
        }
        // Unequal lengths: the common prefix only.
        let mut short = [0u8; 20];
        assert_eq!(
            TableCrc32c.copy_append(0, &data, &mut short),
            SoftCrc32c.checksum(&data[..20])
        );
        assert_eq!(&short, &data[..20]);
    }
}
