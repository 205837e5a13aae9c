"""Digests (P4Runtime "DigestEntry" and "DigestList"), the scenarios of p4lang PI's server digest tests: a
config is inserted, modified, read and deleted; lists reach the primary with list ids and are acknowledged;
an ack for an unknown digest is a stream error that carries the ack."""

from __future__ import annotations

import grpc
import pytest
from p4.v1 import p4runtime_pb2
from target import INVALID_ARGUMENT, NOT_FOUND, OK, delete, insert, modify, tcp_frame


def config(program, max_timeout_ns: int, max_list_size: int, ack_timeout_ns: int = 0) -> p4runtime_pb2.Entity:
    c = p4runtime_pb2.DigestEntry.Config(max_timeout_ns=max_timeout_ns, max_list_size=max_list_size, ack_timeout_ns=ack_timeout_ns)
    return p4runtime_pb2.Entity(digest_entry=p4runtime_pb2.DigestEntry(digest_id=program.digest.preamble.id, config=c))


def read_config(primary, digest_id: int = 0):
    """The digest configs: all of them (digest_id 0, a wildcard read), or one digest's. A read of one digest that
    has no config finds nothing on jumbogate-switch and is NOT_FOUND on BMv2: both are taken as none."""
    try:
        return primary.read([p4runtime_pb2.Entity(digest_entry=p4runtime_pb2.DigestEntry(digest_id=digest_id))])
    except grpc.RpcError as e:
        if digest_id and e.code() == grpc.StatusCode.NOT_FOUND:
            return []
        raise


def test_a_config_is_inserted_modified_read_and_deleted(primary, program):
    assert primary.write([modify(config(program, 1000, 1))]) == [NOT_FOUND]
    assert primary.write([insert(config(program, 1000, 1))]) == [OK]
    assert primary.write([insert(config(program, 1000, 1))]) == [6]  # ALREADY_EXISTS
    assert primary.write([modify(config(program, 2000, 4))]) == [OK]
    (entry,) = read_config(primary, program.digest.preamble.id)
    assert (entry.digest_entry.config.max_timeout_ns, entry.digest_entry.config.max_list_size) == (2000, 4)
    assert primary.write([delete(config(program, 2000, 4))]) == [OK]
    assert read_config(primary, program.digest.preamble.id) == []


@pytest.mark.bmv2_deviates("a read with digest_id unset is UNIMPLEMENTED ('digest_id must be set when reading DigestEntry')")
def test_a_wildcard_read_finds_every_digest_config(primary, program):
    """A default id in a read is a wildcard ("Wildcard Reads")."""
    assert read_config(primary) == []
    assert primary.write([insert(config(program, 1000, 1))]) == [OK]
    (entry,) = read_config(primary)
    assert entry.digest_entry.digest_id == program.digest.preamble.id


def test_an_unknown_digest_id_is_refused(primary, program):
    """The specification names no code for a digest id the P4Info does not have: jumbogate-switch answers
    INVALID_ARGUMENT, as for every unknown id; BMv2 answers NOT_FOUND."""
    unknown = config(program, 1000, 1)
    unknown.digest_entry.digest_id = 1
    assert primary.write([insert(unknown)]) in ([INVALID_ARGUMENT], [NOT_FOUND])


def elephants(primary, program) -> None:
    """Every TCP flow from port 0 to 10.9.0.1 is an elephant from its first byte."""
    fleet = program.default(
        "fleet_policy", program.action("set_fleet_jumbo", enabled=b"\x01", guest_jumbo_mtu=(8500).to_bytes(2, "big"), default_mtu=(1500).to_bytes(2, "big"))
    )
    threshold = program.default("elephant_config", program.action("set_elephant_threshold", bytes=b"\x01"))
    instance = program.entry(
        "instances_v4", [program.exact("instances_v4", "instance_addr", bytes([10, 9, 0, 1]))], program.action("set_instance_jumbo", enabled=b"\x01")
    )
    updates = program.route_to(0, b"\x02\0\0\0\0\x01", b"\x02\0\0\0\0\x02") + [modify(fleet), modify(threshold), insert(instance)]
    assert primary.write(updates) == [OK] * len(updates)


def test_lists_reach_the_primary_and_are_acknowledged(target, primary, program):
    elephants(primary, program)
    assert primary.write([insert(config(program, 10**6, 1, ack_timeout_ns=10**9))]) == [OK]
    target.veth.send(tcp_frame(10001))
    digest = primary.next("digest")
    assert digest.digest_id == program.digest.preamble.id
    assert digest.list_id > 0 and len(digest.data) == 1
    members = digest.data[0].struct.members
    assert members[0].bitstring == b"\x04"  # IPv4
    primary.send(p4runtime_pb2.StreamMessageRequest(digest_ack=p4runtime_pb2.DigestListAck(digest_id=digest.digest_id, list_id=digest.list_id)))
    target.veth.send(tcp_frame(10002))
    assert primary.next("digest").list_id > digest.list_id


@pytest.mark.bmv2_deviates("no StreamError for an ack of an unknown digest id")
def test_an_ack_for_an_unknown_digest_is_a_stream_error_carrying_it(primary):
    primary.send(p4runtime_pb2.StreamMessageRequest(digest_ack=p4runtime_pb2.DigestListAck(digest_id=4242, list_id=3)))
    error = primary.next("error")
    assert error.canonical_code == INVALID_ARGUMENT
    assert (error.digest_list_ack.digest_list_ack.digest_id, error.digest_list_ack.digest_list_ack.list_id) == (4242, 3)


def test_a_backup_may_not_configure_digests(primary, controllers, program):
    backup = controllers((0, 1))
    assert backup.arbitrate().status.code != OK
    assert backup.write([insert(config(program, 1000, 1))]) == [7]  # PERMISSION_DENIED
