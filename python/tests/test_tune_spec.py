"""The spec parser: the reference spec loads; every kind of mistake is a SpecError naming its key."""

import copy
import tomllib
from pathlib import Path

import pytest

from cohort.tune.errors import AppError, SpecError
from cohort.tune.runner import evaluate
from cohort.tune.spec import load, parse

REF = Path(__file__).resolve().parents[1] / "cohort" / "tune" / "specs" / "reference.toml"


def ref() -> dict:
    return tomllib.loads(REF.read_text())


def test_reference_spec_loads() -> None:
    s = load(REF)
    assert [a.name for a in s.apps] == ["nav", "detect", "recorder", "uploader"]
    assert s.objective.kind == "relative"
    assert s.app("nav").metrics == ["loop_ms"]
    assert s.knob("nav.rt").choices == ["none", "deadline", "fifo"]
    assert s.knob("nav.cpu_shares").log
    assert s.defaults()["nav.rt"] == "none"
    assert s.controllers() == ["cpu", "memory"]


def test_slo_objective() -> None:
    d = ref()
    d["objective"] = {
        "kind": "slo",
        "terms": [{"app": "detect", "metric": "frame_ms", "stat": "mean"}],
        "constraint": {"app": "nav", "metric": "loop_ms", "stat": "p99", "max": 50.0},
    }
    s = parse(d)
    assert s.objective.constraint is not None and s.objective.constraint.max == 50.0


def test_relative_objective_takes_weights_and_divides_by_the_baseline() -> None:
    d = ref()
    d["objective"]["terms"][1]["weight"] = 0.5
    s = parse(d)
    stats = {"nav.loop_ms": {"p99": 30.0}, "detect.frame_ms": {"mean": 120.0}}
    assert evaluate(s, stats, [60.0, 100.0]) == (0.5 + 0.5 * 1.2, None)
    assert evaluate(s, stats) == (1.5, None)  # no baseline yet: the statistics are their own
    with pytest.raises(AppError, match="default configuration"):
        evaluate(s, stats, [0.0, 100.0])
    d["objective"]["kind"] = "sum"
    with pytest.raises(SpecError, match="takes no weights") as e:
        parse(d)
    assert e.value.where == "objective.terms"


def _mut(path: list, value: object) -> dict:
    d = copy.deepcopy(ref())
    cur = d
    for k in path[:-1]:
        cur = cur[k]
    if value is KeyError:
        del cur[path[-1]]
    else:
        cur[path[-1]] = value
    return d


@pytest.mark.parametrize(
    ("path", "value", "where"),
    [
        (["environment"], KeyError, "spec"),
        (["environment"], "a b", "spec.environment"),
        (["colour"], "red", "spec"),
        (["app"], [], "app"),
        (["app", 0, "command"], [], "app[0].command"),
        (["app", 1, "name"], "nav", "app[1].name"),
        (["trial", "repetitions"], 0, "trial.repetitions"),
        (["trial", "warmup_s"], 100, "trial"),
        (["objective", "kind"], "max", "objective.kind"),
        (["objective", "terms", 0, "stat"], "p42", "objective.terms[0].stat"),
        (["objective", "terms", 0, "app"], "lidar", "objective.terms[0].app"),
        (["knobs", "nav", "turbo"], {"range": [1, 2]}, "knobs.nav.turbo"),
        (["knobs", "nav", "cpu_shares"], {"range": [10, 1]}, "knobs.nav.cpu_shares.range"),
        (["knobs", "nav", "cpu_shares"], {"range": [1, 1000000]}, "knobs.nav.cpu_shares.range"),
        (["knobs", "nav", "cpu_shares"], {"range": [128, 256], "default": 1024}, "knobs.nav.cpu_shares.default"),
        (["knobs", "nav", "cpu_shares"], {"range": [1.5, 256]}, "knobs.nav.cpu_shares.range"),
        (["knobs", "nav", "rt"], {"choices": ["none", "edf"]}, "knobs.nav.rt.choices"),
        (["knobs", "nav", "cpu_shares"], {"range": [128, 256], "choices": [1]}, "knobs.nav.cpu_shares"),
        (["knobs", "lidar"], {"cpu_shares": {"range": [2, 4]}}, "knobs.lidar"),
        (["knobs", "system", "thp"], {"choices": ["sometimes"]}, "knobs.system.thp.choices"),
    ],
)
def test_invalid_specs_name_the_key(path: list, value: object, where: str) -> None:
    with pytest.raises(SpecError) as e:
        parse(_mut(path, value))
    assert e.value.where == where, str(e.value)


def test_slo_needs_constraint() -> None:
    with pytest.raises(SpecError, match="constraint"):
        parse(_mut(["objective", "kind"], "slo"))


def test_nothing_to_tune() -> None:
    d = ref()
    d["knobs"] = {"nav": {"cpu_shares": {"value": 2048}}}
    with pytest.raises(SpecError, match="nothing to tune"):
        parse(d)


def test_cpuset_syntax() -> None:
    d = ref()
    d["knobs"]["nav"]["cpuset"] = {"choices": ["all", "0-1", "1,0"]}
    assert parse(d).controllers() == ["cpu", "cpuset", "memory"]
    d["knobs"]["nav"]["cpuset"] = {"choices": ["cpu1"]}
    with pytest.raises(SpecError, match="CPU list"):
        parse(d)


def test_bad_toml_and_missing_file(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text("name = [unclosed\n")
    with pytest.raises(SpecError, match="not valid TOML"):
        load(bad)
    with pytest.raises(SpecError, match="no such file"):
        load(tmp_path / "absent.toml")
