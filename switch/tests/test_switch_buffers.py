"""The pools of receive buffers against what can be out of the switch's hands (switch/ports.c; runtime/port.c,
jg_pool_reserved).

Ports of one socket and buffer size share a pool; net_af_xdp ports keep their own. A NIC's receive ring is filled from
its pool at start and its transmit ring frees what it sent only as it wraps, so a pool's buffers can sit in every
such port's transmit ring; a cache and two bursts are out too, and the packet-in queue can hold 1024 of one port's
frames. A smaller pool starves reception, and an AF_XDP port that cannot fill its ring receives nothing: --mbufs below
that is refused with the figure to give, and without --mbufs each pool is that large. Ports that copy every frame
(net_af_packet, net_pcap, net_null) keep none in their queues.

net_ring stands in for a NIC here: like every port the runtime does not know to copy, it is counted as one. net_memif
copies too, unless it is a zero-copy client, whose rings hold buffers of 2^rsize slots.
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
    tmp_path,
    devices: list[str],
    options: list[str] = (),
    netns: Netns | None = None,
    serving=None,
    ports: list[str] | None = None,
    workers: int = 1,
    eal: list[str] = (),
) -> tuple[int, str]:
    """The switch with `workers` workers on the named vdevs (its ports: `ports`, or every vdev), `eal` added to its
    EAL options: (exit status, output). Once it serves, `serving(file prefix)` is called, if given, and the switch
    stopped."""
    prefix = unique("jgbuf")
    lcores = ",".join(["0@0", *(f"{worker}@1" for worker in range(1, workers + 1))])
    args = [SWITCH_BINARY, "--no-huge", "-m", "512", "--no-pci", "--file-prefix", prefix, "--lcores", lcores]
    args += ["--log-level=lib.eal:error", *eal, *(f"--vdev={device}" for device in devices), "--"]
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


def run_reading_pools(tmp_path, devices: list[str], options: list[str], netns: Netns, **kwargs) -> tuple[tuple[int, str], dict[str, int]]:
    """run_switch, and each pool's buffers outside it once the switch serves (DPDK telemetry's
    /jumbogate_switch/buffers)."""
    pools = {}

    def read_pools(prefix: str) -> None:
        pools.update(lab.telemetry_query(prefix, "/jumbogate_switch/buffers"))

    return run_switch(tmp_path, devices, options, netns=netns, serving=read_pools, **kwargs), pools


def receive_pools_out(pools: dict[str, int]) -> list[int]:
    """Buffers out of each receive pool, leaving out the packet-out and the drivers' own pools."""
    return [count for name, count in pools.items() if name.startswith("jg_rx_")]


def rings(count: int) -> list[str]:
    return [f"net_ring{i}" for i in range(count)]


def refused_asking_for(result: tuple[int, str]) -> int:
    status, output = result
    found = re.search(r"--mbufs \d+ is too few: .* give --mbufs (\d+) or more", output)
    assert status != 0 and found, output
    return int(found.group(1))


def pools_of(result: tuple[int, str], ports: int, workers: int = 1) -> list[tuple[int, int | str]]:
    """The pools the switch made once it served, (buffers, whose) for each: the number of ports sharing a pool, then
    the name of each port with a pool of its own."""
    status, output = result
    assert f"jumbogate-switch ready: {ports} ports, {workers} workers" in output, output
    shared = re.findall(r"^jumbogate-switch: (\d+) receive buffers of \d+ bytes in pool \d+, for (\d+) ports?$", output, re.M)
    own = re.findall(r"^jumbogate-switch: (\d+) receive buffers of \d+ bytes in port (\S+)'s own pool$", output, re.M)
    return [(int(size), int(count)) for size, count in shared] + [(int(size), name) for size, name in own]


def pool_of(result: tuple[int, str], ports: int, workers: int = 1) -> int:
    """The one pool all the ports share."""
    pools = pools_of(result, ports, workers)
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
    MTU 1500: it gets a pool of its own of larger buffers, as large as it alone needs (the cache, bursts, the
    ring's transmit ring and the packet-in queue), and the shared pool stays; a shared pool none of whose ports
    took it is freed."""
    ns = Netns("jgbuf")
    try:
        veth(ns, "jgbq0", ns, "jgbq1", mtu_a=1500, mtu_b=1500)
        devices = ["net_ring0", "net_af_packet0,iface=jgbq0,framesz=4096,blocksz=4096"]
        (status, output), pools = run_reading_pools(tmp_path, devices, ["--port-mtu", "1500"], ns)
        assert pools_of((status, output), 2) == [(RX_DESCRIPTORS + CACHE_AND_BURSTS + TX_DESCRIPTORS + PACKET_IN_QUEUE, 2)]
        own = CACHE_AND_BURSTS + TX_DESCRIPTORS + PACKET_IN_QUEUE
        assert f"port net_af_packet0 wants larger buffers; trying {own} of 4096 bytes in a pool of its own" in output, output
        assert sorted(name for name in pools if name.startswith("jg_rx_")) == ["jg_rx_1_4096", "jg_rx_pool0_2048"], pools
        # Alone, the port leaves its shared pool to nobody: the pool is freed.
        (status, output), pools = run_reading_pools(tmp_path, devices[1:], ["--port-mtu", "1500"], ns)
        assert "jumbogate-switch: pool 0 freed: its ports took pools of their own" in output, output
        assert sorted(name for name in pools if name.startswith("jg_rx_")) == ["jg_rx_0_4096"], pools
    finally:
        ns.delete()


def test_ports_of_two_buffer_sizes_get_two_pools_and_mbufs_sizes_each(tmp_path):
    """A ring at MTU 1500 (2048-byte buffers) and an N@IFACE af_packet port (12,288-byte frames) cannot share: two
    pools, each sized for its own ports. --mbufs is refused below the larger need, naming that pool, and sizes both."""
    ns = Netns("jgbuf")
    try:
        veth(ns, "jgbr0", ns, "jgbr1", mtu_a=1500, mtu_b=1500)
        options = ["--port-mtu", "1500", "--port", "2@jgbr0"]
        ring = RX_DESCRIPTORS + CACHE_AND_BURSTS + TX_DESCRIPTORS + PACKET_IN_QUEUE
        af_packet = CACHE_AND_BURSTS + TX_DESCRIPTORS + PACKET_IN_QUEUE
        assert pools_of(run_switch(tmp_path, ["net_ring0"], options, netns=ns), 2) == [(ring, 1), (af_packet, 1)]
        status, output = run_switch(tmp_path, ["net_ring0"], [*options, "--mbufs", str(ring - 1)], netns=ns)
        assert refused_asking_for((status, output)) == ring
        assert "buffers of the pool of port net_ring0 in receive" in output, output
        assert pools_of(run_switch(tmp_path, ["net_ring0"], [*options, "--mbufs", str(ring)], netns=ns), 2) == [(ring, 1), (ring, 1)]
    finally:
        ns.delete()


def test_each_worker_adds_its_rings_and_cache(tmp_path):
    """Two workers on two net_tap ports (each keeps a buffer per receive descriptor but one): every worker has a
    receive and a transmit ring on each port and a cache of the shared pool, and at rest the four receive rings have
    their buffers out."""
    if not os.path.exists("/dev/net/tun"):
        pytest.skip("net_tap: /dev/net/tun is missing")
    ns = Netns("jgbuf")
    try:
        devices = ["net_tap0,iface=jgbw0", "net_tap1,iface=jgbw1"]
        result, pools = run_reading_pools(tmp_path, devices, ["--port-mtu", "1500"], ns, workers=2)
        per_worker = 2 * RX_DESCRIPTORS + CACHE_AND_BURSTS + 2 * TX_DESCRIPTORS
        assert pool_of(result, 2, workers=2) == 2 * per_worker + PACKET_IN_QUEUE
        out = receive_pools_out(pools)
        assert len(out) == 1 and 4 * (RX_DESCRIPTORS - 1) <= out[0] <= 4 * RX_DESCRIPTORS, pools
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
        devices = ["net_af_xdp0,iface=jgbx0", "net_af_packet0,iface=jgbp0"]
        (status, output), pools = run_reading_pools(tmp_path, devices, ["--port-mtu", "1500"], ns)
        assert [whose for _, whose in pools_of((status, output), 2)] == [1, "net_af_xdp0"], output
        assert sorted(receive_pools_out(pools)) == [0, 2048], pools
    finally:
        ns.delete()


@pytest.mark.parametrize("members", ["net_tap0,slave=net_tap1", "0,slave=1"], ids=["by-name", "by-port-number"])
def test_a_bond_keeps_what_its_members_keep(tmp_path, members):
    """net_bonding sets up each member's queues from the bond's pool: a bond of two net_tap ports (each keeps a
    buffer per receive descriptor) needs both members' rings, 5,568 buffers, and at rest has about 2048 of them out.
    Counted as one NIC it got 3,520. The members join the bond only when it is configured, after the pools are
    sized: read from its arguments by name instead, a bond whose members were named by port number got 1,472 and the
    second member's receive queue could not be set up. At rest each member has all of its receive ring's buffers
    but one out."""
    if not os.path.exists("/dev/net/tun"):
        pytest.skip("net_tap: /dev/net/tun is missing")
    ns = Netns("jgbuf")
    try:
        devices = ["net_tap0,iface=jgbt0", "net_tap1,iface=jgbt1", f"net_bonding0,mode=0,slave={members}"]
        (status, output), pools = run_reading_pools(tmp_path, devices, ["--port-mtu", "1500"], ns, ports=["net_bonding0"])
        assert pool_of((status, output), 1) == 2 * RX_DESCRIPTORS + CACHE_AND_BURSTS + 2 * TX_DESCRIPTORS + PACKET_IN_QUEUE
        out = receive_pools_out(pools)
        assert len(out) == 1 and 2 * (RX_DESCRIPTORS - 1) <= out[0] <= 2 * RX_DESCRIPTORS, pools
    finally:
        ns.delete()


def test_memif_keeps_none_unless_a_zero_copy_client_and_then_its_rings(tmp_path):
    """A net_memif server copies every frame in and out of the shared memory: like a null port it keeps none. A client
    in zero-copy mode fills each of its receive ring's 2^rsize slots with a buffer of the pool and keeps what it sent
    until the peer hands the slot back: with rsize=12, 4096 each way. Counted as a NIC's 1024 each way, the pool of
    the two was 5,568 while the client's receive ring alone, connected to the server in the same switch, has 4096 out
    at rest."""
    ns = Netns("jgbuf")
    try:
        socket = tmp_path / "memif.sock"
        server = f"net_memif0,role=server,socket={socket}"
        assert pool_of(run_switch(tmp_path, [server, "net_null0,no-rx=1"], ["--port-mtu", "1500"]), 2) == CACHE_AND_BURSTS + PACKET_IN_QUEUE
        client = f"net_memif1,role=client,socket={socket},zero-copy=yes,rsize=12"
        # memif's zero-copy mode shares the process's memory with the peer, from one file per memory list.
        result, pools = run_reading_pools(tmp_path, [server, client], ["--port-mtu", "1500"], ns, eal=["--single-file-segments"])
        assert pool_of(result, 2) == CACHE_AND_BURSTS + 2 * 4096 + PACKET_IN_QUEUE
        assert receive_pools_out(pools) == [4096], pools
    finally:
        ns.delete()
