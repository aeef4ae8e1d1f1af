// SPDX-License-Identifier: GPL-2.0
//! The bottom layer: everything that touches a raw pointer or a generated
//! binding lives here, with a `// SAFETY:` comment on every `unsafe`
//! block, and names no type of the driver above it. The driver is safe
//! Rust over what this exports:
//!
//! - [`ib`]: the RDMA core (`#[vtable]` traits the driver implements,
//!   generic entry points, handles, views over work requests);
//! - [`net`]: kernel TCP sockets, net_devices, zero-copy notifications;
//! - [`mem`]: registered pages and words, persistent memory;
//! - [`runtime`]: workqueues, rate limit, module-global mutexes;
//! - [`object`]: core-allocated objects with a Rust part;
//! - [`crc`]: the kernel's CRC32c;
//! - [`trace`]: the module's trace events;
//! - `consumer` (KUnit only): the kernel-consumer harness of the suites.

mod sys;

#[cfg(rsiw_kunit)]
pub(crate) mod consumer;
pub(crate) mod crc;
pub(crate) mod ib;
mod layout;
pub(crate) mod mem;
pub(crate) mod net;
pub(crate) mod object;
pub(crate) mod runtime;
pub(crate) mod sync;
pub(crate) mod trace;
