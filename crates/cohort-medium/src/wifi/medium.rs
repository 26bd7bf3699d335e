//! The contention state machine. See the [module docs](super).

use super::phy::{MAC_OVERHEAD_BYTES, QOS_MAC_OVERHEAD_BYTES};
use super::{Ac, EdcaParams, Phy};
use cohort_time::Instant;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::collections::VecDeque;
use std::time::Duration;

/// Per-station settings.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct StationConfig {
    /// Frames each access-category queue holds (the hardware queue).
    pub queue_depth: usize,
    /// Unicast data rate; `None` uses the channel's.
    pub data_mbps: Option<f64>,
    /// Probability that a frame *to* this station is corrupted (retried if unicast).
    pub fer: f64,
    /// Transmission attempts after the first before a unicast frame is dropped.
    pub retry_limit: u8,
    /// Unicast frames longer than this (MSDU bytes) are preceded by RTS/CTS; `None`: never.
    pub rts_threshold: Option<usize>,
    /// A-MPDU limits per access category (indexed by [`Ac`]); one frame means no aggregation.
    pub ampdu: [AmpduLimit; 4],
}

/// How many frames, and bytes, one A-MPDU of an access category may carry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct AmpduLimit {
    pub max_frames: u16,
    pub max_bytes: u32,
}

impl AmpduLimit {
    /// No aggregation.
    pub const OFF: AmpduLimit = AmpduLimit { max_frames: 1, max_bytes: 65_535 };
    /// 802.11n/ac-like: up to 64 MPDUs and 65 535 bytes.
    pub const HT: AmpduLimit = AmpduLimit { max_frames: 64, max_bytes: 65_535 };
}

impl Default for StationConfig {
    fn default() -> Self {
        StationConfig {
            queue_depth: 64,
            data_mbps: None,
            fer: 0.0,
            retry_limit: 7,
            rts_threshold: None,
            ampdu: [AmpduLimit::OFF; 4],
        }
    }
}

/// Control frame lengths: RTS 20, CTS 14, BlockAck (compressed) 32 bytes; per-MPDU delimiter 4.
const RTS_BYTES: usize = 20;
const CTS_BYTES: usize = 14;
const BLOCK_ACK_BYTES: usize = 32;
const MPDU_DELIMITER: usize = 4;

/// Where a frame goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Dest {
    Unicast(usize),
    Broadcast,
}

/// Why a frame was dropped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DropReason {
    /// The access category's queue was full (local congestion).
    QueueFull,
    /// Every attempt collided or was corrupted.
    RetryLimit,
    /// A broadcast frame collided (broadcasts are not retried).
    BroadcastCollision,
}

/// What the medium reports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MediumEvent<H> {
    /// `to` received `handle` from `from` at `at` (end of the frame).
    Delivered {
        from: usize,
        to: usize,
        handle: H,
        at: Instant,
    },
    /// The sender is done with a frame: acknowledged (unicast) or sent (broadcast).
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

/// An invalid configuration or request.
#[derive(Debug, Clone, Copy, PartialEq, thiserror::Error)]
pub enum MediumError {
    #[error("station {0} does not exist")]
    NoStation(usize),
    #[error("invalid EDCA parameters {0:?}")]
    Edca(EdcaParams),
    #[error("invalid station configuration: {0}")]
    Station(&'static str),
    #[error("queue full")]
    QueueFull,
}

/// Counters of one access category of one station.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AcStats {
    pub enqueued: u64,
    pub queue_drops: u64,
    pub retry_drops: u64,
    pub attempts: u64,
    pub collisions: u64,
    pub successes: u64,
    pub bytes_sent: u64,
    pub airtime: Duration,
    pub max_queue: usize,
}

#[derive(Debug)]
struct Frame<H> {
    handle: H,
    dest: Dest,
    bytes: usize,
}

#[derive(Debug)]
struct AcState<H> {
    queue: VecDeque<Frame<H>>,
    cw: u16,
    /// Remaining backoff slots, counted from `count_from`.
    backoff: u32,
    count_from: Instant,
    attempts: u8,
    stats: AcStats,
}

#[derive(Debug)]
struct Station<H> {
    cfg: StationConfig,
    acs: [AcState<H>; 4],
}

/// The shared channel. See the [module docs](super).
#[derive(Debug)]
pub struct Medium<H> {
    phy: Phy,
    edca: [EdcaParams; 4],
    stations: Vec<Station<H>>,
    rng: ChaCha8Rng,
    /// The medium is busy until then; contention resumes after it.
    busy_until: Instant,
    pending: VecDeque<(Instant, MediumEvent<H>)>,
    airtime_busy: Duration,
    propagation: Duration,
    eifs: bool,
    /// EDCA (QoS) stations decrement once more when interrupted; see `transmit`.
    qos: bool,
}

impl<H: Clone> Medium<H> {
    /// A channel with `phy`, the EDCA parameter sets `edca` (indexed by [`Ac`]), one station per
    /// entry of `stations`, and its random stream from `seed`.
    pub fn new(phy: Phy, edca: [EdcaParams; 4], stations: &[StationConfig], seed: u64) -> Result<Self, MediumError> {
        for e in &edca {
            e.validate()?;
        }
        if phy.data_mbps <= 0.0 || phy.basic_mbps <= 0.0 {
            return Err(MediumError::Station("rates must be positive"));
        }
        for s in stations {
            if !(0.0..=1.0).contains(&s.fer) || s.queue_depth == 0 || s.data_mbps.is_some_and(|r| r <= 0.0) {
                return Err(MediumError::Station("fer in [0, 1], queue depth and rate positive"));
            }
        }
        let stations = stations
            .iter()
            .map(|&cfg| Station {
                cfg,
                acs: std::array::from_fn(|i| AcState {
                    queue: VecDeque::new(),
                    cw: edca[i].cw_min,
                    backoff: 0,
                    count_from: Instant::ZERO,
                    attempts: 0,
                    stats: AcStats::default(),
                }),
            })
            .collect();
        Ok(Medium {
            phy,
            edca,
            stations,
            rng: ChaCha8Rng::seed_from_u64(seed),
            busy_until: Instant::ZERO,
            pending: VecDeque::new(),
            airtime_busy: Duration::ZERO,
            propagation: Duration::ZERO,
            eifs: false,
            // A channel whose four categories share one parameter set is legacy DCF.
            qos: !edca.iter().all(|e| *e == edca[0]),
        })
    }

    /// Adds a propagation delay to every delivery (carrier sense stays instantaneous: stations
    /// are assumed close compared with a slot, 9 µs ≈ 2.7 km).
    pub fn with_propagation(mut self, d: Duration) -> Self {
        self.propagation = d;
        self
    }

    /// After a collision, make every station wait EIFS (SIFS + ACK time + AIFS) instead of
    /// AIFS, as 802.11 prescribes after a frame that was received in error. Off by default,
    /// matching Bianchi's "DIFS" model and ns-3's reference tables.
    pub fn with_eifs(mut self, on: bool) -> Self {
        self.eifs = on;
        self
    }

    pub fn phy(&self) -> &Phy {
        &self.phy
    }

    pub fn stations(&self) -> usize {
        self.stations.len()
    }

    /// Counters of a station's access category.
    pub fn stats(&self, station: usize, ac: Ac) -> Option<AcStats> {
        self.stations.get(station).map(|s| s.acs[ac.index()].stats)
    }

    /// Frames waiting in a station's queue.
    pub fn queue_len(&self, station: usize, ac: Ac) -> usize {
        self.stations.get(station).map_or(0, |s| s.acs[ac.index()].queue.len())
    }

    /// Time the channel carried frames (or collisions) so far.
    pub fn busy_time(&self) -> Duration {
        self.airtime_busy
    }

    fn draw_backoff(&mut self, st: usize, ac: usize) {
        let cw = self.stations[st].acs[ac].cw;
        self.stations[st].acs[ac].backoff = self.rng.random_range(0..=u32::from(cw));
    }

    /// Offers a frame of `bytes` (the MSDU: the payload, without MAC header) from `station` in
    /// access category `ac`. A full queue drops it (reported and counted).
    pub fn enqueue(
        &mut self,
        now: Instant,
        station: usize,
        ac: Ac,
        dest: Dest,
        bytes: usize,
        handle: H,
    ) -> Result<(), MediumError> {
        let n = self.stations.len();
        if station >= n || matches!(dest, Dest::Unicast(d) if d >= n || d == station) {
            return Err(MediumError::NoStation(if station >= n { station } else { n }));
        }
        let aifs = self.phy.aifs(self.edca[ac.index()].aifsn);
        let start = self.busy_until.max(now.saturating_sub(aifs)) + aifs;
        let depth = self.stations[station].cfg.queue_depth;
        let s = &mut self.stations[station].acs[ac.index()];
        s.stats.enqueued += 1;
        if s.queue.len() >= depth {
            s.stats.queue_drops += 1;
            self.pending
                .push_back((now, MediumEvent::Dropped { station, ac, handle, at: now, reason: DropReason::QueueFull }));
            return Err(MediumError::QueueFull);
        }
        let was_empty = s.queue.is_empty();
        s.queue.push_back(Frame { handle, dest, bytes });
        s.stats.max_queue = s.stats.max_queue.max(s.queue.len());
        if was_empty {
            // A frame arriving at an idle queue starts a fresh backoff (no immediate access).
            s.count_from = start;
            self.draw_backoff(station, ac.index());
        }
        Ok(())
    }

    /// When a contender's backoff expires.
    fn tx_time(&self, st: usize, ac: usize) -> Option<Instant> {
        let s = &self.stations[st].acs[ac];
        (!s.queue.is_empty()).then(|| s.count_from + self.phy.slot * s.backoff)
    }

    fn next_tx(&self) -> Option<Instant> {
        (0..self.stations.len()).flat_map(|st| (0..4).filter_map(move |ac| self.tx_time(st, ac))).min()
    }

    /// When `handle_timeout` next has something to do.
    pub fn poll_timeout(&self) -> Option<Instant> {
        let ev = self.pending.iter().map(|e| e.0).min();
        match (ev, self.next_tx()) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// The next event due by the last `handle_timeout`.
    pub fn poll_event(&mut self, now: Instant) -> Option<MediumEvent<H>> {
        let i = self.pending.iter().position(|e| e.0 <= now)?;
        self.pending.remove(i).map(|e| e.1)
    }

    /// Runs every transmission that starts by `now`.
    pub fn handle_timeout(&mut self, now: Instant) {
        while let Some(t) = self.next_tx() {
            if t > now {
                break;
            }
            self.transmit(t);
        }
    }

    /// What goes on the air first when `(st, ac)` wins access: the RTS, or the frame (or
    /// aggregate) itself.
    fn first_air(&self, st: usize, ac: usize) -> Duration {
        let q = &self.stations[st].acs[ac].queue;
        let Some(f) = q.front() else { return Duration::ZERO };
        if self.uses_rts(st, f) { self.phy.duration(RTS_BYTES, self.phy.basic_mbps) } else { self.aggregate(st, ac).1 }
    }

    fn uses_rts(&self, st: usize, f: &Frame<H>) -> bool {
        matches!(f.dest, Dest::Unicast(_)) && self.stations[st].cfg.rts_threshold.is_some_and(|t| f.bytes > t)
    }

    /// How many frames from the queue front go in the next PPDU, and its air time: unicast
    /// frames to the same station within the A-MPDU limits, or just the front frame.
    fn aggregate(&self, st: usize, ac: usize) -> (usize, Duration) {
        let q = &self.stations[st].acs[ac].queue;
        let Some(first) = q.front() else { return (0, Duration::ZERO) };
        let limit = self.stations[st].cfg.ampdu[ac];
        if first.dest == Dest::Broadcast || limit.max_frames <= 1 {
            return (1, self.duration(st, first));
        }
        let (mut k, mut bytes) = (0usize, 0usize);
        for f in q.iter().take(usize::from(limit.max_frames)) {
            let b = f.bytes + self.mac_overhead() + MPDU_DELIMITER;
            if f.dest != first.dest || (k > 0 && bytes + b > limit.max_bytes as usize) {
                break;
            }
            k += 1;
            bytes += b;
        }
        let rate = self.stations[st].cfg.data_mbps.unwrap_or(self.phy.data_mbps);
        (k, self.phy.duration(bytes, rate))
    }

    fn mac_overhead(&self) -> usize {
        if self.qos { QOS_MAC_OVERHEAD_BYTES } else { MAC_OVERHEAD_BYTES }
    }

    fn duration(&self, st: usize, f: &Frame<H>) -> Duration {
        let rate = match f.dest {
            Dest::Broadcast => self.phy.basic_mbps,
            Dest::Unicast(_) => self.stations[st].cfg.data_mbps.unwrap_or(self.phy.data_mbps),
        };
        self.phy.duration(f.bytes + self.mac_overhead(), rate)
    }

    fn transmit(&mut self, t: Instant) {
        // Who starts now: at most one access category per station, the highest (an internal
        // collision sends the others into backoff as if they had collided).
        let mut on_air: Vec<(usize, usize)> = vec![];
        let mut internal: Vec<(usize, usize)> = vec![];
        for st in 0..self.stations.len() {
            let mut due: Vec<usize> = (0..4).filter(|&ac| self.tx_time(st, ac) == Some(t)).collect();
            if let Some(top) = due.pop() {
                on_air.push((st, top));
                internal.extend(due.into_iter().map(|ac| (st, ac)));
            }
        }
        let started: Vec<(usize, usize)> = on_air.iter().chain(&internal).copied().collect();
        let collided = on_air.len() > 1;
        let mut end = t;
        if collided {
            // Everyone's first transmission (RTS, frame or aggregate) is lost; `succeed`
            // accounts for a lone winner's exchanges itself.
            for &(st, ac) in &on_air {
                let air = self.first_air(st, ac);
                self.stations[st].acs[ac].stats.attempts += 1;
                self.stations[st].acs[ac].stats.airtime += air;
                end = end.max(t + air);
            }
        }
        let mut busy_end = end;
        if collided && self.eifs {
            busy_end = end + self.phy.sifs + self.phy.ack_duration();
        }
        if collided {
            for &(st, ac) in &on_air {
                self.failed(st, ac, t, end);
            }
        } else if let Some(&(st, ac)) = on_air.first() {
            busy_end = self.succeed(st, ac, t);
        }
        for (st, ac) in internal {
            self.failed(st, ac, t, end);
        }
        self.airtime_busy += busy_end - t;
        // Everyone else froze at `t` and resumes counting after the busy period and its AIFS.
        let qos = self.qos;
        for st in 0..self.stations.len() {
            for ac in 0..4 {
                let aifs = self.phy.aifs(self.edca[ac].aifsn);
                let slot = self.phy.slot.as_nanos() as u64;
                let s = &mut self.stations[st].acs[ac];
                if s.queue.is_empty() {
                    continue;
                }
                if s.count_from <= t && !started.contains(&(st, ac)) {
                    // Idle slots counted since its AIFS ended. An EDCA function also decrements
                    // at the slot boundary that ends AIFS itself (802.11-2016 10.22.2.4; ns-3
                    // models it the same way), a DCF one only after each idle slot.
                    let elapsed = ((t - s.count_from).as_nanos() as u64 / slot) as u32 + u32::from(qos);
                    s.backoff = s.backoff.saturating_sub(elapsed);
                }
                s.count_from = s.count_from.max(busy_end + aifs);
            }
        }
        self.busy_until = self.busy_until.max(busy_end);
    }

    /// A frame exchange that worked on the air (frames may still fail by the receiver's FER).
    /// Returns when the medium is free again.
    fn succeed(&mut self, st: usize, ac: usize, t: Instant) -> Instant {
        let txop = self.edca[ac].txop;
        let mut at = t;
        while let Some(f) = self.stations[st].acs[ac].queue.front() {
            let (dest, rts) = (f.dest, self.uses_rts(st, f));
            let (k, air) = self.aggregate(st, ac);
            self.stations[st].acs[ac].stats.attempts += 1;
            self.stations[st].acs[ac].stats.airtime += air;
            if rts {
                // RTS, SIFS, CTS, SIFS, then the data.
                let basic = self.phy.basic_mbps;
                at += self.phy.duration(RTS_BYTES, basic)
                    + self.phy.sifs
                    + self.phy.duration(CTS_BYTES, basic)
                    + self.phy.sifs;
            }
            let end = at + air;
            let arrive = end + self.propagation;
            match dest {
                Dest::Broadcast => {
                    let f = self.stations[st].acs[ac].queue.pop_front().expect("front checked");
                    for to in (0..self.stations.len()).filter(|&to| to != st) {
                        if !self.rng.random_bool(self.stations[to].cfg.fer) {
                            let ev = MediumEvent::Delivered { from: st, to, handle: f.handle.clone(), at: arrive };
                            self.pending.push_back((arrive, ev));
                        }
                    }
                    self.done(st, ac, f.handle, end, f.bytes);
                    at = end;
                }
                Dest::Unicast(to) => {
                    let fer = self.stations[to].cfg.fer;
                    let ok: Vec<bool> = (0..k).map(|_| !self.rng.random_bool(fer)).collect();
                    let response = if k > 1 {
                        self.phy.duration(BLOCK_ACK_BYTES, self.phy.basic_mbps)
                    } else {
                        self.phy.ack_duration()
                    };
                    if !ok.iter().any(|&o| o) {
                        // Nothing got through: no (block) ACK; the sender times out and backs off.
                        self.failed(st, ac, at, end);
                        return end + self.phy.sifs + response;
                    }
                    at = end + self.phy.sifs + response;
                    // Delivered subframes leave the queue; lost ones stay at the front, in order,
                    // and count one more attempt for the head.
                    let mut kept = VecDeque::new();
                    for good in ok.iter().copied() {
                        let f = self.stations[st].acs[ac].queue.pop_front().expect("aggregate frames are queued");
                        if good {
                            self.pending.push_back((
                                arrive,
                                MediumEvent::Delivered { from: st, to, handle: f.handle.clone(), at: arrive },
                            ));
                            self.done(st, ac, f.handle, at, f.bytes);
                        } else {
                            kept.push_back(f);
                        }
                    }
                    let retry = !kept.is_empty();
                    while let Some(f) = kept.pop_back() {
                        self.stations[st].acs[ac].queue.push_front(f);
                    }
                    if retry {
                        self.failed(st, ac, at, at);
                        return at;
                    }
                }
            }
            // Within a TXOP, the next exchange of the same category follows after SIFS if it
            // still fits.
            // The whole exchange, its acknowledgement included, must end within the TXOP.
            let (k, next) = self.aggregate(st, ac);
            let response =
                if k > 1 { self.phy.duration(BLOCK_ACK_BYTES, self.phy.basic_mbps) } else { self.phy.ack_duration() };
            if txop.is_zero() || next.is_zero() || (at + self.phy.sifs + next + self.phy.sifs + response) - t > txop {
                break;
            }
            at += self.phy.sifs;
        }
        if !self.stations[st].acs[ac].queue.is_empty() {
            self.draw_backoff(st, ac);
        }
        at
    }

    fn done(&mut self, st: usize, ac: usize, handle: H, at: Instant, bytes: usize) {
        let s = &mut self.stations[st].acs[ac];
        s.stats.successes += 1;
        s.stats.bytes_sent += bytes as u64;
        let attempts = s.attempts + 1;
        s.attempts = 0;
        s.cw = self.edca[ac].cw_min;
        self.pending.push_back((at, MediumEvent::Sent { station: st, ac: Ac::ALL[ac], handle, at, attempts }));
    }

    /// A collision or a corrupted frame: double the window and retry, or drop.
    fn failed(&mut self, st: usize, ac: usize, _t: Instant, end: Instant) {
        let limit = self.stations[st].cfg.retry_limit;
        let params = self.edca[ac];
        let s = &mut self.stations[st].acs[ac];
        s.stats.collisions += 1;
        let broadcast = matches!(s.queue.front(), Some(f) if f.dest == Dest::Broadcast);
        s.attempts += 1;
        let drop = if broadcast {
            Some(DropReason::BroadcastCollision)
        } else if s.attempts > limit {
            Some(DropReason::RetryLimit)
        } else {
            None
        };
        match drop {
            Some(reason) => {
                let f = s.queue.pop_front().expect("a failed frame is queued");
                if reason == DropReason::RetryLimit {
                    s.stats.retry_drops += 1;
                }
                s.attempts = 0;
                s.cw = params.cw_min;
                self.pending.push_back((
                    end,
                    MediumEvent::Dropped { station: st, ac: Ac::ALL[ac], handle: f.handle, at: end, reason },
                ));
            }
            None => s.cw = (2 * s.cw + 1).min(params.cw_max),
        }
        if !self.stations[st].acs[ac].queue.is_empty() {
            self.draw_backoff(st, ac);
        }
    }
}
