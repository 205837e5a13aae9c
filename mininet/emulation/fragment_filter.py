"""A wire that drops IPv4 fragments: frames pass between two interfaces
unchanged, except IPv4 packets with MF set or a fragment offset, which are
counted and dropped (as some firewalls and routers do). The two-rack
emulation puts it on one WAN path; this kernel has neither netfilter nor a
tc drop action to do it in the kernel.

    python3 fragment_filter.py IFACE_A IFACE_B

Prints one JSON line of counts when it ends (SIGTERM).
"""

from __future__ import annotations

import json
import select
import signal
import socket
import sys

ETH_P_ALL = 0x0003
PACKET_OUTGOING = 4
ETHERTYPE_IPV4 = b"\x08\x00"


def is_ipv4_fragment(frame: bytes) -> bool:
    if len(frame) < 14 + 20 or frame[12:14] != ETHERTYPE_IPV4:
        return False
    flags_offset = int.from_bytes(frame[20:22], "big")
    return bool(flags_offset & 0x2000 or flags_offset & 0x1FFF)


def main(a: str, b: str) -> int:
    sockets = {}
    for name in (a, b):
        sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
        sock.bind((name, 0))
        sockets[name] = sock
    other = {sockets[a]: sockets[b], sockets[b]: sockets[a]}
    counts = {"passed": 0, "fragments_dropped": 0}
    running = True

    def stop(_signum, _frame):
        nonlocal running
        running = False

    signal.signal(signal.SIGTERM, stop)
    while running:
        try:
            ready, _, _ = select.select(list(other), [], [], 0.5)
        except InterruptedError:
            continue
        for sock in ready:
            frame, address = sock.recvfrom(65535)
            if address[2] == PACKET_OUTGOING:
                continue
            if is_ipv4_fragment(frame):
                counts["fragments_dropped"] += 1
                continue
            try:
                other[sock].send(frame)
                counts["passed"] += 1
            except OSError:
                counts["send_failed"] = counts.get("send_failed", 0) + 1
    print(json.dumps(counts), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
