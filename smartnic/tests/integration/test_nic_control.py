"""Every RPC of nic.proto against the real program, including the refusals.

The program runs on a null port (no traffic) with gRPC on 127.0.0.1, as the
controller reaches it by default.
"""

from __future__ import annotations

import time

import grpc
import pytest

from jumbogate.v1 import common_pb2, nic_pb2
from testlab.nic_harness import free_tcp_port, lcores, start_nic, start_null_nic

pytestmark = pytest.mark.timeout(60)

FLOW = common_pb2.FiveTuple(src_ip="203.0.113.5", dst_ip="10.10.0.5", protocol=6, src_port=40000, dst_port=443)


def refused(call, request, fragment: str):
    with pytest.raises(grpc.RpcError) as error:
        call(request, timeout=5)
    assert error.value.code() == grpc.StatusCode.INVALID_ARGUMENT, error.value.details()
    assert fragment in error.value.details(), error.value.details()


def test_get_info_names_the_process(stub, nic):
    info = stub.GetInfo(nic_pb2.GetInfoRequest(), timeout=5)
    assert info.boot_id != 0 and str(info.boot_id) in nic.ready_line
    assert info.workers == 1 and list(info.ports) == ["net_null0"]
    assert info.version and info.uptime_s > 0


def test_configure_changes_only_the_given_fields(stub):
    before = stub.GetConfig(nic_pb2.GetConfigRequest(), timeout=5)
    assert before.internal_mtu == 8500 and before.max_flows == 1024
    assert (before.default_path_mtu_v4, before.default_path_mtu_v6) == (1500, 1280)
    after = stub.Configure(
        nic_pb2.NicConfig(internal_mtu=8000, delay=nic_pb2.DelayModel(max_delay_us=200)),
        timeout=5,
    )
    assert after.internal_mtu == 8000 and after.delay.max_delay_us == 200
    assert after.max_flows == before.max_flows and after.delay.quantile == pytest.approx(before.delay.quantile)
    assert after.merge_unknown_flows == before.merge_unknown_flows
    off = stub.Configure(nic_pb2.NicConfig(merge_unknown_flows=False, set_merge_unknown_flows=True), timeout=5)
    assert not off.merge_unknown_flows and off.internal_mtu == 8000
    assert stub.GetConfig(nic_pb2.GetConfigRequest(), timeout=5) == off
    stub.Configure(
        nic_pb2.NicConfig(
            internal_mtu=8500,
            merge_unknown_flows=True,
            set_merge_unknown_flows=True,
            delay=nic_pb2.DelayModel(max_delay_us=64),
        ),
        timeout=5,
    )


@pytest.mark.parametrize(
    ("config", "reason"),
    [
        (nic_pb2.NicConfig(internal_mtu=100), "internal_mtu 100"),
        (nic_pb2.NicConfig(internal_mtu=9500), "internal_mtu 9500"),
        (nic_pb2.NicConfig(max_flows=3), "max_flows 3"),
        (nic_pb2.NicConfig(max_segments=1), "max_segments 1"),
        (nic_pb2.NicConfig(default_path_mtu_v4=100), "default_path_mtu_v4 100"),
        (nic_pb2.NicConfig(default_path_mtu_v6=1279), "default_path_mtu_v6 1279"),
        (nic_pb2.NicConfig(delay=nic_pb2.DelayModel(quantile=1.5)), "delay.quantile"),
        (nic_pb2.NicConfig(delay=nic_pb2.DelayModel(yield_threshold=-0.5)), "delay.yield_threshold"),
        (nic_pb2.NicConfig(delay=nic_pb2.DelayModel(max_delay_us=10001)), "delay.max_delay_us 10001"),
    ],
)
def test_bad_configuration_is_refused_and_changes_nothing(stub, config, reason):
    before = stub.GetConfig(nic_pb2.GetConfigRequest(), timeout=5)
    # A valid field next to the bad one must not slip through either.
    config.max_segments = config.max_segments or 8
    refused(stub.Configure, config, reason)
    assert stub.GetConfig(nic_pb2.GetConfigRequest(), timeout=5) == before


def test_path_mtus_are_set_listed_and_deleted(stub):
    def listed():
        reply = stub.ListPathMtus(nic_pb2.ListPathMtusRequest(), timeout=5)
        return {e.prefix.cidr: e.mtu for e in reply.entries}

    assert listed() == {"198.51.100.0/24": 1400}
    stub.SetPathMtu(nic_pb2.SetPathMtuRequest(prefix=common_pb2.Prefix(cidr="192.0.2.0/24"), mtu=1280), timeout=5)
    stub.SetPathMtu(nic_pb2.SetPathMtuRequest(prefix=common_pb2.Prefix(cidr="2001:db8::/32"), mtu=1400), timeout=5)
    stub.SetPathMtu(nic_pb2.SetPathMtuRequest(prefix=common_pb2.Prefix(cidr="192.0.2.0/24"), mtu=1300), timeout=5)
    assert listed() == {"198.51.100.0/24": 1400, "192.0.2.0/24": 1300, "2001:db8::/32": 1400}
    stub.DeletePathMtu(nic_pb2.DeletePathMtuRequest(prefix=common_pb2.Prefix(cidr="192.0.2.0/24")), timeout=5)
    stub.DeletePathMtu(nic_pb2.DeletePathMtuRequest(prefix=common_pb2.Prefix(cidr="2001:db8::/32")), timeout=5)
    assert listed() == {"198.51.100.0/24": 1400}
    with pytest.raises(grpc.RpcError) as error:
        stub.DeletePathMtu(nic_pb2.DeletePathMtuRequest(prefix=common_pb2.Prefix(cidr="192.0.2.0/24")), timeout=5)
    assert error.value.code() == grpc.StatusCode.NOT_FOUND


@pytest.mark.parametrize(
    ("cidr", "mtu", "reason"),
    [
        ("192.0.2.1/24", 1400, "host bits"),
        ("192.0.2.0", 1400, "no length"),
        ("192.0.2.0/33", 1400, "length must be"),
        ("not-an-address/8", 1400, "not an IPv4 or IPv6 address"),
        ("192.0.2.0/24", 100, "mtu 100"),
        ("192.0.2.0/24", 9500, "mtu 9500"),
        ("", 1400, "prefix is empty"),
        ("0.0.0.0/0", 1400, "set default_path_mtu_v4 or _v6 with Configure instead"),
    ],
)
def test_bad_path_mtu_is_refused_and_changes_nothing(stub, cidr, mtu, reason):
    before = stub.ListPathMtus(nic_pb2.ListPathMtusRequest(), timeout=5)
    refused(stub.SetPathMtu, nic_pb2.SetPathMtuRequest(prefix=common_pb2.Prefix(cidr=cidr), mtu=mtu), reason)
    assert stub.ListPathMtus(nic_pb2.ListPathMtusRequest(), timeout=5) == before


def test_flows_are_onloaded_listed_and_offloaded(stub):
    stub.OnloadFlow(nic_pb2.NicFlowRequest(flow=FLOW), timeout=5)
    stub.OnloadFlow(nic_pb2.NicFlowRequest(flow=FLOW), timeout=5)  # idempotent
    flows = stub.ListFlows(nic_pb2.ListNicFlowsRequest(), timeout=5).flows
    assert [f.flow for f in flows] == [FLOW]
    assert flows[0].packets_in == 0 and flows[0].merged_packets == 0
    # Onloaded flows survive a reconfiguration, which rebuilds the engines.
    stub.Configure(nic_pb2.NicConfig(max_segments=12), timeout=5)
    assert [f.flow for f in stub.ListFlows(nic_pb2.ListNicFlowsRequest(), timeout=5).flows] == [FLOW]
    reply = stub.OffloadFlow(nic_pb2.NicFlowRequest(flow=FLOW), timeout=5)
    assert reply.flushed_packets == 0
    assert list(stub.ListFlows(nic_pb2.ListNicFlowsRequest(), timeout=5).flows) == []
    # Offloading what is not onloaded is harmless (the controller may retry).
    stub.OffloadFlow(nic_pb2.NicFlowRequest(flow=FLOW), timeout=5)


@pytest.mark.parametrize(
    ("changes", "reason"),
    [
        ({"src_ip": "203.0.113.500"}, "flow.src_ip"),
        ({"dst_ip": ""}, "flow.dst_ip"),
        ({"dst_ip": "fd00::1"}, "different address families"),
        ({"protocol": 1}, "flow.protocol 1"),
        ({"src_port": 0}, "flow.src_port 0"),
        ({"dst_port": 70000}, "flow.dst_port 70000"),
    ],
)
def test_bad_flows_are_refused_and_change_nothing(stub, changes, reason):
    flow = common_pb2.FiveTuple()
    flow.CopyFrom(FLOW)
    for name, value in changes.items():
        setattr(flow, name, value)
    refused(stub.OnloadFlow, nic_pb2.NicFlowRequest(flow=flow), reason)
    refused(stub.OffloadFlow, nic_pb2.NicFlowRequest(flow=flow), reason)
    assert list(stub.ListFlows(nic_pb2.ListNicFlowsRequest(), timeout=5).flows) == []


def test_stats_report_every_field(stub):
    stats = stub.GetStats(nic_pb2.GetNicStatsRequest(), timeout=5)
    assert stats.packets_in == 0 and stats.packets_held == 0
    assert [b.le_us for b in stats.merge_delay][:3] == [1, 2, 4]
    assert stats.merge_delay[-1].le_us == float("inf")
    reasons = [d.reason for d in stats.drops]
    assert "tx-failed" in reasons and "caravan-bad-magic" in reasons


def test_full_tables_are_resource_exhausted_and_change_nothing(log_dir):
    """The onload budget (--max-onloaded-flows) and the path-MTU table
    (1024 rules per family) refuse what does not fit with
    RESOURCE_EXHAUSTED and keep what they hold."""
    process = start_null_nic(log_dir, ["--internal-prefix", "10.10.0.0/16", "--max-flows", "1024", "--max-onloaded-flows", "3"])
    try:
        stub = process.stub()

        def flow(n: int) -> nic_pb2.NicFlowRequest:
            five = common_pb2.FiveTuple(src_ip="203.0.113.5", dst_ip="10.10.0.5", protocol=6, src_port=41000 + n, dst_port=443)
            return nic_pb2.NicFlowRequest(flow=five)

        for n in range(3):
            stub.OnloadFlow(flow(n), timeout=5)
        with pytest.raises(grpc.RpcError) as error:
            stub.OnloadFlow(flow(3), timeout=5)
        assert error.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED, error.value.details()
        listed = stub.ListFlows(nic_pb2.ListNicFlowsRequest(), timeout=5).flows
        assert sorted(f.flow.src_port for f in listed) == [41000, 41001, 41002]

        added = 0
        with pytest.raises(grpc.RpcError) as error:
            for n in range(2000):
                cidr = f"10.{64 + n // 256}.{n % 256}.0/24"
                stub.SetPathMtu(nic_pb2.SetPathMtuRequest(prefix=common_pb2.Prefix(cidr=cidr), mtu=1400), timeout=5)
                added += 1
        assert error.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED, error.value.details()
        assert 1000 <= added <= 1024, added
        assert len(stub.ListPathMtus(nic_pb2.ListPathMtusRequest(), timeout=5).entries) == added
    finally:
        process.stop()


def test_the_onload_list_holds_live_pins_within_the_budget(log_dir):
    """The onload list holds at most the pin budget (--max-onloaded-flows).
    Flows whose pins lapsed (--onload-idle-s without traffic) leave it to
    make room and are not listed; an onload of a listed flow reaches the
    engines, so one whose pin lapsed is pinned again; a full list of live
    pins refuses a new flow with RESOURCE_EXHAUSTED, counted once."""
    process = start_null_nic(
        log_dir,
        ["--internal-prefix", "10.10.0.0/16", "--max-flows", "1024", "--max-onloaded-flows", "3", "--onload-idle-s", "1"],
    )
    try:
        stub = process.stub()

        def flow(n: int) -> nic_pb2.NicFlowRequest:
            five = common_pb2.FiveTuple(src_ip="203.0.113.6", dst_ip="10.10.0.6", protocol=6, src_port=42000 + n, dst_port=443)
            return nic_pb2.NicFlowRequest(flow=five)

        def listed() -> list[int]:
            ports = sorted(f.flow.src_port - 42000 for f in stub.ListFlows(nic_pb2.ListNicFlowsRequest(), timeout=5).flows)
            assert len(ports) <= 3, ports
            return ports

        def stats():
            return stub.GetStats(nic_pb2.GetNicStatsRequest(), timeout=5)

        for n in range(3):
            stub.OnloadFlow(flow(n), timeout=5)
        assert listed() == [0, 1, 2]
        time.sleep(1.5)  # every pin lapses: no traffic on a null port
        # Flow 0 again: pinned anew, while 1 and 2 stay lapsed.
        stub.OnloadFlow(flow(0), timeout=5)
        assert listed() == [0]
        assert stats().pins_expired >= 2
        for n in (3, 4):
            stub.OnloadFlow(flow(n), timeout=5)
        assert listed() == [0, 3, 4]
        refused_before = stats().onloads_refused
        with pytest.raises(grpc.RpcError) as error:
            stub.OnloadFlow(flow(5), timeout=5)
        assert error.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED, error.value.details()
        assert stats().onloads_refused == refused_before + 1
        assert listed() == [0, 3, 4]
        # A listed flow is still welcome (it refreshes its pin).
        stub.OnloadFlow(flow(3), timeout=5)
        assert listed() == [0, 3, 4]
    finally:
        process.stop()


def test_a_full_list_asks_the_workers_again_only_once_a_pin_may_have_lapsed(log_dir):
    """A new flow finds the onload list full: the workers are asked about
    every listed flow (one command per worker per 512 flows) to find pins
    that lapsed. While none can have lapsed since the last answer (no flow
    was onloaded --onload-idle-s ago), further new flows are refused
    without asking again; afterwards the lapsed flows make room as ever."""
    process = start_null_nic(
        log_dir,
        ["--internal-prefix", "10.10.0.0/16", "--max-flows", "1024", "--max-onloaded-flows", "3", "--onload-idle-s", "2"],
    )
    try:
        stub = process.stub()

        def flow(n: int) -> nic_pb2.NicFlowRequest:
            five = common_pb2.FiveTuple(src_ip="203.0.113.8", dst_ip="10.10.0.8", protocol=6, src_port=44000 + n, dst_port=443)
            return nic_pb2.NicFlowRequest(flow=five)

        def commands() -> int:
            # Each query is itself a command to the worker.
            return process.telemetry("/jumbogate/stats")["worker_commands"]

        first_onload = time.monotonic()
        for n in range(3):
            stub.OnloadFlow(flow(n), timeout=5)
        before = commands()
        for n in range(3, 23):
            with pytest.raises(grpc.RpcError) as error:
                stub.OnloadFlow(flow(n), timeout=5)
            assert error.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED, error.value.details()
        asked = commands() - before - 1
        assert asked <= 1, f"20 refused onloads asked the worker {asked} times"
        assert stub.GetStats(nic_pb2.GetNicStatsRequest(), timeout=5).onloads_refused == 20
        assert time.monotonic() - first_onload < 2, "too slow to test within --onload-idle-s"

        time.sleep(max(0.0, first_onload + 2.3 - time.monotonic()))
        stub.OnloadFlow(flow(100), timeout=5)
        listed = sorted(f.flow.src_port - 44000 for f in stub.ListFlows(nic_pb2.ListNicFlowsRequest(), timeout=5).flows)
        assert listed == [100]
    finally:
        process.stop()


# Two workers on two null ports: four engines, each with its own keyed
# flow table. The engines of a worker pin at most 64 flows in 8 buckets of
# 8, so an engine refuses a flow whose two buckets hold pinned flows only,
# while the other engines, whose hashes place it elsewhere, take it.
FOUR_ENGINES = ["--vdev=net_null0,no-rx=1", "--vdev=net_null1,no-rx=1", "--lcores", lcores(2)]
SMALL_TABLE = ["--internal-prefix", "10.10.0.0/16", "--max-flows", "64", "--max-onloaded-flows", "64", "--mbufs", "2048"]


def test_an_onload_one_engine_refuses_leaves_every_engine_as_it_was(log_dir):
    """A new flow one engine refuses is RESOURCE_EXHAUSTED and changes
    nothing: the engines that took it forget it (they are not told to
    offload it, which would leave it in their tables, and marked to stop
    merging where merge_unknown_flows merged it)."""
    process = start_nic(FOUR_ENGINES, SMALL_TABLE, None, log_dir, grpc_address=f"127.0.0.1:{free_tcp_port()}", memory_mb=1024)
    try:
        stub = process.stub()
        assert stub.GetInfo(nic_pb2.GetInfoRequest(), timeout=5).workers == 2

        def flow(n: int) -> nic_pb2.NicFlowRequest:
            five = common_pb2.FiveTuple(src_ip="203.0.113.7", dst_ip="10.10.0.7", protocol=6, src_port=43000 + n, dst_port=443)
            return nic_pb2.NicFlowRequest(flow=five)

        def stats():
            return stub.GetStats(nic_pb2.GetNicStatsRequest(), timeout=5)

        onloaded, taken_elsewhere = [], 0
        for n in range(64):
            before = stats()
            try:
                stub.OnloadFlow(flow(n), timeout=5)
                onloaded.append(n)
                continue
            except grpc.RpcError as error:
                assert error.code() == grpc.StatusCode.RESOURCE_EXHAUSTED, error.details()
            after = stats()
            # Fewer refusals than workers: a worker's engines all took it.
            taken_elsewhere += after.onloads_refused - before.onloads_refused < 2
            assert after.flows_active == before.flows_active, f"flow {n}: the engines that took it kept its entry"
        assert taken_elsewhere, "no onload was refused by one worker and taken by the other"
        listed = sorted(f.flow.src_port - 43000 for f in stub.ListFlows(nic_pb2.ListNicFlowsRequest(), timeout=5).flows)
        assert listed == onloaded
    finally:
        process.stop()


def nul_flow(side: str) -> nic_pb2.NicFlowRequest:
    """A flow request whose address on `side` carries a NUL and more after it."""
    addresses = {"src_ip": "203.0.113.5", "dst_ip": "10.10.0.5"}
    addresses[side] += "\x00evil"
    return nic_pb2.NicFlowRequest(flow=common_pb2.FiveTuple(**addresses, protocol=6, src_port=40001, dst_port=443))


NUL_REQUESTS = {
    "SetPathMtu.prefix.cidr": ("SetPathMtu", nic_pb2.SetPathMtuRequest(prefix=common_pb2.Prefix(cidr="192.0.2.0/24\x00junk"), mtu=1400)),
    "DeletePathMtu.prefix.cidr": ("DeletePathMtu", nic_pb2.DeletePathMtuRequest(prefix=common_pb2.Prefix(cidr="198.51.100.0/24\x00junk"))),
    **{f"{method}.flow.{side}": (method, nul_flow(side)) for method in ("OnloadFlow", "OffloadFlow") for side in ("src_ip", "dst_ip")},
    "Configure.internal_prefixes.cidr": (
        "Configure",
        nic_pb2.NicConfig(
            internal_prefixes=[common_pb2.Prefix(cidr="10.10.0.0/16"), common_pb2.Prefix(cidr="10.20.0.0/16\x00junk")], set_internal_prefixes=True
        ),
    ),
    "ProbePath.address": ("ProbePath", common_pb2.ProbePathRequest(address="198.51.100.7\x00junk")),
}


@pytest.mark.parametrize("field", list(NUL_REQUESTS))
def test_strings_with_a_nul_are_refused_and_change_nothing(stub, field):
    """C reads a string up to its first NUL: one that has a NUL inside is
    refused whole instead of taken for its first part."""
    method, request = NUL_REQUESTS[field]
    config = stub.GetConfig(nic_pb2.GetConfigRequest(), timeout=5)
    paths = stub.ListPathMtus(nic_pb2.ListPathMtusRequest(), timeout=5)
    flows = stub.ListFlows(nic_pb2.ListNicFlowsRequest(), timeout=5)
    refused(getattr(stub, method), request, "NUL")
    assert stub.GetConfig(nic_pb2.GetConfigRequest(), timeout=5) == config
    assert stub.ListPathMtus(nic_pb2.ListPathMtusRequest(), timeout=5) == paths
    assert stub.ListFlows(nic_pb2.ListNicFlowsRequest(), timeout=5) == flows


@pytest.mark.parametrize(
    "prefixes, fragment",
    [
        ([], "internal_prefixes is empty"),
        (["10.0.0.1/8"], "internal_prefixes[0]"),
        (["10.0.0.0/8", "nonsense"], "internal_prefixes[1]"),
        ([f"10.{i}.0.0/16" for i in range(65)], "more than 64 internal_prefixes"),
    ],
)
def test_bad_internal_prefixes_are_refused_and_change_nothing(stub, prefixes, fragment):
    before = stub.GetConfig(nic_pb2.GetConfigRequest(), timeout=5)
    request = nic_pb2.NicConfig(internal_prefixes=[common_pb2.Prefix(cidr=c) for c in prefixes], set_internal_prefixes=True, internal_mtu=7000)
    refused(stub.Configure, request, fragment)
    assert stub.GetConfig(nic_pb2.GetConfigRequest(), timeout=5) == before
