"""The reference workloads do real work and report through the protocol (short runs)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from cohort.tune.protocol import ENV_VAR, Collector
from cohort.tune.workloads import detect, nav


def test_map_environments_differ() -> None:
    sparse, dense = nav.make_map("sparse"), nav.make_map("dense")
    assert sparse.shape == dense.shape
    assert dense.sum() > 1.5 * sparse.sum()
    with pytest.raises(ValueError):
        nav.make_map("forest")


def test_raycast_hits_the_wall() -> None:
    grid = np.zeros((100, 100), dtype=bool)
    grid[:, 80] = True  # a wall 4 m ahead of x=0.5 m
    r = nav.raycast(grid, 0.5, 2.5, 0.0, np.random.default_rng(0))
    ahead = r[nav.BEAMS // 2]
    assert abs(ahead - (80 * nav.RES_M - 0.5)) < 0.1


def test_inflation_decays_from_obstacles() -> None:
    obs = np.zeros((40, 40), dtype=bool)
    obs[20, 20] = True
    cost = nav.inflate(obs, nav.inflation_kernel())
    assert cost[20, 20] == 1.0
    assert 0 < cost[20, 26] < cost[20, 23] <= 1.0
    assert cost[0, 0] == 0.0


def test_astar_goes_around_a_wall() -> None:
    cost = np.zeros((20, 20), dtype=np.float32)
    cost[2:20, 10] = 1.0  # lethal wall with a gap at the top
    path = nav.astar(cost, (18, 2), (18, 17))
    assert path[0] == (18, 2) and path[-1] == (18, 17)
    assert min(y for y, _ in path) < 2  # through the gap
    assert all(cost[y, x] < 0.99 for y, x in path)


def test_im2col_convolution_matches_direct() -> None:
    rng = np.random.default_rng(1)
    x = rng.normal(size=(2, 5, 6)).astype(np.float32)
    w = rng.normal(size=(3, 2, 3, 3)).astype(np.float32)
    y = (w.reshape(3, -1) @ detect.im2col(x)).reshape(3, 5, 6)
    p = np.pad(x, ((0, 0), (1, 1), (1, 1)))
    direct = np.zeros_like(y)
    for o in range(3):
        for i in range(5):
            for j in range(6):
                direct[o, i, j] = (w[o] * p[:, i : i + 3, j : j + 3]).sum()
    assert np.allclose(y, direct, atol=1e-4)


def test_dwa_avoids_a_wall_ahead() -> None:
    cost = np.zeros((100, 200), dtype=np.float32)
    free = nav.dwa(cost, 0, (0.0, 2.5, 0.0), (5.0, 2.5))
    assert free == (1.0, 0.0)  # nothing in the way: full speed at the target
    cost[:, 30:34] = 1.0  # a lethal wall 1.5 m ahead, closer than a 2 s roll-out at full speed
    v, _ = nav.dwa(cost, 0, (0.0, 2.5, 0.0), (5.0, 2.5))
    assert v < 0.8  # only slower commands stay clear of it


def test_recorder_compresses_real_data() -> None:
    import zlib

    from cohort.tune.workloads import recorder

    data = recorder.sensor_bytes(np.random.default_rng(0))
    assert len(data) == recorder.CHUNK
    assert 0.3 < len(zlib.compress(data, 6)) / len(data) < 0.95


def test_nms_keeps_the_best_of_overlapping_boxes() -> None:
    boxes = np.array([[0, 0, 10, 10], [1, 1, 11, 11], [50, 50, 60, 60]], dtype=float)
    keep = detect.nms(boxes, np.array([0.9, 0.8, 0.7]))
    assert keep == [0, 2]


def test_detector_runs_on_a_frame() -> None:
    det = detect.Detector()
    frame = detect.Camera().frame(0.0)
    assert frame.shape == (detect.FRAME, detect.FRAME, 3)
    out = det(frame)
    assert isinstance(out, list)
    assert all(len(d) == 6 for d in out)


@pytest.mark.parametrize(
    ("args", "metric"),
    [
        (["nav", "--env", "dense", "--duration", "1.0"], "loop_ms"),
        (["detect", "--duration", "1.5"], "frame_ms"),
        (["recorder", "--duration", "0.5", "--rate-mbps", "4"], "chunk_ms"),
    ],
)
def test_workload_reports_through_protocol(tmp_path: Path, args: list[str], metric: str) -> None:
    path = tmp_path / "m"
    subprocess.run(
        [sys.executable, "-m", "cohort.tune", "workload", *args],
        env={**os.environ, ENV_VAR: str(path)},
        check=True,
        timeout=60,
        capture_output=True,
    )
    c = Collector(str(path))
    c.poll()
    assert c.ready_at_s is not None
    vals = c.values(metric)
    assert len(vals) >= 3
    assert all(v > 0 for v in vals)
    assert c.malformed == []
