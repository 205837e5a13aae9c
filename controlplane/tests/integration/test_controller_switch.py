"""The real controller against a real switch: jumbogate-switch, and BMv2 where present.

One switch and one controller per target; tests that restart either put
things back. The switch is read back by an independent P4Runtime client
(a backup with a lower election id), never through the controller.
What the SmartNIC adds is test_controller_nic.py's subject, reloads of
rack.yaml test_controller_reload.py's.
"""

from __future__ import annotations

import time

import finsy as fy
import pytest
import yaml
from controller_rig import FLEET_OFF, FLEET_ON, PORTS, VENV_BIN, Rig, intruder, ip, mac, reconciled, wait_until

from jumbogate.controller import RESYNC_INTERVAL_S
from jumbogate.p4 import names
from testlab import lab

pytestmark = [pytest.mark.timeout(300)]


def test_initial_programming_is_read_back_from_the_switch(rig):
    result, actual = rig.desired_vs_switch()
    assert result.empty, f"switch differs from the config: {result.summary()}"
    kinds = {}
    for entity in actual:
        kinds[entity.WhichOneof("entity")] = kinds.get(entity.WhichOneof("entity"), 0) + 1
    routes = rig.config.routes
    assert kinds["action_profile_member"] == sum(len(r.next_hops) for r in routes) and kinds["action_profile_group"] == len(routes)
    # Per port a role; per route an LPM entry and a next_hops entry; per instance address a policy entry.
    addresses = sum(len(i.addresses) for i in rig.config.instances)
    assert kinds["table_entry"] >= len(PORTS) + 2 * len(routes) + addresses


def test_switch_holds_what_the_rack_config_says(rig):
    """Each value of rack_config() above, as the entry it must become, written out by hand (not by translate)."""
    roles = {port: role for port, role in ((1, 1), (2, 1), (3, 2), (4, 2), (5, 3))}
    assert {m: a for m, _, a, _, d in rig.table("port_roles") if not d} == {(("ingress_port", port),): (("role", role),) for port, role in roles.items()}
    # too_deep: forward
    assert rig.table("depth_policy") == {((), "forward_too_deep", (), 0, True)}
    # fleet jumbo true; the SmartNIC is not up yet: nothing is steered.
    assert rig.table("fleet_policy") == FLEET_ON
    assert rig.table("nic_port") == {((), "no_nic_port", (), 0, True)}
    assert rig.table("elephant_config") == {((), "set_elephant_threshold", (("bytes", 20000),), 0, True)}
    assert rig.table("signal_source") == {((), "signal_from_original_destination", (), 0, True)}
    # web-1 jumbo (both addresses), legacy-1 not.
    assert {(m, a) for m, _, a, _, d in rig.table("instances_v4") if not d} == {
        ((("instance_addr", ip("10.10.0.10")),), (("enabled", 1),)),
        ((("instance_addr", ip("10.10.0.20")),), (("enabled", 0),)),
    }
    assert {(m, a) for m, _, a, _, d in rig.table("instances_v6") if not d} == {((("instance_addr", ip("fd00:10::10")),), (("enabled", 1),))}
    # path_mtus: 198.51.100.0/24 at 1400, and the default external MTUs for
    # everything else: 1500 for IPv4; IPv6's minimum, 1280, as the rack sets none.
    assert {(m, a) for m, _, a, _, d in rig.table("path_mtu_v4") if not d} == {
        ((("dst_addr", (ip("198.51.100.0"), 24)),), (("mtu", 1400),)),
        ((), (("mtu", 1500),)),
    }
    assert {(m, a) for m, _, a, _, d in rig.table("path_mtu_v6") if not d} == {((), (("mtu", 1280),))}
    # icmp_rate_pps 50: every port with a role gets 50 packets/s and a quarter second of burst.
    meters = {m.index: m.config for m in rig.read_raw(fy.P4MeterEntry(names.ICMP_SIGNAL_METER)) if m.config is not None}
    assert set(meters) == set(PORTS)
    assert {(c.cir, c.cburst, c.pir, c.pburst) for c in meters.values()} == {(50, 12, 50, 12)}
    # icmp_rate_per_source_pps 8: all 256 source cells, burst 2.
    sources = {m.index: m.config for m in rig.read_raw(fy.P4MeterEntry(names.ICMP_SOURCE_METER)) if m.config is not None}
    assert set(sources) == set(range(256))
    assert {(c.cir, c.cburst, c.pir, c.pburst) for c in sources.values()} == {(8, 2, 8, 2)}
    # Routes: each prefix leads to a group whose members are its next hops.
    members = {m.member_id: (m.action.args["port"], m.action.args["dst_mac"]) for m in rig.read_raw(fy.P4ActionProfileMember(names.ECMP_SELECTOR))}
    groups = {g.group_id: {members[x.member_id] for x in g.members} for g in rig.read_raw(fy.P4ActionProfileGroup(names.ECMP_SELECTOR))}
    # A /0 route is written without its (wildcard) match field.
    routes = {(m[0][1] if m else "default"): a[0][1] for m, _, a, _, d in rig.table("routes_v4") if not d}
    routes.update({m[0][1]: a[0][1] for m, _, a, _, d in rig.table("routes_v6") if not d and m})
    upstream = {(1, mac("02:00:00:00:a0:01")), (2, mac("02:00:00:00:b0:01"))}
    assert groups[routes["default"]] == upstream
    assert groups[routes[(ip("10.10.0.10"), 32)]] == {(3, mac("02:00:00:00:0a:0a"))}
    assert groups[routes[(ip("10.10.0.20"), 32)]] == {(4, mac("02:00:00:00:0a:14"))}
    assert groups[routes[(ip("fd00:10::10"), 128)]] == {(3, mac("02:00:00:00:0a:0a"))}
    # Merge services go on only with the SmartNIC (see test_merge_services_follow_the_config).
    assert {m for m, _, _, _, d in rig.table("merge_services") if not d} == set()


def test_fleet_flag_reaches_the_switch(rig):
    """The flag flip is programmed by the run the flip triggers (waited for as an event, not a clock); the latency is printed."""
    flipped = time.monotonic()
    assert rig.ctl("fleet", "jumbo", "off").returncode == 0
    try:
        # The flip moved the policy's version: the first run that read it
        # wrote the flag, with nothing left over for a later run.
        reconciled(rig, "a reconcile run after the flip")
        print(f"fleet flag on the switch within {time.monotonic() - flipped:.2f} s")
        result, _ = rig.desired_vs_switch(fleet=False)
        assert result.empty, f"switch not updated: {result.summary()}"
        assert rig.table("fleet_policy") == FLEET_OFF
        refused = rig.ctl("instance", "jumbo", "legacy-1", "on")
        assert refused.returncode == 1 and "fleet jumbo flag is off" in refused.stderr
    finally:
        assert rig.ctl("fleet", "jumbo", "on").returncode == 0
    reconciled(rig, "a reconcile run after turning the flag back on")
    assert rig.desired_vs_switch()[0].empty


def test_controller_restart_writes_nothing(rig):
    before, _ = rig.read_switch()
    rig.controller.stop()
    rig.start_controller()
    stats = rig.wait_for_reconcile()
    totals = stats["reconcile"]
    assert (int(totals["inserted"]), int(totals["modified"]), int(totals["deleted"])) == (0, 0, 0), totals
    after, _ = rig.read_switch()
    assert sorted(e.SerializeToString(deterministic=True) for e in before) == sorted(e.SerializeToString(deterministic=True) for e in after)
    assert "ALREADY_EXISTS" not in rig.controller.output()


def test_an_entry_changed_behind_the_controllers_back_is_put_back(rig):
    """Another client takes the switch and turns the fleet flag off. While
    it is primary the controller (a backup) writes nothing, even across its
    5-second resync; once the other client leaves, the controller is primary
    again and puts the entry back."""
    assert rig.table("fleet_policy") == FLEET_ON
    off = fy.P4TableEntry(
        names.FLEET_POLICY, is_default_action=True, action=fy.P4TableAction(names.SET_FLEET_JUMBO, enabled=0, guest_jumbo_mtu=8000, default_mtu=1500)
    )
    with intruder(rig) as modify:
        modify(off)
        modified = int(rig.stats()["reconcile"]["modified"])
        time.sleep(RESYNC_INTERVAL_S + 1)
        # Seen off first: a test that only waited for "on" would pass if the write had failed.
        assert rig.table("fleet_policy") == FLEET_OFF, "a backup controller wrote"
        assert int(rig.stats()["reconcile"]["modified"]) == modified
    wait_until(lambda: int(rig.stats()["reconcile"]["modified"]) > modified, 20, "the controller to repair the entry", interval=0.2)
    assert rig.table("fleet_policy") == FLEET_ON
    assert rig.desired_vs_switch()[0].empty


def second_controller(rig: Rig, election_offset: int, name: str) -> tuple[lab.Process, str]:
    """Another controller of the same switch, with the fleet flag off in its
    config (so whichever writes shows on the switch), another API address
    and its own election id."""
    config = yaml.safe_load(rig.config_path.read_text())
    config["switch"]["election_id"] = rig.config.switch.election_id + election_offset
    config["fleet"]["jumbo"] = False
    for instance in config["instances"]:
        instance["jumbo"] = False
    api = f"127.0.0.1:{lab.free_tcp_port()}"
    config["controller"] = {"listen": api}
    config["smartnic"] = {"control": f"127.0.0.1:{lab.free_tcp_port()}"}
    path = rig.tmp / f"{name}.yaml"
    path.write_text(yaml.safe_dump(config))
    process = lab.Process([VENV_BIN / "jumbogate-controller", "--config", path, "--log-level", "INFO"], rig.tmp / f"{name}.log").start()
    lab.wait_for_tcp(api, 20, process=process.popen)
    return process, api


def test_a_controller_with_a_lower_election_id_cannot_write(rig):
    """P4Runtime arbitration: the second controller connects as a backup and
    writes nothing, however long it runs; the first goes on unaffected."""

    def writes() -> tuple:
        totals = rig.stats()["reconcile"]
        return tuple(int(totals.get(kind, 0)) for kind in ("inserted", "modified", "deleted", "failed_batches"))

    before = writes()
    second, _ = second_controller(rig, -5, "backup")
    try:
        wait_until(lambda: "as backup" in second.output(), 20, "the second controller to connect as a backup")
        time.sleep(RESYNC_INTERVAL_S + 1)
        assert rig.table("fleet_policy") == FLEET_ON, "the backup's fleet flag reached the switch"
    finally:
        assert second.stop() == 0, second.output()[-2000:]
    assert "Traceback" not in second.output()
    assert writes() == before, "the primary rewrote entries: the backup must have changed something"


def test_a_controller_with_a_higher_election_id_takes_over_and_the_first_steps_back(rig):
    """The second controller becomes primary and writes its own policy; the
    first, now a backup, stops writing (no refused batches) until the second
    leaves, then is primary again and puts its policy back."""
    failed = int(rig.stats()["reconcile"]["failed_batches"])
    # Above any id used before on this switch: a controller re-promoted after
    # another client left carries on with that client's (higher) id, as
    # P4Runtime arbitration lets it (the intruder above used +1000).
    second, _ = second_controller(rig, +100_000, "takeover")
    try:
        wait_until(lambda: rig.table("fleet_policy") == FLEET_OFF, 20, "the higher election id to take the switch over")
        wait_until(lambda: not rig.stats()["switch_connected"], 10, "the first controller to step back")
        time.sleep(RESYNC_INTERVAL_S + 1)
        assert rig.table("fleet_policy") == FLEET_OFF, "the first controller wrote while a backup"
        assert int(rig.stats()["reconcile"]["failed_batches"]) == failed, "the first controller kept trying to write"
    finally:
        assert second.stop() == 0, second.output()[-2000:]
    wait_until(lambda: rig.table("fleet_policy") == FLEET_ON, 20, "the first controller to take the switch back")
    wait_until(lambda: rig.stats()["switch_connected"], 10, "the first controller to report the switch connected")
    assert rig.desired_vs_switch()[0].empty
    log = rig.controller.output()
    assert "as backup" in log and "Traceback" not in log, log[-3000:]


def test_switch_restart_converges(rig):
    rig.switch.stop()
    rig.switch.start()
    deadline = time.monotonic() + 30
    while True:
        try:
            if rig.desired_vs_switch()[0].empty:
                break
        except Exception as err:  # the pipeline may not be back yet
            last = err
        else:
            last = None
        assert time.monotonic() < deadline, f"no convergence after switch restart ({last}); controller log:\n{rig.controller.output()[-3000:]}"
        time.sleep(0.3)
    log = rig.controller.output()
    assert "ALREADY_EXISTS" not in log and "Traceback" not in log
