//! SchedWiFi on the testbed (seed 000's baseline, Table III): exclusive ST-windows for every
//! latency-sensitive message, and a Time-Aware Shaper that keeps every robot's bulk out of them.
//!
//! **Windows.** As in the simulator (`cohort_sim::crl`): each ST-window is seed 000's Eq. 4
//! (`cohort_sim::crl::st_window`, R = 7 retransmissions, TX_ack = 30 µs) at the channel's rate;
//! every worker's perception has its own window, laid one after the other from the loop's start,
//! then, after the leader's inference, every action. Each LS message leaves at its window's
//! start (the workload's schedule, [`super::workload::WorkloadParams::schedule`]).
//!
//! **Shaper.** Seed 000 emulated the Time-Aware Shaper by stopping the BH queues; here each
//! robot's [`BulkGate`] (the kernel gate COORP's agents use, on the robot's interface) holds the
//! robot's bulk from `lead` before the first window of each block to the block's end. A block is
//! the perceptions' windows, or the actions' (the inference gap between them stays open).
//! `lead` is the agents' default (2 ms, `cohort coorp agent --lead-ms`), so SchedWiFi and the
//! local half differ in their windows, not in the gate. Given the emulator's card file (as the
//! agents are), the shaper instead holds as long before each block as the robot's card needs to
//! drain completely (`CardEstimate::lead` with no allowance: the windows are exclusive), which
//! is what SchedWiFi's shaper does in the simulator (Algorithm 2's layer over an empty card).

use super::workload::Endpoint;
use cohort_net::preempt::{BulkGate, CardProbe, GateConfig};
use cohort_proto::preempt::agent::{AgentConfig, CardEstimate};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// The agents' default lead (`cohort coorp agent --lead-ms 2`).
pub const LEAD: Duration = Duration::from_millis(2);

/// When each LS message leaves, as offsets from its loop's start.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct StSchedule {
    /// Worker `w`'s perception (index `w − 1`).
    pub perception_at: Vec<Duration>,
    /// The action to worker `w` (index `w − 1`).
    pub action_at: Vec<Duration>,
    /// Windows' blocks `[start, end)` within a loop, in order.
    pub blocks: Vec<(Duration, Duration)>,
}

impl StSchedule {
    /// Eq. 4's windows for `workers` workers on a channel of `phy_mbps`.
    pub fn new(
        workers: usize,
        perception_bytes: usize,
        action_bytes: usize,
        inference: Duration,
        phy_mbps: f64,
    ) -> Self {
        let wp = cohort_sim::crl::st_window(perception_bytes, phy_mbps);
        let wa = cohort_sim::crl::st_window(action_bytes, phy_mbps);
        let perception_at: Vec<Duration> = (0..workers).map(|w| wp * w as u32).collect();
        let p_end = wp * workers as u32;
        let a0 = p_end + inference;
        let action_at: Vec<Duration> = (0..workers).map(|w| a0 + wa * w as u32).collect();
        let blocks = vec![(Duration::ZERO, p_end), (a0, a0 + wa * workers as u32)];
        StSchedule { perception_at, action_at, blocks }
    }

    /// The gate's plan for the loop starting at `start`: hold at `block start − lead`, release
    /// at the block's end (blocks that overlap after the lead merge).
    pub fn holds(&self, start: Instant, lead: Duration) -> Vec<(Instant, Instant)> {
        let mut out: Vec<(Instant, Instant)> = Vec::new();
        for &(s, e) in &self.blocks {
            let (h, r) = ((start + s).checked_sub(lead).unwrap_or(start), start + e);
            match out.last_mut() {
                Some(last) if h <= last.1 => last.1 = last.1.max(r),
                _ => out.push((h, r)),
            }
        }
        out
    }
}

/// What a robot's shaper did.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct ShaperCounters {
    pub holds: u64,
    /// Holds that took effect after their planned time by more than 1 ms (the host was late).
    pub late_holds: u64,
    /// Holds begun earlier than the fixed lead because the card needed longer to drain.
    pub card_early_holds: u64,
}

/// Starts the Time-Aware Shaper of the robot at `ep`: a gate on its interface `dev`, held on
/// `schedule`'s plan for every loop `t0 + k · period` until `stop`. The shaper's thread lives in
/// the robot's namespace from the gate's installation to its removal (the gate's `tc` calls
/// must name the robot's interface, never the host's). Runs at SCHED_FIFO `rt` if given, as the
/// control threads do. With `card` (the emulator's card file and the robot's station) the holds
/// start when the card needs them to. Returns once the gate is installed, or why it could not
/// be.
#[allow(clippy::too_many_arguments)]
pub fn start(
    ep: &Endpoint,
    dev: &str,
    link_bps: u64,
    schedule: StSchedule,
    t0: Instant,
    period: Duration,
    rt: Option<i32>,
    card: Option<(&std::path::Path, usize)>,
    stop: Arc<AtomicBool>,
) -> Result<JoinHandle<Result<ShaperCounters, String>>, String> {
    let cfg = GateConfig::new(dev, link_bps);
    let mut card =
        card.map(|(p, st)| CardProbe::open(p, st)).transpose().map_err(|e| format!("SchedWiFi shaper: {e}"))?;
    let ns = ep.ns.clone();
    let (installed_tx, installed) = std::sync::mpsc::channel::<Result<(), String>>();
    let h = std::thread::spawn(move || {
        let shaped = cohort_emu::netns::in_netns(&ns, move || {
            let mut gate = match BulkGate::install(cfg) {
                Ok(g) => g,
                Err(e) => {
                    let _ = installed_tx.send(Err(format!("SchedWiFi gate: {e}")));
                    return Ok(Err("no gate".to_string()));
                }
            };
            let _ = installed_tx.send(Ok(()));
            if let Some(p) = rt {
                let _ = cohort_emu::emulator::set_fifo(p);
            }
            Ok(shape(&mut gate, &schedule, t0, period, &stop, card.as_mut()))
        });
        shaped.map_err(|e| format!("SchedWiFi shaper in its namespace: {e}")).and_then(|r| r)
    });
    match installed.recv() {
        Ok(Ok(())) => Ok(h),
        Ok(Err(e)) => {
            let _ = h.join();
            Err(e)
        }
        Err(_) => {
            Err(h.join().map_or_else(|_| "the SchedWiFi shaper panicked".into(), |r| r.err().unwrap_or_default()))
        }
    }
}

/// Holds and releases `gate` on `schedule`'s plan, loop after loop, until `stop`; with `card`,
/// each hold starts the card's drain time before its block (the fixed lead until a drain rate
/// is known).
fn shape(
    gate: &mut BulkGate,
    schedule: &StSchedule,
    t0: Instant,
    period: Duration,
    stop: &AtomicBool,
    mut card: Option<&mut CardProbe>,
) -> Result<ShaperCounters, String> {
    let every = AgentConfig::default().card_every;
    let base = Instant::now();
    let at = |t: Instant| cohort_time::Instant::from_nanos(t.saturating_duration_since(base).as_nanos() as u64);
    let mut est: Option<CardEstimate> = None;
    let mut next_read = base;
    let mut c = ShaperCounters::default();
    let planned_lead = if card.is_some() { Duration::ZERO } else { LEAD };
    for k in 0u32.. {
        for (block, release) in schedule.holds(t0 + period * k, planned_lead) {
            let (hold, lead, decided) = loop {
                let now = Instant::now();
                if stop.load(Ordering::Relaxed) {
                    return Ok(c);
                }
                let lead = match card.as_deref_mut() {
                    None => Duration::ZERO,
                    Some(p) => {
                        if now >= next_read {
                            next_read = now + every;
                            let l = p.read().map_err(|e| format!("SchedWiFi card: {e}"))?;
                            CardEstimate::observe(&mut est, l.into(), at(now));
                        }
                        est.and_then(|e| e.lead(0.0, every)).unwrap_or(LEAD)
                    }
                };
                let hold = block.checked_sub(lead).unwrap_or(block);
                if now >= hold {
                    break (hold, lead, now);
                }
                let wake = if card.is_some() { hold.min(next_read) } else { hold };
                std::thread::sleep((wake - now).min(Duration::from_millis(100)));
            };
            gate.hold().map_err(|e| format!("SchedWiFi hold: {e}"))?;
            c.holds += 1;
            // Late: more than 1 ms after its planned time, or, read from the card (which decides
            // at a reading, not ahead), more than 1 ms after the reading that decided it.
            let due = if card.is_some() { decided } else { hold };
            if Instant::now() > due + Duration::from_millis(1) {
                c.late_holds += 1;
            }
            if lead > LEAD {
                c.card_early_holds += 1;
            }
            sleep_until(release, stop);
            gate.release().map_err(|e| format!("SchedWiFi release: {e}"))?;
            if stop.load(Ordering::Relaxed) {
                return Ok(c);
            }
        }
    }
    Ok(c)
}

/// The robots' shapers of one run: stopped and joined when dropped (an error path included),
/// or by [`Shapers::finish`], which adds up their counters.
#[derive(Debug, Default)]
pub struct Shapers {
    stop: Arc<AtomicBool>,
    handles: Vec<JoinHandle<Result<ShaperCounters, String>>>,
}

impl Shapers {
    /// The flag the shapers watch.
    pub fn stop(&self) -> Arc<AtomicBool> {
        self.stop.clone()
    }

    pub fn push(&mut self, h: JoinHandle<Result<ShaperCounters, String>>) {
        self.handles.push(h);
    }

    /// Stops every shaper (each removes its gate) and adds up their counters; the first error.
    pub fn finish(mut self) -> Result<ShaperCounters, String> {
        self.stop.store(true, Ordering::Relaxed);
        let mut total = ShaperCounters::default();
        let mut first_err = None;
        for h in self.handles.drain(..) {
            match h.join() {
                Ok(Ok(c)) => {
                    total.holds += c.holds;
                    total.late_holds += c.late_holds;
                    total.card_early_holds += c.card_early_holds;
                }
                Ok(Err(e)) => {
                    first_err.get_or_insert(e);
                }
                Err(_) => {
                    first_err.get_or_insert("a SchedWiFi shaper panicked".into());
                }
            }
        }
        first_err.map_or(Ok(total), Err)
    }
}

impl Drop for Shapers {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for h in self.handles.drain(..) {
            let _ = h.join();
        }
    }
}

/// Sleeps until `t`, waking at least every 100 ms to look at `stop`.
fn sleep_until(t: Instant, stop: &AtomicBool) {
    loop {
        let now = Instant::now();
        if now >= t || stop.load(Ordering::Relaxed) {
            return;
        }
        std::thread::sleep((t - now).min(Duration::from_millis(100)));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn windows_follow_eq_4_one_after_the_other() {
        let s = StSchedule::new(4, 12 * 1024, 1024, Duration::from_millis(2), 390.0);
        let wp = cohort_sim::crl::st_window(12 * 1024, 390.0);
        let wa = cohort_sim::crl::st_window(1024, 390.0);
        assert_eq!(s.perception_at, [Duration::ZERO, wp, wp * 2, wp * 3]);
        let a0 = wp * 4 + Duration::from_millis(2);
        assert_eq!(s.action_at, [a0, a0 + wa, a0 + wa * 2, a0 + wa * 3]);
        assert_eq!(s.blocks, [(Duration::ZERO, wp * 4), (a0, a0 + wa * 4)]);
    }

    /// Root only (skipped otherwise): a shaper installs its gate on the robot's interface, holds
    /// on its plan, and removes the gate from that interface, inside the robot's namespace.
    #[test]
    fn the_shaper_lives_and_cleans_up_in_the_robots_namespace() {
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            eprintln!("skipped: needs root (network namespaces)");
            return;
        }
        let ns = format!("cht-sw{}", std::process::id());
        let ip = |args: &[&str]| std::process::Command::new("ip").args(args).status().unwrap().success();
        assert!(ip(&["netns", "add", &ns]));
        let up = ip(&["-n", &ns, "link", "add", "wlan0", "type", "veth", "peer", "name", "wlan0p"])
            && ip(&["-n", &ns, "link", "set", "wlan0p", "up"])
            && ip(&["-n", &ns, "link", "set", "wlan0", "up"]);
        let qdisc = || {
            let o = std::process::Command::new("ip")
                .args(["netns", "exec", &ns, "tc", "qdisc", "show", "dev", "wlan0"])
                .output()
                .unwrap();
            String::from_utf8_lossy(&o.stdout).into_owned()
        };
        let result = std::panic::catch_unwind(|| {
            assert!(up);
            let ep = Endpoint { ns: ns.clone(), addr: std::net::Ipv4Addr::LOCALHOST };
            let sc = StSchedule::new(2, 12 * 1024, 1024, Duration::from_millis(2), 390.0);
            let mut shapers = Shapers::default();
            let h = start(
                &ep,
                "wlan0",
                100_000_000,
                sc,
                Instant::now(),
                Duration::from_millis(33),
                None,
                None,
                shapers.stop(),
            );
            shapers.push(h.unwrap());
            std::thread::sleep(Duration::from_millis(150));
            assert!(qdisc().contains("htb"), "the gate sits on the robot's interface: {}", qdisc());
            let c = shapers.finish().unwrap();
            assert!(c.holds >= 3, "{c:?}");
            assert!(!qdisc().contains("htb"), "the gate is gone: {}", qdisc());
            // No such interface: the error comes back from `start`, nothing is left running.
            let stop = Arc::new(AtomicBool::new(false));
            let sc = StSchedule::new(1, 1024, 1024, Duration::ZERO, 390.0);
            let e = start(&ep, "nope0", 1_000_000, sc, Instant::now(), Duration::from_millis(33), None, None, stop)
                .unwrap_err();
            assert!(e.contains("SchedWiFi gate"), "{e}");
        });
        ip(&["netns", "del", &ns]);
        if let Err(p) = result {
            std::panic::resume_unwind(p);
        }
    }

    #[test]
    fn the_gate_holds_lead_before_each_block_and_merges_what_overlaps() {
        let s = StSchedule::new(4, 12 * 1024, 1024, Duration::from_millis(2), 390.0);
        let t = Instant::now() + Duration::from_secs(1);
        let h = s.holds(t, LEAD);
        // The 2 ms inference gap is no longer than the lead: the two blocks merge into one hold.
        assert_eq!(h, [(t - LEAD, t + s.blocks[1].1)]);
        let h = s.holds(t, Duration::from_micros(500));
        assert_eq!(h.len(), 2);
        assert_eq!(h[0], (t - Duration::from_micros(500), t + s.blocks[0].1));
        assert_eq!(h[1].0, t + s.blocks[1].0 - Duration::from_micros(500));
    }
}
