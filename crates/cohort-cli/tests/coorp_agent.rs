//! `cohort coorp agent` on real kernels (root; CI runs as root): two namespaces joined by a
//! veth pair, a plain unmarked 30 Hz control loop and a plain TCP upload from robot A. The
//! agent must mark the control loop EF in the kernel (the receiver sees the DSCP change while
//! the application still sends DSCP 0), judge the upload bulk, hold it around the control
//! messages, and leave nothing behind.

use cohort_emu::netns;
use serde_json::Value;
use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddrV4, TcpListener, TcpStream, UdpSocket};
use std::os::fd::AsRawFd;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const SECRET: &str = "coorp-agent-test-secret-0123456789";
const A: Ipv4Addr = Ipv4Addr::new(10, 96, 0, 1);
const B: Ipv4Addr = Ipv4Addr::new(10, 96, 0, 2);

/// Two namespaces and a veth pair, removed on drop.
struct Pair {
    a: String,
    b: String,
}

impl Pair {
    fn new(tag: &str) -> Pair {
        let id = std::process::id() % 100_000;
        let p = Pair { a: format!("ca{tag}{id}a"), b: format!("ca{tag}{id}b") };
        for ns in [&p.a, &p.b] {
            netns::add(ns).unwrap();
        }
        netns::ip(&["link", "add", "va", "netns", &p.a, "type", "veth", "peer", "name", "vb", "netns", &p.b]).unwrap();
        for (ns, dev, addr) in [(&p.a, "va", A), (&p.b, "vb", B)] {
            netns::ip(&["-n", ns, "addr", "add", &format!("{addr}/24"), "dev", dev]).unwrap();
            netns::ip(&["-n", ns, "link", "set", dev, "up"]).unwrap();
            netns::ip(&["-n", ns, "link", "set", "lo", "up"]).unwrap();
            netns::disable_offloads(ns, dev).unwrap();
        }
        p
    }

    fn agent(&self, extra: &[&str], status: &std::path::Path) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &self.a, env!("CARGO_BIN_EXE_cohort"), "coorp", "agent", "--dev", "va", "--id", "1"])
            .args(["--bind", &format!("{A}:7470"), "--link-mbps", "50", "--status"])
            .arg(status)
            .args(if extra.contains(&"--arbiter") { &[][..] } else { &["--arbiter", "1"][..] })
            .args(extra)
            .env("COHORT_TEAM_SECRET", SECRET)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        c
    }

    fn in_a(&self, args: &[&str]) -> String {
        let out = Command::new("ip").args(["netns", "exec", &self.a]).args(args).output().unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    }
}

impl Drop for Pair {
    fn drop(&mut self) {
        for ns in [&self.a, &self.b] {
            let _ = netns::delete(ns);
        }
    }
}

/// Receives one datagram and its TOS byte (`IP_RECVTOS`).
fn recv_tos(s: &UdpSocket, buf: &mut [u8]) -> Option<u8> {
    let mut iov = libc::iovec { iov_base: buf.as_mut_ptr().cast(), iov_len: buf.len() };
    let mut cbuf = [0u64; 8];
    // SAFETY: msghdr is plain data; zeroed is valid, and every pointer set below is ours.
    let mut m: libc::msghdr = unsafe { std::mem::zeroed() };
    m.msg_iov = &mut iov;
    m.msg_iovlen = 1;
    m.msg_control = cbuf.as_mut_ptr().cast();
    m.msg_controllen = std::mem::size_of_val(&cbuf);
    // SAFETY: receiving into buffers we own, described by `m`.
    if unsafe { libc::recvmsg(s.as_raw_fd(), &mut m, 0) } < 0 {
        return None;
    }
    // SAFETY: walking the control messages the kernel wrote into `cbuf`.
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(&m);
        while !c.is_null() {
            if (*c).cmsg_level == libc::IPPROTO_IP && (*c).cmsg_type == libc::IP_TOS {
                return Some(*libc::CMSG_DATA(c));
            }
            c = libc::CMSG_NXTHDR(&m, c);
        }
    }
    Some(0xff)
}

/// Accepts one connection on `listener` and counts the bytes it carries until it closes.
fn sink(listener: TcpListener) -> std::thread::JoinHandle<usize> {
    std::thread::spawn(move || {
        let (mut c, _) = listener.accept().unwrap();
        let mut buf = vec![0u8; 65536];
        let mut n = 0usize;
        while let Ok(k) = c.read(&mut buf) {
            if k == 0 {
                break;
            }
            n += k;
        }
        n
    })
}

fn wait_for(path: &std::path::Path, child: &mut std::process::Child) {
    let t0 = Instant::now();
    while !path.exists() {
        if let Ok(Some(st)) = child.try_wait() {
            let mut e = String::new();
            child.stderr.take().unwrap().read_to_string(&mut e).unwrap();
            panic!("the agent exited ({st}) before its status: {e}");
        }
        assert!(t0.elapsed() < Duration::from_secs(10), "no status after 10 s");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn unmarked_control_is_marked_ef_and_a_foreign_upload_is_held_around_it() {
    let pair = Pair::new("m");
    let status = std::env::temp_dir().join(format!("coorp-agent-test-{}.json", std::process::id()));
    let _ = std::fs::remove_file(&status);
    let mut agent = pair.agent(&["--mode", "local", "--duration-s", "7"], &status).spawn().unwrap();
    wait_for(&status, &mut agent);
    let (rx, listener) = netns::in_netns(&pair.b, || {
        let rx = UdpSocket::bind(SocketAddrV4::new(B, 9000))?;
        let one: libc::c_int = 1;
        // SAFETY: setting an int option on a socket we own.
        unsafe {
            libc::setsockopt(
                rx.as_raw_fd(),
                libc::IPPROTO_IP,
                libc::IP_RECVTOS,
                (&raw const one).cast(),
                std::mem::size_of::<libc::c_int>() as u32,
            )
        };
        rx.set_read_timeout(Some(Duration::from_secs(2)))?;
        Ok((rx, TcpListener::bind(SocketAddrV4::new(B, 5001))?))
    })
    .unwrap();
    let receiver = std::thread::spawn(move || {
        let mut buf = [0u8; 2048];
        std::iter::from_fn(|| recv_tos(&rx, &mut buf)).collect::<Vec<u8>>()
    });
    let sink = sink(listener);
    let (ctl, upload) = netns::in_netns(&pair.a, || {
        let u = UdpSocket::bind(SocketAddrV4::new(A, 0))?;
        Ok((u, std::net::TcpStream::connect(SocketAddrV4::new(B, 5001))?))
    })
    .unwrap();
    let uploader = std::thread::spawn(move || {
        let mut upload: TcpStream = upload;
        std::thread::sleep(Duration::from_secs(2));
        let end = Instant::now() + Duration::from_secs(3);
        let chunk = vec![7u8; 16384];
        while Instant::now() < end {
            upload.write_all(&chunk).unwrap();
        }
    });
    let t0 = Instant::now();
    let period = Duration::from_nanos(33_333_333);
    for k in 0..165u32 {
        while Instant::now() < t0 + period * k {
            std::thread::sleep(Duration::from_micros(300));
        }
        for _ in 0..9 {
            ctl.send_to(&[1u8; 1400], SocketAddrV4::new(B, 9000)).unwrap();
        }
    }
    uploader.join().unwrap();
    let tos = receiver.join().unwrap();
    assert!(sink.join().unwrap() > 0, "the upload went through");
    let out = agent.wait_with_output().unwrap();
    assert!(out.status.success(), "agent: {}", String::from_utf8_lossy(&out.stderr));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let flows = v["flows"].as_array().unwrap();
    let ctl_flow = flows.iter().find(|f| f["dst"] == format!("{B}:9000")).expect("the control flow");
    assert_eq!(ctl_flow["verdict"], "ls");
    assert_eq!(ctl_flow["marking"], "ef");
    let up = flows.iter().find(|f| f["dst"] == format!("{B}:5001")).expect("the upload");
    assert_eq!(up["marking"], "bulk");
    // The application never marks: the first datagrams arrive as sent, the last as EF.
    assert!(tos.len() > 1000, "{} datagrams", tos.len());
    assert_eq!(tos[0] >> 2, 0);
    assert!(tos[tos.len() - 100..].iter().all(|t| t >> 2 == 46), "late control is EF");
    assert!(v["stats"]["window_holds"].as_u64().unwrap() > 0, "{v}");
    assert_eq!(v["kernel_errors"], 0);
    assert!(pair.in_a(&["nft", "list", "tables"]).trim().is_empty(), "the nftables table is removed");
    assert!(!pair.in_a(&["tc", "qdisc", "show", "dev", "va"]).contains("htb"), "the gate is removed");
    let _ = std::fs::remove_file(&status);
}

#[test]
fn a_second_agent_on_the_device_and_a_short_secret_are_refused() {
    let pair = Pair::new("r");
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
    assert!(first.wait().unwrap().success());
    let _ = std::fs::remove_file(&status);
}

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
    let pair = Pair::new("k");
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
