// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * librsiw: the rdma-core provider of rsiw devices. libibverbs loads it
 * (/etc/libibverbs.d/rsiw.driver, or RDMAV_DRIVERS) and binds it to every
 * device whose uverbs driver id is RSIW_DRIVER_ID.
 *
 * Today it opens a device and answers the queries (ibv_devinfo); objects
 * and the data path are not provided yet, and libibverbs answers their
 * verbs with EOPNOTSUPP.
 */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rdma_core_pabi34.h"
#include "../../include/uapi/rdma/rsiw-abi.h"

#define container_of(ptr, type, member) ((type *)((char *)(ptr) - offsetof(type, member)))

struct rsiw_device {
	struct verbs_device vdev;
};

struct rsiw_context {
	struct verbs_context vctx;
};

static struct rsiw_context *to_rctx(struct ibv_context *ctx)
{
	return container_of(ctx, struct rsiw_context, vctx.context);
}

static int rsiw_query_device_ex(struct ibv_context *ctx,
				const struct ibv_query_device_ex_input *input,
				struct ibv_device_attr_ex *attr, size_t attr_size)
{
	struct ib_uverbs_ex_query_device_resp resp;
	size_t resp_size = sizeof(resp);
	uint64_t fw;
	int ret;

	ret = ibv_cmd_query_device_any(ctx, input, attr, attr_size, &resp, &resp_size);
	if (ret)
		return ret;
	/* The kernel reports fw_ver as a number: major.minor.sub. */
	fw = resp.base.fw_ver;
	snprintf(attr->orig_attr.fw_ver, sizeof(attr->orig_attr.fw_ver), "%u.%u.%u",
		 (unsigned int)(fw >> 32), (unsigned int)(fw >> 16) & 0xffff,
		 (unsigned int)fw & 0xffff);
	return 0;
}

static int rsiw_query_port(struct ibv_context *ctx, uint8_t port, struct ibv_port_attr *attr)
{
	struct ibv_query_port cmd;

	memset(&cmd, 0, sizeof(cmd));
	return ibv_cmd_query_port(ctx, port, attr, &cmd, sizeof(cmd));
}

static void rsiw_free_context(struct ibv_context *ibctx)
{
	struct rsiw_context *ctx = to_rctx(ibctx);

	verbs_uninit_context(&ctx->vctx);
	free(ctx);
}

static const struct verbs_context_ops rsiw_context_ops = {
	.free_context = rsiw_free_context,
	.query_device_ex = rsiw_query_device_ex,
	.query_port = rsiw_query_port,
};

static struct verbs_context *rsiw_alloc_context(struct ibv_device *ibdev, int cmd_fd,
						void *private_data)
{
	struct ib_uverbs_get_context_resp resp;
	struct ibv_get_context cmd;
	struct rsiw_context *ctx;

	(void)private_data;
	/* The offset of the verbs_context in ours, as a pointer (the ABI's way). */
	ctx = _verbs_init_and_alloc_context(ibdev, cmd_fd, sizeof(*ctx),
					    (struct verbs_context *)offsetof(struct rsiw_context, vctx),
					    RSIW_DRIVER_ID);
	if (!ctx)
		return NULL;
	memset(&cmd, 0, sizeof(cmd));
	if (ibv_cmd_get_context(&ctx->vctx, &cmd, sizeof(cmd), &resp, sizeof(resp))) {
		verbs_uninit_context(&ctx->vctx);
		free(ctx);
		return NULL;
	}
	verbs_set_ops(&ctx->vctx, &rsiw_context_ops);
	return &ctx->vctx;
}

static struct verbs_device *rsiw_alloc_device(struct verbs_sysfs_dev *sysfs_dev)
{
	struct rsiw_device *dev = calloc(1, sizeof(*dev));

	(void)sysfs_dev;
	return dev ? &dev->vdev : NULL;
}

static void rsiw_uninit_device(struct verbs_device *vdev)
{
	free(container_of(vdev, struct rsiw_device, vdev));
}

static const struct verbs_match_ent rsiw_match_table[] = {
	{ .u.driver_id = RSIW_DRIVER_ID, .kind = VERBS_MATCH_DRIVER_ID },
	{ .kind = VERBS_MATCH_SENTINEL },
};

static const struct verbs_device_ops rsiw_device_ops = {
	.name = "rsiw",
	.match_min_abi_version = RSIW_ABI_VERSION,
	.match_max_abi_version = RSIW_ABI_VERSION,
	.match_table = rsiw_match_table,
	.alloc_device = rsiw_alloc_device,
	.uninit_device = rsiw_uninit_device,
	.alloc_context = rsiw_alloc_context,
};

__attribute__((constructor)) static void rsiw_register_driver(void)
{
	verbs_register_driver_34(&rsiw_device_ops);
}
