//! A point-to-point link: each direction has its own parameters and its own seeded random
//! stream, so a run is reproducible from one seed.
//!
//! A packet offered at `now` waits for the transmitter (serialization at `rate_bps` behind a
//! drop-tail queue of `queue_bytes`), may be lost (iid or Gilbert-Elliott), then arrives after
//! the one-way delay plus jitter; it may be duplicated, and a share of packets is held back by
//! `reorder_delay` so that later ones overtake it. Packets carry an opaque payload `P`.

use cohort_time::Instant;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::time::Duration;

/// How packets are lost.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub enum LossModel {
    Iid {
        p: f64,
    },
    /// Two-state Markov chain advanced per packet: good→bad with `p_gb`, bad→good with `p_bg`;
    /// loss probability `loss_good` / `loss_bad` in each state.
    GilbertElliott {
        p_gb: f64,
        p_bg: f64,
        loss_good: f64,
        loss_bad: f64,
    },
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

/// Extra per-packet delay on top of the one-way delay.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub enum Jitter {
    None,
    /// Uniform in `[0, max]`.
    Uniform {
        max: Duration,
    },
    /// Normal with mean 0 and deviation `sigma`, truncated at zero and at `4 sigma`.
    Normal {
        sigma: Duration,
    },
}

/// One direction of a link.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct LinkParams {
    pub owd: Duration,
    pub jitter: Jitter,
    pub rate_bps: u64,
    /// Drop-tail queue ahead of the transmitter, in bytes.
    pub queue_bytes: usize,
    pub loss: LossModel,
    /// Probability that a delivered packet arrives twice.
    pub duplicate: f64,
    /// Probability that a packet is held back by `reorder_delay`.
    pub reorder: f64,
    pub reorder_delay: Duration,
}

impl LinkParams {
    /// A clean link: this delay and rate, a 100 ms queue, nothing else.
    pub fn clean(owd: Duration, rate_bps: u64) -> Self {
        LinkParams {
            owd,
            jitter: Jitter::None,
            rate_bps,
            queue_bytes: (rate_bps / 80).max(64 * 1024) as usize,
            loss: LossModel::Iid { p: 0.0 },
            duplicate: 0.0,
            reorder: 0.0,
            reorder_delay: Duration::ZERO,
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
        Ok(())
    }
}

/// An invalid [`LinkParams`].
#[derive(Debug, Clone, Copy, PartialEq, thiserror::Error)]
pub enum LinkError {
    #[error("link rate must be positive")]
    ZeroRate,
    #[error("probability {0} outside [0, 1]")]
    Probability(f64),
}

/// What became of the packets offered to a direction.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LinkStats {
    pub offered: u64,
    pub offered_bytes: u64,
    pub lost: u64,
    pub queue_drops: u64,
    pub duplicated: u64,
    pub reordered: u64,
    pub delivered: u64,
}

#[derive(Debug)]
struct InFlight<P> {
    at: Instant,
    seq: u64,
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
    busy_until: Instant,
    seq: u64,
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
            busy_until: Instant::ZERO,
            seq: 0,
            q: BinaryHeap::new(),
            stats: LinkStats::default(),
        })
    }

    pub fn params(&self) -> &LinkParams {
        &self.p
    }

    /// Changes the parameters from now on (a fault injected as data: a partition is loss 1).
    /// Packets already in flight keep their arrival times.
    pub fn set_params(&mut self, p: LinkParams) -> Result<(), LinkError> {
        p.validate()?;
        self.p = p;
        Ok(())
    }

    pub fn stats(&self) -> LinkStats {
        self.stats
    }

    fn lose(&mut self) -> bool {
        match self.p.loss {
            LossModel::Iid { p } => self.rng.random_bool(p),
            LossModel::GilbertElliott { p_gb, p_bg, loss_good, loss_bad } => {
                self.bad = if self.bad { !self.rng.random_bool(p_bg) } else { self.rng.random_bool(p_gb) };
                self.rng.random_bool(if self.bad { loss_bad } else { loss_good })
            }
        }
    }

    fn jitter(&mut self) -> Duration {
        match self.p.jitter {
            Jitter::None => Duration::ZERO,
            Jitter::Uniform { max } => max.mul_f64(self.rng.random()),
            Jitter::Normal { sigma } => {
                // Box-Muller from two uniforms; |z| truncated at 4.
                let (u1, u2): (f64, f64) = (self.rng.random::<f64>().max(1e-12), self.rng.random());
                let z = (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos();
                sigma.mul_f64(z.clamp(0.0, 4.0))
            }
        }
    }

    fn push(&mut self, at: Instant, pkt: P) {
        self.seq += 1;
        self.q.push(Reverse(InFlight { at, seq: self.seq, pkt }));
    }

    /// Offers a packet of `wire_len` bytes at `now` (times must not go backwards).
    pub fn send(&mut self, now: Instant, wire_len: usize, pkt: P) {
        self.stats.offered += 1;
        self.stats.offered_bytes += wire_len as u64;
        let start = self.busy_until.max(now);
        let backlog = (start - now).as_secs_f64() * self.p.rate_bps as f64 / 8.0;
        if backlog + wire_len as f64 > self.p.queue_bytes as f64 {
            self.stats.queue_drops += 1;
            return;
        }
        let tx = Duration::from_nanos((wire_len as u64 * 8 * 1_000_000_000).div_ceil(self.p.rate_bps));
        self.busy_until = start + tx;
        if self.lose() {
            self.stats.lost += 1;
            return;
        }
        let mut at = self.busy_until + self.p.owd + self.jitter();
        if self.p.reorder > 0.0 && self.rng.random_bool(self.p.reorder) {
            self.stats.reordered += 1;
            at += self.p.reorder_delay;
        }
        if self.p.duplicate > 0.0 && self.rng.random_bool(self.p.duplicate) {
            self.stats.duplicated += 1;
            let dup_at = at + self.jitter();
            self.push(dup_at, pkt.clone());
        }
        self.push(at, pkt);
    }

    /// When the next packet arrives.
    pub fn next_at(&self) -> Option<Instant> {
        self.q.peek().map(|x| x.0.at)
    }

    /// The next packet due by `now`, in arrival order.
    pub fn pop_due(&mut self, now: Instant) -> Option<P> {
        if self.next_at()? > now {
            return None;
        }
        self.stats.delivered += 1;
        self.q.pop().map(|x| x.0.pkt)
    }
}

/// Both directions of a link, possibly asymmetric.
#[derive(Debug)]
pub struct Duplex<P> {
    pub up: Link<P>,
    pub down: Link<P>,
}

impl<P: Clone> Duplex<P> {
    /// `up` and `down` parameters; their random streams derive from `seed`.
    pub fn new(up: LinkParams, down: LinkParams, seed: u64) -> Result<Self, LinkError> {
        Ok(Duplex {
            up: Link::new(up, seed.wrapping_mul(2).wrapping_add(1))?,
            down: Link::new(down, seed.wrapping_mul(2).wrapping_add(2))?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn base() -> LinkParams {
        LinkParams::clean(Duration::from_millis(50), 8_000_000)
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

    #[test]
    fn jitter_reorders_duplicates_duplicate_and_runs_repeat() {
        let p = LinkParams {
            jitter: Jitter::Uniform { max: Duration::from_millis(5) },
            duplicate: 0.1,
            reorder: 0.05,
            reorder_delay: Duration::from_millis(20),
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
}
