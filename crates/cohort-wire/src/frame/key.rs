//! Team keys: HKDF-SHA256 from the team secret, bound to the frame version and the team id.

use super::VERSION;
use chacha20poly1305::{Key, KeyInit, XChaCha20Poly1305};
use core::fmt;

/// Smallest team secret accepted, in bytes.
pub const MIN_SECRET_LEN: usize = 16;

/// HKDF salt: names the purpose, so the same secret used elsewhere yields unrelated keys.
const SALT: &[u8] = b"cohort frame key";
/// HKDF salt of the pre-shared key a session's key exchange mixes in (see [`session_psk`]).
const PSK_SALT: &[u8] = b"cohort session psk";
/// HKDF salt of a session's frame keys, made from the key exchange's output.
const SESSION_SALT: &[u8] = b"cohort session key";

/// An unusable team secret.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum KeyError {
    #[error("team secret of {0} bytes; at least {MIN_SECRET_LEN} are required")]
    SecretTooShort(usize),
}

/// A frame key: the XChaCha20-Poly1305 key of one team for one frame version, or of one
/// direction of one session ([`TeamKey::session`]).
///
/// `Debug` shows the team id only; the key bytes are never printed and are zeroed on drop.
#[derive(Clone)]
pub struct TeamKey {
    pub(super) team_id: u32,
    pub(super) cipher: XChaCha20Poly1305,
}

impl fmt::Debug for TeamKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TeamKey").field("team_id", &self.team_id).finish_non_exhaustive()
    }
}

/// HKDF `info`: `"cohort v" ‖ version digit ‖ " team " ‖ team id (u32, big-endian)`.
fn info(team_id: u32) -> [u8; 19] {
    let mut info = *b"cohort v? team \0\0\0\0";
    info[8] = b'0' + VERSION;
    info[15..].copy_from_slice(&team_id.to_be_bytes());
    info
}

/// 32 key bytes of team `team_id` for the purpose `salt` names (HKDF-SHA256 extract and
/// expand).
fn hkdf32(salt: &[u8], secret: &[u8], team_id: u32) -> [u8; 32] {
    let hk = hkdf::Hkdf::<sha2::Sha256>::new(Some(salt), secret);
    let mut okm = [0u8; 32];
    // 32 bytes is far below HKDF-SHA256's 8160-byte limit, so expansion cannot fail.
    let _ = hk.expand(&info(team_id), &mut okm);
    okm
}

/// The team key's 32 bytes.
fn okm(secret: &[u8], team_id: u32) -> [u8; 32] {
    hkdf32(SALT, secret, team_id)
}

/// The pre-shared key of team `team_id`'s session handshakes (Noise `psk0`, see
/// `cohort_proto::session`): HKDF-SHA256 over the team secret with its own salt, so it is
/// unrelated to the team's frame key.
pub fn session_psk(secret: &[u8], team_id: u32) -> Result<[u8; 32], KeyError> {
    if secret.len() < MIN_SECRET_LEN {
        return Err(KeyError::SecretTooShort(secret.len()));
    }
    Ok(hkdf32(PSK_SALT, secret, team_id))
}

impl TeamKey {
    /// Derives the key of team `team_id` from the team secret (at least [`MIN_SECRET_LEN`]
    /// bytes; use 32 random bytes).
    pub fn derive(secret: &[u8], team_id: u32) -> Result<Self, KeyError> {
        if secret.len() < MIN_SECRET_LEN {
            return Err(KeyError::SecretTooShort(secret.len()));
        }
        let mut key = Key::from(okm(secret, team_id));
        let cipher = XChaCha20Poly1305::new(&key);
        key.fill(0);
        Ok(TeamKey { team_id, cipher })
    }

    /// The frame key of one direction of a session of team `team_id`, from the 32 bytes its
    /// key exchange produced for that direction (HKDF-SHA256 with a salt of its own, so the
    /// frame layer never uses the exchange's output directly). The caller zeroes `raw`.
    pub fn session(raw: &[u8; 32], team_id: u32) -> Self {
        let mut key = Key::from(hkdf32(SESSION_SALT, raw, team_id));
        let cipher = XChaCha20Poly1305::new(&key);
        key.fill(0);
        TeamKey { team_id, cipher }
    }

    /// The team this key belongs to.
    pub fn team_id(&self) -> u32 {
        self.team_id
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Independent vector: Python `cryptography`'s HKDF(SHA256, 32, salt, info) on the same
    /// inputs.
    #[test]
    fn key_schedule_known_answer() {
        assert_eq!(&info(0x0102_0304), b"cohort v2 team \x01\x02\x03\x04");
        assert_eq!(okm(b"0123456789abcdef", 7), KAT_OKM);
    }

    const KAT_OKM: [u8; 32] = [
        0x51, 0x23, 0x9d, 0xa2, 0xbf, 0xb4, 0x32, 0xf9, 0x2a, 0x1d, 0x9f, 0xb5, 0xd0, 0x60, 0x2e, 0xa5, 0x94, 0x96,
        0x36, 0x02, 0x78, 0xa7, 0x42, 0xea, 0x79, 0x67, 0xcf, 0x75, 0xfa, 0x69, 0x2b, 0x9b,
    ];

    #[test]
    fn short_secrets_are_refused_and_debug_hides_the_key() {
        assert_eq!(TeamKey::derive(b"short", 1).unwrap_err(), KeyError::SecretTooShort(5));
        let k = TeamKey::derive(b"0123456789abcdef", 9).unwrap();
        assert_eq!(format!("{k:?}"), "TeamKey { team_id: 9, .. }");
        assert_ne!(okm(b"0123456789abcdef", 9), okm(b"0123456789abcdef", 10), "teams get distinct keys");
    }
}
