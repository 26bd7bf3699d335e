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
``default`` is the kernel's default unless given; the default configuration is the study's
first trial. Command arguments may use ``{duration}`` (the run length in seconds, trial
length plus slack), ``{environment}``, ``{app}`` and ``{python}`` (the tuner's interpreter).
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cohort.tune.errors import SpecError

STATS = ("mean", "p50", "p90", "p99", "max")
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
    "fifo_priority": ("int", 50, (1, 99)),
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


def _unknown(d: dict[str, Any], allowed: set[str], where: str) -> None:
    extra = sorted(set(d) - allowed)
    if extra:
        raise SpecError(where, f"unknown key(s) {', '.join(extra)} (allowed: {', '.join(sorted(allowed))})")


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
    k = Knob(scope, name, kind, raw.get("default", kdefault))
    if "value" in raw:
        k.fixed = True
        k.default = raw["value"]
        k.choices = [raw["value"]]
    elif "choices" in raw:
        ch = raw["choices"]
        if not isinstance(ch, list) or not ch:
            raise SpecError(where + ".choices", "must be a non-empty list")
        k.choices = ch
        if "default" not in raw:
            k.default = kdefault if kdefault in ch or kdefault == "current" else ch[0]
    else:
        rng = raw["range"]
        if kind == "str":
            raise SpecError(where, "takes choices, not a range")
        if not (
            isinstance(rng, list)
            and len(rng) == 2
            and all(isinstance(x, int | float) and not isinstance(x, bool) for x in rng)
        ):
            raise SpecError(where + ".range", "must be [low, high] numbers")
        lo, hi = rng
        if lo >= hi:
            raise SpecError(where + ".range", f"low {lo} must be below high {hi}")
        if bounds and (lo < bounds[0] or hi > bounds[1]):
            raise SpecError(where + ".range", f"[{lo}, {hi}] outside what the kernel takes [{bounds[0]}, {bounds[1]}]")
        k.low, k.high = lo, hi
        if kind == "int" and not (isinstance(lo, int) and isinstance(hi, int)):
            raise SpecError(where + ".range", "this knob takes integers")
        k.log = bool(raw.get("log", False))
        if k.log and lo <= 0:
            raise SpecError(where + ".log", "a log scale needs low > 0")
        k.step = raw.get("step")
        if "default" in raw and not (lo <= raw["default"] <= hi):
            raise SpecError(where + ".default", f"{raw['default']} outside the range [{lo}, {hi}]")
        if "default" not in raw:
            k.default = min(max(kdefault, lo), hi)
    _check_value(k, k.default, where + ".default")
    if k.choices:
        for c in k.choices:
            _check_value(k, c, where + ".choices")
    return k


def _check_value(k: Knob, v: Any, where: str) -> None:
    if k.name == "rt" and v not in RT_POLICIES:
        raise SpecError(where, f"rt policy {v!r} is not one of {', '.join(RT_POLICIES)}")
    if k.name == "thp" and v not in (*THP_MODES, "current"):
        raise SpecError(where, f"THP mode {v!r} is not one of {', '.join(THP_MODES)}")
    if k.name == "cpuset" and not (
        v == "all" or (isinstance(v, str) and all(p.replace("-", "").isdigit() for p in v.split(",")))
    ):
        raise SpecError(where, f"cpuset {v!r} is not 'all' or a CPU list like '0-1' or '1,3'")
    if k.kind in ("int", "float") and not (isinstance(v, int | float) and not isinstance(v, bool)):
        raise SpecError(where, f"must be a number, got {v!r}")


def _term(raw: Any, where: str, apps: dict[str, App], slo: bool = False) -> Term:
    if not isinstance(raw, dict):
        raise SpecError(where, "must be a table {app, metric, stat[, weight]}")
    _unknown(raw, {"app", "metric", "stat", "weight", "max"}, where)
    app = _req(raw, "app", where, str)
    if app not in apps:
        raise SpecError(where + ".app", f"no app named {app!r} (apps: {', '.join(apps)})")
    metric = _req(raw, "metric", where, str)
    stat = raw.get("stat", "mean")
    if stat not in STATS:
        raise SpecError(where + ".stat", f"{stat!r} is not one of {', '.join(STATS)}")
    weight = raw.get("weight", 1.0)
    if not isinstance(weight, int | float) or weight < 0:
        raise SpecError(where + ".weight", "must be a number >= 0")
    mx = raw.get("max")
    if slo and not isinstance(mx, int | float):
        raise SpecError(where + ".max", "an SLO constraint needs a numeric max")
    if metric not in apps[app].metrics:
        apps[app].metrics.append(metric)
    return Term(app, metric, stat, float(weight), float(mx) if mx is not None else None)


def parse(data: dict[str, Any], path: Path | None = None) -> Spec:
    """Validate a decoded TOML document; raises SpecError naming the offending key."""
    top = {"name", "environment", "cgroup_root", "cgroup_root_cpu_shares", "cgroup_version", "trial", "app"}
    _unknown(data, top | {"objective", "knobs"}, "spec")
    root_shares = data.get("cgroup_root_cpu_shares")
    if root_shares is not None and (
        not isinstance(root_shares, int) or isinstance(root_shares, bool) or not 2 <= root_shares <= 262144
    ):
        raise SpecError("spec.cgroup_root_cpu_shares", "must be an integer in [2, 262144]")
    name = data.get("name", path.stem if path else "study")
    env = _req(data, "environment", "spec", str)
    if not env or any(c in env for c in "/ \t"):
        raise SpecError("spec.environment", "must be a non-empty label without spaces or slashes")
    croot = data.get("cgroup_root", "cohort-tune")
    if not isinstance(croot, str) or not croot or croot.startswith("/") or ".." in croot:
        raise SpecError("spec.cgroup_root", "must be a relative cgroup name without '..'")
    cver = str(data.get("cgroup_version", "auto"))
    if cver not in ("auto", "1", "2"):
        raise SpecError("spec.cgroup_version", "must be auto, 1 or 2")
    t = data.get("trial", {})
    if not isinstance(t, dict):
        raise SpecError("trial", "must be a table")
    _unknown(t, {"duration_s", "warmup_s", "repetitions", "ready_timeout_s"}, "trial")
    trial = Trial(
        float(t.get("duration_s", 20.0)),
        float(t.get("warmup_s", 3.0)),
        int(t.get("repetitions", 2)),
        float(t.get("ready_timeout_s", 30.0)),
    )
    if trial.duration_s <= 0 or trial.warmup_s < 0 or trial.warmup_s >= trial.duration_s:
        raise SpecError("trial", "need duration_s > warmup_s >= 0")
    if trial.repetitions < 1:
        raise SpecError("trial.repetitions", "must be >= 1")
    raw_apps = data.get("app")
    if not isinstance(raw_apps, list) or not raw_apps:
        raise SpecError("app", "the spec needs at least one [[app]]")
    apps: dict[str, App] = {}
    for i, ra in enumerate(raw_apps):
        where = f"app[{i}]"
        if not isinstance(ra, dict):
            raise SpecError(where, "must be a table")
        _unknown(ra, {"name", "command", "cgroup", "env"}, where)
        an = _req(ra, "name", where, str)
        if an in apps or an == "system" or not an.replace("_", "").replace("-", "").isalnum():
            raise SpecError(where + ".name", f"{an!r} is a duplicate, reserved or not alphanumeric")
        cmd = _req(ra, "command", where, list)
        if not cmd or not all(isinstance(c, str) for c in cmd):
            raise SpecError(where + ".command", "must be a non-empty list of strings")
        cg = ra.get("cgroup", an)
        if not isinstance(cg, str) or "/" in cg or ".." in cg or not cg:
            raise SpecError(where + ".cgroup", "must be a plain cgroup name")
        env_t = ra.get("env", {})
        if not isinstance(env_t, dict) or not all(isinstance(v, str) for v in env_t.values()):
            raise SpecError(where + ".env", "must be a table of strings")
        apps[an] = App(an, cmd, cg, dict(env_t))
    o = data.get("objective")
    if not isinstance(o, dict):
        raise SpecError("objective", "missing [objective] table")
    _unknown(o, {"kind", "terms", "constraint"}, "objective")
    kind = o.get("kind", "sum")
    if kind not in OBJECTIVE_KINDS:
        raise SpecError("objective.kind", f"{kind!r} is not one of {', '.join(OBJECTIVE_KINDS)}")
    raw_terms = o.get("terms")
    if not isinstance(raw_terms, list) or not raw_terms:
        raise SpecError("objective.terms", "needs a non-empty list of terms")
    terms = [_term(rt, f"objective.terms[{i}]", apps) for i, rt in enumerate(raw_terms)]
    if kind == "sum" and any(rt.get("weight", 1.0) != 1.0 for rt in raw_terms if isinstance(rt, dict)):
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
            raise SpecError(f"knobs.{scope}", "must be a table")
        for kn, raw in table.items():
            knobs.append(_knob(scope, kn, raw, SYSTEM_KNOBS if scope == "system" else APP_KNOBS))
    if not any(not k.fixed for k in knobs):
        raise SpecError("knobs", "nothing to tune: give at least one knob a range or choices")
    return Spec(
        str(name),
        env,
        list(apps.values()),
        Objective(kind, terms, constraint),
        knobs,
        trial,
        croot,
        cver,
        path,
        root_shares,
    )


def load(path: str | Path) -> Spec:
    p = Path(path)
    try:
        data = tomllib.loads(p.read_text())
    except FileNotFoundError as e:
        raise SpecError(str(p), "no such file") from e
    except tomllib.TOMLDecodeError as e:
        raise SpecError(str(p), f"not valid TOML: {e}") from e
    return parse(data, p)
