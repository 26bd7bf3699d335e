#!/usr/bin/env bash
# The saturation matrix: the same scenario in ns-3 3.44 and in Cohort's 802.11 model over a
# pairwise covering design of PHY (a, g, n MCS 0/4/7, ac MCS 8), senders (2, 5, 10, 20), AC
# mix (all BE; every 2nd VO; every 4th VO; one VI + rest BK), payload (200, 1472) and
# aggregation (the PHY's default, off); several ns-3 RngRuns per cell and as many seeds of
# the model. Writes docs/bench/ns3_matrix.{md,json}.
#
#   scripts/ns3_matrix.sh [--model-only] [SECONDS] [WARM] [RUNS] [CELLS]
#
# Defaults: 2 s counted after 0.5 s of warm-up (after the senders start), 3 runs, 48 cells.
# ns-3's raw output is kept, one small file per run, in docs/bench/ns3_matrix_raw/ (runs
# already there are not run again); `--model-only` re-derives the table from them without
# ns-3. The design comes from scripts/ns3_matrix_design.py (greedy, deterministic), the ns-3
# side from scripts/ns3_matrix_run.py, the model side from the cohort-medium example
# `ns3_matrix` (crates/cohort-medium/src/wifi/ns3_matrix.rs: one rule maps every cell to
# an EdcaSatScenario; nothing is set per cell).
#
# ns-3 runs at a few simulated seconds per wall second here: the default matrix takes about
# 40 minutes of ns-3 (one process; bounded by a 3-hour timeout). Needs the PyPI package
# ns3==3.44.post0 (installed on first use; not in CI).
set -euo pipefail
cd "$(dirname "$0")/.."
model_only=""
if [ "${1:-}" = "--model-only" ]; then model_only=1; shift; fi
secs="${1:-2.0}"; warm="${2:-0.5}"; runs="${3:-3}"; cells="${4:-48}"
design=docs/bench/ns3_matrix_design.json
raw=docs/bench/ns3_matrix_raw
if [ -z "$model_only" ]; then
  python3 scripts/ns3_matrix_design.py "$cells" > "$design"
  python3 -c 'import ns' 2>/dev/null || python3 -m pip install --quiet ns3==3.44.post0
  timeout 3h python3 scripts/ns3_matrix_run.py "$design" "$raw" "$secs" "$warm" "$runs" 2>&1 | grep -v '^\[runStatic' || true
fi
cargo build --quiet --release -p cohort-medium --example ns3_matrix
./target/release/examples/ns3_matrix "$raw" docs/bench/ns3_matrix
