"""Fixtures for the jumbogate-nic integration tests.

They need root (namespaces, veths, raw sockets) and the built program;
without either the whole directory is skipped with one line saying why.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from testlab import integration
from testlab.nic_harness import NIC_BINARY, SinglePort, start_null_nic

# Addresses of the single-port wiring: the program's only port faces the
# "switch" namespace, which plays both the Internet and the rack.
RACK_PREFIX = "10.10.0.0/16"
RACK_PREFIX_V6 = "fd00:10::/32"


def pytest_collection_modifyitems(config, items):
    reason = integration.missing(NIC_BINARY, ("ip", "ethtool", "tshark"))
    integration.skip_directory(config, items, Path(__file__).parent, "jumbogate-nic", reason)


log_dir = integration.log_dir_fixture("nic")


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
