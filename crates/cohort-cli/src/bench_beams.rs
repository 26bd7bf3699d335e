//! `cohort bench beams`: RF-chain and beam allocation (seed 001 Algorithm 1) and its join to
//! multipath (see `cohort_bench::beams`).

use crate::bench::{BenchError, write_and_plot};
use crate::progress::Progress;
use clap::Args;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Debug, Args)]
pub struct BeamsArgs {
    /// Print the report as JSON (otherwise a short summary).
    #[arg(long)]
    json: bool,
    /// Random instances of greedy against the optimum (and one-to-many against one-to-one).
    #[arg(long, default_value_t = 1000)]
    instances: usize,
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Milliseconds spent timing each size of the time-per-round sweeps.
    #[arg(long, default_value_t = 200)]
    timing_ms: u64,
    /// End-to-end repetitions (each from another point of the drive) and their length, s.
    #[arg(long, default_value_t = 5)]
    reps: u64,
    #[arg(long, default_value_t = 30.0)]
    mobility_s: f64,
    /// A team file (see scenarios/beams_team.toml) instead of the default team.
    #[arg(long)]
    team: Option<PathBuf>,
    /// Also write the JSON next to this PNG.
    #[arg(long)]
    plot: Option<PathBuf>,
}

pub fn run(a: &BeamsArgs) -> Result<ExitCode, BenchError> {
    let team = match &a.team {
        Some(path) => {
            let text =
                std::fs::read_to_string(path).map_err(|e| BenchError::Invalid(format!("{}: {e}", path.display())))?;
            Some(cohort_sim::beams::TeamFile::from_toml(&text).map_err(|e| BenchError::Invalid(e.to_string()))?)
        }
        None => None,
    };
    let p = cohort_bench::beams::BeamsParams {
        instances: a.instances,
        seed: a.seed,
        timing_ms: a.timing_ms,
        reps: a.reps,
        mobility_s: a.mobility_s,
        team,
    };
    let progress = Progress::new("beams", a.json);
    let r = cohort_bench::beams::run_bench(&p, |s| progress.step(s)).map_err(BenchError::Invalid)?;
    let json = serde_json::to_string_pretty(&r).unwrap_or_default();
    if a.json {
        println!("{json}");
    } else {
        for (k, v) in r["summary"].as_object().into_iter().flatten() {
            println!("{k:<36} {v}");
        }
        println!("goals: {}", r["goals"]);
        println!("replay: {}", r["command"].as_str().unwrap_or_default());
    }
    if let Some(png) = &a.plot {
        write_and_plot(&png.with_extension("json"), &json, "beams")?;
    }
    Ok(ExitCode::SUCCESS)
}
