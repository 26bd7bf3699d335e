"""The bridge itself: one robot's Zenoh session on one side, the team over Cohort on the other.

See ``docs/bridge.md`` for the design; in short:

* publications on a ``[[publish]]`` key go over LRT, on the link of their traffic class
  (:mod:`cohort.bridge.qos`), to every peer whose local session has a subscriber on them
  (each bridge watches the keys the team offers and tells its peers which have one); what
  arrives is put into the local session;
* a local ``get`` on a ``[[query]]`` key is asked of every other robot in one group request
  (GCBRR) by the group's coordinator (a robot that is not the coordinator relays the query to
  it over LRT and gets the answers back the same way);
* every member of the group's view is a liveliness token ``<prefix>/<pid>`` in the local
  session;
* loops are impossible: the bridge's subscribers and queryables only see what other sessions
  send (``Locality.REMOTE``), and everything the bridge puts or asks carries a ``source_info``
  whose sequence number holds the bridge marker; a sample or query bearing it is never
  bridged again, even when two bridges share one Zenoh network.
"""

from __future__ import annotations

import itertools
import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from types import TracebackType
from typing import Any

from cohort.errors import CohortError
from cohort.errors import TimeoutError as CohortTimeout
from cohort.group import GroupSocket

from . import wire
from .config import BridgeConfig
from .links import Counters, InLink, LinkParams, OutLink
from .qos import CLASSES, class_of, priority_code, priority_name, to_zenoh_priority
from .zconf import peer_config

__all__ = ["MARKER_MASK", "MARKER_SN", "Bridge", "is_bridged"]

log = logging.getLogger("cohort.bridge")

# A bridged sample's (or query's) source_info.source_sn: MARKER_SN | origin pid.
MARKER_SN = 0xC0470000
MARKER_MASK = 0xFFFF0000
GROUP_DSCP = 34  # AF41: request-reply rides AC_VI, as in the team scenario
VO = CLASSES[0]
# How long close() waits for the bridge's own threads (each polls its stop flag every 0.1 s).
THREAD_JOIN_S = 2.0
# Routes (class, [[publish]] entry, key -> links) remembered before the cache starts afresh.
ROUTE_CACHE = 4096


def is_bridged(source_info: Any) -> bool:
    """True if a sample or query with this ``source_info`` was put or asked by a Cohort bridge."""
    if source_info is None:
        return False
    try:
        return (int(source_info.source_sn) & MARKER_MASK) == MARKER_SN
    except (AttributeError, TypeError, ValueError):
        return False


def zenoh_config(cfg: BridgeConfig) -> Any:
    z = cfg.zenoh
    return peer_config(list(z.listen), list(z.connect), mode=z.mode, scouting=z.multicast_scouting)


class ProcEstimate:
    """The coordinator's ``query_proc_t``: how long the robots take to answer a group request.

    A robot whose answer (or the request itself) was lost on the air is asked again only after
    ``msg_t + query_proc_t + n·msg_t``, so on a lossy channel every repair round costs one
    ``query_proc_t``: too long and a lost broadcast costs that much latency, too short and a
    robot still answering is asked again (one small broadcast, answered once). With
    ``adaptive`` the estimate follows the serve times the robots report in their replies the way
    RFC 6298 follows round-trip times (``SRTT + 4·RTTVAR``, gains 1/8 and 1/4), starting from
    the configured value, within ``[floor, cap]``; otherwise it stays the configured value."""

    FLOOR_S = 0.0002

    def __init__(self, initial: float, cap: float, adaptive: bool) -> None:
        self._lock = threading.Lock()
        self._initial = initial
        self._cap = max(cap, self.FLOOR_S)
        self._adaptive = adaptive
        self._srtt: float | None = None
        self._rttvar = 0.0

    def observe(self, serve_s: float) -> None:
        if not self._adaptive:
            return
        with self._lock:
            if self._srtt is None:
                self._srtt, self._rttvar = serve_s, serve_s / 2
            else:
                self._rttvar = 0.75 * self._rttvar + 0.25 * abs(self._srtt - serve_s)
                self._srtt = 0.875 * self._srtt + 0.125 * serve_s

    def value(self) -> float:
        with self._lock:
            if self._srtt is None:
                return self._initial
            return min(self._cap, max(self.FLOOR_S, self._srtt + 4 * self._rttvar))


class _Pending:
    """A relayed query waiting for the coordinator's answers."""

    def __init__(self) -> None:
        self.done = threading.Event()
        self.answers: wire.Answers | None = None


def _wants(interest: tuple[frozenset[str], tuple[Any, ...]] | None, offered: str, key: str) -> bool:
    """Whether a peer with this INTEREST gets a sample on ``key`` from the ``[[publish]]`` key
    ``offered``: yes unless it has watched ``offered`` and no subscriber of its includes
    ``key`` (a peer that has not said, or not about this key, gets everything)."""
    if interest is None:
        return True
    watched, matching = interest
    return offered not in watched or any(e.intersects(key) for e in matching)


class _CallbackThreads:
    """The threads eclipse-zenoh runs this bridge's callbacks on (one per subscriber and
    queryable; the watches' matching listeners run on Zenoh's own thread): :meth:`wrap` a
    callback, and :meth:`wait` for every wrapped one's thread to end once its entity is
    undeclared."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._declared = 0
        self._ended: list[threading.Thread] = []
        self._all_ended = threading.Condition(self._lock)

    def wrap(self, fn: Any) -> Any:
        import zenoh

        with self._lock:
            self._declared += 1
        return zenoh.handlers.Callback(fn, drop=self._dropped)

    def _dropped(self) -> None:  # on the callback's own thread, its last call
        with self._lock:
            self._ended.append(threading.current_thread())
            self._all_ended.notify_all()

    def wait(self, timeout: float) -> bool:
        """True if every wrapped callback's thread ended within ``timeout``."""
        deadline = time.monotonic() + timeout
        with self._lock:
            if not self._all_ended.wait_for(lambda: len(self._ended) >= self._declared, timeout):
                return False
            ended = list(self._ended)
        me = threading.current_thread()
        for th in ended:
            if th is not me:
                th.join(max(0.0, deadline - time.monotonic()))
        return not any(th.is_alive() for th in ended if th is not me)


def _key_exprs(keys: tuple[str, ...]) -> tuple[Any, ...]:
    """Zenoh's key expressions for ``keys``; :class:`wire.WireError` names one it refuses."""
    import zenoh

    out = []
    for k in keys:
        try:
            out.append(zenoh.KeyExpr(k))
        except zenoh.ZError:
            raise wire.WireError(f"not a key expression Zenoh accepts: {k!r}") from None
    return tuple(out)


def _told(interest: tuple[frozenset[str], tuple[Any, ...]] | None) -> dict[str, list[str]] | None:
    if interest is None:
        return None
    watched, matching = interest
    return {"watched": sorted(watched), "matching": sorted(str(e) for e in matching)}


class Bridge:
    """One robot's bridge. ``Bridge(cfg).start()``, then :meth:`close` (or use ``with``)."""

    def __init__(self, cfg: BridgeConfig) -> None:
        self.cfg = cfg
        self.counters = Counters()
        self._session: Any = None
        self._source_info: Any = None
        # What this bridge declared in its session, undeclared in this order before it closes.
        self._decls: list[Any] = []
        self._callbacks = _CallbackThreads()
        self._tokens: dict[int, Any] = {}
        self._group: GroupSocket | None = None
        self._in: list[InLink] = []
        self._out: dict[int, dict[int, OutLink]] = {c.index: {} for c in CLASSES}
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._pool = ThreadPoolExecutor(max_workers=8, thread_name_prefix=f"bridge-{cfg.pid}-q")
        self._qids = itertools.count(1)
        self._pending: dict[int, _Pending] = {}
        self._lock = threading.Lock()
        self._publish_keys: list[Any] = []
        # Interest (docs/bridge.md, "Only to robots with a subscriber"): the key expressions the
        # team offered and whether this robot's session has a subscriber on each; per peer, its
        # last INTEREST (None until one arrives: send it everything) as (watched, matching).
        self._interest_lock = threading.RLock()
        self._watch_lock = threading.Lock()  # one caller declares watches at a time
        self._offered: set[str] = set()
        self._matching: dict[str, bool] = {}
        self._peer_interest: dict[int, tuple[frozenset[str], tuple[Any, ...]] | None] = {
            peer.pid: None for peer in cfg.peers
        }
        self._routes: dict[tuple[int, int, str], tuple[OutLink, ...]] = {}
        self._started = time.monotonic()
        # The last membership changes this bridge saw (stats()["membership"]).
        self._history: deque[dict[str, Any]] = deque(maxlen=64)
        self._closing = False
        self._close_step: str | None = None
        self._step_started = 0.0
        # Seconds each step of close() took, in order.
        self.close_steps: dict[str, float] = {}
        t = cfg.timing
        # A robot gives up on its own session after local_query_timeout_s, so no answer takes
        # much longer than that.
        self.proc_t = ProcEstimate(t.query_proc_t, t.local_query_timeout_s + t.msg_t, t.adaptive_proc_t)

    # Life cycle.

    def start(self) -> Bridge:
        """Joins the local Zenoh session, opens every LRT link and the group member, and starts
        bridging. Raises :class:`cohort.CohortError` (a port taken, a bad address) after undoing
        what it had opened."""
        try:
            self._start()
        except BaseException:
            self.close()
            raise
        return self

    def _start(self) -> None:
        import zenoh

        cfg, t = self.cfg, self.cfg.timing
        params = LinkParams(
            secret=cfg.secret,
            team=cfg.team,
            sender_id=cfg.pid,
            handshake_timeout_s=t.handshake_timeout_s,
            idle_timeout_s=t.idle_timeout_s,
            reconnect_s=t.reconnect_s,
            block_timeout_s=t.block_timeout_s,
            drop_queue_len=t.drop_queue_len,
            block_queue_len=t.block_queue_len,
        )
        # Listeners first, so that peers starting at the same time find them.
        for peer in cfg.peers:
            for c in CLASSES:
                link = InLink(
                    peer.pid,
                    f"{cfg.address}:{cfg.lrt_port_for(peer.pid, c.index)}",
                    c,
                    params,
                    self.counters,
                    self._on_message,
                )
                self._in.append(link)
                link.start()
        self._group = GroupSocket.open(
            f"{cfg.address}:{cfg.group_port}",
            f"{cfg.broadcast}:{cfg.group_port}",
            secret=cfg.secret,
            team=cfg.team,
            pid=cfg.pid,
            members=cfg.members,
            dscp=GROUP_DSCP,
            msg_t=t.msg_t,
            fault_detect_t=t.fault_detect_t,
            heartbeat_t=t.heartbeat_t,
            start_grace=t.start_grace_s,
            early_repair=t.early_repair,
            broadcast_copies=t.broadcast_copies,
        )
        for peer in cfg.peers:
            for c in CLASSES:
                out = OutLink(
                    peer.pid,
                    f"{peer.address}:{cfg.lrt_port_for(cfg.pid, c.index)}",
                    c,
                    params,
                    self.counters,
                    on_up=self._greet if c is VO else None,
                )
                self._out[c.index][peer.pid] = out
                out.start()

        self._session = zenoh.open(zenoh_config(cfg))
        # The publisher is never used to publish: its id names this bridge in source_info.
        marker = self._session.declare_publisher(f"{cfg.liveliness_prefix}/{cfg.pid}/bridge")
        self._decls.append(marker)
        self._source_info = zenoh.SourceInfo(marker.id, MARKER_SN | (cfg.pid & 0xFFFF))
        for i, p in enumerate(cfg.publish):
            self._publish_keys.append(zenoh.KeyExpr(p.key))
            sub = self._session.declare_subscriber(
                p.key, self._callbacks.wrap(self._subscriber_callback(i)), allowed_origin=zenoh.Locality.REMOTE
            )
            self._decls.append(sub)
        for q in cfg.query:
            qa = self._session.declare_queryable(
                q.key,
                self._callbacks.wrap(self._queryable_callback(q.timeout_s)),
                complete=False,
                allowed_origin=zenoh.Locality.REMOTE,
            )
            self._decls.append(qa)
        self._watch_offers()
        self._spawn(self._serve_group, "group")
        self._spawn(self._watch_members, "members")
        self._spawn(self._maintain_group, "join")
        log.info(
            "robot %d bridging %d publication and %d query key(s) for team %d (members %s)",
            cfg.pid,
            len(cfg.publish),
            len(cfg.query),
            cfg.team,
            cfg.members,
        )

    def _spawn(self, target: Any, name: str) -> None:
        th = threading.Thread(target=target, name=f"bridge-{self.cfg.pid}-{name}", daemon=True)
        self._threads.append(th)
        th.start()

    def wait_ready(self, timeout: float) -> bool:
        """Waits until every outgoing link is up; False if some were not within ``timeout``."""
        deadline = time.monotonic() + timeout
        for links in self._out.values():
            for link in links.values():
                if not link.wait_up(max(0.0, deadline - time.monotonic())):
                    return False
        return True

    def close(self) -> None:
        """Stops bridging: the liveliness tokens vanish with the session, the links close and
        the group member stops (the others' fault detectors notice). Closing twice does nothing.

        Each step is bounded and the links close in parallel; :attr:`close_steps` tells how long
        each step took, and :attr:`close_step` which one is running (``cohort bridge`` names it
        when closing outlasts ``close_timeout_s``)."""
        with self._lock:
            if self._closing:
                return
            self._closing = True
        self._step("threads")
        self._stop.set()
        links: list[InLink | OutLink] = [*self._in, *(link for d in self._out.values() for link in d.values())]
        for link in links:
            link.signal_stop()
        deadline = time.monotonic() + THREAD_JOIN_S
        for th in self._threads:
            th.join(timeout=max(0.0, deadline - time.monotonic()))
        # The group first: a query still waiting on it ends at once (ClosedError).
        self._step("group")
        if self._group is not None:
            self._group.close()
        # Every link's socket spends its closing period telling its peer; all at once, so the
        # close costs one closing period rather than one per link (32 links in a team of 5).
        self._step("links")
        stoppers = [threading.Thread(target=link.stop, name="bridge-link-stop", daemon=True) for link in links]
        for th in stoppers:
            th.start()
        for th in stoppers:
            th.join()
        self._in.clear()
        for d in self._out.values():
            d.clear()
        self._step("queries")
        self._pool.shutdown(wait=True, cancel_futures=True)
        self._group = None
        self._step("session")
        if self._session is not None:
            try:
                for tok in self._tokens.values():
                    tok.undeclare()
                self._tokens.clear()
                # Zenoh runs each callback on a Python thread of its own until the entity is
                # undeclared; one still ending when the interpreter finalizes aborts the
                # process ("FATAL: exception not rethrown"), so they end here.
                for decl in self._decls:
                    try:
                        decl.undeclare()
                    except Exception as e:  # one gone already: the others still go
                        self.counters.add("close_errors")
                        log.error("undeclaring %s failed: %s", decl, e)
                self._decls.clear()
                if not self._callbacks.wait(THREAD_JOIN_S):
                    log.error("a Zenoh callback thread did not end within %.0f s", THREAD_JOIN_S)
                self._session.close()
            except Exception as e:  # zenoh's own close timeout ("close operation timed out")
                self.counters.add("close_errors")
                log.error("closing the Zenoh session failed: %s", e)
            self._session = None
        self._step(None)

    def _step(self, name: str | None) -> None:
        """Enters close step ``name`` (``None``: closed), timing the one before."""
        now = time.monotonic()
        with self._lock:
            if self._close_step is not None:
                self.close_steps[self._close_step] = round(now - self._step_started, 3)
            self._close_step, self._step_started = name, now

    @property
    def close_step(self) -> str | None:
        """The step :meth:`close` is in (``threads``, ``group``, ``links``, ``queries``,
        ``session``), or ``None`` before and after."""
        with self._lock:
            return self._close_step

    def __enter__(self) -> Bridge:
        return self.start() if self._session is None else self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    # State.

    @property
    def session(self) -> Any:
        """The bridge's own Zenoh session (``None`` before :meth:`start`)."""
        return self._session

    @property
    def zid(self) -> str:
        return str(self._session.zid()) if self._session is not None else ""

    def stats(self) -> dict[str, Any]:
        """Counters (``bridged_out``, ``bridged_in``, ``loops_prevented``, ``dropped_*``,
        ``queries_*``), where a query's time went (``timings``: ``query`` from a local ``get``
        reaching the bridge to its last answer, ``group_round`` the group request alone,
        ``relay`` a query relayed to the coordinator and back, ``serve`` a request this robot
        answered, ``local_get`` this robot's own session answering), the links that are up,
        the group's view and its member's counters (``group``), what each peer last said of
        its subscribers (``interest``: per peer ``None`` before it said, else the key
        expressions it ``watched`` and those ``matching`` a subscriber), the last 64 membership
        changes this bridge saw (``membership``: seconds since start, the robot that
        ``joined`` or ``left``, this bridge's group state and coordinator then)."""
        links_up = {c.name: sorted(pid for pid, link in self._out[c.index].items() if link.up) for c in CLASSES}
        g = self._group
        return {
            "pid": self.cfg.pid,
            "counters": self.counters.snapshot(),
            "timings": self.counters.timings(),
            "links_up": links_up,
            "members": g.members if g is not None and not g.closed else [],
            "coordinator": g.coordinator if g is not None and not g.closed else None,
            "group": g.stats() if g is not None and not g.closed else {},
            "query_proc_t_ms": round(self.proc_t.value() * 1e3, 3),
            "interest": {peer: _told(told) for peer, told in self._peer_interest.items()},
            "membership": self._membership_history(),
        }

    def _membership_history(self) -> list[dict[str, Any]]:
        with self._lock:
            return list(self._history)

    # Publications: local session -> team.

    def _subscriber_callback(self, index: int) -> Any:
        entry = self.cfg.publish[index]
        earlier = self._publish_keys[:index]

        def on_sample(sample: Any) -> None:
            try:
                self._bridge_out(sample, entry.priority, entry.congestion_control, earlier)
            except Exception as e:  # never raise into zenoh's thread
                self.counters.add("dropped_bad_sample")
                log.error("sample on %s not bridged: %s", sample.key_expr, e)

        return on_sample

    def _bridge_out(self, sample: Any, prio: str | None, cc: str | None, earlier: list[Any]) -> None:
        import zenoh

        if is_bridged(sample.source_info):
            self.counters.add("loops_prevented")
            return
        # A key matched by two [[publish]] entries goes out once, for the first.
        if any(k.includes(sample.key_expr) for k in earlier):
            return
        code = priority_code(prio or priority_name(sample.priority))
        key = str(sample.key_expr)
        cls = class_of(code).index
        links = self._route(cls, len(earlier), key)
        unwanted = len(self._out[cls]) - len(links)
        if unwanted:
            self.counters.add("unwanted", unwanted)
        if not links:
            return
        block = cc == "block" if cc is not None else sample.congestion_control == zenoh.CongestionControl.BLOCK
        att = sample.attachment
        msg = wire.encode(
            wire.Sample(
                key=key,
                payload=sample.payload.to_bytes(),
                encoding=str(sample.encoding),
                priority=code,
                block=block,
                express=bool(sample.express),
                delete=sample.kind == zenoh.SampleKind.DELETE,
                attachment=None if att is None else att.to_bytes(),
                origin=self.cfg.pid,
            )
        )
        self.counters.add("bridged_out")
        for link in links:
            link.send(msg, block)

    # Interest: a sample goes only to the robots that have a subscriber on it.

    def _route(self, cls: int, entry: int, key: str) -> tuple[OutLink, ...]:
        """The links of class ``cls`` a sample on ``key`` (from ``[[publish]]`` entry
        ``entry``) goes to: every peer but those whose last INTEREST watched the entry's key
        and matched none that includes ``key``."""
        routes = self._routes  # replaced (not cleared) when an INTEREST arrives
        links = routes.get((cls, entry, key))
        if links is None:
            offered = self.cfg.publish[entry].key
            links = tuple(
                link for pid, link in self._out[cls].items() if _wants(self._peer_interest.get(pid), offered, key)
            )
            if len(routes) >= ROUTE_CACHE:
                routes.clear()
            routes[(cls, entry, key)] = links
        return links

    def routes(self, key: str) -> list[int]:
        """The robots a sample on ``key`` would go to now (those a ``[[publish]]`` entry covers
        and whose session has a subscriber on it, or that have not said yet): tests and
        ``cohort bridge`` users wait on it as they would on a Zenoh matching status."""
        for i, k in enumerate(self._publish_keys):
            if k.includes(key):
                return sorted(link.peer for link in self._route(VO.index, i, key))
        return []

    def _greet(self, link: OutLink) -> None:
        """A new ``vo`` link: what this robot may send, then what it wants."""
        with self._interest_lock:
            link.send(wire.encode(wire.Offer(tuple(p.key for p in self.cfg.publish))), True)
            link.send(self._interest_message(), True)

    def _interest_message(self) -> bytes:
        return wire.encode(wire.Interest(tuple(sorted(self._matching.items()))))

    def _announce_interest(self) -> None:
        """Tells every peer this robot's interest (under ``_interest_lock``: messages leave in
        the order their state was read, so each peer ends with the latest)."""
        msg = self._interest_message()
        for link in self._out[VO.index].values():
            if link.up:
                link.send(msg, True)

    def _on_offer(self, keys: tuple[str, ...]) -> None:
        _key_exprs(keys)  # one that Zenoh refuses: the whole message is dropped
        with self._interest_lock:
            self._offered.update(keys)
        self._watch_offers()
        with self._interest_lock:
            # The peer that offered may be a new process: it needs this robot's state.
            self._announce_interest()

    def _watch_offers(self) -> None:
        """Watches every offered key expression not watched yet: a publisher that never
        publishes, whose matching status says whether an application's subscriber (in another
        session: the bridge's own do not count) includes any of its keys. Zenoh is called
        outside ``_interest_lock``, whose holders never call it (its callbacks take the lock)."""
        import zenoh

        with self._watch_lock:
            session = self._session
            if session is None:  # before the session opens: _start watches them then
                return
            with self._interest_lock:
                new = sorted(self._offered - set(self._matching))
            for key in new:
                pub = session.declare_publisher(key, allowed_destination=zenoh.Locality.REMOTE)
                # On Zenoh's own thread (`indirect=False`): the callback only queues a message,
                # and a Python thread per watch, started from the link thread that declares it,
                # would be a daemon one that the interpreter's exit can catch still running.
                listener = pub.declare_matching_listener(
                    zenoh.handlers.Callback(self._matching_callback(key), indirect=False)
                )
                self._decls[:0] = [listener, pub]
                matching = pub.matching_status.matching
                with self._interest_lock:
                    # A change the listener has already reported is newer than this reading.
                    self._matching.setdefault(key, matching)
            if new:
                with self._interest_lock:
                    self._announce_interest()

    def _matching_callback(self, key: str) -> Callable[[Any], None]:
        def on_status(status: Any) -> None:
            self._on_matching(key, status.matching)

        return on_status

    def _on_matching(self, key: str, matching: bool) -> None:
        with self._interest_lock:
            if self._matching.get(key) == matching:
                return
            self._matching[key] = matching
            self._announce_interest()

    def _on_interest(self, peer: int, msg: wire.Interest) -> None:
        if peer not in self._peer_interest:
            raise wire.WireError(f"an interest from robot {peer}, not a peer")
        keys = tuple(k for k, _ in msg.entries)
        exprs = _key_exprs(keys)  # one that Zenoh refuses: the whole message is dropped
        watched = frozenset(keys)
        matching = tuple(e for e, (_, m) in zip(exprs, msg.entries, strict=True) if m)
        self._peer_interest[peer] = (watched, matching)
        self._routes = {}

    # LRT -> local session (samples), and the relayed queries and their answers.

    def _on_message(self, peer: int, data: bytes) -> None:
        try:
            msg = wire.decode(data)
            if isinstance(msg, wire.Interest):
                self._on_interest(peer, msg)
            elif isinstance(msg, wire.Offer):
                self._on_offer(msg.keys)
        except wire.WireError as e:
            self.counters.add("dropped_bad_message")
            log.error("message from robot %d dropped: %s", peer, e)
            return
        if isinstance(msg, (wire.Interest, wire.Offer)):
            return
        if isinstance(msg, wire.Sample):
            self._put_local(msg)
        elif isinstance(msg, wire.Query):
            self._pool.submit(self._coordinate_relayed, msg)
        elif isinstance(msg, wire.GroupReply):  # belongs in a group reply, never on a link
            self.counters.add("dropped_bad_message")
            log.error("message from robot %d dropped: a group reply on an LRT link", peer)
        else:
            with self._lock:
                pending = self._pending.get(msg.query_id)
            if pending is None:
                self.counters.add("answers_late")
                return
            pending.answers = msg
            pending.done.set()

    def _put_local(self, s: wire.Sample) -> None:
        import zenoh

        session = self._session
        if session is None:
            return
        cc = zenoh.CongestionControl.BLOCK if s.block else zenoh.CongestionControl.DROP
        kw: dict[str, Any] = {
            "congestion_control": cc,
            "priority": to_zenoh_priority(s.priority),
            "express": s.express,
            "attachment": s.attachment,
            "source_info": self._source_info,
        }
        if s.delete:
            session.delete(s.key, **kw)
        else:
            session.put(s.key, s.payload, encoding=s.encoding or None, **kw)
        self.counters.add("bridged_in")

    # Queries: a local get -> the team.

    def _queryable_callback(self, timeout_s: float) -> Any:
        def on_query(query: Any) -> None:
            if is_bridged(query.source_info):
                self.counters.add("loops_prevented")
                query.drop()
                return
            payload = query.payload
            att = query.attachment
            q = wire.Query(
                query_id=next(self._qids) & 0xFFFFFFFF,
                origin=self.cfg.pid,
                timeout_ms=int(timeout_s * 1000),
                key=str(query.key_expr),
                parameters=str(query.parameters),
                payload=None if payload is None else payload.to_bytes(),
                encoding="" if query.encoding is None else str(query.encoding),
                attachment=None if att is None else att.to_bytes(),
            )
            self.counters.add("queries_asked")
            self._pool.submit(self._answer_local_query, query, q, time.monotonic())

        return on_query

    def _answer_local_query(self, query: Any, q: wire.Query, asked_at: float) -> None:
        try:
            replies, failed = self._ask_team(q)
            for r in replies:
                try:
                    query.reply(r.key, r.payload, encoding=r.encoding or None)
                    self.counters.add("query_replies")
                except Exception as e:  # a reply on a key this query does not accept
                    self.counters.add("query_replies_refused")
                    log.error("reply on %s to a query on %s refused: %s", r.key, q.key, e)
            if failed:
                self.counters.add("query_robots_failed", failed)
        except Exception as e:
            self.counters.add("queries_failed")
            log.error("query on %s not answered by the team: %s", q.key, e)
        finally:
            # Recorded before the drop that completes the asker's `get`, so that whoever sees
            # the answer also sees its timing in the stats.
            self.counters.observe("query", time.monotonic() - asked_at)
            query.drop()

    def _ask_team(self, q: wire.Query) -> tuple[list[wire.Reply], int]:
        g = self._group
        if g is None:
            return [], 0
        if g.is_coordinator:
            return self._group_request(q, exclude={self.cfg.pid})
        coord = g.coordinator
        link = self._out[VO.index].get(coord) if coord is not None else None
        if link is None:
            raise CohortError(f"no coordinator to relay to (coordinator {coord})", kind="NoCoordinator")
        pending = _Pending()
        with self._lock:
            self._pending[q.query_id] = pending
        started = time.monotonic()
        try:
            if not link.send(wire.encode(q), block=True):
                raise CohortError(f"the link to coordinator {coord} is down", kind="LinkDown")
            # The coordinator's own deadline plus one LRT exchange.
            if not pending.done.wait(q.timeout_ms / 1000 + 1.0):
                raise CohortTimeout(f"the coordinator (robot {coord}) did not answer", kind="TimedOut")
            assert pending.answers is not None
            self.counters.observe("relay", time.monotonic() - started)
            return list(pending.answers.replies), pending.answers.failed
        finally:
            with self._lock:
                self._pending.pop(q.query_id, None)

    def _group_request(self, q: wire.Query, exclude: set[int]) -> tuple[list[wire.Reply], int]:
        """The coordinator's side: one group request to every member not in ``exclude``."""
        g = self._group
        assert g is not None
        pids = [p for p in g.members if p not in exclude]
        replies: list[wire.Reply] = []
        failed = 0
        if pids:
            out = g.request_reply(pids, wire.encode(q), proc_t=self.proc_t.value(), timeout=q.timeout_ms / 1000)
            self.counters.add("group_requests")
            self.counters.observe("group_round", out.duration_s)
            if out.broadcasts > 1:
                self.counters.add("group_rebroadcasts", out.broadcasts - 1)
            for pid in sorted(out.replies):
                try:
                    answer = wire.decode(out.replies[pid])
                    if not isinstance(answer, wire.GroupReply):
                        raise wire.WireError(f"a group reply of kind {type(answer).__name__}")
                except wire.WireError as e:
                    failed += 1
                    self.counters.add("dropped_bad_message")
                    log.error("answer of robot %d dropped: %s", pid, e)
                    continue
                replies.extend(answer.replies)
                self.proc_t.observe(answer.serve_us / 1e6)
            failed += len(out.failed)
        return replies, failed

    def _coordinate_relayed(self, q: wire.Query) -> None:
        """A query another robot relayed: ask the rest of the team and this robot's own
        session, and send the answers back to it."""
        replies: list[wire.Reply] = []
        failed = 0
        local: list[wire.Reply] = []

        def ask_local() -> None:
            local.extend(self._local_get(q))

        th = threading.Thread(target=ask_local, name=f"bridge-{self.cfg.pid}-local-get", daemon=True)
        th.start()
        try:
            g = self._group
            if g is not None and g.is_coordinator:
                replies, failed = self._group_request(q, exclude={self.cfg.pid, q.origin})
            else:
                failed = 1  # no longer the coordinator: the asker gets what this robot has
        except Exception as e:
            self.counters.add("queries_failed")
            log.error("relayed query from robot %d on %s failed: %s", q.origin, q.key, e)
        th.join()
        replies = local + replies
        link = self._out[VO.index].get(q.origin)
        if link is not None:
            link.send(wire.encode(wire.Answers(query_id=q.query_id, replies=tuple(replies), failed=failed)), block=True)

    # The member's side of group requests.

    def _serve_group(self) -> None:
        while not self._stop.is_set():
            g = self._group
            if g is None or g.closed:
                return
            try:
                req = g.next_request(timeout=0.1)
            except CohortTimeout:
                continue
            except CohortError:
                if self._stop.is_set():
                    return
                continue
            self._pool.submit(self._serve_request, req)

    def _serve_request(self, req: Any) -> None:
        g = self._group
        try:
            msg = wire.decode(req.data)
            if not isinstance(msg, wire.Query):
                raise wire.WireError("a group request that is not a query")
            replies = self._local_get(msg)
        except Exception as e:
            self.counters.add("dropped_bad_message")
            log.error("group request dropped: %s", e)
            replies = []
        limit = self.cfg.timing.max_reply_bytes
        # From the request's arrival at this member's socket, thread wake-ups included: what
        # the coordinator waits for.
        serve_us = int(req.age * 1e6)
        data = wire.encode(wire.GroupReply(tuple(replies), serve_us))
        while len(data) > limit and replies:
            replies = replies[:-1]
            self.counters.add("query_replies_truncated")
            data = wire.encode(wire.GroupReply(tuple(replies), serve_us))
        if g is not None and not g.closed:
            try:
                # Timed before the reply leaves, for the same reason as a query's timing.
                self.counters.observe("serve", req.age)
                g.reply(req, data)
                self.counters.add("queries_served")
            except CohortError as e:
                log.error("reply to the coordinator failed: %s", e)

    def _local_get(self, q: wire.Query) -> list[wire.Reply]:
        """Asks this robot's local session (never this bridge's own queryables)."""
        import zenoh

        session = self._session
        if session is None:
            return []
        selector = f"{q.key}?{q.parameters}" if q.parameters else q.key
        timeout = min(self.cfg.timing.local_query_timeout_s, q.timeout_ms / 1000)
        kw: dict[str, Any] = {}
        if q.payload is not None:
            kw["payload"] = q.payload
            if q.encoding:
                kw["encoding"] = q.encoding
        if q.attachment is not None:
            kw["attachment"] = q.attachment
        out: list[wire.Reply] = []
        started = time.monotonic()
        for r in session.get(
            selector,
            target=zenoh.QueryTarget.ALL,
            consolidation=zenoh.ConsolidationMode.NONE,
            timeout=timeout,
            allowed_destination=zenoh.Locality.REMOTE,
            source_info=self._source_info,
            **kw,
        ):
            if r.ok is not None:
                out.append(
                    wire.Reply(key=str(r.ok.key_expr), payload=r.ok.payload.to_bytes(), encoding=str(r.ok.encoding))
                )
        self.counters.observe("local_get", time.monotonic() - started)
        return out

    # Membership -> liveliness tokens.

    def _watch_members(self) -> None:
        prefix = self.cfg.liveliness_prefix
        while not self._stop.is_set():
            g, session = self._group, self._session
            if g is None or session is None or g.closed:
                return
            try:
                members = set(g.members)
            except CohortError:
                members = set()
            members.add(self.cfg.pid)
            for pid in sorted(members - set(self._tokens)):
                self._tokens[pid] = session.liveliness().declare_token(f"{prefix}/{pid}")
                if pid != self.cfg.pid and self._seen_members:
                    self._membership("joined", pid, g)
                    log.warning("robot %d joined the team", pid)
            for pid in sorted(set(self._tokens) - members):
                self._tokens.pop(pid).undeclare()
                self.counters.add("members_lost")
                self._membership("left", pid, g)
                log.error("robot %d left the team (its fault detector or a leave)", pid)
            self._seen_members = True
            self._stop.wait(0.1)

    _seen_members = False

    def _membership(self, change: str, pid: int, g: GroupSocket) -> None:
        try:
            state, coord = g.state, g.coordinator
        except CohortError:
            state, coord = "closed", None
        with self._lock:
            self._history.append(
                {"t_s": round(time.monotonic() - self._started, 3), change: pid, "state": state, "coordinator": coord}
            )

    def _maintain_group(self) -> None:
        """Readmits robots whose bridge restarted: while a robot of the configured team is not
        in the group, the coordinator runs a join poll every ``join_poll_s``; a bridge the
        group expelled (it restarted with the static member list after the others had removed
        it, or started late) asks to join until admitted. With the whole team in the group
        there is no poll: the coordinator runs one operation at a time, and a poll (open
        ``join_t``) would hold every query asked meanwhile."""
        t = self.cfg.timing
        next_poll = time.monotonic() + t.join_poll_s
        while not self._stop.is_set():
            g = self._group
            if g is None or g.closed:
                return
            try:
                if g.state == "outside" or g.state == "joining":
                    members = g.join(timeout=max(t.join_poll_s, 0.5))
                    log.warning("robot %d (re)admitted to the team: members %s", self.cfg.pid, members)
                elif (
                    t.join_poll_s > 0
                    and g.is_coordinator
                    and time.monotonic() >= next_poll
                    and not set(self.cfg.members) <= set(g.members)
                ):
                    next_poll = time.monotonic() + t.join_poll_s
                    for pid in g.check_joins(t.join_t, timeout=t.join_t + 2.0):
                        self.counters.add("members_admitted")
                        log.warning("robot %d admitted to the team", pid)
            except CohortError:
                pass  # a join not yet answered, or a poll cut short: try again
            self._stop.wait(0.05)
