"""``detect``: a camera-frame pipeline running convolutional inference as fast as it can.

A capture thread synthesises camera frames (a noisy textured background with moving bright
objects; 128x128 RGB, standing in for a camera driver) into a queue of two frames. Inference
workers (two by default, one per core; each frame is handled by one worker, so frames are
processed in parallel as in a multi-stream detector) take the newest frame and run a small
YOLO-style detector in numpy: five 3x3 convolution layers (im2col + float32 matrix multiply;
ReLU, 2x2 max-pooling), a 1x1 head predicting per grid cell an objectness score, a box and
class scores, then box decoding, a score threshold and non-maximum suppression.

The weights are random (He initialisation from a fixed seed): the arithmetic is exactly that of
a trained network of this shape, the detections are not meaningful. It reports ``frame_ms``
(pre-processing + inference + post-processing of one frame) for every frame.

Parallelism comes from the workers rather than from BLAS threads: OpenBLAS's own threads spin
while waiting for work and collapse when the machine is over-subscribed, so the tuner's CLI
starts workloads with ``OPENBLAS_NUM_THREADS=1`` unless the environment says otherwise.
"""

from __future__ import annotations

import argparse
import contextlib
import queue
import threading
import time

import numpy as np

from cohort.tune.protocol import Reporter

FRAME = 128
# (in_channels, out_channels, pool after) per 3x3 conv layer
LAYERS = [(3, 24, True), (24, 48, True), (48, 96, True), (96, 128, True), (128, 160, False)]
CLASSES = 8


def im2col(x: np.ndarray) -> np.ndarray:
    """(C, H, W) -> (C*9, H*W) patches of a 3x3 'same' convolution."""
    c, h, w = x.shape
    p = np.pad(x, ((0, 0), (1, 1), (1, 1)))
    cols = np.empty((c, 9, h, w), dtype=x.dtype)
    for i in range(3):
        for j in range(3):
            cols[:, i * 3 + j] = p[:, i : i + h, j : j + w]
    return cols.reshape(c * 9, h * w)


def maxpool2(x: np.ndarray) -> np.ndarray:
    c, h, w = x.shape
    return x[:, : h // 2 * 2, : w // 2 * 2].reshape(c, h // 2, 2, w // 2, 2).max(axis=(2, 4))


def nms(boxes: np.ndarray, scores: np.ndarray, iou_max: float = 0.45) -> list[int]:
    """Greedy non-maximum suppression over (x0, y0, x1, y1) boxes."""
    order = np.argsort(-scores)
    keep: list[int] = []
    area = (boxes[:, 2] - boxes[:, 0]) * (boxes[:, 3] - boxes[:, 1])
    while order.size:
        i = int(order[0])
        keep.append(i)
        rest = order[1:]
        xx0 = np.maximum(boxes[i, 0], boxes[rest, 0])
        yy0 = np.maximum(boxes[i, 1], boxes[rest, 1])
        xx1 = np.minimum(boxes[i, 2], boxes[rest, 2])
        yy1 = np.minimum(boxes[i, 3], boxes[rest, 3])
        inter = np.clip(xx1 - xx0, 0, None) * np.clip(yy1 - yy0, 0, None)
        iou = inter / (area[i] + area[rest] - inter + 1e-9)
        order = rest[iou <= iou_max]
    return keep


class Detector:
    def __init__(self, seed: int = 3) -> None:
        rng = np.random.default_rng(seed)
        self.weights = []
        for cin, cout, pool in LAYERS:
            w = rng.normal(0, np.sqrt(2.0 / (cin * 9)), size=(cout, cin * 9)).astype(np.float32)
            b = np.zeros((cout, 1), dtype=np.float32)
            self.weights.append((w, b, pool))
        cin = LAYERS[-1][1]
        self.head = rng.normal(0, np.sqrt(1.0 / cin), size=(5 + CLASSES, cin)).astype(np.float32)
        self.mean = np.array([0.45, 0.45, 0.45], dtype=np.float32)[:, None, None]

    def __call__(self, frame: np.ndarray) -> list[tuple[float, float, float, float, int, float]]:
        x = (frame.astype(np.float32) / 255.0).transpose(2, 0, 1) - self.mean
        for w, b, pool in self.weights:
            c, h, wd = x.shape
            y = w @ im2col(x) + b
            x = np.maximum(y, 0.0).reshape(-1, h, wd)
            if pool:
                x = maxpool2(x)
        c, gh, gw = x.shape
        out = self.head @ x.reshape(c, gh * gw)  # (5+C, cells)
        obj = 1.0 / (1.0 + np.exp(-out[0]))
        cls = out[5:]
        cls_id = cls.argmax(axis=0)
        cell = FRAME / gw
        cy, cx = np.divmod(np.arange(gh * gw), gw)
        bx = (cx + 1.0 / (1.0 + np.exp(-out[1]))) * cell
        by = (cy + 1.0 / (1.0 + np.exp(-out[2]))) * cell
        bw = np.exp(np.clip(out[3], -3, 3)) * cell
        bh = np.exp(np.clip(out[4], -3, 3)) * cell
        boxes = np.stack([bx - bw / 2, by - bh / 2, bx + bw / 2, by + bh / 2], axis=1)
        sel = np.nonzero(obj > 0.3)[0]
        keep = nms(boxes[sel], obj[sel]) if sel.size else []
        return [(*map(float, boxes[sel[k]]), int(cls_id[sel[k]]), float(obj[sel[k]])) for k in keep]


class Camera(threading.Thread):
    """Synthesises frames into a 2-slot queue (dropping the oldest) until stopped."""

    def __init__(self, seed: int = 5, max_fps: float = 120.0) -> None:
        super().__init__(daemon=True, name="camera")
        self.frames: queue.Queue[np.ndarray] = queue.Queue(maxsize=2)
        self.stop = threading.Event()
        self.rng = np.random.default_rng(seed)
        self.period = 1.0 / max_fps
        yy, xx = np.mgrid[0:FRAME, 0:FRAME]
        self.background = (96 + 40 * np.sin(xx / 7.0) * np.cos(yy / 11.0)).astype(np.float32)

    def frame(self, t: float) -> np.ndarray:
        img = self.background[:, :, None] + self.rng.normal(0, 12.0, size=(FRAME, FRAME, 3)).astype(np.float32)
        for k in range(4):
            cx = int((FRAME / 2 + 60 * np.sin(t * (0.7 + k * 0.3) + k)) % FRAME)
            cy = int((FRAME / 2 + 50 * np.cos(t * (0.5 + k * 0.2) + 2 * k)) % FRAME)
            img[max(0, cy - 12) : cy + 12, max(0, cx - 9) : cx + 9, k % 3] += 110.0
        return np.clip(img, 0, 255).astype(np.uint8)

    def run(self) -> None:
        t0 = time.monotonic()
        while not self.stop.is_set():
            t = time.monotonic()
            f = self.frame(t - t0)
            if self.frames.full():
                with contextlib.suppress(queue.Empty):
                    self.frames.get_nowait()
            self.frames.put(f)
            rest = self.period - (time.monotonic() - t)
            if rest > 0:
                self.stop.wait(rest)


def run(duration_s: float, reporter: Reporter, seed: int = 3, workers: int = 2) -> dict[str, float]:
    """Process frames as fast as possible for ``duration_s`` (bounded). Returns a summary."""
    det = Detector(seed)
    cam = Camera()
    cam.start()
    det(cam.frames.get(timeout=5.0))  # warm-up (allocator, BLAS set-up)
    times: list[float] = []
    lock = threading.Lock()
    start = threading.Barrier(workers + 1)
    t_end = 0.0

    def worker() -> None:
        start.wait()
        while time.monotonic() < t_end and not cam.stop.is_set():
            try:
                frame = cam.frames.get(timeout=1.0)
            except queue.Empty:
                continue
            t = time.monotonic()
            det(frame)
            ms = (time.monotonic() - t) * 1000.0
            with lock:
                times.append(ms)
                reporter.report("frame_ms", ms, started=t)

    threads = [threading.Thread(target=worker, name=f"infer{i}", daemon=True) for i in range(workers)]
    for th in threads:
        th.start()
    try:
        t_end = time.monotonic() + duration_s
        reporter.ready()  # every thread exists now
        start.wait()
        for th in threads:
            th.join(timeout=duration_s + 10.0)
    finally:
        cam.stop.set()
        cam.join(timeout=2.0)
    return {"frames": float(len(times)), "mean_ms": float(np.mean(times)) if times else 0.0}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="cohort tune workload detect", description=__doc__.split("\n\n")[0])
    ap.add_argument("--duration", type=float, default=30.0, help="seconds to run (stops by itself)")
    ap.add_argument("--seed", type=int, default=3)
    ap.add_argument("--workers", type=int, default=2, help="inference threads (default: one per core)")
    ap.add_argument("--echo", action="store_true", help="print metric lines when COHORT_TUNE_METRICS is unset")
    a = ap.parse_args(argv)
    with Reporter(echo=a.echo) as rep:
        s = run(a.duration, rep, a.seed, a.workers)
    if not a.echo:
        print(f"detect: {s['frames']:.0f} frames, mean {s['mean_ms']:.1f} ms")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
