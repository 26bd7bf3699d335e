"""The deterministic simulator: Cohort's protocol machines over the channel models in virtual time.

:func:`run` runs a scenario file (as in ``scenarios/``, the same files ``cohort sim run``
takes) with one seed and returns a :class:`SimOutcome` with one :class:`FlowResult` per flow.
The same seed gives the same ``trace_hash``.
"""

from __future__ import annotations

import os
from pathlib import Path

from cohort import _native
from cohort._native import FlowResult, SimOutcome

__all__ = ["FlowResult", "SimOutcome", "run", "run_toml"]


def run(scenario: str | os.PathLike[str], seed: int = 1) -> SimOutcome:
    """Runs the scenario file ``scenario`` with ``seed``.

    Raises :class:`~cohort.errors.ConfigError` for a scenario that does not parse or is
    invalid, and ``FileNotFoundError`` for a missing file.
    """
    return run_toml(Path(scenario).read_text(encoding="utf-8"), seed)


def run_toml(scenario_toml: str, seed: int = 1) -> SimOutcome:
    """Runs a scenario given as TOML text."""
    return _native.sim_run(scenario_toml, seed)
