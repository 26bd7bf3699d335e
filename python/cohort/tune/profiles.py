"""Profiles: the best configuration of a study, saved per environment, applied by name.

A profile is ``STATE_DIR/profiles/NAME.json`` holding the environment label, the spec path,
the full configuration (every knob), and the objective it reached against the default's.
``cohort tune apply --profile NAME`` creates the apps' cgroups, applies the cgroup and system
knobs, and then either launches the spec's apps (``--launch``) or moves running processes into
their cgroups (``--pid nav=1234``) and sets their real-time policy. It holds the configuration
until SIGINT/SIGTERM (or ``--for SECONDS``) and rolls back, unless ``--keep`` is given, in which
case it applies and exits, leaving the journal for ``cohort tune restore``.

Guards, because a kept profile outlives the command that set it:

* **RT throttling.** A profile that puts threads under SCHED_FIFO or SCHED_DEADLINE is refused
  while the kernel's RT throttling is off (``/proc/sys/kernel/sched_rt_runtime_us`` = -1,
  Documentation/scheduler/sched-rt-group.rst): then nothing stops a runaway real-time loop from
  owning its CPU, and with ``--keep`` nobody is left to notice.
* **Watchdog.** ``apply --keep --pid APP=PID`` starts a watchdog (``cohort tune watchdog``, a
  detached process recorded in the journal) that restores the session as soon as every
  process it protects has exited (pid and start time gone), so a crashed or stopped robot
  process never leaves its cgroups, weights and system knobs behind. It exits without doing
  anything when the journal is restored or replaced by someone else. ``--no-watchdog`` opts out.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import optuna

from cohort.tune.errors import StateError, TuneError
from cohort.tune.spec import Spec, load
from cohort.tune.system import Journal, fsync_dir, proc_start_time, restore

RT_RUNTIME_PATH = "/proc/sys/kernel/sched_rt_runtime_us"


def rt_throttling_on(path: str = RT_RUNTIME_PATH) -> bool:
    """Is the kernel's RT throttling on (``sched_rt_runtime_us`` not -1)?"""
    try:
        return Path(path).read_text().strip() != "-1"
    except OSError:
        return False


def check_rt_guard(config: dict[str, Any], spec: Spec, path: str = RT_RUNTIME_PATH) -> None:
    rt_apps = [a.name for a in spec.apps if config.get(f"{a.name}.rt", "none") != "none"]
    if rt_apps and not rt_throttling_on(path):
        raise TuneError(
            f"refusing to apply real-time policies ({', '.join(rt_apps)}): RT throttling is off ({path} = -1), so a "
            f"runaway real-time thread would own its CPU; turn it back on (e.g. echo 950000 > {path})"
        )


def watchdog(state_dir: str | Path, session: str, watched: list[tuple[int, int]], interval_s: float = 0.5) -> int:
    """Restore the kept session ``session`` once no process of ``watched`` (pid, start tick)
    runs any more; exit without doing anything when the journal is gone or names another
    session. Returns 0 when it restored or had nothing to do, 1 when the restore failed."""
    journal = Journal(state_dir)
    while True:
        current = journal.session() if journal.exists() else None
        if current is None or current.get("id") != session:
            return 0
        if all(proc_start_time(pid) != start for pid, start in watched):
            problems = restore(journal, echo=lambda line: print(line, flush=True), only_session=session)
            for p in problems:
                print(f"watchdog: restore problem: {p}", file=sys.stderr, flush=True)
            return 1 if problems else 0
        time.sleep(interval_s)


def _pythonpath() -> str:
    """PYTHONPATH for a child that must import this very cohort package."""
    here = str(Path(__file__).resolve().parents[2])
    old = os.environ.get("PYTHONPATH")
    return here + (os.pathsep + old if old else "")


def start_watchdog(state_dir: str | Path, session: str, pids: list[int]) -> int:
    """Start the detached watchdog for a kept session and journal it; returns its pid."""
    watched = []
    for pid in pids:
        start = proc_start_time(pid)
        if start is not None:
            watched.append(f"{pid}:{start}")
    log = open(Path(state_dir) / "watchdog.log", "ab")  # noqa: SIM115 (handed to the child)
    try:
        p = subprocess.Popen(
            [sys.executable, "-m", "cohort.tune", "watchdog", "--state-dir", str(state_dir), "--session", session]
            + [a for w in watched for a in ("--watch", w)],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
            start_new_session=True,
            env={**os.environ, "PYTHONPATH": _pythonpath()},
        )
    finally:
        log.close()
    Journal(state_dir).append({"op": "watchdog", "pid": p.pid, "start": proc_start_time(p.pid), "watch": watched})
    return p.pid


def profile_dir(state_dir: str | Path) -> Path:
    return Path(state_dir) / "profiles"


def _check_name(name: str) -> None:
    if not name or "/" in name or "\x00" in name or name in (".", ".."):
        raise TuneError(f"profile name {name!r}: must be a plain file name (no '/')")


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
    _check_name(name)
    d = profile_dir(state_dir)
    d.mkdir(parents=True, exist_ok=True)
    path = d / f"{name}.json"
    tmp = path.with_suffix(".json.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.write(fd, (json.dumps(data, indent=1) + "\n").encode())
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)  # a crash leaves the old profile or the new one, never half of one
    fsync_dir(d)
    return path


def load_profile(state_dir: str | Path, name: str) -> dict[str, Any]:
    _check_name(name)
    path = profile_dir(state_dir) / f"{name}.json"
    if not path.exists():
        have = ", ".join(p.stem for p in sorted(profile_dir(state_dir).glob("*.json"))) or "none"
        raise StateError(f"no profile {name!r} in {profile_dir(state_dir)} (saved: {have})")
    try:
        data = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise StateError(f"profile {path} is not valid JSON ({e}); save it again with `cohort tune run`") from e
    if not isinstance(data, dict) or not isinstance(data.get("config"), dict):
        raise StateError(f"profile {path} has no configuration (a table 'config')")
    return data


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
        full = s.resolve(cfg)
        check_rt_guard(full, spec)
        s.apply_static(cfg)
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
        if args.keep and not args.launch and not args.dry_run and pids and not args.no_watchdog:
            assert s.session_id is not None
            wpid = start_watchdog(args.state_dir, s.session_id, list(pids.values()))
            print(
                f"watchdog {wpid} restores the profile's changes once pid(s) {', '.join(map(str, pids.values()))} "
                "have exited",
                flush=True,
            )
        if args.dry_run or (args.keep and not args.launch):
            return 0
        print("holding; SIGINT/SIGTERM ends" + ("" if args.keep else " and rolls back"), flush=True)
        end = time.monotonic() + args.hold_s if args.hold_s else None
        while end is None or time.monotonic() < end:
            if args.launch and all(p.poll() is not None for p in s.procs.values()):
                break
            time.sleep(0.2)
    return 0
