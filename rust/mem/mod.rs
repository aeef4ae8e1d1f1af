// SPDX-License-Identifier: GPL-2.0
//! Memory: registrations (STags, MRs, fast registration and invalidation),
//! and what the wire does to registered memory beyond placement: RFC 7306
//! atomics under the per-device lock table, and RDMA Commit's flush.

pub(crate) mod atomic;
pub(crate) mod atomic_locks;
pub(crate) mod commit;
pub(crate) mod mr;
mod verbs;
