"""The Prometheus endpoint's HTTP server: bounded, and with TLS, only for callers the roles name.

prometheus_client's own server takes any certificate from the CA and starts
a thread per connection without a limit, with the TLS handshake in the
accepting thread (one silent client holds up every scrape). This one does
the handshake in the connection's own thread under a timeout, admits a
client only if a DNS subject alternative name of its certificate is listed
under tls.roles (admin or read_only: reading metrics is a read), and serves
at most MAX_CONNECTIONS at once; the rest are closed at once. Its own
refusals are counted and exported with the other metrics.
"""

from __future__ import annotations

import logging
import socket
import ssl
import threading
from socketserver import ThreadingMixIn
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from prometheus_client import make_wsgi_app
from prometheus_client.core import CounterMetricFamily
from prometheus_client.registry import Collector, CollectorRegistry

from .tls import TlsConfig, certificate_dns_names

LOG = logging.getLogger("jumbogate.metrics")

# Scrapers are a few Prometheus servers; more connections than this at once
# are not scrapers.
MAX_CONNECTIONS = 16
# A client that has not finished its handshake or sent its request by then
# is closed.
CONNECTION_TIMEOUT_S = 5.0


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format, *args):  # noqa: A002 (the base class's name)
        pass


class MetricsServer(ThreadingMixIn, WSGIServer):
    daemon_threads = True
    tls: TlsConfig | None = None
    context: ssl.SSLContext | None = None

    def server_bind(self):
        self.slots = threading.BoundedSemaphore(MAX_CONNECTIONS)
        self.refused = {"busy": 0, "handshake": 0, "no_role": 0}
        self.refused_lock = threading.Lock()
        super().server_bind()

    def _refuse(self, request, reason: str, detail: str = "") -> None:
        with self.refused_lock:
            self.refused[reason] += 1
        if detail:
            LOG.warning("metrics: refused a client: %s", detail)
        self.shutdown_request(request)

    def process_request(self, request, client_address):
        # The bound is taken here, in the accepting thread, so that a flood
        # of connections never becomes a flood of threads.
        if not self.slots.acquire(blocking=False):
            self._refuse(request, "busy")
            return
        try:
            super().process_request(request, client_address)
        except BaseException:
            self.slots.release()
            raise

    def process_request_thread(self, request, client_address):
        try:
            request.settimeout(CONNECTION_TIMEOUT_S)
            if self.context is not None:
                try:
                    request = self.context.wrap_socket(request, server_side=True)
                except (OSError, ssl.SSLError) as err:
                    self._refuse(request, "handshake", f"{client_address[0]}: TLS handshake failed: {err}")
                    return
                names = certificate_dns_names(request.getpeercert() or {})
                if self.tls.role_of(names) is None:
                    shown = ", ".join(names) or "no DNS name"
                    self._refuse(request, "no_role", f"{client_address[0]}: client certificate ({shown}) has no role under tls.roles")
                    return
            super().process_request_thread(request, client_address)
        finally:
            self.slots.release()


class _ServerCollector(Collector):
    def __init__(self, server: MetricsServer):
        self.server = server

    def collect(self):
        refused = CounterMetricFamily(
            "jumbogate_metrics_connections_refused", "Connections the metrics endpoint closed unserved, by reason.", labels=["reason"]
        )
        with self.server.refused_lock:
            for reason, count in sorted(self.server.refused.items()):
                refused.add_metric([reason], count)
        yield refused


def tls_context(tls: TlsConfig) -> ssl.SSLContext:
    """The endpoint's TLS: its certificate, and client certificates from the CA required (OSError or ssl.SSLError on bad files)."""
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH, cafile=str(tls.ca))
    context.load_cert_chain(str(tls.cert), str(tls.key))
    context.verify_mode = ssl.CERT_REQUIRED
    return context


def start(address: str, registry: CollectorRegistry, tls: TlsConfig | None) -> MetricsServer:
    """Serve /metrics on HOST:PORT in a thread of its own; with `tls`, HTTPS to the roles' clients only."""
    host, _, port = address.rpartition(":")
    host = host.strip("[]")
    family = socket.getaddrinfo(host or None, int(port), type=socket.SOCK_STREAM)[0][0]
    server_class = type("BoundMetricsServer", (MetricsServer,), {"address_family": family})
    server = make_server(host, int(port), make_wsgi_app(registry), server_class, handler_class=_QuietHandler)
    if tls is not None:
        server.context, server.tls = tls_context(tls), tls
    registry.register(_ServerCollector(server))
    threading.Thread(target=server.serve_forever, name="metrics", daemon=True).start()
    return server
