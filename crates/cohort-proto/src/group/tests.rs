//! Script-like tests on a simulated team: members on one broadcast domain with a fixed
//! delivery delay, a programmable loss filter, crashes and restarts, in virtual time.

use super::*;
use cohort_wire::group::{GroupRepr, Message, kind};
use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap};

const MS: Duration = Duration::from_millis(1);

fn cfg() -> Config {
    Config { msg_t: 10 * MS, fault_detect_t: 400 * MS, heartbeat_t: 100 * MS, max_payload: 60_000, ..Config::default() }
}

/// The reply a test application gives: the request with the replier's pid appended.
fn answer(pid: u32, data: &[u8]) -> Vec<u8> {
    let mut r = data.to_vec();
    r.extend_from_slice(&pid.to_be_bytes());
    r
}

type Filter = Box<dyn FnMut(Instant, u32, u32, &GroupRepr<'_>) -> bool>;

/// One datagram on the air: when it lands, where, from whom.
type Flight = Reverse<(Instant, u64, u32, u32, Vec<u8>)>;

struct Team {
    now: Instant,
    members: BTreeMap<u32, Member>,
    air: BinaryHeap<Flight>,
    seq: u64,
    delay: Duration,
    /// `true`: drop this datagram from `from` to `to`.
    drop: Filter,
    /// Every datagram sent: time, sender, destination, bytes.
    sent: Vec<(Instant, u32, Dest, Vec<u8>)>,
    events: BTreeMap<u32, Vec<(Instant, Event)>>,
    /// Members whose application answers requests at once.
    auto_reply: bool,
    buf: Vec<u8>,
}

impl Team {
    fn new(pids: &[u32]) -> Self {
        Self::with_cfg(pids, cfg())
    }

    fn with_cfg(pids: &[u32], cfg: Config) -> Self {
        let mut t = Team {
            now: Instant::ZERO,
            members: BTreeMap::new(),
            air: BinaryHeap::new(),
            seq: 0,
            delay: MS,
            drop: Box::new(|_, _, _, _| false),
            sent: vec![],
            events: BTreeMap::new(),
            auto_reply: true,
            buf: vec![0u8; Member::MAX_DATAGRAM],
        };
        for &p in pids {
            t.members.insert(p, Member::with_group(cfg, p, pids, Instant::ZERO).unwrap());
        }
        t.flush();
        t
    }

    fn m(&mut self, pid: u32) -> &mut Member {
        self.members.get_mut(&pid).unwrap()
    }

    /// Calls `f` on member `pid` with the current time.
    fn on<R>(&mut self, pid: u32, f: impl FnOnce(&mut Member, Instant) -> R) -> R {
        let now = self.now;
        let r = f(self.members.get_mut(&pid).unwrap(), now);
        self.flush();
        r
    }

    fn add_outsider(&mut self, pid: u32) {
        let mut m = Member::new(cfg(), pid, 0).unwrap();
        m.join(self.now).unwrap();
        self.members.insert(pid, m);
    }

    fn crash(&mut self, pid: u32) {
        self.members.remove(&pid);
    }

    fn flush(&mut self) {
        loop {
            let mut any = false;
            let pids: Vec<u32> = self.members.keys().copied().collect();
            for &p in &pids {
                while let Some(tx) = self.members.get_mut(&p).unwrap().poll_transmit(self.now, &mut self.buf) {
                    any = true;
                    let bytes = self.buf[..tx.len].to_vec();
                    self.sent.push((self.now, p, tx.dest, bytes.clone()));
                    let r = GroupRepr::parse(&bytes).unwrap();
                    let tos: Vec<u32> = match tx.dest {
                        Dest::Broadcast => pids.iter().copied().filter(|&q| q != p).collect(),
                        Dest::Unicast(q) => vec![q],
                    };
                    for to in tos {
                        if !(self.drop)(self.now, p, to, &r) {
                            self.seq += 1;
                            self.air.push(Reverse((self.now + self.delay, self.seq, to, p, bytes.clone())));
                        }
                    }
                }
                while let Some(ev) = self.members.get_mut(&p).unwrap().poll_event() {
                    any = true;
                    if let (true, Event::Request { id, data }) = (self.auto_reply, &ev) {
                        let r = answer(p, data);
                        self.members.get_mut(&p).unwrap().reply(self.now, *id, r).unwrap();
                    }
                    self.events.entry(p).or_default().push((self.now, ev));
                }
            }
            if !any {
                return;
            }
        }
    }

    fn step(&mut self, limit: Instant) -> bool {
        let next = self.members.values().filter_map(|m| m.poll_timeout()).chain(self.air.peek().map(|f| f.0.0)).min();
        let Some(t) = next else { return false };
        if t > limit {
            self.now = limit;
            return false;
        }
        self.now = self.now.max(t);
        while self.air.peek().is_some_and(|f| f.0.0 <= self.now) {
            let Reverse((_, _, to, _, bytes)) = self.air.pop().unwrap();
            if let Some(m) = self.members.get_mut(&to) {
                m.handle_datagram(self.now, &bytes);
            }
        }
        for m in self.members.values_mut() {
            if m.poll_timeout().is_some_and(|t| t <= self.now) {
                m.handle_timeout(self.now);
            }
        }
        self.flush();
        true
    }

    fn run_for(&mut self, d: Duration) {
        let limit = self.now + d;
        let mut n = 0;
        let mut spin = crate::spin::SpinGuard::new(self.now);
        while self.step(limit) {
            n += 1;
            assert!(n < 2_000_000, "runaway at {:?}", self.now);
            spin.step(self.now, || format!("{} members", self.members.len()));
        }
    }

    /// Runs until `pid` reports an event matching `f` (at the current time or later), for at
    /// most `d`; returns it.
    fn until(&mut self, pid: u32, d: Duration, f: impl Fn(&Event) -> bool) -> Event {
        let (start, limit) = (self.now, self.now + d);
        loop {
            if let Some((_, e)) = self.events.get(&pid).and_then(|v| v.iter().find(|(t, e)| *t >= start && f(e))) {
                return e.clone();
            }
            assert!(self.step(limit), "no such event at {pid} by {:?}: {:?}", self.now, self.events.get(&pid));
        }
    }

    /// Messages of type `k` sent from `since` on, parsed.
    fn sent_of(&self, k: u8, since: Instant) -> Vec<(Instant, u32, GroupRepr<'_>)> {
        self.sent
            .iter()
            .filter(|(t, _, _, b)| *t >= since && b[0] == k)
            .map(|(t, p, _, b)| (*t, *p, GroupRepr::parse(b).unwrap()))
            .collect()
    }

    fn views_agree(&self) -> bool {
        let mut it = self.members.values().filter(|m| m.is_member());
        let Some(first) = it.next() else { return true };
        it.all(|m| m.view().summary() == first.view().summary() && m.coordinator() == first.coordinator())
    }
}

fn replies(e: Event) -> Replies {
    match e {
        Event::Replies(r) => r,
        other => panic!("not replies: {other:?}"),
    }
}

#[test]
fn one_broadcast_and_replies_in_slot_order() {
    let mut t = Team::new(&[1, 2, 3, 4]);
    assert!(matches!(t.events[&1][0].1, Event::BecameCoord { .. }));
    let start = t.now;
    let id = t.m(1).request_reply(start, &[4, 2, 3, 1], b"go".to_vec(), 5 * MS).unwrap();
    let r = replies(t.until(1, Duration::from_secs(1), |e| matches!(e, Event::Replies(_))));
    assert_eq!(r.id, id);
    assert_eq!(r.replies.keys().copied().collect::<Vec<_>>(), [2, 3, 4]);
    for (p, data) in &r.replies {
        assert_eq!(data, &answer(*p, b"go"));
    }
    assert!(r.failed.is_empty());
    assert_eq!(r.broadcasts, 1);
    assert_eq!(t.sent_of(kind::AREQ, start).len(), 1);
    let arpl = t.sent_of(kind::ARPL, start);
    assert_eq!(arpl.iter().map(|a| a.1).collect::<Vec<_>>(), [2, 3, 4], "slot order");
    // Each reply right after overhearing its predecessor: one delivery delay apart.
    assert_eq!(arpl[1].0 - arpl[0].0, t.delay);
    assert_eq!(arpl[2].0 - arpl[1].0, t.delay);
}

#[test]
fn a_lost_reply_is_recovered_by_slot_timers_and_a_rebroadcast_to_the_missing_only() {
    // Without a slot lead 4 goes at its slot timer, one MsgT after overhearing 2; with one,
    // `slot_lead` after it.
    for (lead, after_two) in [(Duration::ZERO, cfg().msg_t), (2 * MS, 2 * MS)] {
        let cfg = Config { early_repair: false, slot_lead: lead, ..cfg() };
        let (mut t, start) = lose_the_first_replies_with(&[1, 2, 3, 4], &[3], cfg);
        let areq = t.sent_of(kind::AREQ, start);
        let Message::Areq { rmask, .. } = &areq[1].2.msg else { unreachable!() };
        assert_eq!(rmask.iter().collect::<Vec<_>>(), [3], "the re-broadcast addresses only the missing");
        let arpl = t.sent_of(kind::ARPL, start);
        let at = |p: u32| arpl.iter().find(|a| a.1 == p).unwrap().0;
        assert_eq!(at(4) - at(2), t.delay + after_two, "lead {lead:?}");
        // 3 handled the request once and re-sent its stored reply.
        assert_eq!(t.m(3).stats().requests_handled, 1);
        assert_eq!(t.m(3).stats().replies_sent, 2);
    }
}

/// A request from 1 to every other member of `team` (procT 50 ms) whose first replies from
/// `lost` are lost; returns the team once the request completed, and when it was issued.
fn lose_the_first_replies_of(team: &[u32], lost: &'static [u32], early_repair: bool) -> (Team, Instant) {
    lose_the_first_replies_with(team, lost, Config { early_repair, ..cfg() })
}

fn lose_the_first_replies_with(team: &[u32], lost: &'static [u32], cfg: Config) -> (Team, Instant) {
    let mut t = Team::with_cfg(team, cfg);
    let mut first: BTreeMap<u32, Instant> = BTreeMap::new();
    t.drop = Box::new(move |now, from, _, r| {
        if lost.contains(&from) && matches!(r.msg, Message::Arpl { .. }) && *first.entry(from).or_insert(now) == now {
            return true;
        }
        false
    });
    let start = t.now;
    let to: Vec<u32> = team[1..].to_vec();
    t.m(1).request_reply(start, &to, b"x".to_vec(), 50 * MS).unwrap();
    let r = replies(t.until(1, Duration::from_secs(1), |e| matches!(e, Event::Replies(_))));
    assert_eq!(r.replies.len(), to.len());
    assert_eq!(r.broadcasts, 2);
    (t, start)
}

/// When `from`'s reply (as sent at or after `start`) reached the coordinator.
fn reply_reached_coordinator(t: &Team, start: Instant, from: u32) -> Instant {
    t.sent_of(kind::ARPL, start).iter().find(|a| a.1 == from).unwrap().0 + t.delay
}

#[test]
fn early_repair_asks_a_missing_member_again_when_the_last_slot_answers() {
    let (mut t, start) = lose_the_first_replies_of(&[1, 2, 3, 4], &[3], true);
    let areq = t.sent_of(kind::AREQ, start);
    let Message::Areq { rmask, .. } = &areq[1].2.msg else { unreachable!() };
    assert_eq!(rmask.iter().collect::<Vec<_>>(), [3]);
    // The second broadcast went when 4's reply (the last slot) reached the coordinator, long
    // before the round's deadline (procT 50 ms).
    assert_eq!(areq[1].0, reply_reached_coordinator(&t, start, 4));
    assert_eq!(t.m(1).stats().early_repairs, 1);
    assert_eq!(t.m(3).stats().requests_handled, 1);
}

#[test]
fn without_early_repair_the_deadline_repairs() {
    let (mut t, start) = lose_the_first_replies_of(&[1, 2, 3, 4], &[3], false);
    let areq = t.sent_of(kind::AREQ, start);
    // MsgT + procT + 3 MsgT after the first broadcast.
    assert_eq!(areq[1].0 - areq[0].0, 4 * cfg().msg_t + 50 * MS);
    assert_eq!(t.m(1).stats().early_repairs, 0);
}

/// The last replies of a round lost: the coordinator asks again once the last missing
/// member's slot has passed, `k·MsgT` after the latest reply it heard (`k` slots later), not
/// at the round's deadline.
#[test]
fn early_repair_waits_only_for_the_slots_of_the_missing_when_the_last_replies_are_lost() {
    for (team, lost, heard, slots) in [
        (&[1, 2, 3, 4][..], &[4][..], 3, 1),
        (&[1, 2, 3, 4, 5, 6][..], &[5, 6][..], 4, 2),
        (&[1, 2, 3, 4, 5, 6], &[4, 6], 5, 1),
    ] {
        let (mut t, start) = lose_the_first_replies_of(team, lost, true);
        assert_eq!(t.m(1).stats().early_repairs, 1);
        let areq = t.sent_of(kind::AREQ, start);
        let at = reply_reached_coordinator(&t, start, heard);
        assert_eq!(areq[1].0, at + cfg().msg_t * slots, "{lost:?} lost");
        let Message::Areq { rmask, .. } = &areq[1].2.msg else { unreachable!() };
        assert_eq!(rmask.iter().collect::<Vec<_>>(), lost);
        assert!(areq[1].0 - areq[0].0 < cfg().msg_t * team.len() as u32, "before the deadline");
    }
}

/// With `learn_msg_t`, clean rounds teach every process how far apart the answers come (one
/// delivery delay here), and the waits a loss costs shrink to that; without it they stay
/// `MsgT`. The members' processing keeps its allowance `MsgT + procT`.
#[test]
fn a_learned_msg_t_shortens_the_waits_of_a_lost_answer_and_of_a_lost_request() {
    let msg_t = 30 * MS;
    for learn in [true, false] {
        // No slot lead: this channel has no carrier sense to queue an answer behind another.
        let cfg = Config { learn_msg_t: learn, msg_t, slot_lead: Duration::ZERO, ..cfg() };
        let mut t = Team::with_cfg(&[1, 2, 3, 4, 5], cfg);
        t.delay = 10 * MS;
        let to = [2, 3, 4, 5];
        let request = |t: &mut Team, proc_t: Duration| {
            let id = t.on(1, |m, now| m.request_reply(now, &to, b"x".to_vec(), proc_t)).unwrap();
            replies(t.until(1, Duration::from_secs(1), |e| matches!(e, Event::Replies(r) if r.id == id)))
        };
        for _ in 0..4 {
            assert_eq!(request(&mut t, 5 * MS).broadcasts, 1);
        }
        let slot_t = t.m(1).request_msg_t();
        for p in 1..=5 {
            let learned = t.m(p).request_msg_t();
            if learn {
                assert!(learned > t.delay && learned < msg_t / 2, "{p}: {learned:?}");
            } else {
                assert_eq!(learned, msg_t);
            }
        }
        let lose_5s_first_answer = |t: &mut Team| {
            let mut lost = false;
            t.drop = Box::new(move |_, from, _, r| {
                let drop = !lost && from == 5 && matches!(r.msg, Message::Arpl { .. });
                lost |= drop;
                drop
            });
        };
        // The last slot's first answer lost (procT 0): asked again one learned MsgT after
        // 4's answer, which came after `MsgT` (the slots count from there).
        let start = t.now;
        lose_5s_first_answer(&mut t);
        assert_eq!(request(&mut t, Duration::ZERO).broadcasts, 2);
        let areq = t.sent_of(kind::AREQ, start);
        let at = reply_reached_coordinator(&t, start, 4);
        assert!(at >= areq[0].0 + msg_t);
        assert_eq!(areq[1].0, at + slot_t, "learn {learn}");
        // With procT 50 ms the members may still be processing when 4 answers: learned slots
        // count from `MsgT + procT` after the broadcast, `MsgT`'s from the answer, whichever
        // ends first.
        let start = t.now;
        lose_5s_first_answer(&mut t);
        assert_eq!(request(&mut t, 50 * MS).broadcasts, 2);
        let areq = t.sent_of(kind::AREQ, start);
        let at = reply_reached_coordinator(&t, start, 4);
        assert_eq!(areq[1].0, (at + msg_t).min(areq[0].0 + msg_t + 50 * MS + slot_t), "learn {learn}");
        // The request lost at every member: asked again `MsgT + procT + 4` learned `MsgT` on.
        let start = t.now;
        let mut first: Option<Instant> = None;
        t.drop =
            Box::new(move |now, _, _, r| matches!(r.msg, Message::Areq { .. }) && *first.get_or_insert(now) == now);
        assert_eq!(request(&mut t, 50 * MS).broadcasts, 2);
        let areq = t.sent_of(kind::AREQ, start);
        assert_eq!(areq[1].0 - areq[0].0, msg_t + 50 * MS + slot_t * 4, "learn {learn}");
        assert_eq!(learn, slot_t * 4 < msg_t * 4);
    }
}

/// A team of 1-5 (learned `MsgT` off, so the timers are `MsgT`'s) where `lose` drops what it
/// names; 1 asks 2-5 with procT 50 ms. Returns the team, when the request was issued and
/// its replies.
fn ask_again_team(ask_again: bool, lose: Filter) -> (Team, Instant, Replies) {
    let cfg = Config { ask_again, learn_msg_t: false, ..cfg() };
    let mut t = Team::with_cfg(&[1, 2, 3, 4, 5], cfg);
    t.drop = lose;
    let start = t.now;
    let id = t.on(1, |m, now| m.request_reply(now, &[2, 3, 4, 5], b"x".to_vec(), 50 * MS)).unwrap();
    let r = replies(t.until(1, Duration::from_secs(2), |e| matches!(e, Event::Replies(r) if r.id == id)));
    assert_eq!(r.replies.keys().copied().collect::<Vec<_>>(), [2, 3, 4, 5]);
    (t, start, r)
}

/// Drops the first `n` replies `from` sends to the coordinator only (the others hear them).
fn lose_replies_at_the_coordinator(from: u32, n: usize) -> Filter {
    let mut lost = 0;
    Box::new(move |_, f, to, r| {
        let drop = lost < n && f == from && to == 1 && matches!(r.msg, Message::Arpl { .. });
        lost += usize::from(drop);
        drop
    })
}

/// The kinds of the coordinator's request rounds since `start`, in order.
fn rounds(t: &Team, start: Instant) -> Vec<u8> {
    t.sent
        .iter()
        .filter(|s| s.0 >= start && s.1 == 1 && [kind::AREQ, kind::AGAIN].contains(&s.3[0]))
        .map(|s| s.3[0])
        .collect()
}

#[test]
fn a_reply_lost_at_the_coordinator_alone_is_asked_for_again_without_the_request() {
    for ask_again in [true, false] {
        let (mut t, start, r) = ask_again_team(ask_again, lose_replies_at_the_coordinator(3, 1));
        assert_eq!(r.broadcasts, 2);
        // 4 and 5 overheard 3's reply and said so: 3 holds the request.
        let named: Vec<(u32, Vec<u32>)> = t
            .sent_of(kind::ARPL, start)
            .into_iter()
            .map(|(_, p, a)| match a.msg {
                Message::Arpl { heard, .. } => (p, heard.iter().collect()),
                _ => unreachable!(),
            })
            .collect();
        if ask_again {
            assert_eq!(rounds(&t, start), [kind::AREQ, kind::AGAIN]);
            assert_eq!(named[..4], [(2, vec![]), (3, vec![2]), (4, vec![2, 3]), (5, vec![2, 3, 4])]);
            let again = t.sent_of(kind::AGAIN, start);
            let Message::Again { rmask, seqno, .. } = &again[0].2.msg else { unreachable!() };
            assert_eq!((rmask.iter().collect::<Vec<_>>(), *seqno), (vec![3], r.id.0));
            // Asked when the last slot's reply came, as any early repair.
            assert_eq!(again[0].0, reply_reached_coordinator(&t, start, 5));
            assert_eq!((t.m(1).stats().again_sent, t.m(1).stats().requests_sent), (1, 1));
        } else {
            assert_eq!(rounds(&t, start), [kind::AREQ, kind::AREQ]);
            assert!(named.iter().all(|(_, h)| h.is_empty()), "Alg. 2's replies: {named:?}");
            assert_eq!((t.m(1).stats().again_sent, t.m(1).stats().requests_sent), (0, 2));
        }
        // 3 handled the request once and re-sent the reply it holds.
        assert_eq!((t.m(3).stats().requests_handled, t.m(3).stats().replies_sent), (1, 2));
    }
}

#[test]
fn a_member_not_known_to_hold_the_request_gets_it_again_with_the_others() {
    // 3 never hears the request; 4's reply reaches everyone but the coordinator. The repair
    // asks both, so it carries the request.
    let (mut first_to_3, mut lose_4) = (true, lose_replies_at_the_coordinator(4, 1));
    let lose: Filter = Box::new(move |now, from, to, r| {
        if to == 3 && matches!(r.msg, Message::Areq { .. }) && std::mem::take(&mut first_to_3) {
            return true;
        }
        lose_4(now, from, to, r)
    });
    let (mut t, start, r) = ask_again_team(true, lose);
    assert_eq!(r.broadcasts, 2);
    assert_eq!(rounds(&t, start), [kind::AREQ, kind::AREQ]);
    let areq = t.sent_of(kind::AREQ, start);
    let Message::Areq { rmask, .. } = &areq[1].2.msg else { unreachable!() };
    assert_eq!(rmask.iter().collect::<Vec<_>>(), [3, 4]);
    assert_eq!(t.m(1).stats().again_sent, 0);
    assert_eq!((t.m(3).stats().requests_handled, t.m(4).stats().requests_handled), (1, 1));
}

#[test]
fn a_member_asked_again_needs_fresh_evidence_before_it_is_asked_without_the_request_twice() {
    // 3's reply lost at the coordinator in the first round and in the round that asked again:
    // nobody else answered that round, so nothing shows that 3 holds the request, and the
    // third round carries it. The round that asked again waited `MsgT + MsgT`, no procT.
    let (t, start, r) = ask_again_team(true, lose_replies_at_the_coordinator(3, 2));
    assert_eq!(r.broadcasts, 3);
    assert_eq!(rounds(&t, start), [kind::AREQ, kind::AGAIN, kind::AREQ]);
    let again = t.sent_of(kind::AGAIN, start)[0].0;
    let areq = t.sent_of(kind::AREQ, start);
    assert_eq!(areq[1].0 - again, 2 * cfg().msg_t);
}

/// A member slower than the coordinator's early repair: its answer to the first round comes
/// soon after the repair went, which counts it as early (an answer to the repair itself takes
/// the repair's delivery and the answer's); one that comes a slot later does not count.
#[test]
fn answers_that_overtake_a_repair_round_are_counted_as_early() {
    for (late, early) in [(12 * MS, 1), (30 * MS, 0)] {
        let cfg = Config { learn_msg_t: false, ..cfg() };
        let mut t = Team::with_cfg(&[1, 2, 3], cfg);
        t.auto_reply = false;
        let start = t.now;
        let id = t.on(1, |m, now| m.request_reply(now, &[2, 3], b"x".to_vec(), Duration::ZERO)).unwrap();
        let ids = |t: &Team, p: u32| -> Vec<IncomingId> {
            t.events[&p]
                .iter()
                .filter_map(|(_, e)| if let Event::Request { id, .. } = e { Some(*id) } else { None })
                .collect()
        };
        t.run_for(MS);
        let two = ids(&t, 2)[0];
        t.on(2, |m, now| m.reply(now, two, b"2".to_vec())).unwrap();
        // 2's answer came with 3's slot still to pass: the repair goes `MsgT` after it.
        t.run_for(late);
        let three = ids(&t, 3)[0];
        t.on(3, |m, now| m.reply(now, three, b"3".to_vec())).unwrap();
        let r = replies(t.until(1, Duration::from_secs(1), |e| matches!(e, Event::Replies(r) if r.id == id)));
        assert_eq!((r.replies.len(), r.broadcasts), (2, 2));
        assert_eq!(t.m(1).stats().early_answers, early, "3 answered {late:?} after 2");
        assert!(t.sent_of(kind::AREQ, start).len() == 2);
    }
}

/// A member slower than its learned slot: the first time, the early repair overtakes its
/// answer (counted early); the coordinator then waits that lateness more, and the slow answer
/// costs no repair, for as long as the channel's repairs are not needed ones. Once most
/// repairs are needed (answers lost, not late), the slack costs more than it saves and is
/// dropped: the slow answer costs a repair again.
#[test]
fn a_repair_shown_premature_widens_the_early_repair_while_that_saves_airtime() {
    let cfg = Config { msg_t: 30 * MS, slot_lead: Duration::ZERO, ..cfg() };
    let mut t = Team::with_cfg(&[1, 2, 3, 4, 5], cfg);
    t.delay = 10 * MS;
    let to = [2, 3, 4, 5];
    // Every process answers at once; `lose_five` loses 5's first answer on the air.
    let quick = |t: &mut Team, lose_five: bool| {
        t.auto_reply = true;
        let mut lost = !lose_five;
        t.drop = Box::new(move |_, from, _, r| {
            let drop = !lost && from == 5 && matches!(r.msg, Message::Arpl { .. });
            lost |= drop;
            drop
        });
        let id = t.on(1, |m, now| m.request_reply(now, &to, b"x".to_vec(), Duration::ZERO)).unwrap();
        replies(t.until(1, Duration::from_secs(1), |e| matches!(e, Event::Replies(r) if r.id == id))).broadcasts
    };
    // 2-4 answer at once; 5 answers 5 ms after it heard 4, its slot's start (the coordinator
    // hears 4 then too, and waits one learned slot, 11 ms).
    let slow_five = |t: &mut Team| {
        t.auto_reply = false;
        let start = t.now;
        let id = t.on(1, |m, now| m.request_reply(now, &to, b"x".to_vec(), Duration::ZERO)).unwrap();
        t.run_for(t.delay);
        for p in [2, 3, 4] {
            let Some((_, Event::Request { id, data })) = t.events[&p].last().cloned() else { panic!("{p} asked") };
            t.on(p, |m, now| m.reply(now, id, answer(p, &data))).unwrap();
        }
        t.run_for(3 * t.delay + 5 * MS);
        let Some((_, Event::Request { id: five, data })) = t.events[&5].last().cloned() else { panic!("5 asked") };
        assert!(t.now >= start + 4 * t.delay, "4 answered before 5");
        t.on(5, |m, now| m.reply(now, five, answer(5, &data))).unwrap();
        let r = replies(t.until(1, Duration::from_secs(1), |e| matches!(e, Event::Replies(r) if r.id == id)));
        assert_eq!(r.replies.len(), 4);
        (r.broadcasts, t.m(1).stats().early_answers)
    };
    for _ in 0..4 {
        assert_eq!(quick(&mut t, false), 1);
    }
    let slot = t.m(1).request_msg_t();
    assert!(slot > t.delay && slot < t.delay + 5 * MS, "{slot:?}");
    assert_eq!(slow_five(&mut t), (2, 1), "the first slow answer overtakes a repair");
    assert_eq!(slow_five(&mut t), (1, 1), "the next one is waited for");
    for _ in 0..100 {
        assert_eq!(quick(&mut t, false), 1);
    }
    assert_eq!(slow_five(&mut t), (1, 1), "a clean channel needs no repair the slack delays");
    // Repairs of answers lost on the air: the first still waits the slack (the repair goes
    // that long after the learned slot that followed 4's answer ended), the 20th no longer
    // does. (The learned slot at the repair is the one after the request: 5's answers came
    // in rounds of their own, which sample no spacing.)
    let repair_wait = |t: &mut Team| {
        let start = t.now;
        assert_eq!(quick(t, true), 2);
        let areq = t.sent_of(kind::AREQ, start);
        areq[1].0 - reply_reached_coordinator(t, start, 4) - t.m(1).request_msg_t()
    };
    assert_eq!(repair_wait(&mut t), 5 * MS, "4 ms late, plus G");
    for _ in 0..18 {
        repair_wait(&mut t);
    }
    assert_eq!(repair_wait(&mut t), Duration::ZERO);
    assert_eq!(slow_five(&mut t), (2, 2), "the slack was dropped");
}

#[test]
fn asked_again_for_a_request_it_does_not_hold_a_member_does_nothing() {
    let mut t = Team::new(&[1, 2, 3]);
    let again = GroupRepr {
        pid: 1,
        incarnation: 0,
        msg: Message::Again { ticket: 1, seqno: 7, rmask: PidMask::from_pids([2, 3]).unwrap() },
    };
    let mut b = vec![0u8; again.buffer_len()];
    again.emit(&mut b).unwrap();
    let before = t.m(2).stats();
    let now = t.now;
    t.m(2).handle_datagram(now, &b);
    let after = t.m(2).stats();
    assert_eq!((after.ignored, after.requests_handled), (before.ignored + 1, before.requests_handled));
    assert!(t.m(2).poll_event().is_none());
    t.m(2).handle_timeout(now + 100 * MS);
    let mut buf = vec![0u8; Member::MAX_DATAGRAM];
    while let Some(tx) = t.m(2).poll_transmit(now, &mut buf) {
        assert_ne!(buf[..tx.len][0], kind::ARPL, "no reply to a request it never had");
    }
}

#[test]
fn the_coordinators_heartbeat_waits_for_the_end_of_a_round_of_replies() {
    // Requests back to back to 11 members: the replies of a round follow each other on the
    // air, and a heartbeat sent among them would contend with the next one (on a real channel
    // a collision loses that reply and costs a re-broadcast round).
    let pids: Vec<u32> = (1..=12).collect();
    let mut t = Team::new(&pids);
    for i in 0..100u8 {
        t.on(1, |m, now| m.request_reply(now, &pids, vec![i], MS)).unwrap();
    }
    t.run_for(Duration::from_secs(2));
    let done: Vec<Instant> =
        t.events[&1].iter().filter(|(_, e)| matches!(e, Event::Replies(_))).map(|(at, _)| *at).collect();
    assert_eq!(done.len(), 100);
    // In the coordinator's sending order, a heartbeat goes only when every request broadcast
    // so far has all its replies: between two rounds, ahead of the next request.
    let (mut areqs, mut heartbeats) = (0, vec![]);
    for (at, from, _, bytes) in &t.sent {
        match (*from, bytes[0]) {
            (1, kind::AREQ) => areqs += 1,
            (1, kind::HBEAT) => {
                let completed = done.iter().filter(|d| *d <= at).count();
                assert_eq!(areqs, completed, "heartbeat at {at:?} while request {areqs} waited for replies");
                heartbeats.push(*at);
            }
            _ => {}
        }
    }
    assert_eq!(areqs, 100, "no re-broadcast");
    // It still goes every `heartbeat_t`, late by at most the round it waited for.
    let round = done[1] - done[0];
    assert!(heartbeats.len() >= 8, "{heartbeats:?}");
    assert!(heartbeats.windows(2).all(|w| w[1] - w[0] <= cfg().heartbeat_t + round), "{heartbeats:?}");
}

#[test]
fn a_round_longer_than_the_heartbeat_period_does_not_silence_the_coordinator() {
    let mut t = Team::new(&[1, 2, 3]);
    // The members never answer: the round re-broadcasts every `MsgT + procT + 2·MsgT`.
    t.auto_reply = false;
    let proc_t = cfg().heartbeat_t * 5;
    t.on(1, |m, now| m.request_reply(now, &[2, 3], b"slow".to_vec(), proc_t)).unwrap();
    t.run_for(cfg().fault_detect_t * 4);
    let sent_by_coord: Vec<Instant> = t.sent.iter().filter(|s| s.1 == 1).map(|s| s.0).collect();
    assert!(sent_by_coord.windows(2).all(|w| w[1] - w[0] <= cfg().heartbeat_t), "{sent_by_coord:?}");
    assert!(t.sent_of(kind::HBEAT, Instant::ZERO).iter().any(|h| h.1 == 1), "heartbeats within the round");
    assert!(t.sent_of(kind::AREQ, Instant::ZERO).len() > 1, "re-broadcasts happened");
    for p in [2, 3] {
        assert_eq!(t.m(p).coordinator(), Some(1));
        assert_eq!(t.m(p).stats().suspicions, 0);
    }
}

#[test]
fn duplicated_requests_are_handled_once() {
    let mut t = Team::new(&[1, 2, 3]);
    t.delay = 2 * MS;
    let start = t.now;
    for i in 0..5u8 {
        t.on(1, |m, now| m.request_reply(now, &[2, 3], vec![i], MS)).unwrap();
    }
    t.run_for(Duration::from_millis(300));
    // Replay every request datagram to everyone, late.
    let areqs: Vec<Vec<u8>> = t
        .sent_of(kind::AREQ, start)
        .iter()
        .map(|a| {
            let mut b = vec![0u8; a.2.buffer_len()];
            a.2.emit(&mut b).unwrap();
            b
        })
        .collect();
    for b in &areqs {
        t.on(2, |m, now| m.handle_datagram(now, b));
        t.on(3, |m, now| m.handle_datagram(now, b));
    }
    t.run_for(Duration::from_millis(100));
    let done = t.events[&1].iter().filter(|(_, e)| matches!(e, Event::Replies(_))).count();
    assert_eq!(done, 5);
    assert_eq!(t.m(2).stats().requests_handled, 5);
    assert_eq!(t.m(3).stats().requests_handled, 5);
}

#[test]
fn joins_push_to_old_members_first_then_to_each_new_one_in_ticket_order() {
    let mut t = Team::new(&[1, 2, 3]);
    t.add_outsider(7);
    t.add_outsider(5);
    let start = t.now;
    t.m(1).check_joins(start, 20 * MS).unwrap();
    let Event::JoinsChecked { added } = t.until(1, Duration::from_secs(1), |e| matches!(e, Event::JoinsChecked { .. }))
    else {
        unreachable!()
    };
    assert_eq!(added.len(), 2);
    let pushes = t.sent_of(kind::VPUSH, start);
    let targets: Vec<Vec<u32>> = pushes
        .iter()
        .map(|p| match &p.2.msg {
            Message::Vpush { rmask, .. } => rmask.iter().collect(),
            _ => unreachable!(),
        })
        .collect();
    let ticket = |t: &mut Team, p: u32| t.m(1).view().get(p).unwrap().ticket;
    let (a, b) = if ticket(&mut t, 5) < ticket(&mut t, 7) { (5, 7) } else { (7, 5) };
    assert_eq!(targets, [vec![2, 3], vec![a], vec![b]]);
    assert!(t.m(5).is_member() && t.m(7).is_member());
    assert!(t.events[&5].iter().any(|(_, e)| matches!(e, Event::Joined { coord: 1, .. })));
    assert!(t.views_agree());
    assert!(t.m(1).view().new_members().is_empty(), "the push completed");
    // The new members take part in requests.
    t.on(1, |m, now| m.request_reply(now, &[2, 3, 5, 7], b"r".to_vec(), MS)).unwrap();
    let r = replies(t.until(1, Duration::from_secs(1), |e| matches!(e, Event::Replies(_))));
    assert_eq!(r.replies.len(), 4);
}

#[test]
fn the_coordinators_failure_elects_the_next_ticket_without_messages() {
    let mut t = Team::new(&[1, 2, 3, 4]);
    t.run_for(Duration::from_millis(50));
    let crash_at = t.now;
    t.crash(1);
    let Event::BecameCoord { members } = t.until(2, Duration::from_secs(2), |e| matches!(e, Event::BecameCoord { .. }))
    else {
        unreachable!()
    };
    assert_eq!(members, [2, 3, 4]);
    let became = t.events[&2].iter().find(|(_, e)| matches!(e, Event::BecameCoord { .. })).unwrap().0;
    assert!(became - crash_at <= cfg().fault_detect_t, "suspected within FaultDetectT of its last message");
    t.run_for(Duration::from_millis(500));
    assert_eq!(t.m(3).coordinator(), Some(2));
    assert_eq!(t.m(4).coordinator(), Some(2));
    // Only heartbeats were exchanged: no election messages, no view push (no new members).
    let kinds: std::collections::BTreeSet<u8> = t.sent.iter().filter(|s| s.0 >= crash_at).map(|s| s.3[0]).collect();
    assert_eq!(kinds.into_iter().collect::<Vec<_>>(), [kind::HBEAT]);
    assert!(t.views_agree());
    t.on(2, |m, now| m.request_reply(now, &[3, 4], b"after".to_vec(), MS)).unwrap();
    assert_eq!(replies(t.until(2, Duration::from_secs(1), |e| matches!(e, Event::Replies(_)))).replies.len(), 2);
}

/// Member 1 (the static group's coordinator) starts 700 ms after the others, with and
/// without a start grace that covers it.
fn late_start(start_grace: Duration) -> Team {
    let c = Config { start_grace, ..cfg() };
    let pids = [1, 2, 3];
    let mut t = Team::with_cfg(&pids, c);
    t.crash(1);
    t.run_for(Duration::from_millis(700));
    t.members.insert(1, Member::with_group(c, 1, &pids, t.now).unwrap());
    t.flush();
    t.run_for(Duration::from_millis(1500));
    t
}

#[test]
fn a_member_started_within_the_start_grace_keeps_the_static_view_and_coordinator() {
    let mut t = late_start(Duration::from_secs(1));
    for p in [1, 2, 3] {
        assert_eq!(t.m(p).coordinator(), Some(1), "member {p}");
        assert_eq!(t.m(p).view().pids(), [1, 2, 3], "member {p}");
        assert!(
            t.events.get(&p).is_none_or(|es| es.iter().all(|(_, e)| !matches!(e, Event::Removed { .. }))),
            "member {p} removed someone: {:?}",
            t.events.get(&p)
        );
    }
    assert!(t.views_agree());
    t.on(1, |m, now| m.request_reply(now, &[2, 3], b"q".to_vec(), MS)).unwrap();
    assert_eq!(replies(t.until(1, Duration::from_secs(1), |e| matches!(e, Event::Replies(_)))).replies.len(), 2);
}

#[test]
fn without_a_start_grace_a_late_member_is_removed_and_the_coordinator_moves() {
    let mut t = late_start(Duration::ZERO);
    assert_eq!(t.m(2).coordinator(), Some(2));
    assert_eq!(t.m(3).coordinator(), Some(2));
    assert!(t.events[&2].iter().any(|(_, e)| matches!(e, Event::BecameCoord { .. })));
}

#[test]
fn a_member_that_never_starts_is_removed_after_the_grace_and_fault_detect_t() {
    let grace = Duration::from_millis(600);
    let c = Config { start_grace: grace, ..cfg() };
    let mut t = Team::with_cfg(&[1, 2, 3], c);
    t.crash(3);
    t.run_for(grace + cfg().fault_detect_t - 50 * MS);
    assert_eq!(t.m(1).view().pids(), [1, 2, 3], "not before the grace and fault_detect_t");
    t.run_for(Duration::from_millis(500));
    assert_eq!(t.m(1).view().pids(), [1, 2]);
    assert_eq!(t.m(2).view().pids(), [1, 2]);
}

#[test]
fn a_new_coordinator_pushes_a_view_holding_members_whose_push_did_not_complete() {
    let mut t = Team::new(&[1, 2, 3]);
    t.add_outsider(4);
    // The coordinator dies right after its push reached the old members.
    t.drop = Box::new(|_, from, to, r| from == 1 && to == 4 && matches!(r.msg, Message::Vpush { .. }));
    t.on(1, |m, now| m.check_joins(now, 10 * MS)).unwrap();
    let start = t.now;
    while t.sent_of(kind::VACK, start).len() < 2 {
        assert!(t.step(start + Duration::from_secs(1)));
    }
    t.run_for(2 * MS);
    t.crash(1);
    assert!(t.m(2).view().get(4).unwrap().new && t.m(4).state() == State::Join);
    let crash_at = t.now;
    t.until(2, Duration::from_secs(2), |e| matches!(e, Event::BecameCoord { .. }));
    t.until(4, Duration::from_secs(1), |e| matches!(e, Event::Joined { coord: 2, .. }));
    let pushes: Vec<u32> = t.sent_of(kind::VPUSH, crash_at).iter().map(|p| p.1).collect();
    assert!(!pushes.is_empty() && pushes.iter().all(|&p| p == 2));
    t.run_for(Duration::from_millis(200));
    assert!(t.views_agree());
    assert_eq!(t.m(4).view().pids(), [2, 3, 4]);
}

#[test]
fn a_leaving_member_elected_coordinator_leaves_instead_of_taking_over() {
    let mut t = Team::new(&[1, 2, 3]);
    t.on(2, |m, now| m.leave(now)).unwrap();
    assert_eq!(t.m(2).state(), State::Leave);
    t.run_for(Duration::from_millis(50));
    t.crash(1);
    let e = t.until(2, Duration::from_secs(2), |e| matches!(e, Event::Left { .. }));
    assert_eq!(e, Event::Left { reason: LeftReason::LeftInsteadOfTakingOver });
    assert!(!t.events[&2].iter().any(|(_, e)| matches!(e, Event::BecameCoord { .. })));
    t.until(3, Duration::from_secs(1), |e| matches!(e, Event::BecameCoord { .. }));
    assert_eq!(t.m(3).view().pids(), [3]);
}

#[test]
fn members_leave_at_the_leave_poll_and_the_coordinator_at_once() {
    let mut t = Team::new(&[1, 2, 3, 4]);
    t.on(3, |m, now| m.leave(now)).unwrap();
    t.run_for(Duration::from_millis(50));
    assert!(t.m(3).is_member(), "a leaving member waits for the poll");
    t.on(1, |m, now| m.check_leaves(now, 10 * MS)).unwrap();
    let e = t.until(1, Duration::from_secs(1), |e| matches!(e, Event::LeavesChecked { .. }));
    assert_eq!(e, Event::LeavesChecked { left: vec![3] });
    assert_eq!(t.m(3).state(), State::Left);
    assert!(t.events[&1].iter().any(|(_, e)| *e == Event::GroupChanged { members: vec![1, 2, 4] }));
    t.run_for(Duration::from_millis(50));
    assert!(t.views_agree());
    // The coordinator leaves without a poll; the next ticket takes over at the LEFT.
    t.on(1, |m, now| m.leave(now)).unwrap();
    t.until(2, Duration::from_millis(20), |e| matches!(e, Event::BecameCoord { .. }));
    assert_eq!(t.m(4).coordinator(), Some(2));
}

#[test]
fn a_falsely_suspected_coordinator_stands_down_and_rejoins_with_a_new_incarnation() {
    let mut t = Team::new(&[1, 2, 3]);
    // 2 hears nothing from 1 for a while: it suspects 1 and takes over.
    t.drop = Box::new(|now, from, to, _| from == 1 && to == 2 && now < Instant::from_millis(450));
    t.until(2, Duration::from_secs(1), |e| matches!(e, Event::BecameCoord { .. }));
    // 1 is alive and learns from 2's heartbeat that it was removed.
    let e = t.until(1, Duration::from_secs(1), |e| matches!(e, Event::Left { .. }));
    assert_eq!(e, Event::Left { reason: LeftReason::Expelled { by: 2 } });
    t.run_for(Duration::from_millis(100));
    assert_eq!(t.m(3).coordinator(), Some(2));
    assert!(t.views_agree());
    // It joins again, as a new incarnation with a new ticket.
    t.on(1, |m, now| m.join(now)).unwrap();
    t.on(2, |m, now| m.check_joins(now, 10 * MS)).unwrap();
    t.until(1, Duration::from_secs(1), |e| matches!(e, Event::Joined { coord: 2, .. }));
    let e = *t.m(2).view().get(1).unwrap();
    assert_eq!((e.incarnation, e.ticket), (1, 4));
    t.run_for(Duration::from_millis(100));
    assert!(t.views_agree());
    assert_eq!(t.m(1).coordinator(), Some(2));
}

#[test]
fn a_falsely_suspected_member_learns_it_was_removed() {
    let mut t = Team::new(&[1, 2, 3]);
    t.drop = Box::new(|now, from, _, _| from == 3 && now < Instant::from_millis(600));
    let e = t.until(1, Duration::from_secs(1), |e| matches!(e, Event::Removed { pid: 3, .. }));
    assert_eq!(e, Event::Removed { pid: 3, incarnation: 0, reason: RemoveReason::Suspected });
    let e = t.until(3, Duration::from_secs(1), |e| matches!(e, Event::Left { .. }));
    assert_eq!(e, Event::Left { reason: LeftReason::Expelled { by: 1 } });
    t.run_for(Duration::from_millis(300));
    assert_eq!(t.m(2).view().pids(), [1, 2], "the coordinator's heartbeat carried the removal");
    assert!(t.views_agree());
}

#[test]
fn a_restarted_process_rejoins_and_its_former_incarnation_is_dropped() {
    let mut t = Team::new(&[1, 2, 3]);
    t.run_for(Duration::from_millis(20));
    t.crash(3);
    t.add_outsider(3);
    t.on(1, |m, now| m.check_joins(now, 10 * MS)).unwrap();
    t.until(3, Duration::from_secs(1), |e| matches!(e, Event::Joined { .. }));
    assert!(
        t.events[&1]
            .iter()
            .any(|(_, e)| *e == Event::Removed { pid: 3, incarnation: 0, reason: RemoveReason::Superseded })
    );
    let e = *t.m(1).view().get(3).unwrap();
    assert_eq!((e.incarnation, e.ticket), (1, 4));
    t.run_for(Duration::from_millis(50));
    assert!(t.views_agree());
}

#[test]
fn groups_far_larger_than_64_members_work() {
    let pids: Vec<u32> = (1..=100).collect();
    let mut t = Team::new(&pids);
    let start = t.now;
    t.m(1).request_reply(start, &pids, b"all".to_vec(), MS).unwrap();
    let r = replies(t.until(1, Duration::from_secs(5), |e| matches!(e, Event::Replies(_))));
    assert_eq!(r.replies.len(), 99);
    assert_eq!(r.broadcasts, 1);
    let order: Vec<u32> = t.sent_of(kind::ARPL, start).iter().map(|a| a.1).collect();
    assert_eq!(order, (2..=100).collect::<Vec<_>>());
}

#[test]
fn requests_to_failed_processes_complete_without_them() {
    let mut t = Team::new(&[1, 2, 3]);
    t.run_for(Duration::from_millis(20));
    t.crash(3);
    t.on(1, |m, now| m.request_reply(now, &[2, 3, 9], b"q".to_vec(), MS)).unwrap();
    let r = replies(t.until(1, Duration::from_secs(2), |e| matches!(e, Event::Replies(_))));
    assert_eq!(r.replies.keys().copied().collect::<Vec<_>>(), [2]);
    assert_eq!(r.failed, [9, 3], "9 was never a member; 3 failed");
    assert!(r.broadcasts > 1);
}

#[test]
fn api_errors_are_typed() {
    let mut t = Team::new(&[1, 2]);
    assert_eq!(t.m(2).request_reply(Instant::ZERO, &[1], vec![], MS), Err(RequestError::NotCoordinator));
    assert_eq!(t.m(2).check_joins(Instant::ZERO, MS), Err(PollError::NotCoordinator));
    assert_eq!(t.m(2).join(Instant::ZERO), Err(JoinError::NotLeft));
    let big = vec![0u8; 70_000];
    assert!(matches!(t.m(1).request_reply(Instant::ZERO, &[2], big, MS), Err(RequestError::TooLarge { .. })));
    let id = IncomingId { coord: 1, coord_incarnation: 0, seqno: 9 };
    assert_eq!(t.m(2).reply(Instant::ZERO, id, vec![]), Err(ReplyError::Stale(id)));
    assert!(matches!(Member::with_group(cfg(), 5, &[1, 2], Instant::ZERO), Err(InitError::NotInGroup(5))));
    let bad = Config { heartbeat_t: Duration::from_secs(2), ..cfg() };
    assert!(Member::new(bad, 1, 0).is_err());
    let mut m = Member::new(cfg(), 1, 0).unwrap();
    assert_eq!(m.leave(Instant::ZERO), Err(LeaveError::NotMember));
    m.handle_datagram(Instant::ZERO, &[0xFF; 3]);
    assert_eq!(m.stats().malformed, 1);
}

#[test]
fn a_member_whose_elected_coordinator_never_takes_over_does_not_wait_for_it_forever() {
    let mut t = Team::new(&[1, 2, 3, 4]);
    // 1 and 3 stop hearing each other and suspect each other: 3 elects 2, who hears 1 and
    // keeps following it (a mutual false suspicion; 1 is not told by 3's heartbeats, which
    // come from outside its view).
    t.drop =
        Box::new(|now, from, to, _| ((from, to) == (1, 3) || (from, to) == (3, 1)) && now < Instant::from_millis(700));
    t.until(3, Duration::from_secs(1), |e| matches!(e, Event::Removed { pid: 1, .. }));
    assert_eq!((t.m(3).coordinator(), t.m(2).coordinator()), (Some(2), Some(1)));
    // 2's ordinary heartbeats do not count as coordinating: within one more FaultDetectT of
    // grace 3 gives up on it, takes over what is left of its view and, told by the others'
    // heartbeats that it is not in their group, leaves (to rejoin as a new incarnation).
    t.until(3, Duration::from_millis(1000), |e| matches!(e, Event::Removed { pid: 2, .. }));
    let e = t.until(3, Duration::from_secs(2), |e| matches!(e, Event::Left { .. }));
    assert!(matches!(e, Event::Left { reason: LeftReason::Expelled { .. } }), "{e:?}");
    t.run_for(Duration::from_secs(1));
    // Nobody follows a process that is not coordinating, and the members agree.
    let coords: Vec<u32> = t.members.values().filter(|m| m.is_coordinator()).map(|m| m.pid()).collect();
    assert_eq!(coords.len(), 1, "one coordinator, got {coords:?}");
    for m in t.members.values().filter(|m| m.is_member()) {
        assert_eq!(m.coordinator(), Some(coords[0]), "{} follows a non-coordinator", m.pid());
    }
    assert!(t.views_agree());
}

/// Reply slots address members by their offset from the smallest pid, so a pid more than
/// `MAX_SPAN` away could not be addressed. Such a joiner used to be added to the view and then
/// silently left out of every request mask (and expelled as silent); now it is refused at the
/// join and counted, and a static group that would span too far is a typed error.
#[test]
fn a_pid_too_far_from_the_group_is_refused_not_silently_dropped() {
    use cohort_wire::group::MAX_SPAN;
    let far = 1 + MAX_SPAN;
    let mut t = Team::new(&[1, 2]);
    t.add_outsider(far);
    t.add_outsider(MAX_SPAN);
    let start = t.now;
    t.m(1).check_joins(start, 20 * MS).unwrap();
    let Event::JoinsChecked { added } = t.until(1, Duration::from_secs(1), |e| matches!(e, Event::JoinsChecked { .. }))
    else {
        unreachable!()
    };
    assert_eq!(added, vec![MAX_SPAN], "the furthest addressable pid joins; the one beyond does not");
    assert!(!t.m(far).is_member());
    assert_eq!(t.m(1).stats().joins_refused, 1);
    t.on(1, |m, now| m.request_reply(now, &[2, MAX_SPAN], b"r".to_vec(), MS)).unwrap();
    let r = replies(t.until(1, Duration::from_secs(1), |e| matches!(e, Event::Replies(_))));
    assert_eq!(r.replies.len(), 2, "every member of the view is addressed");
    assert!(matches!(
        Member::with_group(cfg(), 1, &[1, far], Instant::ZERO),
        Err(InitError::Span { lo: 1, hi }) if hi == far
    ));
}

#[test]
fn every_broadcast_goes_out_as_many_times_as_configured() {
    assert!(Config { broadcast_copies: 0, ..cfg() }.validate().is_err());
    assert!(Config { broadcast_copies: 5, ..cfg() }.validate().is_err());
    let now = Instant::from_millis(0);
    let sent = |copies: u8| {
        let mut m = Member::with_group(Config { broadcast_copies: copies, ..cfg() }, 1, &[1, 2, 3], now).unwrap();
        m.request_reply(now, &[2, 3], b"wedge".to_vec(), 5 * MS).unwrap();
        let mut buf = vec![0u8; Member::MAX_DATAGRAM];
        let mut sent = Vec::new();
        while let Some(t) = m.poll_transmit(now, &mut buf) {
            sent.push((t.dest, buf[..t.len].to_vec()));
        }
        (sent, m.stats().broadcast_copies)
    };
    let (once, extra) = sent(1);
    assert_eq!(extra, 0);
    let (twice, extra) = sent(2);
    assert_eq!(extra as usize, once.len());
    // Each message of the single run, twice in a row.
    let doubled: Vec<_> = once.iter().flat_map(|m| [m.clone(), m.clone()]).collect();
    assert_eq!(twice, doubled);
    assert!(once.iter().all(|(d, _)| *d == Dest::Broadcast));
}
