// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * librsiw: the rdma-core provider of rsiw devices. libibverbs loads it
 * (/etc/libibverbs.d/rsiw.driver, or RDMAV_DRIVERS) and binds it to every
 * device whose uverbs driver id is RSIW_DRIVER_ID.
 *
 * Every verb is a uverbs command: the kernel's verbs run the objects and
 * the data path (posting, polling and arming are commands too), so a user
 * QP is the same QP a kernel consumer gets, with the same checks. The
 * price is a system call per post, poll and arm.
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

static struct ibv_pd *rsiw_alloc_pd(struct ibv_context *ctx)
{
	struct ib_uverbs_alloc_pd_resp resp;
	struct ibv_alloc_pd cmd;
	struct ibv_pd *pd = calloc(1, sizeof(*pd));

	if (!pd)
		return NULL;
	if (ibv_cmd_alloc_pd(ctx, pd, &cmd, sizeof(cmd), &resp, sizeof(resp))) {
		free(pd);
		return NULL;
	}
	return pd;
}

static int rsiw_dealloc_pd(struct ibv_pd *pd)
{
	int ret = ibv_cmd_dealloc_pd(pd);

	if (!ret)
		free(pd);
	return ret;
}

static struct ibv_mr *rsiw_reg_mr(struct ibv_pd *pd, void *addr, size_t length, uint64_t hca_va,
				  int access)
{
	struct ib_uverbs_reg_mr_resp resp;
	struct ibv_reg_mr cmd;
	struct verbs_mr *vmr = calloc(1, sizeof(*vmr));

	if (!vmr)
		return NULL;
	if (ibv_cmd_reg_mr(pd, addr, length, hca_va, access, vmr, &cmd, sizeof(cmd), &resp,
			   sizeof(resp))) {
		free(vmr);
		return NULL;
	}
	return &vmr->ibv_mr;
}

static int rsiw_dereg_mr(struct verbs_mr *vmr)
{
	int ret = ibv_cmd_dereg_mr(vmr);

	if (!ret)
		free(vmr);
	return ret;
}

static struct ibv_cq *rsiw_create_cq(struct ibv_context *ctx, int cqe,
				     struct ibv_comp_channel *channel, int comp_vector)
{
	struct ib_uverbs_create_cq_resp resp;
	struct ibv_create_cq cmd;
	struct ibv_cq *cq = calloc(1, sizeof(*cq));

	if (!cq)
		return NULL;
	if (ibv_cmd_create_cq(ctx, cqe, channel, comp_vector, cq, &cmd, sizeof(cmd), &resp,
			      sizeof(resp))) {
		free(cq);
		return NULL;
	}
	return cq;
}

static int rsiw_resize_cq(struct ibv_cq *cq, int cqe)
{
	struct ib_uverbs_resize_cq_resp resp;
	struct ibv_resize_cq cmd;

	return ibv_cmd_resize_cq(cq, cqe, &cmd, sizeof(cmd), &resp, sizeof(resp));
}

static int rsiw_destroy_cq(struct ibv_cq *cq)
{
	int ret = ibv_cmd_destroy_cq(cq);

	if (!ret)
		free(cq);
	return ret;
}

static struct ibv_qp *rsiw_create_qp(struct ibv_pd *pd, struct ibv_qp_init_attr *attr)
{
	struct ib_uverbs_create_qp_resp resp;
	struct ibv_create_qp cmd;
	struct ibv_qp *qp = calloc(1, sizeof(*qp));

	if (!qp)
		return NULL;
	if (ibv_cmd_create_qp(pd, qp, attr, &cmd, sizeof(cmd), &resp, sizeof(resp))) {
		free(qp);
		return NULL;
	}
	return qp;
}

static int rsiw_query_qp(struct ibv_qp *qp, struct ibv_qp_attr *attr, int attr_mask,
			 struct ibv_qp_init_attr *init_attr)
{
	struct ibv_query_qp cmd;

	return ibv_cmd_query_qp(qp, attr, attr_mask, init_attr, &cmd, sizeof(cmd));
}

static int rsiw_modify_qp(struct ibv_qp *qp, struct ibv_qp_attr *attr, int attr_mask)
{
	struct ibv_modify_qp cmd;

	return ibv_cmd_modify_qp(qp, attr, attr_mask, &cmd, sizeof(cmd));
}

static int rsiw_destroy_qp(struct ibv_qp *qp)
{
	int ret = ibv_cmd_destroy_qp(qp);

	if (!ret)
		free(qp);
	return ret;
}

static struct ibv_srq *rsiw_create_srq(struct ibv_pd *pd, struct ibv_srq_init_attr *attr)
{
	struct ib_uverbs_create_srq_resp resp;
	struct ibv_create_srq cmd;
	struct ibv_srq *srq = calloc(1, sizeof(*srq));

	if (!srq)
		return NULL;
	if (ibv_cmd_create_srq(pd, srq, attr, &cmd, sizeof(cmd), &resp, sizeof(resp))) {
		free(srq);
		return NULL;
	}
	return srq;
}

static int rsiw_modify_srq(struct ibv_srq *srq, struct ibv_srq_attr *attr, int attr_mask)
{
	struct ibv_modify_srq cmd;

	return ibv_cmd_modify_srq(srq, attr, attr_mask, &cmd, sizeof(cmd));
}

static int rsiw_query_srq(struct ibv_srq *srq, struct ibv_srq_attr *attr)
{
	struct ibv_query_srq cmd;

	return ibv_cmd_query_srq(srq, attr, &cmd, sizeof(cmd));
}

static int rsiw_destroy_srq(struct ibv_srq *srq)
{
	int ret = ibv_cmd_destroy_srq(srq);

	if (!ret)
		free(srq);
	return ret;
}

static void rsiw_free_context(struct ibv_context *ibctx)
{
	struct rsiw_context *ctx = to_rctx(ibctx);

	verbs_uninit_context(&ctx->vctx);
	free(ctx);
}

static const struct verbs_context_ops rsiw_context_ops = {
	.alloc_pd = rsiw_alloc_pd,
	.create_cq = rsiw_create_cq,
	.create_qp = rsiw_create_qp,
	.create_srq = rsiw_create_srq,
	.dealloc_pd = rsiw_dealloc_pd,
	.dereg_mr = rsiw_dereg_mr,
	.destroy_cq = rsiw_destroy_cq,
	.destroy_qp = rsiw_destroy_qp,
	.destroy_srq = rsiw_destroy_srq,
	.free_context = rsiw_free_context,
	.modify_qp = rsiw_modify_qp,
	.modify_srq = rsiw_modify_srq,
	.poll_cq = ibv_cmd_poll_cq,
	.post_recv = ibv_cmd_post_recv,
	.post_send = ibv_cmd_post_send,
	.post_srq_recv = ibv_cmd_post_srq_recv,
	.query_device_ex = rsiw_query_device_ex,
	.query_port = rsiw_query_port,
	.query_qp = rsiw_query_qp,
	.query_srq = rsiw_query_srq,
	.reg_mr = rsiw_reg_mr,
	.req_notify_cq = ibv_cmd_req_notify_cq,
	.resize_cq = rsiw_resize_cq,
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
