"""The recorded table: every configuration of a discretized knob grid measured once.

``python -m cohort.tune record-grid --env dense --out python/cohort/tune/data/grid_dense.json``
runs the reference pair (:file:`specs/reference.toml`) under each configuration of
:data:`AXES` in a shuffled order (so slow drift of the machine's background load does not line up
with one knob), once each, and stores every measurement with how it was made. The replay
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


def record(env: str, out: Path, duration_s: float, warmup_s: float, state_dir: str, seed: int = 1) -> dict[str, Any]:
    """Measure every grid configuration once; writes ``out`` as it goes (resumable)."""
    from cohort.tune.runner import Session
    from cohort.tune.spec import load

    spec = load(Path(__file__).parent / "specs" / "reference.toml")
    spec.environment = env
    spec.trial.duration_s, spec.trial.warmup_s, spec.trial.repetitions = duration_s, warmup_s, 1
    configs = grid_configs()
    random.Random(seed).shuffle(configs)
    table: dict[str, Any] = {
        "how": (
            "Each configuration of the grid measured once, in a shuffled order, with the reference spec "
            f"(nav --env {env} + detect, beside the recorder and uploader background apps) for {duration_s:g} s "
            f"after a {warmup_s:g} s warm-up; objective = p99 nav loop_ms + mean detect frame_ms (seed 002's "
            "global metric). Knobs not on the grid stay at the spec's defaults."
        ),
        "remake": (
            f"python -m cohort.tune record-grid --env {env} --out {out} --duration {duration_s:g} --warmup {warmup_s:g}"
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
        if old.get("axes") == json.loads(json.dumps(AXES)) and old.get("environment") == env:
            table = old
    done = {key(e["config"]) for e in table["entries"]}
    with Session(spec, state_dir) as session:
        for i, cfg in enumerate(configs):
            if key(cfg) in done:
                continue
            m = session.measure(cfg)
            assert m is not None
            entry = {
                "config": cfg,
                "objective": round(m.objective, 3),
                "nav_p99_ms": round(m.stats["nav.loop_ms"]["p99"], 3),
                "detect_mean_ms": round(m.stats["detect.frame_ms"]["mean"], 3),
                "nav_loops": int(m.stats["nav.loop_ms"]["n"]),
                "detect_frames": int(m.stats["detect.frame_ms"]["n"]),
            }
            table["entries"].append(entry)
            table["finished"] = time.strftime("%Y-%m-%dT%H:%M:%S")
            out.write_text(json.dumps(table, indent=1) + "\n")
            print(f"[{i + 1}/{len(configs)}] {json.dumps(cfg)} -> {entry['objective']}", flush=True)
    return table
