//! MS-UCB: choosing the super-arm of paths each round (seed 001 §4, Algorithm 2, Eqs. 13-16),
//! and its federated start (§4.1, Eqs. 17-19).
//!
//! Each path is an arm. A round schedules packets on a super-arm `S` of `m` paths; every arm
//! in `S` then yields a reward in [0, 1] and its statistics move (Eqs. 14, 15):
//! `u_i ← u_i + 1` and `v_i ← (R_i + u_i·v_i) / (1 + u_i)` for `i ∈ S`, unchanged otherwise.
//! The next super-arm maximises `Σ_{i∈S} √((m + 1)·ln(t + 1) / u_i) + v_i` (Eq. 16), which for
//! per-arm sums is the `m` arms of largest index. Arms never tried have an infinite index, and
//! Algorithm 2's initialisation (random super-arms for the first rounds) is that rule with
//! ties broken by a seeded draw.
//!
//! **Reward.** Eq. 13 rewards an arm by the inverse of its delivery delay `D_i + P_i(w_i)`,
//! normalised. Delay balancing equalises the delays of the shares it plans (Eq. 12), so the
//! planned share's delay no longer tells paths apart; Cohort rewards the inverse delivery time
//! of one packet, discounted by loss: `c_i = (1 − p_i)/(D_i + γ_i)` (useful packets per unit
//! of delay; `D_i` without the queue the scheduler itself keeps on the path), normalised by the best `c_j` of every path measured, so `R_i ∈ [0, 1]` is 1 for
//! the best path and comparable across rounds whatever the super-arm.
//!
//! **Federated start.** Robots share `(u_i, v_i)` per path (an access point, a channel, a
//! link: the path's `key`). A robot meeting a path others used starts from the weighted means
//! of Eqs. 17-18, `ū = Σ_x P(x)·u_x / Σ_x P(x)` and likewise `v̄`. Seed 001 takes `P(x) = 1/x`
//! over users; Cohort weights each report by its age, `P(x) = 2^(−age_x / half_life)`, so a
//! stale report counts less (the "weighted by age").

/// One arm's statistics: `u_i` (rounds it was in the super-arm) and `v_i` (mean reward).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct ArmStats {
    pub u: f64,
    pub v: f64,
}

/// A peer's report of one path's statistics, `age` seconds old.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SharedStats {
    pub stats: ArmStats,
    pub age_s: f64,
}

/// Eqs. 17-18 with age weights: the statistics a robot starts a path with from peers'
/// reports (`None` without reports).
pub fn federated_start(reports: &[SharedStats], half_life_s: f64) -> Option<ArmStats> {
    let weight = |r: &SharedStats| (-(r.age_s.max(0.0)) / half_life_s.max(1e-9)).exp2();
    let total: f64 = reports.iter().map(weight).sum();
    if reports.is_empty() || total <= 0.0 {
        return None;
    }
    let u = reports.iter().map(|r| weight(r) * r.stats.u).sum::<f64>() / total;
    let v = reports.iter().map(|r| weight(r) * r.stats.v).sum::<f64>() / total;
    Some(ArmStats { u, v: v.clamp(0.0, 1.0) })
}

/// The bandit over `n` arms choosing super-arms of `m`.
#[derive(Debug, Clone)]
pub struct MsUcb {
    arms: Vec<ArmStats>,
    /// Rounds played, `t`.
    t: u64,
    m: usize,
    /// Deterministic tie-break state (xorshift).
    rng: u64,
}

impl MsUcb {
    /// `n` arms, super-arms of `m` (clamped to 1..=n), tie-breaks from `seed`.
    pub fn new(n: usize, m: usize, seed: u64) -> Self {
        MsUcb { arms: vec![ArmStats::default(); n], t: 0, m: m.clamp(1, n.max(1)), rng: seed | 1 }
    }

    pub fn arms(&self) -> &[ArmStats] {
        &self.arms
    }

    pub fn rounds(&self) -> u64 {
        self.t
    }

    /// Starts arm `i` from shared statistics (a federated start).
    pub fn seed_arm(&mut self, i: usize, s: ArmStats) {
        if let Some(a) = self.arms.get_mut(i) {
            *a = s;
        }
    }

    /// Adds an arm (a path that appeared); returns its index.
    pub fn add_arm(&mut self, s: ArmStats) -> usize {
        self.arms.push(s);
        self.arms.len() - 1
    }

    /// Eq. 16's per-arm index at round `t`: exploration + exploitation; infinite for an arm
    /// never played.
    pub fn index(&self, i: usize) -> f64 {
        let a = self.arms[i];
        if a.u <= 0.0 {
            return f64::INFINITY;
        }
        ((self.m as f64 + 1.0) * ((self.t + 1) as f64).ln() / a.u).sqrt() + a.v
    }

    /// Eq. 16: the super-arm for the next round among the `usable` arms (a failed path is not
    /// usable): the `m` of largest index, ties broken at random. Sorted by arm index.
    pub fn choose(&mut self, usable: &[bool]) -> Vec<usize> {
        let mut cand: Vec<(f64, u64, usize)> = (0..self.arms.len())
            .filter(|&i| usable.get(i).copied().unwrap_or(false))
            .map(|i| (self.index(i), self.next_rand(), i))
            .collect();
        cand.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
        let mut s: Vec<usize> = cand.into_iter().take(self.m).map(|c| c.2).collect();
        s.sort_unstable();
        s
    }

    /// Eqs. 14-15: the round that played `s` ended with `rewards[k]` for arm `s[k]`.
    pub fn update(&mut self, s: &[usize], rewards: &[f64]) {
        for (&i, &r) in s.iter().zip(rewards) {
            if let Some(a) = self.arms.get_mut(i) {
                let r = r.clamp(0.0, 1.0);
                a.v = (r + a.u * a.v) / (1.0 + a.u);
                a.u += 1.0;
            }
        }
        self.t += 1;
    }

    fn next_rand(&mut self) -> u64 {
        let mut x = self.rng;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.rng = x;
        x
    }
}

/// `c_i = (1 − p_i)/(D_i + γ_i)`: a path's useful packets per unit of delivery delay.
pub fn merit(delay_s: f64, loss: f64) -> f64 {
    if delay_s > 0.0 { (1.0 - loss.clamp(0.0, 1.0)) / delay_s } else { 0.0 }
}

/// The rewards `R_i = c_i / best` of a round's arms (see the module docs), `best` the largest
/// merit of every path measured.
pub fn rewards(merits: &[f64], best: f64) -> Vec<f64> {
    merits.iter().map(|&c| if best > 0.0 { (c / best).clamp(0.0, 1.0) } else { 0.0 }).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statistics_follow_eqs_14_and_15() {
        let mut b = MsUcb::new(3, 2, 1);
        b.update(&[0, 2], &[1.0, 0.5]);
        b.update(&[0], &[0.0]);
        assert_eq!(b.arms()[0], ArmStats { u: 2.0, v: 0.5 });
        assert_eq!(b.arms()[1], ArmStats { u: 0.0, v: 0.0 });
        assert_eq!(b.arms()[2], ArmStats { u: 1.0, v: 0.5 });
        assert_eq!(b.rounds(), 2);
        assert!(b.index(1).is_infinite(), "an untried arm is explored first");
        let want = ((3.0f64) * (3.0f64).ln() / 2.0).sqrt() + 0.5;
        assert!((b.index(0) - want).abs() < 1e-12);
    }

    /// Against fixed rewards, the best super-arm is played almost always after exploring,
    /// and a failed path is never chosen.
    #[test]
    fn the_best_pair_wins_and_unusable_arms_are_skipped() {
        let mean = [0.9, 0.2, 0.8, 0.3];
        let mut b = MsUcb::new(4, 2, 7);
        let mut best = 0;
        for t in 0..2000 {
            let s = b.choose(&[true; 4]);
            assert_eq!(s.len(), 2);
            if t >= 1000 && s == vec![0, 2] {
                best += 1;
            }
            let r: Vec<f64> = s.iter().map(|&i| mean[i]).collect();
            b.update(&s, &r);
        }
        assert!(best > 900, "best pair in {best} of the last 1000 rounds");
        let s = b.choose(&[false, true, true, true]);
        assert!(!s.contains(&0));
    }

    #[test]
    fn federated_start_weights_reports_by_age() {
        assert_eq!(federated_start(&[], 60.0), None);
        let fresh = SharedStats { stats: ArmStats { u: 100.0, v: 0.9 }, age_s: 0.0 };
        let old = SharedStats { stats: ArmStats { u: 10.0, v: 0.1 }, age_s: 120.0 };
        let s = federated_start(&[fresh, old], 60.0).unwrap();
        // Weights 1 and 1/4.
        assert!((s.u - (100.0 + 2.5) / 1.25).abs() < 1e-9);
        assert!((s.v - (0.9 + 0.025) / 1.25).abs() < 1e-9);
    }

    #[test]
    fn rewards_favour_the_fast_lossless_path() {
        let m: Vec<f64> = [(0.010, 0.0), (0.020, 0.0), (0.010, 0.5)].iter().map(|&(d, p)| merit(d, p)).collect();
        assert_eq!(rewards(&m, m[0]), vec![1.0, 0.5, 0.5]);
        assert_eq!(rewards(&[0.0], 0.0), vec![0.0]);
        assert_eq!(merit(0.0, 0.0), 0.0);
    }
}
