// SPDX-License-Identifier: GPL-2.0
//! CRC32c (Castagnoli), as MPA uses it (RFC 5044 section 6.1 and appendix).
//!
//! The engine never computes the checksum itself: the kernel has an
//! accelerated `crc32c()`, the host uses a well-kept crate. Both sit behind
//! this trait.

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
        const POLY: u32 = 0x82F6_3B78; // reflected Castagnoli polynomial
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
        assert_eq!(SoftCrc32c.append(SoftCrc32c.checksum(a), b), SoftCrc32c.checksum(data));
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
        assert_eq!(SoftCrc32c.copy_append(0, b, &mut short), SoftCrc32c.checksum(&b[..5]));
        assert_eq!(&short, &b[..5]);
    }
}
