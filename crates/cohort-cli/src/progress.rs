//! Progress of the commands that run for more than a few seconds (benchmarks, sweeps, testbed
//! start-up): a bar with the elapsed time and an ETA on stderr while a person watches (stdout
//! and stderr are terminals and `--json` is off); otherwise no bar, only one line per step on
//! stderr, so a log keeps what ran and stdout stays the report alone.

use cohort_bench::progress::Step;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::io::IsTerminal;

/// Where a command's steps go: see the module docs.
pub struct Progress {
    label: &'static str,
    bar: Option<ProgressBar>,
    /// Without a bar, one line per step (off for sweeps of many short steps).
    lines: bool,
}

/// Whether a bar may be drawn: a terminal on both outputs and no machine-readable report.
pub fn interactive(json: bool) -> bool {
    !json && std::io::stdout().is_terminal() && std::io::stderr().is_terminal()
}

impl Progress {
    pub fn new(label: &'static str, json: bool) -> Self {
        Self::with_bar(label, interactive(json))
    }

    /// A bar where one may be drawn, and nothing otherwise: for sweeps of many short steps
    /// (seeds), whose lines would bury the result.
    pub fn bar_only(label: &'static str, json: bool) -> Self {
        let mut p = Self::new(label, json);
        p.lines = false;
        p
    }

    fn with_bar(label: &'static str, bar: bool) -> Self {
        let bar = bar.then(|| {
            let b = ProgressBar::with_draw_target(Some(1), ProgressDrawTarget::stderr());
            let style = ProgressStyle::with_template(
                "{prefix} {bar:30.cyan/blue} {pos}/{len} {elapsed_precise} ETA {eta_precise} {wide_msg}",
            )
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> ");
            b.set_style(style);
            b.set_prefix(label);
            b
        });
        Progress { label, bar, lines: true }
    }

    /// `s.done` of `s.total` steps are finished; `s.what` runs now (or just finished, for
    /// callers that report completed steps).
    pub fn step(&self, s: &Step) {
        match &self.bar {
            Some(b) => {
                b.set_message(s.what.to_string());
                b.set_length(s.total);
                b.set_position(s.done);
                if s.done >= s.total {
                    b.finish_and_clear();
                }
            }
            None if self.lines && (s.done < s.total || s.what != "done") => eprintln!("{}: {s}", self.label),
            None => {}
        }
    }

    /// Step `s.done` finished with the result `s.what`, a line worth keeping: printed above
    /// the bar, or on its own.
    pub fn finished(&self, s: &Step) {
        match &self.bar {
            Some(b) => {
                b.println(format!("{}: {s}", self.label));
                self.step(&Step { what: "", ..*s });
            }
            None if self.lines => eprintln!("{}: {s}", self.label),
            None => {}
        }
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        if let Some(b) = &self.bar {
            b.finish_and_clear();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_bar_under_json_or_without_a_terminal() {
        assert!(!interactive(true));
        // The test harness captures stdout: not a terminal.
        assert!(Progress::new("bench", false).bar.is_none() || std::io::stdout().is_terminal());
    }

    #[test]
    fn a_bar_follows_the_steps_to_the_end() {
        let p = Progress::with_bar("bench", true);
        p.step(&Step { done: 0, total: 4, what: "first" });
        p.step(&Step { done: 2, total: 4, what: "third" });
        let bar = p.bar.as_ref().unwrap();
        assert_eq!((bar.position(), bar.length()), (2, Some(4)));
        p.step(&Step { done: 4, total: 4, what: "done" });
        assert!(bar.is_finished());
    }
}
