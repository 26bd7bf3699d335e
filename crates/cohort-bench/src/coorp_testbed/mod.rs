//! The testbed half of `cohort bench coorp`: coordinated robotic learning with real kernel
//! stacks in network namespaces, a leader and four workers on one emulated 802.11 channel.
//!
//! **Channel.** The fastest 802.11ac/n rate (aggregation as the scenario defaults give) that
//! the emulator sustains in real time on this host under this very workload: candidates are
//! tried from the fastest down, each on a fresh testbed, with (1) one saturating kernel TCP
//! flow (no contention) whose goodput after a warm-up is compared with the model's
//! single-station goodput for that rate (`cohort_sim::crl`, the same 802.11 code, bulk only),
//! then (2) the EDCA workload (control and all four bulk flows). A rate is sustained when the
//! emulator's own delivery lateness p99 over both stays within `max_late_us_p99` and the TCP
//! goodput reaches `min_goodput_share` of the model: an emulator that falls behind delivers
//! late, and a host that cannot run the kernels' TCP that fast delivers less. Every
//! measurement is in the report (`testbed_channel`).
//!
//! **Systems.** `no_bh` (no training), `edca` (nothing added), and the Cohort systems as one
//! `cohort coorp agent` process per node (`coorp`, `coorp_global` = mode `global`,
//! `coorp_local` = mode `local`), control marked; unmarked control under `edca` and `coorp`
//! (whose agents classify and mark it). The agents of the local half (`coorp_local`) and
//! SchedWiFi's shapers read their robot's card from the emulator's card file
//! (`cohort_net::preempt::card`), as the simulator's layer sees the card's completions;
//! `coorp_local_fixed` and `schedwifi_fixed` hold a fixed 2 ms ahead instead (as they did
//! before). COORP's agents keep the fixed lead (the token keeps one robot's bulk on the
//! channel); `coorp_card` has them read the card too. `cohort_bulk_local` keeps the fixed lead. `ideal` runs the bulk with no control at all: seed 000
//! Table II's "bytes per second when MPC was disabled", the denominator of `bh_utilization`
//! (as `crate::coorp` defines it for the simulator). Systems alternate within each repetition.
//!
//! **Host.** Each run records the emulator's delivery lateness (p50/p99/max) and the guest's
//! steal time: figures are real-time figures of this host.

pub mod agents;
mod bulk;
pub mod channel;
pub mod schedwifi;
pub mod workload;

use crate::progress::{Plan, Step};
use crate::stats::{mean, quantile, round, thin};
use agents::{AgentMode, AgentSpec, Agents};
pub use channel::{choose_channel, model_goodput};
use cohort_emu::cpustat::CpuTimes;
use cohort_emu::{EmuMode, EmuOptions, Testbed, TestbedScenario};
use schedwifi::StSchedule;
use serde::Serialize;
use serde_json::{Map, Value, json};
use std::path::PathBuf;
use std::time::Duration;
use workload::{Endpoint, WorkloadOutcome, WorkloadParams};

/// The leader's node name; workers are `w1`, `w2`, ...
pub const LEADER: &str = "leader";

/// A system on the testbed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum TbSystem {
    NoBh,
    Edca,
    /// SchedWiFi: exclusive ST-windows (Eq. 4, R = 7) and a Time-Aware Shaper per robot that
    /// reads the robot's card.
    SchedWifi,
    /// SchedWiFi with the shaper's fixed 2 ms lead (it does not read the card).
    SchedWifiFixed,
    /// Both halves, with the fixed 2 ms lead.
    Coorp,
    /// Both halves; the agents read their card (it costs the token holder utilization and
    /// protects no better: see docs/benchmarks.md).
    CoorpCard,
    CoorpGlobal,
    /// The local half: the agents read their card (Algorithm 2's drain time before a window).
    CoorpLocal,
    /// The local half with the fixed 2 ms lead (the agents do not read the card).
    CoorpLocalFixed,
    /// COORP's agents, and the training's bulk sent as Cohort's own (`cohort bulk`): every
    /// sender asks its agent for permits before it hands data to the kernel.
    CohortBulk,
    /// The local half's agents alone, with Cohort's own bulk.
    CohortBulkLocal,
    /// The bulk without any control traffic.
    Ideal,
}

impl TbSystem {
    /// Every system that runs with control marked.
    pub const MARKED: [TbSystem; 12] = [
        TbSystem::Edca,
        TbSystem::SchedWifi,
        TbSystem::SchedWifiFixed,
        TbSystem::Coorp,
        TbSystem::CoorpCard,
        TbSystem::CoorpGlobal,
        TbSystem::CoorpLocal,
        TbSystem::CoorpLocalFixed,
        TbSystem::CohortBulk,
        TbSystem::CohortBulkLocal,
        TbSystem::NoBh,
        TbSystem::Ideal,
    ];
    /// What runs when no systems are named (the fixed-lead variants only on request).
    pub const DEFAULT: [TbSystem; 9] = [
        TbSystem::Edca,
        TbSystem::SchedWifi,
        TbSystem::Coorp,
        TbSystem::CoorpGlobal,
        TbSystem::CoorpLocal,
        TbSystem::CohortBulk,
        TbSystem::CohortBulkLocal,
        TbSystem::NoBh,
        TbSystem::Ideal,
    ];
    pub const UNMARKED: [TbSystem; 2] = [TbSystem::Edca, TbSystem::Coorp];

    pub fn name(self) -> &'static str {
        match self {
            TbSystem::NoBh => "no_bh",
            TbSystem::Edca => "edca",
            TbSystem::SchedWifi => "schedwifi",
            TbSystem::SchedWifiFixed => "schedwifi_fixed",
            TbSystem::Coorp => "coorp",
            TbSystem::CoorpCard => "coorp_card",
            TbSystem::CoorpGlobal => "coorp_global",
            TbSystem::CoorpLocal => "coorp_local",
            TbSystem::CoorpLocalFixed => "coorp_local_fixed",
            TbSystem::CohortBulk => "cohort_bulk",
            TbSystem::CohortBulkLocal => "cohort_bulk_local",
            TbSystem::Ideal => "ideal",
        }
    }

    pub fn from_name(s: &str) -> Option<TbSystem> {
        Self::MARKED.into_iter().find(|x| x.name() == s)
    }

    /// The agent this system runs in every node, if any.
    pub fn agent(self) -> Option<AgentMode> {
        match self {
            TbSystem::Coorp | TbSystem::CoorpCard => Some(AgentMode::Coorp),
            TbSystem::CoorpGlobal => Some(AgentMode::Global),
            TbSystem::CoorpLocal | TbSystem::CoorpLocalFixed | TbSystem::CohortBulkLocal => Some(AgentMode::Local),
            TbSystem::CohortBulk => Some(AgentMode::Coorp),
            _ => None,
        }
    }

    /// SchedWiFi's windows and shaper.
    pub fn schedwifi(self) -> bool {
        matches!(self, TbSystem::SchedWifi | TbSystem::SchedWifiFixed)
    }

    /// Whether its agents or shapers read the robots' cards (the emulator's card file): the
    /// systems that act at the host alone (the local half, SchedWiFi), and `coorp_card`.
    pub fn reads_card(self) -> bool {
        matches!(self, TbSystem::SchedWifi | TbSystem::CoorpLocal | TbSystem::CoorpCard)
    }

    /// Whether the training's bulk asks the agents for permits (`cohort bulk`).
    pub fn permits(self) -> bool {
        matches!(self, TbSystem::CohortBulk | TbSystem::CohortBulkLocal)
    }
}

/// One Wi-Fi channel: PHY letter and data rate.
#[derive(Debug, Clone, Serialize)]
pub struct Channel {
    pub phy: String,
    pub data_mbps: f64,
}

/// What to run.
#[derive(Debug, Clone, Serialize)]
pub struct TestbedParams {
    pub workers: usize,
    pub reps: u64,
    pub seed: u64,
    /// NIC profiles to run (`per_ac`, `shared_tx`).
    pub profiles: Vec<String>,
    /// Systems to run, control marked (a subset of [`TbSystem::MARKED`]).
    pub systems: Vec<TbSystem>,
    /// Systems to run with control unmarked (a subset of [`TbSystem::UNMARKED`]).
    pub unmarked: Vec<TbSystem>,
    /// A fixed channel; `None`: search `candidates` (fastest first).
    pub channel: Option<Channel>,
    pub candidates: Vec<Channel>,
    /// Duration of each phase of a candidate's measurement.
    pub probe_s: f64,
    pub max_late_us_p99: f64,
    pub min_goodput_share: f64,
    /// The workload; `update_bytes` 0: chosen so that a run lasts about `target_run_s`.
    pub workload: WorkloadParams,
    pub target_run_s: f64,
    /// The `cohort` binary with `coorp agent` (needed by the Cohort systems only).
    pub agent: Option<PathBuf>,
}

impl Default for TestbedParams {
    fn default() -> Self {
        let ch = |phy: &str, data_mbps| Channel { phy: phy.into(), data_mbps };
        TestbedParams {
            workers: 4,
            reps: 3,
            seed: 1,
            profiles: vec!["per_ac".into(), "shared_tx".into()],
            systems: TbSystem::DEFAULT.to_vec(),
            unmarked: TbSystem::UNMARKED.to_vec(),
            channel: None,
            // 802.11ac 1 stream, long GI: 80 MHz MCS 9, 40 MHz MCS 9, 20 MHz MCS 8; then
            // 802.11n 20 MHz MCS 7 and MCS 4.
            candidates: vec![ch("ac", 390.0), ch("ac", 180.0), ch("ac", 78.0), ch("n", 65.0), ch("n", 39.0)],
            probe_s: 3.0,
            max_late_us_p99: 1000.0,
            min_goodput_share: 0.7,
            workload: WorkloadParams { update_bytes: 0, ..WorkloadParams::default() },
            target_run_s: 20.0,
            agent: None,
        }
    }
}

/// The scenario: a leader and `workers` workers on one channel.
pub fn scenario(workers: usize, ch: &Channel, profile: &str, seed: u64) -> Result<TestbedScenario, String> {
    let mut nodes = vec![format!("\"{LEADER}\"")];
    nodes.extend((1..=workers).map(|w| format!("\"w{w}\"")));
    let nic = match profile {
        "per_ac" => String::new(),
        "shared_tx" => "nic = { profile = \"shared_tx\" }\n".into(),
        other => return Err(format!("unknown NIC profile {other:?} (per_ac, shared_tx)")),
    };
    let toml = format!(
        "name = \"crl\"\nmode = \"wifi\"\nnodes = [{}]\nseed = {seed}\n[wifi]\nphy = \"{}\"\ndata_mbps = {}\n{nic}",
        nodes.join(", "),
        ch.phy,
        ch.data_mbps
    );
    TestbedScenario::parse(&toml).map_err(|e| e.to_string())
}

/// A testbed run name no other run of this process or another bench uses.
fn run_name() -> String {
    static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let k = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    format!("crl{}x{k}", std::process::id())
}

/// A testbed brought up for one run, with its robots' endpoints.
pub(crate) struct Bed {
    pub(crate) tb: Testbed,
    pub(crate) nodes: Vec<String>,
    pub(crate) leader: Endpoint,
    pub(crate) workers: Vec<Endpoint>,
}

impl Bed {
    pub(crate) fn up(workers: usize, ch: &Channel, profile: &str, seed: u64) -> Result<Bed, String> {
        let s = scenario(workers, ch, profile, seed)?;
        let tb = Testbed::up(&s, &run_name(), EmuMode::Thread, EmuOptions::default()).map_err(|e| e.to_string())?;
        // No ARP on the air (it would hit every system alike).
        tb.populate_neighbors().map_err(|e| e.to_string())?;
        let ep = |n: &str| -> Result<Endpoint, String> {
            Ok(Endpoint { ns: tb.ns(n).map_err(|e| e.to_string())?, addr: tb.addr(n, 0).map_err(|e| e.to_string())? })
        };
        let leader = ep(LEADER)?;
        let nodes: Vec<String> =
            std::iter::once(LEADER.to_string()).chain((1..=workers).map(|w| format!("w{w}"))).collect();
        let workers = nodes[1..].iter().map(|n| ep(n)).collect::<Result<Vec<_>, _>>()?;
        Ok(Bed { tb, nodes, leader, workers })
    }

    /// The emulator's lateness figures now (µs) and whether it ran real-time.
    pub(crate) fn lateness(&self) -> Value {
        match self.tb.status() {
            Some(s) => json!({
                "late_us_p50": s.late_us_p50, "late_us_p99": s.late_us_p99, "late_us_max": s.late_us_max,
                "realtime": s.realtime, "channel_drops": s.fabric.counters.channel_drops,
                "queue_full": s.fabric.counters.queue_full,
            }),
            None => Value::Null,
        }
    }
}

/// One run of one system.
#[derive(Debug, Clone, Serialize)]
pub struct TbRun {
    pub system: TbSystem,
    pub marked: bool,
    pub rep: u64,
    pub outcome: WorkloadOutcome,
    pub emulator: Value,
    pub steal_share: f64,
    pub agents: Vec<Value>,
}

/// Runs `system` once on a fresh testbed.
#[allow(clippy::too_many_arguments)]
pub fn run_system(
    p: &TestbedParams,
    ch: &Channel,
    profile: &str,
    system: TbSystem,
    marked: bool,
    wl: &WorkloadParams,
    link_mbps: f64,
    rep: u64,
) -> Result<TbRun, String> {
    let bed = Bed::up(p.workers, ch, profile, p.seed + rep)?;
    let wl = WorkloadParams {
        marked,
        control: system != TbSystem::Ideal,
        epochs: if system == TbSystem::NoBh { 0 } else { wl.epochs },
        permits_dev: system.permits().then(|| "wlan0".to_string()),
        schedule: system.schedwifi().then(|| {
            let infer = Duration::from_secs_f64(wl.inference_ms / 1e3);
            StSchedule::new(p.workers, wl.perception_bytes, wl.action_bytes, infer, ch.data_mbps)
        }),
        shaper: system.schedwifi().then(|| ("wlan0".to_string(), (link_mbps * 1e6) as u64)),
        shaper_card: system.reads_card().then(|| cohort_emu::testbed::card_file(bed.tb.run_name())),
        ..wl.clone()
    };
    let mut agents = match system.agent() {
        Some(mode) => {
            let program = p.agent.clone().ok_or("the Cohort systems need the agent binary (`cohort`)")?;
            let spec = AgentSpec {
                program,
                mode,
                link_mbps,
                team: 1,
                secret: "cohort-bench-coorp-testbed-team!".into(),
                duration_s: wl.max_s + 30.0,
                dir: cohort_emu::testbed::state_dir(bed.tb.run_name()),
                card: system.reads_card().then(|| cohort_emu::testbed::card_file(bed.tb.run_name())),
            };
            Some(Agents::start(&bed.tb, &bed.nodes, &spec).map_err(|e| e.to_string())?)
        }
        None => None,
    };
    let cpu0 = CpuTimes::read(None).unwrap_or_default();
    let o = workload::run(&bed.leader, &bed.workers, &wl).map_err(|e| e.to_string());
    let cpu1 = CpuTimes::read(None).unwrap_or_default();
    let emulator = bed.lateness();
    let counters = match agents.take() {
        Some(a) => a.stop().map_err(|e| e.to_string())?,
        None => Vec::new(),
    };
    bed.tb.down().map_err(|e| e.to_string())?;
    Ok(TbRun {
        system,
        marked,
        rep,
        outcome: o?,
        emulator,
        steal_share: round(cpu0.steal_share(&cpu1), 4),
        agents: counters,
    })
}

/// Mean and 95% interval half-width (Student's t) of `v`.
pub fn mean_ci95(v: &[f64]) -> (f64, f64) {
    let n = v.len();
    let m = mean(v);
    if n < 2 {
        return (m, f64::NAN);
    }
    let var = v.iter().map(|x| (x - m).powi(2)).sum::<f64>() / (n - 1) as f64;
    const T: [f64; 10] = [12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228];
    let t = T.get(n - 2).copied().unwrap_or(1.96);
    (m, t * (var / n as f64).sqrt())
}

fn interval(v: &[f64], digits: i32) -> Value {
    if v.is_empty() {
        return json!({ "mean": null, "ci95": null, "n": 0 });
    }
    let (m, h) = mean_ci95(v);
    json!({ "mean": round(m, digits), "ci95": if h.is_nan() { Value::Null } else { json!(round(h, digits)) }, "n": v.len() })
}

/// Figures of one system over its repetitions.
fn pooled(runs: &[&TbRun], ideal_mbps: f64, edca_epoch_s: f64) -> Value {
    let loops: usize = runs.iter().map(|r| r.outcome.loops).sum();
    let violations: usize = runs.iter().map(|r| r.outcome.violations).sum();
    let mut reaction: Vec<f64> = runs.iter().flat_map(|r| r.outcome.reaction_ms.iter().copied()).collect();
    reaction.sort_by(f64::total_cmp);
    let shares: Vec<f64> = runs.iter().map(|r| r.outcome.violation_share()).collect();
    let bh: Vec<f64> = runs.iter().map(|r| r.outcome.bh_mbps()).collect();
    let epoch_means: Vec<f64> =
        runs.iter().filter(|r| !r.outcome.epoch_s.is_empty()).map(|r| mean(&r.outcome.epoch_s)).collect();
    let epochs: Vec<f64> = runs.iter().flat_map(|r| r.outcome.epoch_s.iter().copied()).collect();
    // No epoch at all (`no_bh`): no epoch figures (not a mean of nothing).
    let epoch_mean = if epochs.is_empty() { f64::NAN } else { mean(&epochs) };
    let util: Vec<f64> = bh.iter().map(|b| if ideal_mbps > 0.0 { b / ideal_mbps } else { f64::NAN }).collect();
    let late: Vec<f64> = runs.iter().filter_map(|r| r.emulator["late_us_p99"].as_f64()).collect();
    let mut v = json!({
        "runs": runs.len(),
        "loops": loops,
        "violation_share": round(violations as f64 / loops.max(1) as f64, 4),
        "violation_share_per_run": shares.iter().map(|s| round(*s, 4)).collect::<Vec<_>>(),
        "violation_share_interval": interval(&shares, 4),
        "incomplete_loops": runs.iter().map(|r| r.outcome.incomplete).sum::<usize>(),
        "reaction_p50_ms": round(quantile(&reaction, 0.5), 3),
        "reaction_p99_ms": round(quantile(&reaction, 0.99), 3),
        "reaction_ms_cdf": thin(&reaction, 200).iter().map(|v| round(*v, 3)).collect::<Vec<_>>(),
        "bh_mbps": round(mean(&bh), 2),
        "bh_mbps_interval": interval(&bh, 2),
        "bh_utilization": if ideal_mbps > 0.0 { round(mean(&bh) / ideal_mbps, 3) } else { f64::NAN },
        "bh_utilization_interval": interval(&util, 3),
        "epochs": runs.iter().map(|r| r.outcome.epoch_s.len()).sum::<usize>(),
        "epochs_cut": runs.iter().map(|r| r.outcome.epochs_cut).sum::<usize>(),
        "epoch_s": round(epoch_mean, 3),
        "epoch_s_interval": interval(&epoch_means, 3),
        "epoch_time_ratio_vs_edca": if edca_epoch_s > 0.0 && epoch_mean > 0.0 { round(epoch_mean / edca_epoch_s, 3) } else { f64::NAN },
        "send_late_ms_p99_max": runs.iter().map(|r| r.outcome.send_late_ms_p99).fold(0.0, f64::max),
        "emulator_late_us_p99_max": late.iter().copied().fold(0.0, f64::max),
        "steal_share_max": runs.iter().map(|r| r.steal_share).fold(0.0, f64::max),
    });
    if runs.iter().any(|r| r.outcome.shaper_holds > 0) {
        // SchedWiFi's shapers: holds over every robot, and those more than 1 ms late.
        v["shaper_holds"] = json!(runs.iter().map(|r| r.outcome.shaper_holds).sum::<u64>());
        v["shaper_late_holds"] = json!(runs.iter().map(|r| r.outcome.shaper_late_holds).sum::<u64>());
        v["shaper_card_early_holds"] = json!(runs.iter().map(|r| r.outcome.shaper_card_early_holds).sum::<u64>());
    }
    if runs.iter().any(|r| !r.agents.is_empty()) {
        // Every agent's counters, per run.
        v["agents"] = runs.iter().map(|r| json!(r.agents)).collect();
    }
    v
}

/// The workload's sizes: `p.workload`, with `update_bytes` 0 replaced so that a run of
/// `epochs` epochs at `goodput_mbps` lasts about `target_run_s`.
pub fn sized_workload(p: &TestbedParams, goodput_mbps: f64) -> WorkloadParams {
    let mut w = p.workload.clone();
    if w.update_bytes == 0 {
        let per_epoch_s = ((p.target_run_s - w.warmup_s) / w.epochs.max(1) as f64 - w.train_ms / 1e3).max(0.5);
        let bytes_per_worker = per_epoch_s * goodput_mbps * 1e6 / 8.0 / p.workers.max(1) as f64;
        let update = bytes_per_worker - w.batch_bytes as f64;
        w.update_bytes = (update.clamp(1.0 * 1_048_576.0, 64.0 * 1_048_576.0) / 65_536.0).round() as usize * 65_536;
    }
    w
}

/// Runs the testbed half. `progress` hears what runs.
pub fn bench(p: &TestbedParams, progress: impl FnMut(&Step)) -> Result<Value, String> {
    cohort_emu::netns::require_root().map_err(|e| e.to_string())?;
    // The channel search (at most every candidate), then every run of every profile.
    let search = if p.channel.is_some() { 0 } else { p.candidates.len() as u64 };
    let runs = p.profiles.len() as u64 * p.reps * (p.systems.len() + p.unmarked.len()) as u64;
    let mut plan = Plan::new(search + runs, progress);
    let mut progress = |what: &str| plan.begin(what);
    if p.systems.iter().chain(&p.unmarked).any(|s| s.agent().is_some()) {
        let program = p.agent.as_ref().ok_or("the Cohort systems need the agent binary (`cohort`)")?;
        agents::check(program).map_err(|e| e.to_string())?;
    }
    let (ch, channel_report) = match &p.channel {
        Some(c) => {
            (c.clone(), json!({ "phy": c.phy, "data_mbps": c.data_mbps, "chosen": "given on the command line" }))
        }
        None => choose_channel(p, &mut progress)?,
    };
    let mut profiles = Map::new();
    let mut unmarked = Map::new();
    let mut links = Map::new();
    for profile in &p.profiles {
        let link_mbps = model_goodput(&ch, profile)?;
        links.insert(profile.clone(), json!(round(link_mbps, 2)));
        let wl = sized_workload(p, link_mbps * 0.8);
        let mut runs: Vec<TbRun> = Vec::new();
        for rep in 0..p.reps {
            let order = p.systems.iter().map(|&s| (s, true)).chain(p.unmarked.iter().map(|&s| (s, false)));
            for (s, marked) in order {
                progress(&format!("{profile}, {}, marked {marked}, rep {rep}", s.name()));
                runs.push(run_system(p, &ch, profile, s, marked, &wl, link_mbps, rep)?);
            }
        }
        let of = |s: TbSystem, marked: bool| -> Vec<&TbRun> {
            runs.iter().filter(|r| r.system == s && r.marked == marked).collect()
        };
        let ideal = mean(&of(TbSystem::Ideal, true).iter().map(|r| r.outcome.bh_mbps()).collect::<Vec<_>>());
        let edca_epoch =
            mean(&of(TbSystem::Edca, true).iter().flat_map(|r| r.outcome.epoch_s.iter().copied()).collect::<Vec<_>>());
        let mut sys = Map::new();
        for &s in p.systems.iter().filter(|&&s| s != TbSystem::Ideal) {
            sys.insert(s.name().into(), pooled(&of(s, true), ideal, edca_epoch));
        }
        let mut un = Map::new();
        for &s in &p.unmarked {
            un.insert(s.name().into(), pooled(&of(s, false), ideal, edca_epoch));
        }
        profiles.insert(
            profile.clone(),
            json!({ "testbed": sys, "testbed_ideal_bh_mbps": round(ideal, 2), "workload": wl }),
        );
        unmarked.insert(profile.clone(), Value::Object(un));
    }
    plan.finish();
    Ok(json!({
        "testbed_channel": channel_report,
        "link_mbps_by_profile": links,
        "link_mbps_source": "the model's single-station bulk goodput on the chosen channel (cohort_sim::crl, one worker, no control), passed to the agents as --link-mbps",
        "profiles": profiles,
        "unmarked": unmarked,
        "params": p,
    }))
}

/// Merges the testbed report `tb` into the simulator's report `sim`: `profiles.<p>.testbed`,
/// `profiles.<p>.testbed_ideal_bh_mbps`, `unmarked.testbed` (the `shared_tx` card, as
/// `unmarked.sim`; `per_ac` if only that ran), `unmarked_testbed_by_profile`, and
/// `testbed_channel`, `testbed` (the rest) at the top.
pub fn merge(sim: &mut Value, tb: &Value) {
    if !sim.is_object() {
        *sim = json!({});
    }
    for (p, v) in tb["profiles"].as_object().into_iter().flatten() {
        let slot = &mut sim["profiles"][p];
        if !slot.is_object() {
            *slot = json!({});
        }
        for (k, x) in v.as_object().into_iter().flatten() {
            slot[k] = x.clone();
        }
    }
    let un = &tb["unmarked"];
    let pick = if un.get("shared_tx").is_some() { &un["shared_tx"] } else { &un["per_ac"] };
    if !sim["unmarked"].is_object() {
        sim["unmarked"] = json!({});
    }
    sim["unmarked"]["testbed"] = pick.clone();
    sim["unmarked_testbed_by_profile"] = un.clone();
    sim["testbed_channel"] = tb["testbed_channel"].clone();
    sim["testbed"] = json!({
        "link_mbps_by_profile": tb["link_mbps_by_profile"],
        "link_mbps_source": tb["link_mbps_source"],
        "params": tb["params"],
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scenarios_and_sizes() {
        let ch = Channel { phy: "ac".into(), data_mbps: 78.0 };
        let s = scenario(4, &ch, "shared_tx", 1).unwrap();
        assert_eq!(s.nodes.len(), 5);
        assert!(scenario(4, &ch, "nope", 1).is_err());
        let w = sized_workload(&TestbedParams::default(), 50.0);
        assert!(w.update_bytes >= 1 << 20 && w.update_bytes.is_multiple_of(65_536));
        let (m, h) = mean_ci95(&[1.0, 2.0, 3.0]);
        assert!((m - 2.0).abs() < 1e-12 && (h - 4.303 / 3f64.sqrt()).abs() < 1e-9);
    }

    #[test]
    fn merge_keeps_the_sim_keys() {
        let mut sim = json!({ "profiles": { "per_ac": { "sim": { "edca": 1 } } }, "unmarked": { "sim": 2 } });
        let tb = json!({
            "profiles": { "per_ac": { "testbed": { "edca": { "violation_share": 0.5 } } } },
            "unmarked": { "per_ac": { "edca": { "violation_share": 0.7 } } },
            "testbed_channel": { "phy": "ac" },
        });
        merge(&mut sim, &tb);
        assert_eq!(sim["profiles"]["per_ac"]["sim"]["edca"], 1);
        assert_eq!(sim["profiles"]["per_ac"]["testbed"]["edca"]["violation_share"], 0.5);
        assert_eq!(sim["unmarked"]["sim"], 2);
        assert_eq!(sim["unmarked"]["testbed"]["edca"]["violation_share"], 0.7);
        assert_eq!(sim["testbed_channel"]["phy"], "ac");
    }
}
