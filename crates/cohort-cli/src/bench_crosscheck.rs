//! `cohort bench crosscheck`: one Wi-Fi scenario in the simulator and on the testbed (see
//! `cohort_bench::crosscheck`).

use crate::bench::{BenchError, need_root, write_and_plot};
use crate::progress::Progress;
use clap::Args;
use cohort_bench::crosscheck::{CrossParams, DEFAULT_SCENARIO};
use cohort_emu::TestbedScenario;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Debug, Args)]
pub struct CrosscheckArgs {
    /// Print the report as JSON (otherwise a short summary).
    #[arg(long)]
    json: bool,
    /// A testbed scenario file with `mode = "wifi"` (node 0 receives, the others send);
    /// default: four senders and a receiver on 802.11n MCS 7.
    #[arg(long)]
    scenario: Option<PathBuf>,
    /// Offered loads, all senders together, as shares of the PHY rate (comma-separated).
    #[arg(long, value_delimiter = ',', default_values_t = [0.3, 1.2])]
    loads: Vec<f64>,
    /// UDP payload bytes per datagram.
    #[arg(long, default_value_t = 1200)]
    payload: usize,
    /// Every N-th sender marks its datagrams EF (AC_VO).
    #[arg(long, default_value_t = 2)]
    vo_every: usize,
    /// Seconds each run offers traffic (the first second is warm-up).
    #[arg(long, default_value_t = 5.0)]
    seconds: f64,
    #[arg(long, default_value_t = 3)]
    reps: u32,
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Only the simulator and the fabric in virtual time (no root needed).
    #[arg(long)]
    no_testbed: bool,
    /// Also write the JSON here and a chart next to it (`.png`).
    #[arg(long)]
    out: Option<PathBuf>,
}

pub fn run(a: &CrosscheckArgs) -> Result<ExitCode, BenchError> {
    let scenario = match &a.scenario {
        Some(path) => TestbedScenario::load(path),
        None => TestbedScenario::parse(DEFAULT_SCENARIO),
    }
    .map_err(|e| BenchError::Invalid(e.to_string()))?;
    let mut p = CrossParams::new(scenario).map_err(BenchError::Invalid)?;
    if a.loads.is_empty()
        || a.loads.iter().any(|l| !(0.01..=5.0).contains(l))
        || !(64..=8000).contains(&a.payload)
        || a.vo_every == 0
        || !(2.0..=600.0).contains(&a.seconds)
        || !(1..=100).contains(&a.reps)
    {
        return Err(BenchError::Invalid(
            "--loads in [0.01, 5], --payload in [64, 8000], --vo-every >= 1, --seconds in [2, 600], --reps in [1, 100]"
                .into(),
        ));
    }
    if !a.no_testbed {
        need_root("crosscheck")?;
    }
    p.loads = a.loads.clone();
    p.payload = a.payload;
    p.vo_every = a.vo_every;
    p.seconds = a.seconds;
    p.reps = a.reps;
    p.seed = a.seed;
    p.testbed = !a.no_testbed;
    let progress = Progress::new("crosscheck", a.json);
    let r = cohort_bench::crosscheck::run(&p, |s| progress.step(s)).map_err(BenchError::Run)?;
    let json = serde_json::to_string_pretty(&r).unwrap_or_default();
    if a.json {
        println!("{json}");
    } else {
        for l in &r.loads {
            println!("load {} ({} Mbit/s offered):", l.load, l.offered_mbps);
            for (engine, acs) in &l.engines {
                let line: Vec<String> = acs
                    .iter()
                    .map(|(ac, s)| {
                        format!(
                            "{ac} {:.2} ± {:.2} Mbit/s, delay p50 {:.2} p99 {:.2} ms",
                            s.throughput_mbps, s.throughput_ci95, s.delay_ms_p50, s.delay_ms_p99
                        )
                    })
                    .collect();
                println!("  {engine:<8} {}", line.join("; "));
            }
            for (name, v) in &l.versus {
                let line: Vec<String> = v
                    .iter()
                    .map(|(ac, x)| format!("{ac} {:.1}% (KS {:.2})", x.throughput_rel_err * 100.0, x.delay_ks))
                    .collect();
                println!("  {name:<17} {}", line.join("; "));
            }
            for (engine, why) in &l.skipped {
                println!("  {engine} skipped: {why}");
            }
            if let Some(ok) = l.testbed_within_5pct_of_sim {
                println!("  testbed within 5% of the simulator on every AC of >= 5%: {ok}");
            }
        }
        println!("replay: {}", r.command);
    }
    if let Some(path) = &a.out {
        write_and_plot(path, &json, "crosscheck")?;
    }
    Ok(ExitCode::SUCCESS)
}
