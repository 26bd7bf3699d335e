//! Time for Cohort's sans-IO state machines.
//!
//! A protocol machine never reads a clock; its driver passes `now` in. [`Instant`] is a point
//! on a monotonic time line measured in nanoseconds since an arbitrary epoch chosen by the
//! driver: the simulator starts its virtual clock at zero, the real-time runtime maps
//! [`std::time::Instant`] onto it with [`Clock`]. Intervals are plain [`std::time::Duration`]s.

use std::fmt;
use std::ops::{Add, AddAssign, Sub};
use std::time::Duration;

/// A point in time, in nanoseconds since the driver's epoch.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Instant(u64);

impl Instant {
    /// The driver's epoch.
    pub const ZERO: Instant = Instant(0);
    /// A time later than any a run reaches; handy as "no deadline".
    pub const FAR_FUTURE: Instant = Instant(u64::MAX);

    /// The instant `ns` nanoseconds after the epoch.
    pub const fn from_nanos(ns: u64) -> Self {
        Instant(ns)
    }

    /// The instant `us` microseconds after the epoch.
    pub const fn from_micros(us: u64) -> Self {
        Instant(us.saturating_mul(1_000))
    }

    /// The instant `ms` milliseconds after the epoch.
    pub const fn from_millis(ms: u64) -> Self {
        Instant(ms.saturating_mul(1_000_000))
    }

    /// Nanoseconds since the epoch.
    pub const fn as_nanos(self) -> u64 {
        self.0
    }

    /// Time since the epoch.
    pub const fn since_epoch(self) -> Duration {
        Duration::from_nanos(self.0)
    }

    /// `self - earlier`, or zero when `earlier` is later.
    pub fn saturating_duration_since(self, earlier: Instant) -> Duration {
        Duration::from_nanos(self.0.saturating_sub(earlier.0))
    }

    /// `self + d`, saturating at [`Instant::FAR_FUTURE`].
    pub fn saturating_add(self, d: Duration) -> Instant {
        Instant(self.0.saturating_add(duration_nanos(d)))
    }

    /// `self - d`, saturating at the epoch.
    pub fn saturating_sub(self, d: Duration) -> Instant {
        Instant(self.0.saturating_sub(duration_nanos(d)))
    }
}

fn duration_nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

impl Add<Duration> for Instant {
    type Output = Instant;
    fn add(self, d: Duration) -> Instant {
        self.saturating_add(d)
    }
}

impl AddAssign<Duration> for Instant {
    fn add_assign(&mut self, d: Duration) {
        *self = *self + d;
    }
}

impl Sub<Instant> for Instant {
    type Output = Duration;
    /// Saturates at zero: time between two instants is never negative.
    fn sub(self, earlier: Instant) -> Duration {
        self.saturating_duration_since(earlier)
    }
}

impl fmt::Debug for Instant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{:09}s", self.0 / 1_000_000_000, self.0 % 1_000_000_000)
    }
}

impl fmt::Display for Instant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}

/// Maps the operating system's monotonic clock onto [`Instant`] for real-time drivers.
#[derive(Debug, Clone, Copy)]
pub struct Clock {
    epoch: std::time::Instant,
}

impl Clock {
    /// A clock whose epoch is the moment of the call.
    pub fn start() -> Self {
        Clock { epoch: std::time::Instant::now() }
    }

    /// The current time.
    pub fn now(&self) -> Instant {
        Instant(duration_nanos(self.epoch.elapsed()))
    }

    /// The OS instant corresponding to `t`, for sleeping until a machine's deadline.
    pub fn to_std(&self, t: Instant) -> std::time::Instant {
        self.epoch + t.since_epoch()
    }
}

impl Default for Clock {
    fn default() -> Self {
        Clock::start()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arithmetic_saturates() {
        let t = Instant::from_millis(5);
        assert_eq!(t + Duration::from_millis(2), Instant::from_millis(7));
        assert_eq!(Instant::from_millis(1) - t, Duration::ZERO);
        assert_eq!(t - Instant::from_millis(1), Duration::from_millis(4));
        assert_eq!(Instant::FAR_FUTURE + Duration::from_secs(1), Instant::FAR_FUTURE);
        assert_eq!(Instant::ZERO.saturating_sub(Duration::from_secs(1)), Instant::ZERO);
        assert_eq!(format!("{:?}", Instant::from_micros(1_500_000)), "1.500000000s");
    }

    #[test]
    fn real_clock_is_monotonic() {
        let c = Clock::start();
        let a = c.now();
        let b = c.now();
        assert!(b >= a);
        assert!(c.to_std(b) >= c.to_std(a));
    }
}
