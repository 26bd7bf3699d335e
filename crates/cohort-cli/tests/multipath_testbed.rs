//! `cohort bench multipath --testbed` on real kernels (root; skipped otherwise): a tiny run of
//! every scenario and system. Every run finishes, Cohort and kernel MPTCP both carry bytes on
//! both radios, the report has every summary figure, and no namespace is left behind.
//! Behaviour only: no timing threshold.

use std::process::Command;

#[test]
fn a_tiny_testbed_run_of_every_scenario_and_system() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("skipped: the testbed needs root (network namespaces)");
        return;
    }
    let out = Command::new(env!("CARGO_BIN_EXE_cohort"))
        .args(["bench", "multipath", "--testbed", "--no-sim", "--json", "--reps", "1"])
        .args(["--bulk-mb", "0.4", "--mobility-s", "2"])
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
    let ns = Command::new("ip").args(["netns", "list"]).output().unwrap();
    assert!(!String::from_utf8_lossy(&ns.stdout).contains("cht-mp"), "namespaces removed");
}
