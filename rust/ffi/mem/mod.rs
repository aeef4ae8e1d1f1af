// SPDX-License-Identifier: GPL-2.0
//! Memory: registered pages and words ([`pages`]), persistent memory
//! ([`pmem`]).

pub(crate) mod pages;
pub(crate) mod pmem;
