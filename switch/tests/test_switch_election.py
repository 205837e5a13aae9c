"""jumbogate-switch's P4Runtime server, against the specification: who may write.

Every test talks to the real program over real gRPC with hand-made
messages: arbitration by election id and role decides who may write, a
client naming another device is refused, and a foreign P4Info is refused
with its first difference named. The options a fleet sets for arbitration
are test_switch_arbitration.py's subject.
"""

from __future__ import annotations

import grpc
import pytest
from finsy.proto import p4r
from switch_harness import (
    ALREADY_EXISTS,
    DEVICE_ID,
    FAILED_PRECONDITION,
    INFO,
    NOT_FOUND,
    OK,
    PERMISSION_DENIED,
    Client,
    OnePortSwitch,
    all_table_entries,
    merge_flow_entry,
    port_role,
    route_v4,
    update,
)


def test_without_a_pipeline_reads_and_writes_fail_precondition(log_dir):
    wiring = OnePortSwitch(log_dir)
    try:
        client = Client(wiring.switch.grpc_address, election_low=1)
        client.arbitrate()
        with pytest.raises(grpc.RpcError) as caught:
            client.read([p4r.Entity(table_entry=p4r.TableEntry())])
        assert caught.value.code() == grpc.StatusCode.FAILED_PRECONDITION
        assert "no forwarding pipeline config" in caught.value.details().lower()
        assert client.write([update(p4r.Update.INSERT, port_role(1, 1))]) == [FAILED_PRECONDITION]
        client.close()
    finally:
        wiring.close()


def test_a_foreign_p4info_is_refused_naming_the_difference(switch, primary):
    foreign = p4r.SetForwardingPipelineConfigRequest().config.p4info.__class__()
    foreign.CopyFrom(INFO)
    for t in foreign.tables:
        if t.preamble.alias == "merge_flows":
            next(f for f in t.match_fields if f.name == "src_port").bitwidth = 8
    with pytest.raises(grpc.RpcError) as caught:
        primary.set_pipeline(foreign)
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "merge_flows" in caught.value.details()
    renamed = foreign.__class__()
    renamed.CopyFrom(INFO)
    renamed.tables[0].preamble.id += 1
    with pytest.raises(grpc.RpcError) as caught:
        primary.set_pipeline(renamed)
    assert "has id" in caught.value.details()


def test_only_the_primary_writes(switch, primary):
    backup = Client(switch.switch.grpc_address, election_low=50)
    try:
        answer = backup.arbitrate()
        assert answer.status.code == ALREADY_EXISTS  # a backup
        assert answer.election_id.low == 100  # the primary's
        assert backup.write([update(p4r.Update.INSERT, port_role(5, 1))]) == [PERMISSION_DENIED]
        with pytest.raises(grpc.RpcError) as caught:
            backup.set_pipeline(INFO)
        assert caught.value.code() == grpc.StatusCode.PERMISSION_DENIED
        # A backup may read.
        assert backup.read([p4r.Entity(table_entry=p4r.TableEntry())]) == []
        # A write naming the primary's election id without being it still
        # fails once the primary has gone, and the backup is promoted.
        primary.close()
        promoted = backup.next_arbitration()
        assert promoted.status.code == OK
        assert backup.write([update(p4r.Update.INSERT, port_role(5, 1))]) == [OK]
    finally:
        backup.close()


def test_a_second_client_with_the_same_election_id_is_refused(switch, primary):
    twin = Client(switch.switch.grpc_address, election_low=100)
    try:
        twin.send(p4r.StreamMessageRequest(arbitration=p4r.MasterArbitrationUpdate(device_id=1, election_id=p4r.Uint128(low=100))))
        with pytest.raises(grpc.RpcError) as caught:
            twin.next_response()
        assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    finally:
        twin.close()


def test_a_closed_clients_election_id_is_free_once_close_returns(switch):
    """Client.close() returns once the switch has let go of the stream: a CI run's next primary, arbitrating with
    the id the last test's primary had just closed, was refused as a second holder of it."""
    for n in range(20):
        client = Client(switch.switch.grpc_address, election_low=100)
        assert client.arbitrate().status.code == OK
        client.set_pipeline(INFO)
        assert client.write([update(p4r.Update.INSERT, merge_flow_entry(n, 20 * 1000 * 1000))]) == [OK]
        client.next_response()  # the switch is sending idle-timeout notifications as the client leaves
        client.close()


def test_a_higher_election_id_takes_over(switch, primary):
    usurper = Client(switch.switch.grpc_address, election_low=200)
    try:
        assert usurper.arbitrate().status.code == OK
        demoted = primary.next_arbitration()
        assert demoted.status.code == ALREADY_EXISTS
        assert primary.write([update(p4r.Update.INSERT, port_role(6, 1))]) == [PERMISSION_DENIED]
        assert usurper.write([update(p4r.Update.INSERT, port_role(6, 1))]) == [OK]
    finally:
        usurper.close()


def test_wrong_device_is_not_found(switch):
    stranger = Client(switch.switch.grpc_address, election_low=1, device_id=99)
    try:
        with pytest.raises(grpc.RpcError) as caught:
            stranger.read([p4r.Entity(table_entry=p4r.TableEntry())])
        assert caught.value.code() == grpc.StatusCode.NOT_FOUND
    finally:
        stranger.close()


def test_a_role_other_than_the_default_is_refused(switch, primary):
    """Any role name used to be accepted and created: a client naming a role of its own became the primary of it
    and wrote beside the controller (issue 33, finding 1). A named role now exists only with a P4RoleConfig saying
    what it may do (test_switch_roles.py): arbitration for one without a config is INVALID_ARGUMENT, and a write or a
    pipeline naming a role no stream holds finds no such role (NOT_FOUND, as the specification says for a Write's
    role)."""
    mallory = Client(switch.switch.grpc_address, election_low=500, role="mallory")
    try:
        with pytest.raises(grpc.RpcError) as caught:
            mallory.arbitrate()
        assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "mallory" in caught.value.details()
        assert mallory.write([update(p4r.Update.INSERT, route_v4(bytes([10, 66, 0, 0]), 16))]) == [NOT_FOUND]
        with pytest.raises(grpc.RpcError) as caught:
            mallory.set_pipeline(INFO)
        assert caught.value.code() == grpc.StatusCode.NOT_FOUND
    finally:
        mallory.close()
    assert all_table_entries(primary) == []
    # The controller is still the primary, and alone.
    assert primary.write([update(p4r.Update.INSERT, port_role(1, 1))]) == [OK]


def test_a_live_stream_naming_another_device_fails_precondition(switch):
    """A stream arbitrated for this device that re-arbitrates for another got NOT_FOUND, the answer for a new stream
    naming an unknown device; the specification says FAILED_PRECONDITION."""
    client = Client(switch.switch.grpc_address, election_low=300)
    try:
        assert client.arbitrate().status.code == OK
        client.send(p4r.StreamMessageRequest(arbitration=p4r.MasterArbitrationUpdate(device_id=DEVICE_ID + 1, election_id=p4r.Uint128(low=300))))
        with pytest.raises(grpc.RpcError) as caught:
            client.next_arbitration()
        assert caught.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    finally:
        client.close()


def test_a_backups_write_before_any_pipeline_is_permission_denied(log_dir):
    """The switch checked for a pipeline before the primary: a backup's write got FAILED_PRECONDITION. The
    specification checks the primary first."""
    wiring = OnePortSwitch(log_dir)
    clients = []
    try:
        clients.append(Client(wiring.switch.grpc_address, election_low=2))
        assert clients[0].arbitrate().status.code == OK
        clients.append(Client(wiring.switch.grpc_address, election_low=1))
        assert clients[1].arbitrate().status.code == ALREADY_EXISTS
        assert clients[1].write([update(p4r.Update.INSERT, port_role(1, 1))]) == [PERMISSION_DENIED]
        assert clients[0].write([update(p4r.Update.INSERT, port_role(1, 1))]) == [FAILED_PRECONDITION]
    finally:
        for client in clients:
            client.close()
        wiring.close()
