// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * rsiw-storm: rdma_cm connection storms, scale holds and traffic under
 * faults, through libibverbs and librdmacm (any iWARP device: rsiw through
 * its provider, siw, ...).
 *
 *   rsiw-storm server -a ADDR [-p PORT]
 *   rsiw-storm client -a SERVER -b BIND [-p PORT] [-n CYCLES] [-c CONC]
 *                     [-t TIMEOUT_S] [-s SIZE]
 *   rsiw-storm hold   -a SERVER -b BIND [-p PORT] [-n CONNS] [-c THREADS]
 *                     [-r REPEAT] [-R ROUNDS | -T SECONDS] [-w SECONDS]
 *                     [-t TIMEOUT_S]
 *
 * A round on a connection: the client posts a receive, Sends a request
 * (a seed, the address and rkey of its buffer, a payload pattern); the
 * server checks the payload, RDMA Writes SIZE bytes of a pattern of the
 * seed into the client's buffer, then Sends a reply; the client checks the
 * reply and that the Write placed exactly that pattern.
 *
 * client: CYCLES connect / one round / disconnect / destroy cycles, CONC
 * threads at a time, each cycle bounded by TIMEOUT_S and counted
 * ok / failed / timed out.
 * hold: CONNS connections opened by THREADS threads and kept, then ROUNDS
 * rounds on every connection (or rounds for SECONDS), then (-w) all kept
 * SECONDS more, then all torn down; REPEAT times. Prints MemFree and Slab (/proc/meminfo) while all
 * are up.
 * server: accepts any number of connections (one event loop), serves
 * rounds until the peer disconnects; ends on SIGTERM/SIGINT, tearing
 * everything down; prints what it served.
 *
 * Every process prints the asynchronous events of every device it opened
 * ("# async: EVENT on DEV"). Exit status 0 when nothing failed or timed
 * out (server: when it served without errors).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <netdb.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#define MAGIC_REQ 0x72736977u /* "rsiw" */
#define MAGIC_REP 0x52535457u
#define PAYLOAD 64
#define MAX_SIZE (1 << 20)
#define QDEPTH 16
#define RESOLVE_MS 2000

struct msg {
	uint32_t magic;
	uint32_t status; /* reply: 0 ok, else what the server found wrong */
	uint64_t seed;
	uint64_t addr;
	uint32_t rkey;
	uint32_t len;
	uint8_t payload[PAYLOAD];
};

static const char *addr_s, *bind_s, *port_s = "7470";
static int cycles = 100, conc = 1, timeout_s = 10, size = 4096;
static int repeat = 1, rounds = 1, seconds, linger;
static volatile sig_atomic_t stop;

static double now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec / 1e9;
}

static uint8_t pattern(uint64_t seed, size_t i)
{
	return (uint8_t)(seed * 131 + i * 7 + (i >> 8) + (seed >> 16));
}

static void fill(uint8_t *p, size_t n, uint64_t seed)
{
	for (size_t i = 0; i < n; i++)
		p[i] = pattern(seed, i);
}

static int matches(const uint8_t *p, size_t n, uint64_t seed)
{
	for (size_t i = 0; i < n; i++)
		if (p[i] != pattern(seed, i))
			return 0;
	return 1;
}

static void set_nonblock(int fd)
{
	fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
}

/* ---- asynchronous events of every device ---- */

static struct ibv_context **devs;
static int ndevs;
static atomic_int fatal_events;

static const char *event_name(enum ibv_event_type t)
{
	switch (t) {
	case IBV_EVENT_CQ_ERR: return "IBV_EVENT_CQ_ERR";
	case IBV_EVENT_QP_FATAL: return "IBV_EVENT_QP_FATAL";
	case IBV_EVENT_QP_REQ_ERR: return "IBV_EVENT_QP_REQ_ERR";
	case IBV_EVENT_QP_ACCESS_ERR: return "IBV_EVENT_QP_ACCESS_ERR";
	case IBV_EVENT_COMM_EST: return "IBV_EVENT_COMM_EST";
	case IBV_EVENT_SQ_DRAINED: return "IBV_EVENT_SQ_DRAINED";
	case IBV_EVENT_PATH_MIG: return "IBV_EVENT_PATH_MIG";
	case IBV_EVENT_PATH_MIG_ERR: return "IBV_EVENT_PATH_MIG_ERR";
	case IBV_EVENT_DEVICE_FATAL: return "IBV_EVENT_DEVICE_FATAL";
	case IBV_EVENT_PORT_ACTIVE: return "IBV_EVENT_PORT_ACTIVE";
	case IBV_EVENT_PORT_ERR: return "IBV_EVENT_PORT_ERR";
	case IBV_EVENT_LID_CHANGE: return "IBV_EVENT_LID_CHANGE";
	case IBV_EVENT_PKEY_CHANGE: return "IBV_EVENT_PKEY_CHANGE";
	case IBV_EVENT_SM_CHANGE: return "IBV_EVENT_SM_CHANGE";
	case IBV_EVENT_SRQ_ERR: return "IBV_EVENT_SRQ_ERR";
	case IBV_EVENT_SRQ_LIMIT_REACHED: return "IBV_EVENT_SRQ_LIMIT_REACHED";
	case IBV_EVENT_QP_LAST_WQE_REACHED: return "IBV_EVENT_QP_LAST_WQE_REACHED";
	case IBV_EVENT_CLIENT_REREGISTER: return "IBV_EVENT_CLIENT_REREGISTER";
	case IBV_EVENT_GID_CHANGE: return "IBV_EVENT_GID_CHANGE";
	default: return ibv_event_type_str(t);
	}
}

static void *async_thread(void *arg)
{
	struct ibv_context *ctx = arg;
	struct ibv_async_event ev;
	struct pollfd p = { .fd = ctx->async_fd, .events = POLLIN };

	set_nonblock(ctx->async_fd);
	for (;;) {
		int r = poll(&p, 1, 200);

		if (r < 0 && errno != EINTR)
			break;
		if (r <= 0)
			continue;
		if (ibv_get_async_event(ctx, &ev)) {
			if (errno == EAGAIN)
				continue;
			/* A disassociated device: no more events. */
			printf("# async: event file of %s closed (%s)\n",
			       ibv_get_device_name(ctx->device), strerror(errno));
			fflush(stdout);
			break;
		}
		printf("# async: %s on %s\n", event_name(ev.event_type),
		       ibv_get_device_name(ctx->device));
		fflush(stdout);
		if (ev.event_type == IBV_EVENT_DEVICE_FATAL)
			atomic_fetch_add(&fatal_events, 1);
		ibv_ack_async_event(&ev);
	}
	return NULL;
}

static void start_async_threads(void)
{
	devs = rdma_get_devices(&ndevs);
	for (int i = 0; devs && i < ndevs; i++) {
		pthread_t t;

		if (pthread_create(&t, NULL, async_thread, devs[i]) == 0)
			pthread_detach(t);
	}
}

/* ---- one connection ---- */

enum { C_NEW, C_ADDR, C_ROUTE, C_UP, C_DOWN, C_ERR };

struct conn {
	struct rdma_cm_id *id;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_mr *mr;
	uint8_t *buf; /* [0, size): RDMA Write target/source; then req, rep */
	struct msg *req, *rep;
	int state;
	int dead;       /* failed: no more rounds */
	int removed;    /* RDMA_CM_EVENT_DEVICE_REMOVAL */
	int send_done, recv_done, wr_done, wc_err;
	uint64_t seed;
	uint32_t peer_rkey;
	uint64_t peer_addr;
	uint32_t peer_len;
	int served; /* server: rounds served */
	const char *stage; /* client: the step in progress (for reports) */
	struct conn *next;
};

static int conn_buf(struct conn *c)
{
	size_t len = (size_t)size + 2 * sizeof(struct msg);

	c->buf = calloc(1, len);
	if (!c->buf)
		return -1;
	c->req = (struct msg *)(c->buf + size);
	c->rep = c->req + 1;
	c->mr = ibv_reg_mr(c->pd, c->buf, len,
			   IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	return c->mr ? 0 : -1;
}

/* PD, CQ on COMP (context C), QP on the cm_id, registered buffer. */
static int conn_resources(struct conn *c, struct ibv_comp_channel *comp)
{
	struct ibv_qp_init_attr qa = {
		.cap = { .max_send_wr = QDEPTH, .max_recv_wr = QDEPTH,
			 .max_send_sge = 1, .max_recv_sge = 1 },
		.qp_type = IBV_QPT_RC,
	};

	c->pd = ibv_alloc_pd(c->id->verbs);
	if (!c->pd)
		return -1;
	c->cq = ibv_create_cq(c->id->verbs, 2 * QDEPTH, c, comp, 0);
	if (!c->cq || ibv_req_notify_cq(c->cq, 0))
		return -1;
	qa.send_cq = qa.recv_cq = c->cq;
	if (rdma_create_qp(c->id, c->pd, &qa))
		return -1;
	return conn_buf(c);
}

static int post_recv(struct conn *c, struct msg *m)
{
	struct ibv_sge sge = { (uintptr_t)m, sizeof(*m), c->mr->lkey };
	struct ibv_recv_wr wr = { .wr_id = 1, .sg_list = &sge, .num_sge = 1 }, *bad;

	return ibv_post_recv(c->id->qp, &wr, &bad);
}

static int post_send(struct conn *c, struct msg *m)
{
	struct ibv_sge sge = { (uintptr_t)m, sizeof(*m), c->mr->lkey };
	struct ibv_send_wr wr = { .wr_id = 2, .sg_list = &sge, .num_sge = 1,
				  .opcode = IBV_WR_SEND,
				  .send_flags = IBV_SEND_SIGNALED }, *bad;

	return ibv_post_send(c->id->qp, &wr, &bad);
}

static int post_write(struct conn *c, uint64_t addr, uint32_t rkey, uint32_t len)
{
	struct ibv_sge sge = { (uintptr_t)c->buf, len, c->mr->lkey };
	struct ibv_send_wr wr = { .wr_id = 3, .sg_list = &sge, .num_sge = 1,
				  .opcode = IBV_WR_RDMA_WRITE,
				  .send_flags = IBV_SEND_SIGNALED }, *bad;

	wr.wr.rdma.remote_addr = addr;
	wr.wr.rdma.rkey = rkey;
	return ibv_post_send(c->id->qp, &wr, &bad);
}

static void conn_destroy(struct conn *c)
{
	if (c->id && c->id->qp)
		rdma_destroy_qp(c->id);
	if (c->mr)
		ibv_dereg_mr(c->mr);
	if (c->cq)
		ibv_destroy_cq(c->cq);
	if (c->pd)
		ibv_dealloc_pd(c->pd);
	if (c->id)
		rdma_destroy_id(c->id);
	free(c->buf);
	memset(c, 0, sizeof(*c));
}

/* ---- the client side: a thread's event handling ---- */

struct worker {
	struct rdma_event_channel *ch;
	struct ibv_comp_channel *comp;
	struct conn *conns;
	int nconns;
	long ok, failed, timedout;
	long rounds_ok, rounds_failed, rounds_timedout;
	double connect_s;
	pthread_t thread;
};

static void client_wc(struct conn *c, struct ibv_wc *wc)
{
	if (wc->status != IBV_WC_SUCCESS) {
		c->wc_err = wc->status;
		return;
	}
	if (wc->wr_id == 1)
		c->recv_done = 1;
	else if (wc->wr_id == 2)
		c->send_done = 1;
}

static void drain_cq(struct ibv_cq *cq, void (*f)(struct conn *, struct ibv_wc *))
{
	struct ibv_wc wc[8];
	int n;

	while ((n = ibv_poll_cq(cq, 8, wc)) > 0)
		for (int i = 0; i < n; i++)
			f(cq->cq_context, &wc[i]);
	if (n < 0)
		((struct conn *)cq->cq_context)->wc_err = -1;
}

static void client_cm_event(struct rdma_cm_event *ev)
{
	struct conn *c = ev->id->context;

	switch (ev->event) {
	case RDMA_CM_EVENT_ADDR_RESOLVED: c->state = C_ADDR; break;
	case RDMA_CM_EVENT_ROUTE_RESOLVED: c->state = C_ROUTE; break;
	case RDMA_CM_EVENT_ESTABLISHED: c->state = C_UP; break;
	case RDMA_CM_EVENT_DISCONNECTED: c->state = C_DOWN; break;
	case RDMA_CM_EVENT_DEVICE_REMOVAL:
		c->removed = 1;
		c->state = C_ERR;
		break;
	default:
		c->state = C_ERR;
		break;
	}
}

/* Handles what arrives on W's channels within MS milliseconds. */
static void worker_events(struct worker *w, int ms)
{
	struct pollfd p[2] = { { .fd = w->ch->fd, .events = POLLIN },
			       { .fd = w->comp->fd, .events = POLLIN } };
	struct rdma_cm_event *ev;
	struct ibv_cq *cq;
	void *ctx;

	if (poll(p, 2, ms) <= 0)
		return;
	/* A disassociated device's channels report an error for good. */
	if ((p[0].revents | p[1].revents) & (POLLERR | POLLHUP))
		usleep(20000);
	while (rdma_get_cm_event(w->ch, &ev) == 0) {
		client_cm_event(ev);
		rdma_ack_cm_event(ev);
	}
	while (ibv_get_cq_event(w->comp, &cq, &ctx) == 0) {
		ibv_ack_cq_events(cq, 1);
		ibv_req_notify_cq(cq, 0);
		drain_cq(cq, client_wc);
	}
}

/* Waits until COND(C) or the deadline: 0, or -1 on timeout. */
static int wait_until(struct worker *w, struct conn *c, int (*cond)(struct conn *), double deadline)
{
	while (!cond(c)) {
		double left = deadline - now();

		if (left <= 0)
			return -1;
		worker_events(w, left > 0.2 ? 200 : (int)(left * 1000) + 1);
		/* A completion may be waiting without a new event. */
		if (c->cq)
			drain_cq(c->cq, client_wc);
	}
	return 0;
}

static int st_addr(struct conn *c) { return c->state != C_NEW; }
static int st_route(struct conn *c) { return c->state != C_ADDR; }
static int st_conn(struct conn *c) { return c->state != C_ROUTE; }
static int st_round(struct conn *c)
{
	return (c->send_done && c->recv_done) || c->wc_err || c->state >= C_DOWN;
}
static int st_down(struct conn *c) { return c->state >= C_DOWN; }

static struct addrinfo *server_ai, *bind_ai;

/* 0 connected, -1 failed, -2 timed out. */
static int client_connect(struct worker *w, struct conn *c)
{
	double deadline = now() + timeout_s;
	struct rdma_conn_param cp = { .initiator_depth = 1, .responder_resources = 1,
				      .retry_count = 7 };

	memset(c, 0, sizeof(*c));
	c->stage = "create_id";
	if (rdma_create_id(w->ch, &c->id, c, RDMA_PS_TCP))
		return -1;
	c->stage = "resolve_addr";
	/* 2 s, as rping: the core's address resolution can miss the ARP
	 * reply that completes while it queues the request (a veth peer
	 * answers at once) and then only retries at this timeout. */
	if (rdma_resolve_addr(c->id, bind_ai->ai_addr, server_ai->ai_addr, RESOLVE_MS))
		return -1;
	if (wait_until(w, c, st_addr, deadline))
		return -2;
	c->stage = "resolve_route";
	if (c->state != C_ADDR || rdma_resolve_route(c->id, RESOLVE_MS))
		return -1;
	if (wait_until(w, c, st_route, deadline))
		return -2;
	c->stage = "create QP";
	if (c->state != C_ROUTE || conn_resources(c, w->comp) || post_recv(c, c->rep))
		return -1;
	c->stage = "connect";
	if (rdma_connect(c->id, &cp))
		return -1;
	if (wait_until(w, c, st_conn, deadline))
		return -2;
	return c->state == C_UP ? 0 : -1;
}

/* One round: 0 ok, -1 failed, -2 timed out. */
static int client_round(struct worker *w, struct conn *c, uint64_t seed)
{
	double deadline = now() + timeout_s;

	c->stage = "round";
	c->seed = seed;
	c->send_done = c->recv_done = 0;
	memset(c->buf, 0, size);
	memset(c->rep, 0, sizeof(*c->rep));
	*c->req = (struct msg){ .magic = MAGIC_REQ, .seed = seed,
				.addr = (uintptr_t)c->buf, .rkey = c->mr->rkey,
				.len = size };
	fill(c->req->payload, PAYLOAD, ~seed);
	if (post_send(c, c->req))
		return -1;
	if (wait_until(w, c, st_round, deadline))
		return -2;
	if (!c->send_done || !c->recv_done)
		return -1;
	if (c->rep->magic != MAGIC_REP || c->rep->seed != seed || c->rep->status)
		return -1;
	if (!matches(c->buf, size, seed))
		return -1;
	/* The next round's receive. */
	return post_recv(c, c->rep) ? -1 : 0;
}

/* Disconnect and wait for it (bounded): -2 when it timed out. */
static int client_disconnect(struct worker *w, struct conn *c)
{
	if (c->state != C_UP || c->removed)
		return 0; /* never connected, or already down */
	c->stage = "disconnect";
	rdma_disconnect(c->id);
	return wait_until(w, c, st_down, now() + timeout_s) ? -2 : 0;
}

static int worker_init(struct worker *w)
{
	w->ch = rdma_create_event_channel();
	if (!w->ch)
		return -1;
	set_nonblock(w->ch->fd);
	return 0;
}

static struct ibv_context *bind_context(void)
{
	struct rdma_cm_id *id;
	struct ibv_context *ctx = NULL;
	struct rdma_event_channel *ch = rdma_create_event_channel();

	if (ch && rdma_create_id(ch, &id, NULL, RDMA_PS_TCP) == 0) {
		if (rdma_bind_addr(id, bind_ai->ai_addr) == 0)
			ctx = id->verbs;
		rdma_destroy_id(id);
	}
	if (ch)
		rdma_destroy_event_channel(ch);
	return ctx; /* librdmacm keeps one context per device: still valid */
}

static struct ibv_context *client_ctx;

static void *cycle_worker(void *arg)
{
	struct worker *w = arg;
	static atomic_int next;
	int i;

	while ((i = atomic_fetch_add(&next, 1)) < cycles) {
		struct conn c;
		double t0 = now();
		int r = client_connect(w, &c);

		if (r == 0)
			r = client_round(w, &c, (uint64_t)i * 2654435761u + 1);
		if (r)
			printf("# cycle %d: %s in %s after %.1f s (cm state %d, send %d recv %d, wc status %d)\n",
			       i, r == -2 ? "timed out" : "failed", c.stage, now() - t0, c.state,
			       c.send_done, c.recv_done, c.wc_err);
		if (r == 0)
			r = client_disconnect(w, &c);
		else
			client_disconnect(w, &c);
		if (r && !strcmp(c.stage, "disconnect"))
			printf("# cycle %d: timed out in disconnect after %.1f s\n", i, now() - t0);
		conn_destroy(&c);
		if (r == 0)
			w->ok++;
		else if (r == -2)
			w->timedout++;
		else
			w->failed++;
	}
	return NULL;
}

static void meminfo(long *memfree, long *slab)
{
	char line[256];
	FILE *f = fopen("/proc/meminfo", "r");

	*memfree = *slab = -1;
	while (f && fgets(line, sizeof(line), f)) {
		sscanf(line, "MemFree: %ld kB", memfree);
		sscanf(line, "Slab: %ld kB", slab);
	}
	if (f)
		fclose(f);
}

static pthread_barrier_t barrier;

static void *hold_worker(void *arg)
{
	struct worker *w = arg;
	uint64_t seed = (uintptr_t)w;

	for (int rep = 0; rep < repeat; rep++) {
		double t0 = now();

		for (int i = 0; i < w->nconns; i++) {
			int r = client_connect(w, &w->conns[i]);

			if (r) {
				w->conns[i].dead = 1;
				if (r == -2)
					w->timedout++;
				else
					w->failed++;
			}
		}
		w->connect_s = now() - t0;
		pthread_barrier_wait(&barrier); /* all up: main measures */
		pthread_barrier_wait(&barrier);
		double end = now() + seconds;
		for (int round = 0; seconds ? now() < end : round < rounds; round++) {
			int live = 0;

			for (int i = 0; i < w->nconns; i++) {
				struct conn *c = &w->conns[i];
				int r;

				if (c->dead)
					continue;
				live++;
				r = client_round(w, c, ++seed);
				if (r == 0) {
					w->rounds_ok++;
					continue;
				}
				c->dead = 1;
				if (r == -2)
					w->rounds_timedout++;
				else
					w->rounds_failed++;
				printf("# hold: connection %p round %d %s (wc status %d, cm state %d%s, send %d recv %d)\n",
				       (void *)c, round, r == -2 ? "timed out" : "failed", c->wc_err,
				       c->state, c->removed ? ", device removed" : "", c->send_done, c->recv_done);
			}
			if (!live)
				break;
			if (seconds)
				usleep(10000);
		}
		pthread_barrier_wait(&barrier); /* traffic done: main measures */
		/* -w: keep every QP, CQ, MR and PD a while longer. */
		for (double until = now() + linger; now() < until;)
			worker_events(w, 200);
		/* Teardown: every disconnect first, then wait for them all. */
		for (int i = 0; i < w->nconns; i++) {
			struct conn *c = &w->conns[i];

			if (c->id && c->state == C_UP && !c->removed)
				rdma_disconnect(c->id);
		}
		double deadline = now() + timeout_s;
		for (int i = 0; i < w->nconns; i++) {
			struct conn *c = &w->conns[i];

			if (c->id && c->state == C_UP && wait_until(w, c, st_down, deadline))
				w->timedout++;
		}
		for (int i = 0; i < w->nconns; i++) {
			int dead = w->conns[i].dead;

			conn_destroy(&w->conns[i]);
			if (!dead)
				w->ok++;
		}
		pthread_barrier_wait(&barrier);
	}
	return NULL;
}

static int run_client(int hold)
{
	struct worker *w = calloc(conc, sizeof(*w));
	long ok = 0, failed = 0, timedout = 0, rok = 0, rfailed = 0, rto = 0;
	double t0 = now();

	client_ctx = bind_context();
	if (!client_ctx) {
		printf("not ok - no RDMA device at %s\n", bind_s);
		return 1;
	}
	if (hold)
		pthread_barrier_init(&barrier, NULL, conc + 1);
	for (int i = 0; i < conc; i++) {
		if (worker_init(&w[i]))
			return 1;
		w[i].comp = ibv_create_comp_channel(client_ctx);
		if (!w[i].comp)
			return 1;
		set_nonblock(w[i].comp->fd);
		if (hold) {
			w[i].nconns = cycles / conc + (i < cycles % conc);
			w[i].conns = calloc(w[i].nconns, sizeof(struct conn));
		}
		pthread_create(&w[i].thread, NULL, hold ? hold_worker : cycle_worker, &w[i]);
	}
	if (hold) {
		long mf0, sl0, mf1, sl1;

		meminfo(&mf0, &sl0);
		printf("# hold: before: MemFree %ld kB, Slab %ld kB\n", mf0, sl0);
		for (int rep = 0; rep < repeat; rep++) {
			double t1 = now();

			pthread_barrier_wait(&barrier);
			meminfo(&mf1, &sl1);
			long up = 0;
			for (int i = 0; i < conc; i++)
				for (int j = 0; j < w[i].nconns; j++)
					up += !w[i].conns[j].dead;
			printf("# hold %d: %ld of %d connections up in %.1f s; MemFree %ld kB, Slab %ld kB: %.1f kB/connection (MemFree), %.1f kB (Slab)\n",
			       rep + 1, up, cycles, now() - t1, mf1, sl1,
			       up ? (double)(mf0 - mf1) / up : 0, up ? (double)(sl1 - sl0) / up : 0);
			fflush(stdout);
			t1 = now();
			pthread_barrier_wait(&barrier);
			pthread_barrier_wait(&barrier);
			printf("# hold %d: traffic done in %.1f s%s\n", rep + 1, now() - t1,
			       linger ? ", objects kept a while (-w)" : "");
			fflush(stdout);
			t1 = now();
			pthread_barrier_wait(&barrier);
			meminfo(&mf1, &sl1);
			printf("# hold %d: torn down in %.1f s; MemFree %ld kB, Slab %ld kB\n",
			       rep + 1, now() - t1, mf1, sl1);
			fflush(stdout);
		}
	}
	for (int i = 0; i < conc; i++) {
		pthread_join(w[i].thread, NULL);
		ok += w[i].ok;
		failed += w[i].failed;
		timedout += w[i].timedout;
		rok += w[i].rounds_ok;
		rfailed += w[i].rounds_failed;
		rto += w[i].rounds_timedout;
		ibv_destroy_comp_channel(w[i].comp);
		rdma_destroy_event_channel(w[i].ch);
	}
	if (hold)
		printf("hold: %d connections x %d: %ld ok, %ld failed, %ld timed out; rounds: %ld ok, %ld failed, %ld timed out; %d fatal events; %.1f s\n",
		       cycles, repeat, ok, failed, timedout, rok, rfailed, rto,
		       atomic_load(&fatal_events), now() - t0);
	else
		printf("cycles: %ld ok, %ld failed, %ld timed out (%d at a time, %.1f s)\n",
		       ok, failed, timedout, conc, now() - t0);
	fflush(stdout);
	return failed || timedout || rfailed || rto;
}

/* ---- the server: one event loop ---- */

static struct rdma_event_channel *sch;
static struct ibv_comp_channel *scomp[16];
static struct ibv_context *scomp_ctx[16];
static int nscomp;
static long s_conns, s_rounds, s_bad, s_errors, s_live;

static struct ibv_comp_channel *server_comp(struct ibv_context *ctx)
{
	for (int i = 0; i < nscomp; i++)
		if (scomp_ctx[i] == ctx)
			return scomp[i];
	if (nscomp == 16)
		return NULL;
	scomp[nscomp] = ibv_create_comp_channel(ctx);
	if (!scomp[nscomp])
		return NULL;
	set_nonblock(scomp[nscomp]->fd);
	scomp_ctx[nscomp] = ctx;
	return scomp[nscomp++];
}

static void server_wc(struct conn *c, struct ibv_wc *wc)
{
	struct msg *m = c->req, *rep = c->rep;

	if (wc->status != IBV_WC_SUCCESS) {
		if (!c->wc_err && wc->status != IBV_WC_WR_FLUSH_ERR) {
			if (s_errors++ < 10)
				printf("# server: wr_id %" PRIu64 " (%s) completed with %s, vendor error %u\n",
				       wc->wr_id, wc->wr_id == 1 ? "recv" : wc->wr_id == 2 ? "send" : "write",
				       ibv_wc_status_str(wc->status), wc->vendor_err);
		}
		c->wc_err = wc->status;
		return;
	}
	if (wc->wr_id != 1)
		return;
	/* A request: check it, Write the pattern, reply. */
	*rep = (struct msg){ .magic = MAGIC_REP, .seed = m->seed };
	if (m->magic != MAGIC_REQ || wc->byte_len != sizeof(*m) ||
	    !matches(m->payload, PAYLOAD, ~m->seed) || m->len > (uint32_t)size) {
		rep->status = 1;
		s_bad++;
	} else {
		fill(c->buf, m->len, m->seed);
		if (post_write(c, m->addr, m->rkey, m->len))
			rep->status = 2;
	}
	c->served++;
	s_rounds++;
	/* The reply goes out before the next request can arrive (the client
	 * waits for it), so one request buffer and one reply suffice. */
	if (post_recv(c, c->req) || post_send(c, rep))
		s_errors++;
}

static struct conn *s_list;

static void server_drop(struct conn *c)
{
	struct conn **pp;

	for (pp = &s_list; *pp; pp = &(*pp)->next)
		if (*pp == c) {
			*pp = c->next;
			break;
		}
	if (c->cq)
		drain_cq(c->cq, server_wc);
	conn_destroy(c);
	free(c);
	s_live--;
}

static void server_cm_event(struct rdma_cm_event *ev)
{
	struct conn *c = ev->id->context;
	struct rdma_cm_id *id = ev->id;
	enum rdma_cm_event_type type = ev->event;

	if (type == RDMA_CM_EVENT_CONNECT_REQUEST) {
		struct rdma_conn_param cp = { .initiator_depth = 1, .responder_resources = 1 };
		struct ibv_comp_channel *comp = server_comp(id->verbs);

		rdma_ack_cm_event(ev);
		c = calloc(1, sizeof(*c));
		c->id = id;
		id->context = c;
		c->next = s_list;
		s_list = c;
		s_live++;
		if (!comp || conn_resources(c, comp) || post_recv(c, c->req) || rdma_accept(id, &cp)) {
			printf("# server: accept failed: %s\n", strerror(errno));
			s_errors++;
			server_drop(c);
		}
		return;
	}
	rdma_ack_cm_event(ev);
	if (!c || c == (void *)1)
		return; /* the listener */
	switch (type) {
	case RDMA_CM_EVENT_ESTABLISHED:
		c->state = C_UP;
		s_conns++;
		break;
	case RDMA_CM_EVENT_DISCONNECTED:
	case RDMA_CM_EVENT_DEVICE_REMOVAL:
	case RDMA_CM_EVENT_TIMEWAIT_EXIT:
		server_drop(c);
		break;
	default:
		/* CONNECT_ERROR, UNREACHABLE, REJECTED, ...: gone. */
		printf("# server: %s\n", rdma_event_str(type));
		server_drop(c);
		break;
	}
}

static void on_signal(int sig)
{
	(void)sig;
	stop = 1;
}

static int run_server(void)
{
	struct rdma_cm_id *listener;
	struct sigaction sa = { .sa_handler = on_signal };

	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	sch = rdma_create_event_channel();
	if (!sch || rdma_create_id(sch, &listener, (void *)1, RDMA_PS_TCP) ||
	    rdma_bind_addr(listener, server_ai->ai_addr) || rdma_listen(listener, 1024)) {
		printf("not ok - server: listen on %s:%s: %s\n", addr_s, port_s, strerror(errno));
		return 1;
	}
	set_nonblock(sch->fd);
	printf("# server: listening on %s:%s\n", addr_s, port_s);
	fflush(stdout);
	while (!stop) {
		struct pollfd p[17] = { { .fd = sch->fd, .events = POLLIN } };
		struct rdma_cm_event *ev;
		int n = nscomp;

		for (int i = 0; i < n; i++)
			p[i + 1] = (struct pollfd){ .fd = scomp[i]->fd, .events = POLLIN };
		if (poll(p, n + 1, 500) < 0 && errno != EINTR)
			break;
		while (rdma_get_cm_event(sch, &ev) == 0)
			server_cm_event(ev);
		for (int i = 0; i < n; i++) {
			struct ibv_cq *cq;
			void *ctx;

			while (ibv_get_cq_event(scomp[i], &cq, &ctx) == 0) {
				ibv_ack_cq_events(cq, 1);
				ibv_req_notify_cq(cq, 0);
				drain_cq(cq, server_wc);
			}
		}
	}
	/* SIGTERM: tear down whatever is left. */
	long left = s_live;
	while (s_list)
		server_drop(s_list);
	rdma_destroy_id(listener);
	for (int i = 0; i < nscomp; i++)
		ibv_destroy_comp_channel(scomp[i]);
	rdma_destroy_event_channel(sch);
	printf("server: %ld connections, %ld rounds served, %ld bad requests, %ld errors, %ld left at exit, %d fatal events\n",
	       s_conns, s_rounds, s_bad, s_errors, left, atomic_load(&fatal_events));
	fflush(stdout);
	return s_bad || s_errors;
}

static struct addrinfo *resolve(const char *host)
{
	struct addrinfo hints = { .ai_family = AF_INET, .ai_socktype = SOCK_STREAM }, *ai;

	if (getaddrinfo(host, port_s, &hints, &ai)) {
		fprintf(stderr, "rsiw-storm: cannot resolve %s\n", host);
		exit(2);
	}
	return ai;
}

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "";
	struct rlimit rl = { 65536, 65536 };
	int opt;

	setvbuf(stdout, NULL, _IOLBF, 0);
	setrlimit(RLIMIT_NOFILE, &rl);
	optind = 2;
	while ((opt = getopt(argc, argv, "a:b:p:n:c:t:s:r:R:T:w:")) != -1) {
		switch (opt) {
		case 'a': addr_s = optarg; break;
		case 'b': bind_s = optarg; break;
		case 'p': port_s = optarg; break;
		case 'n': cycles = atoi(optarg); break;
		case 'c': conc = atoi(optarg); break;
		case 't': timeout_s = atoi(optarg); break;
		case 's': size = atoi(optarg); break;
		case 'r': repeat = atoi(optarg); break;
		case 'R': rounds = atoi(optarg); break;
		case 'T': seconds = atoi(optarg); break;
		case 'w': linger = atoi(optarg); break;
		default: goto usage;
		}
	}
	if (!addr_s || size <= 0 || size > MAX_SIZE || conc < 1 || cycles < 1 || timeout_s < 1)
		goto usage;
	server_ai = resolve(addr_s);
	start_async_threads();
	if (!strcmp(mode, "server"))
		return run_server();
	if (!bind_s)
		goto usage;
	bind_ai = resolve(bind_s);
	((struct sockaddr_in *)bind_ai->ai_addr)->sin_port = 0;
	if (conc > cycles)
		conc = cycles;
	if (!strcmp(mode, "client"))
		return run_client(0);
	if (!strcmp(mode, "hold"))
		return run_client(1);
usage:
	fprintf(stderr, "usage: rsiw-storm server -a ADDR [-p PORT] [-s SIZE]\n"
			"       rsiw-storm client -a SERVER -b BIND [-p PORT] [-n CYCLES] [-c CONC] [-t TIMEOUT_S] [-s SIZE]\n"
			"       rsiw-storm hold -a SERVER -b BIND [-p PORT] [-n CONNS] [-c THREADS] [-r REPEAT] [-R ROUNDS | -T SECONDS] [-w SECONDS] [-t TIMEOUT_S]\n");
	return 2;
}
