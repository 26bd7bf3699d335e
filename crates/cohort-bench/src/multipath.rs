//! `cohort bench multipath`: multipath LRT (seed 001) in the simulator.
//!
//! Cohort's scheduler (MS-UCB super-arms, delay balancing, LD-MPSP windows, cloning) against
//! MPTCP's default logic (min-RTT) and round-robin over the same coded transport, and against
//! Cohort on each path alone, on the same links and loss draws (`cohort_sim::multipath`).
//! Systems alternate within each repetition (seeds `seed..seed + reps`); every figure says how
//! many runs it pools and gives a 95% interval (Student's t) where runs pair.
//!
//! Scenarios: `static` (20 + 10 Mbit/s, 10 ms each way), `loss` (10% iid loss on the second
//! path), `handoff` (each path out once, for 20% and 10% of the transfer), `mobility` (a drone
//! passing 5 GHz and 2.4 GHz access points with one radio each, `cohort_sim::mobility`: rate
//! changes, handovers, outages), `short` (64 KiB flows, 20% loss on the faster path), the delay
//! target (`static` with and without `τ`), and the federated start (four paths, super-arms of
//! two: regret of the first 100 rounds from a cold start and from statistics another robot
//! shared).
//!
//! In the simulator this bench compares with the logic of kernel MPTCP's default scheduler
//! over the same coded transport; kernel MPTCP itself runs on the testbed
//! ([`crate::multipath_testbed`], `--testbed`).

use crate::progress::{Plan, Step};
use crate::stats::{mean, mean_ci95, quantile, round};
use cohort_medium::link::{LinkParams, LossModel};
use cohort_proto::multipath::bandit::ArmStats;
use cohort_proto::multipath::{MpConfig, Scheduler};
use cohort_sim::multipath::{MpOutcome, MpPath, MpRun, UNDER_MP, run};
use serde_json::{Value, json};
use std::time::Duration;

/// What to run.
#[derive(Debug, Clone, PartialEq)]
pub struct MultipathParams {
    pub reps: u64,
    pub seed: u64,
    /// Megabytes of each bulk transfer.
    pub bulk_mb: f64,
    /// LD-MPSP's queueing-delay target, ms.
    pub tau_ms: f64,
    /// Short flows per repetition.
    pub short_flows: u32,
    /// Length of the mobility runs, seconds, and the drone's speed, m/s.
    pub mobility_s: f64,
    pub speed_mps: f64,
}

impl Default for MultipathParams {
    fn default() -> Self {
        MultipathParams {
            reps: 3,
            seed: 1,
            bulk_mb: 12.0,
            tau_ms: 20.0,
            short_flows: 20,
            mobility_s: 30.0,
            speed_mps: 10.0,
        }
    }
}

/// Bytes per message: one LRT symbol's worth.
const MESSAGE: usize = 1200;

#[derive(Debug, Clone, Copy, PartialEq)]
enum System {
    Cohort,
    MinRtt,
    RoundRobin,
    /// Cohort on one path alone.
    Path(usize),
    /// Cohort with Algorithm 3's window law as written (the set point stays τ).
    Algorithm3,
}

impl System {
    fn name(&self) -> String {
        match self {
            System::Cohort => "cohort".into(),
            System::MinRtt => "minrtt".into(),
            System::RoundRobin => "roundrobin".into(),
            System::Path(i) => format!("path{i}"),
            System::Algorithm3 => "cohort_algorithm3".into(),
        }
    }
}

fn link(mbit: f64, owd_ms: u64, loss: f64) -> MpPath {
    MpPath::new(LinkParams {
        loss: LossModel::Iid { p: loss },
        ..LinkParams::clean(Duration::from_millis(owd_ms), (mbit * 1e6) as u64)
    })
}

fn ms(x: f64) -> Duration {
    Duration::from_secs_f64(x / 1e3)
}

fn ldmpsp(tau_ms: f64, seed: u64) -> MpConfig {
    MpConfig { scheduler: Scheduler::LdMpsp { tau: ms(tau_ms) }, seed, ..MpConfig::default() }
}

/// A run of `messages` over `paths`; the application keeps at most four messages unsent, so
/// a message's delay is the network's and the transport's, not a queue the application built.
fn mp_run(cfg: MpConfig, paths: Vec<MpPath>, messages: u32, seed: u64) -> MpRun {
    MpRun { app_buffer_bytes: 4 * MESSAGE, ..MpRun::new(cfg, paths, messages, MESSAGE, seed) }
}

/// How long a run lasts: until `n` messages arrived (each must), or for a time (as many as
/// the paths carry; they must arrive in order).
#[derive(Debug, Clone, Copy, PartialEq)]
enum Until {
    Delivered(u32),
    Time(Duration),
}

/// One run of `sys` over `paths`.
fn run_system(sys: System, paths: &[MpPath], until: Until, tau_ms: f64, seed: u64) -> Result<MpOutcome, String> {
    let (cfg, paths) = match sys {
        System::Cohort => (ldmpsp(tau_ms, seed), paths.to_vec()),
        System::MinRtt => (MpConfig { scheduler: Scheduler::MinRtt, seed, ..MpConfig::default() }, paths.to_vec()),
        System::RoundRobin => {
            (MpConfig { scheduler: Scheduler::RoundRobin, seed, ..MpConfig::default() }, paths.to_vec())
        }
        System::Path(i) => (ldmpsp(tau_ms, seed), vec![paths[i].clone()]),
        System::Algorithm3 => (MpConfig { tau_share: None, ..ldmpsp(tau_ms, seed) }, paths.to_vec()),
    };
    let (messages, limit) = match until {
        Until::Delivered(n) => (n, None),
        Until::Time(d) => (u32::MAX / 2, Some(d)),
    };
    let mut r = mp_run(cfg, paths, messages, seed);
    r.limit = limit.unwrap_or(r.limit);
    let o = run(&r).map_err(|e| e.to_string())?;
    let complete = limit.is_some() || o.delivered == messages;
    if !complete || !o.in_order || o.delivered == 0 {
        return Err(format!(
            "{} seed {seed}: {} of {messages} delivered, in order {} (replay: cohort bench multipath --seed {seed} --reps 1)",
            sys.name(),
            o.delivered,
            o.in_order
        ));
    }
    Ok(o)
}

/// Runs every system on `paths`, alternating within each repetition; outcomes per system.
fn alternate(
    p: &MultipathParams,
    systems: &[System],
    paths: &[MpPath],
    until: Until,
    tau_ms: f64,
) -> Result<Vec<Vec<MpOutcome>>, String> {
    let mut out = vec![Vec::new(); systems.len()];
    for rep in 0..p.reps {
        for k in 0..systems.len() {
            // Rotate the order each repetition.
            let i = (k + rep as usize) % systems.len();
            out[i].push(run_system(systems[i], paths, until, tau_ms, p.seed + rep)?);
        }
    }
    Ok(out)
}

/// Goodput (mean and 95% interval), stalls and delays of one system's runs.
fn pooled(runs: &[MpOutcome]) -> Value {
    let g: Vec<f64> = runs.iter().map(|o| o.goodput_mbps).collect();
    let (m, h) = mean_ci95(&g);
    json!({
        "runs": runs.len(),
        "goodput_mbps": round(m, 3), "goodput_ci95": round(h, 3),
        "goodput_runs": g.iter().map(|x| round(*x, 3)).collect::<Vec<_>>(),
        "max_stall_ms": round(runs.iter().map(|o| o.max_stall_ms).fold(0.0, f64::max), 1),
        "delay_p50_ms": pooled_p(runs, 0.5), "delay_p99_ms": pooled_p(runs, 0.99),
        "clones": runs.iter().map(|o| o.sender.paths.iter().map(|q| q.clones_sent).sum::<u64>()).sum::<u64>(),
        "failures": runs.iter().map(|o| o.sender.paths.iter().map(|q| q.failures).sum::<u64>()).sum::<u64>(),
        // LD-MPSP's set point at the end of the run and the share of reported packets over τ
        // (the set point is τ and the share 0 for the baselines, which have no target).
        "delay_set_ms": round(mean(&runs.iter().map(|o| o.sender.delay_set_ms).collect::<Vec<_>>()), 2),
        "reported_over_tau_share": round(mean(&runs.iter().map(|o| o.sender.delay_over_tau_share).collect::<Vec<_>>()), 4),
    })
}

/// Quantile `q` of the message delays of `runs` pooled, ms.
fn pooled_p(runs: &[MpOutcome], q: f64) -> f64 {
    let mut d: Vec<f64> = runs.iter().flat_map(|o| o.delays_ms.iter().copied()).collect();
    d.sort_by(f64::total_cmp);
    round(quantile(&d, q), 2)
}

/// Paired ratios `a[k] / b[k]` (same seed), mean and 95% interval.
fn paired_ratio(a: &[MpOutcome], b: &[MpOutcome], f: impl Fn(&MpOutcome) -> f64) -> Value {
    let r: Vec<f64> = a.iter().zip(b).map(|(x, y)| f(x) / f(y).max(1e-12)).collect();
    let (m, h) = mean_ci95(&r);
    json!({ "mean": round(m, 3), "ci95": round(h, 3), "pairs": r.len() })
}

/// Share of messages whose delay is within `tau_ms` of the smallest delay in the run (the
/// queueing delay they met).
fn met_share(o: &MpOutcome, tau_ms: f64) -> f64 {
    let base = o.delays_ms.iter().copied().fold(f64::INFINITY, f64::min);
    o.delays_ms.iter().filter(|&&d| d - base <= tau_ms).count() as f64 / o.delays_ms.len().max(1) as f64
}

/// Regret of the first `rounds` rounds against per-arm values `truth` (the best super-arm of
/// the same size gains their largest sum each round).
/// (The simulator's and the testbed's federated start share it.)
pub(crate) fn regret(played: &[Vec<usize>], truth: &[f64], m: usize, rounds: usize) -> f64 {
    let mut sorted = truth.to_vec();
    sorted.sort_by(|a, b| b.total_cmp(a));
    let best: f64 = sorted.iter().take(m).sum();
    played.iter().take(rounds).map(|s| best - s.iter().map(|&i| truth[i]).sum::<f64>()).sum()
}

/// Runs the bench; the JSON report.
pub fn run_bench(p: &MultipathParams, progress: impl FnMut(&Step)) -> Result<Value, String> {
    let positive = |x: f64| x.is_finite() && x > 0.0;
    if p.reps == 0
        || !positive(p.bulk_mb)
        || !positive(p.tau_ms)
        || p.short_flows == 0
        || !positive(p.mobility_s)
        || !positive(p.speed_mps)
    {
        return Err("reps, bulk size, tau, short flows, mobility time and speed must be positive".into());
    }
    let messages = ((p.bulk_mb * 1e6) / MESSAGE as f64).ceil() as u32;
    let systems = [System::Cohort, System::MinRtt, System::RoundRobin, System::Path(0), System::Path(1)];
    let names: Vec<String> = systems.iter().map(System::name).collect();
    let mut report = serde_json::Map::new();
    // Four scenarios, the delay target, the short flows, the federated start.
    let mut plan = Plan::new(7, progress);
    let mut progress = |what: &str| plan.begin(what);
    let mut scenario = |name: &str, paths: Vec<MpPath>, until: Until| -> Result<Vec<Vec<MpOutcome>>, String> {
        progress(name);
        let r = alternate(p, &systems, &paths, until, p.tau_ms)?;
        let mut v = serde_json::Map::new();
        for (n, runs) in names.iter().zip(&r) {
            v.insert(n.clone(), pooled(runs));
        }
        v.insert("vs_minrtt".into(), paired_ratio(&r[0], &r[1], |o| o.goodput_mbps));
        report.insert(name.into(), Value::Object(v));
        Ok(r)
    };
    let fast_slow = || vec![link(20.0, 10, 0.0), link(10.0, 10, 0.0)];
    let bulk = Until::Delivered(messages);
    let stat = scenario("static", fast_slow(), bulk)?;
    let mut lossy = fast_slow();
    lossy[1] = link(10.0, 10, 0.10);
    let loss = scenario("loss", lossy, bulk)?;
    // Each path out once, at fixed shares of the transfer's time at the paths' sum rate
    // (`est`): the faster for 20% of it from 30%, the slower for 10% from 60%.
    let est = p.bulk_mb * 8.0 / 30.0 * 1e3;
    let mut handoff_paths = fast_slow();
    handoff_paths[0].outages.push((ms(0.3 * est), ms(0.5 * est)));
    handoff_paths[1].outages.push((ms(0.6 * est), ms(0.7 * est)));
    let handoff = scenario("handoff", handoff_paths, bulk)?;
    // Mobility: a drone at `speed` round an ellipse past three 5 GHz and three 2.4 GHz access
    // points, one radio per band (`cohort_sim::mobility`), for `mobility_s`.
    let lap = Duration::from_secs_f64(p.mobility_s);
    let moving = cohort_sim::mobility::Mobility::elliptical(p.speed_mps);
    let radios = [cohort_sim::mobility::Band::G5, cohort_sim::mobility::Band::G24];
    let mobility = scenario("mobility", cohort_sim::mobility::paths(&moving, &radios, lap), Until::Time(lap))?;

    // Delay target: Cohort with τ as a bound (the static runs), with Algorithm 3's law as
    // written, and without a target (10 s never binds); the two runs per repetition alternate.
    progress("delay target");
    let mut literal = Vec::new();
    let mut no_target = Vec::new();
    for r in 0..p.reps {
        let pair = [(System::Algorithm3, p.tau_ms), (System::Cohort, 10_000.0)];
        let order: Vec<_> = if r % 2 == 0 { pair.to_vec() } else { pair.iter().rev().copied().collect() };
        for (sys, tau) in order {
            let o = run_system(sys, &fast_slow(), bulk, tau, p.seed + r)?;
            if sys == System::Algorithm3 { literal.push(o) } else { no_target.push(o) }
        }
    }
    let met: Vec<f64> = stat[0].iter().map(|o| met_share(o, p.tau_ms)).collect();
    let (met_m, met_h) = mean_ci95(&met);
    let met_of = |runs: &[MpOutcome]| round(mean(&runs.iter().map(|o| met_share(o, p.tau_ms)).collect::<Vec<_>>()), 4);
    report.insert(
        "delay_target".into(),
        json!({
            "tau_ms": p.tau_ms, "runs": met.len(), "tau_share": MpConfig::default().tau_share,
            "met_share": round(met_m, 4), "met_share_ci95": round(met_h, 4),
            "met_share_algorithm3": met_of(&literal),
            "met_share_without_target": met_of(&no_target),
            "goodput_ratio_vs_no_target": paired_ratio(&stat[0], &no_target, |o| o.goodput_mbps),
            "goodput_ratio_vs_algorithm3": paired_ratio(&stat[0], &literal, |o| o.goodput_mbps),
            "delay_p50_ms": { "bound": pooled_p(&stat[0], 0.5), "algorithm3": pooled_p(&literal, 0.5), "no_target": pooled_p(&no_target, 0.5) },
            "delay_p99_ms": { "bound": pooled_p(&stat[0], 0.99), "algorithm3": pooled_p(&literal, 0.99), "no_target": pooled_p(&no_target, 0.99) },
        }),
    );

    // Short flows: 64 KiB, 20% loss on the faster path.
    progress("short flows");
    let short_paths = vec![link(20.0, 10, 0.20), link(10.0, 25, 0.0)];
    let flow = (64 * 1024usize).div_ceil(MESSAGE) as u32;
    let short_systems = [System::Cohort, System::Path(0), System::Path(1)];
    let mut completion = vec![Vec::new(); short_systems.len()];
    for rep in 0..p.reps {
        for f in 0..p.short_flows {
            let seed = (p.seed + rep) * 1000 + u64::from(f);
            for (k, sys) in short_systems.iter().enumerate() {
                let o = run_system(*sys, &short_paths, Until::Delivered(flow), p.tau_ms, seed)?;
                let (Some(s), Some(e)) = (o.established, o.completed) else {
                    return Err("short flow unfinished".into());
                };
                completion[k].push((e - s).as_secs_f64() * 1e3);
            }
        }
    }
    let means: Vec<(f64, f64)> = completion.iter().map(|c| mean_ci95(c)).collect();
    let best_path = means[1].0.min(means[2].0);
    report.insert(
        "short".into(),
        json!({
            "flow_bytes": flow as usize * MESSAGE, "flows": completion[0].len(),
            "completion_ms": short_systems.iter().zip(&means).map(|(s, (m, h))| (s.name(), json!({"mean": round(*m, 2), "ci95": round(*h, 2)}))).collect::<serde_json::Map<_, _>>(),
        }),
    );

    // Federated start: four paths, super-arms of two.
    progress("federated start");
    let four = vec![link(20.0, 10, 0.0), link(10.0, 10, 0.05), link(5.0, 40, 0.0), link(15.0, 20, 0.10)];
    let fed_cfg = |seed| MpConfig { super_arm: 2, ..ldmpsp(p.tau_ms, seed) };
    let train = run(&mp_run(fed_cfg(p.seed + 10_000), four.clone(), messages * 2, p.seed + 10_000))
        .map_err(|e| e.to_string())?;
    let shared: Vec<ArmStats> = train.sender.paths.iter().map(|q| q.arm).collect();
    let truth: Vec<f64> = shared.iter().map(|a| a.v).collect();
    let (mut cold, mut warm) = (Vec::new(), Vec::new());
    for rep in 0..p.reps {
        let seed = p.seed + rep;
        let base = mp_run(fed_cfg(seed), four.clone(), messages, seed);
        let fed = MpRun { federated: shared.iter().copied().enumerate().collect(), ..base.clone() };
        for r in [&base, &fed] {
            let o = run(r).map_err(|e| e.to_string())?;
            let g = regret(&o.rounds, &truth, 2, 100);
            if r.federated.is_empty() { cold.push(g) } else { warm.push(g) }
        }
    }
    let ratio = mean(&warm) / mean(&cold).max(1e-12);
    report.insert(
        "federated".into(),
        json!({
            "paths": 4, "super_arm": 2, "rounds": 100, "runs": cold.len(),
            "truth_v": truth.iter().map(|v| round(*v, 4)).collect::<Vec<_>>(),
            "regret_cold": round(mean(&cold), 3), "regret_federated": round(mean(&warm), 3),
            "regret_cold_runs": cold.iter().map(|x| round(*x, 3)).collect::<Vec<_>>(),
            "regret_federated_runs": warm.iter().map(|x| round(*x, 3)).collect::<Vec<_>>(),
        }),
    );

    let g = |r: &[Vec<MpOutcome>], k: usize| mean(&r[k].iter().map(|o| o.goodput_mbps).collect::<Vec<_>>());
    // What the paths carried from the sender, framing below the multipath layer included,
    // against their 30 Mbit/s; and the application's share of those bytes.
    let util: Vec<(f64, f64)> = stat[0]
        .iter()
        .map(|o| {
            let wire: u64 = o.sender.paths.iter().map(|q| q.bytes_sent + q.sent * UNDER_MP as u64).sum();
            let secs = match (o.established, o.completed) {
                (Some(a), Some(b)) if b > a => (b - a).as_secs_f64(),
                _ => f64::NAN,
            };
            (wire as f64 * 8.0 / secs / 30e6, o.goodput_mbps * 1e6 * secs / 8.0 / wire as f64)
        })
        .collect();
    report.insert(
        "summary".into(),
        json!({
            "static_share_of_sum": round(g(&stat, 0) / 30.0, 4),
            "static_share_of_single_path_sum": round(g(&stat, 0) / (g(&stat, 3) + g(&stat, 4)).max(1e-9), 4),
            "static_link_utilization": round(mean(&util.iter().map(|u| u.0).collect::<Vec<_>>()), 4),
            "static_application_share_of_wire": round(mean(&util.iter().map(|u| u.1).collect::<Vec<_>>()), 4),
            "loss_goodput_ratio_vs_minrtt": round(g(&loss, 0) / g(&loss, 1).max(1e-9), 3),
            "handoff_goodput_ratio_vs_minrtt": round(g(&handoff, 0) / g(&handoff, 1).max(1e-9), 3),
            "mobility_goodput_ratio_vs_minrtt": round(g(&mobility, 0) / g(&mobility, 1).max(1e-9), 3),
            "mobility_goodput_ratio_vs_best_radio": round(g(&mobility, 0) / g(&mobility, 3).max(g(&mobility, 4)).max(1e-9), 3),
            "mobility_max_stall_ms": round(mobility[0].iter().map(|o| o.max_stall_ms).fold(0.0, f64::max), 1),
            "max_stall_ms": round(handoff[0].iter().map(|o| o.max_stall_ms).fold(0.0, f64::max), 1),
            "delay_target_met_share": round(met_m, 4),
            "short_flow_ratio_vs_best_path": round(means[0].0 / best_path.max(1e-9), 3),
            "federated_regret_ratio": round(ratio, 3),
            "reps": p.reps,
            "mptcp": "kernel MPTCP is compared on the testbed (`--testbed`); ratios here are against its default scheduler's logic (min-RTT) over the same coded transport",
        }),
    );
    report.insert(
        "command".into(),
        json!(format!(
            "cohort bench multipath --json --reps {} --seed {} --bulk-mb {} --tau-ms {} --short-flows {} --mobility-s {} --speed-mps {}",
            p.reps, p.seed, p.bulk_mb, p.tau_ms, p.short_flows, p.mobility_s, p.speed_mps
        )),
    );
    plan.finish();
    Ok(Value::Object(report))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A small run of every part: the report has every summary key, and every run delivered
    /// everything in order (`run_system` refuses otherwise).
    #[test]
    fn a_small_bench_reports_every_figure() {
        let p =
            MultipathParams { reps: 1, bulk_mb: 0.5, short_flows: 2, mobility_s: 2.0, ..MultipathParams::default() };
        let mut steps = Vec::new();
        let r = run_bench(&p, crate::progress::recorder(&mut steps)).unwrap();
        crate::progress::assert_followed_plan(&steps);
        for k in [
            "static_share_of_sum",
            "loss_goodput_ratio_vs_minrtt",
            "handoff_goodput_ratio_vs_minrtt",
            "mobility_goodput_ratio_vs_minrtt",
            "max_stall_ms",
            "delay_target_met_share",
            "short_flow_ratio_vs_best_path",
            "federated_regret_ratio",
        ] {
            assert!(r["summary"][k].as_f64().is_some_and(f64::is_finite), "{k}: {}", r["summary"]);
        }
        assert_eq!(r["static"]["cohort"]["runs"], 1);
        assert!(run_bench(&MultipathParams { reps: 0, ..p }, |_| {}).is_err());
    }
}
