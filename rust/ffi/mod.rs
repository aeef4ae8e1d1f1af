// SPDX-License-Identifier: GPL-2.0
//! The thin unsafe layer between rsiw and the kernel's C APIs.
//!
//! Everything that touches a raw pointer or a generated binding lives
//! here, with a `// SAFETY:` comment on every `unsafe` block. Above it the
//! driver is safe Rust over the typed wrappers this module exports.

mod sys;

pub(crate) mod cm;
pub(crate) mod crc;
pub(crate) mod cq;
pub(crate) mod device;
pub(crate) mod flush;
mod layout;
pub(crate) mod link;
pub(crate) mod mr;
pub(crate) mod netdev;
pub(crate) mod object;
pub(crate) mod pmem;
pub(crate) mod qp;
pub(crate) mod rdma_cm;
pub(crate) mod srq;
pub(crate) mod socket;
pub(crate) mod zcopy;
