"""``nav``: a 20 Hz navigation loop doing the work of a small robot's planner.

Each period (50 ms by default) a simulated 2D LIDAR scan arrives. The loop takes the newest
scan (stale ones are dropped, as a ROS subscriber with queue size 1 does) and:

1. **ray-casts** the scan from the robot's pose in an occupancy map of a hallway (1081 beams over
   270 degrees, 0.25 degree steps, 12 m range, like a Hokuyo UST-10LX), with range noise;
2. builds a **local cost map** in a rolling window around the robot: scan endpoints become
   obstacles, which are **inflated** with a cost that decays with distance (robot radius plus
   a margin), merged with the inflated static map;
   (the local map keeps the last three scans, as costmap_2d's observation persistence does);
3. plans a path with **A*** over that cost map (8-connected, cost-weighted 0.1 m cells, an
   expansion budget) to a goal some metres down the hallway; the budget (1500 expansions) is
   sized so that the loop alone on this 2-core machine meets its 50 ms period with a p99 of
   about 40-45 ms in both environments, as seed 002's planner did (36 ms p99 when protected);
   a planner that misses its period even alone leaves an OS tuner nothing to win;
4. runs a **dynamic-window local planner** (496 velocity commands rolled out for 2 s over the
   cost map) towards a point on the path, and moves the robot along the path.

It reports ``loop_ms`` = completion time minus the scan's arrival time (so waiting for the CPU
counts, as it does for a real robot), ``compute_ms`` = the processing alone, and
``dropped_scans`` once at the end. Environments: ``sparse`` (a hallway with a few boxes) and
``dense`` (a hallway full of objects: more obstacle cells to inflate, a harder search).
"""

from __future__ import annotations

import argparse
import heapq
import math
import time

import numpy as np

from cohort.tune.protocol import Reporter

RES_M = 0.05  # occupancy-map cell size
BEAMS = 1081
FOV_RAD = math.radians(270.0)
RANGE_M = 12.0
WINDOW_CELLS = 240  # local cost map side: 12 m
PLAN_STRIDE = 2  # A* runs on 0.1 m cells
INFLATE_M = 0.45
GOAL_AHEAD_M = 9.0
SCAN_MEMORY = 3  # scans kept in the local map (observation persistence)


def make_map(env: str, seed: int = 7, length_m: float = 60.0, width_m: float = 6.0) -> np.ndarray:
    """Occupancy grid (True = occupied) of a hallway; ``dense`` adds many objects."""
    if env not in ("sparse", "dense"):
        raise ValueError(f"unknown environment {env!r} (sparse or dense)")
    rng = np.random.default_rng(seed)
    h, w = round(width_m / RES_M), round(length_m / RES_M)
    grid = np.zeros((h, w), dtype=bool)
    grid[:2, :] = grid[-2:, :] = True
    grid[:, :2] = grid[:, -2:] = True
    n_boxes = 12 if env == "sparse" else 150
    for _ in range(n_boxes):
        bh, bw = rng.integers(3, 12, size=2)
        y = int(rng.integers(2, h - 2 - bh))
        x = int(rng.integers(60, w - 60))
        # keep a free lane in the middle third of the hallway so a path always exists
        if env == "dense" and abs((y + bh / 2) - h / 2) < h / 8:
            continue
        grid[y : y + bh, x : x + bw] = True
    if env == "dense":  # clutter: small scattered objects (chair legs, bins, people's feet)
        ys = rng.integers(2, h - 2, size=900)
        xs = rng.integers(60, w - 60, size=900)
        keep = np.abs(ys - h / 2) >= h / 8
        grid[ys[keep], xs[keep]] = True
    return grid


def raycast(grid: np.ndarray, x_m: float, y_m: float, yaw: float, rng: np.random.Generator) -> np.ndarray:
    """Ranges (m) of one scan, marching every beam cell by cell to the first occupied cell."""
    angles = yaw - FOV_RAD / 2 + np.arange(BEAMS) * (FOV_RAD / (BEAMS - 1))
    steps = np.arange(1, int(RANGE_M / RES_M) + 1) * RES_M
    xs = (x_m + np.cos(angles)[:, None] * steps[None, :]) / RES_M
    ys = (y_m + np.sin(angles)[:, None] * steps[None, :]) / RES_M
    xi = np.clip(xs.astype(np.int32), 0, grid.shape[1] - 1)
    yi = np.clip(ys.astype(np.int32), 0, grid.shape[0] - 1)
    hit = grid[yi, xi]
    first = np.where(hit.any(axis=1), hit.argmax(axis=1), len(steps) - 1)
    ranges = steps[first]
    return ranges + rng.normal(0.0, 0.01, size=BEAMS)


def inflation_kernel() -> list[tuple[int, int, float]]:
    r = int(INFLATE_M / RES_M)
    out = []
    for dy in range(-r, r + 1):
        for dx in range(-r, r + 1):
            d = math.hypot(dx, dy) * RES_M
            if d <= INFLATE_M:
                out.append((dy, dx, 1.0 if d <= 0.2 else math.exp(-6.0 * (d - 0.2))))
    return out


def inflate(obstacles: np.ndarray, kernel: list[tuple[int, int, float]]) -> np.ndarray:
    """Cost in [0, 1]: max over obstacle cells of the kernel's decay (costmap_2d's inflation).

    Stamps the kernel around each obstacle cell, so the work grows with the number of obstacle
    cells in view, as a real inflation layer's does."""
    h, w = obstacles.shape
    r = int(INFLATE_M / RES_M)
    cost = np.zeros((h + 2 * r, w + 2 * r), dtype=np.float32)
    oy, ox = np.nonzero(obstacles)
    for dy, dx, c in kernel:
        view = cost[oy + r + dy, ox + r + dx]
        cost[oy + r + dy, ox + r + dx] = np.maximum(view, c)
    return cost[r : r + h, r : r + w]


def astar(
    cost: np.ndarray, start: tuple[int, int], goal: tuple[int, int], max_expansions: int = 1500
) -> list[tuple[int, int]]:
    """8-connected A* over a cost grid; cells with cost >= 0.99 are lethal.

    Like a real planner it has an expansion budget: past it (or when the goal is unreachable) it
    returns the path to the expanded cell closest to the goal."""
    h, w = cost.shape
    lethal = cost >= 0.99
    penalty = (1.0 + 10.0 * cost).tolist()
    lethal_l = lethal.tolist()
    gy, gx = goal
    sq2 = math.sqrt(2.0)
    moves = [
        (-1, 0, 1.0),
        (1, 0, 1.0),
        (0, -1, 1.0),
        (0, 1, 1.0),
        (-1, -1, sq2),
        (-1, 1, sq2),
        (1, -1, sq2),
        (1, 1, sq2),
    ]
    g = {start: 0.0}
    parent: dict[tuple[int, int], tuple[int, int]] = {}
    openq = [(math.hypot(start[0] - gy, start[1] - gx), start)]
    closed = set()
    best = start
    best_h = math.inf
    while openq and len(closed) < max_expansions:
        _, node = heapq.heappop(openq)
        if node in closed:
            continue
        if node == goal:
            best = node
            break
        closed.add(node)
        y, x = node
        hn = math.hypot(y - gy, x - gx)
        if hn < best_h:
            best, best_h = node, hn
        gn = g[node]
        for dy, dx, step in moves:
            ny, nx = y + dy, x + dx
            if ny < 0 or nx < 0 or ny >= h or nx >= w or lethal_l[ny][nx]:
                continue
            nb = (ny, nx)
            ng = gn + step * penalty[ny][nx]
            if ng < g.get(nb, math.inf):
                g[nb] = ng
                parent[nb] = node
                heapq.heappush(openq, (ng + math.hypot(ny - gy, nx - gx), nb))
    path = [best]
    while best in parent:
        best = parent[best]
        path.append(best)
    return path[::-1]


def dwa(
    cost: np.ndarray, x0: int, pose: tuple[float, float, float], target: tuple[float, float]
) -> tuple[float, float]:
    """Dynamic-window local planner: roll out (v, w) commands for 2 s over the cost map, drop the
    ones that hit lethal cost, score the rest on progress to ``target``, clearance and speed."""
    x, y, yaw = pose
    v = np.linspace(0.05, 1.0, 16)[:, None]
    w = np.linspace(-1.5, 1.5, 31)[None, :]
    v, w = np.broadcast_arrays(v, w)
    v, w = v.ravel(), w.ravel()
    dt, steps = 0.1, 20
    t = np.arange(1, steps + 1) * dt
    heading = yaw + w[:, None] * t[None, :]
    px = x + np.cumsum(v[:, None] * np.cos(heading) * dt, axis=1)
    py = y + np.cumsum(v[:, None] * np.sin(heading) * dt, axis=1)
    ix = np.clip((px / RES_M).astype(np.int32) - x0, 0, cost.shape[1] - 1)
    iy = np.clip((py / RES_M).astype(np.int32), 0, cost.shape[0] - 1)
    c = cost[iy, ix]
    lethal = (c >= 0.99).any(axis=1)
    progress = np.hypot(px[:, -1] - target[0], py[:, -1] - target[1])
    score = progress + 2.0 * c.mean(axis=1) - 0.3 * v + np.where(lethal, 1e9, 0.0)
    k = int(np.argmin(score))
    return (float(v[k]), float(w[k])) if not lethal[k] else (0.0, 0.0)


class Nav:
    """The navigation stack's state: map, pose, recent scans, the static cost map."""

    def __init__(self, env: str, seed: int = 7) -> None:
        self.grid = make_map(env, seed)
        self.kernel = inflation_kernel()
        self.static_cost = inflate(self.grid, self.kernel)
        self.rng = np.random.default_rng(seed)
        h = self.grid.shape[0]
        self.y_m = h * RES_M / 2
        self.x_m = 3.0
        self.yaw = 0.0
        self.path_len = 0
        self.iteration = 0
        self.command = (0.0, 0.0)
        self.history: list[tuple[np.ndarray, np.ndarray]] = []  # recent scans' endpoints (world cells)

    def step(self) -> None:
        h, w = self.grid.shape
        ranges = raycast(self.grid, self.x_m, self.y_m, self.yaw, self.rng)
        angles = self.yaw - FOV_RAD / 2 + np.arange(BEAMS) * (FOV_RAD / (BEAMS - 1))
        hit = ranges < RANGE_M - 0.05
        wx = ((self.x_m + np.cos(angles) * ranges) / RES_M).astype(np.int32)[hit]
        wy = ((self.y_m + np.sin(angles) * ranges) / RES_M).astype(np.int32)[hit]
        # observation persistence: the local map holds the last SCAN_MEMORY scans
        self.history = [*self.history[-(SCAN_MEMORY - 1) :], (wx, wy)]
        # local window (rows cover the whole hallway width, columns a rolling window)
        cx = int(self.x_m / RES_M)
        x0 = max(0, min(w - WINDOW_CELLS, cx - WINDOW_CELLS // 4))
        seen = np.zeros((h, WINDOW_CELLS), dtype=bool)
        for hx, hy in self.history:
            ok = (hx - x0 >= 0) & (hx - x0 < WINDOW_CELLS) & (hy >= 0) & (hy < h)
            seen[hy[ok], hx[ok] - x0] = True
        cost = np.maximum(inflate(seen, self.kernel), self.static_cost[:, x0 : x0 + WINDOW_CELLS])
        coarse = cost[::PLAN_STRIDE, ::PLAN_STRIDE]
        start = (int(self.y_m / RES_M) // PLAN_STRIDE, (cx - x0) // PLAN_STRIDE)
        gx = min(coarse.shape[1] - 1, start[1] + int(GOAL_AHEAD_M / RES_M) // PLAN_STRIDE)
        # the goal moves between the hallway's sides (doors to visit) every 3 s
        side = (self.iteration // 60) % 3
        goal = ((coarse.shape[0] * (1 + side)) // 4, gx)
        self.iteration += 1
        coarse = coarse.copy()
        coarse[start] = 0.0
        coarse[goal] = 0.0
        path = astar(coarse, start, goal)
        self.path_len = len(path)
        ty, tx = path[min(len(path) - 1, 10)]
        target = ((tx * PLAN_STRIDE + x0 + 0.5) * RES_M, (ty * PLAN_STRIDE + 0.5) * RES_M)
        self.command = dwa(cost, x0, (self.x_m, self.y_m, self.yaw), target)
        # the simulated robot tracks the global path (0.2 m a loop); wrap at the hallway's end
        if len(path) > 2:
            ny, nx = path[2]
            self.y_m = (ny * PLAN_STRIDE + 0.5) * RES_M
            self.x_m = (nx * PLAN_STRIDE + x0 + 0.5) * RES_M
        else:
            self.x_m += 0.1
        if self.x_m > w * RES_M - GOAL_AHEAD_M - 3.0:
            self.x_m, self.y_m = 3.0, h * RES_M / 2


def run(env: str, duration_s: float, period_ms: float, reporter: Reporter, seed: int = 7) -> dict[str, float]:
    """Run the loop for ``duration_s`` (bounded; stops by itself). Returns a summary."""
    nav = Nav(env, seed)
    nav.step()  # warm caches and the allocator before saying ready
    reporter.ready()
    period = period_ms / 1000.0
    t0 = time.monotonic()
    k = 0
    dropped = 0
    loops: list[float] = []
    while True:
        release = t0 + k * period
        now = time.monotonic()
        if release - t0 >= duration_s:
            break
        if now < release:
            time.sleep(release - now)
        else:
            latest = int((now - t0) / period)  # newest scan already out
            dropped += latest - k
            k = latest
            release = t0 + k * period
        begin = time.monotonic()
        nav.step()
        done = time.monotonic()
        loop_ms = (done - release) * 1000.0
        loops.append(loop_ms)
        reporter.report("loop_ms", loop_ms, started=release)
        reporter.report("compute_ms", (done - begin) * 1000.0, started=begin)
        k += 1
    reporter.report("dropped_scans", float(dropped))
    arr = np.array(loops) if loops else np.zeros(1)
    return {"loops": float(len(loops)), "dropped": float(dropped), "p99_ms": float(np.percentile(arr, 99))}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="cohort tune workload nav", description=__doc__.split("\n\n")[0])
    ap.add_argument("--env", choices=["sparse", "dense"], default="sparse")
    ap.add_argument("--duration", type=float, default=30.0, help="seconds to run (the loop stops by itself)")
    ap.add_argument("--period-ms", type=float, default=50.0)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--echo", action="store_true", help="print metric lines when COHORT_TUNE_METRICS is unset")
    a = ap.parse_args(argv)
    with Reporter(echo=a.echo) as rep:
        summary = run(a.env, a.duration, a.period_ms, rep, a.seed)
    if not a.echo:
        print(
            f"nav {a.env}: {summary['loops']:.0f} loops, {summary['dropped']:.0f} dropped, "
            f"p99 {summary['p99_ms']:.1f} ms"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
