// SPDX-License-Identifier: GPL-2.0
//! Arbitrary bytes as a DDP segment: decode, then every validation path
//! against a small STag table. Also parses the bytes directly as each
//! RDMAP header, and checks two oracles: a Terminate built for the bytes
//! decodes back to itself, and the fast masked FetchAdd equals the RFC
//! 7306 pseudocode.
#![no_main]

use libfuzzer_sys::fuzz_target;
use rsiw_engine::ddp::{Access, RecvQueues, Region, Segmenter, StagTable, UntaggedRx};
use rsiw_engine::error::TermError;
use rsiw_engine::rdmap::{self, Body, Irq, Orq, RequestQueue};
use rsiw_engine::wire::{atomic, commit, ddp::Model, immediate, terminate};

const PD: u32 = 1;

struct Table;

impl StagTable for Table {
    fn lookup(&self, stag: u32) -> Option<Region> {
        let all = Access::REMOTE_WRITE
            | Access::REMOTE_READ
            | Access::REMOTE_ATOMIC
            | Access::LOCAL_WRITE
            | Access::COMMIT;
        match stag & 0xFF {
            0 => None,
            1 => Some(Region {
                base_to: 0,
                len: 1 << 16,
                access: all,
                pd: PD,
                valid: true,
                durable: true,
                reg: u64::from(stag),
            }),
            2 => Some(Region {
                base_to: u64::MAX - 0xFFFF,
                len: 0x10000,
                access: all,
                pd: PD,
                valid: true,
                durable: false,
                reg: u64::from(stag),
            }),
            3 => Some(Region {
                base_to: 0x1000,
                len: 0x1000,
                access: Access::REMOTE_READ,
                pd: PD,
                valid: true,
                durable: false,
                reg: u64::from(stag),
            }),
            4 => Some(Region {
                base_to: 0x1000,
                len: 0x1000,
                access: all,
                pd: 2,
                valid: true,
                durable: false,
                reg: u64::from(stag),
            }),
            _ => Some(Region {
                base_to: 0,
                len: u64::MAX,
                access: all,
                pd: PD,
                valid: false,
                durable: false,
                reg: u64::from(stag),
            }),
        }
    }
}

struct Bufs;

impl RecvQueues for Bufs {
    fn posted_len(&self, qn: u32) -> Option<u32> {
        [Some(1024), Some(64), Some(128), None]
            .get(qn as usize)
            .copied()
            .flatten()
    }
}

fn check(data: &[u8]) -> Result<(), TermError> {
    let m = rdmap::decode(data)?;
    let mut irq: Irq<4> = RequestQueue::new(2);
    let mut orq: Orq<4> = RequestQueue::new(2);
    match m.ddp.model {
        Model::Tagged { stag, to } => {
            let len = u32::try_from(m.payload.len()).unwrap_or(u32::MAX);
            let _ = rdmap::validate_write(&Table, PD, stag, to, len);
            let _ = orq.on_read_response(stag, to, len, m.ddp.last);
            rdmap::validate_read_response(&Table, PD, stag, to, len)?;
        }
        Model::Untagged { .. } => {
            let mut rx = UntaggedRx::new();
            let _ = rx.accept(&m.ddp, m.ddp_payload_len, &Bufs);
            if let Some(stag) = m.invalidate_stag() {
                let _ = rdmap::validate_invalidate(&Table, PD, stag);
            }
        }
    }
    match m.body {
        Body::ReadRequest(r) => {
            let plan = rdmap::validate_read_request(&r, &Table, PD, &mut irq)?;
            let segs = plan.segments(1 + (r.size as usize % 3000).max(14))?;
            assert!(segs
                .take(4)
                .all(|(h, range)| range.len() <= 3000 && h.buffer_len() == 14));
        }
        Body::AtomicRequest(r) => {
            let plan = rdmap::validate_atomic(&r, &Table, PD)?;
            let (_, orig) = rdmap::atomic_execute(r.to, &plan.request)?;
            assert_eq!(orig, r.to);
        }
        Body::CommitRequest(v) => {
            let plan = rdmap::validate_commit(&v, &Table, PD, &mut irq)?;
            let _ = plan.flushes().count();
            assert_eq!(plan.response(true).request_id, v.request_id());
        }
        Body::AtomicResponse(r) => {
            let _ = orq.on_atomic_response(&r);
        }
        Body::CommitResponse(r) => {
            let _ = orq.on_commit_response(&r);
        }
        Body::Terminate(_) | Body::Immediate(_) | Body::Data => {}
    }
    Ok(())
}

fuzz_target!(|data: &[u8]| {
    let result = check(data);

    // Direct header parsers on the raw bytes.
    if let Ok(h) = terminate::Header::new_checked(data) {
        let _ = terminate::Repr::parse(&h);
    }
    if let Ok(v) = atomic::Request::new_checked(data) {
        let _ = atomic::RequestRepr::parse(&v);
    }
    if let Ok(v) = commit::Request::new_checked(data) {
        let _ = commit::RequestRepr::parse(&v);
        let _ = v.regions().count();
    }
    if let Ok(v) = immediate::Header::new_checked(data) {
        let _ = immediate::Repr::parse(&v);
    }

    // Oracle 1: the Terminate for this segment's error decodes to itself.
    let err = result
        .err()
        .unwrap_or(rsiw_engine::error::rdmap::OP_UNSPECIFIED);
    let t = terminate::Repr::for_error(err, Some(data));
    let mut out = [0u8; 128];
    let n = t.emit_segment(1, &mut out).expect("terminate fits");
    match rdmap::decode(&out[..n])
        .expect("own terminate decodes")
        .body
    {
        Body::Terminate(back) => assert_eq!(back, t),
        other => panic!("not a terminate: {other:?}"),
    }

    // Oracle 2: fast masked FetchAdd == RFC pseudocode; segmentation covers.
    if let Some(w) = data.get(..24) {
        let word = |i: usize| u64::from_be_bytes(w[i..i + 8].try_into().unwrap());
        let (a, b, m) = (word(0), word(8), word(16));
        assert_eq!(
            rdmap::fetch_add_masked(a, b, m),
            rdmap::fetch_add_masked_rfc(a, b, m)
        );
        let len = (a % 100_000) as u32;
        // At most ~256 segments: a long message split into tiny segments
        // adds nothing but time (it was 85% of this target's time).
        let mulpdu = (19 + (b % 9000) as usize).max(len as usize / 256);
        if let Ok(s) = Segmenter::untagged(0x43, 0, 0, 1, len, mulpdu) {
            let mut next = 0;
            for (h, r) in s {
                assert_eq!(r.start, next);
                assert!(h.buffer_len() + r.len() <= mulpdu);
                next = r.end;
            }
            assert_eq!(next, len as usize);
        }
    }
});
