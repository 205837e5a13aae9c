"""The throwaway CA: private keys stay private, and each certificate may do only what its holder does."""

from __future__ import annotations

import stat

import pytest
from cryptography import x509
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from jumbogate.pki import make_pki


def usages(path) -> set:
    cert = x509.load_pem_x509_certificate(path.read_bytes())
    return set(cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value)


def test_servers_serve_clients_connect_and_the_controller_does_both(tmp_path):
    pki = make_pki(tmp_path, {"switch": ["127.0.0.1"], "controller": ["127.0.0.1"], "viewer": []}, clients={"controller", "viewer"})
    assert usages(pki["switch"].cert) == {ExtendedKeyUsageOID.SERVER_AUTH}
    assert usages(pki["viewer"].cert) == {ExtendedKeyUsageOID.CLIENT_AUTH}
    assert usages(pki["controller"].cert) == {ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH}


def test_a_holder_that_neither_serves_nor_connects_is_refused(tmp_path):
    with pytest.raises(ValueError, match="neither serves nor connects"):
        make_pki(tmp_path, {"idle": []}, clients=set())


def test_keys_are_private_even_where_a_file_was_left_readable(tmp_path):
    (tmp_path / "viewer.key").write_text("old")
    (tmp_path / "viewer.key").chmod(0o644)
    pki = make_pki(tmp_path, {"viewer": []}, clients={"viewer"})
    for key in (pki["viewer"].key, tmp_path / "ca.key"):
        assert stat.S_IMODE(key.stat().st_mode) == 0o600, key


def test_a_planted_link_does_not_receive_the_key(tmp_path):
    """A key is never written through a symbolic link someone left in its place."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.write_text("")
    pki_dir = tmp_path / "pki"
    pki_dir.mkdir()
    (pki_dir / "viewer.key").symlink_to(elsewhere)
    with pytest.raises(OSError):
        make_pki(pki_dir, {"viewer": []}, clients={"viewer"})
    assert elsewhere.read_text() == ""


def test_other_kinds_of_names_are_where_the_test_put_them(tmp_path):
    pki = make_pki(tmp_path, {"impostor": ["uri:controller", "email:controller", "cn:controller"]}, clients={"impostor"})
    cert = x509.load_pem_x509_certificate(pki["impostor"].cert.read_bytes())
    names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert names.get_values_for_type(x509.DNSName) == ["impostor"]
    assert names.get_values_for_type(x509.UniformResourceIdentifier) == ["controller"]
    assert names.get_values_for_type(x509.RFC822Name) == ["controller"]
    assert cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value == "controller"
