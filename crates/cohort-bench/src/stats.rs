//! Small helpers for timing and distributions.

use std::time::{Duration, Instant};

/// Runs `f` repeatedly for at least `min_time` (and at least `min_reps` times) after one
/// warm-up call, returning each call's duration.
pub fn time_reps(min_time: Duration, min_reps: usize, mut f: impl FnMut()) -> Vec<Duration> {
    f();
    let start = Instant::now();
    let mut out = Vec::new();
    while out.len() < min_reps || start.elapsed() < min_time {
        let t = Instant::now();
        f();
        out.push(t.elapsed());
    }
    out
}

/// The median of `v` (which is sorted in place); zero for an empty slice.
pub fn median(v: &mut [Duration]) -> Duration {
    if v.is_empty() {
        return Duration::ZERO;
    }
    v.sort_unstable();
    v[v.len() / 2]
}

/// Gigabits per second for `bytes` processed in `d`.
pub fn gbps(bytes: usize, d: Duration) -> f64 {
    if d.is_zero() {
        return 0.0;
    }
    bytes as f64 * 8.0 / d.as_secs_f64() / 1e9
}

/// Rounds to `digits` decimal places for readable JSON.
pub fn round(x: f64, digits: i32) -> f64 {
    let p = 10f64.powi(digits);
    (x * p).round() / p
}
