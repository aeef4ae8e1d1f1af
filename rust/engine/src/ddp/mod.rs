// SPDX-License-Identifier: GPL-2.0
//! DDP semantics (RFC 5041): segmentation on transmit, untagged reassembly
//! validation and tagged placement validation on receive.
//!
//! Nothing here touches memory. Receive-side checks return placement
//! actions ([`TaggedPlacement`], [`UntaggedPlacement`]) that the caller
//! executes; every failure is the [`TermError`](crate::error::TermError)
//! the Terminate message must carry.

mod segment;
mod tagged;
mod untagged;

pub use segment::Segmenter;
pub(crate) use tagged::{check_region, ProtectionCodes};
pub use tagged::{validate_tagged, Access, Region, StagTable, TaggedPlacement};
pub use untagged::{RecvQueues, UntaggedPlacement, UntaggedRx, INITIAL_MSN};

#[cfg(test)]
pub(crate) use tagged::tests as tagged_tests;
