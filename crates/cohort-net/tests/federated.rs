//! Path statistics shared over the group, on loopback: a robot that ran a multipath
//! connection publishes what its scheduler learned per path; the coordinator's rounds carry
//! it to the team, and another robot starts its own connection's scheduler from it. A request
//! that carries no view is answered and counted.

use cohort_net::federated::PathStatsService;
use cohort_net::group::{GroupConfig, GroupSocket, Start};
use cohort_net::{MpLrtSocket, SocketConfig};
use cohort_proto::multipath::bandit::ArmStats;
use cohort_proto::multipath::federated::{self, PathKey};
use std::net::{IpAddr, Ipv4Addr, SocketAddr, UdpSocket};
use std::time::Duration;

const SECRET: &[u8] = b"federated test secret, 32 bytes!";
const WAIT: Duration = Duration::from_secs(10);

fn free_port() -> u16 {
    UdpSocket::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

fn group(pid: u32, pids: &[u32], port: u16) -> GroupSocket {
    let ip = Ipv4Addr::new(127, 0, 0, u8::try_from(pid).unwrap());
    let mut c = GroupConfig::new(
        SECRET,
        7,
        pid,
        SocketAddr::new(IpAddr::V4(ip), port),
        SocketAddr::new(IpAddr::V4(Ipv4Addr::new(127, 255, 255, 255)), port),
    );
    c.group.msg_t = Duration::from_millis(10);
    GroupSocket::open(c, Start::Static(pids.to_vec())).unwrap()
}

/// A multipath connection from `ips` (one path each) to a listener on `to`; `n` messages
/// delivered and acknowledged.
fn run_paths(ips: [u8; 2], to: [u8; 2], n: usize, sender_id: u32) -> (MpLrtSocket, MpLrtSocket) {
    let cfg = |id| SocketConfig::new(SECRET.to_vec(), 7, id);
    let locals: Vec<SocketAddr> = to.iter().map(|&i| SocketAddr::from(([127, 0, 0, i], 0))).collect();
    let rx = MpLrtSocket::listen(&locals, cfg(100 + sender_id), Default::default()).unwrap();
    let paths: Vec<(SocketAddr, SocketAddr)> =
        ips.iter().zip(rx.local_addrs()).map(|(&i, &peer)| (SocketAddr::from(([127, 0, 0, i], 0)), peer)).collect();
    let tx = MpLrtSocket::connect(&paths, cfg(sender_id), Default::default()).unwrap();
    rx.wait_connected(Some(WAIT)).unwrap();
    for i in 0..n {
        tx.send(&vec![(i % 251) as u8; 1000]).unwrap();
    }
    for _ in 0..n {
        rx.recv_timeout(Some(WAIT)).unwrap();
    }
    tx.flush(Some(WAIT)).unwrap();
    (tx, rx)
}

#[test]
fn a_robot_starts_its_paths_from_what_the_team_measured() {
    let port = free_port();
    let pids = [41, 42, 43];
    let services: Vec<PathStatsService> =
        pids.iter().map(|&p| PathStatsService::start(group(p, &pids, port)).unwrap()).collect();
    let keys = [PathKey::new("ap:north-5g").unwrap(), PathKey::new("ap:south-2g").unwrap()];

    // Robot 41 ran a transfer over both paths and publishes what its scheduler learned.
    let (tx, _rx) = run_paths([41, 44], [51, 52], 400, 1);
    let learned = tx.arm_stats();
    assert!(learned.iter().all(|a| a.u > 0.0), "both paths were played: {learned:?}");
    services[0].publish_socket(&tx, &keys).unwrap();
    assert_eq!(services[0].own(&keys[0]), Some(learned[0]));

    // The coordinator (41, the smallest pid) gathers every second: within two rounds robot
    // 43 has a view with both paths; nobody knows the third key.
    let deadline = std::time::Instant::now() + WAIT;
    let unknown = PathKey::new("ap:east").unwrap();
    let asked = [keys[0].clone(), unknown, keys[1].clone()];
    let got = loop {
        let got = services[2].known(&asked);
        if got[0].is_some() && got[2].is_some() || std::time::Instant::now() > deadline {
            break got;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(services[2].wait_view(WAIT));
    assert_eq!(got[1], None);
    for (g, want) in [(got[0], learned[0]), (got[2], learned[1])] {
        let g = g.expect("the team's view has the path");
        // One robot measured it: its own figures (the age weight cancels).
        assert!((g.u - want.u).abs() < 1e-9 && (g.v - want.v).abs() < 1e-9, "{g:?} vs {want:?}");
    }

    // Its new connection's scheduler starts from them instead of exploring.
    let cfg = |id| SocketConfig::new(SECRET.to_vec(), 7, id);
    let rx2 = MpLrtSocket::listen(
        &["127.0.0.53:0".parse().unwrap(), "127.0.0.54:0".parse().unwrap()],
        cfg(203),
        Default::default(),
    )
    .unwrap();
    let paths: Vec<(SocketAddr, SocketAddr)> =
        [43u8, 45].iter().zip(rx2.local_addrs()).map(|(&i, &p)| (SocketAddr::from(([127, 0, 0, i], 0)), p)).collect();
    let tx2 = MpLrtSocket::connect(&paths, cfg(3), Default::default()).unwrap();
    let started = services[2].start_paths(&tx2, &keys).unwrap();
    assert!(started.iter().all(Option::is_some));
    for (a, want) in tx2.arm_stats().iter().zip(&learned) {
        // The view's u is an age-weighted mean: equal to the robot's own up to rounding.
        assert!(a.u >= want.u - 1e-9, "started from the team's rounds: {a:?} vs {want:?}");
    }
    assert!(services[2].start_paths(&tx2, &keys[..1]).is_err(), "one key per path");

    let (coord, member) = (services[0].stats(), services[2].stats());
    assert!(coord.rounds >= 1 && coord.reports >= 2, "{coord:?}");
    assert!(member.views >= 1 && member.rounds == 0, "{member:?}");

    // A request that carries no view (another user of the group port): answered, counted.
    let before = services[2].stats().malformed;
    let replies = services[0].group().request_reply(&[43], b"hello?", Duration::from_millis(20), Some(WAIT)).unwrap();
    assert_eq!(replies.replies.len(), 1);
    assert!(federated::parse_report(&replies.replies[&43]).is_ok(), "a report of its own figures");
    assert_eq!(services[2].stats().malformed, before + 1);
    // Bad statistics are refused.
    assert!(services[0].publish(&keys[0], ArmStats { u: -1.0, v: 0.5 }).is_err());
}

#[test]
fn alone_the_robot_starts_from_its_own_measurements() {
    let port = free_port();
    let s = PathStatsService::start(group(46, &[46], port)).unwrap();
    let k = PathKey::new("link:eth1").unwrap();
    let other = PathKey::new("link:eth2").unwrap();
    s.publish(&k, ArmStats { u: 5.0, v: 0.5 }).unwrap();
    assert_eq!(s.known(&[k, other]), vec![Some(ArmStats { u: 5.0, v: 0.5 }), None]);
}
