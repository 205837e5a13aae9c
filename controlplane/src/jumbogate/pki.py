"""A throwaway certificate authority for TLS in the emulation and the tests.

`make run TLS=1` and the TLS tests need a CA and certificates for the
controller, the switch, the SmartNIC and a few operator clients. They are
made here with the `cryptography` library, in a directory of their own, and
are good for a day: never for a real deployment (docs/operations.md says how
to run a border with the operator's own CA).

Every leaf certificate names its holder in its common name and as a DNS
subject alternative name (what tls.roles matches), carries the IP addresses
it serves on, and may serve and connect (the controller does both).
"""

from __future__ import annotations

import datetime
import ipaddress
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
    path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
    path.chmod(0o600)


def make_pki(directory: Path, holders: dict[str, list[str]], *, ca_name: str = "jumbogate throwaway CA") -> Pki:
    """A CA and one certificate per holder: {name: [IP addresses or DNS names it serves on]}."""
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
        names: list[x509.GeneralName] = [x509.DNSName(holder)]
        for where in serves_on:
            try:
                names.append(x509.IPAddress(ipaddress.ip_address(where)))
            except ValueError:
                names.append(x509.DNSName(where))
        cert = (
            x509.CertificateBuilder()
            .subject_name(_name(holder))
            .issuer_name(ca_cert.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now)
            .not_valid_after(now + LIFETIME)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.SubjectAlternativeName(names), critical=False)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
            .sign(ca_key, hashes.SHA256())
        )
        identity = Identity(directory / f"{holder}.pem", directory / f"{holder}.key")
        identity.cert.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        _write_key(key, identity.key)
        identities[holder] = identity
    return Pki(directory, ca_path, identities)
