// SPDX-License-Identifier: GPL-2.0
//! rsiw's iWARP protocol engine: MPA (RFC 5044, RFC 6581), DDP (RFC 5041),
//! RDMAP (RFC 5040) with the RFC 7306 extensions and RDMA Commit.
//!
//! Sans-IO: bytes and posted work go in; frames, placement actions,
//! completions and errors come out. No allocation, no panics on any input,
//! no kernel or `std` types. The same files are compiled into `rsiw.ko`
//! (see `rust/rsiw_main.rs`, which includes this file with `#[path]`) and
//! into this host crate for `cargo test`, fuzzing and benchmarks.
//!
//! Whatever the host and the kernel do differently is a trait the caller
//! implements ([`crc::Crc32c`] for the checksum).

// In the kernel this file is a module of the driver crate, which is already
// `no_std`; `MODULE` is only set there.
#![cfg_attr(not(MODULE), no_std)]
#![forbid(unsafe_code)]

#[cfg(all(test, not(MODULE)))]
extern crate std;

pub mod crc;
pub mod error;
pub mod wire;

pub mod ddp;
pub mod mpa;
pub mod qp;
pub mod rdmap;
