//! `cohort bench migration`: a robot changes address mid-stream (see
//! `cohort_bench::migration`).

use crate::bench::BenchError;
use crate::progress::Progress;
use clap::Args;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Debug, Args)]
pub struct MigrationArgs {
    /// Print the report as JSON (otherwise a short summary).
    #[arg(long)]
    json: bool,
    /// One-way delay the relay adds each way, ms.
    #[arg(long, default_value_t = 10.0)]
    owd_ms: f64,
    /// Each end sends a message this often, ms.
    #[arg(long, default_value_t = 1.0)]
    interval_ms: f64,
    /// Messages each end sends per repetition.
    #[arg(long, default_value_t = 3000)]
    count: u32,
    #[arg(long, default_value_t = 200)]
    size: usize,
    /// Client datagrams carried from the first address before it changes.
    #[arg(long, default_value_t = 1500)]
    rebind_after: usize,
    #[arg(long, default_value_t = 5)]
    reps: u32,
    /// Also write the JSON here.
    #[arg(long)]
    out: Option<PathBuf>,
}

pub fn run(a: &MigrationArgs) -> Result<ExitCode, BenchError> {
    let p = cohort_bench::migration::MigrationParams {
        owd_ms: a.owd_ms,
        interval_ms: a.interval_ms,
        count: a.count,
        size: a.size,
        rebind_after: a.rebind_after,
        reps: a.reps,
    };
    let progress = Progress::new("migration", a.json);
    let r = cohort_bench::migration::bench(&p, |s| progress.step(s)).map_err(BenchError::Invalid)?;
    let json = serde_json::to_string_pretty(&r).unwrap_or_default();
    if a.json {
        println!("{json}");
    } else {
        println!("round trip {} ms", r["rtt_ms"]);
        for dir in ["client_to_server", "server_to_client"] {
            println!("{dir:<17} {}", r[dir]);
        }
        println!("replay: {}", r["command"].as_str().unwrap_or_default());
    }
    if let Some(path) = &a.out {
        std::fs::write(path, &json).map_err(|source| BenchError::Write { path: path.clone(), source })?;
    }
    Ok(ExitCode::SUCCESS)
}
