//! Multipath LRT in virtual time: a sender and a receiver [`MpConnection`] joined by one
//! `cohort_medium` duplex link per path, each path with its own outages (a radio out of
//! range, an access point lost in a handoff).
//!
//! The application writes fixed-size messages while the connection holds less than
//! `app_buffer_bytes` unsent (a streaming application keeps a shallow buffer, so a message's
//! delay is the network's, not a queue the application built), and the receiver reads each
//! message as soon as it is complete.

use cohort_medium::link::{Duplex, LinkError, LinkParams};
use cohort_proto::lrt::{Config, ConfigError, ConnStats, Connection, State};
use cohort_proto::multipath::bandit::ArmStats;
use cohort_proto::multipath::{MpConfig, MpConnection, MpStats};
use cohort_time::Instant;
use std::time::Duration;

/// Bytes each datagram carries below the multipath layer on a real network: the secure frame
/// (42) and UDP/IPv4 (28).
pub const UNDER_MP: usize = 70;

/// One path: its link (the same both ways), when it is out (`[from, to)` from the start),
/// when its link changes (rate, delay, loss: a trace, see [`crate::mobility`]), and when the
/// sender's scheduler is told the path's allocated rate (`MpConnection::set_rate_hint`, see
/// [`crate::beams`]), each in time order.
#[derive(Debug, Clone, PartialEq)]
pub struct MpPath {
    pub link: LinkParams,
    pub outages: Vec<(Duration, Duration)>,
    pub changes: Vec<(Duration, LinkParams)>,
    pub rate_hints: Vec<(Duration, Option<f64>)>,
}

impl MpPath {
    pub fn new(link: LinkParams) -> Self {
        MpPath { link, outages: Vec::new(), changes: Vec::new(), rate_hints: Vec::new() }
    }

    fn out_at(&self, t: Duration) -> bool {
        self.outages.iter().any(|&(a, b)| t >= a && t < b)
    }
}

/// A run.
#[derive(Debug, Clone, PartialEq)]
pub struct MpRun {
    pub mp: MpConfig,
    pub paths: Vec<MpPath>,
    pub messages: u32,
    pub message_bytes: usize,
    pub app_buffer_bytes: usize,
    /// Give up after this much virtual time.
    pub limit: Duration,
    pub seed: u64,
    /// Arms to start from statistics shared by other robots (a federated start).
    pub federated: Vec<(usize, ArmStats)>,
    /// How much faster the receiver's clock runs than the sender's, parts per million
    /// (negative: slower): a crystal's error, or NTP slewing a clock. The receiver's
    /// connection sees every time on its own clock.
    pub receiver_clock_ppm: f64,
}

impl MpRun {
    /// `messages` of `message_bytes` over `paths` with `mp`, a 64 KiB application buffer and a
    /// 10-minute limit.
    pub fn new(mp: MpConfig, paths: Vec<MpPath>, messages: u32, message_bytes: usize, seed: u64) -> Self {
        MpRun {
            mp,
            paths,
            messages,
            message_bytes: message_bytes.max(4),
            app_buffer_bytes: 64 * 1024,
            limit: Duration::from_secs(600),
            seed,
            federated: Vec::new(),
            receiver_clock_ppm: 0.0,
        }
    }
}

/// What a run did.
#[derive(Debug, Clone, PartialEq)]
pub struct MpOutcome {
    pub delivered: u32,
    pub in_order: bool,
    /// When the connection was up, and when the last message arrived (from the start).
    pub established: Option<Duration>,
    pub completed: Option<Duration>,
    /// Application bits per second from the connection's start to the last delivery (all of
    /// the transfer, or what arrived by the limit), Mbit/s.
    pub goodput_mbps: f64,
    /// Each message's delay from `send` to `recv`, ms, in message order, and when it was
    /// sent (ms from the start).
    pub delays_ms: Vec<f64>,
    pub sent_ms: Vec<f64>,
    /// The longest time between two deliveries while messages were outstanding, ms.
    pub max_stall_ms: f64,
    pub sender: MpStats,
    pub receiver: MpStats,
    /// The sending connection's LRT counters (source symbols, repairs by cause, redundancy).
    pub sender_lrt: ConnStats,
    /// The super-arm of each round the sender played (the first 10 000).
    pub rounds: Vec<Vec<usize>>,
    /// Bytes every path carried both ways, below the multipath layer included.
    pub wire_bytes: u64,
}

/// A run that cannot start.
#[derive(Debug, thiserror::Error)]
pub enum MpRunError {
    #[error("path link: {0}")]
    Link(#[from] LinkError),
    #[error("transport: {0}")]
    Lrt(#[from] ConfigError),
    #[error("receiver clock rate {0} ppm: the clock must run forward")]
    Clock(f64),
}

/// Runs `r`. Deterministic: the same run gives the same outcome.
pub fn run(r: &MpRun) -> Result<MpOutcome, MpRunError> {
    let n = r.paths.len().max(1);
    let lrt = Config { rate_bps: 10_000_000_000, ..Config::default() };
    let mut a = MpConnection::new(Connection::connect(lrt.clone(), r.seed, Instant::ZERO)?, r.mp.clone(), n);
    let mut b = MpConnection::new(Connection::accept(lrt, Instant::ZERO)?, r.mp.clone(), n);
    for &(i, s) in &r.federated {
        a.federated_start(i, s);
    }
    let mut links = Vec::with_capacity(n);
    for (i, p) in r.paths.iter().enumerate() {
        links.push(Duplex::<Vec<u8>>::new(p.link, p.link, r.seed.wrapping_mul(977).wrapping_add(i as u64))?);
    }
    let mut buf = vec![0u8; 70_000];
    let mut now = Instant::ZERO;
    let end = Instant::ZERO + r.limit;
    let (mut next, mut delivered) = (0u32, 0u32);
    let mut sent_at: Vec<Instant> = Vec::with_capacity(r.messages.min(1 << 20) as usize);
    let mut delays = Vec::with_capacity(r.messages.min(1 << 20) as usize);
    let mut sent = Vec::with_capacity(r.messages.min(1 << 20) as usize);
    let (mut in_order, mut established, mut completed) = (true, None, None);
    let (mut last_delivery, mut max_stall) = (None::<Instant>, Duration::ZERO);
    let mut wire = 0u64;
    // The receiver's clock, and back (rounded up to the nanosecond, so its deadlines are never
    // early; exact when the clocks agree).
    let rate = 1.0 + r.receiver_clock_ppm * 1e-6;
    if !(rate.is_finite() && rate > 0.0) {
        return Err(MpRunError::Clock(r.receiver_clock_ppm));
    }
    let on_b = |t: Instant| Instant::ZERO + t.saturating_duration_since(Instant::ZERO).mul_f64(rate);
    let from_b = |t: Instant| {
        let ns = t.saturating_duration_since(Instant::ZERO).as_nanos() as f64 / rate;
        Instant::ZERO + Duration::from_nanos(ns.ceil() as u64)
    };
    let mut next_change = vec![0usize; n];
    let mut next_hint = vec![0usize; n];
    while now < end && delivered < r.messages {
        let t = now.saturating_duration_since(Instant::ZERO);
        for (p, path) in r.paths.iter().enumerate() {
            while let Some(&(_, params)) = path.changes.get(next_change[p]).filter(|c| c.0 <= t) {
                links[p].up.set_params(params)?;
                links[p].down.set_params(params)?;
                next_change[p] += 1;
            }
            while let Some(&(_, hint)) = path.rate_hints.get(next_hint[p]).filter(|c| c.0 <= t) {
                a.set_rate_hint(p, hint);
                next_hint[p] += 1;
            }
        }
        a.handle_timeout(now);
        b.handle_timeout(on_b(now));
        if a.conn().state() == &State::Established {
            established.get_or_insert(t);
            last_delivery.get_or_insert(now);
            while next < r.messages && a.conn().send_queued_bytes() < r.app_buffer_bytes {
                let mut m = vec![(next % 251) as u8; r.message_bytes];
                m[..4].copy_from_slice(&next.to_be_bytes());
                if a.conn_mut().send(&m).is_err() {
                    break;
                }
                sent_at.push(now);
                next += 1;
            }
        }
        for (from_a, c, at) in [(true, &mut a, now), (false, &mut b, on_b(now))] {
            while let Some((p, len)) = c.poll_transmit(at, &mut buf) {
                wire += (len + UNDER_MP) as u64;
                if !r.paths[p].out_at(t) {
                    let l = if from_a { &mut links[p].up } else { &mut links[p].down };
                    l.send(now, len + UNDER_MP, buf[..len].to_vec());
                }
            }
        }
        for (p, l) in links.iter_mut().enumerate() {
            while let Some(d) = l.up.pop_due(now) {
                b.handle_datagram(on_b(now), p, &d);
            }
            while let Some(d) = l.down.pop_due(now) {
                a.handle_datagram(now, p, &d);
            }
        }
        while let Ok(Some(m)) = b.conn_mut().recv() {
            let i = m.get(..4).map_or(u32::MAX, |h| u32::from_be_bytes([h[0], h[1], h[2], h[3]]));
            in_order &= i == delivered;
            if let Some(&s) = sent_at.get(i as usize) {
                delays.push(now.saturating_duration_since(s).as_secs_f64() * 1e3);
                sent.push(s.saturating_duration_since(Instant::ZERO).as_secs_f64() * 1e3);
            }
            if let Some(l) = last_delivery {
                max_stall = max_stall.max(now.saturating_duration_since(l));
            }
            last_delivery = Some(now);
            delivered += 1;
            if delivered == r.messages {
                completed = Some(t);
            }
        }
        let wake = [a.poll_timeout(), b.poll_timeout().map(from_b)]
            .into_iter()
            .chain(links.iter().flat_map(|l| [l.up.next_at(), l.down.next_at()]))
            .flatten()
            .min()
            .unwrap_or(now + Duration::from_millis(5));
        // Outage edges, link changes and the application's writes need no wake-up of their
        // own: 5 ms steps at most keep them on time.
        now = wake.max(now + Duration::from_micros(1)).min(now + Duration::from_millis(5));
    }
    if delivered < r.messages
        && let Some(l) = last_delivery
    {
        max_stall = max_stall.max(now.saturating_duration_since(l));
    }
    // Over the connection's life up to the last delivery (the whole transfer when it
    // completed; what arrived by the limit otherwise).
    let last = completed.or(last_delivery.map(|l| l.saturating_duration_since(Instant::ZERO)));
    let goodput_mbps = match (established, last) {
        (Some(s), Some(e)) if e > s => {
            f64::from(delivered) * r.message_bytes as f64 * 8.0 / (e - s).as_secs_f64() / 1e6
        }
        _ => 0.0,
    };
    Ok(MpOutcome {
        delivered,
        in_order,
        established,
        completed,
        goodput_mbps,
        delays_ms: delays,
        sent_ms: sent,
        max_stall_ms: max_stall.as_secs_f64() * 1e3,
        sender: a.stats(),
        receiver: b.stats(),
        sender_lrt: a.conn().stats(),
        rounds: a.rounds_played().to_vec(),
        wire_bytes: wire,
    })
}

#[cfg(test)]
mod tests;
