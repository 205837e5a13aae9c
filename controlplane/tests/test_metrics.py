"""The controller's Prometheus endpoint, scraped over HTTP; the alert rules and the dashboard built on it.

Without a switch or a SmartNIC (the controller's operator API in this
process) the endpoint still answers, says both are down, and follows the
policy as the operator API changes it. With them the border is the real
one, one per module: the jumbogate-controller program connected to a
jumbogate-switch on veths and a jumbogate-nic on the switch's nic port.
Real calls and real frames make their figures non-zero (onloads and a
refused one, the leader fence, merged, bypassed, split and dropped
traffic), and each figure a scrape exports is compared with the part
itself read directly: the SmartNIC's GetStats, and the switch's counters
and table entries read over P4Runtime by a backup client. Every name the
alert rules, the dashboard and the docs use is checked against that scrape.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import os
import re
import shutil
import socket
import subprocess
import urllib.request
from collections import Counter
from pathlib import Path

import finsy as fy
import grpc
import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from jumbogate import p4
from jumbogate.config import ConfigError, load_config, parse_config
from jumbogate.v1 import common_pb2, nic_pb2, nic_pb2_grpc, policy_pb2, policy_pb2_grpc
from testlab import lab

REPO = Path(__file__).resolve().parents[2]
DOCS = REPO / "docs"
OPERATIONS_DOC = DOCS / "operations.md"
PROMETHEUS_DIR = REPO / "deploy" / "prometheus"
RULES = PROMETHEUS_DIR / "jumbogate.rules.yml"
RULES_TESTS = PROMETHEUS_DIR / "jumbogate.rules.test.yml"
DASHBOARD = PROMETHEUS_DIR / "jumbogate-dashboard.json"
P4INFO = lab.PIPELINE_512 / "jumbogate.p4info.txtpb"
VENV_BIN = REPO / ".venv" / "bin"

# Names the rules and the dashboard query that the controller does not
# export, and why they are there.
FROM_ELSEWHERE = {"up": "Prometheus' own health of each scrape target: the rules alert when the controller cannot be scraped at all"}


# ----- scraping -----


def scrape_text(address: str) -> str:
    with urllib.request.urlopen(f"http://{address}/metrics", timeout=10) as reply:
        return reply.read().decode()


def scrape(address: str) -> dict[tuple[str, tuple], float]:
    """Every sample of one scrape: (name, sorted labels) -> value."""
    return {(s.name, tuple(sorted(s.labels.items()))): s.value for family in text_string_to_metric_families(scrape_text(address)) for s in family.samples}


def queryable_names(text: str) -> tuple[set[str], set[str]]:
    """The names a PromQL query can select in one scrape: those declared (a
    family with or without samples) and those with at least one sample."""
    declared, sampled = set(), set()
    for family in text_string_to_metric_families(text):
        # The parser gives a counter's family name without _total and a
        # histogram's without its suffixes; queries use the series' names.
        suffixes = {"counter": ["_total"], "histogram": ["_bucket", "_count", "_sum"]}.get(family.type, [""])
        declared |= {family.name + suffix for suffix in suffixes}
        sampled |= {sample.name for sample in family.samples}
    return declared, sampled


def wait_until(predicate, what: str, timeout: float = 30):
    return lab.wait_until(predicate, what, timeout)


# ----- the endpoint of a controller in this process, without a switch or a SmartNIC -----


def serve_metrics(api, address: str):
    api.controller.config = dataclasses.replace(api.controller.config, controller_metrics=address)

    async def start():
        return api.controller.serve_metrics()

    return asyncio.run_coroutine_threadsafe(start(), api.loop).result(5)


@pytest.fixture
def metrics_api(api):
    address = f"127.0.0.1:{lab.free_tcp_port()}"
    http = serve_metrics(api, address)
    yield api, address
    http.shutdown()


# ----- the real border: switch, SmartNIC and controller -----

PORTS = {1: "external", 2: "external", 3: "internal", 4: "internal", 5: "nic"}
EXTERNAL, WEB_PORT, NIC_PORT = 1, 3, 5
WEB, OUTSIDE = "10.10.0.10", "203.0.113.7"
MERGE_SERVICE = 5201
# mtu.guest_jumbo, which the controller gives the SmartNIC as its internal
# MTU; a packet counts towards the conversion yield from 90% of it (the
# engine's full_packet_ip_length).
INTERNAL_MTU = 8000
FULL_IP_LENGTH = (INTERNAL_MTU * 9 + 9) // 10
# Onloads the SmartNIC takes (per worker and port; it runs one of each):
# the controller's one and one of the test's; the test's second is refused.
MAX_ONLOADED = 2
# The leader election id the test fences the SmartNIC with (HIGH:LOW).
FENCE = (7, 1234)


def rack_config(tmp: Path, veths: list[lab.VethPair], switch: str, nic: str, listen: str, metrics: str) -> Path:
    """A rack on the veths (switch port i is pair i-1), web-1 behind port 3 with a merge service."""

    def hop(port: int, dst_mac: str) -> dict:
        return {"port": port, "src_mac": veths[port - 1].mac(veths[port - 1].a), "dst_mac": dst_mac}

    config = {
        "fleet": {"jumbo": True},
        "mtu": {"internal": 9000, "guest_jumbo": INTERNAL_MTU, "default_external": 1500},
        "switch": {
            "p4runtime": switch,
            "pipeline": str(lab.PIPELINE_512),
            "icmp_rate_pps": 50,
            "ports": [{"port": n, "role": role} for n, role in PORTS.items()] + [{"port": 255, "role": "cpu"}],
        },
        "routes": [
            {"prefix": "0.0.0.0/0", "next_hops": [hop(1, "02:00:00:00:a0:01"), hop(2, "02:00:00:00:b0:01")]},
            {"prefix": "10.10.0.10/32", "next_hops": [hop(3, "02:00:00:00:0a:0a")]},
            {"prefix": "10.10.0.20/32", "next_hops": [hop(4, "02:00:00:00:0a:14")]},
        ],
        "path_mtus": [{"prefix": "198.51.100.0/24", "mtu": 1400}],
        "instances": [{"id": "web-1", "addresses": [WEB], "jumbo": True}, {"id": "legacy-1", "addresses": ["10.10.0.20"], "jumbo": False}],
        "merge_services": [{"prefix": "10.10.0.10/32", "ports": "5201-5210"}],
        # No test burst is an elephant: merge_flows holds what a test onloads, and nothing expires.
        "elephant": {"threshold_bytes": 100_000_000, "idle_timeout_s": 600},
        "smartnic": {"control": nic},
        "controller": {"listen": listen, "metrics": metrics},
    }
    path = tmp / "rack.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


NIC_FILE_PREFIX = f"jgm-nic-{os.getpid()}"


def start_nic(tmp: Path, iface: str, address: str, metrics: str) -> lab.Process:
    args = [
        lab.NIC, "--no-huge", "-m", "512", "--no-pci", "--file-prefix", NIC_FILE_PREFIX, "-l", "0-1",
        f"--vdev=net_af_packet0,iface={iface},blocksz=12288,framesz=12288,framecnt=512,qpairs=1",
        "--", "--grpc", address, "--internal-prefix", "10.10.0.0/24",
        # Injected frames are slow: every flow may wait (up to 1 ms) for its
        # neighbours, so that a burst is merged.
        "--delay-rate-threshold-gbps", "0", "--delay-max-us", "1000",
        "--max-onloaded-flows", str(MAX_ONLOADED),
        # So that discovery's counters are reported (and exported).
        "--pmtu-discovery", "on",
        # Its own endpoint, beside the controller's view of it.
        "--metrics", metrics,
    ]  # fmt: skip
    return lab.start_dpdk_service(args, tmp / "nic.log", address)


ETH_P_ALL = 0x0003


class Port:
    """A raw socket on the host side of a switch port's veth: send frames, collect those the switch sent out of it."""

    def __init__(self, iface: str):
        self.sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16 << 20)
        self.sock.bind((iface, 0))
        self.sock.setblocking(False)

    def send(self, frames: list[bytes]) -> None:
        for frame in frames:
            self.sock.send(frame)

    def arrived(self) -> list[bytes]:
        """What arrived since the last call (not what was sent from here)."""
        frames = []
        with contextlib.suppress(BlockingIOError):
            while True:
                data, address = self.sock.recvfrom(65535)
                if address[2] != socket.PACKET_OUTGOING:
                    frames.append(data)
        return frames

    def close(self) -> None:
        self.sock.close()


@dataclasses.dataclass
class Border:
    switch: lab.SoftSwitch
    nic_address: str
    api: str
    metrics: str
    ports: dict[int, Port]
    # The switch's and the SmartNIC's own endpoints (--metrics): their data paths without the controller.
    switch_metrics: str = ""
    nic_metrics: str = ""
    parts: list = dataclasses.field(default_factory=list)

    def nic_stats(self) -> nic_pb2.NicStats:
        with grpc.insecure_channel(self.nic_address) as channel:
            return nic_pb2_grpc.NicStub(channel).GetStats(nic_pb2.GetNicStatsRequest(), timeout=10)

    def nic_call(self, method: str, request, election_id: tuple[int, int] | None = None):
        metadata = [("jumbogate-election-id", f"{election_id[0]}:{election_id[1]}")] if election_id else None
        with grpc.insecure_channel(self.nic_address) as channel:
            return getattr(nic_pb2_grpc.NicStub(channel), method)(request, timeout=10, metadata=metadata)

    def read_switch(self, *queries) -> list:
        """Entities read by a backup client of its own (a lower election id than the controller's), never through the controller."""

        async def go():
            options = fy.SwitchOptions(p4info=P4INFO, initial_election_id=1)
            async with fy.Switch("metrics-reader", self.switch.grpc_address, options) as reader:
                return [entity async for entity in reader.read(list(queries))]

        return asyncio.run(go())


def border_ready(samples: dict) -> bool:
    """Both parts up, the switch programmed and steering to the SmartNIC (its merge service written)."""
    return (
        samples.get(("jumbogate_up", (("part", "switch"),))) == 1
        and samples.get(("jumbogate_up", (("part", "smartnic"),))) == 1
        and samples.get(("jumbogate_reconcile_runs_total", ()), 0) >= 1
        and samples.get(("jumbogate_switch_table_entries", (("table", "merge_services"),))) == 1
    )


@pytest.fixture(scope="module")
def border(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("metrics-border")
    # Names of this process's own: other suites may run beside this one.
    with lab.veth_pairs(f"jgm{os.getpid() % 100000}", len(PORTS)) as veths:
        addresses = [f"127.0.0.1:{lab.free_tcp_port()}" for _ in range(5)]
        nic_address, api, metrics, switch_metrics, nic_metrics = addresses
        switch = lab.SoftSwitch({n: veths[n - 1].a for n in PORTS}, tmp / "switch.log", options=("--metrics", switch_metrics))
        switch.grpc_address = f"127.0.0.1:{lab.free_tcp_port()}"
        config = rack_config(tmp, veths, switch.grpc_address, nic_address, api, metrics)
        ports = {n: Port(veths[n - 1].b) for n in (EXTERNAL, WEB_PORT)}
        border = Border(switch, nic_address, api, metrics, ports, switch_metrics=switch_metrics, nic_metrics=nic_metrics)
        try:
            border.parts.append(switch.start())
            border.parts.append(start_nic(tmp, veths[NIC_PORT - 1].b, nic_address, nic_metrics))
            controller = lab.Process([VENV_BIN / "jumbogate-controller", "--config", config], tmp / "controller.log").start()
            border.parts.append(controller)
            lab.wait_for_tcp(metrics, 30, process=controller.popen)
            wait_until(lambda: border_ready(scrape(metrics)), "the controller to program the switch and reach the SmartNIC")
            yield border
        finally:
            for part in reversed(border.parts):
                part.stop()
            shutil.rmtree(f"/var/run/dpdk/{NIC_FILE_PREFIX}", ignore_errors=True)
            for port in ports.values():
                port.close()


# ----- frames -----

UPSTREAM_MAC, SWITCH_MAC = "02:00:00:00:a0:01", "02:00:00:00:01:01"


def tcp_frames(src: str, dst: str, sport: int, dport: int, count: int, payload: int = 1460) -> list[bytes]:
    """`count` in-order segments of one TCP flow, `payload` bytes each."""
    from scapy.all import IP, TCP, Ether, Raw

    return [
        bytes(
            Ether(src=UPSTREAM_MAC, dst=SWITCH_MAC)
            / IP(src=src, dst=dst, flags="DF", ttl=64)
            / TCP(sport=sport, dport=dport, flags="A", seq=1000 + i * payload, ack=1, window=65535)
            / Raw(bytes([i % 251]) * payload)
        )
        for i in range(count)
    ]


def udp_frame(src: str, dst: str, payload: int) -> bytes:
    from scapy.all import IP, UDP, Ether, Raw

    return bytes(Ether(src=UPSTREAM_MAC, dst=SWITCH_MAC) / IP(src=src, dst=dst, flags="DF", ttl=64) / UDP(sport=4000, dport=4000) / Raw(b"u" * payload))


def ip_lengths_to(frames: list[bytes], dport: int) -> list[int]:
    """IP total lengths of the IPv4 TCP frames to `dport`."""
    lengths = []
    for frame in frames:
        if frame[12:14] == b"\x08\x00" and frame[23] == 6:
            header = (frame[14] & 0x0F) * 4
            if int.from_bytes(frame[14 + header + 2 : 14 + header + 4], "big") == dport:
                lengths.append(int.from_bytes(frame[16:18], "big"))
    return lengths


MERGE_BURST = 24
SEGMENT_PAYLOAD = 1460


def merge_burst(border: Border, sport: int) -> list[int]:
    """A burst of a merge-service flow, in from the Internet; the IP lengths of what reaches web-1, once all its payload did."""
    web = border.ports[WEB_PORT]
    web.arrived()
    border.ports[EXTERNAL].send(tcp_frames(OUTSIDE, WEB, sport, MERGE_SERVICE, MERGE_BURST))
    lengths: list[int] = []

    def whole() -> bool:
        lengths.extend(ip_lengths_to(web.arrived(), MERGE_SERVICE))
        return sum(length - 40 for length in lengths) >= MERGE_BURST * SEGMENT_PAYLOAD

    wait_until(whole, "the burst's payload to reach web-1", timeout=20)
    assert sum(length - 40 for length in lengths) == MERGE_BURST * SEGMENT_PAYLOAD, lengths
    return lengths


def merged_burst(border: Border, sport: int) -> list[int]:
    """merge_burst until some of it left merged. Whether neighbours meet
    inside the SmartNIC's delay bound depends on how fast frames come on a
    loaded machine, so a burst that trickled is sent again as a fresh flow
    (at most three times)."""
    tried = []
    for attempt in range(3):
        lengths = merge_burst(border, sport + attempt)
        if max(lengths) >= FULL_IP_LENGTH:
            return lengths
        tried.append(lengths)
    raise AssertionError(f"no burst of three left in a full packet: {tried}")


def five_tuple(sport: int) -> common_pb2.FiveTuple:
    return common_pb2.FiveTuple(src_ip=OUTSIDE, dst_ip=WEB, protocol=6, src_port=sport, dst_port=MERGE_SERVICE)


@pytest.fixture(scope="module")
def busy_border(border):
    """The border after real calls and real traffic gave its figures values:
    an operator onload through the controller (a merge_flows entry and a
    SmartNIC onload), the SmartNIC's onload budget spent and one onload
    refused past it; merged, bypassed, split and dropped traffic; and last,
    the leader fence (after it the controller's own changes would be refused)."""
    with grpc.insecure_channel(border.api) as channel:
        policy_pb2_grpc.PolicyStub(channel).OnloadFlow(policy_pb2.OnloadFlowRequest(flow=five_tuple(42000), idle_timeout_s=600), timeout=10)
    onloaded = nic_pb2.ListNicFlowsRequest()
    wait_until(lambda: len(border.nic_call("ListFlows", onloaded).flows) == 1, "the controller's onload on the SmartNIC")
    border.nic_call("OnloadFlow", nic_pb2.NicFlowRequest(flow=five_tuple(42001)))
    with pytest.raises(grpc.RpcError) as refused:
        border.nic_call("OnloadFlow", nic_pb2.NicFlowRequest(flow=five_tuple(42002)))
    assert refused.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    merged_burst(border, sport=43000)
    # Past the merge path (no merge service on port 80).
    border.ports[EXTERNAL].send(tcp_frames(OUTSIDE, WEB, 43100, 80, 3))
    # Out of web-1: a TCP packet above the path MTU (split by the SmartNIC)
    # and a UDP one (dropped by the switch, which signals the sender).
    border.ports[WEB_PORT].send(tcp_frames(WEB, OUTSIDE, MERGE_SERVICE, 43200, 1, payload=6000) + [udp_frame(WEB, OUTSIDE, 3000)])
    wait_until(lambda: border.nic_stats().split_packets >= 1, "the SmartNIC to split the outbound packet")
    path = nic_pb2.SetPathMtuRequest(prefix=common_pb2.Prefix(cidr="198.51.100.0/24"), mtu=1400)
    border.nic_call("SetPathMtu", path, election_id=FENCE)
    with pytest.raises(grpc.RpcError) as fenced:
        border.nic_call("SetPathMtu", path, election_id=(FENCE[0], FENCE[1] - 1))
    assert fenced.value.code() == grpc.StatusCode.PERMISSION_DENIED
    return border


def steady(read_parts, address: str, attempts: int = 10) -> tuple[dict, object]:
    """A scrape and the parts read directly around it, taken when the two
    direct reads agree (nothing moved meanwhile: a figure that differs from
    the scrape then was exported wrong). The parts may still be settling
    (discovery rounds, flows ageing): a read that moved is taken again."""
    for _ in range(attempts):
        before = read_parts()
        samples = scrape(address)
        if read_parts() == before:
            return samples, before
    raise AssertionError(f"the parts' figures moved during each of {attempts} scrapes")


# ----- the endpoint -----


def test_scrape_without_switch_or_smartnic_says_both_are_down(metrics_api):
    _, address = metrics_api
    text = scrape_text(address)
    samples = scrape(address)
    assert samples[("jumbogate_scrape_ok", ())] == 1
    assert samples[("jumbogate_up", (("part", "switch"),))] == 0
    assert samples[("jumbogate_up", (("part", "smartnic"),))] == 0
    assert samples[("jumbogate_merge_flows_max", ())] == 4096
    assert not any(name.startswith("jumbogate_smartnic_") for name, _ in samples), "no SmartNIC figures without a SmartNIC"
    # Zeros would read as a counter reset: a part that is down has its
    # families declared and empty.
    for name in ("jumbogate_port_packets_total", "jumbogate_path_packets_total", "jumbogate_icmp_signals_total", "jumbogate_switch_table_entries"):
        assert f"# TYPE {name} " in text
        assert not any(key[0] == name for key in samples), f"{name} has samples without a switch"
    assert "# TYPE jumbogate_smartnic_packets_in_total counter" in text


def test_flow_changes_follow_the_api(metrics_api):
    api, address = metrics_api
    flow = common_pb2.FiveTuple(src_ip="203.0.113.7", dst_ip="10.10.0.10", protocol=6, src_port=40000, dst_port=5201)
    with grpc.insecure_channel(api.address) as channel:
        stub = policy_pb2_grpc.PolicyStub(channel)
        stub.OnloadFlow(policy_pb2.OnloadFlowRequest(flow=flow), timeout=5)
        samples = scrape(address)
        assert samples[("jumbogate_merge_flows", ())] == 1
        assert samples[("jumbogate_merge_flows_onloaded_total", ())] == 1
        assert samples[("jumbogate_merge_flows_removed_total", (("reason", "offloaded"),))] == 0
        stub.OffloadFlow(policy_pb2.OffloadFlowRequest(flow=flow), timeout=5)
    samples = scrape(address)
    assert samples[("jumbogate_merge_flows", ())] == 0
    assert samples[("jumbogate_merge_flows_removed_total", (("reason", "offloaded"),))] == 1
    assert samples[("jumbogate_merge_flows_onloaded_total", ())] == 1


def test_refusals_are_counted_apart_from_what_they_refuse(metrics_api):
    """Operator onloads past a full merge path, digests shed and refused, and a
    refused reload: each a family of its own, never a total beside its parts."""
    api, address = metrics_api
    controller = api.controller
    limits = dataclasses.replace(controller.config.elephant, max_flows=1)
    controller.state.config = dataclasses.replace(controller.state.config, elephant=limits)
    controller.config = dataclasses.replace(controller.config, elephant=limits)
    flows = [common_pb2.FiveTuple(src_ip="203.0.113.7", dst_ip="10.10.0.10", protocol=6, src_port=40000 + n, dst_port=5201) for n in range(2)]
    with grpc.insecure_channel(api.address) as channel:
        stub = policy_pb2_grpc.PolicyStub(channel)
        stub.OnloadFlow(policy_pb2.OnloadFlowRequest(flow=flows[0]), timeout=5)
        with pytest.raises(grpc.RpcError) as refused:
            stub.OnloadFlow(policy_pb2.OnloadFlowRequest(flow=flows[1]), timeout=5)
    assert refused.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    controller.digests_received, controller.digests_shed, controller.digests_refused = 10, 3, 2
    controller.state.refuse_reload("a test's refusal")
    samples = scrape(address)
    assert samples[("jumbogate_merge_onloads_refused_total", (("reason", "merge_path_full"),))] == 1
    assert samples[("jumbogate_merge_onloads_refused_total", (("reason", "elephant_rate_limited"),))] == 0
    assert samples[("jumbogate_merge_flows_onloaded_total", ())] == 1
    assert samples[("jumbogate_merge_flows", ())] == 1
    assert samples[("jumbogate_digests_received_total", ())] == 10
    assert samples[("jumbogate_digests_discarded_total", (("reason", "shed"),))] == 3
    assert samples[("jumbogate_digests_discarded_total", (("reason", "refused"),))] == 2
    assert samples[("jumbogate_config_reloads_total", (("outcome", "refused"),))] == 1
    assert samples[("jumbogate_config_reloads_total", (("outcome", "applied"),))] == 0


# Families of one SmartNIC figure each, and the NicStats field they export.
NIC_FIELDS = {
    "jumbogate_smartnic_packets_in_total": "packets_in",
    "jumbogate_smartnic_bytes_in_total": "bytes_in",
    "jumbogate_smartnic_packets_out_total": "packets_out",
    "jumbogate_smartnic_bytes_out_total": "bytes_out",
    "jumbogate_smartnic_held_packets": "packets_held",
    "jumbogate_smartnic_merged_packets_total": "merged_packets",
    "jumbogate_smartnic_segments_merged_total": "segments_merged",
    "jumbogate_smartnic_split_packets_total": "split_packets",
    "jumbogate_smartnic_split_segments_total": "split_segments_out",
    "jumbogate_smartnic_caravans_packed_total": "caravans_packed",
    "jumbogate_smartnic_caravans_unpacked_total": "caravans_unpacked",
    "jumbogate_smartnic_tcp_payload_in_bytes_total": "tcp_payload_bytes_in",
    "jumbogate_smartnic_tcp_payload_full_bytes_total": "tcp_payload_bytes_full",
    "jumbogate_smartnic_flows": "flows_active",
    "jumbogate_smartnic_flows_evicted_total": "flows_evicted",
    "jumbogate_smartnic_onloads_refused_total": "onloads_refused",
    "jumbogate_smartnic_pins_expired_total": "pins_expired",
}


def test_smartnic_figures_are_exported_as_it_reports_them(busy_border):
    samples, nic = steady(busy_border.nic_stats, busy_border.metrics)

    def value(name: str, **labels) -> float:
        return samples[(name, tuple(sorted(labels.items())))]

    # What the calls and the traffic made of the figures: a figure exported
    # from another field, or not at all, cannot pass for these.
    assert nic.onloads_refused == 1 and nic.merged_packets >= 1 and nic.split_packets == 1
    assert nic.segments_merged > nic.merged_packets and nic.tcp_payload_bytes_in > nic.tcp_payload_bytes_full > 0
    assert (nic.fence.election_id_high, nic.fence.election_id_low, nic.fence.changes_refused) == (*FENCE, 1)
    assert value("jumbogate_up", part="smartnic") == 1
    for name, field in NIC_FIELDS.items():
        assert value(name) == getattr(nic, field), name
    drops = {dict(labels)["reason"]: v for (name, labels), v in samples.items() if name == "jumbogate_smartnic_drop_packets_total"}
    assert drops == {drop.reason: drop.packets for drop in nic.drops} and drops
    assert value("jumbogate_smartnic_fence_election_id_high") == FENCE[0]
    assert value("jumbogate_smartnic_fence_election_id_low") == FENCE[1]
    assert value("jumbogate_smartnic_fence_changes_refused_total") == 1
    # Path MTU discovery: levels as gauges, bytes apart, the rest by event.
    discovery = dict(nic.path_mtu_discovery)
    assert "rounds_started" in discovery and "destinations_now" in discovery
    assert value("jumbogate_smartnic_pmtu_destinations") == discovery.pop("destinations_now")
    assert value("jumbogate_smartnic_pmtu_destinations_learned") == discovery.pop("learned_now")
    assert value("jumbogate_smartnic_pmtu_probe_bytes_total") == discovery.pop("probe_bytes")
    events = {dict(labels)["event"]: v for (name, labels), v in samples.items() if name == "jumbogate_smartnic_pmtu_events_total"}
    assert events == discovery
    # The SmartNIC counts per bucket; the histogram is cumulative, in seconds.
    running = 0
    for bucket in nic.merge_delay:
        running += bucket.count
        bound = "+Inf" if bucket.le_us == float("inf") else repr(bucket.le_us / 1e6)
        assert value("jumbogate_smartnic_merge_delay_seconds_bucket", le=bound) == running
    assert running >= nic.segments_merged
    assert value("jumbogate_smartnic_merge_delay_seconds_count") == running
    assert value("jumbogate_smartnic_merge_delay_seconds_sum") == pytest.approx(nic.merge_delay_sum_s)


def test_the_yield_counters_move_with_merged_traffic(border):
    """Per burst of a merge-service flow, the conversion yield's denominator
    grows by all its payload and its numerator by the payload of the packets
    that reached web-1 at 90% of the internal MTU or more: a ratio of their
    rates is the yield over a window. Until a burst left merged (at most three)."""

    def counters() -> tuple[float, float]:
        samples = scrape(border.metrics)
        return samples[("jumbogate_smartnic_tcp_payload_in_bytes_total", ())], samples[("jumbogate_smartnic_tcp_payload_full_bytes_total", ())]

    tried = []
    for attempt in range(3):
        in_before, full_before = counters()
        lengths = merge_burst(border, sport=44000 + attempt)
        in_after, full_after = counters()
        assert in_after - in_before == MERGE_BURST * SEGMENT_PAYLOAD
        assert full_after - full_before == sum(length - 40 for length in lengths if length >= FULL_IP_LENGTH), lengths
        if max(lengths) >= FULL_IP_LENGTH:
            return
        tried.append(lengths)
    raise AssertionError(f"no burst of three left in a full packet: {tried}")


def read_switch_figures(border: Border) -> tuple[dict, Counter]:
    """Every counter (name -> index -> (packets, bytes)) and the entries each table holds, read from the switch."""
    counters: dict[str, dict[int, tuple[int, int]]] = {}
    entries: Counter[str] = Counter()
    for entry in border.read_switch(fy.P4TableEntry(), *[fy.P4CounterEntry(name) for name in p4.names.COUNTERS]):
        if isinstance(entry, fy.P4TableEntry):
            entries[entry.table_id] += 1
        elif entry.data is not None:
            # The P4Info's full name ends in the alias it was read by.
            name = next(name for name in p4.names.COUNTERS if entry.counter_id.endswith(name))
            counters.setdefault(name, {})[entry.index] = (entry.data.packet_count, entry.data.byte_count)
    return counters, entries


def test_switch_figures_and_table_fill_are_exported_as_read(busy_border):
    samples, (counters, held) = steady(lambda: read_switch_figures(busy_border), busy_border.metrics)
    assert samples[("jumbogate_up", (("part", "switch"),))] == 1

    def count(counter: str, index: int) -> tuple[int, int]:
        return counters.get(counter, {}).get(int(index), (0, 0))

    # What the traffic made of the counters, so that a figure from the wrong index shows.
    assert all(count(p4.names.PATHS, path)[0] > 0 for path in (p4.Path.MERGE, p4.Path.BYPASS))
    assert count(p4.names.PATHS, p4.Path.MERGE) != count(p4.names.PATHS, p4.Path.BYPASS)
    assert count(p4.names.DROP_REASONS, p4.DropReason.MTU_EXCEEDED)[0] >= 1
    assert sum(packets for packets, _ in counters[p4.names.ICMP_SIGNALS].values()) >= 1
    for port, role in PORTS.items():
        for direction, counter in (("ingress", p4.names.PORT_RX), ("egress", p4.names.PORT_TX)):
            labels = (("direction", direction), ("port", str(port)), ("role", role))
            packets, octets = count(counter, port)
            assert (samples[("jumbogate_port_packets_total", labels)], samples[("jumbogate_port_bytes_total", labels)]) == (packets, octets), labels
    for path in (p4.Path.MERGE, p4.Path.BYPASS):
        labels = (("path", path.name.lower()),)
        assert (samples[("jumbogate_path_packets_total", labels)], samples[("jumbogate_path_bytes_total", labels)]) == count(p4.names.PATHS, path)
    for reason in p4.DropReason:
        if reason.value:
            labels = (("reason", reason.name),)
            assert (samples[("jumbogate_drop_packets_total", labels)], samples[("jumbogate_drop_bytes_total", labels)]) == count(p4.names.DROP_REASONS, reason)
    assert samples[("jumbogate_icmp_signals_total", ())] == sum(packets for packets, _ in counters[p4.names.ICMP_SIGNALS].values())
    # Every table with match fields, its entries as the switch holds them
    # and its size from the P4Info.
    schema = fy.P4Schema(P4INFO)
    tables = {t.alias: t.size for t in schema.tables if t.match_fields}
    entries = {dict(labels)["table"]: v for (name, labels), v in samples.items() if name == "jumbogate_switch_table_entries"}
    sizes = {dict(labels)["table"]: v for (name, labels), v in samples.items() if name == "jumbogate_switch_table_size"}
    assert sizes == tables
    assert entries == {table: held[table] for table in tables}
    # The rack's three IPv4 routes, its merge service, and the operator's onload.
    assert (entries["routes_v4"], entries["merge_services"], entries["merge_flows"]) == (3, 1, 1)


def test_the_programs_own_endpoints_agree_with_what_they_report(busy_border):
    """jumbogate-nic --metrics against its GetStats, and jumbogate-switch --metrics against its counters read over
    P4Runtime: the same figures without the controller in between."""
    samples, nic = steady(busy_border.nic_stats, busy_border.nic_metrics)
    assert samples[("jumbogate_nic_stats_ok", ())] == 1
    own = {
        ("jumbogate_nic_packets_total", (("direction", "in"),)): nic.packets_in,
        ("jumbogate_nic_packets_total", (("direction", "out"),)): nic.packets_out,
        ("jumbogate_nic_bytes_total", (("direction", "in"),)): nic.bytes_in,
        ("jumbogate_nic_bytes_total", (("direction", "out"),)): nic.bytes_out,
        ("jumbogate_nic_held_packets", ()): nic.packets_held,
        ("jumbogate_nic_merged_packets_total", ()): nic.merged_packets,
        ("jumbogate_nic_segments_merged_total", ()): nic.segments_merged,
        ("jumbogate_nic_split_packets_total", ()): nic.split_packets,
        ("jumbogate_nic_split_segments_total", ()): nic.split_segments_out,
        ("jumbogate_nic_flows", ()): nic.flows_active,
        ("jumbogate_nic_onloads_refused_total", ()): nic.onloads_refused,
    }
    assert {key: samples[key] for key in own} == own
    assert nic.merged_packets >= 1 and nic.split_packets == 1 and nic.onloads_refused == 1
    drops = {dict(labels)["reason"]: v for (name, labels), v in samples.items() if name == "jumbogate_nic_drop_packets_total"}
    assert drops == {drop.reason: drop.packets for drop in nic.drops} and drops
    samples, (counters, _) = steady(lambda: read_switch_figures(busy_border), busy_border.switch_metrics)
    for port in PORTS:
        for direction, counter in (("rx", p4.names.PORT_RX), ("tx", p4.names.PORT_TX)):
            packets, octets = counters.get(counter, {}).get(port, (0, 0))
            labels = [(k, v) for k, v in samples if k == "jumbogate_switch_port_packets_total" and ("port", str(port)) in v and ("direction", direction) in v]
            (key,) = labels
            assert (samples[key], samples[("jumbogate_switch_port_bytes_total", key[1])]) == (packets, octets), key
    for reason in p4.DropReason:
        if reason.value:
            packets, octets = counters.get(p4.names.DROP_REASONS, {}).get(int(reason), (0, 0))
            labels = (("reason", reason.name.lower()),)
            assert (samples[("jumbogate_switch_drop_packets_total", labels)], samples[("jumbogate_switch_drop_bytes_total", labels)]) == (packets, octets)
    assert samples[("jumbogate_switch_drop_packets_total", (("reason", "mtu_exceeded"),))] >= 1


def test_a_scrape_that_cannot_read_the_figures_says_so(metrics_api, monkeypatch):
    api, address = metrics_api

    async def broken():
        raise RuntimeError("switch read failed")

    monkeypatch.setattr(api.controller, "metrics_snapshot", broken)
    # The collector holds the bound method it was given: rebuild the endpoint
    # around the broken one.
    samples_before = scrape(address)
    assert samples_before[("jumbogate_scrape_ok", ())] == 1
    http = serve_metrics(api, f"127.0.0.1:{lab.free_tcp_port()}")
    try:
        samples = scrape(api.controller.config.controller_metrics)
    finally:
        http.shutdown()
    # The endpoint's own counters stay; of the border's figures only the verdict.
    assert {key: value for key, value in samples.items() if not key[0].startswith("jumbogate_metrics_")} == {("jumbogate_scrape_ok", ()): 0}


def test_metrics_address_is_checked():
    data = load_config(REPO / "controlplane" / "rack.example.yaml")
    assert data.controller_metrics is None, "off by default"
    raw = yaml.safe_load((REPO / "controlplane" / "rack.example.yaml").read_text())
    raw["controller"]["metrics"] = "127.0.0.1:9464"
    assert parse_config(raw).controller_metrics == "127.0.0.1:9464"
    raw["controller"]["metrics"] = "9464"
    with pytest.raises(ConfigError, match="controller.metrics"):
        parse_config(raw)


# ----- names: the exporter, the docs, the rules and the dashboard agree -----

# PromQL's keywords, and the clauses that list label names rather than metrics.
PROMQL_KEYWORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "and", "or", "unless", "bool", "offset", "inf", "nan"}
LABEL_LIST = re.compile(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)")


def promql_metric_names(expr: str) -> set[str]:
    """The metric names a PromQL expression selects (Grafana's variables allowed)."""
    expr = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)
    expr = re.sub(r"label_values\(\s*([^,()]*),[^)]*\)", r"\1", expr)
    expr = re.sub(r"\{[^}]*\}", "", expr)  # label matchers
    expr = re.sub(r"\[[^\]]*\]", "", expr)  # ranges, $__rate_interval
    expr = LABEL_LIST.sub("", expr)
    names = re.findall(r"(?<![\w.$])([A-Za-z_:][\w:]*)(?!\s*\(|[\w:])", expr)
    return {name for name in names if name.lower() not in PROMQL_KEYWORDS}


def test_the_promql_name_parser():
    expr = 'sum by (instance, le) (rate(a_total{x="y(z)", i=~"$instance"}[$__rate_interval])) / on() group_left(t) b > bool 1e3 unless histogram_quantile(0.9, c_bucket)'
    assert promql_metric_names(expr) == {"a_total", "b", "c_bucket"}
    assert promql_metric_names("label_values(jumbogate_up, instance)") == {"jumbogate_up"}
    assert promql_metric_names("increase(d_total[1h] offset 5m) > 0 and e") == {"d_total", "e"}


def rule_expressions() -> list[str]:
    return [rule["expr"] for group in yaml.safe_load(RULES.read_text())["groups"] for rule in group["rules"]]


def dashboard_expressions() -> list[str]:
    found = []

    def walk(node):
        if isinstance(node, dict):
            for key, value in node.items():
                if key in ("expr", "definition") and isinstance(value, str):
                    found.append(value)
                else:
                    walk(value)
        elif isinstance(node, list):
            for item in node:
                walk(item)

    walk(json.loads(DASHBOARD.read_text()))
    return found


def test_rules_and_dashboard_query_only_what_a_scrape_exports(busy_border):
    """Every metric the alert rules and the dashboard select has samples in a
    real scrape of the endpoint (or comes from elsewhere, FROM_ELSEWHERE says why)."""
    _, sampled = queryable_names(scrape_text(busy_border.metrics))
    for source, expressions in (("the rules", rule_expressions()), ("the dashboard", dashboard_expressions())):
        assert len(expressions) >= 14, f"{source}: too few expressions found"
        used = set().union(*map(promql_metric_names, expressions))
        missing = sorted(used - sampled - set(FROM_ELSEWHERE))
        assert not missing, f"{source} query names the endpoint does not export: {missing}"
    # And the dashboard shows every series the endpoint exports.
    shown = set().union(*map(promql_metric_names, dashboard_expressions()))
    assert sorted(sampled - shown) == [], "the dashboard shows nothing of these"


# A metric's name anywhere in the docs' text, in a query or not; not a
# telemetry path such as /jumbogate_switch/stats.
DOC_METRIC = re.compile(r"(?<![/\w])(jumbogate_[a-z0-9_]+)(?![/\w])")
RENAME_ROW = re.compile(r"^\|\s*`(jumbogate_[a-z0-9_]+)(?:\{[^`]*\})?`[^|\n]*\|", re.M)


def test_operations_doc_lists_every_metric_and_the_docs_name_only_exported_ones(busy_border):
    """Both ways: every family a scrape exports is in docs/operations.md, and
    every metric named anywhere in docs/ is exported, but for the old names
    of the renames table. The scrapes: the controller's, and the switch's and the SmartNIC's own."""
    text = scrape_text(busy_border.metrics) + scrape_text(busy_border.switch_metrics) + scrape_text(busy_border.nic_metrics)
    declared, sampled = queryable_names(text)
    families = {f.name + ("_total" if f.type == "counter" else "") for f in text_string_to_metric_families(text)}
    assert len(families) > 40
    operations = OPERATIONS_DOC.read_text()
    renames = operations.split("## Renamed metrics", 1)[1].split("\n## ", 1)[0]
    old_names = set(RENAME_ROW.findall(renames))
    assert len(old_names) >= 4, "the renames table is gone"
    assert not old_names & declared, f"renamed away but still exported: {sorted(old_names & declared)}"
    undocumented = sorted(n for n in families if f"`{n}`" not in operations.replace(renames, ""))
    assert not undocumented, f"docs/operations.md does not list {undocumented}"
    for doc in sorted(DOCS.glob("*.md")):
        body = doc.read_text()
        if doc == OPERATIONS_DOC:
            body = body.replace(renames, "")
        unknown = sorted(set(DOC_METRIC.findall(body)) - declared - families)
        assert not unknown, f"{doc.relative_to(REPO)} names metrics the endpoint does not export: {unknown}"


# ----- promtool -----


def promtool(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["promtool", *args], capture_output=True, text=True, timeout=60, cwd=PROMETHEUS_DIR)


@pytest.fixture(scope="module")
def has_promtool(request):
    if shutil.which("promtool") is None:
        why = "promtool is not on PATH (Debian's prometheus package; make setup installs it)"
        plugins = request.config.pluginmanager
        reporter, capture = plugins.get_plugin("terminalreporter"), plugins.get_plugin("capturemanager")
        if reporter and capture:
            # Once per run, past the capture that holds a test's output.
            with capture.global_and_fixture_disabled():
                reporter.write_line(f"SKIPPED: the alert rules' promtool tests; {why}", yellow=True, bold=True)
        pytest.skip(why)


def test_the_alert_rules_pass_promtool_check(has_promtool):
    done = promtool("check", "rules", RULES.name)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"SUCCESS: {len(rule_expressions())} rules found" in done.stdout
    done = promtool("check", "config", "prometheus.yml")
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_alert_rules_fire_on_recorded_series(has_promtool):
    tests = yaml.safe_load(RULES_TESTS.read_text())
    tested = {case["alertname"] for group in tests["tests"] for case in group["alert_rule_test"] if case.get("exp_alerts")}
    alerts = {rule["alert"] for group in yaml.safe_load(RULES.read_text())["groups"] for rule in group["rules"]}
    assert tested == alerts, f"alerts never seen firing in {RULES_TESTS.name}: {sorted(alerts - tested)}"
    done = promtool("test", "rules", RULES_TESTS.name)
    assert done.returncode == 0 and "SUCCESS" in done.stdout, done.stdout + done.stderr
