"""`python -m cohort.lrt_rate` (`cohort bench bindings`): both pairs deliver every message, the
report pairs the repetitions, and bad parameters are refused. Behaviour only: no rate asserted."""

from __future__ import annotations

import pytest

from cohort import lrt_rate


def test_mean_ci_of_one_and_of_several_values() -> None:
    assert lrt_rate.mean_ci([2.0]) == {"mean": 2.0, "ci95": 0.0, "runs": 1}
    r = lrt_rate.mean_ci([1.0, 3.0])
    assert r["mean"] == 2.0 and r["runs"] == 2 and r["ci95"] == pytest.approx(12.706, abs=1e-3)


def test_both_pairs_run_and_the_ratio_is_paired_by_repetition() -> None:
    try:
        cohort_bin = lrt_rate.find_cohort(None)
    except SystemExit:
        pytest.skip("no cohort binary built")
    r = lrt_rate.bench(cohort_bin, count=500, size=1024, reps=2, rate_mbps=10_000.0, timeout_s=30.0)
    assert len(r["rust_per_rep"]) == len(r["python_per_rep"]) == 2
    assert all(x > 0 for x in r["rust_per_rep"] + r["python_per_rep"])
    want = [p / q for p, q in zip(r["python_per_rep"], r["rust_per_rep"], strict=True)]
    assert r["python_over_rust_per_rep"] == pytest.approx(want, rel=1e-3)
    assert r["python_over_rust"]["runs"] == 2
    assert isinstance(r["goal_ge_0_8"], bool)


def test_bad_parameters_are_refused(capsys: pytest.CaptureFixture[str]) -> None:
    assert lrt_rate.main(["--count", "1"]) == 2
    assert "--count >= 2" in capsys.readouterr().err


def test_pinning_binds_receiver_and_sender_to_their_cpus() -> None:
    import os
    import subprocess
    import sys

    pins = lrt_rate.pin_cpus()
    if pins is None:
        pytest.skip("one CPU")
    for cpu in pins:
        out = subprocess.run(
            [sys.executable, "-c", "import os; print(sorted(os.sched_getaffinity(0)))"],
            capture_output=True,
            text=True,
            check=True,
            preexec_fn=lrt_rate._on_cpu(cpu),
        ).stdout
        assert out.strip() == f"[{cpu}]"
    assert pins[0] != pins[1] and set(pins) <= os.sched_getaffinity(0)
    try:
        cohort_bin = lrt_rate.find_cohort(None)
    except SystemExit:
        pytest.skip("no cohort binary built")
    r = lrt_rate.bench(cohort_bin, count=300, size=1024, reps=1, rate_mbps=10_000.0, timeout_s=30.0, pin=True)
    assert r["params"]["pinned"] == {"receiver_cpu": pins[0], "sender_cpu": pins[1]}
    assert len(r["rust_per_rep"]) == len(r["python_per_rep"]) == 1
