// SPDX-License-Identifier: GPL-2.0
//! The hand-off from the CM to the QP: the negotiated stream and the QP side
//! of the contract.

use super::*;

// ---- the hand-off to the QP ---------------------------------------------

/// A connection in full operation, handed to the QP.
///
/// `sock` is connected, non-blocking and not hooked; the stream positions
/// of both directions are right after the MPA frames. `params` are what
/// the MPA startup machine settled (framing, IRD/ORD, RTR, role, the
/// peer's private data). The peer's first octets after its MPA frame are
/// `leftover` (what the CM read past the frame: today always empty, the CM
/// stops at the frame's end) followed by whatever is queued in `sock`.
pub(crate) struct Stream {
    pub(crate) sock: TcpSocket,
    pub(crate) params: StreamParams,
    pub(crate) leftover: KVec<u8>,
}

/// The QP side of the hand-off.
///
/// `attach` runs in process context. It must hook the socket first, then
/// consume `leftover` and the data already queued (`TcpSocket::read`),
/// and check `sock.state()` (the peer may have closed before the hook),
/// so that no octet and no close is missed. On `Err` the QP keeps neither
/// the stream (dropping it closes the connection) nor the sink.
pub(crate) trait CmQp: Send + Sync {
    fn attach(&self, stream: Stream, cm: CmEventSink) -> Result;
    fn qpn(&self) -> u32;
}
