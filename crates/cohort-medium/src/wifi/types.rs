//! The medium's configuration, events, errors and counters. See the [module docs](super).

use super::{Ac, EdcaParams, NicProfile};
use cohort_time::Instant;
use std::time::Duration;

/// Per-station settings.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(default)]
pub struct StationConfig {
    /// Frames each access-category queue holds: the WNIC's hardware queue (seed 000 §II-C).
    /// 64 is a typical per-AC ring of a mac80211 driver such as mt76. Under
    /// [`NicProfile::SharedTx`] the queue's first `buffer_frames` are in the card and the
    /// rest in the host.
    pub queue_depth: usize,
    /// Unicast data rate; `None` uses the channel's.
    pub data_mbps: Option<f64>,
    /// Probability that a frame *to* this station is corrupted (retried if unicast).
    pub fer: f64,
    /// Transmission attempts of a frame no longer than the RTS threshold before it is dropped
    /// (dot11ShortRetryLimit, default 7, 802.11-2016 Annex C). 255: never dropped, as in
    /// Bianchi's model.
    #[serde(alias = "retry_limit")]
    pub short_retry_limit: u8,
    /// Transmission attempts of a frame longer than the RTS threshold (so protected by
    /// RTS/CTS) before it is dropped (dot11LongRetryLimit, default 4).
    pub long_retry_limit: u8,
    /// Unicast frames longer than this (MSDU bytes) are preceded by RTS/CTS; `None`: never
    /// (dot11RTSThreshold off, the default of Linux and ns-3).
    pub rts_threshold: Option<usize>,
    /// A-MPDU limits per access category (indexed by [`Ac`]); one frame means no aggregation.
    pub ampdu: [AmpduLimit; 4],
    /// What a frame waits for inside the card ([`NicProfile`]): per-AC hardware queues (the
    /// default) or one shared transmit path (`shared_tx`, seed 000's MT7612U under mt76).
    pub nic: NicProfile,
}

/// How many MPDUs, and bytes, one A-MPDU of an access category may carry, and how large an
/// A-MSDU each MPDU may be. A non-zero TXOP limit of the category bounds the A-MPDU's air
/// time too (with its block ack), and so does the PHY's longest PPDU
/// ([`Phy::max_ppdu`](super::Phy::max_ppdu)). See [`Aggregation`](super::Aggregation) for
/// ns-3's defaults and the scenario settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct AmpduLimit {
    /// MPDUs per A-MPDU (at most the block-ack window); 1: no A-MPDU.
    pub max_frames: u16,
    pub max_bytes: u32,
    /// Bytes of one A-MSDU (subframe headers and padding included); 0: no A-MSDU.
    #[serde(default)]
    pub max_amsdu_bytes: u32,
}

impl AmpduLimit {
    /// No aggregation.
    pub const OFF: AmpduLimit = AmpduLimit { max_frames: 1, max_bytes: 65_535, max_amsdu_bytes: 0 };
    /// 802.11n: a block-ack window of 64 MPDUs, 65 535-byte A-MPDUs (maximum A-MPDU length
    /// exponent 3, 802.11-2016 9.4.2.56.3).
    pub const HT: AmpduLimit = AmpduLimit { max_frames: 64, max_bytes: 65_535, max_amsdu_bytes: 0 };
    /// 802.11ac: 64 MPDUs, 1 048 575-byte A-MPDUs (exponent 7, 9.4.2.158.2).
    pub const VHT: AmpduLimit = AmpduLimit { max_frames: 64, max_bytes: 1_048_575, max_amsdu_bytes: 0 };

    /// Whether this category sends several MSDUs per PPDU at all.
    pub fn aggregates(&self) -> bool {
        self.max_frames > 1 || self.max_amsdu_bytes > 0
    }
}

impl Default for StationConfig {
    fn default() -> Self {
        StationConfig {
            queue_depth: 64,
            data_mbps: None,
            fer: 0.0,
            short_retry_limit: 7,
            long_retry_limit: 4,
            rts_threshold: None,
            ampdu: [AmpduLimit::OFF; 4],
            nic: NicProfile::PerAc,
        }
    }
}

/// What stations do after a failed exchange.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Timing {
    /// Everyone resumes AIFS after the end of a collision (Bianchi's "DIFS" model, which
    /// ns-3's reference tables use). The default.
    #[default]
    Bianchi,
    /// 802.11: bystanders wait EIFS after a collision, failed senders their ACK timeout
    /// and then AIFS.
    Standard,
    /// As ns-3 3.44 behaves: ACK timeouts as in `Standard`; EIFS only for bystanders whose
    /// PHY detects a colliding preamble, and whole-frame capture at the receiver, both of
    /// which take received powers
    /// ([`Medium::with_preamble_detection`](super::Medium::with_preamble_detection); without
    /// them nobody detects or captures anything, as in ns-3 with stations within a metre or
    /// so of each other); a 4 µs CCA delay ([`NS3_CCA_DELAY`]); and a 500 ms MSDU lifetime
    /// ([`NS3_MSDU_LIFETIME`]).
    Ns3,
}

/// How long after a PPDU starts an ns-3 station's MAC learns that the channel is busy: the
/// PHY's preamble detection period (`WifiPhy` attribute `PreambleDetectionDuration`, 4 µs),
/// at whose end `PhyEntity::EndPreambleDetectionPeriod` reports CCA busy.
pub const NS3_CCA_DELAY: std::time::Duration = std::time::Duration::from_micros(4);

/// How long an ns-3 3.44 frame may wait in its `WifiMacQueue` (attribute `MaxDelay`, 500 ms)
/// before it is discarded as expired: its MSDU lifetime
/// ([`Medium::with_msdu_lifetime`](super::Medium::with_msdu_lifetime)).
pub const NS3_MSDU_LIFETIME: std::time::Duration = std::time::Duration::from_millis(500);

/// ns-3's preamble detection defaults: `ThresholdPreambleDetectionModel` detects a preamble
/// at least 4 dB above interference plus noise ...
pub const NS3_PREAMBLE_THRESHOLD_DB: f64 = 4.0;

/// ... and at least −82 dBm strong (`MinimumRssi`), over a noise floor of −93.97 dBm
/// (thermal noise in 20 MHz, −100.97 dBm, plus `WifiPhy`'s default 7 dB `RxNoiseFigure`).
pub const NS3_PREAMBLE_DETECTION: (f64, f64) = (-82.0, NS3_NOISE_DBM);

/// The noise floor of a 20 MHz ns-3 channel, dBm (see [`NS3_PREAMBLE_DETECTION`]).
pub const NS3_NOISE_DBM: f64 = -93.97;

/// Where a frame goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub enum Dest {
    Unicast(usize),
    Broadcast,
}

/// Why a frame was dropped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub enum DropReason {
    /// The access category's queue was full (local congestion).
    QueueFull,
    /// Every attempt collided or was corrupted.
    RetryLimit,
    /// A broadcast frame collided (broadcasts are not retried).
    BroadcastCollision,
    /// The frame waited longer than its MSDU lifetime
    /// ([`Medium::with_msdu_lifetime`](super::Medium::with_msdu_lifetime)).
    Lifetime,
}

/// What the medium reports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MediumEvent<H> {
    /// `to` received `handle` from `from` at `at` (end of the frame plus propagation).
    Delivered {
        from: usize,
        to: usize,
        handle: H,
        at: Instant,
    },
    /// The sender is done with a frame: acknowledged (unicast) or sent (broadcast). This is
    /// the driver's transmit-completion callback (seed 000 §IV-C).
    Sent {
        station: usize,
        ac: Ac,
        handle: H,
        at: Instant,
        attempts: u8,
    },
    Dropped {
        station: usize,
        ac: Ac,
        handle: H,
        at: Instant,
        reason: DropReason,
    },
}

impl<H> MediumEvent<H> {
    /// When the event happens.
    pub fn at(&self) -> Instant {
        match self {
            MediumEvent::Delivered { at, .. } | MediumEvent::Sent { at, .. } | MediumEvent::Dropped { at, .. } => *at,
        }
    }
}

/// An invalid configuration or request.
#[derive(Debug, Clone, Copy, PartialEq, thiserror::Error)]
pub enum MediumError {
    #[error("station {0} does not exist")]
    NoStation(usize),
    #[error("station {0} cannot send a unicast frame to itself")]
    SelfAddressed(usize),
    #[error("invalid EDCA parameters {0:?}: need 1 <= aifsn, cw_min <= cw_max, both 2^k - 1, txop <= 1 s")]
    Edca(EdcaParams),
    #[error("invalid PHY: {0}")]
    Phy(&'static str),
    #[error("invalid station configuration: {0}")]
    Station(&'static str),
    #[error("queue full")]
    QueueFull,
}

/// Counters of one access category of one station.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AcStats {
    pub enqueued: u64,
    /// Frames dropped because the hardware queue was full (local congestion).
    pub queue_drops: u64,
    pub retry_drops: u64,
    /// Frames discarded because they outlived their MSDU lifetime.
    pub lifetime_drops: u64,
    /// PPDUs put on the air (an A-MPDU counts once; an RTS that collides counts once).
    pub attempts: u64,
    /// Failed attempts: collisions, frames corrupted at the receiver, internal collisions.
    pub collisions: u64,
    /// Frames delivered (acknowledged unicast, or sent broadcast).
    pub successes: u64,
    pub bytes_sent: u64,
    /// Air time of this category's PPDUs (control responses not included).
    pub airtime: Duration,
    /// Most frames ever waiting.
    pub max_queue: usize,
    /// Frames waiting now (filled in by [`Medium::stats`](super::Medium::stats)).
    pub queue_len: usize,
}
