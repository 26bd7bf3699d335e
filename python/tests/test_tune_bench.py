"""Sample-efficiency replay and the report, on small real data (no live measurement)."""

from __future__ import annotations

import json
from pathlib import Path

import optuna

from cohort.tune import bench, grid
from cohort.tune.report import importances, write_report


def test_grid_is_deduplicated_and_contains_default() -> None:
    configs = grid.grid_configs()
    assert len(configs) == len({grid.key(c) for c in configs}) == 42
    assert grid.key(grid.DEFAULT) in {grid.key(c) for c in configs}
    assert grid.effective({"nav.rt": "fifo", "nav.rt_runtime_ms": 15.0, "nav.cpu_shares": 256}) == {"nav.rt": "fifo"}


def test_trials_to_within() -> None:
    assert bench.trials_to_within([200, 150, 104, 99], 100.0, budget=4) == 3
    assert bench.trials_to_within([200, 150], 100.0, budget=2) == 3  # never: budget + 1


def test_shipped_table_covers_the_grid() -> None:
    table = json.loads((bench.DATA / "grid_dense.json").read_text())
    keys = {grid.key(e["config"]) for e in table["entries"]}
    assert keys == {grid.key(c) for c in grid.grid_configs()}
    assert "remake" in table and "how" in table


def test_replay_runs_both_samplers(tmp_path: Path) -> None:
    table = json.loads((bench.DATA / "grid_dense.json").read_text())
    r = bench.replay(table, seeds=2, budget=8)
    for k in ("optuna", "random"):
        assert len(r[k]["trials_to_within_5pct"]) == 2
        assert all(1 <= n <= 9 for n in r[k]["trials_to_within_5pct"])
    vals = bench.replay_run(table, "tpe", seed=0, budget=5)
    default = next(e for e in table["entries"] if grid.key(e["config"]) == grid.key(table["default"]))
    assert vals[0] == grid.objectives(table)[grid.key(default["config"])] == 2.0  # the default goes first
    report = {"replay": r, "environments": {}}
    bench.plot(report, tmp_path / "b.png")
    assert (tmp_path / "b.png").stat().st_size > 1000


def test_report_from_a_study(tmp_path: Path) -> None:
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=1))

    def objective(t: optuna.Trial) -> float:
        x = t.suggest_float("x", 0.0, 1.0)
        c = t.suggest_categorical("c", ["a", "b"])
        t.set_user_attr("samples", {"nav.loop_ms": [x * 10 + i * 0.1 for i in range(50)]})
        return 1.0 + 10 * x + (0.01 if c == "a" else 0.0)

    study.optimize(objective, n_trials=16)
    imp = importances(study)
    assert imp["x"] > imp["c"]
    s = write_report(study, tmp_path)
    assert s["completed"] == 16 and s["best"]["objective"] <= s["default"]["objective"]
    for name in ("history.png", "importance.png", "distribution.png", "summary.json"):
        assert (tmp_path / name).exists()


def test_samplers_on_the_table() -> None:
    """Every offered sampler runs on the recorded table, or says clearly what it needs."""
    import importlib.util

    import pytest

    from cohort.tune.errors import TuneError
    from cohort.tune.search import make_sampler

    table = json.loads((bench.DATA / "grid_dense.json").read_text())
    for name in ("tpe", "random", "cmaes"):
        assert len(bench.replay_run(table, name, seed=0, budget=8)) == 8
    for name, needs in (("gp", "torch"), ("qmc", "scipy")):
        if importlib.util.find_spec(needs) is None:
            with pytest.raises(TuneError, match=needs):
                make_sampler(name, 0)


def test_tpe_startup_is_the_default_then_random_search() -> None:
    """TPE's first trials (the enqueued default, then N_STARTUP - 1 draws of a RandomSampler with
    the same seed) are exactly random search's; from there on TPE models the results."""
    from cohort.tune.search import N_STARTUP, make_sampler

    assert isinstance(make_sampler("random", 0), optuna.samplers.RandomSampler)
    table = json.loads((bench.DATA / "grid_dense.json").read_text())
    for seed in (0, 1):
        tpe = bench.replay_run(table, "tpe", seed, budget=10)
        rnd = bench.replay_run(table, "random", seed, budget=10)
        assert tpe[:N_STARTUP] == rnd[:N_STARTUP]


def test_sign_test() -> None:
    assert bench.sign_test([1, 2, 3], [1, 2, 3]) == {"wins": 0, "losses": 0, "ties": 3, "p_value": 1.0}
    r = bench.sign_test([1] * 10, [2] * 10)
    assert (r["wins"], r["losses"]) == (10, 0) and abs(r["p_value"] - 2 / 1024) < 1e-12
    r = bench.sign_test([1] * 9 + [3] * 8 + [5] * 3, [2] * 9 + [2] * 8 + [5] * 3)  # the 9-8-3
    assert (r["wins"], r["losses"], r["ties"]) == (9, 8, 3) and r["p_value"] == 1.0


def test_replay_charges_repeated_proposals_as_the_live_tool_does() -> None:
    """The live tool measures every proposal, also one it measured before; the replay charges a
    trial for each. The old rule (repeats free) is still available for comparison."""
    table = json.loads((bench.DATA / "grid_dense.json").read_text())
    charged = bench.replay_run(table, "tpe", seed=3, budget=25)
    free = bench.replay_run(table, "tpe", seed=3, budget=25, charge_repeats=False)
    assert len(charged) == len(free) == 25
    # TPE repeats itself on this small grid: the charged run sees fewer distinct configurations
    assert len(set(charged)) < len(charged)
    r = bench.replay(table, seeds=3, budget=10)
    assert set(r["paired"]["optuna_vs_random"]) == {"wins", "losses", "ties", "p_value"}
    assert "free_repeats" in r and r["free_repeats"]["paired"]["optuna_vs_random"]["ties"] >= 0


def test_the_start_up_is_chosen_on_the_selection_table_among_the_candidates() -> None:
    table = json.loads((bench.DATA / "grid_dense_selection.json").read_text())
    c = bench.choose_startup(table, candidates=(1, 3), seeds=range(100, 103), budget=6)
    assert c["chosen"] in (1, 3)
    assert set(c["candidates"]) == {"1", "3"}
    best = min(r["trials_to_within_5pct_median"] for r in c["candidates"].values())
    assert c["candidates"][str(c["chosen"])]["trials_to_within_5pct_median"] == best
    # the chosen start-up is the one the replay's sampler is built with
    r = bench.replay(table, seeds=1, budget=4, n_startup=c["chosen"])
    assert r["tpe_n_startup"] == c["chosen"]


def test_every_app_is_reported_with_the_recorders_throughput() -> None:
    stats = {
        "nav.loop_ms": {"n": 200.0, "mean": 50.0, "p99": 80.0},
        "detect.frame_ms": {"n": 100.0, "mean": 100.0, "p99": 130.0},
        "recorder.chunk_ms": {"n": 240.0, "mean": 20.0, "p99": 30.0},
        "uploader.chunk_ms": {"n": 0.0},
    }
    f = bench.app_figures(stats, window_s=12.0)
    assert f["recorder_mbps"] == 240 * bench.CHUNK / 1e6 / 12.0
    assert f["uploader_mbps"] == 0.0
    assert f["nav_loop_ms_p99"] == 80.0 and f["detect_frame_ms_mean"] == 100.0
    rows = {"default": [{"x": 2.0}, {"x": 4.0}], "tuned": [{"x": 1.0}, {"x": 4.0}]}
    pr = bench.paired_ratio(rows, "x")
    assert pr["pairs"] == 2 and abs(pr["mean"] - 0.75) < 1e-12 and pr["ci95"] > 0
