"""A real `make demo` run, short: every phase runs on jumbogate-switch and
the results directory holds the report, the plots and results.json."""

import json

import pytest
from emulation import demo, plan
from emulation.rack import Parts, missing_prerequisites

pytestmark = [pytest.mark.timeout(600)]


def test_a_short_demo_runs_every_phase_and_writes_its_results(tmp_path, capsys):
    missing = missing_prerequisites(Parts(), "soft")
    if missing:
        pytest.skip("emulation prerequisites missing: " + "; ".join(missing))
    out = tmp_path / "demo"
    assert demo.main(["--seconds", "1", "--switch", "soft", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    for phase in ("0/6", "1/6", "2/6", "3/6", "4/6"):
        assert f"demo: {phase}" in printed, printed
    assert f"report, plots and captures: {out}/" in printed

    results = json.loads((out / "results.json").read_text())
    assert results["target"] == "soft"
    assert [h["streams_per_host"] for h in results["headline"]] == [1, 8]
    jumbo, legacy, outbound = results["inbound_jumbo"], results["inbound_legacy"], results["outbound"]
    # The jumbo instance receives merged packets, the 1500 one never does.
    assert jumbo["goodput_bytes"] > 0 and jumbo["nic_merged"] > 0 and max(jumbo["receiver_sizes"]) > 1500
    assert legacy["goodput_bytes"] > 0 and legacy["nic_merged"] == 0 and max(legacy["receiver_sizes"]) <= plan.MTU_EXTERNAL
    # The jumbo instance sends large segments; the SmartNIC splits them.
    assert max(outbound["sender_sizes"]) > plan.MTU_EXTERNAL and outbound["nic_segments_out"] > 0
    assert results["mice"]["exchanges"] == 200 and results["mice"]["failed"] == 0
    assert [label for _, label in results["policy"]["events"]] == ["instance jumbo off", "fleet jumbo off", "fleet jumbo on", "instance jumbo on"]
    policy = results["policy"]
    # Every signal the switch generated arrived: at the instance, or at an external sender through the SmartNIC.
    assert policy["icmp_generated"] > 0
    assert policy["icmp_generated"] == policy["icmp_received"] + policy["icmp_received_external"], policy

    # Phase 7: the nftables NF behind the border translated both flows; the merged ones reached it larger than 1500.
    merging, passing = results["nf"]
    assert [merging["label"], passing["label"]] == ["merging to 8500", "passing (1500)"]
    assert merging["extra"]["conntrack_entries"] > 0 and passing["extra"]["conntrack_entries"] > 0
    assert merging["packet_bytes"] / merging["packets"] > 1514 >= passing["packet_bytes"] / passing["packets"]

    report = (out / "report.txt").read_text()
    assert "7. A real NF behind the border" in report
    assert "Headline" in report and "to jumbo1 (MTU 8500)" in report and "conversion yield" in report
    assert sorted(p.name for p in out.glob("*.png")) == ["ecmp-and-efficiency.png", "packet-sizes.png", "packets-and-goodput.png", "policy-timeline.png"]
