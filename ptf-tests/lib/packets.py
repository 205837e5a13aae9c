"""Packet builders for the jumbogate PTF suite.

Sizes are IP sizes (the whole IP packet, header included), as MTUs are;
the Ethernet frame is 14 bytes (18 with a VLAN tag) longer.
"""

from __future__ import annotations

import struct

from scapy.layers.inet import ICMP, IP, TCP, UDP
from scapy.layers.inet6 import ICMPv6EchoRequest, ICMPv6PacketTooBig, IPv6
from scapy.layers.l2 import Dot1Q, Ether
from scapy.packet import Packet, Raw

HOST_MAC = "00:00:00:00:aa:01"  # the sender on any test port
ROUTER_MAC = "00:00:00:00:00:fe"  # the switch, as senders address it
NEXT_HOP_MAC = "00:00:00:00:bb:01"
GENEVE_PORT = 6081


def _pad_to(pkt: Packet, ip_size: int, l3) -> Packet:
    """Append payload bytes so that the IP packet is exactly ip_size bytes."""
    missing = ip_size - len(pkt[l3])
    if missing < 0:
        raise ValueError(f"headers alone are {len(pkt[l3])} bytes, more than {ip_size}")
    if missing:
        pkt = pkt / Raw(bytes((i * 7) & 0xFF for i in range(missing)))
    return Ether(bytes(pkt))


def ether(src=HOST_MAC, dst=ROUTER_MAC, vlan: int | None = None) -> Packet:
    frame = Ether(src=src, dst=dst)
    return frame / Dot1Q(vlan=vlan) if vlan is not None else frame


def l4(proto: str, sport: int, dport: int, flags="A", options=None) -> Packet:
    if proto == "tcp":
        return TCP(sport=sport, dport=dport, flags=flags, seq=1000, ack=1, options=options or [])
    if proto == "udp":
        return UDP(sport=sport, dport=dport)
    raise ValueError(proto)


def tcp_packet(src, dst, size=100, *, sport=40000, dport=80, flags="A", ttl=64, df=True, vlan=None, ip_options=b"", tcp_options=None, proto="tcp") -> Packet:
    """Ether/[VLAN]/IP or IPv6/TCP or UDP, `size` bytes of IP."""
    v6 = ":" in src
    if v6:
        ip = IPv6(src=src, dst=dst, hlim=ttl)
    else:
        ip = IP(src=src, dst=dst, ttl=ttl, flags="DF" if df else 0, id=1)
        if ip_options:
            ip.options = ip_options
    pkt = ether(vlan=vlan) / ip / l4(proto, sport, dport, flags, tcp_options)
    return _pad_to(pkt, size, IPv6 if v6 else IP)


def udp_packet(src, dst, size=100, **kw) -> Packet:
    return tcp_packet(src, dst, size, proto="udp", **kw)


def icmp_echo(src, dst, size=100) -> Packet:
    if ":" in src:
        pkt = ether() / IPv6(src=src, dst=dst) / ICMPv6EchoRequest(id=1, seq=1)
        return _pad_to(pkt, size, IPv6)
    pkt = ether() / IP(src=src, dst=dst, id=1, flags="DF") / ICMP(type=8, id=1, seq=1)
    return _pad_to(pkt, size, IP)


def geneve_header(option_words: int, vni=0x1234, protocol=0x6558) -> bytes:
    """Geneve base header plus `option_words` 4-byte words of options."""
    header = struct.pack("!BBH", option_words & 0x3F, 0, protocol) + struct.pack("!I", vni << 8)
    options = b""
    remaining = option_words
    while remaining:
        # Real options: class 0x0100, type 0x01, length up to 31 words.
        data_words = min(remaining - 1, 31)
        options += struct.pack("!HBB", 0x0100, 0x01, data_words) + bytes(4 * data_words)
        remaining -= 1 + data_words
    return header + options


def geneve_packet(
    outer_src, outer_dst, inner: Packet, *, option_words=0, entropy_port=50000, hop_limit=64, vlan=None, geneve_bytes: bytes | None = None
) -> Packet:
    """Ether/[VLAN]/IPv6/UDP 6081/Geneve/inner frame (inner is an Ether packet)."""
    body = (geneve_bytes if geneve_bytes is not None else geneve_header(option_words)) + bytes(inner)
    pkt = ether(vlan=vlan) / IPv6(src=outer_src, dst=outer_dst, hlim=hop_limit) / UDP(sport=entropy_port, dport=GENEVE_PORT) / Raw(body)
    return Ether(bytes(pkt))


def routed(pkt: Packet, src_mac: str, dst_mac: str) -> Packet:
    """What the switch sends for a routed packet: MACs rewritten, TTL - 1."""
    out = Ether(bytes(pkt))
    out[Ether].src = src_mac
    out[Ether].dst = dst_mac
    if IP in out and not out.haslayer(IPv6):
        out[IP].ttl -= 1
        del out[IP].chksum
    elif IPv6 in out:
        out[IPv6].hlim -= 1
    return Ether(bytes(out))


def ip_bytes(pkt: Packet) -> bytes:
    """The IP packet inside a frame (after Ethernet and any VLAN tag)."""
    layer = pkt[IPv6] if pkt.haslayer(IPv6) and not pkt.haslayer(IP) else pkt[IP]
    return bytes(layer)


def expected_icmp(original: Packet, mtu: int, signal_src: str | None = None) -> Packet:
    """The exact ICMP error the switch must send back for `original`.

    IPv4: "fragmentation needed" (type 3 code 4) quoting 548 bytes, total 576.
    IPv6: "packet too big" (type 2) quoting 1232 bytes, total 1280.
    signal_src defaults to the original destination address.
    """
    v6 = original.haslayer(IPv6)
    quoted = ip_bytes(original)
    eth = Ether(src=original[Ether].dst, dst=original[Ether].src)
    if original.haslayer(Dot1Q):
        eth = eth / Dot1Q(vlan=original[Dot1Q].vlan)
    if v6:
        ip = original[IPv6]
        reply = eth / IPv6(src=signal_src or ip.dst, dst=ip.src, hlim=64, tc=0, fl=0) / ICMPv6PacketTooBig(mtu=mtu) / Raw(quoted[:1232])
    else:
        ip = original[IP]
        reply = (
            eth / IP(src=signal_src or ip.dst, dst=ip.src, ttl=64, id=0, flags=0, tos=0) / ICMP(type=3, code=4, nexthopmtu=mtu, unused=0) / Raw(quoted[:548])
        )
    return Ether(bytes(reply))
