"""One FiveTuple for the policy, the API and the switch entries."""

import ipaddress

import pytest

from jumbogate.flow import UDP, FiveTuple, FlowError
from jumbogate.p4 import entries
from jumbogate.server import five_tuple_from_pb
from jumbogate.state import PolicyError
from jumbogate.v1 import common_pb2


@pytest.mark.parametrize(
    "args, message",
    [
        (("1.2.3", "10.10.0.10", 6, 1, 2), "src_ip"),
        (("1.2.3.4", "fd00::1", 6, 1, 2), "different IP versions"),
        (("1.2.3.4", "10.10.0.10", 1, 1, 2), "protocol 1"),
        (("1.2.3.4", "10.10.0.10", 6, 0, 2), "src_port 0"),
        (("1.2.3.4", "10.10.0.10", 6, 1, 70000), "dst_port 70000"),
        (("fe80::1%eth0", "fd00:10::10", 6, 1, 2), "has a zone"),
    ],
)
def test_parse_names_the_field_and_the_reason(args, message):
    with pytest.raises(FlowError, match=message):
        FiveTuple.parse(*args)


def test_the_api_refuses_a_bad_flow_as_invalid_argument():
    with pytest.raises(PolicyError) as info:
        five_tuple_from_pb(common_pb2.FiveTuple(src_ip="1.2.3.4", dst_ip="10.10.0.10", protocol=6, src_port=0, dst_port=80))
    assert info.value.code == "INVALID_ARGUMENT" and "src_port 0" in info.value.message


def test_text_and_address_objects_make_the_same_flow():
    parsed = FiveTuple.parse("2001:db8::7", "fd00:10::10", UDP, 1, 2)
    built = FiveTuple(ipaddress.IPv6Address("2001:db8::7"), "fd00:10::10", 1, 2, UDP)
    assert parsed == built and hash(parsed) == hash(built) and parsed.ip_version == 6
    assert str(parsed) == "udp [2001:db8::7]:1 -> [fd00:10::10]:2"


def test_mixed_families_sort_ipv4_first():
    v6 = FiveTuple.parse("2001:db8::7", "fd00:10::10", 6, 1, 2)
    v4 = FiveTuple.parse("203.0.113.7", "10.10.0.10", 6, 1, 2)
    assert sorted([v6, v4]) == [v4, v6]


def test_a_switch_entry_round_trips_to_the_same_flow():
    from jumbogate import translate

    flow = FiveTuple.parse("203.0.113.7", "10.10.0.10", 6, 40000, 5201)
    assert translate.merge_flow_tuple(entries.merge_flow(flow)) == flow
