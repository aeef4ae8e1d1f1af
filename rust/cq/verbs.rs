// SPDX-License-Identifier: GPL-2.0
//! The CQ verbs: rsiw's implementation of the RDMA core's CQ trait, within
//! the device's `max_cq` and `max_cqe`.

use kernel::prelude::*;

use super::{Arm, Cq, CqNotifier};
use crate::{
    device::{Device, Rsiw},
    ffi::ib::{CqOps, CqSlot, WcWriter},
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
    fn create(dev: &Device, cqe: u32, notifier: CqNotifier, slot: CqSlot<'_, Rsiw>) -> Result<u32> {
        let n = checked_cqe(dev, cqe)?;
        dev.alloc_cq()?;
        Cq::new(n, notifier).and_then(|init| slot.pin_init(init)).inspect_err(|_| dev.dealloc_cq())?;
        Ok(cqe)
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
