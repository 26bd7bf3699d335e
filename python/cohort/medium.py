"""The 802.11 medium model's saturation runs (the ``edca_sat`` experiment).

``N`` saturated senders share one 802.11 channel to one receiver; the model (DCF/EDCA access
categories, aggregation, collisions, retries) runs in virtual time and reports throughput per
access category, collisions and the channel's busy share. It is the model ``cohort sim`` and
``cohort testbed`` use, validated against ns-3 and the Bianchi tables.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from cohort import _native
from cohort._native import SaturationReport

__all__ = ["SaturationReport", "saturation"]


def saturation(scenario: str | os.PathLike[str] | None = None, **overrides: Any) -> SaturationReport:
    """Runs the saturation scenario file ``scenario`` (``None``: the reference scenario,
    ``scenarios/edca_sat.toml``'s values), with ``overrides`` replacing its keys::

        saturation(stations=10, duration_s=2.0, phy="n", data_mbps=65.0, seed=3)

    Keys are those of ``EdcaSatScenario`` (``stations``, ``vo_every``, ``phy``,
    ``data_mbps``, ``payload_bytes``, ``duration_s``, ``seed``, ``timing``, ...); an unknown
    key or a bad value raises :class:`~cohort.errors.ConfigError`.
    """
    text = "" if scenario is None else Path(scenario).read_text(encoding="utf-8")
    return _native.edca_sat(text, overrides)
