//! A point-to-point link: each direction has its own parameters and its own seeded random
//! stream, so a run is reproducible from one seed.
//!
//! A packet offered at `now` waits for the transmitter behind a drop-tail queue (limited in
//! bytes by `queue_bytes` and optionally in packets by `queue_packets`), is serialized at
//! `rate_bps`, may then be lost (iid or Gilbert-Elliott, decided per packet), and arrives after
//! the one-way delay plus a jitter drawn from a configurable distribution. Jitter alone
//! reorders packets whose spacing is below the jitter spread; on top of that a share `reorder`
//! of packets is held back by `reorder_delay` so that later ones overtake it (netem's
//! "reorder" with an explicit gap). A delivered packet may arrive twice (`duplicate`); the
//! copy gets its own jitter.
//!
//! By default the loss model is advanced once per packet, so two links with the same seed
//! lose the same packet *numbers*, and two transports sending different packets meet
//! different losses. With a [`LossClock`] the loss is a property of *time* instead, a trace
//! replayed on every link that shares the clock: time is cut into slots, each slot's fate
//! (and the Gilbert-Elliott state) is a pure function of the clock's seed and the slot's
//! index, and a packet is lost when its serialization starts in a lost slot. Transports
//! compared side by side on links with one clock thus meet the same fades at the same
//! moments, whatever they send.
//!
//! The model is sans-IO: [`Link::send`] takes the time, [`Link::poll_timeout`] says when the
//! next packet arrives and [`Link::poll_deliver`] hands it out. It never reads a clock. A
//! [`Duplex`] holds the two (possibly asymmetric) directions of one link.

use cohort_time::Instant;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::time::Duration;

/// The longest delay any parameter may ask for. Nothing physical takes a day; the bound keeps
/// every sum and product of durations far from overflow.
pub const MAX_DELAY: Duration = Duration::from_secs(86_400);

/// How packets are lost.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub enum LossModel {
    /// Each packet is lost independently with probability `p`.
    Iid { p: f64 },
    /// Two-state Markov chain advanced once per packet: good→bad with `p_gb`, bad→good with
    /// `p_bg`; loss probability `loss_good` / `loss_bad` in each state (Gilbert 1960, Elliott
    /// 1963; netem's "loss gemodel" uses the same four numbers). The mean burst length in the
    /// bad state is `1 / p_bg` packets. The chain starts in the good state.
    GilbertElliott { p_gb: f64, p_bg: f64, loss_good: f64, loss_bad: f64 },
}

impl LossModel {
    /// Long-run loss rate: `(p_bg * loss_good + p_gb * loss_bad) / (p_gb + p_bg)` for
    /// Gilbert-Elliott.
    pub fn mean(&self) -> f64 {
        match *self {
            LossModel::Iid { p } => p,
            LossModel::GilbertElliott { p_gb, p_bg, loss_good, loss_bad } => {
                (p_bg * loss_good + p_gb * loss_bad) / (p_gb + p_bg).max(1e-12)
            }
        }
    }

    fn probabilities(&self) -> Vec<f64> {
        match *self {
            LossModel::Iid { p } => vec![p],
            LossModel::GilbertElliott { p_gb, p_bg, loss_good, loss_bad } => vec![p_gb, p_bg, loss_good, loss_bad],
        }
    }
}

/// Makes the loss model a trace over time (see the module's documentation).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct LossClock {
    /// Length of one slot: every packet whose serialization starts in the slot shares its
    /// fate. Below the serialization time of the packets compared (100 µs is 1250 bytes at
    /// 100 Mbit/s) consecutive packets fall in distinct slots, so each meets its own draw.
    pub slot: Duration,
    /// Names the trace: clocks with the same seed and slot (and links with the same loss
    /// model) lose in the same slots.
    pub seed: u64,
}

impl LossClock {
    /// Slots per regeneration period of a Gilbert-Elliott trace: the chain restarts from its
    /// stationary distribution (with the slot's own draw) every this many slots, so that the
    /// state of any slot is computed from at most this many steps (a few ms of work),
    /// however long the link sat idle, and stays a function of the seed and the slot alone.
    /// A restart cuts the fade or the good stretch it falls in; at 2¹⁸ slots (2.6 s of
    /// 10 µs slots) that touches one fade in hundreds of any sensible length.
    const GE_PERIOD: u64 = 1 << 18;

    /// A uniform draw in [0, 1) that is a pure function of the seed, the slot and `which`
    /// (0: the Gilbert-Elliott transition, 1: the loss). SplitMix64 (Steele, Lea and Flood,
    /// OOPSLA 2014) of a counter: a well-mixed, seekable stream, which a sequential
    /// generator is not.
    fn uniform(&self, slot: u64, which: u64) -> f64 {
        // The seed is mixed first, so that seeds a multiple of the increment apart do not
        // give one trace shifted by some slots.
        let z = mix64(mix64(self.seed).wrapping_add(slot.wrapping_mul(2).wrapping_add(which).wrapping_mul(GOLDEN)));
        (z >> 11) as f64 / (1u64 << 53) as f64
    }

    fn slot_of(&self, at: Instant) -> u64 {
        at.as_nanos() / (self.slot.as_nanos() as u64).max(1)
    }
}

const GOLDEN: u64 = 0x9E37_79B9_7F4A_7C15;

/// SplitMix64's finalizer: a bijection of `u64` whose outputs for consecutive inputs look
/// independent.
pub fn mix64(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Where a link's Gilbert-Elliott trace stands: the state of slot `at`.
#[derive(Debug, Clone, Copy)]
struct TraceCursor {
    at: u64,
    bad: bool,
}

/// Extra per-packet delay on top of the one-way delay. Every distribution is truncated so that
/// a single draw can never exceed a fixed multiple of its parameter (stated per variant).
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub enum Jitter {
    None,
    /// Uniform in `[0, max]`.
    Uniform {
        max: Duration,
    },
    /// The positive half of a normal with deviation `sigma` (mean `sigma * 0.80`), truncated
    /// at `4 sigma`: a symmetric normal around the one-way delay would need negative delays.
    Normal {
        sigma: Duration,
    },
    /// Exponential with this mean, truncated at `20 × mean` (a probability of e⁻²⁰): queueing
    /// delay behind independent cross traffic.
    Exponential {
        mean: Duration,
    },
    /// Heavy-tailed Pareto type II (Lomax): `scale · ((1-u)^(-1/shape) - 1)`, mean
    /// `scale / (shape - 1)` for `shape > 1`, truncated at `1000 × scale`. Wi-Fi retries and
    /// bufferbloat produce tails like this.
    Pareto {
        scale: Duration,
        shape: f64,
    },
}

impl Jitter {
    fn validate(&self) -> Result<(), LinkError> {
        let longest = match *self {
            Jitter::None => Some(Duration::ZERO),
            Jitter::Uniform { max } => Some(max),
            Jitter::Normal { sigma } => sigma.checked_mul(4),
            Jitter::Exponential { mean } => mean.checked_mul(20),
            Jitter::Pareto { scale, shape } => {
                if !(shape.is_finite() && shape > 0.0) {
                    return Err(LinkError::ParetoShape(shape));
                }
                scale.checked_mul(1000)
            }
        };
        if longest.is_none_or(|d| d > MAX_DELAY) {
            return Err(LinkError::TooLong("jitter"));
        }
        Ok(())
    }
}

/// One direction of a link.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct LinkParams {
    /// One-way propagation (and processing) delay, added after serialization.
    pub owd: Duration,
    pub jitter: Jitter,
    /// Transmitter rate; a packet of `n` bytes occupies it for `8n / rate_bps` seconds.
    pub rate_bps: u64,
    /// Drop-tail limit on the bytes waiting for (or in) the transmitter.
    pub queue_bytes: usize,
    /// Drop-tail limit on the packets waiting for (or in) the transmitter, like a NIC's
    /// `txqueuelen`; `None`: bytes only.
    #[serde(default)]
    pub queue_packets: Option<usize>,
    pub loss: LossModel,
    /// Probability that a delivered packet arrives twice.
    pub duplicate: f64,
    /// Probability that a packet is held back by `reorder_delay`.
    pub reorder: f64,
    pub reorder_delay: Duration,
    /// When set, losses follow a trace over time shared by every link with this clock,
    /// instead of a draw per packet from the link's own stream.
    #[serde(default)]
    pub loss_clock: Option<LossClock>,
}

impl LinkParams {
    /// A clean link: this delay and rate, a queue of 100 ms at the rate (at least 64 KiB, so
    /// that slow links still hold a few full-size datagrams), nothing else.
    pub fn clean(owd: Duration, rate_bps: u64) -> Self {
        LinkParams {
            owd,
            jitter: Jitter::None,
            rate_bps,
            queue_bytes: (rate_bps / 80).max(64 * 1024).try_into().unwrap_or(usize::MAX),
            queue_packets: None,
            loss: LossModel::Iid { p: 0.0 },
            duplicate: 0.0,
            reorder: 0.0,
            reorder_delay: Duration::ZERO,
            loss_clock: None,
        }
    }

    /// Checks every parameter.
    pub fn validate(&self) -> Result<(), LinkError> {
        if self.rate_bps == 0 {
            return Err(LinkError::ZeroRate);
        }
        let mut probs = self.loss.probabilities();
        probs.extend([self.duplicate, self.reorder]);
        if let Some(&p) = probs.iter().find(|p| !(0.0..=1.0).contains(*p)) {
            return Err(LinkError::Probability(p));
        }
        if self.owd > MAX_DELAY {
            return Err(LinkError::TooLong("owd"));
        }
        if self.reorder_delay > MAX_DELAY {
            return Err(LinkError::TooLong("reorder_delay"));
        }
        if let Some(c) = self.loss_clock {
            if c.slot < Duration::from_micros(1) {
                return Err(LinkError::SlotTooShort(c.slot));
            }
            if c.slot > MAX_DELAY {
                return Err(LinkError::TooLong("loss slot"));
            }
        }
        self.jitter.validate()
    }
}

/// An invalid [`LinkParams`].
#[derive(Debug, Clone, Copy, PartialEq, thiserror::Error)]
pub enum LinkError {
    #[error("link rate must be positive")]
    ZeroRate,
    #[error("probability {0} outside [0, 1]")]
    Probability(f64),
    #[error("{0} longer than a day")]
    TooLong(&'static str),
    #[error("Pareto shape {0} must be positive and finite")]
    ParetoShape(f64),
    #[error("loss slot {0:?} is shorter than 1 µs")]
    SlotTooShort(Duration),
}

/// What became of the packets offered to a direction.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LinkStats {
    /// Packets offered to [`Link::send`] (the "sent" counter).
    pub offered: u64,
    pub offered_bytes: u64,
    /// Dropped by the loss model.
    pub lost: u64,
    /// Dropped because the queue was full.
    pub queue_drops: u64,
    /// Extra copies made.
    pub duplicated: u64,
    /// Packets held back by `reorder_delay`.
    pub reordered: u64,
    /// Deliveries of an original packet after a later-sent one was delivered (reordering
    /// observed at the receiver, whatever caused it: jitter or `reorder`).
    pub out_of_order: u64,
    /// Packets handed out by [`Link::poll_deliver`], copies included.
    pub delivered: u64,
}

/// What [`Link::send`] did with a packet. The verdict on loss is known to the model at once;
/// a sender must not act on it (it is for tests and traces).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SendOutcome {
    /// Queued; it will be delivered (at least once).
    Accepted,
    /// Serialized but lost on the way.
    Lost,
    /// Dropped at the tail of a full queue.
    QueueFull,
}

/// A packet coming out of a link.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Delivery<P> {
    /// When it arrives (the time `poll_timeout` reported).
    pub at: Instant,
    /// When it was offered to `send`.
    pub sent_at: Instant,
    /// This is the extra copy of a duplicated packet.
    pub duplicate: bool,
    pub packet: P,
}

#[derive(Debug)]
struct InFlight<P> {
    at: Instant,
    /// Push order: ties in `at` come out first-in first-out.
    seq: u64,
    /// Send order of the original packet.
    id: u64,
    sent_at: Instant,
    duplicate: bool,
    pkt: P,
}

impl<P> PartialEq for InFlight<P> {
    fn eq(&self, o: &Self) -> bool {
        (self.at, self.seq) == (o.at, o.seq)
    }
}
impl<P> Eq for InFlight<P> {}
impl<P> PartialOrd for InFlight<P> {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}
impl<P> Ord for InFlight<P> {
    fn cmp(&self, o: &Self) -> std::cmp::Ordering {
        (self.at, self.seq).cmp(&(o.at, o.seq))
    }
}

/// One direction of a point-to-point link carrying payloads `P`.
#[derive(Debug)]
pub struct Link<P> {
    p: LinkParams,
    rng: ChaCha8Rng,
    bad: bool,
    /// The Gilbert-Elliott state of the last slot a timed loss was decided in.
    cursor: Option<TraceCursor>,
    busy_until: Instant,
    /// When each packet still in the transmitter's queue finishes serializing.
    departures: VecDeque<Instant>,
    seq: u64,
    next_id: u64,
    /// Highest id delivered so far, plus one (0: none yet).
    delivered_up_to: u64,
    q: BinaryHeap<Reverse<InFlight<P>>>,
    stats: LinkStats,
}

impl<P: Clone> Link<P> {
    /// A direction with parameters `p` and its own random stream from `seed`.
    pub fn new(p: LinkParams, seed: u64) -> Result<Self, LinkError> {
        p.validate()?;
        Ok(Link {
            p,
            rng: ChaCha8Rng::seed_from_u64(seed),
            bad: false,
            cursor: None,
            busy_until: Instant::ZERO,
            departures: VecDeque::new(),
            seq: 0,
            next_id: 0,
            delivered_up_to: 0,
            q: BinaryHeap::new(),
            stats: LinkStats::default(),
        })
    }

    pub fn params(&self) -> &LinkParams {
        &self.p
    }

    /// Changes the parameters from now on (a fault injected as data: a partition is loss 1).
    /// Packets already queued or in flight keep their arrival times.
    pub fn set_params(&mut self, p: LinkParams) -> Result<(), LinkError> {
        p.validate()?;
        if p.loss_clock != self.p.loss_clock || p.loss != self.p.loss {
            self.cursor = None;
        }
        self.p = p;
        Ok(())
    }

    pub fn stats(&self) -> LinkStats {
        self.stats
    }

    /// Packets waiting for or being serialized by the transmitter at `now`.
    pub fn queued_packets(&mut self, now: Instant) -> usize {
        while self.departures.front().is_some_and(|&d| d <= now) {
            self.departures.pop_front();
        }
        self.departures.len()
    }

    /// Whether a packet whose serialization starts at `at` is lost.
    fn lose(&mut self, at: Instant) -> bool {
        if let Some(clock) = self.p.loss_clock {
            return self.lose_in_slot(clock, clock.slot_of(at));
        }
        match self.p.loss {
            LossModel::Iid { p } => self.rng.random_bool(p),
            LossModel::GilbertElliott { p_gb, p_bg, loss_good, loss_bad } => {
                self.bad = if self.bad { !self.rng.random_bool(p_bg) } else { self.rng.random_bool(p_gb) };
                self.rng.random_bool(if self.bad { loss_bad } else { loss_good })
            }
        }
    }

    /// The fate of slot `k` of the clock's trace: a function of the seed and `k` alone.
    fn lose_in_slot(&mut self, clock: LossClock, k: u64) -> bool {
        match self.p.loss {
            LossModel::Iid { p } => clock.uniform(k, 1) < p,
            LossModel::GilbertElliott { p_gb, p_bg, loss_good, loss_bad } => {
                let period_start = k - k % LossClock::GE_PERIOD;
                let mut c = match self.cursor {
                    Some(c) if c.at >= period_start && c.at <= k => c,
                    // A new period starts from the stationary distribution.
                    _ => TraceCursor {
                        at: period_start,
                        bad: clock.uniform(period_start, 0) < p_gb / (p_gb + p_bg).max(1e-12),
                    },
                };
                while c.at < k {
                    c.at += 1;
                    let u = clock.uniform(c.at, 0);
                    c.bad = if c.bad { u >= p_bg } else { u < p_gb };
                }
                self.cursor = Some(c);
                clock.uniform(k, 1) < if c.bad { loss_bad } else { loss_good }
            }
        }
    }

    fn jitter(&mut self) -> Duration {
        // `random::<f64>()` is in [0, 1); every factor below is finite and bounded, and the
        // parameters are bounded by `MAX_DELAY`, so `mul_f64` cannot overflow.
        match self.p.jitter {
            Jitter::None => Duration::ZERO,
            Jitter::Uniform { max } => max.mul_f64(self.rng.random()),
            Jitter::Normal { sigma } => {
                // Box-Muller from two uniforms; |z| truncated at 4.
                let (u1, u2): (f64, f64) = (self.rng.random::<f64>().max(1e-12), self.rng.random());
                let z = (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos();
                sigma.mul_f64(z.abs().min(4.0))
            }
            Jitter::Exponential { mean } => {
                let u: f64 = self.rng.random();
                mean.mul_f64((-(1.0 - u).ln()).min(20.0))
            }
            Jitter::Pareto { scale, shape } => {
                let u: f64 = self.rng.random();
                let x = (1.0 - u).powf(-1.0 / shape) - 1.0;
                scale.mul_f64(if x.is_finite() { x.clamp(0.0, 1000.0) } else { 1000.0 })
            }
        }
    }

    fn push(&mut self, at: Instant, id: u64, sent_at: Instant, duplicate: bool, pkt: P) {
        self.seq += 1;
        self.q.push(Reverse(InFlight { at, seq: self.seq, id, sent_at, duplicate, pkt }));
    }

    /// Offers a packet of `wire_len` bytes at `now`. Times should not go backwards; if they
    /// do, the packet simply queues behind what is already there.
    pub fn send(&mut self, now: Instant, wire_len: usize, pkt: P) -> SendOutcome {
        self.stats.offered += 1;
        self.stats.offered_bytes += wire_len as u64;
        let start = self.busy_until.max(now);
        let backlog = (start - now).as_secs_f64() * self.p.rate_bps as f64 / 8.0;
        // Always trim the departures that passed (not only under a packet limit), or they pile
        // up one per packet for the life of the link.
        let queued = self.queued_packets(now);
        let full_packets = self.p.queue_packets.is_some_and(|limit| queued >= limit);
        if full_packets || backlog + wire_len as f64 > self.p.queue_bytes as f64 {
            self.stats.queue_drops += 1;
            return SendOutcome::QueueFull;
        }
        let tx_ns = (wire_len as u128 * 8 * 1_000_000_000).div_ceil(u128::from(self.p.rate_bps));
        self.busy_until = start + Duration::from_nanos(u64::try_from(tx_ns).unwrap_or(u64::MAX));
        self.departures.push_back(self.busy_until);
        if self.lose(start) {
            self.stats.lost += 1;
            return SendOutcome::Lost;
        }
        let id = self.next_id;
        self.next_id += 1;
        let mut at = self.busy_until + self.p.owd + self.jitter();
        if self.p.reorder > 0.0 && self.rng.random_bool(self.p.reorder) {
            self.stats.reordered += 1;
            at += self.p.reorder_delay;
        }
        if self.p.duplicate > 0.0 && self.rng.random_bool(self.p.duplicate) {
            self.stats.duplicated += 1;
            let dup_at = at + self.jitter();
            self.push(dup_at, id, now, true, pkt.clone());
        }
        self.push(at, id, now, false, pkt);
        SendOutcome::Accepted
    }

    /// When the next packet arrives.
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.q.peek().map(|x| x.0.at)
    }

    /// Same as [`Link::poll_timeout`].
    pub fn next_at(&self) -> Option<Instant> {
        self.poll_timeout()
    }

    /// The next packet due by `now`, in arrival order (ties in the order they were sent).
    pub fn poll_deliver(&mut self, now: Instant) -> Option<Delivery<P>> {
        if self.poll_timeout()? > now {
            return None;
        }
        let Reverse(f) = self.q.pop()?;
        self.stats.delivered += 1;
        if !f.duplicate {
            if f.id + 1 < self.delivered_up_to {
                self.stats.out_of_order += 1;
            }
            self.delivered_up_to = self.delivered_up_to.max(f.id + 1);
        }
        Some(Delivery { at: f.at, sent_at: f.sent_at, duplicate: f.duplicate, packet: f.pkt })
    }

    /// The payload of [`Link::poll_deliver`].
    pub fn pop_due(&mut self, now: Instant) -> Option<P> {
        self.poll_deliver(now).map(|d| d.packet)
    }
}

/// Both directions of a link, possibly asymmetric.
#[derive(Debug)]
pub struct Duplex<P> {
    pub up: Link<P>,
    pub down: Link<P>,
}

impl<P: Clone> Duplex<P> {
    /// `up` and `down` parameters; their random streams derive from `seed` (and differ).
    pub fn new(up: LinkParams, down: LinkParams, seed: u64) -> Result<Self, LinkError> {
        Ok(Duplex {
            up: Link::new(up, seed.wrapping_mul(2).wrapping_add(1))?,
            down: Link::new(down, seed.wrapping_mul(2).wrapping_add(2))?,
        })
    }

    /// The earlier of the two directions' next arrivals.
    pub fn poll_timeout(&self) -> Option<Instant> {
        match (self.up.poll_timeout(), self.down.poll_timeout()) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn base() -> LinkParams {
        LinkParams::clean(Duration::from_millis(50), 8_000_000)
    }

    /// Found by a one-hour LRT run: under a byte limit the transmitter's departure times were
    /// never trimmed, one per packet for the life of the link.
    #[test]
    fn a_long_lived_link_keeps_no_record_per_packet() {
        let mut l = Link::new(base(), 1).unwrap();
        for i in 0..1_000_000u64 {
            let now = Instant::from_micros(i * 10_000);
            l.send(now, 1000, i);
            while l.pop_due(now).is_some() {}
        }
        assert!(l.departures.len() <= 1, "{} departures kept", l.departures.len());
        assert!(l.q.len() <= 10, "{} in flight", l.q.len());
    }

    #[test]
    fn delay_serialization_and_drop_tail() {
        let mut l = Link::new(LinkParams { queue_bytes: 10_000, ..base() }, 1).unwrap();
        l.send(Instant::ZERO, 1000, 1u32);
        l.send(Instant::ZERO, 1000, 2u32);
        // 1000 bytes at 1 MB/s take 1 ms each.
        assert_eq!(l.next_at(), Some(Instant::from_millis(51)));
        assert_eq!(l.pop_due(Instant::from_millis(51)), Some(1));
        assert_eq!(l.pop_due(Instant::from_millis(51)), None);
        assert_eq!(l.pop_due(Instant::from_millis(52)), Some(2));
        for i in 0..20 {
            l.send(Instant::from_millis(60), 1000, i);
        }
        assert_eq!(l.stats().queue_drops, 10, "drop-tail at 10 kB of backlog");
    }

    #[test]
    fn loss_models_match_their_means() {
        for m in [
            LossModel::Iid { p: 0.1 },
            LossModel::GilbertElliott { p_gb: 0.02, p_bg: 0.2, loss_good: 0.01, loss_bad: 0.5 },
        ] {
            let p = LinkParams { loss: m, queue_bytes: usize::MAX, ..LinkParams::clean(Duration::ZERO, u64::MAX / 16) };
            let mut l = Link::new(p, 7).unwrap();
            for i in 0..200_000u32 {
                l.send(Instant::ZERO, 100, i);
            }
            let rate = l.stats().lost as f64 / l.stats().offered as f64;
            assert!((rate - m.mean()).abs() < 0.01, "{m:?}: {rate}");
        }
    }

    #[test]
    fn gilbert_elliott_losses_come_in_bursts() {
        let ge = LossModel::GilbertElliott { p_gb: 0.01, p_bg: 0.1, loss_good: 0.0, loss_bad: 1.0 };
        let p = LinkParams { loss: ge, queue_bytes: usize::MAX, ..LinkParams::clean(Duration::ZERO, u64::MAX / 16) };
        let mut l = Link::new(p, 3).unwrap();
        let mut got = vec![];
        for i in 0..50_000u32 {
            l.send(Instant::ZERO, 100, i);
        }
        while let Some(i) = l.pop_due(Instant::from_millis(1000)) {
            got.push(i);
        }
        let gaps: Vec<u32> = got.windows(2).map(|w| w[1] - w[0] - 1).filter(|&g| g > 0).collect();
        let mean_burst = gaps.iter().sum::<u32>() as f64 / gaps.len() as f64;
        assert!((8.0..12.0).contains(&mean_burst), "mean burst {mean_burst}, expected 1/p_bg = 10");
    }

    /// The fate of each packet a link carries, by the time its serialization starts.
    fn fates(l: &mut Link<u64>, sends: &[u64]) -> std::collections::BTreeMap<u64, bool> {
        sends.iter().map(|&us| (us, l.send(Instant::from_micros(us), 100, us) == SendOutcome::Lost)).collect()
    }

    #[test]
    fn a_loss_clock_gives_every_link_the_same_trace_whatever_it_sends() {
        for m in [
            LossModel::Iid { p: 0.1 },
            LossModel::GilbertElliott { p_gb: 0.02, p_bg: 0.3, loss_good: 0.0, loss_bad: 1.0 },
        ] {
            let clock = LossClock { slot: Duration::from_micros(100), seed: 42 };
            let p = LinkParams {
                loss: m,
                loss_clock: Some(clock),
                queue_bytes: usize::MAX,
                ..LinkParams::clean(Duration::ZERO, 1_000_000_000)
            };
            // Different link seeds (their jitter and per-packet draws differ), one clock. One
            // link sends every millisecond; the other at the same instants plus extra packets
            // between them, and after an idle stretch of an hour.
            let (mut a, mut b) = (Link::new(p, 1).unwrap(), Link::new(p, 2).unwrap());
            let hour = 3_600_000_000;
            let every_ms: Vec<u64> = (0..40_000).map(|i| i * 1000).chain((0..2000).map(|i| hour + i * 1000)).collect();
            let extra: Vec<u64> = every_ms.iter().flat_map(|&t| [t, t + 250, t + 500]).collect();
            let (fa, fb) = (fates(&mut a, &every_ms), fates(&mut b, &extra));
            assert!(every_ms.iter().all(|t| fa[t] == fb[t]), "{m:?}: the two links met different losses");
            let rate = fb.values().filter(|&&x| x).count() as f64 / fb.len() as f64;
            assert!((rate - m.mean()).abs() < 0.01, "{m:?}: loss rate {rate}, model mean {}", m.mean());
            // Another trace seed is another trace.
            let other = LinkParams { loss_clock: Some(LossClock { seed: 43, ..clock }), ..p };
            let fc = fates(&mut Link::new(other, 1).unwrap(), &every_ms);
            assert!(every_ms.iter().any(|t| fa[t] != fc[t]), "{m:?}: seeds 42 and 43 gave one trace");
        }
    }

    #[test]
    fn a_timed_gilbert_elliott_trace_loses_whole_stretches_of_time() {
        let ge = LossModel::GilbertElliott { p_gb: 0.01, p_bg: 0.1, loss_good: 0.0, loss_bad: 1.0 };
        let clock = LossClock { slot: Duration::from_millis(1), seed: 5 };
        let p = LinkParams { loss: ge, loss_clock: Some(clock), ..LinkParams::clean(Duration::ZERO, 1_000_000_000) };
        let mut l = Link::new(p, 3).unwrap();
        // One packet per slot: runs of lost packets are the bad state's stays, 1 / p_bg slots
        // long on average, and a packet sent later within a slot (on another link) shares its
        // fate.
        let f = fates(&mut l, &(0..200_000).map(|i| i * 1000).collect::<Vec<_>>());
        let lost: Vec<bool> = f.values().copied().collect();
        let runs = lost.chunk_by(|a, b| a == b).filter(|r| r[0]).map(|r| r.len()).collect::<Vec<_>>();
        let mean_run = runs.iter().sum::<usize>() as f64 / runs.len() as f64;
        assert!((8.0..12.0).contains(&mean_run), "mean burst {mean_run} slots, expected 1/p_bg = 10");
        // Fades of 3 ms in 10 µs slots (300 slots on average) keep their length: the chain's
        // regeneration periods are far longer.
        let ge = LossModel::GilbertElliott { p_gb: 1.0 / 2700.0, p_bg: 1.0 / 300.0, loss_good: 0.0, loss_bad: 1.0 };
        let fine = LossClock { slot: Duration::from_micros(10), seed: 6 };
        let p_fine = LinkParams { loss: ge, loss_clock: Some(fine), ..p };
        let f_fine = fates(&mut Link::new(p_fine, 1).unwrap(), &(0..1_000_000).map(|i| i * 10).collect::<Vec<_>>());
        let lost: Vec<bool> = f_fine.values().copied().collect();
        let runs = lost.chunk_by(|a, b| a == b).filter(|r| r[0]).map(|r| r.len()).collect::<Vec<_>>();
        let mean_run = runs.iter().sum::<usize>() as f64 / runs.len() as f64;
        assert!(
            (240.0..360.0).contains(&mean_run),
            "mean fade {mean_run} slots over {} fades, expected 300",
            runs.len()
        );
        let twice = fates(&mut Link::new(p, 4).unwrap(), &(0..5000).map(|i| i * 1000 + 500).collect::<Vec<_>>());
        assert!(twice.iter().all(|(t, x)| f[&(t - 500)] == *x), "two packets in one slot met different fates");
    }

    #[test]
    fn jitter_reorders_duplicates_duplicate_and_runs_repeat() {
        let p = LinkParams {
            jitter: Jitter::Uniform { max: Duration::from_millis(5) },
            duplicate: 0.1,
            reorder: 0.05,
            reorder_delay: Duration::from_millis(20),
            loss_clock: None,
            queue_bytes: usize::MAX,
            ..LinkParams::clean(Duration::from_millis(10), 1_000_000_000)
        };
        let run = |seed| {
            let mut l = Link::new(p, seed).unwrap();
            for i in 0..10_000u32 {
                l.send(Instant::from_micros(u64::from(i) * 100), 100, i);
            }
            let mut out = vec![];
            while let Some(i) = l.pop_due(Instant::from_millis(10_000)) {
                out.push(i);
            }
            (out, l.stats())
        };
        let (a, s) = run(9);
        assert_eq!(a.len() as u64, 10_000 + s.duplicated);
        assert!(s.duplicated > 800 && s.reordered > 300);
        assert!(a.windows(2).any(|w| w[1] < w[0]), "some packets overtaken");
        assert_eq!(run(9).0, a, "same seed, same run");
        assert_ne!(run(10).0, a);
    }

    #[test]
    fn normal_jitter_stays_within_four_sigma_and_asymmetry_holds() {
        let up = LinkParams { jitter: Jitter::Normal { sigma: Duration::from_millis(1) }, ..base() };
        let down = LinkParams::clean(Duration::from_millis(5), 1_000_000);
        let mut d = Duplex::new(up, down, 1).unwrap();
        for i in 0..1000u64 {
            d.up.send(Instant::from_millis(i * 10), 100, i);
        }
        let mut n = 0;
        while let Some(i) = d.up.pop_due(Instant::from_millis(20_000)) {
            n += 1;
            let _ = i;
        }
        assert_eq!(n, 1000);
        d.down.send(Instant::ZERO, 1000, 0);
        assert_eq!(d.down.next_at(), Some(Instant::from_millis(13)), "8 ms serialization at 1 Mbit/s + 5 ms");
    }

    #[test]
    fn invalid_parameters_are_errors() {
        assert_eq!(Link::<u8>::new(LinkParams { rate_bps: 0, ..base() }, 1).unwrap_err(), LinkError::ZeroRate);
        let bad = LinkParams { loss: LossModel::Iid { p: 1.5 }, ..base() };
        assert_eq!(Link::<u8>::new(bad, 1).unwrap_err(), LinkError::Probability(1.5));
        let bad = LinkParams { duplicate: -0.1, ..base() };
        assert!(Link::<u8>::new(bad, 1).is_err());
    }

    #[test]
    fn send_reports_and_deliveries_carry_times() {
        let p = LinkParams { queue_bytes: 1500, loss: LossModel::Iid { p: 0.0 }, ..base() };
        let mut l = Link::new(p, 1).unwrap();
        assert_eq!(l.send(Instant::from_millis(1), 1000, 'a'), SendOutcome::Accepted);
        assert_eq!(l.send(Instant::from_millis(1), 1000, 'b'), SendOutcome::QueueFull);
        assert_eq!(l.poll_timeout(), Some(Instant::from_millis(52)));
        assert_eq!(l.poll_deliver(Instant::from_millis(51)), None);
        let d = l.poll_deliver(Instant::from_millis(60)).unwrap();
        assert_eq!(
            (d.at, d.sent_at, d.duplicate, d.packet),
            (Instant::from_millis(52), Instant::from_millis(1), false, 'a')
        );
        let mut lossy = Link::new(LinkParams { loss: LossModel::Iid { p: 1.0 }, ..base() }, 1).unwrap();
        assert_eq!(lossy.send(Instant::ZERO, 10, 'x'), SendOutcome::Lost);
        assert_eq!(lossy.poll_timeout(), None);
    }

    #[test]
    fn packet_limit_drops_tail_and_frees_as_packets_leave() {
        let p = LinkParams { queue_bytes: usize::MAX, queue_packets: Some(3), ..base() };
        let mut l = Link::new(p, 1).unwrap();
        let outcomes: Vec<_> = (0..5).map(|i| l.send(Instant::ZERO, 1000, i)).collect();
        assert_eq!(outcomes.iter().filter(|&&o| o == SendOutcome::QueueFull).count(), 2);
        assert_eq!(l.queued_packets(Instant::ZERO), 3);
        // 1 ms per packet at 8 Mbit/s: after 1 ms the first has left.
        assert_eq!(l.queued_packets(Instant::from_millis(1)), 2);
        assert_eq!(l.send(Instant::from_millis(1), 1000, 9), SendOutcome::Accepted);
        assert_eq!(l.stats().queue_drops, 2);
    }

    #[test]
    fn reordering_is_counted_where_it_is_seen() {
        let p = LinkParams {
            reorder: 0.2,
            reorder_delay: Duration::from_millis(5),
            loss_clock: None,
            queue_bytes: usize::MAX,
            ..LinkParams::clean(Duration::from_millis(10), 1_000_000_000)
        };
        let mut l = Link::new(p, 4).unwrap();
        for i in 0..5_000u64 {
            l.send(Instant::from_micros(i * 100), 100, i);
        }
        let mut late = 0;
        let mut max_seen = None;
        while let Some(d) = l.poll_deliver(Instant::FAR_FUTURE) {
            if max_seen.is_some_and(|m| d.packet < m) {
                late += 1;
            }
            max_seen = max_seen.max(Some(d.packet));
        }
        let s = l.stats();
        assert_eq!(s.out_of_order, late);
        // A packet held back by 5 ms while others follow every 0.1 ms is always overtaken.
        assert_eq!(s.out_of_order, s.reordered);
        assert!((800..1200).contains(&s.reordered), "{s:?}");
    }

    #[test]
    fn exponential_and_pareto_jitter_have_their_means() {
        let ms = Duration::from_millis(1);
        for (j, mean) in [(Jitter::Exponential { mean: ms }, 1.0), (Jitter::Pareto { scale: ms, shape: 3.0 }, 0.5)] {
            let p = LinkParams { jitter: j, queue_bytes: usize::MAX, ..LinkParams::clean(Duration::ZERO, u64::MAX) };
            let mut l = Link::new(p, 11).unwrap();
            let n = 100_000u64;
            for i in 0..n {
                l.send(Instant::from_millis(i * 1000), 1, i);
            }
            let mut sum = 0.0;
            while let Some(d) = l.poll_deliver(Instant::FAR_FUTURE) {
                sum += (d.at - d.sent_at).as_secs_f64() * 1e3;
            }
            let got = sum / n as f64;
            assert!((got - mean).abs() < 0.05 * mean, "{j:?}: mean {got} ms, expected {mean}");
        }
    }

    #[test]
    fn extreme_parameters_are_rejected_not_panicked_on() {
        let day = MAX_DELAY + Duration::from_secs(1);
        assert_eq!(Link::<u8>::new(LinkParams { owd: day, ..base() }, 1).unwrap_err(), LinkError::TooLong("owd"));
        let j = Jitter::Normal { sigma: Duration::MAX };
        assert_eq!(Link::<u8>::new(LinkParams { jitter: j, ..base() }, 1).unwrap_err(), LinkError::TooLong("jitter"));
        let j = Jitter::Pareto { scale: Duration::from_millis(1), shape: f64::NAN };
        assert!(matches!(Link::<u8>::new(LinkParams { jitter: j, ..base() }, 1), Err(LinkError::ParetoShape(_))));
        let nan = LinkParams { loss: LossModel::Iid { p: f64::NAN }, ..base() };
        let zero_slot = LinkParams { loss_clock: Some(LossClock { slot: Duration::ZERO, seed: 1 }), ..base() };
        assert_eq!(zero_slot.validate(), Err(LinkError::SlotTooShort(Duration::ZERO)));
        assert!(Link::<u8>::new(nan, 1).is_err());
        // Enormous packets on a slow link saturate time instead of overflowing.
        let mut l = Link::new(LinkParams { queue_bytes: usize::MAX, ..LinkParams::clean(MAX_DELAY, 1) }, 1).unwrap();
        assert_eq!(l.send(Instant::FAR_FUTURE, usize::MAX, 0u8), SendOutcome::Accepted);
        assert_eq!(l.pop_due(Instant::FAR_FUTURE), Some(0));
    }

    mod prop {
        use super::*;
        use proptest::prelude::*;

        fn params() -> impl Strategy<Value = LinkParams> {
            (
                (0u64..200_000, 0u64..20_000, 0u8..5, 1u64..10_000_000_000),
                (0usize..100_000, proptest::option::of(0usize..50)),
                (0.0f64..=1.0, 0.0f64..=1.0, 0.0f64..=1.0, any::<bool>()),
                (0.0f64..=1.0, 0.0f64..=1.0, 0u64..100_000, proptest::option::of((1u64..100_000, any::<u64>()))),
            )
                .prop_map(|((owd, j, kind, rate), (qb, qp), (a, b, c, ge), (dup, reo, reo_us, clock))| {
                    let jd = Duration::from_micros(j);
                    LinkParams {
                        owd: Duration::from_micros(owd),
                        jitter: match kind {
                            0 => Jitter::None,
                            1 => Jitter::Uniform { max: jd },
                            2 => Jitter::Normal { sigma: jd },
                            3 => Jitter::Exponential { mean: jd },
                            _ => Jitter::Pareto { scale: jd, shape: 1.5 },
                        },
                        rate_bps: rate,
                        queue_bytes: qb,
                        queue_packets: qp,
                        loss: if ge {
                            LossModel::GilbertElliott { p_gb: a, p_bg: b, loss_good: 0.0, loss_bad: c }
                        } else {
                            LossModel::Iid { p: a }
                        },
                        duplicate: dup,
                        reorder: reo,
                        reorder_delay: Duration::from_micros(reo_us),
                        loss_clock: clock.map(|(us, seed)| LossClock { slot: Duration::from_micros(us), seed }),
                    }
                })
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(64))]
            /// Every offered packet is queued-dropped, lost or delivered (copies on top), in
            /// arrival-time order, never before it was sent plus the one-way delay.
            #[test]
            fn packets_are_conserved(p in params(), seed in any::<u64>(), sends in proptest::collection::vec((0u64..5_000, 1usize..3000), 0..200)) {
                let mut l = Link::new(p, seed).unwrap();
                let mut now = Instant::ZERO;
                let mut got = vec![];
                for (i, &(gap_us, len)) in sends.iter().enumerate() {
                    now += Duration::from_micros(gap_us);
                    l.send(now, len, i);
                    while let Some(d) = l.poll_deliver(now) {
                        got.push(d);
                    }
                }
                while let Some(d) = l.poll_deliver(Instant::FAR_FUTURE) {
                    got.push(d);
                }
                let s = l.stats();
                prop_assert_eq!(s.offered, sends.len() as u64);
                prop_assert_eq!(s.delivered, got.len() as u64);
                prop_assert_eq!(s.delivered, s.offered - s.lost - s.queue_drops + s.duplicated);
                prop_assert!(got.iter().all(|d| d.at >= d.sent_at + p.owd));
                prop_assert!(got.iter().filter(|d| d.duplicate).count() as u64 == s.duplicated);
            }
        }
    }
}
