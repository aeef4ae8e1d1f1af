// SPDX-License-Identifier: GPL-2.0
//! Which CRC32c the module's MPA connections run, chosen once at load.
//!
//! The kernel's `crc32c()` uses the CPU's `crc32` instruction, tens of
//! GiB/s on hardware. Under an emulator the instruction can be the slow
//! one: QEMU's TCG runs it as a bitwise helper (64 shift/xor steps per
//! 8 octets), about 4x slower there than the engine's slicing-by-16 table,
//! which is plain loads and xors. So, as the kernel's RAID-6 and XOR
//! templates do, the module times both over one buffer and keeps the
//! faster; the `crc32c_impl` parameter overrides the choice.

use kernel::{
    prelude::*,
    time::{Instant, Monotonic},
};

use crate::{
    engine::crc::{Crc32c, TableCrc32c},
    ffi::crc::{self, KernelCrc32c},
};

/// Octets per timed call (a few FPDUs' worth, as a 64 KiB message is
/// summed: page pieces and FPDUs of 1.4-9 KiB).
const BUF: usize = 4096;
/// Each timing runs for at least this long...
const SLICE_NS: i64 = 2_000_000;
/// ...and each implementation is timed this many times, alternately (the
/// best run counts: another task or an interrupt only slows a run down).
const RUNS: usize = 3;

/// The implementation to use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Choice {
    Kernel,
    Table,
}

impl Choice {
    fn name(self) -> &'static str {
        match self {
            Choice::Kernel => "the kernel's crc32c()",
            Choice::Table => "the slicing-by-16 table",
        }
    }
}

/// The measured choice: the table only if it is faster (ties keep the
/// kernel's, which is the one every other kernel user of CRC32c runs).
pub(crate) fn faster(kernel_mbps: u64, table_mbps: u64) -> Choice {
    if table_mbps > kernel_mbps {
        Choice::Table
    } else {
        Choice::Kernel
    }
}

/// MB/s of `c` over `buf`, timed for at least [`SLICE_NS`].
fn rate(c: &impl Crc32c, buf: &[u8]) -> u64 {
    let start = Instant::<Monotonic>::now();
    let (mut octets, mut sum) = (0u64, 0u32);
    loop {
        sum = c.append(sum, core::hint::black_box(buf));
        octets += buf.len() as u64;
        let ns = (Instant::<Monotonic>::now() - start).as_nanos();
        if ns >= SLICE_NS {
            core::hint::black_box(sum);
            // octets / ns is GB/s; x 1000 for MB/s.
            return octets * 1000 / ns as u64;
        }
    }
}

/// Best-of-[`RUNS`] rates of the kernel's and the table's CRC32c, each in
/// MB/s, alternating so that both see the same load.
pub(crate) fn measure() -> Result<(u64, u64)> {
    let mut buf = KVec::with_capacity(BUF, GFP_KERNEL)?;
    for i in 0..BUF as u32 {
        buf.push((i.wrapping_mul(2_654_435_761) >> 13) as u8, GFP_KERNEL)?;
    }
    let (mut k, mut t) = (0, 0);
    for _ in 0..RUNS {
        k = k.max(rate(&KernelCrc32c, &buf));
        t = t.max(rate(&TableCrc32c, &buf));
    }
    Ok((k, t))
}

/// Sets the module's CRC32c from `param` (`crc32c_impl`: 0 measure, 1 the
/// kernel's, 2 the table) and logs the choice in one line.
pub(crate) fn select(param: u32) -> Result {
    let choice = match param {
        0 => {
            let (k, t) = measure()?;
            let c = faster(k, t);
            pr_info!(
                "MPA CRC32c: crc32c() {k} MB/s, table {t} MB/s: using {}\n",
                c.name()
            );
            c
        }
        1 | 2 => {
            let c = if param == 1 {
                Choice::Kernel
            } else {
                Choice::Table
            };
            pr_info!("MPA CRC32c: using {} (crc32c_impl={param})\n", c.name());
            c
        }
        _ => {
            pr_err!("crc32c_impl={param}: 0 (measure), 1 (crc32c()) or 2 (table)\n");
            return Err(EINVAL);
        }
    };
    crc::use_table(choice == Choice::Table);
    Ok(())
}

#[cfg(rsiw_kunit)]
#[kunit_tests(rsiw_crc_select)]
mod tests {
    use super::*;

    #[test]
    fn the_faster_wins_and_a_tie_keeps_the_kernels() {
        assert_eq!(faster(140, 560), Choice::Table);
        assert_eq!(faster(20_000, 2_000), Choice::Kernel);
        assert_eq!(faster(500, 500), Choice::Kernel);
    }

    #[test]
    fn measuring_gives_rates_and_select_obeys_the_parameter() -> Result {
        let was = crc::uses_table();
        let (k, t) = measure()?;
        // Both ran: any CPU this runs on sums more than 1 MB/s.
        assert!(k > 0 && t > 0);
        select(2)?;
        assert!(crc::uses_table());
        select(1)?;
        assert!(!crc::uses_table());
        assert!(select(3).is_err());
        assert!(!crc::uses_table()); // a bad value changes nothing
                                     // Measuring again picks what the first measurement says wherever
                                     // one is clearly faster (x1.5: under TCG the table is ~4x, on
                                     // hardware crc32c() ~10x).
        select(0)?;
        if t > k * 3 / 2 {
            assert!(crc::uses_table());
        } else if k > t * 3 / 2 {
            assert!(!crc::uses_table());
        }
        crc::use_table(was);
        Ok(())
    }
}
