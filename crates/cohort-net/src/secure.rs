//! The secure frame on a socket: one sealer for this endpoint's sender id, one opener.

use cohort_wire::frame::{EntropyError, Opener, SealError, Sealer, TeamKey};

/// Sealing failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum SecureError {
    #[error("packet numbers exhausted; reconnect with a new sender id")]
    Exhausted,
    #[error("datagram buffer too small")]
    Buffer,
}

/// Seals outgoing and opens incoming datagrams of one payload kind with the team key. Each
/// `Secure` is one life of its sender id: a random epoch, so no two share a nonce (see
/// `cohort_wire::frame`).
#[derive(Debug)]
pub struct Secure {
    kind: u8,
    sealer: Sealer,
    opener: Opener,
    /// Authentic frames of another payload kind.
    foreign_kind: u64,
}

impl Secure {
    /// Frames of `kind` (see `cohort_wire::frame::kind`) sent as `sender_id` in a new life (a
    /// random epoch from the operating system), packet numbers from 0.
    pub fn new(key: TeamKey, sender_id: u32, kind: u8) -> Result<Self, EntropyError> {
        Ok(Secure { kind, sealer: Sealer::new(key.clone(), sender_id)?, opener: Opener::new(key), foreign_kind: 0 })
    }

    /// A session's frames of `kind`: sealed under the session's sending key as `sender_id` in
    /// life `epoch` (packet numbers from 0; the key is new, so the nonces are too), opened with
    /// its receiving key.
    pub fn session(keys: cohort_proto::session::SessionKeys, sender_id: u32, epoch: u64, kind: u8) -> Self {
        Secure {
            kind,
            sealer: Sealer::with_epoch(keys.send, sender_id, epoch),
            opener: Opener::new(keys.recv),
            foreign_kind: 0,
        }
    }

    pub fn sender_id(&self) -> u32 {
        self.sealer.sender_id()
    }

    /// This life's epoch.
    pub fn epoch(&self) -> u64 {
        self.sealer.epoch()
    }

    /// The packet number the next sealed datagram carries.
    pub fn next_pn(&self) -> u64 {
        self.sealer.next_packet_number()
    }

    pub fn seal(&mut self, plain: &[u8], out: &mut [u8]) -> Result<usize, SecureError> {
        self.seal_as(self.kind, plain, out)
    }

    /// Seals a datagram of another payload kind in this life (it takes the next packet number).
    pub fn seal_as(&mut self, kind: u8, plain: &[u8], out: &mut [u8]) -> Result<usize, SecureError> {
        self.sealer.seal(kind, plain, out).map_err(|e| match e {
            SealError::PacketNumberExhausted => SecureError::Exhausted,
            SealError::BufferTooSmall { .. } => SecureError::Buffer,
        })
    }

    /// The authentic datagram of this kind; `None` for anything else (counted by reason).
    pub fn open<'a>(&mut self, datagram: &'a mut [u8]) -> Option<cohort_wire::frame::Opened<'a>> {
        self.open_with(datagram, self.kind)
    }

    /// The authentic datagram of this kind or of kind `also`; `None` for anything else.
    pub fn open_with<'a>(&mut self, datagram: &'a mut [u8], also: u8) -> Option<cohort_wire::frame::Opened<'a>> {
        let o = self.opener.open(datagram).ok()?;
        if o.kind != self.kind && o.kind != also {
            self.foreign_kind += 1;
            return None;
        }
        Some(o)
    }

    /// Whether `pn` is the highest packet number accepted so far from life `epoch` of `sender`
    /// (so no newer datagram of it has arrived).
    pub fn is_newest(&self, sender: u32, epoch: u64, pn: u64) -> bool {
        self.opener.highest_packet_number(sender, epoch) == Some(pn)
    }

    /// Datagrams rejected so far, every reason together (another kind included).
    pub fn rejected(&self) -> u64 {
        self.opener.counters().rejected() + self.foreign_kind
    }

    /// Rejections by the frame layer, by reason.
    pub fn counters(&self) -> cohort_wire::frame::RejectCounters {
        self.opener.counters()
    }

    /// Authentic frames of another payload kind, refused.
    pub fn foreign_kind(&self) -> u64 {
        self.foreign_kind
    }
}
