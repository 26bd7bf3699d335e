//! `cohort bench beams`: RF-chain and beam allocation (seed 001 §3.1, Algorithm 1) and its
//! join to multipath scheduling (`cohort_medium::beams`, `cohort_sim::beams`).
//!
//! Four parts, each against its baseline in the same run:
//!
//! 1. **Greedy against the optimum**: `instances` random instances (`|I|` 2-8 devices, `|R|`
//!    1-4 chains, `|B|` 4-16 beams, either band, devices 2-40 m away inside the ±60° sector),
//!    Algorithm 1's total against the exact optimum of the integer program
//!    (`cohort_medium::beams::exact`): mean and worst ratio.
//! 2. **Time per round**: one Algorithm 1 round (the channel given) as `|I|`, `|R|` and `|B|`
//!    grow from 16 × 8 × 64, the median of repeated rounds over 8 random channels, beside
//!    Remark 1's `|I||R|³|B|` and Cohort's `|R||B|(|I| + |R|)` operation counts, and the
//!    literal evaluation's time (`alloc::literal`, up to the 16 × 8 × 64 size). A release
//!    build's figure; a debug build's is flagged in the report.
//! 3. **One-to-many against one-to-one** (HEKATON's mapping): on the same instances, the
//!    greedy's sum throughput and bits per joule (`PowerModel`: 0.5 W + 0.3 W per active
//!    chain, as Fig. 9's energy efficiency), both allocators greedy, and the optima too.
//! 4. **End to end**: robot 0 of a team past two multi-chain access points
//!    (`BeamTeam::ellipse` or a team file) runs a multipath transfer for `mobility_s`; its
//!    paths' rates follow the allocation every 100 ms round; the sender's delay balancing is
//!    told each path's allocated rate (aware), the same rate for every path (equal split), or
//!    nothing (measured). Each repetition starts the team at another point of the drive
//!    (seed-drawn); goodput and p99 message delay, paired ratios with 95% intervals.

use crate::progress::{Plan, Step};
use crate::stats::{mean_ci95, median, quantile, round, thin, time_reps};
use cohort_medium::beams::alloc::{Greedy, Mapping, literal};
use cohort_medium::beams::exact::optimum;
use cohort_medium::beams::{ApConfig, Band, Channel, PowerModel};
use cohort_proto::multipath::MpConfig;
use cohort_sim::beams::{BeamTeam, Hints, paths, rates};
use cohort_sim::multipath::{MpOutcome, MpRun, run};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde_json::{Value, json};
use std::time::{Duration, Instant};

/// What to run.
#[derive(Debug, Clone, PartialEq)]
pub struct BeamsParams {
    /// Random instances of parts 1 and 3.
    pub instances: usize,
    pub seed: u64,
    /// Time spent timing each size of part 2, ms.
    pub timing_ms: u64,
    /// Repetitions of part 4, and each one's length, seconds.
    pub reps: u64,
    pub mobility_s: f64,
    /// The team of part 4 (`BeamTeam::ellipse(6, 10.0)` by default).
    pub team: Option<BeamTeam>,
}

impl Default for BeamsParams {
    fn default() -> Self {
        BeamsParams { instances: 1000, seed: 1, timing_ms: 200, reps: 5, mobility_s: 30.0, team: None }
    }
}

/// Bytes per message of part 4: one LRT symbol's worth, as `cohort bench multipath`.
const MESSAGE: usize = 1200;

/// A random channel of `devices`, `chains`, `beams` in `band`: devices 2-40 m away, uniform
/// over the ±60° sector.
fn random_channel(rng: &mut ChaCha8Rng, band: Band, devices: usize, chains: usize, beams: usize) -> Channel {
    let ap = ApConfig::new(band, chains, beams);
    let pos: Vec<(f64, f64)> = (0..devices)
        .map(|_| {
            let d = rng.random_range(2.0..40.0);
            let a = rng.random_range(-ap.sector_rad..ap.sector_rad);
            (d * f64::cos(a), d * f64::sin(a))
        })
        .collect();
    // The configuration and positions are valid by construction.
    Channel::new(&ap, &pos).unwrap_or_else(|e| unreachable!("{e}"))
}

/// Parts 1 and 3.
fn instances(p: &BeamsParams, progress: &mut impl FnMut(&str)) -> Result<Value, String> {
    let mut rng = ChaCha8Rng::seed_from_u64(p.seed);
    let mut g = Greedy::new();
    let power = PowerModel::default();
    let (mut ratio, mut gain, mut gain_opt, mut bpj_gain) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let (mut below, mut worst_case) = (0usize, Value::Null);
    let (mut sets, mut ilps, mut exact_s) = (0u64, 0u64, 0.0);
    let mut greedy_optimal = 0usize;
    for k in 0..p.instances {
        if k % 100 == 0 {
            progress(&format!("instances {k}/{}", p.instances));
        }
        let band = if rng.random_bool(0.5) { Band::G60 } else { Band::G5 };
        let (ni, nr, nb) = (rng.random_range(2..=8), rng.random_range(1..=4), rng.random_range(4..=16));
        let ch = random_channel(&mut rng, band, ni, nr, nb);
        let many = g.allocate(&ch, Mapping::OneToMany);
        let one = g.allocate(&ch, Mapping::OneToOne);
        let t = Instant::now();
        let (best, st) = optimum(&ch, Mapping::OneToMany).map_err(|e| e.to_string())?;
        let (best1, st1) = optimum(&ch, Mapping::OneToOne).map_err(|e| e.to_string())?;
        exact_s += t.elapsed().as_secs_f64();
        (sets, ilps) = (sets + st.sets + st1.sets, ilps + st.ilps + st1.ilps);
        let r = if best.total_bps > 0.0 { many.total_bps / best.total_bps } else { 1.0 };
        if r >= 1.0 - 1e-9 {
            greedy_optimal += 1;
        }
        if ratio.iter().all(|&x| r < x) {
            worst_case = json!({
                "instance": k, "band": format!("{band:?}"), "devices": ni, "chains": nr, "beams": nb,
                "greedy_gbps": round(many.total_bps / 1e9, 4), "optimum_gbps": round(best.total_bps / 1e9, 4),
            });
        }
        ratio.push(r);
        if many.total_bps < one.total_bps * (1.0 - 1e-12) {
            below += 1;
        }
        gain.push(many.total_bps / one.total_bps.max(1e-300));
        gain_opt.push(best.total_bps / best1.total_bps.max(1e-300));
        bpj_gain.push(power.bits_per_joule(&many) / power.bits_per_joule(&one).max(1e-300));
    }
    let mut sorted = ratio.clone();
    sorted.sort_by(f64::total_cmp);
    let n = p.instances.max(1) as f64;
    let ci = |v: &[f64]| {
        let (m, h) = mean_ci95(v);
        json!({ "mean": round(m, 4), "ci95": round(h, 4), "min": round(v.iter().copied().fold(f64::INFINITY, f64::min), 4) })
    };
    Ok(json!({
        "instances": p.instances,
        "sizes": "devices 2-8, chains 1-4, beams 4-16, 5 or 60 GHz, devices 2-40 m in the ±60° sector",
        "greedy_over_optimum": ci(&ratio),
        "greedy_over_optimum_p01": round(quantile(&sorted, 0.01), 4),
        "greedy_optimal_share": round(greedy_optimal as f64 / n, 4),
        "worst_instance": worst_case,
        "ratios_sorted": thin(&sorted, 500).iter().map(|x| round(*x, 4)).collect::<Vec<_>>(),
        "one_to_many_over_one_to_one_greedy": ci(&gain),
        "one_to_many_over_one_to_one_optimum": ci(&gain_opt),
        "one_to_many_below_one_to_one": below,
        "bits_per_joule_many_over_one": ci(&bpj_gain),
        "power_model": { "static_w": power.static_w, "per_chain_w": power.per_chain_w },
        "exact": { "beam_sets": sets, "ilps_solved": ilps, "seconds": round(exact_s, 3), "solver": "good_lp + microlp" },
    }))
}

/// Median µs of one greedy round over 8 random 60 GHz channels of this size, and of one
/// round of Algorithm 1 evaluated literally (`alloc::literal`) where that is at most the
/// 16 × 8 × 64 size's `|I||R|³|B|`.
fn time_round(
    rng: &mut ChaCha8Rng,
    devices: usize,
    chains: usize,
    beams: usize,
    budget: Duration,
) -> (f64, Option<f64>) {
    let chans: Vec<Channel> = (0..8).map(|_| random_channel(rng, Band::G60, devices, chains, beams)).collect();
    let mut g = Greedy::new();
    let mut k = 0;
    let mut sink = 0.0;
    let mut v = time_reps(budget, 64, || {
        sink += g.run(&chans[k % chans.len()], Mapping::OneToMany);
        k += 1;
    });
    let lit = (devices * chains.pow(3) * beams <= 16 * 8usize.pow(3) * 64).then(|| {
        let mut w = time_reps(budget / 4, 3, || {
            sink += literal(&chans[k % chans.len()], Mapping::OneToMany).total_bps;
            k += 1;
        });
        median(&mut w).as_secs_f64() * 1e6
    });
    std::hint::black_box(sink);
    (median(&mut v).as_secs_f64() * 1e6, lit)
}

/// Part 2.
fn timing(p: &BeamsParams, progress: &mut impl FnMut(&str)) -> Value {
    progress("time per round");
    let mut rng = ChaCha8Rng::seed_from_u64(p.seed ^ 0x7131);
    let budget = Duration::from_millis(p.timing_ms);
    let mut sweep = |name: &str, sizes: &[(usize, usize, usize)]| {
        let pts: Vec<Value> = sizes
            .iter()
            .map(|&(i, r, b)| {
                let (us, lit) = time_round(&mut rng, i, r, b, budget);
                json!({
                    "devices": i, "chains": r, "beams": b, "round_us": round(us, 3),
                    "literal_round_us": lit.map(|x| round(x, 1)),
                    "remark1_ops": i * r * r * r * b, "cohort_ops": r * b * (i + r),
                })
            })
            .collect();
        (name.to_string(), Value::Array(pts))
    };
    let (_, base) = sweep("base", &[(16, 8, 64)]);
    let parts = [
        sweep("devices", &[(4, 8, 64), (8, 8, 64), (16, 8, 64), (32, 8, 64), (64, 8, 64)]),
        sweep("chains", &[(16, 1, 64), (16, 2, 64), (16, 4, 64), (16, 8, 64), (16, 16, 64)]),
        sweep("beams", &[(16, 8, 16), (16, 8, 32), (16, 8, 64), (16, 8, 128), (16, 8, 256)]),
    ];
    let mut v = serde_json::Map::new();
    v.insert("round_us_16x8x64".into(), base[0]["round_us"].clone());
    v.insert("release_build".into(), json!(!cfg!(debug_assertions)));
    for (name, pts) in parts {
        v.insert(name, pts);
    }
    Value::Object(v)
}

/// Part 4: one run of robot 0's transfer.
fn e2e_run(team: &BeamTeam, secs: f64, hints: Hints, seed: u64) -> Result<MpOutcome, String> {
    let limit = Duration::from_secs_f64(secs);
    let ps = paths(team, limit, hints).map_err(|e| e.to_string())?;
    let cfg = MpConfig { seed, ..MpConfig::default() };
    let r = MpRun { app_buffer_bytes: 4 * MESSAGE, limit, ..MpRun::new(cfg, ps, u32::MAX / 2, MESSAGE, seed) };
    let o = run(&r).map_err(|e| e.to_string())?;
    if !o.in_order || o.delivered == 0 {
        return Err(format!(
            "{hints:?} seed {seed}: {} delivered, in order {} (replay: cohort bench beams --seed {seed} --reps 1)",
            o.delivered, o.in_order
        ));
    }
    Ok(o)
}

/// Part 4.
fn end_to_end(p: &BeamsParams, progress: &mut impl FnMut(&str)) -> Result<Value, String> {
    let base = p.team.clone().unwrap_or_else(|| BeamTeam::ellipse(6, 10.0));
    let mut rng = ChaCha8Rng::seed_from_u64(p.seed ^ 0xe2e);
    let variants = [("aware", Hints::Allocated), ("equal", Hints::Equal), ("measured", Hints::None)];
    let mut runs: Vec<Vec<MpOutcome>> = vec![Vec::new(); variants.len()];
    let (mut starts, mut both_up, mut none_up) = (Vec::new(), Vec::new(), Vec::new());
    // Per repetition, whether every path was up in each round (to pool the delays of the
    // messages sent while delay balancing had every path to split over).
    let mut every_up: Vec<(Duration, Vec<bool>)> = Vec::new();
    for rep in 0..p.reps {
        let start = Duration::from_millis(rng.random_range(0..60_000));
        starts.push(start.as_secs_f64());
        let team = BeamTeam { start, ..base.clone() };
        // How often robot 0 has every path, and none, over the run (the rounds' rates).
        let sched = rates(&team, Duration::from_secs_f64(p.mobility_s)).map_err(|e| e.to_string())?;
        let share =
            |f: &dyn Fn(&Vec<f64>) -> bool| sched.iter().filter(|r| f(&r.1)).count() as f64 / sched.len() as f64;
        both_up.push(share(&|r| r.iter().all(|&b| b >= team.min_rate_bps)));
        every_up.push((team.round, sched.iter().map(|r| r.1.iter().all(|&b| b >= team.min_rate_bps)).collect()));
        none_up.push(share(&|r| r.iter().all(|&b| b < team.min_rate_bps)));
        for k in 0..variants.len() {
            let i = (k + rep as usize) % variants.len();
            progress(&format!("end to end rep {rep} {}", variants[i].0));
            runs[i].push(e2e_run(&team, p.mobility_s, variants[i].1, p.seed + rep)?);
        }
    }
    let p99 = |o: &MpOutcome| {
        let mut d = o.delays_ms.clone();
        d.sort_by(f64::total_cmp);
        quantile(&d, 0.99)
    };
    // p99 of the messages sent in rounds where every path was up.
    let p99_up = |rep: usize, o: &MpOutcome| {
        let (round, up) = &every_up[rep];
        let mut d: Vec<f64> = o
            .delays_ms
            .iter()
            .zip(&o.sent_ms)
            .filter(|(_, s)| up.get((*s / 1e3 / round.as_secs_f64()) as usize).copied().unwrap_or(false))
            .map(|(d, _)| *d)
            .collect();
        d.sort_by(f64::total_cmp);
        quantile(&d, 0.99)
    };
    let mut v = serde_json::Map::new();
    for ((name, _), rs) in variants.iter().zip(&runs) {
        let g: Vec<f64> = rs.iter().map(|o| o.goodput_mbps).collect();
        let d: Vec<f64> = rs.iter().map(p99).collect();
        let du: Vec<f64> = rs.iter().enumerate().map(|(k, o)| p99_up(k, o)).filter(|x| x.is_finite()).collect();
        let (gm, gh) = mean_ci95(&g);
        let (dm, dh) = mean_ci95(&d);
        let (um, uh) = mean_ci95(&du);
        let (um, uh) = if du.is_empty() { (f64::NAN, f64::NAN) } else { (um, uh) };
        v.insert(
            (*name).into(),
            json!({
                "goodput_mbps": round(gm, 3), "goodput_ci95": round(gh, 3),
                "delay_p99_ms": round(dm, 2), "delay_p99_ci95": round(dh, 2),
                "goodput_runs": g.iter().map(|x| round(*x, 3)).collect::<Vec<_>>(),
                "delay_p99_runs": d.iter().map(|x| round(*x, 2)).collect::<Vec<_>>(),
                "every_path_up_delay_p99_ms": round(um, 2), "every_path_up_delay_p99_ci95": round(uh, 2),
                "every_path_up_delay_p99_runs": du.iter().map(|x| round(*x, 2)).collect::<Vec<_>>(),
                "failures": rs.iter().map(|o| o.sender.paths.iter().map(|q| q.failures).sum::<u64>()).sum::<u64>(),
            }),
        );
    }
    let paired = |a: usize, b: usize, f: &dyn Fn(&MpOutcome) -> f64| {
        let r: Vec<f64> = runs[a].iter().zip(&runs[b]).map(|(x, y)| f(x) / f(y).max(1e-12)).collect();
        let (m, h) = mean_ci95(&r);
        json!({ "mean": round(m, 4), "ci95": round(h, 4), "pairs": r.len() })
    };
    v.insert("p99_aware_over_equal".into(), paired(0, 1, &p99));
    let r: Vec<f64> =
        (0..runs[0].len()).map(|k| p99_up(k, &runs[0][k]) / p99_up(k, &runs[1][k])).filter(|x| x.is_finite()).collect();
    // No message sent while every path was up: no figure (null), not a zero.
    let (m, h) = mean_ci95(&r);
    let (m, h) = if r.is_empty() { (Value::Null, Value::Null) } else { (json!(round(m, 4)), json!(round(h, 4))) };
    v.insert("every_path_up_p99_aware_over_equal".into(), json!({ "mean": m, "ci95": h, "pairs": r.len() }));
    v.insert("goodput_aware_over_equal".into(), paired(0, 1, &|o: &MpOutcome| o.goodput_mbps));
    v.insert("p99_aware_over_measured".into(), paired(0, 2, &p99));
    v.insert("goodput_aware_over_measured".into(), paired(0, 2, &|o: &MpOutcome| o.goodput_mbps));
    v.insert("starts_s".into(), json!(starts));
    v.insert("every_path_up_share".into(), json!(round(mean_ci95(&both_up).0, 3)));
    v.insert("no_path_up_share".into(), json!(round(mean_ci95(&none_up).0, 3)));
    v.insert(
        "team".into(),
        json!({
            "robots": base.team, "aps": base.aps.iter().map(|a| json!({
                "band": format!("{:?}", a.band), "chains": a.chains, "beams": a.beams, "x": a.x, "y": a.y,
            })).collect::<Vec<_>>(),
            "round_ms": base.round.as_secs_f64() * 1e3, "share": base.share, "seconds": p.mobility_s,
        }),
    );
    Ok(Value::Object(v))
}

/// Runs the bench; the JSON report.
pub fn run_bench(p: &BeamsParams, progress: impl FnMut(&Step)) -> Result<Value, String> {
    if p.instances == 0 || p.reps == 0 || !(p.mobility_s.is_finite() && p.mobility_s > 0.0 && p.mobility_s <= 3600.0) {
        return Err("instances and reps must be positive, mobility time in (0, 3600] s".into());
    }
    // Instances by the hundred, the timing, three allocators per end-to-end repetition.
    let mut plan = Plan::new(p.instances.div_ceil(100) as u64 + 1 + p.reps * 3, progress);
    let mut progress = |what: &str| plan.begin(what);
    let inst = instances(p, &mut progress)?;
    let time = timing(p, &mut progress);
    let e2e = end_to_end(p, &mut progress)?;
    plan.finish();
    let ratio_mean = inst["greedy_over_optimum"]["mean"].as_f64().unwrap_or(f64::NAN);
    let ratio_min = inst["greedy_over_optimum"]["min"].as_f64().unwrap_or(f64::NAN);
    let round_us = time["round_us_16x8x64"].as_f64().unwrap_or(f64::NAN);
    let gain = inst["one_to_many_over_one_to_one_greedy"]["mean"].as_f64().unwrap_or(f64::NAN);
    let below = inst["one_to_many_below_one_to_one"].as_u64().unwrap_or(0);
    let p99 = e2e["p99_aware_over_equal"]["mean"].as_f64().unwrap_or(f64::NAN);
    let goodput = e2e["goodput_aware_over_equal"]["mean"].as_f64().unwrap_or(f64::NAN);
    let summary = json!({
        "greedy_over_optimum_mean": ratio_mean,
        "greedy_over_optimum_min": ratio_min,
        "round_us_16x8x64": round_us,
        "one_to_many_gain_mean": gain,
        "bits_per_joule_gain_mean": inst["bits_per_joule_many_over_one"]["mean"],
        "p99_delay_ratio_aware_over_equal": p99,
        "every_path_up_p99_ratio_aware_over_equal": e2e["every_path_up_p99_aware_over_equal"]["mean"],
        "goodput_ratio_aware_over_equal": goodput,
    });
    let goals = json!({
        "greedy_mean_at_least_0.95": ratio_mean >= 0.95,
        "greedy_worst_at_least_0.85": ratio_min >= 0.85,
        "round_16x8x64_at_most_50us": round_us <= 50.0,
        "one_to_many_never_below_one_to_one": below == 0,
        "p99_aware_at_most_0.8x_equal": p99 <= 0.8,
        "no_goodput_loss": goodput >= 1.0 - e2e["goodput_aware_over_equal"]["ci95"].as_f64().unwrap_or(0.0),
    });
    Ok(json!({
        "bench": "beams",
        "summary": summary,
        "goals": goals,
        "instances": inst,
        "timing": time,
        "end_to_end": e2e,
        "params": { "instances": p.instances, "seed": p.seed, "timing_ms": p.timing_ms, "reps": p.reps, "mobility_s": p.mobility_s },
        "command": format!(
            "cohort bench beams --json --instances {} --seed {} --timing-ms {} --reps {} --mobility-s {}",
            p.instances, p.seed, p.timing_ms, p.reps, p.mobility_s
        ),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A tiny run: every summary key is a finite number and the ratios are within bounds.
    #[test]
    fn a_small_run_is_well_formed() {
        let p = BeamsParams { instances: 20, timing_ms: 1, reps: 1, mobility_s: 3.0, ..BeamsParams::default() };
        let mut steps = Vec::new();
        let r = run_bench(&p, crate::progress::recorder(&mut steps)).unwrap();
        crate::progress::assert_followed_plan(&steps);
        for k in [
            "greedy_over_optimum_mean",
            "greedy_over_optimum_min",
            "round_us_16x8x64",
            "one_to_many_gain_mean",
            "p99_delay_ratio_aware_over_equal",
        ] {
            assert!(r["summary"][k].as_f64().is_some_and(f64::is_finite), "{k}: {}", r["summary"]);
        }
        let m = r["summary"]["greedy_over_optimum_mean"].as_f64().unwrap_or(0.0);
        assert!(m > 0.0 && m <= 1.0 + 1e-9, "{m}");
        assert!(r["timing"]["devices"].as_array().is_some_and(|a| a.len() == 5));
        assert!(run_bench(&BeamsParams { reps: 0, ..p }, |_| {}).is_err());
    }
}
