//! Sealing: one [`Sealer`] per local sender id, owning that sender's packet numbers.

use super::{Frame, FrameRepr, HEADER_LEN, OVERHEAD, TeamKey, VERSION, nonce};
use chacha20poly1305::AeadInOut;

/// Why sealing failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum SealError {
    /// The output buffer cannot hold header, payload and tag.
    #[error("output buffer of {have} bytes, frame needs {need}")]
    BufferTooSmall { need: usize, have: usize },
    /// The sender used every packet number; it must take a new sender id (or the team a new
    /// secret) before it may send again.
    #[error("packet numbers exhausted for this sender id")]
    PacketNumberExhausted,
}

/// Seals frames for one local sender.
///
/// The sealer is the only owner of its sender's packet-number counter: it starts at 0, grows
/// by one per sealed frame (a failed seal consumes none) and stops at `u64::MAX - 1`, so the
/// nonce (sender id ‖ packet number) never repeats under one key. Two live sealers must never
/// share a sender id under the same team key, and a restarted sender must not reuse its id
/// unless the team secret changed.
#[derive(Debug)]
pub struct Sealer {
    key: TeamKey,
    sender_id: u32,
    pub(in crate::frame) next_pn: u64,
}

impl Sealer {
    /// A sealer for `sender_id`, starting at packet number 0.
    pub fn new(key: TeamKey, sender_id: u32) -> Self {
        Sealer { key, sender_id, next_pn: 0 }
    }

    /// A sealer for `sender_id` whose first frame carries packet number `first`. A process
    /// that keeps its sender id across restarts starts each life above every number its former
    /// lives used (e.g. at the wall clock in nanoseconds), so no nonce repeats and receivers'
    /// replay windows accept it.
    pub fn starting_at(key: TeamKey, sender_id: u32, first: u64) -> Self {
        Sealer { key, sender_id, next_pn: first }
    }

    pub fn sender_id(&self) -> u32 {
        self.sender_id
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
            .encrypt_inout_detached(&nonce(self.sender_id, pn), head, body.into())
            .map_err(|_| SealError::BufferTooSmall { need, have })?;
        tag.copy_from_slice(&t);
        self.next_pn += 1;
        Ok(need)
    }
}
