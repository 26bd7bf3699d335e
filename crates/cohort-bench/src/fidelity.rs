//! `cohort bench testbed-fidelity`: what the testbed's emulator really does to packets, versus
//! what its link is configured to do.
//!
//! Two namespaces joined by one emulated point-to-point link. A sender paces timestamped UDP
//! probes (CLOCK_REALTIME, written into the payload) and the receiver takes the kernel's
//! receive timestamp of each (`SO_TIMESTAMPNS`), so the measured one-way delay contains the
//! emulator and both kernels' paths but not the receiving thread's wake-up. Phase 1 (delay,
//! jitter, loss): probes at half the link rate; each should arrive when the link model says
//! (after the probes before it have been serialized, then the one-way delay), computed from
//! the sender's own record of send times; the difference is what the emulator adds. Phase 2 (rate): probes offered above the link rate; the receiver's goodput in frame
//! bytes (what the link model counts) after a warm-up is compared with the configured rate.
//!
//! When a `rattan` binary is found (see [`crate::rattan::find`]), the same link and the same
//! probes then run through Rattan, measured by the same code, and the report compares the two
//! figure by figure (`cohort_vs_rattan`); otherwise it says why Rattan was skipped.

use crate::progress::{Plan, Step};
use crate::rattan::{self, LinkSpec, RattanLink};
use crate::stats::{mean, mean_ci95, quantile, round, thin};
use cohort_emu::cpustat::CpuTimes;
use cohort_emu::scenario::DirectionSpec;
use cohort_emu::{EmuMode, EmuOptions, Testbed, TestbedScenario};
use serde::Serialize;
use std::collections::BTreeMap;
use std::io;
use std::net::UdpSocket;
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// UDP 8 + IPv4 20 + Ethernet 14: what the link model counts on top of the payload.
pub const FRAME_OVERHEAD: usize = 42;

#[derive(Debug, Clone, Serialize)]
pub struct FidelityParams {
    pub owd_ms: f64,
    /// Link rate of phase 1 (delay and loss).
    pub link_mbps: f64,
    /// Offered load of phase 1.
    pub load_mbps: f64,
    pub loss: f64,
    /// Probes per loss window.
    pub probes: u64,
    /// Consecutive windows of `probes` probes over one link (its loss generator runs on): the
    /// loss error is the mean over windows, the delay figures pool them all.
    pub loss_windows: u32,
    pub payload: usize,
    /// Link rate and offered load of phase 2.
    pub rate_mbps: f64,
    pub rate_offered_mbps: f64,
    pub rate_seconds: f64,
    pub rate_warmup_s: f64,
    pub seed: u64,
    pub rt_priority: Option<i32>,
    /// Cohort's emulator busy-polls ([`EmuOptions::busy_poll`]).
    pub busy_poll: bool,
    /// Cohort's emulator runs on this CPU only.
    pub cpu: Option<usize>,
    /// Cohort's emulator locks its memory.
    pub lock_memory: bool,
    /// Run Rattan beside Cohort when a binary is found.
    pub rattan: bool,
    /// Repetitions; in each the emulators alternate (which goes first alternates too).
    pub reps: u32,
    /// Also measure every repetition with a CPU hog at normal priority on every core
    /// ([`crate::load`]).
    pub background_load: bool,
}

impl Default for FidelityParams {
    fn default() -> Self {
        FidelityParams {
            owd_ms: 20.0,
            link_mbps: 100.0,
            load_mbps: 50.0,
            loss: 0.05,
            probes: 100_000,
            loss_windows: 5,
            payload: 1250,
            rate_mbps: 50.0,
            rate_offered_mbps: 60.0,
            rate_seconds: 4.0,
            rate_warmup_s: 1.0,
            seed: 1,
            rt_priority: Some(50),
            busy_poll: EmuOptions::default().busy_poll,
            cpu: EmuOptions::default().cpu,
            lock_memory: EmuOptions::default().lock_memory,
            rattan: true,
            reps: 1,
            background_load: false,
        }
    }
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct EmulatorFigures {
    /// Mean of (measured − configured) one-way delay.
    pub owd_err_ms_mean: f64,
    pub owd_err_ms_p50: f64,
    pub owd_err_ms_p99: f64,
    pub owd_err_ms_p999: f64,
    pub owd_err_ms_max: f64,
    /// Spread the emulator adds: p99 − p50 of the delay error.
    pub added_jitter_p99_ms: f64,
    /// Loss over all windows.
    pub measured_loss: f64,
    /// Mean over the windows of |measured − configured| loss.
    pub loss_abs_err: f64,
    /// |measured − configured| loss of each window of `probes` probes.
    pub loss_window_abs_errs: Vec<f64>,
    pub measured_rate_mbps: f64,
    pub rate_rel_err: f64,
    pub probes_sent: u64,
    pub probes_received: u64,
    /// The emulator's own view: how late its deliveries left (µs). Cohort's emulator only.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub emulator_late_us_p50: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub emulator_late_us_p99: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub emulator_realtime: Option<bool>,
    /// The share of its CPU's time the hypervisor took while the emulator ran, as it reports.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub emulator_steal_share: Option<f64>,
    /// Share of the machine's CPU time the hypervisor took over the whole run (both phases).
    pub steal_share: f64,
    /// Share of the machine's CPU time left idle over the run (near 0 under background load).
    pub idle_share: f64,
    /// Sorted delay errors (ms), thinned to at most 2000 points, for the plot.
    pub owd_err_ms_cdf: Vec<f64>,
}

/// Rattan's run: its figures, or why there are none.
#[derive(Debug, Clone, Serialize)]
#[serde(untagged)]
pub enum PeerOutcome {
    Measured(Box<PeerFigures>),
    /// No Rattan binary here, or `--no-rattan`: how to get one.
    Skipped {
        skipped: String,
    },
    /// A Rattan binary was found but its run failed.
    Failed {
        failed: String,
    },
}

#[derive(Debug, Clone, Serialize)]
pub struct PeerFigures {
    pub binary: String,
    pub version: String,
    /// SCHED_FIFO priority Rattan was started with (the same as Cohort's emulator thread).
    pub rt_priority: Option<i32>,
    /// Rattan's bandwidth setting (IP bytes) for phase 1 and phase 2; see `crate::rattan`.
    pub rattan_bps: [u64; 2],
    #[serde(flatten)]
    pub figures: EmulatorFigures,
}

/// One figure of both emulators: errors compared by magnitude.
#[derive(Debug, Clone, Serialize)]
pub struct Versus {
    pub cohort: f64,
    pub rattan: f64,
    /// |cohort| <= |rattan|.
    pub cohort_no_worse: bool,
    /// |cohort| / |rattan| (null when Rattan's is 0).
    pub ratio: Option<f64>,
}

impl Versus {
    pub fn of(cohort: f64, rattan: f64) -> Versus {
        let (c, r) = (cohort.abs(), rattan.abs());
        Versus { cohort, rattan, cohort_no_worse: c <= r, ratio: (r > 0.0).then(|| round(c / r, 4)) }
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct CohortVsRattan {
    pub owd_err_ms_mean: Versus,
    pub added_jitter_p99_ms: Versus,
    pub loss_abs_err: Versus,
    pub rate_rel_err: Versus,
    /// Every figure's |error| no larger than Rattan's, taken literally.
    pub cohort_no_worse_on_all: bool,
    /// Standard deviation σ of the loss rate measured over one window of `probes` probes.
    pub loss_sampling_sd: f64,
    /// σ·√(2/π): the mean |loss error| of an exact Bernoulli loss generator, which both
    /// emulators are; what remains is which one drew luckier windows.
    pub loss_abs_err_expected: f64,
    /// Standard error of the difference of the two mean |loss errors| (σ·√(1 − 2/π)·√(2/K)
    /// for K windows each).
    pub loss_abs_err_diff_se: f64,
    /// Cohort's mean |loss error| exceeds Rattan's by no more than 2 standard errors: a
    /// one-sided non-inferiority test at about 98% (both draw independent Bernoulli losses;
    /// Rattan from its fixed seed 42, Cohort from `--seed`).
    pub loss_no_worse_beyond_noise: bool,
    /// Delay, jitter and rate no worse than Rattan's, and loss no worse beyond sampling noise.
    pub cohort_no_worse_on_all_beyond_noise: bool,
}

impl CohortVsRattan {
    pub fn of(c: &EmulatorFigures, r: &EmulatorFigures, p: &FidelityParams) -> CohortVsRattan {
        let v = [
            Versus::of(c.owd_err_ms_mean, r.owd_err_ms_mean),
            Versus::of(c.added_jitter_p99_ms, r.added_jitter_p99_ms),
            Versus::of(c.loss_abs_err, r.loss_abs_err),
            Versus::of(c.rate_rel_err, r.rate_rel_err),
        ];
        let all = v.iter().all(|x| x.cohort_no_worse);
        let sd = (p.loss * (1.0 - p.loss) / p.probes.max(1) as f64).sqrt();
        let windows = f64::from(p.loss_windows.max(1));
        let diff_se = sd * (1.0 - 2.0 / std::f64::consts::PI).sqrt() * (2.0 / windows).sqrt();
        let loss_ok = c.loss_abs_err - r.loss_abs_err <= 2.0 * diff_se;
        let [owd, jitter, loss, rate] = v;
        let others_ok = owd.cohort_no_worse && jitter.cohort_no_worse && rate.cohort_no_worse;
        CohortVsRattan {
            owd_err_ms_mean: owd,
            added_jitter_p99_ms: jitter,
            loss_abs_err: loss,
            rate_rel_err: rate,
            cohort_no_worse_on_all: all,
            loss_sampling_sd: round(sd, 6),
            loss_abs_err_expected: round(sd * (2.0 / std::f64::consts::PI).sqrt(), 6),
            loss_abs_err_diff_se: round(diff_se, 6),
            loss_no_worse_beyond_noise: loss_ok,
            cohort_no_worse_on_all_beyond_noise: others_ok && loss_ok,
        }
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct FidelityReport {
    pub params: FidelityParams,
    pub cohort: EmulatorFigures,
    pub rattan: PeerOutcome,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cohort_vs_rattan: Option<CohortVsRattan>,
    /// Every repetition pooled, per condition (idle; loaded with `--background-load`).
    pub summaries: Vec<ConditionSummary>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub first_loaded: Option<FirstLoaded>,
    /// Every run made, in the order made.
    pub runs: Vec<RunRecord>,
    /// Namespaces of an earlier Rattan run that died, removed before this one.
    pub rattan_namespaces_cleared: Vec<String>,
    pub goals: &'static str,
    pub command: String,
}

fn realtime_ns() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default().as_nanos() as u64
}

/// Asks for a large receive buffer (root may exceed `rmem_max`) and kernel receive timestamps.
pub fn prepare_receiver(s: &UdpSocket) -> io::Result<()> {
    let fd = s.as_raw_fd();
    let buf: libc::c_int = 32 << 20;
    let one: libc::c_int = 1;
    // SAFETY: valid option pointers and lengths on our socket.
    unsafe {
        libc::setsockopt(fd, libc::SOL_SOCKET, libc::SO_RCVBUFFORCE, (&buf as *const libc::c_int).cast(), 4);
        if libc::setsockopt(fd, libc::SOL_SOCKET, libc::SO_TIMESTAMPNS, (&one as *const libc::c_int).cast(), 4) != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    s.set_read_timeout(Some(Duration::from_millis(500)))
}

/// Receives one datagram and its kernel receive time (CLOCK_REALTIME ns).
pub fn recv_timestamped(s: &UdpSocket, buf: &mut [u8]) -> io::Result<(usize, u64)> {
    let r = cohort_emu::packet::recv_timestamped(s.as_raw_fd(), buf, 0)?;
    Ok((r.len, r.realtime_ns.unwrap_or_else(realtime_ns)))
}

/// Sends `count` probes of `payload` bytes paced at `mbps` (frame bytes), each carrying its
/// sequence number and send time; returns the send times (CLOCK_REALTIME ns) by sequence.
fn pace_probes(s: &UdpSocket, to: std::net::SocketAddr, payload: usize, mbps: f64, count: u64) -> io::Result<Vec<u64>> {
    // The sender is a measuring instrument: it must not be preempted between taking its
    // timestamp and sending (the kernel's veth path also runs in its context).
    if let Err(e) = cohort_emu::emulator::set_fifo(40) {
        eprintln!("probe sender runs without real-time priority ({e}); figures include its scheduling delays");
    }
    let gap = Duration::from_secs_f64((payload + FRAME_OVERHEAD) as f64 * 8.0 / (mbps * 1e6));
    let mut buf = vec![0u8; payload];
    let mut sent = Vec::with_capacity(count as usize);
    let start = Instant::now();
    for i in 0..count {
        let at = start + gap.mul_f64(i as f64);
        let now = Instant::now();
        if at > now {
            std::thread::sleep(at - now);
        }
        let t = realtime_ns();
        buf[..8].copy_from_slice(&i.to_be_bytes());
        buf[8..16].copy_from_slice(&t.to_be_bytes());
        // A full socket buffer is the sender's problem, not the link's: retry.
        while let Err(e) = s.send_to(&buf, to) {
            if e.kind() != io::ErrorKind::WouldBlock && e.raw_os_error() != Some(libc::ENOBUFS) {
                return Err(e);
            }
            std::thread::yield_now();
        }
        sent.push(t);
    }
    Ok(sent)
}

/// When each probe should arrive by the link model: it leaves the transmitter after those
/// before it (lost ones included: they occupied it too) and then takes the one-way delay.
fn expected_arrivals(sent: &[u64], ser_ns: u64, owd_ns: u64) -> Vec<u64> {
    let mut busy_until = 0u64;
    sent.iter()
        .map(|&t| {
            busy_until = busy_until.max(t) + ser_ns;
            busy_until + owd_ns
        })
        .collect()
}

/// (sequence, send ns, receive ns) of every probe received until the socket falls silent.
fn collect(s: UdpSocket, expect: u64) -> std::thread::JoinHandle<Vec<(u64, u64, u64)>> {
    std::thread::spawn(move || {
        let mut out = Vec::with_capacity(expect as usize);
        let mut buf = vec![0u8; 65_536];
        while let Ok((n, rx)) = recv_timestamped(&s, &mut buf) {
            if n >= 16 {
                let seq = u64::from_be_bytes(buf[..8].try_into().expect("8 bytes"));
                let tx = u64::from_be_bytes(buf[8..16].try_into().expect("8 bytes"));
                out.push((seq, tx, rx));
            }
        }
        out
    })
}

fn scenario(owd_ms: f64, rate_mbps: f64, loss: f64, seed: u64) -> TestbedScenario {
    let d = DirectionSpec { owd_ms: Some(owd_ms), rate_mbps: Some(rate_mbps), loss: Some(loss), ..Default::default() };
    TestbedScenario::pair("fidelity", seed, &[d]).expect("valid fidelity scenario")
}

type Endpoints = (UdpSocket, UdpSocket, std::net::SocketAddr);

/// Makes `b` a receiver and checks that a datagram crosses from `a` (the lossy link may drop
/// some; on Cohort's, ARP is resolved by this too) before measuring.
fn handshake(a: UdpSocket, b: UdpSocket) -> Result<Endpoints, String> {
    prepare_receiver(&b).map_err(|e| e.to_string())?;
    let to = b.local_addr().map_err(|e| e.to_string())?;
    let mut buf = [0u8; 64];
    for _ in 0..50 {
        a.send_to(b"hello", to).map_err(|e| e.to_string())?;
        if b.recv_from(&mut buf).is_ok() {
            return Ok((a, b, to));
        }
    }
    Err("no datagram crossed the emulated link in 50 tries".into())
}

fn endpoints(tb: &Testbed) -> Result<Endpoints, String> {
    let err = |e: cohort_emu::TestbedError| e.to_string();
    let (a_ip, b_ip) = (tb.addr("a", 0).map_err(err)?, tb.addr("b", 0).map_err(err)?);
    let a = tb.in_node("a", move || UdpSocket::bind((a_ip, 0))).map_err(err)?;
    let b = tb.in_node("b", move || UdpSocket::bind((b_ip, 0))).map_err(err)?;
    handshake(a, b)
}

/// Phase 1 over a link that is up: `loss_windows` windows of probes at `load_mbps`, one after
/// the other, errors against the link model.
fn measure_delay_loss(p: &FidelityParams, (a, b, to): Endpoints, f: &mut EmulatorFigures) -> Result<(), String> {
    let ser_ns = ((p.payload + FRAME_OVERHEAD) as f64 * 8.0 / (p.link_mbps * 1e6) * 1e9) as u64;
    let mut err = Vec::with_capacity((p.probes * u64::from(p.loss_windows)) as usize);
    f.loss_window_abs_errs.clear();
    f.probes_received = 0;
    for _ in 0..p.loss_windows.max(1) {
        // The collector returns once the socket has been silent for its read timeout, so a
        // window's stragglers are in before the next window starts.
        let rx = collect(b.try_clone().map_err(|e| e.to_string())?, p.probes);
        let sent = pace_probes(&a, to, p.payload, p.load_mbps, p.probes).map_err(|e| e.to_string())?;
        let got = rx.join().map_err(|_| "receiver panicked")?;
        let expected = expected_arrivals(&sent, ser_ns, (p.owd_ms * 1e6) as u64);
        let mine: Vec<_> = got.iter().filter(|g| g.0 < p.probes).collect();
        err.extend(mine.iter().map(|&&(seq, _, rx)| (rx as f64 - expected[seq as usize] as f64) / 1e6));
        f.probes_received += mine.len() as u64;
        let loss = 1.0 - mine.len() as f64 / p.probes as f64;
        f.loss_window_abs_errs.push(round((loss - p.loss).abs(), 6));
    }
    err.sort_by(f64::total_cmp);
    f.probes_sent = p.probes * f.loss_window_abs_errs.len() as u64;
    f.owd_err_ms_mean = mean(&err);
    f.owd_err_ms_p50 = quantile(&err, 0.5);
    f.owd_err_ms_p99 = quantile(&err, 0.99);
    f.owd_err_ms_p999 = quantile(&err, 0.999);
    f.owd_err_ms_max = err.last().copied().unwrap_or(0.0);
    f.added_jitter_p99_ms = f.owd_err_ms_p99 - f.owd_err_ms_p50;
    f.measured_loss = 1.0 - f.probes_received as f64 / f.probes_sent as f64;
    f.loss_abs_err = mean(&f.loss_window_abs_errs);
    f.owd_err_ms_cdf = thin(&err, 2000).into_iter().map(|x| round(x, 4)).collect();
    Ok(())
}

/// Phase 2 over a link that is up: offered above `rate_mbps`, goodput after the warm-up.
fn measure_rate(p: &FidelityParams, (a, b, to): Endpoints, f: &mut EmulatorFigures) -> Result<(), String> {
    let n = (p.rate_offered_mbps * 1e6 * p.rate_seconds / ((p.payload + FRAME_OVERHEAD) as f64 * 8.0)) as u64;
    let rx = collect(b, n);
    pace_probes(&a, to, p.payload, p.rate_offered_mbps, n).map_err(|e| e.to_string())?;
    let got = rx.join().map_err(|_| "receiver panicked")?;
    let t0 = got.first().map(|g| g.2).unwrap_or(0) + (p.rate_warmup_s * 1e9) as u64;
    let late: Vec<u64> = got.iter().map(|g| g.2).filter(|&t| t >= t0).collect();
    if late.len() > 1 {
        let span = (late[late.len() - 1] - late[0]) as f64 / 1e9;
        let bits = ((late.len() - 1) * (p.payload + FRAME_OVERHEAD) * 8) as f64;
        f.measured_rate_mbps = bits / span / 1e6;
        f.rate_rel_err = (f.measured_rate_mbps / p.rate_mbps - 1.0).abs();
    }
    Ok(())
}

/// Runs Cohort's emulator through both phases.
pub fn run_cohort(p: &FidelityParams, run: &str) -> Result<EmulatorFigures, String> {
    let opts = EmuOptions {
        rt_priority: p.rt_priority,
        busy_poll: p.busy_poll,
        cpu: p.cpu,
        lock_memory: p.lock_memory,
        ..EmuOptions::default()
    };
    let mut f = EmulatorFigures::default();

    // Phase 1: delay, jitter, loss.
    let tb = Testbed::up(&scenario(p.owd_ms, p.link_mbps, p.loss, p.seed), run, EmuMode::Thread, opts.clone())
        .map_err(|e| e.to_string())?;
    let measured = endpoints(&tb).and_then(|ep| measure_delay_loss(p, ep, &mut f));
    let st = tb.status();
    tb.down().map_err(|e| e.to_string())?;
    measured?;
    if let Some(st) = st {
        f.emulator_late_us_p50 = Some(st.late_us_p50);
        f.emulator_late_us_p99 = Some(st.late_us_p99);
        f.emulator_realtime = Some(st.realtime);
        f.emulator_steal_share = Some(round(st.steal_share, 5));
    }

    // Phase 2: rate.
    let tb =
        Testbed::up(&scenario(5.0, p.rate_mbps, 0.0, p.seed), run, EmuMode::Thread, opts).map_err(|e| e.to_string())?;
    let measured = endpoints(&tb).and_then(|ep| measure_rate(p, ep, &mut f));
    tb.down().map_err(|e| e.to_string())?;
    measured?;
    Ok(f)
}

/// Brings a Rattan link up, measures over it with `phase`, and always takes it down.
fn over_rattan(
    bin: &std::path::Path,
    link: &LinkSpec,
    tag: &str,
    p: &FidelityParams,
    phase: impl FnOnce(Endpoints) -> Result<(), String>,
) -> Result<(), String> {
    let rl = RattanLink::up(bin, link, tag, p.rt_priority)?;
    let measured = (|| {
        // The sender in Rattan's left namespace, the receiver in its right one, opened there
        // with setns like Cohort's endpoints.
        let a = RattanLink::socket(&rl.left_ns, rl.left_addr)?;
        let b = RattanLink::socket(&rl.right_ns, rl.right_addr)?;
        phase(handshake(a, b)?)
    })();
    let down = rl.down();
    measured?;
    down.map_err(|e| format!("rattan clean-up: {e}"))
}

/// Runs Rattan (binary `bin`) through both phases with the same links and probes.
pub fn run_rattan(p: &FidelityParams, bin: &std::path::Path) -> Result<EmulatorFigures, String> {
    let mut f = EmulatorFigures::default();
    let l1 = LinkSpec { owd_ms: p.owd_ms, rate_mbps: p.link_mbps, loss: p.loss, payload: p.payload };
    over_rattan(bin, &l1, "delay", p, |ep| measure_delay_loss(p, ep, &mut f))?;
    let l2 = LinkSpec { owd_ms: 5.0, rate_mbps: p.rate_mbps, loss: 0.0, payload: p.payload };
    over_rattan(bin, &l2, "rate", p, |ep| measure_rate(p, ep, &mut f))?;
    Ok(f)
}

/// How long one run of `system` may take with `p` (with room for slow set-up); the bound of a
/// loaded run's CPU hogs.
fn run_bound(p: &FidelityParams) -> Duration {
    let gap = (p.payload + FRAME_OVERHEAD) as f64 * 8.0 / (p.load_mbps * 1e6);
    let phase1 = gap * p.probes as f64 * f64::from(p.loss_windows.max(1)) + 0.5 * f64::from(p.loss_windows.max(1));
    Duration::from_secs_f64(phase1 + p.rate_seconds + 120.0)
}

/// Whether a repetition ran on an idle machine or beside a CPU hog on every core.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Condition {
    Idle,
    Loaded,
}

impl Condition {
    /// The goal on `added_jitter_p99_ms` under this condition (the issue's: 0.5 ms idle, 1.0 ms
    /// under load). A Cohort run whose emulator was later than this at p99 measured the host,
    /// not the emulator, and is withheld from the summary (with its repetition's Rattan run).
    pub fn jitter_goal_ms(self) -> f64 {
        match self {
            Condition::Idle => 0.5,
            Condition::Loaded => 1.0,
        }
    }
}

/// The goal on `owd_err_ms_mean`, idle and under load.
pub const OWD_GOAL_MS: f64 = 0.2;

/// One emulator's run in one repetition.
#[derive(Debug, Clone, Serialize)]
pub struct RunRecord {
    pub rep: u32,
    pub condition: Condition,
    pub system: &'static str,
    /// Its figures (delay-error CDF left out), or why it failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub figures: Option<EmulatorFigures>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failed: Option<String>,
    /// Why this run is not in the summary (`None`: it is).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub withheld: Option<String>,
    /// The hogs' work during a loaded run (million buffer updates per second, all cores).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub load_mups: Option<f64>,
}

/// Mean and 95% interval (Student's t) over runs.
#[derive(Debug, Clone, Serialize)]
pub struct MeanCi {
    pub mean: f64,
    pub ci95: [f64; 2],
    pub n: usize,
}

impl MeanCi {
    fn of(v: &[f64]) -> MeanCi {
        let (m, h) = mean_ci95(v);
        MeanCi { mean: round(m, 6), ci95: [round(m - h, 6), round(m + h, 6)], n: v.len() }
    }

    fn half_width(&self) -> f64 {
        (self.ci95[1] - self.ci95[0]) / 2.0
    }
}

/// Reads one figure out of a run's figures.
type Figure = fn(&EmulatorFigures) -> f64;

/// The four figures the goals name, by name.
const FIGURES: [(&str, Figure); 4] = [
    ("owd_err_ms_mean", |f| f.owd_err_ms_mean),
    ("added_jitter_p99_ms", |f| f.added_jitter_p99_ms),
    ("loss_abs_err", |f| f.loss_abs_err),
    ("rate_rel_err", |f| f.rate_rel_err),
];

/// One emulator's figures over the runs of one condition.
#[derive(Debug, Clone, Serialize)]
pub struct FigureStats {
    /// Means of the magnitudes of the four figures of the goals.
    pub figures: BTreeMap<&'static str, MeanCi>,
    pub steal_share: MeanCi,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub emulator_late_us_p99: Option<MeanCi>,
}

impl FigureStats {
    fn of(runs: &[&EmulatorFigures]) -> Option<FigureStats> {
        if runs.is_empty() {
            return None;
        }
        let col = |g: &dyn Fn(&EmulatorFigures) -> f64| MeanCi::of(&runs.iter().map(|f| g(f)).collect::<Vec<_>>());
        let late: Vec<f64> = runs.iter().filter_map(|f| f.emulator_late_us_p99).collect();
        Some(FigureStats {
            figures: FIGURES.iter().map(|&(name, g)| (name, col(&|f| g(f).abs()))).collect(),
            steal_share: col(&|f| f.steal_share),
            emulator_late_us_p99: (!late.is_empty()).then(|| MeanCi::of(&late)),
        })
    }
}

/// Every run of one condition, summarised.
#[derive(Debug, Clone, Serialize)]
pub struct ConditionSummary {
    pub condition: Condition,
    /// Repetitions pooled in `cohort` and `rattan`, and repetitions withheld.
    pub reps_published: usize,
    pub reps_withheld: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cohort: Option<FigureStats>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rattan: Option<FigureStats>,
    /// Both over every run, withheld ones included.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cohort_all_runs: Option<FigureStats>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rattan_all_runs: Option<FigureStats>,
    /// Per figure: Cohort's mean |error| exceeds Rattan's by no more than the half-width of the
    /// 95% interval of the difference (published runs).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cohort_no_worse_beyond_noise: Option<BTreeMap<&'static str, bool>>,
    /// Cohort's published means against the goals of this condition.
    pub owd_goal_ms: f64,
    pub jitter_goal_ms: f64,
    pub goals_met: Option<bool>,
}

impl ConditionSummary {
    fn of(condition: Condition, runs: &[RunRecord]) -> ConditionSummary {
        let of_system = |system: &str, published: bool| -> Vec<&EmulatorFigures> {
            runs.iter()
                .filter(|r| r.condition == condition && r.system == system && (!published || r.withheld.is_none()))
                .filter_map(|r| r.figures.as_ref())
                .collect()
        };
        let reps = |withheld: bool| {
            let mut v: Vec<u32> = runs
                .iter()
                .filter(|r| r.condition == condition && r.withheld.is_some() == withheld)
                .map(|r| r.rep)
                .collect();
            v.dedup();
            v.len()
        };
        let cohort = FigureStats::of(&of_system("cohort", true));
        let rattan = FigureStats::of(&of_system("rattan", true));
        let no_worse = cohort.as_ref().zip(rattan.as_ref()).map(|(c, r)| {
            FIGURES
                .iter()
                .map(|&(name, _)| {
                    let (a, b) = (&c.figures[name], &r.figures[name]);
                    (name, a.mean - b.mean <= a.half_width().hypot(b.half_width()))
                })
                .collect()
        });
        let goals_met = cohort.as_ref().map(|c| {
            c.figures["owd_err_ms_mean"].mean <= OWD_GOAL_MS
                && c.figures["added_jitter_p99_ms"].mean <= condition.jitter_goal_ms()
        });
        ConditionSummary {
            condition,
            reps_published: reps(false),
            reps_withheld: reps(true),
            cohort,
            rattan,
            cohort_all_runs: FigureStats::of(&of_system("cohort", false)),
            rattan_all_runs: FigureStats::of(&of_system("rattan", false)),
            cohort_no_worse_beyond_noise: no_worse,
            owd_goal_ms: OWD_GOAL_MS,
            jitter_goal_ms: condition.jitter_goal_ms(),
            goals_met,
        }
    }
}

/// Both emulators' first loaded run, with their delay-error CDFs, for the plot.
#[derive(Debug, Clone, Serialize)]
pub struct FirstLoaded {
    pub cohort: EmulatorFigures,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rattan: Option<EmulatorFigures>,
}

/// Measures one run of `system` (with hogs on every core when `loaded`), with the machine's
/// steal and idle shares over it.
fn measured_run(
    p: &FidelityParams,
    system: &'static str,
    rattan_bin: Option<&std::path::Path>,
    condition: Condition,
    rep: u32,
) -> (Result<EmulatorFigures, String>, Option<f64>) {
    let load = (condition == Condition::Loaded).then(|| crate::load::Load::start(run_bound(p)));
    let before = CpuTimes::read(None).ok();
    let tag = format!("fid{}r{rep}", std::process::id() % 10_000);
    let r = match (system, rattan_bin) {
        ("cohort", _) => run_cohort(p, &tag),
        (_, Some(bin)) => run_rattan(p, bin),
        _ => Err("no rattan binary".into()),
    };
    let after = CpuTimes::read(None).ok();
    let mups = load.map(|l| round(l.stop(), 1));
    let r = r.map(|mut f| {
        if let (Some(a), Some(b)) = (before, after) {
            f.steal_share = round(a.steal_share(&b), 5);
            f.idle_share = round(a.idle_share(&b), 4);
        }
        f
    });
    (r, mups)
}

/// The whole benchmark.
pub fn run(p: &FidelityParams, progress: impl FnMut(&Step)) -> Result<FidelityReport, String> {
    let cleared = rattan::clear_stale();
    for ns in &cleared {
        eprintln!("removed namespace {ns}, left by an earlier Rattan run");
    }
    let found = if p.rattan { Some(rattan::find(&rattan::Lookup::from_env())) } else { None };
    let bin = found.as_ref().and_then(|f| f.as_ref().ok()).cloned();
    let conditions: &[Condition] =
        if p.background_load { &[Condition::Idle, Condition::Loaded] } else { &[Condition::Idle] };
    let systems_per_run = 1 + u64::from(bin.is_some());
    let mut plan = Plan::new(u64::from(p.reps.max(1)) * conditions.len() as u64 * systems_per_run, progress);
    let mut runs: Vec<RunRecord> = Vec::new();
    let mut first: Option<(EmulatorFigures, PeerOutcome)> = None;
    let mut first_loaded: Option<FirstLoaded> = None;
    for rep in 0..p.reps.max(1) {
        let pr = FidelityParams { seed: p.seed + u64::from(rep), ..p.clone() };
        for &condition in conditions {
            let mut systems = vec!["cohort"];
            if bin.is_some() {
                systems.push("rattan");
            }
            if rep % 2 == 1 {
                systems.reverse();
            }
            let mut got: Vec<(&'static str, Result<EmulatorFigures, String>, Option<f64>)> = Vec::new();
            for system in systems {
                plan.begin(&format!("repetition {} of {}: {system}, {condition:?}", rep + 1, p.reps.max(1)));
                let (r, mups) = measured_run(&pr, system, bin.as_deref(), condition, rep);
                if let Err(e) = &r {
                    eprintln!("{system} run failed (repetition {rep}, {condition:?}): {e}");
                }
                got.push((system, r, mups));
            }
            got.sort_by_key(|g| g.0);
            let cohort_result = &got[0].1;
            if rep == 0 && condition == Condition::Idle {
                let c = cohort_result.clone()?;
                let peer = match (&found, got.get(1)) {
                    (None, _) => PeerOutcome::Skipped {
                        skipped: format!("--no-rattan given; without it: {}", rattan::INSTALL_HINT),
                    },
                    (Some(Err(why)), _) => PeerOutcome::Skipped { skipped: why.clone() },
                    (Some(Ok(b)), Some((_, Ok(f), _))) => PeerOutcome::Measured(Box::new(PeerFigures {
                        binary: b.display().to_string(),
                        version: rattan::version(b).unwrap_or_default(),
                        rt_priority: p.rt_priority,
                        rattan_bps: [
                            rattan::rattan_bps(p.link_mbps, p.payload),
                            rattan::rattan_bps(p.rate_mbps, p.payload),
                        ],
                        figures: f.clone(),
                    })),
                    (Some(Ok(_)), Some((_, Err(e), _))) => PeerOutcome::Failed { failed: e.clone() },
                    (Some(Ok(_)), None) => PeerOutcome::Failed { failed: "not run".into() },
                };
                first = Some((c, peer));
            }
            if condition == Condition::Loaded
                && first_loaded.is_none()
                && let Ok(c) = cohort_result
            {
                let rattan = got.get(1).and_then(|g| g.1.as_ref().ok().cloned());
                first_loaded = Some(FirstLoaded { cohort: c.clone(), rattan });
            }
            // The emulator's own lateness beyond the figure it measures spoils the repetition.
            let withheld = cohort_result.as_ref().ok().and_then(|c| {
                let late = c.emulator_late_us_p99?;
                (late / 1000.0 > condition.jitter_goal_ms()).then(|| {
                    format!(
                        "Cohort's emulator was {late:.0} us late at p99 (the host stole {:.2}% of the CPU time),                          beyond the {} ms the jitter figure is held to: the repetition measured the host",
                        c.steal_share * 100.0,
                        condition.jitter_goal_ms()
                    )
                })
            });
            for (system, r, mups) in got {
                let (figures, failed) = match r {
                    Ok(mut f) => {
                        f.owd_err_ms_cdf.clear();
                        (Some(f), None)
                    }
                    Err(e) => (None, Some(e)),
                };
                runs.push(RunRecord {
                    rep,
                    condition,
                    system,
                    figures,
                    failed,
                    withheld: withheld.clone(),
                    load_mups: mups,
                });
            }
        }
    }
    let (cohort, rattan) = first.ok_or("no idle repetition ran")?;
    let cohort_vs_rattan = match &rattan {
        PeerOutcome::Measured(r) => Some(CohortVsRattan::of(&cohort, &r.figures, p)),
        _ => None,
    };
    let summaries = conditions.iter().map(|&c| ConditionSummary::of(c, &runs)).collect();
    plan.finish();
    Ok(FidelityReport {
        params: p.clone(),
        cohort,
        rattan,
        cohort_vs_rattan,
        summaries,
        first_loaded,
        runs,
        rattan_namespaces_cleared: cleared,
        goals: "|owd_err_ms_mean| <= 0.2, added_jitter_p99_ms <= 0.5 at 50 Mbit/s (1.0 under background load), \
                loss_abs_err <= 0.005 over 100k packets, rate_rel_err <= 0.03, and no worse than Rattan on any of them",
        command: format!(
            "cohort bench testbed-fidelity --json --probes {} --loss-windows {} --owd-ms {} --loss {} --seed {} --reps {}{}{}{}{}{}",
            p.probes,
            p.loss_windows,
            p.owd_ms,
            p.loss,
            p.seed,
            p.reps,
            if p.background_load { " --background-load" } else { "" },
            if p.busy_poll { " --busy-poll" } else { "" },
            p.cpu.map(|c| format!(" --cpu {c}")).unwrap_or_default(),
            if p.lock_memory { " --lock-memory" } else { "" },
            if p.rattan { "" } else { " --no-rattan" }
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versus_compares_magnitudes() {
        let v = Versus::of(-0.01, 0.02);
        assert!(v.cohort_no_worse);
        assert_eq!(v.ratio, Some(0.5));
        let w = Versus::of(0.03, -0.02);
        assert!(!w.cohort_no_worse);
        let z = Versus::of(0.0, 0.0);
        assert!(z.cohort_no_worse);
        assert_eq!(z.ratio, None);
    }

    fn record(rep: u32, condition: Condition, system: &'static str, owd: f64, withheld: bool) -> RunRecord {
        let f = EmulatorFigures {
            owd_err_ms_mean: owd,
            added_jitter_p99_ms: owd * 2.0,
            emulator_late_us_p99: (system == "cohort").then_some(30.0),
            ..Default::default()
        };
        RunRecord {
            rep,
            condition,
            system,
            figures: Some(f),
            failed: None,
            withheld: withheld.then(|| "late".into()),
            load_mups: None,
        }
    }

    #[test]
    fn summaries_pool_published_repetitions_and_count_withheld_ones() {
        let runs = vec![
            record(0, Condition::Loaded, "cohort", 0.1, false),
            record(0, Condition::Loaded, "rattan", -0.3, false),
            record(1, Condition::Loaded, "rattan", 0.5, false),
            record(1, Condition::Loaded, "cohort", 0.3, false),
            record(2, Condition::Loaded, "cohort", 9.0, true),
            record(2, Condition::Loaded, "rattan", 9.0, true),
            record(0, Condition::Idle, "cohort", 0.01, false),
        ];
        let sm = ConditionSummary::of(Condition::Loaded, &runs);
        assert_eq!((sm.reps_published, sm.reps_withheld), (2, 1));
        let c = sm.cohort.as_ref().unwrap();
        let owd = &c.figures["owd_err_ms_mean"];
        assert_eq!(owd.n, 2);
        assert!((owd.mean - 0.2).abs() < 1e-9);
        // Two values 0.1 and 0.3: s = 0.1414, t(1) = 12.706, half-width 12.706·0.1 = 1.2706.
        assert!((owd.ci95[1] - 1.4706).abs() < 1e-6, "{:?}", owd.ci95);
        // Rattan's magnitudes (0.3, 0.5) pool to 0.4: Cohort is no worse.
        assert_eq!(sm.rattan.as_ref().unwrap().figures["owd_err_ms_mean"].mean, 0.4);
        assert!(sm.cohort_no_worse_beyond_noise.as_ref().unwrap()["owd_err_ms_mean"]);
        assert_eq!(sm.cohort_all_runs.as_ref().unwrap().figures["owd_err_ms_mean"].n, 3);
        // Mean 0.2 is within the 0.2 goal, jitter 0.4 within the loaded 1.0.
        assert_eq!(sm.goals_met, Some(true));
        let idle = ConditionSummary::of(Condition::Idle, &runs);
        assert_eq!((idle.reps_published, idle.reps_withheld), (1, 0));
        assert!(idle.rattan.is_none() && idle.cohort_no_worse_beyond_noise.is_none());
        assert_eq!(idle.jitter_goal_ms, 0.5);
    }

    #[test]
    fn report_shapes() {
        let p = FidelityParams::default();
        let c = EmulatorFigures { owd_err_ms_mean: 0.01, loss_abs_err: 0.001, ..Default::default() };
        let r = EmulatorFigures { owd_err_ms_mean: 0.5, loss_abs_err: 0.0005, ..Default::default() };
        let cmp = CohortVsRattan::of(&c, &r, &p);
        assert!(cmp.owd_err_ms_mean.cohort_no_worse);
        assert!(!cmp.loss_abs_err.cohort_no_worse);
        assert!(!cmp.cohort_no_worse_on_all);
        assert!((cmp.loss_sampling_sd - 0.000689).abs() < 1e-5);
        // 5 windows: the difference's standard error is 0.000689·0.603·0.632 ≈ 0.000263, and
        // 0.001 − 0.0005 is within two of it; Rattan's delay error is the larger.
        assert!((cmp.loss_abs_err_diff_se - 0.000263).abs() < 2e-6);
        assert!(cmp.loss_no_worse_beyond_noise);
        assert!(cmp.cohort_no_worse_on_all_beyond_noise);
        let far = EmulatorFigures { loss_abs_err: 0.0011, ..c.clone() };
        assert!(!CohortVsRattan::of(&far, &r, &p).loss_no_worse_beyond_noise);
        // One window each: the noise is wider, and so is the margin.
        let one = FidelityParams { loss_windows: 1, ..p.clone() };
        assert!(CohortVsRattan::of(&far, &r, &one).loss_no_worse_beyond_noise);

        let skipped = serde_json::to_value(PeerOutcome::Skipped { skipped: "why".into() }).unwrap();
        assert_eq!(skipped, serde_json::json!({"skipped": "why"}));
        let measured = PeerOutcome::Measured(Box::new(PeerFigures {
            binary: "/x/rattan".into(),
            version: "rattan 0.1.1".into(),
            rt_priority: Some(50),
            rattan_bps: [1, 2],
            figures: r,
        }));
        let v = serde_json::to_value(measured).unwrap();
        assert_eq!(v["owd_err_ms_mean"], 0.5);
        assert_eq!(v["version"], "rattan 0.1.1");
        assert!(v.get("emulator_late_us_p99").is_none());
    }
}
