"""The 5-tuple of a TCP or UDP flow: one type for the policy, the API and the switch entries.

Flows arrive from hostile places (operator requests, the switch's digests,
entries read back from a switch another client may have written), so the
only way to build one from outside values is `FiveTuple.parse`, which says
what is wrong instead of building a flow the data plane cannot hold.
"""

from __future__ import annotations

import functools
import ipaddress
from dataclasses import dataclass

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

TCP = 6
UDP = 17


class FlowError(ValueError):
    """A 5-tuple that names no flow the border can merge (the message says why)."""


@functools.total_ordering
@dataclass(frozen=True)
class FiveTuple:
    src_ip: IPAddress
    dst_ip: IPAddress
    src_port: int
    dst_port: int
    protocol: int = TCP

    def __post_init__(self) -> None:
        # Addresses given as text become address objects, so that equal flows
        # compare and hash equal whichever way they were written.
        for name in ("src_ip", "dst_ip"):
            value = getattr(self, name)
            if not isinstance(value, (ipaddress.IPv4Address, ipaddress.IPv6Address)):
                object.__setattr__(self, name, ipaddress.ip_address(value))
        if self.src_ip.version != self.dst_ip.version:
            raise FlowError(f"src_ip {self.src_ip} and dst_ip {self.dst_ip} are of different IP versions")

    @classmethod
    def parse(cls, src_ip: object, dst_ip: object, protocol: int, src_port: int, dst_port: int) -> FiveTuple:
        """Build from untrusted values, raising FlowError with the field and the reason."""
        addresses = []
        for name, value in (("src_ip", src_ip), ("dst_ip", dst_ip)):
            try:
                address = ipaddress.ip_address(value)
            except ValueError:
                raise FlowError(f"{name} {value!r} is not an IPv4 or IPv6 address") from None
            # A zone (fe80::1%eth0) names a link of this host, nothing a
            # packet carries: the switch and the SmartNIC would key another flow.
            if getattr(address, "scope_id", None):
                raise FlowError(f"{name} {value!r} has a zone, which no packet carries")
            addresses.append(address)
        if protocol not in (TCP, UDP):
            raise FlowError(f"protocol {protocol} is neither TCP (6) nor UDP (17)")
        # Port 0 is reserved: no real endpoint sends from or to it, so such a
        # flow is forged and is never worth a table entry.
        for name, port in (("src_port", src_port), ("dst_port", dst_port)):
            if not 0 < port < 65536:
                raise FlowError(f"{name} {port} is outside 1..65535")
        return cls(addresses[0], addresses[1], src_port, dst_port, protocol)

    @property
    def ip_version(self) -> int:
        return self.src_ip.version

    def sort_key(self) -> tuple[int, int, int, int, int, int]:
        # IPv4 and IPv6 addresses do not compare with each other: order by
        # family first, so that a mix of flows sorts (IPv4 before IPv6).
        return (self.src_ip.version, int(self.src_ip), int(self.dst_ip), self.protocol, self.src_port, self.dst_port)

    def __lt__(self, other: FiveTuple) -> bool:
        if not isinstance(other, FiveTuple):
            return NotImplemented
        return self.sort_key() < other.sort_key()

    def __str__(self) -> str:
        proto = {TCP: "tcp", UDP: "udp"}.get(self.protocol, str(self.protocol))
        fmt = (lambda a, p: f"[{a}]:{p}") if self.src_ip.version == 6 else (lambda a, p: f"{a}:{p}")
        return f"{proto} {fmt(self.src_ip, self.src_port)} -> {fmt(self.dst_ip, self.dst_port)}"
