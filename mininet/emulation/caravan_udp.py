"""A UDP sender and a receiver that unpacks caravans, run inside Mininet hosts by `make value` (rack_value.py).

    python3 -m emulation.caravan_udp receive PORT SECONDS     # prints one JSON line when done
    python3 -m emulation.caravan_udp send HOST PORT SPORT SECONDS MBIT_S SIZE BURST

The receiver is what an application on a caravan-aware instance does: one
recvmsg per packet, and a packet marked with the caravan code point (DSCP
43, read from the IP header through IP_RECVTOS) whose payload starts with
the caravan magic is taken apart into the datagrams it carries (docs/engine.md,
"UDP caravan"), each handed to the application as one message. A plain
datagram is one message. It counts messages and their payload bytes, which
is the goodput; the caravans' own headers are not.

The sender sends datagrams of SIZE payload bytes from a fixed source port
(so the flow can be onloaded), in bursts of BURST back to back, paced to
MBIT_S: the SmartNIC packs only what arrives together.
"""

from __future__ import annotations

import json
import socket
import struct
import sys
import time

CARAVAN_DSCP = 43
CARAVAN_MAGIC = 0x4A43
HEADER = struct.Struct("!HBBBB")
RECORD = struct.Struct("!HHH")
BUFFER = 16384


def unpack(view: memoryview, length: int) -> tuple[int, int]:
    """(messages, payload bytes) of one caravan; (0, 0) when it does not check out (a real receiver drops it whole)."""
    if length < HEADER.size:
        return 0, 0
    magic, version, count, _tos, _reserved = HEADER.unpack_from(view, 0)
    if magic != CARAVAN_MAGIC or version != 1 or count == 0:
        return 0, 0
    offset = HEADER.size + RECORD.size * count
    total = 0
    for i in range(count):
        size = RECORD.unpack_from(view, HEADER.size + RECORD.size * i)[0]
        # Each datagram's payload is view[offset:offset + size]: what the application would get.
        offset += size
        total += size
    if offset != length:
        return 0, 0
    return count, total


def receive(port: int, seconds: float) -> dict:
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
    sock.setsockopt(socket.IPPROTO_IP, socket.IP_RECVTOS, 1)
    sock.bind(("0.0.0.0", port))
    sock.settimeout(0.2)
    print("listening", flush=True)
    buffer = bytearray(BUFFER)
    view = memoryview(buffer)
    ancillary = socket.CMSG_SPACE(4)
    stats = {"packets": 0, "caravans": 0, "messages": 0, "bytes": 0, "largest": 0, "malformed": 0, "first": 0.0, "last": 0.0}
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            length, cmsgs, _flags, _addr = sock.recvmsg_into([buffer], ancillary)
        except TimeoutError:
            continue
        now = time.monotonic()
        if not stats["packets"]:
            stats["first"] = now
        stats["last"] = now
        stats["packets"] += 1
        stats["largest"] = max(stats["largest"], length)
        tos = cmsgs[0][2][0] if cmsgs else 0
        if tos >> 2 == CARAVAN_DSCP:
            messages, size = unpack(view, length)
            if not messages:
                stats["malformed"] += 1
                continue
            stats["caravans"] += 1
            stats["messages"] += messages
            stats["bytes"] += size
        else:
            stats["messages"] += 1
            stats["bytes"] += length
    sock.close()
    return stats


def send(host: str, port: int, sport: int, seconds: float, mbit_s: float, size: int, burst: int) -> dict:
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind(("0.0.0.0", sport))
    sock.connect((host, port))
    payload = bytes(size)
    interval = burst * size * 8 / (mbit_s * 1e6)
    sent = 0
    start = time.monotonic()
    next_burst = start
    while (now := time.monotonic()) < start + seconds:
        if now < next_burst:
            time.sleep(next_burst - now)
        for _ in range(burst):
            try:
                sock.send(payload)
                sent += 1
            except OSError:
                break  # a full queue: the next burst tries again
        next_burst += interval
    return {"sent": sent, "bytes": sent * size, "seconds": time.monotonic() - start}


def main(argv: list[str]) -> int:
    if argv[:1] == ["receive"] and len(argv) == 3:
        print(json.dumps(receive(int(argv[1]), float(argv[2]))), flush=True)
        return 0
    if argv[:1] == ["send"] and len(argv) == 8:
        host, port, sport, seconds, mbit_s, size, burst = argv[1:]
        print(json.dumps(send(host, int(port), int(sport), float(seconds), float(mbit_s), int(size), int(burst))), flush=True)
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
