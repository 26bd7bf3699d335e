//! Coordinated robotic learning (seed 000 §II, §VI) on real kernel sockets: a reusable
//! generator that runs between any set of network namespaces (the testbed's nodes).
//!
//! **Control (MPC loop).** Every loop starts on one shared absolute schedule,
//! `t0 + k / loop_hz` on CLOCK_MONOTONIC (all nodes are threads of this process on one host, so
//! one clock measures every node). At its start each worker sends its perception to the
//! leader as UDP datagrams of at most [`FRAGMENT`] bytes; once the leader holds every fragment
//! of every worker for that loop it infers (`inference_ms`, a sleep) and sends each worker its
//! action. A loop's **reaction time** runs from its scheduled start to the last action
//! received; a loop violates when that exceeds `boundary_ms` or it never completes (a lost
//! fragment). Control is plain UDP, unmarked (DSCP 0, as ROS 2 and Zenoh send it) or marked EF
//! (`IP_TOS` 0xb8), which the emulator maps to AC_VO.
//!
//! **Training (DRLC bulk).** Plain kernel TCP, one connection per worker, a foreign bulk that
//! knows nothing of Cohort. Per epoch (BSP) the leader writes each worker's batch partition;
//! the worker reads it, trains (`train_ms`, a sleep) and writes its parameter update back; the
//! epoch ends when the leader has read every update. Training starts after `warmup_s` of
//! loops; loops count from then until the last epoch ends (or `loops_without_bh` loops when
//! there is no training). The bulk goodput is the payload of completed epochs over the time
//! from the training's start to the last completed epoch's end (seed 000 Table II, as
//! `cohort_sim::crl` counts it).
//!
//! **Bounded.** Every loop stops by itself: a hard deadline (`max_s`) ends the run, every socket
//! has a timeout, every thread polls one stop flag and is joined before [`run`] returns.

use std::collections::HashMap;
use std::io;
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4, UdpSocket};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::bulk::{bulk_connections, read_n, write_n};
use cohort_net::preempt::bulk::PermitClient;
use serde::Serialize;

/// Largest UDP payload per datagram (a 1500-byte IP packet).
pub const FRAGMENT: usize = 1472;
/// Header of every control datagram: magic, kind, worker, fragment, fragments, loop.
const HEADER: usize = 4 + 1 + 1 + 2 + 2 + 4;
const MAGIC: [u8; 4] = *b"CRL1";
const PERCEPTION: u8 = 1;
const ACTION: u8 = 2;
/// DSCP EF (46) in the IPv4 TOS byte.
pub const TOS_EF: u32 = 0xb8;
/// How often blocked threads look at the stop flag.
const POLL: Duration = Duration::from_millis(100);
/// Bulk I/O chunk.
const CHUNK: usize = 64 * 1024;

/// The workload's sizes and timing.
#[derive(Debug, Clone, Serialize)]
pub struct WorkloadParams {
    pub loop_hz: f64,
    pub boundary_ms: f64,
    pub perception_bytes: usize,
    pub action_bytes: usize,
    pub inference_ms: f64,
    /// Bytes of each worker's batch partition, and of its parameter update, per epoch.
    pub batch_bytes: usize,
    pub update_bytes: usize,
    pub train_ms: f64,
    /// Training epochs; 0: no training (`no_bh`).
    pub epochs: usize,
    /// Loops before training starts (the agents' classifiers and time models learn here);
    /// they are not counted.
    pub warmup_s: f64,
    /// Loops counted when there is no training.
    pub loops_without_bh: usize,
    /// Hard bound on the whole run (from the first loop); an epoch unfinished by then is
    /// not counted.
    pub max_s: f64,
    /// Control marked EF (AC_VO), or DSCP 0.
    pub marked: bool,
    /// Whether perceptions and actions are sent at all (off: the no-control ideal of the
    /// bulk).
    pub control: bool,
    /// SCHED_FIFO priority of the control threads (the robots' MPC runs real-time, seed 000
    /// used Preempt-RT); below the emulator's. `None`: the default scheduler.
    pub rt_priority: Option<i32>,
    pub control_port: u16,
    pub bulk_port: u16,
    /// Every bulk sender asks the coorp agent on this interface of its robot for permits
    /// (`cohort bulk`'s client) before it hands data to the kernel; `None`: plain TCP.
    pub permits_dev: Option<String>,
    /// SchedWiFi: every LS message leaves at its ST-window's start, and (with `shaper`) a
    /// Time-Aware Shaper on every robot keeps the bulk out of the windows.
    pub schedule: Option<super::schedwifi::StSchedule>,
    /// The shaper's gate: the robots' interface and the link rate it shapes to (bit/s).
    pub shaper: Option<(String, u64)>,
    /// The emulator's card file: the shapers read their robot's card (leader station 0,
    /// worker `w` station `w`) and hold as long before each block as it needs to drain.
    pub shaper_card: Option<std::path::PathBuf>,
}

impl Default for WorkloadParams {
    fn default() -> Self {
        WorkloadParams {
            loop_hz: 30.0,
            boundary_ms: 33.0,
            perception_bytes: 12 * 1024,
            action_bytes: 1024,
            inference_ms: 2.0,
            batch_bytes: 1 << 20,
            update_bytes: 4 << 20,
            train_ms: 100.0,
            epochs: 3,
            warmup_s: 1.0,
            loops_without_bh: 300,
            max_s: 60.0,
            marked: true,
            control: true,
            rt_priority: Some(30),
            control_port: 7480,
            bulk_port: 7481,
            permits_dev: None,
            schedule: None,
            shaper: None,
            shaper_card: None,
        }
    }
}

/// One robot: its network namespace and address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    pub ns: String,
    pub addr: Ipv4Addr,
}

/// Why a run failed.
#[derive(Debug, thiserror::Error)]
pub enum WorkloadError {
    #[error("invalid workload: {0}")]
    Invalid(String),
    #[error("opening sockets in {ns}: {source}")]
    Setup { ns: String, source: cohort_emu::netns::NetnsError },
    #[error("{what}: {source}")]
    Io { what: String, source: io::Error },
    #[error("a workload thread panicked ({0})")]
    Panicked(&'static str),
}

pub(crate) fn io_err(what: impl Into<String>) -> impl FnOnce(io::Error) -> WorkloadError {
    let what = what.into();
    move |source| WorkloadError::Io { what, source }
}

/// What one run measured.
#[derive(Debug, Clone, Default, Serialize)]
pub struct WorkloadOutcome {
    /// Loops counted (started in the measured span).
    pub loops: usize,
    /// Loops over the boundary or incomplete.
    pub violations: usize,
    /// Loops that never completed (a perception or action datagram lost or too late to count).
    pub incomplete: usize,
    /// Reaction time of every completed counted loop, ms, in loop order.
    pub reaction_ms: Vec<f64>,
    /// Duration of every completed epoch, s.
    pub epoch_s: Vec<f64>,
    /// Bulk payload of completed epochs and the span they took (training start to the last
    /// completed epoch's end).
    pub bh_bytes: u64,
    pub bh_seconds: f64,
    /// Epochs started but cut off by `max_s`.
    pub epochs_cut: usize,
    /// Control datagrams sent (perception fragments and actions) and received.
    pub ctl_sent: u64,
    pub ctl_received: u64,
    /// How late the workers' loop starts left, versus the schedule, p99 (ms): the host's own
    /// share of the reaction time.
    pub send_late_ms_p99: f64,
    /// Wall time of the run, s.
    pub run_s: f64,
    /// SchedWiFi's shapers: holds made, and holds more than 1 ms late, over every robot.
    pub shaper_holds: u64,
    pub shaper_late_holds: u64,
    /// Of them, holds begun earlier than the fixed lead for the card to drain.
    pub shaper_card_early_holds: u64,
}

impl WorkloadOutcome {
    pub fn violation_share(&self) -> f64 {
        self.violations as f64 / self.loops.max(1) as f64
    }

    pub fn bh_mbps(&self) -> f64 {
        if self.bh_seconds > 0.0 { self.bh_bytes as f64 * 8.0 / self.bh_seconds / 1e6 } else { 0.0 }
    }
}

fn header(kind: u8, worker: u8, frag: u16, frags: u16, k: u32) -> [u8; HEADER] {
    let mut h = [0u8; HEADER];
    h[..4].copy_from_slice(&MAGIC);
    h[4] = kind;
    h[5] = worker;
    h[6..8].copy_from_slice(&frag.to_be_bytes());
    h[8..10].copy_from_slice(&frags.to_be_bytes());
    h[10..14].copy_from_slice(&k.to_be_bytes());
    h
}

/// (kind, worker, fragment, fragments, loop) of a control datagram; `None` if it is not one.
fn parse(b: &[u8]) -> Option<(u8, u8, u16, u16, u32)> {
    if b.len() < HEADER || b[..4] != MAGIC {
        return None;
    }
    Some((
        b[4],
        b[5],
        u16::from_be_bytes([b[6], b[7]]),
        u16::from_be_bytes([b[8], b[9]]),
        u32::from_be_bytes([b[10], b[11], b[12], b[13]]),
    ))
}

/// Sends a message of `bytes` as datagrams of at most [`FRAGMENT`]; returns datagrams sent.
fn send_msg(s: &UdpSocket, to: SocketAddr, kind: u8, worker: u8, k: u32, bytes: usize, buf: &mut [u8]) -> u64 {
    let frags = bytes.max(HEADER).div_ceil(FRAGMENT);
    let mut sent = 0;
    for i in 0..frags {
        let len = if i + 1 == frags { bytes.max(HEADER) - i * FRAGMENT } else { FRAGMENT }.max(HEADER);
        buf[..HEADER].copy_from_slice(&header(kind, worker, i as u16, frags as u16, k));
        // A full socket buffer or an unreachable peer loses the datagram, as it would a
        // robot's: the loop counts as incomplete.
        if s.send_to(&buf[..len], to).is_ok() {
            sent += 1;
        }
    }
    sent
}

fn udp(ep: &Endpoint, port: u16, marked: bool) -> Result<UdpSocket, WorkloadError> {
    let addr = SocketAddrV4::new(ep.addr, port);
    cohort_emu::netns::in_netns(&ep.ns, move || {
        let s = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::DGRAM, Some(socket2::Protocol::UDP))?;
        s.set_reuse_address(true)?;
        s.set_recv_buffer_size(4 << 20)?;
        if marked {
            s.set_tos_v4(TOS_EF)?;
        }
        s.bind(&addr.into())?;
        let s: UdpSocket = s.into();
        s.set_read_timeout(Some(POLL))?;
        Ok(s)
    })
    .map_err(|source| WorkloadError::Setup { ns: ep.ns.clone(), source })
}

fn set_rt(prio: Option<i32>) {
    if let Some(p) = prio
        && let Err(e) = cohort_emu::emulator::set_fifo(p)
    {
        tracing::warn!("control thread runs without SCHED_FIFO {p}: {e}");
    }
}

fn sleep_until(t: Instant) {
    let now = Instant::now();
    if t > now {
        std::thread::sleep(t - now);
    }
}

/// Per-worker: when each loop's action arrived (index: loop).
type Arrivals = Vec<Option<Instant>>;

/// Joins every thread, also on the error paths: stops them first.
struct Threads {
    stop: Arc<AtomicBool>,
    handles: Vec<JoinHandle<()>>,
}

impl Drop for Threads {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for h in self.handles.drain(..) {
            let _ = h.join();
        }
    }
}

/// Checks the parameters: at least one worker, sizes and times that make sense.
pub fn validate(p: &WorkloadParams, workers: usize) -> Result<(), WorkloadError> {
    let bad = |m: &str| Err(WorkloadError::Invalid(m.into()));
    if workers == 0 || workers > 250 {
        return bad("1 to 250 workers");
    }
    if !(p.loop_hz.is_finite() && (1.0..=1000.0).contains(&p.loop_hz)) {
        return bad("loop_hz in [1, 1000]");
    }
    if !(p.boundary_ms > 0.0 && p.inference_ms >= 0.0 && p.train_ms >= 0.0 && p.warmup_s >= 0.0) {
        return bad("boundary_ms positive; inference_ms, train_ms, warmup_s not negative");
    }
    if !(p.max_s.is_finite() && p.max_s > p.warmup_s && p.max_s <= 3600.0) {
        return bad("max_s beyond warmup_s and at most 3600");
    }
    if p.perception_bytes > 1 << 20 || p.action_bytes > 1 << 20 {
        return bad("control messages of at most 1 MiB");
    }
    if p.epochs > 0 && (p.batch_bytes == 0 || p.update_bytes == 0) {
        return bad("training needs positive batch_bytes and update_bytes");
    }
    if p.perception_bytes.div_ceil(FRAGMENT) > u16::MAX as usize {
        return bad("too many fragments");
    }
    if let Some(sc) = &p.schedule
        && (sc.perception_at.len() != workers || sc.action_at.len() != workers)
    {
        return bad("a SchedWiFi schedule has one perception and one action window per worker");
    }
    Ok(())
}

/// Runs the workload: `leader` and `workers` are the robots' namespaces and addresses.
/// A permit client for the agent on `dev` of the robot in `ns`, opened inside its namespace
/// (abstract Unix sockets belong to one); an agent that is not there is an error here.
fn permit_client(ns: &str, dev: &str) -> Result<Option<PermitClient>, WorkloadError> {
    let name = dev.to_string();
    let c = cohort_emu::netns::in_netns(ns, move || PermitClient::open(&name, Duration::from_millis(200)))
        .map_err(|source| WorkloadError::Setup { ns: ns.to_string(), source })?;
    match c {
        Some(c) => Ok(Some(c)),
        None => Err(io_err(format!("asking the coorp agent of {ns} for permits"))(io::Error::new(
            io::ErrorKind::NotFound,
            format!("no agent on {dev}"),
        ))),
    }
}

pub fn run(leader: &Endpoint, workers: &[Endpoint], p: &WorkloadParams) -> Result<WorkloadOutcome, WorkloadError> {
    validate(p, workers.len())?;
    let n = workers.len();
    let period = Duration::from_secs_f64(1.0 / p.loop_hz);
    let leader_sock = Arc::new(udp(leader, p.control_port, p.marked)?);
    let worker_socks: Vec<Arc<UdpSocket>> =
        workers.iter().map(|w| udp(w, p.control_port, p.marked).map(Arc::new)).collect::<Result<_, _>>()?;
    let bulk = if p.epochs > 0 { bulk_connections(leader, workers, p.bulk_port)? } else { Vec::new() };

    let stop_loops = Arc::new(AtomicBool::new(false));
    let stop = Arc::new(AtomicBool::new(false));
    let mut threads = Threads { stop: stop.clone(), handles: Vec::new() };
    let t0 = Instant::now() + Duration::from_millis(200);
    let leader_at = SocketAddr::V4(SocketAddrV4::new(leader.addr, p.control_port));
    let ctl_received = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let ctl_sent = Arc::new(std::sync::atomic::AtomicU64::new(0));
    // SchedWiFi's Time-Aware Shaper on every robot, on the loops' clock.
    let mut shapers = super::schedwifi::Shapers::default();
    if let (Some(sc), Some((dev, link_bps))) = (&p.schedule, &p.shaper) {
        for (station, ep) in std::iter::once(leader).chain(workers).enumerate() {
            let card = p.shaper_card.as_deref().map(|c| (c, station));
            let h = super::schedwifi::start(
                ep,
                dev,
                *link_bps,
                sc.clone(),
                t0,
                period,
                p.rt_priority,
                card,
                shapers.stop(),
            )
            .map_err(|e| io_err("SchedWiFi shaper")(io::Error::other(e)))?;
            shapers.push(h);
        }
    }

    // Workers: a sender on the schedule, a receiver of actions.
    let (arr_tx, arr_rx) = mpsc::channel::<(usize, Arrivals)>();
    let (late_tx, late_rx) = mpsc::channel::<Vec<f64>>();
    if p.control {
        for (w, s) in worker_socks.iter().enumerate() {
            let (s, stop_loops, stop2, sent) = (s.clone(), stop_loops.clone(), stop.clone(), ctl_sent.clone());
            let (bytes, rt, late_tx) = (p.perception_bytes, p.rt_priority, late_tx.clone());
            let offset = p.schedule.as_ref().map_or(Duration::ZERO, |sc| sc.perception_at[w]);
            threads.handles.push(std::thread::spawn(move || {
                set_rt(rt);
                let mut buf = vec![0u8; FRAGMENT];
                let mut late = Vec::new();
                for k in 0u32.. {
                    let start = t0 + period * k + offset;
                    sleep_until(start);
                    if stop_loops.load(Ordering::Relaxed) || stop2.load(Ordering::Relaxed) {
                        break;
                    }
                    late.push(start.elapsed().as_secs_f64() * 1e3);
                    let m = send_msg(&s, leader_at, PERCEPTION, w as u8 + 1, k, bytes, &mut buf);
                    sent.fetch_add(m, Ordering::Relaxed);
                }
                let _ = late_tx.send(late);
            }));
            let (s, stop, rx, arr_tx) = (worker_socks[w].clone(), stop.clone(), ctl_received.clone(), arr_tx.clone());
            threads.handles.push(std::thread::spawn(move || {
                set_rt(rt);
                let mut arrivals: Arrivals = Vec::new();
                let mut buf = vec![0u8; 65_536];
                while !stop.load(Ordering::Relaxed) {
                    let Ok(len) = s.recv(&mut buf) else { continue };
                    let now = Instant::now();
                    if let Some((ACTION, _, _, _, k)) = parse(&buf[..len]) {
                        rx.fetch_add(1, Ordering::Relaxed);
                        let k = k as usize;
                        if arrivals.len() <= k {
                            arrivals.resize(k + 1, None);
                        }
                        // The action is complete with its last fragment; actions of at most
                        // one datagram (the default) complete at once.
                        arrivals[k] = Some(now);
                    }
                }
                let _ = arr_tx.send((w, arrivals));
            }));
        }
        // The leader: collects perceptions, infers, answers.
        let (s, stop, rx, sent) = (leader_sock.clone(), stop.clone(), ctl_received.clone(), ctl_sent.clone());
        let to: Vec<SocketAddr> =
            workers.iter().map(|w| SocketAddr::V4(SocketAddrV4::new(w.addr, p.control_port))).collect();
        let (action, infer, rt) = (p.action_bytes, Duration::from_secs_f64(p.inference_ms / 1e3), p.rt_priority);
        let action_at = p.schedule.as_ref().map(|sc| sc.action_at.clone());
        threads.handles.push(std::thread::spawn(move || {
            set_rt(rt);
            // Per loop: fragments held per worker.
            let mut pending: HashMap<u32, Vec<u16>> = HashMap::new();
            let mut buf = vec![0u8; 65_536];
            let mut out = vec![0u8; FRAGMENT];
            while !stop.load(Ordering::Relaxed) {
                let Ok(len) = s.recv(&mut buf) else { continue };
                let Some((PERCEPTION, w, _, frags, k)) = parse(&buf[..len]) else { continue };
                rx.fetch_add(1, Ordering::Relaxed);
                let w = usize::from(w);
                if w == 0 || w > n {
                    continue;
                }
                let got = pending.entry(k).or_insert_with(|| vec![0; n]);
                got[w - 1] += 1;
                if got.iter().all(|&g| g >= frags) {
                    pending.remove(&k);
                    // Loops older than a second will not complete in time to matter.
                    pending.retain(|&j, _| j + 30 > k);
                    std::thread::sleep(infer);
                    for (i, a) in to.iter().enumerate() {
                        // SchedWiFi: each action waits for its window.
                        if let Some(at) = &action_at {
                            sleep_until(t0 + period * k + at[i]);
                        }
                        let m = send_msg(&s, *a, ACTION, i as u8 + 1, k, action, &mut out);
                        sent.fetch_add(m, Ordering::Relaxed);
                    }
                }
            }
        }));
    }
    drop((arr_tx, late_tx));

    // Training: one thread per worker on each side, epochs driven from here.
    let train_start = t0 + Duration::from_secs_f64(p.warmup_s);
    let hard_end = t0 + Duration::from_secs_f64(p.max_s);
    let mut go_tx = Vec::new();
    let (done_tx, done_rx) = mpsc::channel::<Result<(usize, u64), String>>();
    for (w, (mut ls, mut ws)) in bulk.into_iter().enumerate() {
        let (wstop, batch, update) = (stop.clone(), p.batch_bytes, p.update_bytes);
        let (leader_permits, worker_permits) = match &p.permits_dev {
            None => (None, None),
            Some(dev) => (permit_client(&leader.ns, dev)?, permit_client(&workers[w].ns, dev)?),
        };
        let train = Duration::from_secs_f64(p.train_ms / 1e3);
        threads.handles.push(std::thread::spawn(move || {
            let mut buf = vec![0u8; CHUNK];
            let mut data = vec![0x42u8; CHUNK];
            while let Ok(true) = read_n(&mut ws, batch, &wstop, &mut buf) {
                std::thread::sleep(train);
                data[0] ^= 1;
                if !matches!(write_n(&mut ws, update, &wstop, &data, worker_permits.as_ref()), Ok(true)) {
                    break;
                }
            }
            let _ = ws.shutdown(std::net::Shutdown::Both);
        }));
        let (tx, rx) = mpsc::channel::<()>();
        go_tx.push(tx);
        let (stop, done_tx) = (stop.clone(), done_tx.clone());
        threads.handles.push(std::thread::spawn(move || {
            let mut buf = vec![0u8; CHUNK];
            let data = vec![0x17u8; CHUNK];
            while rx.recv().is_ok() {
                let r = write_n(&mut ls, batch, &stop, &data, leader_permits.as_ref())
                    .and_then(|ok| if ok { read_n(&mut ls, update, &stop, &mut buf) } else { Ok(false) });
                let msg = match r {
                    Ok(true) => Ok((w, (batch + update) as u64)),
                    Ok(false) => break,
                    Err(e) => Err(format!("bulk connection of worker {}: {e}", w + 1)),
                };
                if done_tx.send(msg).is_err() {
                    break;
                }
            }
            let _ = ls.shutdown(std::net::Shutdown::Both);
        }));
    }
    drop(done_tx);

    let mut out = WorkloadOutcome::default();
    let mut bulk_err = None;
    let loops_end = if p.epochs == 0 {
        train_start + period * p.loops_without_bh as u32
    } else {
        sleep_until(train_start);
        let mut last_end = None;
        'epochs: for _ in 0..p.epochs {
            let start = Instant::now();
            for tx in &go_tx {
                let _ = tx.send(());
            }
            let mut left = go_tx.len();
            let mut bytes = 0;
            while left > 0 {
                let now = Instant::now();
                if now >= hard_end {
                    out.epochs_cut += 1;
                    break 'epochs;
                }
                match done_rx.recv_timeout((hard_end - now).min(POLL)) {
                    Ok(Ok((_, b))) => {
                        bytes += b;
                        left -= 1;
                    }
                    Ok(Err(e)) => {
                        bulk_err = Some(e);
                        break 'epochs;
                    }
                    Err(mpsc::RecvTimeoutError::Timeout) => {}
                    Err(mpsc::RecvTimeoutError::Disconnected) => {
                        bulk_err = Some("the bulk threads ended early".into());
                        break 'epochs;
                    }
                }
            }
            let end = Instant::now();
            out.epoch_s.push((end - start).as_secs_f64());
            out.bh_bytes += bytes;
            last_end = Some(end);
        }
        if let Some(e) = last_end {
            out.bh_seconds = (e - train_start).as_secs_f64();
        }
        Instant::now().min(hard_end)
    };
    sleep_until(loops_end.min(hard_end));
    stop_loops.store(true, Ordering::Relaxed);
    // Actions of the last loops may still be under way: wait out one boundary (and a margin).
    std::thread::sleep(Duration::from_secs_f64(p.boundary_ms / 1e3) + Duration::from_millis(100));
    drop(go_tx);
    drop(threads);
    let c = shapers.finish().map_err(|e| io_err("SchedWiFi shaper")(io::Error::other(e)))?;
    out.shaper_holds = c.holds;
    out.shaper_late_holds = c.late_holds;
    out.shaper_card_early_holds = c.card_early_holds;
    if let Some(e) = bulk_err {
        return Err(WorkloadError::Io { what: "training".into(), source: io::Error::other(e) });
    }

    // Count loops started in [train_start, loops_end).
    let first = ((train_start - t0).as_secs_f64() * p.loop_hz).ceil() as usize;
    let last = ((loops_end.min(hard_end) - t0).as_secs_f64() * p.loop_hz).ceil() as usize;
    if p.control {
        let mut per_worker: Vec<Arrivals> = vec![Vec::new(); n];
        for (w, a) in arr_rx.iter() {
            per_worker[w] = a;
        }
        for k in first..last {
            let start = t0 + period * k as u32;
            let mut latest = Some(start);
            for a in &per_worker {
                latest = match (latest, a.get(k).copied().flatten()) {
                    (Some(l), Some(t)) => Some(l.max(t)),
                    _ => None,
                };
            }
            out.loops += 1;
            match latest {
                Some(t) => {
                    let ms = (t - start).as_secs_f64() * 1e3;
                    if ms > p.boundary_ms {
                        out.violations += 1;
                    }
                    out.reaction_ms.push(ms);
                }
                None => {
                    out.incomplete += 1;
                    out.violations += 1;
                }
            }
        }
        let mut late: Vec<f64> = late_rx.iter().flatten().collect();
        late.sort_by(f64::total_cmp);
        out.send_late_ms_p99 = crate::stats::round(crate::stats::quantile(&late, 0.99), 3);
    }
    out.ctl_sent = ctl_sent.load(Ordering::Relaxed);
    out.ctl_received = ctl_received.load(Ordering::Relaxed);
    out.run_s = t0.elapsed().as_secs_f64();
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_round_trip_and_strangers_are_ignored() {
        let h = header(PERCEPTION, 3, 7, 9, 123_456);
        assert_eq!(parse(&h), Some((PERCEPTION, 3, 7, 9, 123_456)));
        assert_eq!(parse(b"nope, not a control datagram"), None);
        assert_eq!(parse(&h[..HEADER - 1]), None);
    }

    #[test]
    fn bad_parameters_are_refused() {
        let p = WorkloadParams::default();
        assert!(validate(&p, 4).is_ok());
        assert!(validate(&p, 0).is_err());
        assert!(validate(&WorkloadParams { loop_hz: 0.0, ..p.clone() }, 4).is_err());
        assert!(validate(&WorkloadParams { max_s: 0.5, ..p.clone() }, 4).is_err());
        assert!(validate(&WorkloadParams { update_bytes: 0, ..p }, 4).is_err());
    }
}
