"""Mutual TLS on every control channel, against the real parts.

One rig per switch target: jumbogate-switch (or BMv2) serving P4Runtime over
mutual TLS, jumbogate-nic serving its control API over mutual TLS, and the
controller with a `tls` section, all with certificates from a throwaway CA
(jumbogate.pki). The clients are the real jumbogatectl and plain gRPC,
finsy and HTTPS clients: with the right certificate, with none, with one
from another CA, with names the roles do not list, with a listed name in
the wrong place (a URI or e-mail SAN, the common name), and with a server's
certificate used to connect.
"""

from __future__ import annotations

import asyncio
import json
import re
import ssl
import subprocess
import urllib.error
import urllib.request
from pathlib import Path

import finsy as fy
import grpc
import pytest
import yaml
from controller_rig import PORTS, VENV_BIN, rack_config, wait_until
from finsy.p4client import P4ClientError
from finsy.proto import p4r, p4r_grpc

from jumbogate.pki import make_pki
from jumbogate.v1 import nic_pb2, nic_pb2_grpc
from testlab import lab

pytestmark = [pytest.mark.timeout(300)]
TARGETS = [pytest.param("soft", id="soft"), pytest.param("bmv2", id="bmv2", marks=pytest.mark.bmv2)]
NIC = lab.NIC
SOFT_SWITCH = lab.SOFT_SWITCH
# Holders of the rig's certificates: the three servers (on loopback),
# operator clients the roles name (and one they do not), and two that spell
# an allowed name everywhere but in a DNS subject alternative name.
HOLDERS = {
    "controller": ["127.0.0.1"],
    "switch": ["127.0.0.1"],
    "smartnic": ["127.0.0.1"],
    "ops": [],
    "viewer": [],
    "stranger": [],
    "not-the-controller": ["uri:controller", "email:controller", "cn:controller"],
    "not-ops": ["uri:ops", "email:ops", "cn:ops"],
}
CLIENTS = {"controller", "ops", "viewer", "stranger", "not-the-controller", "not-ops"}
ROLES = {"admin": ["ops"], "read_only": ["viewer"]}
EXIT_UNREACHABLE, EXIT_DENIED = 4, 6


def start_null_nic(tmp: Path, address: str, options: list[str], name: str = "nic") -> lab.Process:
    """jumbogate-nic on a null port (no traffic: the control API is what is tested)."""
    args = [NIC, "--no-huge", "-m", "512", "--no-pci", "--file-prefix", f"jgtls-{name}", "--vdev=net_null0,no-rx=1", "-l", "0-1"]
    return lab.start_dpdk_service([*args, "--", "--grpc", address, *options], tmp / f"{name}.log", address)


class TlsRig:
    def __init__(self, tmp: Path, veths: list[lab.VethPair], target: str):
        self.tmp = tmp
        self.target = target
        self.pki = make_pki(tmp / "pki", HOLDERS, clients=CLIENTS)
        self.other = make_pki(tmp / "other-ca", {"ops": [], "controller": []}, clients={"ops", "controller"}, ca_name="another CA")
        switch_tls = lab.ServerTls(self.pki["switch"].cert, self.pki["switch"].key, self.pki.ca, allow=("controller",))
        self.switch = lab.make_switch(target, {n: veths[n - 1].a for n in PORTS}, tmp / f"{target}.log", tls=switch_tls)
        self.switch.grpc_address = f"127.0.0.1:{lab.free_tcp_port()}"
        self.api = f"127.0.0.1:{lab.free_tcp_port()}"
        self.metrics = f"127.0.0.1:{lab.free_tcp_port()}"
        self.nic_address = f"127.0.0.1:{lab.free_tcp_port()}"
        config = yaml.safe_load(rack_config(tmp, veths, self.switch.grpc_address, self.nic_address, self.api, self.metrics).read_text())
        controller = self.pki["controller"]
        # Relative to the config file, as an operator would write them.
        config["tls"] = {"ca": "pki/ca.pem", "cert": f"pki/{controller.cert.name}", "key": f"pki/{controller.key.name}", "roles": ROLES}
        self.config_path = tmp / "rack.yaml"
        self.config_path.write_text(yaml.safe_dump(config))
        self.nic: lab.Process | None = None
        self.controller: lab.Process | None = None

    def start(self) -> None:
        self.switch.start()
        smartnic = self.pki["smartnic"]
        tls = ["--tls-cert", smartnic.cert, "--tls-key", smartnic.key, "--tls-client-ca", self.pki.ca, "--tls-allow", "controller"]
        self.nic = start_null_nic(self.tmp, self.nic_address, tls)
        self.controller = lab.Process([VENV_BIN / "jumbogate-controller", "--config", self.config_path], self.tmp / "controller.log").start()
        lab.wait_for_tcp(self.api, 20, process=self.controller.popen)

    def stop(self) -> None:
        for part in (self.controller, self.nic):
            if part:
                part.stop()
        self.switch.stop()

    def ctl(self, *args: str, holder: str | None = "ops", pki=None) -> subprocess.CompletedProcess:
        """jumbogatectl as `holder` (None: without a certificate); `pki`: whose certificate it holds."""
        tls = []
        if holder is not None:
            identity = (pki or self.pki)[holder]
            tls = ["--tls-ca", self.pki.ca, "--tls-cert", identity.cert, "--tls-key", identity.key]
        return subprocess.run(
            [VENV_BIN / "jumbogatectl", "--controller", self.api, "--timeout", "3", *map(str, tls), *args], capture_output=True, text=True, timeout=30
        )

    def stats(self) -> dict:
        done = self.ctl("--json", "stats")
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout)


@pytest.fixture(scope="module", params=TARGETS)
def rig(request, tmp_path_factory):
    tmp = tmp_path_factory.mktemp(f"tls-{request.param}")
    with lab.veth_pairs("jgt", len(PORTS)) as veths:
        rig = TlsRig(tmp, veths, request.param)
        try:
            rig.start()
            yield rig
        finally:
            rig.stop()


def test_the_controller_programs_the_switch_and_reaches_the_smartnic_over_mutual_tls(rig):
    stats = wait_until(
        lambda: (s := rig.stats())["switch_connected"] and int(s["reconcile"]["runs"]) >= 1 and s["nic"]["reachable"] and s, 30, "switch and SmartNIC"
    )
    assert int(stats["reconcile"]["inserted"]) > 0, stats
    assert "mutual TLS" in rig.nic.output()


def test_a_read_only_client_reads_and_is_denied_every_change(rig):
    shown = rig.ctl("--json", "fleet", "show", holder="viewer")
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout)["jumbo"] is True
    for change in (["fleet", "jumbo", "off"], ["instance", "jumbo", "web-1", "off"], ["flows", "onload", "198.51.100.7:40000", "10.10.0.10:80"]):
        done = rig.ctl(*change, holder="viewer")
        assert done.returncode == EXIT_DENIED, (change, done.stdout, done.stderr)
        assert "permission denied" in done.stderr and "read-only" in done.stderr and "admin" in done.stderr
    assert json.loads(rig.ctl("--json", "fleet", "show").stdout)["jumbo"] is True
    assert json.loads(rig.ctl("--json", "instance", "show", "web-1").stdout)["jumbo"] is True


def test_an_admin_client_changes_the_policy(rig):
    assert rig.ctl("fleet", "jumbo", "off").returncode == 0
    assert json.loads(rig.ctl("--json", "fleet", "show", holder="viewer").stdout)["jumbo"] is False
    assert rig.ctl("fleet", "jumbo", "on").returncode == 0


def test_no_certificate_another_ca_and_an_unlisted_name_are_refused(rig):
    plaintext = rig.ctl("fleet", "show", holder=None)
    assert plaintext.returncode == EXIT_UNREACHABLE, plaintext.stderr
    foreign = rig.ctl("fleet", "show", pki=rig.other)
    assert foreign.returncode == EXIT_UNREACHABLE, foreign.stderr
    stranger = rig.ctl("fleet", "show", holder="stranger")
    assert stranger.returncode == EXIT_DENIED, stranger.stderr
    assert "stranger" in stranger.stderr and "has no role" in stranger.stderr


def nic_stats(address: str, credentials: grpc.ChannelCredentials | None) -> grpc.StatusCode:
    channel = grpc.secure_channel(address, credentials) if credentials else grpc.insecure_channel(address)
    with channel:
        try:
            nic_pb2_grpc.NicStub(channel).GetStats(nic_pb2.GetNicStatsRequest(), timeout=3)
            return grpc.StatusCode.OK
        except grpc.RpcError as err:
            return err.code()


def credentials(ca: Path, identity) -> grpc.ChannelCredentials:
    return grpc.ssl_channel_credentials(ca.read_bytes(), identity.key.read_bytes(), identity.cert.read_bytes())


def test_a_listed_name_anywhere_but_a_dns_san_has_no_role(rig):
    impostor = rig.ctl("fleet", "show", holder="not-ops")
    assert impostor.returncode == EXIT_DENIED, impostor.stderr
    assert "has no role" in impostor.stderr and "not-ops" in impostor.stderr


def nic_configure(address: str, credentials: grpc.ChannelCredentials) -> grpc.StatusCode:
    with grpc.secure_channel(address, credentials) as channel:
        try:
            nic_pb2_grpc.NicStub(channel).Configure(nic_pb2.NicConfig(), timeout=3)
            return grpc.StatusCode.OK
        except grpc.RpcError as err:
            return err.code()


def test_the_smartnic_answers_only_the_identities_it_allows(rig):
    """A certificate from the CA is not a grant: the dashboard's, an operator's, or one that spells
    'controller' in a URI, an e-mail address or its common name can call nothing, not even a read."""
    for holder in ("viewer", "ops", "not-the-controller"):
        creds = credentials(rig.pki.ca, rig.pki[holder])
        assert nic_stats(rig.nic_address, creds) == grpc.StatusCode.PERMISSION_DENIED, holder
        assert nic_configure(rig.nic_address, creds) == grpc.StatusCode.PERMISSION_DENIED, holder
    with grpc.secure_channel(rig.nic_address, credentials(rig.pki.ca, rig.pki["viewer"])) as channel:
        with pytest.raises(grpc.RpcError) as denied:
            nic_pb2_grpc.NicStub(channel).GetStats(nic_pb2.GetNicStatsRequest(), timeout=3)
    assert "viewer" in denied.value.details() and "--tls-allow" in denied.value.details()


def test_a_servers_certificate_cannot_be_used_to_call(rig):
    """Leaf certificates carry the usage of their holder: the switch's (serverAuth only) fails the handshake as a client."""
    assert nic_stats(rig.nic_address, credentials(rig.pki.ca, rig.pki["switch"])) == grpc.StatusCode.UNAVAILABLE


def test_the_smartnic_takes_only_clients_with_a_certificate_from_its_ca(rig):
    assert nic_stats(rig.nic_address, credentials(rig.pki.ca, rig.pki["controller"])) == grpc.StatusCode.OK
    assert nic_stats(rig.nic_address, None) == grpc.StatusCode.UNAVAILABLE
    assert nic_stats(rig.nic_address, credentials(rig.pki.ca, rig.other["ops"])) == grpc.StatusCode.UNAVAILABLE
    # No client certificate at all, though the server's is trusted.
    assert nic_stats(rig.nic_address, grpc.ssl_channel_credentials(rig.pki.ca.read_bytes())) == grpc.StatusCode.UNAVAILABLE


def switch_answers(rig, tls: fy.GRPCCredentialsTLS | None) -> bool:
    async def go() -> bool:
        options = fy.SwitchOptions(p4info=lab.PIPELINE_512 / "jumbogate.p4info.txtpb", initial_election_id=1, channel_credentials=tls)
        try:
            async with asyncio.timeout(8):
                async with fy.Switch("tls-probe", rig.switch.grpc_address, options) as probe:
                    return probe.p4info is not None
        except (TimeoutError, grpc.RpcError, OSError, P4ClientError):
            return False

    return asyncio.run(go())


def test_the_switch_takes_only_p4runtime_clients_with_a_certificate_from_its_ca(rig):
    controller = rig.pki["controller"]
    assert switch_answers(rig, fy.GRPCCredentialsTLS(cacert=rig.pki.ca, cert=controller.cert, private_key=controller.key))
    assert not switch_answers(rig, None)
    foreign = rig.other["controller"]
    assert not switch_answers(rig, fy.GRPCCredentialsTLS(cacert=rig.pki.ca, cert=foreign.cert, private_key=foreign.key))


def p4runtime_call(address: str, creds: grpc.ChannelCredentials) -> grpc.RpcError | None:
    """One Capabilities call and one Write (the calls a dashboard would try first); the first refusal, or None."""
    with grpc.secure_channel(address, creds) as channel:
        stub = p4r_grpc.P4RuntimeStub(channel)
        try:
            stub.Capabilities(p4r.CapabilitiesRequest(), timeout=3)
            stub.Write(p4r.WriteRequest(device_id=1, election_id=p4r.Uint128(high=1 << 63)), timeout=3)
        except grpc.RpcError as err:
            return err
    return None


def test_the_switch_answers_only_the_identities_it_allows(rig):
    """jumbogate-switch checks who calls (--tls-allow); BMv2 has no such check, which this records."""
    for holder in ("viewer", "ops", "not-the-controller"):
        refused = p4runtime_call(rig.switch.grpc_address, credentials(rig.pki.ca, rig.pki[holder]))
        if rig.target == "bmv2":
            assert refused is None or refused.code() != grpc.StatusCode.UNAVAILABLE, holder
            continue
        assert refused is not None and refused.code() == grpc.StatusCode.PERMISSION_DENIED, (holder, refused)
        assert holder in refused.details() or "controller" in refused.details()


def scrape_as(rig, holder: str) -> bytes:
    context = ssl.create_default_context(cafile=str(rig.pki.ca))
    context.load_cert_chain(str(rig.pki[holder].cert), str(rig.pki[holder].key))
    with urllib.request.urlopen(f"https://{rig.metrics}/metrics", context=context, timeout=5) as answer:
        assert answer.status == 200
        return answer.read()


def test_metrics_are_served_over_https_to_client_certificates_only(rig):
    assert b"jumbogate_" in scrape_as(rig, "viewer")
    anonymous = ssl.create_default_context(cafile=str(rig.pki.ca))
    with pytest.raises((urllib.error.URLError, ssl.SSLError, ConnectionError)):
        urllib.request.urlopen(f"https://{rig.metrics}/metrics", context=anonymous, timeout=5).read()


def test_metrics_refuse_a_certificate_from_the_ca_without_a_role(rig):
    for holder in ("stranger", "not-ops"):
        with pytest.raises((urllib.error.URLError, ssl.SSLError, ConnectionError, OSError)):
            scrape_as(rig, holder)
    text = scrape_as(rig, "ops").decode()
    refused = re.search(r'^jumbogate_metrics_connections_refused_total\{reason="no_role"\} (\S+)$', text, re.M)
    assert refused and float(refused.group(1)) >= 2, text[:2000]


# ----- plaintext where it must not be -----


def test_the_programs_refuse_plaintext_on_a_non_loopback_address_unless_insecure(tmp_path):
    port = lab.free_tcp_port()
    refused = subprocess.run(
        [
            NIC,
            "--no-huge",
            "-m",
            "512",
            "--no-pci",
            "--file-prefix",
            "jgtls-refuse",
            "--vdev=net_null0,no-rx=1",
            "-l",
            "0-1",
            "--",
            "--grpc",
            f"0.0.0.0:{port}",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert refused.returncode != 0
    assert f"refusing plaintext gRPC on 0.0.0.0:{port}, which is not a loopback address" in refused.stderr, refused.stderr
    allowed = start_null_nic(tmp_path, f"0.0.0.0:{port}", ["--insecure"], name="insecure")
    try:
        assert f"WARNING: plaintext gRPC on 0.0.0.0:{port} (--insecure)" in allowed.output()
    finally:
        allowed.stop()
    switch = subprocess.run(
        [
            SOFT_SWITCH,
            "--no-huge",
            "-m",
            "512",
            "--no-pci",
            "--file-prefix",
            "jgtls-sw",
            "-l",
            "0-1",
            "--vdev=net_null0",
            "--",
            "--port",
            "1=net_null0",
            "--grpc",
            f"0.0.0.0:{port}",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert switch.returncode != 0
    assert "refusing plaintext gRPC on" in switch.stderr, switch.stderr


def test_tls_options_go_together(tmp_path):
    half = subprocess.run([NIC, "--no-huge", "--no-pci", "--", "--tls-cert", "/nonexistent.pem"], capture_output=True, text=True, timeout=60)
    assert half.returncode != 0
    assert "--tls-cert, --tls-key and --tls-client-ca go together" in half.stderr, half.stderr


@pytest.mark.parametrize("program", [NIC, SOFT_SWITCH], ids=["nic", "switch"])
def test_mutual_tls_names_who_may_call(tmp_path, program):
    pki = make_pki(tmp_path / "pki", {"server": ["127.0.0.1"]}, clients=set())
    files = ["--tls-cert", str(pki["server"].cert), "--tls-key", str(pki["server"].key), "--tls-client-ca", str(pki.ca)]
    ports = ["--port", "1=net_null0"] if program == SOFT_SWITCH else []
    eal = [program, "--no-huge", "-m", "256", "--no-pci", "--file-prefix", f"jgtls-allow-{tmp_path.name}", "--vdev=net_null0", "-l", "0", "--"]
    unnamed = subprocess.run([*eal, *ports, *files], capture_output=True, text=True, timeout=60)
    assert unnamed.returncode != 0
    assert "mutual TLS needs at least one --tls-allow NAME" in unnamed.stderr, unnamed.stderr
    plaintext = subprocess.run([*eal, *ports, "--tls-allow", "controller"], capture_output=True, text=True, timeout=60)
    assert plaintext.returncode != 0
    assert "--tls-allow needs mutual TLS" in plaintext.stderr, plaintext.stderr


def test_the_controller_refuses_a_plaintext_api_on_a_non_loopback_address_unless_insecure(tmp_path):
    with lab.veth_pairs("jgu", len(PORTS)) as veths:
        listen = f"0.0.0.0:{lab.free_tcp_port()}"
        path = rack_config(tmp_path, veths, "127.0.0.1:1", "127.0.0.1:2", listen, f"127.0.0.1:{lab.free_tcp_port()}")
        refused = subprocess.run([VENV_BIN / "jumbogate-controller", "--config", path], capture_output=True, text=True, timeout=60)
        assert refused.returncode == 1
        assert f"refusing plaintext operator API on {listen}, which is not a loopback address" in refused.stderr, refused.stderr
        config = yaml.safe_load(path.read_text())
        config["controller"]["insecure"] = True
        path.write_text(yaml.safe_dump(config))
        allowed = lab.Process([VENV_BIN / "jumbogate-controller", "--config", path], tmp_path / "insecure.log").start()
        try:
            lab.wait_for_tcp(listen.replace("0.0.0.0", "127.0.0.1"), 20, process=allowed.popen)
            wait_until(lambda: "WARNING: plaintext operator API" in allowed.output(), 30, "the warning")
        finally:
            allowed.stop()
