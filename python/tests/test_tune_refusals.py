"""Every refusal of `cohort tune` is one clear line, never a traceback; `apply --keep` guards."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from test_tune_cli import toml_of
from test_tune_helpers import need_root_cgroups, spec_dict

from cohort.tune.__main__ import main
from cohort.tune.errors import TuneError
from cohort.tune.profiles import check_rt_guard
from cohort.tune.spec import parse
from cohort.tune.system import Journal, proc_start_time, restore

PYTHON_DIR = str(Path(__file__).resolve().parents[1])


def _spec(tmp_path: Path) -> Path:
    p = tmp_path / "s.toml"
    p.write_text(toml_of(spec_dict(tmp_path, {"a": {"cpu_shares": {"range": [128, 4096]}}})))
    return p


def _one_line(text: str) -> str:
    lines = text.strip().splitlines()
    assert len(lines) == 1, text
    assert "Traceback" not in text
    return lines[0]


def test_not_root_is_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture) -> None:
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    for args in (["run", str(_spec(tmp_path))], ["restore"], ["apply", "--profile", "p"]):
        assert main([*args, "--state-dir", str(tmp_path / "state")]) == 1
        assert "needs root" in _one_line(capsys.readouterr().err)
    # what does not change the system runs without root
    assert main(["run", str(_spec(tmp_path)), "--dry-run", "--state-dir", str(tmp_path / "state")]) == 0


def test_not_root_for_real(tmp_path: Path) -> None:
    """As an unprivileged user (nobody), with the system's interpreter."""
    if os.geteuid() != 0:
        pytest.skip("needs root to become nobody")
    if not Path("/usr/bin/python3").exists():
        pytest.skip("no system interpreter that nobody can run")
    spec = _spec(tmp_path)
    os.chmod(tmp_path, 0o755)
    r = subprocess.run(
        ["/usr/bin/python3", "-m", "cohort.tune", "run", str(spec), "--state-dir", str(tmp_path / "state")],
        capture_output=True,
        text=True,
        timeout=60,
        env={"PYTHONPATH": PYTHON_DIR, "PATH": "/usr/bin:/bin"},
        user=65534,
        cwd="/",
    )
    assert r.returncode == 1
    assert "needs root" in _one_line(r.stderr)


def test_missing_optuna_says_what_to_install(tmp_path: Path) -> None:
    code = (
        "import sys; sys.modules['optuna'] = None\n"
        "from cohort.tune.__main__ import main\n"
        f"raise SystemExit(main(['run', {str(_spec(tmp_path))!r}, '--dry-run', '--state-dir', {str(tmp_path)!r}]))\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.returncode == 1
    line = _one_line(r.stderr)
    assert "missing Python dependency 'optuna'" in line and "pip install" in line


def test_bad_spec_is_one_line_with_key_and_type(tmp_path: Path) -> None:
    d = spec_dict(tmp_path, {"a": {"cpu_shares": {"range": [128, 4096]}}})
    d["trial"]["duration_s"] = "abc"
    p = tmp_path / "bad.toml"
    p.write_text(toml_of(d))
    r = subprocess.run(
        [sys.executable, "-m", "cohort.tune", "run", str(p), "--dry-run"], capture_output=True, text=True, timeout=60
    )
    assert r.returncode == 2
    line = _one_line(r.stderr)
    assert "trial.duration_s" in line and "must be a number" in line


def test_rt_guard_refuses_realtime_without_rt_throttling(tmp_path: Path) -> None:
    spec = parse(spec_dict(tmp_path, {"a": {"rt": {"choices": ["none", "fifo"]}, "rt_budget_us": {"value": 20000}}}))
    knob = tmp_path / "sched_rt_runtime_us"
    knob.write_text("-1\n")
    with pytest.raises(TuneError, match="RT throttling is off"):
        check_rt_guard({"a.rt": "fifo"}, spec, str(knob))
    check_rt_guard({"a.rt": "none"}, spec, str(knob))  # no real-time policy: nothing to guard
    knob.write_text("950000\n")
    check_rt_guard({"a.rt": "fifo"}, spec, str(knob))


def test_apply_keep_watchdog_restores_when_the_protected_process_exits(tmp_path: Path) -> None:
    """`apply --keep --pid a=PID` leaves the profile in place and a watchdog; once the process
    exits, the watchdog restores everything (cgroups removed, journal gone) and exits."""
    need_root_cgroups()
    state = tmp_path / "state"
    d = spec_dict(tmp_path, {"a": {"cpu_shares": {"range": [128, 4096]}, "rt": {"choices": ["none", "fifo"]}}})
    d["knobs"]["a"]["rt_budget_us"] = {"value": 20000}
    spec = tmp_path / "s.toml"
    spec.write_text(toml_of(d))
    (state / "profiles").mkdir(parents=True)
    profile = {"name": "p", "environment": "lab", "spec": str(spec), "config": {"a.cpu_shares": 600, "a.rt": "fifo"}}
    (state / "profiles" / "p.json").write_text(json.dumps(profile))
    victim = subprocess.Popen(["sleep", "60"])
    wpid = None
    try:
        args = ["apply", "--profile", "p", "--state-dir", str(state), "--pid", f"a={victim.pid}", "--keep"]
        r = subprocess.run(
            [sys.executable, "-m", "cohort.tune", *args],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert r.returncode == 0, r.stderr
        assert "watchdog" in r.stdout
        j = Journal(state)
        assert j.exists()
        wd = next(e for e in j.entries() if e["op"] == "watchdog")
        wpid = wd["pid"]
        assert os.sched_getscheduler(victim.pid) & ~os.SCHED_RESET_ON_FORK == os.SCHED_FIFO
        assert d["cgroup_root"] in Path(f"/proc/{victim.pid}/cgroup").read_text()
        assert proc_start_time(wpid) == wd["start"]  # the watchdog runs while the process does
        victim.kill()
        victim.wait()
        deadline = time.monotonic() + 30
        while j.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not j.exists(), (state / "watchdog.log").read_text()
        for mount in ("/sys/fs/cgroup/cpu", "/sys/fs/cgroup/memory"):
            assert not (Path(mount) / d["cgroup_root"]).exists()
        while proc_start_time(wpid) == wd["start"] and time.monotonic() < deadline:
            time.sleep(0.1)
        assert proc_start_time(wpid) != wd["start"] or "Z" in Path(f"/proc/{wpid}/stat").read_text().split()[2]
    finally:
        victim.kill()
        victim.wait()
        if wpid is not None and proc_start_time(wpid) is not None:
            os.kill(wpid, 9)
        if Journal(state).exists():
            restore(Journal(state), echo=lambda _s: None)


def test_watchdog_leaves_a_journal_of_another_session_alone(tmp_path: Path) -> None:
    from cohort.tune.profiles import watchdog

    j = Journal(tmp_path)
    j.begin()
    j.append({"op": "session", "pid": 1, "id": "later-session", "locks": []})
    j.append({"op": "mkdir", "path": str(tmp_path / "x")})
    (tmp_path / "x").mkdir()
    assert watchdog(tmp_path, "kept-session", [(1 << 22, 1)], 0.01) == 0
    assert j.exists() and (tmp_path / "x").is_dir()


def test_bad_profile_names_and_files_are_one_line(tmp_path: Path) -> None:
    (tmp_path / "profiles").mkdir(parents=True)
    (tmp_path / "profiles" / "broken.json").write_text("{")
    for name, says in (("../x", "plain file name"), ("broken", "not valid JSON")):
        args = ["apply", "--profile", name, "--state-dir", str(tmp_path), "--dry-run"]
        r = subprocess.run([sys.executable, "-m", "cohort.tune", *args], capture_output=True, text=True, timeout=60)
        assert r.returncode == 1
        assert says in _one_line(r.stderr)
