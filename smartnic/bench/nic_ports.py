"""make bench, the SmartNIC program on real ports: packets per second that
jumbogate-nic takes in and sends out while it merges 1500-byte TCP segments
into jumbo frames, next to a pass-through forwarder (dpdk-testpmd, io mode)
on the same ports and the same trace, first on veth ports (af_packet), then
on shared-memory ports (DPDK net_memif), where no kernel copies frames, then
on veth ports whose receiving end is an AF_XDP socket (xdp: net_af_xdp on
port 0 at MTU 1500, jumbogate-nic's --port-mtu for that port alone; port 1,
where merged frames leave, stays af_packet, since AF_XDP on veth carries
no jumbo frame with DPDK 22.11).

One load generator (jumbogate-loadgen) replays the trace out of port 0 as
fast as the port takes it and counts what comes back on port 1. Each
forwarder in turn owns the far ends of the same two ports:

    loadgen jgnbh0 ── jgnbs0  port 0: the Internet side, the trace comes in
    loadgen jgnbh1 ── jgnbs1  port 1: where what was forwarded leaves

jumbogate-nic runs as it would on the switch's SmartNIC port, with the
rack's instance prefix as its internal prefix (so the trace's segments are
inbound: merged) and merging unknown flows (its default: the switch steers
only eligible traffic to it); what arrives on port 0 leaves on port 1
(--return-port). The pass-through forwards port 0 to port 1 and does
nothing else.

The trace: 1500-byte TCP segments (IP length 1500, TCP timestamps as Linux
sends them, so 1448 bytes of payload) of FLOWS flows from an Internet
address to an instance, each flow sending trains of TRAIN back-to-back
segments, the trains of all flows taking turns; or the first frames of a
capture (--pcap, e.g. from capture.sh), whose TCP receivers are then taken
as the rack. The generator replays it round-robin with --advance-seq: every
loop continues each flow's sequence numbers (and IPv4 IDs), so the NIC sees
endless in-sequence streams, not the same segments again, which it would
take for retransmissions and not merge. Both forwarders get the same
frames.

Packets in: "offered" is what the generator's port took per second in the
measured window; "taken" is what the forwarder's port 0 received in the
same window (the DPDK port counter of either forwarder, read over
telemetry as the window opens and closes). Packets and bytes out are what
came back on port 1 in the window. The forwarders take turns, --rounds
times each, and each one's best round counts. The run fails unless
jumbogate-nic really merged in every round: fewer packets out than in,
larger frames out than in, merged packets in its totals.

On memif both sides use ring buffers that hold a whole jumbo frame (see
portbench.Ports). The generator sends on one lcore (CPU 0); each forwarder
runs its main lcore on CPU 0 and its one worker or forwarding lcore on
CPU 1.

    nic_ports.py [--seconds S] [--rounds N] [--ports veth,memif,xdp] [--pcap FILE] [--json FILE]

JUMBOGATE_NIC names another build of jumbogate-nic (as for its tests).
"""

from __future__ import annotations

import argparse
import ipaddress
import json
import os
import shutil
import socket
import sys
import tempfile
from pathlib import Path

from scapy.layers.inet import IP, TCP
from scapy.layers.inet6 import IPv6
from scapy.layers.l2 import Ether
from scapy.utils import PcapReader, wrpcap

# The test lab (testlab/) lives at the top of the repository.
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from testlab import lab  # noqa: E402
from testlab.portbench import (  # noqa: E402
    INSTANCE,
    INSTANCE_NET,
    INTERNET,
    LOADGEN,
    REPO,
    WINDOW_END,
    WINDOW_START,
    XDP_MTU,
    BenchError,
    Ports,
    Testpmd,
    port_kinds,
    print_logs,
    run_loadgen,
    veth_mtu,
    xdp_unavailable,
)

NIC = lab.NIC
FLOWS = 64
SEGMENTS_PER_FLOW = 64
TRAIN = 16
FRAME_IP_BYTES = 1500
FIRST_SPORT = 41000
# jumbogate-loadgen replays at most this many frames of a capture.
LOADGEN_FRAMES = 4096
# The NIC's internal prefixes: at most this many (its option's limit).
MAX_INTERNAL_PREFIXES = 64

PORT_IN, PORT_OUT = 0, 1
FORWARDER_SIDE = {PORT_IN: "jgnbs0", PORT_OUT: "jgnbs1"}
HOST_SIDE = {PORT_IN: "jgnbh0", PORT_OUT: "jgnbh1"}
# memif ring buffers that hold a whole merged frame (see Ports).
MEMIF_BUFFER = 12288
SENDER_MAC, NIC_MAC = "00:00:00:00:e0:00", "00:00:00:00:e0:02"
TARGET_NAMES = {"nic": "jumbogate-nic (merging)", "pass": "dpdk-testpmd (io)"}


def trace_frames() -> list:
    """FLOWS flows of SEGMENTS_PER_FLOW full segments, in trains of TRAIN per flow, the flows taking turns.

    Within a flow: sequence numbers follow each other, IPv4 IDs count up
    (DF set), the timestamp value is one per train (a Linux sender's clock
    ticks between sends), and PSH marks the end of a train, as at the end
    of a send.
    """
    header_bytes = len(IP() / TCP(options=[("NOP", None), ("NOP", None), ("Timestamp", (0, 0))]))
    payload = FRAME_IP_BYTES - header_bytes
    frames = []
    for train in range(SEGMENTS_PER_FLOW // TRAIN):
        for flow in range(FLOWS):
            for i in range(TRAIN):
                segment = train * TRAIN + i
                ip = IP(src=INTERNET[4], dst=INSTANCE[4], id=(flow * 1000 + segment) & 0xFFFF, flags="DF", ttl=60)
                tcp = TCP(
                    sport=FIRST_SPORT + flow,
                    dport=443,
                    seq=1_000_000 * (flow + 1) + segment * payload,
                    ack=1,
                    flags="PA" if i == TRAIN - 1 else "A",
                    window=512,
                    options=[("NOP", None), ("NOP", None), ("Timestamp", (100_000 + train, 7))],
                )
                frames.append(Ether(src=SENDER_MAC, dst=NIC_MAC) / ip / tcp / (bytes([flow]) * payload))
    return frames


def receivers(capture: Path) -> list[str]:
    """The internal prefixes for a capture: one host prefix per receiver of TCP data among the frames the generator replays."""
    hosts: list[str] = []
    with PcapReader(str(capture)) as reader:
        for number, frame in enumerate(reader):
            if number == LOADGEN_FRAMES:
                break
            ip = frame.getlayer(IP) or frame.getlayer(IPv6)
            if ip is None or TCP not in frame or not bytes(frame[TCP].payload):
                continue
            host = str(ipaddress.ip_network(ip.dst))
            if host not in hosts:
                hosts.append(host)
    if not hosts:
        raise BenchError(f"{capture} has no TCP segments with data among its first {LOADGEN_FRAMES} frames")
    if len(hosts) > MAX_INTERNAL_PREFIXES:
        raise BenchError(f"{capture} has data for {len(hosts)} receivers; jumbogate-nic takes at most {MAX_INTERNAL_PREFIXES} internal prefixes")
    return hosts


class Nic:
    """jumbogate-nic on the two bench ports: port 0's traffic leaves on port 1."""

    def __init__(self, ports: Ports, internal: list[str], log: Path):
        self.ports, self.internal, self.log = ports, internal, log
        self.prefix = f"jgbnic{os.getpid()}"
        self.process: lab.Process | None = None
        self.totals: dict = {}

    def start(self) -> Nic:
        if not NIC.exists():
            raise BenchError(f"{NIC} is not built; run 'make setup'")
        address = f"127.0.0.1:{lab.free_tcp_port()}"
        names = {port: f"{self.ports.driver_of(port)}_nic{port}" for port in self.ports.forwarder_side}
        # The main lcore serves control, the worker on the other CPU polls
        # both ports: the same two lcores testpmd gets.
        args = [NIC, "--no-huge", "-m", "1024", "--no-pci", "--file-prefix", self.prefix, "-l", "0-1", "--log-level=lib.eal:error"]
        for port, name in names.items():
            args += ["--vdev", self.ports.forwarder_vdev(port, name)]
        args += ["--", "--grpc", address]
        if self.ports.kind == "xdp":
            # AF_XDP's buffers are one page and its frames at most XDP_MTU;
            # the af_packet port grows its buffers to its ring's frames.
            args += ["--port-mtu", f"{names[PORT_IN]}={XDP_MTU}"]
        else:
            args += ["--mbuf-size", "12288"]
        for prefix in self.internal:
            args += ["--internal-prefix", prefix]
        args += ["--return-port", f"{names[PORT_IN]}={names[PORT_OUT]}", "--return-port", f"{names[PORT_OUT]}={names[PORT_IN]}"]
        # Serving gRPC means the ports are up and the worker runs.
        self.process = lab.start_dpdk_service(args, self.log, address)
        return self

    def stop(self) -> None:
        """Stop it (it flushes what it holds) and read its exit totals."""
        if self.process is None:
            return
        status = self.process.stop(timeout=30)
        shutil.rmtree(f"/var/run/dpdk/{self.prefix}", ignore_errors=True)
        for line in self.process.output().splitlines():
            if line.startswith('{"event": "exit"'):
                self.totals = json.loads(line)
        if status != 0 or not self.totals:
            raise BenchError(f"jumbogate-nic exited with {status} and no exit totals; see {self.log}")


class Taken:
    """Packets a forwarder's port 0 (PORT_IN) received in the generator's
    measured window: its DPDK port counter (/ethdev/stats over telemetry,
    the same for both forwarders) read as the generator opens and closes
    the window. Read then, not after the run: a memif port's counters start
    again from 0 when the generator's client disconnects. The telemetry
    connection is opened beforehand, so that a read costs one round trip,
    not a connection, after the window opened."""

    def __init__(self, file_prefix: str):
        self.file_prefix = file_prefix
        self.edges: dict[str, int] = {}
        self.connection = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.connection.settimeout(5)
        try:
            self.connection.connect(f"/var/run/dpdk/{file_prefix}/dpdk_telemetry.v2")
            self.connection.recv(16384)  # the greeting
        except OSError as error:
            self.connection.close()
            raise BenchError(f"no DPDK telemetry from {file_prefix}: {error}") from error

    def __call__(self, line: str) -> None:
        edge = line.strip()
        if edge in (WINDOW_START, WINDOW_END):
            self.connection.send(f"/ethdev/stats,{PORT_IN}".encode())
            self.edges[edge] = int(json.loads(self.connection.recv(65536).decode())["/ethdev/stats"]["ipackets"])

    def close(self) -> None:
        self.connection.close()

    @property
    def packets(self) -> int:
        if set(self.edges) != {WINDOW_START, WINDOW_END}:
            raise BenchError(f"the receive counter of {self.file_prefix} was not read at both edges of the window")
        return self.edges[WINDOW_END] - self.edges[WINDOW_START]


def figures(ports: Ports, counts: dict, forwarder_in: int) -> dict:
    seconds = counts["seconds"]
    back = counts["received"]
    out_packets = sum(value["packets"] for name, value in back.items() if ports.port_of(name) == PORT_OUT)
    out_bytes = sum(value["bytes"] for name, value in back.items() if ports.port_of(name) == PORT_OUT)
    return {
        "offered_pps": counts["sent"] / seconds,
        "taken_pps": forwarder_in / seconds,
        "out_pps": out_packets / seconds,
        "out_bytes_per_s": out_bytes / seconds,
        "mean_in_bytes": counts["sent_bytes"] / counts["sent"] if counts["sent"] else 0.0,
        "mean_out_bytes": out_bytes / out_packets if out_packets else 0.0,
        "sent": counts["sent"],
        "loops": counts["loops"],
        "forwarder_in": forwarder_in,
        "received": out_packets,
    }


def check_merged(kind: str, result: dict, totals: dict) -> None:
    """Fail loudly unless jumbogate-nic merged: fewer and larger packets out than in."""
    problems = []
    if result["received"] == 0:
        problems.append("nothing came back")
    if not result["out_pps"] < result["taken_pps"]:
        problems.append(f"{result['out_pps']:.0f} packets/s out is not fewer than {result['taken_pps']:.0f} in")
    if not result["mean_out_bytes"] > max(result["mean_in_bytes"], 1500):
        problems.append(f"frames out average {result['mean_out_bytes']:.0f} bytes, frames in {result['mean_in_bytes']:.0f}")
    if not totals.get("merged_packets"):
        problems.append("its exit totals count no merged packet")
    if problems:
        raise BenchError(f"jumbogate-nic on {kind} did not merge: {'; '.join(problems)} (totals: {totals})")


def run_round(kind: str, name: str, forwarder, ports: Ports, capture: Path, seconds: float, workdir: Path, round_: int):
    """Start a forwarder, send the trace through it for `seconds`, stop it: its figures, and the stopped forwarder."""
    started = forwarder.start()
    try:
        taken = Taken(started.prefix)
        try:
            counts = run_loadgen(ports, capture, seconds, workdir / f"loadgen-{name}-{kind}-{round_}.log", ("--advance-seq",), taken)
        finally:
            taken.close()
    finally:
        started.stop()
    return figures(ports, counts, taken.packets), started


def run_nic(kind: str, ports: Ports, capture: Path, internal: list[str], seconds: float, workdir: Path, round_: int) -> dict:
    result, nic = run_round(kind, "nic", Nic(ports, internal, workdir / f"nic-{kind}-{round_}.log"), ports, capture, seconds, workdir, round_)
    result["merged_packets"] = nic.totals["merged_packets"]
    result["dropped"] = nic.totals["packets_dropped"]
    check_merged(kind, result, nic.totals)
    return result


def run_testpmd(kind: str, ports: Ports, capture: Path, seconds: float, workdir: Path, round_: int) -> dict:
    testpmd = Testpmd(ports, (PORT_IN, PORT_OUT), workdir / f"testpmd-{kind}-{round_}.log")
    result, _ = run_round(kind, "pass", testpmd, ports, capture, seconds, workdir, round_)
    if result["received"] == 0 or result["forwarder_in"] == 0:
        raise BenchError(f"dpdk-testpmd on {kind} forwarded nothing")
    return result


def measure(kind: str, ports: Ports, capture: Path, internal: list[str], seconds: float, rounds: int, workdir: Path) -> dict:
    """Both forwarders in turn, `rounds` times; each one's best round (most packets taken in per second) counts.

    The machine's speed wanders between runs of a few seconds; taking turns
    and keeping each one's best compares them at their least disturbed.
    """
    every: dict[str, list[dict]] = {"nic": [], "pass": []}
    for round_ in range(rounds):
        every["nic"].append(run_nic(kind, ports, capture, internal, seconds, workdir, round_))
        every["pass"].append(run_testpmd(kind, ports, capture, seconds, workdir, round_))
    results: dict = {target: max(runs, key=lambda r: r["taken_pps"]) for target, runs in every.items()}
    results["rounds"] = {target: [r["taken_pps"] for r in runs] for target, runs in every.items()}
    return results


def ratio(results: dict) -> float:
    """jumbogate-nic's packets taken in per second over testpmd's."""
    base = results["pass"]["taken_pps"]
    return results["nic"]["taken_pps"] / base if base else 0.0


def report(kind: str, results: dict, trace: str) -> str:
    lines = [f"The SmartNIC program on {kind} ports: {trace}", ""]
    lines.append(f"{'forwarder':<25}{'offered':>11}{'taken':>11}{'out':>11}{'out Gbit/s':>12}{'mean out':>11}")
    for target, name in TARGET_NAMES.items():
        r = results[target]
        lines.append(
            f"{name:<25}{r['offered_pps'] / 1e6:>9.3f} M{r['taken_pps'] / 1e6:>9.3f} M{r['out_pps'] / 1e6:>9.3f} M"
            f"{r['out_bytes_per_s'] * 8 / 1e9:>12.2f}{r['mean_out_bytes']:>9.0f} B"
        )
    nic = results["nic"]
    rounds = "; ".join(f"{target} " + ", ".join(f"{pps / 1e6:.3f}" for pps in taken) + " M" for target, taken in results["rounds"].items())
    lines += [
        "",
        f"nic/testpmd, packets taken in per second: {ratio(results):.2f}x (target 0.8x)",
        f"jumbogate-nic merged {nic['merged_packets']} packets and dropped {nic['dropped']} over its run; "
        f"{nic['taken_pps'] / nic['out_pps'] if nic['out_pps'] else 0:.1f} packets in per packet out",
        "packets per second; offered: what the generator's port took, taken: what the forwarder received, out: what came back",
        f"each forwarder's best of {len(results['rounds']['nic'])} rounds, taken in every round: {rounds}",
    ]
    return "\n".join(lines)


NIC_PORT_KINDS = ("veth", "memif", "xdp")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=2.0, help="measured seconds of each forwarder's round on each kind of port")
    parser.add_argument(
        "--ports",
        default="veth,memif,xdp",
        help="comma-separated: veth, memif, xdp (xdp: port 0, where the trace comes in, an AF_XDP socket at MTU 1500; port 1, "
        "where merged frames leave, stays af_packet, since AF_XDP on veth carries no jumbo frame: testlab/portbench.py XDP_MTU)",
    )
    parser.add_argument("--rounds", type=int, default=3, help="runs of each forwarder per kind of port, taking turns; the best counts")
    parser.add_argument("--pcap", type=Path, help=f"replay this capture's first {LOADGEN_FRAMES} frames instead of the generated trace")
    parser.add_argument("--json", type=Path, help="write the figures here")
    args = parser.parse_args(argv)
    kinds = port_kinds(parser, args.ports, known=NIC_PORT_KINDS)
    if "xdp" in kinds and (why := xdp_unavailable()):
        print(f"nic ports: AF_XDP left out: {why}; veth ports stay on net_af_packet", file=sys.stderr)
        kinds.remove("xdp")
        if not kinds:
            print("nic ports: no kind of port left to measure", file=sys.stderr)
            return 1
    if args.rounds < 1:
        parser.error(f"--rounds takes a whole number of at least 1, got {args.rounds}")
    if args.pcap is not None and not args.pcap.is_file():
        parser.error(f"--pcap {args.pcap}: no such file")
    if not LOADGEN.exists():
        print(f"nic ports: {LOADGEN.relative_to(REPO)} is not built; run 'make setup'", file=sys.stderr)
        return 1
    results: dict[str, dict] = {}
    with tempfile.TemporaryDirectory(prefix="jgnicbench-") as tmp, lab.veth_pairs("jgnb", len(FORWARDER_SIDE)):
        workdir = Path(tmp)
        try:
            if args.pcap is None:
                capture = workdir / "trace.pcap"
                wrpcap(str(capture), trace_frames())
                internal = [INSTANCE_NET[4]]
                trace = f"{FRAME_IP_BYTES}-byte TCP segments of {FLOWS} flows in trains of {TRAIN}, packets per second"
            else:
                capture = args.pcap
                internal = receivers(capture)
                trace = f"{capture.name} (its first {LOADGEN_FRAMES} frames at most), packets per second"
            for kind in kinds:
                ports = Ports(
                    kind, f"/run/jgnicbench-{os.getpid()}.sock", FORWARDER_SIDE, HOST_SIDE, PORT_IN, memif_buffer=MEMIF_BUFFER, jumbo_ports=(PORT_OUT,)
                )
                print(f"nic ports: jumbogate-nic and dpdk-testpmd on {kind} ...", file=sys.stderr, flush=True)
                with veth_mtu(ports.xdp_veths, XDP_MTU, restore=lab.VethPair.mtu):
                    results[kind] = measure(kind, ports, capture, internal, args.seconds, args.rounds, workdir)
        except (BenchError, lab.LabError) as error:
            print(f"nic ports: {error}", file=sys.stderr)
            print_logs(workdir)
            return 1
    print("\n\n".join(report(kind, results[kind], trace) for kind in kinds))
    if args.json:
        figures_out = {kind: {**results[kind], "nic_over_pass": ratio(results[kind])} for kind in kinds}
        args.json.write_text(json.dumps({"seconds": args.seconds, "rounds": args.rounds, "trace": trace, "results": figures_out}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
