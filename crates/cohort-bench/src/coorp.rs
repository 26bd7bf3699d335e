//! `cohort bench coorp`: coordinated robotic learning on the simulated 802.11ac channel, every
//! system of seed 000 in the same run, control marked and unmarked, and the scalability sweep
//! beside seed 000's analytical model (Eqs. 1-3).
//!
//! Systems alternate within each repetition (seeds `seed..seed + reps`), so every system sees
//! the same seeds. Per system: the share of loops over the boundary, the reaction-time CDF, the
//! bulk's throughput against the no-control ideal (`bh_utilization`, seed 000 Table II's
//! "bytes per second when MPC was disabled"), and time per epoch against EDCA's.

use crate::progress::{Plan, Step};
use crate::stats::{mean, quantile, round, thin};
use cohort_medium::wifi::{NicProfile, StationConfig};
use cohort_proto::preempt::vpl::VplConfig;
use cohort_sim::crl::{CrlOutcome, CrlParams, System, run};
use serde::Serialize;
use serde_json::{Map, Value, json};

/// What to run.
#[derive(Debug, Clone, Serialize)]
pub struct CoorpParams {
    pub robots: usize,
    pub reps: u64,
    pub seed: u64,
    pub epochs: usize,
    pub update_mb: f64,
    /// Team sizes of the scalability sweep (COORP only, control marked); empty: none.
    pub scale: Vec<usize>,
}

impl Default for CoorpParams {
    fn default() -> Self {
        CoorpParams {
            robots: 5,
            reps: 3,
            seed: 1,
            epochs: 2,
            update_mb: 10.0,
            scale: vec![2, 5, 10, 20, 30, 40, 50, 60],
        }
    }
}

/// The named NIC profiles the model has, each a station configuration: strict per-AC hardware
/// queues, and one transmit path in arrival order with mt76's USB depths (seed 000's card).
pub fn profiles() -> Vec<(&'static str, StationConfig)> {
    vec![
        ("per_ac", StationConfig::default()),
        ("shared_tx", StationConfig { nic: NicProfile::mt76_usb(), ..StationConfig::default() }),
    ]
}

fn crl(p: &CoorpParams, robots: usize, station: StationConfig, marked: bool) -> CrlParams {
    CrlParams {
        robots,
        epochs: p.epochs,
        update_bytes: (p.update_mb * 1_048_576.0) as usize,
        marked,
        station,
        ..CrlParams::default()
    }
}

/// Pooled figures of one system over the repetitions.
fn pooled(runs: &[CrlOutcome], ideal_bh_mbps: f64, edca_epoch_s: f64) -> Value {
    let loops: usize = runs.iter().map(|o| o.loops).sum();
    let violations: usize = runs.iter().map(|o| o.violations).sum();
    let mut reaction: Vec<f64> = runs.iter().flat_map(|o| o.reaction_ms.iter().copied()).collect();
    reaction.sort_by(f64::total_cmp);
    let shares: Vec<f64> = runs.iter().map(CrlOutcome::violation_share).collect();
    let epoch: Vec<f64> = runs.iter().flat_map(|o| o.epoch_s.iter().copied()).collect();
    let bh: Vec<f64> = runs.iter().map(CrlOutcome::bh_mbps).collect();
    let epoch_mean = mean(&epoch);
    json!({
        "runs": runs.len(),
        "loops": loops,
        "violation_share": round(violations as f64 / loops.max(1) as f64, 4),
        "violation_share_per_run": shares.iter().map(|s| round(*s, 4)).collect::<Vec<_>>(),
        "incomplete_loops": runs.iter().map(|o| o.incomplete).sum::<usize>(),
        // Runs whose bulk started and never finished within the simulated time (pooled with
        // their throughput counted as 0): a stall, not a figure.
        "stalled_runs": runs.iter().filter(|o| o.bh_bytes > 0 && o.bh_seconds == 0.0).count(),
        "reaction_ms": {
            "p50": round(quantile(&reaction, 0.5), 3),
            "p90": round(quantile(&reaction, 0.9), 3),
            "p99": round(quantile(&reaction, 0.99), 3),
            "cdf": thin(&reaction, 200).iter().map(|v| round(*v, 3)).collect::<Vec<_>>(),
        },
        "bh_mbps": round(mean(&bh), 2),
        "bh_utilization": if ideal_bh_mbps > 0.0 { round(mean(&bh) / ideal_bh_mbps, 3) } else { f64::NAN },
        "epoch_s": round(epoch_mean, 3),
        "epoch_time_ratio_vs_edca": if edca_epoch_s > 0.0 { round(epoch_mean / edca_epoch_s, 3) } else { f64::NAN },
        "ls_frames_be_share": round(
            runs.iter().map(|o| o.ls_frames_be).sum::<u64>() as f64
                / runs.iter().map(|o| o.ls_frames_be + o.ls_frames_vo).sum::<u64>().max(1) as f64,
            4
        ),
    })
}

/// Runs `systems` over the repetitions (alternating), returning their outcomes by name.
fn alternate(
    p: &CoorpParams,
    cp: &CrlParams,
    systems: &[System],
    progress: &mut impl FnMut(&str),
) -> Result<Vec<(System, Vec<CrlOutcome>)>, String> {
    let mut out: Vec<(System, Vec<CrlOutcome>)> = systems.iter().map(|&s| (s, Vec::new())).collect();
    for rep in 0..p.reps {
        for (s, runs) in &mut out {
            progress(&format!("{} robots, {}, marked {}, seed {}", cp.robots, s.name(), cp.marked, p.seed + rep));
            runs.push(run(cp, *s, p.seed + rep)?);
        }
    }
    Ok(out)
}

/// The bulk's throughput with no control loop at all (seed 000's ideal): EDCA, `epochs`
/// epochs, the loop's messages switched off by sending none.
fn ideal_bh(p: &CoorpParams, cp: &CrlParams) -> Result<f64, String> {
    let quiet = CrlParams { perception_bytes: 0, action_bytes: 0, ..cp.clone() };
    let v: Result<Vec<f64>, String> =
        (0..p.reps).map(|r| run(&quiet, System::Edca, p.seed + r).map(|o| o.bh_mbps())).collect();
    Ok(mean(&v?))
}

/// Seed 000 Eqs. 1-2: the share of loops whose reaction exceeds `boundary_ms` with `n`
/// workers, `p0` ≈ 0.1 the chance that a bulk A-MPDU wins one contention against an LS frame,
/// `b_mbps` the bandwidth `B` (here: the bulk's measured throughput without control traffic).
pub fn model_violation_share(p: &CrlParams, n: usize, ampdu_bytes: f64, b_mbps: f64) -> f64 {
    let p0: f64 = (1.0 + 2.0 + 3.0) / (4.0 * 16.0) + 4.0 / (4.0 * 16.0) * (28.0 / (8.0 * 32.0));
    let b = b_mbps * 1e6 / 8.0;
    let t_tr = n as f64 * (p.perception_bytes + p.action_bytes) as f64 / b;
    let t_inf = p.inference_ms / 1e3;
    let bound = p.boundary_ms / 1e3;
    let trials = 2 * n;
    // P(N_BH = k) = C(2N, k) p0^k (1 - p0)^(2N - k); sum those with T_k > bound.
    let mut share = 0.0;
    let mut c = 1.0f64;
    for k in 0..=trials {
        if k > 0 {
            c *= (trials - k + 1) as f64 / k as f64;
        }
        let t_k = t_inf + t_tr + k as f64 * ampdu_bytes / b;
        if t_k > bound {
            share += c * p0.powi(k as i32) * (1.0 - p0).powi((trials - k) as i32);
        }
    }
    share
}

/// A floor under the reaction time of a loop with `workers` workers, from 802.11 timing
/// alone (an independent check on the simulated sweep, like seed 000's Eqs. 1-2 but without
/// their approximations): every perception fragment and every action goes as its own AC_VO
/// frame (AC_VO does not aggregate under ns-3's defaults, which the workload uses), and each
/// frame takes at least AIFS[VO] + its PPDU + SIFS + ACK: no backoff, no collision, no bulk,
/// no host delay. The leader's inference adds its time. A team whose floor is past the
/// boundary cannot meet it on this channel whatever the scheduling.
pub fn reaction_floor_ms(p: &CrlParams, workers: usize) -> f64 {
    use cohort_medium::wifi::phy::QOS_MAC_OVERHEAD_BYTES;
    use cohort_medium::wifi::{Ac, EdcaParams, Phy};
    use cohort_sim::crl::FRAGMENT;
    let phy = Phy::vht(p.phy_mbps);
    let aifs = phy.aifs(EdcaParams::defaults_2020(&phy)[Ac::Vo.index()].aifsn);
    let frame = |udp: usize| {
        // UDP payload + UDP/IPv4 headers + LLC/SNAP, in a QoS data frame.
        let mpdu = udp + 28 + cohort_medium::wifi::phy::LLC_SNAP_BYTES + QOS_MAC_OVERHEAD_BYTES;
        (aifs + phy.duration(mpdu, phy.data_mbps) + phy.sifs + phy.ack_duration()).as_secs_f64()
    };
    let message = |bytes: usize| {
        let full = bytes / FRAGMENT;
        let rest = bytes % FRAGMENT;
        full as f64 * frame(FRAGMENT) + if rest > 0 { frame(rest) } else { 0.0 }
    };
    (p.inference_ms / 1e3 + workers as f64 * (message(p.perception_bytes) + message(p.action_bytes))) * 1e3
}

/// The largest team (leader included) whose [`reaction_floor_ms`] is within the boundary.
pub fn max_robots_by_airtime(p: &CrlParams) -> usize {
    (1..10_000).take_while(|&w| reaction_floor_ms(p, w) <= p.boundary_ms).last().map_or(1, |w| w + 1)
}

/// The runs [`bench`] reports: per profile every system, then EDCA and COORP unmarked; the
/// two sweeps (COORP and its local half); one COORP run per team size.
fn steps(p: &CoorpParams) -> u64 {
    let per_profile = p.reps * (System::ALL.len() as u64 + 2);
    profiles().len() as u64 * per_profile + (P_PROT.len() + ALLOWANCES.len()) as u64 * p.reps * 2 + p.scale.len() as u64
}

const P_PROT: [f64; 5] = [0.5, 0.75, 0.9, 0.95, 0.99];
const ALLOWANCES: [f64; 4] = [0.0, 16_384.0, 32_768.0, 65_535.0];

/// Runs the bench. `progress` hears what runs.
pub fn bench(p: &CoorpParams, progress: impl FnMut(&Step)) -> Result<Value, String> {
    let mut plan = Plan::new(steps(p), progress);
    let mut progress = |what: &str| plan.begin(what);
    let mut profiles_out = Map::new();
    let mut unmarked = Map::new();
    let mut ideals = std::collections::BTreeMap::new();
    for (name, station) in profiles() {
        let cp = crl(p, p.robots, station, true);
        let ideal = ideal_bh(p, &cp)?;
        ideals.insert(name, ideal);
        let runs = alternate(p, &cp, &System::ALL, &mut progress)?;
        let edca_epoch = runs
            .iter()
            .find(|(s, _)| *s == System::Edca)
            .map_or(0.0, |(_, r)| mean(&r.iter().flat_map(|o| o.epoch_s.iter().copied()).collect::<Vec<_>>()));
        let mut sys = Map::new();
        for (s, r) in &runs {
            sys.insert(s.name().into(), pooled(r, ideal, edca_epoch));
        }
        profiles_out.insert(name.into(), json!({ "sim": sys, "ideal_bh_mbps": round(ideal, 2) }));
        let cu = crl(p, p.robots, station, false);
        let runs = alternate(p, &cu, &[System::Edca, System::Coorp], &mut progress)?;
        let mut sys = Map::new();
        for (s, r) in &runs {
            sys.insert(s.name().into(), pooled(r, ideal, edca_epoch));
        }
        unmarked.insert(name.into(), Value::Object(sys));
    }
    // Local preemption's price and its protection against `p_prot`, the percentile of the
    // completion-time table the layer trusts (Algorithm 2 line 3; the paper gives no value,
    // Cohort's default is 0.95), and against the BH the card may still hold when a window
    // starts (0: the paper's empty card; Cohort's default one A-MPDU): the trade-offs a user
    // sets, on the card seed 000 measured.
    let shared_ideal = ideals.get("shared_tx").copied().unwrap_or(f64::NAN);
    let mut sweep = |key: &str, values: &[f64], set: &dyn Fn(&mut VplConfig, f64)| -> Result<Vec<Value>, String> {
        let mut out = Vec::new();
        for &x in values {
            let mut cp =
                crl(p, p.robots, StationConfig { nic: NicProfile::mt76_usb(), ..StationConfig::default() }, true);
            set(&mut cp.vpl, x);
            let runs = alternate(p, &cp, &[System::Coorp, System::CoorpLocal], &mut progress)?;
            let mut row = Map::new();
            row.insert(key.into(), json!(x));
            for (s, r) in &runs {
                let v = pooled(r, shared_ideal, 0.0);
                row.insert(
                    s.name().into(),
                    json!({ "violation_share": v["violation_share"], "bh_utilization": v["bh_utilization"],
                            "reaction_p99_ms": v["reaction_ms"]["p99"] }),
                );
            }
            out.push(Value::Object(row));
        }
        Ok(out)
    };
    let p_prot_sweep = sweep("p_prot", &P_PROT, &|v, x| v.percentile = x)?;
    let allowance_sweep = sweep("allowance_bytes", &ALLOWANCES, &|v, x| v.window_allowance_bytes = x as u32)?;
    // The sweep runs on `shared_tx`, the card seed 000 measured; its ideal bulk throughput is
    // the model's bandwidth `B`.
    let shared_tx = StationConfig { nic: NicProfile::mt76_usb(), ..StationConfig::default() };
    let b_mbps =
        ideals.get("shared_tx").copied().map_or_else(|| ideal_bh(p, &crl(p, p.robots, shared_tx, true)), Ok)?;
    let mut scale = Vec::new();
    // The largest team of the sweep up to which every team stays within 5%.
    let mut max_ok = 0;
    let mut all_ok = true;
    for &n in &p.scale {
        let cp = crl(&CoorpParams { reps: 1, ..p.clone() }, n, shared_tx, true);
        let r = alternate(&CoorpParams { reps: 1, ..p.clone() }, &cp, &[System::Coorp], &mut progress)?;
        let o = &r[0].1;
        let share = pooled(o, 0.0, 0.0)["violation_share"].as_f64().unwrap_or(f64::NAN);
        all_ok &= share <= 0.05;
        if all_ok {
            max_ok = n;
        }
        // L_ampdu: the largest A-MPDU a bulk access may send (one frame without aggregation).
        let lim = StationConfig::default().ampdu[cohort_medium::wifi::Ac::Be.index()];
        let ampdu = f64::from(lim.max_bytes.min(65_535).min(u32::from(lim.max_frames) * 1538));
        let model = model_violation_share(&cp, n - 1, ampdu, b_mbps);
        scale.push(json!({
            "robots": n,
            "violation_share": share,
            "reaction_floor_ms": round(reaction_floor_ms(&cp, n - 1), 3),
            "model_violation_share": round(model, 4),
            "bh_mbps": round(o[0].bh_mbps(), 2),
            // Eq. 3: B_BH = B − N·F·(L_perc + L_act).
            "model_bh_mbps": round(
                b_mbps - (n - 1) as f64 * cp.loop_hz * (cp.perception_bytes + cp.action_bytes) as f64 * 8.0 / 1e6,
                2
            ),
        }));
    }
    plan.finish();
    Ok(json!({
        "bench": "coorp",
        "command": format!(
            "cohort bench coorp --json --robots {} --reps {} --seed {} --epochs {} --update-mb {}",
            p.robots, p.reps, p.seed, p.epochs, p.update_mb
        ),
        "params": p,
        "workload": crl(p, p.robots, StationConfig::default(), true),
        "profiles": profiles_out,
        // The issue's shape: `unmarked.sim.<system>` on the card seed 000 measured (`shared_tx`),
        // every profile under `unmarked_by_profile`.
        "unmarked": { "sim": unmarked.get("shared_tx").cloned().unwrap_or(Value::Null) },
        "unmarked_by_profile": unmarked,
        "scalability": scale,
        "p_prot_sweep": p_prot_sweep,
        "allowance_sweep": allowance_sweep,
        "model_bandwidth_mbps": round(b_mbps, 2),
        "max_robots_within_5pct": max_ok,
        // The largest team whose 802.11 floor (`reaction_floor_ms`) is within the boundary:
        // beyond it no system can keep a loop on time on this channel with this workload.
        "max_robots_by_airtime": max_robots_by_airtime(&crl(p, p.robots, shared_tx, true)),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tiny_run_reports_every_figure_the_issue_names() {
        let p = CoorpParams { reps: 1, epochs: 1, update_mb: 1.0, scale: vec![2], ..CoorpParams::default() };
        let mut steps = Vec::new();
        let r = bench(&p, crate::progress::recorder(&mut steps)).unwrap();
        crate::progress::assert_followed_plan(&steps);
        for profile in ["per_ac", "shared_tx"] {
            for system in ["edca", "schedwifi", "coorp", "coorp_global", "coorp_local", "no_bh"] {
                let s = &r["profiles"][profile]["sim"][system];
                for key in ["violation_share", "bh_utilization", "epoch_time_ratio_vs_edca"] {
                    assert!(s.get(key).is_some(), "{profile}/{system}/{key}");
                }
            }
        }
        assert!(r["unmarked"]["sim"]["edca"]["violation_share"].is_number());
        assert!(r["unmarked"]["sim"]["coorp"]["violation_share"].is_number());
        assert_eq!(r["scalability"][0]["robots"], 2);
        assert!(r["scalability"][0]["reaction_floor_ms"].as_f64().is_some_and(|f| f > 0.0));
        assert!(r["max_robots_within_5pct"].is_number());
        assert!(r["max_robots_by_airtime"].as_u64().is_some_and(|n| n >= 2));
        let sweep = r["p_prot_sweep"].as_array().unwrap();
        assert_eq!(sweep.len(), 5);
        assert!(sweep.iter().all(|row| row["coorp"]["bh_utilization"].is_number()));
    }

    /// The floor adds, per worker, nine full fragments and a 480-byte one for a 12 KiB
    /// perception and one frame for the action, each AIFS + PPDU + SIFS + ACK; it grows
    /// linearly and the largest team by airtime is where it crosses the boundary.
    #[test]
    fn the_airtime_floor_counts_every_frame_of_the_loop() {
        let p = CrlParams::default();
        let one = reaction_floor_ms(&p, 1) - p.inference_ms;
        assert!((reaction_floor_ms(&p, 10) - p.inference_ms - 10.0 * one).abs() < 1e-9);
        // 10 frames of at least 16 + 2·9 µs AIFS, 16 µs SIFS and a 44 µs preamble+ACK each.
        assert!(one > 10.0 * 0.094 && one < 10.0 * 0.5, "{one} ms per worker");
        let n = max_robots_by_airtime(&p);
        assert!(reaction_floor_ms(&p, n - 1) <= p.boundary_ms && reaction_floor_ms(&p, n) > p.boundary_ms);
    }

    #[test]
    fn the_analytical_model_follows_seed_000() {
        let p = CrlParams::default();
        // p0 ≈ 0.1 (§IV-D); with no bulk A-MPDU at all nothing can push a loop past the bound.
        assert_eq!(model_violation_share(&p, 4, 0.0, 200.0), 0.0);
        // A huge A-MPDU that alone exceeds the bound: the share is P(N_BH ≥ 1) = 1 − (1 − p0)^(2N).
        let p0: f64 = 6.0 / 64.0 + 4.0 / 64.0 * 28.0 / 256.0;
        let all = model_violation_share(&p, 4, 1e9, 200.0);
        assert!((all - (1.0 - (1.0 - p0).powi(8))).abs() < 1e-9, "{all}");
    }
}
