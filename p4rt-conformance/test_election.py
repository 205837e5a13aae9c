"""The P4RT election scenarios of openconfig featureprofiles (feature/p4rt): primary and backup, a primary
replaced by a higher id, a primary that reconnects, two clients claiming the same id; and jumbogate-switch's
arbitration options (--primary-on-leave wait, --fence-election-ids), driven from outside the project."""

from __future__ import annotations

import time

import grpc
import pytest
from target import ALREADY_EXISTS, NOT_FOUND, OK, PERMISSION_DENIED, Controller, Switch, insert, load_p4info


def test_primary_and_backup(primary, controllers, program):
    backup = controllers((0, 9))
    answer = backup.arbitrate()
    assert answer.status.code == ALREADY_EXISTS and answer.election_id.low == 10
    assert primary.write([insert(program.port_role(1))]) == [OK]
    assert backup.write([insert(program.port_role(2))]) == [PERMISSION_DENIED]


def test_a_primary_is_replaced_by_a_higher_id(primary, controllers, program):
    replacement = controllers((0, 11))
    assert replacement.arbitrate().status.code == OK
    assert primary.next("arbitration").status.code == ALREADY_EXISTS
    assert primary.write([insert(program.port_role(1))]) == [PERMISSION_DENIED]
    assert replacement.write([insert(program.port_role(1))]) == [OK]


def test_a_primary_that_reconnects_with_its_id_is_primary_again(primary, controllers, program):
    assert primary.write([insert(program.port_role(1))]) == [OK]
    primary.close()
    again = controllers((0, 10))
    for _ in range(50):
        try:
            answer = again.arbitrate()
            break
        except grpc.RpcError:  # the old stream not yet gone: the same id is refused until it is
            time.sleep(0.1)
            again = controllers((0, 10))
    assert answer.status.code == OK
    assert again.write([insert(program.port_role(2))]) == [OK]


@pytest.mark.bmv2_deviates("the primary's own arbitration again with its id gets no answer (the specification's case 2.5)")
def test_two_clients_cannot_both_be_primary_with_one_id(primary, controllers):
    with pytest.raises(grpc.RpcError) as caught:
        controllers((0, 10)).arbitrate()
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert primary.arbitrate().status.code == OK


@pytest.fixture
def switch_with():
    started: list[Switch] = []
    clients: list[Controller] = []

    def start(*options: str):
        started.append(Switch(list(options)))

        def connect(election):
            clients.append(Controller(started[-1].address, election))
            return clients[-1]

        return connect

    yield start
    for client in clients:
        client.close()
    for switch in started:
        switch.close()


@pytest.mark.jumbogate_switch_only
def test_with_primary_on_leave_wait_the_device_waits_for_a_re_arbitration(target, switch_with):
    connect = switch_with("--primary-on-leave", "wait")
    primary, backup = connect((0, 10)), connect((0, 5))
    assert primary.arbitrate().status.code == OK
    primary.set_pipeline(load_p4info())
    assert backup.arbitrate().status.code == ALREADY_EXISTS
    primary.close()
    assert backup.next("arbitration").status.code == NOT_FOUND
    assert backup.arbitrate().status.code == OK


@pytest.mark.jumbogate_switch_only
def test_with_fencing_a_deposed_leader_is_never_primary_again(target, switch_with):
    connect = switch_with("--fence-election-ids")
    program_info = load_p4info()
    old = connect((1, 100))
    assert old.arbitrate().status.code == OK
    old.set_pipeline(program_info)
    new = connect((2, 5))
    assert new.arbitrate().status.code == OK
    assert old.next("arbitration").status.code == ALREADY_EXISTS
    new.close()
    answer = old.next("arbitration")
    assert answer.status.code == PERMISSION_DENIED
    assert "1:100" in answer.status.message and "2:5" in answer.status.message
