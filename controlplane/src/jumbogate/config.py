"""The rack config (rack.yaml): schema, loader and validation.

The file describes one border: the switch's ports and what each one faces,
the routes and their ECMP next hops, the instances and their jumbo flags, the
MTUs, the merge services and the addresses of the switch and the SmartNIC.

Every rejection names the file, the field (as a path such as
``instances[1].jumbo``) and the reason, because an operator fixing a rack
config at 3 a.m. should not have to guess which of forty lines is wrong.
"""

from __future__ import annotations

import ipaddress
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from .p4.constants import ELEPHANT_EPOCH_LOG2_US
from .tls import TlsConfig
from .tofino import TARGETS, sketch_epoch_ms

# What jumbogate-nic holds (NIC_MAX_INTERNAL_PREFIXES).
MAX_SMARTNIC_INTERNAL_PREFIXES = 64

# The v1model switch's sketch epoch in milliseconds, rounded (2^20 us is 1048.576 ms).
SKETCH_EPOCH_MS = sketch_epoch_ms("v1model")

# Any IP MTU outside this range is a typo: 1280 is the IPv6 minimum link MTU,
# 9216 the largest frame common switch silicon accepts.
MTU_MIN = 1280
MTU_MAX = 9216

PORT_ROLES = ("external", "internal", "nic", "cpu")
TOO_DEEP_POLICIES = ("drop", "forward")

IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network
IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

_MAC_RE = re.compile(r"^[0-9a-f]{2}(:[0-9a-f]{2}){5}$")


class ConfigError(ValueError):
    """A rack config that cannot be used, with where and why."""

    def __init__(self, source: str, field_path: str, reason: str):
        self.source = source
        self.field = field_path
        self.reason = reason
        super().__init__(f"{source}: {field_path}: {reason}" if field_path else f"{source}: {reason}")


@dataclass(frozen=True)
class Port:
    port: int
    role: str
    name: str = ""


@dataclass(frozen=True)
class NextHop:
    port: int
    src_mac: str
    dst_mac: str
    # A member repeated `weight` times in the ECMP group gets that share of flows.
    weight: int = 1


@dataclass(frozen=True)
class Route:
    prefix: IPNetwork
    next_hops: tuple[NextHop, ...]


@dataclass(frozen=True)
class PathMtu:
    prefix: IPNetwork
    mtu: int


@dataclass(frozen=True)
class Instance:
    id: str
    addresses: tuple[IPAddress, ...]
    jumbo: bool


@dataclass(frozen=True)
class MergeService:
    prefix: IPNetwork
    port_lo: int
    port_hi: int


@dataclass(frozen=True)
class Mtus:
    # The rack underlay's MTU; encapsulated guest traffic must fit under it.
    internal: int = 9000
    # What a jumbo-enabled instance may send and receive.
    guest_jumbo: int = 8500
    # The Internet's IPv4 path MTU unless a path_mtus entry (or discovery)
    # says otherwise, and the MTU of an instance without jumbo.
    default_external: int = 1500
    # The Internet's IPv6 path MTU likewise: the IPv6 minimum unless the
    # operator knows the uplinks carry more, since IPv6 routers never
    # fragment and a guess too large black-holes where ICMPv6 is filtered.
    default_external_v6: int = 1280

    def default_path_mtu(self, ip_version: int) -> int:
        """The path MTU of a destination in no path_mtus prefix."""
        return self.default_external if ip_version == 4 else self.default_external_v6


@dataclass(frozen=True)
class Elephant:
    # Bytes per epoch after which the switch reports a flow as an elephant.
    threshold_bytes: int = 1_000_000
    # Epoch length of the switch's sketch, in milliseconds: fixed when the P4
    # program is compiled (2^ELEPHANT_EPOCH_LOG2_US us), so only that value
    # is accepted.
    epoch_ms: int = SKETCH_EPOCH_MS
    # Idle time after which an onloaded flow leaves the merge path.
    idle_timeout_s: int = 10
    # Most flows on the merge path at once, well below the switch's
    # merge_flows table (MERGE_FLOWS_TABLE_SIZE), so that the table never
    # fills: a full table would refuse the controller's writes.
    max_flows: int = 4096
    # Most elephants onloaded per sketch epoch; more are counted and left
    # on the bypass, so a flood of (fake) elephants cannot churn the table.
    max_onloads_per_epoch: int = 64


# Entries of the switch's merge_flows table (p4src/include/steering.p4);
# a test checks it against the committed P4Info.
MERGE_FLOWS_TABLE_SIZE = 16384
# At most this share of it is given to elephant.max_flows: flows being
# deleted and flows adopted after a restart need the rest.
MAX_MERGE_FLOWS = MERGE_FLOWS_TABLE_SIZE * 3 // 4
# Longest idle timeout an onloaded flow may ask for.
MAX_IDLE_TIMEOUT_S = 86_400


@dataclass(frozen=True)
class Switch:
    p4runtime: str = "127.0.0.1:9559"
    device_id: int = 1
    election_id: int = 10
    # Directory with the compiled program (jumbogate.json + jumbogate.p4info.txtpb;
    # for a Tofino, bf-p4c's output: docs/deploy.md).
    pipeline: str = ""
    # What the P4 program was compiled for: v1model (BMv2, jumbogate-switch),
    # tofino or tofino2 (the TNA top level; tofino.py says what changes).
    target: str = "v1model"
    # What to do with a packet whose headers run past the parser's depth budget.
    too_deep: str = "drop"
    # ICMP errors the switch may generate per second before its meter drops them.
    icmp_rate_pps: int = 100
    # Of those, what the packets of one source prefix (/24, /48) may
    # trigger: one sender cannot spend the whole port's budget.
    icmp_rate_per_source_pps: int = 10


@dataclass(frozen=True)
class RackConfig:
    source: str
    fleet_jumbo: bool
    mtu: Mtus
    switch: Switch
    ports: tuple[Port, ...]
    routes: tuple[Route, ...]
    path_mtus: tuple[PathMtu, ...]
    instances: tuple[Instance, ...]
    merge_services: tuple[MergeService, ...]
    elephant: Elephant
    smartnic_control: str
    controller_listen: str
    # The prefixes inside the rack, pushed to the SmartNIC (which tells
    # inbound from outbound by them); empty: it keeps its --internal-prefix.
    smartnic_internal_prefixes: tuple[IPNetwork, ...] = ()
    # HOST:PORT of the Prometheus endpoint (/metrics), or None: off.
    controller_metrics: str | None = None
    # Mutual TLS on every control channel (tls.py), or None: plaintext.
    tls: TlsConfig | None = None
    # Plaintext operator API and metrics allowed on a non-loopback address.
    controller_insecure: bool = False

    def port_by_number(self, number: int) -> Port | None:
        return next((p for p in self.ports if p.port == number), None)

    def ports_with_role(self, role: str) -> list[Port]:
        return [p for p in self.ports if p.role == role]

    def instance(self, instance_id: str) -> Instance | None:
        return next((i for i in self.instances if i.id == instance_id), None)

    def effective_mtu(self, instance: Instance, fleet_jumbo: bool | None = None) -> int:
        """The MTU the switch enforces for an instance: jumbo only if fleet AND instance say so."""
        fleet = self.fleet_jumbo if fleet_jumbo is None else fleet_jumbo
        return self.mtu.guest_jumbo if (fleet and instance.jumbo) else self.mtu.default_external


class _Reader:
    """Walks the parsed YAML, keeping the field path for error messages."""

    def __init__(self, source: str):
        self.source = source

    def fail(self, path: str, reason: str) -> ConfigError:
        return ConfigError(self.source, path, reason)

    def mapping(self, value: Any, path: str, allowed: set[str], required: set[str] = frozenset()) -> dict:
        if value is None:
            value = {}
        if not isinstance(value, dict):
            raise self.fail(path or "(top level)", f"expected a mapping, got {_kind(value)}")
        for key in value:
            if key not in allowed:
                known = ", ".join(sorted(allowed))
                raise self.fail(_join(path, str(key)), f"unknown field (known fields: {known})")
        for key in sorted(required):
            if key not in value:
                raise self.fail(_join(path, key), "is required")
        return value

    def sequence(self, value: Any, path: str) -> list:
        if value is None:
            return []
        if not isinstance(value, list):
            raise self.fail(path, f"expected a list, got {_kind(value)}")
        return value

    def boolean(self, value: Any, path: str) -> bool:
        if not isinstance(value, bool):
            raise self.fail(path, f"expected true or false, got {value!r}")
        return value

    def integer(self, value: Any, path: str, lo: int, hi: int) -> int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.fail(path, f"expected a whole number, got {value!r}")
        if not lo <= value <= hi:
            raise self.fail(path, f"{value} is outside {lo}..{hi}")
        return value

    def mtu(self, value: Any, path: str) -> int:
        if isinstance(value, int) and not isinstance(value, bool) and not MTU_MIN <= value <= MTU_MAX:
            raise self.fail(path, f"MTU {value} is outside {MTU_MIN}..{MTU_MAX}")
        return self.integer(value, path, MTU_MIN, MTU_MAX)

    def string(self, value: Any, path: str) -> str:
        if not isinstance(value, str) or not value:
            raise self.fail(path, f"expected a non-empty string, got {value!r}")
        return value

    def choice(self, value: Any, path: str, choices: tuple[str, ...]) -> str:
        if value not in choices:
            raise self.fail(path, f"{value!r} is not one of {', '.join(choices)}")
        return value

    def address(self, value: Any, path: str) -> IPAddress:
        try:
            return ipaddress.ip_address(str(value))
        except ValueError:
            raise self.fail(path, f"{value!r} is not an IPv4 or IPv6 address") from None

    def prefix(self, value: Any, path: str) -> IPNetwork:
        text = str(value)
        try:
            return ipaddress.ip_network(text, strict=True)
        except ValueError as err:
            if "host bits set" in str(err):
                raise self.fail(path, f"{text} has host bits set (did you mean {ipaddress.ip_network(text, strict=False)}?)") from None
            raise self.fail(path, f"{text!r} is not an IPv4 or IPv6 prefix") from None

    def mac(self, value: Any, path: str) -> str:
        text = str(value).lower()
        if not _MAC_RE.match(text):
            raise self.fail(path, f"{value!r} is not a MAC address like 02:00:00:00:00:01")
        return text

    def endpoint(self, value: Any, path: str) -> str:
        text = self.string(value, path)
        # A unix socket: its file's permissions guard it, and it reaches a
        # program in another network namespace on the same host.
        if text.startswith("unix:"):
            if not text.startswith("unix:/") or len(text) < len("unix:/x"):
                raise self.fail(path, f"{text!r} is not unix:/ABSOLUTE/PATH")
            return text
        host, sep, port = text.rpartition(":")
        if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise self.fail(path, f"{text!r} is not HOST:PORT or unix:/PATH")
        return text


def _sketch_epoch(r: _Reader, value: Any, target: str) -> int:
    # The switch counts bytes per epoch = timestamp >> ELEPHANT_EPOCH_LOG2_US:
    # a shift by a compile-time constant, because a switch ASIC shifts by
    # constants only. A different epoch needs the program recompiled; each
    # target's timestamp has its own unit (microseconds on v1model,
    # nanoseconds on a Tofino).
    epoch_ms = r.integer(value, "elephant.epoch_ms", 1, 60_000)
    fixed = sketch_epoch_ms(target)
    if epoch_ms != fixed:
        unit = f"2^{ELEPHANT_EPOCH_LOG2_US} us" if target == "v1model" else f"2^{ELEPHANT_EPOCH_LOG2_US + 10} ns"
        raise r.fail(
            "elephant.epoch_ms",
            f"{epoch_ms} is not the sketch epoch of a {target} switch, which is fixed when the P4 program is compiled: "
            f"{fixed} ms ({unit}, ELEPHANT_EPOCH_LOG2_US in p4src/include/defines.p4); leave epoch_ms out",
        )
    return epoch_ms


def _kind(value: Any) -> str:
    return type(value).__name__ if value is not None else "nothing"


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _reject_duplicates(reader: _Reader, items: list, key: Callable[[Any], Any], path: str, what: str) -> None:
    seen: dict[Any, int] = {}
    for index, item in enumerate(items):
        k = key(item)
        if k in seen:
            raise reader.fail(f"{path}[{index}]", f"{what} {k} is already used by {path}[{seen[k]}]")
        seen[k] = index


def _parse_ports(r: _Reader, raw: Any) -> tuple[Port, ...]:
    ports = []
    for i, item in enumerate(r.sequence(raw, "switch.ports")):
        path = f"switch.ports[{i}]"
        item = r.mapping(item, path, {"port", "role", "name"}, {"port", "role"})
        ports.append(
            Port(
                port=r.integer(item["port"], f"{path}.port", 0, 511),
                role=r.choice(item["role"], f"{path}.role", PORT_ROLES),
                name=str(item.get("name", "")),
            )
        )
    _reject_duplicates(r, ports, lambda p: p.port, "switch.ports", "port")
    if len([p for p in ports if p.role == "cpu"]) > 1:
        raise r.fail("switch.ports", "more than one port has role cpu")
    return tuple(ports)


def _parse_routes(r: _Reader, raw: Any, ports: tuple[Port, ...]) -> tuple[Route, ...]:
    by_number = {p.port: p for p in ports}
    routes = []
    for i, item in enumerate(r.sequence(raw, "routes")):
        path = f"routes[{i}]"
        item = r.mapping(item, path, {"prefix", "next_hops"}, {"prefix", "next_hops"})
        hops = []
        raw_hops = r.sequence(item["next_hops"], f"{path}.next_hops")
        if not raw_hops:
            raise r.fail(f"{path}.next_hops", "needs at least one next hop")
        for j, hop in enumerate(raw_hops):
            hop_path = f"{path}.next_hops[{j}]"
            hop = r.mapping(hop, hop_path, {"port", "src_mac", "dst_mac", "weight"}, {"port", "src_mac", "dst_mac"})
            number = r.integer(hop["port"], f"{hop_path}.port", 0, 511)
            port = by_number.get(number)
            if port is None:
                raise r.fail(f"{hop_path}.port", f"port {number} is not declared in switch.ports")
            if port.role not in ("external", "internal"):
                raise r.fail(f"{hop_path}.port", f"port {number} has role {port.role}; routes lead to external or internal ports")
            hops.append(
                NextHop(
                    port=number,
                    src_mac=r.mac(hop["src_mac"], f"{hop_path}.src_mac"),
                    dst_mac=r.mac(hop["dst_mac"], f"{hop_path}.dst_mac"),
                    weight=r.integer(hop.get("weight", 1), f"{hop_path}.weight", 1, 64),
                )
            )
        routes.append(Route(prefix=r.prefix(item["prefix"], f"{path}.prefix"), next_hops=tuple(hops)))
    # An LPM table holds nested prefixes by design (the longest wins); the same
    # prefix twice is a conflict the switch would refuse.
    _reject_duplicates(r, routes, lambda rt: rt.prefix, "routes", "prefix")
    return tuple(routes)


def _parse_path_mtus(r: _Reader, raw: Any) -> tuple[PathMtu, ...]:
    entries = []
    for i, item in enumerate(r.sequence(raw, "path_mtus")):
        path = f"path_mtus[{i}]"
        item = r.mapping(item, path, {"prefix", "mtu"}, {"prefix", "mtu"})
        entries.append(PathMtu(prefix=r.prefix(item["prefix"], f"{path}.prefix"), mtu=r.mtu(item["mtu"], f"{path}.mtu")))
    _reject_duplicates(r, entries, lambda e: e.prefix, "path_mtus", "prefix")
    return tuple(entries)


def _parse_instances(r: _Reader, raw: Any, fleet_jumbo: bool, fleet_rule: bool = True) -> tuple[Instance, ...]:
    instances = []
    for i, item in enumerate(r.sequence(raw, "instances")):
        path = f"instances[{i}]"
        item = r.mapping(item, path, {"id", "addresses", "jumbo"}, {"id", "addresses"})
        instance_id = r.string(item["id"], f"{path}.id")
        raw_addresses = r.sequence(item["addresses"], f"{path}.addresses")
        if not raw_addresses:
            raise r.fail(f"{path}.addresses", "needs at least one address")
        addresses = tuple(r.address(a, f"{path}.addresses[{j}]") for j, a in enumerate(raw_addresses))
        jumbo = r.boolean(item.get("jumbo", False), f"{path}.jumbo")
        if jumbo and not fleet_jumbo and fleet_rule:
            # Oxide's rule: the fleet flag gates every instance flag, so a
            # config that sets one without the other is a contradiction.
            raise r.fail(f"{path}.jumbo", f"instance {instance_id!r} is marked jumbo while fleet.jumbo is off; turn the fleet flag on first")
        instances.append(Instance(id=instance_id, addresses=addresses, jumbo=jumbo))
    _reject_duplicates(r, instances, lambda inst: inst.id, "instances", "id")
    owner: dict[IPAddress, str] = {}
    for i, inst in enumerate(instances):
        for j, addr in enumerate(inst.addresses):
            if addr in owner:
                raise r.fail(f"instances[{i}].addresses[{j}]", f"address {addr} already belongs to instance {owner[addr]!r}")
            owner[addr] = inst.id
    return tuple(instances)


def _parse_port_range(r: _Reader, value: Any, path: str) -> tuple[int, int]:
    if isinstance(value, int) and not isinstance(value, bool):
        port = r.integer(value, path, 1, 65535)
        return port, port
    text = str(value)
    if text.strip().isdigit():  # one port written as a string, e.g. "443"
        port = r.integer(int(text), path, 1, 65535)
        return port, port
    lo_text, sep, hi_text = text.partition("-")
    if not sep or not lo_text.strip().isdigit() or not hi_text.strip().isdigit():
        raise r.fail(path, f"{value!r} is not a TCP port or a range like 5201-5210")
    lo = r.integer(int(lo_text), path, 1, 65535)
    hi = r.integer(int(hi_text), path, 1, 65535)
    if lo > hi:
        raise r.fail(path, f"range {text} runs backwards")
    return lo, hi


def _parse_merge_services(r: _Reader, raw: Any) -> tuple[MergeService, ...]:
    services: list[MergeService] = []
    for i, item in enumerate(r.sequence(raw, "merge_services")):
        path = f"merge_services[{i}]"
        item = r.mapping(item, path, {"prefix", "ports"}, {"prefix", "ports"})
        prefix = r.prefix(item["prefix"], f"{path}.prefix")
        lo, hi = _parse_port_range(r, item["ports"], f"{path}.ports")
        service = MergeService(prefix=prefix, port_lo=lo, port_hi=hi)
        # merge_services is a ternary/range table: two rules that can match the
        # same packet would make the outcome depend on priorities nobody set.
        for j, other in enumerate(services):
            if other.prefix.version == prefix.version and other.prefix.overlaps(prefix) and lo <= other.port_hi and other.port_lo <= hi:
                raise r.fail(path, f"{prefix} ports {lo}-{hi} overlaps merge_services[{j}] ({other.prefix} ports {other.port_lo}-{other.port_hi})")
        services.append(service)
    return tuple(services)


_TOP_FIELDS = {"fleet", "mtu", "switch", "routes", "path_mtus", "instances", "merge_services", "elephant", "smartnic", "controller", "tls"}


def _relative_to(path: str, base: Path | None) -> str:
    """A file name of the config, relative to the config file's directory (as tls.* are): under systemd the
    working directory is not the checkout's."""
    if not path or base is None or Path(path).is_absolute():
        return path
    return os.path.normpath(base / path)


def _parse_tls(r: _Reader, raw: Any, base: Path | None) -> TlsConfig | None:
    """The tls section; relative paths are taken from the config file's directory."""
    if raw is None:
        return None
    tls = r.mapping(raw, "tls", {"ca", "cert", "key", "roles"}, {"ca", "cert", "key", "roles"})
    files = {}
    for name in ("ca", "cert", "key"):
        path = Path(r.string(tls[name], f"tls.{name}"))
        if not path.is_absolute() and base is not None:
            path = base / path
        if not path.is_file():
            raise r.fail(f"tls.{name}", f"{path} is not a readable file")
        files[name] = path
    roles = r.mapping(tls["roles"], "tls.roles", {"admin", "read_only"}, {"admin"})
    names = {}
    for role in ("admin", "read_only"):
        listed = [r.string(v, f"tls.roles.{role}[{i}]") for i, v in enumerate(r.sequence(roles.get(role, []), f"tls.roles.{role}"))]
        names[role] = frozenset(listed)
    if not names["admin"]:
        raise r.fail("tls.roles.admin", "lists no certificate name: no client could change anything")
    both = names["admin"] & names["read_only"]
    if both:
        raise r.fail("tls.roles", f"{', '.join(sorted(both))} listed as both admin and read_only")
    return TlsConfig(ca=files["ca"], cert=files["cert"], key=files["key"], admins=names["admin"], read_only=names["read_only"])


def parse_config(data: Any, source: str = "<config>", base: Path | None = None, *, fleet_rule: bool = True) -> RackConfig:
    """Validate parsed YAML and build a RackConfig, or raise ConfigError.

    `base`: the directory relative file names (switch.pipeline, tls.*) are taken from.
    `fleet_rule`: refuse an instance marked jumbo while fleet.jumbo is off.
    A file written by hand that says so contradicts itself; a document from
    the store (or exported from it) may say so, since turning the fleet
    flag off keeps every instance's own flag for when it comes back on.
    """
    r = _Reader(source)
    top = r.mapping(data, "", _TOP_FIELDS, {"switch"})

    fleet = r.mapping(top.get("fleet"), "fleet", {"jumbo"})
    fleet_jumbo = r.boolean(fleet.get("jumbo", False), "fleet.jumbo")

    raw_mtu = r.mapping(top.get("mtu"), "mtu", {"internal", "guest_jumbo", "default_external", "default_external_v6"})
    defaults = Mtus()
    mtu = Mtus(
        internal=r.mtu(raw_mtu.get("internal", defaults.internal), "mtu.internal"),
        guest_jumbo=r.mtu(raw_mtu.get("guest_jumbo", defaults.guest_jumbo), "mtu.guest_jumbo"),
        default_external=r.mtu(raw_mtu.get("default_external", defaults.default_external), "mtu.default_external"),
        default_external_v6=r.mtu(raw_mtu.get("default_external_v6", defaults.default_external_v6), "mtu.default_external_v6"),
    )
    if mtu.guest_jumbo > mtu.internal:
        raise r.fail(
            "mtu.guest_jumbo",
            f"{mtu.guest_jumbo} does not fit under mtu.internal {mtu.internal} (the underlay must carry the guest packet plus its encapsulation)",
        )
    for name in ("default_external", "default_external_v6"):
        if getattr(mtu, name) > mtu.guest_jumbo:
            raise r.fail(f"mtu.{name}", f"{getattr(mtu, name)} is larger than mtu.guest_jumbo {mtu.guest_jumbo}")

    raw_switch = r.mapping(
        top["switch"],
        "switch",
        {"p4runtime", "device_id", "election_id", "pipeline", "target", "too_deep", "icmp_rate_pps", "icmp_rate_per_source_pps", "ports"},
        {"ports"},
    )
    sw_defaults = Switch()
    switch = Switch(
        p4runtime=r.endpoint(raw_switch.get("p4runtime", sw_defaults.p4runtime), "switch.p4runtime"),
        device_id=r.integer(raw_switch.get("device_id", sw_defaults.device_id), "switch.device_id", 0, 2**63 - 1),
        election_id=r.integer(raw_switch.get("election_id", sw_defaults.election_id), "switch.election_id", 1, 2**63 - 1),
        pipeline=_relative_to(str(raw_switch.get("pipeline", sw_defaults.pipeline)), base),
        target=r.choice(raw_switch.get("target", sw_defaults.target), "switch.target", TARGETS),
        too_deep=r.choice(raw_switch.get("too_deep", sw_defaults.too_deep), "switch.too_deep", TOO_DEEP_POLICIES),
        icmp_rate_pps=r.integer(raw_switch.get("icmp_rate_pps", sw_defaults.icmp_rate_pps), "switch.icmp_rate_pps", 1, 1_000_000),
        icmp_rate_per_source_pps=r.integer(
            raw_switch.get("icmp_rate_per_source_pps", sw_defaults.icmp_rate_per_source_pps),
            "switch.icmp_rate_per_source_pps",
            1,
            1_000_000,
        ),
    )
    ports = _parse_ports(r, raw_switch["ports"])
    if not ports:
        raise r.fail("switch.ports", "needs at least one port")

    raw_elephant = r.mapping(top.get("elephant"), "elephant", {"threshold_bytes", "epoch_ms", "idle_timeout_s", "max_flows", "max_onloads_per_epoch"})
    el_defaults = Elephant()
    elephant = Elephant(
        threshold_bytes=r.integer(raw_elephant.get("threshold_bytes", el_defaults.threshold_bytes), "elephant.threshold_bytes", 1, 2**32 - 1),
        epoch_ms=_sketch_epoch(r, raw_elephant.get("epoch_ms", sketch_epoch_ms(switch.target)), switch.target),
        idle_timeout_s=r.integer(raw_elephant.get("idle_timeout_s", el_defaults.idle_timeout_s), "elephant.idle_timeout_s", 1, MAX_IDLE_TIMEOUT_S),
        max_flows=r.integer(raw_elephant.get("max_flows", el_defaults.max_flows), "elephant.max_flows", 1, MAX_MERGE_FLOWS),
        max_onloads_per_epoch=r.integer(
            raw_elephant.get("max_onloads_per_epoch", el_defaults.max_onloads_per_epoch), "elephant.max_onloads_per_epoch", 1, 100_000
        ),
    )

    smartnic = r.mapping(top.get("smartnic"), "smartnic", {"control", "internal_prefixes"})
    internal_prefixes = tuple(
        r.prefix(value, f"smartnic.internal_prefixes[{i}]")
        for i, value in enumerate(r.sequence(smartnic.get("internal_prefixes", []), "smartnic.internal_prefixes"))
    )
    if len(internal_prefixes) > MAX_SMARTNIC_INTERNAL_PREFIXES:
        raise r.fail("smartnic.internal_prefixes", f"{len(internal_prefixes)} prefixes; the SmartNIC takes at most {MAX_SMARTNIC_INTERNAL_PREFIXES}")
    controller = r.mapping(top.get("controller"), "controller", {"listen", "metrics", "insecure"})

    path_mtus = _parse_path_mtus(r, top.get("path_mtus"))
    for i, entry in enumerate(path_mtus):
        if entry.mtu > mtu.internal:
            raise r.fail(f"path_mtus[{i}].mtu", f"{entry.mtu} is above mtu.internal {mtu.internal}: no path through this border can carry it")

    return RackConfig(
        source=source,
        fleet_jumbo=fleet_jumbo,
        mtu=mtu,
        switch=switch,
        ports=ports,
        routes=_parse_routes(r, top.get("routes"), ports),
        path_mtus=path_mtus,
        instances=_parse_instances(r, top.get("instances"), fleet_jumbo, fleet_rule),
        merge_services=_parse_merge_services(r, top.get("merge_services")),
        elephant=elephant,
        smartnic_control=r.endpoint(smartnic.get("control", "127.0.0.1:50061"), "smartnic.control"),
        smartnic_internal_prefixes=internal_prefixes,
        controller_listen=r.endpoint(controller.get("listen", "127.0.0.1:50051"), "controller.listen"),
        controller_metrics=r.endpoint(controller["metrics"], "controller.metrics") if controller.get("metrics") is not None else None,
        tls=_parse_tls(r, top.get("tls"), base),
        controller_insecure=r.boolean(controller.get("insecure", False), "controller.insecure"),
    )


def load_config(path: str | Path) -> RackConfig:
    """Read and validate a rack.yaml file, or raise ConfigError naming file, field and reason."""
    source = str(path)
    try:
        text = Path(path).read_text()
    except OSError as err:
        raise ConfigError(source, "", f"cannot read: {err.strerror}") from None
    return parse_config(load_yaml(text, source), source, Path(path).parent)


def load_yaml(text: str, source: str) -> Any:
    """Parsed YAML, or ConfigError naming the line and column of the fault."""
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}" if mark else "somewhere"
        problem = getattr(err, "problem", None) or str(err)
        raise ConfigError(source, "", f"not valid YAML at {where}: {problem}") from None
    return data


# Values a running controller cannot take on a reload: where it connects,
# what it serves and how it secures it. Changing them needs a restart.
_RESTART_ONLY = {
    "switch.p4runtime": lambda c: c.switch.p4runtime,
    "switch.device_id": lambda c: c.switch.device_id,
    "switch.election_id": lambda c: c.switch.election_id,
    "switch.pipeline": lambda c: c.switch.pipeline,
    "switch.target": lambda c: c.switch.target,
    "smartnic.control": lambda c: c.smartnic_control,
    "controller.listen": lambda c: c.controller_listen,
    "controller.metrics": lambda c: c.controller_metrics,
    "controller.insecure": lambda c: c.controller_insecure,
    "tls": lambda c: c.tls,
}
# Values a reload applies: the switch's tables and meters, the SmartNIC's
# configuration and path MTUs, and the controller's admission limits.
_RELOADABLE = {
    "fleet.jumbo": lambda c: c.fleet_jumbo,
    "mtu": lambda c: c.mtu,
    "switch.too_deep": lambda c: c.switch.too_deep,
    "switch.icmp_rate_pps": lambda c: c.switch.icmp_rate_pps,
    "switch.icmp_rate_per_source_pps": lambda c: c.switch.icmp_rate_per_source_pps,
    "switch.ports": lambda c: c.ports,
    "routes": lambda c: c.routes,
    "path_mtus": lambda c: c.path_mtus,
    "instances": lambda c: c.instances,
    "merge_services": lambda c: c.merge_services,
    "elephant": lambda c: c.elephant,
    "smartnic.internal_prefixes": lambda c: c.smartnic_internal_prefixes,
}


def config_changes(old: RackConfig, new: RackConfig) -> tuple[list[str], list[str]]:
    """(fields a reload applies that differ, fields that differ but need a restart)."""
    applied = [name for name, value in _RELOADABLE.items() if value(old) != value(new)]
    restart = [name for name, value in _RESTART_ONLY.items() if value(old) != value(new)]
    return applied, restart
