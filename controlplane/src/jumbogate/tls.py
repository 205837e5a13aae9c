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
READING_METHODS = frozenset(
    {"GetFleet", "ListInstances", "GetInstance", "ListFlows", "GetStats", "GetStatus", "Watch", "ListPaths", "GetNicStats", "GetNicConfig", "ListNicFlows"}
)
# The standard services the operator API serves beside it (for grpcurl,
# grpc_health_probe and load balancers): they only read, so every role may
# call them; a certificate without a role still gets nothing. Named by full
# method path.
READING_ELSEWHERE = frozenset(
    {
        "/grpc.health.v1.Health/Check",
        "/grpc.health.v1.Health/Watch",
        "/grpc.health.v1.Health/List",
        "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo",
        "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo",
    }
)


def is_reading(full_method: str) -> bool:
    """Whether /SERVICE/METHOD only reads (any role may call it); everything else needs the admin role."""
    return full_method in READING_ELSEWHERE or full_method.rpartition("/")[2] in READING_METHODS


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


def check_key_pair(tls: TlsConfig, ca: bytes, cert: bytes, key: bytes, *, signed_by_ca: bool = True) -> None:
    """ValueError naming the file unless the CA and the certificate are PEM certificates, the key is the
    certificate's, the certificate is valid now and (`signed_by_ca`) the CA signed it. A client's CA is the
    one its server's certificate chains to, which need not be its own's: it asks signed_by_ca=False.

    gRPC takes any bytes and fails each handshake later: a half-written file,
    an expired certificate or one of another CA swapped in on a reload would
    cut every new connection off."""
    import datetime

    from cryptography import x509
    from cryptography.hazmat.primitives import serialization

    def load(what, path: Path, data: bytes):
        try:
            return what(data)
        except (ValueError, TypeError) as err:
            raise ValueError(f"{path}: {err}") from None

    authority = load(x509.load_pem_x509_certificate, tls.ca, ca)
    certificate = load(x509.load_pem_x509_certificate, tls.cert, cert)
    private = load(lambda data: serialization.load_pem_private_key(data, None), tls.key, key)
    spki = serialization.PublicFormat.SubjectPublicKeyInfo
    if private.public_key().public_bytes(serialization.Encoding.DER, spki) != certificate.public_key().public_bytes(serialization.Encoding.DER, spki):
        raise ValueError(f"{tls.key} is not the key of the certificate in {tls.cert}")
    now = datetime.datetime.now(datetime.UTC).replace(tzinfo=None)
    if not certificate.not_valid_before <= now < certificate.not_valid_after:
        raise ValueError(f"{tls.cert} is valid from {certificate.not_valid_before} to {certificate.not_valid_after} UTC, not now")
    if not signed_by_ca:
        return
    # The leaf's issuer: the CA, or an intermediate that the certificate file carries after the leaf.
    begin = b"-----BEGIN CERTIFICATE-----"
    candidates = [authority, *(load(x509.load_pem_x509_certificate, tls.cert, begin + part) for part in cert.split(begin)[2:])]
    issuers = [c for c in candidates if c.subject == certificate.issuer]
    if not issuers or not any(_signed_by(certificate, issuer.public_key()) for issuer in issuers):
        raise ValueError(f"neither the CA in {tls.ca} nor a certificate after the first in {tls.cert} signed the certificate in {tls.cert}")


def _signed_by(certificate, signer) -> bool:
    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa

    try:
        if isinstance(signer, ec.EllipticCurvePublicKey):
            signer.verify(certificate.signature, certificate.tbs_certificate_bytes, ec.ECDSA(certificate.signature_hash_algorithm))
        elif isinstance(signer, rsa.RSAPublicKey):
            signer.verify(certificate.signature, certificate.tbs_certificate_bytes, padding.PKCS1v15(), certificate.signature_hash_algorithm)
        else:  # Ed25519, Ed448: no hash
            signer.verify(certificate.signature, certificate.tbs_certificate_bytes)
    except (InvalidSignature, TypeError, ValueError):
        return False
    return True


class ReloadableCredentials:
    """A TLS server's credentials whose files are read again on `reload()` (SIGHUP):
    every connection made after it is served with the new certificate, key and
    CA; connections already open keep theirs. Files that cannot be read, or do
    not make a certificate configuration, leave the old ones in force."""

    def __init__(self, tls: TlsConfig):
        self.tls = tls
        self._current = self._configuration()
        self._pending: grpc.ServerCertificateConfiguration | None = None

    def _configuration(self) -> grpc.ServerCertificateConfiguration:
        ca, cert, key = self.tls.files()
        check_key_pair(self.tls, ca, cert, key)
        return grpc.ssl_server_certificate_configuration([(key, cert)], root_certificates=ca)

    def credentials(self) -> grpc.ServerCredentials:
        return grpc.dynamic_ssl_server_credentials(self._current, self._fetch, require_client_authentication=True)

    def reload(self, *, commit: bool = True) -> None:
        """Read the files again (OSError or ValueError, naming them, when they cannot be used; nothing changes then).
        Without `commit`: only check them."""
        configuration = self._configuration()
        if commit:
            self._pending = configuration

    def _fetch(self) -> grpc.ServerCertificateConfiguration | None:
        # Called by gRPC before each new handshake: None keeps what it has.
        pending, self._pending = self._pending, None
        return pending


def channel_credentials(tls: TlsConfig) -> grpc.ChannelCredentials:
    ca, cert, key = tls.files()
    return grpc.ssl_channel_credentials(root_certificates=ca, private_key=key, certificate_chain=cert)


def listener_refusals(tls: TlsConfig | None, listen: str, metrics: str | None, insecure: bool) -> list[str]:
    """Why the controller's listeners would serve plaintext where they must not (empty: all is well)."""
    if tls is not None:
        return []
    addresses = [("operator API", listen)] + ([("metrics", metrics)] if metrics else [])
    found = [plaintext_refusal(what, address, insecure) for what, address in addresses]
    return [why for why in found if why]


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
        needs_admin = not is_reading(handler_call_details.method)
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
