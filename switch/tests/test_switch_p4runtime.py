"""jumbogate-switch's P4Runtime server, against the specification: what is written and read.

Every test talks to the real program over real gRPC with hand-made
messages: malformed writes get the canonical error for each update and
change nothing, tables, selectors, digest configs and batches are bounded,
and what is written is read back canonical. Who may write is
test_switch_election.py's subject, what the stream carries
test_switch_streams.py's.
"""

from __future__ import annotations

import queue
import time

import grpc
import pytest
from finsy.proto import p4r
from switch_harness import (
    ALREADY_EXISTS,
    ECMP_SELECTOR,
    INFO,
    INVALID_ARGUMENT,
    NOT_FOUND,
    OK,
    OUT_OF_RANGE,
    PERMISSION_DENIED,
    RESOURCE_EXHAUSTED,
    Client,
    action_id,
    all_table_entries,
    digest_config,
    ecmp_group,
    entry,
    exact,
    field_id,
    forwarded,
    lpm,
    merge_flow_entry,
    next_hop_member,
    next_hops_entry,
    port_role,
    route_to,
    route_v4,
    table,
    udp_frame,
    update,
)

from testlab.lab import telemetry_query
from testlab.nic_harness import PacketPort


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


def idle_notifications(client: Client, wait_s: float) -> list:
    """The merge_flows entries of the idle-timeout notifications that reach client within wait_s."""
    entries = []
    deadline = time.monotonic() + wait_s
    while (left := deadline - time.monotonic()) > 0:
        try:
            response = client.next_response(timeout=left)
        except queue.Empty:
            break
        if response.HasField("idle_timeout_notification"):
            entries += list(response.idle_timeout_notification.table_entry)
    return entries


def test_a_merge_flow_in_steady_traffic_is_not_reported_idle(switch, primary):
    """The idle scan read its clock before the entries' last hits, and a worker whose burst began after that
    stamped a later hit: now - hit wrapped around, and a flow in steady traffic was reported idle (its onload
    lost after a second or two in the rack). It is reported once its traffic stops."""
    from scapy.layers.inet import IP, TCP
    from scapy.layers.l2 import Ether

    n = 7  # merge_flow_entry(7): 198.18.0.7:1031 -> 10.10.0.10:443, TCP
    assert primary.write([update(p4r.Update.INSERT, merge_flow_entry(n, 10**9))]) == [OK]
    frame = bytes(Ether() / IP(src="198.18.0.7", dst="10.10.0.10") / TCP(sport=1024 + n, dport=443) / (b"x" * 64))
    port = PacketPort(switch.ns, switch.peer)
    reported, sent = [], 0
    try:
        deadline = time.monotonic() + 4
        while time.monotonic() < deadline:
            port.send([frame] * 64)
            sent += 64
            reported += idle_notifications(primary, 0.0005)
        reported += idle_notifications(primary, 0.05)
        assert reported == [], f"reported idle while {sent} frames hit it"
        assert idle_notifications(primary, 5), "no idle-timeout notification after the traffic stopped"
    finally:
        port.close()


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


MAX_MULTICAST_GROUPS = 1024  # docs/switch.md, "Bounds"
MAX_CLONE_SESSIONS = 1024
MAX_ENTRY_METADATA = 1024


def switch_stats(switch) -> dict:
    return telemetry_query(switch.switch.file_prefix, "/jumbogate_switch/stats")


@pytest.mark.parametrize(
    "kind, bound, row",
    [
        ("multicast_groups", MAX_MULTICAST_GROUPS, lambda n: pre(group=n, ports=[(1, 0)])),
        ("clone_sessions", MAX_CLONE_SESSIONS, lambda n: pre(session=n, ports=[(1, 0)])),
    ],
)
def test_multicast_groups_and_clone_sessions_are_bounded(switch, primary, kind, bound, row):
    """Any uint32 id made a new group or session, without end: 15,000 groups of 1,024 replicas took the switch to
    2.9 GB, all accepted. At most MAX_MULTICAST_GROUPS groups and MAX_CLONE_SESSIONS sessions are held; the next
    INSERT is RESOURCE_EXHAUSTED and counted (/jumbogate_switch/stats), a MODIFY at the bound is not, and room made
    by a DELETE is usable."""
    before = switch_stats(switch).get(f"{kind}_refused", 0)
    codes = fill(primary, [row(n) for n in range(1, bound + 2)])
    assert codes[:bound] == [OK] * bound
    assert codes[bound:] == [RESOURCE_EXHAUSTED]
    assert switch_stats(switch)[f"{kind}_refused"] == before + 1
    held = primary.read([p4r.Entity(packet_replication_engine_entry=p4r.PacketReplicationEngineEntry())])
    assert len(held) == bound
    assert primary.write([update(p4r.Update.MODIFY, row(1))]) == [OK]
    assert primary.write([update(p4r.Update.DELETE, row(1)), update(p4r.Update.INSERT, row(bound + 1))]) == [OK, OK]
    assert primary.write([update(p4r.Update.INSERT, row(bound + 2))]) == [RESOURCE_EXHAUSTED]
    assert switch_stats(switch)[f"{kind}_refused"] == before + 2


def test_entry_metadata_is_bounded(primary):
    """A table entry's metadata was kept at any size: 16 entries of 48 MB each took the switch from 94 MB to 885 MB.
    Metadata of MAX_ENTRY_METADATA bytes is kept and read back intact; one byte more is INVALID_ARGUMENT and changes
    nothing. A multicast group's metadata, the other opaque bytes the switch keeps, is held to the same bound."""
    role = port_role(12, 1)
    role.table_entry.metadata = bytes(range(256)) * (MAX_ENTRY_METADATA // 256)
    assert primary.write([update(p4r.Update.INSERT, role)]) == [OK]
    too_long = port_role(12, 1)
    too_long.table_entry.metadata = b"m" * (MAX_ENTRY_METADATA + 1)
    other = port_role(13, 1)
    other.table_entry.metadata = b"m" * (MAX_ENTRY_METADATA + 1)
    assert primary.write([update(p4r.Update.MODIFY, too_long), update(p4r.Update.INSERT, other)]) == [INVALID_ARGUMENT, INVALID_ARGUMENT]
    (read,) = all_table_entries(primary)
    assert read.metadata == role.table_entry.metadata
    group = pre(group=3, ports=[(1, 0)])
    group.packet_replication_engine_entry.multicast_group_entry.metadata = b"g" * MAX_ENTRY_METADATA
    too_long_group = pre(group=4, ports=[(1, 0)])
    too_long_group.packet_replication_engine_entry.multicast_group_entry.metadata = b"g" * (MAX_ENTRY_METADATA + 1)
    assert primary.write([update(p4r.Update.INSERT, group), update(p4r.Update.INSERT, too_long_group)]) == [OK, INVALID_ARGUMENT]
    assert primary.read([p4r.Entity(packet_replication_engine_entry=p4r.PacketReplicationEngineEntry())]) == [group]


MAX_READ_ENTITIES = 140_000  # docs/switch.md, "Bounds"


def test_a_read_is_bounded_and_holds_up_no_write(switch, primary):
    """A Read built its whole answer under the server's lock, without bound: 20,000 wildcard counter entities (an 80
    KB request) expanded to 25.7 M entities, took the switch from 94 MB to 4.4 GB and held a primary's Write for 15.7 s.
    A Read looks at MAX_READ_ENTITIES entities at most and names as many; past either it is RESOURCE_EXHAUSTED at once,
    nothing sent, and counted (reads_refused), and a Write right after goes through."""
    every_counter = p4r.Entity(counter_entry=p4r.CounterEntry())
    cells = len(primary.read([every_counter]))
    fits = MAX_READ_ENTITIES // cells
    assert len(primary.read([every_counter] * fits)) == fits * cells
    before = switch_stats(switch).get("reads_refused", 0)
    started = time.monotonic()
    with pytest.raises(grpc.RpcError) as caught:
        primary.read([every_counter] * (fits + 1))
    assert caught.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    # Entities that find nothing (no digest is configured) cost little each; a request names at most as many.
    nothing = p4r.Entity(digest_entry=p4r.DigestEntry())
    assert primary.read([nothing] * MAX_READ_ENTITIES) == []
    with pytest.raises(grpc.RpcError) as caught:
        primary.read([nothing] * (MAX_READ_ENTITIES + 1))
    assert caught.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert switch_stats(switch)["reads_refused"] == before + 2
    assert primary.write([update(p4r.Update.INSERT, port_role(1, 1))]) == [OK]
    assert time.monotonic() - started < 5


def with_unknown_field(message, size: int):
    """message with size bytes in a field no P4Runtime version has (number 1000), as a newer client could send."""
    length, rest = bytearray(), size
    while True:
        length.append((rest & 0x7F) | (0x80 if rest >> 7 else 0))
        rest >>= 7
        if not rest:
            break
    out = type(message)()
    out.ParseFromString(message.SerializeToString() + b"\xc2\x3e" + bytes(length) + b"u" * size)
    return out


def test_unknown_fields_are_not_kept(primary):
    """Fields the switch does not know are opaque bytes too: a next_hops entry's action and an action profile group
    were kept with them and read back at any size (16 MB each). They are not kept: what is read back is what the
    switch knows of the write."""
    assert primary.write([update(p4r.Update.INSERT, next_hop_member(1, 0))]) == [OK]
    route = next_hops_entry(1, member_id=1)
    route.table_entry.action.CopyFrom(with_unknown_field(route.table_entry.action, 1 << 20))
    group = ecmp_group(2, {1: 1})
    group.action_profile_group.CopyFrom(with_unknown_field(group.action_profile_group, 1 << 20))
    multicast = pre(group=3, ports=[(1, 0)])
    target = multicast.packet_replication_engine_entry.multicast_group_entry
    target.CopyFrom(with_unknown_field(target, 1 << 20))
    assert primary.write([update(p4r.Update.INSERT, e) for e in (route, group, multicast)]) == [OK, OK, OK]
    (entry_read,) = all_table_entries(primary)
    (group_read,) = primary.read([p4r.Entity(action_profile_group=p4r.ActionProfileGroup())])
    (multicast_read,) = primary.read([pre(group=3)])
    # Compared serialized: == on messages does not look at unknown fields.
    read = [entry_read.action, group_read, multicast_read]
    written = [next_hops_entry(1, member_id=1).table_entry.action, ecmp_group(2, {1: 1}), pre(group=3, ports=[(1, 0)])]
    assert [m.ByteSize() for m in read] == [m.ByteSize() for m in written]
    assert [m.SerializeToString() for m in read] == [m.SerializeToString() for m in written]


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


def icmp_signals_for(switch, count: int) -> int:
    """ICMP "fragmentation needed" signals back on port 0 for `count` DF frames of 1,400 bytes, one at a time,
    past a fleet MTU of 1,300 (each meets icmp_signal_meter's cell of port 0)."""
    from scapy.layers.inet import ICMP, IP, UDP
    from scapy.layers.l2 import Ether

    head = Ether(src="02:00:00:00:00:01", dst="02:00:00:00:00:02") / IP(src="198.51.100.7", dst="10.9.0.1", flags="DF") / UDP(sport=4000, dport=5000)
    frame = bytes(head / bytes(1400 - len(head)))
    port = PacketPort(switch.ns, switch.peer)
    try:
        port.drain()
        for _ in range(count):
            port.send([frame])
        received = port.receive(timeout=2)
    finally:
        port.close()
    return sum(1 for f in received if ICMP in Ether(f) and Ether(f)[ICMP].type == 3 and Ether(f)[ICMP].code == 4)


INT64_MAX = 2**63 - 1


@pytest.mark.parametrize(
    "config, signals",
    [
        ((1, 2, 1, 2), 2),  # a burst of two, refilled at one a second: the meter meters
        ((1000, 2**64 // 10**6 + 1, 1000, 2**64 // 10**6 + 1), 5),  # bursts past UINT64_MAX / 1e6 tokens
        ((INT64_MAX, INT64_MAX, INT64_MAX, INT64_MAX), 5),
        ((INT64_MAX, 10, INT64_MAX, 10), 5),  # rates whose refill overflows 64 bits
    ],
    ids=["small", "huge-bursts", "int64-max", "huge-rates"],
)
def test_a_meter_takes_any_int64_rate_and_burst(switch, primary, config, signals):
    """The token buckets were counted in 1e-6 packets in 64 bits: a burst past 1.8e13 packets (a valid int64)
    wrapped to a bucket smaller than one packet, and a rate near INT64_MAX times the time since the last packet
    wrapped too, so a meter configured to let everything through marked every packet red and the switch sent no
    ICMP signal at all. Such buckets saturate; a negative rate or burst is still INVALID_ARGUMENT."""
    route_to(primary, 0)
    fleet = entry(
        "fleet_policy", [], "set_fleet_jumbo", {"enabled": b"\x00", "guest_jumbo_mtu": (8500).to_bytes(2, "big"), "default_mtu": (1300).to_bytes(2, "big")}
    )
    fleet.table_entry.is_default_action = True
    assert primary.write([update(p4r.Update.MODIFY, fleet)]) == [OK]
    meter_id = next(m.preamble.id for m in INFO.meters if m.preamble.alias == "icmp_signal_meter")

    def meter(cir: int, cburst: int, pir: int, pburst: int) -> p4r.Entity:
        return p4r.Entity(
            meter_entry=p4r.MeterEntry(meter_id=meter_id, index=p4r.Index(index=0), config=p4r.MeterConfig(cir=cir, cburst=cburst, pir=pir, pburst=pburst))
        )

    assert primary.write([update(p4r.Update.MODIFY, meter(-1, 2, 1, 2)), update(p4r.Update.MODIFY, meter(1, 2, 1, -2))]) == [INVALID_ARGUMENT] * 2
    assert primary.write([update(p4r.Update.MODIFY, meter(*config))]) == [OK]
    try:
        assert icmp_signals_for(switch, 5) == signals
    finally:
        assert primary.write([update(p4r.Update.MODIFY, p4r.Entity(meter_entry=p4r.MeterEntry(meter_id=meter_id, index=p4r.Index(index=0))))]) == [OK]


MAX_REPLICAS_TOTAL = 16_384  # docs/switch.md, "Bounds"


def test_replicas_of_all_groups_and_sessions_together_are_bounded(switch, primary):
    """Groups and sessions were bounded in number and in replicas each, not in replicas all told: 1,024 groups and
    1,024 sessions of 1,024 replicas could hold about 380 MB. Every group's and session's replicas together are at
    most MAX_REPLICAS_TOTAL: an INSERT or MODIFY that would pass it is RESOURCE_EXHAUSTED, changes nothing and is
    counted (replicas_refused); room a smaller MODIFY or a DELETE makes is usable."""
    full = [(port, instance) for port in range(16) for instance in range(64)]  # 1,024 replicas
    half = MAX_REPLICAS_TOTAL // len(full) // 2
    rows = [pre(group=n, ports=full) for n in range(1, half + 1)] + [pre(session=n, ports=full) for n in range(1, half + 1)]
    assert fill(primary, rows) == [OK] * len(rows)
    before = switch_stats(switch).get("replicas_refused", 0)
    assert primary.write([update(p4r.Update.INSERT, pre(group=100, ports=[(1, 0)]))]) == [RESOURCE_EXHAUSTED]
    assert primary.write([update(p4r.Update.INSERT, pre(session=100, ports=[(1, 0)]))]) == [RESOURCE_EXHAUSTED]
    assert primary.write([update(p4r.Update.MODIFY, pre(group=1, ports=full[:-1]))]) == [OK]
    assert primary.write([update(p4r.Update.INSERT, pre(group=100, ports=[(1, 0)]))]) == [OK]
    assert primary.write([update(p4r.Update.MODIFY, pre(group=1, ports=full))]) == [RESOURCE_EXHAUSTED]
    (group_1,) = primary.read([pre(group=1)])
    assert len(group_1.packet_replication_engine_entry.multicast_group_entry.replicas) == len(full) - 1
    assert switch_stats(switch)["replicas_refused"] == before + 3
    assert primary.write([update(p4r.Update.DELETE, pre(session=1)), update(p4r.Update.INSERT, pre(session=1, ports=full))]) == [OK, OK]
    assert primary.write([update(p4r.Update.INSERT, pre(session=101, ports=[(1, 0)]))]) == [RESOURCE_EXHAUSTED]
