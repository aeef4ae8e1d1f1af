// SPDX-License-Identifier: GPL-2.0
//! Typed zero-copy views over the iWARP headers, one file per header.
//!
//! Each view is `Header<T: AsRef<[u8]>>` with a checked constructor
//! (`new_checked`) and one small getter/setter per field, plus a plain `Repr`
//! with `parse` and `emit` where a header has a meaningful parsed form.

pub mod atomic;
pub mod commit;
pub mod ddp;
pub mod fpdu;
pub mod immediate;
pub mod mpa;
pub mod rdmap;
pub mod terminate;
