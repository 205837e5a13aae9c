"""`make run` refuses, in one line with the cause and the fix, to start where
it cannot: a port it needs is taken, or another rack is running (which it
used to sweep away: a second `make run` ended the first one's rack)."""

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import grpc
import pytest
from emulation import cleanup, plan, procs
from emulation.rack import JUMBOGATECTL, Parts, Rack

pytestmark = [
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root (Mininet creates namespaces and veths)"),
    pytest.mark.timeout(180),
]
TOPOLOGY_ONLY = "Parts(switch=False, nic=False, controller=False)"


def make_run(*args: str) -> subprocess.CompletedProcess:
    """`make run` as mininet/run.sh starts it, with the CLI's stdin closed."""
    env = dict(os.environ, PYTHONPATH=f"{procs.REPO / 'mininet'}:{procs.REPO}")
    return subprocess.run(
        [sys.executable, "-m", "emulation.run", *args], cwd=procs.REPO, env=env, capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=120
    )


def test_a_taken_port_is_named_with_its_holder_and_nothing_is_started():
    host, port = plan.CONTROLLER_ADDRESS.rsplit(":", 1)
    with socket.socket() as squatter:
        # Connections to the port from an earlier run may still be in
        # TIME-WAIT; they do not stop a listener that asks to reuse it.
        squatter.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        squatter.bind((host, int(port)))
        squatter.listen()
        done = make_run("--switch", "soft")
        assert done.returncode == 1, done.stdout + done.stderr
        me = f"{Path('/proc/self/comm').read_text().strip()} (pid {os.getpid()})"
        assert done.stderr.splitlines() == [
            f"make run: the controller's operator API address {plan.CONTROLLER_ADDRESS} is in use by {me}:"
            " stop that process or free the port (the rack's fixed addresses are in mininet/emulation/plan.py)"
        ], done.stderr
        assert not cleanup.find_leftovers(), cleanup.find_leftovers().describe()
        # The same check in the library, for a rack of the switch alone.
        with pytest.raises(procs.StartError, match="is in use"):
            Rack(Parts(switch=False, nic=False, controller=True)).up()


def test_a_second_make_run_leaves_the_running_rack_alone():
    script = f"from emulation.rack import JUMBOGATECTL, Parts, Rack; import time; r = Rack({TOPOLOGY_ONLY}); r.up(); print('up', flush=True); time.sleep(600)"
    env = dict(os.environ, PYTHONPATH=f"{procs.REPO / 'mininet'}:{procs.REPO}")
    first = subprocess.Popen([sys.executable, "-c", script], cwd=procs.REPO, env=env, stdout=subprocess.PIPE, text=True, start_new_session=True)
    try:
        assert first.stdout.readline().strip() == "up", "the first rack did not come up"
        before = cleanup.find_leftovers()
        assert before.interfaces, "the first rack's interfaces"
        done = make_run("--switch", "soft")
        assert done.returncode == 1
        assert f"another emulated rack is running (pid {first.pid}: " in done.stderr, done.stderr
        assert "end it with 'make stop'" in done.stderr
        # Still there, all of it.
        assert first.poll() is None
        time.sleep(0.5)
        assert cleanup.find_leftovers().interfaces == before.interfaces
    finally:
        os.killpg(first.pid, signal.SIGKILL)
        first.wait(10)
        subprocess.run(["bash", str(procs.REPO / "mininet" / "stop.sh")], capture_output=True, timeout=60)
    assert not cleanup.find_leftovers(), cleanup.find_leftovers().describe()


def refused_to_the_dashboard(rack, holder: str) -> dict[str, grpc.StatusCode]:
    """What the switch and the SmartNIC answer a certificate from the rack's CA that is not the controller's."""
    from finsy.proto import p4r, p4r_grpc

    from jumbogate.v1 import nic_pb2, nic_pb2_grpc

    answers = {}
    for part, address, call in (
        ("switch", plan.P4RUNTIME_ADDRESS, lambda ch: p4r_grpc.P4RuntimeStub(ch).Capabilities(p4r.CapabilitiesRequest(), timeout=5)),
        ("smartnic", plan.NIC_CONTROL_ADDRESS, lambda ch: nic_pb2_grpc.NicStub(ch).Configure(nic_pb2.NicConfig(), timeout=5)),
    ):
        with grpc.secure_channel(address, rack.tls.credentials(holder)) as channel:
            try:
                call(channel)
                answers[part] = grpc.StatusCode.OK
            except grpc.RpcError as err:
                answers[part] = err.code()
    return answers


def test_the_rack_runs_with_mutual_tls_on_every_control_channel():
    """`make run TLS=1`: the switch, the SmartNIC and the controller come up with the throwaway CA's
    certificates, the border forwards (the controller programmed the switch over TLS), the SmartNIC is
    reached, and the read-only certificate may look but not change."""
    from emulation.tls import VIEWER

    with Rack(tls=True) as rack:
        stats = json.loads(rack.ctl("stats", json_output=True).stdout)
        assert stats["switch_connected"] and stats["nic"]["reachable"], stats
        assert "mutual TLS" in procs.log_path("nic").read_text()
        viewer = [str(JUMBOGATECTL), "--controller", plan.CONTROLLER_ADDRESS, *rack.tls.ctl_args(VIEWER)]
        assert subprocess.run([*viewer, "fleet", "show"], capture_output=True, timeout=30).returncode == 0
        # status is a read: the viewer sees the rack's own etcd and the controller leading it.
        status = subprocess.run([*viewer, "status"], capture_output=True, text=True, timeout=30)
        assert status.returncode == 0 and f"store     etcd://{plan.ETCD_CLIENT_ADDRESS}: healthy" in status.stdout, status.stdout
        assert "this controller leads" in status.stdout, status.stdout
        denied = subprocess.run([*viewer, "fleet", "jumbo", "off"], capture_output=True, text=True, timeout=30)
        assert denied.returncode == 6 and "read-only" in denied.stderr, denied.stderr
        plaintext = subprocess.run(
            [str(JUMBOGATECTL), "--controller", plan.CONTROLLER_ADDRESS, "--timeout", "2", "fleet", "show"], capture_output=True, timeout=30
        )
        assert plaintext.returncode == 4
        if rack.target == "soft":
            assert refused_to_the_dashboard(rack, VIEWER) == {"switch": grpc.StatusCode.PERMISSION_DENIED, "smartnic": grpc.StatusCode.PERMISSION_DENIED}
    assert not cleanup.find_leftovers(), cleanup.find_leftovers().describe()
