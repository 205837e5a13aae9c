"""The controller's gRPC reconnect options (nic.RECONNECT_OPTIONS, also used for
P4Runtime): fast retries, without cutting short a connection attempt to a peer
that is slow to answer.

grpc.min_reconnect_backoff_ms is also the least time gRPC gives one
connection attempt. Set to 100 ms, an attempt lasted at most the current
backoff (0.1 to 0.5 s): a switch slow to send its first HTTP/2 frame on a
loaded machine was given up on ("timed out before receiving SETTINGS
frame"), which failed a controller test in a CI run, and one that needs a
second is never reached at all.
"""

from __future__ import annotations

import socket
import threading
import time
from concurrent import futures

import grpc

from jumbogate.nic import RECONNECT_OPTIONS

# Longer than the longest backoff: an attempt cut short at the backoff never
# lasts long enough.
SETTINGS_DELAY_S = 1.0


def echo_server() -> tuple[grpc.Server, int]:
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    handler = grpc.method_handlers_generic_handler("test.Echo", {"Ping": grpc.unary_unary_rpc_method_handler(lambda request, context: request)})
    server.add_generic_rpc_handlers((handler,))
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    return server, port


def slow_proxy(target_port: int) -> tuple[socket.socket, int]:
    """Forwards to the server, holding back the server's first bytes for SETTINGS_DELAY_S (a loaded peer)."""
    listener = socket.create_server(("127.0.0.1", 0))

    def pipe(source: socket.socket, sink: socket.socket, delay: float) -> None:
        first = True
        try:
            while data := source.recv(65536):
                if first and delay:
                    time.sleep(delay)
                first = False
                sink.sendall(data)
        except OSError:
            pass
        finally:
            sink.close()

    def accept() -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return
            upstream = socket.create_connection(("127.0.0.1", target_port))
            threading.Thread(target=pipe, args=(client, upstream, 0.0), daemon=True).start()
            threading.Thread(target=pipe, args=(upstream, client, SETTINGS_DELAY_S), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    return listener, listener.getsockname()[1]


def test_a_peer_slow_to_answer_is_still_reached():
    server, port = echo_server()
    listener, proxy_port = slow_proxy(port)
    try:
        with grpc.insecure_channel(f"127.0.0.1:{proxy_port}", options=RECONNECT_OPTIONS) as channel:
            ping = channel.unary_unary("/test.Echo/Ping")
            assert ping(b"ping", timeout=5, wait_for_ready=True) == b"ping"
    finally:
        listener.close()
        server.stop(0)


def test_retries_stay_within_half_a_second():
    options = dict(RECONNECT_OPTIONS)
    assert options["grpc.initial_reconnect_backoff_ms"] <= 100 and options["grpc.max_reconnect_backoff_ms"] <= 500
    assert "grpc.min_reconnect_backoff_ms" not in options
