//! The model's side of the saturation matrix against ns-3 (`scripts/ns3_matrix.sh`): reads
//! ns-3's raw results, runs every cell in the model with as many seeds as ns-3 had runs, and
//! writes the comparison as markdown and JSON.
//!
//! ```text
//! cargo run --release -p cohort-medium --example ns3_matrix -- [RAW_DIR] [OUT_PREFIX]
//! ```
//!
//! Defaults: `docs/bench/ns3_matrix_raw` and `docs/bench/ns3_matrix` (`.md`, `.json`).

use cohort_medium::wifi::ns3_matrix::{compare, markdown, read_ns3_dir};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let raw = args.first().map_or("docs/bench/ns3_matrix_raw", String::as_str);
    let out = args.get(1).map_or("docs/bench/ns3_matrix", String::as_str);
    let runs = read_ns3_dir(std::path::Path::new(raw)).unwrap_or_else(|e| {
        eprintln!("ns3_matrix: {raw}: {e}");
        std::process::exit(2)
    });
    let start = std::time::Instant::now();
    let results = compare(&runs).unwrap_or_else(|e| {
        eprintln!("ns3_matrix: {e}");
        std::process::exit(2)
    });
    let wall = start.elapsed().as_secs_f64();
    let md = markdown(&results);
    print!("{md}");
    let header = format!(
        "# Cohort's 802.11 model against ns-3 3.44: saturation matrix\n\n\
         Produced by `scripts/ns3_matrix.sh` (ns-3 side: `scripts/ns3_matrix_run.py`, raw output in `{raw}/`; \
         model side: `cargo run --release -p cohort-medium --example ns3_matrix`). Mean Mbit/s of UDP payload \
         over the runs (ns-3 RngRun 1..k, model seeds 1..k); errors are (model − ns-3) / ns-3. \
         {} ns-3 runs in {} cells; model side took {wall:.1} s of wall time.\n\n",
        runs.len(),
        results.len()
    );
    std::fs::write(format!("{out}.md"), header + &md).expect("write markdown");
    let json = serde_json::json!({
        "ns3_runs": runs.len(),
        "cells": results,
        "cells_meeting_goal": results.iter().filter(|r| r.meets_goal).count(),
        "model_wall_s": wall,
    });
    std::fs::write(format!("{out}.json"), serde_json::to_string_pretty(&json).expect("json") + "\n")
        .expect("write json");
}
