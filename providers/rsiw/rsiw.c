// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * librsiw: the rdma-core provider of rsiw devices. libibverbs loads it
 * (/etc/libibverbs.d/rsiw.driver, or RDMAV_DRIVERS) and binds it to every
 * device whose uverbs driver id is RSIW_DRIVER_ID.
 *
 * Objects are made with uverbs commands. The data path of an ABI 2
 * context (include/uapi/rdma/rsiw-abi.h) is shared rings: the send,
 * receive and SRQ rings are written here and read by the kernel, the CQ
 * ring the other way round. Posting a receive, polling and arming a CQ
 * take no system call; posting sends takes one doorbell (the post_send
 * command with no WR) per list, none while the kernel's TX work runs.
 * The kernel checks every entry it reads as it checks a kernel WR.
 * With an ABI 1 kernel (or RSIW_NO_RINGS set) every verb is a command.
 * Messages go through libibverbs' log (VERBS_LOG_LEVEL, VERBS_LOG_FILE).
 *
 * The extended verbs: ibv_create_qp_ex with send_ops_flags gives an
 * ibv_qp_ex whose ibv_wr_* calls build a WR list, posted at
 * ibv_wr_complete (on the ring, all or nothing); ibv_create_cq_ex gives
 * an ibv_cq_ex whose start/next/end_poll read completions in batches.
 * Not announced: Atomic Write (no iWARP wire form), memory window binds,
 * Send with Immediate (RFC 7306 has Write with Immediate only), and
 * without rings Local Invalidate and Flush. Flush (ibv_wr_flush) needs
 * rdma-core 45+ (RSIW_HAVE_WR_FLUSH). Masked atomics: rsiwdv.h.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <rdma/ib_user_verbs.h>

#include "rdma_core_compat.h"
#include <rdma/rsiw-abi.h>
#include "rsiwdv.h"

/* ib_uverbs_device_cap_flags (the kernel's IB_DEVICE_FLUSH_*). */
#define RSIW_DEVICE_FLUSH_GLOBAL (1ULL << 38)
#define RSIW_DEVICE_FLUSH_PERSISTENT (1ULL << 39)

#define container_of(ptr, type, member)                                        \
	((type *)((char *)(ptr) - offsetof(type, member)))

struct rsiw_device {
	struct verbs_device vdev;
};

struct rsiw_context {
	struct verbs_context vctx;
	int rings; /* an ABI 2 context: queues in shared rings */
};

/* A ring mapped from the kernel (include/uapi/rdma/rsiw-abi.h). */
struct rsiw_ring {
	void *map;
	size_t map_len;
	struct rsiw_ring_ctl *ctl;
	uint8_t *ent;
	uint32_t entries, stride;
	/* Ours: the producer index of a WQ ring, the consumer of a CQ ring. */
	uint32_t idx;
};

struct rsiw_srq {
	struct ibv_srq srq;
	struct rsiw_ring rq;
	pthread_spinlock_t lock;
	uint32_t max_sge;
};

static struct rsiw_context *to_rctx(struct ibv_context *ctx)
{
	return container_of(ctx, struct rsiw_context, vctx.context);
}

/*
 * RDMA Commit from userspace needs ibv_wr_flush (rdma-core 45+): built
 * against such a libibverbs (RSIW_HAVE_WR_FLUSH), the provider announces
 * IBV_QP_EX_WITH_FLUSH on ring QPs.
 */
#if RSIW_HAVE_WR_FLUSH
#define RSIW_QP_EX_WITH_FLUSH ((uint64_t)IBV_QP_EX_WITH_FLUSH)
#else
#define RSIW_QP_EX_WITH_FLUSH 0
#endif
/* A WR the ibv_wr_* calls build that struct ibv_send_wr has no opcode for. */
#define RSIW_WR_IS_FLUSH ((enum ibv_wr_opcode)RSIW_WR_FLUSH)

/* One WR being built between ibv_wr_start and ibv_wr_complete. */
struct rsiw_wr {
	struct ibv_send_wr wr;
	/* Flush: the range, its placement type and selectivity level. */
	uint32_t flush_len;
	uint8_t flush_type, flush_level;
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
	/* ABI 2: the rings (map NULL: posted through commands). */
	struct rsiw_ring sq, rq;
	pthread_spinlock_t sq_lock, rq_lock;
	uint32_t max_send_sge, max_recv_sge;
};

/* Completions polled in a batch for ibv_start_poll/ibv_next_poll. */
#define RSIW_CQ_BATCH 16

struct rsiw_cq {
	struct verbs_cq vcq;
	int ex; /* created by ibv_create_cq_ex */
	/* ex: held from a successful start_poll to end_poll. */
	pthread_mutex_t lock;
	struct ibv_wc wc[RSIW_CQ_BATCH];
	/* wc[pos] is the current one, wc[pos + 1 .. n) are buffered. */
	int n, pos;
	struct rsiw_ring ring; /* ABI 2 (map NULL: polled through commands) */
	pthread_spinlock_t ring_lock;
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

/* ---- shared rings (ABI 2) ---- */

static int rsiw_ring_map(struct ibv_context *ctx, struct rsiw_ring *r,
			 const struct rsiw_ring_info *info, uint32_t stride)
{
	struct verbs_context *vctx = &to_rctx(ctx)->vctx;
	void *m;

	if (!info->entries || (info->entries & (info->entries - 1)) ||
	    info->size < RSIW_RING_HDR + (size_t)info->entries * stride) {
		verbs_err(vctx, "ring of %u entries in %u bytes, %u each\n",
			  info->entries, info->size, stride);
		return EINVAL;
	}
	m = mmap(NULL, info->size, PROT_READ | PROT_WRITE, MAP_SHARED,
		 ctx->cmd_fd, (off_t)info->offset);
	if (m == MAP_FAILED) {
		int err = errno;

		verbs_err(vctx, "mmap of the ring at offset %#llx: %s\n",
			  (unsigned long long)info->offset, strerror(err));
		return err;
	}
	verbs_debug(vctx, "ring fd %d offset %#llx size %u entries %u at %p\n",
		    ctx->cmd_fd, (unsigned long long)info->offset, info->size,
		    info->entries, m);
	r->map = m;
	r->map_len = info->size;
	r->ctl = m;
	r->ent = (uint8_t *)m + RSIW_RING_HDR;
	r->entries = info->entries;
	r->stride = stride;
	r->idx = 0;
	return 0;
}

static void rsiw_ring_unmap(struct rsiw_ring *r)
{
	if (r->map)
		munmap(r->map, r->map_len);
	r->map = NULL;
}

static void *rsiw_ring_slot(struct rsiw_ring *r, uint32_t idx)
{
	return r->ent + (size_t)(idx & (r->entries - 1)) * r->stride;
}

/*
 * The control words of a ring (struct rsiw_ring_ctl) are shared with the
 * kernel, which reads and writes them with its own atomics.
 */
static _Atomic(uint32_t) *rsiw_ctl(uint32_t *p)
{
	return (_Atomic(uint32_t) *)p;
}

static uint32_t rsiw_load(uint32_t *p)
{
	return atomic_load_explicit(rsiw_ctl(p), memory_order_acquire);
}

/*
 * The producer index, as the ring has it: this process is its only writer,
 * and reading it back keeps entries written through rsiwdv_query_qp's
 * pointers in order with ours. Under the ring's lock.
 */
static void rsiw_ring_sync(struct rsiw_ring *r)
{
	r->idx = atomic_load_explicit(rsiw_ctl(&r->ctl->producer),
				      memory_order_relaxed);
}

/* Room for one more entry on a ring we produce. */
static int rsiw_ring_full(struct rsiw_ring *r)
{
	return r->idx - rsiw_load(&r->ctl->consumer) >= r->entries;
}

/*
 * Publishes what was written (release), then, after a full barrier, reads
 * the kernel's flags: the caller rings the doorbell if they ask for it.
 */
static uint32_t rsiw_ring_publish(struct rsiw_ring *r)
{
	atomic_store_explicit(rsiw_ctl(&r->ctl->producer), r->idx,
			      memory_order_release);
	atomic_thread_fence(memory_order_seq_cst);
	return rsiw_load(&r->ctl->flags);
}

/* Completions from a CQ ring into wc[0 .. ne). */
static int rsiw_cq_ring_poll(struct rsiw_cq *cq, int ne, struct ibv_wc *wc)
{
	struct rsiw_ring *r = &cq->ring;
	uint32_t prod = rsiw_load(&r->ctl->producer);
	int n = 0;

	while (n < ne && r->idx != prod) {
		const struct rsiw_cqe *e = rsiw_ring_slot(r, r->idx);
		struct ibv_wc *w = &wc[n++];

		memset(w, 0, sizeof(*w));
		w->wr_id = e->wr_id;
		w->status = e->status;
		w->opcode = e->opcode;
		w->vendor_err = e->vendor_err;
		w->byte_len = e->byte_len;
		w->qp_num = e->qp_num;
		w->src_qp = e->qp_num;
		if (e->flags & RSIW_CQE_WITH_IMM) {
			w->wc_flags |= IBV_WC_WITH_IMM;
			w->imm_data = e->imm_inv;
		} else if (e->flags & RSIW_CQE_WITH_INV) {
			w->wc_flags |= IBV_WC_WITH_INV;
			w->invalidated_rkey = e->imm_inv;
		}
		r->idx++;
	}
	if (n)
		atomic_store_explicit(rsiw_ctl(&r->ctl->consumer), r->idx,
				      memory_order_release);
	return n;
}

/* Poll: the ring (ABI 2) or the poll command. */
static int rsiw_cq_fetch(struct rsiw_cq *cq, int ne, struct ibv_wc *wc)
{
	int n;

	if (!cq->ring.map)
		return ibv_cmd_poll_cq(&cq->vcq.cq, ne, wc);
	pthread_spin_lock(&cq->ring_lock);
	n = rsiw_cq_ring_poll(cq, ne, wc);
	pthread_spin_unlock(&cq->ring_lock);
	return n;
}

/* Arming: the ring's armed word (no system call), or the command. */
static int rsiw_req_notify_cq(struct ibv_cq *ibcq, int solicited_only)
{
	struct rsiw_cq *cq = to_rcq(ibcq);

	if (!cq->ring.map)
		return ibv_cmd_req_notify_cq(ibcq, solicited_only);
	atomic_store_explicit(rsiw_ctl(&cq->ring.ctl->armed),
			      solicited_only ? RSIW_CQ_ARM_SOLICITED :
					       RSIW_CQ_ARM_NEXT,
			      memory_order_release);
	return 0;
}

/* A send WR as a ring entry, checked as the kernel checks it. */
static int rsiw_fill_sqe(struct rsiw_qp *qp, struct rsiw_sqe *e,
			 const struct ibv_send_wr *wr)
{
	uint32_t len = 0;
	int i;

	memset(e, 0, offsetof(struct rsiw_sqe, sge));
	e->wr_id = wr->wr_id;
	if (wr->send_flags & IBV_SEND_SIGNALED)
		e->flags |= RSIW_SQE_SIGNALED;
	if (wr->send_flags & IBV_SEND_SOLICITED)
		e->flags |= RSIW_SQE_SOLICITED;
	if (wr->send_flags & IBV_SEND_FENCE)
		e->flags |= RSIW_SQE_FENCE;
	if (wr->num_sge < 0)
		return EINVAL;
	switch (wr->opcode) {
	case IBV_WR_SEND:
	case IBV_WR_RDMA_WRITE:
	case IBV_WR_RDMA_READ:
		break;
	case IBV_WR_SEND_WITH_INV:
		e->imm_inv = wr->invalidate_rkey;
		break;
	case IBV_WR_RDMA_WRITE_WITH_IMM:
		e->imm_inv = wr->imm_data;
		break;
	case IBV_WR_LOCAL_INV:
		e->imm_inv = wr->invalidate_rkey;
		e->opcode = RSIW_WR_LOCAL_INV;
		return 0;
	case IBV_WR_ATOMIC_CMP_AND_SWP:
	case IBV_WR_ATOMIC_FETCH_AND_ADD:
		e->rkey = wr->wr.atomic.rkey;
		e->remote_addr = wr->wr.atomic.remote_addr;
		e->compare_add = wr->wr.atomic.compare_add;
		e->swap = wr->wr.atomic.swap;
		if (wr->num_sge != 1 || wr->sg_list[0].length < 8 ||
		    (e->remote_addr & 7))
			return EINVAL;
		break;
	default:
		/* Send with Immediate (no iWARP wire form), MW binds, TSO. */
		return EOPNOTSUPP;
	}
	e->opcode = wr->opcode;
	if (wr->opcode == IBV_WR_RDMA_WRITE ||
	    wr->opcode == IBV_WR_RDMA_WRITE_WITH_IMM ||
	    wr->opcode == IBV_WR_RDMA_READ) {
		e->rkey = wr->wr.rdma.rkey;
		e->remote_addr = wr->wr.rdma.remote_addr;
		if (wr->opcode == IBV_WR_RDMA_READ && wr->num_sge != 1)
			return EINVAL;
	}
	if ((uint32_t)wr->num_sge > qp->max_send_sge)
		return EINVAL;
	if ((wr->send_flags & IBV_SEND_INLINE) &&
	    wr->opcode != IBV_WR_RDMA_READ &&
	    wr->opcode != IBV_WR_ATOMIC_CMP_AND_SWP &&
	    wr->opcode != IBV_WR_ATOMIC_FETCH_AND_ADD) {
		for (i = 0; i < wr->num_sge; i++) {
			uint32_t n = wr->sg_list[i].length;

			if (n > qp->max_inline || len + n > qp->max_inline)
				return EINVAL;
			memcpy(e->inline_data + len,
			       (void *)(uintptr_t)wr->sg_list[i].addr, n);
			len += n;
		}
		e->flags |= RSIW_SQE_INLINE;
		e->length = len;
		return 0;
	}
	e->num_sge = (uint8_t)wr->num_sge;
	for (i = 0; i < wr->num_sge; i++) {
		e->sge[i].addr = wr->sg_list[i].addr;
		e->sge[i].length = wr->sg_list[i].length;
		e->sge[i].lkey = wr->sg_list[i].lkey;
	}
	return 0;
}

/*
 * After publishing, from the flags read back: whether the kernel needs the
 * doorbell (its TX work is not running, or the QP is in Error and what was
 * posted must be flushed).
 */
static int rsiw_sq_needs_doorbell(uint32_t flags)
{
	return !(flags & RSIW_RING_SQ_ACTIVE) || (flags & RSIW_RING_ERROR);
}

/*
 * The doorbells: the uverbs POST_SEND / POST_RECV command with no WR (the
 * kernel reads the ring), written to the command fd as siw's provider
 * rings its own. The two commands and their responses share one layout.
 * ibv_cmd_post_send() would send the same command through the
 * RDMA_VERBS_IOCTL "invoke write" method where the kernel has it (its
 * attribute bundle, method lookup and copies), which in a 64-byte
 * ping-pong under QEMU measured a third of the post-to-wire time.
 */
_Static_assert(sizeof(struct ib_uverbs_post_send) ==
		       sizeof(struct ib_uverbs_post_recv),
	       "layout");
_Static_assert(offsetof(struct ib_uverbs_post_send, wqe_size) ==
		       offsetof(struct ib_uverbs_post_recv, wqe_size),
	       "layout");
_Static_assert(sizeof(struct ib_uverbs_post_send_resp) ==
		       sizeof(struct ib_uverbs_post_recv_resp),
	       "layout");

static void rsiw_doorbell(struct rsiw_qp *qp, uint32_t command,
			  uint32_t wqe_size)
{
	struct {
		struct ib_uverbs_cmd_hdr hdr;
		struct ib_uverbs_post_send cmd;
	} req = { 0 };
	struct ib_uverbs_post_send_resp resp = { 0 };

	req.hdr.command = command;
	req.hdr.in_words = sizeof(req) / 4;
	req.hdr.out_words = sizeof(resp) / 4;
	req.cmd.response = (uintptr_t)&resp;
	req.cmd.qp_handle = qp->vqp.qp.handle;
	req.cmd.wqe_size = wqe_size;
	(void)!write(qp->vqp.qp.context->cmd_fd, &req, sizeof(req));
}

static void rsiw_sq_doorbell(struct rsiw_qp *qp)
{
	rsiw_doorbell(qp, IB_USER_VERBS_CMD_POST_SEND,
		      sizeof(struct ib_uverbs_send_wr));
}

static void rsiw_rq_doorbell(struct rsiw_qp *qp)
{
	rsiw_doorbell(qp, IB_USER_VERBS_CMD_POST_RECV,
		      sizeof(struct ib_uverbs_recv_wr));
}

/* Posts a WR list on the send ring, with one doorbell at most. */
static int rsiw_post_send(struct ibv_qp *ibqp, struct ibv_send_wr *wr,
			  struct ibv_send_wr **bad_wr)
{
	struct rsiw_qp *qp = to_rqp(ibqp);
	uint32_t flags = 0;
	int ret = 0, posted = 0;

	if (!qp->sq.map)
		return ibv_cmd_post_send(ibqp, wr, bad_wr);
	pthread_spin_lock(&qp->sq_lock);
	rsiw_ring_sync(&qp->sq);
	for (; wr; wr = wr->next) {
		if (rsiw_ring_full(&qp->sq)) {
			ret = ENOMEM;
			break;
		}
		ret = rsiw_fill_sqe(qp, rsiw_ring_slot(&qp->sq, qp->sq.idx),
				    wr);
		if (ret)
			break;
		qp->sq.idx++;
		posted++;
	}
	if (posted)
		flags = rsiw_ring_publish(&qp->sq);
	pthread_spin_unlock(&qp->sq_lock);
	/* None while the kernel's TX work runs (it looks again at the end). */
	if (posted && rsiw_sq_needs_doorbell(flags))
		rsiw_sq_doorbell(qp);
	if (ret)
		*bad_wr = wr;
	return ret;
}

static int rsiw_fill_rqe(struct rsiw_ring *r, uint32_t max_sge,
			 const struct ibv_recv_wr *wr)
{
	struct rsiw_rqe *e = rsiw_ring_slot(r, r->idx);
	int i;

	if (wr->num_sge < 0 || (uint32_t)wr->num_sge > max_sge)
		return EINVAL;
	e->wr_id = wr->wr_id;
	e->num_sge = (uint32_t)wr->num_sge;
	e->reserved = 0;
	for (i = 0; i < wr->num_sge; i++) {
		e->sge[i].addr = wr->sg_list[i].addr;
		e->sge[i].length = wr->sg_list[i].length;
		e->sge[i].lkey = wr->sg_list[i].lkey;
	}
	return 0;
}

/* Fills receive entries from a WR list; returns the flags after publishing. */
static int rsiw_post_rq_ring(struct rsiw_ring *r, pthread_spinlock_t *lock,
			     uint32_t max_sge, struct ibv_recv_wr *wr,
			     struct ibv_recv_wr **bad_wr, uint32_t *flags)
{
	int ret = 0, posted = 0;

	*flags = 0;
	pthread_spin_lock(lock);
	rsiw_ring_sync(r);
	for (; wr; wr = wr->next) {
		if (rsiw_ring_full(r)) {
			ret = ENOMEM;
			break;
		}
		ret = rsiw_fill_rqe(r, max_sge, wr);
		if (ret)
			break;
		r->idx++;
		posted++;
	}
	if (posted)
		*flags = rsiw_ring_publish(r);
	pthread_spin_unlock(lock);
	if (ret)
		*bad_wr = wr;
	return ret;
}

/* No system call, except in Error (the kernel flushes what was posted). */
static int rsiw_post_recv(struct ibv_qp *ibqp, struct ibv_recv_wr *wr,
			  struct ibv_recv_wr **bad_wr)
{
	struct rsiw_qp *qp = to_rqp(ibqp);
	uint32_t flags;
	int ret;

	if (!qp->rq.map)
		return ibv_cmd_post_recv(ibqp, wr, bad_wr);
	ret = rsiw_post_rq_ring(&qp->rq, &qp->rq_lock, qp->max_recv_sge, wr,
				bad_wr, &flags);
	if (flags & RSIW_RING_ERROR)
		rsiw_rq_doorbell(qp);
	return ret;
}

static int rsiw_post_srq_recv(struct ibv_srq *ibsrq, struct ibv_recv_wr *wr,
			      struct ibv_recv_wr **bad_wr)
{
	struct rsiw_srq *srq = container_of(ibsrq, struct rsiw_srq, srq);
	uint32_t flags;

	if (!srq->rq.map)
		return ibv_cmd_post_srq_recv(ibsrq, wr, bad_wr);
	return rsiw_post_rq_ring(&srq->rq, &srq->lock, srq->max_sge, wr, bad_wr,
				 &flags);
}

/* ---- direct verbs (rsiwdv.h) ---- */

__attribute__((visibility("default"))) int
rsiwdv_query_qp(struct ibv_qp *ibqp, struct rsiwdv_qp *out)
{
	struct rsiw_qp *qp = to_rqp(ibqp);

	if (!qp->sq.map)
		return EOPNOTSUPP;
	memset(out, 0, sizeof(*out));
	out->sq_ring = qp->sq.map;
	out->sq_entries = qp->sq.entries;
	out->rq_ring = qp->rq.map;
	out->rq_entries = qp->rq.map ? qp->rq.entries : 0;
	return 0;
}

/* Rings the SQ's doorbell (after writing entries through rsiwdv_query_qp). */
__attribute__((visibility("default"))) int
rsiwdv_sq_doorbell(struct ibv_qp *ibqp)
{
	struct ibv_send_wr *bad;

	return ibv_cmd_post_send(ibqp, NULL, &bad);
}

/*
 * Masked atomics (RFC 7306 with masks, rsiw's extension): libibverbs has no
 * opcode for them. One WR on the send ring; the completion's opcode is
 * IBV_WC_COMP_SWAP or IBV_WC_FETCH_ADD.
 */
__attribute__((visibility("default"))) int
rsiwdv_post_masked_atomic(struct ibv_qp *ibqp,
			  const struct rsiwdv_masked_atomic *a)
{
	struct rsiw_qp *qp = to_rqp(ibqp);
	struct rsiw_sqe *e;
	uint32_t flags;

	if (!qp->sq.map)
		return EOPNOTSUPP;
	if (a->sge.length < 8 || (a->remote_addr & 7) ||
	    (a->op != RSIWDV_MASKED_CMP_SWAP &&
	     a->op != RSIWDV_MASKED_FETCH_ADD))
		return EINVAL;
	pthread_spin_lock(&qp->sq_lock);
	rsiw_ring_sync(&qp->sq);
	if (rsiw_ring_full(&qp->sq)) {
		pthread_spin_unlock(&qp->sq_lock);
		return ENOMEM;
	}
	e = rsiw_ring_slot(&qp->sq, qp->sq.idx);
	memset(e, 0, sizeof(*e));
	e->wr_id = a->wr_id;
	e->opcode = a->op == RSIWDV_MASKED_CMP_SWAP ?
			    RSIW_WR_MASKED_ATOMIC_CMP_AND_SWP :
			    RSIW_WR_MASKED_ATOMIC_FETCH_AND_ADD;
	e->flags = a->signaled ? RSIW_SQE_SIGNALED : 0;
	e->rkey = a->rkey;
	e->remote_addr = a->remote_addr;
	e->compare_add = a->compare_add;
	e->compare_add_mask = a->compare_add_mask;
	e->swap = a->swap;
	e->swap_mask = a->swap_mask;
	e->num_sge = 1;
	e->sge[0].addr = a->sge.addr;
	e->sge[0].length = a->sge.length;
	e->sge[0].lkey = a->sge.lkey;
	qp->sq.idx++;
	flags = rsiw_ring_publish(&qp->sq);
	pthread_spin_unlock(&qp->sq_lock);
	if (rsiw_sq_needs_doorbell(flags))
		rsiw_sq_doorbell(qp);
	return 0;
}

static int rsiw_query_device_ex(struct ibv_context *ctx,
				const struct ibv_query_device_ex_input *input,
				struct ibv_device_attr_ex *attr,
				size_t attr_size)
{
	size_t cap_flags_end =
		offsetof(struct ibv_device_attr_ex, device_cap_flags_ex) +
		sizeof(attr->device_cap_flags_ex);
	struct ib_uverbs_ex_query_device_resp resp;
	size_t resp_size = sizeof(resp);
	uint64_t fw;
	int ret;

	ret = ibv_cmd_query_device_any(ctx, input, attr, attr_size, &resp,
				       &resp_size);
	if (ret)
		return ret;
	/* The kernel reports fw_ver as a number: major.minor.sub. */
	fw = resp.base.fw_ver;
	snprintf(attr->orig_attr.fw_ver, sizeof(attr->orig_attr.fw_ver),
		 "%u.%u.%u", (unsigned int)(fw >> 32),
		 (unsigned int)(fw >> 16) & 0xffff, (unsigned int)fw & 0xffff);
	/*
	 * RDMA Commit (Flush) goes through the send ring with ibv_wr_flush
	 * (rdma-core 45+): without either, the device's flush capabilities
	 * are not this process's to use.
	 */
	if ((!to_rctx(ctx)->rings || !RSIW_QP_EX_WITH_FLUSH) &&
	    attr_size >= cap_flags_end)
		attr->device_cap_flags_ex &= ~(RSIW_DEVICE_FLUSH_GLOBAL |
					       RSIW_DEVICE_FLUSH_PERSISTENT);
	return 0;
}

static int rsiw_query_port(struct ibv_context *ctx, uint8_t port,
			   struct ibv_port_attr *attr)
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

static struct ibv_mr *rsiw_reg_mr(struct ibv_pd *pd, void *addr, size_t length,
				  uint64_t hca_va, int access)
{
	struct ib_uverbs_reg_mr_resp resp;
	struct ibv_reg_mr cmd;
	struct verbs_mr *vmr = calloc(1, sizeof(*vmr));

	if (!vmr)
		return NULL;
	if (ibv_cmd_reg_mr(pd, addr, length, hca_va, access, vmr, &cmd,
			   sizeof(cmd), &resp, sizeof(resp))) {
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

struct rsiw_create_cq_cmd {
	struct ibv_create_cq ibv;
	struct rsiw_create_cq_req drv;
};

struct rsiw_create_cq_resp_all {
	struct ib_uverbs_create_cq_resp ibv;
	struct rsiw_create_cq_resp drv;
};

/* The create command (asking for a ring on an ABI 2 context), and its map. */
static int rsiw_cq_create_cmd(struct ibv_context *ctx, struct rsiw_cq *cq,
			      int cqe, struct ibv_comp_channel *channel,
			      int comp_vector)
{
	struct rsiw_create_cq_resp_all resp;
	struct rsiw_create_cq_cmd cmd;
	int ret;

	memset(&cmd, 0, sizeof(cmd));
	memset(&resp, 0, sizeof(resp));
	if (!to_rctx(ctx)->rings)
		return ibv_cmd_create_cq(ctx, cqe, channel, comp_vector,
					 &cq->vcq.cq, &cmd.ibv, sizeof(cmd.ibv),
					 &resp.ibv, sizeof(resp.ibv));
	cmd.drv.flags = RSIW_CREATE_RINGS;
	if (ibv_cmd_create_cq(ctx, cqe, channel, comp_vector, &cq->vcq.cq,
			      &cmd.ibv, sizeof(cmd), &resp.ibv, sizeof(resp)))
		return -1;
	ret = rsiw_ring_map(ctx, &cq->ring, &resp.drv.cq,
			    sizeof(struct rsiw_cqe));
	if (ret) {
		ibv_cmd_destroy_cq(&cq->vcq.cq);
		errno = ret;
		return -1;
	}
	pthread_spin_init(&cq->ring_lock, PTHREAD_PROCESS_PRIVATE);
	/* The ring may be larger than asked (a power of two). */
	cq->vcq.cq.cqe = (int)cq->ring.entries;
	return 0;
}

static struct ibv_cq *rsiw_create_cq(struct ibv_context *ctx, int cqe,
				     struct ibv_comp_channel *channel,
				     int comp_vector)
{
	struct rsiw_cq *cq = calloc(1, sizeof(*cq));

	if (!cq)
		return NULL;
	if (rsiw_cq_create_cmd(ctx, cq, cqe, channel, comp_vector)) {
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
	n = rsiw_cq_fetch(cq, RSIW_CQ_BATCH, cq->wc);
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

/* The immediate, or for a Send with Invalidate the invalidated key. */
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
	if (rsiw_cq_create_cmd(ctx, cq, (int)attr->cqe, attr->channel,
			       attr->comp_vector)) {
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
		return rsiw_cq_fetch(cq, ne, wc);
	pthread_mutex_lock(&cq->lock);
	while (got < ne && cq->pos + 1 < cq->n)
		wc[got++] = cq->wc[++cq->pos];
	if (got < ne) {
		n = rsiw_cq_fetch(cq, ne - got, wc + got);
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

	return ibv_cmd_resize_cq(cq, cqe, &cmd, sizeof(cmd), &resp,
				 sizeof(resp));
}

static int rsiw_destroy_cq(struct ibv_cq *ibcq)
{
	struct rsiw_cq *cq = to_rcq(ibcq);
	int ret = ibv_cmd_destroy_cq(ibcq);

	if (ret)
		return ret;
	if (cq->ex)
		pthread_mutex_destroy(&cq->lock);
	if (cq->ring.map) {
		rsiw_ring_unmap(&cq->ring);
		pthread_spin_destroy(&cq->ring_lock);
	}
	free(cq);
	return 0;
}

struct rsiw_create_qp_cmd {
	struct ibv_create_qp ibv;
	struct rsiw_create_qp_req drv;
};

struct rsiw_create_qp_resp_all {
	struct ib_uverbs_create_qp_resp ibv;
	struct rsiw_create_qp_resp drv;
};

/* Maps a new QP's rings (ABI 2); on failure the QP is destroyed. */
static int rsiw_qp_rings(struct ibv_context *ctx, struct rsiw_qp *qp,
			 const struct rsiw_create_qp_resp *drv,
			 const struct ibv_qp_cap *cap, int has_srq)
{
	int ret =
		rsiw_ring_map(ctx, &qp->sq, &drv->sq, sizeof(struct rsiw_sqe));

	if (!ret && !has_srq)
		ret = rsiw_ring_map(ctx, &qp->rq, &drv->rq,
				    sizeof(struct rsiw_rqe));
	if (ret) {
		rsiw_ring_unmap(&qp->sq);
		ibv_cmd_destroy_qp(&qp->vqp.qp);
		errno = ret;
		return -1;
	}
	pthread_spin_init(&qp->sq_lock, PTHREAD_PROCESS_PRIVATE);
	pthread_spin_init(&qp->rq_lock, PTHREAD_PROCESS_PRIVATE);
	qp->max_inline = cap->max_inline_data;
	qp->max_send_sge = cap->max_send_sge;
	qp->max_recv_sge = cap->max_recv_sge;
	return 0;
}

static struct ibv_qp *rsiw_create_qp(struct ibv_pd *pd,
				     struct ibv_qp_init_attr *attr)
{
	struct rsiw_create_qp_resp_all resp;
	struct rsiw_create_qp_cmd cmd;
	int rings = to_rctx(pd->context)->rings;
	/* A verbs_qp with comp_mask 0: ibv_qp_to_qp_ex reads it (NULL). */
	struct rsiw_qp *qp = calloc(1, sizeof(*qp));

	if (!qp)
		return NULL;
	memset(&cmd, 0, sizeof(cmd));
	memset(&resp, 0, sizeof(resp));
	cmd.drv.flags = rings ? RSIW_CREATE_RINGS : 0;
	if (ibv_cmd_create_qp(pd, &qp->vqp.qp, attr, &cmd.ibv,
			      rings ? sizeof(cmd) : sizeof(cmd.ibv), &resp.ibv,
			      rings ? sizeof(resp) : sizeof(resp.ibv))) {
		free(qp);
		return NULL;
	}
	if (rings && rsiw_qp_rings(pd->context, qp, &resp.drv, &attr->cap,
				   attr->srq != NULL)) {
		free(qp);
		return NULL;
	}
	return &qp->vqp.qp;
}

/* ---- the extended QP: ibv_wr_* build a WR list, one post at complete ---- */

/* The RC operations the uverbs post_send command carries to rsiw. */
#define RSIW_SEND_OPS                                                          \
	(IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_INV |                  \
	 IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM |      \
	 IBV_QP_EX_WITH_RDMA_READ | IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP |        \
	 IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD)
/* What the send ring adds (ABI 2): Local Invalidate (and Flush, below). */
#define RSIW_RING_SEND_OPS                                                     \
	(RSIW_SEND_OPS | IBV_QP_EX_WITH_LOCAL_INV | RSIW_QP_EX_WITH_FLUSH)

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
	if (rsiw_grow((void **)&qp->wrs, &qp->wr_cap, qp->nwr + 1,
		      sizeof(*qp->wrs))) {
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

static void rsiw_wr_rdma_write(struct ibv_qp_ex *qpx, uint32_t rkey,
			       uint64_t remote_addr)
{
	struct ibv_send_wr *wr =
		rsiw_wr_new(qpx, IBV_QP_EX_WITH_RDMA_WRITE, IBV_WR_RDMA_WRITE);

	if (wr) {
		wr->wr.rdma.rkey = rkey;
		wr->wr.rdma.remote_addr = remote_addr;
	}
}

static void rsiw_wr_rdma_write_imm(struct ibv_qp_ex *qpx, uint32_t rkey,
				   uint64_t remote_addr, __be32 imm_data)
{
	struct ibv_send_wr *wr =
		rsiw_wr_new(qpx, IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM,
			    IBV_WR_RDMA_WRITE_WITH_IMM);

	if (wr) {
		wr->wr.rdma.rkey = rkey;
		wr->wr.rdma.remote_addr = remote_addr;
		wr->imm_data = imm_data;
	}
}

static void rsiw_wr_rdma_read(struct ibv_qp_ex *qpx, uint32_t rkey,
			      uint64_t remote_addr)
{
	struct ibv_send_wr *wr =
		rsiw_wr_new(qpx, IBV_QP_EX_WITH_RDMA_READ, IBV_WR_RDMA_READ);

	if (wr) {
		wr->wr.rdma.rkey = rkey;
		wr->wr.rdma.remote_addr = remote_addr;
	}
}

static void rsiw_wr_atomic_cmp_swp(struct ibv_qp_ex *qpx, uint32_t rkey,
				   uint64_t remote_addr, uint64_t compare,
				   uint64_t swap)
{
	struct ibv_send_wr *wr =
		rsiw_wr_new(qpx, IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP,
			    IBV_WR_ATOMIC_CMP_AND_SWP);

	if (wr) {
		wr->wr.atomic.rkey = rkey;
		wr->wr.atomic.remote_addr = remote_addr;
		wr->wr.atomic.compare_add = compare;
		wr->wr.atomic.swap = swap;
	}
}

static void rsiw_wr_atomic_fetch_add(struct ibv_qp_ex *qpx, uint32_t rkey,
				     uint64_t remote_addr, uint64_t add)
{
	struct ibv_send_wr *wr =
		rsiw_wr_new(qpx, IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD,
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
	struct ibv_send_wr *wr =
		rsiw_wr_new(qpx, IBV_QP_EX_WITH_LOCAL_INV, IBV_WR_LOCAL_INV);

	if (wr)
		wr->invalidate_rkey = invalidate_rkey;
}

static void rsiw_wr_bind_mw(struct ibv_qp_ex *qpx, struct ibv_mw *mw,
			    uint32_t rkey, const struct ibv_mw_bind_info *info)
{
	(void)mw;
	(void)rkey;
	(void)info;
	rsiw_wr_fail(qpx_to_rqp(qpx), EOPNOTSUPP);
}

static void rsiw_wr_send_tso(struct ibv_qp_ex *qpx, void *hdr, uint16_t hdr_sz,
			     uint16_t mss)
{
	(void)hdr;
	(void)hdr_sz;
	(void)mss;
	rsiw_wr_fail(qpx_to_rqp(qpx), EOPNOTSUPP);
}

static void rsiw_wr_atomic_write(struct ibv_qp_ex *qpx, uint32_t rkey,
				 uint64_t remote_addr, const void *atomic_wr)
{
	(void)rkey;
	(void)remote_addr;
	(void)atomic_wr;
	rsiw_wr_fail(qpx_to_rqp(qpx), EOPNOTSUPP);
}

static void rsiw_wr_set_ud_addr(struct ibv_qp_ex *qpx, struct ibv_ah *ah,
				uint32_t remote_qpn, uint32_t remote_qkey)
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
	if (rsiw_grow((void **)&qp->sges, &qp->sge_cap, qp->nsge + num_sge,
		      sizeof(*qp->sges))) {
		rsiw_wr_fail(qp, ENOMEM);
		return;
	}
	memcpy(&qp->sges[qp->nsge], sg_list, num_sge * sizeof(*sg_list));
	w->sge_off = qp->nsge;
	w->wr.num_sge = (int)num_sge;
	qp->nsge += num_sge;
}

static void rsiw_wr_set_sge(struct ibv_qp_ex *qpx, uint32_t lkey, uint64_t addr,
			    uint32_t length)
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
		/* As other providers: more than max_inline_data. */
		rsiw_wr_fail(qp, ENOMEM);
		return;
	}
	if (rsiw_grow((void **)&qp->inl, &qp->inl_cap,
		      qp->ninl + (uint32_t)len + 1, 1)) {
		rsiw_wr_fail(qp, ENOMEM);
		return;
	}
	w->inl = 1;
	w->inl_off = qp->ninl;
	w->inl_len = (uint32_t)len;
	for (i = 0; i < num_buf; i++) {
		memcpy(qp->inl + qp->ninl, buf_list[i].addr,
		       buf_list[i].length);
		qp->ninl += buf_list[i].length;
	}
	w->wr.send_flags |= IBV_SEND_INLINE;
	w->wr.num_sge = len ? 1 : 0;
}

static void rsiw_wr_set_inline_data(struct ibv_qp_ex *qpx, void *addr,
				    size_t length)
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

/* Posts the built list on the send ring, with one doorbell at most. */
static int rsiw_wr_post_ring(struct rsiw_qp *qp)
{
	uint32_t flags, i;
	int ret = 0, posted = 0;

	pthread_spin_lock(&qp->sq_lock);
	rsiw_ring_sync(&qp->sq);
	for (i = 0; i < qp->nwr; i++) {
		struct rsiw_wr *w = &qp->wrs[i];
		struct rsiw_sqe *e;

		if (rsiw_ring_full(&qp->sq)) {
			ret = ENOMEM;
			break;
		}
		e = rsiw_ring_slot(&qp->sq, qp->sq.idx);
		if (w->wr.opcode == RSIW_WR_IS_FLUSH) {
			memset(e, 0, sizeof(*e));
			e->wr_id = w->wr.wr_id;
			e->opcode = RSIW_WR_FLUSH;
			if (w->wr.send_flags & IBV_SEND_SIGNALED)
				e->flags |= RSIW_SQE_SIGNALED;
			if (w->wr.send_flags & IBV_SEND_FENCE)
				e->flags |= RSIW_SQE_FENCE;
			e->rkey = w->wr.wr.rdma.rkey;
			e->remote_addr = w->wr.wr.rdma.remote_addr;
			e->length = w->flush_len;
			e->flush_type = w->flush_type;
			if (w->flush_level == 1 /* IBV_FLUSH_MR */)
				e->flags |= RSIW_SQE_FLUSH_MR;
		} else {
			ret = rsiw_fill_sqe(qp, e, &w->wr);
			if (ret)
				break;
		}
		qp->sq.idx++;
		posted++;
	}
	/* All or nothing, the list is one post: take back what was filled. */
	if (ret)
		qp->sq.idx -= (uint32_t)posted;
	else if (posted) {
		flags = rsiw_ring_publish(&qp->sq);
		pthread_spin_unlock(&qp->sq_lock);
		if (rsiw_sq_needs_doorbell(flags))
			rsiw_sq_doorbell(qp);
		return 0;
	}
	pthread_spin_unlock(&qp->sq_lock);
	return ret;
}

#if RSIW_HAVE_WR_FLUSH
static void rsiw_wr_flush(struct ibv_qp_ex *qpx, uint32_t rkey,
			  uint64_t remote_addr, size_t len, uint8_t type,
			  uint8_t level)
{
	struct ibv_send_wr *wr =
		rsiw_wr_new(qpx, IBV_QP_EX_WITH_FLUSH, RSIW_WR_IS_FLUSH);
	struct rsiw_wr *w;

	if (!wr)
		return;
	if (len > UINT32_MAX) {
		/* The wire's ranges are 32-bit. */
		rsiw_wr_fail(qpx_to_rqp(qpx), EINVAL);
		return;
	}
	w = container_of(wr, struct rsiw_wr, wr);
	wr->wr.rdma.rkey = rkey;
	wr->wr.rdma.remote_addr = remote_addr;
	w->flush_len = (uint32_t)len;
	w->flush_level = level;
	w->flush_type = type;
}
#endif

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
				w->inl_sge.addr =
					(uintptr_t)(qp->inl + w->inl_off);
				w->inl_sge.length = w->inl_len;
				w->inl_sge.lkey = 0;
				w->wr.sg_list = &w->inl_sge;
			} else {
				w->wr.sg_list = w->wr.num_sge ?
							&qp->sges[w->sge_off] :
							NULL;
			}
			w->wr.next =
				i + 1 < qp->nwr ? &qp->wrs[i + 1].wr : NULL;
		}
		ret = qp->sq.map ? rsiw_wr_post_ring(qp) :
				   ibv_cmd_post_send(&qp->vqp.qp,
						     &qp->wrs[0].wr, &bad);
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
static struct ibv_qp *rsiw_create_qp_ex(struct ibv_context *ctx,
					struct ibv_qp_init_attr_ex *attr)
{
	struct rsiw_create_qp_resp_all resp;
	struct rsiw_create_qp_cmd cmd;
	struct ibv_qp_ex *qpx;
	struct rsiw_qp *qp;
	struct ibv_qp_init_attr_ex a = *attr;
	int rings = to_rctx(ctx)->rings;
	uint64_t ops = 0;

	/* Create flags: none supported, so only "none" (rdma-core's tests). */
	if ((attr->comp_mask &
	     ~(uint32_t)(IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS |
			 IBV_QP_INIT_ATTR_CREATE_FLAGS)) ||
	    ((attr->comp_mask & IBV_QP_INIT_ATTR_CREATE_FLAGS) &&
	     attr->create_flags)) {
		errno = EOPNOTSUPP;
		return NULL;
	}
	a.comp_mask &= ~(uint32_t)IBV_QP_INIT_ATTR_CREATE_FLAGS;
	if (attr->comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS) {
		ops = attr->send_ops_flags;
		if (ops &
		    ~(uint64_t)(rings ? RSIW_RING_SEND_OPS : RSIW_SEND_OPS)) {
			errno = EOPNOTSUPP;
			return NULL;
		}
	}
	qp = calloc(1, sizeof(*qp));
	if (!qp) {
		errno = ENOMEM;
		return NULL;
	}
	memset(&cmd, 0, sizeof(cmd));
	memset(&resp, 0, sizeof(resp));
	cmd.drv.flags = rings ? RSIW_CREATE_RINGS : 0;
	if (ibv_cmd_create_qp_ex(ctx, &qp->vqp, &a, &cmd.ibv,
				 rings ? sizeof(cmd) : sizeof(cmd.ibv),
				 &resp.ibv,
				 rings ? sizeof(resp) : sizeof(resp.ibv))) {
		free(qp);
		return NULL;
	}
	attr->cap = a.cap;
	if (rings && rsiw_qp_rings(ctx, qp, &resp.drv, &a.cap, a.srq != NULL)) {
		free(qp);
		return NULL;
	}
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

static int rsiw_query_qp(struct ibv_qp *qp, struct ibv_qp_attr *attr,
			 int attr_mask, struct ibv_qp_init_attr *init_attr)
{
	struct ibv_query_qp cmd;

	return ibv_cmd_query_qp(qp, attr, attr_mask, init_attr, &cmd,
				sizeof(cmd));
}

static int rsiw_modify_qp(struct ibv_qp *qp, struct ibv_qp_attr *attr,
			  int attr_mask)
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
	if (qp->sq.map) {
		rsiw_ring_unmap(&qp->sq);
		rsiw_ring_unmap(&qp->rq);
		pthread_spin_destroy(&qp->sq_lock);
		pthread_spin_destroy(&qp->rq_lock);
	}
	free(qp->wrs);
	free(qp->sges);
	free(qp->inl);
	free(qp);
	return 0;
}

struct rsiw_create_srq_cmd {
	struct ibv_create_srq ibv;
	struct rsiw_create_srq_req drv;
};

struct rsiw_create_srq_resp_all {
	struct ib_uverbs_create_srq_resp ibv;
	struct rsiw_create_srq_resp drv;
};

static struct ibv_srq *rsiw_create_srq(struct ibv_pd *pd,
				       struct ibv_srq_init_attr *attr)
{
	struct rsiw_create_srq_resp_all resp;
	struct rsiw_create_srq_cmd cmd;
	int rings = to_rctx(pd->context)->rings, ret;
	struct rsiw_srq *srq = calloc(1, sizeof(*srq));

	if (!srq)
		return NULL;
	memset(&cmd, 0, sizeof(cmd));
	memset(&resp, 0, sizeof(resp));
	cmd.drv.flags = rings ? RSIW_CREATE_RINGS : 0;
	if (ibv_cmd_create_srq(pd, &srq->srq, attr, &cmd.ibv,
			       rings ? sizeof(cmd) : sizeof(cmd.ibv), &resp.ibv,
			       rings ? sizeof(resp) : sizeof(resp.ibv))) {
		free(srq);
		return NULL;
	}
	if (rings) {
		ret = rsiw_ring_map(pd->context, &srq->rq, &resp.drv.rq,
				    sizeof(struct rsiw_rqe));
		if (ret) {
			ibv_cmd_destroy_srq(&srq->srq);
			free(srq);
			errno = ret;
			return NULL;
		}
		pthread_spin_init(&srq->lock, PTHREAD_PROCESS_PRIVATE);
		srq->max_sge = attr->attr.max_sge;
		attr->attr.max_wr = srq->rq.entries;
	}
	return &srq->srq;
}

static int rsiw_modify_srq(struct ibv_srq *srq, struct ibv_srq_attr *attr,
			   int attr_mask)
{
	struct ibv_modify_srq cmd;

	return ibv_cmd_modify_srq(srq, attr, attr_mask, &cmd, sizeof(cmd));
}

static int rsiw_query_srq(struct ibv_srq *srq, struct ibv_srq_attr *attr)
{
	struct ibv_query_srq cmd;

	return ibv_cmd_query_srq(srq, attr, &cmd, sizeof(cmd));
}

static int rsiw_destroy_srq(struct ibv_srq *ibsrq)
{
	struct rsiw_srq *srq = container_of(ibsrq, struct rsiw_srq, srq);
	int ret = ibv_cmd_destroy_srq(ibsrq);

	if (ret)
		return ret;
	if (srq->rq.map) {
		rsiw_ring_unmap(&srq->rq);
		pthread_spin_destroy(&srq->lock);
	}
	free(srq);
	return 0;
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
	.post_recv = rsiw_post_recv,
	.post_send = rsiw_post_send,
	.post_srq_recv = rsiw_post_srq_recv,
	.query_device_ex = rsiw_query_device_ex,
	.query_port = rsiw_query_port,
	.query_qp = rsiw_query_qp,
	.query_srq = rsiw_query_srq,
	.reg_mr = rsiw_reg_mr,
	.req_notify_cq = rsiw_req_notify_cq,
	.resize_cq = rsiw_resize_cq,
};

static struct verbs_context *rsiw_alloc_context(struct ibv_device *ibdev,
						int cmd_fd, void *private_data)
{
	struct {
		struct ibv_get_context ibv;
		struct rsiw_alloc_ucontext_req drv;
	} cmd;
	struct {
		struct ib_uverbs_get_context_resp ibv;
		struct rsiw_alloc_ucontext_resp drv;
	} resp;
	struct rsiw_context *ctx;

	(void)private_data;
	/* The offset of the verbs_context in ours, as a pointer (the ABI's). */
	ctx = _verbs_init_and_alloc_context(
		ibdev, cmd_fd, sizeof(*ctx),
		(struct verbs_context *)offsetof(struct rsiw_context, vctx),
		RSIW_DRIVER_ID);
	if (!ctx)
		return NULL;
	memset(&cmd, 0, sizeof(cmd));
	memset(&resp, 0, sizeof(resp));
	/* A kernel without rings (ABI 1) answers nothing: commands only. */
	cmd.drv.abi_version = RSIW_ABI_VERSION;
	if (rsiw_cmd_get_context(&ctx->vctx, &cmd.ibv, sizeof(cmd), &resp.ibv,
				 sizeof(resp))) {
		verbs_uninit_context(&ctx->vctx);
		free(ctx);
		return NULL;
	}
	ctx->rings = resp.drv.abi_version == RSIW_ABI_VERSION &&
		     resp.drv.sqe_size == sizeof(struct rsiw_sqe) &&
		     resp.drv.rqe_size == sizeof(struct rsiw_rqe) &&
		     resp.drv.cqe_size == sizeof(struct rsiw_cqe) &&
		     resp.drv.ring_hdr == RSIW_RING_HDR;
	/* A kernel of our ABI whose entries we cannot read: commands only. */
	if (resp.drv.abi_version == RSIW_ABI_VERSION && !ctx->rings)
		verbs_warn(&ctx->vctx,
			   "kernel's ring layout differs: no rings\n");
	/* Documented in rsiw(7): commands only, to compare or to debug. */
	if (ctx->rings && getenv("RSIW_NO_RINGS")) {
		verbs_debug(&ctx->vctx, "RSIW_NO_RINGS is set: no rings\n");
		ctx->rings = 0;
	}
	verbs_debug(&ctx->vctx,
		    "context ABI %u (entries %u/%u/%u, header %u): rings %s\n",
		    resp.drv.abi_version, resp.drv.sqe_size, resp.drv.rqe_size,
		    resp.drv.cqe_size, resp.drv.ring_hdr,
		    ctx->rings ? "on" : "off");
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
	.match_min_abi_version = 1,
	.match_max_abi_version = RSIW_ABI_VERSION,
	.match_table = rsiw_match_table,
	.alloc_device = rsiw_alloc_device,
	.uninit_device = rsiw_uninit_device,
	.alloc_context = rsiw_alloc_context,
};

PROVIDER_DRIVER(rsiw, rsiw_device_ops);
