"""The packet replication engine's entries ("PacketReplicationEngineEntry") and one-shot action selector
programming ("One Shot Action Selector Programming"), through p4lang's bindings: p4runtime 1.3.0's Replica
still names its port with the uint32 egress_port, which the switch takes beside 1.4's port bytes."""

from __future__ import annotations

import grpc
import pytest
from p4.v1 import p4runtime_pb2
from target import ALREADY_EXISTS, INVALID_ARGUMENT, OK, delete, insert


def clone_session(session_id: int, ports: list[int], truncate: int = 0) -> p4runtime_pb2.Entity:
    entry = p4runtime_pb2.PacketReplicationEngineEntry()
    entry.clone_session_entry.session_id = session_id
    entry.clone_session_entry.packet_length_bytes = truncate
    for port in ports:
        entry.clone_session_entry.replicas.add(egress_port=port, instance=0)
    return p4runtime_pb2.Entity(packet_replication_engine_entry=entry)


def multicast_group(group_id: int, replicas: list[tuple[int, int]]) -> p4runtime_pb2.Entity:
    entry = p4runtime_pb2.PacketReplicationEngineEntry()
    entry.multicast_group_entry.multicast_group_id = group_id
    for port, instance in replicas:
        entry.multicast_group_entry.replicas.add(egress_port=port, instance=instance)
    return p4runtime_pb2.Entity(packet_replication_engine_entry=entry)


@pytest.mark.bmv2_deviates("a clone session with packet_length_bytes is UNKNOWN ('Error when creating clone session in target')")
def test_a_clone_session_with_truncation_is_kept_and_read_back(primary):
    session = clone_session(3, [1, 2], truncate=64)
    assert primary.write([insert(session), insert(session)]) == [OK, ALREADY_EXISTS]
    (read,) = primary.read([clone_session(3, [])])
    assert read == session
    assert primary.write([delete(clone_session(3, []))]) == [OK]
    assert primary.read([clone_session(0, [])]) == []


def test_a_multicast_group_refuses_a_repeated_replica(primary):
    assert primary.write([insert(multicast_group(4, [(1, 0), (1, 0)])), insert(multicast_group(4, [(1, 0), (1, 1)]))]) == [INVALID_ARGUMENT, OK]
    (read,) = primary.read([multicast_group(4, [])])
    # The replicas are a set: the specification gives their order no meaning (BMv2 reads them back reversed).
    assert sorted((r.egress_port, r.instance) for r in read.packet_replication_engine_entry.multicast_group_entry.replicas) == [(1, 0), (1, 1)]


def test_a_clone_session_without_truncation_is_kept_and_read_back(primary):
    session = clone_session(5, [1, 2])
    assert primary.write([insert(session), insert(session)]) == [OK, ALREADY_EXISTS]
    (read,) = primary.read([clone_session(5, [])])
    assert read == session
    assert primary.write([delete(clone_session(5, []))]) == [OK]


def test_a_one_shot_entry_is_read_back_as_written(primary, program):
    hop = program.action("set_next_hop", port=b"\x01", src_mac=b"\x02\0\0\0\0\x01", dst_mac=b"\x02\0\0\0\0\x02")
    entry = program.entry("next_hops", [program.exact("next_hops", "group_id", b"\x01")])
    entry.table_entry.action.action_profile_action_set.action_profile_actions.add(action=hop, weight=3)
    assert primary.write([insert(entry)]) == [OK]
    (read,) = primary.read([p4runtime_pb2.Entity(table_entry=p4runtime_pb2.TableEntry(table_id=program.tables["next_hops"].preamble.id))])
    assert read.table_entry.action == entry.table_entry.action


def test_one_shot_programming_shows_no_desugared_groups(primary, program):
    """One shots may be realized with groups and members, but reads answer "with the original one shot messages"
    and never "a desugared version" ("One Shot Action Selector Programming"). The specification does not say how
    a read of the profile's groups answers then: jumbogate-switch finds none, BMv2 refuses the read as a mix of
    programming modes (INVALID_ARGUMENT). Either shows no desugared group."""
    hop = program.action("set_next_hop", port=b"\x01", src_mac=b"\x02\0\0\0\0\x01", dst_mac=b"\x02\0\0\0\0\x02")
    entry = program.entry("next_hops", [program.exact("next_hops", "group_id", b"\x01")])
    entry.table_entry.action.action_profile_action_set.action_profile_actions.add(action=hop, weight=3)
    assert primary.write([insert(entry)]) == [OK]
    try:
        groups = primary.read([p4runtime_pb2.Entity(action_profile_group=p4runtime_pb2.ActionProfileGroup())])
    except grpc.RpcError as refused:
        assert refused.code() == grpc.StatusCode.INVALID_ARGUMENT, refused
        groups = []
    assert groups == []
