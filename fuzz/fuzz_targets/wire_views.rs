// SPDX-License-Identifier: GPL-2.0
//! Every wire view (`rsiw_engine::wire::*`) on the same arbitrary bytes:
//! the checked constructor, every getter, and for each header with a
//! `Repr` the round trip parse → emit → parse, which must be stable: the
//! second parse equals the first and a second emit writes the same octets
//! (the emitted form is canonical). Views: FPDU (with and without CRC),
//! MPA Request/Reply and the enhanced IRD/ORD, DDP tagged/untagged, RDMAP
//! Read Request, Terminate, Atomic Request/Response, Commit
//! Request/Response, Immediate Data.
#![no_main]

use libfuzzer_sys::fuzz_target;
use rsiw_engine::crc::SoftCrc32c;
use rsiw_engine::wire::{atomic, commit, ddp, fpdu, immediate, mpa, rdmap, terminate};

/// Emits `r` through `emit` into a zeroed buffer of `len` octets, parses it
/// back with `parse`, checks the result equals `r`, and that emitting it
/// again gives the same octets.
fn round_trip<R: PartialEq + core::fmt::Debug>(
    r: &R,
    len: usize,
    emit: impl Fn(&R, &mut [u8]),
    parse: impl Fn(&[u8]) -> R,
) {
    let mut a = vec![0u8; len];
    emit(r, &mut a);
    let back = parse(&a);
    assert_eq!(&back, r, "parse(emit(r)) != r, octets {a:02x?}");
    let mut b = vec![0xA5u8; len];
    emit(&back, &mut b);
    assert_eq!(a, b, "emit is not canonical");
}

fn fpdu_view(data: &[u8]) {
    let Ok(f) = fpdu::Frame::new_checked(data) else {
        return;
    };
    let _ = (f.ulpdu_len(), f.total_len(), f.ulpdu(), f.pad(), f.crc());
    for crc in [None, Some(&SoftCrc32c)] {
        let Ok(r) = fpdu::Repr::parse(&f, crc) else {
            continue;
        };
        assert_eq!(r.ulpdu, f.ulpdu());
        let mut out = vec![0u8; r.buffer_len()];
        r.emit(&mut fpdu::Frame::new_unchecked(&mut out[..]), crc)
            .expect("emit fits");
        let f2 = fpdu::Frame::new_checked(&out[..]).expect("own FPDU checks");
        assert_eq!(f2.total_len(), out.len());
        if crc.is_some() {
            assert!(f2.check_crc(&SoftCrc32c), "own CRC wrong");
        }
        let r2 = fpdu::Repr::parse(&f2, crc).expect("own FPDU parses");
        assert_eq!(r2, r);
        assert!(f2.pad().iter().all(|&b| b == 0));
    }
}

fn mpa_view(data: &[u8]) {
    for kind in [mpa::Kind::Request, mpa::Kind::Reply] {
        if let Ok(Some(n)) = mpa::frame_len(data, kind) {
            assert!(n >= mpa::HEADER_LEN);
        }
    }
    if let Ok(e) = mpa::Enhanced::parse(data) {
        let mut out = [0u8; mpa::ENHANCED_LEN];
        e.emit(&mut out).expect("parsed IRD/ORD fit 14 bits");
        assert_eq!(mpa::Enhanced::parse(&out), Ok(e));
    }
    let Ok(f) = mpa::Frame::new_checked(data) else {
        return;
    };
    let _ = (
        f.key(),
        f.kind(),
        f.marker_flag(),
        f.crc_flag(),
        f.reject_flag(),
    );
    let _ = (
        f.enhanced_flag(),
        f.reserved(),
        f.rev(),
        f.pd_len(),
        f.total_len(),
    );
    let _ = f.private_data();
    let Ok(r) = mpa::Repr::parse(&f) else { return };
    let mut a = vec![0u8; r.buffer_len()];
    assert_eq!(r.emit_bytes(&mut a), Ok(a.len()));
    let r2 = mpa::Repr::parse_bytes(&a).expect("own frame parses");
    assert_eq!(r2, r);
    let mut b = vec![0xA5u8; r.buffer_len()];
    assert_eq!(r2.emit_bytes(&mut b), Ok(b.len()));
    assert_eq!(a, b);
}

fn ddp_view(data: &[u8]) {
    let Ok(s) = ddp::Segment::new_checked(data) else {
        return;
    };
    let _ = (
        s.tagged(),
        s.last(),
        s.version(),
        s.rsvd_ulp(),
        s.header_len(),
    );
    let _ = (
        s.stag(),
        s.to(),
        s.rsvd_ulp32(),
        s.qn(),
        s.msn(),
        s.mo(),
        s.payload(),
    );
    assert_eq!(s.header_len() + s.payload().len(), data.len());
    let Ok(r) = ddp::Repr::parse(&s) else { return };
    assert_eq!(r.buffer_len(), s.header_len());
    round_trip(
        &r,
        r.buffer_len(),
        |r, b| r.emit(&mut ddp::Segment::new_unchecked(b)),
        |b| ddp::Repr::parse(&ddp::Segment::new_checked(b).unwrap()).unwrap(),
    );
}

fn rdmap_view(data: &[u8]) {
    let c = rdmap::Control::from_byte(data.first().copied().unwrap_or(0));
    assert_eq!(rdmap::Control::from_byte(c.to_byte()), c);
    if let Some(op) = rdmap::Opcode::from_u8(c.opcode) {
        let _ = (
            op.tagged(),
            op.queue(),
            op.carries_invalidate_stag(),
            op.solicited(),
        );
        let _ = (op.single_segment(), op.header_len());
    }
    let Ok(v) = rdmap::ReadRequest::new_checked(data) else {
        return;
    };
    let r = rdmap::ReadRequestRepr::parse(&v);
    assert_eq!(
        (r.sink_stag, r.size, r.src_to),
        (v.sink_stag(), v.size(), v.src_to())
    );
    round_trip(
        &r,
        r.buffer_len(),
        |r, b| r.emit(&mut rdmap::ReadRequest::new_unchecked(b)),
        |b| rdmap::ReadRequestRepr::parse(&rdmap::ReadRequest::new_checked(b).unwrap()),
    );
}

fn terminate_view(data: &[u8]) {
    let Ok(h) = terminate::Header::new_checked(data) else {
        return;
    };
    let _ = (h.error(), h.m(), h.d(), h.r(), h.segment_len());
    let _ = (h.terminated_ddp_header(), h.terminated_rdma_header());
    let Ok(r) = terminate::Repr::parse(&h) else {
        return;
    };
    assert!(r.buffer_len() <= terminate::MAX_LEN);
    round_trip(
        &r,
        r.buffer_len(),
        |r, b| r.emit(b),
        |b| terminate::Repr::parse(&terminate::Header::new_checked(b).unwrap()).unwrap(),
    );
    // As a whole segment, it decodes through RDMAP to the same Terminate.
    let mut seg = [0u8; 128];
    if let Some(n) = r.emit_segment(7, &mut seg) {
        match rsiw_engine::rdmap::decode(&seg[..n])
            .expect("own Terminate decodes")
            .body
        {
            rsiw_engine::rdmap::Body::Terminate(back) => assert_eq!(back, r),
            other => panic!("not a Terminate: {other:?}"),
        }
    }
}

fn atomic_view(data: &[u8]) {
    if let Ok(v) = atomic::Request::new_checked(data) {
        let _ = (v.op(), v.request_id(), v.stag(), v.to(), v.add_swap());
        let _ = (v.add_swap_mask(), v.compare(), v.compare_mask());
        let r = atomic::RequestRepr::parse(&v);
        assert_eq!(atomic::AtomicOp::from_bits(r.op.to_bits()), r.op);
        round_trip(
            &r,
            r.buffer_len(),
            |r, b| r.emit(&mut atomic::Request::new_unchecked(b)),
            |b| atomic::RequestRepr::parse(&atomic::Request::new_checked(b).unwrap()),
        );
    }
    if let Ok(v) = atomic::Response::new_checked(data) {
        let r = atomic::ResponseRepr::parse(&v);
        assert_eq!((r.request_id, r.original), (v.request_id(), v.original()));
        round_trip(
            &r,
            r.buffer_len(),
            |r, b| r.emit(&mut atomic::Response::new_unchecked(b)),
            |b| atomic::ResponseRepr::parse(&atomic::Response::new_checked(b).unwrap()),
        );
    }
}

fn commit_view(data: &[u8]) {
    if let Ok(v) = commit::Request::new_checked(data) {
        let n = v.region_count();
        assert_eq!(v.regions().count(), n);
        let _ = v.request_id();
        match commit::RequestRepr::parse(&v) {
            Ok(r) => {
                assert!((1..=commit::MAX_REGIONS).contains(&n));
                assert_eq!(r.regions().len(), n);
                assert_eq!(commit::RequestRepr::new(r.request_id, r.regions()), Some(r));
                round_trip(
                    &r,
                    r.buffer_len(),
                    |r, b| r.emit(&mut commit::Request::new_unchecked(b)),
                    |b| {
                        commit::RequestRepr::parse(&commit::Request::new_checked(b).unwrap())
                            .unwrap()
                    },
                );
            }
            Err(_) => assert!(n > commit::MAX_REGIONS),
        }
    }
    if let Ok(v) = commit::Response::new_checked(data) {
        let r = commit::ResponseRepr::parse(&v);
        assert_eq!((r.request_id, r.status), (v.request_id(), v.status()));
        assert_eq!(commit::Status::from_u32(r.status.to_u32()), r.status);
        round_trip(
            &r,
            r.buffer_len(),
            |r, b| r.emit(&mut commit::Response::new_unchecked(b)),
            |b| commit::ResponseRepr::parse(&commit::Response::new_checked(b).unwrap()),
        );
    }
}

fn immediate_view(data: &[u8]) {
    let Ok(h) = immediate::Header::new_checked(data) else {
        return;
    };
    let r = immediate::Repr::parse(&h);
    assert_eq!(r, immediate::Repr::parse(&h));
    let _ = (h.data(), r.imm32());
    assert_eq!(immediate::Repr::from_imm32(r.imm32()).imm32(), r.imm32());
    round_trip(
        &r,
        r.buffer_len(),
        |r, b| r.emit(&mut immediate::Header::new_unchecked(b)),
        |b| immediate::Repr::parse(&immediate::Header::new_checked(b).unwrap()),
    );
}

fuzz_target!(|data: &[u8]| {
    fpdu_view(data);
    mpa_view(data);
    ddp_view(data);
    rdmap_view(data);
    terminate_view(data);
    atomic_view(data);
    commit_view(data);
    immediate_view(data);
});
