// SPDX-License-Identifier: GPL-2.0
//! The kernel-consumer harness of the KUnit suites: PDs, CQs, QPs, MRs,
//! SRQs and rdma_cm ids driven through the RDMA core's own calls, the way
//! an in-kernel ULP drives them (the same code drives rsiw and Linux siw).
//! Compiled only with KUnit; the driver never uses it.

pub(crate) mod cq;
pub(crate) mod device;
pub(crate) mod flush;
pub(crate) mod mr;
pub(crate) mod pmem;
pub(crate) mod qp;
pub(crate) mod rdma_cm;
pub(crate) mod srq;
pub(crate) mod zcopy;
