// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * rsiw-uverbs-check: what the rdma-core tools do not check, from
 * userspace through libibverbs and librdmacm, with every result
 * compared: RFC 7306 atomics (FetchAdd, CmpSwap that matches and one that
 * does not), Write with Immediate (data placed, the immediate delivered
 * with the receive), Send with Immediate refused at post time, and
 * inline data taken at post time (the buffer is overwritten right after
 * the post), and a bad lkey, which completes with a protection error and
 * ends the stream on both sides; then rdma_disconnect of that QP (in
 * Error) succeeds, and a registration asking for memory windows is
 * EOPNOTSUPP. One process: a passive side on SERVER and an active side
 * bound to CLIENT, each on its own device (rdma_cm picks it by address).
 *
 *   rsiw-uverbs-check SERVER-ADDR CLIENT-ADDR [PORT]
 *
 * Prints "ok - ..." / "not ok - ..." lines; exits 0 when all pass.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

static int failures;

#define CHECK(cond, ...)                                                       \
	do {                                                                   \
		if (cond) {                                                    \
			printf("ok - ");                                       \
		} else {                                                       \
			printf("not ok - ");                                   \
			failures++;                                            \
		}                                                              \
		printf(__VA_ARGS__);                                           \
		printf("\n");                                                  \
	} while (0)

#define DIE(...)                                                               \
	do {                                                                   \
		printf("not ok - ");                                           \
		printf(__VA_ARGS__);                                           \
		printf(" (%s)\n", strerror(errno));                            \
		exit(1);                                                       \
	} while (0)

/* One end: its cm_id, PD, CQ, QP and a registered buffer. */
struct end {
	struct rdma_cm_id *id;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_mr *mr;
	uint64_t *buf; /* 4 KiB: [0] atomic target, [1] atomic result, 8.. data */
};

#define BUF_SIZE 4096

static struct rdma_event_channel *channel;

static struct rdma_cm_event *expect_event(enum rdma_cm_event_type type)
{
	struct rdma_cm_event *ev;

	if (rdma_get_cm_event(channel, &ev))
		DIE("rdma_get_cm_event");
	if (ev->event != type) {
		errno = ev->status < 0 ? -ev->status : EPROTO;
		DIE("expected %s, got %s", rdma_event_str(type), rdma_event_str(ev->event));
	}
	return ev;
}

static void setup_end(struct end *e, struct rdma_cm_id *id)
{
	struct ibv_qp_init_attr attr = {
		.cap = { .max_send_wr = 16, .max_recv_wr = 16, .max_send_sge = 1,
			 .max_recv_sge = 1, .max_inline_data = 64 },
		.qp_type = IBV_QPT_RC,
	};

	e->id = id;
	e->pd = ibv_alloc_pd(id->verbs);
	if (!e->pd)
		DIE("ibv_alloc_pd");
	e->cq = ibv_create_cq(id->verbs, 32, NULL, NULL, 0);
	if (!e->cq)
		DIE("ibv_create_cq");
	attr.send_cq = attr.recv_cq = e->cq;
	if (rdma_create_qp(id, e->pd, &attr))
		DIE("rdma_create_qp");
	if (posix_memalign((void **)&e->buf, 4096, BUF_SIZE))
		DIE("posix_memalign");
	memset(e->buf, 0, BUF_SIZE);
	e->mr = ibv_reg_mr(e->pd, e->buf, BUF_SIZE,
			   IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
				   IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC);
	if (!e->mr)
		DIE("ibv_reg_mr");
}

/* Polls one completion (10 s at most). */
static int poll_one(struct end *e, struct ibv_wc *wc)
{
	struct timespec start, now;

	clock_gettime(CLOCK_MONOTONIC, &start);
	for (;;) {
		int n = ibv_poll_cq(e->cq, 1, wc);

		if (n < 0)
			DIE("ibv_poll_cq");
		if (n == 1)
			return 0;
		clock_gettime(CLOCK_MONOTONIC, &now);
		if (now.tv_sec - start.tv_sec > 10)
			return -1;
	}
}

static int post_recv(struct end *e, uint64_t wr_id, void *addr, uint32_t len)
{
	struct ibv_sge sge = { .addr = (uintptr_t)addr, .length = len, .lkey = e->mr->lkey };
	struct ibv_recv_wr wr = { .wr_id = wr_id, .sg_list = &sge, .num_sge = 1 }, *bad;

	return ibv_post_recv(e->id->qp, &wr, &bad);
}

static int post_atomic(struct end *c, struct end *s, enum ibv_wr_opcode op, uint64_t cmp_add,
		       uint64_t swap)
{
	struct ibv_sge sge = { .addr = (uintptr_t)&c->buf[1], .length = 8, .lkey = c->mr->lkey };
	struct ibv_send_wr wr = {
		.wr_id = op,
		.sg_list = &sge,
		.num_sge = 1,
		.opcode = op,
		.send_flags = IBV_SEND_SIGNALED,
		.wr.atomic = { .remote_addr = (uintptr_t)&s->buf[0], .compare_add = cmp_add,
			       .swap = swap, .rkey = s->mr->rkey },
	}, *bad;

	return ibv_post_send(c->id->qp, &wr, &bad);
}

/* One atomic: its completion and the original value it returned. */
static int atomic_op(struct end *c, struct end *s, enum ibv_wr_opcode op, uint64_t cmp_add,
		     uint64_t swap, uint64_t *orig)
{
	struct ibv_wc wc;

	c->buf[1] = 0xdeadbeef;
	if (post_atomic(c, s, op, cmp_add, swap) || poll_one(c, &wc) || wc.status != IBV_WC_SUCCESS)
		return -1;
	*orig = c->buf[1];
	return 0;
}

int main(int argc, char **argv)
{
	const char *saddr, *caddr, *port = "7471";
	struct rdma_addrinfo hints = { .ai_port_space = RDMA_PS_TCP }, *sres, *cres;
	struct rdma_conn_param param = { .responder_resources = 4, .initiator_depth = 4 };
	struct rdma_cm_id *listener, *cid;
	struct rdma_cm_event *ev;
	struct end s = { 0 }, c = { 0 };
	struct ibv_wc wc;
	uint64_t orig;
	int i, ok;

	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc < 3) {
		fprintf(stderr, "usage: %s SERVER-ADDR CLIENT-ADDR [PORT]\n", argv[0]);
		return 2;
	}
	saddr = argv[1];
	caddr = argv[2];
	if (argc > 3)
		port = argv[3];

	channel = rdma_create_event_channel();
	if (!channel)
		DIE("rdma_create_event_channel");

	/* Passive side: listen on SERVER. */
	hints.ai_flags = RAI_PASSIVE;
	if (rdma_getaddrinfo(saddr, port, &hints, &sres))
		DIE("rdma_getaddrinfo %s", saddr);
	if (rdma_create_id(channel, &listener, NULL, RDMA_PS_TCP) ||
	    rdma_bind_addr(listener, sres->ai_src_addr) || rdma_listen(listener, 1))
		DIE("listen on %s", saddr);

	/* Active side: from CLIENT to SERVER. */
	hints.ai_flags = 0;
	if (rdma_getaddrinfo(saddr, port, &hints, &cres))
		DIE("rdma_getaddrinfo");
	if (rdma_create_id(channel, &cid, NULL, RDMA_PS_TCP))
		DIE("rdma_create_id");
	{
		struct sockaddr_in src = { .sin_family = AF_INET };

		if (inet_pton(AF_INET, caddr, &src.sin_addr) != 1)
			DIE("client address %s", caddr);
		if (rdma_resolve_addr(cid, (struct sockaddr *)&src, cres->ai_dst_addr, 2000))
			DIE("rdma_resolve_addr");
	}
	rdma_ack_cm_event(expect_event(RDMA_CM_EVENT_ADDR_RESOLVED));
	if (rdma_resolve_route(cid, 2000))
		DIE("rdma_resolve_route");
	rdma_ack_cm_event(expect_event(RDMA_CM_EVENT_ROUTE_RESOLVED));
	setup_end(&c, cid);
	CHECK(strcmp(ibv_get_device_name(cid->verbs->device), "rsiw1") == 0,
	      "the active side is on rsiw1 (%s)", ibv_get_device_name(cid->verbs->device));
	if (rdma_connect(cid, &param))
		DIE("rdma_connect");

	ev = expect_event(RDMA_CM_EVENT_CONNECT_REQUEST);
	setup_end(&s, ev->id);
	CHECK(strcmp(ibv_get_device_name(ev->id->verbs->device), "rsiw0") == 0,
	      "the passive side is on rsiw0 (%s)", ibv_get_device_name(ev->id->verbs->device));
	/* Receives first: iWARP has no RNR retry. */
	for (i = 0; i < 4; i++)
		if (post_recv(&s, 100 + i, (char *)s.buf + 1024 * (i + 1) - 256, 256))
			DIE("ibv_post_recv");
	if (rdma_accept(ev->id, &param))
		DIE("rdma_accept");
	rdma_ack_cm_event(ev);
	/* Both ends see ESTABLISHED on the one channel, in either order. */
	for (i = 0; i < 2; i++)
		rdma_ack_cm_event(expect_event(RDMA_CM_EVENT_ESTABLISHED));

	/* FetchAdd: ten adds of 5 from 100, each original value in turn. */
	s.buf[0] = 100;
	ok = 1;
	for (i = 0; i < 10; i++) {
		if (atomic_op(&c, &s, IBV_WR_ATOMIC_FETCH_AND_ADD, 5, 0, &orig) || orig != 100 + 5u * i)
			ok = 0;
	}
	CHECK(ok, "FetchAdd returned 100, 105, ... 145 in turn");
	CHECK(s.buf[0] == 150, "FetchAdd left 150 in the target (%" PRIu64 ")", s.buf[0]);

	/* CmpSwap: a match swaps; a mismatch leaves the word and returns it. */
	ok = !atomic_op(&c, &s, IBV_WR_ATOMIC_CMP_AND_SWP, 150, 7, &orig) && orig == 150;
	CHECK(ok && s.buf[0] == 7, "CmpSwap 150->7 swapped (orig %" PRIu64 ", now %" PRIu64 ")",
	      orig, s.buf[0]);
	ok = !atomic_op(&c, &s, IBV_WR_ATOMIC_CMP_AND_SWP, 150, 9, &orig) && orig == 7;
	CHECK(ok && s.buf[0] == 7, "CmpSwap 150->9 on 7 left it (orig %" PRIu64 ", now %" PRIu64 ")",
	      orig, s.buf[0]);

	/* Write with Immediate: data placed, then the receive with the value. */
	{
		char *src = (char *)c.buf + 2048, *dst = (char *)s.buf + 3072 + 512;
		struct ibv_sge sge = { .addr = (uintptr_t)src, .length = 100, .lkey = c.mr->lkey };
		struct ibv_send_wr wr = {
			.wr_id = 7,
			.sg_list = &sge,
			.num_sge = 1,
			.opcode = IBV_WR_RDMA_WRITE_WITH_IMM,
			.send_flags = IBV_SEND_SIGNALED,
			.imm_data = htonl(0x12345678),
			.wr.rdma = { .remote_addr = (uintptr_t)dst, .rkey = s.mr->rkey },
		}, *bad;

		memset(src, 'w', 100);
		ok = !ibv_post_send(c.id->qp, &wr, &bad) && !poll_one(&c, &wc) &&
		     wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_RDMA_WRITE;
		CHECK(ok, "Write with Immediate completes at the sender");
		ok = !poll_one(&s, &wc) && wc.status == IBV_WC_SUCCESS &&
		     wc.opcode == IBV_WC_RECV_RDMA_WITH_IMM && (wc.wc_flags & IBV_WC_WITH_IMM) &&
		     wc.imm_data == htonl(0x12345678) && wc.wr_id == 100;
		CHECK(ok, "the receiver gets RECV_RDMA_WITH_IMM with the value (op %d, imm %#x)",
		      wc.opcode, ntohl(wc.imm_data));
		CHECK(memcmp(dst, src, 100) == 0, "the Write's data is placed");
	}

	/* Send with Immediate: RFC 7306 has none; refused at post time. */
	{
		struct ibv_sge sge = { .addr = (uintptr_t)c.buf, .length = 8, .lkey = c.mr->lkey };
		struct ibv_send_wr wr = { .wr_id = 8, .sg_list = &sge, .num_sge = 1,
					  .opcode = IBV_WR_SEND_WITH_IMM,
					  .send_flags = IBV_SEND_SIGNALED }, *bad;

		CHECK(ibv_post_send(c.id->qp, &wr, &bad) != 0, "Send with Immediate is refused");
	}

	/* Inline: the data is taken at post time. */
	{
		char msg[48];
		struct ibv_sge sge = { .addr = (uintptr_t)msg, .length = sizeof(msg), .lkey = 0 };
		struct ibv_send_wr wr = { .wr_id = 9, .sg_list = &sge, .num_sge = 1,
					  .opcode = IBV_WR_SEND,
					  .send_flags = IBV_SEND_SIGNALED | IBV_SEND_INLINE }, *bad;
		char *got = (char *)s.buf + 2048 - 256;

		memset(msg, 'i', sizeof(msg));
		ok = !ibv_post_send(c.id->qp, &wr, &bad);
		memset(msg, 'X', sizeof(msg));
		ok = ok && !poll_one(&c, &wc) && wc.status == IBV_WC_SUCCESS;
		CHECK(ok, "an inline Send completes");
		ok = !poll_one(&s, &wc) && wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_RECV &&
		     wc.byte_len == sizeof(msg) && wc.wr_id == 101;
		CHECK(ok, "it is received (%u octets)", wc.byte_len);
		memset(msg, 'i', sizeof(msg));
		CHECK(memcmp(got, msg, sizeof(msg)) == 0, "with the data as it was at post time");
	}

	/* A Send from an unregistered lkey: a local protection error. */
	{
		struct ibv_sge sge = { .addr = (uintptr_t)c.buf, .length = 8, .lkey = c.mr->lkey ^ 0xff };
		struct ibv_send_wr wr = { .wr_id = 10, .sg_list = &sge, .num_sge = 1,
					  .opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED }, *bad;

		ok = !ibv_post_send(c.id->qp, &wr, &bad) && !poll_one(&c, &wc) &&
		     wc.status == IBV_WC_LOC_PROT_ERR && wc.wr_id == 10;
		CHECK(ok, "a Send with a bad lkey completes with LOC_PROT_ERR (%s)",
		      ibv_wc_status_str(wc.status));
	}

	/* That ended the stream: this QP in Error, later WRs flushed, and the
	 * peer's posted receives flushed by the Terminate it got. */
	{
		struct ibv_qp_attr attr;
		struct ibv_qp_init_attr init;
		struct ibv_sge sge = { .addr = (uintptr_t)c.buf, .length = 8, .lkey = c.mr->lkey };
		struct ibv_send_wr wr = { .wr_id = 11, .sg_list = &sge, .num_sge = 1,
					  .opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED }, *bad;
		int n;

		ok = 0;
		for (i = 0; i < 2000 && !ok; i++) {
			ok = !ibv_query_qp(c.id->qp, &attr, IBV_QP_STATE, &init) &&
			     attr.qp_state == IBV_QPS_ERR;
			if (!ok)
				nanosleep(&(struct timespec){ .tv_nsec = 1000000 }, NULL);
		}
		CHECK(ok, "the QP is in Error after it");
		ok = !ibv_post_send(c.id->qp, &wr, &bad) && !poll_one(&c, &wc) &&
		     wc.status == IBV_WC_WR_FLUSH_ERR && wc.wr_id == 11;
		CHECK(ok, "a Send posted then is flushed (%s)", ibv_wc_status_str(wc.status));
		memset(&wc, 0, sizeof(wc));
		for (n = 0; n < 2 && !poll_one(&s, &wc); n++)
			if (wc.status != IBV_WC_WR_FLUSH_ERR || wc.wr_id != 102u + n)
				break;
		CHECK(n == 2, "the peer's two posted receives are flushed (%d; last: id %" PRIu64
		      ", %s)", n, wc.wr_id, ibv_wc_status_str(wc.status));
	}

	/* rdma_disconnect on iWARP first moves the QP to SQD: a QP already in
	 * Error takes that as a no-op, not EINVAL (perftest and rdma-core's
	 * tests disconnect after the peer did). */
	CHECK(rdma_disconnect(cid) == 0, "rdma_disconnect of a QP in Error succeeds (errno %d)", errno);

	/* Memory windows are not supported: a registration asking for them is
	 * refused with EOPNOTSUPP (so test suites skip), not EACCES. */
	{
		struct ibv_mr *mw_mr;

		errno = 0;
		mw_mr = ibv_reg_mr(c.pd, c.buf, 4096, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_MW_BIND);
		CHECK(!mw_mr && errno == EOPNOTSUPP, "reg_mr with MW_BIND is EOPNOTSUPP (errno %d)", errno);
		if (mw_mr)
			ibv_dereg_mr(mw_mr);
	}

	rdma_disconnect(cid);
	rdma_destroy_qp(cid);
	rdma_destroy_qp(s.id);
	ibv_dereg_mr(c.mr);
	ibv_dereg_mr(s.mr);
	ibv_destroy_cq(c.cq);
	ibv_destroy_cq(s.cq);
	ibv_dealloc_pd(c.pd);
	ibv_dealloc_pd(s.pd);
	free(c.buf);
	free(s.buf);
	printf("%s\n", failures ? "FAILED" : "PASSED");
	return failures ? 1 : 0;
}
