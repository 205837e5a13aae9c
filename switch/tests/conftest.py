"""Fixtures for the jumbogate-switch integration tests.

They need root (namespaces, veths, raw sockets) and the built program;
without either the whole directory is skipped with one line saying why.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from switch_harness import INFO, OK, SWITCH_BINARY, Client, OnePortSwitch


def _missing() -> str | None:
    if os.geteuid() != 0:
        return "needs root (network namespaces, veths, raw sockets)"
    if not SWITCH_BINARY.exists():
        return f"{SWITCH_BINARY} is missing; run 'make setup'"
    for tool in ("ip", "ethtool"):
        if shutil.which(tool) is None:
            return f"needs {tool} on PATH"
    return None


def pytest_collection_modifyitems(config, items):
    reason = _missing()
    if reason is None:
        return
    here = Path(__file__).parent
    skipped = [item for item in items if Path(str(item.fspath)).parent == here]
    for item in skipped:
        item.add_marker(pytest.mark.skip(reason=f"jumbogate-switch integration: {reason}"))
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if reporter and skipped:
        reporter.write_line(f"SKIPPED: {len(skipped)} jumbogate-switch tests: {reason}", yellow=True, bold=True)


@pytest.fixture(scope="module")
def log_dir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("switch")


@pytest.fixture(scope="module")
def switch(log_dir):
    wiring = OnePortSwitch(log_dir)
    yield wiring
    wiring.close()


@pytest.fixture
def primary(switch):
    client = Client(switch.switch.grpc_address, election_low=100)
    assert client.arbitrate().status.code == OK
    client.set_pipeline(INFO)
    yield client
    client.close()
