"""Fixtures shared by the controller's tests."""

import asyncio
import threading
from pathlib import Path

import pytest

from jumbogate.config import load_config
from jumbogate.controller import Controller
from jumbogate.server import serve
from testlab import lab
from testlab.etcd_process import EtcdServer, missing_etcd

EXAMPLE = Path(__file__).resolve().parents[1] / "rack.example.yaml"


class ServerThread:
    """A controller's operator API on its own event loop, as in the daemon."""

    def __init__(self):
        self.address = f"127.0.0.1:{lab.free_tcp_port()}"
        self.controller = Controller(load_config(EXAMPLE), Path("unused"), listen=self.address)
        self.loop = asyncio.new_event_loop()
        self.started = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        asyncio.set_event_loop(self.loop)
        self.server = self.loop.run_until_complete(serve(self.controller.service, self.address))
        self.started.set()
        self.loop.run_forever()

    def __enter__(self):
        self.thread.start()
        assert self.started.wait(10)
        return self

    def __exit__(self, *exc):
        asyncio.run_coroutine_threadsafe(self.server.stop(0), self.loop).result(5)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(5)


@pytest.fixture
def api():
    with ServerThread() as server:
        yield server


# ----- a real etcd (Debian's etcd-server), one per test session -----


def pytest_collection_modifyitems(config, items):
    missing = missing_etcd()
    needing = [item for item in items if {"etcd", "etcd_server"} & set(getattr(item, "fixturenames", ()))]
    if not missing or not needing:
        return
    reason = f"need {' and '.join(missing)} on PATH (Debian's etcd-server and etcd-client; make setup installs them)"
    for item in needing:
        item.add_marker(pytest.mark.skip(reason=reason))
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if reporter:
        reporter.write_line(f"SKIPPED: {len(needing)} etcd store tests; they {reason}", yellow=True, bold=True)


@pytest.fixture(scope="session")
def etcd_server(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("etcd")
    server = EtcdServer(tmp / "data", tmp / "etcd.log").start()
    yield server
    server.stop()


@pytest.fixture
def etcd(etcd_server):
    """The session's etcd with no jumbogate keys in it."""
    etcd_server.ctl("del", "--prefix", "/jumbogate/")
    return etcd_server
