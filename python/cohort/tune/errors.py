"""Typed errors of the tuner. Every failure to apply a knob is one of these, never a no-op."""

from __future__ import annotations


class TuneError(Exception):
    """Base class of every error the tuner reports to the user."""


class SpecError(TuneError):
    """The spec file is unreadable or inconsistent; ``where`` names the offending key."""

    def __init__(self, where: str, message: str) -> None:
        super().__init__(f"{where}: {message}")
        self.where = where
        self.message = message


class KnobError(TuneError):
    """A knob could not be applied (or restored). Carries the path or target and the errno."""

    def __init__(self, target: str, message: str, errno: int | None = None) -> None:
        super().__init__(f"{target}: {message}")
        self.target = target
        self.errno = errno


class AdmissionError(KnobError):
    """SCHED_DEADLINE admission control refused the reservation (EBUSY)."""


class StateError(TuneError):
    """The state directory holds an unrestored session, or a restore failed part-way."""


class AppError(TuneError):
    """An app failed to start, died early, or reported no samples of its metric."""
