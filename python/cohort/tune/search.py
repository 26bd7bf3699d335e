"""The search: an Optuna study over the spec's knobs, stored in SQLite so it resumes.

* Samplers: ``tpe`` (default; multivariate, grouped TPE so conditional knobs such as the
  deadline runtime — only suggested when ``rt = deadline`` — are modelled jointly), ``gp``
  (Optuna's GPSampler, which needs ``torch`` and ``scipy``: not installed by default because
  torch is a ~1 GB dependency; the option says so instead of failing obscurely), ``cmaes``
  (CMA-ES over the numeric knobs, TPE for the categorical ones; the light alternative to GP,
  pure Python on numpy), ``qmc``
  (quasi-random Sobol, needs ``scipy``) and ``random`` (the baseline).
* The default configuration (every knob at its default — the kernel's unless the spec says) is
  enqueued as the first trial, so the study always knows what "untuned" costs.
* Each trial runs ``trial.repetitions`` measurements; its value is their mean objective, the
  per-repetition values and the statistics are stored as trial attributes.
* With ``kind = "relative"`` each term is divided by its value under the default
  configuration (that first trial), so a detector's ~100 ms frames and a planner's p99 count
  by how much each improves, not by their scale; the baseline is kept in the study.
* With ``kind = "slo"`` the constraint (stat - max <= 0) goes to the sampler's
  ``constraints_func`` and the best trial is the best feasible one.
* A configuration the kernel refuses (e.g. SCHED_DEADLINE admission control: EBUSY) fails its
  trial with the error stored as ``error``; the search continues.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
import time
import warnings
from pathlib import Path
from typing import Any

import optuna

from cohort.tune.errors import TuneError
from cohort.tune.runner import evaluate, term_value
from cohort.tune.spec import Knob, Spec, load

optuna.logging.set_verbosity(optuna.logging.WARNING)
warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)


# Trials before TPE models the results (the enqueued default configuration counts as one). OS
# tuning budgets are small (12-25 trials of tens of seconds each); TPE's startup trials come from
# a RandomSampler with the same seed, so until then TPE *is* random search. 6 was chosen by
# `cohort.tune.bench.choose_startup` among 1, 2, 3, 4, 6 and 10 on the selection recording
# (`data/grid_dense_selection.json`, seeds 100-199, every proposal charged: medians 10.5 at 1
# and 6, 11 at 2 and 3; 6 had fewer seeds never within 5%), not on the table the comparison is
# reported on (`data/grid_dense.json`, 3 repetitions per configuration). The replay does not show
# TPE beating random search (see docs/benchmarks.md); this is a default, not a tuned optimum.
N_STARTUP = 6

DEFAULT_ATTR = "default"  # trial user attribute: this trial is the default configuration
BASELINE_ATTR = "baseline"  # study user attribute: the relative objective's term values at default


def make_sampler(
    name: str, seed: int, constrained: bool = False, n_startup: int = N_STARTUP
) -> optuna.samplers.BaseSampler:
    cons = _constraints if constrained else None
    if name == "tpe":
        return optuna.samplers.TPESampler(
            seed=seed,
            multivariate=True,
            group=True,
            n_startup_trials=n_startup,
            constraints_func=cons,
        )
    if name == "random":
        return optuna.samplers.RandomSampler(seed=seed)
    if name == "gp":
        missing = [m for m in ("torch", "scipy") if importlib.util.find_spec(m) is None]
        if missing:
            raise TuneError(
                f"the gp sampler (optuna.samplers.GPSampler) needs {' and '.join(missing)}: "
                "`pip install torch scipy` (CPU torch is enough), or use --sampler cmaes (the light model-based "
                "alternative), tpe, qmc or random"
            )
        return optuna.samplers.GPSampler(seed=seed, n_startup_trials=n_startup, constraints_func=cons)
    if name == "cmaes":
        if importlib.util.find_spec("cmaes") is None:
            raise TuneError("the cmaes sampler needs the cmaes package: `pip install cmaes`")
        # CMA-ES models the numeric knobs; categorical ones (rt policy, THP) are sampled by TPE
        return optuna.samplers.CmaEsSampler(
            seed=seed,
            n_startup_trials=n_startup,
            independent_sampler=optuna.samplers.TPESampler(seed=seed),
        )
    if name == "qmc":
        if importlib.util.find_spec("scipy") is None:
            raise TuneError("the qmc sampler needs scipy: `pip install scipy`, or use --sampler tpe / random")
        return optuna.samplers.QMCSampler(seed=seed, qmc_type="sobol", scramble=True)
    raise TuneError(f"unknown sampler {name!r}")


def _constraints(trial: optuna.trial.FrozenTrial) -> list[float]:
    return [float(trial.user_attrs.get("constraint", 0.0))]


def suggest(trial: optuna.Trial, knob: Knob) -> Any:
    if knob.choices is not None:
        return trial.suggest_categorical(knob.key, knob.choices)
    assert knob.low is not None and knob.high is not None
    if knob.kind == "int":
        return trial.suggest_int(knob.key, int(knob.low), int(knob.high), log=knob.log, step=int(knob.step or 1))
    return trial.suggest_float(knob.key, float(knob.low), float(knob.high), log=knob.log, step=knob.step)


def suggest_config(trial: optuna.Trial, spec: Spec) -> dict[str, Any]:
    """Suggest every searched knob; RT parameters only for the policy that uses them, and an
    app's CFS weight (``cpu_shares``) only when the app stays under CFS (``rt = none``): under
    SCHED_FIFO or SCHED_DEADLINE every thread of the app is real-time and the weight does
    nothing, so searching it would only add a dimension of noise (the recorded grid does the
    same, see :func:`cohort.tune.grid.effective`)."""
    cfg: dict[str, Any] = {}
    searched = {k.key: k for k in spec.searched()}
    for key, knob in searched.items():
        name = key.split(".", 1)[1]
        if name in ("rt_runtime_ms", "rt_period_ms", "fifo_priority", "rt_budget_us", "cpu_shares"):
            continue
        cfg[key] = suggest(trial, knob)
    for key, knob in searched.items():
        app, name = key.split(".", 1)
        if name == "cpu_shares" and cfg.get(f"{app}.rt", spec.defaults().get(f"{app}.rt", "none")) == "none":
            cfg[key] = suggest(trial, knob)
    for app in spec.apps:
        rt = cfg.get(f"{app.name}.rt", spec.defaults().get(f"{app.name}.rt", "none"))
        wanted = {
            "deadline": ("rt_runtime_ms", "rt_period_ms", "rt_budget_us"),
            "fifo": ("fifo_priority", "rt_budget_us"),
        }.get(rt, ())
        for name in wanted:
            if f"{app.name}.{name}" in searched:
                cfg[f"{app.name}.{name}"] = suggest(trial, searched[f"{app.name}.{name}"])
    return cfg


def default_params(spec: Spec, thp_now: str | None) -> dict[str, Any]:
    """The default configuration as Optuna parameters (for enqueue_trial)."""
    params: dict[str, Any] = {}
    for k in spec.searched():
        v = k.default
        if v == "current":
            v = thp_now if thp_now in (k.choices or []) else (k.choices or [v])[0]
        params[k.key] = v
    return params


def study_name(spec: Spec) -> str:
    return f"{spec.name}@{spec.environment}"


def open_study(spec: Spec, db: str, sampler: optuna.samplers.BaseSampler) -> optuna.Study:
    Path(db).parent.mkdir(parents=True, exist_ok=True)
    return optuna.create_study(
        study_name=study_name(spec),
        storage=f"sqlite:///{db}",
        sampler=sampler,
        direction="minimize",
        load_if_exists=True,
    )


def best_trial(study: optuna.Study) -> optuna.trial.FrozenTrial | None:
    done = [t for t in study.trials if t.state == optuna.trial.TrialState.COMPLETE and t.value is not None]
    feasible = [t for t in done if float(t.user_attrs.get("constraint", 0.0)) <= 0.0]
    pool = feasible or done
    return min(pool, key=lambda t: t.value) if pool else None  # type: ignore[arg-type,return-value]


def enqueue_default(study: optuna.Study, spec: Spec, thp_now: str | None) -> None:
    """Make the default configuration the study's next trial, marked as the default (the
    baseline of a ``relative`` objective)."""
    study.enqueue_trial(default_params(spec, thp_now), user_attrs={DEFAULT_ATTR: True})


def objective_fn(session: Any, spec: Spec, keep_samples: bool = True, log: Any = print) -> Any:
    """Optuna objective: measure a suggested configuration ``spec.trial.repetitions`` times.

    A ``relative`` objective divides each term by its value under the default configuration:
    the trial marked by :func:`enqueue_default` sets that baseline (kept in the study's user
    attributes, so a resumed study keeps it) and must run first."""
    terms = [f"{t.app}.{t.metric}" for t in spec.objective.terms]
    relative = spec.objective.kind == "relative"

    def objective(trial: optuna.Trial) -> float:
        baseline = trial.study.user_attrs.get(BASELINE_ATTR)
        if relative and baseline is None and not trial.user_attrs.get(DEFAULT_ATTR):
            raise TuneError("a relative objective needs the default configuration measured first (enqueue_default)")
        cfg = suggest_config(trial, spec)
        rep_stats: list[dict[str, dict[str, float]]] = []
        cons: list[float] = []
        stats_acc: dict[str, list[dict[str, float]]] = {}
        samples: dict[str, list[float]] = {}
        try:
            for _ in range(spec.trial.repetitions):
                m = session.measure(cfg, keep_samples=keep_samples)
                rep_stats.append(m.stats)
                if m.constraint is not None:
                    cons.append(m.constraint)
                for k, s in m.stats.items():
                    stats_acc.setdefault(k, []).append(s)
                for k in terms:
                    samples.setdefault(k, []).extend(round(x, 2) for x in m.samples.get(k, []))
        except TuneError as e:
            trial.set_user_attr("error", str(e))
            log(f"trial {trial.number}: failed: {e}")
            raise
        stats = {
            k: {s: sum(r[s] for r in rs) / len(rs) for s in rs[0] if all(s in r for r in rs)}
            for k, rs in stats_acc.items()
        }
        if relative and baseline is None:
            baseline = [term_value(t, stats) for t in spec.objective.terms]
            trial.study.set_user_attr(BASELINE_ATTR, baseline)
            log(f"trial {trial.number}: baseline (default configuration) {dict(zip(terms, baseline, strict=True))}")
        values = [evaluate(spec, st, baseline)[0] for st in rep_stats]
        value = sum(values) / len(values)
        trial.set_user_attr("repetitions", values)
        trial.set_user_attr("config", session.resolve(cfg))
        trial.set_user_attr("stats", stats)
        if cons:
            trial.set_user_attr("constraint", sum(cons) / len(cons))
        if keep_samples:
            trial.set_user_attr("samples", samples)
        log(
            f"trial {trial.number}: objective {value:.4g} "
            f"(reps {', '.join(f'{v:.4g}' for v in values)}) {json.dumps(cfg)}"
        )
        return value

    return objective


def run_study(args: argparse.Namespace) -> int:
    from cohort.tune.profiles import save_profile
    from cohort.tune.runner import Session

    spec = load(args.spec)
    if args.environment:
        spec.environment = args.environment
    if args.duration:
        spec.trial.duration_s = args.duration
    if args.repetitions:
        spec.trial.repetitions = args.repetitions
    db = args.db or str(Path(args.state_dir) / "studies.db")
    if args.dry_run:
        with Session(spec, args.state_dir, dry_run=True) as s:
            print("# default configuration (first trial):")
            s.measure({})
            print("# example of a searched configuration:")
            study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=args.seed))
            s.measure(suggest_config(study.ask(), spec))
        return 0
    sampler = make_sampler(args.sampler, args.seed, constrained=spec.objective.kind == "slo")
    study = open_study(spec, db, sampler)
    with Session(spec, args.state_dir, keep=args.keep) as session:
        if not study.trials or (spec.objective.kind == "relative" and BASELINE_ATTR not in study.user_attrs):
            enqueue_default(study, spec, session.thp_at_start)  # again if it failed before
        study.set_user_attr("spec", str(Path(args.spec).resolve()))
        study.set_user_attr("environment", spec.environment)
        t0 = time.monotonic()
        # A bar with an ETA while a person watches (both outputs terminals), none in logs.
        bar = sys.stdout.isatty() and sys.stderr.isatty()
        study.optimize(objective_fn(session, spec), n_trials=args.trials, catch=(TuneError,), show_progress_bar=bar)
        print(f"{args.trials} trials in {time.monotonic() - t0:.0f} s; study {study_name(spec)} in {db}")
        best = best_trial(study)
        if best is None:
            raise TuneError("no trial completed")
        if args.keep:  # leave the best configuration's cgroup/system knobs in place
            session.apply_static(best.user_attrs.get("config", best.params))
    path = save_profile(args.state_dir, args.profile or spec.environment, spec, best, study)
    print(f"best objective {best.value:.2f} (trial {best.number}); profile saved to {path}")
    if args.report:
        from cohort.tune.report import write_report

        write_report(study, Path(args.report))
        print(f"report written to {args.report}")
    return 0
