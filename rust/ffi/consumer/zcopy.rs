// SPDX-License-Identifier: GPL-2.0
//! Self-test access to what the stack does with a notification's skbs.

use kernel::prelude::*;

use crate::ffi::{net::zcopy::Notif, sys};

/// Builds an skb with a page of `notif` as TCP queues it, then clones
/// it as every transmit does (`local` false) or orphans its frags as
/// delivery to a local socket does (`local` true). Whether the queued
/// skb still refers to the page itself (not a copy).
pub(crate) fn skb_keeps_page(notif: &Notif, local: bool) -> Result<bool> {
    // SAFETY: `notif` holds a reference on a live notification; the
    // helper's skbs take and drop their own before it returns.
    let r = unsafe { sys::rsiw_zc_probe_skb(notif.0.as_ptr(), local) };
    kernel::error::to_result(r.min(0))?;
    Ok(r == 1)
}
