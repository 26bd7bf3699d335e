"""The metric protocol: what the Reporter writes, the Collector reads, including bad lines."""

import os
import subprocess
import time
from pathlib import Path

import pytest

from cohort.tune.protocol import ENV_VAR, Collector, ProtocolError, Reporter


def test_roundtrip(tmp_path: Path) -> None:
    path = tmp_path / "m"
    c = Collector(str(path))
    assert c.poll() == 0  # file not there yet
    with Reporter(str(path)) as r:
        r.report("loop_ms", 12.5)
        r.ready()
        r.report("frame_ms", 3.25)
    assert c.poll() == 2
    assert c.values("loop_ms") == [12.5]
    assert c.values("frame_ms") == [3.25]
    assert c.ready_at_s is not None
    assert c.malformed == []


def test_partial_lines_wait_for_newline(tmp_path: Path) -> None:
    path = tmp_path / "m"
    c = Collector(str(path))
    with open(path, "ab") as f:
        f.write(b"loop_ms 1")
        f.flush()
        assert c.poll() == 0
        f.write(b"7.5\n# comment\n\nready\n")
        f.flush()
    assert c.poll() == 1
    assert c.values("loop_ms") == [17.5]


def test_malformed_lines_are_kept_not_dropped(tmp_path: Path) -> None:
    path = tmp_path / "m"
    path.write_bytes(
        b"loop_ms abc\nloop_ms\nloop ms 3\nloop_ms nan\nloop_ms 4 5 6\nloop_ms 4 inf\nloop_ms 4 x\nok_ms 1e1\n"
    )
    c = Collector(str(path))
    assert c.poll() == 1
    assert c.values("ok_ms") == [10.0]
    assert len(c.malformed) == 7


def test_an_iteration_counts_from_when_it_began_when_the_app_says(tmp_path: Path) -> None:
    """A loop begun before the window (during start-up) but reported inside it is not counted;
    without a start time the read time decides, as before."""
    path = tmp_path / "m"
    window = time.monotonic()
    with Reporter(str(path)) as r:
        r.report("loop_ms", 12857.4, started=window - 12.8)  # began long before the window
        r.report("loop_ms", 25.0, started=window + 0.5)
        r.report("loop_ms", 30.0)  # no start time: read after `window`
        with pytest.raises(ProtocolError, match="start nan is not finite"):
            r.report("loop_ms", 1.0, started=float("nan"))
    assert path.read_text().splitlines()[0] == f"loop_ms 12857.4000 {window - 12.8:.6f}"
    c = Collector(str(path))
    c.poll()
    assert [s.started_s is None for s in c.samples] == [False, False, True]
    assert c.values("loop_ms", since_s=window) == [25.0, 30.0]
    assert c.values("loop_ms") == [12857.4, 25.0, 30.0]


def test_reporter_rejects_bad_names_and_values(tmp_path: Path) -> None:
    with Reporter(str(tmp_path / "m")) as r:
        with pytest.raises(ProtocolError):
            r.report("loop ms", 1.0)
        with pytest.raises(ProtocolError):
            r.report("loop_ms", float("inf"))


def test_any_language_can_report(tmp_path: Path) -> None:
    """A shell app speaks the protocol through the environment variable."""
    path = tmp_path / "m"
    script = (
        'for i in 1 2 3; do echo "loop_ms $i.5" >> "$COHORT_TUNE_METRICS"; done; echo ready >> "$COHORT_TUNE_METRICS"'
    )
    subprocess.run(["sh", "-c", script], env={**os.environ, ENV_VAR: str(path)}, check=True, timeout=10)
    c = Collector(str(path))
    c.poll()
    assert c.values("loop_ms") == [1.5, 2.5, 3.5]
    assert c.ready_at_s is not None


def test_threads_do_not_interleave(tmp_path: Path) -> None:
    import threading

    path = tmp_path / "m"
    r = Reporter(str(path))

    def burst(k: int) -> None:
        for i in range(500):
            r.report(f"m{k}", float(i))

    ts = [threading.Thread(target=burst, args=(k,)) for k in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    r.close()
    c = Collector(str(path))
    c.poll()
    assert c.malformed == []
    for k in range(4):
        assert c.values(f"m{k}") == [float(i) for i in range(500)]
