"""The engine benchmark replaying a capture (make bench TRACE=...): its own accounting holds.

A capture with a long silence in it used to leave the gro-timed path's flush
tick behind the packets it later flushed, and their delay underflowed (a
mean of 92,233,368,016 us); and every replay's header said "0 flows".
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from nic_harness import REPO
from scapy.layers.inet import IP, TCP
from scapy.layers.l2 import Ether
from scapy.utils import wrpcap

BENCH = Path(os.environ.get("JUMBOGATE_BENCH", REPO / "build" / "smartnic" / "bench" / "jumbogate-bench"))
FLOWS, SEGMENTS, PAYLOAD = 3, 40, 1448


def capture_with_a_silence(path: Path) -> None:
    """FLOWS interleaved TCP flows, full segments 10 us apart, and two seconds of nothing halfway."""
    frames, now = [], 1_700_000_000.0
    for i in range(SEGMENTS):
        if i == SEGMENTS // 2:
            now += 2.0
        for flow in range(FLOWS):
            frame = (
                Ether(src="02:00:00:00:00:01", dst="02:00:00:00:00:02")
                / IP(src=f"198.51.100.{flow + 1}", dst="10.10.0.10", id=i, flags="DF")
                / TCP(sport=40000 + flow, dport=5201, seq=1000 + i * PAYLOAD, flags="A")
                / (bytes([flow]) * PAYLOAD)
            )
            frame.time = now
            frames.append(frame)
            now += 10e-6
    wrpcap(str(path), frames)


def test_a_replay_counts_its_flows_and_every_delay_from_arrival(tmp_path):
    capture, results = tmp_path / "gap.pcap", tmp_path / "results.json"
    capture_with_a_silence(capture)
    done = subprocess.run(
        [BENCH, "--label", "gap", "--pcap", capture, "--repeat", "1", "--verify", "--json", results], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"{FLOWS * SEGMENTS} packets, {FLOWS} flows" in done.stdout, done.stdout
    scenario = json.loads(results.read_text().strip().splitlines()[-1])
    assert scenario["flows"] == FLOWS
    bound_us = scenario["max_delay_us"]
    for name, path in scenario["paths"].items():
        # Every path holds a packet at most its bound (the timed GRO path
        # up to two flush periods), never a negative or wrapped amount.
        assert 0 <= path["delay_mean_us"] <= path["delay_max_us"] <= 2 * bound_us + 1, (name, path)
