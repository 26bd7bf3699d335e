"""The exceptions Cohort's sockets, simulator and medium model raise.

Every one is a :class:`CohortError` and also the built-in exception a Python programmer would
reach for: ``except TimeoutError`` catches :class:`cohort.TimeoutError`, ``except ValueError``
catches a :class:`ConfigError`. Each carries the Rust error's variant as :attr:`~CohortError.kind`
(``"TimedOut"``, ``"Config"``, ``"NotCoordinator"``, ...) and its message as ``str(e)``.
"""

from __future__ import annotations

import builtins

__all__ = [
    "ClosedError",
    "CohortError",
    "ConfigError",
    "IoError",
    "MessageSizeError",
    "StateError",
    "TimeoutError",
]


class CohortError(Exception):
    """Base of every Cohort error.

    ``kind`` is the Rust error's variant name; ``reason`` says why a connection closed
    (``"HandshakeTimedOut"``, ``"Peer"``, ``"TimedOut"``, ``"Local"``, ...) and is ``None``
    otherwise.
    """

    def __init__(self, message: str, kind: str = "", reason: str | None = None) -> None:
        super().__init__(message)
        self.kind = kind
        self.reason = reason


class TimeoutError(CohortError, builtins.TimeoutError):
    """A wait ran out of time (the operation did not happen; try again or give up)."""


class ClosedError(CohortError, ConnectionError):
    """The connection or socket is closed; ``reason`` says why."""


class ConfigError(CohortError, ValueError):
    """Bad input: an address, a secret, a timeout, a scenario."""


class MessageSizeError(CohortError, ValueError):
    """A message or payload too large (or empty) for the protocol."""


class StateError(CohortError, RuntimeError):
    """The call does not fit the socket's state (not the coordinator, not a member, a stale request)."""


class IoError(CohortError, OSError):
    """The operating system refused (``errno`` is set when it gave one)."""
