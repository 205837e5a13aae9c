"""A throwaway certificate authority for TLS in the emulation and the tests.

`make run TLS=1` and the TLS tests need a CA and certificates for the
controller, the switch, the SmartNIC and a few operator clients. They are
made here with the `cryptography` library, in a directory of their own, and
are good for a day: never for a real deployment (docs/operations.md says how
to run a border with the operator's own CA).

Every leaf certificate names its holder in its common name and as a DNS
subject alternative name (what tls.roles and the programs' --tls-allow
match), and carries the IP addresses or DNS names it serves on. A holder
that serves somewhere may serve (serverAuth); a holder listed as a client
may connect (clientAuth); the controller does both. A switch's or
SmartNIC's certificate therefore cannot call another part, and an
operator's cannot serve. Keys are created readable by their owner only.

For tests of identity checks, a serves-on entry may also be `uri:NAME` or
`email:NAME` (a subject alternative name of that type) or `cn:NAME` (the
common name instead of the holder's): such names must grant nothing.
"""

from __future__ import annotations

import datetime
import ipaddress
import os
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

LIFETIME = datetime.timedelta(days=1)


@dataclass(frozen=True)
class Identity:
    cert: Path
    key: Path


@dataclass(frozen=True)
class Pki:
    directory: Path
    ca: Path
    identities: dict[str, Identity]

    def __getitem__(self, name: str) -> Identity:
        return self.identities[name]


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, "jumbogate test"), x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _write_key(key: ec.EllipticCurvePrivateKey, path: Path) -> None:
    """Write the key into a file that is private before it holds a byte (a file left from before is made private first)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "wb") as out:
        os.fchmod(fd, 0o600)
        out.write(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))


def _alternative_names(holder: str, serves_on: list[str]) -> tuple[str, list[x509.GeneralName]]:
    """The common name and subject alternative names of a holder's certificate."""
    common_name = holder
    names: list[x509.GeneralName] = [x509.DNSName(holder)]
    for where in serves_on:
        kind, _, value = where.partition(":")
        if kind == "uri" and value:
            names.append(x509.UniformResourceIdentifier(value))
        elif kind == "email" and value:
            names.append(x509.RFC822Name(value))
        elif kind == "cn" and value:
            common_name = value
        else:
            try:
                names.append(x509.IPAddress(ipaddress.ip_address(where)))
            except ValueError:
                names.append(x509.DNSName(where))
    return common_name, names


def _serves(serves_on: list[str]) -> bool:
    return any(where.partition(":")[0] not in ("uri", "email", "cn") for where in serves_on)


def make_pki(directory: Path, holders: dict[str, list[str]], *, clients: frozenset[str] | set[str], ca_name: str = "jumbogate throwaway CA") -> Pki:
    """A CA and one certificate per holder: {name: [IP addresses or DNS names it serves on]}; `clients` may connect."""
    directory.mkdir(parents=True, exist_ok=True)
    now = datetime.datetime.now(datetime.UTC) - datetime.timedelta(minutes=5)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_cert = (
        x509.CertificateBuilder()
        .subject_name(_name(ca_name))
        .issuer_name(_name(ca_name))
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now)
        .not_valid_after(now + LIFETIME)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(x509.KeyUsage(False, False, False, False, False, True, True, False, False), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    ca_path = directory / "ca.pem"
    ca_path.write_bytes(ca_cert.public_bytes(serialization.Encoding.PEM))
    _write_key(ca_key, directory / "ca.key")
    identities = {}
    for holder, serves_on in holders.items():
        key = ec.generate_private_key(ec.SECP256R1())
        common_name, names = _alternative_names(holder, serves_on)
        usages = ([ExtendedKeyUsageOID.SERVER_AUTH] if _serves(serves_on) else []) + ([ExtendedKeyUsageOID.CLIENT_AUTH] if holder in clients else [])
        if not usages:
            raise ValueError(f"{holder} neither serves nor connects: give it an address or list it in clients")
        cert = (
            x509.CertificateBuilder()
            .subject_name(_name(common_name))
            .issuer_name(ca_cert.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now)
            .not_valid_after(now + LIFETIME)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.SubjectAlternativeName(names), critical=False)
            .add_extension(x509.ExtendedKeyUsage(usages), critical=False)
            .sign(ca_key, hashes.SHA256())
        )
        identity = Identity(directory / f"{holder}.pem", directory / f"{holder}.key")
        identity.cert.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        _write_key(key, identity.key)
        identities[holder] = identity
    return Pki(directory, ca_path, identities)
