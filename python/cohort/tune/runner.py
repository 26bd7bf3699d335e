"""A tuning session: set up the apps' cgroups, apply one configuration, run the apps, measure.

Order inside one measurement (a repetition of a trial):

1. cgroup and system knobs (THP, CPU shares, memory soft limits, cpusets, the RT budgets in
   ``cpu.rt_runtime_us`` of the app cgroups and their parent) — the apps are not running yet;
2. each app is started behind a gate (``sh`` waiting on a pipe), moved into its cgroups while
   it waits, then released to ``exec`` its command — so not one instruction of the app runs
   outside its cgroups; it also gets ``PR_SET_PDEATHSIG``/its own process group, so a killed
   tuner takes its apps along;
3. when every app said ``ready`` (see :mod:`cohort.tune.protocol`), the real-time policy is set
   on every thread of each app (deadline tasks cannot create threads, hence after ready), and
   re-applied every half second to threads that appear later;
4. samples read during ``warmup_s`` are dropped, then ``duration_s`` of samples are kept;
5. the apps are stopped (SIGTERM, then SIGKILL after 2 s).

Leaving the session (normally, by exception, SIGINT or SIGTERM) rolls everything back from the
journal unless ``keep`` is set; a SIGKILL leaves the journal for ``cohort tune restore``. While
the rollback runs, SIGTERM, SIGINT and SIGHUP are blocked: one that arrives then stays pending
and is acted on (with the handler that was in place before the session) once every knob is
back, so a second Ctrl-C or a service manager's repeated SIGTERM cannot stop a rollback half-way.

**Start-up.** A session that finds the journal of an earlier one (the tuner was killed, the
machine lost power, or ``apply --keep`` left a profile in place) restores it before it starts,
and says so. A robot's tuner runs unattended (a service, a boot script): refusing would leave
the robot in whatever state the dead session made until someone logs in, and the new session's
journal must hold the values from before *any* session, which only holds once the old one is
undone. It refuses instead while the earlier session still runs (its locks are held) and when
the restore fails, naming what could not be undone and how to go on (``restore --force``).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from cohort.tune import sched
from cohort.tune.cgroups import AppCgroups, detect
from cohort.tune.errors import AppError, KnobError, StateError, TuneError
from cohort.tune.protocol import ENV_VAR, Collector
from cohort.tune.spec import APP_KNOBS, App, Spec, Term, check_safety
from cohort.tune.system import Journal, Lock, System, boot_id, kill_group, new_session_id, restore

THP_PATH = "/sys/kernel/mm/transparent_hugepage/enabled"
ROLLBACK_SIGNALS = {signal.SIGTERM, signal.SIGINT, signal.SIGHUP}
PR_SET_PDEATHSIG = 1
# the gate: wait for "go" on stdin (a pipe from the tuner), then become the app; EOF without
# "go" (the tuner failed to place it, or died) means exit without running anything
_GATE = 'read -r _ || exit 111; exec "$@" </dev/null'


def stats_of(values: list[float]) -> dict[str, float]:
    if not values:
        return {"n": 0.0}
    a = np.asarray(values, dtype=float)
    p50, p90, p99 = np.percentile(a, [50, 90, 99])
    return {
        "n": float(a.size),
        "mean": float(a.mean()),
        "p50": float(p50),
        "p90": float(p90),
        "p99": float(p99),
        "max": float(a.max()),
    }


@dataclass
class Measurement:
    """One repetition: statistics per ``app.metric`` and the objective's value."""

    stats: dict[str, dict[str, float]]
    objective: float
    constraint: float | None  # stat - max of the SLO term; <= 0 means met
    samples: dict[str, list[float]] = field(default_factory=dict)
    malformed: dict[str, list[str]] = field(default_factory=dict)


def term_value(term: Term, stats: dict[str, dict[str, float]]) -> float:
    s = stats.get(f"{term.app}.{term.metric}", {})
    if term.stat not in s:
        raise AppError(f"app {term.app} reported no {term.metric} samples in the measurement window")
    return s[term.stat]


def evaluate(
    spec: Spec, stats: dict[str, dict[str, float]], baseline: list[float] | None = None
) -> tuple[float, float | None]:
    """The objective and the SLO constraint's slack of one set of statistics.

    Kind ``relative`` divides each term by ``baseline`` (the term values under the default
    configuration); without one the statistics are their own baseline."""
    kind = spec.objective.kind
    vals = [term_value(t, stats) for t in spec.objective.terms]
    if kind == "relative":
        base = baseline if baseline is not None else vals
        if any(b <= 0 for b in base):
            raise AppError(f"relative objective: a term is {min(base)} under the default configuration")
        obj = sum(t.weight * v / b for t, v, b in zip(spec.objective.terms, vals, base, strict=True))
    else:
        obj = sum((t.weight if kind != "sum" else 1.0) * v for t, v in zip(spec.objective.terms, vals, strict=True))
    c = spec.objective.constraint
    cons = None if c is None or c.max is None else term_value(c, stats) - c.max
    return obj, cons


def _pdeathsig() -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


class Session:
    """Context manager owning the journal, the cgroups and the apps of one spec."""

    def __init__(
        self,
        spec: Spec,
        state_dir: str | Path,
        dry_run: bool = False,
        keep: bool = False,
        echo: Any = None,
        scratch: str | Path | None = None,
    ) -> None:
        self.spec = spec
        self.journal = Journal(state_dir)
        self.dry_run = dry_run
        self.keep = keep
        self.echo = echo or (lambda s: print(s, flush=True))
        self.sys = System(None if dry_run else self.journal, dry_run, self.echo)
        self.layout = detect(spec.cgroup_version)
        self.cg = AppCgroups(
            self.sys,
            self.layout,
            spec.cgroup_root,
            [a.cgroup for a in spec.apps],
            spec.controllers(),
            spec.cgroup_root_cpu_shares,
        )
        self._own_scratch = scratch is None
        self.scratch = Path(scratch or tempfile.mkdtemp(prefix="cohort-tune-"))
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self.thp_at_start = System.read(THP_PATH) if Path(THP_PATH).exists() else None
        self._old_handlers: dict[int, Any] = {}
        self._locks: list[Lock] = []
        self._seq = 0
        self.last_stats: dict[str, dict[str, float]] = {}
        self._own_sched: tuple[int, os.sched_param] | None = None
        self.session_id: str | None = None

    # ---- lifecycle ---------------------------------------------------------------------
    def __enter__(self) -> Session:
        if not self.dry_run:
            self._restore_earlier_session()
            names = [f"cgroup-{self.spec.cgroup_root.replace('/', '_')}"]
            if any(k.scope == "system" for k in self.spec.knobs):
                names.insert(0, "system")
            try:
                for name in names:
                    lock = Lock(name)
                    lock.acquire(f"state dir {self.journal.dir}")
                    self._locks.append(lock)
                self.journal.begin()
                self.session_id = new_session_id()
                self.journal.append(
                    {
                        "op": "session",
                        "pid": os.getpid(),
                        "id": self.session_id,
                        "boot_id": boot_id(),
                        "locks": names,
                        "spec": self.spec.name,
                    }
                )
            except BaseException:
                self._release_locks()
                raise
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            self._old_handlers[sig] = signal.signal(sig, self._on_signal)
        if not self.dry_run:
            self._raise_own_priority()
        try:
            self.cg.create()
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def _restore_earlier_session(self) -> None:
        """Undo the journal an earlier session left (see the module doc, "Start-up")."""
        if not self.journal.exists():
            return
        earlier = self.journal.session() or {}
        self.echo(
            f"restoring the unfinished session in {self.journal.path} (pid {earlier.get('pid', '?')}, "
            f"spec {earlier.get('spec', '?')}) before starting"
        )
        problems = restore(self.journal, echo=self.echo)
        if problems:
            raise StateError(
                f"could not restore the earlier session in {self.journal.path}: {'; '.join(problems)}; fix that and "
                f"run `cohort tune restore --state-dir {self.journal.dir}`, or `cohort tune restore --force "
                f"--state-dir {self.journal.dir}` to set the journal aside and put those values back by hand"
            )

    def _raise_own_priority(self) -> None:
        """Run the tuner's own thread at SCHED_FIFO priority 1, reset on fork (the apps start
        under the normal policy). The collectors stamp each metric line when they read it: a
        tuner starved by the very apps it measures (their cgroups outweigh it under CFS) read
        lines seconds late and stamped them outside the window. Its work is a few file reads
        every 100 ms, so it takes nothing measurable from the apps."""
        try:
            self._own_sched = (os.sched_getscheduler(0), os.sched_getparam(0))
            os.sched_setscheduler(0, os.SCHED_FIFO | os.SCHED_RESET_ON_FORK, os.sched_param(1))
        except OSError as e:
            self._own_sched = None
            self.echo(f"warning: could not raise the tuner to SCHED_FIFO ({e}); under load it may read metrics late")

    def _restore_own_priority(self) -> None:
        if self._own_sched is not None:
            policy, param = self._own_sched
            os.sched_setscheduler(0, policy, param)
            self._own_sched = None

    def _on_signal(self, signum: int, _frame: Any) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    def __exit__(self, *exc: object) -> None:
        # No signal may cut the rollback short. The signals are blocked in this thread (one that
        # arrives stays pending, signal(7)) and, in case the kernel hands one to another thread,
        # their Python handlers only note it. When every knob is back, the handlers from before
        # the session return, the mask is lifted (a pending signal is delivered now) and a noted
        # one is raised again: the signal is honoured, after the rollback.
        before = {sig: self._old_handlers.get(sig, signal.getsignal(sig)) for sig in ROLLBACK_SIGNALS}
        deferred: list[int] = []
        prior_mask = signal.pthread_sigmask(signal.SIG_BLOCK, ROLLBACK_SIGNALS)
        for sig in ROLLBACK_SIGNALS:
            signal.signal(sig, lambda signum, _frame: deferred.append(signum))
        try:
            self.stop_apps()
            if not self.dry_run and not self.keep:
                problems = restore(self.journal, echo=lambda _s: None)
                if problems:
                    raise TuneError(
                        "rollback incomplete: " + "; ".join(problems) + "; the journal keeps what is left: see "
                        f"`cohort tune restore --state-dir {self.journal.dir}` (--force to set it aside)"
                    )
            elif self.keep and not self.dry_run:
                self.echo(f"kept the configuration; undo with: cohort tune restore --state-dir {self.journal.dir}")
        finally:
            try:
                if self._own_scratch:
                    shutil.rmtree(self.scratch, ignore_errors=True)
                self._restore_own_priority()
                self._release_locks()
            finally:
                for sig, h in before.items():
                    signal.signal(sig, h if h is not None else signal.SIG_DFL)
                self._old_handlers.clear()
                signal.pthread_sigmask(signal.SIG_SETMASK, prior_mask)
                for sig in dict.fromkeys(deferred):
                    signal.raise_signal(sig)

    def _release_locks(self) -> None:
        for lock in self._locks:
            lock.release()
        self._locks.clear()

    # ---- knobs -------------------------------------------------------------------------
    def resolve(self, config: dict[str, Any]) -> dict[str, Any]:
        """The configuration with every knob of the spec filled in (defaults for the rest)."""
        full = self.spec.defaults()
        full.update(config)
        if full.get("system.thp") == "current":
            full["system.thp"] = self.thp_at_start
        check_safety(self.spec, full)
        return full

    def apply_static(self, config: dict[str, Any]) -> None:
        """Knobs that apply to cgroups and the system (before the apps start)."""
        cfg = self.resolve(config)
        if "system.thp" in cfg and cfg["system.thp"] is not None:
            self.sys.write(THP_PATH, cfg["system.thp"], hint="THP modes: always, madvise, never")
        budgets: dict[str, int] = {}
        for app in self.spec.apps:
            g = app.cgroup
            if f"{app.name}.cpu_shares" in cfg:
                self.cg.set_cpu_shares(g, int(cfg[f"{app.name}.cpu_shares"]))
            if f"{app.name}.mem_soft_limit_mib" in cfg:
                self.cg.set_mem_soft_limit(g, int(cfg[f"{app.name}.mem_soft_limit_mib"]))
            if f"{app.name}.cpuset" in cfg:
                self.cg.set_cpuset(g, str(cfg[f"{app.name}.cpuset"]))
            rt = cfg.get(f"{app.name}.rt", "none")
            budgets[g] = int(cfg.get(f"{app.name}.rt_budget_us", 900000)) if rt != "none" else 0
        if self.layout.version == 1 or any(budgets.values()):
            self.cg.set_rt_runtime(budgets)

    def rt_attr(self, app: App, cfg: dict[str, Any]) -> dict[str, int] | None:
        rt = cfg.get(f"{app.name}.rt", "none")
        if rt == "deadline":
            per = float(cfg.get(f"{app.name}.rt_period_ms", APP_KNOBS["rt_period_ms"][1]))
            run = float(cfg.get(f"{app.name}.rt_runtime_ms", APP_KNOBS["rt_runtime_ms"][1]))
            return sched.deadline_attr(run, per, per)
        if rt == "fifo":
            return sched.fifo_attr(int(cfg.get(f"{app.name}.fifo_priority", APP_KNOBS["fifo_priority"][1])))
        return None

    def apply_rt(self, app: App, attr: dict[str, int], done: set[int]) -> int:
        """Set ``attr`` on every not-yet-done thread of the app; returns how many were set."""
        proc = self.procs.get(app.name)
        if proc is None:
            return 0
        n = 0
        for tid in sched.threads_of(proc.pid):
            if tid in done:
                continue
            try:
                prior = sched.get_attr(tid)
            except KnobError:
                continue  # the thread exited meanwhile
            self.sys.sched_prior(tid, prior)
            try:
                sched.set_attr(tid, attr)
            except KnobError as e:
                if e.errno == 3:  # ESRCH: the thread exited between listing and setting
                    continue
                raise type(e)(f"app {app.name}", str(e), e.errno) from e
            done.add(tid)
            n += 1
        return n

    # ---- apps --------------------------------------------------------------------------
    def command(self, app: App, run_s: float) -> list[str]:
        subs = {
            "duration": f"{run_s:g}",
            "environment": self.spec.environment,
            "app": app.name,
            "python": sys.executable,
        }
        try:
            return [c.format(**subs) for c in app.command]
        except (KeyError, IndexError) as e:
            raise AppError(f"app {app.name}: unknown placeholder {e} in command") from e

    def start_app(self, app: App, run_s: float, metrics_path: Path) -> None:
        cmd = self.command(app, run_s)
        procs_files = self.cg.procs_files(app.cgroup)
        if self.dry_run:
            self.echo(f"spawn {app.name}: {' '.join(cmd)} (into {', '.join(str(p.parent) for p in procs_files)})")
            return
        env = {**os.environ, **app.env, ENV_VAR: str(metrics_path)}
        r, w = os.pipe()
        log = open(self.scratch / f"{app.name}.log", "wb")  # noqa: SIM115 (handed to the child)
        try:
            p = subprocess.Popen(
                ["/bin/sh", "-c", _GATE, "cohort-gate", *cmd],
                env=env,
                stdin=r,
                stdout=log,
                stderr=subprocess.STDOUT,
                preexec_fn=_pdeathsig,
                start_new_session=True,
            )
        except OSError as e:
            os.close(r)
            os.close(w)
            raise AppError(f"app {app.name}: cannot start {cmd[0]}: {e.strerror}") from e
        finally:
            log.close()
        os.close(r)
        self.procs[app.name] = p
        self.sys.spawned(p.pid)
        try:
            for f in procs_files:
                self.sys.move(p.pid, f, hint="moving the app into its cgroup")
        except KnobError:
            os.close(w)
            kill_group(p.pid, None)
            p.kill()
            p.wait()
            raise
        os.write(w, b"go\n")
        os.close(w)

    def stop_apps(self) -> None:
        for p in self.procs.values():
            if p.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(p.pid, signal.SIGTERM)
        deadline = time.monotonic() + 2.0
        for p in self.procs.values():
            try:
                p.wait(timeout=max(0.01, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(p.pid, signal.SIGKILL)
                p.wait()
        self.procs.clear()

    # ---- one measurement ---------------------------------------------------------------
    def measure(self, config: dict[str, Any], keep_samples: bool = False) -> Measurement | None:
        """Run the apps once under ``config``. None in dry-run mode (nothing runs)."""
        t = self.spec.trial
        cfg = self.resolve(config)
        self.apply_static(cfg)
        self._seq += 1
        # The apps' own time limit only bounds a run the tuner fails to stop (it stops them after
        # the window): generous, so that a tuner starved by real-time apps for a few seconds
        # never sees them end before its window does.
        run_s = t.ready_timeout_s + t.warmup_s + t.duration_s + 30.0
        collectors: dict[str, Collector] = {}
        attrs = {a.name: self.rt_attr(a, cfg) for a in self.spec.apps}
        try:
            for app in self.spec.apps:
                path = self.scratch / f"{app.name}.{self._seq}.metrics"
                path.write_bytes(b"")
                collectors[app.name] = Collector(str(path))
                self.start_app(app, run_s, path)
            if self.dry_run:
                for app in self.spec.apps:
                    if attrs[app.name]:
                        self.echo(f"sched every thread of {app.name} <- {sched.describe(attrs[app.name])}")
                return None
            self._wait_ready(collectors, t.ready_timeout_s)
            done: dict[str, set[int]] = {a.name: set() for a in self.spec.apps}
            for app in self.spec.apps:
                if attrs[app.name]:
                    self.apply_rt(app, attrs[app.name], done[app.name])
            t0 = time.monotonic()
            start, end = t0 + t.warmup_s, t0 + t.warmup_s + t.duration_s
            next_sweep = t0 + 0.5
            while time.monotonic() < end:
                time.sleep(0.1)
                if time.monotonic() >= end:
                    break  # the window is over; whatever the apps did since is not measured
                for name, c in collectors.items():
                    c.poll()
                    if self.procs[name].poll() is not None:
                        raise AppError(
                            f"app {name} exited with status {self.procs[name].returncode} mid-trial; {self._tail(name)}"
                        )
                if time.monotonic() >= next_sweep:
                    next_sweep += 0.5
                    for app in self.spec.apps:
                        if attrs[app.name]:
                            self.apply_rt(app, attrs[app.name], done[app.name])
        finally:
            self.stop_apps()
        stats: dict[str, dict[str, float]] = {}
        samples: dict[str, list[float]] = {}
        for app in self.spec.apps:
            c = collectors[app.name]
            c.poll()
            for metric in sorted({s.metric for s in c.samples}):
                vals = [
                    s.value
                    for s in c.samples
                    if s.metric == metric and s.began_at_or_after(start) and s.t_s <= end + 0.15
                ]
                stats[f"{app.name}.{metric}"] = stats_of(vals)
                if keep_samples:
                    samples[f"{app.name}.{metric}"] = vals
        self.last_stats = stats  # what was measured, even when the objective cannot be computed
        obj, cons = evaluate(self.spec, stats)
        return Measurement(stats, obj, cons, samples, {k: c.malformed for k, c in collectors.items() if c.malformed})

    def _wait_ready(self, collectors: dict[str, Collector], timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            for name, c in collectors.items():
                c.poll()
                if self.procs[name].poll() is not None:
                    raise AppError(
                        f"app {name} exited with status {self.procs[name].returncode} before ready; {self._tail(name)}"
                    )
            if all(c.ready_at_s is not None for c in collectors.values()):
                return
            time.sleep(0.05)
        # apps that never say ready get their knobs now, as documented in the protocol

    def _tail(self, name: str) -> str:
        try:
            text = (self.scratch / f"{name}.log").read_text(errors="replace").strip().splitlines()
        except OSError:
            return "no log"
        return "log tail: " + " | ".join(text[-3:]) if text else "empty log"
