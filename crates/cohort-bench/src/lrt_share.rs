//! `cohort bench lrt-share`: LRT's bandwidth estimator on a shared 802.11 channel.
//!
//! Two robots upload a map each over LRT (bulk) to a third while that one sends a control
//! loop (200 B every 10 ms, best effort, as an unmarked ROS 2 or Zenoh application sends it)
//! to a fourth, all on one simulated 802.11a channel (`cohort_sim`, the 802.11 model of
//! `cohort_medium`). Every LRT connection paces either at a rate set by hand (the sweep
//! `rates_mbps`) or at what its estimator measures (`lrt::rate`, capped at 100 Mbit/s). The
//! report gives, per setting, the bulk flows' aggregate goodput and the control flow's p99
//! delay (mean and 95% interval over `reps` seeds), and the estimator against the best hand-set
//! rate (the one with the highest aggregate goodput).

use crate::stats::{mean_ci95, round};
use cohort_sim::engine::{Outcome, Recorder, run};
use cohort_sim::scenario::Scenario;
use serde::Serialize;

/// Bytes per message of an upload.
const BULK_MESSAGE: usize = 8000;

/// What to run.
#[derive(Debug, Clone, Serialize)]
pub struct ShareParams {
    /// Hand-set per-connection rates to sweep, Mbit/s.
    pub rates_mbps: Vec<f64>,
    pub reps: u64,
    pub seed: u64,
    /// Bytes each bulk flow carries.
    pub bulk_bytes: usize,
    /// How long the control loop runs, seconds.
    pub control_s: f64,
    /// 802.11a data rate, Mbit/s.
    pub data_mbps: f64,
}

impl Default for ShareParams {
    fn default() -> Self {
        ShareParams {
            rates_mbps: vec![2.0, 4.0, 6.0, 8.0, 12.0, 24.0, 100.0],
            reps: 3,
            seed: 1,
            bulk_bytes: 4 << 20,
            control_s: 6.0,
            data_mbps: 24.0,
        }
    }
}

/// One setting's figures over its runs.
#[derive(Debug, Clone, Serialize)]
pub struct Setting {
    /// "hand-set N Mbit/s" or "estimator".
    pub label: String,
    pub rate_mbps: Option<f64>,
    /// Both uploads' bytes over the time from their start to the later one's last delivery.
    pub goodput_mbps: f64,
    pub goodput_ci95: f64,
    pub control_p99_ms: f64,
    pub control_p99_ci95: f64,
    pub control_p50_ms: f64,
    /// Every run delivered every message of every flow exactly once, in order.
    pub complete: bool,
    pub runs: u64,
}

/// The report `cohort bench lrt-share --json` prints.
#[derive(Debug, Clone, Serialize)]
pub struct ShareReport {
    pub hand_set: Vec<Setting>,
    pub estimator: Setting,
    /// The hand-set rate with the highest aggregate goodput.
    pub best_hand_set_mbps: f64,
    /// Estimator goodput over the best hand-set rate's (goal ≥ 0.9).
    pub goodput_ratio_vs_best: f64,
    /// Estimator control p99 over the best hand-set rate's (goal ≤ 1 within noise).
    pub control_p99_ratio_vs_best: f64,
    pub params: ShareParams,
    pub command: String,
}

/// The scenario: nodes 1 and 2 upload to 0, node 0 controls node 3.
pub fn scenario(p: &ShareParams, rate_mbps: Option<f64>) -> Result<Scenario, String> {
    let size = BULK_MESSAGE;
    let count = p.bulk_bytes.div_ceil(size);
    let (rate, est) = match rate_mbps {
        Some(r) => (r, false),
        None => (100.0, true),
    };
    let text = format!(
        r#"name = "lrt_share"
duration_s = {dur}
nodes = 4
drain_s = 60.0

[lrt]
rate_mbps = {rate}
estimate_rate = {est}

[network]
kind = "wifi"
phy = "a"
data_mbps = {data}

[[flows]]
from = 1
to = 0
app = "bulk"
size = {size}
count = {count}

[[flows]]
from = 2
to = 0
app = "bulk"
size = {size}
count = {count}

[[flows]]
from = 0
to = 3
size = 200
interval_ms = 10.0
count = {ctl}
"#,
        dur = p.control_s,
        data = p.data_mbps,
        ctl = (p.control_s * 100.0) as u64,
    );
    Scenario::from_toml(&text).map_err(|e| format!("scenario: {e}"))
}

fn setting(p: &ShareParams, rate_mbps: Option<f64>) -> Result<Setting, String> {
    let s = scenario(p, rate_mbps)?;
    let runs: Vec<Outcome> = (0..p.reps).map(|r| run(&s, p.seed + r, Recorder::default())).collect();
    // Both uploads start together: the aggregate is their bytes over the longer one's span
    // (each flow's goodput is its bytes over its own span, first send to last delivery).
    let aggregate = |o: &Outcome| {
        let bulk = &o.flows[..2];
        let bytes: Vec<f64> = bulk.iter().map(|f| f.delivered as f64 * BULK_MESSAGE as f64 * 8.0 / 1e6).collect();
        let span = bulk.iter().zip(&bytes).map(|(f, b)| b / f.goodput_mbps.max(1e-9)).fold(0.0, f64::max);
        bytes.iter().sum::<f64>() / span.max(1e-9)
    };
    let goodput: Vec<f64> = runs.iter().map(aggregate).collect();
    let p99: Vec<f64> = runs.iter().map(|o| o.flows[2].p99_ms).collect();
    let p50: Vec<f64> = runs.iter().map(|o| o.flows[2].p50_ms).collect();
    let (g, gh) = mean_ci95(&goodput);
    let (c, ch) = mean_ci95(&p99);
    Ok(Setting {
        label: rate_mbps.map_or("estimator".into(), |r| format!("hand-set {r} Mbit/s")),
        rate_mbps,
        goodput_mbps: round(g, 3),
        goodput_ci95: round(gh, 3),
        control_p99_ms: round(c, 2),
        control_p99_ci95: round(ch, 2),
        control_p50_ms: round(crate::stats::mean(&p50), 2),
        complete: runs.iter().all(Outcome::ok),
        runs: p.reps,
    })
}

/// Runs the sweep and the estimator; `progress` hears of each setting.
pub fn run_bench(p: &ShareParams, progress: impl Fn(&Setting)) -> Result<ShareReport, String> {
    if p.reps == 0 || p.rates_mbps.is_empty() || p.rates_mbps.iter().any(|&r| !(r > 0.0 && r <= 10_000.0)) {
        return Err("reps must be positive and every rate in (0, 10000] Mbit/s".into());
    }
    let mut hand_set = vec![];
    for &r in &p.rates_mbps {
        let s = setting(p, Some(r))?;
        progress(&s);
        hand_set.push(s);
    }
    let estimator = setting(p, None)?;
    progress(&estimator);
    let best =
        hand_set.iter().max_by(|a, b| a.goodput_mbps.total_cmp(&b.goodput_mbps)).ok_or("no hand-set rate")?.clone();
    Ok(ShareReport {
        best_hand_set_mbps: best.rate_mbps.unwrap_or(0.0),
        goodput_ratio_vs_best: round(estimator.goodput_mbps / best.goodput_mbps.max(1e-9), 3),
        control_p99_ratio_vs_best: round(estimator.control_p99_ms / best.control_p99_ms.max(1e-9), 3),
        command: format!("cohort bench lrt-share --json --reps {} --seed {}", p.reps, p.seed),
        hand_set,
        estimator,
        params: p.clone(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_short_sweep_completes_and_names_its_figures() {
        let p =
            ShareParams { rates_mbps: vec![4.0], reps: 1, bulk_bytes: 200_000, control_s: 0.5, ..Default::default() };
        let r = run_bench(&p, |_| {}).unwrap();
        assert!(r.estimator.complete && r.hand_set[0].complete, "{r:?}");
        assert!(r.estimator.goodput_mbps > 0.0 && r.hand_set[0].goodput_mbps > 0.0);
        let v = serde_json::to_value(&r).unwrap();
        for k in ["goodput_ratio_vs_best", "control_p99_ratio_vs_best", "best_hand_set_mbps"] {
            assert!(v[k].is_number(), "{k}");
        }
    }

    #[test]
    fn bad_rates_are_errors() {
        assert!(run_bench(&ShareParams { rates_mbps: vec![-1.0], ..Default::default() }, |_| {}).is_err());
        assert!(run_bench(&ShareParams { reps: 0, ..Default::default() }, |_| {}).is_err());
    }
}
