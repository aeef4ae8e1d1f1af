/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * What differs between the rdma-core versions rsiw's provider builds
 * against. In every build the provider interface (infiniband/driver.h
 * and what it includes) is rdma-core's own, of the private ABI the
 * library links against (IBVERBS_PABI_VERSION, the NN of -rdmavNN and
 * of the IBVERBS_PRIVATE_NN symbol version):
 *
 * - Inside rdma-core's tree (CMakeLists.txt; scripts/build-rdma-core.sh
 *   drops the folder into rdma-core 55 and 59): the tree's headers.
 * - Out of tree against the installed libibverbs (the Makefile; Debian
 *   12's rdma-core 44): the public headers are the installed
 *   libibverbs-dev's, the private ones come from a configured rdma-core
 *   source of the installed library's private ABI
 *   (scripts/build-rdma-core.sh --headers).
 *
 * The private ABI selects the provider interface:
 *
 * - ABI 57 and later (rdma-core 57+): ibv_cmd_get_context() takes the
 *   file descriptors to pass to the kernel (none here).
 *
 * RSIW_RDMA_CORE_MAJOR, the version of the public verbs.h (the
 * Makefile: pkg-config's libibverbs version 1.14.<major>.0; CMake: the
 * tree's PACKAGE_VERSION), selects the public-API differences:
 *
 * - rdma-core >= 45: struct ibv_qp_ex ends with wr_flush (ibv_wr_flush),
 *   with IBV_QP_EX_WITH_FLUSH, IBV_WR_FLUSH, IBV_WC_FLUSH,
 *   IBV_ACCESS_FLUSH_GLOBAL/_PERSISTENT and IBV_FLUSH_* beside it. Those
 *   are enumerators, which the preprocessor cannot test, hence the version.
 */
#ifndef RSIW_RDMA_CORE_COMPAT_H
#define RSIW_RDMA_CORE_COMPAT_H

#include <infiniband/driver.h>
#include <infiniband/kern-abi.h>

#ifndef RSIW_RDMA_CORE_MAJOR
#error "RSIW_RDMA_CORE_MAJOR (the rdma-core version of verbs.h) is not defined"
#endif

/* ccan's; rsiw.c defines its own (the same), and driver.h is parsed already. */
#undef container_of

/* ibv_cmd_get_context() without file descriptors, on every ABI. */
static inline int rsiw_cmd_get_context(struct verbs_context *ctx,
				       struct ibv_get_context *cmd,
				       size_t cmd_size,
				       struct ib_uverbs_get_context_resp *resp,
				       size_t resp_size)
{
#if IBVERBS_PABI_VERSION >= 57
	return ibv_cmd_get_context(ctx, cmd, cmd_size, NULL, resp, resp_size);
#else
	return ibv_cmd_get_context(ctx, cmd, cmd_size, resp, resp_size);
#endif
}

/* ibv_qp_ex.wr_flush exists (the provider must fill it in). */
#define RSIW_HAVE_WR_FLUSH (RSIW_RDMA_CORE_MAJOR >= 45)

#endif /* RSIW_RDMA_CORE_COMPAT_H */
