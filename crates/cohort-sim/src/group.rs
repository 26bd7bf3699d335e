//! Deterministic simulation of GCBRR groups (`cohort_proto::group`) on the shared 802.11
//! channel of `cohort_medium::wifi`, with the invariants of seed 003 checked as it runs.
//!
//! One seed decides everything: the team size, which processes start outside the group, the
//! crashes (and restarts, with a larger incarnation), the voluntary leaves, the loss (a base
//! rate and bursts, drawn per receiver, so broadcasts are non-atomic) and the duplication.
//! Faults happen during the first [`GroupScenario::fault_s`] seconds; then the channel is
//! clean for [`GroupScenario::quiet_s`] seconds while processes that left rejoin.
//!
//! Checked after every step:
//! * **STA**: two live members that hold the same (pid, incarnation) hold it with the same
//!   ticket.
//! * **GM1**: at most one live process that nobody has removed considers itself coordinator
//!   (a falsely suspected process counts as removed from the moment the first process removes
//!   it; it stands down when it learns, see the `cohort_proto::group` docs).
//! * **GM3**: a member leaves the group only by crashing, by its own leave, or when expelled
//!   after some process removed it; never expelled in a run without false suspicions.
//! * **Requests**: each addressed process handles a request at most once; every reply the
//!   coordinator reports is the addressed process's own answer to that very request; a
//!   process reported failed was removed (or crashed); so a process that stays correct is in
//!   the replies: exactly once.
//!
//! At the end, **GM2** (for a group that never lost all its members, the paper's model: the
//! scenario never crashes or withdraws the last member): every live process is a member, all views are equal, they name one
//! coordinator, and that view holds exactly the live processes with their current
//! incarnations.
//!
//! The same seed gives the same trace hash. A failing seed prints how to replay it:
//! `cargo run -p cohort-sim --release --example group_sweep -- --seed N`.

use cohort_medium::wifi::{Ac, Dest as WifiDest, EdcaParams, Medium, MediumEvent, Phy, StationConfig};
use cohort_proto::group::{Config, Dest, Event, IncomingId, LeftReason, Member, RemoveReason, State};
use cohort_time::Instant;
use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet, BinaryHeap};
use std::time::Duration;

/// Shape of the random runs.
#[derive(Debug, Clone, PartialEq)]
pub struct GroupScenario {
    /// Processes in the initial group: a random number in this range.
    pub members_min: usize,
    pub members_max: usize,
    /// Processes that start outside and join: up to this many.
    pub outsiders_max: usize,
    /// Seconds during which faults happen.
    pub fault_s: f64,
    /// Clean seconds after the faults, for the group to converge.
    pub quiet_s: f64,
    /// Most crashes per run (each restarts after 0.1-0.6 s).
    pub crashes_max: usize,
    /// Most voluntary leaves per run (each rejoins later).
    pub leaves_max: usize,
    /// Most loss bursts (20-250 ms, 30-90% loss) per run.
    pub bursts_max: usize,
    /// Base loss per delivery during the fault period: up to this.
    pub loss_max: f64,
    /// Duplication per delivery during the fault period: up to this.
    pub duplicate_max: f64,
    pub protocol: Config,
}

impl Default for GroupScenario {
    fn default() -> Self {
        GroupScenario {
            members_min: 3,
            members_max: 7,
            outsiders_max: 2,
            fault_s: 2.0,
            quiet_s: 2.5,
            crashes_max: 2,
            leaves_max: 2,
            bursts_max: 2,
            loss_max: 0.05,
            duplicate_max: 0.05,
            protocol: Config {
                msg_t: Duration::from_millis(15),
                fault_detect_t: Duration::from_millis(300),
                heartbeat_t: Duration::from_millis(60),
                max_payload: 1400,
                // Half the seeds turn it on (`run_group`): both kinds of repair are exercised.
                early_repair: false,
                ..Config::default()
            },
        }
    }
}

/// What one seeded run did.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct GroupOutcome {
    pub seed: u64,
    pub trace_hash: String,
    pub violations: Vec<String>,
    pub processes: usize,
    pub frames: u64,
    pub requests_completed: u64,
    pub replies: u64,
    pub crashes: u64,
    pub joins: u64,
    pub leaves: u64,
    /// Suspicions of processes that were alive.
    pub false_suspicions: u64,
    pub expulsions: u64,
    pub coordinator_changes: u64,
    /// Every member was gone at some point (outside the paper's model; GM2 not checked).
    pub group_vanished: bool,
}

impl GroupOutcome {
    pub fn ok(&self) -> bool {
        self.violations.is_empty()
    }
}

/// Whether `p` is the only live member: the paper's model (§V) needs one correct member at
/// all times, so the scenario never crashes or withdraws the last one.
/// Whether crashing or withdrawing `p` could leave the group without members: no other
/// member stays (one that is leaving will be gone after its leave poll).
fn sole_member(procs: &BTreeMap<u32, Proc>, p: u32) -> bool {
    !procs.iter().any(|(&q, pr)| q != p && pr.member.as_ref().is_some_and(|m| m.state() == State::Normal))
}

/// The command that replays `seed`.
pub fn replay_command(seed: u64) -> String {
    format!("cargo run -p cohort-sim --release --example group_sweep -- --seed {seed}")
}

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
    fn chance(&mut self, p: f64) -> bool {
        self.unit() < p
    }
    fn secs(&mut self, lo: f64, hi: f64) -> Instant {
        Instant::ZERO + Duration::from_secs_f64(lo + (hi - lo) * self.unit())
    }
}

#[derive(Debug, Clone)]
enum Action {
    Crash(u32),
    Restart(u32),
    Leave(u32),
    Join(u32),
    Reply(u32, u32, IncomingId, Vec<u8>),
    Coordinate(u32, u32),
}

/// A duplicated datagram: when it lands, a tie-breaker, the receiver, the bytes.
type Duplicate = (Instant, u64, u32, Vec<u8>);

/// Scripted actions in time order (ties in the order scheduled).
#[derive(Default)]
struct Actions {
    due: BTreeMap<(Instant, u64), Action>,
    seq: u64,
}

impl Actions {
    fn schedule(&mut self, at: Instant, a: Action) {
        self.seq += 1;
        self.due.insert((at, self.seq), a);
    }
    fn next_at(&self) -> Option<Instant> {
        self.due.first_key_value().map(|(k, _)| k.0)
    }
    fn pop_due(&mut self, now: Instant) -> Option<Action> {
        if self.next_at()? > now {
            return None;
        }
        self.due.pop_first().map(|(_, a)| a)
    }
}

/// A request in flight, as the checker sees it.
struct Issued {
    dsts: Vec<u32>,
    data: Vec<u8>,
}

struct Proc {
    member: Option<Member>,
    /// Largest incarnation used so far (a restart starts above it).
    max_inc: u32,
}

fn answer(pid: u32, inc: u32, data: &[u8]) -> Vec<u8> {
    let mut r = data.to_vec();
    r.extend_from_slice(&pid.to_be_bytes());
    r.extend_from_slice(&inc.to_be_bytes());
    r
}

struct Hash(u64);

impl Hash {
    fn feed(&mut self, x: &[u8]) {
        for b in x {
            self.0 = (self.0 ^ u64::from(*b)).wrapping_mul(0x100_0000_01b3);
        }
    }
}

/// Runs one seed of `sc`.
pub fn run_group(sc: &GroupScenario, seed: u64) -> GroupOutcome {
    let mut rng = Rng(seed ^ 0x6A09_E667_F3BC_C908);
    let members = sc.members_min + rng.below(sc.members_max - sc.members_min + 1);
    let outsiders = rng.below(sc.outsiders_max + 1);
    let n = members + outsiders;
    // From the seed's bits (so the random draws stay what they were): half the seeds repair
    // early, half (crosswise) send every broadcast twice, half (crosswise again) keep `msg_t`
    // rather than learn it, and half (crosswise again) re-send the request in every repair
    // round rather than ask holders again without it.
    let copies = if (seed / 2) % 2 == 1 { sc.protocol.broadcast_copies.max(2) } else { sc.protocol.broadcast_copies };
    let cfg = Config {
        early_repair: sc.protocol.early_repair || seed % 2 == 1,
        broadcast_copies: copies,
        learn_msg_t: sc.protocol.learn_msg_t && (seed / 4).is_multiple_of(2),
        ask_again: sc.protocol.ask_again && (seed / 8).is_multiple_of(2),
        ..sc.protocol
    };
    let initial: Vec<u32> = (1..=members as u32).collect();
    let mut procs: BTreeMap<u32, Proc> = BTreeMap::new();
    for pid in 1..=n as u32 {
        let member = if pid as usize <= members {
            Member::with_group(cfg, pid, &initial, Instant::ZERO).expect("valid scenario")
        } else {
            let mut m = Member::new(cfg, pid, 0).expect("valid scenario");
            let _ = m.join(Instant::ZERO);
            m
        };
        procs.insert(pid, Proc { member: Some(member), max_inc: 0 });
    }
    let phy = Phy::ofdm(6.0);
    let mut medium: Medium<(u32, Vec<u8>)> =
        Medium::new(phy, EdcaParams::defaults(&phy), &vec![StationConfig::default(); n], seed).expect("valid");
    let fault_end = Instant::ZERO + Duration::from_secs_f64(sc.fault_s);
    let end = fault_end + Duration::from_secs_f64(sc.quiet_s);
    let base_loss = sc.loss_max * rng.unit();
    let dup = sc.duplicate_max * rng.unit();
    let bursts: Vec<(Instant, Instant, f64)> = (0..rng.below(sc.bursts_max + 1))
        .map(|_| {
            let at = rng.secs(0.1, sc.fault_s);
            (at, at + Duration::from_secs_f64(0.02 + 0.23 * rng.unit()), 0.3 + 0.6 * rng.unit())
        })
        .collect();
    let mut actions = Actions::default();
    let mut out = GroupOutcome {
        seed,
        trace_hash: String::new(),
        violations: vec![],
        processes: n,
        frames: 0,
        requests_completed: 0,
        replies: 0,
        crashes: 0,
        joins: 0,
        leaves: 0,
        false_suspicions: 0,
        expulsions: 0,
        coordinator_changes: 0,
        group_vanished: false,
    };
    for _ in 0..rng.below(sc.crashes_max + 1) {
        let at = rng.secs(0.1, sc.fault_s);
        actions.schedule(at, Action::Crash(1 + rng.below(n) as u32));
    }
    for _ in 0..rng.below(sc.leaves_max + 1) {
        let at = rng.secs(0.1, sc.fault_s);
        actions.schedule(at, Action::Leave(1 + rng.below(n) as u32));
    }
    // Deliveries: duplicates and the medium's, to (receiver, sender epoch irrelevant).
    let mut dups: BinaryHeap<Reverse<Duplicate>> = BinaryHeap::new();
    let mut dseq = 0u64;
    let mut hash = Hash(0xcbf2_9ce4_8422_2325);
    let mut buf = vec![0u8; Member::MAX_DATAGRAM];
    let mut now = Instant::ZERO;
    // Checker state.
    let mut excluded: BTreeSet<(u32, u32)> = BTreeSet::new();
    let mut handled: BTreeMap<(IncomingId, u32, u32), u32> = BTreeMap::new();
    let mut issued: BTreeMap<(u32, u32, u64), Issued> = BTreeMap::new();
    let mut tag = 0u64;
    let mut last_coord: Option<u32> = None;
    // Coordinators with a `Coordinate` action scheduled.
    let mut coordinating: BTreeSet<(u32, u32)> = BTreeSet::new();
    let mut steps = 0u64;
    let log = std::env::var_os("COHORT_GROUP_LOG").is_some();
    let violate = |out: &mut GroupOutcome, s: String| {
        if out.violations.len() < 20 {
            out.violations.push(s);
        }
    };
    loop {
        steps += 1;
        if steps > 3_000_000 {
            violate(&mut out, format!("runaway simulation at {now:?}"));
            break;
        }
        // 1. Scripted actions due.
        while let Some(action) = actions.pop_due(now) {
            match action {
                Action::Crash(p) if sole_member(&procs, p) => {}
                Action::Leave(p) if sole_member(&procs, p) => {}
                Action::Crash(p) => {
                    let pr = procs.get_mut(&p).expect("pid");
                    if let Some(m) = pr.member.take() {
                        pr.max_inc = pr.max_inc.max(m.incarnation());
                        out.crashes += 1;
                        if log {
                            eprintln!("{now:?} {p}: crash");
                        }
                        hash.feed(format!("crash {p} {now:?}").as_bytes());
                        let back = now + Duration::from_secs_f64(0.1 + 0.5 * rng.unit());
                        actions.schedule(back, Action::Restart(p));
                    }
                }
                Action::Restart(p) => {
                    let pr = procs.get_mut(&p).expect("pid");
                    let mut m = Member::new(cfg, p, pr.max_inc).expect("valid");
                    let _ = m.join(now);
                    pr.member = Some(m);
                }
                Action::Leave(p) => {
                    if let Some(m) = procs.get_mut(&p).and_then(|pr| pr.member.as_mut())
                        && m.is_member()
                        && m.leave(now).is_ok()
                    {
                        out.leaves += 1;
                    }
                }
                Action::Join(p) => {
                    if let Some(m) = procs.get_mut(&p).and_then(|pr| pr.member.as_mut()) {
                        let _ = m.join(now);
                    }
                }
                Action::Reply(p, inc, id, data) => {
                    if let Some(m) = procs.get_mut(&p).and_then(|pr| pr.member.as_mut())
                        && m.incarnation() == inc
                    {
                        let _ = m.reply(now, id, data);
                    }
                }
                Action::Coordinate(p, inc) => {
                    coordinating.remove(&(p, inc));
                    let Some(m) = procs.get_mut(&p).and_then(|pr| pr.member.as_mut()) else { continue };
                    if !m.is_coordinator() || m.incarnation() != inc || m.is_busy() {
                        continue;
                    }
                    let roll = rng.unit();
                    let quiet = now >= fault_end;
                    if roll < 0.12 || (quiet && roll < 0.3) {
                        let _ = m.check_joins(now, Duration::from_millis(10));
                    } else if roll < 0.17 {
                        let _ = m.check_leaves(now, Duration::from_millis(10));
                    } else {
                        let view = m.view().pids();
                        let dsts: Vec<u32> =
                            if rng.chance(0.5) { view } else { view.into_iter().filter(|_| rng.chance(0.6)).collect() };
                        tag += 1;
                        let data = tag.to_be_bytes().to_vec();
                        if let Ok(id) = m.request_reply(now, &dsts, data.clone(), Duration::from_millis(5)) {
                            issued.insert((p, inc, id.0), Issued { dsts, data });
                        }
                    }
                }
            }
        }
        // 2. Deliveries due.
        medium.handle_timeout(now);
        let mut arrivals: Vec<(u32, Vec<u8>)> = vec![];
        while let Some(ev) = medium.poll_event(now) {
            if let MediumEvent::Delivered { to, handle, .. } = ev {
                arrivals.push((to as u32 + 1, handle.1));
            }
        }
        while dups.peek().is_some_and(|d| d.0.0 <= now) {
            let Reverse((_, _, to, b)) = dups.pop().expect("peeked");
            arrivals.push((to, b));
        }
        let faulty = now < fault_end;
        for (to, bytes) in arrivals {
            let burst = bursts.iter().find(|b| (b.0..b.1).contains(&now)).map_or(0.0, |b| b.2);
            if faulty && (rng.chance(base_loss) || rng.chance(burst)) {
                continue;
            }
            if faulty && rng.chance(dup) {
                dseq += 1;
                dups.push(Reverse((
                    now + Duration::from_micros(100 + rng.below(2000) as u64),
                    dseq,
                    to,
                    bytes.clone(),
                )));
            }
            if let Some(m) = procs.get_mut(&to).and_then(|pr| pr.member.as_mut()) {
                m.handle_datagram(now, &bytes);
            }
        }
        // 3. Timers, transmissions, events.
        let pids: Vec<u32> = procs.keys().copied().collect();
        for &p in &pids {
            let Some(m) = procs.get_mut(&p).and_then(|pr| pr.member.as_mut()) else { continue };
            if m.poll_timeout().is_some_and(|t| t <= now) {
                m.handle_timeout(now);
            }
            while let Some(tx) = m.poll_transmit(now, &mut buf) {
                out.frames += 1;
                hash.feed(&now.as_nanos().to_be_bytes());
                hash.feed(&buf[..tx.len.min(64)]);
                let dest = match tx.dest {
                    Dest::Broadcast => WifiDest::Broadcast,
                    Dest::Unicast(q) if q >= 1 && q as usize <= n && q != p => WifiDest::Unicast(q as usize - 1),
                    Dest::Unicast(_) => continue,
                };
                let _ = medium.enqueue(now, p as usize - 1, Ac::Vo, dest, tx.len + 62, (p, buf[..tx.len].to_vec()));
            }
            let inc = m.incarnation();
            let evs: Vec<Event> = std::iter::from_fn(|| m.poll_event()).collect();
            let idle_coord = m.is_coordinator() && !m.is_busy();
            for ev in evs {
                hash.feed(format!("{p} {now:?} {ev:?}").as_bytes());
                if log {
                    eprintln!("{now:?} {p}/{inc}: {ev:?}");
                }
                match ev {
                    Event::Request { id, data } => {
                        let k = (id, p, inc);
                        let c = handled.entry(k).or_insert(0);
                        *c += 1;
                        if *c > 1 {
                            violate(&mut out, format!("{p} (inc {inc}) handled {id:?} twice"));
                        }
                        let at = now + Duration::from_micros(rng.below(4000) as u64);
                        actions.schedule(at, Action::Reply(p, inc, id, answer(p, inc, &data)));
                    }
                    Event::Replies(r) => {
                        out.requests_completed += 1;
                        out.replies += r.replies.len() as u64;
                        let Some(is) = issued.remove(&(p, inc, r.id.0)) else {
                            violate(&mut out, format!("{p}: replies for unknown request {:?}", r.id));
                            continue;
                        };
                        let id = IncomingId { coord: p, coord_incarnation: inc, seqno: r.id.0 };
                        for (q, data) in &r.replies {
                            let q_inc = u32::from_be_bytes(
                                data.get(data.len().saturating_sub(4)..)
                                    .and_then(|b| b.try_into().ok())
                                    .unwrap_or([0xFF; 4]),
                            );
                            if !is.dsts.contains(q) || *data != answer(*q, q_inc, &is.data) {
                                violate(&mut out, format!("{p}: wrong reply from {q} to {:?}", r.id));
                            } else if handled.get(&(id, *q, q_inc)).copied() != Some(1) {
                                violate(&mut out, format!("{q}: replied to {:?} without handling it once", r.id));
                            }
                        }
                        for q in &r.failed {
                            if !excluded.iter().any(|&(x, _)| x == *q) {
                                violate(&mut out, format!("{p}: {q} reported failed for {:?} but never removed", r.id));
                            }
                        }
                        for q in is.dsts.iter().filter(|&&q| q != p) {
                            if !r.replies.contains_key(q) && !r.failed.contains(q) {
                                violate(&mut out, format!("{p}: {q} neither replied to {:?} nor failed", r.id));
                            }
                        }
                    }
                    Event::Removed { pid, incarnation, reason } => {
                        excluded.insert((pid, incarnation));
                        let target_alive = procs
                            .get(&pid)
                            .and_then(|pr| pr.member.as_ref())
                            .is_some_and(|t| t.incarnation() == incarnation && t.is_member());
                        if reason == RemoveReason::Suspected && target_alive {
                            out.false_suspicions += 1;
                        }
                    }
                    Event::Left { reason } => {
                        if let LeftReason::Expelled { .. } = reason {
                            out.expulsions += 1;
                            if !excluded.contains(&(p, inc)) {
                                violate(&mut out, format!("GM3: {p} (inc {inc}) expelled though nobody removed it"));
                            }
                        }
                        let back = now + Duration::from_secs_f64(0.05 + 0.3 * rng.unit());
                        actions.schedule(back, Action::Join(p));
                    }
                    Event::Joined { .. } => out.joins += 1,
                    Event::BecameCoord { .. } | Event::JoinsChecked { .. } | Event::LeavesChecked { .. } => {}
                    Event::RequestAborted { .. } | Event::GroupChanged { .. } => {}
                }
            }
            if idle_coord && coordinating.insert((p, inc)) {
                actions.schedule(now + Duration::from_millis(2), Action::Coordinate(p, inc));
            }
        }
        // 4. Invariants.
        let live: Vec<&Member> = procs.values().filter_map(|pr| pr.member.as_ref()).filter(|m| m.is_member()).collect();
        out.group_vanished |= live.is_empty();
        let mut tickets: BTreeMap<(u32, u32), u64> = BTreeMap::new();
        for m in &live {
            for (p, e) in m.view().iter() {
                if let Some(&t) = tickets.get(&(p, e.incarnation)) {
                    if t != e.ticket {
                        violate(
                            &mut out,
                            format!("STA at {now:?}: ({p}, inc {}) has tickets {t} and {}", e.incarnation, e.ticket),
                        );
                    }
                } else {
                    tickets.insert((p, e.incarnation), e.ticket);
                }
            }
        }
        let coords: Vec<u32> = live
            .iter()
            .filter(|m| m.is_coordinator() && !excluded.contains(&(m.pid(), m.incarnation())))
            .map(|m| m.pid())
            .collect();
        if coords.len() > 1 {
            violate(&mut out, format!("GM1 at {now:?}: coordinators {coords:?}"));
        }
        if coords.first() != last_coord.as_ref() && !coords.is_empty() {
            out.coordinator_changes += 1;
            last_coord = coords.first().copied();
        }
        // 5. Next event.
        let mut next = [medium.poll_timeout(), actions.next_at(), dups.peek().map(|d| d.0.0)]
            .into_iter()
            .flatten()
            .chain(procs.values().filter_map(|pr| pr.member.as_ref()).filter_map(|m| m.poll_timeout()))
            .min()
            .unwrap_or(end);
        next = next.max(now + Duration::from_nanos(1));
        if next > end {
            break;
        }
        now = next;
    }
    // GM2: the group converged.
    let alive: Vec<&Member> =
        if out.group_vanished { vec![] } else { procs.values().filter_map(|pr| pr.member.as_ref()).collect() };
    let coord_pids: Vec<u32> = alive.iter().filter(|m| m.is_coordinator()).map(|m| m.pid()).collect();
    let expect: Vec<(u32, u32)> = alive.iter().map(|m| (m.pid(), m.incarnation())).collect();
    for m in &alive {
        if !m.is_member() {
            violate(&mut out, format!("GM2: {} is not a member at the end ({:?})", m.pid(), m.state()));
            continue;
        }
        let got: Vec<(u32, u32)> = m.view().summary().iter().map(|&(p, i, _)| (p, i)).collect();
        if got != expect {
            violate(&mut out, format!("GM2: {}'s view {got:?}, live processes {expect:?}", m.pid()));
        }
        if m.coordinator() != coord_pids.first().copied() {
            violate(&mut out, format!("GM2: {} follows {:?}, coordinators {coord_pids:?}", m.pid(), m.coordinator()));
        }
    }
    if coord_pids.len() != 1 && !alive.is_empty() {
        violate(&mut out, format!("GM2: coordinators at the end {coord_pids:?}"));
    }
    if out.false_suspicions == 0 && out.expulsions > 0 {
        let e = out.expulsions;
        violate(&mut out, format!("GM3: {e} expulsions without a false suspicion"));
    }
    out.trace_hash = format!("{:016x}", hash.0);
    out
}

#[cfg(test)]
mod tests;
