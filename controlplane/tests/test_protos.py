"""The gRPC contracts: generated stubs import and carry what the parts rely on."""

from jumbogate.v1 import common_pb2, nic_pb2, nic_pb2_grpc, policy_pb2, policy_pb2_grpc


def method_names(module, service: str) -> set[str]:
    return set(module.DESCRIPTOR.services_by_name[service].methods_by_name)


def test_policy_service_has_the_operator_calls():
    assert method_names(policy_pb2, "Policy") == {
        "GetFleet", "SetFleet", "ListInstances", "GetInstance", "SetInstanceJumbo",
        "OnloadFlow", "OffloadFlow", "ListFlows", "GetStats", "Watch", "ListPaths", "ProbePath",
        "ImportConfig", "ExportConfig", "RaiseFencingEpoch", "GetStatus", "ReloadConfig",
        "GetNicStats", "GetNicConfig", "ListNicFlows",
    }  # fmt: skip
    watch = policy_pb2.DESCRIPTOR.services_by_name["Policy"].methods_by_name["Watch"]
    assert watch.server_streaming and not watch.client_streaming
    assert hasattr(policy_pb2_grpc, "PolicyStub") and hasattr(policy_pb2_grpc, "add_PolicyServicer_to_server")


def test_nic_service_has_the_control_calls():
    assert method_names(nic_pb2, "Nic") == {
        "GetInfo", "GetConfig", "Configure", "SetPathMtu", "DeletePathMtu", "ListPathMtus",
        "OnloadFlow", "OffloadFlow", "ListFlows", "GetStats", "ListLearnedPaths", "ProbePath",
    }  # fmt: skip
    assert hasattr(nic_pb2_grpc, "NicStub")


def test_messages_round_trip_through_the_wire_format():
    flow = common_pb2.FiveTuple(src_ip="203.0.113.7", dst_ip="fd00:10::10", protocol=6, src_port=40000, dst_port=5201)
    stats = nic_pb2.NicStats(packets_in=10, merged_packets=1, conversion_yield=0.93, merge_delay=[nic_pb2.HistogramBucket(le_us=8, count=3)])
    event = policy_pb2.Event(kind=policy_pb2.EVENT_KIND_FLOW_ONLOADED, flow=flow, estimated_bytes=123456)
    assert nic_pb2.NicStats.FromString(stats.SerializeToString()) == stats
    decoded = policy_pb2.Event.FromString(event.SerializeToString())
    assert decoded.flow.dst_ip == "fd00:10::10" and decoded.kind == policy_pb2.EVENT_KIND_FLOW_ONLOADED


def test_every_policy_method_that_only_reads_is_listed_as_a_read_and_every_change_is_not():
    """A read missing from tls.READING_METHODS is refused to read-only clients; a change listed there would be allowed to them."""
    from jumbogate.tls import READING_METHODS

    methods = method_names(policy_pb2, "Policy")
    changes = {"SetFleet", "SetInstanceJumbo", "OnloadFlow", "OffloadFlow", "ProbePath", "ImportConfig", "RaiseFencingEpoch", "ReloadConfig"}
    # ExportConfig reads, but hands out the whole policy with its addresses: admin only, as before.
    assert READING_METHODS == methods - changes - {"ExportConfig"}
