//! `cohort bench crosscheck`: one Wi-Fi scenario in the simulator and on the testbed, per-AC
//! throughput and delay side by side.
//!
//! The scenario is a testbed scenario file (`mode = "wifi"`); node 0 receives, every other
//! node sends UDP datagrams to it at a constant rate from a seeded phase, every `vo_every`-th
//! sender marked EF (AC_VO), the others best effort. The same offered schedule runs through
//! three engines:
//!
//! - `sim`: the medium `cohort sim` builds for the scenario's `[wifi]`
//!   ([`cohort_sim::wifi_medium`]; the qdisc folded into the hardware queue), in virtual time;
//! - `model`: the testbed's own [`Fabric`] (hardware queue and qdisc apart, frames as bytes),
//!   in virtual time;
//! - `testbed`: real kernel UDP sockets in namespaces through the emulator in real time; delay
//!   from the sender's clock before `sendto` to the receiver's kernel timestamp.
//!
//! `sim` against `testbed` is what the issue asks (one scenario, one answer); `model` splits the
//! difference into what the two constructions of the channel disagree on (`sim` vs `model`)
//! and what real time and real kernels add (`model` vs `testbed`).

use crate::fidelity::{FRAME_OVERHEAD, recv_timestamped};
use crate::progress::{Plan, Step};
use crate::stats::{mean_ci95, quantile, round};
use cohort_emu::fabric::{Fabric, classify, node_mac};
use cohort_emu::scenario::Mode;
use cohort_emu::{EmuMode, EmuOptions, Testbed, TestbedScenario};
use cohort_medium::wifi::{Ac, Dest, MediumEvent};
use cohort_time::Instant as SimInstant;
use serde::Serialize;
use std::collections::BTreeMap;
use std::net::UdpSocket;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// The scenario used without `--scenario`: four senders and a receiver on 802.11n MCS 7
/// (20 MHz, 65 Mbit/s) with every default (A-MPDU on AC_BE/AC_VI, a 64-frame queue, a
/// 1000-packet qdisc, standard timing).
pub const DEFAULT_SCENARIO: &str = r#"
name = "crosscheck"
mode = "wifi"
nodes = ["rx", "s1", "s2", "s3", "s4"]
seed = 1

[wifi]
phy = "n"
data_mbps = 65.0
"#;

/// UDP payload header: sender (u16), sequence (u64), send time (CLOCK_REALTIME ns, u64).
const HEADER: usize = 18;
/// IPv4 TOS of the EF code point, which every engine maps to AC_VO.
const TOS_EF: u8 = 46 << 2;
const ENGINES: [&str; 3] = ["sim", "model", "testbed"];

#[derive(Debug, Clone, Serialize)]
pub struct CrossParams {
    #[serde(skip)]
    pub scenario: TestbedScenario,
    pub scenario_name: String,
    /// UDP payload bytes per datagram.
    pub payload: usize,
    /// Offered load, all senders together, as a share of the PHY's data rate (frame bytes).
    pub loads: Vec<f64>,
    /// Every `vo_every`-th sender (1-based) is EF/AC_VO.
    pub vo_every: usize,
    pub seconds: f64,
    /// Figures count what is delivered after this.
    pub warmup_s: f64,
    pub reps: u32,
    pub seed: u64,
    pub rt_priority: Option<i32>,
    /// Run the testbed (root); without it only `sim` and `model`.
    pub testbed: bool,
}

impl CrossParams {
    pub fn new(scenario: TestbedScenario) -> Result<CrossParams, String> {
        if scenario.mode != Mode::Wifi || scenario.nodes.len() < 2 {
            return Err("the cross-check needs a wifi scenario with a receiver and at least one sender".into());
        }
        Ok(CrossParams {
            scenario_name: scenario.name.clone(),
            scenario,
            payload: 1200,
            loads: vec![0.3, 1.2],
            vo_every: 2,
            seconds: 5.0,
            warmup_s: 1.0,
            reps: 3,
            seed: 1,
            rt_priority: Some(50),
            testbed: true,
        })
    }

    fn senders(&self) -> usize {
        self.scenario.nodes.len() - 1
    }

    fn tos(&self, sender: usize) -> u8 {
        if sender.is_multiple_of(self.vo_every.max(1)) { TOS_EF } else { 0 }
    }

    fn data_mbps(&self) -> f64 {
        self.scenario.wifi.as_ref().map_or(0.0, |w| w.data_mbps)
    }
}

/// One datagram of the offered schedule: when, from which sender (1-based node index), its
/// sequence number within that sender.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Offer {
    at_ns: u64,
    sender: usize,
    seq: u64,
}

/// Every sender at `load · data rate / senders` from a phase drawn from `seed`, merged in time.
fn schedule(p: &CrossParams, load: f64, seed: u64) -> Vec<Offer> {
    let per_sender_bps = load * p.data_mbps() * 1e6 / p.senders() as f64;
    let gap_ns = ((p.payload + FRAME_OVERHEAD) as f64 * 8.0 / per_sender_bps * 1e9) as u64;
    let end_ns = (p.seconds * 1e9) as u64;
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    let mut out = Vec::new();
    for sender in 1..=p.senders() {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let phase = x % gap_ns.max(1);
        out.extend((0..).map(|k| (k, phase + k * gap_ns)).take_while(|&(_, t)| t < end_ns).map(|(seq, at_ns)| Offer {
            at_ns,
            sender,
            seq,
        }));
    }
    out.sort_by_key(|o| (o.at_ns, o.sender));
    out
}

/// An Ethernet/IPv4/UDP frame of `payload` bytes from `sender` to node 0 as the testbed's
/// interfaces would send it (the fabric reads addresses and the TOS; checksums are not read).
fn frame(sender: usize, tos: u8, payload: usize) -> Vec<u8> {
    let mut f = vec![0u8; 14 + 20 + 8 + payload];
    f[..6].copy_from_slice(&node_mac(Mode::Wifi, 0, 0));
    f[6..12].copy_from_slice(&node_mac(Mode::Wifi, sender, 0));
    f[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
    f[14] = 0x45;
    f[15] = tos;
    f[16..18].copy_from_slice(&((20 + 8 + payload) as u16).to_be_bytes());
    f[22] = 64;
    f[23] = 17;
    f
}

/// What one engine delivered: (sender, send ns, delivery ns) per datagram.
type Deliveries = Vec<(usize, u64, u64)>;

/// `sim`: the medium of `cohort sim`, driven with the schedule in virtual time.
fn run_sim(p: &CrossParams, offers: &[Offer], seed: u64) -> Result<Deliveries, String> {
    let w = p.scenario.wifi.as_ref().ok_or("not a wifi scenario")?;
    if !w.stations.is_empty() || w.rts_threshold.is_some() {
        return Err("`cohort sim` has no per-station overrides or RTS threshold; the scenario uses them".into());
    }
    let phy = serde_json::to_value(w.phy).ok().and_then(|v| v.as_str().map(str::to_string)).unwrap_or_default();
    let net = cohort_sim::scenario::Network::Wifi {
        phy,
        data_mbps: w.data_mbps,
        queue_depth: w.queue_depth,
        fer: w.fer,
        aggregation: w.aggregation,
        timing: w.timing,
        qdisc_packets: w.qdisc_packets,
        nic: w.nic,
    };
    let mut m = cohort_sim::wifi_medium::<(usize, u64)>(&net, p.scenario.nodes.len(), seed).ok_or("no medium")?;
    let mut out = Vec::with_capacity(offers.len());
    let advance = |m: &mut cohort_medium::wifi::Medium<(usize, u64)>, to: SimInstant, out: &mut Deliveries| {
        while let Some(t) = m.poll_timeout().filter(|&t| t <= to) {
            m.handle_timeout(t);
            while let Some(ev) = m.poll_event(t) {
                if let MediumEvent::Delivered { handle: (sender, sent), at, to: 0, .. } = ev {
                    out.push((sender, sent, at.as_nanos()));
                }
            }
        }
    };
    let msdu = p.payload + 20 + 8 + 8;
    for o in offers {
        let now = SimInstant::from_nanos(o.at_ns);
        advance(&mut m, now, &mut out);
        let ac = Ac::from_tos(p.tos(o.sender));
        // A full queue refuses the frame; the medium counts it.
        let _ = m.enqueue(now, o.sender, ac, Dest::Unicast(0), msdu, (o.sender, o.at_ns));
    }
    advance(&mut m, SimInstant::from_nanos(((p.seconds + 2.0) * 1e9) as u64), &mut out);
    Ok(out)
}

/// `model`: the testbed's fabric, driven with the same frames in virtual time.
fn run_model(p: &CrossParams, offers: &[Offer], seed: u64) -> Result<Deliveries, String> {
    let s = TestbedScenario { seed, ..p.scenario.clone() };
    let mut fab = Fabric::new(&s).map_err(|e| e.to_string())?;
    let mut out = Vec::with_capacity(offers.len());
    let drain = |fab: &mut Fabric, to: SimInstant, out: &mut Deliveries| {
        while let Some(t) = fab.poll_timeout().filter(|&t| t <= to) {
            while let Some((port, f, due)) = fab.poll_egress(t) {
                if port == 0 && f.len() >= 14 + 28 + HEADER {
                    let sender = u16::from_be_bytes([f[42], f[43]]) as usize;
                    let sent = u64::from_be_bytes(f[52..60].try_into().expect("8 bytes"));
                    out.push((sender, sent, due.as_nanos()));
                }
            }
        }
    };
    let mut templates: Vec<Vec<u8>> = (0..=p.senders()).map(|s| frame(s, p.tos(s), p.payload)).collect();
    for o in offers {
        let now = SimInstant::from_nanos(o.at_ns);
        drain(&mut fab, now, &mut out);
        let f = &mut templates[o.sender];
        f[42..44].copy_from_slice(&(o.sender as u16).to_be_bytes());
        f[44..52].copy_from_slice(&o.seq.to_be_bytes());
        f[52..60].copy_from_slice(&o.at_ns.to_be_bytes());
        debug_assert_eq!(classify(f), Ac::from_tos(p.tos(o.sender)));
        // A full qdisc refuses the frame; the fabric counts it.
        let _ = fab.ingress(now, o.sender, f);
    }
    drain(&mut fab, SimInstant::from_nanos(((p.seconds + 2.0) * 1e9) as u64), &mut out);
    Ok(out)
}

fn realtime_ns() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default().as_nanos() as u64
}

/// `testbed`: real sockets through the emulator. Delivery times are relative to the first
/// scheduled send, as the virtual engines' are.
fn run_testbed(p: &CrossParams, offers: &[Offer], seed: u64, run: &str) -> Result<Deliveries, String> {
    let s = TestbedScenario { seed, ..p.scenario.clone() };
    let opts = EmuOptions { rt_priority: p.rt_priority, ..EmuOptions::default() };
    let tb = Testbed::up(&s, run, EmuMode::Thread, opts).map_err(|e| e.to_string())?;
    let r = measure_testbed(p, offers, &tb);
    tb.down().map_err(|e| e.to_string())?;
    r
}

fn measure_testbed(p: &CrossParams, offers: &[Offer], tb: &Testbed) -> Result<Deliveries, String> {
    let err = |e: cohort_emu::TestbedError| e.to_string();
    let nodes = &p.scenario.nodes;
    let rx_ip = tb.addr(&nodes[0], 0).map_err(err)?;
    let rx = tb.in_node(&nodes[0], move || UdpSocket::bind((rx_ip, 0))).map_err(err)?;
    crate::fidelity::prepare_receiver(&rx).map_err(|e| e.to_string())?;
    let to = rx.local_addr().map_err(|e| e.to_string())?;
    let mut tx = vec![None];
    for (i, n) in nodes.iter().enumerate().skip(1) {
        let ip = tb.addr(n, 0).map_err(err)?;
        let s = tb.in_node(n, move || UdpSocket::bind((ip, 0))).map_err(err)?;
        socket2::SockRef::from(&s).set_tos_v4(u32::from(p.tos(i))).map_err(|e| e.to_string())?;
        // ARP and the path: one datagram through before the clock starts.
        let mut buf = [0u8; 64];
        let mut through = false;
        for _ in 0..50 {
            s.send_to(&[0u8; HEADER], to).map_err(|e| e.to_string())?;
            if rx.recv_from(&mut buf).is_ok() {
                through = true;
                break;
            }
        }
        if !through {
            return Err(format!("no datagram from {n} reached {} in 50 tries", nodes[0]));
        }
        tx.push(Some(s));
    }
    let collector = std::thread::spawn(move || {
        let mut got = Vec::new();
        let mut buf = vec![0u8; 65_536];
        while let Ok((n, rx_ns)) = recv_timestamped(&rx, &mut buf) {
            if n >= HEADER {
                let sender = u16::from_be_bytes([buf[0], buf[1]]) as usize;
                let sent = u64::from_be_bytes(buf[10..18].try_into().expect("8 bytes"));
                got.push((sender, sent, rx_ns));
            }
        }
        got
    });
    if let Some(prio) = p.rt_priority
        && let Err(e) = cohort_emu::emulator::set_fifo(prio.saturating_sub(10).max(1))
    {
        eprintln!("crosscheck sender runs without real-time priority ({e})");
    }
    let mut buf = vec![0u8; p.payload];
    let start = Instant::now();
    let start_rt = realtime_ns();
    for o in offers {
        let at = start + Duration::from_nanos(o.at_ns);
        let now = Instant::now();
        if at > now {
            std::thread::sleep(at - now);
        }
        let t = realtime_ns();
        buf[..2].copy_from_slice(&(o.sender as u16).to_be_bytes());
        buf[2..10].copy_from_slice(&o.seq.to_be_bytes());
        buf[10..18].copy_from_slice(&t.to_be_bytes());
        let s = tx[o.sender].as_ref().expect("a sender socket");
        // A full socket buffer is the sender's, not the channel's: retry.
        while let Err(e) = s.send_to(&buf, to) {
            if e.kind() != std::io::ErrorKind::WouldBlock && e.raw_os_error() != Some(libc::ENOBUFS) {
                return Err(e.to_string());
            }
            std::thread::yield_now();
        }
    }
    let got = collector.join().map_err(|_| "collector panicked")?;
    // Onto the virtual engines' time base: ns since the first scheduled send.
    Ok(got
        .into_iter()
        .filter(|g| g.1 >= start_rt)
        .map(|(s, sent, rx)| (s, sent - start_rt, rx.saturating_sub(start_rt)))
        .collect())
}

/// One access category's figures in one engine's run.
#[derive(Debug, Clone, Default, Serialize)]
pub struct AcRun {
    /// UDP payload delivered after the warm-up, per second.
    pub throughput_mbps: f64,
    pub delay_ms_p50: f64,
    pub delay_ms_p90: f64,
    pub delay_ms_p99: f64,
    #[serde(skip)]
    delays_ms: Vec<f64>,
}

fn ac_name(ac: Ac) -> &'static str {
    match ac {
        Ac::Vo => "vo",
        Ac::Vi => "vi",
        Ac::Be => "be",
        Ac::Bk => "bk",
    }
}

fn figures(p: &CrossParams, d: &Deliveries) -> BTreeMap<&'static str, AcRun> {
    let (from, to) = ((p.warmup_s * 1e9) as u64, (p.seconds * 1e9) as u64);
    let mut out: BTreeMap<&'static str, AcRun> = BTreeMap::new();
    for &(sender, sent, at) in d {
        if sender == 0 || sender > p.senders() {
            continue;
        }
        let e = out.entry(ac_name(Ac::from_tos(p.tos(sender)))).or_default();
        if (from..to).contains(&at) {
            e.throughput_mbps += (p.payload * 8) as f64;
        }
        if (from..to).contains(&sent) {
            e.delays_ms.push(at.saturating_sub(sent) as f64 / 1e6);
        }
    }
    for e in out.values_mut() {
        e.throughput_mbps = round(e.throughput_mbps / (p.seconds - p.warmup_s) / 1e6, 4);
        e.delays_ms.sort_by(f64::total_cmp);
        e.delay_ms_p50 = round(quantile(&e.delays_ms, 0.5), 4);
        e.delay_ms_p90 = round(quantile(&e.delays_ms, 0.9), 4);
        e.delay_ms_p99 = round(quantile(&e.delays_ms, 0.99), 4);
    }
    out
}

/// Largest distance between the empirical CDFs of two sorted samples (Kolmogorov-Smirnov).
fn ks_distance(a: &[f64], b: &[f64]) -> f64 {
    if a.is_empty() || b.is_empty() {
        return 1.0;
    }
    let (mut i, mut j, mut d) = (0, 0, 0.0f64);
    while i < a.len() && j < b.len() {
        let x = a[i].min(b[j]);
        while i < a.len() && a[i] <= x {
            i += 1;
        }
        while j < b.len() && b[j] <= x {
            j += 1;
        }
        d = d.max((i as f64 / a.len() as f64 - j as f64 / b.len() as f64).abs());
    }
    round(d, 4)
}

/// One engine's access category over the repetitions.
#[derive(Debug, Clone, Serialize)]
pub struct AcSummary {
    pub throughput_mbps: f64,
    pub throughput_ci95: f64,
    pub delay_ms_p50: f64,
    pub delay_ms_p99: f64,
    pub runs: Vec<AcRun>,
}

/// Two engines compared on one access category.
#[derive(Debug, Clone, Serialize)]
pub struct AcVersus {
    /// |b / a − 1| of the mean throughputs.
    pub throughput_rel_err: f64,
    /// Share of the total throughput this category carries (in `a`).
    pub share: f64,
    /// Kolmogorov-Smirnov distance of the pooled delay samples.
    pub delay_ks: f64,
    pub delay_p50_ratio: f64,
    pub delay_p99_ratio: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct LoadReport {
    pub load: f64,
    pub offered_mbps: f64,
    /// engine → access category → figures.
    pub engines: BTreeMap<&'static str, BTreeMap<&'static str, AcSummary>>,
    /// `testbed_vs_sim` (the issue's), `model_vs_sim`, `testbed_vs_model`: per category.
    pub versus: BTreeMap<String, BTreeMap<&'static str, AcVersus>>,
    /// Every category carrying ≥ 5% of the total within 5% between testbed and simulator.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub testbed_within_5pct_of_sim: Option<bool>,
    /// Engines that did not run, and why.
    pub skipped: BTreeMap<&'static str, String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct CrossReport {
    pub bench: &'static str,
    pub params: CrossParams,
    pub scenario: TestbedScenario,
    pub loads: Vec<LoadReport>,
    pub goal: &'static str,
    pub command: String,
}

fn summarise(runs: Vec<BTreeMap<&'static str, AcRun>>) -> BTreeMap<&'static str, AcSummary> {
    let mut acs: BTreeMap<&'static str, Vec<AcRun>> = BTreeMap::new();
    for r in runs {
        for (ac, f) in r {
            acs.entry(ac).or_default().push(f);
        }
    }
    acs.into_iter()
        .map(|(ac, runs)| {
            let (m, h) = mean_ci95(&runs.iter().map(|r| r.throughput_mbps).collect::<Vec<_>>());
            let mut pooled: Vec<f64> = runs.iter().flat_map(|r| r.delays_ms.iter().copied()).collect();
            pooled.sort_by(f64::total_cmp);
            let s = AcSummary {
                throughput_mbps: round(m, 4),
                throughput_ci95: round(h, 4),
                delay_ms_p50: round(quantile(&pooled, 0.5), 4),
                delay_ms_p99: round(quantile(&pooled, 0.99), 4),
                runs,
            };
            (ac, s)
        })
        .collect()
}

fn versus(
    a: &BTreeMap<&'static str, AcSummary>,
    b: &BTreeMap<&'static str, AcSummary>,
) -> BTreeMap<&'static str, AcVersus> {
    let total: f64 = a.values().map(|s| s.throughput_mbps).sum();
    let pooled = |s: &AcSummary| {
        let mut v: Vec<f64> = s.runs.iter().flat_map(|r| r.delays_ms.iter().copied()).collect();
        v.sort_by(f64::total_cmp);
        v
    };
    let ratio = |x: f64, y: f64| if y > 0.0 { round(x / y, 4) } else { f64::NAN };
    a.iter()
        .filter_map(|(ac, sa)| {
            let sb = b.get(ac)?;
            Some((
                *ac,
                AcVersus {
                    throughput_rel_err: round((ratio(sb.throughput_mbps, sa.throughput_mbps) - 1.0).abs(), 4),
                    share: round(if total > 0.0 { sa.throughput_mbps / total } else { 0.0 }, 4),
                    delay_ks: ks_distance(&pooled(sa), &pooled(sb)),
                    delay_p50_ratio: ratio(sb.delay_ms_p50, sa.delay_ms_p50),
                    delay_p99_ratio: ratio(sb.delay_ms_p99, sa.delay_ms_p99),
                },
            ))
        })
        .collect()
}

/// The whole benchmark: per load, every repetition through every engine (alternating which
/// runs first), then the comparison.
pub fn run(p: &CrossParams, progress: impl FnMut(&Step)) -> Result<CrossReport, String> {
    let mut plan = Plan::new((p.loads.len() * p.reps.max(1) as usize * ENGINES.len()) as u64, progress);
    let mut loads = Vec::new();
    for &load in &p.loads {
        let mut runs: BTreeMap<&'static str, Vec<BTreeMap<&'static str, AcRun>>> = BTreeMap::new();
        let mut skipped: BTreeMap<&'static str, String> = BTreeMap::new();
        if !p.testbed {
            skipped.insert("testbed", "--no-testbed given (the testbed needs root)".into());
        }
        for rep in 0..p.reps.max(1) {
            let seed = p.seed + u64::from(rep);
            let offers = schedule(p, load, seed);
            let mut order = ENGINES.to_vec();
            if rep % 2 == 1 {
                order.reverse();
            }
            for engine in order {
                plan.begin(&format!("load {load}, repetition {} of {}: {engine}", rep + 1, p.reps.max(1)));
                if skipped.contains_key(engine) {
                    continue;
                }
                let r = match engine {
                    "sim" => run_sim(p, &offers, seed),
                    "model" => run_model(p, &offers, seed),
                    _ => run_testbed(p, &offers, seed, &format!("xc{}", std::process::id() % 100_000)),
                };
                match r {
                    Ok(d) => runs.entry(engine).or_default().push(figures(p, &d)),
                    Err(e) => {
                        eprintln!("crosscheck: {engine} at load {load}: {e}");
                        skipped.insert(engine, e);
                    }
                }
            }
        }
        let engines: BTreeMap<&'static str, BTreeMap<&'static str, AcSummary>> =
            runs.into_iter().filter(|(e, _)| !skipped.contains_key(e)).map(|(e, r)| (e, summarise(r))).collect();
        let mut vs = BTreeMap::new();
        for (a, b) in [("sim", "testbed"), ("sim", "model"), ("model", "testbed")] {
            if let (Some(x), Some(y)) = (engines.get(a), engines.get(b)) {
                vs.insert(format!("{b}_vs_{a}"), versus(x, y));
            }
        }
        let within = vs.get("testbed_vs_sim").map(|v| {
            v.values().filter(|x| x.share >= 0.05).all(|x| x.throughput_rel_err <= 0.05)
                && engines["sim"].len() == engines["testbed"].len()
        });
        loads.push(LoadReport {
            load,
            offered_mbps: round(load * p.data_mbps(), 3),
            engines,
            versus: vs,
            testbed_within_5pct_of_sim: within,
            skipped,
        });
    }
    plan.finish();
    Ok(CrossReport {
        bench: "crosscheck",
        params: p.clone(),
        scenario: p.scenario.clone(),
        loads,
        goal: "per-AC throughput of the testbed within 5% of the simulator's on the same scenario (every AC \
               carrying >= 5% of the total)",
        command: format!(
            "cohort bench crosscheck --json --reps {} --seconds {} --loads {} --payload {} --vo-every {} --seed {}{}",
            p.reps,
            p.seconds,
            p.loads.iter().map(|l| l.to_string()).collect::<Vec<_>>().join(","),
            p.payload,
            p.vo_every,
            p.seed,
            if p.testbed { "" } else { " --no-testbed" }
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params() -> CrossParams {
        let mut p = CrossParams::new(TestbedScenario::parse(DEFAULT_SCENARIO).unwrap()).unwrap();
        p.seconds = 1.0;
        p.warmup_s = 0.2;
        p.testbed = false;
        p
    }

    #[test]
    fn the_schedule_offers_the_load_from_every_sender() {
        let p = params();
        let s = schedule(&p, 0.5, 7);
        assert!(s.windows(2).all(|w| w[0].at_ns <= w[1].at_ns));
        let bits: f64 = s.len() as f64 * ((p.payload + FRAME_OVERHEAD) * 8) as f64;
        assert!((bits / 1e6 / p.seconds / (0.5 * 65.0) - 1.0).abs() < 0.01, "{bits}");
        for sender in 1..=4 {
            assert!(s.iter().any(|o| o.sender == sender));
        }
        assert_eq!(s, schedule(&p, 0.5, 7));
        assert_ne!(s, schedule(&p, 0.5, 8));
    }

    #[test]
    fn frames_carry_the_access_category_of_their_sender() {
        let p = params();
        assert_eq!(classify(&frame(2, p.tos(2), 100)), Ac::Vo);
        assert_eq!(classify(&frame(1, p.tos(1), 100)), Ac::Be);
    }

    #[test]
    fn both_virtual_engines_carry_a_light_load_whole() {
        let p = params();
        let offers = schedule(&p, 0.2, 1);
        for d in [run_sim(&p, &offers, 1).unwrap(), run_model(&p, &offers, 1).unwrap()] {
            // A light load: everything arrives, each after it was sent.
            assert_eq!(d.len(), offers.len());
            assert!(d.iter().all(|&(_, sent, at)| at > sent));
            let f = figures(&p, &d);
            assert_eq!(f.keys().copied().collect::<Vec<_>>(), ["be", "vo"]);
            let total: f64 = f.values().map(|a| a.throughput_mbps).sum();
            let offered = 0.2 * 65.0 * p.payload as f64 / (p.payload + FRAME_OVERHEAD) as f64;
            assert!((total / offered - 1.0).abs() < 0.05, "{total} vs {offered}");
        }
    }

    #[test]
    fn ks_distance_of_samples() {
        assert_eq!(ks_distance(&[1.0, 2.0], &[1.0, 2.0]), 0.0);
        assert_eq!(ks_distance(&[1.0, 2.0], &[3.0, 4.0]), 1.0);
        assert_eq!(ks_distance(&[1.0, 3.0], &[2.0, 4.0]), 0.5);
        assert_eq!(ks_distance(&[], &[1.0]), 1.0);
    }

    #[test]
    fn a_scenario_the_simulator_cannot_express_is_skipped_with_the_reason() {
        let mut p = params();
        let text = format!("{DEFAULT_SCENARIO}\n[[wifi.stations]]\nnode = \"s1\"\nfer = 0.1\n");
        p.scenario = TestbedScenario::parse(&text).unwrap();
        let e = run_sim(&p, &schedule(&p, 0.1, 1), 1).unwrap_err();
        assert!(e.contains("per-station"), "{e}");
        let r = run(&p, crate::progress::quiet).unwrap();
        assert!(r.loads[0].skipped.contains_key("sim"));
        assert!(r.loads[0].engines.contains_key("model"));
        let p2p = "name = \"p\"\nmode = \"p2p\"\nnodes = [\"a\", \"b\"]\n[[links]]\na = \"a\"\nb = \"b\"\nowd_ms = 1.0\nrate_mbps = 10.0\n";
        assert!(CrossParams::new(TestbedScenario::parse(p2p).unwrap()).is_err());
    }
}
