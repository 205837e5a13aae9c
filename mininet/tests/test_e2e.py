"""End to end on each switch target: the real switch, SmartNIC program and controller, real TCP between real hosts.

Bounded: one rack per target (jumbogate-switch always, BMv2 where present), transfers of FILE_MB each way over IPv4 and IPv6.
"""

import hashlib
import os
import re
import subprocess

import pytest
from emulation import cleanup, measure, plan
from emulation.rack import Parts, Rack, missing_prerequisites

FILE_MB = 50
INBOUND_PORT = plan.IPERF_PORTS[4]  # a merge service of the jumbo instance
RETURN_PORT = 6001
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


def transfer(rack, sender: str, receiver: str, address: str, port: int, infile, outfile) -> tuple[str, str]:
    """Send infile from sender to receiver:port; return (sha256 sent, sha256 received)."""
    server = rack.host(receiver).popen(measure.module_command("transfer", "serve", port, outfile), env=measure.MODULE_ENV)
    try:
        measure.wait_listening(rack.host(receiver), (port,))
        client = rack.host(sender).popen(measure.module_command("transfer", "send", address, port, infile), env=measure.MODULE_ENV)
        sent, err = client.communicate(timeout=TRANSFER_TIMEOUT_S)
        assert client.returncode == 0, err.decode()
        received, err = server.communicate(timeout=30)
        assert server.returncode == 0, err.decode()
    finally:
        if server.poll() is None:
            server.kill()
    # Each side prints "<bytes> <sha256>" last (the server prints "listening" first).
    return sent.decode().split()[-1], received.decode().split()[-1]


@pytest.mark.parametrize("family", ["ipv4", "ipv6"])
def test_file_goes_in_and_back_out_unchanged(rack, payload, tmp_path, family):
    infile, digest = payload
    ext = plan.EXTERNAL_HOSTS[0]
    jumbo_addr = plan.JUMBO.address.ip4 if family == "ipv4" else plan.JUMBO.address.ip6
    ext_addr = ext.address.ip4 if family == "ipv4" else ext.address.ip6
    intf = f"{plan.JUMBO.host}-eth0"
    capture = measure.Capture(rack.host(plan.JUMBO.host), intf, tmp_path / "in.pcap", direction="in")
    sent, received = transfer(rack, ext.host, plan.JUMBO.host, jumbo_addr, INBOUND_PORT, infile, tmp_path / "at-instance.bin")
    sizes = capture.stop()
    assert sent == received == digest
    merged = [s for s in sizes if s > plan.MTU_EXTERNAL]
    assert merged, f"no merged packets at {plan.JUMBO.host}: {measure.size_summary(sizes)}"
    assert max(sizes) <= plan.MTU_JUMBO_GUEST
    print(f"{family} inbound: {measure.size_summary(sizes)}")

    capture = measure.Capture(rack.host(ext.host), f"{ext.host}-eth0", tmp_path / "out.pcap", direction="in")
    sent, received = transfer(rack, plan.JUMBO.host, ext.host, ext_addr, RETURN_PORT, tmp_path / "at-instance.bin", tmp_path / "back.bin")
    sizes = capture.stop()
    assert sent == received == digest
    assert max(sizes) <= plan.MTU_EXTERNAL


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
        capture = measure.Capture(instance, f"{plan.JUMBO.host}-eth0", tmp_path / "icmp.pcap", direction="in", bpf="icmp or icmp6")
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


def test_teardown_leaves_nothing(rack):
    rack.down()
    left = cleanup.find_leftovers()
    assert not left, left.describe()
    out = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True).stdout
    assert not any(plan.NAMES.owns_interface(line.split(":")[1].strip().split("@")[0]) for line in out.splitlines())
