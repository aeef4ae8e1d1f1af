// SPDX-License-Identifier: GPL-2.0
//! The module's CRC32c: the kernel's (accelerated) `crc32c()` or the
//! engine's slicing-by-16 table, whichever `device::crc` chose at load.

use core::sync::atomic::{AtomicBool, Ordering};

#[cfg(rsiw_kunit)]
use kernel::prelude::*;

use crate::engine::crc::{Crc32c, TableCrc32c};

use super::sys;

/// CRC32c through the kernel's library, which picks the fastest
/// implementation the CPU has (the `crc32` instruction on x86).
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

/// Whether [`ModuleCrc32c`] runs the table instead of `crc32c()`.
static USE_TABLE: AtomicBool = AtomicBool::new(false);

/// Makes every later [`ModuleCrc32c`] call run the engine's table
/// (`true`) or the kernel's `crc32c()` (`false`). Both compute the same
/// function, so switching while connections run changes no checksum.
pub(crate) fn use_table(on: bool) {
    USE_TABLE.store(on, Ordering::Relaxed);
}

/// Whether [`ModuleCrc32c`] runs the engine's table.
pub(crate) fn uses_table() -> bool {
    USE_TABLE.load(Ordering::Relaxed)
}

/// The CRC32c every MPA connection of the module uses (TX framing, RX
/// checks, the pages sent by reference, MPA negotiation).
#[derive(Clone, Copy, Default)]
pub(crate) struct ModuleCrc32c;

impl Crc32c for ModuleCrc32c {
    #[inline]
    fn append(&self, crc: u32, data: &[u8]) -> u32 {
        if uses_table() {
            TableCrc32c.append(crc, data)
        } else {
            KernelCrc32c.append(crc, data)
        }
    }

    #[inline]
    fn copy_append(&self, crc: u32, src: &[u8], dst: &mut [u8]) -> u32 {
        if uses_table() {
            TableCrc32c.copy_append(crc, src, dst)
        } else {
            KernelCrc32c.copy_append(crc, src, dst)
        }
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

    #[test]
    fn table_matches_the_kernel_at_every_length_offset_and_cut() -> Result {
        // The kernel's crc32c() switches code paths by length (one chain
        // below 512 octets, three lanes and a carry-less join above): cover
        // both, from three start offsets.
        let mut buf = KVec::with_capacity(4200, GFP_KERNEL)?;
        for i in 0..4200u32 {
            buf.push((i.wrapping_mul(2_654_435_761) >> 13) as u8, GFP_KERNEL)?;
        }
        for len in Iterator::chain(0..1100, [1448, 2048, 4096]) {
            for off in [0, 1, 7] {
                let d = &buf[off..off + len];
                let want = KernelCrc32c.checksum(d);
                assert_eq!(TableCrc32c.checksum(d), want);
                let (a, b) = d.split_at(len / 3);
                assert_eq!(TableCrc32c.append(KernelCrc32c.checksum(a), b), want);
            }
        }
        Ok(())
    }

    #[test]
    fn module_crc_follows_the_switch_and_agrees_either_way() {
        let data: [u8; 200] = core::array::from_fn(|i| (i * 13 + 5) as u8);
        let was = uses_table();
        let want = SoftCrc32c.checksum(&data);
        for on in [true, false] {
            use_table(on);
            assert_eq!(uses_table(), on);
            assert_eq!(ModuleCrc32c.checksum(&data), want);
            let mut dst = [0u8; 200];
            assert_eq!(ModuleCrc32c.copy_append(0, &data, &mut dst), want);
            assert_eq!(dst, data);
        }
        use_table(was);
    }
}
