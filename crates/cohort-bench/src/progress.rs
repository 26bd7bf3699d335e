//! How far a benchmark has got: each one plans its steps (cases × systems × repetitions) before
//! it starts and reports each as it begins, so the CLI can draw a bar with an ETA, or print one
//! line per step where nobody watches a terminal.

use std::fmt;

/// `done` of `total` planned steps are finished and `what` is the one now running (`done ==
/// total`: the benchmark is done).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Step<'a> {
    pub done: u64,
    pub total: u64,
    pub what: &'a str,
}

impl fmt::Display for Step<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "[{}/{}] {}", self.done, self.total, self.what)
    }
}

/// A benchmark's plan of `total` steps; [`begin`](Self::begin) reports each step as it
/// starts, [`finish`](Self::finish) the end. A plan that turns out short grows rather than
/// report more done than planned.
#[derive(Debug)]
pub struct Plan<F: FnMut(&Step)> {
    done: u64,
    total: u64,
    begun: bool,
    report: F,
}

impl<F: FnMut(&Step)> Plan<F> {
    pub fn new(total: u64, report: F) -> Self {
        Plan { done: 0, total: total.max(1), begun: false, report }
    }

    /// Step `what` starts; the one before it, if any, is done.
    pub fn begin(&mut self, what: &str) {
        if self.begun {
            self.done += 1;
        }
        self.begun = true;
        self.total = self.total.max(self.done + 1);
        (self.report)(&Step { done: self.done, total: self.total, what });
    }

    /// Every step is done; returns how many steps began (the plan's size when it was right).
    pub fn finish(mut self) -> u64 {
        let begun = self.done + u64::from(self.begun);
        self.done = self.total;
        (self.report)(&Step { done: self.done, total: self.total, what: "done" });
        begun
    }
}

/// A callback that ignores progress, for callers with nothing to show.
pub fn quiet(_: &Step) {}

/// A callback that prints each step on stderr and keeps its `(done, total)` in `steps`, for
/// tests to check with [`assert_followed_plan`].
pub fn recorder(steps: &mut Vec<(u64, u64)>) -> impl FnMut(&Step) + '_ {
    move |s| {
        eprintln!("{s}");
        steps.push((s.done, s.total));
    }
}

/// Checks that a benchmark's reported steps (`(done, total)`) followed its plan exactly: the
/// total never changed and every step from the first to the end was reported once. For tests.
pub fn assert_followed_plan(steps: &[(u64, u64)]) {
    let total = steps.first().expect("no step reported").1;
    let want: Vec<(u64, u64)> = (0..=total).map(|d| (d, total)).collect();
    assert_eq!(steps, want, "the plan's size was wrong");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steps_count_up_to_the_plan_and_a_short_plan_grows() {
        let mut seen = Vec::new();
        let mut plan = Plan::new(2, |s: &Step| seen.push((s.done, s.total, s.what.to_string())));
        plan.begin("a");
        plan.begin("b");
        plan.begin("c"); // one more than planned
        assert_eq!(plan.finish(), 3);
        let want = [(0, 2, "a"), (1, 2, "b"), (2, 3, "c"), (3, 3, "done")];
        assert_eq!(seen, want.map(|(d, t, w)| (d, t, w.to_string())));
    }

    #[test]
    fn a_step_reads_as_a_log_line() {
        assert_eq!(Step { done: 3, total: 10, what: "rep 2" }.to_string(), "[3/10] rep 2");
    }
}
