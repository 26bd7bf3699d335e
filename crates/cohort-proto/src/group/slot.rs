//! The transmission slot of an addressed process (Alg. 2 lines 18-21, Alg. 5 lines 19-22).
//!
//! An addressed process answers in slot `k = posBit(rmask, myid)`. It may send once its
//! answer is ready and it is its turn: slot 1 at once; slot `k` right after overhearing the
//! answer of slot `k - 1` (`nxtBit`), else `(k - 1)·MsgT` after its answer was ready. When it
//! overhears an earlier slot `j < k - 1` (the answers in between were lost or are late), its
//! timer moves up to `(k - 1 - j)·MsgT` after that, which keeps the schedule tight under loss
//! without ever sending before its predecessors had their time.
//!
//! With a slot lead ([`Config::slot_lead`](super::Config::slot_lead)), overhearing slot
//! `k - 2` also moves the timer up to `lead` after it: by then slot `k - 1`'s answer is on the
//! air, the link's carrier sense holds ours until it ends, and the time this host takes to
//! receive, process and send after each answer is hidden behind the next answer's frame.

use cohort_time::Instant;
use cohort_wire::group::PidMask;
use std::time::Duration;

#[derive(Debug, Clone)]
pub(super) struct Slot {
    rmask: PidMask,
    /// 1-based position of the local process in `rmask`.
    pos: usize,
    ready: bool,
    /// Earliest time it is this process's turn, from an overheard predecessor or the timer.
    turn_at: Option<Instant>,
}

impl Slot {
    /// The slot of `me` in `rmask`, or `None` when `rmask` does not address it.
    pub fn new(rmask: PidMask, me: u32) -> Option<Self> {
        let pos = rmask.position(me)?;
        Some(Slot { rmask, pos, ready: false, turn_at: None })
    }

    fn lead(&self, slots: usize, msg_t: Duration) -> Duration {
        msg_t.saturating_mul(u32::try_from(slots).unwrap_or(u32::MAX))
    }

    /// The answer is ready at `now`: arm the slot timer.
    pub fn ready(&mut self, now: Instant, msg_t: Duration) {
        if self.ready {
            return;
        }
        self.ready = true;
        let timer = now + self.lead(self.pos - 1, msg_t);
        self.turn_at = Some(self.turn_at.map_or(timer, |t| t.min(timer)));
    }

    /// The answer of `pid` was overheard at `now`; `lead` is the slot lead (zero: none).
    pub fn overheard(&mut self, now: Instant, pid: u32, msg_t: Duration, lead: Duration) {
        let Some(j) = self.rmask.position(pid) else { return };
        if j >= self.pos {
            return;
        }
        let between = self.pos - 1 - j;
        let mut at = now + self.lead(between, msg_t);
        if between == 1 && !lead.is_zero() {
            at = at.min(now + lead);
        }
        self.turn_at = Some(self.turn_at.map_or(at, |t| t.min(at)));
    }

    /// Whether the answer may go now.
    pub fn due(&self, now: Instant) -> bool {
        self.ready && self.turn_at.is_some_and(|t| t <= now)
    }

    /// When [`due`](Self::due) becomes true, if it will without further input.
    pub fn deadline(&self) -> Option<Instant> {
        if self.ready { self.turn_at } else { None }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    fn slot(pids: &[u32], me: u32) -> Slot {
        Slot::new(PidMask::from_pids(pids.iter().copied()).unwrap(), me).unwrap()
    }

    #[test]
    fn first_slot_goes_as_soon_as_ready() {
        let mut s = slot(&[2, 5, 9], 2);
        let t = Instant::from_millis(100);
        assert!(!s.due(t));
        s.ready(t, 10 * MS);
        assert!(s.due(t));
    }

    #[test]
    fn later_slots_follow_their_predecessor_or_the_timer() {
        let t = Instant::from_millis(100);
        let mut s = slot(&[2, 5, 9], 9);
        assert_eq!(s.pos, 3);
        s.ready(t, 10 * MS);
        assert_eq!(s.deadline(), Some(t + 20 * MS));
        // Overhearing slot 1 moves the timer to one slot after it.
        s.overheard(t + 3 * MS, 2, 10 * MS, Duration::ZERO);
        assert_eq!(s.deadline(), Some(t + 13 * MS));
        // Overhearing the immediate predecessor makes it our turn.
        s.overheard(t + 5 * MS, 5, 10 * MS, Duration::ZERO);
        assert!(s.due(t + 5 * MS));
        // Overhearing a later slot or a stranger changes nothing.
        let mut s = slot(&[2, 5, 9], 5);
        s.overheard(t, 9, 10 * MS, Duration::ZERO);
        s.overheard(t, 7, 10 * MS, Duration::ZERO);
        assert_eq!(s.deadline(), None);
        // Overheard before the answer was ready: it goes when ready.
        s.overheard(t, 2, 10 * MS, Duration::ZERO);
        assert!(!s.due(t + 50 * MS));
        s.ready(t + 50 * MS, 10 * MS);
        assert!(s.due(t + 50 * MS));
    }

    #[test]
    fn a_slot_lead_hands_the_answer_over_while_the_slot_before_is_on_the_air() {
        let t = Instant::from_millis(100);
        let (msg_t, lead) = (10 * MS, 2 * MS);
        // Slot 3 overhears slot 1: its answer goes `lead` later, not a whole MsgT.
        let mut s = slot(&[2, 5, 9], 9);
        s.ready(t, msg_t);
        s.overheard(t + 3 * MS, 2, msg_t, lead);
        assert_eq!(s.deadline(), Some(t + 5 * MS));
        // Slot 4 hearing slot 1 keeps its timer (two slots between), as without a lead.
        let mut s = slot(&[2, 5, 9, 11], 11);
        s.ready(t, msg_t);
        s.overheard(t + 3 * MS, 2, msg_t, lead);
        assert_eq!(s.deadline(), Some(t + 23 * MS));
        // A lead longer than MsgT never delays: the timer is the earlier of the two.
        let mut s = slot(&[2, 5, 9], 9);
        s.ready(t, msg_t);
        s.overheard(t, 2, msg_t, 50 * MS);
        assert_eq!(s.deadline(), Some(t + msg_t));
    }
}
