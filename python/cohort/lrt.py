"""The coded transport (LRT): reliable, in-order messages over UDP with network coding.

:class:`LrtSocket` is one connection; both ends hold the team's secret and team id, and every
datagram is sealed with the key derived from them. :class:`LrtListener` serves one UDP port to
any number of robots (and to a robot again after it restarts), each connection an
:class:`LrtSocket`. :class:`MpLrtSocket` is one connection over several paths (a robot's every
radio). They wrap the Rust
``cohort_net::LrtSocket`` (its driver thread, its timers, real UDP). Blocking calls release the
GIL while they wait; ``*_async`` calls are awaitable on any asyncio loop.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from types import TracebackType
from typing import Any, Self

from cohort import _aio, _native

__all__ = ["LrtListener", "LrtSocket", "MpLrtSocket"]


class _Coded:
    """What every coded connection offers: messages in order, blocking and async."""

    _sock: _native.LrtSocket | _native.MpLrtSocket

    def __init__(self, native: _native.LrtSocket | _native.MpLrtSocket) -> None:
        self._sock = native
        # Messages an async receive took from the socket for a task that was cancelled in
        # the same instant: the next receive returns them first.
        self._kept: deque[bytes] = deque()

    def accept(self, timeout: float | None = None) -> Self:
        """Waits (up to ``timeout`` seconds, or forever) until a peer has connected to this
        listening socket; returns the socket itself."""
        self._sock.wait_connected(timeout)
        return self

    def wait_connected(self, timeout: float | None = None) -> None:
        """Waits until the handshake is done (see :meth:`accept`)."""
        self._sock.wait_connected(timeout)

    def send(self, data: bytes | bytearray, timeout: float | None = None) -> None:
        """Queues one message (1 byte to 16 MiB), waiting while the send buffer is full.

        Returning means queued, not delivered: :meth:`flush` waits for the peer.
        """
        self._sock.send(data, timeout)

    def recv(self, timeout: float | None = None) -> bytes:
        """The next message, waiting up to ``timeout`` seconds (forever with ``None``).

        Raises :class:`~cohort.errors.TimeoutError` when none came in time.
        """
        if self._kept:
            return self._kept.popleft()
        return self._sock.recv(timeout)

    def try_recv(self) -> bytes | None:
        """The next message if one is waiting, else ``None``."""
        if self._kept:
            return self._kept.popleft()
        return self._sock.try_recv()

    def flush(self, timeout: float | None = None) -> None:
        """Waits until the peer has acknowledged everything sent so far."""
        self._sock.flush(timeout)

    async def send_async(self, data: bytes | bytearray) -> None:
        """Async :meth:`send`: resolves once the message is queued."""
        await _aio.run(self._sock.send_op(bytes(data)))

    async def recv_async(self) -> bytes:
        """Async :meth:`recv`. Cancelling it (``asyncio.wait_for``, a task's ``cancel``) loses
        no message: one taken at the moment of cancellation is returned by the next receive."""
        if self._kept:
            return self._kept.popleft()
        data: bytes = await _aio.run(self._sock.recv_op(), self._kept.appendleft)
        return data

    def stats(self) -> dict[str, Any]:
        """Counters: datagrams, rejected frames by reason (``frames``), the session key
        exchange (``keys``), and the connection's own (``conn``: symbols, repairs,
        acknowledgements, loss estimate, smoothed RTT)."""
        return self._sock.stats()

    @property
    def closed(self) -> bool:
        return self._sock.closed

    def close(self) -> None:
        """Closes the connection (the peer is told). Queued messages are not sent: call
        :meth:`flush` first. Closing twice does nothing."""
        self._sock.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


class LrtSocket(_Coded):
    """One LRT connection. Open it with :meth:`listen` (then :meth:`accept`) or :meth:`connect`.

    >>> server = LrtSocket.listen("127.0.0.1:0", secret=b"k" * 32, team=1, sender_id=1)
    >>> host, port = server.local_addr
    >>> client = LrtSocket.connect(f"{host}:{port}", secret=b"k" * 32, team=1, sender_id=2)
    >>> _ = server.accept(timeout=5)
    >>> client.send(b"hello")
    >>> server.recv(timeout=5)
    b'hello'
    >>> client.close(); server.close()
    """

    _sock: _native.LrtSocket

    def __init__(self, native: _native.LrtSocket) -> None:
        super().__init__(native)

    @classmethod
    def listen(
        cls,
        addr: str,
        *,
        secret: bytes,
        team: int,
        sender_id: int,
        dscp: int | None = None,
        priority: int | None = None,
        handshake_timeout: float = 5.0,
        idle_timeout: float = 10.0,
        rate_mbps: float | None = None,
        estimate_rate: bool = False,
    ) -> LrtSocket:
        """Binds ``addr`` (``"ip:port"``, port 0 for any) and returns at once; the first peer
        whose handshake authenticates connects it (see :meth:`accept`).

        ``dscp`` marks outgoing datagrams (46, EF, puts them on Wi-Fi's AC_VO); ``priority``
        sets ``SO_PRIORITY``. ``idle_timeout`` seconds without an authenticated packet from
        the peer close the connection. ``rate_mbps`` is the link's rate (LRT paces at 0.9 of
        it; default 100); with ``estimate_rate`` LRT measures the available bandwidth instead
        and paces at 0.9 of it, backing off when a queue builds, never above ``rate_mbps``.
        """
        return cls(
            _native.LrtSocket.listen(
                addr,
                secret=secret,
                team=team,
                sender_id=sender_id,
                dscp=dscp,
                priority=priority,
                handshake_timeout=handshake_timeout,
                idle_timeout=idle_timeout,
                rate_mbps=rate_mbps,
                estimate_rate=estimate_rate,
            )
        )

    @classmethod
    def connect(
        cls,
        addr: str,
        *,
        secret: bytes,
        team: int,
        sender_id: int,
        dscp: int | None = None,
        priority: int | None = None,
        handshake_timeout: float = 5.0,
        idle_timeout: float = 10.0,
        rate_mbps: float | None = None,
        estimate_rate: bool = False,
    ) -> LrtSocket:
        """Connects to the listener at ``addr`` and waits for the handshake.

        Raises :class:`~cohort.errors.ClosedError` with ``reason == "HandshakeTimedOut"`` when
        nothing answered within ``handshake_timeout`` seconds: no listener there, or one with
        another secret or team id (its datagrams fail authentication and are dropped).
        """
        return cls(
            _native.LrtSocket.connect(
                addr,
                secret=secret,
                team=team,
                sender_id=sender_id,
                dscp=dscp,
                priority=priority,
                handshake_timeout=handshake_timeout,
                idle_timeout=idle_timeout,
                rate_mbps=rate_mbps,
                estimate_rate=estimate_rate,
            )
        )

    @property
    def local_addr(self) -> tuple[str, int]:
        """The bound address, ``(ip, port)``."""
        return self._sock.local_addr

    @property
    def peer_addr(self) -> tuple[str, int] | None:
        """The peer's address, once known."""
        return self._sock.peer_addr

    def __repr__(self) -> str:
        state = "closed" if self.closed else f"peer={self.peer_addr}"
        return f"LrtSocket(local={self.local_addr}, {state})"


class MpLrtSocket(_Coded):
    """One coded connection over several paths: a robot's every radio (seed 001's scheduler:
    MS-UCB super-arms, delay balancing, LD-MPSP windows with a queueing-delay target, cloning;
    a path that fails costs a repair, not a stall). Path ``i`` joins local address ``i`` to
    the peer's address ``i``; the listening end binds its addresses in the same order.

    >>> ground = MpLrtSocket.listen(["127.0.0.1:0", "127.0.0.2:0"], secret=b"k" * 32, team=1, sender_id=1)
    >>> (a, pa), (b, pb) = ground.local_addrs
    >>> paths = [("127.0.0.1:0", f"{a}:{pa}"), ("127.0.0.2:0", f"{b}:{pb}")]
    >>> robot = MpLrtSocket.connect(paths, secret=b"k" * 32, team=1, sender_id=2)
    >>> _ = ground.accept(timeout=5)
    >>> for i in range(200): robot.send(b"frame %d" % i)
    >>> [ground.recv(timeout=5) for _ in range(200)][-1]
    b'frame 199'
    >>> robot.flush(timeout=5)
    >>> sum(1 for p in robot.stats()["paths"] if p["sent"] > 0)
    2
    >>> robot.close(); ground.close()
    """

    _sock: _native.MpLrtSocket

    def __init__(self, native: _native.MpLrtSocket) -> None:
        super().__init__(native)

    @classmethod
    def connect(
        cls,
        paths: Sequence[tuple[str, str]],
        *,
        secret: bytes,
        team: int,
        sender_id: int,
        scheduler: str = "ldmpsp",
        tau_ms: float = 20.0,
        super_arm: int = 0,
        **options: Any,
    ) -> MpLrtSocket:
        """Connects over ``paths`` (``(local, peer)`` address pairs, ``"ip:port"`` each, port
        0 locally for any; path 0 carries the key exchange) and waits for the handshake.

        ``scheduler`` is ``"ldmpsp"`` (seed 001; ``tau_ms`` bounds the delay 95% of packets
        meet above the fastest path's), or MPTCP's default ``"minrtt"``, or ``"roundrobin"``;
        ``super_arm`` paths are used each round (0: all). ``options`` are
        :meth:`LrtSocket.connect`'s (``dscp``, ``priority``, ``handshake_timeout``,
        ``idle_timeout``, ``rate_mbps``, ``estimate_rate``).
        """
        return cls(
            _native.MpLrtSocket.connect(
                list(paths),
                secret=secret,
                team=team,
                sender_id=sender_id,
                scheduler=scheduler,
                tau_ms=tau_ms,
                super_arm=super_arm,
                **options,
            )
        )

    @classmethod
    def listen(
        cls,
        addrs: Sequence[str],
        *,
        secret: bytes,
        team: int,
        sender_id: int,
        scheduler: str = "ldmpsp",
        tau_ms: float = 20.0,
        super_arm: int = 0,
        **options: Any,
    ) -> MpLrtSocket:
        """Binds ``addrs`` (path ``i`` on address ``i``) and returns at once; a peer's key
        exchange on path 0 connects it (see :meth:`accept`). Each path's peer address is
        learned from its first authentic datagram. Options as :meth:`connect`."""
        return cls(
            _native.MpLrtSocket.listen(
                list(addrs),
                secret=secret,
                team=team,
                sender_id=sender_id,
                scheduler=scheduler,
                tau_ms=tau_ms,
                super_arm=super_arm,
                **options,
            )
        )

    def stats(self) -> dict[str, Any]:
        """:meth:`LrtSocket.stats`'s counters, the multipath layer's (``rounds``,
        ``clones_dropped``, ...) and ``paths``: per path its addresses, whether it is up,
        datagrams and bytes sent, clones, deliveries and losses, window, smoothed RTT,
        queueing delay, loss rate, failures and the bandit's ``arm_rounds``/``arm_reward``."""
        return self._sock.stats()

    @property
    def local_addrs(self) -> list[tuple[str, int]]:
        """Each path's bound address, ``(ip, port)``."""
        return self._sock.local_addrs

    @property
    def peer_addrs(self) -> list[tuple[str, int] | None]:
        """Each path's peer address, once known."""
        return self._sock.peer_addrs

    def __repr__(self) -> str:
        state = "closed" if self.closed else f"peers={self.peer_addrs}"
        return f"MpLrtSocket(local={self.local_addrs}, {state})"


class LrtListener:
    """Accepts LRT connections from many robots on one UDP port; each :meth:`accept` returns
    one :class:`LrtSocket`. A robot that restarts connects again as a new connection; at most
    ``max_connections`` are open at once (later peers are refused and counted).

    >>> ground = LrtListener.bind("127.0.0.1:0", secret=b"k" * 32, team=1, sender_id=1)
    >>> host, port = ground.local_addr
    >>> robots = [LrtSocket.connect(f"{host}:{port}", secret=b"k" * 32, team=1, sender_id=i) for i in (2, 3)]
    >>> conns = [ground.accept(timeout=5) for _ in robots]
    >>> for i, r in zip((2, 3), robots): r.send(b"robot %d" % i)
    >>> sorted(c.recv(timeout=5) for c in conns)
    [b'robot 2', b'robot 3']
    >>> ground.stats()["open"]
    2
    >>> for r in robots: r.close()
    >>> ground.close()
    """

    def __init__(self, native: _native.LrtListener) -> None:
        self._l = native

    @classmethod
    def bind(
        cls,
        addr: str,
        *,
        secret: bytes,
        team: int,
        sender_id: int,
        dscp: int | None = None,
        priority: int | None = None,
        handshake_timeout: float = 5.0,
        idle_timeout: float = 10.0,
        rate_mbps: float | None = None,
        estimate_rate: bool = False,
        max_connections: int = 256,
    ) -> LrtListener:
        """Binds ``addr`` (``"ip:port"``) and serves it; the options are
        :meth:`LrtSocket.listen`'s, for every connection of the port."""
        return cls(
            _native.LrtListener.bind(
                addr,
                secret=secret,
                team=team,
                sender_id=sender_id,
                dscp=dscp,
                priority=priority,
                handshake_timeout=handshake_timeout,
                idle_timeout=idle_timeout,
                rate_mbps=rate_mbps,
                estimate_rate=estimate_rate,
                max_connections=max_connections,
            )
        )

    def accept(self, timeout: float | None = None) -> LrtSocket:
        """The next connection, waiting up to ``timeout`` seconds (forever with ``None``);
        :class:`cohort.TimeoutError` when none came."""
        return LrtSocket(self._l.accept(timeout))

    def stats(self) -> dict[str, Any]:
        """``connections``, ``ended``, ``unrouted`` (datagrams for no connection: stale or
        forged), ``refused`` (beyond ``max_connections``), ``datagrams_received``, ``open``."""
        return self._l.stats()

    @property
    def local_addr(self) -> tuple[str, int]:
        return self._l.local_addr

    @property
    def closed(self) -> bool:
        return self._l.closed

    def close(self) -> None:
        """Closes every connection of the port (their peers are told) and stops serving it.
        Closing twice does nothing."""
        self._l.close()

    def __enter__(self) -> LrtListener:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"LrtListener(local={self.local_addr}, {'closed' if self.closed else 'open'})"
