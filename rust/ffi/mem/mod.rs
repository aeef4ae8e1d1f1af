// SPDX-License-Identifier: GPL-2.0
//! Memory: registered pages and words ([`pages`]), persistent memory
//! ([`pmem`]), the memory cgroup later allocations are charged to
//! ([`memcg`]).

pub(crate) mod memcg;
pub(crate) mod pages;
pub(crate) mod pmem;
