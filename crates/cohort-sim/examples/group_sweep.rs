//! Sweeps or replays GCBRR simulation seeds (`cohort_sim::group`).
//!
//! ```text
//! cargo run -p cohort-sim --release --example group_sweep -- --seed 42
//! cargo run -p cohort-sim --release --example group_sweep -- --seeds 0..100000
//! ```
//!
//! A replayed seed prints its outcome (violations, counts, trace hash); a sweep prints the
//! failing seeds with their replay commands and a summary, and exits non-zero on a failure.

use cohort_sim::group::{GroupScenario, replay_command, run_group};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let value = |flag: &str| args.iter().position(|a| a == flag).and_then(|i| args.get(i + 1)).cloned();
    let sc = GroupScenario::default();
    if let Some(seed) = value("--seed") {
        let seed: u64 = seed.parse().expect("--seed takes a number");
        let o = run_group(&sc, seed);
        println!("{o:#?}");
        std::process::exit(i32::from(!o.ok()));
    }
    let range = value("--seeds").unwrap_or_else(|| "0..10000".into());
    let (a, b) = range.split_once("..").expect("--seeds A..B");
    let (a, b): (u64, u64) = (a.parse().expect("A"), b.parse().expect("B"));
    let (mut failed, mut requests, mut false_suspicions) = (0u64, 0u64, 0u64);
    for seed in a..b {
        let o = run_group(&sc, seed);
        requests += o.requests_completed;
        false_suspicions += o.false_suspicions;
        if !o.ok() {
            failed += 1;
            println!("seed {seed}: {:?}\n  replay: {}", o.violations, replay_command(seed));
        }
    }
    println!("{} seeds, {failed} failed, {requests} requests completed, {false_suspicions} false suspicions", b - a);
    std::process::exit(i32::from(failed > 0));
}
