"""``recorder``: the rest of the robot's software, as background load for the reference pair.

A bag recorder compressing sensor streams (zlib level 6 over synthetic camera and LIDAR bytes:
a smooth image with sensor noise, ranges with noise) at a target rate in MB/s; when the CPU
cannot keep up it simply runs flat out, like a real recorder falling behind. It reports
``chunk_ms`` (time to compress one 512 KiB chunk) so it can be watched like any app.

The reference spec runs two of them (``recorder`` and ``uploader``) in their own cgroups beside
``nav`` and ``detect``: a robot never runs its planner and its detector alone, and seed 002's
baseline NAV p99 (111 ms for a 50 ms loop) is what the planner sees among all of them.
"""

from __future__ import annotations

import argparse
import time
import zlib

import numpy as np

from cohort.tune.protocol import Reporter

CHUNK = 512 * 1024


def sensor_bytes(rng: np.random.Generator, n: int = CHUNK) -> bytes:
    half = n // 2
    xx = np.arange(half, dtype=np.float32)
    image = (128 + 60 * np.sin(xx / 97.0) + rng.normal(0, 6, half)).clip(0, 255).astype(np.uint8)
    ranges = (2000 + 800 * np.sin(xx / 31.0) + rng.normal(0, 15, half // 2)[: half // 2].repeat(2)).astype(np.uint16)
    return image.tobytes() + ranges.tobytes()[: n - half]


def run(duration_s: float, rate_mbps: float, reporter: Reporter, seed: int = 11) -> dict[str, float]:
    """Compress chunks at ``rate_mbps`` for ``duration_s`` (bounded)."""
    rng = np.random.default_rng(seed)
    pool = [sensor_bytes(rng) for _ in range(8)]
    reporter.ready()
    period = (CHUNK / 1e6) / rate_mbps
    t0 = time.monotonic()
    n = 0
    out = 0
    while time.monotonic() - t0 < duration_s:
        t = time.monotonic()
        out += len(zlib.compress(pool[n % len(pool)], 6))
        reporter.report("chunk_ms", (time.monotonic() - t) * 1000.0, started=t)
        n += 1
        rest = t0 + n * period - time.monotonic()
        if rest > 0:
            time.sleep(rest)
    elapsed = time.monotonic() - t0
    return {"chunks": float(n), "mbps": n * CHUNK / 1e6 / elapsed, "ratio": out / max(1, n * CHUNK)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="cohort tune workload recorder", description=__doc__.split("\n\n")[0])
    ap.add_argument("--duration", type=float, default=30.0, help="seconds to run (stops by itself)")
    ap.add_argument("--rate-mbps", type=float, default=20.0, help="sensor data to compress per second")
    ap.add_argument("--echo", action="store_true", help="print metric lines when COHORT_TUNE_METRICS is unset")
    a = ap.parse_args(argv)
    with Reporter(echo=a.echo) as rep:
        s = run(a.duration, a.rate_mbps, rep)
    if not a.echo:
        print(f"recorder: {s['chunks']:.0f} chunks, {s['mbps']:.1f} MB/s, compressed to {s['ratio']:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
