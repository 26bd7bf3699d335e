//! `cohort sim run SCENARIO (--seed N | --seeds A..B) [--json] [--trace FILE]`.

use crate::progress::Progress;
use clap::{Args, Subcommand};
use cohort_bench::progress::Step;
use cohort_sim::{Scenario, ScenarioError};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Debug, Args)]
pub struct SimArgs {
    #[command(subcommand)]
    cmd: SimCmd,
}

#[derive(Debug, Subcommand)]
enum SimCmd {
    /// Run a scenario with one seed, or sweep a range of seeds until the first failure.
    Run {
        scenario: PathBuf,
        #[arg(long, default_value_t = 1, conflicts_with = "seeds")]
        seed: u64,
        /// A range `A..B` (B excluded): stops at the first failing seed and prints how to replay it.
        #[arg(long)]
        seeds: Option<String>,
        #[arg(long)]
        json: bool,
        /// Write the trace (JSON lines) of a single-seed run here.
        #[arg(long)]
        trace: Option<PathBuf>,
        /// Write every packet of a single-seed run to this pcap file (link type USER0).
        #[arg(long)]
        pcap: Option<PathBuf>,
    },
}

#[derive(Debug, thiserror::Error)]
pub enum SimError {
    #[error(transparent)]
    Scenario(#[from] ScenarioError),
    #[error("--seeds must look like A..B with A < B, got {0}")]
    Range(String),
    #[error("writing the trace: {0}")]
    Trace(#[from] std::io::Error),
}

fn range(s: &str) -> Result<std::ops::Range<u64>, SimError> {
    let (a, b) = s.split_once("..").ok_or_else(|| SimError::Range(s.into()))?;
    let (a, b): (u64, u64) =
        (a.parse().map_err(|_| SimError::Range(s.into()))?, b.parse().map_err(|_| SimError::Range(s.into()))?);
    if a >= b {
        return Err(SimError::Range(s.into()));
    }
    Ok(a..b)
}

pub fn run(a: &SimArgs) -> Result<ExitCode, SimError> {
    let SimCmd::Run { scenario, seed, seeds, json, trace, pcap } = &a.cmd;
    let s = Scenario::load(scenario)?;
    let replay = |seed: u64| format!("cohort sim run {} --seed {seed}", scenario.display());
    if let Some(r) = seeds {
        let r = range(r)?;
        let total = r.end - r.start;
        let progress = Progress::bar_only("sim", *json);
        for seed in r.clone() {
            let what = format!("seed {seed}");
            progress.step(&Step { done: seed - r.start, total, what: &what });
            let o = cohort_sim::run(&s, seed, cohort_sim::Recorder::default());
            if !o.ok() {
                drop(progress);
                eprintln!("seed {seed} FAILED: {}", o.violations.join("; "));
                eprintln!("replay: {}", replay(seed));
                if *json {
                    println!("{}", serde_json::to_string_pretty(&o).unwrap_or_default());
                }
                return Ok(ExitCode::FAILURE);
            }
        }
        println!("{total} seeds passed ({})", s.name);
        return Ok(ExitCode::SUCCESS);
    }
    let open = |p: &Option<PathBuf>| -> Result<Option<std::io::BufWriter<std::fs::File>>, SimError> {
        Ok(match p {
            Some(p) => Some(std::io::BufWriter::new(std::fs::File::create(p)?)),
            None => None,
        })
    };
    let (mut tf, mut pf) = (open(trace)?, open(pcap)?);
    let rec = cohort_sim::Recorder {
        trace: tf.as_mut().map(|f| f as &mut dyn std::io::Write),
        pcap: pf.as_mut().map(|f| f as &mut dyn std::io::Write),
    };
    let o = cohort_sim::run(&s, *seed, rec);
    for f in [tf.as_mut(), pf.as_mut()].into_iter().flatten() {
        std::io::Write::flush(f)?;
    }
    if *json {
        println!("{}", serde_json::to_string_pretty(&o).unwrap_or_default());
    } else {
        println!(
            "{} seed {}: trace {} | {} packets, {} dropped by faults, {:.2} s simulated",
            o.scenario, o.seed, o.trace_hash, o.packets, o.packets_dropped_by_faults, o.simulated_s
        );
        for (i, f) in o.flows.iter().enumerate() {
            println!(
                "  flow {i}: {}/{} delivered, in order {}, p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms",
                f.delivered, f.sent, f.in_order, f.p50_ms, f.p99_ms, f.max_ms
            );
        }
    }
    if o.ok() {
        Ok(ExitCode::SUCCESS)
    } else {
        eprintln!("FAILED: {}\nreplay: {}", o.violations.join("; "), replay(*seed));
        Ok(ExitCode::FAILURE)
    }
}
