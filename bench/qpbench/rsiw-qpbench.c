// SPDX-License-Identifier: GPL-2.0
/*
 * rsiw-qpbench: many connections between two addresses, for the
 * side-by-side benchmark (bench/bench-compare.sh).
 *
 *   rsiw-qpbench server -a ADDR [-p PORT] -n N [-m write|read|send|tcp] [-T THREADS] [-M]
 *   rsiw-qpbench client -a ADDR -b SRC [-p PORT] -n N [-m write|read|send|tcp]
 *                       [-s SIZE] [-t SECS] [-d DEPTH] [-w FILE] [-T THREADS] [-M]
 *
 * -m write (default): N RC QPs, each its own rdma_cm connection. The client
 *   keeps DEPTH RDMA Writes of SIZE octets outstanding on every QP for SECS
 *   seconds (wall clock), then fences each QP with an 8-octet RDMA Read
 *   (its response follows every earlier Write on that stream, so the data
 *   has been placed) and prints per-QP and aggregate rates.
 * -m read: the client keeps DEPTH RDMA Reads of SIZE octets outstanding on
 *   every QP instead (its connections ask for an ORD of DEPTH, the server
 *   grants the IRD asked for, both as far as the devices allow); a Read
 *   completes once its data is placed, so no fence: a QP's time ends at
 *   its last completion.
 * -m send: the client keeps DEPTH Sends of SIZE octets outstanding on every
 *   QP and fences as -m write does; the server keeps RQ_DEPTH receives
 *   posted on each QP, reposting each as it completes (woken by its CQ's
 *   completion channel, as an event-driven server is, not busy-polling).
 * -m tcp: the same over N plain TCP connections; a connection's end is the
 *   server's close after it read everything (shutdown, then EOF).
 * -T THREADS (default 1): the client drives the connections from THREADS
 *   threads, connection I from thread I % THREADS, each thread with a CQ
 *   of its own (the TCP server reads from as many threads): an
 *   application with a thread per CPU.
 * -M: a buffer and MR of its own for every connection, at both ends (by
 *   default all connections of an end share one).
 * -w FILE: no traffic; once all N are connected the client prints
 *   "connected N" and holds them until FILE exists (kernel memory per
 *   connection is read meanwhile), then disconnects.
 *
 * The server accepts N connections and exits once all N are gone.
 * Output (client): "qp I bytes B secs S mbps R" per connection, then
 * "aggregate_mbps R min_mbps R max_mbps R secs S" (MB = 10^6 octets), then
 * "cpus_busy B of N user U system S softirq Q": how many of the machine's
 * N CPUs were busy over the timed phase (from /proc/stat, the whole
 * machine: both ends, every process, the kernel's TX and RX work), and
 * how that splits. A figure near N means the machine, not the transport,
 * bounds the aggregate.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <rdma/rdma_cma.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define FENCE_BIT (1ULL << 62)
#define MAX_INFLIGHT_CONNECTS 32

#define MAX_THREADS 64
/* -m send: receives the server keeps posted on each QP. */
#define RQ_DEPTH 1024

/* -m: what the connections carry. */
static enum { MODE_WRITE, MODE_READ, MODE_SEND, MODE_TCP } mode;
static int server, nconn = 1, depth = 4, port = 18600, nthreads = 1, mr_per_conn;
static size_t msg_size = 65536;
static double secs = 3;
static const char *addr_s, *src_s, *hold_file;

struct conn {
	struct rdma_cm_id *id;
	int fd;
	uint64_t raddr;
	uint32_t rkey;
	uint64_t bytes;
	int outstanding;
	int fenced;
	double tend;
	/* -M: this connection's own buffer and MR. */
	char *buf;
	struct ibv_mr *mr;
};

struct pdata {
	uint64_t addr;
	uint32_t rkey;
	uint32_t len;
};

static struct conn *conns;
static char *buf;
/* Where the program is, for the watchdog's message. */
static volatile const char *phase = "start";
static volatile int n_established;
static int n_done;
static unsigned long n_completions;

static void die(const char *what)
{
	fprintf(stderr, "rsiw-qpbench: %s: %s\n", what, strerror(errno));
	exit(1);
}

static void fail(const char *fmt, const char *arg)
{
	fprintf(stderr, "rsiw-qpbench: ");
	fprintf(stderr, fmt, arg);
	fprintf(stderr, "\n");
	exit(1);
}

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static struct sockaddr_in sin_of(const char *a, int p)
{
	struct sockaddr_in s = { .sin_family = AF_INET, .sin_port = htons(p) };

	if (inet_pton(AF_INET, a, &s.sin_addr) != 1)
		fail("bad IPv4 address %s", a);
	return s;
}

static void wait_hold_file(void)
{
	printf("connected %d\n", nconn);
	fflush(stdout);
	while (access(hold_file, F_OK) != 0)
		usleep(100000);
}

/* The machine's CPU time, in USER_HZ ticks, from /proc/stat's "cpu" line,
 * and each CPU's busy and total ticks from its "cpuN" line. */
#define MAX_CPUS 64

struct cpu_ticks {
	unsigned long long user, sys, softirq, busy, total;
	unsigned long long each_busy[MAX_CPUS], each_total[MAX_CPUS];
	int ncpu;
};

static struct cpu_ticks cpu_at_start;

static struct cpu_ticks cpu_ticks(void)
{
	unsigned long long v[10];
	struct cpu_ticks t = { 0 };
	char name[16];
	FILE *f = fopen("/proc/stat", "r");

	if (!f)
		return t;
	/* user nice system idle iowait irq softirq steal (guest, guest_nice) */
	while (fscanf(f, "%15s %llu %llu %llu %llu %llu %llu %llu %llu", name, &v[0], &v[1], &v[2],
		      &v[3], &v[4], &v[5], &v[6], &v[7]) == 9) {
		unsigned long long total = v[0] + v[1] + v[2] + v[3] + v[4] + v[5] + v[6] + v[7];
		int c;

		if (!strcmp(name, "cpu")) {
			t.user = v[0] + v[1];
			t.sys = v[2] + v[5];
			t.softirq = v[6];
			t.total = total;
			t.busy = total - v[3] - v[4];
		} else if (sscanf(name, "cpu%d", &c) == 1 && c >= 0 && c < MAX_CPUS) {
			t.each_busy[c] = total - v[3] - v[4];
			t.each_total[c] = total;
			if (c + 1 > t.ncpu)
				t.ncpu = c + 1;
		} else {
			break;
		}
		/* the rest of the line (guest, guest_nice) */
		if (fscanf(f, "%*[^\n]") < 0)
			break;
	}
	fclose(f);
	return t;
}

static void report_cpu(void)
{
	struct cpu_ticks e = cpu_ticks(), s = cpu_at_start;
	long n = sysconf(_SC_NPROCESSORS_ONLN);
	double total = e.total - s.total;

	if (total <= 0 || n <= 0)
		return;
	printf("cpus_busy %.2f of %ld user %.2f system %.2f softirq %.2f\n",
	       n * (e.busy - s.busy) / total, n, n * (e.user - s.user) / total,
	       n * (e.sys - s.sys) / total, n * (e.softirq - s.softirq) / total);
	/* Which CPUs: one stream's work on one vCPU, or split. */
	printf("cpu_busy_each");
	for (int c = 0; c < e.ncpu; c++) {
		double t = e.each_total[c] - s.each_total[c];

		printf(" %.2f", t > 0 ? (e.each_busy[c] - s.each_busy[c]) / t : 0.0);
	}
	printf("\n");
}

static void report(double t0)
{
	double tmax = t0, mn = 1e30, mx = 0, agg;
	uint64_t total = 0;

	for (int i = 0; i < nconn; i++) {
		double s = conns[i].tend - t0, r = conns[i].bytes / s / 1e6;

		printf("qp %d bytes %llu secs %.3f mbps %.2f\n", i,
		       (unsigned long long)conns[i].bytes, s, r);
		total += conns[i].bytes;
		if (conns[i].tend > tmax)
			tmax = conns[i].tend;
		if (r < mn)
			mn = r;
		if (r > mx)
			mx = r;
	}
	agg = total / (tmax - t0) / 1e6;
	printf("aggregate_mbps %.2f min_mbps %.2f max_mbps %.2f secs %.3f\n", agg, mn, mx,
	       tmax - t0);
	report_cpu();
	fflush(stdout);
}

/* ---------------------------------------------------------------- TCP */

/* Runs f(t) for t < nthreads, each in a thread of its own, and waits. */
struct worker {
	void (*f)(int t, void *arg);
	void *arg;
	int t;
};

static void *worker_main(void *w_)
{
	struct worker *w = w_;

	w->f(w->t, w->arg);
	return NULL;
}

static void run_threads(void (*f)(int t, void *arg), void *arg)
{
	pthread_t th[MAX_THREADS];
	struct worker w[MAX_THREADS];

	for (int t = 0; t < nthreads; t++) {
		w[t] = (struct worker){ .f = f, .arg = arg, .t = t };
		if (pthread_create(&th[t], NULL, worker_main, &w[t]))
			die("pthread_create");
	}
	for (int t = 0; t < nthreads; t++)
		pthread_join(th[t], NULL);
}

/* Connection i belongs to thread i % nthreads: its pollfds, gathered. */
static int my_fds(int t, const struct pollfd *all, struct pollfd *mine, int *idx)
{
	int n = 0;

	for (int i = t; i < nconn; i += nthreads) {
		mine[n] = all[i];
		idx[n++] = i;
	}
	return n;
}

/* A server thread: reads its connections until each is closed. */
static void tcp_server_worker(int t, void *arg)
{
	struct pollfd *p = calloc(nconn, sizeof(*p));
	int *idx = calloc(nconn, sizeof(*idx));
	char *rbuf = malloc(msg_size);
	int n, open_n;

	if (!p || !idx || !rbuf)
		die("alloc");
	n = my_fds(t, arg, p, idx);
	for (open_n = n; open_n > 0;) {
		if (poll(p, n, -1) < 0)
			die("poll");
		for (int i = 0; i < n; i++) {
			ssize_t r;

			if (p[i].fd < 0 || !(p[i].revents & (POLLIN | POLLHUP | POLLERR)))
				continue;
			r = read(p[i].fd, rbuf, msg_size);
			if (r > 0)
				continue;
			close(p[i].fd);
			p[i].fd = -1;
			open_n--;
		}
	}
}

static void tcp_server(void)
{
	struct sockaddr_in sa = sin_of(addr_s, port);
	int one = 1, ls, open_n;
	struct pollfd *p = calloc(nconn, sizeof(*p));

	ls = socket(AF_INET, SOCK_STREAM, 0);
	if (ls < 0)
		die("socket");
	setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(ls, (void *)&sa, sizeof(sa)) || listen(ls, 4096))
		die("bind/listen");
	for (int i = 0; i < nconn; i++) {
		p[i].fd = accept(ls, NULL, NULL);
		if (p[i].fd < 0)
			die("accept");
		p[i].events = POLLIN;
	}
	close(ls);
	(void)open_n;
	run_threads(tcp_server_worker, p);
}

static double tstop;

/* A client thread: writes to its connections until tstop, then shuts
 * them down and waits for the server's close. */
static void tcp_client_worker(int t, void *arg)
{
	struct pollfd *p = calloc(nconn, sizeof(*p));
	int *idx = calloc(nconn, sizeof(*idx));
	int n, left, stopping = 0;

	if (!p || !idx)
		die("alloc");
	n = my_fds(t, arg, p, idx);
	for (left = n; left > 0;) {
		if (poll(p, n, 200) < 0)
			die("poll");
		if (!stopping && now() >= tstop) {
			stopping = 1;
			for (int i = 0; i < n; i++) {
				shutdown(p[i].fd, SHUT_WR);
				p[i].events = POLLIN;
			}
			continue;
		}
		for (int i = 0; i < n; i++) {
			struct conn *c = &conns[idx[i]];
			ssize_t r;

			if (p[i].fd < 0 || !p[i].revents)
				continue;
			if (!stopping) {
				r = write(p[i].fd, buf, msg_size);
				if (r > 0)
					c->bytes += r;
				else if (r < 0 && errno != EAGAIN)
					die("write");
				continue;
			}
			/* The server closes after reading everything. */
			{
				char sink[64];

				r = read(p[i].fd, sink, sizeof(sink));
			}
			if (r == 0 || (r < 0 && errno != EAGAIN)) {
				c->tend = now();
				close(p[i].fd);
				p[i].fd = -1;
				left--;
			}
		}
	}
}

static void tcp_client(void)
{
	struct sockaddr_in sa = sin_of(addr_s, port), src = sin_of(src_s, 0);
	struct pollfd *p = calloc(nconn, sizeof(*p));
	double t0;

	for (int i = 0; i < nconn; i++) {
		int fd = socket(AF_INET, SOCK_STREAM, 0);

		if (fd < 0)
			die("socket");
		if (bind(fd, (void *)&src, sizeof(src)))
			die("bind");
		if (connect(fd, (void *)&sa, sizeof(sa)))
			die("connect");
		conns[i].fd = fd;
	}
	if (hold_file) {
		wait_hold_file();
		for (int i = 0; i < nconn; i++)
			close(conns[i].fd);
		return;
	}
	for (int i = 0; i < nconn; i++) {
		fcntl(conns[i].fd, F_SETFL, O_NONBLOCK);
		p[i].fd = conns[i].fd;
		p[i].events = POLLOUT;
	}
	cpu_at_start = cpu_ticks();
	t0 = now();
	tstop = t0 + secs;
	run_threads(tcp_client_worker, p);
	report(t0);
}

/* ---------------------------------------------------------------- RDMA */

static struct rdma_event_channel *ec;
static struct ibv_pd *pd;
static struct ibv_cq *cqs[MAX_THREADS];
static struct ibv_mr *mr;
/* -m send, server: its CQ's completion channel. */
static struct ibv_comp_channel *chan;

static struct rdma_cm_event *get_event(void)
{
	struct rdma_cm_event *ev;

	if (rdma_get_cm_event(ec, &ev))
		die("rdma_get_cm_event");
	return ev;
}

static struct ibv_mr *buf_mr(char **b)
{
	struct ibv_mr *m;

	*b = aligned_alloc(4096, (msg_size + 64 + 4095) & ~4095UL);
	if (!*b)
		die("alloc");
	memset(*b, 0x5a, msg_size + 64);
	m = ibv_reg_mr(pd, *b, msg_size + 64,
		       IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
	if (!m)
		die("ibv_reg_mr");
	return m;
}

static void setup_verbs(struct ibv_context *verbs)
{
	if (pd)
		return;
	pd = ibv_alloc_pd(verbs);
	if (!pd)
		die("ibv_alloc_pd");
	if (server && mode == MODE_SEND) {
		chan = ibv_create_comp_channel(verbs);
		if (!chan)
			die("ibv_create_comp_channel");
		cqs[0] = ibv_create_cq(verbs, nconn * (RQ_DEPTH + depth + 2) + 16, NULL, chan, 0);
		if (!cqs[0] || ibv_req_notify_cq(cqs[0], 0))
			die("ibv_create_cq");
	}
	for (int t = 0; t < nthreads; t++) {
		if (cqs[t])
			continue;
		cqs[t] = ibv_create_cq(verbs, (nconn / nthreads + 1) * (depth + 2) + 16, NULL, NULL, 0);
		if (!cqs[t])
			die("ibv_create_cq");
	}
	mr = ibv_reg_mr(pd, buf, msg_size + 64,
			IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
	if (!mr)
		die("ibv_reg_mr");
}

static void create_qp(struct rdma_cm_id *id)
{
	struct conn *c = id->context;
	struct ibv_cq *cq;
	struct ibv_qp_init_attr qa;

	/*
	 * The CQ first: with a NULL send_cq/recv_cq rdma_create_qp makes CQs
	 * of its own for the ID, and the first QP's completions went there,
	 * where nobody polled (its Writes "stalled").
	 */
	setup_verbs(id->verbs);
	cq = cqs[!server && c ? (c - conns) % nthreads : 0];
	if (mr_per_conn && !server && c)
		c->mr = buf_mr(&c->buf);
	qa = (struct ibv_qp_init_attr){
		.send_cq = cq,
		.recv_cq = cq,
		.qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = depth + 1, .max_recv_wr = server && mode == MODE_SEND ? RQ_DEPTH : 1,
			 .max_send_sge = 1, .max_recv_sge = 1 },
	};
	if (rdma_create_qp(id, pd, &qa))
		die("rdma_create_qp");
}

/* -m send, server: one receive of SIZE octets on connection I's QP. */
static void post_recv(int i)
{
	struct ibv_sge sge = { .addr = (uintptr_t)buf, .length = msg_size, .lkey = mr->lkey };
	struct ibv_recv_wr wr = { .wr_id = i, .sg_list = &sge, .num_sge = 1 }, *bad;

	if (ibv_post_recv(conns[i].id->qp, &wr, &bad))
		die("ibv_post_recv");
}

/* -m send, server: the CQ's event, then every completion; each receive
 * of a live connection is posted again. */
static void serve_recvs(void)
{
	struct ibv_cq *cq;
	struct ibv_wc wc[64];
	void *ctx;
	int n;

	if (ibv_get_cq_event(chan, &cq, &ctx))
		die("ibv_get_cq_event");
	ibv_ack_cq_events(cq, 1);
	if (ibv_req_notify_cq(cq, 0))
		die("ibv_req_notify_cq");
	while ((n = ibv_poll_cq(cq, 64, wc)) > 0) {
		for (int k = 0; k < n; k++) {
			int i = wc[k].wr_id;

			/* Flushed at a disconnect: the QP is going. */
			if (wc[k].status == IBV_WC_WR_FLUSH_ERR)
				continue;
			if (wc[k].status != IBV_WC_SUCCESS)
				fail("receive completion: %s", ibv_wc_status_str(wc[k].status));
			if (i >= 0 && i < nconn && conns[i].id)
				post_recv(i);
		}
	}
	if (n < 0)
		fail("%s", "ibv_poll_cq failed");
}

/* The server's next connection event; -m send serves its CQ meanwhile. */
static struct rdma_cm_event *server_event(void)
{
	while (chan) {
		struct pollfd p[2] = { { .fd = ec->fd, .events = POLLIN }, { .fd = chan->fd, .events = POLLIN } };

		if (poll(p, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			die("poll");
		}
		if (p[1].revents & POLLIN)
			serve_recvs();
		if (p[0].revents & POLLIN)
			break;
	}
	return get_event();
}

static void rdma_server(void)
{
	struct sockaddr_in sa = sin_of(addr_s, port);
	struct rdma_cm_id *lid;
	int gone = 0, est = 0, accepted = 0;

	ec = rdma_create_event_channel();
	if (!ec)
		die("rdma_create_event_channel");
	if (rdma_create_id(ec, &lid, NULL, RDMA_PS_TCP))
		die("rdma_create_id");
	if (rdma_bind_addr(lid, (void *)&sa) || rdma_listen(lid, 4096))
		die("rdma_bind_addr/listen");
	while (gone < nconn) {
		struct rdma_cm_event *ev = server_event();
		struct rdma_cm_id *id = ev->id;
		struct pdata pdata;
		struct rdma_conn_param cp = { .private_data = &pdata,
					      .private_data_len = sizeof(pdata),
					      .responder_resources = 1, .initiator_depth = 1 };

		switch (ev->event) {
		case RDMA_CM_EVENT_CONNECT_REQUEST:
			/* The IRD and ORD the client asked for (for iWARP the
			 * event gives them as this side's): a Read client's
			 * DEPTH Reads in flight. */
			cp.responder_resources = ev->param.conn.responder_resources;
			cp.initiator_depth = ev->param.conn.initiator_depth;
			create_qp(id);
			pdata.addr = (uintptr_t)buf;
			pdata.rkey = mr->rkey;
			pdata.len = msg_size + 64;
			if (mr_per_conn) {
				char *b;
				struct ibv_mr *m = buf_mr(&b);

				pdata.addr = (uintptr_t)b;
				pdata.rkey = m->rkey;
			}
			if (mode == MODE_SEND) {
				/* Its receives before the first Send can come. */
				if (accepted >= nconn)
					fail("%s", "more connections than -n");
				conns[accepted].id = id;
				id->context = &conns[accepted];
				for (int k = 0; k < RQ_DEPTH; k++)
					post_recv(accepted);
				accepted++;
			}
			if (rdma_accept(id, &cp))
				die("rdma_accept");
			break;
		case RDMA_CM_EVENT_ESTABLISHED:
			n_established = ++est;
			phase = "serving";
			break;
		case RDMA_CM_EVENT_DISCONNECTED:
			rdma_ack_cm_event(ev);
			if (mode == MODE_SEND && id->context)
				((struct conn *)id->context)->id = NULL;
			rdma_destroy_qp(id);
			rdma_destroy_id(id);
			gone++;
			continue;
		default:
			fprintf(stderr, "rsiw-qpbench server: event %s (status %d)\n",
				rdma_event_str(ev->event), ev->status);
			exit(1);
		}
		rdma_ack_cm_event(ev);
	}
	(void)est;
}

static void rdma_connect_all(void)
{
	struct sockaddr_in sa = sin_of(addr_s, port), src = sin_of(src_s, 0);
	int started = 0, established = 0, inflight = 0;

	phase = "connecting";
	ec = rdma_create_event_channel();
	if (!ec)
		die("rdma_create_event_channel");
	while (established < nconn) {
		struct rdma_cm_event *ev;
		struct conn *c;
		struct rdma_conn_param cp = { .responder_resources = 1,
					      .initiator_depth = mode == MODE_READ ? depth : 1,
					      .retry_count = 7, .rnr_retry_count = 7 };

		while (started < nconn && inflight < MAX_INFLIGHT_CONNECTS) {
			c = &conns[started];
			if (rdma_create_id(ec, &c->id, c, RDMA_PS_TCP))
				die("rdma_create_id");
			if (rdma_resolve_addr(c->id, (void *)&src, (void *)&sa, 10000))
				die("rdma_resolve_addr");
			started++;
			inflight++;
		}
		ev = get_event();
		c = ev->id->context;
		switch (ev->event) {
		case RDMA_CM_EVENT_ADDR_RESOLVED:
			if (rdma_resolve_route(ev->id, 10000))
				die("rdma_resolve_route");
			break;
		case RDMA_CM_EVENT_ROUTE_RESOLVED:
			create_qp(ev->id);
			if (rdma_connect(ev->id, &cp))
				die("rdma_connect");
			break;
		case RDMA_CM_EVENT_ESTABLISHED: {
			const struct pdata *pd_in = ev->param.conn.private_data;

			if (ev->param.conn.private_data_len < sizeof(*pd_in))
				fail("%s", "short private data from the server");
			c->raddr = pd_in->addr;
			c->rkey = pd_in->rkey;
			established++;
			n_established = established;
			inflight--;
			break;
		}
		default:
			fprintf(stderr, "rsiw-qpbench client: connection %ld: event %s (status %d)\n",
				(long)(c - conns), rdma_event_str(ev->event), ev->status);
			exit(1);
		}
		rdma_ack_cm_event(ev);
	}
}

static void post(struct conn *c, int i, int fence)
{
	struct ibv_sge sge = { .addr = (uintptr_t)(c->buf ? c->buf : buf), .length = fence ? 8 : msg_size,
			       .lkey = c->mr ? c->mr->lkey : mr->lkey };
	struct ibv_send_wr wr = {
		.wr_id = i | (fence ? FENCE_BIT : 0),
		.sg_list = &sge,
		.num_sge = 1,
		.opcode = fence || mode == MODE_READ ? IBV_WR_RDMA_READ
			  : mode == MODE_SEND ? IBV_WR_SEND : IBV_WR_RDMA_WRITE,
		.send_flags = IBV_SEND_SIGNALED,
		.wr.rdma = { .remote_addr = c->raddr, .rkey = c->rkey },
	}, *bad;

	if (fence)
		sge.addr += msg_size;
	if (ibv_post_send(c->id->qp, &wr, &bad))
		die("ibv_post_send");
	c->outstanding++;
}

/* Connection C's traffic ended at NOW (its fence or last Read completed). */
static void conn_done(struct conn *c, double now_t, int *done)
{
	c->tend = now_t;
	(*done)++;
	__atomic_fetch_add(&n_done, 1, __ATOMIC_RELAXED);
}

/* A client thread: keeps DEPTH Writes (Reads) outstanding on each of its
 * QPs until tstop, then fences each (a Read needs none); polls its own CQ. */
static void rdma_client_worker(int t, void *arg)
{
	struct ibv_wc wc[64];
	int done = 0, mine = 0;

	(void)arg;
	for (int i = t; i < nconn; i += nthreads, mine++)
		for (int k = 0; k < depth; k++)
			post(&conns[i], i, 0);
	while (done < mine) {
		int n = ibv_poll_cq(cqs[t], 64, wc);
		double now_t;

		if (n < 0)
			fail("%s", "ibv_poll_cq failed");
		if (n == 0)
			continue;
		now_t = now();
		for (int k = 0; k < n; k++) {
			int i = wc[k].wr_id & ~FENCE_BIT;
			struct conn *c = &conns[i];

			if (wc[k].status != IBV_WC_SUCCESS)
				fail("work completion: %s", ibv_wc_status_str(wc[k].status));
			c->outstanding--;
			__atomic_fetch_add(&n_completions, 1, __ATOMIC_RELAXED);
			if (wc[k].wr_id & FENCE_BIT) {
				conn_done(c, now_t, &done);
				continue;
			}
			c->bytes += msg_size;
			if (now_t < tstop)
				post(c, i, 0);
			else if (mode == MODE_READ) {
				if (c->outstanding == 0)
					conn_done(c, now_t, &done);
			} else if (c->outstanding == 0 && !c->fenced) {
				phase = "fencing";
				c->fenced = 1;
				post(c, i, 1);
			}
		}
	}
}

static void rdma_client(void)
{
	double t0;

	rdma_connect_all();
	if (!hold_file) {
		/*
		 * Linux siw's accept sends its MPA reply before it moves the
		 * socket to its data path; a first FPDU arriving in between is
		 * not read until more comes. Give the responders a moment.
		 */
		usleep(200000);
		phase = mode == MODE_READ ? "rdma reads" : mode == MODE_SEND ? "sends" : "rdma writes";
		cpu_at_start = cpu_ticks();
		t0 = now();
		tstop = t0 + secs;
		run_threads(rdma_client_worker, NULL);
		report(t0);
	} else {
		wait_hold_file();
	}
	phase = "disconnecting";
	for (int i = 0; i < nconn; i++)
		rdma_disconnect(conns[i].id);
	for (int gone = 0; gone < nconn;) {
		struct rdma_cm_event *ev = get_event();
		int disc = ev->event == RDMA_CM_EVENT_DISCONNECTED;
		struct rdma_cm_id *id = ev->id;

		rdma_ack_cm_event(ev);
		if (disc) {
			rdma_destroy_qp(id);
			rdma_destroy_id(id);
			gone++;
		}
	}
}

static void watchdog(int sig)
{
	char msg[256];
	int n = snprintf(msg, sizeof(msg),
			 "rsiw-qpbench %s: stuck in %s: %d of %d connected, %lu completions, %d fenced\n",
			 server ? "server" : "client", phase, n_established, nconn, n_completions, n_done);

	(void)sig;
	if (write(2, msg, n) < 0)
		_exit(3);
	_exit(3);
}

int main(int argc, char **argv)
{
	int o;

	if (argc < 2 || (strcmp(argv[1], "server") && strcmp(argv[1], "client")))
		goto usage;
	server = !strcmp(argv[1], "server");
	optind = 2;
	while ((o = getopt(argc, argv, "a:b:p:n:m:s:t:d:w:T:M")) != -1) {
		switch (o) {
		case 'a': addr_s = optarg; break;
		case 'b': src_s = optarg; break;
		case 'p': port = atoi(optarg); break;
		case 'n': nconn = atoi(optarg); break;
		case 'm':
			if (!strcmp(optarg, "tcp"))
				mode = MODE_TCP;
			else if (!strcmp(optarg, "read"))
				mode = MODE_READ;
			else if (!strcmp(optarg, "send"))
				mode = MODE_SEND;
			else if (!strcmp(optarg, "write"))
				mode = MODE_WRITE;
			else
				goto usage;
			break;
		case 's': msg_size = strtoul(optarg, NULL, 0); break;
		case 't': secs = atof(optarg); break;
		case 'd': depth = atoi(optarg); break;
		case 'w': hold_file = optarg; break;
		case 'T': nthreads = atoi(optarg); break;
		case 'M': mr_per_conn = 1; break;
		default: goto usage;
		}
	}
	if (!addr_s || (!server && !src_s) || nconn < 1 || depth < 1 || msg_size < 8 ||
	    nthreads < 1 || nthreads > MAX_THREADS)
		goto usage;
	if (nthreads > nconn)
		nthreads = nconn;
	/* The RDMA server only accepts: one CQ. */
	if (server && mode != MODE_TCP)
		nthreads = 1;
	setvbuf(stdout, NULL, _IOLBF, 0);
	signal(SIGALRM, watchdog);
	signal(SIGTERM, watchdog);
	if (!hold_file && !server)
		alarm(secs + 60 + nconn / 4);
	conns = calloc(nconn, sizeof(*conns));
	buf = aligned_alloc(4096, (msg_size + 64 + 4095) & ~4095UL);
	if (!conns || !buf)
		die("alloc");
	memset(buf, 0x5a, msg_size + 64);
	if (mode == MODE_TCP)
		server ? tcp_server() : tcp_client();
	else
		server ? rdma_server() : rdma_client();
	return 0;
usage:
	fprintf(stderr, "usage: rsiw-qpbench server -a ADDR [-p PORT] -n N [-m write|read|send|tcp] [-T THREADS]\n"
			"       rsiw-qpbench client -a ADDR -b SRC [-p PORT] -n N [-m write|read|send|tcp]\n"
			"                           [-s SIZE] [-t SECS] [-d DEPTH] [-w FILE] [-T THREADS] [-M]\n");
	return 2;
}
