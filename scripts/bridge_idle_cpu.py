"""CPU an idle `cohort bridge` uses: five robots' bridges on loopback (each its own process,
the configurations of python/tests/test_bridge.py's `Team`: one `[[publish]]` and one
`[[query]]` key, heartbeats every 0.15 s), nothing published; prints each process's CPU over
10 s as a percentage of one core, and its thread count.

    python3 scripts/bridge_idle_cpu.py      # from the repository root, after `pip install -e .`
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "python" / "tests"))

from test_bridge import PUBLISH, QUERY, Team  # noqa: E402


def cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main() -> None:
    with tempfile.TemporaryDirectory() as d:
        team = Team(Path(d), 5, publish=PUBLISH, query=QUERY)
        procs = [
            subprocess.Popen(
                [sys.executable, "-m", "cohort.bridge", "--config", str(team.paths[p]), "--duration", "16"],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            for p in team.pids
        ]
        time.sleep(4)  # links up, the group formed
        c0, t0 = [cpu_s(p.pid) for p in procs], time.monotonic()
        time.sleep(10)
        c1, t1 = [cpu_s(p.pid) for p in procs], time.monotonic()
        print(
            "idle CPU per bridge, % of one core:",
            [round(100 * (b - a) / (t1 - t0), 1) for a, b in zip(c0, c1, strict=True)],
        )
        print("threads per bridge:", [len(os.listdir(f"/proc/{p.pid}/task")) for p in procs])
        for p in procs:
            p.wait()


if __name__ == "__main__":
    main()
