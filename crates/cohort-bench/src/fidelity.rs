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

use crate::rattan::{self, LinkSpec, RattanLink};
use crate::stats::{mean, quantile, round, thin};
use cohort_emu::scenario::DirectionSpec;
use cohort_emu::{EmuMode, EmuOptions, Testbed, TestbedScenario};
use serde::Serialize;
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
    /// Run Rattan beside Cohort when a binary is found.
    pub rattan: bool,
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
            rattan: true,
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
    pub goals: &'static str,
    pub command: String,
}

fn realtime_ns() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default().as_nanos() as u64
}

/// Asks for a large receive buffer (root may exceed `rmem_max`) and kernel receive timestamps.
fn prepare_receiver(s: &UdpSocket) -> io::Result<()> {
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
    let opts = EmuOptions { rt_priority: p.rt_priority, ..EmuOptions::default() };
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
pub fn run_rattan(p: &FidelityParams, bin: &std::path::Path) -> Result<PeerFigures, String> {
    let version = rattan::version(bin)?;
    let mut f = EmulatorFigures::default();
    let l1 = LinkSpec { owd_ms: p.owd_ms, rate_mbps: p.link_mbps, loss: p.loss, payload: p.payload };
    over_rattan(bin, &l1, "delay", p, |ep| measure_delay_loss(p, ep, &mut f))?;
    let l2 = LinkSpec { owd_ms: 5.0, rate_mbps: p.rate_mbps, loss: 0.0, payload: p.payload };
    over_rattan(bin, &l2, "rate", p, |ep| measure_rate(p, ep, &mut f))?;
    Ok(PeerFigures {
        binary: bin.display().to_string(),
        version,
        rt_priority: p.rt_priority,
        rattan_bps: [rattan::rattan_bps(l1.rate_mbps, p.payload), rattan::rattan_bps(l2.rate_mbps, p.payload)],
        figures: f,
    })
}

/// The whole benchmark.
pub fn run(p: &FidelityParams) -> Result<FidelityReport, String> {
    let cohort = run_cohort(p, &format!("fid{}", std::process::id() % 100_000))?;
    let rattan = if !p.rattan {
        PeerOutcome::Skipped { skipped: format!("--no-rattan given; without it: {}", rattan::INSTALL_HINT) }
    } else {
        match rattan::find(&rattan::Lookup::from_env()) {
            Err(why) => PeerOutcome::Skipped { skipped: why },
            Ok(bin) => match run_rattan(p, &bin) {
                Ok(r) => PeerOutcome::Measured(Box::new(r)),
                Err(e) => {
                    eprintln!("rattan run failed: {e}");
                    PeerOutcome::Failed { failed: e }
                }
            },
        }
    };
    let cohort_vs_rattan = match &rattan {
        PeerOutcome::Measured(r) => Some(CohortVsRattan::of(&cohort, &r.figures, p)),
        _ => None,
    };
    Ok(FidelityReport {
        params: p.clone(),
        cohort,
        rattan,
        cohort_vs_rattan,
        goals: "|owd_err_ms_mean| <= 0.2, added_jitter_p99_ms <= 0.5 at 50 Mbit/s, loss_abs_err <= 0.005 over 100k \
                packets, rate_rel_err <= 0.03, and no worse than Rattan on any of them",
        command: format!(
            "cohort bench testbed-fidelity --json --probes {} --loss-windows {} --owd-ms {} --loss {} --seed {}{}",
            p.probes,
            p.loss_windows,
            p.owd_ms,
            p.loss,
            p.seed,
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
