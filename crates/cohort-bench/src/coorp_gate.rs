//! How fast the bulk gate holds and releases a foreign TCP upload (root).
//!
//! Two namespaces joined by a veth pair. Robot A runs a plain kernel TCP upload (the foreign
//! bulk: it knows nothing of Cohort) and EF-marked UDP probes every few milliseconds (its
//! latency-sensitive traffic); the gate ([`cohort_net::preempt::BulkGate`]) sits on A's
//! interface, shaped to the link rate. A controller holds the bulk once per control period for
//! a protection window, as seed 000's virtual-preemption layer would, and releases it. An
//! `AF_PACKET` socket on A's interface stamps every frame as the queue hands it to the device.
//!
//! Per cycle: **pause** = the last bulk data segment seen after the hold decision, minus the
//! decision (0 if none left); **resume** = the first bulk segment after the release decision,
//! minus that decision: the gate's reaction times at the device. Probes sent while held give the LS path's delay through
//! the gate; the bulk's goodput is reported against the share of time it was open.

use crate::stats::{quantile, round, thin};
use cohort_emu::netns;
use cohort_net::preempt::{BulkGate, GateConfig};
use serde::Serialize;
use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddrV4, TcpListener, TcpStream, UdpSocket};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

const A: Ipv4Addr = Ipv4Addr::new(10, 93, 0, 1);
const B: Ipv4Addr = Ipv4Addr::new(10, 93, 0, 2);
const BULK_PORT: u16 = 5001;
const PROBE_PORT: u16 = 5002;

/// What to run.
#[derive(Debug, Clone, Serialize)]
pub struct GateParams {
    pub cycles: usize,
    /// The control period (30 Hz: 33.3 ms) and the protection window held in each.
    pub period_ms: f64,
    pub hold_ms: f64,
    /// The link rate the gate shapes to.
    pub link_mbps: f64,
    pub probe_every_ms: f64,
    pub warmup_s: f64,
}

impl Default for GateParams {
    fn default() -> Self {
        GateParams {
            cycles: 300,
            period_ms: 100.0 / 3.0,
            hold_ms: 8.0,
            link_mbps: 50.0,
            probe_every_ms: 5.0,
            warmup_s: 1.0,
        }
    }
}

/// p50, p99 and max of a sample, and its sorted values (thinned to 200) for a CDF.
#[derive(Debug, Clone, Serialize)]
pub struct Spread {
    pub n: usize,
    pub p50: f64,
    pub p99: f64,
    pub max: f64,
    pub cdf: Vec<f64>,
}

impl Spread {
    fn of(mut v: Vec<f64>, digits: i32) -> Self {
        v.sort_by(f64::total_cmp);
        let q = |p| round(quantile(&v, p), digits);
        let max = round(v.last().copied().unwrap_or(f64::NAN), digits);
        Spread { n: v.len(), p50: q(0.5), p99: q(0.99), max, cdf: thin(&v, 200) }
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct GateReport {
    pub bench: &'static str,
    pub command: String,
    pub params: GateParams,
    /// Hold decision to the last bulk segment on the wire, ms.
    pub pause_ms: Spread,
    /// The figure: p99 of `pause_ms`.
    pub foreign_pause_ms_p99: f64,
    /// Release decision to the first bulk segment on the wire, ms.
    pub resume_ms: Spread,
    /// Cycles after whose release no bulk segment came before the next hold.
    pub no_resume: usize,
    /// The netlink round trip of a hold or release, µs.
    pub netlink_us: Spread,
    /// Bulk segments seen more than 1 ms after a hold took effect and before its release.
    pub leaked_segments: usize,
    /// One-way delay of the EF probes through the gate while held and while open, ms.
    pub probe_owd_ms_held: Spread,
    pub probe_owd_ms_open: Spread,
    /// Probes sent during the cycles that never reached B (counted at B's socket, not from
    /// the capture, which may drop frames of its own on a loaded machine).
    pub probes_lost: usize,
    /// Bulk goodput over the cycles, and with the gate open all along (the warm-up, after TCP's
    /// slow start); their ratio, against the share of each period the gate is open.
    pub bulk_mbps: f64,
    pub bulk_mbps_open: f64,
    /// Gaps between bulk segments on the wire with the gate open, µs: how the shaper paces.
    pub bulk_gap_us_open: Spread,
    pub bulk_utilization: f64,
    pub open_share: f64,
}

fn now_ns() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos() as i64)
}

/// Deletes the bench's namespaces however the run ends.
struct Namespaces([String; 2]);

impl Drop for Namespaces {
    fn drop(&mut self) {
        for ns in &self.0 {
            let _ = netns::delete(ns);
        }
    }
}

/// What left A: bulk data segments (time, payload bytes) and probes (sent, left).
#[derive(Debug, Default)]
struct Capture {
    bulk: Vec<(i64, usize)>,
    probes: Vec<(i64, i64)>,
}

fn packet_socket(ifindex: i32) -> std::io::Result<OwnedFd> {
    // SAFETY: plain socket(2); the descriptor is owned from here on.
    let fd = unsafe {
        libc::socket(libc::AF_PACKET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, (libc::ETH_P_ALL as u16).to_be() as i32)
    };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: a fresh descriptor nothing else owns.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    // SAFETY: sockaddr_ll is plain data; zeroed is valid.
    let mut at: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
    at.sll_family = libc::AF_PACKET as u16;
    at.sll_protocol = (libc::ETH_P_ALL as u16).to_be();
    at.sll_ifindex = ifindex;
    // SAFETY: binding to an address of the right size.
    if unsafe { libc::bind(fd.as_raw_fd(), (&raw const at).cast(), std::mem::size_of::<libc::sockaddr_ll>() as u32) }
        != 0
    {
        return Err(std::io::Error::last_os_error());
    }
    let tv = libc::timeval { tv_sec: 0, tv_usec: 50_000 };
    let one: libc::c_int = 1;
    // SAFETY: setting a receive timeout and kernel timestamps from values we own.
    unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_RCVTIMEO,
            (&raw const tv).cast(),
            std::mem::size_of::<libc::timeval>() as u32,
        );
        libc::setsockopt(fd.as_raw_fd(), libc::SOL_SOCKET, libc::SO_TIMESTAMPNS, (&raw const one).cast(), 4);
    }
    Ok(fd)
}

/// Records frames until `stop`: IPv4 TCP data from A to the bulk port, UDP probes.
fn capture(fd: OwnedFd, stop: Arc<AtomicBool>) -> Capture {
    let mut c = Capture::default();
    let mut buf = [0u8; 2048];
    while !stop.load(Ordering::Relaxed) {
        // The emulator's reader of `SO_TIMESTAMPNS` control messages.
        let Ok(cohort_emu::packet::Received { len, realtime_ns: Some(t) }) =
            cohort_emu::packet::recv_timestamped(fd.as_raw_fd(), &mut buf, 0)
        else {
            continue;
        };
        let t = t as i64;
        let ip = &buf[..len.min(buf.len())];
        if ip.len() < 20 || ip[0] >> 4 != 4 || ip[12..16] != A.octets() {
            continue;
        }
        let ihl = usize::from(ip[0] & 15) * 4;
        let total = usize::from(u16::from_be_bytes([ip[2], ip[3]])).min(ip.len());
        let l4 = &ip[ihl.min(total)..total];
        match ip[9] {
            6 if l4.len() >= 20 && u16::from_be_bytes([l4[2], l4[3]]) == BULK_PORT => {
                let payload = l4.len() - usize::from(l4[12] >> 4) * 4;
                if payload > 0 {
                    c.bulk.push((t, payload));
                }
            }
            17 if l4.len() >= 16 && u16::from_be_bytes([l4[2], l4[3]]) == PROBE_PORT => {
                let sent = i64::from_be_bytes(l4[8..16].try_into().unwrap_or_default());
                c.probes.push((sent, t));
            }
            _ => {}
        }
    }
    c
}

/// Keeps a hold's or release's netlink round trip, µs.
fn record(r: Result<Duration, cohort_net::preempt::GateError>, us: &mut Vec<f64>) -> Result<(), String> {
    r.map(|d| us.push(d.as_secs_f64() * 1e6)).map_err(|e| e.to_string())
}

fn io(e: impl std::fmt::Display) -> String {
    e.to_string()
}

/// Runs the bench; needs root.
pub fn run(p: &GateParams) -> Result<GateReport, String> {
    netns::require_root().map_err(io)?;
    if !(p.cycles > 0 && p.hold_ms > 0.0 && p.hold_ms < p.period_ms && p.link_mbps > 0.0 && p.probe_every_ms > 0.0) {
        return Err("cycles > 0, 0 < hold < period, link and probe interval positive".into());
    }
    let tag = std::process::id() % 100_000;
    let (na, nb) = (format!("cg{tag}a"), format!("cg{tag}b"));
    for ns in [&na, &nb] {
        if netns::exists(ns) {
            netns::delete(ns).map_err(io)?;
        }
        netns::add(ns).map_err(io)?;
    }
    let _guard = Namespaces([na.clone(), nb.clone()]);
    netns::ip(&["-n", &na, "link", "add", "vA", "type", "veth", "peer", "name", "vB", "netns", &nb]).map_err(io)?;
    for (ns, dev, addr) in [(&na, "vA", "10.93.0.1/24"), (&nb, "vB", "10.93.0.2/24")] {
        netns::ip(&["-n", ns, "addr", "add", addr, "dev", dev]).map_err(io)?;
        netns::disable_offloads(ns, dev).map_err(io)?;
        netns::ip(&["-n", ns, "link", "set", dev, "up"]).map_err(io)?;
    }

    let stop = Arc::new(AtomicBool::new(false));
    let (listener, sink) = netns::in_netns(&nb, || {
        Ok((TcpListener::bind(SocketAddrV4::new(B, BULK_PORT))?, UdpSocket::bind(SocketAddrV4::new(B, PROBE_PORT))?))
    })
    .map_err(io)?;
    // Frames are stamped as A's queue hands them to the device (`dev_queue_xmit_nit`): the
    // moment they leave the gate, whatever the receiver's softirq does later.
    let cap = netns::in_netns(&na, || {
        // SAFETY: a NUL-terminated literal.
        let ifindex = unsafe { libc::if_nametoindex(c"vA".as_ptr()) } as i32;
        packet_socket(ifindex)
    })
    .map_err(io)?;
    // The capture and B's probe socket run on after the senders stop, until what was in flight
    // has left A and arrived at B (`DRAIN`): a probe sent just before the end is not lost.
    let drained = Arc::new(AtomicBool::new(false));
    let st = drained.clone();
    let capturer = std::thread::spawn(move || capture(cap, st));
    let st = drained.clone();
    let prober_sink = std::thread::spawn(move || receive_probes(&sink, &st));
    let receiver = std::thread::spawn(move || {
        if let Ok((mut s, _)) = listener.accept() {
            let mut buf = vec![0u8; 1 << 16];
            while matches!(s.read(&mut buf), Ok(n) if n > 0) {}
        }
    });
    let link_bps = (p.link_mbps * 1e6) as u64;
    let (mut gate, upload, probe) = netns::in_netns(&na, || {
        let gate = BulkGate::install(GateConfig::new("vA", link_bps)).map_err(std::io::Error::other)?;
        let upload = TcpStream::connect(SocketAddrV4::new(B, BULK_PORT))?;
        let probe = UdpSocket::bind(SocketAddrV4::new(A, 0))?;
        socket2::SockRef::from(&probe).set_tos_v4(46 << 2)?;
        Ok((gate, upload, probe))
    })
    .map_err(io)?;
    let st = stop.clone();
    let uploader = std::thread::spawn(move || {
        let mut upload = upload;
        let chunk = vec![0x5au8; 1 << 16];
        while !st.load(Ordering::Relaxed) && upload.write_all(&chunk).is_ok() {}
        let _ = upload.shutdown(std::net::Shutdown::Both);
    });
    let st = stop.clone();
    let every = Duration::from_secs_f64(p.probe_every_ms / 1e3);
    let prober = std::thread::spawn(move || {
        let mut sent = Vec::new();
        while !st.load(Ordering::Relaxed) {
            let t = now_ns();
            if probe.send_to(&t.to_be_bytes(), SocketAddrV4::new(B, PROBE_PORT)).is_ok() {
                sent.push(t);
            }
            std::thread::sleep(every);
        }
        sent
    });

    // The first 0.3 s of the warm-up are TCP's slow start; the rest measures the open gate.
    std::thread::sleep(Duration::from_secs_f64(p.warmup_s.min(0.3)));
    let t_open = now_ns();
    std::thread::sleep(Duration::from_secs_f64((p.warmup_s - 0.3).max(0.2)));
    let (period, hold) = (Duration::from_secs_f64(p.period_ms / 1e3), Duration::from_secs_f64(p.hold_ms / 1e3));
    let mut cycles = Vec::with_capacity(p.cycles);
    let mut netlink_us = Vec::new();
    let start = std::time::Instant::now();
    let t_start = now_ns();
    let mut err = None;
    for k in 0..p.cycles {
        let hold_at = start + period * k as u32 + (period - hold);
        std::thread::sleep(hold_at.saturating_duration_since(std::time::Instant::now()));
        let t_hold = now_ns();
        if let Err(e) = record(gate.hold(), &mut netlink_us) {
            err = Some(e);
            break;
        }
        let t_ack = now_ns();
        std::thread::sleep((hold_at + hold).saturating_duration_since(std::time::Instant::now()));
        let t_release = now_ns();
        if let Err(e) = record(gate.release(), &mut netlink_us) {
            err = Some(e);
            break;
        }
        cycles.push((t_hold, t_ack, t_release));
    }
    let t_end = now_ns();
    stop.store(true, Ordering::Relaxed);
    let _ = netns::in_netns(&na, move || {
        drop(gate);
        Ok(())
    });
    let _ = (uploader.join(), receiver.join());
    let sent = prober.join().map_err(|_| "probe thread panicked".to_string())?;
    std::thread::sleep(DRAIN);
    drained.store(true, Ordering::Relaxed);
    let cap = capturer.join().map_err(|_| "capture thread panicked".to_string())?;
    let arrived = prober_sink.join().map_err(|_| "probe receiver panicked".to_string())?;
    if let Some(e) = err {
        return Err(e);
    }
    let in_span = |t: &&i64| (t_start..t_end).contains(*t);
    let lost = sent.iter().filter(in_span).count().saturating_sub(arrived.iter().filter(in_span).count());
    Ok(analyse(p, &cycles, &cap, lost, netlink_us, (t_open, t_start, t_end)))
}

/// How long the capture and B's probe socket go on after the senders stopped: far longer than
/// a probe takes to cross the link once the gate is gone.
const DRAIN: Duration = Duration::from_millis(300);

/// The send stamps of the probes B receives, until `stop`.
fn receive_probes(sink: &UdpSocket, stop: &AtomicBool) -> Vec<i64> {
    let _ = sink.set_read_timeout(Some(Duration::from_millis(50)));
    let mut got = Vec::new();
    let mut buf = [0u8; 64];
    while !stop.load(Ordering::Relaxed) {
        if let Ok(8) = sink.recv(&mut buf) {
            got.push(i64::from_be_bytes(buf[..8].try_into().unwrap_or_default()));
        }
    }
    got
}

fn analyse(
    p: &GateParams,
    cycles: &[(i64, i64, i64)],
    cap: &Capture,
    probes_lost: usize,
    netlink_us: Vec<f64>,
    (t_open, t0, t1): (i64, i64, i64),
) -> GateReport {
    let span = (t0, t1);
    let ms = |ns: i64| ns as f64 / 1e6;
    let bulk = &cap.bulk;
    let first_at = |t: i64| bulk.partition_point(|&(x, _)| x < t);
    let (mut pause, mut resume, mut leaked, mut no_resume) = (vec![], vec![], 0, 0);
    for (i, &(t_hold, t_ack, t_release)) in cycles.iter().enumerate() {
        let held = &bulk[first_at(t_hold)..first_at(t_release)];
        pause.push(held.last().map_or(0.0, |&(t, _)| ms(t - t_hold)));
        leaked += held.iter().filter(|&&(t, _)| t > t_ack + 1_000_000).count();
        let next_hold = cycles.get(i + 1).map_or(span.1, |c| c.0);
        match bulk.get(first_at(t_release)) {
            Some(&(t, _)) if t < next_hold => resume.push(ms(t - t_release)),
            _ => no_resume += 1,
        }
    }
    let held_at = |t: i64| cycles.iter().any(|&(h, _, r)| (h..r).contains(&t));
    let (mut owd_held, mut owd_open) = (vec![], vec![]);
    for &(sent, got) in cap.probes.iter().filter(|&&(s, _)| (span.0..span.1).contains(&s)) {
        if held_at(sent) { &mut owd_held } else { &mut owd_open }.push(ms(got - sent));
    }
    let mbps = |from: i64, to: i64| {
        let bytes: usize = bulk.iter().filter(|&&(t, _)| (from..to).contains(&t)).map(|&(_, b)| b).sum();
        round(bytes as f64 * 8.0 / ((to - from) as f64 / 1e9) / 1e6, 2)
    };
    let (bulk_mbps, bulk_mbps_open) = (mbps(t0, t1), mbps(t_open, t0));
    let open_bulk = &bulk[first_at(t_open)..first_at(t0)];
    let gaps: Vec<f64> = open_bulk.windows(2).map(|w| (w[1].0 - w[0].0) as f64 / 1e3).collect();
    let pause_ms = Spread::of(pause, 3);
    GateReport {
        bench: "coorp-gate",
        command: format!(
            "cohort bench coorp-gate --json --cycles {} --period-ms {} --hold-ms {} --link-mbps {}",
            p.cycles, p.period_ms, p.hold_ms, p.link_mbps
        ),
        params: p.clone(),
        foreign_pause_ms_p99: pause_ms.p99,
        pause_ms,
        resume_ms: Spread::of(resume, 3),
        no_resume,
        netlink_us: Spread::of(netlink_us, 1),
        leaked_segments: leaked,
        probes_lost,
        probe_owd_ms_held: Spread::of(owd_held, 3),
        probe_owd_ms_open: Spread::of(owd_open, 3),
        bulk_gap_us_open: Spread::of(gaps, 1),
        bulk_mbps,
        bulk_mbps_open,
        bulk_utilization: round(bulk_mbps / bulk_mbps_open, 3),
        open_share: round(1.0 - p.hold_ms / p.period_ms, 3),
    }
}
