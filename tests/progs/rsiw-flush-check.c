// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * rsiw-flush-check: RDMA Commit (Flush) from userspace, through
 * libibverbs' ibv_wr_flush (rdma-core >= 45; built only against the
 * private rdma-core of scripts/build-rdma-core.sh). One process, two ends
 * connected with rdma_cm (the passive side on SERVER, the active side
 * bound to CLIENT, each on its own rsiw device): the passive side
 * registers the targets, the active side writes and flushes into them.
 *
 *   rsiw-flush-check SERVER-ADDR CLIENT-ADDR [--dax PATH] [--port PORT]
 *
 * Registrations (run whatever the provider supports):
 *   - anonymous memory with IBV_ACCESS_FLUSH_GLOBAL | REMOTE_WRITE: accepted;
 *   - anonymous memory with IBV_ACCESS_FLUSH_PERSISTENT: refused, EINVAL
 *     (not persistent memory; Documentation/extensions.md), or EOPNOTSUPP
 *     where the device announces no persistent flush (a kernel without
 *     the pmem API, such as User-Mode Linux);
 *   - --dax PATH, a device-DAX character device (/dev/daxX.Y): its first
 *     DAX_LEN octets mapped MAP_SHARED and registered with
 *     FLUSH_PERSISTENT | FLUSH_GLOBAL | REMOTE_WRITE: accepted;
 *   - --dax PATH, a file on an fs-DAX mount: mapped with MAP_SYNC (which
 *     fails unless the file is DAX), and its registration refused with
 *     EOPNOTSUPP: the kernel does not pin fs-DAX file pages for the long
 *     term (FOLL_LONGTERM), so no RDMA MR can cover them.
 * Flushes (need IBV_QP_EX_WITH_FLUSH from the provider; without it the
 * program says so and exits 77, "skipped"):
 *   - ibv_wr_rdma_write then ibv_wr_flush(GLOBAL, RANGE) in one list: the
 *     Flush completes with IBV_WC_FLUSH, the data is in place;
 *   - GLOBAL with IBV_FLUSH_MR over the whole MR, and a zero-length range;
 *   - on the device-DAX MR: a DAX_LEN write of the pattern below, then
 *     PERSISTENT RANGE and PERSISTENT MR flushes; the pattern stays in the
 *     device for tests/commit/nvdimm.sh to read back after this process
 *     has gone;
 *   - errors that leave the stream up (extensions.md, draft 4.5): a Flush
 *     to an MR without a flush right and one past the MR's end complete
 *     with IBV_WC_REM_ACCESS_ERR, the QP stays in RTS and a later
 *     Write + Flush succeeds;
 *   - a PERSISTENT Flush to a global-only MR: the placement type is not
 *     on the iWARP wire (the responder commits as its MR says), so it
 *     completes with TYPE_VIOLATION_STATUS (below).
 *
 * Prints "ok - ..." / "not ok - ..." / "skip - ..." lines and PASSED,
 * FAILED or SKIPPED; exits 0, 1, or 77 when the provider cannot post a
 * Flush yet (every registration check still ran and passed).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#include "check-common.h"

/* IB_UVERBS_DEVICE_FLUSH_PERSISTENT of the kernel's uapi, in
 * ibv_device_attr_ex.device_cap_flags_ex (libibverbs names no bit for it).
 */
#define DEVICE_FLUSH_PERSISTENT (1ULL << 39)

#ifndef MAP_SYNC
#define MAP_SYNC 0x80000
#endif
#ifndef MAP_SHARED_VALIDATE
#define MAP_SHARED_VALIDATE 0x03
#endif

/* The DAX target: 2 MiB, device-DAX's default alignment. */
#define DAX_LEN (2u << 20)
/* What lands in the DAX target (nvdimm.sh compares it): this, repeated. */
#define DAX_PATTERN "rsiw-user-flush\n"
/* Anonymous targets. */
#define ANON_LEN (1u << 20)
/*
 * A PERSISTENT Flush to an MR with only IBV_ACCESS_FLUSH_GLOBAL: the
 * draft's Commit Request carries no placement type, and rsiw's responder
 * commits as the MR says (extensions.md, "Verbs mapping"), so the Flush
 * succeeds (and means global visibility only). rdma-core's own
 * test_qp_ex_rc_flush_type_violate expects IBV_WC_REM_ACCESS_ERR (the IB
 * wire carries the type): change this if rsiw ever carries it.
 */
#define TYPE_VIOLATION_STATUS IBV_WC_SUCCESS

static int skips;

#define SKIP(...)                                                              \
	do {                                                                   \
		printf("skip - ");                                             \
		printf(__VA_ARGS__);                                           \
		printf("\n");                                                  \
		skips++;                                                       \
	} while (0)


static struct rdma_cm_event *expect_event(enum rdma_cm_event_type type)
{
	return expect_event_of(type, 0);
}

struct end {
	struct rdma_cm_id *id;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_qp_ex *qpx;
};

#define BASE_OPS                                                                          \
	(IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_READ | IBV_QP_EX_WITH_SEND)

/*
 * The active side's QP: with IBV_QP_EX_WITH_FLUSH if the provider takes
 * it (*flush_err = 0), else without (*flush_err = its errno), so the
 * registrations can still be checked.
 */
static void setup_end(struct end *e, struct rdma_cm_id *id, int active, int *flush_err)
{
	struct ibv_qp_init_attr_ex attr = {
		.cap = { .max_send_wr = 16, .max_recv_wr = 4, .max_send_sge = 1,
			 .max_recv_sge = 1 },
		.qp_type = IBV_QPT_RC,
		.comp_mask = IBV_QP_INIT_ATTR_PD,
	};

	e->id = id;
	e->pd = ibv_alloc_pd(id->verbs);
	if (!e->pd)
		DIE("ibv_alloc_pd");
	e->cq = ibv_create_cq(id->verbs, 32, NULL, NULL, 0);
	if (!e->cq)
		DIE("ibv_create_cq");
	attr.send_cq = attr.recv_cq = e->cq;
	attr.pd = e->pd;
	if (active) {
		attr.comp_mask |= IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
		attr.send_ops_flags = BASE_OPS | IBV_QP_EX_WITH_FLUSH;
		errno = 0;
		if (rdma_create_qp_ex(id, &attr) == 0) {
			*flush_err = 0;
		} else {
			*flush_err = errno ? errno : -1;
			attr.send_ops_flags = BASE_OPS;
			if (rdma_create_qp_ex(id, &attr))
				DIE("rdma_create_qp_ex without IBV_QP_EX_WITH_FLUSH");
		}
		e->qpx = ibv_qp_to_qp_ex(id->qp);
		if (!e->qpx)
			DIE("ibv_qp_to_qp_ex");
	} else if (rdma_create_qp_ex(id, &attr)) {
		DIE("rdma_create_qp_ex");
	}
}

static void *map_anon(size_t len)
{
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED)
		DIE("mmap anonymous");
	memset(p, 0, len);
	return p;
}

/* Reads n completions (10 s at most); returns how many it got. */
static int poll_n(struct end *e, struct ibv_wc *wc, int n)
{
	struct timespec start, now;
	int got = 0;

	clock_gettime(CLOCK_MONOTONIC, &start);
	while (got < n) {
		int r = ibv_poll_cq(e->cq, n - got, wc + got);

		if (r < 0)
			DIE("ibv_poll_cq");
		got += r;
		clock_gettime(CLOCK_MONOTONIC, &now);
		if (now.tv_sec - start.tv_sec > 10)
			break;
	}
	return got;
}

/*
 * One list: an RDMA Write of len octets from src (if len) to raddr, then a
 * Flush of [faddr, faddr + flen) with type and level. Returns the
 * Flush's completion status, or -1 (and a failed check) if the list did
 * not complete as a list should.
 */
static int write_flush(struct end *c, struct ibv_mr *smr, const void *src, uint32_t len,
		       uint32_t rkey, uint64_t raddr, uint64_t faddr, size_t flen, uint8_t type,
		       uint8_t level, const char *what)
{
	struct ibv_qp_ex *x = c->qpx;
	struct ibv_wc wc[2];
	int n, want = len ? 2 : 1, ret;

	ibv_wr_start(x);
	x->wr_flags = IBV_SEND_SIGNALED;
	if (len) {
		x->wr_id = 1;
		ibv_wr_rdma_write(x, rkey, raddr);
		ibv_wr_set_sge(x, smr->lkey, (uintptr_t)src, len);
	}
	x->wr_id = 2;
	ibv_wr_flush(x, rkey, faddr, flen, type, level);
	ret = ibv_wr_complete(x);
	if (ret) {
		CHECK(0, "%s: ibv_wr_complete (%s)", what, strerror(ret));
		return -1;
	}
	n = poll_n(c, wc, want);
	if (n != want) {
		CHECK(0, "%s: %d of %d completions within 10 s", what, n, want);
		return -1;
	}
	if (len && (wc[0].wr_id != 1 || wc[0].status != IBV_WC_SUCCESS ||
		    wc[0].opcode != IBV_WC_RDMA_WRITE)) {
		CHECK(0, "%s: the Write completes first, successfully (id %" PRIu64 ", %s)", what,
		      wc[0].wr_id, ibv_wc_status_str(wc[0].status));
		return -1;
	}
	if (wc[want - 1].wr_id != 2) {
		CHECK(0, "%s: the Flush's completion (id %" PRIu64 ")", what, wc[want - 1].wr_id);
		return -1;
	}
	if (wc[want - 1].status == IBV_WC_SUCCESS && wc[want - 1].opcode != IBV_WC_FLUSH) {
		CHECK(0, "%s: a successful Flush completes as IBV_WC_FLUSH (opcode %d)", what,
		      wc[want - 1].opcode);
		return -1;
	}
	return wc[want - 1].status;
}

static void fill(char *p, size_t len, const char *pat)
{
	size_t k = strlen(pat), i;

	for (i = 0; i < len; i++)
		p[i] = pat[i % k];
}

static int qp_state(struct ibv_qp *qp)
{
	struct ibv_qp_attr a;
	struct ibv_qp_init_attr init;

	return ibv_query_qp(qp, &a, IBV_QP_STATE, &init) ? -1 : (int)a.qp_state;
}

int main(int argc, char **argv)
{
	const char *saddr, *caddr, *port = "7473", *dax = NULL;
	struct rdma_addrinfo hints = { .ai_port_space = RDMA_PS_TCP }, *sres, *cres;
	struct rdma_conn_param param = { .responder_resources = 4, .initiator_depth = 4 };
	struct rdma_cm_id *listener, *cid;
	struct rdma_cm_event *ev;
	struct end s = { 0 }, c = { 0 };
	struct ibv_mr *gmr, *nmr, *pmr = NULL, *smr, *bad_mr;
	char *gbuf, *nbuf, *sbuf, *dbuf = NULL;
	int flush_err = 0, dax_is_dev = 0, persistent, i, st;
	const int rw = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;

	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc < 3) {
		fprintf(stderr, "usage: %s SERVER-ADDR CLIENT-ADDR [--dax PATH] [--port PORT]\n",
			argv[0]);
		return 2;
	}
	saddr = argv[1];
	caddr = argv[2];
	for (i = 3; i + 1 < argc; i += 2) {
		if (!strcmp(argv[i], "--dax"))
			dax = argv[i + 1];
		else if (!strcmp(argv[i], "--port"))
			port = argv[i + 1];
		else
			break;
	}
	if (i != argc) {
		fprintf(stderr, "%s: bad arguments\n", argv[0]);
		return 2;
	}

	channel = rdma_create_event_channel();
	if (!channel)
		DIE("rdma_create_event_channel");
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
	setup_end(&c, cid, 1, &flush_err);
	printf("# active side on %s, passive side on %s (libibverbs with ibv_wr_flush)\n",
	       ibv_get_device_name(cid->verbs->device), saddr);
	if (rdma_connect(cid, &param))
		DIE("rdma_connect");
	ev = expect_event(RDMA_CM_EVENT_CONNECT_REQUEST);
	setup_end(&s, ev->id, 0, NULL);
	if (rdma_accept(ev->id, &param))
		DIE("rdma_accept");
	rdma_ack_cm_event(ev);
	for (i = 0; i < 2; i++)
		rdma_ack_cm_event(expect_event(RDMA_CM_EVENT_ESTABLISHED));

	/* ---- registrations on the passive side ---- */
	gbuf = map_anon(ANON_LEN);
	nbuf = map_anon(ANON_LEN);
	sbuf = map_anon(DAX_LEN);
	gmr = ibv_reg_mr(s.pd, gbuf, ANON_LEN, rw | IBV_ACCESS_FLUSH_GLOBAL);
	CHECK(gmr != NULL, "anonymous memory registers with IBV_ACCESS_FLUSH_GLOBAL (errno %d)",
	      gmr ? 0 : errno);
	nmr = ibv_reg_mr(s.pd, nbuf, ANON_LEN, rw);
	if (!nmr)
		DIE("ibv_reg_mr without flush rights");
	smr = ibv_reg_mr(c.pd, sbuf, DAX_LEN, IBV_ACCESS_LOCAL_WRITE);
	if (!smr)
		DIE("ibv_reg_mr of the source buffer");
	/* A device that announces persistent flush refuses it on memory that
	 * is not persistent (EINVAL); one that does not (a kernel without the
	 * pmem API: User-Mode Linux) has it refused by the core (EOPNOTSUPP).
	 */
	{
		struct ibv_device_attr_ex dattr;

		memset(&dattr, 0, sizeof(dattr));
		if (ibv_query_device_ex(s.pd->context, NULL, &dattr))
			DIE("ibv_query_device_ex");
		persistent = !!(dattr.device_cap_flags_ex & DEVICE_FLUSH_PERSISTENT);
		printf("# the device announces persistent flush: %s\n", persistent ? "yes" : "no");
	}
	errno = 0;
	bad_mr = ibv_reg_mr(s.pd, nbuf, ANON_LEN, rw | IBV_ACCESS_FLUSH_PERSISTENT);
	if (persistent)
		CHECK(!bad_mr && errno == EINVAL,
		      "anonymous memory with IBV_ACCESS_FLUSH_PERSISTENT is refused with EINVAL (%s)",
		      bad_mr ? "registered" : strerror(errno));
	else
		CHECK(!bad_mr && errno == EOPNOTSUPP,
		      "IBV_ACCESS_FLUSH_PERSISTENT, which the device does not announce, is refused with EOPNOTSUPP (%s)",
		      bad_mr ? "registered" : strerror(errno));
	if (bad_mr)
		ibv_dereg_mr(bad_mr);

	if (dax) {
		struct stat stt;
		int fd = open(dax, O_RDWR | O_CREAT, 0600); /* a file on fs-DAX may be new */

		if (fd < 0 || fstat(fd, &stt))
			DIE("open %s", dax);
		dax_is_dev = S_ISCHR(stt.st_mode);
		if (dax_is_dev) {
			dbuf = mmap(NULL, DAX_LEN, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
			if (dbuf == MAP_FAILED)
				DIE("mmap %u octets of %s", DAX_LEN, dax);
		} else {
			if (ftruncate(fd, DAX_LEN))
				DIE("ftruncate %s", dax);
			/* MAP_SYNC: only a DAX file maps so. */
			dbuf = mmap(NULL, DAX_LEN, PROT_READ | PROT_WRITE,
				    MAP_SHARED_VALIDATE | MAP_SYNC, fd, 0);
			CHECK(dbuf != MAP_FAILED, "%s maps with MAP_SYNC (a file on fs-DAX) (%s)", dax,
			      dbuf == MAP_FAILED ? strerror(errno) : "ok");
			if (dbuf == MAP_FAILED)
				DIE("mmap %s", dax);
		}
		close(fd);
		errno = 0;
		pmr = ibv_reg_mr(s.pd, dbuf, DAX_LEN,
				 rw | IBV_ACCESS_FLUSH_PERSISTENT | IBV_ACCESS_FLUSH_GLOBAL);
		if (dax_is_dev) {
			CHECK(pmr != NULL, "device-DAX %s registers with IBV_ACCESS_FLUSH_PERSISTENT "
			      "(errno %d)", dax, pmr ? 0 : errno);
		} else {
			CHECK(!pmr && errno == EOPNOTSUPP,
			      "an fs-DAX file's pages are not pinned for an MR: EOPNOTSUPP (%s)",
			      pmr ? "registered" : strerror(errno));
			if (pmr)
				ibv_dereg_mr(pmr);
			pmr = NULL;
		}
	}

	if (flush_err) {
		SKIP("ibv_create_qp_ex with IBV_QP_EX_WITH_FLUSH: %s: this provider cannot post "
		     "a Flush yet", flush_err > 0 ? strerror(flush_err) : "failed");
		printf("%s\n", failures ? "FAILED" : "SKIPPED");
		return failures ? 1 : 77;
	}
	if (!gmr)
		DIE("no global-flush MR to flush into");

	/* ---- global visibility, anonymous memory ---- */
	fill(sbuf, 65536, "global-flush-01\n");
	st = write_flush(&c, smr, sbuf, 65536, gmr->rkey, (uintptr_t)gbuf + 4096,
			 (uintptr_t)gbuf + 4096, 65536, IBV_FLUSH_GLOBAL, IBV_FLUSH_RANGE,
			 "Write + Flush(GLOBAL, RANGE)");
	CHECK(st == IBV_WC_SUCCESS, "Write 64 KiB + Flush(GLOBAL, RANGE) completes (%s)",
	      st < 0 ? "-" : ibv_wc_status_str(st));
	CHECK(memcmp(gbuf + 4096, sbuf, 65536) == 0, "and the data is in place at its completion");

	fill(sbuf, ANON_LEN, "global-flush-02\n");
	st = write_flush(&c, smr, sbuf, ANON_LEN, gmr->rkey, (uintptr_t)gbuf, (uintptr_t)gbuf,
			 ANON_LEN, IBV_FLUSH_GLOBAL, IBV_FLUSH_MR, "Write + Flush(GLOBAL, MR)");
	CHECK(st == IBV_WC_SUCCESS, "Write 1 MiB + Flush(GLOBAL, MR) over the whole MR (%s)",
	      st < 0 ? "-" : ibv_wc_status_str(st));
	CHECK(memcmp(gbuf, sbuf, ANON_LEN) == 0, "and the whole MR holds the data");

	st = write_flush(&c, smr, NULL, 0, gmr->rkey, 0, (uintptr_t)gbuf + 100, 0,
			 IBV_FLUSH_GLOBAL, IBV_FLUSH_RANGE, "zero-length Flush");
	CHECK(st == IBV_WC_SUCCESS, "a zero-length Flush completes (%s)",
	      st < 0 ? "-" : ibv_wc_status_str(st));

	/* ---- persistence, device-DAX ---- */
	if (pmr) {
		fill(sbuf, DAX_LEN, DAX_PATTERN);
		memset(dbuf, 0, DAX_LEN);
		st = write_flush(&c, smr, sbuf, DAX_LEN / 2, pmr->rkey, (uintptr_t)dbuf,
				 (uintptr_t)dbuf, DAX_LEN / 2, IBV_FLUSH_PERSISTENT,
				 IBV_FLUSH_RANGE, "Write + Flush(PERSISTENT, RANGE)");
		CHECK(st == IBV_WC_SUCCESS,
		      "Write 1 MiB + Flush(PERSISTENT, RANGE) into device-DAX completes (%s)",
		      st < 0 ? "-" : ibv_wc_status_str(st));
		st = write_flush(&c, smr, sbuf + DAX_LEN / 2, DAX_LEN / 2, pmr->rkey,
				 (uintptr_t)dbuf + DAX_LEN / 2, (uintptr_t)dbuf, DAX_LEN,
				 IBV_FLUSH_PERSISTENT, IBV_FLUSH_MR,
				 "Write + Flush(PERSISTENT, MR)");
		CHECK(st == IBV_WC_SUCCESS,
		      "Write 1 MiB more + Flush(PERSISTENT, MR) over the whole MR completes (%s)",
		      st < 0 ? "-" : ibv_wc_status_str(st));
		CHECK(memcmp(dbuf, sbuf, DAX_LEN) == 0,
		      "the device-DAX mapping holds %u octets of \"rsiw-user-flush\\n\"", DAX_LEN);
	} else if (!dax) {
		SKIP("persistent flushes: no --dax PATH");
	} else if (!dax_is_dev) {
		SKIP("persistent flushes: %s is on fs-DAX, which no MR can cover", dax);
	}

	/* ---- errors that leave the stream up (last: on IB they would end it) ---- */
	st = write_flush(&c, smr, NULL, 0, nmr->rkey, 0, (uintptr_t)nbuf, 4096, IBV_FLUSH_GLOBAL,
			 IBV_FLUSH_RANGE, "Flush without flush right");
	CHECK(st == IBV_WC_REM_ACCESS_ERR,
	      "a Flush to an MR without a flush right: IBV_WC_REM_ACCESS_ERR (%s)",
	      st < 0 ? "-" : ibv_wc_status_str(st));
	st = write_flush(&c, smr, NULL, 0, gmr->rkey, 0, (uintptr_t)gbuf + ANON_LEN - 4096, 8192,
			 IBV_FLUSH_GLOBAL, IBV_FLUSH_RANGE, "Flush past the end");
	CHECK(st == IBV_WC_REM_ACCESS_ERR,
	      "a Flush past the MR's end: IBV_WC_REM_ACCESS_ERR (%s)",
	      st < 0 ? "-" : ibv_wc_status_str(st));
	st = write_flush(&c, smr, NULL, 0, gmr->rkey, 0, (uintptr_t)gbuf, 4096,
			 IBV_FLUSH_PERSISTENT, IBV_FLUSH_RANGE, "PERSISTENT to a global MR");
	CHECK(st == TYPE_VIOLATION_STATUS,
	      "a PERSISTENT Flush to a global-only MR: %s (%s)",
	      ibv_wc_status_str(TYPE_VIOLATION_STATUS), st < 0 ? "-" : ibv_wc_status_str(st));
	CHECK(qp_state(c.id->qp) == IBV_QPS_RTS && qp_state(s.id->qp) == IBV_QPS_RTS,
	      "both QPs are still in RTS (%d, %d)", qp_state(c.id->qp), qp_state(s.id->qp));
	fill(sbuf, 8192, "global-flush-03\n");
	st = write_flush(&c, smr, sbuf, 8192, gmr->rkey, (uintptr_t)gbuf, (uintptr_t)gbuf, 8192,
			 IBV_FLUSH_GLOBAL, IBV_FLUSH_RANGE, "Write + Flush after the errors");
	CHECK(st == IBV_WC_SUCCESS && memcmp(gbuf, sbuf, 8192) == 0,
	      "a Write + Flush after them succeeds, data in place (%s)",
	      st < 0 ? "-" : ibv_wc_status_str(st));

	rdma_disconnect(cid);
	rdma_destroy_qp(cid);
	rdma_destroy_qp(s.id);
	if (pmr)
		ibv_dereg_mr(pmr);
	if (dbuf)
		munmap(dbuf, DAX_LEN);
	ibv_dereg_mr(gmr);
	ibv_dereg_mr(nmr);
	ibv_dereg_mr(smr);
	printf("%s\n", failures ? "FAILED" : "PASSED");
	return failures ? 1 : 0;
}
