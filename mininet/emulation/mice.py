"""Mice: many short TCP exchanges (a small request, a small answer), run inside Mininet hosts.

python3 -m emulation.mice serve PORT                     # answers every request until killed
python3 -m emulation.mice run HOST PORT COUNT            # prints "<done> <failed> <seconds>"
"""

from __future__ import annotations

import socket
import socketserver
import sys
import time

REQUEST = b"GET /status HTTP/1.0\r\n\r\n".ljust(200, b" ")
ANSWER = b"HTTP/1.0 200 OK\r\n\r\n".ljust(1000, b".")


class Answer(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        self.request.recv(4096)
        self.request.sendall(ANSWER)


class DualStackServer(socketserver.ThreadingTCPServer):
    address_family = socket.AF_INET6
    allow_reuse_address = True
    daemon_threads = True

    def server_bind(self) -> None:
        self.socket.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
        super().server_bind()


def run(host: str, port: int, count: int) -> str:
    done = failed = 0
    start = time.monotonic()
    for _ in range(count):
        try:
            with socket.create_connection((host, port), timeout=5) as conn:
                conn.sendall(REQUEST)
                received = b""
                while chunk := conn.recv(4096):
                    received += chunk
                done += received == ANSWER
                failed += received != ANSWER
        except OSError:
            failed += 1
    return f"{done} {failed} {time.monotonic() - start:.2f}"


def main(argv: list[str]) -> int:
    if len(argv) == 2 and argv[0] == "serve":
        with DualStackServer(("::", int(argv[1])), Answer) as server:
            server.serve_forever()
        return 0
    if len(argv) == 4 and argv[0] == "run":
        print(run(argv[1], int(argv[2]), int(argv[3])), flush=True)
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
