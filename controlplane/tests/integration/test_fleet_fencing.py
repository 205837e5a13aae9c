"""Fencing, end to end: a rack's controllers on a real etcd, the real switch with --fence-election-ids, the real SmartNIC.

The leader's election id (the store's fencing epoch : the revision at which
it won) goes with every change to the switch (as its P4Runtime election id)
and to the SmartNIC (jumbogate-election-id). Both remember the highest id
they took and refuse lower ones, so a deposed leader cannot change either,
whatever the order in which it wakes and streams close; a store rebuilt with
lower revisions is fenced out until the operator raises the epoch.

jumbogate-switch only: BMv2 has no --fence-election-ids. The switch and the
SmartNIC are read back directly (a backup P4Runtime client, the switch's
telemetry, the SmartNIC's own API), never through the controllers.
"""

from __future__ import annotations

import asyncio
import json
import os
import queue
import signal
import subprocess

import grpc
import pytest
from aetcd import rpc
from controller_rig import FLEET_OFF, FLEET_ON, VENV_BIN, running, start_nic, wait_until
from finsy.proto import p4r, p4r_grpc
from test_controller_store import StoreRig, election, standby, stats_of, switch_primary_id

from jumbogate.store import PREFIX
from jumbogate.v1 import nic_pb2, nic_pb2_grpc
from testlab import lab
from testlab.etcd_process import EtcdServer

pytestmark = [pytest.mark.timeout(300)]

LOW = (1 << 64) - 1


def shown(election_id: int) -> str:
    return f"{election_id >> 64}:{election_id & LOW}"


class FencedRig(StoreRig):
    """A StoreRig whose switch fences election ids, with its veths kept for the SmartNIC."""

    def __init__(self, tmp, veths, target, etcd):
        super().__init__(tmp, veths, target, etcd)
        self.veths = veths
        self.switch.options = ("--fence-election-ids",)


@pytest.fixture(scope="module")
def rig(tmp_path_factory, etcd_server):
    etcd_server.ctl("del", "--prefix", "/jumbogate/")
    tmp = tmp_path_factory.mktemp("fencing")
    with running(lambda veths: FencedRig(tmp, veths, "soft", etcd_server), "jgf") as rig:
        rig.nic = start_nic(rig, rig.veths)
        try:
            wait_until(lambda: rig.stats()["nic"]["reachable"], 30, "the leader to drive the SmartNIC")
            yield rig
        finally:
            rig.nic.stop()


def nic_stats(rig) -> nic_pb2.NicStats:
    with grpc.insecure_channel(rig.config.smartnic_control) as channel:
        return nic_pb2_grpc.NicStub(channel).GetStats(nic_pb2.GetNicStatsRequest(), timeout=10)


def nic_fence(rig) -> tuple[int, int]:
    """(the highest election id a change to the SmartNIC carried, the changes it refused), from the SmartNIC itself."""
    fence = nic_stats(rig).fence
    return (fence.election_id_high << 64) | fence.election_id_low, fence.changes_refused


def nic_info(rig) -> nic_pb2.NicInfo:
    with grpc.insecure_channel(rig.config.smartnic_control) as channel:
        return nic_pb2_grpc.NicStub(channel).GetInfo(nic_pb2.GetInfoRequest(), timeout=10)


def nic_path_mtus(rig) -> dict[str, int]:
    with grpc.insecure_channel(rig.config.smartnic_control) as channel:
        reply = nic_pb2_grpc.NicStub(channel).ListPathMtus(nic_pb2.ListPathMtusRequest(), timeout=10)
    return {entry.prefix.cidr: entry.mtu for entry in reply.entries}


def writes(rig) -> dict:
    """The switch's record of accepted writes, by election id (HIGH_LOW)."""
    return lab.telemetry_query(rig.switch.prefix, "/jumbogate_switch/writes")


def updates_of(record: dict, election_id: int) -> int:
    return record.get(f"{election_id >> 64}_{election_id & LOW}", {}).get("updates", 0)


def leading_id(api: str) -> int:
    return wait_until(lambda: (e := election(stats_of(api))) and e[0] and e[1], 30, f"the controller at {api} to lead")


def fully_leading(api: str) -> int:
    """The id of the controller at `api` once it leads, programs the switch and drives the SmartNIC."""

    def ready():
        stats = stats_of(api)
        leading, election_id = election(stats)
        return leading and stats["switch_connected"] and stats["nic"].get("reachable") and election_id

    return wait_until(ready, 30, f"the controller at {api} to lead and drive the switch and the SmartNIC")


def test_the_smartnic_takes_the_leaders_id_and_nothing_from_the_standby(rig):
    """Every change the leader makes carries its id; a standby changes nothing (a change without an id
    would be refused and counted); the next leader's changes go through, and the SmartNIC keeps its id
    once the paused one wakes."""
    first = fully_leading(rig.api)
    wait_until(lambda: nic_fence(rig)[0] == first, 30, "the leader's id on the SmartNIC")
    refused = nic_fence(rig)[1]
    other, other_api = standby(rig)
    try:
        assert election(stats_of(other_api))[0] is False
        probe = rig_ctl(other_api, "path", "probe", "198.51.100.7")
        assert probe.returncode == 1 and "standby" in probe.stderr, probe.stderr

        os.kill(rig.controller.popen.pid, signal.SIGSTOP)
        try:
            second = fully_leading(other_api)
            assert second > first
            wait_until(lambda: nic_fence(rig)[0] == second, 30, "the new leader's id on the SmartNIC")
            # The standby, all the time it was one, sent the SmartNIC nothing.
            assert nic_fence(rig)[1] == refused
            # The new leader's changes go through: a path MTU edited in the store reaches the SmartNIC.
            original = rig.etcd.ctl("get", PREFIX + "fleet/path_mtus", "--print-value-only").stdout.strip()
            rig.etcd.ctl("put", PREFIX + "fleet/path_mtus", '[{"prefix": "198.51.100.0/24", "mtu": 1300}]')
            wait_until(lambda: nic_path_mtus(rig).get("198.51.100.0/24") == 1300, 30, "the new leader's path MTU on the SmartNIC")
        finally:
            os.kill(rig.controller.popen.pid, signal.SIGCONT)
        wait_until(lambda: election(rig.stats())[0] is False, 30, "the resumed controller to learn it was deposed")
        assert nic_fence(rig)[0] == second
        assert nic_path_mtus(rig).get("198.51.100.0/24") == 1300
        rig.etcd.ctl("put", PREFIX + "fleet/path_mtus", original)
        wait_until(lambda: nic_path_mtus(rig).get("198.51.100.0/24") != 1300, 30, "the path MTU put back")
    finally:
        other.stop()
    third = fully_leading(rig.api)
    wait_until(lambda: nic_fence(rig)[0] == third > second, 30, "the first controller's new id on the SmartNIC")


def rig_ctl(api: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([VENV_BIN / "jumbogatectl", "--controller", api, *args], capture_output=True, text=True, timeout=30)


def test_a_paused_leader_is_not_made_primary_again_when_its_successor_goes(rig):
    """The gap arbitration alone leaves: the leader paused past its lease, the standby leads, then dies too
    (its stream gone) before the paused one wakes. Without the fence the switch promotes the paused one,
    the highest still connected, and it writes with its old id; with it the old id is never primary again:
    the switch has no primary until a leader arbitrates with an id at least its successor's, not one write
    of the old id is accepted after its successor's, and it leads again only under a new id."""
    first = fully_leading(rig.api)
    other, other_api = standby(rig)
    try:
        os.kill(rig.controller.popen.pid, signal.SIGSTOP)
        try:
            second = fully_leading(other_api)
            wait_until(lambda: switch_primary_id(rig) == second, 30, "the standby to be the switch's primary")
            assert rig_ctl(other_api, "fleet", "jumbo", "off").returncode == 0
            rig.wait_for_table("fleet_policy", FLEET_OFF, "the new leader's change on the switch")
            before = updates_of(writes(rig), first)
            assert updates_of(writes(rig), second) >= 1
            other.stop(sig=signal.SIGKILL)
            # Its stream gone, the paused one is the highest id still connected. Who is primary now?
            answer = wait_until(lambda: (a := arbitrate(rig, 1)) and not (a.status.code == ALREADY_EXISTS and u128(a) == second) and a, 30, "its stream to go")
            assert u128(answer) != first, f"the switch made the deposed {shown(first)} primary again"
            assert answer.status.code == PERMISSION_DENIED and shown(second) in answer.status.message, answer
        finally:
            os.kill(rig.controller.popen.pid, signal.SIGCONT)
        third = fully_leading(rig.api)
        wait_until(lambda: switch_primary_id(rig) == third, 30, "the first controller, under a new id, to be the switch's primary")
        record = writes(rig)
        assert third > second > first
        assert updates_of(record, first) == before, f"the deposed id {shown(first)} wrote after {shown(second)}: {record}"
        wait_until(lambda: rig.desired_vs_switch(fleet=False, nic_up=True)[0].empty, 30, "the policy as the last leader left it")
    finally:
        other.stop()
    assert rig.ctl("fleet", "jumbo", "on").returncode == 0
    rig.wait_for_table("fleet_policy", FLEET_ON, "the fleet flag back on")


def status_of(api: str) -> dict:
    done = rig_ctl(api, "--json", "status")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_status_shows_the_store_the_leader_the_switchs_primary_and_the_smartnics_fence(rig):
    """Each figure of `jumbogatectl status` against what the part says itself: etcd (etcdctl), the switch
    (a backup P4Runtime client), the SmartNIC (its own API); from the leader, from a standby, and with
    etcd stopped."""
    leader_id = fully_leading(rig.api)
    wait_until(lambda: nic_fence(rig)[0] == leader_id, 30, "the leader's id on the SmartNIC")
    status = status_of(rig.api)
    etcd_says = json.loads(rig.etcd.ctl("endpoint", "status", "-w", "json").stdout)[0]["Status"]
    store = status["store"]
    assert store["healthy"] and store["endpoint"] == rig.etcd.store_url and store["version"] == etcd_says["version"]
    # Nothing writes to the store meanwhile: the revision the controller was told is the one etcdctl reads after.
    assert int(store["revision"]) == etcd_says["header"]["revision"]
    election_ = status["election"]
    assert election_["leading"] and election_["leader"] == rig.api
    assert (int(election_["election_id_high"]) << 64 | int(election_["election_id_low"])) == leader_id
    assert int(election_["leader_revision"]) == leader_id & LOW
    primary = (int(status["switch"]["primary_election_id_high"]) << 64) | int(status["switch"]["primary_election_id_low"])
    assert status["switch"]["connected"] and primary == switch_primary_id(rig) == leader_id
    fence, refused = nic_fence(rig)
    nic = status["smartnic"]
    assert nic["reachable"] and int(nic["boot_id"]) == nic_info(rig).boot_id
    assert ((int(nic["fence_election_id_high"]) << 64) | int(nic["fence_election_id_low"])) == fence == leader_id
    assert int(nic.get("fence_changes_refused", 0)) == refused
    text = rig_ctl(rig.api, "status").stdout
    assert f"this controller leads (election id {shown(leader_id)})" in text and f"primary election id {shown(leader_id)}" in text
    assert f"fence {shown(leader_id)}" in text

    other, other_api = standby(rig)
    try:
        from_standby = status_of(other_api)
        assert not from_standby["election"].get("leading", False) and from_standby["election"]["leader"] == rig.api
        text = rig_ctl(other_api, "status").stdout
        assert "standby; leader: " + rig.api in text and "programmed by the leader" in text and "driven by the leader" in text
    finally:
        other.stop()

    rig.etcd.stop()
    try:
        down = rig_ctl(rig.api, "status")
        assert down.returncode == 0 and f"store     {rig.etcd.store_url}: NOT ANSWERING" in down.stdout, down.stdout
    finally:
        rig.etcd.start()
    fully_leading(rig.api)


ALREADY_EXISTS, PERMISSION_DENIED = grpc.StatusCode.ALREADY_EXISTS.value[0], grpc.StatusCode.PERMISSION_DENIED.value[0]


def u128(answer: p4r.MasterArbitrationUpdate) -> int:
    return (answer.election_id.high << 64) | answer.election_id.low


def arbitrate(rig, election_id: int) -> p4r.MasterArbitrationUpdate:
    """One P4Runtime arbitration with this id, as a backup reader would send it: the switch's answer
    names the primary (ALREADY_EXISTS, with its id) or why there is none for this id."""
    requests: queue.Queue = queue.Queue()
    requests.put(
        p4r.StreamMessageRequest(
            arbitration=p4r.MasterArbitrationUpdate(
                device_id=rig.config.switch.device_id, election_id=p4r.Uint128(high=election_id >> 64, low=election_id & LOW)
            )
        )
    )
    with grpc.insecure_channel(rig.switch.grpc_address) as channel:
        stream = p4r_grpc.P4RuntimeStub(channel).StreamChannel(iter(requests.get, None), timeout=10)
        try:
            return next(reply for reply in stream if reply.HasField("arbitration")).arbitration
        finally:
            requests.put(None)
            stream.cancel()


def bump_revision(etcd: EtcdServer, writes_: int) -> None:
    """Move the store's revision on (writes outside the policy's keys)."""

    async def go():
        async with grpc.aio.insecure_channel(f"127.0.0.1:{etcd.client_port}") as channel:
            kv = rpc.KVStub(channel)
            for n in range(writes_):
                await kv.Put(rpc.PutRequest(key=b"/jumbogate/test/bump", value=str(n).encode()), timeout=5)

    asyncio.run(go())


def test_a_rebuilt_store_is_fenced_out_until_the_epoch_is_raised(rig, tmp_path):
    """A store rebuilt (or restored from a backup) counts revisions from below the ids the switch and the
    SmartNIC took: its leader is refused by both. `fleet raise-epoch` puts its ids above them again."""
    # The devices take an id the rebuilt store's revisions stay below.
    bump_revision(rig.etcd, 60)
    rig.controller.stop()
    rig.start_controller()
    old = fully_leading(rig.api)
    wait_until(lambda: nic_fence(rig)[0] == old and switch_primary_id(rig) == old, 30, "the leader's id on both devices")
    rig.controller.stop()
    # The rebuilt store's leader may win at a revision some earlier leader won at: same id.
    written = writes(rig)

    module_etcd = rig.etcd
    rig.etcd = EtcdServer(tmp_path / "rebuilt", tmp_path / "rebuilt.log").start()
    try:
        rig.start_controller()  # seeds the new store from the rack's file, as after a rebuild
        low = leading_id(rig.api)
        assert low >> 64 == 1 and low < old
        refused = wait_until(
            lambda: (s := rig.stats()) and int(s["nic"].get("fenced_calls", 0)) >= 1 and s, 30, "the SmartNIC to refuse the rebuilt store's leader"
        )
        assert f"{shown(low)} is below {shown(old)}" in refused["nic"]["last_fenced"], refused["nic"]
        assert not refused["switch_connected"] and not refused["nic"].get("reachable", False)
        assert updates_of(writes(rig), low) == updates_of(written, low) and nic_fence(rig)[0] == old

        raised = rig.ctl("fleet", "raise-epoch")
        assert raised.returncode == 0 and "fencing epoch 2" in raised.stdout, raised.stderr
        new = fully_leading(rig.api)
        assert new >> 64 == 2
        wait_until(lambda: nic_fence(rig)[0] == new and switch_primary_id(rig) == new, 30, "the raised epoch's id on both devices")
        wait_until(lambda: rig.desired_vs_switch(nic_up=True)[0].empty, 30, "the policy on the switch")
        assert "fencing epoch 2" in rig.ctl("stats").stdout
        print(f"\nthe rebuilt store's leader {shown(low)} refused below {shown(old)}; after raise-epoch {shown(new)} accepted")
        # It only goes up.
        lower = rig.ctl("fleet", "raise-epoch", "--to", "2")
        assert lower.returncode == 1 and "only goes up" in lower.stderr, lower.stderr
    finally:
        rig.controller.stop()
        rig.etcd.stop()
        rig.etcd = module_etcd
        # The devices took epoch 2 now: the module's store goes above it for the tests after.
        module_etcd.ctl("put", PREFIX + "fencing/epoch", "3")
        rig.start_controller()
        fully_leading(rig.api)
