//! `cohort bench timer`: how late a wake-up for a deadline is, for the runtime's `timerfd`
//! timer and, in the same run, `std::thread::sleep` and tokio's `sleep` (a 1 ms timer wheel).
//!
//! Each repetition measures the three timers one after the other, the first one rotating from
//! repetition to repetition; the lateness figures pool every repetition, and the tokio/timerfd
//! p99 ratio is also given per repetition (paired) with its 95% interval.

use crate::progress::{Plan, Step};
use crate::stats::{MeanCi, round};
use serde::Serialize;
use std::time::{Duration, Instant};

#[derive(Debug, Serialize)]
pub struct Lateness {
    pub p50_us: f64,
    pub p99_us: f64,
    pub p999_us: f64,
    pub max_us: f64,
    /// Each repetition's p99.
    pub p99_runs_us: Vec<f64>,
}

#[derive(Debug, Serialize)]
pub struct TimerReport {
    pub interval_us: u64,
    /// Wake-ups per timer and repetition.
    pub samples: usize,
    pub reps: usize,
    pub timerfd: Lateness,
    pub thread_sleep: Lateness,
    pub tokio_sleep: Lateness,
    /// Of the pooled p99s.
    pub p99_ratio_tokio_over_timerfd: f64,
    /// Of each repetition's p99s.
    pub p99_ratio_tokio_over_timerfd_paired: MeanCi,
    pub command: String,
}

/// `q`-quantile of sorted lateness, µs.
fn q_us(v: &[Duration], q: f64) -> f64 {
    v.get(((v.len() as f64 * q) as usize).min(v.len().saturating_sub(1))).map_or(0.0, |d| d.as_secs_f64() * 1e6)
}

fn summarize(runs: &[Vec<Duration>]) -> Lateness {
    let p99_runs_us = runs
        .iter()
        .map(|r| {
            let mut r = r.clone();
            r.sort_unstable();
            round(q_us(&r, 0.99), 1)
        })
        .collect();
    let mut v: Vec<Duration> = runs.concat();
    v.sort_unstable();
    Lateness {
        p50_us: round(q_us(&v, 0.5), 1),
        p99_us: round(q_us(&v, 0.99), 1),
        p999_us: round(q_us(&v, 0.999), 1),
        max_us: round(v.last().map_or(0.0, |d| d.as_secs_f64() * 1e6), 1),
        p99_runs_us,
    }
}

/// The three timers.
#[derive(Debug, Clone, Copy)]
enum Timer {
    Timerfd,
    ThreadSleep,
    Tokio,
}

impl Timer {
    const ALL: [Timer; 3] = [Timer::Timerfd, Timer::ThreadSleep, Timer::Tokio];

    /// `samples` wake-ups `interval` ahead: how late each came.
    fn measure(self, samples: usize, interval: Duration) -> std::io::Result<Vec<Duration>> {
        match self {
            Timer::Timerfd => cohort_net::timer::measure_precision(samples, interval),
            Timer::ThreadSleep => Ok((0..samples)
                .map(|_| {
                    let due = Instant::now() + interval;
                    std::thread::sleep(interval);
                    Instant::now().saturating_duration_since(due)
                })
                .collect()),
            Timer::Tokio => {
                let rt = tokio::runtime::Builder::new_current_thread().enable_time().build()?;
                Ok(rt.block_on(async {
                    let mut v = Vec::with_capacity(samples);
                    for _ in 0..samples {
                        let due = Instant::now() + interval;
                        tokio::time::sleep(interval).await;
                        v.push(Instant::now().saturating_duration_since(due));
                    }
                    v
                }))
            }
        }
    }
}

pub fn run(
    samples: usize,
    interval: Duration,
    reps: usize,
    progress: impl FnMut(&Step),
) -> std::io::Result<TimerReport> {
    let reps = reps.max(1);
    let mut plan = Plan::new((reps * Timer::ALL.len()) as u64, progress);
    // Per timer, per repetition.
    let mut late: [Vec<Vec<Duration>>; 3] = Default::default();
    for r in 0..reps {
        for k in 0..Timer::ALL.len() {
            let i = (r + k) % Timer::ALL.len();
            plan.begin(&format!("repetition {} of {reps}: {:?}", r + 1, Timer::ALL[i]));
            late[i].push(Timer::ALL[i].measure(samples, interval)?);
        }
    }
    plan.finish();
    let [t, s, k] = late.each_ref().map(|runs| summarize(runs));
    let paired: Vec<f64> = k.p99_runs_us.iter().zip(&t.p99_runs_us).map(|(k, t)| k / t.max(0.1)).collect();
    Ok(TimerReport {
        interval_us: interval.as_micros() as u64,
        samples,
        reps,
        p99_ratio_tokio_over_timerfd: round(k.p99_us / t.p99_us.max(0.1), 2),
        p99_ratio_tokio_over_timerfd_paired: MeanCi::of(&paired),
        timerfd: t,
        thread_sleep: s,
        tokio_sleep: k,
        command: format!(
            "cohort bench timer --json --samples {samples} --interval-us {} --reps {reps}",
            interval.as_micros()
        ),
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn reports_all_three_timers_in_every_repetition() {
        let mut steps = Vec::new();
        let r =
            super::run(20, std::time::Duration::from_micros(300), 2, crate::progress::recorder(&mut steps)).unwrap();
        crate::progress::assert_followed_plan(&steps); // two repetitions of three timers
        assert_eq!(steps.len(), 7);
        assert_eq!((r.samples, r.reps), (20, 2));
        for l in [&r.timerfd, &r.thread_sleep, &r.tokio_sleep] {
            assert!(l.max_us >= l.p50_us);
            assert_eq!(l.p99_runs_us.len(), 2);
        }
        assert_eq!(r.p99_ratio_tokio_over_timerfd_paired.runs, 2);
    }
}
