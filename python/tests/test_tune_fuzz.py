"""Fuzzing the spec parser (TOML): any input is a Spec or a SpecError, never a traceback.

Hypothesis drives three kinds of input (whole documents of any TOML value, the reference spec
with values replaced anywhere, the reference text with characters inserted); a parsed spec
must also be usable by the search (Optuna suggests a configuration from it and the runner's
safety check accepts it). ``python -m cohort.tune.fuzz --count 1000000`` is the long run."""

from __future__ import annotations

import datetime as dt
import tomllib
from typing import Any

import optuna
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cohort.tune import fuzz
from cohort.tune.errors import SpecError
from cohort.tune.search import suggest_config
from cohort.tune.spec import Spec, check_safety, loads, parse

REF_TEXT = fuzz.REFERENCE.read_text()
REF = tomllib.loads(REF_TEXT)

keys = st.sampled_from(fuzz.KEYS) | st.text(max_size=8)
scalars = (
    st.integers()
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.booleans()
    | st.sampled_from(fuzz.STRINGS)
    | st.text(max_size=12)
    | st.dates()
    | st.times()
    | st.datetimes(timezones=st.none() | st.just(dt.UTC))
)
values = st.recursive(
    scalars, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(keys, inner, max_size=4), max_leaves=12
)
FAST = settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def usable(spec: Spec) -> None:
    """What the search and the runner do with a parsed spec before touching the system."""
    fuzz.use(spec)
    trial = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=0)).ask()
    cfg = {**spec.defaults(), **suggest_config(trial, spec)}
    check_safety(spec, {k: v for k, v in cfg.items() if v != "current"})


def outcome(data: Any, text: bool = False) -> None:
    try:
        spec = loads(data) if text else parse(data)
    except SpecError as e:
        assert e.where and e.message
        return
    usable(spec)


def _paths(v: Any, prefix: tuple = ()) -> list[tuple]:
    out = [prefix]
    if isinstance(v, dict):
        for k, x in v.items():
            out += _paths(x, (*prefix, k))
    elif isinstance(v, list):
        for i, x in enumerate(v):
            out += _paths(x, (*prefix, i))
    return out


PATHS = [p for p in _paths(REF) if p]


@FAST
@given(st.dictionaries(keys, values, max_size=8))
def test_any_document(doc: dict) -> None:
    outcome(doc)


@FAST
@given(st.lists(st.tuples(st.sampled_from(PATHS), values | st.just(KeyError)), min_size=1, max_size=4))
def test_reference_with_values_replaced(changes: list) -> None:
    doc = fuzz._copy(REF)
    for path, value in changes:
        cur = doc
        try:
            for k in path[:-1]:
                cur = cur[k]
            if value is KeyError:
                del cur[path[-1]]
            else:
                cur[path[-1]] = value
        except (KeyError, IndexError, TypeError):
            continue  # an earlier change removed or replaced this path
    outcome(doc)


@FAST
@given(st.integers(min_value=0, max_value=len(REF_TEXT)), st.text(max_size=20) | st.sampled_from(fuzz.TOML_BITS))
def test_reference_text_with_characters_inserted(at: int, bit: str) -> None:
    outcome(REF_TEXT[:at] + bit + REF_TEXT[at:], text=True)


def test_the_long_fuzzer_runs_and_finds_nothing() -> None:
    rep = fuzz.run(3000, seed=7)
    assert rep["results"]["crashed"] == 0, rep["crashes"]
    assert rep["results"]["ok"] > 0 and rep["results"]["refused"] > 0
    assert all(n > 0 for n in rep["generators"].values())
