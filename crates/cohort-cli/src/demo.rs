//! `cohort demo`: the team stack on its built-in default scenario.
//!
//! Stage 1: a real coded transfer in-process. A leader streams a mission file to
//! a follower as source symbols plus sliding-window repair symbols over a seeded lossy link;
//! the follower's decoder acknowledges its seen count, recovers what the link dropped and
//! releases every symbol in order. The demo prints what was lost and what was recovered, and
//! checks the file arrived byte for byte.

use clap::Args;
use cohort_coding::{CoderConfig, Decoder, Encoder, RepairInfo};
use rand::{Rng, RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::Serialize;
use std::collections::VecDeque;
use std::process::ExitCode;

#[derive(Debug, Args)]
pub struct DemoArgs {
    /// Seed of the link's losses and of the payload.
    #[arg(long, default_value_t = 7)]
    seed: u64,
    /// Iid loss probability of the link, both directions.
    #[arg(long, default_value_t = 0.15)]
    loss: f64,
    /// Size of the transferred file in KiB.
    #[arg(long, default_value_t = 256)]
    kib: usize,
    /// Print a JSON summary instead of text.
    #[arg(long)]
    json: bool,
}

#[derive(Debug, thiserror::Error)]
pub enum DemoError {
    #[error("invalid argument: {0}")]
    Invalid(String),
    #[error("transfer did not complete within {0} steps")]
    Stalled(u64),
    #[error("delivered data differs from the source")]
    Corrupt,
}

/// What the coded transfer did.
#[derive(Debug, Default, Serialize)]
pub struct TransferSummary {
    pub bytes: usize,
    pub source_sent: u64,
    pub source_lost: u64,
    pub repair_sent: u64,
    pub repair_lost: u64,
    pub acks_sent: u64,
    pub acks_lost: u64,
    pub recovered: u64,
    pub delivered_in_order: u64,
    pub identical: bool,
    /// Link round trips (one step each way) the transfer took.
    pub steps: u64,
}

/// Stage 3's scenario: a leader and four followers on one 802.11a channel.
const TEAM_SCENARIO: &str = include_str!("../../../scenarios/lrt_wifi_team.toml");

const SYMBOL: usize = 1200;
const WINDOW: usize = 64;
/// Packets the link holds in each direction: a 16-packet one-way delay.
const DELAY: usize = 16;

enum Packet {
    Source(u64, Vec<u8>),
    Repair(RepairInfo, Vec<u8>),
}

/// Streams `data` over a lossy link with feedback; returns the bytes delivered and a summary.
pub fn coded_transfer(data: &[u8], loss: f64, seed: u64) -> Result<(Vec<u8>, TransferSummary), DemoError> {
    let cfg = CoderConfig { symbol_size: SYMBOL, max_window: WINDOW };
    let mut enc = Encoder::new(cfg).map_err(|e| DemoError::Invalid(e.to_string()))?;
    let mut dec = Decoder::new(cfg).map_err(|e| DemoError::Invalid(e.to_string()))?;
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let chunks: Vec<&[u8]> = data.chunks(SYMBOL).collect();
    let total = chunks.len() as u64;
    let mut forward: VecDeque<Option<Packet>> = (0..DELAY).map(|_| None).collect();
    let mut backward: VecDeque<Option<(u64, u64)>> = (0..DELAY).map(|_| None).collect();
    let mut out = Vec::with_capacity(data.len());
    let mut s = TransferSummary { bytes: data.len(), ..Default::default() };
    let mut credit = 0.0f64;
    // Redundancy follows the loss the acknowledgements reveal (seed 004 §III-E), with a floor.
    let redundancy = (loss * 1.5).max(0.05);
    let max_steps = 50 * total + 10_000;
    while s.delivered_in_order < total {
        s.steps += 1;
        if s.steps > max_steps {
            return Err(DemoError::Stalled(max_steps));
        }
        if let Some((seen, released)) = backward.pop_front().flatten() {
            enc.ack(seen, released);
        }
        credit += redundancy;
        let pkt = if enc.rank() < total && !enc.is_full() && credit < 1.0 {
            let i = enc.push(chunks[enc.rank() as usize]).map_err(|e| DemoError::Invalid(e.to_string()))?;
            s.source_sent += 1;
            Some(Packet::Source(i, chunks[i as usize].to_vec()))
        } else if !enc.window().is_empty() {
            credit = (credit - 1.0).max(0.0);
            let mut buf = vec![0u8; SYMBOL];
            let info = enc.repair(&mut buf).map_err(|e| DemoError::Invalid(e.to_string()))?;
            s.repair_sent += 1;
            Some(Packet::Repair(info, buf))
        } else {
            None
        };
        let lost = pkt.is_some() && rng.random_bool(loss);
        match (&pkt, lost) {
            (Some(Packet::Source(..)), true) => s.source_lost += 1,
            (Some(Packet::Repair(..)), true) => s.repair_lost += 1,
            _ => {}
        }
        forward.push_back(if lost { None } else { pkt });
        match forward.pop_front().flatten() {
            Some(Packet::Source(i, d)) => {
                let _ = dec.push_source(i, &d);
            }
            Some(Packet::Repair(info, d)) => {
                let _ = dec.push_repair(info, &d);
            }
            None => {}
        }
        while let Some((i, sym)) = dec.pop() {
            let want = chunks[i as usize].len();
            out.extend_from_slice(&sym[..want]);
            s.delivered_in_order += 1;
        }
        s.acks_sent += 1;
        let ack_lost = rng.random_bool(loss);
        s.acks_lost += u64::from(ack_lost);
        backward.push_back((!ack_lost).then(|| (dec.seen(), dec.next_release())));
    }
    s.recovered = dec.stats().recovered;
    s.identical = out == data;
    if !s.identical {
        return Err(DemoError::Corrupt);
    }
    Ok((out, s))
}

pub fn run(a: &DemoArgs) -> Result<ExitCode, DemoError> {
    if !(0.0..0.9).contains(&a.loss) {
        return Err(DemoError::Invalid(format!("--loss {} must be in [0, 0.9)", a.loss)));
    }
    if a.kib == 0 {
        return Err(DemoError::Invalid("--kib must be positive".into()));
    }
    let mut rng = ChaCha8Rng::seed_from_u64(a.seed ^ 0xF11E);
    let mut data = vec![0u8; a.kib * 1024];
    rng.fill_bytes(&mut data);
    let (_, s) = coded_transfer(&data, a.loss, a.seed)?;
    let session = crate::demo_lrt::secure_session(a.loss, a.seed, 3000);
    let team = cohort_sim::Scenario::from_toml(TEAM_SCENARIO).map_err(|e| DemoError::Invalid(e.to_string()))?;
    let wifi = cohort_sim::run(&team, a.seed, cohort_sim::Recorder::default());
    let group_sim = cohort_sim::group::run_group(&cohort_sim::group::GroupScenario::default(), a.seed);
    let group_live = crate::group_cmd::loopback_team(20).map_err(|e| DemoError::Invalid(e.to_string()))?;
    let preemption = coorp_team(a.seed)?;
    let multipath = two_radios(a.seed)?;
    let agent = agent_on_kernels();
    let ros2 = ros2_through_bridges()?;
    if a.json {
        let agent = match &agent {
            Ok(r) => serde_json::to_value(r).unwrap_or_default(),
            Err(e) => serde_json::json!({ "skipped": e }),
        };
        let v = serde_json::json!({
            "coded_transfer": s, "secure_session": session, "wifi_team": wifi,
            "group_simulated": group_sim, "group_loopback": group_live, "preemption": preemption,
            "agent_on_kernels": agent, "two_radios": multipath,
            "ros2_through_bridges": ros2.as_ref().map_or_else(|e| serde_json::json!({ "skipped": e }), Clone::clone),
        });
        println!("{}", serde_json::to_string_pretty(&v).unwrap_or_default());
        return Ok(ExitCode::SUCCESS);
    }
    println!("Cohort demo (seed {}, replay: cohort demo --seed {} --loss {})", a.seed, a.seed, a.loss);
    println!();
    println!("1. Coded transfer: leader -> follower, {} KiB mission file", a.kib);
    println!(
        "   link: {:.0}% iid loss each way, {DELAY}-packet one-way delay; {SYMBOL} B symbols, window {WINDOW}",
        a.loss * 100.0
    );
    println!(
        "   sent     {:>6} source symbols, {:>5} repair symbols, {:>6} acks",
        s.source_sent, s.repair_sent, s.acks_sent
    );
    println!(
        "   lost     {:>6} source symbols, {:>5} repair symbols, {:>6} acks",
        s.source_lost, s.repair_lost, s.acks_lost
    );
    println!("   recovered {:>5} source symbols by decoding (no retransmission)", s.recovered);
    println!(
        "   delivered {:>5}/{} symbols in order, file identical: {}, {} link steps",
        s.delivered_in_order, s.source_sent, s.identical, s.steps
    );
    let t = &session;
    println!();
    println!("2. Secure coded transport (LRT): leader -> follower, one 100 B command per ms");
    println!(
        "   link: {:.0}% iid loss each way, {} ms one way; every datagram sealed with the session's keys",
        a.loss * 100.0,
        t.owd_ms
    );
    println!(
        "   key exchange (Noise NNpsk0 on the team secret: forward secrecy) done in {:.1} ms, {} message 1(s) sent",
        t.key_exchange_ms, t.key_exchange_attempts
    );
    println!(
        "   delivered {}/{} commands in order: {} | delay p50 {:.1} ms, p99 {:.1} ms | {} datagrams lost, {} repairs sent",
        t.commands_delivered, t.commands_sent, t.in_order, t.p50_ms, t.p99_ms, t.datagrams_lost, t.repairs_sent
    );
    let r = &t.follower_rejected;
    println!(
        "   intruder injected {} forged and {} replayed frames: rejected {} (auth failed), {} (replayed), {} (too old); accepted only {} genuine",
        t.forged_injected,
        t.replays_injected,
        r.auth_failed + r.wrong_team + r.other,
        r.replayed,
        r.too_old,
        r.accepted
    );
    println!();
    println!("3. Team on one 802.11a channel (simulated): leader 0, followers 1-4, 5% frame errors, a loss burst");
    println!("   (delays: message queued to delivered; for the query, request to reply)");
    let names = [
        "commands 0->1 (EF, AC_VO)",
        "commands 0->2 (EF, AC_VO)",
        "telemetry 3->0 (best effort)",
        "map transfer 4->2 (bulk, BE)",
        "status query 0->3 (AF41, VI)",
    ];
    for (f, name) in wifi.flows.iter().zip(names) {
        println!(
            "   {name:<30} {:>4}/{:<4} in order: {} | p50 {:>6.1} ms  p99 {:>6.1} ms  {:>5.2} Mbit/s",
            f.delivered, f.sent, f.in_order, f.p50_ms, f.p99_ms, f.goodput_mbps
        );
    }
    println!(
        "   {} packets on the air, {} dropped by the injected burst; trace {} (replay: cohort sim run scenarios/lrt_wifi_team.toml --seed {})",
        wifi.packets, wifi.packets_dropped_by_faults, wifi.trace_hash, a.seed
    );
    println!();
    println!("4. Group request-reply and membership (GCBRR): replies in slots, never contending");
    let g = &group_live;
    println!("   real UDP on loopback, {} robots, team key on every datagram:", g.members);
    for line in &g.log {
        println!("   - {line}");
    }
    println!(
        "   {} requests, {} replies, {} failed; request-reply p50 {:.1} ms",
        g.requests, g.replies, g.failed_replies, g.latency_p50_ms
    );
    let o = &group_sim;
    println!(
        "   simulated under random crashes, joins, leaves, loss and duplication ({} processes, seed {}):",
        o.processes, o.seed
    );
    println!(
        "   {} requests completed, {} replies, {} crashes, {} joins, {} leaves, {} coordinator changes; invariants {}",
        o.requests_completed,
        o.replies,
        o.crashes,
        o.joins,
        o.leaves,
        o.coordinator_changes,
        if o.ok() { "hold" } else { "BROKEN" }
    );
    println!(
        "   (replay: {}; a team on the testbed: cohort group run --help)",
        cohort_sim::group::replay_command(o.seed)
    );
    println!();
    println!("5. Coordinated preemption (COORP): a 30 Hz control loop beside model training (simulated)");
    println!(
        "   leader + 4 workers on 802.11ac: 12 KB perceptions up, 1 KB actions down, 10 MiB parameter updates; \
         a loop violates past 33 ms"
    );
    for r in &preemption {
        println!(
            "   {:<8} control {:<9} {:<22} violations {:>6.2}% of {:>4} loops, reaction p99 {:>6.1} ms, bulk {:>6.1} Mbit/s",
            r.profile, r.control, r.system, r.violation_pct, r.loops, r.reaction_p99_ms, r.bulk_mbps
        );
    }
    println!("   (every system of seed 000 and the scalability sweep: cohort bench coorp)");
    println!();
    println!("6. Coordinated preemption for applications Cohort does not change (real kernels, root)");
    match &agent {
        Err(e) => println!("   skipped: {e}"),
        Ok(r) => {
            println!(
                "   robot A runs `cohort coorp agent`; a plain UDP loop at 30 Hz (DSCP 0) and a plain TCP upload leave A"
            );
            for f in &r.flows {
                println!("   - {f}");
            }
            println!(
                "   receiver: {} control datagrams, the first {} as sent, then EF: {:.1}% of the last second EF",
                r.datagrams, r.before_ef, r.ef_share_last_second_pct
            );
            println!(
                "   gate: {} holds around control messages; upload {:.1} MB; kernel state removed after: {}",
                r.window_holds, r.upload_mb, r.cleaned_up
            );
            println!(
                "   then `cohort bulk` from A under the agent: {:.1} MB, verified by the receiver: {}; {} permits asked \
                 ({} closed), {} session(s) at the agent",
                r.cohort_bulk_mb,
                r.cohort_bulk_verified,
                r.cohort_bulk_permits,
                r.cohort_bulk_closed_permits,
                r.cohort_bulk_agent_sessions
            );
        }
    }
    println!();
    println!("7. One robot, two radios (multipath LRT, simulated): 20 + 10 Mbit/s, the faster radio lost mid-transfer");
    for m in &multipath {
        println!(
            "   {:<28} {:>5}/{} messages in order: {} | goodput {:>5.1} Mbit/s | longest stall {:>6.1} ms | radio 1 down: {}",
            m.system, m.delivered, m.messages, m.in_order, m.goodput_mbps, m.max_stall_ms, m.path0_down
        );
    }
    println!("   (static paths, loss, handoffs, short flows, federated start: cohort bench multipath)");
    println!();
    println!("8. ROS 2 nodes through `cohort bridge` (two robots on loopback, real processes)");
    match &ros2 {
        Ok(r) => {
            println!(
                "   zenoh-ros2-sdk /cmd_vel at 100 Hz, robot 1 -> robot 2: {}/{} received, {} missing, {} duplicated, {} out of order",
                r["received"], r["sent"], r["missing"], r["duplicates"], r["out_of_order"]
            );
            println!(
                "   one-way delay p50 {} ms, p99 {} ms (bridge, LRT as EF, bridge); the testbed comparison: cohort bench bridge",
                r["delay_p50_ms"], r["delay_p99_ms"]
            );
        }
        Err(e) => println!("   skipped: {e}"),
    }
    if let Ok(r) = &ros2
        && (r["missing"] != 0 || r["duplicates"] != 0 || r["out_of_order"] != 0)
    {
        return Err(DemoError::Invalid(format!("the bridged ROS 2 topic lost or reordered messages: {r}")));
    }
    if !wifi.ok() {
        return Err(DemoError::Invalid(format!("simulation invariants broken: {}", wifi.violations.join("; "))));
    }
    if multipath.iter().any(|m| m.delivered != m.messages || !m.in_order) {
        return Err(DemoError::Invalid("multipath lost or reordered a message".into()));
    }
    if !o.ok() {
        return Err(DemoError::Invalid(format!("group invariants broken: {}", o.violations.join("; "))));
    }
    Ok(ExitCode::SUCCESS)
}

/// Stage 8: a ROS 2 publisher and subscriber (`zenoh-ros2-sdk`) through two robots' bridges on
/// loopback (`python -m cohort.ros2_probe demo`). `Ok(Err(reason))`: skipped, because Python,
/// Zenoh or the SDK is not installed; any other failure of the Python half is an error.
fn ros2_through_bridges() -> Result<Result<serde_json::Value, String>, DemoError> {
    let args = ["demo", "--count", "200"].map(String::from);
    let out = match crate::python::module_output("cohort.ros2_probe", &args) {
        Ok(o) => o,
        Err(e) => return Ok(Err(e.to_string())),
    };
    let err = String::from_utf8_lossy(&out.stderr);
    if let Some(missing) = err.lines().find(|l| l.contains("ModuleNotFoundError")) {
        return Ok(Err(format!("a Python package is missing ({})", missing.trim())));
    }
    if !out.status.success() {
        let last = err.trim().lines().last().unwrap_or("no message");
        return Err(DemoError::Invalid(format!("ROS 2 through the bridges failed ({}): {last}", out.status)));
    }
    let stdout = String::from_utf8_lossy(&out.stdout);
    let line = stdout.lines().rev().find(|l| l.starts_with('{'));
    let r = line.and_then(|l| serde_json::from_str(l).ok());
    r.map(Ok).ok_or_else(|| DemoError::Invalid("ROS 2 through the bridges printed no report".into()))
}

/// Stage 7: one system's transfer over two radios, the faster lost mid-transfer.
#[derive(Debug, Serialize)]
pub struct TwoRadios {
    pub system: String,
    pub messages: u32,
    pub delivered: u32,
    pub in_order: bool,
    pub goodput_mbps: f64,
    pub max_stall_ms: f64,
    pub path0_down: bool,
}

/// Stage 7: 6 MB over a 20 and a 10 Mbit/s radio (10 ms each way); the 20 Mbit/s radio goes
/// out of range for good after 1 s. Cohort's scheduler, then MPTCP's default logic (min-RTT)
/// over the same coded transport.
pub fn two_radios(seed: u64) -> Result<Vec<TwoRadios>, DemoError> {
    use cohort_medium::link::LinkParams;
    use cohort_proto::multipath::{MpConfig, Scheduler};
    use cohort_sim::multipath::{MpPath, MpRun, run};
    use std::time::Duration;
    let mut fast = MpPath::new(LinkParams::clean(Duration::from_millis(10), 20_000_000));
    fast.outages.push((Duration::from_secs(1), Duration::from_secs(3600)));
    let slow = MpPath::new(LinkParams::clean(Duration::from_millis(10), 10_000_000));
    let messages = 5000;
    let mut out = Vec::new();
    for (name, scheduler) in [
        ("Cohort (LD-MPSP, MS-UCB)", Scheduler::LdMpsp { tau: Duration::from_millis(20) }),
        ("min-RTT (MPTCP's default)", Scheduler::MinRtt),
    ] {
        let cfg = MpConfig { scheduler, seed, ..MpConfig::default() };
        let r =
            MpRun { app_buffer_bytes: 4800, ..MpRun::new(cfg, vec![fast.clone(), slow.clone()], messages, 1200, seed) };
        let o = run(&r).map_err(|e| DemoError::Invalid(e.to_string()))?;
        out.push(TwoRadios {
            system: name.into(),
            messages,
            delivered: o.delivered,
            in_order: o.in_order,
            goodput_mbps: o.goodput_mbps,
            max_stall_ms: o.max_stall_ms,
            path0_down: !o.sender.paths[0].up,
        });
    }
    Ok(out)
}

/// Stage 6, on real kernels.
#[derive(Debug, Serialize)]
pub struct AgentDemo {
    pub flows: Vec<String>,
    pub datagrams: usize,
    pub before_ef: usize,
    pub ef_share_last_second_pct: f64,
    pub window_holds: u64,
    pub upload_mb: f64,
    pub cleaned_up: bool,
    /// Then Cohort's own bulk (`cohort bulk`) under the agent: MB sent, verified by the
    /// receiver, permits asked and of them closed, sessions the agent saw.
    pub cohort_bulk_mb: f64,
    pub cohort_bulk_verified: bool,
    pub cohort_bulk_permits: u64,
    pub cohort_bulk_closed_permits: u64,
    pub cohort_bulk_agent_sessions: u64,
}

/// Stage 6: two namespaces, the agent a real process of this binary, an unmarked control loop
/// and an upload (`cohort_bench::coorp_agent_pair`). Without root, or without nftables, the
/// reason it was skipped.
fn agent_on_kernels() -> Result<AgentDemo, String> {
    use cohort_bench::coorp_agent_pair::{Pair, control_beside_upload};
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let pair = Pair::new("demo", exe).map_err(|e| format!("{e} (sudo cohort demo runs it)"))?;
    let r = control_beside_upload(&pair, "coorp", 120)?;
    let b = cohort_bench::coorp_agent_pair::cohort_bulk_under_agent(&pair, 4 << 20)?;
    let flows = r.agent["flows"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|f| {
            let ls = f["verdict"].as_str().is_some_and(|v| v.starts_with("ls"));
            let period = match f["period_ms"].as_f64() {
                Some(p) if ls => format!(", period {p:.1} ms"),
                _ => String::new(),
            };
            format!(
                "{} {} -> {}: {} ({}{period})",
                f["proto"].as_str().unwrap_or(""),
                f["src"].as_str().unwrap_or(""),
                f["dst"].as_str().unwrap_or(""),
                f["verdict"].as_str().unwrap_or(""),
                f["marking"].as_str().unwrap_or(""),
            )
        })
        .collect();
    let last = &r.dscp[r.dscp.len().saturating_sub(270)..];
    Ok(AgentDemo {
        flows,
        datagrams: r.dscp.len(),
        before_ef: r.before_ef.unwrap_or(r.dscp.len()),
        ef_share_last_second_pct: 100.0 * last.iter().filter(|&&d| d == 46).count() as f64 / last.len().max(1) as f64,
        window_holds: r.agent["stats"]["window_holds"].as_u64().unwrap_or(0),
        upload_mb: r.upload_bytes as f64 / 1e6,
        cleaned_up: r.cleaned_up,
        cohort_bulk_mb: b.bytes as f64 / 1e6,
        cohort_bulk_verified: b.verified && b.under_agent,
        cohort_bulk_permits: b.permits,
        cohort_bulk_closed_permits: b.closed_permits,
        cohort_bulk_agent_sessions: b.agent_sessions,
    })
}

/// One line of stage 5.
#[derive(Debug, Serialize)]
pub struct PreemptionLine {
    pub profile: &'static str,
    pub control: &'static str,
    pub system: &'static str,
    pub loops: usize,
    pub violation_pct: f64,
    pub reaction_p99_ms: f64,
    pub bulk_mbps: f64,
}

/// Stage 5: the learning team with EDCA alone and with COORP, control marked and unmarked, on
/// every NIC profile.
pub fn coorp_team(seed: u64) -> Result<Vec<PreemptionLine>, DemoError> {
    use cohort_sim::crl::{CrlParams, System, run};
    let mut out = Vec::new();
    for (profile, station) in cohort_bench::coorp::profiles() {
        for (marked, control) in [(true, "marked"), (false, "unmarked")] {
            for (system, label) in [(System::Edca, "EDCA only"), (System::Coorp, "Cohort (COORP)")] {
                let p = CrlParams { epochs: 1, update_bytes: 10 << 20, marked, station, ..CrlParams::default() };
                let o = run(&p, system, seed).map_err(DemoError::Invalid)?;
                let mut r = o.reaction_ms.clone();
                r.sort_by(f64::total_cmp);
                out.push(PreemptionLine {
                    profile,
                    control,
                    system: label,
                    loops: o.loops,
                    violation_pct: o.violation_share() * 100.0,
                    reaction_p99_ms: cohort_bench::stats::quantile(&r, 0.99),
                    bulk_mbps: o.bh_mbps(),
                });
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_preemption_part_runs_every_pair_on_every_profile() {
        let lines = coorp_team(1).unwrap();
        assert_eq!(lines.len(), 4 * cohort_bench::coorp::profiles().len());
        assert!(lines.iter().all(|l| l.loops > 0 && l.bulk_mbps > 0.0), "{lines:?}");
    }

    #[test]
    fn transfer_recovers_losses_and_is_identical() {
        let data: Vec<u8> = (0..50_000u32).map(|i| (i * 7 % 251) as u8).collect();
        let (out, s) = coded_transfer(&data, 0.2, 3).unwrap();
        assert_eq!(out, data);
        assert!(s.source_lost > 0);
        assert_eq!(s.delivered_in_order, s.source_sent);
        assert!(s.recovered >= s.source_lost.min(1));
    }

    #[test]
    fn secure_session_delivers_and_rejects_every_injection() {
        let s = crate::demo_lrt::secure_session(0.1, 5, 1000);
        assert!(s.key_exchange_attempts >= 1 && s.key_exchange_ms >= 40.0, "one round trip at least: {s:?}");
        assert_eq!(s.commands_delivered, 1000);
        assert!(s.in_order);
        let r = &s.follower_rejected;
        assert_eq!(r.auth_failed + r.wrong_team + r.other, s.forged_injected);
        assert_eq!(r.replayed + r.too_old, s.replays_injected);
    }

    #[test]
    fn two_radios_deliver_everything_when_one_is_lost() {
        for m in two_radios(7).unwrap() {
            assert_eq!((m.delivered, m.in_order, m.path0_down), (m.messages, true, true), "{m:?}");
        }
    }

    #[test]
    fn lossless_transfer_needs_no_recovery() {
        let data = vec![42u8; 10_000];
        let (_, s) = coded_transfer(&data, 0.0, 1).unwrap();
        assert_eq!((s.source_lost, s.recovered), (0, 0));
    }
}
