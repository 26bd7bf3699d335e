//! `cohort coorp agent` between two real kernels (root): namespaces `a` and `b` joined by a veth
//! pair, robot A's agent a real process. [`control_beside_upload`] is the scenario `cohort demo`
//! shows and the root tests check: a plain 30 Hz UDP control loop that marks nothing and a plain
//! TCP upload leave A; the receiver records each control datagram's DSCP (`IP_RECVTOS`), so it
//! sees the agent's kernel marking take effect while the application still sends DSCP 0.

use cohort_emu::netns;
use serde_json::Value;
use std::io::{self, Read, Write};
use std::net::{Ipv4Addr, SocketAddrV4, TcpListener, TcpStream, UdpSocket};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The team secret of the pair's agents.
pub const SECRET: &str = "coorp-agent-pair-secret-0123456789";
pub const A: Ipv4Addr = Ipv4Addr::new(10, 96, 0, 1);
pub const B: Ipv4Addr = Ipv4Addr::new(10, 96, 0, 2);
const CONTROL_PORT: u16 = 9000;
const UPLOAD_PORT: u16 = 5001;

fn err(what: &str) -> impl Fn(netns::NetnsError) -> String + '_ {
    move |e| format!("{what}: {e}")
}

/// Two namespaces and a veth pair (`va` in A, `vb` in B), removed on drop.
#[derive(Debug)]
pub struct Pair {
    pub a: String,
    pub b: String,
    exe: PathBuf,
}

impl Pair {
    /// Namespaces named after `tag` and this process; `exe` is the `cohort` binary.
    pub fn new(tag: &str, exe: impl Into<PathBuf>) -> Result<Pair, String> {
        netns::require_root().map_err(|e| e.to_string())?;
        let id = std::process::id() % 100_000;
        let p = Pair { a: format!("ca{tag}{id}a"), b: format!("ca{tag}{id}b"), exe: exe.into() };
        for ns in [&p.a, &p.b] {
            netns::add(ns).map_err(err("namespace"))?;
        }
        netns::ip(&["link", "add", "va", "netns", &p.a, "type", "veth", "peer", "name", "vb", "netns", &p.b])
            .map_err(err("veth"))?;
        for (ns, dev, addr) in [(&p.a, "va", A), (&p.b, "vb", B)] {
            netns::ip(&["-n", ns, "addr", "add", &format!("{addr}/24"), "dev", dev]).map_err(err("address"))?;
            netns::ip(&["-n", ns, "link", "set", dev, "up"]).map_err(err("link"))?;
            netns::ip(&["-n", ns, "link", "set", "lo", "up"]).map_err(err("loopback"))?;
            netns::disable_offloads(ns, dev).map_err(err("offloads"))?;
        }
        Ok(p)
    }

    /// `cohort coorp agent` as robot 1 in A (arbiter itself unless `extra` names one), with its
    /// status at `status`; stdout and stderr piped.
    pub fn agent(&self, extra: &[&str], status: &Path) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &self.a])
            .arg(&self.exe)
            .args(["coorp", "agent", "--dev", "va", "--id", "1"])
            .args(["--bind", &format!("{A}:7470"), "--link-mbps", "50", "--status"])
            .arg(status)
            .args(if extra.contains(&"--arbiter") { &[][..] } else { &["--arbiter", "1"][..] })
            .args(extra)
            .env("COHORT_TEAM_SECRET", SECRET)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        c
    }

    /// Runs a command in A and returns its standard output.
    pub fn in_a(&self, args: &[&str]) -> String {
        let out = Command::new("ip").args(["netns", "exec", &self.a]).args(args).output();
        out.map(|o| String::from_utf8_lossy(&o.stdout).into_owned()).unwrap_or_default()
    }
}

impl Drop for Pair {
    fn drop(&mut self) {
        for ns in [&self.a, &self.b] {
            let _ = netns::delete(ns);
        }
    }
}

/// Waits until the agent wrote its status (it is up), or fails with its stderr if it exited.
pub fn wait_for_status(path: &Path, child: &mut Child) -> Result<(), String> {
    let t0 = Instant::now();
    while !path.exists() {
        if let Ok(Some(st)) = child.try_wait() {
            let mut e = String::new();
            if let Some(mut s) = child.stderr.take() {
                let _ = s.read_to_string(&mut e);
            }
            return Err(format!("the agent exited ({st}) before its status: {}", e.trim()));
        }
        if t0.elapsed() > Duration::from_secs(10) {
            return Err("the agent wrote no status in 10 s".into());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok(())
}

/// Accepts one connection on `listener` and counts the bytes it carries until it closes.
pub fn sink(listener: TcpListener) -> std::thread::JoinHandle<usize> {
    std::thread::spawn(move || {
        let Ok((mut c, _)) = listener.accept() else { return 0 };
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

/// B's socket on the control port, reporting each datagram's TOS (`IP_RECVTOS`) to
/// [`recv_tos`], which gives up after `timeout` of silence.
pub fn control_receiver(pair: &Pair, timeout: Duration) -> Result<UdpSocket, String> {
    netns::in_netns(&pair.b, || {
        let rx = UdpSocket::bind(SocketAddrV4::new(B, CONTROL_PORT))?;
        let one: libc::c_int = 1;
        // SAFETY: setting an int option on a socket we own, with its size.
        let r = unsafe {
            libc::setsockopt(
                rx.as_raw_fd(),
                libc::IPPROTO_IP,
                libc::IP_RECVTOS,
                (&raw const one).cast(),
                std::mem::size_of::<libc::c_int>() as u32,
            )
        };
        if r < 0 {
            return Err(std::io::Error::last_os_error());
        }
        rx.set_read_timeout(Some(timeout))?;
        Ok(rx)
    })
    .map_err(err("control receiver"))
}

/// Receives one datagram and its TOS byte (`IP_RECVTOS` must be on); `None` on timeout.
pub fn recv_tos(s: &UdpSocket, buf: &mut [u8]) -> Option<u8> {
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

/// What [`control_beside_upload`] saw.
#[derive(Debug, Clone)]
pub struct PairReport {
    /// DSCP of every control datagram, in arrival order.
    pub dscp: Vec<u8>,
    /// Datagrams that arrived before the first EF one (the agent was still learning).
    pub before_ef: Option<usize>,
    pub upload_bytes: usize,
    /// The agent's last words (`cohort coorp agent`'s JSON).
    pub agent: Value,
    /// Whether A's nftables table and qdisc are gone after the agent.
    pub cleaned_up: bool,
}

/// The scenario: the agent in `mode` on A; `loops` loops of a 30 Hz control loop (nine
/// 1400-byte datagrams each, DSCP 0) from A to B, and from 2 s on a 3 s TCP upload.
pub fn control_beside_upload(pair: &Pair, mode: &str, loops: u32) -> Result<PairReport, String> {
    let status = std::env::temp_dir().join(format!("coorp-agent-pair-{}-{}.json", pair.a, mode));
    let _ = std::fs::remove_file(&status);
    let secs = format!("{}", (f64::from(loops) / 30.0 + 2.0).ceil());
    let mut agent = pair.agent(&["--mode", mode, "--duration-s", &secs], &status).spawn().map_err(|e| e.to_string())?;
    wait_for_status(&status, &mut agent)?;
    let rx = control_receiver(pair, Duration::from_secs(2))?;
    let listener =
        netns::in_netns(&pair.b, || TcpListener::bind(SocketAddrV4::new(B, UPLOAD_PORT))).map_err(err("receiver"))?;
    let receiver = std::thread::spawn(move || {
        let mut buf = [0u8; 2048];
        std::iter::from_fn(|| recv_tos(&rx, &mut buf)).collect::<Vec<u8>>()
    });
    let sink = sink(listener);
    let (ctl, upload) = netns::in_netns(&pair.a, || {
        let u = UdpSocket::bind(SocketAddrV4::new(A, 0))?;
        Ok((u, TcpStream::connect(SocketAddrV4::new(B, UPLOAD_PORT))?))
    })
    .map_err(err("sender"))?;
    let uploader = std::thread::spawn(move || {
        let mut upload: TcpStream = upload;
        std::thread::sleep(Duration::from_secs(2));
        let end = Instant::now() + Duration::from_secs(3);
        let chunk = vec![7u8; 16384];
        while Instant::now() < end {
            if upload.write_all(&chunk).is_err() {
                break;
            }
        }
    });
    let t0 = Instant::now();
    let period = Duration::from_nanos(33_333_333);
    for k in 0..loops {
        while Instant::now() < t0 + period * k {
            std::thread::sleep(Duration::from_micros(300));
        }
        for _ in 0..9 {
            ctl.send_to(&[1u8; 1400], SocketAddrV4::new(B, CONTROL_PORT)).map_err(|e| e.to_string())?;
        }
    }
    let _ = uploader.join();
    let dscp: Vec<u8> = receiver.join().map_err(|_| "receiver panicked")?.iter().map(|t| t >> 2).collect();
    let upload_bytes = sink.join().map_err(|_| "sink panicked")?;
    let out = agent.wait_with_output().map_err(|e| e.to_string())?;
    if !out.status.success() {
        return Err(format!("agent: {}", String::from_utf8_lossy(&out.stderr).trim()));
    }
    let agent: Value = serde_json::from_slice(&out.stdout).map_err(|e| format!("agent output: {e}"))?;
    let cleaned_up = pair.in_a(&["nft", "list", "tables"]).trim().is_empty()
        && !pair.in_a(&["tc", "qdisc", "show", "dev", "va"]).contains("htb");
    let _ = std::fs::remove_file(&status);
    Ok(PairReport { before_ef: dscp.iter().position(|&d| d == 46), dscp, upload_bytes, agent, cleaned_up })
}

/// What [`cohort_bulk_under_agent`] saw.
#[derive(Debug, Clone)]
pub struct BulkPairReport {
    pub bytes: u64,
    /// The receiver verified length and SHA-256.
    pub verified: bool,
    pub under_agent: bool,
    pub permits: u64,
    pub closed_permits: u64,
    /// The agent's count of bulk sessions.
    pub agent_sessions: u64,
}

/// `bytes` of Cohort's own bulk (`cohort_net::preempt::bulk`) from A to B while the agent
/// (COORP mode) runs on A: the sender asks it for permits.
pub fn cohort_bulk_under_agent(pair: &Pair, bytes: usize) -> Result<BulkPairReport, String> {
    use cohort_net::preempt::bulk::{self, BulkOptions};
    let status = std::env::temp_dir().join(format!("coorp-agent-pair-{}-bulk.json", pair.a));
    let _ = std::fs::remove_file(&status);
    let mut agent =
        pair.agent(&["--mode", "coorp", "--duration-s", "6"], &status).spawn().map_err(|e| e.to_string())?;
    wait_for_status(&status, &mut agent)?;
    let listener =
        netns::in_netns(&pair.b, || TcpListener::bind(SocketAddrV4::new(B, UPLOAD_PORT))).map_err(err("receiver"))?;
    let receiver = std::thread::spawn(move || bulk::recv(&listener, &mut std::io::sink(), Duration::from_secs(5)));
    let data: Vec<u8> = (0..bytes as u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 24) as u8).collect();
    let opts = BulkOptions { agent_dev: Some("va".into()), ..BulkOptions::default() };
    let to = std::net::SocketAddr::V4(SocketAddrV4::new(B, UPLOAD_PORT));
    let sent =
        netns::in_netns(&pair.a, || bulk::send(to, &mut &data[..], data.len() as u64, &opts).map_err(io::Error::other))
            .map_err(err("bulk sender"))?;
    let got = receiver.join().map_err(|_| "receiver panicked")?;
    let out = agent.wait_with_output().map_err(|e| e.to_string())?;
    if !out.status.success() {
        return Err(format!("agent: {}", String::from_utf8_lossy(&out.stderr).trim()));
    }
    let agent: Value = serde_json::from_slice(&out.stdout).map_err(|e| format!("agent output: {e}"))?;
    let _ = std::fs::remove_file(&status);
    Ok(BulkPairReport {
        bytes: sent.bytes,
        verified: got.is_ok_and(|r| r.bytes == bytes as u64),
        under_agent: sent.under_agent,
        permits: sent.permits,
        closed_permits: sent.closed_permits,
        agent_sessions: agent["stats"]["bulk_sessions"].as_u64().unwrap_or(0),
    })
}
