"""The Python bindings against the Rust binary: ``python -m cohort.lrt_rate [--json]`` (and
``cohort bench bindings``).

Issue 20's goal: a Python LRT pair sustains at least 80% of the Rust binary's message rate for
1 KiB messages. Both pairs run on loopback as two processes each, the same LRT configuration
(pacing at ``--rate-mbps``, default 10 000 so that the link's rate does not bind and the stacks
do), ``--count`` messages of ``--size`` bytes sent as fast as each sender can hand them over:

* **Rust**: ``cohort lrt recv --listen 127.0.0.1:P --count N --json`` and ``cohort lrt send
  127.0.0.1:P --size B --interval-ms 0 --count N``; the receiver reports ``first_to_last_s``.
* **Python**: this module's ``recv`` and ``send`` roles, ``cohort.LrtSocket.listen`` /
  ``connect``, ``send(bytes)`` per message and ``recv()`` per message, the receiver timing
  its first to its last message the same way.

Rate = messages / first-to-last seconds at the receiver. ``--reps`` repetitions, the two pairs
alternating (Rust first in odd repetitions); the report gives each repetition's rates, their
means with 95% intervals and the Python/Rust ratio paired by repetition.

``--pin`` puts every pair's receiver on one CPU and its sender on another (``sched_setaffinity``
before exec; their threads inherit it), the same for both pairs. Unpinned, where the scheduler
places four busy threads on two cores decides a pair's rate (the Rust pair is bimodal here,
about 70 000 or 45 000 msg/s), which pairing by repetition does not remove.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import shutil
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from cohort._progress import Steps

SECRET = "cohort bindings bench team secret"
#: Student's t (two-sided 95%) for 1 .. 10 degrees of freedom.
T95 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228)


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def mean_ci(v: list[float]) -> dict[str, float]:
    """Mean and the half-width of its 95% interval (Student's t); 0 with one value."""
    m = statistics.fmean(v)
    h = T95[min(len(v) - 2, len(T95) - 1)] * statistics.stdev(v) / math.sqrt(len(v)) if len(v) > 1 else 0.0
    return {"mean": round(m, 4), "ci95": round(h, 4), "runs": len(v)}


def run_recv(port: int, count: int, rate_mbps: float, timeout_s: float) -> dict[str, Any]:
    import cohort

    s = cohort.LrtSocket.listen(f"127.0.0.1:{port}", secret=SECRET.encode(), team=1, sender_id=1, rate_mbps=rate_mbps)
    print("ready", flush=True)
    try:
        s.accept(timeout=timeout_s)
        first = last = 0.0
        got = 0
        for i in range(count):
            s.recv(timeout=timeout_s)
            now = time.perf_counter()
            if i == 0:
                first = now
            last = now
            got += 1
    finally:
        s.close()
    return {"messages": got, "first_to_last_s": last - first}


def run_send(port: int, count: int, size: int, rate_mbps: float, timeout_s: float) -> dict[str, Any]:
    import cohort

    c = cohort.LrtSocket.connect(
        f"127.0.0.1:{port}",
        secret=SECRET.encode(),
        team=1,
        sender_id=2,
        rate_mbps=rate_mbps,
        handshake_timeout=timeout_s,
    )
    try:
        msg = bytes(size)
        for _ in range(count):
            c.send(msg, timeout=timeout_s)
        # The receiver may have had them all and closed first; it counts what arrived.
        with contextlib.suppress(cohort.ClosedError):
            c.flush(timeout=timeout_s)
    finally:
        c.close()
    return {"sent": count}


def _json_line(out: str) -> dict[str, Any]:
    lines = [line for line in out.splitlines() if line.startswith("{")]
    if not lines:
        raise RuntimeError(f"no report in {out[-400:]!r}")
    # `cohort lrt recv --json` prints one pretty-printed object.
    start = out.index("{")
    try:
        return json.loads(out[start:])
    except json.JSONDecodeError:
        return json.loads(lines[-1])


def pin_cpus() -> tuple[int, int] | None:
    """(receiver's CPU, sender's CPU) for ``--pin``: the last two this process may use, or
    ``None`` with fewer than two."""
    cpus = sorted(os.sched_getaffinity(0))
    return (cpus[-1], cpus[-2]) if len(cpus) >= 2 else None


def _on_cpu(cpu: int | None) -> Any:
    """A ``preexec_fn`` that binds the child to ``cpu`` (nothing for ``None``)."""
    if cpu is None:
        return None
    return lambda: os.sched_setaffinity(0, {cpu})


def one_pair(
    kind: str,
    cohort_bin: str,
    count: int,
    size: int,
    rate_mbps: float,
    timeout_s: float,
    pins: tuple[int, int] | None = None,
) -> float:
    """One pair's message rate (messages per second at the receiver); ``pins``: the
    receiver's and the sender's CPU."""
    recv_cpu, send_cpu = pins if pins is not None else (None, None)
    port = _free_port()
    env = {**os.environ, "COHORT_TEAM_SECRET": SECRET}
    if kind == "rust":
        rate = ["--rate-mbps", str(rate_mbps)]
        recv_cmd = [cohort_bin, "lrt", "recv", "--listen", f"127.0.0.1:{port}", "--count", str(count), "--json", *rate]
        send_cmd = [cohort_bin, "lrt", "send", f"127.0.0.1:{port}", "--size", str(size), "--interval-ms", "0"]
        send_cmd += ["--count", str(count), *rate]
    else:
        me = [sys.executable, "-m", "cohort.lrt_rate"]
        common = [
            "--port",
            str(port),
            "--count",
            str(count),
            "--rate-mbps",
            str(rate_mbps),
            "--timeout-s",
            str(timeout_s),
        ]
        recv_cmd = [*me, "recv", *common]
        send_cmd = [*me, "send", *common, "--size", str(size)]
    recv = subprocess.Popen(
        recv_cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, preexec_fn=_on_cpu(recv_cpu)
    )
    try:
        if kind == "python":
            assert recv.stdout is not None
            if recv.stdout.readline().strip() != "ready":
                raise RuntimeError(f"python receiver did not start: {recv.stderr.read() if recv.stderr else ''}")
        else:
            time.sleep(0.3)  # the binary binds before it parses anything slow
        sent = subprocess.run(
            send_cmd, capture_output=True, text=True, env=env, timeout=timeout_s + 30, preexec_fn=_on_cpu(send_cpu)
        )
        if sent.returncode != 0:
            raise RuntimeError(f"{kind} sender failed: {sent.stderr.strip()[-400:]}")
        out, err = recv.communicate(timeout=timeout_s + 30)
    finally:
        if recv.poll() is None:
            recv.kill()
            recv.wait()
    if recv.returncode != 0:
        raise RuntimeError(f"{kind} receiver failed: {err.strip()[-400:]}")
    r = _json_line(out)
    if r["messages"] != count:
        raise RuntimeError(f"{kind} receiver got {r['messages']} of {count}")
    return count / r["first_to_last_s"]


def find_cohort(given: str | None) -> str:
    """The `cohort` binary: given, `COHORT_BIN`, this checkout's release (then debug) build, or
    `PATH`."""
    target = Path(__file__).resolve().parents[2] / "target"
    candidates = [given, os.environ.get("COHORT_BIN"), str(target / "release" / "cohort")]
    candidates += [str(target / "debug" / "cohort"), shutil.which("cohort")]
    for c in candidates:
        if c and os.access(c, os.X_OK):
            return c
    raise SystemExit("cohort.lrt_rate: no `cohort` binary (build it: cargo build --release -p cohort-cli)")


def bench(
    cohort_bin: str,
    count: int,
    size: int,
    reps: int,
    rate_mbps: float,
    timeout_s: float,
    pin: bool = False,
    json_out: bool = True,
) -> dict[str, Any]:
    pins = pin_cpus() if pin else None
    if pin and pins is None:
        raise RuntimeError("--pin needs two CPUs")
    rates: dict[str, list[float]] = {"rust": [], "python": []}
    with Steps("bindings", 2 * reps, json_out) as steps:
        for rep in range(reps):
            order = ["rust", "python"] if rep % 2 == 0 else ["python", "rust"]
            for kind in order:
                steps.begin(f"repetition {rep + 1} of {reps}: {kind}")
                rates[kind].append(one_pair(kind, cohort_bin, count, size, rate_mbps, timeout_s, pins))
    ratios = [p / r for p, r in zip(rates["python"], rates["rust"], strict=True)]
    ratio = mean_ci(ratios)
    return {
        "bench": "bindings",
        "params": {
            "count": count,
            "size": size,
            "reps": reps,
            "rate_mbps": rate_mbps,
            "pinned": None if pins is None else {"receiver_cpu": pins[0], "sender_cpu": pins[1]},
        },
        "rust_msgs_per_s": mean_ci(rates["rust"]),
        "python_msgs_per_s": mean_ci(rates["python"]),
        "rust_per_rep": [round(x, 1) for x in rates["rust"]],
        "python_per_rep": [round(x, 1) for x in rates["python"]],
        "python_over_rust": ratio,
        "python_over_rust_per_rep": [round(x, 4) for x in ratios],
        "goal_ge_0_8": ratio["mean"] >= 0.8,
    }


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m cohort.lrt_rate", description=__doc__.splitlines()[0])
    p.add_argument("role", nargs="?", choices=["bench", "recv", "send"], default="bench", help=argparse.SUPPRESS)
    p.add_argument("--json", action="store_true")
    p.add_argument("--count", type=int, default=20_000, help="messages per pair")
    p.add_argument("--size", type=int, default=1024, help="bytes per message")
    p.add_argument("--reps", type=int, default=10, help="repetitions, the pairs alternating")
    p.add_argument("--rate-mbps", type=float, default=10_000.0, help="LRT's pacing rate")
    p.add_argument("--timeout-s", type=float, default=60.0, help="bound on each pair")
    p.add_argument("--pin", action="store_true", help="receivers on one CPU, senders on another (both pairs)")
    p.add_argument("--cohort-bin", help="the cohort binary (default: COHORT_BIN, target/release, PATH)")
    p.add_argument("--port", type=int, help=argparse.SUPPRESS)
    return p


def main(argv: list[str] | None = None) -> int:
    a = _parser().parse_args(argv)
    if a.count < 2 or a.size < 20 or a.reps < 1 or not (a.rate_mbps > 0 and a.timeout_s > 0):
        print("cohort.lrt_rate: --count >= 2, --size >= 20, --reps >= 1, positive rate and timeout", file=sys.stderr)
        return 2
    if a.role == "recv":
        print(json.dumps(run_recv(a.port, a.count, a.rate_mbps, a.timeout_s)), flush=True)
        return 0
    if a.role == "send":
        print(json.dumps(run_send(a.port, a.count, a.size, a.rate_mbps, a.timeout_s)), flush=True)
        return 0
    try:
        r = bench(find_cohort(a.cohort_bin), a.count, a.size, a.reps, a.rate_mbps, a.timeout_s, a.pin, a.json)
    except (RuntimeError, subprocess.TimeoutExpired) as e:
        print(f"cohort.lrt_rate: {e}", file=sys.stderr)
        return 1
    if a.json:
        print(json.dumps(r, indent=2))
    else:
        print(
            f"Rust {r['rust_msgs_per_s']['mean']:.0f} msg/s, Python {r['python_msgs_per_s']['mean']:.0f} msg/s: "
            f"Python/Rust {r['python_over_rust']['mean']:.3f} ± {r['python_over_rust']['ci95']:.3f} ({a.reps} reps)"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
