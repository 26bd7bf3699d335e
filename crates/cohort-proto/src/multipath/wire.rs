//! Multipath datagrams: a data header in front of each LRT packet, and path acknowledgements.
//!
//! ```text
//! data:     0x01 | path (u8) | path seq (u32) | send time µs (u32) | LRT pn (u64) | LRT packet
//! path ack: 0x02 | path (u8) | received (u32) | highest seq (u32) | its send time (u32)
//!                | held µs (u32) | raw one-way delay µs (u32) | arrival µs (u32)
//!                | probe mark (u32)
//! probe:    0x03 | path (u8) | mark (u32)          (asks for a path acknowledgement now)
//! empty:    0x04 | path (u8) | mark (u32)          (answers a probe: nothing arrived yet)
//! ```
//!
//! Big-endian. Times are microseconds modulo 2³² of the sender's clock (send time) and of
//! the receiver's (arrival); their difference is the one-way delay plus an unknown clock
//! offset, which cancels in the queueing delay `q` (LD-MPSP needs the timestamp, seed 001 §5).
//! `received` counts every data datagram the receiver took on the path, modulo 2³²; `held`
//! is how long the receiver held the highest packet before acknowledging it (so the sender can
//! take it out of the round trip). A probe's `mark` is the path sequence number of the next
//! data datagram at the time it left; the acknowledgement echoes the mark of the latest probe
//! it answers (`u32::MAX`: none). A path keeps its order, so every datagram below the mark
//! and above the highest received is lost. A receiver that has taken nothing on the path yet
//! has no acknowledgement to give and answers with an `empty` report instead (echoing the
//! mark): a path out of reach since the connection began is alive again once one arrives.

/// Bytes in front of each LRT packet.
pub const DATA_HEADER: usize = 18;
/// Bytes of a path acknowledgement.
pub const PATH_ACK_LEN: usize = 30;
/// Bytes of a probe.
pub const PROBE_LEN: usize = 6;

const DATA: u8 = 1;
const PATH_ACK: u8 = 2;
const PROBE: u8 = 3;
const EMPTY: u8 = 4;

/// A data header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DataHeader {
    pub path: u8,
    pub seq: u32,
    pub sent_us: u32,
    pub pn: u64,
}

/// A path acknowledgement.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PathAck {
    pub path: u8,
    pub received: u32,
    pub highest: u32,
    pub highest_sent_us: u32,
    pub held_us: u32,
    pub owd_raw_us: u32,
    pub arrival_us: u32,
    /// The mark of the probe this report answers, `NO_MARK` if none.
    pub probe_mark: u32,
}

/// A report that answers no probe.
pub const NO_MARK: u32 = u32::MAX;

/// A parsed multipath datagram.
#[derive(Debug, PartialEq, Eq)]
pub enum MpRepr<'a> {
    Data(DataHeader, &'a [u8]),
    PathAck(PathAck),
    /// A request for path `.0`'s acknowledgement with mark `.1`: is the path alive?
    Probe(u8, u32),
    /// The answer to path `.0`'s probe of mark `.1` from a receiver that has taken nothing on
    /// that path yet.
    Empty(u8, u32),
}

/// Why a datagram was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum MpWireError {
    #[error("multipath datagram of {0} bytes is truncated")]
    Truncated(usize),
    #[error("unknown multipath datagram type {0}")]
    Type(u8),
}

fn u32_at(b: &[u8], i: usize) -> u32 {
    u32::from_be_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]])
}

impl<'a> MpRepr<'a> {
    /// Parses without panicking on any input.
    pub fn parse(b: &'a [u8]) -> Result<Self, MpWireError> {
        match b.first() {
            Some(&DATA) if b.len() > DATA_HEADER => {
                let mut pn = [0u8; 8];
                pn.copy_from_slice(&b[10..18]);
                Ok(MpRepr::Data(
                    DataHeader { path: b[1], seq: u32_at(b, 2), sent_us: u32_at(b, 6), pn: u64::from_be_bytes(pn) },
                    &b[DATA_HEADER..],
                ))
            }
            Some(&PATH_ACK) if b.len() == PATH_ACK_LEN => Ok(MpRepr::PathAck(PathAck {
                path: b[1],
                received: u32_at(b, 2),
                highest: u32_at(b, 6),
                highest_sent_us: u32_at(b, 10),
                held_us: u32_at(b, 14),
                owd_raw_us: u32_at(b, 18),
                arrival_us: u32_at(b, 22),
                probe_mark: u32_at(b, 26),
            })),
            Some(&PROBE) if b.len() == PROBE_LEN => Ok(MpRepr::Probe(b[1], u32_at(b, 2))),
            Some(&EMPTY) if b.len() == PROBE_LEN => Ok(MpRepr::Empty(b[1], u32_at(b, 2))),
            Some(&(DATA | PATH_ACK | PROBE | EMPTY)) | None => Err(MpWireError::Truncated(b.len())),
            Some(&t) => Err(MpWireError::Type(t)),
        }
    }
}

impl DataHeader {
    /// Writes the header into `out[..DATA_HEADER]`.
    pub fn emit(&self, out: &mut [u8]) {
        out[0] = DATA;
        out[1] = self.path;
        out[2..6].copy_from_slice(&self.seq.to_be_bytes());
        out[6..10].copy_from_slice(&self.sent_us.to_be_bytes());
        out[10..18].copy_from_slice(&self.pn.to_be_bytes());
    }
}

/// Writes a probe of `path` with `mark` into `out[..PROBE_LEN]`.
pub fn emit_probe(path: u8, mark: u32, out: &mut [u8]) {
    emit_short(PROBE, path, mark, out);
}

/// Writes the empty answer to a probe of `path` with `mark` into `out[..PROBE_LEN]`.
pub fn emit_empty(path: u8, mark: u32, out: &mut [u8]) {
    emit_short(EMPTY, path, mark, out);
}

fn emit_short(kind: u8, path: u8, mark: u32, out: &mut [u8]) {
    out[0] = kind;
    out[1] = path;
    out[2..6].copy_from_slice(&mark.to_be_bytes());
}

impl PathAck {
    /// Writes the acknowledgement into `out[..PATH_ACK_LEN]`.
    pub fn emit(&self, out: &mut [u8]) {
        out[0] = PATH_ACK;
        out[1] = self.path;
        for (i, v) in [
            self.received,
            self.highest,
            self.highest_sent_us,
            self.held_us,
            self.owd_raw_us,
            self.arrival_us,
            self.probe_mark,
        ]
        .iter()
        .enumerate()
        {
            out[2 + 4 * i..6 + 4 * i].copy_from_slice(&v.to_be_bytes());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_round_trip_and_bad_input_is_refused() {
        let h = DataHeader { path: 3, seq: 0xDEAD_BEEF, sent_us: 7, pn: 1 << 40 };
        let mut b = vec![0u8; DATA_HEADER + 5];
        h.emit(&mut b);
        b[DATA_HEADER..].copy_from_slice(b"hello");
        assert_eq!(MpRepr::parse(&b), Ok(MpRepr::Data(h, b"hello")));
        let a = PathAck {
            path: 1,
            received: 2,
            highest: 3,
            highest_sent_us: 4,
            held_us: 5,
            owd_raw_us: 6,
            arrival_us: 7,
            probe_mark: 8,
        };
        let mut b = [0u8; PATH_ACK_LEN];
        a.emit(&mut b);
        assert_eq!(MpRepr::parse(&b), Ok(MpRepr::PathAck(a)));
        assert_eq!(MpRepr::parse(&b[..10]), Err(MpWireError::Truncated(10)));
        assert_eq!(MpRepr::parse(&[]), Err(MpWireError::Truncated(0)));
        assert_eq!(MpRepr::parse(&[9, 0, 0]), Err(MpWireError::Type(9)));
        let mut p = [0u8; PROBE_LEN];
        emit_probe(4, 77, &mut p);
        assert_eq!(MpRepr::parse(&p), Ok(MpRepr::Probe(4, 77)));
        assert_eq!(MpRepr::parse(&[3, 4, 5]), Err(MpWireError::Truncated(3)));
        emit_empty(4, 78, &mut p);
        assert_eq!(MpRepr::parse(&p), Ok(MpRepr::Empty(4, 78)));
        assert_eq!(MpRepr::parse(&p[..5]), Err(MpWireError::Truncated(5)));
        let mut d = [0u8; DATA_HEADER];
        h.emit(&mut d);
        assert_eq!(MpRepr::parse(&d), Err(MpWireError::Truncated(DATA_HEADER)), "a data header needs a packet");
    }
}
