//! `cohort demo` (the README's first command) runs every part and reports each: the simulated
//! and loopback parts always, the kernel part as root (skipped with the reason otherwise), the
//! ROS 2 part whenever Python has Zenoh and zenoh-ros2-sdk. Behaviour only: no timing asserted.

use std::process::Command;

#[test]
fn the_demo_runs_every_part_and_reports_each() {
    let out = Command::new(env!("CARGO_BIN_EXE_cohort")).args(["demo", "--json"]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let r: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    for part in [
        "coded_transfer",
        "secure_session",
        "wifi_team",
        "group_simulated",
        "group_loopback",
        "preemption",
        "agent_on_kernels",
        "two_radios",
        "ros2_through_bridges",
    ] {
        assert!(r.get(part).is_some(), "part {part} missing");
    }
    assert_eq!(r["coded_transfer"]["identical"], true);
    let sdk = Command::new("python3").args(["-c", "import zenoh, zenoh_ros2_sdk"]).status();
    if sdk.is_ok_and(|s| s.success()) {
        let ros2 = &r["ros2_through_bridges"];
        assert!(ros2.get("skipped").is_none(), "{ros2}");
        assert_eq!((&ros2["received"], &ros2["missing"], &ros2["out_of_order"]), (&200.into(), &0.into(), &0.into()));
    }
}
