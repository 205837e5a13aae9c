"""The controller's Prometheus endpoint, scraped over HTTP.

Here no switch or SmartNIC is connected: the endpoint still answers, says
both are down, and follows the policy as the operator API changes it. The
integration tests scrape it during real traffic (test_controller_switch).
"""

from __future__ import annotations

import asyncio
import dataclasses
import re
import urllib.request
from pathlib import Path

import grpc
import pytest
from prometheus_client.parser import text_string_to_metric_families

from jumbogate import lab
from jumbogate.config import ConfigError, load_config, parse_config
from jumbogate.v1 import common_pb2, policy_pb2, policy_pb2_grpc

REPO = Path(__file__).resolve().parents[2]
METRICS_SOURCES = [REPO / "controlplane" / "src" / "jumbogate" / name for name in ("metrics.py", "metrics_server.py")]
OPERATIONS_DOC = REPO / "docs" / "operations.md"


def scrape(address: str) -> dict[tuple[str, tuple], float]:
    """Every sample of one scrape: (name, sorted labels) -> value."""
    with urllib.request.urlopen(f"http://{address}/metrics", timeout=10) as reply:
        text = reply.read().decode()
    return {(s.name, tuple(sorted(s.labels.items()))): s.value for family in text_string_to_metric_families(text) for s in family.samples}


@pytest.fixture
def metrics_api(api):
    address = f"127.0.0.1:{lab.free_tcp_port()}"
    controller = api.controller
    controller.config = dataclasses.replace(controller.config, controller_metrics=address)

    async def start():
        return controller.serve_metrics()

    http = asyncio.run_coroutine_threadsafe(start(), api.loop).result(5)
    yield api, address
    http.shutdown()


def test_scrape_without_switch_or_smartnic_says_both_are_down(metrics_api):
    _, address = metrics_api
    samples = scrape(address)
    assert samples[("jumbogate_scrape_ok", ())] == 1
    assert samples[("jumbogate_up", (("part", "switch"),))] == 0
    assert samples[("jumbogate_up", (("part", "smartnic"),))] == 0
    assert samples[("jumbogate_merge_flows_max", ())] == 4096
    assert not any(name.startswith("jumbogate_smartnic_") for name, _ in samples), "no SmartNIC figures without a SmartNIC"


def test_flow_changes_follow_the_api(metrics_api):
    api, address = metrics_api
    flow = common_pb2.FiveTuple(src_ip="203.0.113.7", dst_ip="10.10.0.10", protocol=6, src_port=40000, dst_port=5201)
    with grpc.insecure_channel(api.address) as channel:
        stub = policy_pb2_grpc.PolicyStub(channel)
        stub.OnloadFlow(policy_pb2.OnloadFlowRequest(flow=flow), timeout=5)
        samples = scrape(address)
        assert samples[("jumbogate_merge_flows", ())] == 1
        assert samples[("jumbogate_merge_flow_changes_total", (("change", "onloaded"),))] == 1
        stub.OffloadFlow(policy_pb2.OffloadFlowRequest(flow=flow), timeout=5)
    samples = scrape(address)
    assert samples[("jumbogate_merge_flows", ())] == 0
    assert samples[("jumbogate_merge_flow_changes_total", (("change", "offloaded"),))] == 1


def test_a_scrape_that_cannot_read_the_figures_says_so(metrics_api, monkeypatch):
    api, address = metrics_api

    async def broken():
        raise RuntimeError("switch read failed")

    monkeypatch.setattr(api.controller, "metrics_snapshot", broken)
    # The collector holds the bound method it was given: rebuild the endpoint
    # around the broken one.
    samples_before = scrape(address)
    assert samples_before[("jumbogate_scrape_ok", ())] == 1
    port = lab.free_tcp_port()
    api.controller.config = dataclasses.replace(api.controller.config, controller_metrics=f"127.0.0.1:{port}")

    async def start():
        return api.controller.serve_metrics()

    http = asyncio.run_coroutine_threadsafe(start(), api.loop).result(5)
    try:
        samples = scrape(f"127.0.0.1:{port}")
    finally:
        http.shutdown()
    # The endpoint's own counters stay; of the border's figures only the verdict.
    assert {key: value for key, value in samples.items() if not key[0].startswith("jumbogate_metrics_")} == {("jumbogate_scrape_ok", ()): 0}


def test_metrics_address_is_checked():
    data = load_config(REPO / "controlplane" / "rack.example.yaml")
    assert data.controller_metrics is None, "off by default"
    import yaml

    raw = yaml.safe_load((REPO / "controlplane" / "rack.example.yaml").read_text())
    raw["controller"]["metrics"] = "127.0.0.1:9464"
    assert parse_config(raw).controller_metrics == "127.0.0.1:9464"
    raw["controller"]["metrics"] = "9464"
    with pytest.raises(ConfigError, match="controller.metrics"):
        parse_config(raw)


def test_operations_doc_lists_every_metric():
    names = {name for source in METRICS_SOURCES for name in re.findall(r'"(jumbogate_[a-z_]+)"', source.read_text())}
    assert len(names) > 20
    doc = OPERATIONS_DOC.read_text()
    missing = sorted(n for n in names if f"`{n}`" not in doc)
    assert not missing, f"docs/operations.md does not list {missing}"
