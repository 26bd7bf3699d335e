"""The ROS 2 probe (zenoh-ros2-sdk nodes) on loopback: directly, and through two `cohort bridge`
processes with the topic's key configured; every message arrives once, in order. Behaviour only."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("zenoh_ros2_sdk")

from test_bridge import free_tcp_port, free_udp_port, lrt_base

from cohort.bridge.bench import loopback_pair_config

PYTHON_DIR = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "PYTHONPATH": str(PYTHON_DIR), "COHORT_BENCH_SECRET": "ros2 probe test secret"}
# Longer than a bridge may take to stop: close_timeout_s (10 s) plus the watchdog's 5 s.
BRIDGE_STOP_S = 30


def spawn(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=ENV,
    )


def expect(p: subprocess.Popen[str], want: str) -> None:
    assert p.stdout is not None
    for line in p.stdout:
        if line.strip() == want:
            return
    raise AssertionError(f"exited before {want!r}: {p.stderr.read() if p.stderr else ''}")


def report(p: subprocess.Popen[str]) -> dict:
    out, err = p.communicate(timeout=60)
    lines = [line for line in out.splitlines() if line.startswith("{")]
    assert lines, err
    return json.loads(lines[-1])


def run_topic(pub_ep: tuple[str, str], sub_ep: tuple[str, str], count: int = 50) -> dict:
    sub = spawn("cohort.ros2_probe", "sub", "--count", str(count), *sub_ep, "--timeout-s", "40")
    pub = spawn("cohort.ros2_probe", "pub", "--count", str(count), "--rate", "200", *pub_ep, "--timeout-s", "40")
    try:
        expect(sub, "ready")
        expect(pub, "ready")
        expect(sub, "flowing")
        assert pub.stdin is not None
        pub.stdin.write("go\n")
        pub.stdin.flush()
        got = report(sub)
        sent = report(pub)
    finally:
        for p in (sub, pub):
            p.kill()
            p.wait()
    assert sent["sent"] == count
    return got


def test_a_ros2_topic_directly_arrives_once_in_order() -> None:
    ep = f"tcp/127.0.0.1:{free_tcp_port()}"
    got = run_topic(("--listen", ep), ("--connect", ep))
    assert (got["received"], got["missing"], got["duplicates"], got["out_of_order"]) == (50, 0, 0, 0)
    assert len(got["delays_ms"]) == 50 and all(d >= 0 for d in got["delays_ms"])


def test_a_ros2_topic_through_two_bridges_arrives_once_in_order(tmp_path: Path) -> None:
    zports = [free_tcp_port(), free_tcp_port()]
    group, lrt = free_udp_port(), lrt_base([1, 2])
    paths = [
        loopback_pair_config(tmp_path, p, zports[p - 1], group, lrt, key="0/cmd_vel/**", priority="real_time")
        for p in (1, 2)
    ]
    bridges = [spawn("cohort.bridge", "--config", str(p), "--duration", "60") for p in paths]
    try:
        time.sleep(0.5)
        for b in bridges:
            assert b.poll() is None, b.stderr.read() if b.stderr else ""
        got = run_topic(
            ("--connect", f"tcp/127.0.0.1:{zports[0]}"), ("--connect", f"tcp/127.0.0.1:{zports[1]}"), count=100
        )
    finally:
        for b in bridges:
            b.terminate()
        # Each bridge stops within its own bound (close_timeout_s, 10 s by default, plus the
        # watchdog's margin), exiting 0; reading its pipes meanwhile, so none blocks on them.
        try:
            ends = [b.communicate(timeout=BRIDGE_STOP_S) for b in bridges]
        finally:
            for b in bridges:
                if b.poll() is None:
                    b.kill()
                    b.wait()
    for b, (_, err) in zip(bridges, ends, strict=True):
        assert b.returncode == 0, err
    assert (got["received"], got["missing"], got["duplicates"], got["out_of_order"]) == (100, 0, 0, 0)


def test_the_probe_refuses_to_run_without_an_endpoint() -> None:
    p = subprocess.run(
        [sys.executable, "-m", "cohort.ros2_probe", "sub", "--count", "1"],
        capture_output=True,
        text=True,
        env=ENV,
        timeout=30,
    )
    assert p.returncode != 0
    assert "--listen or --connect" in p.stderr
