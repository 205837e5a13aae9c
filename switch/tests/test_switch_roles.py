"""jumbogate-switch's named roles, configured with Stratum's P4RoleConfig (P4Runtime "Role Config").

The switch used to refuse every role but the default one. A named role now comes with a stratum.P4RoleConfig in
its arbitration: it has a primary of its own (election ids compared within the role), its primary writes only the
P4 ids the config lists, pushes a pipeline only with can_push_pipeline, and receives packet-ins only with
receives_packet_ins. The default role keeps full access. Every test talks to the real program over real gRPC;
docs/switch.md ("Roles") lists the rules.
"""

from __future__ import annotations

import queue
import time

import grpc
import pytest
from finsy.proto import p4r
from google.protobuf import any_pb2
from switch_harness import Client, OnePortSwitch, p4info

from testlab.lab import telemetry_query
from testlab.nic_harness import PacketPort
from testlab.stratum_roles import role_config, unpack

OK, INVALID_ARGUMENT, NOT_FOUND, ALREADY_EXISTS, PERMISSION_DENIED, RESOURCE_EXHAUSTED = 0, 3, 5, 6, 7, 8
INFO = p4info(512)
CPU_PORT = 510  # jumbogate-switch's default --cpu-port
MAX_ROLES = 16  # p4rt_bounds.h kMaxRoles, docs/switch.md "Bounds"


def table_id(alias: str) -> int:
    return next(t.preamble.id for t in INFO.tables if t.preamble.alias == alias)


def table(alias: str):
    return next(t for t in INFO.tables if t.preamble.alias == alias)


ROUTES_V4, ROUTES_V6, PORT_ROLES, NEXT_HOPS, MERGE_FLOWS = (table_id(a) for a in ("routes_v4", "routes_v6", "port_roles", "next_hops", "merge_flows"))
ECMP_SELECTOR = next(p.preamble.id for p in INFO.action_profiles if p.preamble.alias == "ecmp_selector")


def entry(alias: str, matches: list[tuple[str, p4r.FieldMatch]], action: str, params: dict[str, bytes]) -> p4r.Entity:
    t = table(alias)
    e = p4r.TableEntry(table_id=t.preamble.id)
    for name, m in matches:
        m.field_id = next(f.id for f in t.match_fields if f.name == name)
        e.match.append(m)
    info = next(a for a in INFO.actions if a.preamble.alias == action)
    e.action.action.action_id = info.preamble.id
    for p in info.params:
        e.action.action.params.add(param_id=p.id, value=params[p.name])
    return p4r.Entity(table_entry=e)


def exact(value: bytes) -> p4r.FieldMatch:
    return p4r.FieldMatch(exact=p4r.FieldMatch.Exact(value=value))


def insert(entity: p4r.Entity) -> p4r.Update:
    return p4r.Update(type=p4r.Update.INSERT, entity=entity)


def route_v4(second_octet: int, group: int = 1) -> p4r.Entity:
    m = p4r.FieldMatch(lpm=p4r.FieldMatch.LPM(value=bytes([10, second_octet, 0, 0]), prefix_len=16))
    return entry("routes_v4", [("dst_addr", m)], "set_next_hop_group", {"group_id": group.to_bytes(2, "big")})


def port_role(port: int, role: int = 1) -> p4r.Entity:
    return entry("port_roles", [("ingress_port", exact(port.to_bytes(2, "big")))], "set_port_role", {"role": bytes([role])})


def next_hop_member(member_id: int, port: int, src_mac: bytes = bytes(6), dst_mac: bytes = bytes(6)) -> p4r.Entity:
    action = entry("next_hops", [("group_id", exact(b"\x00\x01"))], "set_next_hop", {"port": port.to_bytes(2, "big"), "src_mac": src_mac, "dst_mac": dst_mac})
    member = p4r.ActionProfileMember(action_profile_id=ECMP_SELECTOR, member_id=member_id, action=action.table_entry.action.action)
    return p4r.Entity(action_profile_member=member)


def next_hops_entry(group: int, member_id: int) -> p4r.Entity:
    e = p4r.TableEntry(table_id=NEXT_HOPS)
    e.match.add(field_id=table("next_hops").match_fields[0].id, exact=p4r.FieldMatch.Exact(value=group.to_bytes(2, "big")))
    e.action.action_profile_member_id = member_id
    return p4r.Entity(table_entry=e)


def multicast_group(group_id: int) -> p4r.Entity:
    group = p4r.MulticastGroupEntry(multicast_group_id=group_id, replicas=[p4r.Replica(egress_port=1, instance=1)])
    return p4r.Entity(packet_replication_engine_entry=p4r.PacketReplicationEngineEntry(multicast_group_entry=group))


def merge_flow(n: int, idle_timeout_ns: int) -> p4r.Entity:
    fields = [
        ("ip_version", b"\x04"),
        ("src_addr", (0xC6120000 + n).to_bytes(4, "big")),
        ("dst_addr", bytes([10, 10, 0, 10])),
        ("protocol", b"\x06"),
        ("src_port", (1024 + n).to_bytes(2, "big")),
        ("dst_port", b"\x01\xbb"),
    ]
    e = entry("merge_flows", [(name, exact(v)) for name, v in fields], "steer_merge_flow", {})
    e.table_entry.idle_timeout_ns = idle_timeout_ns
    return e


class RoleClient(Client):
    """A client of a named role whose arbitration carries `config` (an Any), as a Stratum-style client's does."""

    def __init__(self, address: str, election_low: int | None, role: str, config: any_pb2.Any | None):
        super().__init__(address, election_low=election_low, role=role)
        self.config = config

    def arbitrate(self, election_low: int | None = None, timeout: float = 5) -> p4r.MasterArbitrationUpdate:
        if election_low is not None:
            self.election_low = election_low
        update = p4r.MasterArbitrationUpdate(device_id=self.device_id)
        update.role.name = self.role
        if self.config is not None:
            update.role.config.CopyFrom(self.config)
        if self.election_low is not None:
            update.election_id.low = self.election_low
        self.send(p4r.StreamMessageRequest(arbitration=update))
        return self.next_arbitration(timeout)


@pytest.fixture(scope="module")
def switch(log_dir):
    wiring = OnePortSwitch(log_dir)
    yield wiring
    wiring.close()


@pytest.fixture
def clients():
    opened: list[Client] = []
    yield opened
    for client in opened:
        client.close()


@pytest.fixture
def primary(switch, clients):
    """The controller: the default role's primary, with the pipeline set (which clears every table)."""
    client = Client(switch.switch.grpc_address, election_low=100)
    clients.append(client)
    assert client.arbitrate().status.code == OK
    client.set_pipeline(INFO)
    return client


def connect(switch, clients, role: str, config, election: int | None) -> RoleClient:
    clients.append(RoleClient(switch.switch.grpc_address, election, role, config))
    return clients[-1]


def refused(client: Client) -> grpc.RpcError:
    """The arbitration's refusal: the switch ends the stream with it."""
    with pytest.raises(grpc.RpcError) as caught:
        client.arbitrate()
    return caught.value


def stats(switch) -> dict:
    return telemetry_query(switch.switch.file_prefix, "/jumbogate_switch/stats")


def test_a_named_role_has_a_primary_of_its_own(switch, primary, clients):
    """Election ids are compared within a role: a role's client with an id far below the controller's is its
    role's primary, and the controller stays the default role's. The arbitration answer carries the role's config."""
    routes = connect(switch, clients, "routes", role_config(exclusive=[ROUTES_V4, ROUTES_V4]), 10)
    answer = routes.arbitrate()
    assert answer.status.code == OK and answer.role.name == "routes"
    assert answer.role.config.type_url == "type.googleapis.com/stratum.P4RoleConfig"
    assert list(unpack(answer.role.config).exclusive_p4_ids) == [ROUTES_V4]  # canonical: deduplicated
    backup = connect(switch, clients, "routes", role_config(exclusive=[ROUTES_V4]), 5)
    assert backup.arbitrate().status.code == ALREADY_EXISTS
    assert primary.write([insert(port_role(1))]) == [OK]
    assert routes.write([insert(route_v4(1))]) == [OK]
    assert backup.write([insert(route_v4(2))]) == [PERMISSION_DENIED]


def test_a_role_writes_only_the_ids_its_config_lists(switch, primary, clients):
    """Update by update (the others of the batch go on): a table outside the role's ids, an action profile's
    member (checked against the profile's id, not its table's) and a packet replication engine entry (no P4 id:
    the default role's alone) are PERMISSION_DENIED, counted as role_denials; reads are everyone's."""
    routes = connect(switch, clients, "routes", role_config(exclusive=[ROUTES_V4], shared=[NEXT_HOPS]), 1)
    assert routes.arbitrate().status.code == OK
    before = stats(switch)["role_denials"]
    codes = routes.write([insert(route_v4(1)), insert(port_role(2)), insert(next_hop_member(1, 1)), insert(multicast_group(1))])
    assert codes == [OK, PERMISSION_DENIED, PERMISSION_DENIED, PERMISSION_DENIED]
    assert stats(switch)["role_denials"] == before + 3
    # The controller (the default role) writes what the role may not; the role reads all of it.
    assert primary.write([insert(next_hop_member(1, 1)), insert(port_role(2))]) == [OK, OK]
    assert routes.write([insert(next_hops_entry(1, member_id=1))]) == [OK]
    tables = {e.table_entry.table_id for e in routes.read([p4r.Entity(table_entry=p4r.TableEntry())])}
    assert tables == {ROUTES_V4, NEXT_HOPS, PORT_ROLES}


def test_only_a_role_that_may_push_pipelines_sets_one(switch, primary, clients):
    reader = connect(switch, clients, "reader", role_config(shared=[ROUTES_V4]), 1)
    assert reader.arbitrate().status.code == OK
    with pytest.raises(grpc.RpcError) as caught:
        reader.set_pipeline(INFO, action=p4r.SetForwardingPipelineConfigRequest.VERIFY)
    assert caught.value.code() == grpc.StatusCode.PERMISSION_DENIED
    assert "can_push_pipeline" in caught.value.details()
    pusher = connect(switch, clients, "pusher", role_config(can_push_pipeline=True), 1)
    assert pusher.arbitrate().status.code == OK
    pusher.set_pipeline(INFO, action=p4r.SetForwardingPipelineConfigRequest.VERIFY)


def route_everything_to_cpu(primary: Client) -> bytes:
    from scapy.layers.inet import IP, UDP
    from scapy.layers.l2 import Ether

    frame = bytes(Ether(src="02:00:00:00:00:01", dst="02:00:00:00:00:02") / IP(src="198.51.100.7", dst="10.9.0.1") / UDP(sport=4000, dport=5000) / bytes(40))
    updates = [port_role(0), next_hop_member(1, CPU_PORT, src_mac=frame[6:12], dst_mac=frame[0:6]), next_hops_entry(1, member_id=1), route_v4(9)]
    assert primary.write([insert(u) for u in updates]) == [OK] * 4
    return frame


def packet_ins(client: Client, wait: float) -> int:
    count, deadline = 0, time.monotonic() + wait
    while (left := deadline - time.monotonic()) > 0:
        try:
            message = client.next_response(timeout=left)
        except queue.Empty:
            break
        count += message.HasField("packet")
    return count


def test_packet_ins_go_to_the_primaries_of_the_roles_that_receive_them(switch, primary, clients):
    """The default role's primary and a receiving role's primary each get the packet-in; a role without
    receives_packet_ins, and a receiving role's backup, get none. A role that takes no part in packet I/O may not
    send packet-outs either."""
    listener = connect(switch, clients, "listener", role_config(receives_packet_ins=True), 2)
    listener_backup = connect(switch, clients, "listener", role_config(receives_packet_ins=True), 1)
    deaf = connect(switch, clients, "deaf", role_config(shared=[ROUTES_V4]), 2)
    assert [c.arbitrate().status.code for c in (listener, listener_backup, deaf)] == [OK, ALREADY_EXISTS, OK]
    frame = route_everything_to_cpu(primary)
    port = PacketPort(switch.ns, switch.peer)
    try:
        port.send([frame])
        assert packet_ins(primary, 3) == 1
        assert packet_ins(listener, 1) == 1
        assert packet_ins(listener_backup, 0.5) == 0
        assert packet_ins(deaf, 0.5) == 0
    finally:
        port.close()
    deaf.send(p4r.StreamMessageRequest(packet=p4r.PacketOut(payload=frame)))
    while not (message := deaf.next_response()).HasField("error"):
        pass
    assert message.error.canonical_code == PERMISSION_DENIED and "receives_packet_ins" in message.error.message


def test_idle_timeouts_go_to_the_default_roles_primary(switch, primary, clients):
    """A role may write merge_flows, but idle-timeout notifications (like digest lists) go to the controller, the
    default role's primary (docs/switch.md, "Roles")."""
    flows = connect(switch, clients, "flows", role_config(exclusive=[MERGE_FLOWS]), 1)
    assert flows.arbitrate().status.code == OK
    assert flows.write([insert(merge_flow(3, 100 * 1000 * 1000))]) == [OK]
    deadline = time.monotonic() + 5
    while not primary.next_response(timeout=max(0.01, deadline - time.monotonic())).HasField("idle_timeout_notification"):
        pass
    deadline = time.monotonic() + 0.5
    while (left := deadline - time.monotonic()) > 0:
        try:
            assert not flows.next_response(timeout=left).HasField("idle_timeout_notification")
        except queue.Empty:
            break


def test_configs_outside_the_scheme_are_invalid_argument(switch, primary, clients):
    """The specification's answer to a role config that does not match the scheme agreed with the device: an Any
    of another type, a named role without a config, a config for the default role, a P4 id the program lacks, an
    id both exclusive and shared, a packet-in filter the program's packet-in cannot match (it carries no metadata)
    or that is set while packet-ins are off, a role name past its bound."""
    other_type = any_pb2.Any()
    other_type.Pack(p4r.Uint128(low=1))
    cases = {
        "another type": ("r", other_type),
        "no config": ("r", None),
        "default role": ("", role_config()),
        "unknown id": ("r", role_config(shared=[12345])),
        "action id": ("r", role_config(shared=[INFO.actions[0].preamble.id])),
        "exclusive and shared": ("r", role_config(exclusive=[ROUTES_V4], shared=[ROUTES_V4])),
        "filter": ("r", role_config(receives_packet_ins=True, packet_in_filter=(1, b"\x01"))),
        "filter without packet-ins": ("r", role_config(packet_in_filter=(1, b"\x01"))),
        "long name": ("r" * 129, role_config()),
    }
    for case, (name, config) in cases.items():
        error = refused(connect(switch, clients, name, config, 1))
        assert error.code() == grpc.StatusCode.INVALID_ARGUMENT, case
    assert "stratum.P4RoleConfig" in refused(connect(switch, clients, "r", other_type, 1)).details()
    assert connect(switch, clients, "r" * 128, role_config(), 1).arbitrate().status.code == OK


def test_a_roles_config_is_its_primarys(switch, primary, clients):
    """Every client of a role agrees on its config: a backup bringing another is INVALID_ARGUMENT; a client that
    becomes primary with another replaces it (the specification: the role's config is its primary's), every
    stream of the role is told, and the old config's ids are no longer the role's to write."""
    first = connect(switch, clients, "routes", role_config(exclusive=[ROUTES_V4]), 10)
    assert first.arbitrate().status.code == OK
    assert refused(connect(switch, clients, "routes", role_config(exclusive=[ROUTES_V6]), 5)).code() == grpc.StatusCode.INVALID_ARGUMENT
    # The same config with its ids in another order is the same config.
    same = connect(switch, clients, "routes", role_config(exclusive=[ROUTES_V4, ROUTES_V4]), 5)
    assert same.arbitrate().status.code == ALREADY_EXISTS
    successor = connect(switch, clients, "routes", role_config(exclusive=[ROUTES_V6]), 20)
    assert successor.arbitrate().status.code == OK
    for client in (first, same):
        told = client.next_arbitration()
        assert told.status.code == ALREADY_EXISTS and list(unpack(told.role.config).exclusive_p4_ids) == [ROUTES_V6]
    codes = successor.write(
        [
            insert(route_v4(1)),
            insert(
                entry(
                    "routes_v6",
                    [("dst_addr", p4r.FieldMatch(lpm=p4r.FieldMatch.LPM(value=bytes([0x20, 1, 0xD, 0xB8]) + bytes(12), prefix_len=32)))],
                    "set_next_hop_group",
                    {"group_id": b"\x00\x01"},
                )
            ),
        ]
    )
    assert codes == [PERMISSION_DENIED, OK]


def test_exclusive_ids_belong_to_one_role(switch, primary, clients):
    """Stratum's rules: one role's exclusive ids are no other role's, exclusive or shared; shared ids are shared.
    The default role writes everything still."""
    owner = connect(switch, clients, "owner", role_config(exclusive=[ROUTES_V4], shared=[PORT_ROLES]), 1)
    assert owner.arbitrate().status.code == OK
    for config in (role_config(exclusive=[ROUTES_V4]), role_config(shared=[ROUTES_V4]), role_config(exclusive=[PORT_ROLES])):
        assert refused(connect(switch, clients, "other", config, 1)).code() == grpc.StatusCode.INVALID_ARGUMENT
    sharer = connect(switch, clients, "sharer", role_config(shared=[PORT_ROLES]), 1)
    assert sharer.arbitrate().status.code == OK
    assert owner.write([insert(port_role(1))]) == [OK]
    assert sharer.write([insert(port_role(2))]) == [OK]
    assert primary.write([insert(route_v4(3))]) == [OK]


def test_named_roles_are_bounded_and_forgotten_with_their_last_stream(switch, primary, clients):
    """Any client may name a role, so at most MAX_ROLES exist: the next is RESOURCE_EXHAUSTED and counted
    (roles_refused); a role whose last stream ends is forgotten, which makes room, and a write naming it is then
    NOT_FOUND."""
    before = stats(switch)
    assert before["roles"] == 0
    roles = [connect(switch, clients, f"role{i}", role_config(receives_packet_ins=True), 1) for i in range(MAX_ROLES)]
    assert {c.arbitrate().status.code for c in roles} == {OK}
    assert stats(switch)["roles"] == MAX_ROLES
    error = refused(connect(switch, clients, "one-too-many", role_config(), 1))
    assert error.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert stats(switch)["roles_refused"] == before["roles_refused"] + 1
    # A second client of an existing role is no new role.
    assert connect(switch, clients, "role0", role_config(receives_packet_ins=True), 2).arbitrate().status.code == OK
    roles[1].close()
    clients.remove(roles[1])
    request = p4r.WriteRequest(device_id=primary.device_id, role="role1", election_id=p4r.Uint128(low=1), updates=[insert(route_v4(1))])
    with pytest.raises(grpc.RpcError) as caught:
        primary.stub.Write(request, timeout=10)
    assert caught.value.code() == grpc.StatusCode.NOT_FOUND
    assert connect(switch, clients, "one-more", role_config(), 1).arbitrate().status.code == OK
    assert stats(switch)["roles"] == MAX_ROLES


def test_the_fence_is_the_default_roles(log_dir, clients):
    """With --fence-election-ids the highest id ever made primary fences the default role only: a named role's
    primary with a high id of its own does not lock the controller out, nor shows in the write record."""
    wiring = OnePortSwitch(log_dir, ["--fence-election-ids"])
    try:
        controller = Client(wiring.switch.grpc_address, election_low=5)
        clients.append(controller)
        assert controller.arbitrate().status.code == OK
        controller.set_pipeline(INFO)
        other = connect(wiring, clients, "stats", role_config(shared=[PORT_ROLES]), 1000)
        assert other.arbitrate().status.code == OK
        assert controller.write([insert(port_role(1))]) == [OK]
        successor = Client(wiring.switch.grpc_address, election_low=6)
        clients.append(successor)
        assert successor.arbitrate().status.code == OK
        assert successor.write([insert(port_role(2))]) == [OK]
        # The write record is the fence's audit: the named role's write, under an id of its own, is not in it.
        assert other.write([insert(port_role(3))]) == [OK]
        record = telemetry_query(wiring.switch.file_prefix, "/jumbogate_switch/writes")
        assert {k for k in record if k != "older"} == {"0_5", "0_6"}
    finally:
        for client in clients:
            client.close()
        clients.clear()
        wiring.close()
