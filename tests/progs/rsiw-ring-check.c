// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * rsiw-ring-check: the shared rings (ABI 2) from a process, every result
 * compared.
 *
 * - The rings are in use (rsiwdv_query_qp) and cost what the ABI says:
 *   posting receives, polling and arming a CQ make no system call; one
 *   ibv_post_send list rings the doorbell at most once.
 * - Ring edges: a full send ring and a full receive ring refuse the next
 *   post with ENOMEM (an unconnected QP consumes nothing); Sends through a
 *   ring of 8 entries wrap its indices five times, each message's data and
 *   order checked; a CQ ring of 4 entries given 8 completions keeps the
 *   first 4 intact and raises IBV_EVENT_CQ_ERR.
 * - The extended verbs through the ring, data checked: Write (two SGEs),
 *   Write with Immediate, Send, Read, FetchAdd, CmpSwap; the masked
 *   atomics of rsiwdv.h; Local Invalidate (the MR's key is dead after
 *   it) and Send with Invalidate of a peer's ibv_reg_mr region (refused:
 *   only fast-registered memory may be invalidated remotely; the
 *   stream ends and the region stays registered).
 * - Hostile entries written straight into the ring: an unknown opcode
 *   with too many SGEs completes with IBV_WC_LOC_QP_OP_ERR and moves the
 *   QP to Error (the peer sees the stream end); a producer index a
 *   ring ahead (garbage) does the same; later posts are flushed; nothing
 *   else is disturbed (a second connection keeps working).
 *
 *   rsiw-ring-check SERVER-ADDR CLIENT-ADDR [PORT]
 *
 * One process: passive side on SERVER, active side from CLIENT, each on
 * its own device. Prints "ok - ..." / "not ok - ..."; exits 0 when all
 * pass.
 */
#include <arpa/inet.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <pthread.h>
#include <signal.h>
#include <stddef.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <ucontext.h>
#include <unistd.h>
#include <linux/filter.h>
#include <linux/seccomp.h>

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#include "check-common.h"

#include "../../include/uapi/rdma/rsiw-abi.h"
#include "../../providers/rsiw/rsiwdv.h"
#include "rsiw-dv-lib.h"

static int (*dv_query_qp)(struct ibv_qp *, struct rsiwdv_qp *);
static int (*dv_sq_doorbell)(struct ibv_qp *);
static int (*dv_masked)(struct ibv_qp *, const struct rsiwdv_masked_atomic *);

struct end {
	struct rdma_cm_id *id;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_cq_ex *cqx;
	struct ibv_qp_ex *qpx;
	struct ibv_mr *mr;
	uint8_t *buf;
};

#define BUF_SIZE 65536

static const char *saddr, *caddr;
static int port_no = 7480;

/* The next event of this type; an earlier connection's ends are skipped. */
static struct rdma_cm_event *expect_event(enum rdma_cm_event_type type)
{
	return expect_event_of(type, 1);
}

#define OPS                                                                              \
	(IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_INV | IBV_QP_EX_WITH_RDMA_WRITE |   \
	 IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM | IBV_QP_EX_WITH_RDMA_READ |                  \
	 IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP | IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD |         \
	 IBV_QP_EX_WITH_LOCAL_INV)

static void setup_end(struct end *e, struct rdma_cm_id *id, int depth, int cqe)
{
	struct ibv_qp_init_attr_ex attr = {
		.cap = { .max_send_wr = depth, .max_recv_wr = depth, .max_send_sge = 2,
			 .max_recv_sge = 2, .max_inline_data = 64 },
		.qp_type = IBV_QPT_RC,
		.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS,
		.send_ops_flags = OPS,
	};
	struct ibv_cq_init_attr_ex ca = { .cqe = cqe, .wc_flags = IBV_WC_STANDARD_FLAGS };

	e->id = id;
	e->pd = ibv_alloc_pd(id->verbs);
	if (!e->pd)
		DIE("ibv_alloc_pd");
	e->cqx = ibv_create_cq_ex(id->verbs, &ca);
	if (!e->cqx)
		DIE("ibv_create_cq_ex");
	e->cq = ibv_cq_ex_to_cq(e->cqx);
	attr.send_cq = attr.recv_cq = e->cq;
	attr.pd = e->pd;
	if (rdma_create_qp_ex(id, &attr))
		DIE("rdma_create_qp_ex");
	e->qpx = ibv_qp_to_qp_ex(id->qp);
	if (!e->qpx)
		DIE("ibv_qp_to_qp_ex");
	if (posix_memalign((void **)&e->buf, 4096, BUF_SIZE))
		DIE("posix_memalign");
	memset(e->buf, 0, BUF_SIZE);
	e->mr = ibv_reg_mr(e->pd, e->buf, BUF_SIZE,
			   IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
				   IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC);
	if (!e->mr)
		DIE("ibv_reg_mr");
}

static void teardown_end(struct end *e)
{
	rdma_destroy_qp(e->id);
	ibv_dereg_mr(e->mr);
	ibv_destroy_cq(e->cq);
	ibv_dealloc_pd(e->pd);
	free(e->buf);
}

/* Receives first (iWARP has no RNR retry), via `pre`. */
static void connect_pair(struct end *c, struct end *s, int depth, int ccqe, int scqe,
			 void (*pre)(struct end *s))
{
	struct rdma_addrinfo hints = { .ai_port_space = RDMA_PS_TCP }, *sres, *cres;
	struct rdma_conn_param param = { .responder_resources = 4, .initiator_depth = 4 };
	struct rdma_cm_id *listener, *cid;
	struct rdma_cm_event *ev;
	struct sockaddr_in src = { .sin_family = AF_INET };
	char port[16];

	snprintf(port, sizeof(port), "%d", port_no++);
	hints.ai_flags = RAI_PASSIVE;
	if (rdma_getaddrinfo(saddr, port, &hints, &sres))
		DIE("rdma_getaddrinfo %s", saddr);
	if (rdma_create_id(channel, &listener, NULL, RDMA_PS_TCP) ||
	    rdma_bind_addr(listener, sres->ai_src_addr) || rdma_listen(listener, 1))
		DIE("listen on %s", saddr);
	hints.ai_flags = 0;
	if (rdma_getaddrinfo(saddr, port, &hints, &cres))
		DIE("rdma_getaddrinfo");
	if (rdma_create_id(channel, &cid, NULL, RDMA_PS_TCP))
		DIE("rdma_create_id");
	if (inet_pton(AF_INET, caddr, &src.sin_addr) != 1)
		DIE("client address %s", caddr);
	if (rdma_resolve_addr(cid, (struct sockaddr *)&src, cres->ai_dst_addr, 2000))
		DIE("rdma_resolve_addr");
	rdma_ack_cm_event(expect_event(RDMA_CM_EVENT_ADDR_RESOLVED));
	if (rdma_resolve_route(cid, 2000))
		DIE("rdma_resolve_route");
	rdma_ack_cm_event(expect_event(RDMA_CM_EVENT_ROUTE_RESOLVED));
	setup_end(c, cid, depth, ccqe);
	if (rdma_connect(cid, &param))
		DIE("rdma_connect");
	ev = expect_event(RDMA_CM_EVENT_CONNECT_REQUEST);
	setup_end(s, ev->id, depth, scqe);
	if (pre)
		pre(s);
	if (rdma_accept(ev->id, &param))
		DIE("rdma_accept");
	rdma_ack_cm_event(ev);
	rdma_ack_cm_event(expect_event(RDMA_CM_EVENT_ESTABLISHED));
	rdma_ack_cm_event(expect_event(RDMA_CM_EVENT_ESTABLISHED));
	rdma_destroy_id(listener);
	rdma_freeaddrinfo(sres);
	rdma_freeaddrinfo(cres);
}

/* Disconnects and waits for both ends' DISCONNECTED. */
static void disconnect_pair(struct end *c)
{
	rdma_disconnect(c->id);
	rdma_ack_cm_event(expect_event(RDMA_CM_EVENT_DISCONNECTED));
	rdma_ack_cm_event(expect_event(RDMA_CM_EVENT_DISCONNECTED));
}

/* Polls one completion (10 s at most). */
static int poll_one(struct end *e, struct ibv_wc *wc)
{
	return poll_cq_one(e->cq, wc);
}

static int post_recv(struct end *e, uint64_t wr_id, void *addr, uint32_t len)
{
	return post_recv_one(e->id->qp, e->mr->lkey, wr_id, addr, len);
}

static int post_send(struct end *e, uint64_t wr_id, enum ibv_wr_opcode op, void *addr,
		     uint32_t len, uint32_t lkey, uint64_t raddr, uint32_t rkey)
{
	struct ibv_sge sge = { .addr = (uintptr_t)addr, .length = len, .lkey = lkey };
	struct ibv_send_wr wr = { .wr_id = wr_id, .sg_list = &sge, .num_sge = 1, .opcode = op,
				  .send_flags = IBV_SEND_SIGNALED,
				  .wr.rdma = { .remote_addr = raddr, .rkey = rkey } }, *bad;

	return ibv_post_send(e->id->qp, &wr, &bad);
}

/*
 * Counting the system calls a verb makes: in a thread of its own, a
 * seccomp filter traps write() and ioctl() (the uverbs commands) and the
 * SIGSYS handler counts each and makes it return 0 without running it.
 */
static volatile long trapped;

static void on_sigsys(int sig, siginfo_t *si, void *uc)
{
	(void)sig;
	(void)si;
	trapped++;
#ifdef __x86_64__
	((ucontext_t *)uc)->uc_mcontext.gregs[REG_RAX] = 0;
#else
	(void)uc;
#endif
}

struct counted {
	void (*fn)(void *);
	void *arg;
	long calls;
	int ok;
};

static void *count_thread(void *p)
{
	struct counted *c = p;
	struct sock_filter f[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_write, 2, 0),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_ioctl, 1, 0),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_TRAP),
	};
	struct sock_fprog prog = { .len = sizeof(f) / sizeof(f[0]), .filter = f };

	/* Without seccomp (CONFIG_SECCOMP_FILTER) fn still runs, uncounted. */
	c->ok = !prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) &&
		!syscall(__NR_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog);
	trapped = 0;
	c->fn(c->arg);
	c->calls = trapped;
	return NULL;
}

/* The write/ioctl system calls fn(arg) makes; -1 if they cannot be counted. */
static long count_calls(void (*fn)(void *), void *arg)
{
	struct sigaction sa = { .sa_sigaction = on_sigsys, .sa_flags = SA_SIGINFO };
	struct counted c = { .fn = fn, .arg = arg };
	pthread_t t;

#ifndef __x86_64__
	return -1;
#endif
	sigaction(SIGSYS, &sa, NULL);
	if (pthread_create(&t, NULL, count_thread, &c))
		return -1;
	pthread_join(t, NULL);
	return c.ok ? c.calls : -1;
}

static int wait_err(struct ibv_qp *qp)
{
	struct ibv_qp_attr attr;
	struct ibv_qp_init_attr init;
	int i;

	for (i = 0; i < 2000; i++) {
		if (!ibv_query_qp(qp, &attr, IBV_QP_STATE, &init) && attr.qp_state == IBV_QPS_ERR)
			return 1;
		nanosleep(&(struct timespec){ .tv_nsec = 1000000 }, NULL);
	}
	return 0;
}

static void pre_none(struct end *s)
{
	(void)s;
}

static void pre_wrap(struct end *s)
{
	int i;

	for (i = 0; i < 8; i++)
		if (post_recv(s, 1000 + i, s->buf + 256 * i, 256))
			DIE("ibv_post_recv");
}

static void pre_ext(struct end *s)
{
	int i;

	for (i = 0; i < 4; i++)
		if (post_recv(s, 200 + i, s->buf + 8192 + 256 * i, 256))
			DIE("ibv_post_recv");
}

/* ---- the checks ---- */

static struct end *cost_end;
static int cost_ret;

static void cost_recv_poll_arm(void *arg)
{
	struct ibv_wc wc[4];
	int i;

	(void)arg;
	for (i = 0; i < 8; i++)
		cost_ret |= post_recv(cost_end, i, cost_end->buf, 64);
	for (i = 0; i < 1000; i++)
		cost_ret |= ibv_poll_cq(cost_end->cq, 4, wc);
	for (i = 0; i < 100; i++)
		cost_ret |= ibv_req_notify_cq(cost_end->cq, i & 1);
}

static void cost_send_list(void *arg)
{
	struct ibv_sge sge = { .addr = (uintptr_t)cost_end->buf, .length = 8,
			       .lkey = cost_end->mr->lkey };
	struct ibv_send_wr wr[8], *bad;
	int i;

	(void)arg;
	for (i = 0; i < 8; i++)
		wr[i] = (struct ibv_send_wr){ .wr_id = i, .sg_list = &sge, .num_sge = 1,
					      .opcode = IBV_WR_SEND, .next = i < 7 ? &wr[i + 1] : NULL };
	cost_ret = ibv_post_send(cost_end->id->qp, wr, &bad);
}

static void costs_and_full_rings(void)
{
	struct rdma_cm_id *id;
	struct end e = { 0 };
	struct rsiwdv_qp dv;
	long calls;
	int ret = 0;

	/* An unconnected QP (rdma_cm resolved, not connected): nothing consumes. */
	{
		struct rdma_addrinfo hints = { .ai_port_space = RDMA_PS_TCP }, *res;
		struct sockaddr_in src = { .sin_family = AF_INET };

		if (rdma_getaddrinfo(saddr, "7479", &hints, &res) ||
		    rdma_create_id(channel, &id, NULL, RDMA_PS_TCP))
			DIE("rdma_create_id");
		inet_pton(AF_INET, caddr, &src.sin_addr);
		if (rdma_resolve_addr(id, (struct sockaddr *)&src, res->ai_dst_addr, 2000))
			DIE("rdma_resolve_addr");
		rdma_ack_cm_event(expect_event(RDMA_CM_EVENT_ADDR_RESOLVED));
		rdma_freeaddrinfo(res);
	}
	setup_end(&e, id, 8, 16);
	ret = dv_query_qp(id->qp, &dv);
	CHECK(ret == 0 && dv.sq_ring && dv.rq_ring && dv.sq_entries == 8 && dv.rq_entries == 8,
	      "the QP's send and receive rings are mapped (%d, %u and %u entries)", ret,
	      dv.sq_entries, dv.rq_entries);

	cost_end = &e;
	cost_ret = 0;
	calls = count_calls(cost_recv_poll_arm, NULL);
	CHECK(cost_ret == 0 && calls == 0,
	      "8 receives posted, 1000 polls and 100 armings made no system call (%ld)", calls);
	CHECK(post_recv(&e, 8, e.buf, 64) == ENOMEM, "a 9th receive on the full ring is ENOMEM");
	calls = count_calls(cost_send_list, NULL);
	CHECK(cost_ret == 0 && calls == 1, "a list of 8 sends took one doorbell (%ld)", calls);
	{
		struct ibv_sge sge = { .addr = (uintptr_t)e.buf, .length = 8, .lkey = e.mr->lkey };
		struct ibv_send_wr wr = { .wr_id = 9, .sg_list = &sge, .num_sge = 1,
					  .opcode = IBV_WR_SEND }, *bad;

		ret = ibv_post_send(id->qp, &wr, &bad);
		CHECK(ret == ENOMEM && bad == &wr, "a 9th send on the full ring is ENOMEM (%d)", ret);
	}
	teardown_end(&e);
	rdma_destroy_id(id);
}

static void wrap_around(void)
{
	struct end c = { 0 }, s = { 0 };
	struct ibv_wc wc;
	int i, ok = 1, order = 1;

	connect_pair(&c, &s, 8, 16, 16, pre_wrap);
	for (i = 0; i < 40 && ok; i++) {
		uint8_t *src = c.buf + 4096 + 64 * (i % 8), *dst = s.buf + 256 * (i % 8);

		memset(src, 'a' + i % 26, 64);
		src[0] = (uint8_t)i;
		ok = !post_send(&c, i, IBV_WR_SEND, src, 64, c.mr->lkey, 0, 0) && !poll_one(&c, &wc) &&
		     wc.status == IBV_WC_SUCCESS && wc.wr_id == (uint64_t)i;
		ok = ok && !poll_one(&s, &wc) && wc.status == IBV_WC_SUCCESS && wc.byte_len == 64 &&
		     memcmp(dst, src, 64) == 0;
		if (ok && wc.wr_id != 1000u + i % 8)
			order = 0;
		ok = ok && !post_recv(&s, 1000 + i % 8, dst, 256);
	}
	CHECK(ok && order, "40 Sends through rings of 8 (5 wraps): data and order intact (at %d)", i);
	disconnect_pair(&c);
	teardown_end(&c);
	teardown_end(&s);
}

static void ext_ops(void)
{
	struct end c = { 0 }, s = { 0 };
	struct ibv_qp_ex *x;
	struct ibv_wc wc;
	struct ibv_mr *mr2;
	uint64_t *sw, *cw;
	int ok, n, i;

	connect_pair(&c, &s, 16, 32, 32, pre_ext);
	x = c.qpx;
	sw = (uint64_t *)(s.buf + 16384);
	cw = (uint64_t *)(c.buf + 16384);
	sw[0] = 100;
	memset(c.buf, 'W', 300);
	memset(c.buf + 1024, 'V', 200);
	memset(s.buf + 32768, 'R', 512);

	ibv_wr_start(x);
	x->wr_id = 1;
	x->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_rdma_write(x, s.mr->rkey, (uintptr_t)s.buf + 4096);
	{
		struct ibv_sge l[2] = { { (uintptr_t)c.buf, 300, c.mr->lkey },
					{ (uintptr_t)c.buf + 1024, 200, c.mr->lkey } };

		ibv_wr_set_sge_list(x, 2, l);
	}
	x->wr_id = 2;
	ibv_wr_rdma_write_imm(x, s.mr->rkey, (uintptr_t)s.buf + 6144, htonl(0xabcdef01));
	ibv_wr_set_sge(x, c.mr->lkey, (uintptr_t)c.buf, 64);
	x->wr_id = 3;
	ibv_wr_send(x);
	ibv_wr_set_inline_data(x, "ring inline", 12);
	x->wr_id = 4;
	ibv_wr_rdma_read(x, s.mr->rkey, (uintptr_t)s.buf + 32768);
	ibv_wr_set_sge(x, c.mr->lkey, (uintptr_t)c.buf + 32768, 512);
	x->wr_id = 5;
	ibv_wr_atomic_fetch_add(x, s.mr->rkey, (uintptr_t)&sw[0], 11);
	ibv_wr_set_sge(x, c.mr->lkey, (uintptr_t)&cw[0], 8);
	x->wr_id = 6;
	ibv_wr_atomic_cmp_swp(x, s.mr->rkey, (uintptr_t)&sw[0], 111, 7);
	ibv_wr_set_sge(x, c.mr->lkey, (uintptr_t)&cw[1], 8);
	n = ibv_wr_complete(x);
	ok = n == 0;
	for (i = 1; i <= 6 && ok; i++)
		ok = !poll_one(&c, &wc) && wc.status == IBV_WC_SUCCESS && wc.wr_id == (uint64_t)i;
	CHECK(ok, "an ibv_wr_* list of Write, Write+Imm, Send, Read, FetchAdd, CmpSwap completes in order (%d: %s)",
	      i, ibv_wc_status_str(wc.status));
	ok = memcmp(s.buf + 4096, c.buf, 300) == 0 && memcmp(s.buf + 4096 + 300, c.buf + 1024, 200) == 0;
	CHECK(ok, "the Write's two SGEs are placed");
	ok = !poll_one(&s, &wc) && wc.opcode == IBV_WC_RECV_RDMA_WITH_IMM &&
	     (wc.wc_flags & IBV_WC_WITH_IMM) && wc.imm_data == htonl(0xabcdef01) &&
	     memcmp(s.buf + 6144, c.buf, 64) == 0;
	CHECK(ok, "Write with Immediate: data placed, immediate delivered");
	ok = !poll_one(&s, &wc) && wc.opcode == IBV_WC_RECV && wc.byte_len == 12 &&
	     memcmp(s.buf + 8192 + 256, "ring inline", 12) == 0;
	CHECK(ok, "the inline Send arrives with its data (%u)", wc.byte_len);
	CHECK(memcmp(c.buf + 32768, s.buf + 32768, 512) == 0, "the Read's data is placed");
	CHECK(cw[0] == 100 && cw[1] == 111 && sw[0] == 7,
	      "FetchAdd returned 100, CmpSwap matched 111 and swapped in 7 (%" PRIu64 ", %" PRIu64
	      ", %" PRIu64 ")", cw[0], cw[1], sw[0]);

	/* Masked atomics (rsiwdv). */
	{
		struct rsiwdv_masked_atomic a = {
			.wr_id = 7, .op = RSIWDV_MASKED_CMP_SWAP, .signaled = 1,
			.rkey = s.mr->rkey, .remote_addr = (uintptr_t)&sw[1],
			.compare_add = 0x00000000000000ffULL, .compare_add_mask = 0xffULL,
			.swap = 0xaaaa000000000000ULL, .swap_mask = 0xffff000000000000ULL,
			.sge = { (uintptr_t)&cw[2], 8, c.mr->lkey },
		};

		sw[1] = 0x12340000000000ffULL;
		ok = dv_masked(c.id->qp, &a) == 0 && !poll_one(&c, &wc) &&
		     wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_COMP_SWAP;
		CHECK(ok && cw[2] == 0x12340000000000ffULL && sw[1] == 0xaaaa0000000000ffULL,
		      "masked CmpSwap: low byte matched, top 16 bits swapped (%#" PRIx64 " -> %#" PRIx64 ")",
		      cw[2], sw[1]);
		a = (struct rsiwdv_masked_atomic){
			.wr_id = 8, .op = RSIWDV_MASKED_FETCH_ADD, .signaled = 1,
			.rkey = s.mr->rkey, .remote_addr = (uintptr_t)&sw[2],
			/* two 32-bit lanes: a carry stops at bit 31 */
			.compare_add = 0x0000000100000001ULL, .compare_add_mask = 0x0000000080000000ULL,
			.sge = { (uintptr_t)&cw[3], 8, c.mr->lkey },
		};
		sw[2] = 0x00000005ffffffffULL;
		ok = dv_masked(c.id->qp, &a) == 0 && !poll_one(&c, &wc) &&
		     wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_FETCH_ADD;
		CHECK(ok && cw[3] == 0x00000005ffffffffULL && sw[2] == 0x0000000600000000ULL,
		      "masked FetchAdd: two lanes, no carry across (%#" PRIx64 ")", sw[2]);
	}

	/* Local Invalidate of our own second MR: a Send from it then fails. */
	mr2 = ibv_reg_mr(c.pd, c.buf + 49152, 4096, IBV_ACCESS_LOCAL_WRITE);
	if (!mr2)
		DIE("ibv_reg_mr");
	ibv_wr_start(x);
	x->wr_id = 10;
	x->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_local_inv(x, mr2->lkey);
	ok = ibv_wr_complete(x) == 0 && !poll_one(&c, &wc) && wc.status == IBV_WC_SUCCESS &&
	     wc.opcode == IBV_WC_LOCAL_INV && wc.wr_id == 10;
	CHECK(ok, "Local Invalidate completes (%s)", ibv_wc_status_str(wc.status));
	ok = !post_send(&c, 11, IBV_WR_SEND, c.buf + 49152, 16, mr2->lkey, 0, 0) &&
	     !poll_one(&c, &wc) && wc.status == IBV_WC_LOC_PROT_ERR && wc.wr_id == 11;
	CHECK(ok, "a Send from the invalidated MR is a protection error (%s)",
	      ibv_wc_status_str(wc.status));
	CHECK(wait_err(c.id->qp), "which ends the stream: the QP is in Error");
	ibv_dereg_mr(mr2);
	rdma_disconnect(c.id);
	teardown_end(&c);
	teardown_end(&s);
}

/*
 * A peer's Send with Invalidate may invalidate fast-registered memory only
 * (the verbs' rule, as rxe and hardware RNICs keep it); a process's
 * ibv_reg_mr region is not revoked by whoever guesses its STag: the
 * receiver refuses it (a Terminate: the stream ends), its receive does not
 * complete as an invalidation, and the MR still works for the process.
 */
static void remote_invalidation_refused(void)
{
	struct end c = { 0 }, s = { 0 };
	struct ibv_qp_ex *x;
	struct ibv_wc wc;
	struct ibv_mr *smr2;
	int ok;

	connect_pair(&c, &s, 16, 32, 32, pre_ext);
	x = c.qpx;
	smr2 = ibv_reg_mr(s.pd, s.buf + 49152, 4096, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	if (!smr2)
		DIE("ibv_reg_mr");
	ibv_wr_start(x);
	x->wr_id = 9;
	x->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_send_inv(x, smr2->rkey);
	ibv_wr_set_sge(x, c.mr->lkey, (uintptr_t)c.buf, 16);
	CHECK(ibv_wr_complete(x) == 0, "Send with Invalidate of a peer's ibv_reg_mr region posts");
	ok = !poll_one(&s, &wc) && !(wc.status == IBV_WC_SUCCESS && (wc.wc_flags & IBV_WC_WITH_INV));
	CHECK(ok, "the receiver refuses to invalidate a region that is not fast-registered (%s)",
	      ibv_wc_status_str(wc.status));
	CHECK(wait_err(s.id->qp) && wait_err(c.id->qp), "and ends the stream: both QPs in Error");
	/* Still registered: a local receive into it is checked against it. */
	ok = !post_recv(&s, 77, s.buf + 49152, 64);
	CHECK(ok, "the region was not revoked: it still takes a receive on its own QP");
	ibv_dereg_mr(smr2);
	rdma_disconnect(c.id);
	teardown_end(&c);
	teardown_end(&s);
}

static void cq_overflow(void)
{
	struct end c = { 0 }, s = { 0 };
	struct ibv_async_event ae;
	struct ibv_wc wc[8];
	struct pollfd pfd;
	int i, n = 0, ok = 1, got_err = 0, ret;

	/* The client's CQ ring holds 4; 8 signaled Writes complete into it. */
	connect_pair(&c, &s, 16, 4, 16, pre_none);
	for (i = 0; i < 8; i++)
		ok &= !post_send(&c, i, IBV_WR_RDMA_WRITE, c.buf, 32, c.mr->lkey,
				 (uintptr_t)s.buf, s.mr->rkey);
	fcntl(c.id->verbs->async_fd, F_SETFL, O_NONBLOCK);
	pfd = (struct pollfd){ .fd = c.id->verbs->async_fd, .events = POLLIN };
	for (i = 0; i < 100 && !got_err; i++) {
		if (poll(&pfd, 1, 100) > 0 && !ibv_get_async_event(c.id->verbs, &ae)) {
			got_err = ae.event_type == IBV_EVENT_CQ_ERR && ae.element.cq == c.cq;
			ibv_ack_async_event(&ae);
		}
	}
	CHECK(ok && got_err, "8 completions into a CQ ring of 4 raise IBV_EVENT_CQ_ERR");
	ret = ibv_poll_cq(c.cq, 8, wc);
	for (i = 0; i < ret; i++)
		if (wc[i].wr_id != (uint64_t)i || wc[i].status != IBV_WC_SUCCESS)
			ok = 0;
	n = ret;
	CHECK(ok && n == 4, "the first 4 completions are intact, none overwritten (%d)", n);
	disconnect_pair(&c);
	teardown_end(&c);
	teardown_end(&s);
}

/* A hostile entry (broken = 0) or producer index (broken = 1). */
static void hostile(int broken)
{
	struct end c = { 0 }, s = { 0 }, c2 = { 0 }, s2 = { 0 };
	struct rsiwdv_qp dv;
	struct rsiw_ring_ctl *ctl;
	struct ibv_wc wc;
	int ok;

	connect_pair(&c, &s, 8, 16, 16, pre_wrap);
	connect_pair(&c2, &s2, 8, 16, 16, pre_wrap);
	if (dv_query_qp(c.id->qp, &dv))
		DIE("rsiwdv_query_qp");
	ctl = dv.sq_ring;
	if (!broken) {
		uint32_t p = ctl->producer;
		struct rsiw_sqe *e = (struct rsiw_sqe *)((uint8_t *)dv.sq_ring + RSIW_RING_HDR) +
				     (p & (dv.sq_entries - 1));

		memset(e, 0xA5, sizeof(*e));
		e->wr_id = 0x5eed;
		e->opcode = 0x77;
		e->num_sge = 200;
		__atomic_store_n(&ctl->producer, p + 1, __ATOMIC_RELEASE);
	} else {
		__atomic_store_n(&ctl->producer, ctl->producer + 0x80000000u, __ATOMIC_RELEASE);
	}
	dv_sq_doorbell(c.id->qp);
	ok = !poll_one(&c, &wc) && wc.status == IBV_WC_LOC_QP_OP_ERR &&
	     (broken || wc.wr_id == 0x5eed);
	CHECK(ok, "%s: completes with LOC_QP_OP_ERR (%s)",
	      broken ? "a producer index a ring ahead" : "an entry with opcode 0x77 and 200 SGEs",
	      ibv_wc_status_str(wc.status));
	CHECK(wait_err(c.id->qp), "%s: the QP is in Error", broken ? "broken index" : "bad entry");
	ok = !poll_one(&s, &wc) && wc.status == IBV_WC_WR_FLUSH_ERR;
	CHECK(ok, "the peer's receives are flushed (%s)", ibv_wc_status_str(wc.status));
	if (broken) {
		/* Make the index sane again, then post: flushed. */
		__atomic_store_n(&ctl->producer, ctl->consumer, __ATOMIC_RELEASE);
	}
	/* Whatever else completes first is a flush; then ours. */
	ok = !post_send(&c, 77, IBV_WR_SEND, c.buf, 8, c.mr->lkey, 0, 0);
	while (ok && !poll_one(&c, &wc) && wc.wr_id != 77)
		ok = wc.status == IBV_WC_WR_FLUSH_ERR;
	ok = ok && wc.wr_id == 77 && wc.status == IBV_WC_WR_FLUSH_ERR;
	CHECK(ok, "a Send posted afterwards is flushed (id %" PRIu64 ", %s, qp %u; ours %u, peer %u)",
	      wc.wr_id, ibv_wc_status_str(wc.status), wc.qp_num, c.id->qp->qp_num,
	      s.id->qp->qp_num);
	ok = !post_send(&c2, 5, IBV_WR_SEND, c2.buf, 64, c2.mr->lkey, 0, 0) && !poll_one(&c2, &wc) &&
	     wc.status == IBV_WC_SUCCESS && !poll_one(&s2, &wc) && wc.status == IBV_WC_SUCCESS;
	CHECK(ok, "another connection of the process is unaffected");
	disconnect_pair(&c2);
	teardown_end(&c);
	teardown_end(&s);
	teardown_end(&c2);
	teardown_end(&s2);
}

int main(int argc, char **argv)
{
	struct ibv_device **devs;
	void *lib = NULL;
	int i, n;

	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc < 3) {
		fprintf(stderr, "usage: %s SERVER-ADDR CLIENT-ADDR [PORT]\n", argv[0]);
		return 2;
	}
	saddr = argv[1];
	caddr = argv[2];
	if (argc > 3)
		port_no = atoi(argv[3]);
	/* Load the provider through libibverbs, then find its direct verbs. */
	devs = ibv_get_device_list(&n);
	for (i = 0; devs && i < n && !lib; i++) {
		struct ibv_context *ctx = ibv_open_device(devs[i]);

		if (ctx)
			ibv_close_device(ctx);
	}
	if (devs)
		ibv_free_device_list(devs);
	lib = rsiw_dv_lib();
	if (lib) {
		dv_query_qp = (int (*)(struct ibv_qp *, struct rsiwdv_qp *))dlsym(lib, "rsiwdv_query_qp");
		dv_sq_doorbell = (int (*)(struct ibv_qp *))dlsym(lib, "rsiwdv_sq_doorbell");
		dv_masked = (int (*)(struct ibv_qp *, const struct rsiwdv_masked_atomic *))dlsym(
			lib, "rsiwdv_post_masked_atomic");
	}
	CHECK(dv_query_qp && dv_sq_doorbell && dv_masked, "the provider's direct verbs are found");
	if (!dv_query_qp)
		return 1;
	channel = rdma_create_event_channel();
	if (!channel)
		DIE("rdma_create_event_channel");

	costs_and_full_rings();
	wrap_around();
	ext_ops();
	remote_invalidation_refused();
	cq_overflow();
	hostile(0);
	hostile(1);
	printf("%s\n", failures ? "FAILED" : "PASSED");
	return failures ? 1 : 0;
}
