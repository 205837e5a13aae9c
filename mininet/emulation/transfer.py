"""Send a file over one TCP connection and check it arrived whole: `serve` and `send`, run inside Mininet hosts.

python3 -m emulation.transfer serve PORT OUTFILE   # prints "<bytes> <sha256>" after the sender closes
python3 -m emulation.transfer send HOST PORT FILE [MBIT_S]  # prints "<bytes> <sha256>" of what it sent;
                                                       # MBIT_S paces the sender (for a transfer that lasts)
"""

from __future__ import annotations

import hashlib
import socket
import sys
import time

CHUNK = 1 << 16


def serve(port: int, outfile: str) -> str:
    family = socket.AF_INET6  # dual-stack: IPv4 clients arrive as ::ffff:a.b.c.d
    with socket.socket(family, socket.SOCK_STREAM) as listener:
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
        listener.bind(("::", port))
        listener.listen(1)
        print("listening", flush=True)
        conn, _ = listener.accept()
        digest, total = hashlib.sha256(), 0
        with conn, open(outfile, "wb") as out:
            while chunk := conn.recv(CHUNK):
                digest.update(chunk)
                out.write(chunk)
                total += len(chunk)
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
    if len(argv) in (4, 5) and argv[0] == "send":
        print(send(argv[1], int(argv[2]), argv[3], float(argv[4]) if len(argv) == 5 else 0.0), flush=True)
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
