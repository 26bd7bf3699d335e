"""The metric protocol: how an app reports its per-iteration times to the tuner.

The tuner starts each app with the environment variable ``COHORT_TUNE_METRICS`` set to the path
of a file. The app appends one line per iteration, ASCII, newline-terminated::

    <metric> <value> [<start>]

``<metric>`` is a name of ``[A-Za-z0-9_.-]`` characters chosen by the app (the spec names which
one the objective uses, e.g. ``loop_ms``), ``<value>`` a decimal number (milliseconds by
convention: name the metric with a unit suffix). ``<start>``, optional, is when the iteration
began, in seconds of ``CLOCK_MONOTONIC`` (Python's ``time.monotonic()``; the clock every process
of the machine shares): the tuner then counts the sample only if the iteration began inside
its measurement window, so an iteration that straddles the window's start (begun during the
apps' start-up, before the knobs were applied) is not counted whole. Without it the tuner
uses the time it read the line. Two further line forms exist:

* ``ready`` — the app has finished its set-up (loaded its model, started all its threads). The
  tuner applies per-process knobs (real-time scheduling) to every thread of the app after this
  line, because a SCHED_DEADLINE task cannot create threads or processes afterwards. An app that
  never says ``ready`` gets them after the spec's ``ready_timeout_s``.
* lines starting with ``#`` and empty lines are ignored.

Each line must be written with one ``write(2)`` on a descriptor opened with ``O_APPEND`` so lines
from several threads never interleave (lines are far shorter than ``PIPE_BUF``). A file (not a
pipe) is used so that a slow or dead tuner never blocks or kills the app. Any other line is
counted as malformed and reported by the tuner, never silently dropped.

Any language can speak it; from a shell: ``echo "loop_ms 12.5" >> "$COHORT_TUNE_METRICS"``.
"""

from __future__ import annotations

import math
import os
import re
import time
from dataclasses import dataclass, field

ENV_VAR = "COHORT_TUNE_METRICS"
_NAME = re.compile(r"^[A-Za-z0-9_.\-]+$")


def _finite(text: str) -> float | None:
    try:
        x = float(text)
    except ValueError:
        return None
    return x if math.isfinite(x) else None


class ProtocolError(ValueError):
    """A metric name or value that the protocol cannot carry."""


class Reporter:
    """App side: report samples to the file named by ``COHORT_TUNE_METRICS``.

    With no path and no environment variable the reporter writes nowhere (the app runs
    stand-alone) unless ``echo`` is set, which prints every line to stdout instead.
    """

    def __init__(self, path: str | None = None, echo: bool = False) -> None:
        path = path if path is not None else os.environ.get(ENV_VAR)
        self.echo = echo
        self._fd: int | None = None
        if path:
            self._fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    def _line(self, line: str) -> None:
        data = (line + "\n").encode("ascii")
        if self._fd is not None:
            os.write(self._fd, data)
        elif self.echo:
            print(line, flush=True)

    def report(self, metric: str, value: float, started: float | None = None) -> None:
        """One sample: ``metric value``, and ``started`` (``time.monotonic()`` when the
        iteration began) if given."""
        if not _NAME.match(metric):
            raise ProtocolError(f"metric name {metric!r} has characters outside [A-Za-z0-9_.-]")
        for what, x in (("value", value), ("start", started)):
            if x is not None and not math.isfinite(x):
                raise ProtocolError(f"metric {metric} {what} {x} is not finite")
        self._line(f"{metric} {value:.4f}" if started is None else f"{metric} {value:.4f} {started:.6f}")

    def ready(self) -> None:
        """Set-up is done; all threads exist."""
        self._line("ready")

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> Reporter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@dataclass
class Sample:
    metric: str
    value: float
    t_s: float  # monotonic time at which the collector read the line
    started_s: float | None = None  # monotonic time the iteration began, when the app says

    def began_at_or_after(self, t: float) -> bool:
        """Whether the iteration began at or after ``t`` (read then, for apps that do not say)."""
        return (self.started_s if self.started_s is not None else self.t_s) >= t


@dataclass
class Collector:
    """Tuner side: tail one app's metrics file, parsing complete lines as they arrive."""

    path: str
    samples: list[Sample] = field(default_factory=list)
    ready_at_s: float | None = None
    malformed: list[str] = field(default_factory=list)
    _offset: int = 0
    _partial: bytes = b""

    def poll(self) -> int:
        """Read what was appended since the last call; returns the number of new samples."""
        try:
            with open(self.path, "rb") as f:
                f.seek(self._offset)
                data = f.read()
        except FileNotFoundError:
            return 0
        self._offset += len(data)
        data = self._partial + data
        *lines, self._partial = data.split(b"\n")
        now = time.monotonic()
        n = 0
        for raw in lines:
            if self.parse_line(raw, now):
                n += 1
        return n

    def parse_line(self, raw: bytes, now: float) -> bool:
        """Parse one line; True when it was a sample."""
        line = raw.decode("ascii", errors="replace").strip()
        if not line or line.startswith("#"):
            return False
        if line == "ready":
            if self.ready_at_s is None:
                self.ready_at_s = now
            return False
        parts = line.split()
        if len(parts) in (2, 3) and _NAME.match(parts[0]):
            value = _finite(parts[1])
            started = _finite(parts[2]) if len(parts) == 3 else None
            if value is not None and (len(parts) == 2 or started is not None):
                self.samples.append(Sample(parts[0], value, now, started))
                return True
        if len(self.malformed) < 100:
            self.malformed.append(line[:200])
        return False

    def values(self, metric: str, since_s: float = float("-inf")) -> list[float]:
        """Values of one metric whose iterations began (or, unsaid, were read) at or after
        monotonic time ``since_s``."""
        return [s.value for s in self.samples if s.metric == metric and s.began_at_or_after(since_s)]
