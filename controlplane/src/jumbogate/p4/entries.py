"""Build finsy P4Runtime entities for the jumbogate data plane from plain values.

Every function returns entities; none talks to a switch. Entities marked
"default entry" configure a keyless table's default action and must be
written with MODIFY (`switch.modify(...)` or `~entity`); the others are
inserted (`switch.insert(...)` or `+entity`). Functions returning a list give
the entities in the order they must be inserted (members before groups
before the table entry that points at the group).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence
from dataclasses import dataclass

import finsy as fy

from ..flow import FiveTuple, FlowError
from . import names
from .constants import MEMBERS_PER_GROUP, MTU_JUMBO, MTU_STANDARD, PortRole

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network


def _addr(value: str | IPAddress) -> IPAddress:
    return value if isinstance(value, (ipaddress.IPv4Address, ipaddress.IPv6Address)) else ipaddress.ip_address(value)


def _net(value: str | IPNetwork) -> IPNetwork:
    return value if isinstance(value, (ipaddress.IPv4Network, ipaddress.IPv6Network)) else ipaddress.ip_network(value, strict=True)


def _mac(value: str | int) -> int:
    if isinstance(value, int):
        return value
    return int(value.replace(":", "").replace("-", ""), 16)


@dataclass(frozen=True)
class NextHop:
    """Where a routed packet goes: egress port and the MAC rewrite."""

    port: int
    src_mac: str | int
    dst_mac: str | int


# -- ports and switch-wide settings -------------------------------------------------


def port_role(port: int, role: PortRole) -> fy.P4TableEntry:
    return fy.P4TableEntry(
        names.PORT_ROLES,
        match=fy.P4TableMatch(ingress_port=port),
        action=fy.P4TableAction(names.SET_PORT_ROLE, role=int(role)),
    )


def nic_port(port: int | None) -> fy.P4TableEntry:
    """Default entry: the SmartNIC's port (None: no NIC, nothing is steered)."""
    action = fy.P4TableAction(names.NO_NIC_PORT) if port is None else fy.P4TableAction(names.SET_NIC_PORT, port=port)
    return fy.P4TableEntry(names.NIC_PORT, action=action, is_default_action=True)


def depth_policy(forward: bool) -> fy.P4TableEntry:
    """Default entry: forward too-deep packets on their outer headers, or drop them."""
    action = names.FORWARD_TOO_DEEP if forward else names.DROP_TOO_DEEP
    return fy.P4TableEntry(names.DEPTH_POLICY, action=fy.P4TableAction(action), is_default_action=True)


def fleet_flag(on: bool, guest_jumbo_mtu: int = MTU_JUMBO, default_mtu: int = MTU_STANDARD) -> fy.P4TableEntry:
    """Default entry: the fleet-wide jumbo switch, and the two MTUs an instance may have."""
    for name, mtu in (("guest_jumbo_mtu", guest_jumbo_mtu), ("default_mtu", default_mtu)):
        if not 576 <= mtu <= 0xFFFF:
            raise ValueError(f"{name} {mtu} is outside 576..65535")
    return fy.P4TableEntry(
        names.FLEET_POLICY,
        action=fy.P4TableAction(names.SET_FLEET_JUMBO, enabled=int(on), guest_jumbo_mtu=guest_jumbo_mtu, default_mtu=default_mtu),
        is_default_action=True,
    )


def elephant_threshold(bytes_per_epoch: int) -> fy.P4TableEntry:
    """Default entry: bytes per epoch above which a flow is reported; 0 disables."""
    if not 0 <= bytes_per_epoch < 2**32:
        raise ValueError(f"threshold out of range: {bytes_per_epoch}")
    return fy.P4TableEntry(
        names.ELEPHANT_CONFIG,
        action=fy.P4TableAction(names.SET_ELEPHANT_THRESHOLD, bytes=bytes_per_epoch),
        is_default_action=True,
    )


def signal_source(ipv4: str | IPAddress | None, ipv6: str | IPAddress | None) -> fy.P4TableEntry:
    """Default entry: source addresses of generated ICMP errors.

    With None for both, errors come from the offending packet's destination.
    """
    if ipv4 is None and ipv6 is None:
        action = fy.P4TableAction(names.SIGNAL_FROM_ORIGINAL_DESTINATION)
    else:
        action = fy.P4TableAction(
            names.SET_SIGNAL_SOURCE,
            ipv4=_addr(ipv4 or "0.0.0.0"),
            ipv6=_addr(ipv6 or "::"),
        )
    return fy.P4TableEntry(names.SIGNAL_SOURCE, action=action, is_default_action=True)


# -- jumbo policy ---------------------------------------------------------------------


def instance_policy(addr: str | IPAddress, jumbo: bool) -> fy.P4TableEntry:
    address = _addr(addr)
    table = names.INSTANCES_V4 if address.version == 4 else names.INSTANCES_V6
    return fy.P4TableEntry(
        table,
        match=fy.P4TableMatch(instance_addr=address),
        action=fy.P4TableAction(names.SET_INSTANCE_JUMBO, enabled=int(jumbo)),
    )


def path_mtu(prefix: str | IPNetwork, mtu: int) -> fy.P4TableEntry:
    network = _net(prefix)
    minimum = 576 if network.version == 4 else 1280
    if not minimum <= mtu <= 0xFFFF:
        # Below these the ICMP quote would be longer than the packet.
        raise ValueError(f"path MTU {mtu} below the IPv{network.version} minimum {minimum}")
    table = names.PATH_MTU_V4 if network.version == 4 else names.PATH_MTU_V6
    return fy.P4TableEntry(
        table,
        match=fy.P4TableMatch(dst_addr=network),
        action=fy.P4TableAction(names.SET_PATH_MTU, mtu=mtu),
    )


# -- routing and ECMP -----------------------------------------------------------------


def route(prefix: str | IPNetwork, group_id: int) -> fy.P4TableEntry:
    network = _net(prefix)
    table = names.ROUTES_V4 if network.version == 4 else names.ROUTES_V6
    return fy.P4TableEntry(
        table,
        match=fy.P4TableMatch(dst_addr=network),
        action=fy.P4TableAction(names.SET_NEXT_HOP_GROUP, group_id=group_id),
    )


def member_ids(group_id: int, count: int) -> list[int]:
    """Action-profile member ids owned by one next-hop group."""
    if count > MEMBERS_PER_GROUP:
        raise ValueError(f"at most {MEMBERS_PER_GROUP} members per group, got {count}")
    base = group_id * MEMBERS_PER_GROUP
    return [base + i for i in range(count)]


def ecmp_group(
    group_id: int,
    next_hops: Sequence[NextHop],
    weights: Sequence[int] | None = None,
) -> list[fy.P4Entity]:
    """A next-hop group: members, the action-profile group, and its next_hops entry.

    A weight of N repeats that next hop as N members (the selector picks
    members uniformly), which is how BMv2 and Tofino both do weighted ECMP.
    Ids: the action-profile group id equals `group_id`, members are
    `member_ids(group_id, ...)`.
    """
    if not next_hops:
        raise ValueError("a next-hop group needs at least one next hop")
    weights = list(weights) if weights is not None else [1] * len(next_hops)
    if len(weights) != len(next_hops) or any(w < 1 for w in weights):
        raise ValueError("one positive weight per next hop")
    expanded = [hop for hop, weight in zip(next_hops, weights, strict=True) for _ in range(weight)]
    ids = member_ids(group_id, len(expanded))
    members: list[fy.P4Entity] = [
        fy.P4ActionProfileMember(
            names.ECMP_SELECTOR,
            member_id=member_id,
            action=fy.P4TableAction(
                names.SET_NEXT_HOP,
                port=hop.port,
                src_mac=_mac(hop.src_mac),
                dst_mac=_mac(hop.dst_mac),
            ),
        )
        for member_id, hop in zip(ids, expanded, strict=True)
    ]
    group = fy.P4ActionProfileGroup(
        names.ECMP_SELECTOR,
        group_id=group_id,
        max_size=MEMBERS_PER_GROUP,
        members=[fy.P4Member(member_id, weight=1) for member_id in ids],
    )
    entry = fy.P4TableEntry(
        names.NEXT_HOPS,
        match=fy.P4TableMatch(group_id=group_id),
        action=fy.P4IndirectAction(group_id=group_id),
    )
    return [*members, group, entry]


# -- steering -------------------------------------------------------------------------


def _flow_addr(value: str | IPAddress) -> int:
    # Flow addresses are 128 bits wide in the data plane; IPv4 is zero-extended.
    return int(_addr(value))


def merge_flow(flow: FiveTuple, idle_timeout_ns: int = 0) -> fy.P4TableEntry:
    """A flow onloaded to the merge path; the switch reports it idle after the timeout."""
    return fy.P4TableEntry(
        names.MERGE_FLOWS,
        match=fy.P4TableMatch(
            ip_version=flow.ip_version,
            src_addr=_flow_addr(flow.src_ip),
            dst_addr=_flow_addr(flow.dst_ip),
            protocol=flow.protocol,
            src_port=flow.src_port,
            dst_port=flow.dst_port,
        ),
        action=fy.P4TableAction(names.STEER_MERGE_FLOW),
        idle_timeout_ns=idle_timeout_ns,
    )


def merge_service(prefix: str | IPNetwork, port_lo: int, port_hi: int, priority: int = 10) -> fy.P4TableEntry:
    """Opt a service (destination prefix, TCP port range) into the merge path."""
    network = _net(prefix)
    if not 0 <= port_lo <= port_hi <= 0xFFFF:
        raise ValueError(f"bad port range {port_lo}..{port_hi}")
    mask = int(network.netmask)
    match = fy.P4TableMatch(
        ip_version=network.version,
        dst_addr=(int(network.network_address), mask),
        dst_port=(port_lo, port_hi),
    )
    if mask == 0:
        del match["dst_addr"]  # a wildcard is expressed by omitting the field
    if (port_lo, port_hi) == (0, 0xFFFF):
        del match["dst_port"]
    return fy.P4TableEntry(
        names.MERGE_SERVICES,
        match=match,
        action=fy.P4TableAction(names.STEER_MERGE_SERVICE),
        priority=priority,
    )


# -- ICMP meter and elephant digest -------------------------------------------------


def icmp_meter(port: int, packets_per_second: int, burst_packets: int) -> fy.P4MeterEntry:
    """Rate limit for ICMP errors triggered by packets from `port`."""
    if packets_per_second < 1 or burst_packets < 1:
        raise ValueError("rate and burst must be positive")
    config = fy.P4MeterConfig(
        cir=packets_per_second,
        cburst=burst_packets,
        pir=packets_per_second,
        pburst=burst_packets,
    )
    return fy.P4MeterEntry(names.ICMP_SIGNAL_METER, index=port, config=config)


def icmp_source_meter(cell: int, packets_per_second: int, burst_packets: int) -> fy.P4MeterEntry:
    """Rate limit for ICMP errors triggered by the sources that hash to `cell`
    (by /24 or /48 prefix, icmp_signal.p4)."""
    if packets_per_second < 1 or burst_packets < 1:
        raise ValueError("rate and burst must be positive")
    config = fy.P4MeterConfig(cir=packets_per_second, cburst=burst_packets, pir=packets_per_second, pburst=burst_packets)
    return fy.P4MeterEntry(names.ICMP_SOURCE_METER, index=cell, config=config)


def icmp_meter_reset(port: int) -> fy.P4MeterEntry:
    """Back to the unconfigured meter (never red). Write with MODIFY."""
    return fy.P4MeterEntry(names.ICMP_SIGNAL_METER, index=port)


def icmp_source_meter_reset(cell: int) -> fy.P4MeterEntry:
    """Back to the unconfigured source cell (never red). Write with MODIFY."""
    return fy.P4MeterEntry(names.ICMP_SOURCE_METER, index=cell)


def elephant_digest(max_timeout_ns: int = 1_000_000, max_list_size: int = 1, ack_timeout_ns: int = 0) -> fy.P4DigestEntry:
    """Enable elephant digests (insert once at start-up)."""
    return fy.P4DigestEntry(
        names.ELEPHANT_DIGEST,
        max_timeout_ns=max_timeout_ns,
        max_list_size=max_list_size,
        ack_timeout_ns=ack_timeout_ns,
    )


@dataclass(frozen=True)
class ElephantReport:
    flow: FiveTuple
    estimated_bytes: int


def _unflow_addr(ip_version: int, value: int) -> IPAddress:
    return ipaddress.IPv4Address(value) if ip_version == 4 else ipaddress.IPv6Address(value)


def decode_elephant_digest(data: dict) -> ElephantReport:
    """One item of a P4DigestList for `elephant_digest_t`.

    Raises FlowError for a flow no endpoint could send (port 0, a protocol
    other than TCP or UDP): a sketch counts whatever arrives, forged or not.
    """
    version = int(data["ip_version"])
    if version not in (4, 6):
        raise FlowError(f"ip_version {version} is neither 4 nor 6")
    flow = FiveTuple.parse(
        _unflow_addr(version, int(data["src_addr"])),
        _unflow_addr(version, int(data["dst_addr"])),
        int(data["protocol"]),
        int(data["src_port"]),
        int(data["dst_port"]),
    )
    return ElephantReport(flow=flow, estimated_bytes=int(data["estimated_bytes"]))
