//! A tiny `cohort bench bridge` on a real testbed (root; skipped otherwise): ROS 2 nodes
//! (zenoh-ros2-sdk) across the emulated Wi-Fi team beside a TCP upload, directly over Zenoh and
//! through one `cohort bridge` per robot. Every message of the topic arrives once and in order
//! in each system, every get is answered by both followers, the upload runs, and each bridge
//! reports its counters. Behaviour only: no timing is asserted.

use cohort_bench::bridge_testbed::{BridgeParams, System, run};
use std::process::Command;

#[test]
fn ros2_nodes_talk_directly_and_through_the_bridges_with_nothing_lost() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("skipped: the testbed needs root (network namespaces)");
        return;
    }
    let sdk = Command::new("python3").args(["-c", "import zenoh_ros2_sdk"]).status();
    if !sdk.is_ok_and(|s| s.success()) {
        eprintln!("skipped: python3 cannot import zenoh_ros2_sdk");
        return;
    }
    let p = BridgeParams {
        followers: 2,
        messages: 100,
        gets: 10,
        reps: 1,
        systems: vec![System::Zenoh, System::Bridge],
        ..BridgeParams::default()
    };
    let mut steps = Vec::new();
    let r = run(&p, cohort_bench::progress::recorder(&mut steps)).unwrap_or_else(|e| panic!("bridge bench: {e}"));
    cohort_bench::progress::assert_followed_plan(&steps);
    for sys in ["zenoh", "bridge"] {
        let v = &r["systems"][sys];
        assert!(v.get("error").is_none(), "{sys}: {v}");
        let t = &v["topic"];
        assert_eq!(
            (&t["received"], &t["missing"], &t["duplicates"], &t["out_of_order"]),
            (&100.into(), &0.into(), &0.into(), &0.into()),
            "{sys}: {t}"
        );
        assert_eq!(t["delay"]["count"], 100, "{sys}");
        assert_eq!(v["get"]["complete"], 10, "{sys}: {}", v["get"]);
        assert!(v["bulk_mbps"].as_f64().is_some_and(|m| m > 0.0), "{sys}: the upload ran");
    }
    let bridges = r["runs"][0]["systems"]["bridge"]["bridges"].as_array().unwrap();
    assert_eq!(bridges.len(), 3, "one bridge per robot");
    for b in bridges {
        assert!(b.get("error").is_none(), "every bridge printed its counters: {b}");
    }
    assert!(r["summary"]["bridge"]["topic_p99_vs_zenoh"]["mean"].as_f64().is_some());
}
