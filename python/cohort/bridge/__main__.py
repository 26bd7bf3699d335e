"""``python -m cohort.bridge --config FILE`` (and ``cohort bridge ...``): run one robot's bridge."""

from __future__ import annotations

import argparse
import faulthandler
import json
import logging
import os
import signal
import sys
import threading
import time
from typing import TYPE_CHECKING

from cohort._stop import StopSignals
from cohort.errors import CohortError

from .config import BridgeConfigError, load_config

if TYPE_CHECKING:
    from .core import Bridge

log = logging.getLogger("cohort.bridge")

SLOW_CLOSE_S = 2.0
# The watchdog's time beyond close_timeout_s: printing the counters, closing's own report.
STOP_WATCHDOG_EXTRA_S = 5.0


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="cohort bridge",
        description="Carry a robot's Zenoh key expressions across the team on Cohort (docs/bridge.md).",
    )
    p.add_argument("--config", required=True, metavar="FILE", help="the bridge's TOML configuration")
    p.add_argument("--check", action="store_true", help="validate the configuration, print a summary and exit")
    p.add_argument("--duration", type=float, metavar="S", help="stop after S seconds (default: until SIGINT/SIGTERM)")
    p.add_argument("--stats", action="store_true", help="print the counters as one JSON line on exit")
    p.add_argument("-v", "--verbose", action="store_true", help="log link and membership changes as they happen")
    return p


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING, format="cohort bridge: %(message)s", stream=sys.stderr
    )
    try:
        cfg = load_config(args.config)
    except BridgeConfigError as e:
        print(f"cohort bridge: error: {e}", file=sys.stderr)
        return 2
    if args.check:
        print(
            f"{args.config}: robot {cfg.pid} of team {cfg.team} (members {cfg.members}); "
            f"publish {[p.key for p in cfg.publish]}; query {[q.key for q in cfg.query]}; "
            f"liveliness {cfg.liveliness_prefix}/<pid>"
        )
        return 0

    from .core import Bridge

    # However stopping goes, the process ends: if it is still running this long after the
    # stop began, faulthandler prints every thread's stack on stderr (where it hung) and
    # exits with status 1.
    watchdog_s = cfg.timing.close_timeout_s + STOP_WATCHDOG_EXTRA_S
    # The handler takes no lock (see cohort._stop: a bridge waiting in Event.wait() hung
    # when a second SIGTERM came as the first one's wait returned).
    stop = StopSignals(on_signal=lambda _signum: faulthandler.dump_traceback_later(watchdog_s, exit=True))
    # `kill -USR1 PID` prints every thread's stack, even while Python code is stuck in a call.
    faulthandler.register(signal.SIGUSR1, all_threads=True)
    try:
        bridge = Bridge(cfg).start()
    except CohortError as e:
        print(f"cohort bridge: error: cannot start: {e}", file=sys.stderr)
        return 1
    try:
        print(f"cohort bridge: robot {cfg.pid} up, zenoh id {bridge.zid}", file=sys.stderr, flush=True)
        stop.wait(args.duration)
    finally:
        faulthandler.dump_traceback_later(watchdog_s, exit=True)
        # The stop has begun (also when the duration ran out) and the watchdog bounds it.
        stop.ignore_further()
        # The counters first: a close that goes wrong must not lose them.
        if args.stats:
            print(json.dumps(bridge.stats()), flush=True)
        stuck = close_within(bridge, cfg.timing.close_timeout_s)
    if stuck is not None:
        print(
            f"cohort bridge: error: closing did not finish within {cfg.timing.close_timeout_s:g} s "
            f"(stuck in step {stuck!r}; done: {bridge.close_steps}); exiting anyway",
            file=sys.stderr,
            flush=True,
        )
        # Threads stuck in native code would hold the interpreter's exit too.
        os._exit(3)
    faulthandler.cancel_dump_traceback_later()
    return 0


def close_within(bridge: Bridge, timeout_s: float) -> str | None:
    """Closes ``bridge``, waiting at most ``timeout_s``: ``None`` once closed, else the step
    still running. A close slower than SLOW_CLOSE_S is reported on stderr, step by step."""
    started = time.monotonic()
    th = threading.Thread(target=bridge.close, name="bridge-close", daemon=True)
    th.start()
    th.join(timeout_s)
    if th.is_alive():
        return bridge.close_step or "starting"
    took = time.monotonic() - started
    if took > SLOW_CLOSE_S:
        log.warning("closed in %.1f s (steps: %s)", took, bridge.close_steps)
    return None


if __name__ == "__main__":
    code = main()
    # The interpreter's own exit (joining threads, finalizers) is watched too.
    faulthandler.dump_traceback_later(STOP_WATCHDOG_EXTRA_S, exit=True)
    sys.exit(code)
