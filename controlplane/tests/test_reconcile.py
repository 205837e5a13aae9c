"""The reconciliation diff, on P4Runtime protobufs."""

import pytest
from finsy.proto import p4r

from jumbogate.reconcile import entity_key, plan


def exact(field_id: int, value: bytes) -> p4r.FieldMatch:
    return p4r.FieldMatch(field_id=field_id, exact=p4r.FieldMatch.Exact(value=value))


def route(prefix: bytes, port: int, *, table: int = 100, extra_match: bool = False, counter: int | None = None) -> p4r.Entity:
    matches = [p4r.FieldMatch(field_id=1, lpm=p4r.FieldMatch.LPM(value=prefix, prefix_len=24))]
    if extra_match:
        matches.append(exact(2, b"\x01"))
    entry = p4r.TableEntry(
        table_id=table,
        match=matches,
        action=p4r.TableAction(action=p4r.Action(action_id=7, params=[p4r.Action.Param(param_id=1, value=bytes([port]))])),
    )
    if counter is not None:
        entry.counter_data.packet_count = counter
    return p4r.Entity(table_entry=entry)


def default_entry(table: int, action_id: int) -> p4r.Entity:
    return p4r.Entity(table_entry=p4r.TableEntry(table_id=table, is_default_action=True, action=p4r.TableAction(action=p4r.Action(action_id=action_id))))


def member(member_id: int, port: int) -> p4r.Entity:
    return p4r.Entity(
        action_profile_member=p4r.ActionProfileMember(
            action_profile_id=9, member_id=member_id, action=p4r.Action(action_id=7, params=[p4r.Action.Param(param_id=1, value=bytes([port]))])
        )
    )


def group(group_id: int, members: list[tuple[int, int]]) -> p4r.Entity:
    return p4r.Entity(
        action_profile_group=p4r.ActionProfileGroup(
            action_profile_id=9,
            group_id=group_id,
            members=[p4r.ActionProfileGroup.Member(member_id=m, weight=w) for m, w in members],
            max_size=16,
        )
    )


def test_identical_state_plans_nothing():
    desired = [route(b"\x0a\x00\x00\x00", 1), member(1, 1), group(1, [(1, 1)])]
    actual = [route(b"\x0a\x00\x00\x00", 1), group(1, [(1, 1)]), member(1, 1)]
    result = plan(desired, actual)
    assert result.empty and result.unchanged == 3


def test_missing_entry_is_inserted_and_extra_entry_deleted():
    result = plan([route(b"\x0a\x00\x00\x00", 1)], [route(b"\x0b\x00\x00\x00", 1)])
    assert [e.table_entry.match[0].lpm.value for e in result.inserts] == [b"\x0a\x00\x00\x00"]
    assert [e.table_entry.match[0].lpm.value for e in result.deletes] == [b"\x0b\x00\x00\x00"]
    assert not result.modifies


def test_changed_action_is_a_modify_not_delete_and_insert():
    result = plan([route(b"\x0a\x00\x00\x00", 2)], [route(b"\x0a\x00\x00\x00", 1)])
    assert len(result.modifies) == 1 and not result.inserts and not result.deletes
    assert result.modifies[0].table_entry.action.action.params[0].value == b"\x02"


def test_counters_read_back_are_not_a_difference():
    assert plan([route(b"\x0a\x00\x00\x00", 1)], [route(b"\x0a\x00\x00\x00", 1, counter=12345)]).empty


def test_match_field_order_is_not_a_difference():
    a = route(b"\x0a\x00\x00\x00", 1, extra_match=True)
    b = p4r.Entity()
    b.CopyFrom(a)
    fields = list(b.table_entry.match)
    del b.table_entry.match[:]
    b.table_entry.match.extend(reversed(fields))
    assert entity_key(a) == entity_key(b)
    assert plan([a], [b]).empty


def test_default_entries_are_modified_never_inserted_or_deleted():
    result = plan([default_entry(100, 3)], [default_entry(100, 4), default_entry(200, 4)])
    assert len(result.modifies) == 1 and result.modifies[0].table_entry.table_id == 100
    assert not result.deletes and not result.inserts
    # A default entry the switch does not report is still a modify.
    result = plan([default_entry(300, 3)], [])
    assert len(result.modifies) == 1 and not result.inserts


def test_group_member_order_is_ignored_but_weight_is_not():
    assert plan([group(1, [(1, 1), (2, 1)])], [group(1, [(2, 1), (1, 1)])]).empty
    result = plan([group(1, [(1, 2), (2, 1)])], [group(1, [(1, 1), (2, 1)])])
    assert len(result.modifies) == 1


def test_keep_protects_entries_owned_elsewhere():
    extra = route(b"\x0b\x00\x00\x00", 1)
    assert plan([], [extra], keep={entity_key(extra)}).empty
    assert len(plan([], [extra]).deletes) == 1


def test_batches_delete_entries_before_groups_and_insert_members_first():
    desired = [route(b"\x0a\x00\x00\x00", 1), member(1, 1), group(1, [(1, 1)])]
    actual = [route(b"\x0c\x00\x00\x00", 1), member(5, 5), group(5, [(5, 1)])]
    batches = plan(desired, actual).batches()
    kinds = [(u.type, u.entity.WhichOneof("entity")) for batch in batches for u in batch]
    DEL, INS = p4r.Update.DELETE, p4r.Update.INSERT
    assert kinds == [
        (DEL, "table_entry"),
        (DEL, "action_profile_group"),
        (DEL, "action_profile_member"),
        (INS, "action_profile_member"),
        (INS, "action_profile_group"),
        (INS, "table_entry"),
    ]


def test_conflicting_desired_entities_are_refused():
    with pytest.raises(ValueError, match="share the key"):
        plan([route(b"\x0a\x00\x00\x00", 1), route(b"\x0a\x00\x00\x00", 2)], [])


def test_duplicate_identical_desired_entities_collapse():
    result = plan([route(b"\x0a\x00\x00\x00", 1), route(b"\x0a\x00\x00\x00", 1)], [])
    assert len(result.inserts) == 1


def meter(index: int, rate: int | None) -> p4r.Entity:
    entry = p4r.MeterEntry(meter_id=11, index=p4r.Index(index=index))
    if rate is not None:
        entry.config.CopyFrom(p4r.MeterConfig(cir=rate, cburst=rate // 4, pir=rate, pburst=rate // 4))
    return p4r.Entity(meter_entry=entry)


def test_a_configured_meter_cell_nobody_wants_is_reset_and_never_deleted():
    """A port that lost its role on a reload kept its ICMP meter: the cell is now reset to its default."""
    result = plan([meter(1, 50)], [meter(1, 50), meter(4, 50), meter(7, None)])
    assert result.deletes == [] and result.inserts == []
    assert result.modifies == [meter(4, None)]
    assert not result.modifies[0].meter_entry.HasField("config")
