//! `cohort bench transport`: Cohort LRT against kernel TCP (cubic, bbr), KCP in turbo mode and
//! QUIC, carrying the same timestamped messages across the testbed's emulated link.
//!
//! Each case (loss × workload) brings up one testbed run with two nodes and one
//! point-to-point link per transport, all with the same parameters and the same loss trace
//! (`loss_slot_us`, `loss_trace` in the scenario: losses are a function of time, each slot's
//! fate drawn from the run's seed, so every link is down in the same slots), so every
//! transport crosses an identical channel in the same run without sharing capacity. Slots are
//! shorter than any data packet's serialization, so under independent loss each data packet
//! of a transport meets its own draw; the *fades* cases (Gilbert-Elliott over the same slots,
//! a mean fade of `burst_ms`) put every transport through the same outages at the same
//! moments. A generator thread per transport creates message `i` at `start + i·interval`
//! (with a precise sleep) and hands it to the transport; the message carries its sequence
//! number and generation time. The receiver stamps each message when the transport hands it
//! over, in order. Delay = hand-over − generation; messages generated in the warm-up are
//! carried but not measured. Bytes on the wire come from the emulator's link counters (both
//! directions, IP and everything above it: headers, ACKs, repairs, handshakes).
//!
//! A transport that cannot sustain the offered load at some loss rate (loss-limited TCP
//! carries well under 1 Mbit/s at 10% loss and 100 ms RTT) is flagged `sustained: false`: its
//! tail then measures its growing queue, not its loss recovery.

mod baselines;

use crate::progress::{Plan, Step};
use crate::stats::{DelayFigures, mean_ci95, round, thin};
use cohort_emu::scenario::DirectionSpec;
use cohort_emu::{EmuMode, EmuOptions, Testbed, TestbedScenario};
use serde::Serialize;
use std::net::Ipv4Addr;
use std::time::{Duration, Instant};

/// Bytes at the start of each message: sequence number and generation time.
pub const STAMP: usize = 16;

/// The transports, in the order of the JSON objects and of the links.
pub const TRANSPORTS: [&str; 6] = ["lrt", "tcp_cubic", "tcp_bbr", "kcp", "quic", "quic_bbr"];

/// A workload of the shoot-out.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Workload {
    pub name: &'static str,
    pub size: usize,
    pub interval_ms: f64,
}

pub const CONTROL: Workload = Workload { name: "control", size: 1024, interval_ms: 10.0 };
pub const STREAM: Workload = Workload { name: "stream", size: 1024, interval_ms: 1.0 };

/// How a case loses packets: a mean rate, independent per slot or in fades.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Loss {
    pub loss: f64,
    /// Mean length of a fade (the channel down for every packet), when losses come in fades.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub burst_ms: Option<f64>,
}

impl Loss {
    pub fn name(&self) -> String {
        match self.burst_ms {
            Some(b) => format!("loss {} in {b} ms fades", self.loss),
            None => format!("loss {}", self.loss),
        }
    }

    /// The link's loss settings on the shared trace of `slot_us` slots.
    fn spec(&self, slot_us: f64) -> DirectionSpec {
        let trace = DirectionSpec { loss_slot_us: Some(slot_us), loss_trace: Some(1), ..DirectionSpec::default() };
        match self.burst_ms {
            None => DirectionSpec { loss: Some(self.loss), ..trace },
            Some(b) => {
                // Gilbert-Elliott per slot: the bad state lasts 1 / p_bg slots on average and
                // holds a share p_gb / (p_gb + p_bg) of the time.
                let p_bg = (slot_us / (b * 1e3)).min(1.0);
                DirectionSpec {
                    ge_p_gb: Some(self.loss / (1.0 - self.loss) * p_bg),
                    ge_p_bg: Some(p_bg),
                    ge_loss_good: Some(0.0),
                    ge_loss_bad: Some(1.0),
                    ..trace
                }
            }
        }
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct TransportParams {
    pub owd_ms: f64,
    pub rate_mbps: f64,
    /// Independent loss rates (per slot of the trace, so per data packet).
    pub losses: Vec<f64>,
    /// Mean loss rates of the fades cases.
    pub fades: Vec<f64>,
    /// Mean length of a fade.
    pub burst_ms: f64,
    /// Slot of the loss trace every link of a run replays.
    pub loss_slot_us: f64,
    /// Measured seconds per case (after the warm-up).
    pub seconds: f64,
    pub warmup_s: f64,
    /// Longest wait for the last messages after the generators stop.
    pub drain_s: f64,
    /// Runs per case; run `k` uses seed `seed + k` (its own loss draws). Every transport runs
    /// in every run, at once, each on its own identical link.
    pub reps: u32,
    pub seed: u64,
    pub transports: Vec<String>,
}

impl Default for TransportParams {
    fn default() -> Self {
        TransportParams {
            owd_ms: 50.0,
            rate_mbps: 100.0,
            losses: vec![0.0, 0.02, 0.05, 0.10],
            fades: vec![0.10],
            burst_ms: 3.0,
            // 125 bytes at 100 Mbit/s: below every data packet's serialization time.
            loss_slot_us: 10.0,
            seconds: 20.0,
            warmup_s: 3.0,
            drain_s: 8.0,
            reps: 3,
            seed: 1,
            transports: TRANSPORTS.iter().map(|s| s.to_string()).collect(),
        }
    }
}

/// One transport's figures in one case.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Figures {
    #[serde(flatten)]
    pub delay: DelayFigures,
    /// Bytes on the wire (IP and above, both directions) per application byte sent.
    pub overhead: f64,
    pub sent: u64,
    pub delivered: u64,
    pub measured: u64,
    /// Delivered in order, each exactly once.
    pub in_order: bool,
    pub duplicates: u64,
    /// Delivered at least 95% of the offered messages of the measured window by its end + 1 s.
    pub sustained: bool,
    /// Why the transport produced no figures (set up failed), if it did not.
    pub error: Option<String>,
    /// Each run's p99 (ms), and the 95% interval half-width of their mean; the figures
    /// above pool every run's delays.
    pub p99_runs: Vec<f64>,
    pub p99_ci95: f64,
    /// The first run's longest delay in each second of the measured window (ms): where in the
    /// run the tail comes from (a start-up, a periodic phase of the controller, the emulator).
    pub max_by_second_ms: Vec<f64>,
    /// Sorted measured delays (ms), thinned to at most 1000 points, for the plot.
    pub cdf_ms: Vec<f64>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Case {
    #[serde(flatten)]
    pub loss: Loss,
    pub workload: &'static str,
    #[serde(flatten)]
    pub transports: serde_json::Map<String, serde_json::Value>,
}

#[derive(Debug, Clone, Serialize)]
pub struct TransportReport {
    pub params: TransportParams,
    pub cases: Vec<Case>,
    /// At 10% independent loss, stream: LRT p99 / best TCP p99, and LRT p99 against KCP and
    /// QUIC.
    pub stream_10pct: serde_json::Value,
    pub goals: &'static str,
    pub command: String,
}

/// What the receiving side recorded: (sequence, generated ns, handed over ns) in arrival order.
pub type Arrivals = Vec<(u64, u64, u64)>;

/// Where one transport runs in a case.
#[derive(Debug, Clone)]
pub struct Path {
    pub tx_ip: Ipv4Addr,
    pub rx_ip: Ipv4Addr,
    pub tx_ns: String,
    pub rx_ns: String,
}

/// The message schedule, shared by every transport of a case.
#[derive(Debug, Clone, Copy)]
pub struct Schedule {
    pub epoch: Instant,
    pub start: Instant,
    pub interval: Duration,
    pub count: u64,
    pub size: usize,
    /// Nothing is sent or awaited after this.
    pub deadline: Instant,
}

impl Schedule {
    pub fn ns(&self, t: Instant) -> u64 {
        t.saturating_duration_since(self.epoch).as_nanos() as u64
    }

    /// Sleeps until message `i` is due and returns it, stamped; `None` past the deadline.
    pub fn next(&self, i: u64) -> Option<Vec<u8>> {
        let at = self.start + self.interval.mul_f64(i as f64);
        let now = Instant::now();
        if now > self.deadline {
            return None;
        }
        if at > now {
            std::thread::sleep(at - now);
        }
        let mut m = vec![(i % 251) as u8; self.size.max(STAMP)];
        m[..8].copy_from_slice(&i.to_be_bytes());
        m[8..16].copy_from_slice(&self.ns(at).to_be_bytes());
        Some(m)
    }

    /// The stamp of a received message, with the hand-over time.
    pub fn arrival(&self, m: &[u8]) -> Option<(u64, u64, u64)> {
        (m.len() >= STAMP).then(|| {
            let seq = u64::from_be_bytes(m[..8].try_into().expect("8 bytes"));
            let gen_ns = u64::from_be_bytes(m[8..16].try_into().expect("8 bytes"));
            (seq, gen_ns, self.ns(Instant::now()))
        })
    }
}

fn scenario(p: &TransportParams, seed: u64, loss: Loss, links: usize) -> TestbedScenario {
    let d = DirectionSpec { owd_ms: Some(p.owd_ms), rate_mbps: Some(p.rate_mbps), ..loss.spec(p.loss_slot_us) };
    TestbedScenario::pair("transport", seed, &vec![d; links]).expect("valid transport scenario")
}

/// One run of one transport: its figures and its sorted measured delays (ms).
struct RunFigures {
    figures: Figures,
    delays: Vec<f64>,
}

fn figures(p: &TransportParams, sch: &Schedule, arrivals: &Arrivals, sent: u64, wire_bytes: u64) -> RunFigures {
    let warm_ns = (p.warmup_s * 1e9) as u64 + sch.ns(sch.start);
    let mut f = Figures { sent, delivered: arrivals.len() as u64, in_order: true, ..Figures::default() };
    let mut next = 0u64;
    for &(seq, _, _) in arrivals {
        if seq < next {
            f.duplicates += 1;
            f.in_order = false;
        } else if seq > next {
            f.in_order = false;
            next = seq + 1;
        } else {
            next += 1;
        }
    }
    let measured: Vec<_> = arrivals.iter().filter(|a| a.1 >= warm_ns).collect();
    let mut d: Vec<f64> = measured.iter().map(|a| (a.2.saturating_sub(a.1)) as f64 / 1e6).collect();
    let seconds = p.seconds.ceil().max(1.0) as usize;
    f.max_by_second_ms = vec![0.0; seconds];
    for (a, &ms) in measured.iter().zip(&d) {
        let k = ((a.1 - warm_ns) / 1_000_000_000) as usize;
        if let Some(m) = f.max_by_second_ms.get_mut(k) {
            *m = round(m.max(ms), 1);
        }
    }
    let offered_measured = sch.count.saturating_sub((p.warmup_s * 1e3 / sch.interval.as_secs_f64() / 1e3) as u64);
    f.measured = d.len() as u64;
    // Sustained: the measured window's messages arrived, and within a second of the window's end.
    let window_end_ns = sch.ns(sch.start + sch.interval.mul_f64(sch.count as f64)) + 1_000_000_000;
    let on_time = measured.iter().filter(|a| a.2 <= window_end_ns).count() as u64;
    f.sustained = on_time as f64 >= 0.95 * offered_measured as f64;
    d.sort_by(f64::total_cmp);
    f.delay = DelayFigures::of(&d, p.owd_ms);
    f.overhead = wire_bytes as f64 / (sent.max(1) as usize * sch.size) as f64;
    f.p99_runs = vec![round(f.delay.p99_ms, 2)];
    f.cdf_ms = thin(&d, 1000).into_iter().map(|x| round(x, 3)).collect();
    RunFigures { figures: f, delays: d }
}

/// Every run of one transport in one case, pooled: delays from all runs, counts summed, in
/// order and sustained only if every run was; each run's p99 with the interval of their mean.
/// The per-second maxima are the first run's.
fn pool(p: &TransportParams, runs: &[RunFigures]) -> Figures {
    let Some(first) = runs.first() else { return Figures::default() };
    let mut d: Vec<f64> = runs.iter().flat_map(|r| r.delays.iter().copied()).collect();
    d.sort_by(f64::total_cmp);
    let p99_runs: Vec<f64> = runs.iter().map(|r| round(r.figures.delay.p99_ms, 2)).collect();
    let sent: u64 = runs.iter().map(|r| r.figures.sent).sum();
    Figures {
        delay: DelayFigures::of(&d, p.owd_ms),
        overhead: runs.iter().map(|r| r.figures.overhead * r.figures.sent as f64).sum::<f64>() / sent.max(1) as f64,
        sent,
        delivered: runs.iter().map(|r| r.figures.delivered).sum(),
        measured: d.len() as u64,
        in_order: runs.iter().all(|r| r.figures.in_order),
        duplicates: runs.iter().map(|r| r.figures.duplicates).sum(),
        sustained: runs.iter().all(|r| r.figures.sustained),
        error: runs.iter().find_map(|r| r.figures.error.clone()),
        p99_ci95: round(mean_ci95(&p99_runs).1, 2),
        p99_runs,
        max_by_second_ms: first.figures.max_by_second_ms.clone(),
        cdf_ms: thin(&d, 1000).into_iter().map(|x| round(x, 3)).collect(),
    }
}

/// Runs one case once: every transport at once, each on its own identical link.
fn run_case(p: &TransportParams, seed: u64, loss: Loss, w: Workload, run: &str) -> Result<Vec<RunFigures>, String> {
    let s = scenario(p, seed, loss, p.transports.len());
    let tb = Testbed::up(&s, run, EmuMode::Thread, EmuOptions::default()).map_err(|e| e.to_string())?;
    let interval = Duration::from_secs_f64(w.interval_ms / 1e3);
    let count = ((p.warmup_s + p.seconds) * 1e3 / w.interval_ms).round() as u64;
    let epoch = Instant::now();
    let start = epoch + Duration::from_millis(1500);
    let deadline = start + interval.mul_f64(count as f64) + Duration::from_secs_f64(p.drain_s);
    let sch = Schedule { epoch, start, interval, count, size: w.size, deadline };
    let handles: Vec<_> = p
        .transports
        .iter()
        .enumerate()
        .map(|(k, name)| {
            let path = Path {
                tx_ip: tb.addr("a", k).expect("link address"),
                rx_ip: tb.addr("b", k).expect("link address"),
                tx_ns: tb.ns("a").expect("node a"),
                rx_ns: tb.ns("b").expect("node b"),
            };
            let name = name.clone();
            std::thread::spawn(move || baselines::run(&name, &path, &sch))
        })
        .collect();
    let results: Vec<_> = handles.into_iter().map(|h| h.join().unwrap_or_else(|_| Err("panicked".into()))).collect();
    let st = tb.status().ok_or("no emulator status")?;
    let mut out = Vec::new();
    for (k, r) in results.into_iter().enumerate() {
        let frames: Vec<_> = st.fabric.links.iter().filter(|l| l.link == k).collect();
        let wire = frames.iter().map(|l| l.offered_bytes.saturating_sub(14 * l.offered)).sum();
        out.push(match r {
            Ok((sent, arrivals)) => figures(p, &sch, &arrivals, sent, wire),
            Err(e) => RunFigures { figures: Figures { error: Some(e), ..Figures::default() }, delays: vec![] },
        });
    }
    tb.down().map_err(|e| e.to_string())?;
    Ok(out)
}

fn num(v: &serde_json::Value, t: &str, k: &str) -> f64 {
    v.get(t).and_then(|x| x.get(k)).and_then(|x| x.as_f64()).unwrap_or(f64::NAN)
}

/// Every case, `reps` times; the runs of a case follow each other, so every case sees the
/// machine in the same state on average.
pub fn run(p: &TransportParams, progress: impl FnMut(&Step)) -> Result<TransportReport, String> {
    let losses: Vec<Loss> = p
        .losses
        .iter()
        .map(|&loss| Loss { loss, burst_ms: None })
        .chain(p.fades.iter().map(|&loss| Loss { loss, burst_ms: Some(p.burst_ms) }))
        .collect();
    let mut plan = Plan::new((losses.len() * 2 * p.reps.max(1) as usize) as u64, progress);
    let run = format!("tr{}", std::process::id() % 100_000);
    let mut cases = Vec::new();
    // Per case at 10% loss, stream: each run's LRT p99 over the best TCP's that run.
    let mut paired = Vec::new();
    let is_10pct_stream = |l: &Loss, w: &str| (l.loss - 0.10).abs() < 1e-9 && l.burst_ms.is_none() && w == "stream";
    for &loss in &losses {
        for w in [CONTROL, STREAM] {
            let mut per_transport: Vec<Vec<RunFigures>> = p.transports.iter().map(|_| Vec::new()).collect();
            for k in 0..p.reps.max(1) {
                plan.begin(&format!("{}, {}, run {} of {}", loss.name(), w.name, k + 1, p.reps.max(1)));
                for (slot, r) in per_transport.iter_mut().zip(run_case(p, p.seed + u64::from(k), loss, w, &run)?) {
                    slot.push(r);
                }
            }
            if is_10pct_stream(&loss, w.name) {
                paired = lrt_over_best_tcp(p, &per_transport);
            }
            let mut transports = serde_json::Map::new();
            for (name, runs) in p.transports.iter().zip(&per_transport) {
                transports.insert(name.clone(), serde_json::to_value(pool(p, runs)).expect("figures serialize"));
            }
            cases.push(Case { loss, workload: w.name, transports });
        }
    }
    plan.finish();
    let mut summary = serde_json::json!({});
    if let Some(c) = cases.iter().find(|c| is_10pct_stream(&c.loss, c.workload)) {
        let v = serde_json::to_value(&c.transports).expect("serialize");
        let lrt = num(&v, "lrt", "p99_ms");
        let tcp = num(&v, "tcp_cubic", "p99_ms").min(num(&v, "tcp_bbr", "p99_ms"));
        let (mean, ci95) = mean_ci95(&paired);
        summary = serde_json::json!({
            "lrt_p99_ms": lrt,
            "best_tcp_p99_ms": tcp,
            "lrt_over_best_tcp_p99": lrt / tcp,
            "lrt_over_best_tcp_p99_paired": { "mean": round(mean, 4), "ci95": round(ci95, 4), "runs": paired.len() },
            "kcp_p99_ms": num(&v, "kcp", "p99_ms"),
            "quic_p99_ms": num(&v, "quic", "p99_ms"),
            "quic_bbr_p99_ms": num(&v, "quic_bbr", "p99_ms"),
            "lrt_share_at_owd": num(&v, "lrt", "share_at_owd"),
        });
    }
    Ok(TransportReport {
        params: p.clone(),
        cases,
        stream_10pct: summary,
        goals: "at 10% loss, stream: LRT p99 <= 1/3 of the best TCP's and below KCP's and QUIC's, LRT share_at_owd >= \
                0.75; LRT delivers every message in order at every loss rate",
        command: format!(
            "cohort bench transport --json --seconds {} --warmup-s {} --reps {} --seed {} --losses {} --fades {} \
             --burst-ms {} --loss-slot-us {} --plot docs/bench/transport.png",
            p.seconds,
            p.warmup_s,
            p.reps,
            p.seed,
            join(&p.losses),
            join(&p.fades),
            p.burst_ms,
            p.loss_slot_us
        ),
    })
}

fn join(v: &[f64]) -> String {
    v.iter().map(f64::to_string).collect::<Vec<_>>().join(",")
}

/// Each run's LRT p99 over the smaller of the two TCPs' p99 in that run (runs where either is
/// missing are left out).
fn lrt_over_best_tcp(p: &TransportParams, per_transport: &[Vec<RunFigures>]) -> Vec<f64> {
    let at = |name: &str| p.transports.iter().position(|t| t == name).map(|i| &per_transport[i]);
    let (Some(lrt), Some(cubic), Some(bbr)) = (at("lrt"), at("tcp_cubic"), at("tcp_bbr")) else {
        return vec![];
    };
    lrt.iter()
        .zip(cubic)
        .zip(bbr)
        .map(|((l, c), b)| l.figures.delay.p99_ms / c.figures.delay.p99_ms.min(b.figures.delay.p99_ms))
        .filter(|r| r.is_finite())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sch(count: u64) -> Schedule {
        let epoch = Instant::now();
        Schedule {
            epoch,
            start: epoch,
            interval: Duration::from_millis(10),
            count,
            size: 1024,
            deadline: epoch + Duration::from_secs(60),
        }
    }

    #[test]
    fn figures_count_order_duplicates_and_the_warm_up() {
        let p = TransportParams { warmup_s: 0.02, owd_ms: 50.0, ..TransportParams::default() };
        let s = sch(5);
        let ms = 1_000_000;
        let clean: Arrivals = (0..5).map(|i| (i, i * 10 * ms, i * 10 * ms + 50 * ms)).collect();
        let f = figures(&p, &s, &clean, 5, 6000).figures;
        assert!(f.in_order && f.sustained);
        assert_eq!((f.delivered, f.measured, f.duplicates), (5, 3, 0));
        assert_eq!((f.delay.p50_ms, f.delay.share_at_owd), (50.0, 1.0));
        assert!((f.overhead - 6000.0 / 5120.0).abs() < 1e-9);
        let messy: Arrivals =
            vec![(0, 0, 60 * ms), (2, 20 * ms, 90 * ms), (1, 10 * ms, 95 * ms), (2, 20 * ms, 99 * ms)];
        let f = figures(&p, &s, &messy, 5, 0).figures;
        assert!(!f.in_order && !f.sustained);
        assert_eq!(f.duplicates, 2);
        assert!(f.delay.share_at_owd < 1.0);
    }

    #[test]
    fn runs_pool_their_delays_and_keep_each_p99() {
        let p = TransportParams { warmup_s: 0.0, owd_ms: 50.0, seconds: 2.0, ..TransportParams::default() };
        let s = sch(200);
        let ms = 1_000_000;
        let steady: Arrivals = (0..200).map(|i| (i, i * 10 * ms, i * 10 * ms + 50 * ms)).collect();
        let mut late = steady.clone();
        late[40].2 += 300 * ms; // one message held 300 ms, 0.4 s into the run
        let runs = [figures(&p, &s, &steady, 200, 0), figures(&p, &s, &late, 200, 0)];
        assert_eq!(runs[1].figures.max_by_second_ms, vec![350.0, 50.0]);
        let f = pool(&p, &runs);
        assert_eq!((f.sent, f.delivered, f.measured), (400, 400, 400));
        assert_eq!(f.p99_runs, vec![50.0, 50.0]);
        assert_eq!(f.p99_ci95, 0.0);
        assert_eq!(f.delay.max_ms, 350.0);
        assert!(f.in_order && f.sustained);
        let mut lost = steady.clone();
        lost.remove(7);
        let f = pool(&p, &[figures(&p, &s, &steady, 200, 0), figures(&p, &s, &lost, 200, 0)]);
        assert!(!f.in_order, "one run out of order makes the pool out of order");
    }

    #[test]
    fn every_link_of_a_run_replays_one_loss_trace() {
        let p = TransportParams::default();
        for loss in [Loss { loss: 0.1, burst_ms: None }, Loss { loss: 0.1, burst_ms: Some(3.0) }] {
            let s = scenario(&p, 7, loss, 3);
            let dirs: Vec<_> = (0..3).map(|k| s.links[k].directions(s.seed, k).unwrap()).collect();
            assert!(dirs.iter().all(|d| *d == dirs[0]), "{loss:?}: the links differ");
            let (ab, ba) = dirs[0];
            assert_ne!(ab.loss_clock, ba.loss_clock, "the two directions have their own traces");
            assert_eq!(ab.loss_clock.unwrap().slot, Duration::from_micros(10));
            assert!((ab.loss.mean() - 0.1).abs() < 1e-9, "{:?}", ab.loss);
            if let cohort_medium::link::LossModel::GilbertElliott { p_bg, loss_bad, .. } = ab.loss {
                assert_eq!((p_bg, loss_bad), (10.0 / 3000.0, 1.0), "a fade of 3 ms in 10 µs slots");
            } else {
                assert!(loss.burst_ms.is_none(), "fades are Gilbert-Elliott");
            }
        }
        let other = scenario(&p, 8, Loss { loss: 0.1, burst_ms: None }, 1);
        assert_ne!(
            other.links[0].directions(8, 0).unwrap().0.loss_clock,
            scenario(&p, 7, Loss { loss: 0.1, burst_ms: None }, 1).links[0].directions(7, 0).unwrap().0.loss_clock,
            "each run its own trace"
        );
    }

    #[test]
    fn schedule_stamps_round_trip() {
        let s = sch(3);
        let m = s.next(2).unwrap();
        assert_eq!(m.len(), 1024);
        let (seq, gen_ns, at) = s.arrival(&m).unwrap();
        assert_eq!((seq, gen_ns), (2, 20_000_000));
        assert!(at >= gen_ns);
        assert!(s.arrival(&m[..10]).is_none());
    }
}
