//! Delay balancing across paths (seed 001 §3.2-3.3, Eqs. 5-12).
//!
//! `W` packets are split into per-path counts `w_i` (Σ w_i = W). Path `i` delivers its share
//! after `D_i + P_i(w_i)`: `D_i` its one-way delay without queueing, `P_i(w_i)` the sum of the
//! `w_i` inter-packet (service) times, approximated by a normal variable (Eq. 8):
//! `P_i(w) ≈ γ_i·w + u_i·√w·N` with `γ_i` the mean service time and `u_i` the variability of
//! Eq. 9. The transfer ends at `T(w) = max_i D_i + P_i(w_i)` (Eq. 5). The split that minimises
//! the short-run average `T̄(w)` (Eq. 11) equalises the paths' delays (Eq. 12, Wardrop form):
//! [`relaxed`] solves the relaxed problem by water-filling, [`split`] the integer problem
//! exactly (where seed 001 §3.3 searches the 2ⁿ floor/ceiling vectors, see its docs).
//!
//! The delay used is a quantile: `D_i + γ_i·w + z·u_i·√w` with `z = Φ⁻¹(q)`, so that by Eq. 10
//! each path meets it with probability `q` (`z = 0` gives the mean).

/// What the balancer knows of one path.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PathDelay {
    /// `D_i`, seconds.
    pub base: f64,
    /// `γ_i`, seconds per packet.
    pub gamma: f64,
    /// `u_i`, seconds per √packet.
    pub u: f64,
}

impl PathDelay {
    /// `D_i + γ_i·w + z·u_i·√w`: when path `i` has delivered `w` packets, at quantile `z`.
    pub fn finish(&self, w: f64, z: f64) -> f64 {
        if w <= 0.0 {
            return 0.0;
        }
        self.base + self.gamma * w + z * self.u * w.sqrt()
    }

    /// The largest `w ≥ 0` with `finish(w) ≤ level` (0 if even one packet is later).
    fn packets_by(&self, level: f64, z: f64) -> f64 {
        let room = level - self.base;
        if room <= 0.0 {
            return 0.0;
        }
        // γ·x² + z·u·x − room = 0 in x = √w.
        let (a, b) = (self.gamma.max(1e-12), (z * self.u).max(0.0));
        let x = (-b + (b * b + 4.0 * a * room).sqrt()) / (2.0 * a);
        x * x
    }
}

/// `T(w)` of Eq. 5 at quantile `z`: when the last path finishes.
pub fn completion(paths: &[PathDelay], w: &[usize], z: f64) -> f64 {
    paths.iter().zip(w).map(|(p, &n)| p.finish(n as f64, z)).fold(0.0, f64::max)
}

/// The relaxed split of Eq. 12: real `w_i ≥ 0` with Σ w_i = `total` and equal finishing
/// times on every path used (bisection on the common level).
pub fn relaxed(paths: &[PathDelay], total: usize, z: f64) -> Vec<f64> {
    if paths.is_empty() {
        return Vec::new();
    }
    let want = total as f64;
    let sum = |level: f64| paths.iter().map(|p| p.packets_by(level, z)).sum::<f64>();
    let mut lo = paths.iter().map(|p| p.base).fold(f64::INFINITY, f64::min);
    let mut hi = lo.max(0.0) + 1.0;
    while sum(hi) < want {
        hi = hi * 2.0 + 1.0;
    }
    for _ in 0..100 {
        let mid = 0.5 * (lo + hi);
        if sum(mid) < want { lo = mid } else { hi = mid }
    }
    let mut w: Vec<f64> = paths.iter().map(|p| p.packets_by(hi, z)).collect();
    // Bisection leaves Σ a hair above `total`: scale it back.
    let s: f64 = w.iter().sum();
    if s > 0.0 {
        w.iter_mut().for_each(|x| *x *= want / s);
    }
    w
}

/// The integer split of Eq. 11: `w_i ≥ 0`, Σ w_i = `total`, least `T(w)`.
///
/// Seed 001 §3.3 rounds the relaxed solution up or down on each path and searches those 2ⁿ
/// vectors; that search can miss the optimum (with `z > 0` the delays are not convex in
/// `w`; `the_integer_split_is_optimal` has a case). Cohort solves Eq. 11 exactly instead: each
/// packet in turn goes to the path where it would finish earliest. Since every path's finish
/// time grows with its count, the packets placed are the `total` earliest finishing slots over
/// all paths, so the largest of them, `T(w)`, is as small as any split allows. `O(total·n)`.
pub fn split(paths: &[PathDelay], total: usize, z: f64) -> Vec<usize> {
    let mut w = vec![0usize; paths.len()];
    if paths.is_empty() {
        return w;
    }
    for _ in 0..total {
        let (i, _) = paths
            .iter()
            .enumerate()
            .map(|(i, p)| (i, p.finish(w[i] as f64 + 1.0, z)))
            .min_by(|a, b| a.1.total_cmp(&b.1))
            .unwrap_or((0, 0.0));
        w[i] += 1;
    }
    w
}

/// `Φ⁻¹(q)` for `q` in (0, 1): the standard normal quantile (Acklam's rational approximation,
/// relative error below 1.2·10⁻⁹).
pub fn normal_quantile(q: f64) -> f64 {
    let q = q.clamp(1e-12, 1.0 - 1e-12);
    const A: [f64; 6] = [
        -39.696_830_286_653_76,
        220.946_098_424_520_5,
        -275.928_510_446_968_7,
        138.357_751_867_269,
        -30.664_798_066_147_16,
        2.506_628_277_459_239,
    ];
    const B: [f64; 5] = [
        -54.476_098_798_224_06,
        161.585_836_858_040_9,
        -155.698_979_859_886_6,
        66.801_311_887_719_72,
        -13.280_681_552_885_72,
    ];
    const C: [f64; 6] = [
        -0.007_784_894_002_430_293,
        -0.322_396_458_041_136_5,
        -2.400_758_277_161_838,
        -2.549_732_539_343_734,
        4.374_664_141_464_968,
        2.938_163_982_698_783,
    ];
    const D: [f64; 4] =
        [0.007_784_695_709_041_462, 0.322_467_129_070_039_8, 2.445_134_137_142_996, 3.754_408_661_907_416];
    let tail = |p: f64| {
        let t = (-2.0 * p.ln()).sqrt();
        (((((C[0] * t + C[1]) * t + C[2]) * t + C[3]) * t + C[4]) * t + C[5])
            / ((((D[0] * t + D[1]) * t + D[2]) * t + D[3]) * t + 1.0)
    };
    if q < 0.02425 {
        tail(q)
    } else if q > 1.0 - 0.02425 {
        -tail(1.0 - q)
    } else {
        let p = q - 0.5;
        let r = p * p;
        (((((A[0] * r + A[1]) * r + A[2]) * r + A[3]) * r + A[4]) * r + A[5]) * p
            / (((((B[0] * r + B[1]) * r + B[2]) * r + B[3]) * r + B[4]) * r + 1.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(base_ms: f64, mbit: f64) -> PathDelay {
        // 1250-byte packets.
        PathDelay { base: base_ms / 1e3, gamma: 1250.0 * 8.0 / (mbit * 1e6), u: 0.0 }
    }

    #[test]
    fn equal_paths_share_equally_and_rates_share_in_proportion() {
        assert_eq!(split(&[p(10.0, 20.0), p(10.0, 20.0)], 100, 0.0), vec![50, 50]);
        let w = split(&[p(10.0, 20.0), p(10.0, 10.0)], 90, 0.0);
        assert_eq!(w.iter().sum::<usize>(), 90);
        assert!((59..=61).contains(&w[0]), "{w:?}: twice the rate, twice the packets");
    }

    /// A path whose delay alone exceeds what the other needs for all the packets gets none.
    #[test]
    fn a_far_path_is_left_out_of_a_small_window() {
        let w = split(&[p(5.0, 20.0), p(200.0, 20.0)], 10, 0.0);
        assert_eq!(w, vec![10, 0]);
        // With many packets, the far path is worth using.
        let w = split(&[p(5.0, 20.0), p(200.0, 20.0)], 2000, 0.0);
        assert!(w[1] > 0, "{w:?}");
    }

    /// The integer split is the best of every split (exhaustive check on small cases).
    #[test]
    fn the_integer_split_is_optimal() {
        let paths = [p(3.0, 8.0), p(12.0, 30.0), PathDelay { base: 0.007, gamma: 0.0009, u: 0.0006 }];
        for total in 0..40 {
            for z in [0.0, 1.645] {
                let w = split(&paths, total, z);
                assert_eq!(w.iter().sum::<usize>(), total);
                let t = completion(&paths, &w, z);
                let mut best = f64::INFINITY;
                for a in 0..=total {
                    for b in 0..=(total - a) {
                        best = best.min(completion(&paths, &[a, b, total - a - b], z));
                    }
                }
                assert!(t <= best + 1e-12, "total {total} z {z}: {w:?} gives {t}, best {best}");
            }
        }
    }

    /// Variability pushes packets off the noisy path (Eq. 10's tail).
    #[test]
    fn variability_moves_packets_to_the_steady_path() {
        let steady = PathDelay { base: 0.01, gamma: 0.001, u: 0.0 };
        let noisy = PathDelay { base: 0.01, gamma: 0.001, u: 0.004 };
        let mean = split(&[steady, noisy], 100, 0.0);
        let tail = split(&[steady, noisy], 100, normal_quantile(0.95));
        assert_eq!(mean, vec![50, 50]);
        assert!(tail[1] < 45, "{tail:?}");
    }

    /// Eq. 12: the relaxed split finishes every used path at the same time, and the integer
    /// split stays within a packet of it on every path.
    #[test]
    fn the_relaxed_split_is_of_wardrop_form() {
        let paths = [p(3.0, 8.0), p(12.0, 30.0), PathDelay { base: 0.007, gamma: 0.0009, u: 0.0006 }];
        let z = 1.0;
        let r = relaxed(&paths, 400, z);
        assert!((r.iter().sum::<f64>() - 400.0).abs() < 1e-6);
        let t: Vec<f64> = paths.iter().zip(&r).map(|(q, &w)| q.finish(w, z)).collect();
        assert!(t.iter().all(|x| (x - t[0]).abs() < 1e-6), "{t:?}");
        let w = split(&paths, 400, z);
        assert!(w.iter().zip(&r).all(|(&a, &b)| (a as f64 - b).abs() <= 1.0 + 1e-9), "{w:?} vs {r:?}");
    }

    #[test]
    fn the_normal_quantile_matches_known_values() {
        for (q, z) in [(0.5, 0.0), (0.95, 1.644_853_626_951), (0.99, 2.326_347_874_041), (0.001, -3.090_232_306_168)] {
            assert!((normal_quantile(q) - z).abs() < 1e-8, "{q}");
        }
    }
}
