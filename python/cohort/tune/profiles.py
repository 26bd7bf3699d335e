"""Profiles: the best configuration of a study, saved per environment, applied by name.

A profile is ``STATE_DIR/profiles/NAME.json`` holding the environment label, the spec path,
the full configuration (every knob), and the objective it reached against the default's.
``cohort tune apply --profile NAME`` creates the apps' cgroups, applies the cgroup and system
knobs, and then either launches the spec's apps (``--launch``) or moves running processes into
their cgroups (``--pid nav=1234``) and sets their real-time policy. It holds the configuration
until SIGINT/SIGTERM (or ``--for SECONDS``) and rolls back, unless ``--keep`` is given, in which
case it applies and exits, leaving the journal for ``cohort tune restore``.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

import optuna

from cohort.tune.errors import StateError, TuneError
from cohort.tune.spec import Spec, load


def profile_dir(state_dir: str | Path) -> Path:
    return Path(state_dir) / "profiles"


def save_profile(
    state_dir: str | Path, name: str, spec: Spec, best: optuna.trial.FrozenTrial, study: optuna.Study
) -> Path:
    default = next((t for t in study.trials if t.number == 0 and t.value is not None), None)
    data = {
        "name": name,
        "environment": spec.environment,
        "spec": str(spec.path.resolve()) if spec.path else None,
        "study": study.study_name,
        "trial": best.number,
        "config": best.user_attrs.get("config", best.params),
        "objective": best.value,
        "default_objective": default.value if default else None,
        "stats": best.user_attrs.get("stats", {}),
        "saved": time.strftime("%Y-%m-%dT%H:%M:%S"),
    }
    d = profile_dir(state_dir)
    d.mkdir(parents=True, exist_ok=True)
    path = d / f"{name}.json"
    path.write_text(json.dumps(data, indent=1) + "\n")
    return path


def load_profile(state_dir: str | Path, name: str) -> dict[str, Any]:
    path = profile_dir(state_dir) / f"{name}.json"
    if not path.exists():
        have = ", ".join(p.stem for p in sorted(profile_dir(state_dir).glob("*.json"))) or "none"
        raise StateError(f"no profile {name!r} in {profile_dir(state_dir)} (saved: {have})")
    return dict(json.loads(path.read_text()))


def list_profiles(state_dir: str | Path) -> list[dict[str, Any]]:
    out = []
    for p in sorted(profile_dir(state_dir).glob("*.json")):
        d = json.loads(p.read_text())
        d["path"] = str(p)
        out.append(d)
    return out


def apply_profile(args: argparse.Namespace) -> int:
    from cohort.tune import sched
    from cohort.tune.protocol import Collector
    from cohort.tune.runner import Session

    prof = load_profile(args.state_dir, args.profile)
    spec_path = args.spec or prof.get("spec")
    if not spec_path:
        raise TuneError("the profile names no spec file; pass --spec")
    spec = load(spec_path)
    spec.environment = prof["environment"]
    cfg = dict(prof["config"])
    pids: dict[str, int] = {}
    for item in args.pid:
        app, _, pid = item.partition("=")
        if not pid.isdigit() or app not in [a.name for a in spec.apps]:
            raise TuneError(f"--pid {item!r}: expected APP=PID with APP one of {', '.join(a.name for a in spec.apps)}")
        pids[app] = int(pid)
    with Session(spec, args.state_dir, dry_run=args.dry_run, keep=args.keep) as s:
        s.apply_static(cfg)
        full = s.resolve(cfg)
        for app in spec.apps:
            attr = s.rt_attr(app, full)
            if app.name in pids:
                for f in s.cg.procs_files(app.cgroup):
                    s.sys.move(pids[app.name], f, hint="moving the process into its cgroup")
                if attr and not args.dry_run:
                    for tid in sched.threads_of(pids[app.name]):
                        s.sys.sched_prior(tid, sched.get_attr(tid))
                        sched.set_attr(tid, attr)
                elif attr:
                    print(f"sched every thread of pid {pids[app.name]} <- {sched.describe(attr)}")
        if args.launch:
            # launched apps live as long as this command (they die with it), so it always holds
            run_s = args.hold_s if args.hold_s else 10 * 365 * 86400.0
            collectors = {}
            for app in spec.apps:
                path = s.scratch / f"{app.name}.apply.metrics"
                path.write_bytes(b"")
                collectors[app.name] = Collector(str(path))
                s.start_app(app, run_s, path)
            if not args.dry_run:
                s._wait_ready(collectors, spec.trial.ready_timeout_s)
                for app in spec.apps:
                    attr = s.rt_attr(app, full)
                    if attr:
                        s.apply_rt(app, attr, set())
        print(f"profile {args.profile} ({prof['environment']}) applied: {json.dumps(full)}", flush=True)
        if args.dry_run or (args.keep and not args.launch):
            return 0
        print("holding; SIGINT/SIGTERM ends" + ("" if args.keep else " and rolls back"), flush=True)
        end = time.monotonic() + args.hold_s if args.hold_s else None
        while end is None or time.monotonic() < end:
            if args.launch and all(p.poll() is not None for p in s.procs.values()):
                break
            time.sleep(0.2)
    return 0
