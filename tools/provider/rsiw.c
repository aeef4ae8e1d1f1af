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
 *
 * The extended verbs are built on the same commands: ibv_create_qp_ex
 * with send_ops_flags gives an ibv_qp_ex whose ibv_wr_* calls build a WR
 * list in the provider, posted by one post_send command at
 * ibv_wr_complete; ibv_create_cq_ex gives an ibv_cq_ex whose
 * start/next/end_poll read completions polled in batches by the poll
 * command. What the kernel's uverbs post_send command cannot carry is not
 * announced: Local Invalidate, Flush (RDMA Commit), Atomic Write, masked
 * atomics and memory window binds (EOPNOTSUPP at create), and Send with
 * Immediate, which iWARP has no wire form for (RFC 7306 has Write with
 * Immediate only).
 */
#include <errno.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rdma_core_compat.h"
#include "../../include/uapi/rdma/rsiw-abi.h"

/* ib_uverbs_device_cap_flags (the kernel's IB_DEVICE_FLUSH_*). */
#define RSIW_DEVICE_FLUSH_GLOBAL (1ULL << 38)
#define RSIW_DEVICE_FLUSH_PERSISTENT (1ULL << 39)

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

/* One WR being built between ibv_wr_start and ibv_wr_complete. */
struct rsiw_wr {
	struct ibv_send_wr wr;
	uint32_t sge_off; /* its SGEs: sges[sge_off .. sge_off + wr.num_sge) */
	uint32_t inl_off, inl_len; /* inline data: inl[inl_off .. + inl_len) */
	int inl;
	struct ibv_sge inl_sge;
};

struct rsiw_qp {
	struct verbs_qp vqp;
	uint64_t send_ops; /* the ops ibv_create_qp_ex was asked for */
	uint32_t max_inline;
	pthread_spinlock_t lock; /* held from ibv_wr_start to complete/abort */
	int err; /* the first error of the list being built */
	struct rsiw_wr *wrs;
	uint32_t nwr, wr_cap;
	struct ibv_sge *sges;
	uint32_t nsge, sge_cap;
	uint8_t *inl;
	uint32_t ninl, inl_cap;
};

/* Completions polled in a batch for ibv_start_poll/ibv_next_poll. */
#define RSIW_CQ_BATCH 16

struct rsiw_cq {
	struct verbs_cq vcq;
	int ex; /* created by ibv_create_cq_ex */
	pthread_mutex_t lock; /* ex: held from a successful start_poll to end_poll */
	struct ibv_wc wc[RSIW_CQ_BATCH];
	int n, pos; /* wc[pos] is the current one, wc[pos + 1 .. n) are buffered */
};

static struct rsiw_qp *to_rqp(struct ibv_qp *qp)
{
	return container_of(qp, struct rsiw_qp, vqp.qp);
}

static struct rsiw_qp *qpx_to_rqp(struct ibv_qp_ex *qpx)
{
	return container_of(qpx, struct rsiw_qp, vqp.qp_ex);
}

static struct rsiw_cq *to_rcq(struct ibv_cq *cq)
{
	return container_of(cq, struct rsiw_cq, vcq.cq);
}

static struct rsiw_cq *cqx_to_rcq(struct ibv_cq_ex *cqx)
{
	return container_of(cqx, struct rsiw_cq, vcq.cq_ex);
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
	/*
	 * RDMA Commit (Flush) is the kernel verbs' (IB_WR_FLUSH): the uverbs
	 * post_send command has no Flush, so this provider cannot post one
	 * and does not announce the device's flush capabilities.
	 */
	if (attr_size >= offsetof(struct ibv_device_attr_ex, device_cap_flags_ex) +
				 sizeof(attr->device_cap_flags_ex))
		attr->device_cap_flags_ex &= ~(RSIW_DEVICE_FLUSH_GLOBAL | RSIW_DEVICE_FLUSH_PERSISTENT);
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
	struct rsiw_cq *cq = calloc(1, sizeof(*cq));

	if (!cq)
		return NULL;
	if (ibv_cmd_create_cq(ctx, cqe, channel, comp_vector, &cq->vcq.cq, &cmd, sizeof(cmd),
			      &resp, sizeof(resp))) {
		free(cq);
		return NULL;
	}
	return &cq->vcq.cq;
}

/* ---- the extended CQ: completions read one at a time ---- */

static void rsiw_cqx_load(struct rsiw_cq *cq)
{
	struct ibv_wc *wc = &cq->wc[cq->pos];

	cq->vcq.cq_ex.wr_id = wc->wr_id;
	cq->vcq.cq_ex.status = wc->status;
}

/* The next completion: a buffered one, else a new batch. */
static int rsiw_cqx_advance(struct rsiw_cq *cq)
{
	int n;

	if (++cq->pos < cq->n) {
		rsiw_cqx_load(cq);
		return 0;
	}
	cq->pos = cq->n = 0;
	n = ibv_cmd_poll_cq(&cq->vcq.cq, RSIW_CQ_BATCH, cq->wc);
	if (n < 0)
		return n == -1 ? (errno ? errno : EIO) : -n;
	if (n == 0)
		return ENOENT;
	cq->n = n;
	rsiw_cqx_load(cq);
	return 0;
}

static int rsiw_start_poll(struct ibv_cq_ex *cqx, struct ibv_poll_cq_attr *attr)
{
	struct rsiw_cq *cq = cqx_to_rcq(cqx);
	int ret;

	if (attr->comp_mask)
		return EINVAL;
	pthread_mutex_lock(&cq->lock);
	/* pos is one before the first unread entry (-1 when none read). */
	ret = rsiw_cqx_advance(cq);
	if (ret)
		pthread_mutex_unlock(&cq->lock);
	return ret;
}

static int rsiw_next_poll(struct ibv_cq_ex *cqx)
{
	return rsiw_cqx_advance(cqx_to_rcq(cqx));
}

static void rsiw_end_poll(struct ibv_cq_ex *cqx)
{
	pthread_mutex_unlock(&cqx_to_rcq(cqx)->lock);
}

static struct ibv_wc *rsiw_cqx_cur(struct ibv_cq_ex *cqx)
{
	struct rsiw_cq *cq = cqx_to_rcq(cqx);

	return &cq->wc[cq->pos];
}

static enum ibv_wc_opcode rsiw_read_opcode(struct ibv_cq_ex *cqx)
{
	return rsiw_cqx_cur(cqx)->opcode;
}

static uint32_t rsiw_read_vendor_err(struct ibv_cq_ex *cqx)
{
	return rsiw_cqx_cur(cqx)->vendor_err;
}

static uint32_t rsiw_read_byte_len(struct ibv_cq_ex *cqx)
{
	return rsiw_cqx_cur(cqx)->byte_len;
}

/* The immediate, or for a Send with Invalidate the invalidated key (a union). */
static __be32 rsiw_read_imm_data(struct ibv_cq_ex *cqx)
{
	return rsiw_cqx_cur(cqx)->imm_data;
}

static uint32_t rsiw_read_qp_num(struct ibv_cq_ex *cqx)
{
	return rsiw_cqx_cur(cqx)->qp_num;
}

static uint32_t rsiw_read_src_qp(struct ibv_cq_ex *cqx)
{
	return rsiw_cqx_cur(cqx)->src_qp;
}

static unsigned int rsiw_read_wc_flags(struct ibv_cq_ex *cqx)
{
	return rsiw_cqx_cur(cqx)->wc_flags;
}

static uint32_t rsiw_read_slid(struct ibv_cq_ex *cqx)
{
	return rsiw_cqx_cur(cqx)->slid;
}

static uint8_t rsiw_read_sl(struct ibv_cq_ex *cqx)
{
	return rsiw_cqx_cur(cqx)->sl;
}

static uint8_t rsiw_read_dlid_path_bits(struct ibv_cq_ex *cqx)
{
	return rsiw_cqx_cur(cqx)->dlid_path_bits;
}

/*
 * ibv_create_cq_ex: the fields of struct ibv_wc (IBV_WC_STANDARD_FLAGS);
 * no timestamps, VLAN, flow tag or tag matching (EOPNOTSUPP).
 */
static struct ibv_cq_ex *rsiw_create_cq_ex(struct ibv_context *ctx,
					   struct ibv_cq_init_attr_ex *attr)
{
	struct ib_uverbs_create_cq_resp resp;
	struct ibv_create_cq cmd;
	struct rsiw_cq *cq;
	struct ibv_cq_ex *cqx;

	if ((attr->wc_flags & ~(uint64_t)IBV_WC_STANDARD_FLAGS) ||
	    (attr->comp_mask & ~(uint32_t)IBV_CQ_INIT_ATTR_MASK_FLAGS) ||
	    ((attr->comp_mask & IBV_CQ_INIT_ATTR_MASK_FLAGS) &&
	     (attr->flags & ~(uint32_t)IBV_CREATE_CQ_ATTR_SINGLE_THREADED))) {
		errno = EOPNOTSUPP;
		return NULL;
	}
	cq = calloc(1, sizeof(*cq));
	if (!cq) {
		errno = ENOMEM;
		return NULL;
	}
	if (ibv_cmd_create_cq(ctx, attr->cqe, attr->channel, attr->comp_vector, &cq->vcq.cq,
			      &cmd, sizeof(cmd), &resp, sizeof(resp))) {
		free(cq);
		return NULL;
	}
	verbs_init_cq(&cq->vcq.cq, ctx, attr->channel, attr->cq_context);
	pthread_mutex_init(&cq->lock, NULL);
	cq->ex = 1;
	cq->pos = -1;
	cqx = &cq->vcq.cq_ex;
	cqx->start_poll = rsiw_start_poll;
	cqx->next_poll = rsiw_next_poll;
	cqx->end_poll = rsiw_end_poll;
	cqx->read_opcode = rsiw_read_opcode;
	cqx->read_vendor_err = rsiw_read_vendor_err;
	cqx->read_wc_flags = rsiw_read_wc_flags;
	if (attr->wc_flags & IBV_WC_EX_WITH_BYTE_LEN)
		cqx->read_byte_len = rsiw_read_byte_len;
	if (attr->wc_flags & IBV_WC_EX_WITH_IMM)
		cqx->read_imm_data = rsiw_read_imm_data;
	if (attr->wc_flags & IBV_WC_EX_WITH_QP_NUM)
		cqx->read_qp_num = rsiw_read_qp_num;
	if (attr->wc_flags & IBV_WC_EX_WITH_SRC_QP)
		cqx->read_src_qp = rsiw_read_src_qp;
	if (attr->wc_flags & IBV_WC_EX_WITH_SLID)
		cqx->read_slid = rsiw_read_slid;
	if (attr->wc_flags & IBV_WC_EX_WITH_SL)
		cqx->read_sl = rsiw_read_sl;
	if (attr->wc_flags & IBV_WC_EX_WITH_DLID_PATH_BITS)
		cqx->read_dlid_path_bits = rsiw_read_dlid_path_bits;
	return cqx;
}

/* ibv_poll_cq: on an extended CQ, what start_poll buffered comes first. */
static int rsiw_poll_cq(struct ibv_cq *ibcq, int ne, struct ibv_wc *wc)
{
	struct rsiw_cq *cq = to_rcq(ibcq);
	int got = 0, n;

	if (!cq->ex)
		return ibv_cmd_poll_cq(ibcq, ne, wc);
	pthread_mutex_lock(&cq->lock);
	while (got < ne && cq->pos + 1 < cq->n)
		wc[got++] = cq->wc[++cq->pos];
	if (got < ne) {
		n = ibv_cmd_poll_cq(ibcq, ne - got, wc + got);
		if (n < 0 && !got)
			got = n;
		else if (n > 0)
			got += n;
	}
	pthread_mutex_unlock(&cq->lock);
	return got;
}

static int rsiw_resize_cq(struct ibv_cq *cq, int cqe)
{
	struct ib_uverbs_resize_cq_resp resp;
	struct ibv_resize_cq cmd;

	return ibv_cmd_resize_cq(cq, cqe, &cmd, sizeof(cmd), &resp, sizeof(resp));
}

static int rsiw_destroy_cq(struct ibv_cq *ibcq)
{
	struct rsiw_cq *cq = to_rcq(ibcq);
	int ret = ibv_cmd_destroy_cq(ibcq);

	if (ret)
		return ret;
	if (cq->ex)
		pthread_mutex_destroy(&cq->lock);
	free(cq);
	return 0;
}

static struct ibv_qp *rsiw_create_qp(struct ibv_pd *pd, struct ibv_qp_init_attr *attr)
{
	struct ib_uverbs_create_qp_resp resp;
	struct ibv_create_qp cmd;
	/* A verbs_qp with comp_mask 0: ibv_qp_to_qp_ex reads it (NULL). */
	struct rsiw_qp *qp = calloc(1, sizeof(*qp));

	if (!qp)
		return NULL;
	if (ibv_cmd_create_qp(pd, &qp->vqp.qp, attr, &cmd, sizeof(cmd), &resp, sizeof(resp))) {
		free(qp);
		return NULL;
	}
	return &qp->vqp.qp;
}

/* ---- the extended QP: ibv_wr_* build a WR list, one post at complete ---- */

/* The RC operations the uverbs post_send command carries to rsiw. */
#define RSIW_SEND_OPS                                                                  \
	(IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_INV | IBV_QP_EX_WITH_RDMA_WRITE | \
	 IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM | IBV_QP_EX_WITH_RDMA_READ |                \
	 IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP | IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD)

static void rsiw_wr_fail(struct rsiw_qp *qp, int err)
{
	if (!qp->err)
		qp->err = err;
}

static int rsiw_grow(void **buf, uint32_t *cap, uint32_t need, size_t elem)
{
	uint32_t ncap = *cap ? *cap : 16;
	void *n;

	if (need <= *cap)
		return 0;
	while (ncap < need)
		ncap *= 2;
	n = realloc(*buf, (size_t)ncap * elem);
	if (!n)
		return ENOMEM;
	*buf = n;
	*cap = ncap;
	return 0;
}

/* A new WR of this opcode, with the qp_ex's wr_id and wr_flags. */
static struct ibv_send_wr *rsiw_wr_new(struct ibv_qp_ex *qpx, uint64_t op_flag,
				       enum ibv_wr_opcode opcode)
{
	struct rsiw_qp *qp = qpx_to_rqp(qpx);
	struct rsiw_wr *w;

	if (!(qp->send_ops & op_flag)) {
		rsiw_wr_fail(qp, EOPNOTSUPP);
		return NULL;
	}
	if (rsiw_grow((void **)&qp->wrs, &qp->wr_cap, qp->nwr + 1, sizeof(*qp->wrs))) {
		rsiw_wr_fail(qp, ENOMEM);
		return NULL;
	}
	w = &qp->wrs[qp->nwr++];
	memset(w, 0, sizeof(*w));
	w->wr.wr_id = qpx->wr_id;
	w->wr.send_flags = qpx->wr_flags;
	w->wr.opcode = opcode;
	w->sge_off = qp->nsge;
	return &w->wr;
}

/* The WR the wr_set_* calls apply to: the last one. */
static struct rsiw_wr *rsiw_wr_cur(struct rsiw_qp *qp)
{
	if (!qp->nwr) {
		rsiw_wr_fail(qp, EINVAL);
		return NULL;
	}
	return &qp->wrs[qp->nwr - 1];
}

static void rsiw_wr_send(struct ibv_qp_ex *qpx)
{
	rsiw_wr_new(qpx, IBV_QP_EX_WITH_SEND, IBV_WR_SEND);
}

static void rsiw_wr_send_inv(struct ibv_qp_ex *qpx, uint32_t invalidate_rkey)
{
	struct ibv_send_wr *wr = rsiw_wr_new(qpx, IBV_QP_EX_WITH_SEND_WITH_INV,
					     IBV_WR_SEND_WITH_INV);

	if (wr)
		wr->invalidate_rkey = invalidate_rkey;
}

static void rsiw_wr_rdma_write(struct ibv_qp_ex *qpx, uint32_t rkey, uint64_t remote_addr)
{
	struct ibv_send_wr *wr = rsiw_wr_new(qpx, IBV_QP_EX_WITH_RDMA_WRITE, IBV_WR_RDMA_WRITE);

	if (wr) {
		wr->wr.rdma.rkey = rkey;
		wr->wr.rdma.remote_addr = remote_addr;
	}
}

static void rsiw_wr_rdma_write_imm(struct ibv_qp_ex *qpx, uint32_t rkey, uint64_t remote_addr,
				   __be32 imm_data)
{
	struct ibv_send_wr *wr = rsiw_wr_new(qpx, IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM,
					     IBV_WR_RDMA_WRITE_WITH_IMM);

	if (wr) {
		wr->wr.rdma.rkey = rkey;
		wr->wr.rdma.remote_addr = remote_addr;
		wr->imm_data = imm_data;
	}
}

static void rsiw_wr_rdma_read(struct ibv_qp_ex *qpx, uint32_t rkey, uint64_t remote_addr)
{
	struct ibv_send_wr *wr = rsiw_wr_new(qpx, IBV_QP_EX_WITH_RDMA_READ, IBV_WR_RDMA_READ);

	if (wr) {
		wr->wr.rdma.rkey = rkey;
		wr->wr.rdma.remote_addr = remote_addr;
	}
}

static void rsiw_wr_atomic_cmp_swp(struct ibv_qp_ex *qpx, uint32_t rkey, uint64_t remote_addr,
				   uint64_t compare, uint64_t swap)
{
	struct ibv_send_wr *wr = rsiw_wr_new(qpx, IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP,
					     IBV_WR_ATOMIC_CMP_AND_SWP);

	if (wr) {
		wr->wr.atomic.rkey = rkey;
		wr->wr.atomic.remote_addr = remote_addr;
		wr->wr.atomic.compare_add = compare;
		wr->wr.atomic.swap = swap;
	}
}

static void rsiw_wr_atomic_fetch_add(struct ibv_qp_ex *qpx, uint32_t rkey, uint64_t remote_addr,
				     uint64_t add)
{
	struct ibv_send_wr *wr = rsiw_wr_new(qpx, IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD,
					     IBV_WR_ATOMIC_FETCH_AND_ADD);

	if (wr) {
		wr->wr.atomic.rkey = rkey;
		wr->wr.atomic.remote_addr = remote_addr;
		wr->wr.atomic.compare_add = add;
	}
}

/* Ops rsiw does not announce: the list fails at ibv_wr_complete. */
static void rsiw_wr_send_imm(struct ibv_qp_ex *qpx, __be32 imm_data)
{
	(void)imm_data;
	rsiw_wr_fail(qpx_to_rqp(qpx), EOPNOTSUPP);
}

static void rsiw_wr_local_inv(struct ibv_qp_ex *qpx, uint32_t invalidate_rkey)
{
	(void)invalidate_rkey;
	rsiw_wr_fail(qpx_to_rqp(qpx), EOPNOTSUPP);
}

static void rsiw_wr_bind_mw(struct ibv_qp_ex *qpx, struct ibv_mw *mw, uint32_t rkey,
			    const struct ibv_mw_bind_info *info)
{
	(void)mw;
	(void)rkey;
	(void)info;
	rsiw_wr_fail(qpx_to_rqp(qpx), EOPNOTSUPP);
}

static void rsiw_wr_send_tso(struct ibv_qp_ex *qpx, void *hdr, uint16_t hdr_sz, uint16_t mss)
{
	(void)hdr;
	(void)hdr_sz;
	(void)mss;
	rsiw_wr_fail(qpx_to_rqp(qpx), EOPNOTSUPP);
}

static void rsiw_wr_atomic_write(struct ibv_qp_ex *qpx, uint32_t rkey, uint64_t remote_addr,
				 const void *atomic_wr)
{
	(void)rkey;
	(void)remote_addr;
	(void)atomic_wr;
	rsiw_wr_fail(qpx_to_rqp(qpx), EOPNOTSUPP);
}

#if RSIW_HAVE_WR_FLUSH
/* Not announced (IBV_QP_EX_WITH_FLUSH) yet: the list fails at ibv_wr_complete. */
static void rsiw_wr_flush(struct ibv_qp_ex *qpx, uint32_t rkey, uint64_t remote_addr, size_t len,
			  uint8_t type, uint8_t level)
{
	(void)rkey;
	(void)remote_addr;
	(void)len;
	(void)type;
	(void)level;
	rsiw_wr_fail(qpx_to_rqp(qpx), EOPNOTSUPP);
}
#endif

static void rsiw_wr_set_ud_addr(struct ibv_qp_ex *qpx, struct ibv_ah *ah, uint32_t remote_qpn,
				uint32_t remote_qkey)
{
	(void)ah;
	(void)remote_qpn;
	(void)remote_qkey;
	rsiw_wr_fail(qpx_to_rqp(qpx), EOPNOTSUPP);
}

static void rsiw_wr_set_xrc_srqn(struct ibv_qp_ex *qpx, uint32_t remote_srqn)
{
	(void)remote_srqn;
	rsiw_wr_fail(qpx_to_rqp(qpx), EOPNOTSUPP);
}

static void rsiw_wr_set_sge_list(struct ibv_qp_ex *qpx, size_t num_sge,
				 const struct ibv_sge *sg_list)
{
	struct rsiw_qp *qp = qpx_to_rqp(qpx);
	struct rsiw_wr *w = rsiw_wr_cur(qp);

	if (!w)
		return;
	if (w->wr.num_sge || w->inl || num_sge > INT32_MAX) {
		rsiw_wr_fail(qp, EINVAL); /* one data setter per WR */
		return;
	}
	if (rsiw_grow((void **)&qp->sges, &qp->sge_cap, qp->nsge + num_sge, sizeof(*qp->sges))) {
		rsiw_wr_fail(qp, ENOMEM);
		return;
	}
	memcpy(&qp->sges[qp->nsge], sg_list, num_sge * sizeof(*sg_list));
	w->sge_off = qp->nsge;
	w->wr.num_sge = (int)num_sge;
	qp->nsge += num_sge;
}

static void rsiw_wr_set_sge(struct ibv_qp_ex *qpx, uint32_t lkey, uint64_t addr, uint32_t length)
{
	struct ibv_sge sge = { .addr = addr, .length = length, .lkey = lkey };

	rsiw_wr_set_sge_list(qpx, 1, &sge);
}

/*
 * Inline data is copied now (the caller may reuse its buffers as soon as
 * the call returns) and posted as one inline SGE: the kernel copies it at
 * post time, as for ibv_post_send with IBV_SEND_INLINE.
 */
static void rsiw_wr_set_inline_data_list(struct ibv_qp_ex *qpx, size_t num_buf,
					 const struct ibv_data_buf *buf_list)
{
	struct rsiw_qp *qp = qpx_to_rqp(qpx);
	struct rsiw_wr *w = rsiw_wr_cur(qp);
	size_t len = 0, i;

	if (!w)
		return;
	if (w->wr.num_sge || w->inl) {
		rsiw_wr_fail(qp, EINVAL);
		return;
	}
	for (i = 0; i < num_buf; i++)
		len += buf_list[i].length;
	if (len > qp->max_inline) {
		rsiw_wr_fail(qp, ENOMEM); /* as other providers: more than max_inline_data */
		return;
	}
	if (rsiw_grow((void **)&qp->inl, &qp->inl_cap, qp->ninl + (uint32_t)len + 1, 1)) {
		rsiw_wr_fail(qp, ENOMEM);
		return;
	}
	w->inl = 1;
	w->inl_off = qp->ninl;
	w->inl_len = (uint32_t)len;
	for (i = 0; i < num_buf; i++) {
		memcpy(qp->inl + qp->ninl, buf_list[i].addr, buf_list[i].length);
		qp->ninl += buf_list[i].length;
	}
	w->wr.send_flags |= IBV_SEND_INLINE;
	w->wr.num_sge = len ? 1 : 0;
}

static void rsiw_wr_set_inline_data(struct ibv_qp_ex *qpx, void *addr, size_t length)
{
	struct ibv_data_buf buf = { .addr = addr, .length = length };

	rsiw_wr_set_inline_data_list(qpx, 1, &buf);
}

static void rsiw_wr_reset(struct rsiw_qp *qp)
{
	qp->nwr = qp->nsge = qp->ninl = 0;
	qp->err = 0;
}

static void rsiw_wr_start(struct ibv_qp_ex *qpx)
{
	struct rsiw_qp *qp = qpx_to_rqp(qpx);

	pthread_spin_lock(&qp->lock);
	rsiw_wr_reset(qp);
}

/* Posts the list with one post_send command. */
static int rsiw_wr_complete(struct ibv_qp_ex *qpx)
{
	struct rsiw_qp *qp = qpx_to_rqp(qpx);
	struct ibv_send_wr *bad;
	uint32_t i;
	int ret = qp->err;

	if (!ret && qp->nwr) {
		for (i = 0; i < qp->nwr; i++) {
			struct rsiw_wr *w = &qp->wrs[i];

			if (w->inl) {
				w->inl_sge.addr = (uintptr_t)(qp->inl + w->inl_off);
				w->inl_sge.length = w->inl_len;
				w->inl_sge.lkey = 0;
				w->wr.sg_list = &w->inl_sge;
			} else {
				w->wr.sg_list = w->wr.num_sge ? &qp->sges[w->sge_off] : NULL;
			}
			w->wr.next = i + 1 < qp->nwr ? &qp->wrs[i + 1].wr : NULL;
		}
		ret = ibv_cmd_post_send(&qp->vqp.qp, &qp->wrs[0].wr, &bad);
	}
	rsiw_wr_reset(qp);
	pthread_spin_unlock(&qp->lock);
	return ret;
}

static void rsiw_wr_abort(struct ibv_qp_ex *qpx)
{
	struct rsiw_qp *qp = qpx_to_rqp(qpx);

	rsiw_wr_reset(qp);
	pthread_spin_unlock(&qp->lock);
}

/*
 * ibv_create_qp_ex: RC, with the send_ops_flags of RSIW_SEND_OPS;
 * anything else (other ops, create flags other than none, XRC, RSS, TSO)
 * is EOPNOTSUPP.
 */
static struct ibv_qp *rsiw_create_qp_ex(struct ibv_context *ctx, struct ibv_qp_init_attr_ex *attr)
{
	struct ib_uverbs_create_qp_resp resp;
	struct ibv_create_qp cmd;
	struct ibv_qp_ex *qpx;
	struct rsiw_qp *qp;
	struct ibv_qp_init_attr_ex a = *attr;
	uint64_t ops = 0;

	/* Create flags: none supported, so only "none" (rdma-core's tests ask so). */
	if ((attr->comp_mask & ~(uint32_t)(IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS |
					   IBV_QP_INIT_ATTR_CREATE_FLAGS)) ||
	    ((attr->comp_mask & IBV_QP_INIT_ATTR_CREATE_FLAGS) && attr->create_flags)) {
		errno = EOPNOTSUPP;
		return NULL;
	}
	a.comp_mask &= ~(uint32_t)IBV_QP_INIT_ATTR_CREATE_FLAGS;
	if (attr->comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS) {
		ops = attr->send_ops_flags;
		if (ops & ~(uint64_t)RSIW_SEND_OPS) {
			errno = EOPNOTSUPP;
			return NULL;
		}
	}
	qp = calloc(1, sizeof(*qp));
	if (!qp) {
		errno = ENOMEM;
		return NULL;
	}
	if (ibv_cmd_create_qp_ex(ctx, &qp->vqp, &a, &cmd, sizeof(cmd), &resp, sizeof(resp))) {
		free(qp);
		return NULL;
	}
	attr->cap = a.cap;
	if (!(attr->comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS))
		return &qp->vqp.qp;

	pthread_spin_init(&qp->lock, PTHREAD_PROCESS_PRIVATE);
	qp->send_ops = ops;
	qp->max_inline = attr->cap.max_inline_data;
	qp->vqp.comp_mask |= VERBS_QP_EX;
	qpx = &qp->vqp.qp_ex;
	qpx->wr_send = rsiw_wr_send;
	qpx->wr_send_inv = rsiw_wr_send_inv;
	qpx->wr_rdma_write = rsiw_wr_rdma_write;
	qpx->wr_rdma_write_imm = rsiw_wr_rdma_write_imm;
	qpx->wr_rdma_read = rsiw_wr_rdma_read;
	qpx->wr_atomic_cmp_swp = rsiw_wr_atomic_cmp_swp;
	qpx->wr_atomic_fetch_add = rsiw_wr_atomic_fetch_add;
	qpx->wr_send_imm = rsiw_wr_send_imm;
	qpx->wr_local_inv = rsiw_wr_local_inv;
	qpx->wr_bind_mw = rsiw_wr_bind_mw;
	qpx->wr_send_tso = rsiw_wr_send_tso;
	qpx->wr_atomic_write = rsiw_wr_atomic_write;
#if RSIW_HAVE_WR_FLUSH
	qpx->wr_flush = rsiw_wr_flush;
#endif
	qpx->wr_set_ud_addr = rsiw_wr_set_ud_addr;
	qpx->wr_set_xrc_srqn = rsiw_wr_set_xrc_srqn;
	qpx->wr_set_sge = rsiw_wr_set_sge;
	qpx->wr_set_sge_list = rsiw_wr_set_sge_list;
	qpx->wr_set_inline_data = rsiw_wr_set_inline_data;
	qpx->wr_set_inline_data_list = rsiw_wr_set_inline_data_list;
	qpx->wr_start = rsiw_wr_start;
	qpx->wr_complete = rsiw_wr_complete;
	qpx->wr_abort = rsiw_wr_abort;
	return &qp->vqp.qp;
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

static int rsiw_destroy_qp(struct ibv_qp *ibqp)
{
	struct rsiw_qp *qp = to_rqp(ibqp);
	int ret = ibv_cmd_destroy_qp(ibqp);

	if (ret)
		return ret;
	if (qp->vqp.comp_mask & VERBS_QP_EX)
		pthread_spin_destroy(&qp->lock);
	free(qp->wrs);
	free(qp->sges);
	free(qp->inl);
	free(qp);
	return 0;
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
	.create_cq_ex = rsiw_create_cq_ex,
	.create_qp = rsiw_create_qp,
	.create_qp_ex = rsiw_create_qp_ex,
	.create_srq = rsiw_create_srq,
	.dealloc_pd = rsiw_dealloc_pd,
	.dereg_mr = rsiw_dereg_mr,
	.destroy_cq = rsiw_destroy_cq,
	.destroy_qp = rsiw_destroy_qp,
	.destroy_srq = rsiw_destroy_srq,
	.free_context = rsiw_free_context,
	.modify_qp = rsiw_modify_qp,
	.modify_srq = rsiw_modify_srq,
	.poll_cq = rsiw_poll_cq,
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
