"""The controller's channel to etcd over mutual TLS, and etcd's users deciding who may touch the policy.

A real etcd (Debian's) serves here over TLS only, with --client-cert-auth
(a client needs a certificate of the trusted CA) and etcd's auth on: the
controller's certificate's common name is an etcd user whose role grants
readwrite on the controller's prefixes and nothing else. A certificate of
the same CA whose common name is no user, or a user without that role, is
refused the policy: the CA's signature is not by itself a grant.
"""

from __future__ import annotations

import asyncio
import json
import logging
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from jumbogate import election, learned
from jumbogate.config import load_config
from jumbogate.election import Election
from jumbogate.fleet import FleetPolicy
from jumbogate.pki import make_pki
from jumbogate.store import PREFIX, Change, EtcdStore, StoreUnavailable
from jumbogate.tls import TlsConfig
from testlab import lab
from testlab.etcd_process import EtcdServer, EtcdTls, missing_etcd

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "controlplane" / "rack.example.yaml"
PIPELINE = REPO / "p4src" / "compiled" / "depth256"
CONTROLLER = Path(sys.executable).parent / "jumbogate-controller"
CTL = Path(sys.executable).parent / "jumbogatectl"
# The controller's etcd user: its certificate's common name.
CONTROLLER_USER = "jumbogate-controller"
# Every prefix the controller touches (docs/fleet.md lists the same for its etcd role).
CONTROLLER_PREFIXES = (PREFIX, election.ELECTION_PREFIX, learned.LEARNED_PREFIX)
BOUND_S = 20

pytestmark = [
    pytest.mark.timeout(60),
    pytest.mark.skipif(bool(missing_etcd()), reason="needs etcd and etcdctl on PATH (Debian's etcd-server and etcd-client)"),
]


class TlsEtcd:
    def __init__(self, tmp: Path):
        # etcd serves on 127.0.0.1 and carries the DNS name "etcd" (make_pki names every holder so).
        holders = {"etcd": ["127.0.0.1"], "root": [], CONTROLLER_USER: [], "stranger": [], "no-role": []}
        self.pki = make_pki(tmp / "pki", holders, clients={"root", CONTROLLER_USER, "stranger", "no-role"})
        # Another CA, and a certificate it signed with the controller's very name.
        self.other = make_pki(tmp / "other", {CONTROLLER_USER: []}, clients={CONTROLLER_USER}, ca_name="another CA")
        root = self.pki["root"]
        tls = EtcdTls(self.pki.ca, self.pki["etcd"].cert, self.pki["etcd"].key, root.cert, root.key)
        self.server = EtcdServer(tmp / "data", tmp / "etcd.log", tls=tls).start()
        self.server.enable_auth("root")
        self.server.grant(CONTROLLER_USER, "jumbogate", *CONTROLLER_PREFIXES)
        self.server.ctl("user", "add", "no-role", "--no-password")

    def tls(self, holder: str) -> TlsConfig:
        return TlsConfig(self.pki.ca, self.pki[holder].cert, self.pki[holder].key)

    @property
    def store_url(self) -> str:
        return self.server.store_url


@pytest.fixture(scope="module")
def tls_etcd(tmp_path_factory):
    etcd = TlsEtcd(tmp_path_factory.mktemp("etcd-tls"))
    yield etcd
    etcd.server.stop()


@pytest.fixture
def clean(tls_etcd):
    tls_etcd.server.ctl("del", "--prefix", "/jumbogate/")
    return tls_etcd


def policy_for(url: str, tls: TlsConfig | None, **options) -> FleetPolicy:
    return FleetPolicy(EtcdStore(url, tls, **options), load_config(EXAMPLE), "rack-1", lambda config, changed: None)


def stored(etcd: TlsEtcd, key: str):
    done = etcd.server.ctl("get", PREFIX + key, "--print-value-only")
    return json.loads(done.stdout) if done.stdout.strip() else None


async def test_a_fleet_policy_and_an_election_work_over_mutual_tls_as_the_etcd_user_the_certificate_names(clean):
    policy = policy_for(clean.store_url, clean.tls(CONTROLLER_USER))
    await policy.start()
    try:
        assert stored(clean, "fleet/jumbo") is True, "seeded over TLS"
        await policy.set_fleet(False)
        assert stored(clean, "fleet/jumbo") is False
        health = await policy.store.health()
        assert health.revision >= policy.revision and health.version.startswith("3.")
        # The election on the same channel: its keys (election prefix) and the epoch (policy prefix).
        candidate = Election(policy.store, "rack-1", "first")
        leading = await asyncio.wait_for(candidate.campaign(), BOUND_S)
        assert leading.revision > 0 and await candidate.leader() is not None
        await candidate.resign()
    finally:
        await policy.store.close()


@pytest.mark.parametrize("holder", ["stranger", "no-role"])
async def test_a_certificate_of_the_same_ca_whose_name_is_no_user_or_has_no_role_cannot_read_or_write_the_policy(clean, holder):
    """The "who is calling" check: etcd's CA check passes (the handshake succeeds), etcd's RBAC refuses."""
    owner = policy_for(clean.store_url, clean.tls(CONTROLLER_USER))
    await owner.start()
    await owner.store.close()
    before = clean.server.ctl("get", "--prefix", "/jumbogate/", "-w", "json").stdout
    intruder = EtcdStore(clean.store_url, clean.tls(holder))
    try:
        with pytest.raises(StoreUnavailable, match=r"refused the controller \(permission_denied") as refused:
            await intruder.open()
        assert f"{holder}.pem must be an etcd user" in str(refused.value) and election.ELECTION_PREFIX in str(refused.value)
        with pytest.raises(StoreUnavailable, match="permission_denied"):
            await intruder.commit(Change(0, puts={"fleet/jumbo": b"false"}))
        with pytest.raises(StoreUnavailable, match="permission_denied"):
            await Election(intruder, "rack-1", holder).campaign()
    finally:
        await intruder.close()
    after = clean.server.ctl("get", "--prefix", "/jumbogate/", "-w", "json").stdout
    assert json.loads(after)["kvs"] == json.loads(before)["kvs"] and stored(clean, "fleet/jumbo") is True


async def test_several_endpoints_over_tls_need_the_one_name_every_members_certificate_carries(clean):
    """gRPC checks one name for every member of an address list, not each member's own address."""
    port = clean.server.client_port
    several = f"etcd://127.0.0.2:{lab.free_tcp_port()},127.0.0.1:{port}"
    with pytest.raises(ValueError, match="--store-server-name"):
        EtcdStore(several, clean.tls(CONTROLLER_USER))
    # The first endpoint is not there: pick_first moves on to the second, whose certificate names "etcd".
    store = EtcdStore(several, clean.tls(CONTROLLER_USER), server_name="etcd")
    try:
        await store.open()
    finally:
        await store.close()
    wrong = EtcdStore(several, clean.tls(CONTROLLER_USER), server_name="not-etcd")
    try:
        with pytest.raises(StoreUnavailable, match="names not-etcd"):
            await wrong.open()
    finally:
        await wrong.close()


async def test_plaintext_to_a_non_loopback_etcd_is_warned_at_start_and_to_a_loopback_one_not(caplog, etcd):
    caplog.set_level(logging.WARNING, "jumbogate.store")
    remote = EtcdStore("etcd://192.0.2.1:2379")  # TEST-NET-1: nobody answers, the warning comes first
    with pytest.raises(StoreUnavailable, match="--store-ca, --store-cert and --store-key"):
        await remote.open()
    await remote.close()
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and warnings[0].startswith("WARNING: plaintext to etcd at etcd://192.0.2.1:2379"), warnings
    caplog.clear()
    local = EtcdStore(etcd.store_url)
    await local.open()
    await local.close()
    assert not [r for r in caplog.records if r.levelno == logging.WARNING]


# ----- the daemon, as an operator runs it -----


def controller(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(CONTROLLER), "--config", str(EXAMPLE), "--pipeline", str(PIPELINE), *args], capture_output=True, text=True, timeout=30)


def one_line(result: subprocess.CompletedProcess) -> str:
    lines = [line for line in result.stderr.splitlines() if line.startswith("jumbogate-controller:")]
    assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr
    return lines[0]


def tls_flags(ca: Path, identity) -> list[str]:
    return ["--store-ca", str(ca), "--store-cert", str(identity.cert), "--store-key", str(identity.key)]


def test_the_controller_without_a_client_certificate_or_with_one_of_another_ca_exits_1_with_one_line(clean, tmp_path):
    """As for an unreachable store: exit 1, one line naming the store and what to check."""
    plain = controller("--store", clean.store_url)
    assert plain.returncode == 1, plain.stderr
    line = one_line(plain)
    assert clean.store_url in line and "needs --store-ca, --store-cert and --store-key" in line, line
    # A CA file that trusts etcd's certificate too: only etcd can refuse this one.
    bundle = tmp_path / "cas.pem"
    bundle.write_bytes(clean.other.ca.read_bytes() + clean.pki.ca.read_bytes())
    foreign = controller("--store", clean.store_url, *tls_flags(bundle, clean.other[CONTROLLER_USER]))
    assert foreign.returncode == 1, foreign.stderr
    line = one_line(foreign)
    assert clean.store_url in line and "etcd trusts the CA that signed --store-cert" in line, line
    assert stored(clean, "fleet/jumbo") is None, "nothing was seeded"


def test_the_controller_serves_with_the_store_over_mutual_tls(clean, tmp_path):
    address = f"127.0.0.1:{lab.free_tcp_port()}"
    log = tmp_path / "controller.log"
    with open(log, "w") as out:
        proc = subprocess.Popen(
            [str(CONTROLLER), "--config", str(EXAMPLE), "--pipeline", str(PIPELINE), "--listen", address, "--store", clean.store_url,
             *tls_flags(clean.pki.ca, clean.pki[CONTROLLER_USER])],
            stdout=out, stderr=subprocess.STDOUT,
        )  # fmt: skip
    try:
        serving = [str(CTL), "--controller", address, "--timeout", "1", "fleet", "show"]
        lab.wait_until(lambda: subprocess.run(serving, capture_output=True).returncode == 0, "the controller to serve", 20)
        assert stored(clean, "fleet/jumbo") is True, "seeded through the TLS channel"
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=15)
    assert proc.returncode == 0, log.read_text()
    assert "plaintext" not in log.read_text()


def test_the_stores_tls_options_are_all_three_or_none_and_their_files_are_checked_at_start(tmp_path):
    """Exit 2 and one line, before anything connects: as for the operator API's TLS files."""
    pki = make_pki(tmp_path / "pki", {CONTROLLER_USER: [], "other": []}, clients={CONTROLLER_USER, "other"})
    store = ["--store", f"etcd://127.0.0.1:{lab.free_tcp_port()}"]
    half = controller(*store, "--store-ca", str(pki.ca))
    assert half.returncode == 2 and "(--store-cert, --store-key missing)" in one_line(half), half.stderr
    swapped = controller(*store, "--store-ca", str(pki.ca), "--store-cert", str(pki[CONTROLLER_USER].cert), "--store-key", str(pki["other"].key))
    assert swapped.returncode == 2 and "is not the key of the certificate" in one_line(swapped), swapped.stderr
    absent = controller(
        *store, "--store-ca", str(tmp_path / "nowhere.pem"), "--store-cert", str(pki[CONTROLLER_USER].cert), "--store-key", str(pki[CONTROLLER_USER].key)
    )
    assert absent.returncode == 2 and "cannot read" in one_line(absent), absent.stderr
    memory = controller(*tls_flags(pki.ca, pki[CONTROLLER_USER]))
    assert memory.returncode == 2 and "for an etcd store" in one_line(memory), memory.stderr
    several = controller("--store", "etcd://127.0.0.1:1,127.0.0.2:1", *tls_flags(pki.ca, pki[CONTROLLER_USER]))
    assert several.returncode == 2 and "--store-server-name" in one_line(several), several.stderr
