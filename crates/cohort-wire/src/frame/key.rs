//! Team keys: HKDF-SHA256 from the team secret, bound to the frame version and the team id.

use super::VERSION;
use chacha20poly1305::{Key, KeyInit, XChaCha20Poly1305};
use core::fmt;

/// Smallest team secret accepted, in bytes.
pub const MIN_SECRET_LEN: usize = 16;

/// HKDF salt: names the purpose, so the same secret used elsewhere yields unrelated keys.
const SALT: &[u8] = b"cohort frame key";

/// An unusable team secret.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum KeyError {
    #[error("team secret of {0} bytes; at least {MIN_SECRET_LEN} are required")]
    SecretTooShort(usize),
}

/// A team's frame key: the XChaCha20-Poly1305 key of one team, for one frame version.
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

/// The 32 key bytes of team `team_id` (HKDF-SHA256 extract and expand).
fn okm(secret: &[u8], team_id: u32) -> [u8; 32] {
    let hk = hkdf::Hkdf::<sha2::Sha256>::new(Some(SALT), secret);
    let mut okm = [0u8; 32];
    // 32 bytes is far below HKDF-SHA256's 8160-byte limit, so expansion cannot fail.
    let _ = hk.expand(&info(team_id), &mut okm);
    okm
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
