// SPDX-License-Identifier: GPL-2.0
//! MPA (RFC 5044) with the enhanced connection setup of RFC 6581.
//!
//! * [`negotiate`]: the startup phase, pure functions over
//!   [`crate::wire::mpa::Repr`]: the initiator builds its request and checks
//!   the reply, the responder judges the request and builds its reply. The
//!   result, [`negotiate::Negotiated`], sets up the two directions.
//! * [`startup`]: the startup as one sans-IO machine per role
//!   ([`Initiator`], [`Responder`]) over [`negotiate`]: fed the peer's
//!   octets, it holds the frames to send and reports a Request, the
//!   settled [`StreamParams`], a reject or a failure.
//! * [`tx`]: FPDU emission for one direction (markers, pad, CRC), zero-copy.
//! * [`rx`]: incremental FPDU reception for one direction, zero-copy.
//! * [`markers`]: marker positions and FPDUPTR arithmetic.
//!
//! Stream offsets for markers count from the first octet after the MPA
//! Request (initiator to responder) or Reply (responder to initiator).

pub mod markers;
pub mod negotiate;
pub mod rx;
pub mod startup;
pub mod tx;

pub use negotiate::{check_reply, judge_request, request, Negotiated};
pub use rx::{Event, Rx, RxConfig, Step};
pub use startup::{Initiator, Responder, StreamParams};
pub use tx::{FpduWriter, Segment, Tx, TxError};
