"""The merge rules against this machine's own kernel: each case goes through
Linux GRO on a veth and through the real jumbogate-nic, and both must cut the
stream into the same packets.

Linux is the reference the engine's rules follow (docs/engine.md, "Compared
with Linux GRO"); the unit cases in test_merge_rules.c and test_merge_flows.c
cite the kernel functions they mirror. This test asks the running kernel
instead of its source. Each case is one TCP flow of its own, its segments
sent back to back:

- Linux: a veth pair whose receiving side has GRO on and a GRO flush
  timeout, so segments sent microseconds apart meet in GRO even when they
  arrive in different NAPI polls (napi_complete_done then flushes only
  packets older than a jiffy); the sending side has TSO off, without which
  veth hands frames past GRO (veth_skb_is_eligible_for_gro). What a packet
  socket on the receiving side sees is what GRO built.
- jumbogate-nic: DPDK's net_pcap port reads the same frames from a file and
  writes what the program sends to another. Each case fills exactly one
  burst of 32 frames (ARP frames pad it), so the engine sees every case's
  segments in one poll, as GRO sees them within its flush timeout.

Only cases where jumbogate means to behave as Linux are here; where it is
deliberately different (out-of-order segments merged, the 8500-byte cap
instead of 64 KB) the unit cases say so. Every case stays under 8500 bytes.
"""

from __future__ import annotations

import platform
import signal
import time
from dataclasses import dataclass, field

import pytest
from scapy.layers.inet import IP, TCP
from scapy.layers.inet6 import IPv6
from scapy.layers.l2 import ARP, Ether
from scapy.utils import rdpcap, wrpcap

from testlab.nic_harness import Netns, PacketPort, start_nic, unique, veth, wait_for

BURST = 32
PAYLOAD = 1000
SRC_MAC, DST_MAC = "02:00:00:00:00:01", "02:00:00:00:00:02"
INTERNET = {4: "198.51.100.7", 6: "2001:db8:100::7"}
INSTANCE = {4: "10.10.0.5", 6: "fd00:10::5"}
TIMESTAMPS = [("NOP", None), ("NOP", None), ("Timestamp", (1000, 2000))]


@dataclass
class Segment:
    """One segment of a case; `offset` is its place in the stream."""

    offset: int
    length: int = PAYLOAD
    flags: str = "A"
    ip_id: int | None = None  # default: one more per segment
    df: bool = True
    tos: int = 0
    ttl: int = 64
    ack: int = 1
    window: int = 8192
    tsval: int = 1000
    flow_label: int = 0


@dataclass
class Case:
    name: str
    segments: list[Segment]
    version: int = 4
    # What Linux is expected to do, as (offset, length) per packet; the
    # test compares jumbogate with what the kernel did, and the kernel with
    # this, so a kernel that changed its rules is named as such.
    expected: list[tuple[int, int]] = field(default_factory=list)


def full(n: int, **kw) -> list[Segment]:
    return [Segment(i * PAYLOAD, **kw) for i in range(n)]


CASES = [
    Case("same_size_coalesce", full(6), expected=[(0, 6000)]),
    Case("shorter_segment_ends_the_packet", [Segment(0), Segment(1000, 500), Segment(1500)], expected=[(0, 1500), (1500, 1000)]),
    Case("longer_segment_does_not_join", [Segment(0, 500), Segment(500, 1000)], expected=[(0, 500), (500, 1000)]),
    Case("psh_ends_the_packet", [Segment(0), Segment(1000, flags="PA"), Segment(2000)], expected=[(0, 2000), (2000, 1000)]),
    Case("cwr_segment_stays_alone", [Segment(0), Segment(1000, flags="AC"), Segment(2000)], expected=[(0, 1000), (1000, 1000), (2000, 1000)]),
    Case("cwr_segments_in_a_row_stay_alone", [Segment(0, flags="AC"), Segment(1000, flags="AC")], expected=[(0, 1000), (1000, 1000)]),
    Case(
        "duplicate_then_new_data",
        [Segment(0), Segment(1000), Segment(1000, ip_id=102), Segment(2000, ip_id=103), Segment(3000, ip_id=104)],
        expected=[(0, 2000), (1000, 3000)],
    ),
    Case("sequence_gap", [Segment(0), Segment(2000)], expected=[(0, 1000), (2000, 1000)]),
    Case("fixed_ip_id_without_df", full(3, ip_id=7, df=False), expected=[(0, 3000)]),
    Case("incrementing_ip_id_without_df", full(3, df=False), expected=[(0, 3000)]),
    Case("df_change_flushes", [Segment(0), Segment(1000), Segment(2000, df=False)], expected=[(0, 2000), (2000, 1000)]),
    Case("tos_change_flushes", [Segment(0), Segment(1000), Segment(2000, tos=0x10)], expected=[(0, 2000), (2000, 1000)]),
    Case("ttl_change_flushes", [Segment(0), Segment(1000), Segment(2000, ttl=63)], expected=[(0, 2000), (2000, 1000)]),
    Case("ack_change_flushes", [Segment(0), Segment(1000), Segment(2000, ack=2)], expected=[(0, 2000), (2000, 1000)]),
    Case("window_change_flushes", [Segment(0), Segment(1000), Segment(2000, window=4096)], expected=[(0, 2000), (2000, 1000)]),
    Case("timestamp_change_flushes", [Segment(0), Segment(1000), Segment(2000, tsval=1001)], expected=[(0, 2000), (2000, 1000)]),
    Case("pure_ack_flushes", [Segment(0), Segment(1000), Segment(2000, length=0), Segment(2000)], expected=[(0, 2000), (2000, 1000)]),
    Case("fin_ends_the_packet", [Segment(0), Segment(1000, flags="FA")], expected=[(0, 2000)]),
    Case("ipv6_same_size_coalesce", full(4), version=6, expected=[(0, 4000)]),
    Case("ipv6_flow_label_change_flushes", [Segment(0), Segment(1000), Segment(2000, flow_label=5)], version=6, expected=[(0, 2000), (2000, 1000)]),
    Case("ipv6_traffic_class_change_flushes", [Segment(0), Segment(1000), Segment(2000, tos=0x10)], version=6, expected=[(0, 2000), (2000, 1000)]),
]

ISN = 100_000


def frames_of(case: Case, sport: int) -> list[bytes]:
    frames = []
    for i, s in enumerate(case.segments):
        if case.version == 4:
            ip = IP(src=INTERNET[4], dst=INSTANCE[4], id=100 + i if s.ip_id is None else s.ip_id, flags="DF" if s.df else 0, tos=s.tos, ttl=s.ttl)
        else:
            ip = IPv6(src=INTERNET[6], dst=INSTANCE[6], tc=s.tos, hlim=s.ttl, fl=s.flow_label)
        tcp = TCP(
            sport=sport,
            dport=443,
            seq=ISN + s.offset,
            ack=s.ack,
            flags=s.flags,
            window=s.window,
            options=[("NOP", None), ("NOP", None), ("Timestamp", (s.tsval, 2000))],
        )
        frames.append(bytes(Ether(src=SRC_MAC, dst=DST_MAC) / ip / tcp / bytes((i + b) % 251 for b in range(s.length))))
    return frames


def padding(count: int) -> list[bytes]:
    return [bytes(Ether(src=SRC_MAC, dst="ff:ff:ff:ff:ff:ff") / ARP(psrc="192.0.2.1", pdst="192.0.2.2"))] * count


def packets_by_flow(frames: list[bytes]) -> dict[int, list[tuple[int, int]]]:
    """(stream offset, payload length) of each TCP packet, per source port, in arrival order."""
    flows: dict[int, list[tuple[int, int]]] = {}
    for raw in frames:
        packet = Ether(raw)
        if TCP not in packet:
            continue
        tcp = packet[TCP]
        length = len(bytes(tcp.payload))
        if length:
            flows.setdefault(tcp.sport, []).append((tcp.seq - ISN, length))
    return flows


def through_linux_gro(all_frames: list[bytes], expected_packets: int) -> list[bytes]:
    sender, receiver = Netns("jgk"), Netns("jgk")
    out_if, in_if = unique("jgk"), unique("jgk")
    try:
        veth(sender, out_if, receiver, in_if)
        sender.exec("ethtool", "-K", out_if, "tso", "off", "gso", "off")
        receiver.exec("ip", "link", "set", in_if, "address", DST_MAC)
        if receiver.exec("ethtool", "-K", in_if, "gro", "on", check=False).returncode != 0:
            pytest.skip("kernel GRO cannot be turned on for a veth here (ethtool -K gro on refused)")
        # Hold GRO packets across polls for up to 2 ms, so segments sent
        # microseconds apart meet whatever NAPI polls they arrive in.
        receiver.exec("sh", "-c", f"echo 2000000 > /sys/class/net/{in_if}/gro_flush_timeout && echo 10 > /sys/class/net/{in_if}/napi_defer_hard_irqs")
        port_out, port_in = PacketPort(sender, out_if), PacketPort(receiver, in_if)
        try:
            port_in.drain()
            port_out.send(all_frames)
            return port_in.receive(count=expected_packets, quiet=0.5, timeout=10)
        finally:
            port_out.close()
            port_in.close()
    finally:
        sender.delete()
        receiver.delete()


def through_jumbogate_nic(all_frames: list[bytes], log_dir, tmp_path) -> list[bytes]:
    capture_in, capture_out = tmp_path / "in.pcap", tmp_path / "out.pcap"
    wrpcap(str(capture_in), [Ether(f) for f in all_frames])
    nic = start_nic(
        [f"--vdev=net_pcap0,rx_pcap={capture_in},tx_pcap={capture_out}", "-l", "0-1"],
        ["--internal-prefix", "10.10.0.0/16", "--internal-prefix", "fd00:10::/32", "--mbuf-size", "12288", "--burst", str(BURST)],
        None,
        log_dir,
    )
    try:
        wait_for(lambda: nic.telemetry("/jumbogate/stats").get("packets_in", 0) >= len(all_frames), "every frame taken", timeout=10)
        time.sleep(0.05)  # past the delay bound: whatever waited has left
    finally:
        assert nic.stop(signal.SIGTERM) == 0, nic.log()
    return [bytes(p) for p in rdpcap(str(capture_out))]


def test_jumbogate_cuts_the_stream_where_linux_gro_does(log_dir, tmp_path):
    frames, linux_frames, sports = [], [], {}
    for index, case in enumerate(CASES):
        sport = 20000 + index
        sports[sport] = case
        own = frames_of(case, sport)
        assert len(own) <= BURST
        frames += own + padding(BURST - len(own))
        linux_frames += own
    expected_total = sum(len(c.expected) for c in CASES)

    # GRO holds a packet at most a jiffy past the poll that brought it: a
    # sender descheduled that long between two segments of a case splits
    # it. Such a run is sent again (three tries); a kernel whose rules
    # changed differs every time.
    for _ in range(3):
        linux = packets_by_flow(through_linux_gro(linux_frames, expected_total))
        kernel_changed = {c.name: linux.get(s) for s, c in sports.items() if linux.get(s) != c.expected}
        if not kernel_changed:
            break
    if kernel_changed and not platform.release().startswith("6.18"):
        pytest.skip(f"the cases are Linux 6.18's rules and this kernel is {platform.release()}: {kernel_changed}")
    nic = packets_by_flow(through_jumbogate_nic(frames, log_dir, tmp_path))

    assert not kernel_changed, f"this kernel's GRO no longer does what the cases expect: {kernel_changed}"
    differ = {c.name: {"linux": linux.get(s), "jumbogate": nic.get(s)} for s, c in sports.items() if nic.get(s) != linux.get(s)}
    assert not differ, differ
