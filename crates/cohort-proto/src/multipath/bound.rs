//! LD-MPSP's delay target as a bound most packets meet.
//!
//! Algorithm 3 of seed 001 grows each path's window by `((τ − q)/τ)/w` per acknowledged
//! packet: the window stops growing exactly where the queueing delay `q` equals `τ`, so in
//! steady state the delay sits *at* the target and about half of the packets exceed it
//! (measured in `cohort bench multipath`: 2% of messages within 20 ms of the fastest with
//! τ = 20 ms). A robot that names a delay target means a bound: "my messages wait at most τ".
//! Cohort keeps Algorithm 3's control law and moves its set point `s` instead: at every path
//! report outside slow start, the delay a packet meets in order (the longest current one-way
//! delay of the paths in use above the smallest any path showed: a message of the faster path
//! waits for those sent before it on the slower) is compared with `τ`, and `s` follows a
//! Robbins-Monro quantile tracker,
//!
//! `s ← clamp(s + κ·τ·((1 − share) − 1{q > τ}), τ/4, τ)`,
//!
//! whose only fixed point is where a fraction `1 − share` of the samples exceed `τ`: a sample
//! over the bound lowers `s` by `κ·τ·share`, one within it raises `s` by `κ·τ·(1 − share)`.
//! The set point stays between `τ/4` (below it a path's queue can no longer absorb the
//! variation of its service, and the bound is out of reach: the counters say so) and `τ`
//! (never above Algorithm 3's own equilibrium). `κ` = 0.01: at 0.95, twenty samples within
//! the bound take back what one over it cost, and a report comes every few packets.

use std::time::Duration;

/// The tracker's step, as a share of `τ`.
pub const GAIN: f64 = 0.01;
/// The set point never falls below this share of `τ`.
pub const FLOOR: f64 = 0.25;

/// The set point of LD-MPSP's windows and what the samples showed.
#[derive(Debug, Clone)]
pub struct DelayBound {
    tau: f64,
    share: Option<f64>,
    set: f64,
    samples: u64,
    over: u64,
}

impl DelayBound {
    /// A bound `tau` met by `share` of the packets (`None`: Algorithm 3 as written, the set
    /// point stays `tau`). A share outside (0, 1) or not finite is taken as `None`.
    pub fn new(tau: Duration, share: Option<f64>) -> Self {
        let tau = tau.as_secs_f64();
        let share = share.filter(|s| s.is_finite() && *s > 0.0 && *s < 1.0);
        DelayBound { tau, share, set: tau, samples: 0, over: 0 }
    }

    /// A report showed packets meeting delay `q` above the fastest delivery, of which
    /// `forced` no window can remove (the paths in use differ by that much with every queue
    /// empty).
    ///
    /// A sample over `τ` lowers the set point only if the bound is within reach, that is if
    /// the forced part leaves `τ` room for the smallest queue the windows aim at (`τ/4`, the
    /// floor): beyond that, lowering `s` cannot bring the delay within `τ` and only starves
    /// the paths (an anti-windup by conditional integration). Two paths 10 and 30 ms one way
    /// are 20 ms apart with no queue at all: every sample was over τ = 20 ms, the set point
    /// sat at its floor, and Algorithm 3's growth there (`(s − q)/τ` packets a round trip,
    /// 0.15 at `s` = 5 ms and `q` = 2 ms) left the 30 ms path at 44 of the 62 packets it
    /// needs. Such a sample counts as within the bound for the tracker (the set point climbs
    /// back to `τ`, Algorithm 3 as written) and as over it in [`DelayBound::over_share`].
    pub fn sample(&mut self, q: Duration, forced: Duration) {
        let over = q.as_secs_f64() > self.tau;
        self.samples += 1;
        self.over += u64::from(over);
        if let Some(share) = self.share {
            let reachable = forced.as_secs_f64() + FLOOR * self.tau <= self.tau;
            let step = GAIN * self.tau * ((1.0 - share) - f64::from(u8::from(over && reachable)));
            self.set = (self.set + step).clamp(FLOOR * self.tau, self.tau);
        }
    }

    /// Where the windows steer the delay above the fastest path.
    pub fn set_point(&self) -> Duration {
        Duration::from_secs_f64(self.set.max(0.0))
    }

    /// Share of the samples so far that exceeded `τ`.
    pub fn over_share(&self) -> f64 {
        if self.samples == 0 { 0.0 } else { self.over as f64 / self.samples as f64 }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    /// A delay that moves with the set point (as a window's queue follows it) with a spread
    /// of ±3 ms: the tracker settles where 5% of the samples exceed τ.
    #[test]
    fn the_set_point_settles_where_the_share_is_met() {
        let mut b = DelayBound::new(20 * MS, Some(0.95));
        let mut x: u64 = 7;
        let (mut n, mut over) = (0u32, 0u32);
        for i in 0..200_000 {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            let noise = ((x >> 33) as f64 / (1u64 << 31) as f64 - 0.5) * 6e-3;
            let q = Duration::from_secs_f64((b.set_point().as_secs_f64() + noise).max(0.0));
            if i >= 100_000 {
                n += 1;
                over += u32::from(q > 20 * MS);
            }
            b.sample(q, Duration::ZERO);
        }
        let share = f64::from(over) / f64::from(n);
        assert!((0.04..0.06).contains(&share), "share over τ {share}");
        // Uniform ±3 ms: 5% above τ puts the set point 2.7 ms below it.
        assert!((b.set_point().as_secs_f64() - 17.3e-3).abs() < 0.6e-3, "{:?}", b.set_point());
    }

    #[test]
    fn algorithm_3_as_written_keeps_tau_and_the_set_point_stays_in_its_band() {
        let mut lit = DelayBound::new(20 * MS, None);
        let mut low = DelayBound::new(20 * MS, Some(0.95));
        let mut high = DelayBound::new(20 * MS, Some(0.95));
        for _ in 0..10_000 {
            lit.sample(100 * MS, Duration::ZERO);
            low.sample(100 * MS, Duration::ZERO);
            high.sample(Duration::ZERO, Duration::ZERO);
        }
        assert_eq!(lit.set_point(), 20 * MS);
        assert_eq!(lit.over_share(), 1.0);
        assert_eq!(low.set_point(), 5 * MS, "never below τ/4");
        assert_eq!(high.set_point(), 20 * MS, "never above τ");
        assert_eq!(high.over_share(), 0.0);
        for bad in [Some(0.0), Some(1.0), Some(f64::NAN), Some(-1.0)] {
            let mut b = DelayBound::new(20 * MS, bad);
            b.sample(100 * MS, Duration::ZERO);
            assert_eq!(b.set_point(), 20 * MS, "{bad:?} is Algorithm 3 as written");
        }
    }

    /// Paths whose smallest delays alone differ by more than `τ − τ/4`: no window can bring a
    /// sample within `τ`, so the samples over it do not lower the set point (they are still
    /// counted over); 15 ms apart leaves room, and they do.
    #[test]
    fn an_unreachable_bound_does_not_wind_the_set_point_down() {
        let mut far = DelayBound::new(20 * MS, Some(0.95));
        let mut near = DelayBound::new(20 * MS, Some(0.95));
        for _ in 0..10_000 {
            far.sample(22 * MS, 16 * MS);
            near.sample(22 * MS, 15 * MS);
        }
        assert_eq!(far.set_point(), 20 * MS);
        assert_eq!(far.over_share(), 1.0);
        assert_eq!(near.set_point(), 5 * MS);
    }
}
