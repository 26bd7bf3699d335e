//! `cohort lrt send|recv` as processes, over loopback: one path and two paths.

use std::process::{Command, Stdio};
use std::time::Duration;

mod common;

fn cohort() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_cohort"));
    c.env("COHORT_TEAM_SECRET", "lrt cli test team secret");
    c
}

/// A free UDP port on `ip` (bound, read, released).
fn port(ip: &str) -> u16 {
    std::net::UdpSocket::bind((ip, 0)).unwrap().local_addr().unwrap().port()
}

fn exchange(recv_args: &[String], send_args: &[String]) -> (serde_json::Value, serde_json::Value) {
    let recv = cohort()
        .args(["lrt", "recv", "--count", "300", "--json", "--accept-timeout-s", "20"])
        .args(recv_args)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let send = cohort()
        .args(["lrt", "send", "--size", "600", "--interval-ms", "0.5", "--count", "300", "--json"])
        .args(send_args)
        .output()
        .unwrap();
    assert!(send.status.success(), "{}", String::from_utf8_lossy(&send.stderr));
    let r = recv.wait_with_output().unwrap();
    assert!(r.status.success());
    (serde_json::from_slice(&send.stdout).unwrap(), serde_json::from_slice(&r.stdout).unwrap())
}

#[test]
fn one_path_and_two_paths_deliver_in_order() {
    let p = port("127.0.0.1");
    let (_, got) = exchange(&["--listen".into(), format!("127.0.0.1:{p}")], &[format!("127.0.0.1:{p}")]);
    assert_eq!((got["messages"].as_u64(), got["in_order"].as_bool()), (Some(300), Some(true)), "{got}");
    assert_eq!(got["bytes"].as_u64(), Some(300 * 600), "{got}");
    assert!(got["goodput_mbps"].as_f64().unwrap() > 0.0 && got["max_gap_ms"].as_f64().unwrap() > 0.0, "{got}");

    let (a, b) = (port("127.0.0.1"), port("127.0.0.2"));
    let (sent, got) = exchange(
        &["--listen".into(), format!("127.0.0.1:{a}"), "--listen".into(), format!("127.0.0.2:{b}")],
        &["--path".into(), format!("127.0.0.1:0=127.0.0.1:{a}"), "--path".into(), format!("127.0.0.2:0=127.0.0.2:{b}")],
    );
    assert_eq!((got["messages"].as_u64(), got["in_order"].as_bool()), (Some(300), Some(true)), "{got}");
    let paths = sent["paths"].as_array().unwrap();
    assert_eq!(paths.len(), 2, "per-path counters: {sent}");
    assert!(paths.iter().all(|p| p["sent"].as_u64().unwrap() > 0), "{sent}");
    // Without --super-arm a round plays both paths (one only while the other is suspect).
    common::check_super_arms(&sent["first_rounds"], 2, 2);
}

#[test]
fn a_super_arm_of_one_sends_each_round_over_one_path_and_a_bad_size_is_refused() {
    let (a, b) = (port("127.0.0.1"), port("127.0.0.2"));
    let (sent, got) = exchange(
        &["--listen".into(), format!("127.0.0.1:{a}"), "--listen".into(), format!("127.0.0.2:{b}")],
        &[
            "--path".into(),
            format!("127.0.0.1:0=127.0.0.1:{a}"),
            "--path".into(),
            format!("127.0.0.2:0=127.0.0.2:{b}"),
            "--super-arm".into(),
            "1".into(),
        ],
    );
    assert_eq!((got["messages"].as_u64(), got["in_order"].as_bool()), (Some(300), Some(true)), "{got}");
    assert!(sent["first_rounds"].as_array().unwrap().len() <= 100, "{sent}");
    common::check_super_arms(&sent["first_rounds"], 1, 2);
    for (args, want) in [
        (vec!["--path", "10.0.0.1:0=10.0.0.9:1", "--super-arm", "2"], "--super-arm 2: between 1 and the 1"),
        (vec!["--path", "10.0.0.1:0=10.0.0.9:1", "--super-arm", "0"], "--super-arm 0"),
        (vec!["10.0.0.9:1", "--super-arm", "1"], "needs --path"),
    ] {
        let out = cohort().args(["lrt", "send", "--size", "100"]).args(&args).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success() && err.contains(want), "{args:?}: {err}");
    }
}

#[test]
fn the_bandwidth_estimator_carries_a_stream_and_a_bad_rate_is_a_clear_error() {
    let p = port("127.0.0.1");
    let (_, got) = exchange(
        &["--listen".into(), format!("127.0.0.1:{p}"), "--estimate-rate".into()],
        &[format!("127.0.0.1:{p}"), "--estimate-rate".into(), "--rate-mbps".into(), "50".into()],
    );
    assert_eq!((got["messages"].as_u64(), got["in_order"].as_bool()), (Some(300), Some(true)), "{got}");
    let out = cohort().args(["lrt", "send", "127.0.0.1:9", "--rate-mbps", "0", "--count", "1"]).output().unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("rate_bps must be positive"), "{out:?}");
}

/// `--duration-s` ends a long generated stream on time; the receiver gets every message sent
/// up to then, in order, and a bad duration is refused before anything connects.
#[test]
fn a_stream_for_a_fixed_time() {
    let p = port("127.0.0.1");
    let recv = cohort()
        .args(["lrt", "recv", "--json", "--accept-timeout-s", "20", "--listen", &format!("127.0.0.1:{p}")])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(300));
    let send = cohort()
        .args(["lrt", "send", &format!("127.0.0.1:{p}"), "--size", "100", "--interval-ms", "2"])
        .args(["--count", "1000000", "--duration-s", "0.5", "--json"])
        .output()
        .unwrap();
    assert!(send.status.success(), "{send:?}");
    let sent: serde_json::Value = serde_json::from_slice(&send.stdout).unwrap();
    let r = recv.wait_with_output().unwrap();
    let got: serde_json::Value = serde_json::from_slice(&r.stdout).unwrap();
    let n = sent["sent"].as_u64().unwrap();
    assert!(n > 0 && n < 1000, "{sent}");
    assert_eq!((got["messages"].as_u64(), got["in_order"].as_bool()), (Some(n), Some(true)), "{got}");
    let out = cohort().args(["lrt", "send", "127.0.0.1:9", "--size", "100", "--duration-s=-1"]).output().unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--duration-s must be"), "{out:?}");
}

#[test]
fn a_malformed_path_is_a_clear_error() {
    let out = cohort().args(["lrt", "send", "--path", "10.0.0.1:0"]).output().unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("expected LOCAL=PEER"));
}

#[test]
fn one_port_receives_several_senders_each_in_order() {
    let p = port("127.0.0.1");
    let recv = cohort()
        .args(["lrt", "recv", "--peers", "3", "--count", "200", "--json", "--accept-timeout-s", "20"])
        .args(["--listen", &format!("127.0.0.1:{p}")])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let senders: Vec<_> = (2..5)
        .map(|id| {
            cohort()
                .args(["lrt", "send", &format!("127.0.0.1:{p}"), "--size", "300", "--interval-ms", "1"])
                .args(["--count", "200", "--json", "--sender-id", &id.to_string()])
                .stdout(Stdio::null())
                .spawn()
                .unwrap()
        })
        .collect();
    for mut s in senders {
        assert!(s.wait().unwrap().success());
    }
    let out = recv.wait_with_output().unwrap();
    assert!(out.status.success());
    // One summary per sender, each from its own address, all 200 in order.
    let text = String::from_utf8_lossy(&out.stdout);
    let sums: Vec<serde_json::Value> =
        serde_json::Deserializer::from_str(&text).into_iter().collect::<Result<_, _>>().unwrap();
    assert_eq!(sums.len(), 3, "{text}");
    let mut peers: Vec<&str> = sums.iter().map(|s| s["peer"].as_str().unwrap()).collect();
    peers.sort_unstable();
    peers.dedup();
    assert_eq!(peers.len(), 3);
    assert!(sums.iter().all(|s| s["messages"] == 200 && s["in_order"] == true), "{text}");

    let bad = cohort().args(["lrt", "recv", "--peers", "0", "--listen", "127.0.0.1:9"]).output().unwrap();
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("--peers"), "{bad:?}");
}

#[test]
fn a_multipath_sender_starts_from_the_teams_path_statistics_and_hands_in_its_own() {
    use cohort_net::federated::PathStatsService;
    use cohort_net::{GroupConfig, GroupSocket, Start};
    use cohort_proto::multipath::bandit::ArmStats;
    use cohort_proto::multipath::federated::PathKey;
    let sp = port("127.0.0.1");
    let bcast = format!("127.255.255.255:{sp}");
    // A teammate that used the east access point; it coordinates the sharing group.
    let mate_addr = format!("127.0.0.31:{sp}").parse().unwrap();
    let cfg = GroupConfig::new(b"lrt cli test team secret".to_vec(), 1, 1, mate_addr, bcast.parse().unwrap());
    let mate = PathStatsService::start(GroupSocket::open(cfg, Start::Static(vec![1])).unwrap()).unwrap();
    let (east, west) = (PathKey::new("ap-east").unwrap(), PathKey::new("ap-west").unwrap());
    mate.publish(&east, ArmStats { u: 40.0, v: 0.8 }).unwrap();

    let (a, b) = (port("127.0.0.1"), port("127.0.0.2"));
    let share = ["--path-key", "ap-east", "--path-key", "ap-west", "--share-pid", "2", "--share-wait-s", "5"];
    let mut send: Vec<String> = share.iter().map(|s| s.to_string()).collect();
    send.extend(["--share-addr".into(), format!("127.0.0.32:{sp}"), "--share-broadcast".into(), bcast]);
    send.extend([
        "--path".into(),
        format!("127.0.0.1:0=127.0.0.1:{a}"),
        "--path".into(),
        format!("127.0.0.2:0=127.0.0.2:{b}"),
    ]);
    let (sent, got) =
        exchange(&["--listen".into(), format!("127.0.0.1:{a}"), "--listen".into(), format!("127.0.0.2:{b}")], &send);
    assert_eq!((got["messages"].as_u64(), got["in_order"].as_bool()), (Some(300), Some(true)), "{got}");
    let f = &sent["federated"];
    assert_eq!(f["team_view"], true, "joined and got the team's view: {sent}");
    let from = &f["started_from"];
    assert_eq!((from[0]["key"].as_str(), from[1]["key"].as_str()), (Some("ap-east"), Some("ap-west")), "{f}");
    assert!(from[0]["u"].as_f64().is_some_and(|u| u > 0.0), "the east path started from the team's: {f}");
    assert!((from[0]["v"].as_f64().unwrap() - 0.8).abs() < 1e-6, "{f}");
    assert_eq!(from[1]["cold"], true, "nobody knew the west path: {f}");
    assert_eq!(f["handed_in"], true, "{f}");
    // The robot's report reached the coordinator: the teammate now knows the west path.
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while mate.known(std::slice::from_ref(&west))[0].is_none() {
        assert!(std::time::Instant::now() < deadline, "the robot's statistics never reached the team");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn sharing_options_are_checked_before_anything_connects() {
    for (args, want) in [
        (vec!["--path", "10.0.0.1:0=10.0.0.9:1", "--path-key", "ap"], "--share-pid"),
        (vec!["--path", "10.0.0.1:0=10.0.0.9:1", "--path-key", "a", "--path-key", "b"], "2 --path-key for 1 --path"),
        (vec!["10.0.0.9:1", "--path-key", "a"], "multipath only"),
        (vec!["--path", "10.0.0.1:0=10.0.0.9:1", "--share-pid", "3"], "need a --path-key"),
        (vec!["--path", "10.0.0.1:0=10.0.0.9:1", "--share-group", "1,2"], "need a --path-key"),
    ] {
        // Checked first: a send that tried to connect would end in a connection error instead.
        let out = cohort().args(["lrt", "send", "--size", "100"]).args(&args).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success() && err.contains(want), "{args:?}: {err}");
    }
}
