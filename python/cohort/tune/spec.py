"""The tuning spec: a TOML file naming the apps, their metrics, the objective and the knobs.

Example (``python/cohort/tune/specs/reference.toml`` is the full reference)::

    name = "nav-detect"
    environment = "sparse"          # label; profiles are stored per environment
    cgroup_root = "cohort-tune"     # the apps' cgroups go under this one
    cgroup_root_cpu_shares = 16384  # optional: weight of that parent against everything else
    cgroup_version = "auto"         # auto | 1 | 2

    [trial]
    duration_s = 20                 # one measurement
    warmup_s = 3                    # samples read before this are dropped
    repetitions = 2                 # measurements per trial; the objective averages them
    ready_timeout_s = 30

    [[app]]
    name = "nav"
    command = ["python3", "-m", "cohort.tune", "workload", "nav", "--duration", "{duration}"]
    env = { OPENBLAS_NUM_THREADS = "1" }

    [objective]
    kind = "sum"                    # sum | weighted | relative | slo
    terms = [{ app = "nav", metric = "loop_ms", stat = "p99" },
             { app = "detect", metric = "frame_ms", stat = "mean" }]
    # kind = "slo": constraint = { app = "nav", metric = "loop_ms", stat = "p99", max = 50.0 }
    # kind = "relative": each term divided by its value under the default configuration
    # (the study's first trial), so apps whose metrics differ in scale count alike (weights allowed)

    [knobs.nav]
    rt = { choices = ["none", "deadline", "fifo"] }
    rt_runtime_ms = { range = [5, 45], default = 40 }

    [knobs.system]
    thp = { choices = ["always", "madvise", "never"] }

A knob is ``{ range = [lo, hi] }`` (integers if both bounds are, ``log = true`` for a log scale,
``step`` for a grid), ``{ choices = [...] }``, or ``{ value = x }`` (fixed, not searched). Its
``default`` is the kernel's default unless given (a given one must be in the range or among the
choices); the default configuration is the study's first trial. Command arguments may use
``{duration}`` (the run length in seconds, trial length plus slack), ``{environment}``,
``{app}`` and ``{python}`` (the tuner's interpreter).

Real-time safety limits (the optional ``[safety]`` table)::

    [safety]
    fifo_priority_max = 49        # default 49; above needs above_irq_threads = true
    above_irq_threads = false
    deadline_share_max = 0.9      # runtime / period of each deadline thread; at most 0.95

* SCHED_FIFO priorities stay below the kernel's threaded interrupt handlers, which run at
  SCHED_FIFO 50 (``setup_irq_thread()`` in kernel/irq/manage.c calls ``sched_set_fifo()``,
  which gives ``MAX_RT_PRIO / 2``; ``ps -eo rtprio,comm`` shows ``irq/*`` threads at 50 here):
  an app above them delays interrupt handling (network, storage) on its CPU while it runs.
  Going higher takes ``above_irq_threads = true`` (then up to 99).
* SCHED_DEADLINE runtime is at most ``deadline_share_max`` of the period for every value the
  search can pick (the spec is refused otherwise, so nothing is clamped behind the sampler's
  back). The default 0.9 lets a runaway deadline thread take at most 90% of a CPU, leaving the
  rest to kernel threads, IRQ threads and the operator's shell: twice the 5% that the kernel's
  own RT limit (``sched_rt_runtime_us`` 950000 of ``sched_rt_period_us`` 1000000,
  Documentation/scheduler/sched-rt-group.rst) keeps back. 0.95 is the most it accepts.

Every mistake is a :class:`~cohort.tune.errors.SpecError` naming the key and what it expects;
the parser is fuzzed (``python -m cohort.tune.fuzz``) so that no input gives anything else.
"""

from __future__ import annotations

import math
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cohort.tune.errors import SpecError

STATS = ("mean", "p50", "p90", "p99", "max")
IRQ_THREAD_FIFO_PRIORITY = 50  # setup_irq_thread() -> sched_set_fifo(): SCHED_FIFO MAX_RT_PRIO / 2
FIFO_PRIORITY_MAX = IRQ_THREAD_FIFO_PRIORITY - 1
DEADLINE_SHARE_MAX = 0.9
DEADLINE_SHARE_LIMIT = 0.95  # the kernel's default sched_rt_runtime_us / sched_rt_period_us
OBJECTIVE_KINDS = ("sum", "weighted", "relative", "slo")
RT_POLICIES = ("none", "deadline", "fifo")
THP_MODES = ("always", "madvise", "never")

# per-app knobs: name -> (kind, kernel default, (lo, hi) allowed)
APP_KNOBS: dict[str, tuple[str, Any, tuple[float, float] | None]] = {
    "cpu_shares": ("int", 1024, (2, 262144)),
    "mem_soft_limit_mib": ("int", 0, (0, 1 << 30)),  # 0 = unlimited
    "cpuset": ("str", "all", None),
    "rt": ("str", "none", None),
    "rt_runtime_ms": ("float", 40.0, (0.1, 10000.0)),  # deadline runtime
    "rt_period_ms": ("float", 50.0, (0.1, 10000.0)),  # deadline period (= relative deadline)
    "fifo_priority": ("int", 10, (1, 99)),  # default 10: well below IRQ threads (50); [safety] caps it
    "rt_budget_us": ("int", 900000, (1000, 1000000)),  # cpu.rt_runtime_us for the app's cgroup
}
SYSTEM_KNOBS: dict[str, tuple[str, Any, tuple[float, float] | None]] = {
    "thp": ("str", "current", None),  # "current" = whatever the system has when the session starts
}


@dataclass
class Knob:
    """One tunable (or fixed) parameter: ``scope`` is an app name or ``system``."""

    scope: str
    name: str
    kind: str  # int | float | str
    default: Any
    low: float | None = None
    high: float | None = None
    log: bool = False
    step: float | None = None
    choices: list[Any] | None = None
    fixed: bool = False

    @property
    def key(self) -> str:
        return f"{self.scope}.{self.name}"


@dataclass
class App:
    name: str
    command: list[str]
    cgroup: str
    env: dict[str, str] = field(default_factory=dict)
    metrics: list[str] = field(default_factory=list)


@dataclass
class Term:
    app: str
    metric: str
    stat: str
    weight: float = 1.0
    max: float | None = None  # SLO bound (constraint terms only)


@dataclass
class Objective:
    kind: str
    terms: list[Term]
    constraint: Term | None = None


@dataclass
class Trial:
    duration_s: float = 20.0
    warmup_s: float = 3.0
    repetitions: int = 2
    ready_timeout_s: float = 30.0


@dataclass
class Safety:
    fifo_priority_max: int = FIFO_PRIORITY_MAX
    above_irq_threads: bool = False
    deadline_share_max: float = DEADLINE_SHARE_MAX


@dataclass
class Spec:
    name: str
    environment: str
    apps: list[App]
    objective: Objective
    knobs: list[Knob]
    trial: Trial
    cgroup_root: str = "cohort-tune"
    cgroup_version: str = "auto"
    path: Path | None = None
    cgroup_root_cpu_shares: int | None = None
    safety: Safety = field(default_factory=Safety)

    def app(self, name: str) -> App:
        for a in self.apps:
            if a.name == name:
                return a
        raise KeyError(name)

    def knob(self, key: str) -> Knob | None:
        for k in self.knobs:
            if k.key == key:
                return k
        return None

    def defaults(self) -> dict[str, Any]:
        return {k.key: k.default for k in self.knobs}

    def searched(self) -> list[Knob]:
        return [k for k in self.knobs if not k.fixed]

    def controllers(self) -> list[str]:
        used = {"cpu"}
        for k in self.knobs:
            if k.name == "mem_soft_limit_mib":
                used.add("memory")
            if k.name == "cpuset":
                used.add("cpuset")
        return sorted(used)


def _req(d: dict[str, Any], key: str, where: str, typ: type | tuple[type, ...]) -> Any:
    if key not in d:
        raise SpecError(where, f"missing required key {key!r}")
    v = d[key]
    if not isinstance(v, typ) or (
        typ is not bool and isinstance(v, bool) and bool not in (typ if isinstance(typ, tuple) else (typ,))
    ):
        names = typ.__name__ if isinstance(typ, type) else " or ".join(t.__name__ for t in typ)
        raise SpecError(f"{where}.{key}", f"must be {names}, got {type(v).__name__}")
    return v


def _is_num(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _typename(v: Any) -> str:
    return {str: "string", bool: "boolean", int: "integer", float: "float", list: "array", dict: "table"}.get(
        type(v), type(v).__name__
    )


def _num(d: dict[str, Any], key: str, default: float, where: str) -> float:
    v = d.get(key, default)
    if not _is_num(v):
        raise SpecError(f"{where}.{key}", f"must be a number (integer or float), got {_typename(v)} {v!r}")
    return float(v)


def _int(d: dict[str, Any], key: str, default: int, where: str) -> int:
    v = d.get(key, default)
    if not _is_int(v):
        raise SpecError(f"{where}.{key}", f"must be an integer, got {_typename(v)} {v!r}")
    return int(v)


def _bool(d: dict[str, Any], key: str, default: bool, where: str) -> bool:
    v = d.get(key, default)
    if not isinstance(v, bool):
        raise SpecError(f"{where}.{key}", f"must be true or false, got {_typename(v)} {v!r}")
    return v


def _unknown(d: dict[str, Any], allowed: set[str], where: str) -> None:
    extra = sorted(set(d) - allowed)
    if extra:
        raise SpecError(where, f"unknown key(s) {', '.join(extra)} (allowed: {', '.join(sorted(allowed))})")


_NAME = re.compile(r"[A-Za-z0-9_.-]+")  # cgroup names, metric names (the protocol's characters)
_LABEL = re.compile(r"[^\s/\x00-\x1f\x7f]+")  # environment labels and profile names: one path component
_CPU_LIST = re.compile(r"[0-9]+(-[0-9]+)?")
_PLACEHOLDERS = {"duration": "1", "environment": "env", "app": "app", "python": "python3"}


def _name_ok(v: Any) -> bool:
    return isinstance(v, str) and bool(_NAME.fullmatch(v)) and v not in (".", "..")


def _cpu_list_ok(v: str) -> bool:
    for part in v.split(","):
        if not _CPU_LIST.fullmatch(part):
            return False
        lo, _, hi = part.partition("-")
        if hi and int(lo) > int(hi):
            return False
    return True


def _knob(scope: str, name: str, raw: Any, table: dict[str, tuple[str, Any, Any]]) -> Knob:
    where = f"knobs.{scope}.{name}"
    if name not in table:
        raise SpecError(where, f"unknown knob (known: {', '.join(sorted(table))})")
    kind, kdefault, bounds = table[name]
    if not isinstance(raw, dict):
        raw = {"value": raw}
    _unknown(raw, {"range", "choices", "value", "default", "log", "step"}, where)
    modes = [m for m in ("range", "choices", "value") if m in raw]
    if len(modes) != 1:
        raise SpecError(where, "give exactly one of range, choices, value")
    if modes[0] != "range":
        for key in ("log", "step"):
            if key in raw:
                raise SpecError(f"{where}.{key}", "only a range takes log or step")
    k = Knob(scope, name, kind, raw.get("default", kdefault))
    if "value" in raw:
        _check_value(k, raw["value"], where + ".value", bounds)
        if "default" in raw and raw["default"] != raw["value"]:
            raise SpecError(where + ".default", "a fixed knob's default is its value; give one of them")
        k.fixed = True
        k.default = raw["value"]
        k.choices = [raw["value"]]
    elif "choices" in raw:
        ch = raw["choices"]
        if not isinstance(ch, list) or not ch:
            raise SpecError(where + ".choices", f"must be a non-empty array, got {_typename(ch)}")
        for c in ch:
            _check_value(k, c, where + ".choices", bounds)
        if len(set(map(repr, ch))) != len(ch):
            raise SpecError(where + ".choices", "has a value twice")
        k.choices = ch
        if "default" in raw:
            _check_value(k, raw["default"], where + ".default", bounds)
            if raw["default"] not in ch and not (name == "thp" and raw["default"] == "current"):
                raise SpecError(where + ".default", f"{raw['default']!r} is not one of the choices {ch!r}")
        else:
            k.default = kdefault if kdefault in ch or kdefault == "current" else ch[0]
    else:
        rng = raw["range"]
        if kind == "str":
            raise SpecError(where + ".range", "this knob takes choices or a value, not a range")
        if not (isinstance(rng, list) and len(rng) == 2 and all(_is_num(x) for x in rng)):
            raise SpecError(where + ".range", f"must be [low, high], two numbers, got {rng!r}")
        lo, hi = rng
        if kind == "int" and not (_is_int(lo) and _is_int(hi)):
            raise SpecError(where + ".range", "this knob takes integers")
        if lo >= hi:
            raise SpecError(where + ".range", f"low {lo} must be below high {hi}")
        if bounds and (lo < bounds[0] or hi > bounds[1]):
            raise SpecError(where + ".range", f"[{lo}, {hi}] outside what the kernel takes [{bounds[0]}, {bounds[1]}]")
        k.low, k.high = lo, hi
        k.log = _bool(raw, "log", False, where)
        if k.log and lo <= 0:
            raise SpecError(where + ".log", "a log scale needs low > 0")
        if "step" in raw:
            step = raw["step"]
            if kind == "int" and not _is_int(step):
                raise SpecError(where + ".step", f"must be a positive integer, got {_typename(step)} {step!r}")
            if not _is_num(step) or step <= 0:
                raise SpecError(where + ".step", f"must be a positive number, got {_typename(step)} {step!r}")
            if step > hi - lo:
                raise SpecError(where + ".step", f"{step} is wider than the range [{lo}, {hi}]")
            if k.log:
                raise SpecError(where + ".step", "a log scale takes no step")
            k.step = step
        if "default" in raw:
            d = raw["default"]
            if not _is_num(d) or (kind == "int" and not _is_int(d)):
                want = "an integer" if kind == "int" else "a number"
                raise SpecError(where + ".default", f"must be {want}, got {_typename(d)} {d!r}")
            if not lo <= d <= hi:
                raise SpecError(where + ".default", f"{d} outside the range [{lo}, {hi}]")
        else:
            k.default = min(max(kdefault, lo), hi)
    _check_value(k, k.default, where + ".default", bounds)
    return k


def _check_value(k: Knob, v: Any, where: str, bounds: tuple[float, float] | None = None) -> None:
    if k.kind == "str":
        if not isinstance(v, str):
            raise SpecError(where, f"must be a string, got {_typename(v)} {v!r}")
        if k.name == "rt" and v not in RT_POLICIES:
            raise SpecError(where, f"rt policy {v!r} is not one of {', '.join(RT_POLICIES)}")
        if k.name == "thp" and v not in (*THP_MODES, "current"):
            raise SpecError(where, f"THP mode {v!r} is not one of {', '.join(THP_MODES)}")
        if k.name == "cpuset" and not (v == "all" or _cpu_list_ok(v)):
            raise SpecError(where, f"cpuset {v!r} is not 'all' or a CPU list like '0-1' or '1,3'")
        return
    if not _is_num(v) or (k.kind == "int" and not _is_int(v)):
        want = "an integer" if k.kind == "int" else "a number"
        raise SpecError(where, f"must be {want}, got {_typename(v)} {v!r}")
    if bounds and not bounds[0] <= v <= bounds[1]:
        raise SpecError(where, f"{v} outside what the kernel takes [{bounds[0]}, {bounds[1]}]")


def _term(raw: Any, where: str, apps: dict[str, App], slo: bool = False) -> Term:
    if not isinstance(raw, dict):
        raise SpecError(where, "must be a table {app, metric, stat[, weight]}")
    _unknown(raw, {"app", "metric", "stat", "weight", "max"} if slo else {"app", "metric", "stat", "weight"}, where)
    app = _req(raw, "app", where, str)
    if app not in apps:
        raise SpecError(where + ".app", f"no app named {app!r} (apps: {', '.join(apps)})")
    metric = _req(raw, "metric", where, str)
    if not _name_ok(metric):
        raise SpecError(where + ".metric", f"{metric!r} is not a metric name of [A-Za-z0-9_.-] characters")
    stat = raw.get("stat", "mean")
    if not isinstance(stat, str) or stat not in STATS:
        raise SpecError(where + ".stat", f"{stat!r} is not one of {', '.join(STATS)}")
    weight = raw.get("weight", 1.0)
    if not _is_num(weight) or weight < 0:
        raise SpecError(where + ".weight", f"must be a number >= 0, got {_typename(weight)} {weight!r}")
    mx = raw.get("max")
    if slo and not _is_num(mx):
        raise SpecError(where + ".max", f"an SLO constraint needs a numeric max, got {_typename(mx)} {mx!r}")
    if metric not in apps[app].metrics:
        apps[app].metrics.append(metric)
    return Term(app, metric, stat, float(weight), float(mx) if mx is not None else None)


def _safety(raw: Any) -> Safety:
    if not isinstance(raw, dict):
        raise SpecError("safety", f"must be a table, got {_typename(raw)}")
    _unknown(raw, {"fifo_priority_max", "above_irq_threads", "deadline_share_max"}, "safety")
    above = _bool(raw, "above_irq_threads", False, "safety")
    fmax = _int(raw, "fifo_priority_max", 99 if above else FIFO_PRIORITY_MAX, "safety")
    if not 1 <= fmax <= 99:
        raise SpecError("safety.fifo_priority_max", f"must be in [1, 99], got {fmax}")
    if fmax >= IRQ_THREAD_FIFO_PRIORITY and not above:
        raise SpecError(
            "safety.fifo_priority_max",
            f"{fmax} is at or above the kernel's threaded IRQ handlers (SCHED_FIFO {IRQ_THREAD_FIFO_PRIORITY}); "
            "set above_irq_threads = true to allow it",
        )
    share = _num(raw, "deadline_share_max", DEADLINE_SHARE_MAX, "safety")
    if not 0 < share <= DEADLINE_SHARE_LIMIT:
        raise SpecError("safety.deadline_share_max", f"must be in (0, {DEADLINE_SHARE_LIMIT}], got {share}")
    return Safety(fmax, above, share)


def _values(k: Knob | None, kdefault: float) -> list[float]:
    """Every value a numeric knob can take at its extremes (the kernel default if not a knob)."""
    if k is None:
        return [kdefault]
    vals = [v for v in (k.choices or []) if _is_num(v)]
    if k.low is not None and k.high is not None:
        vals += [k.low, k.high]
    if _is_num(k.default):
        vals.append(k.default)
    return vals or [kdefault]


def _may_be(k: Knob | None, policy: str) -> bool:
    return k is not None and (policy in (k.choices or []) or k.default == policy)


def _check_space(spec: Spec) -> None:
    """Refuse a search space holding a configuration beyond the safety limits, so the search
    never picks a value that the runner would have to change (the sampler would learn from a
    configuration that was never measured)."""
    lim = spec.safety
    for app in spec.apps:
        rt = spec.knob(f"{app.name}.rt")
        prio = spec.knob(f"{app.name}.fifo_priority")
        if _may_be(rt, "fifo") or prio is not None:
            top = max(_values(prio, APP_KNOBS["fifo_priority"][1]))
            if top > lim.fifo_priority_max:
                raise SpecError(
                    f"knobs.{app.name}.fifo_priority",
                    f"reaches {top}, above safety.fifo_priority_max {lim.fifo_priority_max} (threaded IRQ handlers "
                    f"run at SCHED_FIFO {IRQ_THREAD_FIFO_PRIORITY}; raise the limit in [safety] to allow it)",
                )
        if _may_be(rt, "deadline"):
            runtime = max(_values(spec.knob(f"{app.name}.rt_runtime_ms"), APP_KNOBS["rt_runtime_ms"][1]))
            period = min(_values(spec.knob(f"{app.name}.rt_period_ms"), APP_KNOBS["rt_period_ms"][1]))
            if runtime > lim.deadline_share_max * period + 1e-9:
                raise SpecError(
                    f"knobs.{app.name}.rt_runtime_ms",
                    f"runtime up to {runtime:g} ms with a period down to {period:g} ms exceeds "
                    f"safety.deadline_share_max {lim.deadline_share_max:g} of the period; narrow the runtime range "
                    f"to at most {lim.deadline_share_max * period:g} ms or raise the period's lower bound",
                )


def check_safety(spec: Spec, config: dict[str, Any]) -> None:
    """Refuse a full configuration (every knob resolved) beyond the spec's safety limits, e.g.
    a profile saved before the limits existed; nothing is ever clamped."""
    lim = spec.safety
    for app in spec.apps:
        rt = config.get(f"{app.name}.rt", "none")
        if rt == "fifo":
            prio = config.get(f"{app.name}.fifo_priority", APP_KNOBS["fifo_priority"][1])
            if not _is_int(prio) or not 1 <= prio <= lim.fifo_priority_max:
                raise SpecError(
                    f"{app.name}.fifo_priority",
                    f"{prio!r} is not in [1, {lim.fifo_priority_max}] (safety.fifo_priority_max)",
                )
        if rt == "deadline":
            run = config.get(f"{app.name}.rt_runtime_ms", APP_KNOBS["rt_runtime_ms"][1])
            per = config.get(f"{app.name}.rt_period_ms", APP_KNOBS["rt_period_ms"][1])
            if not (_is_num(run) and _is_num(per)) or not 0 < run <= lim.deadline_share_max * per + 1e-9:
                raise SpecError(
                    f"{app.name}.rt_runtime_ms",
                    f"runtime {run!r} ms with period {per!r} ms is beyond safety.deadline_share_max "
                    f"{lim.deadline_share_max:g}",
                )


def parse(data: dict[str, Any], path: Path | None = None) -> Spec:
    """Validate a decoded TOML document; raises SpecError naming the offending key."""
    if not isinstance(data, dict):
        raise SpecError("spec", f"must be a table, got {_typename(data)}")
    top = {"name", "environment", "cgroup_root", "cgroup_root_cpu_shares", "cgroup_version", "trial", "app"}
    _unknown(data, top | {"objective", "knobs", "safety"}, "spec")
    root_shares = data.get("cgroup_root_cpu_shares")
    if root_shares is not None and (not _is_int(root_shares) or not 2 <= root_shares <= 262144):
        raise SpecError("spec.cgroup_root_cpu_shares", f"must be an integer in [2, 262144], got {root_shares!r}")
    name = data.get("name", re.sub(r"[\s/\x00-\x1f\x7f]+", "-", path.stem) or "study" if path else "study")
    if not isinstance(name, str) or not _LABEL.fullmatch(name):
        raise SpecError("spec.name", f"must be a non-empty string without spaces or slashes, got {name!r}")
    env = _req(data, "environment", "spec", str)
    if not _LABEL.fullmatch(env) or env in (".", ".."):
        raise SpecError("spec.environment", "must be a non-empty label without spaces or slashes")
    croot = data.get("cgroup_root", "cohort-tune")
    if not isinstance(croot, str) or not all(_name_ok(part) for part in croot.split("/")):
        raise SpecError("spec.cgroup_root", "must be a relative cgroup path of [A-Za-z0-9_.-] names, without '..'")
    cver = data.get("cgroup_version", "auto")
    if cver not in ("auto", "1", "2", 1, 2) or isinstance(cver, bool):
        raise SpecError("spec.cgroup_version", f"must be auto, 1 or 2, got {cver!r}")
    cver = str(cver)
    t = data.get("trial", {})
    if not isinstance(t, dict):
        raise SpecError("trial", f"must be a table, got {_typename(t)}")
    _unknown(t, {"duration_s", "warmup_s", "repetitions", "ready_timeout_s"}, "trial")
    trial = Trial(
        _num(t, "duration_s", 20.0, "trial"),
        _num(t, "warmup_s", 3.0, "trial"),
        _int(t, "repetitions", 2, "trial"),
        _num(t, "ready_timeout_s", 30.0, "trial"),
    )
    if trial.duration_s <= 0 or trial.warmup_s < 0 or trial.warmup_s >= trial.duration_s:
        raise SpecError("trial", "need duration_s > warmup_s >= 0")
    if trial.repetitions < 1:
        raise SpecError("trial.repetitions", "must be >= 1")
    if trial.ready_timeout_s <= 0:
        raise SpecError("trial.ready_timeout_s", "must be > 0")
    raw_apps = data.get("app")
    if not isinstance(raw_apps, list) or not raw_apps:
        raise SpecError("app", "the spec needs at least one [[app]]")
    apps: dict[str, App] = {}
    for i, ra in enumerate(raw_apps):
        where = f"app[{i}]"
        if not isinstance(ra, dict):
            raise SpecError(where, f"must be a table, got {_typename(ra)}")
        _unknown(ra, {"name", "command", "cgroup", "env"}, where)
        an = _req(ra, "name", where, str)
        if an in apps or an == "system" or not _name_ok(an):
            raise SpecError(where + ".name", f"{an!r} is a duplicate, reserved or not a name of [A-Za-z0-9_.-]")
        cmd = _req(ra, "command", where, list)
        if not cmd or not all(isinstance(c, str) and "\x00" not in c for c in cmd):
            raise SpecError(where + ".command", "must be a non-empty array of strings (without NUL)")
        for c in cmd:
            try:
                c.format(**_PLACEHOLDERS)
            except (KeyError, IndexError, ValueError, AttributeError, TypeError) as e:
                raise SpecError(
                    where + ".command",
                    f"{c!r}: bad placeholder ({type(e).__name__}: {e}); known: "
                    f"{', '.join('{' + k + '}' for k in _PLACEHOLDERS)} (write {{{{ and }}}} for braces)",
                ) from None
        cg = ra.get("cgroup", an)
        if not _name_ok(cg):
            raise SpecError(where + ".cgroup", "must be a plain cgroup name of [A-Za-z0-9_.-]")
        env_t = ra.get("env", {})
        if not isinstance(env_t, dict) or not all(
            isinstance(v, str) and "\x00" not in v and k and "=" not in k and "\x00" not in k for k, v in env_t.items()
        ):
            raise SpecError(where + ".env", "must be a table of strings (names without '=')")
        apps[an] = App(an, cmd, cg, dict(env_t))
    if len({a.cgroup for a in apps.values()}) != len(apps):
        raise SpecError("app", "two apps share a cgroup name")
    o = data.get("objective")
    if not isinstance(o, dict):
        raise SpecError("objective", "missing [objective] table")
    _unknown(o, {"kind", "terms", "constraint"}, "objective")
    kind = o.get("kind", "sum")
    if not isinstance(kind, str) or kind not in OBJECTIVE_KINDS:
        raise SpecError("objective.kind", f"{kind!r} is not one of {', '.join(OBJECTIVE_KINDS)}")
    raw_terms = o.get("terms")
    if not isinstance(raw_terms, list) or not raw_terms:
        raise SpecError("objective.terms", "needs a non-empty list of terms")
    terms = [_term(rt, f"objective.terms[{i}]", apps) for i, rt in enumerate(raw_terms)]
    if kind == "sum" and any(t.weight != 1.0 for t in terms):
        raise SpecError("objective.terms", "kind 'sum' takes no weights; use kind = 'weighted'")
    constraint = None
    if kind == "slo":
        if "constraint" not in o:
            raise SpecError("objective.constraint", "kind 'slo' needs a constraint {app, metric, stat, max}")
        constraint = _term(o["constraint"], "objective.constraint", apps, slo=True)
    elif "constraint" in o:
        raise SpecError("objective.constraint", "only kind 'slo' takes a constraint")
    knobs: list[Knob] = []
    raw_knobs = data.get("knobs", {})
    if not isinstance(raw_knobs, dict):
        raise SpecError("knobs", "must be a table of [knobs.<app>] / [knobs.system] tables")
    for scope, table in raw_knobs.items():
        if scope != "system" and scope not in apps:
            raise SpecError(f"knobs.{scope}", f"no app named {scope!r} (apps: {', '.join(apps)}, or system)")
        if not isinstance(table, dict):
            raise SpecError(f"knobs.{scope}", f"must be a table, got {_typename(table)}")
        for kn, raw in table.items():
            knobs.append(_knob(scope, kn, raw, SYSTEM_KNOBS if scope == "system" else APP_KNOBS))
    if not any(not k.fixed for k in knobs):
        raise SpecError("knobs", "nothing to tune: give at least one knob a range or choices")
    spec = Spec(
        name,
        env,
        list(apps.values()),
        Objective(kind, terms, constraint),
        knobs,
        trial,
        croot,
        cver,
        path,
        root_shares,
        _safety(data.get("safety", {})),
    )
    _check_space(spec)
    return spec


def loads(text: str, path: Path | None = None) -> Spec:
    """Parse a spec from TOML text; every problem is a SpecError."""
    where = str(path) if path else "spec"
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise SpecError(where, f"not valid TOML: {e}") from e
    except (ValueError, RecursionError) as e:  # e.g. a date out of range, nesting too deep
        raise SpecError(where, f"not valid TOML: {type(e).__name__}: {e}") from e
    return parse(data, path)


def load(path: str | Path) -> Spec:
    p = Path(path)
    try:
        text = p.read_text()
    except FileNotFoundError as e:
        raise SpecError(str(p), "no such file") from e
    except UnicodeDecodeError as e:
        raise SpecError(str(p), f"not UTF-8 text: {e}") from e
    except OSError as e:
        raise SpecError(str(p), f"cannot read: {e.strerror}") from e
    return loads(text, p)
