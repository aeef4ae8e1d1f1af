// SPDX-License-Identifier: GPL-2.0
//! The host benches' CRC32c: as fast on one FPDU (~1.4 KiB) as on 64 KiB,
//! with a fused copy.
//!
//! The `crc32c` crate runs three interleaved `crc32` chains only over
//! fixed 768- and 24576-octet blocks and the rest of a span through one
//! dependent chain, so on an FPDU it is about half as fast as on a long
//! buffer. Here any span of 192 octets or more is cut into three equal
//! lanes (a multiple of 8 octets each, at most 8 KiB) summed in
//! parallel, and the lanes are joined with a carry-less multiply by
//! x^(8n-33) mod P (the method of the kernel's x86 `crc32c()` for long
//! buffers, with a constant per lane length instead of per block size).
//! [`Crc32c::copy_append`] stores each 8-octet word as it is summed, so
//! the copy costs no second pass. Without SSE 4.2 and PCLMULQDQ the
//! `crc32c` crate is used.

use rsiw_engine::crc::Crc32c;
#[cfg(target_arch = "x86_64")]
use std::arch::x86_64::{
    _mm_clmulepi64_si128, _mm_crc32_u16, _mm_crc32_u32, _mm_crc32_u64, _mm_crc32_u8,
    _mm_cvtsi128_si64, _mm_cvtsi32_si128, _mm_cvtsi64_si128, _mm_xor_si128,
};

/// Reflected Castagnoli polynomial.
const POLY: u32 = 0x82F6_3B78;
/// Longest lane, octets.
const MAX_LANE: usize = 8192;
/// Shortest lane, octets (shorter spans go through one chain).
const MIN_LANE: usize = 64;

/// CRC32c with three lanes over any long span; see the module docs.
#[derive(Clone, Debug)]
pub struct HwCrc {
    /// `k[m - 1]` = x^(64m - 33) mod P, reflected: the constant that
    /// shifts a lane's CRC past 8m octets.
    k: Vec<u32>,
    hw: bool,
}

impl HwCrc {
    pub fn new() -> Self {
        #[cfg(target_arch = "x86_64")]
        let hw = is_x86_feature_detected!("sse4.2") && is_x86_feature_detected!("pclmulqdq");
        #[cfg(not(target_arch = "x86_64"))]
        let hw = false;
        // x^31 (reflected: bit 0), then times x^64 per step.
        let mut r = 1u32;
        let mut k = Vec::with_capacity(2 * MAX_LANE / 8);
        for _ in 0..2 * MAX_LANE / 8 {
            k.push(r);
            for _ in 0..64 {
                r = if r & 1 != 0 { (r >> 1) ^ POLY } else { r >> 1 };
            }
        }
        HwCrc { k, hw }
    }

    /// Whether the three-lane path runs (otherwise the `crc32c` crate).
    pub fn accelerated(&self) -> bool {
        self.hw
    }
}

impl Crc32c for HwCrc {
    fn append(&self, crc: u32, data: &[u8]) -> u32 {
        #[cfg(target_arch = "x86_64")]
        if self.hw {
            // SAFETY: `new` found SSE 4.2 and PCLMULQDQ on this CPU, the
            // only requirement of `lanes`.
            return unsafe { lanes::<false>(&self.k, crc, data, &mut []) };
        }
        crc32c::crc32c_append(crc, data)
    }

    fn copy_append(&self, crc: u32, src: &[u8], dst: &mut [u8]) -> u32 {
        let n = src.len().min(dst.len());
        let (src, dst) = (&src[..n], &mut dst[..n]);
        #[cfg(target_arch = "x86_64")]
        if self.hw {
            // SAFETY: as in `append`.
            return unsafe { lanes::<true>(&self.k, crc, src, dst) };
        }
        dst.copy_from_slice(src);
        crc32c::crc32c_append(crc, dst)
    }
}

/// `crc` extended over `src`; with `COPY`, `src` is also stored into
/// `dst` (same length), word by word as it is summed.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "sse4.2,pclmulqdq")]
fn lanes<const COPY: bool>(k: &[u32], crc: u32, mut src: &[u8], mut dst: &mut [u8]) -> u32 {
    let word = |b: &[u8]| u64::from_le_bytes(b.try_into().unwrap());
    let mut r = u64::from(!crc);
    while src.len() >= 3 * MIN_LANE {
        let n = ((src.len() / 3) & !7).min(MAX_LANE);
        let (a, rest) = src.split_at(n);
        let (b, rest) = rest.split_at(n);
        let (c, rest) = rest.split_at(n);
        let (mut ra, mut rb, mut rc) = (r, 0u64, 0u64);
        if COPY {
            let (da, drest) = std::mem::take(&mut dst).split_at_mut(n);
            let (db, drest) = drest.split_at_mut(n);
            let (dc, drest) = drest.split_at_mut(n);
            let src3 = a
                .chunks_exact(8)
                .zip(b.chunks_exact(8))
                .zip(c.chunks_exact(8));
            let dst3 = da
                .chunks_exact_mut(8)
                .zip(db.chunks_exact_mut(8))
                .zip(dc.chunks_exact_mut(8));
            for (((x, y), z), ((dx, dy), dz)) in src3.zip(dst3) {
                let (x, y, z) = (word(x), word(y), word(z));
                ra = _mm_crc32_u64(ra, x);
                rb = _mm_crc32_u64(rb, y);
                rc = _mm_crc32_u64(rc, z);
                dx.copy_from_slice(&x.to_le_bytes());
                dy.copy_from_slice(&y.to_le_bytes());
                dz.copy_from_slice(&z.to_le_bytes());
            }
            dst = drest;
        } else {
            for ((x, y), z) in a
                .chunks_exact(8)
                .zip(b.chunks_exact(8))
                .zip(c.chunks_exact(8))
            {
                ra = _mm_crc32_u64(ra, word(x));
                rb = _mm_crc32_u64(rb, word(y));
                rc = _mm_crc32_u64(rc, word(z));
            }
        }
        // ra * x^(16n) + rb * x^(8n) + rc: clmul by x^(8m - 33) then one
        // crc32 of the 64-bit product multiplies by x^33 and reduces.
        let m = n / 8;
        let ka = k[2 * m - 1];
        let kb = k[m - 1];
        let pa = _mm_clmulepi64_si128(
            _mm_cvtsi64_si128(ra as i64),
            _mm_cvtsi32_si128(ka as i32),
            0,
        );
        let pb = _mm_clmulepi64_si128(
            _mm_cvtsi64_si128(rb as i64),
            _mm_cvtsi32_si128(kb as i32),
            0,
        );
        let p = _mm_cvtsi128_si64(_mm_xor_si128(pa, pb)) as u64;
        r = _mm_crc32_u64(0, p) ^ rc;
        src = rest;
    }
    let (words, tail) = src.split_at(src.len() & !7);
    if COPY {
        let (dw, dt) = dst.split_at_mut(words.len());
        for (x, d) in words.chunks_exact(8).zip(dw.chunks_exact_mut(8)) {
            let x = word(x);
            r = _mm_crc32_u64(r, x);
            d.copy_from_slice(&x.to_le_bytes());
        }
        dt.copy_from_slice(tail);
    } else {
        for x in words.chunks_exact(8) {
            r = _mm_crc32_u64(r, word(x));
        }
    }
    // Up to 7 octets: 4, 2, 1 at a time (a short dependent chain).
    let mut r = r as u32;
    let mut t = tail;
    if let Some((w, rest)) = t.split_first_chunk::<4>() {
        r = _mm_crc32_u32(r, u32::from_le_bytes(*w));
        t = rest;
    }
    if let Some((w, rest)) = t.split_first_chunk::<2>() {
        r = _mm_crc32_u16(r, u16::from_le_bytes(*w));
        t = rest;
    }
    if let Some(&b) = t.first() {
        r = _mm_crc32_u8(r, b);
    }
    !r
}
