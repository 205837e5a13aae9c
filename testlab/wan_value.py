"""`make value-wan`: one TCP flow across a WAN, from a rack with the border and from a plain rack (#38, item 4).

PacketExpress reports that a sender whose network alone has the gateway
goes 2.5 times faster (123 to 303 Mbit/s) over a WAN of 10 ms round trip
and 0.01% loss. Here, in network namespaces (testlab/wan.py):

    instance --[jumbogate-nic]--[jumbogate-wanlink: 5 ms each way, 0.01% loss]-- Internet host (MTU 1500)

  - with the border: the instance's link has MTU 8500; jumbogate-nic
    raises the Internet host's MSS on the way in, so the instance sends
    8448-byte segments, and splits them to 1500 bytes on the way out; what
    the Internet host sends is merged into packets of up to 8500 bytes on
    the way in;
  - the plain rack: the instance's link has MTU 1500 and jumbogate-nic
    passes every packet untouched (the same hops and copies, no merging
    or splitting).

For each, one iperf3 flow with cubic both ways: the instance sending (the
paper's case), and the Internet host sending into the rack (the receiver
only). The same flows on a WAN without loss show what the lab's path
itself carries on this machine. It prints Mbit/s, retransmissions and what the WAN lost per flow,
the ratio border/plain beside the paper's, and writes a JSON file and, with
matplotlib, a bar chart. Each flow is measured `--repeats` times, on a new
path each time, plain and border alternating so that a change in the
machine's load meets both; the report gives the median.

    python3 -m testlab.wan_value [--seconds 20] [--repeats 3] [--delay-us 5000] [--loss 0.0001] [--lossless-repeats 1] [--json F] [--plot F]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from .lab import REPO, telemetry_query
from .wan import CONGESTION, INTERNET, JUMBO_MTU, WAN_MTU, WanPath

# The paper's figures (PacketExpress, a sender over a WAN of 10 ms RTT and 0.01% loss).
PAPER_PLAIN_MBIT = 123.0
PAPER_GATEWAY_MBIT = 303.0
DIRECTIONS = ("sender", "receiver")
RACKS = ("plain", "border")
IPERF_PORT = 5201


@dataclass
class Flow:
    direction: str  # sender: the instance sends; receiver: the Internet host sends into the rack
    rack: str  # plain or border
    repeat: int
    mbit: float = 0.0  # what the receiving end got, per second
    retransmits: int | None = None
    rtt_ms: float = 0.0  # ping across the path before the flow
    wan_received: int = 0  # packets the WAN carried in the data's direction
    wan_lost: int = 0  # of them lost (the seeded loss)
    wan_overflow: int = 0  # of them dropped at the link's limit (should be none)
    lab_dropped: int = 0  # packets lost between the lab's programs in the data's direction, not by the WAN
    lab_hops: dict = field(default_factory=dict)  # the same per hop (sent minus received)
    wan_largest: int = 0  # bytes of the largest frame on the WAN in the data's direction
    merged_packets: int = 0  # jumbogate-nic's counters over the flow
    split_packets: int = 0
    split_segments_out: int = 0
    congestion: str = ""  # iperf3's sender/receiver congestion control
    cpu_load: float = 0.0  # the machine's 1-minute load average as the flow ended
    error: str = ""


@dataclass
class Report:
    seconds: float
    delay_us: float
    loss: float
    seed: int
    cpus: int
    flows: list[Flow] = field(default_factory=list)
    # The same flows on a WAN that loses nothing: what the lab's path itself
    # carries on this machine, so that a ratio the WAN's loss does not
    # explain shows (a plain rack that is slower for its packets' cost).
    lossless: list[Flow] = field(default_factory=list)

    def median(self, direction: str, rack: str, lossless: bool = False) -> float:
        flows = self.lossless if lossless else self.flows
        values = [f.mbit for f in flows if f.direction == direction and f.rack == rack and not f.error]
        return statistics.median(values) if values else 0.0

    def ratio(self, direction: str, lossless: bool = False) -> float:
        plain = self.median(direction, "plain", lossless)
        return self.median(direction, "border", lossless) / plain if plain else 0.0


def _stats(path: WanPath) -> tuple[dict, dict]:
    return path.link.counters(), path.nic.telemetry("/jumbogate/stats")


def _packets(path: WanPath) -> dict[str, int]:
    """Packets each end of each hop sent and received: the hosts' interfaces, and both programs' ports (DPDK's /ethdev/stats)."""
    counts = {}
    for name, ns, iface in (("instance", path.instance, path.names["jgwi"]), ("internet", path.internet, path.names["jgwh"])):
        stats = json.loads(ns.exec("ip", "-j", "-s", "link", "show", "dev", iface).stdout)[0]["stats64"]
        counts[f"{name}_tx"], counts[f"{name}_rx"] = stats["tx"]["packets"], stats["rx"]["packets"]
    for name, program in (("nic", path.nic), ("wan", path.link)):
        for port in (0, 1):
            stats = telemetry_query(program.file_prefix, f"/ethdev/stats,{port}")
            counts[f"{name}{port}_tx"], counts[f"{name}{port}_rx"] = stats["opackets"], stats["ipackets"]
    return counts


# The hops of the data's direction, each as (sender's counter, receiver's
# counter): what one sent and the next did not receive was dropped between
# them (a full receive ring of a program the machine did not run in time).
HOPS = {
    "sender": (("instance_tx", "nic0_rx"), ("nic1_tx", "wan0_rx"), ("wan1_tx", "internet_rx")),
    "receiver": (("internet_tx", "wan1_rx"), ("wan0_tx", "nic1_rx"), ("nic0_tx", "instance_rx")),
}


def measure_flow(path: WanPath, direction: str, seconds: float, flow: Flow) -> Flow:
    """One iperf3 flow across the path; the server on the Internet host, the client in the rack (-R: the server sends)."""
    flow.rtt_ms = path.rtt_ms()
    link_before, nic_before = _stats(path)
    packets_before = _packets(path)
    server = subprocess.Popen(
        ["ip", "netns", "exec", path.internet.name, "iperf3", "-s", "-1", "-p", str(IPERF_PORT), "-B", INTERNET],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        # The server may take a while to listen on a loaded machine.
        deadline = time.monotonic() + 30
        while not path.internet.exec("ss", "-Hltn", f"sport = :{IPERF_PORT}", check=False).stdout.strip():
            if server.poll() is not None or time.monotonic() > deadline:
                flow.error = f"iperf3's server did not listen: {server.communicate(timeout=5)[0].strip() if server.poll() is not None else 'timed out'}"
                return flow
            time.sleep(0.05)
        client = ["iperf3", "-c", INTERNET, "-p", str(IPERF_PORT), "-t", str(seconds), "-C", CONGESTION, "-J", "--connect-timeout", "5000"]
        if direction == "receiver":
            client.append("-R")
        done = path.instance.exec(*client, check=False, timeout=seconds + 60)
        result = json.loads(done.stdout or "{}")
        if "error" in result or done.returncode != 0:
            flow.error = result.get("error", done.stderr.strip() or f"iperf3 exited {done.returncode}")
            return flow
        end = result["end"]
        flow.mbit = end["sum_received"]["bits_per_second"] / 1e6
        flow.retransmits = end.get("sum_sent", {}).get("retransmits")
        flow.congestion = f"{end.get('sender_tcp_congestion', '?')}/{end.get('receiver_tcp_congestion', '?')}"
    finally:
        server.kill()
        server.wait(timeout=10)
    link_after, nic_after = _stats(path)
    packets = {k: v - packets_before[k] for k, v in _packets(path).items()}
    flow.lab_hops = {f"{a}->{b}": packets[a] - packets[b] for a, b in HOPS[direction]}
    flow.lab_dropped = sum(max(0, n) for n in flow.lab_hops.values())
    # The data's direction on the WAN: a_to_b leaves the border for the Internet.
    key = "a_to_b" if direction == "sender" else "b_to_a"
    flow.wan_received = link_after[key]["received"] - link_before[key]["received"]
    flow.wan_lost = link_after[key]["lost"] - link_before[key]["lost"]
    flow.wan_overflow = link_after[key]["overflow"] - link_before[key]["overflow"]
    flow.wan_largest = link_after[key]["largest"]
    for name in ("merged_packets", "split_packets", "split_segments_out"):
        setattr(flow, name, nic_after[name] - nic_before[name])
    flow.cpu_load = os.getloadavg()[0]
    return flow


def _measure(flows: list[Flow], seconds: float, repeats: int, delay_us: float, loss: float, seed: int, log_dir: Path, progress) -> None:
    for repeat in range(repeats):
        # Alternate which rack goes first, so neither always meets the same moment of the machine's load.
        racks = RACKS if repeat % 2 == 0 else tuple(reversed(RACKS))
        for rack in racks:
            # A new seed per repeat: each repeat draws its own loss pattern.
            with WanPath(log_dir, border=rack == "border", delay_us=delay_us, loss=loss, seed=seed + repeat) as path:
                for direction in DIRECTIONS:
                    flow = measure_flow(path, direction, seconds, Flow(direction, rack, repeat))
                    flows.append(flow)
                    progress(_flow_line(flow))


def run(seconds: float, repeats: int, delay_us: float, loss: float, seed: int, log_dir: Path, progress=print, lossless_repeats: int = 0) -> Report:
    report = Report(seconds=seconds, delay_us=delay_us, loss=loss, seed=seed, cpus=os.cpu_count() or 0)
    _measure(report.flows, seconds, repeats, delay_us, loss, seed, log_dir, progress)
    if lossless_repeats:
        progress("the same without loss:")
        _measure(report.lossless, seconds, lossless_repeats, delay_us, 0.0, seed, log_dir, progress)
    return report


def _flow_line(f: Flow) -> str:
    if f.error:
        return f"  {f.direction:8} {f.rack:6} #{f.repeat}: failed: {f.error}"
    return (
        f"  {f.direction:8} {f.rack:6} #{f.repeat}: {f.mbit:7.1f} Mbit/s, {f.retransmits} retransmitted,"
        f" WAN lost {f.wan_lost} of {f.wan_received}, lab dropped {f.lab_dropped} (overflow {f.wan_overflow}, largest frame {f.wan_largest} B),"
        f" merged {f.merged_packets}, split {f.split_packets} into {f.split_segments_out}; {f.congestion}; ping {f.rtt_ms:.1f} ms; load {f.cpu_load:.1f}"
    )


def render(report: Report) -> str:
    lines = [
        f"WAN: {2 * report.delay_us / 1000:.1f} ms round trip ({report.delay_us:.0f} us each way), loss {100 * report.loss:g}% each way"
        f" (seeds {report.seed}..{report.seed + max(f.repeat for f in report.flows)}), one cubic flow of {report.seconds:g} s, iperf3;"
        f" plain rack MTU {WAN_MTU}, rack with the border MTU {JUMBO_MTU}, Internet host MTU {WAN_MTU}; {report.cpus} CPUs",
        "",
        f"{'':30} {'plain 1500 rack':>16} {'rack with border':>17} {'ratio':>7}",
    ]
    names = {"sender": "sender (rack -> Internet)", "receiver": "receiver (Internet -> rack)"}
    for direction in DIRECTIONS:
        plain, border = report.median(direction, "plain"), report.median(direction, "border")
        lines.append(f"{names[direction]:30} {plain:11.1f} Mbit/s {border:12.1f} Mbit/s {report.ratio(direction):6.2f}x")
    paper = PAPER_GATEWAY_MBIT / PAPER_PLAIN_MBIT
    lines.append(f"{'paper: sender (PacketExpress)':30} {PAPER_PLAIN_MBIT:11.1f} Mbit/s {PAPER_GATEWAY_MBIT:12.1f} Mbit/s {paper:6.2f}x")
    if report.lossless:
        lines.append(f"{'without loss (the lab path):':30}")
        for direction in DIRECTIONS:
            plain, border = report.median(direction, "plain", True), report.median(direction, "border", True)
            lines.append(f"{'  ' + names[direction]:30} {plain:11.1f} Mbit/s {border:12.1f} Mbit/s {report.ratio(direction, True):6.2f}x")
    lines += ["", "medians of the flows below:"] + [_flow_line(f) for f in report.flows]
    if report.lossless:
        lines += ["without loss:"] + [_flow_line(f) for f in report.lossless]
    return "\n".join(lines)


def plot(report: Report, path: Path) -> bool:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    groups = ["paper: sender", "here: sender", "here: receiver"]
    plain = [PAPER_PLAIN_MBIT, report.median("sender", "plain"), report.median("receiver", "plain")]
    border = [PAPER_GATEWAY_MBIT, report.median("sender", "border"), report.median("receiver", "border")]
    fig, ax = plt.subplots(figsize=(7, 4))
    xs = range(len(groups))
    ax.bar([x - 0.2 for x in xs], plain, 0.4, label="plain 1500 rack")
    ax.bar([x + 0.2 for x in xs], border, 0.4, label="rack with the border (8500)")
    for x, (p, b) in enumerate(zip(plain, border, strict=True)):
        if p:
            ax.annotate(f"{b / p:.2f}x", (x + 0.2, b), ha="center", va="bottom")
    ax.set_xticks(list(xs), groups)
    ax.set_ylabel("Mbit/s (one cubic flow)")
    ax.set_title(f"{2 * report.delay_us / 1000:g} ms RTT, {100 * report.loss:g}% loss")
    ax.legend()
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return True


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="make value-wan", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=20, help="length of each flow (default %(default)s)")
    parser.add_argument("--repeats", type=int, default=3, help="flows per direction and rack (default %(default)s)")
    parser.add_argument("--delay-us", type=float, default=5000, help="one-way delay of the WAN (default %(default)s: 10 ms RTT)")
    parser.add_argument("--loss", type=float, default=0.0001, help="loss probability each way (default %(default)s: 0.01%%)")
    parser.add_argument("--lossless-repeats", type=int, default=1, help="flows per direction and rack on a WAN without loss (default %(default)s)")
    parser.add_argument("--seed", type=int, default=1, help="seed of the first repeat's loss pattern (default %(default)s)")
    parser.add_argument("--json", type=Path, default=REPO / "results" / "value-wan.json", help="the result (default %(default)s)")
    parser.add_argument("--plot", type=Path, default=REPO / "results" / "value-wan.png", help="bar chart (default %(default)s)")
    args = parser.parse_args(argv)
    if os.geteuid() != 0:
        print("make value-wan: needs root (network namespaces, DPDK)", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="value-wan-") as logs:
        report = run(args.seconds, args.repeats, args.delay_us, args.loss, args.seed, Path(logs), lossless_repeats=args.lossless_repeats)
    text = render(report)
    print("\n" + text)
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(asdict(report), indent=2) + "\n")
    print(f"\nwritten: {args.json}", end="")
    print(f", {args.plot}" if plot(report, args.plot) else " (no matplotlib: no plot)")
    return 1 if any(f.error for f in report.flows) else 0


if __name__ == "__main__":
    sys.exit(main())
