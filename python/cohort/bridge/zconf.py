"""Zenoh session configurations with explicit endpoints, shared by the bridge, its bench and
tests, and the group bench's Zenoh baseline (``cohort.zenoh_rr``)."""

from __future__ import annotations

import json
from typing import Any


def peer_config(listen: list[str], connect: list[str], *, mode: str = "peer", scouting: bool = False) -> Any:
    """A Zenoh configuration in ``mode`` listening on and connecting to the given endpoints;
    multicast scouting and gossip on or off together (off: no discovery traffic competes with
    the measured exchange on a shared channel)."""
    import zenoh

    conf = zenoh.Config()
    conf.insert_json5("mode", json.dumps(mode))
    conf.insert_json5("listen/endpoints", json.dumps(listen))
    conf.insert_json5("connect/endpoints", json.dumps(connect))
    conf.insert_json5("scouting/multicast/enabled", json.dumps(scouting))
    conf.insert_json5("scouting/gossip/enabled", json.dumps(scouting))
    return conf
