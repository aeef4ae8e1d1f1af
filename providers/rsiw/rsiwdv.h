/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * rsiw direct verbs: what libibverbs has no call for. Exported by the
 * provider library (librsiw-rdmavNN.so); an application finds them with
 * dlopen(RTLD_NOLOAD) + dlsym once libibverbs has loaded the provider.
 */
#ifndef RSIWDV_H
#define RSIWDV_H

#include <stdint.h>
#include <infiniband/verbs.h>

/* The QP's rings (include/uapi/rdma/rsiw-abi.h), for tests and tools. */
struct rsiwdv_qp {
	void *sq_ring; /* struct rsiw_ring_ctl, then entries at RSIW_RING_HDR */
	uint32_t sq_entries;
	void *rq_ring; /* NULL with an SRQ */
	uint32_t rq_entries;
};

int rsiwdv_query_qp(struct ibv_qp *qp, struct rsiwdv_qp *out);
int rsiwdv_sq_doorbell(struct ibv_qp *qp);

enum rsiwdv_masked_op {
	RSIWDV_MASKED_CMP_SWAP = 1,
	RSIWDV_MASKED_FETCH_ADD = 2,
};

/*
 * RFC 7306 masked atomics. CmpSwap: the target's bits under compare_mask
 * are compared with compare_add's; if equal, the bits under swap_mask are
 * replaced by swap's. FetchAdd: compare_add_mask marks the bit positions
 * where a carry stops (RFC 7306 4.1). The original value lands in sge.
 */
struct rsiwdv_masked_atomic {
	uint64_t wr_id;
	enum rsiwdv_masked_op op;
	int signaled;
	uint32_t rkey;
	uint64_t remote_addr;
	uint64_t compare_add, compare_add_mask;
	uint64_t swap, swap_mask;
	struct ibv_sge sge;
};

int rsiwdv_post_masked_atomic(struct ibv_qp *qp,
			      const struct rsiwdv_masked_atomic *a);

#endif /* RSIWDV_H */
