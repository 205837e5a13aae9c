"""jumbogate-nic's control API on random and boundary requests, over real gRPC.

The program runs on a null port. Every answer is a result or a status the
API documents (INVALID_ARGUMENT, NOT_FOUND, FAILED_PRECONDITION,
RESOURCE_EXHAUSTED, PERMISSION_DENIED), never UNKNOWN or INTERNAL; a refused
call leaves the configuration, the path-MTU table and the onloaded flows as
they were; and the program is still serving after the run.
"""

from __future__ import annotations

import grpc
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from jumbogate.v1 import common_pb2, nic_pb2

pytestmark = pytest.mark.timeout(300)

REFUSALS = {
    grpc.StatusCode.INVALID_ARGUMENT,
    grpc.StatusCode.NOT_FOUND,
    grpc.StatusCode.FAILED_PRECONDITION,
    grpc.StatusCode.RESOURCE_EXHAUSTED,
    grpc.StatusCode.PERMISSION_DENIED,
}
UINT32_EDGES = [0, 1, 6, 17, 575, 576, 1279, 1280, 1500, 8500, 9000, 65535, 65536, 2**31, 2**32 - 1]
UINT64_EDGES = [0, 1, 10**9, 2**32, 2**63, 2**64 - 1]
ADDRESSES = ["10.10.0.5", "203.0.113.5", "fd00:10::5", "2001:db8::5", "0.0.0.0", "::", "fe80::1%eth0", "10.10.0", "", " 10.10.0.5"]
PREFIXES = ["198.51.100.0/24", "0.0.0.0/0", "::/0", "10.0.0.0/8", "2001:db8::/32", "10.0.0.1/24", "10.0.0.0/33", "::/129", "10.0.0.0", "/24", ""]

texts = st.text(max_size=60)
uint32s = st.one_of(st.sampled_from(UINT32_EDGES), st.integers(0, 2**32 - 1))
uint64s = st.one_of(st.sampled_from(UINT64_EDGES), st.integers(0, 2**64 - 1))
doubles = st.one_of(st.sampled_from([0.0, -1.0, 0.5, 0.99, 1.0, 1.5]), st.floats(allow_nan=True, allow_infinity=True))
prefixes = st.builds(common_pb2.Prefix, cidr=st.one_of(st.sampled_from(PREFIXES), texts))
flows = st.builds(
    common_pb2.FiveTuple,
    src_ip=st.one_of(st.sampled_from(ADDRESSES), texts),
    dst_ip=st.one_of(st.sampled_from(ADDRESSES), texts),
    protocol=st.one_of(st.sampled_from([0, 1, 6, 17, 256]), uint32s),
    src_port=st.one_of(st.sampled_from([0, 1, 443, 40000, 65535, 65536]), uint32s),
    dst_port=st.one_of(st.sampled_from([0, 1, 443, 40000, 65535, 65536]), uint32s),
)


def optional(field: str, values):
    """A message field that is present or absent (absent is a case too)."""
    return st.one_of(st.just({}), values.map(lambda v: {field: v}))


delays = st.builds(nic_pb2.DelayModel, rate_threshold_bps=uint64s, yield_threshold=doubles, quantile=doubles, max_delay_us=uint32s)
configs = st.builds(
    lambda delay, **kw: nic_pb2.NicConfig(**delay, **kw),
    optional("delay", delays),
    internal_mtu=st.one_of(st.just(0), uint32s),
    max_flows=st.one_of(st.just(0), st.sampled_from([1, 16, 1024, 4096]), uint32s),
    max_segments=st.one_of(st.just(0), uint32s),
    default_path_mtu_v4=st.one_of(st.just(0), uint32s),
    default_path_mtu_v6=st.one_of(st.just(0), uint32s),
    merge_unknown_flows=st.booleans(),
    set_merge_unknown_flows=st.booleans(),
    internal_prefixes=st.lists(prefixes, max_size=3),
    set_internal_prefixes=st.booleans(),
)
CALLS = [
    ("GetInfo", st.just(nic_pb2.GetInfoRequest())),
    ("GetConfig", st.just(nic_pb2.GetConfigRequest())),
    ("Configure", configs),
    ("SetPathMtu", st.builds(lambda p, **kw: nic_pb2.SetPathMtuRequest(**p, **kw), optional("prefix", prefixes), mtu=uint32s)),
    ("DeletePathMtu", st.builds(lambda p: nic_pb2.DeletePathMtuRequest(**p), optional("prefix", prefixes))),
    ("ListPathMtus", st.just(nic_pb2.ListPathMtusRequest())),
    ("OnloadFlow", st.builds(lambda f: nic_pb2.NicFlowRequest(**f), optional("flow", flows))),
    ("OffloadFlow", st.builds(lambda f: nic_pb2.NicFlowRequest(**f), optional("flow", flows))),
    ("ListFlows", st.just(nic_pb2.ListNicFlowsRequest())),
    ("GetStats", st.just(nic_pb2.GetNicStatsRequest())),
]
calls = st.one_of([st.tuples(st.just(name), requests) for name, requests in CALLS])


def nic_snapshot(stub) -> tuple:
    config = stub.GetConfig(nic_pb2.GetConfigRequest(), timeout=5)
    mtus = stub.ListPathMtus(nic_pb2.ListPathMtusRequest(), timeout=5)
    flows = stub.ListFlows(nic_pb2.ListNicFlowsRequest(), timeout=5)
    return (
        config.SerializeToString(deterministic=True),
        sorted((e.prefix.cidr, e.mtu) for e in mtus.entries),
        sorted(f.flow.SerializeToString(deterministic=True) for f in flows.flows),
    )


@settings(max_examples=300, deadline=None, derandomize=True, database=None, suppress_health_check=list(HealthCheck))
@given(sequence=st.lists(calls, min_size=1, max_size=4))
def test_every_answer_is_a_result_or_a_documented_refusal(nic, stub, sequence):
    for name, request in sequence:
        before = nic_snapshot(stub)
        try:
            getattr(stub, name)(request, timeout=5)
        except grpc.RpcError as err:
            assert err.code() in REFUSALS, f"{name}({request}) answered {err.code().name}: {err.details()}"
            assert err.details(), f"{name} refused without saying why"
            assert nic_snapshot(stub) == before, f"refused {name}({request}) changed the SmartNIC"
    assert nic.proc.poll() is None, "jumbogate-nic exited"
