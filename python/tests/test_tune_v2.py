"""cgroup v2: restore of cgroup.subtree_control by +/- changes, cpu.weight, memory.high.

Against the fake cgroup v2 tree (``fake_cgroup2.py``, a test fixture with the kernel's rules),
and, for the subtree_control rule itself, against the real cgroup2 hierarchy where root can
enable a controller in it."""

from __future__ import annotations

import errno
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from fake_cgroup2 import FakeCgroup2
from test_tune_helpers import make_spec

from cohort.tune import runner, system
from cohort.tune.cgroups import shares_to_weight
from cohort.tune.errors import KnobError
from cohort.tune.runner import Session
from cohort.tune.system import Journal, System, restore, subtree_control_changes


def make_fake(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, subtree_control: str) -> FakeCgroup2:
    fake = FakeCgroup2(tmp_path / "cgroup2", subtree_control=subtree_control)
    monkeypatch.setattr(system, "KERNEL", fake)
    monkeypatch.setattr(runner, "detect", fake.detect)
    monkeypatch.setattr(system, "LOCK_DIR", str(tmp_path / "locks"))
    return fake


@pytest.fixture
def fake(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeCgroup2]:
    """The fake tree as this issue's machine had it: ``cpu memory pids`` already enabled."""
    yield make_fake(tmp_path, monkeypatch, "cpu memory pids")


def test_the_fake_tree_keeps_the_kernels_rule(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = make_fake(tmp_path, monkeypatch, "cpu memory pids")
    sc = str(fake.root / "cgroup.subtree_control")
    with pytest.raises(OSError) as e:
        fake.write(sc, "cpu memory")
    assert e.value.errno == errno.EINVAL
    fake.write(sc, "+cpuset")
    assert Path(sc).read_text() == "cpuset cpu memory pids"
    fake.write(sc, "-cpuset")
    assert Path(sc).read_text() == "cpu memory pids"
    fake.mkdir(fake.root / "x")
    assert (fake.root / "x" / "cpu.weight").read_text() == "100"
    fake.write(str(fake.root / "x" / "cgroup.subtree_control"), "+cpu")
    with pytest.raises(OSError) as e:
        fake.write(sc, "-cpu")  # still enabled below
    assert e.value.errno == errno.EBUSY
    with pytest.raises(OSError) as e:
        fake.write(str(fake.root / "x" / "cpu.weight"), "0")
    assert e.value.errno == errno.ERANGE


def test_shares_to_weight_maps_the_v1_default_to_the_v2_default() -> None:
    assert shares_to_weight(1024) == 100  # cgroup-v2.rst: cpu.weight default 100
    assert shares_to_weight(2) == 1 and shares_to_weight(262144) == 10000
    assert shares_to_weight(2048) == 2 * shares_to_weight(1024)  # ratios kept, as CFS uses them
    assert shares_to_weight(512) == 50


def test_subtree_control_changes() -> None:
    assert subtree_control_changes("cpuset cpu memory pids", "cpu memory pids") == ["-cpuset"]
    assert subtree_control_changes("cpu memory", "") == ["-cpu", "-memory"]
    assert subtree_control_changes("cpu", "cpu io") == ["+io"]
    assert subtree_control_changes("cpu", "cpu") == []


def _spec(tmp_path: Path) -> object:
    return make_spec(
        tmp_path,
        {
            "a": {
                "cpu_shares": {"range": [128, 4096]},
                "mem_soft_limit_mib": {"range": [0, 512]},
                "cpuset": {"choices": ["all", "0"]},
            }
        },
    )


@pytest.mark.parametrize("prior", ["cpu memory pids", ""])
def test_v2_session_gives_back_subtree_control_exactly(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, prior: str
) -> None:
    """A prior of ``cpu memory pids`` comes back as ``-cpuset`` (not as a plain list, which the
    kernel refuses); an empty prior removes everything the session enabled."""
    fake = make_fake(tmp_path, monkeypatch, prior)
    before = fake.snapshot()
    spec = _spec(tmp_path)
    with Session(spec, tmp_path / "state") as s:  # type: ignore[arg-type]
        assert s.layout.version == 2
        s.apply_static({"a.cpu_shares": 2048, "a.mem_soft_limit_mib": 100, "a.cpuset": "0"})
        app = s.cg.dir("cpu", "a")
        assert (fake.root / "cgroup.subtree_control").read_text().split() != prior.split()
        assert (app / "cpu.weight").read_text() == "200"
        assert (app / "memory.high").read_text() == str(100 << 20)
        assert (app / "cpuset.cpus").read_text() == "0"
    assert fake.snapshot() == before
    assert not Journal(tmp_path / "state").exists()


def test_v2_default_shares_give_the_default_weight(fake: FakeCgroup2, tmp_path: Path) -> None:
    with Session(_spec(tmp_path), tmp_path / "state") as s:  # type: ignore[arg-type]
        s.apply_static({})
        assert (s.cg.dir("cpu", "a") / "cpu.weight").read_text() == "100"
        assert (s.cg.dir("memory", "a") / "memory.high").read_text() == "max"


def test_v2_restore_of_a_journal_from_the_old_code(fake: FakeCgroup2, tmp_path: Path) -> None:
    """A journal holding a subtree_control prior as the kernel reads it back restores."""
    sc = fake.root / "cgroup.subtree_control"
    j = Journal(tmp_path / "state")
    j.begin()
    sys_ = System(j)
    sys_.write(sc, "+cpuset")
    assert j.entries()[0]["prior"] == "cpu memory pids"
    assert restore(j, echo=lambda _s: None) == []
    assert sc.read_text() == "cpu memory pids"


# ---- the real cgroup2 hierarchy ----------------------------------------------------------------


def _cgroup2_mount() -> Path | None:
    for line in Path("/proc/self/mounts").read_text().splitlines():
        parts = line.split()
        if len(parts) > 2 and parts[2] == "cgroup2":
            return Path(parts[1])
    return None


def test_real_cgroup2_subtree_control_is_restored_by_diff(tmp_path: Path) -> None:
    """On the machine's cgroup2 hierarchy: enable a controller that root's subtree_control does
    not have (in the root and in a new child), then restore: both read back as before."""
    if os.geteuid() != 0:
        pytest.skip("needs root")
    mount = _cgroup2_mount()
    if mount is None:
        pytest.skip("no cgroup2 mount")
    sc = mount / "cgroup.subtree_control"
    have = sc.read_text().split()
    spare = [c for c in (mount / "cgroup.controllers").read_text().split() if c not in have]
    if not spare:
        pytest.skip("no controller free to enable in the cgroup2 root")
    c = spare[0]
    child = mount / f"cohort-tune-test-{os.getpid()}"
    before = sc.read_text()
    j = Journal(tmp_path / "state")
    j.begin()
    s = System(j)
    try:
        s.write(sc, f"+{c}")
        s.mkdir(child)
        s.write(child / "cgroup.subtree_control", f"+{c}")
        assert c in sc.read_text().split() and c in (child / "cgroup.subtree_control").read_text().split()
        with pytest.raises(KnobError):
            system.raw_write(str(sc), " ".join([*have, c]))  # the kernel refuses a plain list
        assert restore(j, echo=lambda _s: None) == []
        assert sc.read_text() == before
        assert not child.exists()
    finally:
        if child.exists():
            with_c = (child / "cgroup.subtree_control").read_text().split()
            if c in with_c:
                system.raw_write(str(child / "cgroup.subtree_control"), f"-{c}")
            child.rmdir()
        if c in sc.read_text().split() and c not in before.split():
            system.raw_write(str(sc), f"-{c}")
