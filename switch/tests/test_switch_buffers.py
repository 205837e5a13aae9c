"""Each port's pool of receive buffers against what the ports' queues keep (switch/main.c, pool_size; runtime/port.c).

A NIC's receive ring is filled from the pool at start and its transmit ring frees what it sent only as it wraps, so
a port's buffers can sit in every such port's transmit ring; a pool smaller than that starves reception, and an
AF_XDP port that cannot fill its ring does not start. --mbufs below it is refused with the figure to give; without
--mbufs the pool is that large. Ports that copy every frame (net_af_packet, net_pcap, net_null) keep none.

net_ring stands in for a NIC here: like every port the runtime does not know to copy, it is counted as one.
"""

from __future__ import annotations

import re
import subprocess

from switch_harness import SWITCH_BINARY

from testlab import lab

RX_DESCRIPTORS = TX_DESCRIPTORS = 1024
CACHE_AND_BURSTS = 256 * 3 // 2 + 2 * 32  # a per-core cache up to its flush threshold, two bursts of 32
DEFAULT_MBUFS = 4096


def run_switch(tmp_path, devices: list[str], options: list[str] = ()) -> subprocess.CompletedProcess:
    """The switch with one worker on the named vdevs, stopped by `timeout` once it serves."""
    prefix = f"jgbuf-{tmp_path.name}"[:40]
    args = ["timeout", "-s", "TERM", "8", SWITCH_BINARY, "--no-huge", "-m", "512", "--no-pci", "--file-prefix", prefix]
    args += ["--lcores", "0@0,1@1", "--log-level=lib.eal:error", *(f"--vdev={device}" for device in devices), "--"]
    for number, device in enumerate(devices, start=1):
        args += ["--port", f"{number}={device}"]
    args += ["--grpc", f"127.0.0.1:{lab.free_tcp_port()}", *options]
    return subprocess.run(args, capture_output=True, text=True, timeout=60)


def rings(count: int) -> list[str]:
    return [f"net_ring{i}" for i in range(count)]


def refused_asking_for(done: subprocess.CompletedProcess) -> int:
    found = re.search(r"--mbufs \d+ is too few: .* give --mbufs (\d+) or more", done.stderr)
    assert done.returncode != 0 and found, done.stdout + done.stderr
    return int(found.group(1))


def pool_of(done: subprocess.CompletedProcess, ports: int) -> int:
    """The pool the switch chose, once it served."""
    assert f"jumbogate-switch ready: {ports} ports, 1 workers" in done.stdout, done.stdout + done.stderr
    found = re.search(r"^jumbogate-switch: (\d+) receive buffers in each port's pool$", done.stdout, re.M)
    assert found, done.stdout
    return int(found.group(1))


def test_a_pool_smaller_than_the_rings_is_refused_with_the_figure_to_give(tmp_path):
    needed = RX_DESCRIPTORS + CACHE_AND_BURSTS + TX_DESCRIPTORS
    assert refused_asking_for(run_switch(tmp_path, rings(1), ["--mbufs", "512"])) == needed
    assert refused_asking_for(run_switch(tmp_path, rings(1), ["--mbufs", str(needed - 1)])) == needed
    assert pool_of(run_switch(tmp_path, rings(1), ["--mbufs", str(needed)]), 1) == needed


def test_without_mbufs_the_pool_holds_what_the_rings_keep(tmp_path):
    # Three such ports: a port's buffers may wait in all three transmit rings, more than the default.
    three = RX_DESCRIPTORS + CACHE_AND_BURSTS + 3 * TX_DESCRIPTORS
    assert three > DEFAULT_MBUFS
    assert pool_of(run_switch(tmp_path, rings(3)), 3) == three
    assert pool_of(run_switch(tmp_path, rings(1)), 1) == DEFAULT_MBUFS


def test_ports_that_copy_frames_keep_none_of_the_pool(tmp_path):
    """Thirty ports that copy (a P4Testgen corpus's wiring) serve on 512 buffers each; beside a NIC, only the NIC's
    rings count."""
    nulls = [f"net_null{i}" for i in range(30)]
    assert pool_of(run_switch(tmp_path, nulls, ["--mbufs", "512"]), 30) == 512
    # The ring's own pool: its receive ring and its transmit ring; the null port's pool: its buffers in the ring's
    # transmit ring. Neither counts the null port's queues.
    needed = RX_DESCRIPTORS + CACHE_AND_BURSTS + TX_DESCRIPTORS
    assert refused_asking_for(run_switch(tmp_path, ["net_ring0", "net_null0"], ["--mbufs", str(needed - 1)])) == needed
