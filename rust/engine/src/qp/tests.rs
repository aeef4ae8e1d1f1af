// SPDX-License-Identifier: GPL-2.0
//! QP state machine tests (RFC 5040, RFC 5041, RFC 7306 over RFC 5044 and
//! RFC 6581): two QPs wired back to back through an
//! in-memory byte pipe, with a mock host (Vec-backed regions, queues).

use super::*;
use crate::crc::Crc32c;
use crate::crc::SoftCrc32c;
use crate::ddp::StagTable;
use crate::ddp::{Access, Region};
use crate::error::{ddp as ddpe, llp, rdmap as rdmape};
use crate::mpa::negotiate::CrcPolicy;
use crate::mpa::Tx as MpaTx;
use crate::rdmap::AtomicPlan;
use crate::wire::atomic::AtomicOp;
use crate::wire::commit as commitw;
use crate::wire::mpa::RtrSet;
use proptest::prelude::*;
use std::collections::VecDeque;
use std::vec;
use std::vec::Vec;

#[derive(Clone, Debug)]
struct Mr {
    base: u64,
    data: Vec<u8>,
    access: Access,
    valid: bool,
    durable: bool,
    /// Registration identity (`Region::reg`): a new one on every
    /// (re-)registration behind the same STag.
    reg: u64,
}

#[derive(Default, Debug)]
struct Mock {
    mrs: Vec<Mr>,
    sq: VecDeque<SendWr>,
    rq: VecDeque<RecvWr>,
    rbufs: Vec<Vec<u8>>,
    cq: Vec<Completion>,
    events: Vec<Event>,
    fail_durable: bool,
    /// Regions `make_durable` was asked to commit.
    committed: Vec<commitw::Region>,
    /// Snapshot of region 0 taken at each completion (ordering checks).
    snap: Vec<Vec<u8>>,
    /// Zero-copy TX: take payload by reference, declining every `n`th
    /// offer (0: take all); `None`: decline all (the default host).
    by_ref: Option<usize>,
    offers: usize,
    /// Payload taken by reference, in stream order (what the real host
    /// would send from the pages).
    refs: VecDeque<u8>,
    /// Octets taken by reference.
    ref_octets: usize,
    /// Report a send queue left empty by `sq_next` (`Host::sq_drained`).
    drain_hint: bool,
    /// Calls of `sq_next`.
    sq_looks: usize,
    /// Answer `sq_next_into` in place (as rsiw does), and leave a poison
    /// WR in the engine's slot when there is none: the engine must drop
    /// it. `false`: the trait's default, through `sq_next`.
    in_place: bool,
    /// Tagged accesses refused because the STag named another
    /// registration than the one they were validated against.
    stale: usize,
    /// Local invalidations of Read sinks (`invalidate_local`), in order,
    /// with the sink's octets at that moment.
    local_invs: Vec<(u32, Vec<u8>)>,
    /// `invalidate_local` fails.
    fail_inv: bool,
    /// The receive queue is shared with other QPs (an SRQ, as rsiw's
    /// host has it): its head stays there until a placement takes it for
    /// this QP (`claimed`), and a flush gives only that one.
    srq: bool,
    claimed: Option<RecvWr>,
    /// Both queues are refilled as fast as they are taken from (a process
    /// that keeps moving its rings' producer index): completions are only
    /// counted (`counted`), and a queue taken from more than any flush
    /// may take panics.
    endless: bool,
    counted: [usize; 2],
    taken: [usize; 2],
}

const PD: u32 = 7;

fn stag(i: usize) -> u32 {
    ((i as u32 + 1) << 8) | 0x5A
}

impl StagTable for Mock {
    fn lookup(&self, stag: u32) -> Option<Region> {
        if stag & 0xFF != 0x5A {
            return None;
        }
        let m = self.mrs.get(((stag >> 8) as usize).checked_sub(1)?)?;
        Some(Region {
            base_to: m.base,
            len: m.data.len() as u64,
            access: m.access,
            pd: PD,
            valid: m.valid,
            durable: m.durable,
            reg: m.reg,
        })
    }
}

impl Mock {
    fn mr(&mut self, base: u64, len: usize, access: Access) -> u32 {
        self.mrs.push(Mr {
            base,
            data: (0..len).map(|i| i as u8).collect(),
            access,
            valid: true,
            durable: true,
            reg: self.mrs.len() as u64 + 1,
        });
        stag(self.mrs.len() - 1)
    }
    /// A new registration behind `stag` (as after deregistration and
    /// reuse of the index): another identity, the given rights.
    fn reregister(&mut self, stag: u32, access: Access) {
        let i = ((stag >> 8) as usize) - 1;
        let m = &mut self.mrs[i];
        m.reg += 1000;
        m.access = access;
        m.valid = true;
    }
    /// The octets of a tagged access validated against `reg`, refused
    /// unless the STag still names that registration, valid.
    fn tagged(&mut self, stag: u32, reg: u64, to: u64, len: usize) -> Result<&mut [u8], TermError> {
        let i = ((stag >> 8) as usize).wrapping_sub(1);
        match self.mrs.get(i) {
            Some(m) if m.reg == reg && m.valid => {}
            _ => {
                self.stale += 1;
                return Err(rdmape::INVALID_STAG);
            }
        }
        self.slice(stag, to, len)
    }
    fn slice(&mut self, stag: u32, to: u64, len: usize) -> Result<&mut [u8], TermError> {
        let i = ((stag >> 8) as usize).wrapping_sub(1);
        let m = self.mrs.get_mut(i).ok_or(rdmape::LOCAL_CATA)?;
        let off = to.checked_sub(m.base).ok_or(rdmape::LOCAL_CATA)? as usize;
        m.data.get_mut(off..off + len).ok_or(rdmape::LOCAL_CATA)
    }
    fn post_recv(&mut self, len: u32) -> u64 {
        self.rbufs.push(vec![0; len as usize]);
        let id = (self.rbufs.len() - 1) as u64;
        self.rq.push_back(RecvWr { wr_id: id, len });
        id
    }
}

impl Host for Mock {
    fn sq_next(&mut self) -> Option<SendWr> {
        self.sq_looks += 1;
        if self.endless {
            self.taken[0] += 1;
            assert!(
                self.taken[0] <= MAX_FLUSH,
                "the flush kept taking from the send queue"
            );
            let n = self.taken[0] as u64;
            return Some(wr(
                n,
                SendOp::Send { invalidate: None },
                0,
                Local::default(),
            ));
        }
        self.sq.pop_front()
    }
    fn sq_drained(&mut self) -> bool {
        self.drain_hint && self.sq.is_empty()
    }
    fn sq_next_into(&mut self, wr: &mut SendWr) -> bool {
        if !self.in_place {
            return match self.sq_next() {
                Some(w) => {
                    *wr = w;
                    true
                }
                None => false,
            };
        }
        self.sq_looks += 1;
        match self.sq.pop_front() {
            Some(w) => {
                wr.wr_id = w.wr_id;
                wr.flags = w.flags;
                wr.op = w.op;
                wr.len = w.len;
                wr.local = w.local;
                true
            }
            None => {
                // Outside the contract, to show the engine keeps nothing
                // of a slot the host said it did not fill.
                *wr = SendWr {
                    wr_id: 0xDEAD,
                    flags: Flags::SIGNALED,
                    op: SendOp::Send { invalidate: None },
                    len: 1,
                    local: Local::default(),
                };
                false
            }
        }
    }
    fn rq_peek(&mut self) -> Option<RecvWr> {
        self.claimed.or_else(|| self.rq.front().copied())
    }
    fn rq_pop(&mut self) -> Option<RecvWr> {
        if self.endless {
            self.taken[1] += 1;
            assert!(
                self.taken[1] <= MAX_FLUSH,
                "the flush kept taking from the receive queue"
            );
            return Some(RecvWr {
                wr_id: self.taken[1] as u64,
                len: 0,
            });
        }
        self.claimed.take().or_else(|| self.rq.pop_front())
    }
    fn rq_flush_next(&mut self) -> Option<RecvWr> {
        match self.srq {
            true => self.claimed.take(),
            false => self.rq_pop(),
        }
    }
    fn complete(&mut self, c: Completion) {
        if self.endless {
            self.counted[usize::from(c.queue == WorkQueue::Recv)] += 1;
            return;
        }
        let s = self.mrs.first().map(|m| m.data.clone()).unwrap_or_default();
        self.snap.push(s);
        self.cq.push(c);
    }
    fn event(&mut self, e: Event) {
        self.events.push(e);
    }
    fn payload_by_ref<C: Crc32c + ?Sized>(
        &mut self,
        src: &PayloadRef,
        len: usize,
        crc: &C,
        state: Option<u32>,
    ) -> Option<Result<Option<u32>, TermError>> {
        let every = self.by_ref?;
        self.offers += 1;
        if every > 0 && self.offers % every == 0 {
            return None;
        }
        let (stag, to) = match *src {
            PayloadRef::Local { local, offset } => (local.stag, local.to + u64::from(offset)),
            PayloadRef::Tagged { stag, reg, to } => {
                if let Err(e) = self.tagged(stag, reg, to, len) {
                    return Some(Err(e));
                }
                (stag, to)
            }
        };
        let bytes = match self.slice(stag, to, len) {
            Ok(b) => b.to_vec(),
            Err(e) => return Some(Err(e)),
        };
        self.ref_octets += len;
        self.refs.extend(bytes.iter().copied());
        Some(Ok(state.map(|st| crc.append(st, &bytes))))
    }
    fn read_source(&mut self, wr: &Local, offset: u32, dst: &mut [u8]) -> Result<(), TermError> {
        let s = self.slice(wr.stag, wr.to + u64::from(offset), dst.len())?;
        dst.copy_from_slice(s);
        Ok(())
    }
    fn check_source(&mut self, wr: &Local, len: u32) -> Result<(), TermError> {
        self.slice(wr.stag, wr.to, len as usize).map(|_| ())
    }
    fn read_tagged(
        &mut self,
        stag: u32,
        reg: u64,
        to: u64,
        dst: &mut [u8],
    ) -> Result<(), TermError> {
        let s = self.tagged(stag, reg, to, dst.len())?;
        dst.copy_from_slice(s);
        Ok(())
    }
    fn place_tagged(&mut self, stag: u32, reg: u64, to: u64, data: &[u8]) -> Result<(), TermError> {
        self.tagged(stag, reg, to, data.len())?
            .copy_from_slice(data);
        Ok(())
    }
    fn place_recv(&mut self, wr: &RecvWr, offset: u32, data: &[u8]) -> Result<(), TermError> {
        if self.srq && self.claimed.is_none() {
            self.claimed = self.rq.pop_front();
        }
        let b = self
            .rbufs
            .get_mut(wr.wr_id as usize)
            .ok_or(ddpe::LOCAL_CATA)?;
        b.get_mut(offset as usize..offset as usize + data.len())
            .ok_or(ddpe::LOCAL_CATA)?
            .copy_from_slice(data);
        Ok(())
    }
    fn atomic(&mut self, plan: &AtomicPlan) -> Result<u64, TermError> {
        let s = self.slice(plan.stag, plan.to, 8)?;
        let old = u64::from_le_bytes(s.try_into().unwrap());
        let (new, orig) = crate::rdmap::atomic_execute(old, &plan.request)?;
        if let Some(n) = new {
            s.copy_from_slice(&n.to_le_bytes());
        }
        Ok(orig)
    }
    fn write_atomic_result(&mut self, wr: &Local, original: u64) -> Result<(), TermError> {
        self.slice(wr.stag, wr.to, 8)?
            .copy_from_slice(&original.to_le_bytes());
        Ok(())
    }
    fn make_durable(&mut self, region: &commitw::Region) -> bool {
        self.committed.push(*region);
        !self.fail_durable
    }
    fn invalidate(&mut self, stag: u32) -> Result<(), TermError> {
        let i = ((stag >> 8) as usize).wrapping_sub(1);
        self.mrs.get_mut(i).ok_or(rdmape::CANT_INVALIDATE)?.valid = false;
        Ok(())
    }
    fn invalidate_local(&mut self, stag: u32) -> Result<(), TermError> {
        let i = ((stag >> 8) as usize).wrapping_sub(1);
        let data = self.mrs.get(i).map(|m| m.data.clone()).unwrap_or_default();
        self.local_invs.push((stag, data));
        if self.fail_inv {
            return Err(rdmape::LOCAL_CATA);
        }
        self.invalidate(stag)
    }
}

type Q = Qp<4, 4>;

struct Pair {
    a: Q,
    b: Q,
    ha: Mock,
    hb: Mock,
    /// Chunk sizes cycled for TX buffers and RX deliveries.
    chunks: Vec<usize>,
    k: usize,
    /// Bytes a -> b, b -> a in flight.
    ab: Vec<u8>,
    ba: Vec<u8>,
    /// A host that takes references alternates zero-copy plans with
    /// copying rounds (`tx`), as rsiw's TX does on a stream whose pages
    /// TCP copies.
    mix: bool,
    rounds: usize,
}

#[allow(non_snake_case)]
fn RW() -> Access {
    Access::LOCAL_WRITE
        | Access::REMOTE_READ
        | Access::REMOTE_WRITE
        | Access::REMOTE_ATOMIC
        | Access::COMMIT
}

impl Pair {
    fn chunk(&mut self) -> usize {
        self.k += 1;
        self.chunks[self.k % self.chunks.len()].max(1)
    }

    /// Moves bytes until both sides are idle.
    fn pump(&mut self) {
        for _ in 0..100_000 {
            let mut moved = false;
            self.rounds += 1;
            let copy_round = self.mix && self.rounds % 2 == 0;
            let n = if self.ha.by_ref.is_some() && !copy_round {
                let (budget, lit) = (self.chunk(), self.chunk());
                plan_round(&mut self.a, &mut self.ha, budget, lit, &mut self.ab)
            } else {
                let mut buf = vec![0u8; self.chunk()];
                let n = self.a.tx(&mut self.ha, &SoftCrc32c, &mut buf);
                self.ab.extend_from_slice(&buf[..n]);
                n
            };
            let m = if self.hb.by_ref.is_some() && !copy_round {
                let (budget, lit) = (self.chunk(), self.chunk());
                plan_round(&mut self.b, &mut self.hb, budget, lit, &mut self.ba)
            } else {
                let mut buf = vec![0u8; self.chunk()];
                let m = self.b.tx(&mut self.hb, &SoftCrc32c, &mut buf);
                self.ba.extend_from_slice(&buf[..m]);
                m
            };
            moved |= n + m > 0;
            if !self.ab.is_empty() {
                let c = self.chunk().min(self.ab.len());
                let d: Vec<u8> = self.ab.drain(..c).collect();
                assert_eq!(self.b.rx(&mut self.hb, &SoftCrc32c, &d), d.len());
                moved = true;
            }
            if !self.ba.is_empty() {
                let c = self.chunk().min(self.ba.len());
                let d: Vec<u8> = self.ba.drain(..c).collect();
                assert_eq!(self.a.rx(&mut self.ha, &SoftCrc32c, &d), d.len());
                moved = true;
            }
            if self.b.state() == State::OfferPending {
                self.b.accept(&mut self.hb, b"resp").unwrap();
                moved = true;
            }
            if !moved {
                return;
            }
        }
        panic!("pump did not settle");
    }
}

/// One zero-copy TX round of `q` (a plan of at most `budget` stream
/// octets and `lit` literal octets, 8 pieces): the stream octets are
/// rebuilt from the plan's pieces and the payload the host took by
/// reference, and appended to `wire`.
fn plan_round(q: &mut Q, h: &mut Mock, budget: usize, lit: usize, wire: &mut Vec<u8>) -> usize {
    let mut lit = vec![0u8; lit];
    let mut pieces = [Piece::Literal(0); 8];
    let mut plan = TxPlan::new(&mut lit, &mut pieces, budget);
    let n = q.tx_plan(h, &SoftCrc32c, &mut plan);
    assert_eq!(n, plan.len());
    assert!(n <= budget);
    let mut lit_at = 0;
    for p in plan.pieces() {
        match *p {
            Piece::Literal(l) => {
                wire.extend_from_slice(&plan.literal()[lit_at..lit_at + l]);
                lit_at += l;
            }
            Piece::Host(l) => {
                assert!(h.refs.len() >= l);
                wire.extend(h.refs.drain(..l));
            }
        }
    }
    assert_eq!(lit_at, plan.literal().len());
    assert!(h.refs.is_empty(), "every reference is in the plan");
    n
}

fn pair_with(
    crc: bool,
    markers: bool,
    p2p: Option<RtrSet>,
    emss: usize,
    chunks: Vec<usize>,
) -> Pair {
    let mut a = Q::new(QpConfig { pd: PD, emss });
    let mut b = Q::new(QpConfig { pd: PD, emss });
    let icfg = InitiatorConfig {
        crc: if crc {
            CrcPolicy::Required
        } else {
            CrcPolicy::IfPeerAsks
        },
        markers,
        enhanced: true,
        ird: 4,
        ord: 4,
        p2p,
        private_data: b"init",
    };
    let rcfg = ResponderConfig {
        max_rev: 2,
        crc: CrcPolicy::IfPeerAsks,
        markers,
        ird: 4,
        ord: 4,
        min_ord: 0,
        rtr: RtrSet::ALL,
    };
    a.connect(&icfg).unwrap();
    b.listen(&rcfg).unwrap();
    let mut p = Pair {
        a,
        b,
        ha: Mock::default(),
        hb: Mock::default(),
        chunks,
        k: 0,
        ab: vec![],
        ba: vec![],
        mix: false,
        rounds: 0,
    };
    p.pump();
    assert_eq!(p.a.state(), State::Rts);
    assert_eq!(p.b.peer_private_data(), b"init");
    assert_eq!(p.a.peer_private_data(), b"resp");
    p
}

fn pair() -> Pair {
    pair_with(true, false, Some(RtrSet::one(Rtr::Write)), 1460, vec![4096])
}

fn wr(wr_id: u64, op: SendOp, len: u32, local: Local) -> SendWr {
    SendWr {
        wr_id,
        flags: Flags::SIGNALED,
        op,
        len,
        local,
    }
}

fn post_a(p: &mut Pair, w: SendWr) {
    p.ha.sq.push_back(w);
}

#[test]
fn send_recv_every_framing_and_rtr() {
    for crc in [false, true] {
        for markers in [false, true] {
            for rtr in [None, Some(Rtr::Send), Some(Rtr::Write), Some(Rtr::Read)] {
                let p2p = rtr.map(RtrSet::one);
                let mut p = pair_with(crc, markers, p2p, 700, vec![1, 7, 300, 4096]);
                assert_eq!(p.a.framing().crc, crc);
                assert_eq!(p.a.framing().markers_tx, markers);
                assert_eq!(p.a.rtr_mode(), rtr.map(RtrMode::Zero));
                let src = p.ha.mr(0x1000, 3000, RW());
                let id = p.hb.post_recv(3000);
                post_a(
                    &mut p,
                    wr(
                        1,
                        SendOp::Send { invalidate: None },
                        2500,
                        Local {
                            stag: src,
                            to: 0x1000,
                            handle: 0,
                        },
                    ),
                );
                p.pump();
                assert_eq!(
                    p.b.state(),
                    State::Rts,
                    "crc {crc} markers {markers} rtr {rtr:?}"
                );
                assert_eq!(
                    p.hb.events.iter().filter(|e| **e == Event::Ready).count(),
                    1
                );
                assert_eq!(p.hb.cq.len(), 1, "{:?}", p.hb.events);
                let c = p.hb.cq[0];
                assert_eq!(
                    (c.wr_id, c.byte_len, c.opcode, c.status),
                    (id, 2500, CompOp::Recv, Status::Success)
                );
                assert_eq!(&p.hb.rbufs[0][..2500], &p.ha.mrs[0].data[..2500]);
                assert_eq!(p.ha.cq[0].opcode, CompOp::Send);
                // The responder can now send too (RTR / first FPDU seen).
                let src_b = p.hb.mr(0, 100, RW());
                p.ha.post_recv(100);
                p.hb.sq.push_back(wr(
                    9,
                    SendOp::Send { invalidate: None },
                    100,
                    Local {
                        stag: src_b,
                        to: 0,
                        handle: 0,
                    },
                ));
                p.pump();
                assert_eq!(p.ha.cq.len(), 2);
                assert_eq!(p.ha.rbufs[0], p.hb.mrs[0].data);
            }
        }
    }
}

/// A host that says the send queue is empty after the WR it gave
/// (`Host::sq_drained`) is not asked again in that `tx` call, and the next
/// call takes what was posted since; without the hint the engine looks
/// once more. Both messages arrive, in order.
#[test]
fn drained_send_queue_is_looked_at_again_in_the_next_call() {
    for hint in [false, true] {
        let mut p = pair();
        p.ha.drain_hint = hint;
        let src = p.ha.mr(0, 64, RW());
        let local = Local {
            stag: src,
            to: 0,
            handle: 0,
        };
        let r1 = p.hb.post_recv(64);
        let r2 = p.hb.post_recv(64);
        post_a(&mut p, wr(1, SendOp::Send { invalidate: None }, 64, local));
        let mut buf = vec![0u8; 4096];
        let looks = p.ha.sq_looks;
        let n = p.a.tx(&mut p.ha, &SoftCrc32c, &mut buf);
        assert!(n > 64);
        assert_eq!(
            p.ha.sq_looks - looks,
            if hint { 1 } else { 2 },
            "hint {hint}"
        );
        post_a(&mut p, wr(2, SendOp::Send { invalidate: None }, 32, local));
        let m = p.a.tx(&mut p.ha, &SoftCrc32c, &mut buf[n..]);
        assert!(
            m > 32,
            "the WR posted after the first call goes in the second"
        );
        assert_eq!(p.b.rx(&mut p.hb, &SoftCrc32c, &buf[..n + m]), n + m);
        p.pump();
        let got: Vec<_> =
            p.hb.cq
                .iter()
                .map(|c| (c.wr_id, c.byte_len, c.status))
                .collect();
        assert_eq!(got, [(r1, 64, Status::Success), (r2, 32, Status::Success)]);
        assert_eq!(&p.hb.rbufs[0][..], &p.ha.mrs[0].data[..]);
        assert_eq!(&p.hb.rbufs[1][..32], &p.ha.mrs[0].data[..32]);
        assert_eq!(p.ha.cq.iter().map(|c| c.wr_id).collect::<Vec<_>>(), [1, 2]);
    }
}

#[test]
fn responder_waits_for_first_fpdu_without_rtr() {
    let mut p = pair_with(false, false, None, 1460, vec![4096]);
    let s = p.hb.mr(0, 10, RW());
    p.ha.post_recv(10);
    p.hb.sq.push_back(wr(
        1,
        SendOp::Send { invalidate: None },
        10,
        Local {
            stag: s,
            to: 0,
            handle: 0,
        },
    ));
    p.pump();
    assert!(
        p.ha.cq.is_empty(),
        "responder sent before the initiator's first FPDU"
    );
    // A zero-length Write from the initiator opens the direction.
    post_a(
        &mut p,
        wr(
            2,
            SendOp::Write {
                remote: Remote { stag: 0, to: 0 },
            },
            0,
            Local::default(),
        ),
    );
    p.pump();
    assert_eq!(
        p.ha.cq
            .iter()
            .filter(|c| c.queue == WorkQueue::Recv)
            .count(),
        1
    );
}

#[test]
fn write_read_multi_segment() {
    let mut p = pair_with(
        true,
        true,
        Some(RtrSet::one(Rtr::Read)),
        200,
        vec![13, 512, 64],
    );
    assert!(p.a.mulpdu() < 200);
    let la = p.ha.mr(0x10_000, 5000, RW());
    let rb = p.hb.mr(0x20_000, 5000, RW());
    p.hb.mrs[0].data.iter_mut().for_each(|x| *x = 0);
    post_a(
        &mut p,
        wr(
            1,
            SendOp::Write {
                remote: Remote {
                    stag: rb,
                    to: 0x20_000 + 100,
                },
            },
            4000,
            Local {
                stag: la,
                to: 0x10_000,
                handle: 0,
            },
        ),
    );
    p.pump();
    assert_eq!(&p.hb.mrs[0].data[100..4100], &p.ha.mrs[0].data[..4000]);
    // Read it back into another local region.
    let sink = p.ha.mr(0x30_000, 5000, RW());
    post_a(
        &mut p,
        wr(
            2,
            SendOp::Read {
                remote: Remote {
                    stag: rb,
                    to: 0x20_000 + 100,
                },
            },
            4000,
            Local {
                stag: sink,
                to: 0x30_000 + 1,
                handle: 0,
            },
        ),
    );
    p.pump();
    let c = p.ha.cq.last().unwrap();
    assert_eq!(
        (c.wr_id, c.opcode, c.status, c.byte_len),
        (2, CompOp::Read, Status::Success, 4000)
    );
    let want = p.ha.mrs[0].data[..4000].to_vec();
    assert_eq!(&p.ha.mrs[1].data[1..4001], &want[..]);
    assert!(p.hb.cq.is_empty());
}

#[test]
fn ord_limit_fence_and_completion_order() {
    let mut p = pair();
    p.a.ord = 1;
    p.a.orq = RequestQueue::new(1);
    p.a.orq_aux = RequestQueue::new(1);
    let l = p.ha.mr(0, 4096, RW());
    let r = p.hb.mr(0, 4096, RW());
    p.hb.post_recv(64);
    let loc = |to| Local {
        stag: l,
        to,
        handle: 0,
    };
    post_a(
        &mut p,
        wr(
            1,
            SendOp::Read {
                remote: Remote { stag: r, to: 0 },
            },
            100,
            loc(1000),
        ),
    );
    post_a(
        &mut p,
        wr(
            2,
            SendOp::Read {
                remote: Remote { stag: r, to: 100 },
            },
            100,
            loc(2000),
        ),
    );
    post_a(&mut p, wr(3, SendOp::Send { invalidate: None }, 10, loc(0)));
    let mut w4 = wr(
        4,
        SendOp::Write {
            remote: Remote { stag: r, to: 3000 },
        },
        10,
        loc(0),
    );
    w4.flags = w4.flags.with(Flags::FENCE);
    post_a(&mut p, w4);
    // One TX pass: only the first Read goes out (ORD 1).
    let mut buf = vec![0u8; 65536];
    let n = p.a.tx(&mut p.ha, &SoftCrc32c, &mut buf);
    assert_eq!(p.a.orq.len(), 1);
    assert_eq!(n, 2 + 18 + 28 + 4);
    assert_eq!(
        p.a.tx(&mut p.ha, &SoftCrc32c, &mut buf),
        0,
        "second Read must wait for ORD"
    );
    p.b.rx(&mut p.hb, &SoftCrc32c, &buf[..n]);
    p.pump();
    let ids: Vec<u64> = p.ha.cq.iter().map(|c| c.wr_id).collect();
    assert_eq!(ids, vec![1, 2, 3, 4]);
    assert!(p.ha.cq.iter().all(|c| c.status == Status::Success));
    assert_eq!(&p.ha.mrs[0].data[1000..1100], &p.hb.mrs[0].data[..100]);
}

#[test]
fn send_after_read_completes_after_it() {
    let mut p = pair();
    let l = p.ha.mr(0, 4096, RW());
    let r = p.hb.mr(0, 4096, RW());
    p.hb.post_recv(64);
    post_a(
        &mut p,
        wr(
            1,
            SendOp::Read {
                remote: Remote { stag: r, to: 0 },
            },
            3000,
            Local {
                stag: l,
                to: 0,
                handle: 0,
            },
        ),
    );
    post_a(
        &mut p,
        wr(
            2,
            SendOp::Send { invalidate: None },
            10,
            Local {
                stag: l,
                to: 0,
                handle: 0,
            },
        ),
    );
    // Send goes out before the Read Response arrives: held.
    let mut buf = vec![0u8; 65536];
    let n = p.a.tx(&mut p.ha, &SoftCrc32c, &mut buf);
    assert!(n > 0);
    assert!(p.ha.cq.is_empty());
    assert_eq!(p.a.held.len(), 1);
    p.b.rx(&mut p.hb, &SoftCrc32c, &buf[..n]);
    p.pump();
    assert_eq!(
        p.ha.cq.iter().map(|c| c.wr_id).collect::<Vec<_>>(),
        vec![1, 2]
    );
}

#[test]
fn atomics_and_unsupported_aopcode() {
    let mut p = pair();
    let l = p.ha.mr(0, 64, RW());
    let r = p.hb.mr(0x100, 64, RW());
    p.hb.slice(r, 0x100, 8)
        .unwrap()
        .copy_from_slice(&0x0000_0005_FFFF_FFFFu64.to_le_bytes());
    let at = |op, add_swap, add_swap_mask, compare, compare_mask| SendOp::Atomic {
        op,
        remote: Remote { stag: r, to: 0x100 },
        add_swap,
        add_swap_mask,
        compare,
        compare_mask,
    };
    post_a(
        &mut p,
        wr(
            1,
            at(AtomicOp::FetchAdd, 1, 0x8000_0000_8000_0000, 0, 0),
            0,
            Local {
                stag: l,
                to: 0,
                handle: 0,
            },
        ),
    );
    post_a(
        &mut p,
        wr(
            2,
            at(AtomicOp::FetchAdd, 1, 0, 0, 0),
            0,
            Local {
                stag: l,
                to: 8,
                handle: 0,
            },
        ),
    );
    post_a(
        &mut p,
        wr(
            3,
            at(AtomicOp::CmpSwap, 0xAB, 0xFF, 0x01, 0xFF),
            0,
            Local {
                stag: l,
                to: 16,
                handle: 0,
            },
        ),
    );
    p.pump();
    let got: Vec<_> =
        p.ha.cq
            .iter()
            .map(|c| (c.wr_id, c.opcode, c.status, c.atomic_original))
            .collect();
    assert_eq!(
        got,
        vec![
            (
                1,
                CompOp::FetchAdd,
                Status::Success,
                Some(0x0000_0005_FFFF_FFFF)
            ),
            (
                2,
                CompOp::FetchAdd,
                Status::Success,
                Some(0x0000_0005_0000_0000)
            ),
            (
                3,
                CompOp::CmpSwap,
                Status::Success,
                Some(0x0000_0005_0000_0001)
            ),
        ]
    );
    assert_eq!(
        u64::from_le_bytes(p.hb.slice(r, 0x100, 8).unwrap().try_into().unwrap()),
        0x0000_0005_0000_00AB
    );
    assert_eq!(
        u64::from_le_bytes(p.ha.slice(l, 8, 8).unwrap().try_into().unwrap()),
        0x0000_0005_0000_0000
    );
    // Unsupported AOpCode: Terminate with Unexpected OpCode on both sides.
    post_a(
        &mut p,
        wr(
            4,
            at(AtomicOp::Unsupported(1), 0, 0, 0, 0),
            0,
            Local {
                stag: l,
                to: 0,
                handle: 0,
            },
        ),
    );
    p.pump();
    assert!(p
        .hb
        .events
        .contains(&Event::LocalTerminate(rdmape::UNEXPECTED_OPCODE)));
    let t = terminate_received(&p.a, &p.ha).unwrap();
    assert_eq!(t.error, rdmape::UNEXPECTED_OPCODE);
    assert!(t.ddp.is_some());
    // The request the peer refused completes with the peer's reason.
    assert_eq!(
        p.ha.cq.last().map(|c| (c.wr_id, c.status)),
        Some((4, Status::RemoteError(rdmape::UNEXPECTED_OPCODE)))
    );
    assert_eq!((p.a.state(), p.b.state()), (State::Error, State::Error));
}

/// The Terminate `q` received, as it keeps it; its host saw the same
/// error in the one `TerminateReceived` event.
fn terminate_received(q: &Q, h: &Mock) -> Option<crate::wire::terminate::Repr> {
    let seen: Vec<TermError> = h
        .events
        .iter()
        .filter_map(|e| match e {
            Event::TerminateReceived(t) => Some(*t),
            _ => None,
        })
        .collect();
    let t = q.peer_terminate().copied();
    assert_eq!(seen, t.iter().map(|t| t.error).collect::<Vec<_>>());
    t
}

fn terminate_case(setup: impl FnOnce(&mut Pair) -> SendWr, want: TermError) {
    let mut p = pair();
    p.ha.post_recv(10);
    let w = setup(&mut p);
    post_a(&mut p, w);
    post_a(
        &mut p,
        wr(77, SendOp::Send { invalidate: None }, 0, Local::default()),
    );
    p.pump();
    assert!(
        p.hb.events.contains(&Event::LocalTerminate(want)),
        "{:?}",
        p.hb.events
    );
    let t = terminate_received(&p.a, &p.ha);
    assert_eq!(t.map(|t| t.error), Some(want));
    // Every posted request completed exactly once; receives flushed.
    let ids: Vec<u64> =
        p.ha.cq
            .iter()
            .filter(|c| c.queue == WorkQueue::Send)
            .map(|c| c.wr_id)
            .collect();
    assert!(ids.contains(&77) && ids.len() == 2, "{:?}", p.ha.cq);
    assert!(p
        .ha
        .cq
        .iter()
        .any(|c| c.queue == WorkQueue::Recv && c.status == Status::Flushed));
    assert!(p.ha.rq.is_empty() && p.ha.sq.is_empty());
}

#[test]
fn terminate_paths() {
    // Bad STag on Write.
    terminate_case(
        |p| {
            let l = p.ha.mr(0, 64, RW());
            wr(
                1,
                SendOp::Write {
                    remote: Remote { stag: 0x999, to: 0 },
                },
                8,
                Local {
                    stag: l,
                    to: 0,
                    handle: 0,
                },
            )
        },
        ddpe::T_INVALID_STAG,
    );
    // Bounds.
    terminate_case(
        |p| {
            let l = p.ha.mr(0, 64, RW());
            let r = p.hb.mr(0, 16, RW());
            wr(
                1,
                SendOp::Write {
                    remote: Remote { stag: r, to: 10 },
                },
                8,
                Local {
                    stag: l,
                    to: 0,
                    handle: 0,
                },
            )
        },
        ddpe::T_BASE_BOUNDS,
    );
    // Access.
    terminate_case(
        |p| {
            let l = p.ha.mr(0, 64, RW());
            let r = p.hb.mr(0, 16, Access::REMOTE_READ);
            wr(
                1,
                SendOp::Write {
                    remote: Remote { stag: r, to: 0 },
                },
                8,
                Local {
                    stag: l,
                    to: 0,
                    handle: 0,
                },
            )
        },
        rdmape::ACCESS,
    );
    // No posted receive.
    terminate_case(
        |p| {
            let l = p.ha.mr(0, 64, RW());
            wr(
                1,
                SendOp::Send { invalidate: None },
                8,
                Local {
                    stag: l,
                    to: 0,
                    handle: 0,
                },
            )
        },
        ddpe::U_NO_BUFFER,
    );
    // Misaligned atomic.
    terminate_case(
        |p| {
            let l = p.ha.mr(0, 64, RW());
            let r = p.hb.mr(0, 64, RW());
            let op = SendOp::Atomic {
                op: AtomicOp::FetchAdd,
                remote: Remote { stag: r, to: 4 },
                add_swap: 1,
                add_swap_mask: 0,
                compare: 0,
                compare_mask: 0,
            };
            wr(
                1,
                op,
                0,
                Local {
                    stag: l,
                    to: 0,
                    handle: 0,
                },
            )
        },
        rdmape::CATA_STREAM,
    );
    // Read from a bad source.
    terminate_case(
        |p| {
            let l = p.ha.mr(0, 64, RW());
            wr(
                1,
                SendOp::Read {
                    remote: Remote {
                        stag: 0x1234,
                        to: 0,
                    },
                },
                8,
                Local {
                    stag: l,
                    to: 0,
                    handle: 0,
                },
            )
        },
        rdmape::INVALID_STAG,
    );
}

#[test]
fn peer_terminate_completes_the_oldest_request_with_its_reason() {
    // Two Reads outstanding, the first from a bad source: the peer's
    // Terminate (invalid STag) completes the first with that reason; the
    // second, never answered, is flushed.
    let mut p = pair();
    let l = p.ha.mr(0, 64, RW());
    let r = p.hb.mr(0, 64, RW());
    let read = |id, stag| {
        wr(
            id,
            SendOp::Read {
                remote: Remote { stag, to: 0 },
            },
            8,
            Local {
                stag: l,
                to: 0,
                handle: 0,
            },
        )
    };
    post_a(&mut p, read(1, 0x1234));
    post_a(&mut p, read(2, r));
    p.pump();
    let got: Vec<_> = p.ha.cq.iter().map(|c| (c.wr_id, c.status)).collect();
    assert_eq!(
        got,
        vec![
            (1, Status::RemoteError(rdmape::INVALID_STAG)),
            (2, Status::Flushed),
        ]
    );
}

#[test]
fn send_invalidate_and_solicited() {
    let mut p = pair();
    let l = p.ha.mr(0, 64, RW());
    let victim = p.hb.mr(0, 64, RW());
    p.hb.post_recv(64);
    p.hb.post_recv(64);
    let mut w = wr(
        1,
        SendOp::Send {
            invalidate: Some(victim),
        },
        5,
        Local {
            stag: l,
            to: 0,
            handle: 0,
        },
    );
    w.flags = w.flags.with(Flags::SOLICITED);
    post_a(&mut p, w);
    p.pump();
    let c = p.hb.cq[0];
    assert_eq!(
        (c.invalidated, c.solicited, c.byte_len),
        (Some(victim), true, 5)
    );
    assert!(!p.hb.mrs[0].valid);
    // Invalidating it again: STag cannot be invalidated.
    post_a(
        &mut p,
        wr(
            2,
            SendOp::Send {
                invalidate: Some(victim),
            },
            5,
            Local {
                stag: l,
                to: 0,
                handle: 0,
            },
        ),
    );
    p.pump();
    assert!(p
        .hb
        .events
        .contains(&Event::LocalTerminate(rdmape::CANT_INVALIDATE)));
}

#[test]
fn write_with_immediate_places_data_first() {
    let mut p = pair();
    let l = p.ha.mr(0, 4096, RW());
    let _r0 = p.hb.mr(0, 4096, RW());
    p.hb.mrs[0].data.iter_mut().for_each(|x| *x = 0);
    p.hb.post_recv(0);
    p.hb.post_recv(0);
    post_a(
        &mut p,
        wr(
            1,
            SendOp::WriteImm {
                remote: Remote {
                    stag: stag(0),
                    to: 0,
                },
                data: *b"IMMDATA!",
            },
            3000,
            Local {
                stag: l,
                to: 0,
                handle: 0,
            },
        ),
    );
    let mut w = wr(2, SendOp::Immediate { data: [1; 8] }, 0, Local::default());
    w.flags = w.flags.with(Flags::SOLICITED);
    post_a(&mut p, w);
    p.pump();
    assert_eq!(p.hb.cq.len(), 2);
    assert_eq!(
        (p.hb.cq[0].opcode, p.hb.cq[0].imm),
        (CompOp::RecvImm, Some(*b"IMMDATA!"))
    );
    assert_eq!(
        &p.hb.snap[0][..3000],
        &p.ha.mrs[0].data[..3000],
        "data placed before the immediate completed"
    );
    assert_eq!((p.hb.cq[1].imm, p.hb.cq[1].solicited), (Some([1; 8]), true));
    assert_eq!(
        p.ha.cq.iter().map(|c| c.opcode).collect::<Vec<_>>(),
        vec![CompOp::WriteImm, CompOp::Immediate]
    );
}

#[test]
fn commit_statuses() {
    let mut p = pair();
    let l = p.ha.mr(0, 64, RW());
    let r = p.hb.mr(0, 64, RW());
    let reg = |stag, to, len| commitw::Region { stag, to, len };
    let commit = |id, regions: &[commitw::Region]| {
        wr(
            id,
            SendOp::Commit {
                request: commitw::RequestRepr::new(0, regions).unwrap(),
            },
            0,
            Local::default(),
        )
    };
    post_a(
        &mut p,
        wr(
            1,
            SendOp::Write {
                remote: Remote { stag: r, to: 0 },
            },
            32,
            Local {
                stag: l,
                to: 0,
                handle: 0,
            },
        ),
    );
    post_a(&mut p, commit(2, &[reg(r, 0, 32)]));
    post_a(&mut p, commit(3, &[reg(r, 60, 32)]));
    post_a(&mut p, commit(4, &[reg(0x4242, 0, 8)]));
    post_a(&mut p, commit(5, &[reg(r, 0, 8); 4]));
    post_a(&mut p, commit(6, &[reg(r, 0, 8); 8]));
    // Writable but without the commit right (no flush access).
    let w = p.hb.mr(0, 64, Access::LOCAL_WRITE | Access::REMOTE_WRITE);
    post_a(&mut p, commit(8, &[reg(w, 0, 8)]));
    // A zero-length region is validated but needs no flush.
    post_a(&mut p, commit(9, &[reg(r, 64, 0)]));
    p.pump();
    // Every non-empty region of a valid request, in order; nothing else.
    assert_eq!(
        p.hb.committed,
        [
            reg(r, 0, 32),
            reg(r, 0, 8),
            reg(r, 0, 8),
            reg(r, 0, 8),
            reg(r, 0, 8)
        ]
    );
    p.hb.fail_durable = true;
    post_a(&mut p, commit(7, &[reg(r, 0, 8)]));
    p.pump();
    let st: Vec<_> = p.ha.cq.iter().map(|c| (c.wr_id, c.status)).collect();
    assert_eq!(
        st,
        vec![
            (1, Status::Success),
            (2, Status::Success),
            (3, Status::CommitFailed(CommitStatus::Bounds)),
            (4, Status::CommitFailed(CommitStatus::Access)),
            (5, Status::Success),
            (6, Status::CommitFailed(CommitStatus::Limit)),
            (8, Status::CommitFailed(CommitStatus::Access)),
            (9, Status::Success),
            (7, Status::CommitFailed(CommitStatus::NotDurable)),
        ]
    );
    assert_eq!(p.b.state(), State::Rts);
}

/// The DDP/RDMAP header of [`undefined_opcode_fpdu`].
const UNDEFINED_OPCODE_HDR: [u8; 18] = [0x41, 0x4F, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0];

/// A valid FPDU (CRC on, no markers) with an undefined RDMAP opcode: the
/// receiver fails the stream with a Terminate.
fn undefined_opcode_fpdu() -> Vec<u8> {
    let mut t = MpaTx::new(true, false);
    let mut fpdu = [0u8; 64];
    let m = t
        .write(&SoftCrc32c, &UNDEFINED_OPCODE_HDR, &[], &mut fpdu)
        .unwrap();
    fpdu[..m].to_vec()
}

#[test]
fn incoming_garbage_terminates_and_flushes() {
    let mut p = pair();
    p.ha.post_recv(10);
    p.hb.post_recv(10);
    let l = p.ha.mr(0, 64, RW());
    post_a(
        &mut p,
        wr(
            1,
            SendOp::Read {
                remote: Remote { stag: 1, to: 0 },
            },
            8,
            Local {
                stag: l,
                to: 0,
                handle: 0,
            },
        ),
    );
    let mut buf = vec![0u8; 4096];
    let n = p.a.tx(&mut p.ha, &SoftCrc32c, &mut buf);
    assert!(n > 0);
    p.a.rx(&mut p.ha, &SoftCrc32c, &undefined_opcode_fpdu());
    assert_eq!(p.a.state(), State::Terminate);
    assert!(p
        .ha
        .events
        .contains(&Event::LocalTerminate(rdmape::UNEXPECTED_OPCODE)));
    let ids: Vec<_> = p.ha.cq.iter().map(|c| (c.queue, c.status)).collect();
    assert_eq!(
        ids,
        vec![
            (WorkQueue::Send, Status::Flushed),
            (WorkQueue::Recv, Status::Flushed)
        ]
    );
    // The Terminate goes out and reaches the peer.
    let k = p.a.tx(&mut p.ha, &SoftCrc32c, &mut buf);
    assert_eq!(p.a.state(), State::Error);
    p.b.rx(&mut p.hb, &SoftCrc32c, &buf[..k]);
    let t = terminate_received(&p.b, &p.hb).unwrap();
    assert_eq!(t.error, rdmape::UNEXPECTED_OPCODE);
    assert_eq!(t.ddp.unwrap().header.as_bytes(), &UNDEFINED_OPCODE_HDR);
    assert_eq!(p.hb.cq.last().map(|c| c.status), Some(Status::Flushed));
    // Posting to a failed QP: flush completes it at once.
    post_a(
        &mut p,
        wr(5, SendOp::Send { invalidate: None }, 0, Local::default()),
    );
    p.a.flush(&mut p.ha);
    assert_eq!(
        p.ha.cq.last().map(|c| (c.wr_id, c.status)),
        Some((5, Status::Flushed))
    );
}

/// A Send from local memory that is not registered: nothing of it
/// reaches the peer (no Send of zeros), the WR completes with the local
/// error, the stream ends with a Terminate and the peer's receive is
/// flushed.
#[test]
fn bad_local_source_fails_the_wr_whole_and_ends_the_stream() {
    let mut p = pair();
    let r = p.hb.post_recv(64);
    post_a(
        &mut p,
        wr(
            1,
            SendOp::Send { invalidate: None },
            32,
            Local {
                stag: stag(7),
                to: 0,
                handle: 0,
            },
        ),
    );
    p.pump();
    let a: Vec<_> = p.ha.cq.iter().map(|c| (c.wr_id, c.status)).collect();
    assert_eq!(a, vec![(1, Status::LocalError(rdmape::LOCAL_CATA))]);
    assert!(p
        .ha
        .events
        .contains(&Event::LocalTerminate(rdmape::LOCAL_CATA)));
    assert_eq!(p.a.state(), State::Error);
    let b: Vec<_> = p.hb.cq.iter().map(|c| (c.wr_id, c.status)).collect();
    assert_eq!(b, vec![(r, Status::Flushed)]);
    assert!(p
        .hb
        .events
        .contains(&Event::TerminateReceived(rdmape::LOCAL_CATA)));
}

/// A pair where a posted a 20-octet Send (b has a receive posted), and
/// a's FPDU of it with one payload bit flipped.
fn send_with_bad_crc() -> (Pair, Vec<u8>) {
    let mut p = pair();
    let l = p.ha.mr(0, 64, RW());
    p.hb.post_recv(64);
    post_a(
        &mut p,
        wr(
            1,
            SendOp::Send { invalidate: None },
            20,
            Local {
                stag: l,
                to: 0,
                handle: 0,
            },
        ),
    );
    let mut buf = vec![0u8; 4096];
    let n = p.a.tx(&mut p.ha, &SoftCrc32c, &mut buf);
    buf.truncate(n);
    buf[25] ^= 1;
    (p, buf)
}

#[test]
fn crc_error_is_llp_terminate() {
    let (mut p, buf) = send_with_bad_crc();
    p.b.rx(&mut p.hb, &SoftCrc32c, &buf);
    assert!(p.hb.events.contains(&Event::LocalTerminate(llp::CRC)));
    // The FPDU came whole: its CRC was checked before any of it was placed.
    assert!(p.hb.rbufs[0].iter().all(|&b| b == 0));
    p.pump();
    let t = terminate_received(&p.a, &p.ha).unwrap();
    assert_eq!((t.error, t.ddp), (llp::CRC, None));
}

/// The same corruption with the FPDU split across inputs (one octet at a
/// time: the streaming path, which places payload before the CRC field
/// arrives): still an LLP CRC Terminate, and the receive is flushed.
#[test]
fn crc_error_in_split_fpdu_is_llp_terminate() {
    let (mut p, buf) = send_with_bad_crc();
    for b in buf.chunks(1) {
        p.b.rx(&mut p.hb, &SoftCrc32c, b);
    }
    assert!(p.hb.events.contains(&Event::LocalTerminate(llp::CRC)));
    assert!(p
        .hb
        .cq
        .iter()
        .any(|c| c.queue == WorkQueue::Recv && c.status == Status::Flushed));
}

#[test]
fn rtr_mismatch_is_llp_7() {
    let mut p = pair();
    // Fresh pair whose responder expects a Write RTR but gets a Send.
    let mut b = Q::new(QpConfig { pd: PD, emss: 1460 });
    let f = p.b.framing();
    b.establish(f, 4, 4, Some(RtrMode::Zero(Rtr::Write)), false);
    let mut a = Q::new(QpConfig { pd: PD, emss: 1460 });
    a.establish(p.a.framing(), 4, 4, Some(RtrMode::Zero(Rtr::Send)), true);
    let mut buf = vec![0u8; 4096];
    let n = a.tx(&mut p.ha, &SoftCrc32c, &mut buf);
    b.rx(&mut p.hb, &SoftCrc32c, &buf[..n]);
    assert!(p
        .hb
        .events
        .contains(&Event::LocalTerminate(llp::NO_MATCHING_RTR)));
}

#[test]
fn graceful_close_and_connection_lost() {
    let mut p = pair();
    let l = p.ha.mr(0, 64, RW());
    let r = p.hb.mr(0, 64, RW());
    post_a(
        &mut p,
        wr(
            1,
            SendOp::Read {
                remote: Remote { stag: r, to: 0 },
            },
            8,
            Local {
                stag: l,
                to: 0,
                handle: 0,
            },
        ),
    );
    let mut buf = vec![0u8; 4096];
    let n = p.a.tx(&mut p.ha, &SoftCrc32c, &mut buf);
    p.b.rx(&mut p.hb, &SoftCrc32c, &buf[..n]);
    p.a.close(&mut p.ha);
    assert_eq!(p.a.state(), State::Closing);
    p.pump();
    assert_eq!(p.a.state(), State::Closed);
    assert!(p.ha.events.contains(&Event::Closed));
    assert_eq!(p.ha.cq.len(), 1);
    p.hb.post_recv(8);
    p.b.on_connection_lost(&mut p.hb);
    assert_eq!(p.b.state(), State::Error);
    assert_eq!(p.hb.cq.last().map(|c| c.status), Some(Status::Flushed));
}

/// What a host asks before completing a request posted to a QP it shows
/// in Error: the engine owes no flush from the end of the stream on, but
/// for the send side only once the FPDU in flight is out.
#[test]
fn flushed_once_the_stream_ended_and_the_fpdu_in_flight_is_out() {
    // A signaled Send of `len` octets from offset 0 of `stag`.
    let send = |wr_id, len, stag| {
        wr(
            wr_id,
            SendOp::Send { invalidate: None },
            len,
            Local {
                stag,
                to: 0,
                handle: 0,
            },
        )
    };
    let mut p = pair();
    assert!(!p.a.send_flushed() && !p.a.recv_flushed());
    let src = p.ha.mr(0, 4000, RW());
    p.ha.post_recv(8);
    post_a(&mut p, send(1, 4000, src));
    // Part of the first FPDU goes out: the Send is the FPDU in flight.
    let mut buf = vec![0u8; 100];
    assert_eq!(p.a.tx(&mut p.ha, &SoftCrc32c, &mut buf), 100);
    // A protocol error from the peer fails the stream.
    p.a.rx(&mut p.ha, &SoftCrc32c, &undefined_opcode_fpdu());
    assert_eq!(p.a.state(), State::Terminate);
    assert!(p.a.recv_flushed() && !p.a.send_flushed());
    assert_eq!(p.ha.cq.len(), 1);
    assert_eq!(
        (p.ha.cq[0].opcode, p.ha.cq[0].status),
        (CompOp::Recv, Status::Flushed)
    );
    // A Send posted meanwhile queues behind the one in flight.
    post_a(&mut p, send(2, 10, src));
    let mut rest = vec![0u8; 8192];
    p.a.tx(&mut p.ha, &SoftCrc32c, &mut rest);
    assert!(p.a.send_flushed());
    let sent: Vec<_> = p.ha.cq[1..].iter().map(|c| (c.wr_id, c.status)).collect();
    assert_eq!(sent, [(1, Status::Flushed), (2, Status::Flushed)]);

    // A lost connection sends nothing more: flushed at once.
    let mut p = pair();
    let src = p.ha.mr(0, 4000, RW());
    post_a(&mut p, send(3, 4000, src));
    assert_eq!(p.a.tx(&mut p.ha, &SoftCrc32c, &mut buf), 100);
    p.a.on_connection_lost(&mut p.ha);
    assert!(p.a.recv_flushed() && p.a.send_flushed());
    assert_eq!(
        p.ha.cq
            .iter()
            .map(|c| (c.wr_id, c.status))
            .collect::<Vec<_>>(),
        [(3, Status::Flushed)]
    );
}

#[test]
fn rejected_connection() {
    let mut a = Q::new(QpConfig { pd: PD, emss: 1460 });
    let mut b = Q::new(QpConfig { pd: PD, emss: 1460 });
    let (mut ha, mut hb) = (Mock::default(), Mock::default());
    let icfg = InitiatorConfig {
        crc: CrcPolicy::IfPeerAsks,
        markers: false,
        enhanced: false,
        ird: 0,
        ord: 0,
        p2p: None,
        private_data: b"",
    };
    a.connect(&icfg).unwrap();
    b.listen(&ResponderConfig {
        max_rev: 1,
        crc: CrcPolicy::IfPeerAsks,
        markers: false,
        ird: 1,
        ord: 1,
        min_ord: 0,
        rtr: RtrSet::EMPTY,
    })
    .unwrap();
    let mut buf = vec![0u8; 1024];
    let n = a.tx(&mut ha, &SoftCrc32c, &mut buf);
    b.rx(&mut hb, &SoftCrc32c, &buf[..n]);
    assert_eq!(hb.events, vec![Event::ConnectRequest]);
    b.reject(&mut hb, b"no").unwrap();
    let n = b.tx(&mut hb, &SoftCrc32c, &mut buf);
    a.rx(&mut ha, &SoftCrc32c, &buf[..n]);
    assert_eq!(ha.events, vec![Event::Rejected]);
    assert_eq!(a.peer_private_data(), b"no");
}

/// RFC 6581 9: an initiator that cannot use the Reply sends a Terminate
/// in the framing the Reply negotiated. The one the startup machine queues
/// is, octet for octet, what an established stream sends for that error
/// (the way the engine sent it before the machine existed).
#[test]
fn failed_reply_terminate_is_the_streams_terminate() {
    use crate::wire::mpa::{Enhanced, Kind, Repr as MpaRepr};
    let p2p = |rtr| Enhanced {
        ird: 4,
        ord: 4,
        p2p: true,
        rtr,
    };
    for (crc, markers) in [(false, false), (true, false), (false, true), (true, true)] {
        let cases = [
            // We never use CRC, the Reply asks for it: code 5.
            (CrcPolicy::Never, 8, None, 1, None, llp::LOCAL_CATA),
            // The responder's ORD 4 above the IRD 2 we offered: code 6.
            (
                CrcPolicy::IfPeerAsks,
                2,
                Some(RtrSet::ALL),
                2,
                Some(p2p(RtrSet::one(Rtr::Write))),
                llp::INSUFFICIENT_IRD,
            ),
            // We offer Write only, the responder takes Read only: code 7.
            (
                CrcPolicy::IfPeerAsks,
                8,
                Some(RtrSet::one(Rtr::Write)),
                2,
                Some(p2p(RtrSet::one(Rtr::Read))),
                llp::NO_MATCHING_RTR,
            ),
        ];
        for (policy, ird, p2p, rev, enhanced, err) in cases {
            let crc = crc || policy == CrcPolicy::Never;
            let mut a = Q::new(QpConfig { pd: PD, emss: 1460 });
            let mut ha = Mock::default();
            a.connect(&InitiatorConfig {
                crc: policy,
                markers: false,
                enhanced: rev == 2,
                ird,
                ord: 4,
                p2p,
                private_data: b"",
            })
            .unwrap();
            let mut buf = vec![0u8; 1024];
            let req = a.tx(&mut ha, &SoftCrc32c, &mut buf);
            assert!(req > 0);
            let rep = MpaRepr {
                kind: Kind::Reply,
                markers,
                crc,
                reject: false,
                rev,
                enhanced,
                private_data: b"",
            };
            let mut rb = vec![0u8; rep.buffer_len()];
            rep.emit_bytes(&mut rb).unwrap();
            assert_eq!(a.rx(&mut ha, &SoftCrc32c, &rb), rb.len());
            assert_eq!(ha.events, vec![Event::LocalTerminate(err)]);
            assert!(a.is_done() && a.wants_tx());
            let n = a.tx(&mut ha, &SoftCrc32c, &mut buf);
            assert!(!a.wants_tx());
            // The stream's Terminate for the same error and framing.
            let f = Framing {
                crc,
                markers_tx: markers,
                markers_rx: false,
            };
            let mut s = Q::new(QpConfig { pd: PD, emss: 1460 });
            let mut hs = Mock::default();
            s.establish(f, 0, 0, None, true);
            s.fail(&mut hs, err, None);
            let mut sb = vec![0u8; 1024];
            let m = s.tx(&mut hs, &SoftCrc32c, &mut sb);
            assert_eq!(&buf[..n], &sb[..m], "{err:?} crc {crc} markers {markers}");
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::default())]

    /// The resumable encoder produces exactly what `mpa::Tx::write` does,
    /// for any output chunking (an output that holds a whole marker-free
    /// FPDU takes its one-span path).
    #[test]
    fn encoder_matches_tx_write(
        msgs in proptest::collection::vec((0usize..40, 0usize..1500), 1..6),
        chunks in proptest::collection::vec(1usize..2000, 1..5),
        crc: bool, markers: bool,
    ) {
        let mut m = Mock::default();
        let st = m.mr(0, 1600, RW());
        let mut enc = FpduEncoder::new(crc, markers);
        let mut tx = MpaTx::new(crc, markers);
        let mut k = 0;
        for (hl, pl) in msgs {
            let hdr: Vec<u8> = (0..hl).map(|i| (i * 7) as u8).collect();
            let mut want = vec![0u8; 70000];
            let payload = m.mrs[0].data[..pl].to_vec();
            let n = tx.write(&SoftCrc32c, &hdr, &[&payload], &mut want).unwrap();
            let src = encoder::Src::Local { local: Local { stag: st, to: 0, handle: 0 }, offset: 0 };
            let started = enc.start(&hdr, src, pl);
            prop_assert!(started);
            let mut got = Vec::new();
            loop {
                let mut b = vec![0u8; chunks[k % chunks.len()]];
                k += 1;
                let w = enc.write(&mut m, &SoftCrc32c, &mut b);
                got.extend_from_slice(&b[..w.len]);
                prop_assert!(w.error.is_none());
                if w.finished { break; }
            }
            prop_assert_eq!(&got[..], &want[..n]);
        }
    }

    /// Zero-copy TX on both sides (payload by reference, some offers
    /// declined, plans cut by small budgets, literal buffers and piece
    /// lists, with `mix` every other round a copying one, which may take
    /// over in the middle of an FPDU): the same workload completes in
    /// order with intact data, and payload really went by reference.
    #[test]
    fn zero_copy_workload_keeps_order(
        ops in proptest::collection::vec((0u8..5, 0u32..3000), 1..12),
        chunks in proptest::collection::vec(1usize..2000, 1..4),
        crc: bool, markers: bool,
        decline in 0usize..4, min in 0usize..500, drain: bool, in_place: bool, mix: bool,
    ) {
        let mut p = pair_with(crc, markers, Some(RtrSet::one(Rtr::Write)), 600, chunks);
        p.mix = mix;
        p.ha.drain_hint = drain;
        p.hb.drain_hint = drain;
        p.ha.in_place = in_place;
        p.hb.in_place = in_place;
        p.ha.by_ref = Some(decline);
        p.hb.by_ref = Some(decline);
        p.a.set_tx_ref_min(Some(min));
        p.b.set_tx_ref_min(Some(min));
        // FPDU payloads are about 570 octets here (EMSS 600).
        let big = ops.iter().any(|&(op, len)| op < 3 && len >= 500);
        run_workload(&mut p, &ops)?;
        // (A copying round may take every large payload when mixed.)
        if big && decline != 1 && !mix {
            prop_assert!(p.ha.ref_octets + p.hb.ref_octets > 0);
        }
    }

    /// Random mixes of operations and chunkings: every signaled request
    /// completes exactly once, in posting order, and data arrives intact.
    #[test]
    fn random_workload_keeps_order(
        ops in proptest::collection::vec((0u8..5, 0u32..3000), 1..12),
        chunks in proptest::collection::vec(1usize..2000, 1..4),
        crc: bool, markers: bool, drain: bool, in_place: bool,
    ) {
        let mut p = pair_with(crc, markers, Some(RtrSet::one(Rtr::Write)), 600, chunks);
        p.ha.drain_hint = drain;
        p.hb.drain_hint = drain;
        p.ha.in_place = in_place;
        p.hb.in_place = in_place;
        run_workload(&mut p, &ops)?;
    }

    /// Arbitrary bytes into an established QP: no panic, and every posted
    /// receive and request is completed exactly once once it fails.
    #[test]
    fn arbitrary_input_never_loses_completions(bytes in proptest::collection::vec(any::<u8>(), 0..600), initiator: bool) {
        let mut q = Q::new(QpConfig { pd: PD, emss: 1460 });
        q.establish(Framing { crc: false, markers_tx: false, markers_rx: false }, 4, 4, None, initiator);
        let mut h = Mock::default();
        h.post_recv(100);
        h.post_recv(100);
        let l = h.mr(0, 64, RW());
        h.sq.push_back(wr(1, SendOp::Read { remote: Remote { stag: 1, to: 0 } }, 8, Local { stag: l, to: 0, handle: 0 }));
        let mut out = vec![0u8; 4096];
        q.tx(&mut h, &SoftCrc32c, &mut out);
        q.rx(&mut h, &SoftCrc32c, &bytes);
        q.tx(&mut h, &SoftCrc32c, &mut out);
        q.on_connection_lost(&mut h);
        let mut ids: Vec<_> = h.cq.iter().map(|c| (c.queue, c.wr_id)).collect();
        ids.sort_by_key(|x| (x.0 == WorkQueue::Recv, x.1));
        let sends = ids.iter().filter(|x| x.0 == WorkQueue::Send).count();
        let recvs = ids.iter().filter(|x| x.0 == WorkQueue::Recv).count();
        prop_assert_eq!((sends, recvs), (1, 2));
    }
}

#[test]
fn rtr_read_does_not_hold_completions() {
    let mut p = pair_with(true, false, Some(RtrSet::one(Rtr::Read)), 1460, vec![4096]);
    let l = p.ha.mr(0, 64, RW());
    p.hb.post_recv(64);
    p.hb.post_recv(64);
    post_a(
        &mut p,
        wr(
            1,
            SendOp::Send { invalidate: None },
            8,
            Local {
                stag: l,
                to: 0,
                handle: 0,
            },
        ),
    );
    post_a(
        &mut p,
        wr(
            2,
            SendOp::Send { invalidate: None },
            8,
            Local {
                stag: l,
                to: 0,
                handle: 0,
            },
        ),
    );
    p.pump();
    assert_eq!(
        p.ha.cq.iter().map(|c| c.wr_id).collect::<Vec<_>>(),
        vec![1, 2],
        "{:?} {:?}",
        p.a.orq_aux,
        p.a.held
    );
}

/// Posts `ops` (kind, length) on `a`, pumps, and checks: completions in
/// posting order, all successful, Writes, Sends and Reads carry the right
/// octets (the two sides' memory starts with different patterns).
fn run_workload(p: &mut Pair, ops: &[(u8, u32)]) -> Result<(), TestCaseError> {
    let l = p.ha.mr(0, 8192, RW());
    let r = p.hb.mr(0, 8192, RW());
    for (i, b) in p.ha.mrs[0].data[..4096].iter_mut().enumerate() {
        *b = (i * 7 + 3) as u8;
    }
    let loc = Local {
        stag: l,
        to: 0,
        handle: 0,
    };
    let mut expect = Vec::new();
    for (i, (op, len)) in ops.iter().enumerate() {
        let id = i as u64;
        let w = match op {
            0 => {
                p.hb.post_recv(3000);
                wr(id, SendOp::Send { invalidate: None }, *len, loc)
            }
            1 => wr(
                id,
                SendOp::Write {
                    remote: Remote { stag: r, to: 0 },
                },
                *len,
                loc,
            ),
            2 => wr(
                id,
                SendOp::Read {
                    remote: Remote { stag: r, to: 4096 },
                },
                *len,
                Local {
                    stag: l,
                    to: 4096,
                    handle: 0,
                },
            ),
            3 => wr(
                id,
                SendOp::Atomic {
                    op: AtomicOp::FetchAdd,
                    remote: Remote { stag: r, to: 8000 },
                    add_swap: 1,
                    add_swap_mask: 0,
                    compare: 0,
                    compare_mask: 0,
                },
                0,
                Local {
                    stag: l,
                    to: 8000,
                    handle: 0,
                },
            ),
            _ => wr(
                id,
                SendOp::Commit {
                    request: commitw::RequestRepr::new(
                        0,
                        &[commitw::Region {
                            stag: r,
                            to: 0,
                            len: 8,
                        }],
                    )
                    .unwrap(),
                },
                0,
                loc,
            ),
        };
        expect.push(id);
        post_a(p, w);
    }
    p.pump();
    let got: Vec<u64> = p.ha.cq.iter().map(|c| c.wr_id).collect();
    prop_assert_eq!(got, expect);
    prop_assert!(p.ha.cq.iter().all(|c| c.status == Status::Success));
    let maxr = ops
        .iter()
        .filter(|o| o.0 == 2)
        .map(|o| o.1 as usize)
        .max()
        .unwrap_or(0);
    prop_assert_eq!(
        &p.ha.mrs[0].data[4096..4096 + maxr],
        &p.hb.mrs[0].data[4096..4096 + maxr]
    );
    prop_assert_eq!(p.hb.cq.len(), ops.iter().filter(|o| o.0 == 0).count());
    let maxw = ops
        .iter()
        .filter(|o| o.0 == 1)
        .map(|o| o.1 as usize)
        .max()
        .unwrap_or(0);
    prop_assert_eq!(&p.hb.mrs[0].data[..maxw], &p.ha.mrs[0].data[..maxw]);
    let sends: Vec<usize> = ops
        .iter()
        .filter(|o| o.0 == 0)
        .map(|o| o.1 as usize)
        .collect();
    for (k, len) in sends.iter().enumerate() {
        prop_assert_eq!(&p.hb.rbufs[k][..*len], &p.ha.mrs[0].data[..*len]);
    }
    Ok(())
}

/// A Write and a Read Response go out by reference (CRC computed over the
/// referenced octets, markers on and off): the peer gets the data with a
/// good CRC, only headers and trailers were copied, and memory the host
/// refuses to reference is copied instead.
#[test]
fn zero_copy_payload_goes_by_reference() {
    for markers in [false, true] {
        let mut p = pair_with(
            true,
            markers,
            Some(RtrSet::one(Rtr::Write)),
            1460,
            vec![65536],
        );
        p.ha.by_ref = Some(0);
        p.hb.by_ref = Some(0);
        p.a.set_tx_ref_min(Some(1));
        p.b.set_tx_ref_min(Some(1));
        let ops = [(1u8, 3000u32), (2, 2500)];
        run_workload(&mut p, &ops).unwrap();
        // a wrote 3000 octets, b answered the Read with 2500: nearly all of
        // it by reference (markers cut payload into pieces, not copies).
        assert_eq!(p.ha.ref_octets, 3000, "markers {markers}");
        assert_eq!(p.hb.ref_octets, 2500, "markers {markers}");
        assert!(p.a.state() == State::Rts && p.b.state() == State::Rts);
    }
    // Declined offers are copied; the stream is the same.
    let mut p = pair_with(
        true,
        false,
        Some(RtrSet::one(Rtr::Write)),
        1460,
        vec![65536],
    );
    p.ha.by_ref = Some(1);
    p.a.set_tx_ref_min(Some(1));
    run_workload(&mut p, &[(1, 3000), (0, 2000)]).unwrap();
    assert_eq!(p.ha.ref_octets, 0);
    assert_eq!(p.ha.offers, 5); // 3 Write FPDUs, 2 Send FPDUs
                                // Below the threshold nothing is offered.
    let mut p = pair_with(
        true,
        false,
        Some(RtrSet::one(Rtr::Write)),
        1460,
        vec![65536],
    );
    p.ha.by_ref = Some(0);
    p.a.set_tx_ref_min(Some(2000));
    run_workload(&mut p, &[(1, 1500)]).unwrap();
    assert_eq!((p.ha.offers, p.ha.ref_octets), (0, 0));
}

/// The kernel's engine: the startup runs in its CM, the QP holds none.
type Qn = Qp<4, 4, NoStartup>;

#[test]
fn no_startup_slot_refuses_in_band_startup() {
    let mut q = Qn::new(QpConfig { pd: PD, emss: 1460 });
    let icfg = InitiatorConfig {
        crc: CrcPolicy::IfPeerAsks,
        markers: false,
        enhanced: true,
        ird: 4,
        ord: 4,
        p2p: None,
        private_data: b"x",
    };
    assert_eq!(q.connect(&icfg), Err(llp::LOCAL_CATA));
    assert_eq!(q.state(), State::Idle);
    assert!(q.peer_private_data().is_empty());
}

#[test]
fn no_startup_qp_is_smaller_and_fits_the_kernel_allocation() {
    use core::mem::size_of;
    // The kernel boxes Qp<32, 32, NoStartup> (rust/qp/mod.rs): at most
    // 8 KiB keeps it in a kmalloc cache instead of an order-2 page.
    assert!(
        size_of::<Qp<32, 32, NoStartup>>() <= 8192,
        "{}",
        size_of::<Qp<32, 32, NoStartup>>()
    );
    assert!(size_of::<Qp<32, 32, NoStartup>>() + size_of::<Startup>() <= size_of::<Qp<32, 32>>());
}

#[test]
fn no_startup_qp_moves_data_after_establish() {
    let p = pair();
    let (mut ha, mut hb) = (p.ha, p.hb);
    let mut a = Qn::new(QpConfig { pd: PD, emss: 1460 });
    let mut b = Qn::new(QpConfig { pd: PD, emss: 1460 });
    let f = p.a.framing();
    a.establish(f, 4, 4, Some(RtrMode::Zero(Rtr::Write)), true);
    b.establish(f, 4, 4, Some(RtrMode::Zero(Rtr::Write)), false);
    let la = ha.mr(0x1000, 64, RW());
    let rb = hb.mr(0x2000, 64, RW());
    hb.mrs
        .last_mut()
        .unwrap()
        .data
        .iter_mut()
        .for_each(|x| *x = 0);
    ha.sq.push_back(wr(
        9,
        SendOp::Write {
            remote: Remote {
                stag: rb,
                to: 0x2000,
            },
        },
        64,
        Local {
            stag: la,
            to: 0x1000,
            handle: 0,
        },
    ));
    let mut buf = vec![0u8; 8192];
    for _ in 0..4 {
        let n = a.tx(&mut ha, &SoftCrc32c, &mut buf);
        b.rx(&mut hb, &SoftCrc32c, &buf[..n]);
        let n = b.tx(&mut hb, &SoftCrc32c, &mut buf);
        a.rx(&mut ha, &SoftCrc32c, &buf[..n]);
    }
    let want: Vec<u8> = (0..64u8).collect();
    assert_eq!(hb.mrs.last().unwrap().data, want);
    assert!(ha
        .cq
        .iter()
        .any(|c| c.wr_id == 9 && c.status == Status::Success));
}

/// A cost probe, not a check of behaviour beyond its asserts: `n` 64-octet
/// Send round trips between two engines (no CRC, no markers), every byte
/// through `tx` and `rx`. Run under valgrind to count the engine's
/// instructions per message (`bench/bench.sh --engine-cost` runs it):
///   RSIW_PROBE_N=1000 valgrind --tool=callgrind target/.../engine-HASH \
///       --ignored --exact qp::tests::send_round_trip_cost_probe
/// and the same with 11000; the difference over 20000 messages.
#[test]
#[ignore = "a cost probe for valgrind"]
fn send_round_trip_cost_probe() {
    let n: u64 = std::env::var("RSIW_PROBE_N")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1000);
    let mut p = pair_with(
        false,
        false,
        Some(RtrSet::one(Rtr::Write)),
        1460,
        vec![65536],
    );
    let src_a = p.ha.mr(0x1000, 64, RW());
    let src_b = p.hb.mr(0x1000, 64, RW());
    let local = |stag| Local {
        stag,
        to: 0x1000,
        handle: 0,
    };
    let mut buf = vec![0u8; 65536];
    for i in 0..n {
        p.hb.post_recv(64);
        p.ha.sq
            .push_back(wr(i, SendOp::Send { invalidate: None }, 64, local(src_a)));
        let k = p.a.tx(&mut p.ha, &SoftCrc32c, &mut buf);
        assert_eq!(p.b.rx(&mut p.hb, &SoftCrc32c, &buf[..k]), k);
        p.ha.post_recv(64);
        p.hb.sq
            .push_back(wr(i, SendOp::Send { invalidate: None }, 64, local(src_b)));
        let k = p.b.tx(&mut p.hb, &SoftCrc32c, &mut buf);
        assert_eq!(p.a.rx(&mut p.ha, &SoftCrc32c, &buf[..k]), k);
        // Each side: its Send's completion and the peer's Send received.
        assert_eq!((p.ha.cq.len(), p.hb.cq.len()), (2, 2), "round trip {i}");
        p.ha.cq.clear();
        p.hb.cq.clear();
        p.ha.snap.clear();
        p.hb.snap.clear();
    }
    assert_eq!(p.a.state(), State::Rts);
    assert_eq!(p.b.state(), State::Rts);
}

/// Found by `qp_stream` (2026-11-26): the connection is lost while a Read
/// Request's FPDU is half sent. The Read is then both the current WQE and
/// in the ORQ (issued when its FPDU started); it must complete once.
#[test]
fn read_cut_short_by_connection_loss_completes_once() {
    let mut p = pair();
    p.pump();
    let sink = p.ha.mr(0x30_000, 5000, RW());
    let rb = p.hb.mr(0x20_000, 5000, RW());
    post_a(
        &mut p,
        wr(
            7,
            SendOp::Read {
                remote: Remote {
                    stag: rb,
                    to: 0x20_000,
                },
            },
            4000,
            Local {
                stag: sink,
                to: 0x30_000,
                handle: 0,
            },
        ),
    );
    post_a(
        &mut p,
        wr(8, SendOp::Send { invalidate: None }, 0, Local::default()),
    );
    // Part of the Read Request's FPDU only.
    let mut out = [0u8; 5];
    assert_eq!(p.a.tx(&mut p.ha, &SoftCrc32c, &mut out), 5);
    p.a.on_connection_lost(&mut p.ha);
    let ids: Vec<u64> =
        p.ha.cq
            .iter()
            .filter(|c| c.queue == WorkQueue::Send)
            .map(|c| c.wr_id)
            .collect();
    assert_eq!(ids, vec![7, 8], "{:?}", p.ha.cq);
    assert!(p.ha.cq.iter().all(|c| c.status == Status::Flushed));
}

/// A Write's FPDU stalls after its header and a few octets; meanwhile the
/// sink's STag comes to name another registration (deregistration and
/// index reuse, or a key that came round). The rest of the FPDU must not
/// reach the new registration: the engine names the registration the
/// header was validated against with every chunk, the host refuses it,
/// and the stream terminates.
#[test]
fn write_stalled_mid_fpdu_never_reaches_a_new_registration() {
    let mut p = pair();
    p.pump();
    let src = p.ha.mr(0x10_000, 1000, RW());
    p.ha.mrs[0].data.fill(0xAA);
    let sink = p.hb.mr(0x20_000, 1000, RW());
    let before = p.hb.mrs[0].data.clone();
    post_a(
        &mut p,
        wr(
            1,
            SendOp::Write {
                remote: Remote {
                    stag: sink,
                    to: 0x20_000,
                },
            },
            1000,
            Local {
                stag: src,
                to: 0x10_000,
                handle: 0,
            },
        ),
    );
    let mut buf = vec![0u8; 4096];
    let n = p.a.tx(&mut p.ha, &SoftCrc32c, &mut buf);
    assert!(n > 1000);
    // MPA length, DDP/RDMAP tagged header (14), 8 payload octets.
    let first = 2 + 14 + 8;
    assert_eq!(p.b.rx(&mut p.hb, &SoftCrc32c, &buf[..first]), first);
    assert_eq!(&p.hb.mrs[0].data[..8], &[0xAA; 8]);
    p.hb.reregister(sink, RW());
    p.hb.mrs[0].data = before.clone();
    assert_eq!(p.b.rx(&mut p.hb, &SoftCrc32c, &buf[first..n]), n - first);
    assert!(p.hb.stale > 0);
    assert_eq!(
        p.hb.mrs[0].data, before,
        "no octet reached the new registration"
    );
    assert!(
        p.hb.events
            .iter()
            .any(|e| matches!(e, Event::LocalTerminate(_))),
        "{:?}",
        p.hb.events
    );
}

/// A Read Request is validated when it comes; its response goes out
/// later. If the source's STag names another registration by then, the
/// response must not read it.
#[test]
fn read_response_never_reads_a_new_registration() {
    let mut p = pair();
    p.pump();
    let sink = p.ha.mr(0x30_000, 3000, RW());
    let src = p.hb.mr(0x20_000, 3000, RW());
    p.ha.mrs[0].data.fill(0);
    p.hb.mrs[0].data.fill(0x55);
    post_a(
        &mut p,
        wr(
            7,
            SendOp::Read {
                remote: Remote {
                    stag: src,
                    to: 0x20_000,
                },
            },
            3000,
            Local {
                stag: sink,
                to: 0x30_000,
                handle: 0,
            },
        ),
    );
    let mut buf = vec![0u8; 4096];
    let n = p.a.tx(&mut p.ha, &SoftCrc32c, &mut buf);
    assert_eq!(p.b.rx(&mut p.hb, &SoftCrc32c, &buf[..n]), n);
    // The request is admitted; now the source is registered anew.
    p.hb.reregister(src, RW());
    p.hb.mrs[0].data.fill(0x66);
    p.pump();
    assert!(p.hb.stale > 0);
    assert!(
        !p.ha.mrs[0].data.contains(&0x66),
        "the new registration's octets were sent"
    );
    // The engine terminates with what the host said about the source (a
    // remote protection error), not a local catastrophic error.
    assert!(
        p.hb.events
            .iter()
            .any(|e| matches!(e, Event::LocalTerminate(t) if *t == rdmape::INVALID_STAG)),
        "{:?}",
        p.hb.events
    );
    let c =
        p.ha.cq
            .iter()
            .find(|c| c.wr_id == 7)
            .expect("the Read completes");
    assert_ne!(c.status, Status::Success);
}

/// RDMA Read with Local Invalidate, as the kernel's rdma_rw posts it on
/// iWARP: chains of unsignaled Reads, only the last signaled, more of
/// them than ORD credits. Every sink is invalidated exactly once, in
/// order, after the last octet of its response is placed and before the
/// Read is complete; a signaled Read's completion comes after its
/// invalidation.
#[test]
fn read_with_invalidate_unsignaled_and_past_ord() {
    // Small TX buffers and deliveries: responses arrive in many chunks.
    let mut p = pair_with(
        true,
        false,
        Some(RtrSet::one(Rtr::Write)),
        1460,
        vec![97, 700, 13, 4096],
    );
    p.pump();
    let src = p.hb.mr(0x20_000, 8 * 3000, RW());
    for (i, b) in p.hb.mrs[0].data.iter_mut().enumerate() {
        *b = (i * 7 % 251) as u8;
    }
    let want = p.hb.mrs[0].data.clone();
    let mut sinks = vec![];
    for i in 0..8u64 {
        let sink = p.ha.mr(0x100_000 * (i + 1), 3000, RW());
        sinks.push(sink);
        let mut w = wr(
            i,
            SendOp::Read {
                remote: Remote {
                    stag: src,
                    to: 0x20_000 + 3000 * i,
                },
            },
            3000,
            Local {
                stag: sink,
                to: 0x100_000 * (i + 1),
                handle: 0,
            },
        );
        w.flags = Flags::INVALIDATE_SINK.with(if i == 7 { Flags::SIGNALED } else { Flags::NONE });
        post_a(&mut p, w);
    }
    p.pump();
    let invs: Vec<u32> = p.ha.local_invs.iter().map(|(s, _)| *s).collect();
    assert_eq!(invs, sinks, "each sink once, in order");
    for (i, (_, data)) in p.ha.local_invs.iter().enumerate() {
        assert_eq!(
            data[..],
            want[3000 * i..3000 * (i + 1)],
            "sink {i} whole before its invalidation"
        );
    }
    assert!(p.ha.mrs.iter().all(|m| !m.valid));
    let sends: Vec<_> =
        p.ha.cq
            .iter()
            .filter(|c| c.queue == WorkQueue::Send)
            .collect();
    assert_eq!(sends.len(), 1, "{sends:?}");
    assert_eq!((sends[0].wr_id, sends[0].status), (7, Status::Success));
    assert!(
        p.ha.events.is_empty()
            || !p
                .ha
                .events
                .iter()
                .any(|e| matches!(e, Event::LocalTerminate(_)))
    );
}

/// A Read with Local Invalidate whose sink cannot be invalidated (the
/// consumer invalidated it already) completes in error and ends the
/// stream, as on siw.
#[test]
fn read_with_invalidate_of_an_invalid_sink_fails() {
    let mut p = pair();
    p.pump();
    let src = p.hb.mr(0x20_000, 100, RW());
    let sink = p.ha.mr(0x30_000, 100, RW());
    let mut w = wr(
        3,
        SendOp::Read {
            remote: Remote {
                stag: src,
                to: 0x20_000,
            },
        },
        100,
        Local {
            stag: sink,
            to: 0x30_000,
            handle: 0,
        },
    );
    w.flags = Flags::INVALIDATE_SINK;
    post_a(&mut p, w);
    let mut buf = vec![0u8; 4096];
    let n = p.a.tx(&mut p.ha, &SoftCrc32c, &mut buf);
    assert_eq!(p.b.rx(&mut p.hb, &SoftCrc32c, &buf[..n]), n);
    let m = p.b.tx(&mut p.hb, &SoftCrc32c, &mut buf);
    // The response is placed whole, then its invalidation fails.
    p.ha.fail_inv = true;
    assert_eq!(p.a.rx(&mut p.ha, &SoftCrc32c, &buf[..m]), m);
    assert_eq!(p.ha.local_invs.len(), 1);
    let c =
        p.ha.cq
            .iter()
            .find(|c| c.wr_id == 3)
            .expect("the Read completes");
    assert!(matches!(c.status, Status::LocalError(_)), "{c:?}");
    assert!(p
        .ha
        .events
        .iter()
        .any(|e| matches!(e, Event::LocalTerminate(_))));
}

/// A host whose queues are refilled as fast as a flush takes from them (a
/// process moving its rings' producer index from another thread): the
/// flush ends, after at most `MAX_FLUSH` WRs from each queue.
#[test]
fn flush_of_queues_that_keep_filling_ends() {
    let mut p = pair();
    p.ha.endless = true;
    p.a.on_connection_lost(&mut p.ha);
    assert_eq!(p.a.state(), State::Error);
    assert_eq!(p.ha.taken, [MAX_FLUSH, MAX_FLUSH]);
    assert_eq!(p.ha.counted, [MAX_FLUSH, MAX_FLUSH]);
}

/// Receives from a queue shared with other QPs (an SRQ): a stream that
/// ends flushes only the receive it took for the message in progress;
/// the queue's other WRs stay for the other QPs. Nothing taken: nothing
/// flushed.
#[test]
fn srq_flush_takes_only_the_claimed_receive() {
    for mid_message in [true, false] {
        let mut p = pair();
        p.hb.srq = true;
        let ids: Vec<u64> = (0..4).map(|_| p.hb.post_recv(8192)).collect();
        let src = p.ha.mr(0x1000, 8192, RW());
        if mid_message {
            // A Send of several FPDUs, of which only the first arrives.
            post_a(
                &mut p,
                wr(
                    1,
                    SendOp::Send { invalidate: None },
                    6000,
                    Local {
                        stag: src,
                        to: 0x1000,
                        handle: 0,
                    },
                ),
            );
            let mut buf = vec![0u8; 1600];
            let n = p.a.tx(&mut p.ha, &SoftCrc32c, &mut buf);
            assert!(n > 0);
            assert_eq!(p.b.rx(&mut p.hb, &SoftCrc32c, &buf[..n]), n);
            assert_eq!(p.hb.claimed.map(|r| r.wr_id), Some(ids[0]));
        }
        p.b.on_connection_lost(&mut p.hb);
        assert_eq!(p.b.state(), State::Error);
        let flushed: Vec<u64> =
            p.hb.cq
                .iter()
                .filter(|c| c.queue == WorkQueue::Recv)
                .inspect(|c| assert_eq!(c.status, Status::Flushed))
                .map(|c| c.wr_id)
                .collect();
        let left: Vec<u64> = p.hb.rq.iter().map(|r| r.wr_id).collect();
        if mid_message {
            assert_eq!(flushed, [ids[0]]);
            assert_eq!(left, ids[1..]);
        } else {
            assert_eq!(flushed, [] as [u64; 0]);
            assert_eq!(left, ids);
        }
        assert!(p.hb.claimed.is_none());
    }
}
