"""cohort.GroupSocket over loopback: each member on its own 127.0.0.x address, broadcasts to
127.255.255.255, all on one free port (as crates/cohort-net/tests/group.rs)."""

from __future__ import annotations

import asyncio
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

import cohort
from cohort import GroupSocket

SECRET = b"group test secret, 32 bytes long"
WAIT = 10.0
FAST = {"msg_t": 0.01, "fault_detect_t": 1.5, "heartbeat_t": 0.15}


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def open_member(pid: int, port: int, members: list[int] | None = None, **kw: object) -> GroupSocket:
    return GroupSocket.open(
        f"127.0.0.{pid}:{port}",
        f"127.255.255.255:{port}",
        secret=kw.pop("secret", SECRET),  # type: ignore[arg-type]
        team=7,
        pid=pid,
        members=members,
        **FAST,
        **kw,  # type: ignore[arg-type]
    )


@pytest.fixture
def group() -> Iterator[list[GroupSocket]]:
    port = free_port()
    pids = [1, 2, 3, 4]
    g = [open_member(p, port, pids) for p in pids]
    yield g
    for s in g:
        s.close()


def serve(s: GroupSocket, stop: threading.Event, handled: list[int]) -> threading.Thread:
    """Answers every request with `pid:data` until `stop`."""

    def run() -> None:
        while not stop.is_set():
            try:
                r = s.next_request(timeout=0.05)
            except cohort.TimeoutError:
                continue
            s.reply(r, b"%d:" % s.pid + r.data)
            handled.append(r.coordinator)

    t = threading.Thread(target=run)
    t.start()
    return t


def test_request_reply_reaches_every_member_once(group: list[GroupSocket]) -> None:
    coord = group[0]
    assert coord.is_coordinator and coord.coordinator == 1
    assert coord.members == [1, 2, 3, 4] and coord.state == "member"
    stop = threading.Event()
    handled: list[list[int]] = [[] for _ in group[1:]]
    servers = [serve(s, stop, h) for s, h in zip(group[1:], handled, strict=True)]
    try:
        for k in range(10):
            data = b"cmd %d" % k
            r = coord.request_reply([2, 3, 4], data, proc_t=0.02, timeout=WAIT)
            assert r.failed == []
            assert r.replies == {pid: b"%d:" % pid + data for pid in (2, 3, 4)}
            assert r.broadcasts >= 1 and r.duration_s >= 0
    finally:
        stop.set()
        for t in servers:
            t.join(WAIT)
    assert [len(h) for h in handled] == [10, 10, 10], "each member handles each request exactly once"
    assert all(c == 1 for h in handled for c in h)
    st = coord.stats()
    assert st["member"]["requests_sent"] == 10
    assert st["rejected_frames"] == 0


def test_request_then_wait_replies(group: list[GroupSocket]) -> None:
    stop = threading.Event()
    t = serve(group[1], stop, [])
    try:
        rid = group[0].request([2], b"ping")
        assert group[0].wait_replies(rid, timeout=WAIT).replies == {2: b"2:ping"}
    finally:
        stop.set()
        t.join(WAIT)


def test_a_request_knows_its_age(group: list[GroupSocket]) -> None:
    rid = group[0].request([2], b"ping", proc_t=0.2)
    req = group[1].next_request(timeout=WAIT)
    first = req.age
    threading.Event().wait(0.05)
    assert first >= 0.0 and req.age >= first + 0.05
    group[1].reply(req, b"pong")
    assert group[0].wait_replies(rid, timeout=WAIT).replies == {2: b"pong"}


@contextmanager
def serving_team(handled: list[int], **kw: object) -> Iterator[list[GroupSocket]]:
    """Members 1-3 opened with `kw`, 2 and 3 answering every request; all closed after."""
    port = free_port()
    pids = [1, 2, 3]
    g = [open_member(p, port, pids, **kw) for p in pids]
    stop = threading.Event()
    threads = [serve(s, stop, handled) for s in g[1:]]
    try:
        yield g
    finally:
        stop.set()
        for t in threads:
            t.join(WAIT)
        for s in g:
            s.close()


def test_broadcast_copies_are_sent_and_each_message_handled_once() -> None:
    handled: list[int] = []
    with serving_team(handled, broadcast_copies=2) as g:
        out = g[0].request_reply([2, 3], b"hi", timeout=WAIT)
        assert out.replies == {2: b"2:hi", 3: b"3:hi"}
        assert g[0].stats()["member"]["broadcast_copies"] >= 1
    assert handled == [1, 1], "each member handled the request once, copies or not"
    with pytest.raises(cohort.ConfigError):
        open_member(4, free_port(), [4], broadcast_copies=5)


@pytest.mark.parametrize(("learn_msg_t", "ask_again"), [(True, True), (False, False)])
def test_early_repair_members_answer_as_usual(learn_msg_t: bool, ask_again: bool) -> None:
    handled: list[int] = []
    with serving_team(handled, early_repair=True, learn_msg_t=learn_msg_t, ask_again=ask_again) as g:
        for _ in range(6):  # past the learned MsgT's warm-up (four samples)
            out = g[0].request_reply([2, 3], b"hi", timeout=WAIT)
            assert out.replies == {2: b"2:hi", 3: b"3:hi"} and out.broadcasts >= 1
        st = g[0].stats()["member"]
        assert st["requests_sent"] + st["again_sent"] >= 6 and (ask_again or st["again_sent"] == 0)
    # Whatever a learned MsgT's timers re-broadcast, each member handled each request once.
    assert handled == [1] * 12


def test_async_request_reply(group: list[GroupSocket]) -> None:
    coord, member = group[0], group[1]

    async def main() -> cohort.group.GroupReplies:
        async def answer() -> None:
            r = await member.next_request_async()
            member.reply(r, b"pong")

        server = asyncio.create_task(answer())
        replies = await coord.request_reply_async([2], b"ping", proc_t=0.02)
        await server
        return replies

    replies = asyncio.run(asyncio.wait_for(main(), WAIT))
    assert replies.replies == {2: b"pong"}


def test_join_leave_and_membership_events() -> None:
    port = free_port()
    g = [open_member(p, port, [1, 2]) for p in (1, 2)]
    joiner = open_member(5, port, incarnation=1)
    try:
        assert joiner.state == "outside"
        joined: list[list[int]] = []
        t = threading.Thread(target=lambda: joined.append(joiner.join(timeout=WAIT)))
        t.start()
        added: list[int] = []
        for _ in range(40):
            added = g[0].check_joins(0.05, timeout=WAIT)
            if added:
                break
        t.join(WAIT)
        assert added == [5]
        assert joined == [[1, 2, 5]]
        assert g[0].members == [1, 2, 5]
        kinds = []
        while True:
            try:
                ev = g[0].next_event(timeout=0.05)
            except cohort.TimeoutError:
                break
            kinds.append((ev.kind, ev.members))
        assert ("group_changed", [1, 2, 5]) in kinds

        done = threading.Event()
        t = threading.Thread(target=lambda: (joiner.leave(timeout=WAIT), done.set()))
        t.start()
        left: list[int] = []
        for _ in range(40):
            left = g[0].check_leaves(0.05, timeout=WAIT)
            if left:
                break
        t.join(WAIT)
        assert left == [5] and done.is_set()
        assert joiner.state == "outside"
        assert g[0].members == [1, 2]
        ev = joiner.next_event(timeout=WAIT)
        while ev.kind != "left":
            ev = joiner.next_event(timeout=WAIT)
        assert ev.reason == "requested"
    finally:
        for s in [*g, joiner]:
            s.close()


def test_async_join() -> None:
    port = free_port()
    coord = open_member(1, port, [1])
    joiner = open_member(3, port, incarnation=1)

    async def main() -> list[int]:
        join = asyncio.create_task(joiner.join_async())
        for _ in range(40):
            if await coord.check_joins_async(0.05):
                break
        return await join

    try:
        assert asyncio.run(asyncio.wait_for(main(), WAIT)) == [1, 3]
    finally:
        coord.close()
        joiner.close()


def test_outsider_with_another_secret_is_never_heard(group: list[GroupSocket]) -> None:
    port = group[0].local_addr[1]
    intruder = open_member(9, port, incarnation=1, secret=b"some other secret of 32 bytes!!!")
    try:
        with pytest.raises(cohort.TimeoutError):
            intruder.join(timeout=0.3)
        assert group[0].check_joins(0.1, timeout=WAIT) == []
        assert group[0].members == [1, 2, 3, 4]
        # The intruder hears the team's heartbeats but cannot read one.
        frames = intruder.stats()["frames"]
        assert frames["auth_failed"] >= 1 and frames["accepted"] == 0
    finally:
        intruder.close()


def test_wrong_role_and_bad_input_raise_typed_errors(group: list[GroupSocket]) -> None:
    with pytest.raises(cohort.StateError) as e:
        group[1].request([1], b"x")
    assert e.value.kind == "NotCoordinator"
    with pytest.raises(cohort.StateError):
        group[1].check_joins(0.01)
    with pytest.raises(cohort.MessageSizeError) as e2:
        group[0].request([2], b"x" * 5000)
    assert e2.value.kind == "BeyondOneFrame"
    outsider = open_member(6, group[0].local_addr[1], incarnation=1)
    try:
        with pytest.raises(cohort.StateError) as e3:
            outsider.leave(timeout=0.1)
        assert e3.value.kind == "NotMember"
    finally:
        outsider.close()
    with pytest.raises(cohort.TimeoutError):
        group[1].next_request(timeout=0.05)


def test_bad_configurations_are_refused() -> None:
    port = free_port()
    with pytest.raises(cohort.ConfigError):
        GroupSocket.open(f"127.0.0.1:{port}", f"127.255.255.255:{port + 1}", secret=SECRET, team=7, pid=1, members=[1])
    with pytest.raises(cohort.ConfigError):
        open_member(1, port, [1], secret=b"short")
    with pytest.raises(cohort.ConfigError) as e:
        open_member(1, port, [2, 3])
    assert e.value.kind == "Init"
    with pytest.raises(cohort.ConfigError):
        open_member(1, port, [1], incarnation=3)
    with pytest.raises(cohort.ConfigError) as e2:
        GroupSocket.open("[::1]:7400", "[::1]:7400", secret=SECRET, team=7, pid=1, members=[1])
    assert "IPv4" in str(e2.value)
    with pytest.raises(cohort.ConfigError):
        GroupSocket.open("nowhere", f"127.255.255.255:{port}", secret=SECRET, team=7, pid=1)
    with pytest.raises(cohort.ConfigError, match="start_grace"):
        open_member(1, port, [1], start_grace=-1.0)


def test_a_member_started_within_the_start_grace_keeps_the_static_team() -> None:
    """Member 1 (the coordinator) starts after the others' fault_detect_t, within their grace."""
    port = free_port()
    pids = [1, 2, 3]
    later = [open_member(p, port, pids, start_grace=3.0) for p in (2, 3)]
    try:
        threading.Event().wait(FAST["fault_detect_t"] + 0.5)
        first = open_member(1, port, pids, start_grace=3.0)
        later.append(first)
        threading.Event().wait(1.0)
        for s in later:
            assert (s.members, s.coordinator) == (pids, 1), s.pid
        assert first.is_coordinator
    finally:
        for s in later:
            s.close()


def test_a_pid_in_use_is_refused(group: list[GroupSocket]) -> None:
    port = group[0].local_addr[1]
    with pytest.raises(cohort.ConfigError) as e:
        open_member(2, port, [1, 2])
    assert e.value.kind == "PidInUse"
    assert "already in use" in str(e.value)


def test_closed_socket_raises_closed_error(group: list[GroupSocket]) -> None:
    s = group[3]
    s.close()
    assert s.closed
    with pytest.raises(cohort.ClosedError):
        s.next_request(timeout=0.01)
    with pytest.raises(cohort.ClosedError):
        _ = s.members
