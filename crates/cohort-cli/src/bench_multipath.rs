//! `cohort bench multipath`: multipath LRT in the simulator (`cohort_bench::multipath`) and,
//! with `--testbed`, against kernel MPTCP on real kernels (`cohort_bench::multipath_testbed`).

use crate::bench::{BenchError, need_root, write_and_plot};
use crate::progress::Progress;
use clap::Args;
use serde_json::{Value, json};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Debug, Args)]
pub struct MultipathArgs {
    /// Print the report as JSON (otherwise a short summary).
    #[arg(long)]
    json: bool,
    /// Repetitions (seeds), systems alternating within each.
    #[arg(long, default_value_t = 3)]
    reps: u64,
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Megabytes of each bulk transfer.
    #[arg(long, default_value_t = 12.0)]
    bulk_mb: f64,
    /// LD-MPSP's queueing-delay target, ms.
    #[arg(long, default_value_t = 20.0)]
    tau_ms: f64,
    /// 64 KiB flows per repetition in the short-flow part.
    #[arg(long, default_value_t = 20)]
    short_flows: u32,
    /// Seconds of each mobility run, and the drone's speed in m/s.
    #[arg(long, default_value_t = 30.0)]
    mobility_s: f64,
    #[arg(long, default_value_t = 10.0)]
    speed_mps: f64,
    /// Also run the testbed half (root): Cohort against kernel MPTCP and each radio alone,
    /// real processes and kernel sockets over two emulated radios.
    #[arg(long)]
    testbed: bool,
    /// Skip the simulator half (with `--testbed`).
    #[arg(long, requires = "testbed")]
    no_sim: bool,
    /// On the testbed, run only the federated start (four radios, a cold robot against one
    /// that starts from the team's statistics), not the comparison with MPTCP.
    #[arg(long, requires = "testbed")]
    federated_only: bool,
    /// Seconds each transfer of the testbed's federated start sends for (the training
    /// transfer twice as long).
    #[arg(long, default_value_t = 8.0)]
    federated_s: f64,
    /// Also write the JSON next to this PNG (goodput per scenario and system).
    #[arg(long)]
    plot: Option<PathBuf>,
}

fn command(a: &MultipathArgs) -> String {
    format!(
        "cohort bench multipath --json --reps {} --seed {} --bulk-mb {} --tau-ms {} --short-flows {} --mobility-s {} --speed-mps {}{}{}{} --federated-s {}",
        a.reps,
        a.seed,
        a.bulk_mb,
        a.tau_ms,
        a.short_flows,
        a.mobility_s,
        a.speed_mps,
        if a.testbed { " --testbed" } else { "" },
        if a.no_sim { " --no-sim" } else { "" },
        if a.federated_only { " --federated-only" } else { "" },
        a.federated_s,
    )
}

pub fn run(a: &MultipathArgs) -> Result<ExitCode, BenchError> {
    if a.testbed {
        need_root("multipath --testbed")?;
    }
    let mut r = if a.no_sim {
        json!({ "summary": {} })
    } else {
        let p = cohort_bench::multipath::MultipathParams {
            reps: a.reps,
            seed: a.seed,
            bulk_mb: a.bulk_mb,
            tau_ms: a.tau_ms,
            short_flows: a.short_flows,
            mobility_s: a.mobility_s,
            speed_mps: a.speed_mps,
        };
        let progress = Progress::new("multipath", a.json);
        cohort_bench::multipath::run_bench(&p, |s| progress.step(s)).map_err(BenchError::Invalid)?
    };
    if a.testbed {
        let exe = std::env::current_exe().map_err(|e| BenchError::Invalid(format!("this binary's path: {e}")))?;
        let mut tb = if a.federated_only {
            json!({ "summary": {} })
        } else {
            let p = cohort_bench::multipath_testbed::TbMpParams {
                exe: exe.clone(),
                reps: a.reps,
                seed: a.seed,
                bulk_mb: a.bulk_mb,
                mobility_s: a.mobility_s,
                speed_mps: a.speed_mps,
            };
            let progress = Progress::new("multipath testbed", a.json);
            cohort_bench::multipath_testbed::bench(&p, |s| progress.step(s)).map_err(BenchError::Run)?
        };
        let p =
            cohort_bench::multipath_federated::FedTbParams { exe, reps: a.reps, seed: a.seed, seconds: a.federated_s };
        let progress = Progress::new("multipath federated", a.json);
        let fed = cohort_bench::multipath_federated::bench(&p, |s| progress.step(s)).map_err(BenchError::Run)?;
        tb["summary"]["federated_regret_ratio"] = fed["federated_regret_ratio"].clone();
        tb["federated"] = fed;
        // The testbed's figures join the summary under their own names (`..._vs_mptcp`,
        // `testbed_...`), beside the simulator's.
        if let (Some(sum), Some(t)) = (r["summary"].as_object_mut(), tb["summary"].as_object()) {
            for (k, v) in t {
                let k = if k.contains("mptcp") { k.clone() } else { format!("testbed_{k}") };
                sum.insert(k, v.clone());
            }
            sum.remove("mptcp");
        }
        r["testbed"] = tb;
    }
    r["command"] = json!(command(a));
    let json = serde_json::to_string_pretty(&r).unwrap_or_default();
    if a.json {
        println!("{json}");
    } else {
        print_summary(&r);
    }
    if let Some(png) = &a.plot {
        write_and_plot(&png.with_extension("json"), &json, "multipath")?;
    }
    Ok(ExitCode::SUCCESS)
}

fn print_summary(r: &Value) {
    for (half, rep) in [("sim", r), ("testbed", &r["testbed"])] {
        for scenario in ["static", "loss", "handoff", "mobility"] {
            for (system, s) in rep[scenario].as_object().into_iter().flatten().filter(|(_, s)| s.get("runs").is_some())
            {
                println!(
                    "{half:<7} {scenario:<8} {system:<11} goodput {:>7.2} ± {:.2} Mbit/s ({} runs), longest stall {:>6.1} ms",
                    s["goodput_mbps"].as_f64().unwrap_or(f64::NAN),
                    s["goodput_ci95"].as_f64().unwrap_or(f64::NAN),
                    s["runs"],
                    s["max_stall_ms"].as_f64().unwrap_or(f64::NAN),
                );
            }
        }
    }
    let fed = &r["testbed"]["federated"];
    if fed.is_object() {
        println!(
            "testbed federated start: regret of the first {} rounds cold {} ± {}, federated {} ± {} ({} runs each)",
            fed["rounds"],
            fed["regret_cold"]["mean"],
            fed["regret_cold"]["ci95"],
            fed["regret_federated"]["mean"],
            fed["regret_federated"]["ci95"],
            fed["runs"],
        );
    }
    println!("summary: {}", r["summary"]);
    println!("replay: {}", r["command"].as_str().unwrap_or_default());
}
