"""The real controller with the real SmartNIC on the switch's nic port.

Merge services steer through jumbogate-nic and leave merged; an outage
bypasses it and its return restores it; elephants are onloaded and
expire; metrics move with the traffic. One switch, controller and
SmartNIC per target (controller_rig.py).
"""

from __future__ import annotations

import json
import os
import subprocess
import threading
import time
import urllib.request

import finsy as fy
import grpc
import pytest
from controller_rig import NIC_PORT, VENV_BIN, Rig, ip, start_nic, wait_until

from jumbogate.v1 import nic_pb2, nic_pb2_grpc
from testlab import lab

pytestmark = [pytest.mark.timeout(300)]


MERGE_SERVICE_PORT = 5201


ELEPHANT_PORT = 7000


def tcp_burst(dport: int, count: int, sport: int = 40000, payload: int = 1460):
    """`count` in-order full-size segments of one external TCP flow toward web-1."""
    from scapy.all import IP, TCP, Ether, Raw

    return [
        Ether(src="02:00:00:00:a0:01", dst="02:00:00:00:01:01")
        / IP(src="203.0.113.7", dst="10.10.0.10", flags="DF", ttl=64)
        / TCP(sport=sport, dport=dport, flags="A", seq=1000 + i * payload, ack=1, window=65535)
        / Raw(bytes([i % 251]) * payload)
        for i in range(count)
    ]


def send_and_capture(rig: Rig, veths: list[lab.VethPair], packets, *, dport: int) -> list[int]:
    """Inject on external port 1 and return the IP lengths that reach web-1's port (3)."""
    from scapy.all import IP, TCP, AsyncSniffer, conf, sendp

    # Scapy caches interface indexes; each target's rig makes its veths
    # anew under the same names.
    conf.ifaces.reload()
    sniffer = AsyncSniffer(iface=veths[2].b, lfilter=lambda p: TCP in p and p[TCP].dport == dport, store=True)
    sniffer.start()
    time.sleep(0.3)
    sendp(packets, iface=veths[0].b, verbose=False)
    time.sleep(1.5)
    captured = sniffer.stop()
    return [p[IP].len for p in captured]


def nic_packets_in(rig: Rig) -> int:
    """The SmartNIC's own counter, read from it directly (not through the controller's cached view)."""

    with grpc.insecure_channel(rig.config.smartnic_control) as channel:
        return nic_pb2_grpc.NicStub(channel).GetStats(nic_pb2.GetNicStatsRequest(), timeout=10).packets_in


def assert_merged_through_nic(rig: Rig, veths: list[lab.VethPair], sport: int) -> None:
    """Segments of a merge-service flow pass through the SmartNIC, whole, and some leave merged.

    Whether neighbours meet inside the SmartNIC's delay bound depends on how
    fast the injector and BMv2 run on a loaded machine, so a burst that
    happened to trickle is tried again with a fresh flow (at most three times).
    """
    attempts = []
    for attempt in range(3):
        before = nic_packets_in(rig)
        sizes = send_and_capture(rig, veths, tcp_burst(MERGE_SERVICE_PORT, 24, sport=sport + attempt), dport=MERGE_SERVICE_PORT)
        assert sum(s - 40 for s in sizes) == 24 * 1460, f"byte count changed: {sizes}"
        assert nic_packets_in(rig) - before >= 24, "the segments did not take the merge path"
        attempts.append(sizes)
        if max(sizes) > 1500:
            return
    raise AssertionError(f"nothing was merged in three bursts: {attempts}")


def test_merge_services_follow_the_config_in_order(nic_rig):
    rig, _ = nic_rig
    services = {(m, p) for m, _, _, p, d in rig.table("merge_services") if not d}
    assert services == {
        ((("dst_addr", (ip("10.10.0.10"), 0xFFFFFFFF)), ("dst_port", (5201, 5210)), ("ip_version", 4)), 1),
        ((("dst_addr", (ip("fd00:10::10"), 2**128 - 1)), ("dst_port", (443, 443)), ("ip_version", 6)), 2),
    }
    assert rig.table("nic_port") == {((), "set_nic_port", (("port", NIC_PORT),), 0, True)}


def test_merge_service_traffic_is_merged_by_the_smartnic(nic_rig):
    rig, veths = nic_rig
    assert_merged_through_nic(rig, veths, sport=40000)


class Watch:
    """`jumbogatectl watch` running beside a test, its lines collected as they come."""

    def __init__(self, rig: Rig):
        import threading

        self.lines: list[str] = []
        self.process = subprocess.Popen(
            [VENV_BIN / "jumbogatectl", "--controller", rig.api, "watch", "--duration", "120"],
            stdout=subprocess.PIPE,
            text=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        self._reader = threading.Thread(target=lambda: self.lines.extend(iter(self.process.stdout.readline, "")), daemon=True)
        self._reader.start()

    def subscribed(self, rig: Rig) -> None:
        """Make events (an instance flag flipped on and off) until the watch shows one."""

        def shown() -> bool:
            rig.ctl("instance", "jumbo", "legacy-1", "on")
            rig.ctl("instance", "jumbo", "legacy-1", "off")
            return any("instance_changed" in line for line in self.lines)

        wait_until(shown, 15, "the watch to show events", interval=0.3)

    def stop(self) -> str:
        self.process.terminate()
        self.process.wait(timeout=10)
        self._reader.join(timeout=10)
        return "".join(self.lines)


def test_smartnic_outage_bypasses_and_restores(nic_rig):
    """The outage is seen by `watch` as nic_down, the merge path is taken off
    the switch and traffic bypasses; a restarted SmartNIC is nic_up and merges."""
    rig, veths = nic_rig
    watch = Watch(rig)
    try:
        watch.subscribed(rig)
        outage_and_restart(rig, veths)
    finally:
        events = watch.stop()
    down, up = events.find("nic_down"), events.rfind("nic_up")
    assert 0 <= down < up, f"watch did not show nic_down then nic_up:\n{events}"


def outage_and_restart(rig: Rig, veths: list[lab.VethPair]) -> None:
    rig.nic.stop(sig=9)
    wait_until(lambda: not rig.stats()["nic"]["reachable"], 10, "the controller to notice the SmartNIC outage")
    wait_until(lambda: rig.desired_vs_switch(nic_up=False)[0].empty, 5, "merge-path entries removed from the switch")
    sizes = send_and_capture(rig, veths, tcp_burst(MERGE_SERVICE_PORT, 8, sport=40005), dport=MERGE_SERVICE_PORT)
    assert sizes == [1500] * 8, f"during the outage traffic must bypass, whole and unmerged: {sizes}"

    rig.nic = start_nic(rig, veths)
    wait_until(lambda: rig.stats()["nic"]["reachable"], 15, "the controller to see the restarted SmartNIC")
    wait_until(lambda: rig.desired_vs_switch(nic_up=True)[0].empty, 5, "merge-path entries restored")
    assert_merged_through_nic(rig, veths, sport=40010)


def elephant_entries(rig: Rig) -> list:
    return [m for m, _, _, _, d in rig.table("merge_flows") if not d and dict(m).get("dst_port") == ELEPHANT_PORT]


def test_metrics_move_with_the_traffic(nic_rig):
    """Prometheus scrapes before and after a merge-service burst: the switch's
    port and path counters and the SmartNIC's counters grow by what was sent."""
    from prometheus_client.parser import text_string_to_metric_families

    def scrape() -> dict:
        with urllib.request.urlopen(f"http://{rig.metrics}/metrics", timeout=10) as reply:
            text = reply.read().decode()
        return {(s.name, tuple(sorted(s.labels.items()))): s.value for f in text_string_to_metric_families(text) for s in f.samples}

    rig, veths = nic_rig
    before = scrape()
    assert before[("jumbogate_up", (("part", "switch"),))] == 1 and before[("jumbogate_up", (("part", "smartnic"),))] == 1
    assert_merged_through_nic(rig, veths, sport=40300)
    after = scrape()

    def grew(name: str, **labels) -> float:
        key = (name, tuple(sorted(labels.items())))
        return after[key] - before.get(key, 0)

    assert grew("jumbogate_port_packets_total", port="1", role="external", direction="ingress") >= 24
    assert grew("jumbogate_port_bytes_total", port="1", role="external", direction="ingress") >= 24 * 1514
    assert grew("jumbogate_path_packets_total", path="merge") >= 24
    assert grew("jumbogate_path_packets_total", path="bypass") == 0, "a merge-service burst took the bypass"
    assert grew("jumbogate_smartnic_packets_in_total") >= 24
    assert grew("jumbogate_smartnic_merged_packets_total") >= 1
    waits = grew("jumbogate_smartnic_merge_delay_seconds_count")
    assert waits >= 1 and waits == grew("jumbogate_smartnic_merge_delay_seconds_bucket", le="+Inf")
    # Each wait is under the SmartNIC's delay bound (10 ms at most).
    assert 0 < grew("jumbogate_smartnic_merge_delay_seconds_sum") <= waits * 0.01
    assert grew("jumbogate_path_bytes_total", path="merge") >= 24 * 1500
    # Table fill, read from the switch: the merge services the rack config
    # names, against the table's size in the P4Info.
    assert after[("jumbogate_switch_table_entries", (("table", "merge_services"),))] == 2
    size = fy.P4Schema(lab.PIPELINE_512 / "jumbogate.p4info.txtpb").tables["merge_services"].size
    assert after[("jumbogate_switch_table_size", (("table", "merge_services"),))] == size
    assert after[("jumbogate_smartnic_fence_changes_refused_total", ())] == 0


def test_elephant_is_onloaded_then_expires(nic_rig):
    rig, veths = nic_rig
    watch = subprocess.Popen([VENV_BIN / "jumbogatectl", "--controller", rig.api, "--json", "watch", "--duration", "40"], stdout=subprocess.PIPE, text=True)
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(watch.stdout), daemon=True)
    reader.start()
    try:
        # The watch must be subscribed before the burst: jumbogatectl takes a while to start under
        # load, and events published before it subscribed never reach it. A reload is an event of its own.
        def subscribed():
            rig.ctl("config", "reload")
            return any("EVENT_KIND_CONFIG_RELOADED" in line for line in list(lines))

        wait_until(subscribed, 30, "the watch to see an event")
        # 30 segments of 1500 bytes cross the 20000-byte threshold in one epoch.
        send_and_capture(rig, veths, tcp_burst(ELEPHANT_PORT, 30, sport=41000), dport=ELEPHANT_PORT)
        flows = wait_until(lambda: json.loads(rig.ctl("--json", "flows", "list").stdout).get("flows"), 10, "the elephant to be onloaded")
        assert flows[0]["flow"]["dst_port"] == ELEPHANT_PORT and flows[0]["origin"] == "FLOW_ORIGIN_ELEPHANT"
        # First the entry on the switch, then its expiry: a test that only
        # waited for "no entry" would pass if it had never been written.
        wait_until(lambda: elephant_entries(rig), 5, "the merge_flows entry on the switch")
        # No more traffic: the switch reports the entry idle after 4 s (idle_timeout_s: long enough for a
        # reader to see the entry first on a loaded machine; with 2 s it was sometimes gone before).
        wait_until(lambda: not json.loads(rig.ctl("--json", "flows", "list").stdout).get("flows"), 20, "the flow to expire")
        wait_until(lambda: not elephant_entries(rig), 5, "the merge_flows entry removed")
    finally:
        watch.terminate()
        watch.wait(timeout=10)
        reader.join(10)
    events = "".join(lines)
    assert "EVENT_KIND_ELEPHANT_DETECTED" in events and "EVENT_KIND_FLOW_ONLOADED" in events and "EVENT_KIND_FLOW_EXPIRED" in events


def merge_flow_ports(rig) -> set[tuple[int, int]]:
    """(src_port, dst_port) of every merge_flows entry on the switch."""
    return {(dict(m)["src_port"], dict(m)["dst_port"]) for m, _, _, _, default in rig.table("merge_flows") if not default}


def wait_for_switch(rig, predicate, what: str) -> None:
    """Wait for reconcile runs until the switch satisfies `predicate`."""
    wait_until(lambda: predicate(merge_flow_ports(rig)), 30, what, interval=0.2)


def test_restart_adopts_the_merge_flows_on_the_switch(nic_rig):
    rig, _ = nic_rig
    """A restarted controller keeps the merge flows it finds on the switch
    (origin "adopted"), writing nothing; the flow never leaves the switch. A
    UDP flow, which only an operator lists, comes back as the operator's, so
    that no elephant evicts it."""
    assert rig.ctl("flows", "onload", "203.0.113.7:41000", "10.10.0.10:5201", "--idle", "600").returncode == 0
    assert rig.ctl("flows", "onload", "203.0.113.7:41002", "10.10.0.10:5201", "--proto", "udp", "--idle", "600").returncode == 0
    try:
        wait_for_switch(rig, lambda ports: {(41000, 5201), (41002, 5201)} <= ports, "the onloaded flows on the switch")
        rig.controller.stop()
        rig.start_controller()
        totals = rig.wait_for_reconcile()["reconcile"]
        assert (int(totals["inserted"]), int(totals["deleted"])) == (0, 0), totals
        flows = json.loads(rig.ctl("--json", "flows", "list").stdout)["flows"]
        origins = sorted((f["flow"]["src_port"], f["flow"]["protocol"], f["origin"]) for f in flows)
        assert origins == [(41000, 6, "FLOW_ORIGIN_ADOPTED"), (41002, 17, "FLOW_ORIGIN_OPERATOR")]
        assert {(41000, 5201), (41002, 5201)} <= merge_flow_ports(rig)
    finally:
        rig.ctl("flows", "offload", "203.0.113.7:41000", "10.10.0.10:5201")
        rig.ctl("flows", "offload", "203.0.113.7:41002", "10.10.0.10:5201", "--proto", "udp")
    wait_for_switch(rig, lambda ports: not {(41000, 5201), (41002, 5201)} & ports, "the offloaded flows gone")


def test_instance_flag_off_offloads_its_flows(nic_rig):
    rig, _ = nic_rig
    """Turning an instance's jumbo flag off takes its flows off the merge
    path, on the switch too; turning it on again does not bring them back."""
    assert rig.ctl("flows", "onload", "203.0.113.7:41001", "10.10.0.10:5201").returncode == 0
    wait_for_switch(rig, lambda ports: (41001, 5201) in ports, "the onloaded flow on the switch")
    assert rig.ctl("instance", "jumbo", "web-1", "off").returncode == 0
    try:
        wait_for_switch(rig, lambda ports: (41001, 5201) not in ports, "the flow off the switch")
        assert json.loads(rig.ctl("--json", "flows", "list").stdout).get("flows", []) == []
    finally:
        assert rig.ctl("instance", "jumbo", "web-1", "on").returncode == 0
    assert (41001, 5201) not in merge_flow_ports(rig)
