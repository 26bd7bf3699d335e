//! The [`Member`] state machine: state, API, I/O plumbing, fault detection and election.
//! The coordinator's rounds are in `coord.rs`, the addressed side in `ordinary.rs`.

use super::coord::CoordState;
use super::ordinary::{AckSlot, Incoming};
use super::timing::Estimate;
use super::{
    Config, ConfigError, Dest, Entry, Event, InitError, JoinError, LeaveError, LeftReason, RemoveReason, State, Stats,
    Transmit, View,
};
use cohort_time::Instant;
use cohort_wire::group::{GroupRepr, Message};
use std::collections::{BTreeMap, VecDeque};
use std::time::Duration;

/// One process of a GCBRR group, sans-IO. See the [module docs](super).
#[derive(Debug)]
pub struct Member {
    pub(super) cfg: Config,
    pub(super) pid: u32,
    pub(super) incarnation: u32,
    pub(super) state: State,
    /// `coordid`.
    pub(super) coord: Option<u32>,
    /// `grp`.
    pub(super) view: View,
    /// The ticket the coordinator assigns next (learnt from view pushes by the others).
    pub(super) next_ticket: u64,
    /// The latest view push this view reflects, per pushing coordinator.
    pub(super) view_push: (u32, u64),
    /// When each member of the view was last heard from (any message).
    pub(super) last_heard: BTreeMap<u32, Instant>,
    last_sent: Option<Instant>,
    last_heartbeat: Option<Instant>,
    pub(super) coord_state: CoordState,
    pub(super) incoming: Option<Incoming>,
    pub(super) ack: Option<AckSlot>,
    /// The join poll this joiner last answered: coordinator and poll number.
    pub(super) answered_poll: Option<(u32, u64)>,
    out: VecDeque<(Dest, Vec<u8>)>,
    pub(super) events: VecDeque<Event>,
    pub(super) stats: Stats,
    /// The spacing of consecutive slots' answers ([`Config::learn_msg_t`]).
    pub(super) msg_est: Estimate,
}

impl Member {
    /// Largest datagram a member emits; give [`poll_transmit`](Self::poll_transmit) a buffer
    /// this long.
    pub const MAX_DATAGRAM: usize = 65_535;

    /// A process outside the group (`Init(pid, ∅)`): call [`join`](Self::join) to join.
    /// `incarnation` must be at least the largest incarnation this pid ever used (a restarted
    /// process must not reuse one); each join attempt takes the next one.
    pub fn new(cfg: Config, pid: u32, incarnation: u32) -> Result<Self, ConfigError> {
        cfg.validate()?;
        Ok(Member {
            cfg,
            pid,
            incarnation,
            state: State::Left,
            coord: None,
            view: View::new(),
            next_ticket: 1,
            view_push: (0, 0),
            last_heard: BTreeMap::new(),
            last_sent: None,
            last_heartbeat: None,
            coord_state: CoordState::default(),
            incoming: None,
            ack: None,
            answered_poll: None,
            out: VecDeque::new(),
            events: VecDeque::new(),
            stats: Stats::default(),
            msg_est: Estimate::default(),
        })
    }

    /// A member of a static initial group `pids` (`Init(pid, pids)`, Alg. 1): every process
    /// starts at incarnation 0 and takes its rank among `pids` as ticket, so the smallest pid
    /// coordinates and reports [`Event::BecameCoord`].
    pub fn with_group(cfg: Config, pid: u32, pids: &[u32], now: Instant) -> Result<Self, InitError> {
        let mut m = Member::new(cfg, pid, 0)?;
        let mut sorted = pids.to_vec();
        sorted.sort_unstable();
        sorted.dedup();
        if !sorted.contains(&pid) {
            return Err(InitError::NotInGroup(pid));
        }
        if let (Some(&lo), Some(&hi)) = (sorted.first(), sorted.last())
            && u64::from(hi) - u64::from(lo) >= u64::from(cohort_wire::group::MAX_SPAN)
        {
            return Err(InitError::Span { lo, hi });
        }
        for (i, &p) in sorted.iter().enumerate() {
            m.view.insert(p, Entry { incarnation: 0, ticket: i as u64 + 1, new: false });
            m.last_heard.insert(p, now + m.cfg.start_grace);
        }
        m.next_ticket = sorted.len() as u64 + 1;
        m.state = State::Normal;
        m.coord = m.view.min_ticket();
        if m.coord == Some(pid) {
            m.events.push_back(Event::BecameCoord { members: m.view.pids() });
        }
        Ok(m)
    }

    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// The current incarnation.
    pub fn incarnation(&self) -> u32 {
        self.incarnation
    }

    pub fn state(&self) -> State {
        self.state
    }

    /// `coordid`, while a member.
    pub fn coordinator(&self) -> Option<u32> {
        if self.is_member() { self.coord } else { None }
    }

    /// Whether this process is the coordinator.
    pub fn is_coordinator(&self) -> bool {
        self.is_member() && self.coord == Some(self.pid)
    }

    /// Whether this process is a member (normal or leaving).
    pub fn is_member(&self) -> bool {
        matches!(self.state, State::Normal | State::Leave)
    }

    /// The local group view.
    pub fn view(&self) -> &View {
        &self.view
    }

    pub fn stats(&self) -> Stats {
        self.stats
    }

    pub fn config(&self) -> &Config {
        &self.cfg
    }

    /// `Join()`: wait for a join poll, answer it, become a member when the coordinator pushes
    /// the view ([`Event::Joined`]).
    pub fn join(&mut self, _now: Instant) -> Result<(), JoinError> {
        if self.state != State::Left {
            return Err(JoinError::NotLeft);
        }
        if self.incarnation == u32::MAX {
            return Err(JoinError::Incarnations);
        }
        self.state = State::Join;
        self.answered_poll = None;
        Ok(())
    }

    /// `Leave()` (Alg. 4): the coordinator leaves at once; an ordinary member waits for the
    /// next leave poll, answering requests meanwhile, and then reports [`Event::Left`].
    pub fn leave(&mut self, now: Instant) -> Result<(), LeaveError> {
        match self.state {
            State::Normal if self.is_coordinator() => {
                self.leave_group(now, LeftReason::Requested);
                Ok(())
            }
            State::Normal => {
                self.state = State::Leave;
                Ok(())
            }
            State::Leave => Ok(()),
            State::Join => {
                self.state = State::Left;
                self.answered_poll = None;
                self.events.push_back(Event::Left { reason: LeftReason::Requested });
                Ok(())
            }
            State::Left => Err(LeaveError::NotMember),
        }
    }

    /// Feeds a received datagram (the plaintext of an authenticated group frame). Anything
    /// that does not parse is counted and dropped.
    pub fn handle_datagram(&mut self, now: Instant, bytes: &[u8]) {
        self.stats.frames_received += 1;
        let Ok(r) = GroupRepr::parse(bytes) else {
            self.stats.malformed += 1;
            return;
        };
        // What shows a process acting as coordinator (see `heard`).
        let acting = matches!(
            r.msg,
            Message::Areq { .. }
                | Message::Again { .. }
                | Message::Jpoll { .. }
                | Message::Lpoll { .. }
                | Message::Vpush { .. }
                | Message::Hbeat { coord: true, .. }
        );
        if r.pid == self.pid || self.state == State::Left || !self.heard(now, r.pid, r.incarnation, acting) {
            self.stats.ignored += 1;
            return;
        }
        let (from, inc) = (r.pid, r.incarnation);
        let used = match r.msg {
            Message::Areq { ticket, seqno, rmask, data } => {
                if self.is_coordinator() {
                    self.coordinator_conflict(now, from, inc, ticket, None)
                } else {
                    self.on_request(now, from, inc, seqno, rmask, data)
                }
            }
            Message::Arpl { coord, coord_inc, seqno, heard, data } => {
                if self.is_coordinator() {
                    self.on_reply(now, from, inc, coord, coord_inc, seqno, &heard, data)
                } else {
                    self.overheard_reply(now, from, coord, coord_inc, seqno)
                }
            }
            Message::Again { ticket, seqno, rmask } => {
                if self.is_coordinator() {
                    self.coordinator_conflict(now, from, inc, ticket, None)
                } else {
                    self.on_again(now, from, inc, seqno, rmask)
                }
            }
            Message::Jpoll { ticket, poll } | Message::Lpoll { ticket, poll } if self.is_coordinator() => {
                let _ = poll;
                self.coordinator_conflict(now, from, inc, ticket, None)
            }
            Message::Jpoll { poll, .. } => self.on_join_poll(now, from, inc, poll),
            Message::Lpoll { .. } => self.on_leave_poll(now, from, inc),
            Message::Join { coord, poll } => self.is_coordinator() && self.on_join(now, from, inc, coord, poll),
            Message::Left => {
                let known = self.view.has(from, inc);
                if known {
                    self.remove_member(now, from, RemoveReason::Left);
                }
                known
            }
            Message::Vpush { ticket, push, next_ticket, rmask, view } => {
                if self.is_coordinator() {
                    let holds_me = view.iter().any(|e| e.pid == self.pid && e.incarnation == self.incarnation);
                    self.coordinator_conflict(now, from, inc, ticket, Some(holds_me))
                } else {
                    self.on_view_push(now, from, inc, push, next_ticket, rmask, &view)
                }
            }
            Message::Vack { coord, coord_inc, push } => {
                if self.is_coordinator() {
                    self.on_view_ack(now, from, inc, coord, coord_inc, push)
                } else {
                    self.overheard_ack(now, from, coord, coord_inc, push)
                }
            }
            Message::Hbeat { ticket, view, coord, members } => {
                self.on_heartbeat(now, from, inc, ticket, view, coord, &members)
            }
        };
        if !used {
            self.stats.ignored += 1;
        }
        self.pump(now);
    }

    /// Runs the timers due by `now`: fault detection, round timers, slots, heartbeats.
    pub fn handle_timeout(&mut self, now: Instant) {
        self.detect_faults(now);
        self.coord_timeout(now);
        self.send_due_answers(now);
        self.pump(now);
        if self.heartbeat_due().is_some_and(|t| t <= now) {
            self.send_heartbeat(now);
        }
    }

    /// The next datagram to send, written into `buf`. A datagram longer than `buf` is dropped
    /// (give a buffer of [`Member::MAX_DATAGRAM`] bytes).
    pub fn poll_transmit(&mut self, _now: Instant, buf: &mut [u8]) -> Option<Transmit> {
        loop {
            let (dest, bytes) = self.out.pop_front()?;
            if let Some(b) = buf.get_mut(..bytes.len()) {
                b.copy_from_slice(&bytes);
                return Some(Transmit { dest, len: bytes.len() });
            }
            tracing::warn!(len = bytes.len(), buf = buf.len(), "group datagram longer than the transmit buffer");
        }
    }

    /// When [`handle_timeout`](Self::handle_timeout) next has something to do.
    pub fn poll_timeout(&self) -> Option<Instant> {
        let mut next: Option<Instant> = None;
        let mut at = |t: Option<Instant>| {
            if let Some(t) = t {
                next = Some(next.map_or(t, |n| n.min(t)));
            }
        };
        if self.is_member() {
            at(self.heartbeat_due());
            at(self.fault_deadline());
        }
        at(self.coord_deadline());
        at(self.incoming.as_ref().and_then(|i| i.slot.as_ref()).and_then(|s| s.deadline()));
        at(self.ack.as_ref().and_then(|a| a.slot.deadline()));
        next
    }

    /// When the answers this process has made ready and not sent yet (a reply, a view
    /// acknowledgement, each waiting for its slot) will have gone, if any wait: a socket that
    /// closes lingers until then, so closing right after [`reply`](Self::reply) does not
    /// turn the reply into a failure the coordinator must detect.
    pub fn answers_due(&self) -> Option<Instant> {
        let reply = self.incoming.as_ref().and_then(|i| i.slot.as_ref()).and_then(|s| s.deadline());
        let ack = self.ack.as_ref().and_then(|a| a.slot.deadline());
        reply.max(ack)
    }

    /// The next event for the application.
    pub fn poll_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }

    /// Queues a message from this process.
    pub(super) fn send(&mut self, now: Instant, dest: Dest, msg: Message<'_>) {
        let r = GroupRepr { pid: self.pid, incarnation: self.incarnation, msg };
        let mut b = vec![0u8; r.buffer_len()];
        if r.emit(&mut b).is_none() {
            tracing::warn!("group message does not encode (view too large)");
            return;
        }
        self.stats.frames_sent += 1;
        self.stats.bytes_sent += b.len() as u64;
        match dest {
            Dest::Broadcast => self.stats.broadcasts_sent += 1,
            Dest::Unicast(_) => self.stats.unicasts_sent += 1,
        }
        self.last_sent = Some(now);
        if dest == Dest::Broadcast {
            for _ in 1..self.cfg.broadcast_copies {
                self.stats.broadcast_copies += 1;
                self.out.push_back((dest, b.clone()));
            }
        }
        self.out.push_back((dest, b));
    }

    /// When the next heartbeat is due. A member sends one after `heartbeat_t` of silence;
    /// the coordinator every `heartbeat_t` whatever else it sends, because its heartbeat
    /// carries its view: that is how a second coordinator (after a false suspicion) learns
    /// which of the two was removed.
    ///
    /// While the coordinator waits for answers in slot order (a request or view-push round),
    /// the channel belongs to the addressed members: a heartbeat then would contend with the
    /// answer of the next slot, whose sender queues it the moment the previous one ends, and a
    /// collision loses that answer and costs a re-broadcast round. So a heartbeat that comes
    /// due during such a round waits for the round's end, and goes just before the next
    /// round's broadcast ([`heartbeat_before_round`](Self::heartbeat_before_round)) or as soon
    /// as the coordinator is idle. It waits half a `heartbeat_t` at most, and never leaves the
    /// coordinator silent for longer than `heartbeat_t`; and it keeps the schedule (the next
    /// one is due `heartbeat_t` after this one was), so the coordinator sends as many
    /// heartbeats as ever, and its members' fault detectors see no fewer signs of life.
    fn heartbeat_due(&self) -> Option<Instant> {
        if !self.is_member() {
            return None;
        }
        let after = |t: Option<Instant>| t.map_or(Instant::ZERO, |t| t + self.cfg.heartbeat_t);
        if !self.is_coordinator() {
            return Some(after(self.last_sent));
        }
        let due = after(self.last_heartbeat);
        Some(match self.slotted_round_deadline() {
            Some(end) => due.max(end.min(due + self.max_heartbeat_delay()).min(after(self.last_sent))),
            None => due,
        })
    }

    /// How long the coordinator's heartbeat may wait for the end of a round.
    fn max_heartbeat_delay(&self) -> Duration {
        self.cfg.heartbeat_t / 2
    }

    /// Sends the coordinator's heartbeat, if one is due, ahead of a round's broadcast: the
    /// addressed members are silent until they hear the broadcast, so it contends with nobody.
    pub(super) fn heartbeat_before_round(&mut self, now: Instant) {
        if self.is_coordinator() && self.last_heartbeat.is_none_or(|t| t + self.cfg.heartbeat_t <= now) {
            self.send_heartbeat(now);
        }
    }

    fn send_heartbeat(&mut self, now: Instant) {
        let (ticket, view, coord, members) = self.heartbeat_fields();
        self.stats.heartbeats_sent += 1;
        // A heartbeat that waited (for a round's end) counts from when it was due.
        let due = self.last_heartbeat.map(|t| t + self.cfg.heartbeat_t);
        self.last_heartbeat = Some(match due {
            Some(d) if d <= now && now - d <= self.max_heartbeat_delay() => d,
            _ => now,
        });
        self.send(now, Dest::Broadcast, Message::Hbeat { ticket, view, coord, members });
    }

    fn heartbeat_fields(&self) -> (u64, u64, bool, cohort_wire::group::PidMask) {
        let ticket = self.view.get(self.pid).map_or(0, |e| e.ticket);
        let view = if self.is_coordinator() { self.coord_state.push_seq } else { self.view_push.1 };
        (ticket, view, self.is_coordinator(), self.view.mask())
    }

    /// Liveness bookkeeping for a message from `(pid, inc)`; `false` if the message comes from
    /// an incarnation older than the one in the view (a late message of a former life).
    ///
    /// A member's coordinator counts as alive only while it acts as one (`acting`: requests,
    /// polls, pushes, coordinator heartbeats). After a false suspicion a member may elect a
    /// process that still follows the old coordinator and never takes over; its ordinary
    /// heartbeats must not keep the member waiting for it forever.
    fn heard(&mut self, now: Instant, pid: u32, inc: u32, acting: bool) -> bool {
        match self.view.get(pid).map(|e| e.incarnation) {
            Some(known) if known == inc => {
                if acting || self.coord != Some(pid) {
                    let t = self.last_heard.entry(pid).or_insert(now);
                    *t = (*t).max(now);
                }
                true
            }
            Some(known) if known < inc => {
                self.remove_member(now, pid, RemoveReason::Superseded);
                true
            }
            Some(_) => false,
            None => true,
        }
    }

    /// The next time the fault detector may fire.
    fn fault_deadline(&self) -> Option<Instant> {
        let fdt = self.cfg.fault_detect_t;
        if self.is_coordinator() {
            self.view
                .iter()
                .filter(|&(p, e)| p != self.pid && self.monitored(p, e))
                .filter_map(|(p, _)| self.last_heard.get(&p).map(|&t| t + fdt))
                .min()
        } else {
            self.coord.and_then(|c| self.last_heard.get(&c)).map(|&t| t + fdt)
        }
    }

    /// The coordinator monitors every member except those admitted but not yet being told
    /// (they wait silently for their push).
    fn monitored(&self, pid: u32, e: &Entry) -> bool {
        !e.new || self.coord_state.pushing_to(pid)
    }

    fn detect_faults(&mut self, now: Instant) {
        let fdt = self.cfg.fault_detect_t;
        let stale = |m: &Member, p: u32| m.last_heard.get(&p).is_none_or(|&t| t + fdt <= now);
        if self.is_coordinator() {
            let gone: Vec<u32> = self
                .view
                .iter()
                .filter(|&(p, e)| p != self.pid && self.monitored(p, e) && stale(self, p))
                .map(|(p, _)| p)
                .collect();
            for p in gone {
                self.stats.suspicions += 1;
                tracing::debug!(me = self.pid, suspect = p, "coordinator suspects a member");
                self.remove_member(now, p, RemoveReason::Suspected);
            }
        } else {
            // Suspecting the coordinator elects the next one, who may be long silent too.
            while self.is_member()
                && let Some(c) = self.coord
                && c != self.pid
                && stale(self, c)
            {
                self.stats.suspicions += 1;
                tracing::debug!(me = self.pid, suspect = c, "member suspects its coordinator");
                self.remove_member(now, c, RemoveReason::Suspected);
            }
        }
    }

    /// `OnProcessFailure(pid)` (Alg. 6), for failures, departures and exclusions alike.
    pub(super) fn remove_member(&mut self, now: Instant, pid: u32, reason: RemoveReason) {
        let Some(e) = self.view.remove(pid) else { return };
        self.last_heard.remove(&pid);
        self.events.push_back(Event::Removed { pid, incarnation: e.incarnation, reason });
        if !self.is_member() {
            return;
        }
        if self.coord == Some(self.pid) {
            self.coord_member_gone(now, pid, reason);
            self.events.push_back(Event::GroupChanged { members: self.view.pids() });
        } else if self.coord == Some(pid) {
            self.elect(now);
        }
    }

    /// Takes the member with the smallest ticket as coordinator, without any message.
    pub(super) fn elect(&mut self, now: Instant) {
        self.coord = self.view.min_ticket();
        self.incoming = None;
        self.ack = None;
        if let Some(c) = self.coord
            && c != self.pid
        {
            // The elected has one more FaultDetectT to act as coordinator: it suspects the
            // old one up to that much later than we did when it heard it later.
            self.last_heard.insert(c, now + self.cfg.fault_detect_t);
            return;
        }
        if self.coord != Some(self.pid) {
            return;
        }
        if self.state == State::Leave {
            self.leave_group(now, LeftReason::LeftInsteadOfTakingOver);
            return;
        }
        self.next_ticket = self.next_ticket.max(self.view.max_ticket() + 1);
        self.coord_state = CoordState::default();
        self.events.push_back(Event::BecameCoord { members: self.view.pids() });
        self.start_takeover_push(now);
    }

    /// Leaves the group: announces it (best effort), drops every role, reports why.
    pub(super) fn leave_group(&mut self, now: Instant, reason: LeftReason) {
        if self.is_member() {
            self.stats.lefts_sent += 1;
            self.send(now, Dest::Broadcast, Message::Left);
        }
        self.abort_coordination();
        self.state = State::Left;
        self.coord = None;
        self.view = View::new();
        self.last_heard.clear();
        self.incoming = None;
        self.ack = None;
        self.answered_poll = None;
        self.events.push_back(Event::Left { reason });
    }

    /// The `MsgT` a request round's timers count in: `msg_t`, or the learned one
    /// ([`Config::learn_msg_t`]).
    pub(super) fn request_msg_t(&self) -> Duration {
        if self.cfg.learn_msg_t { self.msg_est.bound(self.cfg.msg_t) } else { self.cfg.msg_t }
    }

    /// `msg_t` times `n`.
    pub(super) fn slots(&self, n: usize) -> Duration {
        self.cfg.msg_t.saturating_mul(u32::try_from(n).unwrap_or(u32::MAX))
    }
}
