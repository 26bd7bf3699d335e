"""The bridge's LRT links: one connection per (peer, direction, traffic class).

:class:`OutLink` connects to the peer's listener for this robot and class and sends from a
bounded queue; :class:`InLink` listens for one peer and class and hands every message it
receives to a callback. Both reconnect on their own after the peer vanishes; while a link is
down, what would go over it is dropped and counted (never queued for later: a stale control
message is worse than none). Each state change prints one line on the bridge's logger.
"""

from __future__ import annotations

import contextlib
import logging
import math
import queue
import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from cohort.errors import ClosedError, CohortError
from cohort.errors import TimeoutError as CohortTimeout
from cohort.lrt import LrtSocket

from .qos import TrafficClass

__all__ = ["Counters", "InLink", "OutLink"]

log = logging.getLogger("cohort.bridge")

POLL_S = 0.1
# How often an idle link's thread looks at its socket (an outgoing link: whether the peer closed
# it). Stopping wakes it at once (a wake-up in the queue, the socket closed), so this is no
# stop latency; at 0.1 s the 32 link threads of a robot in a team of five woke 320 times a
# second, half of an idle bridge's CPU.
IDLE_S = 1.0
# How long stopping a link waits for its thread (an incoming link's receive ends one LRT closing
# period after its socket closes).
STOP_JOIN_S = 2.0


TIMING_WINDOW = 4096


class Counters:
    """Thread-safe named counters and durations (the bridge's ``stats()``).

    A duration series keeps its last :data:`TIMING_WINDOW` samples, so ``timings()`` describes
    the recent past of a bridge that runs for days in bounded memory."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._c: dict[str, int] = {}
        self._t: dict[str, deque[float]] = {}

    def add(self, name: str, n: int = 1) -> None:
        with self._lock:
            self._c[name] = self._c.get(name, 0) + n

    def get(self, name: str) -> int:
        with self._lock:
            return self._c.get(name, 0)

    def snapshot(self) -> dict[str, int]:
        with self._lock:
            return dict(self._c)

    def observe(self, name: str, seconds: float) -> None:
        """Records one duration of the series ``name``."""
        with self._lock:
            self._t.setdefault(name, deque(maxlen=TIMING_WINDOW)).append(seconds)

    def timings(self) -> dict[str, dict[str, float]]:
        """Per series: ``n`` (samples kept), ``p50_ms``, ``p99_ms``, ``max_ms`` (nearest rank)."""
        with self._lock:
            series = {name: sorted(d) for name, d in self._t.items() if d}
        return {
            name: {
                "n": len(xs),
                "p50_ms": _nearest_rank_ms(xs, 0.5),
                "p99_ms": _nearest_rank_ms(xs, 0.99),
                "max_ms": _nearest_rank_ms(xs, 1.0),
            }
            for name, xs in series.items()
        }


def _nearest_rank_ms(sorted_s: list[float], q: float) -> float:
    """The ``q`` quantile (nearest rank) of sorted seconds, in ms."""
    i = min(len(sorted_s), max(1, math.ceil(q * len(sorted_s)))) - 1
    return round(sorted_s[i] * 1e3, 3)


@dataclass(frozen=True)
class LinkParams:
    secret: bytes
    team: int
    sender_id: int
    handshake_timeout_s: float
    idle_timeout_s: float
    reconnect_s: float
    block_timeout_s: float
    drop_queue_len: int
    block_queue_len: int


def _open(how: Callable[..., LrtSocket], addr: str, p: LinkParams, cls: TrafficClass) -> LrtSocket:
    """``LrtSocket.connect`` or ``LrtSocket.listen`` on ``addr`` with the link's keys, marking
    and timeouts."""
    return how(
        addr,
        secret=p.secret,
        team=p.team,
        sender_id=p.sender_id,
        dscp=cls.dscp,
        priority=cls.so_priority,
        handshake_timeout=p.handshake_timeout_s,
        idle_timeout=p.idle_timeout_s,
    )


class _Link:
    """What both directions share: the peer, its address and class, and the link's thread."""

    def __init__(
        self,
        peer: int,
        addr: str,
        cls: TrafficClass,
        p: LinkParams,
        counters: Counters,
        way: str,
        run: Callable[[], None],
    ) -> None:
        self.peer, self.addr, self.cls, self.p, self.counters = peer, addr, cls, p, counters
        self._stop = threading.Event()
        self._sock: LrtSocket | None = None
        self._thread = threading.Thread(target=run, name=f"bridge-{way}-{peer}-{cls.name}", daemon=True)

    def signal_stop(self) -> None:
        self._stop.set()


class OutLink(_Link):
    """This robot -> ``peer`` for one traffic class. ``on_up`` is called (on the link's thread)
    each time a connection comes up, before anything queued after it is sent: a message it
    queues is the first a new peer process hears from this robot on the link."""

    def __init__(
        self,
        peer: int,
        addr: str,
        cls: TrafficClass,
        p: LinkParams,
        counters: Counters,
        on_up: Callable[[OutLink], None] | None = None,
    ) -> None:
        super().__init__(peer, addr, cls, p, counters, "out", self._run)
        self.on_up = on_up
        # One queue keeps the class's order; DROP samples may fill it to drop_queue_len,
        # BLOCK samples to block_queue_len (waiting up to block_timeout_s for room). `None`
        # only wakes the thread to stop.
        self._q: queue.Queue[bytes | None] = queue.Queue(maxsize=max(p.block_queue_len, p.drop_queue_len))
        self._up = threading.Event()

    def start(self) -> None:
        self._thread.start()

    @property
    def up(self) -> bool:
        return self._up.is_set()

    def wait_up(self, timeout: float) -> bool:
        return self._up.wait(timeout)

    def send(self, data: bytes, block: bool) -> bool:
        """Queues one message; False (and a counted drop) if the link is down or busy."""
        if not self._up.is_set():
            self.counters.add("dropped_link_down")
            return False
        if not block:
            if self._q.qsize() >= self.p.drop_queue_len:
                self.counters.add("dropped_congestion")
                return False
            try:
                self._q.put_nowait(data)
            except queue.Full:
                self.counters.add("dropped_congestion")
                return False
            return True
        try:
            self._q.put(data, timeout=self.p.block_timeout_s if self.p.block_timeout_s > 0 else None)
        except queue.Full:
            self.counters.add("dropped_block_timeout")
            log.error(
                "link to robot %d (%s) stayed full for %.1f s: a BLOCK sample dropped",
                self.peer,
                self.cls.name,
                self.p.block_timeout_s,
            )
            return False
        return True

    def _connect(self) -> LrtSocket | None:
        try:
            return _open(LrtSocket.connect, self.addr, self.p, self.cls)
        except CohortError:
            return None

    def _run(self) -> None:
        announced_down = False
        while not self._stop.is_set():
            sock = self._connect()
            if sock is None:
                if not announced_down:
                    log.error("link to robot %d (%s) at %s: no answer, retrying", self.peer, self.cls.name, self.addr)
                    announced_down = True
                self._stop.wait(self.p.reconnect_s)
                continue
            self._sock = sock
            if announced_down:
                log.warning("link to robot %d (%s) up", self.peer, self.cls.name)
            announced_down = False
            self._up.set()
            if self.on_up is not None:
                try:
                    self.on_up(self)
                except Exception as e:  # the link still carries samples
                    log.error("link to robot %d (%s): its greeting failed: %s", self.peer, self.cls.name, e)
            self._pump(sock)
            self._up.clear()
            sock.close()
            self._sock = None
            # Whatever was still queued had nowhere to go.
            n = self._drain()
            if n:
                self.counters.add("dropped_link_down", n)
            if not self._stop.is_set():
                self.counters.add("link_failures")
                log.error("link to robot %d (%s) lost: the peer vanished; reconnecting", self.peer, self.cls.name)
                announced_down = True

    def _pump(self, sock: LrtSocket) -> None:
        while not self._stop.is_set():
            try:
                data = self._q.get(timeout=IDLE_S)
            except queue.Empty:
                # Nothing comes back on an outgoing link: receiving only tells whether the
                # peer closed it or went silent past the idle timeout (`closed` is local).
                try:
                    sock.try_recv()
                except CohortError:
                    return
                continue
            if data is None:
                continue
            try:
                sock.send(data, timeout=max(self.p.block_timeout_s, POLL_S))
                self.counters.add("sent_messages")
            except CohortTimeout:
                self.counters.add("dropped_congestion")
            except ClosedError:
                self.counters.add("dropped_link_down")
                return
            except CohortError as e:  # a message LRT refuses (over 16 MiB): this one only
                self.counters.add("dropped_send_error")
                log.error("message to robot %d (%s) dropped: %s", self.peer, self.cls.name, e)

    def _drain(self) -> int:
        n = 0
        while True:
            try:
                n += self._q.get_nowait() is not None
            except queue.Empty:
                return n

    def signal_stop(self) -> None:
        super().signal_stop()
        with contextlib.suppress(queue.Full):  # a full queue keeps the thread busy: it sees the flag
            self._q.put_nowait(None)

    def stop(self) -> None:
        self.signal_stop()
        sock = self._sock
        if sock is not None:
            sock.close()
        # A thread inside a connect attempt (up to handshake_timeout_s) is not waited for: it
        # sees the stop flag when the attempt ends and closes what it opened itself.
        if self._thread.ident is not None:
            self._thread.join(timeout=STOP_JOIN_S)


class InLink(_Link):
    """``peer`` -> this robot for one traffic class: listens, hands messages to ``on_message``."""

    def __init__(
        self,
        peer: int,
        addr: str,
        cls: TrafficClass,
        p: LinkParams,
        counters: Counters,
        on_message: Callable[[int, bytes], None],
    ) -> None:
        super().__init__(peer, addr, cls, p, counters, "in", self._run)
        self.on_message = on_message

    def start(self) -> None:
        """Binds the listener (raising if the address is taken) and starts receiving."""
        self._sock = self._listen()
        self._thread.start()

    def _listen(self) -> LrtSocket:
        return _open(LrtSocket.listen, self.addr, self.p, self.cls)

    def _run(self) -> None:
        sock = self._sock
        while not self._stop.is_set():
            if sock is None:
                try:
                    sock = self._sock = self._listen()
                except CohortError as e:
                    log.error("cannot listen for robot %d (%s) at %s: %s", self.peer, self.cls.name, self.addr, e)
                    self._stop.wait(self.p.reconnect_s)
                    continue
            try:
                sock.wait_connected(IDLE_S)
            except CohortTimeout:
                continue
            except ClosedError:
                sock.close()
                sock = self._sock = None
                continue
            self._receive(sock)
            sock.close()
            sock = self._sock = None

    def _receive(self, sock: LrtSocket) -> None:
        while not self._stop.is_set():
            try:
                data = sock.recv(timeout=IDLE_S)
            except CohortTimeout:
                continue
            except CohortError:
                return
            self.counters.add("received_messages")
            try:
                self.on_message(self.peer, data)
            except Exception as e:  # one bad message must not stop the link
                self.counters.add("dropped_bad_message")
                log.error("message from robot %d (%s) dropped: %s", self.peer, self.cls.name, e)

    def stop(self) -> None:
        self._stop.set()
        self._close()  # wakes the thread: a wait for the peer at once, a receive after closing
        if self._thread.ident is not None:
            self._thread.join(timeout=STOP_JOIN_S)
        self._close()  # a listener the thread opened as the flag was set

    def _close(self) -> None:
        sock = self._sock
        if sock is not None:
            sock.close()
