"""The conformance suite's fixtures: each test runs once per target (jumbogate-switch, BMv2).

Two markers say how a test meets BMv2:
- `jumbogate_switch_only`: it drives one of jumbogate-switch's own options (--primary-on-leave, say), which BMv2
  does not have; it has no BMv2 run at all.
- `bmv2_deviates(reason)`: BMv2 was measured to answer otherwise than the specification (or than the documented
  choice the test checks). Its BMv2 run is an expected failure, strict: were BMv2 to start passing, the run fails
  and the matrix in docs/switch.md must be updated.
"""

from __future__ import annotations

import pytest
from target import Bmv2, Controller, Program, Switch, bmv2_missing, load_p4info


def pytest_configure(config):
    config.addinivalue_line("markers", "jumbogate_switch_only: drives an option of jumbogate-switch's own; no BMv2 run")
    config.addinivalue_line("markers", "bmv2_deviates(reason): BMv2 was measured to deviate; its run is a strict xfail")


def pytest_collection_modifyitems(config, items):
    kept, dropped = [], []
    for item in items:
        on_bmv2 = getattr(item, "callspec", None) is not None and item.callspec.params.get("target") == "bmv2"
        if on_bmv2 and item.get_closest_marker("jumbogate_switch_only"):
            dropped.append(item)
            continue
        deviation = item.get_closest_marker("bmv2_deviates")
        if on_bmv2 and deviation:
            item.add_marker(pytest.mark.xfail(reason=f"BMv2 deviates: {deviation.args[0]}", strict=True))
        kept.append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept


@pytest.fixture(params=["jumbogate-switch", "bmv2"])
def target(request):
    """A fresh target per test: arbitration state is the device's, so tests must not share one."""
    if request.param == "bmv2":
        missing = bmv2_missing()
        if missing:
            pytest.skip(missing)
        switch = Bmv2()
    else:
        switch = Switch()
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
        extra = {} if device_id is None else {"device_id": device_id}
        client = Controller(target.address, election, device_config=target.device_config, **extra)
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
