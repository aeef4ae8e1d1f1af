// SPDX-License-Identifier: GPL-2.0
//! Decode and responder tests (RFC 5040 sections 4 to 7, RFC 7306) with
//! hand-built segments.

use super::*;
use crate::ddp::tagged_tests::{Table, PD};
use crate::ddp::{RecvQueues, UntaggedRx};
use crate::wire::commit::Status;
use proptest::prelude::*;

/// Builds a segment from a DDP header and the octets after it.
fn seg(ddp: ddpw::Repr, rest: &[u8]) -> ([u8; 128], usize) {
    let mut b = [0u8; 128];
    let h = ddp.buffer_len();
    ddp.emit(&mut Segment::new_unchecked(&mut b[..]));
    b[h..h + rest.len()].copy_from_slice(rest);
    (b, h + rest.len())
}

fn untagged(op: Opcode, qn: u32, rsvd_ulp: u32, rest: &[u8]) -> ([u8; 128], usize) {
    let ulp_ctrl = Control::new(op).to_byte();
    seg(
        ddpw::Repr {
            last: true,
            ulp_ctrl,
            model: Model::Untagged {
                rsvd_ulp,
                qn,
                msn: 1,
                mo: 0,
            },
        },
        rest,
    )
}

#[test]
fn golden_write_segment() {
    // RFC 5040 4.2 / RFC 5041 4.3: Write, L, STag 0x100, TO 0x1000, "hi".
    let b = [
        0xC1, 0x40, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0x10, 0, b'h', b'i',
    ];
    let m = decode(&b).unwrap();
    assert_eq!(m.opcode, Opcode::Write);
    assert_eq!(m.body, Body::Data);
    assert_eq!(m.payload, b"hi");
    let Model::Tagged { stag, to } = m.ddp.model else {
        panic!()
    };
    assert_eq!(validate_write(&Table, PD, stag, to, 2).unwrap().to, 0x1000);
}

#[test]
fn golden_send_with_invalidate() {
    // Send with SE and Invalidate (0110b): ctrl 0x46, Invalidate STag 0x200.
    let b = [
        0x41, 0x46, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, b'x',
    ];
    let m = decode(&b).unwrap();
    assert_eq!(m.opcode, Opcode::SendSeInvalidate);
    assert!(m.opcode.solicited());
    assert_eq!(m.invalidate_stag(), Some(0x200));
    assert_eq!(
        validate_invalidate(&Table, PD, 0x200),
        Err(error::rdmap::CANT_INVALIDATE)
    );
    assert_eq!(
        validate_invalidate(&Table, PD, 0x999),
        Err(error::rdmap::CANT_INVALIDATE)
    );
    assert_eq!(
        validate_invalidate(&Table, PD, 0x300),
        Err(error::rdmap::STAG_NOT_ASSOC)
    );
    assert_eq!(validate_invalidate(&Table, PD, 0x100), Ok(0x100));
    struct Q;
    impl RecvQueues for Q {
        fn posted_len(&self, qn: u32) -> Option<u32> {
            (qn == 0).then_some(1)
        }
    }
    let p = UntaggedRx::new()
        .accept(&m.ddp, m.ddp_payload_len, &Q)
        .unwrap();
    assert_eq!((p.len, p.last), (1, true));
}

#[test]
fn golden_read_request_and_plan() {
    // Read Request (RFC 5040 4.4): ctrl 0x41 0x41, QN 1, MSN 1, MO 0; sink
    // STag 0xAB, sink TO 0x10, size 0x1000, source STag 0x100, TO 0x1000.
    let b = [
        0x41, 0x41, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 0, //
        0, 0, 0, 0xAB, 0, 0, 0, 0, 0, 0, 0, 0x10, 0, 0, 0x10, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0,
        0x10, 0,
    ];
    let m = decode(&b).unwrap();
    let Body::ReadRequest(r) = m.body else {
        panic!()
    };
    let mut irq: Irq<4> = RequestQueue::new(1);
    let plan = validate_read_request(&r, &Table, PD, &mut irq).unwrap();
    assert_eq!(
        plan,
        ReadResponsePlan {
            sink_stag: 0xAB,
            sink_to: 0x10,
            src_stag: 0x100,
            src_to: 0x1000,
            len: 0x1000,
            src_reg: 0x100,
        }
    );
    // IRD 1 is used up until the response has been sent. RFC 5040 puts
    // Read Requests on untagged QN 1, whose "buffers" are the IRD slots;
    // RFC 5041 section 7.1 item 2 has DDP check that "the QN and MSN have
    // an associated buffer that allows Placement of the payload", failing
    // with 0x2/0x02 "Invalid MSN - no buffer available" (section 7.2). The
    // MSN itself is in sequence, so not 0x03 "MSN range is not valid".
    // (siw sends RDMAP 0x2/0x07 "Catastrophic error, localized to RDMAP
    // Stream"; Chelsio maps running out of RQEs to 0x2/0x02 as well.)
    assert_eq!(
        validate_read_request(&r, &Table, PD, &mut irq),
        Err(error::ddp::U_NO_BUFFER)
    );
    let segs: std::vec::Vec<_> = plan.segments(1000).unwrap().collect();
    assert_eq!(segs.len(), 5);
    assert_eq!(segs[0].0.ulp_ctrl, 0x42);
    assert!(segs[4].0.last);
    assert_eq!(irq.pop(), Some(InboundRequest::Read(plan)));
}

#[test]
fn read_request_errors() {
    let mut irq: Irq<4> = RequestQueue::new(4);
    let ok = ReadRequestRepr {
        sink_stag: 1,
        sink_to: 0,
        size: 16,
        src_stag: 0x100,
        src_to: 0x1000,
    };
    let e = |r: ReadRequestRepr, irq: &mut Irq<4>| validate_read_request(&r, &Table, PD, irq).err();
    assert_eq!(
        e(
            ReadRequestRepr {
                src_stag: 0x999,
                ..ok
            },
            &mut irq
        ),
        Some(error::rdmap::INVALID_STAG)
    );
    assert_eq!(
        e(
            ReadRequestRepr {
                src_stag: 0x300,
                ..ok
            },
            &mut irq
        ),
        Some(error::rdmap::STAG_NOT_ASSOC)
    );
    assert_eq!(
        e(
            ReadRequestRepr {
                src_to: 0x1FF8,
                ..ok
            },
            &mut irq
        ),
        Some(error::rdmap::BASE_BOUNDS)
    );
    assert_eq!(
        e(
            ReadRequestRepr {
                sink_to: u64::MAX,
                ..ok
            },
            &mut irq
        ),
        Some(error::rdmap::TO_WRAP)
    );
    assert_eq!(
        e(
            ReadRequestRepr {
                src_stag: 0x500,
                src_to: u64::MAX - 3,
                ..ok
            },
            &mut irq
        ),
        Some(error::rdmap::TO_WRAP)
    );
    // Zero-length: no table check.
    assert!(validate_read_request(
        &ReadRequestRepr {
            src_stag: 0x999,
            size: 0,
            ..ok
        },
        &Table,
        PD,
        &mut irq
    )
    .is_ok());
    // Failed requests took no credit.
    assert_eq!(irq.len(), 1);
}

#[test]
fn atomic_request_flow() {
    let req = crate::wire::atomic::RequestRepr::fetch_add(9, 0x600, 0x8000, 1, 0);
    let mut body = [0u8; 52];
    req.emit(&mut crate::wire::atomic::Request::new_unchecked(
        &mut body[..],
    ));
    let (b, n) = untagged(Opcode::AtomicRequest, qn::READ_REQUEST, 0, &body);
    let m = decode(&b[..n]).unwrap();
    let Body::AtomicRequest(r) = m.body else {
        panic!()
    };
    let plan = validate_atomic(&r, &Table, PD).unwrap();
    assert_eq!(atomic_execute(41, &plan.request), Ok((Some(42), 41)));
    // Wrong length: 51 octets.
    let (b, n) = untagged(Opcode::AtomicRequest, qn::READ_REQUEST, 0, &body[..51]);
    assert_eq!(decode(&b[..n]).err(), Some(MALFORMED));
}

#[test]
fn commit_flow_and_statuses() {
    let regions = [
        crate::wire::commit::Region {
            stag: 0x600,
            len: 0x10,
            to: 0x8000,
        },
        crate::wire::commit::Region {
            stag: 0x100,
            len: 0x10,
            to: 0x1000,
        },
    ];
    let req = crate::wire::commit::RequestRepr::new(77, &regions).unwrap();
    let mut body = [0u8; 36];
    req.emit(&mut crate::wire::commit::Request::new_unchecked(
        &mut body[..],
    ));
    let (b, n) = untagged(Opcode::CommitRequest, qn::READ_REQUEST, 0, &body);
    let m = decode(&b[..n]).unwrap();
    assert_eq!(m.invalidate_stag(), None);
    let Body::CommitRequest(v) = m.body else {
        panic!()
    };
    let mut irq: Irq<4> = RequestQueue::new(2);
    let plan = validate_commit(&v, &Table, PD, &mut irq).unwrap();
    assert_eq!(plan.status, Status::Success);
    // Both regions are committed (durable or only visible: the host's call).
    let f: std::vec::Vec<_> = plan.flushes().collect();
    assert_eq!(f, regions);
    assert_eq!(
        plan.response(true),
        crate::wire::commit::ResponseRepr {
            request_id: 77,
            status: Status::Success
        }
    );
    assert_eq!(plan.response(false).status, Status::NotDurable);

    let status = |r: crate::wire::commit::Region, irq: &mut Irq<4>| {
        let req = crate::wire::commit::RequestRepr::new(1, &[r]).unwrap();
        let mut body = [0u8; 20];
        req.emit(&mut crate::wire::commit::Request::new_unchecked(
            &mut body[..],
        ));
        let v = crate::wire::commit::Request::new_checked(&body[..]).unwrap();
        let p = validate_commit(&v, &Table, PD, irq).map(|p| p.status);
        irq.pop();
        p
    };
    let r = regions[1];
    assert_eq!(
        status(crate::wire::commit::Region { to: 0x1FF8, ..r }, &mut irq),
        Ok(Status::Bounds)
    );
    assert_eq!(
        status(crate::wire::commit::Region { stag: 0x999, ..r }, &mut irq),
        Ok(Status::Access)
    );
    assert_eq!(
        status(crate::wire::commit::Region { stag: 0x400, ..r }, &mut irq),
        Ok(Status::Access)
    );
    assert_eq!(
        status(crate::wire::commit::Region { stag: 0x300, ..r }, &mut irq),
        Ok(Status::Access)
    );
    let big = [0u8; 4 + 16 * 9];
    let v = crate::wire::commit::Request::new_checked(&big[..]).unwrap();
    let p = validate_commit(&v, &Table, PD, &mut irq).unwrap();
    assert_eq!(p.status, Status::Limit);
    assert_eq!(p.flushes().count(), 0);
    // IRD 2 now exhausted (first commit and the Limit one are queued).
    assert_eq!(
        validate_commit(&v, &Table, PD, &mut irq).err(),
        Some(error::ddp::U_NO_BUFFER)
    );
}

#[test]
fn commit_optional_invalidate() {
    let body = [0u8; 20];
    let (b, n) = untagged(Opcode::CommitRequest, qn::READ_REQUEST, 0x100, &body);
    assert_eq!(decode(&b[..n]).unwrap().invalidate_stag(), Some(0x100));
}

#[test]
fn immediate_and_responses() {
    let (b, n) = untagged(
        Opcode::ImmediateDataSe,
        qn::SEND,
        0,
        &[1, 2, 3, 4, 5, 6, 7, 8],
    );
    let m = decode(&b[..n]).unwrap();
    assert_eq!(
        m.body,
        Body::Immediate(crate::wire::immediate::Repr {
            data: [1, 2, 3, 4, 5, 6, 7, 8]
        })
    );
    assert_eq!(m.ddp_payload_len, 8);
    let (b, n) = untagged(Opcode::ImmediateData, qn::SEND, 0, &[1, 2, 3, 4, 5, 6, 7]);
    assert_eq!(decode(&b[..n]).err(), Some(MALFORMED));
    let (b, n) = untagged(
        Opcode::AtomicResponse,
        qn::RESPONSE,
        0,
        &[0, 0, 0, 9, 0, 0, 0, 0, 0, 0, 0, 42],
    );
    assert!(matches!(decode(&b[..n]).unwrap().body, Body::AtomicResponse(r) if r.original == 42));
    let (b, n) = untagged(
        Opcode::CommitResponse,
        qn::RESPONSE,
        0,
        &[0, 0, 0, 9, 0, 0, 0, 1],
    );
    assert!(
        matches!(decode(&b[..n]).unwrap().body, Body::CommitResponse(r) if r.status == Status::NotDurable)
    );
    let term = crate::wire::terminate::Repr::for_error(error::rdmap::CATA_STREAM, None);
    let mut tb = [0u8; 64];
    let tn = term.emit_segment(1, &mut tb).unwrap();
    assert_eq!(decode(&tb[..tn]).unwrap().body, Body::Terminate(term));
}

#[test]
fn decode_error_order() {
    // Truncated.
    assert_eq!(decode(&[0xC1, 0x40, 0, 0]).err(), Some(MALFORMED));
    // DDP version per model comes first.
    assert_eq!(
        decode(&[0x80; 14]).err(),
        Some(error::ddp::T_INVALID_VERSION)
    );
    let (mut b, n) = untagged(Opcode::Send, 7, 0, &[]);
    assert_eq!(decode(&b[..n]).err(), Some(error::ddp::U_INVALID_QN));
    b[0] = 0x42;
    assert_eq!(decode(&b[..n]).err(), Some(error::ddp::U_INVALID_VERSION));
    // RDMAP version 2, then undefined opcodes (14, and 0x10 with the 5th bit).
    let (mut b, n) = untagged(Opcode::Send, 0, 0, &[]);
    b[1] = 0x83;
    assert_eq!(decode(&b[..n]).err(), Some(error::rdmap::INVALID_VERSION));
    b[1] = 0x4E;
    assert_eq!(decode(&b[..n]).err(), Some(error::rdmap::UNEXPECTED_OPCODE));
    b[1] = 0x53;
    assert_eq!(decode(&b[..n]).err(), Some(error::rdmap::UNEXPECTED_OPCODE));
    b[1] = 0x63; // the reserved bit is ignored: a Send
    assert_eq!(decode(&b[..n]).unwrap().opcode, Opcode::Send);
    // Model and queue per opcode.
    let (b, n) = untagged(Opcode::Write, 0, 0, &[]);
    assert_eq!(decode(&b[..n]).err(), Some(error::rdmap::UNEXPECTED_OPCODE));
    let (b, n) = untagged(Opcode::Send, 1, 0, &[]);
    assert_eq!(decode(&b[..n]).err(), Some(error::rdmap::UNEXPECTED_OPCODE));
    let (b, n) = untagged(Opcode::AtomicResponse, 1, 0, &[0; 12]);
    assert_eq!(decode(&b[..n]).err(), Some(error::rdmap::UNEXPECTED_OPCODE));
    let t = ddpw::Repr {
        last: true,
        ulp_ctrl: 0x43,
        model: Model::Tagged { stag: 1, to: 0 },
    };
    let (b, n) = seg(t, &[]);
    assert_eq!(decode(&b[..n]).err(), Some(error::rdmap::UNEXPECTED_OPCODE));
    // Header-only messages are single segments.
    let r = ddpw::Repr {
        last: false,
        ulp_ctrl: 0x41,
        model: Model::Untagged {
            rsvd_ulp: 0,
            qn: 1,
            msn: 1,
            mo: 0,
        },
    };
    let (b, n) = seg(r, &[0; 28]);
    assert_eq!(decode(&b[..n]).err(), Some(MALFORMED));
    let r = ddpw::Repr {
        last: true,
        model: Model::Untagged {
            rsvd_ulp: 0,
            qn: 1,
            msn: 1,
            mo: 4,
        },
        ..r
    };
    let (b, n) = seg(r, &[0; 28]);
    assert_eq!(decode(&b[..n]).err(), Some(MALFORMED));
}

proptest! {
    #[test]
    fn decode_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..96)) {
        if let Ok(m) = decode(&bytes) {
            prop_assert!(m.ddp_payload_len + m.ddp.buffer_len() == bytes.len());
        }
    }
}
