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
from jumbogate.store import PREFIX, RETIRE_GRACE_S, EtcdStore, StoreUnavailable
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


def connections_to(port: int) -> int:
    """This process's established TCP connections to `port`."""
    out = subprocess.run(["ss", "-tnp", "state", "established", f"( dport = :{port} )"], capture_output=True, text=True, check=True).stdout
    return sum(1 for line in out.splitlines() if f"pid={os.getpid()}," in line)


async def test_reloads_leave_no_connection_behind_and_the_watch_goes_on(pki, tls_etcd, tmp_path):
    """Before: each reload kept the channel it replaced, and that channel's connection to etcd, until
    the store closed (20 reloads: 21 connections). Now a replaced channel is closed after its calls'
    deadline, and the fleet's watch, which ran on the first one, goes on over the new."""
    store = EtcdStore(tls_etcd.store_url, install(pki, OLD_USER, tmp_path / "live"))
    controller = Controller(load_config(EXAMPLE), PIPELINE, listen=f"127.0.0.1:{free_tcp_port()}", store=store)
    await controller.fleet.start()
    watching = asyncio.create_task(controller.fleet.run())
    # Kept from the test's log capture: a captured record keeps the watch's exception, and through
    # its frames the call and connection of the channel it ran on, which the daemon's log does not.
    store_log = logging.getLogger("jumbogate.store")
    store_log.propagate = False
    try:
        await asyncio.sleep(0.3)
        for _ in range(2):
            for _ in range(10):
                store.use_tls(store.read_tls())  # what a SIGHUP's reload does
                await store.snapshot()  # a call over the new channel
            await asyncio.sleep(RETIRE_GRACE_S + 1)
            assert connections_to(tls_etcd.client_port) == 1, "replaced channels kept their connections"
        before = controller.state.fleet_jumbo
        tls_etcd.ctl("put", PREFIX + "fleet/jumbo", "false" if before else "true")

        async def seen():
            while controller.state.fleet_jumbo == before:
                await asyncio.sleep(0.05)

        await asyncio.wait_for(seen(), 10)
        assert not watching.done()
    finally:
        store_log.propagate = True
        watching.cancel()
        await asyncio.gather(watching, return_exceptions=True)
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
