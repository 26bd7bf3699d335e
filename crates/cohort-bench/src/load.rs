//! Background load for benches that must hold on a busy computer: one CPU hog per core at
//! normal priority, as a robot's perception and planning keep its cores busy.
//!
//! Each hog walks an 8 MiB buffer with a pseudo-random read-modify-write (so it also evicts
//! caches, as real work does, rather than spinning in registers) and yields nothing. Every hog
//! stops when the [`Load`] is dropped or stopped, and in any case at its deadline, so a bench
//! that dies cannot leave the machine loaded.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Bytes each hog walks.
const HOG_BYTES: usize = 8 << 20;

/// Running hogs; dropping stops and joins them.
#[derive(Debug)]
pub struct Load {
    stop: Arc<AtomicBool>,
    work: Arc<AtomicU64>,
    threads: Vec<JoinHandle<()>>,
    started: Instant,
}

/// Puts the calling thread back on the normal scheduler at nice 0 (a bench's measuring thread
/// may run SCHED_FIFO, and threads inherit it).
fn normal_priority() {
    let p = libc::sched_param { sched_priority: 0 };
    // SAFETY: valid sched_param; 0 is the calling thread. Best effort: a failure leaves the
    // inherited policy, which the hog's report cannot hide (its CPU share is measured).
    unsafe {
        libc::sched_setscheduler(0, libc::SCHED_OTHER, &p);
        libc::setpriority(libc::PRIO_PROCESS, 0, 0);
    }
}

fn hog(stop: &AtomicBool, work: &AtomicU64, deadline: Instant, seed: u64) {
    normal_priority();
    let mut buf = vec![0u64; HOG_BYTES / 8];
    let mut x = seed | 1;
    let mut rounds = 0u64;
    while !stop.load(Ordering::Relaxed) && Instant::now() < deadline {
        for _ in 0..65_536 {
            // xorshift64
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let i = (x as usize) % buf.len();
            buf[i] = buf[i].wrapping_add(x);
        }
        rounds += 1;
    }
    std::hint::black_box(&buf);
    work.fetch_add(rounds, Ordering::Relaxed);
}

impl Load {
    /// Starts one hog per CPU this process may run on, each ending by `max_duration` at the
    /// latest.
    pub fn start(max_duration: Duration) -> Load {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        Load::with_threads(cores, max_duration)
    }

    /// Starts `threads` hogs.
    pub fn with_threads(threads: usize, max_duration: Duration) -> Load {
        let stop = Arc::new(AtomicBool::new(false));
        let work = Arc::new(AtomicU64::new(0));
        let deadline = Instant::now() + max_duration;
        let threads = (0..threads)
            .map(|i| {
                let (stop, work) = (stop.clone(), work.clone());
                std::thread::Builder::new()
                    .name(format!("cpu-hog-{i}"))
                    .spawn(move || hog(&stop, &work, deadline, 0x9e37_79b9_7f4a_7c15 ^ i as u64))
                    .expect("spawning a hog thread")
            })
            .collect();
        Load { stop, work, threads, started: Instant::now() }
    }

    pub fn threads(&self) -> usize {
        self.threads.len()
    }

    /// Stops and joins the hogs; returns their work rate (million updates per second, all hogs
    /// together) as evidence that they ran.
    pub fn stop(mut self) -> f64 {
        self.halt()
    }

    fn halt(&mut self) -> f64 {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
        let secs = self.started.elapsed().as_secs_f64().max(1e-9);
        self.work.load(Ordering::Relaxed) as f64 * 65_536.0 / secs / 1e6
    }
}

impl Drop for Load {
    fn drop(&mut self) {
        self.halt();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hogs_work_and_stop_when_asked_or_at_their_deadline() {
        let l = Load::with_threads(2, Duration::from_secs(60));
        assert_eq!(l.threads(), 2);
        std::thread::sleep(Duration::from_millis(100));
        let t = Instant::now();
        assert!(l.stop() > 0.0);
        assert!(t.elapsed() < Duration::from_secs(10), "hogs did not stop when asked");
        // Never stopped by its owner: ends by itself.
        let l = Load::with_threads(1, Duration::from_millis(50));
        std::thread::sleep(Duration::from_millis(200));
        assert!(l.threads.iter().all(|t| t.is_finished()));
    }
}
