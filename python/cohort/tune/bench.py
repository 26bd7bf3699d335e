"""``cohort bench tune``: default vs tuned on the reference pair, and sample efficiency.

Live part, per environment (sparse, dense):

1. a TPE study over the reference spec's knobs (``--trials``, one 8 s measurement per trial,
   default configuration first) picks the tuned configuration;
2. validation: default and tuned run alternately (ABAB..., ``--validate-reps`` each, 12 s after a
   2 s warm-up), so drifting background load hits both alike. Figures are means over the
   repetitions: ``nav_p99_ms_*`` (p99 NAV loop time), ``detect_mean_ms_*`` (mean frame time),
   ``nav_p99_ratio`` = default / tuned, ``detect_mean_ms_ratio`` = tuned / default.

Top-level ``nav_p99_*`` figures are the worse environment's (the one with the smaller ratio),
``detect_mean_ms_ratio`` the larger (worse) of the two.

Replay part: the recorded table (:mod:`cohort.tune.grid`) is searched by Optuna's TPE (as
``run`` configures it) and by random search, 20 seeds each, budget 25 trials, both starting
from the default configuration. Every proposal costs a trial, as in the live tool, which
measures whatever the sampler proposes, again if it proposed it before (``charged``; the
headline). The earlier rule, where a repeated proposal reused its value for free, is reported
beside it (``free_repeats``): it flattered TPE, which repeats itself far more than random search.
``trials_to_within_5pct`` = the first trial whose best-so-far is within 5% of the table's
optimum (budget + 1 when never); medians are reported, and the two samplers are compared seed
by seed (same seed, same table) with a two-sided sign test (``paired``: wins, losses, ties,
exact binomial p-value over the untied seeds).

What the replay cannot say: the shipped table has one 8 s measurement per configuration, so a
difference between two configurations smaller than the run-to-run noise is taken as real, and
``N_STARTUP`` was chosen on held-out seeds of this same table, not on a different one.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import optuna

from cohort.tune import grid
from cohort.tune.search import N_STARTUP, enqueue_default, make_sampler, objective_fn
from cohort.tune.spec import load
from cohort.tune.workloads.recorder import CHUNK

DATA = Path(__file__).parent / "data"
SPEC = Path(__file__).parent / "specs" / "reference.toml"
BUDGET = 25
SEEDS = 20
# TPE's start-up is chosen among these on the selection table, with seeds 100-199 (the
# comparison uses 0-19).
STARTUP_CANDIDATES = (1, 2, 3, 4, 6, 10)
SELECTION_SEEDS = range(100, 200)


# ---- replay on the recorded table -------------------------------------------------------
def replay_run(
    table: dict[str, Any],
    sampler_name: str,
    seed: int,
    budget: int = BUDGET,
    charge_repeats: bool = True,
    n_startup: int = N_STARTUP,
) -> list[float]:
    """One search on the table; returns the objective of each of ``budget`` trials.

    ``charge_repeats`` (the live tool's rule): every proposal is a trial, also one of a
    configuration proposed before (the live tool measures it again). Without it, a repeated
    proposal is told its recorded value at no cost and only new configurations count."""
    lookup = grid.objectives(table)
    axes = table["axes"]
    sampler = make_sampler(sampler_name, seed, n_startup=n_startup)
    study = optuna.create_study(sampler=sampler, direction="minimize")
    default = table["default"]
    study.enqueue_trial({k: (axes[k].index(v) if _ordinal(axes[k]) else v) for k, v in grid.effective(default).items()})
    measured: list[float] = []
    seen: set[str] = set()

    def objective(trial: optuna.Trial) -> float:
        cfg: dict[str, Any] = {}
        for name, values in axes.items():
            if name not in grid.effective({**cfg, name: values[0]}):
                continue  # conditional knob that does nothing here (see grid.effective)
            if _ordinal(values):
                cfg[name] = values[trial.suggest_int(name, 0, len(values) - 1)]
            else:
                cfg[name] = trial.suggest_categorical(name, values)
        k = grid.key(cfg)
        if charge_repeats or k not in seen:
            measured.append(lookup[k])
        seen.add(k)
        return lookup[k]

    for _ in range(20 * budget):  # bounded even if a sampler keeps proposing known configurations
        if len(measured) >= budget or (not charge_repeats and len(seen) == len(lookup)):
            break
        study.optimize(objective, n_trials=1)
    return measured


def sign_test(a: list[int], b: list[int]) -> dict[str, Any]:
    """Paired two-sided sign test of ``a`` against ``b`` (smaller is better): wins of a, wins of
    b, ties, and the exact binomial p-value over the untied pairs (1.0 when all tie)."""
    wins = sum(1 for x, y in zip(a, b, strict=True) if x < y)
    losses = sum(1 for x, y in zip(a, b, strict=True) if x > y)
    n = wins + losses
    tail = sum(math.comb(n, k) for k in range(min(wins, losses) + 1)) / 2**n if n else 0.5
    return {"wins": wins, "losses": losses, "ties": len(a) - n, "p_value": min(1.0, 2 * tail)}


def _ordinal(values: list[Any]) -> bool:
    return all(isinstance(v, int | float) and not isinstance(v, bool) for v in values)


def trials_to_within(values: list[float], optimum: float, tol: float = 0.05, budget: int = BUDGET) -> int:
    best = float("inf")
    for i, v in enumerate(values[:budget], start=1):
        best = min(best, v)
        if best <= optimum * (1 + tol):
            return i
    return budget + 1


def choose_startup(
    table: dict[str, Any],
    candidates: tuple[int, ...] = STARTUP_CANDIDATES,
    seeds: range = SELECTION_SEEDS,
    budget: int = BUDGET,
) -> dict[str, Any]:
    """TPE's ``n_startup_trials`` chosen on a selection table (another recording than the one
    the comparison is reported on), with seeds the comparison does not use, every proposal
    charged: the candidate with the smallest median trials to within 5% of that table's
    optimum (the smaller candidate on a tie, then the fewer never within)."""
    optimum = min(grid.objectives(table).values())
    rows = {}
    for n in candidates:
        runs = (replay_run(table, "tpe", s, budget, n_startup=n) for s in seeds)
        counts = [trials_to_within(vals, optimum, budget=budget) for vals in runs]
        rows[n] = {
            "trials_to_within_5pct_median": statistics.median(counts),
            "never_within": sum(1 for c in counts if c > budget),
        }
    chosen = min(candidates, key=lambda n: (rows[n]["trials_to_within_5pct_median"], rows[n]["never_within"], n))
    return {
        "candidates": {str(n): r for n, r in rows.items()},
        "chosen": chosen,
        "seeds": f"{seeds.start}-{seeds.stop - 1}",
        "budget": budget,
    }


def replay(
    table: dict[str, Any], seeds: int = SEEDS, budget: int = BUDGET, n_startup: int = N_STARTUP
) -> dict[str, Any]:
    objectives = grid.objectives(table)
    optimum = min(objectives.values())
    within = sum(1 for v in objectives.values() if v <= optimum * 1.05)
    out: dict[str, Any] = {
        "table_configs": len(table["entries"]),
        "table_reps": table.get("reps", 1),
        "table_optimum": optimum,
        "configs_within_5pct": within,
        "budget": budget,
        "seeds": seeds,
        "rule": "charged: every proposal is a trial, repeats too (as the live tool measures them)",
        "tpe_n_startup": n_startup,
    }
    curves: dict[str, list[list[float]]] = {}
    for charged in (True, False):
        res: dict[str, Any] = {}
        counts: dict[str, list[int]] = {}
        for name in ("tpe", "random"):
            counts[name] = []
            if charged:
                curves[name] = []
            for seed in range(seeds):
                vals = replay_run(table, name, seed, budget, charge_repeats=charged, n_startup=n_startup)
                counts[name].append(trials_to_within(vals, optimum, budget=budget))
                if charged:
                    best, acc = float("inf"), []
                    for v in vals:
                        best = min(best, v)
                        acc.append(best / optimum)
                    curves[name].append(acc)
            res["optuna" if name == "tpe" else "random"] = {
                "trials_to_within_5pct_median": statistics.median(counts[name]),
                "trials_to_within_5pct": counts[name],
                "never_within": sum(1 for c in counts[name] if c > budget),
            }
        res["paired"] = {"optuna_vs_random": sign_test(counts["tpe"], counts["random"])}
        if charged:
            out.update(res)
        else:
            out["free_repeats"] = res
    out["_curves"] = curves
    return out


# ---- live default vs tuned --------------------------------------------------------------
def live_env(env: str, trials: int, reps: int, state_dir: str, log: Any) -> dict[str, Any]:
    from cohort.tune.runner import Session

    spec = load(SPEC)
    spec.environment = env
    spec.trial.duration_s, spec.trial.warmup_s, spec.trial.repetitions = 8.0, 1.5, 1
    with Session(spec, state_dir) as s:
        study = optuna.create_study(sampler=make_sampler("tpe", seed=0), direction="minimize")
        enqueue_default(study, spec, s.thp_at_start)
        study.optimize(objective_fn(s, spec, keep_samples=False, log=log), n_trials=trials, catch=(Exception,))
        done = [t for t in study.trials if t.value is not None]
        best = min(done, key=lambda t: t.value)  # type: ignore[arg-type,return-value]
        tuned = best.user_attrs["config"]
        log(f"{env}: tuned configuration (trial {best.number}, {best.value:.1f}): {json.dumps(tuned)}")
        spec.trial.duration_s, spec.trial.warmup_s = 12.0, 2.0
        rows: dict[str, list[dict[str, Any]]] = {"default": [], "tuned": []}
        samples: dict[str, list[float]] = {"default": [], "tuned": []}
        for r in range(reps):
            for label, cfg in (
                (("default", {}), ("tuned", tuned)) if r % 2 == 0 else (("tuned", tuned), ("default", {}))
            ):
                m = s.measure(cfg, keep_samples=True)
                assert m is not None
                rows[label].append(
                    {
                        "nav_p99_ms": m.stats["nav.loop_ms"]["p99"],
                        "detect_mean_ms": m.stats["detect.frame_ms"]["mean"],
                        **app_figures(m.stats, spec.trial.duration_s),
                    }
                )
                samples[label].extend(m.samples["nav.loop_ms"])
                log(
                    f"{env} rep {r} {label}: nav p99 {rows[label][-1]['nav_p99_ms']:.1f} ms, "
                    f"detect mean {rows[label][-1]['detect_mean_ms']:.1f} ms"
                )

    def mean(label: str, k: str) -> float:
        return statistics.fmean(x[k] for x in rows[label])

    res = {
        "apps": {
            k: {
                "default": mean("default", k),
                "tuned": mean("tuned", k),
                "tuned_over_default": mean("tuned", k) / mean("default", k),
                "paired": paired_ratio(rows, k),
            }
            for k in rows["default"][0]
        },
        "nav_p99_ms_default": mean("default", "nav_p99_ms"),
        "nav_p99_ms_tuned": mean("tuned", "nav_p99_ms"),
        "detect_mean_ms_default": mean("default", "detect_mean_ms"),
        "detect_mean_ms_tuned": mean("tuned", "detect_mean_ms"),
        "repetitions": rows,
        "tuned_config": tuned,
        "search_trials": trials,
        "search_best_trial": best.number,
        "_samples": samples,
    }
    res["nav_p99_ratio"] = res["nav_p99_ms_default"] / res["nav_p99_ms_tuned"]
    res["detect_mean_ms_ratio"] = res["detect_mean_ms_tuned"] / res["detect_mean_ms_default"]
    return res


def app_figures(stats: dict[str, dict[str, float]], window_s: float) -> dict[str, float]:
    """Every app's figure in one measurement, not only the objective's: the detector's gain
    can be CPU taken from the recorders, so their throughput (chunks compressed in the window,
    in MB/s of sensor data) and chunk time are reported beside the NAV loop and the frames."""
    out: dict[str, float] = {}
    for key, st in sorted(stats.items()):
        app, _, metric = key.partition(".")
        if "mean" in st:
            out[f"{app}_{metric}_mean"] = st["mean"]
        if "p99" in st:
            out[f"{app}_{metric}_p99"] = st["p99"]
        if metric == "chunk_ms":
            out[f"{app}_mbps"] = st.get("n", 0.0) * CHUNK / 1e6 / window_s
    return out


def paired_ratio(rows: dict[str, list[dict[str, Any]]], k: str) -> dict[str, float]:
    """Tuned over default, paired by repetition (the two ran back to back): mean and 95%
    interval (Student's t) over the pairs."""
    ratios = [t[k] / d[k] for d, t in zip(rows["default"], rows["tuned"], strict=True) if d[k]]
    mean, half = mean_ci95(ratios)
    return {"mean": mean, "ci95": half, "pairs": float(len(ratios))}


def mean_ci95(xs: list[float]) -> tuple[float, float]:
    """Mean and the half-width of its 95% interval (Student's t; 0 for fewer than two)."""
    if not xs:
        return math.nan, math.nan
    m = statistics.fmean(xs)
    if len(xs) < 2:
        return m, 0.0
    df = len(xs) - 1
    t = T95[df - 1] if df <= len(T95) else 1.96
    return m, t * statistics.stdev(xs) / math.sqrt(len(xs))


# Student's t quantile for a two-sided 95% interval, 1-30 degrees of freedom (the table of
# cohort_bench::stats::t95).
# fmt: off
T95 = (
    12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145, 2.131,
    2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042,
)
# fmt: on


def plot(report: dict[str, Any], out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    envs = report.get("environments", {})
    fig, axes = plt.subplots(1, 1 + max(1, len(envs)), figsize=(5 * (1 + max(1, len(envs))), 4))
    for ax, (env, r) in zip(axes[1:], envs.items(), strict=False):
        if "_samples" not in r:
            continue
        # A rare stall (seconds) would squeeze the histograms into one bar: the axis ends at the
        # p99.9 of either, and the loops beyond it are counted in the legend.
        right = 1.1 * max(float(np.percentile(r["_samples"][k], 99.9)) for k in ("default", "tuned"))
        for label, color in (("default", "tab:gray"), ("tuned", "tab:blue")):
            vals = np.asarray(r["_samples"][label])
            beyond = vals[vals > right]
            extra = f"; {len(beyond)} beyond the axis (max {beyond.max():.0f} ms)" if len(beyond) else ""
            ax.hist(
                vals[vals <= right],
                bins=50,
                alpha=0.6,
                color=color,
                label=f"{label}: p99 {r[f'nav_p99_ms_{label}']:.1f} ms{extra}",
            )
        ax.axvline(50.0, color="k", ls=":", lw=1)
        ax.set_xlim(0, right)
        ax.set_title(f"NAV loop time, {env} (ratio {r['nav_p99_ratio']:.2f})")
        ax.set_xlabel("loop_ms")
        ax.legend(fontsize="small", framealpha=0.8)
    rp = report.get("replay")
    ax = axes[0]
    if rp:
        for name, color in (("tpe", "tab:blue"), ("random", "tab:orange")):
            c = np.asarray(rp["_curves"][name])
            x = np.arange(1, c.shape[1] + 1)
            ax.plot(
                x,
                np.median(c, axis=0),
                color=color,
                label=f"{'optuna TPE' if name == 'tpe' else 'random'} (median of {len(c)})",
            )
            ax.fill_between(x, np.percentile(c, 25, axis=0), np.percentile(c, 75, axis=0), color=color, alpha=0.2)
        ax.axhline(1.05, color="k", ls=":", lw=1, label="within 5%")
        ax.set_ylim(0.95, min(3.0, float(np.max(np.asarray(rp["_curves"]["random"])[:, 0])) + 0.1))
        ax.set_xlabel("trial")
        ax.set_ylabel("best so far / table optimum")
        ax.set_title("sample efficiency on the recorded table")
        ax.legend()
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)


def run_bench(args: argparse.Namespace) -> int:
    def log(s: str) -> None:
        print(s, file=sys.stderr, flush=True)

    t0 = time.time()
    load_start = Path("/proc/loadavg").read_text().split()[:3]
    table_path = Path(args.table) if args.table else DATA / "grid_dense.json"
    table = json.loads(table_path.read_text())
    out = Path(args.out)
    previous = json.loads(out.with_suffix(".json").read_text()) if out.with_suffix(".json").exists() else {}
    report: dict[str, Any] = {
        "bench": "tune",
        "command": " ".join(
            [
                "python -m cohort.tune bench --json",
                *(a for a in sys.argv[sys.argv.index("bench") + 1 :] if a != "--json"),
            ]
        )
        if "bench" in sys.argv
        else "python -m cohort.tune bench --json",
        "machine": {"cpus": __import__("os").cpu_count(), "kernel": __import__("platform").release()},
    }
    if args.replay_only:  # keep the live figures of the last full run, if any
        live = ("nav_p99_ms_default", "nav_p99_ms_tuned", "nav_p99_ratio", "detect_mean_ms_ratio", "worse_environment")
        report.update({k: previous[k] for k in (*live, "environments", "method", "command") if k in previous})
        samples_path = out.parent / (out.name + "_samples.json")
        if "environments" in report and samples_path.exists():
            for env, samples in json.loads(samples_path.read_text()).items():
                report["environments"][env]["_samples"] = samples
    else:
        envs = {}
        for env in args.envs.split(","):
            envs[env] = live_env(env, args.trials, args.validate_reps, args.state_dir, log)
        worst = min(envs, key=lambda e: envs[e]["nav_p99_ratio"])
        report.update(
            {
                "nav_p99_ms_default": envs[worst]["nav_p99_ms_default"],
                "nav_p99_ms_tuned": envs[worst]["nav_p99_ms_tuned"],
                "nav_p99_ratio": envs[worst]["nav_p99_ratio"],
                "detect_mean_ms_ratio": max(e["detect_mean_ms_ratio"] for e in envs.values()),
                "worse_environment": worst,
                "environments": envs,
                "method": {
                    "search": f"TPE, {args.trials} trials of one 8 s measurement (1.5 s warm-up), default first",
                    "validation": f"default and tuned alternated, {args.validate_reps} runs each "
                    "of 12 s after 2 s warm-up",
                },
            }
        )
    selection_path = Path(args.selection_table) if args.selection_table else DATA / "grid_dense_selection.json"
    choice = choose_startup(json.loads(selection_path.read_text()))
    choice["table"] = _shown(selection_path)
    log(f"TPE start-up chosen on {choice['table']}: {choice['chosen']} ({json.dumps(choice['candidates'])})")
    rp = replay(table, n_startup=choice["chosen"])
    rp["table"] = _shown(table_path)
    rp["sampler_settings"] = choice
    report["replay"] = rp
    report["optuna"] = rp["optuna"]
    report["random"] = rp["random"]
    if args.replay_only and "environments" in report:
        # the live figures are the previous run's: keep how long it took and the load it saw
        for k in ("seconds", "loadavg_start", "loadavg_end", "machine"):
            if k in previous:
                report[k] = previous[k]
        rp["seconds"] = round(time.time() - t0, 1)
        rp["command"] = "python -m cohort.tune bench --replay-only --json --out " + str(args.out)
    else:
        report["seconds"] = round(time.time() - t0, 1)
        report["loadavg_start"] = load_start
        report["loadavg_end"] = Path("/proc/loadavg").read_text().split()[:3]
    report["scenario"] = (
        "reference spec: nav (20 Hz) + detect, beside two recorder apps compressing sensor data; each app in "
        "its own cgroup under cohort-tune (cpu.shares 16384 against the rest of the machine); 2 CPUs"
    )
    out.parent.mkdir(parents=True, exist_ok=True)
    plot(report, out.with_suffix(".png"))
    if "environments" in report and all("_samples" in r for r in report["environments"].values()):
        # raw NAV loop times behind the histograms, to remake the plot with --replay-only
        samples = {
            e: {k: [round(x, 2) for x in v] for k, v in r["_samples"].items()}
            for e, r in report["environments"].items()
        }
        (out.parent / (out.name + "_samples.json")).write_text(json.dumps(samples) + "\n")
    clean = _strip(report)
    out.with_suffix(".json").write_text(json.dumps(clean, indent=1) + "\n")
    if args.json:
        print(json.dumps(clean, indent=1))
    else:
        print(f"wrote {out.with_suffix('.json')} and {out.with_suffix('.png')}")
    return 0


def _shown(path: Path) -> str:
    return str(path.relative_to(Path.cwd())) if path.is_relative_to(Path.cwd()) else str(path)


def _strip(x: Any) -> Any:
    """Drop the underscore keys (raw samples and curves kept only for the plot)."""
    if isinstance(x, dict):
        return {k: _strip(v) for k, v in x.items() if not str(k).startswith("_")}
    if isinstance(x, list):
        return [_strip(v) for v in x]
    return x
