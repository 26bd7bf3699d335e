//! The `edca_sat` scenario, printed the way `../shared/reference/ns3/edca_sat.py` prints
//! ns-3's run of it, for a side-by-side look (`scripts/ns3_edca_sat.sh` runs both):
//!
//! ```text
//! cargo run --release -p cohort-medium --example edca_sat -- [--scenario FILE] N SIM_SECONDS [SEEDS] [ns3|standard|bianchi] [VO_EVERY]
//! ```
//!
//! The scenario comes from `FILE` (a TOML [`EdcaSatScenario`], such as
//! `scenarios/edca_sat.toml`) or the defaults; the positional arguments override its
//! stations, duration and timing. With `SEEDS > 1` the figures are means over seeds
//! `seed..seed + SEEDS`, followed by the smallest and largest run.

use cohort_medium::wifi::Timing;
use cohort_medium::wifi::scenario::EdcaSatScenario;

fn fail(msg: &str) -> ! {
    eprintln!("edca_sat: {msg}");
    std::process::exit(2);
}

fn main() {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let mut base = EdcaSatScenario::default();
    if args.first().map(String::as_str) == Some("--scenario") {
        let path = args.get(1).cloned().unwrap_or_else(|| fail("--scenario needs a file"));
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| fail(&format!("{path}: {e}")));
        base = toml::from_str(&text).unwrap_or_else(|e| fail(&format!("{path}: {e}")));
        args.drain(..2);
    }
    let n: usize = args.first().and_then(|a| a.parse().ok()).unwrap_or(base.stations);
    let secs: f64 = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(base.duration_s);
    let seeds: u64 = args.get(2).and_then(|a| a.parse().ok()).unwrap_or(1).max(1);
    let timing = match args.get(3).map(String::as_str) {
        Some("bianchi") => Timing::Bianchi,
        Some("standard") => Timing::Standard,
        Some("ns3") => Timing::Ns3,
        _ => base.timing,
    };
    let vo_every: usize = args.get(4).and_then(|a| a.parse().ok()).unwrap_or(base.vo_every);
    let mut runs = vec![];
    let mut wall = 0.0;
    for seed in base.seed..base.seed + seeds {
        let s = EdcaSatScenario { stations: n, vo_every, duration_s: secs, seed, timing, ..base.clone() };
        let (r, speed) = s.run_timed().unwrap_or_else(|e| fail(&e.to_string()));
        runs.push([r.throughput_mbps, r.be_mbps, r.vo_mbps]);
        wall += speed.wall_s;
    }
    let k = runs.len() as f64;
    let stat = |i: usize| {
        let v = runs.iter().map(|r| r[i]);
        let (lo, hi) = v.clone().fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), x| (a.min(x), b.max(x)));
        format!("{:6.2} ({lo:.2}..{hi:.2})", v.sum::<f64>() / k)
    };
    println!(
        "cohort mean of {seeds}: thr={} be={} vo={}   [n={n} simt={secs} timing={timing:?} sim/wall={:.0}]",
        stat(0),
        stat(1),
        stat(2),
        secs * k / f64::max(wall, 1e-9),
    );
}
