//! Packets of the coded transport (LRT), carried as the payload of a secure frame.
//!
//! The first byte is the packet type. Types 0 and 1 are coded symbols with the
//! [`crate::symbol`] header (whose kind byte doubles as the type); the others are:
//!
//! ```text
//! ACK (2)        type | flags | coder u16 | seen u32 | released u32 | echo_pn u64 | rx_data u64
//!                | rank u32 | loss_runs u32 | ack_delay_us u32
//! HELLO (3)      type | flags | version u8 | rsvd u8 | symbol_size u16 | max_window u16
//! HELLO_ACK (4)       | coder_symbols u32 | conn_id u64
//! PING (5)       type | rsvd
//! CLOSE (6)      type | rsvd | code u16
//! ```
//!
//! All integers big-endian. ACK flag bit 0 is *full rank*: the receiver has released every
//! symbol of that coder (seed 004 §III-D's extra acknowledgement for out-of-date symbols).
//! `echo_pn` is the highest frame packet number the receiver has authenticated and `rx_data`
//! how many symbol packets it has received in all; the sender derives round-trip time and
//! loss from them. `seen` is the seen count (every column below it is seen or decoded: the
//! encoder may slide past it), `rank` how many columns of the coder the receiver holds in all,
//! so the sender knows how many equations it lacks even when gaps lie between known columns.
//! `loss_runs` counts the runs of consecutive frame packet numbers the receiver found missing
//! (wrapping): with `rx_data` it tells the sender how long loss bursts are. `ack_delay_us` is
//! how long the receiver held the acknowledgement after `echo_pn` arrived (its `ack_every` /
//! `ack_delay` batching, saturating), so the sender can take it out of the round trip it
//! measures, as QUIC's ACK Delay field (RFC 9000 §19.3, RFC 9002 §5.3). Every other bit that
//! is not defined must be zero.

use crate::symbol::{self, SymbolError, SymbolKind, SymbolPacket, SymbolRepr};

/// Packet type numbers.
pub mod kind {
    pub const SOURCE: u8 = 0;
    pub const REPAIR: u8 = 1;
    pub const ACK: u8 = 2;
    pub const HELLO: u8 = 3;
    pub const HELLO_ACK: u8 = 4;
    pub const PING: u8 = 5;
    pub const CLOSE: u8 = 6;
}

const ACK_LEN: usize = 40;
const HELLO_LEN: usize = 20;
const PING_LEN: usize = 2;
const CLOSE_LEN: usize = 4;
const ACK_FULL_RANK: u8 = 0x01;

/// Protocol version carried in HELLO.
pub const LRT_VERSION: u8 = 3;

/// Why an LRT packet was rejected.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum LrtError {
    #[error("empty packet")]
    Empty,
    #[error("packet type {0} is unknown")]
    UnknownType(u8),
    #[error("packet type {kind} needs {need} bytes, got {got}")]
    Truncated { kind: u8, need: usize, got: usize },
    #[error("packet type {kind}: undefined bits set")]
    Reserved { kind: u8 },
    #[error(transparent)]
    Symbol(#[from] SymbolError),
}

/// Rank-update acknowledgement.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct AckRepr {
    pub coder: u16,
    pub full_rank: bool,
    pub seen: u32,
    pub released: u32,
    pub echo_pn: u64,
    pub rx_data: u64,
    pub rank: u32,
    pub loss_runs: u32,
    /// Microseconds between `echo_pn`'s arrival and this acknowledgement's departure.
    pub ack_delay_us: u32,
}

/// Handshake parameters, identical in HELLO and HELLO_ACK.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct HelloRepr {
    pub version: u8,
    pub symbol_size: u16,
    pub max_window: u16,
    pub coder_symbols: u32,
    pub conn_id: u64,
}

/// A parsed LRT packet; symbol payloads borrow from the datagram.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LrtRepr<'a> {
    Symbol { header: SymbolRepr, payload: &'a [u8] },
    Ack(AckRepr),
    Hello(HelloRepr),
    HelloAck(HelloRepr),
    Ping,
    Close { code: u16 },
}

fn need(b: &[u8], kind: u8, len: usize) -> Result<(), LrtError> {
    if b.len() < len { Err(LrtError::Truncated { kind, need: len, got: b.len() }) } else { Ok(()) }
}

fn u16_at(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[at..at + 8]);
    u64::from_be_bytes(a)
}

fn parse_hello(b: &[u8], k: u8) -> Result<HelloRepr, LrtError> {
    need(b, k, HELLO_LEN)?;
    if b[1] != 0 || b[3] != 0 {
        return Err(LrtError::Reserved { kind: k });
    }
    Ok(HelloRepr {
        version: b[2],
        symbol_size: u16_at(b, 4),
        max_window: u16_at(b, 6),
        coder_symbols: u32_at(b, 8),
        conn_id: u64_at(b, 12),
    })
}

impl<'a> LrtRepr<'a> {
    /// Parses a packet; never panics.
    pub fn parse(b: &'a [u8]) -> Result<Self, LrtError> {
        let &k = b.first().ok_or(LrtError::Empty)?;
        match k {
            kind::SOURCE | kind::REPAIR => {
                let p = SymbolPacket::new_checked(b)?;
                let header = SymbolRepr::parse(&p)?;
                Ok(LrtRepr::Symbol { header, payload: &b[symbol::HEADER_LEN..] })
            }
            kind::ACK => {
                need(b, k, ACK_LEN)?;
                if b[1] & !ACK_FULL_RANK != 0 {
                    return Err(LrtError::Reserved { kind: k });
                }
                Ok(LrtRepr::Ack(AckRepr {
                    full_rank: b[1] & ACK_FULL_RANK != 0,
                    coder: u16_at(b, 2),
                    seen: u32_at(b, 4),
                    released: u32_at(b, 8),
                    echo_pn: u64_at(b, 12),
                    rx_data: u64_at(b, 20),
                    rank: u32_at(b, 28),
                    loss_runs: u32_at(b, 32),
                    ack_delay_us: u32_at(b, 36),
                }))
            }
            kind::HELLO => Ok(LrtRepr::Hello(parse_hello(b, k)?)),
            kind::HELLO_ACK => Ok(LrtRepr::HelloAck(parse_hello(b, k)?)),
            kind::PING => {
                need(b, k, PING_LEN)?;
                if b[1] != 0 {
                    return Err(LrtError::Reserved { kind: k });
                }
                Ok(LrtRepr::Ping)
            }
            kind::CLOSE => {
                need(b, k, CLOSE_LEN)?;
                if b[1] != 0 {
                    return Err(LrtError::Reserved { kind: k });
                }
                Ok(LrtRepr::Close { code: u16_at(b, 2) })
            }
            other => Err(LrtError::UnknownType(other)),
        }
    }

    /// Bytes [`emit`](Self::emit) writes.
    pub fn buffer_len(&self) -> usize {
        match self {
            LrtRepr::Symbol { payload, .. } => symbol::HEADER_LEN + payload.len(),
            LrtRepr::Ack(_) => ACK_LEN,
            LrtRepr::Hello(_) | LrtRepr::HelloAck(_) => HELLO_LEN,
            LrtRepr::Ping => PING_LEN,
            LrtRepr::Close { .. } => CLOSE_LEN,
        }
    }

    /// Writes the packet into the front of `out` and returns its length, or `None` when `out`
    /// is too short.
    pub fn emit(&self, out: &mut [u8]) -> Option<usize> {
        let len = self.buffer_len();
        let b = out.get_mut(..len)?;
        b.fill(0);
        match self {
            LrtRepr::Symbol { header, payload } => {
                header.emit(&mut SymbolPacket::new_unchecked(&mut b[..]));
                b[symbol::HEADER_LEN..].copy_from_slice(payload);
            }
            LrtRepr::Ack(a) => {
                b[0] = kind::ACK;
                b[1] = if a.full_rank { ACK_FULL_RANK } else { 0 };
                b[2..4].copy_from_slice(&a.coder.to_be_bytes());
                b[4..8].copy_from_slice(&a.seen.to_be_bytes());
                b[8..12].copy_from_slice(&a.released.to_be_bytes());
                b[12..20].copy_from_slice(&a.echo_pn.to_be_bytes());
                b[20..28].copy_from_slice(&a.rx_data.to_be_bytes());
                b[28..32].copy_from_slice(&a.rank.to_be_bytes());
                b[32..36].copy_from_slice(&a.loss_runs.to_be_bytes());
                b[36..40].copy_from_slice(&a.ack_delay_us.to_be_bytes());
            }
            LrtRepr::Hello(h) | LrtRepr::HelloAck(h) => {
                b[0] = if matches!(self, LrtRepr::Hello(_)) { kind::HELLO } else { kind::HELLO_ACK };
                b[2] = h.version;
                b[4..6].copy_from_slice(&h.symbol_size.to_be_bytes());
                b[6..8].copy_from_slice(&h.max_window.to_be_bytes());
                b[8..12].copy_from_slice(&h.coder_symbols.to_be_bytes());
                b[12..20].copy_from_slice(&h.conn_id.to_be_bytes());
            }
            LrtRepr::Ping => b[0] = kind::PING,
            LrtRepr::Close { code } => {
                b[0] = kind::CLOSE;
                b[2..4].copy_from_slice(&code.to_be_bytes());
            }
        }
        Some(len)
    }
}

/// Convenience for symbol packets: the header a source symbol `index` of `coder` carries.
pub fn source_header(coder: u16, index: u32) -> SymbolRepr {
    SymbolRepr { coder, kind: SymbolKind::Source { index } }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip(r: LrtRepr<'_>) {
        let mut buf = [0xEEu8; 64];
        let n = r.emit(&mut buf).unwrap();
        assert_eq!(n, r.buffer_len());
        assert_eq!(LrtRepr::parse(&buf[..n]).unwrap(), r);
        for cut in 0..n {
            if !matches!(r, LrtRepr::Symbol { .. }) || cut < symbol::HEADER_LEN {
                assert!(LrtRepr::parse(&buf[..cut]).is_err(), "{r:?} truncated to {cut}");
            }
        }
        assert!(r.emit(&mut buf[..n - 1]).is_none());
    }

    #[test]
    fn every_packet_round_trips_and_rejects_truncation() {
        let hello = HelloRepr { version: 1, symbol_size: 1200, max_window: 256, coder_symbols: 4096, conn_id: 0xABCD };
        round_trip(LrtRepr::Ack(AckRepr {
            coder: 3,
            full_rank: true,
            seen: 77,
            released: 70,
            echo_pn: 1 << 40,
            rx_data: 12345,
            rank: 80,
            loss_runs: 4,
            ack_delay_us: 4321,
        }));
        round_trip(LrtRepr::Hello(hello));
        round_trip(LrtRepr::HelloAck(hello));
        round_trip(LrtRepr::Ping);
        round_trip(LrtRepr::Close { code: 9 });
        round_trip(LrtRepr::Symbol { header: source_header(1, 5), payload: b"abc" });
    }

    #[test]
    fn ack_bytes() {
        let a = AckRepr {
            coder: 0x0102,
            full_rank: false,
            seen: 5,
            released: 4,
            echo_pn: 9,
            rx_data: 10,
            rank: 7,
            loss_runs: 3,
            ack_delay_us: 0x0506,
        };
        let mut buf = [0u8; ACK_LEN];
        LrtRepr::Ack(a).emit(&mut buf).unwrap();
        assert_eq!(
            buf,
            [
                2, 0, 1, 2, 0, 0, 0, 5, 0, 0, 0, 4, 0, 0, 0, 0, 0, 0, 0, 9, 0, 0, 0, 0, 0, 0, 0, 10, 0, 0, 0, 7, 0, 0,
                0, 3, 0, 0, 5, 6
            ]
        );
    }

    #[test]
    fn bad_packets_are_typed_errors() {
        assert_eq!(LrtRepr::parse(&[]), Err(LrtError::Empty));
        assert_eq!(LrtRepr::parse(&[99, 0]), Err(LrtError::UnknownType(99)));
        assert_eq!(LrtRepr::parse(&[kind::PING, 1]), Err(LrtError::Reserved { kind: kind::PING }));
        let mut ack = [0u8; ACK_LEN];
        ack[0] = kind::ACK;
        ack[1] = 0x80;
        assert_eq!(LrtRepr::parse(&ack), Err(LrtError::Reserved { kind: kind::ACK }));
        assert!(matches!(LrtRepr::parse(&[kind::REPAIR, 0, 0]), Err(LrtError::Symbol(SymbolError::Truncated(3)))));
    }
}
