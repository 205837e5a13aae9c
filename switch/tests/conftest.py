"""Fixtures for the jumbogate-switch integration tests.

They need root (namespaces, veths, raw sockets) and the built program;
without either the whole directory is skipped with one line saying why.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from switch_harness import INFO, OK, SWITCH_BINARY, Client, OnePortSwitch

from testlab import integration


def pytest_collection_modifyitems(config, items):
    reason = integration.missing(SWITCH_BINARY, ("ip", "ethtool"))
    integration.skip_directory(config, items, Path(__file__).parent, "jumbogate-switch", reason)


log_dir = integration.log_dir_fixture("switch")


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
