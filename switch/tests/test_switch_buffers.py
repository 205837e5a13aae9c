"""The pools of receive buffers against what can be out of the switch's hands (switch/ports.c; runtime/port.c,
jg_pool_reserved).

Ports of one socket and buffer size share a pool; net_af_xdp ports keep their own. A NIC's receive ring is filled from
its pool at start and its transmit ring frees what it sent only as it wraps, so a pool's buffers can sit in every
such port's transmit ring; a cache and two bursts are out too, and the packet-in queue can hold 1024 of one port's
frames. A smaller pool starves reception, and an AF_XDP port that cannot fill its ring receives nothing: --mbufs below
that is refused with the figure to give, and without --mbufs each pool is that large. Ports that copy every frame
(net_af_packet, net_pcap, net_null) keep none in their queues.

net_ring stands in for a NIC here: like every port the runtime does not know to copy, it is counted as one.
"""

from __future__ import annotations

import os
import re
import subprocess
import time

import pytest
from switch_harness import SWITCH_BINARY

from testlab import lab
from testlab.nic_harness import Netns, remove_runtime_dir, unique, veth
from testlab.portbench import xdp_unavailable

RX_DESCRIPTORS = TX_DESCRIPTORS = 1024
CACHE_AND_BURSTS = 256 * 3 // 2 + 2 * 32  # a per-core cache up to its flush threshold, two bursts of 32
PACKET_IN_QUEUE = 1024


def run_switch(
    tmp_path, devices: list[str], options: list[str] = (), netns: Netns | None = None, serving=None, ports: list[str] | None = None
) -> tuple[int, str]:
    """The switch with one worker on the named vdevs (its ports: `ports`, or every vdev): (exit status, output). Once
    it serves, `serving(file prefix)` is called, if given, and the switch stopped."""
    prefix = unique("jgbuf")
    args = [SWITCH_BINARY, "--no-huge", "-m", "512", "--no-pci", "--file-prefix", prefix, "--lcores", "0@0,1@1"]
    args += ["--log-level=lib.eal:error", *(f"--vdev={device}" for device in devices), "--"]
    for number, name in enumerate(ports or [device.split(",")[0] for device in devices], start=1):
        args += ["--port", f"{number}={name}"]
    grpc = f"unix:{tmp_path / (prefix + '.sock')}" if netns else f"127.0.0.1:{lab.free_tcp_port()}"
    args += ["--grpc", grpc, *options]
    if netns is not None:
        args = ["ip", "netns", "exec", netns.name, *args]
    log = tmp_path / f"{prefix}.log"
    with open(log, "w") as out:
        proc = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 30
        while proc.poll() is None and "jumbogate-switch ready" not in log.read_text() and time.monotonic() < deadline:
            time.sleep(0.05)
        if proc.poll() is None:
            if serving is not None:
                serving(prefix)
            proc.terminate()
        return proc.wait(timeout=30), log.read_text()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        remove_runtime_dir(prefix)


def rings(count: int) -> list[str]:
    return [f"net_ring{i}" for i in range(count)]


def refused_asking_for(result: tuple[int, str]) -> int:
    status, output = result
    found = re.search(r"--mbufs \d+ is too few: .* give --mbufs (\d+) or more", output)
    assert status != 0 and found, output
    return int(found.group(1))


def pools_of(result: tuple[int, str], ports: int) -> list[tuple[int, int | str]]:
    """The pools the switch made once it served, (buffers, whose) for each: the number of ports sharing a pool, then
    the name of each port with a pool of its own."""
    status, output = result
    assert f"jumbogate-switch ready: {ports} ports, 1 workers" in output, output
    shared = re.findall(r"^jumbogate-switch: (\d+) receive buffers of \d+ bytes in pool \d+, for (\d+) ports?$", output, re.M)
    own = re.findall(r"^jumbogate-switch: (\d+) receive buffers of \d+ bytes in port (\S+)'s own pool$", output, re.M)
    return [(int(size), int(count)) for size, count in shared] + [(int(size), name) for size, name in own]


def pool_of(result: tuple[int, str], ports: int) -> int:
    """The one pool all the ports share."""
    pools = pools_of(result, ports)
    assert len(pools) == 1 and pools[0][1] == ports, pools
    return pools[0][0]


def test_a_pool_smaller_than_the_queues_keep_is_refused_with_the_figure_to_give(tmp_path):
    needed = RX_DESCRIPTORS + CACHE_AND_BURSTS + TX_DESCRIPTORS + PACKET_IN_QUEUE
    assert refused_asking_for(run_switch(tmp_path, rings(1), ["--mbufs", "512"])) == needed
    assert refused_asking_for(run_switch(tmp_path, rings(1), ["--mbufs", str(needed - 1)])) == needed
    assert pool_of(run_switch(tmp_path, rings(1), ["--mbufs", str(needed)]), 1) == needed


def test_without_mbufs_the_pool_holds_what_the_queues_keep(tmp_path):
    """Three NICs share one pool: its buffers fill three receive rings and may wait in all three transmit rings; one
    cache and one packet-in queue. A pool per port held 3 x 5,568 buffers for the same ports."""
    assert pool_of(run_switch(tmp_path, rings(3)), 3) == 3 * RX_DESCRIPTORS + CACHE_AND_BURSTS + 3 * TX_DESCRIPTORS + PACKET_IN_QUEUE


def test_shared_pools_grow_with_the_ports_not_their_square(tmp_path):
    """Eight NICs: one pool of 8 receive and 8 transmit rings (17,856 buffers), where a pool per port needed 8 x
    10,688. The refusal names the shared pool's figure."""
    needed = 8 * RX_DESCRIPTORS + CACHE_AND_BURSTS + 8 * TX_DESCRIPTORS + PACKET_IN_QUEUE
    assert pool_of(run_switch(tmp_path, rings(8), ["--port-mtu", "1500"]), 8) == needed
    assert refused_asking_for(run_switch(tmp_path, rings(8), ["--mbufs", str(needed - 1)])) == needed


def test_a_port_that_wants_larger_buffers_gets_a_pool_of_its_own(tmp_path):
    """An af_packet port whose ring frames are 4096 bytes refuses the 2048-byte buffers it would share with a ring at
    MTU 1500: it gets a pool of its own of larger buffers, and the switch serves."""
    ns = Netns("jgbuf")
    try:
        veth(ns, "jgbq0", ns, "jgbq1", mtu_a=1500, mtu_b=1500)
        devices = ["net_ring0", "net_af_packet0,iface=jgbq0,framesz=4096,blocksz=4096"]
        status, output = run_switch(tmp_path, devices, ["--port-mtu", "1500"], netns=ns)
        assert "jumbogate-switch ready: 2 ports, 1 workers" in output, output
        assert re.search(r"port net_af_packet0 wants larger buffers; trying 4096 bytes in a pool of its own", output), output
    finally:
        ns.delete()


def test_ports_that_copy_frames_keep_none_of_the_pool(tmp_path):
    """Thirty ports that copy (a P4Testgen corpus's wiring) need only the cache, bursts and packet-in queue; beside a
    NIC, only the NIC's rings count."""
    nulls = [f"net_null{i},no-rx=1" for i in range(30)]
    assert pool_of(run_switch(tmp_path, nulls, ["--port-mtu", "1500"]), 30) == CACHE_AND_BURSTS + PACKET_IN_QUEUE
    # The pool they share: the ring's receive and transmit rings; neither of the null port's queues.
    needed = RX_DESCRIPTORS + CACHE_AND_BURSTS + TX_DESCRIPTORS + PACKET_IN_QUEUE
    assert refused_asking_for(run_switch(tmp_path, ["net_ring0", "net_null0,no-rx=1"], ["--mbufs", str(needed - 1)])) == needed


def test_at_rest_a_pool_has_out_what_its_receive_queue_keeps(tmp_path):
    """The model against the ports themselves: once the switch serves, with no traffic, the AF_XDP port's own pool
    has 2048 buffers in its socket's fill ring and the af_packet port's pool none (DPDK telemetry's
    /jumbogate_switch/buffers, each pool's buffers outside it)."""
    if why := xdp_unavailable():
        pytest.skip(f"af_xdp: {why}")
    ns = Netns("jgbuf")
    try:
        veth(ns, "jgbx0", ns, "jgbx1", mtu_a=1500, mtu_b=1500)
        veth(ns, "jgbp0", ns, "jgbp1", mtu_a=1500, mtu_b=1500)
        pools = {}

        def read_pools(prefix: str) -> None:
            pools.update(lab.telemetry_query(prefix, "/jumbogate_switch/buffers"))

        devices = ["net_af_xdp0,iface=jgbx0", "net_af_packet0,iface=jgbp0"]
        status, output = run_switch(tmp_path, devices, ["--port-mtu", "1500"], netns=ns, serving=read_pools)
        assert [whose for _, whose in pools_of((status, output), 2)] == [1, "net_af_xdp0"], output
        port_pools = sorted(count for name, count in pools.items() if name.startswith("jg_rx_"))
        assert port_pools == [0, 2048], pools
    finally:
        ns.delete()


def test_a_bond_keeps_what_its_members_keep(tmp_path):
    """net_bonding sets up each member's queues from the bond's pool: a bond of two net_tap ports (each keeps a
    buffer per receive descriptor) needs both members' rings, 5,568 buffers, and at rest has about 2048 of them out. Counted
    as one NIC it got 3,520; before the members were read from the bond's arguments (they join it only when it is
    configured, after the pools are sized), it got 1,472 and the second member's receive queue could not be set up.
    At rest each member has all of its receive ring's buffers but one out."""
    if not os.path.exists("/dev/net/tun"):
        pytest.skip("net_tap: /dev/net/tun is missing")
    ns = Netns("jgbuf")
    try:
        pools = {}

        def read_pools(prefix: str) -> None:
            pools.update(lab.telemetry_query(prefix, "/jumbogate_switch/buffers"))

        devices = ["net_tap0,iface=jgbt0", "net_tap1,iface=jgbt1", "net_bonding0,mode=0,slave=net_tap0,slave=net_tap1"]
        status, output = run_switch(tmp_path, devices, ["--port-mtu", "1500"], netns=ns, serving=read_pools, ports=["net_bonding0"])
        assert pool_of((status, output), 1) == 2 * RX_DESCRIPTORS + CACHE_AND_BURSTS + 2 * TX_DESCRIPTORS + PACKET_IN_QUEUE
        out = [count for name, count in pools.items() if name.startswith("jg_rx_")]
        # net_tap fills all of a ring's descriptors but one.
        assert len(out) == 1 and 2 * (RX_DESCRIPTORS - 1) <= out[0] <= 2 * RX_DESCRIPTORS, pools
    finally:
        ns.delete()
