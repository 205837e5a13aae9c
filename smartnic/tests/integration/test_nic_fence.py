"""A deposed leader cannot change the SmartNIC (docs/fleet.md, fencing).

Each change may carry its controller's leader election id in the
jumbogate-election-id metadata. Once one was seen, a change with a lower
id, or with none, is refused with PERMISSION_DENIED and counted; reads are
never fenced. Against the real program on a null port.
"""

from __future__ import annotations

import grpc
import pytest

from jumbogate.v1 import common_pb2, nic_pb2
from testlab.nic_harness import start_null_nic

pytestmark = pytest.mark.timeout(60)

PATH = nic_pb2.SetPathMtuRequest(prefix=common_pb2.Prefix(cidr="198.51.100.0/24"), mtu=1400)


@pytest.fixture
def stub(log_dir):
    process = start_null_nic(log_dir, ["--internal-prefix", "10.10.0.0/16"])
    yield process.stub()
    process.stop()


def change(stub, election_id: str | None) -> grpc.StatusCode:
    metadata = [("jumbogate-election-id", election_id)] if election_id is not None else None
    try:
        stub.SetPathMtu(PATH, timeout=5, metadata=metadata)
        return grpc.StatusCode.OK
    except grpc.RpcError as err:
        return err.code()


def fence(stub) -> tuple[int, int, int]:
    f = stub.GetStats(nic_pb2.GetNicStatsRequest(), timeout=5).fence
    return f.election_id_high, f.election_id_low, f.changes_refused


def test_without_election_ids_changes_go_through(stub):
    """One controller and no store (the lab): nothing is fenced."""
    assert change(stub, None) == grpc.StatusCode.OK
    assert change(stub, None) == grpc.StatusCode.OK
    assert fence(stub) == (0, 0, 0)


def test_a_lower_election_id_is_refused_after_a_higher_one_changed_it(stub):
    assert change(stub, "1:10") == grpc.StatusCode.OK
    assert change(stub, "1:12") == grpc.StatusCode.OK  # the successor
    with pytest.raises(grpc.RpcError) as refused:
        stub.OnloadFlow(
            nic_pb2.NicFlowRequest(flow=common_pb2.FiveTuple(src_ip="203.0.113.5", dst_ip="10.10.0.5", protocol=6, src_port=40000, dst_port=443)),
            timeout=5,
            metadata=[("jumbogate-election-id", "1:10")],
        )
    assert refused.value.code() == grpc.StatusCode.PERMISSION_DENIED
    assert "1:10 is below 1:12" in refused.value.details()
    assert change(stub, "1:12") == grpc.StatusCode.OK  # the leader itself, again
    assert fence(stub) == (1, 12, 1)
    # Reads are never fenced.
    assert stub.ListPathMtus(nic_pb2.ListPathMtusRequest(), timeout=5, metadata=[("jumbogate-election-id", "0:1")]).entries


def test_a_change_without_an_id_is_refused_once_a_leader_fenced(stub):
    assert change(stub, "3:5") == grpc.StatusCode.OK
    assert change(stub, None) == grpc.StatusCode.PERMISSION_DENIED
    for method, request in ((stub.Configure, nic_pb2.NicConfig()), (stub.DeletePathMtu, nic_pb2.DeletePathMtuRequest(prefix=PATH.prefix))):
        with pytest.raises(grpc.RpcError) as refused:
            method(request, timeout=5)
        assert refused.value.code() == grpc.StatusCode.PERMISSION_DENIED and "jumbogate-election-id" in refused.value.details()
    assert fence(stub) == (3, 5, 3)


def test_a_new_epoch_outranks_any_revision_of_the_old_one(stub):
    """A store restored from a backup starts its revisions lower; its raised epoch still wins."""
    assert change(stub, "1:900000") == grpc.StatusCode.OK
    assert change(stub, "2:3") == grpc.StatusCode.OK
    assert change(stub, "1:900001") == grpc.StatusCode.PERMISSION_DENIED


@pytest.mark.parametrize("bad", ["", "7", "1:", ":1", "-1:2", "1:2:3", "18446744073709551616:0", "0x1:2", "1 :2"])
def test_a_malformed_election_id_is_refused_and_fences_nothing(stub, bad):
    assert change(stub, bad) == grpc.StatusCode.INVALID_ARGUMENT
    assert fence(stub)[:2] == (0, 0)
    assert change(stub, None) == grpc.StatusCode.OK


def test_a_request_refused_as_invalid_raises_no_fence(stub):
    """Only a request found valid raises the fence: a successor's malformed
    change leaves the leader that changed the SmartNIC last in charge, as a
    P4Runtime switch takes no election id from a write it refuses."""
    assert change(stub, "1:10") == grpc.StatusCode.OK
    successor = [("jumbogate-election-id", "1:12")]
    invalid = (
        ("SetPathMtu", nic_pb2.SetPathMtuRequest(prefix=common_pb2.Prefix(cidr="198.51.100.0/33"), mtu=1400)),
        ("DeletePathMtu", nic_pb2.DeletePathMtuRequest(prefix=common_pb2.Prefix(cidr="not a prefix"))),
        (
            "OnloadFlow",
            nic_pb2.NicFlowRequest(flow=common_pb2.FiveTuple(src_ip="203.0.113.5", dst_ip="10.10.0.5", protocol=6, src_port=70000, dst_port=443)),
        ),
        ("OffloadFlow", nic_pb2.NicFlowRequest(flow=common_pb2.FiveTuple(src_ip="nowhere", dst_ip="10.10.0.5", protocol=6, src_port=1, dst_port=443))),
        ("Configure", nic_pb2.NicConfig(internal_mtu=100)),
    )
    for method, request in invalid:
        with pytest.raises(grpc.RpcError) as refused:
            getattr(stub, method)(request, timeout=5, metadata=successor)
        assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT, (method, refused.value.details())
        assert fence(stub) == (1, 10, 0), method
    assert change(stub, "1:10") == grpc.StatusCode.OK
    # A valid request fences, also one the SmartNIC answers with an error:
    # the successor asked for a change that could be made.
    with pytest.raises(grpc.RpcError) as missing:
        stub.DeletePathMtu(nic_pb2.DeletePathMtuRequest(prefix=common_pb2.Prefix(cidr="192.0.2.0/24")), timeout=5, metadata=successor)
    assert missing.value.code() == grpc.StatusCode.NOT_FOUND
    assert fence(stub) == (1, 12, 0)
    assert change(stub, "1:10") == grpc.StatusCode.PERMISSION_DENIED
