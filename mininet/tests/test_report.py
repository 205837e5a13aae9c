"""The demo's report and plots, from made-up results (no rack needed)."""

from emulation import measure
from emulation.demo import BulkResult, DemoResults, MiceResult, PolicyResult
from emulation.report import plots, render


def made_up_results() -> DemoResults:
    jumbo = BulkResult("in", goodput_mbps=80.0, goodput_bytes=80_000_000, arrived_packets=55_000, delivered_packets=9_600, delivered_bytes=81_000_000)
    jumbo.receiver_sizes = [8500] * 9000 + [1500] * 600
    jumbo.per_uplink_packets = {"up1": 27_000, "up2": 28_000}
    legacy = BulkResult("in", goodput_mbps=60.0, goodput_bytes=60_000_000, arrived_packets=41_500, delivered_packets=41_500, delivered_bytes=62_000_000)
    legacy.receiver_sizes = [1500] * 41_500
    out = BulkResult("out", goodput_mbps=50.0, receiver_sizes=[1500] * 100, sender_sizes=[8500] * 20, per_uplink_packets={"up1": 60, "up2": 40})
    policy = PolicyResult(
        events=[(2.0, "instance jumbo off"), (4.0, "fleet jumbo off")], timeline_in=[(0.5, 8500), (2.5, 1500)], icmp_generated=3, icmp_received=3
    )
    mice = MiceResult(exchanges=200, per_uplink_in={"up1": 1010, "up2": 990}, per_uplink_out={"up1": 980, "up2": 1020})
    headline = [
        BulkResult("in", streams_per_host=n, goodput_mbps=700.0 + n, arrived_packets=50_000, delivered_packets=10_000, receiver_sizes=[8500] * 9 + [1500])
        for n in (1, 8)
    ]
    return DemoResults(jumbo, legacy, out, mice, policy, seconds=60, target="soft", machine="2 cores", headline=headline)


def test_report_names_every_phase_and_the_theory():
    text = render(made_up_results())
    for phase in ("1. Inbound", "2. Outbound", "3. Mice", "4. Policy", "5. ECMP", "6. Wire efficiency"):
        assert phase in text
    assert "theory 94.1%" in text and "theory 98.9%" in text
    assert "5.73 arrived per delivered" in text
    assert "200 mice flows, outbound: up1 980, up2 1020" in text


def test_report_leads_with_the_target_and_the_headline_numbers():
    text = render(made_up_results())
    head = text.splitlines()[:12]
    assert "switch target: jumbogate-switch (SWITCH=soft)" in head
    assert "machine: 2 cores" in head
    one_stream = next(line for line in head if "1 stream(s) from ext1" in line)
    # 9 packets of 8448 payload bytes and one of 1448: 98.1% of the payload in jumbo packets.
    assert "701 Mbit/s" in one_stream and "5.00x" in one_stream and "98.1%" in one_stream


def test_plots_are_written(tmp_path):
    paths = plots(made_up_results(), tmp_path)
    assert len(paths) == 4
    assert all(p.exists() and p.stat().st_size > 1000 for p in paths)


def test_pcap_reader(tmp_path):
    import struct

    path = tmp_path / "x.pcap"
    header = struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 96, 1)
    records = b"".join(struct.pack("<IIII", 10, 500_000, 4, length) + b"\0" * 4 for length in (8514, 1514))
    path.write_bytes(header + records)
    assert measure.pcap_records(path) == [(10.5, 8514), (10.5, 1514)]
    assert measure.pcap_frame_lengths(path) == [8514, 1514]
