"""Per-path statistics shared with the team (seed 001's federated start).

A robot that ran a multipath connection knows what each of its paths (an access point, a
channel, a link) gave: MS-UCB's rounds and mean reward per path. :class:`PathStatsService`
shares that over a group of its own: every second the group's coordinator sends the team's
view to every member, and each member adopts it and answers with what it measured itself
(never what it adopted, so no figure counts twice). A robot that arrives at a path others have
used starts its scheduler from their statistics, weighted by age, instead of exploring from
scratch. It wraps the Rust ``cohort_net::federated::PathStatsService``.

Paths are named by keys the team agrees on (printable ASCII, at most 64 bytes), such as
``"ap:north-5g"``; statistics are ``(rounds, reward)`` pairs.
"""

from __future__ import annotations

from collections.abc import Sequence
from types import TracebackType

from cohort import _native
from cohort.group import GroupSocket
from cohort.lrt import MpLrtSocket

__all__ = ["PathStatsService"]

Stats = tuple[float, float]


class PathStatsService:
    """This robot's side of the sharing. Start it with :meth:`start` on a group socket
    given to it alone (it answers the group's requests itself)."""

    def __init__(self, native: _native.PathStatsService) -> None:
        self._svc = native

    @classmethod
    def start(cls, group: GroupSocket) -> PathStatsService:
        """Takes over ``group`` (a member of a static group, or one that joins later; the
        ``GroupSocket`` object reports closed from then on) and takes part in the sharing
        rounds on it."""
        return cls(_native.PathStatsService.start(group._sock))

    def publish(self, key: str, rounds: float, reward: float) -> None:
        """Records this robot's statistics of path ``key``, measured now."""
        self._svc.publish(key, rounds, reward)

    def publish_socket(self, sock: MpLrtSocket, keys: Sequence[str]) -> None:
        """Records what ``sock``'s scheduler learned of each path, path ``i`` under
        ``keys[i]`` (as many keys as the socket has paths)."""
        self._svc.publish_socket(sock._sock, list(keys))

    def own(self, key: str) -> Stats | None:
        """What this robot measured itself of ``key``, if anything."""
        return self._svc.own(key)

    def known(self, keys: Sequence[str]) -> list[Stats | None]:
        """What each of ``keys`` would start from: the team's latest view, or this robot's
        own figures where the view lacks the path (``None``: nobody knows it)."""
        return self._svc.known(list(keys))

    def wait_view(self, timeout: float) -> bool:
        """Waits up to ``timeout`` seconds until a view of the team has come (a member) or
        been gathered (the coordinator); whether one has."""
        return self._svc.wait_view(timeout)

    def start_paths(self, sock: MpLrtSocket, keys: Sequence[str]) -> list[Stats | None]:
        """Starts path ``i`` of a new ``sock`` from what is known of ``keys[i]`` (paths
        nobody knows start cold); returns what each path started from."""
        return self._svc.start_paths(sock._sock, list(keys))

    def stats(self) -> dict[str, int]:
        """Counters: ``views`` adopted (as a member), sharing ``rounds`` run and ``reports``
        gathered (as the coordinator), ``malformed`` messages dropped."""
        return self._svc.stats()

    @property
    def closed(self) -> bool:
        return self._svc.closed

    def close(self) -> None:
        """Stops the service and closes its group socket."""
        self._svc.close()

    def __enter__(self) -> PathStatsService:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
