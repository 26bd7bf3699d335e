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


@pytest.mark.parametrize(
    ("path", "value", "where", "says"),
    [
        (["trial", "duration_s"], "abc", "trial.duration_s", "must be a number"),
        (["trial", "warmup_s"], [1], "trial.warmup_s", "must be a number"),
        (["trial", "ready_timeout_s"], True, "trial.ready_timeout_s", "must be a number"),
        (["trial", "duration_s"], float("inf"), "trial.duration_s", "must be a number"),
        (["trial", "repetitions"], 1.7, "trial.repetitions", "must be an integer"),
        (["trial", "repetitions"], "2", "trial.repetitions", "must be an integer"),
        (["knobs", "nav", "cpu_shares"], {"range": [128, 8192], "step": "x"}, "knobs.nav.cpu_shares.step", "integer"),
        (["knobs", "nav", "cpu_shares"], {"range": [128, 8192], "step": 0}, "knobs.nav.cpu_shares.step", "positive"),
        (["knobs", "nav", "rt_runtime_ms"], {"range": [5.0, 45.0], "step": -1.0}, "knobs.nav.rt_runtime_ms.step", ""),
        (["knobs", "nav", "cpu_shares"], {"range": [128, 8192], "log": "yes"}, "knobs.nav.cpu_shares.log", "true or"),
        (["knobs", "nav", "cpu_shares"], {"choices": [512], "step": 2}, "knobs.nav.cpu_shares.step", "only a range"),
        (["knobs", "nav", "rt"], {"choices": ["fifo"], "default": "deadline"}, "knobs.nav.rt.default", "not one of"),
        (["knobs", "nav", "cpu_shares"], {"choices": [256, 512], "default": 1024}, "knobs.nav.cpu_shares.default", ""),
        (["knobs", "nav", "cpu_shares"], {"choices": [256, 5.5]}, "knobs.nav.cpu_shares.choices", "integer"),
        (["knobs", "nav", "cpu_shares"], {"choices": [1, 512]}, "knobs.nav.cpu_shares.choices", "outside"),
        (["knobs", "nav", "cpu_shares"], {"range": [128, 8192], "default": "x"}, "knobs.nav.cpu_shares.default", ""),
        (["knobs", "nav", "cpuset"], {"choices": ["1-"]}, "knobs.nav.cpuset.choices", "CPU list"),
        (["knobs", "nav", "cpuset"], {"choices": ["3-1"]}, "knobs.nav.cpuset.choices", "CPU list"),
        (["app", 0, "command"], ["x", "{nope}"], "app[0].command", "placeholder"),
        (["app", 0, "command"], ["x", "{"], "app[0].command", "placeholder"),
        (["app", 0, "cgroup"], "a b", "app[0].cgroup", ""),
        (["name"], 7, "spec.name", ""),
        (["cgroup_version"], 3, "spec.cgroup_version", ""),
        (["objective", "terms", 0, "weight"], float("nan"), "objective.terms[0].weight", ""),
        (["objective", "terms", 0, "max"], 5.0, "objective.terms[0]", "unknown key"),
        (["safety"], {"fifo_priority_max": 60}, "safety.fifo_priority_max", "above_irq_threads"),
        (["safety"], {"deadline_share_max": 0.99}, "safety.deadline_share_max", ""),
        (["safety"], {"above_irq_threads": 1}, "safety.above_irq_threads", "true or false"),
    ],
)
def test_bad_values_are_typed_errors_naming_key_and_type(path: list, value: object, where: str, says: str) -> None:
    with pytest.raises(SpecError) as e:
        parse(_mut(path, value))
    assert e.value.where == where, str(e.value)
    assert says in e.value.message


def test_fifo_priority_stays_below_threaded_irq_handlers_unless_allowed() -> None:
    d = ref()
    assert parse(d).knob("nav.fifo_priority").high == 49
    d["knobs"]["nav"]["fifo_priority"] = {"range": [1, 99]}
    with pytest.raises(SpecError, match="threaded IRQ") as e:
        parse(d)
    assert e.value.where == "knobs.nav.fifo_priority"
    d["knobs"]["nav"]["fifo_priority"] = {"choices": [10, 50]}
    with pytest.raises(SpecError, match="threaded IRQ"):
        parse(d)
    d["safety"] = {"above_irq_threads": True}
    assert parse(d).safety.fifo_priority_max == 99
    d["safety"] = {"above_irq_threads": True, "fifo_priority_max": 60}
    d["knobs"]["nav"]["fifo_priority"] = {"range": [1, 99]}
    with pytest.raises(SpecError, match=r"above safety\.fifo_priority_max 60"):
        parse(d)


def test_deadline_runtime_space_never_needs_a_clamp() -> None:
    """A runtime range that could exceed the allowed share of the period is refused (the old
    parser accepted it and the runner clamped the runtime while Optuna learned the unclamped
    value); within the limit, every configuration the search picks is applied as picked."""
    d = ref()
    d["knobs"]["nav"]["rt_period_ms"] = {"range": [20.0, 100.0]}
    with pytest.raises(SpecError, match="deadline_share_max") as e:
        parse(d)
    assert e.value.where == "knobs.nav.rt_runtime_ms"
    d["knobs"]["nav"]["rt_period_ms"] = {"range": [50.0, 100.0]}
    d["knobs"]["nav"]["rt_runtime_ms"] = {"range": [5.0, 47.5]}  # 0.95: the old clamp's limit
    with pytest.raises(SpecError, match="deadline_share_max"):
        parse(d)
    d["safety"] = {"deadline_share_max": 0.95}
    assert parse(d).safety.deadline_share_max == 0.95


def test_configurations_beyond_the_limits_are_refused_not_clamped() -> None:
    from cohort.tune.spec import check_safety

    s = load(REF)
    check_safety(s, {"nav.rt": "deadline", "nav.rt_runtime_ms": 45.0, "nav.rt_period_ms": 50.0})
    with pytest.raises(SpecError, match="deadline_share_max"):
        check_safety(s, {"nav.rt": "deadline", "nav.rt_runtime_ms": 49.0, "nav.rt_period_ms": 50.0})
    with pytest.raises(SpecError, match="fifo_priority_max"):
        check_safety(s, {"nav.rt": "fifo", "nav.fifo_priority": 99})


def test_the_reference_search_space_is_applied_as_suggested() -> None:
    """Every configuration the sampler picks resolves to itself: nothing is changed behind
    Optuna's back (what it learns is what was measured)."""
    import optuna

    from cohort.tune.search import suggest_config
    from cohort.tune.spec import check_safety

    s = load(REF)
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=1))
    for _ in range(300):
        cfg = suggest_config(study.ask(), s)
        full = {**s.defaults(), **cfg}
        check_safety(s, full)
        if cfg.get("nav.rt") == "fifo":
            assert 1 <= cfg["nav.fifo_priority"] <= 49


def test_loads_gives_spec_errors_for_broken_text() -> None:
    from cohort.tune.spec import loads

    for text in ("name = [unclosed\n", "x = 1979-13-45\n", "\x00", "[a]\n[a]\n", 'environment = "x"\n'):
        with pytest.raises(SpecError):
            loads(text)
