// SPDX-License-Identifier: GPL-2.0
//! The module's trace events (`include/trace/rsiw.h`, tracefs
//! `events/rsiw/`): each function fires one through its C wrapper in
//! `rust/trace.c`, which does nothing unless the event is enabled. Plain
//! numbers and strings only; the driver decides what they mean.

use kernel::ffi::{c_char, c_int, c_uint};

use super::{
    ib::{QpState, WcOpcode, WcStatus},
    net::socket::SockAddr,
    sys,
};

/// A string as the C side's `(pointer, length)` pair (`__string_len`).
fn str_arg(s: &str) -> (*const c_char, c_uint) {
    (s.as_ptr().cast(), c_uint::try_from(s.len()).unwrap_or(0))
}

/// Whether `rsiw_cm_state` is enabled: the caller may skip gathering the
/// addresses when it is not.
pub(crate) fn cm_state_enabled() -> bool {
    // SAFETY: reads the tracepoint's static key.
    unsafe { sys::rsiw_trace_cm_state_enabled() }
}

/// `rsiw_cm_state`: connection endpoint `cm_id` goes from `old` to `new`.
pub(crate) fn cm_state(
    cm_id: u64,
    local: Option<SockAddr>,
    remote: Option<SockAddr>,
    old: &str,
    new: &str,
) {
    let l = local.map(|a| a.to_raw().0);
    let r = remote.map(|a| a.to_raw().0);
    let (op, ol) = str_arg(old);
    let (np, nl) = str_arg(new);
    // SAFETY: the addresses are null or locals alive for the call; the
    // strings are `(pointer, length)` of live `&str`s, which the event
    // copies.
    unsafe {
        sys::rsiw_trace_cm_state(
            cm_id,
            l.as_ref().map_or(core::ptr::null(), core::ptr::from_ref),
            r.as_ref().map_or(core::ptr::null(), core::ptr::from_ref),
            op,
            ol,
            np,
            nl,
        )
    };
}

/// The outcome of one MPA exchange (`rsiw_mpa`).
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct MpaResult<'a> {
    pub(crate) cm_id: u64,
    pub(crate) initiator: bool,
    /// "accepted", "reject_sent", "rejected" or "failed".
    pub(crate) result: &'a str,
    /// MPA revision (0: unknown).
    pub(crate) rev: u8,
    pub(crate) crc: bool,
    pub(crate) markers_tx: bool,
    pub(crate) markers_rx: bool,
    pub(crate) ird: u16,
    pub(crate) ord: u16,
    /// The RTR settled ("none", "send", "write", "read", "ulp_send"; "-":
    /// not negotiated).
    pub(crate) rtr: &'a str,
    /// The RFC 6581 error (layer, type, code as one 16-bit value; 0: none).
    pub(crate) error: u16,
}

/// `rsiw_mpa`.
pub(crate) fn mpa(m: &MpaResult<'_>) {
    let (rp, rl) = str_arg(m.result);
    let (tp, tl) = str_arg(m.rtr);
    // SAFETY: plain values and `(pointer, length)` of live `&str`s.
    unsafe {
        sys::rsiw_trace_mpa(
            m.cm_id,
            m.initiator,
            rp,
            rl,
            m.rev,
            m.crc,
            m.markers_tx,
            m.markers_rx,
            m.ird,
            m.ord,
            tp,
            tl,
            m.error,
        )
    };
}

/// `rsiw_qp_state`.
pub(crate) fn qp_state(qpn: u32, old: QpState, new: QpState) {
    // SAFETY: plain values.
    unsafe { sys::rsiw_trace_qp_state(qpn, old.to_raw() as c_int, new.to_raw() as c_int) };
}

/// `rsiw_terminate_sent` (`sent`) or `rsiw_terminate_received`; `layer`
/// 0 RDMAP, 1 DDP, 2 MPA.
pub(crate) fn terminate(qpn: u32, sent: bool, layer: u8, etype: u8, code: u8) {
    // SAFETY: plain values.
    unsafe { sys::rsiw_trace_terminate(qpn, sent, layer, etype, code) };
}

/// `rsiw_wr_error`: a work completion with an error status.
pub(crate) fn wr_error(qpn: u32, wr_id: u64, opcode: WcOpcode, status: WcStatus) {
    let op = super::ib::cq::wc_opcode(opcode) as c_int;
    let st = super::ib::cq::wc_status(status) as c_int;
    // SAFETY: plain values.
    unsafe { sys::rsiw_trace_wr_error(qpn, wr_id, op, st) };
}
