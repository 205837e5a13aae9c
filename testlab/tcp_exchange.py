"""One real TCP connection between two network namespaces, checked byte for byte.

The client sends `upload` MiB and half-closes; the server reads all of it,
then sends `reply` MiB back and closes. Each side is a python3 script run
by the kernel's own TCP in its namespace, and prints one JSON line of what
it sent and received (byte count and SHA-256), the server also the address
it saw the client at. What runs in between (the border, a NAT, a WAN link)
is the test's; that the bytes came through it intact is checked here.
"""

from __future__ import annotations

import json
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from .nic_harness import Netns

# Both sides draw their bytes from these seeds: a test can rebuild either stream.
UPLOAD_SEED = 7
REPLY_SEED = 8

_COMMON = """
import hashlib, json, random, socket

def read_all(connection):
    digest, total = hashlib.sha256(), 0
    while chunk := connection.recv(1 << 20):
        digest.update(chunk)
        total += len(chunk)
    return total, digest.hexdigest()

def congested(sock):
    if {congestion!r}:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, {congestion!r}.encode())
        assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, 16).rstrip(b"\\0") == {congestion!r}.encode()
    return sock
"""

_SERVER = """
listener = congested(socket.socket())
listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
listener.bind(({address!r}, {port}))
listener.listen()
print("listening", flush=True)
connection, peer = listener.accept()
congested(connection)
received, received_sha256 = read_all(connection)
reply = random.Random({reply_seed}).randbytes({reply} << 20)
connection.sendall(reply)
connection.close()
print(json.dumps({{"peer": list(peer[:2]), "received": received, "received_sha256": received_sha256,
                  "sent": len(reply), "sent_sha256": hashlib.sha256(reply).hexdigest()}}), flush=True)
"""

_CLIENT = """
data = random.Random({upload_seed}).randbytes({upload} << 20)
with congested(socket.socket()) as connection:
    connection.settimeout({timeout_s})
    connection.connect(({address!r}, {port}))
    connection.sendall(data)
    connection.shutdown(socket.SHUT_WR)
    received, received_sha256 = read_all(connection)
print(json.dumps({{"sent": len(data), "sent_sha256": hashlib.sha256(data).hexdigest(),
                  "received": received, "received_sha256": received_sha256}}), flush=True)
"""


@dataclass
class Exchange:
    upload_mib: int
    reply_mib: int
    client: dict
    server: dict

    def assert_intact(self) -> None:
        client, server = self.client, self.server
        assert (server["received"], server["received_sha256"]) == (client["sent"], client["sent_sha256"]), "the server got other bytes than the client sent"
        assert (client["received"], client["received_sha256"]) == (server["sent"], server["sent_sha256"]), "the client got other bytes than the server sent"
        assert client["sent"] == self.upload_mib << 20 and server["sent"] == self.reply_mib << 20


def exchange(
    client: Netns,
    server: Netns,
    address: str,
    port: int,
    upload_mib: int,
    reply_mib: int,
    *,
    congestion: str | None = None,
    timeout_s: float = 90,
    while_listening: Callable[[], None] | None = None,
) -> Exchange:
    """Run the exchange to the server at address:port; while_listening runs once the server
    listens and before the client connects. Checking is the caller's (Exchange.assert_intact)."""
    common = _COMMON.format(congestion=congestion)
    server_script = common + _SERVER.format(address=address, port=port, reply=reply_mib, reply_seed=REPLY_SEED)
    client_script = common + _CLIENT.format(address=address, port=port, upload=upload_mib, upload_seed=UPLOAD_SEED, timeout_s=timeout_s / 2)
    receiver = server.popen("python3", "-c", server_script, stdout=subprocess.PIPE, text=True)
    try:
        assert receiver.stdout.readline().strip() == "listening", "the server did not start listening"
        if while_listening is not None:
            while_listening()
        sent = client.exec("python3", "-c", client_script, timeout=timeout_s).stdout
        received = receiver.communicate(timeout=60)[0]
    finally:
        receiver.kill()
    return Exchange(upload_mib, reply_mib, json.loads(sent.splitlines()[-1]), json.loads(received.splitlines()[-1]))


@contextmanager
def capture(ns: Netns, interface: str, file: Path, *bpf: str, snaplen: int = 128) -> Iterator[None]:
    """tcpdump of what arrives at interface (in ns) into file, from before the body runs until after it."""
    tcpdump = ns.popen("tcpdump", "-i", interface, "-Q", "in", "-s", str(snaplen), "-U", "-w", str(file), *bpf, stderr=subprocess.PIPE, text=True)
    try:
        assert tcpdump.stderr.readline(), "tcpdump did not start"  # "listening on ..."
        yield
    finally:
        # The last packets are still on their way when the connection ends.
        time.sleep(0.3)
        tcpdump.send_signal(signal.SIGINT)
        tcpdump.wait(timeout=10)
