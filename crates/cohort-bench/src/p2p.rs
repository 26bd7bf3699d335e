//! A point-to-point link in virtual time for the transport benchmarks: one-way delay,
//! serialization at a rate behind a drop-tail queue, and iid or Gilbert-Elliott loss, each
//! direction with its own seeded random stream.
//!
//! It carries whole datagrams (the LRT packet plus the frame and UDP/IPv4 bytes it would have
//! on a real wire, for serialization and byte counts).

use cohort_time::Instant;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::collections::VecDeque;
use std::time::Duration;

/// How packets are lost.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub enum LossModel {
    Iid {
        p: f64,
    },
    /// Two-state Markov chain: per packet, good→bad with `p_gb`, bad→good with `p_bg`; loss
    /// probability `loss_good` / `loss_bad` in each state. Mean loss is
    /// `(p_bg * loss_good + p_gb * loss_bad) / (p_gb + p_bg)`.
    GilbertElliott {
        p_gb: f64,
        p_bg: f64,
        loss_good: f64,
        loss_bad: f64,
    },
}

impl LossModel {
    /// Long-run loss rate.
    pub fn mean(&self) -> f64 {
        match *self {
            LossModel::Iid { p } => p,
            LossModel::GilbertElliott { p_gb, p_bg, loss_good, loss_bad } => {
                (p_bg * loss_good + p_gb * loss_bad) / (p_gb + p_bg).max(1e-12)
            }
        }
    }
}

/// One direction of a link.
#[derive(Debug, Clone, Copy)]
pub struct LinkParams {
    pub owd: Duration,
    pub rate_bps: u64,
    pub queue_bytes: usize,
    pub loss: LossModel,
}

/// A link direction carrying payloads of type `P`.
#[derive(Debug)]
pub struct Link<P> {
    p: LinkParams,
    rng: ChaCha8Rng,
    bad: bool,
    busy_until: Instant,
    q: VecDeque<(Instant, P)>,
    pub sent: u64,
    pub lost: u64,
    pub queue_drops: u64,
    pub wire_bytes: u64,
}

impl<P> Link<P> {
    pub fn new(p: LinkParams, seed: u64) -> Self {
        Link {
            p,
            rng: ChaCha8Rng::seed_from_u64(seed),
            bad: false,
            busy_until: Instant::ZERO,
            q: VecDeque::new(),
            sent: 0,
            lost: 0,
            queue_drops: 0,
            wire_bytes: 0,
        }
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

    /// Offers a packet of `wire_len` bytes at `now`.
    pub fn send(&mut self, now: Instant, wire_len: usize, pkt: P) {
        self.sent += 1;
        self.wire_bytes += wire_len as u64;
        let start = self.busy_until.max(now);
        let backlog = (start - now).as_secs_f64() * self.p.rate_bps as f64 / 8.0;
        if backlog + wire_len as f64 > self.p.queue_bytes as f64 {
            self.queue_drops += 1;
            return;
        }
        let tx = Duration::from_nanos((wire_len as u64 * 8 * 1_000_000_000).div_ceil(self.p.rate_bps.max(1)));
        self.busy_until = start + tx;
        if self.lose() {
            self.lost += 1;
            return;
        }
        self.q.push_back((self.busy_until + self.p.owd, pkt));
    }

    /// When the next packet arrives.
    pub fn next_at(&self) -> Option<Instant> {
        self.q.front().map(|x| x.0)
    }

    /// The next packet due by `now`.
    pub fn pop_due(&mut self, now: Instant) -> Option<P> {
        if self.q.front().is_some_and(|x| x.0 <= now) { self.q.pop_front().map(|x| x.1) } else { None }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delay_rate_and_loss() {
        let p = LinkParams {
            owd: Duration::from_millis(50),
            rate_bps: 8_000_000,
            queue_bytes: 10_000,
            loss: LossModel::Iid { p: 0.0 },
        };
        let mut l = Link::new(p, 1);
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
        assert_eq!(l.queue_drops, 10, "drop-tail at 10 kB of backlog");
    }

    #[test]
    fn loss_models_match_their_means() {
        for m in [
            LossModel::Iid { p: 0.1 },
            LossModel::GilbertElliott { p_gb: 0.02, p_bg: 0.2, loss_good: 0.01, loss_bad: 0.5 },
        ] {
            let p = LinkParams { owd: Duration::ZERO, rate_bps: u64::MAX / 16, queue_bytes: usize::MAX, loss: m };
            let mut l = Link::new(p, 7);
            for i in 0..200_000u32 {
                l.send(Instant::ZERO, 100, i);
            }
            let rate = l.lost as f64 / l.sent as f64;
            assert!((rate - m.mean()).abs() < 0.01, "{m:?}: {rate}");
        }
    }
}
