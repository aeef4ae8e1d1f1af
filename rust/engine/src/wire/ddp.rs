// SPDX-License-Identifier: GPL-2.0
//! DDP segment header (RFC 5041 section 4).
//!
//! Every DDP segment starts with the DDP Control field (T, L, Rsvd, DV)
//! followed by the ULP's "RsvdULP" octet, which RDMAP uses for its own
//! control field (RFC 5040 section 4.1, see [`super::rdmap::Control`]).
//!
//! ```text
//! tagged (RFC 5041 4.3, 14 octets)     untagged (RFC 5041 4.4, 18 octets)
//! 0      T|L|Rsvd|DV                   0      T|L|Rsvd|DV
//! 1      RsvdULP (RDMAP control)       1      RsvdULP[0..8]  (RDMAP control)
//! 2..6   STag                          2..6   RsvdULP[8..40] (Invalidate STag)
//! 6..14  Tagged Offset (64 bit)        6..10  Queue Number
//!                                      10..14 Message Sequence Number
//!                                      14..18 Message Offset
//! ```
//!
//! The byte layout matches Linux siw's `struct iwarp_ctrl_tagged` and
//! `struct iwarp_ctrl_untagged` (minus their leading MPA length).

use super::{be, Field, MALFORMED};
use crate::error::{self, TermError};

/// The only DDP version (RFC 5041 section 4.2: DV = 01b).
pub const DDP_VERSION: u8 = 1;
/// Octets of a tagged DDP header.
pub const TAGGED_HEADER_LEN: usize = 14;
/// Octets of an untagged DDP header.
pub const UNTAGGED_HEADER_LEN: usize = 18;

mod field {
    use super::Field;

    pub(super) const CTRL: usize = 0;
    pub(super) const RSVD_ULP: usize = 1;
    // Tagged buffer model, RFC 5041 section 4.3.
    pub(super) const STAG: Field = 2..6;
    pub(super) const TO: Field = 6..14;
    // Untagged buffer model, RFC 5041 section 4.4.
    pub(super) const RSVD_ULP32: Field = 2..6;
    pub(super) const QN: Field = 6..10;
    pub(super) const MSN: Field = 10..14;
    pub(super) const MO: Field = 14..18;
}

const FLAG_T: u8 = 0x80;
const FLAG_L: u8 = 0x40;
const MASK_DV: u8 = 0x03;

/// A read/write view of a DDP segment (header and payload).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Segment<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Segment<T> {
    /// Wraps a buffer without checking its length.
    pub const fn new_unchecked(buffer: T) -> Self {
        Self { buffer }
    }

    /// Wraps a buffer and checks it holds the whole header its T bit
    /// announces.
    pub fn new_checked(buffer: T) -> Result<Self, TermError> {
        let s = Self::new_unchecked(buffer);
        s.check_len()?;
        Ok(s)
    }

    /// Checks the buffer is long enough for the header the T bit selects.
    pub fn check_len(&self) -> Result<(), TermError> {
        let len = self.buffer.as_ref().len();
        if len < 1 || len < self.header_len() {
            Err(MALFORMED)
        } else {
            Ok(())
        }
    }

    /// The underlying buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    #[inline]
    fn ctrl(&self) -> u8 {
        be::u8_at(self.buffer.as_ref(), field::CTRL)
    }

    /// T: tagged (1) or untagged (0) buffer model.
    #[inline]
    pub fn tagged(&self) -> bool {
        self.ctrl() & FLAG_T != 0
    }

    /// L: last segment of the DDP message.
    #[inline]
    pub fn last(&self) -> bool {
        self.ctrl() & FLAG_L != 0
    }

    /// DV: DDP version.
    #[inline]
    pub fn version(&self) -> u8 {
        self.ctrl() & MASK_DV
    }

    /// The first RsvdULP octet: RDMAP's control field.
    #[inline]
    pub fn rsvd_ulp(&self) -> u8 {
        be::u8_at(self.buffer.as_ref(), field::RSVD_ULP)
    }

    /// Header length for this segment's buffer model.
    #[inline]
    pub fn header_len(&self) -> usize {
        if self.tagged() {
            TAGGED_HEADER_LEN
        } else {
            UNTAGGED_HEADER_LEN
        }
    }

    /// Tagged: Steering Tag.
    #[inline]
    pub fn stag(&self) -> u32 {
        be::u32_at(self.buffer.as_ref(), field::STAG)
    }

    /// Tagged: Tagged Offset.
    #[inline]
    pub fn to(&self) -> u64 {
        be::u64_at(self.buffer.as_ref(), field::TO)
    }

    /// Untagged: RsvdULP octets 1..5 (RDMAP's Invalidate STag).
    #[inline]
    pub fn rsvd_ulp32(&self) -> u32 {
        be::u32_at(self.buffer.as_ref(), field::RSVD_ULP32)
    }

    /// Untagged: Queue Number.
    #[inline]
    pub fn qn(&self) -> u32 {
        be::u32_at(self.buffer.as_ref(), field::QN)
    }

    /// Untagged: Message Sequence Number.
    #[inline]
    pub fn msn(&self) -> u32 {
        be::u32_at(self.buffer.as_ref(), field::MSN)
    }

    /// Untagged: Message Offset.
    #[inline]
    pub fn mo(&self) -> u32 {
        be::u32_at(self.buffer.as_ref(), field::MO)
    }

    /// Everything after the DDP header (RDMAP header and ULP payload).
    #[inline]
    pub fn payload(&self) -> &[u8] {
        self.buffer.as_ref().get(self.header_len()..).unwrap_or(&[])
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Segment<T> {
    #[inline]
    fn set_ctrl_bit(&mut self, bit: u8, on: bool) {
        let c = self.ctrl();
        be::set_u8(
            self.buffer.as_mut(),
            field::CTRL,
            if on { c | bit } else { c & !bit },
        );
    }

    /// Sets T. Set it before the model-specific fields.
    #[inline]
    pub fn set_tagged(&mut self, on: bool) {
        self.set_ctrl_bit(FLAG_T, on);
    }

    /// Sets L.
    #[inline]
    pub fn set_last(&mut self, on: bool) {
        self.set_ctrl_bit(FLAG_L, on);
    }

    /// Sets DV (2 bits).
    #[inline]
    pub fn set_version(&mut self, v: u8) {
        let c = (self.ctrl() & !MASK_DV) | (v & MASK_DV);
        be::set_u8(self.buffer.as_mut(), field::CTRL, c);
    }

    /// Sets the RsvdULP octet (RDMAP control).
    #[inline]
    pub fn set_rsvd_ulp(&mut self, v: u8) {
        be::set_u8(self.buffer.as_mut(), field::RSVD_ULP, v);
    }

    /// Sets the STag (tagged).
    #[inline]
    pub fn set_stag(&mut self, v: u32) {
        be::set_u32(self.buffer.as_mut(), field::STAG, v);
    }

    /// Sets the Tagged Offset (tagged).
    #[inline]
    pub fn set_to(&mut self, v: u64) {
        be::set_u64(self.buffer.as_mut(), field::TO, v);
    }

    /// Sets RsvdULP octets 1..5 (untagged).
    #[inline]
    pub fn set_rsvd_ulp32(&mut self, v: u32) {
        be::set_u32(self.buffer.as_mut(), field::RSVD_ULP32, v);
    }

    /// Sets the Queue Number (untagged).
    #[inline]
    pub fn set_qn(&mut self, v: u32) {
        be::set_u32(self.buffer.as_mut(), field::QN, v);
    }

    /// Sets the MSN (untagged).
    #[inline]
    pub fn set_msn(&mut self, v: u32) {
        be::set_u32(self.buffer.as_mut(), field::MSN, v);
    }

    /// Sets the MO (untagged).
    #[inline]
    pub fn set_mo(&mut self, v: u32) {
        be::set_u32(self.buffer.as_mut(), field::MO, v);
    }

    /// Mutable payload after the header.
    #[inline]
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let h = self.header_len();
        self.buffer.as_mut().get_mut(h..).unwrap_or(&mut [])
    }
}

/// The buffer model part of a DDP header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Model {
    /// Tagged buffer model (RFC 5041 section 4.3).
    Tagged {
        /// Steering Tag of the Data Sink's buffer.
        stag: u32,
        /// Tagged Offset of this segment's first payload octet.
        to: u64,
    },
    /// Untagged buffer model (RFC 5041 section 4.4).
    Untagged {
        /// RsvdULP octets 1..5: RDMAP's Invalidate STag, else 0.
        rsvd_ulp: u32,
        /// Queue Number.
        qn: u32,
        /// Message Sequence Number (modulo 2^32).
        msn: u32,
        /// Message Offset of this segment's first payload octet.
        mo: u32,
    },
}

/// A parsed DDP header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Repr {
    /// L: last segment of the message.
    pub last: bool,
    /// The RsvdULP octet that carries RDMAP's control field.
    pub ulp_ctrl: u8,
    /// STag/TO or QN/MSN/MO.
    pub model: Model,
}

impl Repr {
    /// Parses a checked segment. A DV other than 1 is the model's "invalid
    /// DDP version" (RFC 5041 section 7.2, RFC 5040 section 7.2). The
    /// reserved bits are not checked on receive (RFC 5041 section 4.2).
    pub fn parse<T: AsRef<[u8]>>(seg: &Segment<T>) -> Result<Self, TermError> {
        seg.check_len()?;
        let tagged = seg.tagged();
        if seg.version() != DDP_VERSION {
            return Err(if tagged {
                error::ddp::T_INVALID_VERSION
            } else {
                error::ddp::U_INVALID_VERSION
            });
        }
        let model = if tagged {
            Model::Tagged {
                stag: seg.stag(),
                to: seg.to(),
            }
        } else {
            Model::Untagged {
                rsvd_ulp: seg.rsvd_ulp32(),
                qn: seg.qn(),
                msn: seg.msn(),
                mo: seg.mo(),
            }
        };
        Ok(Self {
            last: seg.last(),
            ulp_ctrl: seg.rsvd_ulp(),
            model,
        })
    }

    /// Whether this is the tagged model.
    #[inline]
    pub const fn tagged(&self) -> bool {
        matches!(self.model, Model::Tagged { .. })
    }

    /// Header octets.
    #[inline]
    pub const fn buffer_len(&self) -> usize {
        if self.tagged() {
            TAGGED_HEADER_LEN
        } else {
            UNTAGGED_HEADER_LEN
        }
    }

    /// Writes the header (DV = 1, reserved bits zero) into the start of
    /// `seg`, which must hold at least [`Self::buffer_len`] octets.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, seg: &mut Segment<T>) {
        be::set_u8(seg.buffer.as_mut(), field::CTRL, 0);
        seg.set_tagged(self.tagged());
        seg.set_last(self.last);
        seg.set_version(DDP_VERSION);
        seg.set_rsvd_ulp(self.ulp_ctrl);
        match self.model {
            Model::Tagged { stag, to } => {
                seg.set_stag(stag);
                seg.set_to(to);
            }
            Model::Untagged {
                rsvd_ulp,
                qn,
                msn,
                mo,
            } => {
                seg.set_rsvd_ulp32(rsvd_ulp);
                seg.set_qn(qn);
                seg.set_msn(msn);
                seg.set_mo(mo);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    // Tagged RDMA Write segment, worked out from RFC 5041 figure 4.3 and
    // RFC 5040 section 4.1: T=1 L=1 Rsvd=0 DV=01 -> 0xC1; RDMAP control
    // RV=01 opcode 00000 -> 0x40; STag 0x11223344; TO 0x0102030405060708.
    const TAGGED: [u8; 16] = [
        0xC1, 0x40, 0x11, 0x22, 0x33, 0x44, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0xAA,
        0xBB,
    ];

    // Untagged Send with Invalidate (RFC 5041 figure 4.4, RFC 5040 4.1):
    // T=0 L=0 DV=01 -> 0x01; RV=01 opcode 00100 -> 0x44; Invalidate STag
    // 0xCAFEBABE; QN 0; MSN 1; MO 0x1000.
    const UNTAGGED: [u8; 18] = [
        0x01, 0x44, 0xCA, 0xFE, 0xBA, 0xBE, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0x10, 0x00,
    ];

    #[test]
    fn tagged_golden() {
        let seg = Segment::new_checked(&TAGGED[..]).unwrap();
        let r = Repr::parse(&seg).unwrap();
        assert_eq!(
            r,
            Repr {
                last: true,
                ulp_ctrl: 0x40,
                model: Model::Tagged {
                    stag: 0x1122_3344,
                    to: 0x0102_0304_0506_0708
                }
            }
        );
        assert_eq!(seg.payload(), &[0xAA, 0xBB]);
        let mut out = [0u8; 16];
        out[14] = 0xAA;
        out[15] = 0xBB;
        r.emit(&mut Segment::new_unchecked(&mut out[..]));
        assert_eq!(out, TAGGED);
    }

    #[test]
    fn untagged_golden() {
        let seg = Segment::new_checked(&UNTAGGED[..]).unwrap();
        let r = Repr::parse(&seg).unwrap();
        assert_eq!(
            r,
            Repr {
                last: false,
                ulp_ctrl: 0x44,
                model: Model::Untagged {
                    rsvd_ulp: 0xCAFE_BABE,
                    qn: 0,
                    msn: 1,
                    mo: 0x1000
                }
            }
        );
        let mut out = [0xFFu8; 18];
        r.emit(&mut Segment::new_unchecked(&mut out[..]));
        assert_eq!(out, UNTAGGED);
    }

    #[test]
    fn truncated_is_malformed() {
        assert_eq!(Segment::new_checked(&TAGGED[..13]).err(), Some(MALFORMED));
        assert_eq!(Segment::new_checked(&UNTAGGED[..17]).err(), Some(MALFORMED));
        assert_eq!(Segment::new_checked(&[][..]).err(), Some(MALFORMED));
    }

    #[test]
    fn bad_version_per_model() {
        let mut t = TAGGED;
        t[0] = 0xC2; // DV = 2
        assert_eq!(
            Repr::parse(&Segment::new_unchecked(&t[..])),
            Err(error::ddp::T_INVALID_VERSION)
        );
        let mut u = UNTAGGED;
        u[0] = 0x00; // DV = 0
        assert_eq!(
            Repr::parse(&Segment::new_unchecked(&u[..])),
            Err(error::ddp::U_INVALID_VERSION)
        );
    }

    #[test]
    fn reserved_bits_ignored() {
        let mut t = TAGGED;
        t[0] |= 0x3C;
        assert!(Repr::parse(&Segment::new_unchecked(&t[..])).is_ok());
    }

    pub(crate) fn arb_repr() -> impl Strategy<Value = Repr> {
        let tagged = (any::<u32>(), any::<u64>()).prop_map(|(stag, to)| Model::Tagged { stag, to });
        let untagged = (any::<u32>(), any::<u32>(), any::<u32>(), any::<u32>()).prop_map(
            |(rsvd_ulp, qn, msn, mo)| Model::Untagged {
                rsvd_ulp,
                qn,
                msn,
                mo,
            },
        );
        (any::<bool>(), any::<u8>(), prop_oneof![tagged, untagged]).prop_map(
            |(last, ulp_ctrl, model)| Repr {
                last,
                ulp_ctrl,
                model,
            },
        )
    }

    proptest! {
        #[test]
        fn round_trip(r in arb_repr()) {
            let mut buf = [0u8; UNTAGGED_HEADER_LEN];
            let len = r.buffer_len();
            r.emit(&mut Segment::new_unchecked(&mut buf[..len]));
            let back = Repr::parse(&Segment::new_checked(&buf[..len]).unwrap()).unwrap();
            prop_assert_eq!(back, r);
        }

        #[test]
        fn never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..40)) {
            if let Ok(seg) = Segment::new_checked(&bytes[..]) {
                let _ = Repr::parse(&seg);
                let _ = seg.payload();
            }
        }
    }
}
