"""cohort.PathStatsService: path statistics shared over a loopback group (as
crates/cohort-net/tests/federated.rs): one robot publishes what its multipath connection
learned, the coordinator's rounds carry it, another robot starts its paths from it."""

from __future__ import annotations

import socket
import threading
import time

import pytest

import cohort
from cohort import GroupSocket, MpLrtSocket, PathStatsService

SECRET = b"federated py secret, 32 bytes!!!"
WAIT = 10.0
KEYS = ["ap:north-5g", "ap:south-2g"]


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def member(pid: int, pids: list[int], port: int) -> GroupSocket:
    return GroupSocket.open(
        f"127.0.0.{pid}:{port}", f"127.255.255.255:{port}", secret=SECRET, team=7, pid=pid, members=pids, msg_t=0.01
    )


def transfer(ips: tuple[int, int], to: tuple[int, int], sender_id: int) -> tuple[MpLrtSocket, MpLrtSocket]:
    rx = MpLrtSocket.listen([f"127.0.0.{i}:0" for i in to], secret=SECRET, team=7, sender_id=100 + sender_id)
    paths = [(f"127.0.0.{i}:0", f"{a}:{p}") for i, (a, p) in zip(ips, rx.local_addrs, strict=True)]
    tx = MpLrtSocket.connect(paths, secret=SECRET, team=7, sender_id=sender_id)
    rx.accept(timeout=WAIT)
    for i in range(300):
        tx.send(b"%d" % i + bytes(1000), timeout=WAIT)
    for _ in range(300):
        rx.recv(timeout=WAIT)
    tx.flush(timeout=WAIT)
    return tx, rx


def test_a_robot_starts_its_paths_from_what_the_team_measured() -> None:
    port = free_port()
    pids = [51, 52, 53]
    groups = [member(p, pids, port) for p in pids]
    services = [PathStatsService.start(g) for g in groups]
    try:
        assert all(g.closed for g in groups), "each group socket now belongs to its service"
        tx, rx = transfer((54, 55), (56, 57), 1)
        services[1].publish_socket(tx, KEYS)
        learned = services[1].own(KEYS[0])
        assert learned is not None and learned[0] > 0
        tx.close()
        rx.close()
        # The coordinator (pid 51) gathers every second; the third robot adopts the view.
        assert services[2].wait_view(WAIT)
        deadline = 3 * WAIT
        while services[2].known(KEYS)[0] is None and deadline > 0:
            services[2].wait_view(0.1)
            deadline -= 0.1
        start = services[2].known(KEYS)
        assert start[0] is not None and start[1] is not None, start
        assert services[2].own(KEYS[0]) is None, "adopted, not measured"
        tx2, rx2 = transfer((58, 59), (60, 61), 2)
        got = services[2].start_paths(tx2, KEYS)
        # The view is an age-weighted mean, recomputed at each call: equal up to rounding.
        assert all(g is not None and g == pytest.approx(w) for g, w in zip(got, start, strict=True)), (got, start)
        tx2.close()
        rx2.close()
        assert services[0].stats()["rounds"] > 0
        assert services[2].stats()["views"] > 0
    finally:
        for s in services:
            s.close()
    assert all(s.closed for s in services)


def test_bad_keys_and_counts_are_config_errors() -> None:
    port = free_port()
    with PathStatsService.start(member(71, [71], port)) as svc:
        with pytest.raises(cohort.ConfigError):
            svc.publish("", 1.0, 0.5)
        with pytest.raises(cohort.ConfigError):
            svc.publish("has space", 1.0, 0.5)
        with pytest.raises(cohort.ConfigError):
            svc.publish("ap:x", -1.0, 0.5)
        tx, rx = transfer((72, 73), (74, 75), 3)
        with pytest.raises(cohort.ConfigError) as e:
            svc.publish_socket(tx, ["only-one"])
        assert e.value.kind == "Paths"
        tx.close()
        rx.close()
        assert svc.known(["never-seen"]) == [None]
    with pytest.raises(cohort.ClosedError):
        svc.publish("ap:x", 1.0, 0.5)


def test_close_ends_a_wait_for_a_view_under_way() -> None:
    """``wait_view`` does not hold the service while it waits: ``close`` from another thread
    returns at once and ends the wait (before, it waited out the other's timeout)."""
    port = free_port()
    # Robot 82's coordinator (81) never comes, and takes 60 s to be declared gone: no view.
    g = GroupSocket.open(
        f"127.0.0.82:{port}",
        f"127.255.255.255:{port}",
        secret=SECRET,
        team=7,
        pid=82,
        members=[81, 82],
        msg_t=0.01,
        fault_detect_t=60.0,
    )
    svc = PathStatsService.start(g)
    got: list[bool] = []
    waiter = threading.Thread(target=lambda: got.append(svc.wait_view(60.0)))
    waiter.start()
    time.sleep(0.5)  # the waiter is inside wait_view by then
    svc.close()
    waiter.join(timeout=WAIT)
    assert not waiter.is_alive(), "close left the wait running"
    assert got == [False]
    assert svc.closed
