//! The secure frame: every Cohort datagram is one.
//!
//! ```text
//!  0         1         2             6             10            18                  26
//! +---------+---------+-------------+-------------+-------------+-------------------+------------+----------+
//! | version |  kind   |   team id   |  sender id  |    epoch    |   packet number   | ciphertext | tag (16) |
//! |   u8    |   u8    |     u32     |     u32     |     u64     |        u64        |  (payload) | Poly1305 |
//! +---------+---------+-------------+-------------+-------------+-------------------+------------+----------+
//! |<------------------- header, 26 bytes: the AEAD's associated data --------------->|
//! ```
//!
//! All integers are big-endian. The whole 26-byte header is the AEAD's associated data, so no
//! header bit can change unnoticed; the payload is encrypted, and the 16-byte Poly1305 tag
//! closes the frame. A frame is [`OVERHEAD`] = 42 bytes longer than its payload.
//!
//! * `version` is [`VERSION`] (2); anything else is refused before any cryptography.
//! * `kind` names the protocol inside ([`kind`]) so one socket can carry several. The frame
//!   layer authenticates it but gives it no meaning; upper layers refuse kinds they do not know.
//! * `team id` selects the key: a frame of another team is refused without decryption.
//! * `epoch` names one *life* of a sealer: 64 bits the [`Sealer`] draws from the operating
//!   system's CSPRNG when it is created, never from a clock.
//! * **Cipher**: XChaCha20-Poly1305 (draft-irtf-cfrg-xchacha, RustCrypto `chacha20poly1305`),
//!   whose 24-byte nonce holds sender, epoch and packet number whole.
//! * **Keys** ([`TeamKey`]): HKDF-SHA256 (RFC 5869) over the team secret, salt
//!   `"cohort frame key"`, info `"cohort v2 team " ‖ team id`: two teams sharing a secret
//!   still get unrelated keys, and a frame moved from one team to the other fails
//!   authentication even with its team id rewritten.
//! * **Nonce**: sender id (4 bytes) ‖ epoch (8) ‖ packet number (8) ‖ four zero bytes.
//!
//! **The nonce invariant.** Under one team key, no two sealed frames share a nonce. Within a
//! life the sealer's packet number strictly increases and refuses to wrap; two lives (a
//! restarted process, a second socket, two robots left at the same sender id, a robot whose
//! clock stepped back) differ in their epoch unless two independent 64-bit draws of the
//! kernel's CSPRNG coincide, which for `L` lives of one sender id has probability at most
//! `L² / 2⁶⁵` (below 3·10⁻⁸ for a million restarts). Nothing in it reads a clock or a file,
//! so no clock step, reboot or copied state directory can make it repeat. Deterministic
//! drivers (the simulator) choose epochs themselves with [`Sealer::with_epoch`] and must keep
//! them distinct.
//!
//! * **Replay** ([`Opener`]): per sender and per life, a sliding window of
//!   [`REPLAY_WINDOW`](crate::REPLAY_WINDOW) packet numbers (RFC 6479 bitmap), updated only
//!   after authentication succeeds. A restarted sender is a new life and is accepted at once;
//!   a life the opener has retired stays refused, so an old life cannot be replayed.
//!
//! An [`Opener`] counts every outcome by reason ([`RejectCounters`]) and never parses a frame
//! further once one check fails.
//!
//! The [`Frame`] view follows smoltcp's contract: [`Frame::new_checked`] validates the length
//! once, after which no accessor can panic; [`FrameRepr::parse`] validates the version.

use chacha20poly1305::XNonce;

mod key;
mod open;
mod seal;

pub use key::{KeyError, MIN_SECRET_LEN, TeamKey, session_psk};
pub use open::{MAX_LIVES, MAX_RETIRED, OpenError, Opened, Opener, RejectCounters};
pub use seal::{EntropyError, SealError, Sealer, random_epoch};

/// Frame format version.
pub const VERSION: u8 = 2;
/// Header length: version, kind, team id, sender id, epoch, packet number.
pub const HEADER_LEN: usize = field::PACKET_NUMBER.end;
/// Authentication tag length.
pub const TAG_LEN: usize = 16;
/// Bytes a frame adds to its payload.
pub const OVERHEAD: usize = HEADER_LEN + TAG_LEN;

/// Payload kinds.
pub mod kind {
    /// The coded transport.
    pub const LRT: u8 = 0;
    /// Group request-reply and membership.
    pub const GROUP: u8 = 1;
    /// Coordinated preemption: the bulk token's arbiter and its clients.
    pub const PREEMPT: u8 = 2;
    /// Path validation of a transport connection that moved (challenge and response).
    pub const PATH: u8 = 3;
    /// A session's key exchange (Noise handshake messages), sealed under the team key.
    pub const HANDSHAKE: u8 = 4;
}

/// Header field positions.
pub mod field {
    use core::ops::Range;
    pub const VERSION: usize = 0;
    pub const KIND: usize = 1;
    pub const TEAM_ID: Range<usize> = 2..6;
    pub const SENDER_ID: Range<usize> = 6..10;
    pub const EPOCH: Range<usize> = 10..18;
    pub const PACKET_NUMBER: Range<usize> = 18..26;
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

fn be_u32(b: &[u8]) -> u32 {
    let mut a = [0u8; 4];
    a.copy_from_slice(b);
    u32::from_be_bytes(a)
}

fn be_u64(b: &[u8]) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(b);
    u64::from_be_bytes(a)
}

impl<T: AsRef<[u8]>> Frame<T> {
    /// Wraps `buffer` without checks: accessors panic if it is shorter than [`OVERHEAD`].
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

    /// The whole frame's length.
    pub fn len(&self) -> usize {
        self.buffer.as_ref().len()
    }

    /// Whether the buffer is empty (never, for a checked frame).
    pub fn is_empty(&self) -> bool {
        self.buffer.as_ref().is_empty()
    }

    pub fn version(&self) -> u8 {
        self.buffer.as_ref()[field::VERSION]
    }

    pub fn kind(&self) -> u8 {
        self.buffer.as_ref()[field::KIND]
    }

    pub fn team_id(&self) -> u32 {
        be_u32(&self.buffer.as_ref()[field::TEAM_ID])
    }

    pub fn sender_id(&self) -> u32 {
        be_u32(&self.buffer.as_ref()[field::SENDER_ID])
    }

    pub fn epoch(&self) -> u64 {
        be_u64(&self.buffer.as_ref()[field::EPOCH])
    }

    pub fn packet_number(&self) -> u64 {
        be_u64(&self.buffer.as_ref()[field::PACKET_NUMBER])
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

    /// The authentication tag.
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
        self.buffer.as_mut()[field::TEAM_ID].copy_from_slice(&v.to_be_bytes());
    }

    pub fn set_sender_id(&mut self, v: u32) {
        self.buffer.as_mut()[field::SENDER_ID].copy_from_slice(&v.to_be_bytes());
    }

    pub fn set_epoch(&mut self, v: u64) {
        self.buffer.as_mut()[field::EPOCH].copy_from_slice(&v.to_be_bytes());
    }

    pub fn set_packet_number(&mut self, v: u64) {
        self.buffer.as_mut()[field::PACKET_NUMBER].copy_from_slice(&v.to_be_bytes());
    }

    /// The payload area, mutably (plaintext before sealing, ciphertext after).
    pub fn ciphertext_mut(&mut self) -> &mut [u8] {
        self.split_mut().1
    }

    /// The tag, mutably.
    pub fn tag_mut(&mut self) -> &mut [u8] {
        self.split_mut().2
    }

    /// Header, payload and tag, for sealing or opening in place.
    fn split_mut(&mut self) -> (&[u8], &mut [u8], &mut [u8]) {
        let b = self.buffer.as_mut();
        let n = b.len();
        let (head, rest) = b.split_at_mut(HEADER_LEN);
        let (body, tag) = rest.split_at_mut(n - OVERHEAD);
        (head, body, tag)
    }
}

/// The header fields of a frame, and its payload length.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct FrameRepr {
    pub version: u8,
    pub kind: u8,
    pub team_id: u32,
    pub sender_id: u32,
    pub epoch: u64,
    pub packet_number: u64,
    pub payload_len: usize,
}

impl FrameRepr {
    /// Parses the header of a frame: checks its length and version. Says nothing about
    /// authenticity; only [`Opener::open`] does.
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
            epoch: f.epoch(),
            packet_number: f.packet_number(),
            payload_len: f.len() - OVERHEAD,
        })
    }

    /// Bytes the whole frame takes.
    pub fn buffer_len(&self) -> usize {
        self.payload_len + OVERHEAD
    }

    /// Writes the header; payload and tag are left alone.
    ///
    /// # Panics
    /// If the frame's buffer is shorter than [`HEADER_LEN`].
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, f: &mut Frame<T>) {
        f.set_version(self.version);
        f.set_kind(self.kind);
        f.set_team_id(self.team_id);
        f.set_sender_id(self.sender_id);
        f.set_epoch(self.epoch);
        f.set_packet_number(self.packet_number);
    }
}

/// The AEAD nonce of a frame: sender id ‖ epoch ‖ packet number ‖ 0u32, big-endian.
fn nonce(sender_id: u32, epoch: u64, pn: u64) -> XNonce {
    let mut n = [0u8; 24];
    n[..4].copy_from_slice(&sender_id.to_be_bytes());
    n[4..12].copy_from_slice(&epoch.to_be_bytes());
    n[12..20].copy_from_slice(&pn.to_be_bytes());
    XNonce::from(n)
}

#[cfg(test)]
mod tests;
