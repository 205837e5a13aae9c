"""The store's TLS files (--store-ca, --store-cert, --store-key) read again on SIGHUP, and checked by config validate.

A real etcd serves over mutual TLS with its auth on: who the controller is to
etcd is its certificate's common name, so a certificate rotated to a new etcd
user (the old one revoked) shows which files a call to etcd used.
"""

from __future__ import annotations

import asyncio
import logging
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from jumbogate import election, learned
from jumbogate.config import load_config
from jumbogate.controller import Controller
from jumbogate.pki import make_pki
from jumbogate.store import PREFIX, EtcdStore, StoreUnavailable
from jumbogate.tls import TlsConfig
from testlab.etcd_process import EtcdServer, EtcdTls, missing_etcd
from testlab.lab import free_tcp_port

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "controlplane" / "rack.example.yaml"
PIPELINE = REPO / "p4src" / "compiled" / "depth256"
CTL = Path(sys.executable).parent / "jumbogatectl"
OLD_USER, NEW_USER = "jumbogate-controller", "jumbogate-controller-2"

pytestmark = [pytest.mark.timeout(60), pytest.mark.skipif(bool(missing_etcd()), reason="needs etcd and etcdctl (make setup installs them)")]


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    holders = {"etcd": ["127.0.0.1"], "root": [], OLD_USER: [], NEW_USER: []}
    return make_pki(tmp_path_factory.mktemp("pki"), holders, clients={"root", OLD_USER, NEW_USER})


@pytest.fixture
def tls_etcd(pki, tmp_path):
    server = EtcdServer(tmp_path / "data", tmp_path / "etcd.log", tls=EtcdTls(pki.ca, pki["etcd"].cert, pki["etcd"].key, pki["root"].cert, pki["root"].key))
    server.start()
    server.enable_auth("root")
    server.grant(OLD_USER, "jumbogate", PREFIX, election.ELECTION_PREFIX, learned.LEARNED_PREFIX)
    server.ctl("user", "add", NEW_USER, "--no-password")
    server.ctl("user", "grant-role", NEW_USER, "jumbogate")
    yield server
    server.stop()


def install(pki, holder: str, live: Path) -> TlsConfig:
    """The controller's TLS files where it reads them: the CA, and `holder`'s certificate and key."""
    live.mkdir(exist_ok=True)
    shutil.copyfile(pki.ca, live / "ca.pem")
    shutil.copyfile(pki[holder].cert, live / "cert.pem")
    shutil.copyfile(pki[holder].key, live / "key.pem")
    return TlsConfig(live / "ca.pem", live / "cert.pem", live / "key.pem")


async def test_sighup_reads_the_stores_tls_files_again_and_refuses_bad_ones(pki, tls_etcd, tmp_path, caplog):
    """Before: the controller kept the files it read at start; rotated to a new etcd user, the old
    one revoked, it lost the store until restarted."""
    live = tmp_path / "live"
    store = EtcdStore(tls_etcd.store_url, install(pki, OLD_USER, live))
    controller = Controller(load_config(EXAMPLE), PIPELINE, listen=f"127.0.0.1:{free_tcp_port()}", store=store)
    await controller.fleet.start()
    loop = asyncio.get_running_loop()
    # What the daemon does with SIGHUP.
    loop.add_signal_handler(signal.SIGHUP, controller.reload)
    try:
        install(pki, NEW_USER, live)
        tls_etcd.ctl("user", "revoke-role", OLD_USER, "jumbogate")
        with pytest.raises(StoreUnavailable, match="permission denied"):
            await store.snapshot()  # still the old certificate's user
        os.kill(os.getpid(), signal.SIGHUP)
        await asyncio.sleep(0.2)
        await controller.fleet.set_fleet(False)
        assert tls_etcd.ctl("get", PREFIX + "fleet/jumbo", "--print-value-only").stdout.strip() == "false"
        assert controller.state.config_reload_refusals == 0

        # A key that is not the certificate's: refused in one line, the files in force stay.
        caplog.set_level(logging.ERROR, logger="jumbogate.controller")
        (live / "key.pem").write_bytes(Path(pki["root"].key).read_bytes())
        os.kill(os.getpid(), signal.SIGHUP)
        await asyncio.sleep(0.2)
        refusals = [r.getMessage() for r in caplog.records if "reload refused" in r.getMessage()]
        assert len(refusals) == 1 and "the store's TLS files cannot be used" in refusals[0], refusals
        assert controller.state.config_reload_refusals == 1
        await controller.fleet.set_fleet(True)
        assert tls_etcd.ctl("get", PREFIX + "fleet/jumbo", "--print-value-only").stdout.strip() == "true"
    finally:
        loop.remove_signal_handler(signal.SIGHUP)
        await store.close()


def validate(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(CTL), "config", "validate", str(EXAMPLE), "--pipeline", str(PIPELINE), *args], capture_output=True, text=True, timeout=30)


def test_config_validate_checks_the_stores_tls_files_as_the_controllers_start_does(pki, tmp_path):
    """Before: validate took no store options; the controller then refused its --store-key at start."""
    tls = install(pki, OLD_USER, tmp_path / "live")
    store = ["--store", "etcd://127.0.0.1:2379", "--store-ca", str(tls.ca), "--store-cert", str(tls.cert)]
    done = validate(*store, "--store-key", str(pki["root"].key))
    assert done.returncode == 2 and "the store's TLS files cannot be used" in done.stderr and "is not the key of the certificate" in done.stderr, done.stderr
    done = validate(*store)
    assert done.returncode == 2 and "--store-key missing" in done.stderr, done.stderr
    done = validate(*store, "--store-key", str(tmp_path / "nowhere.pem"))
    assert done.returncode == 2 and "cannot read" in done.stderr, done.stderr
    done = validate("--store", "etcd://127.0.0.1:2379,127.0.0.2:2379", "--store-ca", str(tls.ca), "--store-cert", str(tls.cert), "--store-key", str(tls.key))
    assert done.returncode == 2 and "--store-server-name" in done.stderr, done.stderr
    done = validate(*store, "--store-key", str(tls.key))
    assert done.returncode == 0, done.stderr
