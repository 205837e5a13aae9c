"""Fuzzing jumbogate-switch's Write path over real gRPC.

Hypothesis builds WriteRequests from the P4Info (right and wrong table,
field, action and parameter ids, byte strings of any length, every match
kind, priorities, default entries, members, groups, meters, counters, the
digest) and sends them to the real program. Every answer must be a
P4Runtime answer: OK, or one canonical error per update; never a crash,
never an internal error, and the switch still reads back what it holds.

`make test` runs a short pass with a fixed seed (JUMBOGATE_FUZZ_EXAMPLES,
default 300); a long run sets it higher (docs/switch.md has the figures).
"""

from __future__ import annotations

import os

import grpc
import pytest
from finsy.proto import p4r
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from switch_harness import Client, OnePortSwitch, p4info

INFO = p4info(512)
EXAMPLES = int(os.environ.get("JUMBOGATE_FUZZ_EXAMPLES", "300"))
# What an update may answer (P4Runtime 12.3); never UNKNOWN or INTERNAL.
CANONICAL = {0, 3, 5, 6, 7, 8, 9, 11, 12}

TABLE_IDS = [t.preamble.id for t in INFO.tables]
ACTION_IDS = [a.preamble.id for a in INFO.actions]
FIELD_IDS = sorted({f.id for t in INFO.tables for f in t.match_fields})
PROFILE_IDS = [p.preamble.id for p in INFO.action_profiles]
METER_IDS = [m.preamble.id for m in INFO.meters]
COUNTER_IDS = [c.preamble.id for c in INFO.counters]
DIGEST_IDS = [d.preamble.id for d in INFO.digests]


def ids(known: list[int]):
    """Mostly ids the P4Info has, sometimes any number."""
    return st.one_of(st.sampled_from(known), st.integers(0, 2**32 - 1))


values = st.one_of(st.binary(min_size=0, max_size=20), st.integers(0, 2**16).map(lambda n: n.to_bytes(3, "big")))


@st.composite
def field_matches(draw):
    field_id = draw(ids(FIELD_IDS))
    kind = draw(st.sampled_from(["exact", "lpm", "ternary", "range", "optional", "none"]))
    m = p4r.FieldMatch(field_id=field_id)
    if kind == "exact":
        m.exact.value = draw(values)
    elif kind == "lpm":
        m.lpm.value = draw(values)
        m.lpm.prefix_len = draw(st.integers(-2, 140))
    elif kind == "ternary":
        m.ternary.value = draw(values)
        m.ternary.mask = draw(values)
    elif kind == "range":
        m.range.low = draw(values)
        m.range.high = draw(values)
    elif kind == "optional":
        m.optional.value = draw(values)
    return m


@st.composite
def actions(draw):
    action = p4r.Action(action_id=draw(ids(ACTION_IDS)))
    for _ in range(draw(st.integers(0, 4))):
        action.params.add(param_id=draw(st.integers(0, 5)), value=draw(values))
    return action


@st.composite
def table_entries(draw):
    entry = p4r.TableEntry(table_id=draw(ids(TABLE_IDS)), match=draw(st.lists(field_matches(), max_size=7)))
    choice = draw(st.sampled_from(["action", "member", "group", "none"]))
    if choice == "action":
        entry.action.action.CopyFrom(draw(actions()))
    elif choice == "member":
        entry.action.action_profile_member_id = draw(st.integers(0, 200))
    elif choice == "group":
        entry.action.action_profile_group_id = draw(st.integers(0, 200))
    entry.priority = draw(st.sampled_from([0, 0, 1, 10, -1, 2**31 - 1]))
    entry.is_default_action = draw(st.booleans())
    entry.idle_timeout_ns = draw(st.sampled_from([0, 0, 1, 10**9, -5]))
    return p4r.Entity(table_entry=entry)


@st.composite
def other_entities(draw):
    kind = draw(st.sampled_from(["member", "group", "meter", "counter", "digest", "register", "empty"]))
    if kind == "member":
        return p4r.Entity(
            action_profile_member=p4r.ActionProfileMember(action_profile_id=draw(ids(PROFILE_IDS)), member_id=draw(st.integers(0, 200)), action=draw(actions()))
        )
    if kind == "group":
        group = p4r.ActionProfileGroup(action_profile_id=draw(ids(PROFILE_IDS)), group_id=draw(st.integers(0, 200)), max_size=draw(st.integers(-1, 100)))
        for member_id in draw(st.lists(st.integers(0, 200), max_size=5)):
            # Now and then a weight past the switch's bound (docs/switch.md, "Bounds").
            group.members.add(member_id=member_id, weight=draw(st.one_of(st.integers(-1, 4), st.integers(-1, 2**31 - 1))))
        return p4r.Entity(action_profile_group=group)
    if kind == "meter":
        meter = p4r.MeterEntry(meter_id=draw(ids(METER_IDS)))
        if draw(st.booleans()):
            meter.index.index = draw(st.integers(-3, 600))
        if draw(st.booleans()):
            meter.config.CopyFrom(
                p4r.MeterConfig(
                    cir=draw(st.integers(-1, 10**6)), cburst=draw(st.integers(-1, 100)), pir=draw(st.integers(-1, 10**6)), pburst=draw(st.integers(-1, 100))
                )
            )
        return p4r.Entity(meter_entry=meter)
    if kind == "counter":
        counter = p4r.CounterEntry(counter_id=draw(ids(COUNTER_IDS)))
        if draw(st.booleans()):
            counter.index.index = draw(st.integers(-3, 600))
        counter.data.packet_count = draw(st.integers(0, 10**9))
        return p4r.Entity(counter_entry=counter)
    if kind == "digest":
        digest = p4r.DigestEntry(digest_id=draw(ids(DIGEST_IDS)))
        digest.config.max_timeout_ns = draw(st.one_of(st.integers(-1, 10**9), st.integers(-1, 2**63 - 1)))
        digest.config.max_list_size = draw(st.one_of(st.integers(-1, 100), st.integers(-1, 2**31 - 1)))
        return p4r.Entity(digest_entry=digest)
    if kind == "register":
        return p4r.Entity(register_entry=p4r.RegisterEntry(register_id=draw(st.integers(0, 2**32 - 1))))
    return p4r.Entity()


updates = st.lists(
    st.builds(lambda kind, entity: p4r.Update(type=kind, entity=entity), st.sampled_from([0, 1, 1, 2, 3]), st.one_of(table_entries(), other_entities())),
    min_size=1,
    max_size=8,
)


@pytest.fixture(scope="module")
def fuzz_target(log_dir):
    wiring = OnePortSwitch(log_dir)
    client = Client(wiring.switch.grpc_address, election_low=1)
    client.arbitrate()
    client.set_pipeline(INFO)
    yield wiring, client
    client.close()
    wiring.close()


def test_any_write_gets_a_p4runtime_answer(fuzz_target):
    wiring, client = fuzz_target

    @settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None, suppress_health_check=list(HealthCheck))
    @given(batch=updates)
    def one_write(batch):
        codes = client.write(batch)
        assert len(codes) == len(batch)
        assert set(codes) <= CANONICAL, f"non-canonical answer {codes} to {batch}"
        assert wiring.switch.proc.poll() is None, f"the switch died:\n{wiring.switch.log()[-3000:]}"

    one_write()
    # Whatever the fuzzing left, the switch still reads it all back.
    held = client.read([p4r.Entity(table_entry=p4r.TableEntry()), p4r.Entity(action_profile_member=p4r.ActionProfileMember())])
    assert all(e.WhichOneof("entity") in ("table_entry", "action_profile_member") for e in held)
    with pytest.raises(grpc.RpcError) as caught:
        client.read([p4r.Entity(register_entry=p4r.RegisterEntry())])
    assert caught.value.code() == grpc.StatusCode.UNIMPLEMENTED
