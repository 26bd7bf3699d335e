//! The saturation matrix against ns-3 3.44 (`scripts/ns3_matrix.sh`): one cell is a PHY, a
//! number of senders, a mix of access categories, a payload size and an aggregation setting;
//! ns-3 runs each cell with several RngRuns (`scripts/ns3_matrix_run.py`, raw output kept in
//! `docs/bench/ns3_matrix_raw/`) and the model the same scenario with as many seeds. Each
//! ns-3 result line names its whole cell, so the table can be re-derived from those files
//! alone.
//!
//! Nothing here is set per cell: a cell becomes an [`EdcaSatScenario`] by the same rule for
//! all of them (the PHY's rates as ns-3's `ConstantRateWifiManager` gets them, the
//! scenario's defaults otherwise: ns-3 timing and placement, 802.11-2020 EDCA table, and
//! the PHY's default aggregation unless the cell turns it off).

use super::scenario::{EdcaSatScenario, PhyStandard};
use super::{Ac, Aggregation, MediumError};
use std::collections::BTreeMap;

/// The goals: total within 3 %, every category carrying at least 5 % of the total within 10 %.
pub const GOAL_TOTAL: f64 = 0.03;
pub const GOAL_AC: f64 = 0.10;
pub const GOAL_MIN_SHARE: f64 = 0.05;

/// One cell of the matrix.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
pub struct Cell {
    /// a | g | n0 | n4 | n7 | ac
    pub phy: String,
    pub n: usize,
    /// be | vo2 | vo4 | vibk
    pub mix: String,
    pub payload: usize,
    /// default | off
    pub agg: String,
}

impl Cell {
    /// The model's scenario for this cell.
    pub fn scenario(&self, seed: u64, secs: f64, warmup_s: f64) -> Result<EdcaSatScenario, MediumError> {
        let (phy, data_mbps) = match self.phy.as_str() {
            "a" => (PhyStandard::A, 54.0),
            "g" => (PhyStandard::G, 54.0),
            "n0" => (PhyStandard::N, 6.5),
            "n4" => (PhyStandard::N, 39.0),
            "n7" => (PhyStandard::N, 65.0),
            "ac" => (PhyStandard::Ac, 78.0),
            _ => return Err(MediumError::Station("unknown matrix PHY")),
        };
        let acs = (1..=self.n)
            .map(|i| match self.mix.as_str() {
                "be" => Ok(Ac::Be),
                "vo2" => Ok(if i % 2 == 0 { Ac::Vo } else { Ac::Be }),
                "vo4" => Ok(if i % 4 == 0 { Ac::Vo } else { Ac::Be }),
                "vibk" => Ok(if i == 1 { Ac::Vi } else { Ac::Bk }),
                _ => Err(MediumError::Station("unknown matrix mix")),
            })
            .collect::<Result<Vec<_>, _>>()?;
        let aggregation = match self.agg.as_str() {
            "default" => Aggregation::default(),
            "off" => Aggregation::OFF,
            _ => return Err(MediumError::Station("unknown matrix aggregation")),
        };
        Ok(EdcaSatScenario {
            stations: self.n,
            phy,
            data_mbps,
            control_mbps: None,
            payload_bytes: self.payload,
            acs: Some(acs),
            aggregation,
            duration_s: secs,
            warmup_s,
            seed,
            ..EdcaSatScenario::default()
        })
    }
}

/// One ns-3 run as `ns3_matrix_run.py` prints it.
#[derive(Debug, Clone, PartialEq)]
pub struct Ns3Run {
    pub cell: Cell,
    pub run: u64,
    pub secs: f64,
    pub warm: f64,
    /// Mbit/s of payload by [`Ac`].
    pub mbps: [f64; 4],
}

/// Parses one result line (`cell phy=.. n=.. mix=.. payload=.. agg=.. secs=.. warm=.. run=..
/// ... bk=.. be=.. vi=.. vo=.. thr=..`).
pub fn parse_ns3_line(line: &str) -> Option<Ns3Run> {
    let line = line.trim().strip_prefix("cell ")?;
    let kv: BTreeMap<&str, &str> = line.split_whitespace().filter_map(|w| w.split_once('=')).collect();
    let num = |k: &str| kv.get(k)?.parse::<f64>().ok();
    Some(Ns3Run {
        cell: Cell {
            phy: kv.get("phy")?.to_string(),
            n: kv.get("n")?.parse().ok()?,
            mix: kv.get("mix")?.to_string(),
            payload: kv.get("payload")?.parse().ok()?,
            agg: kv.get("agg")?.to_string(),
        },
        run: kv.get("run")?.parse().ok()?,
        secs: num("secs")?,
        warm: num("warm")?,
        mbps: [num("bk")?, num("be")?, num("vi")?, num("vo")?],
    })
}

/// Reads every `*.txt` of `dir` (one run per file, as `ns3_matrix_run.py` writes them).
pub fn read_ns3_dir(dir: &std::path::Path) -> std::io::Result<Vec<Ns3Run>> {
    let mut paths: Vec<_> = std::fs::read_dir(dir)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "txt"))
        .collect();
    paths.sort();
    let mut runs = vec![];
    for p in paths {
        runs.extend(std::fs::read_to_string(&p)?.lines().filter_map(parse_ns3_line));
    }
    Ok(runs)
}

/// One cell compared.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct CellResult {
    pub cell: Cell,
    pub runs: usize,
    pub secs: f64,
    pub warm: f64,
    /// Means over runs (ns-3) and seeds (model), Mbit/s by [`Ac`] (bk, be, vi, vo).
    pub ns3_mbps: [f64; 4],
    pub model_mbps: [f64; 4],
    pub ns3_total: f64,
    pub model_total: f64,
    /// (model − ns-3) / ns-3 of the total, and of each category ns-3 gives anything
    /// (`None` otherwise).
    pub total_err: f64,
    pub ac_err: [Option<f64>; 4],
    /// Whether the cell meets the goals ([`GOAL_TOTAL`], [`GOAL_AC`] for categories with at
    /// least [`GOAL_MIN_SHARE`] of ns-3's total).
    pub meets_goal: bool,
    /// Standard errors of the means above (sample standard deviation over the runs or
    /// seeds / √runs), Mbit/s by [`Ac`], and of the totals.
    pub ns3_se: [f64; 4],
    pub model_se: [f64; 4],
    pub ns3_total_se: f64,
    pub model_total_se: f64,
    /// Whether every difference that breaks a goal lies within two standard errors of the
    /// difference of the means: the runs are too few or too short to tell it from noise
    /// (a few dozen A-MPDUs of a small category in a 2-second run, say).
    pub miss_within_noise: bool,
}

impl CellResult {
    /// The largest relative error among the categories the goal covers.
    pub fn worst_ac_err(&self) -> f64 {
        (0..4)
            .filter(|&i| self.ns3_mbps[i] >= GOAL_MIN_SHARE * self.ns3_total)
            .filter_map(|i| self.ac_err[i])
            .fold(0.0, |m: f64, e| m.max(e.abs()))
    }
}

/// Groups ns-3 runs by cell, runs the model with seeds `1..=runs` of each cell, compares.
pub fn compare(ns3: &[Ns3Run]) -> Result<Vec<CellResult>, MediumError> {
    let mut by_cell: BTreeMap<Cell, Vec<&Ns3Run>> = BTreeMap::new();
    for r in ns3 {
        by_cell.entry(r.cell.clone()).or_default().push(r);
    }
    by_cell.into_iter().map(|(cell, runs)| compare_cell(cell, &runs)).collect()
}

fn compare_cell(cell: Cell, runs: &[&Ns3Run]) -> Result<CellResult, MediumError> {
    let k = runs.len().max(1) as f64;
    let (secs, warm) = (runs[0].secs, runs[0].warm);
    let mut ns3_mbps = [0.0; 4];
    let mut model_mbps = [0.0; 4];
    let mut ns3_runs: Vec<[f64; 4]> = vec![];
    let mut model_runs: Vec<[f64; 4]> = vec![];
    for (i, r) in runs.iter().enumerate() {
        let m = cell.scenario(i as u64 + 1, secs, warm)?.run()?;
        let mv = [m.bk_mbps, m.be_mbps, m.vi_mbps, m.vo_mbps];
        for ac in 0..4 {
            model_mbps[ac] += mv[ac] / k;
            ns3_mbps[ac] += r.mbps[ac] / k;
        }
        ns3_runs.push(r.mbps);
        model_runs.push(mv);
    }
    // Standard error of a mean over the runs, for category `ac` (4: the total).
    let se = |v: &[[f64; 4]], ac: usize| {
        let x: Vec<f64> = v.iter().map(|r| if ac == 4 { r.iter().sum() } else { r[ac] }).collect();
        if x.len() < 2 {
            return 0.0;
        }
        let mean = x.iter().sum::<f64>() / x.len() as f64;
        let var = x.iter().map(|y| (y - mean).powi(2)).sum::<f64>() / (x.len() - 1) as f64;
        (var / x.len() as f64).sqrt()
    };
    let ns3_se: [f64; 4] = std::array::from_fn(|ac| se(&ns3_runs, ac));
    let model_se: [f64; 4] = std::array::from_fn(|ac| se(&model_runs, ac));
    let (ns3_total_se, model_total_se) = (se(&ns3_runs, 4), se(&model_runs, 4));
    let (ns3_total, model_total): (f64, f64) = (ns3_mbps.iter().sum(), model_mbps.iter().sum());
    let rel = |m: f64, n: f64| (m - n) / n;
    let total_err = rel(model_total, ns3_total);
    let ac_err: [Option<f64>; 4] =
        std::array::from_fn(|i| (ns3_mbps[i] > 0.0).then(|| rel(model_mbps[i], ns3_mbps[i])));
    let mut r = CellResult {
        cell,
        runs: runs.len(),
        secs,
        warm,
        ns3_mbps,
        model_mbps,
        ns3_total,
        model_total,
        total_err,
        ac_err,
        meets_goal: false,
        ns3_se,
        model_se,
        ns3_total_se,
        model_total_se,
        miss_within_noise: false,
    };
    r.meets_goal = total_err.abs() <= GOAL_TOTAL && r.worst_ac_err() <= GOAL_AC;
    let noise = |d: f64, a: f64, b: f64| d.abs() <= 2.0 * (a * a + b * b).sqrt();
    let total_ok = total_err.abs() <= GOAL_TOTAL || noise(model_total - ns3_total, ns3_total_se, model_total_se);
    let acs_ok = (0..4).all(|i| {
        let covered = r.ns3_mbps[i] >= GOAL_MIN_SHARE * ns3_total;
        !covered
            || r.ac_err[i].is_none_or(|e| e.abs() <= GOAL_AC)
            || noise(model_mbps[i] - ns3_mbps[i], ns3_se[i], model_se[i])
    });
    r.miss_within_noise = !r.meets_goal && total_ok && acs_ok;
    Ok(r)
}

/// The comparison as a markdown table, worst cells last in a summary.
pub fn markdown(results: &[CellResult]) -> String {
    let pct = |e: Option<f64>| e.map_or("–".to_string(), |e| format!("{:+.1}%", 100.0 * e));
    let mut s = String::from(
        "| phy | N | mix | payload | agg | runs | ns-3 total | model total | total err | BK err | BE err | VI err | VO err | goal |\n\
         |---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n",
    );
    for r in results {
        let c = &r.cell;
        s += &format!(
            "| {} | {} | {} | {} | {} | {} | {:.2} | {:.2} | {} | {} | {} | {} | {} | {} |\n",
            c.phy,
            c.n,
            c.mix,
            c.payload,
            c.agg,
            r.runs,
            r.ns3_total,
            r.model_total,
            pct(Some(r.total_err)),
            pct(r.ac_err[0]),
            pct(r.ac_err[1]),
            pct(r.ac_err[2]),
            pct(r.ac_err[3]),
            if r.meets_goal {
                "yes"
            } else if r.miss_within_noise {
                "no (within noise)"
            } else {
                "**no**"
            }
        );
    }
    let met = results.iter().filter(|r| r.meets_goal).count();
    let noisy = results.iter().filter(|r| r.miss_within_noise).count();
    s += &format!(
        "\n{met} of {} cells meet the goals (total within {:.0}%, every category with at least {:.0}% of the total within {:.0}%).\n",
        results.len(),
        100.0 * GOAL_TOTAL,
        100.0 * GOAL_MIN_SHARE,
        100.0 * GOAL_AC
    );
    s += &format!(
        "{noisy} of the other cells miss only by differences within two standard errors of the difference of the means (\"within noise\": too few runs, or too short, to tell).\n"
    );
    s
}
