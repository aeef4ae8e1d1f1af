/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * Which rdma-core rsiw's provider is built against, and what differs.
 *
 * - Debian 12's rdma-core 44 (the default build): libibverbs-dev installs
 *   no private header, so rdma_core_pabi34.h declares the part of the
 *   private interface IBVERBS_PRIVATE_34 the provider uses.
 * - An rdma-core build tree installed by scripts/build-rdma-core.sh
 *   (rdma-core 55; `make RDMA_CORE=<prefix>`): the Makefile defines
 *   RSIW_RDMA_CORE_PRIVATE and puts the build's own private headers
 *   (<prefix>/include/rdma-core-private: infiniband/driver.h, config.h,
 *   ccan/, util/) on the include path, so the layouts are rdma-core's, not
 *   a copy. rdma-core 44 and 55 share private ABI 34 (the same
 *   verbs_context_ops, verbs_qp, verbs_mr, ... and symbol versions); what
 *   differs is the public verbs.h, below.
 * - Inside rdma-core's own source tree (CMakeLists.txt, the folder copied
 *   to providers/rsiw/): CMake defines RSIW_RDMA_CORE_TREE and
 *   RSIW_RDMA_CORE_MAJOR; the private headers are the tree's, the
 *   kernel's ABI header comes from its kernel-headers/ (rdma/rsiw-abi.h),
 *   and the provider registers itself with PROVIDER_DRIVER().
 *
 * RSIW_RDMA_CORE_MAJOR (from the Makefile: pkg-config's libibverbs version
 * 1.14.<major>.0) selects the public-API differences:
 *
 * - rdma-core >= 45: struct ibv_qp_ex ends with wr_flush (ibv_wr_flush),
 *   with IBV_QP_EX_WITH_FLUSH, IBV_WR_FLUSH, IBV_WC_FLUSH,
 *   IBV_ACCESS_FLUSH_GLOBAL/_PERSISTENT and IBV_FLUSH_* beside it. Those
 *   are enumerators, which the preprocessor cannot test, hence the version.
 */
#ifndef RSIW_RDMA_CORE_COMPAT_H
#define RSIW_RDMA_CORE_COMPAT_H

#ifndef RSIW_RDMA_CORE_MAJOR
#define RSIW_RDMA_CORE_MAJOR 44
#endif

#if defined(RSIW_RDMA_CORE_TREE) && !defined(RSIW_RDMA_CORE_PRIVATE)
#define RSIW_RDMA_CORE_PRIVATE
#endif

#ifdef RSIW_RDMA_CORE_PRIVATE
#include <infiniband/driver.h>
#include <infiniband/kern-abi.h>
#define RSIW_PABI_VERSION IBVERBS_PABI_VERSION
/* ccan's; rsiw.c defines its own (the same), and driver.h is parsed already. */
#undef container_of
/* rsiw.c names verbs_register_driver_34: another private ABI is a port. */
#if IBVERBS_PABI_VERSION != 34
#error "rsiw's provider is written for rdma-core's private ABI 34"
#endif
#else
#include "rdma_core_pabi34.h"
#endif

/* ibv_qp_ex.wr_flush exists (the provider must fill it in). */
#define RSIW_HAVE_WR_FLUSH (RSIW_RDMA_CORE_MAJOR >= 45)

#endif /* RSIW_RDMA_CORE_COMPAT_H */
