"""Telling a service manager how the controller is doing (systemd's sd_notify protocol).

Under a unit of Type=notify, systemd counts the controller as started only once it sends READY=1: after its store
answered and its operator API listens, so `systemctl start` returning means `jumbogatectl` can reach it. The
protocol is one datagram of KEY=VALUE lines to the AF_UNIX socket named in $NOTIFY_SOCKET; the C programs speak the
same (runtime/service_notify.c).
"""

import os
import socket


def notify(state: str) -> bool:
    """Send STATE (e.g. "READY=1"); False when no service manager listens (started by hand)."""
    path = os.environ.get("NOTIFY_SOCKET", "")
    if not path:
        return False
    if path[0] not in "/@":
        raise OSError(f"NOTIFY_SOCKET is neither a path nor an abstract socket: {path!r}")
    address = "\0" + path[1:] if path[0] == "@" else path
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC) as sock:
        sock.sendto(state.encode(), address)
    return True
