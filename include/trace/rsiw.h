/* SPDX-License-Identifier: GPL-2.0 */
/*
 * rsiw's trace events (tracefs events/rsiw/, `trace-cmd record -e rsiw`):
 * connection management, MPA negotiation, QP states, Terminates and work
 * requests that complete in error. Instantiated in rust/trace.c, fired
 * from Rust through its rsiw_trace_*() wrappers (rust/ffi/trace.rs).
 */
#undef TRACE_SYSTEM
#define TRACE_SYSTEM rsiw

/* Out of tree: define_trace.h finds this file through -I$(src)/include. */
#undef TRACE_INCLUDE_PATH
#define TRACE_INCLUDE_PATH trace
#undef TRACE_INCLUDE_FILE
#define TRACE_INCLUDE_FILE rsiw

#if !defined(_TRACE_RSIW_H) || defined(TRACE_HEADER_MULTI_READ)
#define _TRACE_RSIW_H

#include <linux/tracepoint.h>
#include <linux/socket.h>
#include <linux/in6.h>
#include <rdma/ib_verbs.h>

TRACE_DEFINE_ENUM(IB_QPS_RESET);
TRACE_DEFINE_ENUM(IB_QPS_INIT);
TRACE_DEFINE_ENUM(IB_QPS_RTR);
TRACE_DEFINE_ENUM(IB_QPS_RTS);
TRACE_DEFINE_ENUM(IB_QPS_SQD);
TRACE_DEFINE_ENUM(IB_QPS_SQE);
TRACE_DEFINE_ENUM(IB_QPS_ERR);

#define rsiw_show_qp_state(s)				\
	__print_symbolic(s,				\
		{ IB_QPS_RESET, "RESET" },		\
		{ IB_QPS_INIT, "INIT" },		\
		{ IB_QPS_RTR, "RTR" },			\
		{ IB_QPS_RTS, "RTS" },			\
		{ IB_QPS_SQD, "SQD" },			\
		{ IB_QPS_SQE, "SQE" },			\
		{ IB_QPS_ERR, "ERR" })

TRACE_DEFINE_ENUM(IB_WC_SUCCESS);
TRACE_DEFINE_ENUM(IB_WC_LOC_LEN_ERR);
TRACE_DEFINE_ENUM(IB_WC_LOC_QP_OP_ERR);
TRACE_DEFINE_ENUM(IB_WC_LOC_PROT_ERR);
TRACE_DEFINE_ENUM(IB_WC_WR_FLUSH_ERR);
TRACE_DEFINE_ENUM(IB_WC_LOC_ACCESS_ERR);
TRACE_DEFINE_ENUM(IB_WC_REM_INV_REQ_ERR);
TRACE_DEFINE_ENUM(IB_WC_REM_ACCESS_ERR);
TRACE_DEFINE_ENUM(IB_WC_REM_OP_ERR);
TRACE_DEFINE_ENUM(IB_WC_GENERAL_ERR);

#define rsiw_show_wc_status(s)					\
	__print_symbolic(s,					\
		{ IB_WC_SUCCESS, "SUCCESS" },			\
		{ IB_WC_LOC_LEN_ERR, "LOC_LEN_ERR" },		\
		{ IB_WC_LOC_QP_OP_ERR, "LOC_QP_OP_ERR" },	\
		{ IB_WC_LOC_PROT_ERR, "LOC_PROT_ERR" },		\
		{ IB_WC_WR_FLUSH_ERR, "WR_FLUSH_ERR" },		\
		{ IB_WC_LOC_ACCESS_ERR, "LOC_ACCESS_ERR" },	\
		{ IB_WC_REM_INV_REQ_ERR, "REM_INV_REQ_ERR" },	\
		{ IB_WC_REM_ACCESS_ERR, "REM_ACCESS_ERR" },	\
		{ IB_WC_REM_OP_ERR, "REM_OP_ERR" },		\
		{ IB_WC_GENERAL_ERR, "GENERAL_ERR" })

TRACE_DEFINE_ENUM(IB_WC_SEND);
TRACE_DEFINE_ENUM(IB_WC_RDMA_WRITE);
TRACE_DEFINE_ENUM(IB_WC_RDMA_READ);
TRACE_DEFINE_ENUM(IB_WC_COMP_SWAP);
TRACE_DEFINE_ENUM(IB_WC_FETCH_ADD);
TRACE_DEFINE_ENUM(IB_WC_LOCAL_INV);
TRACE_DEFINE_ENUM(IB_WC_REG_MR);
TRACE_DEFINE_ENUM(IB_WC_MASKED_COMP_SWAP);
TRACE_DEFINE_ENUM(IB_WC_MASKED_FETCH_ADD);
TRACE_DEFINE_ENUM(IB_WC_FLUSH);
TRACE_DEFINE_ENUM(IB_WC_RECV);
TRACE_DEFINE_ENUM(IB_WC_RECV_RDMA_WITH_IMM);

#define rsiw_show_wc_opcode(o)					\
	__print_symbolic(o,					\
		{ IB_WC_SEND, "SEND" },				\
		{ IB_WC_RDMA_WRITE, "RDMA_WRITE" },		\
		{ IB_WC_RDMA_READ, "RDMA_READ" },		\
		{ IB_WC_COMP_SWAP, "COMP_SWAP" },		\
		{ IB_WC_FETCH_ADD, "FETCH_ADD" },		\
		{ IB_WC_LOCAL_INV, "LOCAL_INV" },		\
		{ IB_WC_REG_MR, "REG_MR" },			\
		{ IB_WC_MASKED_COMP_SWAP, "MASKED_COMP_SWAP" },	\
		{ IB_WC_MASKED_FETCH_ADD, "MASKED_FETCH_ADD" },	\
		{ IB_WC_FLUSH, "FLUSH" },			\
		{ IB_WC_RECV, "RECV" },				\
		{ IB_WC_RECV_RDMA_WITH_IMM, "RECV_RDMA_WITH_IMM" })

/* A socket address for %pISpc; an absent one shows as 0.0.0.0:0. */
#define rsiw_assign_addr(dst, src)					\
	do {								\
		memset(dst, 0, sizeof(dst));				\
		if (src)						\
			memcpy(dst, src, (src)->ss_family == AF_INET6 ?	\
			       sizeof(struct sockaddr_in6) :		\
			       sizeof(struct sockaddr_in));		\
		else							\
			((struct sockaddr *)dst)->sa_family = AF_INET;	\
	} while (0)

/* A connection endpoint's CM state changes (`old` "-": a new endpoint). */
TRACE_EVENT(rsiw_cm_state,
	TP_PROTO(u64 cm_id, const struct __kernel_sockaddr_storage *laddr,
		 const struct __kernel_sockaddr_storage *raddr,
		 const char *old, unsigned int old_len,
		 const char *new, unsigned int new_len),
	TP_ARGS(cm_id, laddr, raddr, old, old_len, new, new_len),
	TP_STRUCT__entry(
		__field(u64, cm_id)
		__array(u8, laddr, sizeof(struct sockaddr_in6))
		__array(u8, raddr, sizeof(struct sockaddr_in6))
		__string_len(old, old, old_len)
		__string_len(new, new, new_len)
	),
	TP_fast_assign(
		__entry->cm_id = cm_id;
		rsiw_assign_addr(__entry->laddr, laddr);
		rsiw_assign_addr(__entry->raddr, raddr);
		__assign_str(old);
		__assign_str(new);
	),
	TP_printk("cm_id=%llu local=%pISpc remote=%pISpc %s -> %s",
		  __entry->cm_id, __entry->laddr, __entry->raddr,
		  __get_str(old), __get_str(new))
);

/*
 * The outcome of an MPA exchange: "accepted" (the negotiated framing,
 * IRD/ORD and RTR follow), "reject_sent", "rejected" (by the peer) or
 * "failed" (error: the RFC 6581 error, layer/type/code as one number).
 * The four flags travel as the bits of one argument: a kernel with
 * CONFIG_BPF_EVENTS takes at most 12 (bpf_trace_run1..12).
 */
#define RSIW_TRACE_MPA_INITIATOR	BIT(0)
#define RSIW_TRACE_MPA_CRC		BIT(1)
#define RSIW_TRACE_MPA_MARKERS_TX	BIT(2)
#define RSIW_TRACE_MPA_MARKERS_RX	BIT(3)

TRACE_EVENT(rsiw_mpa,
	TP_PROTO(u64 cm_id, u8 flags, const char *result, unsigned int result_len,
		 u8 rev, u16 ird, u16 ord, const char *rtr, unsigned int rtr_len,
		 u16 error),
	TP_ARGS(cm_id, flags, result, result_len, rev, ird, ord, rtr, rtr_len, error),
	TP_STRUCT__entry(
		__field(u64, cm_id)
		__field(bool, initiator)
		__string_len(result, result, result_len)
		__field(u8, rev)
		__field(bool, crc)
		__field(bool, markers_tx)
		__field(bool, markers_rx)
		__field(u16, ird)
		__field(u16, ord)
		__string_len(rtr, rtr, rtr_len)
		__field(u16, error)
	),
	TP_fast_assign(
		__entry->cm_id = cm_id;
		__entry->initiator = flags & RSIW_TRACE_MPA_INITIATOR;
		__assign_str(result);
		__entry->rev = rev;
		__entry->crc = flags & RSIW_TRACE_MPA_CRC;
		__entry->markers_tx = flags & RSIW_TRACE_MPA_MARKERS_TX;
		__entry->markers_rx = flags & RSIW_TRACE_MPA_MARKERS_RX;
		__entry->ird = ird;
		__entry->ord = ord;
		__assign_str(rtr);
		__entry->error = error;
	),
	TP_printk("cm_id=%llu %s %s rev=%u crc=%u markers_tx=%u markers_rx=%u ird=%u ord=%u rtr=%s error=0x%04x",
		  __entry->cm_id, __entry->initiator ? "initiator" : "responder",
		  __get_str(result), __entry->rev, __entry->crc, __entry->markers_tx,
		  __entry->markers_rx, __entry->ird, __entry->ord, __get_str(rtr),
		  __entry->error)
);

TRACE_EVENT(rsiw_qp_state,
	TP_PROTO(u32 qpn, int old, int new),
	TP_ARGS(qpn, old, new),
	TP_STRUCT__entry(
		__field(u32, qpn)
		__field(int, old)
		__field(int, new)
	),
	TP_fast_assign(
		__entry->qpn = qpn;
		__entry->old = old;
		__entry->new = new;
	),
	TP_printk("qpn=%u %s -> %s", __entry->qpn,
		  rsiw_show_qp_state(__entry->old), rsiw_show_qp_state(__entry->new))
);

/* layer: 0 RDMAP, 1 DDP, 2 MPA (RFC 5040 section 7.2). */
DECLARE_EVENT_CLASS(rsiw_terminate_class,
	TP_PROTO(u32 qpn, u8 layer, u8 etype, u8 code),
	TP_ARGS(qpn, layer, etype, code),
	TP_STRUCT__entry(
		__field(u32, qpn)
		__field(u8, layer)
		__field(u8, etype)
		__field(u8, code)
	),
	TP_fast_assign(
		__entry->qpn = qpn;
		__entry->layer = layer;
		__entry->etype = etype;
		__entry->code = code;
	),
	TP_printk("qpn=%u layer=%s type=0x%x code=0x%02x", __entry->qpn,
		  __print_symbolic(__entry->layer, { 0, "RDMAP" }, { 1, "DDP" }, { 2, "MPA" }),
		  __entry->etype, __entry->code)
);

DEFINE_EVENT(rsiw_terminate_class, rsiw_terminate_sent,
	TP_PROTO(u32 qpn, u8 layer, u8 etype, u8 code),
	TP_ARGS(qpn, layer, etype, code));

DEFINE_EVENT(rsiw_terminate_class, rsiw_terminate_received,
	TP_PROTO(u32 qpn, u8 layer, u8 etype, u8 code),
	TP_ARGS(qpn, layer, etype, code));

/* A work completion in error (flushes included). */
TRACE_EVENT(rsiw_wr_error,
	TP_PROTO(u32 qpn, u64 wr_id, int opcode, int status),
	TP_ARGS(qpn, wr_id, opcode, status),
	TP_STRUCT__entry(
		__field(u32, qpn)
		__field(u64, wr_id)
		__field(int, opcode)
		__field(int, status)
	),
	TP_fast_assign(
		__entry->qpn = qpn;
		__entry->wr_id = wr_id;
		__entry->opcode = opcode;
		__entry->status = status;
	),
	TP_printk("qpn=%u wr_id=0x%llx opcode=%s status=%s", __entry->qpn,
		  __entry->wr_id, rsiw_show_wc_opcode(__entry->opcode),
		  rsiw_show_wc_status(__entry->status))
);

#endif /* _TRACE_RSIW_H */

#include <trace/define_trace.h>
