"""``cohort.tune`` — find and safely apply the OS configuration for co-located robot apps.

Seed 002 as a tool: a TOML spec names the apps, the metric each reports, the objective and the
knobs; the tuner searches the knobs with Optuna, measuring the real apps under each
configuration, and saves the best per environment as a profile that ``apply`` puts in place.

Modules: :mod:`~cohort.tune.spec` (the spec file), :mod:`~cohort.tune.protocol` (how apps
report per-iteration times), :mod:`~cohort.tune.system` (every change journaled before it is
made; restore; dry-run; locks), :mod:`~cohort.tune.cgroups` (v1/v2 detection and cgroup knobs),
:mod:`~cohort.tune.sched` (SCHED_DEADLINE / SCHED_FIFO through ``sched_setattr``),
:mod:`~cohort.tune.runner` (a session: apps, knobs, measurements), :mod:`~cohort.tune.search`
(Optuna study), :mod:`~cohort.tune.profiles`, :mod:`~cohort.tune.report` (plots + JSON),
:mod:`~cohort.tune.grid` and :mod:`~cohort.tune.bench` (recorded table, benchmark), and the
reference workloads in :mod:`cohort.tune.workloads`. The command line is ``python -m
cohort.tune`` (``cohort tune`` forwards to it).
"""
