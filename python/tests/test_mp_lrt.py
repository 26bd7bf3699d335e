"""cohort.MpLrtSocket: one coded connection over two loopback paths."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

import cohort
from cohort import MpLrtSocket

SECRET = b"python test secret, 32 bytes!!!!"
WAIT = 10.0


@pytest.fixture
def mp_pair() -> Iterator[tuple[MpLrtSocket, MpLrtSocket]]:
    ground = MpLrtSocket.listen(["127.0.0.1:0", "127.0.0.2:0"], secret=SECRET, team=7, sender_id=1)
    paths = [(f"{ip}:0", f"{ip}:{port}") for ip, port in ground.local_addrs]
    robot = MpLrtSocket.connect(paths, secret=SECRET, team=7, sender_id=2)
    ground.accept(timeout=WAIT)
    yield ground, robot
    robot.close()
    ground.close()


def test_messages_cross_both_paths_in_order_exactly_once(mp_pair: tuple[MpLrtSocket, MpLrtSocket]) -> None:
    ground, robot = mp_pair
    sent = [b"%d:" % i + bytes(1000) for i in range(500)]
    for m in sent:
        robot.send(m, timeout=WAIT)
    assert [ground.recv(timeout=WAIT) for _ in sent] == sent
    robot.flush(timeout=WAIT)
    assert ground.try_recv() is None
    st = robot.stats()
    assert len(st["paths"]) == 2
    assert all(p["sent"] > 0 and p["up"] for p in st["paths"]), st["paths"]
    assert [p["local"] for p in st["paths"]] == robot.local_addrs
    assert st["conn"]["messages_sent"] == 500
    # The listening end learned each path's peer address from its first datagram.
    assert ground.peer_addrs == robot.local_addrs
    assert "MpLrtSocket(" in repr(robot)


def test_asyncio_round_trip(mp_pair: tuple[MpLrtSocket, MpLrtSocket]) -> None:
    ground, robot = mp_pair

    async def go() -> bytes:
        await robot.send_async(b"async over two radios")
        return await asyncio.wait_for(ground.recv_async(), WAIT)

    assert asyncio.run(go()) == b"async over two radios"


def test_peer_close_is_seen_and_calls_after_close_are_closed_errors(
    mp_pair: tuple[MpLrtSocket, MpLrtSocket],
) -> None:
    ground, robot = mp_pair
    robot.send(b"last words")
    robot.flush(timeout=WAIT)
    robot.close()
    robot.close()
    assert robot.closed
    assert ground.recv(timeout=WAIT) == b"last words"
    with pytest.raises(cohort.ClosedError):
        ground.recv(timeout=WAIT)
    with pytest.raises(cohort.ClosedError):
        robot.send(b"after close")


@pytest.mark.parametrize(
    ("kw", "what"),
    [
        ({"scheduler": "fastest"}, "scheduler"),
        ({"tau_ms": 0.0}, "tau_ms"),
        ({"tau_ms": float("nan")}, "tau_ms"),
        ({"rate_mbps": -1.0}, "rate_mbps"),
    ],
)
def test_bad_settings_are_config_errors(kw: dict[str, object], what: str) -> None:
    with pytest.raises(cohort.ConfigError, match=what):
        MpLrtSocket.listen(["127.0.0.1:0"], secret=SECRET, team=7, sender_id=1, **kw)  # type: ignore[arg-type]


def test_bad_addresses_and_path_counts_are_config_errors() -> None:
    with pytest.raises(cohort.ConfigError):
        MpLrtSocket.listen(["not an address"], secret=SECRET, team=7, sender_id=1)
    with pytest.raises(cohort.ConfigError):
        MpLrtSocket.connect([("127.0.0.1:0", "nowhere")], secret=SECRET, team=7, sender_id=1)
    with pytest.raises(cohort.ConfigError, match="paths"):
        MpLrtSocket.listen([], secret=SECRET, team=7, sender_id=1)


def test_a_wrong_secret_never_connects() -> None:
    ground = MpLrtSocket.listen(["127.0.0.1:0"], secret=SECRET, team=7, sender_id=1)
    ((ip, port),) = ground.local_addrs
    with pytest.raises(cohort.ClosedError) as e:
        MpLrtSocket.connect(
            [("127.0.0.1:0", f"{ip}:{port}")],
            secret=b"another secret of 32 bytes!!!!!!",
            team=7,
            sender_id=2,
            handshake_timeout=0.5,
        )
    assert e.value.reason == "HandshakeTimedOut"
    ground.close()
