"""Fuzzing the spec parser: every input gives a :class:`~cohort.tune.spec.Spec` or a
:class:`~cohort.tune.errors.SpecError`, never any other exception.

``python -m cohort.tune.fuzz --count 1000000 [--seed 0] [--json]`` runs that many generated
specs in one process and prints what came out (how many parsed, how many were refused, how
many crashed, with the first crashing inputs and their tracebacks); exit status 1 if any
input crashed. Three generators take turns, all seeded (a failure replays with ``--seed``):

* ``tree`` (half of the inputs): the reference spec and smaller valid specs as decoded TOML,
  with 1-4 mutations each: a value replaced by one of any TOML type (integers at the edges of
  every range, NaN and infinities, strings with placeholders, path separators, NUL, non-ASCII
  digits, dates and times, arrays, tables), a key removed, a key added (a known one in the
  wrong place or an unknown one), an array element dropped or duplicated;
* ``text`` (a third): the same specs as TOML text, mutated by character: TOML punctuation
  inserted, spans deleted or duplicated, lines swapped, numbers and strings replaced — most
  are not TOML any more and must come back as "not valid TOML";
* ``random`` (the rest): a random document built from the spec's own vocabulary of keys.

A parsed spec is then used the way the runner uses it before touching the system: its
defaults, its controllers, the safety check of its default configuration, and the default
configuration as Optuna parameters.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import math
import random
import sys
import time
import tomllib
import traceback
from pathlib import Path
from typing import Any

from cohort.tune.errors import SpecError
from cohort.tune.spec import Spec, check_safety, loads, parse

REFERENCE = Path(__file__).resolve().parent / "specs" / "reference.toml"

SMALL_SPECS = [
    """
environment = "lab"
[trial]
duration_s = 1.5
warmup_s = 0.5
repetitions = 1
[[app]]
name = "a"
command = ["{python}", "-c", "pass", "{duration}"]
[objective]
kind = "slo"
terms = [{ app = "a", metric = "loop_ms", stat = "p99" }]
constraint = { app = "a", metric = "loop_ms", stat = "max", max = 50.0 }
[knobs.a]
rt = { choices = ["none", "deadline", "fifo"] }
rt_runtime_ms = { range = [1.0, 9.0], step = 0.5 }
rt_period_ms = { choices = [10.0, 20.0] }
fifo_priority = { range = [1, 49], default = 5 }
cpuset = { choices = ["all", "0", "0-1,3"] }
mem_soft_limit_mib = 64
[safety]
deadline_share_max = 0.9
""",
    """
name = "w"
environment = "dense"
cgroup_root = "robots/cohort"
cgroup_version = 2
cgroup_root_cpu_shares = 4096
[[app]]
name = "x"
cgroup = "x-cg"
command = ["run", "{app}", "{environment}"]
env = { A = "1" }
[[app]]
name = "y"
command = ["run"]
[objective]
kind = "weighted"
terms = [{ app = "x", metric = "t_ms", weight = 2.0 }, { app = "y", metric = "u.ms", stat = "p50", weight = 0 }]
[knobs.x]
cpu_shares = { range = [2, 262144], log = true }
[knobs.y]
cpu_shares = { range = [128, 1024], step = 128, default = 256 }
rt_budget_us = { value = 50000 }
[knobs.system]
thp = { choices = ["always", "never"], default = "current" }
[safety]
above_irq_threads = true
fifo_priority_max = 80
""",
]

KEYS = [
    "name", "environment", "cgroup_root", "cgroup_root_cpu_shares", "cgroup_version", "trial", "app",
    "objective", "knobs", "safety", "duration_s", "warmup_s", "repetitions", "ready_timeout_s", "command",
    "cgroup", "env", "kind", "terms", "constraint", "metric", "stat", "weight", "max", "range", "choices",
    "value", "default", "log", "step", "cpu_shares", "mem_soft_limit_mib", "cpuset", "rt", "rt_runtime_ms",
    "rt_period_ms", "fifo_priority", "rt_budget_us", "thp", "system", "nav", "a", "fifo_priority_max",
    "above_irq_threads", "deadline_share_max", "", " ", "x.y", "é", "0",
]  # fmt: skip

STRINGS = [
    "", "a", "nav", "system", "none", "fifo", "deadline", "rr", "always", "madvise", "never", "current", "all",
    "0", "0-1", "1-0", "1-", "-1", "0,,1", "99999999999999999999", "²", "٣", "cpu0", "p99", "mean", "max",
    "sum", "relative", "slo", "weighted", "auto", "1", "2", "{duration}", "{", "}", "{0}", "{x.y}", "{duration!r}",
    "{duration:>{app}}", "{{}}", "a b", "../x", "/abs", "a/b", "..", ".", "\x00", "a\x00b", "\n", "\t", "=", "é",
    "x" * 300, "loop_ms", "frame_ms", "1e3", "nan", "inf",
]  # fmt: skip

NUMBERS: list[Any] = [
    0, 1, -1, 2, 3, 49, 50, 99, 100, 128, 1023, 1024, 262144, 262145, 1 << 30, (1 << 30) + 1, 1 << 63, -(1 << 63),
    10**30, 0.0, -0.0, 0.5, 0.9, 0.95, 0.96, 1.7, 5.0, 45.0, 47.5, 50.0, 1e-300, 1e300, 1e308,
    math.inf, -math.inf, math.nan, True, False,
]  # fmt: skip

TEMPORAL: list[Any] = [
    dt.date(2026, 1, 1),
    dt.time(12, 0),
    dt.datetime(2026, 1, 1, 12, 0, tzinfo=dt.UTC),
    dt.datetime(1979, 5, 27, 7, 32),
]

TOML_BITS = [
    "[", "]", "{", "}", "=", '"', "'", ",", ".", "#", "\n", " ", "[[", "]]", '"""', "'''", "\\", "\\u0000",
    "true", "false", "inf", "nan", "-", "+", "_", "0x", "0o", "0b", "1e", "1979-05-27", "T", ":", "Z",
]  # fmt: skip


def _copy(v: Any) -> Any:
    if isinstance(v, dict):
        return {k: _copy(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_copy(x) for x in v]
    return v


class Generator:
    """Seeded source of fuzzed specs (see the module doc)."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.texts = [REFERENCE.read_text(), *SMALL_SPECS]
        self.trees = [tomllib.loads(t) for t in self.texts]

    # ---- values --------------------------------------------------------------------
    def scalar(self) -> Any:
        r = self.rng.random()
        if r < 0.4:
            return self.rng.choice(NUMBERS)
        if r < 0.8:
            return self.rng.choice(STRINGS)
        if r < 0.9:
            return self.rng.choice(TEMPORAL)
        return self.rng.uniform(-1e6, 1e6) if self.rng.random() < 0.5 else self.rng.randint(-(10**6), 10**6)

    def value(self, depth: int = 0) -> Any:
        r = self.rng.random()
        if depth >= 3 or r < 0.6:
            return self.scalar()
        if r < 0.8:
            return [self.value(depth + 1) for _ in range(self.rng.randint(0, 3))]
        return {self.rng.choice(KEYS): self.value(depth + 1) for _ in range(self.rng.randint(0, 3))}

    # ---- tree mutations ------------------------------------------------------------
    def _containers(self, v: Any, out: list[Any]) -> None:
        if isinstance(v, dict | list):
            out.append(v)
            for x in v.values() if isinstance(v, dict) else v:
                self._containers(x, out)

    def tree(self) -> Any:
        doc = _copy(self.rng.choice(self.trees))
        for _ in range(self.rng.randint(1, 4)):
            found: list[Any] = []
            self._containers(doc, found)
            c = self.rng.choice(found)
            op = self.rng.random()
            if isinstance(c, dict):
                if c and op < 0.55:
                    c[self.rng.choice(list(c))] = self.value()
                elif c and op < 0.75:
                    del c[self.rng.choice(list(c))]
                else:
                    c[self.rng.choice(KEYS)] = self.value()
            elif c:
                i = self.rng.randrange(len(c))
                if op < 0.5:
                    c[i] = self.value()
                elif op < 0.75:
                    del c[i]
                else:
                    c.append(_copy(c[i]))
            else:
                c.append(self.value())
        if self.rng.random() < 0.02:
            return self.value()  # not even a table
        return doc

    # ---- text mutations ------------------------------------------------------------
    def text(self) -> str:
        t = self.rng.choice(self.texts)
        for _ in range(self.rng.randint(1, 5)):
            n = len(t)
            i = self.rng.randrange(n + 1)
            op = self.rng.random()
            if op < 0.35:
                t = t[:i] + self.rng.choice(TOML_BITS) + t[i:]
            elif op < 0.55:
                t = t[:i] + t[i + self.rng.randint(1, 20) :]
            elif op < 0.7:
                j = min(n, i + self.rng.randint(1, 60))
                t = t[:j] + t[i:j] + t[j:]
            elif op < 0.85:
                lines = t.split("\n")
                a, b = self.rng.randrange(len(lines)), self.rng.randrange(len(lines))
                lines[a], lines[b] = lines[b], lines[a]
                t = "\n".join(lines)
            else:
                rep = self.scalar()
                tok = json.dumps(rep, default=str) if not isinstance(rep, float) else repr(rep)
                t = t[:i] + tok + t[i + self.rng.randint(0, 8) :]
        return t

    def random_doc(self) -> Any:
        return {self.rng.choice(KEYS): self.value() for _ in range(self.rng.randint(0, 8))}


def use(spec: Spec) -> None:
    """What the runner does with a spec before it touches the system."""
    from cohort.tune.search import default_params

    full = spec.defaults()
    spec.controllers()
    spec.searched()
    check_safety(spec, {k: v for k, v in full.items() if v != "current"})
    default_params(spec, "madvise")


def one(kind: str, data: Any) -> str:
    """Run one input; returns 'ok' or 'refused' (a crash propagates)."""
    try:
        spec = loads(data) if kind == "text" else parse(data)
        use(spec)
    except SpecError:
        return "refused"
    return "ok"


def run(count: int, seed: int, keep: int = 5, progress: bool = False) -> dict[str, Any]:
    gen = Generator(seed)
    counts = {"ok": 0, "refused": 0, "crashed": 0}
    by_kind = {"tree": 0, "text": 0, "random": 0}
    crashes: list[dict[str, str]] = []
    t0 = time.monotonic()
    for i in range(count):
        r = gen.rng.random()
        kind = "tree" if r < 0.5 else "text" if r < 0.83 else "random"
        data = gen.tree() if kind == "tree" else gen.text() if kind == "text" else gen.random_doc()
        by_kind[kind] += 1
        try:
            counts[one(kind, data)] += 1
        except Exception as e:
            counts["crashed"] += 1
            if len(crashes) < keep:
                crashes.append(
                    {
                        "index": str(i),
                        "kind": kind,
                        "input": repr(data)[:2000],
                        "error": repr(e),
                        "traceback": traceback.format_exc(),
                    }
                )
        if progress and i and i % 100000 == 0:
            print(f"{i} inputs, {time.monotonic() - t0:.0f} s, {counts}", file=sys.stderr, flush=True)
    return {
        "count": count,
        "seed": seed,
        "seconds": round(time.monotonic() - t0, 1),
        "results": counts,
        "generators": by_kind,
        "crashes": crashes,
        "command": f"python -m cohort.tune.fuzz --count {count} --seed {seed}",
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m cohort.tune.fuzz", description=__doc__.split("\n\n")[0])
    ap.add_argument("--count", type=int, default=100000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", action="store_true", help="print the whole report as JSON")
    ap.add_argument("--progress", action="store_true")
    a = ap.parse_args(argv)
    rep = run(a.count, a.seed, progress=a.progress)
    if a.json:
        print(json.dumps(rep, indent=1))
    else:
        r = rep["results"]
        print(
            f"{rep['count']} fuzzed specs in {rep['seconds']} s (seed {rep['seed']}): {r['ok']} parsed, "
            f"{r['refused']} refused with a SpecError, {r['crashed']} crashed"
        )
        for c in rep["crashes"]:
            print(f"--- crash at input {c['index']} ({c['kind']}): {c['error']}\n{c['input']}\n{c['traceback']}")
    return 1 if rep["results"]["crashed"] else 0


if __name__ == "__main__":
    raise SystemExit(main())
