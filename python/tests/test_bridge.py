"""`cohort bridge`: robots on loopback, each with its own Zenoh session (peer mode, explicit
endpoints, no scouting) and a bridge over real Cohort sockets (LRT links, a GCBRR group on
127.255.255.255). Every wait is bounded; tests check behaviour, never timings."""

from __future__ import annotations

import json
import random
import re
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import cohort
from cohort.bridge import Bridge, BridgeConfigError, MissingSecretError, is_bridged, load_config, parse_config, wire
from cohort.bridge.core import ProcEstimate
from cohort.bridge.links import TIMING_WINDOW, Counters
from cohort.bridge.qos import class_of, priority_code
from cohort.bridge.zconf import peer_config

zenoh = pytest.importorskip("zenoh")

ROOT = Path(__file__).resolve().parents[2]
SECRET = "bridge test secret, 32 bytes lon"
WAIT = 10.0


def free_tcp_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def free_udp_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def lrt_base(pids: list[int]) -> int:
    """A base port whose LRT ports (base + 4*pid + class) are free on every robot's address,
    below the kernel's ephemeral range (32768 and up): a port picked there can be taken by an
    outgoing socket's ephemeral port between this check and the bridge's bind (seen once in
    CI: `Address already in use` for a listener)."""
    for _ in range(50):
        base = random.randrange(20000, 32000, 16)
        socks = []
        try:
            for p in pids:
                for q in pids:
                    for c in range(4):
                        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
                        socks.append(s)
                        s.bind((f"127.0.0.{p}", base + 4 * q + c))
            return base
        except OSError:
            continue
        finally:
            for s in socks:
                s.close()
    raise RuntimeError("no free LRT ports")


class Team:
    """Configuration files for robots 1..n on 127.0.0.<pid>, each robot's local Zenoh session
    listening on its own TCP port (the bridge listens, the robot's applications connect)."""

    def __init__(
        self, tmp: Path, n: int, publish: str = "", query: str = "", zenoh_connect: dict[int, list[int]] | None = None
    ):
        self.tmp = tmp
        self.pids = list(range(1, n + 1))
        (tmp / "team.key").write_text(SECRET)
        group_port, base = free_udp_port(), lrt_base(self.pids)
        self.zport = {p: free_tcp_port() for p in self.pids}
        self.paths: dict[int, Path] = {}
        for p in self.pids:
            peers = "".join(f'[[peer]]\npid = {q}\naddress = "127.0.0.{q}"\n' for q in self.pids if q != p)
            connect = [f"tcp/127.0.0.1:{self.zport[q]}" for q in (zenoh_connect or {}).get(p, [])]
            text = f"""
[robot]
pid = {p}
address = "127.0.0.{p}"

[team]
id = 7
secret_file = "team.key"
broadcast = "127.255.255.255"
group_port = {group_port}
lrt_port = {base}

{peers}
[zenoh]
listen = ["tcp/127.0.0.1:{self.zport[p]}"]
connect = {json.dumps(connect)}

{publish}
{query}
[timing]
msg_t = 0.01
fault_detect_t = 1.5
heartbeat_t = 0.15
handshake_timeout_s = 2.0
idle_timeout_s = 3.0
reconnect_s = 0.2
"""
            path = tmp / f"robot{p}.toml"
            path.write_text(text)
            self.paths[p] = path

    def app(self, pid: int) -> Any:
        """An application session on robot ``pid``'s local Zenoh network."""
        return zenoh.open(peer_config([], [f"tcp/127.0.0.1:{self.zport[pid]}"]))


@pytest.fixture
def closing() -> Iterator[Callable[[Any], Any]]:
    """Registers bridges and sessions to close at the end of the test, in reverse order."""
    things: list[Any] = []

    def add(x: Any) -> Any:
        things.append(x)
        return x

    yield add
    for x in reversed(things):
        x.close()


def start_team(team: Team, closing: Callable[[Any], Any]) -> list[Bridge]:
    bridges = [closing(Bridge(load_config(team.paths[p]))) for p in team.pids]
    for b in bridges:
        b.start()
    for b in bridges:
        assert b.wait_ready(WAIT), b.stats()
    return bridges


def wait_until(cond: Callable[[], bool], timeout: float = WAIT) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(0.02)
    return cond()


def subscribe(session: Any, key: str) -> list[Any]:
    got: list[Any] = []
    session.declare_subscriber(key, got.append)
    return got


def wait_subscribed(bridge: Bridge, pub: Any, key: str, peer: int = 2) -> None:
    """Publishes probes until the bridge has sent one and sends ``key`` to ``peer`` on what
    ``peer`` said of its subscribers: zenoh declarations and the bridges' INTEREST messages
    travel asynchronously."""
    before = bridge.counters.get("bridged_out")

    def seen() -> bool:
        pub.put(key, b"probe")
        told = bridge.stats()["interest"][peer]
        routed = told is not None and bool(told["matching"]) and peer in bridge.routes(key)
        return routed and bridge.counters.get("bridged_out") > before

    assert wait_until(seen)


PUBLISH = '[[publish]]\nkey = "team/**"\n'


def test_publication_arrives_once_in_order_with_its_payload(tmp_path: Path, closing: Callable[[Any], Any]) -> None:
    team = Team(tmp_path, 2, publish=PUBLISH)
    a, b = start_team(team, closing)
    app_a, app_b = closing(team.app(1)), closing(team.app(2))
    got = subscribe(app_b, "team/data/**")
    wait_subscribed(a, app_a, "team/probe")
    # BLOCK: the bridge waits for room in the link's queue rather than drop (DROP, Zenoh's
    # default, may drop a burst beyond drop_queue_len, counted).
    block = zenoh.CongestionControl.BLOCK
    for i in range(200):
        app_a.put(
            "team/data/x",
            b"%d:" % i + bytes(i),
            encoding="text/plain",
            attachment=b"att%d" % i,
            congestion_control=block,
        )
    app_a.delete("team/data/x", congestion_control=block)
    assert wait_until(lambda: len(got) >= 201)
    time.sleep(0.3)  # anything duplicated would show by now
    assert len(got) == 201
    puts = got[:200]
    assert [s.payload.to_bytes() for s in puts] == [b"%d:" % i + bytes(i) for i in range(200)]
    assert all(str(s.key_expr) == "team/data/x" and str(s.encoding) == "text/plain" for s in puts)
    assert [s.attachment.to_bytes() for s in puts] == [b"att%d" % i for i in range(200)]
    assert got[200].kind == zenoh.SampleKind.DELETE
    # What the bridge put carries its marker: another bridge never forwards it.
    assert all(is_bridged(s.source_info) for s in got)
    assert b.counters.get("bridged_in") >= 201


def test_priority_picks_the_traffic_class_and_drop_vs_block(tmp_path: Path, closing: Callable[[Any], Any]) -> None:
    assert [class_of(priority_code(p)).name for p in ("real_time", "interactive_high", "data", "background")] == [
        "vo",
        "vo",
        "be",
        "bk",
    ]
    assert [class_of(priority_code(p)).dscp for p in ("real_time", "interactive_low", "data", "background")] == [
        46,
        34,
        0,
        8,
    ]
    team = Team(tmp_path, 2, publish=PUBLISH)
    a, _b = start_team(team, closing)
    app_a, app_b = closing(team.app(1)), closing(team.app(2))
    got = subscribe(app_b, "team/qos/**")
    wait_subscribed(a, app_a, "team/probe")
    before = a.stats()
    app_a.put("team/qos/rt", b"rt", priority=zenoh.Priority.REAL_TIME, congestion_control=zenoh.CongestionControl.BLOCK)
    app_a.put("team/qos/bk", b"bk", priority=zenoh.Priority.BACKGROUND)
    assert wait_until(lambda: len(got) == 2)
    by_key = {str(s.key_expr): s for s in got}
    assert by_key["team/qos/rt"].priority == zenoh.Priority.REAL_TIME
    assert by_key["team/qos/rt"].congestion_control == zenoh.CongestionControl.BLOCK
    assert by_key["team/qos/bk"].priority == zenoh.Priority.BACKGROUND
    assert before["links_up"] == {"vo": [2], "vi": [2], "be": [2], "bk": [2]}


QUERY = '[[query]]\nkey = "status/**"\ntimeout_s = 3.0\n'


def serve_status(session: Any, pid: int) -> Any:
    def on_query(q: Any) -> None:
        body = b"" if q.payload is None else q.payload.to_bytes()
        q.reply(f"status/robot{pid}", b"robot %d ok " % pid + body)

    return session.declare_queryable(f"status/robot{pid}", on_query)


def get_all(session: Any, key: str, payload: bytes | None = None) -> dict[str, bytes]:
    replies = session.get(
        key,
        payload=payload,
        target=zenoh.QueryTarget.ALL,
        consolidation=zenoh.ConsolidationMode.NONE,
        timeout=5.0,
    )
    return {str(r.ok.key_expr): r.ok.payload.to_bytes() for r in replies if r.ok is not None}


@pytest.mark.parametrize("asker", [1, 2])
def test_get_is_answered_by_the_other_robots(tmp_path: Path, closing: Callable[[Any], Any], asker: int) -> None:
    """Robot 1 is the group's coordinator; robot 2's queries are relayed through it."""
    team = Team(tmp_path, 3, query=QUERY)
    bridges = start_team(team, closing)
    apps = {p: closing(team.app(p)) for p in team.pids}
    for p in team.pids:
        serve_status(apps[p], p)
    want = {f"status/robot{p}": b"robot %d ok ping" % p for p in team.pids}
    got: dict[str, bytes] = {}

    def complete() -> bool:
        got.clear()
        got.update(get_all(apps[asker], "status/**", b"ping"))
        return got == want

    assert wait_until(complete, 15.0), got
    # The whole team is in the group: the coordinator holds no join poll against the queries.
    before = bridges[0].stats()
    time.sleep(3 * load_config(team.paths[1]).timing.join_poll_s)
    after = bridges[0].stats()
    assert after["group"]["member"]["polls_sent"] == before["group"]["member"]["polls_sent"], (before, after)
    # One reply per robot, no duplicates: the robots' own bridges never answered themselves.
    replies = apps[asker].get("status/**", payload=b"ping", consolidation=zenoh.ConsolidationMode.NONE, timeout=5.0)
    keys = sorted(str(r.ok.key_expr) for r in replies if r.ok is not None)
    assert keys == sorted(want)
    coord = bridges[0].counters
    assert coord.get("group_requests") >= 1
    assert all(b.counters.get("loops_prevented") == 0 for b in bridges)

    # Where the time went, at the asker, the coordinator and a robot that answered.
    # Counters are read from other threads: wait for the last exchange's to land.
    def timed(b: Any, *names: str) -> bool:
        timings = b.stats()["timings"]
        return all(timings.get(k, {}).get("n", 0) >= 2 for k in names)

    assert wait_until(lambda: timed(bridges[asker - 1], "query")), bridges[asker - 1].stats()
    asked = bridges[asker - 1].stats()["timings"]
    assert set(asked["query"]) == {"n", "p50_ms", "p99_ms", "max_ms"}
    assert asked["query"]["p50_ms"] <= asked["query"]["p99_ms"] <= asked["query"]["max_ms"]
    assert ("relay" in asked) == (asker != 1), bridges[asker - 1].stats()
    assert wait_until(lambda: timed(bridges[0], "group_round")), bridges[0].stats()
    assert wait_until(lambda: timed(bridges[2], "serve", "local_get")), bridges[2].stats()


def tokens(session: Any) -> set[str]:
    return {str(r.ok.key_expr) for r in session.liveliness().get("cohort/team/*", timeout=2.0) if r.ok is not None}


def test_liveliness_tokens_follow_the_team(tmp_path: Path, closing: Callable[[Any], Any]) -> None:
    team = Team(tmp_path, 3)
    bridges = start_team(team, closing)
    app = closing(team.app(1))
    events: list[tuple[str, bool]] = []
    app.liveliness().declare_subscriber(
        "cohort/team/*", lambda s: events.append((str(s.key_expr), s.kind == zenoh.SampleKind.PUT)), history=True
    )
    all_three = {"cohort/team/1", "cohort/team/2", "cohort/team/3"}
    assert wait_until(lambda: tokens(app) == all_three)
    bridges[2].close()  # robot 3 vanishes: robot 1's fault detector removes it
    assert wait_until(lambda: tokens(app) == {"cohort/team/1", "cohort/team/2"})
    assert wait_until(lambda: ("cohort/team/3", False) in events)
    assert wait_until(lambda: bridges[0].counters.get("members_lost") == 1)
    bridges[0].close()  # robot 1's own bridge stops: its tokens vanish with its session
    assert wait_until(lambda: tokens(app) == set())


def test_no_loop_when_two_bridges_bridge_the_same_key(tmp_path: Path, closing: Callable[[Any], Any]) -> None:
    """The worst case: the two robots' Zenoh networks are joined too (robot 2's bridge session
    connects to robot 1's), so a sample robot 2's bridge puts reaches robot 1's bridge over
    Zenoh, as a remote sample: without the marker it would go back over Cohort forever."""
    team = Team(tmp_path, 2, publish=PUBLISH, zenoh_connect={2: [1]})
    a, b = start_team(team, closing)
    app_a = closing(team.app(1))
    got = subscribe(app_a, "team/loop")
    wait_subscribed(a, app_a, "team/probe")
    assert wait_until(lambda: a.counters.get("loops_prevented") >= 1)  # the probes came back
    time.sleep(0.3)  # the last probes settle
    n0, out0 = len(got), a.counters.get("bridged_out") + b.counters.get("bridged_out")
    in0, loops = b.counters.get("bridged_in"), a.counters.get("loops_prevented")
    app_a.put("team/loop", b"once")
    assert wait_until(lambda: b.counters.get("bridged_in") == in0 + 1)
    assert wait_until(lambda: a.counters.get("loops_prevented") > loops)  # robot 2's put came back: stopped
    time.sleep(0.5)  # a loop would keep the counters moving
    assert a.counters.get("bridged_out") + b.counters.get("bridged_out") == out0 + 1
    assert [s.payload.to_bytes() for s in got[n0:]] == [b"once"]


def test_a_sample_goes_only_to_robots_with_a_subscriber(tmp_path: Path, closing: Callable[[Any], Any]) -> None:
    """Robot 3 has no subscriber: nothing crosses to it until one appears, and nothing after it
    goes; robot 2's subscriber gets every sample throughout."""
    team = Team(tmp_path, 3, publish=PUBLISH)
    a, _b, c = start_team(team, closing)
    app1, app2, app3 = closing(team.app(1)), closing(team.app(2)), closing(team.app(3))
    got2 = subscribe(app2, "team/data/**")
    wait_subscribed(a, app1, "team/probe")
    assert wait_until(lambda: a.routes("team/data/x") == [2])
    assert a.stats()["interest"][3] == {"watched": ["team/**"], "matching": []}
    in3 = c.counters.get("bridged_in")
    block = zenoh.CongestionControl.BLOCK
    for i in range(20):
        app1.put("team/data/x", b"%d" % i, congestion_control=block)
    assert wait_until(lambda: len(got2) == 20)
    assert c.counters.get("bridged_in") == in3
    assert a.counters.get("unwanted") >= 20

    got3: list[Any] = []
    sub3 = app3.declare_subscriber("team/data/x", got3.append)
    assert wait_until(lambda: a.routes("team/data/x") == [2, 3])
    assert a.routes("team/other") == [2, 3]  # robot 3 said "team/**": it gets the whole key
    for i in range(20, 40):
        app1.put("team/data/x", b"%d" % i, congestion_control=block)
    assert wait_until(lambda: len(got3) == 20 and len(got2) == 40)
    assert [s.payload.to_bytes() for s in got3] == [b"%d" % i for i in range(20, 40)]

    sub3.undeclare()
    assert wait_until(lambda: a.routes("team/data/x") == [2])
    in3 = c.counters.get("bridged_in")
    for i in range(40, 60):
        app1.put("team/data/x", b"%d" % i, congestion_control=block)
    assert wait_until(lambda: len(got2) == 60)
    assert [s.payload.to_bytes() for s in got2] == [b"%d" % i for i in range(60)]
    assert c.counters.get("bridged_in") == in3


def test_a_key_published_by_one_robot_reaches_a_robot_that_does_not_configure_it(
    tmp_path: Path, closing: Callable[[Any], Any]
) -> None:
    """Only robot 1 names the key in ``[[publish]]``: robot 2's bridge watches what robot 1
    offers, so its subscriber still gets the samples."""
    team = Team(tmp_path, 2, publish=PUBLISH)
    team.paths[2].write_text(team.paths[2].read_text().replace(PUBLISH, ""))
    a, b = start_team(team, closing)
    assert not b.cfg.publish
    app_a, app_b = closing(team.app(1)), closing(team.app(2))
    got = subscribe(app_b, "team/data/**")
    wait_subscribed(a, app_a, "team/probe")
    app_a.put("team/data/x", b"crossed")
    assert wait_until(lambda: len(got) == 1)
    assert got[0].payload.to_bytes() == b"crossed"
    assert b.stats()["interest"][1] == {"watched": [], "matching": []}


# Bad input.


def write(tmp_path: Path, text: str, secret: bool = True) -> Path:
    if secret:
        (tmp_path / "team.key").write_text(SECRET)
    p = tmp_path / "bridge.toml"
    p.write_text(text)
    return p


GOOD = """
[robot]
pid = 1
address = "127.0.0.1"
[team]
id = 7
secret_file = "team.key"
broadcast = "127.255.255.255"
group_port = 7600
lrt_port = 7700
[[peer]]
pid = 2
address = "127.0.0.2"
[[publish]]
key = "team/**"
"""


def test_a_good_config_loads(tmp_path: Path) -> None:
    cfg = load_config(write(tmp_path, GOOD))
    assert cfg.members == [1, 2] and cfg.secret == SECRET.encode() and cfg.publish[0].key == "team/**"
    assert cfg.lrt_port_for(2, 3) == 7700 + 4 * 2 + 3


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("[robot\npid = 1", "not valid TOML"),
        (GOOD + "colour = 'red'\n", r"\[publish\[0\]\.colour\] unknown key"),
        (GOOD.replace("[robot]", "[robot]\nspeed = 3"), r"\[robot\.speed\] unknown key"),
        (GOOD + "[extra]\n", r"\[extra\] unknown key"),
        (GOOD.replace("pid = 1", 'pid = "one"'), r"\[robot\.pid\] must be an integer"),
        (GOOD.replace('address = "127.0.0.2"', 'address = "robot2"'), r"must be an IPv4 address"),
        (GOOD.replace('key = "team/**"', 'key = "team/**/"'), r"not a valid Zenoh key expression"),
        (GOOD.replace("pid = 2", "pid = 1"), r"pid 1 appears twice"),
        (GOOD + "priority = 'urgent'\n", r"must be one of real_time"),
        (GOOD.replace("lrt_port = 7700", ""), r"\[team\.lrt_port\] missing"),
        (GOOD + "[timing]\nadaptive_proc_t = 1\n", r"\[timing\.adaptive_proc_t\] must be true or false"),
    ],
)
def test_bad_config_is_a_typed_error(tmp_path: Path, text: str, match: str) -> None:
    with pytest.raises(BridgeConfigError, match=match) as e:
        load_config(write(tmp_path, text))
    assert isinstance(e.value, cohort.ConfigError) and isinstance(e.value, ValueError)
    assert e.value.path == str(tmp_path / "bridge.toml")


def test_missing_secret_is_a_typed_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(MissingSecretError, match="cannot read the team secret") as e:
        load_config(write(tmp_path, GOOD, secret=False))
    assert e.value.kind == "MissingSecret" and e.value.key == "team.secret_file"
    monkeypatch.delenv("COHORT_BRIDGE_TEST_SECRET", raising=False)
    env = GOOD.replace('secret_file = "team.key"', 'secret_env = "COHORT_BRIDGE_TEST_SECRET"')
    with pytest.raises(MissingSecretError, match="COHORT_BRIDGE_TEST_SECRET is not set"):
        parse_config(env)
    monkeypatch.setenv("COHORT_BRIDGE_TEST_SECRET", "short")
    with pytest.raises(MissingSecretError, match="at least 16"):
        parse_config(env)
    with pytest.raises(MissingSecretError, match="exactly one"):
        parse_config(GOOD.replace('secret_file = "team.key"', ""))


def test_the_cli_refuses_a_bad_config_with_one_line(tmp_path: Path) -> None:
    p = write(tmp_path, GOOD + "colour = 'red'\n")
    r = subprocess.run(
        [sys.executable, "-m", "cohort.bridge", "--config", str(p)], capture_output=True, text=True, timeout=60
    )
    assert r.returncode == 2
    assert r.stderr.count("\n") == 1 and r.stderr.startswith("cohort bridge: error: ")
    assert "unknown key" in r.stderr
    ok = subprocess.run(
        [sys.executable, "-m", "cohort.bridge", "--config", str(write(tmp_path, GOOD)), "--check"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert ok.returncode == 0 and "robot 1 of team 7" in ok.stdout


def test_a_bad_message_from_a_peer_is_a_counted_drop(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    cfg = load_config(write(tmp_path, GOOD))
    bridge = Bridge(cfg)  # not started: the message path needs no sockets
    with caplog.at_level("ERROR", logger="cohort.bridge"):
        bridge._on_message(2, b"\x01\x09garbage")
        bridge._on_message(2, wire.encode(wire.GroupReply(replies=(), serve_us=5)))
        # What robot 2 offers or wants, named by a key expression Zenoh refuses, or sent by a
        # robot that is not a peer: nothing of it is taken.
        bridge._on_message(2, wire.encode(wire.Offer(("team/**", "a//b"))))
        bridge._on_message(2, wire.encode(wire.Interest((("team/**", True), ("a/**/**/b", True)))))
        bridge._on_message(9, wire.encode(wire.Interest((("team/**", False),))))
    assert bridge.counters.get("dropped_bad_message") == 5
    assert len([r for r in caplog.records if "message from robot 2 dropped" in r.message]) == 4
    assert [r.message for r in caplog.records if "robot 9" in r.message] == [
        "message from robot 9 dropped: an interest from robot 9, not a peer"
    ]
    assert bridge.stats()["interest"] == {2: None}
    assert bridge.routes("team/x") == [] and not bridge._offered  # not started: no links


def test_wire_round_trips_and_refuses_truncation() -> None:
    s = wire.Sample(
        key="a/b", payload=b"\x00\xff", encoding="text/plain", priority=7, block=True, attachment=b"x", origin=3
    )
    assert wire.decode(wire.encode(s)) == s
    q = wire.Query(query_id=9, origin=2, timeout_ms=100, key="a/*", parameters="x=1", payload=b"p", encoding="e")
    assert wire.decode(wire.encode(q)) == q
    ans = wire.Answers(query_id=9, replies=(wire.Reply("a/b", b"r", "e"),), failed=1)
    assert wire.decode(wire.encode(ans)) == ans
    gr = wire.GroupReply(replies=(wire.Reply("a/b", b"r", "e"), wire.Reply("a/c", b"", "")), serve_us=1234)
    assert wire.decode(wire.encode(gr)) == gr
    offer = wire.Offer(("team/**", "0/cmd_vel/**"))
    interest = wire.Interest((("team/**", True), ("0/cmd_vel/**", False)))
    for m in (offer, interest, wire.Offer(()), wire.Interest(())):
        assert wire.decode(wire.encode(m)) == m
    with pytest.raises(wire.WireError, match="matching flag"):
        wire.decode(wire.encode(interest)[:-1] + b"\x02")
    for msg in (ans, gr, offer, interest):
        data = wire.encode(msg)
        for n in range(len(data) - 1):
            with pytest.raises(wire.WireError):
                wire.decode(data[:n])
        with pytest.raises(wire.WireError, match="trailing"):
            wire.decode(data + b"x")
    # A group reply without the header (the format before serve times) is refused, not misread.
    with pytest.raises(wire.WireError, match="version"):
        wire.decode(b"\x00\x01" + wire.encode(gr)[7:])


def test_proc_t_follows_the_robots_serve_times_within_its_bounds() -> None:
    fixed = ProcEstimate(0.05, cap=0.5, adaptive=False)
    fixed.observe(0.001)
    assert fixed.value() == 0.05
    est = ProcEstimate(0.05, cap=0.5, adaptive=True)
    assert est.value() == 0.05  # nothing heard yet: the configured value
    for _ in range(50):
        est.observe(0.002)
    assert est.value() == pytest.approx(0.002, rel=0.05)  # steady: SRTT, RTTVAR gone
    est.observe(0.012)  # one slow robot widens the estimate at once
    assert est.value() > 0.012
    for _ in range(50):
        est.observe(5.0)
    assert est.value() == 0.5
    for _ in range(200):
        est.observe(0.0)
    assert est.value() == ProcEstimate.FLOOR_S


def test_a_peer_that_vanishes_is_counted_drops_and_one_error_line(
    tmp_path: Path, closing: Callable[[Any], Any], caplog: pytest.LogCaptureFixture
) -> None:
    team = Team(tmp_path, 2, publish=PUBLISH)
    a, b = start_team(team, closing)
    app_a, app_b = closing(team.app(1)), closing(team.app(2))
    subscribe(app_b, "team/**")
    wait_subscribed(a, app_a, "team/probe")
    with caplog.at_level("ERROR", logger="cohort.bridge"):
        b.close()
        # Robot 1's links notice (LRT's idle timeout, 3 s here) and the samples are dropped.
        assert wait_until(lambda: a.stats()["links_up"]["be"] == [], 10.0)
        for _ in range(5):
            app_a.put("team/after", b"lost")
        assert wait_until(lambda: a.counters.get("dropped_link_down") >= 5)
    lost = [r.message for r in caplog.records if re.search(r"link to robot 2 \(be\) lost", r.message)]
    assert len(lost) == 1, caplog.records


def test_the_docs_code_blocks_run(tmp_path: Path) -> None:
    """Every code block of docs/bridge.md runs: ``python`` blocks as scripts, ``toml`` blocks
    load as bridge configurations, ``sh`` blocks in a shell, all from the repository root."""
    text = (ROOT / "docs" / "bridge.md").read_text()
    blocks = re.findall(r"^```(\w*)\n(.*?)^```", text, re.S | re.M)
    assert len(blocks) >= 4
    for lang, code in blocks:
        assert lang in ("python", "toml", "sh"), f"unknown code block language {lang!r}"
        if lang == "python":
            r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
            assert r.returncode == 0, f"{code}\n{r.stdout}\n{r.stderr}"
        elif lang == "toml":
            (tmp_path / "team.key").write_text(SECRET)
            p = tmp_path / "block.toml"
            p.write_text(code)
            load_config(p)
        elif lang == "sh":
            env_bin = str(Path(sys.executable).parent)
            r = subprocess.run(
                ["bash", "-euc", code],
                cwd=ROOT,
                capture_output=True,
                text=True,
                timeout=60,
                env={"PATH": f"{env_bin}:/usr/bin:/bin", "HOME": str(tmp_path)},
            )
            assert r.returncode == 0, f"{code}\n{r.stdout}\n{r.stderr}"


def test_threads_end_when_the_bridges_close(tmp_path: Path) -> None:
    team = Team(tmp_path, 2, publish=PUBLISH)
    before = {t.ident for t in threading.enumerate()}
    bridges = [Bridge(load_config(team.paths[p])).start() for p in team.pids]
    for b in bridges:
        assert b.wait_ready(WAIT)
    for b in bridges:
        b.close()
    assert wait_until(
        lambda: not [t for t in threading.enumerate() if t.ident not in before and t.name.startswith("bridge")]
    )


def test_a_team_closing_at_once_closes_every_step_once(tmp_path: Path) -> None:
    """All robots stop together (a team powering down): every bridge goes through each step of
    its close, its links while the peers' are closing too, and a second close does nothing."""
    team = Team(tmp_path, 3, publish=PUBLISH)
    bridges = [Bridge(load_config(team.paths[p])).start() for p in team.pids]
    for b in bridges:
        assert b.wait_ready(WAIT)
    closers = [threading.Thread(target=b.close) for b in bridges]
    for th in closers:
        th.start()
    for th in closers:
        th.join(60)
        assert not th.is_alive()
    for b in bridges:
        assert list(b.close_steps) == ["threads", "group", "links", "queries", "session"], b.close_steps
        assert b.close_step is None
        steps = dict(b.close_steps)
        b.close()
        assert b.close_steps == steps
        assert b.counters.get("close_errors") == 0


class _StuckClose:
    """A bridge whose close hangs in its ``session`` step until released."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.close_step: str | None = None
        self.close_steps: dict[str, float] = {}

    def close(self) -> None:
        self.close_steps["threads"] = 0.0
        self.close_step = "session"
        self.release.wait(30)
        self.close_step = None


def test_a_close_that_hangs_is_named_and_abandoned() -> None:
    from cohort.bridge.__main__ import close_within

    stuck = _StuckClose()
    try:
        assert close_within(stuck, 0.2) == "session"  # type: ignore[arg-type]
    finally:
        stuck.release.set()
    quick = _StuckClose()
    quick.release.set()
    assert close_within(quick, 10) is None  # type: ignore[arg-type]


def test_the_cli_prints_its_counters_and_exits_on_sigterm(tmp_path: Path) -> None:
    import signal

    team = Team(tmp_path, 2, publish=PUBLISH)
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "cohort.bridge", "--config", str(team.paths[p]), "--stats"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for p in team.pids
    ]
    try:
        for proc in procs:
            assert proc.stderr is not None
            assert " up, zenoh id " in proc.stderr.readline()
        # SIGUSR1 prints every thread's stack and changes nothing else.
        procs[0].send_signal(signal.SIGUSR1)
        time.sleep(0.5)
        for proc in procs:
            proc.send_signal(signal.SIGTERM)
        # SIGTERM again and again while they stop (and exit): a stop, once begun, is not cut
        # short, and each still exits 0 with its counters.
        deadline = time.monotonic() + 60
        while any(proc.poll() is None for proc in procs) and time.monotonic() < deadline:
            for proc in procs:
                if proc.poll() is None:
                    proc.send_signal(signal.SIGTERM)
            time.sleep(0.01)
        for p, proc in zip(team.pids, procs, strict=True):
            out, err = proc.communicate(timeout=60)
            assert proc.returncode == 0, err
            assert json.loads(out.splitlines()[0])["pid"] == p, out
            assert ("Current thread" in err) == (p == team.pids[0]), err
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()


def test_a_bridge_that_hangs_while_stopping_still_ends_and_shows_where(tmp_path: Path) -> None:
    """Whatever hangs after SIGTERM (here the counters' collection), the process ends within
    close_timeout_s plus the watchdog's margin, printing every thread's stack."""
    import signal

    team = Team(tmp_path, 2, publish=PUBLISH)
    with team.paths[1].open("a") as f:
        f.write("close_timeout_s = 0.5\n")
    code = (
        "import sys, time\n"
        "from cohort.bridge import core\n"
        "def hang(self): time.sleep(600)\n"
        "core.Bridge.stats = hang\n"
        "from cohort.bridge.__main__ import main\n"
        f"sys.exit(main(['--config', {str(team.paths[1])!r}, '--stats']))\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stderr is not None
        assert " up, zenoh id " in proc.stderr.readline()
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 1, err
    assert "in hang" in err and "Thread" in err, err


def test_drop_meets_a_bounded_queue_and_block_waits_then_drops(caplog: pytest.LogCaptureFixture) -> None:
    """The congestion-control mapping on one link whose sender is stalled (not started)."""
    from cohort.bridge.links import Counters, LinkParams, OutLink
    from cohort.bridge.qos import CLASSES

    p = LinkParams(
        secret=SECRET.encode(),
        team=7,
        sender_id=1,
        handshake_timeout_s=1.0,
        idle_timeout_s=1.0,
        reconnect_s=0.1,
        block_timeout_s=0.05,
        drop_queue_len=4,
        block_queue_len=6,
    )
    counters = Counters()
    link = OutLink(2, "127.0.0.2:9", CLASSES[2], p, counters)
    assert not link.send(b"x", block=False) and counters.get("dropped_link_down") == 1  # down: dropped
    link._up.set()  # as if connected, with its sender stalled
    assert [link.send(b"d%d" % i, block=False) for i in range(6)] == [True] * 4 + [False] * 2
    assert counters.get("dropped_congestion") == 2
    # BLOCK samples may fill the queue further (block_queue_len), then wait block_timeout_s.
    with caplog.at_level("ERROR", logger="cohort.bridge"):
        assert [link.send(b"b%d" % i, block=True) for i in range(3)] == [True, True, False]
    assert counters.get("dropped_block_timeout") == 1
    assert len([r for r in caplog.records if "a BLOCK sample dropped" in r.message]) == 1
    assert [link._q.get_nowait() for _ in range(6)] == [b"d0", b"d1", b"d2", b"d3", b"b0", b"b1"]  # in order


def test_a_get_gets_what_the_live_robots_say(tmp_path: Path, closing: Callable[[Any], Any]) -> None:
    """Robot 3 vanishes: once the group has removed it, robot 1's get is answered by 1 and 2."""
    team = Team(tmp_path, 3, query=QUERY)
    bridges = start_team(team, closing)
    apps = {p: closing(team.app(p)) for p in team.pids}
    for p in team.pids:
        serve_status(apps[p], p)
    assert wait_until(lambda: len(get_all(apps[1], "status/**")) == 3, 15.0)
    bridges[2].close()
    assert wait_until(lambda: bridges[0].stats()["members"] == [1, 2])
    assert sorted(get_all(apps[1], "status/**")) == ["status/robot1", "status/robot2"]


def test_a_restarted_bridge_is_readmitted(tmp_path: Path, closing: Callable[[Any], Any]) -> None:
    """Robot 3's bridge stops and starts again: the group expels the new one (it was removed),
    it joins on the coordinator's join poll, its token comes back and its links carry again."""
    team = Team(tmp_path, 3, publish=PUBLISH)
    bridges = start_team(team, closing)
    app1, app3 = closing(team.app(1)), closing(team.app(3))
    got = subscribe(app1, "team/back")
    bridges[2].close()
    assert wait_until(lambda: tokens(app1) == {"cohort/team/1", "cohort/team/2"})
    again = closing(Bridge(load_config(team.paths[3])).start())
    assert again.wait_ready(WAIT), again.stats()
    assert wait_until(lambda: tokens(app1) == {"cohort/team/1", "cohort/team/2", "cohort/team/3"})
    assert wait_until(lambda: again.stats()["members"] == [1, 2, 3])
    assert wait_until(lambda: bridges[0].counters.get("members_admitted") == 1)
    # Robot 1 saw robot 3 leave, then join again, as the coordinator both times.
    changes = [(e.get("left"), e.get("joined"), e["coordinator"]) for e in bridges[0].stats()["membership"]]
    assert changes == [(3, None, 1), (None, 3, 1)], changes

    def arrived() -> bool:
        app3.put("team/back", b"hello again")
        return bool(got)

    assert wait_until(arrived)
    assert got[0].payload.to_bytes() == b"hello again"

    # The other way: the new process's subscriber is what robot 1 routes to, not the old one's
    # interest (it had none).
    back: list[Any] = []
    app3.declare_subscriber("team/out", back.append)

    def reached() -> bool:
        app1.put("team/out", b"to the new robot 3")
        return bool(back)

    assert wait_until(reached)
    assert back[0].payload.to_bytes() == b"to the new robot 3"


def test_a_port_taken_is_an_io_error_and_nothing_stays_open(tmp_path: Path) -> None:
    team = Team(tmp_path, 2, publish=PUBLISH)
    cfg = load_config(team.paths[1])
    taken = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    taken.bind(("127.0.0.1", cfg.lrt_port_for(2, 0)))  # robot 1's listener for robot 2, class vo
    before = {t.ident for t in threading.enumerate()}
    try:
        with pytest.raises(cohort.IoError, match="in use"):
            Bridge(cfg).start()
    finally:
        taken.close()
    assert wait_until(lambda: not [t for t in threading.enumerate() if t.ident not in before])
    # The same configuration starts once the port is free: nothing of the failed start remained.
    Bridge(cfg).start().close()


def test_timings_are_nearest_rank_quantiles_of_a_bounded_window() -> None:
    c = Counters()
    assert c.timings() == {}
    for ms in range(1, 101):
        c.observe("x", ms / 1000)
    assert c.timings() == {"x": {"n": 100, "p50_ms": 50.0, "p99_ms": 99.0, "max_ms": 100.0}}
    # Only the last TIMING_WINDOW samples count: an old outlier ages out.
    c.observe("y", 10.0)
    for _ in range(TIMING_WINDOW):
        c.observe("y", 0.002)
    assert c.timings()["y"] == {"n": TIMING_WINDOW, "p50_ms": 2.0, "p99_ms": 2.0, "max_ms": 2.0}
