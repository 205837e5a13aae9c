"""Measuring the emulation: interface counters, packet-size captures, iperf3, the controller's stats.

Kernel interface counters are the ground truth on the wire (they count what
a veth really carried); the controller's stats say what the switch and the
SmartNIC think they did. The demo and the tests show both.
"""

from __future__ import annotations

import json
import os
import struct
import sys
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from mininet.node import Node

from . import plan

# A packet "converted" to jumbo by the SmartNIC: within 10% of the 8500-byte MTU
# (the conversion yield counts the payload in such packets).
CONVERTED_MIN_BYTES = 7650

ETHERNET_HEADER = 14
# Bytes a frame costs on a real wire beyond what the kernel counts:
# FCS 4, preamble + start delimiter 8, inter-frame gap 12.
WIRE_EXTRA = 24


@dataclass(frozen=True)
class Counters:
    rx_packets: int
    rx_bytes: int
    tx_packets: int
    tx_bytes: int
    rx_dropped: int
    tx_dropped: int

    def __sub__(self, other: Counters) -> Counters:
        return Counters(*(a - b for a, b in zip(self.as_tuple(), other.as_tuple(), strict=True)))

    def as_tuple(self) -> tuple[int, ...]:
        return (self.rx_packets, self.rx_bytes, self.tx_packets, self.tx_bytes, self.rx_dropped, self.tx_dropped)


def counters(node: Node, intf: str) -> Counters:
    names = ("rx_packets", "rx_bytes", "tx_packets", "tx_bytes", "rx_dropped", "tx_dropped")
    out = node.cmd(" ; ".join(f"cat /sys/class/net/{intf}/statistics/{n}" for n in names)).split()
    return Counters(*(int(v) for v in out))


class Capture:
    """tcpdump on one interface into a pcap (headers only); sizes() reads the frame lengths back.

    direction is "in" or "out" as seen by the interface's own host.
    """

    SNAPLEN = 96

    def __init__(self, node: Node, intf: str, path: Path, *, direction: str = "in", bpf: str = "tcp"):
        self.node, self.intf, self.path = node, intf, path
        path.parent.mkdir(parents=True, exist_ok=True)
        path.unlink(missing_ok=True)
        # --immediate-mode: without it libpcap hands packets over in blocks
        # once a second, and whatever arrived in the last second before
        # stop() is never written.
        argv = ["tcpdump", "-i", intf, "-Q", direction, "-s", str(self.SNAPLEN), "-w", str(path), "-U", "--immediate-mode", "-n", bpf]
        self.proc = node.popen(argv, stdout=open("/dev/null", "wb"), stderr=open(f"{path}.log", "wb"))  # noqa: SIM115 - the child owns them
        # tcpdump says "listening on" on stderr once the socket is open.
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and "listening" not in Path(f"{path}.log").read_text(errors="replace"):
            time.sleep(0.05)

    def stop(self) -> list[int]:
        time.sleep(0.3)  # the last packets of a transfer are still in flight through BMv2
        self.proc.terminate()
        self.proc.wait(10)
        return self.sizes()

    def sizes(self) -> list[int]:
        """IP packet sizes (frame length minus the Ethernet header) of every captured packet."""
        return [length - ETHERNET_HEADER for length in pcap_frame_lengths(self.path)]


def pcap_records(path: Path) -> list[tuple[float, int]]:
    """(timestamp, original frame length) of every packet in a classic pcap file (what tcpdump -w writes)."""
    data = path.read_bytes() if path.exists() else b""
    if len(data) < 24:
        return []
    magic = struct.unpack("<I", data[:4])[0]
    endian = "<" if magic in (0xA1B2C3D4, 0xA1B23C4D) else ">"
    # 0xa1b23c4d marks nanosecond timestamps.
    fraction = 1e-9 if magic in (0xA1B23C4D, 0x4D3CB2A1) else 1e-6
    records, offset = [], 24
    while offset + 16 <= len(data):
        seconds, sub, incl_len, orig_len = struct.unpack(endian + "IIII", data[offset : offset + 16])
        records.append((seconds + sub * fraction, orig_len))
        offset += 16 + incl_len
    return records


def pcap_frame_lengths(path: Path) -> list[int]:
    return [length for _, length in pcap_records(path)]


def size_summary(sizes: list[int]) -> str:
    if not sizes:
        return "no packets"
    buckets = Counter("<=1500" if s <= 1500 else ">=7650" if s >= 7650 else "1501-7649" for s in sizes)
    big = max(sizes)
    return f"{len(sizes)} packets, largest {big} B, " + ", ".join(f"{k}: {buckets[k]}" for k in ("<=1500", "1501-7649", ">=7650") if buckets[k])


@dataclass(frozen=True)
class IperfResult:
    bytes_received: int
    seconds: float
    retransmits: int
    streams: int

    @property
    def goodput_mbps(self) -> float:
        return 8 * self.bytes_received / self.seconds / 1e6 if self.seconds else 0.0


def module_command(module: str, *args: object) -> list[str]:
    """argv that runs one of the emulation's helper modules (transfer, mice) inside a host."""
    return [sys.executable, "-m", f"emulation.{module}", *map(str, args)]


MODULE_ENV = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[1]))


def start_iperf_servers(node: Node, ports: tuple[int, ...]) -> None:
    for port in ports:
        node.cmd(f"iperf3 -s -D -1 -p {port} --logfile /dev/null")
    wait_listening(node, ports)


def wait_listening(node: Node, ports: tuple[int, ...], timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        listening = node.cmd("ss -Hltn").split()
        if all(any(field.endswith(f":{port}") for field in listening) for port in ports):
            return
        time.sleep(0.1)
    raise RuntimeError(f"{node.name}: nothing listening on {ports}")


def iperf_client(node: Node, server: str, port: int, *, seconds: float, streams: int, reverse: bool = False, extra: str = ""):
    """Start an iperf3 client with JSON output; finish with iperf_result(proc)."""
    argv = ["iperf3", "-c", server, "-p", str(port), "-t", str(seconds), "-P", str(streams), "-J", "--connect-timeout", "3000"]
    if reverse:
        argv.append("-R")
    argv += extra.split()
    return node.popen(argv)


def iperf_result(proc, timeout: float = 120.0) -> IperfResult:
    out, err = proc.communicate(timeout=timeout)
    data = json.loads(out or b"{}")
    if "error" in data or "end" not in data:
        raise RuntimeError(f"iperf3 failed: {data.get('error') or err.decode(errors='replace')}")
    received = data["end"]["sum_received"]
    sent = data["end"].get("sum_sent", {})
    return IperfResult(
        bytes_received=int(received["bytes"]),
        seconds=float(received["seconds"]),
        retransmits=int(sent.get("retransmits", 0)),
        streams=len(data["end"].get("streams", [])),
    )


def wire_efficiency(payload_per_packet: int, ip_packet: int) -> float:
    """Share of the wire that is payload, for packets of ip_packet bytes carrying payload_per_packet."""
    return payload_per_packet / (ip_packet + ETHERNET_HEADER + WIRE_EXTRA)


# TCP/IPv4 with the timestamp option: 20 + 20 + 12 bytes of headers.
TCP4_TS_HEADERS = 52


def theoretical_efficiency(mtu: int) -> float:
    return wire_efficiency(mtu - TCP4_TS_HEADERS, mtu)


def measured_efficiency(goodput_bytes: int, delta: Counters) -> float:
    """Goodput bytes over what the receiving interface's packets cost on a wire."""
    wire = delta.rx_bytes + WIRE_EXTRA * delta.rx_packets
    return goodput_bytes / wire if wire else 0.0


def switch_port_counters(root: Node) -> dict[int, Counters]:
    """Counters of the switch's own veth ends: rx = what arrived at the switch port."""
    return {port.number: counters(root, port.intf) for port in plan.SWITCH_PORTS}
