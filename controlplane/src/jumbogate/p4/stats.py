"""Read the data plane's counters over P4Runtime (for tests and `stats`)."""

from __future__ import annotations

from dataclasses import dataclass, field

import finsy as fy

from . import names
from .constants import IcmpSignal, Path
from .drop_reasons import DropReason


@dataclass(frozen=True)
class PacketsBytes:
    packets: int = 0
    bytes: int = 0

    def __sub__(self, other: PacketsBytes) -> PacketsBytes:
        return PacketsBytes(self.packets - other.packets, self.bytes - other.bytes)


@dataclass
class DataplaneStats:
    """Counter values; only non-zero indices are present."""

    port_rx: dict[int, PacketsBytes] = field(default_factory=dict)
    port_tx: dict[int, PacketsBytes] = field(default_factory=dict)
    drops: dict[DropReason, PacketsBytes] = field(default_factory=dict)
    paths: dict[Path, PacketsBytes] = field(default_factory=dict)
    icmp_signals: dict[IcmpSignal, PacketsBytes] = field(default_factory=dict)

    def __sub__(self, before: DataplaneStats) -> DataplaneStats:
        """Per-index difference (what happened between two reads)."""

        def diff(now: dict, then: dict) -> dict:
            keys = set(now) | set(then)
            out = {k: now.get(k, PacketsBytes()) - then.get(k, PacketsBytes()) for k in keys}
            return {k: v for k, v in out.items() if v != PacketsBytes()}

        return DataplaneStats(
            port_rx=diff(self.port_rx, before.port_rx),
            port_tx=diff(self.port_tx, before.port_tx),
            drops=diff(self.drops, before.drops),
            paths=diff(self.paths, before.paths),
            icmp_signals=diff(self.icmp_signals, before.icmp_signals),
        )


def counter_requests() -> list[fy.P4CounterEntry]:
    """Wildcard reads of every indexed counter."""
    return [fy.P4CounterEntry(name) for name in names.COUNTERS]


def stats_from_entries(entries: list[fy.P4CounterEntry]) -> DataplaneStats:
    stats = DataplaneStats()
    for entry in entries:
        data = entry.data
        if entry.index is None or data is None or (data.packet_count == 0 and data.byte_count == 0):
            continue
        value = PacketsBytes(data.packet_count, data.byte_count)
        index = entry.index
        name = entry.counter_id
        if name.endswith(names.PORT_RX):
            stats.port_rx[index] = value
        elif name.endswith(names.PORT_TX):
            stats.port_tx[index] = value
        elif name.endswith(names.DROP_REASONS):
            stats.drops[DropReason(index)] = value
        elif name.endswith(names.PATHS):
            stats.paths[Path(index)] = value
        elif name.endswith(names.ICMP_SIGNALS):
            stats.icmp_signals[IcmpSignal(index)] = value
    return stats


async def read_stats(switch: fy.Switch) -> DataplaneStats:
    """Read every jumbogate counter from a connected finsy Switch."""
    entries = [entry async for entry in switch.read(counter_requests())]
    return stats_from_entries(entries)
