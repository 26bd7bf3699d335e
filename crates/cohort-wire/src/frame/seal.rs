//! Sealing: one [`Sealer`] per local sender id, owning that sender's packet numbers.

use super::{Frame, FrameRepr, HEADER_LEN, OVERHEAD, TeamKey, VERSION, nonce};
use chacha20poly1305::AeadInOut;

/// Why sealing failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum SealError {
    /// The output buffer cannot hold header, payload and tag.
    #[error("output buffer of {have} bytes, frame needs {need}")]
    BufferTooSmall { need: usize, have: usize },
    /// The life used every packet number; a new [`Sealer`] (a new epoch) may send again.
    #[error("packet numbers exhausted for this sealer; open a new one")]
    PacketNumberExhausted,
}

/// The operating system could not supply the random epoch of a new [`Sealer`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("no randomness from the operating system for a sealer's epoch: {0}")]
pub struct EntropyError(pub getrandom::Error);

/// Seals frames for one life of a local sender.
///
/// A sealer is one *life*: it owns a random epoch and a packet-number counter that starts at
/// 0, grows by one per sealed frame (a failed seal consumes none) and stops at `u64::MAX - 1`.
/// The nonce is sender id ‖ epoch ‖ packet number, so it never repeats under one key (the
/// invariant of the [module docs](super)): any number of sealers may share a sender id, in
/// one process or across restarts and robots.
#[derive(Debug)]
pub struct Sealer {
    key: TeamKey,
    sender_id: u32,
    epoch: u64,
    pub(in crate::frame) next_pn: u64,
}

/// A fresh epoch from the kernel's CSPRNG (`getrandom(2)`).
pub fn random_epoch() -> Result<u64, EntropyError> {
    getrandom::u64().map_err(EntropyError)
}

impl Sealer {
    /// A new life of `sender_id`: a random epoch from the operating system, packet numbers
    /// from 0.
    pub fn new(key: TeamKey, sender_id: u32) -> Result<Self, EntropyError> {
        Ok(Self::with_epoch(key, sender_id, random_epoch()?))
    }

    /// A life of `sender_id` with a caller-chosen `epoch`, for deterministic drivers (the
    /// simulator, known-answer tests). The caller must never give two sealers of one sender id
    /// and key the same epoch; [`new`](Self::new) is the safe choice on real sockets.
    pub fn with_epoch(key: TeamKey, sender_id: u32, epoch: u64) -> Self {
        Sealer { key, sender_id, epoch, next_pn: 0 }
    }

    pub fn sender_id(&self) -> u32 {
        self.sender_id
    }

    /// This life's epoch.
    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    pub fn team_id(&self) -> u32 {
        self.key.team_id
    }

    /// The packet number the next frame will carry.
    pub fn next_packet_number(&self) -> u64 {
        self.next_pn
    }

    /// Writes a frame of kind `kind` carrying `payload` into the front of `out`; returns the
    /// frame's length, `payload.len() + OVERHEAD`. Allocates nothing; encrypts in place.
    pub fn seal(&mut self, kind: u8, payload: &[u8], out: &mut [u8]) -> Result<usize, SealError> {
        let need = payload.len() + OVERHEAD;
        if out.len() < need {
            return Err(SealError::BufferTooSmall { need, have: out.len() });
        }
        out[HEADER_LEN..HEADER_LEN + payload.len()].copy_from_slice(payload);
        self.seal_in_place(kind, out, payload.len())
    }

    /// Like [`seal`](Self::seal), for a payload the caller already wrote at
    /// `buf[HEADER_LEN..HEADER_LEN + payload_len]` (so upper layers can emit straight into the
    /// frame). Writes the header before it and the tag after it; returns the frame's length.
    pub fn seal_in_place(&mut self, kind: u8, buf: &mut [u8], payload_len: usize) -> Result<usize, SealError> {
        let have = buf.len();
        let need = payload_len.checked_add(OVERHEAD).ok_or(SealError::BufferTooSmall { need: usize::MAX, have })?;
        if have < need {
            return Err(SealError::BufferTooSmall { need, have });
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
            epoch: self.epoch,
            packet_number: pn,
            payload_len,
        };
        let mut f = Frame::new_unchecked(&mut buf[..need]);
        repr.emit(&mut f);
        let (head, body, tag) = f.split_mut();
        // ChaCha20-Poly1305 refuses only payloads past 256 GiB, which no datagram buffer holds.
        let t = self
            .key
            .cipher
            .encrypt_inout_detached(&nonce(self.sender_id, self.epoch, pn), head, body.into())
            .map_err(|_| SealError::BufferTooSmall { need, have })?;
        tag.copy_from_slice(&t);
        self.next_pn += 1;
        Ok(need)
    }
}
