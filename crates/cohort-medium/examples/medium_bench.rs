//! Validation and speed of the 802.11 model, for a quick look without the CLI:
//!
//! ```text
//! cargo run --release -p cohort-medium --example medium_bench -- [EFFORT] [SEEDS]
//! ```
//!
//! Prints every Bianchi reference case (averaged over `SEEDS` seeds, each simulated for
//! `EFFORT ×` its default duration) and the speed of the `edca_sat` scenario with 5 and 50
//! saturated stations.

use cohort_medium::wifi::bianchi::{BIANCHI_CASES, max_rel_err};
use cohort_medium::wifi::scenario::EdcaSatScenario;
use cohort_medium::wifi::{BianchiResult, Timing, bianchi_cases};

fn main() {
    let mut args = std::env::args().skip(1);
    let effort: f64 = args.next().and_then(|a| a.parse().ok()).unwrap_or(1.0);
    let seeds: u64 = args.next().and_then(|a| a.parse().ok()).unwrap_or(1);
    let runs: Vec<Vec<BianchiResult>> = (0..seeds).map(|s| bianchi_cases(effort, 7 + s)).collect();
    let mut mean: Vec<BianchiResult> = runs[0].clone();
    for (i, m) in mean.iter_mut().enumerate() {
        m.measured_mbps = runs.iter().map(|r| r[i].measured_mbps).sum::<f64>() / seeds as f64;
        m.rel_err = (m.measured_mbps - m.reference_mbps).abs() / m.reference_mbps;
    }
    println!("| PHY | n | reference Mbit/s | simulated Mbit/s | analytic Mbit/s | rel err |");
    println!("|---|---|---|---|---|---|");
    for (c, r) in BIANCHI_CASES.iter().zip(&mean) {
        println!(
            "| {} | {} | {:.4} | {:.4} | {:.4} | {:.2}% |",
            c.phy,
            c.n,
            r.reference_mbps,
            r.measured_mbps,
            r.analytic_mbps,
            100.0 * r.rel_err
        );
    }
    println!("max_rel_err {:.4} (mean of {seeds} seed(s), effort {effort})", max_rel_err(&mean));
    for c in BIANCHI_CASES.iter().filter(|c| c.n == 50) {
        let d = c.default_duration();
        let start = std::time::Instant::now();
        let mbps = c.simulate(d, 1);
        let wall = start.elapsed().as_secs_f64().max(1e-9);
        println!("DCF {} n=50 saturated: {mbps:.4} Mbit/s, {:.0} sim s per wall s", c.phy, d.as_secs_f64() / wall);
    }
    for (n, secs) in [(5, 60.0), (40, 10.0), (50, 10.0)] {
        for timing in [Timing::Bianchi, Timing::Ns3] {
            let s = EdcaSatScenario { stations: n, duration_s: secs, timing, ..EdcaSatScenario::default() };
            match s.run_timed() {
                Ok((r, sp)) => println!(
                    "edca_sat n={n:>2} timing={timing:?}: {:.2} Mbit/s (BE {:.2}, VO {:.2}), {:.0} sim s per wall s, {:.0} PPDUs per wall s",
                    r.throughput_mbps, r.be_mbps, r.vo_mbps, sp.sim_seconds_per_wall_second, sp.ppdus_per_wall_second
                ),
                Err(e) => println!("edca_sat n={n}: {e}"),
            }
        }
    }
}
