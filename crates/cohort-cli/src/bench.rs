//! `cohort bench NAME`.

use crate::python;
use clap::{Args, Subcommand};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

#[derive(Debug, Args)]
pub struct BenchArgs {
    #[command(subcommand)]
    which: Which,
}

#[derive(Debug, Subcommand)]
enum Which {
    /// GF(2^8) kernels, sliding-window encode/decode, and the `rlnc` crate's decoder.
    Coding(CodingArgs),
    /// Default vs tuned OS configuration (Python `cohort.tune bench`).
    #[command(disable_help_flag = true)]
    Tune {
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
}

#[derive(Debug, Args)]
struct CodingArgs {
    /// Print the report as JSON (otherwise a short summary).
    #[arg(long)]
    json: bool,
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Source symbols in the measured stream.
    #[arg(long, default_value_t = 6400)]
    symbols: u64,
    /// Minimum measuring time per figure, in milliseconds.
    #[arg(long, default_value_t = 500)]
    min_time_ms: u64,
    /// Iid loss on the measured stream.
    #[arg(long, default_value_t = 0.10)]
    loss: f64,
    /// Also write the JSON to this file and a bar chart next to it (same name, `.png`;
    /// needs Python with matplotlib).
    #[arg(long)]
    out: Option<PathBuf>,
}

#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    #[error("invalid argument: {0}")]
    Invalid(String),
    #[error("writing {path}: {source}")]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(transparent)]
    Python(#[from] python::PythonError),
    #[error("plotting failed; the JSON is at {0}")]
    Plot(PathBuf),
}

pub fn run(args: BenchArgs) -> Result<ExitCode, BenchError> {
    match args.which {
        Which::Coding(a) => coding(&a),
        Which::Tune { args } => {
            let mut full = vec!["bench".to_string()];
            full.extend(args);
            Ok(python::run_module("cohort.tune", &full)?)
        }
    }
}

fn coding(a: &CodingArgs) -> Result<ExitCode, BenchError> {
    if !(0.0..0.9).contains(&a.loss) {
        return Err(BenchError::Invalid(format!(
            "--loss {} must be in [0, 0.9)",
            a.loss
        )));
    }
    if a.symbols == 0 {
        return Err(BenchError::Invalid("--symbols must be positive".into()));
    }
    let p = cohort_bench::coding::CodingParams {
        seed: a.seed,
        symbols: a.symbols,
        loss: a.loss,
        min_time: Duration::from_millis(a.min_time_ms),
        ..Default::default()
    };
    let report = cohort_bench::coding::run(&p);
    let json = serde_json::to_string_pretty(&report).unwrap_or_default();
    if a.json {
        println!("{json}");
    } else {
        println!(
            "kernel {}: axpy {:.2} Gbit/s ({:.1}x scalar) | encode w64 {:.2} Gbit/s | decode w64 {:.2} Gbit/s | rlnc k64 {:.2} Gbit/s | decode/rlnc {:.2}x",
            report.kernel,
            report.axpy_simd_gbps,
            report.axpy_simd_over_scalar,
            report.encode_gbps_w64,
            report.decode_gbps_w64,
            report.rlnc_crate_decode_gbps_k64,
            report.decode_vs_rlnc_ratio
        );
    }
    if let Some(path) = &a.out {
        write_and_plot(path, &json, "coding")?;
    }
    Ok(ExitCode::SUCCESS)
}

/// Writes the JSON report and renders its PNG with `python -m cohort.plot KIND JSON PNG`.
fn write_and_plot(path: &PathBuf, json: &str, kind: &str) -> Result<(), BenchError> {
    std::fs::write(path, json).map_err(|source| BenchError::Write {
        path: path.clone(),
        source,
    })?;
    let png = path.with_extension("png");
    let args = [
        kind.to_string(),
        path.display().to_string(),
        png.display().to_string(),
    ];
    match python::run_module("cohort.plot", &args)? {
        c if c == ExitCode::SUCCESS => Ok(()),
        _ => Err(BenchError::Plot(path.clone())),
    }
}
