"""Rack config + policy -> switch entities, and the reconciliation plan over them."""

import ipaddress
from pathlib import Path

import finsy as fy
import pytest
import yaml

from jumbogate import translate
from jumbogate.config import load_config, parse_config
from jumbogate.flow import FiveTuple
from jumbogate.p4 import PortRole, names
from jumbogate.reconcile import plan
from jumbogate.state import FlowOrigin, LearnedPath, PolicyState

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "controlplane" / "rack.example.yaml"


@pytest.fixture
def state() -> PolicyState:
    return PolicyState.from_config(load_config(EXAMPLE))


def tables(entities, table: str) -> list[fy.P4TableEntry]:
    return [e for e in entities if isinstance(e, fy.P4TableEntry) and e.table_id == table]


def default_action(entities, table: str) -> fy.P4TableAction:
    (entry,) = tables(entities, table)
    assert entry.is_default_action
    return entry.action


FLOW = FiveTuple.parse("203.0.113.7", "10.10.0.10", 6, 40000, 5201)


def test_port_roles_skip_the_cpu_port(state):
    roles = {e.match["ingress_port"]: e.action.args["role"] for e in tables(translate.desired_entities(state, nic_up=True), names.PORT_ROLES)}
    assert roles == {1: PortRole.EXTERNAL, 2: PortRole.EXTERNAL, 3: PortRole.INTERNAL, 4: PortRole.INTERNAL, 5: PortRole.NIC}


def test_instances_and_fleet_follow_the_policy(state):
    entities = translate.desired_entities(state, nic_up=True)
    assert default_action(entities, names.FLEET_POLICY).args["enabled"] == 1
    v4 = {str(e.match["instance_addr"]): e.action.args["enabled"] for e in tables(entities, names.INSTANCES_V4)}
    v6 = {str(e.match["instance_addr"]): e.action.args["enabled"] for e in tables(entities, names.INSTANCES_V6)}
    assert v4 == {"10.10.0.10": 1, "10.10.0.20": 0} and v6 == {"fd00:10::10": 1, "fd00:10::20": 0}
    state.set_fleet(False)
    assert default_action(translate.desired_entities(state, nic_up=True), names.FLEET_POLICY).args["enabled"] == 0


def test_routes_get_one_ecmp_group_each_with_weights_as_repeated_members(state):
    entities = translate.desired_entities(state, nic_up=True)
    routes = tables(entities, names.ROUTES_V4) + tables(entities, names.ROUTES_V6)
    assert len(routes) == len(state.config.routes)
    groups = [e for e in entities if isinstance(e, fy.P4ActionProfileGroup)]
    members = [e for e in entities if isinstance(e, fy.P4ActionProfileMember)]
    default_group = next(g for g in groups if g.group_id == 1)
    assert len(default_group.members) == 2
    assert len(members) == sum(len(r.next_hops) for r in state.config.routes)


def test_weighted_next_hop_is_repeated():
    cfg_text = EXAMPLE.read_text().replace('dst_mac: "02:00:00:00:a0:01"}', 'dst_mac: "02:00:00:00:a0:01", weight: 3}', 1)
    state = PolicyState.from_config(parse_config(yaml.safe_load(cfg_text), "rack.yaml"))
    group = next(e for e in translate.desired_entities(state, nic_up=True) if isinstance(e, fy.P4ActionProfileGroup) and e.group_id == 1)
    assert len(group.members) == 4


def test_path_mtus_include_defaults_for_both_families(state):
    entities = translate.desired_entities(state, nic_up=True)
    v4 = {str(e.match["dst_addr"]): e.action.args["mtu"] for e in tables(entities, names.PATH_MTU_V4)}
    v6 = {str(e.match["dst_addr"]): e.action.args["mtu"] for e in tables(entities, names.PATH_MTU_V6)}
    assert v4 == {"198.51.100.0/24": 1400, "0.0.0.0/0": 1500}
    # Unless the rack says otherwise, IPv6 paths get IPv6's minimum MTU.
    assert v6 == {"::/0": 1280}


def test_the_default_path_mtus_are_the_racks():
    raw = yaml.safe_load(EXAMPLE.read_text())
    raw["mtu"] = {"internal": 9000, "guest_jumbo": 8000, "default_external": 1400, "default_external_v6": 1492}
    raw["path_mtus"] = []
    entities = translate.desired_entities(PolicyState.from_config(parse_config(raw)), nic_up=True)
    assert {str(e.match["dst_addr"]): e.action.args["mtu"] for e in tables(entities, names.PATH_MTU_V4)} == {"0.0.0.0/0": 1400}
    assert {str(e.match["dst_addr"]): e.action.args["mtu"] for e in tables(entities, names.PATH_MTU_V6)} == {"::/0": 1492}


def test_nic_down_removes_every_merge_path_entry(state):
    state.onload(FLOW, FlowOrigin.ELEPHANT)
    up = translate.desired_entities(state, nic_up=True)
    assert default_action(up, names.NIC_PORT).args["port"] == 5
    assert len(tables(up, names.MERGE_FLOWS)) == 1 and len(tables(up, names.MERGE_SERVICES)) == 1
    down = translate.desired_entities(state, nic_up=False)
    assert default_action(down, names.NIC_PORT).name == names.NO_NIC_PORT
    assert tables(down, names.MERGE_FLOWS) == [] and tables(down, names.MERGE_SERVICES) == []


def test_merge_flow_round_trips_through_its_table_entry(state):
    state.onload(FLOW, FlowOrigin.OPERATOR, idle_timeout_s=7)
    (entry,) = tables(translate.desired_entities(state, nic_up=True), names.MERGE_FLOWS)
    assert entry.idle_timeout_ns == 7_000_000_000
    assert translate.merge_flow_tuple(entry) == FLOW
    v6 = FiveTuple.parse("2001:db8::7", "fd00:10::10", 6, 1, 2)
    assert translate.merge_flow_tuple(translate.p4.entries.merge_flow(v6)) == v6


def test_desired_state_is_deterministic(state):
    assert translate.desired_entities(state, nic_up=True) == translate.desired_entities(state, nic_up=True)


def compiled_p4info() -> Path:
    # Committed (p4src/compiled); test_p4_compiled.py checks it against p4c.
    return ROOT / "p4src" / "compiled" / "depth512" / "jumbogate.p4info.txtpb"


def test_every_entity_encodes_against_the_compiled_p4info_and_reconciles_to_nothing(state):
    schema = fy.P4Schema(compiled_p4info())
    state.onload(FLOW, FlowOrigin.ELEPHANT)
    encoded = [e.encode(schema) for e in translate.desired_entities(state, nic_up=True)]
    first = plan(encoded, [])
    assert not first.deletes and first.inserts
    # Once written, the same desired state plans nothing; a fleet flip plans exactly one modify.
    assert plan(encoded, encoded).empty
    state.set_fleet(False)
    changed = [e.encode(schema) for e in translate.desired_entities(state, nic_up=True)]
    result = plan(changed, encoded)
    # The fleet default entry changes; instances keep their own flags; the flow leaves the merge path.
    assert (len(result.modifies), len(result.deletes), len(result.inserts)) == (1, 1, 0), result.summary()


def test_the_rack_mtus_become_the_fleet_entry():
    raw = yaml.safe_load(EXAMPLE.read_text())
    raw["mtu"] = {"internal": 9000, "guest_jumbo": 8000, "default_external": 1400}
    raw["path_mtus"] = []
    state = PolicyState.from_config(parse_config(raw))
    args = default_action(translate.desired_entities(state, nic_up=True), names.FLEET_POLICY).args
    assert args == {"enabled": 1, "guest_jumbo_mtu": 8000, "default_mtu": 1400}


def learned(address: str, mtu: int, at: float = 100.0) -> LearnedPath:
    return LearnedPath(address=ipaddress.ip_address(address), mtu=mtu, method="fragments", learned_at=at)


def test_learned_path_mtus_become_host_entries_and_an_operators_own_entry_wins(state):
    explicit = state.config.path_mtus[0]
    host = next(explicit.prefix.hosts())
    state.update_learned_paths([learned("198.18.0.9", 4996), learned("2001:db8:77::1", 9100), learned(str(host), 9000)])
    if explicit.prefix.prefixlen == explicit.prefix.max_prefixlen:
        pytest.skip("the example's first path_mtus entry is a host")
    mtus = {e.match["dst_addr"]: e.action.args["mtu"] for e in tables(translate.desired_entities(state, nic_up=True), names.PATH_MTU_V4)}
    mtus.update({e.match["dst_addr"]: e.action.args["mtu"] for e in tables(translate.desired_entities(state, nic_up=True), names.PATH_MTU_V6)})
    assert mtus[ipaddress.ip_network("198.18.0.9/32")] == 4996
    # Never above what the rack's underlay carries.
    assert mtus[ipaddress.ip_network("2001:db8:77::1/128")] == state.config.mtu.internal
    assert mtus[explicit.prefix] == explicit.mtu
    assert mtus[ipaddress.ip_network(f"{host}/{host.max_prefixlen}")] == 9000


def test_learned_paths_are_bounded_newest_first_and_left_out_once(state):
    paths = [learned(f"198.18.{i // 250}.{i % 250 + 1}", 4000, at=float(i)) for i in range(10)]
    before = state.version
    state.update_learned_paths(paths, limit=4)
    assert sorted(str(a) for a in state.learned_paths) == sorted(str(p.address) for p in paths[6:])
    assert state.learned_paths_evicted == 6 and state.version > before
    # The same view again: nothing new left out, nothing to write.
    version = state.version
    state.update_learned_paths(paths, limit=4)
    assert state.learned_paths_evicted == 6 and state.version == version
    # A path the SmartNIC forgot leaves the switch too.
    state.update_learned_paths(paths[7:], limit=4)
    assert len(state.learned_paths) == 3 and state.version > version
