//! `MsgT` learned from the answers ([`Config::learn_msg_t`](super::Config::learn_msg_t)).
//!
//! Alg. 2 counts every timer of a request round in multiples of `MsgT`, a bound on one
//! message's time from send to delivery that the application must choose for the worst
//! channel. On the channel the group actually has, the answers of a round show how long one
//! takes: the answer of slot `k + 1` follows the answer of slot `k`, which it overheard (or, with
//! a slot lead, it waited behind by carrier sense), by its own channel access and airtime.
//! Every process that hears two consecutive slots' answers samples that spacing, smoothed as
//! RFC 6298 smooths a round trip (`SRTT`, `RTTVAR`), and a request round's timers wait
//! `SRTT + max(G, 4·RTTVAR)` per slot, never more than the configured bound: the waits that a
//! lost request or answer costs shrink from the worst channel's `MsgT` to what this channel
//! needs. What the spacing does not show keeps its configured allowance: the request's own
//! delivery (`MsgT`) and the members' processing (`procT`).

use crate::lrt::pace::{GRANULARITY, RttEstimator};
use cohort_time::Instant;
use cohort_wire::group::PidMask;
use std::time::Duration;

/// Samples needed before an estimate replaces the configured bound.
const WARMUP: u32 = 4;

/// The spacing of consecutive slots' answers, smoothed as RFC 6298 smooths a round trip (LRT's
/// estimator: the same gains and the same 1 ms granularity).
#[derive(Debug, Clone)]
pub(super) struct Estimate(RttEstimator);

impl Default for Estimate {
    fn default() -> Self {
        Estimate(RttEstimator::new(Duration::ZERO))
    }
}

impl Estimate {
    pub fn sample(&mut self, d: Duration) {
        self.0.sample(d);
    }

    /// The least spacing sampled: no answer follows a broadcast sooner.
    pub fn least(&self) -> Option<Duration> {
        self.0.min_rtt()
    }

    /// `SRTT + max(G, 4·RTTVAR)`, at most `cap`; `cap` until [`WARMUP`] samples came.
    pub fn bound(&self, cap: Duration) -> Duration {
        if self.0.samples() < WARMUP { cap } else { self.0.probe_timeout().min(cap) }
    }
}

/// Gain of [`RepairSlack`]'s per-request rates: about the mean of the last 16 requests.
const RATE_GAIN: f64 = 1.0 / 16.0;

/// The coordinator's allowance for answers later than the learned slot.
///
/// The learned slot covers the spacing of answers that follow each other on the air; it does
/// not cover a member whose host is slow now and then. Such an answer overtakes the
/// coordinator's early repair, which then costs a request frame and a second answer (about
/// two slots of airtime). An answer to a round that reaches the coordinator sooner after a
/// repair than any answer follows a broadcast shows that repair premature, and how late the
/// answer was; while a slack is held, an answer that comes after the time the early repair
/// would have gone without it shows one the slack saved. (RACK, RFC 8985 §6.2.4, widens its
/// reordering window when a DSACK shows a retransmission spurious, likewise.)
///
/// The slack is the largest lateness shown plus `G`, and it is held while the premature
/// repairs it saves cost more airtime than it adds to the repairs that were needed (each
/// waits the slack more): `premature · 2·slot > needed · slack`, both counted per request and
/// smoothed over about the last 16 requests. On a clean channel a slow member's few
/// premature repairs outweigh the rare needed ones; on a lossy channel, where most repairs
/// are needed, a slack that saves few of them is dropped. The largest lateness is never
/// forgotten, but the repair never waits beyond the round's deadline (Alg. 2's).
#[derive(Debug, Clone, Default)]
pub(super) struct RepairSlack {
    /// The largest lateness shown, plus `G`.
    late: Duration,
    /// Premature repairs (made or saved) per request, smoothed.
    premature: f64,
    /// Early repairs per request that no answer showed premature, smoothed.
    needed: f64,
    /// The current request's: premature repairs saved, and made; early repairs made.
    saved_now: u32,
    made_now: u32,
    repairs_now: u32,
}

impl RepairSlack {
    /// An answer came `late` after the early repair went (`made`), or after it would have
    /// gone without the slack.
    pub fn late_answer(&mut self, late: Duration, made: bool) {
        self.late = self.late.max(late + GRANULARITY);
        if made {
            self.made_now += 1;
        } else {
            self.saved_now += 1;
        }
    }

    /// The coordinator repaired a round before its deadline.
    pub fn repaired(&mut self) {
        self.repairs_now += 1;
    }

    /// A request completed: its counts join the rates.
    pub fn request_done(&mut self) {
        let premature = f64::from(self.saved_now + self.made_now);
        let needed = f64::from(self.repairs_now.saturating_sub(self.made_now));
        self.premature += RATE_GAIN * (premature - self.premature);
        self.needed += RATE_GAIN * (needed - self.needed);
        (self.saved_now, self.made_now, self.repairs_now) = (0, 0, 0);
    }

    /// The slack the early repair waits now, with slots of `slot`.
    pub fn get(&self, slot: Duration) -> Duration {
        let saves = self.premature * 2.0 * slot.as_secs_f64();
        if saves > self.needed * self.late.as_secs_f64() { self.late } else { Duration::ZERO }
    }
}

/// The answers of one round as one process hears them: the spacing of consecutive slots.
#[derive(Debug, Clone, Default)]
pub(super) struct RoundClock {
    /// The processes the round's broadcast addressed, whose pids order its slots.
    slots: PidMask,
    /// The latest slot heard and when.
    last: Option<(usize, Instant)>,
    /// The local process's own slot, once it answered in this round: the spacing across it
    /// (from the slot before to the slot after) counts as two.
    own: Option<usize>,
}

impl RoundClock {
    pub fn new(slots: PidMask) -> Self {
        RoundClock { slots, last: None, own: None }
    }

    /// The local process, `pid`, answered in its slot of this round.
    pub fn answered_own(&mut self, pid: u32) {
        self.own = self.slots.position(pid);
    }

    pub fn slots(&self) -> &PidMask {
        &self.slots
    }

    /// The answer of `pid` arrived at `now`: its spacing from the slot before goes to `gap`.
    pub fn answered(&mut self, now: Instant, pid: u32, gap: &mut Estimate) {
        let Some(pos) = self.slots.position(pid) else { return };
        match self.last {
            Some((p, t)) if p + 1 == pos => gap.sample(now.saturating_duration_since(t)),
            Some((p, t)) if p + 2 == pos && self.own == Some(p + 1) => gap.sample(now.saturating_duration_since(t) / 2),
            _ => {}
        }
        if self.last.is_none_or(|(p, _)| pos > p) {
            self.last = Some((pos, now));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn the_bound_is_the_cap_until_warm_then_follows_the_samples() {
        let mut e = Estimate::default();
        for _ in 0..WARMUP - 1 {
            e.sample(12 * MS);
            assert_eq!(e.bound(30 * MS), 30 * MS);
        }
        e.sample(12 * MS);
        // Steady samples: the deviation decays towards zero, the margin to G.
        let b = e.bound(30 * MS);
        assert!(b > 12 * MS && b < 30 * MS, "{b:?}");
        for _ in 0..100 {
            e.sample(12 * MS);
        }
        assert_eq!(e.bound(30 * MS), 13 * MS, "the margin is at least 1 ms");
        // A spread widens the margin, and the cap holds.
        for i in 0..50 {
            e.sample(if i % 2 == 0 { 5 * MS } else { 25 * MS });
        }
        assert_eq!(e.bound(30 * MS), 30 * MS);
        assert!(e.bound(300 * MS) > 25 * MS);
    }

    #[test]
    fn only_consecutive_slots_are_sampled_and_the_spacing_across_ones_own_answer_counts_twice() {
        let slots = PidMask::from_pids([3, 5, 8, 9]).unwrap();
        let t0 = Instant::from_millis(100);
        let mut gap = Estimate::default();
        let mut c = RoundClock::new(slots);
        c.answered(t0 + 20 * MS, 3, &mut gap);
        assert_eq!(gap.0.samples(), 0);
        // Slot 3 after slot 1: a slot between was lost, no sample.
        c.answered(t0 + 40 * MS, 8, &mut gap);
        assert_eq!(gap.0.samples(), 0);
        c.answered(t0 + 52 * MS, 9, &mut gap);
        assert_eq!((gap.0.samples(), gap.0.srtt()), (1, 12 * MS));
        // A late answer of an earlier slot, or a stranger, neither samples nor moves the clock.
        c.answered(t0 + 53 * MS, 5, &mut gap);
        c.answered(t0 + 54 * MS, 7, &mut gap);
        assert_eq!(gap.0.samples(), 1);
        // Across a slot of its own: only once this process answered in it.
        let mut c = RoundClock::new(PidMask::from_pids([3, 5, 8]).unwrap());
        c.answered(t0, 3, &mut gap);
        c.answered(t0 + 24 * MS, 8, &mut gap);
        assert_eq!(gap.0.samples(), 1, "no answer of its own between");
        c = RoundClock::new(PidMask::from_pids([3, 5, 8]).unwrap());
        c.answered(t0, 3, &mut gap);
        c.answered_own(5);
        c.answered(t0 + 24 * MS, 8, &mut gap);
        assert_eq!((gap.0.samples(), gap.0.srtt()), (2, 12 * MS));
    }
}
