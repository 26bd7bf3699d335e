//! The session key exchange on a socket (`cohort_proto::session` driven over real datagrams):
//! message 1 and its repeats when connecting, answers and half-open sessions when listening,
//! and the session's own `Secure` once one is established. `LrtSocket` and `MpLrtSocket` both
//! run their traffic through one.

use crate::lrt::NetError;
use crate::secure::Secure;
use cohort_proto::session::{self, Initiator, MESSAGE_LEN};
use cohort_wire::frame::{HEADER_LEN, OVERHEAD, kind};
use std::time::Duration;

/// Half-open sessions a listening socket keeps at once. Each is an answered message 1; only a
/// datagram under its key makes it the connection, so a replayed message 1 (which anyone who
/// recorded the team's traffic can send) costs a slot and never the connection.
pub(crate) const MAX_HALF_OPEN: usize = 16;

/// Bytes of a sealed key-exchange datagram.
pub(crate) const HANDSHAKE_DATAGRAM: usize = MESSAGE_LEN + OVERHEAD;

/// Counters of the key exchange.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct KeyExchangeStats {
    /// Key-exchange messages sent (message 1 and its repeats when connecting; message 2 when
    /// listening).
    pub handshakes_sent: u64,
    /// Key-exchange messages refused: forged or of another secret, a second message 1 of a
    /// life already answered, or one that came after the session started.
    pub handshakes_refused: u64,
    /// Half-open sessions (answered, never confirmed by a datagram under their key) dropped
    /// to make room or after `handshake_timeout`: replayed message 1s end here.
    pub half_open_dropped: u64,
    /// Authentic-looking datagrams under no session this socket has: before the key exchange
    /// finished, or from a life it never answered.
    pub no_session: u64,
}

/// A message 1 this socket answered; the connection starts when the initiator's first
/// datagram under the session's key arrives.
#[derive(Debug)]
struct HalfOpen {
    life: (u32, u64),
    msg1: [u8; MESSAGE_LEN],
    msg2: [u8; MESSAGE_LEN],
    secure: Secure,
    at: cohort_time::Instant,
}

/// Where the keys stand. The connection's own datagrams travel only under the session's keys
/// (forward secrecy); the team key seals the key exchange alone.
#[derive(Debug)]
// One per socket, and the established variant is the hot one: no box for it.
#[allow(clippy::large_enum_variant)]
enum State {
    /// `connect`: message 1 goes out until message 2 comes back.
    Initiating(Box<Initiator>),
    /// `listen`: message 1s answered, waiting for one initiator's first datagram.
    Responding(Vec<HalfOpen>),
    Established(Secure),
}

/// A datagram opened under the session: its kind, the sender's life and packet number, and
/// its payload at `datagram[HEADER_LEN..HEADER_LEN + len]`, decrypted in place.
#[derive(Debug, Clone, Copy)]
pub(crate) struct OpenedHeader {
    pub kind: u8,
    pub life: (u32, u64),
    pub pn: u64,
    pub len: usize,
    /// This datagram established the session (a listener's first from its initiator).
    pub established: bool,
}

impl OpenedHeader {
    pub fn payload<'a>(&self, datagram: &'a [u8]) -> &'a [u8] {
        &datagram[HEADER_LEN..][..self.len]
    }
}

/// What a key-exchange datagram did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Handshake {
    /// Nothing to send (refused, or message 2 finished the exchange).
    Nothing,
    /// The exchange finished: the peer's life.
    Established((u32, u64)),
    /// Send this sealed message 2 (its length in the caller's buffer) to the sender.
    Answer(usize),
}

/// One socket's key exchange and session.
#[derive(Debug)]
pub(crate) struct KeyExchange {
    /// Team-key frames: the exchange.
    team: Secure,
    team_id: u32,
    psk: [u8; 32],
    state: State,
    /// The kind of the session's data frames, and one more it accepts.
    data_kind: u8,
    also_kind: u8,
    pub stats: KeyExchangeStats,
}

/// 32 bytes from the operating system's CSPRNG: a key exchange's ephemeral key.
fn entropy() -> Result<[u8; 32], cohort_wire::frame::EntropyError> {
    let mut e = [0u8; 32];
    getrandom::fill(&mut e).map_err(cohort_wire::frame::EntropyError)?;
    Ok(e)
}

impl KeyExchange {
    /// The key exchange of a socket of team `team_id` sending as `sender_id`, whose session
    /// carries frames of `data_kind` (and `also_kind`). `retry`: how often a connecting socket
    /// repeats message 1; `connect`: whether this end starts the exchange.
    pub fn new(
        secret: &[u8],
        team_id: u32,
        sender_id: u32,
        (data_kind, also_kind): (u8, u8),
        retry: Duration,
        connect: bool,
    ) -> Result<Self, NetError> {
        let key = cohort_wire::frame::TeamKey::derive(secret, team_id).map_err(|e| NetError::Config(e.to_string()))?;
        let psk = cohort_wire::frame::session_psk(secret, team_id).map_err(|e| NetError::Config(e.to_string()))?;
        let state = if connect {
            let i = Initiator::new(&psk, team_id, retry, cohort_time::Instant::ZERO, entropy()?)
                .map_err(|e| NetError::Config(e.to_string()))?;
            State::Initiating(Box::new(i))
        } else {
            State::Responding(Vec::new())
        };
        Ok(KeyExchange {
            team: Secure::new(key, sender_id, kind::HANDSHAKE)?,
            team_id,
            psk,
            state,
            data_kind,
            also_kind,
            stats: KeyExchangeStats::default(),
        })
    }

    /// The session's `Secure`, once established.
    pub fn secure(&mut self) -> Option<&mut Secure> {
        match &mut self.state {
            State::Established(s) => Some(s),
            _ => None,
        }
    }

    /// A connecting socket's message 1, sealed into `out`, when due.
    pub fn poll_message(&mut self, now: cohort_time::Instant, out: &mut [u8]) -> Option<usize> {
        let State::Initiating(init) = &mut self.state else { return None };
        let msg1 = *init.poll_transmit(now)?;
        self.seal(&msg1, out)
    }

    /// When message 1 is next due.
    pub fn poll_timeout(&self) -> Option<cohort_time::Instant> {
        match &self.state {
            State::Initiating(init) => init.poll_timeout(),
            _ => None,
        }
    }

    fn seal(&mut self, msg: &[u8; MESSAGE_LEN], out: &mut [u8]) -> Option<usize> {
        match self.team.seal(msg, out) {
            Ok(n) => {
                self.stats.handshakes_sent += 1;
                Some(n)
            }
            Err(e) => {
                tracing::debug!(%e, "sealing a key-exchange message");
                None
            }
        }
    }

    /// Whether `datagram` is a key-exchange frame (to go to [`on_handshake`](Self::on_handshake)).
    pub fn is_handshake(datagram: &[u8]) -> bool {
        datagram.get(cohort_wire::frame::field::KIND) == Some(&kind::HANDSHAKE)
    }

    /// A key-exchange datagram: message 2 finishes a connecting socket's exchange; a listening
    /// socket answers each new life's message 1 (sealed into `out`) and keeps the half-open
    /// session until its initiator's first datagram under the session's key.
    pub fn on_handshake(
        &mut self,
        datagram: &mut [u8],
        now: cohort_time::Instant,
        timeout: Duration,
        out: &mut [u8],
    ) -> Handshake {
        let Some(o) = self.team.open(datagram) else {
            return Handshake::Nothing;
        };
        let life = (o.sender_id, o.epoch);
        let Ok(msg) = <[u8; MESSAGE_LEN]>::try_from(o.payload) else {
            self.stats.handshakes_refused += 1;
            return Handshake::Nothing;
        };
        let (sender_id, epoch, data_kind) = (self.team.sender_id(), self.team.epoch(), self.data_kind);
        let session = move |keys| Secure::session(keys, sender_id, epoch, data_kind);
        let answer = match &mut self.state {
            State::Initiating(init) => match init.handle(&msg) {
                Ok(keys) => {
                    self.state = State::Established(session(keys));
                    return Handshake::Established(life);
                }
                Err(_) => None,
            },
            State::Responding(half) => {
                if let Some(h) = half.iter().find(|h| h.life == life) {
                    // A repeated message 1 (message 2 was lost) gets the same answer; another
                    // message 1 of that life is refused.
                    (h.msg1 == msg).then_some(h.msg2)
                } else {
                    let before = half.len();
                    half.retain(|h| now.saturating_duration_since(h.at) < timeout);
                    self.stats.half_open_dropped += (before - half.len()) as u64;
                    match entropy().ok().map(|e| session::respond(&self.psk, self.team_id, &msg, e)) {
                        Some(Ok((keys, msg2))) => {
                            if half.len() >= MAX_HALF_OPEN {
                                half.remove(0);
                                self.stats.half_open_dropped += 1;
                            }
                            half.push(HalfOpen { life, msg1: msg, msg2, secure: session(keys), at: now });
                            Some(msg2)
                        }
                        _ => None,
                    }
                }
            }
            // The initiator sends under the session only after message 2: a message 1 now is
            // late.
            State::Established(_) => None,
        };
        match answer.and_then(|m| self.seal(&m, out)) {
            Some(n) => Handshake::Answer(n),
            None => {
                self.stats.handshakes_refused += 1;
                Handshake::Nothing
            }
        }
    }

    /// Opens a datagram under the session's key. A listening socket's first such datagram from
    /// an initiator it answered makes that half-open session the connection.
    pub fn open(&mut self, datagram: &mut [u8]) -> Option<OpenedHeader> {
        let header = |o: cohort_wire::frame::Opened<'_>, established| OpenedHeader {
            kind: o.kind,
            life: (o.sender_id, o.epoch),
            pn: o.packet_number,
            len: o.payload.len(),
            established,
        };
        let also = self.also_kind;
        match &mut self.state {
            State::Established(sec) => sec.open_with(datagram, also).map(|o| header(o, false)),
            State::Initiating(_) => {
                self.stats.no_session += 1;
                None
            }
            State::Responding(half) => {
                let life = cohort_wire::frame::Frame::new_checked(&*datagram).ok().map(|f| (f.sender_id(), f.epoch()));
                let Some(i) = half.iter().position(|h| Some(h.life) == life) else {
                    self.stats.no_session += 1;
                    return None;
                };
                let opened = half[i].secure.open_with(datagram, also).map(|o| header(o, true))?;
                let h = half.swap_remove(i);
                self.stats.half_open_dropped += half.len() as u64;
                self.state = State::Established(h.secure);
                Some(opened)
            }
        }
    }

    /// A listener's lobby: if `datagram` is the first under one of the half-open sessions,
    /// opens it and hands that session out as `fresh` (a key exchange made for the new
    /// connection), keeping the other half-open sessions for their own initiators. `None` (and
    /// nothing changed) if no half-open session is the datagram's or it does not open.
    pub fn take_session(&mut self, datagram: &mut [u8], mut fresh: KeyExchange) -> Option<(KeyExchange, OpenedHeader)> {
        let also = self.also_kind;
        let State::Responding(half) = &mut self.state else { return None };
        let life = cohort_wire::frame::Frame::new_checked(&*datagram).ok().map(|f| (f.sender_id(), f.epoch()))?;
        let i = half.iter().position(|h| h.life == life)?;
        let o = half[i].secure.open_with(datagram, also)?;
        let opened = OpenedHeader {
            kind: o.kind,
            life: (o.sender_id, o.epoch),
            pn: o.packet_number,
            len: o.payload.len(),
            established: true,
        };
        fresh.state = State::Established(half.swap_remove(i).secure);
        Some((fresh, opened))
    }

    /// Frame counters of the team key and the session's (or half-open sessions') keys, and
    /// every rejection together.
    pub fn counters(&self) -> (cohort_wire::frame::RejectCounters, u64) {
        let mut frames = self.team.counters();
        let mut rejected = self.team.rejected() + self.stats.no_session;
        let mut add = |sec: &Secure| {
            frames = frames + sec.counters();
            rejected += sec.rejected();
        };
        match &self.state {
            State::Established(sec) => add(sec),
            State::Responding(half) => half.iter().for_each(|h| add(&h.secure)),
            State::Initiating(_) => {}
        }
        (frames, rejected)
    }
}
