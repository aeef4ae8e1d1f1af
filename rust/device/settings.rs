// SPDX-License-Identifier: GPL-2.0
//! A device's settings, as sysfs attributes of its ib_device
//! (`/sys/class/infiniband/NAME/`, Documentation/usage.md, "Per-device
//! settings"): the MPA CRC policy, markers, the peer-to-peer RTR offer and
//! the RTR delay. Each reads as the device's value (its override, or the
//! module parameter that is the default) and takes a new value, or
//! `default` to follow the module parameter again; a connection set up
//! after the write gets it (`cm::tuning`).

use core::fmt::{self, Write};

use kernel::{prelude::*, str::CStr};

use super::{Device, Rsiw};
use crate::{
    cm::tuning::{bits_of_rtr, rtr_of_bits, MAX_RTR_DELAY_MS},
    engine::{mpa::negotiate::CrcPolicy, wire::mpa::RtrSet},
    ffi::ib::{Settings, ShowBuf},
};

/// The settings, in the order of [`Setting::ALL`].
const NAMES: [&CStr; 4] = [c"mpa_crc", c"mpa_markers", c"p2p_rtr", c"rtr_delay_ms"];

/// One of a device's settings.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Setting {
    /// `if_peer_asks`, `required` or `never` (`0` and `1` as the
    /// `mpa_crc` parameter's values).
    MpaCrc,
    /// `0` or `1`: ask the peer for markers on what this device receives.
    MpaMarkers,
    /// `0` to `7`, the bits of the `p2p_rtr` parameter.
    P2pRtr,
    /// `0` to `1000`, as the `rtr_delay_ms` parameter.
    RtrDelayMs,
}

impl Setting {
    const ALL: [Setting; 4] = [
        Setting::MpaCrc,
        Setting::MpaMarkers,
        Setting::P2pRtr,
        Setting::RtrDelayMs,
    ];
}

/// A value written to a setting.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Value {
    /// `default`: follow the module parameter again.
    Default,
    Crc(CrcPolicy),
    Markers(bool),
    P2p(Option<RtrSet>),
    DelayMs(u32),
}

/// What was written, less one trailing newline (`echo`'s).
fn trimmed(input: &[u8]) -> &[u8] {
    input.strip_suffix(b"\n").unwrap_or(input)
}

/// A decimal number of at most `max`, digits only.
fn number(s: &[u8], max: u32) -> Result<u32> {
    if s.is_empty() || s.len() > 10 {
        return Err(EINVAL);
    }
    let mut v: u32 = 0;
    for &c in s {
        if !c.is_ascii_digit() {
            return Err(EINVAL);
        }
        v = v
            .checked_mul(10)
            .and_then(|v| v.checked_add(u32::from(c - b'0')))
            .ok_or(EINVAL)?;
    }
    if v > max {
        return Err(EINVAL);
    }
    Ok(v)
}

/// The value `input` sets `setting` to: `EINVAL` for anything but one of
/// its values or `default`.
fn parse(setting: Setting, input: &[u8]) -> Result<Value> {
    let s = trimmed(input);
    if s == b"default" {
        return Ok(Value::Default);
    }
    Ok(match setting {
        Setting::MpaCrc => Value::Crc(match s {
            b"if_peer_asks" | b"0" => CrcPolicy::IfPeerAsks,
            b"required" | b"1" => CrcPolicy::Required,
            b"never" => CrcPolicy::Never,
            _ => return Err(EINVAL),
        }),
        Setting::MpaMarkers => Value::Markers(number(s, 1)? == 1),
        Setting::P2pRtr => Value::P2p(rtr_of_bits(number(s, 7)? as u8)),
        Setting::RtrDelayMs => Value::DelayMs(number(s, MAX_RTR_DELAY_MS)?),
    })
}

fn crc_name(crc: CrcPolicy) -> &'static str {
    match crc {
        CrcPolicy::IfPeerAsks => "if_peer_asks",
        CrcPolicy::Required => "required",
        CrcPolicy::Never => "never",
    }
}

impl Device {
    /// Sets `setting` from what a writer gave.
    fn store_setting(&self, setting: Setting, input: &[u8]) -> Result {
        let t = self.cm_tuning();
        match (setting, parse(setting, input)?) {
            (Setting::MpaCrc, Value::Default) => t.set_crc(None),
            (Setting::MpaCrc, Value::Crc(c)) => t.set_crc(Some(c)),
            (Setting::MpaMarkers, Value::Default) => t.set_markers(None),
            (Setting::MpaMarkers, Value::Markers(m)) => t.set_markers(Some(m)),
            (Setting::P2pRtr, Value::Default) => t.set_p2p(None),
            (Setting::P2pRtr, Value::P2p(p)) => t.set_p2p(Some(p)),
            (Setting::RtrDelayMs, Value::Default) => t.set_rtr_delay_ms(None),
            (Setting::RtrDelayMs, Value::DelayMs(ms)) => t.set_rtr_delay_ms(Some(ms)),
            _ => return Err(EINVAL),
        }
        Ok(())
    }

    /// Writes the value of `setting` (one line).
    fn show_setting(&self, setting: Setting, out: &mut impl Write) -> fmt::Result {
        let t = self.cm_tuning();
        match setting {
            Setting::MpaCrc => writeln!(out, "{}", crc_name(t.crc())),
            Setting::MpaMarkers => writeln!(out, "{}", u8::from(t.markers())),
            Setting::P2pRtr => writeln!(out, "{}", bits_of_rtr(t.p2p())),
            Setting::RtrDelayMs => writeln!(out, "{}", t.rtr_delay_ms()),
        }
    }
}

impl Settings for Rsiw {
    const NAMES: &'static [&'static CStr] = &NAMES;

    fn show(dev: &Device, index: usize, out: &mut ShowBuf<'_>) -> fmt::Result {
        let setting = Setting::ALL.get(index).ok_or(fmt::Error)?;
        dev.show_setting(*setting, out)
    }

    fn store(dev: &Device, index: usize, input: &[u8]) -> Result {
        let setting = Setting::ALL.get(index).ok_or(EINVAL)?;
        dev.store_setting(*setting, input)
    }
}

#[cfg(rsiw_kunit)]
#[kunit_tests(rsiw_settings)]
mod tests {
    use super::*;

    /// A show into a small buffer, as a string.
    struct Line {
        buf: [u8; 32],
        len: usize,
    }

    impl Write for Line {
        fn write_str(&mut self, s: &str) -> fmt::Result {
            let end = self.len + s.len();
            self.buf
                .get_mut(self.len..end)
                .ok_or(fmt::Error)?
                .copy_from_slice(s.as_bytes());
            self.len = end;
            Ok(())
        }
    }

    fn show(dev: &Device, s: Setting) -> Line {
        let mut l = Line {
            buf: [0; 32],
            len: 0,
        };
        assert!(dev.show_setting(s, &mut l).is_ok());
        l
    }

    fn shows(dev: &Device, s: Setting, want: &str) -> bool {
        let l = show(dev, s);
        &l.buf[..l.len] == want.as_bytes()
    }

    #[test]
    fn names_and_settings_match() {
        assert_eq!(NAMES.len(), Setting::ALL.len());
        assert_eq!(<Rsiw as Settings>::NAMES.len(), 4);
    }

    #[test]
    fn values_parse_within_bounds() {
        use Setting::*;
        assert_eq!(
            parse(MpaCrc, b"required\n"),
            Ok(Value::Crc(CrcPolicy::Required))
        );
        assert_eq!(parse(MpaCrc, b"1"), Ok(Value::Crc(CrcPolicy::Required)));
        assert_eq!(parse(MpaCrc, b"0"), Ok(Value::Crc(CrcPolicy::IfPeerAsks)));
        assert_eq!(parse(MpaCrc, b"never"), Ok(Value::Crc(CrcPolicy::Never)));
        assert_eq!(parse(MpaCrc, b"default\n"), Ok(Value::Default));
        assert_eq!(parse(MpaCrc, b"Required"), Err(EINVAL));
        assert_eq!(parse(MpaCrc, b"required\n\n"), Err(EINVAL));
        assert_eq!(parse(MpaCrc, b""), Err(EINVAL));
        assert_eq!(parse(MpaMarkers, b"1\n"), Ok(Value::Markers(true)));
        assert_eq!(parse(MpaMarkers, b"2"), Err(EINVAL));
        assert_eq!(parse(P2pRtr, b"0"), Ok(Value::P2p(None)));
        assert_eq!(parse(P2pRtr, b"7\n"), Ok(Value::P2p(Some(RtrSet::ALL))));
        assert_eq!(parse(P2pRtr, b"8"), Err(EINVAL));
        assert_eq!(parse(P2pRtr, b"-1"), Err(EINVAL));
        assert_eq!(parse(RtrDelayMs, b"1000"), Ok(Value::DelayMs(1000)));
        assert_eq!(parse(RtrDelayMs, b"1001"), Err(EINVAL));
        assert_eq!(parse(RtrDelayMs, b"+5"), Err(EINVAL));
        assert_eq!(parse(RtrDelayMs, b" 5"), Err(EINVAL));
        assert_eq!(parse(RtrDelayMs, b"4294967296"), Err(EINVAL));
        assert_eq!(parse(RtrDelayMs, b"99999999999"), Err(EINVAL));
    }

    /// A write sets its own device's value only, reads back, and `default`
    /// returns to the module parameter's (the test module loads with the
    /// defaults: CRC if the peer asks, every RTR kind, no delay).
    #[test]
    fn a_write_sets_one_device() -> Result {
        let a = Device::new([2, 0, 0, 0, 0, 1], 1)?;
        let b = Device::new([2, 0, 0, 0, 0, 2], 2)?;
        assert!(shows(&a, Setting::MpaCrc, "if_peer_asks\n"));
        a.store_setting(Setting::MpaCrc, b"required\n")?;
        a.store_setting(Setting::MpaMarkers, b"1\n")?;
        a.store_setting(Setting::P2pRtr, b"2\n")?;
        a.store_setting(Setting::RtrDelayMs, b"50\n")?;
        assert!(shows(&a, Setting::MpaCrc, "required\n"));
        assert!(shows(&a, Setting::MpaMarkers, "1\n"));
        assert!(shows(&a, Setting::P2pRtr, "2\n"));
        assert!(shows(&a, Setting::RtrDelayMs, "50\n"));
        assert!(shows(&b, Setting::MpaCrc, "if_peer_asks\n"));
        assert!(shows(&b, Setting::MpaMarkers, "0\n"));
        assert!(shows(&b, Setting::P2pRtr, "7\n"));
        assert!(shows(&b, Setting::RtrDelayMs, "0\n"));
        // A refused write leaves the value.
        assert_eq!(a.store_setting(Setting::P2pRtr, b"9"), Err(EINVAL));
        assert!(shows(&a, Setting::P2pRtr, "2\n"));
        // What the CM takes from the device.
        let cfg = a
            .cm_tuning()
            .apply(crate::cm::CmConfig::for_device(a.limits()));
        assert!(cfg.crc == CrcPolicy::Required && cfg.markers && cfg.rtr_delay_ms == 50);
        assert!(cfg.p2p == Some(RtrSet::one(crate::engine::wire::mpa::Rtr::Write)));
        for s in Setting::ALL {
            a.store_setting(s, b"default\n")?;
            let (x, y) = (show(&a, s), show(&b, s));
            assert_eq!(&x.buf[..x.len], &y.buf[..y.len]);
        }
        Ok(())
    }
}
