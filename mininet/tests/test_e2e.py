"""End to end on each switch target: the real switch, SmartNIC program and controller, real TCP between real hosts.

Bounded: one rack per target (jumbogate-switch always, BMv2 where present), transfers of FILE_MB each way over IPv4 and IPv6.
"""

import hashlib
import json
import os
import re
import subprocess
import time

import pytest
from emulation import cleanup, measure, plan, procs
from emulation.rack import Parts, Rack, missing_prerequisites

from jumbogate.store import PREFIX
from testlab.etcd_process import etcdctl

FILE_MB = 50
INBOUND_PORT = plan.IPERF_PORTS[4]  # a merge service of the jumbo instance
RETURN_PORT = 6001
# ICMP frag-needed and ICMPv6 packet-too-big only: any other ICMP (an echo
# reply, an unreachable) says nothing about the MTU signal.
TOO_BIG_BPF = "(icmp[icmptype] == 3 and icmp[icmpcode] == 4) or (icmp6 and ip6[40] == 2)"
TRANSFER_TIMEOUT_S = 240

pytestmark = [pytest.mark.timeout(900)]
TARGETS = [pytest.param("soft", id="soft"), pytest.param("bmv2", id="bmv2", marks=pytest.mark.bmv2)]


@pytest.fixture(scope="module", params=TARGETS)
def rack(request):
    missing = missing_prerequisites(Parts(), request.param)
    if missing:
        pytest.skip("emulation prerequisites missing: " + "; ".join(missing))
    with Rack(switch_target=request.param) as rack:
        yield rack


@pytest.fixture(scope="module")
def payload(tmp_path_factory):
    path = tmp_path_factory.mktemp("e2e") / "payload.bin"
    with path.open("wb") as out:
        for _ in range(FILE_MB):
            out.write(os.urandom(1 << 20))
    return path, hashlib.sha256(path.read_bytes()).hexdigest()


def transfer(rack, sender: str, receiver: str, address: str, port: int, infile, outfile, *, rate_mbps: float = 0, meanwhile=None) -> tuple[str, str]:
    """Send infile from sender to receiver:port; return (sha256 sent, sha256 received).

    rate_mbps paces the sender; meanwhile() runs once the transfer is under way.
    """
    server = rack.host(receiver).popen(measure.module_command("transfer", "serve", port, outfile), env=measure.MODULE_ENV)
    try:
        measure.wait_listening(rack.host(receiver), (port,))
        client = rack.host(sender).popen(
            measure.module_command("transfer", "send", address, port, infile, *([rate_mbps] if rate_mbps else [])), env=measure.MODULE_ENV
        )
        if meanwhile is not None:
            meanwhile()
        sent, err = client.communicate(timeout=TRANSFER_TIMEOUT_S)
        assert client.returncode == 0, err.decode()
        received, err = server.communicate(timeout=30)
        assert server.returncode == 0, err.decode()
    finally:
        if server.poll() is None:
            server.kill()
    # Each side prints "<bytes> <sha256>" last (the server prints "listening" first).
    return sent.decode().split()[-1], received.decode().split()[-1]


def payload_bytes(pcap, min_size: int = 0) -> int:
    """TCP payload bytes of the packets of a (header-only) capture whose IP size is at least min_size."""
    from scapy.layers.inet import IP, TCP
    from scapy.layers.inet6 import IPv6
    from scapy.utils import rdpcap

    total = 0
    for packet in rdpcap(str(pcap)):
        if IP in packet and TCP in packet and packet[IP].len >= min_size:
            total += packet[IP].len - 4 * packet[IP].ihl - 4 * packet[TCP].dataofs
        elif IPv6 in packet and TCP in packet and packet[IPv6].plen + 40 >= min_size:
            total += packet[IPv6].plen - 4 * packet[TCP].dataofs
    return total


@pytest.mark.parametrize("family", ["ipv4", "ipv6"])
def test_file_goes_in_and_back_out_unchanged(rack, payload, tmp_path, family):
    infile, digest = payload
    ext = plan.EXTERNAL_HOSTS[0]
    jumbo_addr = plan.JUMBO.address.ip4 if family == "ipv4" else plan.JUMBO.address.ip6
    ext_addr = ext.address.ip4 if family == "ipv4" else ext.address.ip6
    intf = f"{plan.JUMBO.host}-eth0"
    root = rack.host(plan.MGMT_NODE)
    toward_instance = plan.switch_port(plan.JUMBO.host).intf
    dropped_before = measure.counters(root, toward_instance)
    capture = measure.Capture(rack.host(plan.JUMBO.host), intf, tmp_path / "in.pcap", direction="in")
    sent, received = transfer(rack, ext.host, plan.JUMBO.host, jumbo_addr, INBOUND_PORT, infile, tmp_path / "at-instance.bin")
    sizes = capture.stop()
    assert sent == received == digest
    merged = [s for s in sizes if s > plan.MTU_EXTERNAL]
    assert merged, f"no merged packets at {plan.JUMBO.host}: {measure.size_summary(sizes)}"
    # The instance's veth drops a frame above its MTU before any capture
    # there could see it: count what the switch's side failed to send.
    assert (measure.counters(root, toward_instance) - dropped_before).tx_dropped == 0
    print(f"{family} inbound: {measure.size_summary(sizes)}")

    # The return leg is split by the SmartNIC: watch both of its sides, jumbo
    # segments in and path-MTU segments out. Each is captured where it is
    # received (the SmartNIC's interface, the switch's port toward it): DPDK's
    # af_packet transmits past the kernel's taps, so a sender-side capture
    # would see nothing.
    nic_port = plan.switch_port(plan.NIC_HOST).intf
    bpf = f"tcp port {RETURN_PORT}"
    to_nic = measure.Capture(rack.host(plan.NIC_HOST), plan.NIC_INTF, tmp_path / "to-nic.pcap", direction="in", bpf=bpf)
    from_nic = measure.Capture(root, nic_port, tmp_path / "from-nic.pcap", direction="in", bpf=bpf)
    at_ext = measure.Capture(rack.host(ext.host), f"{ext.host}-eth0", tmp_path / "out.pcap", direction="in", bpf=bpf)
    sent, received = transfer(rack, plan.JUMBO.host, ext.host, ext_addr, RETURN_PORT, tmp_path / "at-instance.bin", tmp_path / "back.bin")
    into_nic, out_of_nic, at_external = to_nic.stop(), from_nic.stop(), at_ext.stop()
    assert sent == received == digest
    jumbo_into_nic = [s for s in into_nic if s > plan.MTU_EXTERNAL]
    assert jumbo_into_nic, f"no jumbo segment reached the SmartNIC to be split: {measure.size_summary(into_nic)}"
    assert out_of_nic and max(out_of_nic) <= plan.MTU_EXTERNAL, f"the SmartNIC sent segments above the path MTU: {measure.size_summary(out_of_nic)}"
    assert at_external and max(at_external) <= plan.MTU_EXTERNAL
    # Splitting keeps every byte: what left the SmartNIC carries at least the
    # payload of the jumbo segments that entered it (plus any it passed whole).
    assert payload_bytes(from_nic.path) >= payload_bytes(to_nic.path, min_size=plan.MTU_EXTERNAL + 1) > 0
    print(f"{family} return leg: into the SmartNIC {measure.size_summary(into_nic)}; out of it {measure.size_summary(out_of_nic)}")


def test_non_jumbo_instance_gets_nothing_above_1500(rack, payload, tmp_path):
    infile, digest = payload
    intf = f"{plan.LEGACY.host}-eth0"
    port = plan.switch_port(plan.LEGACY.host)
    root = rack.host(plan.MGMT_NODE)
    switch_side_before = measure.counters(root, port.intf)
    capture = measure.Capture(rack.host(plan.LEGACY.host), intf, tmp_path / "legacy.pcap", direction="in")
    sent, received = transfer(rack, plan.EXTERNAL_HOSTS[1].host, plan.LEGACY.host, plan.LEGACY.address.ip4, INBOUND_PORT, infile, tmp_path / "legacy.bin")
    sizes = capture.stop()
    assert sent == received == digest
    assert max(sizes) <= plan.MTU_EXTERNAL
    # A frame too big for the instance's veth would be dropped before any capture sees it: count those too.
    assert (measure.counters(root, port.intf) - switch_side_before).tx_dropped == 0


@pytest.mark.parametrize("family", ["ipv4", "ipv6"])
def test_too_big_is_signalled_when_policy_forbids_jumbo(rack, tmp_path, family):
    instance = rack.host(plan.JUMBO.host)
    ext = plan.EXTERNAL_HOSTS[0]
    target = ext.address.ip4 if family == "ipv4" else ext.address.ip6
    instance.cmd("ip route flush cache; ip -6 route flush cache")
    rack.ctl("instance", "jumbo", plan.JUMBO.host, "off")
    try:
        capture = measure.Capture(instance, f"{plan.JUMBO.host}-eth0", tmp_path / "icmp.pcap", direction="in", bpf=TOO_BIG_BPF)
        # Three DF probes of 4000 bytes: the first is signalled, the kernel learns the MTU.
        flag = "-4" if family == "ipv4" else "-6"
        instance.cmd(f"ping {flag} -M do -s 4000 -c 3 -i 0.3 -W 1 {target}")
        capture.stop()
        assert measure.pcap_frame_lengths(capture.path), "no ICMP too-big reached the sender"
        route = instance.cmd(f"ip {flag} route get {target}")
        assert re.search(r"\bmtu 1500\b", route), route
    finally:
        rack.ctl("instance", "jumbo", plan.JUMBO.host, "on")
        instance.cmd("ip route flush cache; ip -6 route flush cache")


def test_both_uplinks_carry_traffic(rack):
    root = rack.host(plan.MGMT_NODE)
    before = measure.switch_port_counters(root)
    ext = rack.host(plan.EXTERNAL_HOSTS[0].host)
    measure.start_iperf_servers(ext, (5311,))
    result = measure.iperf_result(measure.iperf_client(rack.host(plan.JUMBO.host), plan.EXTERNAL_HOSTS[0].address.ip4, 5311, seconds=3, streams=8))
    after = measure.switch_port_counters(root)
    assert result.bytes_received > 0
    for router in plan.ROUTERS:
        delta = after[router.port.number] - before[router.port.number]
        assert delta.tx_packets > 0, f"nothing went out through {router.host}"


# Paced so that a transfer outlasts a restart: 50 MB at 100 Mbit/s is 4 s.
RESTART_RATE_MBPS = 100


def test_transfer_survives_a_smartnic_kill_and_restart(rack, payload, tmp_path):
    """SIGKILL the SmartNIC mid-transfer: the bypass carries the flow, and merging resumes after the restart."""
    infile, digest = payload
    intf = f"{plan.JUMBO.host}-eth0"

    def kill_and_restart():
        time.sleep(1.0)
        rack.nic_process.kill()
        rack.nic_process.wait(5)
        rack.wait_nic_down()
        rack.start_nic()

    capture = measure.Capture(rack.host(plan.JUMBO.host), intf, tmp_path / "nic-restart.pcap", direction="in", bpf=f"tcp port {INBOUND_PORT}")
    sent, received = transfer(
        rack, plan.EXTERNAL_HOSTS[0].host, plan.JUMBO.host, plan.JUMBO.address.ip4, INBOUND_PORT, infile, tmp_path / "r.bin",
        rate_mbps=RESTART_RATE_MBPS, meanwhile=kill_and_restart,
    )  # fmt: skip
    sizes = capture.stop()
    assert sent == received == digest
    assert any(s > plan.MTU_EXTERNAL for s in sizes), "nothing merged around the restart"


def test_transfer_survives_a_controller_restart(rack, payload, tmp_path):
    """Restart the controller mid-transfer: the transfer completes and the new controller writes nothing (no lost or duplicated entries)."""
    infile, digest = payload

    first_run = {}

    def restart_controller():
        time.sleep(1.0)
        procs.stop_process(rack.controller_process)
        rack.start_controller()
        # The new controller's first reconcile (later runs may rightly
        # remove a flow that went idle when the transfer ended).
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not first_run:
            stats = json.loads(rack.ctl("stats", json_output=True).stdout)
            if int(stats["reconcile"]["runs"]) >= 1:
                first_run.update(stats["reconcile"])
            time.sleep(0.05)

    sent, received = transfer(
        rack, plan.EXTERNAL_HOSTS[0].host, plan.JUMBO.host, plan.JUMBO.address.ip4, INBOUND_PORT, infile, tmp_path / "c.bin",
        rate_mbps=RESTART_RATE_MBPS, meanwhile=restart_controller,
    )  # fmt: skip
    assert sent == received == digest
    assert first_run, "the restarted controller never reconciled"
    assert (int(first_run["inserted"]), int(first_run["modified"]), int(first_run["deleted"])) == (0, 0, 0), first_run


def test_the_rack_keeps_its_policy_in_its_own_etcd_and_status_says_so(rack):
    """make run's embedded store: the controller leads the rack's election on the emulation's etcd, and
    `status` shows that etcd, the leader's id as the switch's primary and on the SmartNIC's fence."""
    status = json.loads(rack.ctl("status", json_output=True).stdout)
    assert status["store"]["endpoint"] == f"etcd://{plan.ETCD_CLIENT_ADDRESS}" and status["store"]["healthy"], status["store"]
    election = status["election"]
    assert election["leading"] and election["leader"] == plan.CONTROLLER_ADDRESS, election
    leader_id = (int(election["election_id_high"]), int(election["election_id_low"]))
    switch, nic = status["switch"], status["smartnic"]
    assert switch["connected"] and (int(switch["primary_election_id_high"]), int(switch["primary_election_id_low"])) == leader_id, switch
    assert nic["reachable"] and (int(nic["fence_election_id_high"]), int(nic["fence_election_id_low"])) == leader_id, nic
    # The policy lives in that etcd, seeded from mininet/rack.yaml (fleet jumbo on).
    assert json.loads(etcdctl(f"http://{plan.ETCD_CLIENT_ADDRESS}", "get", PREFIX + "fleet/jumbo", "--print-value-only").stdout) is True


def test_teardown_leaves_nothing(rack):
    rack.down()
    left = cleanup.find_leftovers()
    assert not left, left.describe()
    out = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True).stdout
    assert not any(plan.NAMES.owns_interface(line.split(":")[1].strip().split("@")[0]) for line in out.splitlines())
