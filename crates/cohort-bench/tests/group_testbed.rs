//! A tiny `cohort bench group` on a real testbed (root; CI runs as root), two runs: every system
//! runs to completion over the emulated 1 Mbit/s 802.11 channel in each, and the pooled report
//! carries every figure. Behaviour only: no timing is asserted.

use cohort_bench::group::{GroupParams, run};
use serde_json::Value;

#[test]
fn every_system_completes_over_the_emulated_channel() {
    let p = GroupParams {
        sizes: vec![3],
        interactions: 10,
        polls: 5,
        join_from: vec![9],
        failovers: 1,
        reps: 2,
        zenoh: false,
        ..GroupParams::default()
    };
    let mut steps = Vec::new();
    let r = run(&p, cohort_bench::progress::recorder(&mut steps)).unwrap_or_else(|e| panic!("group bench: {e}"));
    cohort_bench::progress::assert_followed_plan(&steps);
    assert_eq!(r["runs"].as_array().map(Vec::len), Some(2), "every run's own report");
    for (k, run) in r["runs"].as_array().unwrap().iter().enumerate() {
        let c = &run["sizes"][0]["request_reply"]["gcbrr"]["latency"]["count"];
        assert_eq!(c, 10, "run {k}: every interaction completed");
    }
    let size = &r["sizes"][0];
    let rr = size["request_reply"].as_object().unwrap();
    for name in ["gcbrr", "tcp_seq", "tcp_par", "rup_seq", "rup_par"] {
        let v = &rr[name];
        assert!(v.get("error").is_none() && v.get("failed_runs").is_none(), "{name}: {v}");
        assert_eq!(v["latency"]["count"], 20, "{name}: every interaction of both runs, pooled");
    }
    let handled = serde_json::json!([10, 10, 10, 10]);
    assert_eq!(rr["gcbrr"]["handled_per_member"], handled, "each request handled once, in each run");
    assert_eq!(rr["gcbrr"]["failed_replies"], 0);
    let poll = size["polling"].as_object().unwrap();
    for name in ["gcbrr", "tcp_par", "rup_par"] {
        assert_eq!(poll[name]["received"], 10, "{name}: {}", poll[name]);
    }
    assert!(poll["uup_par"].get("error").is_none(), "{}", poll["uup_par"]);
    let join = &r["join"][0];
    assert_eq!(join["gcbrr"]["admitted"], 3);
    assert_eq!(join["tcp"]["admitted"], 3, "{}", join["tcp"]);
    assert_eq!(join["gcbrr"]["join_delay"]["count"], 6);
    let failovers = r["failover_ms"].as_array().unwrap();
    assert_eq!(failovers.len(), 2, "one crash per run: {failovers:?}");
    assert!(failovers.iter().all(|f| f.as_f64().is_some_and(|ms| ms > 0.0)), "a takeover each time: {failovers:?}");
    let s = &r["summary"];
    for k in ["throughput_ratio_vs_tcp", "throughput_ratio_vs_rup", "latency_ratio_vs_tcp", "airtime_efficiency"] {
        assert!(s[k].as_f64().is_some_and(f64::is_finite), "{k}: {s}");
    }
    assert!(s["throughput_ratio_vs_zenoh"].is_null(), "no Zenoh run, no ratio");
    assert_eq!(s["runs"], 2);
    assert!(matches!(s["goals_met"], Value::Object(_)));
}
