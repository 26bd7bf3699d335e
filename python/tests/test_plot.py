import json
from pathlib import Path

from cohort import plot

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def write(tmp_path: Path, report: dict) -> Path:
    p = tmp_path / "r.json"
    p.write_text(json.dumps(report))
    return p


def test_coding_chart(tmp_path: Path) -> None:
    report = {
        "kernels": {
            "scalar": {"axpy_gbps": 20.0, "combine64_gbps": 19.0},
            "avx2": {"axpy_gbps": 200.0, "combine64_gbps": 150.0},
        },
        "decode_gbps_w64": 80.0,
        "rlnc_crate_decode_gbps_k64": 0.7,
        "block_decode_gbps_k64": 2.3,
    }
    out = tmp_path / "c.png"
    assert plot.main(["coding", str(write(tmp_path, report)), str(out)]) == 0
    assert out.read_bytes()[:8] == PNG_MAGIC


def test_lrt_chart(tmp_path: Path) -> None:
    report = {
        "cdf": {"lrt": [50.0, 50.1, 60.0], "block": [55.0, 70.0, 120.0]},
        "params": {"owd_ms": 50.0, "size": 1024, "interval_ms": 1.0, "loss": {"Iid": {"p": 0.1}}},
    }
    out = tmp_path / "l.png"
    assert plot.main(["lrt", str(write(tmp_path, report)), str(out)]) == 0
    assert out.read_bytes()[:8] == PNG_MAGIC


def test_lrt_grid_chart(tmp_path: Path) -> None:
    def scheme(p99: float, overhead: float) -> dict:
        return {"p99_ms": p99, "overhead": overhead}

    grid = [
        {
            "owd_ms": owd,
            "loss_label": "10% iid",
            "interval_ms": iv,
            "size": 1024,
            "lrt": scheme(owd + 10.0, 1.4),
            "block": scheme(owd + 20.0, 1.6),
            "arq": scheme(owd * 3, 1.2),
            "lrt_overhead_minus_arq": 0.2,
        }
        for owd in (5.0, 50.0)
        for iv in (1.0, 10.0)
    ]
    report = {"grid": grid[:-1], "runs_pooled_per_point": 3, "points": 3, "lrt_lowest_p99_points": 3}
    out = tmp_path / "g.png"
    assert plot.main(["lrt-grid", str(write(tmp_path, report)), str(out)]) == 0, "a missing cell is left blank"
    assert out.read_bytes()[:8] == PNG_MAGIC
    assert plot.main(["lrt-grid", str(write(tmp_path, {"grid": grid})), str(out)]) == 2


def test_coorp_chart(tmp_path: Path) -> None:
    figs = {"violation_share": 0.01, "bh_utilization": 0.9, "reaction_ms": {"cdf": [5.0, 8.0, 40.0]}}
    report = {
        "profiles": {"per_ac": {"sim": {"edca": figs, "coorp": figs}}},
        "scalability": [
            {"robots": 2, "violation_share": 0.0, "model_violation_share": 0.0},
            {"robots": 10, "violation_share": 0.02, "model_violation_share": 0.01},
        ],
    }
    out = tmp_path / "c.png"
    assert plot.main(["coorp", str(write(tmp_path, report)), str(out)]) == 0
    assert out.read_bytes()[:8] == PNG_MAGIC
    del report["scalability"]
    assert plot.main(["coorp", str(write(tmp_path, report)), str(out)]) == 2


def test_coorp_testbed_chart(tmp_path: Path) -> None:
    figs = {"violation_share": 0.1, "bh_utilization": 0.9, "runs": 3, "reaction_ms_cdf": [5.0, 10.0, 40.0]}
    no_bh = {**figs, "bh_utilization": None}
    report = {
        "profiles": {"per_ac": {"sim": {}, "testbed": {"edca": figs, "no_bh": no_bh}}},
        "testbed_channel": {"phy": "ac", "data_mbps": 390.0},
    }
    out = tmp_path / "tb.png"
    assert plot.main(["coorp-testbed", str(write(tmp_path, report)), str(out)]) == 0
    assert out.stat().st_size > 0
    assert plot.main(["coorp-testbed", str(write(tmp_path, {"profiles": {}})), str(out)]) == 2


def test_coorp_gate_chart(tmp_path: Path) -> None:
    spread = {"n": 3, "p50": 0.1, "p99": 0.2, "max": 0.2, "cdf": [0.0, 0.1, 0.2]}
    report = {key: spread for key in ("pause_ms", "resume_ms", "netlink_us", "probe_owd_ms_held", "probe_owd_ms_open")}
    report["params"] = {"link_mbps": 50.0, "hold_ms": 8.0, "period_ms": 33.3}
    out = tmp_path / "g.png"
    assert plot.main(["coorp-gate", str(write(tmp_path, report)), str(out)]) == 0
    assert out.read_bytes()[:8] == PNG_MAGIC
    del report["netlink_us"]
    assert plot.main(["coorp-gate", str(write(tmp_path, report)), str(out)]) == 2


def test_group_chart(tmp_path: Path) -> None:
    rr = {"throughput_per_s": 6.0, "throughput_per_s_ci95": 0.4, "latency": {"cdf_ms": [150.0, 160.0, 170.0]}}
    report = {
        "sizes": [
            {
                "nodes": 12,
                "request_reply": {"gcbrr": rr, "tcp_seq": {"throughput_per_s": 3.0}, "zenoh": {"error": "x"}},
                "polling": {"gcbrr": {"throughput_msgs_per_s": 70.0}},
            }
        ],
        "join": [
            {
                "initial": 6,
                "gcbrr": {"join_delay": {"mean_ms": 100.0}, "update_delay_ms": 120.0},
                "tcp": {"error": "refused"},
            }
        ],
        "summary": {"nodes": 12, "throughput_ratio_vs_tcp": 2.0},
    }
    out = tmp_path / "g.png"
    assert plot.main(["group", str(write(tmp_path, report)), str(out)]) == 0
    assert out.read_bytes()[:8] == PNG_MAGIC
    assert plot.main(["group", str(write(tmp_path, {"sizes": []})), str(out)]) == 2


def test_multipath_chart(tmp_path: Path) -> None:
    sys_fig = {"goodput_mbps": 20.0, "goodput_ci95": 1.0, "runs": 3}
    scenario = {n: sys_fig for n in ("cohort", "minrtt", "roundrobin", "path0", "path1")}
    report = {
        "static": scenario,
        "loss": scenario,
        "handoff": scenario,
        "mobility": scenario,
        "short": {"flows": 3, "flow_bytes": 66000, "completion_ms": {"cohort": {"mean": 100.0, "ci95": 5.0}}},
        "federated": {
            "regret_cold": 10.0,
            "regret_federated": 2.0,
            "rounds": 100,
            "paths": 4,
            "super_arm": 2,
            "runs": 3,
        },
        "summary": {"static_share_of_sum": 0.8, "loss_goodput_ratio_vs_minrtt": 1.1, "max_stall_ms": 40.0},
    }
    out = tmp_path / "m.png"
    assert plot.main(["multipath", str(write(tmp_path, report)), str(out)]) == 0
    assert out.read_bytes()[:8] == PNG_MAGIC
    tb_scenario = {n: sys_fig for n in ("cohort", "mptcp", "path0", "path1")}
    testbed = {sc: tb_scenario for sc in ("static", "loss", "handoff", "mobility")}
    testbed["summary"] = {
        "static_goodput_ratio_vs_mptcp": 1.0,
        "loss_goodput_ratio_vs_mptcp": 1.2,
        "mobility_goodput_ratio_vs_mptcp": 1.1,
    }
    report["testbed"] = testbed
    assert plot.main(["multipath", str(write(tmp_path, report)), str(out)]) == 0
    # The testbed half alone (`--no-sim`).
    assert plot.main(["multipath", str(write(tmp_path, {"summary": {}, "testbed": testbed})), str(out)]) == 0
    assert out.read_bytes()[:8] == PNG_MAGIC
    # The testbed's federated start, with the MPTCP scenarios and alone (`--federated-only`).
    ci = {"mean": 5.0, "ci95": 1.0, "runs": 2}
    fed = {"regret_cold": ci, "regret_federated": ci, "regret_cold_runs": [4.0, 6.0]}
    fed |= {"regret_federated_runs": [1.0, 2.0], "rounds": 100, "paths": 4, "super_arm": 2, "runs": 2}
    fed["federated_regret_ratio"] = 0.3
    testbed["federated"] = fed
    assert plot.main(["multipath", str(write(tmp_path, report)), str(out)]) == 0
    assert plot.main(["multipath", str(write(tmp_path, {"summary": {}, "testbed": {"federated": fed}})), str(out)]) == 0
    assert out.read_bytes()[:8] == PNG_MAGIC
    bad = {"summary": {}, "testbed": {"federated": {"rounds": 100}}}
    assert plot.main(["multipath", str(write(tmp_path, bad)), str(out)]) == 2
    assert plot.main(["multipath", str(write(tmp_path, {"summary": {}, "testbed": {"summary": {}}})), str(out)]) == 2
    del report["federated"]
    assert plot.main(["multipath", str(write(tmp_path, report)), str(out)]) == 2
    assert plot.main(["multipath", str(write(tmp_path, {"summary": {}})), str(out)]) == 2


def test_bad_arguments_and_reports_are_errors(tmp_path: Path, capsys) -> None:
    assert plot.main(["nope", "a", "b"]) == 2
    assert plot.main(["coding", str(write(tmp_path, {"kernels": {}})), str(tmp_path / "x.png")]) == 2
    assert "lacks" in capsys.readouterr().err
    assert plot.main(["lrt", str(tmp_path / "missing.json"), str(tmp_path / "x.png")]) == 2
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    assert plot.main(["lrt", str(bad), str(tmp_path / "x.png")]) == 2


def test_beams_chart(tmp_path: Path) -> None:
    ci = {"mean": 1.2, "ci95": 0.05, "min": 1.0}
    point = {"devices": 16, "chains": 8, "beams": 64, "round_us": 30.0}
    e2e_fig = {"goodput_mbps": 20.0, "goodput_ci95": 1.0, "delay_p99_ms": 80.0, "delay_p99_ci95": 5.0}
    report = {
        "instances": {
            "instances": 10,
            "ratios_sorted": [0.9, 0.97, 1.0],
            "one_to_many_over_one_to_one_greedy": ci,
            "one_to_many_over_one_to_one_optimum": ci,
            "bits_per_joule_many_over_one": ci,
            "one_to_many_below_one_to_one": 0,
        },
        "timing": {"round_us_16x8x64": 30.0, "devices": [point], "chains": [point], "beams": [point]},
        "end_to_end": {
            "aware": {**e2e_fig, "goodput_runs": [20.0]},
            "equal": e2e_fig,
            "measured": e2e_fig,
        },
        "summary": {
            "greedy_over_optimum_mean": 0.99,
            "greedy_over_optimum_min": 0.9,
            "one_to_many_gain_mean": 1.2,
            "p99_delay_ratio_aware_over_equal": 0.7,
        },
    }
    out = tmp_path / "b.png"
    assert plot.main(["beams", str(write(tmp_path, report)), str(out)]) == 0
    assert out.read_bytes()[:8] == PNG_MAGIC
    del report["timing"]
    assert plot.main(["beams", str(write(tmp_path, report)), str(out)]) == 2


def test_crosscheck_chart(tmp_path: Path) -> None:
    ac = {"throughput_mbps": 10.0, "throughput_ci95": 0.5}
    engines = {e: {"be": ac, "vo": ac} for e in ("sim", "model", "testbed")}
    report = {"loads": [{"load": 0.3, "offered_mbps": 19.5, "engines": engines}]}
    out = tmp_path / "x.png"
    assert plot.main(["crosscheck", str(write(tmp_path, report)), str(out)]) == 0
    assert out.read_bytes()[:8] == PNG_MAGIC
    assert plot.main(["crosscheck", str(write(tmp_path, {"engines": {}})), str(out)]) == 2


def test_fidelity_chart_with_a_loaded_run(tmp_path: Path) -> None:
    figs = {"owd_err_ms_cdf": [0.01, 0.02, 0.5], "owd_err_ms_mean": 0.02, "added_jitter_p99_ms": 0.4}
    report = {
        "cohort": figs,
        "first_loaded": {"cohort": figs},
        "params": {"owd_ms": 20.0, "load_mbps": 50.0, "loss": 0.05},
    }
    out = tmp_path / "f.png"
    assert plot.main(["fidelity", str(write(tmp_path, report)), str(out)]) == 0
    assert out.read_bytes()[:8] == PNG_MAGIC
