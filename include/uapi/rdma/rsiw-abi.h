/* SPDX-License-Identifier: ((GPL-2.0 WITH Linux-syscall-note) OR BSD-2-Clause) */
/*
 * rsiw's user verbs ABI: what the kernel module and its rdma-core
 * provider (providers/rsiw) agree on. Documentation/design.md, "Shared
 * rings", explains the protocol.
 */
#ifndef RSIW_ABI_H
#define RSIW_ABI_H

#include <linux/types.h>

/*
 * The uverbs driver id rsiw registers ("rs"). Out of tree, rsiw has no
 * RDMA_DRIVER_* value of its own; libibverbs binds a device to the
 * provider whose match table holds its id, and the kernel refuses any
 * uverbs ioctl whose header carries another.
 */
#define RSIW_DRIVER_ID 0x7273

/*
 * The ABI version: the device's abi_version (sysfs) and what the provider
 * sends at context allocation. Version 1 had no driver data at all (every
 * verb a uverbs command); version 2 adds the shared rings. A context
 * allocated without driver data is a version 1 context: its queues have no
 * rings and are posted to and polled through uverbs commands.
 */
#define RSIW_ABI_VERSION 2

/* ---- context ----------------------------------------------------------- */

struct rsiw_alloc_ucontext_req {
	__u32 abi_version; /* RSIW_ABI_VERSION; anything else: EINVAL */
	__u32 reserved;    /* 0 */
};

struct rsiw_alloc_ucontext_resp {
	__u32 abi_version; /* the kernel's RSIW_ABI_VERSION */
	__u32 sqe_size;    /* sizeof(struct rsiw_sqe) */
	__u32 rqe_size;    /* sizeof(struct rsiw_rqe) */
	__u32 cqe_size;    /* sizeof(struct rsiw_cqe) */
	__u32 max_sge;     /* SGEs a ring WQE can hold */
	__u32 max_inline;  /* inline octets a ring SQE can hold */
	__u32 ring_hdr;    /* octets before a ring's first entry */
	__u32 reserved;
};

/* ---- rings ------------------------------------------------------------- */

/*
 * Every ring is one mapping: a control block, then a power-of-two number of
 * entries at offset RSIW_RING_HDR. The indices run freely (u32, wrapping);
 * entry i is at slot i & (entries - 1). Each index has one writer:
 *   SQ, RQ, SRQ: the process produces (writes the entry, then `producer`
 *                with release order), the kernel consumes (`consumer`);
 *   CQ:          the kernel produces, the process consumes.
 * A ring holds at most `entries` entries: producer - consumer <= entries.
 * The kernel reads an entry once, into its own memory, and checks it there:
 * whatever the process writes can only fail its own work requests.
 */
struct rsiw_ring_ctl {
	__u32 producer;
	__u32 pad0[15];
	__u32 consumer;
	__u32 pad1[15];
	__u32 flags; /* written by the kernel, RSIW_RING_* */
	__u32 armed; /* CQ only, written by the process: RSIW_CQ_ARM_* */
	__u32 pad2[14];
};

#define RSIW_RING_HDR 256

/*
 * flags of an SQ/RQ/SRQ: the QP (or SRQ) is in Error. Entries posted from
 * now on must be flushed by the kernel: after publishing `producer` the
 * process reads `flags` and, if this bit is set, rings the doorbell (the
 * post_send or post_recv command with no work request), on which the
 * kernel completes every posted entry with IBV_WC_WR_FLUSH_ERR.
 */
#define RSIW_RING_ERROR (1u << 0)
/*
 * flags of an SQ: the kernel's transmit work is running and will look at
 * `producer` again before it stops; a post needs no doorbell. The process
 * publishes `producer`, issues a full barrier, then reads `flags`.
 */
#define RSIW_RING_SQ_ACTIVE (1u << 1)
/* flags of a CQ: an entry was refused because the ring was full
 * (the CQ overflowed, IBV_EVENT_CQ_ERR was raised).
 */
#define RSIW_RING_CQ_OVERFLOW (1u << 2)

struct rsiw_sge {
	__aligned_u64 addr;
	__u32 length;
	__u32 lkey;
};

#define RSIW_MAX_SGE 6
#define RSIW_MAX_INLINE 128

/* rsiw_sqe.opcode: the values of enum ib_uverbs_wr_opcode. */
enum rsiw_wr_opcode {
	RSIW_WR_RDMA_WRITE = 0,
	RSIW_WR_RDMA_WRITE_WITH_IMM = 1,
	RSIW_WR_SEND = 2,
	RSIW_WR_SEND_WITH_IMM = 3,
	RSIW_WR_RDMA_READ = 4,
	RSIW_WR_ATOMIC_CMP_AND_SWP = 5,
	RSIW_WR_ATOMIC_FETCH_AND_ADD = 6,
	RSIW_WR_LOCAL_INV = 7,
	RSIW_WR_BIND_MW = 8,
	RSIW_WR_SEND_WITH_INV = 9,
	RSIW_WR_TSO = 10,
	RSIW_WR_DRIVER1 = 11,
	RSIW_WR_FLUSH = 14,
	RSIW_WR_ATOMIC_WRITE = 15,
	/* rsiw's own (rsiwdv_*): masked atomics, RFC 7306 with masks. */
	RSIW_WR_MASKED_ATOMIC_CMP_AND_SWP = 0x40,
	RSIW_WR_MASKED_ATOMIC_FETCH_AND_ADD = 0x41,
};

/* rsiw_sqe.flags */
#define RSIW_SQE_SIGNALED (1u << 0)
#define RSIW_SQE_SOLICITED (1u << 1)
#define RSIW_SQE_FENCE (1u << 2)
#define RSIW_SQE_INLINE (1u << 3)
/* Flush: MR selectivity (IBV_FLUSH_MR); without it a range (IBV_FLUSH_RANGE). */
#define RSIW_SQE_FLUSH_MR (1u << 4)

/*
 * A send queue entry (192 octets). Fields by opcode:
 *   imm_inv:     Write with Immediate: the immediate (network order);
 *                Send with Invalidate: the STag to invalidate;
 *                Local Invalidate: the STag.
 *   rkey, remote_addr: Write, Read, atomics, Flush.
 *   length:      Flush: the range's length; inline: the data's length.
 *   compare_add, swap (and their masks for the masked atomics): atomics.
 *   flush_type:  Flush: the placement type, IBV_FLUSH_GLOBAL and/or
 *                IBV_FLUSH_PERSISTENT (the selectivity level: RSIW_SQE_FLUSH_MR).
 *   sge / inline_data: the local data (num_sge SGEs, or `length` octets
 *                inline with RSIW_SQE_INLINE).
 */
struct rsiw_sqe {
	__aligned_u64 wr_id;
	__u8 opcode;
	__u8 flags;
	__u8 num_sge;
	__u8 flush_type;
	__u32 imm_inv;
	__u32 rkey;
	__u32 length;
	__aligned_u64 remote_addr;
	__aligned_u64 compare_add;
	__aligned_u64 swap;
	__aligned_u64 compare_add_mask;
	__aligned_u64 swap_mask;
	union {
		struct rsiw_sge sge[RSIW_MAX_SGE];
		__u8 inline_data[RSIW_MAX_INLINE];
	};
};

/* A receive queue entry (shared by a QP's RQ and an SRQ), 112 octets. */
struct rsiw_rqe {
	__aligned_u64 wr_id;
	__u32 num_sge;
	__u32 reserved;
	struct rsiw_sge sge[RSIW_MAX_SGE];
};

/* rsiw_cqe.flags */
#define RSIW_CQE_WITH_IMM (1u << 0)
#define RSIW_CQE_WITH_INV (1u << 1)

/*
 * A completion queue entry (32 octets): opcode and status are the values
 * of enum ibv_wc_opcode and enum ibv_wc_status.
 */
struct rsiw_cqe {
	__aligned_u64 wr_id;
	__u8 opcode;
	__u8 status;
	__u8 flags;
	__u8 reserved;
	__u32 byte_len;
	__u32 imm_inv; /* immediate (network order) or invalidated STag */
	__u32 qp_num;
	__u32 vendor_err;
	__u32 reserved2;
};

/* rsiw_ring_ctl.armed of a CQ: the process arms without a system call. */
#define RSIW_CQ_ARM_NEXT 1
#define RSIW_CQ_ARM_SOLICITED 2

/* ---- create commands ---------------------------------------------------- */

/* Create with rings (a version 2 context); the response names each ring. */
#define RSIW_CREATE_RINGS (1u << 0)

struct rsiw_create_cq_req {
	__u32 flags; /* RSIW_CREATE_RINGS */
	__u32 reserved;
};

struct rsiw_ring_info {
	__aligned_u64 offset; /* mmap() offset of the ring on the context's fd */
	__u32 size;           /* octets to map */
	__u32 entries;        /* power of two */
};

struct rsiw_create_cq_resp {
	struct rsiw_ring_info cq;
};

struct rsiw_create_qp_req {
	__u32 flags; /* RSIW_CREATE_RINGS */
	__u32 reserved;
};

struct rsiw_create_qp_resp {
	struct rsiw_ring_info sq;
	struct rsiw_ring_info rq; /* entries 0 with an SRQ */
};

struct rsiw_create_srq_req {
	__u32 flags; /* RSIW_CREATE_RINGS */
	__u32 reserved;
};

struct rsiw_create_srq_resp {
	struct rsiw_ring_info rq;
};

#endif /* RSIW_ABI_H */
