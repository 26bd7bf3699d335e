//! A high-resolution one-shot timer: Linux `timerfd` on `CLOCK_MONOTONIC`, armed with an
//! absolute deadline and waited on through the same `epoll` as the sockets.
//!
//! `epoll_wait`'s own timeout has millisecond resolution (and tokio's timer wheel a 1 ms tick),
//! which is too coarse for pacing and repair timers of a few hundred microseconds; a timerfd
//! expires with the kernel's high-resolution timers. [`measure_precision`] reports how late
//! wake-ups are on this machine.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::time::{Duration, Instant};

/// A monotonic one-shot timer file descriptor.
#[derive(Debug)]
pub struct TimerFd {
    fd: OwnedFd,
    /// `CLOCK_MONOTONIC` reading at the moment `epoch` was taken, to convert deadlines.
    base_ns: u64,
    epoch: Instant,
}

fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `ts` is a valid out-pointer; CLOCK_MONOTONIC always exists on Linux.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

impl TimerFd {
    /// A disarmed, non-blocking timer.
    pub fn new() -> io::Result<Self> {
        // SAFETY: plain syscall; the result is checked before use.
        let fd = unsafe { libc::timerfd_create(libc::CLOCK_MONOTONIC, libc::TFD_NONBLOCK | libc::TFD_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `fd` is a fresh descriptor we own.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        let epoch = Instant::now();
        Ok(TimerFd { fd, base_ns: monotonic_ns(), epoch })
    }

    /// Arms the timer to fire at `deadline` (immediately if it has passed); `None` disarms.
    pub fn set(&self, deadline: Option<Instant>) -> io::Result<()> {
        let mut spec = libc::itimerspec {
            it_interval: libc::timespec { tv_sec: 0, tv_nsec: 0 },
            it_value: libc::timespec { tv_sec: 0, tv_nsec: 0 },
        };
        if let Some(d) = deadline {
            let since = d.saturating_duration_since(self.epoch).as_nanos() as u64;
            // A zero it_value disarms, so a deadline at the epoch still asks for 1 ns.
            let abs = (self.base_ns + since).max(1);
            spec.it_value.tv_sec = (abs / 1_000_000_000) as libc::time_t;
            spec.it_value.tv_nsec = (abs % 1_000_000_000) as libc::c_long;
        }
        // SAFETY: valid fd and pointers; TFD_TIMER_ABSTIME interprets it_value on CLOCK_MONOTONIC.
        let rc =
            unsafe { libc::timerfd_settime(self.fd.as_raw_fd(), libc::TFD_TIMER_ABSTIME, &spec, std::ptr::null_mut()) };
        if rc < 0 { Err(io::Error::last_os_error()) } else { Ok(()) }
    }

    /// Consumes an expiry, if any; returns whether the timer had fired.
    pub fn acknowledge(&self) -> bool {
        let mut n = 0u64;
        // SAFETY: reads 8 bytes into `n` from our non-blocking timerfd.
        let r = unsafe { libc::read(self.fd.as_raw_fd(), (&mut n as *mut u64).cast(), 8) };
        r == 8
    }
}

impl AsRawFd for TimerFd {
    fn as_raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

/// Lateness of timer wake-ups: arms the timer `samples` times for `interval` ahead, waits with
/// `poll(2)` and records how late each wake-up was. Returns the sorted lateness values.
pub fn measure_precision(samples: usize, interval: Duration) -> io::Result<Vec<Duration>> {
    let t = TimerFd::new()?;
    let mut late = Vec::with_capacity(samples);
    for _ in 0..samples {
        let deadline = Instant::now() + interval;
        t.set(Some(deadline))?;
        let mut pfd = libc::pollfd { fd: t.as_raw_fd(), events: libc::POLLIN, revents: 0 };
        loop {
            // SAFETY: one valid pollfd.
            let rc = unsafe { libc::poll(&mut pfd, 1, -1) };
            if rc > 0 || io::Error::last_os_error().kind() != io::ErrorKind::Interrupted {
                break;
            }
        }
        late.push(Instant::now().saturating_duration_since(deadline));
        t.acknowledge();
    }
    late.sort_unstable();
    Ok(late)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fires_and_disarms() {
        let t = TimerFd::new().unwrap();
        assert!(!t.acknowledge(), "a new timer is disarmed");
        t.set(Some(Instant::now())).unwrap();
        let late = measure_precision(5, Duration::from_micros(200)).unwrap();
        assert_eq!(late.len(), 5);
        std::thread::sleep(Duration::from_millis(1));
        assert!(t.acknowledge(), "a past deadline fires at once");
        t.set(Some(Instant::now() + Duration::from_secs(60))).unwrap();
        t.set(None).unwrap();
        std::thread::sleep(Duration::from_millis(1));
        assert!(!t.acknowledge());
    }
}
