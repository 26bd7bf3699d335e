"""Zenoh's quality of service onto Cohort's: priority -> traffic class (DSCP, Wi-Fi access
category, ``SO_PRIORITY``), congestion control -> what the bridge does when a link is busy.

Each class is its own LRT connection per pair of robots, so a bulk ``background`` stream never
holds a ``real_time`` sample behind it (head-of-line blocking stays within a class) and the
card's access categories schedule the classes on the air.

=================================  =======  ==========  =======  ============
Zenoh priority                     class    DSCP        Wi-Fi    SO_PRIORITY
=================================  =======  ==========  =======  ============
REAL_TIME, INTERACTIVE_HIGH        ``vo``   46 (EF)     AC_VO    6
INTERACTIVE_LOW, DATA_HIGH         ``vi``   34 (AF41)   AC_VI    5
DATA, DATA_LOW                     ``be``   0           AC_BE    0
BACKGROUND                         ``bk``   8 (CS1)     AC_BK    1
=================================  =======  ==========  =======  ============
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["CLASSES", "TrafficClass", "class_of", "priority_code", "priority_name"]


@dataclass(frozen=True)
class TrafficClass:
    index: int
    name: str
    dscp: int
    access_category: str
    so_priority: int


CLASSES = (
    TrafficClass(0, "vo", 46, "AC_VO", 6),
    TrafficClass(1, "vi", 34, "AC_VI", 5),
    TrafficClass(2, "be", 0, "AC_BE", 0),
    TrafficClass(3, "bk", 8, "AC_BK", 1),
)

# Zenoh's priorities by their wire code (1 = REAL_TIME ... 7 = BACKGROUND), lower-case.
PRIORITY_NAMES = ("real_time", "interactive_high", "interactive_low", "data_high", "data", "data_low", "background")
_CLASS_OF_CODE = {1: 0, 2: 0, 3: 1, 4: 1, 5: 2, 6: 2, 7: 3}


def priority_name(priority: Any) -> str:
    """``zenoh.Priority.REAL_TIME`` -> ``"real_time"`` (zenoh's enums are not hashable)."""
    return str(priority).rsplit(".", 1)[-1].lower()


def priority_code(name: str) -> int:
    """``"real_time"`` -> 1 ... ``"background"`` -> 7, Zenoh's own numbering."""
    return PRIORITY_NAMES.index(name) + 1


def to_zenoh_priority(code: int) -> Any:
    import zenoh

    return getattr(zenoh.Priority, PRIORITY_NAMES[code - 1].upper())


def class_of(code: int) -> TrafficClass:
    """The traffic class carrying samples of Zenoh priority ``code``."""
    return CLASSES[_CLASS_OF_CODE[code]]
