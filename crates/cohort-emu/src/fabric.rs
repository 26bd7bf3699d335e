//! The emulator's switching fabric, sans-IO: Ethernet frames from ports go through the channel
//! models and come out of other ports at the times the models say. The real-time loop
//! ([`crate::emulator`]) feeds it frames with their arrival time and sends what it hands back;
//! tests drive it with made-up times.
//!
//! In point-to-point mode each port is one end of one link; a frame entering at one end goes
//! through that direction's [`Link`] model to the other end. In Wi-Fi mode each port is a
//! station of one [`Medium`]: the destination MAC picks the receiving station (group
//! addresses are 802.11 broadcasts: basic rate, no ACK, no retry; an unknown unicast address
//! is flooded the same way, as a bridge would), and the access category comes from the
//! frame's priority the way Linux's `cfg80211_classify8021d` picks it: the VLAN PCP if
//! tagged, else the DSCP of an IPv4/IPv6 header (RFC 8325 mapping), else best effort.
//!
//! A point-to-point link can follow a [`Trace`] (a robot moving past access points, a
//! recorded field measurement): from the time it starts playing, each step's parameters apply
//! to both directions of the link when their time comes, and while a step says the link is out
//! every frame offered to it is lost (counted as `outage_drops`; frames already on their way
//! still arrive), the same rules the simulator's multipath paths follow.

use crate::scenario::{Mode, TestbedScenario};
use cohort_medium::link::{Link, LinkParams};
use cohort_medium::trace::Trace;
use cohort_medium::wifi::{Ac, Dest, DropReason, Medium, MediumEvent};
use cohort_net::preempt::CardLoad;
use cohort_time::Instant;
use serde::{Deserialize, Serialize};
use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

/// A frame in flight; shared, because a broadcast reaches several stations.
pub type FrameBuf = Arc<[u8]>;

/// Ethernet header: destination, source, EtherType.
pub const ETH_HEADER: usize = 14;
/// An 802.11 data frame carries the Ethernet payload behind an 8-byte LLC/SNAP header
/// instead of the 14-byte Ethernet header.
const LLC_SNAP: usize = 8;

/// Where a port sits in the topology.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PortRole {
    /// End `side` (0 = a, 1 = b) of point-to-point link `link`.
    LinkEnd { link: usize, side: usize },
    /// Station `station` of the shared channel.
    Station { station: usize },
}

/// One emulator-side interface and what is behind it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Port {
    /// Node index in the scenario.
    pub node: usize,
    pub role: PortRole,
    /// MAC address of the node's interface behind this port.
    pub mac: [u8; 6],
}

/// A frame the fabric did not carry, by reason.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Refused {
    /// Shorter than an Ethernet header.
    Malformed,
    /// The port does not exist.
    NoPort,
    /// The channel's queue was full.
    QueueFull,
}

/// Why a trace cannot be played.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum TraceRefused {
    #[error("link {0} does not exist (the scenario has {1})")]
    NoLink(usize, usize),
    #[error("only point-to-point links follow traces")]
    NotP2p,
    #[error("trace step {step}: {why}")]
    Invalid { step: usize, why: String },
}

/// A trace a link is playing.
struct Playing {
    start: Instant,
    steps: Trace,
    /// The next step to apply.
    next: usize,
    out: bool,
}

struct P2pLink {
    ports: [usize; 2],
    dir: [Link<FrameBuf>; 2],
    playing: Option<Playing>,
    /// Frames offered while the link was out, per direction.
    outage_drops: [u64; 2],
}

impl P2pLink {
    /// Applies the trace's steps due by `now`; whether the link is out.
    fn advance(&mut self, now: Instant) -> bool {
        let Some(p) = &mut self.playing else { return false };
        while let Some(&(at, state)) = p.steps.get(p.next) {
            if p.start + at > now {
                break;
            }
            match state {
                Some(params) => {
                    for d in &mut self.dir {
                        // A step sets rate, delay and loss; the direction keeps its loss
                        // clock (the scenario's `loss_slot_us`). Checked when the trace was
                        // accepted: this cannot fail.
                        let _ = d.set_params(LinkParams { loss_clock: d.params().loss_clock, ..params });
                    }
                    p.out = false;
                }
                None => p.out = true,
            }
            p.next += 1;
        }
        p.out
    }
}

enum Net {
    P2p(Vec<P2pLink>),
    Wifi(Box<Wifi>),
}

/// The shared channel, and in front of each station's hardware queues the qdisc that holds
/// frames while they are full (mac80211 stops the kernel's queue rather than dropping).
struct Wifi {
    medium: Medium<FrameBuf>,
    by_mac: HashMap<[u8; 6], usize>,
    /// Per station and access category.
    qdisc: Vec<[VecDeque<Pending>; 4]>,
    /// Each station's hardware queue depth.
    depth: Vec<usize>,
    qdisc_limit: usize,
    /// What each station's card (its qdisc and hardware queues) holds, as a driver's
    /// completion counters see it, and whether it changed since it was last taken.
    loads: Vec<CardLoad>,
    changed: Vec<bool>,
}

/// A frame waiting in a qdisc.
struct Pending {
    dest: Dest,
    msdu: usize,
    buf: FrameBuf,
}

impl Wifi {
    fn accepted(&mut self, station: usize, bytes: usize) {
        let l = &mut self.loads[station];
        l.pending_bytes += bytes as u64;
        l.pending_frames += 1;
        self.changed[station] = true;
    }

    /// A frame left station `station`'s card: completed (`sent`) or dropped.
    fn left(&mut self, station: usize, bytes: usize, sent: bool) {
        let Some(l) = self.loads.get_mut(station) else { return };
        l.pending_bytes = l.pending_bytes.saturating_sub(bytes as u64);
        l.pending_frames = l.pending_frames.saturating_sub(1);
        if sent {
            l.sent_bytes += bytes as u64;
            l.sent_frames += 1;
        }
        self.changed[station] = true;
    }

    /// Moves waiting frames into hardware queues with room.
    fn refill(&mut self, now: Instant) {
        for (st, qs) in self.qdisc.iter_mut().enumerate() {
            for ac in Ac::ALL {
                let q = &mut qs[ac.index()];
                while !q.is_empty() && self.medium.queue_len(st, ac) < self.depth[st] {
                    let Some(p) = q.pop_front() else { break };
                    // Room was checked: this cannot be refused.
                    let _ = self.medium.enqueue(now, st, ac, p.dest, p.msdu, p.buf);
                }
            }
        }
    }

    fn backlog(&self) -> usize {
        self.qdisc.iter().flatten().map(VecDeque::len).sum()
    }
}

/// Counters of frames through the fabric.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FabricCounters {
    pub frames_in: u64,
    pub bytes_in: u64,
    pub frames_out: u64,
    pub bytes_out: u64,
    pub malformed: u64,
    pub queue_full: u64,
    /// Unicast frames to an address no station has, flooded as broadcasts.
    pub flooded: u64,
    /// Frames the channel gave up on (retry limit, broadcast collision).
    pub channel_drops: u64,
    /// Frames that waited in a station's qdisc for room in its hardware queue.
    #[serde(default)]
    pub qdisc_queued: u64,
    /// Frames waiting in qdiscs now.
    #[serde(default)]
    pub qdisc_backlog: u64,
    /// Frames offered to a point-to-point link while its trace had it out.
    #[serde(default)]
    pub outage_drops: u64,
}

/// One direction of a point-to-point link.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LinkStatus {
    pub link: usize,
    pub from: String,
    pub to: String,
    pub offered: u64,
    /// Bytes of the frames offered (Ethernet header included).
    pub offered_bytes: u64,
    pub delivered: u64,
    pub lost: u64,
    pub queue_drops: u64,
    pub duplicated: u64,
    pub reordered: u64,
    pub queued_packets: usize,
    /// Frames offered while the link's trace had it out.
    #[serde(default)]
    pub outage_drops: u64,
    /// Whether the link's trace has it out now.
    #[serde(default)]
    pub out: bool,
    /// Its transmitter's rate now (a trace changes it), bit/s.
    #[serde(default)]
    pub rate_bps: u64,
}

/// One access category of one station.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AcStatus {
    pub ac: String,
    pub queue_len: usize,
    pub max_queue: usize,
    pub enqueued: u64,
    pub successes: u64,
    pub queue_drops: u64,
    pub retry_drops: u64,
    pub collisions: u64,
    pub airtime_ms: f64,
    /// Frames waiting in the node's qdisc for this queue.
    #[serde(default)]
    pub qdisc_len: usize,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StationStatus {
    pub node: String,
    pub acs: Vec<AcStatus>,
}

/// What `cohort testbed status` shows.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FabricStatus {
    pub mode: Mode,
    pub counters: FabricCounters,
    pub links: Vec<LinkStatus>,
    pub stations: Vec<StationStatus>,
    /// Share of time the shared channel was busy since the start (Wi-Fi mode).
    pub channel_busy_ms: f64,
}

/// The fabric of one scenario. See the [module docs](self).
pub struct Fabric {
    nodes: Vec<String>,
    ports: Vec<Port>,
    net: Net,
    counters: FabricCounters,
    out: Vec<(usize, FrameBuf, Instant)>,
}

impl std::fmt::Debug for Fabric {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Fabric").field("ports", &self.ports).field("counters", &self.counters).finish()
    }
}

/// The MAC address the testbed gives a node's interface: locally administered, unique per run.
pub fn node_mac(mode: Mode, link_or_station: usize, side: usize) -> [u8; 6] {
    let m = match mode {
        Mode::P2p => 0x77,
        Mode::Wifi => 0x78,
    };
    [0x02, 0xc0, m, (link_or_station >> 8) as u8, link_or_station as u8, side as u8]
}

/// The ports of a scenario, in the order the emulator opens its interfaces.
pub fn ports(s: &TestbedScenario) -> Vec<Port> {
    match s.mode {
        Mode::P2p => s
            .links
            .iter()
            .enumerate()
            .flat_map(|(k, l)| {
                [(&l.a, 0), (&l.b, 1)].map(|(n, side)| Port {
                    node: s.node_index(n).expect("validated"),
                    role: PortRole::LinkEnd { link: k, side },
                    mac: node_mac(Mode::P2p, k, side),
                })
            })
            .collect(),
        Mode::Wifi => (0..s.nodes.len())
            .map(|i| Port { node: i, role: PortRole::Station { station: i }, mac: node_mac(Mode::Wifi, i, 0) })
            .collect(),
    }
}

/// The access category of an Ethernet frame (see the [module docs](self)).
pub fn classify(frame: &[u8]) -> Ac {
    if frame.len() < ETH_HEADER {
        return Ac::Be;
    }
    let ethertype = u16::from_be_bytes([frame[12], frame[13]]);
    let l3 = &frame[ETH_HEADER..];
    match ethertype {
        0x8100 if !l3.is_empty() => Ac::from_user_priority(l3[0] >> 5),
        0x0800 if l3.len() >= 2 && l3[0] >> 4 == 4 => Ac::from_tos(l3[1]),
        0x86dd if l3.len() >= 2 && l3[0] >> 4 == 6 => Ac::from_tos((l3[0] << 4) | (l3[1] >> 4)),
        _ => Ac::Be,
    }
}

fn mac_of(frame: &[u8], at: usize) -> [u8; 6] {
    let mut m = [0u8; 6];
    m.copy_from_slice(&frame[at..at + 6]);
    m
}

impl Fabric {
    /// The fabric of a validated scenario; its models draw from `scenario.seed`.
    pub fn new(s: &TestbedScenario) -> Result<Self, crate::scenario::ScenarioError> {
        let ports = ports(s);
        let net = match s.mode {
            Mode::P2p => {
                let mut links = Vec::with_capacity(s.links.len());
                for (k, l) in s.links.iter().enumerate() {
                    let (ab, ba): (LinkParams, LinkParams) = l.directions(s.seed, k)?;
                    let seed = s.seed.wrapping_mul(1_000_003).wrapping_add(2 * k as u64);
                    let link = |p, seed| Link::new(p, seed).expect("validated parameters");
                    let playing =
                        l.load_trace()?.map(|steps| Playing { start: Instant::ZERO, steps, next: 0, out: false });
                    links.push(P2pLink {
                        ports: [2 * k, 2 * k + 1],
                        dir: [link(ab, seed), link(ba, seed + 1)],
                        playing,
                        outage_drops: [0; 2],
                    });
                }
                Net::P2p(links)
            }
            Mode::Wifi => {
                let medium = s.build_medium().map_err(|e| crate::scenario::ScenarioError::Invalid(e.to_string()))?;
                let by_mac = ports.iter().enumerate().map(|(i, p)| (p.mac, i)).collect();
                let w = s.wifi.as_ref().expect("a wifi scenario has its spec");
                let depth = w.station_configs(&s.nodes).iter().map(|c| c.queue_depth).collect();
                let qdisc = s.nodes.iter().map(|_| Default::default()).collect();
                let n = s.nodes.len();
                Net::Wifi(Box::new(Wifi {
                    medium,
                    by_mac,
                    qdisc,
                    depth,
                    qdisc_limit: w.qdisc_packets,
                    loads: vec![CardLoad::default(); n],
                    changed: vec![false; n],
                }))
            }
        };
        Ok(Fabric { nodes: s.nodes.clone(), ports, net, counters: FabricCounters::default(), out: Vec::new() })
    }

    pub fn ports(&self) -> &[Port] {
        &self.ports
    }

    pub fn counters(&self) -> FabricCounters {
        self.counters
    }

    /// Point-to-point link `link` follows `trace` from `start` on (both directions; a trace
    /// it was playing is replaced). Every step's parameters are checked first.
    pub fn play(&mut self, link: usize, start: Instant, trace: Trace) -> Result<(), TraceRefused> {
        let Net::P2p(links) = &mut self.net else { return Err(TraceRefused::NotP2p) };
        let n = links.len();
        let l = links.get_mut(link).ok_or(TraceRefused::NoLink(link, n))?;
        check_trace(&trace)?;
        l.playing = Some(Playing { start, steps: trace, next: 0, out: false });
        l.advance(start);
        Ok(())
    }

    /// A frame arrived at `port` at `now`.
    pub fn ingress(&mut self, now: Instant, port: usize, frame: &[u8]) -> Result<(), Refused> {
        if port >= self.ports.len() {
            return Err(Refused::NoPort);
        }
        if frame.len() < ETH_HEADER {
            self.counters.malformed += 1;
            return Err(Refused::Malformed);
        }
        self.counters.frames_in += 1;
        self.counters.bytes_in += frame.len() as u64;
        let buf: FrameBuf = Arc::from(frame);
        match (&mut self.net, self.ports[port].role) {
            (Net::P2p(links), PortRole::LinkEnd { link, side }) => {
                use cohort_medium::link::SendOutcome;
                let l = &mut links[link];
                if l.advance(now) {
                    // Lost on the air, as the simulator loses what a path out is given.
                    l.outage_drops[side] += 1;
                    self.counters.outage_drops += 1;
                    return Ok(());
                }
                if l.dir[side].send(now, frame.len(), buf) == SendOutcome::QueueFull {
                    self.counters.queue_full += 1;
                    return Err(Refused::QueueFull);
                }
                Ok(())
            }
            (Net::Wifi(w), PortRole::Station { station }) => {
                let dst = mac_of(frame, 0);
                let dest = if dst[0] & 1 == 1 {
                    Dest::Broadcast
                } else {
                    match w.by_mac.get(&dst) {
                        Some(&to) if to != station => Dest::Unicast(to),
                        _ => {
                            self.counters.flooded += 1;
                            Dest::Broadcast
                        }
                    }
                };
                let msdu = frame.len() - ETH_HEADER + LLC_SNAP;
                let ac = classify(frame);
                let q = &mut w.qdisc[station][ac.index()];
                if q.is_empty() && w.medium.queue_len(station, ac) < w.depth[station] {
                    // The medium refuses nothing with room; a refusal is counted by it (and
                    // reported as a drop, which takes the frame off the card's load again).
                    let _ = w.medium.enqueue(now, station, ac, dest, msdu, buf);
                    w.accepted(station, frame.len());
                    Ok(())
                } else if q.len() < w.qdisc_limit {
                    q.push_back(Pending { dest, msdu, buf });
                    self.counters.qdisc_queued += 1;
                    w.accepted(station, frame.len());
                    Ok(())
                } else {
                    self.counters.queue_full += 1;
                    Err(Refused::QueueFull)
                }
            }
            _ => unreachable!("ports are built from the same scenario as the net"),
        }
    }

    /// When the fabric next has something to hand out or to do.
    pub fn poll_timeout(&self) -> Option<Instant> {
        let model = match &self.net {
            Net::P2p(links) => links.iter().flat_map(|l| l.dir.iter().filter_map(|d| d.poll_timeout())).min(),
            Net::Wifi(w) => w.medium.poll_timeout(),
        };
        model.into_iter().chain(self.out.iter().map(|o| o.2)).min()
    }

    fn take(&mut self, ev: MediumEvent<FrameBuf>) {
        match ev {
            MediumEvent::Delivered { to, handle, at, .. } => self.out.push((to, handle, at)),
            MediumEvent::Sent { .. } => {}
            MediumEvent::Dropped { reason, .. } => {
                if reason != DropReason::QueueFull {
                    self.counters.channel_drops += 1;
                }
            }
        }
    }

    /// Runs the models up to `now` and returns the next frame due: `(port, frame, due time)`.
    pub fn poll_egress(&mut self, now: Instant) -> Option<(usize, FrameBuf, Instant)> {
        if self.out.is_empty() {
            match &mut self.net {
                Net::P2p(links) => {
                    for l in links.iter_mut() {
                        for side in 0..2 {
                            while let Some(d) = l.dir[side].poll_deliver(now) {
                                self.out.push((l.ports[1 - side], d.packet, d.at));
                            }
                        }
                    }
                }
                Net::Wifi(w) => {
                    w.medium.handle_timeout(now);
                    let mut evs = Vec::new();
                    while let Some(ev) = w.medium.poll_event(now) {
                        match &ev {
                            MediumEvent::Sent { station, handle, .. } => w.left(*station, handle.len(), true),
                            MediumEvent::Dropped { station, handle, .. } => w.left(*station, handle.len(), false),
                            MediumEvent::Delivered { .. } => {}
                        }
                        evs.push(ev);
                    }
                    // Frames that left made room: the qdiscs move theirs in now.
                    w.refill(now);
                    for ev in evs {
                        self.take(ev);
                    }
                }
            }
            // Hand out in due order, earliest last (popped first).
            self.out.sort_by_key(|o| std::cmp::Reverse(o.2));
        }
        let o = self.out.pop()?;
        self.counters.frames_out += 1;
        self.counters.bytes_out += o.1.len() as u64;
        Some(o)
    }

    /// Hands every station whose card load changed since the last call to `f`, with its load
    /// now (Wi-Fi only; a point-to-point fabric has no cards).
    pub fn take_card_changes(&mut self, mut f: impl FnMut(usize, CardLoad)) {
        if let Net::Wifi(w) = &mut self.net {
            for (i, c) in w.changed.iter_mut().enumerate() {
                if std::mem::take(c) {
                    f(i, w.loads[i]);
                }
            }
        }
    }

    /// How many cards [`take_card_changes`](Self::take_card_changes) reports on.
    pub fn cards(&self) -> usize {
        match &self.net {
            Net::Wifi(w) => w.loads.len(),
            Net::P2p(_) => 0,
        }
    }

    /// Counters per link direction or per station and access category.
    pub fn status(&mut self, now: Instant) -> FabricStatus {
        let mut st = FabricStatus {
            mode: Mode::P2p,
            counters: self.counters,
            links: Vec::new(),
            stations: Vec::new(),
            channel_busy_ms: 0.0,
        };
        match &mut self.net {
            Net::P2p(links) => {
                for (k, l) in links.iter_mut().enumerate() {
                    l.advance(now);
                    for side in 0..2 {
                        let s = l.dir[side].stats();
                        let name = |p: usize| self.nodes[self.ports[l.ports[p]].node].clone();
                        st.links.push(LinkStatus {
                            link: k,
                            from: name(side),
                            to: name(1 - side),
                            offered: s.offered,
                            offered_bytes: s.offered_bytes,
                            delivered: s.delivered,
                            lost: s.lost,
                            queue_drops: s.queue_drops,
                            duplicated: s.duplicated,
                            reordered: s.reordered,
                            queued_packets: l.dir[side].queued_packets(now),
                            outage_drops: l.outage_drops[side],
                            out: l.playing.as_ref().is_some_and(|p| p.out),
                            rate_bps: l.dir[side].params().rate_bps,
                        });
                    }
                }
            }
            Net::Wifi(w) => {
                let medium = &w.medium;
                st.mode = Mode::Wifi;
                st.counters.qdisc_backlog = w.backlog() as u64;
                st.channel_busy_ms = medium.busy_time().as_secs_f64() * 1e3;
                for (i, node) in self.nodes.iter().enumerate() {
                    let acs = [Ac::Bk, Ac::Be, Ac::Vi, Ac::Vo]
                        .into_iter()
                        .filter_map(|ac| {
                            let s = medium.stats(i, ac)?;
                            Some(AcStatus {
                                ac: format!("{ac:?}").to_uppercase(),
                                queue_len: s.queue_len,
                                max_queue: s.max_queue,
                                enqueued: s.enqueued,
                                successes: s.successes,
                                queue_drops: s.queue_drops,
                                retry_drops: s.retry_drops,
                                collisions: s.collisions,
                                airtime_ms: s.airtime.as_secs_f64() * 1e3,
                                qdisc_len: w.qdisc[i][ac.index()].len(),
                            })
                        })
                        .collect();
                    st.stations.push(StationStatus { node: node.clone(), acs });
                }
            }
        }
        st
    }
}

/// Checks every step of a trace: times increasing, parameters a link accepts.
pub fn check_trace(trace: &Trace) -> Result<(), TraceRefused> {
    for (k, (at, state)) in trace.iter().enumerate() {
        if *at > cohort_medium::link::MAX_DELAY {
            return Err(TraceRefused::Invalid { step: k, why: "a trace lasts at most a day".into() });
        }
        if k > 0 && trace[k - 1].0 >= *at {
            return Err(TraceRefused::Invalid { step: k, why: "times must increase".into() });
        }
        if let Some(p) = state {
            p.validate().map_err(|e| TraceRefused::Invalid { step: k, why: e.to_string() })?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn eth(dst: [u8; 6], src: [u8; 6], tos: u8, len: usize) -> Vec<u8> {
        let mut f = vec![0u8; len];
        f[..6].copy_from_slice(&dst);
        f[6..12].copy_from_slice(&src);
        f[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
        f[14] = 0x45;
        f[15] = tos;
        f
    }

    fn drain(f: &mut Fabric, until: Instant) -> Vec<(usize, usize, Instant)> {
        let mut out = Vec::new();
        let mut now = Instant::from_nanos(0);
        while let Some(t) = f.poll_timeout() {
            if t > until {
                break;
            }
            now = now.max(t);
            while let Some((port, fr, at)) = f.poll_egress(now) {
                out.push((port, fr.len(), at));
            }
        }
        out
    }

    #[test]
    fn classifies_like_linux() {
        let f = |tos| classify(&eth([0; 6], [0; 6], tos, 60));
        assert_eq!(f(0xb8), Ac::Vo); // EF
        assert_eq!(f(0x88), Ac::Vi); // AF41
        assert_eq!(f(0x20), Ac::Bk); // CS1
        assert_eq!(f(0x00), Ac::Be);
        let mut v6 = eth([0; 6], [0; 6], 0, 60);
        v6[12..14].copy_from_slice(&0x86ddu16.to_be_bytes());
        v6[14] = 0x6b; // traffic class 0xb8 = EF
        v6[15] = 0x80;
        assert_eq!(classify(&v6), Ac::Vo);
        let mut vlan = eth([0; 6], [0; 6], 0, 60);
        vlan[12..14].copy_from_slice(&0x8100u16.to_be_bytes());
        vlan[14] = 6 << 5;
        assert_eq!(classify(&vlan), Ac::Vo);
        let mut arp = eth([0; 6], [0; 6], 0xb8, 60);
        arp[12..14].copy_from_slice(&0x0806u16.to_be_bytes());
        assert_eq!(classify(&arp), Ac::Be);
        assert_eq!(classify(&[0u8; 3]), Ac::Be);
    }

    #[test]
    fn p2p_frames_cross_with_the_configured_delay_and_both_ways() {
        let s = TestbedScenario::parse(
            "name = \"t\"\nmode = \"p2p\"\nnodes = [\"a\", \"b\"]\n[[links]]\na = \"a\"\nb = \"b\"\nowd_ms = 20.0\nrate_mbps = 8.0\n",
        )
        .unwrap();
        let mut f = Fabric::new(&s).unwrap();
        let t0 = Instant::from_millis(1);
        f.ingress(t0, 0, &eth([0xff; 6], [1; 6], 0, 1000)).unwrap();
        f.ingress(t0, 1, &eth([0xff; 6], [2; 6], 0, 500)).unwrap();
        let out = drain(&mut f, Instant::from_millis(100));
        assert_eq!(out.len(), 2);
        // 1000 bytes at 8 Mbit/s: 1 ms serialization, then 20 ms.
        let to_b = out.iter().find(|o| o.0 == 1).unwrap();
        assert_eq!(to_b.2, t0 + Duration::from_millis(21));
        let to_a = out.iter().find(|o| o.0 == 0).unwrap();
        assert_eq!(to_a.1, 500);
        assert_eq!(f.counters().frames_out, 2);
        let st = f.status(Instant::from_millis(100));
        assert_eq!(st.links.len(), 2);
        assert_eq!((st.links[0].from.as_str(), st.links[0].delivered), ("a", 1));
    }

    #[test]
    fn wifi_unicast_broadcast_and_unknown_addresses() {
        let s = TestbedScenario::parse(
            "name = \"w\"\nmode = \"wifi\"\nnodes = [\"a\", \"b\", \"c\"]\n[wifi]\nphy = \"a\"\ndata_mbps = 54.0\n",
        )
        .unwrap();
        let mut f = Fabric::new(&s).unwrap();
        let mac = |i| node_mac(Mode::Wifi, i, 0);
        let t0 = Instant::from_millis(1);
        f.ingress(t0, 0, &eth(mac(2), mac(0), 0xb8, 200)).unwrap();
        f.ingress(t0, 1, &eth([0xff; 6], mac(1), 0, 100)).unwrap();
        f.ingress(t0, 2, &eth([0x02, 0, 0, 0, 0, 9], mac(2), 0, 80)).unwrap();
        assert_eq!(f.ingress(t0, 9, &eth(mac(1), mac(0), 0, 80)), Err(Refused::NoPort));
        assert_eq!(f.ingress(t0, 0, &[1, 2, 3]), Err(Refused::Malformed));
        let mut out = drain(&mut f, Instant::from_millis(50));
        out.sort();
        // Unicast to c; the broadcast from b to a and c; the unknown unicast from c flooded to a, b.
        let ports: Vec<(usize, usize)> = out.iter().map(|o| (o.0, o.1)).collect();
        assert_eq!(ports, vec![(0, 80), (0, 100), (1, 80), (2, 100), (2, 200)]);
        let c = f.counters();
        assert_eq!((c.frames_in, c.frames_out, c.malformed, c.flooded), (3, 5, 1, 1));
        let st = f.status(Instant::from_millis(50));
        let vo = st.stations[0].acs.iter().find(|a| a.ac == "VO").unwrap();
        assert_eq!(vo.successes, 1);
        assert!(st.channel_busy_ms > 0.0);
    }

    #[test]
    fn full_hardware_queue_refuses_and_counts() {
        let mut f = two_stations(2, 0);
        let b = node_mac(Mode::Wifi, 1, 0);
        let t0 = Instant::from_millis(1);
        let results: Vec<_> = (0..4).map(|_| f.ingress(t0, 0, &eth(b, [0; 6], 0, 1500))).collect();
        assert_eq!(results.iter().filter(|r| r.is_err()).count(), 2);
        assert_eq!(f.counters().queue_full, 2);
        assert_eq!(drain(&mut f, Instant::from_millis(100)).len(), 2);
    }

    #[test]
    fn the_qdisc_holds_what_the_hardware_queue_cannot_and_loses_nothing() {
        let mut f = two_stations(2, 5);
        let b = node_mac(Mode::Wifi, 1, 0);
        let t0 = Instant::from_millis(1);
        // Lengths tell the frames apart: 2 go to the hardware queue, 5 wait, the 8th is refused.
        let results: Vec<_> = (0..8).map(|k| f.ingress(t0, 0, &eth(b, [0; 6], 0, 1000 + k))).collect();
        assert_eq!(results.iter().filter(|r| r.is_ok()).count(), 7);
        assert_eq!(results[7], Err(Refused::QueueFull));
        let c = f.counters();
        assert_eq!((c.qdisc_queued, c.queue_full), (5, 1));
        let st = f.status(t0);
        let be = st.stations[0].acs.iter().find(|a| a.ac == "BE").unwrap();
        assert_eq!((be.queue_len, be.qdisc_len, st.counters.qdisc_backlog), (2, 5, 5));
        let out = drain(&mut f, Instant::from_millis(200));
        let lens: Vec<usize> = out.iter().map(|o| o.1).collect();
        assert_eq!(lens, (1000..1007).collect::<Vec<_>>(), "every frame once, in order");
        assert!(out.windows(2).all(|w| w[0].2 < w[1].2));
        assert_eq!(f.status(Instant::from_millis(200)).counters.qdisc_backlog, 0);
    }

    #[test]
    fn a_card_load_counts_what_was_accepted_until_it_is_sent_or_dropped() {
        let mut f = two_stations(2, 3);
        assert_eq!(f.cards(), 2);
        let b = node_mac(Mode::Wifi, 1, 0);
        let t0 = Instant::from_millis(1);
        // 2 in the card, 3 in the qdisc, 1 refused (not counted: the host never handed it over).
        let lens: Vec<usize> = (0..6).map(|k| 1000 + k).collect();
        let refused = lens.iter().filter(|&&n| f.ingress(t0, 0, &eth(b, [0; 6], 0, n)).is_err()).count();
        assert_eq!(refused, 1);
        let mut seen = Vec::new();
        f.take_card_changes(|i, l| seen.push((i, l)));
        let accepted: u64 = (0..5).map(|k| eth(b, [0; 6], 0, 1000 + k).len() as u64).sum();
        assert_eq!(
            seen,
            vec![(0, CardLoad { pending_bytes: accepted, pending_frames: 5, sent_bytes: 0, sent_frames: 0 })]
        );
        f.take_card_changes(|_, _| panic!("nothing changed since"));
        let mut last = CardLoad::default();
        let mut t = t0;
        while t < Instant::from_millis(200) {
            t += Duration::from_micros(100);
            while f.poll_egress(t).is_some() {}
            f.take_card_changes(|i, l| {
                assert_eq!(i, 0);
                assert!(l.sent_bytes + l.pending_bytes == accepted, "every byte is pending or sent");
                last = l;
            });
        }
        assert_eq!(last, CardLoad { pending_bytes: 0, pending_frames: 0, sent_bytes: accepted, sent_frames: 5 });
    }

    /// Two Wi-Fi stations with hardware queues of `depth` frames and qdiscs of `qdisc`.
    fn two_stations(depth: usize, qdisc: usize) -> Fabric {
        let s = TestbedScenario::parse(&format!(
            "name = \"w\"\nmode = \"wifi\"\nnodes = [\"a\", \"b\"]\n[wifi]\nqueue_depth = {depth}\nqdisc_packets = {qdisc}\n"
        ))
        .unwrap();
        Fabric::new(&s).unwrap()
    }

    fn two_nodes(link: &str) -> TestbedScenario {
        TestbedScenario::parse(&format!(
            "name = \"t\"\nmode = \"p2p\"\nnodes = [\"a\", \"b\"]\n[[links]]\na = \"a\"\nb = \"b\"\n{link}"
        ))
        .unwrap()
    }

    /// A playing trace changes the rate both ways when its step comes, loses what is offered
    /// while the link is out (counted) and lets frames through again when it is back.
    #[test]
    fn a_link_follows_its_trace_both_ways() {
        let mut f = Fabric::new(&two_nodes("owd_ms = 10.0\nrate_mbps = 8.0\n")).unwrap();
        let ms = Duration::from_millis;
        let slow = LinkParams::clean(ms(10), 800_000);
        let start = Instant::from_millis(100);
        f.play(0, start, vec![(ms(0), Some(slow)), (ms(50), None), (ms(80), Some(slow))]).unwrap();
        let frame = eth([0xff; 6], [1; 6], 0, 1000);
        // At 0.8 Mbit/s, 1000 bytes take 10 ms to serialize: arrival 20 ms after the offer.
        f.ingress(start + ms(1), 0, &frame).unwrap();
        f.ingress(start + ms(1), 1, &frame).unwrap();
        let out = drain(&mut f, start + ms(40));
        assert_eq!(out.iter().map(|o| o.2).collect::<Vec<_>>(), vec![start + ms(21), start + ms(21)]);
        // Out from 50 ms to 80 ms.
        f.ingress(start + ms(60), 0, &frame).unwrap();
        f.ingress(start + ms(79), 1, &frame).unwrap();
        assert!(drain(&mut f, start + ms(200)).is_empty());
        f.ingress(start + ms(90), 0, &frame).unwrap();
        assert_eq!(drain(&mut f, start + ms(300)).len(), 1);
        let st = f.status(start + ms(300));
        assert_eq!(st.counters.outage_drops, 2);
        assert_eq!((st.links[0].outage_drops, st.links[1].outage_drops), (1, 1));
        assert_eq!((st.links[0].rate_bps, st.links[0].out), (800_000, false));
    }

    #[test]
    fn a_trace_is_refused_for_a_missing_link_a_shared_channel_or_bad_steps() {
        let mut f = Fabric::new(&two_nodes("")).unwrap();
        let ok = LinkParams::clean(Duration::from_millis(1), 1_000_000);
        assert_eq!(f.play(3, Instant::ZERO, vec![]), Err(TraceRefused::NoLink(3, 1)));
        let bad = LinkParams { rate_bps: 0, ..ok };
        assert!(matches!(
            f.play(0, Instant::ZERO, vec![(Duration::ZERO, Some(bad))]),
            Err(TraceRefused::Invalid { step: 0, .. })
        ));
        let twice = vec![(Duration::ZERO, Some(ok)), (Duration::ZERO, None)];
        assert!(matches!(f.play(0, Instant::ZERO, twice), Err(TraceRefused::Invalid { step: 1, .. })));
        let forever = vec![(Duration::from_secs(200_000), None)];
        assert!(matches!(f.play(0, Instant::ZERO, forever), Err(TraceRefused::Invalid { step: 0, .. })));
        let w = TestbedScenario::parse("name = \"w\"\nmode = \"wifi\"\nnodes = [\"a\", \"b\"]\n[wifi]\n").unwrap();
        assert_eq!(Fabric::new(&w).unwrap().play(0, Instant::ZERO, vec![]), Err(TraceRefused::NotP2p));
    }

    /// `trace = FILE` in a scenario file: read relative to the scenario's directory and
    /// played from the start; a bad file is an error naming it and its line.
    #[test]
    fn a_scenario_link_plays_its_trace_file() {
        let dir = std::env::temp_dir().join(format!("cohort-trace-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let scenario = |trace: &str| {
            let p = dir.join("s.toml");
            std::fs::write(&p, format!("name = \"t\"\nmode = \"p2p\"\nnodes = [\"a\", \"b\"]\n[[links]]\na = \"a\"\nb = \"b\"\ntrace = \"{trace}\"\n")).unwrap();
            TestbedScenario::load(&p)
        };
        std::fs::write(dir.join("radio.csv"), "0,8,10,0\n5,down\n").unwrap();
        std::fs::write(dir.join("bad.csv"), "0,8,10,0\n5,sideways\n").unwrap();
        let s = scenario("radio.csv").unwrap();
        assert_eq!(s.links[0].trace.as_deref(), Some(dir.join("radio.csv").as_path()));
        let mut f = Fabric::new(&s).unwrap();
        f.ingress(Instant::from_millis(6), 0, &eth([0xff; 6], [1; 6], 0, 100)).unwrap();
        assert_eq!(f.counters().outage_drops, 1);
        let e = scenario("bad.csv").unwrap_err().to_string();
        assert!(e.contains("bad.csv") && e.contains("line 2"), "{e}");
        let e = scenario("none.csv").unwrap_err().to_string();
        assert!(e.contains("none.csv"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
