"""Prometheus metrics of the border, served by the controller (`controller.metrics` in rack.yaml).

Nothing is kept here: every scrape asks the controller for the same figures
`jumbogatectl stats` shows (switch counters read over P4Runtime, the
SmartNIC's statistics, the controller's own counters) and turns them into
metric families, so the two views can never disagree. docs/operations.md
lists every metric.
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector, CollectorRegistry

from .v1 import nic_pb2, policy_pb2

LOG = logging.getLogger("jumbogate.metrics")

# A scrape waits at most this long for the switch and the SmartNIC; a
# Prometheus scrape times out after 10 s by default.
SCRAPE_TIMEOUT_S = 5.0


@dataclass(frozen=True)
class Snapshot:
    """What one scrape reports: the API's statistics and, when reachable, the SmartNIC's own."""

    stats: policy_pb2.Stats
    nic: nic_pb2.NicStats | None
    flows_onloaded: int
    flows_expired: int
    flows_offloaded: int


def families(snap: Snapshot) -> Iterator[Metric]:
    """The metric families of one snapshot."""
    stats = snap.stats
    up = GaugeMetricFamily("jumbogate_up", "Whether the controller reaches the part (1) or not (0).", labels=["part"])
    up.add_metric(["switch"], 1 if stats.switch_connected else 0)
    up.add_metric(["smartnic"], 1 if stats.nic.reachable else 0)
    yield up

    packets = CounterMetricFamily("jumbogate_port_packets", "Packets per switch port and direction.", labels=["port", "role", "direction"])
    octets = CounterMetricFamily("jumbogate_port_bytes", "Bytes per switch port and direction.", labels=["port", "role", "direction"])
    for port in stats.ports:
        for direction, count in (("ingress", port.ingress), ("egress", port.egress)):
            labels = [str(port.port), port.role, direction]
            packets.add_metric(labels, count.packets)
            octets.add_metric(labels, count.bytes)
    yield packets
    yield octets

    drop_packets = CounterMetricFamily("jumbogate_drop_packets", "Packets the switch dropped, by reason.", labels=["reason"])
    drop_bytes = CounterMetricFamily("jumbogate_drop_bytes", "Bytes the switch dropped, by reason.", labels=["reason"])
    for drop in stats.drops:
        drop_packets.add_metric([drop.reason], drop.count.packets)
        drop_bytes.add_metric([drop.reason], drop.count.bytes)
    yield drop_packets
    yield drop_bytes

    path_packets = CounterMetricFamily("jumbogate_path_packets", "Packets steered to the merge path or past it.", labels=["path"])
    path_bytes = CounterMetricFamily("jumbogate_path_bytes", "Bytes steered to the merge path or past it.", labels=["path"])
    for path, count in (("merge", stats.merge_path), ("bypass", stats.bypass)):
        path_packets.add_metric([path], count.packets)
        path_bytes.add_metric([path], count.bytes)
    yield path_packets
    yield path_bytes
    steered = stats.merge_path.bytes + stats.bypass.bytes
    yield GaugeMetricFamily(
        "jumbogate_merge_path_byte_share",
        "Share of steered bytes that took the merge path (0 to 1).",
        value=stats.merge_path.bytes / steered if steered else 0.0,
    )

    yield CounterMetricFamily("jumbogate_icmp_signals", "ICMP too-big signals the switch sent.", value=stats.icmp_generated)

    yield GaugeMetricFamily("jumbogate_merge_flows", "Flows on the merge path now.", value=stats.admission.flows)
    yield GaugeMetricFamily("jumbogate_merge_flows_max", "The most flows the merge path takes (elephant.max_flows).", value=stats.admission.max_flows)
    flow_changes = CounterMetricFamily("jumbogate_merge_flow_changes", "Flows that came onto or left the merge path, by how.", labels=["change"])
    for change, value in (
        ("onloaded", snap.flows_onloaded),
        ("expired", snap.flows_expired),
        ("offloaded", snap.flows_offloaded),
        ("evicted", stats.admission.flows_evicted),
        ("elephant_rate_limited", stats.admission.elephants_rate_limited),
        ("operator_refused", stats.admission.operator_onloads_refused),
    ):
        flow_changes.add_metric([change], value)
    yield flow_changes

    digests = CounterMetricFamily("jumbogate_digests", "Elephant digests from the switch, by what became of them.", labels=["outcome"])
    digests.add_metric(["received"], stats.digests_received)
    digests.add_metric(["shed"], stats.digests_shed)
    digests.add_metric(["refused"], stats.digests_refused)
    yield digests

    writes = CounterMetricFamily("jumbogate_reconcile_writes", "Switch writes reconciliation made, by kind.", labels=["kind"])
    writes.add_metric(["insert"], stats.reconcile.inserted)
    writes.add_metric(["modify"], stats.reconcile.modified)
    writes.add_metric(["delete"], stats.reconcile.deleted)
    yield writes
    yield CounterMetricFamily("jumbogate_reconcile_failed_batches", "Batches of switch writes the switch refused.", value=stats.reconcile.failed_batches)

    nic = snap.nic
    if nic is None:
        return
    yield CounterMetricFamily("jumbogate_smartnic_packets_in", "Packets the SmartNIC received.", value=nic.packets_in)
    yield CounterMetricFamily("jumbogate_smartnic_packets_out", "Packets the SmartNIC sent.", value=nic.packets_out)
    yield CounterMetricFamily("jumbogate_smartnic_merged_packets", "Packets the SmartNIC built by merging segments.", value=nic.merged_packets)
    yield CounterMetricFamily("jumbogate_smartnic_segments_merged", "Segments that went into merged packets.", value=nic.segments_merged)
    yield CounterMetricFamily("jumbogate_smartnic_split_segments", "Segments the SmartNIC cut from packets above the path MTU.", value=nic.split_segments_out)
    yield GaugeMetricFamily(
        "jumbogate_smartnic_conversion_yield", "Share of mergeable segments that left in merged packets (0 to 1).", value=nic.conversion_yield
    )
    nic_drops = CounterMetricFamily("jumbogate_smartnic_drop_packets", "Packets the SmartNIC dropped, by reason.", labels=["reason"])
    for drop in nic.drops:
        nic_drops.add_metric([drop.reason], drop.packets)
    yield nic_drops
    yield GaugeMetricFamily("jumbogate_smartnic_flows", "Flows the SmartNIC tracks now.", value=nic.flows_active)
    # The SmartNIC counts per bucket; Prometheus buckets are cumulative.
    buckets, running = [], 0
    for bucket in nic.merge_delay:
        running += bucket.count
        bound = "+Inf" if math.isinf(bucket.le_us) else repr(bucket.le_us / 1e6)
        buckets.append((bound, running))
    if buckets:
        delay = HistogramMetricFamily("jumbogate_smartnic_merge_delay_seconds", "How long merged segments waited in the SmartNIC.")
        delay.add_metric([], buckets, sum_value=nic.merge_delay_sum_s)
        yield delay


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
