//! Multipath LRT (seed 001): one coded connection over several paths.
//!
//! An [`MpConnection`] wraps an [`lrt::Connection`](crate::lrt::Connection) and a set of paths
//! (a local interface or address × a peer address each; the driver numbers them the same at
//! both ends). Any coded symbol may travel on any path, so a lost or late path costs a repair,
//! never a retransmission on that path. On top of LRT it runs seed 001's scheduler:
//!
//! * **Per-path measurement** ([`path`]): every data datagram carries its path sequence number
//!   and send time ([`wire`]); the receiver reports per path what arrived (count, highest,
//!   one-way delay, arrival time) on that same path. The sender derives the round trip, the
//!   queueing delay `q_i` (one-way delay above its minimum: the clock offset cancels), the
//!   service time per packet `γ_i` and its variability `u_i` over the last 200 packets (Eqs.
//!   8-9), and the loss rate.
//! * **LD-MPSP windows** (Algorithm 3): per acknowledged packet `w_i ← w_i + ((s − q_i)/τ)/w_i`;
//!   a path whose queue exceeds the set point `s` shrinks. Algorithm 3 has `s = τ`, where the
//!   windows settle with half the packets over `τ`; Cohort reads `τ` as a bound met by
//!   `tau_share` (95%) of the packets and lowers `s` until the reports show it ([`bound`]).
//!   Halving on loss (once per round trip) only for a congestion loss (one that comes with a high queue while the loss rate at high
//!   queues exceeds the channel's own), slow start first, growth only while the window
//!   limits: Cohort's choices, see [`path::PathTx::on_report`].
//! * **MS-UCB** ([`bandit`], Algorithm 2, Eqs. 13-16): each round chooses the super-arm `S` of
//!   paths to use; at the round's end every arm of `S` is rewarded by its delivery time per
//!   packet and loss. A federated start (Eqs. 17-18) seeds an arm from statistics other
//!   robots shared.
//! * **Delay balancing** ([`balance`], Eqs. 5-12): a round's window `W = Σ_{i∈S} w_i` is split
//!   into per-path quotas that equalise `D_i + γ_i·w_i + z·u_i·√w_i` (Eq. 11 solved exactly),
//!   at least one packet for each path played (its measurements must not age);
//!   each packet goes to the path of `S` with quota and window room whose next packet would
//!   arrive first. Where the driver knows each path's allocated rate (seed 001 Fig. 4: the
//!   access point's RF-chain and beam allocation, `cohort_medium::beams`), it passes it with
//!   [`MpConnection::set_rate_hint`] and `γ_i = size/θ_i` replaces the measured service time.
//! * **Cloning** (§4.2): a flow's first `short_flow_bytes` go on every path of `S` (full
//!   cloning: a short flow finishes as fast as the best path); after that each packet is
//!   duplicated on another path with probability `c_p = min{k, p_e/(1 − p_e)}` (`p_e` the
//!   loss rate of the packet's own path) less LRT's own repair rate `r`: LRT's repairs, which
//!   any path may carry, already are coded clones.
//! * **Failure and return**: a path whose oldest packet in flight is overdue (an RFC 6298
//!   timeout of the path) is suspect: the scheduler stops waiting for it and LRT repairs its
//!   packets in flight at once on the others ([`Connection::repair_soon`]). A path with
//!   packets in flight and no report for half of `max(fail_after, 4·srtt)` is probed (a
//!   6-byte request the receiver answers with the path's report, so a lost report is not a
//!   failure; its mark shows which packets were lost); silent for the whole of it, the path is
//!   down: its packets count as lost (LRT's repairs cover them) and it leaves every
//!   super-arm. A down path is probed every `probe_interval`; any report brings it back,
//!   an empty one too: a receiver that has taken nothing on the path answers a probe with
//!   an empty report, so a radio out of reach when the connection began (or a path whose
//!   listening end had not yet learned the peer's address) joins once it works.
//!
//! The baselines of seed 001's comparison run on the same machine ([`Scheduler`]): the
//! min-RTT scheduler of MPTCP's default and round-robin, both with uncoupled Reno windows.

pub mod balance;
pub mod bandit;
pub mod bound;
pub mod federated;
pub mod path;
pub mod wire;

use crate::lrt::Connection;
use balance::{PathDelay, normal_quantile, split};
use bandit::{ArmStats, MsUcb};
use bound::DelayBound;
use cohort_time::Instant;
use path::{Growth, PathRx, PathTx, clone_probability};
use std::collections::VecDeque;
use std::time::Duration;
use wire::{DATA_HEADER, DataHeader, MpRepr, PATH_ACK_LEN, PROBE_LEN};

/// Which scheduler places packets on paths.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Scheduler {
    /// Seed 001: MS-UCB super-arms, delay balancing, LD-MPSP windows with target `tau`, cloning.
    LdMpsp { tau: Duration },
    /// MPTCP's default: the path with room and the smallest smoothed round trip; Reno windows.
    MinRtt,
    /// Paths in turn, each with room; Reno windows.
    RoundRobin,
}

/// Multipath settings.
#[derive(Debug, Clone, PartialEq)]
pub struct MpConfig {
    pub scheduler: Scheduler,
    /// Paths in each super-arm (`m` of Eq. 16); 0 means all paths.
    pub super_arm: usize,
    pub initial_cwnd: f64,
    /// Quantile of the path delays delay balancing equalises (Eq. 10); 0.5 is the mean.
    pub quantile: f64,
    /// LD-MPSP's `τ` as a bound: the share of packets whose delay above the connection's
    /// fastest path should stay within `τ` (0 < share < 1; see [`DelayBound`]). `None` is
    /// Algorithm 3 as written, whose windows settle where the queue *is* `τ`, so about half
    /// the packets exceed it.
    pub tau_share: Option<f64>,
    /// Cloning's `k` (0.5 ≤ k ≤ 1) and whether partial cloning runs at all.
    pub clone_k: f64,
    pub cloning: bool,
    /// A flow's first bytes go on every path of the super-arm (full cloning).
    pub short_flow_bytes: u64,
    /// The receiver reports a path after this many datagrams on it, or this long after the
    /// first unreported one.
    pub ack_every: u32,
    pub ack_delay: Duration,
    /// A path silent this long (or 4 smoothed round trips, if longer) with packets in flight
    /// is down.
    pub fail_after: Duration,
    pub probe_interval: Duration,
    /// Round trip assumed for a path not yet measured.
    pub default_rtt: Duration,
    /// Tie-breaks of the bandit.
    pub seed: u64,
}

impl Default for MpConfig {
    fn default() -> Self {
        MpConfig {
            scheduler: Scheduler::LdMpsp { tau: Duration::from_millis(20) },
            super_arm: 0,
            initial_cwnd: 10.0,
            quantile: 0.9,
            tau_share: Some(0.95),
            clone_k: 0.5,
            cloning: true,
            short_flow_bytes: 64 * 1024,
            ack_every: 4,
            ack_delay: Duration::from_millis(2),
            fail_after: Duration::from_millis(200),
            probe_interval: Duration::from_millis(100),
            default_rtt: Duration::from_millis(50),
            seed: 1,
        }
    }
}

/// What one path did.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct PathStats {
    pub up: bool,
    pub sent: u64,
    pub bytes_sent: u64,
    pub clones_sent: u64,
    pub delivered: u64,
    pub lost: u64,
    pub cwnd: f64,
    pub srtt_ms: f64,
    pub queueing_ms: f64,
    pub loss: f64,
    pub failures: u64,
    /// MS-UCB's statistics of this path (rounds in the super-arm, mean reward).
    pub arm: ArmStats,
}

/// Counters of the multipath layer.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct MpStats {
    pub paths: Vec<PathStats>,
    pub rounds: u64,
    pub malformed: u64,
    /// Clones dropped because their path's queue was full.
    pub clones_dropped: u64,
    pub path_acks_sent: u64,
    /// Where LD-MPSP's windows are steering the delay above the fastest path (the set
    /// point `s`, ms; `τ` when `tau_share` is `None`), and the share of reported packets
    /// that exceeded `τ`.
    pub delay_set_ms: f64,
    pub delay_over_tau_share: f64,
}

/// One scheduling round of LD-MPSP.
#[derive(Debug, Clone)]
struct Round {
    arms: Vec<usize>,
    quota: Vec<usize>,
    started: Instant,
}

/// Clones waiting for window room, at most this many.
const MAX_CLONES: usize = 256;

/// A coded connection over several paths. See the [module docs](self).
#[derive(Debug)]
pub struct MpConnection {
    conn: Connection,
    cfg: MpConfig,
    tx: Vec<PathTx>,
    rx: Vec<PathRx>,
    failures: Vec<u64>,
    /// Whether LRT was told of the packets in flight on a path that fell silent (once per
    /// silence).
    signaled: Vec<bool>,
    last_probe: Vec<Option<Instant>>,
    bandit: MsUcb,
    round: Option<Round>,
    next_pn: u64,
    rr: usize,
    clone_credit: f64,
    clones: VecDeque<(usize, Vec<u8>)>,
    data_bytes_sent: u64,
    /// When the scheduler last found no path that may take a packet (windows full, quotas
    /// spent on full paths, every path down); cleared by the next arrival.
    blocked: Option<Instant>,
    /// The super-arms played, first rounds only (for regret).
    round_log: Vec<Vec<usize>>,
    /// LD-MPSP's set point (τ as a bound, [`bound`]).
    bound: DelayBound,
    stats: MpStats,
}

/// Rounds kept in the log.
const ROUND_LOG: usize = 10_000;

fn micros(now: Instant) -> u32 {
    (now.saturating_duration_since(Instant::ZERO).as_micros() & 0xFFFF_FFFF) as u32
}

impl MpConnection {
    /// Runs `conn` over `paths` paths (1 to 255).
    pub fn new(conn: Connection, cfg: MpConfig, paths: usize) -> Self {
        let n = paths.clamp(1, 255);
        let m = if cfg.super_arm == 0 { n } else { cfg.super_arm };
        MpConnection {
            conn,
            tx: (0..n).map(|_| PathTx::new(cfg.initial_cwnd)).collect(),
            rx: vec![PathRx::default(); n],
            failures: vec![0; n],
            signaled: vec![false; n],
            last_probe: vec![None; n],
            bandit: MsUcb::new(n, m, cfg.seed),
            round: None,
            next_pn: 0,
            rr: 0,
            clone_credit: 0.0,
            clones: VecDeque::new(),
            data_bytes_sent: 0,
            blocked: None,
            round_log: Vec::new(),
            bound: DelayBound::new(
                match cfg.scheduler {
                    Scheduler::LdMpsp { tau } => tau,
                    _ => Duration::ZERO,
                },
                cfg.tau_share,
            ),
            stats: MpStats::default(),
            cfg,
        }
    }

    pub fn conn(&self) -> &Connection {
        &self.conn
    }

    pub fn conn_mut(&mut self) -> &mut Connection {
        &mut self.conn
    }

    pub fn paths(&self) -> usize {
        self.tx.len()
    }

    /// Starts path `i`'s bandit statistics from what other robots shared (Eqs. 17-18).
    pub fn federated_start(&mut self, i: usize, s: ArmStats) {
        self.bandit.seed_arm(i, s);
    }

    /// Tells the scheduler path `path`'s rate as the layer below allocated it this round
    /// (seed 001 Fig. 4: Algorithm 1's `θ` feeds delay balancing), in bit/s; `None` goes back
    /// to measurement alone. While set, delay balancing and MS-UCB's merit use
    /// `γ = size/θ` for the path's service time ([`path::PathTx::delay_model`]). Plain numbers:
    /// the driver (the simulator, a real access point's report) decides where they come from.
    /// A rate below 1 kbit/s (or not finite) counts as 1 kbit/s: the path is all but unusable.
    /// A path out of range is ignored.
    pub fn set_rate_hint(&mut self, path: usize, rate_bps: Option<f64>) {
        if let Some(p) = self.tx.get_mut(path) {
            p.rate_hint_bps = rate_bps.map(|r| if r.is_finite() { r.max(1e3) } else { 1e3 });
        }
    }

    /// The super-arm of each round played so far (the first 10 000).
    pub fn rounds_played(&self) -> &[Vec<usize>] {
        &self.round_log
    }

    /// Each path's bandit statistics, to share with the team.
    pub fn arm_stats(&self) -> Vec<ArmStats> {
        self.bandit.arms().to_vec()
    }

    pub fn stats(&self) -> MpStats {
        let mut s = self.stats.clone();
        s.rounds = self.bandit.rounds();
        s.delay_set_ms = self.bound.set_point().as_secs_f64() * 1e3;
        s.delay_over_tau_share = self.bound.over_share();
        s.paths = self
            .tx
            .iter()
            .enumerate()
            .map(|(i, p)| PathStats {
                up: p.up,
                sent: p.sent_total,
                bytes_sent: p.bytes_sent,
                clones_sent: p.clones_sent,
                delivered: p.delivered,
                lost: p.lost,
                cwnd: p.cwnd,
                srtt_ms: p.srtt.map_or(0.0, |d| d.as_secs_f64() * 1e3),
                queueing_ms: p.queueing.as_secs_f64() * 1e3,
                loss: p.loss,
                failures: self.failures[i],
                arm: self.bandit.arms()[i],
            })
            .collect();
        s
    }

    /// Whether path `i` may take a packet now: up with window room, or, when every path is
    /// down, any path with window room (a connection never stops trying).
    fn has_room(&self, i: usize) -> bool {
        (self.tx[i].up || self.tx.iter().all(|p| !p.up)) && self.tx[i].window_open()
    }

    fn growth(&self) -> Growth {
        match self.cfg.scheduler {
            Scheduler::LdMpsp { tau } => Growth::DelayTarget { tau, set: self.bound.set_point() },
            _ => Growth::Reno,
        }
    }

    /// What a packet sent now waits, about, above the fastest delivery the connection has
    /// seen: the longest current one-way delay of the paths reporting lately (a packet of
    /// a faster path waits in order for those sent before it on the slowest) above the
    /// smallest one-way delay of any path. Each path's delay is its smallest raw one-way
    /// delay plus its queueing delay: raw one-way delays of different paths share the two
    /// clocks' offset, so their differences are real time, and the queueing delay is kept
    /// honest against clock drift by the round trip ([`path`]'s `queueing_delay`).
    ///
    /// Returns that delay and the part of it no window can remove: the same with every
    /// queue empty (the longest smallest one-way delay of those paths above the smallest).
    fn in_order_delay(&self, now: Instant) -> (Duration, Duration) {
        let bases: Vec<Option<u32>> = self.tx.iter().map(PathTx::owd_raw_base).collect();
        let Some(reference) = bases.iter().flatten().next().copied() else { return (Duration::ZERO, Duration::ZERO) };
        // Bases relative to one of them (µs; wrapping-safe while the paths differ by < 35 min).
        let rel = |b: u32| i64::from(b.wrapping_sub(reference) as i32);
        let floor = bases.iter().flatten().map(|&b| rel(b)).min().unwrap_or(0);
        let recent = |t: &PathTx| {
            let lately = t.srtt.unwrap_or(self.cfg.default_rtt).max(Duration::from_millis(10)) * 2;
            t.up && t.last_report.is_some_and(|r| now.saturating_duration_since(r) <= lately)
        };
        let (mut worst, mut forced) = (0i64, 0i64);
        for (t, b) in self.tx.iter().zip(&bases).filter(|(t, _)| recent(t)) {
            if let Some(b) = b {
                worst = worst.max(rel(*b) - floor + t.queueing.as_micros() as i64);
                forced = forced.max(rel(*b) - floor);
            }
        }
        let us = |x: i64| Duration::from_micros(u64::try_from(x).unwrap_or(0));
        (us(worst), us(forced))
    }

    /// A datagram that arrived on path `path`.
    pub fn handle_datagram(&mut self, now: Instant, path: usize, bytes: &[u8]) {
        self.blocked = None;
        match MpRepr::parse(bytes) {
            Ok(MpRepr::Data(h, pkt)) if path < self.rx.len() => {
                self.rx[path].on_data(now, micros(now), h.seq, h.sent_us);
                self.conn.handle_packet(now, h.pn, pkt);
            }
            Ok(MpRepr::Probe(p, mark)) if usize::from(p) < self.rx.len() => {
                let rx = &mut self.rx[usize::from(p)];
                rx.probed = true;
                rx.probe_mark = Some(mark);
            }
            Ok(MpRepr::Empty(p, mark)) if usize::from(p) < self.tx.len() => {
                let p = usize::from(p);
                if !self.tx[p].up {
                    tracing::debug!(path = p, "multipath: path is back (nothing had arrived on it)");
                }
                self.tx[p].on_empty_report(now, mark);
                self.signaled[p] = false;
            }
            Ok(MpRepr::PathAck(a)) if usize::from(a.path) < self.tx.len() => {
                let p = usize::from(a.path);
                let was_up = self.tx[p].up;
                let growth = self.growth();
                let (newly, _) = self.tx[p].on_report(now, &a, growth);
                // Slow start's overshoot is a transient the set point cannot steer: the
                // tracker learns the delays of windows under Algorithm 3's law.
                if newly > 0 && !self.tx[p].slow_start && matches!(growth, Growth::DelayTarget { .. }) {
                    let (delay, forced) = self.in_order_delay(now);
                    self.bound.sample(delay, forced);
                }
                self.signaled[p] = false;
                if !was_up {
                    tracing::debug!(path = p, "multipath: path is back");
                }
            }
            _ => self.stats.malformed += 1,
        }
    }

    /// Advances timers: the connection's, and path failures. A path that turns suspect has its
    /// packets in flight reported to LRT as lost, so repairs for them go out at once on the
    /// other paths instead of after LRT's own acknowledgements show the gap.
    /// How far out of order the paths may deliver: the spread of their smoothed round trips
    /// (half of it one way) plus four deviations of the slowest, so the coded connection
    /// does not take a packet still on a slower path for lost.
    fn reorder_window(&self) -> Duration {
        let live = self.tx.iter().filter_map(|p| p.srtt.map(|s| (s, p.rttvar)));
        let (lo, hi, var) = live.fold((Duration::MAX, Duration::ZERO, Duration::ZERO), |(lo, hi, v), (s, var)| {
            (lo.min(s), hi.max(s), if s >= hi { var } else { v })
        });
        if hi.is_zero() { Duration::ZERO } else { (hi - lo.min(hi)) / 2 + var * 4 }
    }

    pub fn handle_timeout(&mut self, now: Instant) {
        self.conn.handle_timeout(now);
        self.conn.set_reorder_window(self.reorder_window());
        for i in 0..self.tx.len() {
            if !self.signaled[i] && self.suspect(i, now) {
                self.signaled[i] = true;
                self.conn.repair_soon(self.tx[i].in_flight() as u32);
            }
            if let Some(deadline) = self.fail_deadline(i)
                && now >= deadline
            {
                tracing::debug!(path = i, "multipath: path is down");
                self.tx[i].fail(self.cfg.initial_cwnd);
                self.failures[i] += 1;
                self.last_probe[i] = Some(now);
                self.round = None;
            }
        }
    }

    /// Since when path `i` has been silent with packets in flight, and how long it may stay so.
    fn silence(&self, i: usize) -> Option<(Instant, Duration)> {
        let p = &self.tx[i];
        if !p.up || p.in_flight() == 0 {
            return None;
        }
        let allowed = self.cfg.fail_after.max(p.srtt.map_or(Duration::ZERO, |s| s * 4));
        let since = [p.last_report, p.oldest_in_flight()].into_iter().flatten().max()?;
        Some((since, allowed))
    }

    /// Whether path `i` is overdue: its oldest packet in flight should have been reported by
    /// now (a retransmission timeout of the path: `srtt + max(4·rttvar, 2·ack_delay + 2 ms)`
    /// after it left, as RFC 6298 computes one), and no report came for as long. Maybe
    /// failing: the scheduler stops waiting for it and LRT repairs its packets in flight;
    /// only the failure detector declares it down.
    fn suspect(&self, i: usize, now: Instant) -> bool {
        self.suspect_at(i).is_some_and(|t| now > t)
    }

    /// When path `i` turns suspect if it stays silent.
    fn suspect_at(&self, i: usize) -> Option<Instant> {
        let p = &self.tx[i];
        let (since, _) = self.silence(i)?;
        let slack = (p.rttvar * 4).max(self.cfg.ack_delay * 2 + Duration::from_millis(2));
        let rto = p.srtt.unwrap_or(self.cfg.default_rtt) + slack;
        let report_gap = self.cfg.ack_delay * 2 + Duration::from_millis(2);
        Some((p.oldest_in_flight()? + rto).max(p.last_report.map_or(since, |r| r + report_gap)))
    }

    /// When path `i` counts as down if nothing arrives from it.
    fn fail_deadline(&self, i: usize) -> Option<Instant> {
        self.silence(i).map(|(since, allowed)| since + allowed)
    }

    /// When `handle_timeout` or `poll_transmit` next has work.
    pub fn poll_timeout(&self) -> Option<Instant> {
        let acks = self.rx.iter().filter_map(|r| match r.first_unacked {
            // A probe asks for the report at once.
            _ if r.probed => Some(Instant::ZERO),
            first => first.map(|t| t + self.cfg.ack_delay),
        });
        let fails = (0..self.tx.len()).filter_map(|i| self.fail_deadline(i));
        let probes = (0..self.tx.len()).filter_map(|i| self.probe_due(i));
        // While no path may take a packet, the connection's "transmit now" waits for an
        // arrival; its other timers (idle, keepalive) still run, checked every `probe_interval`,
        // and so does the round's end.
        let conn = self.conn.poll_timeout().map(|t| match self.blocked {
            Some(b) if t <= b => b + self.cfg.probe_interval,
            _ => t,
        });
        let round = self.blocked.and(self.round.as_ref()).map(|r| r.started + self.round_len());
        let suspects = (0..self.tx.len()).filter(|&i| !self.signaled[i]).filter_map(|i| self.suspect_at(i));
        conn.into_iter().chain(acks).chain(fails).chain(probes).chain(round).chain(suspects).min()
    }

    /// When path `i` is probed next: a down path every `probe_interval`; an up path silent for
    /// half its allowed silence, then every quarter of it.
    fn probe_due(&self, i: usize) -> Option<Instant> {
        if !self.tx[i].up {
            return Some(self.last_probe[i].map_or(Instant::ZERO, |t| t + self.cfg.probe_interval));
        }
        let (since, allowed) = self.silence(i)?;
        let first = since + allowed / 2;
        Some(self.last_probe[i].filter(|&t| t >= since).map_or(first, |t| (t + allowed / 4).max(first)))
    }

    /// The next datagram to send: `(path, length)` written to `buf`, or `None`.
    pub fn poll_transmit(&mut self, now: Instant, buf: &mut [u8]) -> Option<(usize, usize)> {
        let now_us = micros(now);
        // 0. Probes of silent and down paths.
        if buf.len() >= PROBE_LEN
            && let Some(i) = (0..self.tx.len()).find(|&i| self.probe_due(i).is_some_and(|t| now >= t))
        {
            self.last_probe[i] = Some(now);
            wire::emit_probe(i as u8, self.tx[i].next_seq, buf);
            return Some((i, PROBE_LEN));
        }
        // 1. Path reports, on the path they describe (at once when probed; empty when
        // nothing arrived on the path yet).
        for i in 0..self.rx.len() {
            if buf.len() >= PROBE_LEN
                && let Some(mark) = self.rx[i].empty_answer()
            {
                wire::emit_empty(i as u8, mark, buf);
                return Some((i, PROBE_LEN));
            }
            let due = self.rx[i].probed
                || self.rx[i].unacked >= self.cfg.ack_every
                || self.rx[i].first_unacked.is_some_and(|t| now >= t + self.cfg.ack_delay);
            if due
                && buf.len() >= PATH_ACK_LEN
                && let Some(a) = self.rx[i].report(i as u8, now, now_us)
            {
                a.emit(buf);
                self.stats.path_acks_sent += 1;
                return Some((i, PATH_ACK_LEN));
            }
        }
        // 2. Clones waiting for room on their path (clones for a down path are dropped).
        let before = self.clones.len();
        self.clones.retain(|(p, _)| self.tx[*p].up);
        self.stats.clones_dropped += (before - self.clones.len()) as u64;
        if let Some(k) = self.clones.iter().position(|(p, _)| self.has_room(*p)) {
            let (p, mut bytes) = self.clones.remove(k)?;
            if bytes.len() > buf.len() {
                return None;
            }
            // A clone is a new datagram of its path: its own sequence number and send time.
            let seq = self.tx[p].on_send(now, bytes.len(), true);
            let h = DataHeader {
                path: p as u8,
                seq,
                sent_us: now_us,
                pn: u64::from_be_bytes(bytes[10..18].try_into().ok()?),
            };
            h.emit(&mut bytes);
            buf[..bytes.len()].copy_from_slice(&bytes);
            return Some((p, bytes.len()));
        }
        // 3. A new LRT packet on the path the scheduler picks.
        let Some(pick) = self.pick(now) else {
            self.blocked.get_or_insert(now);
            return None;
        };
        if buf.len() <= DATA_HEADER {
            return None;
        }
        let pn = self.next_pn;
        let n = self.conn.poll_transmit(now, pn, &mut buf[DATA_HEADER..])?;
        self.next_pn += 1;
        self.blocked = None;
        let len = DATA_HEADER + n;
        let seq = self.tx[pick].on_send(now, len, false);
        DataHeader { path: pick as u8, seq, sent_us: now_us, pn }.emit(buf);
        if let Some(r) = self.round.as_mut() {
            r.quota[pick] = r.quota[pick].saturating_sub(1);
        }
        self.data_bytes_sent += n as u64;
        self.plan_clones(pick, &buf[..len]);
        Some((pick, len))
    }

    /// Where the next packet goes, if any path may take one now.
    fn pick(&mut self, now: Instant) -> Option<usize> {
        let n = self.tx.len();
        match self.cfg.scheduler {
            Scheduler::MinRtt => {
                (0..n).filter(|&i| self.has_room(i)).min_by_key(|&i| self.tx[i].srtt.unwrap_or(Duration::ZERO))
            }
            Scheduler::RoundRobin => {
                let i = (0..n).map(|k| (self.rr + k) % n).find(|&i| self.has_room(i))?;
                self.rr = (i + 1) % n;
                Some(i)
            }
            Scheduler::LdMpsp { .. } => {
                for _ in 0..2 {
                    let r = match &self.round {
                        Some(r) if !self.round_over(r, now) => r,
                        _ => {
                            self.next_round(now);
                            self.round.as_ref()?
                        }
                    };
                    let z = normal_quantile(self.cfg.quantile);
                    let best = r
                        .arms
                        .iter()
                        .copied()
                        .filter(|&i| r.quota[i] > 0 && self.has_room(i))
                        .map(|i| {
                            let m = self.tx[i].delay_model(self.cfg.default_rtt);
                            (m.finish(self.tx[i].in_flight() as f64 + 1.0, z), i)
                        })
                        .min_by(|a, b| a.0.total_cmp(&b.0))
                        .map(|b| b.1);
                    if best.is_some() {
                        return best;
                    }
                    // Quota left only on full paths: wait for their acknowledgements, unless
                    // every such path is suspect (silent past twice its round trip: a failure
                    // not yet confirmed), in which case the round ends and the next one leaves
                    // them out.
                    let all_down = self.tx.iter().all(|p| !p.up);
                    let waiting = |i: usize| r.quota[i] > 0 && (self.tx[i].up || all_down) && !self.suspect(i, now);
                    if r.arms.iter().any(|&i| waiting(i)) {
                        return None;
                    }
                    self.round = None;
                }
                None
            }
        }
    }

    /// A round lasts one smallest round trip, at least 10 ms.
    fn round_len(&self) -> Duration {
        self.tx.iter().filter_map(|p| p.min_rtt).min().unwrap_or(self.cfg.default_rtt).max(Duration::from_millis(10))
    }

    /// A round ends when its quotas are spent, every path of it failed, or its time is up.
    fn round_over(&self, r: &Round, now: Instant) -> bool {
        let all_down = self.tx.iter().all(|p| !p.up);
        r.arms.iter().all(|&i| r.quota[i] == 0 || (!self.tx[i].up && !all_down)) || now >= r.started + self.round_len()
    }

    /// Closes the current round (Eqs. 14-15), chooses the next super-arm (Eq. 16) and splits
    /// its window (Eq. 11).
    fn next_round(&mut self, now: Instant) {
        if let Some(r) = self.round.take() {
            // The path's own delay, without the queue the scheduler itself keeps on it.
            let merit = |p: &PathTx| {
                let m = p.delay_model(self.cfg.default_rtt);
                bandit::merit(m.base - p.queueing.as_secs_f64() + m.gamma, p.loss)
            };
            let best = self.tx.iter().filter(|p| p.srtt.is_some()).map(merit).fold(0.0, f64::max);
            let merits: Vec<f64> = r.arms.iter().map(|&i| merit(&self.tx[i])).collect();
            self.bandit.update(&r.arms, &bandit::rewards(&merits, best));
        }
        let mut usable: Vec<bool> = (0..self.tx.len()).map(|i| self.tx[i].up && !self.suspect(i, now)).collect();
        if !usable.iter().any(|u| *u) {
            usable = self.tx.iter().map(|p| p.up).collect();
        }
        if !usable.iter().any(|u| *u) {
            usable = vec![true; self.tx.len()];
        }
        let arms = self.bandit.choose(&usable);
        if self.round_log.len() < ROUND_LOG {
            self.round_log.push(arms.clone());
        }
        let models: Vec<PathDelay> = arms.iter().map(|&i| self.tx[i].delay_model(self.cfg.default_rtt)).collect();
        let w: usize = arms.iter().map(|&i| self.tx[i].cwnd.floor().max(1.0) as usize).sum();
        let shares = split(&models, w, normal_quantile(self.cfg.quantile));
        // Every arm of the super-arm carries at least one packet a round: MS-UCB rewards the
        // arms it played by what they delivered (Eqs. 14-15), and a path delay balancing left
        // empty would be rewarded on measurements that age while it idles. Without this a
        // path that was slow once kept its old queueing delay and service time, got no share
        // round after round and never showed that it had recovered (seen under mobility: a
        // radio unused for 2.3 s while its rate rose from 7.7 to 23.6 Mbit/s). A path with a
        // rate hint is exempt: its service time is the hint's, current every round, and a
        // packet forced onto a path the access point gave almost nothing waits there (the
        // beams bench's p99 rose from 213 to 270 ms when those paths got the floor too).
        let mut quota = vec![0; self.tx.len()];
        for (&i, &s) in arms.iter().zip(&shares) {
            quota[i] = if self.tx[i].rate_hint_bps.is_some() { s } else { s.max(1) };
        }
        self.round = Some(Round { arms, quota, started: now });
    }

    /// Queues clones of the packet just sent on `pick` (§4.2).
    fn plan_clones(&mut self, pick: usize, pkt: &[u8]) {
        let mut to: Vec<usize> = Vec::new();
        if let Scheduler::LdMpsp { .. } = self.cfg.scheduler {
            let others: Vec<usize> = match &self.round {
                Some(r) => r.arms.iter().copied().filter(|&i| i != pick && self.tx[i].up).collect(),
                None => Vec::new(),
            };
            if self.data_bytes_sent <= self.cfg.short_flow_bytes {
                to.extend(&others);
            } else if self.cfg.cloning && !others.is_empty() {
                // §4.2 clones with the loss rate `p_e` of the paths in use. A copy protects
                // against the loss of the path its original took, so Cohort takes `p_e` of that
                // path: a packet on a loss-free path is not copied onto a lossy one, which
                // would only take that path's room from packets of its own.
                let pe = self.tx[pick].loss;
                // LRT already sends `r` repairs per source symbol, spread over every path: with
                // coding those are the partial clones, and a duplicate is added only where
                // §4.2's probability asks for more than that.
                let r = self.conn.stats().redundancy;
                self.clone_credit += (clone_probability(self.cfg.clone_k, pe) - r).max(0.0);
                if self.clone_credit >= 1.0 {
                    self.clone_credit -= 1.0;
                    // The other path least likely to lose it.
                    if let Some(&j) = others.iter().min_by(|&&a, &&b| self.tx[a].loss.total_cmp(&self.tx[b].loss)) {
                        to.push(j);
                    }
                }
            }
        }
        to.sort_unstable();
        to.dedup();
        for j in to {
            if self.clones.len() >= MAX_CLONES {
                self.clones.pop_front();
                self.stats.clones_dropped += 1;
            }
            self.clones.push_back((j, pkt.to_vec()));
        }
    }
}

#[cfg(test)]
mod tests;
