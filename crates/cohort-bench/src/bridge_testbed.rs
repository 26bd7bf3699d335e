//! `cohort bench bridge` (root): real ROS 2 clients across the emulated Wi-Fi team, talking
//! Zenoh directly and through `cohort bridge` (issue 20, deliverable 3 and its goals).
//!
//! **The team** is `scenarios/testbed_wifi.toml` (one 802.11a channel at 54 Mbit/s, the far
//! follower `f3` at 12 Mbit/s with 10% frame errors, queues of 64 frames) with every other
//! station's frames failing at `fer` (default 5%, the 802.11 MAC retrying them as it does) and
//! as many followers as the query needs (`f1` .. `fN`, default 4).
//!
//! **Per repetition and system** (systems in a rotating order, a fresh set of processes each):
//!
//! * a **bulk transfer** beside everything: a plain kernel TCP upload from `f1` to the leader
//!   (a bag or map upload), started a second before the measurement and running through it;
//! * a **100 Hz ROS 2 topic**: a `zenoh-ros2-sdk` publisher on `f1` (`/f1/velocity`,
//!   `geometry_msgs/msg/TwistStamped`, `python3 -m cohort.ros2_probe`), its subscriber on the
//!   leader; warm-up samples until the subscriber sees one, then `messages` measured ones, each
//!   stamped when published (one clock for every namespace): one-way delay, losses, order;
//! * a **`get` to every follower**: the leader's `get` on `status/**`, answered by a queryable
//!   on each follower (`python3 -m cohort.zenoh_rr`, `reply_len` bytes), `gets` in sequence;
//!   rate = complete gets per second.
//!
//! **Systems**: `zenoh` — every application's own Zenoh session in peer mode, connected to the
//! other robots' over the channel with explicit endpoints (multicast scouting off), as a team
//! configures rmw_zenoh across robots; `bridge` — every application connected to its own
//! robot's `cohort bridge` (one process per robot, the bridges between them over LRT and group
//! request-reply), the topic's key configured `priority = "real_time"` as `docs/bridge.md`
//! shows for a control topic; `bridge_sample_priority` — the same without that line, so the
//! sample's own priority (rmw_zenoh's default, Data: best effort) picks the class: what LRT
//! and the group protocol buy without the marking.
//!
//! The bridges' group timing comes from the channel: `msg_t` is one full frame's exchange at
//! the slowest station's rate (DIFS + PPDU + SIFS + ACK); `query_proc_t` (a robot's time to
//! answer in its own session) is a parameter, reported.

use crate::proc::{Proc, python_module};
use crate::progress::{Plan, Step};
use crate::stats::{MeanCi, dist_ms, pool_runs, round};
use cohort_emu::{EmuMode, EmuOptions, Testbed, TestbedScenario};
use cohort_medium::wifi::phy::QOS_MAC_OVERHEAD_BYTES;
use serde_json::{Value, json};
use std::io::{Read, Write};
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// The scenario the bench starts from.
pub const SCENARIO: &str = include_str!("../../../scenarios/testbed_wifi.toml");
/// The topic's name, its rmw_zenoh key (domain 0) as the bridges' `[[publish]]` names it.
pub const TOPIC: &str = "/f1/velocity";
const TOPIC_KEY: &str = "0/f1/velocity/**";
const QUERY_KEY: &str = "status/**";
const TEAM_SECRET: &str = "cohort bridge bench team secret";
/// Bytes of each `get`'s request payload.
const REQUEST_LEN: usize = 64;

/// Which way the robots' applications reach each other.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum System {
    Zenoh,
    Bridge,
    BridgeSamplePriority,
}

impl System {
    pub const ALL: [System; 3] = [System::Zenoh, System::Bridge, System::BridgeSamplePriority];

    pub fn name(self) -> &'static str {
        match self {
            System::Zenoh => "zenoh",
            System::Bridge => "bridge",
            System::BridgeSamplePriority => "bridge_sample_priority",
        }
    }

    pub fn parse(s: &str) -> Option<System> {
        System::ALL.into_iter().find(|x| x.name() == s)
    }

    fn bridged(self) -> bool {
        self != System::Zenoh
    }
}

/// What the bench runs.
#[derive(Debug, Clone)]
pub struct BridgeParams {
    /// Frame error rate of every station without its own in the scenario.
    pub fer: f64,
    /// Followers (the query asks every one).
    pub followers: usize,
    pub rate_hz: f64,
    /// Measured messages of the topic per run.
    pub messages: usize,
    /// `get`s per run.
    pub gets: usize,
    pub reply_len: usize,
    /// The TCP upload beside the measurement.
    pub bulk: bool,
    pub reps: usize,
    pub systems: Vec<System>,
    /// The bridges' `query_proc_t`.
    pub query_proc: Duration,
    /// The bridges' `broadcast_copies` (each group broadcast sent that many times; `None`:
    /// the bridge's default).
    pub broadcast_copies: Option<u8>,
    /// The interpreter that runs the Python parts.
    pub python: String,
}

impl Default for BridgeParams {
    fn default() -> Self {
        BridgeParams {
            fer: 0.05,
            followers: 4,
            rate_hz: 100.0,
            messages: 2000,
            gets: 200,
            reply_len: 200,
            bulk: true,
            reps: 3,
            systems: System::ALL.to_vec(),
            query_proc: Duration::from_millis(10),
            broadcast_copies: None,
            python: "python3".into(),
        }
    }
}

impl BridgeParams {
    /// Checks the parameters; the error names the option.
    pub fn check(&self) -> Result<(), String> {
        if !(0.0..0.5).contains(&self.fer) {
            return Err("--fer must lie in [0, 0.5)".into());
        }
        if !(1..=8).contains(&self.followers) {
            return Err("--followers must lie in 1..=8".into());
        }
        if !(self.rate_hz > 0.0 && self.rate_hz <= 1000.0) {
            return Err("--rate-hz must lie in (0, 1000]".into());
        }
        if self.messages == 0 || self.gets == 0 || self.reps == 0 {
            return Err("--messages, --gets and --reps must be positive".into());
        }
        if !(1..=60_000).contains(&self.reply_len) {
            return Err("--reply-len must lie in 1..=60000".into());
        }
        if self.systems.is_empty() {
            return Err("--systems names none".into());
        }
        if self.broadcast_copies.is_some_and(|c| !(1..=4).contains(&c)) {
            return Err("--broadcast-copies must lie in 1..=4".into());
        }
        Ok(())
    }

    /// The team: [`SCENARIO`] with `followers` followers and `fer` on every station that has
    /// no frame error rate of its own.
    pub fn scenario(&self) -> Result<TestbedScenario, String> {
        let mut s = TestbedScenario::parse(SCENARIO).map_err(|e| e.to_string())?;
        s.name = "bridge".into();
        s.nodes = std::iter::once("leader".to_string()).chain((1..=self.followers).map(|k| format!("f{k}"))).collect();
        let w = s.wifi.as_mut().ok_or("the bridge scenario is not a Wi-Fi channel")?;
        w.fer = self.fer;
        let nodes = s.nodes.clone();
        w.stations.retain(|st| nodes.contains(&st.node));
        s.validate().map_err(|e| e.to_string())?;
        Ok(s)
    }
}

/// GCBRR's `msg_t` for the channel: DIFS + the PPDU of a full 1500-byte datagram at the
/// slowest station's rate + SIFS + ACK.
pub fn msg_t(s: &TestbedScenario) -> Duration {
    let Some(w) = s.wifi.as_ref() else { return Duration::from_millis(30) };
    let slowest = w.stations.iter().filter_map(|st| st.data_mbps).fold(w.data_mbps, f64::min);
    let phy = w.phy.phy(slowest);
    phy.difs() + phy.duration(1500 + 8 + QOS_MAC_OVERHEAD_BYTES, slowest) + phy.sifs + phy.ack_duration()
}

/// One robot's bridge configuration (pid `k + 1` for node `k`, the leader first).
fn bridge_config(
    k: usize,
    addrs: &[IpAddr],
    broadcast: IpAddr,
    ports: &Ports,
    system: System,
    timing: (Duration, Duration, Option<u8>),
) -> String {
    let mut t = format!(
        "[robot]\npid = {}\naddress = \"{}\"\n\n[team]\nid = 7\nsecret_env = \"COHORT_TEAM_SECRET\"\n\
         broadcast = \"{broadcast}\"\ngroup_port = {}\nlrt_port = {}\n\n",
        k + 1,
        addrs[k],
        ports.group,
        ports.lrt
    );
    for (j, a) in addrs.iter().enumerate().filter(|&(j, _)| j != k) {
        t += &format!("[[peer]]\npid = {}\naddress = \"{a}\"\n\n", j + 1);
    }
    t += &format!(
        "[zenoh]\nmode = \"peer\"\nlisten = [\"tcp/127.0.0.1:{}\"]\nmulticast_scouting = false\n\n",
        ports.zenoh
    );
    t += &format!("[[publish]]\nkey = \"{TOPIC_KEY}\"\n");
    if system == System::Bridge {
        t += "priority = \"real_time\"\n";
    }
    t += &format!("\n[[query]]\nkey = \"{QUERY_KEY}\"\ntimeout_s = 2.0\n\n");
    t += &format!("[timing]\nmsg_t = {:.6}\nquery_proc_t = {:.6}\n", timing.0.as_secs_f64(), timing.1.as_secs_f64());
    if let Some(c) = timing.2 {
        t += &format!("broadcast_copies = {c}\n");
    }
    t
}

/// The ports of one run (every run its own, so nothing waits for an earlier run's sockets).
#[derive(Debug, Clone, Copy)]
struct Ports {
    topic: u16,
    query: u16,
    zenoh: u16,
    group: u16,
    lrt: u16,
    bulk: u16,
}

impl Ports {
    fn of_run(run: usize) -> Ports {
        let base = 20_000 + 200 * (run % 200) as u16;
        Ports { topic: base, query: base + 1, zenoh: base + 2, group: base + 3, bulk: base + 4, lrt: base + 100 }
    }
}

/// A plain kernel TCP upload between two nodes until stopped (or its deadline); a run that
/// fails half-way stops it when dropping it, so it never loads the next system's run.
struct Bulk {
    stop: Arc<AtomicBool>,
    sender: Option<JoinHandle<()>>,
    sink: Option<JoinHandle<std::io::Result<(u64, Duration)>>>,
}

impl Drop for Bulk {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

impl Bulk {
    fn start(tb: &Testbed, from: &str, to: &str, port: u16, life: Duration) -> Result<Bulk, String> {
        let addr = SocketAddr::new(IpAddr::V4(tb.addr(to, 0).map_err(|e| e.to_string())?), port);
        let listener = tb.in_node(to, || TcpListener::bind(addr)).map_err(|e| format!("bulk sink: {e}"))?;
        let mut out = tb
            .in_node(from, || TcpStream::connect_timeout(&addr, Duration::from_secs(5)))
            .map_err(|e| format!("bulk upload: {e}"))?;
        let (mut conn, _) = listener.accept().map_err(|e| format!("bulk sink: {e}"))?;
        let stop = Arc::new(AtomicBool::new(false));
        let deadline = Instant::now() + life;
        let st = Arc::clone(&stop);
        let sender = std::thread::spawn(move || {
            let chunk = vec![0x5au8; 64 * 1024];
            let _ = out.set_write_timeout(Some(Duration::from_millis(200)));
            while !st.load(Ordering::Relaxed) && Instant::now() < deadline {
                match out.write(&chunk) {
                    Ok(_) => {}
                    Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {}
                    Err(_) => break,
                }
            }
            let _ = out.shutdown(std::net::Shutdown::Write);
        });
        let sink = std::thread::spawn(move || {
            let mut buf = vec![0u8; 64 * 1024];
            let (mut bytes, mut first, mut last) = (0u64, None, Instant::now());
            loop {
                let n = conn.read(&mut buf)?;
                if n == 0 {
                    break;
                }
                let now = Instant::now();
                first.get_or_insert(now);
                last = now;
                bytes += n as u64;
            }
            Ok((bytes, first.map_or(Duration::ZERO, |f| last - f)))
        });
        Ok(Bulk { stop, sender: Some(sender), sink: Some(sink) })
    }

    /// Stops the upload; its goodput at the sink, Mbit/s.
    fn finish(mut self) -> Result<f64, String> {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(h) = self.sender.take() {
            let _ = h.join();
        }
        let sink = self.sink.take().ok_or("bulk sink already joined")?;
        let (bytes, d) = sink.join().map_err(|_| "bulk sink panicked")?.map_err(|e| format!("bulk sink: {e}"))?;
        Ok(if d.is_zero() { 0.0 } else { bytes as f64 * 8.0 / d.as_secs_f64() / 1e6 })
    }
}

/// The testbed and what every run needs of it.
struct Team {
    tb: Testbed,
    names: Vec<String>,
    addrs: Vec<IpAddr>,
    broadcast: IpAddr,
    dir: PathBuf,
}

impl Team {
    fn up(p: &BridgeParams) -> Result<Team, String> {
        let s = p.scenario()?;
        let run = format!("bridge{}", std::process::id() % 10_000);
        let tb = Testbed::up(&s, &run, EmuMode::Thread, EmuOptions::default()).map_err(|e| e.to_string())?;
        tb.populate_neighbors().map_err(|e| e.to_string())?;
        let names = s.nodes.clone();
        let addrs = names
            .iter()
            .map(|n| tb.addr(n, 0).map(IpAddr::V4))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| e.to_string())?;
        let a = &tb.attachments()[0];
        let broadcast = cohort_net::group::subnet_broadcast(a.addr, a.prefix);
        let dir = std::env::temp_dir().join(format!("cohort-bridge-bench-{}", std::process::id()));
        std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        Ok(Team { tb, names, addrs, broadcast, dir })
    }

    /// The interpreter inside `node`'s namespace.
    fn interpreter(&self, node: usize, p: &BridgeParams) -> Result<std::process::Command, String> {
        self.tb.command(&self.names[node], &p.python).map_err(|e| e.to_string())
    }

    /// `python -m module` inside `node`'s namespace.
    fn python(&self, node: usize, p: &BridgeParams, module: &str) -> Result<std::process::Command, String> {
        Ok(python_module(self.interpreter(node, p)?, module))
    }

    fn endpoint(&self, node: usize, port: u16) -> String {
        format!("tcp/{}:{port}", self.addrs[node])
    }
}

impl Drop for Team {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Starts one bridge per robot; the processes print their counters when stopped.
fn start_bridges(
    team: &Team,
    p: &BridgeParams,
    ports: &Ports,
    system: System,
    life: Duration,
) -> Result<Vec<Proc>, String> {
    let timing = (msg_t(team.tb.scenario()), p.query_proc, p.broadcast_copies);
    (0..team.names.len())
        .map(|k| {
            let path = team.dir.join(format!("robot{}.toml", k + 1));
            let text = bridge_config(k, &team.addrs, team.broadcast, ports, system, timing);
            write_file(&path, &text)?;
            let mut c = team.python(k, p, "cohort.bridge")?;
            c.arg("--config").arg(&path).arg("--duration").arg(format!("{:.1}", life.as_secs_f64())).arg("--stats");
            c.env("COHORT_TEAM_SECRET", TEAM_SECRET);
            Proc::spawn(c, format!("cohort bridge on {}", team.names[k]))
        })
        .collect()
}

fn write_file(path: &Path, text: &str) -> Result<(), String> {
    std::fs::write(path, text).map_err(|e| format!("{}: {e}", path.display()))
}

/// One system's run: the topic, then the queries, with the bulk upload beside both.
fn one_run(
    team: &Team,
    p: &BridgeParams,
    system: System,
    run: usize,
    progress: &mut impl FnMut(&str),
) -> Result<Value, String> {
    let ports = Ports::of_run(run);
    let topic_s = p.messages as f64 / p.rate_hz;
    let life = Duration::from_secs_f64(topic_s + p.gets as f64 * 2.5 + 90.0);
    let local = format!("tcp/127.0.0.1:{}", ports.zenoh);
    let mut bridges = if system.bridged() { start_bridges(team, p, &ports, system, life)? } else { Vec::new() };
    for b in &mut bridges {
        b.expect_stderr(" up, zenoh id ", Duration::from_secs(30))?;
    }
    // A failure says what every bridge logged.
    let with_bridges = |e: String, bridges: &[Proc]| -> String {
        let logs: Vec<String> = bridges.iter().map(Proc::stderr_tail).filter(|t| !t.is_empty()).collect();
        if logs.is_empty() { e } else { format!("{e}; bridges: {}", logs.join(" || ")) }
    };
    match measure(team, p, system, run, &ports, life, &local, progress) {
        Ok((topic, sent, got, bulk_mbps)) => {
            // All at once: a bridge stopped after its peers would spend its close reconnecting
            // to robots that are gone.
            bridges.iter_mut().for_each(Proc::terminate);
            let stats: Vec<Value> = bridges
                .iter_mut()
                .map(|b| {
                    // A bridge still running then prints every thread's stack on SIGUSR1.
                    let status = b.stop_dumping(Duration::from_secs(30), Some(libc::SIGUSR1));
                    let exit = status.map_or("still running after 30 s: killed".into(), |s| s.to_string());
                    let mut report = b.json_line(Duration::from_secs(2)).unwrap_or_else(|e| json!({ "error": e }));
                    // A clean, quick close prints nothing after the counters; anything else
                    // (a slow close's steps, a close that did not finish) is kept with them.
                    // A bridge that hung dumps every thread's stack on stderr (faulthandler)
                    // before it exits: keep enough of it to see where.
                    if !status.is_some_and(|s| s.success()) || b.stderr_tail().contains("clos") {
                        report["exit"] = json!(exit);
                        report["stderr_tail"] = json!(b.stderr_lines(120));
                    }
                    report
                })
                .collect();
            Ok(run_report(&topic, &sent, &got, bulk_mbps, stats))
        }
        Err(e) => Err(with_bridges(e, &bridges)),
    }
}

type Measured = (Value, Value, crate::group::zenoh::GetOutput, Option<f64>);

/// The applications and the upload of one run, with the bridges (if any) already started.
#[allow(clippy::too_many_arguments)]
fn measure(
    team: &Team,
    p: &BridgeParams,
    system: System,
    run: usize,
    ports: &Ports,
    life: Duration,
    local: &str,
    progress: &mut impl FnMut(&str),
) -> Result<Measured, String> {
    let topic_s = p.messages as f64 / p.rate_hz;
    // The queryables, one per follower.
    let mut queryables = Vec::new();
    for k in 1..team.names.len() {
        let ep = team.endpoint(k, ports.query);
        let side = if system.bridged() {
            crate::group::zenoh::Endpoint::Connect(local)
        } else {
            crate::group::zenoh::Endpoint::Listen(&ep)
        };
        let key = format!("status/{}", team.names[k]);
        let cmd = crate::group::zenoh::queryable_command(team.interpreter(k, p)?, side, &key, p.reply_len, life);
        queryables.push(Proc::spawn(cmd, format!("queryable on {}", team.names[k]))?);
    }
    // The topic: the publisher on f1 listens (direct) or joins its bridge; the subscriber on
    // the leader connects to the publisher (direct) or to its own bridge.
    let (pub_side, sub_side) = if system.bridged() {
        (("--connect", local.to_string()), ("--connect", local.to_string()))
    } else {
        let ep = team.endpoint(1, ports.topic);
        (("--listen", ep.clone()), ("--connect", ep))
    };
    let timeout = format!("{:.1}", life.as_secs_f64());
    let mut c = team.python(0, p, "cohort.ros2_probe")?;
    c.args([
        "sub",
        "--topic",
        TOPIC,
        "--count",
        &p.messages.to_string(),
        sub_side.0,
        &sub_side.1,
        "--timeout-s",
        &timeout,
    ]);
    let sub = Proc::spawn(c, "ROS 2 subscriber on the leader")?;
    let mut c = team.python(1, p, "cohort.ros2_probe")?;
    c.args(["pub", "--topic", TOPIC, "--rate", &p.rate_hz.to_string(), "--count", &p.messages.to_string()]);
    c.args([pub_side.0, &pub_side.1, "--timeout-s", &timeout]);
    let mut publisher = Proc::spawn(c, "ROS 2 publisher on f1")?;
    let start_wait = Duration::from_secs(60);
    for q in &queryables {
        q.expect_line("ready", start_wait)?;
    }
    sub.expect_line("ready", start_wait)?;
    publisher.expect_line("ready", start_wait)?;
    sub.expect_line("flowing", start_wait)?;
    progress(&format!("run {}: {}: topic flowing", run + 1, system.name()));
    let bulk =
        if p.bulk { Some(Bulk::start(&team.tb, &team.names[1], &team.names[0], ports.bulk, life)?) } else { None };
    std::thread::sleep(Duration::from_secs(1));
    publisher.send_line("go")?;
    let topic = sub.json_line(Duration::from_secs_f64(topic_s + 60.0))?;
    let sent = publisher.json_line(Duration::from_secs(30))?;
    // The queries.
    let connect: Vec<String> = if system.bridged() {
        vec![local.to_string()]
    } else {
        (1..team.names.len()).map(|k| team.endpoint(k, ports.query)).collect()
    };
    let get_timeout = Duration::from_secs_f64(p.gets as f64 * 2.5 + 30.0);
    let cmd = crate::group::zenoh::get_command(
        team.interpreter(0, p)?,
        &connect,
        QUERY_KEY,
        p.followers,
        REQUEST_LEN,
        p.gets,
        get_timeout,
    );
    let get = Proc::spawn(cmd, "zenoh get on the leader")?;
    let got = get.json_line(get_timeout + Duration::from_secs(30))?;
    let got: crate::group::zenoh::GetOutput = serde_json::from_value(got).map_err(|e| format!("zenoh get: {e}"))?;
    let bulk_mbps = bulk.map(Bulk::finish).transpose()?;
    drop(queryables);
    Ok((topic, sent, got, bulk_mbps))
}

/// One run's figures.
fn run_report(
    topic: &Value,
    sent: &Value,
    got: &crate::group::zenoh::GetOutput,
    bulk_mbps: Option<f64>,
    bridges: Vec<Value>,
) -> Value {
    let delays: Vec<f64> =
        topic["delays_ms"].as_array().map(|a| a.iter().filter_map(Value::as_f64).collect()).unwrap_or_default();
    let mut d = delays.clone();
    d.sort_by(f64::total_cmp);
    let p999 = crate::stats::quantile(&d, 0.999);
    json!({
        "topic": {
            "sent": sent["sent"],
            "received": topic["received"],
            "missing": topic["missing"],
            "duplicates": topic["duplicates"],
            "out_of_order": topic["out_of_order"],
            "p999_ms": if d.is_empty() { Value::Null } else { json!(round(p999, 3)) },
            "delay": dist_ms(delays),
            "send_late_ms_p99": sent["send_late_ms_p99"],
        },
        "get": {
            "rate_per_s": if got.total_s > 0.0 { round(got.complete as f64 / got.total_s, 3) } else { 0.0 },
            "complete": got.complete,
            "total_s": round(got.total_s, 3),
            "latency": dist_ms(got.latencies_ms.clone()),
        },
        "bulk_mbps": bulk_mbps.map(|m| round(m, 3)),
        "bridges": bridges,
    })
}

/// The summary: per-run ratios against Zenoh direct, paired by run, and the goals.
fn summary(runs: &[Value], p: &BridgeParams) -> Value {
    let fig = |r: &Value, sys: &str, path: &[&str]| -> Option<f64> {
        path.iter().fold(r.get("systems")?.get(sys), |v, k| v?.get(*k))?.as_f64()
    };
    let mut out = serde_json::Map::new();
    for sys in p.systems.iter().filter(|s| s.bridged()) {
        let n = sys.name();
        let ratio = |path: &[&str]| -> Vec<f64> {
            runs.iter()
                .filter_map(|r| Some(fig(r, n, path)? / fig(r, "zenoh", path)?))
                .filter(|x| x.is_finite())
                .collect()
        };
        let p99 = ratio(&["topic", "delay", "p99_ms"]);
        let rate = ratio(&["get", "rate_per_s"]);
        let lost: f64 = runs.iter().filter_map(|r| fig(r, n, &["topic", "missing"])).sum();
        let p99m = MeanCi::of(&p99);
        let ratem = MeanCi::of(&rate);
        out.insert(
            n.to_string(),
            json!({
                "topic_p99_vs_zenoh": p99m,
                "topic_p99_vs_zenoh_per_run": p99,
                "get_rate_vs_zenoh": ratem,
                "get_rate_vs_zenoh_per_run": rate,
                "topic_missing": lost,
                "goal_topic_p99_le_third": !p99.is_empty() && p99m.mean <= 1.0 / 3.0 && lost == 0.0,
                "goal_get_rate_ge_1_5": !rate.is_empty() && ratem.mean >= 1.5,
            }),
        );
    }
    Value::Object(out)
}

/// Runs the bench; `progress` hears what it is doing.
pub fn run(p: &BridgeParams, progress: impl FnMut(&Step)) -> Result<Value, String> {
    p.check()?;
    // Per repetition and system: start-up, then the measurement once the topic flows.
    let mut plan = Plan::new((p.reps * p.systems.len() * 2) as u64, progress);
    let mut progress = |what: &str| plan.begin(what);
    let team = Team::up(p)?;
    let mut runs = Vec::new();
    let mut run_no = 0;
    for rep in 0..p.reps {
        let mut order = p.systems.clone();
        let n = order.len();
        order.rotate_left(rep % n);
        let mut systems = serde_json::Map::new();
        for sys in order {
            progress(&format!("repetition {}/{}: {}", rep + 1, p.reps, sys.name()));
            let r = one_run(&team, p, sys, run_no, &mut progress).unwrap_or_else(|e| json!({ "error": e }));
            run_no += 1;
            systems.insert(sys.name().to_string(), r);
        }
        runs.push(json!({ "systems": systems }));
    }
    plan.finish();
    // The bridges' own reports (counters, membership changes) stay per run: averaged over
    // runs they would describe no process.
    let figures: Vec<Value> = runs
        .iter()
        .map(|r| {
            let mut r = r.clone();
            if let Some(systems) = r.get_mut("systems").and_then(Value::as_object_mut) {
                systems.values_mut().filter_map(Value::as_object_mut).for_each(|s| {
                    s.remove("bridges");
                });
            }
            r
        })
        .collect();
    let refs: Vec<&Value> = figures.iter().collect();
    let pooled = pool_runs(&refs);
    let s = team.tb.scenario();
    Ok(json!({
        "bench": "bridge",
        "scenario": {
            "from": "scenarios/testbed_wifi.toml",
            "nodes": s.nodes,
            "fer": p.fer,
            "far_station": "f3: 12 Mbit/s, 10% frame errors (the file's)",
        },
        "params": {
            "rate_hz": p.rate_hz, "messages": p.messages, "gets": p.gets, "reply_len": p.reply_len,
            "request_len": REQUEST_LEN, "bulk": p.bulk, "reps": p.reps,
            "msg_t_ms": round(msg_t(s).as_secs_f64() * 1e3, 3),
            "query_proc_t_ms": round(p.query_proc.as_secs_f64() * 1e3, 3),
            "broadcast_copies": p.broadcast_copies,
            "topic": TOPIC, "type": "geometry_msgs/msg/TwistStamped",
        },
        "systems": pooled["systems"],
        "summary": summary(&runs, p),
        "runs": runs,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_team_is_the_wifi_scenario_with_its_errors_and_followers() {
        let p = BridgeParams { followers: 2, fer: 0.05, ..BridgeParams::default() };
        let s = p.scenario().unwrap();
        assert_eq!(s.nodes, ["leader", "f1", "f2"]);
        let w = s.wifi.as_ref().unwrap();
        assert_eq!(w.fer, 0.05);
        // f3 (the far station) is not in a team of two followers.
        assert!(w.stations.is_empty());
        let s = BridgeParams::default().scenario().unwrap();
        let w = s.wifi.as_ref().unwrap();
        assert_eq!(w.stations.len(), 1);
        assert_eq!(w.stations[0].fer, Some(0.1));
        // f3 at 12 Mbit/s: 1538 bytes take about 1.05 ms of PPDU, with DIFS, SIFS and the ACK
        // a little more.
        let t = msg_t(&s);
        assert!(t > Duration::from_micros(1000) && t < Duration::from_micros(1300), "{t:?}");
    }

    #[test]
    fn bad_parameters_name_their_option() {
        for (p, opt) in [
            (BridgeParams { fer: 0.7, ..BridgeParams::default() }, "--fer"),
            (BridgeParams { followers: 0, ..BridgeParams::default() }, "--followers"),
            (BridgeParams { rate_hz: 0.0, ..BridgeParams::default() }, "--rate-hz"),
            (BridgeParams { messages: 0, ..BridgeParams::default() }, "--messages"),
            (BridgeParams { reply_len: 0, ..BridgeParams::default() }, "--reply-len"),
            (BridgeParams { broadcast_copies: Some(5), ..BridgeParams::default() }, "--broadcast-copies"),
            (BridgeParams { systems: vec![], ..BridgeParams::default() }, "--systems"),
        ] {
            assert!(p.check().unwrap_err().contains(opt), "{opt}");
        }
        assert_eq!(System::parse("bridge_sample_priority"), Some(System::BridgeSamplePriority));
        assert_eq!(System::parse("dds"), None);
    }

    #[test]
    fn bridge_configs_name_every_peer_and_mark_the_topic_only_for_bridge() {
        let addrs: Vec<IpAddr> = ["10.78.0.1", "10.78.0.2", "10.78.0.3"].iter().map(|a| a.parse().unwrap()).collect();
        let ports = Ports::of_run(3);
        let b = "10.78.0.255".parse().unwrap();
        let timing = (Duration::from_micros(1100), Duration::from_millis(10), Some(2));
        let marked = bridge_config(1, &addrs, b, &ports, System::Bridge, timing);
        assert!(marked.contains("pid = 2\naddress = \"10.78.0.2\""));
        assert_eq!(marked.matches("[[peer]]").count(), 2);
        assert!(marked.contains("priority = \"real_time\""));
        assert!(marked.contains("msg_t = 0.001100"));
        assert!(marked.contains("broadcast_copies = 2"));
        let plain = bridge_config(1, &addrs, b, &ports, System::BridgeSamplePriority, timing);
        assert!(!plain.contains("priority"));
        // Every run's ports are its own and the LRT range (lrt_port + 4·pid + class) stays clear.
        let (a, c) = (Ports::of_run(0), Ports::of_run(1));
        assert!(a.lrt + 4 * 9 + 3 < c.topic);
    }

    #[test]
    fn the_summary_pairs_runs_and_checks_the_goals() {
        let run = |zp99: f64, bp99: f64, zr: f64, br: f64, missing: u64| {
            json!({ "systems": {
                "zenoh": { "topic": { "delay": { "p99_ms": zp99 }, "missing": 0 }, "get": { "rate_per_s": zr } },
                "bridge": { "topic": { "delay": { "p99_ms": bp99 }, "missing": missing }, "get": { "rate_per_s": br } },
            }})
        };
        let p = BridgeParams { systems: vec![System::Zenoh, System::Bridge], ..BridgeParams::default() };
        let s = summary(&[run(30.0, 6.0, 10.0, 20.0, 0), run(60.0, 18.0, 10.0, 10.0, 0)], &p);
        let b = &s["bridge"];
        assert_eq!(b["topic_p99_vs_zenoh_per_run"], json!([0.2, 0.3]));
        assert!((b["topic_p99_vs_zenoh"]["mean"].as_f64().unwrap() - 0.25).abs() < 1e-9);
        assert_eq!(b["goal_topic_p99_le_third"], true);
        assert_eq!(b["goal_get_rate_ge_1_5"], true);
        // One lost message fails the topic goal whatever the delays.
        let s = summary(&[run(30.0, 6.0, 10.0, 20.0, 1)], &p);
        assert_eq!(s["bridge"]["goal_topic_p99_le_third"], false);
        // A failed run has no figures and is left out of the pairs.
        let s = summary(&[json!({ "systems": { "zenoh": { "error": "x" }, "bridge": { "error": "y" } } })], &p);
        assert_eq!(s["bridge"]["goal_get_rate_ge_1_5"], false);
    }
}
