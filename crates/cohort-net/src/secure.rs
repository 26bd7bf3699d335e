//! The secure frame on a socket: one sealer for this endpoint's sender id, one opener.

use cohort_wire::frame::{Opener, SealError, Sealer, TeamKey, kind};

pub use cohort_wire::frame::OpenError;

/// Sealing failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum SecureError {
    #[error("packet numbers exhausted; reconnect with a new sender id")]
    Exhausted,
    #[error("datagram buffer too small")]
    Buffer,
}

/// Seals outgoing and opens incoming LRT datagrams with the team key.
#[derive(Debug)]
pub struct Secure {
    sealer: Sealer,
    opener: Opener,
}

impl Secure {
    pub fn new(key: TeamKey, sender_id: u32) -> Self {
        Secure { sealer: Sealer::new(key.clone(), sender_id), opener: Opener::new(key) }
    }

    /// The packet number the next sealed datagram carries.
    pub fn next_pn(&self) -> u64 {
        self.sealer.next_packet_number()
    }

    pub fn seal(&mut self, plain: &[u8], out: &mut [u8]) -> Result<usize, SecureError> {
        self.sealer.seal(kind::LRT, plain, out).map_err(|e| match e {
            SealError::PacketNumberExhausted => SecureError::Exhausted,
            SealError::BufferTooSmall { .. } => SecureError::Buffer,
        })
    }

    /// `(sender id, packet number, plaintext)` of an authentic LRT datagram.
    pub fn open<'a>(&mut self, datagram: &'a mut [u8]) -> Result<(u32, u64, &'a [u8]), OpenError> {
        let o = self.opener.open(datagram)?;
        Ok((o.sender_id, o.packet_number, o.payload))
    }

    /// Datagrams rejected so far, every reason together.
    pub fn rejected(&self) -> u64 {
        self.opener.counters().rejected()
    }

    pub fn counters(&self) -> cohort_wire::frame::RejectCounters {
        self.opener.counters()
    }
}
