"""cohort.beams: seed 001's chain and beam allocation from Python."""

from __future__ import annotations

import math
import random

import pytest

import cohort
from cohort import beams


def _team(n: int, seed: int) -> list[tuple[float, float]]:
    rng = random.Random(seed)
    # In front of the access point (it faces +x over ±60°), 5-40 m away.
    return [
        (d * math.cos(a), d * math.sin(a))
        for d, a in ((rng.uniform(5, 40), rng.uniform(-math.pi / 3, math.pi / 3)) for _ in range(n))
    ]


def test_greedy_allocates_consistent_streams() -> None:
    a = beams.allocate(_team(6, 1), chains=4, beams=16)
    assert isinstance(a, beams.BeamAllocation)
    assert 1 <= len(a.streams) <= 4
    chains = [c for c, _, _ in a.streams]
    used = [b for _, b, _ in a.streams]
    assert len(set(chains)) == len(chains) and len(set(used)) == len(used), a.streams
    assert all(0 <= d < 6 for _, _, d in a.streams)
    assert len(a.snr) == len(a.theta_bps) == len(a.streams)
    assert len(a.device_bps) == 6
    assert math.isclose(sum(a.device_bps), a.total_bps, rel_tol=1e-9)
    assert math.isclose(sum(a.theta_bps), a.total_bps, rel_tol=1e-9)
    assert a.total_bps > 0


def test_one_to_many_never_below_one_to_one_and_the_optimum_bounds_both() -> None:
    for seed in range(5):
        team = _team(4, seed)
        greedy = beams.allocate(team, chains=3, beams=6)
        one = beams.allocate(team, chains=3, beams=6, method="one_to_one")
        best = beams.allocate(team, chains=3, beams=6, method="optimum")
        devices = [d for _, _, d in one.streams]
        assert len(set(devices)) == len(devices), one.streams
        assert greedy.total_bps >= one.total_bps * (1 - 1e-9), seed
        assert best.total_bps >= greedy.total_bps * (1 - 1e-9), seed


def test_both_bands_and_no_devices() -> None:
    team = _team(3, 9)
    assert beams.allocate(team, band="60GHz", chains=2, beams=8).total_bps > 0
    empty = cohort.beams.allocate([], chains=2, beams=4)
    assert empty.streams == [] and empty.total_bps == 0


@pytest.mark.parametrize(
    ("kwargs", "kind"),
    [
        ({"band": "2.4GHz"}, "Band"),
        ({"method": "best"}, "Method"),
        ({"chains": 0}, "Empty"),
        ({"chains": 10_000}, "TooMany"),
    ],
)
def test_bad_input_raises_config_errors(kwargs: dict[str, object], kind: str) -> None:
    with pytest.raises(cohort.ConfigError) as e:
        beams.allocate(_team(2, 0), **kwargs)  # type: ignore[arg-type]
    assert e.value.kind == kind, e.value


def test_a_position_that_is_not_finite_is_refused() -> None:
    with pytest.raises(cohort.ConfigError) as e:
        beams.allocate([(float("nan"), 1.0)])
    assert e.value.kind == "Invalid"
    with pytest.raises(cohort.ConfigError):
        beams.allocate([(0.0, 0.0)] * 5000)
