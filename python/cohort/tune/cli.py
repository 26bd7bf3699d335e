"""Implementation of the subcommands parsed in :mod:`cohort.tune.__main__`."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from cohort.tune.errors import StateError, TuneError
from cohort.tune.system import Journal, restore


def cmd_restore(args: argparse.Namespace) -> int:
    j = Journal(args.state_dir)
    if not j.exists():
        print(f"nothing to restore in {j.path}")
        return 0
    problems = restore(j, force=args.force)
    if problems:
        for p in problems:
            print(f"restore problem: {p}")
        if args.force:
            print(f"{len(problems)} change(s) could not be undone (put them back by hand); new sessions can start")
            return 1
        raise StateError(
            f"restore incomplete; the journal at {j.path} keeps what is left: fix the cause and run restore again, "
            "or run `cohort tune restore --force` to set it aside"
        )
    print("restored")
    return 0


def cmd_watchdog(args: argparse.Namespace) -> int:
    from cohort.tune.profiles import watchdog

    watched = []
    for item in args.watch:
        pid, _, start = item.partition(":")
        watched.append((int(pid), int(start)))
    return watchdog(args.state_dir, args.session, watched, args.interval)


def cmd_record_grid(args: argparse.Namespace) -> int:
    from cohort.tune.grid import record

    record(args.env, Path(args.out), args.duration, args.warmup, args.state_dir, reps=args.reps)
    return 0


def cmd_run(args: argparse.Namespace) -> int:
    from cohort.tune.search import run_study

    return run_study(args)


def cmd_apply(args: argparse.Namespace) -> int:
    from cohort.tune.profiles import apply_profile

    return apply_profile(args)


def cmd_profiles(args: argparse.Namespace) -> int:
    from cohort.tune.profiles import list_profiles

    for p in list_profiles(args.state_dir):
        print(
            f"{p['name']:20s} env={p['environment']:10s} objective={p.get('objective', float('nan')):.2f} {p['path']}"
        )
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    from cohort.tune.report import report_from_db

    summary = report_from_db(args.db, args.study, Path(args.out))
    print(json.dumps(summary["best"], indent=1))
    return 0


def cmd_bench(args: argparse.Namespace) -> int:
    from cohort.tune.bench import run_bench

    return run_bench(args)


def dispatch(args: argparse.Namespace) -> int:
    handlers: dict[str, Any] = {
        "restore": cmd_restore,
        "watchdog": cmd_watchdog,
        "record-grid": cmd_record_grid,
        "run": cmd_run,
        "apply": cmd_apply,
        "profiles": cmd_profiles,
        "report": cmd_report,
        "bench": cmd_bench,
    }
    return int(handlers[args.cmd](args))


__all__ = ["TuneError", "dispatch"]
