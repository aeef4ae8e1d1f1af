// SPDX-License-Identifier: GPL-2.0
//! Tests of the MPA startup machines (RFC 5044 7.1, RFC 6581 8-10): whole
//! exchanges split at every octet, partial and leftover input, rejects,
//! bad keys, oversize private data and each RFC 6581 Terminate rule.

use super::*;
use crate::crc::SoftCrc32c;
use crate::error::{llp, Layer};
use crate::mpa::negotiate::CrcPolicy;
use crate::mpa::rx::Event as RxEvent;
use crate::rdmap::{decode, Body};
use crate::wire::mpa::{RtrSet, REV_1, REV_2};
use proptest::prelude::*;
use std::vec::Vec;

fn icfg() -> InitiatorConfig<'static> {
    InitiatorConfig {
        crc: CrcPolicy::IfPeerAsks,
        markers: false,
        enhanced: true,
        ird: 8,
        ord: 8,
        p2p: Some(RtrSet::ALL),
        private_data: b"init",
    }
}

fn rcfg() -> ResponderConfig {
    ResponderConfig {
        max_rev: 2,
        crc: CrcPolicy::IfPeerAsks,
        markers: false,
        ird: 4,
        ord: 4,
        min_ord: 0,
        rtr: RtrSet::ALL,
    }
}

/// The initiator's Request octets.
fn request_bytes(cfg: &InitiatorConfig<'_>) -> Vec<u8> {
    Initiator::new(cfg).unwrap().transmit().to_vec()
}

/// Feeds `bytes` to `r` cut at `cuts`; returns the octets taken.
fn feed_responder(r: &mut Responder, bytes: &[u8], cuts: &[usize]) -> usize {
    let mut at = 0;
    let mut used = 0;
    for &c in cuts.iter().chain([bytes.len()].iter()) {
        let c = c.clamp(at, bytes.len());
        used += r.receive(&bytes[at..c]);
        at = c;
    }
    used
}

fn feed_initiator(i: &mut Initiator, bytes: &[u8], cuts: &[usize]) -> usize {
    let mut at = 0;
    let mut used = 0;
    for &c in cuts.iter().chain([bytes.len()].iter()) {
        let c = c.clamp(at, bytes.len());
        used += i.receive(&SoftCrc32c, &bytes[at..c]);
        at = c;
    }
    used
}

/// A Reply frame built by hand (the responder's checks bypassed).
fn reply(
    crc: bool,
    reject: bool,
    rev: u8,
    enhanced: Option<Enhanced>,
    private_data: &[u8],
) -> Vec<u8> {
    let r = Repr {
        kind: Kind::Reply,
        markers: false,
        crc,
        reject,
        rev,
        enhanced,
        private_data,
    };
    let mut b = std::vec![0u8; r.buffer_len()];
    r.emit_bytes(&mut b).unwrap();
    b
}

/// One whole exchange; returns both sides' parameters.
fn run(i: &InitiatorConfig<'_>, r: &ResponderConfig) -> (StreamParams, StreamParams) {
    let mut ini = Initiator::new(i).unwrap();
    let mut res = Responder::new(r);
    let req = ini.transmit().to_vec();
    ini.sent(req.len());
    assert_eq!(res.receive(&req), req.len());
    let Some(Event::Request(offered)) = res.poll() else {
        panic!("no request")
    };
    let rp = res.accept(r, b"resp").unwrap();
    assert_eq!(offered.private_data.as_bytes(), b"init");
    let rep = res.transmit().to_vec();
    assert_eq!(ini.receive(&SoftCrc32c, &rep), rep.len());
    let Some(Event::Established(ip)) = ini.poll() else {
        panic!("not established")
    };
    (ip, rp)
}

#[test]
fn exchange_settles_both_sides() {
    let (ip, rp) = run(&icfg(), &rcfg());
    assert!(ip.initiator && !rp.initiator);
    assert_eq!(ip.private_data.as_bytes(), b"resp");
    assert_eq!(rp.private_data.as_bytes(), b"init");
    assert_eq!((ip.rev, rp.rev), (REV_2, REV_2));
    assert_eq!(ip.framing.crc, rp.framing.crc);
    // Responder IRD = min(own 4, initiator ORD 8), ORD = min(own 4,
    // initiator IRD 8); initiator IRD = responder ORD, ORD = min(8, 4).
    assert_eq!((rp.ird, rp.ord), (4, 4));
    assert_eq!((ip.ird, ip.ord), (4, 4));
    // Write is picked first; the initiator sends it, the responder waits.
    assert_eq!(ip.rtr_to_send(), Some(Rtr::Write));
    assert_eq!(ip.rtr_expected(), None);
    assert_eq!(rp.rtr_expected(), Some(Rtr::Write));
    assert_eq!(rp.rtr_to_send(), None);
    assert_eq!(ip.peer.map(|p| (p.ird, p.ord)), Some((4, 4)));
}

#[test]
fn every_split_of_both_frames() {
    let req = request_bytes(&icfg());
    for cut in 0..=req.len() {
        let mut res = Responder::new(&rcfg());
        assert_eq!(feed_responder(&mut res, &req, &[cut]), req.len());
        assert!(matches!(res.poll(), Some(Event::Request(_))), "cut {cut}");
        res.accept(&rcfg(), b"resp").unwrap();
        let rep = res.transmit().to_vec();
        for cut2 in 0..=rep.len() {
            let mut ini = Initiator::new(&icfg()).unwrap();
            assert_eq!(feed_initiator(&mut ini, &rep, &[cut2]), rep.len());
            assert!(
                matches!(ini.poll(), Some(Event::Established(_))),
                "cut {cut2}"
            );
        }
    }
    // And one octet at a time.
    let mut res = Responder::new(&rcfg());
    let cuts: Vec<usize> = (0..req.len()).collect();
    assert_eq!(feed_responder(&mut res, &req, &cuts), req.len());
    assert_eq!(res.phase(), Phase::Decide);
}

#[test]
fn partial_frame_waits() {
    let req = request_bytes(&icfg());
    let mut res = Responder::new(&rcfg());
    for n in [1, 15, 19, 20, req.len() - 1] {
        let mut r = res.clone();
        assert_eq!(r.receive(&req[..n]), n);
        assert_eq!(r.phase(), Phase::AwaitFrame);
        assert_eq!(r.poll(), None);
        assert!(r.transmit().is_empty());
    }
    assert_eq!(res.receive(&[]), 0);
    assert_eq!(res.poll(), None);
}

#[test]
fn leftover_after_the_reply_stays_with_the_caller() {
    let mut res = Responder::new(&rcfg());
    res.receive(&request_bytes(&icfg()));
    res.poll();
    res.accept(&rcfg(), b"resp").unwrap();
    let mut stream = res.transmit().to_vec();
    let rep_len = stream.len();
    // The responder's first FPDU octets right behind the Reply.
    stream.extend_from_slice(b"\x00\x12first-fpdu");
    let mut ini = Initiator::new(&icfg()).unwrap();
    assert_eq!(ini.receive(&SoftCrc32c, &stream), rep_len);
    assert!(matches!(ini.poll(), Some(Event::Established(_))));
    // Once complete, nothing more is taken.
    assert_eq!(ini.receive(&SoftCrc32c, &stream[rep_len..]), 0);
    // Split inside the Reply: the second chunk still stops at its end.
    let mut ini = Initiator::new(&icfg()).unwrap();
    assert_eq!(ini.receive(&SoftCrc32c, &stream[..10]), 10);
    assert_eq!(ini.receive(&SoftCrc32c, &stream[10..]), rep_len - 10);
}

#[test]
fn leftover_after_the_request_waits_for_the_decision() {
    let mut stream = request_bytes(&icfg());
    let req_len = stream.len();
    stream.extend_from_slice(b"early");
    let mut res = Responder::new(&rcfg());
    assert_eq!(res.receive(&stream), req_len);
    assert!(matches!(res.poll(), Some(Event::Request(_))));
    // Octets before the Reply fail the startup (RFC 5044 7.1).
    assert_eq!(res.receive(&stream[req_len..]), 0);
    assert_eq!(
        res.poll(),
        Some(Event::Failed(Failure {
            error: llp::INVALID_REQ_RESP,
            terminate: false,
            peer: None
        }))
    );
    assert!(res.accept(&rcfg(), b"").is_err());
}

#[test]
fn events_are_reported_once() {
    let mut res = Responder::new(&rcfg());
    res.receive(&request_bytes(&icfg()));
    assert!(res.poll().is_some());
    assert_eq!(res.poll(), None);
    assert_eq!(res.phase(), Phase::Decide);
}

#[test]
fn caller_rejects_with_private_data() {
    let mut ini = Initiator::new(&icfg()).unwrap();
    let mut res = Responder::new(&rcfg());
    res.receive(ini.transmit());
    res.poll();
    res.reject(b"no").unwrap();
    assert_eq!(res.phase(), Phase::Rejected);
    let rep = res.transmit().to_vec();
    assert!(Repr::parse_bytes(&rep).unwrap().reject);
    assert_eq!(ini.receive(&SoftCrc32c, &rep), rep.len());
    match ini.poll() {
        Some(Event::Rejected { peer, private_data }) => {
            assert_eq!(private_data.as_bytes(), b"no");
            assert!(peer.is_some());
        }
        e => panic!("{e:?}"),
    }
    assert_eq!(ini.phase(), Phase::Rejected);
    assert_eq!(ini.peer_private_data(), b"no");
    assert_eq!(ini.params(), None);
    // A reject needs a pending Request.
    assert_eq!(res.reject(b""), Err(llp::LOCAL_CATA));
}

#[test]
fn responder_rejects_on_its_own_with_its_required_ord() {
    // RFC 6581 9: the responder's ULP needs ORD 6, the initiator's IRD is
    // 2: a Reply with R and ORD 6, code 6 reported locally.
    let i = InitiatorConfig { ird: 2, ..icfg() };
    let r = ResponderConfig {
        min_ord: 6,
        ord: 6,
        ..rcfg()
    };
    let mut ini = Initiator::new(&i).unwrap();
    let mut res = Responder::new(&r);
    res.receive(ini.transmit());
    match res.poll() {
        Some(Event::Failed(f)) => {
            assert_eq!(f.error, llp::INSUFFICIENT_IRD);
            assert!(!f.terminate);
        }
        e => panic!("{e:?}"),
    }
    let rep = res.transmit().to_vec();
    ini.receive(&SoftCrc32c, &rep);
    match ini.poll() {
        Some(Event::Rejected { peer, .. }) => assert_eq!(peer.map(|p| p.ord), Some(6)),
        e => panic!("{e:?}"),
    }
}

#[test]
fn rev1_responder_closes_on_an_enhanced_request_without_reply() {
    // RFC 6581 10: "it MUST close the TCP connection and exit MPA".
    let mut res = Responder::new(&ResponderConfig {
        max_rev: 1,
        ..rcfg()
    });
    res.receive(&request_bytes(&icfg()));
    assert!(matches!(res.poll(), Some(Event::Failed(f)) if !f.terminate));
    assert!(res.transmit().is_empty());
}

#[test]
fn bad_keys_fail_early() {
    // A Request where a Reply is due: wrong from the 10th octet ('q').
    let req = request_bytes(&icfg());
    let mut ini = Initiator::new(&icfg()).unwrap();
    assert_eq!(ini.receive(&SoftCrc32c, &req[..9]), 9);
    assert_eq!(ini.phase(), Phase::AwaitFrame);
    ini.receive(&SoftCrc32c, &req[9..10]);
    assert_eq!(
        ini.poll(),
        Some(Event::Failed(Failure {
            error: llp::INVALID_REQ_RESP,
            terminate: false,
            peer: None
        }))
    );
    assert!(
        ini.transmit().len() == req.len(),
        "only the Request, no Terminate"
    );
    // A Reply where a Request is due.
    let mut res = Responder::new(&rcfg());
    res.receive(&reply(false, false, 1, None, b""));
    assert!(matches!(res.poll(), Some(Event::Failed(f)) if f.error == llp::INVALID_REQ_RESP));
    assert!(res.transmit().is_empty());
    // Garbage.
    let mut res = Responder::new(&rcfg());
    res.receive(b"GET / HTTP/1.1\r\n\r\n");
    assert!(matches!(res.phase(), Phase::Failed(_)));
}

#[test]
fn bad_revision_is_invalid_without_terminate() {
    let mut ini = Initiator::new(&icfg()).unwrap();
    let mut rep = reply(false, false, 1, None, b"");
    rep[17] = 3;
    ini.receive(&SoftCrc32c, &rep);
    assert!(
        matches!(ini.poll(), Some(Event::Failed(f)) if f.error == llp::INVALID_REQ_RESP && !f.terminate)
    );
}

#[test]
fn oversize_private_data() {
    // PD_Length 513 is refused as soon as the header is in.
    let mut req = request_bytes(&InitiatorConfig {
        private_data: &[],
        enhanced: false,
        p2p: None,
        ..icfg()
    });
    req[18..20].copy_from_slice(&513u16.to_be_bytes());
    let mut res = Responder::new(&rcfg());
    assert_eq!(res.receive(&req[..20]), 20);
    assert!(matches!(res.poll(), Some(Event::Failed(f)) if f.error == llp::INVALID_REQ_RESP));
    // The initiator's own: 512 octets leave no room for the enhanced data.
    let big = [7u8; 512];
    assert!(matches!(
        Initiator::new(&InitiatorConfig {
            private_data: &big,
            ..icfg()
        }),
        Err(Error::PrivateDataTooLong)
    ));
    let ok = Initiator::new(&InitiatorConfig {
        private_data: &big,
        enhanced: false,
        p2p: None,
        ..icfg()
    })
    .unwrap();
    assert_eq!(ok.transmit().len(), MAX_FRAME);
    // The responder's: refused, nothing changes, a shorter one works.
    let mut res = Responder::new(&rcfg());
    res.receive(&request_bytes(&icfg()));
    res.poll();
    assert_eq!(res.accept(&rcfg(), &big), Err(llp::INVALID_REQ_RESP));
    assert_eq!(res.phase(), Phase::Decide);
    assert!(res.transmit().is_empty());
    assert!(res.accept(&rcfg(), &big[..508]).is_ok());
    assert_eq!(res.transmit().len(), MAX_FRAME);
}

#[test]
fn accept_with_the_callers_settings() {
    // Only a Read RTR in common: an IRD of 0 cannot accept it (no credit
    // for the zero-length Read), IRD 1 can; the failed try changes nothing.
    let i = InitiatorConfig {
        p2p: Some(RtrSet::one(Rtr::Read)),
        ..icfg()
    };
    let mut res = Responder::new(&rcfg());
    res.receive(&request_bytes(&i));
    res.poll();
    let zero = ResponderConfig { ird: 0, ..rcfg() };
    assert_eq!(res.accept(&zero, b""), Err(llp::NO_MATCHING_RTR));
    assert_eq!(res.phase(), Phase::Decide);
    let one = ResponderConfig { ird: 1, ..rcfg() };
    let p = res.accept(&one, b"").unwrap();
    assert_eq!((p.ird, p.rtr), (1, Some(RtrMode::Zero(Rtr::Read))));
    assert_eq!(res.phase(), Phase::Established);
    // Accepted once.
    assert!(res.accept(&one, b"").is_err());
}

#[test]
fn client_server_and_rev1() {
    let i = InitiatorConfig {
        enhanced: false,
        p2p: None,
        ..icfg()
    };
    let (ip, rp) = run(&i, &rcfg());
    assert_eq!((ip.rev, ip.enhanced, ip.rtr), (REV_1, false, None));
    assert_eq!((rp.rtr_expected(), ip.rtr_to_send()), (None, None));
    assert_eq!(ip.peer, None);
}

/// The Terminate the initiator queued: framing checked by a receiver,
/// then the Terminate message decoded.
fn queued_terminate(ini: &Initiator, request_len: usize, framing: Framing) -> TermError {
    let t = &ini.transmit()[request_len..];
    // The peer's receiver: it expects markers where we send them.
    let peer = Framing {
        markers_rx: framing.markers_tx,
        ..framing
    };
    let mut rx = peer.rx(crate::mpa::rx::MAX_HEADER);
    let mut off = 0;
    let mut hdr = Vec::new();
    let mut complete = false;
    while off < t.len() {
        let s = rx.poll(&SoftCrc32c, &t[off..]).unwrap();
        match s.event {
            Some(RxEvent::Header { .. }) => hdr = rx.header().to_vec(),
            Some(RxEvent::Complete) => complete = true,
            _ => {}
        }
        off += s.consumed.max(1);
    }
    assert!(complete);
    match decode(&hdr).unwrap().body {
        Body::Terminate(t) => {
            assert_eq!(t.ddp, None);
            t.error
        }
        b => panic!("{b:?}"),
    }
}

#[test]
fn rfc6581_insufficient_ird_goes_in_terminate() {
    // We offered IRD 2; the responder's ORD 4 is more than we can take.
    let i = InitiatorConfig { ird: 2, ..icfg() };
    let mut ini = Initiator::new(&i).unwrap();
    let n = ini.transmit().len();
    let e = Enhanced {
        ird: 4,
        ord: 4,
        p2p: true,
        rtr: RtrSet::one(Rtr::Write),
    };
    ini.receive(&SoftCrc32c, &reply(true, false, 2, Some(e), b""));
    let f = match ini.poll() {
        Some(Event::Failed(f)) => f,
        e => panic!("{e:?}"),
    };
    assert_eq!(
        (f.error, f.terminate, f.peer),
        (llp::INSUFFICIENT_IRD, true, Some(e))
    );
    let framing = Framing {
        crc: true,
        markers_tx: false,
        markers_rx: false,
    };
    assert_eq!(queued_terminate(&ini, n, framing).to_bits(), 0x2306);
}

#[test]
fn rfc6581_no_matching_rtr_goes_in_terminate() {
    let i = InitiatorConfig {
        p2p: Some(RtrSet::one(Rtr::Write)),
        ..icfg()
    };
    let mut ini = Initiator::new(&i).unwrap();
    let n = ini.transmit().len();
    let e = Enhanced {
        ird: 4,
        ord: 4,
        p2p: true,
        rtr: RtrSet::one(Rtr::Read),
    };
    ini.receive(&SoftCrc32c, &reply(false, false, 2, Some(e), b""));
    assert!(
        matches!(ini.poll(), Some(Event::Failed(f)) if f.error == llp::NO_MATCHING_RTR && f.terminate)
    );
    let framing = Framing {
        crc: false,
        markers_tx: false,
        markers_rx: false,
    };
    assert_eq!(queued_terminate(&ini, n, framing).to_bits(), 0x2307);
    // A reply that clears A on a peer-to-peer request: code 7 too.
    let mut ini = Initiator::new(&i).unwrap();
    let e = Enhanced {
        p2p: false,
        rtr: RtrSet::EMPTY,
        ..e
    };
    ini.receive(&SoftCrc32c, &reply(false, false, 2, Some(e), b""));
    assert!(
        matches!(ini.poll(), Some(Event::Failed(f)) if f.error == llp::NO_MATCHING_RTR && f.terminate)
    );
}

#[test]
fn rfc6581_local_catastrophic_goes_in_terminate() {
    // We never use CRC; the responder's Reply turns it on: code 5, sent
    // with the CRC the Reply negotiated, and with markers if it asked.
    let i = InitiatorConfig {
        crc: CrcPolicy::Never,
        enhanced: false,
        p2p: None,
        ..icfg()
    };
    let mut ini = Initiator::new(&i).unwrap();
    let n = ini.transmit().len();
    let mut rep = reply(true, false, 1, None, b"");
    rep[16] |= 0x80; // M: the responder wants markers
    ini.receive(&SoftCrc32c, &rep);
    assert!(
        matches!(ini.poll(), Some(Event::Failed(f)) if f.error == llp::LOCAL_CATA && f.terminate)
    );
    let framing = Framing {
        crc: true,
        markers_tx: true,
        markers_rx: false,
    };
    assert_eq!(queued_terminate(&ini, n, framing).to_bits(), 0x2305);
    // The Terminate leaves after the Request, whatever was sent of it.
    ini.sent(n);
    assert!(ini.transmit().len() <= MAX_TERMINATE);
}

#[test]
fn rfc6581_rules_are_the_mpa_codes_5_to_7() {
    use crate::error::rdmap;
    use rfc6581::*;
    let siw_ird = TermError::from_bits(0x2006).unwrap();
    assert!(insufficient_ird_goes_in_terminate(llp::INSUFFICIENT_IRD));
    assert!(insufficient_ird_goes_in_terminate(siw_ird));
    assert!(!insufficient_ird_goes_in_terminate(llp::NO_MATCHING_RTR));
    assert!(no_matching_rtr_goes_in_terminate(llp::NO_MATCHING_RTR));
    assert!(!no_matching_rtr_goes_in_terminate(llp::LOCAL_CATA));
    assert!(local_catastrophic_goes_in_terminate(llp::LOCAL_CATA));
    assert!(!local_catastrophic_goes_in_terminate(rdmap::LOCAL_CATA));
    for e in [
        llp::INVALID_REQ_RESP,
        llp::CRC,
        llp::MARKER,
        llp::CONNECTION_LOST,
    ] {
        assert!(!goes_in_terminate(e), "{e:?}");
    }
    // Code 6 of another layer is not the MPA code.
    let ddp6 = TermError {
        layer: Layer::Ddp,
        etype: 3,
        code: 6,
    };
    assert!(!goes_in_terminate(ddp6));
}

#[test]
fn private_data_type() {
    assert_eq!(PrivateData::new(b"abc").unwrap().as_bytes(), b"abc");
    assert_eq!(PrivateData::default().as_bytes(), b"");
    assert!(PrivateData::new(&[0; 512]).is_some());
    assert!(PrivateData::new(&[0; 513]).is_none());
    assert_eq!(
        std::format!("{:?}", PrivateData::new(b"a").unwrap()),
        "PrivateData([97])"
    );
}

proptest! {
    /// Any input in any chunks: no panic, never more taken than given,
    /// never past the frame, and a complete valid frame is judged the
    /// same whatever the chunking.
    #[test]
    fn arbitrary_input(bytes in proptest::collection::vec(any::<u8>(), 0..700),
                       cuts in proptest::collection::vec(0usize..700, 0..8),
                       initiator: bool) {
        let mut cuts = cuts;
        cuts.sort_unstable();
        if initiator {
            let mut m = Initiator::new(&icfg()).unwrap();
            let used = feed_initiator(&mut m, &bytes, &cuts);
            prop_assert!(used <= bytes.len());
            if m.phase() == Phase::Established {
                prop_assert_eq!(used, Repr::parse_bytes(&bytes[..used]).unwrap().buffer_len());
            }
            let _ = m.poll();
        } else {
            let mut m = Responder::new(&rcfg());
            let used = feed_responder(&mut m, &bytes, &cuts);
            prop_assert!(used <= bytes.len());
            let _ = m.poll();
        }
    }

    /// Any pair of configurations: the two sides agree on what they
    /// settle, split anywhere.
    #[test]
    fn both_sides_agree(crc in 0u8..2, markers: (bool, bool), enhanced: bool,
                        ird in 0u16..6, ord in 0u16..6, rird in 0u16..6, rord in 0u16..6,
                        p2p in 0u8..8, rtr in 0u8..8, cut in 0usize..600) {
        let p2p = (enhanced && p2p > 0).then(|| RtrSet::from_flags(p2p & 1 != 0, p2p & 2 != 0, p2p & 4 != 0));
        let i = InitiatorConfig {
            crc: if crc == 1 { CrcPolicy::Required } else { CrcPolicy::IfPeerAsks },
            markers: markers.0, enhanced, ird, ord, p2p, private_data: b"i",
        };
        let r = ResponderConfig {
            markers: markers.1, ird: rird, ord: rord,
            rtr: RtrSet::from_flags(rtr & 1 != 0, rtr & 2 != 0, rtr & 4 != 0),
            ..rcfg()
        };
        let mut ini = Initiator::new(&i).unwrap();
        let mut res = Responder::new(&r);
        let req = ini.transmit().to_vec();
        feed_responder(&mut res, &req, &[cut]);
        match res.poll() {
            Some(Event::Request(_)) => {
                let rp = res.accept(&r, b"r").unwrap();
                let rep = res.transmit().to_vec();
                feed_initiator(&mut ini, &rep, &[cut]);
                match ini.poll() {
                    Some(Event::Established(ip)) => {
                        prop_assert_eq!(ip.framing.crc, rp.framing.crc);
                        prop_assert_eq!(ip.framing.markers_tx, rp.framing.markers_rx);
                        prop_assert_eq!(ip.framing.markers_rx, rp.framing.markers_tx);
                        prop_assert_eq!(ip.rtr, rp.rtr);
                        prop_assert_eq!(ip.rtr_to_send(), rp.rtr_expected());
                        if ip.auto_ird_ord {
                            prop_assert!(ip.ord <= rp.ird && rp.ord <= ip.ird);
                        }
                    }
                    Some(Event::Failed(f)) => prop_assert!(f.terminate),
                    e => prop_assert!(false, "{:?}", e),
                }
            }
            Some(Event::Failed(_)) => {
                let rep = res.transmit().to_vec();
                prop_assert!(!rep.is_empty());
                feed_initiator(&mut ini, &rep, &[cut]);
                let rejected = matches!(ini.poll(), Some(Event::Rejected { .. }));
                prop_assert!(rejected);
            }
            e => prop_assert!(false, "{:?}", e),
        }
    }
}
