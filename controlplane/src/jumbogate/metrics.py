"""Prometheus metrics of the border, served by the controller (`controller.metrics` in rack.yaml).

Nothing is kept here: every scrape asks the controller for the same figures
`jumbogatectl stats` shows (switch counters read over P4Runtime, the
SmartNIC's statistics, the controller's own counters) and turns them into
metric families, so the two views can never disagree. docs/operations.md
lists every metric; deploy/prometheus/ holds the alert rules and the
dashboard built on them.

Names follow Prometheus' conventions: counters end in `_total` (the
library appends it to a counter family's name), units are in the name, and
the samples of one family add up to something meaningful: a family never
holds a total beside its own parts. Ratios are left to the queries, as
rates of a numerator and a denominator counter over the query's window.
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections import Counter
from collections.abc import Awaitable, Callable, Iterable, Iterator
from dataclasses import dataclass

import finsy as fy
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector, CollectorRegistry

from .v1 import nic_pb2, policy_pb2

LOG = logging.getLogger("jumbogate.metrics")

# A scrape waits at most this long for the switch and the SmartNIC; a
# Prometheus scrape times out after 10 s by default.
SCRAPE_TIMEOUT_S = 5.0


@dataclass(frozen=True)
class TableFill:
    """A switch table's entries as the switch holds them, and its size from the P4Info."""

    table: str
    entries: int
    size: int


@dataclass(frozen=True)
class Snapshot:
    """What one scrape reports: the API's statistics and, when reachable, the SmartNIC's own."""

    stats: policy_pb2.Stats
    nic: nic_pb2.NicStats | None
    flows_onloaded: int
    flows_expired: int
    flows_offloaded: int
    # Empty while the switch is not connected.
    tables: tuple[TableFill, ...] = ()


async def read_table_fill(switch: fy.Switch) -> tuple[TableFill, ...]:
    """Entries per table, read from the switch itself: after a failed batch or
    a write behind the controller's back the switch is what fills up."""
    held: Counter[str] = Counter()
    async for entry in switch.read(fy.P4TableEntry()):
        held[entry.table_id] += 1
    # Tables without match fields hold only their default action: never full.
    return tuple(TableFill(table.alias, held[table.alias], table.size) for table in switch.p4info.tables if table.match_fields)


# Label values the SmartNIC names (drop reasons, discovery events; a few dozen
# of each): a SmartNIC that sent thousands made as many series, and a name
# sent twice made a scrape Prometheus refuses whole. Past this many names
# the rest are summed under "other"; a name sent twice is summed; a long
# one is cut.
MAX_NIC_LABEL_VALUES = 64
MAX_NIC_LABEL_CHARS = 64


def _nic_named(pairs: Iterable[tuple[str, float]]) -> list[tuple[list[str], float]]:
    sums: dict[str, float] = {}
    for name, value in pairs:
        name = name[:MAX_NIC_LABEL_CHARS]
        if name not in sums and len(sums) >= MAX_NIC_LABEL_VALUES:
            name = "other"
        sums[name] = sums.get(name, 0) + value
    return [([name], value) for name, value in sums.items()]


def _counter(name: str, documentation: str, labels: list[str], samples: Iterable[tuple[list[str], float]]) -> CounterMetricFamily:
    family = CounterMetricFamily(name, documentation, labels=labels)
    for label_values, value in samples:
        family.add_metric(label_values, value)
    return family


def _gauge(name: str, documentation: str, labels: list[str], samples: Iterable[tuple[list[str], float]]) -> GaugeMetricFamily:
    family = GaugeMetricFamily(name, documentation, labels=labels)
    for label_values, value in samples:
        family.add_metric(label_values, value)
    return family


def families(snap: Snapshot) -> Iterator[Metric]:
    """The metric families of one snapshot.

    Every family is declared on every scrape; a part that is down gives its
    families no samples (rather than zeros, which rate() would read as a
    counter reset and a dashboard as a real figure)."""
    stats = snap.stats
    yield _gauge(
        "jumbogate_up",
        "Whether the controller reaches the part (1) or not (0).",
        ["part"],
        [(["switch"], 1 if stats.switch_connected else 0), (["smartnic"], 1 if stats.nic.reachable else 0)],
    )
    # A standby reaches neither part by design: alerts on jumbogate_up join
    # on this, and a rack whose controllers all say 0 has no leader.
    leading = not stats.HasField("election") or stats.election.leading
    yield _gauge(
        "jumbogate_controller_leading",
        "Whether this controller drives its rack's switch and SmartNIC (1: its rack's leader, or the only controller) or waits as a standby (0).",
        ["rack"],
        [([stats.store.rack or ""], 1 if leading else 0)],
    )
    yield from _switch_families(stats if stats.switch_connected else None, snap.tables)
    yield from _controller_families(snap)
    yield from _nic_families(snap.nic)


def _switch_families(stats: policy_pb2.Stats | None, tables: tuple[TableFill, ...]) -> Iterator[Metric]:
    ports = [] if stats is None else stats.ports
    drops = [] if stats is None else stats.drops
    paths = [] if stats is None else [("merge", stats.merge_path), ("bypass", stats.bypass)]
    per_port = [([str(p.port), p.role, direction], count) for p in ports for direction, count in (("ingress", p.ingress), ("egress", p.egress))]
    port_labels = ["port", "role", "direction"]
    yield _counter("jumbogate_port_packets", "Packets per switch port and direction.", port_labels, [(k, c.packets) for k, c in per_port])
    yield _counter("jumbogate_port_bytes", "Bytes per switch port and direction, on the wire.", port_labels, [(k, c.bytes) for k, c in per_port])
    yield _counter("jumbogate_drop_packets", "Packets the switch dropped, by reason.", ["reason"], [([d.reason], d.count.packets) for d in drops])
    yield _counter("jumbogate_drop_bytes", "Bytes the switch dropped, by reason.", ["reason"], [([d.reason], d.count.bytes) for d in drops])
    # merge and bypass are the two halves of what was steered: the share of
    # merged bytes over any window is rate(merge) / rate(merge + bypass).
    yield _counter("jumbogate_path_packets", "Packets steered to the merge path or past it.", ["path"], [([p], c.packets) for p, c in paths])
    yield _counter("jumbogate_path_bytes", "Bytes steered to the merge path or past it.", ["path"], [([p], c.bytes) for p, c in paths])
    yield _counter("jumbogate_icmp_signals", "ICMP too-big signals the switch sent.", [], [] if stats is None else [([], stats.icmp_generated)])
    yield _gauge("jumbogate_switch_table_entries", "Entries a switch table holds now.", ["table"], [([t.table], t.entries) for t in tables])
    yield _gauge("jumbogate_switch_table_size", "Entries a switch table can hold (its size in the P4Info).", ["table"], [([t.table], t.size) for t in tables])


def _controller_families(snap: Snapshot) -> Iterator[Metric]:
    stats = snap.stats
    admission = stats.admission
    yield _gauge("jumbogate_merge_flows", "Flows on the merge path now.", [], [([], admission.flows)])
    yield _gauge("jumbogate_merge_flows_max", "The most flows the merge path takes (elephant.max_flows).", [], [([], admission.max_flows)])
    yield _counter("jumbogate_merge_flows_onloaded", "Flows put on the merge path (elephants, the operator's, adopted).", [], [([], snap.flows_onloaded)])
    yield _counter(
        "jumbogate_merge_flows_removed",
        "Flows taken off the merge path, by why.",
        ["reason"],
        [(["expired"], snap.flows_expired), (["offloaded"], snap.flows_offloaded), (["evicted"], admission.flows_evicted)],
    )
    yield _counter(
        "jumbogate_merge_onloads_refused",
        "Onloads admission control turned away, by why.",
        ["reason"],
        [(["elephant_rate_limited"], admission.elephants_rate_limited), (["merge_path_full"], admission.operator_onloads_refused)],
    )
    # received counts every digest; shed and refused are the part of them
    # never onloaded, so they have a family of their own.
    yield _counter("jumbogate_digests_received", "Elephant digests from the switch.", [], [([], stats.digests_received)])
    yield _counter(
        "jumbogate_digests_discarded",
        "Elephant digests the controller did not act on: shed (its queue was full) or refused (a forged flow).",
        ["reason"],
        [(["shed"], stats.digests_shed), (["refused"], stats.digests_refused)],
    )
    yield _counter(
        "jumbogate_idle_timeouts_refused",
        "Entries of the switch's idle-timeout notifications not acted on (not a held merge flow, or not idle when read back).",
        [],
        [([], stats.idle_timeouts_refused)],
    )
    yield _gauge("jumbogate_watch_streams", "Operator Watch streams open now.", [], [([], stats.watch_streams.open)])
    yield _counter(
        "jumbogate_watch_streams_refused",
        "Watch calls refused past the bound on streams (in all, or per caller).",
        [],
        [([], stats.watch_streams.refused)],
    )
    reconcile = stats.reconcile
    yield _counter("jumbogate_reconcile_runs", "Reconciliation runs (each reads the switch and writes what differs).", [], [([], reconcile.runs)])
    yield _counter(
        "jumbogate_reconcile_writes",
        "Switch writes reconciliation made, by kind.",
        ["kind"],
        [(["insert"], reconcile.inserted), (["modify"], reconcile.modified), (["delete"], reconcile.deleted)],
    )
    yield _counter("jumbogate_reconcile_failed_batches", "Batches of switch writes the switch refused.", [], [([], reconcile.failed_batches)])
    yield _gauge("jumbogate_policy_version", "The policy's version; it moves with every change.", [], [([], stats.policy_version)])
    yield _gauge(
        "jumbogate_reconcile_policy_version",
        "The policy version the last finished reconciliation wrote the switch towards.",
        [],
        [([], reconcile.policy_version)],
    )
    reloads = stats.config_reloads
    yield _counter(
        "jumbogate_config_reloads",
        "rack.yaml reloads, by outcome (refused ones changed nothing).",
        ["outcome"],
        [(["applied"], reloads.applied), (["refused"], reloads.refused)],
    )


# Keys of NicStats.path_mtu_discovery that are levels, not counts.
PMTU_GAUGES = {
    "destinations_now": ("jumbogate_smartnic_pmtu_destinations", "Destinations path MTU discovery tracks now."),
    "learned_now": ("jumbogate_smartnic_pmtu_destinations_learned", "Tracked destinations with a learned path MTU now."),
}
# Counts in bytes have a family of their own: a byte is not an event.
PMTU_BYTE_COUNTERS = {"probe_bytes": ("jumbogate_smartnic_pmtu_probe_bytes", "IP bytes of the path MTU probes sent.")}


def _nic_families(nic: nic_pb2.NicStats | None) -> Iterator[Metric]:
    def count(name: str, documentation: str, field: str) -> CounterMetricFamily:
        return _counter(name, documentation, [], [] if nic is None else [([], getattr(nic, field))])

    def level(name: str, documentation: str, field: str) -> GaugeMetricFamily:
        return _gauge(name, documentation, [], [] if nic is None else [([], getattr(nic, field))])

    yield count("jumbogate_smartnic_packets_in", "Packets the SmartNIC received.", "packets_in")
    yield count("jumbogate_smartnic_bytes_in", "Bytes the SmartNIC received.", "bytes_in")
    yield count("jumbogate_smartnic_packets_out", "Packets the SmartNIC sent.", "packets_out")
    yield count("jumbogate_smartnic_bytes_out", "Bytes the SmartNIC sent.", "bytes_out")
    yield level("jumbogate_smartnic_held_packets", "Packets the SmartNIC holds now, waiting for a merge partner.", "packets_held")
    yield count("jumbogate_smartnic_merged_packets", "Packets the SmartNIC built by merging segments.", "merged_packets")
    yield count("jumbogate_smartnic_segments_merged", "Segments that went into merged packets.", "segments_merged")
    yield count("jumbogate_smartnic_split_packets", "Packets above the path MTU the SmartNIC split.", "split_packets")
    yield count("jumbogate_smartnic_split_segments", "Segments the SmartNIC cut from packets above the path MTU.", "split_segments_out")
    yield count("jumbogate_smartnic_caravans_packed", "UDP caravans the SmartNIC packed.", "caravans_packed")
    yield count("jumbogate_smartnic_caravans_unpacked", "UDP caravans the SmartNIC unpacked.", "caravans_unpacked")
    # The conversion yield's two halves: a query divides their rates over
    # its own window, where the SmartNIC's own figure is a lifetime average
    # that a border which stopped merging an hour ago still shows as fine.
    yield count(
        "jumbogate_smartnic_tcp_payload_in_bytes", "TCP payload bytes of the complete segments the SmartNIC's merge stage took in.", "tcp_payload_bytes_in"
    )
    yield count(
        "jumbogate_smartnic_tcp_payload_full_bytes",
        "Of them, the bytes that left in packets of at least 90% of the internal MTU (the conversion yield's numerator).",
        "tcp_payload_bytes_full",
    )
    yield _counter(
        "jumbogate_smartnic_drop_packets",
        "Packets the SmartNIC dropped, by reason.",
        ["reason"],
        [] if nic is None else _nic_named((d.reason, d.packets) for d in nic.drops),
    )
    yield level("jumbogate_smartnic_flows", "Flows the SmartNIC tracks now.", "flows_active")
    yield count("jumbogate_smartnic_flows_evicted", "Flows the SmartNIC's full flow table evicted (and flushed).", "flows_evicted")
    yield count("jumbogate_smartnic_onloads_refused", "Onloads the SmartNIC refused: its pin budget was spent.", "onloads_refused")
    yield count("jumbogate_smartnic_pins_expired", "Onload pins the SmartNIC dropped for idleness.", "pins_expired")
    yield from _merge_delay(nic)
    yield from _path_mtu_discovery(nic)
    fence = None if nic is None else nic.fence
    yield _gauge(
        "jumbogate_smartnic_fence_election_id_high",
        "The highest leader election id a change to the SmartNIC carried: its high half, the fleet's fencing epoch.",
        [],
        [] if fence is None else [([], fence.election_id_high)],
    )
    yield _gauge(
        "jumbogate_smartnic_fence_election_id_low",
        "The same id's low half: the store revision at which that leader won.",
        [],
        [] if fence is None else [([], fence.election_id_low)],
    )
    yield _counter(
        "jumbogate_smartnic_fence_changes_refused",
        "Changes the SmartNIC refused from a deposed leader (a lower election id, none, or a malformed one).",
        [],
        [] if fence is None else [([], fence.changes_refused)],
    )


def _merge_delay(nic: nic_pb2.NicStats | None) -> Iterator[Metric]:
    delay = HistogramMetricFamily("jumbogate_smartnic_merge_delay_seconds", "How long merged segments waited in the SmartNIC.")
    # The SmartNIC counts per bucket; Prometheus buckets are cumulative, in rising
    # order, and end in +Inf. Bounds as sent are not trusted to be so: unsorted,
    # repeated or NaN bounds made a scrape Prometheus refuses; a bound repeated
    # is summed, one that is not a number of microseconds goes to +Inf, and past
    # MAX_NIC_LABEL_VALUES bounds the rest too.
    per_bound: dict[float, int] = {}
    for bucket in [] if nic is None else nic.merge_delay:
        bound = bucket.le_us if bucket.le_us >= 0 else math.inf  # NaN compares false
        per_bound[bound] = per_bound.get(bound, 0) + bucket.count
    finite = sorted(bound for bound in per_bound if not math.isinf(bound))[:MAX_NIC_LABEL_VALUES]
    buckets, running = [], 0
    for bound in finite:
        running += per_bound[bound]
        buckets.append((repr(bound / 1e6), running))
    if per_bound:
        buckets.append(("+Inf", sum(per_bound.values())))
        delay.add_metric([], buckets, sum_value=nic.merge_delay_sum_s)
    yield delay


def _path_mtu_discovery(nic: nic_pb2.NicStats | None) -> Iterator[Metric]:
    # Empty while discovery is off (or the SmartNIC unreachable).
    counters = {} if nic is None else dict(nic.path_mtu_discovery)
    for key, (name, documentation) in PMTU_GAUGES.items():
        yield _gauge(name, documentation, [], [([], counters[key])] if key in counters else [])
    for key, (name, documentation) in PMTU_BYTE_COUNTERS.items():
        yield _counter(name, documentation, [], [([], counters[key])] if key in counters else [])
    events = sorted((key, value) for key, value in counters.items() if key not in PMTU_GAUGES and key not in PMTU_BYTE_COUNTERS)
    yield _counter(
        "jumbogate_smartnic_pmtu_events",
        "Path MTU discovery's counts, by event (docs/pathmtu.md names them).",
        ["event"],
        _nic_named(events),
    )


class BorderCollector(Collector):
    """Collects a snapshot from the controller's event loop on every scrape (scrapes run in the HTTP server's thread)."""

    def __init__(self, snapshot: Callable[[], Awaitable[Snapshot]], loop: asyncio.AbstractEventLoop):
        self._snapshot = snapshot
        self._loop = loop

    def collect(self) -> Iterator[Metric]:
        future = asyncio.run_coroutine_threadsafe(self._snapshot(), self._loop)
        try:
            snap = future.result(SCRAPE_TIMEOUT_S)
        except Exception as err:  # a scrape must answer even when a part hangs
            future.cancel()
            LOG.warning("metrics scrape failed: %r", err)
            failed = GaugeMetricFamily("jumbogate_scrape_ok", "Whether this scrape could read the border's figures.")
            failed.add_metric([], 0)
            yield failed
            return
        ok = GaugeMetricFamily("jumbogate_scrape_ok", "Whether this scrape could read the border's figures.")
        ok.add_metric([], 1)
        yield ok
        yield from families(snap)


def registry_for(snapshot: Callable[[], Awaitable[Snapshot]], loop: asyncio.AbstractEventLoop) -> CollectorRegistry:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(BorderCollector(snapshot, loop))
    return registry
