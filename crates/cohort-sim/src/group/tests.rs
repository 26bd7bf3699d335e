//! GCBRR under random crashes, joins, leaves, loss and duplication: every invariant on every
//! seed. `cargo run -p cohort-sim --release --example group_sweep -- --seeds 0..100000` runs
//! a longer sweep.

use super::*;

fn check(sc: &GroupScenario, seeds: std::ops::Range<u64>) -> Vec<GroupOutcome> {
    seeds
        .map(|seed| {
            let o = run_group(sc, seed);
            assert!(o.ok(), "seed {seed} failed: {:#?}\nreplay: {}", o.violations, replay_command(seed));
            o
        })
        .collect()
}

#[test]
fn same_seed_same_trace_hash() {
    let sc = GroupScenario::default();
    let a = run_group(&sc, 7);
    let b = run_group(&sc, 7);
    assert_eq!(a, b);
    assert_ne!(run_group(&sc, 8).trace_hash, a.trace_hash);
    assert!(a.requests_completed > 10, "{a:?}");
}

#[test]
fn seeds_that_lost_their_whole_group_now_keep_one_member() {
    // These once crashed or withdrew every member (found by the long sweep).
    check(&GroupScenario::default(), 1799..1800);
    check(&GroupScenario::default(), 3892..3893);
}

fn sweep(range: std::ops::Range<u64>) {
    let outs = check(&GroupScenario::default(), range);
    // The faults really happen across the sweep.
    let sum = |f: fn(&GroupOutcome) -> u64| outs.iter().map(f).sum::<u64>();
    assert!(sum(|o| o.crashes) > 0 && sum(|o| o.leaves) > 0 && sum(|o| o.joins) > 0);
    assert!(sum(|o| o.coordinator_changes) > 0);
    assert!(sum(|o| o.requests_completed) > 10 * outs.len() as u64);
    assert_eq!(outs.iter().filter(|o| o.group_vanished).count(), 0);
}

#[test]
fn seeds_0_to_250() {
    sweep(0..250);
}

#[test]
fn seeds_250_to_500() {
    sweep(250..500);
}

#[test]
fn seeds_500_to_750() {
    sweep(500..750);
}

#[test]
fn seeds_750_to_1000() {
    sweep(750..1000);
}
