"""The engine benchmark replaying a capture (make bench TRACE=...): its own accounting holds,
its yield ceiling waits as long as the engine can, and its workers share the flows.

A capture with a long silence in it used to leave the gro-timed path's flush
tick behind the packets it later flushed, and their delay underflowed (a
mean of 92,233,368,016 us); and every replay's header said "0 flows".
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from scapy.layers.inet import IP, TCP
from scapy.layers.l2 import Ether
from scapy.utils import wrpcap

from testlab.nic_harness import REPO

BENCH = Path(os.environ.get("JUMBOGATE_BENCH", REPO / "build" / "native" / "smartnic" / "bench" / "jumbogate-bench"))
FLOWS, SEGMENTS, PAYLOAD = 3, 40, 1448


def segment(flow: int, i: int):
    """The i-th full segment of flow `flow` (its own source address and port)."""
    return (
        Ether(src="02:00:00:00:00:01", dst="02:00:00:00:00:02")
        / IP(src=f"198.51.100.{flow + 1}", dst="10.10.0.10", id=i, flags="DF")
        / TCP(sport=40000 + flow, dport=5201, seq=1000 + i * PAYLOAD, flags="A")
        / (bytes([flow]) * PAYLOAD)
    )


def capture_with_a_silence(path: Path) -> None:
    """FLOWS interleaved TCP flows, full segments 10 us apart, and two seconds of nothing halfway."""
    frames, now = [], 1_700_000_000.0
    for i in range(SEGMENTS):
        if i == SEGMENTS // 2:
            now += 2.0
        for flow in range(FLOWS):
            frame = segment(flow, i)
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
    for name, path in scenario["paths"].items():
        # Every path holds a packet at most its bound (the timed GRO path
        # up to two flush periods), never a negative or wrapped amount.
        bound_us = path["max_delay_bound_us"]
        assert 0 <= path["delay_mean_us"] <= path["delay_max_us"] <= 2 * bound_us + 1, (name, path)
    assert scenario["paths"]["engine"]["max_delay_bound_us"] == scenario["max_delay_us"]


def slow_flows(path: Path, flows: int, segments: int, gap_s: float) -> None:
    """FLOWS flows, each sending a full segment every GAP_S, interleaved."""
    frames, now = [], 1_700_000_000.0
    for i in range(segments):
        for flow in range(flows):
            frame = segment(flow, i)
            frame.time = now + flow * gap_s / flows
            frames.append(frame)
        now += gap_s
    wrpcap(str(path), frames)


def test_the_ceiling_waits_where_the_delay_model_does_not_and_workers_share_the_flows(tmp_path):
    """Flows of one segment per 500 us (23 Mbit/s) are below the delay model's
    rate threshold: the engine merges them only within a burst, so almost
    nothing leaves full. The ceiling waits up to 10 ms under the same merge
    rules and fills nearly every run. Two workers split the flows between
    them, each flow whole on one worker, and deliver the same byte stream."""
    flows, segments = 16, 36
    capture, results = tmp_path / "slow.pcap", tmp_path / "results.json"
    slow_flows(capture, flows, segments, 500e-6)
    done = subprocess.run(
        [BENCH, "--label", "slow", "--pcap", capture, "--repeat", "1", "--workers", "2", "--verify", "--json", results],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    scenario = json.loads(results.read_text().strip().splitlines()[-1])
    engine, ceiling = scenario["paths"]["engine"], scenario["paths"]["ceiling"]
    assert engine["yield_within_mtu"] < 0.1, engine
    # 36 segments of 1448 bytes fill 6 packets of 8,500 bytes (5.84 each).
    assert ceiling["yield_within_mtu"] > 0.9, ceiling
    assert ceiling["max_delay_bound_us"] == 10000
    assert "yield ceiling (every run waits up to 10000 us)" in done.stdout
    workers = scenario["workers"]
    assert workers["count"] == 2 and sum(workers["packets"]) == flows * segments
    assert all(count % segments == 0 and count > 0 for count in workers["packets"]), workers
    # Each worker's bursts hold fewer flows, so more of a flow's segments
    # meet within one burst: it merges at least as much as one worker.
    assert workers["engine"]["packets_out"] <= engine["packets_out"], (workers, engine)
    assert workers["pass"]["packets_out"] == flows * segments


def test_the_report_gives_a_figure_every_scenario_shares_once(tmp_path):
    """Per-flow state is the build's, the same in every scenario: the report gives it once, not once a scenario."""
    capture, results = tmp_path / "gap.pcap", tmp_path / "results.json"
    capture_with_a_silence(capture)
    for label in ("first", "second", "third"):
        done = subprocess.run([BENCH, "--label", label, "--pcap", capture, "--repeat", "1", "--json", results], capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stdout + done.stderr
    report = subprocess.run(
        [sys.executable, REPO / "smartnic" / "bench" / "report.py", results, tmp_path / "plot.png"], capture_output=True, text=True, timeout=120
    )
    assert report.returncode == 0, report.stdout + report.stderr
    (line,) = [line for line in report.stdout.splitlines() if "per-flow state" in line]
    state = json.loads(results.read_text().splitlines()[0])["paths"]["engine"]["flow_state_bytes"]
    assert line.endswith(f"per-flow state <= 128 bytes: {state} in all 3 scenarios"), line
