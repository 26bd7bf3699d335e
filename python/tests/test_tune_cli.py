"""The command line end to end: search, profile, apply, report; and crash (SIGKILL) + restore."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest
from test_tune_helpers import THP, need_root_cgroups, spec_dict, system_lock_free_or_skip

from cohort.tune.cgroups import detect
from cohort.tune.system import Journal, normalize_read, restore

PNG = b"\x89PNG\r\n\x1a\n"


def toml_of(d: dict) -> str:
    """Enough TOML for the specs the tests write (tables of scalars, lists, inline tables)."""

    def val(v: object) -> str:
        if isinstance(v, str):
            return json.dumps(v)
        if isinstance(v, bool):
            return "true" if v else "false"
        if isinstance(v, list):
            return "[" + ", ".join(val(x) for x in v) + "]"
        if isinstance(v, dict):
            return "{ " + ", ".join(f"{k} = {val(x)}" for k, x in v.items()) + " }"
        return repr(v)

    out = [f"{k} = {val(v)}" for k, v in d.items() if not isinstance(v, dict | list) or k in ("",)]
    out += ["[trial]\n" + "\n".join(f"{k} = {val(v)}" for k, v in d["trial"].items())]
    for a in d["app"]:
        out.append("[[app]]\n" + "\n".join(f"{k} = {val(v)}" for k, v in a.items()))
    out.append("[objective]\n" + "\n".join(f"{k} = {val(v)}" for k, v in d["objective"].items()))
    for scope, knobs in d["knobs"].items():
        out.append(f"[knobs.{scope}]\n" + "\n".join(f"{k} = {val(v)}" for k, v in knobs.items()))
    text = "\n".join(out) + "\n"
    assert tomllib.loads(text)["app"] == d["app"]
    return text


def cli(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "cohort.tune", *args], capture_output=True, text=True, timeout=timeout)


@pytest.fixture
def thp_guard() -> Iterator[str]:
    system_lock_free_or_skip()
    before = normalize_read(THP, Path(THP).read_text())
    yield before
    Path(THP).write_text(before)


@pytest.fixture
def state(tmp_path: Path) -> Iterator[Path]:
    """A state dir that is always restored at the end, whatever the test did."""
    d = tmp_path / "state"
    yield d
    j = Journal(d)
    if j.exists():
        restore(j, echo=lambda _s: None)


def test_relative_objective_is_measured_against_the_default_trial_and_survives_resume(
    tmp_path: Path, state: Path
) -> None:
    import optuna

    need_root_cgroups()
    d = spec_dict(tmp_path, {"a": {"cpu_shares": {"range": [128, 4096], "log": True}}}, duration_s=0.5)
    d["objective"]["kind"] = "relative"
    spec = tmp_path / "s.toml"
    spec.write_text(toml_of(d))
    db = tmp_path / "study.db"
    for n in ("2", "1"):  # the second invocation resumes the study
        r = cli("run", str(spec), "--state-dir", str(state), "--db", str(db), "--trials", n)
        assert r.returncode == 0, r.stderr + r.stdout
    study = optuna.load_study(study_name="t@test", storage=f"sqlite:///{db}")
    trials = study.trials
    assert len(trials) == 3 and trials[0].user_attrs["default"] is True
    (base,) = study.user_attrs["baseline"]
    assert base == pytest.approx(trials[0].user_attrs["stats"]["a.loop_ms"]["p99"])
    assert trials[0].value == pytest.approx(1.0)
    for t in trials[1:]:  # every later trial, before and after the resume, against that baseline
        assert t.value == pytest.approx(t.user_attrs["stats"]["a.loop_ms"]["p99"] / base)


def test_run_profile_apply_report(tmp_path: Path, state: Path, thp_guard: str) -> None:
    need_root_cgroups()
    d = spec_dict(tmp_path, {"a": {"cpu_shares": {"range": [128, 4096], "log": True}}}, duration_s=0.5)
    spec = tmp_path / "s.toml"
    spec.write_text(toml_of(d))
    db = tmp_path / "study.db"
    r = cli(
        "run", str(spec), "--state-dir", str(state), "--db", str(db), "--trials", "3", "--report", str(tmp_path / "rep")
    )
    assert r.returncode == 0, r.stderr + r.stdout
    assert "profile saved" in r.stdout
    # resumes: the same study grows
    r = cli("run", str(spec), "--state-dir", str(state), "--db", str(db), "--trials", "1")
    assert r.returncode == 0, r.stderr
    summary = json.loads((tmp_path / "rep" / "summary.json").read_text())
    assert summary["default"]["config"]["a.cpu_shares"] == 1024  # the default went first
    for png in ("history.png", "importance.png", "distribution.png"):
        assert (tmp_path / "rep" / png).read_bytes()[:8] == PNG
    r = cli("report", "--db", str(db), "--out", str(tmp_path / "rep2"))
    assert r.returncode == 0, r.stderr
    assert json.loads((tmp_path / "rep2" / "summary.json").read_text())["completed"] == 4
    prof = json.loads((state / "profiles" / "test.json").read_text())
    assert prof["environment"] == "test" and "a.cpu_shares" in prof["config"]
    r = cli("profiles", "--state-dir", str(state))
    assert "test" in r.stdout
    # apply holds for a moment, with the shares in place, then rolls back
    cg = detect().app_dir("cpu", d["cgroup_root"], "a")
    p = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "cohort.tune",
            "apply",
            "--profile",
            "test",
            "--state-dir",
            str(state),
            "--launch",
            "--for",
            "3",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert p.stdout is not None
        line = p.stdout.readline()
        assert "applied" in line
        if detect().version == 1:
            assert (cg / "cpu.shares").read_text().strip() == str(prof["config"]["a.cpu_shares"])
        assert p.wait(timeout=30) == 0
    finally:
        p.kill()
        p.wait()
    assert not cg.exists()
    assert not Journal(state).exists()


def test_apply_dry_run_and_missing_profile(tmp_path: Path, state: Path) -> None:
    r = cli("apply", "--profile", "nope", "--state-dir", str(state))
    assert r.returncode == 1 and "no profile 'nope'" in r.stderr


def test_invalid_spec_exit_code(tmp_path: Path, state: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text('environment = "x"\n')
    r = cli("run", str(bad), "--state-dir", str(state))
    assert r.returncode == 2 and "invalid spec" in r.stderr


def test_sigkill_mid_trial_then_restore(tmp_path: Path, state: Path, thp_guard: str) -> None:
    """Kill the tuner with SIGKILL during a trial; `restore` puts back every knob exactly."""
    need_root_cgroups()
    layout = detect()
    if layout.version != 1:
        pytest.skip("checks v1 files")
    other = "never" if thp_guard != "never" else "always"
    d = spec_dict(
        tmp_path,
        {
            "a": {
                "cpu_shares": {"choices": [3000]},
                "mem_soft_limit_mib": {"choices": [200]},
                "rt": {"choices": ["fifo"]},
                "rt_budget_us": {"value": 20000},
            },
            "system": {"thp": {"choices": [other]}},
        },
        duration_s=30.0,
    )
    root = d["cgroup_root"]
    # pre-existing cgroups with non-default values: restore must write these back
    made = []
    for c in ("cpu", "memory"):
        for p in (layout.root_dir(c, root), layout.app_dir(c, root, "a")):
            p.mkdir()
            made.append(p)
    cpu, mem = layout.app_dir("cpu", root, "a"), layout.app_dir("memory", root, "a")
    try:
        (cpu / "cpu.shares").write_text("555")
        (mem / "memory.soft_limit_in_bytes").write_text(str(32 << 20))
        files = [cpu / "cpu.shares", cpu / "cpu.rt_runtime_us", layout.root_dir("cpu", root) / "cpu.rt_runtime_us"]
        files += [mem / "memory.soft_limit_in_bytes", Path(THP)]
        before = {str(f): normalize_read(str(f), f.read_text()) for f in files}
        spec = tmp_path / "s.toml"
        spec.write_text(toml_of(d))
        p = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "cohort.tune",
                "run",
                str(spec),
                "--state-dir",
                str(state),
                "--db",
                str(tmp_path / "db"),
                "--trials",
                "1",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        app_pid = None
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and app_pid is None:
            for e in Journal(state).entries():
                if e["op"] == "sched":  # the app runs and got its RT policy: mid-trial
                    app_pid = next(x["pid"] for x in Journal(state).entries() if x["op"] == "spawn")
            time.sleep(0.1)
        assert app_pid is not None, "the tuner never reached its trial"
        assert (cpu / "cpu.shares").read_text().strip() == "3000"
        assert normalize_read(THP, Path(THP).read_text()) == other
        os.kill(p.pid, signal.SIGKILL)
        p.wait()
        r = cli("restore", "--state-dir", str(state))
        assert r.returncode == 0, r.stdout + r.stderr
        after = {str(f): normalize_read(str(f), f.read_text()) for f in files}
        assert after == before
        assert not Path(f"/proc/{app_pid}").exists() or "Z" in Path(f"/proc/{app_pid}/stat").read_text().split()[2]
        assert not Journal(state).exists()
        assert cli("restore", "--state-dir", str(state)).stdout.startswith("nothing to restore")
    finally:
        for m in reversed(made):
            for _ in range(50):
                try:
                    m.rmdir()
                    break
                except OSError:
                    time.sleep(0.05)


def test_apply_moves_a_running_process_and_moves_it_back(tmp_path: Path, state: Path) -> None:
    need_root_cgroups()
    d = spec_dict(tmp_path, {"a": {"cpu_shares": {"range": [128, 4096]}, "rt": {"choices": ["none", "fifo"]}}})
    d["knobs"]["a"]["rt_budget_us"] = {"value": 20000}
    spec = tmp_path / "s.toml"
    spec.write_text(toml_of(d))
    (state / "profiles").mkdir(parents=True)
    profile = {"name": "p", "environment": "lab", "spec": str(spec), "config": {"a.cpu_shares": 600, "a.rt": "fifo"}}
    (state / "profiles" / "p.json").write_text(json.dumps(profile))
    victim = subprocess.Popen(["sleep", "60"])
    try:
        before = Path(f"/proc/{victim.pid}/cgroup").read_text()
        args = ["apply", "--profile", "p", "--state-dir", str(state), "--pid", f"a={victim.pid}", "--for", "2"]
        p = subprocess.Popen(
            [sys.executable, "-m", "cohort.tune", *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert p.stdout is not None
        assert "applied" in p.stdout.readline()
        inside = Path(f"/proc/{victim.pid}/cgroup").read_text()
        assert d["cgroup_root"] in inside
        assert os.sched_getscheduler(victim.pid) & ~os.SCHED_RESET_ON_FORK == os.SCHED_FIFO
        assert p.wait(timeout=30) == 0, p.stderr.read() if p.stderr else ""
        assert victim.poll() is None  # a process we did not start is never killed
        assert Path(f"/proc/{victim.pid}/cgroup").read_text() == before
        assert os.sched_getscheduler(victim.pid) == os.SCHED_OTHER
    finally:
        victim.kill()
        victim.wait()
