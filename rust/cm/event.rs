// SPDX-License-Identifier: GPL-2.0
//! Events to `iw_cm`: what the CM reports and the trait its target implements.

use super::*;

// ---- events -------------------------------------------------------------

pub(crate) use crate::ffi::ib::{CmEvent, CmEventKind};

/// Where events go: an `iw_cm_id` (`ffi::ib::CmId`, which holds a
/// reference on it until dropped) or a test recorder. `deliver` may be
/// called in any context, with spinlocks held: it must not sleep.
pub(crate) trait CmEventTarget: Send + Sync {
    fn deliver(&self, ev: &CmEvent<'_>) -> Result;
}

pub(crate) fn clamp_u8(v: u16) -> u8 {
    u8::try_from(v).unwrap_or(u8::MAX)
}

pub(crate) fn send_event(target: &dyn CmEventTarget, ev: &CmEvent<'_>) {
    if let Err(e) = target.deliver(ev) {
        cm_log!("cm: event {:?} not delivered: {:?}\n", ev.kind, e);
    }
}
