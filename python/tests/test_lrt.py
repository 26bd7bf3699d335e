"""cohort.LrtSocket over loopback: the real Rust sockets, real UDP, the team key on every datagram."""

from __future__ import annotations

import asyncio
import contextlib
import doctest
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator

import pytest

import cohort
import cohort.lrt
from cohort import LrtListener, LrtSocket

SECRET = b"python test secret, 32 bytes!!!!"
WAIT = 10.0


def _pair(**kw: object) -> tuple[LrtSocket, LrtSocket]:
    server = LrtSocket.listen("127.0.0.1:0", secret=SECRET, team=7, sender_id=1, **kw)  # type: ignore[arg-type]
    host, port = server.local_addr
    client = LrtSocket.connect(f"{host}:{port}", secret=SECRET, team=7, sender_id=2, **kw)  # type: ignore[arg-type]
    server.accept(timeout=WAIT)
    return server, client


@pytest.fixture
def pair() -> Iterator[tuple[LrtSocket, LrtSocket]]:
    server, client = _pair()
    yield server, client
    client.close()
    server.close()


def test_round_trip_in_order_exactly_once(pair: tuple[LrtSocket, LrtSocket]) -> None:
    server, client = pair
    # Small messages, and large ones that span many coded symbols.
    sent = [f"msg {i}".encode() * (1 + (i % 7) * 300) for i in range(300)]
    for m in sent:
        client.send(m)
    got = [server.recv(timeout=WAIT) for _ in sent]
    assert got == sent
    client.flush(timeout=WAIT)
    assert server.try_recv() is None, "nothing delivered twice"
    # And back the other way.
    server.send(b"ack")
    assert client.recv(timeout=WAIT) == b"ack"
    stats = client.stats()
    assert stats["conn"]["messages_sent"] == len(sent)
    assert server.stats()["conn"]["messages_received"] == len(sent)
    assert stats["rejected_frames"] == 0
    assert stats["keys"]["handshakes_sent"] >= 1, "the session key exchange ran"
    # The client binds the wildcard address; the server saw it from loopback.
    assert server.peer_addr == ("127.0.0.1", client.local_addr[1])


def test_send_accepts_bytearray_and_context_manager_closes() -> None:
    server, client = _pair()
    with server, client:
        client.send(bytearray(b"from a bytearray"))
        assert server.recv(timeout=WAIT) == b"from a bytearray"
    assert server.closed and client.closed
    client.close()  # twice is fine


def test_asyncio_round_trip(pair: tuple[LrtSocket, LrtSocket]) -> None:
    server, client = pair

    async def main() -> list[bytes]:
        async def receive() -> list[bytes]:
            return [await server.recv_async() for _ in range(200)]

        task = asyncio.create_task(receive())
        for i in range(200):
            await client.send_async(b"async %d" % i)
        return await asyncio.wait_for(task, WAIT)

    assert asyncio.run(main()) == [b"async %d" % i for i in range(200)]


def test_cancelled_async_receives_lose_nothing(pair: tuple[LrtSocket, LrtSocket]) -> None:
    """Receives cut short by asyncio timeouts while messages stream in: each message still
    arrives once, in order."""
    server, client = pair
    n = 300

    async def main() -> list[bytes]:
        got: list[bytes] = []

        async def send() -> None:
            for i in range(n):
                await client.send_async(b"%d" % i)
                if i % 10 == 0:
                    await asyncio.sleep(0.001)

        sender = asyncio.create_task(send())
        while len(got) < n:
            with contextlib.suppress(TimeoutError):
                got.append(await asyncio.wait_for(server.recv_async(), 0.0005))
        await sender
        return got

    assert asyncio.run(asyncio.wait_for(main(), 60)) == [b"%d" % i for i in range(n)]


def test_recv_timeout_raises_timeout_error(pair: tuple[LrtSocket, LrtSocket]) -> None:
    server, _ = pair
    with pytest.raises(cohort.TimeoutError) as e:
        server.recv(timeout=0.05)
    assert e.value.kind == "TimedOut"
    assert isinstance(e.value, TimeoutError), "also the built-in TimeoutError"
    assert isinstance(e.value, cohort.CohortError)


def test_blocking_recv_releases_the_gil(pair: tuple[LrtSocket, LrtSocket]) -> None:
    """A thread waits in recv() with no timeout while this thread runs Python and sends."""
    server, client = pair
    got: list[bytes] = []
    t = threading.Thread(target=lambda: got.append(server.recv()))
    t.start()
    total = sum(i * i for i in range(200_000))  # Python work while the other thread waits
    client.send(b"wake up")
    t.join(WAIT)
    assert not t.is_alive()
    assert got == [b"wake up"]
    assert total > 0


def assert_ctrl_c_ends(code: str, settle_s: float = 0.0) -> None:
    """Runs ``code`` in a child Python, which prints ``ready`` just before its blocking call;
    ``settle_s`` later, SIGINT must end it with ``KeyboardInterrupt`` within WAIT seconds."""
    p = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert p.stdout is not None and p.stdout.readline() == "ready\n"
        time.sleep(settle_s)
        p.send_signal(signal.SIGINT)
        _, err = p.communicate(timeout=WAIT)
    finally:
        p.kill()
        p.wait()
    assert p.returncode != 0
    assert "KeyboardInterrupt" in err


def test_ctrl_c_interrupts_a_recv_that_waits_forever() -> None:
    assert_ctrl_c_ends(
        "import cohort\n"
        "s = cohort.LrtSocket.listen('127.0.0.1:0', secret=b'k' * 32, team=1, sender_id=1)\n"
        "print('ready', flush=True)\n"
        "s.recv()\n"
    )


SILENT_PEER = (
    "import socket, cohort\n"
    "silent = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
    "silent.bind(('127.0.0.1', 0))\n"
    "peer = '127.0.0.1:%d' % silent.getsockname()[1]\n"
    "keys = dict(secret=b'k' * 32, team=1, sender_id=1, handshake_timeout=300)\n"
    "print('ready', flush=True)\n"
)


@pytest.mark.parametrize(
    "connect",
    ["cohort.LrtSocket.connect(peer, **keys)", "cohort.MpLrtSocket.connect([('127.0.0.1:0', peer)], **keys)"],
)
def test_ctrl_c_interrupts_a_connect_to_a_peer_that_never_answers(connect: str) -> None:
    # 0.5 s in, the child is inside the handshake, which would last 300 s.
    assert_ctrl_c_ends(SILENT_PEER + connect + "\n", settle_s=0.5)


def test_close_ends_a_blocked_recv_with_closed_error() -> None:
    server, client = _pair()
    errors: list[BaseException] = []

    def wait() -> None:
        try:
            server.recv()
        except cohort.CohortError as e:
            errors.append(e)

    t = threading.Thread(target=wait)
    t.start()
    server.close()
    t.join(WAIT)
    client.close()
    assert not t.is_alive()
    assert len(errors) == 1 and isinstance(errors[0], cohort.ClosedError)
    with pytest.raises(cohort.ClosedError):
        server.send(b"x")


def test_peer_close_is_seen(pair: tuple[LrtSocket, LrtSocket]) -> None:
    server, client = pair
    client.send(b"last words")
    client.flush(timeout=WAIT)
    client.close()
    assert server.recv(timeout=WAIT) == b"last words"
    with pytest.raises(cohort.ClosedError) as e:
        server.recv(timeout=WAIT)
    assert e.value.reason == "Peer"


def test_wrong_secret_never_connects() -> None:
    server = LrtSocket.listen("127.0.0.1:0", secret=SECRET, team=7, sender_id=1)
    host, port = server.local_addr
    with pytest.raises(cohort.ClosedError) as e:
        LrtSocket.connect(
            f"{host}:{port}", secret=b"another secret of 32 bytes......", team=7, sender_id=2, handshake_timeout=0.5
        )
    assert e.value.reason == "HandshakeTimedOut"
    assert "secret" in str(e.value)
    # The listener dropped every forged hello at authentication and is still waiting.
    with pytest.raises(cohort.TimeoutError):
        server.accept(timeout=0.1)
    frames = server.stats()["frames"]
    assert frames["auth_failed"] >= 1 and frames["accepted"] == 0
    server.close()


def test_wrong_team_never_connects() -> None:
    server = LrtSocket.listen("127.0.0.1:0", secret=SECRET, team=7, sender_id=1)
    host, port = server.local_addr
    with pytest.raises(cohort.ClosedError):
        LrtSocket.connect(f"{host}:{port}", secret=SECRET, team=8, sender_id=2, handshake_timeout=0.3)
    assert server.stats()["frames"]["accepted"] == 0
    server.close()


@pytest.mark.parametrize("addr", ["nope", "127.0.0.1", "127.0.0.1:99999", "", "1.2.3.4.5:80"])
def test_bad_address_is_a_config_error(addr: str) -> None:
    with pytest.raises(cohort.ConfigError) as e:
        LrtSocket.listen(addr, secret=SECRET, team=1, sender_id=1)
    assert e.value.kind == "Address"
    assert isinstance(e.value, ValueError)
    with pytest.raises(cohort.ConfigError):
        LrtSocket.connect(addr, secret=SECRET, team=1, sender_id=1)


def test_the_bandwidth_estimator_carries_messages_and_reports_its_rate() -> None:
    server, client = _pair(estimate_rate=True, rate_mbps=50.0)
    for i in range(200):
        client.send(i.to_bytes(4, "big") * 100)
    got = [server.recv(timeout=WAIT) for _ in range(200)]
    assert got == [i.to_bytes(4, "big") * 100 for i in range(200)]
    conn = client.stats()["conn"]
    assert 0 < conn["rate_bps"] <= 45_000_000, conn  # the estimator's rate, capped at 0.9 x 50
    client.close()
    server.close()


@pytest.mark.parametrize("rate", [0.0, -1.0, float("nan"), float("inf")])
def test_a_bad_rate_is_a_config_error(rate: float) -> None:
    with pytest.raises(cohort.ConfigError) as e:
        LrtSocket.listen("127.0.0.1:0", secret=SECRET, team=1, sender_id=1, rate_mbps=rate)
    assert "rate_mbps" in str(e.value)


def test_bad_configuration_is_refused() -> None:
    with pytest.raises(cohort.ConfigError):
        LrtSocket.listen("127.0.0.1:0", secret=SECRET, team=1, sender_id=1, dscp=64)
    with pytest.raises(cohort.ConfigError):
        LrtSocket.listen("127.0.0.1:0", secret=SECRET, team=1, sender_id=1, handshake_timeout=-1.0)
    with pytest.raises(cohort.ConfigError):
        LrtSocket.listen("127.0.0.1:0", secret=b"short", team=1, sender_id=1)
    with pytest.raises(TypeError):
        LrtSocket.listen("127.0.0.1:0", secret="not bytes", team=1, sender_id=1)  # type: ignore[arg-type]
    with pytest.raises(OverflowError):
        LrtSocket.listen("127.0.0.1:0", secret=SECRET, team=-1, sender_id=1)


def test_bad_calls_raise_typed_errors(pair: tuple[LrtSocket, LrtSocket]) -> None:
    server, client = pair
    with pytest.raises(cohort.MessageSizeError) as e:
        client.send(b"")
    assert e.value.kind == "MessageSize"
    with pytest.raises(cohort.ConfigError) as e2:
        server.recv(timeout=float("nan"))
    assert e2.value.kind == "Timeout"


def test_address_in_use_is_an_io_error(pair: tuple[LrtSocket, LrtSocket]) -> None:
    server, _ = pair
    host, port = server.local_addr
    with pytest.raises(cohort.IoError) as e:
        LrtSocket.listen(f"{host}:{port}", secret=SECRET, team=7, sender_id=3)
    assert isinstance(e.value, OSError) and e.value.errno is not None


def test_docstring_example_runs() -> None:
    assert doctest.testmod(cohort.lrt, raise_on_error=True).attempted > 0


def test_a_receive_cancelled_after_it_took_a_message_keeps_it(pair: tuple[LrtSocket, LrtSocket]) -> None:
    """The one window where a cancelled task would lose a message: the loop's poll took it and
    resolved the task's future, and the task is cancelled before it resumed. The next receive
    gets the message, in order."""
    from cohort import _aio

    server, client = pair

    async def main() -> None:
        task = asyncio.create_task(server.recv_async())
        await asyncio.sleep(0)  # the task polled once and waits
        bridge = _aio._bridges[asyncio.get_running_loop()]
        assert len(bridge.waiting) == 1
        client.send(b"first")
        client.send(b"second")
        # Runs until the bridge's poll took the message and resolved the task's future; the
        # task's resumption is queued behind this coroutine's.
        while not all(fut.done() for _, fut in bridge.waiting.values()):
            await asyncio.sleep(0)
        assert not task.done()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert await server.recv_async() == b"first"
        assert await server.recv_async() == b"second"

    asyncio.run(asyncio.wait_for(main(), WAIT))


def test_a_listener_serves_many_robots_and_a_restarted_one_again() -> None:
    with LrtListener.bind("127.0.0.1:0", secret=SECRET, team=7, sender_id=1) as ground:
        host, port = ground.local_addr
        robots = {i: LrtSocket.connect(f"{host}:{port}", secret=SECRET, team=7, sender_id=i) for i in (2, 3, 4)}
        conns = [ground.accept(timeout=WAIT) for _ in robots]
        for i, r in robots.items():
            for k in range(20):
                r.send(b"%d:%d" % (i, k))
        # Each connection carries exactly one robot's messages, in order.
        got = {}
        for c in conns:
            msgs = [c.recv(timeout=WAIT) for _ in range(20)]
            sender = msgs[0].split(b":")[0]
            assert msgs == [b"%s:%d" % (sender, k) for k in range(20)]
            got[sender] = c
        assert sorted(got) == [b"2", b"3", b"4"]
        # A reply goes back to the robot that sent.
        got[b"3"].send(b"ack 3")
        assert robots[3].recv(timeout=WAIT) == b"ack 3"
        # Robot 2 restarts (a new socket, the same id): a new connection on the same port.
        robots[2].close()
        robots[2] = LrtSocket.connect(f"{host}:{port}", secret=SECRET, team=7, sender_id=2)
        again = ground.accept(timeout=WAIT)
        robots[2].send(b"back")
        assert again.recv(timeout=WAIT) == b"back"
        assert ground.stats()["connections"] == 4
        for r in robots.values():
            r.close()
    assert ground.closed
    with pytest.raises(cohort.ClosedError):
        ground.accept(timeout=0.1)


def test_a_listener_refuses_beyond_its_bound_and_times_out_an_empty_accept() -> None:
    with LrtListener.bind("127.0.0.1:0", secret=SECRET, team=7, sender_id=1, max_connections=1) as ground:
        with pytest.raises(cohort.TimeoutError):
            ground.accept(timeout=0.2)
        host, port = ground.local_addr
        first = LrtSocket.connect(f"{host}:{port}", secret=SECRET, team=7, sender_id=2)
        # Held: dropping an accepted connection closes it, and frees its place.
        conn = ground.accept(timeout=WAIT)
        # A second robot beyond the bound gets no answer: its connect fails, the port counts it.
        with pytest.raises(cohort.ClosedError):
            LrtSocket.connect(f"{host}:{port}", secret=SECRET, team=7, sender_id=3, handshake_timeout=1.0)
        assert ground.stats()["refused"] >= 1
        assert ground.stats()["open"] == 1
        conn.close()
        first.close()
    with pytest.raises(cohort.ConfigError):
        LrtListener.bind("127.0.0.1:0", secret=SECRET, team=7, sender_id=1, max_connections=0)
    with pytest.raises(cohort.ConfigError):
        LrtListener.bind("not an address", secret=SECRET, team=7, sender_id=1)
