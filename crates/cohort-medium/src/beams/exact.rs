//! The exact optimum of seed 001's integer program (after Eq. 2), for small instances.
//!
//! The program maximises `Σ_b Σ_r Σ_ı I_{b,r,ı}·θ_{r,b}^ı` with each chain serving at most one
//! (beam, device) (and, in Cohort's model, each beam carrying at most one stream). Its
//! objective is not linear in the indicators: `θ` of one stream depends, through the
//! crosstalk of Eq. 2, on every other indicator, inside a logarithm. No linear program in
//! the `I_{b,r,ı}` alone expresses it exactly, so Cohort splits the problem where it becomes
//! linear:
//!
//! 1. **Enumerate the active beam set** `S ⊆ B`, `1 ≤ |S| ≤ min(|R|, |B|)`. Chains are
//!    identical, so once `S` is fixed the chain labels do not matter (chain `j` takes the
//!    `j`-th beam of `S`).
//! 2. **Given `S`, the objective is linear in "which beams serve which device"**: device
//!    `ı` served by the beams `T ⊆ S` hears crosstalk from exactly `S ∖ T` (Eq. 2 excludes
//!    its own streams), so its throughput `g_ı(T) = Σ_{b∈T} log2(1 + P_{b,ı} /
//!    (Σ_{b'∈S∖T} C_{b',ı} + ς²))` is a number known before solving. The set-partitioning
//!    ILP over binaries `z_{ı,T}` (device `ı` gets exactly the beams `T`):
//!    `max Σ g_ı(T)·z_{ı,T}` s.t. `Σ_T z_{ı,T} ≤ 1` per device, `Σ_{ı,T∋b} z_{ı,T} ≤ 1` per
//!    beam of `S`. (A beam left unused still counted as interference: the value is then a
//!    lower bound of that allocation's, and the allocation itself is found exactly with the
//!    smaller `S`.) For one-to-one, only the columns with `|T| = 1`.
//! 3. **Prune**: crosstalk only lowers `θ`, so `Σ_{b∈S} max_ı θ_alone(b, ı)` bounds every
//!    allocation on `S`; a set whose bound does not exceed the best found (starting from the
//!    greedy's) cannot improve it and is skipped.
//!
//! The ILPs are solved by [`good_lp`] with its pure-Rust `microlp` backend (branch and
//! bound over a simplex): a maintained modelling crate (the rust-or organisation) whose
//! default backend, CBC, needs a C++ toolchain and system libraries, which `microlp` does
//! not. The enumeration of step 1 is `Σ_{k ≤ |R|} C(|B|, k)` sets, each ILP
//! `|I|·(2^|S| − 1)` columns: exact and fast for the small instances it is meant for
//! (`|I| ≤ 8`, `|R| ≤ 4`, `|B| ≤ 16`), refused beyond [`MAX_EXACT_SETS`] sets or
//! [`MAX_EXACT_CHAINS`] chains.

use super::alloc::{Greedy, Mapping};
use super::{Allocation, BeamsError, Channel, Stream};
use good_lp::{Expression, ProblemVariables, Solution, SolverModel, Variable, microlp, variable};

/// Beam sets the exact search enumerates at most.
pub const MAX_EXACT_SETS: u64 = 2_000_000;
/// Chains the exact search accepts at most (each ILP has up to `|I|·2^|R|` columns).
pub const MAX_EXACT_CHAINS: usize = 6;

/// What the exact search did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ExactStats {
    /// Beam sets enumerated, and the ILPs solved (the others were pruned by the bound).
    pub sets: u64,
    pub ilps: u64,
}

/// `C(n, k)` summed over `k = 1..=m`, saturating.
fn sets_count(n: usize, m: usize) -> u64 {
    let mut total = 0u64;
    let mut c = 1u64;
    for k in 1..=m {
        c = c.saturating_mul((n + 1 - k) as u64) / k as u64;
        total = total.saturating_add(c);
    }
    total
}

/// The optimum of the integer program on `ch` under `mapping`, and how the search went.
pub fn optimum(ch: &Channel, mapping: Mapping) -> Result<(Allocation, ExactStats), BeamsError> {
    let m_max = ch.chains.min(ch.beams);
    if ch.chains > MAX_EXACT_CHAINS {
        return Err(BeamsError::TooMany {
            what: "chains for the exact search",
            max: MAX_EXACT_CHAINS,
            value: ch.chains,
        });
    }
    let sets = sets_count(ch.beams, m_max);
    if sets > MAX_EXACT_SETS {
        return Err(BeamsError::TooMany {
            what: "beam sets for the exact search",
            max: MAX_EXACT_SETS as usize,
            value: sets.min(usize::MAX as u64) as usize,
        });
    }
    let mut greedy = Greedy::new();
    greedy.run(ch, mapping);
    let mut best = ch.evaluate_unchecked(greedy.streams());
    let mut stats = ExactStats::default();
    // Each beam's best interference-free spectral efficiency: the bound's terms.
    let alone: Vec<f64> =
        (0..ch.beams).map(|b| (0..ch.devices).map(|i| ch.theta_alone_bps(b, i)).fold(0.0, f64::max)).collect();
    let mut set: Vec<usize> = Vec::with_capacity(m_max);
    for size in 1..=m_max {
        set.clear();
        set.extend(0..size);
        loop {
            stats.sets += 1;
            let bound: f64 = set.iter().map(|&b| alone[b]).sum();
            if bound > best.total_bps * (1.0 + 1e-12) {
                stats.ilps += 1;
                let streams = solve_set(ch, &set, mapping)?;
                let a = ch.evaluate_unchecked(&streams);
                if a.total_bps > best.total_bps {
                    best = a;
                }
            }
            if !next_combination(&mut set, ch.beams) {
                break;
            }
        }
    }
    Ok((best, stats))
}

/// Advances `set` (increasing indices below `n`) to the next combination of its size.
fn next_combination(set: &mut [usize], n: usize) -> bool {
    let k = set.len();
    for i in (0..k).rev() {
        if set[i] < n - k + i {
            set[i] += 1;
            for j in i + 1..k {
                set[j] = set[j - 1] + 1;
            }
            return true;
        }
    }
    false
}

/// A column of the set-partitioning ILP: device `device` served by the beams of `mask`
/// (bits over the positions in the beam set), worth `value` bit/s/Hz.
#[derive(Debug, Clone, Copy)]
struct Column {
    device: usize,
    mask: u32,
    value: f64,
}

/// Step 2 of the module docs on the beam set `set`: the best streams using beams of it.
fn solve_set(ch: &Channel, set: &[usize], mapping: Mapping) -> Result<Vec<Stream>, BeamsError> {
    let m = set.len();
    let full = (1u32 << m) - 1;
    let mut cols = Vec::new();
    for device in 0..ch.devices {
        for mask in 1..=full {
            if mapping == Mapping::OneToOne && mask.count_ones() != 1 {
                continue;
            }
            let interference: f64 =
                (0..m).filter(|j| mask & (1 << j) == 0).map(|j| ch.crosstalk_w(set[j], device)).sum();
            // Spectral efficiency keeps the solver's numbers near 1.
            let value: f64 = (0..m)
                .filter(|j| mask & (1 << j) != 0)
                .map(|j| ch.theta_bps(ch.signal_w(set[j], device), interference) / ch.bandwidth_hz)
                .sum();
            if value > 0.0 {
                cols.push(Column { device, mask, value });
            }
        }
    }
    if cols.is_empty() {
        return Ok(Vec::new());
    }
    let mut vars = ProblemVariables::new();
    let z: Vec<Variable> = cols.iter().map(|_| vars.add(variable().binary())).collect();
    let objective: Expression = cols.iter().zip(&z).map(|(c, &v)| c.value * v).sum();
    let mut model = vars.maximise(objective).using(microlp);
    for j in 0..m {
        let e: Expression = cols.iter().zip(&z).filter(|(c, _)| c.mask & (1 << j) != 0).map(|(_, &v)| v).sum();
        model = model.with(e.leq(1.0));
    }
    for device in 0..ch.devices {
        let e: Expression = cols.iter().zip(&z).filter(|(c, _)| c.device == device).map(|(_, &v)| v).sum();
        model = model.with(e.leq(1.0));
    }
    let sol = model.solve().map_err(|e| BeamsError::Solver(e.to_string()))?;
    let mut streams = Vec::with_capacity(m);
    for (c, &v) in cols.iter().zip(&z) {
        if sol.value(v) > 0.5 {
            for (j, &beam) in set.iter().enumerate() {
                if c.mask & (1 << j) != 0 {
                    streams.push(Stream { chain: 0, beam, device: c.device });
                }
            }
        }
    }
    streams.sort_by_key(|s| s.beam);
    for (chain, s) in streams.iter_mut().enumerate() {
        s.chain = chain;
    }
    Ok(streams)
}

/// Every allocation on `ch` under `mapping`, tried one by one: the reference the tests check
/// the ILP against on tiny instances (`O((|B|·|I|)^|R|)`).
pub fn brute_force(ch: &Channel, mapping: Mapping) -> Allocation {
    fn go(ch: &Channel, mapping: Mapping, cur: &mut Vec<Stream>, first_beam: usize, best: &mut Allocation) {
        let a = ch.evaluate_unchecked(cur);
        if a.total_bps > best.total_bps {
            *best = a;
        }
        if cur.len() == ch.chains {
            return;
        }
        // Beams in increasing order: chains are identical, so each set is seen once.
        for b in first_beam..ch.beams {
            for i in 0..ch.devices {
                if mapping == Mapping::OneToOne && cur.iter().any(|s| s.device == i) {
                    continue;
                }
                cur.push(Stream { chain: cur.len(), beam: b, device: i });
                go(ch, mapping, cur, b + 1, best);
                cur.pop();
            }
        }
    }
    let mut best = Allocation { device_bps: vec![0.0; ch.devices], ..Allocation::default() };
    go(ch, mapping, &mut Vec::new(), 0, &mut best);
    best
}
