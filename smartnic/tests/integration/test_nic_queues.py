"""Queues that follow the load: a real Linux TCP transfer through
jumbogate-nic while its queues move between workers.

    client ns (MTU 1500) --veth-- [port 0  jumbogate-nic  port 1] --veth-- server ns (MTU 9000)

Both ports are net_af_packet with four queue pairs (the kernel's fanout
spreads flows over them) and two worker lcores. Moving a queue makes its
worker send everything it holds before the other worker polls it, so what
arrives must be byte for byte what was sent (SHA-256 both ways), with no
packet dropped by the program.
"""

from __future__ import annotations

import threading
import time

import pytest

from jumbogate.v1 import nic_pb2
from testlab.lab import wait_until
from testlab.nic_harness import lcores, start_nic
from testlab.queue_scaling import SERVER, ScalingWire
from testlab.tcp_exchange import exchange

pytestmark = pytest.mark.timeout(120)

PORT = 5202
QUEUES = 4
WORKERS = 2
MEGABYTES = 48
REPLY_MEGABYTES = 8


@pytest.fixture
def make_wire(log_dir):
    made = []

    def make(options):
        wire = ScalingWire(log_dir, options, QUEUES, WORKERS)
        made.append(wire)
        return wire.client, wire.server, wire.nic

    yield make
    for wire in made:
        wire.close()


def transfer(client, server, during) -> None:
    """The client's data to the server and the reply back, checked intact;
    during() runs in a thread until both are done."""
    done = threading.Event()
    thread = threading.Thread(target=during, args=(done,))
    try:
        exchange(client, server, SERVER, PORT, MEGABYTES, REPLY_MEGABYTES, while_listening=thread.start).assert_intact()
    finally:
        done.set()
        if thread.is_alive():
            thread.join(timeout=10)


def assert_nothing_dropped(nic):
    stats = nic.telemetry("/jumbogate/stats")
    drops = {name: value for name, value in stats.items() if name.startswith("drop_") and value}
    assert stats["packets_dropped"] == 0, drops
    return stats


def test_forced_queue_moves_keep_the_stream_intact(make_wire):
    client, server, nic = make_wire(["--delay-max-us", "5000"])
    assert nic.telemetry("/jumbogate/queues")["serving_workers"] == WORKERS
    forced = []

    def move_queues(done):
        # Every queue to worker 0, then every queue to worker 1, ...:
        # whichever queue the fanout gave each direction, it changes
        # hands every time. The transfer may last well under a second,
        # so the first move comes at once and the next ones 50 ms apart
        # (a worker polls far more often than that, so each still moves).
        while True:
            owner = len(forced) % 2
            nic.telemetry("/jumbogate/queues," + ",".join([str(owner)] * QUEUES))
            forced.append(owner)
            if done.wait(0.05):
                break

    transfer(client, server, move_queues)
    queues = nic.telemetry("/jumbogate/queues")
    stats = assert_nothing_dropped(nic)
    assert len(forced) >= 4, f"the transfer ended after {len(forced)} moves"
    assert queues["pinned"] == 1 and queues["changes"] >= len(forced)
    # The first layout moves the two queues worker 1 had, each later one
    # all four (unless the next came before the owner's next poll).
    assert queues["handovers"] >= len(forced)
    used = [sum(1 for n in nic.telemetry(f"/ethdev/stats,{port}")["q_ipackets"][:QUEUES] if n) for port in (0, 1)]
    assert all(used), f"queues that received, per port: {used}"
    assert stats["merged_packets"] > 0
    reply = nic.stub().GetStats(nic_pb2.GetNicStatsRequest(), timeout=5)
    assert (reply.queues, reply.serving_workers, reply.queue_handovers) == (QUEUES, 1, queues["handovers"])
    print(
        f"{len(forced)} forced changes, {queues['handovers']} queue handovers,"
        f" {queues['handover_flushed']} packets flushed by them; queues used per port {used};"
        f" {stats['packets_in']} packets in, {stats['merged_packets']} merged, none dropped"
    )


def test_the_scaler_follows_a_transfer(make_wire):
    """A low threshold: the transfer brings the second worker in, the idle
    afterwards takes it away again. The scaler samples once a second, and
    the transfer may take less, so the watch goes on after it."""
    client, server, nic = make_wire(["--queue-scaling", "on", "--queue-scale-pps", "2000", "--queue-scale-down-s", "1"])
    assert nic.telemetry("/jumbogate/queues")["serving_workers"] == 1
    samples = []
    stop = threading.Event()

    def watch():
        while not stop.wait(0.1):
            samples.append(nic.telemetry("/jumbogate/queues"))

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        transfer(client, server, lambda done: None)
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline and not (any(s["serving_workers"] == WORKERS for s in samples) and samples[-1]["serving_workers"] == 1):
            time.sleep(0.2)
    finally:
        stop.set()
        watcher.join(timeout=10)
    serving = [s["serving_workers"] for s in samples]
    assert WORKERS in serving, f"the second worker never joined: {serving}"
    assert serving[-1] == 1, f"the second worker never left: {serving}"
    assert samples[-1]["changes"] >= 2 and samples[-1]["handovers"] >= 2
    assert max(s["packets_per_s"] for s in samples) > 2000
    assert_nothing_dropped(nic)


def test_the_queue_knob_refuses_what_it_cannot_do(log_dir):
    """A layout must name one worker per queue, each a worker that exists;
    a refused request changes nothing."""
    nic = start_nic(["--vdev=net_null0,no-rx=1", "--lcores", lcores(WORKERS)], ["--queues", str(QUEUES), "--mbufs", "12288"], None, log_dir)
    try:
        before = nic.telemetry("/jumbogate/queues")
        assert (before["queues"], before["serving_workers"], before["owners"]) == (QUEUES, WORKERS, "0,1,0,1")
        for bad in ("0", "0,1", "0,1,0,1,0", f"0,1,0,{WORKERS}", "x", "1,,1,1", "-1"):
            assert nic.telemetry(f"/jumbogate/queues,{bad}") is None, bad
        assert nic.telemetry("/jumbogate/queues")["owners"] == "0,1,0,1"
        assert nic.telemetry("/jumbogate/queues,1,1,0,0")["pinned"] == 1
        wait_until(lambda: nic.telemetry("/jumbogate/queues")["owners"] == "1,1,0,0", "the layout", 5)
        assert nic.telemetry("/jumbogate/queues,1")["forced_workers"] == 1
        wait_until(lambda: nic.telemetry("/jumbogate/queues")["owners"] == "0,0,0,0", "one worker", 5)
        after = nic.telemetry("/jumbogate/queues,auto")
        assert after["forced_workers"] == 0 and after["pinned"] == 0
        wait_until(lambda: nic.telemetry("/jumbogate/queues")["serving_workers"] == WORKERS, "every worker again", 5)
    finally:
        nic.stop()
