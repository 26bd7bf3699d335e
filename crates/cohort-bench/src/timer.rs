//! `cohort bench timer`: how late a wake-up for a deadline is, for the runtime's `timerfd`
//! timer and, in the same run, `std::thread::sleep` and tokio's `sleep` (a 1 ms timer wheel).

use crate::stats::round;
use serde::Serialize;
use std::time::{Duration, Instant};

#[derive(Debug, Serialize)]
pub struct Lateness {
    pub p50_us: f64,
    pub p99_us: f64,
    pub p999_us: f64,
    pub max_us: f64,
}

#[derive(Debug, Serialize)]
pub struct TimerReport {
    pub interval_us: u64,
    pub samples: usize,
    pub timerfd: Lateness,
    pub thread_sleep: Lateness,
    pub tokio_sleep: Lateness,
    pub p99_ratio_tokio_over_timerfd: f64,
    pub command: String,
}

fn summarize(mut v: Vec<Duration>) -> Lateness {
    v.sort_unstable();
    let q = |x: f64| {
        v.get(((v.len() as f64 * x) as usize).min(v.len().saturating_sub(1))).map_or(0.0, |d| d.as_secs_f64() * 1e6)
    };
    Lateness {
        p50_us: round(q(0.5), 1),
        p99_us: round(q(0.99), 1),
        p999_us: round(q(0.999), 1),
        max_us: round(v.last().map_or(0.0, |d| d.as_secs_f64() * 1e6), 1),
    }
}

pub fn run(samples: usize, interval: Duration) -> std::io::Result<TimerReport> {
    let timerfd = cohort_net::timer::measure_precision(samples, interval)?;
    let sleep: Vec<Duration> = (0..samples)
        .map(|_| {
            let due = Instant::now() + interval;
            std::thread::sleep(interval);
            Instant::now().saturating_duration_since(due)
        })
        .collect();
    let rt = tokio::runtime::Builder::new_current_thread().enable_time().build()?;
    let tokio: Vec<Duration> = rt.block_on(async {
        let mut v = Vec::with_capacity(samples);
        for _ in 0..samples {
            let due = Instant::now() + interval;
            tokio::time::sleep(interval).await;
            v.push(Instant::now().saturating_duration_since(due));
        }
        v
    });
    let (t, s, k) = (summarize(timerfd), summarize(sleep), summarize(tokio));
    Ok(TimerReport {
        interval_us: interval.as_micros() as u64,
        samples,
        p99_ratio_tokio_over_timerfd: round(k.p99_us / t.p99_us.max(0.1), 2),
        timerfd: t,
        thread_sleep: s,
        tokio_sleep: k,
        command: format!("cohort bench timer --json --samples {samples} --interval-us {}", interval.as_micros()),
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn reports_all_three_timers() {
        let r = super::run(20, std::time::Duration::from_micros(300)).unwrap();
        assert_eq!(r.samples, 20);
        assert!(r.timerfd.max_us >= r.timerfd.p50_us);
        assert!(r.tokio_sleep.p50_us >= 0.0);
    }
}
