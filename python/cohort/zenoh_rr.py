"""Zenoh 1-to-N request-reply reference for the group bench (seed 003 §VI-B).

Zenoh's query/queryable pattern is what a robot team would use today for "one command, N
replies", so the group bench runs it next to GCBRR and the point-to-point baselines, on the same
emulated channel. Two subcommands (``python3 -m cohort.zenoh_rr ...``):

``queryable (--listen tcp/IP:PORT | --connect tcp/IP:PORT) --key cohort/rr/<id> --reply-len 1500 --stop-after SECONDS``
    An ordinary process: a peer-mode session listening on (or connected to, e.g. its robot's
    ``cohort bridge``) the given endpoint declares a queryable
    on ``--key`` and answers every query with ``--reply-len`` bytes of dummy data (``0xA5``),
    replying on its own key. It prints ``ready`` on stdout (flushed) once the queryable is
    declared, and exits 0 after ``--stop-after`` seconds or on SIGTERM/SIGINT.

``get --connect tcp/IP:PORT [--connect ...] --key 'cohort/rr/*' --expect N --request-len 1500
--interactions K --timeout-s T``
    The coordinator: a peer-mode session connected to every queryable's endpoint. It first
    waits (not measured) until one query gets ``--expect`` replies, so that all queryable
    declarations have reached it. Then each interaction is one ``session.get`` on ``--key`` with
    the request (``--request-len`` bytes of ``0xA5``) as payload, target ``ALL``, no
    consolidation, and lasts until ``--expect`` replies arrived; its latency is ``get`` issued
    -> last expected reply received. An interaction that does not get them all before the time
    left runs out is incomplete (no latency recorded). The whole run is bounded by
    ``--timeout-s`` (warm-up included). It prints one JSON line
    ``{"latencies_ms": [...], "total_s": ..., "complete": K_complete}`` (``total_s``: first
    ``get`` -> end of the last interaction) and exits 0 once that line is printed.

Endpoints are explicit: multicast scouting and gossip are disabled, so no discovery traffic
competes with the measured exchange on the shared channel; peers do not connect to each other.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

from cohort.bridge.zconf import peer_config

PAD_BYTE = 0xA5


def run_queryable(listen: list[str], connect: list[str], key: str, reply_len: int, stop_after: float) -> int:
    """Serves queries on ``key`` until ``stop_after`` seconds passed or SIGTERM/SIGINT."""
    import zenoh

    from cohort._stop import StopSignals

    stop = StopSignals()
    reply = bytes([PAD_BYTE]) * reply_len
    session = zenoh.open(peer_config(listen, connect))
    try:

        def on_query(query: Any) -> None:
            query.reply(key, reply)

        queryable = session.declare_queryable(key, on_query)
        print("ready", flush=True)
        stop.wait(stop_after)
        queryable.undeclare()
    finally:
        session.close()
    return 0


def _one_get(session: Any, key: str, payload: bytes, expect: int, timeout_s: float) -> bool:
    """One query; True once ``expect`` successful replies arrived within ``timeout_s``."""
    import zenoh

    replies = session.get(
        key,
        payload=payload,
        target=zenoh.QueryTarget.ALL,
        consolidation=zenoh.ConsolidationMode.NONE,
        timeout=max(timeout_s, 0.001),
    )
    got = 0
    for reply in replies:
        if reply.ok is not None:
            got += 1
            if got >= expect:
                return True
    return False


def run_get(
    connect: list[str],
    key: str,
    expect: int,
    request_len: int,
    interactions: int,
    timeout_s: float,
) -> dict[str, Any]:
    """Runs the interactions; returns the figures printed as JSON."""
    import zenoh

    deadline = time.monotonic() + timeout_s
    payload = bytes([PAD_BYTE]) * request_len
    session = zenoh.open(peer_config([], connect))
    latencies_ms: list[float] = []
    total_s = 0.0
    try:
        # Warm-up (not measured): wait until every queryable is routable.
        while time.monotonic() < deadline:
            if _one_get(session, key, b"", expect, min(1.0, deadline - time.monotonic())):
                break
            time.sleep(0.05)
        start = time.monotonic()
        for _ in range(interactions):
            left = deadline - time.monotonic()
            if left <= 0:
                break
            t = time.perf_counter()
            if _one_get(session, key, payload, expect, left):
                latencies_ms.append((time.perf_counter() - t) * 1000.0)
        total_s = time.monotonic() - start
    finally:
        session.close()
    return {"latencies_ms": latencies_ms, "total_s": total_s, "complete": len(latencies_ms)}


def _positive_int(s: str) -> int:
    v = int(s)
    if v < 0:
        raise argparse.ArgumentTypeError(f"{s} is negative")
    return v


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python3 -m cohort.zenoh_rr", description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    q = sub.add_parser("queryable", help="answer queries on a key (ordinary process)")
    q.add_argument("--listen", action="append", default=[], help="endpoint to listen on, e.g. tcp/10.77.0.2:7447")
    q.add_argument("--connect", action="append", default=[], help="endpoint to connect to (repeat)")
    q.add_argument("--key", required=True, help="key expression, e.g. cohort/rr/2")
    q.add_argument("--reply-len", type=_positive_int, default=1500, help="reply payload bytes")
    q.add_argument("--stop-after", type=float, required=True, help="exit after this many seconds")
    g = sub.add_parser("get", help="issue queries and time them (coordinator)")
    g.add_argument("--connect", action="append", required=True, help="queryable endpoint (repeat)")
    g.add_argument("--key", required=True, help="key expression, e.g. 'cohort/rr/*'")
    g.add_argument("--expect", type=_positive_int, required=True, help="replies per interaction")
    g.add_argument("--request-len", type=_positive_int, default=1500, help="request payload bytes")
    g.add_argument("--interactions", type=_positive_int, required=True, help="number of queries")
    g.add_argument("--timeout-s", type=float, required=True, help="bound on the whole run")
    return p


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point."""
    args = _parser().parse_args(argv)
    if args.cmd == "queryable":
        if not args.listen and not args.connect:
            _parser().error("queryable: give --listen or --connect")
        return run_queryable(args.listen, args.connect, args.key, args.reply_len, args.stop_after)
    out = run_get(args.connect, args.key, args.expect, args.request_len, args.interactions, args.timeout_s)
    print(json.dumps(out), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
