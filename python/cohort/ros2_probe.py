"""A ROS 2 topic over Zenoh, measured end to end: ``python3 -m cohort.ros2_probe pub|sub ...``.

A real ROS 2 client, not Cohort code: the publisher and the subscriber are ``zenoh-ros2-sdk``
(PyPI) nodes, which speak rmw_zenoh's conventions (key ``<domain>/<topic>/<type>/<RIHS01
hash>``, CDR payload, the rmw attachment, ``@ros2_lv`` liveliness tokens) without a ROS 2
install. The topic carries ``geometry_msgs/msg/TwistStamped`` (a velocity command, as a 100 Hz
``/cmd_vel`` is); the header's stamp is the publication time (``CLOCK_REALTIME``, the same
clock on every namespace of one host) and its ``frame_id`` the sequence number, so the
subscriber measures each message's one-way delay, losses, duplicates and order.

``pub --rate HZ --count N (--listen EP | --connect EP)... [--topic T] [--timeout-s S]``
    Prints ``ready`` once its node is declared, then publishes warm-up messages (``frame_id``
    ``w``) at ``--rate`` until a line ``go`` arrives on stdin; then ``--count`` measured messages
    (``frame_id`` 0, 1, ...) on an absolute schedule at ``--rate``, then one JSON line
    ``{"sent": N, "send_late_ms_p99": ...}`` and exits after a second's linger.

``sub --count N (--listen EP | --connect EP)... [--topic T] [--timeout-s S]``
    Prints ``ready`` once subscribed and ``flowing`` at the first message (warm-up or not).
    Exits when every measured message arrived or ``--timeout-s`` (from start) passed, printing
    one JSON line ``{"delays_ms": [...], "received": .., "missing": .., "duplicates": ..,
    "out_of_order": ..}`` (``delays_ms`` in arrival order, measured messages only).

``demo [--count N]``
    ``cohort demo``'s part: two robots' ``cohort bridge`` on loopback, the topic's key configured
    real-time; a publisher process joins robot 1's bridge, a subscriber process robot 2's;
    prints one JSON line with what arrived and the delays.

Endpoints are explicit (``--listen``/``--connect``, repeatable; multicast scouting and gossip
off), as a team on a shared channel would configure rmw_zenoh. The message definitions ship in
``cohort/ros2_msgs`` (the SDK would fetch them from GitHub otherwise).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
from pathlib import Path
from typing import Any

MSG_TYPE = "geometry_msgs/msg/TwistStamped"
MSGS_DIR = Path(__file__).resolve().parent / "ros2_msgs"
WARMUP_FRAME = "w"


def _sdk(listen: list[str], connect: list[str]) -> Any:
    """Imports ``zenoh_ros2_sdk`` with its registry on the shipped definitions and its session
    on explicit endpoints (the SDK reads ``ZENOH_CONFIG_OVERRIDE`` when it opens the session)."""
    if not listen and not connect:
        raise SystemExit("ros2_probe: give at least one --listen or --connect endpoint")
    os.environ["ZENOH_CONFIG_OVERRIDE"] = ";".join(
        [
            'mode="peer"',
            f"listen/endpoints={json.dumps(listen)}",
            f"connect/endpoints={json.dumps(connect)}",
            "scouting/multicast/enabled=false",
            "scouting/gossip/enabled=false",
        ]
    )
    import zenoh_ros2_sdk
    from zenoh_ros2_sdk import message_registry

    message_registry.get_registry(str(MSGS_DIR))
    return zenoh_ros2_sdk


def _stamp(store: Any, frame_id: str) -> dict[str, Any]:
    """The message's fields: a header stamped now, a constant twist."""
    types = store.types
    time_t, header_t = types["builtin_interfaces/msg/Time"], types["std_msgs/msg/Header"]
    vec_t, twist_t = types["geometry_msgs/msg/Vector3"], types["geometry_msgs/msg/Twist"]
    now = time.time_ns()
    return {
        "header": header_t(stamp=time_t(sec=now // 1_000_000_000, nanosec=now % 1_000_000_000), frame_id=frame_id),
        "twist": twist_t(linear=vec_t(x=0.5, y=0.0, z=0.0), angular=vec_t(x=0.0, y=0.0, z=0.1)),
    }


def _p99(v: list[float]) -> float:
    if not v:
        return 0.0
    s = sorted(v)
    return s[min(len(s) - 1, int(0.99 * len(s)))]


def run_pub(topic: str, rate: float, count: int, listen: list[str], connect: list[str], timeout_s: float) -> dict:
    sdk = _sdk(listen, connect)
    deadline = time.monotonic() + timeout_s
    pub = sdk.ROS2Publisher(topic, MSG_TYPE, node_name="cohort_probe_pub")
    store = pub.session_mgr.store
    go = threading.Event()

    def read_go() -> None:
        for line in sys.stdin:
            if line.strip() == "go":
                go.set()
                return

    threading.Thread(target=read_go, daemon=True).start()
    print("ready", flush=True)
    period = 1.0 / rate
    try:
        while not go.is_set() and time.monotonic() < deadline:
            pub.publish(**_stamp(store, WARMUP_FRAME))
            go.wait(period)
        late_ms: list[float] = []
        start = time.monotonic()
        sent = 0
        for seq in range(count):
            due = start + seq * period
            now = time.monotonic()
            if now > deadline:
                break
            if due > now:
                time.sleep(due - now)
            late_ms.append(max(0.0, time.monotonic() - due) * 1e3)
            pub.publish(**_stamp(store, str(seq)))
            sent += 1
        time.sleep(1.0)
    finally:
        pub.close()
    return {"sent": sent, "send_late_ms_p99": round(_p99(late_ms), 3)}


def run_sub(topic: str, count: int, listen: list[str], connect: list[str], timeout_s: float) -> dict:
    sdk = _sdk(listen, connect)
    deadline = time.monotonic() + timeout_s
    lock = threading.Lock()
    done = threading.Event()
    flowing = threading.Event()
    seen: set[int] = set()
    delays: list[float] = []
    counts = {"duplicates": 0, "out_of_order": 0, "highest": -1}

    def on_msg(msg: Any) -> None:
        now = time.time_ns()
        if not flowing.is_set():
            flowing.set()
            print("flowing", flush=True)
        frame = msg.header.frame_id
        if frame == WARMUP_FRAME:
            return
        seq = int(frame)
        sent = msg.header.stamp.sec * 1_000_000_000 + msg.header.stamp.nanosec
        with lock:
            if seq in seen:
                counts["duplicates"] += 1
                return
            seen.add(seq)
            if seq < counts["highest"]:
                counts["out_of_order"] += 1
            counts["highest"] = max(counts["highest"], seq)
            delays.append((now - sent) / 1e6)
            if len(seen) >= count:
                done.set()

    sub = sdk.ROS2Subscriber(topic, MSG_TYPE, on_msg, node_name="cohort_probe_sub")
    print("ready", flush=True)
    try:
        done.wait(max(0.0, deadline - time.monotonic()))
    finally:
        sub.close()
    with lock:
        return {
            "delays_ms": [round(d, 3) for d in delays],
            "received": len(seen),
            "missing": count - len(seen),
            "duplicates": counts["duplicates"],
            "out_of_order": counts["out_of_order"],
        }


def run_demo(count: int, timeout_s: float) -> dict[str, Any]:
    """Two bridges on loopback and a ROS 2 publisher and subscriber through them (``demo``)."""
    import subprocess

    from cohort.bridge.bench import loopback_pair

    def probe(*args: str) -> subprocess.Popen[str]:
        cmd = [sys.executable, "-m", "cohort.ros2_probe", *args, "--count", str(count), "--timeout-s", str(timeout_s)]
        return subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def expect(p: subprocess.Popen[str], want: str) -> None:
        assert p.stdout is not None
        for line in p.stdout:
            if line.strip() == want:
                return
        raise RuntimeError(f"ROS 2 node exited before {want!r}: {p.stderr.read() if p.stderr else ''}")

    def report(p: subprocess.Popen[str]) -> dict[str, Any]:
        out, err = p.communicate(timeout=timeout_s + 30)
        lines = [line for line in out.splitlines() if line.startswith("{")]
        if not lines:
            raise RuntimeError(f"ROS 2 node printed no report: {err.strip()[-300:]}")
        r: dict[str, Any] = json.loads(lines[-1])
        return r

    with loopback_pair(key="0/cmd_vel/**", priority="real_time") as (bridges, zports):
        sub = probe("sub", "--topic", "/cmd_vel", "--connect", f"tcp/127.0.0.1:{zports[2]}")
        pub = probe("pub", "--topic", "/cmd_vel", "--connect", f"tcp/127.0.0.1:{zports[1]}")
        try:
            for p, want in ((sub, "ready"), (pub, "ready"), (sub, "flowing")):
                expect(p, want)
            assert pub.stdin is not None
            pub.stdin.write("go\n")
            pub.stdin.flush()
            got, sent = report(sub), report(pub)
        finally:
            for p in (sub, pub):
                if p.poll() is None:
                    p.kill()
                    p.wait()
        counters = [b.counters.snapshot() for b in bridges]
    d = sorted(got["delays_ms"])
    return {
        "sent": sent["sent"],
        "received": got["received"],
        "missing": got["missing"],
        "duplicates": got["duplicates"],
        "out_of_order": got["out_of_order"],
        "delay_p50_ms": round(d[len(d) // 2], 3) if d else None,
        "delay_p99_ms": round(d[min(len(d) - 1, int(0.99 * len(d)))], 3) if d else None,
        "bridged_in": counters[1].get("bridged_in", 0),
    }


def _positive(kind: Any) -> Any:
    def parse(s: str) -> Any:
        v = kind(s)
        if v <= 0:
            raise argparse.ArgumentTypeError(f"{s} is not positive")
        return v

    return parse


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python3 -m cohort.ros2_probe", description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    d = sub.add_parser("demo")
    d.add_argument("--count", type=_positive(int), default=200, help="messages at 100 Hz")
    d.add_argument("--timeout-s", type=_positive(float), default=60.0, help="bound on the whole run")
    for name in ("pub", "sub"):
        s = sub.add_parser(name)
        s.add_argument("--topic", default="/cmd_vel", help="ROS 2 topic name")
        s.add_argument("--count", type=_positive(int), required=True, help="measured messages")
        s.add_argument("--listen", action="append", default=[], help="Zenoh endpoint to listen on (repeat)")
        s.add_argument("--connect", action="append", default=[], help="Zenoh endpoint to connect to (repeat)")
        s.add_argument("--timeout-s", type=_positive(float), default=60.0, help="bound on the whole run")
        if name == "pub":
            s.add_argument("--rate", type=_positive(float), default=100.0, help="messages per second")
    return p


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point."""
    a = _parser().parse_args(argv)
    if a.cmd == "demo":
        out = run_demo(a.count, a.timeout_s)
    elif a.cmd == "pub":
        out = run_pub(a.topic, a.rate, a.count, a.listen, a.connect, a.timeout_s)
    else:
        out = run_sub(a.topic, a.count, a.listen, a.connect, a.timeout_s)
    print(json.dumps(out), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
