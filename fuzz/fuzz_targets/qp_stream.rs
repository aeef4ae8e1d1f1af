// SPDX-License-Identifier: GPL-2.0
//! The QP state machine past negotiation, as initiator or responder, with
//! every framing and RTR mode, fed an arbitrary byte stream in arbitrary
//! chunks; TX runs between chunks. Checks: no panic, `rx` consumes all
//! input, and after the connection is lost every posted receive and send
//! request has been completed exactly once.
#![no_main]

use libfuzzer_sys::fuzz_target;
use rsiw_engine::crc::Crc32c;
use rsiw_engine::ddp::{Access, Region, StagTable};
use rsiw_engine::error::{rdmap, TermError};
use rsiw_engine::mpa::negotiate::{Framing, RtrMode};
use rsiw_engine::qp::{
    Completion, Event, Flags, Host, Local, Qp, QpConfig, RecvWr, Remote, SendOp, SendWr, WorkQueue,
};
use rsiw_engine::rdmap::{atomic_execute, AtomicPlan};
use rsiw_engine::wire::mpa::Rtr;

struct HwCrc;

impl Crc32c for HwCrc {
    fn append(&self, crc: u32, data: &[u8]) -> u32 {
        crc32c::crc32c_append(crc, data)
    }
}

/// One 4 KiB region, STag 0x100, TO 0x1000, all rights.
struct H {
    mem: [u8; 4096],
    sq: Vec<SendWr>,
    rq: Vec<RecvWr>,
    cq: Vec<Completion>,
}

impl StagTable for H {
    fn lookup(&self, stag: u32) -> Option<Region> {
        let access = Access::LOCAL_WRITE
            | Access::REMOTE_READ
            | Access::REMOTE_WRITE
            | Access::REMOTE_ATOMIC
            | Access::COMMIT;
        (stag == 0x100).then_some(Region {
            base_to: 0x1000,
            len: 4096,
            access,
            pd: 1,
            valid: true,
            durable: true,
            reg: 1,
        })
    }
}

impl H {
    fn at(&mut self, to: u64, len: usize) -> Result<&mut [u8], TermError> {
        let off = to.checked_sub(0x1000).ok_or(rdmap::LOCAL_CATA)? as usize;
        self.mem
            .get_mut(off..off.checked_add(len).ok_or(rdmap::LOCAL_CATA)?)
            .ok_or(rdmap::LOCAL_CATA)
    }
}

impl Host for H {
    fn sq_next(&mut self) -> Option<SendWr> {
        (!self.sq.is_empty()).then(|| self.sq.remove(0))
    }
    fn rq_peek(&mut self) -> Option<RecvWr> {
        self.rq.first().copied()
    }
    fn rq_pop(&mut self) -> Option<RecvWr> {
        (!self.rq.is_empty()).then(|| self.rq.remove(0))
    }
    fn complete(&mut self, c: Completion) {
        self.cq.push(c);
    }
    fn event(&mut self, _e: Event) {}
    fn read_source(&mut self, wr: &Local, offset: u32, dst: &mut [u8]) -> Result<(), TermError> {
        dst.copy_from_slice(self.at(wr.to + u64::from(offset), dst.len())?);
        Ok(())
    }
    fn read_tagged(
        &mut self,
        _stag: u32,
        reg: u64,
        to: u64,
        dst: &mut [u8],
    ) -> Result<(), TermError> {
        assert_eq!(
            reg, 1,
            "a tagged access names the registration it was validated against"
        );
        dst.copy_from_slice(self.at(to, dst.len())?);
        Ok(())
    }
    fn place_tagged(
        &mut self,
        _stag: u32,
        reg: u64,
        to: u64,
        data: &[u8],
    ) -> Result<(), TermError> {
        assert_eq!(
            reg, 1,
            "a tagged access names the registration it was validated against"
        );
        self.at(to, data.len())?.copy_from_slice(data);
        Ok(())
    }
    fn place_recv(&mut self, wr: &RecvWr, offset: u32, data: &[u8]) -> Result<(), TermError> {
        assert!(u64::from(offset) + data.len() as u64 <= u64::from(wr.len));
        Ok(())
    }
    fn atomic(&mut self, plan: &AtomicPlan) -> Result<u64, TermError> {
        let s = self.at(plan.to, 8)?;
        let old = u64::from_le_bytes(s.try_into().unwrap());
        let (new, orig) = atomic_execute(old, &plan.request)?;
        if let Some(n) = new {
            s.copy_from_slice(&n.to_le_bytes());
        }
        Ok(orig)
    }
    fn write_atomic_result(&mut self, _wr: &Local, _original: u64) -> Result<(), TermError> {
        Ok(())
    }
    fn make_durable(&mut self, _r: &rsiw_engine::wire::commit::Region) -> bool {
        true
    }
    fn invalidate(&mut self, _stag: u32) -> Result<(), TermError> {
        Ok(())
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((cfg, rest)) = data.split_first_chunk::<4>() else {
        return;
    };
    let initiator = cfg[0] & 1 != 0;
    let framing = Framing {
        crc: cfg[0] & 2 != 0,
        markers_tx: cfg[0] & 4 != 0,
        markers_rx: cfg[0] & 8 != 0,
    };
    let rtr = match cfg[0] >> 4 & 3 {
        0 => None,
        1 => Some(RtrMode::Zero(Rtr::Send)),
        2 => Some(RtrMode::Zero(Rtr::Write)),
        _ => Some(RtrMode::Zero(Rtr::Read)),
    };
    let chunk = |k: usize| 1 + usize::from(cfg[1 + k % 2]);
    let mut qp: Box<Qp<4, 4>> = Box::new(Qp::new(QpConfig {
        pd: 1,
        emss: 64 + usize::from(cfg[3]) * 8,
    }));
    qp.establish(
        framing,
        u16::from(cfg[3] & 7),
        u16::from(cfg[3] >> 5),
        rtr,
        initiator,
    );
    let mut h = H {
        mem: [0; 4096],
        sq: Vec::new(),
        rq: Vec::new(),
        cq: Vec::new(),
    };
    let local = Local {
        stag: 0x100,
        to: 0x1000,
        handle: 0,
    };
    let remote = Remote {
        stag: 0x100,
        to: 0x1000,
    };
    for (i, op) in [
        SendOp::Send { invalidate: None },
        SendOp::Read { remote },
        SendOp::Write { remote },
        SendOp::Immediate { data: [0; 8] },
    ]
    .into_iter()
    .enumerate()
    {
        h.sq.push(SendWr {
            wr_id: i as u64,
            flags: Flags::SIGNALED,
            op,
            len: 300,
            local,
        });
        h.rq.push(RecvWr {
            wr_id: 100 + i as u64,
            len: 200,
        });
    }
    let mut out = [0u8; 512];
    let (mut at, mut k) = (0, 0);
    while at < rest.len() {
        let _ = qp.tx(&mut h, &HwCrc, &mut out[..chunk(k + 1).min(512)]);
        let n = chunk(k).min(rest.len() - at);
        k += 1;
        assert_eq!(qp.rx(&mut h, &HwCrc, &rest[at..at + n]), n);
        at += n;
    }
    let _ = qp.tx(&mut h, &HwCrc, &mut out);
    qp.on_connection_lost(&mut h);
    let mut sends: Vec<u64> =
        h.cq.iter()
            .filter(|c| c.queue == WorkQueue::Send)
            .map(|c| c.wr_id)
            .collect();
    let mut recvs: Vec<u64> =
        h.cq.iter()
            .filter(|c| c.queue == WorkQueue::Recv)
            .map(|c| c.wr_id)
            .collect();
    sends.sort_unstable();
    recvs.sort_unstable();
    assert_eq!(sends, vec![0, 1, 2, 3], "{:?}", h.cq);
    assert_eq!(recvs, vec![100, 101, 102, 103], "{:?}", h.cq);
});
