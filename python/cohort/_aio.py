"""The asyncio side of the bridge to the sockets' Rust futures.

Each event loop gets one :class:`cohort._native.Wakeup` (an ``eventfd``) that the loop watches
with ``add_reader``. An async socket call creates a :class:`cohort._native.Pending` (the Rust
future), polls it once, and if it has not finished waits on an asyncio future that the loop's
reader callback resolves when a poll finds the operation done. The Rust wakers only write to
the ``eventfd``: the socket's driver thread never takes the GIL. Polls happen on the loop's
thread, so a message taken from a socket is handed to the loop in the same step.
"""

from __future__ import annotations

import asyncio
import contextlib
import weakref
from collections.abc import Callable
from typing import Any

from cohort import _native
from cohort.errors import CohortError


class _Bridge:
    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.wakeup = _native.Wakeup()
        self.waiting: dict[int, tuple[_native.Pending, asyncio.Future[None]]] = {}
        loop.add_reader(self.wakeup.fileno(), self._on_wake)

    def _on_wake(self) -> None:
        self.wakeup.drain()
        for op, fut in list(self.waiting.values()):
            if not fut.done() and op.poll(self.wakeup):
                fut.set_result(None)


_bridges: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Bridge] = weakref.WeakKeyDictionary()


def _bridge(loop: asyncio.AbstractEventLoop) -> _Bridge:
    b = _bridges.get(loop)
    if b is None:
        b = _bridges[loop] = _Bridge(loop)
    return b


async def run(op: _native.Pending, keep: Callable[[Any], None] | None = None) -> Any:
    """Awaits `op` and returns its value (or raises its error).

    If the awaiting task is cancelled after the operation finished (a message was taken from
    the socket in the same loop step), its value goes to `keep` instead of being lost.
    """
    b = _bridge(asyncio.get_running_loop())
    if op.poll(b.wakeup):
        return op.result()
    fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    b.waiting[id(op)] = (op, fut)
    try:
        await fut
    except asyncio.CancelledError:
        if op.has_result() and keep is not None:
            # An error nobody awaits any more is dropped.
            with contextlib.suppress(CohortError):
                keep(op.result())
        op.cancel()
        raise
    finally:
        del b.waiting[id(op)]
    return op.result()
