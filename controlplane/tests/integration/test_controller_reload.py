"""rack.yaml reloaded (SIGHUP): each value reaches the data plane.

A reload that needs a restart, or does not load, changes nothing. One
switch and controller per target, and the SmartNIC for its own values
(controller_rig.py); each test puts the original rack.yaml back.
"""

from __future__ import annotations

import contextlib
import os
import signal

import finsy as fy
import grpc
import pytest
import yaml
from controller_rig import Rig, ip, reconciled, wait_until

from jumbogate.p4 import names
from jumbogate.v1 import nic_pb2, nic_pb2_grpc

pytestmark = [pytest.mark.timeout(300)]


def reload_with(rig: Rig, change) -> tuple[str, dict]:
    """Edit rack.yaml with change(config), send SIGHUP and wait until the controller applied or refused it
    and, when applied, a reconcile run built from the reloaded policy is done; returns ('applied' or 'refused', the stats then)."""
    config = yaml.safe_load(rig.config_path.read_text())
    change(config)
    rig.config_path.write_text(yaml.safe_dump(config))
    before = rig.stats()
    counted = before.get("config_reloads", {})
    applied, refused = int(counted.get("applied", 0)), int(counted.get("refused", 0))
    os.kill(rig.controller.popen.pid, signal.SIGHUP)

    def settled():
        counts = rig.stats().get("config_reloads", {})
        if int(counts.get("refused", 0)) > refused:
            return "refused"
        return int(counts.get("applied", 0)) > applied and "applied"

    outcome = wait_until(settled, 30, "the reload to be applied or refused")
    # A run under way at the reload may have read the old config: wait for
    # one built from the reloaded policy.
    return outcome, (reconciled(rig, "a reconcile run after the reload") if outcome == "applied" else rig.stats())


@contextlib.contextmanager
def reloaded(rig: Rig, change):
    """rack.yaml changed and reloaded for the test; the original reloaded after it."""
    original = rig.config_path.read_text()
    outcome, stats = reload_with(rig, change)
    try:
        assert outcome == "applied", stats["config_reloads"]
        yield stats
    finally:
        assert reload_with(rig, lambda config: config.clear() or config.update(yaml.safe_load(original)))[0] == "applied"
        assert rig.desired_vs_switch(nic_up=rig.stats()["nic"]["reachable"])[0].empty


def set_in(path: str, value):
    """A change that sets config[a][b]... = value for path 'a.b'."""

    def change(config):
        *parents, last = path.split(".")
        node = config
        for key in parents:
            node = node[key]
        node[last] = value

    return change


RELOADED_VALUES = [
    pytest.param(lambda config: [set_in("fleet.jumbo", False)(config)] + [i.update(jumbo=False) for i in config["instances"]], "fleet_policy", {((), "set_fleet_jumbo", (("default_mtu", 1500), ("enabled", 0), ("guest_jumbo_mtu", 8000)), 0, True)}, id="fleet.jumbo"),
    pytest.param(set_in("mtu.guest_jumbo", 7000), "fleet_policy", {((), "set_fleet_jumbo", (("default_mtu", 1500), ("enabled", 1), ("guest_jumbo_mtu", 7000)), 0, True)}, id="mtu.guest_jumbo"),
    pytest.param(set_in("mtu.default_external", 1400), "fleet_policy", {((), "set_fleet_jumbo", (("default_mtu", 1400), ("enabled", 1), ("guest_jumbo_mtu", 8000)), 0, True)}, id="mtu.default_external"),
    pytest.param(set_in("mtu.default_external_v6", 1492), "path_mtu_v6", {((), "set_path_mtu", (("mtu", 1492),), 0, False), ((), "set_path_mtu", (("mtu", 1280),), 0, True)}, id="mtu.default_external_v6"),
    pytest.param(set_in("switch.too_deep", "drop"), "depth_policy", {((), "drop_too_deep", (), 0, True)}, id="switch.too_deep"),
    pytest.param(set_in("elephant.threshold_bytes", 50000), "elephant_config", {((), "set_elephant_threshold", (("bytes", 50000),), 0, True)}, id="elephant.threshold_bytes"),
]  # fmt: skip


@pytest.mark.parametrize(("change", "table", "expected"), RELOADED_VALUES)
def test_a_reloaded_value_reaches_the_switch(rig, change, table, expected):
    with reloaded(rig, change):
        assert rig.table(table) == expected


def test_reloaded_instances_and_path_mtus_reach_the_switch(rig):
    def change(config):
        config["instances"][1]["jumbo"] = True  # legacy-1
        config["instances"].append({"id": "web-2", "addresses": ["10.10.0.30"], "jumbo": True})
        config["path_mtus"] = [{"prefix": "198.51.100.0/24", "mtu": 1300}, {"prefix": "203.0.113.0/24", "mtu": 1280}]

    with reloaded(rig, change):
        assert {(m, a) for m, _, a, _, d in rig.table("instances_v4") if not d} == {
            ((("instance_addr", ip("10.10.0.10")),), (("enabled", 1),)),
            ((("instance_addr", ip("10.10.0.20")),), (("enabled", 1),)),
            ((("instance_addr", ip("10.10.0.30")),), (("enabled", 1),)),
        }
        assert {(m, a) for m, _, a, _, d in rig.table("path_mtu_v4") if not d} == {
            ((("dst_addr", (ip("198.51.100.0"), 24)),), (("mtu", 1300),)),
            ((("dst_addr", (ip("203.0.113.0"), 24)),), (("mtu", 1280),)),
            ((), (("mtu", 1500),)),
        }


def test_reloaded_routes_ports_and_meters_reach_the_switch(rig):
    def change(config):
        config["switch"]["icmp_rate_pps"] = 80
        config["switch"]["icmp_rate_per_source_pps"] = 12
        config["switch"]["ports"] = [p for p in config["switch"]["ports"] if p["port"] != 4]
        config["routes"] = [r for r in config["routes"] if r["prefix"] != "10.10.0.20/32"]
        config["instances"] = [i for i in config["instances"] if i["id"] != "legacy-1"]

    with reloaded(rig, change):
        assert {m[0][1] for m, _, _, _, d in rig.table("port_roles") if not d} == {1, 2, 3, 5}
        routes = {m[0][1] for m, _, _, _, d in rig.table("routes_v4") if not d and m}
        assert (ip("10.10.0.20"), 32) not in routes and (ip("10.10.0.10"), 32) in routes
        meters = {m.index: m.config for m in rig.read_raw(fy.P4MeterEntry(names.ICMP_SIGNAL_METER)) if m.config is not None}
        assert set(meters) == {1, 2, 3, 5}
        assert {(c.cir, c.cburst) for c in meters.values()} == {(80, 20)}
        sources = {m.index: m.config for m in rig.read_raw(fy.P4MeterEntry(names.ICMP_SOURCE_METER)) if m.config is not None}
        assert {(c.cir, c.cburst) for c in sources.values()} == {(12, 3)}


def test_reloaded_admission_limits_are_reported(rig):
    with reloaded(rig, lambda config: set_in("elephant.max_flows", 77)(config) or set_in("elephant.max_onloads_per_epoch", 9)(config)) as stats:
        assert int(stats["admission"]["max_flows"]) == 77
        assert int(stats["admission"]["max_onloads_per_epoch"]) == 9


def test_a_reload_that_needs_a_restart_or_does_not_load_changes_nothing(rig):
    before = rig.table("fleet_policy")
    original = rig.config_path.read_text()
    try:
        outcome, stats = reload_with(rig, lambda config: set_in("controller.listen", "127.0.0.1:1")(config) or set_in("mtu.guest_jumbo", 7000)(config))
        assert outcome == "refused"
        assert "controller.listen changed, which needs a restart (nothing was applied)" in stats["config_reloads"]["last_refusal"]
        assert rig.table("fleet_policy") == before
        outcome, stats = reload_with(rig, lambda config: set_in("controller.listen", rig.api)(config) or set_in("mtu.guest_jumbo", 99999)(config))
        assert outcome == "refused" and "mtu.guest_jumbo" in stats["config_reloads"]["last_refusal"]
        assert rig.table("fleet_policy") == before
    finally:
        # The file as it was, reloaded: nothing to change.
        assert reload_with(rig, lambda config: config.clear() or config.update(yaml.safe_load(original)))[0] == "applied"
    assert rig.table("fleet_policy") == before


def test_reloaded_smartnic_values_reach_the_smartnic(nic_rig):
    rig, _ = nic_rig
    channel = grpc.insecure_channel(rig.config.smartnic_control)
    stub = nic_pb2_grpc.NicStub(channel)

    def change(config):
        config["smartnic"]["internal_prefixes"] = ["10.10.0.0/24", "fd00:10::/64", "10.20.0.0/16"]
        config["mtu"]["guest_jumbo"] = 7000
        config["mtu"]["default_external_v6"] = 1400
        config["path_mtus"] = [{"prefix": "198.51.100.0/24", "mtu": 1300}]

    try:
        with reloaded(rig, change):

            def pushed():
                nic = stub.GetConfig(nic_pb2.GetConfigRequest(), timeout=5)
                mtus = {e.prefix.cidr: e.mtu for e in stub.ListPathMtus(nic_pb2.ListPathMtusRequest(), timeout=5).entries}
                return (
                    nic.internal_mtu == 7000
                    and nic.default_path_mtu_v6 == 1400
                    and "10.20.0.0/16" in {p.cidr for p in nic.internal_prefixes}
                    and mtus == {"198.51.100.0/24": 1300}
                )

            wait_until(pushed, 10, "the SmartNIC to hold the reloaded values")
    finally:
        channel.close()


def test_reloaded_merge_services_and_idle_timeout_reach_the_switch(nic_rig):
    rig, _ = nic_rig

    def change(config):
        config["merge_services"].append({"prefix": "10.10.0.10/32", "ports": "8443"})
        config["elephant"]["idle_timeout_s"] = 7

    with reloaded(rig, change):
        ports = {dict(m)["dst_port"] for m, _, _, _, d in rig.table("merge_services") if not d}
        assert ports == {(5201, 5210), (443, 443), (8443, 8443)}
        # An operator's onload without --idle takes the reloaded default.
        assert rig.ctl("flows", "onload", "198.51.100.7:40123", "10.10.0.10:80").returncode == 0
        try:
            entries = wait_until(
                lambda: [e for e in rig.read_raw(fy.P4TableEntry(names.MERGE_FLOWS)) if e.match and e.match["src_port"] == 40123], 15, "the onloaded flow"
            )
            assert entries[0].idle_timeout_ns == 7_000_000_000
        finally:
            assert rig.ctl("flows", "offload", "198.51.100.7:40123", "10.10.0.10:80").returncode == 0
