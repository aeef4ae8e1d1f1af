// SPDX-License-Identifier: GPL-2.0
//! CM configuration: MPA policy per device (CRC, markers, RTR, timeouts,
//! IRD/ORD limits) and the connection parameters of `iw_connect`/`iw_accept`.

use super::*;

// ---- configuration ------------------------------------------------------

/// The device's MPA settings and the CM's timeouts.
#[derive(Clone)]
pub(crate) struct CmConfig {
    /// CRC: used if the peer asks (`IfPeerAsks`) or always (`Required`).
    pub(crate) crc: CrcPolicy,
    /// Ask for markers on what we receive (we always honour the peer's M).
    pub(crate) markers: bool,
    /// Initiator: peer-to-peer mode with these RTR kinds (`None`:
    /// client-server).
    pub(crate) p2p: Option<RtrSet>,
    /// Responder: the RTR kinds accepted from a peer-to-peer initiator.
    pub(crate) rtr: RtrSet,
    /// Device limits for IRD/ORD.
    pub(crate) max_ird: u16,
    pub(crate) max_ord: u16,
    /// Bound on TCP connect + MPA exchange (each side).
    pub(crate) mpa_timeout_ms: u32,
    /// Responder: bound on the wait for the initiator's RTR after accept.
    pub(crate) rtr_timeout_ms: u32,
    /// Initiator: wait this long after the MPA Reply before the RTR goes
    /// out. Linux siw as responder arms its RTR receive path only after
    /// sending its Reply and misses an RTR that comes first (a connection
    /// that then never establishes); over a fast link a delay avoids it.
    pub(crate) rtr_delay_ms: u32,
    /// The device's counters, for connection outcomes (`None`: not
    /// counted, the self-tests' endpoints).
    pub(crate) counters: Option<Arc<HwCounters>>,
}

impl CmConfig {
    /// MPA Rev 2, enhanced (RFC 6581) with IRD/ORD, CRC if the peer asks
    /// (always with the `mpa_crc` module parameter), markers honoured,
    /// peer-to-peer offering the RTR kinds of the `p2p_rtr` module
    /// parameter (default: every kind), 10 s timeouts: the module-wide
    /// defaults, which a device's settings override (`cm::tuning`).
    pub(crate) fn for_device(limits: &Limits) -> Self {
        let cap = |v: u32| u16::try_from(v).unwrap_or(u16::MAX).min(IRD_ORD_MASK - 1);
        Self {
            crc: crate::cm::tuning::default_crc(),
            markers: false,
            p2p: crate::cm::tuning::offered_rtr(),
            rtr: RtrSet::ALL,
            max_ird: cap(limits.max_ird),
            max_ord: cap(limits.max_ord),
            mpa_timeout_ms: 10_000,
            rtr_timeout_ms: 10_000,
            rtr_delay_ms: crate::cm::tuning::default_rtr_delay_ms(),
            counters: None,
        }
    }

    pub(crate) fn responder(&self, ird: u16, ord: u16) -> ResponderConfig {
        ResponderConfig {
            max_rev: 2,
            crc: self.crc,
            markers: self.markers,
            ird,
            ord,
            min_ord: 0,
            rtr: self.rtr,
        }
    }

    pub(crate) fn initiator<'a>(
        &self,
        ird: u16,
        ord: u16,
        private_data: &'a [u8],
    ) -> InitiatorConfig<'a> {
        InitiatorConfig {
            crc: self.crc,
            markers: self.markers,
            enhanced: true,
            ird,
            ord,
            p2p: self.p2p,
            private_data,
        }
    }

    /// The ULP's IRD/ORD, checked against the device limits.
    pub(crate) fn ird_ord(&self, ird: u32, ord: u32) -> Result<(u16, u16)> {
        let ird = u16::try_from(ird).map_err(|_| EINVAL)?;
        let ord = u16::try_from(ord).map_err(|_| EINVAL)?;
        if ird > self.max_ird || ord > self.max_ord {
            return Err(EINVAL);
        }
        Ok((ird, ord))
    }
}

pub(crate) use crate::ffi::ib::ConnParams;
