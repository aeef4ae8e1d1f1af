// SPDX-License-Identifier: GPL-2.0
//! Two endpoints on 127.0.0.1 run every operation end to end, memory
//! contents checked, for every markers × CRC combination and every RTR
//! kind; then each Terminate path with the codes checked on both sides.
//! Every wait is bounded by a timeout.

use std::net::TcpListener;
use std::time::Duration;

use iwarp_endpoint::*;
use rsiw_engine::error::{ddp, rdmap, TermError};
use rsiw_engine::wire::atomic::AtomicOp;
use rsiw_engine::wire::commit::{Region as CRegion, RequestRepr as CommitReq, Status as CStatus};

const T: Duration = Duration::from_secs(20);

fn pair(init: &Options, resp: &Options) -> (Endpoint, Endpoint) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let a = Endpoint::connect(addr, init).unwrap();
    let b = Endpoint::accept(&l, resp).unwrap();
    let (mut a, mut b) = (a, b);
    wait_until(&mut [&mut a, &mut b], T, |e| e[0].qp.state() == State::Rts).unwrap();
    (a, b)
}

fn wait_cq(a: &mut Endpoint, b: &mut Endpoint, which: usize, n: usize) {
    let r = wait_until(&mut [&mut *a, &mut *b], T, |e| e[which].res.cq.len() >= n);
    if let Err(m) = r {
        panic!(
            "{m}: a cq {:?} events {:?}; b cq {:?} events {:?}",
            a.res.cq, a.res.events, b.res.cq, b.res.events
        );
    }
}

/// Waits until `which` has completed send `id` (send completions are in
/// posting order, so every earlier one is done too).
fn wait_id(a: &mut Endpoint, b: &mut Endpoint, which: usize, id: u64) {
    let r = wait_until(&mut [&mut *a, &mut *b], T, |e| {
        e[which]
            .res
            .cq
            .iter()
            .any(|c| c.queue == WorkQueue::Send && c.wr_id == id)
    });
    if let Err(m) = r {
        panic!(
            "{m}: a cq {:?} events {:?}; b cq {:?} events {:?}",
            a.res.cq, a.res.events, b.res.events, b.res.cq
        );
    }
}

fn local(stag: u32, to: u64) -> Local {
    Local {
        stag,
        to,
        handle: 0,
    }
}

fn u64_at(ep: &mut Endpoint, stag: u32, to: u64) -> u64 {
    let b = ep.res.slice_mut(stag, to, 8).unwrap();
    u64::from_le_bytes(b.try_into().unwrap())
}

/// Runs every operation from `a` to `b` (and a Send back) and checks the
/// memory.
fn all_ops(a: &mut Endpoint, b: &mut Endpoint) {
    let mul = a.qp.mulpdu();
    let src = a.reg_mr(0x10_0000, 64 * 1024, all_access());
    let sink = a.reg_mr(0x20_0000, 64 * 1024, all_access());
    let tgt = b.reg_mr(0x7000_0000, 64 * 1024, all_access());
    let victim = b.reg_mr(0x9000_0000, 4096, all_access());
    for (i, x) in a.mr(src).data.iter_mut().enumerate() {
        *x = (i * 31 % 251) as u8;
    }
    let srcdata = a.mr(src).data.clone();

    // All Send variants.
    for _ in 0..4 {
        b.post_recv(8192);
    }
    a.post_send(
        SendOp::Send { invalidate: None },
        5000,
        local(src, 0x10_0000),
        Flags::NONE,
    );
    a.post_send(
        SendOp::Send { invalidate: None },
        10,
        local(src, 0x10_0000 + 7),
        Flags::SOLICITED,
    );
    a.post_send(
        SendOp::Send {
            invalidate: Some(victim),
        },
        0,
        local(src, 0x10_0000),
        Flags::NONE,
    );
    a.post_send(
        SendOp::Send { invalidate: None },
        3,
        local(src, 0x10_0000),
        Flags::SOLICITED,
    );
    wait_cq(a, b, 1, 4);
    let r = &b.res.cq;
    assert!(
        r.iter()
            .all(|c| c.opcode == CompOp::Recv && c.status == Status::Success),
        "{r:?}"
    );
    assert_eq!(
        r.iter().map(|c| c.byte_len).collect::<Vec<_>>(),
        vec![5000, 10, 0, 3]
    );
    assert_eq!(
        r.iter().map(|c| c.solicited).collect::<Vec<_>>(),
        vec![false, true, false, true]
    );
    assert_eq!(r[2].invalidated, Some(victim));
    assert!(
        !b.mr(victim).valid,
        "remote STag must be invalid after Send with Invalidate"
    );
    let bad = b.res.rbufs[0][..5000]
        .iter()
        .zip(&srcdata)
        .position(|(x, y)| x != y);
    assert_eq!(bad, None, "first mismatch; rbufs {}", b.res.rbufs.len());
    assert_eq!(&b.res.rbufs[1][..10], &srcdata[7..17]);
    // Send with SE and Invalidate.
    let victim2 = b.reg_mr(0xA000_0000, 16, all_access());
    b.post_recv(64);
    let last = a.post_send(
        SendOp::Send {
            invalidate: Some(victim2),
        },
        8,
        local(src, 0x10_0000),
        Flags::SOLICITED,
    );
    wait_cq(a, b, 1, 5);
    wait_id(a, b, 0, last);
    let c = b.res.cq[4];
    assert_eq!((c.solicited, c.invalidated), (true, Some(victim2)));
    assert!(!b.mr(victim2).valid);

    // RDMA Write, multi-segment.
    let wlen = (3 * mul + 17) as u32;
    let n0 = a.res.cq.len();
    let w = a.post_send(
        SendOp::Write {
            remote: Remote {
                stag: tgt,
                to: 0x7000_0000 + 3,
            },
        },
        wlen,
        local(src, 0x10_0000),
        Flags::NONE,
    );
    wait_id(a, b, 0, w);
    // RDMA Read back, multi-segment (> MULPDU).
    let rd = a.post_send(
        SendOp::Read {
            remote: Remote {
                stag: tgt,
                to: 0x7000_0000 + 3,
            },
        },
        wlen,
        local(sink, 0x20_0000 + 1),
        Flags::NONE,
    );
    wait_id(a, b, 0, rd);
    assert_eq!(
        &b.mr(tgt).data[3..3 + wlen as usize],
        &srcdata[..wlen as usize]
    );
    assert_eq!(
        &a.mr(sink).data[1..1 + wlen as usize],
        &srcdata[..wlen as usize]
    );
    let c = a.res.cq[n0 + 1];
    assert_eq!(
        (c.opcode, c.byte_len, c.status),
        (CompOp::Read, wlen, Status::Success)
    );

    // Atomics.
    let at = 0x7000_0000 + 0x8000;
    b.res
        .slice_mut(tgt, at, 8)
        .unwrap()
        .copy_from_slice(&0x0000_0005_FFFF_FFFFu64.to_le_bytes());
    let atomic = |op, add_swap, add_swap_mask, compare, compare_mask| SendOp::Atomic {
        op,
        remote: Remote { stag: tgt, to: at },
        add_swap,
        add_swap_mask,
        compare,
        compare_mask,
    };
    let n0 = a.res.cq.len();
    a.post_send(
        atomic(AtomicOp::FetchAdd, 1, 0x8000_0000_8000_0000, 0, 0),
        0,
        local(sink, 0x20_0000),
        Flags::NONE,
    );
    a.post_send(
        atomic(AtomicOp::FetchAdd, 0x10, 0, 0, 0),
        0,
        local(sink, 0x20_0008),
        Flags::NONE,
    );
    // Compare only the low byte (0x10 matches), swap only the low 16 bits.
    a.post_send(
        atomic(AtomicOp::CmpSwap, 0xBEEF, 0xFFFF, 0xAB10, 0xFF),
        0,
        local(sink, 0x20_0010),
        Flags::NONE,
    );
    // Compare fails: memory unchanged.
    let last = a.post_send(
        atomic(AtomicOp::CmpSwap, 0, u64::MAX, 1, u64::MAX),
        0,
        local(sink, 0x20_0018),
        Flags::NONE,
    );
    wait_id(a, b, 0, last);
    assert_eq!(u64_at(a, sink, 0x20_0000), 0x0000_0005_FFFF_FFFF);
    assert_eq!(u64_at(a, sink, 0x20_0008), 0x0000_0005_0000_0000);
    assert_eq!(u64_at(a, sink, 0x20_0010), 0x0000_0005_0000_0010);
    assert_eq!(u64_at(a, sink, 0x20_0018), 0x0000_0005_0000_BEEF);
    assert_eq!(u64_at(b, tgt, at), 0x0000_0005_0000_BEEF);
    let ops: Vec<_> = a.res.cq[n0..].iter().map(|c| c.opcode).collect();
    assert_eq!(
        ops,
        vec![
            CompOp::FetchAdd,
            CompOp::FetchAdd,
            CompOp::CmpSwap,
            CompOp::CmpSwap
        ]
    );

    // Immediate Data and Write with Immediate.
    let nb = b.res.cq.len();
    b.post_recv(0);
    b.post_recv(0);
    a.post_send(
        SendOp::Immediate { data: *b"imm-data" },
        0,
        Local::default(),
        Flags::SOLICITED,
    );
    let wi = a.post_send(
        SendOp::WriteImm {
            remote: Remote {
                stag: tgt,
                to: 0x7000_0000 + 0x9000,
            },
            data: *b"wr-imm!!",
        },
        wlen,
        local(src, 0x10_0000 + 100),
        Flags::NONE,
    );
    wait_cq(a, b, 1, nb + 2);
    wait_id(a, b, 0, wi);
    let c = &b.res.cq[nb..];
    assert_eq!(
        (c[0].opcode, c[0].imm, c[0].solicited),
        (CompOp::RecvImm, Some(*b"imm-data"), true)
    );
    assert_eq!(
        (c[1].opcode, c[1].imm, c[1].solicited),
        (CompOp::RecvImm, Some(*b"wr-imm!!"), false)
    );
    assert_eq!(
        &b.mr(tgt).data[0x9000..0x9000 + wlen as usize],
        &srcdata[100..100 + wlen as usize]
    );

    // Commit, ordered after the Writes before it; statuses.
    let n0 = a.res.cq.len();
    a.post_send(
        SendOp::Write {
            remote: Remote {
                stag: tgt,
                to: 0x7000_0000,
            },
        },
        64,
        local(src, 0x10_0000 + 1),
        Flags::NONE,
    );
    let commit = |regions: &[CRegion]| SendOp::Commit {
        request: CommitReq::new(0, regions).unwrap(),
    };
    a.post_send(
        commit(&[CRegion {
            stag: tgt,
            to: 0x7000_0000,
            len: 64,
        }]),
        0,
        Local::default(),
        Flags::NONE,
    );
    a.post_send(
        commit(&[CRegion {
            stag: tgt,
            to: 0x7000_0000 + 65535,
            len: 64,
        }]),
        0,
        Local::default(),
        Flags::NONE,
    );
    let last = a.post_send(
        commit(&[CRegion {
            stag: 0xDEAD,
            to: 0,
            len: 1,
        }]),
        0,
        Local::default(),
        Flags::NONE,
    );
    wait_id(a, b, 0, last);
    assert_eq!(&b.mr(tgt).data[..64], &srcdata[1..65]);
    let st: Vec<_> = a.res.cq[n0..].iter().map(|c| c.status).collect();
    assert_eq!(
        st,
        vec![
            Status::Success,
            Status::Success,
            Status::CommitFailed(CStatus::Bounds),
            Status::CommitFailed(CStatus::Access)
        ]
    );
    b.res.fail_durable = true;
    let last = a.post_send(
        commit(&[CRegion {
            stag: tgt,
            to: 0x7000_0000,
            len: 8,
        }]),
        0,
        Local::default(),
        Flags::NONE,
    );
    wait_id(a, b, 0, last);
    assert_eq!(
        a.res.cq[n0 + 4].status,
        Status::CommitFailed(CStatus::NotDurable)
    );
    b.res.fail_durable = false;

    // And back from the responder.
    let bsrc = b.reg_mr(0xB000_0000, 100, all_access());
    b.mr(bsrc).data.iter_mut().for_each(|x| *x = 0xC3);
    let na = a.res.cq.len();
    a.post_recv(100);
    b.post_send(
        SendOp::Send { invalidate: None },
        100,
        local(bsrc, 0xB000_0000),
        Flags::NONE,
    );
    wait_cq(a, b, 0, na + 1);
    assert!(a.res.rbufs.last().unwrap().iter().all(|&x| x == 0xC3));

    assert!(a
        .res
        .cq
        .iter()
        .chain(b.res.cq.iter())
        .all(|c| !matches!(c.status, Status::Flushed | Status::LocalError(_))));
    assert_eq!((a.qp.state(), b.qp.state()), (State::Rts, State::Rts));
}

#[test]
fn every_operation_every_framing_and_rtr() {
    for crc in [true, false] {
        for markers in [false, true] {
            for rtr in [None, Some(Rtr::Send), Some(Rtr::Write), Some(Rtr::Read)] {
                let mut o = Options {
                    crc: if crc {
                        CrcPolicy::Required
                    } else {
                        CrcPolicy::IfPeerAsks
                    },
                    markers,
                    p2p: rtr.map(RtrSet::one),
                    emss: 1000,
                    ..Options::default()
                };
                let r = Options {
                    crc: CrcPolicy::IfPeerAsks,
                    p2p: Some(RtrSet::ALL),
                    private_data: b"resp".to_vec(),
                    ..o.clone()
                };
                o.private_data = b"init".to_vec();
                let (mut a, mut b) = pair(&o, &r);
                assert_eq!(a.qp.framing().crc, crc);
                assert_eq!(
                    (a.qp.framing().markers_tx, b.qp.framing().markers_tx),
                    (markers, markers)
                );
                assert_eq!(a.qp.rtr_mode(), rtr.map(RtrMode::Zero));
                assert_eq!(b.qp.rtr_mode(), rtr.map(RtrMode::Zero));
                assert_eq!(a.peer_private_data(), b"resp");
                assert_eq!(b.peer_private_data(), b"init");
                all_ops(&mut a, &mut b);
                if rtr.is_some() {
                    assert!(b.res.events.contains(&Event::Ready));
                }
                // Graceful close.
                a.qp.close(&mut a.res);
                wait_until(&mut [&mut a, &mut b], T, |e| {
                    e[0].qp.state() == State::Closed && e[0].tx_idle()
                })
                .unwrap();
                a.shutdown();
                wait_until(&mut [&mut a, &mut b], T, |e| e[1].is_eof()).unwrap();
            }
        }
    }
}

#[test]
fn mpa_rev1_client_server() {
    let o = Options {
        enhanced: false,
        p2p: None,
        crc: CrcPolicy::IfPeerAsks,
        ..Options::default()
    };
    let (mut a, mut b) = pair(&o, &o);
    assert!(!a.qp.framing().crc);
    all_ops(&mut a, &mut b);
}

fn terminate_case(setup: impl FnOnce(&mut Endpoint, &mut Endpoint), want: TermError) {
    let o = Options {
        emss: 1000,
        ..Options::default()
    };
    let (mut a, mut b) = pair(&o, &o);
    a.post_recv(16);
    setup(&mut a, &mut b);
    // A later request that must be flushed, not lost.
    let later = a.post_send(
        SendOp::Send { invalidate: None },
        0,
        Local::default(),
        Flags::NONE,
    );
    wait_until(&mut [&mut a, &mut b], T, |e| {
        e[0].terminate_received().is_some()
    })
    .unwrap();
    wait_until(&mut [&mut a, &mut b], T, |e| {
        e[0].res.cq.iter().any(|c| c.wr_id == later)
    })
    .unwrap();
    assert_eq!(b.local_terminate(), Some(want));
    let t = a.terminate_received().unwrap();
    assert_eq!(t.error, want);
    assert_eq!((a.qp.state(), b.qp.state()), (State::Error, State::Error));
    let sends = a
        .res
        .cq
        .iter()
        .filter(|c| c.queue == WorkQueue::Send)
        .count();
    assert_eq!(sends, 2, "{:?}", a.res.cq);
    assert!(a
        .res
        .cq
        .iter()
        .any(|c| c.queue == WorkQueue::Recv && c.status == Status::Flushed));
    // Posting to the failed QP completes with a flush at once.
    let id = a.post_send(
        SendOp::Send { invalidate: None },
        0,
        Local::default(),
        Flags::NONE,
    );
    assert_eq!(
        a.res.cq.last().map(|c| (c.wr_id, c.status)),
        Some((id, Status::Flushed))
    );
}

#[test]
fn terminate_bad_stag() {
    terminate_case(
        |a, _| {
            let s = a.reg_mr(0, 64, all_access());
            a.post_send(
                SendOp::Write {
                    remote: Remote {
                        stag: 0x4242,
                        to: 0,
                    },
                },
                8,
                local(s, 0),
                Flags::NONE,
            );
        },
        ddp::T_INVALID_STAG,
    );
}

#[test]
fn terminate_bounds() {
    terminate_case(
        |a, b| {
            let s = a.reg_mr(0, 64, all_access());
            let t = b.reg_mr(0x1000, 16, all_access());
            a.post_send(
                SendOp::Write {
                    remote: Remote {
                        stag: t,
                        to: 0x1008,
                    },
                },
                9,
                local(s, 0),
                Flags::NONE,
            );
        },
        ddp::T_BASE_BOUNDS,
    );
}

#[test]
fn terminate_access() {
    terminate_case(
        |a, b| {
            let s = a.reg_mr(0, 64, all_access());
            let t = b.reg_mr(0x1000, 16, rsiw_engine::ddp::Access::REMOTE_READ);
            a.post_send(
                SendOp::Write {
                    remote: Remote {
                        stag: t,
                        to: 0x1000,
                    },
                },
                8,
                local(s, 0),
                Flags::NONE,
            );
        },
        rdmap::ACCESS,
    );
}

#[test]
fn terminate_read_source_access() {
    terminate_case(
        |a, b| {
            let s = a.reg_mr(0, 64, all_access());
            let t = b.reg_mr(0x1000, 16, rsiw_engine::ddp::Access::REMOTE_WRITE);
            a.post_send(
                SendOp::Read {
                    remote: Remote {
                        stag: t,
                        to: 0x1000,
                    },
                },
                8,
                local(s, 0),
                Flags::NONE,
            );
        },
        rdmap::ACCESS,
    );
}

#[test]
fn terminate_no_posted_receive() {
    terminate_case(
        |a, _| {
            let s = a.reg_mr(0, 64, all_access());
            a.post_send(
                SendOp::Send { invalidate: None },
                8,
                local(s, 0),
                Flags::NONE,
            );
        },
        ddp::U_NO_BUFFER,
    );
}

#[test]
fn terminate_misaligned_atomic() {
    terminate_case(
        |a, b| {
            let s = a.reg_mr(0, 64, all_access());
            let t = b.reg_mr(0x1000, 64, all_access());
            let op = SendOp::Atomic {
                op: AtomicOp::FetchAdd,
                remote: Remote {
                    stag: t,
                    to: 0x1004,
                },
                add_swap: 1,
                add_swap_mask: 0,
                compare: 0,
                compare_mask: 0,
            };
            a.post_send(op, 0, local(s, 0), Flags::NONE);
        },
        rdmap::CATA_STREAM,
    );
}

#[test]
fn terminate_unsupported_aopcode() {
    terminate_case(
        |a, b| {
            let s = a.reg_mr(0, 64, all_access());
            let t = b.reg_mr(0x1000, 64, all_access());
            let op = SendOp::Atomic {
                op: AtomicOp::Unsupported(1),
                remote: Remote {
                    stag: t,
                    to: 0x1000,
                },
                add_swap: 1,
                add_swap_mask: 0,
                compare: 0,
                compare_mask: 0,
            };
            a.post_send(op, 0, local(s, 0), Flags::NONE);
        },
        rdmap::UNEXPECTED_OPCODE,
    );
}

#[test]
fn connection_loss_flushes() {
    let (mut a, mut b) = pair(&Options::default(), &Options::default());
    let s = a.reg_mr(0, 64, all_access());
    let t = b.reg_mr(0, 64, all_access());
    a.post_recv(8);
    b.shutdown();
    drop(b);
    a.post_send(
        SendOp::Read {
            remote: Remote { stag: t, to: 0 },
        },
        8,
        local(s, 0),
        Flags::NONE,
    );
    wait_until(&mut [&mut a], T, |e| e[0].is_eof()).unwrap();
    assert!(a.res.events.contains(&Event::ConnectionLost));
    assert_eq!(a.res.cq.len(), 2);
    assert!(a.res.cq.iter().all(|c| c.status == Status::Flushed));
}

#[test]
fn unusable_reply_goes_out_in_a_terminate() {
    // RFC 6581 9: the initiator never uses CRC, the responder requires it:
    // the initiator's startup machine sends LLP error 5 in a Terminate,
    // framed with the CRC the Reply negotiated, and the responder's stream
    // receives it.
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let init = Options {
        crc: CrcPolicy::Never,
        p2p: None,
        ..Options::default()
    };
    let resp = Options {
        crc: CrcPolicy::Required,
        p2p: None,
        ..Options::default()
    };
    let mut a = Endpoint::connect(l.local_addr().unwrap(), &init).unwrap();
    let mut b = Endpoint::accept(&l, &resp).unwrap();
    wait_until(&mut [&mut a, &mut b], T, |e| {
        e[0].is_done() && e[0].tx_idle() && e[1].terminate_received().is_some()
    })
    .unwrap();
    assert!(a.params.is_none());
    assert_eq!(
        a.local_terminate(),
        Some(rsiw_engine::error::llp::LOCAL_CATA)
    );
    assert_eq!(
        b.terminate_received().map(|t| t.error.to_bits()),
        Some(0x2305)
    );
    assert!(b.params.is_some_and(|p| p.framing.crc));
}
