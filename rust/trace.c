// SPDX-License-Identifier: GPL-2.0
/*
 * rsiw's trace events (include/trace/rsiw.h), instantiated here, and the
 * functions Rust calls to fire them (rust/ffi/trace.rs). Each is one
 * trace_*() call: a no-op unless the event is enabled (and nothing at all
 * on a kernel without tracing).
 */
#include "rsiw_sys.h"

#define CREATE_TRACE_POINTS
#include "trace/rsiw.h"

bool rsiw_trace_cm_state_enabled(void)
{
	return trace_rsiw_cm_state_enabled();
}

void rsiw_trace_cm_state(u64 cm_id, const struct __kernel_sockaddr_storage *laddr,
			 const struct __kernel_sockaddr_storage *raddr,
			 const char *old, unsigned int old_len,
			 const char *new, unsigned int new_len)
{
	trace_rsiw_cm_state(cm_id, laddr, raddr, old, old_len, new, new_len);
}

void rsiw_trace_mpa(u64 cm_id, bool initiator, const char *result, unsigned int result_len,
		    u8 rev, bool crc, bool markers_tx, bool markers_rx, u16 ird, u16 ord,
		    const char *rtr, unsigned int rtr_len, u16 error)
{
	u8 flags = (initiator ? RSIW_TRACE_MPA_INITIATOR : 0) | (crc ? RSIW_TRACE_MPA_CRC : 0) |
		   (markers_tx ? RSIW_TRACE_MPA_MARKERS_TX : 0) |
		   (markers_rx ? RSIW_TRACE_MPA_MARKERS_RX : 0);

	trace_rsiw_mpa(cm_id, flags, result, result_len, rev, ird, ord, rtr, rtr_len, error);
}

void rsiw_trace_qp_state(u32 qpn, int old, int new)
{
	trace_rsiw_qp_state(qpn, old, new);
}

void rsiw_trace_terminate(u32 qpn, bool sent, u8 layer, u8 etype, u8 code)
{
	if (sent)
		trace_rsiw_terminate_sent(qpn, layer, etype, code);
	else
		trace_rsiw_terminate_received(qpn, layer, etype, code);
}

void rsiw_trace_wr_error(u32 qpn, u64 wr_id, int opcode, int status)
{
	trace_rsiw_wr_error(qpn, wr_id, opcode, status);
}
