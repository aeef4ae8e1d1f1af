// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * rsiw-hostile-target: the passive end a hostile peer attacks
 * (tests/peers/hostile-peer.py). An unprivileged rdma_cm listener that
 * takes one connection, exposes one MR to it and then changes its
 * registrations on command, so that the peer can stall an FPDU (or a
 * Read Response) and finish it after the STag names something else.
 *
 *   rsiw-hostile-target ADDR PORT [A_LEN]
 *
 * Listens on ADDR:PORT (any iWARP device; rsiw's through its provider,
 * RDMAV_DRIVERS). On the first connect request: PD, CQ, QP; a receive MR
 * (registered first, so that A's STag index is the higher one); MR A over
 * A_LEN octets (default 4 MiB) of the byte 0xA5, LOCAL_WRITE |
 * REMOTE_WRITE | REMOTE_READ; RECVS receives of RECV_LEN octets; accept.
 * Once established, prints
 *
 *   mr A stag=0x%x addr=0x%llx len=%u
 *
 * (stag is the lkey, which is the STag even when the MR has no rkey; the
 * line ends with rkey=0x%x) and then answers each command line on stdin
 * with one line:
 *
 *   dereg         ibv_dereg_mr(A) (A's memory stays mapped)
 *   reg_ro PATH [rr]
 *                 mmap PATH PROT_READ MAP_SHARED (opened read-only), register
 *                 it at A's iova with access 0 (rr: IBV_ACCESS_REMOTE_READ
 *                 only): "mr B stag=... addr=... len=..."
 *   reg_secret    A_LEN new octets of 0x5E at A's iova, LOCAL_WRITE |
 *                 REMOTE_WRITE | REMOTE_READ: "mr S stag=... addr=... len=..."
 *   dump          the secret buffer: "dump len=N sum=0x%08x not5e=N"
 *                 (sum: a 32-bit FNV-1a of its octets)
 *   peek OFF LEN  LEN (<= 64) octets of A's buffer at OFF, in hex
 *   poll          completions, QP state, async and CM events seen so far:
 *                 "poll wc=N ok=N err=N status=S qp_state=N qp_error=0|1
 *                 async=N [EVENT...] cm=[EVENT...]"
 *   quit          "bye", then exit 0
 *
 * Unknown or failing commands answer "err ...". Meant to run as an
 * unprivileged user: it needs only /dev/infiniband and rdma_cm (mode 0666)
 * and RLIMIT_MEMLOCK for A_LEN twice.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#define RECVS 8
#define RECV_LEN 64
#define A_FILL 0xA5
#define SECRET_FILL 0x5E

static struct rdma_event_channel *ch;
static struct rdma_cm_id *lid, *id;
static struct ibv_pd *pd;
static struct ibv_cq *cq;
static struct ibv_mr *mr_a, *mr_b, *mr_s, *mr_r;
static uint8_t *a_buf, *r_buf, *s_buf;
static size_t a_len = 4 << 20;
static uint64_t a_iova;
static unsigned wc_n, wc_ok, wc_err, last_status;
static unsigned async_n;
static char async_list[512], cm_list[512];

static void die(const char *what)
{
	fprintf(stderr, "rsiw-hostile-target: %s: %s\n", what, strerror(errno));
	exit(1);
}

static void append(char *list, size_t size, const char *s)
{
	size_t n = strlen(list);

	if (n + strlen(s) + 2 < size)
		snprintf(list + n, size - n, "%s%s", n ? "," : "", s);
}

/* CM events after the connection is up (non-blocking). */
static void drain_cm(void)
{
	struct rdma_cm_event *ev;

	while (rdma_get_cm_event(ch, &ev) == 0) {
		append(cm_list, sizeof(cm_list), rdma_event_str(ev->event));
		rdma_ack_cm_event(ev);
	}
}

static void drain_async(void)
{
	struct ibv_async_event ev;

	while (ibv_get_async_event(id->verbs, &ev) == 0) {
		async_n++;
		append(async_list, sizeof(async_list), ibv_event_type_str(ev.event_type));
		ibv_ack_async_event(&ev);
	}
}

static void drain_cq(void)
{
	struct ibv_wc wc[16];
	int n;

	while ((n = ibv_poll_cq(cq, 16, wc)) > 0) {
		for (int i = 0; i < n; i++) {
			wc_n++;
			if (wc[i].status == IBV_WC_SUCCESS)
				wc_ok++;
			else
				wc_err++;
			last_status = wc[i].status;
		}
	}
}

static void print_mr(const char *name, struct ibv_mr *mr, size_t len)
{
	/* The lkey: an MR without remote rights has no rkey (0), but the
	 * same STag names it on the wire. */
	printf("mr %s stag=0x%x addr=0x%llx len=%zu rkey=0x%x\n", name, mr->lkey,
	       (unsigned long long)a_iova, len, mr->rkey);
}

static void nonblock(int fd)
{
	int fl = fcntl(fd, F_GETFL);

	if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0)
		die("fcntl O_NONBLOCK");
}

static struct rdma_cm_event *expect_event(enum rdma_cm_event_type want)
{
	struct rdma_cm_event *ev;

	if (rdma_get_cm_event(ch, &ev))
		die("rdma_get_cm_event");
	if (ev->event != want) {
		fprintf(stderr, "rsiw-hostile-target: got %s, waited for %s (status %d)\n",
			rdma_event_str(ev->event), rdma_event_str(want), ev->status);
		exit(1);
	}
	return ev;
}

static void setup(struct rdma_cm_id *cid)
{
	struct ibv_qp_init_attr qa = {
		.cap = { .max_send_wr = 16, .max_recv_wr = RECVS, .max_send_sge = 1,
			 .max_recv_sge = 1 },
		.qp_type = IBV_QPT_RC,
	};

	id = cid;
	pd = ibv_alloc_pd(id->verbs);
	if (!pd)
		die("ibv_alloc_pd");
	cq = ibv_create_cq(id->verbs, 64, NULL, NULL, 0);
	if (!cq)
		die("ibv_create_cq");
	qa.send_cq = cq;
	qa.recv_cq = cq;
	if (rdma_create_qp(id, pd, &qa))
		die("rdma_create_qp");
	r_buf = calloc(RECVS, RECV_LEN);
	if (!r_buf)
		die("calloc");
	mr_r = ibv_reg_mr(pd, r_buf, RECVS * RECV_LEN, IBV_ACCESS_LOCAL_WRITE);
	if (!mr_r)
		die("ibv_reg_mr (receives)");
	a_buf = mmap(NULL, a_len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (a_buf == MAP_FAILED)
		die("mmap A");
	memset(a_buf, A_FILL, a_len);
	mr_a = ibv_reg_mr(pd, a_buf, a_len,
			  IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
	if (!mr_a)
		die("ibv_reg_mr A");
	a_iova = (uintptr_t)a_buf;
	for (int i = 0; i < RECVS; i++) {
		struct ibv_sge sge = { .addr = (uintptr_t)(r_buf + i * RECV_LEN),
				       .length = RECV_LEN, .lkey = mr_r->lkey };
		struct ibv_recv_wr wr = { .wr_id = i, .sg_list = &sge, .num_sge = 1 }, *bad;

		if (ibv_post_recv(id->qp, &wr, &bad))
			die("ibv_post_recv");
	}
}

static void cmd_reg_ro(char *arg)
{
	char *path = strtok(arg, " \t"), *opt = strtok(NULL, " \t");
	int access = opt && !strcmp(opt, "rr") ? IBV_ACCESS_REMOTE_READ : 0;
	struct stat st;
	void *map;
	int fd;

	if (!path) {
		printf("err reg_ro: no path\n");
		return;
	}
	fd = open(path, O_RDONLY);
	if (fd < 0 || fstat(fd, &st) < 0 || st.st_size == 0) {
		printf("err reg_ro: open %s: %s\n", path, strerror(errno));
		if (fd >= 0)
			close(fd);
		return;
	}
	map = mmap(NULL, st.st_size, PROT_READ, MAP_SHARED, fd, 0);
	close(fd);
	if (map == MAP_FAILED) {
		printf("err reg_ro: mmap: %s\n", strerror(errno));
		return;
	}
	mr_b = ibv_reg_mr_iova(pd, map, st.st_size, a_iova, access);
	if (!mr_b) {
		printf("err reg_ro: ibv_reg_mr_iova: %s\n", strerror(errno));
		return;
	}
	print_mr("B", mr_b, st.st_size);
}

static void cmd_reg_secret(void)
{
	s_buf = mmap(NULL, a_len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (s_buf == MAP_FAILED) {
		printf("err reg_secret: mmap: %s\n", strerror(errno));
		s_buf = NULL;
		return;
	}
	memset(s_buf, SECRET_FILL, a_len);
	mr_s = ibv_reg_mr_iova(pd, s_buf, a_len, a_iova,
			       IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
				       IBV_ACCESS_REMOTE_READ);
	if (!mr_s) {
		printf("err reg_secret: ibv_reg_mr_iova: %s\n", strerror(errno));
		return;
	}
	print_mr("S", mr_s, a_len);
}

static void cmd_dump(void)
{
	uint32_t h = 2166136261u;
	size_t not5e = 0;

	if (!s_buf) {
		printf("err dump: no secret buffer\n");
		return;
	}
	for (size_t i = 0; i < a_len; i++) {
		h = (h ^ s_buf[i]) * 16777619u;
		not5e += s_buf[i] != SECRET_FILL;
	}
	printf("dump len=%zu sum=0x%08x not5e=%zu\n", a_len, h, not5e);
}

static void cmd_peek(char *arg)
{
	char *end;
	unsigned long off = strtoul(arg, &end, 0), len = strtoul(end, NULL, 0);

	if (len == 0 || len > 64 || off >= a_len || len > a_len - off) {
		printf("err peek: range\n");
		return;
	}
	printf("peek");
	for (unsigned long i = 0; i < len; i++)
		printf(" %02x", a_buf[off + i]);
	printf("\n");
}

static void cmd_poll(void)
{
	struct ibv_qp_attr attr;
	struct ibv_qp_init_attr init;
	int state = -1;

	drain_cq();
	drain_async();
	drain_cm();
	if (ibv_query_qp(id->qp, &attr, IBV_QP_STATE, &init) == 0)
		state = attr.qp_state;
	printf("poll wc=%u ok=%u err=%u status=%u qp_state=%d qp_error=%d async=%u [%s] cm=[%s]\n",
	       wc_n, wc_ok, wc_err, last_status, state, state == IBV_QPS_ERR, async_n, async_list,
	       cm_list);
}

int main(int argc, char **argv)
{
	struct rdma_conn_param cp = { .initiator_depth = 4, .responder_resources = 4 };
	struct addrinfo *ai, hints = { .ai_flags = AI_PASSIVE, .ai_family = AF_INET };
	struct rdma_cm_event *ev;
	struct rdma_cm_id *cid;
	char line[4096];

	if (argc < 3) {
		fprintf(stderr, "usage: rsiw-hostile-target ADDR PORT [A_LEN]\n");
		return 2;
	}
	if (argc > 3)
		a_len = strtoul(argv[3], NULL, 0);
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (getaddrinfo(argv[1], argv[2], &hints, &ai))
		die("getaddrinfo");
	ch = rdma_create_event_channel();
	if (!ch)
		die("rdma_create_event_channel");
	if (rdma_create_id(ch, &lid, NULL, RDMA_PS_TCP))
		die("rdma_create_id");
	if (rdma_bind_addr(lid, ai->ai_addr))
		die("rdma_bind_addr");
	if (rdma_listen(lid, 1))
		die("rdma_listen");
	printf("listening %s %s uid=%u\n", argv[1], argv[2], (unsigned)getuid());

	ev = expect_event(RDMA_CM_EVENT_CONNECT_REQUEST);
	cid = ev->id;
	rdma_ack_cm_event(ev);
	setup(cid);
	if (rdma_accept(id, &cp))
		die("rdma_accept");
	ev = expect_event(RDMA_CM_EVENT_ESTABLISHED);
	rdma_ack_cm_event(ev);
	nonblock(ch->fd);
	nonblock(id->verbs->async_fd);
	print_mr("A", mr_a, a_len);

	while (fgets(line, sizeof(line), stdin)) {
		line[strcspn(line, "\r\n")] = 0;
		if (!strcmp(line, "dereg")) {
			if (mr_a && ibv_dereg_mr(mr_a) == 0) {
				mr_a = NULL;
				printf("ok dereg\n");
			} else {
				printf("err dereg: %s\n", mr_a ? strerror(errno) : "no A");
			}
		} else if (!strncmp(line, "reg_ro ", 7)) {
			cmd_reg_ro(line + 7);
		} else if (!strcmp(line, "reg_secret")) {
			cmd_reg_secret();
		} else if (!strcmp(line, "dump")) {
			cmd_dump();
		} else if (!strncmp(line, "peek ", 5)) {
			cmd_peek(line + 5);
		} else if (!strcmp(line, "poll")) {
			cmd_poll();
		} else if (!strcmp(line, "quit")) {
			break;
		} else {
			printf("err unknown command '%s'\n", line);
		}
	}
	drain_cq();
	rdma_disconnect(id);
	rdma_destroy_qp(id);
	if (mr_b)
		ibv_dereg_mr(mr_b);
	if (mr_s)
		ibv_dereg_mr(mr_s);
	if (mr_a)
		ibv_dereg_mr(mr_a);
	ibv_dereg_mr(mr_r);
	ibv_destroy_cq(cq);
	ibv_dealloc_pd(pd);
	rdma_destroy_id(id);
	rdma_destroy_id(lid);
	rdma_destroy_event_channel(ch);
	freeaddrinfo(ai);
	printf("bye\n");
	return 0;
}
