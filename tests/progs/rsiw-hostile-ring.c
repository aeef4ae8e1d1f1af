// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * rsiw-hostile-ring: a process that turns its shared rings against the
 * kernel (run as an unprivileged user by tests/security/hostile-ring.sh).
 *
 * - Producer race: on a QP in Error (its rings of include/uapi/rdma/
 *   rsiw-abi.h mapped), one thread keeps storing producer = consumer +
 *   entries into the send and receive rings while the main thread rings
 *   the doorbells (rsiwdv_sq_doorbell, and the receive ring's as the
 *   provider rings it in Error). Every doorbell must take at most a
 *   ring's worth of entries (how far the consumer index it alone moves
 *   went) and return within a bound: the kernel flushes what was posted
 *   when the flush began, not until the ring is empty. A kernel that
 *   loops pins the CPU under the stream lock for as long as the racer
 *   keeps ahead (soft lockup, RCU stall: the guest script checks dmesg).
 * - Two QPs on one SRQ, one peer closing: the other QP's receives posted
 *   on the SRQ are still there (none completes on the closed QP, which
 *   raises IBV_EVENT_QP_LAST_WQE_REACHED) and complete with data.
 *
 *   rsiw-hostile-ring SERVER-ADDR CLIENT-ADDR [SECONDS] [PORT]
 *
 * Prints "ok - ..." / "not ok - ..."; exits 0 when all pass.
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <infiniband/verbs.h>
#include <rdma/ib_user_verbs.h>
#include <rdma/rdma_cma.h>

#include "check-common.h"

#include "../../include/uapi/rdma/rsiw-abi.h"
#include "../../providers/rsiw/rsiwdv.h"
#include "rsiw-dv-lib.h"

static int (*dv_query_qp)(struct ibv_qp *, struct rsiwdv_qp *);
static int (*dv_sq_doorbell)(struct ibv_qp *);

static const char *saddr, *caddr;
static int port_no = 7496;
static int race_secs = 25;

/* Longest a doorbell may take while the producer races (TCG is slow; an
 * unbounded flush takes the racer's whole run). */
#define DOORBELL_BOUND_MS 2000

static double now_ms(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

/* The next event on `ch`, which must be TYPE. */
static struct rdma_cm_event *expect_on(struct rdma_event_channel *ch, enum rdma_cm_event_type type)
{
	struct rdma_event_channel *saved = channel;
	struct rdma_cm_event *ev;

	channel = ch;
	ev = expect_event_of(type, 1);
	channel = saved;
	return ev;
}

static void drain_async(struct ibv_context *ctx, int *last_wqe, struct ibv_qp *qp)
{
	struct ibv_async_event ev;

	while (!ibv_get_async_event(ctx, &ev)) {
		if (ev.event_type == IBV_EVENT_QP_LAST_WQE_REACHED && last_wqe && ev.element.qp == qp)
			(*last_wqe)++;
		ibv_ack_async_event(&ev);
	}
}

static void nonblocking(int fd)
{
	fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
}

/* ---- producer race ------------------------------------------------------ */

/*
 * The receive ring's doorbell as the provider rings it: an empty
 * POST_RECV command on the QP's handle (a receive posted through the
 * provider would find the ring full, the racer keeps it so, and ring
 * nothing).
 */
static void rq_doorbell(struct ibv_qp *qp)
{
	struct {
		struct ib_uverbs_cmd_hdr hdr;
		struct ib_uverbs_post_recv cmd;
	} req = { 0 };
	struct ib_uverbs_post_recv_resp resp = { 0 };

	req.hdr.command = IB_USER_VERBS_CMD_POST_RECV;
	req.hdr.in_words = sizeof(req) / 4;
	req.hdr.out_words = sizeof(resp) / 4;
	req.cmd.response = (uintptr_t)&resp;
	req.cmd.qp_handle = qp->handle;
	req.cmd.wqe_size = sizeof(struct ib_uverbs_recv_wr);
	(void)!write(qp->context->cmd_fd, &req, sizeof(req));
}

struct race {
	struct rsiw_ring_ctl *sq, *rq;
	uint32_t sq_entries, rq_entries;
	volatile int stop;
	unsigned long stores;
};

static void *racer(void *arg)
{
	struct race *r = arg;

	while (!r->stop) {
		uint32_t c = __atomic_load_n(&r->sq->consumer, __ATOMIC_ACQUIRE);

		__atomic_store_n(&r->sq->producer, c + r->sq_entries, __ATOMIC_RELEASE);
		c = __atomic_load_n(&r->rq->consumer, __ATOMIC_ACQUIRE);
		__atomic_store_n(&r->rq->producer, c + r->rq_entries, __ATOMIC_RELEASE);
		r->stores++;
	}
	return NULL;
}

static struct ibv_context *open_dev(const char *addr)
{
	struct rdma_cm_id *id;
	struct rdma_addrinfo hints = { .ai_flags = RAI_PASSIVE, .ai_port_space = RDMA_PS_TCP }, *res;
	struct ibv_context *ctx;

	if (rdma_getaddrinfo(addr, NULL, &hints, &res))
		DIE("rdma_getaddrinfo %s", addr);
	if (rdma_create_id(NULL, &id, NULL, RDMA_PS_TCP))
		DIE("rdma_create_id");
	if (rdma_bind_addr(id, res->ai_src_addr))
		DIE("rdma_bind_addr %s", addr);
	ctx = ibv_open_device(id->verbs->device);
	rdma_destroy_id(id);
	rdma_freeaddrinfo(res);
	if (!ctx)
		DIE("ibv_open_device");
	return ctx;
}

static void producer_race(void)
{
	struct ibv_context *ctx = open_dev(caddr);
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	struct ibv_cq *cq = pd ? ibv_create_cq(ctx, 4096, NULL, NULL, 0) : NULL;
	struct ibv_qp_init_attr ia = {
		.cap = { .max_send_wr = 64, .max_recv_wr = 64, .max_send_sge = 1, .max_recv_sge = 1 },
		.qp_type = IBV_QPT_RC,
	};
	struct ibv_qp_attr qa = { .qp_state = IBV_QPS_ERR };
	struct ibv_wc wc[256];
	struct rsiwdv_qp dv;
	struct race r = { 0 };
	pthread_t th;
	double t0, worst_sq = 0, worst_rq = 0, start;
	unsigned long doorbells = 0, flushed = 0;
	uint32_t most_sq = 0, most_rq = 0, c0;
	int n;

	if (!cq)
		DIE("pd/cq");
	ia.send_cq = ia.recv_cq = cq;
	struct ibv_qp *qp = ibv_create_qp(pd, &ia);
	if (!qp)
		DIE("ibv_create_qp");
	if (ibv_modify_qp(qp, &qa, IBV_QP_STATE))
		DIE("ibv_modify_qp ERR");
	if (dv_query_qp(qp, &dv) || !dv.sq_ring || !dv.rq_ring)
		DIE("rsiwdv_query_qp: the QP has no rings");
	nonblocking(ctx->async_fd);
	r.sq = dv.sq_ring;
	r.rq = dv.rq_ring;
	r.sq_entries = dv.sq_entries;
	r.rq_entries = dv.rq_entries;
	if (pthread_create(&th, NULL, racer, &r))
		DIE("pthread_create");
	start = now_ms();
	while (now_ms() - start < race_secs * 1e3) {
		double d;

		/* Only the kernel moves a work ring's consumer index: how far
		 * it moved is what this doorbell's flush took. */
		c0 = __atomic_load_n(&r.sq->consumer, __ATOMIC_ACQUIRE);
		t0 = now_ms();
		dv_sq_doorbell(qp);
		d = now_ms() - t0;
		c0 = __atomic_load_n(&r.sq->consumer, __ATOMIC_ACQUIRE) - c0;
		most_sq = c0 > most_sq ? c0 : most_sq;
		worst_sq = d > worst_sq ? d : worst_sq;
		c0 = __atomic_load_n(&r.rq->consumer, __ATOMIC_ACQUIRE);
		t0 = now_ms();
		rq_doorbell(qp);
		d = now_ms() - t0;
		c0 = __atomic_load_n(&r.rq->consumer, __ATOMIC_ACQUIRE) - c0;
		most_rq = c0 > most_rq ? c0 : most_rq;
		worst_rq = d > worst_rq ? d : worst_rq;
		doorbells++;
		while ((n = ibv_poll_cq(cq, 256, wc)) > 0)
			flushed += n;
		drain_async(ctx, NULL, NULL);
	}
	r.stop = 1;
	pthread_join(th, NULL);
	printf("# race: %lu doorbell pairs, %lu producer stores, %lu flushed, worst %.1f ms (send) %.1f ms (recv)\n",
	       doorbells, r.stores, flushed, worst_sq, worst_rq);
	printf("# race: most entries one doorbell took: %u of a %u-entry send ring, %u of a %u-entry receive ring\n",
	       most_sq, r.sq_entries, most_rq, r.rq_entries);
	CHECK(doorbells > 1 && r.stores > doorbells,
	      "the racer moved the producers while the doorbells rang (%lu stores, %lu doorbells)", r.stores,
	      doorbells);
	CHECK(worst_sq < DOORBELL_BOUND_MS, "a send doorbell in Error returns within %d ms while the producer races (worst %.1f ms)",
	      DOORBELL_BOUND_MS, worst_sq);
	CHECK(worst_rq < DOORBELL_BOUND_MS, "a receive doorbell in Error returns within %d ms while the producer races (worst %.1f ms)",
	      DOORBELL_BOUND_MS, worst_rq);
	CHECK(most_sq <= r.sq_entries,
	      "a send doorbell in Error takes at most a ring's worth (%u entries) while the producer races (most %u)",
	      r.sq_entries, most_sq);
	CHECK(most_rq <= r.rq_entries,
	      "a receive doorbell in Error takes at most a ring's worth (%u entries) while the producer races (most %u)",
	      r.rq_entries, most_rq);
	CHECK(flushed > 0, "the doorbells flushed entries (%lu)", flushed);
	/* Sane again: the QP goes away cleanly. */
	__atomic_store_n(&r.sq->producer, r.sq->consumer, __ATOMIC_RELEASE);
	__atomic_store_n(&r.rq->producer, r.rq->consumer, __ATOMIC_RELEASE);
	CHECK(!ibv_destroy_qp(qp), "the QP is destroyed");
	while (ibv_poll_cq(cq, 256, wc) > 0)
		;
	ibv_destroy_cq(cq);
	ibv_dealloc_pd(pd);
	drain_async(ctx, NULL, NULL);
	ibv_close_device(ctx);
}

/* ---- two QPs on one SRQ ------------------------------------------------- */

#define NRECV 8
#define MSG 512

struct client {
	struct rdma_cm_id *id;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_mr *mr;
	uint8_t buf[MSG];
};

static int poll_wait(struct ibv_cq *cq, struct ibv_wc *wc, int ms)
{
	double t0 = now_ms();

	while (now_ms() - t0 < ms) {
		int n = ibv_poll_cq(cq, 1, wc);

		if (n)
			return n < 0 ? -1 : 0;
		usleep(1000);
	}
	return -1;
}

static void srq_peer_close(void)
{
	struct rdma_event_channel *sch = rdma_create_event_channel(), *cch = rdma_create_event_channel();
	struct rdma_addrinfo hints = { .ai_flags = RAI_PASSIVE, .ai_port_space = RDMA_PS_TCP }, *sres, *cres;
	struct rdma_conn_param param = { .responder_resources = 1, .initiator_depth = 1 };
	struct rdma_cm_id *listen, *sid[2];
	struct client cl[2];
	struct ibv_context *sctx;
	struct ibv_pd *spd;
	struct ibv_cq *scq[2];
	struct ibv_srq *srq;
	struct ibv_srq_init_attr sa = { .attr = { .max_wr = 32, .max_sge = 1 } };
	struct ibv_mr *smr;
	static uint8_t rbuf[NRECV][MSG];
	struct ibv_wc wc;
	char port[16];
	int i, ok, last_wqe = 0, stray = 0;
	double t0;

	if (!sch || !cch)
		DIE("rdma_create_event_channel");
	snprintf(port, sizeof(port), "%d", port_no);
	if (rdma_getaddrinfo(saddr, port, &hints, &sres))
		DIE("rdma_getaddrinfo server");
	if (rdma_create_id(sch, &listen, NULL, RDMA_PS_TCP) || rdma_bind_addr(listen, sres->ai_src_addr) ||
	    rdma_listen(listen, 4))
		DIE("listen on %s:%d", saddr, port_no);
	sctx = listen->verbs;
	spd = ibv_alloc_pd(sctx);
	srq = spd ? ibv_create_srq(spd, &sa) : NULL;
	smr = srq ? ibv_reg_mr(spd, rbuf, sizeof(rbuf), IBV_ACCESS_LOCAL_WRITE) : NULL;
	if (!smr)
		DIE("server pd/srq/mr");
	nonblocking(sctx->async_fd);
	for (i = 0; i < 2; i++) {
		struct ibv_qp_init_attr ca = {
			.cap = { .max_send_wr = 16, .max_recv_wr = 16, .max_send_sge = 1, .max_recv_sge = 1 },
			.qp_type = IBV_QPT_RC,
		};
		struct ibv_qp_init_attr qa = {
			.cap = { .max_send_wr = 16, .max_send_sge = 1 },
			.qp_type = IBV_QPT_RC,
			.srq = srq,
		};
		struct rdma_addrinfo ch = { .ai_flags = RAI_PASSIVE, .ai_port_space = RDMA_PS_TCP };
		struct rdma_cm_event *ev;
		struct client *c = &cl[i];

		if (rdma_getaddrinfo(caddr, NULL, &ch, &cres))
			DIE("rdma_getaddrinfo client");
		if (rdma_create_id(cch, &c->id, NULL, RDMA_PS_TCP) ||
		    rdma_resolve_addr(c->id, cres->ai_src_addr, sres->ai_src_addr, 5000))
			DIE("rdma_resolve_addr");
		rdma_freeaddrinfo(cres);
		rdma_ack_cm_event(expect_on(cch, RDMA_CM_EVENT_ADDR_RESOLVED));
		if (rdma_resolve_route(c->id, 5000))
			DIE("rdma_resolve_route");
		rdma_ack_cm_event(expect_on(cch, RDMA_CM_EVENT_ROUTE_RESOLVED));
		c->pd = ibv_alloc_pd(c->id->verbs);
		c->cq = c->pd ? ibv_create_cq(c->id->verbs, 64, NULL, NULL, 0) : NULL;
		c->mr = c->cq ? ibv_reg_mr(c->pd, c->buf, MSG, IBV_ACCESS_LOCAL_WRITE) : NULL;
		if (!c->mr)
			DIE("client pd/cq/mr");
		ca.send_cq = ca.recv_cq = c->cq;
		if (rdma_create_qp(c->id, c->pd, &ca))
			DIE("rdma_create_qp client");
		if (rdma_connect(c->id, &param))
			DIE("rdma_connect");
		ev = expect_on(sch, RDMA_CM_EVENT_CONNECT_REQUEST);
		sid[i] = ev->id;
		rdma_ack_cm_event(ev);
		scq[i] = ibv_create_cq(sctx, 64, NULL, NULL, 0);
		if (!scq[i])
			DIE("server cq");
		qa.send_cq = qa.recv_cq = scq[i];
		if (rdma_create_qp(sid[i], spd, &qa))
			DIE("rdma_create_qp on the SRQ");
		if (rdma_accept(sid[i], &param))
			DIE("rdma_accept");
		rdma_ack_cm_event(expect_on(sch, RDMA_CM_EVENT_ESTABLISHED));
		rdma_ack_cm_event(expect_on(cch, RDMA_CM_EVENT_ESTABLISHED));
	}
	for (i = 0; i < NRECV; i++) {
		struct ibv_sge sge = { (uintptr_t)rbuf[i], MSG, smr->lkey };
		struct ibv_recv_wr wr = { .wr_id = 100 + i, .sg_list = &sge, .num_sge = 1 }, *bad;

		if (ibv_post_srq_recv(srq, &wr, &bad))
			DIE("ibv_post_srq_recv");
	}
	/* Peer 0 closes: server QP 0's stream ends. */
	rdma_disconnect(cl[0].id);
	rdma_ack_cm_event(expect_on(sch, RDMA_CM_EVENT_DISCONNECTED));
	t0 = now_ms();
	while (now_ms() - t0 < 3000 && !last_wqe) {
		drain_async(sctx, &last_wqe, sid[0]->qp);
		usleep(2000);
	}
	while (!poll_wait(scq[0], &wc, 300))
		stray++;
	CHECK(stray == 0, "no SRQ receive completes on the QP whose peer closed (%d did)", stray);
	CHECK(last_wqe == 1, "that QP raised IBV_EVENT_QP_LAST_WQE_REACHED once (%d)", last_wqe);
	/* Every posted receive is still there for QP 1: each message lands. */
	ok = 1;
	for (i = 0; i < NRECV && ok; i++) {
		struct ibv_sge sge = { (uintptr_t)cl[1].buf, MSG, cl[1].mr->lkey };
		struct ibv_send_wr wr = { .wr_id = i, .sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_SEND,
					  .send_flags = IBV_SEND_SIGNALED }, *bad;

		memset(cl[1].buf, 0x30 + i, MSG);
		ok = !ibv_post_send(cl[1].id->qp, &wr, &bad) && !poll_wait(cl[1].cq, &wc, 5000) &&
		     wc.status == IBV_WC_SUCCESS;
		if (!ok) {
			printf("# send %d: %s\n", i, ibv_wc_status_str(wc.status));
			break;
		}
		if (poll_wait(scq[1], &wc, 5000)) {
			printf("# receive %d: no completion within 5 s\n", i);
			ok = 0;
			break;
		}
		ok = wc.status == IBV_WC_SUCCESS && wc.byte_len == MSG && wc.wr_id == (uint64_t)(100 + i) &&
		     rbuf[i][0] == 0x30 + i && rbuf[i][MSG - 1] == 0x30 + i;
		if (!ok)
			printf("# receive %d: %s, id %" PRIu64 ", %u octets\n", i, ibv_wc_status_str(wc.status),
			       wc.wr_id, wc.byte_len);
	}
	CHECK(ok, "the other QP's %d receives on the SRQ complete in order with their data", NRECV);

	rdma_disconnect(cl[1].id);
	rdma_ack_cm_event(expect_on(sch, RDMA_CM_EVENT_DISCONNECTED));
	for (i = 0; i < 2; i++) {
		rdma_destroy_qp(sid[i]);
		rdma_destroy_id(sid[i]);
		ibv_destroy_cq(scq[i]);
		rdma_destroy_qp(cl[i].id);
		ibv_dereg_mr(cl[i].mr);
		ibv_destroy_cq(cl[i].cq);
		ibv_dealloc_pd(cl[i].pd);
		rdma_destroy_id(cl[i].id);
	}
	drain_async(sctx, NULL, NULL);
	ibv_dereg_mr(smr);
	CHECK(!ibv_destroy_srq(srq), "the SRQ is destroyed");
	ibv_dealloc_pd(spd);
	rdma_destroy_id(listen);
	rdma_freeaddrinfo(sres);
}

int main(int argc, char **argv)
{
	struct ibv_device **devs;
	void *lib = NULL;
	int i, n;

	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc < 3) {
		fprintf(stderr, "usage: %s SERVER-ADDR CLIENT-ADDR [SECONDS] [PORT]\n", argv[0]);
		return 2;
	}
	saddr = argv[1];
	caddr = argv[2];
	if (argc > 3)
		race_secs = atoi(argv[3]);
	if (argc > 4)
		port_no = atoi(argv[4]);
	/* Load the provider through libibverbs, then find its direct verbs. */
	devs = ibv_get_device_list(&n);
	for (i = 0; devs && i < n; i++) {
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
	}
	CHECK(dv_query_qp && dv_sq_doorbell, "the provider's direct verbs are found");
	if (!dv_query_qp || !dv_sq_doorbell)
		return 1;
	producer_race();
	srq_peer_close();
	printf("%s\n", failures ? "FAILED" : "PASSED");
	return failures ? 1 : 0;
}
