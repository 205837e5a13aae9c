"""Mutual TLS on every control channel, and the operator API's roles.

With a `tls` section in rack.yaml the controller serves its operator API (and
metrics) only to clients whose certificate chains to `tls.ca`, and presents
`tls.cert` when it connects to the switch (P4Runtime) and the SmartNIC
(nic.proto), whose certificates must chain to the same CA. Without it every
channel is plaintext, which a listener accepts on a loopback address only,
unless the operator says `insecure` (and is warned at every start).

Roles come from the client certificate: its common name or any DNS name in
its subject alternative names, listed under tls.roles.admin or
tls.roles.read_only. A read-only client may call every Get/List/Watch; a
change is PERMISSION_DENIED. A certificate in neither list is refused
everything: a valid certificate from the CA is not by itself a grant.
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


# Operator API methods that change the policy; every other method reads.
# (ProbePath changes nothing but sends traffic, so it takes an admin too.)
CHANGING_METHODS = frozenset({"SetFleet", "SetInstanceJumbo", "OnloadFlow", "OffloadFlow", "ProbePath"})


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
    """The verified client certificate's common name and DNS subject alternative names."""
    auth = context.auth_context() or {}
    names = []
    for key in ("x509_common_name", "x509_subject_alternative_name"):
        names += [value.decode(errors="replace") for value in auth.get(key, [])]
    return names


class RoleInterceptor(grpc.aio.ServerInterceptor):
    """Refuses, before the method runs, what the caller's role does not allow."""

    def __init__(self, tls: TlsConfig):
        self.tls = tls

    async def intercept_service(self, continuation, handler_call_details):
        handler = await continuation(handler_call_details)
        if handler is None:
            return None
        method = handler_call_details.method.rpartition("/")[2]
        needs_admin = method in CHANGING_METHODS
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

        if handler.unary_unary is not None:
            inner = handler.unary_unary

            async def unary(request, context):
                why = refusal(context)
                if why:
                    await context.abort(grpc.StatusCode.PERMISSION_DENIED, why)
                return await inner(request, context)

            return grpc.unary_unary_rpc_method_handler(unary, handler.request_deserializer, handler.response_serializer)
        if handler.unary_stream is not None:
            inner_stream = handler.unary_stream

            async def stream(request, context):
                why = refusal(context)
                if why:
                    await context.abort(grpc.StatusCode.PERMISSION_DENIED, why)
                async for item in inner_stream(request, context):
                    yield item

            return grpc.unary_stream_rpc_method_handler(stream, handler.request_deserializer, handler.response_serializer)
        return handler
