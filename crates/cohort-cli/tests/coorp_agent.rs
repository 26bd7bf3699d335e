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
            .args(["--bind", &format!("{A}:7470"), "--arbiter", "1", "--link-mbps", "50", "--status"])
            .arg(status)
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
    let sink = std::thread::spawn(move || {
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
    });
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
