//! `cohort bench bianchi` and `cohort bench sim`: the 802.11 model against the reference
//! engine's tables, and how fast it runs.

use crate::stats::round;
use cohort_medium::wifi::scenario::{BIANCHI_CASES, edca_sat};
use serde::Serialize;
use std::time::{Duration, Instant};

#[derive(Debug, Serialize)]
pub struct BianchiRow {
    pub phy: &'static str,
    pub n: usize,
    pub reference_mbps: f64,
    pub simulated_mbps: f64,
    pub analytic_mbps: f64,
    pub rel_err: f64,
}

#[derive(Debug, Serialize)]
pub struct BianchiReport {
    pub cases: Vec<BianchiRow>,
    pub max_rel_err: f64,
    pub simulated_seconds: Vec<(String, u64)>,
    pub seed: u64,
    pub reference: &'static str,
    pub command: String,
}

/// Every reference case, simulated for ~20 000 frames.
pub fn bianchi(seed: u64) -> BianchiReport {
    let secs = |phy: &str| if phy == "11b-1" { 300 } else { 10 };
    let cases: Vec<BianchiRow> = BIANCHI_CASES
        .iter()
        .map(|c| {
            let sim = c.simulate(Duration::from_secs(secs(c.phy)), seed);
            BianchiRow {
                phy: c.phy,
                n: c.n,
                reference_mbps: c.reference_mbps,
                simulated_mbps: round(sim, 4),
                analytic_mbps: round(c.analytic(), 4),
                rel_err: round((sim - c.reference_mbps).abs() / c.reference_mbps, 4),
            }
        })
        .collect();
    BianchiReport {
        max_rel_err: cases.iter().map(|c| c.rel_err).fold(0.0, f64::max),
        cases,
        simulated_seconds: vec![("11b-1".into(), secs("11b-1")), ("11g-54".into(), secs("11g-54"))],
        seed,
        reference: "ns-3 src/wifi/examples/reference (Bianchi, basic access, DIFS), as quoted in issue 4",
        command: format!("cohort bench bianchi --json --seed {seed}"),
    }
}

#[derive(Debug, Serialize)]
pub struct SimReport {
    pub scenario: &'static str,
    pub stations: usize,
    pub simulated_seconds: f64,
    pub wall_seconds: f64,
    pub sim_seconds_per_wall_second: f64,
    pub throughput_mbps: f64,
    pub be_mbps: f64,
    pub vo_mbps: f64,
    /// The same scenario with 40 stations (seed 000's largest team).
    pub stations_40_sim_seconds_per_wall_second: f64,
    pub ns3_reference: &'static str,
    /// ns-3 3.44 on the same scenario (N=5, 10 s, seed 1), measured on this machine with
    /// `scripts/ns3_edca_sat.sh 5 10`; compare per category.
    pub ns3_total_mbps: f64,
    pub ns3_be_mbps: f64,
    pub ns3_vo_mbps: f64,
    pub note: &'static str,
    pub command: String,
}

fn timed(n: usize, secs: f64, seed: u64) -> (cohort_medium::wifi::scenario::Saturation, f64) {
    let t = Instant::now();
    let r = edca_sat(n, Duration::from_secs_f64(secs), seed).expect("edca_sat parameters are valid");
    (r, t.elapsed().as_secs_f64())
}

/// The `edca_sat` scenario with `n` stations on 802.11a for `secs` simulated seconds.
pub fn sim(n: usize, secs: f64, seed: u64) -> SimReport {
    let (r, wall) = timed(n, secs, seed);
    let (_, wall40) = timed(40, 5.0, seed);
    SimReport {
        scenario: "edca_sat (every 4th station AC_VO, others AC_BE, 802.11a 54 Mbit/s)",
        stations: n,
        simulated_seconds: secs,
        wall_seconds: round(wall, 3),
        sim_seconds_per_wall_second: round(secs / wall.max(1e-9), 1),
        throughput_mbps: round(r.total_mbps, 2),
        be_mbps: round(r.per_ac_mbps[1], 2),
        vo_mbps: round(r.per_ac_mbps[3], 2),
        stations_40_sim_seconds_per_wall_second: round(5.0 / wall40.max(1e-9), 1),
        ns3_reference: "ns-3 3.44 (PyPI ns3==3.44.post0), edca_sat.py 5 10 a on this machine: 0.61 simulated s per wall s",
        ns3_total_mbps: 34.98,
        ns3_be_mbps: 1.26,
        ns3_vo_mbps: 33.71,
        note: "the 802.11 model driven alone by saturated sources; `cohort sim run` hosts LRT connections on it",
        command: format!("cohort bench sim --json --stations {n} --seconds {secs} --seed {seed}"),
    }
}
