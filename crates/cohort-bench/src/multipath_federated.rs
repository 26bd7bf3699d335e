//! The federated start on real sockets (seed 001 §4.1; `cohort bench multipath --testbed`,
//! its `federated` part; root).
//!
//! Two nodes of the testbed, `a` (robots) and `b` (the ground station), joined by four
//! emulated radios, the simulator's federated paths: 20 Mbit/s and 10 ms one way, 10 Mbit/s
//! 10 ms with 5% loss, 5 Mbit/s 40 ms, 15 Mbit/s 20 ms with 10% loss. Every transfer is a real
//! `cohort lrt send` process in `a` over all four (`--super-arm 2`: MS-UCB sends over the two
//! it picks each round) to a `cohort lrt recv` process in `b`. The team is a
//! [`PathStatsService`] member in `b`, robot 1, the sharing group's coordinator on the first
//! radio's subnet; each transfer that shares is a new robot (pid 2, 3, ...) that joins it,
//! starts its paths from the team's view and hands its own statistics in at the end.
//!
//! Each transfer sends 1200-byte messages as fast as the paths take them for a fixed time
//! (every message it sent must arrive, in order). First a training transfer (twice as long)
//! shares what it learned. Then per repetition a
//! `cold` transfer (no path keys: its bandit starts from nothing, as a robot alone would) and
//! a `federated` one (the paths' keys: it starts from the team's view), the order alternating.
//! Regret of the first 100 rounds against the values the training transfer learned, computed
//! as the simulator's bench does ([`crate::multipath::regret`]), from the super-arms each
//! sender reports (`first_rounds` in its `--json`).

use crate::multipath::regret;
use crate::multipath_testbed::json_of;
use crate::progress::{Plan, Step};
use crate::stats::{mean, mean_ci95, round};
use cohort_emu::scenario::DirectionSpec;
use cohort_emu::{EmuMode, EmuOptions, Testbed, TestbedScenario};
use cohort_net::federated::PathStatsService;
use cohort_net::{GroupConfig, GroupSocket, Start};
use cohort_proto::multipath::federated::PathKey;
use serde_json::{Value, json};
use std::net::{Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// What to run.
#[derive(Debug, Clone, PartialEq)]
pub struct FedTbParams {
    /// The `cohort` binary the transfers run as.
    pub exe: PathBuf,
    /// Repetitions: one cold and one federated transfer each.
    pub reps: u64,
    /// Seeds the emulated links' loss.
    pub seed: u64,
    /// Seconds each transfer sends for (the training transfer twice as long): MS-UCB's
    /// rounds follow the paths' windows, so 100 rounds take a time, not a size.
    pub seconds: f64,
}

/// The four radios: rate (Mbit/s), one-way delay (ms), iid loss.
const RADIOS: [(f64, f64, f64); 4] = [(20.0, 10.0, 0.0), (10.0, 10.0, 0.05), (5.0, 40.0, 0.0), (15.0, 20.0, 0.10)];
/// Paths per super-arm (the simulator's federated start too).
const SUPER_ARM: usize = 2;
/// Rounds the regret sums over.
const ROUNDS: usize = 100;
const MESSAGE: usize = 1200;
/// How long after its sending time a transfer may take to finish (handshake, sharing, flush).
const SLACK: Duration = Duration::from_secs(30);
const SECRET: &str = "cohort federated testbed bench secret";
const TEAM: u32 = 1;
/// The team mate's pid in the sharing group.
const MATE: u32 = 1;
const SHARE_PORT: u16 = 7460;
const DATA_PORT: u16 = 42_000;

/// The two nodes and their four radios.
pub fn scenario(seed: u64) -> TestbedScenario {
    let links: Vec<DirectionSpec> = RADIOS
        .iter()
        .map(|&(mbps, owd, loss)| DirectionSpec {
            owd_ms: Some(owd),
            rate_mbps: Some(mbps),
            loss: (loss > 0.0).then_some(loss),
            ..DirectionSpec::default()
        })
        .collect();
    TestbedScenario::pair("mpfed", seed, &links).expect("valid constant scenario")
}

/// One transfer as its sender reported it.
struct Transfer {
    /// Super-arms of the first rounds.
    rounds: Vec<Vec<usize>>,
    /// Each path's bandit value at the end (MS-UCB's `v`).
    v: Vec<f64>,
    goodput_mbps: f64,
    /// The sender's `federated` report, if it shared.
    federated: Value,
}

fn addr(tb: &Testbed, node: &str, k: usize) -> Result<Ipv4Addr, String> {
    tb.addr(node, k).map_err(|e| e.to_string())
}

/// The first radio's subnet broadcast (a /24: `10.77.0.255`).
fn share_broadcast(tb: &Testbed) -> Result<SocketAddr, String> {
    let o = addr(tb, "b", 0)?.octets();
    Ok(SocketAddr::from((Ipv4Addr::new(o[0], o[1], o[2], 255), SHARE_PORT)))
}

/// Robot `pid`'s transfer of `seconds`; `share`: with the paths' keys (joining the team),
/// else cold.
fn transfer(tb: &Testbed, p: &FedTbParams, seconds: f64, pid: u32, share: bool, port: u16) -> Result<Transfer, String> {
    let mut recv = tb.command("b", &p.exe).map_err(|e| e.to_string())?;
    recv.args(["lrt", "recv", "--json", "--multipath", "--accept-timeout-s", "10"]);
    let mut send = tb.command("a", &p.exe).map_err(|e| e.to_string())?;
    send.args(["lrt", "send", "--json", "--interval-ms", "0", "--super-arm"]).arg(SUPER_ARM.to_string());
    send.args(["--size", &MESSAGE.to_string(), "--count", &u64::MAX.to_string(), "--duration-s"]);
    send.arg(seconds.to_string());
    for k in 0..RADIOS.len() {
        let peer = SocketAddr::from((addr(tb, "b", k)?, port + k as u16));
        recv.arg("--listen").arg(peer.to_string());
        send.arg("--path").arg(format!("{}:0={peer}", addr(tb, "a", k)?));
    }
    if share {
        for k in 0..RADIOS.len() {
            send.arg("--path-key").arg(format!("radio{k}"));
        }
        let own = SocketAddr::from((addr(tb, "a", 0)?, SHARE_PORT));
        send.args(["--share-pid", &pid.to_string(), "--share-addr", &own.to_string()]);
        send.args(["--share-broadcast", &share_broadcast(tb)?.to_string()]);
    }
    let spawn = |c: &mut Command| {
        c.env("COHORT_TEAM_SECRET", SECRET)
            .env("RUST_LOG", "off")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| e.to_string())
    };
    let end = Instant::now() + Duration::from_secs_f64(seconds) + SLACK;
    let receiver = spawn(&mut recv)?;
    std::thread::sleep(Duration::from_millis(150));
    let sender = spawn(&mut send)?;
    let sent = json_of(sender, end, "the sender")?;
    let got = json_of(receiver, end, "the receiver")?;
    let rounds: Vec<Vec<usize>> =
        serde_json::from_value(sent["first_rounds"].clone()).map_err(|e| format!("the sender's first_rounds: {e}"))?;
    let v = sent["paths"]
        .as_array()
        .map_or_else(Vec::new, |ps| ps.iter().map(|q| q["bandit_v"].as_f64().unwrap_or(0.0)).collect::<Vec<_>>());
    if v.len() != RADIOS.len() {
        return Err(format!("the sender reported {} paths", v.len()));
    }
    if got["messages"] != sent["sent"] || got["in_order"] != true {
        let (n, of, ordered) = (&got["messages"], &sent["sent"], &got["in_order"]);
        return Err(format!("the receiver got {n} of {of} messages (in order: {ordered})"));
    }
    Ok(Transfer {
        rounds,
        v,
        goodput_mbps: got["goodput_mbps"].as_f64().unwrap_or(0.0),
        federated: sent.get("federated").cloned().unwrap_or(Value::Null),
    })
}

/// Runs the federated start on the testbed; the JSON report (`testbed.federated`).
pub fn bench(p: &FedTbParams, progress: impl FnMut(&Step)) -> Result<Value, String> {
    if p.reps == 0 || !(p.seconds.is_finite() && p.seconds > 0.0) {
        return Err("reps and the transfer time must be positive".into());
    }
    cohort_emu::netns::require_root().map_err(|e| e.to_string())?;
    let tb =
        Testbed::up(&scenario(p.seed), &format!("mf{}", std::process::id()), EmuMode::Thread, EmuOptions::default())
            .map_err(|e| e.to_string())?;
    // The training transfer, then a cold and a federated start per repetition.
    let mut plan = Plan::new(1 + 2 * p.reps, progress);
    let out = run(&tb, p, &mut |what: &str| plan.begin(what));
    plan.finish();
    let down = tb.down().map_err(|e| e.to_string());
    let report = out?;
    down?;
    Ok(report)
}

fn run(tb: &Testbed, p: &FedTbParams, progress: &mut impl FnMut(&str)) -> Result<Value, String> {
    let (mate_addr, bcast) = (SocketAddr::from((addr(tb, "b", 0)?, SHARE_PORT)), share_broadcast(tb)?);
    let mate = tb
        .in_node("b", || {
            let cfg = GroupConfig::new(SECRET.as_bytes().to_vec(), TEAM, MATE, mate_addr, bcast);
            let g = GroupSocket::open(cfg, Start::Static(vec![MATE])).map_err(std::io::Error::other)?;
            PathStatsService::start(g).map_err(std::io::Error::other)
        })
        .map_err(|e| format!("the team mate: {e}"))?;
    let out = transfers(tb, p, &mate, progress);
    mate.stop();
    out
}

/// The training transfer, then the cold and federated ones, beside the team mate `mate`.
fn transfers(
    tb: &Testbed,
    p: &FedTbParams,
    mate: &PathStatsService,
    progress: &mut impl FnMut(&str),
) -> Result<Value, String> {
    let mut pid = MATE;
    let mut port = DATA_PORT;
    let mut next = |share: bool| {
        pid += 1;
        port += RADIOS.len() as u16;
        (pid, port, share)
    };
    progress("federated start: training transfer");
    let (tp, tport, _) = next(true);
    let train = transfer(tb, p, p.seconds * 2.0, tp, true, tport)?;
    let keys: Vec<PathKey> =
        (0..RADIOS.len()).map(|k| PathKey::new(&format!("radio{k}")).expect("valid key")).collect();
    let view: Vec<Value> = mate
        .known(&keys)
        .iter()
        .map(|s| s.map_or(Value::Null, |s| json!({ "u": round(s.u, 4), "v": round(s.v, 4) })))
        .collect();
    let truth = train.v.clone();
    let (mut cold, mut warm) = (Vec::new(), Vec::new());
    let (mut cold_gp, mut warm_gp) = (Vec::new(), Vec::new());
    let mut started_from = Vec::new();
    // Every transfer in order: its super-arms, regret and final values.
    let mut played = Vec::new();
    for rep in 0..p.reps {
        let order = if rep % 2 == 0 { [false, true] } else { [true, false] };
        for share in order {
            progress(&format!("federated start: rep {rep}, {}", if share { "federated" } else { "cold" }));
            let (rp, rport, share) = next(share);
            let t = transfer(tb, p, p.seconds, rp, share, rport)?;
            if t.rounds.len() < ROUNDS {
                return Err(format!("a transfer played {} rounds, fewer than {ROUNDS}", t.rounds.len()));
            }
            let g = regret(&t.rounds, &truth, SUPER_ARM, ROUNDS);
            played.push(json!({ "rep": rep, "start": if share { "federated" } else { "cold" }, "regret": round(g, 3),
                "first_rounds": t.rounds.iter().take(ROUNDS).collect::<Vec<_>>(), "final_v": t.v.iter().map(|v| round(*v, 4)).collect::<Vec<_>>() }));
            if share {
                warm.push(g);
                warm_gp.push(t.goodput_mbps);
                started_from.push(t.federated);
            } else {
                cold.push(g);
                cold_gp.push(t.goodput_mbps);
            }
        }
    }
    let st = mate.stats();
    let ci = |v: &[f64]| {
        let (m, h) = mean_ci95(v);
        json!({ "mean": round(m, 3), "ci95": round(h, 3), "runs": v.len() })
    };
    let ratio = mean(&warm) / mean(&cold).max(1e-12);
    Ok(json!({
        "paths": RADIOS.len(), "super_arm": SUPER_ARM, "rounds": ROUNDS, "runs": cold.len(), "seconds": p.seconds,
        "radios": RADIOS.iter().map(|r| json!({ "mbps": r.0, "owd_ms": r.1, "loss": r.2 })).collect::<Vec<_>>(),
        "truth_v": truth.iter().map(|v| round(*v, 4)).collect::<Vec<_>>(),
        "team_view_after_training": view,
        "regret_cold": ci(&cold), "regret_federated": ci(&warm),
        "regret_cold_runs": cold.iter().map(|x| round(*x, 3)).collect::<Vec<_>>(),
        "regret_federated_runs": warm.iter().map(|x| round(*x, 3)).collect::<Vec<_>>(),
        "federated_regret_ratio": round(ratio, 3),
        "goodput_mbps": { "cold": ci(&cold_gp), "federated": ci(&warm_gp), "training": round(train.goodput_mbps, 3) },
        "federated_started_from": started_from,
        "transfers": played,
        "team_mate": { "rounds": st.rounds, "reports": st.reports, "malformed": st.malformed },
        "method": "real cohort lrt send/recv processes over four emulated radios; the team mate a PathStatsService member; regret against the training transfer's final bandit values",
    }))
}
