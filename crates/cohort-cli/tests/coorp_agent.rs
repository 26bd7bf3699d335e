//! `cohort coorp agent` on real kernels (root; CI runs as root): two namespaces joined by a
//! veth pair, a plain unmarked 30 Hz control loop and a plain TCP upload from robot A. The
//! agent must mark the control loop EF in the kernel (the receiver sees the DSCP change while
//! the application still sends DSCP 0), judge the upload bulk, hold it around the control
//! messages, and leave nothing behind.

use cohort_bench::coorp_agent_pair::{A, B, Pair, SECRET, control_beside_upload, sink, wait_for_status};
use cohort_emu::netns;
use serde_json::Value;
use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddrV4, TcpListener, TcpStream};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn pair(tag: &str) -> Pair {
    Pair::new(tag, env!("CARGO_BIN_EXE_cohort")).unwrap()
}

fn wait_for(path: &std::path::Path, child: &mut std::process::Child) {
    wait_for_status(path, child).unwrap();
}

#[test]
fn unmarked_control_is_marked_ef_and_a_foreign_upload_is_held_around_it() {
    let pair = pair("m");
    let r = control_beside_upload(&pair, "local", 165).unwrap();
    assert!(r.upload_bytes > 0, "the upload went through");
    let flows = r.agent["flows"].as_array().unwrap();
    let ctl_flow = flows.iter().find(|f| f["dst"] == format!("{B}:9000")).expect("the control flow");
    assert_eq!(ctl_flow["verdict"], "ls");
    assert_eq!(ctl_flow["marking"], "ef");
    let up = flows.iter().find(|f| f["dst"] == format!("{B}:5001")).expect("the upload");
    assert_eq!(up["marking"], "bulk");
    // The application never marks: the first datagrams arrive as sent, the last as EF.
    assert!(r.dscp.len() > 1000, "{} datagrams", r.dscp.len());
    assert_eq!(r.dscp[0], 0);
    assert!(r.before_ef.is_some_and(|n| n > 0));
    assert!(r.dscp[r.dscp.len() - 100..].iter().all(|&d| d == 46), "late control is EF");
    assert!(r.agent["stats"]["window_holds"].as_u64().unwrap() > 0, "{}", r.agent);
    assert_eq!(r.agent["kernel_errors"], 0);
    assert!(r.cleaned_up, "the nftables table and the gate are removed");
}

#[test]
fn a_second_agent_on_the_device_and_a_short_secret_are_refused() {
    let pair = pair("r");
    let status = std::env::temp_dir().join(format!("coorp-agent-test-r{}.json", std::process::id()));
    let _ = std::fs::remove_file(&status);
    let mut first = pair.agent(&["--mode", "mark", "--duration-s", "3"], &status).spawn().unwrap();
    wait_for(&status, &mut first);
    let second = pair.agent(&["--mode", "mark", "--duration-s", "1"], &status).output().unwrap();
    assert!(!second.status.success());
    assert!(String::from_utf8_lossy(&second.stderr).contains("another agent runs on va"), "{second:?}");
    let short = pair.agent(&["--mode", "mark"], &status).env("COHORT_TEAM_SECRET", "short").output().unwrap();
    assert!(!short.status.success());
    assert!(String::from_utf8_lossy(&short.stderr).contains("team secret"), "{short:?}");
    // A card file that is none, or a station it does not hold, is refused before anything is
    // installed (the first agent still holds the device, so these fail on the card first).
    let dir = std::env::temp_dir().join(format!("coorp-agent-card-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("junk"), [0u8; 128]).unwrap();
    let _board = cohort_net::preempt::CardBoard::create(&dir.join("card"), 2).unwrap();
    // A real host's station directory in mac80211's debugfs formats, one with a garbled file.
    let (station, garbled) = (dir.join("sta"), dir.join("sta-garbled"));
    for (d, aql) in [(&station, MAC80211_AQL), (&garbled, "Q depth: unknown\n")] {
        std::fs::create_dir_all(d).unwrap();
        std::fs::write(d.join("aql"), aql).unwrap();
        std::fs::write(d.join("airtime"), "RX: 10 us\nTX: 2000 us\nWeight: 256\n").unwrap();
    }
    for (card, says) in [
        (format!("{}:0", dir.join("junk").display()), "is not a card file"),
        (format!("{}:5", dir.join("card").display()), "station 5 does not exist"),
        (format!("{}:0", dir.join("absent").display()), "No such file"),
        (format!("mac80211:{}", dir.join("absent").display()), "No such file"),
        (format!("mac80211:{}", garbled.display()), "Q depth"),
    ] {
        let out = pair.agent(&["--mode", "local", "--card", &card], &status).output().unwrap();
        assert!(!out.status.success());
        assert!(String::from_utf8_lossy(&out.stderr).contains(says), "{card}: {out:?}");
    }
    let bad = pair.agent(&["--mode", "local", "--card", "nocolon"], &status).output().unwrap();
    assert!(String::from_utf8_lossy(&bad.stderr).contains("PATH:STATION"), "{bad:?}");
    let card = format!("{}:0", dir.join("card").display());
    let unused = pair.agent(&["--mode", "global", "--card", &card], &status).output().unwrap();
    assert!(!unused.status.success());
    assert!(String::from_utf8_lossy(&unused.stderr).contains("--mode global holds none"), "{unused:?}");
    assert!(first.wait().unwrap().success());
    // The real host's card reads: 11 744 µs of AQL airtime at --link-mbps 50 is 73 400 bytes.
    let card = format!("mac80211:{}", station.display());
    let run = pair.agent(&["--mode", "local", "--card", &card, "--duration-s", "1"], &status).output().unwrap();
    assert!(run.status.success(), "{run:?}");
    let v: Value = serde_json::from_str(&std::fs::read_to_string(&status).unwrap()).unwrap();
    assert_eq!(v["card"]["pending_bytes"], 73_400, "{v}");
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_file(&status);
}

/// `aql` as mac80211 writes it (net/mac80211/debugfs_sta.c).
const MAC80211_AQL: &str = "Q depth: VO: 0 us VI: 0 us BE: 11744 us BK: 0 us\n\
                            Q limit[low/high]: VO: 5000/12000 VI: 5000/12000 BE: 5000/12000 BK: 5000/12000\n";

/// Three robots and a ground station on one bridge. The agents form the team's group; robots 2
/// and 3 upload to the ground station under the bulk token; robot 1, the coordinator and so the
/// arbiter's host, is killed. Robot 2 becomes coordinator, starts an arbiter, and both uploads
/// go on taking turns.
#[test]
fn the_arbiter_moves_to_the_next_coordinator_when_its_robot_dies() {
    let id = std::process::id() % 100_000;
    let hub = format!("cah{id}");
    let nss: Vec<String> = (0..4).map(|i| format!("cah{id}n{i}")).collect();
    struct Cleanup(Vec<String>);
    impl Drop for Cleanup {
        fn drop(&mut self) {
            for ns in &self.0 {
                let _ = netns::delete(ns);
            }
        }
    }
    let _cleanup = Cleanup(nss.iter().cloned().chain([hub.clone()]).collect());
    netns::add(&hub).unwrap();
    netns::ip(&["-n", &hub, "link", "add", "br0", "type", "bridge"]).unwrap();
    netns::ip(&["-n", &hub, "link", "set", "br0", "up"]).unwrap();
    let addr = |i: usize| Ipv4Addr::new(10, 97, 0, 1 + i as u8);
    for (i, ns) in nss.iter().enumerate() {
        netns::add(ns).unwrap();
        let port = format!("p{i}");
        netns::ip(&["link", "add", "wl0", "netns", ns, "type", "veth", "peer", "name", &port, "netns", &hub]).unwrap();
        netns::ip(&["-n", &hub, "link", "set", &port, "master", "br0", "up"]).unwrap();
        netns::ip(&["-n", ns, "addr", "add", &format!("{}/24", addr(i)), "dev", "wl0"]).unwrap();
        netns::ip(&["-n", ns, "link", "set", "wl0", "up"]).unwrap();
        netns::ip(&["-n", ns, "link", "set", "lo", "up"]).unwrap();
    }
    // Robots 1-3 are namespaces 0-2; the ground station is 3.
    let ground = addr(3);
    let listener = netns::in_netns(&nss[3], move || TcpListener::bind(SocketAddrV4::new(ground, 5001))).unwrap();
    let received = std::sync::Arc::new([(); 3].map(|_| std::sync::Mutex::new(Vec::<(Instant, usize)>::new())));
    let rx = received.clone();
    let sink = std::thread::spawn(move || {
        let mut threads = Vec::new();
        for _ in 0..2 {
            let (mut c, from) = listener.accept().unwrap();
            let robot = usize::from(match from.ip() {
                std::net::IpAddr::V4(a) => a.octets()[3],
                _ => 0,
            }) - 1;
            let rx = rx.clone();
            threads.push(std::thread::spawn(move || {
                let mut buf = vec![0u8; 65536];
                while let Ok(k) = c.read(&mut buf) {
                    if k == 0 {
                        break;
                    }
                    rx[robot].lock().unwrap().push((Instant::now(), k));
                }
            }));
        }
        for t in threads {
            t.join().unwrap();
        }
    });
    let status = |i: usize| std::env::temp_dir().join(format!("coorp-agent-move-{id}-{i}.json"));
    let mut agents: Vec<std::process::Child> = (0..3)
        .map(|i| {
            let _ = std::fs::remove_file(status(i));
            let peers: Vec<String> =
                (0..3).filter(|&j| j != i).map(|j| format!("--peer={}={}:7470", j + 1, addr(j))).collect();
            Command::new("ip")
                .args(["netns", "exec", &nss[i], env!("CARGO_BIN_EXE_cohort"), "coorp", "agent", "--dev", "wl0"])
                .args(["--id", &(i + 1).to_string(), "--bind", &format!("{}:7470", addr(i))])
                .args(peers)
                .args(["--group-broadcast", "10.97.0.255:7480", "--mode", "global", "--link-mbps", "100"])
                .args(["--timeslice-s", "0.5", "--duration-s", "14", "--status"])
                .arg(status(i))
                .env("COHORT_TEAM_SECRET", SECRET)
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    for (i, a) in agents.iter_mut().enumerate() {
        wait_for(&status(i), a);
    }
    let uploaders: Vec<_> = [1usize, 2]
        .into_iter()
        .map(|i| {
            let (me, ns) = (addr(i), nss[i].clone());
            std::thread::spawn(move || {
                let mut s = netns::in_netns(&ns, move || {
                    let s = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None)?;
                    s.bind(&SocketAddrV4::new(me, 0).into())?;
                    s.connect(&SocketAddrV4::new(ground, 5001).into())?;
                    Ok(TcpStream::from(s))
                })
                .unwrap();
                let end = Instant::now() + Duration::from_secs(11);
                let chunk = vec![3u8; 8192];
                while Instant::now() < end {
                    if s.write_all(&chunk).is_err() {
                        break;
                    }
                }
            })
        })
        .collect();
    std::thread::sleep(Duration::from_secs(3));
    let killed = Instant::now();
    agents[0].kill().unwrap();
    agents[0].wait().unwrap();
    for u in uploaders {
        u.join().unwrap();
    }
    sink.join().unwrap();
    let outs: Vec<Value> = agents
        .drain(1..)
        .map(|a| {
            let o = a.wait_with_output().unwrap();
            assert!(o.status.success(), "agent: {}", String::from_utf8_lossy(&o.stderr));
            serde_json::from_slice(&o.stdout).unwrap()
        })
        .collect();
    assert_eq!(outs[0]["stats"]["arbiter_starts"], 1, "robot 2 hosts the arbiter after robot 1 died: {}", outs[0]);
    assert_eq!(outs[1]["stats"]["arbiter_starts"], 0);
    // Both uploads move again after the take-over (fault detection 1 s plus the take-over wait).
    for r in [1, 2] {
        let late: usize =
            received[r].lock().unwrap().iter().filter(|(t, _)| *t > killed + Duration::from_secs(4)).map(|x| x.1).sum();
        assert!(late > 0, "robot {}'s upload stalled after the arbiter's robot died", r + 1);
    }
    for i in 0..3 {
        let _ = std::fs::remove_file(status(i));
    }
}

/// Robot A's agent never gets the bulk token (its arbiter is a robot that never answers), so
/// its gate holds A's bulk all along. B uploads to A: A's acknowledgements must pass the held
/// gate (only data packets of bulk flows are held) and must not be taken for a control flow.
#[test]
fn a_held_gate_passes_the_acknowledgements_of_an_upload_it_receives() {
    let pair = pair("k");
    let status = std::env::temp_dir().join(format!("coorp-agent-test-k{}.json", std::process::id()));
    let _ = std::fs::remove_file(&status);
    let silent = format!("--peer=2={B}:7471");
    let mut agent =
        pair.agent(&["--mode", "global", "--arbiter", "2", &silent, "--duration-s", "6"], &status).spawn().unwrap();
    wait_for(&status, &mut agent);
    let listener = netns::in_netns(&pair.a, || TcpListener::bind(SocketAddrV4::new(A, 5002))).unwrap();
    let sink = sink(listener);
    let mut up = netns::in_netns(&pair.b, || TcpStream::connect(SocketAddrV4::new(A, 5002))).unwrap();
    let end = Instant::now() + Duration::from_secs(3);
    let chunk = vec![5u8; 16384];
    while Instant::now() < end {
        up.write_all(&chunk).unwrap();
    }
    drop(up);
    let received = sink.join().unwrap();
    let out = agent.wait_with_output().unwrap();
    assert!(out.status.success(), "agent: {}", String::from_utf8_lossy(&out.stderr));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["token"], "idle", "{v}");
    assert!(v["held"].as_bool().unwrap(), "the gate held A's bulk throughout");
    // Held acknowledgements would stall the upload at its first window (64 KiB).
    assert!(received > 4 << 20, "the upload stalled at {received} bytes: A's gate held its acknowledgements");
    assert_eq!(v["flows"].as_array().unwrap().len(), 0, "bare acknowledgements are no flow: {v}");
    let _ = std::fs::remove_file(&status);
}

/// Robot A uploads 4 MiB over plain TCP and keeps the connection open, silent. The agent reads
/// the socket's send queue while it holds the token and gives the token back once it is empty,
/// not after the silence it would otherwise wait out (`--bulk-idle-ms`, set past the run's end
/// here). A bad `--bulk-idle-ms` is refused.
#[test]
fn the_token_goes_back_once_an_uploads_socket_has_nothing_left() {
    let pair = pair("d");
    let status = std::env::temp_dir().join(format!("coorp-agent-test-d{}.json", std::process::id()));
    let _ = std::fs::remove_file(&status);
    let bad = pair.agent(&["--mode", "global", "--bulk-idle-ms", "0"], &status).output().unwrap();
    assert!(!bad.status.success() && String::from_utf8_lossy(&bad.stderr).contains("--bulk-idle-ms 0"), "{bad:?}");
    let args = ["--mode", "global", "--bulk-idle-ms", "60000", "--timeslice-s", "60", "--duration-s", "5"];
    let mut agent = pair.agent(&args, &status).spawn().unwrap();
    wait_for(&status, &mut agent);
    let listener = netns::in_netns(&pair.b, || TcpListener::bind(SocketAddrV4::new(B, 5003))).unwrap();
    let sink = sink(listener);
    let mut up = netns::in_netns(&pair.a, || TcpStream::connect(SocketAddrV4::new(B, 5003))).unwrap();
    up.write_all(&vec![9u8; 4 << 20]).unwrap();
    let out = agent.wait_with_output().unwrap();
    drop(up);
    assert_eq!(sink.join().unwrap(), 4 << 20);
    assert!(out.status.success(), "agent: {}", String::from_utf8_lossy(&out.stderr));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    // At least once: a writer descheduled long enough for its socket to drain mid-upload gives
    // the token back then too, and asks again with its next packet.
    assert!(v["stats"]["drained_releases"].as_u64().unwrap() >= 1, "the token went back as the socket drained: {v}");
    assert_eq!(v["token"], "idle", "{v}");
    let _ = std::fs::remove_file(&status);
}

/// The user overrides the agent's verdict while it runs (`cohort coorp override`): the control
/// loop it marked EF is forced to bulk, and the receiver sees its datagrams unmarked again;
/// `auto` gives the verdict back.
#[test]
fn a_verdict_overridden_while_the_agent_runs_changes_the_marking_in_the_kernel() {
    use cohort_bench::coorp_agent_pair::{control_receiver, recv_tos};
    let pair = pair("o");
    let status = std::env::temp_dir().join(format!("coorp-agent-test-o{}.json", std::process::id()));
    let overrides = status.with_extension("overrides");
    let _ = std::fs::remove_file(&status);
    let _ = std::fs::remove_file(&overrides);
    let mut agent = pair.agent(&["--mode", "mark", "--duration-s", "8"], &status).spawn().unwrap();
    wait_for(&status, &mut agent);
    let rx = control_receiver(&pair, Duration::from_secs(1)).unwrap();
    let tx = netns::in_netns(&pair.a, || std::net::UdpSocket::bind(SocketAddrV4::new(A, 0))).unwrap();
    let receiver = std::thread::spawn(move || {
        let mut buf = [0u8; 2048];
        std::iter::from_fn(|| recv_tos(&rx, &mut buf).map(|t| (Instant::now(), t >> 2))).collect::<Vec<_>>()
    });
    let cohort = |args: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_cohort")).arg("coorp").args(args).output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    };
    let status_arg = status.to_str().unwrap().to_string();
    let t0 = Instant::now();
    let period = Duration::from_nanos(33_333_333);
    let (mut forced_at, mut auto_at) = (None, None);
    for k in 0..180u32 {
        while Instant::now() < t0 + period * k {
            std::thread::sleep(Duration::from_micros(300));
        }
        tx.send_to(&[1u8; 200], SocketAddrV4::new(B, 9000)).unwrap();
        if k == 60 {
            cohort(&["override", "--status", &status_arg, "9000", "bulk"]);
            forced_at = Some(Instant::now());
        }
        if k == 120 {
            cohort(&["override", "--status", &status_arg, "9000", "auto"]);
            auto_at = Some(Instant::now());
        }
    }
    let got = receiver.join().unwrap();
    let out = agent.wait_with_output().unwrap();
    assert!(out.status.success(), "agent: {}", String::from_utf8_lossy(&out.stderr));
    let (forced_at, auto_at) = (forced_at.unwrap(), auto_at.unwrap());
    let settle = Duration::from_millis(500);
    let dscp_in = |from: Instant, to: Instant| -> Vec<u8> {
        got.iter().filter(|(t, _)| *t > from && *t < to).map(|x| x.1).collect()
    };
    assert!(dscp_in(forced_at - settle, forced_at).iter().all(|&d| d == 46), "EF before the override");
    let forced = dscp_in(forced_at + settle, auto_at);
    assert!(!forced.is_empty() && forced.iter().all(|&d| d == 0), "unmarked while forced to bulk: {forced:?}");
    let after = dscp_in(auto_at + Duration::from_secs(1), Instant::now());
    assert!(!after.is_empty() && after.iter().all(|&d| d == 46), "EF again once back to the classifier");
    let _ = std::fs::remove_file(&status);
    let _ = std::fs::remove_file(&overrides);
}

/// `cohort bulk send` on robot A asks the agent there for permits: the file arrives whole at
/// `cohort bulk recv` on B, the transfer ran under the agent (which opened a session and asked
/// the team for the token), and the agent saw no malformed request.
#[test]
fn cohort_bulk_sends_under_the_agents_permits() {
    let pair = pair("b");
    let status = std::env::temp_dir().join(format!("coorp-agent-test-b{}.json", std::process::id()));
    let _ = std::fs::remove_file(&status);
    let dir = std::env::temp_dir().join(format!("cohort-bulk-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (src, dst) = (dir.join("model.bin"), dir.join("got.bin"));
    let data: Vec<u8> = (0..3_000_000u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 24) as u8).collect();
    std::fs::write(&src, &data).unwrap();
    let mut agent = pair.agent(&["--mode", "coorp", "--duration-s", "10"], &status).spawn().unwrap();
    wait_for(&status, &mut agent);
    let exe = env!("CARGO_BIN_EXE_cohort");
    let to = format!("{B}:5002");
    let mut recv = Command::new("ip")
        .args(["netns", "exec", &pair.b, exe, "bulk", "recv", "--listen", &to, "--out"])
        .arg(&dst)
        .args(["--timeout-s", "8"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let send = Command::new("ip")
        .args(["netns", "exec", &pair.a, exe, "bulk", "send", &to])
        .arg(&src)
        .args(["--dev", "va", "--json"])
        .output()
        .unwrap();
    assert!(send.status.success(), "send: {}", String::from_utf8_lossy(&send.stderr));
    let report: Value = serde_json::from_slice(&send.stdout).unwrap();
    assert!(recv.wait().unwrap().success());
    assert!(std::fs::read(&dst).unwrap() == data, "the file arrived altered");
    assert_eq!(report["bytes"], data.len() as u64);
    assert_eq!(report["under_agent"], true, "{report}");
    assert!(report["permits"].as_u64().unwrap() > 0);
    assert!(agent.wait().unwrap().success());
    let st: Value = serde_json::from_str(&std::fs::read_to_string(&status).unwrap()).unwrap();
    assert!(st["stats"]["bulk_sessions"].as_u64().unwrap() >= 1, "{st}");
    assert!(st["stats"]["token_requests"].as_u64().unwrap() >= 1, "{st}");
    assert_eq!(st["bulk_malformed"], 0);
    let _ = std::fs::remove_file(&status);
    let _ = std::fs::remove_dir_all(&dir);
}
