//! The coordinator's side: request rounds (Alg. 2), join and leave polls (Alg. 3, 4), view
//! pushes (Alg. 5), and what a coordinator does when it learns it was removed.
//!
//! Operations run one at a time, in the order the application issued them ("the coordinator
//! proceeds with the next application request once the previous one has been handled to
//! completion"); a takeover push runs before anything else.

use super::member::Member;
use super::timing::{RepairSlack, RoundClock};
use super::{Dest, Entry, Event, LeftReason, PidMask, PollError, RemoveReason, Replies, RequestError, RequestId};
use cohort_time::Instant;
use cohort_wire::group::Message;
use std::collections::{BTreeMap, VecDeque};
use std::time::Duration;

#[derive(Debug)]
enum Op {
    Request { id: RequestId, dsts: Vec<u32>, data: Vec<u8>, proc_t: Duration, issued_at: Instant },
    CheckJoins { join_t: Duration },
    CheckLeaves { leave_t: Duration },
}

#[derive(Debug)]
enum Purpose {
    CheckJoins { added: Vec<u32> },
    Takeover,
}

#[derive(Debug)]
enum Running {
    Request {
        id: RequestId,
        rmask: PidMask,
        data: Vec<u8>,
        proc_t: Duration,
        deadline: Instant,
        replies: BTreeMap<u32, Vec<u8>>,
        failed: Vec<u32>,
        issued_at: Instant,
        broadcasts: u32,
        /// The answers to the latest broadcast, whose addressed pids order its slots.
        clock: RoundClock,
        /// `MsgT + procT` after the latest broadcast: by then every addressed member that
        /// received it is ready to answer.
        answers_from: Instant,
        /// When the latest broadcast went.
        sent_at: Instant,
        /// With [`Config::early_repair`]: when the slot of the last member still missing will
        /// have passed, counted from the latest reply (`on_reply`); the repair goes the
        /// coordinator's `RepairSlack` later.
        early: Option<Instant>,
        /// With [`Config::ask_again`]: members still missing whose replies another member
        /// overheard since they were last asked, so they hold the request.
        holders: PidMask,
    },
    JoinPoll {
        poll: u64,
        until: Instant,
        added: Vec<u32>,
    },
    LeavePoll {
        until: Instant,
        left: Vec<u32>,
    },
    /// A view push: the current phase's round, then the phases still to come.
    Push {
        push: u64,
        rmask: PidMask,
        deadline: Instant,
        phases: VecDeque<Vec<u32>>,
        purpose: Purpose,
    },
}

/// The coordinator's counters and operations.
#[derive(Debug, Default)]
pub(super) struct CoordState {
    seqno: u64,
    pub(super) push_seq: u64,
    poll_seq: u64,
    queue: VecDeque<Op>,
    running: Option<Running>,
    /// The early repair's allowance for answers later than their slot.
    slack: RepairSlack,
}

impl CoordState {
    /// Whether the running view push addresses `pid`.
    pub(super) fn pushing_to(&self, pid: u32) -> bool {
        matches!(&self.running, Some(Running::Push { rmask, .. }) if rmask.contains(pid))
    }
}

impl Member {
    fn my_ticket(&self) -> u64 {
        self.view.get(self.pid).map_or(0, |e| e.ticket)
    }

    /// `RequestReply(pids, data, procT)`: sends `data` to the members among `pids` (never to
    /// this process) and reports their replies as [`Event::Replies`]. Requests queue behind the
    /// operation in progress.
    pub fn request_reply(
        &mut self,
        now: Instant,
        pids: &[u32],
        data: Vec<u8>,
        proc_t: Duration,
    ) -> Result<RequestId, RequestError> {
        if !self.is_coordinator() {
            return Err(RequestError::NotCoordinator);
        }
        if data.len() > self.cfg.max_payload {
            return Err(RequestError::TooLarge { len: data.len(), max: self.cfg.max_payload });
        }
        self.coord_state.seqno += 1;
        let id = RequestId(self.coord_state.seqno);
        let mut dsts: Vec<u32> = pids.iter().copied().filter(|&p| p != self.pid).collect();
        dsts.sort_unstable();
        dsts.dedup();
        self.coord_state.queue.push_back(Op::Request { id, dsts, data, proc_t, issued_at: now });
        self.pump(now);
        Ok(id)
    }

    /// `CheckJoins(joinT)`: broadcasts a join poll, admits whoever answers within
    /// `2·MsgT + joinT`, pushes the new view, and reports [`Event::JoinsChecked`].
    pub fn check_joins(&mut self, now: Instant, join_t: Duration) -> Result<(), PollError> {
        if !self.is_coordinator() {
            return Err(PollError::NotCoordinator);
        }
        self.coord_state.queue.push_back(Op::CheckJoins { join_t });
        self.pump(now);
        Ok(())
    }

    /// `CheckLeaves(leaveT)`: broadcasts a leave poll, waits `2·MsgT + leaveT` for departures,
    /// and reports [`Event::LeavesChecked`].
    pub fn check_leaves(&mut self, now: Instant, leave_t: Duration) -> Result<(), PollError> {
        if !self.is_coordinator() {
            return Err(PollError::NotCoordinator);
        }
        self.coord_state.queue.push_back(Op::CheckLeaves { leave_t });
        self.pump(now);
        Ok(())
    }

    /// Whether an operation is running or queued.
    pub fn is_busy(&self) -> bool {
        self.coord_state.running.is_some() || !self.coord_state.queue.is_empty()
    }

    /// Starts queued operations while none is running.
    pub(super) fn pump(&mut self, now: Instant) {
        while self.is_coordinator() && self.coord_state.running.is_none() {
            let Some(op) = self.coord_state.queue.pop_front() else { return };
            self.start(now, op);
        }
    }

    fn start(&mut self, now: Instant, op: Op) {
        match op {
            Op::Request { id, dsts, data, proc_t, issued_at } => {
                let (rmask, failed): (Vec<u32>, Vec<u32>) = dsts.into_iter().partition(|&p| self.view.contains(p));
                let rmask: PidMask = rmask.into_iter().collect();
                self.coord_state.running = Some(Running::Request {
                    id,
                    rmask,
                    data,
                    proc_t,
                    deadline: now,
                    replies: BTreeMap::new(),
                    failed,
                    issued_at,
                    broadcasts: 0,
                    clock: RoundClock::default(),
                    answers_from: now,
                    sent_at: now,
                    early: None,
                    holders: PidMask::new(),
                });
                self.request_round(now);
            }
            Op::CheckJoins { join_t } => {
                self.coord_state.poll_seq += 1;
                let poll = self.coord_state.poll_seq;
                let until = now + self.slots(2) + join_t;
                self.coord_state.running = Some(Running::JoinPoll { poll, until, added: vec![] });
                self.stats.polls_sent += 1;
                self.send(now, Dest::Broadcast, Message::Jpoll { ticket: self.my_ticket(), poll });
            }
            Op::CheckLeaves { leave_t } => {
                self.coord_state.poll_seq += 1;
                let poll = self.coord_state.poll_seq;
                let until = now + self.slots(2) + leave_t;
                self.coord_state.running = Some(Running::LeavePoll { until, left: vec![] });
                self.stats.polls_sent += 1;
                self.send(now, Dest::Broadcast, Message::Lpoll { ticket: self.my_ticket(), poll });
            }
        }
    }

    /// One round of the running request: complete it, or (re)broadcast it to the processes
    /// still missing and wait `MsgT + procT + n·MsgT` (the last `n` in the learned `MsgT` with
    /// [`Config::learn_msg_t`]). With [`Config::ask_again`], a repair round whose missing
    /// members all hold the request asks for their replies without its data (AGAIN) and waits
    /// `MsgT + n·MsgT`: their replies are ready.
    fn request_round(&mut self, now: Instant) {
        let ticket = self.my_ticket();
        let seqno = self.coord_state.seqno_of_running();
        let (msg_t, slot_t, ask_again) = (self.cfg.msg_t, self.request_msg_t(), self.cfg.ask_again);
        let Some(Running::Request {
            rmask,
            proc_t,
            deadline,
            broadcasts,
            clock,
            early,
            answers_from,
            sent_at,
            holders,
            ..
        }) = &mut self.coord_state.running
        else {
            return;
        };
        if rmask.is_empty() {
            self.complete_request(now);
            return;
        }
        let again = ask_again && rmask.iter().all(|p| holders.contains(p));
        // They are asked now: only a reply overheard from here on shows them holding it again.
        *holders = PidMask::new();
        *answers_from = now + msg_t + if again { Duration::ZERO } else { *proc_t };
        *sent_at = now;
        *deadline = *answers_from + slot_t.saturating_mul(rmask.len() as u32);
        *broadcasts += 1;
        *clock = RoundClock::new(rmask.clone());
        *early = None;
        let rmask = rmask.clone();
        self.heartbeat_before_round(now);
        if again {
            self.stats.again_sent += 1;
            self.send(now, Dest::Broadcast, Message::Again { ticket, seqno, rmask });
            return;
        }
        let Some(Running::Request { data, .. }) = &mut self.coord_state.running else { return };
        let data = std::mem::take(data);
        self.stats.requests_sent += 1;
        self.send(now, Dest::Broadcast, Message::Areq { ticket, seqno, rmask, data: &data });
        if let Some(Running::Request { data: d, .. }) = &mut self.coord_state.running {
            *d = data;
        }
    }

    fn count_early_repair(&mut self) {
        self.stats.early_repairs += 1;
        self.coord_state.slack.repaired();
    }

    fn complete_request(&mut self, now: Instant) {
        if let Some(Running::Request { id, replies, failed, issued_at, broadcasts, .. }) =
            self.coord_state.running.take()
        {
            self.coord_state.slack.request_done();
            self.events.push_back(Event::Replies(Replies { id, replies, failed, issued_at, done_at: now, broadcasts }));
        }
    }

    #[allow(clippy::too_many_arguments)]
    pub(super) fn on_reply(
        &mut self,
        now: Instant,
        from: u32,
        inc: u32,
        coord: u32,
        coord_inc: u32,
        seqno: u64,
        heard: &PidMask,
        data: &[u8],
    ) -> bool {
        if coord != self.pid || coord_inc != self.incarnation || !self.view.has(from, inc) {
            return false;
        }
        let (current, slot_before) = (self.coord_state.seqno_of_running(), self.request_msg_t());
        let Some(Running::Request { rmask, replies, clock, holders, broadcasts, sent_at, .. }) =
            &mut self.coord_state.running
        else {
            return false;
        };
        if seqno != current {
            return false;
        }
        // Whoever `from` overheard answering holds the request, whether its reply reached us.
        for p in heard.iter().filter(|&p| rmask.contains(p)) {
            let _ = holders.insert(p);
        }
        if !rmask.remove(from) {
            return false;
        }
        // An answer sooner after the repair than any answer follows a broadcast (or than one
        // slot) answered the round before: the repair went early.
        let window = self.msg_est.least().map_or(slot_before, |l| l.min(slot_before));
        if *broadcasts > 1 && now < *sent_at + window {
            self.stats.early_answers += 1;
            let held = self.coord_state.slack.get(slot_before);
            self.coord_state.slack.late_answer(now.saturating_duration_since(*sent_at) + held, true);
        }
        replies.insert(from, data.to_vec());
        clock.answered(now, from, &mut self.msg_est);
        let (learn, msg_t, slot_t) = (self.cfg.learn_msg_t, self.cfg.msg_t, self.request_msg_t());
        let slack = self.coord_state.slack.get(slot_t);
        let Some(Running::Request { rmask, clock, early, answers_from, .. }) = &mut self.coord_state.running else {
            return false;
        };
        // An answer after the early repair would have gone without the slack: one it saved.
        if let Some(base) = early.take_if(|base| now > *base) {
            self.coord_state.slack.late_answer(now.saturating_duration_since(base), false);
        }
        if rmask.is_empty() {
            self.complete_request(now);
        } else if self.cfg.early_repair {
            // Replies come in slot order: a member whose slot comes `k` slots after `from`'s
            // has sent by `k·MsgT` from now (its timer counts from the slot it last heard),
            // so the round is over once the last missing member's slot has passed. A learned
            // `MsgT` shows the channel, not the members' processing: its slots count from no
            // earlier than when they all are ready (and never end later than `msg_t`'s).
            // Repairs shown premature widen the wait by a slack (`RepairSlack`), added where
            // the deadline is read: `early` is when the repair goes without it.
            let slot = |p: u32| clock.slots().position(p).unwrap_or(0);
            let left = rmask.iter().last().map_or(0, |last| slot(last).saturating_sub(slot(from)));
            if left == 0 && slack.is_zero() {
                self.count_early_repair();
                self.request_round(now);
            } else if left == 0 {
                *early = Some(now);
            } else {
                let slots = |t: Duration| t.saturating_mul(left as u32);
                let mut at = now + slots(msg_t);
                if learn {
                    at = at.min(now.max(*answers_from) + slots(slot_t));
                }
                *early = Some(at);
            }
        }
        true
    }

    /// `OnRecv(JOIN)` (Alg. 3): the next ticket for the joiner, during the poll it answers.
    pub(super) fn on_join(&mut self, now: Instant, from: u32, inc: u32, coord: u32, poll: u64) -> bool {
        let Some(Running::JoinPoll { poll: current, added, .. }) = &mut self.coord_state.running else { return false };
        if coord != self.pid || poll != *current || self.view.get(from).is_some_and(|e| e.incarnation >= inc) {
            return false;
        }
        if !self.view.admits(from) {
            // Its reply slot could not be addressed: refused and counted, never silently
            // left out of requests (and then expelled as silent).
            self.stats.joins_refused += 1;
            return false;
        }
        added.push(from);
        let ticket = self.next_ticket;
        self.next_ticket += 1;
        // `heard` already removed an older incarnation of the joiner.
        self.view.insert(from, Entry { incarnation: inc, ticket, new: true });
        self.last_heard.insert(from, now);
        self.events.push_back(Event::GroupChanged { members: self.view.pids() });
        true
    }

    /// The two-phase view push: the old members first, then each new one in ticket order.
    fn start_push(&mut self, now: Instant, purpose: Purpose) {
        let mut phases = VecDeque::new();
        phases.push_back(self.view.old_members());
        for p in self.view.new_members() {
            phases.push_back(vec![p]);
        }
        self.coord_state.running =
            Some(Running::Push { push: 0, rmask: PidMask::new(), deadline: now, phases, purpose });
        self.next_push_phase(now);
    }

    /// Alg. 6: a new coordinator pushes its view first if it holds new members.
    pub(super) fn start_takeover_push(&mut self, now: Instant) {
        if !self.view.new_members().is_empty() {
            self.start_push(now, Purpose::Takeover);
        }
    }

    fn next_push_phase(&mut self, now: Instant) {
        loop {
            let Some(Running::Push { push, rmask, phases, .. }) = &mut self.coord_state.running else { return };
            let Some(phase) = phases.pop_front() else { break };
            let me = self.pid;
            let targets: PidMask = phase.into_iter().filter(|&p| p != me && self.view.contains(p)).collect();
            if targets.is_empty() {
                continue;
            }
            self.coord_state.push_seq += 1;
            *push = self.coord_state.push_seq;
            *rmask = targets;
            // Members waiting silently for their push are monitored from now on.
            for p in rmask.iter() {
                self.last_heard.insert(p, now);
            }
            self.push_round(now);
            return;
        }
        // Every phase is done: the new members are members.
        let Some(Running::Push { purpose, .. }) = self.coord_state.running.take() else { return };
        self.view.commit();
        if let Purpose::CheckJoins { added } = purpose {
            let added = added.into_iter().filter(|&p| self.view.contains(p)).collect();
            self.events.push_back(Event::JoinsChecked { added });
        }
    }

    fn push_round(&mut self, now: Instant) {
        let (ticket, next_ticket, view) = (self.my_ticket(), self.next_ticket, self.view.to_entries());
        let wait = self.cfg.msg_t;
        let Some(Running::Push { push, rmask, deadline, .. }) = &mut self.coord_state.running else { return };
        if rmask.is_empty() {
            self.next_push_phase(now);
            return;
        }
        *deadline = now + wait + wait.saturating_mul(rmask.len() as u32);
        let msg = Message::Vpush { ticket, push: *push, next_ticket, rmask: rmask.clone(), view };
        self.heartbeat_before_round(now);
        self.stats.pushes_sent += 1;
        self.send(now, Dest::Broadcast, msg);
    }

    pub(super) fn on_view_ack(
        &mut self,
        now: Instant,
        from: u32,
        inc: u32,
        coord: u32,
        coord_inc: u32,
        push: u64,
    ) -> bool {
        if coord != self.pid || coord_inc != self.incarnation || !self.view.has(from, inc) {
            return false;
        }
        let Some(Running::Push { push: current, rmask, .. }) = &mut self.coord_state.running else { return false };
        if push != *current || !rmask.remove(from) {
            return false;
        }
        if rmask.is_empty() {
            self.next_push_phase(now);
        }
        true
    }

    /// A member left the coordinator's view: stop waiting for it.
    pub(super) fn coord_member_gone(&mut self, now: Instant, pid: u32, reason: RemoveReason) {
        let removed = match &mut self.coord_state.running {
            Some(Running::Request { rmask, .. }) | Some(Running::Push { rmask, .. }) => rmask.remove(pid),
            _ => false,
        };
        match &mut self.coord_state.running {
            Some(Running::Request { rmask, failed, .. }) if removed => {
                failed.push(pid);
                if rmask.is_empty() {
                    self.complete_request(now);
                }
            }
            Some(Running::Push { rmask, .. }) if removed && rmask.is_empty() => self.next_push_phase(now),
            Some(Running::LeavePoll { left, .. }) if reason == RemoveReason::Left => left.push(pid),
            _ => {}
        }
    }

    /// The deadline of the running round whose answers come in slot order (a request or a
    /// view push), if one runs.
    pub(super) fn slotted_round_deadline(&self) -> Option<Instant> {
        match &self.coord_state.running {
            Some(Running::Request { deadline, early, .. }) if self.is_coordinator() => {
                let slack = self.coord_state.slack.get(self.request_msg_t());
                Some(early.map_or(*deadline, |e| (e + slack).min(*deadline)))
            }
            Some(Running::Push { deadline, .. }) if self.is_coordinator() => Some(*deadline),
            _ => None,
        }
    }

    pub(super) fn coord_deadline(&self) -> Option<Instant> {
        if !self.is_coordinator() {
            return None;
        }
        match &self.coord_state.running {
            Some(Running::Request { .. }) | Some(Running::Push { .. }) => self.slotted_round_deadline(),
            Some(Running::JoinPoll { until, .. }) | Some(Running::LeavePoll { until, .. }) => Some(*until),
            None => None,
        }
    }

    pub(super) fn coord_timeout(&mut self, now: Instant) {
        if self.coord_deadline().is_none_or(|d| d > now) {
            return;
        }
        match &mut self.coord_state.running {
            Some(Running::Request { deadline, .. }) => {
                if now < *deadline {
                    self.count_early_repair();
                }
                self.request_round(now)
            }
            Some(Running::Push { .. }) => self.push_round(now),
            Some(Running::JoinPoll { added, .. }) => {
                let added = std::mem::take(added);
                self.coord_state.running = None;
                if self.view.new_members().is_empty() {
                    self.events.push_back(Event::JoinsChecked { added: vec![] });
                } else {
                    self.start_push(now, Purpose::CheckJoins { added });
                }
            }
            Some(Running::LeavePoll { left, .. }) => {
                let left = std::mem::take(left);
                self.coord_state.running = None;
                self.events.push_back(Event::LeavesChecked { left });
            }
            None => {}
        }
    }

    /// Another process acts as coordinator; `holds_me` tells whether its view holds this
    /// process, when its message carries a view (HBEAT, VPUSH). Whoever was removed by the
    /// other stands down: if `from` is in this view, it must have removed us (it would not
    /// coordinate otherwise); if it is not, we removed it (or never knew it), and it will stand
    /// down when it hears us, unless its view lacks us too: then both removed each other and
    /// the larger ticket stands down.
    pub(super) fn coordinator_conflict(
        &mut self,
        now: Instant,
        from: u32,
        inc: u32,
        ticket: u64,
        holds_me: Option<bool>,
    ) -> bool {
        let mutual = holds_me == Some(false) && (ticket, from) < (self.my_ticket(), self.pid);
        if self.view.has(from, inc) || mutual {
            tracing::debug!(me = self.pid, other = from, "second coordinator heard: standing down");
            self.leave_group(now, LeftReason::Expelled { by: from });
        }
        true
    }

    /// Heartbeats: signs of life (already noted), and news of removals. A coordinator learns
    /// it was removed from a member's view without it; an ordinary member adopts its
    /// coordinator's removals, and learns its own.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn on_heartbeat(
        &mut self,
        now: Instant,
        from: u32,
        inc: u32,
        ticket: u64,
        view: u64,
        coord: bool,
        members: &PidMask,
    ) -> bool {
        if self.is_coordinator() {
            if coord {
                return self.coordinator_conflict(now, from, inc, ticket, Some(members.contains(self.pid)));
            }
            if self.view.has(from, inc) && !members.contains(self.pid) {
                self.leave_group(now, LeftReason::Expelled { by: from });
            }
            return true;
        }
        if !self.is_member() || !coord || self.coord != Some(from) || !self.view.has(from, inc) {
            return false;
        }
        // A heartbeat sent before the push this view came from is stale.
        if self.view_push.0 == from && view < self.view_push.1 {
            return false;
        }
        if !members.contains(self.pid) {
            self.leave_group(now, LeftReason::Expelled { by: from });
            return true;
        }
        let gone: Vec<u32> = self.view.pids().into_iter().filter(|&p| !members.contains(p)).collect();
        for p in gone {
            self.remove_member(now, p, RemoveReason::ByCoordinator);
        }
        true
    }

    /// Drops the coordinator's operations (it stopped coordinating); running and queued
    /// requests are reported aborted.
    pub(super) fn abort_coordination(&mut self) {
        let cs = std::mem::take(&mut self.coord_state);
        if let Some(Running::Request { id, .. }) = cs.running {
            self.events.push_back(Event::RequestAborted { id });
        }
        for op in cs.queue {
            if let Op::Request { id, .. } = op {
                self.events.push_back(Event::RequestAborted { id });
            }
        }
    }
}

impl CoordState {
    /// The sequence number of the running request (request ids are their sequence numbers).
    fn seqno_of_running(&self) -> u64 {
        match &self.running {
            Some(Running::Request { id, .. }) => id.0,
            _ => 0,
        }
    }
}
