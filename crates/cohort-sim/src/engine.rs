//! The simulation loop: LRT connections over a point-to-point network or a shared 802.11
//! channel, with the scenario's faults, in virtual time.

use crate::scenario::{App, Fault, Network, Scenario};
use cohort_medium::link::{Duplex, Jitter, LinkParams, LossModel};
use cohort_medium::wifi::scenario::PhyStandard;
use cohort_medium::wifi::{Ac, Dest, EdcaParams, Medium, MediumEvent, StationConfig};
use cohort_proto::lrt::Connection;
use cohort_time::Instant;
use serde::Serialize;
use std::io::Write;
use std::time::Duration;

/// Bytes each LRT packet carries besides itself on a real network: secure frame, UDP and
/// IPv4 (28), and on Wi-Fi LLC/SNAP (8).
const FRAME_UDP_IP: usize = cohort_wire::frame::OVERHEAD + 28;
const LLC: usize = 8;

/// What happened to one flow.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct FlowResult {
    pub sent: u64,
    pub delivered: u64,
    pub in_order: bool,
    pub duplicates: u64,
    pub corrupted: u64,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
    /// Application bytes delivered per second from the first send to the last delivery.
    pub goodput_mbps: f64,
    /// Messages sent before a crash of either end that were never delivered (allowed: at most
    /// once across a crash).
    pub lost_to_crashes: u64,
    /// Coders the sender opened, full-rank ACKs of finished coders the receiver sent, and
    /// symbols it dropped as belonging to an out-of-date coder (seed 004 §III-B, D), since
    /// the flow's last restart.
    pub coders_opened: u64,
    pub full_rank_acks: u64,
    pub out_of_date: u64,
}

/// The result of one seeded run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Outcome {
    pub scenario: String,
    pub seed: u64,
    /// FNV-1a over every packet sent and message delivered, with times: the run's fingerprint.
    pub trace_hash: String,
    pub flows: Vec<FlowResult>,
    /// Broken invariants (exactly once, in order, byte-identical, everything delivered).
    pub violations: Vec<String>,
    pub packets: u64,
    pub packets_dropped_by_faults: u64,
    pub simulated_s: f64,
}

impl Outcome {
    pub fn ok(&self) -> bool {
        self.violations.is_empty()
    }
}

#[derive(Debug, Clone)]
struct Packet {
    flow: usize,
    /// The connection generation it belongs to; a restart makes older packets stale.
    epoch: u32,
    to_server: bool,
    pn: u64,
    bytes: Vec<u8>,
}

enum Net {
    P2p(Vec<Duplex<Packet>>),
    Wifi(Box<Medium<Packet>>),
}

struct Hash(u64);

impl Hash {
    fn feed(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 ^= u64::from(*b);
            self.0 = self.0.wrapping_mul(0x100_0000_01b3);
        }
    }
}

/// Marks a reply's flow number, so a reply can never pass for a request.
const REPLY: usize = 0x8000;

fn message(flow: usize, seq: u64, size: usize) -> Vec<u8> {
    let mut m = vec![0u8; size];
    m[..4].copy_from_slice(&(flow as u32).to_be_bytes());
    m[4..12].copy_from_slice(&seq.to_be_bytes());
    for (k, b) in m.iter_mut().enumerate().skip(12) {
        *b = (seq as usize).wrapping_mul(131).wrapping_add(k ^ flow) as u8;
    }
    m
}

fn network(s: &Scenario, seed: u64) -> Net {
    match &s.network {
        Network::P2p { owd_ms, rate_mbps, loss, ge_p_gb, ge_p_bg, jitter_ms, duplicate } => {
            let loss = match (ge_p_gb, ge_p_bg) {
                (Some(gb), Some(bg)) => {
                    LossModel::GilbertElliott { p_gb: *gb, p_bg: *bg, loss_good: 0.0, loss_bad: *loss }
                }
                _ => LossModel::Iid { p: *loss },
            };
            let jitter = if *jitter_ms > 0.0 {
                Jitter::Uniform { max: Duration::from_secs_f64(jitter_ms / 1000.0) }
            } else {
                Jitter::None
            };
            let p = LinkParams {
                loss,
                jitter,
                duplicate: *duplicate,
                ..LinkParams::clean(Duration::from_secs_f64(owd_ms / 1000.0), (rate_mbps * 1e6) as u64)
            };
            let links = (0..s.flows.len())
                .map(|i| Duplex::new(p, p, seed.wrapping_mul(1000).wrapping_add(i as u64)).expect("validated scenario"))
                .collect();
            Net::P2p(links)
        }
        Network::Wifi { .. } => Net::Wifi(Box::new(wifi_medium(&s.network, s.nodes, seed).expect("a wifi network"))),
    }
}

/// The shared channel `cohort sim` runs for a Wi-Fi `network` of `nodes` stations, frames
/// carried as `H` (`None` for a point-to-point network). The node's qdisc is folded into its
/// hardware queue: a frame is refused only when both are full.
pub fn wifi_medium<H: Clone>(network: &Network, nodes: usize, seed: u64) -> Option<Medium<H>> {
    let Network::Wifi { phy, data_mbps, queue_depth, fer, aggregation, timing, qdisc_packets, nic } = network else {
        return None;
    };
    let phy = match phy.as_str() {
        "b" => PhyStandard::B,
        "g" => PhyStandard::G,
        "n" => PhyStandard::N,
        "ac" => PhyStandard::Ac,
        _ => PhyStandard::A,
    }
    .phy(*data_mbps);
    let st = StationConfig {
        queue_depth: queue_depth.saturating_add(*qdisc_packets),
        fer: *fer,
        ampdu: aggregation.limits(&phy),
        nic: *nic,
        ..StationConfig::default()
    };
    let m = Medium::new(phy, EdcaParams::defaults(&phy), &vec![st; nodes], seed).expect("validated scenario");
    Some(m.with_timing(*timing))
}

/// Node-local time under clock drift.
fn local(t: Instant, ppm: f64) -> Instant {
    Instant::from_nanos((t.as_nanos() as f64 * (1.0 + ppm * 1e-6)) as u64)
}

fn global(t: Instant, ppm: f64) -> Instant {
    Instant::from_nanos((t.as_nanos() as f64 / (1.0 + ppm * 1e-6)).ceil() as u64)
}

/// Where a run writes what it did, besides its [`Outcome`].
#[derive(Default)]
pub struct Recorder<'a> {
    /// One JSON object per line for every packet sent and message delivered.
    pub trace: Option<&'a mut dyn Write>,
    /// Every packet sent, as a pcap file (nanosecond timestamps, link type USER0 = 147). Each
    /// record is a 4-byte pseudo-header (flow u16 BE, direction: 0 client to server, 1 back;
    /// a zero byte) followed by the plaintext LRT packet.
    pub pcap: Option<&'a mut dyn Write>,
}

impl std::fmt::Debug for Recorder<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Recorder").field("trace", &self.trace.is_some()).field("pcap", &self.pcap.is_some()).finish()
    }
}

fn pcap_header(w: &mut dyn Write) -> std::io::Result<()> {
    let mut h = Vec::with_capacity(24);
    h.extend_from_slice(&0xa1b2_3c4du32.to_le_bytes());
    h.extend_from_slice(&2u16.to_le_bytes());
    h.extend_from_slice(&4u16.to_le_bytes());
    h.extend_from_slice(&[0; 8]);
    h.extend_from_slice(&65_535u32.to_le_bytes());
    h.extend_from_slice(&147u32.to_le_bytes());
    w.write_all(&h)
}

fn pcap_record(w: &mut dyn Write, t: Instant, flow: usize, back: bool, pkt: &[u8]) -> std::io::Result<()> {
    let ns = t.as_nanos();
    let len = (pkt.len() + 4) as u32;
    let mut r = Vec::with_capacity(16 + pkt.len() + 4);
    r.extend_from_slice(&((ns / 1_000_000_000) as u32).to_le_bytes());
    r.extend_from_slice(&((ns % 1_000_000_000) as u32).to_le_bytes());
    r.extend_from_slice(&len.to_le_bytes());
    r.extend_from_slice(&len.to_le_bytes());
    r.extend_from_slice(&(flow as u16).to_be_bytes());
    r.extend_from_slice(&[u8::from(back), 0]);
    r.extend_from_slice(pkt);
    w.write_all(&r)
}

/// Faults drawn from the seed: `n` partitions or loss bursts of up to 300 ms between the
/// endpoints of random flows, somewhere in the sending period.
fn random_faults(s: &Scenario, rand01: &mut impl FnMut() -> f64) -> Vec<Fault> {
    (0..s.random_faults)
        .filter(|_| !s.flows.is_empty())
        .map(|_| {
            let at_s = 0.2 + rand01() * s.duration_s;
            let until_s = at_s + 0.02 + rand01() * 0.28;
            let f = &s.flows[(rand01() * s.flows.len() as f64) as usize % s.flows.len()];
            if rand01() < 0.5 {
                Fault::Partition { at_s, until_s, a: f.from, b: f.to }
            } else {
                Fault::Loss { at_s, until_s, p: 0.3 + 0.6 * rand01() }
            }
        })
        .collect()
}

/// Runs scenario `s` with `seed`, recording into `rec`.
pub fn run(s: &Scenario, seed: u64, rec: Recorder<'_>) -> Outcome {
    let Recorder { mut trace, mut pcap } = rec;
    if let Some(w) = pcap.as_deref_mut() {
        let _ = pcap_header(w);
    }
    let mut net = network(s, seed);
    let mut drift = vec![0.0f64; s.nodes];
    for f in &s.faults {
        if let Fault::Drift { node, ppm } = *f {
            drift[node] = ppm;
        }
    }
    let cfg = s.lrt.config();
    let fresh = |f: usize, epoch: u32, now: Instant| {
        let id = (f as u64 + 1) | u64::from(epoch) << 32;
        let c = Connection::connect(cfg.clone(), id, now).expect("validated with the scenario");
        (c, Connection::accept(cfg.clone(), now).expect("validated with the scenario"))
    };
    let mut ends: Vec<(Connection, Connection)> = (0..s.flows.len()).map(|f| fresh(f, 0, Instant::ZERO)).collect();
    let mut epoch = vec![0u32; s.flows.len()];
    // First message of each connection after a restart: messages before it may be lost.
    let mut resync: Vec<Vec<u64>> = vec![vec![]; s.flows.len()];
    let crashes: Vec<(usize, f64, f64)> = s
        .faults
        .iter()
        .filter_map(
            |f| if let Fault::Crash { node, at_s, restart_s } = *f { Some((node, at_s, restart_s)) } else { None },
        )
        .collect();
    let mut restarted = vec![false; crashes.len()];
    let is_down = |node: usize, secs: f64| crashes.iter().any(|&(n, a, r)| n == node && (a..r).contains(&secs));
    let mut pns = vec![(0u64, 0u64); s.flows.len()];
    let mut next_msg = vec![0u64; s.flows.len()];
    // When each message (request, for request-reply) was handed to the connection.
    let mut sent_at: Vec<Vec<Instant>> = vec![vec![]; s.flows.len()];
    let mut got: Vec<Vec<(u64, Instant)>> = vec![vec![]; s.flows.len()];
    let mut out = Outcome {
        scenario: s.name.clone(),
        seed,
        trace_hash: String::new(),
        flows: vec![],
        violations: vec![],
        packets: 0,
        packets_dropped_by_faults: 0,
        simulated_s: 0.0,
    };
    let mut hash = Hash(0xcbf2_9ce4_8422_2325);
    let mut rng_state = seed ^ 0x9E37_79B9_7F4A_7C15;
    let mut rand01 = move || {
        rng_state ^= rng_state << 13;
        rng_state ^= rng_state >> 7;
        rng_state ^= rng_state << 17;
        (rng_state >> 11) as f64 / (1u64 << 53) as f64
    };
    let mut faults = s.faults.clone();
    faults.extend(random_faults(s, &mut rand01));
    let interval = |f: usize| Duration::from_secs_f64(s.flows[f].interval_ms / 1000.0);
    let send_at = |f: usize, i: u64| Instant::from_millis(200) + interval(f).mul_f64(i as f64);
    let hard_end = Instant::ZERO + Duration::from_secs_f64(s.duration_s + s.drain_s);
    let mut now = Instant::ZERO;
    let mut plain = vec![0u8; 70_000];
    let record = |hash: &mut Hash, trace: &mut Option<&mut dyn Write>, line: String| {
        hash.feed(line.as_bytes());
        if let Some(w) = trace.as_deref_mut() {
            let _ = writeln!(w, "{line}");
        }
    };
    loop {
        let secs_now = now.since_epoch().as_secs_f64();
        // 0. Restarts: every flow of a restarted node gets a new connection.
        for (k, &(node, _, restart_s)) in crashes.iter().enumerate() {
            if restarted[k] || secs_now < restart_s {
                continue;
            }
            restarted[k] = true;
            for (f, flow) in s.flows.iter().enumerate() {
                if flow.from == node || flow.to == node {
                    epoch[f] += 1;
                    ends[f] = fresh(f, epoch[f], now);
                    pns[f] = (0, 0);
                    resync[f].push(next_msg[f]);
                    record(&mut hash, &mut trace, format!("{{\"t\":{},\"restart\":{f}}}", now.as_nanos()));
                }
            }
        }
        // 1. Applications (a crashed node's do nothing).
        for (f, flow) in s.flows.iter().enumerate() {
            if is_down(flow.from, secs_now) {
                continue;
            }
            match flow.app {
                App::Periodic | App::RequestReply => {
                    while next_msg[f] < flow.count
                        && send_at(f, next_msg[f]) <= now
                        && send_at(f, next_msg[f]).since_epoch().as_secs_f64() < s.duration_s + 0.2
                    {
                        let _ = ends[f].0.send(&message(f, next_msg[f], flow.size));
                        sent_at[f].push(now);
                        next_msg[f] += 1;
                    }
                }
                App::Bulk => {
                    while next_msg[f] < flow.count
                        && now >= send_at(f, 0)
                        && ends[f].0.send(&message(f, next_msg[f], flow.size)).is_ok()
                    {
                        sent_at[f].push(now);
                        next_msg[f] += 1;
                    }
                }
            }
        }
        // 2. The network delivers.
        let mut arrivals: Vec<Packet> = vec![];
        match &mut net {
            Net::P2p(links) => {
                for d in links.iter_mut() {
                    while let Some(p) = d.up.pop_due(now) {
                        arrivals.push(p);
                    }
                    while let Some(p) = d.down.pop_due(now) {
                        arrivals.push(p);
                    }
                }
            }
            Net::Wifi(m) => {
                m.handle_timeout(now);
                while let Some(ev) = m.poll_event(now) {
                    if let MediumEvent::Delivered { handle, .. } = ev {
                        arrivals.push(handle);
                    }
                }
            }
        }
        for p in arrivals {
            let flow = &s.flows[p.flow];
            let secs = now.since_epoch().as_secs_f64();
            let cut = faults.iter().any(|fault| match *fault {
                Fault::Partition { at_s, until_s, a, b } => {
                    (at_s..until_s).contains(&secs)
                        && ((a == flow.from && b == flow.to) || (a == flow.to && b == flow.from))
                }
                Fault::Loss { at_s, until_s, p } => (at_s..until_s).contains(&secs) && rand01() < p,
                Fault::Drift { .. } | Fault::Crash { .. } => false,
            });
            let target = if p.to_server { flow.to } else { flow.from };
            let cut = cut || p.epoch != epoch[p.flow] || is_down(target, secs);
            if cut {
                out.packets_dropped_by_faults += 1;
                continue;
            }
            let (node, conn) =
                if p.to_server { (flow.to, &mut ends[p.flow].1) } else { (flow.from, &mut ends[p.flow].0) };
            conn.handle_packet(local(now, drift[node]), p.pn, &p.bytes);
        }
        // 3. Endpoints run their timers and transmit (a crashed node's are frozen).
        for (f, flow) in s.flows.iter().enumerate() {
            for to_server in [true, false] {
                let (node, peer) = if to_server { (flow.from, flow.to) } else { (flow.to, flow.from) };
                if is_down(node, secs_now) {
                    continue;
                }
                let conn = if to_server { &mut ends[f].0 } else { &mut ends[f].1 };
                let t = local(now, drift[node]);
                conn.handle_timeout(t);
                loop {
                    let pn = if to_server { &mut pns[f].0 } else { &mut pns[f].1 };
                    let Some(n) = conn.poll_transmit(t, *pn, &mut plain) else { break };
                    let pkt = Packet { flow: f, epoch: epoch[f], to_server, pn: *pn, bytes: plain[..n].to_vec() };
                    *pn += 1;
                    out.packets += 1;
                    record(
                        &mut hash,
                        &mut trace,
                        format!("{{\"t\":{},\"send\":{f},\"up\":{to_server},\"len\":{n}}}", now.as_nanos()),
                    );
                    if let Some(w) = pcap.as_deref_mut() {
                        let _ = pcap_record(w, now, f, !to_server, &plain[..n]);
                    }
                    match &mut net {
                        Net::P2p(links) => {
                            let link = if to_server { &mut links[f].up } else { &mut links[f].down };
                            link.send(now, n + FRAME_UDP_IP, pkt);
                        }
                        Net::Wifi(m) => {
                            let ac = Ac::from_dscp(flow.dscp);
                            // A full hardware queue drops the frame (counted by the medium).
                            let _ = m.enqueue(now, node, ac, Dest::Unicast(peer), n + FRAME_UDP_IP + LLC, pkt);
                        }
                    }
                }
            }
            // 4. The receiving applications: the server takes messages (and answers requests),
            //    the client of a request-reply flow takes the replies. A crashed node reads
            //    nothing; what it had not read is lost with its state.
            while !is_down(flow.to, secs_now)
                && let Ok(Some(m)) = ends[f].1.recv()
            {
                let seq = m.get(4..12).map_or(u64::MAX, |b| u64::from_be_bytes(b.try_into().unwrap_or([0xFF; 8])));
                let intact = seq < flow.count && m == message(f, seq, flow.size);
                record(
                    &mut hash,
                    &mut trace,
                    format!("{{\"t\":{},\"deliver\":{f},\"seq\":{seq},\"intact\":{intact}}}", now.as_nanos()),
                );
                if flow.app == App::RequestReply {
                    if intact {
                        let _ = ends[f].1.send(&message(REPLY | f, seq, flow.reply_size.unwrap_or(flow.size)));
                    } else {
                        got[f].push((u64::MAX, now));
                    }
                } else {
                    got[f].push((if intact { seq } else { u64::MAX }, now));
                }
            }
            while !is_down(flow.from, secs_now)
                && let Ok(Some(m)) = ends[f].0.recv()
            {
                let seq = m.get(4..12).map_or(u64::MAX, |b| u64::from_be_bytes(b.try_into().unwrap_or([0xFF; 8])));
                let intact = flow.app == App::RequestReply
                    && seq < flow.count
                    && m == message(REPLY | f, seq, flow.reply_size.unwrap_or(flow.size));
                record(
                    &mut hash,
                    &mut trace,
                    format!("{{\"t\":{},\"reply\":{f},\"seq\":{seq},\"intact\":{intact}}}", now.as_nanos()),
                );
                got[f].push((if intact { seq } else { u64::MAX }, now));
            }
        }
        // Delivery is in order, so once the last message is in, nothing more can come.
        let done = s.flows.iter().enumerate().all(|(f, fl)| got[f].iter().any(|&(q, _)| q == fl.count - 1));
        if done {
            break;
        }
        // 5. Jump to the next event.
        let mut next: Vec<Instant> = crashes
            .iter()
            .zip(&restarted)
            .filter(|&(_, &done)| !done)
            .flat_map(|(&(_, at, re), _)| [at, re])
            .map(|x| Instant::ZERO + Duration::from_secs_f64(x))
            .filter(|&t| t > now)
            .collect();
        for (f, fl) in s.flows.iter().enumerate() {
            let due = send_at(f, if fl.app == App::Bulk { 0 } else { next_msg[f] });
            if next_msg[f] < fl.count && due.since_epoch().as_secs_f64() < s.duration_s + 0.2 && due > now {
                next.push(due);
            }
            // A crashed node's timers are frozen until its restart (which is an event above).
            if !is_down(fl.from, secs_now) {
                next.extend(ends[f].0.poll_timeout().map(|t| global(t, drift[fl.from])));
            }
            if !is_down(fl.to, secs_now) {
                next.extend(ends[f].1.poll_timeout().map(|t| global(t, drift[fl.to])));
            }
        }
        match &net {
            Net::P2p(links) => {
                links.iter().for_each(|d| next.extend(d.up.next_at().into_iter().chain(d.down.next_at())))
            }
            Net::Wifi(m) => next.extend(m.poll_timeout()),
        }
        // A drifting node's timeout can round to just before `now`: always move forward.
        let Some(t) = next.into_iter().min() else { break };
        now = t.max(now + Duration::from_nanos(1));
        if now > hard_end {
            break;
        }
    }
    out.simulated_s = now.since_epoch().as_secs_f64();
    for (f, fl) in s.flows.iter().enumerate() {
        let (cs, ss) = (ends[f].0.stats(), ends[f].1.stats());
        let mut r = FlowResult {
            sent: next_msg[f],
            in_order: true,
            coders_opened: cs.coders_opened,
            full_rank_acks: ss.full_rank_acks_sent,
            out_of_date: ss.out_of_date,
            ..Default::default()
        };
        let mut seen = vec![false; fl.count as usize];
        let mut expect = 0;
        let mut delays = vec![];
        // Messages sent before the last restart of the flow may be lost; a gap is allowed only
        // up to a restart point.
        let lossy_below = resync[f].last().copied().unwrap_or(0);
        for &(seq, at) in &got[f] {
            if seq == u64::MAX {
                r.corrupted += 1;
                continue;
            }
            if seen[seq as usize] {
                r.duplicates += 1;
                continue;
            }
            seen[seq as usize] = true;
            r.delivered += 1;
            let gap_ok = seq > expect && resync[f].iter().any(|&rs| expect < rs && rs <= seq && seq == rs);
            r.in_order &= seq == expect || gap_ok;
            expect = seq + 1;
            delays.push((at - sent_at[f][seq as usize]).as_secs_f64() * 1000.0);
        }
        r.lost_to_crashes = (0..lossy_below.min(r.sent)).filter(|&q| !seen[q as usize]).count() as u64;
        delays.sort_by(f64::total_cmp);
        let q = |x: f64| {
            delays.get(((delays.len() as f64 * x) as usize).min(delays.len().saturating_sub(1))).copied().unwrap_or(0.0)
        };
        (r.p50_ms, r.p99_ms, r.max_ms) = (q(0.5), q(0.99), delays.last().copied().unwrap_or(0.0));
        if let (Some(first), Some(&(_, last))) = (sent_at[f].first(), got[f].last()) {
            let secs = (last - *first).as_secs_f64().max(1e-9);
            r.goodput_mbps = r.delivered as f64 * fl.size as f64 * 8.0 / secs / 1e6;
        }
        if r.corrupted > 0 {
            out.violations.push(format!("flow {f}: {} messages corrupted", r.corrupted));
        }
        if r.duplicates > 0 {
            out.violations.push(format!("flow {f}: {} messages delivered twice", r.duplicates));
        }
        if !r.in_order {
            out.violations.push(format!("flow {f}: messages out of order"));
        }
        if r.delivered + r.lost_to_crashes < r.sent {
            out.violations.push(format!(
                "flow {f}: {} of {} messages delivered by {:.1} s",
                r.delivered, r.sent, out.simulated_s
            ));
        }
        out.flows.push(r);
    }
    out.trace_hash = format!("{:016x}", hash.0);
    out
}
