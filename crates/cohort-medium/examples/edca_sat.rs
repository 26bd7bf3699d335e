//! The `edca_sat` scenario, printed the way `../shared/reference/ns3/edca_sat.py` prints
//! ns-3's run of it, for a side-by-side look:
//!
//! ```text
//! cargo run --release -p cohort-medium --example edca_sat -- N SIM_SECONDS [SEEDS] [ns3|standard|bianchi] [VO_EVERY]
//! ```
//!
//! With `SEEDS > 1` the figures are means over seeds 1..=SEEDS; the fourth argument picks
//! the [`Timing`] preset (default `ns3`).

use cohort_medium::wifi::Timing;
use cohort_medium::wifi::scenario::EdcaSatScenario;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let n: usize = args.first().and_then(|a| a.parse().ok()).unwrap_or(5);
    let secs: f64 = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(10.0);
    let seeds: u64 = args.get(2).and_then(|a| a.parse().ok()).unwrap_or(1).max(1);
    let timing = match args.get(3).map(String::as_str) {
        Some("bianchi") => Timing::Bianchi,
        Some("standard") => Timing::Standard,
        _ => Timing::Ns3,
    };
    let vo_every: usize = args.get(4).and_then(|a| a.parse().ok()).unwrap_or(4);
    let (mut thr, mut be, mut vo, mut wall) = (0.0, 0.0, 0.0, 0.0);
    for seed in 1..=seeds {
        let s = EdcaSatScenario { stations: n, vo_every, duration_s: secs, seed, timing, ..EdcaSatScenario::default() };
        match s.run_timed() {
            Ok((r, speed)) => {
                thr += r.throughput_mbps;
                be += r.be_mbps;
                vo += r.vo_mbps;
                wall += speed.wall_s;
            }
            Err(e) => {
                eprintln!("edca_sat: {e}");
                std::process::exit(2);
            }
        }
    }
    let k = seeds as f64;
    println!(
        "cohort n={n} simt={secs} seeds={seeds} timing={timing:?} wall={wall:.3}s sim/wall={:.0} thr={:.2}Mbps be={:.2} vo={:.2}",
        secs * k / wall.max(1e-9),
        thr / k,
        be / k,
        vo / k
    );
}
