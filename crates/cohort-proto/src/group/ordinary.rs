//! The addressed side: handling requests and answering in slots (Alg. 2), answering join and
//! leave polls (Alg. 3, 4), adopting and acknowledging view pushes (Alg. 5).

use super::member::Member;
use super::slot::Slot;
use super::timing::RoundClock;
use super::{Dest, Event, IncomingId, LeftReason, PidMask, RemoveReason, ReplyError, State, View};
use cohort_time::Instant;
use cohort_wire::group::{Message, ViewEntry};

/// The latest request handed to the application (Table II `seqno` and `reply`).
#[derive(Debug)]
pub(super) struct Incoming {
    pub id: IncomingId,
    /// The application's reply once given; re-sent, never recomputed.
    pub reply: Option<Vec<u8>>,
    /// The slot to send it in, while the coordinator still asks for it.
    pub slot: Option<Slot>,
    /// The answers of the latest broadcast of it, as heard here.
    pub clock: RoundClock,
    /// The members whose replies to it were overheard here (with [`Config::ask_again`]: the
    /// reply names them, as holders of the request).
    ///
    /// [`Config::ask_again`]: super::Config::ask_again
    pub heard: PidMask,
}

/// The acknowledgement of a view push, waiting for its slot.
#[derive(Debug)]
pub(super) struct AckSlot {
    pub coord: u32,
    pub coord_inc: u32,
    pub push: u64,
    pub slot: Slot,
}

impl Member {
    /// Answers request `id` (from [`Event::Request`]) with `data` (`ProcessRequest`'s result).
    /// The reply goes in this process's slot, and is re-sent whenever the coordinator asks
    /// again.
    pub fn reply(&mut self, now: Instant, id: IncomingId, data: Vec<u8>) -> Result<(), ReplyError> {
        if data.len() > self.cfg.max_payload {
            return Err(ReplyError::TooLarge { len: data.len(), max: self.cfg.max_payload });
        }
        let msg_t = self.request_msg_t();
        let Some(inc) = self.incoming.as_mut().filter(|i| i.id == id) else { return Err(ReplyError::Stale(id)) };
        if inc.reply.is_some() {
            return Err(ReplyError::AlreadyReplied(id));
        }
        inc.reply = Some(data);
        if let Some(s) = &mut inc.slot {
            s.ready(now, msg_t);
        }
        self.send_due_answers(now);
        Ok(())
    }

    /// `OnRecv(AREQ)` from the coordinator.
    pub(super) fn on_request(
        &mut self,
        now: Instant,
        from: u32,
        inc: u32,
        seqno: u64,
        rmask: PidMask,
        data: &[u8],
    ) -> bool {
        if !self.is_member() || self.coord != Some(from) || !self.view.has(from, inc) {
            return false;
        }
        // The coordinator runs one operation at a time: its pushes are complete.
        self.view.commit();
        let id = IncomingId { coord: from, coord_incarnation: inc, seqno };
        match &self.incoming {
            // A re-broadcast: answer again (without handling again) if still asked.
            Some(cur) if cur.id == id => self.asked_again(now, rmask),
            Some(cur) if cur.id.coord == from && cur.id.coord_incarnation == inc && cur.id.seqno > seqno => {
                return false;
            }
            _ => {
                if !rmask.contains(self.pid) {
                    return true;
                }
                let clock = RoundClock::new(rmask.clone());
                let slot = Slot::new(rmask, self.pid);
                self.incoming = Some(Incoming { id, reply: None, slot, clock, heard: PidMask::new() });
                self.stats.requests_handled += 1;
                self.events.push_back(Event::Request { id, data: data.to_vec() });
            }
        }
        self.send_due_answers(now);
        true
    }

    /// `OnRecv(AGAIN)` from the coordinator ([`Config::ask_again`]): a repair round of the
    /// request this process holds, without its data. A process that does not hold it (the
    /// coordinator could only think so across a change of view) can do nothing with it.
    ///
    /// [`Config::ask_again`]: super::Config::ask_again
    pub(super) fn on_again(&mut self, now: Instant, from: u32, inc: u32, seqno: u64, rmask: PidMask) -> bool {
        if !self.is_member() || self.coord != Some(from) || !self.view.has(from, inc) {
            return false;
        }
        let id = IncomingId { coord: from, coord_incarnation: inc, seqno };
        if self.incoming.as_ref().is_none_or(|cur| cur.id != id) {
            return false;
        }
        self.view.commit();
        self.asked_again(now, rmask);
        self.send_due_answers(now);
        true
    }

    /// A new round of the request this process holds asks `rmask`: the reply (once given)
    /// goes in this process's slot of it, if it is addressed.
    fn asked_again(&mut self, now: Instant, rmask: PidMask) {
        let msg_t = self.request_msg_t();
        let Some(cur) = &mut self.incoming else { return };
        cur.clock = RoundClock::new(rmask.clone());
        cur.slot = Slot::new(rmask, self.pid);
        if let (Some(s), Some(_)) = (&mut cur.slot, &cur.reply) {
            s.ready(now, msg_t);
        }
    }

    /// An overheard reply: the next slot may be ours (`nxtBit`).
    pub(super) fn overheard_reply(&mut self, now: Instant, from: u32, coord: u32, coord_inc: u32, seqno: u64) -> bool {
        let Some(cur) = &mut self.incoming else { return false };
        if cur.id != (IncomingId { coord, coord_incarnation: coord_inc, seqno }) {
            return false;
        }
        cur.clock.answered(now, from, &mut self.msg_est);
        if self.cfg.ask_again {
            let _ = cur.heard.insert(from);
        }
        let (msg_t, lead) = (self.request_msg_t(), self.cfg.slot_lead);
        let Some(cur) = &mut self.incoming else { return false };
        if let Some(s) = &mut cur.slot {
            s.overheard(now, from, msg_t, lead);
        }
        self.send_due_answers(now);
        true
    }

    /// An overheard view acknowledgement, likewise.
    pub(super) fn overheard_ack(&mut self, now: Instant, from: u32, coord: u32, coord_inc: u32, push: u64) -> bool {
        let (msg_t, lead) = (self.cfg.msg_t, self.cfg.slot_lead);
        let Some(a) = &mut self.ack else { return false };
        if (a.coord, a.coord_inc, a.push) != (coord, coord_inc, push) {
            return false;
        }
        a.slot.overheard(now, from, msg_t, lead);
        self.send_due_answers(now);
        true
    }

    /// Sends the reply and the acknowledgement whose slots have come.
    pub(super) fn send_due_answers(&mut self, now: Instant) {
        if let Some(cur) = &mut self.incoming
            && cur.slot.as_ref().is_some_and(|s| s.due(now))
            && let Some(reply) = cur.reply.clone()
        {
            cur.slot = None;
            cur.clock.answered_own(self.pid);
            let (id, heard) = (cur.id, cur.heard.clone());
            self.stats.replies_sent += 1;
            let (coord, coord_inc, seqno) = (id.coord, id.coord_incarnation, id.seqno);
            let msg = Message::Arpl { coord, coord_inc, seqno, heard, data: &reply };
            self.send(now, Dest::Broadcast, msg);
        }
        if self.ack.as_ref().is_some_and(|a| a.slot.due(now))
            && let Some(a) = self.ack.take()
        {
            self.stats.acks_sent += 1;
            self.send(now, Dest::Broadcast, Message::Vack { coord: a.coord, coord_inc: a.coord_inc, push: a.push });
        }
    }

    /// `OnRecv(JPOLL)`: a joiner answers with a unicast JOIN, each new poll with the next
    /// incarnation (so no two coordinators, nor two polls, can admit the same incarnation).
    pub(super) fn on_join_poll(&mut self, now: Instant, from: u32, inc: u32, poll: u64) -> bool {
        if self.is_member() && self.coord == Some(from) && self.view.has(from, inc) {
            self.view.commit();
            return true;
        }
        if self.state != State::Join {
            return false;
        }
        if self.answered_poll != Some((from, poll)) {
            if self.incarnation == u32::MAX {
                return false;
            }
            self.incarnation += 1;
            self.answered_poll = Some((from, poll));
        }
        self.stats.joins_sent += 1;
        self.send(now, Dest::Unicast(from), Message::Join { coord: from, poll });
        true
    }

    /// `OnRecv(LPOLL)`: a leaving member leaves now.
    pub(super) fn on_leave_poll(&mut self, now: Instant, from: u32, inc: u32) -> bool {
        if !self.is_member() || self.coord != Some(from) || !self.view.has(from, inc) {
            return false;
        }
        self.view.commit();
        if self.state == State::Leave {
            self.leave_group(now, LeftReason::Requested);
        }
        true
    }

    /// `OnRecv(VPUSH)` (Alg. 5): adopt the pushed view, follow its pusher, acknowledge in
    /// slot order. A joiner becomes a member here; a member that receives the push of a
    /// member of its view that took over follows it at once.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn on_view_push(
        &mut self,
        now: Instant,
        from: u32,
        inc: u32,
        push: u64,
        next_ticket: u64,
        rmask: PidMask,
        entries: &[ViewEntry],
    ) -> bool {
        if !rmask.contains(self.pid) {
            return false;
        }
        let pushed = View::from_entries(entries);
        let coherent =
            pushed.has(self.pid, self.incarnation) && pushed.has(from, inc) && pushed.min_ticket() == Some(from);
        let accept = coherent
            && match self.state {
                State::Join => true,
                State::Normal | State::Leave => self.coord == Some(from) || self.view.has(from, inc),
                State::Left => false,
            };
        if !accept {
            return false;
        }
        if self.state == State::Join {
            self.state = State::Normal;
            self.answered_poll = None;
            self.events.push_back(Event::Joined { coord: from, members: pushed.pids() });
        }
        if self.coord != Some(from) {
            self.coord = Some(from);
            self.incoming = None;
        }
        for (p, e) in self.view.iter() {
            if pushed.get(p).is_none_or(|n| n.incarnation != e.incarnation) {
                self.events.push_back(Event::Removed {
                    pid: p,
                    incarnation: e.incarnation,
                    reason: RemoveReason::ByCoordinator,
                });
            }
        }
        for p in pushed.pids() {
            if !self.view.has(p, pushed.get(p).map_or(0, |e| e.incarnation)) {
                self.last_heard.insert(p, now);
            }
        }
        self.last_heard.retain(|p, _| pushed.contains(*p));
        self.view = pushed;
        self.view_push = (from, push);
        self.next_ticket = self.next_ticket.max(next_ticket);
        let Some(mut slot) = Slot::new(rmask, self.pid) else { return true };
        slot.ready(now, self.cfg.msg_t);
        self.ack = Some(AckSlot { coord: from, coord_inc: inc, push, slot });
        self.send_due_answers(now);
        true
    }
}
