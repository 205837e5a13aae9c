"""`make demo`: a scripted session on the emulated rack, a readable report and plots.

Phases (each a few seconds of real TCP through the switch target, jumbogate-switch
or BMv2: SWITCH=soft|bmv2):
 0. headline: one and 8 parallel inbound TCP streams to the jumbo instance;
 1. inbound bulk to the jumbo instance, then the same to the 1500 instance;
 2. outbound bulk from the jumbo instance to external hosts;
 3. mice: many short exchanges with the jumbo instance;
 4. policy: the instance flag and the fleet flag off and on again during traffic;
 5. ECMP: how the flows spread over the two upstream routers;
 6. wire efficiency at 1500 and 8500, theory next to measurement;
 7. on jumbogate-switch, last: a real NF behind the border (make value's
    nftables NAT, short), merging against passing.
Results go to results/demo-<time>/ (report.txt, PNGs, pcaps).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from . import measure, plan, procs, rack_value
from .rack import Rack, cannot_start

RESULTS = procs.REPO / "results"
MICE_PORT = 7000
OUTBOUND_PORTS = (5301, 5302)
MICE_COUNT = 200
# Parallel TCP streams per sending host in the bulk phases. BMv2's few
# thousand packets a second are shared by all of them: the fewer, the closer
# together each flow's segments reach the SmartNIC, and the fuller its merges.
STREAMS_PER_HOST = 2
# On BMv2 only (the border in slow motion): inbound streams write 64 KB
# blocks at a set rate, so each block leaves its sender as one train of 45
# segments, as a fast Internet sender's TSO sends it; together they stay
# below what BMv2 carries. On jumbogate-switch senders send as fast as TCP
# lets them.
INBOUND_STREAM_MBPS = 5
INBOUND_WRITE_KB = 64
# The headline runs: one stream, then this many, from one external host.
HEADLINE_STREAMS = (1, 8)


@dataclass
class BulkResult:
    """One bulk phase: what arrived at the switch, what the receiver got, and how big it was."""

    label: str
    streams_per_host: int = STREAMS_PER_HOST
    stream_shape: str = ""  # how each stream sends, when it is not as fast as it can
    goodput_mbps: float = 0.0
    goodput_bytes: int = 0
    retransmits: int = 0
    arrived_packets: int = 0  # at the switch ports the traffic entered by
    delivered_packets: int = 0  # at the receiving host's interface
    delivered_bytes: int = 0
    receiver_sizes: list[int] = field(default_factory=list)
    sender_sizes: list[int] = field(default_factory=list)
    per_uplink_packets: dict[str, int] = field(default_factory=dict)
    nic_merged: int = 0
    nic_segments_out: int = 0
    conversion_yield: float = 0.0
    checksum_errors: int = 0

    @property
    def payload_yield(self) -> float:
        """Share of the payload delivered in packets of at least measure.CONVERTED_MIN_BYTES (IP sizes, 52 bytes of IPv4+TCP headers)."""
        payload = [max(0, size - 52) for size in self.receiver_sizes]
        total = sum(payload)
        converted = sum(p for p, size in zip(payload, self.receiver_sizes, strict=True) if size >= measure.CONVERTED_MIN_BYTES)
        return converted / total if total else 0.0

    @property
    def arrived_per_delivered(self) -> float:
        return self.arrived_packets / self.delivered_packets if self.delivered_packets else 0.0

    @property
    def largest(self) -> int:
        return max(self.receiver_sizes, default=0)

    @property
    def over_1500(self) -> int:
        return sum(1 for s in self.receiver_sizes if s > plan.MTU_EXTERNAL)

    @property
    def efficiency(self) -> float:
        wire = self.delivered_bytes + measure.WIRE_EXTRA * self.delivered_packets
        return self.goodput_bytes / wire if wire else 0.0


@dataclass
class MiceResult:
    exchanges: int = 0
    failed: int = 0
    seconds: float = 0.0
    merge_path_packets: int = 0
    bypass_packets: int = 0
    flows_onloaded: int = 0
    # Many flows, so they show the ECMP spread better than a few bulk ones.
    per_uplink_in: dict[str, int] = field(default_factory=dict)
    per_uplink_out: dict[str, int] = field(default_factory=dict)


@dataclass
class PolicyResult:
    events: list[tuple[float, str]] = field(default_factory=list)  # (seconds from start, what)
    timeline_in: list[tuple[float, int]] = field(default_factory=list)  # packets the instance received
    timeline_out: list[tuple[float, int]] = field(default_factory=list)  # packets the instance sent
    # The switch's ICMP too-big signals, accounted for: each goes to the source
    # of the packet it refused. The instance's own oversize segments are
    # signalled to the instance; a packet the SmartNIC had merged (before its
    # limit followed the policy) is signalled to its external sender, through
    # the SmartNIC, which passes ICMP through.
    icmp_generated: int = 0
    icmp_received: int = 0  # by the jumbo instance
    icmp_received_external: int = 0  # by the external hosts
    icmp_rate_limited: int = 0  # oversize packets dropped by the signal meter without a signal

    @property
    def icmp_unaccounted(self) -> int:
        return self.icmp_generated - self.icmp_received - self.icmp_received_external

    route_before: str = ""
    route_during: str = ""
    route_after: str = ""


@dataclass
class DemoResults:
    inbound_jumbo: BulkResult
    inbound_legacy: BulkResult
    outbound: BulkResult
    mice: MiceResult
    policy: PolicyResult
    seconds: float
    target: str = "soft"  # the switch target: soft (jumbogate-switch) or bmv2
    machine: str = ""
    headline: list[BulkResult] = field(default_factory=list)  # HEADLINE_STREAMS runs
    nf: list[rack_value.Cost] = field(default_factory=list)  # phase 7, the NF behind the border (make value's, short)
    nf_background_softirq: float = 0.0


def describe_machine() -> str:
    return f"{os.cpu_count()} cores, Linux {platform.release()}, {platform.machine()}"


def stats(rack: Rack) -> dict:
    result = rack.ctl("stats", json_output=True, check=False)
    try:
        return json.loads(result.stdout)
    except ValueError:
        return {}


def _int(data: dict, *path: str) -> int:
    for key in path:
        data = data.get(key, {}) if isinstance(data, dict) else {}
    return int(data or 0)


def _drops(data: dict, reason: str) -> int:
    """Packets the switch dropped for `reason` (jumbogatectl stats' drops)."""
    return sum(int(d.get("count", {}).get("packets", 0)) for d in data.get("drops", []) if d.get("reason") == reason)


def _uplink_delta(before: dict, after: dict, direction: str) -> dict[str, int]:
    out = {}
    for router in plan.ROUTERS:
        n = router.port.number
        out[router.host] = (getattr(after[n], f"{direction}_packets")) - getattr(before[n], f"{direction}_packets")
    return out


def inbound_bulk(
    rack: Rack, instance: plan.Instance, outdir: Path, seconds: float, *, streams: int = STREAMS_PER_HOST, senders: tuple = plan.EXTERNAL_HOSTS, tag: str = ""
) -> BulkResult:
    """The senders send to the instance, `streams` streams each, on merge-service ports (trains of 64 KB on BMv2)."""
    receiver = rack.host(instance.host)
    root = rack.host(plan.MGMT_NODE)
    ports = plan.IPERF_PORTS[: len(senders)]
    measure.start_iperf_servers(receiver, ports)
    shape = f"-b {INBOUND_STREAM_MBPS}M -l {INBOUND_WRITE_KB}K" if rack.slow_motion else ""
    result = BulkResult(
        f"inbound to {instance.host} (MTU {instance.mtu})",
        streams_per_host=streams,
        stream_shape=f"{INBOUND_WRITE_KB} KB writes at {INBOUND_STREAM_MBPS} Mbit/s" if shape else "as fast as TCP sends",
    )
    stats_before, switch_before = stats(rack), measure.switch_port_counters(root)
    intf_before = measure.counters(receiver, f"{instance.host}-eth0")
    capture = measure.Capture(receiver, f"{instance.host}-eth0", outdir / f"inbound-{instance.host}{tag}.pcap", direction="in")
    clients = [
        measure.iperf_client(rack.host(ext.host), instance.address.ip4, port, seconds=seconds, streams=streams, extra=shape)
        for ext, port in zip(senders, ports, strict=True)
    ]
    runs = [measure.iperf_result(c, timeout=seconds + 60) for c in clients]
    result.receiver_sizes = capture.stop()
    delta = measure.counters(receiver, f"{instance.host}-eth0") - intf_before
    switch_after, stats_after = measure.switch_port_counters(root), stats(rack)
    result.goodput_bytes = sum(r.bytes_received for r in runs)
    result.goodput_mbps = sum(r.goodput_mbps for r in runs)
    result.retransmits = sum(r.retransmits for r in runs)
    result.per_uplink_packets = _uplink_delta(switch_before, switch_after, "rx")
    result.arrived_packets = sum(result.per_uplink_packets.values())
    result.delivered_packets, result.delivered_bytes = delta.rx_packets, delta.rx_bytes
    result.nic_merged = _int(stats_after, "nic", "merged_packets") - _int(stats_before, "nic", "merged_packets")
    result.conversion_yield = float(stats_after.get("nic", {}).get("conversion_yield", 0.0))
    return result


def outbound_bulk(rack: Rack, outdir: Path, seconds: float) -> BulkResult:
    """The jumbo instance sends to both external hosts (IPv4 to ext1, IPv6 to ext2), STREAMS_PER_HOST streams each."""
    sender = rack.host(plan.JUMBO.host)
    root = rack.host(plan.MGMT_NODE)
    result = BulkResult(f"outbound from {plan.JUMBO.host} to the Internet")
    targets = [
        (rack.host(ext.host), addr, port)
        for ext, addr, port in zip(plan.EXTERNAL_HOSTS, (plan.EXTERNAL_HOSTS[0].address.ip4, plan.EXTERNAL_HOSTS[1].address.ip6), OUTBOUND_PORTS, strict=True)
    ]
    for host, _, port in targets:
        measure.start_iperf_servers(host, (port,))
    stats_before, switch_before = stats(rack), measure.switch_port_counters(root)
    csum_before = sum(checksum_errors(host) for host, _, _ in targets)
    sent = measure.Capture(sender, f"{plan.JUMBO.host}-eth0", outdir / "outbound-sent.pcap", direction="out")
    received = [measure.Capture(host, f"{host.name}-eth0", outdir / f"outbound-{host.name}.pcap", direction="in") for host, _, _ in targets]
    clients = [measure.iperf_client(sender, addr, port, seconds=seconds, streams=STREAMS_PER_HOST) for _, addr, port in targets]
    runs = [measure.iperf_result(c, timeout=seconds + 60) for c in clients]
    result.sender_sizes = sent.stop()
    result.receiver_sizes = [size for capture in received for size in capture.stop()]
    switch_after, stats_after = measure.switch_port_counters(root), stats(rack)
    result.goodput_bytes = sum(r.bytes_received for r in runs)
    result.goodput_mbps = sum(r.goodput_mbps for r in runs)
    result.retransmits = sum(r.retransmits for r in runs)
    result.per_uplink_packets = _uplink_delta(switch_before, switch_after, "tx")
    result.delivered_packets = len(result.receiver_sizes)
    result.nic_segments_out = _int(stats_after, "nic", "segments_out") - _int(stats_before, "nic", "segments_out")
    result.checksum_errors = sum(checksum_errors(host) for host, _, _ in targets) - csum_before
    return result


def checksum_errors(host) -> int:
    """TCP segments the host's kernel threw away for a bad checksum."""
    out = host.cmd("nstat -az TcpInCsumErrors Ip6InHdrErrors IpInHdrErrors 2>/dev/null")
    return sum(int(parts[1]) for line in out.splitlines() if len(parts := line.split()) >= 2 and parts[1].isdigit())


def mice(rack: Rack) -> MiceResult:
    server_host = rack.host(plan.JUMBO.host)
    server = server_host.popen(measure.module_command("mice", "serve", MICE_PORT), env=measure.MODULE_ENV)
    try:
        measure.wait_listening(server_host, (MICE_PORT,))
        before, switch_before = stats(rack), measure.switch_port_counters(rack.host(plan.MGMT_NODE))
        client = rack.host(plan.EXTERNAL_HOSTS[0].host).popen(
            measure.module_command("mice", "run", plan.JUMBO.address.ip4, MICE_PORT, MICE_COUNT), env=measure.MODULE_ENV
        )
        out, _ = client.communicate(timeout=120)
        after, switch_after = stats(rack), measure.switch_port_counters(rack.host(plan.MGMT_NODE))
    finally:
        server.terminate()
        server.wait(5)
    done, failed, seconds = out.decode().split()
    flows = rack.ctl("flows", "list", json_output=True, check=False).stdout
    onloaded = [f for f in json.loads(flows or "{}").get("flows", []) if str(f.get("flow", {}).get("dst_port")) == str(MICE_PORT)] if flows else []
    return MiceResult(
        exchanges=int(done),
        failed=int(failed),
        seconds=float(seconds),
        merge_path_packets=_int(after, "merge_path", "packets") - _int(before, "merge_path", "packets"),
        bypass_packets=_int(after, "bypass", "packets") - _int(before, "bypass", "packets"),
        flows_onloaded=len(onloaded),
        per_uplink_in=_uplink_delta(switch_before, switch_after, "rx"),
        per_uplink_out=_uplink_delta(switch_before, switch_after, "tx"),
    )


def policy(rack: Rack, outdir: Path, step_s: float) -> PolicyResult:
    """Traffic both ways through the jumbo instance while its flags go off and on again."""
    result = PolicyResult()
    instance = rack.host(plan.JUMBO.host)
    ext = rack.host(plan.EXTERNAL_HOSTS[0].host)
    target = plan.EXTERNAL_HOSTS[0].address.ip4
    measure.start_iperf_servers(instance, (plan.IPERF_PORTS[2],))
    measure.start_iperf_servers(ext, (OUTBOUND_PORTS[0],))
    flush_path_mtus(instance)
    result.route_before = instance.cmd(f"ip route get {target}").strip()
    before = stats(rack)
    intf = f"{plan.JUMBO.host}-eth0"
    inbound = measure.Capture(instance, intf, outdir / "policy-in.pcap", direction="in", bpf="")
    signals_out = [
        measure.Capture(rack.host(ext.host), f"{ext.host}-eth0", outdir / f"policy-icmp-{ext.host}.pcap", direction="in", bpf=TOO_BIG)
        for ext in plan.EXTERNAL_HOSTS
    ]
    outbound = measure.Capture(instance, intf, outdir / "policy-out.pcap", direction="out", bpf="tcp")
    start = time.time()
    duration = 6 * step_s
    clients = [
        measure.iperf_client(ext, plan.JUMBO.address.ip4, plan.IPERF_PORTS[2], seconds=duration, streams=2),
        measure.iperf_client(instance, target, OUTBOUND_PORTS[0], seconds=duration, streams=2),
    ]
    steps = [
        ("instance", plan.JUMBO.host, "off"),
        ("fleet", None, "off"),
        ("fleet", None, "on"),
        ("instance", plan.JUMBO.host, "on"),
    ]
    time.sleep(step_s)
    for area, ident, state in steps:
        argv = [area, "jumbo"] + ([ident] if ident else []) + [state]
        rack.ctl(*argv)
        result.events.append((time.time() - start, f"{area} jumbo {state}"))
        if area == "fleet" and state == "off":
            result.route_during = instance.cmd(f"ip route get {target}").strip()
        time.sleep(step_s)
    for client in clients:
        measure.iperf_result(client, timeout=duration + 60)
    inbound.stop()
    outbound.stop()
    for capture in signals_out:
        capture.stop()
    after = stats(rack)
    result.timeline_in = [(t - start, length - measure.ETHERNET_HEADER) for t, length in measure.pcap_records(inbound.path) if length > 200]
    result.timeline_out = [(t - start, length - measure.ETHERNET_HEADER) for t, length in measure.pcap_records(outbound.path) if length > 200]
    result.icmp_received = count_too_big(instance, inbound.path)
    result.icmp_received_external = sum(count_too_big(capture.node, capture.path) for capture in signals_out)
    result.icmp_generated = _int(after, "icmp_generated") - _int(before, "icmp_generated")
    result.icmp_rate_limited = _drops(after, "ICMP_RATE_LIMITED") - _drops(before, "ICMP_RATE_LIMITED")
    if not result.route_during:
        result.route_during = instance.cmd(f"ip route get {target}").strip()
    flush_path_mtus(instance)
    result.route_after = instance.cmd(f"ip route get {target}").strip()
    return result


def flush_path_mtus(host) -> None:
    """Forget learned path MTUs, as an operator would after turning jumbo back on."""
    host.cmd("ip route flush cache; ip -6 route flush cache")


TOO_BIG = "(icmp and icmp[icmptype] == 3 and icmp[icmpcode] == 4) or (icmp6 and ip6[40] == 2)"


def count_too_big(host, pcap: Path) -> int:
    """ICMPv4 frag-needed and ICMPv6 packet-too-big messages in a capture."""
    out = host.cmd(f"tcpdump -nn -r {pcap} '{TOO_BIG}' 2>/dev/null | wc -l")
    return int(out.strip() or 0)


NF_SECONDS = 4.0


def run_demo(rack: Rack, outdir: Path, seconds: float) -> DemoResults:
    start = time.monotonic()
    headline = []
    for streams in HEADLINE_STREAMS:
        print(f"demo: 0/6 {streams} inbound stream(s) from {plan.EXTERNAL_HOSTS[0].host} to {plan.JUMBO.host} ...", flush=True)
        headline.append(inbound_bulk(rack, plan.JUMBO, outdir, seconds, streams=streams, senders=plan.EXTERNAL_HOSTS[:1], tag=f"-{streams}-streams"))
    print(f"demo: 1/6 inbound bulk to {plan.JUMBO.host} ...", flush=True)
    jumbo = inbound_bulk(rack, plan.JUMBO, outdir, seconds)
    print(f"demo: 1/6 inbound bulk to {plan.LEGACY.host} ...", flush=True)
    legacy = inbound_bulk(rack, plan.LEGACY, outdir, seconds)
    print("demo: 2/6 outbound bulk (and 5/6 ECMP) ...", flush=True)
    outbound = outbound_bulk(rack, outdir, seconds)
    print("demo: 3/6 mice ...", flush=True)
    small = mice(rack)
    print("demo: 4/6 policy flips during traffic ...", flush=True)
    flips = policy(rack, outdir, step_s=max(2.0, seconds / 3))
    nf, background = [], 0.0
    if rack.target == "soft":
        # Last: it turns the instances into routers. BMv2's few Mbit/s would leave the NF's CPU at its background.
        print("demo: 7. a real NF behind the border (nftables NAT, merging against passing) ...", flush=True)
        nf, background = rack_value.nf_short(rack, min(seconds, NF_SECONDS))
    elapsed = time.monotonic() - start
    return DemoResults(jumbo, legacy, outbound, small, flips, elapsed, rack.target, describe_machine(), headline, nf, background)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="make demo", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=8.0, help="length of each bulk phase (default %(default)s)")
    parser.add_argument("--out", type=Path, default=None, help="results directory (default results/demo-<time>)")
    parser.add_argument("--switch", choices=("soft", "bmv2"), help="the switch target (default: $SWITCH, else soft: jumbogate-switch)")
    args = parser.parse_args(argv)
    if args.seconds <= 0:
        parser.error("--seconds must be positive")
    refusal = cannot_start("make demo", args.switch)
    if refusal:
        print(refusal, file=sys.stderr)
        return 1
    outdir = args.out or RESULTS / time.strftime("demo-%Y%m%d-%H%M%S")
    outdir.mkdir(parents=True, exist_ok=True)
    from .report import plots, render

    print("demo: bringing up the emulated rack ...", flush=True)
    try:
        with Rack(switch_target=args.switch) as rack:
            results = run_demo(rack, outdir, args.seconds)
    except (procs.StartError, RuntimeError, subprocess.SubprocessError) as err:
        print(f"make demo: {err}", file=sys.stderr)
        return 1
    text = render(results)
    (outdir / "report.txt").write_text(text)
    (outdir / "results.json").write_text(json.dumps(asdict(results), indent=1))
    images = plots(results, outdir)
    print(text)
    shown = outdir.resolve().relative_to(procs.REPO) if outdir.resolve().is_relative_to(procs.REPO) else outdir
    print(f"\nreport, plots and captures: {shown}/ ({', '.join(p.name for p in images)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
