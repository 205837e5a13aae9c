"""From rack config + runtime policy to the entities the switch must hold.

`desired_entities` is a pure function: the same policy state always gives
the same entities, which is what lets reconciliation compare it with what the
switch holds and write only the difference.
"""

from __future__ import annotations

import ipaddress

import finsy as fy

from . import p4, tofino
from .flow import FiveTuple, FlowError
from .p4 import names
from .p4.constants import ICMP_SOURCE_METER_SIZE
from .state import PolicyState

# Tables whose default entry the controller sets (reconciliation reads these
# explicitly: a wildcard read does not return default entries).
MANAGED_DEFAULTS = (names.NIC_PORT, names.DEPTH_POLICY, names.FLEET_POLICY, names.ELEPHANT_CONFIG, names.SIGNAL_SOURCE)

_ROLES = {"external": p4.PortRole.EXTERNAL, "internal": p4.PortRole.INTERNAL, "nic": p4.PortRole.NIC}

# Routes and instances of both families get a catch-all path MTU so that
# the rack config's defaults, not the program's built-in ones, apply.
_DEFAULT_PREFIXES = (ipaddress.ip_network("0.0.0.0/0"), ipaddress.ip_network("::/0"))


def merge_flow_tuple(entry: fy.P4TableEntry) -> FiveTuple:
    """The flow of a `merge_flows` entry read back from the switch.

    Raises ValueError (FlowError) for an entry that names no mergeable flow:
    another client may have written it.
    """
    match = entry.match or {}
    version = int(match.get("ip_version", 0))
    if version not in (4, 6):
        raise FlowError(f"merge_flows entry with ip_version {version}")
    make = ipaddress.IPv4Address if version == 4 else ipaddress.IPv6Address
    return FiveTuple.parse(make(int(match["src_addr"])), make(int(match["dst_addr"])), int(match["protocol"]), int(match["src_port"]), int(match["dst_port"]))


def icmp_burst(rate_pps: int) -> int:
    # A quarter second of burst: a short flurry of real PMTU signals gets
    # through, a sustained flood is held to the configured rate.
    return max(1, rate_pps // 4)


def desired_entities(state: PolicyState, *, nic_up: bool) -> list[fy.P4Entity]:
    """Everything the switch should hold for this policy, members before groups before entries."""
    cfg = state.config
    out: list[fy.P4Entity] = []

    for port in cfg.ports:
        if port.role in _ROLES:
            out.append(p4.entries.port_role(port.port, _ROLES[port.role]))
            out.append(p4.entries.icmp_meter(port.port, cfg.switch.icmp_rate_pps, icmp_burst(cfg.switch.icmp_rate_pps)))
    if cfg.switch.target != "v1model":
        # On a Tofino the signal is a truncated mirrored copy: a clone session per port with a role.
        out.extend(tofino.signal_sessions([port.port for port in cfg.ports if port.role in _ROLES], cfg.switch.target))

    # Without a reachable SmartNIC nothing is steered to it: traffic bypasses
    # the merge path instead of being black-holed on a dead port.
    nic_ports = cfg.ports_with_role("nic")
    steer = nic_up and bool(nic_ports)
    out.append(p4.entries.nic_port(nic_ports[0].port if steer else None))
    out.append(p4.entries.depth_policy(forward=cfg.switch.too_deep == "forward"))
    out.append(p4.entries.fleet_flag(state.fleet_jumbo, cfg.mtu.guest_jumbo, cfg.mtu.default_external))
    out.append(p4.entries.elephant_threshold(cfg.elephant.threshold_bytes))
    source_rate = cfg.switch.icmp_rate_per_source_pps
    out.extend(p4.entries.icmp_source_meter(cell, source_rate, icmp_burst(source_rate)) for cell in range(ICMP_SOURCE_METER_SIZE))
    out.append(p4.entries.signal_source(None, None))

    for instance in cfg.instances:
        for address in instance.addresses:
            out.append(p4.entries.instance_policy(address, state.instance_jumbo[instance.id]))

    explicit = {entry.prefix for entry in cfg.path_mtus}
    for entry in cfg.path_mtus:
        out.append(p4.entries.path_mtu(entry.prefix, entry.mtu))
    for prefix in _DEFAULT_PREFIXES:
        if prefix not in explicit:
            out.append(p4.entries.path_mtu(prefix, cfg.mtu.default_path_mtu(prefix.version)))
    # What path MTU discovery learned, as host entries, so that the switch's
    # oversize decision and the SmartNIC's split size agree; an operator's
    # entry for the very same host wins.
    for path in sorted(state.learned_paths.values(), key=lambda p: (p.address.version, p.address)):
        host = ipaddress.ip_network(path.address)
        if host not in explicit:
            out.append(p4.entries.path_mtu(host, min(path.mtu, cfg.mtu.internal)))

    for group_id, route in enumerate(cfg.routes, start=1):
        hops = [p4.NextHop(port=h.port, src_mac=h.src_mac, dst_mac=h.dst_mac) for h in route.next_hops]
        out.extend(p4.entries.ecmp_group(group_id, hops, [h.weight for h in route.next_hops]))
        out.append(p4.entries.route(route.prefix, group_id))

    if steer:
        for priority, service in enumerate(cfg.merge_services, start=1):
            out.append(p4.entries.merge_service(service.prefix, service.port_lo, service.port_hi, priority=priority))
        for record in sorted(state.flows.values(), key=lambda r: r.flow):
            out.append(p4.entries.merge_flow(record.flow, record.idle_timeout_s * 1_000_000_000))
    return out


def meter_queries(state: PolicyState) -> list[fy.P4MeterEntry]:
    """Reads of the meter cells `desired_entities` configures, and of those it may have
    configured before (a port that lost its role on a reload keeps its meter until reset)."""
    return [fy.P4MeterEntry(names.ICMP_SIGNAL_METER), fy.P4MeterEntry(names.ICMP_SOURCE_METER)]


def digest_config() -> fy.P4DigestEntry:
    return p4.entries.elephant_digest()
