//! A check for the simulation harnesses: a sans-IO state machine whose `poll_timeout` asks for
//! the current instant again after its work was taken would be a busy loop in a real driver
//! (its timer firing at once, forever). Virtual time must move within a bounded number of
//! steps.

use cohort_time::Instant;

/// Steps a harness may take at one instant before it counts as a busy loop.
const MAX_STEPS_AT_ONCE: u32 = 1000;

#[derive(Debug)]
pub(crate) struct SpinGuard {
    last: Instant,
    at_once: u32,
}

impl SpinGuard {
    pub(crate) fn new(now: Instant) -> Self {
        SpinGuard { last: now, at_once: 0 }
    }

    /// Records a step taken at `now`; panics, with `what` describing the state, once time has
    /// stood still for too many steps.
    pub(crate) fn step(&mut self, now: Instant, what: impl FnOnce() -> String) {
        self.at_once = if now == self.last { self.at_once + 1 } else { 0 };
        self.last = now;
        assert!(self.at_once < MAX_STEPS_AT_ONCE, "busy loop at {now:?}: {}", what());
    }
}
