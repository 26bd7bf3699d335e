//! Link traces: a link's parameters over time, `Some(params)` while it is up and `None` while
//! it is out. The simulator's multipath paths and the testbed's point-to-point links follow
//! them; `cohort_sim::mobility` generates them for a robot moving past access points, and
//! [`parse_trace`] reads a recorded one (a field measurement, another tool's output).

use crate::link::{LinkParams, LossModel};
use std::time::Duration;

/// A link over time: `(time from the trace's start, state)` at every change, times
/// increasing; `Some(params)` while the link is up (a radio associated), `None` while it is
/// out (out of range or handing over).
pub type Trace = Vec<(Duration, Option<LinkParams>)>;

/// A line of a trace file that cannot be read.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("trace line {line}: {why}")]
pub struct TraceError {
    pub line: usize,
    pub why: String,
}

/// Reads a recorded link trace (a field measurement, another tool's output): one line per
/// change, `t_ms,rate_mbps,owd_ms,loss` while the link is up or `t_ms,down` while it is out;
/// times strictly increasing; `#` starts a comment. Every bad line is a [`TraceError`] naming
/// it, never a panic.
pub fn parse_trace(text: &str) -> Result<Trace, TraceError> {
    let mut out: Trace = Vec::new();
    for (k, raw) in text.lines().enumerate() {
        let line = raw.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let err = |why: String| TraceError { line: k + 1, why };
        let fields: Vec<&str> = line.split(',').map(str::trim).collect();
        let num = |i: usize, name: &str| -> Result<f64, TraceError> {
            let v: f64 = fields[i].parse().map_err(|_| err(format!("{name} `{}` is not a number", fields[i])))?;
            if v.is_finite() && v >= 0.0 {
                Ok(v)
            } else {
                Err(err(format!("{name} {v} must be finite and not negative")))
            }
        };
        // Times and delays past a day are refused (Duration cannot hold every f64, and no
        // trace needs them).
        let ms = |v: f64, name: &str| -> Result<Duration, TraceError> {
            if v > 86_400_000.0 {
                return Err(err(format!("{name} {v} is longer than a day")));
            }
            Ok(Duration::from_secs_f64(v / 1e3))
        };
        let t = ms(num(0, "t_ms")?, "t_ms")?;
        if out.last().is_some_and(|(prev, _)| *prev >= t) {
            return Err(err("times must increase".into()));
        }
        let state = match fields.len() {
            2 if fields[1] == "down" => None,
            4 => {
                let (rate, owd, loss) = (num(1, "rate_mbps")?, num(2, "owd_ms")?, num(3, "loss")?);
                if rate <= 0.0 || rate > 100_000.0 || loss > 1.0 {
                    return Err(err(format!("rate {rate} must be in (0, 100 000] Mbit/s and loss {loss} at most 1")));
                }
                let p = LinkParams {
                    loss: LossModel::Iid { p: loss },
                    ..LinkParams::clean(ms(owd, "owd_ms")?, (rate * 1e6) as u64)
                };
                p.validate().map_err(|e| err(e.to_string()))?;
                Some(p)
            }
            _ => return Err(err("expected `t_ms,rate_mbps,owd_ms,loss` or `t_ms,down`".into())),
        };
        out.push((t, state));
    }
    Ok(out)
}
