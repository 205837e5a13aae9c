"""Learned path MTUs published per rack, with the real controller, the real switch and a real etcd.

The rig is rack B: its controllers run as processes and elect a leader; rack A
is only its published paths, put with a lease of its own as its leader would.
No SmartNIC here learns a path (discovery needs traffic to an external host
that sends ICMP back), so rack B's leader publishes an empty view: the paths
themselves, and a takeover's republishing of them, are tested from a
controller's state in tests/test_learned_paths.py.
"""

from __future__ import annotations

import base64
import ipaddress
import json
import signal
import subprocess
import time

import pytest
from controller_rig import FLEET_OFF, FLEET_ON, TARGETS, VENV_BIN, wait_until
from test_controller_store import StoreRig, election, standby, stats_of, store_rig

from jumbogate.learned import encode_paths, learned_key
from jumbogate.state import LearnedPath

pytestmark = [pytest.mark.timeout(300)]

RACK = "rack-b"
KEY = learned_key(RACK).decode()
OTHER_KEY = learned_key("rack-a").decode()


class RackB(StoreRig):
    rack = RACK

    def published(self, key: str = KEY) -> tuple[bytes, int, int] | None:
        """(value, lease, mod revision) of a rack's key as etcd holds it, or None."""
        reply = json.loads(self.etcd.ctl("get", key, "-w", "json").stdout)
        if not reply.get("kvs"):
            return None
        kv = reply["kvs"][0]
        return base64.b64decode(kv["value"]), int(kv.get("lease", 0)), int(kv["mod_revision"])

    def lease_ttl(self, lease: int) -> str:
        return self.etcd.ctl("lease", "timetolive", f"{lease:x}").stdout.strip()


@pytest.fixture(scope="module", params=TARGETS)
def rig(request, tmp_path_factory, etcd_server):
    yield from store_rig(RackB, request, tmp_path_factory, etcd_server, "jgl")


def test_the_leader_publishes_under_its_lease_a_standby_nothing_and_a_dead_racks_paths_go(rig):
    first = wait_until(rig.published, 30, "rack B's leader to publish")
    assert first[0] == b"[]" and first[1] != 0
    assert "granted with TTL(2s)" in rig.lease_ttl(first[1])
    # Not in the policy: the rack's policy read back from the store holds no such key.
    assert "learned" not in rig.etcd.ctl("get", "--prefix", "/jumbogate/v1/", "--keys-only").stdout

    other, other_api = standby(rig)
    try:
        wait_until(lambda: "election" in stats_of(other_api), 30, "the standby to campaign")
        assert election(stats_of(other_api))[0] is False
        # The standby wrote nothing: the key is the leader's, as first put.
        assert rig.published() == first

        # The leader killed: its lease runs out, and the standby, leading, publishes under its own.
        rig.controller.stop(sig=signal.SIGKILL)
        wait_until(lambda: election(stats_of(other_api))[0], 30, "the standby to lead")
        second = wait_until(lambda: (p := rig.published()) and p[1] != first[1] and p, 30, "the new leader to publish")
        assert second[0] == b"[]" and "granted with TTL(2s)" in rig.lease_ttl(second[1])
        assert "already expired" in rig.lease_ttl(first[1])
    finally:
        rig.start_controller()
        other.stop()
    # Stopped cleanly, the standby revoked its lease: the restarted controller leads and publishes.
    wait_until(lambda: (p := rig.published()) and p[1] not in (first[1], second[1]), 30, "the restarted controller to publish as leader")

    # The rack's only controller killed: nothing is left of its paths once its lease runs out.
    rig.controller.stop(sig=signal.SIGKILL)
    try:
        wait_until(lambda: rig.published() is None, 30, "rack B's paths to leave the store with its leader's lease")
    finally:
        rig.start_controller()
    wait_until(lambda: election(rig.stats())[0] and rig.stats()["switch_connected"], 30, "the controller to lead again")


def test_path_show_fleet_shows_the_racks_side_by_side_and_rack_b_programs_only_its_own(rig):
    # Rack A's leader's view, under a lease of its own.
    paths = [
        LearnedPath(ipaddress.ip_address("198.51.100.9"), 1400, "fragments", time.time() - 3),
        LearnedPath(ipaddress.ip_address("203.0.113.7"), 1280, "sizes", time.time() - 40),
    ]
    lease = rig.etcd.ctl("lease", "grant", "60").stdout.split()[1]
    rig.etcd.ctl("put", f"--lease={lease}", OTHER_KEY, encode_paths(paths).decode())
    try:
        wait_until(rig.published, 30, "rack B's leader to publish")
        shown = rig.ctl("path", "show", "--fleet")
        assert shown.returncode == 0, shown.stderr
        print("\n" + shown.stdout)
        lines = shown.stdout.splitlines()
        assert lines[0].split() == ["destination", "rack-a", "rack-b"], shown.stdout
        rows = {line.split()[0]: line.split()[1:] for line in lines[2:4]}
        assert rows["198.51.100.9"][0] == "1400" and rows["198.51.100.9"][-1] == "-", shown.stdout
        assert rows["203.0.113.7"][0] == "1280" and rows["203.0.113.7"][-1] == "-", shown.stdout
        assert "each rack applies only the paths it learned" in shown.stdout

        as_json = json.loads(rig.ctl("--json", "path", "show", "--fleet").stdout)
        racks = {r["rack"]: r["paths"] for r in as_json["racks"]}
        assert set(racks) == {"rack-a", "rack-b"} and racks["rack-b"] == []
        assert [(p["address"], p["mtu"], p["method"]) for p in racks["rack-a"]] == [("198.51.100.9", 1400, "fragments"), ("203.0.113.7", 1280, "sizes")]
        assert all(p["source"] == "learned" and p["age_s"] > 0 for p in racks["rack-a"])
        one = json.loads(rig.ctl("--json", "path", "show", "--fleet", "203.0.113.7").stdout)
        assert {r["rack"]: [p["address"] for p in r["paths"]] for r in one["racks"]} == {"rack-a": ["203.0.113.7"], "rack-b": []}

        # A policy change makes rack B's leader reconcile with rack A's paths in the store:
        # rack B's switch holds its own policy and none of rack A's learned MTUs.
        assert rig.ctl("fleet", "jumbo", "off").returncode == 0
        rig.wait_for_table("fleet_policy", FLEET_OFF, "the fleet flag off")
        assert rig.ctl("fleet", "jumbo", "on").returncode == 0
        rig.wait_for_table("fleet_policy", FLEET_ON, "the fleet flag back on")
        on_switch = {dict(match)["dst_addr"][0] for match, *_ in rig.table("path_mtu_v4") if match}
        assert on_switch and not on_switch & {int(p.address) for p in paths}
        assert rig.desired_vs_switch()[0].empty
    finally:
        rig.etcd.ctl("lease", "revoke", lease)
    gone = rig.ctl("--json", "path", "show", "--fleet")
    assert [r["rack"] for r in json.loads(gone.stdout)["racks"]] == ["rack-b"]


def test_path_show_fleet_from_a_standby_reads_the_store_too(rig):
    other, other_api = standby(rig)
    try:
        wait_until(lambda: "election" in stats_of(other_api), 30, "the standby to campaign")
        done = subprocess.run(
            [VENV_BIN / "jumbogatectl", "--controller", other_api, "--json", "path", "show", "--fleet"], capture_output=True, text=True, timeout=30
        )
        assert done.returncode == 0, done.stderr
        assert [r["rack"] for r in json.loads(done.stdout)["racks"]] == ["rack-b"]
    finally:
        other.stop()
