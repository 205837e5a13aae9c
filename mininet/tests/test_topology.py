"""The topology alone: it comes up as planned and goes away without a trace, also after a crash (then also with every part on each switch target)."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from emulation import cleanup, plan, procs
from emulation.rack import Parts, Rack

pytestmark = [
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root (Mininet creates namespaces and veths)"),
    pytest.mark.timeout(180),
]
TOPOLOGY_ONLY = Parts(switch=False, nic=False, controller=False)


@pytest.fixture(scope="module")
def rack():
    with Rack(TOPOLOGY_ONLY) as rack:
        yield rack
    assert not cleanup.find_leftovers(), cleanup.find_leftovers().describe()


def link_of(rack, node, intf):
    return rack.host(node).cmd(f"ip -d link show {intf}")


def test_mtus_as_planned(rack):
    for port in plan.SWITCH_PORTS:
        assert f"mtu {port.mtu} " in link_of(rack, port.peer, port.peer_intf)
        assert f"mtu {plan.MTU_SWITCH_SIDE} " in link_of(rack, plan.MGMT_NODE, port.intf)
    assert f"mtu {plan.MTU_JUMBO_GUEST} " in link_of(rack, plan.JUMBO.host, f"{plan.JUMBO.host}-eth0")
    for ext in plan.EXTERNAL_HOSTS:
        assert f"mtu {plan.MTU_EXTERNAL} " in link_of(rack, ext.host, f"{ext.host}-eth0")


def test_offloads_off_on_the_path(rack):
    for port in plan.SWITCH_PORTS:
        for node, intf in ((plan.MGMT_NODE, port.intf), (port.peer, port.peer_intf)):
            features = rack.host(node).cmd(f"ethtool -k {intf}")
            for feature in ("tx-checksumming", "generic-segmentation-offload", "generic-receive-offload", "tcp-segmentation-offload"):
                assert f"{feature}: off" in features, f"{intf}: {feature} is on"


def test_switch_ports_carry_the_planned_macs(rack):
    for port in plan.SWITCH_PORTS:
        assert port.mac in link_of(rack, plan.MGMT_NODE, port.intf)
        assert port.peer_mac in link_of(rack, port.peer, port.peer_intf)


def test_external_lan_and_management_link(rack):
    ext = plan.EXTERNAL_HOSTS[0]
    for router in plan.ROUTERS:
        assert "1 received" in rack.host(ext.host).cmd(f"ping -c1 -W2 {router.lan.ip4}")
        assert "1 received" in rack.host(ext.host).cmd(f"ping -c1 -W2 {router.lan.ip6}")
    assert "1 received" in rack.host(plan.NIC_HOST).cmd(f"ping -c1 -W2 {plan.MGMT_ROOT.ip4}")


def test_instances_route_through_the_border(rack):
    for inst in plan.INSTANCES:
        route = rack.host(inst.host).cmd(f"ip route get {plan.EXTERNAL_HOSTS[0].address.ip4}")
        assert f"via {inst.gateway.ip4}" in route
        assert plan.switch_port(inst.host).mac in rack.host(inst.host).cmd("ip neigh show")


@pytest.mark.parametrize(
    "target",
    [
        pytest.param(None, id="topology"),
        pytest.param("soft", id="soft"),
        pytest.param("bmv2", id="bmv2", marks=pytest.mark.bmv2),
    ],
)
def test_stop_cleans_up_after_a_crash(rack, target):
    """A second emulation process killed with SIGKILL mid-run leaves state; `make stop` removes all of it.

    Once with the topology alone, and once per switch target with every part
    running (switch, SmartNIC, controller).
    """
    # The module's own rack is torn down first: two emulations cannot share names.
    rack.down()
    repo = procs.REPO
    parts = "Parts(False, False, False)" if target is None else "Parts()"
    script = (
        f"from emulation.rack import Parts, Rack; import time; r = Rack({parts}, switch_target={target!r}); r.up(); print('up', flush=True); time.sleep(600)"
    )
    env = dict(os.environ, PYTHONPATH=f"{repo / 'mininet'}:{repo}")
    child = subprocess.Popen([sys.executable, "-c", script], cwd=repo, env=env, stdout=subprocess.PIPE, text=True, start_new_session=True)
    try:
        assert child.stdout.readline().strip() == "up", "the rack did not come up"
        # Something started inside a host outlives the crash unless the namespace sweep finds it.
        subprocess.Popen(["mnexec", "-da", str(_shell_pid("ext1")), "sleep", "600"], start_new_session=True)
        os.killpg(child.pid, signal.SIGKILL)
        child.wait(10)
        time.sleep(0.5)
        left = cleanup.find_leftovers()
        assert left, "the crashed run should have left something to clean"
        if target == "soft":
            assert any("jumbogate-switch" in p for p in left.processes), left.describe()
        result = subprocess.run(["bash", str(repo / "mininet" / "stop.sh")], capture_output=True, text=True, timeout=60)
        assert result.returncode == 0, result.stderr
        assert not cleanup.find_leftovers(), cleanup.find_leftovers().describe()
        assert not Path(procs.STATE_FILE).exists()
    finally:
        if child.poll() is None:
            os.killpg(child.pid, signal.SIGKILL)
        cleanup.sweep()


def _shell_pid(node: str) -> int:
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                cmd = Path(f"/proc/{entry}/cmdline").read_bytes()
            except OSError:
                continue
            if cmd.endswith(f"mininet:{node}\0".encode()):
                return int(entry)
    raise AssertionError(f"no Mininet shell for {node}")
