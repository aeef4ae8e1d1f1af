/* SPDX-License-Identifier: GPL-2.0 */
/*
 * What the provider's checks (rsiw-uverbs-check, rsiw-ring-check,
 * rsiw-flush-check) share: TAP-style "ok" / "not ok" lines, a fatal
 * error, the rdma_cm event channel with a wait for one event, and the
 * poll for one completion and the post of one receive.
 * Included once, by the check's own .c file, after its system headers.
 */
#ifndef RSIW_CHECK_COMMON_H
#define RSIW_CHECK_COMMON_H

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <rdma/rdma_cma.h>

static int failures;

/* One "ok - ..." or "not ok - ..." line (counted in failures). */
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

/* A failure the check cannot go on from: its line, with errno, and exit 1. */
#define DIE(...)                                                               \
	do {                                                                   \
		printf("not ok - ");                                           \
		printf(__VA_ARGS__);                                           \
		printf(" (%s)\n", strerror(errno));                            \
		exit(1);                                                       \
	} while (0)

static struct rdma_event_channel *channel;

/*
 * The next rdma_cm event, which must be TYPE (DIE otherwise). With
 * skip_stale, a DISCONNECTED or TIMEWAIT_EXIT of an earlier connection
 * that arrives first is acknowledged and skipped (for checks that make
 * connections one after another).
 */
static struct rdma_cm_event *expect_event_of(enum rdma_cm_event_type type, int skip_stale)
{
	struct rdma_cm_event *ev;

	for (;;) {
		if (rdma_get_cm_event(channel, &ev))
			DIE("rdma_get_cm_event");
		if (!skip_stale || ev->event == type ||
		    (ev->event != RDMA_CM_EVENT_DISCONNECTED && ev->event != RDMA_CM_EVENT_TIMEWAIT_EXIT))
			break;
		rdma_ack_cm_event(ev);
	}
	if (ev->event != type) {
		errno = ev->status < 0 ? -ev->status : EPROTO;
		DIE("expected %s, got %s", rdma_event_str(type), rdma_event_str(ev->event));
	}
	return ev;
}

/* Polls one completion of CQ into WC: 0, or -1 after 10 s without one. */
static inline int poll_cq_one(struct ibv_cq *cq, struct ibv_wc *wc)
{
	struct timespec start, now;

	clock_gettime(CLOCK_MONOTONIC, &start);
	for (;;) {
		int n = ibv_poll_cq(cq, 1, wc);

		if (n < 0)
			DIE("ibv_poll_cq");
		if (n == 1)
			return 0;
		clock_gettime(CLOCK_MONOTONIC, &now);
		if (now.tv_sec - start.tv_sec > 10)
			return -1;
	}
}

/* Posts one receive of LEN octets at ADDR (in the MR of LKEY) on QP. */
static inline int post_recv_one(struct ibv_qp *qp, uint32_t lkey, uint64_t wr_id, void *addr,
				uint32_t len)
{
	struct ibv_sge sge = { .addr = (uintptr_t)addr, .length = len, .lkey = lkey };
	struct ibv_recv_wr wr = { .wr_id = wr_id, .sg_list = &sge, .num_sge = 1 }, *bad;

	return ibv_post_recv(qp, &wr, &bad);
}

#endif
