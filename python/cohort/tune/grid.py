"""The recorded table: every configuration of a discretized knob grid, measured.

``python -m cohort.tune record-grid --env dense --out python/cohort/tune/data/grid_dense.json``
runs the reference pair (:file:`specs/reference.toml`) under each configuration of
:data:`AXES`, in passes of a shuffled order (so slow drift of the machine's background load does
not line up with one knob), ``--reps`` times each, and stores every measurement with how it was
made. The replay
(:func:`replay`) then lets a sampler "measure" a configuration by looking it up, so Optuna and
random search are compared over many seeds on identical, real data.
"""

from __future__ import annotations

import itertools
import json
import platform
import random
import time
from pathlib import Path
from typing import Any

AXES: dict[str, list[Any]] = {
    "nav.rt": ["none", "fifo", "deadline"],
    "nav.rt_runtime_ms": [15.0, 30.0, 45.0],  # deadline only
    "nav.cpu_shares": [256, 1024, 4096],  # CFS only (rt = none)
    "detect.cpu_shares": [256, 1024, 4096],
    "system.thp": ["madvise", "always"],
}
DEFAULT = {
    "nav.rt": "none",
    "nav.rt_runtime_ms": 30.0,
    "nav.cpu_shares": 1024,
    "detect.cpu_shares": 1024,
    "system.thp": "madvise",
}


def effective(config: dict[str, Any]) -> dict[str, Any]:
    """Drop knobs that do nothing under this configuration: the deadline runtime without
    SCHED_DEADLINE, and nav's CFS weight (cpu.shares) when nav runs under a real-time policy,
    which the CFS weight does not touch. Such configurations are the same experiment."""
    out = dict(config)
    if out.get("nav.rt") != "deadline":
        out.pop("nav.rt_runtime_ms", None)
    if out.get("nav.rt") != "none":
        out.pop("nav.cpu_shares", None)
    return out


def key(config: dict[str, Any]) -> str:
    return json.dumps(effective(config), sort_keys=True)


def grid_configs() -> list[dict[str, Any]]:
    seen: dict[str, dict[str, Any]] = {}
    names = list(AXES)
    for values in itertools.product(*(AXES[n] for n in names)):
        cfg = effective(dict(zip(names, values, strict=True)))
        seen.setdefault(key(cfg), cfg)
    return list(seen.values())


def objectives(table: dict[str, Any]) -> dict[str, float]:
    """Each configuration's objective, the reference spec's: p99 NAV loop time and mean detector
    frame time, each relative to the default configuration's (mean over its repetitions)."""
    entries = {key(e["config"]): e for e in table["entries"]}
    d = entries[key(table["default"])]
    return {
        k: e["nav_p99_ms"] / d["nav_p99_ms"] + e["detect_mean_ms"] / d["detect_mean_ms"] for k, e in entries.items()
    }


def record(
    env: str, out: Path, duration_s: float, warmup_s: float, state_dir: str, reps: int = 2, seed: int = 1
) -> dict[str, Any]:
    """Measure every grid configuration ``reps`` times, one shuffled pass after another (so the
    machine's drift is spread over all configurations); writes ``out`` as it goes (resumable)."""
    from cohort.tune.errors import AppError
    from cohort.tune.runner import Session
    from cohort.tune.spec import load

    spec = load(Path(__file__).parent / "specs" / "reference.toml")
    spec.environment = env
    spec.trial.duration_s, spec.trial.warmup_s, spec.trial.repetitions = duration_s, warmup_s, 1
    table: dict[str, Any] = {
        "how": (
            f"Each configuration of the grid measured {reps} times, in {reps} passes of a shuffled order, with "
            f"the reference spec (nav --env {env} + detect, beside the recorder and uploader background apps) "
            f"for {duration_s:g} s after a {warmup_s:g} s warm-up. nav_p99_ms and detect_mean_ms are means over "
            "the repetitions; the objective (grid.objectives) is the reference spec's: p99 nav loop_ms and mean "
            "detect frame_ms, each relative to the default configuration's. Knobs not on the grid stay at the "
            "spec's defaults."
        ),
        "remake": (
            f"python -m cohort.tune record-grid --env {env} --out {out} --duration {duration_s:g} "
            f"--warmup {warmup_s:g} --reps {reps}"
        ),
        "environment": env,
        "machine": {
            "kernel": platform.release(),
            "cpus": __import__("os").cpu_count(),
            "python": platform.python_version(),
        },
        "axes": AXES,
        "default": DEFAULT,
        "started": time.strftime("%Y-%m-%dT%H:%M:%S"),
        "entries": [],
    }
    if out.exists():
        old = json.loads(out.read_text())
        if old.get("axes") == json.loads(json.dumps(AXES)) and old.get("environment") == env and "reps" in old:
            table = old
    table["reps"] = reps
    entries = {key(e["config"]): e for e in table["entries"]}
    with Session(spec, state_dir) as session:
        for rep in range(reps):
            configs = grid_configs()
            random.Random(seed + rep).shuffle(configs)
            for i, cfg in enumerate(configs):
                e = entries.setdefault(key(cfg), {"config": cfg, "reps": []})
                if len(e["reps"]) > rep:
                    continue
                try:
                    m = session.measure(cfg)
                    assert m is not None
                    stats = m.stats
                except AppError as err:  # a starved app reports nothing in the window
                    if "no loop_ms samples" not in str(err):
                        raise
                    stats = session.last_stats
                    # no loop ended in the window: every loop took longer than it (a lower bound)
                    stats["nav.loop_ms"] = {"p99": duration_s * 1000.0, "n": 0}
                e["reps"].append(
                    {
                        "nav_p99_ms": round(stats["nav.loop_ms"]["p99"], 3),
                        "detect_mean_ms": round(stats["detect.frame_ms"]["mean"], 3),
                        "nav_loops": int(stats["nav.loop_ms"]["n"]),
                        "detect_frames": int(stats["detect.frame_ms"]["n"]),
                    }
                )
                for k in ("nav_p99_ms", "detect_mean_ms"):
                    e[k] = round(sum(r[k] for r in e["reps"]) / len(e["reps"]), 3)
                table["entries"] = list(entries.values())
                table["finished"] = time.strftime("%Y-%m-%dT%H:%M:%S")
                out.write_text(json.dumps(table, indent=1) + "\n")
                print(
                    f"[pass {rep + 1}/{reps}, {i + 1}/{len(configs)}] {json.dumps(cfg)} -> nav p99 "
                    f"{e['reps'][-1]['nav_p99_ms']:.1f} ms, detect mean {e['reps'][-1]['detect_mean_ms']:.1f} ms",
                    flush=True,
                )
    return table
