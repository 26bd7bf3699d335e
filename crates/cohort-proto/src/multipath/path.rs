//! One path's state: what the sender measures (window, delays, service time, loss) and what
//! the receiver reports.

use super::balance::PathDelay;
use super::wire::PathAck;
use cohort_time::Instant;
use std::collections::VecDeque;
use std::time::Duration;

/// Service-time samples kept per path: "the previous 200 packets" of seed 001 §3.2.
pub const GAMMA_SAMPLES: usize = 200;
/// Sent packets remembered per path (for round trips and the in-flight count).
const SENT_LOG: usize = 1 << 14;

/// How the window grows on acknowledgements.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Growth {
    /// LD-MPSP (Algorithm 3): `w ← w + ((s − q)/τ)/w` per acknowledged packet, `q` the
    /// path's queueing delay and `s` the set point: `τ` in Algorithm 3, lower where τ is a
    /// bound most packets must meet (`MpConfig::tau_share`, [`super::bound`]).
    DelayTarget { tau: Duration, set: Duration },
    /// Reno-like, as an uncoupled MPTCP subflow: `w ← w + 1/w`.
    Reno,
}

/// The sender's view of one path.
#[derive(Debug, Clone)]
pub struct PathTx {
    pub up: bool,
    /// Congestion window in packets (`w_i` of Algorithm 3).
    pub cwnd: f64,
    pub next_seq: u32,
    /// Sequence and send time of packets not yet known delivered or lost.
    sent: VecDeque<(u32, Instant)>,
    /// Cumulative delivered and lost counts (from the receiver's reports).
    pub delivered: u64,
    pub lost: u64,
    last_received: Option<u32>,
    /// Set by [`PathTx::fail`]: the next report re-synchronises `last_received`, and counts
    /// as new only packets sent since.
    resync: bool,
    /// Set by [`PathTx::fail`]: the path may come back on another route, and its first
    /// flight measures the delays afresh (see [`Relearn`]).
    relearn: Option<Relearn>,
    /// Highest sequence the receiver reported.
    highest: Option<u32>,
    pub srtt: Option<Duration>,
    /// Round-trip variation (RFC 6298's `RTTVAR`).
    pub rttvar: Duration,
    pub min_rtt: Option<Duration>,
    /// One-way delay samples relative to the first (offset-free differences), µs.
    owd_first: Option<u32>,
    owd_base_rel: i64,
    /// The path's queueing delay: see [`queueing_delay`].
    pub queueing: Duration,
    /// The queueing delay of the report before: the packets a report counts left between
    /// the two, and met a queue between them.
    queueing_before: Duration,
    /// The largest queueing delay seen lately (decays by 1% a report): how deep the path's
    /// buffer is, as far as the sender can tell.
    queueing_peak: Duration,
    /// Service time per packet, seconds (`γ` samples), and the last report it came from.
    gamma: VecDeque<f64>,
    last_arrival: Option<(u32, u32)>,
    /// Loss rate, an average over reports.
    pub loss: f64,
    /// The loss rate while the queue is high (at or near where it could overflow) and while
    /// it is low, each an average over reports, and the packets each has seen: see
    /// [`PathTx::congestion_loss`].
    loss_high: LossAverage,
    loss_low: LossAverage,
    /// When a report last arrived, and when the window last halved (once per round trip).
    pub last_report: Option<Instant>,
    last_halving: Option<Instant>,
    /// Slow start: +1 per acknowledged packet until the first loss or until the queue passes
    /// half the delay target.
    pub slow_start: bool,
    /// Where slow start ends at the latest (`ssthresh`): unbounded at first; after a failure
    /// the window the path had before it (see [`PathTx::fail`]).
    slow_start_cap: f64,
    pub sent_total: u64,
    pub bytes_sent: u64,
    pub clones_sent: u64,
    /// The path's rate as the layer below allocated it (bit/s, > 0), if the driver knows it:
    /// see [`PathTx::delay_model`] and `MpConnection::set_rate_hint`.
    pub rate_hint_bps: Option<f64>,
}

impl PathTx {
    pub fn new(initial_cwnd: f64) -> Self {
        PathTx {
            up: true,
            cwnd: initial_cwnd,
            next_seq: 0,
            sent: VecDeque::new(),
            delivered: 0,
            lost: 0,
            last_received: None,
            resync: false,
            relearn: None,
            highest: None,
            srtt: None,
            rttvar: Duration::ZERO,
            min_rtt: None,
            owd_first: None,
            owd_base_rel: i64::MAX,
            queueing: Duration::ZERO,
            queueing_peak: Duration::ZERO,
            gamma: VecDeque::new(),
            last_arrival: None,
            loss: 0.0,
            queueing_before: Duration::ZERO,
            loss_high: LossAverage::default(),
            loss_low: LossAverage::default(),
            last_report: None,
            last_halving: None,
            slow_start: true,
            slow_start_cap: f64::INFINITY,
            sent_total: 0,
            bytes_sent: 0,
            clones_sent: 0,
            rate_hint_bps: None,
        }
    }

    /// Packets sent and neither reported delivered nor declared lost.
    pub fn in_flight(&self) -> usize {
        self.sent.len()
    }

    /// When the oldest packet in flight left.
    pub fn oldest_in_flight(&self) -> Option<Instant> {
        self.sent.front().map(|s| s.1)
    }

    /// Whether the window has room for one more packet (up or not).
    pub fn window_open(&self) -> bool {
        (self.in_flight() as f64) < self.cwnd.floor().max(1.0)
    }

    /// Records a packet sent now; returns its sequence number.
    pub fn on_send(&mut self, now: Instant, bytes: usize, clone: bool) -> u32 {
        let seq = self.next_seq;
        self.next_seq = self.next_seq.wrapping_add(1);
        if self.sent.len() == SENT_LOG {
            // A path that never reports: its oldest packet counts as lost.
            self.sent.pop_front();
            self.lost += 1;
        }
        self.sent.push_back((seq, now));
        self.sent_total += 1;
        self.bytes_sent += bytes as u64;
        self.clones_sent += u64::from(clone);
        seq
    }

    /// `D_i`, `γ_i`, `u_i` for delay balancing (see `balance`), with defaults until measured:
    /// half the smallest round trip plus the queueing delay, and the service time's level and
    /// variability over the last 200 samples.
    ///
    /// A sample is the time between two reports' last arrivals per packet delivered. It is the
    /// service time only while packets queue at the path; when the sender left the path idle
    /// (a small share, a pause) the gap includes the idle time, and a path the scheduler uses
    /// little would look slow and be used less still. Packets cannot arrive closer than the
    /// path serves them, so `γ_i` is the smallest sample (as BBR keeps the largest delivery
    /// rate rather than the mean), and `u_i` (Eq. 9, covariances of neighbouring packets only:
    /// `u²·w ≈ w·Var + 2·(w − 1)·cov₁`, so per √packet `u ≈ √(Var + 2·cov₁)`) uses the samples
    /// within twice that level: longer gaps are idle time, not the path's variability.
    ///
    /// With a rate hint ([`PathTx::rate_hint_bps`]: the throughput `θ` the access point's
    /// allocation gives this path this round, seed 001 §3.2) the service time is the hint's
    /// instead: `γ_i = P_m^i = size/θ` with `size` the path's mean datagram so far (1250 bytes
    /// before the first), and `u_i` the measured variability (0 until measured).
    pub fn delay_model(&self, default_rtt: Duration) -> PathDelay {
        let m = self.measured_model(default_rtt);
        match self.rate_hint_bps {
            Some(rate) => {
                let bytes = if self.sent_total > 0 { self.bytes_sent as f64 / self.sent_total as f64 } else { 1250.0 };
                PathDelay { gamma: bytes * 8.0 / rate, ..m }
            }
            None => m,
        }
    }

    /// [`PathTx::delay_model`] from measurements alone.
    fn measured_model(&self, default_rtt: Duration) -> PathDelay {
        let base = self.min_rtt.unwrap_or(default_rtt).as_secs_f64() / 2.0 + self.queueing.as_secs_f64();
        if self.gamma.len() < 8 {
            return PathDelay { base, gamma: 1e-4, u: 0.0 };
        }
        let mut sorted: Vec<f64> = self.gamma.iter().copied().collect();
        sorted.sort_by(f64::total_cmp);
        let level = sorted[0].max(1e-7);
        let busy: Vec<f64> = self.gamma.iter().copied().filter(|&g| g <= 2.0 * level).collect();
        let n = busy.len();
        if n < 2 {
            return PathDelay { base, gamma: level, u: 0.0 };
        }
        let mean = busy.iter().sum::<f64>() / n as f64;
        let var = busy.iter().map(|g| (g - mean).powi(2)).sum::<f64>() / (n - 1) as f64;
        let cov1 =
            busy.iter().zip(busy.iter().skip(1)).map(|(a, b)| (a - mean) * (b - mean)).sum::<f64>() / (n - 1) as f64;
        PathDelay { base, gamma: level, u: (var + 2.0 * cov1).max(0.0).sqrt() }
    }

    /// A receiver's report on this path, arriving at `now`. Updates delays, service time and
    /// loss, and applies Algorithm 3 to the window; returns (packets newly delivered, newly lost).
    pub fn on_report(&mut self, now: Instant, r: &PathAck, growth: Growth) -> (u64, u64) {
        self.last_report = Some(now);
        self.up = true;
        // The first report after a failure counts packets from before it, already counted
        // lost with it (and its delay is theirs when its highest is one of them): of what it
        // counts, only packets still in flight up to its highest can be new.
        let resync = std::mem::take(&mut self.resync);
        if !resync && self.last_received.is_some_and(|p| r.received.wrapping_sub(p) > u32::MAX / 2) {
            return (0, 0); // an older report, overtaken
        }
        let counted = match self.last_received {
            Some(prev) => u64::from(r.received.wrapping_sub(prev)),
            None => u64::from(r.received),
        };
        let newly = if resync {
            let through = self.sent.iter().take_while(|&&(s, _)| seq_through(s, r.highest)).count();
            counted.min(through as u64)
        } else {
            counted
        };
        // Packets from before the failure arriving after it: the path was slow, not out, and
        // what it carries now queued behind them. Its first flight measures no route.
        if !resync && counted > 0 && self.relearn.is_some_and(|l| seq_before(r.highest, l.from_seq)) {
            self.relearn = None;
        }
        self.last_received = Some(r.received);
        // The window grows only while it limits the sender (RFC 7661): a path carrying a few
        // acknowledgements must not earn a window it never used.
        let window_limited = self.sent.len() as f64 >= self.cwnd / 2.0;
        if self.highest.is_none_or(|h| r.highest.wrapping_sub(h) < u32::MAX / 2) {
            self.highest = Some(r.highest);
        }
        // Service time: arrivals between reports per packet delivered (a report with nothing
        // new, the answer to a probe, says nothing of rate).
        if newly > 0 {
            if let Some((prev_arrival, prev_rx)) = self.last_arrival {
                let dt = f64::from(r.arrival_us.wrapping_sub(prev_arrival)) / 1e6;
                let dn = f64::from(r.received.wrapping_sub(prev_rx));
                if dn > 0.0 && dt > 0.0 && dt < 10.0 {
                    if self.gamma.len() == GAMMA_SAMPLES {
                        self.gamma.pop_front();
                    }
                    self.gamma.push_back(dt / dn);
                }
            }
            self.last_arrival = Some((r.arrival_us, r.received));
        }
        // Round trip of the highest packet, less the receiver's hold.
        let mut rtt_queue = None;
        let first = *self.owd_first.get_or_insert(r.owd_raw_us);
        let rel = i64::from(r.owd_raw_us.wrapping_sub(first) as i32);
        if let Some(&(_, at)) = self.sent.iter().find(|(s, _)| *s == r.highest) {
            let rtt = now.saturating_duration_since(at).saturating_sub(Duration::from_micros(u64::from(r.held_us)));
            if newly > 0 {
                let floor = match growth {
                    Growth::DelayTarget { tau, .. } => tau.mul_f64(super::bound::FLOOR),
                    Growth::Reno => Duration::ZERO,
                };
                self.relearn_bases(now, r.highest, at, (rel, rtt), floor);
            }
            let min_rtt = *self.min_rtt.insert(self.min_rtt.map_or(rtt, |m| m.min(rtt)));
            rtt_queue = Some(rtt - min_rtt);
            // RFC 6298 §2: RTTVAR ← ¾·RTTVAR + ¼·|SRTT − R|, SRTT ← ⅞·SRTT + ⅛·R.
            self.rttvar = match self.srtt {
                Some(s) => (self.rttvar * 3 + s.abs_diff(rtt)) / 4,
                None => rtt / 2,
            };
            self.srtt = Some(self.srtt.map_or(rtt, |s| (s * 7 + rtt) / 8));
        }
        // A report with nothing new says nothing of delay either.
        if newly > 0 {
            self.owd_base_rel = self.owd_base_rel.min(rel);
            self.queueing_before = self.queueing;
            let owd_queue = Duration::from_micros((rel - self.owd_base_rel).max(0) as u64);
            self.queueing = queueing_delay(owd_queue, rtt_queue, self.rttvar * 4);
            self.queueing_peak = self.queueing.max(self.queueing_peak.mul_f64(0.99));
        }
        // Everything up to the highest reported is out of flight (a path keeps its order);
        // of those, the ones the receiver did not count are lost.
        let (out, out_by_mark) = self.out_of_flight(Some(r.highest), r.probe_mark);
        let newly_lost = out.saturating_sub(newly) + out_by_mark;
        self.delivered += newly;
        self.lost += newly_lost;
        self.loss = blend(self.loss, newly, newly_lost, LOSS_HORIZON);
        let level = self.queue_level(growth);
        let high = level == Some(true);
        match level {
            Some(true) => self.loss_high.add(newly, newly_lost, LOSS_HORIZON),
            Some(false) => self.loss_low.add(newly, newly_lost, CHANNEL_HORIZON),
            None => {}
        }
        // Algorithm 3: grow per acknowledged packet, halve on loss (once per round trip).
        // Seed 001 gives no start-up; Cohort starts in slow start (+1 per acknowledged packet,
        // as TCP and LEDBAT do) until the first loss or until the queue passes half of the set
        // point.
        let alpha = match growth {
            Growth::DelayTarget { tau, set } => {
                let (tau, set, q) = (tau.as_secs_f64().max(1e-6), set.as_secs_f64(), self.queueing.as_secs_f64());
                if newly > 0 && q > set / 2.0 {
                    self.slow_start = false;
                }
                ((set - q) / tau).clamp(-1.0, 1.0)
            }
            Growth::Reno => 1.0,
        };
        for _ in 0..newly {
            let step = if self.slow_start { 1.0 } else { alpha / self.cwnd };
            if window_limited || step < 0.0 {
                self.cwnd = (self.cwnd + step).max(2.0);
            }
            if self.cwnd >= self.slow_start_cap {
                self.slow_start = false;
            }
        }
        // Loss: Algorithm 3 halves the window, once per round trip. Reno windows (the
        // baselines) halve on every loss event, as MPTCP's subflows do; LD-MPSP's halve only
        // for a congestion loss (see `congestion_loss`).
        if newly_lost > 0 && (growth == Growth::Reno || (high && self.congestion_loss(growth))) {
            self.slow_start = false;
            let rtt = self.srtt.unwrap_or(Duration::from_millis(100));
            if self.last_halving.is_none_or(|t| now.saturating_duration_since(t) >= rtt) {
                self.cwnd = (self.cwnd / 2.0).max(2.0);
                self.last_halving = Some(now);
            }
        }
        (newly, newly_lost)
    }

    /// While a returning path's first flight reports (see [`Relearn`]): a report on packet
    /// `seq`, sent at `sent_at`, measured the relative one-way delay `rel` (µs) and the round
    /// trip `rtt`. Moves the bases up to what the new route allows, if it is longer by more
    /// than `floor` (the delay target's set point at its lowest).
    fn relearn_bases(
        &mut self,
        now: Instant,
        seq: u32,
        sent_at: Instant,
        (rel, rtt): (i64, Duration),
        floor: Duration,
    ) {
        let Some(l) = self.relearn.as_mut() else { return };
        if seq_before(seq, l.from_seq) {
            return; // sent before the failure: its delays are the old route's
        }
        let first_flight = l.first_report.is_none_or(|t| sent_at <= t);
        if first_flight {
            l.first_report.get_or_insert(now);
            // Packets sent since the failure before this one may have queued ahead of it,
            // each for at most a service time: take that much off, so the new bases are never
            // above the route's own delays (an error that way would let the queue grow by as
            // much).
            let ahead = Duration::from_secs_f64(f64::from(seq.wrapping_sub(l.from_seq)) * l.gamma);
            let owd = rel.saturating_sub(i64::try_from(ahead.as_micros()).unwrap_or(i64::MAX));
            l.owd_rel = l.owd_rel.min(owd);
            let rtt = rtt.saturating_sub(ahead);
            l.rtt = Some(l.rtt.map_or(rtt, |m| m.min(rtt)));
        }
        // A packet's one-way delay includes its transmission, a service time `γ`; the old base
        // may be from a faster time (the smallest delay ever, perhaps at the path's best rate),
        // and a slower rate lengthens every delay by its longer transmission: that is the
        // path's service, not a new route, and stays read as queue as before the failure
        // (the delay a message meets). So the decision waits for the new service time (two
        // reports since the return), allows for all of it, and a first flight that ends
        // before it keeps the old bases.
        let gamma = self.gamma.iter().copied().reduce(f64::min);
        if gamma.is_none() && first_flight {
            return;
        }
        let Some(l) = self.relearn.take() else { return };
        let Some(gamma) = gamma else { return };
        let tolerance = Relearn::TOLERANCE.max(floor) + Duration::from_secs_f64(gamma.clamp(0.0, 10.0));
        // The decision rests on the one-way delay, the forward route the queue is read on. A
        // returning path's round trip carries the reverse direction's queue too (its reports
        // wait behind what the receiver sends; in the beams bench's drives a round trip read
        // 49 ms against the 15 ms of the same route): it follows the forward change, between
        // once (the reverse route unchanged) and twice (both directions longer alike).
        if l.owd_rel > l.old_owd_rel.saturating_add(i64::try_from(tolerance.as_micros()).unwrap_or(i64::MAX)) {
            self.owd_base_rel = l.owd_rel;
            let longer = Duration::from_micros(u64::try_from(l.owd_rel - l.old_owd_rel).unwrap_or(0));
            if let Some(old) = l.old_rtt {
                let new = l.rtt.unwrap_or(old).clamp(old + longer, old + longer * 2);
                // The window from before carried the path's rate over the old round trip;
                // the same rate over the longer one takes it in proportion.
                self.slow_start_cap = l.cap * new.as_secs_f64() / old.as_secs_f64().max(1e-6);
                self.min_rtt = Some(new);
            }
            // Slow start may have ended on the old base's reading, the route's length taken
            // for queue: it goes on up to the cap.
            self.slow_start = self.cwnd < self.slow_start_cap;
        }
        // Otherwise the old bases stay (lowered by any smaller delay since): they rest on
        // more samples. From here the bases only fall.
    }

    /// The raw one-way delay of the path's fastest packet (the receiver's clock less the
    /// sender's, µs, wrapping), once one was measured: comparable between the paths of one
    /// connection, whose packets all carry one clock each way.
    pub fn owd_raw_base(&self) -> Option<u32> {
        let first = self.owd_first?;
        Some(first.wrapping_add(i32::try_from(self.owd_base_rel).ok()? as u32))
    }

    /// Takes out of flight the packets up to `highest` (reported received or lost) and, of
    /// the rest, those sent before the probe of `mark` a report answers: the probe overtook
    /// nothing, so they are lost. Returns how many of each.
    fn out_of_flight(&mut self, highest: Option<u32>, mark: u32) -> (u64, u64) {
        let (mut out, mut out_by_mark) = (0u64, 0u64);
        while let Some(&(s, _)) = self.sent.front() {
            if highest.is_some_and(|h| seq_through(s, h)) {
                out += 1;
            } else if mark != super::wire::NO_MARK && seq_before(s, mark) {
                out_by_mark += 1;
            } else {
                break;
            }
            self.sent.pop_front();
        }
        (out, out_by_mark)
    }

    /// The receiver answered a probe of `mark` with an empty report: nothing sent on the path
    /// has arrived yet, yet the probe and its answer crossed it, so the path is up again.
    /// What left before the probe is lost; delays, rate and window stay as they were.
    pub fn on_empty_report(&mut self, now: Instant, mark: u32) {
        self.last_report = Some(now);
        self.up = true;
        let (_, lost) = self.out_of_flight(None, mark);
        self.lost += lost;
        self.loss = blend(self.loss, 0, lost, LOSS_HORIZON);
    }

    /// Where the queue stands for the loss discriminator: `Some(true)` where a buffer could
    /// overflow (at the target τ, or past ¾ of the deepest queue seen lately, for a buffer
    /// shallower than τ; at least 1 ms), `Some(false)` where none could (below half that
    /// at this report and the one before, between which the packets it counts were queued),
    /// `None` between. (A first version asked for τ/2 to be high: a buffer shallower than
    /// that never counted as high, and the window grew without bound while the buffer dropped
    /// most of it. A second had no band between the two: a full buffer's queue swings by a
    /// few milliseconds, its dips counted as low, the overflow losses they reported raised the
    /// "channel" rate with the high-queue rate, and at 5-10% channel loss the window again
    /// grew until half the datagrams were dropped.) Reno windows have no target: always high.
    fn queue_level(&self, growth: Growth) -> Option<bool> {
        match growth {
            Growth::DelayTarget { tau, .. } => {
                let high = tau.min(self.queueing_peak.mul_f64(0.75)).max(Duration::from_millis(1));
                if self.queueing >= high {
                    Some(true)
                } else if self.queueing.max(self.queueing_before) < high / 2 {
                    Some(false)
                } else {
                    None
                }
            }
            Growth::Reno => Some(true),
        }
    }

    /// Whether the losses of a report that came with a high queue are congestion. On a radio
    /// most losses are channel errors that coding repairs, and halving for each would starve
    /// a lossy path: at 10% loss, every time the queue reached τ/2 a loss came with it and
    /// the window of a 10 Mbit/s path swung between 15 and 30 packets about a 20-packet
    /// round trip, the path idle half the time. A buffer that overflows loses packets only
    /// while the queue is high, while channel errors strike at any queue; so a loss is
    /// congestion when the loss rate at high queues exceeds the rate at low queues, as loss
    /// discriminators that condition on the one-way delay do (Biaz and Vaidya,
    /// "Discriminating congestion losses from wireless losses using inter-arrival times at
    /// the receiver", ASSET 1999; the Spike scheme of Tobe et al.), with the low-queue rate
    /// as the channel's own (0 until 64 packets measured it). "Exceeds" is
    /// `p_high > min(2·p_low, p_low + 2σ) + 0.02`, σ the standard error of the difference of
    /// the two binomial rates: twice the channel's rate alone let a buffer drop as much again
    /// unseen (22% at 20% channel loss). For a path's first 64
    /// packets a loss is congestion only with the queue at half the target or more: a short
    /// flow on a lossy radio must not leave slow start at its first channel error (a first
    /// version that counted every loss then tripled the completion of 64 KiB flows over a
    /// path with 20% loss). A path whose queue never falls low (a window far past a shallow
    /// buffer) thus still halves, and its halvings bring the low-queue measurements.
    fn congestion_loss(&self, growth: Growth) -> bool {
        match growth {
            Growth::DelayTarget { tau, .. } if self.loss_low.packets + self.loss_high.packets < 64 => {
                self.queueing >= tau / 2
            }
            _ => {
                let (h, l) = (&self.loss_high, &self.loss_low);
                if l.packets < 64 {
                    return h.rate > 0.02;
                }
                let p = l.rate.clamp(0.01, 0.99);
                let error = (p * (1.0 - p) * (1.0 / h.samples(LOSS_HORIZON) + 1.0 / l.samples(CHANNEL_HORIZON))).sqrt();
                h.rate > (2.0 * l.rate).min(l.rate + 2.0 * error) + 0.02
            }
        }
    }

    /// The path went silent: what is in flight is lost, the window starts again (in slow
    /// start) and the service-time samples, which span the silence, are dropped. So is the
    /// queueing delay last measured: whatever queue there was drained or was dropped with
    /// the link, and a path that comes back must not leave slow start, or shrink, on a queue
    /// it had before it went silent (the answer to the probe that finds it back carries no
    /// new delay; until stop 48 the old reading ended slow start at once and the path came
    /// back at one packet more per round trip).
    ///
    /// The window restarts where a TCP sender restarts after an idle period (RFC 5681 §4.1):
    /// at the initial window or the window before, whichever is smaller; and slow start ends
    /// at the latest at the window before, as a TCP sender's slow start after a timeout ends
    /// at `ssthresh` (§3.1; TCP halves it there, a timeout being taken for congestion, but a
    /// silent radio is an outage, not congestion). Beyond it the queue decides, under
    /// Algorithm 3's law. With the initial window and no cap, a slow path coming and going
    /// with the allocation (the beams bench's drives, a few Mbit/s) came back queueing ten
    /// packets and grew until a report showed the queue.
    pub fn fail(&mut self, initial_cwnd: f64) {
        self.up = false;
        self.lost += self.sent.len() as u64;
        self.sent.clear();
        // A failure before slow start reached its cap keeps the cap: the window had not yet
        // been measured against the path.
        self.slow_start_cap = if self.slow_start { self.slow_start_cap.max(self.cwnd) } else { self.cwnd };
        self.cwnd = initial_cwnd.min(self.slow_start_cap).max(2.0);
        self.last_halving = None;
        self.slow_start = true;
        self.queueing = Duration::ZERO;
        self.queueing_before = Duration::ZERO;
        self.resync = true;
        self.relearn = self.owd_first.map(|_| Relearn {
            from_seq: self.next_seq,
            gamma: self.gamma.iter().copied().reduce(f64::min).unwrap_or(0.0),
            first_report: None,
            owd_rel: i64::MAX,
            rtt: None,
            old_owd_rel: self.owd_base_rel,
            old_rtt: self.min_rtt,
            cap: self.slow_start_cap,
        });
        self.gamma.clear();
        self.last_arrival = None;
    }
}

/// A path that failed may come back on another route: a radio that handed over to an access
/// point farther away, or whose traffic now crosses more of the network. Its smallest one-way
/// delay and round trip, the bases its queueing delay is read against, are then too small
/// by the difference, and kept for the connection's life (as they were until stop 49) the
/// path read that much queue for ever: 20 ms more one way, above τ, held its window at two
/// packets (`cohort-sim`: `a_path_that_returns_on_a_longer_route_is_measured_afresh`).
///
/// A path coming back from silence has no queue of ours: the queue drained or was dropped
/// with the link. So its first flight (the packets sent before the first report on them
/// arrived) measures the route afresh: each report's one-way delay, less a service time for
/// every packet sent since the failure before its own (what could have queued ahead of it),
/// is a bound on the new route's. Their smallest becomes the base if it is above the old one
/// by more than the delay target's lowest set point, `τ/4` ([`super::bound::FLOOR`]; at least
/// [`Relearn::TOLERANCE`]), plus a packet's transmission at the new rate (the old base may be
/// from a faster time, and a slower rate is the path's service, not a new route: it stays read
/// as queue, as before the failure); the smallest round trip follows it. Why that much: a route
/// longer by less leaves the windows a queue to aim at, while a base raised by mistake lets
/// the queue grow by as much. With a 1 ms tolerance alone, or the increase of the service time
/// since the failure instead of all of it, the beams bench's drives (one 5 ms route, rates
/// that come and go with the allocation) raised bases by 5-10 ms and every system's p99 while
/// both paths were up rose from 41 to 46-53 ms. And a path that fell silent is not always
/// empty (a path slowed to a crawl is declared failed with packets of ours queued): a report
/// after the failure on packets sent before it (other than the first, which may count what
/// arrived just before an outage) shows such a path, and it keeps its bases. A shorter route
/// needs nothing: its smaller delays lower the bases as any sample does. (A route that changes
/// without an outage is not caught: telling its delay from a standing queue takes draining the
/// queue, as BBR's ProbeRTT does.)
#[derive(Debug, Clone, Copy)]
struct Relearn {
    /// The first sequence number sent after the failure.
    from_seq: u32,
    /// The service time per packet before the failure, s (0 if never measured).
    gamma: f64,
    /// When the first report on a packet sent since the failure arrived.
    first_report: Option<Instant>,
    /// The smallest bounds so far: relative one-way delay (µs) and round trip.
    owd_rel: i64,
    rtt: Option<Duration>,
    /// The bases before the failure, and where slow start ends at the latest on them.
    old_owd_rel: i64,
    old_rtt: Option<Duration>,
    cap: f64,
}

impl Relearn {
    /// How much longer a route must be to replace the bases measured before the failure.
    const TOLERANCE: Duration = Duration::from_millis(1);
}

/// Whether path sequence number `s` comes before `bound` (wrapping).
fn seq_before(s: u32, bound: u32) -> bool {
    bound.wrapping_sub(s).wrapping_sub(1) < u32::MAX / 2
}

/// Whether path sequence number `s` is `bound` or comes before it (wrapping).
fn seq_through(s: u32, bound: u32) -> bool {
    s == bound || seq_before(s, bound)
}

/// A path's queueing delay `q_i` from one report: the packet's one-way delay above the
/// path's smallest (`owd_queue`; the clocks' offset cancels), but no more than its round trip
/// above the smallest round trip (`rtt_queue`, when the report's packet was timed).
///
/// The one-way measure sees only the forward queue, as LD-MPSP asks (seed 001 §5), but it
/// takes the two clocks to tick at one rate. They do not: crystals differ by tens of ppm,
/// and NTP or chrony slewing a robot's clock runs it up to 500 ppm fast or slow (chrony's
/// `maxslewrate` is far higher) for minutes. A receiver clock gaining 500 ppm adds 30 ms to
/// every one-way delay per minute; with the smallest delay taken once for the connection's
/// life, that would read as a queue growing past τ, and Algorithm 3 would shrink the window
/// to nothing (seen in the simulator: `receiver_clock_ppm`). The round trip is timed on the
/// sender's clock alone and includes the forward queue, so it bounds the one-way measure
/// from above whatever the clocks do, up to its own noise: the sender's and the receiver's
/// scheduling, the report's wait on the reverse direction, and a smallest round trip that may
/// itself have carried some of either. So the bound is the round trip's queue plus four of its
/// deviations (`slack`, the `4·rttvar` an RFC 6298 timeout allows for the same noise) plus the
/// one-way measure's resolution (two timestamps of whole microseconds): where the clocks agree
/// it does not bind, and the one-way measure is the one used. (A first version bound at the
/// round trip's queue alone: in the simulator it trimmed samples by 18 µs at the median, and
/// on the testbed two of three handoff runs carried 16.3 Mbit/s against 19.7-20.2 before.)
fn queueing_delay(owd_queue: Duration, rtt_queue: Option<Duration>, slack: Duration) -> Duration {
    const RESOLUTION: Duration = Duration::from_micros(2);
    rtt_queue.map_or(owd_queue, |r| owd_queue.min(r + slack + RESOLUTION))
}

/// A loss `rate` averaged over reports with one more report's counts, each report weighing
/// its packets: the average spans about `horizon` packets (a report of that many or more
/// replaces it).
fn blend(rate: f64, delivered: u64, lost: u64, horizon: f64) -> f64 {
    let total = delivered + lost;
    if total == 0 {
        return rate;
    }
    let weight = (total as f64 / horizon).min(1.0);
    rate + weight * (lost as f64 / total as f64 - rate)
}

/// The path's loss rate as the scheduler and the clones use it, and the discriminator's
/// high-queue rate, span this many packets.
const LOSS_HORIZON: f64 = 64.0;

/// The discriminator's low-queue rate (the channel's own loss) spans this many: it is the
/// reference the high-queue rate is tested against, and over 64 packets its sampling error
/// alone (±0.05 at 20% loss) would let a buffer drop a tenth of a path's datagrams unseen.
const CHANNEL_HORIZON: f64 = 256.0;

/// A loss rate averaged over reports ([`blend`]) and the packets it has seen.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
struct LossAverage {
    rate: f64,
    packets: u64,
}

impl LossAverage {
    /// Until it has seen `horizon` packets the average is the plain mean of all it has seen
    /// (a rate that starts at 0 and converges over 256 packets read the channel as cleaner
    /// than it was and took its first losses as congestion).
    fn add(&mut self, delivered: u64, lost: u64, horizon: f64) {
        self.packets += delivered + lost;
        self.rate = blend(self.rate, delivered, lost, horizon.min(self.packets as f64));
    }

    /// Packets the average stands for, as a sample size.
    fn samples(&self, horizon: f64) -> f64 {
        (self.packets as f64).clamp(1.0, horizon)
    }
}

/// The receiver's view of one path.
#[derive(Debug, Clone, Default)]
pub struct PathRx {
    /// A probe asked for a report now; the latest probe's mark.
    pub probed: bool,
    pub probe_mark: Option<u32>,
    pub received: u32,
    pub highest: Option<(u32, u32, Instant, u32)>,
    pub unacked: u32,
    pub first_unacked: Option<Instant>,
}

impl PathRx {
    /// A data datagram of sequence `seq` sent at `sent_us` arrived at `now` (`now_us` on this
    /// clock).
    pub fn on_data(&mut self, now: Instant, now_us: u32, seq: u32, sent_us: u32) {
        self.received = self.received.wrapping_add(1);
        if self.highest.is_none_or(|(h, ..)| seq.wrapping_sub(h).wrapping_sub(1) < u32::MAX / 2) {
            self.highest = Some((seq, sent_us, now, now_us.wrapping_sub(sent_us)));
        }
        self.unacked += 1;
        self.first_unacked.get_or_insert(now);
    }

    /// If a probe asked for a report and nothing has arrived on the path to report, the
    /// mark to answer with an empty report (see [`super::wire`]).
    pub fn empty_answer(&mut self) -> Option<u32> {
        if !self.probed || self.highest.is_some() {
            return None;
        }
        self.probed = false;
        Some(self.probe_mark.unwrap_or(super::wire::NO_MARK))
    }

    /// The report to send now, on path `path`.
    pub fn report(&mut self, path: u8, now: Instant, now_us: u32) -> Option<PathAck> {
        let (h, sent_us, at, owd) = self.highest?;
        self.probed = false;
        self.unacked = 0;
        self.first_unacked = None;
        Some(PathAck {
            path,
            received: self.received,
            highest: h,
            highest_sent_us: sent_us,
            held_us: now.saturating_duration_since(at).as_micros().min(u128::from(u32::MAX)) as u32,
            owd_raw_us: owd,
            arrival_us: now_us.wrapping_sub(now.saturating_duration_since(at).as_micros() as u32),
            probe_mark: self.probe_mark.unwrap_or(super::wire::NO_MARK),
        })
    }
}

/// Seed 001 §4.2: the cloning probability `c_p = min{k, p_e/(1 − p_e)}` (`0.5 ≤ k ≤ 1`), with
/// `p_e` the largest loss rate of the paths in use.
pub fn clone_probability(k: f64, pe: f64) -> f64 {
    let pe = pe.clamp(0.0, 0.99);
    (pe / (1.0 - pe)).min(k.clamp(0.5, 1.0))
}

/// Seed 001 §4.2: the packets a window of `w` may become with its clones,
/// `min{(1 + k)·w, w/(1 − p_e)}`.
pub fn cloned_window(k: f64, pe: f64, w: f64) -> f64 {
    let pe = pe.clamp(0.0, 0.99);
    ((1.0 + k.clamp(0.5, 1.0)) * w).min(w / (1.0 - pe))
}
