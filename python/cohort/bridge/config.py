"""The bridge's configuration file (TOML): parsing and validation.

Every table and key is checked: an unknown key, a wrong type, a value out of range or a
secret that cannot be read raises :class:`BridgeConfigError` (a :class:`cohort.ConfigError`,
so also a ``ValueError``) naming the file and the key. The format is documented in
``docs/bridge.md``.
"""

from __future__ import annotations

import ipaddress
import os
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cohort.errors import ConfigError

__all__ = [
    "BridgeConfig",
    "BridgeConfigError",
    "MissingSecretError",
    "PeerConfig",
    "PublishConfig",
    "QueryConfig",
    "TimingConfig",
    "ZenohConfig",
    "load_config",
    "parse_config",
]

# LRT ports: robot j listens for sender i on `lrt_port + CLASSES * i + class` (see docs/bridge.md).
CLASSES = 4
MAX_PID = 1000
MIN_SECRET_LEN = 16


class BridgeConfigError(ConfigError):
    """The bridge's configuration is invalid: ``path`` is the file (or ``None``), ``key`` the
    dotted key at fault (or ``None`` for the whole file)."""

    def __init__(self, message: str, *, path: str | None = None, key: str | None = None, kind: str = "BridgeConfig"):
        where = f"{path}: " if path else ""
        at = f"[{key}] " if key else ""
        super().__init__(f"{where}{at}{message}", kind=kind)
        self.path = path
        self.key = key


class MissingSecretError(BridgeConfigError):
    """The team secret named by the configuration is missing (no such file, unset variable,
    or shorter than 16 bytes)."""

    def __init__(self, message: str, *, path: str | None = None, key: str | None = None):
        super().__init__(message, path=path, key=key, kind="MissingSecret")


@dataclass(frozen=True)
class PeerConfig:
    """Another robot of the team: its pid and the address its bridge binds."""

    pid: int
    address: str


@dataclass(frozen=True)
class ZenohConfig:
    """How the bridge joins the robot's local Zenoh session."""

    mode: str = "peer"
    listen: tuple[str, ...] = ()
    connect: tuple[str, ...] = ()
    multicast_scouting: bool = False


@dataclass(frozen=True)
class PublishConfig:
    """A key expression whose publications (put and delete) the bridge carries to every peer
    whose session has a subscriber on them.

    ``priority`` and ``congestion_control`` (when set) override the sample's own.
    """

    key: str
    priority: str | None = None
    congestion_control: str | None = None


@dataclass(frozen=True)
class QueryConfig:
    """A key expression the bridge answers for the team: a local ``get`` on it is asked of
    every other robot over group request-reply. ``timeout_s`` bounds the team's answer."""

    key: str
    timeout_s: float = 2.0


@dataclass(frozen=True)
class TimingConfig:
    """Timeouts and queue sizes (seconds unless named otherwise)."""

    msg_t: float = 0.03
    fault_detect_t: float = 1.0
    heartbeat_t: float = 0.1
    handshake_timeout_s: float = 5.0
    idle_timeout_s: float = 10.0
    reconnect_s: float = 0.5
    block_timeout_s: float = 1.0
    drop_queue_len: int = 64
    block_queue_len: int = 1024
    query_proc_t: float = 0.05
    adaptive_proc_t: bool = True
    local_query_timeout_s: float = 0.5
    max_reply_bytes: int = 60000
    join_poll_s: float = 1.0
    join_t: float = 0.05
    start_grace_s: float = 5.0
    early_repair: bool = True
    # Each group broadcast twice: 802.11 never retries a broadcast, and beside an upload a lost
    # request or reply costs a repair round (docs/bridge.md, "Two copies of each broadcast").
    broadcast_copies: int = 2
    close_timeout_s: float = 10.0


@dataclass(frozen=True)
class BridgeConfig:
    """A whole bridge configuration (one robot)."""

    pid: int
    address: str
    team: int
    secret: bytes
    broadcast: str
    group_port: int
    lrt_port: int
    peers: tuple[PeerConfig, ...]
    zenoh: ZenohConfig = field(default_factory=ZenohConfig)
    publish: tuple[PublishConfig, ...] = ()
    query: tuple[QueryConfig, ...] = ()
    liveliness_prefix: str = "cohort/team"
    timing: TimingConfig = field(default_factory=TimingConfig)
    path: str | None = None

    @property
    def members(self) -> list[int]:
        """Every pid of the team, this robot's included, ascending."""
        return sorted([self.pid, *(p.pid for p in self.peers)])

    def lrt_port_for(self, sender: int, cls: int) -> int:
        """The port on which the receiving robot listens for ``sender``'s class ``cls`` link."""
        return self.lrt_port + CLASSES * sender + cls


PRIORITIES = ("real_time", "interactive_high", "interactive_low", "data_high", "data", "data_low", "background")
CONGESTION = ("drop", "block")


class _Table:
    """A TOML table being read: every key taken is remembered, the rest are unknown keys."""

    def __init__(self, data: Any, name: str, path: str | None) -> None:
        if not isinstance(data, dict):
            raise BridgeConfigError("must be a table", path=path, key=name or None)
        self.data: dict[str, Any] = data
        self.name = name
        self.path = path
        self.taken: set[str] = set()

    def _key(self, key: str) -> str:
        return f"{self.name}.{key}" if self.name else key

    def err(self, key: str, message: str) -> BridgeConfigError:
        return BridgeConfigError(message, path=self.path, key=self._key(key))

    def get(self, key: str, kind: type | tuple[type, ...], default: Any = ..., *, what: str = "") -> Any:
        self.taken.add(key)
        if key not in self.data:
            if default is ...:
                raise self.err(key, "missing")
            return default
        v = self.data[key]
        # bool is an int in Python; a TOML boolean is never a number here.
        if not isinstance(v, kind) or (
            isinstance(v, bool) and bool not in (kind if isinstance(kind, tuple) else (kind,))
        ):
            raise self.err(key, f"must be {what or _kind_name(kind)}, not {type(v).__name__} {v!r}")
        return v

    def number(self, key: str, default: float, *, lo: float, hi: float) -> float:
        v = float(self.get(key, (int, float), default, what="a number"))
        if not lo <= v <= hi:
            raise self.err(key, f"must be in [{lo}, {hi}], not {v}")
        return v

    def integer(self, key: str, default: Any = ..., *, lo: int, hi: int) -> int:
        v: int = self.get(key, int, default, what="an integer")
        if not lo <= v <= hi:
            raise self.err(key, f"must be in [{lo}, {hi}], not {v}")
        return v

    def table(self, key: str, required: bool = False) -> _Table:
        raw = self.get(key, dict, ... if required else {}, what="a table")
        return _Table(raw, self._key(key), self.path)

    def done(self) -> None:
        unknown = sorted(set(self.data) - self.taken)
        if unknown:
            raise self.err(unknown[0], f"unknown key (known: {', '.join(sorted(self.taken))})")


def _kind_name(kind: type | tuple[type, ...]) -> str:
    kinds = kind if isinstance(kind, tuple) else (kind,)
    names = {
        str: "a string",
        int: "an integer",
        float: "a number",
        bool: "a boolean",
        list: "an array",
        dict: "a table",
    }
    return " or ".join(names.get(k, k.__name__) for k in kinds)


def _address(t: _Table, key: str) -> str:
    v: str = t.get(key, str)
    try:
        ipaddress.IPv4Address(v)
    except ValueError:
        raise t.err(key, f"must be an IPv4 address, not {v!r}") from None
    return v


def _key_expr(t: _Table, key: str) -> str:
    v: str = t.get(key, str)
    import zenoh

    try:
        zenoh.KeyExpr(v)
    except Exception as e:
        raise t.err(key, f"not a valid Zenoh key expression: {v!r} ({e})") from None
    return v


def _strings(t: _Table, key: str) -> tuple[str, ...]:
    v = t.get(key, list, [])
    if not all(isinstance(s, str) for s in v):
        raise t.err(key, "must be an array of strings")
    return tuple(v)


def _secret(t: _Table, base: Path | None) -> bytes:
    file = t.get("secret_file", str, None)
    env = t.get("secret_env", str, None)
    if (file is None) == (env is None):
        raise MissingSecretError("give exactly one of secret_file and secret_env", path=t.path, key="team")
    if file is not None:
        p = Path(file)
        if not p.is_absolute() and base is not None:
            p = base / p
        try:
            secret = p.read_bytes().strip()
        except OSError as e:
            raise MissingSecretError(
                f"cannot read the team secret {str(p)!r}: {e.strerror}", path=t.path, key="team.secret_file"
            ) from None
        where = "team.secret_file"
    else:
        value = os.environ.get(env)
        if value is None:
            raise MissingSecretError(f"environment variable {env} is not set", path=t.path, key="team.secret_env")
        secret = value.encode()
        where = "team.secret_env"
    if len(secret) < MIN_SECRET_LEN:
        raise MissingSecretError(
            f"the team secret is {len(secret)} bytes; at least {MIN_SECRET_LEN} needed", path=t.path, key=where
        )
    return secret


def parse_config(text: str, *, path: str | None = None, base: Path | None = None) -> BridgeConfig:
    """Parses and validates a configuration given as TOML text; ``base`` is the directory a
    relative ``secret_file`` is read from."""
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise BridgeConfigError(f"not valid TOML: {e}", path=path) from None
    root = _Table(raw, "", path)

    robot = root.table("robot", required=True)
    pid = robot.integer("pid", lo=1, hi=MAX_PID)
    address = _address(robot, "address")
    robot.done()

    team = root.table("team", required=True)
    team_id = team.integer("id", lo=0, hi=2**32 - 1)
    secret = _secret(team, base)
    broadcast = _address(team, "broadcast")
    group_port = team.integer("group_port", lo=1, hi=65535)
    lrt_port = team.integer("lrt_port", lo=1024, hi=65535 - CLASSES * (MAX_PID + 1))
    team.done()

    peers: list[PeerConfig] = []
    raw_peers = root.get("peer", list, [], what="an array of tables ([[peer]])")
    for i, rp in enumerate(raw_peers):
        pt = _Table(rp, f"peer[{i}]", path)
        peer = PeerConfig(pid=pt.integer("pid", lo=1, hi=MAX_PID), address=_address(pt, "address"))
        pt.done()
        if peer.pid == pid or any(p.pid == peer.pid for p in peers):
            raise pt.err("pid", f"pid {peer.pid} appears twice in the team")
        peers.append(peer)
    if not peers:
        raise BridgeConfigError("at least one [[peer]] is needed", path=path, key="peer")

    zt = root.table("zenoh")
    mode = zt.get("mode", str, "peer")
    if mode not in ("peer", "client"):
        raise zt.err("mode", f"must be 'peer' or 'client', not {mode!r}")
    zconf = ZenohConfig(
        mode=mode,
        listen=_strings(zt, "listen"),
        connect=_strings(zt, "connect"),
        multicast_scouting=zt.get("multicast_scouting", bool, False),
    )
    zt.done()

    publish: list[PublishConfig] = []
    for i, rp in enumerate(root.get("publish", list, [], what="an array of tables ([[publish]])")):
        t = _Table(rp, f"publish[{i}]", path)
        prio = t.get("priority", str, None)
        if prio is not None and prio not in PRIORITIES:
            raise t.err("priority", f"must be one of {', '.join(PRIORITIES)}, not {prio!r}")
        cc = t.get("congestion_control", str, None)
        if cc is not None and cc not in CONGESTION:
            raise t.err("congestion_control", f"must be 'drop' or 'block', not {cc!r}")
        publish.append(PublishConfig(key=_key_expr(t, "key"), priority=prio, congestion_control=cc))
        t.done()

    query: list[QueryConfig] = []
    for i, rq in enumerate(root.get("query", list, [], what="an array of tables ([[query]])")):
        t = _Table(rq, f"query[{i}]", path)
        query.append(QueryConfig(key=_key_expr(t, "key"), timeout_s=t.number("timeout_s", 2.0, lo=0.01, hi=600)))
        t.done()

    lt = root.table("liveliness")
    prefix = lt.get("prefix", str, "cohort/team")
    lt.done()

    tt = root.table("timing")
    d = TimingConfig()
    timing = TimingConfig(
        msg_t=tt.number("msg_t", d.msg_t, lo=0.0001, hi=10),
        fault_detect_t=tt.number("fault_detect_t", d.fault_detect_t, lo=0.01, hi=600),
        heartbeat_t=tt.number("heartbeat_t", d.heartbeat_t, lo=0.001, hi=60),
        handshake_timeout_s=tt.number("handshake_timeout_s", d.handshake_timeout_s, lo=0.1, hi=600),
        idle_timeout_s=tt.number("idle_timeout_s", d.idle_timeout_s, lo=0.1, hi=3600),
        reconnect_s=tt.number("reconnect_s", d.reconnect_s, lo=0.01, hi=600),
        block_timeout_s=tt.number("block_timeout_s", d.block_timeout_s, lo=0.0, hi=600),
        drop_queue_len=tt.integer("drop_queue_len", d.drop_queue_len, lo=1, hi=1_000_000),
        block_queue_len=tt.integer("block_queue_len", d.block_queue_len, lo=1, hi=1_000_000),
        query_proc_t=tt.number("query_proc_t", d.query_proc_t, lo=0.0, hi=60),
        adaptive_proc_t=tt.get("adaptive_proc_t", bool, d.adaptive_proc_t, what="true or false"),
        local_query_timeout_s=tt.number("local_query_timeout_s", d.local_query_timeout_s, lo=0.01, hi=60),
        max_reply_bytes=tt.integer("max_reply_bytes", d.max_reply_bytes, lo=64, hi=60000),
        join_poll_s=tt.number("join_poll_s", d.join_poll_s, lo=0.0, hi=3600),
        join_t=tt.number("join_t", d.join_t, lo=0.001, hi=60),
        start_grace_s=tt.number("start_grace_s", d.start_grace_s, lo=0.0, hi=3600),
        early_repair=tt.get("early_repair", bool, d.early_repair, what="true or false"),
        broadcast_copies=tt.integer("broadcast_copies", d.broadcast_copies, lo=1, hi=4),
        close_timeout_s=tt.number("close_timeout_s", d.close_timeout_s, lo=0.1, hi=600),
    )
    tt.done()
    root.done()

    return BridgeConfig(
        pid=pid,
        address=address,
        team=team_id,
        secret=secret,
        broadcast=broadcast,
        group_port=group_port,
        lrt_port=lrt_port,
        peers=tuple(peers),
        zenoh=zconf,
        publish=tuple(publish),
        query=tuple(query),
        liveliness_prefix=prefix,
        timing=timing,
        path=path,
    )


def load_config(path: str | os.PathLike[str]) -> BridgeConfig:
    """Reads and validates the configuration file at ``path``."""
    p = Path(path)
    try:
        text = p.read_text()
    except OSError as e:
        raise BridgeConfigError(f"cannot read the configuration: {e.strerror}", path=str(p)) from None
    except UnicodeDecodeError:
        raise BridgeConfigError("not valid TOML: not UTF-8 text", path=str(p)) from None
    return parse_config(text, path=str(p), base=p.parent)
