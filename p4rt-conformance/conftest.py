"""The conformance suite's fixtures: each test runs once per target (jumbogate-switch, BMv2)."""

from __future__ import annotations

import pytest
from target import Controller, Program, Switch, bmv2_skip_reason, load_p4info


@pytest.fixture(params=["jumbogate-switch", "bmv2"])
def target(request):
    """A fresh target per test: arbitration state is the device's, so tests must not share one."""
    if request.param == "bmv2":
        pytest.skip(bmv2_skip_reason())
    switch = Switch(getattr(request, "switch_options", []))
    yield switch
    switch.close()


@pytest.fixture(scope="session")
def program():
    return Program(load_p4info(512))


@pytest.fixture
def controllers(target):
    """connect(election) opens a controller's stream; every one is closed at the end."""
    opened: list[Controller] = []

    def connect(election: tuple[int, int] | None, device_id: int | None = None) -> Controller:
        client = Controller(target.address, election) if device_id is None else Controller(target.address, election, device_id)
        opened.append(client)
        return client

    yield connect
    for client in opened:
        client.close()


@pytest.fixture
def primary(controllers, program):
    """A primary (election id 0:10) with the program's pipeline set."""
    client = controllers((0, 10))
    assert client.arbitrate().status.code == 0
    client.set_pipeline(program.p4info)
    return client
