// SPDX-License-Identifier: GPL-2.0
//! Decode + validate cost per DDP/RDMAP header: tagged RDMA Write, untagged
//! Send, RDMA Read Request and Atomic Request (FetchAdd including the
//! masked read-modify-write). Run: `cargo bench -p rsiw-engine --bench decode`.

use core::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion};
use rsiw_engine::ddp::{Access, RecvQueues, Region, StagTable, UntaggedRx};
use rsiw_engine::rdmap::{self, Body, Irq, RequestQueue};
use rsiw_engine::wire::atomic::{Request as AtomicView, RequestRepr as AtomicReq};
use rsiw_engine::wire::ddp::{Model, Repr as DdpRepr, Segment};
use rsiw_engine::wire::rdmap::{Control, Opcode, ReadRequest, ReadRequestRepr};

const PD: u32 = 7;

struct Table;

impl StagTable for Table {
    fn lookup(&self, stag: u32) -> Option<Region> {
        (stag == 0x100).then_some(Region {
            base_to: 0x10_0000,
            len: 1 << 20,
            access: Access::REMOTE_WRITE | Access::REMOTE_READ | Access::REMOTE_ATOMIC,
            pd: PD,
            valid: true,
            durable: false,
            reg: 1,
        })
    }
}

struct Bufs;

impl RecvQueues for Bufs {
    fn posted_len(&self, _qn: u32) -> Option<u32> {
        Some(4096)
    }
}

fn build(hdr: DdpRepr, rest: &[u8]) -> Vec<u8> {
    let mut b = vec![0u8; hdr.buffer_len() + rest.len()];
    hdr.emit(&mut Segment::new_unchecked(&mut b[..]));
    b[hdr.buffer_len()..].copy_from_slice(rest);
    b
}

fn untagged(op: Opcode, qn: u32) -> DdpRepr {
    DdpRepr {
        last: true,
        ulp_ctrl: Control::new(op).to_byte(),
        model: Model::Untagged {
            rsvd_ulp: 0,
            qn,
            msn: 1,
            mo: 0,
        },
    }
}

fn benches(c: &mut Criterion) {
    let write = build(
        DdpRepr {
            last: true,
            ulp_ctrl: Control::new(Opcode::Write).to_byte(),
            model: Model::Tagged {
                stag: 0x100,
                to: 0x10_0040,
            },
        },
        &[0u8; 1024],
    );
    c.bench_function("tagged Write: decode+validate", |b| {
        b.iter(|| {
            let m = rdmap::decode(black_box(&write)).unwrap();
            let Model::Tagged { stag, to } = m.ddp.model else {
                unreachable!()
            };
            black_box(rdmap::validate_write(&Table, PD, stag, to, m.payload.len() as u32).unwrap())
        })
    });

    let send = build(untagged(Opcode::Send, 0), &[0u8; 1024]);
    c.bench_function("untagged Send: decode+validate", |b| {
        b.iter(|| {
            let m = rdmap::decode(black_box(&send)).unwrap();
            let mut rx = UntaggedRx::new();
            black_box(rx.accept(&m.ddp, m.ddp_payload_len, &Bufs).unwrap())
        })
    });

    let mut rr = [0u8; 28];
    ReadRequestRepr {
        sink_stag: 9,
        sink_to: 0,
        size: 4096,
        src_stag: 0x100,
        src_to: 0x10_0000,
    }
    .emit(&mut ReadRequest::new_unchecked(&mut rr[..]));
    let rreq = build(untagged(Opcode::ReadRequest, 1), &rr);
    let mut irq: Irq<16> = RequestQueue::new(16);
    c.bench_function("Read Request: decode+validate", |b| {
        b.iter(|| {
            let m = rdmap::decode(black_box(&rreq)).unwrap();
            let Body::ReadRequest(r) = m.body else {
                unreachable!()
            };
            let plan = rdmap::validate_read_request(&r, &Table, PD, &mut irq).unwrap();
            irq.pop();
            black_box(plan)
        })
    });

    let mut ar = [0u8; 52];
    AtomicReq::fetch_add(3, 0x100, 0x10_0008, 1, 0x8000_0000_8000_0000)
        .emit(&mut AtomicView::new_unchecked(&mut ar[..]));
    let areq = build(untagged(Opcode::AtomicRequest, 1), &ar);
    c.bench_function("Atomic Request: decode+validate+RMW", |b| {
        b.iter(|| {
            let m = rdmap::decode(black_box(&areq)).unwrap();
            let Body::AtomicRequest(r) = m.body else {
                unreachable!()
            };
            let plan = rdmap::validate_atomic(&r, &Table, PD).unwrap();
            black_box(
                rdmap::atomic_execute(black_box(0x1234_5678_FFFF_FFFF), &plan.request).unwrap(),
            )
        })
    });
}

criterion_group!(decode, benches);
criterion_main!(decode);
