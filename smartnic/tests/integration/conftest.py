"""Fixtures for the jumbogate-nic integration tests.

They need root (namespaces, veths, raw sockets) and the built program;
without either the whole directory is skipped with one line saying why.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from testlab.nic_harness import NIC_BINARY, SinglePort, start_null_nic  # noqa: E402

# Addresses of the single-port wiring: the program's only port faces the
# "switch" namespace, which plays both the Internet and the rack.
RACK_PREFIX = "10.10.0.0/16"
RACK_PREFIX_V6 = "fd00:10::/32"


def _missing() -> str | None:
    if os.geteuid() != 0:
        return "needs root (network namespaces, veths, raw sockets)"
    if not NIC_BINARY.exists():
        return f"{NIC_BINARY} is missing; run 'make setup'"
    for tool in ("ip", "ethtool", "tshark"):
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
        item.add_marker(pytest.mark.skip(reason=f"jumbogate-nic integration: {reason}"))
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if reporter and skipped:
        reporter.write_line(f"SKIPPED: {len(skipped)} jumbogate-nic tests: {reason}", yellow=True, bold=True)


@pytest.fixture(scope="module")
def log_dir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("nic")


@pytest.fixture(scope="module")
def single_port(log_dir):
    wiring = SinglePort(
        log_dir,
        [
            "--internal-prefix",
            RACK_PREFIX,
            "--internal-prefix",
            RACK_PREFIX_V6,
            "--path-mtu",
            "198.51.100.0/24=1400",
            "--caravan-pack",
            "on",
        ],
    )
    yield wiring
    wiring.close()


@pytest.fixture(scope="module")
def nic(log_dir):
    """jumbogate-nic on a null port (no traffic), for its control API."""
    process = start_null_nic(log_dir, ["--internal-prefix", "10.10.0.0/16", "--path-mtu", "198.51.100.0/24=1400", "--max-flows", "1024"])
    yield process
    process.stop()


@pytest.fixture(scope="module")
def stub(nic):
    return nic.stub()
