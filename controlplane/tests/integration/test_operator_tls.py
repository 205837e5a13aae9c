"""The operator API's TLS as an operator runs it: roles for health and
reflection, and certificates replaced without a restart (on the operator API and the metrics endpoint).

The real jumbogate-controller serves its operator API over mutual TLS with
certificates from a throwaway CA (jumbogate.pki); the switch and the SmartNIC
are left out (the controller keeps calling them), since only the operator
API is tested. Clients are the installed jumbogatectl and plain gRPC.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
from pathlib import Path

import grpc
import pytest
import yaml
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha.proto_reflection_descriptor_database import ProtoReflectionDescriptorDatabase
from test_operator_tools import VENV_BIN, rack

from jumbogate.pki import Pki, make_pki
from testlab import lab

pytestmark = [pytest.mark.timeout(300)]

HOLDERS = {"controller": ["127.0.0.1"], "ops": [], "viewer": [], "stranger": []}
CLIENTS = {"controller", "ops", "viewer", "stranger"}
ROLES = {"admin": ["ops"], "read_only": ["viewer"]}
EXIT_OK, EXIT_REFUSED, EXIT_UNREACHABLE, EXIT_DENIED = 0, 1, 4, 6


class TlsController:
    def __init__(self, tmp: Path):
        self.tmp = tmp
        self.pki = make_pki(tmp / "first", HOLDERS, clients=CLIENTS)
        # The files the config names: the operator replaces their contents.
        self.live = tmp / "live"
        self.live.mkdir()
        self.install(self.pki)
        self.api = f"127.0.0.1:{lab.free_tcp_port()}"
        self.metrics = f"127.0.0.1:{lab.free_tcp_port()}"
        config = rack(f"127.0.0.1:{lab.free_tcp_port()}", f"127.0.0.1:{lab.free_tcp_port()}", self.api)
        config["controller"]["metrics"] = self.metrics
        config["tls"] = {"ca": "live/ca.pem", "cert": "live/controller.pem", "key": "live/controller.key", "roles": ROLES}
        self.config_path = tmp / "rack.yaml"
        self.config_path.write_text(yaml.safe_dump(config))
        self.process = lab.Process([VENV_BIN / "jumbogate-controller", "--config", self.config_path], tmp / "controller.log").start()
        lab.wait_for_tcp(self.api, 20, process=self.process.popen)
        lab.wait_for_tcp(self.metrics, 20, process=self.process.popen)

    def install(self, pki: Pki) -> None:
        """Put a PKI's CA and controller certificate where the config points (each file replaced whole, as an operator's tools do)."""
        for source, name in ((pki.ca, "ca.pem"), (pki["controller"].cert, "controller.pem"), (pki["controller"].key, "controller.key")):
            staged = self.live / f".{name}.new"
            shutil.copyfile(source, staged)
            os.replace(staged, self.live / name)

    def ctl(self, *args: str, holder: str = "ops", pki: Pki | None = None) -> subprocess.CompletedProcess:
        pki = pki or self.pki
        identity = pki[holder]
        tls = ["--tls-ca", pki.ca, "--tls-cert", identity.cert, "--tls-key", identity.key]
        return subprocess.run(
            [VENV_BIN / "jumbogatectl", "--controller", self.api, "--timeout", "3", *map(str, tls), *args], capture_output=True, text=True, timeout=30
        )

    def channel(self, holder: str, pki: Pki | None = None) -> grpc.Channel:
        pki = pki or self.pki
        identity = pki[holder]
        creds = grpc.ssl_channel_credentials(pki.ca.read_bytes(), identity.key.read_bytes(), identity.cert.read_bytes())
        return grpc.secure_channel(self.api, creds)

    def served_certificate(self, pki: Pki, address: str | None = None) -> bytes:
        """The certificate a new TLS connection to the operator API (or `address`) is served (DER), connecting with `pki`'s admin client."""
        context = ssl.create_default_context(cafile=pki.ca)
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
        context.load_cert_chain(pki["ops"].cert, pki["ops"].key)
        context.set_alpn_protocols(["h2"])
        host, _, port = (address or self.api).rpartition(":")
        with socket.create_connection((host, int(port)), timeout=5) as raw, context.wrap_socket(raw) as tls:
            return tls.getpeercert(binary_form=True)


def der(path: Path) -> bytes:
    return ssl.PEM_cert_to_DER_cert(path.read_text())


@pytest.fixture
def controller(tmp_path):
    running = TlsController(tmp_path)
    try:
        yield running
    finally:
        running.process.stop()


def health_of(channel: grpc.Channel, service: str = ""):
    return health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(service=service), timeout=5).status


def test_health_and_reflection_are_open_to_every_role_and_to_no_one_else(controller):
    for holder in ("ops", "viewer"):
        with controller.channel(holder) as channel:
            assert health_of(channel, "jumbogate.v1.Policy") == health_pb2.HealthCheckResponse.SERVING
            assert "jumbogate.v1.Policy" in ProtoReflectionDescriptorDatabase(channel).get_services()
    with controller.channel("stranger") as channel:
        with pytest.raises(grpc.RpcError) as refused:
            health_of(channel)
        assert refused.value.code() == grpc.StatusCode.PERMISSION_DENIED and "has no role" in refused.value.details()
        with pytest.raises(grpc.RpcError) as refused:
            ProtoReflectionDescriptorDatabase(channel).get_services()
        assert refused.value.code() == grpc.StatusCode.PERMISSION_DENIED


def test_config_reload_needs_the_admin_role_and_nic_reads_do_not(controller):
    done = controller.ctl("config", "reload", holder="viewer")
    assert done.returncode == EXIT_DENIED and "ReloadConfig" in done.stderr and "admin" in done.stderr
    assert controller.ctl("config", "reload").returncode == EXIT_OK
    # A read: the viewer gets past the roles, to the controller's answer that its SmartNIC does not answer.
    done = controller.ctl("nic", "stats", holder="viewer")
    assert done.returncode == EXIT_UNREACHABLE and "the SmartNIC at" in done.stderr, done.stderr


def test_new_certificates_take_effect_on_sighup_for_new_connections(controller, tmp_path):
    assert controller.served_certificate(controller.pki) == der(controller.pki["controller"].cert)
    assert controller.served_certificate(controller.pki, controller.metrics) == der(controller.pki["controller"].cert)
    kept = controller.channel("ops")
    assert json.loads(controller.ctl("--json", "fleet", "show").stdout)["jumbo"] is True
    assert health_of(kept) == health_pb2.HealthCheckResponse.SERVING

    second = make_pki(tmp_path / "second", HOLDERS, clients=CLIENTS, ca_name="the next CA")
    controller.install(second)
    # Not before the reload: the new CA's clients are refused, the old ones still served.
    assert controller.ctl("fleet", "show", pki=second).returncode == EXIT_UNREACHABLE
    assert controller.ctl("fleet", "show").returncode == EXIT_OK

    os.kill(controller.process.popen.pid, signal.SIGHUP)
    lab.wait_until(lambda: controller.ctl("fleet", "show", pki=second).returncode == EXIT_OK, "the new CA's client served", 10)
    assert controller.served_certificate(second) == der(second["controller"].cert)
    assert controller.served_certificate(second, controller.metrics) == der(second["controller"].cert), "the metrics endpoint's too"
    assert controller.ctl("fleet", "show").returncode == EXIT_UNREACHABLE, "a client of the old CA is refused on a new connection"
    # A connection made before the reload keeps its session.
    assert health_of(kept) == health_pb2.HealthCheckResponse.SERVING
    kept.close()
    assert controller.process.running


def test_a_reload_with_unusable_certificate_files_changes_nothing(controller, tmp_path):
    second = make_pki(tmp_path / "second", HOLDERS, clients=CLIENTS, ca_name="the next CA")
    # A key that is not the certificate's (the operator copied one file of two).
    shutil.copyfile(second["controller"].cert, controller.live / "controller.pem")
    done = controller.ctl("config", "reload")
    assert done.returncode == EXIT_REFUSED and "is not the key of the certificate" in done.stderr, done.stderr
    (controller.live / "controller.pem").write_text("half a file")
    done = controller.ctl("config", "reload")
    assert done.returncode == EXIT_REFUSED and "controller.pem" in done.stderr, done.stderr
    # Still served with the certificate it had, on both endpoints.
    assert controller.served_certificate(controller.pki) == der(controller.pki["controller"].cert)
    assert controller.served_certificate(controller.pki, controller.metrics) == der(controller.pki["controller"].cert)
    stats = json.loads(controller.ctl("--json", "stats").stdout)
    assert int(stats["config_reloads"]["refused"]) == 2
