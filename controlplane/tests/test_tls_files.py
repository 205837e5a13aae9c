"""The certificate files a TLS server takes, at start and on every reload: only what can serve.

An expired certificate, one not valid yet or one another CA signed was taken
as well as a good one: the reload said "applied" and every new connection's
handshake failed from then on.
"""

from __future__ import annotations

import datetime

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec

from jumbogate.pki import make_pki
from jumbogate.tls import TlsConfig, check_key_pair

DAY = datetime.timedelta(days=1)


@pytest.fixture
def pki(tmp_path):
    return make_pki(tmp_path / "rack", {"server": ["127.0.0.1"]}, clients=set())


def tls_of(pki) -> TlsConfig:
    return TlsConfig(ca=pki.ca, cert=pki["server"].cert, key=pki["server"].key, admins=frozenset(), read_only=frozenset())


def check(tls: TlsConfig, cert: bytes | None = None, ca: bytes | None = None) -> None:
    check_key_pair(tls, ca or tls.ca.read_bytes(), cert or tls.cert.read_bytes(), tls.key.read_bytes())


def signed(subject: x509.Name, subject_key, issuer: x509.Name, issuer_key, *, not_before, not_after, ca: bool = False) -> x509.Certificate:
    return (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(subject_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(not_before)
        .not_valid_after(not_after)
        .add_extension(x509.BasicConstraints(ca=ca, path_length=0 if ca else None), critical=True)
        .sign(issuer_key, hashes.SHA256())
    )


def pem(*certificates) -> bytes:
    return b"".join(c.public_bytes(serialization.Encoding.PEM) for c in certificates)


def keys_of(pki):
    """The CA's certificate and key, and the server's name and key."""
    ca_cert = x509.load_pem_x509_certificate(pki.ca.read_bytes())
    ca_key = serialization.load_pem_private_key((pki.directory / "ca.key").read_bytes(), None)
    server_name = x509.load_pem_x509_certificate(pki["server"].cert.read_bytes()).subject
    server_key = serialization.load_pem_private_key(pki["server"].key.read_bytes(), None)
    return ca_cert, ca_key, server_name, server_key


def test_the_files_make_pki_wrote_are_taken(pki):
    check(tls_of(pki))


@pytest.mark.parametrize(
    ("from_now", "until_now", "says"),
    [(-3 * DAY, -2 * DAY, "not now"), (DAY, 2 * DAY, "not now")],
    ids=["expired", "not-yet-valid"],
)
def test_a_certificate_not_valid_now_is_refused(pki, from_now, until_now, says):
    ca_cert, ca_key, server_name, server_key = keys_of(pki)
    now = datetime.datetime.now(datetime.UTC)
    cert = signed(server_name, server_key, ca_cert.subject, ca_key, not_before=now + from_now, not_after=now + until_now)
    with pytest.raises(ValueError, match=says):
        check(tls_of(pki), cert=pem(cert))


@pytest.mark.parametrize("same_name", [True, False], ids=["same-ca-name", "other-ca-name"])
def test_a_certificate_another_ca_signed_is_refused(pki, tmp_path, same_name):
    other = make_pki(tmp_path / "other", {"server": ["127.0.0.1"]}, clients=set(), **({} if same_name else {"ca_name": "someone else"}))
    tls = tls_of(pki)
    with pytest.raises(ValueError, match="signed the certificate"):
        check_key_pair(tls, pki.ca.read_bytes(), other["server"].cert.read_bytes(), other["server"].key.read_bytes())


def test_a_certificate_under_an_intermediate_it_carries_is_taken_and_one_without_it_is_not(pki):
    ca_cert, ca_key, server_name, server_key = keys_of(pki)
    now = datetime.datetime.now(datetime.UTC) - datetime.timedelta(minutes=5)
    intermediate_key = ec.generate_private_key(ec.SECP256R1())
    intermediate_name = x509.Name.from_rfc4514_string("CN=jumbogate intermediate")
    intermediate = signed(intermediate_name, intermediate_key, ca_cert.subject, ca_key, not_before=now, not_after=now + DAY, ca=True)
    leaf = signed(server_name, server_key, intermediate_name, intermediate_key, not_before=now, not_after=now + DAY)
    check(tls_of(pki), cert=pem(leaf, intermediate))
    with pytest.raises(ValueError, match="signed the certificate"):
        check(tls_of(pki), cert=pem(leaf))
