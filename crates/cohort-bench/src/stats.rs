//! Small helpers for timing and distributions.

use serde::Serialize;
use serde_json::{Map, Value, json};
use std::time::{Duration, Instant};

/// Runs `f` repeatedly for at least `min_time` (and at least `min_reps` times) after one
/// warm-up call, returning each call's duration.
pub fn time_reps(min_time: Duration, min_reps: usize, mut f: impl FnMut()) -> Vec<Duration> {
    f();
    let start = Instant::now();
    let mut out = Vec::new();
    while out.len() < min_reps || start.elapsed() < min_time {
        let t = Instant::now();
        f();
        out.push(t.elapsed());
    }
    out
}

/// The median of `v` (which is sorted in place); zero for an empty slice.
pub fn median(v: &mut [Duration]) -> Duration {
    if v.is_empty() {
        return Duration::ZERO;
    }
    v.sort_unstable();
    v[v.len() / 2]
}

/// Gigabits per second for `bytes` processed in `d`.
pub fn gbps(bytes: usize, d: Duration) -> f64 {
    if d.is_zero() {
        return 0.0;
    }
    bytes as f64 * 8.0 / d.as_secs_f64() / 1e9
}

/// Rounds to `digits` decimal places for readable JSON.
pub fn round(x: f64, digits: i32) -> f64 {
    let p = 10f64.powi(digits);
    (x * p).round() / p
}

/// Arithmetic mean; 0 for an empty slice.
pub fn mean(v: &[f64]) -> f64 {
    v.iter().sum::<f64>() / v.len().max(1) as f64
}

/// Student's t quantile for a two-sided 95% interval with `df` degrees of freedom (table for
/// 1-30, 1.96 beyond).
fn t95(df: usize) -> f64 {
    const T: [f64; 30] = [
        12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145, 2.131,
        2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042,
    ];
    T.get(df.wrapping_sub(1)).copied().unwrap_or(1.96)
}

/// Mean of `v` and the half-width of its 95% confidence interval (Student's t; 0 with fewer
/// than two values).
pub fn mean_ci95(v: &[f64]) -> (f64, f64) {
    let m = mean(v);
    if v.len() < 2 {
        return (m, 0.0);
    }
    let var = v.iter().map(|x| (x - m).powi(2)).sum::<f64>() / (v.len() - 1) as f64;
    (m, t95(v.len() - 1) * (var / v.len() as f64).sqrt())
}

/// The `q`-quantile of sorted `v` (the element at `⌊len·q⌋`); NaN for an empty slice.
pub fn quantile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    sorted[((sorted.len() as f64 * q) as usize).min(sorted.len() - 1)]
}

/// At most about `points` evenly spaced elements of sorted `v`, always with the last: enough
/// for a CDF, small in a JSON report.
pub fn thin(sorted: &[f64], points: usize) -> Vec<f64> {
    let step = sorted.len().div_ceil(points.max(1)).max(1);
    let mut out: Vec<f64> = sorted.iter().step_by(step).copied().collect();
    if !sorted.is_empty() && !(sorted.len() - 1).is_multiple_of(step) {
        out.extend(sorted.last());
    }
    out
}

/// Distribution figures of values in ms (`count`, mean, p50, p99, max and a thinned CDF that
/// [`pool_runs`] pools across runs); `{"count": 0}` when there are none.
pub fn dist_ms(mut v: Vec<f64>) -> serde_json::Value {
    v.sort_by(f64::total_cmp);
    let Some(&max) = v.last() else { return serde_json::json!({ "count": 0 }) };
    serde_json::json!({
        "count": v.len(),
        "mean_ms": round(mean(&v), 3),
        "p50_ms": round(quantile(&v, 0.5), 3),
        "p99_ms": round(quantile(&v, 0.99), 3),
        "max_ms": round(max, 3),
        "cdf_ms": thin(&v, CDF_POINTS).into_iter().map(|x| round(x, 3)).collect::<Vec<_>>(),
    })
}

/// The distribution of per-message delays every transport benchmark reports.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct DelayFigures {
    pub p50_ms: f64,
    pub p90_ms: f64,
    pub p99_ms: f64,
    pub p999_ms: f64,
    pub max_ms: f64,
    /// Share of the delays at or below the one-way delay + 1 ms.
    pub share_at_owd: f64,
}

impl DelayFigures {
    /// Figures of sorted delays `d` (ms) on a path whose one-way delay is `owd_ms`.
    pub fn of(d: &[f64], owd_ms: f64) -> Self {
        DelayFigures {
            p50_ms: quantile(d, 0.5),
            p90_ms: quantile(d, 0.9),
            p99_ms: quantile(d, 0.99),
            p999_ms: quantile(d, 0.999),
            max_ms: d.last().copied().unwrap_or(f64::NAN),
            share_at_owd: d.iter().filter(|&&x| x <= owd_ms + 1.0).count() as f64 / d.len().max(1) as f64,
        }
    }
}

/// Mean of per-run values and the half-width of its 95% interval.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct MeanCi {
    pub mean: f64,
    pub ci95: f64,
    pub runs: usize,
}

impl MeanCi {
    pub fn of(v: &[f64]) -> Self {
        let (m, h) = mean_ci95(v);
        MeanCi { mean: round(m, 4), ci95: round(h, 4), runs: v.len() }
    }
}

/// Pools the same-shaped JSON reports of repeated runs into one report of that shape:
///
/// * a number becomes the runs' mean, with `KEY_ci95` beside it (the half-width of its 95%
///   interval, Student's t) where the runs differ (a number every run has alike stays as it
///   is); a `count` becomes the runs' sum;
/// * a list of numbers named `cdf_ms` (a distribution's thinned quantiles) becomes the pooled
///   distribution's, any other list with numbers in it the runs' items one after the other;
/// * a list of objects is pooled element by element, an object key by key;
/// * an object that reports an `error` in some runs is pooled over the others and says how
///   many failed (`failed_runs`) and why (`errors`);
/// * anything else (strings, booleans) is the first run's.
pub fn pool_runs(runs: &[&Value]) -> Value {
    pool_at(runs, "")
}

fn pool_at(runs: &[&Value], key: &str) -> Value {
    let ok: Vec<&Value> = runs.iter().copied().filter(|v| v.get("error").is_none()).collect();
    let Some(first) = ok.first() else { return runs.first().map_or(Value::Null, |v| (*v).clone()) };
    match first {
        Value::Number(_) => {
            let xs: Vec<f64> = ok.iter().filter_map(|v| v.as_f64()).collect();
            if key == "count" {
                let whole: Option<Vec<u64>> = ok.iter().map(|v| v.as_u64()).collect();
                whole.map_or_else(|| json!(xs.iter().sum::<f64>()), |n| json!(n.iter().sum::<u64>()))
            } else if ok.iter().all(|v| v == first) {
                (*first).clone()
            } else {
                json!(round(mean(&xs), 4))
            }
        }
        Value::Object(fields) => {
            let mut out = Map::new();
            for (k, v) in fields {
                let children: Vec<&Value> = ok.iter().filter_map(|r| r.get(k)).collect();
                out.insert(k.clone(), pool_at(&children, k));
                if v.is_number() && k != "count" && children.iter().any(|c| *c != children[0]) {
                    let xs: Vec<f64> = children.iter().filter_map(|v| v.as_f64()).collect();
                    out.insert(format!("{k}_ci95"), json!(round(mean_ci95(&xs).1, 4)));
                }
            }
            if ok.len() < runs.len() {
                out.insert("failed_runs".into(), json!(runs.len() - ok.len()));
                let errors: Vec<&Value> = runs.iter().filter_map(|r| r.get("error")).collect();
                out.insert("errors".into(), json!(errors));
            }
            Value::Object(out)
        }
        Value::Array(_) => {
            let items = || ok.iter().flat_map(|r| r.as_array().into_iter().flatten());
            if key == "cdf_ms" {
                let mut xs: Vec<f64> = items().filter_map(Value::as_f64).collect();
                xs.sort_by(f64::total_cmp);
                Value::Array(thin(&xs, CDF_POINTS).into_iter().map(|x| json!(x)).collect())
            } else if items().any(Value::is_number) {
                Value::Array(items().cloned().collect())
            } else {
                let len = ok.iter().filter_map(|r| r.as_array().map(Vec::len)).max().unwrap_or(0);
                Value::Array(
                    (0..len).map(|i| pool_at(&ok.iter().filter_map(|r| r.get(i)).collect::<Vec<_>>(), key)).collect(),
                )
            }
        }
        other => (*other).clone(),
    }
}

/// Points of a pooled `cdf_ms`.
pub const CDF_POINTS: usize = 200;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_thinning_and_delay_figures() {
        let d: Vec<f64> = (1..=1000).map(f64::from).collect();
        assert_eq!((quantile(&d, 0.5), quantile(&d, 0.99), quantile(&d, 1.0)), (501.0, 991.0, 1000.0));
        assert!(quantile(&[], 0.5).is_nan());
        let t = thin(&d, 100);
        assert_eq!((t.len(), t[0], *t.last().unwrap()), (101, 1.0, 1000.0));
        assert_eq!(thin(&d[..3], 100), vec![1.0, 2.0, 3.0]);
        let (m, h) = mean_ci95(&[1.0, 2.0, 3.0]);
        assert_eq!(m, 2.0);
        assert!((h - 4.303 * (1.0f64 / 3.0).sqrt()).abs() < 1e-12);
        assert_eq!(mean_ci95(&[5.0]), (5.0, 0.0));
        let f = DelayFigures::of(&d, 99.0);
        assert_eq!((f.p50_ms, f.max_ms, f.share_at_owd), (501.0, 1000.0, 0.1));
    }

    #[test]
    fn pooled_runs_keep_their_shape_with_means_intervals_and_failures() {
        let a = json!({ "sys": { "thr": 4.0, "lat": { "count": 2, "cdf_ms": [1.0, 3.0] } },
                        "crashes": [900.0], "joins": [{ "d": 10.0 }, { "error": "x" }], "name": "a" });
        let b = json!({ "sys": { "thr": 6.0, "lat": { "count": 3, "cdf_ms": [2.0, 4.0] } },
                        "crashes": [950.0, { "error": "no takeover" }], "joins": [{ "d": 20.0 }, { "d": 7.0 }], "name": "b" });
        let c = json!({ "sys": { "error": "bind failed" }, "crashes": [], "joins": [], "name": "c" });
        let p = pool_runs(&[&a, &b, &c]);
        assert_eq!(p["sys"]["thr"], 5.0);
        assert_eq!(p["sys"]["thr_ci95"], round(12.706 * 1.0, 4), "t with one degree of freedom, sd √2, n 2");
        assert_eq!(p["sys"]["lat"]["count"], 5, "counts add up, whole");
        assert!(p["sys"]["lat"].get("count_ci95").is_none());
        assert_eq!(p["sys"]["lat"]["cdf_ms"], json!([1.0, 2.0, 3.0, 4.0]));
        assert_eq!((p["sys"]["failed_runs"].clone(), p["sys"]["errors"].clone()), (json!(1), json!(["bind failed"])));
        assert_eq!(p["crashes"], json!([900.0, 950.0, { "error": "no takeover" }]));
        let ints = pool_runs(&[&json!({ "handled": [3, 4] }), &json!({ "handled": [5] })]);
        assert_eq!(ints, json!({ "handled": [3, 4, 5] }), "items kept as they are");
        assert_eq!(p["joins"][0]["d"], 15.0);
        assert_eq!((p["joins"][1]["d"].clone(), p["joins"][1]["failed_runs"].clone()), (json!(7.0), json!(1)));
        assert_eq!(p["name"], "a");
        let same = pool_runs(&[&json!({ "nodes": 12 }), &json!({ "nodes": 12 })]);
        assert_eq!(same, json!({ "nodes": 12 }), "alike runs: the value as it is, no interval");
        let one = pool_runs(&[&c, &a]);
        assert_eq!((one["sys"]["thr"].clone(), one["crashes"].clone()), (json!(4.0), json!([900.0])));
        assert!(one["sys"].get("thr_ci95").is_none(), "one run has no interval");
        assert_eq!(pool_runs(&[&c, &b])["joins"].as_array().map(Vec::len), Some(2), "an empty first list");
    }
}
