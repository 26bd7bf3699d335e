//! The coded-symbol header: what a source or repair symbol of the coded transport carries
//! inside a secure frame.
//!
//! ```text
//!  0       1       2               4                               8
//! +-------+-------+---------------+-------------------------------+
//! | kind  | rsvd  |   coder id    |     index / first index       |
//! +-------+-------+---------------+-------------------------------+
//! |  window count |  repair key   |  payload (one symbol) ...
//! +---------------+---------------+------------------------------
//!  8              10              12
//! ```
//!
//! All integers are big-endian. `kind` is 0 for a source symbol (count and key must be 0) and
//! 1 for a repair symbol combining `count` (≥ 1) consecutive source symbols from `first`, with
//! coefficients derived from `key` (RFC 8681 §3.6). The reserved byte must be zero so that it
//! can carry flags later. Parsing never panics: every accessor of a checked view is in bounds.

use core::fmt;

/// Byte ranges of the header fields.
mod field {
    use core::ops::{Range, RangeFrom};
    pub const KIND: usize = 0;
    pub const RESERVED: usize = 1;
    pub const CODER: Range<usize> = 2..4;
    pub const INDEX: Range<usize> = 4..8;
    pub const COUNT: Range<usize> = 8..10;
    pub const KEY: Range<usize> = 10..12;
    pub const PAYLOAD: RangeFrom<usize> = 12..;
}

/// Length of the header.
pub const HEADER_LEN: usize = field::PAYLOAD.start;

/// Why a symbol header was rejected.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum SymbolError {
    #[error("symbol packet of {0} bytes is shorter than its {HEADER_LEN}-byte header")]
    Truncated(usize),
    #[error("unknown symbol kind {0}")]
    Kind(u8),
    #[error("reserved byte is {0:#04x}, must be zero")]
    Reserved(u8),
    #[error("source symbol with a window count or repair key")]
    SourceWithRepairFields,
    #[error("repair symbol covering no source symbols")]
    EmptyRepair,
    #[error("repair window [{first}, {first} + {count}) runs past index 2^32")]
    IndexOverflow { first: u32, count: u16 },
}

/// A read/write view of a symbol packet.
#[derive(Debug, Clone)]
pub struct SymbolPacket<T: AsRef<[u8]>> {
    buffer: T,
}

fn be16(b: &[u8]) -> u16 {
    u16::from_be_bytes([b[0], b[1]])
}

fn be32(b: &[u8]) -> u32 {
    u32::from_be_bytes([b[0], b[1], b[2], b[3]])
}

impl<T: AsRef<[u8]>> SymbolPacket<T> {
    /// Wraps a buffer without checks; accessors may panic on a short buffer.
    pub const fn new_unchecked(buffer: T) -> Self {
        SymbolPacket { buffer }
    }

    /// Wraps a buffer after [`check_len`](Self::check_len).
    pub fn new_checked(buffer: T) -> Result<Self, SymbolError> {
        let p = Self::new_unchecked(buffer);
        p.check_len()?;
        Ok(p)
    }

    /// Ensures every header accessor is in bounds.
    pub fn check_len(&self) -> Result<(), SymbolError> {
        let len = self.buffer.as_ref().len();
        if len < HEADER_LEN { Err(SymbolError::Truncated(len)) } else { Ok(()) }
    }

    pub fn into_inner(self) -> T {
        self.buffer
    }

    pub fn kind(&self) -> u8 {
        self.buffer.as_ref()[field::KIND]
    }

    pub fn reserved(&self) -> u8 {
        self.buffer.as_ref()[field::RESERVED]
    }

    pub fn coder(&self) -> u16 {
        be16(&self.buffer.as_ref()[field::CODER])
    }

    pub fn index(&self) -> u32 {
        be32(&self.buffer.as_ref()[field::INDEX])
    }

    pub fn count(&self) -> u16 {
        be16(&self.buffer.as_ref()[field::COUNT])
    }

    pub fn key(&self) -> u16 {
        be16(&self.buffer.as_ref()[field::KEY])
    }

    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[field::PAYLOAD]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> SymbolPacket<T> {
    pub fn set_kind(&mut self, v: u8) {
        self.buffer.as_mut()[field::KIND] = v;
    }

    pub fn set_reserved(&mut self, v: u8) {
        self.buffer.as_mut()[field::RESERVED] = v;
    }

    pub fn set_coder(&mut self, v: u16) {
        self.buffer.as_mut()[field::CODER].copy_from_slice(&v.to_be_bytes());
    }

    pub fn set_index(&mut self, v: u32) {
        self.buffer.as_mut()[field::INDEX].copy_from_slice(&v.to_be_bytes());
    }

    pub fn set_count(&mut self, v: u16) {
        self.buffer.as_mut()[field::COUNT].copy_from_slice(&v.to_be_bytes());
    }

    pub fn set_key(&mut self, v: u16) {
        self.buffer.as_mut()[field::KEY].copy_from_slice(&v.to_be_bytes());
    }

    pub fn payload_mut(&mut self) -> &mut [u8] {
        &mut self.buffer.as_mut()[field::PAYLOAD]
    }
}

/// What a symbol is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SymbolKind {
    /// Source symbol `index`, sent as is.
    Source { index: u32 },
    /// A combination of source symbols `first .. first + count` with coefficients from `key`.
    Repair { first: u32, count: u16, key: u16 },
}

/// A parsed symbol header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SymbolRepr {
    pub coder: u16,
    pub kind: SymbolKind,
}

impl SymbolRepr {
    const KIND_SOURCE: u8 = 0;
    const KIND_REPAIR: u8 = 1;

    /// Parses and validates a header.
    pub fn parse<T: AsRef<[u8]>>(p: &SymbolPacket<T>) -> Result<Self, SymbolError> {
        p.check_len()?;
        if p.reserved() != 0 {
            return Err(SymbolError::Reserved(p.reserved()));
        }
        let kind = match p.kind() {
            Self::KIND_SOURCE => {
                if p.count() != 0 || p.key() != 0 {
                    return Err(SymbolError::SourceWithRepairFields);
                }
                SymbolKind::Source { index: p.index() }
            }
            Self::KIND_REPAIR => {
                let (first, count) = (p.index(), p.count());
                if count == 0 {
                    return Err(SymbolError::EmptyRepair);
                }
                if u64::from(first) + u64::from(count) > 1 << 32 {
                    return Err(SymbolError::IndexOverflow { first, count });
                }
                SymbolKind::Repair { first, count, key: p.key() }
            }
            k => return Err(SymbolError::Kind(k)),
        };
        Ok(SymbolRepr { coder: p.coder(), kind })
    }

    /// Bytes the header takes.
    pub const fn header_len(&self) -> usize {
        HEADER_LEN
    }

    /// Writes the header; the payload is the caller's.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, p: &mut SymbolPacket<T>) {
        p.set_reserved(0);
        p.set_coder(self.coder);
        match self.kind {
            SymbolKind::Source { index } => {
                p.set_kind(Self::KIND_SOURCE);
                p.set_index(index);
                p.set_count(0);
                p.set_key(0);
            }
            SymbolKind::Repair { first, count, key } => {
                p.set_kind(Self::KIND_REPAIR);
                p.set_index(first);
                p.set_count(count);
                p.set_key(key);
            }
        }
    }
}

impl fmt::Display for SymbolRepr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.kind {
            SymbolKind::Source { index } => write!(f, "coder {} source {}", self.coder, index),
            SymbolKind::Repair { first, count, key } => {
                write!(f, "coder {} repair [{}, +{}) key {}", self.coder, first, count, key)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    static REPAIR_BYTES: [u8; 15] =
        [0x01, 0x00, 0x00, 0x07, 0x00, 0x00, 0x01, 0x02, 0x00, 0x40, 0xBE, 0xEF, 0xAA, 0xBB, 0xCC];

    #[test]
    fn repair_bytes_round_trip() {
        let p = SymbolPacket::new_checked(&REPAIR_BYTES[..]).unwrap();
        let r = SymbolRepr::parse(&p).unwrap();
        assert_eq!(r, SymbolRepr { coder: 7, kind: SymbolKind::Repair { first: 258, count: 64, key: 0xBEEF } });
        assert_eq!(p.payload(), &[0xAA, 0xBB, 0xCC]);
        let mut buf = [0u8; 15];
        buf[12..].copy_from_slice(&[0xAA, 0xBB, 0xCC]);
        r.emit(&mut SymbolPacket::new_unchecked(&mut buf[..]));
        assert_eq!(buf, REPAIR_BYTES);
        assert_eq!(r.to_string(), "coder 7 repair [258, +64) key 48879");
    }

    #[test]
    fn source_round_trip() {
        let r = SymbolRepr { coder: 1, kind: SymbolKind::Source { index: u32::MAX } };
        let mut buf = [0xFFu8; HEADER_LEN];
        r.emit(&mut SymbolPacket::new_unchecked(&mut buf[..]));
        assert_eq!(buf, [0, 0, 0, 1, 0xFF, 0xFF, 0xFF, 0xFF, 0, 0, 0, 0]);
        assert_eq!(SymbolRepr::parse(&SymbolPacket::new_unchecked(&buf[..])).unwrap(), r);
    }

    #[test]
    fn malformed_headers_are_typed_errors() {
        for len in 0..HEADER_LEN {
            assert_eq!(SymbolPacket::new_checked(&REPAIR_BYTES[..len]).unwrap_err(), SymbolError::Truncated(len));
            assert!(SymbolRepr::parse(&SymbolPacket::new_unchecked(&REPAIR_BYTES[..len])).is_err());
        }
        let parse = |f: &dyn Fn(&mut [u8])| {
            let mut b = REPAIR_BYTES;
            f(&mut b);
            SymbolRepr::parse(&SymbolPacket::new_unchecked(&b[..]))
        };
        assert_eq!(parse(&|b| b[0] = 9), Err(SymbolError::Kind(9)));
        assert_eq!(parse(&|b| b[1] = 1), Err(SymbolError::Reserved(1)));
        assert_eq!(parse(&|b| b[0] = 0), Err(SymbolError::SourceWithRepairFields));
        assert_eq!(parse(&|b| b[8..10].fill(0)), Err(SymbolError::EmptyRepair));
        assert_eq!(parse(&|b| b[4..8].fill(0xFF)), Err(SymbolError::IndexOverflow { first: u32::MAX, count: 64 }));
    }
}
