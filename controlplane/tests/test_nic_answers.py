"""What the controller takes from a SmartNIC's answers, and from other racks' published paths: checked
and bounded, never trusted whole.

The SmartNIC here is a gRPC server of its own (nic.proto) that answers what a test sets: the real
jumbogate-nic never sends a zone id, a repeated drop reason or a failed Configure on cue, and the
controller must hold when one does (a bug, another version, a compromised box).
"""

from __future__ import annotations

import asyncio
import dataclasses
import ipaddress
import math

import finsy as fy
import grpc
import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from jumbogate import learned, metrics, paths, translate
from jumbogate.config import load_config
from jumbogate.nic import NicLink
from jumbogate.reconcile import plan
from jumbogate.state import MAX_METHOD_CHARS, PolicyState
from jumbogate.v1 import nic_pb2, nic_pb2_grpc, policy_pb2
from testlab import lab

pytestmark = [pytest.mark.timeout(60)]
EXAMPLE = lab.REPO / "controlplane" / "rack.example.yaml"
# A bound on waits, never a figure asserted: it only stops a broken test.
BOUND_S = 20


class ScriptedNic(nic_pb2_grpc.NicServicer):
    """A SmartNIC that answers what the test put in it."""

    def __init__(self):
        self.learned: list[nic_pb2.LearnedPath] = []
        self.configured: list[nic_pb2.NicConfig] = []
        self.refuse_configure = 0  # Configure calls to refuse, from the next on

    async def GetInfo(self, request, context):
        return nic_pb2.NicInfo(boot_id=7)

    async def Configure(self, request, context):
        self.configured.append(request)
        if self.refuse_configure:
            self.refuse_configure -= 1
            await context.abort(grpc.StatusCode.UNAVAILABLE, "busy")
        return request

    async def ListPathMtus(self, request, context):
        return nic_pb2.ListPathMtusResponse()

    async def SetPathMtu(self, request, context):
        return nic_pb2.SetPathMtuResponse()

    async def ListLearnedPaths(self, request, context):
        return nic_pb2.ListLearnedPathsResponse(enabled=True, paths=self.learned)


async def wait_until(predicate) -> None:
    async def loop():
        while not predicate():
            await asyncio.sleep(0.02)

    await asyncio.wait_for(loop(), BOUND_S)


@pytest.fixture
async def link():
    """A NicLink polling a ScriptedNic: (the link, its state, the SmartNIC)."""
    nic = ScriptedNic()
    server = grpc.aio.server()
    nic_pb2_grpc.add_NicServicer_to_server(nic, server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    config = dataclasses.replace(load_config(EXAMPLE), smartnic_control=f"127.0.0.1:{port}")
    state = PolicyState.from_config(config)
    link = NicLink(config, state, poll_interval=0.05)
    task = asyncio.create_task(link.run())
    try:
        await wait_until(lambda: link.up)
        yield link, state, nic
    finally:
        task.cancel()
        await server.stop(None)


async def test_learned_paths_with_a_zone_id_or_no_address_are_left_out(link):
    """Two zone ids of one address made two paths of one /128 on the switch: every reconciliation failed."""
    link, state, nic = link
    nic.learned = [
        nic_pb2.LearnedPath(address="2001:db8::7%a", mtu=1400, method="probe"),
        nic_pb2.LearnedPath(address="2001:db8::7%b", mtu=1500, method="probe"),
        nic_pb2.LearnedPath(address="not-an-address", mtu=1400, method="probe"),
        nic_pb2.LearnedPath(address="203.0.113.9", mtu=1400, method="x" * 10_000),
    ]
    await wait_until(lambda: state.learned_paths)
    assert list(state.learned_paths) == [ipaddress.ip_address("203.0.113.9")]
    assert len(state.learned_paths[ipaddress.ip_address("203.0.113.9")].method) == MAX_METHOD_CHARS
    # Reconciliation plans the switch's entries from it (it refuses two entries of one key).
    schema = fy.P4Schema(lab.REPO / "p4src" / "compiled" / "depth512" / "jumbogate.p4info.txtpb")
    assert plan([entity.encode(schema) for entity in translate.desired_entities(state, nic_up=True)], [])
    # The operator's ListPaths leaves the same ones out, where it failed with UNKNOWN.
    listed = await paths.list_paths(link, state, "")
    assert [p.address for p in listed.paths] == ["203.0.113.9"]


async def test_a_reloaded_configuration_the_smartnic_refused_once_is_pushed_again(link):
    link, state, nic = link
    config = link.config
    reloaded = dataclasses.replace(config, mtu=dataclasses.replace(config.mtu, guest_jumbo=config.mtu.guest_jumbo - 500))
    nic.refuse_configure = 1
    link.reconfigure(reloaded)
    await wait_until(lambda: len(nic.configured) >= 3)
    assert [c.internal_mtu for c in nic.configured[1:3]] == [reloaded.mtu.guest_jumbo] * 2


def test_drop_reasons_and_discovery_events_the_smartnic_names_are_bounded_and_summed():
    """Thousands of names made thousands of series; a name sent twice made a scrape Prometheus refuses whole."""
    nic = nic_pb2.NicStats(drops=[nic_pb2.DropCount(reason=f"r{i % 5000}", packets=1) for i in range(10_000)])
    for i in range(5000):
        nic.path_mtu_discovery[f"event_{i}"] = 1
    text = scrape(nic)
    drops = [line for line in text.splitlines() if line.startswith("jumbogate_smartnic_drop_packets_total{")]
    events = [line for line in text.splitlines() if line.startswith("jumbogate_smartnic_pmtu_events_total{")]
    assert len(drops) == metrics.MAX_NIC_LABEL_VALUES + 1 and len(events) == metrics.MAX_NIC_LABEL_VALUES + 1
    assert 'jumbogate_smartnic_drop_packets_total{reason="r0"} 2.0' in drops
    assert f'jumbogate_smartnic_drop_packets_total{{reason="other"}} {10_000 - 2 * metrics.MAX_NIC_LABEL_VALUES}.0' in drops
    assert len(set(drops)) == len(drops)


def scrape(nic: nic_pb2.NicStats) -> str:
    """The metrics endpoint's text for a SmartNIC that reported `nic` (and a switch that reported nothing)."""
    registry = CollectorRegistry()

    class Once:
        def collect(self):
            yield from metrics.families(metrics.Snapshot(stats=policy_pb2.Stats(), nic=nic, flows_onloaded=0, flows_expired=0, flows_offloaded=0))

    registry.register(Once())
    return generate_latest(registry).decode()


def test_merge_delay_buckets_the_smartnic_sends_out_of_order_repeated_or_not_numbers_still_make_a_histogram():
    """Unsorted, repeated or NaN bounds, or no +Inf, made a histogram Prometheus refuses, and with it the whole scrape."""
    sent = [(50.0, 3), (10.0, 2), (math.nan, 4), (10.0, 1), (-5.0, 7), (100.0, 0)]
    nic = nic_pb2.NicStats(merge_delay=[nic_pb2.HistogramBucket(le_us=le, count=count) for le, count in sent], merge_delay_sum_s=0.5)
    (family,) = [f for f in text_string_to_metric_families(scrape(nic)) if f.name == "jumbogate_smartnic_merge_delay_seconds"]
    buckets = [(sample.labels["le"], sample.value) for sample in family.samples if sample.name.endswith("_bucket")]
    assert buckets == [("1e-05", 3.0), ("5e-05", 6.0), ("0.0001", 6.0), ("+Inf", 17.0)]


@pytest.mark.parametrize(
    "raw",
    [
        b'[{"address": "203.0.113.9", "mtu": 1e400, "learned_at": 1}]',
        b"[" + b"9" * 5000 + b"]",
        b"[" * 100_000,
        b'[{"address": "a", "mtu": 70000, "learned_at": 1}]',
    ],
    ids=["infinite-mtu", "huge-integer", "deep-nesting", "mtu-out-of-range"],
)
def test_another_racks_published_paths_that_do_not_read_as_paths_are_left_out(raw):
    good = b'{"address": "198.51.100.1", "mtu": 1400, "method": "probe", "learned_at": 1}'
    assert learned.decode_paths(raw) == []
    assert [p.address for p in learned.decode_paths(b"[" + good + b"]")] == ["198.51.100.1"]
