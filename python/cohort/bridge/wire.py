"""The bridge's messages inside LRT messages and group requests/replies.

All integers big-endian. Every message starts with ``version u8 = 1`` and ``kind u8``:

* ``SAMPLE`` (LRT, one per Zenoh put or delete): ``flags u8`` (bit 0 delete, bit 1 express,
  bit 2 congestion control BLOCK, bit 3 has attachment), ``priority u8`` (Zenoh's code,
  1-7), ``origin pid u32``, ``key str16``, ``encoding str16``, ``[attachment bytes32]``,
  payload (the rest).
* ``QUERY`` (LRT to the group's coordinator, and the body of every group request): ``query
  id u32``, ``origin pid u32``, ``timeout ms u32``, ``flags u8`` (bit 0 has payload, bit 1
  has attachment), ``key str16``, ``parameters str16``, ``encoding str16``, ``[attachment
  bytes32]``, payload (the rest).
* ``ANSWERS`` (LRT from the coordinator to the robot that asked): ``query id u32``, ``failed
  u16`` (robots that did not answer), then replies.
* ``GROUP_REPLY`` (a robot's reply to a group request): ``serve us u32`` (the robot's time
  from the request to its answer, which the coordinator's ``query_proc_t`` estimate
  follows), then replies.
* ``OFFER`` (LRT, ``vo``, sent first on every new link): ``count u16`` then ``count`` key
  expressions (str16), the sender's ``[[publish]]`` keys: what it may send.
* ``INTEREST`` (LRT, ``vo``): ``count u16`` then ``count`` entries, each a key expression
  (str16) the team offered and ``matching u8`` (1: the sender's local session has a
  subscriber on it now). The whole set each time, so the latest message alone tells the
  state. A robot sends a sample on its ``[[publish]]`` key ``K`` to a peer unless the peer's
  last ``INTEREST`` lists ``K`` and no matching entry includes the sample's key.
* Replies (in ``ANSWERS`` and ``GROUP_REPLY``) are ``count u16`` then ``count`` replies, each
  ``key str16``, ``encoding str16``, ``payload bytes32``.

``str16`` is a u16 length and UTF-8 bytes; ``bytes32`` a u32 length and bytes. A message that
does not parse raises :class:`WireError` (the bridge counts it and drops it).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

__all__ = ["Answers", "GroupReply", "Interest", "Offer", "Query", "Reply", "Sample", "WireError", "decode", "encode"]

VERSION = 1
SAMPLE, QUERY, ANSWERS, GROUP_REPLY, OFFER, INTEREST = 1, 2, 3, 4, 5, 6

F_DELETE, F_EXPRESS, F_BLOCK, F_ATTACHMENT = 1, 2, 4, 8
Q_PAYLOAD, Q_ATTACHMENT = 1, 2


class WireError(ValueError):
    """A bridge message that does not parse."""


@dataclass(frozen=True)
class Sample:
    key: str
    payload: bytes
    encoding: str
    priority: int
    block: bool
    express: bool = False
    delete: bool = False
    attachment: bytes | None = None
    origin: int = 0


@dataclass(frozen=True)
class Query:
    query_id: int
    origin: int
    timeout_ms: int
    key: str
    parameters: str = ""
    payload: bytes | None = None
    encoding: str = ""
    attachment: bytes | None = None


@dataclass(frozen=True)
class Reply:
    key: str
    payload: bytes
    encoding: str


@dataclass(frozen=True)
class Answers:
    query_id: int
    replies: tuple[Reply, ...]
    failed: int = 0


@dataclass(frozen=True)
class GroupReply:
    replies: tuple[Reply, ...]
    serve_us: int = 0


@dataclass(frozen=True)
class Offer:
    keys: tuple[str, ...]


@dataclass(frozen=True)
class Interest:
    """``(key expression, a local subscriber matches it)`` for every key the sender watches."""

    entries: tuple[tuple[str, bool], ...]


class _Writer:
    def __init__(self) -> None:
        self.parts: list[bytes] = []

    def u8(self, v: int) -> None:
        self.parts.append(struct.pack(">B", v))

    def u16(self, v: int) -> None:
        self.parts.append(struct.pack(">H", v))

    def u32(self, v: int) -> None:
        self.parts.append(struct.pack(">I", v))

    def str16(self, s: str) -> None:
        b = s.encode()
        if len(b) > 0xFFFF:
            raise WireError(f"string of {len(b)} bytes exceeds 65535")
        self.u16(len(b))
        self.parts.append(b)

    def bytes32(self, b: bytes) -> None:
        self.u32(len(b))
        self.parts.append(b)

    def raw(self, b: bytes) -> None:
        self.parts.append(b)

    def finish(self) -> bytes:
        return b"".join(self.parts)


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data = memoryview(data)
        self.pos = 0

    def take(self, n: int) -> bytes:
        if self.pos + n > len(self.data):
            raise WireError(f"truncated message: needs {self.pos + n} bytes, has {len(self.data)}")
        b = bytes(self.data[self.pos : self.pos + n])
        self.pos += n
        return b

    def u8(self) -> int:
        v: int = struct.unpack(">B", self.take(1))[0]
        return v

    def u16(self) -> int:
        v: int = struct.unpack(">H", self.take(2))[0]
        return v

    def u32(self) -> int:
        v: int = struct.unpack(">I", self.take(4))[0]
        return v

    def str16(self) -> str:
        try:
            return self.take(self.u16()).decode()
        except UnicodeDecodeError as e:
            raise WireError(f"string not UTF-8: {e}") from None

    def bytes32(self) -> bytes:
        return self.take(self.u32())

    def rest(self) -> bytes:
        b = bytes(self.data[self.pos :])
        self.pos = len(self.data)
        return b

    def end(self) -> None:
        if self.pos != len(self.data):
            raise WireError(f"{len(self.data) - self.pos} trailing bytes")


def _header(w: _Writer, kind: int) -> None:
    w.u8(VERSION)
    w.u8(kind)


Message = Sample | Query | Answers | GroupReply | Offer | Interest


def encode(msg: Message) -> bytes:
    w = _Writer()
    if isinstance(msg, Sample):
        _header(w, SAMPLE)
        flags = (
            (F_DELETE if msg.delete else 0)
            | (F_EXPRESS if msg.express else 0)
            | (F_BLOCK if msg.block else 0)
            | (F_ATTACHMENT if msg.attachment is not None else 0)
        )
        w.u8(flags)
        w.u8(msg.priority)
        w.u32(msg.origin)
        w.str16(msg.key)
        w.str16(msg.encoding)
        if msg.attachment is not None:
            w.bytes32(msg.attachment)
        w.raw(msg.payload)
    elif isinstance(msg, Query):
        _header(w, QUERY)
        _query_body(w, msg)
    elif isinstance(msg, Answers):
        _header(w, ANSWERS)
        w.u32(msg.query_id)
        w.u16(min(msg.failed, 0xFFFF))
        _replies(w, msg.replies)
    elif isinstance(msg, GroupReply):
        _header(w, GROUP_REPLY)
        w.u32(min(max(msg.serve_us, 0), 0xFFFFFFFF))
        _replies(w, msg.replies)
    elif isinstance(msg, Offer):
        _header(w, OFFER)
        _count(w, len(msg.keys))
        for k in msg.keys:
            w.str16(k)
    else:
        _header(w, INTEREST)
        _count(w, len(msg.entries))
        for k, matching in msg.entries:
            w.str16(k)
            w.u8(1 if matching else 0)
    return w.finish()


def _count(w: _Writer, n: int) -> None:
    if n > 0xFFFF:
        raise WireError(f"{n} key expressions exceed 65535")
    w.u16(n)


def _query_body(w: _Writer, q: Query) -> None:
    w.u32(q.query_id)
    w.u32(q.origin)
    w.u32(q.timeout_ms)
    w.u8((Q_PAYLOAD if q.payload is not None else 0) | (Q_ATTACHMENT if q.attachment is not None else 0))
    w.str16(q.key)
    w.str16(q.parameters)
    w.str16(q.encoding)
    if q.attachment is not None:
        w.bytes32(q.attachment)
    w.raw(q.payload or b"")


def decode(data: bytes) -> Message:
    """Parses one LRT message, group request or group reply."""
    r = _Reader(data)
    version = r.u8()
    if version != VERSION:
        raise WireError(f"unknown version {version}")
    kind = r.u8()
    if kind == SAMPLE:
        flags = r.u8()
        priority = r.u8()
        if not 1 <= priority <= 7:
            raise WireError(f"priority {priority} out of 1..7")
        origin = r.u32()
        key = r.str16()
        encoding = r.str16()
        attachment = r.bytes32() if flags & F_ATTACHMENT else None
        return Sample(
            key=key,
            payload=r.rest(),
            encoding=encoding,
            priority=priority,
            block=bool(flags & F_BLOCK),
            express=bool(flags & F_EXPRESS),
            delete=bool(flags & F_DELETE),
            attachment=attachment,
            origin=origin,
        )
    if kind == QUERY:
        query_id, origin, timeout_ms, flags = r.u32(), r.u32(), r.u32(), r.u8()
        key, parameters, encoding = r.str16(), r.str16(), r.str16()
        attachment = r.bytes32() if flags & Q_ATTACHMENT else None
        payload = r.rest()
        return Query(
            query_id=query_id,
            origin=origin,
            timeout_ms=timeout_ms,
            key=key,
            parameters=parameters,
            payload=payload if flags & Q_PAYLOAD else None,
            encoding=encoding,
            attachment=attachment,
        )
    if kind == ANSWERS:
        query_id, failed = r.u32(), r.u16()
        return Answers(query_id=query_id, replies=_read_replies(r), failed=failed)
    if kind == GROUP_REPLY:
        serve_us = r.u32()
        return GroupReply(replies=_read_replies(r), serve_us=serve_us)
    if kind == OFFER:
        keys = tuple(r.str16() for _ in range(r.u16()))
        r.end()
        return Offer(keys)
    if kind == INTEREST:
        entries = tuple(_interest_entry(r) for _ in range(r.u16()))
        r.end()
        return Interest(entries)
    raise WireError(f"unknown message kind {kind}")


def _interest_entry(r: _Reader) -> tuple[str, bool]:
    key, matching = r.str16(), r.u8()
    if matching > 1:
        raise WireError(f"matching flag {matching} is neither 0 nor 1")
    return key, matching == 1


def _replies(w: _Writer, replies: tuple[Reply, ...]) -> None:
    if len(replies) > 0xFFFF:
        raise WireError(f"{len(replies)} replies exceed 65535")
    w.u16(len(replies))
    for rep in replies:
        w.str16(rep.key)
        w.str16(rep.encoding)
        w.bytes32(rep.payload)


def _read_replies(r: _Reader) -> tuple[Reply, ...]:
    out = tuple(Reply(key=r.str16(), encoding=r.str16(), payload=r.bytes32()) for _ in range(r.u16()))
    r.end()
    return out
