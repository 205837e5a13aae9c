"""`make value`'s sections on one rack (emulation/rack_value.py), short: the nftables NF behind the border,
the receivers with GRO off and on, UDP with caravans (about a minute with the bring-up).

It asserts what happened, not how fast: the NAT translated the flows, merged
deliveries were larger than 1500 bytes, the NF and the receivers counted
fewer packets per gigabyte with merging, the receiver unpacked caravans.
Speed is make value's to print."""

from __future__ import annotations

import pytest
from emulation import caravan_udp, rack_value
from emulation.rack import Parts, Rack, missing_prerequisites
from emulation.value import RACK_NIC_OPTIONS

pytestmark = [pytest.mark.timeout(600)]

ETHERNET_MTU_FRAME = 1514  # interface byte counters include the Ethernet header


def test_nf_and_receivers_on_one_rack(tmp_path):
    missing = missing_prerequisites(Parts(), "soft")
    if missing:
        pytest.skip("emulation prerequisites missing: " + "; ".join(missing))
    with Rack(switch_target="soft", nic_options=RACK_NIC_OPTIONS) as rack:
        v = rack_value.measure_all(rack, seconds=3.0)
    print("\n" + rack_value.render(v))
    rack_value.plot(v, tmp_path / "value-rack.png")
    assert (tmp_path / "value-rack.png").stat().st_size > 0

    merging, passing = v.nf
    for run, nf in zip(v.nf, rack_value.NFS, strict=True):
        # The NAT translated the flows: conntrack holds them, the DNAT rule saw each connection,
        # and the application behind saw the router's inner address, not the external host.
        assert run.extra["conntrack_entries"] >= 1, run
        assert run.extra["dnat_packets"] >= 1, run
        assert run.extra["app_saw_sources"] == [nf.router_inner_ip], run
        assert run.goodput_bytes > 0
    assert merging.mean_packet > ETHERNET_MTU_FRAME, merging
    assert passing.mean_packet <= ETHERNET_MTU_FRAME, passing
    assert merging.packets_per_gb < passing.packets_per_gb / 2, (merging, passing)

    assert len(v.receivers) == 4
    for run in v.receivers:
        assert run.goodput_bytes > 0 and run.process_s > 0, run
        big = run.extra["mtu"] == 8500
        assert (run.mean_packet > ETHERNET_MTU_FRAME) == big, run
    jumbo_off, legacy_off = v.receivers[:2]
    assert jumbo_off.packets_per_gb < legacy_off.packets_per_gb / 2

    # The controller onloads the UDP flow toward the jumbo instance, the switch steers it, the SmartNIC packs it.
    assert not v.udp_refused, v.udp_refused
    caravans, datagrams = v.udp
    assert caravans.extra["caravans"] > 0 and caravans.extra["malformed"] == 0, caravans
    assert caravans.extra["messages"] > caravans.extra["packets"], caravans  # several datagrams per caravan
    assert caravans.extra["largest"] > 1500
    assert datagrams.extra["caravans"] == 0 and datagrams.extra["messages"] == datagrams.extra["packets"] > 0, datagrams
    assert caravans.packets_per_gb < datagrams.packets_per_gb


def test_the_receiver_unpacks_a_caravan_as_its_datagrams():
    from scapy.layers.inet import UDP
    from scapy.layers.l2 import Ether

    from testlab import nic_packets

    payloads = [bytes([i]) * (100 + 10 * i) for i in range(5)]
    frames = [nic_packets.udp_datagram("203.0.113.11", "10.10.0.10", 40000, 6000, p, ident=7 + i) for i, p in enumerate(payloads)]
    body = bytes(Ether(nic_packets.encode_caravan(frames))[UDP].payload)
    assert caravan_udp.unpack(memoryview(body), len(body)) == (5, sum(map(len, payloads)))
    assert caravan_udp.unpack(memoryview(body), len(body) - 1) == (0, 0)  # a short one is dropped whole
    assert caravan_udp.unpack(memoryview(b"XX" + body[2:]), len(body)) == (0, 0)


def test_the_report_states_the_ratios():
    nf = [
        rack_value.Cost("merging to 8500", seconds=10, goodput_bytes=10**9, packets=120_000, packet_bytes=10**9, softirq_s=0.5),
        rack_value.Cost("passing (1500)", seconds=10, goodput_bytes=10**9, packets=700_000, packet_bytes=10**9, softirq_s=2.5),
    ]
    rx = [
        rack_value.Cost(
            f"r{i}", seconds=10, goodput_bytes=10**9, packets=1000, packet_bytes=10**6, softirq_s=1, process_s=1 + i, extra={"gro": i > 1, "mtu": m}
        )
        for i, m in enumerate((8500, 1500, 8500, 1500))
    ]
    udp = [
        rack_value.Cost("UDP caravans", seconds=10, goodput_bytes=10**9, packets=10, process_s=1),
        rack_value.Cost("UDP datagrams", seconds=10, goodput_bytes=10**9, packets=50, process_s=2),
    ]
    text = rack_value.render(rack_value.RackValue(0.001, {}, nf, rx, udp))
    assert "5.8x fewer packets per GB" in text and "5.0x less CPU per GB" in text
    assert "2.00x what plain datagrams do" in text
