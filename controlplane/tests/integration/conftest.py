"""The controller's integration rigs: one switch and one controller per module and target, and the SmartNIC on it."""

from __future__ import annotations

import pytest
from controller_rig import PORTS, TARGETS, Rig, running, start_nic, wait_until

from testlab import lab


@pytest.fixture(scope="module", params=TARGETS)
def rig(request, tmp_path_factory):
    tmp = tmp_path_factory.mktemp(f"controller-{request.param}")
    with running(lambda veths: Rig(tmp, veths, request.param), "jgc") as rig:
        yield rig


@pytest.fixture(scope="module")
def nic_rig(rig):
    veths = [lab.VethPair(f"jgcs{i}", f"jgch{i}") for i in range(len(PORTS))]
    rig.nic = start_nic(rig, veths)
    try:
        wait_until(lambda: rig.stats()["nic"]["reachable"], 15, "the controller to see the SmartNIC")
        wait_until(lambda: rig.desired_vs_switch(nic_up=True)[0].empty, 10, "steering entries on the switch")
        yield rig, veths
    finally:
        rig.nic.stop()
