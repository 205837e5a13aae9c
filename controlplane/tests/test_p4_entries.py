"""Entity builders of jumbogate.p4: values, and encoding against a compiled P4Info."""

import ipaddress
from pathlib import Path

import finsy as fy
import pytest

from jumbogate.p4 import FiveTuple, NextHop, PortRole, names
from jumbogate.p4 import entries as e
from jumbogate.p4.constants import MEMBERS_PER_GROUP

REPO = Path(__file__).resolve().parents[2]
P4INFO = REPO / "p4src" / "compiled" / "depth256" / "jumbogate.p4info.txtpb"


def every_entity():
    hop = NextHop(3, "00:00:00:00:00:01", "00:00:00:00:00:02")
    return [
        e.port_role(1, PortRole.EXTERNAL),
        e.nic_port(2),
        e.nic_port(None),
        e.depth_policy(True),
        e.depth_policy(False),
        e.fleet_flag(True),
        e.elephant_threshold(100_000),
        e.signal_source("192.0.2.1", "2001:db8::1"),
        e.signal_source(None, None),
        e.instance_policy("10.0.0.1", True),
        e.instance_policy("fd00::1", False),
        e.path_mtu("198.51.100.0/24", 1400),
        e.path_mtu("2001:db8::/32", 1280),
        e.route("10.0.0.0/8", 1),
        e.route("fd00::/8", 1),
        *e.ecmp_group(1, [hop, hop], weights=[2, 1]),
        e.merge_flow(FiveTuple("10.0.0.1", "198.51.100.1", 1, 2), idle_timeout_ns=10**9),
        e.merge_flow(FiveTuple("fd00::1", "2001:db8::1", 1, 2)),
        e.merge_service("10.0.0.0/24", 80, 90),
        e.merge_service("fd00::/64", 443, 443),
        e.merge_service("0.0.0.0/0", 0, 65535),
        e.icmp_meter(1, 100, 10),
        e.icmp_meter_reset(1),
        e.elephant_digest(),
    ]


def test_ecmp_group_expands_weights():
    hop_a = NextHop(1, "00:00:00:00:00:01", "00:00:00:00:00:02")
    hop_b = NextHop(2, 1, 2)
    *members, group, entry = e.ecmp_group(7, [hop_a, hop_b], weights=[3, 1])
    assert [m.member_id for m in members] == [7 * MEMBERS_PER_GROUP + i for i in range(4)]
    assert [m.action.args["port"] for m in members] == [1, 1, 1, 2]
    assert [m.member_id for m in group.members] == [m.member_id for m in members]
    assert group.group_id == 7 and entry.match["group_id"] == 7
    with pytest.raises(ValueError):
        e.ecmp_group(1, [])
    with pytest.raises(ValueError):
        e.ecmp_group(1, [hop_a], weights=[0])


def test_tables_chosen_by_family():
    assert e.route("10.0.0.0/8", 1).table_id == names.ROUTES_V4
    assert e.route("fd00::/8", 1).table_id == names.ROUTES_V6
    assert e.instance_policy("fd00::1", True).table_id == names.INSTANCES_V6
    assert e.path_mtu("10.0.0.0/8", 1400).table_id == names.PATH_MTU_V4


def test_flow_addresses_are_128_bits_wide():
    entry = e.merge_flow(FiveTuple("10.0.0.1", "198.51.100.1", 1, 2))
    assert entry.match["src_addr"] == int(ipaddress.IPv4Address("10.0.0.1"))
    assert entry.match["ip_version"] == 4
    with pytest.raises(ValueError):
        e.merge_flow(FiveTuple("10.0.0.1", "fd00::1", 1, 2))


def test_merge_service_wildcards():
    entry = e.merge_service("0.0.0.0/0", 0, 65535)
    assert "dst_addr" not in entry.match and "dst_port" not in entry.match
    assert entry.priority > 0
    with pytest.raises(ValueError):
        e.merge_service("10.0.0.0/8", 90, 80)


def test_path_mtu_floor():
    with pytest.raises(ValueError):
        e.path_mtu("2001:db8::/32", 1279)
    with pytest.raises(ValueError):
        e.path_mtu("10.0.0.0/8", 575)


def test_decode_elephant_digest():
    report = e.decode_elephant_digest(
        {
            "ip_version": 6,
            "src_addr": int(ipaddress.IPv6Address("fd00::1")),
            "dst_addr": int(ipaddress.IPv6Address("2001:db8::2")),
            "protocol": 6,
            "src_port": 10,
            "dst_port": 20,
            "estimated_bytes": 12345,
        }
    )
    assert report.flow == FiveTuple(ipaddress.IPv6Address("fd00::1"), ipaddress.IPv6Address("2001:db8::2"), 10, 20)
    assert report.estimated_bytes == 12345


def test_every_name_and_entity_encodes_against_p4info():
    schema = fy.P4Schema(P4INFO)
    for table in names.TABLES:
        assert schema.tables[table].alias == table
    for action in names.ACTIONS:
        assert schema.actions[action]
    for counter in names.COUNTERS:
        assert schema.counters[counter]
    assert schema.action_profiles[names.ECMP_SELECTOR]
    assert schema.meters[names.ICMP_SIGNAL_METER]
    assert schema.digests[names.ELEPHANT_DIGEST]
    assert schema.tables[names.MERGE_FLOWS].idle_timeout_behavior is not None
    for entity in every_entity():
        assert entity.encode(schema) is not None, entity
