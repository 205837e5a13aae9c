"""Building test frames and reading them back, with Scapy.

Segments look like a Linux sender's: DF set and IP IDs counting up, since
the engine (like GRO) merges only segments whose IDs it can rebuild.
"""

from __future__ import annotations

import struct

from scapy.layers.inet import IP, TCP, UDP
from scapy.layers.inet6 import IPv6
from scapy.layers.l2 import Ether

SWITCH_MAC = "02:00:00:00:00:01"
NIC_MAC = "02:00:00:00:00:02"
CARAVAN_DSCP = 43
CARAVAN_MAGIC = 0x4A43


def internet_checksum(data: bytes) -> int:
    """The ones' complement sum of IP, TCP, UDP and ICMP (RFC 1071), of data padded to whole 16-bit words."""
    if len(data) % 2:
        data += b"\0"
    total = sum(struct.unpack(f"!{len(data) // 2}H", data))
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return ~total & 0xFFFF


def pattern(offset: int, length: int) -> bytes:
    """Payload bytes that differ with their stream offset, so a misplaced
    byte shows up."""
    return bytes((offset + i) * 7 % 251 for i in range(length))


def ip_layer(src: str, dst: str, ident: int, **fields):
    if ":" in src:
        return IPv6(src=src, dst=dst, **fields)
    return IP(src=src, dst=dst, id=ident & 0xFFFF, flags="DF", **fields)


def tcp_segments(src: str, dst: str, sport: int, dport: int, count: int, size: int = 1448, seq: int = 1000, flags: str = "A") -> list[bytes]:
    frames = []
    for i in range(count):
        frame = (
            Ether(src=SWITCH_MAC, dst=NIC_MAC)
            / ip_layer(src, dst, 100 + i)
            / TCP(sport=sport, dport=dport, flags=flags, seq=seq + i * size, ack=1, window=502)
            / pattern(i * size, size)
        )
        frames.append(bytes(frame))
    return frames


def tcp_packet(src: str, dst: str, sport: int, dport: int, size: int, seq: int = 5000) -> bytes:
    return bytes(
        Ether(src=SWITCH_MAC, dst=NIC_MAC) / ip_layer(src, dst, 7) / TCP(sport=sport, dport=dport, flags="PA", seq=seq, ack=1, window=502) / pattern(0, size)
    )


def parse(frame: bytes):
    return Ether(frame)


def l3(packet):
    return packet[IP] if IP in packet else packet[IPv6]


def ip_length(packet) -> int:
    layer = l3(packet)
    return layer.len if isinstance(layer, IP) else 40 + layer.plen


def tcp_frames_of(frames: list[bytes], sport: int) -> list:
    packets = [parse(f) for f in frames]
    return [p for p in packets if TCP in p and p[TCP].sport == sport]


def stream_of(packets: list, seq0: int) -> bytes:
    """The byte stream the TCP segments carry, checking they tile it
    without gaps or overlaps."""
    data = b""
    expected = seq0
    for packet in sorted(packets, key=lambda p: p[TCP].seq):
        assert packet[TCP].seq == expected, f"gap or overlap at seq {packet[TCP].seq}, expected {expected}"
        payload = bytes(packet[TCP].payload)
        data += payload
        expected += len(payload)
    return data


def udp_datagram(src: str, dst: str, sport: int, dport: int, payload: bytes, ident: int, tos: int = 0) -> bytes:
    if ":" in src:
        layer = IPv6(src=src, dst=dst, tc=tos)
    else:
        layer = IP(src=src, dst=dst, id=ident, flags="DF", tos=tos)
    return bytes(Ether(src=SWITCH_MAC, dst=NIC_MAC) / layer / UDP(sport=sport, dport=dport) / payload)


def decode_caravan(packet) -> tuple[int, list[tuple[int, int, bytes]]]:
    """Independent reader of the caravan wire format of engine.h:
    header (magic, version, count, original TOS, reserved), then count
    records (payload length, IPv4 ID, UDP checksum), then the payloads."""
    body = bytes(packet[UDP].payload)
    magic, version, count, original_tos, _reserved = struct.unpack_from("!HBBBB", body, 0)
    assert magic == CARAVAN_MAGIC and version == 1, f"not a caravan: magic {magic:#x} version {version}"
    records = [struct.unpack_from("!HHH", body, 6 + 6 * i) for i in range(count)]
    offset = 6 + 6 * count
    datagrams = []
    for length, ident, checksum in records:
        datagrams.append((ident, checksum, body[offset : offset + length]))
        offset += length
    assert offset == len(body), "caravan payloads do not fill the packet"
    return original_tos, datagrams


def encode_caravan(datagrams: list[bytes]) -> bytes:
    """A caravan carrying these datagrams (all of one IPv4 flow), built from
    the wire format alone; sent outbound it must come apart into them."""
    packets = [Ether(d) for d in datagrams]
    first = packets[0]
    header = struct.pack("!HBBBB", CARAVAN_MAGIC, 1, len(packets), first[IP].tos, 0)
    records = b"".join(struct.pack("!HHH", len(p[UDP].payload), p[IP].id, p[UDP].chksum) for p in packets)
    payloads = b"".join(bytes(p[UDP].payload) for p in packets)
    caravan = (
        Ether(src=SWITCH_MAC, dst=NIC_MAC)
        / IP(src=first[IP].src, dst=first[IP].dst, id=first[IP].id, flags="DF", tos=CARAVAN_DSCP << 2)
        / UDP(sport=first[UDP].sport, dport=first[UDP].dport)
        / (header + records + payloads)
    )
    return bytes(caravan)
