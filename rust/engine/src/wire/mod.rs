// SPDX-License-Identifier: GPL-2.0
//! Typed zero-copy views over the iWARP headers (RFC 5044, RFC 5041, RFC
//! 5040, RFC 7306), one file per header.
//!
//! Each view is `Header<T: AsRef<[u8]>>` with a checked constructor
//! (`new_checked`) and one small getter/setter per field, plus a plain `Repr`
//! with `parse` and `emit` where a header has a meaningful parsed form.
//!
//! This file holds what the views share, as smoltcp's `wire/mod.rs` does:
//! the field range type `Field`, the panic-free big-endian accessors
//! `be` and the error for a truncated header, `MALFORMED`.

use core::ops::Range;

use crate::error::{self, TermError};

pub mod atomic;
pub mod commit;
pub mod ddp;
pub mod fpdu;
pub mod immediate;
pub mod mpa;
pub mod rdmap;
pub mod terminate;

/// A byte range of a header field.
pub(crate) type Field = Range<usize>;

/// Panic-free big-endian accessors shared by the wire modules. Each takes a
/// constant field range; a view's `new_checked` has verified the length, so
/// the `None` arms are unreachable on checked views and return 0 / do
/// nothing rather than panic.
pub(crate) mod be {
    use super::Field;

    #[inline]
    pub(crate) fn u16_at(buf: &[u8], f: Field) -> u16 {
        match buf.get(f) {
            Some(&[a, b]) => u16::from_be_bytes([a, b]),
            _ => 0,
        }
    }

    #[inline]
    pub(crate) fn u32_at(buf: &[u8], f: Field) -> u32 {
        match buf.get(f) {
            Some(&[a, b, c, d]) => u32::from_be_bytes([a, b, c, d]),
            _ => 0,
        }
    }

    #[inline]
    pub(crate) fn u64_at(buf: &[u8], f: Field) -> u64 {
        match buf.get(f) {
            Some(&[a, b, c, d, e, g, h, i]) => u64::from_be_bytes([a, b, c, d, e, g, h, i]),
            _ => 0,
        }
    }

    #[inline]
    pub(crate) fn put(buf: &mut [u8], f: Field, bytes: &[u8]) {
        if let Some(dst) = buf.get_mut(f) {
            if dst.len() == bytes.len() {
                dst.copy_from_slice(bytes);
            }
        }
    }

    #[inline]
    pub(crate) fn set_u16(buf: &mut [u8], f: Field, v: u16) {
        put(buf, f, &v.to_be_bytes());
    }

    #[inline]
    pub(crate) fn set_u32(buf: &mut [u8], f: Field, v: u32) {
        put(buf, f, &v.to_be_bytes());
    }

    #[inline]
    pub(crate) fn set_u64(buf: &mut [u8], f: Field, v: u64) {
        put(buf, f, &v.to_be_bytes());
    }

    #[inline]
    pub(crate) fn u8_at(buf: &[u8], at: usize) -> u8 {
        buf.get(at).copied().unwrap_or(0)
    }

    #[inline]
    pub(crate) fn set_u8(buf: &mut [u8], at: usize, v: u8) {
        if let Some(b) = buf.get_mut(at) {
            *b = v;
        }
    }
}

/// A malformed (truncated) segment. DDP has no code for it, so it is
/// reported as RDMAP "Remote Operation Error, unspecified" (RFC 5040 7.2).
pub(crate) const MALFORMED: TermError = error::rdmap::OP_UNSPECIFIED;
