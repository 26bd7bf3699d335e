//! Session keys for a two-party connection: a Noise handshake on the team secret.
//!
//! The team key (`cohort_wire::frame::TeamKey`) authenticates every datagram of a team, but a
//! robot that loses the team secret years later would let whoever recorded the traffic read
//! it all. A connection therefore runs a key exchange first and seals its traffic under keys
//! of its own, which nobody can compute again once both ends have dropped their ephemeral
//! secrets (forward secrecy).
//!
//! **Pattern**: `Noise_NNpsk0_25519_ChaChaPoly_BLAKE2s` (the Noise Protocol Framework, rev. 34,
//! §9 for `psk` modifiers), through the `snow` crate:
//!
//! ```text
//!   initiator -> responder:  psk, e          (message 1, 48 bytes)
//!   responder -> initiator:  e, ee           (message 2, 48 bytes)
//! ```
//!
//! * The pre-shared key is [`session_psk`](cohort_wire::frame::session_psk): HKDF of the team
//!   secret with its own salt. Each message's empty payload is encrypted under keys that mix
//!   the PSK in, so only a holder of the team secret can produce either message (the Noise
//!   spec's "psk0": authentication of both ends by the PSK).
//! * The prologue binds the exchange to Cohort, this handshake's version and the team id.
//! * `ee` (X25519 of two fresh ephemeral keys) gives forward secrecy: after the handshake both
//!   ends drop their ephemeral secrets, and the team secret alone no longer yields the keys.
//! * The result is Noise's `Split()`: one 32-byte key per direction. [`SessionKeys`] turns
//!   each into a frame key with HKDF ([`TeamKey::session`]), so the frame layer's nonces (sender
//!   ‖ epoch ‖ packet number) start afresh under keys no other session shares.
//!
//! Noise's own transport messages are not used: datagrams keep Cohort's secure frame, which
//! has the nonce layout, the replay window and the counters the rest of the stack relies on.
//!
//! What a replayed message 1 can do: a responder answers it (a responder keeps no state across
//! lives), but nobody without the initiator's ephemeral secret can finish the exchange, so the
//! responder must not commit to a peer before that peer's first datagram under the session key
//! arrives. `cohort-net`'s sockets keep such half-open responses in a bounded table.
//!
//! Sans-IO: the initiator's retransmission runs on the caller's clock (`poll_transmit` /
//! `poll_timeout`, as everywhere in `cohort-proto`), and the ephemeral key comes from 32 bytes
//! of entropy the caller passes in (the operating system's CSPRNG on a socket, a seeded
//! generator in the simulator and in tests), expanded by ChaCha20 inside `snow`'s key
//! generation.

use cohort_time::Instant;
use cohort_wire::frame::TeamKey;
use std::fmt;
use std::time::Duration;

/// The Noise protocol name.
pub const PATTERN: &str = "Noise_NNpsk0_25519_ChaChaPoly_BLAKE2s";
/// Bytes of each handshake message: an ephemeral public key and the tag of an empty payload.
pub const MESSAGE_LEN: usize = 32 + 16;
/// Prologue: mixed into both ends' transcripts, so a handshake of another protocol, version or
/// team fails.
fn prologue(team_id: u32) -> [u8; 27] {
    let mut p = *b"cohort session v1 team \0\0\0\0";
    p[23..].copy_from_slice(&team_id.to_be_bytes());
    p
}

/// Why a handshake failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SessionError {
    /// The message is not a handshake message of this team's secret (wrong length, another
    /// team or secret, tampered): refused and counted by the caller.
    #[error("handshake message refused: {0}")]
    Refused(String),
    /// The message came after the handshake finished.
    #[error("handshake already finished")]
    Finished,
    /// The cryptography library could not start a handshake (no randomness from the OS).
    #[error("cannot start a handshake: {0}")]
    Start(String),
}

fn refused(e: snow::Error) -> SessionError {
    SessionError::Refused(e.to_string())
}

/// The two frame keys of one session, seen from one end.
pub struct SessionKeys {
    /// Seals this end's frames.
    pub send: TeamKey,
    /// Opens the peer's frames.
    pub recv: TeamKey,
}

impl fmt::Debug for SessionKeys {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SessionKeys").finish_non_exhaustive()
    }
}

/// `snow`'s primitives, with the random source replaced by the caller's entropy (the only
/// randomness a handshake draws is its ephemeral key).
struct EntropyResolver {
    entropy: [u8; 32],
}

/// ChaCha20 keyed with the caller's entropy.
struct EntropyRng(rand_chacha::ChaCha20Rng);

impl snow::types::Random for EntropyRng {
    fn try_fill_bytes(&mut self, dest: &mut [u8]) -> Result<(), snow::Error> {
        rand_chacha::rand_core::RngCore::fill_bytes(&mut self.0, dest);
        Ok(())
    }
}

impl snow::resolvers::CryptoResolver for EntropyResolver {
    fn resolve_rng(&self) -> Option<Box<dyn snow::types::Random>> {
        use rand_chacha::rand_core::SeedableRng;
        Some(Box::new(EntropyRng(rand_chacha::ChaCha20Rng::from_seed(self.entropy))))
    }
    fn resolve_dh(&self, choice: &snow::params::DHChoice) -> Option<Box<dyn snow::types::Dh>> {
        snow::resolvers::DefaultResolver.resolve_dh(choice)
    }
    fn resolve_hash(&self, choice: &snow::params::HashChoice) -> Option<Box<dyn snow::types::Hash>> {
        snow::resolvers::DefaultResolver.resolve_hash(choice)
    }
    fn resolve_cipher(&self, choice: &snow::params::CipherChoice) -> Option<Box<dyn snow::types::Cipher>> {
        snow::resolvers::DefaultResolver.resolve_cipher(choice)
    }
}

/// The handshake state of one end, from `snow`, set up for team `team_id` and the team's PSK.
fn builder_state(
    psk: &[u8; 32],
    team_id: u32,
    initiator: bool,
    entropy: [u8; 32],
) -> Result<snow::HandshakeState, SessionError> {
    let params: snow::params::NoiseParams =
        PATTERN.parse().map_err(|e: snow::Error| SessionError::Start(e.to_string()))?;
    let pro = prologue(team_id);
    let b = snow::Builder::with_resolver(params, Box::new(EntropyResolver { entropy }))
        .psk(0, psk)
        .and_then(|b| b.prologue(&pro))
        .map_err(|e| SessionError::Start(e.to_string()))?;
    let hs = if initiator { b.build_initiator() } else { b.build_responder() };
    hs.map_err(|e| SessionError::Start(e.to_string()))
}

/// The session keys of a finished handshake. `Split()` gives the initiator's sending key first.
fn split(hs: &mut snow::HandshakeState, team_id: u32, initiator: bool) -> SessionKeys {
    let (mut i2r, mut r2i) = hs.dangerously_get_raw_split();
    let (a, b) = (TeamKey::session(&i2r, team_id), TeamKey::session(&r2i, team_id));
    i2r.fill(0);
    r2i.fill(0);
    if initiator { SessionKeys { send: a, recv: b } } else { SessionKeys { send: b, recv: a } }
}

/// The end that starts the handshake (the connecting side). It sends message 1 at once and
/// again every `retry` until message 2 arrives; the caller decides when to give up.
pub struct Initiator {
    hs: snow::HandshakeState,
    team_id: u32,
    msg1: [u8; MESSAGE_LEN],
    retry: Duration,
    next_send: Option<Instant>,
    sent: u32,
}

impl fmt::Debug for Initiator {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Initiator")
            .field("team_id", &self.team_id)
            .field("next_send", &self.next_send)
            .field("sent", &self.sent)
            .finish_non_exhaustive()
    }
}

impl Initiator {
    /// Starts a handshake of team `team_id` with its PSK; message 1 is due at `now`. The
    /// ephemeral key comes from `entropy`: 32 bytes never used before (a socket draws them
    /// from the operating system).
    pub fn new(
        psk: &[u8; 32],
        team_id: u32,
        retry: Duration,
        now: Instant,
        entropy: [u8; 32],
    ) -> Result<Self, SessionError> {
        let mut hs = builder_state(psk, team_id, true, entropy)?;
        let mut msg1 = [0u8; MESSAGE_LEN];
        let n = hs.write_message(&[], &mut msg1).map_err(|e| SessionError::Start(e.to_string()))?;
        debug_assert_eq!(n, MESSAGE_LEN);
        Ok(Initiator { hs, team_id, msg1, retry, next_send: Some(now), sent: 0 })
    }

    /// Message 1 if it is due (the first time at once, then every `retry`). The same bytes
    /// every time: a responder that sees them twice answers with the same message 2.
    pub fn poll_transmit(&mut self, now: Instant) -> Option<&[u8; MESSAGE_LEN]> {
        let due = self.next_send?;
        if now < due {
            return None;
        }
        self.next_send = Some(now + self.retry);
        self.sent += 1;
        Some(&self.msg1)
    }

    /// When message 1 is next due.
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.next_send
    }

    /// Times message 1 went out.
    pub fn sent(&self) -> u32 {
        self.sent
    }

    /// Message 2 from the responder: the session's keys, or why it was refused (the
    /// handshake stays usable, so a forged message cannot end it).
    pub fn handle(&mut self, msg2: &[u8]) -> Result<SessionKeys, SessionError> {
        if self.next_send.is_none() {
            return Err(SessionError::Finished);
        }
        if msg2.len() != MESSAGE_LEN {
            return Err(SessionError::Refused(format!("{} bytes, expected {MESSAGE_LEN}", msg2.len())));
        }
        // `snow` restores its symmetric state when a message fails to authenticate, so a
        // forged message 2 leaves the handshake as it was and the real one still completes.
        let mut payload = [0u8; MESSAGE_LEN];
        match self.hs.read_message(msg2, &mut payload) {
            Ok(_) if self.hs.is_handshake_finished() => {
                self.next_send = None;
                Ok(split(&mut self.hs, self.team_id, true))
            }
            Ok(_) => Err(SessionError::Refused("handshake not finished after message 2".into())),
            Err(e) => Err(refused(e)),
        }
    }
}

/// The answering end: message 1 in, message 2 and the keys out. It keeps nothing, so the
/// caller stores message 2 to answer a repeated message 1 with the same bytes. `entropy` as
/// for [`Initiator::new`].
pub fn respond(
    psk: &[u8; 32],
    team_id: u32,
    msg1: &[u8],
    entropy: [u8; 32],
) -> Result<(SessionKeys, [u8; MESSAGE_LEN]), SessionError> {
    if msg1.len() != MESSAGE_LEN {
        return Err(SessionError::Refused(format!("{} bytes, expected {MESSAGE_LEN}", msg1.len())));
    }
    let mut hs = builder_state(psk, team_id, false, entropy)?;
    let mut payload = [0u8; MESSAGE_LEN];
    hs.read_message(msg1, &mut payload).map_err(refused)?;
    let mut msg2 = [0u8; MESSAGE_LEN];
    let n = hs.write_message(&[], &mut msg2).map_err(|e| SessionError::Start(e.to_string()))?;
    debug_assert_eq!(n, MESSAGE_LEN);
    if !hs.is_handshake_finished() {
        return Err(SessionError::Refused("handshake not finished after message 2".into()));
    }
    Ok((split(&mut hs, team_id, false), msg2))
}

#[cfg(test)]
mod tests;
