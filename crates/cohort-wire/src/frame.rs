//! The secure frame: every Cohort datagram is one.
//!
//! ```text
//!  0         1         2                   6                   10
//! +---------+---------+-------------------+-------------------+
//! | version |  kind   |      team id      |     sender id     |
//! +---------+---------+-------------------+-------------------+
//! |             packet number (64)            | ciphertext ...
//! +-------------------------------------------+---------------
//!  10                                          18
//!  ... ciphertext | tag (16) |
//! ```
//!
//! All integers are big-endian. The 18-byte header is the AEAD's associated data, so no header
//! bit can change unnoticed; the payload is encrypted. `kind` names the protocol inside
//! ([`kind`]) so one socket can carry several.
//!
//! * **Cipher**: ChaCha20-Poly1305 (RFC 8439, RustCrypto `chacha20poly1305`).
//! * **Keys** ([`TeamKey`]): HKDF-SHA256 (RFC 5869) over the team secret, with a fixed salt
//!   and the protocol version and team id in `info`: two teams sharing a secret still get
//!   unrelated keys, and a frame from one team fails authentication in the other.
//! * **Nonce**: sender id (4 bytes) ‖ packet number (8 bytes). A [`Sealer`] owns its sender's
//!   counter, starts it at zero, increments it per frame and refuses to wrap, so a (key, nonce)
//!   pair is never reused as long as sender ids are unique within the team and a sender does
//!   not restart with the same id and key (give a restarted process a fresh sender id).
//! * **Replay** ([`Opener`]): per-sender sliding window over packet numbers (RFC 6479 style),
//!   updated only after authentication succeeds.
//!
//! An [`Opener`] counts every rejection by reason ([`RejectCounters`]) and never parses a frame
//! further once one check fails.

use crate::replay::ReplayWindow;
use chacha20poly1305::aead::{AeadInPlace, KeyInit};
use chacha20poly1305::{ChaCha20Poly1305, Key, Nonce, Tag};
use core::fmt;
use std::collections::HashMap;

/// Frame format version.
pub const VERSION: u8 = 1;
/// Header length.
pub const HEADER_LEN: usize = 18;
/// Authentication tag length.
pub const TAG_LEN: usize = 16;
/// Bytes a frame adds to its payload.
pub const OVERHEAD: usize = HEADER_LEN + TAG_LEN;
/// Smallest team secret accepted.
pub const MIN_SECRET_LEN: usize = 16;

/// Payload kinds.
pub mod kind {
    /// The coded transport.
    pub const LRT: u8 = 0;
    /// Group request-reply and membership.
    pub const GROUP: u8 = 1;
}

mod field {
    use core::ops::Range;
    pub const VERSION: usize = 0;
    pub const KIND: usize = 1;
    pub const TEAM: Range<usize> = 2..6;
    pub const SENDER: Range<usize> = 6..10;
    pub const PN: Range<usize> = 10..18;
}

/// A frame whose header does not parse.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    #[error("frame of {0} bytes is shorter than header and tag ({OVERHEAD})")]
    Truncated(usize),
    #[error("frame version {0}, expected {VERSION}")]
    Version(u8),
}

/// A zero-copy view of a frame.
#[derive(Debug, Clone)]
pub struct Frame<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Frame<T> {
    pub const fn new_unchecked(buffer: T) -> Self {
        Frame { buffer }
    }

    /// Wraps `buffer` after [`check_len`](Self::check_len).
    pub fn new_checked(buffer: T) -> Result<Self, FrameError> {
        let f = Self::new_unchecked(buffer);
        f.check_len()?;
        Ok(f)
    }

    /// Ensures the header and tag fit, so no accessor can go out of bounds.
    pub fn check_len(&self) -> Result<(), FrameError> {
        let n = self.buffer.as_ref().len();
        if n < OVERHEAD { Err(FrameError::Truncated(n)) } else { Ok(()) }
    }

    pub fn into_inner(self) -> T {
        self.buffer
    }

    pub fn version(&self) -> u8 {
        self.buffer.as_ref()[field::VERSION]
    }

    pub fn kind(&self) -> u8 {
        self.buffer.as_ref()[field::KIND]
    }

    pub fn team_id(&self) -> u32 {
        let b = &self.buffer.as_ref()[field::TEAM];
        u32::from_be_bytes([b[0], b[1], b[2], b[3]])
    }

    pub fn sender_id(&self) -> u32 {
        let b = &self.buffer.as_ref()[field::SENDER];
        u32::from_be_bytes([b[0], b[1], b[2], b[3]])
    }

    pub fn packet_number(&self) -> u64 {
        let mut a = [0u8; 8];
        a.copy_from_slice(&self.buffer.as_ref()[field::PN]);
        u64::from_be_bytes(a)
    }

    /// The header (the AEAD's associated data).
    pub fn header(&self) -> &[u8] {
        &self.buffer.as_ref()[..HEADER_LEN]
    }

    /// The encrypted payload.
    pub fn ciphertext(&self) -> &[u8] {
        let b = self.buffer.as_ref();
        &b[HEADER_LEN..b.len() - TAG_LEN]
    }

    pub fn tag(&self) -> &[u8] {
        let b = self.buffer.as_ref();
        &b[b.len() - TAG_LEN..]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Frame<T> {
    pub fn set_version(&mut self, v: u8) {
        self.buffer.as_mut()[field::VERSION] = v;
    }

    pub fn set_kind(&mut self, v: u8) {
        self.buffer.as_mut()[field::KIND] = v;
    }

    pub fn set_team_id(&mut self, v: u32) {
        self.buffer.as_mut()[field::TEAM].copy_from_slice(&v.to_be_bytes());
    }

    pub fn set_sender_id(&mut self, v: u32) {
        self.buffer.as_mut()[field::SENDER].copy_from_slice(&v.to_be_bytes());
    }

    pub fn set_packet_number(&mut self, v: u64) {
        self.buffer.as_mut()[field::PN].copy_from_slice(&v.to_be_bytes());
    }

    /// Header and payload, mutably, for sealing or opening in place.
    fn split_mut(&mut self) -> (&[u8], &mut [u8], &mut [u8]) {
        let b = self.buffer.as_mut();
        let n = b.len();
        let (head, rest) = b.split_at_mut(HEADER_LEN);
        let (body, tag) = rest.split_at_mut(n - OVERHEAD);
        (head, body, tag)
    }
}

/// The header fields of a frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct FrameRepr {
    pub version: u8,
    pub kind: u8,
    pub team_id: u32,
    pub sender_id: u32,
    pub packet_number: u64,
    pub payload_len: usize,
}

impl FrameRepr {
    /// Parses the header of a length-checked frame.
    pub fn parse<T: AsRef<[u8]>>(f: &Frame<T>) -> Result<Self, FrameError> {
        f.check_len()?;
        if f.version() != VERSION {
            return Err(FrameError::Version(f.version()));
        }
        Ok(FrameRepr {
            version: f.version(),
            kind: f.kind(),
            team_id: f.team_id(),
            sender_id: f.sender_id(),
            packet_number: f.packet_number(),
            payload_len: f.buffer.as_ref().len() - OVERHEAD,
        })
    }

    /// Bytes the whole frame takes.
    pub fn buffer_len(&self) -> usize {
        self.payload_len + OVERHEAD
    }

    /// Writes the header.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, f: &mut Frame<T>) {
        f.set_version(self.version);
        f.set_kind(self.kind);
        f.set_team_id(self.team_id);
        f.set_sender_id(self.sender_id);
        f.set_packet_number(self.packet_number);
    }
}

/// A team's frame key.
#[derive(Clone)]
pub struct TeamKey {
    team_id: u32,
    cipher: ChaCha20Poly1305,
}

impl fmt::Debug for TeamKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TeamKey").field("team_id", &self.team_id).finish_non_exhaustive()
    }
}

/// An unusable team secret.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum KeyError {
    #[error("team secret of {0} bytes; at least {MIN_SECRET_LEN} are required")]
    SecretTooShort(usize),
}

impl TeamKey {
    /// Derives the key of team `team_id` from the team secret.
    pub fn derive(secret: &[u8], team_id: u32) -> Result<Self, KeyError> {
        if secret.len() < MIN_SECRET_LEN {
            return Err(KeyError::SecretTooShort(secret.len()));
        }
        let hk = hkdf::Hkdf::<sha2::Sha256>::new(Some(b"cohort frame key"), secret);
        let mut info = *b"cohort v1 team \0\0\0\0";
        info[15..].copy_from_slice(&team_id.to_be_bytes());
        info[8] = b'0' + VERSION;
        let mut okm = [0u8; 32];
        // 32 bytes is far below HKDF-SHA256's 8160-byte limit, so expansion cannot fail.
        let _ = hk.expand(&info, &mut okm);
        let cipher = ChaCha20Poly1305::new(Key::from_slice(&okm));
        okm.fill(0);
        Ok(TeamKey { team_id, cipher })
    }

    pub fn team_id(&self) -> u32 {
        self.team_id
    }
}

fn nonce(sender_id: u32, pn: u64) -> Nonce {
    let mut n = [0u8; 12];
    n[..4].copy_from_slice(&sender_id.to_be_bytes());
    n[4..].copy_from_slice(&pn.to_be_bytes());
    Nonce::from(n)
}

/// Why sealing failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum SealError {
    #[error("output buffer of {have} bytes, frame needs {need}")]
    BufferTooSmall { need: usize, have: usize },
    /// The sender used every packet number; it must take a new sender id.
    #[error("packet numbers exhausted for this sender id")]
    PacketNumberExhausted,
}

/// Seals frames for one local sender.
#[derive(Debug)]
pub struct Sealer {
    key: TeamKey,
    sender_id: u32,
    next_pn: u64,
}

impl Sealer {
    pub fn new(key: TeamKey, sender_id: u32) -> Self {
        Sealer { key, sender_id, next_pn: 0 }
    }

    pub fn sender_id(&self) -> u32 {
        self.sender_id
    }

    /// The packet number the next frame will carry.
    pub fn next_packet_number(&self) -> u64 {
        self.next_pn
    }

    /// Writes a frame carrying `payload` into `out`; returns its length.
    pub fn seal(&mut self, kind: u8, payload: &[u8], out: &mut [u8]) -> Result<usize, SealError> {
        let need = payload.len() + OVERHEAD;
        if out.len() < need {
            return Err(SealError::BufferTooSmall { need, have: out.len() });
        }
        if self.next_pn == u64::MAX {
            return Err(SealError::PacketNumberExhausted);
        }
        let pn = self.next_pn;
        let repr = FrameRepr {
            version: VERSION,
            kind,
            team_id: self.key.team_id,
            sender_id: self.sender_id,
            packet_number: pn,
            payload_len: payload.len(),
        };
        let have = out.len();
        let mut f = Frame::new_unchecked(&mut out[..need]);
        repr.emit(&mut f);
        let (head, body, tag) = f.split_mut();
        body.copy_from_slice(payload);
        // Encryption fails only for payloads beyond ChaCha20's 256 GiB limit.
        let t = self
            .key
            .cipher
            .encrypt_in_place_detached(&nonce(self.sender_id, pn), head, body)
            .map_err(|_| SealError::BufferTooSmall { need, have })?;
        tag.copy_from_slice(&t);
        self.next_pn += 1;
        Ok(need)
    }
}

/// Why a frame was rejected.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum OpenError {
    #[error(transparent)]
    Frame(#[from] FrameError),
    #[error("frame of team {0}")]
    WrongTeam(u32),
    #[error("authentication failed")]
    AuthFailed,
    #[error("packet {pn} from sender {sender} already received")]
    Replayed { sender: u32, pn: u64 },
    #[error("packet {pn} from sender {sender} is older than the replay window")]
    TooOld { sender: u32, pn: u64 },
}

/// Frames accepted, and rejected by reason.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RejectCounters {
    pub accepted: u64,
    pub truncated: u64,
    pub bad_version: u64,
    pub wrong_team: u64,
    pub auth_failed: u64,
    pub replayed: u64,
    pub too_old: u64,
    /// Senders whose replay state was dropped to respect `max_senders`.
    pub senders_evicted: u64,
}

impl RejectCounters {
    /// Every rejection, whatever the reason.
    pub fn rejected(&self) -> u64 {
        self.truncated + self.bad_version + self.wrong_team + self.auth_failed + self.replayed + self.too_old
    }
}

/// An authenticated frame's contents.
#[derive(Debug, PartialEq, Eq)]
pub struct Opened<'a> {
    pub kind: u8,
    pub sender_id: u32,
    pub packet_number: u64,
    pub payload: &'a [u8],
}

/// Opens frames for one local receiver.
#[derive(Debug)]
pub struct Opener {
    key: TeamKey,
    windows: HashMap<u32, (ReplayWindow, u64)>,
    max_senders: usize,
    tick: u64,
    counters: RejectCounters,
}

impl Opener {
    /// Senders tracked by default.
    pub const DEFAULT_MAX_SENDERS: usize = 1024;

    pub fn new(key: TeamKey) -> Self {
        Self::with_max_senders(key, Self::DEFAULT_MAX_SENDERS)
    }

    /// An opener tracking replay state for at most `max_senders` senders. When a new sender
    /// would exceed it, the least recently heard one is forgotten; should it come back, frames
    /// it sent before being forgotten that are still in flight could be accepted once more, so
    /// size this above the team.
    pub fn with_max_senders(key: TeamKey, max_senders: usize) -> Self {
        Opener {
            key,
            windows: HashMap::new(),
            max_senders: max_senders.max(1),
            tick: 0,
            counters: RejectCounters::default(),
        }
    }

    pub fn counters(&self) -> RejectCounters {
        self.counters
    }

    /// Authenticates and decrypts `datagram` in place.
    pub fn open<'a>(&mut self, datagram: &'a mut [u8]) -> Result<Opened<'a>, OpenError> {
        let r = self.check(datagram);
        let c = &mut self.counters;
        match &r {
            Ok(_) => c.accepted += 1,
            Err(OpenError::Frame(FrameError::Truncated(_))) => c.truncated += 1,
            Err(OpenError::Frame(FrameError::Version(_))) => c.bad_version += 1,
            Err(OpenError::WrongTeam(_)) => c.wrong_team += 1,
            Err(OpenError::AuthFailed) => c.auth_failed += 1,
            Err(OpenError::Replayed { .. }) => c.replayed += 1,
            Err(OpenError::TooOld { .. }) => c.too_old += 1,
        }
        let repr = r?;
        let n = datagram.len();
        Ok(Opened {
            kind: repr.kind,
            sender_id: repr.sender_id,
            packet_number: repr.packet_number,
            payload: &datagram[HEADER_LEN..n - TAG_LEN],
        })
    }

    fn check(&mut self, datagram: &mut [u8]) -> Result<FrameRepr, OpenError> {
        let mut f = Frame::new_checked(datagram)?;
        let repr = FrameRepr::parse(&f)?;
        if repr.team_id != self.key.team_id {
            return Err(OpenError::WrongTeam(repr.team_id));
        }
        let (sender, pn) = (repr.sender_id, repr.packet_number);
        // Cheap pre-check before spending a decryption on a frame the window would refuse.
        if let Some((w, _)) = self.windows.get(&sender) {
            w.check(pn).map_err(|old| {
                if old { OpenError::TooOld { sender, pn } } else { OpenError::Replayed { sender, pn } }
            })?;
        }
        let (head, body, tag) = f.split_mut();
        let tag = Tag::clone_from_slice(tag);
        self.key
            .cipher
            .decrypt_in_place_detached(&nonce(sender, pn), head, body, &tag)
            .map_err(|_| OpenError::AuthFailed)?;
        self.tick += 1;
        if !self.windows.contains_key(&sender)
            && self.windows.len() >= self.max_senders
            && let Some(oldest) = self.windows.iter().min_by_key(|(_, (_, t))| *t).map(|(&s, _)| s)
        {
            self.windows.remove(&oldest);
            self.counters.senders_evicted += 1;
        }
        let tick = self.tick;
        let (w, t) = self.windows.entry(sender).or_insert_with(|| (ReplayWindow::new(), 0));
        *t = tick;
        w.accept(pn)
            .map_err(|old| if old { OpenError::TooOld { sender, pn } } else { OpenError::Replayed { sender, pn } })?;
        Ok(repr)
    }
}

#[cfg(test)]
mod tests;
