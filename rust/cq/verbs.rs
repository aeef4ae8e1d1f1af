// SPDX-License-Identifier: GPL-2.0
//! The CQ verbs: rsiw's implementation of the RDMA core's CQ trait, within
//! the device's `max_cq` and `max_cqe`.

use kernel::prelude::*;

use super::{Arm, Cq, CqNotifier};
use crate::{
    device::{Device, Rsiw},
    ffi::ib::{abi, rsiw_create_cq_req, rsiw_create_cq_resp, CqOps, CqSlot, Udata, WcWriter},
    ring::CompletionRing,
};

/// The ring size for a requested `cqe`: at least 1, at most `max_cqe`.
fn checked_cqe(dev: &Device, cqe: u32) -> Result<usize> {
    if cqe == 0 || cqe > dev.limits().max_cqe {
        return Err(EINVAL);
    }
    Ok(cqe as usize)
}

#[vtable]
impl CqOps<Rsiw> for Cq {
    fn create(
        dev: &Device,
        cqe: u32,
        notifier: CqNotifier,
        slot: CqSlot<'_, Rsiw>,
        udata: Option<&mut Udata<'_>>,
    ) -> Result<u32> {
        let n = checked_cqe(dev, cqe)?;
        let ring = match udata {
            Some(u)
                if u.read_create_req::<rsiw_create_cq_req>()?.flags & abi::CREATE_RINGS != 0 =>
            {
                let ring = CompletionRing::new(u, cqe)?;
                let resp = rsiw_create_cq_resp { cq: ring.info() };
                u.write(&resp)?;
                Some(ring)
            }
            // A version 1 context: polled and armed through commands.
            _ => None,
        };
        dev.alloc_cq()?;
        let granted = ring.as_ref().map_or(cqe, |r| r.entries());
        let res = match ring {
            Some(ring) => slot.pin_init(Cq::new_user(ring, notifier)),
            None => Cq::new(n, notifier).and_then(|init| slot.pin_init(init)),
        };
        res.inspect_err(|_| dev.dealloc_cq())?;
        Ok(granted)
    }

    fn destroy(&self, dev: &Device) {
        dev.dealloc_cq();
    }

    fn resize(&self, dev: &Device, cqe: u32) -> Result<u32> {
        self.resize(checked_cqe(dev, cqe)?)?;
        Ok(cqe)
    }

    fn poll(&self, out: &mut WcWriter<'_>) -> usize {
        Cq::poll(self, out.remaining(), |_, c| {
            out.push(c);
        })
    }

    fn arm(&self, how: Arm) -> bool {
        Cq::arm(self, how)
    }
}
