// SPDX-License-Identifier: GPL-2.0
//! The KUnit suites that need the kernel: each drives rsiw the way a
//! kernel ULP or a wire peer does (see Documentation/building.md for the
//! suite list). Compiled only with KUnit.

mod atomic;
mod atomic_pin;
mod cm;
mod device;
mod faults;
mod flush;
mod imm;
mod order;
mod read_inv;
mod rx_work;
mod scale;
mod siw;
mod srq;
#[cfg(rsiw_kunit)]
mod util;
mod verbs;
mod zcopy;
