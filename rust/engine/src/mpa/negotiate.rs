// SPDX-License-Identifier: GPL-2.0
//! MPA startup negotiation (RFC 5044 section 7.1, RFC 6581 sections 5, 6, 9
//! and 10), as pure functions for both roles.
//!
//! Initiator: [`request`] builds the MPA Request from [`InitiatorConfig`];
//! [`check_reply`] validates the Reply and yields [`Negotiated`] or
//! [`Refused`]. Responder: [`judge_request`] validates the Request against
//! [`ResponderConfig`] and yields an [`Offer`] (the ULP looks at the
//! peer's private data and IRD/ORD, then calls [`Offer::accept`] or
//! [`Offer::reject`]) or a [`Rejection`] (send [`Rejection::reply`] if
//! [`Rejection::send_reply`], then close).
//!
//! Rules applied (section numbers of RFC 5044 / draft-05 of RFC 6581):
//! * CRC (5044 7.1.1): used in both directions if either side sets C; a
//!   responder MUST honour a C request. [`CrcPolicy::Never`] refuses
//!   instead (not RFC behaviour; like siw's `mpa_crc_strict`).
//! * Markers (5044 7.1.1): M asks the peer to put markers on the FPDUs it
//!   sends us; each direction on its own. Always honoured.
//! * Rev (6581 6): Rev 2 only with enhanced data (S); an initiator without
//!   enhanced features sends Rev 1 (6581 10); a responder accepts Rev 1 and
//!   2 and replies with min(request Rev, its max Rev); a reply above the
//!   request's Rev is invalid.
//! * Enhanced (6581 10): an enhanced request gets an enhanced reply, an
//!   unenhanced one an unenhanced reply; a responder without Rev 2 support
//!   closes the connection on an enhanced request.
//! * IRD/ORD (6581 9): responder IRD = min(initiator ORD, own IRD), ORD =
//!   min(own ORD, initiator IRD) (MUST be at most initiator IRD); a
//!   responder whose ULP needs ORD above the initiator IRD rejects, putting
//!   that ORD in the reject frame. Initiator: IRD = responder ORD, which
//!   must not exceed the IRD it offered (else LLP error 6), ORD =
//!   min(own ORD, responder IRD). 0x3FFF in any of them turns automatic
//!   negotiation off: values are reported, not adjusted or checked.
//! * Peer-to-peer (6581 9): A in the reply MUST match the request. The
//!   responder picks one RTR kind both support (zero-length Write, then
//!   Read, then Send; Read only when both IRD/ORD allow it) and replies
//!   with only that flag (siw does the same); none in common: reject with
//!   LLP error 7 and its supported flags. The initiator picks from the
//!   reply's flags the same way; flags but none usable: error 7; A with no
//!   flags: the ULP must send an RDMA Send first ([`RtrMode::UlpSend`]).
//! * Both sides MUST pass the peer's IRD/ORD to the ULP, for accepts and
//!   rejects: [`Negotiated::peer`], [`Refused::Rejected`].

use crate::error::{llp, TermError};
use crate::mpa::rx::{Rx, RxConfig};
use crate::mpa::tx::Tx;
use crate::wire::mpa::{
    Enhanced, Error, Kind, Repr, Rtr, RtrSet, ENHANCED_LEN, IRD_ORD_MASK, IRD_ORD_NO_AUTO,
    MAX_PRIVATE_DATA, REV_1, REV_2,
};

/// What to do about CRC32c.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CrcPolicy {
    /// Do not ask (C = 0), but use it if the peer asks.
    IfPeerAsks,
    /// Ask (C = 1): CRC is then used in both directions.
    Required,
    /// Never use it: refuse a peer that asks (not RFC 5044 behaviour).
    Never,
}

/// Initiator settings.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct InitiatorConfig<'a> {
    /// CRC policy.
    pub crc: CrcPolicy,
    /// Ask for markers on what we receive (M).
    pub markers: bool,
    /// Use RFC 6581 enhanced setup (Rev 2, S, IRD/ORD exchange).
    pub enhanced: bool,
    /// The largest IRD we can support (sent in the enhanced data).
    pub ird: u16,
    /// Our ORD (sent in the enhanced data).
    pub ord: u16,
    /// Peer-to-peer model with the RTR kinds we can send (needs `enhanced`).
    pub p2p: Option<RtrSet>,
    /// ULP private data.
    pub private_data: &'a [u8],
}

/// Responder settings.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ResponderConfig {
    /// Highest Rev we speak: 1 or 2 (2: enhanced setup supported).
    pub max_rev: u8,
    /// CRC policy.
    pub crc: CrcPolicy,
    /// Ask for markers on what we receive (M).
    pub markers: bool,
    /// The largest IRD we can support.
    pub ird: u16,
    /// The ORD we would like.
    pub ord: u16,
    /// The smallest ORD our ULP can work with: reject (LLP error 6) when
    /// the initiator's IRD is below it.
    pub min_ord: u16,
    /// RTR kinds we accept from a peer-to-peer initiator.
    pub rtr: RtrSet,
}

/// Framing of both directions after the exchange.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Framing {
    /// CRC32c on in both directions.
    pub crc: bool,
    /// Insert markers in what we send (the peer's M bit).
    pub markers_tx: bool,
    /// Expect markers in what we receive (our M bit).
    pub markers_rx: bool,
}

impl Framing {
    /// A sender for our direction, at stream offset 0.
    pub const fn tx(&self) -> Tx {
        Tx::new(self.crc, self.markers_tx)
    }

    /// A receiver for the peer's direction, at stream offset 0.
    pub fn rx(&self, header_len: usize) -> Rx {
        Rx::new(RxConfig {
            crc: self.crc,
            markers: self.markers_rx,
            header_len,
        })
    }
}

/// How a peer-to-peer connection becomes ready (RFC 6581 sections 5, 9).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RtrMode {
    /// The initiator's first FPDU MUST be this zero-length RTR message;
    /// the responder sends nothing before receiving it.
    Zero(Rtr),
    /// No common RTR message: the initiator ULP must send an RDMA Send first.
    UlpSend,
}

/// The outcome of a successful exchange.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Negotiated<'a> {
    /// Rev in use.
    pub rev: u8,
    /// Both directions' framing.
    pub framing: Framing,
    /// Whether enhanced data were exchanged.
    pub enhanced: bool,
    /// IRD to configure locally.
    pub ird: u16,
    /// ORD to configure locally.
    pub ord: u16,
    /// Whether IRD/ORD were negotiated automatically (false: 0x3FFF seen
    /// or no enhanced data; the ULP configures them).
    pub auto_ird_ord: bool,
    /// The peer's enhanced data as received, for the ULP.
    pub peer: Option<Enhanced>,
    /// Peer-to-peer RTR, `None` for client-server.
    pub rtr: Option<RtrMode>,
    /// The peer's ULP private data.
    pub private_data: &'a [u8],
}

/// Why an initiator's connection attempt ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refused<'a> {
    /// The responder set R; its IRD/ORD and private data go to the ULP.
    Rejected {
        /// The responder's enhanced data, if any.
        peer: Option<Enhanced>,
        /// The responder's private data.
        private_data: &'a [u8],
    },
    /// Negotiation failed: report `error` (for LLP errors 5 to 7 send it
    /// in a Terminate, framed by `framing`) and close.
    Failed {
        /// The Terminate triplet.
        error: TermError,
        /// Framing, when the reply was valid enough to derive it.
        framing: Option<Framing>,
        /// The responder's enhanced data, if any.
        peer: Option<Enhanced>,
    },
}

/// Checks and builds the MPA Request (RFC 5044 7.1.1, RFC 6581 6 and 9).
pub fn request<'a>(cfg: &InitiatorConfig<'a>) -> Result<Repr<'a>, Error> {
    if cfg.p2p.is_some() && !cfg.enhanced {
        return Err(Error::BadEnhanced);
    }
    if cfg.ird > IRD_ORD_MASK || cfg.ord > IRD_ORD_MASK {
        return Err(Error::BadEnhanced);
    }
    let enhanced = cfg.enhanced.then_some(Enhanced {
        ird: cfg.ird,
        ord: cfg.ord,
        p2p: cfg.p2p.is_some(),
        rtr: cfg.p2p.unwrap_or(RtrSet::EMPTY),
    });
    let repr = Repr {
        kind: Kind::Request,
        markers: cfg.markers,
        crc: cfg.crc == CrcPolicy::Required,
        reject: false,
        rev: if cfg.enhanced { REV_2 } else { REV_1 },
        enhanced,
        private_data: cfg.private_data,
    };
    if repr.pd_len() > MAX_PRIVATE_DATA {
        return Err(Error::PrivateDataTooLong);
    }
    Ok(repr)
}

/// Picks the RTR kind to use from `set` (zero-length Write is free, Read
/// needs an ORD/IRD credit, Send needs a posted receive at the responder).
fn pick_rtr(set: RtrSet, read_ok: bool) -> Option<Rtr> {
    [Rtr::Write, Rtr::Read, Rtr::Send]
        .into_iter()
        .find(|&r| set.contains(r) && (r != Rtr::Read || read_ok))
}

const fn is_auto(v: u16) -> bool {
    v != IRD_ORD_NO_AUTO
}

/// Validates the MPA Reply to the request [`request`] built from `cfg`.
pub fn check_reply<'a>(
    cfg: &InitiatorConfig<'_>,
    rep: &Repr<'a>,
) -> Result<Negotiated<'a>, Refused<'a>> {
    let fail = |error, framing, peer| Refused::Failed {
        error,
        framing,
        peer,
    };
    let req_rev = if cfg.enhanced { REV_2 } else { REV_1 };
    if rep.kind != Kind::Reply || rep.rev > req_rev {
        return Err(fail(llp::INVALID_REQ_RESP, None, rep.enhanced));
    }
    let crc = rep.crc || cfg.crc == CrcPolicy::Required;
    let framing = Framing {
        crc,
        markers_tx: rep.markers,
        markers_rx: cfg.markers,
    };
    if rep.reject {
        return Err(Refused::Rejected {
            peer: rep.enhanced,
            private_data: rep.private_data,
        });
    }
    if crc && cfg.crc == CrcPolicy::Never {
        return Err(fail(llp::LOCAL_CATA, Some(framing), rep.enhanced));
    }
    let mut out = Negotiated {
        rev: rep.rev,
        framing,
        enhanced: false,
        ird: cfg.ird,
        ord: cfg.ord,
        auto_ird_ord: false,
        peer: rep.enhanced,
        rtr: None,
        private_data: rep.private_data,
    };
    // RFC 6581 10: enhanced request, enhanced reply; and vice versa.
    let peer = match (cfg.enhanced, rep.enhanced) {
        (false, None) => return Ok(out),
        (true, Some(p)) => p,
        _ => return Err(fail(llp::INVALID_REQ_RESP, Some(framing), rep.enhanced)),
    };
    out.enhanced = true;
    // RFC 6581 9: A in the reply MUST match the request.
    match (cfg.p2p.is_some(), peer.p2p) {
        (true, false) => return Err(fail(llp::NO_MATCHING_RTR, Some(framing), Some(peer))),
        (false, true) => return Err(fail(llp::INVALID_REQ_RESP, Some(framing), Some(peer))),
        _ => {}
    }
    out.auto_ird_ord =
        is_auto(cfg.ird) && is_auto(cfg.ord) && is_auto(peer.ird) && is_auto(peer.ord);
    if out.auto_ird_ord {
        // "Initiator MUST set its IRD at least to Responder ORD"; we offered
        // `cfg.ird` as our maximum.
        if peer.ord > cfg.ird {
            return Err(fail(llp::INSUFFICIENT_IRD, Some(framing), Some(peer)));
        }
        out.ird = peer.ord;
        // "... MUST set its ORD at most to Responder IRD."
        out.ord = cfg.ord.min(peer.ird);
    }
    if let Some(offered) = cfg.p2p {
        if peer.rtr.is_empty() {
            out.rtr = Some(RtrMode::UlpSend);
        } else {
            let read_ok = !out.auto_ird_ord || (out.ord > 0 && peer.ird > 0);
            match pick_rtr(peer.rtr.intersect(offered), read_ok) {
                Some(r) => out.rtr = Some(RtrMode::Zero(r)),
                None => return Err(fail(llp::NO_MATCHING_RTR, Some(framing), Some(peer))),
            }
        }
    }
    Ok(out)
}

/// The fields of the responder's Reply (RFC 5044 7.1.1, RFC 6581 9), for
/// an accept and a reject alike.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct ReplyFields {
    rev: u8,
    crc: bool,
    markers: bool,
    enhanced: Option<Enhanced>,
}

impl ReplyFields {
    fn reply<'b>(&self, reject: bool, private_data: &'b [u8]) -> Result<Repr<'b>, Error> {
        let r = Repr {
            kind: Kind::Reply,
            markers: self.markers,
            crc: self.crc,
            reject,
            rev: self.rev,
            enhanced: self.enhanced,
            private_data,
        };
        if r.pd_len() > MAX_PRIVATE_DATA {
            return Err(Error::PrivateDataTooLong);
        }
        Ok(r)
    }
}

/// The responder's decision to accept, pending the ULP's own.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Offer<'a> {
    /// What the connection will be if accepted; `private_data` is the
    /// initiator's.
    pub negotiated: Negotiated<'a>,
    fields: ReplyFields,
}

impl Offer<'_> {
    /// The accepting Reply carrying `private_data`.
    pub fn accept<'b>(&self, private_data: &'b [u8]) -> Result<Repr<'b>, Error> {
        self.fields.reply(false, private_data)
    }

    /// A rejecting Reply (the ULP said no) carrying `private_data`.
    pub fn reject<'b>(&self, private_data: &'b [u8]) -> Result<Repr<'b>, Error> {
        self.fields.reply(true, private_data)
    }
}

/// The responder refuses the request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rejection<'a> {
    /// Why (for the local report).
    pub error: TermError,
    /// Whether to send [`Rejection::reply`] before closing (false: RFC
    /// 6581 10 says close without one).
    pub send_reply: bool,
    /// The initiator's private data, for the ULP.
    pub private_data: &'a [u8],
    fields: ReplyFields,
}

impl Rejection<'_> {
    /// The Reply with R set (RFC 6581 9: with our required ORD for error
    /// 6, with our supported RTR flags for error 7).
    pub fn reply<'b>(&self, private_data: &'b [u8]) -> Result<Repr<'b>, Error> {
        self.fields.reply(true, private_data)
    }
}

/// Judges an MPA Request (parsed with [`Repr::parse`]; a parse error means
/// closing the connection, RFC 5044 7.1.2).
pub fn judge_request<'a>(
    cfg: &ResponderConfig,
    req: &Repr<'a>,
) -> Result<Offer<'a>, Rejection<'a>> {
    let max_rev = cfg.max_rev.clamp(REV_1, REV_2);
    let rev = req.rev.min(max_rev);
    let crc = req.crc || cfg.crc == CrcPolicy::Required;
    let mut rej = Rejection {
        error: llp::INVALID_REQ_RESP,
        send_reply: true,
        private_data: req.private_data,
        fields: ReplyFields {
            rev,
            crc,
            markers: cfg.markers,
            enhanced: None,
        },
    };
    if req.kind != Kind::Request {
        rej.send_reply = false;
        return Err(rej);
    }
    if req.enhanced.is_some() && max_rev < REV_2 {
        // RFC 6581 10: "it MUST close the TCP connection and exit MPA".
        rej.send_reply = false;
        return Err(rej);
    }
    if req.crc && cfg.crc == CrcPolicy::Never {
        rej.fields.crc = false;
        rej.error = llp::LOCAL_CATA;
        return Err(rej);
    }
    let framing = Framing {
        crc,
        markers_tx: req.markers,
        markers_rx: cfg.markers,
    };
    let mut n = Negotiated {
        rev,
        framing,
        enhanced: false,
        ird: cfg.ird,
        ord: cfg.ord,
        auto_ird_ord: false,
        peer: req.enhanced,
        rtr: None,
        private_data: req.private_data,
    };
    let Some(peer) = req.enhanced else {
        return Ok(Offer {
            negotiated: n,
            fields: ReplyFields {
                rev,
                crc,
                markers: cfg.markers,
                enhanced: None,
            },
        });
    };
    n.enhanced = true;
    n.auto_ird_ord = is_auto(cfg.ird) && is_auto(cfg.ord) && is_auto(peer.ird) && is_auto(peer.ord);
    let (mut ird, mut ord) = (cfg.ird.min(IRD_ORD_MASK), cfg.ord.min(IRD_ORD_MASK));
    if n.auto_ird_ord {
        if cfg.min_ord > peer.ird {
            rej.error = llp::INSUFFICIENT_IRD;
            rej.fields.enhanced = Some(Enhanced {
                ird,
                ord: cfg.min_ord.min(IRD_ORD_MASK),
                p2p: peer.p2p,
                rtr: RtrSet::EMPTY,
            });
            return Err(rej);
        }
        // SHOULD be at least the initiator's ORD, SHOULD NOT be above it.
        ird = cfg.ird.min(peer.ord);
        // MUST be at most the initiator's IRD.
        ord = cfg.ord.max(cfg.min_ord).min(peer.ird);
    }
    let mut reply = Enhanced {
        ird: if n.auto_ird_ord { ird } else { IRD_ORD_NO_AUTO },
        ord: if n.auto_ird_ord { ord } else { IRD_ORD_NO_AUTO },
        p2p: peer.p2p,
        rtr: RtrSet::EMPTY,
    };
    if peer.p2p {
        // A zero-length Read needs an ORD credit at the initiator and an
        // IRD credit here.
        let read_ok = !n.auto_ird_ord || (peer.ord > 0 && ird > 0);
        match pick_rtr(peer.rtr.intersect(cfg.rtr), read_ok) {
            Some(r) => {
                reply.rtr = RtrSet::one(r);
                n.rtr = Some(RtrMode::Zero(r));
            }
            None => {
                rej.error = llp::NO_MATCHING_RTR;
                rej.fields.enhanced = Some(Enhanced {
                    rtr: cfg.rtr,
                    ..reply
                });
                return Err(rej);
            }
        }
    }
    n.ird = ird;
    n.ord = ord;
    Ok(Offer {
        negotiated: n,
        fields: ReplyFields {
            rev,
            crc,
            markers: cfg.markers,
            enhanced: Some(reply),
        },
    })
}

/// Largest ULP private data for a frame with (`enhanced`) or without the
/// 4 enhanced octets.
pub const fn max_private_data(enhanced: bool) -> usize {
    if enhanced {
        MAX_PRIVATE_DATA - ENHANCED_LEN
    } else {
        MAX_PRIVATE_DATA
    }
}

#[cfg(test)]
mod tests;
