"""jumbogate-wanlink on veths: it delays, loses, paces and bounds as configured.

    left ns --veth-- [port a  jumbogate-wanlink  port b] --veth-- right ns

The link's model is tested without ports in testlab/wanlink/test_link.c;
here the program itself: a ping's round trip is twice the one-way delay,
the seeded loss over thousands of frames is within a binomial bound (and
the same seed loses the same frames), the limit drops the tail and counts
it, the rate cap spreads a burst over its time at the rate, and the
counters at exit are the telemetry's.
"""

from __future__ import annotations

import math
import os
import re
import socket
import struct
import time
from contextlib import contextmanager

import pytest

from testlab.nic_harness import PACKET_OUTGOING, Netns, PacketPort, unique, veth
from testlab.wan import WANLINK, start_wanlink

pytestmark = [
    pytest.mark.timeout(120),
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root (network namespaces, veths, raw sockets)"),
    pytest.mark.skipif(not WANLINK.exists(), reason=f"{WANLINK} is missing; run 'make native'"),
]

LEFT, RIGHT = "10.90.0.1", "10.90.0.2"
DST_MAC = bytes.fromhex("02aabbccdd02")
SRC_MAC = bytes.fromhex("02aabbccdd01")


@contextmanager
def wire(tmp_path, **link):
    left, middle, right = Netns("jgll"), Netns("jglm"), Netns("jglr")
    names = {key: unique(key) for key in ("jgll", "jgla", "jglb", "jglr")}
    wan = None
    try:
        veth(left, names["jgll"], middle, names["jgla"], mtu_a=1500)
        veth(middle, names["jglb"], right, names["jglr"], mtu_b=1500)
        left.exec("ip", "addr", "add", f"{LEFT}/24", "dev", names["jgll"])
        right.exec("ip", "addr", "add", f"{RIGHT}/24", "dev", names["jglr"])
        wan = start_wanlink(middle, names["jgla"], names["jglb"], tmp_path, **link)
        yield left, right, names, wan
    finally:
        if wan:
            wan.stop()
        for ns in (left, middle, right):
            ns.delete()


def frame(index: int, size: int = 200) -> bytes:
    """A UDP datagram in an Ethernet frame (the link never looks inside: the bytes only have to be a frame)."""
    payload = struct.pack("!I", index).ljust(size - 42, b"\0")
    udp = struct.pack("!HHHH", 40000, 40001, 8 + len(payload), 0) + payload
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(udp), index & 0xFFFF, 0, 64, 17, 0, socket.inet_aton(LEFT), socket.inet_aton(RIGHT))
    return DST_MAC + SRC_MAC + b"\x08\x00" + ip + udp


def send_frames(port: PacketPort, count: int, size: int = 200, batch: int = 500) -> float:
    """Sends `count` frames in batches (the link's receive ring holds 4096); returns the seconds it took."""
    started = time.monotonic()
    for first in range(0, count, batch):
        port.send([frame(i, size) for i in range(first, min(count, first + batch))])
        time.sleep(0.002)
    return time.monotonic() - started


def arrival_times(port: PacketPort, count: int, timeout: float) -> list[float]:
    """When each of our next `count` frames arrived (read one by one, so each has its own time)."""
    times: list[float] = []
    deadline = time.monotonic() + timeout
    while len(times) < count and time.monotonic() < deadline:
        try:
            data, address = port.sock.recvfrom(65535)
        except BlockingIOError:
            time.sleep(0.0002)
            continue
        if address[2] != PACKET_OUTGOING and data[:6] == DST_MAC:
            times.append(time.monotonic())
    return times


def ours(frames: list[bytes]) -> list[bytes]:
    return [f for f in frames if f[:6] == DST_MAC]


def test_ping_round_trip_is_twice_the_delay(tmp_path):
    with wire(tmp_path, delay_us=20000) as (left, _, names, wan):
        out = left.exec("ping", "-c", "5", "-i", "0.2", "-W", "2", RIGHT, check=False, timeout=30).stdout
        match = re.search(r"= ([\d.]+)/([\d.]+)/([\d.]+)", out)
        assert match, out
        low, average = float(match.group(1)), float(match.group(2))
        assert 40.0 <= low, f"a round trip of {low} ms is shorter than twice the 20 ms delay"
        # A loaded machine adds scheduling delay, never takes any away: the
        # fastest round trip, not the mean, is bounded from above.
        assert low < 40.0 + 25.0, out
        counters = wan.counters()
        assert counters["delay_us"] == 20000
        # Five echo requests and five replies (ARP aside), none lost.
        assert counters["a_to_b"]["sent"] >= 5 and counters["b_to_a"]["sent"] >= 5
        assert counters["a_to_b"]["lost"] == counters["b_to_a"]["lost"] == 0
        print(f"ping through 20 ms each way: min {low} ms, avg {average} ms")


def test_seeded_loss_is_binomial_and_reproducible(tmp_path):
    count, loss = 5000, 0.05
    lost = []
    for _ in range(2):
        with wire(tmp_path, loss=loss, seed=1234) as (left, right, names, wan):
            sender, receiver = PacketPort(left, names["jgll"]), PacketPort(right, names["jglr"])
            try:
                send_frames(sender, count)
                arrived = ours(receiver.receive(quiet=0.5, timeout=20))
            finally:
                sender.close()
                receiver.close()
            totals = wan.stop()["a_to_b"]
        assert totals["received"] == count, "the link did not see every frame sent (its receive ring overflowed?)"
        # Five standard deviations of the binomial: a false alarm once in millions of runs.
        mean, sd = count * loss, math.sqrt(count * loss * (1 - loss))
        assert abs(totals["lost"] - mean) < 5 * sd, totals
        assert totals["sent"] == count - totals["lost"] and totals["overflow"] == 0
        assert len(arrived) == totals["sent"]
        lost.append(sorted(struct.unpack("!I", f[42:46])[0] for f in arrived))
        print(f"lost {totals['lost']} of {count} at p={loss} (expected {mean:.0f} +- {sd:.1f})")
    assert lost[0] == lost[1], "the same seed lost different frames"


def test_the_limit_drops_the_tail_and_counts_it(tmp_path):
    limit, count = 100, 400
    # A second's delay: the frames are all sent long before the first leaves.
    with wire(tmp_path, delay_us=1_000_000, limit=limit) as (left, right, names, wan):
        sender, receiver = PacketPort(left, names["jgll"]), PacketPort(right, names["jglr"])
        try:
            took = send_frames(sender, count, batch=100)
            assert took < 0.8
            time.sleep(0.2)
            held = wan.counters()["a_to_b"]
            arrived = ours(receiver.receive(count=limit, quiet=0.5, timeout=10))
        finally:
            sender.close()
            receiver.close()
        totals = wan.stop()["a_to_b"]
    assert held["held"] == limit and held["sent"] == 0
    assert totals["received"] == count
    assert totals["overflow"] == count - limit and totals["held_max"] == limit
    assert totals["sent"] == limit == len(arrived)
    # Drop-tail: the first `limit` frames passed, the rest did not.
    assert sorted(struct.unpack("!I", f[42:46])[0] for f in arrived) == list(range(limit))


def test_the_rate_cap_spreads_a_burst(tmp_path):
    # 8 Mbit/s is a byte a microsecond: 100 frames of 1000 bytes beyond a
    # three-frame bucket take 97 ms.
    with wire(tmp_path, rate_mbit=8, options=("--burst-bytes", "3000")) as (left, right, names, wan):
        sender, receiver = PacketPort(left, names["jgll"]), PacketPort(right, names["jglr"])
        buffers = wan.buffers()
        try:
            started = time.monotonic()
            send_frames(sender, 100, size=1000, batch=100)
            times = arrival_times(receiver, 100, timeout=5)
        finally:
            sender.close()
            receiver.close()
        counters = wan.counters()["a_to_b"]
        assert wan.buffers() == buffers, "buffers are missing from a pool once the link is idle"
        totals = wan.stop()["a_to_b"]
    assert len(times) == 100
    # From before the first frame was sent: the reader may start late, so
    # the first arrival it sees is no bound.
    assert times[-1] - started >= 0.09, f"100 kB at 8 Mbit/s arrived within {1000 * (times[-1] - started):.0f} ms"
    assert totals["shaped"] >= 90
    # The exit line and the telemetry count the same.
    assert {k: v for k, v in totals.items() if k != "held"} == {k: v for k, v in counters.items() if k != "held"}
