"""The policy in a real etcd, with the real controller and the real switch.

What the operator sets through the API outlives the controller and its
file; a change made through another controller, or by hand in etcd, reaches
this rack's switch with only the difference written; a stale or invalid
change is refused and the switch keeps the last valid policy. The switch is
read back by an independent P4Runtime client (controller_rig.py's Rig).
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import subprocess
import time

import finsy as fy
import pytest
import yaml
from controller_rig import FLEET_OFF, FLEET_ON, TARGETS, VENV_BIN, Rig, intruder, reconciled, running, wait_until

from jumbogate.store import PREFIX
from testlab import lab

pytestmark = [pytest.mark.timeout(300)]


class StoreRig(Rig):
    """A Rig whose controller keeps its policy in etcd."""

    rack = "rack-a"

    def __init__(self, tmp, veths, target, etcd):
        super().__init__(tmp, veths, target)
        self.etcd = etcd

    def start_controller(self) -> None:
        self.generation += 1
        args = [VENV_BIN / "jumbogate-controller", "--config", self.config_path, "--store", self.etcd.store_url, "--rack", self.rack]
        self.controller = lab.Process(args, self.tmp / f"controller-{self.generation}.log").start()
        lab.wait_for_tcp(self.api, 20, process=self.controller.popen)

    def totals(self) -> tuple[int, int, int]:
        totals = self.stats()["reconcile"]
        return int(totals.get("inserted", 0)), int(totals.get("modified", 0)), int(totals.get("deleted", 0))

    def wait_for_table(self, alias: str, expected: set, what: str) -> None:
        wait_until(lambda: self.table(alias) == expected, 30, what)


def store_rig(make_rig, request, tmp_path_factory, etcd_server, veth_prefix: str):
    """A rig of make_rig's class on the target request.param, on an etcd emptied of jumbogate's keys."""
    etcd_server.ctl("del", "--prefix", "/jumbogate/")
    tmp = tmp_path_factory.mktemp(f"{veth_prefix}-{request.param}")
    with running(lambda veths: make_rig(tmp, veths, request.param, etcd_server), veth_prefix) as rig:
        yield rig


@pytest.fixture(scope="module", params=TARGETS)
def rig(request, tmp_path_factory, etcd_server):
    yield from store_rig(StoreRig, request, tmp_path_factory, etcd_server, "jgs")


@pytest.fixture
def fleet_restored(rig):
    """The fleet flag back on after the test, as the rack's file has it."""
    yield
    assert rig.ctl("fleet", "jumbo", "on").returncode == 0
    rig.wait_for_table("fleet_policy", FLEET_ON, "the fleet flag back on")


def test_the_store_is_seeded_from_the_file_and_programmed(rig):
    stats = rig.stats()
    assert stats["store"]["endpoint"] == rig.etcd.store_url and stats["store"]["rack"] == "rack-a"
    assert rig.desired_vs_switch()[0].empty
    keys = rig.etcd.ctl("get", "--prefix", "--keys-only", PREFIX).stdout.split()
    assert PREFIX + "racks/rack-a/routes" in keys and PREFIX + "instances/web-1" in keys


def test_what_the_api_set_survives_a_reload_and_a_restart(rig, fleet_restored):
    """Before the store, `fleet jumbo off` was undone by SIGHUP or a restart: both read rack.yaml's `fleet.jumbo: true` again."""
    assert rig.ctl("fleet", "jumbo", "off").returncode == 0
    reconciled(rig, "a reconcile run after the flip")
    assert rig.table("fleet_policy") == FLEET_OFF

    applied = int(rig.stats()["config_reloads"].get("applied", 0))
    os.kill(rig.controller.popen.pid, signal.SIGHUP)
    wait_until(lambda: int(rig.stats()["config_reloads"].get("applied", 0)) > applied, 30, "the reload")
    assert json.loads(rig.ctl("--json", "fleet", "show").stdout)["jumbo"] is False
    assert rig.table("fleet_policy") == FLEET_OFF

    rig.controller.stop()
    rig.start_controller()
    totals = rig.wait_for_reconcile()["reconcile"]
    assert json.loads(rig.ctl("--json", "fleet", "show").stdout)["jumbo"] is False
    assert rig.table("fleet_policy") == FLEET_OFF
    # The restarted controller found the switch as the store says: nothing to write.
    assert (int(totals.get("inserted", 0)), int(totals.get("modified", 0)), int(totals.get("deleted", 0))) == (0, 0, 0), totals


def test_a_change_through_another_controller_reaches_this_racks_switch(rig, fleet_restored):
    """A controller of another rack (its switch unreachable here) turns the fleet flag off; this rack's controller
    sees it through its watch and modifies one entry on its switch, nothing else."""
    config = yaml.safe_load(rig.config_path.read_text())
    other_api = f"127.0.0.1:{lab.free_tcp_port()}"
    config["switch"]["p4runtime"] = f"127.0.0.1:{lab.free_tcp_port()}"
    config["smartnic"] = {"control": f"127.0.0.1:{lab.free_tcp_port()}"}
    config["controller"] = {"listen": other_api}
    path = rig.tmp / "rack-b.yaml"
    path.write_text(yaml.safe_dump(config))
    args = [VENV_BIN / "jumbogate-controller", "--config", path, "--store", rig.etcd.store_url, "--rack", "rack-b"]
    other = lab.Process(args, rig.tmp / "controller-rack-b.log").start()
    try:
        lab.wait_for_tcp(other_api, 20, process=other.popen)
        before = rig.totals()
        done = subprocess.run([VENV_BIN / "jumbogatectl", "--controller", other_api, "fleet", "jumbo", "off"], capture_output=True, text=True, timeout=30)
        assert done.returncode == 0, done.stderr
        rig.wait_for_table("fleet_policy", FLEET_OFF, "the flag set through rack-b's controller on rack-a's switch")
        inserted, modified, deleted = (after - was for after, was in zip(rig.totals(), before, strict=True))
        assert (inserted, modified, deleted) == (0, 1, 0)
        assert rig.desired_vs_switch(fleet=False)[0].empty
    finally:
        other.stop()


def test_a_value_edited_by_hand_reaches_the_switch_and_an_invalid_one_is_refused(rig):
    original = rig.etcd.ctl("get", PREFIX + "fleet/path_mtus", "--print-value-only").stdout.strip()
    lower = {((("dst_addr", (int.from_bytes(bytes([198, 51, 100, 0]), "big"), 24)),), (("mtu", 1300),)), ((), (("mtu", 1500),))}

    def path_mtus() -> set:
        return {(m, a) for m, _, a, _, d in rig.table("path_mtu_v4") if not d}

    try:
        rig.etcd.ctl("put", PREFIX + "fleet/path_mtus", '[{"prefix": "198.51.100.0/24", "mtu": 1300}]')
        wait_until(lambda: path_mtus() == lower, 30, "the path MTU edited in etcd on the switch")
        rig.etcd.ctl("put", PREFIX + "fleet/path_mtus", '[{"prefix": "198.51.100.0/24", "mtu": 130000}]')
        store = wait_until(lambda: (s := rig.stats()["store"]) and int(s.get("refused_revisions", 0)) >= 1 and s, 30, "the invalid value refused")
        assert PREFIX + "fleet/path_mtus" in store["last_refusal"] and "130000" in store["last_refusal"], store
        assert int(store["revision_applied"]) < int(store["revision"])
        shown = rig.ctl("stats")
        assert shown.returncode == 0 and "revisions refused" in shown.stdout
        assert path_mtus() == lower and rig.controller.running
    finally:
        rig.etcd.ctl("put", PREFIX + "fleet/path_mtus", original)
    wait_until(lambda: (s := rig.stats()["store"]) and s["revision_applied"] == s["revision"], 30, "the fixed value applied")
    reconciled(rig, "a reconcile run after the fix")
    assert rig.desired_vs_switch()[0].empty


def test_a_change_based_on_a_stale_revision_exits_7_and_changes_nothing(rig, fleet_restored):
    seen = int(json.loads(rig.ctl("--json", "fleet", "show").stdout)["revision"])
    assert rig.ctl("fleet", "jumbo", "off").returncode == 0
    current = int(json.loads(rig.ctl("--json", "fleet", "show").stdout)["revision"])
    stale = rig.ctl("fleet", "jumbo", "on", "--revision", str(seen))
    told = re.search(r"based on revision (\d+), the store is at revision (\d+)", stale.stderr)
    assert stale.returncode == 7 and told, stale.stderr
    # At least the revision read after the change: the store's revision counts every
    # key (a leader's learned paths, say), so others may have come since.
    assert int(told[1]) == seen and int(told[2]) >= current, stale.stderr
    reconciled(rig, "a reconcile run after the refusal")
    assert rig.table("fleet_policy") == FLEET_OFF


def test_config_export_and_import_round_trip_exactly(rig):
    first, second = rig.tmp / "export-1.yaml", rig.tmp / "export-2.yaml"
    assert rig.ctl("config", "export", "-o", str(first)).returncode == 0
    before = rig.totals()
    imported = rig.ctl("config", "import", str(first))
    assert imported.returncode == 0, imported.stderr
    assert rig.ctl("config", "export", "-o", str(second)).returncode == 0
    assert first.read_text() == second.read_text()
    # What it exported is what the switch holds: importing it writes nothing there.
    reconciled(rig, "a reconcile run after the import")
    assert rig.totals() == before and rig.desired_vs_switch()[0].empty


# ----- two controllers of one rack: the election -----


def switch_primary_id(rig) -> int:
    """The election id of the switch's primary, as the switch tells an independent backup client."""

    async def go():
        options = fy.SwitchOptions(p4info=lab.PIPELINE_512 / "jumbogate.p4info.txtpb", initial_election_id=1)
        async with fy.Switch("primary-reader", rig.switch.grpc_address, options) as reader:
            return reader.primary_id

    return asyncio.run(go())


def election(stats: dict) -> tuple[bool, int]:
    shown = stats.get("election", {})
    return bool(shown.get("leading", False)), (int(shown.get("election_id_high", 0)) << 64) | int(shown.get("election_id_low", 0))


def standby(rig) -> tuple[lab.Process, str]:
    """A second controller of the same rack and switch (another API address)."""
    config = yaml.safe_load(rig.config_path.read_text())
    api = f"127.0.0.1:{lab.free_tcp_port()}"
    config["controller"] = {"listen": api}
    path = rig.tmp / "standby.yaml"
    path.write_text(yaml.safe_dump(config))
    args = [VENV_BIN / "jumbogate-controller", "--config", path, "--store", rig.etcd.store_url, "--rack", rig.rack]
    process = lab.Process(args, rig.tmp / "controller-standby.log").start()
    lab.wait_for_tcp(api, 20, process=process.popen)
    return process, api


def stats_of(api: str) -> dict:
    done = subprocess.run([VENV_BIN / "jumbogatectl", "--controller", api, "--json", "stats"], capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_the_standby_takes_the_switch_when_the_leader_dies_or_pauses(rig):
    """One leader per rack, the switch's primary with the id it won at; a standby that writes nothing.
    The leader killed: the standby leads and is the switch's primary. The leader paused past its
    lease: the same, and once resumed it stays deposed; the switch keeps the policy throughout."""
    leading, first_id = election(rig.stats())
    assert leading and switch_primary_id(rig) == first_id
    other, other_api = standby(rig)
    try:
        assert election(stats_of(other_api))[0] is False and stats_of(other_api)["switch_connected"] is False
        shown = subprocess.run([VENV_BIN / "jumbogatectl", "--controller", other_api, "stats"], capture_output=True, text=True, timeout=30)
        assert "standby (another controller leads the rack)" in shown.stdout and "this one is a standby" in shown.stdout, shown.stdout
        assert switch_primary_id(rig) == first_id

        started = time.monotonic()
        rig.controller.stop(sig=signal.SIGKILL)
        second_id = wait_until(lambda: (e := election(stats_of(other_api))) and e[0] and e[1], 30, "the standby to lead")
        wait_until(lambda: switch_primary_id(rig) == second_id, 30, "the standby to be the switch's primary")
        print(f"\nleader killed: the switch had a new primary {time.monotonic() - started:.2f} s later")
        assert second_id > first_id
        wait_until(lambda: stats_of(other_api)["switch_connected"], 30, "the new leader to program the switch")
        assert rig.desired_vs_switch()[0].empty

        # The killed one comes back as the standby.
        rig.start_controller()
        wait_until(lambda: "election" in rig.stats(), 30, "the restarted controller to campaign")
        assert election(rig.stats())[0] is False

        # Hand the lead back cleanly: the leader stops, the standby leads at once (no lease to wait out).
        other.stop()
        third_id = wait_until(lambda: (e := election(rig.stats())) and e[0] and e[1], 30, "the first controller to lead again")
        wait_until(lambda: switch_primary_id(rig) == third_id, 30, "it to be the switch's primary again")
        other, other_api = standby(rig)

        # Paused past its lease.
        os.kill(rig.controller.popen.pid, signal.SIGSTOP)
        try:
            started = time.monotonic()
            fourth_id = wait_until(lambda: (e := election(stats_of(other_api))) and e[0] and e[1], 30, "the standby to lead past the paused one")
            wait_until(lambda: switch_primary_id(rig) == fourth_id, 30, "the standby to be the switch's primary")
            print(f"leader paused: the switch had a new primary {time.monotonic() - started:.2f} s later")
        finally:
            os.kill(rig.controller.popen.pid, signal.SIGCONT)
        wait_until(lambda: election(rig.stats())[0] is False, 30, "the resumed controller to learn it was deposed")
        assert switch_primary_id(rig) == fourth_id > third_id
        wait_until(lambda: stats_of(other_api)["switch_connected"], 30, "the new leader to program the switch")
        assert rig.desired_vs_switch()[0].empty
    finally:
        other.stop()
    # The module's controller leads again for whatever runs after.
    wait_until(lambda: election(rig.stats())[0] and rig.stats()["switch_connected"], 30, "the first controller to lead again")


def test_a_leader_gets_the_switch_back_under_its_own_id_after_an_intruder_leaves(rig):
    """A client above the leader takes the switch, then leaves. finsy, promoted back, would carry on
    with the intruder's id (it asks for the last primary's); an elected leader reconnects under its
    own instead, so that its writes carry the id the fence knows (on a fenced switch the intruder's
    id would fence it out: docs/fleet.md)."""
    leader_id = wait_until(lambda: (e := election(rig.stats())) and e[0] and rig.stats()["switch_connected"] and e[1], 30, "the leader")
    with intruder(rig, ((leader_id >> 64) + 1) << 64):
        wait_until(lambda: not rig.stats()["switch_connected"], 30, "the leader to step back")
    wait_until(lambda: rig.stats()["switch_connected"] and switch_primary_id(rig) == leader_id, 30, "the leader primary again under its own id")
    assert election(rig.stats()) == (True, leader_id)
    reconciled(rig, "a reconcile run once primary again")
    assert rig.desired_vs_switch()[0].empty
