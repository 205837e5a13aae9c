"""Send a file over one TCP connection and check it arrived whole: `serve` and `send`, run inside Mininet hosts.

python3 -m emulation.transfer serve PORT OUTFILE   # prints "<bytes> <sha256>" after the sender closes
python3 -m emulation.transfer send HOST PORT FILE [MBIT_S]  # prints "<bytes> <sha256>" of what it sent;
                                                       # MBIT_S paces the sender (for a transfer that lasts)
python3 -m emulation.transfer stream-serve PORT        # like serve, keeping nothing, and printing
                                                       # "progress <monotonic s> <bytes>" every 0.1 s
python3 -m emulation.transfer stream-send HOST PORT SECONDS MBIT_S SEED
                                                       # sends seeded random bytes for SECONDS at MBIT_S
(the soak's transfers: they last as long as the soak, and their progress shows every outage)
"""

from __future__ import annotations

import hashlib
import socket
import sys
import time

CHUNK = 1 << 16


def accept_one(port: int) -> socket.socket:
    """One connection on PORT, IPv4 or IPv6 (dual-stack: IPv4 clients arrive as ::ffff:a.b.c.d)."""
    with socket.socket(socket.AF_INET6, socket.SOCK_STREAM) as listener:
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
        listener.bind(("::", port))
        listener.listen(1)
        print("listening", flush=True)
        conn, _ = listener.accept()
    return conn


def serve(port: int, outfile: str) -> str:
    digest, total = hashlib.sha256(), 0
    with accept_one(port) as conn, open(outfile, "wb") as out:
        while chunk := conn.recv(CHUNK):
            digest.update(chunk)
            out.write(chunk)
            total += len(chunk)
    return f"{total} {digest.hexdigest()}"


def stream_serve(port: int) -> str:
    digest, total, reported = hashlib.sha256(), 0, 0.0
    with accept_one(port) as conn:
        # A short timeout, so that progress is printed while nothing arrives too.
        conn.settimeout(0.1)
        while True:
            try:
                chunk = conn.recv(CHUNK)
            except TimeoutError:
                chunk = None
            if chunk == b"":
                break
            if chunk:
                digest.update(chunk)
                total += len(chunk)
            now = time.monotonic()
            if now - reported >= 0.1:
                print(f"progress {now:.3f} {total}", flush=True)
                reported = now
    return f"{total} {digest.hexdigest()}"


def stream_send(host: str, port: int, seconds: float, rate_mbps: float, seed: int) -> str:
    import random

    source = random.Random(seed)
    digest, total = hashlib.sha256(), 0
    start = time.monotonic()
    with socket.create_connection((host, port), timeout=30) as conn:
        conn.settimeout(None)
        while time.monotonic() - start < seconds:
            chunk = source.randbytes(CHUNK)
            conn.sendall(chunk)
            digest.update(chunk)
            total += len(chunk)
            ahead = total * 8 / (rate_mbps * 1e6) - (time.monotonic() - start)
            if ahead > 0:
                time.sleep(ahead)
        conn.shutdown(socket.SHUT_WR)
        # Until the receiver has it all and closes: the digest compares whole transfers.
        conn.settimeout(120)
        while conn.recv(CHUNK):
            pass
    return f"{total} {digest.hexdigest()}"


def send(host: str, port: int, infile: str, rate_mbps: float = 0.0) -> str:
    digest, total = hashlib.sha256(), 0
    start = time.monotonic()
    with socket.create_connection((host, port), timeout=30) as conn, open(infile, "rb") as data:
        conn.settimeout(None)
        while chunk := data.read(CHUNK):
            conn.sendall(chunk)
            digest.update(chunk)
            total += len(chunk)
            if rate_mbps > 0:
                ahead = total * 8 / (rate_mbps * 1e6) - (time.monotonic() - start)
                if ahead > 0:
                    time.sleep(ahead)
        conn.shutdown(socket.SHUT_WR)
    return f"{total} {digest.hexdigest()}"


def main(argv: list[str]) -> int:
    if len(argv) == 3 and argv[0] == "serve":
        print(serve(int(argv[1]), argv[2]), flush=True)
        return 0
    if len(argv) == 2 and argv[0] == "stream-serve":
        print(stream_serve(int(argv[1])), flush=True)
        return 0
    if len(argv) == 6 and argv[0] == "stream-send":
        print(stream_send(argv[1], int(argv[2]), float(argv[3]), float(argv[4]), int(argv[5])), flush=True)
        return 0
    if len(argv) in (4, 5) and argv[0] == "send":
        print(send(argv[1], int(argv[2]), argv[3], float(argv[4]) if len(argv) == 5 else 0.0), flush=True)
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
