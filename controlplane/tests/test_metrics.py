"""The controller's Prometheus endpoint, scraped over HTTP; the alert rules and the dashboard built on it.

The controller here is the real one with its real operator API and
endpoint. Without a switch or a SmartNIC the endpoint still answers, says
both are down, and follows the policy as the operator API changes it. With
stand-ins for both (a SmartNIC control API answering known figures over
gRPC, and a P4Runtime client answering known counters and table entries
over the committed P4Info) every family has samples, so every name the
alert rules, the dashboard and the docs use is checked against a scrape.
The integration tests scrape it during real traffic (test_controller_switch).
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import re
import shutil
import subprocess
import time
import urllib.request
from concurrent import futures
from pathlib import Path

import finsy as fy
import grpc
import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from jumbogate import lab, p4
from jumbogate.config import ConfigError, load_config, parse_config
from jumbogate.v1 import common_pb2, nic_pb2, nic_pb2_grpc, policy_pb2, policy_pb2_grpc

REPO = Path(__file__).resolve().parents[2]
DOCS = REPO / "docs"
OPERATIONS_DOC = DOCS / "operations.md"
PROMETHEUS_DIR = REPO / "deploy" / "prometheus"
RULES = PROMETHEUS_DIR / "jumbogate.rules.yml"
RULES_TESTS = PROMETHEUS_DIR / "jumbogate.rules.test.yml"
DASHBOARD = PROMETHEUS_DIR / "jumbogate-dashboard.json"

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


# ----- stand-ins for the switch and the SmartNIC -----

# A SmartNIC's statistics, every field set and none equal to another, so a
# figure exported from the wrong field shows.
NIC_STATS = nic_pb2.NicStats(
    packets_in=1001,
    bytes_in=1_500_011,
    packets_out=991,
    bytes_out=1_480_013,
    packets_held=17,
    merged_packets=120,
    segments_merged=701,
    conversion_yield=0.875,
    split_packets=11,
    split_segments_out=66,
    caravans_packed=3,
    caravans_unpacked=2,
    drops=[nic_pb2.DropCount(reason="no-mbuf", packets=5), nic_pb2.DropCount(reason="tx-failed", packets=19)],
    merge_delay=[
        nic_pb2.HistogramBucket(le_us=1, count=1),
        nic_pb2.HistogramBucket(le_us=2, count=2),
        nic_pb2.HistogramBucket(le_us=4, count=3),
        nic_pb2.HistogramBucket(le_us=float("inf"), count=4),
    ],
    flows_active=42,
    flows_evicted=9,
    onloads_refused=4,
    pins_expired=6,
    merge_delay_sum_s=0.000123,
    path_mtu_discovery={"rounds_started": 12, "replies_forged": 1, "probe_bytes": 4500, "destinations_now": 8, "learned_now": 7},
    fence=nic_pb2.Fence(election_id_high=3, election_id_low=1234, changes_refused=2),
)


class StandInNic(nic_pb2_grpc.NicServicer):
    """A SmartNIC control API that takes what the controller pushes and answers NIC_STATS."""

    def GetInfo(self, request, context):
        return nic_pb2.NicInfo(boot_id=0x5EED, version="stand-in")

    def Configure(self, request, context):
        return request

    def ListPathMtus(self, request, context):
        return nic_pb2.ListPathMtusResponse()

    def SetPathMtu(self, request, context):
        return nic_pb2.SetPathMtuResponse()

    def DeletePathMtu(self, request, context):
        return nic_pb2.DeletePathMtuResponse()

    def OnloadFlow(self, request, context):
        return nic_pb2.NicFlowResponse()

    def OffloadFlow(self, request, context):
        return nic_pb2.NicFlowResponse()

    def ListLearnedPaths(self, request, context):
        return nic_pb2.ListLearnedPathsResponse(enabled=True)

    def GetStats(self, request, context):
        return NIC_STATS


# Counter indices as the switch reports them: port 1 external, 3 internal, 5 nic.
SWITCH_COUNTERS = {
    p4.names.PORT_RX: {1: (4000, 6_000_000), 3: (300, 450_000)},
    p4.names.PORT_TX: {3: (3500, 5_900_000), 5: (900, 1_200_000)},
    p4.names.DROP_REASONS: {p4.DropReason.MTU_EXCEEDED: (25, 225_000), p4.DropReason.NO_ROUTE: (4, 400)},
    p4.names.PATHS: {p4.Path.MERGE: (2500, 3_700_000), p4.Path.BYPASS: (1500, 2_300_000)},
    p4.names.ICMP_SIGNALS: {0: (20, 11_200), 1: (5, 6_160)},
}
# Table entries the switch holds (not the controller's wish: it reads them back).
SWITCH_TABLE_ENTRIES = {"merge_flows": 3, "routes_v4": 2, "instances_v4": 1}


class StandInSwitch:
    """What a scrape asks of a connected finsy Switch: counter reads and table
    entries, answered from SWITCH_COUNTERS and SWITCH_TABLE_ENTRIES."""

    def __init__(self):
        self.p4info = fy.P4Schema(lab.PIPELINE_512 / "jumbogate.p4info.txtpb")

    async def read(self, queries):
        for query in queries if isinstance(queries, list) else [queries]:
            if isinstance(query, fy.P4CounterEntry):
                for index, (packets, octets) in SWITCH_COUNTERS[query.counter_id].items():
                    yield fy.P4CounterEntry(query.counter_id, index=int(index), data=fy.P4CounterData(packet_count=packets, byte_count=octets))
            elif isinstance(query, fy.P4TableEntry) and not query.table_id:
                for table, count in SWITCH_TABLE_ENTRIES.items():
                    for _ in range(count):
                        yield fy.P4TableEntry(table)


# ----- fixtures -----


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


@pytest.fixture
def border(metrics_api):
    """The endpoint with the stand-in SmartNIC (reached by the controller's own link) and the stand-in switch."""
    api, address = metrics_api
    nic_address = f"127.0.0.1:{lab.free_tcp_port()}"
    nic_server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    nic_pb2_grpc.add_NicServicer_to_server(StandInNic(), nic_server)
    nic_server.add_insecure_port(nic_address)
    nic_server.start()
    controller = api.controller
    controller.nic.address = nic_address
    link = asyncio.run_coroutine_threadsafe(controller.nic.run(), api.loop)
    controller._switch, controller._switch_ready = StandInSwitch(), True
    deadline = time.monotonic() + 10
    while not controller.nic.up:
        assert time.monotonic() < deadline, "the controller never reached the stand-in SmartNIC"
        time.sleep(0.05)
    yield api, address
    controller._switch, controller._switch_ready = None, False
    link.cancel()
    nic_server.stop(0)


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


def test_smartnic_figures_are_exported_as_it_reports_them(border):
    _, address = border
    samples = scrape(address)

    def value(name: str, **labels) -> float:
        return samples[(name, tuple(sorted(labels.items())))]

    assert value("jumbogate_up", part="smartnic") == 1
    for name, field in {
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
        "jumbogate_smartnic_conversion_yield_lifetime_ratio": "conversion_yield",
        "jumbogate_smartnic_flows": "flows_active",
        "jumbogate_smartnic_flows_evicted_total": "flows_evicted",
        "jumbogate_smartnic_onloads_refused_total": "onloads_refused",
        "jumbogate_smartnic_pins_expired_total": "pins_expired",
    }.items():
        assert value(name) == getattr(NIC_STATS, field), name
    for drop in NIC_STATS.drops:
        assert value("jumbogate_smartnic_drop_packets_total", reason=drop.reason) == drop.packets
    fence = NIC_STATS.fence
    assert value("jumbogate_smartnic_fence_election_id_high") == fence.election_id_high
    assert value("jumbogate_smartnic_fence_election_id_low") == fence.election_id_low
    assert value("jumbogate_smartnic_fence_changes_refused_total") == fence.changes_refused
    # Path MTU discovery: levels as gauges, bytes apart, the rest by event.
    discovery = NIC_STATS.path_mtu_discovery
    assert value("jumbogate_smartnic_pmtu_destinations") == discovery["destinations_now"]
    assert value("jumbogate_smartnic_pmtu_destinations_learned") == discovery["learned_now"]
    assert value("jumbogate_smartnic_pmtu_probe_bytes_total") == discovery["probe_bytes"]
    events = {dict(labels)["event"]: v for (name, labels), v in samples.items() if name == "jumbogate_smartnic_pmtu_events_total"}
    assert events == {"rounds_started": discovery["rounds_started"], "replies_forged": discovery["replies_forged"]}
    # The SmartNIC counts per bucket; the histogram is cumulative, in seconds.
    running = 0
    for bucket in NIC_STATS.merge_delay:
        running += bucket.count
        bound = "+Inf" if bucket.le_us == float("inf") else repr(bucket.le_us / 1e6)
        assert value("jumbogate_smartnic_merge_delay_seconds_bucket", le=bound) == running
    assert value("jumbogate_smartnic_merge_delay_seconds_count") == running
    assert value("jumbogate_smartnic_merge_delay_seconds_sum") == pytest.approx(NIC_STATS.merge_delay_sum_s)


def test_switch_figures_and_table_fill_are_exported_as_read(border):
    api, address = border
    samples = scrape(address)
    assert samples[("jumbogate_up", (("part", "switch"),))] == 1
    merge, bypass = SWITCH_COUNTERS[p4.names.PATHS][p4.Path.MERGE], SWITCH_COUNTERS[p4.names.PATHS][p4.Path.BYPASS]
    assert samples[("jumbogate_path_bytes_total", (("path", "merge"),))] == merge[1]
    assert samples[("jumbogate_path_packets_total", (("path", "bypass"),))] == bypass[0]
    packets, octets = SWITCH_COUNTERS[p4.names.DROP_REASONS][p4.DropReason.MTU_EXCEEDED]
    assert samples[("jumbogate_drop_packets_total", (("reason", "MTU_EXCEEDED"),))] == packets
    assert samples[("jumbogate_drop_bytes_total", (("reason", "MTU_EXCEEDED"),))] == octets
    assert samples[("jumbogate_icmp_signals_total", ())] == sum(p for p, _ in SWITCH_COUNTERS[p4.names.ICMP_SIGNALS].values())
    rx = SWITCH_COUNTERS[p4.names.PORT_RX][1]
    assert samples[("jumbogate_port_packets_total", (("direction", "ingress"), ("port", "1"), ("role", "external")))] == rx[0]
    # Every table with match fields, its entries as the switch holds them
    # and its size from the P4Info.
    schema = fy.P4Schema(lab.PIPELINE_512 / "jumbogate.p4info.txtpb")
    tables = {t.alias: t.size for t in schema.tables if t.match_fields}
    entries = {dict(labels)["table"]: v for (name, labels), v in samples.items() if name == "jumbogate_switch_table_entries"}
    sizes = {dict(labels)["table"]: v for (name, labels), v in samples.items() if name == "jumbogate_switch_table_size"}
    assert sizes == tables
    assert entries == {table: SWITCH_TABLE_ENTRIES.get(table, 0) for table in tables}
    assert "merge_flows" in tables and "routes_v4" in tables


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


def test_rules_and_dashboard_query_only_what_a_scrape_exports(border):
    """Every metric the alert rules and the dashboard select has samples in a
    real scrape of the endpoint (or comes from elsewhere, FROM_ELSEWHERE says why)."""
    _, address = border
    _, sampled = queryable_names(scrape_text(address))
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


def test_operations_doc_lists_every_metric_and_the_docs_name_only_exported_ones(border):
    """Both ways: every family a scrape exports is in docs/operations.md, and
    every metric named anywhere in docs/ is exported, but for the old names
    of the renames table."""
    _, address = border
    text = scrape_text(address)
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
