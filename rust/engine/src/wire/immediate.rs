// SPDX-License-Identifier: GPL-2.0
//! Immediate Data header (RFC 7306 section 6.2, figure 7; appendix A.3).
//!
//! Exactly 8 octets right after the untagged DDP header (QN 0); the message
//! carries nothing else (RFC 7306 figure 3), and the receiver must check the
//! DDP message is exactly 8 octets long (section 6.3).
//!
//! RFC 7306 transfers 64 bits of opaque data. Verbs consumers (and
//! InfiniBand's "RDMA Write with Immediate") use a 32-bit `imm_data` that is
//! already in network order (`__be32`). The RFC does not say where such a
//! value goes; rsiw's convention ([`Repr::from_imm32`]) is to carry those
//! four octets unchanged in octets 0..4 and zeros in 4..8, so that the first
//! half of the field reads as the big-endian 32-bit value.

use super::{be, MALFORMED};
use crate::error::TermError;

/// Immediate Data header octets.
pub const HEADER_LEN: usize = 8;

mod field {
    use super::super::Field;

    pub(super) const DATA: Field = 0..8;
}

/// View of the Immediate Data header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Header<T> {
    /// Wraps without a length check.
    pub const fn new_unchecked(buffer: T) -> Self {
        Self { buffer }
    }

    /// Wraps and checks the length is exactly 8 (RFC 7306 section 6.3);
    /// anything else is "Remote Operation Error, unspecified".
    pub fn new_checked(buffer: T) -> Result<Self, TermError> {
        if buffer.as_ref().len() != HEADER_LEN {
            return Err(MALFORMED);
        }
        Ok(Self { buffer })
    }

    /// The 8 octets of Immediate Data.
    #[inline]
    pub fn data(&self) -> [u8; 8] {
        be::u64_at(self.buffer.as_ref(), field::DATA).to_be_bytes()
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Header<T> {
    /// Sets the 8 octets.
    #[inline]
    pub fn set_data(&mut self, d: [u8; 8]) {
        be::put(self.buffer.as_mut(), field::DATA, &d);
    }
}

/// Parsed Immediate Data.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Repr {
    /// The opaque 64 bits, in wire order.
    pub data: [u8; 8],
}

impl Repr {
    /// rsiw's carriage of a 32-bit verbs immediate (network-order octets).
    #[inline]
    pub const fn from_imm32(imm_be: [u8; 4]) -> Self {
        Self {
            data: [imm_be[0], imm_be[1], imm_be[2], imm_be[3], 0, 0, 0, 0],
        }
    }

    /// The 32-bit verbs immediate (octets 0..4).
    #[inline]
    pub const fn imm32(&self) -> [u8; 4] {
        [self.data[0], self.data[1], self.data[2], self.data[3]]
    }

    /// Parses a checked header.
    pub fn parse<T: AsRef<[u8]>>(h: &Header<T>) -> Self {
        Self { data: h.data() }
    }

    /// Header octets.
    #[inline]
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    /// Writes the header.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, h: &mut Header<T>) {
        h.set_data(self.data);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn golden_and_length_rule() {
        // RFC 7306 figure 7: 64 bits of data, no other field.
        let b = [1u8, 2, 3, 4, 5, 6, 7, 8];
        let r = Repr::parse(&Header::new_checked(&b[..]).unwrap());
        assert_eq!(r.data, b);
        assert!(Header::new_checked(&b[..7]).is_err());
        assert!(Header::new_checked(&[0u8; 9][..]).is_err());
        let r = Repr::from_imm32(0xDEAD_BEEFu32.to_be_bytes());
        assert_eq!(r.data, [0xDE, 0xAD, 0xBE, 0xEF, 0, 0, 0, 0]);
        assert_eq!(u32::from_be_bytes(r.imm32()), 0xDEAD_BEEF);
    }

    proptest! {
        #[test]
        fn round_trip(data: [u8; 8]) {
            let r = Repr { data };
            let mut b = [0u8; HEADER_LEN];
            r.emit(&mut Header::new_unchecked(&mut b[..]));
            prop_assert_eq!(Repr::parse(&Header::new_checked(&b[..]).unwrap()), r);
        }
    }
}
