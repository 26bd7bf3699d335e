//! Rate limiting and the sender's estimates of loss and round-trip time (seed 004 §III-E).

use cohort_time::Instant;
use std::time::Duration;

/// Token bucket over wire bytes: `rate_bps` sustained, `burst_bytes` at once.
#[derive(Debug, Clone)]
pub struct TokenBucket {
    rate_bps: u64,
    burst_bytes: f64,
    tokens: f64,
    last: Instant,
}

impl TokenBucket {
    pub fn new(rate_bps: u64, burst_bytes: usize, now: Instant) -> Self {
        TokenBucket { rate_bps, burst_bytes: burst_bytes as f64, tokens: burst_bytes as f64, last: now }
    }

    fn refill(&mut self, now: Instant) {
        let dt = (now - self.last).as_secs_f64();
        self.last = self.last.max(now);
        self.tokens = (self.tokens + dt * self.rate_bps as f64 / 8.0).min(self.burst_bytes);
    }

    /// Changes the sustained rate from `now` on (tokens earned so far at the old rate).
    pub fn set_rate(&mut self, now: Instant, rate_bps: u64) {
        self.refill(now);
        self.rate_bps = rate_bps.max(1);
    }

    /// The sustained rate, bits per second.
    pub fn rate_bps(&self) -> u64 {
        self.rate_bps
    }

    /// Takes `bytes` if available now.
    pub fn try_take(&mut self, now: Instant, bytes: usize) -> bool {
        self.refill(now);
        // A thousandth of a byte of slack absorbs rounding, so that at `ready_at` the take
        // always succeeds.
        if self.tokens + 1e-3 >= bytes as f64 {
            self.tokens -= bytes as f64;
            true
        } else {
            false
        }
    }

    /// When `bytes` will be available.
    pub fn ready_at(&self, bytes: usize) -> Instant {
        let missing = bytes as f64 - self.tokens;
        if missing <= 0.0 {
            return self.last;
        }
        let ns = (missing * 8.0 * 1e9 / self.rate_bps.max(1) as f64).ceil() as u64 + 1;
        self.last + Duration::from_nanos(ns)
    }
}

/// Loss seen through acknowledgements: counts of symbol packets sent and received over the
/// most recent acknowledgement intervals covering at least [`LossEstimator::WINDOW`] packets.
///
/// A plain sliding window, not an exponential average: intervals that contain losses are
/// longer (an acknowledgement always follows a received packet), and weighting each interval
/// by its recency overweights them. Until [`LossEstimator::PRIOR_WEIGHT`] packets have been
/// accounted for, a prior loss rate stands in for the missing evidence, so a connection starts
/// with the redundancy a lossy radio needs instead of discovering it one round trip too late.
///
/// It also keeps how many runs of consecutive losses the receiver reported, for the mean
/// burst length ([`LossEstimator::burst`]).
///
/// Packets may arrive out of their sending order (several paths of a multipath connection,
/// a radio's retries): an acknowledgement interval then counts as lost the packets still on a
/// slower path, and a later one counts them received, more than it sent. Each interval keeps
/// its counts as reported, so the late arrivals cancel the early losses within the window; a
/// window with more received than sent reads as no loss. (Clamping each interval instead
/// would keep every reordering as a loss: a two-path connection with 3% loss read 25%.)
#[derive(Debug, Clone)]
pub struct LossEstimator {
    intervals: std::collections::VecDeque<(u64, u64, u64)>,
    sent: u64,
    received: u64,
    runs: u64,
    prior: f64,
}

impl Default for LossEstimator {
    fn default() -> Self {
        Self::with_prior(0.0)
    }
}

impl LossEstimator {
    /// Packets the estimate spans.
    pub const WINDOW: u64 = 1000;
    /// Packets of evidence that fully replace the prior.
    pub const PRIOR_WEIGHT: u64 = 200;

    /// An estimator that assumes loss rate `prior` until evidence arrives.
    pub fn with_prior(prior: f64) -> Self {
        LossEstimator { intervals: Default::default(), sent: 0, received: 0, runs: 0, prior: prior.clamp(0.0, 1.0) }
    }

    /// Records that of `sent` packets, `received` arrived (runs unknown: each loss its own).
    pub fn record(&mut self, sent: u64, received: u64) {
        self.record_runs(sent, received, sent.saturating_sub(received));
    }

    /// Records that of `sent` packets, `received` arrived, the losses falling in `runs` runs
    /// of consecutive packets.
    pub fn record_runs(&mut self, sent: u64, received: u64, runs: u64) {
        if sent == 0 && received == 0 {
            return;
        }
        self.intervals.push_back((sent, received, runs));
        self.sent += sent;
        self.received += received;
        self.runs += runs;
        while let Some(&(s, r, n)) = self.intervals.front() {
            if self.sent - s < Self::WINDOW {
                break;
            }
            self.sent -= s;
            self.received -= r;
            self.runs -= n;
            self.intervals.pop_front();
        }
    }

    /// Mean length of a loss burst (packets lost per run of losses), at least 1: two runs of
    /// one packet stand in as a prior so that a single long run does not swing it at once.
    pub fn burst(&self) -> f64 {
        let lost = self.lost();
        ((lost as f64 + 2.0) / (self.runs.min(lost) as f64 + 2.0)).max(1.0)
    }

    /// Packets of the window not received.
    fn lost(&self) -> u64 {
        self.sent.saturating_sub(self.received)
    }

    /// Whether the estimate rests on evidence alone (the prior no longer weighs in).
    pub fn measured(&self) -> bool {
        self.sent >= Self::PRIOR_WEIGHT
    }

    /// The current loss rate.
    pub fn loss(&self) -> f64 {
        let lost = self.lost() as f64;
        let missing = Self::PRIOR_WEIGHT.saturating_sub(self.sent) as f64;
        (lost + self.prior * missing) / (self.sent as f64 + missing).max(1.0)
    }
}

/// Repairs to send per source symbol at loss rate `p` with mean loss-burst length `burst`:
/// `p + spread * sqrt(p * burst)`, in `[min, max]`.
///
/// A lost source symbol is released once the repairs received since the first undecoded loss
/// catch up with the losses since then. That race is a random walk drifting at
/// `r (1 - p) - p` per symbol with a spread that grows like `sqrt(p)` for independent losses,
/// so the margin over `p` that keeps its tail (and the 99th-percentile delay) short grows like
/// `sqrt(p)` as well. Losses in bursts of mean length `b` (same mean rate) come as `p / b`
/// runs of `b`: the variance of the losses over a window grows `b`-fold, and so the margin
/// by `sqrt(b)`. With `spread = 0.6` and independent losses: 29% redundancy at 10% loss, 18%
/// at 5%, 7% at 1%; 10% loss in bursts of 3: 44%.
pub fn redundancy(p: f64, burst: f64, spread: f64, min: f64, max: f64) -> f64 {
    let p = p.clamp(0.0, 1.0);
    (p + spread * (p * burst.max(1.0)).sqrt()).clamp(min, max)
}

/// The clock granularity `G` of RFC 6298: the least margin [`RttEstimator::probe_timeout`]
/// allows over the smoothed round trip.
pub const GRANULARITY: Duration = Duration::from_millis(1);

/// Smoothed round-trip time (RFC 6298 style).
#[derive(Debug, Clone)]
pub struct RttEstimator {
    srtt: Option<Duration>,
    rttvar: Duration,
    min: Duration,
    initial: Duration,
    samples: u32,
}

impl RttEstimator {
    pub fn new(initial: Duration) -> Self {
        RttEstimator { srtt: None, rttvar: initial / 2, min: Duration::MAX, initial, samples: 0 }
    }

    pub fn sample(&mut self, rtt: Duration) {
        self.samples = self.samples.saturating_add(1);
        self.min = self.min.min(rtt);
        match self.srtt {
            None => {
                self.srtt = Some(rtt);
                self.rttvar = rtt / 2;
            }
            Some(s) => {
                let diff = s.abs_diff(rtt);
                self.rttvar = (self.rttvar * 3 + diff) / 4;
                self.srtt = Some((s * 7 + rtt) / 8);
            }
        }
    }

    pub fn srtt(&self) -> Duration {
        self.srtt.unwrap_or(self.initial)
    }

    /// Samples taken so far.
    pub fn samples(&self) -> u32 {
        self.samples
    }

    pub fn min_rtt(&self) -> Option<Duration> {
        (self.min != Duration::MAX).then_some(self.min)
    }

    /// How long to wait for an acknowledgement before probing.
    pub fn probe_timeout(&self) -> Duration {
        self.srtt() + (self.rttvar * 4).max(GRANULARITY)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bucket_limits_rate_and_reports_when_ready() {
        let t0 = Instant::ZERO;
        let mut b = TokenBucket::new(8_000_000, 2000, t0); // 1 MB/s
        assert!(b.try_take(t0, 1500));
        assert!(!b.try_take(t0, 1500));
        let at = b.ready_at(1500);
        assert!(at >= t0 + Duration::from_millis(1) && at <= t0 + Duration::from_micros(1001));
        assert!(b.try_take(at, 1500));
    }

    #[test]
    fn loss_estimate_follows_evidence() {
        let mut l = LossEstimator::with_prior(0.2);
        assert_eq!(l.loss(), 0.2, "the prior before any evidence");
        l.record(100, 100);
        assert!((l.loss() - 0.1).abs() < 1e-9, "half evidence, half prior");
        for _ in 0..100 {
            l.record(10, 9);
        }
        assert!((l.loss() - 0.1).abs() < 1e-9);
        for _ in 0..200 {
            l.record(10, 10);
        }
        assert_eq!(l.loss(), 0.0, "old evidence leaves the window");
        l.record(5, 9);
        assert_eq!(l.loss(), 0.0, "more received than sent (reordering) reads as no loss");
    }

    #[test]
    fn late_arrivals_cancel_the_losses_they_seemed() {
        // Two paths: each acknowledgement interval sees 10 sent, 7 of them arrived and 3
        // still on the slower path, which arrive in the next interval. One in 100 is lost.
        let mut l = LossEstimator::default();
        for k in 0..300u64 {
            let late = if k == 0 { 0 } else { 3 };
            let lost = u64::from(k % 10 == 0);
            l.record_runs(10, 7 + late - lost, 1);
        }
        assert!((l.loss() - 0.01).abs() < 0.005, "loss {} (true 0.01)", l.loss());
        assert!(l.burst() >= 1.0 && l.burst() < 1.5, "runs beyond the losses do not shorten bursts below 1");
    }

    #[test]
    fn burst_length_follows_the_runs_reported() {
        let mut l = LossEstimator::default();
        assert_eq!(l.burst(), 1.0, "no evidence: independent losses");
        for _ in 0..100 {
            l.record_runs(10, 7, 1);
        }
        assert!((l.burst() - 3.0).abs() < 0.05, "three losses per run: {}", l.burst());
        for _ in 0..200 {
            l.record(10, 9);
        }
        assert!((l.burst() - 1.0).abs() < 0.05, "old runs leave the window: {}", l.burst());
        l.record_runs(10, 10, 5);
        assert!(l.burst() >= 1.0, "runs beyond the losses are clamped");
    }

    #[test]
    fn redundancy_grows_with_the_square_root_of_loss() {
        assert!((redundancy(0.10, 1.0, 0.6, 0.02, 1.0) - 0.2897).abs() < 1e-3);
        assert!((redundancy(0.01, 1.0, 0.6, 0.02, 1.0) - 0.07).abs() < 1e-9);
        assert_eq!(redundancy(0.0, 1.0, 0.6, 0.02, 1.0), 0.02);
        assert_eq!(redundancy(0.9, 1.0, 0.6, 0.02, 1.0), 1.0);
        assert!((redundancy(0.10, 3.0, 0.6, 0.02, 1.0) - 0.4286).abs() < 1e-3, "bursts need a wider margin");
        assert_eq!(redundancy(0.10, 0.2, 0.6, 0.02, 1.0), redundancy(0.10, 1.0, 0.6, 0.02, 1.0));
    }

    #[test]
    fn rtt_smooths() {
        let mut r = RttEstimator::new(Duration::from_millis(300));
        assert_eq!(r.srtt(), Duration::from_millis(300));
        r.sample(Duration::from_millis(100));
        r.sample(Duration::from_millis(100));
        assert_eq!(r.srtt(), Duration::from_millis(100));
        assert_eq!(r.min_rtt(), Some(Duration::from_millis(100)));
        assert!(r.probe_timeout() >= Duration::from_millis(100));
    }
}
