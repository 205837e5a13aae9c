"""jumbogate-nic on one af_packet port: merge, split, caravans, pass-through,
counters and telemetry, checked on the frames that come back."""

from __future__ import annotations

import contextlib
import itertools
import time

import pytest

from jumbogate.v1 import common_pb2, nic_pb2
from testlab.nic_harness import Netns, PacketPort, SinglePort, TapPort, af_packet_vdev, start_nic, tshark_checksums, veth, wait_for, write_pcap
from testlab.nic_packets import (
    CARAVAN_DSCP,
    IP,
    TCP,
    UDP,
    Ether,
    IPv6,
    decode_caravan,
    encode_caravan,
    ip_length,
    parse,
    pattern,
    stream_of,
    tcp_frames_of,
    tcp_packet,
    tcp_segments,
    udp_datagram,
)

pytestmark = pytest.mark.timeout(60)

INTERNET = "203.0.113.5"
INTERNET_V6 = "2001:db8::5"
INSTANCE = "10.10.0.5"
INSTANCE_V6 = "fd00:10::5"
INTERNAL_MTU = 8500


def exchange(wiring, frames: list[bytes], expect: int | None = None) -> list[bytes]:
    """Send frames while the program is paused, so that they reach it in
    one burst, and collect what it sends back."""
    wiring.port.drain()
    with wiring.nic.paused():
        wiring.port.send(frames)
    return wiring.port.receive(count=expect)


def checksums_valid(tmp_path, frames: list[bytes]) -> list[tuple[str, str, str]]:
    """tshark's verdict on every frame: IP and L4 checksum status Good (1)."""
    pcap = tmp_path / "out.pcap"
    write_pcap(pcap, frames)
    rows = tshark_checksums(pcap)
    assert len(rows) == len(frames)
    for ip_len, ip_status, l4_status in rows:
        assert ip_status in ("1", ""), f"IP checksum not good in a {ip_len}-byte packet: {rows}"
        assert l4_status == "1", f"L4 checksum not good in a {ip_len}-byte packet: {rows}"
    return rows


@pytest.mark.parametrize(("src", "dst"), [(INTERNET, INSTANCE), (INTERNET_V6, INSTANCE_V6)], ids=["ipv4", "ipv6"])
def test_inbound_segments_are_merged_to_the_internal_mtu(single_port, tmp_path, src, dst):
    sport = 41000 if ":" not in src else 41001
    frames = tcp_segments(src, dst, sport, 80, count=12, size=1448, seq=1000)
    out = tcp_frames_of(exchange(single_port, frames), sport)

    assert 0 < len(out) < len(frames), f"{len(out)} packets left for 12 segments"
    lengths = [ip_length(p) for p in out]
    assert max(lengths) == INTERNAL_MTU, lengths
    assert all(length <= INTERNAL_MTU for length in lengths)
    assert stream_of(out, 1000) == pattern(0, 12 * 1448)
    checksums_valid(tmp_path, [bytes(p) for p in out])


def test_out_of_order_segments_still_merge_into_one_stream(single_port):
    frames = tcp_segments(INTERNET, INSTANCE, 41002, 80, count=6, size=1448, seq=1000)
    shuffled = [frames[i] for i in (0, 2, 1, 3, 5, 4)]
    out = tcp_frames_of(exchange(single_port, shuffled), 41002)

    assert len(out) < 6
    assert stream_of(out, 1000) == pattern(0, 6 * 1448)


@pytest.mark.parametrize(
    ("src", "dst", "path_mtu", "sport"),
    [
        (INSTANCE, "192.0.2.9", 1500, 42000),
        (INSTANCE, "198.51.100.7", 1400, 42001),
        # Nothing known of an IPv6 path: IPv6's minimum MTU.
        (INSTANCE_V6, "2001:db8::9", 1280, 42002),
    ],
    ids=["default-1500", "prefix-1400", "ipv6-default-1280"],
)
def test_outbound_packets_are_split_to_the_path_mtu(single_port, tmp_path, src, dst, path_mtu, sport):
    frame = tcp_packet(src, dst, sport, 443, size=8000, seq=5000)
    out = tcp_frames_of(exchange(single_port, [frame]), sport)

    headers = 40 if ":" not in src else 60
    lengths = [ip_length(p) for p in out]
    assert len(out) == -(-8000 // (path_mtu - headers)), lengths
    assert max(lengths) <= path_mtu and max(lengths) > path_mtu - 100, lengths
    assert stream_of(out, 5000) == pattern(0, 8000)
    # PSH belongs on the last segment only.
    flags = [str(p[TCP].flags) for p in sorted(out, key=lambda p: p[TCP].seq)]
    assert all("P" not in f for f in flags[:-1]) and "P" in flags[-1], flags
    checksums_valid(tmp_path, [bytes(p) for p in out])


def test_outbound_ipv6_tcp_behind_extension_headers_is_split(single_port, tmp_path):
    """A destination-options header (and a hop-by-hop one) in front of TCP:
    the segments are cut to the path MTU and each keeps the headers.
    Classified by the protocol after the chain; passed on whole, the packet
    would die oversize on the path without a signal."""
    from scapy.layers.inet6 import IPv6ExtHdrDestOpt, IPv6ExtHdrHopByHop

    frame = bytes(
        Ether(src="02:00:00:00:00:01", dst="02:00:00:00:00:02")
        / IPv6(src=INSTANCE_V6, dst="2001:db8::9")
        / IPv6ExtHdrHopByHop()
        / IPv6ExtHdrDestOpt()
        / TCP(sport=42100, dport=443, flags="PA", seq=5000, ack=1, window=502)
        / pattern(0, 6000)
    )
    out = tcp_frames_of(exchange(single_port, [frame]), 42100)
    lengths = [ip_length(p) for p in out]
    assert len(out) == -(-6000 // (1280 - 40 - 16 - 20)) and max(lengths) == 1280, lengths
    assert all(IPv6ExtHdrHopByHop in p and IPv6ExtHdrDestOpt in p for p in out)
    assert stream_of(out, 5000) == pattern(0, 6000)
    checksums_valid(tmp_path, [bytes(p) for p in out])


def test_packets_that_fit_or_are_not_ours_pass_unchanged(single_port):
    unchanged = [
        tcp_packet(INSTANCE, "192.0.2.9", 43000, 443, size=1000),  # outbound, fits
        tcp_packet("192.0.2.1", "192.0.2.2", 43001, 80, size=3000),  # neither side internal
        tcp_packet("192.0.2.1", "192.0.2.2", 43002, 80, size=8960),  # a whole 9000-byte packet
        bytes(Ether(src="02:00:00:00:00:01", dst="ff:ff:ff:ff:ff:ff", type=0x0806) / (b"\x00\x01" + b"\x00" * 40)),
    ]
    out = exchange(single_port, unchanged, expect=len(unchanged))
    assert sorted(out) == sorted(unchanged)
    assert max(len(frame) for frame in out) == 9014


def test_inbound_udp_datagrams_travel_as_a_caravan(single_port, tmp_path):
    datagrams = [udp_datagram(INTERNET, INSTANCE, 44000, 53, pattern(i, 400 + i), ident=300 + i, tos=0) for i in range(6)]
    out = [parse(f) for f in exchange(single_port, datagrams)]
    out = [p for p in out if UDP in p and p[UDP].sport == 44000]

    assert len(out) < len(datagrams)
    caravans = [p for p in out if p[IP].tos >> 2 == CARAVAN_DSCP]
    assert caravans, "no caravan came back"
    carried = []
    for packet in out:
        if packet in caravans:
            _tos, inner = decode_caravan(packet)
            carried += [(ident, payload) for ident, _checksum, payload in inner]
        else:
            carried.append((packet[IP].id, bytes(packet[UDP].payload)))
    assert carried == [(Ether(d)[IP].id, bytes(Ether(d)[UDP].payload)) for d in datagrams]
    checksums_valid(tmp_path, [bytes(p) for p in out])


def test_datagrams_of_several_bursts_share_a_caravan(log_dir):
    """A receive burst seldom holds more than a few datagrams of one flow:
    the caravan hold collects them over bursts, for up to the max delay.
    Sent 2 ms apart, each datagram arrives in a burst of its own, so
    packing burst by burst would send all six back alone."""
    wiring = SinglePort(log_dir, ["--internal-prefix", "10.10.0.0/16", "--caravan-pack", "on", "--delay-max-us", "10000"])
    try:
        datagrams = [udp_datagram(INTERNET, INSTANCE, 44100, 53, pattern(i, 300 + i), ident=400 + i, tos=0) for i in range(6)]
        before = wiring.nic.telemetry("/jumbogate/stats")
        delays_before = wiring.nic.telemetry("/jumbogate/caravan_delay")
        wiring.port.drain()
        for datagram in datagrams:
            wiring.port.send([datagram])
            time.sleep(0.002)
        out = [parse(f) for f in wiring.port.receive()]
        after = wiring.nic.telemetry("/jumbogate/stats")
        delays = wiring.nic.telemetry("/jumbogate/caravan_delay")
    finally:
        wiring.close()
    out = [p for p in out if UDP in p and p[UDP].sport == 44100]
    caravans = [p for p in out if p[IP].tos >> 2 == CARAVAN_DSCP]
    assert caravans and len(out) < len(datagrams), f"{len(out)} packets left for {len(datagrams)} datagrams"
    carried = []
    for packet in out:
        if packet in caravans:
            carried += [(ident, payload) for ident, _checksum, payload in decode_caravan(packet)[1]]
        else:
            carried.append((packet[IP].id, bytes(packet[UDP].payload)))
    assert carried == [(Ether(d)[IP].id, bytes(Ether(d)[UDP].payload)) for d in datagrams]
    assert after["rx_bursts"] - before["rx_bursts"] >= 2
    assert after["caravan_held"] == 0 and after["packets_held"] == 0
    assert after["datagrams_packed"] - before["datagrams_packed"] >= 2
    # Every datagram's wait in the hold is counted, in microseconds: the
    # first waited for the others, sent over 10 ms, so at least 4 ms (the
    # buckets from le_8192 up); the mean stays far from a second (a wait
    # counted in the wrong unit) on a loaded machine.
    waited = {bucket: delays[bucket] - delays_before[bucket] for bucket in delays}
    assert sum(waited.values()) == len(datagrams), waited
    assert waited["le_8192"] + waited["le_16384"] + waited["le_inf"] >= 1, waited
    mean_ns = (after["caravan_hold_delay_sum_ns"] - before["caravan_hold_delay_sum_ns"]) / len(datagrams)
    assert 0 < mean_ns < 100_000_000, mean_ns


def test_outbound_caravans_are_unpacked_byte_for_byte(single_port):
    datagrams = [udp_datagram(INSTANCE, INTERNET, 45000, 4500, pattern(i, 300 + 10 * i), ident=700 + i) for i in range(4)]
    caravan = encode_caravan(datagrams)
    out = exchange(single_port, [caravan], expect=len(datagrams))
    assert out == datagrams


_own_flows = itertools.count()


def own_traffic(wiring) -> None:
    """One of each kind of work (merge, split, caravan out and back), so that a test of the counters needs no earlier test.

    Every call uses flows of its own: the SmartNIC remembers a flow's
    sequence numbers, and a repeated segment is a retransmission, not merged.
    """
    n = next(_own_flows)
    merged = tcp_frames_of(exchange(wiring, tcp_segments(INTERNET, INSTANCE, 41900 + n, 80, count=12, size=1448, seq=1000)), 41900 + n)
    assert 0 < len(merged) < 12
    split = tcp_frames_of(exchange(wiring, [tcp_packet(INSTANCE, "192.0.2.9", 42900 + n, 443, size=8000, seq=5000)]), 42900 + n)
    assert len(split) > 1
    exchange(wiring, [udp_datagram(INTERNET, INSTANCE, 44900 + n, 53, pattern(i, 400 + i), ident=900 + i, tos=0) for i in range(6)])
    datagrams = [udp_datagram(INSTANCE, INTERNET, 45900 + n, 4500, pattern(i, 300 + 10 * i), ident=950 + i) for i in range(4)]
    exchange(wiring, [encode_caravan(datagrams)], expect=len(datagrams))


def test_counters_account_for_every_packet(single_port):
    own_traffic(single_port)
    stats = single_port.nic.telemetry("/jumbogate/stats")
    assert stats["packets_in"] > 0
    assert (
        stats["packets_in"] + stats["packets_created"] == stats["packets_out"] + stats["packets_held"] + stats["packets_dropped"] + stats["packets_absorbed"]
    ), stats
    grpc_stats = single_port.nic.stub().GetStats(nic_pb2.GetNicStatsRequest(), timeout=5)
    assert grpc_stats.packets_in == stats["packets_in"]
    assert grpc_stats.packets_out == stats["packets_out"]
    assert grpc_stats.merged_packets == stats["merged_packets"] > 0
    assert grpc_stats.split_packets == stats["split_packets"] > 0
    assert grpc_stats.caravans_packed > 0 and grpc_stats.caravans_unpacked > 0
    assert 0 < grpc_stats.conversion_yield <= 1
    assert sum(b.count for b in grpc_stats.merge_delay) >= grpc_stats.segments_merged > 0
    assert {d.reason for d in grpc_stats.drops} >= {"tx-failed", "no-mbuf"}


def test_telemetry_serves_info_and_the_delay_histogram(single_port):
    own_traffic(single_port)
    info = single_port.nic.telemetry("/jumbogate/info")
    assert info["workers"] == 1 and info["ports"] == ["net_af_packet0"]
    assert str(info["boot_id"]) in single_port.nic.ready_line
    delay = single_port.nic.telemetry("/jumbogate/delay")
    assert list(delay)[0] == "le_1" and list(delay)[-1] == "le_inf"
    assert sum(delay.values()) > 0


def test_an_idle_worker_sleeps_instead_of_spinning(single_port):
    before = single_port.nic.telemetry("/jumbogate/stats")

    time.sleep(0.5)
    after = single_port.nic.telemetry("/jumbogate/stats")
    polls = after["worker_polls"] - before["worker_polls"]
    sleeps = after["worker_idle_sleeps"] - before["worker_idle_sleeps"]
    # At most one poll per 1..100 us sleep: far below a busy loop's millions.
    assert polls < 200_000 and sleeps >= polls * 0.9, (polls, sleeps)


def test_two_workers_share_the_flows_and_the_accounting(log_dir):
    wiring = SinglePort(log_dir, ["--internal-prefix", "10.10.0.0/16"], workers=2)
    try:
        frames = []
        for sport in range(47000, 47016):
            frames += tcp_segments(INTERNET, INSTANCE, sport, 80, count=6, size=1448, seq=1000)
        out = exchange(wiring, frames)
        assert wiring.nic.stub().GetInfo(nic_pb2.GetInfoRequest(), timeout=5).workers == 2
        for sport in range(47000, 47016):
            assert stream_of(tcp_frames_of(out, sport), 1000) == pattern(0, 6 * 1448)
        assert len(out) < len(frames)
        # The port's hash spread the flows over both workers' queues.
        queues = wiring.nic.telemetry("/ethdev/stats,0")["q_ipackets"][:2]
        assert all(count > 0 for count in queues), queues
        assert wiring.nic.stop() == 0
        totals = wiring.nic.exit_totals
        assert totals["packets_in"] == len(frames) and totals["packets_out"] == len(out)
        assert totals["packets_in"] == totals["packets_out"] + totals["packets_absorbed"]
    finally:
        wiring.close()


def test_an_onloaded_flow_stays_while_the_engine_its_traffic_reaches_holds_it(log_dir):
    """Every worker's engines pin an onloaded flow, but its traffic reaches
    one of them: the other pins lapse after --onload-idle-s. The flow stays
    onloaded (listed, merged with --merge-unknown-flows off) while one
    engine holds it; a flow without traffic lapses everywhere and leaves
    the full list to make room for a new one."""
    options = ["--internal-prefix", "10.10.0.0/16", "--merge-unknown-flows", "off", "--max-onloaded-flows", "2", "--onload-idle-s", "1"]
    wiring = SinglePort(log_dir, options, workers=2)
    try:
        stub = wiring.nic.stub()

        def flow(sport: int) -> nic_pb2.NicFlowRequest:
            return nic_pb2.NicFlowRequest(flow=common_pb2.FiveTuple(src_ip=INTERNET, dst_ip=INSTANCE, protocol=6, src_port=sport, dst_port=80))

        def listed() -> list[int]:
            return sorted(f.flow.src_port for f in stub.ListFlows(nic_pb2.ListNicFlowsRequest(), timeout=5).flows)

        stub.OnloadFlow(flow(49000), timeout=5)
        stub.OnloadFlow(flow(49001), timeout=5)
        # 1.75 s of one segment of 49000 every 0.25 s; none of 49001.
        segments = tcp_segments(INTERNET, INSTANCE, 49000, 80, count=12)
        for segment in segments[:7]:
            wiring.port.send([segment])
            time.sleep(0.25)
        assert listed() == [49000]
        stub.OnloadFlow(flow(49002), timeout=5)
        assert listed() == [49000, 49002]
        # Merged (not onloaded, each segment would leave alone).
        lengths = [ip_length(p) for p in tcp_frames_of(exchange(wiring, segments[7:]), 49000)]
        assert max(lengths) > 1500 and len(lengths) < 5, lengths
    finally:
        wiring.close()


def test_control_changes_reach_the_data_path(single_port):
    """Configure, SetPathMtu and OnloadFlow act on the running workers."""
    stub = single_port.nic.stub()
    flow = common_pb2.FiveTuple(src_ip=INTERNET, dst_ip=INSTANCE, protocol=6, src_port=48000, dst_port=80)
    stub.OnloadFlow(nic_pb2.NicFlowRequest(flow=flow), timeout=5)
    stub.Configure(nic_pb2.NicConfig(internal_mtu=4000), timeout=5)
    stub.SetPathMtu(nic_pb2.SetPathMtuRequest(prefix=common_pb2.Prefix(cidr="192.0.2.0/24"), mtu=1280), timeout=5)
    try:
        merged = tcp_frames_of(exchange(single_port, tcp_segments(INTERNET, INSTANCE, 48000, 80, count=8)), 48000)
        assert max(ip_length(p) for p in merged) == 4000
        assert stream_of(merged, 1000) == pattern(0, 8 * 1448)
        split = tcp_frames_of(exchange(single_port, [tcp_packet(INSTANCE, "192.0.2.9", 48001, 443, size=6000)]), 48001)
        assert max(ip_length(p) for p in split) == 1280
        flows = stub.ListFlows(nic_pb2.ListNicFlowsRequest(), timeout=5).flows
        assert [(f.flow, f.packets_in) for f in flows] == [(flow, 8)]
        # Every packet longer than one segment was merged; a segment whose run's
        # deadline came before its follower arrived (a slow poll) may have left
        # alone, or as the cut-off rest of one, which the wire does not tell apart.
        joined = [p for p in merged if ip_length(p) > 1500]
        assert len(joined) <= flows[0].merged_packets <= len(merged), (flows[0].merged_packets, [ip_length(p) for p in merged])
    finally:
        stub.Configure(nic_pb2.NicConfig(internal_mtu=INTERNAL_MTU), timeout=5)
        stub.DeletePathMtu(nic_pb2.DeletePathMtuRequest(prefix=common_pb2.Prefix(cidr="192.0.2.0/24")), timeout=5)
        stub.OffloadFlow(nic_pb2.NicFlowRequest(flow=flow), timeout=5)


def syn_mss(frame) -> int:
    return dict(parse(frame)[TCP].options)["MSS"]


def test_merge_unknown_flows_off_and_raise_syn_mss_off_change_the_data_path(log_dir, single_port):
    """--merge-unknown-flows off merges only onloaded flows; --raise-syn-mss
    off leaves a SYN's MSS as the Internet host sent it. The default program
    (single_port) does the opposite on the same packets."""
    syn = bytes(
        Ether(src="02:00:00:00:00:01", dst="02:00:00:00:00:02")
        / IP(src=INTERNET, dst=INSTANCE, id=1)
        / TCP(sport=49000, dport=80, flags="S", seq=999, options=[("MSS", 1460)])
    )
    (raised,) = exchange(single_port, [syn])
    assert syn_mss(raised) == INTERNAL_MTU - 40

    strict = SinglePort(log_dir, ["--internal-prefix", "10.10.0.0/16", "--merge-unknown-flows", "off", "--raise-syn-mss", "off"])
    try:
        (kept,) = exchange(strict, [syn])
        assert syn_mss(kept) == 1460
        unknown = tcp_frames_of(exchange(strict, tcp_segments(INTERNET, INSTANCE, 49001, 80, count=8)), 49001)
        assert len(unknown) == 8, "a flow nobody onloaded passes segment by segment"
        flow = common_pb2.FiveTuple(src_ip=INTERNET, dst_ip=INSTANCE, protocol=6, src_port=49001, dst_port=80)
        strict.nic.stub().OnloadFlow(nic_pb2.NicFlowRequest(flow=flow), timeout=5)
        onloaded = tcp_frames_of(exchange(strict, tcp_segments(INTERNET, INSTANCE, 49001, 80, count=8, seq=1000 + 8 * 1448)), 49001)
        assert len(onloaded) < 8
        assert stream_of(onloaded, 1000 + 8 * 1448) == pattern(0, 8 * 1448)
    finally:
        strict.close()


def held_budget_run(log_dir, mbufs: int) -> tuple[list[bytes], dict]:
    """300 flows of 3 segments each, interleaved (every flow's first, then
    every flow's second, ...) so that each flow has a measured rate by its
    second segment and may then wait up to 10 ms for more; returns what came
    back and the stats."""
    wiring = SinglePort(
        log_dir,
        ["--internal-prefix", "10.10.0.0/16", "--mbufs", str(mbufs), "--burst", "128", "--delay-rate-threshold-gbps", "0", "--delay-max-us", "10000"],
    )
    try:
        flows = [tcp_segments(INTERNET, INSTANCE, sport, 80, count=3) for sport in HELD_BUDGET_PORTS]
        frames = [segment for round_ in zip(*flows, strict=True) for segment in round_]
        out = exchange(wiring, frames)
        return out, wiring.nic.telemetry("/jumbogate/stats")
    finally:
        wiring.close()


HELD_BUDGET_PORTS = range(50000, 50300)


def test_held_segments_stay_within_the_buffer_budget(log_dir):
    """With 1024 buffers and bursts of 128 a worker may hold 384 (the rest is
    for the cache and two bursts: af_packet keeps none in its rings), fewer
    than the 600 segments the flows would hold: segments past that pass at
    once, counted, and nothing is lost or refused a buffer. With room to
    spare, the same burst is all held. (900 frames: the port's kernel ring
    holds 1024.)"""
    for mbufs in (1024, 8192):
        out, stats = held_budget_run(log_dir, mbufs)
        by_flow: dict[int, list] = {}
        for packet in map(parse, out):
            by_flow.setdefault(packet[TCP].sport, []).append(packet)
        assert sorted(by_flow) == list(HELD_BUDGET_PORTS)
        assert all(stream_of(packets, 1000) == pattern(0, 3 * 1448) for packets in by_flow.values())
        assert stats["packets_dropped"] == 0 and stats["merge_delayed_flows"] > 0, stats
        if mbufs == 1024:
            assert stats["merge_held_full_passes"] > 0, stats
        else:
            assert stats["merge_held_full_passes"] == 0, stats


@contextlib.contextmanager
def in_and_out(log_dir, eal: list[str], options: list[str], **start):
    """jumbogate-nic in a namespace of its own, joined to a 'switch' namespace
    by two veths: frames sent to `into` reach the program's end jgin0, and
    what it sends out of jgout0 arrives at `out`. `eal` names its ports on
    them. Yields (the program's namespace, the program, into, out)."""
    nic_ns, switch_ns = Netns("jgn"), Netns("jgs")
    nic = into = out = None
    try:
        veth(nic_ns, "jgin0", switch_ns, "jgin1")
        veth(nic_ns, "jgout0", switch_ns, "jgout1")
        nic = start_nic(eal, options, nic_ns, log_dir, **start)
        into, out = PacketPort(switch_ns, "jgin1"), PacketPort(switch_ns, "jgout1")
        yield nic_ns, nic, into, out
    finally:
        for port in (into, out):
            if port:
                port.close()
        if nic:
            nic.stop()
        nic_ns.delete()
        switch_ns.delete()


def test_a_port_that_takes_nothing_costs_counted_drops_not_a_stall(log_dir):
    """A port whose link went down refuses every packet: the worker tries
    again, then drops and counts tx-failed, frees the buffers and keeps
    serving. net_pcap receives on one veth and sends on another, which is
    taken down once the program runs."""
    with in_and_out(
        log_dir,
        ["--vdev=net_pcap0,rx_iface_in=jgin0,tx_iface=jgout0", "-l", "0-1"],
        ["--internal-prefix", "10.10.0.0/16", "--mbuf-size", "12288", "--mbufs", "4096"],
    ) as (nic_ns, nic, port, _out):
        nic_ns.exec("ip", "link", "set", "jgout0", "down")
        before = nic.telemetry("/jumbogate/buffers")
        # Passing packets, and segments that merge: net_pcap takes part of
        # the mbuf dynamic-field space, so merge state lives in the buffers'
        # private area.
        frames = [tcp_packet(INTERNET, "192.0.2.9", 51000 + i, 80, size=200) for i in range(40)]
        frames += tcp_segments(INTERNET, INSTANCE, 51100, 80, count=8)
        port.send(frames)
        stats = wait_for(
            lambda: (s := nic.telemetry("/jumbogate/stats"))["packets_in"] == len(frames) and s["packets_held"] == 0 and s,
            "every packet read and none held",
        )
        assert "merge state is kept in the buffers' private area" in nic.log()
        assert stats["merged_packets"] > 0 and stats["packets_out"] == 0, stats
        # Every packet that reached the port's queue was refused: the 40 that
        # pass and whatever the segments became (merged packets, and a
        # segment that came in a later burst passes alone). The segments
        # merged into others were freed, not dropped.
        assert stats["drop_tx_failed"] == stats["packets_dropped"] >= 40 + stats["merged_packets"], stats
        assert stats["packets_absorbed"] > 0, stats
        assert stats["packets_in"] == stats["packets_dropped"] + stats["packets_absorbed"], stats
        # Still serving, and every buffer is back in the pool.
        assert nic.stub().GetStats(nic_pb2.GetNicStatsRequest(), timeout=5).packets_in == len(frames)
        assert nic.telemetry("/jumbogate/buffers") == before


def test_a_packet_larger_than_the_port_it_leaves_by_is_dropped_and_counted(log_dir):
    """A port of its own smaller MTU (--port-mtu NAME=BYTES) on the side
    merged packets leave by: they are dropped there and counted
    over-port-mtu, never handed to a device that may cut them or lose them
    uncounted; what fits still goes. Port 0 receives, port 1 sends."""
    with in_and_out(
        log_dir,
        [af_packet_vdev(0, "jgin0"), af_packet_vdev(1, "jgout0"), "-l", "0-1"],
        [
            "--internal-prefix",
            "10.10.0.0/16",
            "--mbuf-size",
            "12288",
            "--port-mtu",
            "net_af_packet1=1500",
            "--return-port",
            "net_af_packet0=net_af_packet1",
            "--return-port",
            "net_af_packet1=net_af_packet0",
        ],
        memory_mb=1024,
    ) as (_nic_ns, nic, port_in, port_out):
        passing = [tcp_packet(INTERNET, "192.0.2.9", 52000 + i, 80, size=200) for i in range(10)]
        segments = tcp_segments(INTERNET, INSTANCE, 52100, 80, count=12)
        with nic.paused():
            port_in.send(segments + passing)
        out = port_out.receive()
        stats = wait_for(lambda: (s := nic.telemetry("/jumbogate/stats"))["packets_held"] == 0 and s, "nothing held")
    assert max(len(frame) for frame in out) <= 1514, sorted(len(frame) for frame in out)
    assert {parse(f)[TCP].sport for f in out if TCP in parse(f)} >= {52000 + i for i in range(10)}
    # 12 segments of 1,448 bytes fill two 8,500-byte packets to the byte
    # (8,460 bytes of payload each); the 456 left over fit the port.
    assert stats["merged_packets"] >= 2, stats
    assert stats["drop_over_port_mtu"] == stats["packets_dropped"] == 2, stats
    assert stats["packets_in"] + stats["packets_created"] == stats["packets_out"] + stats["packets_dropped"] + stats["packets_absorbed"], stats


def test_split_segments_leave_a_port_that_takes_only_single_buffers(log_dir):
    """net_pcap sends no buffer chains: every packet is copied into one
    buffer first. A split segment is a header copy and an indirect buffer,
    both from the small header pool; the copy must go to a buffer of the
    received packet's pool, or every split segment is dropped (tx-failed)
    and outbound jumbo traffic dies on such a port."""
    with in_and_out(
        log_dir,
        ["--vdev=net_pcap0,rx_iface_in=jgin0,tx_iface=jgout0", "-l", "0-1"],
        ["--internal-prefix", "10.10.0.0/16", "--mbuf-size", "12288", "--mbufs", "4096"],
    ) as (_nic_ns, nic, port, out):
        assert "cannot send a packet in more than one buffer" in nic.log()
        port.send([tcp_packet(INSTANCE, INTERNET, 40000, 443, size=4000)])
        segments = out.receive(count=3)
        stats = nic.telemetry("/jumbogate/stats")
        assert stats["drop_tx_failed"] == 0 and stats["split_segments_out"] == 3, stats
        assert sorted(len(f) - 14 for f in segments) == [1120, 1500, 1500], "4000 bytes of payload cut to the default path MTU of 1500"


def test_configure_keeps_the_flows_unless_the_table_size_changes(log_dir):
    """Configure used to replace the engines whatever it changed: every flow
    the SmartNIC tracked, with its sequence state and the MSS it learned
    from the handshake, was forgotten. Only a new flow-table size needs new
    engines now (and then the flows it tracked are no longer counted)."""
    wiring = SinglePort(log_dir, ["--internal-prefix", "10.10.0.0/16", "--max-flows", "1024"])
    try:
        stub = wiring.nic.stub()
        # The instance answers with a legacy MSS: the SmartNIC learns that
        # this flow must not be merged.
        syn = (
            Ether(src="02:00:00:00:00:01", dst="02:00:00:00:00:02")
            / IP(src=INTERNET, dst=INSTANCE, id=1)
            / TCP(sport=47000, dport=80, flags="S", seq=999, options=[("MSS", 1460)])
        )
        synack = (
            Ether(src="02:00:00:00:00:02", dst="02:00:00:00:00:01")
            / IP(src=INSTANCE, dst=INTERNET, id=2)
            / TCP(sport=80, dport=47000, flags="SA", seq=5000, ack=1000, options=[("MSS", 1460)])
        )
        exchange(wiring, [bytes(syn)])
        exchange(wiring, [bytes(synack)])
        unmerged = tcp_frames_of(exchange(wiring, tcp_segments(INTERNET, INSTANCE, 47000, 80, count=6, size=1448, seq=1000)), 47000)
        assert len(unmerged) == 6, "a flow whose instance announced a legacy MSS is not merged"

        stub.Configure(nic_pb2.NicConfig(delay=nic_pb2.DelayModel(max_delay_us=300), default_path_mtu_v4=1400, internal_mtu=8000), timeout=5)
        still = tcp_frames_of(exchange(wiring, tcp_segments(INTERNET, INSTANCE, 47000, 80, count=6, size=1448, seq=1000 + 6 * 1448)), 47000)
        assert len(still) == 6, "Configure forgot the MSS the flow's handshake announced"
        merged = tcp_frames_of(exchange(wiring, tcp_segments(INTERNET, INSTANCE, 47001, 80, count=8, size=1448, seq=1000)), 47001)
        assert 0 < len(merged) < 8 and max(len(f) for f in merged) <= 14 + 8000, "the new internal MTU applies"

        tracked = stub.GetStats(nic_pb2.GetNicStatsRequest(), timeout=5).flows_active
        assert tracked >= 2
        stub.Configure(nic_pb2.NicConfig(max_flows=2048), timeout=5)
        assert stub.GetStats(nic_pb2.GetNicStatsRequest(), timeout=5).flows_active == 0, "a new table size starts empty"
    finally:
        wiring.close()


def test_internal_prefixes_change_at_run_time(log_dir):
    """The controller sets the rack's prefixes from rack.yaml: traffic to a
    new prefix is merged from then on, traffic to one taken away passes."""
    wiring = SinglePort(log_dir, ["--internal-prefix", "10.10.0.0/16"])
    try:
        stub = wiring.nic.stub()
        elsewhere = "10.20.0.5"
        before = tcp_frames_of(exchange(wiring, tcp_segments(INTERNET, elsewhere, 48000, 80, count=8, size=1448, seq=1000)), 48000)
        assert len(before) == 8, "outside the rack: passed as it came"
        reply = stub.Configure(nic_pb2.NicConfig(internal_prefixes=[common_pb2.Prefix(cidr="10.20.0.0/16")], set_internal_prefixes=True), timeout=5)
        assert [p.cidr for p in reply.internal_prefixes] == ["10.20.0.0/16"]
        after = tcp_frames_of(exchange(wiring, tcp_segments(INTERNET, elsewhere, 48001, 80, count=8, size=1448, seq=1000)), 48001)
        assert 0 < len(after) < 8, "inside the rack now: merged"
        gone = tcp_frames_of(exchange(wiring, tcp_segments(INTERNET, INSTANCE, 48002, 80, count=8, size=1448, seq=1000)), 48002)
        assert len(gone) == 8, "10.10.0.0/16 is no longer the rack"
    finally:
        wiring.close()


def test_a_port_that_sums_what_it_sends_gets_the_checksums_left_to_it(log_dir, tmp_path):
    """On a port with TX checksum offload (net_tap) the engine leaves the
    IPv4 header and TCP checksums of what it builds to the port (it writes
    the pseudo-header sum and the offload flags): split segments must still
    arrive with every checksum right, as tshark judges them. net_tap in
    DPDK 22.11 carries no frame above 1522 bytes, so the path MTU is made
    small enough to split what it can carry; merged packets take the same
    path in the engine but cannot be shown on this port."""
    wiring = TapPort(log_dir, ["--internal-prefix", "10.10.0.0/16", "--path-mtu", "192.0.2.0/24=600"])
    try:
        assert "checksums of merged and split packets are left to it" in wiring.nic.log()
        sent = tcp_packet(INSTANCE, "192.0.2.9", 46001, 443, size=1400, seq=5000)
        split = tcp_frames_of(exchange(wiring, [sent]), 46001)
        assert len(split) == 3 and all(len(f) <= 14 + 600 for f in split)
        assert stream_of(split, 5000) == pattern(0, 1400)
        checksums_valid(tmp_path, split)
    finally:
        wiring.close()
