//! Messages of coordinated preemption's bulk-token arbiter (COORP, seed 000 §IV-A, Algorithm
//! 1), extended with leases, epochs and fencing tokens so the arbiter can move between robots.
//! They travel as the payload of a secure frame; the frame layer gives them their own payload
//! kind ([`FRAME_KIND`]).
//!
//! Every message starts with the same 14 bytes: type, flags, the sender's robot id and an
//! epoch. In arbiter messages (GRANT, REVOKE, QUERY) the epoch is the sending arbiter's; in
//! robot messages it is the highest epoch the robot has heard, so a new arbiter learns of any
//! epoch newer than its own.
//!
//! ```text
//!  0      1       2            6                 14
//! +------+-------+------------+-----------------+----------------------------------+
//! | type | flags | sender u32 | epoch u64       | body                             |
//! +------+-------+------------+-----------------+----------------------------------+
//!
//! REQUEST (1)  stamp u64                                              robot -> arbiter
//! GRANT   (2)  holder u32 | seq u64 | lease_us u32 | slice_us u32 | echo u64
//! RENEW   (3)  grant_epoch u64 | seq u64 | stamp u64                 robot -> arbiter
//! RELEASE (4)  grant_epoch u64 | seq u64                              robot -> arbiter
//! REVOKE  (5)  holder u32 | grant_epoch u64 | seq u64
//! QUERY   (6)  —                                                      arbiter -> all
//! REPORT  (7)  grant_epoch u64 | seq u64 | lease_left_us u32 | slice_left_us u32 |
//!              waited_us u32 | stamp u64          flags: bit 0 holding, bit 1 waiting
//! ```
//!
//! All integers are big-endian. `stamp` is the robot's own clock (nanoseconds) when it sent
//! the message; a GRANT echoes the stamp of the request or renewal it answers in `echo`, so the
//! holder can count its lease from a moment it knows precedes the grant. `(epoch, seq)` of a
//! GRANT is the fencing token of that grant; RENEW, RELEASE, REVOKE and REPORT name a grant by
//! it. A REPORT that does not hold has its grant fields zero; one that does not wait has
//! `waited_us` zero. Undefined flag bits must be zero and no message carries trailing bytes,
//! so whatever [`PreemptRepr::parse`] accepts, [`PreemptRepr::emit`] writes back byte for byte.

/// The secure frame's payload kind of these messages.
pub const FRAME_KIND: u8 = crate::frame::kind::PREEMPT;

/// Message type numbers.
pub mod kind {
    pub const REQUEST: u8 = 1;
    pub const GRANT: u8 = 2;
    pub const RENEW: u8 = 3;
    pub const RELEASE: u8 = 4;
    pub const REVOKE: u8 = 5;
    pub const QUERY: u8 = 6;
    pub const REPORT: u8 = 7;
}

/// Bytes of the common header.
pub const HEADER_LEN: usize = 14;
/// The longest message (REPORT).
pub const MAX_LEN: usize = HEADER_LEN + 36;

const REPORT_HOLDING: u8 = 0x01;
const REPORT_WAITING: u8 = 0x02;

/// An arbiter epoch: a round number and the robot that runs the arbiter in it. Epochs are
/// ordered round first, then arbiter id, so two robots that pick the same round still have
/// distinct, ordered epochs. [`Epoch::ZERO`] means "no arbiter heard yet".
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct Epoch {
    pub round: u32,
    pub arbiter: u32,
}

impl Epoch {
    pub const ZERO: Epoch = Epoch { round: 0, arbiter: 0 };

    pub const fn from_u64(v: u64) -> Self {
        Epoch { round: (v >> 32) as u32, arbiter: v as u32 }
    }

    pub const fn to_u64(self) -> u64 {
        ((self.round as u64) << 32) | self.arbiter as u64
    }

    /// The first epoch of arbiter `arbiter` that is newer than `self`.
    pub const fn next_for(self, arbiter: u32) -> Epoch {
        Epoch { round: self.round.saturating_add(1), arbiter }
    }
}

/// Why an arbiter message was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum PreemptError {
    #[error("message of {0} bytes is shorter than the {HEADER_LEN}-byte header")]
    Truncated(usize),
    #[error("message type {0} is unknown")]
    UnknownType(u8),
    #[error("message type {kind} needs {need} bytes, got {got}")]
    Short { kind: u8, need: usize, got: usize },
    #[error("message type {kind} has {extra} trailing bytes")]
    Trailing { kind: u8, extra: usize },
    #[error("message type {kind}: undefined flag bits set")]
    Reserved { kind: u8 },
    #[error("report: fields of an absent grant or wait are not zero")]
    NonCanonical,
}

/// A zero-copy view of an arbiter message: the common header and the body.
#[derive(Debug, Clone)]
pub struct PreemptPacket<T: AsRef<[u8]>> {
    buffer: T,
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[at..at + 8]);
    u64::from_be_bytes(a)
}

impl<T: AsRef<[u8]>> PreemptPacket<T> {
    /// Wraps `buffer` without checks: accessors panic if it is shorter than [`HEADER_LEN`].
    pub const fn new_unchecked(buffer: T) -> Self {
        PreemptPacket { buffer }
    }

    /// Wraps `buffer` after [`check_len`](Self::check_len).
    pub fn new_checked(buffer: T) -> Result<Self, PreemptError> {
        let p = Self::new_unchecked(buffer);
        p.check_len()?;
        Ok(p)
    }

    /// Ensures the common header fits, so no accessor can go out of bounds.
    pub fn check_len(&self) -> Result<(), PreemptError> {
        let n = self.buffer.as_ref().len();
        if n < HEADER_LEN { Err(PreemptError::Truncated(n)) } else { Ok(()) }
    }

    pub fn into_inner(self) -> T {
        self.buffer
    }

    pub fn msg_type(&self) -> u8 {
        self.buffer.as_ref()[0]
    }

    pub fn flags(&self) -> u8 {
        self.buffer.as_ref()[1]
    }

    /// The sending robot's id.
    pub fn sender(&self) -> u32 {
        u32_at(self.buffer.as_ref(), 2)
    }

    pub fn epoch(&self) -> Epoch {
        Epoch::from_u64(u64_at(self.buffer.as_ref(), 6))
    }

    /// Everything after the common header.
    pub fn body(&self) -> &[u8] {
        &self.buffer.as_ref()[HEADER_LEN..]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> PreemptPacket<T> {
    pub fn set_msg_type(&mut self, v: u8) {
        self.buffer.as_mut()[0] = v;
    }

    pub fn set_flags(&mut self, v: u8) {
        self.buffer.as_mut()[1] = v;
    }

    pub fn set_sender(&mut self, v: u32) {
        self.buffer.as_mut()[2..6].copy_from_slice(&v.to_be_bytes());
    }

    pub fn set_epoch(&mut self, v: Epoch) {
        self.buffer.as_mut()[6..14].copy_from_slice(&v.to_u64().to_be_bytes());
    }

    pub fn body_mut(&mut self) -> &mut [u8] {
        &mut self.buffer.as_mut()[HEADER_LEN..]
    }
}

/// A grant a REPORT says its sender holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct HeldGrant {
    /// The fencing token of the grant: its arbiter's epoch and sequence number.
    pub epoch: Epoch,
    pub seq: u64,
    /// Lease left by the holder's own (conservative) reckoning, microseconds.
    pub lease_left_us: u32,
    /// Time slice left, microseconds.
    pub slice_left_us: u32,
}

/// An arbiter message's body.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Message {
    /// The sender asks for the bulk token (Algorithm 1 `request_wait`); re-sent while waiting.
    Request { stamp: u64 },
    /// The arbiter lets `holder` send bulk traffic under grant `seq` for `lease_us` counted
    /// from the holder's `echo` stamp, within a slice of which `slice_us` is left. Also the
    /// answer to a RENEW.
    Grant { holder: u32, seq: u64, lease_us: u32, slice_us: u32, echo: u64 },
    /// The holder asks to extend the lease of grant (`grant_epoch`, `seq`).
    Renew { grant_epoch: Epoch, seq: u64, stamp: u64 },
    /// The holder gives grant (`grant_epoch`, `seq`) back early (Algorithm 1 `release`).
    Release { grant_epoch: Epoch, seq: u64 },
    /// The arbiter tells `holder` that grant (`grant_epoch`, `seq`) is over: stop now.
    Revoke { holder: u32, grant_epoch: Epoch, seq: u64 },
    /// A new arbiter asks every robot for a REPORT.
    Query,
    /// A robot's state for a new arbiter: the grant it holds, if any, and whether (and for
    /// how long) it has been waiting for one.
    Report { held: Option<HeldGrant>, waiting: bool, waited_us: u32, stamp: u64 },
}

impl Message {
    /// The type byte.
    pub fn kind(&self) -> u8 {
        match self {
            Message::Request { .. } => kind::REQUEST,
            Message::Grant { .. } => kind::GRANT,
            Message::Renew { .. } => kind::RENEW,
            Message::Release { .. } => kind::RELEASE,
            Message::Revoke { .. } => kind::REVOKE,
            Message::Query => kind::QUERY,
            Message::Report { .. } => kind::REPORT,
        }
    }

    fn body_len(&self) -> usize {
        match self {
            Message::Request { .. } => 8,
            Message::Grant { .. } => 28,
            Message::Renew { .. } => 24,
            Message::Release { .. } => 16,
            Message::Revoke { .. } => 20,
            Message::Query => 0,
            Message::Report { .. } => 36,
        }
    }
}

/// A parsed arbiter message: sender, epoch and body.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct PreemptRepr {
    pub sender: u32,
    pub epoch: Epoch,
    pub msg: Message,
}

fn exact(b: &[u8], kind: u8, len: usize) -> Result<(), PreemptError> {
    if b.len() < len {
        Err(PreemptError::Short { kind, need: len + HEADER_LEN, got: b.len() + HEADER_LEN })
    } else if b.len() > len {
        Err(PreemptError::Trailing { kind, extra: b.len() - len })
    } else {
        Ok(())
    }
}

impl PreemptRepr {
    /// Parses a message; never panics.
    pub fn parse(bytes: &[u8]) -> Result<Self, PreemptError> {
        let p = PreemptPacket::new_checked(bytes)?;
        let (k, flags) = (p.msg_type(), p.flags());
        if !(kind::REQUEST..=kind::REPORT).contains(&k) {
            return Err(PreemptError::UnknownType(k));
        }
        let allowed = if k == kind::REPORT { REPORT_HOLDING | REPORT_WAITING } else { 0 };
        if flags & !allowed != 0 {
            return Err(PreemptError::Reserved { kind: k });
        }
        let b = p.body();
        let msg = match k {
            kind::REQUEST => {
                exact(b, k, 8)?;
                Message::Request { stamp: u64_at(b, 0) }
            }
            kind::GRANT => {
                exact(b, k, 28)?;
                Message::Grant {
                    holder: u32_at(b, 0),
                    seq: u64_at(b, 4),
                    lease_us: u32_at(b, 12),
                    slice_us: u32_at(b, 16),
                    echo: u64_at(b, 20),
                }
            }
            kind::RENEW => {
                exact(b, k, 24)?;
                Message::Renew { grant_epoch: Epoch::from_u64(u64_at(b, 0)), seq: u64_at(b, 8), stamp: u64_at(b, 16) }
            }
            kind::RELEASE => {
                exact(b, k, 16)?;
                Message::Release { grant_epoch: Epoch::from_u64(u64_at(b, 0)), seq: u64_at(b, 8) }
            }
            kind::REVOKE => {
                exact(b, k, 20)?;
                Message::Revoke { holder: u32_at(b, 0), grant_epoch: Epoch::from_u64(u64_at(b, 4)), seq: u64_at(b, 12) }
            }
            kind::QUERY => {
                exact(b, k, 0)?;
                Message::Query
            }
            _ => {
                exact(b, k, 36)?;
                let holding = flags & REPORT_HOLDING != 0;
                let waiting = flags & REPORT_WAITING != 0;
                let (epoch, seq, lease, slice) = (u64_at(b, 0), u64_at(b, 8), u32_at(b, 16), u32_at(b, 20));
                let waited_us = u32_at(b, 24);
                if (!holding && (epoch | seq | u64::from(lease | slice)) != 0) || (!waiting && waited_us != 0) {
                    return Err(PreemptError::NonCanonical);
                }
                let held = holding.then_some(HeldGrant {
                    epoch: Epoch::from_u64(epoch),
                    seq,
                    lease_left_us: lease,
                    slice_left_us: slice,
                });
                Message::Report { held, waiting, waited_us, stamp: u64_at(b, 28) }
            }
        };
        Ok(PreemptRepr { sender: p.sender(), epoch: p.epoch(), msg })
    }

    /// Bytes [`emit`](Self::emit) writes.
    pub fn buffer_len(&self) -> usize {
        HEADER_LEN + self.msg.body_len()
    }

    /// Writes the message into the front of `out` and returns its length; `None` when `out`
    /// is too short. A REPORT that does not wait is written with `waited_us` zero.
    pub fn emit(&self, out: &mut [u8]) -> Option<usize> {
        let len = self.buffer_len();
        let buf = out.get_mut(..len)?;
        buf.fill(0);
        let mut p = PreemptPacket::new_unchecked(&mut buf[..]);
        p.set_msg_type(self.msg.kind());
        p.set_sender(self.sender);
        p.set_epoch(self.epoch);
        if let Message::Report { held, waiting, .. } = self.msg {
            let flags = if held.is_some() { REPORT_HOLDING } else { 0 } | if waiting { REPORT_WAITING } else { 0 };
            p.set_flags(flags);
        }
        let b = p.body_mut();
        match self.msg {
            Message::Request { stamp } => b.copy_from_slice(&stamp.to_be_bytes()),
            Message::Grant { holder, seq, lease_us, slice_us, echo } => {
                b[..4].copy_from_slice(&holder.to_be_bytes());
                b[4..12].copy_from_slice(&seq.to_be_bytes());
                b[12..16].copy_from_slice(&lease_us.to_be_bytes());
                b[16..20].copy_from_slice(&slice_us.to_be_bytes());
                b[20..28].copy_from_slice(&echo.to_be_bytes());
            }
            Message::Renew { grant_epoch, seq, stamp } => {
                b[..8].copy_from_slice(&grant_epoch.to_u64().to_be_bytes());
                b[8..16].copy_from_slice(&seq.to_be_bytes());
                b[16..24].copy_from_slice(&stamp.to_be_bytes());
            }
            Message::Release { grant_epoch, seq } => {
                b[..8].copy_from_slice(&grant_epoch.to_u64().to_be_bytes());
                b[8..16].copy_from_slice(&seq.to_be_bytes());
            }
            Message::Revoke { holder, grant_epoch, seq } => {
                b[..4].copy_from_slice(&holder.to_be_bytes());
                b[4..12].copy_from_slice(&grant_epoch.to_u64().to_be_bytes());
                b[12..20].copy_from_slice(&seq.to_be_bytes());
            }
            Message::Query => {}
            Message::Report { held, waiting, waited_us, stamp } => {
                if let Some(h) = held {
                    b[..8].copy_from_slice(&h.epoch.to_u64().to_be_bytes());
                    b[8..16].copy_from_slice(&h.seq.to_be_bytes());
                    b[16..20].copy_from_slice(&h.lease_left_us.to_be_bytes());
                    b[20..24].copy_from_slice(&h.slice_left_us.to_be_bytes());
                }
                let waited = if waiting { waited_us } else { 0 };
                b[24..28].copy_from_slice(&waited.to_be_bytes());
                b[28..36].copy_from_slice(&stamp.to_be_bytes());
            }
        }
        Some(len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn samples() -> Vec<PreemptRepr> {
        let e = Epoch { round: 3, arbiter: 9 };
        let r = |sender, msg| PreemptRepr { sender, epoch: e, msg };
        let held = HeldGrant {
            epoch: Epoch { round: 2, arbiter: 1 },
            seq: 17,
            lease_left_us: 800_000,
            slice_left_us: 4_000_000,
        };
        vec![
            r(4, Message::Request { stamp: 123_456_789 }),
            r(9, Message::Grant { holder: 4, seq: 18, lease_us: 1_000_000, slice_us: 5_000_000, echo: 123_456_789 }),
            r(4, Message::Renew { grant_epoch: e, seq: 18, stamp: u64::MAX }),
            r(4, Message::Release { grant_epoch: e, seq: 18 }),
            r(9, Message::Revoke { holder: 4, grant_epoch: held.epoch, seq: 17 }),
            r(9, Message::Query),
            r(4, Message::Report { held: Some(held), waiting: false, waited_us: 0, stamp: 5 }),
            r(4, Message::Report { held: None, waiting: true, waited_us: 70_000, stamp: 6 }),
            r(4, Message::Report { held: Some(held), waiting: true, waited_us: 1, stamp: 7 }),
            r(4, Message::Report { held: None, waiting: false, waited_us: 0, stamp: 8 }),
        ]
    }

    #[test]
    fn every_message_round_trips_and_rejects_truncation_and_trailing_bytes() {
        for r in samples() {
            let mut buf = [0xEEu8; MAX_LEN + 8];
            let n = r.emit(&mut buf).unwrap();
            assert_eq!(n, r.buffer_len());
            assert!(n <= MAX_LEN);
            assert_eq!(PreemptRepr::parse(&buf[..n]).unwrap(), r);
            for cut in 0..n {
                assert!(PreemptRepr::parse(&buf[..cut]).is_err(), "{r:?} cut to {cut}");
            }
            assert!(r.emit(&mut buf[..n - 1]).is_none());
            buf[n] = 0;
            assert_eq!(PreemptRepr::parse(&buf[..n + 1]), Err(PreemptError::Trailing { kind: r.msg.kind(), extra: 1 }));
        }
    }

    #[test]
    fn grant_bytes() {
        let g = PreemptRepr {
            sender: 1,
            epoch: Epoch { round: 2, arbiter: 1 },
            msg: Message::Grant { holder: 5, seq: 7, lease_us: 0x0102_0304, slice_us: 9, echo: 0x0A0B },
        };
        let mut b = [0u8; MAX_LEN];
        let n = g.emit(&mut b).unwrap();
        #[rustfmt::skip]
        let expect = [
            2, 0, 0, 0, 0, 1,                   // GRANT, no flags, sender 1
            0, 0, 0, 2, 0, 0, 0, 1,             // epoch: round 2, arbiter 1
            0, 0, 0, 5,                         // holder 5
            0, 0, 0, 0, 0, 0, 0, 7,             // seq 7
            1, 2, 3, 4,                         // lease_us
            0, 0, 0, 9,                         // slice_us
            0, 0, 0, 0, 0, 0, 0x0A, 0x0B,       // echo
        ];
        assert_eq!(&b[..n], &expect);
    }

    #[test]
    fn epochs_order_round_first_then_arbiter() {
        let a = Epoch { round: 1, arbiter: 9 };
        let b = Epoch { round: 2, arbiter: 1 };
        assert!(a < b && a.to_u64() < b.to_u64());
        assert!(Epoch { round: 2, arbiter: 3 } > b);
        assert_eq!(Epoch::from_u64(b.to_u64()), b);
        assert_eq!(a.next_for(4), Epoch { round: 2, arbiter: 4 });
        assert!(Epoch::ZERO < a);
    }

    #[test]
    fn bad_messages_are_typed_errors() {
        assert_eq!(PreemptRepr::parse(&[1, 0, 0]), Err(PreemptError::Truncated(3)));
        assert_eq!(PreemptRepr::parse(&[0; 14]), Err(PreemptError::UnknownType(0)));
        assert_eq!(PreemptRepr::parse(&[8; 14]), Err(PreemptError::UnknownType(8)));
        let mut q = [0u8; 14];
        q[0] = kind::QUERY;
        assert!(PreemptRepr::parse(&q).is_ok());
        q[1] = 1;
        assert_eq!(PreemptRepr::parse(&q), Err(PreemptError::Reserved { kind: kind::QUERY }));
        assert_eq!(
            PreemptRepr::parse(&[1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 1]),
            Err(PreemptError::Short { kind: 1, need: 22, got: 15 })
        );
        // A report that does not hold but carries grant fields, or waits not but says how long.
        let rep = PreemptRepr {
            sender: 4,
            epoch: Epoch::ZERO,
            msg: Message::Report { held: None, waiting: true, waited_us: 5, stamp: 0 },
        };
        let mut b = [0u8; MAX_LEN];
        let n = rep.emit(&mut b).unwrap();
        b[1] = 0;
        assert_eq!(PreemptRepr::parse(&b[..n]), Err(PreemptError::NonCanonical));
        b[1] = REPORT_WAITING;
        b[HEADER_LEN + 15] = 1;
        assert_eq!(PreemptRepr::parse(&b[..n]), Err(PreemptError::NonCanonical));
        b[1] = 0x04;
        assert_eq!(PreemptRepr::parse(&b[..n]), Err(PreemptError::Reserved { kind: kind::REPORT }));
    }

    proptest! {
        #[test]
        fn parse_never_panics_and_accepted_bytes_re_emit_identically(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
            if let Ok(r) = PreemptRepr::parse(&bytes) {
                let mut out = [0u8; MAX_LEN];
                let n = r.emit(&mut out).unwrap();
                prop_assert_eq!(&out[..n], &bytes[..]);
            }
        }

        #[test]
        fn structured_messages_round_trip(sender: u32, round: u32, arb: u32, seq: u64, a: u32, b: u32, stamp: u64, which in 0u8..7) {
            let e = Epoch { round, arbiter: arb };
            let msg = match which {
                0 => Message::Request { stamp },
                1 => Message::Grant { holder: a, seq, lease_us: b, slice_us: a ^ b, echo: stamp },
                2 => Message::Renew { grant_epoch: e, seq, stamp },
                3 => Message::Release { grant_epoch: e, seq },
                4 => Message::Revoke { holder: a, grant_epoch: e, seq },
                5 => Message::Query,
                _ => Message::Report {
                    held: (a % 2 == 0).then_some(HeldGrant { epoch: e, seq, lease_left_us: a, slice_left_us: b }),
                    waiting: b % 2 == 0,
                    waited_us: if b % 2 == 0 { b } else { 0 },
                    stamp,
                },
            };
            let r = PreemptRepr { sender, epoch: e, msg };
            let mut out = [0u8; MAX_LEN];
            let n = r.emit(&mut out).unwrap();
            prop_assert_eq!(PreemptRepr::parse(&out[..n]).unwrap(), r);
        }
    }
}
