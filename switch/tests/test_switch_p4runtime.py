"""jumbogate-switch's P4Runtime server, against the specification.

Every test talks to the real program over real gRPC with hand-made
messages: malformed writes get the canonical error for each update and
change nothing, arbitration decides who may write, a foreign P4Info is
refused with its first difference named.
"""

from __future__ import annotations

import os
import threading
import time

import grpc
import pytest
from finsy.proto import p4r
from switch_harness import DEVICE_ID, Client, OnePortSwitch, p4info

from testlab.nic_harness import PacketPort

OK, INVALID_ARGUMENT, NOT_FOUND, ALREADY_EXISTS, PERMISSION_DENIED = 0, 3, 5, 6, 7
RESOURCE_EXHAUSTED, FAILED_PRECONDITION, OUT_OF_RANGE = 8, 9, 11
INFO = p4info(512)


def table(alias: str):
    return next(t for t in INFO.tables if t.preamble.alias == alias)


def action_id(alias: str) -> int:
    return next(a.preamble.id for a in INFO.actions if a.preamble.alias == alias)


def field_id(table_alias: str, name: str) -> int:
    return next(f.id for f in table(table_alias).match_fields if f.name == name)


def entry(table_alias: str, matches: list[p4r.FieldMatch], action: str | None = None, params: dict[str, bytes] | None = None, priority: int = 0) -> p4r.Entity:
    t = table(table_alias)
    e = p4r.TableEntry(table_id=t.preamble.id, match=matches, priority=priority)
    if action is not None:
        info = next(a for a in INFO.actions if a.preamble.alias == action)
        e.action.action.action_id = info.preamble.id
        for p in info.params:
            e.action.action.params.add(param_id=p.id, value=(params or {})[p.name])
    return p4r.Entity(table_entry=e)


def exact(table_alias: str, name: str, value: bytes) -> p4r.FieldMatch:
    return p4r.FieldMatch(field_id=field_id(table_alias, name), exact=p4r.FieldMatch.Exact(value=value))


def lpm(table_alias: str, value: bytes, prefix_len: int) -> p4r.FieldMatch:
    return p4r.FieldMatch(field_id=field_id(table_alias, "dst_addr"), lpm=p4r.FieldMatch.LPM(value=value, prefix_len=prefix_len))


def update(kind, entity: p4r.Entity) -> p4r.Update:
    return p4r.Update(type=kind, entity=entity)


def port_role(port: int, role: int) -> p4r.Entity:
    return entry("port_roles", [exact("port_roles", "ingress_port", port.to_bytes(2, "big"))], "set_port_role", {"role": bytes([role])})


def route_v4(prefix: bytes, length: int, group: int = 1) -> p4r.Entity:
    return entry("routes_v4", [lpm("routes_v4", prefix, length)], "set_next_hop_group", {"group_id": group.to_bytes(2, "big")})


ECMP_SELECTOR = next(p.preamble.id for p in INFO.action_profiles if p.preamble.alias == "ecmp_selector")
CPU_PORT = 510  # jumbogate-switch's default --cpu-port


def next_hop_member(member_id: int, port: int, src_mac: bytes = bytes(6), dst_mac: bytes = bytes(6)) -> p4r.Entity:
    action = entry("next_hops", [], "set_next_hop", {"port": port.to_bytes(2, "big"), "src_mac": src_mac, "dst_mac": dst_mac}).table_entry.action.action
    return p4r.Entity(action_profile_member=p4r.ActionProfileMember(action_profile_id=ECMP_SELECTOR, member_id=member_id, action=action))


def ecmp_group(group_id: int, weights: dict[int, int]) -> p4r.Entity:
    group = p4r.ActionProfileGroup(action_profile_id=ECMP_SELECTOR, group_id=group_id)
    for member_id, weight in weights.items():
        group.members.add(member_id=member_id, weight=weight)
    return p4r.Entity(action_profile_group=group)


def next_hops_entry(group: int, member_id: int | None = None, group_id: int | None = None) -> p4r.Entity:
    e = entry("next_hops", [exact("next_hops", "group_id", group.to_bytes(2, "big"))])
    if member_id is not None:
        e.table_entry.action.action_profile_member_id = member_id
    else:
        e.table_entry.action.action_profile_group_id = group_id
    return e


def all_table_entries(client: Client) -> list[p4r.TableEntry]:
    return [e.table_entry for e in client.read([p4r.Entity(table_entry=p4r.TableEntry())])]


@pytest.fixture(scope="module")
def switch(log_dir):
    wiring = OnePortSwitch(log_dir)
    yield wiring
    wiring.close()


@pytest.fixture
def primary(switch):
    client = Client(switch.switch.grpc_address, election_low=100)
    assert client.arbitrate().status.code == OK
    client.set_pipeline(INFO)
    yield client
    client.close()


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


def test_each_bad_update_gets_its_own_code_and_changes_nothing(primary):
    good = port_role(1, 2)
    bad_width = port_role(2, 9)  # role is bit<3>
    unknown_table = p4r.Entity(table_entry=p4r.TableEntry(table_id=12345))
    host_bits = route_v4(bytes([10, 1, 2, 3]), 16)
    missing_field = entry("port_roles", [], "set_port_role", {"role": b"\x01"})
    codes = primary.write(
        [
            update(p4r.Update.INSERT, good),
            update(p4r.Update.INSERT, bad_width),
            update(p4r.Update.INSERT, unknown_table),
            update(p4r.Update.INSERT, host_bits),
            update(p4r.Update.INSERT, missing_field),
            update(p4r.Update.MODIFY, port_role(7, 1)),
            update(p4r.Update.DELETE, port_role(8, 1)),
            update(p4r.Update.INSERT, good),
        ]
    )
    assert codes == [OK, INVALID_ARGUMENT, INVALID_ARGUMENT, INVALID_ARGUMENT, INVALID_ARGUMENT, NOT_FOUND, NOT_FOUND, ALREADY_EXISTS]
    entries = all_table_entries(primary)
    assert len(entries) == 1, entries
    assert entries[0].table_id == table("port_roles").preamble.id
    assert entries[0].action.action.params[0].value == b"\x02"


def test_ternary_and_range_need_a_priority_and_exact_tables_refuse_one(primary):
    service = entry(
        "merge_services",
        [
            exact("merge_services", "ip_version", b"\x04"),
            p4r.FieldMatch(
                field_id=field_id("merge_services", "dst_addr"), ternary=p4r.FieldMatch.Ternary(value=b"\x0a\x01\x00\x00", mask=b"\xff\xff\xff\x00")
            ),
        ],
        "steer_merge_service",
        {},
    )
    assert primary.write([update(p4r.Update.INSERT, service)]) == [INVALID_ARGUMENT]
    service.table_entry.priority = 10
    assert primary.write([update(p4r.Update.INSERT, service)]) == [OK]
    prioritised_role = port_role(3, 1)
    prioritised_role.table_entry.priority = 5
    assert primary.write([update(p4r.Update.INSERT, prioritised_role)]) == [INVALID_ARGUMENT]
    # A value with bits outside its mask.
    service.table_entry.match[1].ternary.value = b"\x0a\x01\x00\x01"
    service.table_entry.priority = 11
    assert primary.write([update(p4r.Update.INSERT, service)]) == [INVALID_ARGUMENT]


def test_values_are_read_back_canonical_and_leading_zeros_are_accepted(primary):
    padded = port_role(4, 1)
    padded.table_entry.match[0].exact.value = b"\x00\x00\x00\x04"
    assert primary.write([update(p4r.Update.INSERT, padded)]) == [OK]
    (read,) = primary.read([p4r.Entity(table_entry=p4r.TableEntry(table_id=table("port_roles").preamble.id))])
    assert read.table_entry.match[0].exact.value == b"\x04"
    # The same key in another spelling is the same entry.
    assert primary.write([update(p4r.Update.INSERT, port_role(4, 1))]) == [ALREADY_EXISTS]


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


def test_default_entries_modify_and_reset(primary):
    fleet = table("fleet_policy")
    on = entry(
        "fleet_policy", [], "set_fleet_jumbo", {"enabled": b"\x01", "guest_jumbo_mtu": (8000).to_bytes(2, "big"), "default_mtu": (1400).to_bytes(2, "big")}
    )
    on.table_entry.is_default_action = True
    assert primary.write([update(p4r.Update.MODIFY, on)]) == [OK]
    insert_default = p4r.Entity()
    insert_default.CopyFrom(on)
    assert primary.write([update(p4r.Update.INSERT, insert_default)]) == [INVALID_ARGUMENT]
    query = p4r.Entity(table_entry=p4r.TableEntry(table_id=fleet.preamble.id, is_default_action=True))
    (read,) = primary.read([query])
    assert [p.value for p in read.table_entry.action.action.params] == [b"\x01", (8000).to_bytes(2, "big"), (1400).to_bytes(2, "big")]
    reset = p4r.Entity(table_entry=p4r.TableEntry(table_id=fleet.preamble.id, is_default_action=True))
    assert primary.write([update(p4r.Update.MODIFY, reset)]) == [OK]
    (read,) = primary.read([query])
    assert read.table_entry.action.action.action_id == action_id("set_fleet_jumbo")
    # The program's own default: fleet off, 8500 and 1500.
    assert [p.value for p in read.table_entry.action.action.params] == [b"\x00", (8500).to_bytes(2, "big"), (1500).to_bytes(2, "big")]
    # A const default action cannot be changed.
    const = entry("routes_v4", [], "no_route", {})
    const.table_entry.is_default_action = True
    assert primary.write([update(p4r.Update.MODIFY, const)]) == [PERMISSION_DENIED]


def test_tables_refuse_entries_past_their_size(primary):
    size = table("port_roles").size
    updates = [update(p4r.Update.INSERT, port_role(port, 1)) for port in range(size)]
    assert set(primary.write(updates)) == {OK}
    # port_t is 9 bits: 512 ports is both the size and the key space, so
    # fill instances_v4 (16384) instead to see the limit.
    instances = table("instances_v4")
    rows = [
        update(
            p4r.Update.INSERT, entry("instances_v4", [exact("instances_v4", "instance_addr", i.to_bytes(4, "big"))], "set_instance_jumbo", {"enabled": b"\x01"})
        )
        for i in range(1, instances.size + 2)
    ]
    # In batches: a failed Write carries one error per update in its
    # trailers, and gRPC clients cap trailers at a few KB.
    codes = [code for start in range(0, len(rows), 256) for code in primary.write(rows[start : start + 256])]
    assert codes[: instances.size] == [OK] * instances.size
    assert codes[instances.size :] == [8]  # RESOURCE_EXHAUSTED
    assert len(all_table_entries(primary)) == size + instances.size


def test_meter_and_counter_indices_are_checked(primary):
    meter_id = next(m.preamble.id for m in INFO.meters if m.preamble.alias == "icmp_signal_meter")
    bad = p4r.Entity(meter_entry=p4r.MeterEntry(meter_id=meter_id, index=p4r.Index(index=100000), config=p4r.MeterConfig(cir=1, cburst=1, pir=1, pburst=1)))
    assert primary.write([update(p4r.Update.MODIFY, bad)]) == [OUT_OF_RANGE]
    good = p4r.Entity(meter_entry=p4r.MeterEntry(meter_id=meter_id, index=p4r.Index(index=3), config=p4r.MeterConfig(cir=5, cburst=2, pir=5, pburst=2)))
    assert primary.write([update(p4r.Update.MODIFY, good)]) == [OK]
    (read,) = primary.read([p4r.Entity(meter_entry=p4r.MeterEntry(meter_id=meter_id, index=p4r.Index(index=3)))])
    assert read.meter_entry.config.pir == 5
    counter_id = next(c.preamble.id for c in INFO.counters if c.preamble.alias == "paths")
    write = p4r.Entity(counter_entry=p4r.CounterEntry(counter_id=counter_id, index=p4r.Index(index=1), data=p4r.CounterData(packet_count=7, byte_count=700)))
    assert primary.write([update(p4r.Update.MODIFY, write)]) == [OK]
    (read,) = primary.read([p4r.Entity(counter_entry=p4r.CounterEntry(counter_id=counter_id, index=p4r.Index(index=1)))])
    assert (read.counter_entry.data.packet_count, read.counter_entry.data.byte_count) == (7, 700)


def merge_flow_entry(n: int, idle_timeout_ns: int) -> p4r.Entity:
    matches = [
        exact("merge_flows", "ip_version", b"\x04"),
        exact("merge_flows", "src_addr", (0xC6120000 + n).to_bytes(4, "big")),
        exact("merge_flows", "dst_addr", bytes([10, 10, 0, 10])),
        exact("merge_flows", "protocol", b"\x06"),
        exact("merge_flows", "src_port", (1024 + n % 60000).to_bytes(2, "big")),
        exact("merge_flows", "dst_port", b"\x01\xbb"),
    ]
    e = entry("merge_flows", matches, "steer_merge_flow", {})
    e.table_entry.idle_timeout_ns = idle_timeout_ns
    return e


def test_a_primary_that_stops_reading_holds_up_no_one(log_dir):
    """Stream messages used to be written under the server's lock: a primary that stopped reading its stream
    (a hung controller) blocked every other client's calls, and the takeover by a new controller. Each stream
    now has its own writer and a bounded outbox."""
    wiring = OnePortSwitch(log_dir)
    clients = []
    try:
        # Without BDP probing the client's receive window stays at 64 KB:
        # a transport that stopped reading fills at once.
        stuck = Client(wiring.switch.grpc_address, election_low=10, options=[("grpc.http2.bdp_probe", 0)])
        clients.append(stuck)
        assert stuck.arbitrate().status.code == OK
        stuck.set_pipeline(INFO)
        rows = [update(p4r.Update.INSERT, merge_flow_entry(n, 500_000_000)) for n in range(12000)]
        # The client stops reading before the idle entries are reported:
        # about a megabyte of idle-timeout notifications it will never read.
        stuck.stop_reading()
        assert {code for start in range(0, len(rows), 1000) for code in stuck.write(rows[start : start + 1000])} == {OK}
        time.sleep(1.5)
        # Another client reads and takes over, at once.
        successor = Client(wiring.switch.grpc_address, election_low=20)
        clients.append(successor)
        started = time.monotonic()
        assert successor.arbitrate(timeout=5).status.code == OK
        assert len(all_table_entries(successor)) == len(rows)
        assert successor.write([update(p4r.Update.INSERT, port_role(1, 1))]) == [OK]
        assert time.monotonic() - started < 5
    finally:
        for client in clients:
            client.close()
        wiring.close()


def udp_frame(size: int, ttl: int = 64) -> bytes:
    from scapy.layers.inet import IP, UDP
    from scapy.layers.l2 import Ether

    head = Ether(src="02:00:00:00:00:01", dst="02:00:00:00:00:02") / IP(src="198.51.100.7", dst="10.9.0.1", ttl=ttl) / UDP(sport=4000, dport=5000)
    return bytes(head / bytes((i * 7 + 3) % 256 for i in range(size - len(head))))


def route_to(client: Client, port: int) -> None:
    """Port 0 external, 10.9.0.0/16 routed to `port` by a next hop that keeps the frame's MACs."""
    frame = udp_frame(64)
    codes = client.write(
        [
            update(p4r.Update.INSERT, port_role(0, 1)),
            update(p4r.Update.INSERT, next_hop_member(1, port, src_mac=frame[6:12], dst_mac=frame[0:6])),
            update(p4r.Update.INSERT, next_hops_entry(1, member_id=1)),
            update(p4r.Update.INSERT, route_v4(bytes([10, 9, 0, 0]), 16, group=1)),
        ]
    )
    assert codes == [OK] * 4


def forwarded(frame: bytes) -> bytes:
    """The frame as routing leaves it: the TTL one less, the IPv4 checksum again."""
    from scapy.layers.inet import IP
    from scapy.layers.l2 import Ether

    packet = Ether(frame)
    packet[IP].ttl -= 1
    del packet[IP].chksum
    return bytes(packet)


def test_a_packet_in_carries_the_frame_byte_for_byte(switch, primary):
    """Every packet-in used to carry zeros: rte_pktmbuf_read answers a pointer into a contiguous mbuf and
    copies nothing, and the server sent the untouched buffer (issue 34)."""
    route_to(primary, CPU_PORT)
    port = PacketPort(switch.ns, switch.peer)
    try:
        for size in (80, 1000):
            frame = udp_frame(size)
            port.send([frame])
            deadline = time.monotonic() + 5
            while True:
                message = primary.next_response(timeout=max(0.01, deadline - time.monotonic()))
                if message.HasField("packet"):
                    break
            assert len(message.packet.payload) == size
            assert message.packet.payload == forwarded(frame)
    finally:
        port.close()


def test_a_role_other_than_the_default_is_refused(switch, primary):
    """Any role name used to be accepted and created: a client naming a role of its own became the primary of it
    and wrote beside the controller (issue 33, finding 1). Until role configs exist the device has the default role
    only: arbitration for another is INVALID_ARGUMENT (it does not match the device's role scheme), and a write or a
    pipeline naming one finds no such role (NOT_FOUND, as the specification says for a Write's role)."""
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


MAX_MEMBER_WEIGHT = 256  # docs/switch.md, "Bounds"


def test_ecmp_groups_are_bounded(primary):
    """A group of weight 2**31-1 used to be accepted, and a route to it expanded it into that many next hops
    under the pipeline's write lock (issue 33, finding 5). A group holds at most the profile's size in weights
    (the P4Info gives no max_group_size), a member at most MAX_MEMBER_WEIGHT; beyond, RESOURCE_EXHAUSTED."""
    profile = next(p for p in INFO.action_profiles if p.preamble.id == ECMP_SELECTOR)
    assert profile.max_group_size == 0 and profile.size == 1024
    members = [update(p4r.Update.INSERT, next_hop_member(m, 0)) for m in range(1, 6)]
    assert primary.write(members) == [OK] * 5
    full = ecmp_group(3, {1: 256, 2: 256, 3: 256, 4: 256})
    assert primary.write([update(p4r.Update.INSERT, full), update(p4r.Update.INSERT, next_hops_entry(3, group_id=3))]) == [OK, OK]
    # No route uses the groups below: where one was accepted, nothing expands it.
    too_big = ecmp_group(5, {1: 256, 2: 256, 3: 256, 4: 256, 5: 1})
    too_big_size = ecmp_group(6, {1: 1})
    too_big_size.action_profile_group.max_size = profile.size + 1
    codes = primary.write(
        [
            update(p4r.Update.INSERT, ecmp_group(1, {1: 2**31 - 1})),
            update(p4r.Update.INSERT, ecmp_group(2, {1: MAX_MEMBER_WEIGHT + 1})),
            update(p4r.Update.INSERT, too_big),
            update(p4r.Update.INSERT, too_big_size),
            update(p4r.Update.INSERT, ecmp_group(4, {1: 1})),
            update(p4r.Update.MODIFY, ecmp_group(4, {1: 2**31 - 1})),
        ]
    )
    assert codes == [RESOURCE_EXHAUSTED, RESOURCE_EXHAUSTED, RESOURCE_EXHAUSTED, RESOURCE_EXHAUSTED, OK, RESOURCE_EXHAUSTED]
    groups = primary.read([p4r.Entity(action_profile_group=p4r.ActionProfileGroup())])
    assert [(g.action_profile_group.group_id, [m.weight for m in g.action_profile_group.members]) for g in groups] == [(3, [256] * 4), (4, [1])]


def digest_config(max_timeout_ns: int, max_list_size: int) -> p4r.Entity:
    config = p4r.DigestEntry.Config(max_timeout_ns=max_timeout_ns, max_list_size=max_list_size)
    return p4r.Entity(digest_entry=p4r.DigestEntry(digest_id=INFO.digests[0].preamble.id, config=config))


def test_digest_configs_are_bounded(primary):
    """Huge timeouts and list sizes used to be accepted, and digests then piled up unsent for as long as the switch
    ran (issue 33, finding 5). At most 10 s and 1024 digests a list (docs/switch.md, "Bounds")."""
    codes = primary.write(
        [
            update(p4r.Update.INSERT, digest_config(2**62, 2**31 - 1)),
            update(p4r.Update.INSERT, digest_config(10 * 10**9 + 1, 1)),
            update(p4r.Update.INSERT, digest_config(1000, 1025)),
            update(p4r.Update.INSERT, digest_config(10 * 10**9, 1024)),
        ]
    )
    assert codes == [INVALID_ARGUMENT, INVALID_ARGUMENT, INVALID_ARGUMENT, OK]
    assert primary.write([update(p4r.Update.MODIFY, digest_config(1, 2**20))]) == [INVALID_ARGUMENT]
    (read,) = primary.read([p4r.Entity(digest_entry=p4r.DigestEntry())])
    assert (read.digest_entry.config.max_timeout_ns, read.digest_entry.config.max_list_size) == (10 * 10**9, 1024)


def test_a_batch_has_a_bounded_number_of_updates(primary):
    """The server holds its lock for a whole batch: a batch that the 64 MiB message limit allows would keep
    every other client waiting for minutes. Past 100,000 updates a Write is RESOURCE_EXHAUSTED, nothing applied."""
    rows = [update(p4r.Update.INSERT, port_role(n % 512, 1)) for n in range(100_001)]
    assert set(primary.write(rows, timeout=60)) == {RESOURCE_EXHAUSTED}
    assert all_table_entries(primary) == []


def hop_mac(i: int) -> bytes:
    return b"\x02\xbb" + i.to_bytes(4, "big")


def test_forwarding_continues_during_a_large_batch(switch, primary):
    """A Write used to hold the data path's lock for its whole batch: 20,000 MODIFYs stopped forwarding for
    seconds (issue 33, finding 5). The lock is now let go between updates, as CONTINUE_ON_ERROR allows: packets
    forwarded during a batch that rewrites a next hop's MAC over and over carry the MACs of intermediate
    updates, where before they carried only the first or the last.

    JUMBOGATE_BATCH_UPDATES sets the batch's size (default 20,000); the forwarding gap and latency seen during
    it are printed (-s) for docs/switch.md."""
    count = int(os.environ.get("JUMBOGATE_BATCH_UPDATES", "20000"))
    route_to(primary, 0)
    base = udp_frame(100)
    batch = [update(p4r.Update.MODIFY, next_hop_member(1, 0, src_mac=base[6:12], dst_mac=hop_mac(i))) for i in range(1, count + 1)]
    port = PacketPort(switch.ns, switch.peer)
    sent: dict[int, float] = {}
    arrived: list[tuple[float, int, int]] = []  # (time, sequence, update index the MAC names)
    done = threading.Event()

    def send() -> None:
        seq = 0
        while not done.is_set():
            sent[seq] = time.monotonic()
            port.sock.send(base[:-8] + seq.to_bytes(8, "big"))
            seq += 1
            time.sleep(0.001)

    def receive() -> None:
        while not done.is_set() or time.monotonic() - (arrived[-1][0] if arrived else 0) < 0.3:
            try:
                data, address = port.sock.recvfrom(65535)
            except BlockingIOError:
                time.sleep(0.0005)
                continue
            if address[2] != 4 and data[:2] == b"\x02\xbb":  # not PACKET_OUTGOING; one of the batch's MACs
                arrived.append((time.monotonic(), int.from_bytes(data[-8:], "big"), int.from_bytes(data[2:6], "big")))
            elif address[2] != 4 and data[:6] == base[:6]:
                arrived.append((time.monotonic(), int.from_bytes(data[-8:], "big"), 0))

    threads = [threading.Thread(target=send), threading.Thread(target=receive)]
    try:
        for t in threads:
            t.start()
        time.sleep(0.3)
        started = time.monotonic()
        codes = primary.write(batch, timeout=600)
        ended = time.monotonic()
        time.sleep(0.3)
    finally:
        done.set()
        for t in threads:
            t.join()
        port.close()
    assert set(codes) == {OK}
    states = {index for _, _, index in arrived}
    assert count in states, "nothing came back after the batch"
    intermediate = states - {0, count}
    during = [(at, seq) for at, seq, _ in arrived if started <= at <= ended]
    gaps = [b - a for (a, _), (b, _) in zip(during, during[1:], strict=False)]
    latencies = sorted(at - sent[seq] for at, seq in during)
    print(
        f"\nbatch of {count} MODIFYs: {ended - started:.2f} s, {len(during)} frames forwarded during it, "
        f"{len(intermediate)} intermediate states seen, longest gap between frames {max(gaps, default=ended - started) * 1000:.1f} ms, "
        f"latency median {latencies[len(latencies) // 2] * 1000 if latencies else float('nan'):.2f} ms, "
        f"max {latencies[-1] * 1000 if latencies else float('nan'):.1f} ms"
    )
    assert len(intermediate) >= 3, f"packets saw only {sorted(states)} of the batch's {count} states"


def test_a_role_takes_a_bounded_number_of_streams(log_dir):
    """Every arbitrated stream used to be kept, however many a client opened, each with a writer thread and an
    outbox. A role takes 64 (docs/switch.md, "Bounds"); beyond, arbitration is RESOURCE_EXHAUSTED, as the
    specification says for more streams than a role supports, and a stream that leaves makes room."""
    wiring = OnePortSwitch(log_dir)
    clients = []
    try:
        for n in range(64):
            clients.append(Client(wiring.switch.grpc_address, election_low=n + 1))
            assert clients[-1].arbitrate().status.code == OK
        extra = Client(wiring.switch.grpc_address, election_low=1000)
        clients.append(extra)
        with pytest.raises(grpc.RpcError) as caught:
            extra.arbitrate()
        assert caught.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        clients.pop(0).close()
        time.sleep(0.5)
        late = Client(wiring.switch.grpc_address, election_low=2000)
        clients.append(late)
        assert late.arbitrate().status.code == OK
    finally:
        for client in clients:
            client.close()
        wiring.close()


def elephants_reported(client: Client) -> None:
    """Every TCP flow from port 0 to 10.9.0.1 is an elephant from its first byte: fleet and instance jumbo, a
    threshold of one byte, a route back out of port 0."""
    route_to(client, 0)
    fleet = entry(
        "fleet_policy", [], "set_fleet_jumbo", {"enabled": b"\x01", "guest_jumbo_mtu": (8500).to_bytes(2, "big"), "default_mtu": (1500).to_bytes(2, "big")}
    )
    threshold = entry("elephant_config", [], "set_elephant_threshold", {"bytes": b"\x01"})
    for default in (fleet, threshold):
        default.table_entry.is_default_action = True
    instance = entry("instances_v4", [exact("instances_v4", "instance_addr", bytes([10, 9, 0, 1]))], "set_instance_jumbo", {"enabled": b"\x01"})
    assert client.write([update(p4r.Update.MODIFY, fleet), update(p4r.Update.MODIFY, threshold), update(p4r.Update.INSERT, instance)]) == [OK] * 3


def tcp_flows(count: int, first_port: int = 10000) -> list[bytes]:
    from testlab.nic_packets import tcp_packet

    return [tcp_packet("198.51.100.7", "10.9.0.1", first_port + n, 443, size=100) for n in range(count)]


def test_digests_the_server_drops_are_counted(switch, primary):
    """Digests the server dropped (no digest config, or no primary) were counted where no one could see them;
    /jumbogate_switch/stats has them as digests_dropped."""
    from testlab.lab import telemetry_query
    from testlab.nic_harness import wait_for

    elephants_reported(primary)
    prefix = switch.switch.file_prefix
    before = telemetry_query(prefix, "/jumbogate_switch/stats")["digests_dropped"]
    port = PacketPort(switch.ns, switch.peer)
    try:
        port.send(tcp_flows(50))
        wait_for(lambda: telemetry_query(prefix, "/jumbogate_switch/stats")["digests_dropped"] - before >= 40, "digests without a config counted")
    finally:
        port.close()


def test_pending_digests_are_held_to_one_list(switch, primary):
    """A list is sent once it holds max_list_size digests, or its oldest has waited max_timeout_ns. With the
    largest timeout (10 s) and max_list_size 0, "no limit" in the specification, the server holds at most 1024
    (docs/switch.md, "Bounds"): a full list of 1024 is sent at once. Before, 0 meant a list of whatever had come
    in the last millisecond."""
    elephants_reported(primary)
    assert primary.write([update(p4r.Update.INSERT, digest_config(10 * 10**9, 0))]) == [OK]
    port = PacketPort(switch.ns, switch.peer)
    try:
        started = time.monotonic()
        for start in range(0, 1200, 100):
            port.send(tcp_flows(100, first_port=10000 + start))
            time.sleep(0.01)
        while True:
            message = primary.next_response(timeout=max(0.01, started + 8 - time.monotonic()))
            if message.HasField("digest"):
                break
        assert len(message.digest.data) == 1024
        assert time.monotonic() - started < 8
    finally:
        port.close()


# -- issue 34: checks the specification makes, each failing on the switch before its fix --


def merge_service(priority: int, third_octet: int) -> p4r.Entity:
    dst = p4r.FieldMatch(
        field_id=field_id("merge_services", "dst_addr"), ternary=p4r.FieldMatch.Ternary(value=bytes([10, 1, third_octet, 0]), mask=b"\xff\xff\xff\x00")
    )
    return entry("merge_services", [exact("merge_services", "ip_version", b"\x04"), dst], "steer_merge_service", {}, priority=priority)


def test_a_modify_without_an_action_keeps_the_entry(primary):
    """A MODIFY that names no action was refused (INVALID_ARGUMENT); the specification makes it a no-op on the
    entry's action."""
    assert primary.write([update(p4r.Update.INSERT, port_role(9, 2))]) == [OK]
    bare = port_role(9, 2)
    bare.table_entry.ClearField("action")
    assert primary.write([update(p4r.Update.MODIFY, bare)]) == [OK]
    (read,) = all_table_entries(primary)
    assert read.action.action.action_id == action_id("set_port_role")
    assert read.action.action.params[0].value == b"\x02"
    # The entry must still exist.
    missing = port_role(10, 2)
    missing.table_entry.ClearField("action")
    assert primary.write([update(p4r.Update.MODIFY, missing)]) == [NOT_FOUND]


def test_a_read_filters_on_the_action_id_and_on_the_priority_alone(primary):
    """A read's action id was ignored (every entry came back), and a read giving only a priority was refused."""
    instance = entry("instances_v4", [exact("instances_v4", "instance_addr", bytes([10, 0, 0, 1]))], "set_instance_jumbo", {"enabled": b"\x01"})
    writes = [port_role(1, 1), port_role(2, 1), instance, merge_service(10, 1), merge_service(20, 2)]
    assert primary.write([update(p4r.Update.INSERT, e) for e in writes]) == [OK] * 5
    by_action = p4r.TableEntry()
    by_action.action.action.action_id = action_id("set_port_role")
    read = [e.table_entry for e in primary.read([p4r.Entity(table_entry=by_action)])]
    assert sorted(e.match[0].exact.value for e in read) == [b"\x01", b"\x02"]
    assert all(e.table_id == table("port_roles").preamble.id for e in read)
    by_action.table_id = table("port_roles").preamble.id
    by_action.action.action.action_id = action_id("set_instance_jumbo")
    assert primary.read([p4r.Entity(table_entry=by_action)]) == []
    by_priority = p4r.TableEntry(table_id=table("merge_services").preamble.id, priority=20)
    (read,) = primary.read([p4r.Entity(table_entry=by_priority)])
    assert read.table_entry.priority == 20
    assert read.table_entry.match[1].ternary.value == bytes([10, 1, 2, 0])


def test_ageing_fields_where_nothing_ages_are_refused(primary):
    """time_since_last_hit on a table without idle timeout, and idle_timeout_ns on a default entry, were accepted."""
    role = port_role(3, 1)
    role.table_entry.time_since_last_hit.elapsed_ns = 5
    assert primary.write([update(p4r.Update.INSERT, role)]) == [INVALID_ARGUMENT]
    query = p4r.TableEntry(table_id=table("port_roles").preamble.id)
    query.time_since_last_hit.SetInParent()
    with pytest.raises(grpc.RpcError) as caught:
        primary.read([p4r.Entity(table_entry=query)])
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "idle timeout" in caught.value.details()
    threshold = entry("elephant_config", [], "set_elephant_threshold", {"bytes": b"\x07"})
    threshold.table_entry.is_default_action = True
    threshold.table_entry.idle_timeout_ns = 10**9
    assert primary.write([update(p4r.Update.MODIFY, threshold)]) == [INVALID_ARGUMENT]
    (default,) = primary.read([p4r.Entity(table_entry=p4r.TableEntry(table_id=table("elephant_config").preamble.id, is_default_action=True))])
    assert default.table_entry.action.action.params[0].value == b"\x00"
    # A table with idle timeout still answers it.
    assert primary.write([update(p4r.Update.INSERT, merge_flow_entry(1, 10**9))]) == [OK]
    flows = p4r.TableEntry(table_id=table("merge_flows").preamble.id)
    flows.time_since_last_hit.SetInParent()
    (read,) = primary.read([p4r.Entity(table_entry=flows)])
    assert read.table_entry.HasField("time_since_last_hit")


def test_a_member_of_weight_zero_and_a_new_max_size_are_refused(primary):
    """A member of weight 0 was taken as weight 1, and a group MODIFY could change the group's max_size."""
    assert primary.write([update(p4r.Update.INSERT, next_hop_member(m, 0)) for m in (1, 2)]) == [OK, OK]
    assert primary.write([update(p4r.Update.INSERT, ecmp_group(1, {1: 0}))]) == [INVALID_ARGUMENT]
    sized = ecmp_group(2, {1: 1})
    sized.action_profile_group.max_size = 8
    assert primary.write([update(p4r.Update.INSERT, sized)]) == [OK]
    resized = ecmp_group(2, {1: 1, 2: 1})
    resized.action_profile_group.max_size = 16
    same = ecmp_group(2, {1: 1, 2: 1})
    same.action_profile_group.max_size = 8
    assert primary.write([update(p4r.Update.MODIFY, resized), update(p4r.Update.MODIFY, same)]) == [INVALID_ARGUMENT, OK]
    (group,) = primary.read([p4r.Entity(action_profile_group=p4r.ActionProfileGroup())])
    assert (group.action_profile_group.group_id, group.action_profile_group.max_size, len(group.action_profile_group.members)) == (2, 8, 2)


def test_an_empty_entity_in_a_read_is_invalid_argument(primary):
    """It was UNIMPLEMENTED, as if the switch lacked some kind of entity."""
    with pytest.raises(grpc.RpcError) as caught:
        primary.read([p4r.Entity()])
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT


def test_an_ack_for_an_unknown_digest_names_the_ack(primary):
    """The stream error for an ack of an unknown digest id did not carry the ack (StreamError.digest_list_ack)."""
    primary.send(p4r.StreamMessageRequest(digest_ack=p4r.DigestListAck(digest_id=424242, list_id=17)))
    deadline = time.monotonic() + 5
    while True:
        message = primary.next_response(timeout=max(0.01, deadline - time.monotonic()))
        if message.HasField("error"):
            break
    assert message.error.canonical_code == INVALID_ARGUMENT
    assert message.error.WhichOneof("details") == "digest_list_ack"
    ack = message.error.digest_list_ack.digest_list_ack
    assert (ack.digest_id, ack.list_id) == (424242, 17)


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


def instance(n: int) -> p4r.Entity:
    return entry("instances_v4", [exact("instances_v4", "instance_addr", n.to_bytes(4, "big"))], "set_instance_jumbo", {"enabled": b"\x01"})


def test_a_large_failing_batch_is_read_by_a_client_with_default_limits(switch, primary):
    """A failed Write carries one p4.v1.Error per update in its trailers, and gRPC clients cap trailers at 16 KiB:
    a batch of 1,000 updates with one refused was applied, yet a client with default limits saw RESOURCE_EXHAUSTED
    ("metadata size exceeds hard limit") instead of its codes. Each OK detail is now as small as an Any allows
    (docs/switch.md, "Errors a client can read"); a larger batch needs a client with higher limits."""
    batch = [update(p4r.Update.INSERT, instance(n)) for n in range(1, 1000)] + [update(p4r.Update.INSERT, port_role(511, 9))]
    assert primary.write(batch) == [OK] * 999 + [INVALID_ARGUMENT]
    assert len(all_table_entries(primary)) == 999
    raised = Client(switch.switch.grpc_address, election_low=100, options=[("grpc.max_metadata_size", 1 << 20), ("grpc.absolute_max_metadata_size", 1 << 20)])
    try:
        big = [update(p4r.Update.INSERT, instance(n)) for n in range(1000, 10000)] + [update(p4r.Update.INSERT, instance(1))]
        assert raised.write(big) == [OK] * 9000 + [ALREADY_EXISTS]
    finally:
        raised.close()


def test_an_entry_that_stays_idle_is_notified_again(primary):
    """One idle-timeout notification was sent, never repeated while the entry stayed idle; the specification
    sends it again every idle_timeout_ns, so a controller that missed one still learns of it."""
    flow = merge_flow_entry(7, 200 * 1000 * 1000)
    assert primary.write([update(p4r.Update.INSERT, flow)]) == [OK]
    notified = 0
    deadline = time.monotonic() + 10
    while notified < 3:
        message = primary.next_response(timeout=max(0.01, deadline - time.monotonic()))
        if message.HasField("idle_timeout_notification"):
            (idle,) = message.idle_timeout_notification.table_entry
            assert idle.match == flow.table_entry.match
            notified += 1


def test_entry_metadata_is_kept_and_read_back(primary):
    """TableEntry.metadata and controller_metadata were accepted and read back empty."""
    role = port_role(12, 1)
    role.table_entry.metadata = b"owner=reconciler;rev=41"
    role.table_entry.controller_metadata = 41
    assert primary.write([update(p4r.Update.INSERT, role)]) == [OK]
    (read,) = all_table_entries(primary)
    assert (read.metadata, read.controller_metadata) == (b"owner=reconciler;rev=41", 41)
    role.table_entry.metadata = b"owner=reconciler;rev=42"
    role.table_entry.controller_metadata = 42
    assert primary.write([update(p4r.Update.MODIFY, role)]) == [OK]
    (read,) = all_table_entries(primary)
    assert (read.metadata, read.controller_metadata) == (b"owner=reconciler;rev=42", 42)


def test_one_shot_programming_of_the_selector(switch, primary):
    """An entry of next_hops could only name a member or a group; one-shot programming (the entry carries its
    actions and weights) was refused. The switch now keeps the set as the entry's hop set, creates no member or
    group, reads the entry back as written, and refuses mixing the two ways on one action profile."""
    frame = udp_frame(64)
    hop = next_hop_member(0, 0, src_mac=frame[6:12], dst_mac=frame[0:6]).action_profile_member.action
    for param in hop.params:  # as the switch reads them back: the shortest form
        param.value = param.value.lstrip(b"\0") or b"\0"
    one_shot = next_hops_entry(1, member_id=0)
    one_shot.table_entry.action.ClearField("action_profile_member_id")
    one_shot.table_entry.action.action_profile_action_set.action_profile_actions.add(action=hop, weight=2)
    writes = [port_role(0, 1), one_shot, route_v4(bytes([10, 9, 0, 0]), 16, group=1)]
    assert primary.write([update(p4r.Update.INSERT, e) for e in writes]) == [OK] * 3
    (read,) = primary.read([p4r.Entity(table_entry=p4r.TableEntry(table_id=table("next_hops").preamble.id))])
    assert read.table_entry.action.action_profile_action_set == one_shot.table_entry.action.action_profile_action_set
    assert primary.read([p4r.Entity(action_profile_member=p4r.ActionProfileMember())]) == []
    assert primary.write([update(p4r.Update.INSERT, next_hop_member(5, 0))]) == [INVALID_ARGUMENT]
    zero = next_hops_entry(2, member_id=0)
    zero.table_entry.action.ClearField("action_profile_member_id")
    zero.table_entry.action.action_profile_action_set.action_profile_actions.add(action=hop, weight=0)
    assert primary.write([update(p4r.Update.INSERT, zero)]) == [INVALID_ARGUMENT]
    port = PacketPort(switch.ns, switch.peer)
    try:
        port.drain()
        port.send([frame])
        assert forwarded(frame) in port.receive(count=1)
    finally:
        port.close()


def pre(group: int | None = None, session: int | None = None, ports=(), truncate: int = 0) -> p4r.Entity:
    entry = p4r.PacketReplicationEngineEntry()
    if group is not None:
        entry.multicast_group_entry.multicast_group_id = group
        target = entry.multicast_group_entry
    else:
        entry.clone_session_entry.session_id = session
        entry.clone_session_entry.packet_length_bytes = truncate
        target = entry.clone_session_entry
    for port, instance in ports:
        target.replicas.add(port=port.to_bytes(2, "big"), instance=instance)
    return p4r.Entity(packet_replication_engine_entry=entry)


def test_multicast_groups_and_clone_sessions_are_kept_and_read_back(primary):
    """Every packet replication entry was refused (UNIMPLEMENTED) and reads answered nothing. Multicast groups and
    clone sessions (with truncation) are now validated, kept and read back; the software pipeline replicates
    nothing, since the program calls neither (docs/switch.md)."""
    session = pre(session=5, ports=[(1, 0), (2, 0)], truncate=128)
    group = pre(group=7, ports=[(1, 1), (1, 2), (3, 1)])
    codes = primary.write(
        [
            update(p4r.Update.INSERT, session),
            update(p4r.Update.INSERT, group),
            update(p4r.Update.INSERT, pre(session=5, ports=[(1, 0)])),
            update(p4r.Update.INSERT, pre(group=0, ports=[(1, 0)])),
            update(p4r.Update.INSERT, pre(group=8, ports=[(1, 0), (1, 0)])),
            update(p4r.Update.INSERT, pre(group=9, ports=[(600, 0)])),
            update(p4r.Update.INSERT, pre(session=6, ports=[(1, 0)], truncate=-1)),
            update(p4r.Update.MODIFY, pre(group=10, ports=[(1, 0)])),
        ]
    )
    assert codes == [OK, OK, ALREADY_EXISTS, INVALID_ARGUMENT, INVALID_ARGUMENT, INVALID_ARGUMENT, INVALID_ARGUMENT, NOT_FOUND]
    everything = primary.read([p4r.Entity(packet_replication_engine_entry=p4r.PacketReplicationEngineEntry())])
    assert sorted(e.SerializeToString() for e in everything) == sorted([session.SerializeToString(), group.SerializeToString()])
    (read,) = primary.read([pre(session=5)])
    assert read.packet_replication_engine_entry.clone_session_entry.packet_length_bytes == 128
    smaller = pre(group=7, ports=[(3, 1)])
    assert primary.write([update(p4r.Update.MODIFY, smaller)]) == [OK]
    assert primary.read([pre(group=7)]) == [smaller]
    assert primary.write([update(p4r.Update.DELETE, pre(session=5)), update(p4r.Update.DELETE, pre(group=7))]) == [OK, OK]
    assert primary.read([p4r.Entity(packet_replication_engine_entry=p4r.PacketReplicationEngineEntry())]) == []


def fill(client: Client, rows: list[p4r.Entity]) -> list[int]:
    """INSERTs in batches: a failed Write carries one error per update in its trailers, which clients cap."""
    updates = [update(p4r.Update.INSERT, row) for row in rows]
    return [code for start in range(0, len(updates), 256) for code in client.write(updates[start : start + 256])]


@pytest.mark.parametrize(
    "alias, row",
    [
        # An LPM table: one prefix per entry.
        (
            "path_mtu_v4",
            lambda n: entry(
                "path_mtu_v4", [lpm("path_mtu_v4", (0x0A000000 + (n << 8)).to_bytes(4, "big"), 24)], "set_path_mtu", {"mtu": (1400).to_bytes(2, "big")}
            ),
        ),
        # The exact table with the longest key, as the data path packs it.
        ("merge_flows", lambda n: merge_flow_entry(n, 0)),
        # The ternary table, rebuilt whole on each change.
        ("merge_services", lambda n: merge_service(n + 1, n % 256)),
    ],
)
def test_full_tables_answer_resource_exhausted_and_keep_what_they_hold(primary, alias, row):
    """A table is as large as the compile says (P4Info size) in the server and in the data path alike: the entry
    past it is RESOURCE_EXHAUSTED, and what was accepted is all there is, and room made by a DELETE is usable."""
    size = table(alias).size
    codes = fill(primary, [row(n) for n in range(size + 1)])
    assert codes[:size] == [OK] * size
    assert codes[size:] == [RESOURCE_EXHAUSTED]
    held = [e for e in all_table_entries(primary) if e.table_id == table(alias).preamble.id]
    assert len(held) == size
    assert primary.write([update(p4r.Update.DELETE, row(0)), update(p4r.Update.INSERT, row(size))]) == [OK, OK]
    assert primary.write([update(p4r.Update.INSERT, row(0))]) == [RESOURCE_EXHAUSTED]


def test_a_default_action_reaches_the_data_path_and_its_reset_restores_the_compile_s(switch, primary):
    """The data path reads a default action's arguments by parameter name (sw_set_default), from a controller's
    MODIFY and, on a MODIFY without an action, from the compile's default (fleet_policy: default_mtu 1500)."""
    route_to(primary, 0)
    fleet = table("fleet_policy")

    def fleet_default(default_mtu: int) -> p4r.Entity:
        params = {"enabled": b"\x00", "guest_jumbo_mtu": (8500).to_bytes(2, "big"), "default_mtu": default_mtu.to_bytes(2, "big")}
        e = entry("fleet_policy", [], "set_fleet_jumbo", params)
        e.table_entry.is_default_action = True
        return e

    def forwarded_count(size: int) -> int:
        port = PacketPort(switch.ns, switch.peer)
        try:
            port.drain()
            frame = udp_frame(size)
            port.send([frame] * 3)
            return sum(1 for f in port.receive(count=3, timeout=2) if len(f) == size)
        finally:
            port.close()

    assert forwarded_count(1400) == 3  # the program's default_mtu, 1500, lets 1,386 bytes of IP through
    assert primary.write([update(p4r.Update.MODIFY, fleet_default(1300))]) == [OK]
    assert forwarded_count(1400) == 0  # above the controller's 1300
    reset = p4r.Entity(table_entry=p4r.TableEntry(table_id=fleet.preamble.id, is_default_action=True))
    assert primary.write([update(p4r.Update.MODIFY, reset)]) == [OK]
    assert forwarded_count(1400) == 3


def test_a_digest_carries_the_flow_in_the_compile_s_member_order(switch, primary):
    """elephant_digest_t's members are placed by the compile's order and widths (p4_tables.h), not by a list typed
    in the server: each is the flow of the packet, at its width."""
    elephants_reported(primary)
    assert primary.write([update(p4r.Update.INSERT, digest_config(10**6, 1))]) == [OK]
    port = PacketPort(switch.ns, switch.peer)
    try:
        port.send(tcp_flows(1, first_port=12345))
        deadline = time.monotonic() + 5
        while True:
            message = primary.next_response(timeout=max(0.01, deadline - time.monotonic()))
            if message.HasField("digest"):
                break
    finally:
        port.close()
    members = [m.bitstring for m in message.digest.data[0].struct.members]
    assert members[:6] == [b"\x04", bytes([198, 51, 100, 7]), bytes([10, 9, 0, 1]), b"\x06", (12345).to_bytes(2, "big"), (443).to_bytes(2, "big")]
    assert len(members) == 7 and int.from_bytes(members[6], "big") > 0
