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

/// Request rounds a widened [`RepairSlack`] lasts without a repair shown premature
/// (RFC 8985's `reo_wnd` persists for 16 loss recoveries after a DSACK).
pub(super) const SLACK_PERSIST: u32 = 16;

/// The coordinator's allowance for answers later than the learned slot.
///
/// The learned slot covers the spacing of answers that follow each other on the air; it does
/// not cover a member whose host woke late (its successor's slot lead then overtakes it) or
/// that missed answers the coordinator heard (its timer counts from an earlier one). Such an
/// answer overtakes the coordinator's early repair, which then costs a request frame and a
/// second answer. As RACK widens its reordering window when a DSACK shows a retransmission
/// spurious (RFC 8985 §6.2.4), an answer that reaches the coordinator within one slot of a
/// repair round that asked for it shows the repair premature: the early repair then waits
/// that answer's lateness (how long after the repair it came, plus the estimator's granularity `G`)
/// more, until [`SLACK_PERSIST`] request rounds passed without another.
#[derive(Debug, Clone, Default)]
pub(super) struct RepairSlack {
    slack: Duration,
    /// Requests after the current one that the slack still holds for.
    rounds_left: u32,
    /// An early answer came during the current request.
    renewed: bool,
}

impl RepairSlack {
    /// An answer came `late` after the repair round that asked for it went.
    pub fn premature(&mut self, late: Duration) {
        self.slack = self.slack.max(late + GRANULARITY);
        self.renewed = true;
    }

    /// A request completed: the slack holds for the [`SLACK_PERSIST`] requests after the
    /// latest one that renewed it.
    pub fn request_done(&mut self) {
        if std::mem::take(&mut self.renewed) {
            self.rounds_left = SLACK_PERSIST;
        } else {
            self.rounds_left = self.rounds_left.saturating_sub(1);
            if self.rounds_left == 0 {
                self.slack = Duration::ZERO;
            }
        }
    }

    pub fn get(&self) -> Duration {
        self.slack
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
