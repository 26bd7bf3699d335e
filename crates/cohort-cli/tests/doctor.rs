//! `cohort doctor` as a process: every check is reported, with what a missing piece disables
//! and how to get it, and a missing tool is a report line, not a failure.

use std::process::Command;

#[test]
fn doctor_reports_every_check_and_how_to_fix_what_is_missing() {
    let out = Command::new(env!("CARGO_BIN_EXE_cohort")).args(["doctor", "--json"]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let checks: Vec<serde_json::Value> = serde_json::from_slice(&out.stdout).unwrap();
    let names: Vec<&str> = checks.iter().filter_map(|c| c["name"].as_str()).collect();
    for want in ["root", "network namespaces", "AF_PACKET", "cgroups", "SCHED_DEADLINE", "MPTCP", "nftables", "Rattan"]
    {
        assert!(names.contains(&want), "{want} missing from {names:?}");
    }
    for c in &checks {
        assert!(c["ok"].is_boolean(), "{c}");
        for key in ["found", "disables", "fix"] {
            assert!(c[key].as_str().is_some_and(|s| !s.is_empty()), "{key} of {c}");
        }
    }
    // A Python interpreter that does not exist makes the Python checks missing, with the reason.
    let out = Command::new(env!("CARGO_BIN_EXE_cohort"))
        .args(["doctor", "--json"])
        .env("COHORT_PYTHON", "/nonexistent/python3")
        .output()
        .unwrap();
    let checks: Vec<serde_json::Value> = serde_json::from_slice(&out.stdout).unwrap();
    let py = checks.iter().find(|c| c["name"] == "Python bindings").unwrap();
    assert_eq!(py["ok"], false);
    assert!(py["found"].as_str().unwrap().contains("/nonexistent/python3"), "{py}");
}
