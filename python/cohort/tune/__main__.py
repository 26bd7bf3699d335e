"""``python -m cohort.tune`` — the tuner's command line (``cohort tune ...`` forwards here).

Subcommands: ``run SPEC`` (search), ``apply --profile NAME`` (apply a saved profile),
``restore`` (undo a crashed or kept session), ``report`` (plots + JSON of a study), ``bench``
(default vs tuned, sample efficiency), ``record-grid`` (remake the recorded table), ``profiles``
(list), ``workload nav|detect|recorder`` (the reference apps). Exit status: 0 ok, 1 a tuning/knob/app
error (the message says which), 2 bad arguments or spec.

Every refusal is one line on stderr, never a traceback: not root (the commands that change the
system need it; ``--dry-run`` and ``bench --replay-only`` do not), a missing Python dependency
(``cohort tune`` run before ``pip install``: it names the package), a bad spec (the key and
what it expects), a missing controller or knob file, a journal that cannot be restored.
"""

from __future__ import annotations

import argparse
import os
import sys

from cohort.tune.errors import SpecError, TuneError
from cohort.tune.system import DEFAULT_STATE_DIR


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--state-dir", default=os.environ.get("COHORT_TUNE_STATE_DIR", DEFAULT_STATE_DIR))
    p.add_argument("--dry-run", action="store_true", help="print every write instead of making it")
    p.add_argument("--keep", action="store_true", help="do not roll back on exit (undo later with `restore`)")


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="cohort tune", description="Find and safely apply OS configurations for co-located apps."
    )
    sub = ap.add_subparsers(dest="cmd", required=True)

    r = sub.add_parser("run", help="search the knobs of SPEC with Optuna; save the best as a profile")
    r.add_argument("spec")
    _common(r)
    r.add_argument("--environment", help="override the spec's environment label")
    r.add_argument("--trials", type=int, default=25, help="trials to run in this invocation (the study resumes)")
    r.add_argument("--sampler", default="tpe", choices=["tpe", "gp", "cmaes", "random", "qmc"])
    r.add_argument("--seed", type=int, default=0)
    r.add_argument("--db", help="SQLite file of the study (default STATE_DIR/studies.db)")
    r.add_argument("--profile", help="profile name to save the best configuration as (default: the environment)")
    r.add_argument("--report", help="directory for the report (PNG + JSON) after the search")
    r.add_argument("--duration", type=float, help="override trial.duration_s")
    r.add_argument("--repetitions", type=int, help="override trial.repetitions")

    a = sub.add_parser("apply", help="apply a saved profile and hold it (until SIGINT/SIGTERM; --keep: apply and exit)")
    a.add_argument("--profile", required=True)
    a.add_argument("--spec", help="spec file (default: the one the profile was made with)")
    _common(a)
    a.add_argument("--launch", action="store_true", help="start the spec's apps under the profile and run them")
    a.add_argument(
        "--pid", action="append", default=[], metavar="APP=PID", help="move a running process into APP's cgroups"
    )
    a.add_argument("--for", dest="hold_s", type=float, help="hold for this many seconds, then roll back")
    a.add_argument(
        "--no-watchdog",
        action="store_true",
        help="with --keep: do not start the watchdog that restores once every --pid process has exited",
    )

    s = sub.add_parser("restore", help="undo the session journaled in the state directory")
    s.add_argument("--state-dir", default=os.environ.get("COHORT_TUNE_STATE_DIR", DEFAULT_STATE_DIR))
    s.add_argument(
        "--force",
        action="store_true",
        help="undo what can be undone, then set the journal aside (listing what could not) so new sessions can start",
    )

    wd = sub.add_parser("watchdog", help=argparse.SUPPRESS)  # started by `apply --keep`, see profiles.py
    wd.add_argument("--state-dir", required=True)
    wd.add_argument("--session", required=True)
    wd.add_argument("--watch", action="append", default=[], metavar="PID:START")
    wd.add_argument("--interval", type=float, default=0.5)

    rp = sub.add_parser("report", help="plots + JSON summary of a study")
    rp.add_argument("--db", required=True)
    rp.add_argument("--study", help="study name (default: the only/most recent one)")
    rp.add_argument("--out", default="cohort-tune-report")

    pr = sub.add_parser("profiles", help="list saved profiles")
    pr.add_argument("--state-dir", default=os.environ.get("COHORT_TUNE_STATE_DIR", DEFAULT_STATE_DIR))

    b = sub.add_parser("bench", help="default vs tuned on the reference pair + sample efficiency on the recorded table")
    b.add_argument("--json", action="store_true", help="print the JSON report on stdout")
    b.add_argument("--out", default="docs/bench/tune", help="write OUT.json and OUT.png")
    b.add_argument("--trials", type=int, default=20, help="live search trials per environment")
    b.add_argument("--validate-reps", type=int, default=6, help="interleaved default/tuned runs per environment")
    b.add_argument("--envs", default="sparse,dense")
    b.add_argument("--table", help="recorded table (default: the one shipped in cohort/tune/data)")
    b.add_argument(
        "--selection-table",
        help="another recording, on which TPE's start-up is chosen (default: data/grid_dense_selection.json)",
    )
    b.add_argument("--replay-only", action="store_true", help="only the sample-efficiency replay (no live runs)")
    b.add_argument("--state-dir", default=os.environ.get("COHORT_TUNE_STATE_DIR", DEFAULT_STATE_DIR))

    g = sub.add_parser("record-grid", help="measure every configuration of the discretized grid (the recorded table)")
    g.add_argument("--reps", type=int, default=2, help="measurements per configuration (one shuffled pass each)")
    g.add_argument("--env", default="dense", choices=["sparse", "dense"])
    g.add_argument("--out", required=True)
    g.add_argument("--duration", type=float, default=8.0)
    g.add_argument("--warmup", type=float, default=1.5)
    g.add_argument("--state-dir", default=os.environ.get("COHORT_TUNE_STATE_DIR", DEFAULT_STATE_DIR))

    w = sub.add_parser("workload", help="run a reference workload (nav, detect, recorder); extra args go to it")
    w.add_argument("name", choices=["nav", "detect", "recorder"])
    w.add_argument("args", nargs=argparse.REMAINDER)
    return ap


# What each dependency is for, so the message can say what to install.
DEPENDENCIES = {
    "optuna": "optuna",
    "numpy": "numpy",
    "matplotlib": "matplotlib",
    "cmaes": "cmaes",
    "sqlalchemy": "optuna",
    "torch": "torch",
    "scipy": "scipy",
}


def needs_root(args: argparse.Namespace) -> bool:
    """Does this invocation change the system (cgroups, sysfs, scheduling policies)?"""
    if args.cmd in ("run", "apply"):
        return not args.dry_run
    if args.cmd == "bench":
        return not args.replay_only
    return args.cmd in ("restore", "record-grid", "watchdog")


def _workload(args: argparse.Namespace) -> int:
    # one BLAS thread per worker unless the caller decided (see workloads.detect)
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    if args.name == "nav":
        from cohort.tune.workloads import nav

        return nav.main(args.args)
    if args.name == "recorder":
        from cohort.tune.workloads import recorder

        return recorder.main(args.args)
    from cohort.tune.workloads import detect

    return detect.main(args.args)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if needs_root(args) and os.geteuid() != 0:
        print(
            f"cohort tune {args.cmd}: needs root (it writes cgroup and sysfs files and sets real-time policies); "
            "run it as root" + (", or try --dry-run" if args.cmd in ("run", "apply") else ""),
            file=sys.stderr,
        )
        return 1
    try:
        if args.cmd == "workload":
            return _workload(args)
        from cohort.tune import cli

        return cli.dispatch(args)
    except SpecError as e:
        print(f"cohort tune: invalid spec: {e}", file=sys.stderr)
        return 2
    except TuneError as e:
        print(f"cohort tune: {type(e).__name__}: {e}", file=sys.stderr)
        return 1
    except ModuleNotFoundError as e:
        top = (e.name or "").split(".")[0]
        if top not in DEPENDENCIES:
            raise
        print(
            f"cohort tune: missing Python dependency {top!r}: install Cohort's Python package with its dependencies "
            f"(`pip install -e .` in the checkout, or `pip install {DEPENDENCIES[top]}`)",
            file=sys.stderr,
        )
        return 1
    except PermissionError as e:
        print(f"cohort tune {args.cmd}: permission denied: {e.filename or e} (run it as root)", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        rolled = " (configuration rolled back)" if args.cmd in ("run", "apply", "record-grid", "bench") else ""
        print(f"cohort tune: interrupted{rolled}", file=sys.stderr)
        return 130


if __name__ == "__main__":
    raise SystemExit(main())
