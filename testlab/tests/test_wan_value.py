"""The WAN measurement's short form (make value-wan), checked for what it does, not for speed.

A rack with the border across jumbogate-wanlink (testlab/wan.py): data
crosses intact both ways (byte count and SHA-256), what the instance sends
leaves the border in packets of at most 1500 bytes and what comes in
reaches it merged, and the link delayed and lost as configured. Then the
measurement itself, two seconds a flow: every flow of both racks gives a
rate and the report renders.
"""

from __future__ import annotations

import math
import os

import pytest

from testlab import wan_value
from testlab.nic_harness import NIC_BINARY, run
from testlab.tcp_exchange import capture, exchange
from testlab.wan import CONGESTION, INSTANCE, INTERNET, WANLINK, WanPath

pytestmark = [
    pytest.mark.timeout(240),
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root (network namespaces, veths, DPDK)"),
    pytest.mark.skipif(not (WANLINK.exists() and NIC_BINARY.exists()), reason="jumbogate-wanlink or jumbogate-nic is missing; run 'make native'"),
]

PORT = 5301
MEGABYTES = 12
REPLY_MEGABYTES = 6
# More than the paper's 0.01%: a short transfer must meet some losses.
LOSS = 0.002


def within_binomial(lost: int, received: int, p: float) -> bool:
    mean, sd = received * p, math.sqrt(received * p * (1 - p))
    return abs(lost - mean) < 5 * sd + 1


def test_data_crosses_the_wan_intact_split_and_merged(tmp_path):
    with WanPath(tmp_path, border=True, delay_us=5000, loss=LOSS, seed=7) as path:
        rtt = path.rtt_ms()
        assert 10.0 <= rtt < 10.0 + 25.0, f"ping across 5 ms each way took {rtt} ms"
        capture_file = tmp_path / "wan.pcap"
        # What the border sends toward the Internet, before the link.
        with capture(path.middle, path.wan_iface, capture_file, "tcp", "port", str(PORT), snaplen=96):
            transferred = exchange(path.instance, path.internet, INTERNET, PORT, MEGABYTES, REPLY_MEGABYTES, congestion=CONGESTION, timeout_s=150)
        nic = path.nic.telemetry("/jumbogate/stats")
        link = path.link.stop()

    transferred.assert_intact()

    lengths = [int(n) for n in run("tshark", "-r", str(capture_file), "-Y", f"ip.src == {INSTANCE}", "-T", "fields", "-e", "ip.len", timeout=60).stdout.split()]
    assert len(lengths) > (MEGABYTES << 20) // 1500 // 2, "the capture saw too little of the transfer"
    assert max(lengths) <= 1500, f"a {max(lengths)}-byte packet left the border for the WAN"
    assert nic["split_packets"] > 0, "the instance's large segments were not split"
    assert nic["merged_packets"] > 0, "nothing from the Internet reached the instance merged"

    out, back = link["a_to_b"], link["b_to_a"]
    assert out["largest"] <= 1514 and back["largest"] <= 1514
    assert out["overflow"] == back["overflow"] == 0
    assert out["lost"] > 0 and back["lost"] > 0
    assert within_binomial(out["lost"], out["received"], LOSS), out
    assert within_binomial(back["lost"], back["received"], LOSS), back
    print(
        f"ping {rtt} ms; {len(lengths)} packets from the instance on the WAN, largest {max(lengths)};"
        f" split {nic['split_packets']}, merged {nic['merged_packets']};"
        f" lost {out['lost']} of {out['received']} out, {back['lost']} of {back['received']} in"
    )


def test_the_measurement_runs_both_racks_both_ways(tmp_path):
    lines: list[str] = []
    report = wan_value.run(seconds=2, repeats=1, delay_us=5000, loss=0.0001, seed=1, log_dir=tmp_path, progress=lines.append)
    assert [(f.direction, f.rack) for f in report.flows] == [(d, r) for r in wan_value.RACKS for d in wan_value.DIRECTIONS]
    for flow in report.flows:
        assert not flow.error, flow
        assert flow.mbit > 0 and flow.wan_received > 0 and flow.rtt_ms >= 10.0
        assert flow.wan_overflow == 0 and flow.wan_largest <= 1514
    border = {f.direction: f for f in report.flows if f.rack == "border"}
    plain = {f.direction: f for f in report.flows if f.rack == "plain"}
    assert border["sender"].split_packets > 0 and border["receiver"].merged_packets > 0
    assert plain["sender"].split_packets == plain["receiver"].merged_packets == 0
    text = wan_value.render(report)
    assert "sender (rack -> Internet)" in text and "paper" in text
    print(text)
