// SPDX-License-Identifier: GPL-2.0
//! The engine's CRC32c, computed by the kernel's (accelerated) `crc32c()`.

#[cfg(rsiw_kunit)]
use kernel::prelude::*;

use crate::engine::crc::Crc32c;

use super::sys;

/// CRC32c through the kernel's library, which picks the fastest
/// implementation the CPU has.
#[derive(Clone, Copy, Default)]
pub(crate) struct KernelCrc32c;

impl Crc32c for KernelCrc32c {
    fn append(&self, crc: u32, data: &[u8]) -> u32 {
        // The kernel's crc32c() works on the raw register: invert around it
        // to continue a finished value (see the trait's documentation).
        // SAFETY: `data` is valid for reads of `data.len()` bytes.
        !unsafe { sys::crc32c(!crc, data.as_ptr().cast(), data.len()) }
    }
}

#[cfg(rsiw_kunit)]
#[kunit_tests(rsiw_crc32c)]
mod tests {
    use super::*;
    use crate::engine::crc::SoftCrc32c;

    #[test]
    fn kernel_crc32c_matches_known_vectors() {
        // RFC 3720 appendix B.4 and the CRC-32C check value.
        assert_eq!(KernelCrc32c.checksum(&[0u8; 32]), 0x8A91_36AA);
        assert_eq!(KernelCrc32c.checksum(b"123456789"), 0xE306_9283);
    }

    #[test]
    fn kernel_crc32c_matches_engine_reference() {
        let mut buf = [0u8; 300];
        for (i, b) in buf.iter_mut().enumerate() {
            *b = (i * 7 + 3) as u8;
        }
        let (a, b) = buf.split_at(123);
        let whole = KernelCrc32c.checksum(&buf);
        assert_eq!(whole, SoftCrc32c.checksum(&buf));
        assert_eq!(KernelCrc32c.append(KernelCrc32c.checksum(a), b), whole);
    }
}
