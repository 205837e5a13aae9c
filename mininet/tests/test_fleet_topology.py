"""A fleet of three racks on one etcd cluster (emulation/fleet.py, `make run TOPO=fleet`).

Each rack: jumbogate-switch, jumbogate-nic and two controllers that elect
the rack's leader; one three-member etcd for the whole fleet. The switches
are read back by independent backup P4Runtime clients, never through the
controllers. Bounded: one bring-up for the module.
"""

from __future__ import annotations

import asyncio
import ipaddress
import json
import os
import time

import finsy as fy
import grpc
import pytest
from emulation import cleanup
from emulation.fleet import CONTROLLERS_PER_RACK, ETCD_MEMBERS, RACKS, Fleet, switch_policy
from emulation.rack import PIPELINE, Parts, missing_prerequisites

from jumbogate.p4 import names
from testlab import lab
from testlab.etcd_process import etcdctl

pytestmark = [pytest.mark.timeout(600)]
# A bound on waits, never a figure asserted.
BOUND_S = 60


@pytest.fixture(scope="module")
def fleet():
    missing = missing_prerequisites(Parts(), "soft")
    if missing:
        pytest.skip("emulation prerequisites missing: " + "; ".join(missing))
    with Fleet() as fleet:
        yield fleet


def status(fleet, rack, index: int) -> dict:
    return json.loads(fleet.ctl(rack, "--json", "status", index=index).stdout)


def fleet_flags(address: str) -> set[int]:
    return switch_policy(address)["fleet"]


def wait_for(predicate, what: str):
    return lab.wait_until(predicate, what, BOUND_S, interval=0.2)


def leader_of(fleet, rack) -> int:
    """The index of the rack's leading controller, once one leads and programs its switch."""

    def leading():
        for index in range(CONTROLLERS_PER_RACK):
            shown = status(fleet, rack, index)
            if shown["election"].get("leading") and shown["switch"].get("connected"):
                return index + 1
        return 0

    return wait_for(leading, f"a controller of {rack.rack} to lead") - 1


def test_each_rack_has_one_leader_programming_its_switch_and_a_standby(fleet):
    for rack in RACKS:
        index = leader_of(fleet, rack)
        leading, standing_by = status(fleet, rack, index), status(fleet, rack, 1 - index)
        assert leading["store"]["endpoint"] == rack.store_url(index) and leading["store"]["healthy"]
        election = leading["election"]
        assert election["leader"] == rack.controller(index)
        assert (election["election_id_high"], election["election_id_low"]) == (
            leading["switch"]["primary_election_id_high"],
            leading["switch"]["primary_election_id_low"],
        )
        assert not standing_by["election"].get("leading", False) and standing_by["election"]["leader"] == rack.controller(index)
        assert not standing_by["switch"].get("connected", False)


def test_a_fleet_flip_through_any_controller_reaches_all_three_switches(fleet):
    standby = RACKS[1]
    index = 1 - leader_of(fleet, standby)
    assert all(fleet_flags(rack.p4runtime) == {1} for rack in RACKS)
    try:
        fleet.ctl(standby, "fleet", "jumbo", "off", index=index)
        for rack in RACKS:
            wait_for(lambda rack=rack: fleet_flags(rack.p4runtime) == {0}, f"the flag off on {rack.rack}'s switch")
    finally:
        fleet.ctl(RACKS[0], "fleet", "jumbo", "on")
    for rack in RACKS:
        wait_for(lambda rack=rack: fleet_flags(rack.p4runtime) == {1}, f"the flag back on on {rack.rack}'s switch")


def instances_v4(address: str) -> dict[int, int]:
    """instances_v4 on one switch: address (as an integer) -> enabled."""
    return {int(ipaddress.ip_address(a)): enabled for a, enabled in switch_policy(address)[names.INSTANCES_V4].items()}


def test_an_instance_moved_to_another_rack_keeps_its_flag_and_its_entries_move(fleet):
    """a1 turned off through rack A, then moved to rack B (its key's rack, as an operator edits it in etcd):
    rack A's switch drops its entry, rack B's gains it, off; rack B's controllers show it, off."""
    a, b = RACKS[0], RACKS[1]
    address = int(ipaddress.ip_address(a.address4))
    key = "/jumbogate/v1/instances/" + a.instance
    member = f"http://127.0.0.1:{ETCD_MEMBERS[0][1]}"
    original = etcdctl(member, "get", key, "--print-value-only").stdout.strip()
    try:
        fleet.ctl(a, "instance", "jumbo", a.instance, "off", index=leader_of(fleet, a))
        wait_for(lambda: instances_v4(a.p4runtime).get(address) == 0, "a1 off on rack A's switch")
        # Only its rack changes: the flag travels with the key.
        now = json.loads(etcdctl(member, "get", key, "--print-value-only").stdout)
        assert now["jumbo"] is False
        moved = dict(now, rack=b.rack)
        assert etcdctl(member, "put", key, json.dumps(moved)).returncode == 0
        wait_for(lambda: address not in instances_v4(a.p4runtime), "a1's entry gone from rack A's switch")
        wait_for(lambda: instances_v4(b.p4runtime).get(address) == 0, "a1's entry, off, on rack B's switch")
        shown = json.loads(fleet.ctl(b, "--json", "instance", "show", a.instance, index=1 - leader_of(fleet, b)).stdout)
        assert shown["jumbo"] is False
    finally:
        etcdctl(member, "put", key, original)
    wait_for(lambda: instances_v4(a.p4runtime).get(address) == 1 and address not in instances_v4(b.p4runtime), "a1 back in rack A, on")


# Flips timed by test_the_time_from_a_flips_acknowledgement_to_all_three_switches_is_printed
# (FLEET_FLIPS=100 for the figures in docs/fleet.md; a few by default, to keep the suite short).
FLIPS = int(os.environ.get("FLEET_FLIPS", "10"))


def test_the_time_from_a_flips_acknowledgement_to_all_three_switches_is_printed(fleet):
    """Each flip through rack A's leader: from the API's answer until every switch reads it back
    (backup P4Runtime clients polling all three at once). Each must arrive; the times are printed."""
    from jumbogate.v1 import policy_pb2, policy_pb2_grpc

    api = RACKS[0].controller(leader_of(fleet, RACKS[0]))

    async def go() -> list[float]:
        options = fy.SwitchOptions(p4info=PIPELINE / "jumbogate.p4info.txtpb", initial_election_id=1)
        readers = [fy.Switch(f"flip-reader-{rack.name}", rack.p4runtime, options) for rack in RACKS]
        for reader in readers:
            await reader.__aenter__()
        try:
            async with grpc.aio.insecure_channel(api) as channel:
                stub = policy_pb2_grpc.PolicyStub(channel)
                times = []
                for n in range(FLIPS):
                    wanted = n % 2  # off first: the fleet is on
                    await stub.SetFleet(policy_pb2.SetFleetRequest(jumbo=bool(wanted)), timeout=10)
                    acknowledged = time.monotonic()

                    async def seen(reader, wanted=wanted):
                        while True:
                            entries = [e async for e in reader.read(fy.P4TableEntry(names.FLEET_POLICY, is_default_action=True))]
                            if {e.action.args["enabled"] for e in entries} == {wanted}:
                                return time.monotonic()
                            await asyncio.sleep(0.002)

                    arrived = await asyncio.wait_for(asyncio.gather(*(seen(r) for r in readers)), BOUND_S)
                    times.append(max(arrived) - acknowledged)
                if FLIPS % 2:
                    await stub.SetFleet(policy_pb2.SetFleetRequest(jumbo=True), timeout=10)
                return times
        finally:
            for reader in readers:
                await reader.__aexit__(None, None, None)

    times = sorted(asyncio.run(go()))
    p50, p99 = times[len(times) // 2], times[min(len(times) - 1, round(0.99 * (len(times) - 1)))]
    print(f"\n{FLIPS} fleet flips: from the API's answer to all three switches reading it back, p50 {p50 * 1000:.0f} ms, p99 {p99 * 1000:.0f} ms")
    assert len(times) == FLIPS


def test_teardown_leaves_nothing(fleet):
    fleet.down()
    left = cleanup.find_leftovers()
    assert not left, left.describe()
