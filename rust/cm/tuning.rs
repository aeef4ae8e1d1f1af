// SPDX-License-Identifier: GPL-2.0
//! What a device's CM offers, beyond [`CmConfig::for_device`]: the
//! `p2p_rtr` module parameter (the RTR kinds an initiator offers) and
//! per-device overrides of the RTR offer, the RTR delay and the CRC policy
//! (set by the self-tests; `None` everywhere means the module-wide
//! defaults).

use core::sync::atomic::{AtomicU32, AtomicU8, Ordering};

#[cfg(rsiw_kunit)]
use crate::engine::wire::mpa::Rtr;
use crate::{
    cm::CmConfig,
    engine::{mpa::negotiate::CrcPolicy, wire::mpa::RtrSet},
};

/// The RTR kinds the `p2p_rtr` parameter asks an initiator to offer
/// (bit 0 zero-length Send, bit 1 Write, bit 2 Read); `None` (0):
/// client-server, no peer-to-peer mode.
pub(crate) fn offered_rtr() -> Option<RtrSet> {
    rtr_of_bits(crate::module_parameters::p2p_rtr.value() as u8)
}

fn rtr_of_bits(v: u8) -> Option<RtrSet> {
    let set = RtrSet::from_flags(v & 1 != 0, v & 2 != 0, v & 4 != 0);
    (!set.is_empty()).then_some(set)
}

#[cfg(rsiw_kunit)]
fn bits_of_rtr(set: Option<RtrSet>) -> u8 {
    set.map_or(0, |s| {
        u8::from(s.contains(Rtr::Send))
            | u8::from(s.contains(Rtr::Write)) << 1
            | u8::from(s.contains(Rtr::Read)) << 2
    })
}

/// "No override" in the atomics below.
const UNSET: u8 = 0xff;

/// Per-device overrides of the CM settings.
pub(crate) struct CmTuning {
    /// RTR bits as for `p2p_rtr`, or `UNSET`.
    p2p: AtomicU8,
    /// 0 IfPeerAsks, 1 Required, 2 Never, or `UNSET`.
    crc: AtomicU8,
    /// RTR delay in ms, or `u32::MAX`.
    rtr_delay_ms: AtomicU32,
}

impl CmTuning {
    pub(crate) const fn new() -> Self {
        Self {
            p2p: AtomicU8::new(UNSET),
            crc: AtomicU8::new(UNSET),
            rtr_delay_ms: AtomicU32::new(u32::MAX),
        }
    }

    /// What an initiator of this device offers: `Some(None)` client-server,
    /// `Some(Some(kinds))` peer-to-peer with `kinds`, `None` the default.
    #[cfg(rsiw_kunit)]
    pub(crate) fn set_p2p(&self, p2p: Option<Option<RtrSet>>) {
        self.p2p
            .store(p2p.map_or(UNSET, bits_of_rtr), Ordering::Relaxed);
    }

    /// The CRC policy of this device (`None`: the `mpa_crc` default).
    #[cfg(rsiw_kunit)]
    pub(crate) fn set_crc(&self, crc: Option<CrcPolicy>) {
        let v = match crc {
            None => UNSET,
            Some(CrcPolicy::IfPeerAsks) => 0,
            Some(CrcPolicy::Required) => 1,
            Some(CrcPolicy::Never) => 2,
        };
        self.crc.store(v, Ordering::Relaxed);
    }

    /// The initiator's RTR delay of this device (`None`: `rtr_delay_ms`).
    #[cfg(rsiw_kunit)]
    pub(crate) fn set_rtr_delay_ms(&self, ms: Option<u32>) {
        self.rtr_delay_ms
            .store(ms.map_or(u32::MAX, |m| m.min(1000)), Ordering::Relaxed);
    }

    /// `cfg` with the overrides applied.
    pub(crate) fn apply(&self, mut cfg: CmConfig) -> CmConfig {
        match self.p2p.load(Ordering::Relaxed) {
            UNSET => {}
            v => cfg.p2p = rtr_of_bits(v),
        }
        match self.crc.load(Ordering::Relaxed) {
            0 => cfg.crc = CrcPolicy::IfPeerAsks,
            1 => cfg.crc = CrcPolicy::Required,
            2 => cfg.crc = CrcPolicy::Never,
            _ => {}
        }
        match self.rtr_delay_ms.load(Ordering::Relaxed) {
            u32::MAX => {}
            ms => cfg.rtr_delay_ms = ms,
        }
        cfg
    }
}
