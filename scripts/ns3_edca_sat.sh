#!/usr/bin/env bash
# Runs the edca_sat scenario in ns-3 and in Cohort's 802.11 model and prints both side by side:
#   scripts/ns3_edca_sat.sh [N] [SECONDS]
# Needs the PyPI package ns3==3.44.post0 (about 300 MB; installed on first use, not in CI).
set -euo pipefail
cd "$(dirname "$0")/.."
n="${1:-5}"; secs="${2:-10}"
python3 -c 'import ns' 2>/dev/null || python3 -m pip install --quiet ns3==3.44.post0
echo "ns-3:   $(python3 ../shared/reference/ns3/edca_sat.py "$n" "$secs" a 2>/dev/null | grep '^std=')"
echo "cohort: $(cargo run --quiet --release --bin cohort -- bench sim --stations "$n" --seconds "$secs")"
