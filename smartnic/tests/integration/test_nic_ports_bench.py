"""The SmartNIC program's port benchmark (make bench) runs and measures what
it says: jumbogate-nic takes the trace in through real ports (veth, memif,
and an AF_XDP socket where the kernel opens one), merges it into fewer, larger frames, and the pass-through forwards
the same frames unchanged; and the load generator's --advance-seq, which the
merging depends on, continues every flow exactly. The figures themselves are
for `make bench`; a short run here keeps the benchmark working."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

from scapy.layers.inet import IP, TCP, UDP
from scapy.layers.inet6 import IPv6
from scapy.layers.l2 import Ether
from scapy.utils import rdpcap, wrpcap

from testlab import lab
from testlab.nic_harness import REPO, unique
from testlab.portbench import xdp_unavailable

BENCH = REPO / "smartnic" / "bench" / "nic_ports.py"
LOADGEN = lab.LOADGEN
FRAME_IN = 1514  # the trace's 1500-byte IP packets in Ethernet
INTERNAL_FRAME = 8514  # the NIC's default internal MTU, 8500, in Ethernet
# Addresses given: without them scapy asks the network for a MAC per frame.
ETHER = Ether(src="02:00:00:00:00:01", dst="02:00:00:00:00:02")


def run_bench(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(BENCH), *args], capture_output=True, text=True, timeout=180)


def test_the_nic_merges_what_it_takes_in_on_both_kinds_of_port_and_the_pass_through_does_not(tmp_path):
    figures = tmp_path / "nic_ports.json"
    done = run_bench("--seconds", "0.3", "--rounds", "1", "--json", str(figures))
    assert done.returncode == 0, done.stderr[-3000:]
    by_kind = json.loads(figures.read_text())["results"]
    why = xdp_unavailable()
    kinds = {"veth", "memif"} if why else {"veth", "memif", "xdp"}
    assert set(by_kind) == kinds
    # Without AF_XDP the kind is left out loudly, with the reason.
    assert (f"AF_XDP left out: {why}" in done.stderr) == bool(why), done.stderr[-2000:]
    for kind, results in by_kind.items():
        nic, passed = results["nic"], results["pass"]
        for name, r in (("nic", nic), ("pass", passed)):
            assert r["sent"] > 0 and 0 < r["taken_pps"] <= 1.05 * r["offered_pps"], (kind, name, r)
            assert r["mean_in_bytes"] == FRAME_IN, (kind, name, r)
            # Many loops of the trace: what is measured is long past the
            # first, which alone would merge without --advance-seq.
            assert r["loops"] >= 3, (kind, name, r)
        # Merged: fewer packets out than in, of jumbo size at most the
        # internal MTU, and carrying the bytes that came in (less the
        # headers merging saves), so nothing was lost on the way.
        assert nic["out_pps"] < nic["taken_pps"] / 3, (kind, nic)
        assert 3 * FRAME_IN < nic["mean_out_bytes"] <= INTERNAL_FRAME, (kind, nic)
        assert 0.75 < nic["out_bytes_per_s"] / (nic["taken_pps"] * FRAME_IN) < 1.1, (kind, nic)
        assert nic["merged_packets"] > 0 and nic["dropped"] == 0, (kind, nic)
        # The pass-through changes nothing: what comes back is what it took.
        # Within a byte on average: in 2 of 8 full runs of the suite a few
        # shorter frames that are not the trace's came back with it (mean
        # 1513.7); testpmd forwards whatever its port receives.
        assert abs(passed["mean_out_bytes"] - FRAME_IN) < 1, (kind, passed)
        assert 0.9 < passed["out_pps"] / passed["taken_pps"] < 1.1, (kind, passed)
        assert results["nic_over_pass"] == nic["taken_pps"] / passed["taken_pps"]
        assert results["rounds"] == {"nic": [nic["taken_pps"]], "pass": [passed["taken_pps"]]}
    assert done.stdout.count("nic/testpmd, packets taken in per second:") == len(kinds)
    assert all(f"on {kind} ports" in done.stdout for kind in kinds)


def test_an_unknown_port_kind_is_refused_with_the_known_ones():
    done = run_bench("--ports", "veth,ring")
    assert done.returncode == 2
    assert "--ports takes veth, memif, xdp, got 'veth,ring'" in done.stderr


def flows_trace() -> list:
    """Interleaved segments of an IPv4 flow whose sequence numbers wrap past 2^32, an IPv6 flow with a
    SYN and a FIN, a second IPv4 flow of uneven segments, and a datagram that is not TCP."""
    frames = []
    for i in range(3):
        frames.append(
            ETHER
            / IP(src="198.51.100.1", dst="10.1.0.5", id=100 + i, flags="DF")
            / TCP(sport=1, dport=443, seq=(2**32 - 1000 + i * 900) % 2**32, flags="A")
            / (b"a" * 900)
        )
        frames.append(
            ETHER / IP(src="198.51.100.2", dst="10.1.0.5", id=7) / TCP(sport=2, dport=443, seq=5000 + 10 * i * i, flags="A") / (b"b" * (10 * (2 * i + 1)))
        )
    frames.insert(1, ETHER / IPv6(src="2001:db8::1", dst="fd00:1::5") / TCP(sport=3, dport=80, seq=70, flags="S"))
    frames.insert(4, ETHER / IPv6(src="2001:db8::1", dst="fd00:1::5") / TCP(sport=3, dport=80, seq=71, flags="A") / (b"c" * 200))
    frames.insert(5, ETHER / IP(src="198.51.100.3", dst="10.1.0.5") / UDP(sport=9, dport=9) / b"udp")
    frames.append(ETHER / IPv6(src="2001:db8::1", dst="fd00:1::5") / TCP(sport=3, dport=80, seq=271, flags="FA"))
    return frames


def replay(tmp_path: Path, frames: list, loops: int, *options: str) -> list:
    """Send `loops` times the frames through jumbogate-loadgen into a pcap (DPDK's net_pcap) and read them back."""
    capture, written, prefix = tmp_path / "in.pcap", tmp_path / "out.pcap", unique("jglg")
    wrpcap(str(capture), frames)
    args = [LOADGEN, "--no-huge", "-m", "512", "--no-pci", "--file-prefix", prefix, "-l", "0", "--log-level=lib.eal:error"]
    args += ["--vdev", f"net_pcap_out,tx_pcap={written}", "--vdev", "net_null_back,no-rx=1"]
    args += [
        "--",
        "--pcap",
        capture,
        "--tx",
        "net_pcap_out",
        "--rx",
        "net_null_back",
        "--warmup",
        "0",
        "--seconds",
        "30",
        "--packets",
        str(loops * len(frames)),
    ]
    try:
        done = subprocess.run([str(a) for a in [*args, *options]], capture_output=True, text=True, timeout=60)
    finally:
        shutil.rmtree(f"/var/run/dpdk/{prefix}", ignore_errors=True)
    assert done.returncode == 0, done.stderr
    counts = json.loads(done.stdout.strip().splitlines()[-1])
    assert counts["sent"] == loops * len(frames), counts
    return rdpcap(str(written))


def checksums_good(frame) -> bool:
    """Whether the IP and TCP checksums are what scapy computes afresh."""
    fresh = frame.copy()
    for layer in (IP, TCP, UDP):
        if layer in fresh and hasattr(fresh[layer], "chksum"):
            del fresh[layer].chksum
    fresh = Ether(bytes(fresh))
    return all(frame[layer].chksum == fresh[layer].chksum for layer in (IP, TCP, UDP) if layer in frame)


def test_advance_seq_continues_every_tcp_flow_loop_after_loop(tmp_path):
    frames, loops = flows_trace(), 5
    sent = replay(tmp_path, frames, loops, "--advance-seq")
    assert len(sent) == loops * len(frames)
    # What each flow spans in the trace (SYN and FIN take one each), and
    # its IPv4 segments: the second flow's fixed ID moves on by loops too.
    spans = {1: 3 * 900, 2: 10 + 30 + 50, 3: 1 + 200 + 1}
    counts = {1: 3, 2: 3}
    for loop in range(loops):
        for original, out in zip(frames, sent[loop * len(frames) : (loop + 1) * len(frames)], strict=True):
            if TCP not in original:
                assert bytes(out) == bytes(original), loop
                continue
            flow = original[TCP].sport
            assert out[TCP].seq == (original[TCP].seq + loop * spans[flow]) % 2**32, (loop, flow)
            if IP in original:
                assert out[IP].id == (original[IP].id + loop * counts[flow]) % 2**16, (loop, flow)
            assert checksums_good(out), (loop, flow)
            # Nothing else changed: the rest of the frame is the original's.
            expected = original.copy()
            expected[TCP].seq, expected[TCP].chksum = out[TCP].seq, out[TCP].chksum
            if IP in original:
                expected[IP].id, expected[IP].chksum = out[IP].id, out[IP].chksum
            assert bytes(out) == bytes(expected), (loop, flow)
    # Loop after loop a flow goes on where it stopped: each segment of the
    # IPv4 flows starts where the one before ended, across the loops too.
    for flow in (1, 2):
        segments = [f for f in sent if TCP in f and f[TCP].sport == flow]
        for before, after in zip(segments, segments[1:], strict=False):
            assert after[TCP].seq == (before[TCP].seq + len(before[TCP].payload)) % 2**32, flow


def test_without_advance_seq_every_loop_repeats_the_trace(tmp_path):
    frames = flows_trace()
    sent = replay(tmp_path, frames, 3)
    assert [bytes(f) for f in sent] == [bytes(f) for f in frames] * 3
