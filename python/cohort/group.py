"""Group request-reply (GCBRR): one command to many robots, replies in contention-free slots.

:class:`GroupSocket` is one member of a team's group over UDP broadcast (a subnet broadcast
address) or IPv4 multicast. Every member uses the team's port; each binds its own address on
it. The coordinator (the smallest pid of a static group, or whoever the election picks) issues
requests; every addressed member answers exactly once, in its own slot. Members join and
leave through the coordinator's join and leave polls. It wraps the Rust
``cohort_net::GroupSocket``; blocking calls release the GIL, ``*_async`` calls are awaitable.
"""

from __future__ import annotations

from collections.abc import Iterable
from types import TracebackType
from typing import Any

from cohort import _aio, _native
from cohort._native import GroupEvent, GroupReplies, GroupRequest

__all__ = ["GroupEvent", "GroupReplies", "GroupRequest", "GroupSocket"]


class GroupSocket:
    """One member of a GCBRR group. Open it with :meth:`open`."""

    def __init__(self, native: _native.GroupSocket) -> None:
        self._sock = native

    @classmethod
    def open(
        cls,
        local: str,
        broadcast: str,
        *,
        secret: bytes,
        team: int,
        pid: int,
        members: Iterable[int] | None = None,
        incarnation: int | None = None,
        dscp: int | None = None,
        allow_fragmentation: bool = False,
        msg_t: float = 0.03,
        fault_detect_t: float = 1.0,
        heartbeat_t: float = 0.25,
        max_payload: int = 60000,
        start_grace: float = 0.0,
        early_repair: bool = True,
        broadcast_copies: int = 1,
        slot_lead: float = 0.002,
        learn_msg_t: bool = True,
        ask_again: bool = True,
    ) -> GroupSocket:
        """Binds ``local`` (``"ip:port"``, this member's address on the team's port) and the
        team's ``broadcast`` address (same port), and starts the member.

        With ``members`` (pids, including ``pid``) it is a member of that static group at
        once: for the first start of a team. Without, it starts outside and :meth:`join`
        joins; ``incarnation`` (default: the wall clock in seconds) must exceed every earlier
        life of this pid. ``secret`` (at least 16 bytes) and ``team`` must match the others'.
        ``msg_t``, ``fault_detect_t`` and ``heartbeat_t`` (seconds) are the protocol's timing;
        ``start_grace`` (seconds, static group only) gives the other members that long more
        before they are suspected, for a team whose members do not all start at once;
        ``early_repair`` (on by default) makes a coordinator ask the members still missing again
        as soon as their slots have passed, not at the round's deadline, waiting a slack more
        once answers have overtaken such repairs, while that saves airtime (``False``: Alg. 2
        as written);
        ``broadcast_copies`` (1 to 4) sends every broadcast that many times back to back, as
        802.11 never retries a broadcast (for a channel shared with bulk traffic);
        ``slot_lead`` (seconds; 0: off) lets the member two slots after an answer it overhears
        send that long after it, behind the answer in between, instead of waiting to hear it;
        ``learn_msg_t`` (on by default) times a request round's waits by the spacing of the
        answers heard so far (never longer than ``msg_t``), so a lost request or answer costs
        the silence this channel needs, not ``msg_t``'s (``False``: ``msg_t`` throughout);
        ``ask_again`` (on by default) lets each reply name the members whose replies its
        sender overheard, and a coordinator whose missing members were all named asks them
        again without the request's data (``False``: every repair re-sends the request).
        """
        return cls(
            _native.GroupSocket.open(
                local,
                broadcast,
                secret=secret,
                team=team,
                pid=pid,
                members=None if members is None else list(members),
                incarnation=incarnation,
                dscp=dscp,
                allow_fragmentation=allow_fragmentation,
                msg_t=msg_t,
                fault_detect_t=fault_detect_t,
                heartbeat_t=heartbeat_t,
                max_payload=max_payload,
                start_grace=start_grace,
                early_repair=early_repair,
                broadcast_copies=broadcast_copies,
                slot_lead=slot_lead,
                learn_msg_t=learn_msg_t,
                ask_again=ask_again,
            )
        )

    # Request-reply, the coordinator's side.

    def request(self, pids: Iterable[int], data: bytes, proc_t: float = 0.0) -> int:
        """Issues a request to the members among ``pids`` (coordinator only) and returns its
        id for :meth:`wait_replies`. ``proc_t`` is how long a member takes to answer."""
        return self._sock.start_request(list(pids), data, proc_t)

    def wait_replies(self, request_id: int, timeout: float | None = None) -> GroupReplies:
        """Waits for the outcome of request ``request_id``: every addressed member answered
        or failed."""
        return self._sock.wait_replies(request_id, timeout)

    def request_reply(
        self, pids: Iterable[int], data: bytes, proc_t: float = 0.0, timeout: float | None = None
    ) -> GroupReplies:
        """:meth:`request` and :meth:`wait_replies` in one call."""
        return self.wait_replies(self.request(pids, data, proc_t), timeout)

    async def request_reply_async(self, pids: Iterable[int], data: bytes, proc_t: float = 0.0) -> GroupReplies:
        """Async :meth:`request_reply`."""
        replies: GroupReplies = await _aio.run(self._sock.request_reply_op(list(pids), bytes(data), proc_t))
        return replies

    # Request-reply, the members' side.

    def next_request(self, timeout: float | None = None) -> GroupRequest:
        """The next request addressed to this member; answer it with :meth:`reply`."""
        return self._sock.next_request(timeout)

    async def next_request_async(self) -> GroupRequest:
        """Async :meth:`next_request`."""
        request: GroupRequest = await _aio.run(self._sock.next_request_op())
        return request

    def reply(self, request: GroupRequest, data: bytes) -> None:
        """Answers ``request``; the reply goes out in this member's slot."""
        self._sock.reply(request, data)

    # Membership.

    def join(self, timeout: float | None = None) -> list[int]:
        """Asks to join and waits for the coordinator's join poll; returns the members. On
        timeout the member stays ``joining``: call again to keep waiting."""
        return self._sock.join(timeout)

    async def join_async(self) -> list[int]:
        members: list[int] = await _aio.run(self._sock.join_op())
        return members

    def leave(self, timeout: float | None = None) -> None:
        """Asks to leave and waits until the coordinator's leave poll let this member go."""
        self._sock.leave(timeout)

    async def leave_async(self) -> None:
        await _aio.run(self._sock.leave_op())

    def check_joins(self, join_t: float, timeout: float | None = None) -> list[int]:
        """One join poll (coordinator only), open ``join_t`` seconds; returns the pids admitted."""
        return self._sock.check_joins(join_t, timeout)

    async def check_joins_async(self, join_t: float) -> list[int]:
        added: list[int] = await _aio.run(self._sock.check_joins_op(join_t))
        return added

    def check_leaves(self, leave_t: float, timeout: float | None = None) -> list[int]:
        """One leave poll (coordinator only), open ``leave_t`` seconds; returns the pids that left."""
        return self._sock.check_leaves(leave_t, timeout)

    async def check_leaves_async(self, leave_t: float) -> list[int]:
        left: list[int] = await _aio.run(self._sock.check_leaves_op(leave_t))
        return left

    def next_event(self, timeout: float | None = None) -> GroupEvent:
        """The next membership event (``became_coordinator``, ``group_changed``, ``joined``,
        ``left``, ``removed``)."""
        return self._sock.next_event(timeout)

    async def next_event_async(self) -> GroupEvent:
        event: GroupEvent = await _aio.run(self._sock.next_event_op())
        return event

    # State.

    @property
    def pid(self) -> int:
        return self._sock.pid

    @property
    def local_addr(self) -> tuple[str, int]:
        return self._sock.local_addr

    @property
    def state(self) -> str:
        """``member``, ``joining``, ``leaving`` or ``outside``."""
        return self._sock.state

    @property
    def coordinator(self) -> int | None:
        """The coordinator's pid, as this member sees it."""
        return self._sock.coordinator

    @property
    def is_coordinator(self) -> bool:
        return self._sock.is_coordinator

    @property
    def members(self) -> list[int]:
        """The members of this process's view, by pid."""
        return self._sock.members

    @property
    def closed(self) -> bool:
        return self._sock.closed

    def stats(self) -> dict[str, Any]:
        """Counters: datagrams, rejected frames by reason (``frames``), and the member's own
        (``member``: requests, replies, polls, heartbeats, suspicions)."""
        return self._sock.stats()

    def close(self) -> None:
        """Stops the member without telling the others (their fault detectors notice);
        :meth:`leave` first to depart cleanly. Closing twice does nothing."""
        self._sock.close()

    def __enter__(self) -> GroupSocket:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        if self.closed:
            return f"GroupSocket(pid={self.pid}, closed)"
        return f"GroupSocket(pid={self.pid}, state={self.state!r}, members={self.members})"
