"""The operator API on random and boundary requests, over real gRPC.

Every answer is a result or a status the API documents (INVALID_ARGUMENT,
NOT_FOUND, FAILED_PRECONDITION, RESOURCE_EXHAUSTED, PERMISSION_DENIED);
never UNKNOWN or INTERNAL, which would mean an exception escaped. A refused
call changes nothing: the fleet flag, every instance flag and the merge
flows are the same after it as before.
"""

from __future__ import annotations

import grpc
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from jumbogate.v1 import common_pb2, policy_pb2, policy_pb2_grpc

REFUSALS = {
    grpc.StatusCode.INVALID_ARGUMENT,
    grpc.StatusCode.NOT_FOUND,
    grpc.StatusCode.FAILED_PRECONDITION,
    grpc.StatusCode.RESOURCE_EXHAUSTED,
    grpc.StatusCode.PERMISSION_DENIED,
}

# Addresses around every edge the parser and the policy look at: the rack's
# instances, other families, scoped and mapped forms, and near-misses.
ADDRESSES = [
    "10.10.0.10",
    "10.10.0.20",
    "fd00:10::10",
    "fd00:10::20",
    "203.0.113.7",
    "2001:db8::7",
    "0.0.0.0",
    "255.255.255.255",
    "::",
    "::ffff:10.10.0.10",
    "fe80::1%eth0",
    "10.10.0.10/32",
    " 10.10.0.10",
    "010.010.000.010",
    "10.10.0",
    "",
]
UINT32_EDGES = [0, 1, 6, 17, 255, 256, 65535, 65536, 2**31 - 1, 2**31, 2**32 - 1]

texts = st.text(max_size=80)
addresses = st.one_of(st.sampled_from(ADDRESSES), texts)
uint32s = st.one_of(st.sampled_from(UINT32_EDGES), st.integers(0, 2**32 - 1))
ports = st.one_of(st.sampled_from([0, 1, 5201, 5210, 65535, 65536, 2**32 - 1]), uint32s)
five_tuples = st.builds(
    common_pb2.FiveTuple,
    src_ip=addresses,
    dst_ip=addresses,
    protocol=st.one_of(st.sampled_from([0, 1, 6, 17, 58, 256]), uint32s),
    src_port=ports,
    dst_port=ports,
)
maybe_flow = st.one_of(st.none(), five_tuples)
instance_ids = st.one_of(st.sampled_from(["web-1", "legacy-1", "WEB-1", "web-1 ", "", "web-1\x00"]), texts)


def flow_request(cls, **extra):
    return st.builds(lambda flow, **kw: cls(**({"flow": flow} if flow is not None else {}), **kw), maybe_flow, **extra)


# (method name, request strategy)
CALLS = [
    ("GetFleet", st.just(policy_pb2.GetFleetRequest())),
    ("SetFleet", st.builds(policy_pb2.SetFleetRequest, jumbo=st.booleans())),
    ("ListInstances", st.just(policy_pb2.ListInstancesRequest())),
    ("GetInstance", st.builds(policy_pb2.GetInstanceRequest, id=instance_ids)),
    ("SetInstanceJumbo", st.builds(policy_pb2.SetInstanceJumboRequest, id=instance_ids, jumbo=st.booleans())),
    ("OnloadFlow", flow_request(policy_pb2.OnloadFlowRequest, idle_timeout_s=uint32s)),
    ("OffloadFlow", flow_request(policy_pb2.OffloadFlowRequest)),
    ("ListFlows", st.just(policy_pb2.ListFlowsRequest())),
    ("GetStats", st.just(policy_pb2.GetStatsRequest())),
]
calls = st.one_of([st.tuples(st.just(name), requests) for name, requests in CALLS])


def policy_snapshot(state) -> tuple:
    return (state.fleet_jumbo, dict(state.instance_jumbo), dict(state.flows))


@pytest.fixture
def stub(api):
    with grpc.insecure_channel(api.address) as channel:
        yield policy_pb2_grpc.PolicyStub(channel)


@settings(max_examples=600, deadline=None, derandomize=True, database=None, suppress_health_check=list(HealthCheck))
@given(sequence=st.lists(calls, min_size=1, max_size=6))
def test_every_answer_is_a_result_or_a_documented_refusal(api, stub, sequence):
    for name, request in sequence:
        before = policy_snapshot(api.controller.state)
        try:
            getattr(stub, name)(request, timeout=5)
        except grpc.RpcError as err:
            assert err.code() in REFUSALS, f"{name}({request}) answered {err.code().name}: {err.details()}"
            assert err.details(), f"{name} refused without saying why"
            assert policy_snapshot(api.controller.state) == before, f"refused {name}({request}) changed the policy"


def test_the_property_test_sees_an_escaped_exception(api, stub, monkeypatch):
    """The check above must be able to fail: an exception escaping a
    handler is UNKNOWN on the wire, which is not among the refusals."""

    def broken(*_args, **_kwargs):
        raise RuntimeError("escaped")

    monkeypatch.setattr(api.controller.fleet, "set_fleet", broken)
    with pytest.raises(grpc.RpcError) as info:
        stub.SetFleet(policy_pb2.SetFleetRequest(jumbo=True), timeout=5)
    assert info.value.code() not in REFUSALS
