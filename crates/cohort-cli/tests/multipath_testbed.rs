//! `cohort bench multipath --testbed` on real kernels (root; skipped otherwise): a tiny run of
//! every scenario and system, and of the federated start over four radios. Every run finishes,
//! Cohort and kernel MPTCP both carry bytes on both radios, a robot that shares starts every
//! radio from the team's statistics, the report has every summary figure, and no namespace is
//! left behind.
//! Behaviour only: no timing threshold.

use std::process::Command;

mod common;

#[test]
fn a_tiny_testbed_run_of_every_scenario_and_system() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("skipped: the testbed needs root (network namespaces)");
        return;
    }
    let out = Command::new(env!("CARGO_BIN_EXE_cohort"))
        .args(["bench", "multipath", "--testbed", "--no-sim", "--json", "--reps", "1"])
        .args(["--bulk-mb", "0.4", "--mobility-s", "2", "--federated-s", "5"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let r: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let tb = &r["testbed"];
    for scenario in ["static", "loss", "handoff", "mobility"] {
        for system in ["cohort", "mptcp", "path0", "path1"] {
            let s = &tb[scenario][system];
            assert_eq!((s["runs"].as_u64(), s["failed"].as_u64()), (Some(1), Some(0)), "{scenario} {system}: {s}");
            assert_eq!(s["in_order"], true, "{scenario} {system}: {s}");
            assert!(s["goodput_mbps"].as_f64().unwrap() > 0.0, "{scenario} {system}: {s}");
        }
        // Both radios carry Cohort's bytes (and kernel MPTCP's on static links: a transfer this
        // short may end before its second subflow carries anything once a radio goes out);
        // one radio alone carries all of it.
        for system in ["cohort", "mptcp"].into_iter().filter(|&s| s == "cohort" || scenario == "static") {
            let share = tb[scenario][system]["second_radio_share_of_bytes"].as_f64().unwrap();
            assert!(share > 0.0 && share < 1.0, "{scenario} {system}: {share}");
        }
        // (Stray frames of the run before, ARP, may cross the other radio.)
        assert!(tb[scenario]["path0"]["second_radio_share_of_bytes"].as_f64().unwrap() < 0.05);
        assert!(tb[scenario]["path1"]["second_radio_share_of_bytes"].as_f64().unwrap() > 0.95);
    }
    for k in [
        "loss_goodput_ratio_vs_mptcp",
        "mobility_goodput_ratio_vs_mptcp",
        "testbed_static_share_of_sum",
        "testbed_max_stall_ms",
    ] {
        assert!(r["summary"][k].as_f64().is_some_and(f64::is_finite), "{k}: {}", r["summary"]);
    }
    assert!(tb["emulator"]["outage_drops"].as_u64().unwrap() > 0, "the handoff's outages dropped frames");
    // The federated start: a cold robot and one that starts from the team's statistics.
    let f = &r["testbed"]["federated"];
    assert_eq!(f["runs"], 1, "{f}");
    let transfers = f["transfers"].as_array().unwrap();
    let starts: Vec<&str> = transfers.iter().map(|t| t["start"].as_str().unwrap()).collect();
    assert_eq!(starts, ["cold", "federated"], "{f}");
    for t in transfers {
        let rounds = t["first_rounds"].as_array().unwrap();
        assert_eq!(rounds.len(), 100, "{t}");
        common::check_super_arms(&t["first_rounds"], 2, 4);
        assert!(t["regret"].as_f64().is_some_and(|g| g.is_finite() && g >= 0.0), "{t}");
    }
    // The robot that shared joined the team and started every radio from the team's view,
    // which the training transfer had filled.
    let from = &f["federated_started_from"][0];
    assert_eq!(from["team_view"], true, "{from}");
    let keys = from["started_from"].as_array().unwrap();
    assert_eq!(keys.len(), 4, "{from}");
    assert!(keys.iter().all(|k| k["u"].as_f64().is_some_and(|u| u > 0.0)), "no radio started cold: {from}");
    assert!(f["team_view_after_training"].as_array().unwrap().iter().all(|v| v["v"].is_number()), "{f}");
    assert!(r["summary"]["testbed_federated_regret_ratio"].as_f64().is_some_and(f64::is_finite), "{}", r["summary"]);
    let ns = Command::new("ip").args(["netns", "list"]).output().unwrap();
    let ns = String::from_utf8_lossy(&ns.stdout);
    assert!(!ns.contains("cht-mp") && !ns.contains("cht-mf"), "namespaces removed: {ns}");
}
