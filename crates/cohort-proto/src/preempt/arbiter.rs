//! The global controller of seed 000 §IV-A (Algorithm 1 `schedule()`), with leases, epochs
//! and take-over (see the [module docs](super)).
//!
//! The arbiter keeps a FIFO queue `Q` of waiting robots and a set `S` of at most
//! [`Config::limit`] slots. A slot is granted to the head of the queue when one is free
//! (Alg. 1 lines 7-10), and freed when its holder releases it (line 5) or when its lease runs
//! out; a lease never reaches past the slot's [`Config::timeslice`] (line 4), so a holder that
//! keeps renewing still loses the slot when its slice ends and must queue again, which gives
//! the round robin of §III-B. A renewal that finds less than a renew interval of the slice
//! left is answered with a REVOKE, so a slice ends up to one renew interval early.
//!
//! A new arbiter first *recovers* (QUERY / REPORT, see the module docs) and grants only once
//! it can rule out every lease it does not know of.

use super::{Config, ConfigError, Dest, Epoch, Message, PreemptRepr, Transmit, micros_u32, write};
use cohort_time::Instant;
use std::collections::{BTreeSet, VecDeque};

/// One granted slot (an element of `S`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Slot {
    pub robot: u32,
    /// Sequence number of the grant under this arbiter's epoch: the fencing token is
    /// `(epoch, seq)`.
    pub seq: u64,
    pub granted_at: Instant,
    /// The lease never reaches past this.
    pub slice_end: Instant,
    /// The slot is free from this moment on unless renewed.
    pub lease_end: Instant,
    /// The older arbiter's token of a grant adopted at take-over.
    pub adopted: Option<(Epoch, u64)>,
    /// Whether the holder has renewed (so it surely received the grant).
    pub renewed: bool,
    /// When the holder was last heard from (any message).
    pub heard_at: Instant,
    /// When the holder started waiting for this grant.
    pub waited_since: Instant,
}

/// A robot in the queue `Q`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Waiter {
    pub robot: u32,
    /// When it started waiting, on this arbiter's clock (take-over: as reported).
    pub since: Instant,
    /// Its latest request stamp, echoed in the grant.
    pub stamp: u64,
}

/// Where the arbiter is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Collecting reports; grants nothing before `until` unless every member has reported.
    Recovering { until: Instant },
    /// Granting.
    Active,
    /// Superseded or told to stop: inert.
    StoodDown,
}

/// Why a slot was freed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FreeReason {
    Released,
    Expired,
}

/// What the arbiter's host should know.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ArbiterEvent {
    /// Recovery ended: grants adopted, robots queued; `early` if every member reported before
    /// the take-over wait ran out.
    Recovered {
        adopted: Vec<u32>,
        queued: Vec<u32>,
        early: bool,
    },
    /// A report revealed a newer epoch during recovery; recovery restarted under `epoch`.
    EpochBumped {
        epoch: Epoch,
    },
    Granted {
        robot: u32,
        seq: u64,
    },
    Freed {
        robot: u32,
        seq: u64,
        reason: FreeReason,
    },
    /// The arbiter stopped: a newer arbiter (`newer`) exists, or the host told it to.
    SteppedDown {
        newer: Option<Epoch>,
    },
}

/// Counters, for benchmarks and diagnostics.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ArbiterStats {
    pub grants: u64,
    pub grant_resends: u64,
    pub renewals: u64,
    pub revokes: u64,
    pub releases: u64,
    pub expirations: u64,
    /// Grants that expired unrenewed while their robot kept asking: re-queued at the head.
    pub lost_grants: u64,
    pub adoptions: u64,
    pub queries_sent: u64,
    pub reports: u64,
    /// Datagrams that did not parse, or whose sender field disagreed with the transport's.
    pub malformed: u64,
    /// Parsed messages this arbiter had no use for (stale token, other arbiter's traffic).
    pub ignored: u64,
}

/// The bulk-token arbiter. Feed it every arbiter message the robot receives.
#[derive(Debug)]
pub struct Arbiter {
    cfg: Config,
    id: u32,
    epoch: Epoch,
    members: BTreeSet<u32>,
    phase: Phase,
    reported: BTreeSet<u32>,
    next_query: Instant,
    queue: VecDeque<Waiter>,
    slots: Vec<Slot>,
    next_seq: u64,
    out: VecDeque<(Dest, PreemptRepr)>,
    events: VecDeque<ArbiterEvent>,
    stats: ArbiterStats,
}

impl Arbiter {
    /// Starts an arbiter on robot `id` for a team of `members`, with an epoch newer than
    /// `heard` (the newest this robot has heard, e.g. [`Client::highest_epoch`]). It begins by
    /// recovering.
    ///
    /// [`Client::highest_epoch`]: super::client::Client::highest_epoch
    pub fn new(cfg: Config, id: u32, members: &[u32], heard: Epoch, now: Instant) -> Result<Self, ConfigError> {
        cfg.validate()?;
        let mut a = Arbiter {
            cfg,
            id,
            epoch: heard.next_for(id),
            members: members.iter().copied().collect(),
            phase: Phase::Recovering { until: now + cfg.takeover_wait() },
            reported: BTreeSet::new(),
            next_query: now,
            queue: VecDeque::new(),
            slots: Vec::new(),
            next_seq: 1,
            out: VecDeque::new(),
            events: VecDeque::new(),
            stats: ArbiterStats::default(),
        };
        a.query(now);
        Ok(a)
    }

    pub fn id(&self) -> u32 {
        self.id
    }

    pub fn epoch(&self) -> Epoch {
        self.epoch
    }

    pub fn phase(&self) -> Phase {
        self.phase
    }

    pub fn config(&self) -> &Config {
        &self.cfg
    }

    /// The granted slots (`S`).
    pub fn slots(&self) -> &[Slot] {
        &self.slots
    }

    /// The waiting robots in grant order (`Q`).
    pub fn queue(&self) -> impl Iterator<Item = &Waiter> {
        self.queue.iter()
    }

    pub fn stats(&self) -> ArbiterStats {
        self.stats
    }

    /// Replaces the team (the group layer's view changed). A member that leaves the team no
    /// longer holds up the end of recovery; its slot still runs out by its lease.
    pub fn set_members(&mut self, now: Instant, members: &[u32]) {
        self.members = members.iter().copied().collect();
        self.queue.retain(|w| self.members.contains(&w.robot));
        self.advance(now);
    }

    /// Stops for good (this robot is no longer the coordinator). Grants it made run out by
    /// their leases.
    pub fn stand_down(&mut self) {
        if self.phase != Phase::StoodDown {
            self.phase = Phase::StoodDown;
            self.out.clear();
            self.events.push_back(ArbiterEvent::SteppedDown { newer: None });
        }
    }

    /// Parses and handles one arbiter message from robot `from` (the frame's authenticated
    /// sender). A datagram that does not parse is counted and dropped.
    pub fn handle_datagram(&mut self, now: Instant, from: u32, bytes: &[u8]) {
        match PreemptRepr::parse(bytes) {
            Ok(r) => self.handle_message(now, from, &r),
            Err(_) => self.stats.malformed += 1,
        }
    }

    /// Handles one arbiter message from robot `from`.
    pub fn handle_message(&mut self, now: Instant, from: u32, r: &PreemptRepr) {
        if self.phase == Phase::StoodDown {
            self.stats.ignored += 1;
            return;
        }
        if r.sender != from {
            self.stats.malformed += 1;
            return;
        }
        match r.msg {
            Message::Query | Message::Grant { .. } | Message::Revoke { .. } => {
                // Another arbiter's traffic: a newer one supersedes this one.
                if r.epoch > self.epoch && from != self.id {
                    self.step_down(r.epoch);
                } else {
                    self.stats.ignored += 1;
                }
                return;
            }
            _ => {}
        }
        if !self.check_epoch(now, r.epoch) {
            return;
        }
        let current = r.epoch == self.epoch;
        match r.msg {
            Message::Request { stamp } => {
                self.mark_reported(from, current);
                if let Some(i) = self.slot_of(from) {
                    self.slots[i].heard_at = now;
                    if !self.answer(now, i, stamp) {
                        self.enqueue(Waiter { robot: from, since: now, stamp });
                    }
                } else {
                    self.enqueue(Waiter { robot: from, since: now, stamp });
                }
            }
            Message::Renew { grant_epoch, seq, stamp } => {
                let token = (grant_epoch, seq);
                match self.slots.iter().position(|s| s.robot == from && self.token_matches(s, token)) {
                    Some(i) => {
                        self.stats.renewals += 1;
                        self.slots[i].renewed = true;
                        self.slots[i].heard_at = now;
                        self.answer(now, i, stamp);
                    }
                    // A holder of an older grant whose report is on its way: wait for it.
                    None if matches!(self.phase, Phase::Recovering { .. }) => self.stats.ignored += 1,
                    None => {
                        self.stats.revokes += 1;
                        let msg = Message::Revoke { holder: from, grant_epoch, seq };
                        self.send(Dest::Unicast(from), msg);
                    }
                }
            }
            Message::Release { grant_epoch, seq } => {
                match self.slots.iter().position(|s| s.robot == from && self.token_matches(s, (grant_epoch, seq))) {
                    Some(i) => {
                        let s = self.slots.remove(i);
                        self.stats.releases += 1;
                        self.events.push_back(ArbiterEvent::Freed {
                            robot: s.robot,
                            seq: s.seq,
                            reason: FreeReason::Released,
                        });
                    }
                    None => self.stats.ignored += 1,
                }
            }
            Message::Report { held, waiting, waited_us, stamp } => {
                self.stats.reports += 1;
                self.mark_reported(from, current);
                if let Some(h) = held {
                    // The holder stops by its own reckoning within `lease_left`; wait that out
                    // on this clock, stretched for drift, plus the guard.
                    // No lease or slice is longer than the configured one: a report claiming
                    // more is capped rather than allowed to block the token.
                    let lease_left = micros(h.lease_left_us).min(self.cfg.lease);
                    let lease_end = now + self.cfg.stretch(lease_left) + self.cfg.guard;
                    let slice_end = now + micros(h.slice_left_us).min(self.cfg.timeslice);
                    match self.slot_of(from) {
                        Some(i) => self.slots[i].lease_end = self.slots[i].lease_end.max(lease_end),
                        None => {
                            self.stats.adoptions += 1;
                            let seq = self.take_seq();
                            self.slots.push(Slot {
                                robot: from,
                                seq,
                                granted_at: now,
                                slice_end: slice_end.max(lease_end),
                                lease_end,
                                adopted: Some((h.epoch, h.seq)),
                                renewed: true,
                                heard_at: now,
                                waited_since: now,
                            });
                        }
                    }
                } else if waiting && self.slot_of(from).is_none() {
                    let since = now.saturating_sub(micros(waited_us));
                    self.enqueue(Waiter { robot: from, since, stamp });
                }
            }
            Message::Query | Message::Grant { .. } | Message::Revoke { .. } => {}
        }
        self.advance(now);
    }

    /// Handles the timers: query retries, lease expiry, end of recovery.
    pub fn handle_timeout(&mut self, now: Instant) {
        if let Phase::Recovering { .. } = self.phase
            && now >= self.next_query
        {
            self.query(now);
        }
        self.advance(now);
    }

    /// The next datagram to send, written into `buf` (at least [`super::MAX_DATAGRAM`]).
    pub fn poll_transmit(&mut self, _now: Instant, buf: &mut [u8]) -> Option<Transmit> {
        let (dest, r) = self.out.pop_front()?;
        write(&r, dest, buf)
    }

    pub fn poll_event(&mut self) -> Option<ArbiterEvent> {
        self.events.pop_front()
    }

    /// When [`handle_timeout`](Self::handle_timeout) should next run.
    pub fn poll_timeout(&self) -> Option<Instant> {
        let leases = self.slots.iter().map(|s| s.lease_end).min();
        match self.phase {
            Phase::StoodDown => None,
            Phase::Recovering { until } => Some(leases.map_or(until, |l| l.min(until)).min(self.next_query)),
            Phase::Active => leases,
        }
    }

    fn send(&mut self, dest: Dest, msg: Message) {
        self.out.push_back((dest, PreemptRepr { sender: self.id, epoch: self.epoch, msg }));
    }

    fn query(&mut self, now: Instant) {
        self.stats.queries_sent += 1;
        self.next_query = now + self.cfg.retry_interval;
        self.send(Dest::Broadcast, Message::Query);
    }

    fn take_seq(&mut self) -> u64 {
        let s = self.next_seq;
        self.next_seq += 1;
        s
    }

    fn slot_of(&self, robot: u32) -> Option<usize> {
        self.slots.iter().position(|s| s.robot == robot)
    }

    fn token_matches(&self, s: &Slot, token: (Epoch, u64)) -> bool {
        token == (self.epoch, s.seq) || s.adopted == Some(token)
    }

    fn mark_reported(&mut self, robot: u32, current: bool) {
        if current && matches!(self.phase, Phase::Recovering { .. }) {
            self.reported.insert(robot);
        }
    }

    /// `false` if the message must be dropped because a newer epoch exists. During recovery a
    /// newer epoch restarts recovery above it; once active, the arbiter stands down.
    fn check_epoch(&mut self, now: Instant, e: Epoch) -> bool {
        if e <= self.epoch {
            return true;
        }
        match self.phase {
            Phase::Recovering { .. } => {
                self.epoch = e.next_for(self.id);
                self.reported.clear();
                self.phase = Phase::Recovering { until: now + self.cfg.takeover_wait() };
                self.events.push_back(ArbiterEvent::EpochBumped { epoch: self.epoch });
                self.query(now);
                true
            }
            _ => {
                self.step_down(e);
                false
            }
        }
    }

    fn step_down(&mut self, newer: Epoch) {
        self.phase = Phase::StoodDown;
        self.out.clear();
        self.events.push_back(ArbiterEvent::SteppedDown { newer: Some(newer) });
    }

    /// Inserts a waiter by `since` (FIFO; reported waiters by how long they have waited), or
    /// refreshes the stamp of one already queued.
    fn enqueue(&mut self, w: Waiter) {
        if let Some(q) = self.queue.iter_mut().find(|q| q.robot == w.robot) {
            q.stamp = w.stamp;
            return;
        }
        let at = self.queue.iter().position(|q| q.since > w.since).unwrap_or(self.queue.len());
        self.queue.insert(at, w);
    }

    /// Answers slot `i`'s holder (request or renewal stamped `echo`): extends its lease up to
    /// the end of its slice and re-sends the grant, or revokes it if the slice is over.
    fn answer(&mut self, now: Instant, i: usize, echo: u64) -> bool {
        let s = self.slots[i];
        let left = s.slice_end.saturating_duration_since(now);
        let lease = left.min(self.cfg.lease);
        // Less than a renew interval of slice left is not worth a grant: the slice ends now
        // (at most one renew interval early), which also keeps leases from shrinking to slivers.
        if left < self.cfg.renew_interval || self.cfg.holder_lease(lease).is_zero() {
            self.stats.revokes += 1;
            self.send(Dest::Unicast(s.robot), Message::Revoke { holder: s.robot, grant_epoch: self.epoch, seq: s.seq });
            return false;
        }
        self.slots[i].lease_end = s.lease_end.max(now + lease);
        self.stats.grant_resends += 1;
        let msg = Message::Grant {
            holder: s.robot,
            seq: s.seq,
            lease_us: micros_u32(lease),
            slice_us: micros_u32(left),
            echo,
        };
        self.send(Dest::Unicast(s.robot), msg);
        true
    }

    /// Expires leases, ends recovery when it may, and grants free slots to the queue's head.
    fn advance(&mut self, now: Instant) {
        if self.phase == Phase::StoodDown {
            return;
        }
        let mut i = 0;
        while i < self.slots.len() {
            if self.slots[i].lease_end <= now {
                let s = self.slots.remove(i);
                self.stats.expirations += 1;
                self.events.push_back(ArbiterEvent::Freed { robot: s.robot, seq: s.seq, reason: FreeReason::Expired });
                // A grant that never reached a robot that is still asking (every answer was
                // lost) keeps the robot's place at the head of the queue.
                if !s.renewed && now.saturating_duration_since(s.heard_at) < self.cfg.lease {
                    self.stats.lost_grants += 1;
                    self.queue.retain(|w| w.robot != s.robot);
                    self.queue.push_front(Waiter { robot: s.robot, since: s.waited_since, stamp: 0 });
                }
            } else {
                i += 1;
            }
        }
        if let Phase::Recovering { until } = self.phase {
            let all = self.members.iter().all(|m| self.reported.contains(m));
            if now < until && !all {
                return;
            }
            self.phase = Phase::Active;
            self.events.push_back(ArbiterEvent::Recovered {
                adopted: self.slots.iter().map(|s| s.robot).collect(),
                queued: self.queue.iter().map(|w| w.robot).collect(),
                early: now < until,
            });
        }
        while self.slots.len() < self.cfg.limit {
            let Some(at) = self.queue.iter().position(|w| self.slot_of(w.robot).is_none()) else { break };
            let Some(w) = self.queue.remove(at) else { break };
            let seq = self.take_seq();
            let lease = self.cfg.lease.min(self.cfg.timeslice);
            self.slots.push(Slot {
                robot: w.robot,
                seq,
                granted_at: now,
                slice_end: now + self.cfg.timeslice,
                lease_end: now + lease,
                adopted: None,
                renewed: false,
                heard_at: now,
                waited_since: w.since,
            });
            self.stats.grants += 1;
            self.events.push_back(ArbiterEvent::Granted { robot: w.robot, seq });
            let msg = Message::Grant {
                holder: w.robot,
                seq,
                lease_us: micros_u32(lease),
                slice_us: micros_u32(self.cfg.timeslice),
                echo: w.stamp,
            };
            self.send(Dest::Unicast(w.robot), msg);
        }
    }
}

fn micros(us: u32) -> std::time::Duration {
    std::time::Duration::from_micros(u64::from(us))
}
