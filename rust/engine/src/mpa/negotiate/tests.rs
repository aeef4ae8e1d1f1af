// SPDX-License-Identifier: GPL-2.0
//! Tests of the MPA startup negotiation (RFC 5044 7.1, RFC 6581 sections
//! 5, 6, 9 and 10): golden frames, each rule, and agreement of both roles
//! over arbitrary configurations.

use super::*;
use crate::wire::mpa::Frame;
use proptest::prelude::*;
use std::vec;

fn icfg() -> InitiatorConfig<'static> {
    InitiatorConfig {
        crc: CrcPolicy::IfPeerAsks,
        markers: false,
        enhanced: true,
        ird: 16,
        ord: 16,
        p2p: None,
        private_data: b"init",
    }
}

fn rcfg() -> ResponderConfig {
    ResponderConfig {
        max_rev: 2,
        crc: CrcPolicy::IfPeerAsks,
        markers: false,
        ird: 8,
        ord: 32,
        min_ord: 0,
        rtr: RtrSet::ALL,
    }
}

/// Runs the whole exchange through the wire encoding.
fn exchange<'a>(
    i: &InitiatorConfig<'_>,
    r: &ResponderConfig,
    rep_pd: &'a [u8],
    buf: &'a mut [u8; 600],
) -> (
    Result<Negotiated<'static>, ()>,
    Result<Negotiated<'a>, Refused<'a>>,
) {
    let req = request(i).unwrap();
    let mut rb = vec![0u8; req.buffer_len()];
    req.emit_bytes(&mut rb).unwrap();
    let req_parsed = Repr::parse_bytes(&rb).unwrap();
    let reply = match judge_request(r, &req_parsed) {
        Ok(offer) => {
            let n = offer.negotiated;
            let reply = offer.accept(rep_pd).unwrap();
            let n = Negotiated {
                private_data: &[],
                ..n
            };
            (Ok(n), reply)
        }
        Err(rej) => (Err(()), rej.reply(rep_pd).unwrap()),
    };
    let len = reply.1.emit_bytes(&mut buf[..]).unwrap();
    let parsed = Repr::parse(&Frame::new_unchecked(&buf[..len])).unwrap();
    (reply.0, check_reply(i, &parsed))
}

#[test]
fn request_golden() {
    // IRD 16, ORD 16, p2p with Write and Read, no CRC, M set:
    // byte 16 = M|S = 0x90, Rev 2, PD_Length 4 + 4,
    // IRD word 0x8000|16 = 80 10, ORD word 0x8000|0x4000|16 = C0 10.
    let cfg = InitiatorConfig {
        markers: true,
        p2p: Some(RtrSet::one(Rtr::Write).with(Rtr::Read)),
        ..icfg()
    };
    let mut out = [0u8; 28];
    assert_eq!(request(&cfg).unwrap().emit_bytes(&mut out), Ok(28));
    assert_eq!(
        &out[16..],
        &[0x90, 0x02, 0x00, 0x08, 0x80, 0x10, 0xC0, 0x10, b'i', b'n', b'i', b't']
    );
}

#[test]
fn request_rules() {
    // No enhanced features: Rev 1, no S (RFC 6581 10).
    let r = request(&InitiatorConfig {
        enhanced: false,
        ..icfg()
    })
    .unwrap();
    assert_eq!((r.rev, r.enhanced), (1, None));
    assert_eq!(
        request(&InitiatorConfig {
            enhanced: false,
            p2p: Some(RtrSet::ALL),
            ..icfg()
        }),
        Err(Error::BadEnhanced)
    );
    assert_eq!(
        request(&InitiatorConfig {
            ird: 0x4000,
            ..icfg()
        }),
        Err(Error::BadEnhanced)
    );
    let big = [0u8; 509];
    assert_eq!(
        request(&InitiatorConfig {
            private_data: &big,
            ..icfg()
        }),
        Err(Error::PrivateDataTooLong)
    );
    assert!(request(&InitiatorConfig {
        private_data: &big[..508],
        ..icfg()
    })
    .is_ok());
    assert!(request(&InitiatorConfig {
        enhanced: false,
        private_data: &big,
        ..icfg()
    })
    .is_ok());
    assert_eq!(max_private_data(true), 508);
    assert_eq!(max_private_data(false), 512);
    assert!(
        request(&InitiatorConfig {
            crc: CrcPolicy::Required,
            ..icfg()
        })
        .unwrap()
        .crc
    );
}

#[test]
fn plain_client_server() {
    let mut buf = [0u8; 600];
    let (r, i) = exchange(&icfg(), &rcfg(), b"resp", &mut buf);
    let r = r.unwrap();
    let i = i.unwrap();
    // Responder: IRD = min(own 8, initiator ORD 16) = 8; ORD =
    // min(own 32, initiator IRD 16) = 16. Initiator mirrors.
    assert_eq!((r.ird, r.ord), (8, 16));
    assert_eq!((i.ird, i.ord), (16, 8));
    assert!(i.auto_ird_ord && r.auto_ird_ord && i.enhanced);
    assert_eq!(
        i.peer,
        Some(Enhanced {
            ird: 8,
            ord: 16,
            p2p: false,
            rtr: RtrSet::EMPTY
        })
    );
    assert_eq!(i.private_data, b"resp");
    assert_eq!((i.rtr, r.rtr), (None, None));
    assert_eq!(
        i.framing,
        Framing {
            crc: false,
            markers_tx: false,
            markers_rx: false
        }
    );
}

#[test]
fn crc_either_side() {
    for (ic, rc, want) in [
        (CrcPolicy::IfPeerAsks, CrcPolicy::IfPeerAsks, false),
        (CrcPolicy::Required, CrcPolicy::IfPeerAsks, true),
        (CrcPolicy::IfPeerAsks, CrcPolicy::Required, true),
        (CrcPolicy::Required, CrcPolicy::Required, true),
    ] {
        let mut buf = [0u8; 600];
        let (r, i) = exchange(
            &InitiatorConfig { crc: ic, ..icfg() },
            &ResponderConfig { crc: rc, ..rcfg() },
            b"",
            &mut buf,
        );
        assert_eq!(r.unwrap().framing.crc, want);
        assert_eq!(i.unwrap().framing.crc, want);
    }
    // Responder refusing CRC rejects; initiator refusing CRC fails.
    let mut buf = [0u8; 600];
    let (r, i) = exchange(
        &InitiatorConfig {
            crc: CrcPolicy::Required,
            ..icfg()
        },
        &ResponderConfig {
            crc: CrcPolicy::Never,
            ..rcfg()
        },
        b"",
        &mut buf,
    );
    assert!(r.is_err());
    assert!(matches!(i, Err(Refused::Rejected { .. })));
    let mut buf = [0u8; 600];
    let (_, i) = exchange(
        &InitiatorConfig {
            crc: CrcPolicy::Never,
            ..icfg()
        },
        &ResponderConfig {
            crc: CrcPolicy::Required,
            ..rcfg()
        },
        b"",
        &mut buf,
    );
    assert!(matches!(
        i,
        Err(Refused::Failed {
            error: llp::LOCAL_CATA,
            ..
        })
    ));
}

#[test]
fn markers_per_direction() {
    for (im, rm) in [(false, false), (true, false), (false, true), (true, true)] {
        let mut buf = [0u8; 600];
        let (r, i) = exchange(
            &InitiatorConfig {
                markers: im,
                ..icfg()
            },
            &ResponderConfig {
                markers: rm,
                ..rcfg()
            },
            b"",
            &mut buf,
        );
        let (r, i) = (r.unwrap(), i.unwrap());
        assert_eq!((i.framing.markers_rx, i.framing.markers_tx), (im, rm));
        assert_eq!((r.framing.markers_rx, r.framing.markers_tx), (rm, im));
        assert_eq!(i.framing.tx().markers(), rm);
        assert_eq!(r.framing.rx(18).config().markers, rm);
    }
}

#[test]
fn rev_negotiation() {
    // Rev 1 responder, unenhanced Rev 1 request: fine.
    let rc1 = ResponderConfig {
        max_rev: 1,
        ..rcfg()
    };
    let mut buf = [0u8; 600];
    let (r, i) = exchange(
        &InitiatorConfig {
            enhanced: false,
            ..icfg()
        },
        &rc1,
        b"x",
        &mut buf,
    );
    assert_eq!(r.unwrap().rev, 1);
    let i = i.unwrap();
    assert_eq!(
        (i.rev, i.enhanced, i.peer, i.ird, i.ord),
        (1, false, None, 16, 16)
    );
    // Rev 1 responder, enhanced request: close, no reply.
    let req = request(&icfg()).unwrap();
    let rej = judge_request(&rc1, &req).unwrap_err();
    assert!(!rej.send_reply);
    // Rev 2 responder, Rev 1 request: Rev 1 unenhanced reply.
    let req = request(&InitiatorConfig {
        enhanced: false,
        ..icfg()
    })
    .unwrap();
    let off = judge_request(&rcfg(), &req).unwrap();
    let rep = off.accept(b"").unwrap();
    assert_eq!((rep.rev, rep.enhanced), (1, None));
    // A reply with a higher Rev than the request is invalid.
    let bad = Repr { rev: 2, ..rep };
    assert!(matches!(
        check_reply(
            &InitiatorConfig {
                enhanced: false,
                ..icfg()
            },
            &bad
        ),
        Err(Refused::Failed {
            error: llp::INVALID_REQ_RESP,
            ..
        })
    ));
    // Enhanced request answered unenhanced (and vice versa): invalid.
    assert!(matches!(
        check_reply(&icfg(), &Repr { rev: 1, ..rep }),
        Err(Refused::Failed {
            error: llp::INVALID_REQ_RESP,
            ..
        })
    ));
    let enh = Repr {
        rev: 2,
        enhanced: Some(Enhanced::default()),
        ..rep
    };
    assert!(matches!(
        check_reply(
            &InitiatorConfig {
                enhanced: false,
                ..icfg()
            },
            &enh
        ),
        Err(Refused::Failed {
            error: llp::INVALID_REQ_RESP,
            ..
        })
    ));
    // Wrong key: a request where a reply was expected, and vice versa.
    assert!(matches!(
        check_reply(
            &icfg(),
            &Repr {
                kind: Kind::Request,
                ..enh
            }
        ),
        Err(Refused::Failed { .. })
    ));
    let rej = judge_request(
        &rcfg(),
        &Repr {
            kind: Kind::Reply,
            ..enh
        },
    )
    .unwrap_err();
    assert_eq!((rej.error, rej.send_reply), (llp::INVALID_REQ_RESP, false));
}

#[test]
fn responder_requires_ord() {
    // Initiator IRD 4 < responder's required ORD 6: reject carrying ORD 6.
    let i = InitiatorConfig { ird: 4, ..icfg() };
    let r = ResponderConfig {
        min_ord: 6,
        ..rcfg()
    };
    let req = request(&i).unwrap();
    let rej = judge_request(&r, &req).unwrap_err();
    assert_eq!(rej.error, llp::INSUFFICIENT_IRD);
    assert_eq!(rej.private_data, b"init");
    let rep = rej.reply(b"need more").unwrap();
    assert!(rep.reject);
    assert_eq!(rep.enhanced.unwrap().ord, 6);
    // The initiator passes the peer values up with the reject.
    match check_reply(&i, &rep) {
        Err(Refused::Rejected {
            peer: Some(p),
            private_data,
        }) => {
            assert_eq!((p.ord, private_data), (6, &b"need more"[..]));
        }
        other => panic!("{other:?}"),
    }
    // IRD 6 suffices: ORD = max(32, 6) capped to initiator IRD 6.
    let req = request(&InitiatorConfig { ird: 6, ..icfg() }).unwrap();
    assert_eq!(judge_request(&r, &req).unwrap().negotiated.ord, 6);
}

#[test]
fn initiator_insufficient_ird() {
    // Responder replies with ORD 20 above the initiator's IRD 16: error 6.
    let rep = Repr {
        kind: Kind::Reply,
        markers: false,
        crc: true,
        reject: false,
        rev: 2,
        enhanced: Some(Enhanced {
            ird: 4,
            ord: 20,
            p2p: false,
            rtr: RtrSet::EMPTY,
        }),
        private_data: b"",
    };
    match check_reply(&icfg(), &rep) {
        Err(Refused::Failed {
            error,
            framing: Some(f),
            peer: Some(p),
        }) => {
            assert_eq!(error, llp::INSUFFICIENT_IRD);
            assert!(f.crc);
            assert_eq!(p.ord, 20);
        }
        other => panic!("{other:?}"),
    }
    // ORD 16 fits: IRD 16, ORD = min(16, 4).
    let n = check_reply(
        &icfg(),
        &Repr {
            enhanced: Some(Enhanced {
                ord: 16,
                ..rep.enhanced.unwrap()
            }),
            ..rep
        },
    )
    .unwrap();
    assert_eq!((n.ird, n.ord), (16, 4));
}

#[test]
fn no_auto_ird_ord() {
    let i = InitiatorConfig {
        ird: IRD_ORD_NO_AUTO,
        ord: IRD_ORD_NO_AUTO,
        ..icfg()
    };
    let r = ResponderConfig {
        min_ord: 100,
        ..rcfg()
    };
    let mut buf = [0u8; 600];
    let (rn, inn) = exchange(&i, &r, b"", &mut buf);
    let (rn, inn) = (rn.unwrap(), inn.unwrap());
    assert!(!rn.auto_ird_ord && !inn.auto_ird_ord);
    assert_eq!((rn.ird, rn.ord), (8, 32));
    assert_eq!(inn.peer.map(|p| (p.ird, p.ord)), Some((0x3FFF, 0x3FFF)));
    assert_eq!((inn.ird, inn.ord), (0x3FFF, 0x3FFF));
}

#[test]
fn p2p_rtr_selection() {
    let w = RtrSet::one(Rtr::Write);
    let rd = RtrSet::one(Rtr::Read);
    let s = RtrSet::one(Rtr::Send);
    for (offer, accept, want) in [
        (RtrSet::ALL, RtrSet::ALL, Some(Rtr::Write)),
        (rd.with(Rtr::Send), RtrSet::ALL, Some(Rtr::Read)),
        (s, RtrSet::ALL, Some(Rtr::Send)),
        (w.with(Rtr::Read), rd, Some(Rtr::Read)),
        (w, rd.with(Rtr::Send), None),
        (RtrSet::EMPTY, RtrSet::ALL, None),
    ] {
        let i = InitiatorConfig {
            p2p: Some(offer),
            ..icfg()
        };
        let r = ResponderConfig {
            rtr: accept,
            ..rcfg()
        };
        let mut buf = [0u8; 600];
        let (rn, inn) = exchange(&i, &r, b"", &mut buf);
        match want {
            Some(k) => {
                assert_eq!(rn.unwrap().rtr, Some(RtrMode::Zero(k)));
                let inn = inn.unwrap();
                assert_eq!(inn.rtr, Some(RtrMode::Zero(k)));
                // Reply carries exactly the chosen flag.
                assert_eq!(inn.peer.unwrap().rtr, RtrSet::one(k));
            }
            None => {
                assert!(rn.is_err());
                match inn {
                    Err(Refused::Rejected { peer: Some(p), .. }) => {
                        assert!(p.p2p && p.rtr == accept)
                    }
                    other => panic!("{other:?}"),
                }
                let req = request(&i).unwrap();
                assert_eq!(
                    judge_request(&r, &req).unwrap_err().error,
                    llp::NO_MATCHING_RTR
                );
            }
        }
    }
    // Read RTR needs IRD/ORD credits: initiator ORD 0 rules it out.
    let i = InitiatorConfig {
        ord: 0,
        p2p: Some(rd),
        ..icfg()
    };
    let req = request(&i).unwrap();
    assert_eq!(
        judge_request(&rcfg(), &req).unwrap_err().error,
        llp::NO_MATCHING_RTR
    );
}

#[test]
fn initiator_rtr_checks() {
    let i = InitiatorConfig {
        p2p: Some(RtrSet::one(Rtr::Write)),
        ..icfg()
    };
    let base = Repr {
        kind: Kind::Reply,
        markers: false,
        crc: false,
        reject: false,
        rev: 2,
        enhanced: Some(Enhanced {
            ird: 4,
            ord: 4,
            p2p: true,
            rtr: RtrSet::one(Rtr::Read),
        }),
        private_data: b"",
    };
    // Flags, but none we can send: error 7.
    assert!(matches!(
        check_reply(&i, &base),
        Err(Refused::Failed {
            error: llp::NO_MATCHING_RTR,
            ..
        })
    ));
    // A set, no flags: the ULP must Send.
    let e = Enhanced {
        rtr: RtrSet::EMPTY,
        ..base.enhanced.unwrap()
    };
    assert_eq!(
        check_reply(
            &i,
            &Repr {
                enhanced: Some(e),
                ..base
            }
        )
        .unwrap()
        .rtr,
        Some(RtrMode::UlpSend)
    );
    // A cleared although we asked: error 7; A set although we did not: invalid.
    let e = Enhanced {
        p2p: false,
        rtr: RtrSet::EMPTY,
        ..e
    };
    assert!(matches!(
        check_reply(
            &i,
            &Repr {
                enhanced: Some(e),
                ..base
            }
        ),
        Err(Refused::Failed {
            error: llp::NO_MATCHING_RTR,
            ..
        })
    ));
    assert!(matches!(
        check_reply(&icfg(), &base),
        Err(Refused::Failed {
            error: llp::INVALID_REQ_RESP,
            ..
        })
    ));
    // Several flags: Write preferred.
    let e = Enhanced {
        rtr: RtrSet::ALL,
        ..base.enhanced.unwrap()
    };
    let i2 = InitiatorConfig {
        p2p: Some(RtrSet::ALL),
        ..icfg()
    };
    assert_eq!(
        check_reply(
            &i2,
            &Repr {
                enhanced: Some(e),
                ..base
            }
        )
        .unwrap()
        .rtr,
        Some(RtrMode::Zero(Rtr::Write))
    );
}

#[test]
fn ulp_reject_and_pd_limits() {
    let req = request(&icfg()).unwrap();
    let off = judge_request(&rcfg(), &req).unwrap();
    assert_eq!(off.negotiated.private_data, b"init");
    let rep = off.reject(b"no").unwrap();
    assert!(rep.reject && rep.enhanced.is_some());
    let big = [0u8; 509];
    assert_eq!(off.accept(&big), Err(Error::PrivateDataTooLong));
    assert!(off.accept(&big[..508]).is_ok());
}

/// siw interop, from siw_cm.c: siw as initiator (Rev 2, S, IRD/ORD,
/// p2p with Write|Read) against our responder accepting Write only.
#[test]
fn siw_initiator_bytes() {
    // Hand-built siw-style request: flags C|S (siw with CRC on) = 0x50,
    // Rev 2, PD 4, IRD 0x8000|16, ORD 0x8000|0x4000|16.
    let mut b = [0u8; 24];
    b[..16].copy_from_slice(b"MPA ID Req Frame");
    b[16..24].copy_from_slice(&[0x50, 0x02, 0x00, 0x04, 0x80, 0x10, 0xC0, 0x10]);
    let req = Repr::parse_bytes(&b).unwrap();
    let off = judge_request(
        &ResponderConfig {
            rtr: RtrSet::one(Rtr::Write),
            ..rcfg()
        },
        &req,
    )
    .unwrap();
    let rep = off.accept(b"").unwrap();
    let mut out = [0u8; 24];
    rep.emit_bytes(&mut out).unwrap();
    // Reply: "MPA ID Rep Frame", C|S, Rev 2, PD 4, IRD 0x8000|8,
    // ORD 0x8000 (Write RTR) | 16.
    assert_eq!(&out[..16], b"MPA ID Rep Frame");
    assert_eq!(
        &out[16..],
        &[0x50, 0x02, 0x00, 0x04, 0x80, 0x08, 0x80, 0x10]
    );
    assert_eq!(off.negotiated.rtr, Some(RtrMode::Zero(Rtr::Write)));
    assert!(off.negotiated.framing.crc);
}

fn arb_rtr() -> impl Strategy<Value = RtrSet> {
    (any::<bool>(), any::<bool>(), any::<bool>()).prop_map(|(a, b, c)| RtrSet::from_flags(a, b, c))
}

fn arb_ird() -> impl Strategy<Value = u16> {
    prop_oneof![0u16..40, Just(IRD_ORD_NO_AUTO)]
}

fn arb_crc() -> impl Strategy<Value = CrcPolicy> {
    prop_oneof![
        Just(CrcPolicy::IfPeerAsks),
        Just(CrcPolicy::Required),
        Just(CrcPolicy::Never)
    ]
}

proptest! {
    /// Whatever both sides are configured with, the exchange never
    /// panics, and when both accept they agree on framing, Rev and RTR,
    /// and the IRD/ORD rules hold.
    #[test]
    fn both_sides_agree(
        ic in arb_crc(), rc in arb_crc(), im: bool, rm: bool, enh: bool, p2p in proptest::option::of(arb_rtr()),
        iird in arb_ird(), iord in arb_ird(), rird in arb_ird(), rord in arb_ird(), min_ord in 0u16..40,
        rrtr in arb_rtr(), max_rev in 1u8..=2,
    ) {
        let i = InitiatorConfig { crc: ic, markers: im, enhanced: enh, ird: iird, ord: iord, p2p: if enh { p2p } else { None }, private_data: b"pd" };
        let r = ResponderConfig { max_rev, crc: rc, markers: rm, ird: rird, ord: rord, min_ord, rtr: rrtr };
        let req = request(&i).unwrap();
        if let Ok(off) = judge_request(&r, &req) {
            let rep = off.accept(b"rp").unwrap();
            let mut buf = [0u8; 600];
            let len = rep.emit_bytes(&mut buf).unwrap();
            let parsed = Repr::parse_bytes(&buf[..len]).unwrap();
            let rn = off.negotiated;
            if let Ok(inn) = check_reply(&i, &parsed) {
                prop_assert_eq!(inn.framing.crc, rn.framing.crc);
                prop_assert_eq!(inn.framing.markers_tx, rn.framing.markers_rx);
                prop_assert_eq!(inn.framing.markers_rx, rn.framing.markers_tx);
                prop_assert_eq!(inn.rev, rn.rev);
                prop_assert_eq!(inn.rtr, rn.rtr);
                prop_assert_eq!(inn.auto_ird_ord, rn.auto_ird_ord);
                if inn.auto_ird_ord {
                    prop_assert!(rn.ord <= inn.ird, "responder ORD must fit initiator IRD");
                    prop_assert!(inn.ord <= rn.ird, "initiator ORD must fit responder IRD");
                    prop_assert!(inn.ird <= iird && rn.ird <= rird);
                }
                if let Some(RtrMode::Zero(Rtr::Read)) = inn.rtr {
                    prop_assert!(!inn.auto_ird_ord || (inn.ord > 0 && rn.ird > 0));
                }
            }
        }
    }

    #[test]
    fn arbitrary_frames_never_panic(a in proptest::collection::vec(any::<u8>(), 0..64), b in proptest::collection::vec(any::<u8>(), 0..64)) {
        let mut ra = a.clone();
        let mut rb = b.clone();
        // Force the keys so parsing gets further.
        if ra.len() >= 20 { ra[..16].copy_from_slice(b"MPA ID Req Frame"); }
        if rb.len() >= 20 { rb[..16].copy_from_slice(b"MPA ID Rep Frame"); }
        for (x, y) in [(&a, &b), (&ra, &rb)] {
            if let Ok(req) = Repr::parse(&Frame::new_unchecked(&x[..])) {
                let _ = judge_request(&rcfg(), &req).map(|o| o.accept(b"")).map_err(|r| r.reply(b""));
            }
            if let Ok(rep) = Repr::parse(&Frame::new_unchecked(&y[..])) {
                let _ = check_reply(&icfg(), &rep);
            }
        }
    }
}
