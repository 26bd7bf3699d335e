"""The goal of issue 18: a kill -9 at any point of a tuning session, followed by
`cohort tune restore`, returns every knob to its prior value.

A real `cohort tune run` (one trial) runs in a subprocess (``tune_driver.py``) that SIGKILLs
itself right after its Nth journal entry reached the disk (the change it announces not made
yet), for every N the session writes, and also at points inside its own rollback. After each
kill, `cohort tune restore` runs and every knob is compared with its value from before:

* cgroup v1, for real (root): a cgroup tree that existed before with non-default values (which
  must be written back) and one the session creates (which must go), cpu/memory/cpuset, the
  RT budgets, SCHED_FIFO on the app's threads, and THP;
* the fake cgroup v2 tree (``fake_cgroup2.py``): every file and directory of the tree.

Every process the session started must be gone after the restore."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from fake_cgroup2 import FakeCgroup2
from test_tune_cli import toml_of
from test_tune_helpers import THP, need_root_cgroups, spec_dict, system_lock_free_or_skip

from cohort.tune.cgroups import Layout, detect
from cohort.tune.system import Journal, normalize_read, proc_start_time, restore

DRIVER = Path(__file__).resolve().parent / "tune_driver.py"
KNOB_FILES = ("cpu.shares", "cpu.rt_runtime_us", "memory.soft_limit_in_bytes", "cpuset.cpus", "cpuset.mems")
MIN_POINTS = 20


def _driver(env: list[str], *args: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([sys.executable, str(DRIVER), *env, "--", *args], capture_output=True, timeout=120)


def _kill_points(total: int) -> list[tuple[str, int]]:
    """After every journal entry, and at 8 points spread over the rollback (before it undoes
    its 1st, ..., last entry)."""
    points = [("--kill-after-journal", n) for n in range(1, total + 1)]
    points += [("--kill-in-restore", k) for k in sorted({*range(1, total + 1, max(1, total // 8)), total})]
    return points


def _spawned(state: Path) -> list[tuple[int, int]]:
    return [(e["pid"], e["start"]) for e in Journal(state).entries() if e.get("op") == "spawn"]


def _kill_and_restore(
    tmp_path: Path, env: list[str], spec: Path, snapshot: object, before: object, restore_env: list[str]
) -> None:
    state = tmp_path / "state"
    record = tmp_path / "record.jsonl"
    run = ["run", str(spec), "--state-dir", str(state), "--trials", "1"]
    r = _driver([*env, "--record-journal", str(record)], *run, "--db", str(tmp_path / "db0"))
    assert r.returncode == 0, r.stderr.decode()
    assert snapshot() == before  # type: ignore[operator]
    total = len(record.read_text().splitlines())
    killed = []
    for i, (hook, n) in enumerate(_kill_points(total)):
        r = _driver([*env, hook, str(n)], *run, "--db", str(tmp_path / f"db{i + 1}"))
        if r.returncode != -signal.SIGKILL:
            assert r.returncode == 0, r.stderr.decode()
            continue  # the session wrote fewer entries this time: it ended normally
        killed.append((hook, n))
        spawned = _spawned(state)
        rr = _driver(restore_env, "restore", "--state-dir", str(state))
        assert rr.returncode == 0, f"{hook} {n}: {rr.stdout.decode()} {rr.stderr.decode()}"
        assert not Journal(state).exists()
        after = snapshot()  # type: ignore[operator]
        assert after == before, f"{hook} {n}: " + json.dumps(
            {k: (before.get(k), after.get(k)) for k in set(before) | set(after) if before.get(k) != after.get(k)}  # type: ignore[attr-defined]
        )
        for pid, start in spawned:
            assert proc_start_time(pid) != start, f"{hook} {n}: app {pid} still runs"
    print(f"{len(killed)} kill points ({total} journal entries per session), every knob restored after each")
    assert len(killed) >= MIN_POINTS, killed


# ---- the fake cgroup v2 tree ---------------------------------------------------------------


def test_kill9_anywhere_then_restore_on_the_fake_v2_tree(tmp_path: Path) -> None:
    fake = FakeCgroup2(tmp_path / "cgroup2", subtree_control="cpu memory pids")
    env = ["--fake-v2", str(fake.root), "--lock-dir", str(tmp_path / "locks")]
    knobs = {
        "a": {
            "cpu_shares": {"choices": [3000]},
            "mem_soft_limit_mib": {"choices": [200]},
            "cpuset": {"choices": ["0"]},
        }
    }
    d = spec_dict(tmp_path, knobs, duration_s=0.3)
    d["cgroup_root_cpu_shares"] = 4096
    d["app"].append({**d["app"][0], "name": "b"})
    d["knobs"]["b"] = {"cpu_shares": {"choices": [500]}}
    spec = tmp_path / "s.toml"
    spec.write_text(toml_of(d))
    before = fake.snapshot()
    try:
        _kill_and_restore(tmp_path, env, spec, fake.snapshot, before, env)
    finally:
        for pid, start in _spawned(tmp_path / "state"):
            if proc_start_time(pid) == start:
                os.kill(pid, signal.SIGKILL)


# ---- real cgroup v1 ------------------------------------------------------------------------


@pytest.fixture
def thp_guard() -> Iterator[str]:
    system_lock_free_or_skip()
    before = normalize_read(THP, Path(THP).read_text())
    yield before
    Path(THP).write_text(before)


def _v1_snapshot(layout: Layout, root: str) -> dict[str, str]:
    out = {"thp": normalize_read(THP, Path(THP).read_text())}
    for c in ("cpu", "memory", "cpuset"):
        top = layout.root_dir(c, root)
        if not top.exists():
            continue
        for d in sorted([top, *(p for p in top.rglob("*") if p.is_dir())]):
            key = f"{c}:{d.relative_to(top.parent)}"
            out[key + "/"] = ""
            for f in KNOB_FILES:
                if (d / f).exists():
                    out[f"{key}/{f}"] = (d / f).read_text().strip()
            procs = (d / "cgroup.procs").read_text().split()
            out[f"{key}/procs"] = " ".join(p for p in procs if Path(f"/proc/{p}").exists())
    return out


def test_kill9_anywhere_then_restore_on_real_cgroup_v1(tmp_path: Path, thp_guard: str) -> None:
    need_root_cgroups()
    layout = detect()
    if layout.version != 1:
        pytest.skip("this machine's cgroups are not v1")
    other = "never" if thp_guard != "never" else "always"
    root = f"cohort-tune-test-{uuid.uuid4().hex[:8]}"
    knobs = {
        "a": {
            "cpu_shares": {"choices": [3000]},
            "mem_soft_limit_mib": {"choices": [200]},
            "rt": {"choices": ["fifo"]},
            "fifo_priority": {"value": 10},
            "rt_budget_us": {"value": 20000},
            "cpuset": {"choices": ["0"]},
        },
        "b": {"cpu_shares": {"choices": [700]}},
        "system": {"thp": {"choices": [other]}},
    }
    d = spec_dict(tmp_path, {}, duration_s=0.3, root=root)
    d["app"].append({**d["app"][0], "name": "b"})
    d["knobs"] = knobs
    d["cgroup_root_cpu_shares"] = 4096
    spec = tmp_path / "s.toml"
    spec.write_text(toml_of(d))
    # a tree that existed before the session, with values that are not the defaults
    made = []
    for c in ("cpu", "memory"):
        for p in (layout.root_dir(c, root), layout.app_dir(c, root, "a")):
            p.mkdir()
            made.append(p)
    try:
        (layout.root_dir("cpu", root) / "cpu.shares").write_text("555")
        (layout.app_dir("cpu", root, "a") / "cpu.shares").write_text("777")
        (layout.app_dir("memory", root, "a") / "memory.soft_limit_in_bytes").write_text(str(32 << 20))
        before = _v1_snapshot(layout, root)
        _kill_and_restore(tmp_path, [], spec, lambda: _v1_snapshot(layout, root), before, [])
    finally:
        state = tmp_path / "state"
        if Journal(state).exists():
            restore(Journal(state), echo=lambda _s: None)
        for c in ("cpuset", "memory", "cpu"):
            for p in (layout.app_dir(c, root, "b"), layout.app_dir(c, root, "a"), layout.root_dir(c, root)):
                for _ in range(50):
                    try:
                        p.rmdir()
                        break
                    except FileNotFoundError:
                        break
                    except OSError:
                        time.sleep(0.05)
        assert not any(p.exists() for p in made)
