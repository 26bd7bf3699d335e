"""Report of a study: PNG plots and a JSON summary of the same figures.

``history.png`` — every trial's objective and the best so far; ``importance.png`` — knob
importances (first-order variance share, see :func:`importances`); ``distribution.png`` — the
first objective term's samples (the NAV loop time in the reference spec) under the default
configuration (trial 0) and the best one; ``summary.json`` — default vs best, per-term
statistics, the best configuration, the importances and the failed trials with their errors.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
import optuna

from cohort.tune.search import best_trial


def importances(study: optuna.Study, bins: int = 4) -> dict[str, float]:
    """First-order importance of each knob: the correlation ratio eta^2 = Var(E[log y | knob]) /
    Var(log y) over the completed trials (numeric knobs in quantile bins, categories as they
    are), normalised to sum to 1. Needs no extra package (Optuna's fANOVA needs scikit-learn);
    a conditional knob (e.g. the deadline runtime) is judged on the trials that have it."""
    done = [
        t for t in study.trials if t.state == optuna.trial.TrialState.COMPLETE and t.value is not None and t.value > 0
    ]
    if len(done) < 4:
        return {}
    raw: dict[str, float] = {}
    names = sorted({k for t in done for k in t.params})
    for name in names:
        ts = [t for t in done if name in t.params]
        y = np.log(np.asarray([t.value for t in ts], dtype=float))
        if len(ts) < 4 or float(np.var(y)) == 0.0:
            raw[name] = 0.0
            continue
        xs = [t.params[name] for t in ts]
        if all(isinstance(x, int | float) and not isinstance(x, bool) for x in xs) and len(set(xs)) > bins:
            edges = np.quantile(np.asarray(xs, dtype=float), np.linspace(0, 1, bins + 1)[1:-1])
            groups = np.searchsorted(edges, np.asarray(xs, dtype=float))
        else:
            keys = sorted({str(x) for x in xs})
            groups = np.asarray([keys.index(str(x)) for x in xs])
        mean = y.mean()
        between = sum((groups == g).sum() * (y[groups == g].mean() - mean) ** 2 for g in set(groups.tolist()))
        raw[name] = float(between / (len(y) * np.var(y)))
    total = sum(raw.values())
    if total <= 0:
        return dict.fromkeys(raw, 0.0)
    return dict(sorted(((k, round(v / total, 4)) for k, v in raw.items()), key=lambda kv: -kv[1]))


def summary(study: optuna.Study) -> dict[str, Any]:
    trials = study.trials
    done = [t for t in trials if t.state == optuna.trial.TrialState.COMPLETE and t.value is not None]
    best = best_trial(study)
    default = next((t for t in done if t.number == 0), None)

    def brief(t: optuna.trial.FrozenTrial | None) -> dict[str, Any] | None:
        if t is None:
            return None
        return {
            "trial": t.number,
            "objective": t.value,
            "repetitions": t.user_attrs.get("repetitions"),
            "config": t.user_attrs.get("config", t.params),
            "stats": t.user_attrs.get("stats", {}),
            "constraint": t.user_attrs.get("constraint"),
        }

    out = {
        "study": study.study_name,
        "environment": study.user_attrs.get("environment"),
        "trials": len(trials),
        "completed": len(done),
        "failed": [
            {"trial": t.number, "error": t.user_attrs.get("error")}
            for t in trials
            if t.state == optuna.trial.TrialState.FAIL
        ],
        "default": brief(default),
        "best": brief(best),
        "objective_ratio": (default.value / best.value) if default and best and best.value else None,
        "importances": importances(study),
        "history": [{"trial": t.number, "objective": t.value} for t in done],
    }
    return out


def write_report(study: optuna.Study, out: Path) -> dict[str, Any]:
    out.mkdir(parents=True, exist_ok=True)
    s = summary(study)
    (out / "summary.json").write_text(json.dumps(s, indent=1) + "\n")
    done = [t for t in study.trials if t.state == optuna.trial.TrialState.COMPLETE and t.value is not None]
    fig, ax = plt.subplots(figsize=(7, 4))
    if done:
        xs = [t.number for t in done]
        ys = [t.value for t in done]
        ax.scatter(xs, ys, s=18, label="trial")
        ax.step(
            xs, np.minimum.accumulate(np.asarray(ys, dtype=float)), where="post", color="tab:red", label="best so far"
        )
        ax.set_yscale("log")
    ax.set_xlabel("trial")
    relative = "baseline" in study.user_attrs  # a relative objective (see search.objective_fn)
    ax.set_ylabel("objective (1 per term = the default's)" if relative else "objective (ms)")
    ax.set_title(f"optimization history: {study.study_name}")
    ax.legend()
    fig.tight_layout()
    fig.savefig(out / "history.png", dpi=110)
    plt.close(fig)

    imp = s["importances"]
    fig, ax = plt.subplots(figsize=(7, 0.5 + 0.4 * max(1, len(imp))))
    names = list(imp)[::-1]
    ax.barh(names, [imp[n] for n in names], color="tab:green")
    ax.set_xlabel("importance (share of log-objective variance)")
    ax.set_title("knob importances" if imp else "knob importances (too few trials)")
    fig.tight_layout()
    fig.savefig(out / "importance.png", dpi=110)
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(7, 4))
    best = best_trial(study)
    default = next((t for t in done if t.number == 0), None)
    for t, label, color in ((default, "default", "tab:gray"), (best, "best", "tab:blue")):
        if t is None:
            continue
        samples = t.user_attrs.get("samples", {})
        if samples:
            key = next(iter(samples))
            vals = samples[key]
            if vals:
                ax.hist(
                    vals,
                    bins=40,
                    alpha=0.6,
                    color=color,
                    label=f"{label} (trial {t.number}): p99 {np.percentile(vals, 99):.1f}",
                )
                ax.set_xlabel(key)
    ax.set_ylabel("count")
    ax.set_title("distribution, default vs best")
    ax.legend()
    fig.tight_layout()
    fig.savefig(out / "distribution.png", dpi=110)
    plt.close(fig)
    return s


def report_from_db(db: str, study: str | None, out: Path) -> dict[str, Any]:
    storage = f"sqlite:///{db}"
    if study is None:
        names = [s.study_name for s in optuna.study.get_all_study_summaries(storage)]
        if not names:
            raise ValueError(f"no study in {db}")
        study = names[-1]
    return write_report(optuna.load_study(study_name=study, storage=storage), out)
