"""Knobs really applied and restored (root, real cgroups), dry-run output, admission errors."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from test_tune_helpers import THP, make_spec, need_root_cgroups, system_lock_free_or_skip

from cohort.tune import sched
from cohort.tune.cgroups import detect, shares_to_weight
from cohort.tune.errors import AdmissionError, KnobError, StateError
from cohort.tune.runner import Session
from cohort.tune.system import Journal, System, normalize_read


@pytest.fixture
def thp_guard() -> Iterator[str]:
    """Whatever a test does, THP ends as it started."""
    system_lock_free_or_skip()
    before = normalize_read(THP, Path(THP).read_text())
    yield before
    Path(THP).write_text(before)


def test_detect_v1_and_v2_from_mount_tables() -> None:
    v1 = detect(
        "auto",
        "cgroup /sys/fs/cgroup/cpu cgroup rw,cpu 0 0\ncgroup /sys/fs/cgroup/memory cgroup rw,memory 0 0\n",
        "4:memory:/a/b\n1:cpu:/\n0::/\n",
    )
    assert v1.version == 1
    assert v1.bases["memory"] == Path("/sys/fs/cgroup/memory/a/b")
    assert v1.app_dir("cpu", "cohort-tune", "nav") == Path("/sys/fs/cgroup/cpu/cohort-tune/nav")
    assert shares_to_weight(1024) == 100
    assert shares_to_weight(2) == 1 and shares_to_weight(262144) == 10000


def test_apply_then_rollback_removes_everything(tmp_path: Path, thp_guard: str) -> None:
    need_root_cgroups()
    other = "always" if thp_guard != "always" else "never"
    spec = make_spec(
        tmp_path,
        {
            "a": {
                "cpu_shares": {"range": [128, 4096]},
                "mem_soft_limit_mib": {"range": [0, 512]},
                "cpuset": {"choices": ["all", "0"]},
            },
            "system": {"thp": {"choices": ["always", "madvise", "never"]}},
        },
    )
    with Session(spec, tmp_path / "state") as s:
        s.apply_static({"a.cpu_shares": 333, "a.mem_soft_limit_mib": 100, "a.cpuset": "0", "system.thp": other})
        cpu = s.cg.dir("cpu", "a")
        if s.layout.version == 1:
            assert (cpu / "cpu.shares").read_text().strip() == "333"
            assert int((s.cg.dir("memory", "a") / "memory.soft_limit_in_bytes").read_text()) == 100 * 1024 * 1024
        assert (s.cg.dir("cpuset", "a") / "cpuset.cpus").read_text().strip() == "0"
        assert normalize_read(THP, Path(THP).read_text()) == other
        assert Journal(tmp_path / "state").exists()
    assert not cpu.exists()
    assert not s.cg.dir("memory", "a").exists()
    assert normalize_read(THP, Path(THP).read_text()) == thp_guard
    assert not Journal(tmp_path / "state").exists()


def test_restore_gives_back_exact_prior_values_of_existing_cgroup(tmp_path: Path, thp_guard: str) -> None:
    """Knobs of a cgroup that existed before the session are written back, not removed."""
    need_root_cgroups()
    spec = make_spec(tmp_path, {"a": {"cpu_shares": {"range": [128, 4096]}, "mem_soft_limit_mib": {"range": [0, 512]}}})
    layout = detect()
    if layout.version != 1:
        pytest.skip("v1 files")
    made = []
    for c in ("cpu", "memory"):
        for d in (layout.root_dir(c, spec.cgroup_root), layout.app_dir(c, spec.cgroup_root, "a")):
            d.mkdir()
            made.append(d)
    try:
        cpu = layout.app_dir("cpu", spec.cgroup_root, "a")
        mem = layout.app_dir("memory", spec.cgroup_root, "a")
        (cpu / "cpu.shares").write_text("777")
        (mem / "memory.soft_limit_in_bytes").write_text(str(64 << 20))
        before = {
            p: p.read_text()
            for p in (cpu / "cpu.shares", mem / "memory.soft_limit_in_bytes", cpu / "cpu.rt_runtime_us")
        }
        with Session(spec, tmp_path / "state") as s:
            s.apply_static({"a.cpu_shares": 2000, "a.mem_soft_limit_mib": 0})
            assert (cpu / "cpu.shares").read_text().strip() == "2000"
        assert {p: p.read_text() for p in before} == before
    finally:
        for d in reversed(made):
            d.rmdir()


def test_deadline_on_every_thread(tmp_path: Path) -> None:
    need_root_cgroups()
    spec = make_spec(
        tmp_path,
        {
            "a": {
                "rt": {"choices": ["none", "deadline"]},
                "rt_runtime_ms": {"range": [1.0, 10.0]},
                "rt_budget_us": {"value": 20000},
            }
        },
        threads=3,
        duration_s=0.6,
    )
    seen: list[dict[str, int]] = []
    with Session(spec, tmp_path / "state") as s:
        cfg = s.resolve({"a.rt": "deadline", "a.rt_runtime_ms": 5.0, "a.rt_period_ms": 50.0})
        s.apply_static(cfg)
        s.start_app(spec.apps[0], 20, tmp_path / "m")
        from cohort.tune.protocol import Collector

        s._wait_ready({"a": Collector(str(tmp_path / "m"))}, 10)
        attr = s.rt_attr(spec.apps[0], cfg)
        assert attr is not None
        done: set[int] = set()
        assert s.apply_rt(spec.apps[0], attr, done) == 4  # main thread + 3
        seen = [sched.get_attr(t) for t in done]
    assert all(a["policy"] == sched.SCHED_DEADLINE and a["runtime_ns"] == 5_000_000 for a in seen)
    assert len(seen) == 4


def test_admission_control_ebusy_is_a_clear_error(tmp_path: Path) -> None:
    need_root_cgroups()
    spec = make_spec(
        tmp_path, {"a": {"rt": {"choices": ["none", "deadline"]}, "rt_budget_us": {"value": 20000}}}, threads=3
    )
    with Session(spec, tmp_path / "state") as s:
        cfg = s.resolve({"a.rt": "deadline"})
        s.apply_static(cfg)
        s.start_app(spec.apps[0], 20, tmp_path / "m")
        from cohort.tune.protocol import Collector

        s._wait_ready({"a": Collector(str(tmp_path / "m"))}, 10)
        attr = sched.deadline_attr(95.0, 100.0, 100.0)  # 4 threads x 0.95 CPU > 2 CPUs
        with pytest.raises(AdmissionError, match=r"\(EBUSY\)"):
            s.apply_rt(spec.apps[0], attr, set())


def test_fifo_needs_rt_budget_and_gets_it(tmp_path: Path) -> None:
    need_root_cgroups()
    spec = make_spec(
        tmp_path, {"a": {"rt": {"choices": ["none", "fifo"]}, "rt_budget_us": {"value": 20000}}}, duration_s=0.5
    )
    with Session(spec, tmp_path / "state") as s:
        m = s.measure({"a.rt": "fifo", "a.fifo_priority": 10})
        assert m is not None and m.stats["a.loop_ms"]["n"] > 5
        if s.layout.version == 1:
            assert (s.cg.dir("cpu", "a") / "cpu.rt_runtime_us").read_text().strip() == "20000"


def test_failed_write_is_an_error_not_a_noop(tmp_path: Path) -> None:
    need_root_cgroups()
    spec = make_spec(tmp_path, {"a": {"cpuset": {"choices": ["all", "0"]}}})
    with Session(spec, tmp_path / "state") as s, pytest.raises(KnobError, match=r"cpuset\.cpus"):
        s.cg.set_cpuset("a", "63")  # not an online CPU


def test_dry_run_prints_writes_and_changes_nothing(tmp_path: Path, thp_guard: str) -> None:
    need_root_cgroups()
    spec = make_spec(
        tmp_path, {"a": {"cpu_shares": {"range": [128, 4096]}}, "system": {"thp": {"choices": ["always", "never"]}}}
    )
    lines: list[str] = []
    with Session(spec, tmp_path / "state", dry_run=True, echo=lines.append) as s:
        s.measure({"a.cpu_shares": 500, "system.thp": "never" if thp_guard != "never" else "always"})
        cpu = s.cg.dir("cpu", "a")
    text = "\n".join(lines)
    assert f"mkdir {cpu}" in text
    assert f"{cpu}/cpu.{'shares' if s.layout.version == 1 else 'weight'} <- " in text
    assert f"write {THP} <- " in text
    assert "spawn a:" in text
    assert not cpu.exists()
    assert normalize_read(THP, Path(THP).read_text()) == thp_guard
    assert not (tmp_path / "state" / "state.jsonl").exists()


def test_unrestored_session_blocks_a_new_one(tmp_path: Path) -> None:
    j = Journal(tmp_path)
    j.begin()
    j.append({"op": "mkdir", "path": str(tmp_path / "x")})
    with pytest.raises(StateError, match="restore"):
        Journal(tmp_path).begin()


def test_system_journals_prior_before_writing(tmp_path: Path) -> None:
    f = tmp_path / "knob"
    f.write_text("always [madvise] never\n")
    j = Journal(tmp_path / "s")
    j.begin()
    System(j).write(f, "x")
    e = j.entries()
    assert e[0]["op"] == "write" and e[0]["prior"] == "madvise"
    assert f.read_text() == "x"
    assert os.path.exists(j.path)


def test_apps_start_with_low_fds_taken(tmp_path: Path) -> None:
    """The start gate must not depend on which descriptor numbers are free in the tuner."""
    need_root_cgroups()
    held = [os.open("/dev/null", os.O_RDONLY) for _ in range(6)]
    try:
        spec = make_spec(tmp_path, {"a": {"cpu_shares": {"range": [128, 4096]}}}, duration_s=0.5)
        with Session(spec, tmp_path / "state") as s:
            for _ in range(2):
                m = s.measure({"a.cpu_shares": 700})
                assert m is not None and m.stats["a.loop_ms"]["n"] > 5
    finally:
        for fd in held:
            os.close(fd)


def test_the_tuner_reads_metrics_at_fifo_priority_its_apps_start_under_cfs(tmp_path: Path) -> None:
    """Its apps outweigh the tuner under CFS; a starved tuner stamps lines late. Inside a
    session the tuner's thread is SCHED_FIFO 1 (reset on fork), its apps are not, and the
    prior policy comes back at the end."""
    need_root_cgroups()
    before = os.sched_getscheduler(0)
    spec = make_spec(tmp_path, {"a": {"cpu_shares": {"range": [128, 4096]}}}, duration_s=0.6)
    with Session(spec, tmp_path / "state") as s:
        assert os.sched_getscheduler(0) == os.SCHED_FIFO | os.SCHED_RESET_ON_FORK
        assert os.sched_getparam(0).sched_priority == 1
        s.start_app(spec.apps[0], 20, tmp_path / "m")
        app = s.procs["a"].pid
        assert os.sched_getscheduler(app) == os.SCHED_OTHER
    assert os.sched_getscheduler(0) == before
