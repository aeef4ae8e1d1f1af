// SPDX-License-Identifier: GPL-2.0
/*
 * rsiw-hostile: what an unprivileged process may try against rsiw's
 * process boundary (Documentation/security.md), one case per run, each
 * printing TAP-like "ok - ..." / "not ok - ..." lines and exiting 0 only
 * if all its checks passed (tests/security/hostile-process.sh runs it as
 * nobody).
 *
 *   rsiw-hostile cq-overflow DEV
 *	A CQ of a few entries that is never drained: a QP with many receives
 *	posted is moved to Error (each flushed receive is a completion the
 *	full CQ refuses), then receives are posted to the failed QP in rounds
 *	(each flushed again). The verbs make a CQ overrun fatal and rsiw
 *	reports it once for the CQ's life: at most one IBV_EVENT_CQ_ERR may
 *	come, however many completions were refused (before: one per refused
 *	completion, each an unaccounted kernel allocation).
 *   rsiw-hostile poll-after-destroy DEV
 *	With RSIW_NO_RINGS=1 (commands only, the CQ in the kernel): receives
 *	posted, the QP destroyed (its receives flushed into the CQ), then the
 *	CQ polled. No completion of the destroyed QP may be left: uverbs'
 *	POLL_CQ reads wc->qp->qp_num, a use after free of the ib_qp.
 *   rsiw-hostile foreign-qpn DEV ADDR PORT
 *	A second process (forked, its own context) owns a QP; this one passes
 *	that QP's number to rdma_connect and to rdma_accept: both must fail
 *	(EACCES). Its own QPs connect and accept (control).
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netdb.h>
#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

static int failed;

static void result(int ok, const char *what)
{
	printf("%s - %s\n", ok ? "ok" : "not ok", what);
	fflush(stdout);
	if (!ok)
		failed = 1;
}

static void die(const char *what)
{
	printf("not ok - %s: %s\n", what, strerror(errno));
	exit(1);
}

static struct ibv_context *open_dev(const char *name)
{
	struct ibv_device **list = ibv_get_device_list(NULL);
	struct ibv_context *ctx = NULL;

	for (int i = 0; list && list[i]; i++)
		if (!strcmp(ibv_get_device_name(list[i]), name))
			ctx = ibv_open_device(list[i]);
	if (list)
		ibv_free_device_list(list);
	if (!ctx)
		die("open the device");
	return ctx;
}

static struct ibv_qp *make_qp(struct ibv_pd *pd, struct ibv_cq *cq, int max_recv)
{
	struct ibv_qp_init_attr a = {
		.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 4, .max_recv_wr = max_recv, .max_send_sge = 1, .max_recv_sge = 1 },
	};
	struct ibv_qp *qp = ibv_create_qp(pd, &a);
	struct ibv_qp_attr m = { .qp_state = IBV_QPS_INIT };

	if (!qp)
		die("create a QP");
	if (ibv_modify_qp(qp, &m, IBV_QP_STATE))
		die("QP to INIT");
	return qp;
}

static int post_recvs(struct ibv_qp *qp, int n, uint64_t base)
{
	for (int i = 0; i < n; i++) {
		struct ibv_recv_wr wr = { .wr_id = base + i }, *bad;

		if (ibv_post_recv(qp, &wr, &bad))
			return i;
	}
	return n;
}

/* Async events of `ctx` queued now (non-blocking); CQ_ERRs in *cq_err. */
static int drain_async(struct ibv_context *ctx, int *cq_err)
{
	int n = 0, fl = fcntl(ctx->async_fd, F_GETFL);
	struct ibv_async_event ev;

	fcntl(ctx->async_fd, F_SETFL, fl | O_NONBLOCK);
	while (!ibv_get_async_event(ctx, &ev)) {
		if (ev.event_type == IBV_EVENT_CQ_ERR)
			(*cq_err)++;
		ibv_ack_async_event(&ev);
		n++;
	}
	fcntl(ctx->async_fd, F_SETFL, fl);
	return n;
}

static int cq_overflow(const char *dev)
{
	struct ibv_context *ctx = open_dev(dev);
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	struct ibv_cq *cq = pd ? ibv_create_cq(ctx, 4, NULL, NULL, 0) : NULL;
	struct ibv_qp_attr m = { .qp_state = IBV_QPS_ERR };
	int posted, refused, cq_err = 0, rounds = 20, per = 200;
	struct ibv_qp *qp;
	char what[160];

	if (!cq)
		die("create a CQ of 4");
	qp = make_qp(pd, cq, 256);
	posted = post_recvs(qp, per, 0);
	if (ibv_modify_qp(qp, &m, IBV_QP_STATE))
		die("QP to ERR");
	/* In Error every receive posted is flushed (by the TX work). */
	for (int r = 1; r < rounds; r++) {
		posted += post_recvs(qp, per, (uint64_t)r * per);
		usleep(20000);
	}
	usleep(500000);
	drain_async(ctx, &cq_err);
	refused = posted - cq->cqe;
	snprintf(what, sizeof(what), "cq-overflow: %d completions into a CQ of %d never drained (%d refused): "
		 "%d IBV_EVENT_CQ_ERR (at most 1)", posted, cq->cqe, refused, cq_err);
	result(posted > 2 * cq->cqe, "cq-overflow: the failed QP took the receives");
	result(cq_err <= 1, what);
	/* Drained, then overrun again: still no second event (fatal once). */
	{
		struct ibv_wc wc[16];
		int got = 0, n;

		while ((n = ibv_poll_cq(cq, 16, wc)) > 0)
			got += n;
		post_recvs(qp, per, 1u << 30);
		usleep(500000);
		drain_async(ctx, &cq_err);
		snprintf(what, sizeof(what), "cq-overflow: after draining %d and a second overrun: %d CQ_ERR in all "
			 "(at most 1)", got, cq_err);
		result(got >= 1 && cq_err <= 1, what);
	}
	ibv_destroy_qp(qp);
	ibv_destroy_cq(cq);
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	return failed;
}

static int poll_after_destroy(const char *dev)
{
	struct ibv_context *ctx = open_dev(dev);
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	struct ibv_cq *cq = pd ? ibv_create_cq(ctx, 256, NULL, NULL, 0) : NULL;
	struct ibv_wc wc[64];
	struct ibv_qp *qp, *live;
	uint32_t gone_qpn;
	int n, left = 0, others = 0, posted;
	char what[160];

	if (!cq)
		die("create a CQ");
	result(getenv("RSIW_NO_RINGS") != NULL, "poll-after-destroy: RSIW_NO_RINGS is set (a kernel-side CQ)");
	qp = make_qp(pd, cq, 32);
	live = make_qp(pd, cq, 32);
	gone_qpn = qp->qp_num;
	posted = post_recvs(qp, 16, 0);
	/* A QP that lives: its flushed completions must stay. */
	post_recvs(live, 4, 100);
	{
		struct ibv_qp_attr m = { .qp_state = IBV_QPS_ERR };

		if (ibv_modify_qp(live, &m, IBV_QP_STATE))
			die("live QP to ERR");
	}
	usleep(100000);
	if (ibv_destroy_qp(qp))
		die("destroy the QP");
	/* Let the core reuse the freed ib_qp's memory. */
	for (int i = 0; i < 64; i++) {
		struct ibv_qp *q = make_qp(pd, cq, 1);

		ibv_destroy_qp(q);
	}
	while ((n = ibv_poll_cq(cq, 64, wc)) > 0)
		for (int i = 0; i < n; i++) {
			if (wc[i].wr_id < 100)
				left++;
			else if (wc[i].qp_num == live->qp_num)
				others++;
		}
	snprintf(what, sizeof(what), "poll-after-destroy: %d of %d completions of destroyed QP %u left in the CQ (0)",
		 left, posted, gone_qpn);
	result(left == 0, what);
	snprintf(what, sizeof(what), "poll-after-destroy: the live QP's 4 flushed receives are still there (%d)", others);
	result(others == 4, what);
	ibv_destroy_qp(live);
	ibv_destroy_cq(cq);
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	return failed;
}

/* ---- foreign qp_num ---------------------------------------------------- */

static struct rdma_event_channel *ch;

static struct rdma_cm_event *next_event(int timeout_ms)
{
	struct pollfd p = { .fd = ch->fd, .events = POLLIN };
	struct rdma_cm_event *ev;

	if (poll(&p, 1, timeout_ms) != 1 || rdma_get_cm_event(ch, &ev))
		return NULL;
	return ev;
}

/* Waits for an event of type `type`; returns it (acked by the caller). */
static struct rdma_cm_event *wait_event(enum rdma_cm_event_type type, const char *what)
{
	struct rdma_cm_event *ev;

	while ((ev = next_event(10000))) {
		if (ev->event == type)
			return ev;
		printf("# %s: got %s (status %d)\n", what, rdma_event_str(ev->event), ev->status);
		rdma_ack_cm_event(ev);
	}
	printf("# %s: no %s\n", what, rdma_event_str(type));
	return NULL;
}

static struct rdma_cm_id *resolved_id(struct sockaddr_in *dst)
{
	struct rdma_cm_id *id;
	struct rdma_cm_event *ev;

	if (rdma_create_id(ch, &id, NULL, RDMA_PS_TCP))
		die("rdma_create_id");
	if (rdma_resolve_addr(id, NULL, (struct sockaddr *)dst, 2000))
		die("rdma_resolve_addr");
	if (!(ev = wait_event(RDMA_CM_EVENT_ADDR_RESOLVED, "resolve addr")))
		exit(1);
	rdma_ack_cm_event(ev);
	if (rdma_resolve_route(id, 2000))
		die("rdma_resolve_route");
	if (!(ev = wait_event(RDMA_CM_EVENT_ROUTE_RESOLVED, "resolve route")))
		exit(1);
	rdma_ack_cm_event(ev);
	return id;
}

static struct ibv_qp *id_qp(struct rdma_cm_id *id)
{
	struct ibv_pd *pd = ibv_alloc_pd(id->verbs);
	struct ibv_cq *cq = pd ? ibv_create_cq(id->verbs, 16, NULL, NULL, 0) : NULL;

	if (!cq)
		die("PD and CQ on the id's device");
	return make_qp(pd, cq, 4);
}

static int foreign_qpn(const char *dev, const char *addr, const char *port)
{
	int to_child[2], from_child[2];
	struct sockaddr_in dst = { .sin_family = AF_INET, .sin_port = htons(atoi(port)) };
	struct rdma_cm_id *listener, *conn, *own;
	struct rdma_cm_event *ev;
	struct rdma_conn_param p = { .responder_resources = 1, .initiator_depth = 1 };
	struct ibv_qp *own_qp;
	uint32_t victim;
	pid_t pid;
	char what[160];
	int ret;

	if (inet_pton(AF_INET, addr, &dst.sin_addr) != 1 || pipe(to_child) || pipe(from_child))
		die("setup");
	pid = fork();
	if (pid == 0) {
		/* The victim: its own process and context, a QP in INIT. */
		struct ibv_context *ctx = open_dev(dev);
		struct ibv_pd *pd = ibv_alloc_pd(ctx);
		struct ibv_cq *cq = pd ? ibv_create_cq(ctx, 16, NULL, NULL, 0) : NULL;
		struct ibv_qp *qp;
		char c;

		if (!cq)
			die("victim: PD and CQ");
		qp = make_qp(pd, cq, 4);
		if (write(from_child[1], &qp->qp_num, 4) != 4)
			_exit(1);
		/* Lives until the attacker is done. */
		if (read(to_child[0], &c, 1) < 0)
			_exit(1);
		ibv_destroy_qp(qp);
		_exit(0);
	}
	if (pid < 0 || read(from_child[0], &victim, 4) != 4)
		die("victim process");
	printf("# victim process %d owns QP %u\n", pid, victim);
	ch = rdma_create_event_channel();
	if (!ch || rdma_create_id(ch, &listener, NULL, RDMA_PS_TCP) ||
	    rdma_bind_addr(listener, (struct sockaddr *)&dst) || rdma_listen(listener, 8))
		die("listen");
	(void)dev;

	/* rdma_connect naming the victim's QP. */
	conn = resolved_id(&dst);
	p.qp_num = victim;
	ret = rdma_connect(conn, &p);
	snprintf(what, sizeof(what), "foreign-qpn: rdma_connect with another process's QP %u is refused (%d, %s)",
		 victim, ret, ret ? strerror(errno) : "accepted");
	result(ret != 0 && errno == EACCES, what);
	if (ret == 0) {
		/* Before the fix: the victim's QP is on the attacker's connection. */
		if ((ev = wait_event(RDMA_CM_EVENT_CONNECT_REQUEST, "listener"))) {
			rdma_reject(ev->id, NULL, 0);
			rdma_ack_cm_event(ev);
		}
	}
	rdma_destroy_id(conn);

	/* rdma_accept naming the victim's QP: a connection from our own QP. */
	conn = resolved_id(&dst);
	own_qp = id_qp(conn);
	p.qp_num = own_qp->qp_num;
	if (rdma_connect(conn, &p))
		die("rdma_connect with our own QP");
	result(1, "foreign-qpn: rdma_connect with the process's own QP is accepted");
	if (!(ev = wait_event(RDMA_CM_EVENT_CONNECT_REQUEST, "listener")))
		exit(1);
	own = ev->id;
	rdma_ack_cm_event(ev);
	p.qp_num = victim;
	ret = rdma_accept(own, &p);
	snprintf(what, sizeof(what), "foreign-qpn: rdma_accept with another process's QP %u is refused (%d, %s)",
		 victim, ret, ret ? strerror(errno) : "accepted");
	result(ret != 0 && errno == EACCES, what);
	rdma_destroy_id(own);
	rdma_destroy_id(conn);

	/* Control: our own QPs on both ends connect. */
	conn = resolved_id(&dst);
	own_qp = id_qp(conn);
	p.qp_num = own_qp->qp_num;
	if (rdma_connect(conn, &p))
		die("rdma_connect (control)");
	if (!(ev = wait_event(RDMA_CM_EVENT_CONNECT_REQUEST, "listener (control)")))
		exit(1);
	own = ev->id;
	rdma_ack_cm_event(ev);
	{
		struct ibv_qp *acc = id_qp(own);
		int est = 0;

		p.qp_num = acc->qp_num;
		ret = rdma_accept(own, &p);
		result(ret == 0, "foreign-qpn: rdma_accept with the process's own QP is accepted");
		while (ret == 0 && est < 2 && (ev = next_event(10000))) {
			est += ev->event == RDMA_CM_EVENT_ESTABLISHED;
			rdma_ack_cm_event(ev);
		}
		result(est == 2, "foreign-qpn: own QPs: both ends ESTABLISHED");
		rdma_disconnect(conn);
	}
	if (write(to_child[1], "x", 1) != 1)
		die("release the victim");
	waitpid(pid, &ret, 0);
	result(WIFEXITED(ret) && WEXITSTATUS(ret) == 0, "foreign-qpn: the victim process exits cleanly");
	return failed;
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc >= 3 && !strcmp(argv[1], "cq-overflow"))
		return cq_overflow(argv[2]);
	if (argc >= 3 && !strcmp(argv[1], "poll-after-destroy"))
		return poll_after_destroy(argv[2]);
	if (argc >= 5 && !strcmp(argv[1], "foreign-qpn"))
		return foreign_qpn(argv[2], argv[3], argv[4]);
	fprintf(stderr, "usage: %s cq-overflow DEV | poll-after-destroy DEV | foreign-qpn DEV ADDR PORT\n", argv[0]);
	return 2;
}
