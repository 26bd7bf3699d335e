//! The seeded fault simulation: for each seed a team of 3-6 robots with random loss and
//! delay, one robot's clock drifting by ±200 ppm (the others by up to ±20 ppm), random bulk
//! workloads, the arbiter's robot crashing mid-slice and the next robot taking over, a holder
//! crashing with the token, and every robot's LS flow changing rate once. Invariants:
//!
//! * never more than `LIMIT` robots that believe they may send BH, at any instant of true
//!   time (checked at every event, which is every instant a belief can change);
//! * every wait for the token ends within [`wait_bound`];
//! * every stretch in which a live robot waits and nobody may send lasts at most
//!   [`gap_bound`]: a crashed holder costs at most a lease, a crashed arbiter at most fault
//!   detection plus the take-over wait;
//! * from the second message at a new rate on (one new period after the change shows), every
//!   LS message falls into a protection window predicted before it arrived.
//!
//! A failing seed prints the command that replays it with a trace:
//! `COHORT_SEED=<seed> cargo test -p cohort-proto preempt::tests_faults -- --nocapture`.

use super::controller::{Controller, ControllerConfig, Observation};
use super::tests::{Clock, MS, Team};
use super::*;
use cohort_time::Instant;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::hash::Hasher;

const SEEDS: u64 = 1000;
const RUN: Duration = Duration::from_secs(30);

/// What one seed runs.
#[derive(Debug, Clone)]
struct Scenario {
    n: u32,
    cfg: Config,
    loss: f64,
    delay_max: Duration,
    detect: Duration,
    clocks: Vec<Clock>,
    arbiter_crash: Option<Duration>,
    holder_crash: Option<Duration>,
    /// Per robot: LS period before and after the change, and when it changes (true time).
    ls: Vec<(Duration, Duration, Duration)>,
    ls_jitter: Duration,
}

fn scenario(seed: u64) -> Scenario {
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0xC0_0E_F0);
    let n = rng.random_range(3..=6);
    let lease = Duration::from_millis(rng.random_range(300..=800));
    let cfg = Config {
        limit: if rng.random_bool(0.8) { 1 } else { 2 },
        timeslice: Duration::from_millis(rng.random_range(1000..=2500)),
        lease,
        renew_interval: lease / 4,
        retry_interval: 100 * MS,
        max_drift_ppm: 500,
        guard: 10 * MS,
    };
    let drifting = rng.random_range(0..n);
    let clocks = (0..n)
        .map(|i| Clock {
            offset_ns: rng.random_range(0..1_000_000_000),
            ppm: if i == drifting { if rng.random_bool(0.5) { 200 } else { -200 } } else { rng.random_range(-20..=20) },
        })
        .collect();
    let periods = [20, 25, 40, 50].map(Duration::from_millis);
    let ls = (0..n)
        .map(|_| {
            let before = Duration::from_nanos(33_333_333);
            let after = periods[rng.random_range(0..periods.len())];
            (before, after, Duration::from_millis(rng.random_range(3000..25_000)))
        })
        .collect();
    Scenario {
        n,
        cfg,
        loss: if rng.random_bool(0.2) { 0.0 } else { rng.random_range(0.0..0.1) },
        delay_max: Duration::from_micros(rng.random_range(500..=5000)),
        detect: Duration::from_millis(rng.random_range(300..=1500)),
        clocks,
        arbiter_crash: rng.random_bool(0.8).then(|| Duration::from_millis(rng.random_range(4000..12_000))),
        holder_crash: rng.random_bool(0.8).then(|| Duration::from_millis(rng.random_range(14_000..22_000))),
        ls,
        ls_jitter: Duration::from_micros(50),
    }
}

/// Longest a request may wait: every robot ahead in the FIFO (at most `n - 1`, served
/// `limit` at a time) holds one slice plus a hand-over (a grant lost until its lease runs out,
/// a retry, two deliveries); one more hand-over for the robot itself; and the cost of each
/// fault that happened (an arbiter crash: detection, the take-over wait and a retry; a holder
/// crash: its lease).
fn wait_bound(s: &Scenario, arbiter_crashed: bool, holder_crashed: bool) -> Duration {
    let c = &s.cfg;
    let handover = c.lease + 2 * c.retry_interval + 2 * s.delay_max;
    let rounds = (s.n as usize - 1).div_ceil(c.limit) as u32 + 1;
    let mut b = rounds * (c.timeslice + handover);
    if arbiter_crashed {
        b += s.detect + c.takeover_wait() + c.retry_interval;
    }
    if holder_crashed {
        b += c.lease;
    }
    b
}

/// Longest stretch in which someone waits and nobody sends: a hand-over that loses its grant
/// (a lease) or a crashed holder's lease, or a crashed arbiter's detection and take-over wait,
/// each plus two retries.
fn gap_bound(s: &Scenario) -> Duration {
    let c = &s.cfg;
    c.lease.max(s.detect + c.takeover_wait()) + 2 * c.retry_interval + 2 * s.delay_max
}

#[derive(Debug, Default)]
struct Outcome {
    hash: u64,
    arbiter_crashed_mid_slice: bool,
    holder_crashed: bool,
    adopted: bool,
    rate_changes: u64,
    max_wait: Duration,
    max_gap: Duration,
}

fn run_seed(seed: u64, verbose: bool) -> Result<Outcome, String> {
    let s = scenario(seed);
    let mut t = Team::new(s.cfg, s.n, seed);
    t.loss = s.loss;
    t.delay = (Duration::from_micros(200), s.delay_max);
    t.detect = s.detect;
    t.bulk_range = (300 * MS, Duration::from_secs(4));
    t.idle_range = (Duration::ZERO, Duration::from_secs(2));
    if verbose {
        t.log = Some(Vec::new());
        println!("{s:#?}");
    }
    for (i, r) in t.robots.values_mut().enumerate() {
        r.clock = s.clocks[i];
        r.next_bulk = Some(Instant::from_millis(u64::from(i as u32) * 150));
    }
    t.start_arbiter(1);
    let mut out = Outcome::default();
    let mut arbiter_crash = s.arbiter_crash.map(|d| Instant::ZERO + d);
    let mut holder_crash = s.holder_crash.map(|d| Instant::ZERO + d);
    let end = Instant::ZERO + RUN;
    while t.now < end {
        let next_fault = [arbiter_crash, holder_crash].into_iter().flatten().min().unwrap_or(end).min(end);
        while t.step(next_fault) {}
        if arbiter_crash.is_some_and(|c| c <= t.now) {
            // Mid-slice: wait (up to a slice) for a holder, then crash the arbiter's robot.
            let limit = t.now + s.cfg.timeslice;
            while t.holders().is_empty() && t.step(limit) {}
            if let Some(host) = t.arbiter_host() {
                out.arbiter_crashed_mid_slice = !t.holders().is_empty();
                t.crash(host);
            }
            arbiter_crash = None;
        }
        if holder_crash.is_some_and(|c| c <= t.now) {
            let limit = t.now + s.cfg.timeslice;
            let host = t.arbiter_host();
            while !t.holders().iter().any(|h| Some(*h) != host) && t.step(limit) {}
            if let Some(&h) = t.holders().iter().find(|h| Some(**h) != host) {
                out.holder_crashed = true;
                t.crash(h);
            }
            holder_crash = None;
        }
    }
    t.close_records();
    if let Some(log) = &t.log {
        for l in log {
            println!("{l}");
        }
    }
    out.adopted = t.events.iter().any(|(_, _, e)| e.contains("Recovered") && !e.contains("adopted: []"));
    let mut errs: Vec<String> = t.violations.iter().take(3).cloned().collect();
    let wb = wait_bound(&s, s.arbiter_crash.is_some(), out.holder_crashed);
    for &(id, w) in &t.waits {
        out.max_wait = out.max_wait.max(w);
        if w > wb {
            errs.push(format!("robot {id} waited {w:?} for the token, bound {wb:?}"));
        }
    }
    let gb = gap_bound(&s);
    for &g in &t.gaps {
        out.max_gap = out.max_gap.max(g);
        if g > gb {
            errs.push(format!("nobody sent BH for {g:?} while robots waited, bound {gb:?}"));
        }
    }
    out.rate_changes = check_protection(&s, seed, &mut errs);
    let mut h = t.hash.clone();
    h.write_u64(t.waits.len() as u64);
    out.hash = h.finish();
    if errs.is_empty() { Ok(out) } else { Err(errs.join("\n")) }
}

/// Feeds each robot's LS flow (true-time arrivals, seen on the robot's clock) to its
/// controller and checks that every message is protected except while the model warms up and
/// the first one at the new rate.
fn check_protection(s: &Scenario, seed: u64, errs: &mut Vec<String>) -> u64 {
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0x15);
    let cfg = ControllerConfig::default();
    let mut changes = 0;
    for (i, &(before, after, at)) in s.ls.iter().enumerate() {
        let clock = s.clocks[i];
        let mut ctrl = Controller::new(cfg).unwrap();
        let mut base = Instant::from_millis(rng.random_range(0..30));
        let change = Instant::ZERO + at;
        let (mut changed, mut exempt) = (false, cfg.min_samples + 1);
        while base < Instant::ZERO + RUN {
            let j = rng.random_range(0..=2 * s.ls_jitter.as_nanos() as u64);
            let actual = clock.local(base.saturating_sub(s.ls_jitter) + Duration::from_nanos(j));
            if exempt == 0 && !ctrl.in_window(actual) {
                errs.push(format!(
                    "robot {}: LS message at {actual:?} (local) unprotected; windows {:?}",
                    i + 1,
                    ctrl.windows(actual.saturating_sub(100 * MS), 200 * MS)
                ));
                return changes;
            }
            exempt = exempt.saturating_sub(1);
            if ctrl.observe(0, actual) == Observation::RateChanged {
                changes += 1;
            }
            let period = if base >= change { after } else { before };
            if base >= change && !changed {
                changed = true;
                // The first message at the new rate cannot be predicted; the second must be.
                exempt = 1;
            }
            base += period;
        }
    }
    changes
}

#[test]
fn faults_over_many_seeds() {
    let only: Option<u64> = std::env::var("COHORT_SEED").ok().and_then(|v| v.parse().ok());
    let seeds: Vec<u64> = only.map_or_else(|| (0..SEEDS).collect(), |s| vec![s]);
    let (mut mid_slice, mut holder, mut adopted, mut changes) = (0, 0, 0, 0);
    let (mut max_wait, mut max_gap) = (Duration::ZERO, Duration::ZERO);
    for &seed in &seeds {
        match run_seed(seed, only.is_some()) {
            Ok(o) => {
                mid_slice += u32::from(o.arbiter_crashed_mid_slice);
                holder += u32::from(o.holder_crashed);
                adopted += u32::from(o.adopted);
                changes += o.rate_changes;
                max_wait = max_wait.max(o.max_wait);
                max_gap = max_gap.max(o.max_gap);
            }
            Err(e) => panic!(
                "seed {seed} failed:\n{e}\nreplay: COHORT_SEED={seed} cargo test -p cohort-proto \
                 preempt::tests_faults::faults_over_many_seeds -- --nocapture"
            ),
        }
    }
    println!(
        "{} seeds: arbiter crashed mid-slice {mid_slice}, holder crashed {holder}, grants adopted {adopted}, \
         LS rate changes {changes}, longest wait {max_wait:?}, longest gap {max_gap:?}",
        seeds.len()
    );
    if only.is_none() {
        // The faults really happened, often.
        let n = seeds.len() as u32;
        assert!(mid_slice > n / 2 && holder > n / 2 && adopted > n / 20, "{mid_slice} {holder} {adopted}");
        assert!(changes >= u64::from(n) * 3);
    }
}

#[test]
fn the_same_seed_gives_the_same_trace() {
    for seed in [3, 77] {
        let a = run_seed(seed, false).unwrap();
        let b = run_seed(seed, false).unwrap();
        assert_eq!((a.hash, a.max_wait, a.max_gap), (b.hash, b.max_wait, b.max_gap));
    }
    assert_ne!(run_seed(3, false).unwrap().hash, run_seed(77, false).unwrap().hash);
}
