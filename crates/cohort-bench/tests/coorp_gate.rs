//! The bulk gate on real kernels (root; CI runs as root): a plain TCP upload is held and
//! released by the gate while EF probes pass it, and nothing is left behind.

use cohort_bench::coorp_gate::{GateParams, run};

#[test]
fn a_held_upload_stops_and_resumes_and_ef_probes_pass() {
    // A long open window (192 ms) checks the behaviour, not the speed: on a loaded machine the
    // upload's process may wait tens of milliseconds for a CPU after a release, which the
    // bench measures (`resume_ms`) but a test must not depend on.
    let p = GateParams { cycles: 20, warmup_s: 0.6, period_ms: 200.0, ..GateParams::default() };
    let r = run(&p).unwrap_or_else(|e| panic!("coorp-gate: {e}"));
    assert_eq!(r.pause_ms.n, 20);
    assert_eq!(r.leaked_segments, 0, "no bulk leaves a millisecond after the hold took effect");
    assert_eq!(r.no_resume, 0, "every release lets the stalled upload go again (the kick)");
    assert!(r.bulk_mbps_open > 0.0 && r.bulk_mbps > 0.0, "{r:?}");
    assert!(r.probe_owd_ms_held.n > 0, "EF probes were sent while held");
    assert_eq!(r.probes_lost, 0, "the gate holds bulk only");
    let leftovers = std::process::Command::new("ip").args(["netns", "list"]).output().unwrap();
    let tag = format!("cg{}a", std::process::id() % 100_000);
    assert!(!String::from_utf8_lossy(&leftovers.stdout).contains(&tag), "namespaces removed");
}
