"""The jumbogate data plane as the controller sees it.

* `names`: P4Info names of tables, actions, counters, meters, digests.
* `DropReason`: the drop-reason enum, generated from p4src/include/drop_reasons.p4.
* `constants`: port roles, counter indices, MTUs mirrored from defines.p4.
* `entries`: build finsy entities (table entries, ECMP groups, meters, digests).
* `stats`: read the counters.
"""

from . import constants, entries, names, stats
from .constants import IcmpSignal, Path, PortRole
from .drop_reasons import DropReason
from .entries import ElephantReport, FiveTuple, NextHop

__all__ = [
    "DropReason",
    "ElephantReport",
    "FiveTuple",
    "IcmpSignal",
    "NextHop",
    "Path",
    "PortRole",
    "constants",
    "entries",
    "names",
    "stats",
]
