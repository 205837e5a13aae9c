"""Mutual TLS on every control channel, and the operator API's roles.

With a `tls` section in rack.yaml the controller serves its operator API (and
metrics) only to clients whose certificate chains to `tls.ca`, and presents
`tls.cert` when it connects to the switch (P4Runtime) and the SmartNIC
(nic.proto), whose certificates must chain to the same CA. Without it every
channel is plaintext, which a listener accepts on a loopback address only,
unless the operator says `insecure` (and is warned at every start).

Roles come from the client certificate's DNS subject alternative names,
listed under tls.roles.admin or tls.roles.read_only. Only that one SAN type
counts: a URI, e-mail or IP SAN, or a common name, that spells a listed
name grants nothing (the CA may sign such names for other purposes). A
read-only client may call every Get/List/Watch; a change is
PERMISSION_DENIED. A certificate in neither list is refused everything, on
the operator API and on the metrics endpoint: a valid certificate from the
CA is not by itself a grant.
"""

from __future__ import annotations

import enum
import ipaddress
import socket
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import grpc


class Role(enum.Enum):
    ADMIN = "admin"
    READ_ONLY = "read_only"


# Operator API methods that only read; every other method, including one
# added later and not listed here, needs the admin role (ProbePath changes
# nothing but sends traffic, so it is not listed).
READING_METHODS = frozenset({"GetFleet", "ListInstances", "GetInstance", "ListFlows", "GetStats", "GetStatus", "Watch", "ListPaths"})


@dataclass(frozen=True)
class TlsConfig:
    ca: Path
    cert: Path
    key: Path
    admins: frozenset[str] = field(default_factory=frozenset)
    read_only: frozenset[str] = field(default_factory=frozenset)

    def files(self) -> tuple[bytes, bytes, bytes]:
        """(ca, cert, key) as bytes; OSError names the unreadable file."""
        return self.ca.read_bytes(), self.cert.read_bytes(), self.key.read_bytes()

    def role_of(self, names: Iterable[str]) -> Role | None:
        names = set(names)
        if names & self.admins:
            return Role.ADMIN
        if names & self.read_only:
            return Role.READ_ONLY
        return None


def server_credentials(tls: TlsConfig) -> grpc.ServerCredentials:
    ca, cert, key = tls.files()
    return grpc.ssl_server_credentials([(key, cert)], root_certificates=ca, require_client_auth=True)


def channel_credentials(tls: TlsConfig) -> grpc.ChannelCredentials:
    ca, cert, key = tls.files()
    return grpc.ssl_channel_credentials(root_certificates=ca, private_key=key, certificate_chain=cert)


def is_loopback(address: str) -> bool:
    """Whether HOST:PORT names only loopback addresses (unix:PATH counts: its file's permissions guard it)."""
    if address.startswith("unix:"):
        return True
    host = address.rpartition(":")[0].strip("[]")
    if not host:
        return False
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        pass
    try:
        resolved = {info[4][0] for info in socket.getaddrinfo(host, None)}
    except OSError:
        return False
    return bool(resolved) and all(ipaddress.ip_address(a.split("%")[0]).is_loopback for a in resolved)


def plaintext_refusal(what: str, address: str, insecure: bool) -> str | None:
    """Why a plaintext listener on `address` must not start, or None."""
    if insecure or is_loopback(address):
        return None
    return (
        f"refusing plaintext {what} on {address}, which is not a loopback address: anyone who reaches it could call it."
        " Add a tls section to the config (mutual TLS), or set controller.insecure: true to accept that"
    )


def peer_names(context: grpc.aio.ServicerContext) -> list[str]:
    """The verified client certificate's DNS subject alternative names (gRPC's peer_dns; never other SAN types)."""
    auth = context.auth_context() or {}
    return [value.decode(errors="replace") for value in auth.get("peer_dns", [])]


def certificate_dns_names(peer_certificate: dict) -> list[str]:
    """The DNS subject alternative names of a certificate as Python's ssl module decodes it (SSLSocket.getpeercert())."""
    return [value for kind, value in peer_certificate.get("subjectAltName", ()) if kind == "DNS"]


class RoleInterceptor(grpc.aio.ServerInterceptor):
    """Refuses, before the method runs, what the caller's role does not allow."""

    def __init__(self, tls: TlsConfig):
        self.tls = tls

    async def intercept_service(self, continuation, handler_call_details):
        handler = await continuation(handler_call_details)
        if handler is None:
            return None
        method = handler_call_details.method.rpartition("/")[2]
        needs_admin = method not in READING_METHODS
        tls = self.tls

        def refusal(context) -> str | None:
            names = peer_names(context)
            role = tls.role_of(names)
            shown = ", ".join(names) or "no name"
            if role is None:
                return f"client certificate ({shown}) has no role: list it under tls.roles.admin or tls.roles.read_only"
            if needs_admin and role is not Role.ADMIN:
                return f"client certificate ({shown}) is read-only: {method} changes the policy and needs the admin role"
            return None

        async def check(context) -> None:
            why = refusal(context)
            if why:
                await context.abort(grpc.StatusCode.PERMISSION_DENIED, why)

        # Every kind of method is wrapped: a streaming method added later
        # must not slip past the roles.
        if handler.unary_unary is not None:
            inner = handler.unary_unary

            async def unary_unary(request, context):
                await check(context)
                return await inner(request, context)

            return grpc.unary_unary_rpc_method_handler(unary_unary, handler.request_deserializer, handler.response_serializer)
        if handler.unary_stream is not None:
            inner_unary_stream = handler.unary_stream

            async def unary_stream(request, context):
                await check(context)
                async for item in inner_unary_stream(request, context):
                    yield item

            return grpc.unary_stream_rpc_method_handler(unary_stream, handler.request_deserializer, handler.response_serializer)
        if handler.stream_unary is not None:
            inner_stream_unary = handler.stream_unary

            async def stream_unary(requests, context):
                await check(context)
                return await inner_stream_unary(requests, context)

            return grpc.stream_unary_rpc_method_handler(stream_unary, handler.request_deserializer, handler.response_serializer)
        if handler.stream_stream is not None:
            inner_stream_stream = handler.stream_stream

            async def stream_stream(requests, context):
                await check(context)
                async for item in inner_stream_stream(requests, context):
                    yield item

            return grpc.stream_stream_rpc_method_handler(stream_stream, handler.request_deserializer, handler.response_serializer)
        return None
