// SPDX-License-Identifier: GPL-2.0
/*
 * perftest-connect-delay.so: an LD_PRELOAD shim for the guest tests' perftest
 * clients. Every rdma_connect() of the process after its first waits
 * PERFTEST_CONNECT_DELAY_MS milliseconds (default 500) before going on;
 * with PERFTEST_CONNECT_DELAY_FIRST=1 the first waits too (qperf).
 *
 * Why. perftest 4.5-0.17 (Debian 12's) with -R connects twice to one port:
 * first its control connection, then, right after a handshake over it, its
 * data QPs. Its server destroys the control listener at once, and creates
 * the data listener only after that same handshake. A client that gets to
 * its rdma_connect() before the server has listened meets no listener: TCP
 * refuses the SYN, the client sees RDMA_CM_EVENT_REJECTED (-ECONNREFUSED)
 * and the retry that follows crashes inside librdmacm while tearing the
 * refused connection down (perftest's own bug, fixed upstream in 3d9d8d0,
 * "Fix crashes and logical flaws in RDMA CM connection retry"). The
 * race is perftest's and is the same on every device; a server whose vCPU
 * stalls ~100 ms on a loaded CI host loses it
 * (seen once in CI: the client's data connect refused 130 ms after the
 * control connection came up, where ~50 ms is the usual gap). The delay
 * gives the server time to listen; nothing else of the run changes.
 *
 * qperf 0.4.11 (Debian 12's) has the same race in every RDMA CM test: its
 * server sends the client the port before it calls rdma_listen() (seen in
 * strace: the port's write on the control socket, then the LISTEN
 * command), and its client connects once per test. So a qperf client
 * delays every connect, its first included.
 */
#include <dlfcn.h>
#include <errno.h>
#include <stdlib.h>
#include <time.h>

#include <rdma/rdma_cma.h>

__attribute__((visibility("default")))
int rdma_connect(struct rdma_cm_id *id, struct rdma_conn_param *conn_param)
{
	static int (*real)(struct rdma_cm_id *, struct rdma_conn_param *);
	static int calls;

	if (!real)
		real = (int (*)(struct rdma_cm_id *, struct rdma_conn_param *))
			dlsym(RTLD_NEXT, "rdma_connect");
	if (!real) {
		errno = ENOSYS;
		return -1;
	}
	if (calls++ > 0 || getenv("PERFTEST_CONNECT_DELAY_FIRST")) {
		const char *s = getenv("PERFTEST_CONNECT_DELAY_MS");
		long ms = s ? strtol(s, NULL, 10) : 500;
		struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

		while (ms > 0 && nanosleep(&ts, &ts) && errno == EINTR)
			;
	}
	return real(id, conn_param);
}
