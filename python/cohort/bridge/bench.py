"""What the bridge adds per sample, on loopback: ``python -m cohort.bridge.bench [--json]``.

Two robots' applications play ping-pong (one 64-byte sample out, one back, the next ping only
after the pong): once over Zenoh directly (the two application sessions connected, peer mode),
once through two bridges (each application on its own robot's Zenoh session, the bridges
between them over LRT), and once over one LRT connection alone (no Zenoh, no bridge), to
attribute the difference. Half a round trip is one sample's one-way delay; bridged minus
direct is what the bridge adds (two Zenoh hops more, the Python on both ends, LRT on
loopback). The same run times the bridge's own Python per sample (wire encode and decode).
Loopback has no loss: this measures the bridge's cost, not the channel (docs/bridge.md).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import socket
import statistics
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from cohort.bridge.zconf import peer_config

from . import wire
from .config import load_config
from .core import Bridge


def _free_port(kind: int) -> int:
    with socket.socket(socket.AF_INET, kind) as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _session(listen: list[str], connect: list[str]) -> Any:
    import zenoh

    return zenoh.open(peer_config(listen, connect))


def _ping_pong(a: Any, b: Any, n: int, warmup: int, payload: bytes) -> list[float]:
    """Round trips in µs (after ``warmup``) between application sessions ``a`` and ``b``."""
    import zenoh

    block = zenoh.CongestionControl.BLOCK
    pong = threading.Event()
    b.declare_subscriber("bench/ping", lambda s: b.put("bench/pong", s.payload.to_bytes(), congestion_control=block))
    a.declare_subscriber("bench/pong", lambda _s: pong.set())
    # Until the declarations have travelled: a ping answered.
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        pong.clear()
        a.put("bench/ping", payload, congestion_control=block)
        if pong.wait(0.2):
            break
    else:
        raise RuntimeError("no pong within 20 s")
    rtts: list[float] = []
    for i in range(warmup + n):
        pong.clear()
        t = time.perf_counter()
        a.put("bench/ping", payload, congestion_control=block)
        if not pong.wait(5):
            raise RuntimeError(f"ping {i} lost")
        if i >= warmup:
            rtts.append((time.perf_counter() - t) * 1e6)
    return rtts


def _figures(rtts: list[float]) -> dict[str, float]:
    q = statistics.quantiles(rtts, n=100)
    return {"rtt_us_p50": round(q[49], 1), "rtt_us_p90": round(q[89], 1), "rtt_us_p99": round(q[98], 1)}


def loopback_pair_config(
    tmp: Path,
    pid: int,
    zport: int,
    group_port: int,
    lrt_port: int,
    *,
    key: str = "bench/**",
    priority: str | None = None,
    secret_env: str = "COHORT_BENCH_SECRET",
) -> Path:
    """Robot ``pid``'s (1 or 2) configuration of a two-robot team on loopback (robot ``p`` at
    127.0.0.``p``), its Zenoh session listening on ``tcp/127.0.0.1:zport``, carrying ``key``
    (with ``priority`` if given); written into ``tmp``."""
    peer = 3 - pid
    prio = f'priority = "{priority}"\n' if priority else ""
    text = f"""
[robot]
pid = {pid}
address = "127.0.0.{pid}"
[team]
id = 7
secret_env = "{secret_env}"
broadcast = "127.255.255.255"
group_port = {group_port}
lrt_port = {lrt_port}
[[peer]]
pid = {peer}
address = "127.0.0.{peer}"
[zenoh]
listen = ["tcp/127.0.0.1:{zport}"]
[[publish]]
key = "{key}"
{prio}"""
    p = tmp / f"robot{pid}.toml"
    p.write_text(text)
    return p


@contextlib.contextmanager
def loopback_pair(key: str = "bench/**", priority: str | None = None) -> Iterator[tuple[list[Bridge], dict[int, int]]]:
    """Two robots' bridges on loopback carrying ``key``, their links up; yields the bridges and
    each robot's Zenoh port (applications connect to ``tcp/127.0.0.1:PORT``); closes them after."""
    os.environ.setdefault("COHORT_BENCH_SECRET", "bench secret of 32 bytes, loopbk")
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        zports = {1: _free_port(socket.SOCK_STREAM), 2: _free_port(socket.SOCK_STREAM)}
        group_port = _free_port(socket.SOCK_DGRAM)
        lrt_port = 20000 + (os.getpid() % 750) * 16  # below the ephemeral ports (32768 and up)
        configs = [
            loopback_pair_config(tmp, p, zports[p], group_port, lrt_port, key=key, priority=priority) for p in (1, 2)
        ]
        bridges = [Bridge(load_config(c)).start() for c in configs]
        try:
            for br in bridges:
                if not br.wait_ready(20):
                    raise RuntimeError(f"bridge links not up: {br.stats()}")
            yield bridges, zports
        finally:
            for br in bridges:
                br.close()


def run(n: int, warmup: int, size: int) -> dict[str, Any]:
    payload = bytes(size)
    # Direct: the two application sessions connected to each other.
    port = _free_port(socket.SOCK_STREAM)
    a, b = _session([f"tcp/127.0.0.1:{port}"], []), _session([], [f"tcp/127.0.0.1:{port}"])
    try:
        direct = _ping_pong(a, b, n, warmup, payload)
    finally:
        a.close()
        b.close()

    with loopback_pair() as (bridges, zports):
        a = _session([], [f"tcp/127.0.0.1:{zports[1]}"])
        b = _session([], [f"tcp/127.0.0.1:{zports[2]}"])
        try:
            bridged = _ping_pong(a, b, n, warmup, payload)
        finally:
            a.close()
            b.close()
        counters = [br.counters.snapshot() for br in bridges]

    # LRT alone, the same ping-pong on one connection (both directions), for attribution.
    from cohort.lrt import LrtSocket

    secret = os.environ["COHORT_BENCH_SECRET"].encode()
    server = LrtSocket.listen("127.0.0.1:0", secret=secret, team=7, sender_id=1)
    host, lport = server.local_addr
    client = LrtSocket.connect(f"{host}:{lport}", secret=secret, team=7, sender_id=2)
    server.accept(timeout=10)
    lrt: list[float] = []
    try:
        for i in range(warmup + n):
            t = time.perf_counter()
            client.send(payload)
            server.send(server.recv(timeout=5))
            client.recv(timeout=5)
            if i >= warmup:
                lrt.append((time.perf_counter() - t) * 1e6)
    finally:
        client.close()
        server.close()

    # The bridge's own Python per sample: encode on one side, decode on the other.
    s = wire.Sample(key="bench/ping", payload=payload, encoding="zenoh/bytes", priority=5, block=True, origin=1)
    reps = 20000
    t = time.perf_counter()
    for _ in range(reps):
        wire.decode(wire.encode(s))
    codec_us = (time.perf_counter() - t) / reps * 1e6

    d_fig, b_fig = _figures(direct), _figures(bridged)
    return {
        "bench": "bridge_overhead",
        "command": f"python -m cohort.bridge.bench --json --samples {n} --warmup {warmup} --size {size}",
        "samples": n,
        "warmup": warmup,
        "payload_bytes": size,
        "link": "loopback, no loss",
        "direct": d_fig,
        "bridged": b_fig,
        "lrt_alone": _figures(lrt),
        "added_one_way_us_p50": round((b_fig["rtt_us_p50"] - d_fig["rtt_us_p50"]) / 2, 1),
        "added_one_way_us_p99": round((b_fig["rtt_us_p99"] - d_fig["rtt_us_p99"]) / 2, 1),
        "ratio_rtt_p50_bridged_over_direct": round(b_fig["rtt_us_p50"] / d_fig["rtt_us_p50"], 2),
        "wire_codec_us_per_sample": round(codec_us, 2),
        "bridge_counters": counters,
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m cohort.bridge.bench", description=__doc__.splitlines()[0])
    p.add_argument("--samples", type=int, default=1000)
    p.add_argument("--warmup", type=int, default=100)
    p.add_argument("--size", type=int, default=64)
    p.add_argument("--json", action="store_true", help="print the figures as one JSON object")
    args = p.parse_args(argv)
    fig = run(args.samples, args.warmup, args.size)
    if args.json:
        print(json.dumps(fig))
    else:
        for k, v in fig.items():
            print(f"{k}: {v}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
