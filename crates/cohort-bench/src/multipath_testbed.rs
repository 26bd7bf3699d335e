//! `cohort bench multipath --testbed`: Cohort's multipath LRT against kernel MPTCP on real
//! kernels (root).
//!
//! Two nodes, `a` (the robot) and `b` (the ground station), joined by two emulated radios:
//! point-to-point links of the testbed (`cohort_emu`), 20 and 10 Mbit/s with 10 ms each way,
//! the simulator's `static` paths. Every run starts by having both links play a trace
//! (`Testbed::play_trace`) at the moment its transfer starts, so every system meets the same
//! channel from its first byte:
//!
//! * `static`: the two links as they are;
//! * `loss`: 10% iid loss on the slower link, both ways;
//! * `handoff`: each link out once, the faster for 20% of the transfer's time at the sum rate
//!   from 30%, the slower for 10% from 60% (the simulator's `handoff`);
//! * `mobility`: both links follow the traces of a drone's 5 GHz and 2.4 GHz radios going
//!   round an ellipse past three access points per band (`cohort_sim::mobility`), for a
//!   fixed time.
//!
//! Systems, alternating within each repetition (the order rotates by one per repetition):
//!
//! * `cohort`: `cohort lrt send --path ... --path ...` and `cohort lrt recv --listen ...
//!   --listen ...`, real processes of this binary in the nodes' namespaces, 1200-byte
//!   messages as fast as the socket takes them;
//! * `mptcp`: kernel MPTCP (`IPPROTO_MPTCP` sockets, the in-kernel path manager: the station
//!   announces its second address with `ip mptcp endpoint ... signal` and the robot opens a
//!   second subflow to it; the default scheduler), one stream written as fast as it goes;
//! * `path0`, `path1`: Cohort on one radio alone (`cohort lrt send --path` with one path).
//!
//! Every system is measured the same way at the receiver: goodput is the bytes delivered from
//! the first delivery to the last over that time, and the longest gap between two deliveries
//! is the stall. A run that does not finish by its deadline is killed and reported as failed;
//! it is kept out of the figures and counted. A mobility run is over when its time is: what
//! arrived by then counts even if the sender cannot flush the rest afterwards (a trace may
//! end with its radio out, and the link stays as the last step left it).

use crate::progress::{Plan, Step};
use crate::stats::{mean, mean_ci95, round};
use cohort_emu::scenario::DirectionSpec;
use cohort_emu::{EmuMode, EmuOptions, Testbed, TestbedScenario};
use cohort_medium::link::{LinkParams, LossModel};
use cohort_medium::trace::Trace;
use serde_json::{Value, json};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// What to run.
#[derive(Debug, Clone, PartialEq)]
pub struct TbMpParams {
    /// The `cohort` binary the Cohort systems run as.
    pub exe: PathBuf,
    pub reps: u64,
    /// Seeds the emulated links' random streams (loss).
    pub seed: u64,
    /// Megabytes of each bulk transfer (`static`, `loss`, `handoff`).
    pub bulk_mb: f64,
    /// Length of the mobility runs, seconds, and the drone's speed, m/s.
    pub mobility_s: f64,
    pub speed_mps: f64,
}

/// Bytes per Cohort message (the simulator's too).
const MESSAGE: usize = 1200;
/// The two radios: rate (Mbit/s) and one-way delay (ms).
const RADIOS: [(f64, f64); 2] = [(20.0, 10.0), (10.0, 10.0)];
const SECRET: &str = "cohort multipath testbed bench secret";

/// A system under test.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TbSystem {
    Cohort,
    Mptcp,
    /// Cohort on one radio alone.
    Path(usize),
}

impl TbSystem {
    pub fn name(self) -> String {
        match self {
            TbSystem::Cohort => "cohort".into(),
            TbSystem::Mptcp => "mptcp".into(),
            TbSystem::Path(i) => format!("path{i}"),
        }
    }
}

/// What one run delivered, as its receiver saw it.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct TbRun {
    pub bytes: u64,
    pub goodput_mbps: f64,
    pub max_gap_ms: f64,
    pub in_order: bool,
    /// Bytes the robot offered to each radio during the run (frames, headers included).
    pub link_bytes: [u64; 2],
    /// Why the run failed (it is then kept out of the figures).
    pub failed: Option<String>,
}

/// How long a run lasts.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Amount {
    Bytes(u64),
    For(Duration),
}

fn radio(k: usize, loss: f64) -> LinkParams {
    let (mbps, owd) = RADIOS[k];
    LinkParams {
        loss: LossModel::Iid { p: loss },
        ..LinkParams::clean(Duration::from_secs_f64(owd / 1e3), (mbps * 1e6) as u64)
    }
}

/// The two nodes and their two radios (the links' settings before any trace plays).
pub fn scenario(seed: u64) -> TestbedScenario {
    let links: Vec<DirectionSpec> = RADIOS
        .iter()
        .map(|&(mbps, owd)| DirectionSpec { owd_ms: Some(owd), rate_mbps: Some(mbps), ..DirectionSpec::default() })
        .collect();
    TestbedScenario::pair("multipath", seed, &links).expect("valid constant scenario")
}

/// Both links' traces for each scenario, from the transfer's start.
pub fn traces(p: &TbMpParams) -> Vec<(&'static str, [Trace; 2], Amount)> {
    let bytes = Amount::Bytes((p.bulk_mb * 1e6) as u64);
    let steady = |k: usize, loss: f64| vec![(Duration::ZERO, Some(radio(k, loss)))];
    let est_ms = p.bulk_mb * 8.0 / 30.0 * 1e3;
    let ms = |x: f64| Duration::from_secs_f64(x / 1e3);
    let out_once = |k: usize, from: f64, to: f64| {
        vec![(Duration::ZERO, Some(radio(k, 0.0))), (ms(from * est_ms), None), (ms(to * est_ms), Some(radio(k, 0.0)))]
    };
    let lap = Duration::from_secs_f64(p.mobility_s);
    let m = cohort_sim::mobility::Mobility::elliptical(p.speed_mps);
    use cohort_sim::mobility::{Band, trace};
    vec![
        ("static", [steady(0, 0.0), steady(1, 0.0)], bytes),
        ("loss", [steady(0, 0.0), steady(1, 0.10)], bytes),
        ("handoff", [out_once(0, 0.3, 0.5), out_once(1, 0.6, 0.7)], bytes),
        ("mobility", [trace(&m, Band::G5, lap), trace(&m, Band::G24, lap)], Amount::For(lap)),
    ]
}

/// A run's deadline: generous, so that only a wedged run meets it.
fn deadline(amount: Amount) -> Duration {
    match amount {
        // At a tenth of the slower radio's rate, plus the start.
        Amount::Bytes(b) => Duration::from_secs_f64(10.0 + b as f64 * 8.0 / 1e6),
        Amount::For(d) => d + Duration::from_secs(40),
    }
}

/// Bytes node `a` offered to each link so far.
fn offered(tb: &Testbed) -> [u64; 2] {
    let mut out = [0u64; 2];
    if let Some(st) = tb.status() {
        for l in st.fabric.links.iter().filter(|l| l.from == "a" && l.link < 2) {
            out[l.link] = l.offered_bytes;
        }
    }
    out
}

/// Waits for `child` and parses the JSON it printed, or says why not.
pub(crate) fn json_of(mut child: Child, deadline: Instant, what: &str) -> Result<Value, String> {
    let status = crate::proc::exited_by(&mut child, deadline);
    if status.is_none() {
        let _ = child.kill();
        let _ = child.wait();
    }
    let mut out = String::new();
    let mut err = String::new();
    if let Some(o) = child.stdout.as_mut() {
        let _ = o.read_to_string(&mut out);
    }
    if let Some(e) = child.stderr.as_mut() {
        let _ = e.read_to_string(&mut err);
    }
    match status {
        None => Err(format!("{what} did not finish by its deadline")),
        Some(s) if !s.success() => Err(format!("{what} failed ({s}): {}", err.trim())),
        Some(_) => serde_json::from_str(&out).map_err(|e| format!("{what} printed no report ({e}): {out}")),
    }
}

/// The links (by index) start playing their traces now.
fn play(tb: &Testbed, traces: Vec<(usize, Trace)>) -> Result<(), String> {
    for (k, tr) in traces {
        tb.play_trace(k, tr).map_err(|e| e.to_string())?;
    }
    Ok(())
}

/// One Cohort run over the radios `traces` name (each playing its trace from the
/// transfer's start), as two processes.
fn cohort_run(
    tb: &Testbed,
    exe: &Path,
    traces: Vec<(usize, Trace)>,
    amount: Amount,
    port: u16,
) -> Result<TbRun, String> {
    let paths: Vec<usize> = traces.iter().map(|t| t.0).collect();
    let addr = |node: &str, k: usize| tb.addr(node, k).map_err(|e| e.to_string());
    let mut recv = tb.command("b", exe).map_err(|e| e.to_string())?;
    recv.args(["lrt", "recv", "--json", "--multipath", "--accept-timeout-s", "10"]);
    let mut send = tb.command("a", exe).map_err(|e| e.to_string())?;
    send.args(["lrt", "send", "--json", "--size", &MESSAGE.to_string(), "--interval-ms", "0"]);
    for &k in &paths {
        let peer = SocketAddr::from((addr("b", k)?, port + k as u16));
        recv.arg("--listen").arg(peer.to_string());
        send.arg("--path").arg(format!("{}:0={peer}", addr("a", k)?));
    }
    match amount {
        Amount::Bytes(b) => {
            let n = b.div_ceil(MESSAGE as u64).to_string();
            recv.args(["--count", &n]);
            send.args(["--count", &n]);
        }
        Amount::For(d) => {
            send.args(["--count", &u64::MAX.to_string(), "--duration-s", &d.as_secs_f64().to_string()]);
        }
    }
    let spawn = |c: &mut Command| {
        c.env("COHORT_TEAM_SECRET", SECRET)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| e.to_string())
    };
    let end = Instant::now() + deadline(amount);
    let receiver = spawn(&mut recv)?;
    // The receiver binds before the sender's first handshake datagram leaves (a lost one is
    // retried anyway).
    std::thread::sleep(Duration::from_millis(150));
    play(tb, traces)?;
    let before = offered(tb);
    let sender = spawn(&mut send)?;
    let sent = json_of(sender, end, "the sender");
    let got = json_of(receiver, end, "the receiver")?;
    // A run for a fixed time is over at its end: what arrived by then counts, and a sender
    // whose last flush fails afterwards (its radio went out with the trace's last step)
    // does not undo it. A bulk run must deliver everything, and its sender must know.
    if let (Err(e), Amount::Bytes(_)) = (sent, amount) {
        return Err(e);
    }
    let after = offered(tb);
    Ok(TbRun {
        bytes: got["bytes"].as_u64().unwrap_or(0),
        goodput_mbps: got["goodput_mbps"].as_f64().unwrap_or(0.0),
        max_gap_ms: got["max_gap_ms"].as_f64().unwrap_or(0.0),
        in_order: got["in_order"].as_bool().unwrap_or(false),
        link_bytes: [after[0] - before[0], after[1] - before[1]],
        failed: None,
    })
}

const IPPROTO_MPTCP: i32 = 262;

fn mptcp_socket() -> std::io::Result<socket2::Socket> {
    socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, Some(socket2::Protocol::from(IPPROTO_MPTCP)))
}

/// The in-kernel path manager on both nodes: two subflows, and the station announces its
/// second radio's address so that the robot opens a subflow over it.
pub fn configure_mptcp(tb: &Testbed) -> Result<(), String> {
    let (a, b) = (tb.ns("a").map_err(|e| e.to_string())?, tb.ns("b").map_err(|e| e.to_string())?);
    let ip = |args: &[&str]| cohort_emu::netns::ip(args).map(|_| ()).map_err(|e| e.to_string());
    for ns in [&a, &b] {
        ip(&["-n", ns, "mptcp", "limits", "set", "subflow", "2", "add_addr_accepted", "2"])?;
    }
    let second = tb.addr("b", 1).map_err(|e| e.to_string())?.to_string();
    ip(&["-n", &b, "mptcp", "endpoint", "add", &second, "dev", "eth1", "signal"])
}

/// One kernel MPTCP run: a stream from `a` to `b`, read as it arrives, over both radios
/// playing `traces` from the connection's start.
fn mptcp_run(tb: &Testbed, traces: Vec<(usize, Trace)>, amount: Amount, port: u16) -> Result<TbRun, String> {
    let io = |e: std::io::Error| e.to_string();
    let listener = tb
        .in_node("b", || {
            let s = mptcp_socket()?;
            s.set_reuse_address(true)?;
            // Bound to every address: the second subflow's MP_JOIN arrives at the second radio's.
            s.bind(&SocketAddr::from(([0, 0, 0, 0], port)).into())?;
            s.listen(4)?;
            // accept() gives up after this too.
            s.set_read_timeout(Some(Duration::from_secs(10)))?;
            Ok(s)
        })
        .map_err(|e| e.to_string())?;
    let client = tb.in_node("a", mptcp_socket).map_err(|e| e.to_string())?;
    let to = SocketAddr::from((tb.addr("b", 0).map_err(|e| e.to_string())?, port));
    let end = Instant::now() + deadline(amount);
    play(tb, traces)?;
    let before = offered(tb);
    let writer = std::thread::spawn(move || -> Result<(), String> {
        client.connect_timeout(&to.into(), Duration::from_secs(5)).map_err(io)?;
        let mut c: TcpStream = client.into();
        c.set_write_timeout(Some(Duration::from_secs(1))).map_err(io)?;
        let chunk = vec![0x5au8; 64 * 1024];
        let start = Instant::now();
        let mut left = match amount {
            Amount::Bytes(b) => b,
            Amount::For(_) => u64::MAX,
        };
        while left > 0 && Instant::now() < end {
            if let Amount::For(d) = amount
                && start.elapsed() >= d
            {
                break;
            }
            let n = (left.min(chunk.len() as u64)) as usize;
            match c.write(&chunk[..n]) {
                Ok(w) => left -= w as u64,
                Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {}
                Err(e) => return Err(e.to_string()),
            }
        }
        // The receiver reads to the end of the stream; closing sends what is queued first.
        let _ = c.shutdown(std::net::Shutdown::Write);
        // Keep the socket until the receiver has everything (it closes, or the deadline).
        let _ = c.set_read_timeout(Some(end.saturating_duration_since(Instant::now()).max(Duration::from_millis(1))));
        let _ = c.read(&mut [0u8; 1]);
        Ok(())
    });
    let (conn, _) = listener.accept().map_err(|e| format!("accept: {e}"))?;
    let mut conn: TcpStream = conn.into();
    conn.set_read_timeout(Some(Duration::from_millis(200))).map_err(io)?;
    let mut buf = vec![0u8; 64 * 1024];
    let (mut first, mut last, mut bytes, mut gap) = (None::<Instant>, None::<Instant>, 0u64, 0f64);
    let mut eof = false;
    while Instant::now() < end {
        match conn.read(&mut buf) {
            Ok(0) => {
                eof = true;
                break;
            }
            Ok(n) => {
                let now = Instant::now();
                if let Some(l) = last {
                    gap = gap.max((now - l).as_secs_f64() * 1e3);
                }
                first.get_or_insert(now);
                last = Some(now);
                bytes += n as u64;
            }
            Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {}
            Err(e) => return Err(format!("read: {e}")),
        }
    }
    drop(conn);
    writer.join().map_err(|_| "the MPTCP writer panicked".to_string())??;
    if !eof {
        return Err("the MPTCP stream did not end by its deadline".into());
    }
    if let Amount::Bytes(b) = amount
        && bytes != b
    {
        return Err(format!("MPTCP delivered {bytes} of {b} bytes"));
    }
    let after = offered(tb);
    let secs = match (first, last) {
        (Some(f), Some(l)) => (l - f).as_secs_f64(),
        _ => 0.0,
    };
    Ok(TbRun {
        bytes,
        goodput_mbps: if secs > 0.0 { bytes as f64 * 8.0 / secs / 1e6 } else { 0.0 },
        max_gap_ms: gap,
        // One TCP stream: the kernel delivers it in order.
        in_order: true,
        link_bytes: [after[0] - before[0], after[1] - before[1]],
        failed: None,
    })
}

/// One run of `sys`; a failure is reported in the run, not raised.
fn run_one(tb: &Testbed, p: &TbMpParams, sys: TbSystem, traces: &[Trace; 2], amount: Amount, port: u16) -> TbRun {
    let both = || traces.iter().cloned().enumerate().collect::<Vec<_>>();
    let r = match sys {
        TbSystem::Cohort => cohort_run(tb, &p.exe, both(), amount, port),
        TbSystem::Path(k) => cohort_run(tb, &p.exe, vec![(k, traces[k].clone())], amount, port),
        TbSystem::Mptcp => mptcp_run(tb, both(), amount, port),
    };
    // Let the links drain before the next run.
    std::thread::sleep(Duration::from_millis(300));
    r.unwrap_or_else(|e| TbRun { failed: Some(e), ..TbRun::default() })
}

/// Goodput (mean and 95% interval), stalls, path shares and failures of one system's runs.
fn pooled(runs: &[TbRun]) -> Value {
    let ok: Vec<&TbRun> = runs.iter().filter(|r| r.failed.is_none()).collect();
    let g: Vec<f64> = ok.iter().map(|r| r.goodput_mbps).collect();
    let (m, h) = mean_ci95(&g);
    let share = |r: &TbRun| r.link_bytes[1] as f64 / (r.link_bytes[0] + r.link_bytes[1]).max(1) as f64;
    json!({
        "runs": runs.len(), "failed": runs.len() - ok.len(),
        "failures": runs.iter().filter_map(|r| r.failed.clone()).collect::<Vec<_>>(),
        "goodput_mbps": round(m, 3), "goodput_ci95": round(h, 3),
        "goodput_runs": g.iter().map(|x| round(*x, 3)).collect::<Vec<_>>(),
        "max_stall_ms": round(ok.iter().map(|r| r.max_gap_ms).fold(0.0, f64::max), 1),
        "max_stall_runs_ms": ok.iter().map(|r| round(r.max_gap_ms, 1)).collect::<Vec<_>>(),
        "in_order": ok.iter().all(|r| r.in_order),
        "second_radio_share_of_bytes": round(mean(&ok.iter().map(|r| share(r)).collect::<Vec<_>>()), 3),
    })
}

/// Paired ratios of goodput `a[k] / b[k]` (same repetition) where both runs succeeded.
fn paired_ratio(a: &[TbRun], b: &[TbRun]) -> Value {
    let r: Vec<f64> = a
        .iter()
        .zip(b)
        .filter(|(x, y)| x.failed.is_none() && y.failed.is_none())
        .map(|(x, y)| x.goodput_mbps / y.goodput_mbps.max(1e-12))
        .collect();
    let (m, h) = mean_ci95(&r);
    json!({ "mean": round(m, 3), "ci95": round(h, 3), "pairs": r.len() })
}

/// A run name unique to this process.
fn run_name() -> String {
    format!("mp{}", std::process::id())
}

/// Runs the testbed half; the JSON report (`testbed` of `cohort bench multipath`).
pub fn bench(p: &TbMpParams, progress: impl FnMut(&Step)) -> Result<Value, String> {
    let positive = |x: f64| x.is_finite() && x > 0.0;
    if p.reps == 0 || !positive(p.bulk_mb) || !positive(p.mobility_s) || !positive(p.speed_mps) {
        return Err("reps, bulk size, mobility time and speed must be positive".into());
    }
    cohort_emu::netns::require_root().map_err(|e| e.to_string())?;
    let tb = Testbed::up(&scenario(p.seed), &run_name(), EmuMode::Thread, EmuOptions::default())
        .map_err(|e| e.to_string())?;
    configure_mptcp(&tb)?;
    let systems = [TbSystem::Cohort, TbSystem::Mptcp, TbSystem::Path(0), TbSystem::Path(1)];
    let mut plan = Plan::new(traces(p).len() as u64 * p.reps * systems.len() as u64, progress);
    let mut report = serde_json::Map::new();
    let mut port = 41_000u16;
    let mut goodput = serde_json::Map::new();
    let mut stall = serde_json::Map::new();
    for (name, traces, amount) in traces(p) {
        let mut runs: Vec<Vec<TbRun>> = vec![Vec::new(); systems.len()];
        for rep in 0..p.reps {
            for k in 0..systems.len() {
                let i = (k + rep as usize) % systems.len();
                plan.begin(&format!("{name}, {}, rep {rep}", systems[i].name()));
                port = if port > 60_000 { 41_000 } else { port + 2 };
                runs[i].push(run_one(&tb, p, systems[i], &traces, amount, port));
            }
        }
        let mut v = serde_json::Map::new();
        for (s, r) in systems.iter().zip(&runs) {
            v.insert(s.name(), pooled(r));
        }
        v.insert("cohort_vs_mptcp".into(), paired_ratio(&runs[0], &runs[1]));
        let g =
            |i: usize| mean(&runs[i].iter().filter(|r| r.failed.is_none()).map(|r| r.goodput_mbps).collect::<Vec<_>>());
        goodput.insert(
            name.into(),
            json!({ "cohort": round(g(0), 3), "mptcp": round(g(1), 3), "ratio": round(g(0) / g(1).max(1e-9), 3) }),
        );
        stall.insert(name.into(), v["cohort"]["max_stall_ms"].clone());
        report.insert(name.into(), Value::Object(v));
    }
    let emu = tb.status();
    tb.down().map_err(|e| e.to_string())?;
    let sum: f64 = RADIOS.iter().map(|r| r.0).sum();
    let ratio = |s: &str| goodput[s]["ratio"].clone();
    report.insert(
        "summary".into(),
        json!({
            "static_share_of_sum": round(goodput["static"]["cohort"].as_f64().unwrap_or(0.0) / sum, 4),
            "mptcp_static_share_of_sum": round(goodput["static"]["mptcp"].as_f64().unwrap_or(0.0) / sum, 4),
            "static_goodput_ratio_vs_mptcp": ratio("static"),
            "loss_goodput_ratio_vs_mptcp": ratio("loss"),
            "handoff_goodput_ratio_vs_mptcp": ratio("handoff"),
            "mobility_goodput_ratio_vs_mptcp": ratio("mobility"),
            "max_stall_ms": stall["handoff"].clone(),
            "mobility_max_stall_ms": stall["mobility"].clone(),
            "surviving_path_rtt_ms": 2.0 * RADIOS[1].1,
            "reps": p.reps,
        }),
    );
    report.insert(
        "emulator".into(),
        emu.map_or(Value::Null, |s| {
            json!({ "late_us_p50": s.late_us_p50, "late_us_p99": s.late_us_p99, "late_us_max": s.late_us_max, "realtime": s.realtime, "outage_drops": s.fabric.counters.outage_drops })
        }),
    );
    report.insert(
        "setup".into(),
        json!({
            "radios_mbps": RADIOS.iter().map(|r| r.0).collect::<Vec<_>>(),
            "owd_ms": RADIOS.iter().map(|r| r.1).collect::<Vec<_>>(),
            "message_bytes": MESSAGE, "bulk_mb": p.bulk_mb, "mobility_s": p.mobility_s, "speed_mps": p.speed_mps,
            "mptcp": "IPPROTO_MPTCP sockets, in-kernel path manager (limits subflow 2 add_addr_accepted 2; the station signals its second address), default scheduler",
            "measured": "at the receiver: bytes from the first delivery to the last over that time; stall = longest gap between deliveries",
        }),
    );
    plan.finish();
    Ok(Value::Object(report))
}
