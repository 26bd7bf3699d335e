"""Seed 001's RF-chain and beam allocation at a multi-antenna access point.

An access point with ``chains`` RF chains and a codebook of ``beams`` beams serves devices in
the plane; each allocation step (Algorithm 1) gives the chain-beam-device triple with the
largest throughput gain, and several chains may serve one device. The model (path loss, beam
gain, crosstalk between simultaneous beams, noise; Eqs. 1-2) is ``cohort_medium::beams``,
the one ``cohort bench beams`` measures; ``docs/beams.md`` states its constants::

    from cohort import beams

    a = beams.allocate([(10.0, 2.0), (20.0, -5.0), (15.0, 8.0)], chains=4, beams=16)
    a.total_bps, a.device_bps, a.streams  # streams: (chain, beam, device)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from cohort import _native
from cohort._native import BeamAllocation

__all__ = ["BeamAllocation", "allocate"]


def allocate(
    positions: Sequence[tuple[float, float]],
    *,
    band: Literal["5GHz", "60GHz"] = "5GHz",
    chains: int = 4,
    beams: int = 16,
    method: Literal["greedy", "one_to_one", "optimum"] = "greedy",
) -> BeamAllocation:
    """Allocates the chains and beams of an access point at the origin facing +x to devices
    at ``positions`` (metres). ``method``: ``"greedy"`` (Algorithm 1, one-to-many),
    ``"one_to_one"`` (at most one chain per device, the HEKATON baseline) or ``"optimum"``
    (the integer program solved exactly; exponential in the codebook, for small instances).
    A bad band, method, size or position raises :class:`~cohort.errors.ConfigError`.
    """
    return _native.beams_allocate([(float(x), float(y)) for x, y in positions], band, chains, beams, method)
