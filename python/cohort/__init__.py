"""Cohort's Python package.

The protocols and the runtime are Rust. This package exposes them to Python through the
native module ``cohort._native`` (built by maturin from ``crates/cohort-py``):

* :class:`cohort.LrtSocket`: the coded transport (reliable, in-order messages over UDP),
  :class:`cohort.LrtListener`: one port for connections from many robots, and
  :class:`cohort.MpLrtSocket`: one connection over several paths (every radio a robot has);
* :class:`cohort.GroupSocket`: group request-reply and membership (GCBRR);
* :class:`cohort.PathStatsService`: per-path multipath statistics shared with the team;
* :mod:`cohort.sim`: the deterministic simulator; :mod:`cohort.medium`: the 802.11 model's
  saturation runs; :mod:`cohort.beams`: seed 001's chain and beam allocation;
* :mod:`cohort.errors`: the exceptions they raise.

It also holds the tools written in Python: :mod:`cohort.tune` (the OS tuner behind
``cohort tune``) and :mod:`cohort.plot` (benchmark charts). Those never load the native
module, so they work from a checkout without a build. :mod:`cohort.bridge` (the Zenoh bridge
behind ``cohort bridge``) is Python too, over the native sockets.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from cohort.errors import (
    ClosedError,
    CohortError,
    ConfigError,
    IoError,
    MessageSizeError,
    StateError,
    TimeoutError,
)

if TYPE_CHECKING:
    from cohort import beams, medium, sim
    from cohort.federated import PathStatsService
    from cohort.group import GroupSocket
    from cohort.lrt import LrtListener, LrtSocket, MpLrtSocket

__version__ = "0.1.0"

__all__ = [
    "ClosedError",
    "CohortError",
    "ConfigError",
    "GroupSocket",
    "IoError",
    "LrtListener",
    "LrtSocket",
    "MessageSizeError",
    "MpLrtSocket",
    "PathStatsService",
    "StateError",
    "TimeoutError",
    "beams",
    "medium",
    "sim",
]

# Loaded on first use, so `cohort.tune` and `cohort.plot` need no native module.
_LAZY = {
    "LrtSocket": ("cohort.lrt", "LrtSocket"),
    "LrtListener": ("cohort.lrt", "LrtListener"),
    "MpLrtSocket": ("cohort.lrt", "MpLrtSocket"),
    "GroupSocket": ("cohort.group", "GroupSocket"),
    "PathStatsService": ("cohort.federated", "PathStatsService"),
}
_LAZY_MODULES = {"sim", "medium", "beams", "lrt", "group", "federated"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        module, attr = _LAZY[name]
        value = getattr(importlib.import_module(module), attr)
    elif name in _LAZY_MODULES:
        value = importlib.import_module(f"cohort.{name}")
    else:
        raise AttributeError(f"module 'cohort' has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
