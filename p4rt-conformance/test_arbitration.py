"""Arbitration (P4Runtime "Client Arbitration and Controller Replication"), the scenarios of p4lang PI's
server arbitration tests: who is primary, what each stream is told, which updates are refused."""

from __future__ import annotations

import grpc
import pytest
from p4.v1 import p4runtime_pb2
from target import ALREADY_EXISTS, INVALID_ARGUMENT, OK, PERMISSION_DENIED, insert


def test_the_first_client_is_primary_and_told_so(controllers):
    answer = controllers((0, 1)).arbitrate()
    assert answer.status.code == OK
    assert (answer.election_id.high, answer.election_id.low) == (0, 1)
    assert answer.device_id == 1


def test_a_lower_id_is_backup_and_told_the_primarys_id(controllers):
    assert controllers((0, 5)).arbitrate().status.code == OK
    answer = controllers((0, 2)).arbitrate()
    assert answer.status.code == ALREADY_EXISTS
    assert answer.election_id.low == 5


def test_a_higher_id_takes_over_and_everyone_is_told(controllers):
    first = controllers((0, 5))
    assert first.arbitrate().status.code == OK
    second = controllers((1, 0))
    assert second.arbitrate().status.code == OK
    demoted = first.next("arbitration")
    assert demoted.status.code == ALREADY_EXISTS
    assert (demoted.election_id.high, demoted.election_id.low) == (1, 0)


def test_the_same_id_on_two_streams_is_refused(controllers):
    assert controllers((0, 7)).arbitrate().status.code == OK
    twin = controllers((0, 7))
    with pytest.raises(grpc.RpcError) as caught:
        twin.arbitrate()
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT


def test_a_client_without_an_election_id_is_a_backup(controllers):
    assert controllers((0, 3)).arbitrate().status.code == OK
    answer = controllers(None).arbitrate()
    assert answer.status.code == ALREADY_EXISTS


@pytest.mark.bmv2_deviates("a stream for device 99 is made primary of it: PI creates any device it is asked for")
def test_an_unknown_device_is_not_found(controllers):
    with pytest.raises(grpc.RpcError) as caught:
        controllers((0, 1), device_id=99).arbitrate()
    assert caught.value.code() == grpc.StatusCode.NOT_FOUND


def test_a_stream_cannot_move_to_another_device(controllers):
    client = controllers((0, 1))
    assert client.arbitrate().status.code == OK
    with pytest.raises(grpc.RpcError) as caught:
        client.arbitrate(device_id=2)
    assert caught.value.code() == grpc.StatusCode.FAILED_PRECONDITION


def test_a_primary_that_lowers_its_id_below_a_backup_becomes_backup(controllers):
    primary, backup = controllers((0, 10)), controllers((0, 5))
    assert primary.arbitrate().status.code == OK
    assert backup.arbitrate().status.code == ALREADY_EXISTS
    assert primary.arbitrate((0, 1)).status.code == ALREADY_EXISTS
    assert backup.next("arbitration").status.code == OK


def test_by_default_the_highest_backup_is_promoted_when_the_primary_leaves(controllers):
    """jumbogate-switch's documented deviation (docs/switch.md, "Arbitration"); the specification's behaviour,
    no primary until a client re-arbitrates, is --primary-on-leave wait (test_election.py)."""
    primary, backup = controllers((0, 10)), controllers((0, 5))
    assert primary.arbitrate().status.code == OK
    assert backup.arbitrate().status.code == ALREADY_EXISTS
    primary.close()
    assert backup.next("arbitration").status.code == OK


def test_writes_need_the_primarys_election_id(primary, controllers, program):
    """Access arbitration: a write is judged by the election id it carries."""
    backup = controllers((0, 4))
    assert backup.arbitrate().status.code == ALREADY_EXISTS
    assert backup.write([_insert_role(program, 1)]) == [PERMISSION_DENIED]
    assert primary.write([_insert_role(program, 1)], election=False) == [PERMISSION_DENIED]
    assert primary.write([_insert_role(program, 1)]) == [OK]
    # The primary's id on another channel without a stream is the primary's (PI's access arbitration).
    other = controllers((0, 10))
    assert other.write([_insert_role(program, 2)]) == [OK]
    # Anyone may read.
    assert len(backup.read([_all_entries()])) == 2


def test_a_pipeline_from_a_backup_is_refused(primary, controllers, program):
    backup = controllers((0, 4))
    assert backup.arbitrate().status.code == ALREADY_EXISTS
    with pytest.raises(grpc.RpcError) as caught:
        backup.set_pipeline(program.p4info)
    assert caught.value.code() == grpc.StatusCode.PERMISSION_DENIED


def test_a_write_with_unknown_ids_is_invalid_argument(primary, program):
    unknown = p4runtime_pb2.Entity(table_entry=p4runtime_pb2.TableEntry(table_id=1))
    assert primary.write([insert(unknown)]) == [INVALID_ARGUMENT]


def _insert_role(program, port):
    return insert(program.port_role(port))


def _all_entries():
    return p4runtime_pb2.Entity(table_entry=p4runtime_pb2.TableEntry())
