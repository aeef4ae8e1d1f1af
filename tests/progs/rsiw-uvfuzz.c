// SPDX-License-Identifier: GPL-2.0
/*
 * rsiw-uvfuzz: a seeded random-sequence fuzzer of the user verbs of one
 * RDMA device ("hostile userspace"), meant to run as an
 * unprivileged user. Every step is a random verb with random arguments:
 * PD, MR (lengths 0, huge, unaligned, bad addresses, any access bits), CQ
 * (create, create_ex, resize, poll, notify), QP (any caps, types, attribute
 * masks and states), SRQ, post_send/post_recv with random opcodes, SGE
 * counts, keys, lengths and flags, raw uverbs write() commands with random
 * and truncated ABI structs on the context's cmd_fd, children that exit
 * or are killed with their objects alive, and (with -c) rdma_cm
 * connections between two devices whose QPs get the same random posts.
 * The program keeps a table of the objects it owns, never crashes on an
 * error, counts every operation and its errno, tears everything down at
 * the end (or, with -x, exits with everything alive) and prints a summary.
 *
 *   rsiw-uvfuzz [-d DEV] [-s SEED] [-n OPS] [-t SECONDS] [-c SRV_ADDR,CLI_ADDR] [-r] [-x] [-v]
 *
 * -r: a second thread races raw poll/notify/post/modify/query/resize
 * commands on the live handles against the main thread's verbs.
 *   rsiw-uvfuzz -E [-d DEV] [-w SECONDS] [-q QP_WR] [-C CQE]
 *
 * -E (exhaust): one PD, then a CQ of CQE entries, a QP of QP_WR send and
 * receive WRs and an MR in a loop until a verb fails (a memory cgroup
 * limit: ENOMEM, or the cgroup's OOM killer); prints memory.current of
 * its cgroup as it goes, "exhaust: stopped ..." and holds its objects -w
 * seconds before it exits.
 *
 * The last line is "uvfuzz: done" (or "exhaust: done"); exit status 0,
 * 1 for a setup failure, 3 when the watchdog (SECONDS + 120) fired.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <netdb.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <dlfcn.h>
#include <infiniband/verbs.h>
#include <rdma/ib_user_verbs.h>
#include <rdma/rdma_cma.h>

#include "../../include/uapi/rdma/rsiw-abi.h"
#include "../../providers/rsiw/rsiwdv.h"
#include "rsiw-dv-lib.h"

/* ---- randomness ---- */

static uint64_t rs;

static uint64_t rnd64(void)
{
	rs ^= rs >> 12;
	rs ^= rs << 25;
	rs ^= rs >> 27;
	return rs * 0x2545F4914F6CDD1DULL;
}

static uint32_t rnd(uint32_t n)
{
	return n ? (uint32_t)(rnd64() % n) : 0;
}

static int chance(int pct)
{
	return (int)rnd(100) < pct;
}

static uint32_t interesting32(void)
{
	static const uint32_t v[] = {
		0, 1, 2, 3, 4, 6, 7, 8, 15, 16, 17, 31, 32, 33, 63, 64, 127, 128, 129,
		255, 256, 1023, 1024, 4095, 4096, 4097, 8191, 8192, 16383, 16384, 16385,
		32768, 65535, 65536, 65537, 1 << 20, 0x7fffffff, 0x80000000, 0xfffffffe,
		0xffffffff,
	};
	if (chance(75))
		return v[rnd(sizeof(v) / sizeof(v[0]))];
	if (chance(50))
		return rnd(64);
	return (uint32_t)rnd64();
}

static uint64_t interesting64(void)
{
	if (chance(70))
		return interesting32();
	if (chance(50))
		return 1ULL << rnd(64);
	return rnd64();
}

/* ---- statistics: per operation, calls and errno outcomes ---- */

enum op {
	OP_ALLOC_PD, OP_DEALLOC_PD, OP_REG_MR, OP_REREG_MR, OP_DEREG_MR,
	OP_ALLOC_MW, OP_CREATE_CQ, OP_CREATE_CQ_EX, OP_RESIZE_CQ, OP_DESTROY_CQ,
	OP_POLL_CQ, OP_POLL_CQ_EX, OP_REQ_NOTIFY, OP_CREATE_QP, OP_MODIFY_QP,
	OP_QUERY_QP, OP_DESTROY_QP, OP_CREATE_SRQ, OP_MODIFY_SRQ, OP_QUERY_SRQ,
	OP_POST_SRQ_RECV, OP_DESTROY_SRQ, OP_POST_SEND, OP_POST_RECV, OP_QUERY,
	OP_RAW, OP_EVENTS, OP_CHILD, OP_CONNECT, OP_DISCONNECT, OP_TEARDOWN,
	OP_POST_SEND_CONN, OP_RING, NOPS
};

static const char *const op_name[NOPS] = {
	"alloc_pd", "dealloc_pd", "reg_mr", "rereg_mr", "dereg_mr",
	"alloc_mw", "create_cq", "create_cq_ex", "resize_cq", "destroy_cq",
	"poll_cq", "poll_cq_ex", "req_notify_cq", "create_qp", "modify_qp",
	"query_qp", "destroy_qp", "create_srq", "modify_srq", "query_srq",
	"post_srq_recv", "destroy_srq", "post_send", "post_recv", "query",
	"raw_write", "events", "child_exit", "connect", "disconnect", "teardown",
	"post_send(conn)", "ring_scribble",
};

/* Relative weights of the random steps (teardown is not one). */
static const int op_weight[NOPS] = {
	[OP_ALLOC_PD] = 4, [OP_DEALLOC_PD] = 2, [OP_REG_MR] = 8, [OP_REREG_MR] = 1,
	[OP_DEREG_MR] = 4, [OP_ALLOC_MW] = 1, [OP_CREATE_CQ] = 5, [OP_CREATE_CQ_EX] = 2,
	[OP_RESIZE_CQ] = 3, [OP_DESTROY_CQ] = 3, [OP_POLL_CQ] = 8, [OP_POLL_CQ_EX] = 2,
	[OP_REQ_NOTIFY] = 3, [OP_CREATE_QP] = 6, [OP_MODIFY_QP] = 8, [OP_QUERY_QP] = 3,
	[OP_DESTROY_QP] = 3, [OP_CREATE_SRQ] = 2, [OP_MODIFY_SRQ] = 2, [OP_QUERY_SRQ] = 1,
	[OP_POST_SRQ_RECV] = 3, [OP_DESTROY_SRQ] = 1, [OP_POST_SEND] = 14, [OP_POST_RECV] = 8,
	[OP_QUERY] = 2, [OP_RAW] = 14, [OP_EVENTS] = 3, [OP_CHILD] = 0, [OP_CONNECT] = 0,
	[OP_DISCONNECT] = 0, [OP_RING] = 6,
};

#define NERR 140
static unsigned long calls[NOPS], errs[NOPS][NERR];
static enum op cur_op;

/* note RET: 0 is success, otherwise a positive errno. */
static void note(enum op op, int ret)
{
	calls[op]++;
	if (ret < 0)
		ret = -ret;
	errs[op][ret < NERR ? ret : NERR - 1]++;
}

static int verbose;

static void vlog(const char *fmt, ...)
{
	va_list ap;

	if (!verbose)
		return;
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
}

/* ---- the objects this process owns ---- */

#define MAXO 24
#define MAXSGE 64
#define ARENA (4u << 20)

struct cqo {
	struct ibv_cq *cq;
	struct ibv_cq_ex *cqx; /* made by create_cq_ex */
	int ch;			/* index into chans, or -1 */
};

struct qpo {
	struct ibv_qp *qp;
	int conn; /* owned by connection conn (rdma_cm), or -1 */
};

static struct ibv_context *ctx;
static struct ibv_pd *pds[MAXO];
static struct ibv_mr *mrs[MAXO];
static struct cqo cqs[MAXO];
static struct qpo qps[MAXO];
static struct ibv_srq *srqs[MAXO];
static struct ibv_comp_channel *chans[4];
static uint8_t *arena;	 /* ARENA bytes, read-write */
static uint8_t *ro_page; /* a read-only page */
static uint8_t *no_page; /* a PROT_NONE page */
static struct ibv_device_attr dattr;
static struct ibv_ah dummy_ah; /* UD posts name an AH; ours is never real */

/* Handles of objects raw commands created (CQ, QP, SRQ): the only ones a
 * raw destroy of those types may name, so that no object libibverbs
 * tracks is destroyed behind its back (its destroy would wait forever
 * for events of another object that reuses the handle). */
static uint32_t raw_handles[64];
static int nraw;
static int raw_fds[16];
static int nraw_fds;

static int pick(void *tab, size_t elem, int n)
{
	int i, start = rnd(n);

	for (i = 0; i < n; i++) {
		int k = (start + i) % n;
		if (*(void **)((char *)tab + k * elem))
			return k;
	}
	return -1;
}

static int free_slot(void *tab, size_t elem, int n)
{
	int i, start = rnd(n);

	for (i = 0; i < n; i++) {
		int k = (start + i) % n;
		if (!*(void **)((char *)tab + k * elem))
			return k;
	}
	return -1;
}

#define PICK(t) pick((t), sizeof((t)[0]), MAXO)
#define FREE_SLOT(t) free_slot((t), sizeof((t)[0]), MAXO)

static struct ibv_pd *any_pd(void)
{
	int k = PICK(pds);
	return k < 0 ? NULL : pds[k];
}

static struct ibv_cq *any_cq(void)
{
	int k = PICK(cqs);
	return k < 0 ? NULL : cqs[k].cq;
}

static int qp_index(struct ibv_qp *qp)
{
	for (int i = 0; i < MAXO; i++)
		if (qps[i].qp == qp)
			return i;
	return -1;
}

/* ---- rdma_cm connections (-c) ---- */

struct conn {
	struct rdma_cm_id *cli, *srv;
	int established, cli_qp; /* index into qps */
};

#define MAXC 8
static struct conn conns[MAXC];
static struct rdma_event_channel *cm_ch;
static struct rdma_cm_id *listener;
static struct sockaddr_storage srv_addr, cli_addr;
static int cm_mode;
static struct ibv_pd *spd;
static struct ibv_cq *scq;
static struct ibv_mr *smr;
static uint8_t *sbuf;
#define SBUF (1u << 20)

/* A random key: a live MR's lkey/rkey, the server MR's rkey, or noise. */
static uint32_t any_key(int remote)
{
	int k = PICK(mrs);

	if (remote && smr && chance(40))
		return smr->rkey;
	if (k >= 0 && chance(70))
		return remote ? mrs[k]->rkey : mrs[k]->lkey;
	return interesting32();
}

static uint64_t any_addr(int remote)
{
	int k = PICK(mrs);

	if (remote && smr && chance(40))
		return (uint64_t)(uintptr_t)sbuf + rnd(SBUF + 64);
	if (k >= 0 && chance(60))
		return (uint64_t)(uintptr_t)mrs[k]->addr + rnd(mrs[k]->length + 64);
	if (chance(50))
		return (uint64_t)(uintptr_t)arena + rnd(ARENA);
	switch (rnd(4)) {
	case 0: return 0;
	case 1: return (uint64_t)(uintptr_t)no_page;
	case 2: return 0xffff888000000000ULL;
	default: return rnd64();
	}
}

/* An SGE inside a live MR (when there is one). */
static int valid_sge(struct ibv_sge *sg)
{
	int m = PICK(mrs);
	uint64_t len;

	if (m < 0)
		return 0;
	len = mrs[m]->length;
	sg->lkey = mrs[m]->lkey;
	sg->length = len ? rnd(len < 8192 ? len + 1 : 8193) : 0;
	sg->addr = (uintptr_t)mrs[m]->addr + (len > sg->length ? rnd(len - sg->length + 1) : 0);
	return 1;
}

static void random_sges(struct ibv_sge *sg, int n)
{
	for (int i = 0; i < n; i++) {
		sg[i].addr = any_addr(0);
		sg[i].lkey = any_key(0);
		sg[i].length = chance(60) ? rnd(8192) : interesting32();
	}
}

/* ---- events: every event read is acked when its object is ours ---- */

/* CQs destroyed lately: a completion event naming one of them (and no
 * live CQ) came after its destroy returned, which the kernel must not do. */
static uintptr_t dead_cqs[64];
static unsigned long ndead, late_events, stray_events;

static void drain_events(void)
{
	struct ib_uverbs_async_event_desc ev;
	struct ib_uverbs_comp_event_desc ce;
	int i, n = 0;

	while (read(ctx->async_fd, &ev, sizeof(ev)) == sizeof(ev)) {
		struct ibv_async_event e = { .event_type = ev.event_type };
		void *el = (void *)(uintptr_t)ev.element;
		int known = 0;

		vlog("# async event %u on %p\n", ev.event_type, el);
		switch (ev.event_type) {
		case IBV_EVENT_CQ_ERR:
			for (i = 0; i < MAXO; i++)
				if (cqs[i].cq && (void *)cqs[i].cq == el)
					known = 1;
			e.element.cq = el;
			break;
		case IBV_EVENT_QP_FATAL: case IBV_EVENT_QP_REQ_ERR: case IBV_EVENT_QP_ACCESS_ERR:
		case IBV_EVENT_COMM_EST: case IBV_EVENT_SQ_DRAINED: case IBV_EVENT_PATH_MIG:
		case IBV_EVENT_PATH_MIG_ERR: case IBV_EVENT_QP_LAST_WQE_REACHED:
			known = qp_index(el) >= 0;
			e.element.qp = el;
			break;
		case IBV_EVENT_SRQ_ERR: case IBV_EVENT_SRQ_LIMIT_REACHED:
			for (i = 0; i < MAXO; i++)
				if (srqs[i] && (void *)srqs[i] == el)
					known = 1;
			e.element.srq = el;
			break;
		default:
			known = 1; /* device and port events name no object */
			e.element.port_num = ev.element;
		}
		if (known)
			ibv_ack_async_event(&e);
		n++;
	}
	for (int c = 0; c < 4; c++) {
		if (!chans[c])
			continue;
		while (read(chans[c]->fd, &ce, sizeof(ce)) == sizeof(ce)) {
			int known = 0;

			for (i = 0; i < MAXO; i++)
				if (cqs[i].cq && (uintptr_t)cqs[i].cq == ce.cq_handle) {
					ibv_ack_cq_events(cqs[i].cq, 1);
					known = 1;
				}
			if (!known) {
				stray_events++;
				for (i = 0; i < 64; i++)
					if (dead_cqs[i] && dead_cqs[i] == ce.cq_handle) {
						late_events++;
						fprintf(stderr, "uvfuzz: a completion event for CQ %#llx after its destroy\n",
							(unsigned long long)ce.cq_handle);
						break;
					}
			}
			n++;
		}
	}
	note(OP_EVENTS, 0);
	(void)n;
}

/* ---- the steps ---- */

static void op_alloc_pd(void)
{
	int k = FREE_SLOT(pds);
	struct ibv_pd *pd;

	if (k < 0)
		return;
	pd = ibv_alloc_pd(ctx);
	note(OP_ALLOC_PD, pd ? 0 : errno);
	pds[k] = pd;
}

static void op_dealloc_pd(void)
{
	int k = PICK(pds), ret;

	if (k < 0)
		return;
	ret = ibv_dealloc_pd(pds[k]);
	note(OP_DEALLOC_PD, ret);
	/* EBUSY: something still uses it. Anything else: the kernel object
	 * is gone (a raw command destroyed it); libibverbs's is leaked. */
	if (ret != EBUSY)
		pds[k] = NULL;
}

static void mr_args(void **addr, size_t *len, int *access)
{
	uint32_t off = rnd(ARENA);

	*addr = arena + off;
	*len = chance(70) ? rnd(ARENA - off + 1) : interesting32();
	switch (rnd(12)) {
	case 0: *len = 0; break;
	case 1: *addr = arena; *len = interesting64(); break;
	case 2: *addr = NULL; break;
	case 3: *addr = no_page; *len = 4096; break;
	case 4: *addr = ro_page; *len = 1 + rnd(4096); break;
	case 5: *addr = (void *)0xffff888000000000ULL; *len = 4096; break;
	case 6: *addr = arena + (off & ~4095u); *len = 4096 * (1 + rnd(16)); break;
	}
	*access = rnd(0x20);
	if (chance(15))
		*access |= 1 << rnd(32);
	else if (chance(5))
		*access = (int)rnd64();
}

static void op_reg_mr(void)
{
	struct ibv_pd *pd = any_pd();
	int k = FREE_SLOT(mrs), access;
	struct ibv_mr *mr;
	size_t len;
	void *addr;

	if (!pd || k < 0)
		return;
	mr_args(&addr, &len, &access);
	vlog("reg_mr %p %zu 0x%x\n", addr, len, access);
	mr = ibv_reg_mr(pd, addr, len, access);
	note(OP_REG_MR, mr ? 0 : errno);
	mrs[k] = mr;
}

static void op_rereg_mr(void)
{
	int k = PICK(mrs), access, ret;
	size_t len;
	void *addr;

	if (k < 0)
		return;
	mr_args(&addr, &len, &access);
	ret = ibv_rereg_mr(mrs[k], rnd(8), any_pd(), addr, len, access);
	note(OP_REREG_MR, ret < 0 ? errno : ret);
}

static void op_dereg_mr(void)
{
	int k = PICK(mrs), ret;

	if (k < 0)
		return;
	ret = ibv_dereg_mr(mrs[k]);
	note(OP_DEREG_MR, ret);
	if (ret != EBUSY)
		mrs[k] = NULL;
}

static void op_alloc_mw(void)
{
	struct ibv_pd *pd = any_pd();
	struct ibv_mw *mw;

	if (!pd)
		return;
	mw = ibv_alloc_mw(pd, rnd(4));
	note(OP_ALLOC_MW, mw ? 0 : errno);
	if (mw)
		ibv_dealloc_mw(mw);
}

static int cq_channel(void)
{
	int c = rnd(4);

	if (!chance(30))
		return -1;
	if (!chans[c]) {
		chans[c] = ibv_create_comp_channel(ctx);
		if (!chans[c])
			return -1;
		fcntl(chans[c]->fd, F_SETFL, fcntl(chans[c]->fd, F_GETFL) | O_NONBLOCK);
	}
	return c;
}

static void op_create_cq(int ex)
{
	int k = FREE_SLOT(cqs), ch;
	int cqe = chance(70) ? 1 + (int)rnd(256) : (int)interesting32();

	if (k < 0)
		return;
	ch = cq_channel();
	cqs[k].ch = ch;
	cqs[k].cqx = NULL;
	if (!ex) {
		cqs[k].cq = ibv_create_cq(ctx, cqe, NULL, ch < 0 ? NULL : chans[ch],
					  chance(80) ? 0 : (int)interesting32());
		note(OP_CREATE_CQ, cqs[k].cq ? 0 : errno);
	} else {
		struct ibv_cq_init_attr_ex a = {
			.cqe = cqe,
			.channel = ch < 0 ? NULL : chans[ch],
			.comp_vector = chance(80) ? 0 : interesting32(),
			.wc_flags = chance(50) ? IBV_WC_STANDARD_FLAGS : rnd64() & 0x3ff,
			.comp_mask = chance(70) ? 0 : rnd(8),
			.flags = chance(80) ? 0 : rnd(4),
		};
		cqs[k].cqx = ibv_create_cq_ex(ctx, &a);
		cqs[k].cq = cqs[k].cqx ? ibv_cq_ex_to_cq(cqs[k].cqx) : NULL;
		note(OP_CREATE_CQ_EX, cqs[k].cq ? 0 : errno);
	}
}

static void op_resize_cq(void)
{
	int k = PICK(cqs);

	if (k < 0)
		return;
	note(OP_RESIZE_CQ, ibv_resize_cq(cqs[k].cq, chance(60) ? 1 + (int)rnd(512) : (int)interesting32()));
}

/* Acks what is pending on the CQ's channel, then destroys it. */
static int destroy_cq(int k)
{
	int ret;

	drain_events();
	ret = ibv_destroy_cq(cqs[k].cq);
	if (ret == 0)
		dead_cqs[ndead++ % 64] = (uintptr_t)cqs[k].cq;
	if (ret != EBUSY)
		cqs[k].cq = NULL;
	return ret;
}

static void op_destroy_cq(void)
{
	int k = PICK(cqs);

	if (k >= 0)
		note(OP_DESTROY_CQ, destroy_cq(k));
}

static void op_poll_cq(void)
{
	struct ibv_wc wc[64];
	int k = PICK(cqs), n;

	if (k < 0)
		return;
	n = ibv_poll_cq(cqs[k].cq, rnd(65), wc);
	note(OP_POLL_CQ, n < 0 ? EIO : 0);
}

static void op_poll_cq_ex(void)
{
	struct ibv_poll_cq_attr a = { .comp_mask = chance(90) ? 0 : rnd(4) };
	int k = PICK(cqs), ret, n = 0;

	if (k < 0 || !cqs[k].cqx)
		return;
	ret = ibv_start_poll(cqs[k].cqx, &a);
	if (ret == 0) {
		do {
			(void)ibv_wc_read_opcode(cqs[k].cqx);
			if (cqs[k].cqx->read_byte_len) /* only with IBV_WC_EX_WITH_BYTE_LEN */
				(void)ibv_wc_read_byte_len(cqs[k].cqx);
		} while (++n < 64 && ibv_next_poll(cqs[k].cqx) == 0);
		ibv_end_poll(cqs[k].cqx);
	}
	note(OP_POLL_CQ_EX, ret == ENOENT ? 0 : ret);
}

static void op_req_notify(void)
{
	int k = PICK(cqs);

	if (k >= 0)
		note(OP_REQ_NOTIFY, ibv_req_notify_cq(cqs[k].cq, rnd(2)));
}

static void random_caps(struct ibv_qp_cap *c)
{
	c->max_send_wr = chance(70) ? rnd(128) : interesting32();
	c->max_recv_wr = chance(70) ? rnd(128) : interesting32();
	c->max_send_sge = chance(70) ? rnd(8) : interesting32();
	c->max_recv_sge = chance(70) ? rnd(8) : interesting32();
	c->max_inline_data = chance(70) ? rnd(256) : interesting32();
}

static void op_create_qp(void)
{
	static const enum ibv_qp_type types[] = { IBV_QPT_RC, IBV_QPT_UC, IBV_QPT_UD, IBV_QPT_RAW_PACKET, 0, 1, 5, 7 };
	struct ibv_qp_init_attr a = { 0 };
	struct ibv_pd *pd = any_pd();
	int k = FREE_SLOT(qps), s;

	a.send_cq = any_cq();
	a.recv_cq = chance(70) ? a.send_cq : any_cq();
	if (!pd || k < 0 || !a.send_cq || !a.recv_cq)
		return;
	s = PICK(srqs);
	if (s >= 0 && chance(30))
		a.srq = srqs[s];
	a.qp_type = chance(75) ? IBV_QPT_RC : types[rnd(8)];
	a.sq_sig_all = rnd(2);
	random_caps(&a.cap);
	a.qp_context = (void *)(uintptr_t)rnd64();
	qps[k].qp = ibv_create_qp(pd, &a);
	qps[k].conn = -1;
	note(OP_CREATE_QP, qps[k].qp ? 0 : errno);
}

static void random_qp_attr(struct ibv_qp_attr *a, int *mask)
{
	for (size_t i = 0; i < sizeof(*a); i += 8) {
		uint64_t v = rnd64();
		memcpy((char *)a + i, &v, sizeof(*a) - i < 8 ? sizeof(*a) - i : 8);
	}
	a->qp_state = rnd(chance(90) ? 7 : 256);
	a->cur_qp_state = rnd(7);
	a->qp_access_flags = chance(70) ? rnd(16) : interesting32();
	a->max_rd_atomic = chance(70) ? rnd(40) : rnd(256);
	a->max_dest_rd_atomic = chance(70) ? rnd(40) : rnd(256);
	a->path_mtu = 1 + rnd(6);
	a->port_num = chance(80) ? 1 : rnd(4);
	random_caps(&a->cap);
	switch (rnd(5)) {
	case 0: *mask = IBV_QP_STATE; break;
	case 1: *mask = IBV_QP_STATE | IBV_QP_ACCESS_FLAGS | IBV_QP_PKEY_INDEX | IBV_QP_PORT; break;
	case 2: *mask = (int)(rnd64() & 0x1fffff); break;
	case 3: *mask = 1 << rnd(26); break;
	default: *mask = (int)(rnd64() & 0x3ffffff) | IBV_QP_STATE;
	}
}

static void op_modify_qp(void)
{
	struct ibv_qp_attr a;
	int k = PICK(qps), mask;

	if (k < 0 || (qps[k].conn >= 0 && chance(80)))
		return; /* a connection's QP: now and then */
	random_qp_attr(&a, &mask);
	/* A connection's QP is torn down through rdma_cm; moving it to
	 * error (or to anything) is fair. */
	vlog("modify_qp %u state %d mask 0x%x\n", qps[k].qp->qp_num, a.qp_state, mask);
	note(OP_MODIFY_QP, ibv_modify_qp(qps[k].qp, &a, mask));
}

static void op_query_qp(void)
{
	struct ibv_qp_init_attr init;
	struct ibv_qp_attr a;
	int k = PICK(qps);

	if (k >= 0)
	{
		static const int masks[] = { IBV_QP_STATE, IBV_QP_CAP, IBV_QP_STATE | IBV_QP_CAP | IBV_QP_ACCESS_FLAGS,
					     IBV_QP_STATE | IBV_QP_MAX_QP_RD_ATOMIC | IBV_QP_MAX_DEST_RD_ATOMIC, -1 };
		int mask = chance(80) ? masks[rnd(5)] : (int)rnd64();

		note(OP_QUERY_QP, ibv_query_qp(qps[k].qp, &a, mask, &init));
	}
}

static int destroy_qp(int k)
{
	int ret;

	drain_events();
	ret = ibv_destroy_qp(qps[k].qp);
	if (ret != EBUSY)
		qps[k].qp = NULL;
	return ret;
}

static void op_destroy_qp(void)
{
	int k = PICK(qps);

	if (k >= 0 && qps[k].conn < 0)
		note(OP_DESTROY_QP, destroy_qp(k));
}

static void op_create_srq(void)
{
	struct ibv_srq_init_attr a = { 0 };
	struct ibv_pd *pd = any_pd();
	int k = FREE_SLOT(srqs);

	if (!pd || k < 0)
		return;
	a.attr.max_wr = chance(70) ? rnd(256) : interesting32();
	a.attr.max_sge = chance(70) ? rnd(8) : interesting32();
	a.attr.srq_limit = chance(70) ? rnd(64) : interesting32();
	srqs[k] = ibv_create_srq(pd, &a);
	note(OP_CREATE_SRQ, srqs[k] ? 0 : errno);
}

static void op_modify_srq(void)
{
	struct ibv_srq_attr a = { .max_wr = interesting32(), .max_sge = interesting32(),
				  .srq_limit = chance(60) ? rnd(64) : interesting32() };
	int k = PICK(srqs);

	if (k >= 0)
		note(OP_MODIFY_SRQ, ibv_modify_srq(srqs[k], &a, chance(80) ? (int)rnd(4) : (int)rnd64()));
}

static void op_query_srq(void)
{
	struct ibv_srq_attr a;
	int k = PICK(srqs);

	if (k >= 0)
		note(OP_QUERY_SRQ, ibv_query_srq(srqs[k], &a));
}

static int destroy_srq(int k)
{
	int ret;

	drain_events();
	ret = ibv_destroy_srq(srqs[k]);
	if (ret != EBUSY)
		srqs[k] = NULL;
	return ret;
}

static void op_destroy_srq(void)
{
	int k = PICK(srqs);

	if (k >= 0)
		note(OP_DESTROY_SRQ, destroy_srq(k));
}

static struct ibv_sge sgebuf[4][MAXSGE];

static int random_nsge(void)
{
	return chance(80) ? (int)rnd(8) : (int)rnd(MAXSGE + 1);
}

static void random_recv_wrs(struct ibv_recv_wr *wr, int n)
{
	for (int i = 0; i < n; i++) {
		wr[i].wr_id = rnd64();
		wr[i].next = i + 1 < n ? &wr[i + 1] : NULL;
		wr[i].num_sge = random_nsge();
		wr[i].sg_list = sgebuf[i];
		random_sges(sgebuf[i], wr[i].num_sge);
		/* Half the time a well-formed WR: one or two SGEs in MRs. */
		if (chance(50) && valid_sge(&sgebuf[i][0])) {
			wr[i].num_sge = 1;
			if (chance(30) && valid_sge(&sgebuf[i][1]))
				wr[i].num_sge = 2;
		}
	}
}

/* A QP to post on: a connected one more often than not. */
static int post_qp(void)
{
	int k = PICK(qps);

	if (cm_mode && chance(60))
		for (int c = rnd(MAXC), i = 0; i < MAXC; i++, c = (c + 1) % MAXC)
			if (conns[c].cli && conns[c].cli_qp >= 0 && qps[conns[c].cli_qp].qp)
				return conns[c].cli_qp;
	return k;
}

/*
 * The shared rings (rsiw's ABI 2): what a process can write into its own
 * send and receive rings, through the provider's direct verbs: random
 * entries (or plausible ones with random keys and sizes) in random
 * slots, a producer index moved by one, by many, to nonsense or back, the
 * kernel-owned words scribbled over, then the doorbell. The kernel must
 * fail only this QP.
 */
static int (*dv_query_qp)(struct ibv_qp *, struct rsiwdv_qp *);
static int (*dv_sq_doorbell)(struct ibv_qp *);

static void find_dv(void)
{
	void *lib = rsiw_dv_lib();
	if (!lib)
		return;
	dv_query_qp = (int (*)(struct ibv_qp *, struct rsiwdv_qp *))dlsym(lib, "rsiwdv_query_qp");
	dv_sq_doorbell = (int (*)(struct ibv_qp *))dlsym(lib, "rsiwdv_sq_doorbell");
}

static void op_ring(void)
{
	static const uint8_t opcodes[] = { 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 14, 15, 0x40, 0x41, 0xff };
	struct rsiwdv_qp dv;
	struct rsiw_ring_ctl *ctl;
	uint8_t *ring, *e;
	uint32_t entries, size, idx, p;
	int k = post_qp(), sq, ret;
	size_t i;

	if (k < 0 || !dv_query_qp || dv_query_qp(qps[k].qp, &dv)) {
		note(OP_RING, EOPNOTSUPP);
		return;
	}
	sq = !dv.rq_ring || chance(65);
	ring = sq ? dv.sq_ring : dv.rq_ring;
	entries = sq ? dv.sq_entries : dv.rq_entries;
	size = sq ? sizeof(struct rsiw_sqe) : sizeof(struct rsiw_rqe);
	ctl = (struct rsiw_ring_ctl *)ring;
	idx = chance(70) ? __atomic_load_n(&ctl->producer, __ATOMIC_RELAXED) : rnd64();
	e = ring + RSIW_RING_HDR + (size_t)(idx & (entries - 1)) * size;
	for (i = 0; i < size; i++)
		e[i] = (uint8_t)rnd(256);
	if (chance(60)) {
		/* Plausible: a real opcode, few SGEs, keys of this process. */
		if (sq) {
			struct rsiw_sqe *s = (struct rsiw_sqe *)e;

			s->opcode = opcodes[rnd(sizeof(opcodes))];
			s->flags &= 0x1f;
			s->num_sge = (uint8_t)rnd(8);
			s->length = chance(50) ? rnd(256) : interesting32();
			s->rkey = any_key(1);
			s->remote_addr = any_addr(1);
			for (i = 0; i < RSIW_MAX_SGE; i++) {
				s->sge[i].lkey = any_key(0);
				s->sge[i].addr = any_addr(0);
				s->sge[i].length = chance(70) ? rnd(8192) : interesting32();
			}
		} else {
			struct rsiw_rqe *r = (struct rsiw_rqe *)e;

			r->num_sge = rnd(8);
			for (i = 0; i < RSIW_MAX_SGE; i++) {
				r->sge[i].lkey = any_key(0);
				r->sge[i].addr = any_addr(0);
				r->sge[i].length = chance(70) ? rnd(8192) : interesting32();
			}
		}
	}
	p = __atomic_load_n(&ctl->producer, __ATOMIC_RELAXED);
	switch (rnd(5)) {
	case 0: p = idx + 1; break;
	case 1: p += 1 + rnd(entries); break;
	case 2: p = interesting32(); break;
	case 3: p = __atomic_load_n(&ctl->consumer, __ATOMIC_RELAXED) + rnd(3); break;
	default: p += 1; break;
	}
	__atomic_store_n(&ctl->producer, p, __ATOMIC_RELEASE);
	/* Words only the kernel writes: whatever the process puts there. */
	if (chance(15))
		ctl->consumer = (uint32_t)rnd64();
	if (chance(15))
		ctl->flags = (uint32_t)rnd64();
	ret = sq ? dv_sq_doorbell(qps[k].qp) : 0;
	vlog("ring qp %d %s idx %u producer %u: %d", k, sq ? "sq" : "rq", idx, p, ret);
	note(OP_RING, ret);
}

static void op_post_recv(void)
{
	struct ibv_recv_wr wr[4], *bad;
	int k = post_qp(), n = 1 + rnd(4);

	if (k < 0)
		return;
	random_recv_wrs(wr, n);
	note(OP_POST_RECV, ibv_post_recv(qps[k].qp, wr, &bad));
}

static void op_post_srq_recv(void)
{
	struct ibv_recv_wr wr[4], *bad;
	int k = PICK(srqs), n = 1 + rnd(4);

	if (k < 0)
		return;
	random_recv_wrs(wr, n);
	note(OP_POST_SRQ_RECV, ibv_post_srq_recv(srqs[k], wr, &bad));
}

static void op_post_send(void)
{
	static const int opcodes[] = {
		IBV_WR_RDMA_WRITE, IBV_WR_RDMA_WRITE_WITH_IMM, IBV_WR_SEND, IBV_WR_SEND_WITH_IMM,
		IBV_WR_RDMA_READ, IBV_WR_ATOMIC_CMP_AND_SWP, IBV_WR_ATOMIC_FETCH_AND_ADD,
		IBV_WR_LOCAL_INV, IBV_WR_BIND_MW, IBV_WR_SEND_WITH_INV, IBV_WR_TSO, IBV_WR_DRIVER1,
	};
	static const int good[] = {
		IBV_WR_SEND, IBV_WR_SEND_WITH_IMM, IBV_WR_RDMA_WRITE, IBV_WR_RDMA_WRITE_WITH_IMM,
		IBV_WR_RDMA_READ, IBV_WR_ATOMIC_CMP_AND_SWP, IBV_WR_ATOMIC_FETCH_AND_ADD, IBV_WR_SEND_WITH_INV,
	};
	struct ibv_send_wr wr[4], *bad;
	int k = post_qp(), wellformed = chance(50), n = wellformed ? 1 + rnd(2) : 1 + rnd(4), ret;

	if (k < 0)
		return;
	memset(wr, 0, sizeof(wr));
	for (int i = 0; i < n; i++) {
		struct ibv_send_wr *w = &wr[i];

		w->wr_id = rnd64();
		w->next = i + 1 < n ? &wr[i + 1] : NULL;
		w->opcode = (enum ibv_wr_opcode)(chance(85) ? (uint32_t)opcodes[rnd(12)] : interesting32());
		w->num_sge = random_nsge();
		w->sg_list = sgebuf[i];
		random_sges(sgebuf[i], w->num_sge);
		w->send_flags = chance(70) ? rnd(32) : interesting32();
		w->imm_data = (uint32_t)rnd64();
		switch (w->opcode) {
		case IBV_WR_ATOMIC_CMP_AND_SWP:
		case IBV_WR_ATOMIC_FETCH_AND_ADD:
			w->wr.atomic.remote_addr = any_addr(1) & (chance(80) ? ~7ULL : ~0ULL);
			w->wr.atomic.rkey = any_key(1);
			w->wr.atomic.compare_add = rnd64();
			w->wr.atomic.swap = rnd64();
			break;
		default:
			w->wr.rdma.remote_addr = any_addr(1);
			w->wr.rdma.rkey = any_key(1);
		}
		if (wellformed && valid_sge(&sgebuf[i][0])) {
			/* A well-formed WR: a known opcode, one SGE in an MR,
			 * the server's buffer (or an MR) as the target. */
			w->opcode = good[rnd(8)];
			w->num_sge = 1;
			w->send_flags = IBV_SEND_SIGNALED * rnd(2) | IBV_SEND_SOLICITED * chance(20) |
					IBV_SEND_FENCE * chance(10);
			if (w->opcode != IBV_WR_RDMA_READ && sgebuf[i][0].length <= 64 && chance(30))
				w->send_flags |= IBV_SEND_INLINE;
			if (w->opcode == IBV_WR_ATOMIC_CMP_AND_SWP || w->opcode == IBV_WR_ATOMIC_FETCH_AND_ADD) {
				sgebuf[i][0].length = 8;
				w->wr.atomic.rkey = smr && chance(80) ? smr->rkey : any_key(1);
				w->wr.atomic.remote_addr = smr && chance(80) ? ((uintptr_t)sbuf + rnd(SBUF - 8)) & ~7ULL
									      : any_addr(1);
			} else {
				w->wr.rdma.rkey = smr && chance(80) ? smr->rkey : any_key(1);
				w->wr.rdma.remote_addr = smr && chance(80) ? (uintptr_t)sbuf + rnd(SBUF - 8192)
									   : any_addr(1);
			}
			w->imm_data = (uint32_t)rnd64();
		}
		/* Inline data is read by the provider, in this process (rsiw's
		 * shared rings, as any provider with rings): a bad pointer there
		 * is this process's own fault, as with memcpy. Inline sources
		 * are readable (their lengths stay random). */
		if (w->send_flags & IBV_SEND_INLINE)
			for (int j = 0; j < MAXSGE; j++)
				sgebuf[i][j].addr = (uintptr_t)arena + rnd(ARENA - 256);
		/* libibverbs reads the AH of a UD QP's WR: give it ours. */
		if (qps[k].qp->qp_type == IBV_QPT_UD) {
			w->wr.ud.ah = &dummy_ah;
			dummy_ah.handle = interesting32();
		}
	}
	vlog("post_send qp %u op %d n %d\n", qps[k].qp->qp_num, wr[0].opcode, n);
	/* Posts on a connected QP counted apart: there they go on the wire. */
	ret = ibv_post_send(qps[k].qp, wr, &bad);
	note(qps[k].conn >= 0 ? OP_POST_SEND_CONN : OP_POST_SEND, ret);
	if (verbose && ret) {
		struct ibv_qp_init_attr init;
		struct ibv_qp_attr qa;

		ibv_query_qp(qps[k].qp, &qa, IBV_QP_STATE, &init);
		vlog("  -> %s (qp state %d, bad wr %ld: op %d num_sge %d flags 0x%x)\n", strerror(ret), qa.qp_state,
		     (long)(bad - wr), bad->opcode, bad->num_sge, bad->send_flags);
	}
}

static void op_query(void)
{
	struct ibv_device_attr_ex ax;
	struct ibv_query_device_ex_input in = { .comp_mask = chance(80) ? 0 : (uint32_t)rnd64() };
	struct ibv_port_attr pa;
	union ibv_gid gid;
	uint16_t pkey;
	int ret;

	switch (rnd(5)) {
	case 0: ret = ibv_query_device(ctx, &dattr); break;
	case 1: ret = ibv_query_device_ex(ctx, &in, &ax); break;
	case 2: ret = ibv_query_port(ctx, chance(80) ? 1 : rnd(256), &pa); break;
	case 3: ret = ibv_query_gid(ctx, chance(80) ? 1 : rnd(4), chance(50) ? 0 : (int)interesting32(), &gid); break;
	default: ret = ibv_query_pkey(ctx, chance(80) ? 1 : rnd(4), chance(50) ? 0 : (int)interesting32(), &pkey);
	}
	note(OP_QUERY, ret < 0 ? (errno ? errno : EINVAL) : ret);
}

/* ---- raw uverbs write() commands ---- */

static uint8_t *scratch; /* where responses go */
#define SCRATCH (1u << 20)

static uint32_t live_handle(void)
{
	int k;

	switch (rnd(6)) {
	case 0: k = PICK(pds); if (k >= 0) return pds[k]->handle; break;
	case 1: k = PICK(cqs); if (k >= 0) return cqs[k].cq->handle; break;
	case 2: k = PICK(qps); if (k >= 0) return qps[k].qp->handle; break;
	case 3: k = PICK(srqs); if (k >= 0) return srqs[k]->handle; break;
	case 4: k = PICK(mrs); if (k >= 0) return chance(50) ? mrs[k]->handle : mrs[k]->lkey; break;
	}
	if (nraw && chance(50))
		return raw_handles[rnd(nraw)];
	return chance(70) ? rnd(32) : interesting32();
}

/* A handle no object libibverbs tracks has: a raw one, or none. */
static uint32_t raw_or_dead_handle(int *slot)
{
	*slot = -1;
	if (nraw && chance(70)) {
		*slot = rnd(nraw);
		return raw_handles[*slot];
	}
	return (1u << 24) + rnd(1u << 20);
}

static void raw_remember(uint32_t h)
{
	if (nraw < 64)
		raw_handles[nraw++] = h;
}

static uint32_t h_pd(void) { int k = PICK(pds); return k >= 0 && chance(85) ? pds[k]->handle : live_handle(); }
static uint32_t h_cq(void) { int k = PICK(cqs); return k >= 0 && chance(85) ? cqs[k].cq->handle : live_handle(); }
static uint32_t h_qp(void)
{
	int k = post_qp();
	return k >= 0 && chance(85) ? qps[k].qp->handle : live_handle();
}
static uint32_t h_srq(void) { int k = PICK(srqs); return k >= 0 && chance(85) ? srqs[k]->handle : live_handle(); }

/* post_wrs B OFF SEND: a well-formed WR list after a post command's header
 * at OFF (wr_count, sge_count, wqe_size filled in); returns the length. */
static uint32_t raw_wrs(uint8_t *b, uint32_t off, int send)
{
	uint32_t nwr = 1 + rnd(3), nsge = 0, wqe = send ? sizeof(struct ib_uverbs_send_wr) : sizeof(struct ib_uverbs_recv_wr);
	uint32_t *hdr = (uint32_t *)(b + off - 12), i;

	if (chance(10))
		wqe += 8 * rnd(4); /* a larger WQE than the kernel's: allowed */
	for (i = 0; i < nwr; i++) {
		uint8_t *w = b + off + i * wqe;
		uint32_t n = chance(80) ? rnd(3) : rnd(8);

		if (send) {
			struct ib_uverbs_send_wr *s = (void *)w;

			s->wr_id = rnd64();
			s->num_sge = n;
			s->opcode = chance(85) ? rnd(12) : interesting32();
			s->send_flags = chance(80) ? rnd(16) : interesting32();
			s->ex.imm_data = (uint32_t)rnd64();
			s->wr.atomic.remote_addr = any_addr(1);
			s->wr.atomic.compare_add = rnd64();
			s->wr.atomic.swap = rnd64();
			if (s->opcode == IB_UVERBS_WR_ATOMIC_CMP_AND_SWP || s->opcode == IB_UVERBS_WR_ATOMIC_FETCH_AND_ADD)
				s->wr.atomic.rkey = any_key(1);
			else
				s->wr.rdma.rkey = any_key(1);
		} else {
			struct ib_uverbs_recv_wr *r = (void *)w;

			r->wr_id = rnd64();
			r->num_sge = n;
		}
		nsge += n;
	}
	if (chance(10))
		nsge = chance(50) ? nsge + 1 + rnd(4) : (nsge ? nsge - 1 : 0); /* disagree */
	for (i = 0; i < nsge && off + nwr * wqe + (i + 1) * sizeof(struct ib_uverbs_sge) <= 1600; i++) {
		struct ib_uverbs_sge *g = (void *)(b + off + nwr * wqe + i * sizeof(*g));
		struct ibv_sge sg;

		if (!(chance(70) && valid_sge(&sg)))
			random_sges(&sg, 1);
		g->addr = sg.addr;
		g->length = sg.length;
		g->lkey = sg.lkey;
	}
	hdr[0] = chance(90) ? nwr : interesting32();
	hdr[1] = chance(90) ? nsge : interesting32();
	hdr[2] = chance(90) ? wqe : interesting32();
	return off + nwr * wqe + i * sizeof(struct ib_uverbs_sge);
}

/* A well-formed legacy command body (after the header) for one of the
 * verbs rsiw implements, with live handles; returns its length. */
static uint32_t raw_template(uint8_t *b, uint32_t *cmdp)
{
	static const uint32_t cmds[] = {
		IB_USER_VERBS_CMD_QUERY_DEVICE, IB_USER_VERBS_CMD_QUERY_PORT, IB_USER_VERBS_CMD_ALLOC_PD,
		IB_USER_VERBS_CMD_DEALLOC_PD, IB_USER_VERBS_CMD_REG_MR, IB_USER_VERBS_CMD_DEREG_MR,
		IB_USER_VERBS_CMD_CREATE_CQ, IB_USER_VERBS_CMD_RESIZE_CQ, IB_USER_VERBS_CMD_DESTROY_CQ,
		IB_USER_VERBS_CMD_POLL_CQ, IB_USER_VERBS_CMD_REQ_NOTIFY_CQ, IB_USER_VERBS_CMD_CREATE_QP,
		IB_USER_VERBS_CMD_QUERY_QP, IB_USER_VERBS_CMD_MODIFY_QP, IB_USER_VERBS_CMD_DESTROY_QP,
		IB_USER_VERBS_CMD_POST_SEND, IB_USER_VERBS_CMD_POST_RECV, IB_USER_VERBS_CMD_CREATE_SRQ,
		IB_USER_VERBS_CMD_MODIFY_SRQ, IB_USER_VERBS_CMD_QUERY_SRQ, IB_USER_VERBS_CMD_DESTROY_SRQ,
		IB_USER_VERBS_CMD_POST_SRQ_RECV, IB_USER_VERBS_CMD_POST_SEND, IB_USER_VERBS_CMD_POST_SEND,
	};
	uint32_t cmd = cmds[rnd(sizeof(cmds) / sizeof(cmds[0]))];
	int slot;

	*cmdp = cmd;
	switch (cmd) {
	case IB_USER_VERBS_CMD_QUERY_DEVICE: case IB_USER_VERBS_CMD_ALLOC_PD:
		return 8;
	case IB_USER_VERBS_CMD_QUERY_PORT: {
		struct ib_uverbs_query_port *c = (void *)b;
		c->port_num = chance(80) ? 1 : rnd(256);
		return sizeof(*c);
	}
	case IB_USER_VERBS_CMD_DEALLOC_PD: {
		struct ib_uverbs_dealloc_pd *c = (void *)b;
		c->pd_handle = h_pd();
		return sizeof(*c);
	}
	case IB_USER_VERBS_CMD_REG_MR: {
		struct ib_uverbs_reg_mr *c = (void *)b;
		void *addr;
		size_t len;
		int access;

		mr_args(&addr, &len, &access);
		c->start = (uintptr_t)addr;
		c->length = len;
		c->hca_va = chance(70) ? c->start : rnd64();
		c->pd_handle = h_pd();
		c->access_flags = access;
		return sizeof(*c);
	}
	case IB_USER_VERBS_CMD_DEREG_MR: {
		struct ib_uverbs_dereg_mr *c = (void *)b;
		int k = PICK(mrs);
		c->mr_handle = k >= 0 && chance(50) ? mrs[k]->handle : live_handle();
		return sizeof(*c);
	}
	case IB_USER_VERBS_CMD_CREATE_CQ: {
		struct ib_uverbs_create_cq *c = (void *)b;
		c->user_handle = rnd64();
		c->cqe = chance(70) ? 1 + rnd(256) : interesting32();
		c->comp_vector = chance(80) ? 0 : interesting32();
		/* Never one of our channels: its events would name a random
		 * user_handle (see drain_events). */
		c->comp_channel = chance(70) ? -1 : 1000 + (int)rnd(64);
		return sizeof(*c);
	}
	case IB_USER_VERBS_CMD_RESIZE_CQ: {
		struct ib_uverbs_resize_cq *c = (void *)b;
		c->cq_handle = nraw && chance(30) ? raw_handles[rnd(nraw)] : h_cq();
		c->cqe = chance(70) ? 1 + rnd(256) : interesting32();
		return sizeof(*c);
	}
	case IB_USER_VERBS_CMD_POLL_CQ: {
		struct ib_uverbs_poll_cq *c = (void *)b;
		c->cq_handle = h_cq();
		c->ne = chance(80) ? rnd(64) : interesting32();
		return sizeof(*c);
	}
	case IB_USER_VERBS_CMD_REQ_NOTIFY_CQ: {
		struct ib_uverbs_req_notify_cq *c = (void *)b;
		c->cq_handle = h_cq();
		c->solicited_only = chance(90) ? rnd(2) : interesting32();
		return sizeof(*c);
	}
	case IB_USER_VERBS_CMD_CREATE_QP: {
		struct ib_uverbs_create_qp *c = (void *)b;
		c->user_handle = rnd64();
		c->pd_handle = h_pd();
		c->send_cq_handle = h_cq();
		c->recv_cq_handle = chance(70) ? c->send_cq_handle : h_cq();
		c->is_srq = chance(20);
		c->srq_handle = c->is_srq ? h_srq() : 0;
		c->max_send_wr = chance(70) ? rnd(128) : interesting32();
		c->max_recv_wr = chance(70) ? rnd(128) : interesting32();
		c->max_send_sge = chance(70) ? rnd(8) : interesting32();
		c->max_recv_sge = chance(70) ? rnd(8) : interesting32();
		c->max_inline_data = chance(70) ? rnd(256) : interesting32();
		c->sq_sig_all = rnd(2);
		c->qp_type = chance(80) ? IB_UVERBS_QPT_RC : rnd(256);
		return sizeof(*c);
	}
	case IB_USER_VERBS_CMD_QUERY_QP: {
		struct ib_uverbs_query_qp *c = (void *)b;
		c->qp_handle = h_qp();
		c->attr_mask = chance(50) ? rnd(1 << 21) : interesting32();
		return sizeof(*c);
	}
	case IB_USER_VERBS_CMD_MODIFY_QP: {
		struct ib_uverbs_modify_qp *c = (void *)b;
		struct ibv_qp_attr a;
		int mask;

		random_qp_attr(&a, &mask);
		for (size_t i = 0; i < sizeof(c->dest) * 2; i++)
			((uint8_t *)c)[i] = chance(70) ? 0 : (uint8_t)rnd64();
		c->qp_handle = h_qp();
		c->attr_mask = mask;
		c->qp_state = a.qp_state;
		c->cur_qp_state = a.cur_qp_state;
		c->qp_access_flags = a.qp_access_flags;
		c->max_rd_atomic = a.max_rd_atomic;
		c->max_dest_rd_atomic = a.max_dest_rd_atomic;
		c->path_mtu = a.path_mtu;
		c->port_num = a.port_num;
		c->timeout = rnd(32);
		c->retry_cnt = rnd(8);
		c->rnr_retry = rnd(8);
		c->min_rnr_timer = rnd(32);
		c->sq_psn = (uint32_t)rnd64();
		c->rq_psn = (uint32_t)rnd64();
		c->dest_qp_num = interesting32();
		return sizeof(*c);
	}
	case IB_USER_VERBS_CMD_DESTROY_CQ: case IB_USER_VERBS_CMD_DESTROY_QP: case IB_USER_VERBS_CMD_DESTROY_SRQ:
		/* Set by the caller (a raw handle only). */
		(void)slot;
		return 16;
	case IB_USER_VERBS_CMD_POST_SEND: {
		struct ib_uverbs_post_send *c = (void *)b;
		c->qp_handle = h_qp();
		return raw_wrs(b, sizeof(*c), 1);
	}
	case IB_USER_VERBS_CMD_POST_RECV: {
		struct ib_uverbs_post_recv *c = (void *)b;
		c->qp_handle = h_qp();
		return raw_wrs(b, sizeof(*c), 0);
	}
	case IB_USER_VERBS_CMD_POST_SRQ_RECV: {
		struct ib_uverbs_post_srq_recv *c = (void *)b;
		c->srq_handle = h_srq();
		return raw_wrs(b, sizeof(*c), 0);
	}
	case IB_USER_VERBS_CMD_CREATE_SRQ: {
		struct ib_uverbs_create_srq *c = (void *)b;
		c->user_handle = rnd64();
		c->pd_handle = h_pd();
		c->max_wr = chance(70) ? rnd(256) : interesting32();
		c->max_sge = chance(70) ? rnd(8) : interesting32();
		c->srq_limit = chance(70) ? rnd(64) : interesting32();
		return sizeof(*c);
	}
	case IB_USER_VERBS_CMD_MODIFY_SRQ: {
		struct ib_uverbs_modify_srq *c = (void *)b;
		c->srq_handle = h_srq();
		c->attr_mask = chance(80) ? rnd(4) : interesting32();
		c->max_wr = interesting32();
		c->srq_limit = chance(60) ? rnd(64) : interesting32();
		return sizeof(*c);
	}
	case IB_USER_VERBS_CMD_QUERY_SRQ: {
		struct ib_uverbs_query_srq *c = (void *)b;
		c->srq_handle = h_srq();
		return sizeof(*c);
	}
	}
	return 0;
}

static void op_raw(void)
{
	static const uint32_t sizes[] = { 0, 4, 8, 12, 16, 20, 24, 32, 40, 48, 56, 64, 72, 88, 96, 104, 112, 128, 144, 256 };
	uint8_t buf[2048] __attribute__((aligned(8)));
	struct ib_uverbs_cmd_hdr *h = (void *)buf;
	uint32_t cmd, len, ex, off, i;
	int slot = -1, ret, tmpl, resp_scratch = 0;
	ssize_t w;

	ex = chance(15);
	if (ex) {
		static const uint32_t exc[] = { 1, 2, 3, 4, 50, 51, 52, 53, 54, 55, 56, 57, 58 };
		cmd = chance(90) ? exc[rnd(13)] : rnd(256);
	} else {
		cmd = chance(95) ? rnd(IB_USER_VERBS_CMD_OPEN_QP + 2) : rnd(256);
	}
	len = chance(70) ? sizes[rnd(20)] : rnd(1024);
	if (chance(80))
		len &= ~3u;
	for (i = 0; i < sizeof(buf); i += 8) {
		uint64_t v = chance(40) ? 0 : rnd64();
		memcpy(buf + i, &v, 8);
	}
	off = sizeof(*h);
	/* Most of the time a well-formed struct of a verb rsiw implements,
	 * then a few bytes flipped, or cut short, or with bytes added. */
	tmpl = chance(65);
	if (tmpl) {
		ex = 0;
		memset(buf + off, 0, sizeof(buf) - off);
		len = raw_template(buf + off, &cmd);
		if (chance(40))
			for (int f = 1 + rnd(4); f > 0; f--)
				buf[off + 8 + rnd(len > 8 ? len - 8 : 1)] ^= (uint8_t)(1 + rnd(255));
		if (chance(10))
			len = rnd(len + 1);
		else if (chance(10))
			len += rnd(64);
		if (chance(80))
			len &= ~3u;
	}
	if (ex) {
		struct ib_uverbs_ex_cmd_hdr *x = (void *)(buf + off);

		x->response = chance(90) ? (uintptr_t)scratch : interesting64();
		resp_scratch = x->response == (uintptr_t)scratch;
		x->provider_in_words = chance(80) ? 0 : rnd(64);
		x->provider_out_words = chance(80) ? 0 : rnd(64);
		x->cmd_hdr_reserved = chance(90) ? 0 : interesting32();
		off += sizeof(*x);
	} else if (chance(92) && !(tmpl && (cmd == IB_USER_VERBS_CMD_DEALLOC_PD || cmd == IB_USER_VERBS_CMD_DEREG_MR ||
					    cmd == IB_USER_VERBS_CMD_REQ_NOTIFY_CQ || cmd == IB_USER_VERBS_CMD_MODIFY_QP ||
					    cmd == IB_USER_VERBS_CMD_MODIFY_SRQ))) {
		uint64_t resp = (uintptr_t)scratch;
		if (chance(5))
			resp = interesting64();
		memcpy(buf + off, &resp, 8);
		resp_scratch = resp == (uintptr_t)scratch;
	}
	/* Handles: live ones in random 32-bit slots of the body. */
	for (i = off + 8; !tmpl && i + 4 <= off + len && i + 4 <= sizeof(buf); i += 4)
		if (chance(25)) {
			uint32_t v = live_handle();
			memcpy(buf + i, &v, 4);
		}
	if (!ex && (cmd == IB_USER_VERBS_CMD_DESTROY_CQ || cmd == IB_USER_VERBS_CMD_DESTROY_QP ||
		    cmd == IB_USER_VERBS_CMD_DESTROY_SRQ)) {
		uint32_t v = raw_or_dead_handle(&slot);

		if (len < 16)
			len = 16;
		memcpy(buf + off + 8, &v, 4);
	}
	if (off + len > sizeof(buf))
		len = sizeof(buf) - off;
	h->command = cmd | (ex ? IB_USER_VERBS_CMD_FLAG_EXTENDED : 0);
	h->in_words = chance(85) ? (off + len) / 4 : (uint16_t)interesting32();
	h->out_words = chance(80) ? 4 + rnd(64) : (uint16_t)interesting32();
	if (ex) {
		/* The extended header counts words of 8 bytes past the headers. */
		h->in_words = chance(85) ? len / 8 : (uint16_t)interesting32();
		h->out_words = chance(80) ? rnd(32) : (uint16_t)interesting32();
	}
	memset(scratch, 0, 256);
	vlog("raw cmd 0x%x len %u in %u out %u\n", h->command, off + len, h->in_words, h->out_words);
	w = write(ctx->cmd_fd, buf, off + len);
	ret = w < 0 ? errno : 0;
	note(OP_RAW, ret);
	/* A raw destroy forgets its handle whatever it returned: the kernel
	 * destroys the object before it writes the response, so a bad
	 * response pointer gives EFAULT for an object already gone. Its
	 * handle number is then free, the next object libibverbs creates
	 * may get it, and a second raw destroy of the remembered number
	 * would destroy that one behind libibverbs (a CQ's later
	 * ibv_destroy_cq then waits forever for events of another CQ). An
	 * object kept alive by a failed destroy is cleaned up at close. */
	if (!ex && slot >= 0 && (cmd == IB_USER_VERBS_CMD_DESTROY_CQ || cmd == IB_USER_VERBS_CMD_DESTROY_QP ||
				 cmd == IB_USER_VERBS_CMD_DESTROY_SRQ)) {
		raw_handles[slot] = raw_handles[--nraw];
	}
	/* What the command created or destroyed: only when the response went
	 * to scratch (otherwise scratch holds zeros, and handle 0 may be an
	 * object libibverbs tracks). */
	if (ret || !resp_scratch)
		return;
	if (!ex) {
		uint32_t got;

		memcpy(&got, scratch, 4);
		switch (cmd) {
		case IB_USER_VERBS_CMD_CREATE_CQ: case IB_USER_VERBS_CMD_CREATE_QP:
		case IB_USER_VERBS_CMD_CREATE_SRQ: case IB_USER_VERBS_CMD_CREATE_XSRQ:
			raw_remember(got);
			break;
		case IB_USER_VERBS_CMD_CREATE_COMP_CHANNEL:
			if (nraw_fds == 16) {
				close(raw_fds[0]);
				memmove(raw_fds, raw_fds + 1, 15 * sizeof(int));
				nraw_fds--;
			}
			if ((int)got > 2)
				raw_fds[nraw_fds++] = got;
			break;
		}
	} else if (cmd == IB_USER_VERBS_EX_CMD_CREATE_CQ || cmd == IB_USER_VERBS_EX_CMD_CREATE_QP) {
		uint32_t got;

		memcpy(&got, scratch, 4);
		raw_remember(got);
	}
}

/* ---- children that exit with their objects alive ---- */

static const char *devname;

static struct ibv_context *open_dev(const char *name)
{
	struct ibv_device **l = ibv_get_device_list(NULL);
	struct ibv_context *c = NULL;

	for (int i = 0; l && l[i]; i++)
		if (!name || !strcmp(ibv_get_device_name(l[i]), name)) {
			c = ibv_open_device(l[i]);
			break;
		}
	if (l)
		ibv_free_device_list(l);
	return c;
}

static void child_body(void)
{
	struct ibv_context *c = open_dev(devname);
	struct ibv_qp_init_attr qa = { .qp_type = IBV_QPT_RC, .cap = { 16, 16, 2, 2, 0 } };
	struct ibv_srq_init_attr sa = { .attr = { 16, 2, 0 } };
	struct ibv_recv_wr wr = { 0 }, *bad;
	struct ibv_sge sg;
	struct ibv_mr *mr;
	struct ibv_pd *pd;
	int i;

	if (!c)
		_exit(2);
	pd = ibv_alloc_pd(c);
	if (!pd)
		_exit(2);
	mr = ibv_reg_mr(pd, arena, 1 << 16, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	qa.send_cq = qa.recv_cq = ibv_create_cq(c, 64, NULL, NULL, 0);
	if (!qa.send_cq)
		_exit(2);
	if (chance(50))
		qa.srq = ibv_create_srq(pd, &sa);
	for (i = 0; i < 1 + (int)rnd(4); i++) {
		struct ibv_qp *qp = ibv_create_qp(pd, &qa);

		if (qp && mr) {
			sg = (struct ibv_sge){ (uintptr_t)arena, 64, mr->lkey };
			wr.sg_list = &sg;
			wr.num_sge = 1;
			if (!qa.srq)
				ibv_post_recv(qp, &wr, &bad);
		}
	}
	switch (rnd(3)) {
	case 0: _exit(0);
	case 1: raise(SIGKILL); _exit(0);
	default: ibv_close_device(c); _exit(0);
	}
}

static void op_child(void)
{
	pid_t p = fork();
	int st, i;

	if (p < 0) {
		note(OP_CHILD, errno);
		return;
	}
	if (p == 0)
		child_body();
	for (i = 0; i < 300; i++) {
		if (waitpid(p, &st, WNOHANG) == p)
			break;
		usleep(100000);
	}
	if (i == 300) {
		fprintf(stderr, "uvfuzz: child %d did not exit in 30 s\n", p);
		kill(p, SIGKILL);
		waitpid(p, &st, 0);
		note(OP_CHILD, ETIMEDOUT);
		return;
	}
	note(OP_CHILD, WIFEXITED(st) && WEXITSTATUS(st) ? EIO : 0);
}

/* ---- connections (-c) ---- */

static int conn_of_id(struct rdma_cm_id *id)
{
	for (int i = 0; i < MAXC; i++)
		if (conns[i].cli == id || conns[i].srv == id)
			return i;
	return -1;
}

static void server_qp_recvs(struct ibv_qp *qp, int n)
{
	for (int i = 0; i < n; i++) {
		struct ibv_sge sg = { (uintptr_t)sbuf + rnd(SBUF / 2), 4096, smr->lkey };
		struct ibv_recv_wr wr = { .sg_list = &sg, .num_sge = 1 }, *bad;

		ibv_post_recv(qp, &wr, &bad);
	}
}

/* Handles one rdma_cm event; returns its type (or -1 when there is none). */
static int cm_event(struct rdma_cm_id **idp)
{
	struct rdma_cm_event *ev;
	int type, c;

	if (rdma_get_cm_event(cm_ch, &ev))
		return -1;
	type = ev->event;
	*idp = ev->id;
	vlog("# cm event %s\n", rdma_event_str(ev->event));
	if (type == RDMA_CM_EVENT_CONNECT_REQUEST) {
		struct ibv_qp_init_attr qa = { .qp_type = IBV_QPT_RC, .cap = { 64, 64, 2, 2, 64 } };
		struct rdma_conn_param p = { .responder_resources = 4, .initiator_depth = 4 };
		struct rdma_cm_id *id = ev->id;

		c = -1;
		for (int i = 0; i < MAXC; i++)
			if (conns[i].cli && !conns[i].srv) {
				c = i;
				break;
			}
		if (!spd) {
			spd = ibv_alloc_pd(id->verbs);
			scq = spd ? ibv_create_cq(id->verbs, 4096, NULL, NULL, 0) : NULL;
			smr = spd ? ibv_reg_mr(spd, sbuf, SBUF, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
					       IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC) : NULL;
		}
		qa.send_cq = qa.recv_cq = scq;
		if (c < 0 || !smr || id->verbs != spd->context || rdma_create_qp(id, spd, &qa)) {
			rdma_reject(id, NULL, 0);
			rdma_ack_cm_event(ev);
			rdma_destroy_id(id);
			return type;
		}
		conns[c].srv = id;
		server_qp_recvs(id->qp, 32);
		rdma_accept(id, &p);
	} else if (type == RDMA_CM_EVENT_ESTABLISHED) {
		c = conn_of_id(ev->id);
		if (c >= 0 && ev->id == conns[c].cli)
			conns[c].established = 1;
	}
	rdma_ack_cm_event(ev);
	return type;
}

static void drain_cm(void)
{
	struct rdma_cm_id *id;
	struct ibv_wc wc[32];
	int n;

	if (!cm_mode)
		return;
	while (cm_event(&id) >= 0)
		;
	/* The server side: keep its CQ from overflowing, refill receives. */
	while (scq && (n = ibv_poll_cq(scq, 32, wc)) > 0)
		for (int i = 0; i < n; i++) {
			if (wc[i].opcode & IBV_WC_RECV && wc[i].status == IBV_WC_SUCCESS)
				for (int c = 0; c < MAXC; c++)
					if (conns[c].srv && conns[c].srv->qp && conns[c].srv->qp->qp_num == wc[i].qp_num)
						server_qp_recvs(conns[c].srv->qp, 1);
		}
}

/* Waits up to MS for an event of type WANT on ID (handling others). */
static int cm_wait(struct rdma_cm_id *id, int want, int ms)
{
	struct timespec t0, t;
	struct rdma_cm_id *got;
	int type;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		struct pollfd pfd = { .fd = cm_ch->fd, .events = POLLIN };

		while ((type = cm_event(&got)) >= 0)
			if (got == id && (want < 0 || type == want))
				return type;
		clock_gettime(CLOCK_MONOTONIC, &t);
		if ((t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000 > ms)
			return -1;
		poll(&pfd, 1, 100);
	}
}

static void conn_teardown(int c, int graceful)
{
	struct conn *cn = &conns[c];
	int k = cn->cli_qp;

	if (graceful) {
		if (cn->srv && chance(50))
			rdma_disconnect(cn->srv);
		else
			rdma_disconnect(cn->cli);
		cm_wait(cn->cli, RDMA_CM_EVENT_DISCONNECTED, 500);
	}
	drain_events();
	drain_cm();
	if (k >= 0 && qps[k].qp) {
		rdma_destroy_qp(cn->cli);
		qps[k].qp = NULL;
	}
	rdma_destroy_id(cn->cli);
	if (cn->srv) {
		rdma_destroy_qp(cn->srv);
		rdma_destroy_id(cn->srv);
	}
	memset(cn, 0, sizeof(*cn));
}

static void op_connect(void)
{
	struct rdma_conn_param p = { .responder_resources = 4, .initiator_depth = 4, .retry_count = 3 };
	struct ibv_qp_init_attr qa = { .qp_type = IBV_QPT_RC };
	int c, k = FREE_SLOT(qps), ret = 0;
	struct rdma_cm_id *id;
	struct ibv_pd *pd = any_pd();

	for (c = 0; c < MAXC && conns[c].cli; c++)
		;
	qa.send_cq = any_cq();
	qa.recv_cq = chance(70) ? qa.send_cq : any_cq();
	if (c == MAXC || k < 0 || !pd || !qa.send_cq || !qa.recv_cq)
		return;
	if (rdma_create_id(cm_ch, &id, NULL, RDMA_PS_TCP)) {
		note(OP_CONNECT, errno);
		return;
	}
	conns[c] = (struct conn){ .cli = id, .cli_qp = -1 };
	if (rdma_resolve_addr(id, (struct sockaddr *)&cli_addr, (struct sockaddr *)&srv_addr, 2000) ||
	    cm_wait(id, -1, 3000) != RDMA_CM_EVENT_ADDR_RESOLVED ||
	    rdma_resolve_route(id, 2000) || cm_wait(id, -1, 3000) != RDMA_CM_EVENT_ROUTE_RESOLVED) {
		ret = errno ? errno : EHOSTUNREACH;
		goto fail;
	}
	if (id->verbs != ctx) {
		ret = EXDEV;
		goto fail;
	}
	qa.cap.max_send_wr = 1 + rnd(64);
	qa.cap.max_recv_wr = 1 + rnd(64);
	qa.cap.max_send_sge = 1 + rnd(4);
	qa.cap.max_recv_sge = 1 + rnd(4);
	qa.cap.max_inline_data = rnd(129);
	qa.sq_sig_all = rnd(2);
	if (rdma_create_qp(id, pd, &qa)) {
		ret = errno;
		goto fail;
	}
	qps[k].qp = id->qp;
	qps[k].conn = c;
	conns[c].cli_qp = k;
	/* A few receives so that the peer's Sends can land. */
	for (int i = 0; i < 4; i++) {
		struct ibv_recv_wr wr;

		random_recv_wrs(&wr, 1);
		if (chance(70) && PICK(mrs) >= 0) {
			int m = PICK(mrs);

			wr.num_sge = 1;
			sgebuf[0][0] = (struct ibv_sge){ (uintptr_t)mrs[m]->addr, mrs[m]->length, mrs[m]->lkey };
		}
		struct ibv_recv_wr *bad;
		ibv_post_recv(id->qp, &wr, &bad);
	}
	if (rdma_connect(id, &p)) {
		ret = errno;
		goto fail;
	}
	if (cm_wait(id, -1, 5000) != RDMA_CM_EVENT_ESTABLISHED) {
		ret = ECONNREFUSED;
		goto fail;
	}
	note(OP_CONNECT, 0);
	return;
fail:
	note(OP_CONNECT, ret);
	conn_teardown(c, 0);
}

static void op_disconnect(void)
{
	int c = rnd(MAXC);

	if (!conns[c].cli)
		return;
	conn_teardown(c, chance(80));
	note(OP_DISCONNECT, 0);
}

static int cm_setup(const char *spec)
{
	char s[256], *comma;
	struct addrinfo *ai;
	struct rdma_cm_id *id;
	struct ibv_context **l;
	int n;

	snprintf(s, sizeof(s), "%s", spec);
	comma = strchr(s, ',');
	if (!comma)
		return -1;
	*comma = 0;
	if (getaddrinfo(s, NULL, NULL, &ai))
		return -1;
	memcpy(&srv_addr, ai->ai_addr, ai->ai_addrlen);
	freeaddrinfo(ai);
	if (getaddrinfo(comma + 1, NULL, NULL, &ai))
		return -1;
	memcpy(&cli_addr, ai->ai_addr, ai->ai_addrlen);
	freeaddrinfo(ai);
	((struct sockaddr_in *)&srv_addr)->sin_port = htons(20000 + rnd(20000));
	sbuf = mmap(NULL, SBUF, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (sbuf == MAP_FAILED)
		return -1;
	/* The fuzzed context is rdma_cm's own for the client's device. */
	l = rdma_get_devices(&n);
	for (int i = 0; l && i < n; i++)
		if (!devname || !strcmp(ibv_get_device_name(l[i]->device), devname)) {
			ctx = l[i];
			break;
		}
	if (!ctx)
		return -1;
	cm_ch = rdma_create_event_channel();
	if (!cm_ch)
		return -1;
	fcntl(cm_ch->fd, F_SETFL, fcntl(cm_ch->fd, F_GETFL) | O_NONBLOCK);
	if (rdma_create_id(cm_ch, &listener, NULL, RDMA_PS_TCP) ||
	    rdma_bind_addr(listener, (struct sockaddr *)&srv_addr) || rdma_listen(listener, 16)) {
		perror("uvfuzz: rdma_cm listener");
		return -1;
	}
	(void)id;
	cm_mode = 1;
	return 0;
}

/* ---- teardown ---- */

static unsigned long td_ok, td_fail;

static void td(int ret)
{
	note(OP_TEARDOWN, ret);
	if (ret)
		td_fail++;
	else
		td_ok++;
}

/* ---- the racer (-r): a second thread, raw commands on live handles ----
 *
 * While the main thread creates, modifies and destroys objects, a second
 * thread issues raw poll, notify, post, modify, query and resize commands
 * on the handles that are live (a snapshot of handle numbers the main
 * thread refreshes, never pointers), so that verbs race with the destroy
 * of the objects they name. It destroys nothing and touches only its own
 * buffers, so it cannot hurt the main thread's bookkeeping.
 */
#include <pthread.h>

#define NSNAP 64
static volatile uint32_t snap_cq[NSNAP], snap_qp[NSNAP], snap_srq[NSNAP], snap_key[NSNAP];
static volatile int racer_stop;
static unsigned long racer_calls, racer_ok;
/* The threads the watchdog reports on (0: none). */
static pid_t main_tid, racer_tid;

static void snapshot(void)
{
	for (int i = 0; i < NSNAP; i++) {
		int k = i % MAXO;

		snap_cq[i] = cqs[k].cq ? cqs[k].cq->handle : 0xffffffff;
		snap_qp[i] = qps[k].qp ? qps[k].qp->handle : 0xffffffff;
		snap_srq[i] = srqs[k] ? srqs[k]->handle : 0xffffffff;
		snap_key[i] = mrs[k] ? mrs[k]->lkey : (uint32_t)i;
	}
}

static void *racer(void *arg)
{
	static uint8_t rbuf[65536] __attribute__((aligned(8)));
	static uint8_t rscratch[1 << 18] __attribute__((aligned(8)));
	uint64_t r = (uint64_t)(uintptr_t)arg * 0x9E3779B97F4A7C15ULL + 7;
	uint8_t b[512] __attribute__((aligned(8)));

	racer_tid = gettid();
	while (!racer_stop) {
		struct ib_uverbs_cmd_hdr *h = (void *)b;
		uint8_t *c = b + sizeof(*h);
		uint32_t len = 0, cmd;
		uint64_t resp = (uintptr_t)rscratch;

		r ^= r >> 12, r ^= r << 25, r ^= r >> 27;
		memset(b, 0, sizeof(b));
		switch ((r * 0x2545F4914F6CDD1DULL >> 33) % 8) {
		case 0: case 1: {
			struct ib_uverbs_poll_cq *p = (void *)c;
			cmd = IB_USER_VERBS_CMD_POLL_CQ;
			p->response = resp;
			p->cq_handle = snap_cq[r % NSNAP];
			p->ne = 1 + (r >> 40) % 32;
			len = sizeof(*p);
			break;
		}
		case 2: {
			struct ib_uverbs_req_notify_cq *p = (void *)c;
			cmd = IB_USER_VERBS_CMD_REQ_NOTIFY_CQ;
			p->cq_handle = snap_cq[r % NSNAP];
			p->solicited_only = (r >> 50) & 1;
			len = sizeof(*p);
			break;
		}
		case 3: case 4: {
			struct ib_uverbs_post_send *p = (void *)c;
			struct ib_uverbs_send_wr *w = p->send_wr;
			struct ib_uverbs_sge *g = (void *)(w + 1);
			int send = ((r >> 20) & 3) != 0;

			p->response = resp;
			p->wr_count = 1;
			p->sge_count = 1;
			g->addr = (uintptr_t)rbuf + (r >> 30) % 32768;
			g->length = (r >> 45) % 4096;
			g->lkey = snap_key[(r >> 8) % NSNAP];
			if (send) {
				cmd = IB_USER_VERBS_CMD_POST_SEND;
				p->qp_handle = snap_qp[r % NSNAP];
				p->wqe_size = sizeof(*w);
				w->wr_id = r;
				w->num_sge = 1;
				w->opcode = (r >> 12) % 5;
				w->send_flags = (r >> 16) & 0xf;
				w->wr.rdma.remote_addr = r;
				w->wr.rdma.rkey = snap_key[(r >> 24) % NSNAP];
				len = sizeof(*p) + sizeof(*w) + sizeof(*g);
			} else {
				struct ib_uverbs_post_recv *q = (void *)c;
				struct ib_uverbs_recv_wr *rw = q->recv_wr;
				struct ib_uverbs_sge *rg = (void *)(rw + 1);

				*rg = *g;
				memset(w, 0, sizeof(*w));
				cmd = (r >> 22) & 1 ? IB_USER_VERBS_CMD_POST_RECV : IB_USER_VERBS_CMD_POST_SRQ_RECV;
				q->qp_handle = cmd == IB_USER_VERBS_CMD_POST_RECV ? snap_qp[r % NSNAP] : snap_srq[r % NSNAP];
				q->wqe_size = sizeof(*rw);
				rw->wr_id = r;
				rw->num_sge = 1;
				len = sizeof(*q) + sizeof(*rw) + sizeof(*rg);
			}
			break;
		}
		case 5: {
			struct ib_uverbs_modify_qp *p = (void *)c;
			cmd = IB_USER_VERBS_CMD_MODIFY_QP;
			p->qp_handle = snap_qp[r % NSNAP];
			p->attr_mask = IBV_QP_STATE;
			p->qp_state = (r >> 40) % 7;
			len = sizeof(*p);
			break;
		}
		case 6: {
			struct ib_uverbs_query_qp *p = (void *)c;
			cmd = IB_USER_VERBS_CMD_QUERY_QP;
			p->response = resp;
			p->qp_handle = snap_qp[r % NSNAP];
			p->attr_mask = IBV_QP_STATE | IBV_QP_CAP;
			len = sizeof(*p);
			break;
		}
		default: {
			struct ib_uverbs_resize_cq *p = (void *)c;
			cmd = IB_USER_VERBS_CMD_RESIZE_CQ;
			p->response = resp;
			p->cq_handle = snap_cq[r % NSNAP];
			p->cqe = 1 + (r >> 40) % 512;
			len = sizeof(*p);
			break;
		}
		}
		h->command = cmd;
		h->in_words = (sizeof(*h) + len) / 4;
		h->out_words = 16;
		__atomic_add_fetch(&racer_calls, 1, __ATOMIC_RELAXED);
		if (write(ctx->cmd_fd, b, sizeof(*h) + len) >= 0)
			__atomic_add_fetch(&racer_ok, 1, __ATOMIC_RELAXED);
		/* A few times the main thread's rate, not all of the CPU. */
		if ((racer_calls & 7) == 0)
			usleep(200);
	}
	return NULL;
}

static void teardown(void)
{
	int i;

	for (i = 0; i < MAXC; i++)
		if (conns[i].cli) {
			conn_teardown(i, 1);
			td(0);
		}
	for (i = 0; i < MAXO; i++)
		if (qps[i].qp)
			td(destroy_qp(i));
	for (i = 0; i < MAXO; i++)
		if (srqs[i])
			td(destroy_srq(i));
	for (i = 0; i < MAXO; i++)
		if (mrs[i]) {
			td(ibv_dereg_mr(mrs[i]));
			mrs[i] = NULL;
		}
	for (i = 0; i < MAXO; i++)
		if (cqs[i].cq)
			td(destroy_cq(i));
	for (i = 0; i < 4; i++)
		if (chans[i]) {
			td(ibv_destroy_comp_channel(chans[i]));
			chans[i] = NULL;
		}
	for (i = 0; i < MAXO; i++)
		if (pds[i]) {
			td(ibv_dealloc_pd(pds[i]));
			pds[i] = NULL;
		}
	for (i = 0; i < nraw_fds; i++)
		close(raw_fds[i]);
	if (cm_mode) {
		drain_cm();
		if (smr)
			td(ibv_dereg_mr(smr));
		if (scq)
			td(ibv_destroy_cq(scq));
		if (spd)
			td(ibv_dealloc_pd(spd));
		rdma_destroy_id(listener);
		rdma_destroy_event_channel(cm_ch);
	} else {
		/* The objects raw commands made go with the context. */
		td(ibv_close_device(ctx));
	}
}

/* ---- exhaust mode ---- */

static long cg_read(const char *file, const char *key)
{
	char path[1100], line[512], cg[512] = "";
	long v = -1;
	FILE *f = fopen("/proc/self/cgroup", "r");

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, "0::", 3)) {
			snprintf(cg, sizeof(cg), "%s", line + 3);
			cg[strcspn(cg, "\n")] = 0;
		}
	fclose(f);
	snprintf(path, sizeof(path), "/sys/fs/cgroup%s/%s", cg, file);
	f = fopen(path, "r");
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f)) {
		if (!key) {
			v = atol(line);
			break;
		}
		if (!strncmp(line, key, strlen(key)) && line[strlen(key)] == ' ') {
			v = atol(line + strlen(key) + 1);
			break;
		}
	}
	fclose(f);
	return v;
}

static int exhaust(int hold, uint32_t qp_wr, uint32_t cqe)
{
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	long cur0 = cg_read("memory.current", NULL), kern0 = cg_read("memory.stat", "kernel");
	unsigned long nq = 0, nc = 0, nm = 0;
	const char *what = NULL;
	int err = 0;

	if (!pd) {
		perror("exhaust: ibv_alloc_pd");
		return 1;
	}
	if (!qp_wr)
		qp_wr = dattr.max_qp_wr;
	if (!cqe)
		cqe = dattr.max_cqe;
	if (qp_wr > (uint32_t)dattr.max_qp_wr)
		qp_wr = dattr.max_qp_wr;
	printf("exhaust: QPs of %u send and receive WRs with %d SGEs, CQs of %u entries, MRs of 1 MiB\n",
	       qp_wr, dattr.max_sge, cqe);
	printf("exhaust: start: memory.current %ld, kernel %ld\n", cur0, kern0);
	fflush(stdout);
	for (unsigned long i = 0; i < 1000000; i++) {
		struct ibv_qp_init_attr qa = { .qp_type = IBV_QPT_RC,
			.cap = { qp_wr, qp_wr, dattr.max_sge, dattr.max_sge, 64 } };
		struct ibv_cq *cq = ibv_create_cq(ctx, cqe, NULL, NULL, 0);
		struct ibv_mr *mr;

		if (!cq) {
			what = "create_cq";
			err = errno;
			break;
		}
		nc++;
		qa.send_cq = qa.recv_cq = cq;
		if (!ibv_create_qp(pd, &qa)) {
			what = "create_qp";
			err = errno;
			break;
		}
		nq++;
		mr = ibv_reg_mr(pd, arena, 1 << 20, IBV_ACCESS_LOCAL_WRITE);
		if (!mr) {
			what = "reg_mr";
			err = errno;
			break;
		}
		nm++;
		{
			printf("exhaust: %lu CQs, %lu QPs, %lu MRs: memory.current %ld, kernel %ld\n", nc, nq, nm,
			       cg_read("memory.current", NULL), cg_read("memory.stat", "kernel"));
			fflush(stdout);
		}
	}
	printf("exhaust: %lu CQs, %lu QPs, %lu MRs: memory.current %ld, kernel %ld, max %ld\n", nc, nq, nm,
	       cg_read("memory.current", NULL), cg_read("memory.stat", "kernel"), cg_read("memory.max", NULL));
	if (what)
		printf("exhaust: stopped at %s: %s (%s)\n", what, strerror(err),
		       err == ENOMEM ? "ENOMEM" : err == EAGAIN ? "EAGAIN" : "other");
	else
		printf("exhaust: never stopped\n");
	printf("exhaust: holding %d s\n", hold);
	fflush(stdout);
	sleep(hold);
	printf("exhaust: done\n");
	return what ? 0 : 1;
}

/* ---- main ---- */

static time_t deadline_t;

/* Where thread TID is, from /proc (readable by the process itself): its
 * system call (number and first argument, or "running") and the kernel
 * function it waits in. A wait in libibverbs shows as futex (202) with
 * wchan futex_wait_queue; a wait in the kernel as the command's ioctl
 * (16) or write (1) with the driver's function. Async-signal-safe. */
static void report_thread(const char *who, pid_t tid)
{
	char path[64], buf[160], m[320];
	int fd, n, k;

	if (!tid)
		return;
	k = snprintf(m, sizeof(m), "uvfuzz: watchdog: %s thread %d: syscall ", who, (int)tid);
	snprintf(path, sizeof(path), "/proc/self/task/%d/syscall", (int)tid);
	fd = open(path, O_RDONLY);
	n = fd < 0 ? 0 : read(fd, buf, 40);
	if (fd >= 0)
		close(fd);
	for (int i = 0, sp = 0; i < n && k < (int)sizeof(m) - 80; i++) {
		if (buf[i] == ' ' && ++sp == 2)
			break; /* the number and the first argument */
		if (buf[i] != '\n')
			m[k++] = buf[i];
	}
	k += snprintf(m + k, sizeof(m) - k, ", wchan ");
	snprintf(path, sizeof(path), "/proc/self/task/%d/wchan", (int)tid);
	fd = open(path, O_RDONLY);
	n = fd < 0 ? 0 : read(fd, buf, sizeof(buf) - 1);
	if (fd >= 0)
		close(fd);
	for (int i = 0; i < n && k < (int)sizeof(m) - 2; i++)
		m[k++] = buf[i];
	m[k++] = '\n';
	if (write(2, m, k) < 0)
		return;
}

static void watchdog(int sig)
{
	char m[128];
	int n = snprintf(m, sizeof(m), "uvfuzz: watchdog: stuck in %s\n", op_name[cur_op]);

	(void)sig;
	if (write(2, m, n) < 0)
		_exit(3);
	report_thread("main", main_tid);
	report_thread("racer", racer_tid);
	_exit(3);
}

static void summary(unsigned long ops, double secs)
{
	static const struct { int e; const char *n; } names[] = {
		{ 0, "ok" }, { EPERM, "EPERM" }, { ENOENT, "ENOENT" }, { EIO, "EIO" }, { EBADF, "EBADF" },
		{ EAGAIN, "EAGAIN" }, { ENOMEM, "ENOMEM" }, { EACCES, "EACCES" }, { EFAULT, "EFAULT" },
		{ EBUSY, "EBUSY" }, { EEXIST, "EEXIST" }, { ENODEV, "ENODEV" }, { EINVAL, "EINVAL" },
		{ ENOSPC, "ENOSPC" }, { ENOSYS, "ENOSYS" }, { EOPNOTSUPP, "EOPNOTSUPP" },
		{ EPROTONOSUPPORT, "EPROTONOSUPPORT" }, { ETIMEDOUT, "ETIMEDOUT" }, { ECONNREFUSED, "ECONNREFUSED" },
		{ EHOSTUNREACH, "EHOSTUNREACH" }, { EXDEV, "EXDEV" }, { EOVERFLOW, "EOVERFLOW" },
		{ E2BIG, "E2BIG" }, { ENOTSUP, "ENOTSUP" }, { ERANGE, "ERANGE" }, { EMSGSIZE, "EMSGSIZE" },
	};
	unsigned long total_ok = 0;

	for (int op = 0; op < NOPS; op++) {
		char line[1024];
		int len;

		if (!calls[op])
			continue;
		total_ok += errs[op][0];
		len = snprintf(line, sizeof(line), "op %-14s %8lu:", op_name[op], calls[op]);
		for (int e = 0; e < NERR; e++) {
			const char *n = NULL;
			char num[16];

			if (!errs[op][e])
				continue;
			for (size_t j = 0; j < sizeof(names) / sizeof(names[0]); j++)
				if (names[j].e == e)
					n = names[j].n;
			if (!n) {
				snprintf(num, sizeof(num), "errno%d", e);
				n = num;
			}
			len += snprintf(line + len, sizeof(line) - len, " %s %lu", n, errs[op][e]);
			if (len >= (int)sizeof(line))
				break;
		}
		printf("%s\n", line);
	}
	printf("uvfuzz: %lu ops in %.1f s, %lu succeeded; teardown: %lu destroyed, %lu refused\n", ops, secs,
	       total_ok, td_ok, td_fail);
	printf("uvfuzz: completion events for no live CQ: %lu, for a CQ already destroyed: %lu\n", stray_events,
	       late_events);
}

int main(int argc, char **argv)
{
	static const struct option lo[] = { { "exhaust", no_argument, NULL, 'E' }, { 0 } };
	unsigned long nops = 10000, seed = time(NULL), i;
	int secs = 60, keep = 0, ex = 0, hold = 5, opt, total_w = 0, use_racer = 0;
	pthread_t racer_thread;
	uint32_t qp_wr = 0, cqe = 0;
	const char *cm = NULL;
	struct timespec t0, t;

	while ((opt = getopt_long(argc, argv, "d:s:n:t:c:xrvEw:q:C:", lo, NULL)) != -1)
		switch (opt) {
		case 'd': devname = optarg; break;
		case 's': seed = strtoul(optarg, NULL, 0); break;
		case 'n': nops = strtoul(optarg, NULL, 0); break;
		case 't': secs = atoi(optarg); break;
		case 'c': cm = optarg; break;
		case 'x': keep = 1; break;
		case 'v': verbose = 1; break;
		case 'r': use_racer = 1; break;
		case 'E': ex = 1; break;
		case 'w': hold = atoi(optarg); break;
		case 'q': qp_wr = strtoul(optarg, NULL, 0); break;
		case 'C': cqe = strtoul(optarg, NULL, 0); break;
		default:
			fprintf(stderr, "usage: %s [-d DEV] [-s SEED] [-n OPS] [-t SECONDS] [-c SRV,CLI] [-r] [-x] [-v]\n"
					"       %s --exhaust [-d DEV] [-w HOLD_SECONDS] [-q QP_WR] [-C CQE]\n",
				argv[0], argv[0]);
			return 1;
		}
	rs = seed * 0x9E3779B97F4A7C15ULL + 1;
	setvbuf(stdout, NULL, _IOLBF, 0);
	signal(SIGPIPE, SIG_IGN);
	arena = mmap(NULL, ARENA + 2 * 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	scratch = mmap(NULL, SCRATCH, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (arena == MAP_FAILED || scratch == MAP_FAILED) {
		perror("uvfuzz: mmap");
		return 1;
	}
	memset(arena, 0x5a, ARENA);
	ro_page = arena + ARENA;
	no_page = arena + ARENA + 4096;
	mprotect(ro_page, 4096, PROT_READ);
	mprotect(no_page, 4096, PROT_NONE);
	if (cm) {
		if (cm_setup(cm)) {
			fprintf(stderr, "uvfuzz: rdma_cm setup (%s) failed\n", cm);
			return 1;
		}
	} else {
		ctx = open_dev(devname);
	}
	if (!ctx) {
		fprintf(stderr, "uvfuzz: cannot open device %s\n", devname ? devname : "(any)");
		return 1;
	}
	if (ibv_query_device(ctx, &dattr)) {
		perror("uvfuzz: ibv_query_device");
		return 1;
	}
	/* The provider is loaded now: its direct verbs, for the rings. */
	find_dv();
	fcntl(ctx->async_fd, F_SETFL, fcntl(ctx->async_fd, F_GETFL) | O_NONBLOCK);
	dummy_ah.context = ctx;
	if (ex)
		return exhaust(hold, qp_wr, cqe);

	printf("uvfuzz: device %s, seed %lu, %lu ops, %d s%s%s%s, uid %d\n", ibv_get_device_name(ctx->device), seed,
	       nops, secs, cm ? ", connections " : "", cm ? cm : "", use_racer ? ", racer" : "", (int)getuid());
	for (int o = 0; o < NOPS; o++)
		total_w += op_weight[o];
	total_w += cm ? 6 : 0;
	main_tid = gettid();
	signal(SIGALRM, watchdog);
	alarm(secs + 120);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	deadline_t = t0.tv_sec + secs;
	snapshot();
	if (use_racer && pthread_create(&racer_thread, NULL, racer, (void *)(uintptr_t)(seed + 1))) {
		perror("uvfuzz: racer thread");
		return 1;
	}
	for (i = 0; i < nops; i++) {
		int w, o;

		if (use_racer && (i & 7) == 0)
			snapshot();

		if ((i & 15) == 0) {
			clock_gettime(CLOCK_MONOTONIC, &t);
			if (t.tv_sec >= deadline_t)
				break;
		}
		if (i % 500 == 499) {
			cur_op = OP_CHILD;
			op_child();
			continue;
		}
		w = rnd(total_w);
		for (o = 0; o < NOPS; o++) {
			if (w < op_weight[o])
				break;
			w -= op_weight[o];
		}
		if (o == NOPS)
			o = chance(60) ? OP_CONNECT : OP_DISCONNECT;
		cur_op = o;
		switch (o) {
		case OP_ALLOC_PD: op_alloc_pd(); break;
		case OP_DEALLOC_PD: op_dealloc_pd(); break;
		case OP_REG_MR: op_reg_mr(); break;
		case OP_REREG_MR: op_rereg_mr(); break;
		case OP_DEREG_MR: op_dereg_mr(); break;
		case OP_ALLOC_MW: op_alloc_mw(); break;
		case OP_CREATE_CQ: op_create_cq(0); break;
		case OP_CREATE_CQ_EX: op_create_cq(1); break;
		case OP_RESIZE_CQ: op_resize_cq(); break;
		case OP_DESTROY_CQ: op_destroy_cq(); break;
		case OP_POLL_CQ: op_poll_cq(); break;
		case OP_POLL_CQ_EX: op_poll_cq_ex(); break;
		case OP_REQ_NOTIFY: op_req_notify(); break;
		case OP_CREATE_QP: op_create_qp(); break;
		case OP_MODIFY_QP: op_modify_qp(); break;
		case OP_QUERY_QP: op_query_qp(); break;
		case OP_DESTROY_QP: op_destroy_qp(); break;
		case OP_CREATE_SRQ: op_create_srq(); break;
		case OP_MODIFY_SRQ: op_modify_srq(); break;
		case OP_QUERY_SRQ: op_query_srq(); break;
		case OP_POST_SRQ_RECV: op_post_srq_recv(); break;
		case OP_DESTROY_SRQ: op_destroy_srq(); break;
		case OP_POST_SEND: op_post_send(); break;
		case OP_POST_RECV: op_post_recv(); break;
		case OP_QUERY: op_query(); break;
		case OP_RAW: op_raw(); break;
		case OP_EVENTS: drain_events(); break;
		case OP_CONNECT: op_connect(); break;
		case OP_DISCONNECT: op_disconnect(); break;
		case OP_RING: op_ring(); break;
		default: break;
		}
		if (cm_mode && (i & 7) == 0)
			drain_cm();
	}
	clock_gettime(CLOCK_MONOTONIC, &t);
	cur_op = OP_TEARDOWN;
	if (use_racer) {
		racer_stop = 1;
		pthread_join(racer_thread, NULL);
		printf("uvfuzz: racer: %lu raw commands, %lu succeeded\n", racer_calls, racer_ok);
	}
	drain_events();
	if (keep) {
		summary(i, (t.tv_sec - t0.tv_sec) + (t.tv_nsec - t0.tv_nsec) / 1e9);
		printf("uvfuzz: exiting with every object alive\nuvfuzz: done\n");
		return 0;
	}
	teardown();
	summary(i, (t.tv_sec - t0.tv_sec) + (t.tv_nsec - t0.tv_nsec) / 1e9);
	printf("uvfuzz: done\n");
	return 0;
}
