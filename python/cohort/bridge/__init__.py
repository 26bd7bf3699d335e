"""The Zenoh bridge: ``cohort bridge --config FILE`` (``python -m cohort.bridge``).

One bridge per robot joins the robot's local Zenoh session and carries the key expressions its
configuration names across the team on Cohort: publications over LRT (Zenoh's priority mapped
onto DSCP and the Wi-Fi access categories), queries over group request-reply, and team
membership as liveliness tokens. See ``docs/bridge.md``.
"""

from __future__ import annotations

from .config import BridgeConfig, BridgeConfigError, MissingSecretError, load_config, parse_config
from .core import Bridge, is_bridged

__all__ = [
    "Bridge",
    "BridgeConfig",
    "BridgeConfigError",
    "MissingSecretError",
    "is_bridged",
    "load_config",
    "parse_config",
]
