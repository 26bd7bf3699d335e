//! `cohort bench lrt-grid`: LRT, seed 004's block scheme and selective-repeat ARQ over the
//! whole space of field links: one-way delay × loss (iid and Gilbert-Elliott bursts) × message
//! interval × message size, each point run several times with different seeds.
//!
//! Every run of a point carries the same messages over the same simulated link (same seed) for
//! each scheme ([`crate::lrt::run_point`]); a point's delay percentiles pool the measured
//! messages of all its runs, and its p99 also gets a 95% interval over the per-run p99s. The
//! summary says at how many points each scheme has the lowest p99 (within 2% counts) and how
//! much more LRT puts on the wire than ARQ.

use crate::lrt::{LrtParams, PointFigures, SchemeFigures, run_point};
use crate::stats::{DelayFigures, mean_ci95, round};
use cohort_medium::link::LossModel;
use cohort_proto::lrt::Config;
use serde::Serialize;

/// A loss process of the grid.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum GridLoss {
    Iid {
        p: f64,
    },
    /// Gilbert-Elliott with every packet lost in the bad state, none in the good one: mean
    /// burst `burst` packets, long-run loss `mean`.
    Burst {
        mean: f64,
        burst: f64,
    },
}

impl GridLoss {
    pub fn model(&self) -> LossModel {
        match *self {
            GridLoss::Iid { p } => LossModel::Iid { p },
            GridLoss::Burst { mean, burst } => {
                let p_bg = 1.0 / burst.max(1.0);
                LossModel::GilbertElliott { p_gb: mean / (1.0 - mean) * p_bg, p_bg, loss_good: 0.0, loss_bad: 1.0 }
            }
        }
    }

    fn label(&self) -> String {
        match *self {
            GridLoss::Iid { p } => format!("{}% iid", p * 100.0),
            GridLoss::Burst { mean, burst } => format!("{}% bursts of {burst}", mean * 100.0),
        }
    }
}

/// What the grid covers.
#[derive(Debug, Clone, Serialize)]
pub struct GridParams {
    pub owds_ms: Vec<f64>,
    pub losses: Vec<GridLoss>,
    pub intervals_ms: Vec<f64>,
    /// Message size at every point.
    pub size: usize,
    /// Extra points with this size at `small_interval_ms` (every delay and loss).
    pub small_size: usize,
    pub small_interval_ms: f64,
    /// Messages per run, and runs per point (seeds `seed`, `seed + 1`, ...).
    pub count: u64,
    pub reps: u64,
    pub seed: u64,
    pub rate_mbps: f64,
    pub warmup_ms: f64,
    /// Worker threads (points are independent; results do not depend on it).
    #[serde(skip)]
    pub threads: usize,
}

impl Default for GridParams {
    fn default() -> Self {
        GridParams {
            owds_ms: vec![5.0, 25.0, 50.0, 100.0],
            losses: vec![
                GridLoss::Iid { p: 0.02 },
                GridLoss::Iid { p: 0.05 },
                GridLoss::Iid { p: 0.10 },
                GridLoss::Iid { p: 0.20 },
                GridLoss::Burst { mean: 0.05, burst: 3.0 },
                GridLoss::Burst { mean: 0.10, burst: 3.0 },
            ],
            intervals_ms: vec![1.0, 5.0, 10.0],
            size: 1024,
            small_size: 256,
            small_interval_ms: 1.0,
            count: 10_000,
            reps: 3,
            seed: 1,
            rate_mbps: 100.0,
            warmup_ms: 1000.0,
            threads: std::thread::available_parallelism().map_or(1, |n| n.get()),
        }
    }
}

/// One scheme at one point, pooled over the point's runs.
#[derive(Debug, Clone, Serialize)]
pub struct SchemeSummary {
    #[serde(flatten)]
    pub delay: DelayFigures,
    /// Mean and 95% half-width of the per-run p99s.
    pub p99_run_mean_ms: f64,
    pub p99_ci95_ms: f64,
    pub overhead: f64,
    pub delivered: u64,
    pub sent: u64,
    pub in_order: bool,
}

impl SchemeSummary {
    fn of(runs: &[&SchemeFigures], owd_ms: f64) -> Self {
        let pooled = SchemeFigures::pooled(runs, owd_ms);
        let p99s: Vec<f64> = runs.iter().map(|r| r.delay.p99_ms).collect();
        let (m, h) = mean_ci95(&p99s);
        let d = pooled.delay;
        let r3 = |x: f64| round(x, 3);
        SchemeSummary {
            delay: DelayFigures {
                p50_ms: r3(d.p50_ms),
                p90_ms: r3(d.p90_ms),
                p99_ms: r3(d.p99_ms),
                p999_ms: r3(d.p999_ms),
                max_ms: r3(d.max_ms),
                share_at_owd: round(d.share_at_owd, 4),
            },
            p99_run_mean_ms: r3(m),
            p99_ci95_ms: r3(h),
            overhead: round(pooled.overhead, 4),
            delivered: pooled.delivered,
            sent: pooled.sent,
            in_order: pooled.in_order && pooled.duplicates == 0,
        }
    }
}

/// One grid point.
#[derive(Debug, Clone, Serialize)]
pub struct GridPoint {
    pub owd_ms: f64,
    pub loss: GridLoss,
    pub loss_label: String,
    pub interval_ms: f64,
    pub size: usize,
    pub lrt: SchemeSummary,
    pub block: SchemeSummary,
    pub arq: SchemeSummary,
    /// The scheme with the lowest pooled p99.
    pub lowest_p99: &'static str,
    /// LRT's p99 is within 2% of the lowest.
    pub lrt_lowest: bool,
    pub lrt_overhead_minus_arq: f64,
}

/// Points each scheme wins.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Wins {
    pub lrt: usize,
    pub block: usize,
    pub arq: usize,
}

/// The report `cohort bench lrt-grid --json` prints.
#[derive(Debug, Clone, Serialize)]
pub struct GridReport {
    pub points: usize,
    /// Points where LRT's p99 is the lowest of the three (within 2%).
    pub lrt_lowest_p99_points: usize,
    /// Largest LRT overhead minus ARQ's over the points with message interval ≤ 5 ms.
    pub max_overhead_minus_arq: f64,
    /// Largest LRT overhead at the 10 ms interval.
    pub max_overhead_10ms: f64,
    /// Every point delivered every message exactly once, in order, for every scheme.
    pub all_complete_in_order: bool,
    pub wins: Wins,
    /// The point LRT was tuned on (50 ms, 10% iid, 1 ms, 1 KiB), if the grid has it.
    pub tuned_point: Option<GridPoint>,
    pub grid: Vec<GridPoint>,
    pub runs_pooled_per_point: u64,
    /// LRT measured the bandwidth instead of pacing at the link's rate.
    pub estimate_rate: bool,
    pub params: GridParams,
    pub command: String,
}

fn point_params(g: &GridParams, owd_ms: f64, loss: GridLoss, interval_ms: f64, size: usize) -> Vec<LrtParams> {
    (0..g.reps)
        .map(|r| LrtParams {
            owd_ms,
            loss: loss.model(),
            rate_mbps: g.rate_mbps,
            size,
            interval_ms,
            count: g.count,
            seed: g.seed + r,
            warmup_ms: g.warmup_ms,
            reps: 1,
        })
        .collect()
}

/// Every point of the grid, in a fixed order: (one-way delay, loss, interval, size).
pub fn points(g: &GridParams) -> Vec<(f64, GridLoss, f64, usize)> {
    let mut v = Vec::new();
    for &owd in &g.owds_ms {
        for &loss in &g.losses {
            for &iv in &g.intervals_ms {
                v.push((owd, loss, iv, g.size));
            }
            if g.small_size != g.size || !g.intervals_ms.contains(&g.small_interval_ms) {
                v.push((owd, loss, g.small_interval_ms, g.small_size));
            }
        }
    }
    v
}

fn summarise(owd_ms: f64, loss: GridLoss, interval_ms: f64, size: usize, runs: &[PointFigures]) -> GridPoint {
    let lrt = SchemeSummary::of(&runs.iter().map(|r| &r.lrt).collect::<Vec<_>>(), owd_ms);
    let block = SchemeSummary::of(&runs.iter().map(|r| &r.block).collect::<Vec<_>>(), owd_ms);
    let arq = SchemeSummary::of(&runs.iter().map(|r| &r.arq).collect::<Vec<_>>(), owd_ms);
    let all = [("lrt", &lrt), ("block", &block), ("arq", &arq)];
    let best = all.iter().min_by(|a, b| a.1.delay.p99_ms.total_cmp(&b.1.delay.p99_ms)).map_or("lrt", |b| b.0);
    let others = block.delay.p99_ms.min(arq.delay.p99_ms);
    GridPoint {
        owd_ms,
        loss,
        loss_label: loss.label(),
        interval_ms,
        size,
        lowest_p99: best,
        lrt_lowest: lrt.delay.p99_ms <= others * 1.02,
        lrt_overhead_minus_arq: round(lrt.overhead - arq.overhead, 4),
        lrt,
        block,
        arq,
    }
}

/// Runs the grid with LRT configured by `lrt` (its `rate_bps` is set from the grid's link
/// rate); `progress` hears of each point as it finishes.
pub fn run(g: &GridParams, lrt: &Config, progress: impl Fn(&GridPoint) + Sync) -> Result<GridReport, String> {
    if g.reps == 0 || g.count == 0 {
        return Err("reps and count must be positive".into());
    }
    let cfg = Config { rate_bps: (g.rate_mbps * 1e6) as u64, ..lrt.clone() };
    cfg.validate().map_err(|e| format!("lrt config: {e}"))?;
    let todo = points(g);
    let next = std::sync::atomic::AtomicUsize::new(0);
    let results = std::sync::Mutex::new(vec![None; todo.len()]);
    std::thread::scope(|s| -> Result<(), String> {
        let workers: Vec<_> = (0..g.threads.clamp(1, todo.len().max(1)))
            .map(|_| {
                s.spawn(|| -> Result<(), String> {
                    loop {
                        let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        let Some(&(owd, loss, iv, size)) = todo.get(i) else {
                            return Ok(());
                        };
                        let runs = point_params(g, owd, loss, iv, size)
                            .iter()
                            .map(|p| run_point(p, &cfg))
                            .collect::<Result<Vec<_>, _>>()?;
                        let pt = summarise(owd, loss, iv, size, &runs);
                        progress(&pt);
                        results.lock().map_err(|_| "a worker panicked")?[i] = Some(pt);
                    }
                })
            })
            .collect();
        for w in workers {
            w.join().map_err(|_| "a worker panicked".to_string())??;
        }
        Ok(())
    })?;
    let grid: Vec<GridPoint> = results.into_inner().map_err(|_| "a worker panicked")?.into_iter().flatten().collect();
    let mut wins = Wins::default();
    for p in &grid {
        match p.lowest_p99 {
            "block" => wins.block += 1,
            "arq" => wins.arq += 1,
            _ => wins.lrt += 1,
        }
    }
    let over = |f: &dyn Fn(&GridPoint) -> bool, v: &dyn Fn(&GridPoint) -> f64| {
        grid.iter().filter(|p| f(p)).map(v).fold(f64::NAN, f64::max)
    };
    Ok(GridReport {
        points: grid.len(),
        lrt_lowest_p99_points: grid.iter().filter(|p| p.lrt_lowest).count(),
        max_overhead_minus_arq: over(&|p| p.interval_ms <= 5.0, &|p| p.lrt_overhead_minus_arq),
        max_overhead_10ms: over(&|p| p.interval_ms >= 10.0, &|p| p.lrt.overhead),
        all_complete_in_order: grid
            .iter()
            .all(|p| [&p.lrt, &p.block, &p.arq].iter().all(|s| s.in_order && s.delivered == s.sent && s.sent > 0)),
        wins,
        tuned_point: grid
            .iter()
            .find(|p| p.owd_ms == 50.0 && p.loss == GridLoss::Iid { p: 0.10 } && p.interval_ms == 1.0 && p.size == 1024)
            .cloned(),
        runs_pooled_per_point: g.reps,
        command: format!(
            "cohort bench lrt-grid --json --count {} --reps {} --seed {}{} --out FILE.json",
            g.count,
            g.reps,
            g.seed,
            if lrt.estimate_rate { " --estimate-rate" } else { "" }
        ),
        estimate_rate: lrt.estimate_rate,
        params: g.clone(),
        grid,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_small_grid_reports_every_point_complete_and_in_order() {
        let g = GridParams {
            owds_ms: vec![5.0, 50.0],
            losses: vec![GridLoss::Iid { p: 0.1 }, GridLoss::Burst { mean: 0.1, burst: 3.0 }],
            intervals_ms: vec![1.0, 10.0],
            count: 300,
            reps: 2,
            warmup_ms: 50.0,
            ..GridParams::default()
        };
        let r = run(&g, &Config::default(), |_| {}).unwrap();
        assert_eq!(r.points, 2 * 2 * 3);
        assert!(r.all_complete_in_order);
        assert_eq!(r.wins.lrt + r.wins.block + r.wins.arq, r.points);
        assert!(r.tuned_point.is_some(), "50 ms, 10% iid, 1 ms, 1 KiB is in this grid");
        let v = serde_json::to_value(&r).unwrap();
        for k in ["points", "lrt_lowest_p99_points", "max_overhead_minus_arq"] {
            assert!(v[k].is_number(), "{k}");
        }
        assert!(v["grid"][0]["arq"]["p99_ci95_ms"].is_number());
    }

    #[test]
    fn burst_loss_has_the_mean_and_burst_asked_for() {
        let LossModel::GilbertElliott { p_bg, .. } = (GridLoss::Burst { mean: 0.05, burst: 3.0 }).model() else {
            panic!("a burst is Gilbert-Elliott");
        };
        assert!((p_bg - 1.0 / 3.0).abs() < 1e-12);
        assert!(((GridLoss::Burst { mean: 0.05, burst: 3.0 }).model().mean() - 0.05).abs() < 1e-12);
    }

    #[test]
    fn no_runs_is_an_error() {
        assert!(run(&GridParams { reps: 0, ..GridParams::default() }, &Config::default(), |_| {}).is_err());
    }
}
