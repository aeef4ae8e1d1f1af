// SPDX-License-Identifier: GPL-2.0
//! Zero-copy transmit output (RFC 5044 section 4 FPDUs): a plan of the
//! next stream octets as literal
//! octets (lengths, headers, markers, pad, CRC, copied payload) and
//! payload the host sends by reference (pages of registered memory).
//!
//! The engine never sees the references themselves: when the encoder
//! offers payload to [`super::Host::payload_by_ref`] and the host accepts,
//! the host records its own references (in stream order) and the plan only
//! notes a [`Piece::Host`] of that length. The host then walks the pieces
//! in order, taking literal octets from the plan's buffer and payload from
//! its own list.

/// Where the next octets of a transmit round come from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Piece {
    /// The next `len` octets of the plan's literal buffer.
    Literal(usize),
    /// `len` payload octets the host took by reference.
    Host(usize),
}

/// A payload source the host may take by reference.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PayloadRef {
    /// A send work request's local data, `offset` octets into it.
    Local {
        /// The request's local data.
        local: super::Local,
        /// Offset into it.
        offset: u32,
    },
    /// Registered memory (a Read Response's source).
    Tagged {
        /// Source STag.
        stag: u32,
        /// The registration the Read Request was validated against.
        reg: u64,
        /// Tagged offset of the first octet.
        to: u64,
    },
}

/// The output of [`super::Qp::tx_plan`]: at most `budget` stream octets,
/// as pieces over a literal buffer.
#[derive(Debug)]
pub struct TxPlan<'a> {
    buf: &'a mut [u8],
    used: usize,
    pieces: &'a mut [Piece],
    n: usize,
    budget: usize,
    len: usize,
}

impl<'a> TxPlan<'a> {
    /// An empty plan writing literal octets into `buf`, recording at most
    /// `pieces.len()` pieces and `budget` stream octets.
    pub fn new(buf: &'a mut [u8], pieces: &'a mut [Piece], budget: usize) -> Self {
        TxPlan {
            buf,
            used: 0,
            pieces,
            n: 0,
            budget,
            len: 0,
        }
    }

    /// The pieces, in stream order.
    pub fn pieces(&self) -> &[Piece] {
        self.pieces.get(..self.n).unwrap_or(&[])
    }

    /// The literal octets, in stream order.
    pub fn literal(&self) -> &[u8] {
        self.buf.get(..self.used).unwrap_or(&[])
    }

    /// Stream octets planned.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Nothing planned.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

/// Where the encoder writes.
pub(crate) trait Out {
    /// Stream octets still accepted.
    fn room(&self) -> usize;
    /// Appends up to `max` literal octets and returns them to be filled
    /// (shorter than `max`, or empty, when space runs out).
    fn reserve(&mut self, max: usize) -> &mut [u8];
    /// Literal octets [`Out::reserve`] would return now, at most.
    fn literal_room(&self) -> usize;
    /// Whether a by-reference piece can be recorded.
    fn can_ref(&self) -> bool;
    /// Records `len` octets taken by reference.
    fn push_ref(&mut self, len: usize);
}

/// A plain output buffer: everything is copied.
pub(crate) struct SliceOut<'a> {
    pub(crate) buf: &'a mut [u8],
    pub(crate) at: usize,
}

impl Out for SliceOut<'_> {
    fn room(&self) -> usize {
        self.buf.len() - self.at
    }

    fn reserve(&mut self, max: usize) -> &mut [u8] {
        let n = max.min(self.buf.len() - self.at);
        let at = self.at;
        self.at += n;
        self.buf.get_mut(at..at + n).unwrap_or(&mut [])
    }

    fn literal_room(&self) -> usize {
        self.buf.len() - self.at
    }

    fn can_ref(&self) -> bool {
        false
    }

    fn push_ref(&mut self, _len: usize) {}
}

impl Out for TxPlan<'_> {
    fn room(&self) -> usize {
        self.budget - self.len
    }

    fn reserve(&mut self, max: usize) -> &mut [u8] {
        let mut n = max
            .min(self.budget - self.len)
            .min(self.buf.len() - self.used);
        match self.n.checked_sub(1).and_then(|i| self.pieces.get_mut(i)) {
            Some(Piece::Literal(l)) => *l += n,
            _ => match self.pieces.get_mut(self.n) {
                Some(p) if n > 0 => {
                    *p = Piece::Literal(n);
                    self.n += 1;
                }
                _ => n = 0,
            },
        }
        let at = self.used;
        self.used += n;
        self.len += n;
        self.buf.get_mut(at..at + n).unwrap_or(&mut [])
    }

    fn literal_room(&self) -> usize {
        let extends = matches!(
            self.n.checked_sub(1).and_then(|i| self.pieces.get(i)),
            Some(Piece::Literal(_))
        );
        if extends || self.n < self.pieces.len() {
            (self.budget - self.len).min(self.buf.len() - self.used)
        } else {
            0
        }
    }

    fn can_ref(&self) -> bool {
        self.n < self.pieces.len()
    }

    fn push_ref(&mut self, len: usize) {
        if let Some(p) = self.pieces.get_mut(self.n) {
            *p = Piece::Host(len);
            self.n += 1;
            self.len += len;
        }
    }
}
