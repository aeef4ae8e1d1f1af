// SPDX-License-Identifier: GPL-2.0
//! The Terminate error triplet (RFC 5040 section 4.8): layer, error type,
//! error code.
//!
//! The Terminate Control field and the RDMAP codes are RFC 5040 section
//! 4.8 (RFC 7306 section 8.2 cites the Stream-catastrophic code "as
//! described in Section 4.8 of RFC 5040"); the DDP codes are RFC 5041
//! section 7.2's table; the MPA (LLP layer) codes 1 to 4 are RFC 5044
//! section 8, codes 5 to 7 RFC 6581 section 8. Every protocol violation
//! the engine detects becomes one of these, so the caller can send the
//! Terminate message and fail the QP.

/// Terminate layer (4 bits, RFC 5040 section 7.1).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Layer {
    /// RDMAP (RFC 5040).
    Rdmap = 0x0,
    /// DDP (RFC 5041).
    Ddp = 0x1,
    /// The lower layer protocol: MPA over TCP (RFC 5044).
    Llp = 0x2,
}

/// A Terminate error: the 4-bit layer, 4-bit error type and 8-bit error code
/// exactly as they appear in the Terminate Control field.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct TermError {
    /// Layer that detected the error.
    pub layer: Layer,
    /// Error type within the layer (4 bits).
    pub etype: u8,
    /// Error code within the type.
    pub code: u8,
}

impl TermError {
    const fn new(layer: Layer, etype: u8, code: u8) -> Self {
        Self { layer, etype, code }
    }

    /// The 16 bits `layer << 12 | etype << 8 | code` as on the wire.
    pub const fn to_bits(self) -> u16 {
        ((self.layer as u16) << 12) | (((self.etype & 0xF) as u16) << 8) | self.code as u16
    }

    /// The MPA error code if this is an LLP error, whichever error type
    /// the peer used for it: 0 (Linux siw, Wireshark) or 3 (RFC 6581
    /// section 8, Chelsio cxgb3/cxgb4 for every MPA code). Receivers
    /// should compare MPA errors with this, not with `==`.
    pub const fn llp_code(self) -> Option<u8> {
        match (self.layer, self.etype) {
            (Layer::Llp, 0 | 3) => Some(self.code),
            _ => None,
        }
    }

    /// Parses the 16-bit layer/type/code; `None` for an unknown layer.
    pub const fn from_bits(bits: u16) -> Option<Self> {
        let layer = match bits >> 12 {
            0 => Layer::Rdmap,
            1 => Layer::Ddp,
            2 => Layer::Llp,
            _ => return None,
        };
        Some(Self::new(
            layer,
            ((bits >> 8) & 0xF) as u8,
            (bits & 0xFF) as u8,
        ))
    }
}

/// RDMAP errors (RFC 5040 section 7.2, RFC 7306 section 8).
pub mod rdmap {
    use super::{Layer::Rdmap, TermError};

    const LOCAL_CATASTROPHIC: u8 = 0x0;
    const REMOTE_PROTECTION: u8 = 0x1;
    const REMOTE_OPERATION: u8 = 0x2;

    /// Local catastrophic error.
    pub const LOCAL_CATA: TermError = TermError::new(Rdmap, LOCAL_CATASTROPHIC, 0x00);
    /// Remote protection: invalid STag.
    pub const INVALID_STAG: TermError = TermError::new(Rdmap, REMOTE_PROTECTION, 0x00);
    /// Remote protection: base or bounds violation.
    pub const BASE_BOUNDS: TermError = TermError::new(Rdmap, REMOTE_PROTECTION, 0x01);
    /// Remote protection: access rights violation.
    pub const ACCESS: TermError = TermError::new(Rdmap, REMOTE_PROTECTION, 0x02);
    /// Remote protection: STag not associated with RDMAP stream.
    pub const STAG_NOT_ASSOC: TermError = TermError::new(Rdmap, REMOTE_PROTECTION, 0x03);
    /// Remote protection: TO wrap.
    pub const TO_WRAP: TermError = TermError::new(Rdmap, REMOTE_PROTECTION, 0x04);
    /// Remote protection: unspecified.
    pub const PROT_UNSPECIFIED: TermError = TermError::new(Rdmap, REMOTE_PROTECTION, 0xFF);
    /// Remote operation: invalid RDMAP version.
    pub const INVALID_VERSION: TermError = TermError::new(Rdmap, REMOTE_OPERATION, 0x05);
    /// Remote operation: unexpected opcode.
    pub const UNEXPECTED_OPCODE: TermError = TermError::new(Rdmap, REMOTE_OPERATION, 0x06);
    /// Remote operation: catastrophic error, localized to RDMAP stream
    /// (also RFC 7306's misaligned atomic target).
    pub const CATA_STREAM: TermError = TermError::new(Rdmap, REMOTE_OPERATION, 0x07);
    /// Remote operation: catastrophic error, global.
    pub const CATA_GLOBAL: TermError = TermError::new(Rdmap, REMOTE_OPERATION, 0x08);
    /// Remote operation: STag cannot be invalidated.
    pub const CANT_INVALIDATE: TermError = TermError::new(Rdmap, REMOTE_OPERATION, 0x09);
    /// Remote operation: unspecified.
    pub const OP_UNSPECIFIED: TermError = TermError::new(Rdmap, REMOTE_OPERATION, 0xFF);
}

/// DDP errors (RFC 5041 section 7.2 via RFC 5040 section 7.2).
pub mod ddp {
    use super::{Layer::Ddp, TermError};

    const LOCAL_CATASTROPHIC: u8 = 0x0;
    const TAGGED: u8 = 0x1;
    const UNTAGGED: u8 = 0x2;

    /// Local catastrophic error.
    pub const LOCAL_CATA: TermError = TermError::new(Ddp, LOCAL_CATASTROPHIC, 0x00);
    /// Tagged buffer: invalid STag.
    pub const T_INVALID_STAG: TermError = TermError::new(Ddp, TAGGED, 0x00);
    /// Tagged buffer: base or bounds violation.
    pub const T_BASE_BOUNDS: TermError = TermError::new(Ddp, TAGGED, 0x01);
    /// Tagged buffer: STag not associated with DDP stream.
    pub const T_STAG_NOT_ASSOC: TermError = TermError::new(Ddp, TAGGED, 0x02);
    /// Tagged buffer: TO wrap.
    pub const T_TO_WRAP: TermError = TermError::new(Ddp, TAGGED, 0x03);
    /// Tagged buffer: invalid DDP version.
    pub const T_INVALID_VERSION: TermError = TermError::new(Ddp, TAGGED, 0x04);
    /// Untagged buffer: invalid QN.
    pub const U_INVALID_QN: TermError = TermError::new(Ddp, UNTAGGED, 0x01);
    /// Untagged buffer: invalid MSN, no buffer available.
    pub const U_NO_BUFFER: TermError = TermError::new(Ddp, UNTAGGED, 0x02);
    /// Untagged buffer: invalid MSN, MSN range.
    pub const U_MSN_RANGE: TermError = TermError::new(Ddp, UNTAGGED, 0x03);
    /// Untagged buffer: invalid MO.
    pub const U_INVALID_MO: TermError = TermError::new(Ddp, UNTAGGED, 0x04);
    /// Untagged buffer: DDP message too long for available buffer.
    pub const U_TOO_LONG: TermError = TermError::new(Ddp, UNTAGGED, 0x05);
    /// Untagged buffer: invalid DDP version.
    pub const U_INVALID_VERSION: TermError = TermError::new(Ddp, UNTAGGED, 0x06);
}

/// LLP (MPA) errors: RFC 5044 section 8 (codes 1 to 4) and RFC 6581
/// section 8 (codes 5 to 7).
///
/// Error type: RFC 6581 section 8 says "MPA negotiation for RDMA
/// connection establishment uses the following layer and error type for
/// MPA error reporting: Layer: 0010b - LLP/MPA, Error Type: 0x3 - Lower
/// Layer Protocol (LLP)" (0x3 is the type RFC 5041 section 7.2 reserves
/// "for the use by the LLP"), and its section 9 requires "Layer 2, Error
/// Type 3, Error Code 5" for local errors. So codes 5 to 7 use type 3.
/// RFC 5044 section 8 lists codes 1 to 4 without a type; Linux siw sends
/// them (and 5 to 7) with type 0 (`LLP_ETYPE_MPA`) and Wireshark names
/// only type 0, Chelsio sends type 3. Codes 1 to 4 keep type 0, which
/// the QP layer also relies on to tell code 4 (close, no Terminate) from
/// codes 5 to 7 (Terminate). On receipt use [`TermError::llp_code`].
pub mod llp {
    use super::{Layer::Llp, TermError};

    /// TCP connection closed, terminated or lost.
    pub const CONNECTION_LOST: TermError = TermError::new(Llp, 0x0, 0x01);
    /// MPA CRC error.
    pub const CRC: TermError = TermError::new(Llp, 0x0, 0x02);
    /// MPA marker and ULPDU pointer mismatch.
    pub const MARKER: TermError = TermError::new(Llp, 0x0, 0x03);
    /// MPA request/reply frame invalid (RFC 5044 "invalid request").
    pub const INVALID_REQ_RESP: TermError = TermError::new(Llp, 0x0, 0x04);
    /// RFC 6581: local catastrophic.
    pub const LOCAL_CATA: TermError = TermError::new(Llp, 0x3, 0x05);
    /// RFC 6581: insufficient IRD resources.
    pub const INSUFFICIENT_IRD: TermError = TermError::new(Llp, 0x3, 0x06);
    /// RFC 6581: no matching RTR model.
    pub const NO_MATCHING_RTR: TermError = TermError::new(Llp, 0x3, 0x07);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bits_round_trip() {
        for e in [
            rdmap::CATA_STREAM,
            ddp::U_NO_BUFFER,
            llp::NO_MATCHING_RTR,
            ddp::T_TO_WRAP,
        ] {
            assert_eq!(TermError::from_bits(e.to_bits()), Some(e));
        }
        assert_eq!(llp::NO_MATCHING_RTR.to_bits(), 0x2307);
        assert_eq!(rdmap::ACCESS.to_bits(), 0x0102);
        assert_eq!(TermError::from_bits(0x3000), None);
    }

    #[test]
    fn rfc6581_codes_use_layer_2_type_3() {
        // RFC 6581 section 9: "MUST generate the TERM message that contains
        // Layer 2, Error Type 3, Error Code 5"; codes 6 (insufficient IRD)
        // and 7 (no matching RTR) likewise (sections 5 and 8).
        assert_eq!(llp::LOCAL_CATA.to_bits(), 0x2305);
        assert_eq!(llp::INSUFFICIENT_IRD.to_bits(), 0x2306);
        assert_eq!(llp::NO_MATCHING_RTR.to_bits(), 0x2307);
        // RFC 5044 section 8 codes 1 to 4, sent as siw does (type 0).
        assert_eq!(llp::CONNECTION_LOST.to_bits(), 0x2001);
        assert_eq!(llp::CRC.to_bits(), 0x2002);
        assert_eq!(llp::MARKER.to_bits(), 0x2003);
        assert_eq!(llp::INVALID_REQ_RESP.to_bits(), 0x2004);
        // Received with either type, they are the same MPA error.
        let siw_ird = TermError::from_bits(0x2006).unwrap();
        let cxgb_crc = TermError::from_bits(0x2302).unwrap();
        assert_eq!(siw_ird.llp_code(), llp::INSUFFICIENT_IRD.llp_code());
        assert_eq!(cxgb_crc.llp_code(), llp::CRC.llp_code());
        assert_eq!(TermError::from_bits(0x2102).unwrap().llp_code(), None);
        assert_eq!(ddp::U_NO_BUFFER.llp_code(), None);
    }

    #[test]
    fn ddp_codes_match_rfc5041_table() {
        // RFC 5041 section 7.2: "0x1 Tagged Buffer Error: 0x00 Invalid STag,
        // 0x01 Base or bounds violation, 0x02 STag not associated with DDP
        // Stream, 0x03 TO wrap, 0x04 Invalid DDP version; 0x2 Untagged
        // Buffer Error: 0x01 Invalid QN, 0x02 Invalid MSN - no buffer
        // available, 0x03 Invalid MSN - MSN range is not valid, 0x04 Invalid
        // MO, 0x05 DDP Message too long for available buffer, 0x06 Invalid
        // DDP version; 0x3 Rsvd, Reserved for the use by the LLP".
        let t = [
            ddp::T_INVALID_STAG,
            ddp::T_BASE_BOUNDS,
            ddp::T_STAG_NOT_ASSOC,
            ddp::T_TO_WRAP,
            ddp::T_INVALID_VERSION,
        ];
        for (i, e) in t.iter().enumerate() {
            assert_eq!(e.to_bits(), 0x1100 + i as u16);
        }
        let u = [
            ddp::U_INVALID_QN,
            ddp::U_NO_BUFFER,
            ddp::U_MSN_RANGE,
            ddp::U_INVALID_MO,
            ddp::U_TOO_LONG,
            ddp::U_INVALID_VERSION,
        ];
        for (i, e) in u.iter().enumerate() {
            assert_eq!(e.to_bits(), 0x1201 + i as u16);
        }
        assert_eq!(ddp::LOCAL_CATA.to_bits(), 0x1000);
    }
}
