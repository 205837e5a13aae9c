"""Role configs (P4Runtime "Role Config"), with Stratum's scheme: a named role's arbitration carries a
stratum.P4RoleConfig as its Any, as Stratum's own clients send it. p4runtime 1.3.0's bindings lack the 1.4 role
names, which target.py encodes by hand; the config is built from Stratum's field numbers (testlab/stratum_roles.py)."""

from __future__ import annotations

import grpc
import pytest
from google.protobuf import any_pb2
from p4.v1 import p4runtime_pb2
from target import ALREADY_EXISTS, CPU_PORT, OK, PERMISSION_DENIED, Controller, insert, udp_frame

from testlab.stratum_roles import role_config, unpack

# What BMv2 does with a named role, measured: PI (P4Runtime 1.3) does not read 1.4's role name, so every "named"
# client lands in the default role, as a backup of its primary.
NO_ROLE_NAMES = "a named role's client is a backup in the default role: PI does not read P4Runtime 1.4's role name"


@pytest.fixture
def roles(target):
    """connect(role, config, election) opens a named role's stream; every one is closed at the end."""
    opened: list[Controller] = []

    def connect(role: str, config, election: tuple[int, int] | None) -> Controller:
        opened.append(Controller(target.address, election, role=role, role_config=config, device_config=target.device_config))
        return opened[-1]

    yield connect
    for client in opened:
        client.close()


@pytest.mark.bmv2_deviates(NO_ROLE_NAMES)
def test_a_named_role_has_its_own_primary_and_writes_only_its_tables(primary, roles, program):
    routes_v4 = program.tables["routes_v4"].preamble.id
    routes = roles("routes", role_config(exclusive=[routes_v4]), (0, 1))
    answer = routes.arbitrate()
    assert answer.status.code == OK  # election id 1 is below the controller's 10, in another role
    assert answer.role.config.type_url == "type.googleapis.com/stratum.P4RoleConfig"
    assert list(unpack(answer.role.config).exclusive_p4_ids) == [routes_v4]
    assert roles("routes", role_config(exclusive=[routes_v4]), None).arbitrate().status.code == ALREADY_EXISTS
    route = program.entry(
        "routes_v4",
        [
            p4runtime_pb2.FieldMatch(
                field_id=program.field("routes_v4", "dst_addr"), lpm=p4runtime_pb2.FieldMatch.LPM(value=bytes([10, 7, 0, 0]), prefix_len=16)
            )
        ],
        program.action("set_next_hop_group", group_id=b"\x00\x01"),
    )
    assert routes.write([insert(route), insert(program.port_role(3))]) == [OK, PERMISSION_DENIED]
    assert primary.write([insert(program.port_role(3))]) == [OK]


@pytest.mark.bmv2_deviates(NO_ROLE_NAMES)
def test_a_role_pushes_a_pipeline_only_if_its_config_lets_it(primary, roles, program):
    reader = roles("reader", role_config(), (0, 1))
    assert reader.arbitrate().status.code == OK
    with pytest.raises(grpc.RpcError) as caught:
        reader.set_pipeline(program.p4info, action=p4runtime_pb2.SetForwardingPipelineConfigRequest.VERIFY)
    assert caught.value.code() == grpc.StatusCode.PERMISSION_DENIED
    pusher = roles("pusher", role_config(can_push_pipeline=True), (0, 1))
    assert pusher.arbitrate().status.code == OK
    pusher.set_pipeline(program.p4info, action=p4runtime_pb2.SetForwardingPipelineConfigRequest.VERIFY)


@pytest.mark.bmv2_deviates("a role config of any type, or none, is taken (PI checks no role config)")
def test_a_role_config_outside_the_agreed_scheme_is_invalid_argument(primary, roles):
    other = any_pb2.Any()
    other.Pack(p4runtime_pb2.Uint128(low=1))
    for client in (roles("r", other, (0, 1)), roles("r", None, (0, 1))):
        with pytest.raises(grpc.RpcError) as caught:
            client.arbitrate()
        assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT


@pytest.mark.bmv2_deviates(NO_ROLE_NAMES)
def test_packet_ins_reach_the_primary_of_a_role_that_receives_them(target, primary, roles, program):
    listener = roles("listener", role_config(receives_packet_ins=True), (0, 1))
    assert listener.arbitrate().status.code == OK
    assert primary.write(program.route_to(CPU_PORT, b"\x02\0\0\0\0\x01", b"\x02\0\0\0\0\x02")) == [OK] * 4
    target.veth.send(udp_frame(b"to the cpu port " + bytes(30)))
    assert b"to the cpu port " in primary.next("packet").payload
    assert b"to the cpu port " in listener.next("packet").payload
