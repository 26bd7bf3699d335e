"""Zenoh request-reply reference on loopback (skipped when ``zenoh`` is not importable)."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("zenoh")

from cohort import zenoh_rr

PYTHON_DIR = Path(__file__).resolve().parents[1]


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _run(*args: str) -> list[str]:
    return [sys.executable, "-m", "cohort.zenoh_rr", *args]


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(PYTHON_DIR), env.get("PYTHONPATH", "")) if p)
    return env


def _start_queryable(endpoint: str, key: str, reply_len: int) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        _run("queryable", "--listen", endpoint, "--key", key, "--reply-len", str(reply_len), "--stop-after", "20"),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=_env(),
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert line.strip() == "ready", proc.stderr.read() if proc.stderr else line
    return proc


def test_get_collects_every_reply_from_every_queryable() -> None:
    endpoints = [f"tcp/127.0.0.1:{_free_port()}" for _ in range(2)]
    procs = [_start_queryable(e, f"cohort/rr/{i + 1}", 1500) for i, e in enumerate(endpoints)]
    try:
        args = ["get"]
        for e in endpoints:
            args += ["--connect", e]
        args += ["--key", "cohort/rr/*", "--expect", "2", "--request-len", "1500"]
        args += ["--interactions", "10", "--timeout-s", "8"]
        out = subprocess.run(_run(*args), capture_output=True, text=True, env=_env(), timeout=15, check=True)
        result = json.loads(out.stdout.strip().splitlines()[-1])
        assert result["complete"] == 10
        assert len(result["latencies_ms"]) == 10
        assert all(x > 0 for x in result["latencies_ms"])
        assert result["total_s"] > 0
    finally:
        for p in procs:
            p.send_signal(signal.SIGTERM)
        for p in procs:
            # SIGTERM ends the queryable promptly and cleanly.
            assert p.wait(timeout=5) == 0


def test_get_reports_incomplete_interactions_within_its_timeout() -> None:
    endpoint = f"tcp/127.0.0.1:{_free_port()}"
    proc = _start_queryable(endpoint, "cohort/rr/1", 10)
    try:
        start = time.monotonic()
        # Expects two replies but only one queryable exists: nothing completes, bounded by 1.5 s.
        result = zenoh_rr.run_get([endpoint], "cohort/rr/*", 2, 10, 3, 1.5)
        assert time.monotonic() - start < 5
        assert result["complete"] == 0
        assert result["latencies_ms"] == []
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=5) == 0


def test_queryable_stops_after_its_time_limit() -> None:
    cmd = _run("queryable", "--listen", f"tcp/127.0.0.1:{_free_port()}", "--key", "cohort/rr/9", "--stop-after", "0.3")
    out = subprocess.run(cmd, capture_output=True, text=True, env=_env(), timeout=10, check=True)
    assert out.stdout.strip() == "ready"


def test_parser_rejects_bad_arguments() -> None:
    with pytest.raises(SystemExit):
        zenoh_rr.main(["get", "--key", "k", "--expect", "1", "--interactions", "1", "--timeout-s", "1"])
    with pytest.raises(SystemExit):
        zenoh_rr.main(["queryable", "--listen", "tcp/127.0.0.1:1", "--key", "k", "--reply-len", "-1"])
