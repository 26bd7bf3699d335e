//! Script-like tests of the bulk token on a simulated team: robots on one broadcast domain
//! with random delay and loss, drifting clocks, bulk workloads, crashes and arbiter take-over,
//! in virtual (true) time. The seeded fault simulation over many seeds is in
//! [`super::tests_faults`]; it drives the same [`Team`].

use super::arbiter::{Arbiter, Phase};
use super::client::{Client, ClientEvent, ClientState, StopReason};
use super::*;
use cohort_time::Instant;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap};
use std::hash::{DefaultHasher, Hash};

pub(super) const MS: Duration = Duration::from_millis(1);

/// A robot's clock: `local(t) = offset + t·(1 + ppm/10⁶)`, never running backwards.
#[derive(Debug, Clone, Copy)]
pub(super) struct Clock {
    pub offset_ns: u64,
    pub ppm: i64,
}

impl Clock {
    pub fn local(&self, t: Instant) -> Instant {
        let t = i128::from(t.as_nanos());
        Instant::from_nanos((i128::from(self.offset_ns) + t + t * i128::from(self.ppm) / 1_000_000) as u64)
    }

    /// The earliest true time at which the clock reads at least `l`.
    pub fn true_at(&self, l: Instant) -> Instant {
        if l == Instant::FAR_FUTURE {
            return l;
        }
        let d = i128::from(l.as_nanos()) - i128::from(self.offset_ns);
        if d <= 0 {
            return Instant::ZERO;
        }
        let mut t = (d * 1_000_000 / (1_000_000 + i128::from(self.ppm))).max(0) as u64;
        while self.local(Instant::from_nanos(t)) < l {
            t += 1;
        }
        while t > 0 && self.local(Instant::from_nanos(t - 1)) >= l {
            t -= 1;
        }
        Instant::from_nanos(t)
    }
}

/// One robot: its clock, its client, maybe the arbiter, and a bulk workload.
#[derive(Debug)]
pub(super) struct Robot {
    pub clock: Clock,
    pub client: Client,
    pub arbiter: Option<Arbiter>,
    /// BH time still needed for the current bulk (true time), if the robot has bulk.
    pub bulk_left: Option<Duration>,
    /// When the robot next gets bulk to send (true time), if the workload is automatic.
    pub next_bulk: Option<Instant>,
    /// Since when the robot has wanted the token without being allowed to send.
    pub waiting_from: Option<Instant>,
    pub may_send: bool,
}

type Flight = Reverse<(Instant, u64, u32, u32, Vec<u8>)>;
/// `true`: drop this message from `from` to `to`.
pub(super) type Filter = Box<dyn FnMut(Instant, u32, u32, &PreemptRepr) -> bool>;

/// The team in true time.
pub(super) struct Team {
    pub cfg: Config,
    pub now: Instant,
    pub robots: BTreeMap<u32, Robot>,
    air: BinaryHeap<Flight>,
    seq: u64,
    pub rng: ChaCha8Rng,
    pub loss: f64,
    pub delay: (Duration, Duration),
    pub drop: Filter,
    /// Automatic workload: bulk sizes and idle gaps drawn from these ranges (true time).
    pub bulk_range: (Duration, Duration),
    pub idle_range: (Duration, Duration),
    /// Crash detection delay of the group layer before the next robot runs the arbiter.
    pub detect: Duration,
    takeover_at: Option<Instant>,
    pub log: Option<Vec<String>>,
    pub events: Vec<(Instant, u32, String)>,
    pub hash: DefaultHasher,
    // Invariant bookkeeping.
    pub max_holders: usize,
    pub waits: Vec<(u32, Duration)>,
    pub gaps: Vec<Duration>,
    gap_from: Option<Instant>,
    pub violations: Vec<String>,
    buf: Vec<u8>,
}

impl Team {
    /// `n` robots with ids 1..=n, perfect clocks, 1 ms delay, no loss; robot 1 runs the
    /// arbiter from time zero.
    pub fn new(cfg: Config, n: u32, seed: u64) -> Self {
        let mut t = Team {
            cfg,
            now: Instant::ZERO,
            robots: BTreeMap::new(),
            air: BinaryHeap::new(),
            seq: 0,
            rng: ChaCha8Rng::seed_from_u64(seed),
            loss: 0.0,
            delay: (MS, MS),
            drop: Box::new(|_, _, _, _| false),
            bulk_range: (Duration::ZERO, Duration::ZERO),
            idle_range: (Duration::ZERO, Duration::ZERO),
            detect: Duration::from_secs(1),
            takeover_at: None,
            log: None,
            events: Vec::new(),
            hash: DefaultHasher::new(),
            max_holders: 0,
            waits: Vec::new(),
            gaps: Vec::new(),
            gap_from: None,
            violations: Vec::new(),
            buf: vec![0u8; MAX_DATAGRAM],
        };
        for id in 1..=n {
            let robot = Robot {
                clock: Clock { offset_ns: 0, ppm: 0 },
                client: Client::new(cfg, id).unwrap(),
                arbiter: None,
                bulk_left: None,
                next_bulk: None,
                waiting_from: None,
                may_send: false,
            };
            t.robots.insert(id, robot);
        }
        t
    }

    /// Starts the arbiter on robot `id` now, for the live robots.
    pub fn start_arbiter(&mut self, id: u32) {
        let members: Vec<u32> = self.robots.keys().copied().collect();
        let r = self.robots.get_mut(&id).unwrap();
        let local = r.clock.local(self.now);
        let a = Arbiter::new(self.cfg, id, &members, r.client.highest_epoch(), local).unwrap();
        let epoch = a.epoch();
        r.arbiter = Some(a);
        self.note(id, format!("arbiter starts, epoch {epoch:?}"));
        self.flush();
    }

    pub fn local(&self, id: u32) -> Instant {
        self.robots[&id].clock.local(self.now)
    }

    pub fn client(&self, id: u32) -> &Client {
        &self.robots[&id].client
    }

    pub fn arbiter_host(&self) -> Option<u32> {
        self.robots
            .iter()
            .find(|(_, r)| r.arbiter.as_ref().is_some_and(|a| a.phase() != Phase::StoodDown))
            .map(|(i, _)| *i)
    }

    fn note(&mut self, id: u32, s: String) {
        if let Some(log) = &mut self.log {
            log.push(format!("{:?} r{id}: {s}", self.now));
        }
        self.events.push((self.now, id, s));
    }

    /// Robot `id` gets bulk needing `need` of BH time.
    pub fn want(&mut self, id: u32, need: Duration) {
        let local = self.local(id);
        let r = self.robots.get_mut(&id).unwrap();
        r.bulk_left = Some(need);
        r.client.want(local);
        self.flush();
    }

    /// Robot `id`'s bulk is done early.
    pub fn finish(&mut self, id: u32) {
        let local = self.local(id);
        let r = self.robots.get_mut(&id).unwrap();
        r.bulk_left = None;
        r.client.finished(local);
        self.flush();
    }

    /// Robot `id` crashes; if it ran the arbiter, the next robot takes over after `detect`.
    pub fn crash(&mut self, id: u32) {
        let r = self.robots.remove(&id).unwrap();
        self.note(id, "crashes".into());
        if r.arbiter.is_some_and(|a| a.phase() != Phase::StoodDown) {
            self.takeover_at = Some(self.now + self.detect);
        }
        self.check();
    }

    fn deliver(&mut self, to: u32, from: u32, bytes: &[u8]) {
        let Some(r) = self.robots.get_mut(&to) else { return };
        let local = r.clock.local(self.now);
        (self.now, from, to, bytes).hash(&mut self.hash);
        let Ok(repr) = PreemptRepr::parse(bytes) else { panic!("robots sent a malformed datagram") };
        if matches!(repr.msg, Message::Grant { .. } | Message::Revoke { .. } | Message::Query) {
            r.client.handle_message(local, from, &repr);
        }
        if let Some(a) = &mut r.arbiter {
            a.handle_message(local, from, &repr);
        }
    }

    /// Sends whatever the machines want to send and collects their events.
    fn flush(&mut self) {
        loop {
            let mut any = false;
            let ids: Vec<u32> = self.robots.keys().copied().collect();
            for &p in &ids {
                loop {
                    let r = self.robots.get_mut(&p).unwrap();
                    let local = r.clock.local(self.now);
                    let tx = match r.arbiter.as_mut().and_then(|a| a.poll_transmit(local, &mut self.buf)) {
                        Some(tx) => Some(tx),
                        None => r.client.poll_transmit(local, &mut self.buf),
                    };
                    let Some(tx) = tx else { break };
                    any = true;
                    let bytes = self.buf[..tx.len].to_vec();
                    let repr = PreemptRepr::parse(&bytes).unwrap();
                    let tos: Vec<u32> = match tx.dest {
                        Dest::Broadcast => ids.clone(),
                        Dest::Unicast(q) => vec![q],
                    };
                    for to in tos {
                        let lost = to != p && (self.rng.random_bool(self.loss) || (self.drop)(self.now, p, to, &repr));
                        if lost {
                            continue;
                        }
                        let d =
                            if to == p { Duration::ZERO } else { self.rng.random_range(self.delay.0..=self.delay.1) };
                        self.seq += 1;
                        self.air.push(Reverse((self.now + d, self.seq, to, p, bytes.clone())));
                    }
                }
                let mut notes = Vec::new();
                let r = self.robots.get_mut(&p).unwrap();
                while let Some(e) = r.client.poll_event() {
                    any = true;
                    notes.push(format!("{e:?}"));
                }
                while let Some(e) = r.arbiter.as_mut().and_then(Arbiter::poll_event) {
                    any = true;
                    notes.push(format!("arbiter {e:?}"));
                }
                for n in notes {
                    self.note(p, n);
                }
            }
            if !any {
                break;
            }
        }
        self.check();
    }

    /// Checks the invariants at the current instant and keeps the wait and gap records.
    fn check(&mut self) {
        let now = self.now;
        let mut holders = 0;
        let mut someone_waits = false;
        for (&id, r) in &mut self.robots {
            let may = r.client.may_send(r.clock.local(now));
            if may {
                holders += 1;
            }
            r.may_send = may;
            let wants = r.client.wants();
            match (wants && !may, r.waiting_from) {
                (true, None) => r.waiting_from = Some(now),
                (false, Some(from)) => {
                    self.waits.push((id, now - from));
                    r.waiting_from = None;
                }
                _ => {}
            }
            someone_waits |= wants && !may;
        }
        self.max_holders = self.max_holders.max(holders);
        if holders > self.cfg.limit {
            let who: Vec<u32> = self.robots.iter().filter(|(_, r)| r.may_send).map(|(i, _)| *i).collect();
            self.violations.push(format!("{now:?}: {holders} robots may send BH ({who:?}), limit {}", self.cfg.limit));
        }
        match (someone_waits && holders == 0, self.gap_from) {
            (true, None) => self.gap_from = Some(now),
            (false, Some(from)) => {
                self.gaps.push(now - from);
                self.gap_from = None;
            }
            _ => {}
        }
    }

    /// Closes the open wait and gap records at the end of a run.
    pub fn close_records(&mut self) {
        let now = self.now;
        for (&id, r) in &mut self.robots {
            if let Some(from) = r.waiting_from.take() {
                self.waits.push((id, now - from));
            }
        }
        if let Some(from) = self.gap_from.take() {
            self.gaps.push(now - from);
        }
    }

    fn next_time(&self) -> Option<Instant> {
        let mut next = self.air.peek().map(|f| f.0.0);
        let mut at = |t: Instant| next = Some(next.map_or(t, |n: Instant| n.min(t)));
        if let Some(t) = self.takeover_at {
            at(t);
        }
        for r in self.robots.values() {
            if let Some(l) = r.client.poll_timeout() {
                at(r.clock.true_at(l));
            }
            if let Some(l) = r.arbiter.as_ref().and_then(Arbiter::poll_timeout) {
                at(r.clock.true_at(l));
            }
            if let (true, Some(left)) = (r.may_send, r.bulk_left) {
                at(self.now + left);
            }
            if let (None, Some(t)) = (r.bulk_left, r.next_bulk) {
                at(t);
            }
        }
        next
    }

    /// Advances to the next event, or to `limit` if none comes before; `false` then.
    pub fn step(&mut self, limit: Instant) -> bool {
        let t = self.next_time().unwrap_or(Instant::FAR_FUTURE).max(self.now);
        let t_end = t.min(limit);
        // BH time spent by the robots allowed to send since the last step.
        let dt = t_end - self.now;
        for r in self.robots.values_mut() {
            if let (true, Some(left)) = (r.may_send, r.bulk_left.as_mut()) {
                *left = left.saturating_sub(dt);
            }
        }
        self.now = t_end;
        if t > limit {
            self.check();
            return false;
        }
        if self.takeover_at.is_some_and(|t| t <= self.now) {
            self.takeover_at = None;
            if let Some(&id) = self.robots.keys().next() {
                self.start_arbiter(id);
            }
        }
        while self.air.peek().is_some_and(|f| f.0.0 <= self.now) {
            let Reverse((_, _, to, from, bytes)) = self.air.pop().unwrap();
            self.deliver(to, from, &bytes);
        }
        let ids: Vec<u32> = self.robots.keys().copied().collect();
        for id in ids {
            let (lo, hi) = (self.bulk_range, self.idle_range);
            let r = self.robots.get_mut(&id).unwrap();
            let local = r.clock.local(self.now);
            if r.client.poll_timeout().is_some_and(|t| t <= local) {
                r.client.handle_timeout(local);
            }
            if let Some(a) = &mut r.arbiter
                && a.poll_timeout().is_some_and(|t| t <= local)
            {
                a.handle_timeout(local);
            }
            if r.bulk_left.is_some_and(|l| l.is_zero()) {
                r.bulk_left = None;
                r.client.finished(local);
                r.next_bulk = r.next_bulk.map(|_| self.now + self.rng.random_range(hi.0..=hi.1));
            }
            if r.bulk_left.is_none() && r.next_bulk.is_some_and(|t| t <= self.now) {
                r.bulk_left = Some(self.rng.random_range(lo.0..=lo.1));
                r.client.want(local);
            }
        }
        self.flush();
        true
    }

    pub fn run_for(&mut self, d: Duration) {
        let limit = self.now + d;
        let mut n = 0u64;
        let mut spin = crate::spin::SpinGuard::new(self.now);
        while self.step(limit) {
            n += 1;
            assert!(n < 5_000_000, "runaway at {:?}", self.now);
            spin.step(self.now, || format!("{:?}", &self.events[self.events.len().saturating_sub(10)..]));
        }
    }

    /// Runs until robot `id` notes an event containing `pat` (from now on), for at most `d`.
    pub fn until(&mut self, id: u32, pat: &str, d: Duration) -> Instant {
        let (start, limit) = (self.now, self.now + d);
        let mut n = 0u64;
        loop {
            n += 1;
            assert!(
                n < 5_000_000,
                "runaway at {:?}: {:?}",
                self.now,
                &self.events[self.events.len().saturating_sub(10)..]
            );
            if let Some((t, _, _)) = self.events.iter().find(|(t, i, e)| *t >= start && *i == id && e.contains(pat)) {
                return *t;
            }
            assert!(self.step(limit), "r{id} noted no {pat:?} by {:?}: {:#?}", self.now, self.events);
        }
    }

    /// The robots that may send BH now.
    pub fn holders(&self) -> Vec<u32> {
        self.robots.iter().filter(|(_, r)| r.may_send).map(|(i, _)| *i).collect()
    }
}

fn cfg() -> Config {
    Config { timeslice: Duration::from_secs(2), lease: 400 * MS, renew_interval: 100 * MS, ..Config::default() }
}

fn team(n: u32) -> Team {
    let mut t = Team::new(cfg(), n, 1);
    t.start_arbiter(1);
    t.run_for(50 * MS);
    t
}

#[test]
fn config_validation_names_the_bad_field() {
    assert_eq!(Config::default().validate(), Ok(()));
    let bad = |f: fn(&mut Config)| {
        let mut c = Config::default();
        f(&mut c);
        c.validate().unwrap_err()
    };
    assert_eq!(bad(|c| c.limit = 0), ConfigError::Limit);
    assert!(matches!(bad(|c| c.lease = 15 * MS), ConfigError::Lease { .. }));
    assert!(matches!(bad(|c| c.renew_interval = c.lease), ConfigError::Renew { .. }));
    assert!(matches!(bad(|c| c.timeslice = Duration::ZERO), ConfigError::Timeslice(_)));
    assert_eq!(bad(|c| c.max_drift_ppm = 200_000), ConfigError::Drift(200_000));
    assert!(Client::new(Config { limit: 0, ..cfg() }, 1).is_err());
    // The drift arithmetic: a holder counts less than the arbiter promised, a waiter more.
    let c = Config::default();
    assert!(c.holder_lease(c.lease) < c.lease - c.guard + MS);
    assert!(c.stretch(c.lease) > c.lease && c.shrink(c.lease) < c.lease);
}

#[test]
fn grants_in_request_order_and_slices_take_turns() {
    let mut t = team(3);
    t.want(2, Duration::from_secs(100));
    let g2 = t.until(2, "MaySend", 100 * MS);
    t.want(3, Duration::from_secs(100));
    t.run_for(5 * MS);
    t.want(1, Duration::from_secs(100));
    assert_eq!(t.holders(), [2]);
    // Robot 2's slice ends; 3 (next in the queue) follows, then 1, then 2 again.
    let g3 = t.until(3, "MaySend", Duration::from_secs(3));
    assert!(g3 - g2 <= cfg().timeslice, "slice {:?}", g3 - g2);
    let g1 = t.until(1, "MaySend", Duration::from_secs(3));
    let g2b = t.until(2, "MaySend", Duration::from_secs(3));
    assert!(g3 < g1 && g1 < g2b);
    assert_eq!(t.max_holders, 1);
    assert!(t.violations.is_empty(), "{:?}", t.violations);
}

#[test]
fn early_release_hands_over_at_once() {
    let mut t = team(3);
    t.want(2, Duration::from_secs(100));
    t.until(2, "MaySend", 100 * MS);
    t.want(3, Duration::from_secs(100));
    t.run_for(300 * MS);
    t.finish(2);
    let start = t.now;
    let g3 = t.until(3, "MaySend", 100 * MS);
    assert!(g3 - start <= 3 * MS, "hand-over took {:?}", g3 - start);
    assert!(t.events.iter().any(|(_, i, e)| *i == 2 && e.contains("Finished")));
    let a = t.robots[&1].arbiter.as_ref().unwrap();
    assert_eq!(a.stats().releases, 1);
}

#[test]
fn holder_crash_costs_at_most_one_lease() {
    let mut t = team(3);
    t.want(2, Duration::from_secs(100));
    t.until(2, "MaySend", 100 * MS);
    t.want(3, Duration::from_secs(100));
    t.run_for(500 * MS);
    t.crash(2);
    let start = t.now;
    let g3 = t.until(3, "MaySend", Duration::from_secs(2));
    assert!(g3 - start <= cfg().lease + 2 * MS, "took {:?}", g3 - start);
    assert!(t.events.iter().any(|(_, i, e)| *i == 1 && e.contains("Expired")));
}

#[test]
fn takeover_adopts_the_holder_and_never_grants_twice() {
    let mut t = team(4);
    t.want(2, Duration::from_secs(100));
    t.until(2, "MaySend", 100 * MS);
    t.want(3, Duration::from_secs(100));
    t.want(4, Duration::from_secs(100));
    t.run_for(700 * MS);
    // The group layer detects the crash faster than a lease runs out: the slice survives.
    t.detect = 200 * MS;
    t.crash(1);
    // Robot 2 takes over after `detect`; the holder keeps its slice, reported and adopted.
    let rec = t.until(2, "arbiter Recovered", Duration::from_secs(3));
    let ev = t.events.iter().find(|(at, i, e)| *at == rec && *i == 2 && e.contains("Recovered")).unwrap();
    assert!(ev.2.contains("adopted: [2]") && ev.2.contains("queued: [3, 4]") && ev.2.contains("early: true"), "{ev:?}");
    assert_eq!(t.holders(), [2]);
    // The adopted slice ends within the original one; robot 3 is next, then 4.
    let g3 = t.until(3, "MaySend", Duration::from_secs(3));
    assert!(g3 <= Instant::ZERO + Duration::from_millis(50) + cfg().timeslice + 200 * MS, "{g3:?}");
    t.until(4, "MaySend", Duration::from_secs(3));
    assert_eq!(t.max_holders, 1);
    assert!(t.violations.is_empty(), "{:?}", t.violations);
    assert!(t.client(3).highest_epoch() > Epoch { round: 1, arbiter: 1 });
}

#[test]
fn silent_member_makes_the_new_arbiter_wait_the_full_takeover() {
    let mut t = team(4);
    t.want(3, Duration::from_secs(100));
    t.until(3, "MaySend", 100 * MS);
    t.want(4, Duration::from_secs(100));
    t.run_for(200 * MS);
    // Robot 3 holds and goes deaf and mute: the new arbiter (robot 2) cannot rule its lease out.
    t.drop = Box::new(|_, from, to, _| from == 3 || to == 3);
    t.crash(1);
    let crashed = t.now;
    let g4 = t.until(4, "MaySend", Duration::from_secs(5));
    let host_start = crashed + t.detect;
    assert!(g4 >= host_start + (cfg().takeover_wait() - MS), "granted at {g4:?} before the take-over wait");
    assert!(t.violations.is_empty(), "{:?}", t.violations);
    assert!(matches!(t.client(3).state(), ClientState::Idle | ClientState::Waiting { .. }));
}

#[test]
fn grants_of_an_older_epoch_are_refused() {
    let cfg = cfg();
    let mut c = Client::new(cfg, 5).unwrap();
    let now = Instant::from_millis(10);
    c.want(now);
    let newer = Epoch { round: 2, arbiter: 3 };
    let older = Epoch { round: 1, arbiter: 1 };
    c.handle_message(now, 3, &PreemptRepr { sender: 3, epoch: newer, msg: Message::Query });
    let grant = |epoch: Epoch| PreemptRepr {
        sender: epoch.arbiter,
        epoch,
        msg: Message::Grant { holder: 5, seq: 1, lease_us: 400_000, slice_us: 2_000_000, echo: now.as_nanos() },
    };
    c.handle_message(now, 1, &grant(older));
    assert!(!c.may_send(now));
    assert_eq!(c.stats().stale, 1);
    // A grant claiming an epoch of another arbiter than its sender is ignored too.
    c.handle_message(now, 1, &PreemptRepr { sender: 1, ..grant(newer) });
    assert!(!c.may_send(now));
    c.handle_message(now, 3, &grant(newer));
    assert!(c.may_send(now));
    assert!(c.send_until().unwrap() < now + (cfg.lease - cfg.guard + MS));
    // Revoke under the wrong token: ignored; under the right one: stop and queue again.
    let revoke =
        |seq| PreemptRepr { sender: 3, epoch: newer, msg: Message::Revoke { holder: 5, grant_epoch: newer, seq } };
    c.handle_message(now, 3, &revoke(2));
    assert!(c.may_send(now));
    c.handle_message(now, 3, &revoke(1));
    assert!(!c.may_send(now));
    assert!(matches!(c.state(), ClientState::Waiting { .. }));
    let evs: Vec<ClientEvent> = std::iter::from_fn(|| c.poll_event()).collect();
    assert_eq!(evs.last(), Some(&ClientEvent::MustStop { reason: StopReason::Revoked }));
}

#[test]
fn malformed_and_spoofed_datagrams_are_counted_not_fatal() {
    let mut t = team(2);
    let local = t.local(1);
    let a = t.robots.get_mut(&1).unwrap().arbiter.as_mut().unwrap();
    a.handle_datagram(local, 2, &[1, 2, 3]);
    a.handle_datagram(local, 2, &[9; 30]);
    // A request that claims to come from robot 2 but arrived from robot 7.
    let mut b = [0u8; MAX_DATAGRAM];
    let n = PreemptRepr { sender: 2, epoch: Epoch::ZERO, msg: Message::Request { stamp: 1 } }.emit(&mut b).unwrap();
    a.handle_datagram(local, 7, &b[..n]);
    assert_eq!(a.stats().malformed, 3);
    assert_eq!(a.queue().count(), 0);
    let c = &mut t.robots.get_mut(&2).unwrap().client;
    c.handle_datagram(local, 1, &[]);
    assert_eq!(c.stats().malformed, 1);
}

#[test]
fn a_grant_nobody_wants_goes_straight_back() {
    let mut t = team(3);
    t.want(2, Duration::from_secs(100));
    t.until(2, "MaySend", 100 * MS);
    t.want(3, Duration::from_secs(100));
    t.run_for(10 * MS);
    // Robot 3 gives up while waiting; when the token comes it returns it unused.
    t.finish(3);
    t.finish(2);
    t.run_for(50 * MS);
    let a = t.robots[&1].arbiter.as_ref().unwrap();
    assert_eq!(a.stats().releases, 2, "{:?}", a.stats());
    assert!(a.slots().is_empty());
    assert!(t.holders().is_empty());
}

#[test]
fn an_old_arbiter_that_hears_a_newer_one_stands_down() {
    let mut t = team(3);
    t.want(2, Duration::from_secs(100));
    t.until(2, "MaySend", 100 * MS);
    // Robot 3 starts an arbiter although robot 1 still runs one (a false suspicion).
    t.start_arbiter(3);
    t.until(1, "SteppedDown", 100 * MS);
    assert_eq!(t.arbiter_host(), Some(3));
    t.want(1, Duration::from_secs(100));
    t.run_for(Duration::from_secs(3));
    assert!(t.violations.is_empty(), "{:?}", t.violations);
}

impl std::fmt::Debug for Team {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Team").field("now", &self.now).field("robots", &self.robots.keys()).finish()
    }
}

#[test]
fn the_checker_catches_a_clock_outside_the_drift_bound() {
    // Negative control: robot 2's clock runs 5 % slow, far outside max_drift_ppm, and it
    // loses touch with the arbiter while it holds. It then sends past the arbiter's lease and
    // overlaps the next holder; the harness must see it.
    let run = |ppm: i64| {
        let mut t = Team::new(cfg(), 3, 1);
        t.robots.get_mut(&2).unwrap().clock.ppm = ppm;
        t.start_arbiter(1);
        t.run_for(50 * MS);
        t.want(2, Duration::from_secs(100));
        t.until(2, "MaySend", 100 * MS);
        t.want(3, Duration::from_secs(100));
        t.run_for(100 * MS);
        t.drop = Box::new(|_, from, to, _| (from, to) == (1, 2) || (from, to) == (2, 1));
        t.run_for(Duration::from_secs(2));
        t.violations.len()
    };
    assert_eq!(run(-400), 0, "within the bound");
    assert!(run(-50_000) > 0, "the checker missed an overlap");
}
