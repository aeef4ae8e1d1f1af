// SPDX-License-Identifier: GPL-2.0
//! What a device's CM offers, beyond [`CmConfig::for_device`]: the module
//! parameters that are the defaults of every device (`mpa_crc`, `p2p_rtr`,
//! `rtr_delay_ms`) and each device's overrides of them and of markers,
//! which its sysfs settings (`crate::device::settings`) and the self-tests
//! set (`None` everywhere means the module-wide defaults). A connection
//! takes its device's values when it is set up: an initiator's at
//! `iw_connect`, a responder's when its listener was created.

use core::sync::atomic::{AtomicU32, AtomicU8, Ordering};

use crate::{
    cm::CmConfig,
    engine::{
        mpa::negotiate::CrcPolicy,
        wire::mpa::{Rtr, RtrSet},
    },
};

/// The largest RTR delay, in ms (`rtr_delay_ms`).
pub(crate) const MAX_RTR_DELAY_MS: u32 = 1000;

/// The RTR kinds the `p2p_rtr` parameter asks an initiator to offer
/// (bit 0 zero-length Send, bit 1 Write, bit 2 Read); `None` (0):
/// client-server, no peer-to-peer mode.
pub(crate) fn offered_rtr() -> Option<RtrSet> {
    rtr_of_bits(crate::module_parameters::p2p_rtr.value() as u8)
}

/// The CRC policy of the `mpa_crc` parameter: ask for CRC on every
/// connection, or use it when the peer asks.
pub(crate) fn default_crc() -> CrcPolicy {
    if crate::module_parameters::mpa_crc.value() {
        CrcPolicy::Required
    } else {
        CrcPolicy::IfPeerAsks
    }
}

/// The initiator's RTR delay of the `rtr_delay_ms` parameter, bounded.
pub(crate) fn default_rtr_delay_ms() -> u32 {
    crate::module_parameters::rtr_delay_ms
        .value()
        .min(MAX_RTR_DELAY_MS)
}

/// The RTR kinds of `p2p_rtr`'s bits (`None`: none, client-server).
pub(crate) fn rtr_of_bits(v: u8) -> Option<RtrSet> {
    let set = RtrSet::from_flags(v & 1 != 0, v & 2 != 0, v & 4 != 0);
    (!set.is_empty()).then_some(set)
}

/// `p2p_rtr`'s bits of an RTR offer.
pub(crate) fn bits_of_rtr(set: Option<RtrSet>) -> u8 {
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
    /// 0 no markers asked for, 1 asked for, or `UNSET` (none).
    markers: AtomicU8,
    /// RTR delay in ms, or `u32::MAX`.
    rtr_delay_ms: AtomicU32,
}

impl CmTuning {
    pub(crate) const fn new() -> Self {
        Self {
            p2p: AtomicU8::new(UNSET),
            crc: AtomicU8::new(UNSET),
            markers: AtomicU8::new(UNSET),
            rtr_delay_ms: AtomicU32::new(u32::MAX),
        }
    }

    /// What an initiator of this device offers: `Some(None)` client-server,
    /// `Some(Some(kinds))` peer-to-peer with `kinds`, `None` the default.
    pub(crate) fn set_p2p(&self, p2p: Option<Option<RtrSet>>) {
        self.p2p
            .store(p2p.map_or(UNSET, bits_of_rtr), Ordering::Relaxed);
    }

    /// The CRC policy of this device (`None`: the `mpa_crc` default).
    pub(crate) fn set_crc(&self, crc: Option<CrcPolicy>) {
        let v = match crc {
            None => UNSET,
            Some(CrcPolicy::IfPeerAsks) => 0,
            Some(CrcPolicy::Required) => 1,
            Some(CrcPolicy::Never) => 2,
        };
        self.crc.store(v, Ordering::Relaxed);
    }

    /// Whether this device asks its peers for markers on what it receives
    /// (`None`: the default, no).
    pub(crate) fn set_markers(&self, markers: Option<bool>) {
        self.markers
            .store(markers.map_or(UNSET, u8::from), Ordering::Relaxed);
    }

    /// The initiator's RTR delay of this device (`None`: `rtr_delay_ms`),
    /// at most [`MAX_RTR_DELAY_MS`].
    pub(crate) fn set_rtr_delay_ms(&self, ms: Option<u32>) {
        self.rtr_delay_ms.store(
            ms.map_or(u32::MAX, |m| m.min(MAX_RTR_DELAY_MS)),
            Ordering::Relaxed,
        );
    }

    /// The RTR kinds an initiator of this device offers (`None`:
    /// client-server).
    pub(crate) fn p2p(&self) -> Option<RtrSet> {
        match self.p2p.load(Ordering::Relaxed) {
            UNSET => offered_rtr(),
            v => rtr_of_bits(v),
        }
    }

    /// The device's CRC policy.
    pub(crate) fn crc(&self) -> CrcPolicy {
        match self.crc.load(Ordering::Relaxed) {
            0 => CrcPolicy::IfPeerAsks,
            1 => CrcPolicy::Required,
            2 => CrcPolicy::Never,
            _ => default_crc(),
        }
    }

    /// Whether the device asks for markers on what it receives.
    pub(crate) fn markers(&self) -> bool {
        self.markers.load(Ordering::Relaxed) == 1
    }

    /// The device's initiator RTR delay, in ms.
    pub(crate) fn rtr_delay_ms(&self) -> u32 {
        match self.rtr_delay_ms.load(Ordering::Relaxed) {
            u32::MAX => default_rtr_delay_ms(),
            ms => ms,
        }
    }

    /// `cfg` with the device's settings.
    pub(crate) fn apply(&self, mut cfg: CmConfig) -> CmConfig {
        cfg.p2p = self.p2p();
        cfg.crc = self.crc();
        cfg.markers = self.markers();
        cfg.rtr_delay_ms = self.rtr_delay_ms();
        cfg
    }
}
