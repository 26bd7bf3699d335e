//! `cohort coorp agent`: coordinated preemption for every application of one robot.
//!
//! The decisions are [`cohort_proto::preempt::agent::Agent`]'s; this runs it on real time and
//! carries them out:
//!
//! * an [`Observer`] shows it every packet leaving the robot's interface;
//! * a [`Marker`] (nftables) marks the flows it judges: EF for control, the gate's mark for bulk;
//! * a [`BulkGate`] (HTB + TBF over rtnetlink) holds the bulk for protection windows and while
//!   the robot lacks the team's bulk token, and reports how much bulk waits in it;
//! * a UDP socket carries the token protocol to the other robots' agents, every datagram a
//!   secure frame of kind `PREEMPT` under the team key, sent as CS6 (network control, AC_VO,
//!   past the gate).
//!
//! * a [`CardReader`], where one is given, shows it what the robot's card holds, every
//!   [`AgentConfig::card_every`](cohort_proto::preempt::agent::AgentConfig::card_every), so the
//!   local half holds the bulk as long before each window as the card needs to drain.
//!
//! One thread waits in `ppoll(2)` on the observer and the socket until the machine's next
//! deadline; the gate's backlog is read every [`AgentOptions::backlog_every`], and while the
//! robot holds the token, how much its recent bulk flows' TCP sockets have left to send
//! (`sock_diag`), so an upload that is done gives the token back at once.

use super::bulk::{BulkRequest, WirePermit};
use super::card::{CardError, CardReader, CardSource};
use super::gate::{BulkGate, GateConfig, GateError, GateStats};
use super::marker::{Marker, MarkerError};
use super::netlink::Rtnl;
use super::observer::{Observer, ObserverStats};
use crate::Secure;
use cohort_proto::Dest;
use cohort_proto::preempt::agent::{
    Action, Agent, AgentConfig, AgentStats, Flow, FlowKey, Marking, Override, PROTO_TCP,
};
use cohort_proto::preempt::client::ClientState;
use cohort_wire::frame::{TeamKey, kind};
use std::io;
use std::net::{SocketAddr, SocketAddrV4, UdpSocket};
use std::os::fd::AsRawFd;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// DSCP CS6 in the TOS byte: the agents' own datagrams.
const TOS_CS6: u32 = 0xc0;

/// How to run an agent.
#[derive(Debug, Clone)]
pub struct AgentOptions {
    /// The robot's interface toward the team.
    pub dev: String,
    pub id: u32,
    /// The agent's own address (port [`AgentConfig::own_port`] by convention).
    pub bind: SocketAddrV4,
    /// The other robots' agents.
    pub peers: Vec<(u32, SocketAddrV4)>,
    /// The robot whose agent runs the arbiter, when the agents keep no group.
    pub arbiter: u32,
    /// The team's group (GCBRR, [`crate::GroupSocket`]) broadcast address: with it the agents
    /// form a group on its port, and the arbiter runs on the group's coordinator and moves
    /// with it when that robot fails (`arbiter` is then ignored).
    pub group: Option<SocketAddrV4>,
    /// What the gate shapes egress to: the channel's goodput for one sender.
    pub link_rate_bps: u64,
    pub team_id: u32,
    pub team_secret: Vec<u8>,
    pub config: AgentConfig,
    /// Stop after this long (`None`: until `stop`).
    pub duration: Option<Duration>,
    pub backlog_every: Duration,
    pub status_every: Duration,
    /// A file of verdicts the user forces while the agent runs (`cohort coorp override`): one
    /// `PORT ls|bulk` per line, read when it changes, on top of `config.overrides`.
    pub overrides_file: Option<PathBuf>,
    /// Where the robot's card load is read: a card file and this robot's station in it
    /// ([`super::card`]), or the station's mac80211 debugfs directory ([`super::mac80211`]);
    /// `None`: the fixed lead.
    pub card: Option<CardSource>,
}

/// Parses an overrides file: `PORT ls|bulk` per line (`#` comments, blank lines); the bad
/// lines are returned apart.
pub fn parse_overrides(text: &str) -> (Vec<(u16, Override)>, Vec<String>) {
    let (mut ok, mut bad) = (Vec::new(), Vec::new());
    for line in text.lines().map(|l| l.split('#').next().unwrap_or("").trim()).filter(|l| !l.is_empty()) {
        let mut w = line.split_whitespace();
        let parsed = match (w.next().and_then(|p| p.parse::<u16>().ok()), w.next(), w.next()) {
            (Some(p), Some("ls"), None) => Some((p, Override::Ls)),
            (Some(p), Some("bulk"), None) => Some((p, Override::Bulk)),
            _ => None,
        };
        match parsed {
            Some(o) => ok.push(o),
            None => bad.push(line.to_string()),
        }
    }
    (ok, bad)
}

/// Why an agent could not start or stopped.
#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    #[error("invalid agent configuration: {0}")]
    Config(String),
    #[error("no interface named {0}")]
    NoDevice(String),
    #[error("another agent runs on {0} in this network namespace")]
    Busy(String),
    #[error("watching {dev} needs CAP_NET_RAW (run as root): {source}")]
    Observer { dev: String, source: io::Error },
    #[error(transparent)]
    Gate(#[from] GateError),
    #[error(transparent)]
    Marker(#[from] MarkerError),
    #[error("agent socket: {0}")]
    Io(#[from] io::Error),
    #[error("team group: {0}")]
    Group(#[from] crate::GroupError),
    #[error(transparent)]
    Card(#[from] CardError),
}

/// One flow as `cohort coorp status` shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct FlowStatus {
    pub proto: u8,
    pub src: SocketAddrV4,
    pub dst: SocketAddrV4,
    pub verdict: &'static str,
    pub marking: &'static str,
    pub packets: u64,
    pub bytes: u64,
    pub messages: u64,
    pub period: Option<Duration>,
    pub sigma: Option<Duration>,
    pub max_message_bytes: u64,
}

impl FlowStatus {
    fn of(f: &Flow) -> Self {
        let e = f.classifier().evidence();
        FlowStatus {
            proto: f.key.proto,
            src: f.key.src,
            dst: f.key.dst,
            verdict: f.verdict.name(),
            marking: f.marking.name(),
            packets: f.packets,
            bytes: f.bytes,
            messages: e.messages,
            period: e.period,
            sigma: e.sigma,
            max_message_bytes: e.max_bytes,
        }
    }
}

/// What an agent is doing: written as its status, and returned when it stops.
#[derive(Debug, Clone, PartialEq)]
pub struct AgentSnapshot {
    pub id: u32,
    pub mode: &'static str,
    pub uptime: Duration,
    pub held: bool,
    /// `idle`, `waiting` or `holding` (no token protocol: `none`).
    pub token: &'static str,
    pub hosts_arbiter: bool,
    pub flows: Vec<FlowStatus>,
    pub stats: AgentStats,
    pub gate: Option<GateStats>,
    /// Bulk packets in the gate at the last reading.
    pub backlog_packets: u64,
    pub observer: ObserverStats,
    pub marker_changes: u64,
    /// Token datagrams sent and accepted; datagrams refused by the frame layer.
    pub sent: u64,
    pub received: u64,
    pub rejected: u64,
    /// Kernel changes that failed (each logged); the agent keeps running.
    pub kernel_errors: u64,
    /// Lines of the overrides file that were not `PORT ls|bulk` (each logged).
    pub override_errors: u64,
    /// Datagrams on the bulk senders' socket that were no request (dropped).
    pub bulk_malformed: u64,
    /// What the card held at the last reading and the rate it drains at, bytes and bytes per
    /// second (`None`: no card given, or no rate yet).
    pub card_pending_bytes: Option<u64>,
    pub card_drain_bps: Option<f64>,
}

/// Claims the agent's place on `dev` in this network namespace (abstract Unix socket).
fn claim(dev: &str) -> Result<std::os::unix::net::UnixDatagram, AgentError> {
    use std::os::linux::net::SocketAddrExt;
    let name = super::bulk::agent_socket_name(dev);
    let addr = std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes())?;
    std::os::unix::net::UnixDatagram::bind_addr(&addr).map_err(|e| match e.kind() {
        io::ErrorKind::AddrInUse => AgentError::Busy(dev.into()),
        _ => AgentError::Io(e),
    })
}

fn ifindex(dev: &str) -> Result<i32, AgentError> {
    let name = std::ffi::CString::new(dev).map_err(|_| AgentError::NoDevice(dev.into()))?;
    // SAFETY: a NUL-terminated name we own.
    let i = unsafe { libc::if_nametoindex(name.as_ptr()) };
    if i == 0 { Err(AgentError::NoDevice(dev.into())) } else { Ok(i as i32) }
}

/// Waits until one of `fds` is readable or `timeout` passes (a signal ends the wait early).
fn wait(fds: &[i32], timeout: Duration) {
    let mut p: Vec<libc::pollfd> =
        fds.iter().map(|&fd| libc::pollfd { fd, events: libc::POLLIN, revents: 0 }).collect();
    let ts = libc::timespec {
        tv_sec: timeout.as_secs().min(3600) as libc::time_t,
        tv_nsec: libc::c_long::from(timeout.subsec_nanos() as i32),
    };
    // SAFETY: polling descriptors we own, with a timeout we own; no signal mask change.
    unsafe { libc::ppoll(p.as_mut_ptr(), p.len() as libc::nfds_t, &ts, std::ptr::null()) };
}

/// Answers every waiting request of a bulk sender with its permit; malformed datagrams are
/// counted and dropped.
fn serve_bulk(
    sock: &std::os::unix::net::UnixDatagram,
    agent: &mut Agent,
    clock: &cohort_time::Clock,
    rate_bps: u64,
    malformed: &mut u64,
) {
    let mut buf = [0u8; 64];
    loop {
        let (n, from) = match sock.recv_from(&mut buf) {
            Ok(x) => x,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(_) => return,
        };
        let now = clock.now();
        match BulkRequest::decode(&buf[..n]) {
            Some(BulkRequest::Demand { session, port, pending }) => {
                let p = agent.bulk_demand(now, session, port, pending);
                let left = p.until.map(|u| u.saturating_duration_since(now));
                let reply = WirePermit { open: p.open, left, rate_bps };
                if let Err(e) = sock.send_to_addr(&reply.encode(), &from) {
                    tracing::debug!(%e, "agent: a bulk sender went away");
                }
            }
            Some(BulkRequest::Close { session }) => agent.bulk_close(now, session),
            None => *malformed += 1,
        }
    }
}

/// Runs an agent until `stop` is set or its duration passes; `status` sees a snapshot every
/// [`AgentOptions::status_every`]. Everything it installed is removed when it returns.
pub fn run(
    opts: &AgentOptions,
    stop: &AtomicBool,
    mut status: impl FnMut(&AgentSnapshot),
) -> Result<AgentSnapshot, AgentError> {
    let key = TeamKey::derive(&opts.team_secret, opts.team_id).map_err(|e| AgentError::Config(e.to_string()))?;
    let mut card = match &opts.card {
        Some(source) if opts.config.mode.local() => Some(CardReader::open(source)?),
        _ => None,
    };
    // The claim is also where Cohort's bulk senders ask for permits (`super::bulk`).
    let bulk_sock = claim(&opts.dev)?;
    bulk_sock.set_nonblocking(true)?;
    let mut bulk_malformed = 0u64;
    let ifindex = ifindex(&opts.dev)?;
    let mut secure =
        Secure::new(key, opts.id, kind::PREEMPT).map_err(|e| AgentError::Config(format!("entropy: {e}")))?;
    let clock = cohort_time::Clock::start();
    let mut members: Vec<u32> = opts.peers.iter().map(|p| p.0).chain([opts.id]).collect();
    members.sort_unstable();
    members.dedup();
    if members.len() != opts.peers.len() + 1 {
        return Err(AgentError::Config("a peer repeats an id or has this agent's id".into()));
    }
    if opts.group.is_none() && !members.contains(&opts.arbiter) {
        return Err(AgentError::Config(format!("arbiter {} is not a member", opts.arbiter)));
    }
    let group = match opts.group {
        None => None,
        Some(bcast) => {
            let local = SocketAddrV4::new(*opts.bind.ip(), bcast.port());
            let mut cfg =
                crate::GroupConfig::new(opts.team_secret.clone(), opts.team_id, opts.id, local.into(), bcast.into());
            cfg.dscp = Some(48);
            Some(crate::GroupSocket::open(cfg, crate::Start::Static(members.clone()))?)
        }
    };
    // With a group, the smallest id coordinates first (GCBRR's static start).
    let first_arbiter = if group.is_some() { members[0] } else { opts.arbiter };
    let mut agent = Agent::new(opts.config.clone(), opts.id, first_arbiter, &members, clock.now())
        .map_err(|e| AgentError::Config(e.to_string()))?;
    let mut coordinator = Some(first_arbiter);
    let mut observer =
        Observer::open(ifindex).map_err(|source| AgentError::Observer { dev: opts.dev.clone(), source })?;
    let sock = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::DGRAM, None)?;
    sock.set_tos_v4(TOS_CS6)?;
    sock.set_nonblocking(true)?;
    sock.bind(&SocketAddr::V4(opts.bind).into())?;
    let sock: UdpSocket = sock.into();
    let mut marker = Marker::install(super::gate::BULK_CLASSID)?;
    let mut gate = if opts.config.mode == cohort_proto::preempt::agent::Mode::Mark {
        None
    } else {
        let cfg = GateConfig { bulk_by_priority: true, ..GateConfig::new(opts.dev.clone(), opts.link_rate_bps) };
        Some(BulkGate::install(cfg)?)
    };
    // Where sock_diag is missing the token goes back after `bulk_idle` of silence only.
    let mut diag = gate.as_ref().and_then(|_| {
        Rtnl::sock_diag().inspect_err(|e| tracing::warn!(%e, "agent: no sock_diag, the token waits out bulk_idle")).ok()
    });
    let started = clock.now();
    let end = opts.duration.map(|d| started + d);
    let mut next_card = started;
    let mut card_failing = false;
    let mut next_backlog = started;
    let mut next_status = started;
    let (mut sent, mut received, mut kernel_errors, mut backlog_packets) = (0u64, 0u64, 0u64, 0u64);
    let mut override_errors = 0u64;
    let mut overrides_stamp = None;
    let mut buf = vec![0u8; 2048];
    let mut plain = vec![0u8; 512];
    let snapshot = |agent: &Agent, gate: &Option<BulkGate>, observer: &Observer, marker: &Marker, c: [u64; 7]| {
        let token = match agent.client().map(|c| c.state()) {
            None => "none",
            Some(ClientState::Idle) => "idle",
            Some(ClientState::Waiting { .. }) => "waiting",
            Some(ClientState::Holding { .. }) => "holding",
        };
        let mut flows: Vec<FlowStatus> = agent.flows().map(FlowStatus::of).collect();
        flows.sort_by_key(|f| (f.src, f.dst, f.proto));
        AgentSnapshot {
            id: agent.id(),
            mode: agent.config().mode.name(),
            uptime: clock.now().saturating_duration_since(started),
            held: agent.is_held(),
            token,
            hosts_arbiter: agent.arbiter().is_some(),
            flows,
            stats: agent.stats(),
            gate: gate.as_ref().map(BulkGate::stats),
            backlog_packets: c[4],
            observer: observer.stats(),
            marker_changes: marker.changes(),
            sent: c[0],
            received: c[1],
            rejected: c[2],
            kernel_errors: c[3],
            override_errors: c[5],
            bulk_malformed: c[6],
            card_pending_bytes: agent.card().map(|c| c.last.pending_bytes),
            card_drain_bps: agent.card().and_then(|c| c.drain_bps),
        }
    };
    loop {
        let now = clock.now();
        if stop.load(Ordering::Relaxed) || end.is_some_and(|e| now >= e) {
            break;
        }
        // A bare TCP acknowledgement is no message of its flow (an upload's receiver would
        // otherwise send a small, steady flow that looks like control).
        observer.drain(|o| {
            if o.payload > 0 {
                agent.on_packet(clock.now(), o.key, u64::from(o.ip_len), o.dscp);
            }
        })?;
        loop {
            match sock.recv_from(&mut buf) {
                Ok((n, _)) => {
                    if let Some(o) = secure.open(&mut buf[..n]) {
                        received += 1;
                        let (from, payload) = (o.sender_id, o.payload.to_vec());
                        agent.handle_datagram(clock.now(), from, &payload);
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => tracing::debug!(%e, "agent socket"),
            }
        }
        serve_bulk(&bulk_sock, &mut agent, &clock, opts.link_rate_bps, &mut bulk_malformed);
        let now = clock.now();
        if let Some(g) = gate.as_mut()
            && now >= next_backlog
        {
            next_backlog = now + opts.backlog_every;
            match g.backlog() {
                Ok(q) => {
                    backlog_packets = u64::from(q.packets);
                    agent.on_backlog(now, backlog_packets);
                }
                Err(e) => {
                    kernel_errors += 1;
                    tracing::warn!(%e, "agent: reading the gate's backlog");
                }
            }
            if let Some(d) = diag.as_mut()
                && matches!(agent.client().map(|c| c.state()), Some(ClientState::Holding { .. }))
            {
                let flows: Vec<FlowKey> = agent.recent_bulk_flows(now).collect();
                let pending = send_queues(d, &flows).unwrap_or_else(|e| {
                    kernel_errors += 1;
                    tracing::debug!(%e, "agent: reading a socket's send queue");
                    None
                });
                agent.on_send_queues(now, pending);
            }
        }
        if let Some(probe) = &mut card
            && now >= next_card
        {
            next_card = now + opts.config.card_every;
            match probe.read() {
                Ok(l) => {
                    card_failing = false;
                    agent.on_card(now, l.into());
                }
                Err(e) => {
                    kernel_errors += 1;
                    // Once per streak: a card file gone fails every reading (2000 a second).
                    if !std::mem::replace(&mut card_failing, true) {
                        tracing::warn!(%e, "agent: reading the card (the fixed lead until it reads again)");
                    }
                }
            }
        }
        if let Some(g) = &group {
            let c = g.coordinator();
            if c != coordinator {
                coordinator = c;
                tracing::info!(?c, "agent: the team's coordinator changed");
                if let Err(e) = agent.set_arbiter_host(now, c == Some(opts.id), &g.members()) {
                    return Err(AgentError::Config(e.to_string()));
                }
            }
        }
        agent.handle_timeout(clock.now());
        while let Some(t) = agent.poll_transmit(clock.now(), &mut plain) {
            let Ok(n) = secure.seal(&plain[..t.len], &mut buf) else {
                kernel_errors += 1;
                continue;
            };
            let to: Vec<SocketAddrV4> = match t.dest {
                Dest::Unicast(d) => opts.peers.iter().filter(|p| p.0 == d).map(|p| p.1).collect(),
                Dest::Broadcast => opts.peers.iter().map(|p| p.1).collect(),
            };
            for a in to {
                match sock.send_to(&buf[..n], a) {
                    Ok(_) => sent += 1,
                    Err(e) => tracing::debug!(%e, %a, "agent: send"),
                }
            }
        }
        while let Some(a) = agent.poll_action() {
            let r = match (a, gate.as_mut()) {
                (Action::Hold, Some(g)) => g.hold().map(drop).map_err(AgentError::from),
                (Action::Release, Some(g)) => g.release().map(drop).map_err(AgentError::from),
                (Action::Hold | Action::Release, None) => Ok(()),
                (Action::Set(k, m), _) => {
                    // Mark mode has no gate: bulk flows need no mark.
                    let m = if gate.is_none() && m == Marking::Bulk { Marking::Untouched } else { m };
                    marker.set(k, m).map_err(AgentError::from)
                }
            };
            if let Err(e) = r {
                kernel_errors += 1;
                tracing::warn!(%e, "agent: kernel change");
            }
        }
        let now = clock.now();
        if now >= next_status {
            next_status = now + opts.status_every;
            if let Some(path) = &opts.overrides_file {
                let stamp = std::fs::metadata(path).and_then(|m| m.modified()).ok();
                if stamp != overrides_stamp {
                    overrides_stamp = stamp;
                    let (file, bad) = parse_overrides(&std::fs::read_to_string(path).unwrap_or_default());
                    for line in &bad {
                        tracing::warn!(%line, "agent: an override line that is not `PORT ls|bulk`");
                    }
                    override_errors += bad.len() as u64;
                    let mut all: Vec<(u16, Override)> = opts
                        .config
                        .overrides
                        .iter()
                        .filter(|(p, _)| !file.iter().any(|f| f.0 == *p))
                        .copied()
                        .collect();
                    all.extend(file);
                    agent.set_overrides(all);
                }
            }
            let c =
                [sent, received, secure.rejected(), kernel_errors, backlog_packets, override_errors, bulk_malformed];
            status(&snapshot(&agent, &gate, &observer, &marker, c));
        }
        let mut deadline = agent.poll_timeout(now).min(next_status);
        if gate.is_some() {
            deadline = deadline.min(next_backlog);
        }
        if card.is_some() {
            deadline = deadline.min(next_card);
        }
        if let Some(e) = end {
            deadline = deadline.min(e);
        }
        wait(&[observer.as_raw_fd(), sock.as_raw_fd(), bulk_sock.as_raw_fd()], deadline.saturating_duration_since(now));
    }
    let c = [sent, received, secure.rejected(), kernel_errors, backlog_packets, override_errors, bulk_malformed];
    let last = snapshot(&agent, &gate, &observer, &marker, c);
    drop(gate);
    drop(marker);
    Ok(last)
}

/// Bytes the senders of `flows` have written and not had acknowledged, when every one is a
/// TCP socket of this host; `None` when one is not (UDP, or a flow this robot forwards).
fn send_queues(diag: &mut Rtnl, flows: &[FlowKey]) -> io::Result<Option<u64>> {
    let mut total = 0u64;
    for k in flows {
        if k.proto != PROTO_TCP {
            return Ok(None);
        }
        match diag.tcp_unacked(k.src, k.dst)? {
            Some(b) => total += u64::from(b),
            None => return Ok(None),
        }
    }
    Ok(Some(total))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_overrides_file_is_read_line_by_line_and_bad_lines_are_set_apart() {
        let (ok, bad) =
            parse_overrides("# forced\n9000 ls\n\n5001 bulk # the bag upload\nx ls\n7000 fast\n1 ls extra\n");
        assert_eq!(ok, vec![(9000, Override::Ls), (5001, Override::Bulk)]);
        assert_eq!(bad, vec!["x ls", "7000 fast", "1 ls extra"]);
    }
}
