"""cohort.sim and cohort.medium: the simulator and the 802.11 model's saturation runs."""

from __future__ import annotations

from pathlib import Path

import pytest

import cohort
from cohort import medium, sim

SCENARIOS = Path(__file__).resolve().parents[2] / "scenarios"


def test_sim_run_returns_the_flows_of_a_scenario() -> None:
    o = sim.run(SCENARIOS / "lrt_wifi_team.toml", seed=3)
    assert o.scenario == "lrt_wifi_team" and o.seed == 3
    assert o.ok and o.violations == []
    assert len(o.flows) == 5
    for f in o.flows:
        assert isinstance(f, sim.FlowResult)
        assert f.delivered == f.sent > 0
        assert f.in_order and f.duplicates == 0 and f.corrupted == 0
        assert 0 <= f.p50_ms <= f.p99_ms <= f.max_ms
    assert o.packets > 0 and o.simulated_s > 0


def test_same_seed_same_trace_other_seed_other_trace() -> None:
    path = str(SCENARIOS / "lrt_p2p_lossy.toml")
    a, b, c = sim.run(path, 7), sim.run(path, 7), sim.run(path, 8)
    assert a.trace_hash == b.trace_hash
    assert a.trace_hash != c.trace_hash
    assert [f.delivered for f in a.flows] == [f.delivered for f in b.flows]


def test_crash_scenario_counts_messages_lost_to_crashes() -> None:
    o = sim.run(SCENARIOS / "lrt_crash.toml", 1)
    assert o.ok, o.violations
    assert sum(f.lost_to_crashes for f in o.flows) > 0
    assert all(f.delivered + f.lost_to_crashes <= f.sent for f in o.flows)


def test_bad_scenarios_raise_config_errors(tmp_path: Path) -> None:
    with pytest.raises(cohort.ConfigError) as e:
        sim.run_toml("name = 'x'\nthis is not toml")
    assert e.value.kind == "Parse"
    text = (SCENARIOS / "lrt_p2p_lossy.toml").read_text().replace("nodes = 2", "nodes = 1")
    with pytest.raises(cohort.ConfigError) as e:
        sim.run_toml(text)
    assert e.value.kind == "Invalid"
    with pytest.raises(cohort.ConfigError):
        sim.run(SCENARIOS / "edca_sat.toml")  # a medium scenario, not a simulation
    with pytest.raises(FileNotFoundError):
        sim.run(tmp_path / "missing.toml")
    with pytest.raises(OverflowError):
        sim.run_toml(text, seed=-1)


def test_saturation_run_of_the_reference_scenario() -> None:
    r = medium.saturation(SCENARIOS / "edca_sat.toml", duration_s=0.5)
    assert r.stations == 5 and r.simulated_s == 0.5
    assert r.throughput_mbps == pytest.approx(r.bk_mbps + r.be_mbps + r.vi_mbps + r.vo_mbps)
    assert r.vo_mbps > 0 and r.be_mbps > 0 and r.vi_mbps == 0 and r.bk_mbps == 0
    assert r.successes > 0 and r.attempts >= r.successes
    assert 0 < r.busy_share <= 1
    # An empty scenario is the reference one: the same seed gives the same run.
    assert medium.saturation(duration_s=0.5).throughput_mbps == r.throughput_mbps


def test_saturation_overrides() -> None:
    # AC_BE and AC_BK share the channel (a saturating AC_VI station would starve AC_BK).
    r = medium.saturation(stations=3, acs=["be", "bk", "bk"], duration_s=0.3, seed=2)
    assert r.stations == 3 and r.be_mbps > 0 and r.bk_mbps > 0 and r.vi_mbps == 0 and r.vo_mbps == 0
    n = medium.saturation(phy="n", data_mbps=65.0, stations=4, duration_s=0.3, aggregation={"enabled": True})
    assert n.throughput_mbps > 0


def test_bad_saturation_input_raises_config_errors() -> None:
    with pytest.raises(cohort.ConfigError) as e:
        medium.saturation(statons=3)
    assert "unknown field" in str(e.value)
    with pytest.raises(cohort.ConfigError):
        medium.saturation(phy="zz")
    with pytest.raises(cohort.ConfigError):
        medium.saturation(stations=0)
    with pytest.raises(cohort.ConfigError):
        medium.saturation(duration_s=float("nan"))
    with pytest.raises(cohort.ConfigError):
        medium.saturation(stations=object())
