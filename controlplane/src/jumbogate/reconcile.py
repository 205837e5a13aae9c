"""Reconciliation: what to write so that the switch holds exactly what we want.

The controller never writes blindly. After every (re)connect it reads what the
switch holds, compares it with what the rack config and the runtime policy ask
for, and writes only the difference. An entry that did not change is not
touched, so a controller or switch restart causes no duplicate-entry errors
and no traffic hole.

The comparison works on P4Runtime `Entity` protobufs, so it does not depend
on which tables the P4 program has: an entity's *key* says which object it is
(table + match + priority, profile + member id, session id, ...), its *value*
is everything else minus what the switch fills in on read (counters, meter
counters, time since last hit).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from finsy.proto import p4r

# Write order matters in P4Runtime: a group refers to members and a table
# entry to groups, so insertions go members -> groups -> entries and
# deletions the other way round.
_KIND_ORDER = (
    "packet_replication_engine_entry",
    "digest_entry",
    "meter_entry",
    "action_profile_member",
    "action_profile_group",
    "table_entry",
)

# Objects that always exist on the switch: they can only be modified, never
# inserted or deleted (a table's default entry, an indirect meter cell).
_MODIFY_ONLY = {"meter_entry"}


def _kind(entity: p4r.Entity) -> str:
    kind = entity.WhichOneof("entity")
    if kind is None:
        raise ValueError("empty P4Runtime entity")
    return kind


def entity_key(entity: p4r.Entity) -> tuple:
    """What identifies the object on the switch, independent of its contents."""
    kind = _kind(entity)
    if kind == "table_entry":
        te = entity.table_entry
        if te.is_default_action:
            return (kind, te.table_id, "default")
        # Match fields have no defined order on the wire: sort them by id.
        match = tuple(sorted(m.SerializeToString(deterministic=True) for m in te.match))
        return (kind, te.table_id, match, te.priority)
    if kind == "action_profile_member":
        m = entity.action_profile_member
        return (kind, m.action_profile_id, m.member_id)
    if kind == "action_profile_group":
        g = entity.action_profile_group
        return (kind, g.action_profile_id, g.group_id)
    if kind == "meter_entry":
        m = entity.meter_entry
        return (kind, m.meter_id, m.index.index)
    if kind == "digest_entry":
        return (kind, entity.digest_entry.digest_id)
    if kind == "packet_replication_engine_entry":
        pre = entity.packet_replication_engine_entry
        which = pre.WhichOneof("type")
        if which == "clone_session_entry":
            return (kind, which, pre.clone_session_entry.session_id)
        return (kind, which, pre.multicast_group_entry.multicast_group_id)
    raise ValueError(f"reconciliation does not handle {kind} entities")


def entity_value(entity: p4r.Entity) -> bytes:
    """The object's contents, canonical and without what the switch fills in on read."""
    copy = p4r.Entity()
    copy.CopyFrom(entity)
    kind = _kind(copy)
    if kind == "table_entry":
        te = copy.table_entry
        for read_only in ("counter_data", "meter_counter_data", "time_since_last_hit"):
            te.ClearField(read_only)
        # Sort match fields so that order on the wire never looks like a change.
        fields = sorted(te.match, key=lambda m: m.field_id)
        del te.match[:]
        te.match.extend(fields)
    elif kind == "meter_entry":
        copy.meter_entry.ClearField("counter_data")
    elif kind == "action_profile_group":
        group = copy.action_profile_group
        # Group membership is a multiset: order is not meaningful, repetition is (weights).
        members = sorted(group.members, key=lambda m: (m.member_id, m.weight))
        del group.members[:]
        group.members.extend(members)
    elif kind == "packet_replication_engine_entry":
        pre = copy.packet_replication_engine_entry
        if pre.WhichOneof("type") == "clone_session_entry":
            replicas = sorted(pre.clone_session_entry.replicas, key=lambda r: r.SerializeToString(deterministic=True))
            del pre.clone_session_entry.replicas[:]
            pre.clone_session_entry.replicas.extend(replicas)
    return copy.SerializeToString(deterministic=True)


@dataclass
class Plan:
    """The writes that turn `actual` into `desired`, already in a safe order."""

    inserts: list[p4r.Entity] = field(default_factory=list)
    modifies: list[p4r.Entity] = field(default_factory=list)
    deletes: list[p4r.Entity] = field(default_factory=list)
    unchanged: int = 0

    @property
    def empty(self) -> bool:
        return not (self.inserts or self.modifies or self.deletes)

    def batches(self) -> list[list[p4r.Update]]:
        """Write requests to send in sequence: deletes (entries first), then inserts and modifies (members first)."""
        out: list[list[p4r.Update]] = []
        for kind in reversed(_KIND_ORDER):
            batch = [p4r.Update(type=p4r.Update.DELETE, entity=e) for e in self.deletes if _kind(e) == kind]
            if batch:
                out.append(batch)
        for kind in _KIND_ORDER:
            batch = [p4r.Update(type=p4r.Update.INSERT, entity=e) for e in self.inserts if _kind(e) == kind]
            batch += [p4r.Update(type=p4r.Update.MODIFY, entity=e) for e in self.modifies if _kind(e) == kind]
            if batch:
                out.append(batch)
        return out

    def summary(self) -> str:
        return f"{len(self.inserts)} to insert, {len(self.modifies)} to modify, {len(self.deletes)} to delete, {self.unchanged} unchanged"


def _modify_only(entity: p4r.Entity) -> bool:
    kind = _kind(entity)
    if kind in _MODIFY_ONLY:
        return True
    if kind == "table_entry" and entity.table_entry.is_default_action:
        return True
    # The switch always has a configuration for every digest; "insert" is how
    # it is first enabled, so treat it like any other writable object.
    return False


def plan(desired: Iterable[p4r.Entity], actual: Iterable[p4r.Entity], *, keep: set[tuple] | None = None) -> Plan:
    """Compare desired and actual entities.

    `keep` lists keys of actual objects that are not in `desired` but must not
    be deleted (e.g. entries another part of the controller owns).
    Modify-only objects (default entries, meter cells) are modified when they
    differ and never deleted; a configured meter cell nobody wants is reset.
    """
    wanted: dict[tuple, p4r.Entity] = {}
    for entity in desired:
        key = entity_key(entity)
        if key in wanted and entity_value(wanted[key]) != entity_value(entity):
            raise ValueError(f"two different desired entities share the key {key}")
        wanted[key] = entity
    present = {entity_key(e): e for e in actual}
    result = Plan()
    for key, entity in wanted.items():
        have = present.get(key)
        if have is None:
            (result.modifies if _modify_only(entity) else result.inserts).append(entity)
        elif entity_value(have) != entity_value(entity):
            result.modifies.append(entity)
        else:
            result.unchanged += 1
    for key, entity in present.items():
        if key in wanted or (keep and key in keep):
            continue
        if _modify_only(entity):
            reset = _reset(entity)
            if reset is not None:
                result.modifies.append(reset)
            continue
        result.deletes.append(entity)
    return result


def _reset(entity: p4r.Entity) -> p4r.Entity | None:
    """A meter cell configured but no longer wanted (its port lost its role), back to
    its default (no meter: every packet green); None for anything else."""
    if entity.WhichOneof("entity") != "meter_entry" or not entity.meter_entry.HasField("config"):
        return None
    reset = p4r.Entity()
    reset.CopyFrom(entity)
    reset.meter_entry.ClearField("config")
    reset.meter_entry.ClearField("counter_data")
    return reset
