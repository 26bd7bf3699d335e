"""Shared helpers for the tuner's system tests: a tiny bounded app and scratch specs."""

from __future__ import annotations

import os
import sys
import textwrap
import uuid
from pathlib import Path

import pytest

from cohort.tune.spec import Spec, parse

THP = "/sys/kernel/mm/transparent_hugepage/enabled"

APP = textwrap.dedent(
    """
    import os, sys, threading, time
    from cohort.tune.protocol import Reporter
    run_s = float(sys.argv[1]); nthreads = int(sys.argv[2])
    stop = threading.Event()
    def spin():
        while not stop.is_set():
            time.sleep(0.01)
    ts = [threading.Thread(target=spin, daemon=True) for _ in range(nthreads)]
    for t in ts: t.start()
    r = Reporter(); r.ready()
    end = time.monotonic() + run_s
    while time.monotonic() < end:
        t0 = time.monotonic(); sum(range(20000)); time.sleep(0.01)
        r.report("loop_ms", (time.monotonic() - t0) * 1000)
    stop.set()
    """
)


def need_root_cgroups() -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root")
    if not Path("/sys/fs/cgroup/cpu/cpu.shares").exists() and not Path("/sys/fs/cgroup/cgroup.controllers").exists():
        pytest.skip("no cgroup cpu controller")


def system_lock_free_or_skip() -> None:
    """Tests that change THP need the system-knob lock; skip while a real session holds it."""
    from cohort.tune.errors import StateError
    from cohort.tune.system import Lock

    lock = Lock("system")
    try:
        lock.acquire("pytest probe")
    except StateError as e:
        pytest.skip(f"a tuning session owns the system knobs: {e}")
    finally:
        lock.release()


def write_app(tmp: Path) -> Path:
    p = tmp / "app.py"
    p.write_text(APP)
    return p


def spec_dict(tmp: Path, knobs: dict, threads: int = 1, duration_s: float = 1.0, root: str | None = None) -> dict:
    app = write_app(tmp)
    return {
        "name": "t",
        "environment": "test",
        "cgroup_root": root or f"cohort-tune-test-{uuid.uuid4().hex[:8]}",
        "trial": {"duration_s": duration_s, "warmup_s": 0.2, "repetitions": 1, "ready_timeout_s": 10},
        "app": [{"name": "a", "command": [sys.executable, str(app), "{duration}", str(threads)]}],
        "objective": {"kind": "sum", "terms": [{"app": "a", "metric": "loop_ms", "stat": "p99"}]},
        "knobs": knobs,
    }


def make_spec(tmp: Path, knobs: dict, **kw: object) -> Spec:
    return parse(spec_dict(tmp, knobs, **kw))  # type: ignore[arg-type]
