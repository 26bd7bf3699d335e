//! `cohort lrt send|recv`: the coded transport between two hosts over real UDP.
//!
//! Generated messages carry a header `COHT | sequence u64 | send time (Unix ns) u64` so the
//! receiver can report per-message delay (meaningful across hosts only with synchronised
//! clocks) and check order. Lines from stdin travel as they are and are printed by `recv`.
//!
//! A multipath sender can share per-path statistics with its team (`--path-key` and the
//! `--share-*` options): it takes part in the team's sharing rounds (a group of its own,
//! `cohort_net::federated`), starts each path from what the team learned of that path's key,
//! and hands in what it learned itself before it exits.

use clap::{Args, Subcommand};
use cohort_net::federated::{FederatedError, PathStatsService};
use cohort_net::{GroupConfig, GroupSocket, LrtListener, LrtSocket, MpLrtSocket, NetError, SocketConfig, Start};
use cohort_proto::lrt::CloseReason;
use cohort_proto::multipath::MpConfig;
use cohort_proto::multipath::federated::PathKey;
use serde::Serialize;
use std::io::{BufRead, Write};
use std::net::SocketAddr;
use std::process::ExitCode;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

const MAGIC: &[u8; 4] = b"COHT";
const HEADER: usize = 20;

#[derive(Debug, Args)]
pub struct LrtArgs {
    #[command(subcommand)]
    cmd: LrtCmd,
}

#[derive(Debug, Args)]
struct TeamArgs {
    /// Team secret (at least 16 bytes); defaults to the COHORT_TEAM_SECRET environment variable.
    #[arg(long, env = "COHORT_TEAM_SECRET", hide_env_values = true)]
    secret: String,
    #[arg(long, default_value_t = 1)]
    team: u32,
    /// This endpoint's sender id within the team (unique per running process).
    #[arg(long)]
    sender_id: Option<u32>,
    /// DSCP code point for outgoing datagrams (46 = EF for control traffic).
    #[arg(long)]
    dscp: Option<u8>,
    /// The link's rate in Mbit/s: LRT paces at `rate_share` (0.9) of it, or with
    /// `--estimate-rate` never above that (default 100).
    #[arg(long)]
    rate_mbps: Option<f64>,
    /// Measure the available bandwidth and pace at 0.9 of it (backing off when a queue
    /// builds) instead of trusting `--rate-mbps`.
    #[arg(long)]
    estimate_rate: bool,
    #[arg(long)]
    json: bool,
}

#[derive(Debug, Subcommand)]
enum LrtCmd {
    /// Send messages to a listening `cohort lrt recv`: stdin lines, or generated messages.
    Send {
        /// The receiver (one path), or use `--path` for several.
        #[arg(required_unless_present = "path", conflicts_with = "path")]
        addr: Option<SocketAddr>,
        /// Multipath: a path from a local address to the receiver's address of the same rank
        /// (`LOCAL=PEER`, e.g. `192.168.1.5:0=192.168.1.9:47000`), once per radio; the first
        /// carries the key exchange. The receiver lists its addresses in the same order.
        #[arg(long, value_parser = parse_path)]
        path: Vec<(SocketAddr, SocketAddr)>,
        #[command(flatten)]
        team: TeamArgs,
        #[command(flatten)]
        share: ShareArgs,
        /// Generate messages of this many bytes (at least 20) instead of reading stdin.
        #[arg(long)]
        size: Option<usize>,
        #[arg(long, default_value_t = 10.0)]
        interval_ms: f64,
        #[arg(long, default_value_t = 1000)]
        count: u64,
        /// Stop generating after this many seconds even if `--count` messages are not all
        /// sent (a bulk transfer for a fixed time: `--interval-ms 0 --count` large).
        #[arg(long)]
        duration_s: Option<f64>,
        /// Multipath: send over this many of the paths each round, the ones MS-UCB picks
        /// (the super-arm's size, `m` of seed 001's Eq. 16); default all of them.
        #[arg(long)]
        super_arm: Option<usize>,
    },
    /// Accept one sender (`--peers N`: N senders on one port, each its own connection) and
    /// receive until it closes (or `--count` messages arrive from it).
    Recv {
        /// Address to listen on; several make a multipath receiver (path `i` on address `i`).
        #[arg(long, required = true)]
        listen: Vec<SocketAddr>,
        /// Multipath even with one `--listen` address (for a sender with one `--path`).
        #[arg(long)]
        multipath: bool,
        #[command(flatten)]
        team: TeamArgs,
        #[arg(long)]
        count: Option<u64>,
        /// Give up when no sender connects within this many seconds.
        #[arg(long, default_value_t = 60.0)]
        accept_timeout_s: f64,
        /// Senders to accept on the one `--listen` port (`LrtListener`); each is received on
        /// its own thread and reported apart.
        #[arg(long, default_value_t = 1)]
        peers: usize,
    },
}

/// Sharing per-path statistics with the team (multipath senders): on when `--path-key` is
/// given, with the sharing group's `--share-pid`, `--share-addr` and `--share-broadcast`.
#[derive(Debug, Args)]
struct ShareArgs {
    /// The link each `--path` goes over, in the same order (an access point's BSSID, a
    /// channel, a link's name): the team keeps statistics per key.
    #[arg(long = "path-key")]
    path_keys: Vec<String>,
    /// This robot's id in the sharing group (unique in the team).
    #[arg(long)]
    share_pid: Option<u32>,
    /// Own address and the sharing group's port, e.g. 10.78.0.3:7410.
    #[arg(long)]
    share_addr: Option<SocketAddr>,
    /// The sharing group's broadcast address (same port).
    #[arg(long)]
    share_broadcast: Option<SocketAddr>,
    /// Start as a member of this static sharing group (comma-separated pids); otherwise join it.
    #[arg(long, value_delimiter = ',')]
    share_group: Vec<u32>,
    /// Wait this long for the team's statistics before sending, and at most this long after
    /// the transfer for the team to take this robot's.
    #[arg(long, default_value_t = 3.0)]
    share_wait_s: f64,
}

/// What stopped `cohort lrt`.
#[derive(Debug, thiserror::Error)]
pub enum LrtCmdError {
    #[error(transparent)]
    Net(#[from] NetError),
    #[error("sharing path statistics: {0}")]
    Share(#[from] FederatedError),
}

/// This robot's part in the team's path statistics during one transfer.
struct Sharing {
    svc: PathStatsService,
    keys: Vec<PathKey>,
    wait: Duration,
    /// Whether the team's view had come when the paths started.
    view: bool,
    started_from: Vec<Option<cohort_proto::multipath::bandit::ArmStats>>,
}

/// The checked `--share-*` options of one transfer.
struct SharePlan {
    keys: Vec<PathKey>,
    group: GroupConfig,
    start: Start,
    wait: Duration,
}

impl SharePlan {
    /// Checks the options against the `paths` given (before anything connects); `None` when
    /// nothing is shared.
    fn new(a: &ShareArgs, t: &TeamArgs, paths: usize) -> Result<Option<SharePlan>, NetError> {
        if a.path_keys.is_empty() {
            if a.share_pid.is_some()
                || a.share_addr.is_some()
                || a.share_broadcast.is_some()
                || !a.share_group.is_empty()
            {
                return Err(NetError::Config("--share-* options need a --path-key per --path".into()));
            }
            return Ok(None);
        }
        if a.path_keys.len() != paths {
            let k = a.path_keys.len();
            return Err(NetError::Config(format!("{k} --path-key for {paths} --path: one per path (multipath only)")));
        }
        let (Some(pid), Some(addr), Some(broadcast)) = (a.share_pid, a.share_addr, a.share_broadcast) else {
            return Err(NetError::Config("--path-key needs --share-pid, --share-addr and --share-broadcast".into()));
        };
        if !(a.share_wait_s.is_finite() && (0.0..=600.0).contains(&a.share_wait_s)) {
            return Err(NetError::Config(format!("--share-wait-s {} must be in [0, 600]", a.share_wait_s)));
        }
        let keys = a
            .path_keys
            .iter()
            .map(|k| PathKey::new(k).map_err(|e| NetError::Config(format!("--path-key {k:?}: {e}"))))
            .collect::<Result<Vec<_>, _>>()?;
        let start = if a.share_group.is_empty() {
            Start::Outside { incarnation: cohort_net::group::incarnation_from_clock() }
        } else {
            Start::Static(a.share_group.clone())
        };
        Ok(Some(SharePlan {
            keys,
            group: GroupConfig::new(t.secret.as_bytes().to_vec(), t.team, pid, addr, broadcast),
            start,
            wait: Duration::from_secs_f64(a.share_wait_s),
        }))
    }

    /// Joins the sharing rounds (a static member at once, or admitted by the coordinator
    /// within the wait), waits for the team's view, and starts `sock`'s paths from it.
    fn start(self, sock: &MpLrtSocket) -> Result<Sharing, LrtCmdError> {
        let joining = matches!(self.start, Start::Outside { .. });
        let svc = PathStatsService::start(GroupSocket::open(self.group, self.start).map_err(FederatedError::from)?)?;
        if !joining || svc.group().join(Some(self.wait)).is_ok() {
            svc.wait_view(self.wait);
        }
        let view = svc.known(&self.keys).iter().any(Option::is_some);
        let started_from = svc.start_paths(sock, &self.keys)?;
        Ok(Sharing { svc, keys: self.keys, wait: self.wait, view, started_from })
    }
}

impl Sharing {
    /// Hands in what `sock` learned and waits (up to the wait) until the team has taken it:
    /// a view answered with it as a member, or a round gathered as the coordinator.
    fn finish(self, sock: &MpLrtSocket) -> Result<serde_json::Value, LrtCmdError> {
        let before = self.svc.stats();
        self.svc.publish_socket(sock, &self.keys)?;
        let end = std::time::Instant::now() + self.wait;
        let taken = loop {
            let now = self.svc.stats();
            if now.views > before.views || now.rounds > before.rounds {
                break true;
            }
            if std::time::Instant::now() >= end {
                break false;
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        let st = self.svc.stats();
        let from: Vec<serde_json::Value> = self
            .keys
            .iter()
            .zip(&self.started_from)
            .map(|(k, s)| match s {
                Some(s) => serde_json::json!({ "key": k.as_str(), "u": s.u, "v": s.v }),
                None => serde_json::json!({ "key": k.as_str(), "cold": true }),
            })
            .collect();
        Ok(serde_json::json!({ "team_view": self.view, "started_from": from, "handed_in": taken,
            "views": st.views, "rounds": st.rounds, "reports": st.reports, "malformed": st.malformed }))
    }
}

#[derive(Debug, Default, Serialize)]
struct RecvSummary {
    #[serde(skip_serializing_if = "Option::is_none")]
    peer: Option<String>,
    messages: u64,
    /// Bytes of every message received.
    bytes: u64,
    /// From the first message received to the last.
    first_to_last_s: f64,
    /// `bytes` over `first_to_last_s`, Mbit/s (0 with fewer than two messages).
    goodput_mbps: f64,
    /// The longest wait between two messages (a stall: a path lost, a repair waited for).
    max_gap_ms: f64,
    timestamped: u64,
    in_order: bool,
    p50_ms: f64,
    p90_ms: f64,
    p99_ms: f64,
    max_ms: f64,
    rejected_frames: u64,
    recovered_symbols_note: &'static str,
}

fn parse_path(s: &str) -> Result<(SocketAddr, SocketAddr), String> {
    let (l, p) =
        s.split_once('=').ok_or_else(|| format!("{s}: expected LOCAL=PEER, e.g. 10.0.0.5:0=10.0.0.9:47000"))?;
    Ok((l.parse().map_err(|e| format!("{l}: {e}"))?, p.parse().map_err(|e| format!("{p}: {e}"))?))
}

/// What `send` and `recv` need of a socket, one path or several.
trait Endpoint {
    fn send(&self, m: &[u8]) -> Result<(), NetError>;
    fn recv(&self) -> Result<Vec<u8>, NetError>;
    fn flush(&self, timeout: Option<Duration>) -> Result<(), NetError>;
    fn rejected(&self) -> u64;
    /// The sender's counters as JSON (with per-path ones for multipath).
    fn summary(&self, sent: u64) -> serde_json::Value;
    /// The peer's address, where there is one.
    fn peer(&self) -> Option<String> {
        None
    }
}

impl Endpoint for LrtSocket {
    fn send(&self, m: &[u8]) -> Result<(), NetError> {
        LrtSocket::send(self, m)
    }
    fn peer(&self) -> Option<String> {
        self.peer_addr().map(|a| a.to_string())
    }
    fn recv(&self) -> Result<Vec<u8>, NetError> {
        LrtSocket::recv(self)
    }
    fn flush(&self, timeout: Option<Duration>) -> Result<(), NetError> {
        LrtSocket::flush(self, timeout)
    }
    fn rejected(&self) -> u64 {
        self.stats().rejected_frames
    }
    fn summary(&self, sent: u64) -> serde_json::Value {
        let s = self.stats();
        serde_json::json!({ "sent": sent, "datagrams": s.datagrams_sent, "wire_bytes": s.wire_bytes_sent,
            "source_symbols": s.conn.source_sent, "repair_symbols": s.conn.repair_sent, "loss_estimate": s.conn.loss_estimate })
    }
}

impl Endpoint for MpLrtSocket {
    fn send(&self, m: &[u8]) -> Result<(), NetError> {
        MpLrtSocket::send(self, m)
    }
    fn recv(&self) -> Result<Vec<u8>, NetError> {
        MpLrtSocket::recv(self)
    }
    fn flush(&self, timeout: Option<Duration>) -> Result<(), NetError> {
        MpLrtSocket::flush(self, timeout)
    }
    fn rejected(&self) -> u64 {
        self.stats().rejected_frames
    }
    fn summary(&self, sent: u64) -> serde_json::Value {
        let s = self.stats();
        let paths: Vec<serde_json::Value> = s
            .mp
            .paths
            .iter()
            .zip(self.local_addrs())
            .map(|(p, local)| {
                serde_json::json!({ "local": local.to_string(), "up": p.up, "sent": p.sent, "clones": p.clones_sent,
                    "delivered": p.delivered, "lost": p.lost, "cwnd": p.cwnd, "srtt_ms": p.srtt_ms,
                    "queueing_ms": p.queueing_ms, "loss": p.loss, "failures": p.failures, "bandit_u": p.arm.u, "bandit_v": p.arm.v })
            })
            .collect();
        serde_json::json!({ "sent": sent, "datagrams": s.datagrams_sent, "source_symbols": s.conn.source_sent,
            "repair_symbols": s.conn.repair_sent, "loss_estimate": s.conn.loss_estimate, "rounds": s.mp.rounds,
            "first_rounds": self.rounds_played(FIRST_ROUNDS), "paths": paths })
    }
}

/// Super-arms of the first rounds a multipath sender reports (`first_rounds` in `--json`).
const FIRST_ROUNDS: usize = 100;

/// The multipath settings of `--super-arm` over `paths` paths.
fn mp_config(super_arm: Option<usize>, paths: usize) -> Result<MpConfig, NetError> {
    let Some(m) = super_arm else { return Ok(MpConfig::default()) };
    if paths == 0 {
        return Err(NetError::Config("--super-arm needs --path (multipath only)".into()));
    }
    if m == 0 || m > paths {
        return Err(NetError::Config(format!("--super-arm {m}: between 1 and the {paths} --path given")));
    }
    Ok(MpConfig { super_arm: m, ..MpConfig::default() })
}

fn now_ns() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64)
}

fn socket_config(t: &TeamArgs) -> SocketConfig {
    let sender = t.sender_id.unwrap_or_else(|| std::process::id() ^ (now_ns() as u32).rotate_left(16));
    let mut c = SocketConfig::new(t.secret.as_bytes().to_vec(), t.team, sender);
    c.dscp = t.dscp;
    if let Some(r) = t.rate_mbps {
        // Not finite or not positive gives 0, which the connection refuses as a typed error.
        c.lrt.rate_bps = if r.is_finite() && r > 0.0 { (r * 1e6) as u64 } else { 0 };
    }
    c.lrt.estimate_rate = t.estimate_rate;
    c
}

pub fn run(a: &LrtArgs) -> Result<ExitCode, LrtCmdError> {
    match &a.cmd {
        LrtCmd::Send { addr, path, team, share, size, interval_ms, count, duration_s, super_arm } => {
            let cfg = socket_config(team);
            let generate = Generate::new(*size, *interval_ms, *count, *duration_s)?;
            let plan = SharePlan::new(share, team, path.len())?;
            let mp = mp_config(*super_arm, path.len())?;
            let summary = match addr {
                Some(a) => {
                    let sock = LrtSocket::connect(*a, cfg)?;
                    let sent = send(&sock, &generate)?;
                    sock.summary(sent)
                }
                None => {
                    let sock = MpLrtSocket::connect(path, cfg, mp)?;
                    let sharing = plan.map(|p| p.start(&sock)).transpose()?;
                    let sent = send(&sock, &generate)?;
                    let mut v = sock.summary(sent);
                    if let Some(sharing) = sharing {
                        v["federated"] = sharing.finish(&sock)?;
                    }
                    v
                }
            };
            print_sent(&summary, team.json);
            Ok(ExitCode::SUCCESS)
        }
        LrtCmd::Recv { listen, multipath, team, count, accept_timeout_s, peers } => {
            Ok(recv_cmd(listen, *multipath, team, *count, *accept_timeout_s, *peers)?)
        }
    }
}

fn recv_cmd(
    listen: &[SocketAddr],
    multipath: bool,
    team: &TeamArgs,
    count: Option<u64>,
    accept_timeout_s: f64,
    peers: usize,
) -> Result<ExitCode, NetError> {
    let (cfg, wait) = (socket_config(team), Some(Duration::from_secs_f64(accept_timeout_s.max(0.0))));
    if peers == 0 || (peers > 1 && (multipath || listen.len() > 1)) {
        return Err(NetError::Config("--peers is at least 1, and more than 1 needs one --listen address".into()));
    }
    if peers > 1 {
        let l = LrtListener::bind(listen[0], cfg)?;
        let conns = (0..peers).map(|_| l.accept(wait)).collect::<Result<Vec<_>, _>>()?;
        let sums = std::thread::scope(|s| {
            let hs: Vec<_> = conns.iter().map(|c| s.spawn(move || receive(c, team, count))).collect();
            hs.into_iter()
                .map(|h| {
                    h.join().unwrap_or_else(|_| Err(NetError::Io(std::io::Error::other("a receiving thread panicked"))))
                })
                .collect::<Result<Vec<_>, _>>()
        })?;
        for sum in &sums {
            report(sum, team.json);
        }
        return Ok(ExitCode::SUCCESS);
    }
    if multipath || listen.len() > 1 {
        let sock = MpLrtSocket::listen(listen, cfg, Default::default())?;
        sock.wait_connected(wait)?;
        recv(&sock, team, count)
    } else {
        recv(&LrtSocket::accept(listen[0], cfg, wait)?, team, count)
    }
}

/// What `send` generates (checked before anything connects).
struct Generate {
    /// Generated messages of this size, or stdin's lines.
    size: Option<usize>,
    interval: Duration,
    count: u64,
    duration: Option<Duration>,
}

impl Generate {
    fn new(size: Option<usize>, interval_ms: f64, count: u64, duration_s: Option<f64>) -> Result<Self, NetError> {
        if let Some(size) = size.filter(|&s| s < HEADER) {
            return Err(NetError::MessageSize(size));
        }
        let secs = |v: f64, what: &str| {
            if v.is_finite() && (0.0..=86_400.0).contains(&v) {
                Ok(Duration::from_secs_f64(v))
            } else {
                Err(NetError::Config(format!("{what} must be between 0 and a day, not {v}")))
            }
        };
        Ok(Generate {
            size,
            interval: secs(interval_ms / 1000.0, "--interval-ms")?,
            count,
            duration: duration_s.map(|d| secs(d, "--duration-s")).transpose()?,
        })
    }
}

/// Sends what `g` says and waits until the receiver has it all; the messages sent.
fn send(sock: &impl Endpoint, g: &Generate) -> Result<u64, NetError> {
    let mut sent = 0u64;
    match g.size {
        Some(size) => {
            let (interval, start) = (g.interval, std::time::Instant::now());
            for i in 0..g.count {
                if g.duration.is_some_and(|e| start.elapsed() >= e) {
                    break;
                }
                let due = start + interval.mul_f64(i as f64);
                if let Some(wait) = due.checked_duration_since(std::time::Instant::now()) {
                    std::thread::sleep(wait);
                }
                let mut m = vec![0u8; size];
                m[..4].copy_from_slice(MAGIC);
                m[4..12].copy_from_slice(&i.to_be_bytes());
                m[12..20].copy_from_slice(&now_ns().to_be_bytes());
                sock.send(&m)?;
                sent += 1;
            }
        }
        None => {
            for line in std::io::stdin().lock().lines() {
                let line = line?;
                if !line.is_empty() {
                    sock.send(line.as_bytes())?;
                    sent += 1;
                }
            }
        }
    }
    match sock.flush(Some(Duration::from_secs(30))) {
        // The receiver closed normally (e.g. it had its `--count`): it had everything it wanted.
        Ok(()) | Err(NetError::Closed(CloseReason::Peer(0))) => Ok(sent),
        Err(e) => Err(e),
    }
}

/// The sender's summary `v`, as JSON or text.
fn print_sent(v: &serde_json::Value, json: bool) {
    if json {
        println!("{v}");
    } else {
        eprintln!(
            "sent {} messages in {} datagrams ({} source, {} repair symbols), loss seen {:.1}%",
            v["sent"],
            v["datagrams"],
            v["source_symbols"],
            v["repair_symbols"],
            v["loss_estimate"].as_f64().unwrap_or(0.0) * 100.0
        );
        for p in v["paths"].as_array().into_iter().flatten() {
            eprintln!("  path {}: {p}", p["local"]);
        }
        if let Some(f) = v.get("federated") {
            eprintln!("  team statistics: {f}");
        }
    }
}

fn recv(sock: &impl Endpoint, t: &TeamArgs, count: Option<u64>) -> Result<ExitCode, NetError> {
    report(&receive(sock, t, count)?, t.json);
    Ok(ExitCode::SUCCESS)
}

/// Receives until the sender closes or `count` messages came; text lines go to stdout, whole.
fn receive(sock: &impl Endpoint, t: &TeamArgs, count: Option<u64>) -> Result<RecvSummary, NetError> {
    let mut sum = RecvSummary { in_order: true, peer: sock.peer(), ..Default::default() };
    let mut delays = vec![];
    let mut expect = 0u64;
    let stdout = std::io::stdout();
    let (mut first, mut last) = (None::<std::time::Instant>, None::<std::time::Instant>);
    while count.is_none_or(|c| sum.messages < c) {
        let m = match sock.recv() {
            Ok(m) => m,
            Err(NetError::Closed(_)) => break,
            Err(e) => return Err(e),
        };
        let now = std::time::Instant::now();
        if let Some(l) = last {
            sum.max_gap_ms = sum.max_gap_ms.max((now - l).as_secs_f64() * 1e3);
        }
        first.get_or_insert(now);
        last = Some(now);
        sum.messages += 1;
        sum.bytes += m.len() as u64;
        if m.len() >= HEADER && &m[..4] == MAGIC {
            let seq = u64::from_be_bytes(m[4..12].try_into().unwrap_or_default());
            let at = u64::from_be_bytes(m[12..20].try_into().unwrap_or_default());
            sum.in_order &= seq == expect;
            expect = seq + 1;
            sum.timestamped += 1;
            delays.push(now_ns().saturating_sub(at) as f64 / 1e6);
        } else if !t.json {
            let mut out = stdout.lock();
            out.write_all(&m)?;
            out.write_all(b"\n")?;
        }
    }
    if let (Some(f), Some(l)) = (first, last) {
        sum.first_to_last_s = (l - f).as_secs_f64();
        if sum.first_to_last_s > 0.0 {
            sum.goodput_mbps = sum.bytes as f64 * 8.0 / sum.first_to_last_s / 1e6;
        }
    }
    delays.sort_by(f64::total_cmp);
    let q = |x: f64| {
        delays.get(((delays.len() as f64 * x) as usize).min(delays.len().saturating_sub(1))).copied().unwrap_or(0.0)
    };
    (sum.p50_ms, sum.p90_ms, sum.p99_ms, sum.max_ms) = (q(0.5), q(0.9), q(0.99), delays.last().copied().unwrap_or(0.0));
    sum.rejected_frames = sock.rejected();
    sum.recovered_symbols_note =
        "delays use the sender's wall clock: compare across hosts only with synchronised clocks";
    Ok(sum)
}

fn report(sum: &RecvSummary, json: bool) {
    if json {
        println!("{}", serde_json::to_string_pretty(&sum).unwrap_or_default());
    } else {
        eprintln!(
            "{}received {} messages ({:.2} Mbit/s, longest gap {:.1} ms; {} timestamped, in order: {}), delay p50 {:.2} p90 {:.2} p99 {:.2} max {:.2} ms, {} forged/replayed datagrams dropped",
            sum.peer.as_ref().map(|p| format!("from {p}: ")).unwrap_or_default(),
            sum.messages,
            sum.goodput_mbps,
            sum.max_gap_ms,
            sum.timestamped,
            sum.in_order,
            sum.p50_ms,
            sum.p90_ms,
            sum.p99_ms,
            sum.max_ms,
            sum.rejected_frames
        );
    }
}
