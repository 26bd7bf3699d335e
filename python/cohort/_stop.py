"""Waiting in a command's main thread until SIGTERM or SIGINT, without a lock in the handler.

A Python signal handler runs in the main thread between two bytecodes, which may be inside
the ``with`` block of the very lock the handler would take. ``threading.Event.set()`` from a
handler, while the main thread waits in ``Event.wait()``, deadlocks when the signal comes as
the wait returns (its condition's lock is held again there): a second SIGTERM a moment after
the first, as a supervisor that signals a group and then each member sends, hung 36 of 300
such processes in a test (and was why a bridge sometimes did not stop). Here the handler only
records the signal and writes a byte to a pipe; the main thread waits on the pipe.

The pipe is also the interpreter's wakeup fd (``signal.set_wakeup_fd``): a process-directed
signal can be delivered to any thread that does not block it (the native threads of Zenoh or
of Cohort's sockets), and then the main thread's ``select`` is not interrupted and the Python
handler would run only when that wait ends on its own. Python's C-level handler writes to
the wakeup fd from whichever thread took the signal, so the wait ends at once either way.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import time
from collections.abc import Callable, Iterable
from types import FrameType


class StopSignals:
    """Installs handlers for ``signals`` (SIGTERM and SIGINT by default); :meth:`wait` returns
    once one came, and from then on further SIGTERMs are ignored (see :meth:`ignore_further`).
    ``on_signal(signum)`` runs inside the handler, at every such signal: keep it free of Python
    locks (``faulthandler`` calls are fine)."""

    def __init__(
        self,
        signals: Iterable[signal.Signals] = (signal.SIGTERM, signal.SIGINT),
        on_signal: Callable[[int], None] | None = None,
    ) -> None:
        self.received: int | None = None
        self._on_signal = on_signal
        self._r, self._w = os.pipe()
        os.set_blocking(self._r, False)
        os.set_blocking(self._w, False)
        self._old_handlers = {s: signal.signal(s, self._handle) for s in signals}
        self._old_wakeup = signal.set_wakeup_fd(self._w, warn_on_full_buffer=False)

    def _handle(self, signum: int, _frame: FrameType | None) -> None:
        if self.received is None:
            self.received = signum
        if self._on_signal is not None:
            self._on_signal(signum)
        # A full pipe already holds a byte for the waiter.
        with contextlib.suppress(OSError):
            os.write(self._w, b"\0")

    def wait(self, timeout: float | None = None) -> bool:
        """Blocks until a signal came (``True``) or ``timeout`` seconds passed (``False``)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.received is None:
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                return False
            select.select([self._r], [], [], left)
            with contextlib.suppress(BlockingIOError):
                os.read(self._r, 4096)
        self.ignore_further()
        return True

    def ignore_further(self) -> None:
        """The stop has begun: a repeated SIGTERM (a supervisor that signals every member of a
        group, then each again) must not cut it short, nor kill the process during the
        interpreter's exit, where Python puts handlers back to the default (an ignored signal
        stays ignored). A second SIGINT still reaches the handler."""
        signal.signal(signal.SIGTERM, signal.SIG_IGN)

    def close(self) -> None:
        """Puts back the handlers and the wakeup fd found at construction and closes the pipe
        (for a caller that goes on after its stop, such as a test)."""
        signal.set_wakeup_fd(self._old_wakeup)
        for s, h in self._old_handlers.items():
            signal.signal(s, h)
        os.close(self._r)
        os.close(self._w)
