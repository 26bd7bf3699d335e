//! The scenarios in `scenarios/` run clean, reproducibly, under many seeds.

use cohort_sim::{Recorder, Scenario, run};
use std::path::PathBuf;

fn scenario(name: &str) -> Scenario {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../scenarios").join(name);
    Scenario::load(&p).unwrap()
}

fn check(s: &Scenario, seed: u64) -> cohort_sim::Outcome {
    let o = run(s, seed, Recorder::default());
    assert!(
        o.ok(),
        "seed {seed} failed: {:?}\nreplay: cohort sim run scenarios/{}.toml --seed {seed}",
        o.violations,
        s.name
    );
    o
}

/// With the scenario's small coders, every seed rolls coders over and acknowledges finished
/// ones at full rank; the sweep as a whole also exercises the out-of-date filter.
fn sweep_runs_every_coder_path(s: &Scenario, seeds: std::ops::Range<u64>) {
    let mut out_of_date = 0;
    for seed in seeds {
        let o = check(s, seed);
        let replay = format!("replay: cohort sim run scenarios/{}.toml --seed {seed}", s.name);
        assert!(o.flows.iter().any(|f| f.coders_opened >= 3), "seed {seed}: no coder rollover; {replay}");
        assert!(o.flows.iter().any(|f| f.full_rank_acks > 0), "seed {seed}: no full-rank ACK; {replay}");
        out_of_date += o.flows.iter().map(|f| f.out_of_date).sum::<u64>();
    }
    assert!(out_of_date > 0, "no symbol of a finished coder ever reached the filter");
}

#[test]
fn same_seed_same_trace_hash() {
    let s = scenario("lrt_p2p_lossy.toml");
    let (mut trace, mut pcap) = (vec![], vec![]);
    let a = run(&s, 1, Recorder { trace: Some(&mut trace), pcap: Some(&mut pcap) });
    let b = run(&s, 1, Recorder::default());
    assert_eq!(a.trace_hash, b.trace_hash);
    assert_eq!(a, b);
    assert_ne!(run(&s, 2, Recorder::default()).trace_hash, a.trace_hash);
    assert_eq!(&pcap[..4], &0xa1b2_3c4du32.to_le_bytes(), "nanosecond pcap");
    assert!(pcap.len() > 24 + 16 * a.packets as usize);
    assert!(a.packets_dropped_by_faults > 0, "the partition and the loss burst bit");
    let lines = String::from_utf8(trace).unwrap();
    assert!(lines.lines().count() as u64 >= a.packets);
    assert!(lines.lines().all(|l| serde_json::from_str::<serde_json::Value>(l).is_ok()), "JSON lines");
}

#[test]
fn lossy_p2p_with_partition_and_drift_across_seeds() {
    sweep_runs_every_coder_path(&scenario("lrt_p2p_lossy.toml"), 0..300);
}

#[test]
fn wifi_team_across_seeds() {
    sweep_runs_every_coder_path(&scenario("lrt_wifi_team.toml"), 0..200);
}

#[test]
fn invalid_scenarios_are_errors() {
    for bad in [
        "name='x'\nduration_s=1\nnodes=1\n[network]\nkind='p2p'\nowd_ms=1",
        "name='x'\nduration_s=1\nnodes=2\n[network]\nkind='p2p'\nowd_ms=1\nloss=2",
        "name='x'\nduration_s=1\nnodes=2\n[network]\nkind='wifi'\nphy='z'\ndata_mbps=6",
        "name='x'\nduration_s=1\nnodes=2\n[network]\nkind='p2p'\nowd_ms=1\n[[flows]]\nfrom=0\nto=0\nsize=100\ninterval_ms=1\ncount=1",
        "name='x'\nduration_s=1\nnodes=2\nbogus=3\n[network]\nkind='p2p'\nowd_ms=1",
        "name='x'\nduration_s=1\nnodes=2\n[network]\nkind='p2p'\nowd_ms=1\n[[flows]]\nfrom=0\nto=1\napp='request_reply'\nsize=100\nreply_size=2\ncount=1",
        "name='x'\nduration_s=1\nnodes=2\n[network]\nkind='p2p'\nowd_ms=1\n[[flows]]\nfrom=0\nto=1\napp='teleport'\nsize=100\ncount=1",
    ] {
        assert!(Scenario::from_toml(bad).is_err(), "{bad}");
    }
}

#[test]
fn crashes_lose_at_most_what_was_in_flight_and_restarted_flows_deliver_everything_after() {
    let s = scenario("lrt_crash.toml");
    let mut lost = 0;
    for seed in 0..100 {
        let o = run(&s, seed, Recorder::default());
        assert!(
            o.ok(),
            "seed {seed}: {:?}\nreplay: cohort sim run scenarios/lrt_crash.toml --seed {seed}",
            o.violations
        );
        lost += o.flows.iter().map(|f| f.lost_to_crashes).sum::<u64>();
        for f in &o.flows {
            assert!(f.delivered + f.lost_to_crashes == f.sent && f.duplicates == 0);
        }
    }
    assert!(lost > 0, "a crash loses what was in flight");
}
