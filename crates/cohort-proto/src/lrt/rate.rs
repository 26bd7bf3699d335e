//! The rate LRT paces at when it measures the available bandwidth itself.
//!
//! Seed 004 §III-E paces LRT at `β · Bw`, `Bw` the available bandwidth. On a channel a robot
//! team shares, nobody can set `Bw` by hand: it moves with the other stations' traffic, the
//! link rate and the contention. [`RateEstimator`] measures it, one round (about one smoothed
//! round trip) at a time, from what the acknowledgements report:
//!
//! - **delivery rate**: symbol packets the receiver counted (`rx_data`) over the round, times
//!   their wire size, over the round's duration;
//! - **queueing delay**: the smallest round-trip sample of the round minus the smallest of the
//!   last [`MIN_RTT_WINDOW`] (the path's propagation and service time): what queues in front
//!   of the bottleneck add. A round's samples leave out the time the receiver held each
//!   acknowledgement (the ACK's `ack_delay_us`, RFC 9002 §5.3's adjustment, never below the
//!   minimum): a receiver batching acknowledgements (`ack_every` packets or `ack_delay`, 5 ms
//!   by default) holds them longest when packets come slowly, and without the adjustment a
//!   slow sender saw that wait as a queue, backed off, came slower still and saw more of it:
//!   an upload left alone on the channel fell to 0.1 Mbit/s. The minimum itself is taken
//!   from the raw samples, as RFC 9002 does: a peer that overstates its delay can only make
//!   its own sender slower.
//!
//! At the end of each round:
//!
//! - the queue exceeds its target (`queue_target`, at least a quarter of the minimum round
//!   trip): the path is saturated and delivers `Bw` = the round's delivery rate, so the sender
//!   paces at `β · Bw`, leaving `1 − β` for the queue to drain and for other traffic (a
//!   multiplicative decrease to what the bottleneck proved it carries);
//! - in start-up, a round that delivered less than ⅘ of the rate paced the round before (whose
//!   packets it acknowledges) found the bottleneck as well, before its queue shows in the
//!   round trips (BBR leaves start-up on the same evidence, a delivery rate that stops growing
//!   with the sending rate): the same back-off. Doubling until the queue shows overshoots by
//!   up to a doubling, and a round later the queue holds a round trip of the excess. What the
//!   path loses at random (the connection's loss estimate) is taken off the rate paced
//!   before the comparison: at 20% loss every round delivered less than ⅘ of what was sent
//!   and left start-up below the application's own rate. And the shortfall counts only while
//!   the round trips rise (the round's largest sample a quarter of the queue target above the
//!   minimum): a sender that outruns its bottleneck queues the excess, and the later packets
//!   of the round show it, while a round that is short by chance (one round's count is coarse:
//!   the receiver acknowledges every 8 packets or 5 ms; at 1 ms messages over 25 ms one way
//!   single rounds read from 40% to 140% of the pace) keeps flat round trips. Only a
//!   round after a full one can judge so: the first round spans the handshake and the first
//!   round trip, in which nothing sent can have been acknowledged, and the round after an
//!   application-limited one acknowledges packets that were never paced at the rate (before
//!   this rule, every connection left start-up in its first round at a tenth of its initial
//!   rate, and at 25-100 ms one way took seconds of additive increase to reach 8 Mbit/s);
//! - otherwise, if the sender had data waiting (not application-limited): in start-up the rate
//!   doubles each round (from [`INITIAL_BPS`]), afterwards it grows by one packet per round
//!   (an additive increase: two flows sharing a bottleneck converge to equal shares);
//! - an application-limited round leaves the rate alone, queue or not: its delivery rate says
//!   nothing about the path, and a sender that had nothing waiting did not build the queue (a
//!   control loop that backed off below its own message rate would queue its messages in its
//!   own send buffer instead).
//!
//! The operator's rate (`rate_bps · rate_share`) stays the cap, and the rate never falls below
//! [`MIN_BPS`]. Random loss is not a congestion signal here (LRT's redundancy answers it);
//! only delay is, as in delay-based controllers (Vegas, LEDBAT, BBR's `inflight` bound).

use cohort_time::Instant;
use std::time::Duration;

/// The rate a connection starts from before its first round.
pub const INITIAL_BPS: f64 = 2e6;
/// The rate never falls below this.
pub const MIN_BPS: f64 = 64e3;
/// How long the smallest round-trip sample stands for the path's base delay.
pub const MIN_RTT_WINDOW: Duration = Duration::from_secs(10);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Startup,
    Steady,
}

/// Per-connection bandwidth estimate and pacing rate. See the [module docs](self).
#[derive(Debug, Clone)]
pub struct RateEstimator {
    cap_bps: f64,
    share: f64,
    queue_target: Duration,
    rate_bps: f64,
    /// The rate paced during the previous round: the packets a round acknowledges left then.
    prev_rate_bps: f64,
    /// The previous round was a whole round with data waiting, so the round after it
    /// acknowledges packets paced at `prev_rate_bps`.
    prev_full: bool,
    mode: Mode,
    round_start: Instant,
    round_delivered: u64,
    round_min_rtt: Option<Duration>,
    /// The round's largest sample (less the receiver's hold): whether its round trips rose.
    round_max_rtt: Duration,
    min_rtt: Option<(Duration, Instant)>,
    /// The last bandwidth the path proved when saturated, bits per second.
    bw_bps: Option<f64>,
    rounds: u64,
    backoffs: u64,
}

/// What one acknowledgement tells the estimator.
#[derive(Debug, Clone, Copy)]
pub struct AckSample {
    pub now: Instant,
    /// Round-trip sample of this acknowledgement, if it gave one.
    pub rtt: Option<Duration>,
    /// How long the receiver says it held the acknowledgement.
    pub ack_delay: Duration,
    /// The connection's estimate of random loss (a fraction of symbol packets): what a path
    /// loses by itself is not a shortfall of its bandwidth.
    pub loss: f64,
    /// Symbol packets the receiver has counted in all.
    pub delivered: u64,
    /// Wire bytes of one symbol packet.
    pub packet_bytes: usize,
    /// Smoothed round trip: how long a round lasts.
    pub srtt: Duration,
    /// Nothing waited to be sent: the round's delivery rate is the application's.
    pub app_limited: bool,
}

impl RateEstimator {
    /// An estimator pacing at most `cap_bps` (the operator's rate times `share`), backing off
    /// to `share` (β) of the measured bandwidth when the queue exceeds `queue_target`.
    pub fn new(cap_bps: f64, share: f64, queue_target: Duration, now: Instant) -> Self {
        let cap_bps = cap_bps.max(MIN_BPS);
        RateEstimator {
            cap_bps,
            share: share.clamp(0.05, 1.0),
            queue_target,
            rate_bps: INITIAL_BPS.min(cap_bps),
            prev_rate_bps: INITIAL_BPS.min(cap_bps),
            prev_full: false,
            mode: Mode::Startup,
            round_start: now,
            round_delivered: 0,
            round_min_rtt: None,
            round_max_rtt: Duration::ZERO,
            min_rtt: None,
            bw_bps: None,
            rounds: 0,
            backoffs: 0,
        }
    }

    /// The pacing rate, bits per second.
    pub fn rate_bps(&self) -> f64 {
        self.rate_bps
    }

    /// The bandwidth the path last proved when saturated (bits per second), if it has been.
    pub fn bandwidth_bps(&self) -> Option<f64> {
        self.bw_bps
    }

    /// Rounds completed and how many of them backed off.
    pub fn rounds(&self) -> (u64, u64) {
        (self.rounds, self.backoffs)
    }

    /// The path's round-trip time without queue: the windowed minimum (zero before a sample).
    fn path_min(&self) -> Duration {
        self.min_rtt.map_or(Duration::ZERO, |(m, _)| m)
    }

    /// Takes one acknowledgement; returns the new pacing rate when a round ended.
    pub fn on_ack(&mut self, s: AckSample) -> Option<f64> {
        if let Some(rtt) = s.rtt {
            match self.min_rtt {
                Some((m, at)) if rtt > m && s.now.saturating_duration_since(at) < MIN_RTT_WINDOW => {}
                _ => self.min_rtt = Some((rtt, s.now)),
            }
            let adjusted = rtt.saturating_sub(s.ack_delay).max(self.path_min());
            self.round_min_rtt = Some(self.round_min_rtt.map_or(adjusted, |m| m.min(adjusted)));
            self.round_max_rtt = self.round_max_rtt.max(adjusted);
        }
        let elapsed = s.now.saturating_duration_since(self.round_start);
        if s.delivered < self.round_delivered {
            // A new connection's counter, or a reordered acknowledgement: start the round over.
            self.round_delivered = s.delivered;
        }
        if elapsed < s.srtt.max(Duration::from_millis(1)) {
            return None;
        }
        let delivered_bps =
            (s.delivered - self.round_delivered) as f64 * s.packet_bytes as f64 * 8.0 / elapsed.as_secs_f64();
        let queue = self.round_min_rtt.map_or(Duration::ZERO, |r| r.saturating_sub(self.path_min()));
        let target = self.queue_target.max(self.path_min() / 4);
        self.rounds += 1;
        let paced = std::mem::replace(&mut self.prev_rate_bps, self.rate_bps);
        let prev_full = std::mem::replace(&mut self.prev_full, !s.app_limited);
        let expected = paced * (1.0 - s.loss.clamp(0.0, 0.9));
        let rising = self.round_max_rtt.saturating_sub(self.path_min()) > target / 4;
        let short = self.mode == Mode::Startup && prev_full && rising && delivered_bps < 0.8 * expected;
        if (queue > target || short) && !s.app_limited {
            self.backoffs += 1;
            self.mode = Mode::Steady;
            self.bw_bps = Some(delivered_bps);
            self.rate_bps = (self.share * delivered_bps).min(self.rate_bps);
        } else if !s.app_limited {
            self.rate_bps = match self.mode {
                Mode::Startup => self.rate_bps * 2.0,
                Mode::Steady => self.rate_bps + s.packet_bytes as f64 * 8.0 / elapsed.as_secs_f64(),
            };
        }
        self.rate_bps = self.rate_bps.clamp(MIN_BPS, self.cap_bps);
        if self.rate_bps >= self.cap_bps {
            self.mode = Mode::Steady;
        }
        self.round_start = s.now;
        self.round_delivered = s.delivered;
        self.round_min_rtt = None;
        self.round_max_rtt = Duration::ZERO;
        Some(self.rate_bps)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(x: u64) -> Duration {
        Duration::from_millis(x)
    }

    /// Feeds one round of `delivered_pkts` packets ending at `at` with round trip `rtt`.
    fn round(e: &mut RateEstimator, at: Instant, total: &mut u64, pkts: u64, rtt: Duration, limited: bool) -> f64 {
        held_round(e, at, total, pkts, rtt, Duration::ZERO, limited)
    }

    /// [`round`] whose acknowledgement the receiver says it held for `held`.
    fn held_round(
        e: &mut RateEstimator,
        at: Instant,
        total: &mut u64,
        pkts: u64,
        rtt: Duration,
        held: Duration,
        limited: bool,
    ) -> f64 {
        *total += pkts;
        e.on_ack(sample(at, rtt, held, *total, limited)).expect("a round ended")
    }

    /// An acknowledgement of 1250-byte packets, `delivered` in all, with a 10 ms smoothed RTT.
    fn sample(now: Instant, rtt: Duration, held: Duration, delivered: u64, limited: bool) -> AckSample {
        AckSample {
            now,
            rtt: Some(rtt),
            ack_delay: held,
            loss: 0.0,
            delivered,
            packet_bytes: 1250,
            srtt: ms(10),
            app_limited: limited,
        }
    }

    #[test]
    fn starts_up_doubling_then_backs_off_to_beta_times_what_the_path_delivers() {
        let mut e = RateEstimator::new(100e6, 0.9, ms(5), Instant::ZERO);
        let (mut t, mut total) = (Instant::ZERO, 0);
        let mut rates = vec![];
        for _ in 0..4 {
            t += ms(10);
            rates.push(round(&mut e, t, &mut total, 10, ms(10), false));
        }
        assert_eq!(rates, vec![4e6, 8e6, 16e6, 32e6], "doubling while the queue stays short");
        // The path saturates at 20 Mbit/s (20 packets of 1250 B per 10 ms) and a queue builds.
        t += ms(10);
        let r = round(&mut e, t, &mut total, 20, ms(30), false);
        assert!((r - 18e6).abs() < 1.0, "β · Bw = 0.9 × 20 Mbit/s, got {r}");
        assert_eq!(e.bandwidth_bps(), Some(20e6));
        // Steady: one packet per round more.
        t += ms(10);
        let r2 = round(&mut e, t, &mut total, 18, ms(10), false);
        assert!((r2 - (18e6 + 1e6)).abs() < 1.0, "{r2}");
        assert_eq!(e.rounds(), (6, 1));
    }

    #[test]
    fn start_up_ends_when_the_path_delivers_less_than_was_paced_before_its_queue_shows() {
        let mut e = RateEstimator::new(100e6, 0.9, ms(5), Instant::ZERO);
        let (mut t, mut total) = (Instant::ZERO, 0);
        let mut rates = vec![];
        // A 10 Mbit/s path (10 packets of 1250 B per 10 ms) whose round trips show no queue
        // yet: the rounds paced at 2, 4 and 8 Mbit/s delivered 10 (a first burst) or what
        // they sent; the round paced at 16 delivers 10.
        for pkts in [10, 4, 8, 10] {
            t += ms(10);
            rates.push(round(&mut e, t, &mut total, pkts, ms(10), false));
        }
        assert_eq!(rates[..3], [4e6, 8e6, 16e6], "doubling while the path delivers what was paced");
        // Short with flat round trips: chance (or loss), not the bottleneck.
        let mut flat = e.clone();
        assert_eq!(round(&mut flat, t + ms(10), &mut total.clone(), 10, ms(10), false), 64e6);
        // Short while the round's later samples rise (3 ms, under the 5 ms target): the excess
        // is queueing.
        t += ms(10);
        let r = round(&mut e, t, &mut total, 10, ms(13), false);
        assert!((r - 9e6).abs() < 1.0, "β · Bw = 0.9 × 10 Mbit/s, got {r}");
        assert_eq!(e.bandwidth_bps(), Some(10e6));
        assert_eq!(e.rounds(), (5, 1));
    }

    #[test]
    fn an_application_limited_round_leaves_the_rate_and_the_cap_holds() {
        let mut e = RateEstimator::new(5e6, 0.9, ms(5), Instant::ZERO);
        let (mut t, mut total) = (Instant::ZERO, 0);
        t += ms(10);
        assert_eq!(round(&mut e, t, &mut total, 1, ms(10), true), INITIAL_BPS);
        t += ms(10);
        assert_eq!(round(&mut e, t, &mut total, 10, ms(10), false), 4e6);
        t += ms(10);
        assert_eq!(round(&mut e, t, &mut total, 10, ms(10), false), 5e6, "the operator's cap");
    }

    #[test]
    fn no_round_ends_before_a_round_trip_and_the_floor_holds() {
        let mut e = RateEstimator::new(100e6, 0.9, ms(5), Instant::ZERO);
        assert_eq!(e.on_ack(sample(Instant::ZERO + ms(3), ms(10), Duration::ZERO, 5, false)), None);
        let (mut t, mut total) = (Instant::ZERO + ms(10), 5);
        assert_eq!(round(&mut e, t, &mut total, 0, ms(10), false), 4e6);
        // A saturated round that delivered nothing: the floor, not zero.
        t += ms(10);
        assert_eq!(round(&mut e, t, &mut total, 0, ms(200), false), MIN_BPS);
    }

    #[test]
    fn the_time_a_receiver_held_its_acknowledgement_is_no_queue() {
        // 10 ms of path; the receiver's batching holds each acknowledgement 6 ms (beyond the
        // 5 ms queue target), so the round trips read 16 ms. The path delivers more than is
        // paced: only the round trips could make the sender back off.
        let run = |reported: bool| {
            let mut e = RateEstimator::new(100e6, 0.9, ms(5), Instant::ZERO);
            let (mut t, mut total) = (Instant::ZERO, 0);
            t += ms(10);
            round(&mut e, t, &mut total, 1000, ms(10), false);
            let mut last = 0.0;
            for _ in 0..5 {
                t += ms(16);
                let held = if reported { ms(6) } else { Duration::ZERO };
                last = held_round(&mut e, t, &mut total, 1000, ms(16), held, false);
            }
            (last, e.rounds().1)
        };
        assert_eq!(run(true), (100e6, 0), "a held acknowledgement is no queue: start-up reaches the cap");
        let (_, backoffs) = run(false);
        assert!(backoffs > 0, "unreported, the same wait reads as a queue");
    }

    #[test]
    fn the_first_round_and_one_after_an_idle_round_cannot_end_start_up() {
        let mut e = RateEstimator::new(100e6, 0.9, ms(5), Instant::ZERO);
        // A first sample inside the round: the path's 10 ms.
        assert_eq!(e.on_ack(sample(Instant::ZERO + ms(5), ms(10), Duration::ZERO, 0, false)), None);
        let (mut t, mut total) = (Instant::ZERO, 0);
        // Every later round trip reads 12 ms (rising, under the target). The first round spans
        // the handshake: one packet acknowledged.
        t += ms(50);
        assert_eq!(round(&mut e, t, &mut total, 1, ms(12), false), 4e6, "start-up goes on");
        // An application-limited round, then one that delivers less than was paced: the
        // packets it acknowledges left while the sender had nothing to send.
        t += ms(10);
        assert_eq!(round(&mut e, t, &mut total, 1, ms(12), true), 4e6);
        t += ms(10);
        assert_eq!(round(&mut e, t, &mut total, 2, ms(12), false), 8e6, "start-up goes on");
        // After a full round, the shortfall counts.
        t += ms(10);
        let r = round(&mut e, t, &mut total, 2, ms(12), false);
        assert!((r - 1.8e6).abs() < 1.0, "β · 2 Mbit/s, got {r}");
        assert_eq!(e.rounds(), (4, 1));
    }
}
