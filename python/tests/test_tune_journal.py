"""The journal and restore: a failed restore has a way forward, the boot id keeps restore from
touching processes after a reboot, every write is fsynced with its directory, a rollback
cannot be interrupted, and a session restores a dead one's journal before it starts."""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from fake_cgroup2 import FakeCgroup2
from test_tune_cli import toml_of
from test_tune_helpers import make_spec, spec_dict

from cohort.tune import runner, system
from cohort.tune.errors import StateError
from cohort.tune.runner import Session
from cohort.tune.system import Journal, System, boot_id, proc_start_time, restore

DRIVER = Path(__file__).resolve().parent / "tune_driver.py"


def quiet(_s: str) -> None:
    pass


def test_failed_restore_keeps_what_is_left_and_force_sets_it_aside(tmp_path: Path) -> None:
    good, bad = tmp_path / "good", tmp_path / "bad"
    good.write_text("1")
    bad.write_text("2")
    j = Journal(tmp_path / "state")
    j.begin()
    s = System(j)
    s.write(good, "10")
    s.write(bad, "20")
    bad.unlink()
    bad.mkdir()  # the knob became something that cannot be written: restore fails there
    problems = restore(j, echo=quiet)
    assert len(problems) == 1 and "prior value '2'" in problems[0]
    assert good.read_text() == "1"
    left = [e for e in j.entries() if e["op"] == "write"]
    assert [e["path"] for e in left] == [str(bad)]  # only what is still to undo
    assert j.failures() == problems
    with pytest.raises(StateError, match=r"could not undo everything.*--force"):
        Journal(tmp_path / "state").begin()
    # a retry after the cause is fixed finishes the job
    bad.rmdir()
    bad.write_text("20")
    assert restore(j, echo=quiet) == []
    assert bad.read_text() == "2" and not j.exists()
    # --force: undo what can be undone, set the journal aside, new sessions start
    j.begin()
    s = System(j)
    s.write(bad, "30")
    bad.unlink()
    bad.mkdir()
    lines: list[str] = []
    problems = restore(j, echo=lines.append, force=True)
    assert len(problems) == 1
    assert not j.exists()
    aside = list((tmp_path / "state").glob("state.failed-*.jsonl"))
    assert len(aside) == 1 and str(bad) in aside[0].read_text()
    Journal(tmp_path / "state").begin()  # no longer wedged


def test_restore_force_on_the_command_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad"
    bad.write_text("2")
    j = Journal(tmp_path / "state")
    j.begin()
    System(j).write(bad, "20")
    bad.unlink()
    bad.mkdir()
    cmd = [sys.executable, "-m", "cohort.tune", "restore", "--state-dir", str(tmp_path / "state")]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    assert r.returncode == 1 and "--force" in r.stderr and "Traceback" not in r.stderr
    assert j.exists()
    r = subprocess.run([*cmd, "--force"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 1 and "could not be undone" in r.stdout and "prior value '2'" in r.stdout
    assert not j.exists()


def _sleeper() -> subprocess.Popen[bytes]:
    return subprocess.Popen(["sleep", "60"], start_new_session=True)


def test_journal_of_another_boot_touches_no_process(tmp_path: Path) -> None:
    """After a reboot a (pid, start tick) pair may name an unrelated process: restore must not
    kill, move or re-schedule it. Knobs on a disk file system are still written back, knobs
    on a file system rebuilt at boot (tmpfs here, like cgroupfs and sysfs) are not."""
    if system.fs_type("/dev/shm") != "tmpfs" or system.fs_type(tmp_path) in system.VOLATILE_FS:
        pytest.skip("needs /dev/shm on tmpfs and the test's temporary directory on a disk")
    victim = _sleeper()
    disk = tmp_path / "knob"
    disk.write_text("new")
    shm = Path("/dev/shm") / f"cohort-tune-test-{os.getpid()}"
    try:
        shm.write_text("new")
        start = proc_start_time(victim.pid)
        entries = [
            {"op": "session", "pid": 1, "id": "x", "boot_id": "00000000-0000-0000-0000-000000000000", "locks": []},
            {"op": "write", "path": str(disk), "prior": "old"},
            {"op": "write", "path": str(shm), "prior": "old"},
            {"op": "spawn", "pid": victim.pid, "start": start},
            {"op": "sched", "tid": victim.pid, "start": start, "prior": {"policy": 0}},
        ]
        j = Journal(tmp_path / "state")
        j.begin()
        j.rewrite(entries)
        lines: list[str] = []
        assert restore(j, echo=lines.append) == []
        assert victim.poll() is None, "restore killed a process named by a journal of another boot"
        assert disk.read_text() == "old"
        assert system.fs_type(shm) == "tmpfs" and shm.read_text() == "new"
        assert any("from boot 00000000" in line for line in lines)
        # the same journal on this boot does kill it
        entries[0]["boot_id"] = boot_id()
        j.begin()
        j.rewrite(entries)
        assert restore(j, echo=quiet) == []
        assert proc_start_time(victim.pid) != start  # killed (and reaped by restore's kill_group)
    finally:
        victim.kill()
        victim.wait()
        shm.unlink(missing_ok=True)


def test_every_journal_write_fsyncs_the_file_and_its_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    synced: list[str] = []
    real = os.fsync

    def fsync(fd: int) -> None:
        synced.append("dir" if stat.S_ISDIR(os.fstat(fd).st_mode) else "file")
        real(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    j = Journal(tmp_path / "state")
    j.begin()
    assert "dir" in synced  # the new state.jsonl's directory entry
    for i in range(3):
        synced.clear()
        j.append({"op": "mkdir", "path": f"/x/{i}"})
        assert synced == ["file", "dir"]
    synced.clear()
    j.clear()
    assert synced == ["dir"]


# ---- sessions on the fake cgroup v2 tree (no root needed) -------------------------------------


def _fake(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> FakeCgroup2:
    fake = FakeCgroup2(tmp_path / "cgroup2", subtree_control="cpu memory pids")
    monkeypatch.setattr(system, "KERNEL", fake)
    monkeypatch.setattr(runner, "detect", fake.detect)
    monkeypatch.setattr(system, "LOCK_DIR", str(tmp_path / "locks"))
    return fake


def _knobs() -> dict:
    return {"a": {"cpu_shares": {"range": [128, 4096]}, "cpuset": {"choices": ["all", "0"]}}}


def test_session_journals_its_boot_id(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _fake(tmp_path, monkeypatch)
    with Session(make_spec(tmp_path, _knobs()), tmp_path / "state") as s:
        e = s.journal.session()
        assert e is not None and e["boot_id"] == boot_id() and e["id"] == s.session_id


def _driver(tmp_path: Path, fake: FakeCgroup2, *hooks: str, spec: Path, timeout: float = 90) -> int:
    args = [sys.executable, str(DRIVER), "--fake-v2", str(fake.root), "--lock-dir", str(tmp_path / "locks"), *hooks]
    args += ["--", "run", str(spec), "--state-dir", str(tmp_path / "state"), "--db", str(tmp_path / "db")]
    args += ["--trials", "1"]
    return subprocess.run(args, capture_output=True, timeout=timeout).returncode


def _spec_file(tmp_path: Path) -> Path:
    p = tmp_path / "s.toml"
    p.write_text(toml_of(spec_dict(tmp_path, _knobs(), duration_s=0.4)))
    return p


def test_signals_during_rollback_wait_until_it_is_done(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """SIGTERM, SIGINT and SIGTERM again while the rollback runs: every knob still comes back,
    the journal is removed, and then the SIGTERM is honoured (the process dies of it)."""
    fake = _fake(tmp_path, monkeypatch)
    before = fake.snapshot()
    rc = _driver(tmp_path, fake, "--signals-in-restore", spec=_spec_file(tmp_path))
    assert rc == -signal.SIGTERM
    assert fake.snapshot() == before
    assert not Journal(tmp_path / "state").exists()


def test_a_new_session_restores_a_dead_sessions_journal_first(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = _fake(tmp_path, monkeypatch)
    before = fake.snapshot()
    assert _driver(tmp_path, fake, "--kill-after-journal", "9", spec=_spec_file(tmp_path)) == -signal.SIGKILL
    assert Journal(tmp_path / "state").exists() and fake.snapshot() != before
    lines: list[str] = []
    with Session(make_spec(tmp_path, _knobs()), tmp_path / "state", echo=lines.append) as s:
        assert any("restoring the unfinished session" in line for line in lines)
        assert len(s.journal.entries()) < 9 and s.journal.session()["pid"] == os.getpid()  # type: ignore[index]
    assert fake.snapshot() == before


def test_a_new_session_refuses_while_the_earlier_one_runs_or_cannot_be_restored(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _fake(tmp_path, monkeypatch)
    spec = make_spec(tmp_path, _knobs())
    with Session(spec, tmp_path / "state"), pytest.raises(StateError, match="another cohort tune session"):
        Session(spec, tmp_path / "state").__enter__()
    bad = tmp_path / "bad"
    bad.mkdir()
    j = Journal(tmp_path / "state")
    j.begin()
    j.append({"op": "session", "pid": 1, "id": "y", "boot_id": boot_id(), "locks": []})
    j.append({"op": "write", "path": str(bad), "prior": "1"})
    with pytest.raises(StateError, match=r"could not restore the earlier session.*restore --force"):
        Session(spec, tmp_path / "state").__enter__()
    assert j.exists() and j.failures()
