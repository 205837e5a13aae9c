"""Steering: merge path (SmartNIC) vs bypass."""

import time

import packets as pk
from base import (
    INSTANCE_V4,
    INSTANCE_V6,
    INTERNET_V4,
    INTERNET_V6,
    PORT_EXTERNAL,
    PORT_INTERNAL,
    PORT_NIC,
    TO_INTERNET,
    TO_RACK,
    VTEP_LOCAL,
    VTEP_REMOTE,
    JumbogateTest,
)
from ptf import testutils
from ptf.testutils import group
from scapy.layers.inet import IP
from scapy.packet import Raw

from jumbogate.flow import UDP
from jumbogate.p4 import FiveTuple, Path, names
from jumbogate.p4 import entries as e
from jumbogate.p4.stats import PacketsBytes

OTHER_INSTANCE_V4 = "10.1.0.6"  # listed, but not jumbo


class _SteeringTest(JumbogateTest):
    def setUp(self):
        super().setUp()
        self.add_routes()
        self.modify(e.nic_port(PORT_NIC))
        self.jumbo(True, instances=[INSTANCE_V4, INSTANCE_V6], off_instances=[OTHER_INSTANCE_V4])

    def expect_path(self, in_port, pkt, path, label):
        """Send; expect the packet at the NIC unchanged (merge) or routed (bypass)."""
        before = self.stats()
        self.send(in_port, pkt)
        if path == Path.MERGE:
            self.expect(pkt, PORT_NIC)
        else:
            self.expect_routed(pkt, TO_RACK if in_port == PORT_EXTERNAL else TO_INTERNET)
        self.expect_nothing()
        delta = self.stats() - before
        self.assertEqual(list(delta.paths), [path], label)
        self.assertEqual(delta.paths[path], PacketsBytes(1, len(pkt)), label)


@group("steering")
class MergeFlowsTable(_SteeringTest):
    def runTest(self):
        flow = FiveTuple(INTERNET_V4, INSTANCE_V4, 40000, 443)
        self.insert(e.merge_flow(flow), e.merge_flow(FiveTuple(INTERNET_V6, INSTANCE_V6, 40000, 443)))
        self.expect_path(PORT_EXTERNAL, pk.tcp_packet(INTERNET_V4, INSTANCE_V4, 1400, sport=40000, dport=443), Path.MERGE, "listed flow")
        self.expect_path(PORT_EXTERNAL, pk.tcp_packet(INTERNET_V6, INSTANCE_V6, 1400, sport=40000, dport=443), Path.MERGE, "listed IPv6 flow")
        self.expect_path(PORT_EXTERNAL, pk.tcp_packet(INTERNET_V4, INSTANCE_V4, 1400, sport=40001, dport=443), Path.BYPASS, "other source port")
        # UDP with the same ports is not a listed (TCP) flow.
        self.expect_path(PORT_EXTERNAL, pk.udp_packet(INTERNET_V4, INSTANCE_V4, 1400, sport=40000, dport=443), Path.BYPASS, "udp")


@group("steering")
class UdpMergeFlowsToNic(_SteeringTest):
    """A listed UDP flow from outside toward a jumbo instance goes to the SmartNIC, which packs it into caravans;
    nothing else of UDP is steered: not unlisted, not toward a non-jumbo instance, not outbound, and not inside
    Geneve (merge_flows matches the inner flow, and no tunnel endpoint unpacks a caravan of tunnel packets)."""

    def runTest(self):
        listed = [
            FiveTuple(INTERNET_V4, INSTANCE_V4, 40000, 5201, protocol=UDP),
            FiveTuple(INTERNET_V6, INSTANCE_V6, 40000, 5201, protocol=UDP),
            FiveTuple(INTERNET_V4, OTHER_INSTANCE_V4, 40000, 5201, protocol=UDP),
            FiveTuple(INSTANCE_V4, INTERNET_V4, 5201, 40000, protocol=UDP),
        ]
        self.insert(*(e.merge_flow(flow) for flow in listed))
        inner = pk.udp_packet(INTERNET_V4, INSTANCE_V4, 1400, sport=40000, dport=5201)
        cases = [
            (PORT_EXTERNAL, pk.udp_packet(INTERNET_V4, INSTANCE_V4, 1400, sport=40000, dport=5201), Path.MERGE, "listed"),
            (PORT_EXTERNAL, pk.udp_packet(INTERNET_V6, INSTANCE_V6, 1400, sport=40000, dport=5201), Path.MERGE, "listed IPv6"),
            (PORT_EXTERNAL, pk.udp_packet(INTERNET_V4, INSTANCE_V4, 1400, sport=40001, dport=5201), Path.BYPASS, "other source port"),
            (PORT_EXTERNAL, pk.tcp_packet(INTERNET_V4, INSTANCE_V4, 1400, sport=40000, dport=5201), Path.BYPASS, "tcp, same ports"),
            (PORT_EXTERNAL, pk.udp_packet(INTERNET_V4, OTHER_INSTANCE_V4, 1400, sport=40000, dport=5201), Path.BYPASS, "listed, non-jumbo instance"),
            (PORT_INTERNAL, pk.udp_packet(INSTANCE_V4, INTERNET_V4, 1400, sport=5201, dport=40000), Path.BYPASS, "listed, outbound"),
            (PORT_EXTERNAL, pk.geneve_packet(VTEP_REMOTE, VTEP_LOCAL, inner, option_words=2), Path.BYPASS, "listed, in Geneve"),
        ]
        for port, pkt, path, label in cases:
            self.expect_path(port, pkt, path, label)


@group("steering")
class MergeFlowIdleTimeout(_SteeringTest):
    """merge_flows entries carry an idle timeout; the switch reports idle ones."""

    def runTest(self):
        self.sw.start_idle_timeouts()
        flow = FiveTuple(INTERNET_V4, INSTANCE_V4, 40100, 443)
        self.insert(e.merge_flow(flow, idle_timeout_ns=500_000_000))
        entry = None
        deadline = time.monotonic() + 8
        while entry is None and time.monotonic() < deadline:
            entry = self.sw.next_idle_timeout(wait_s=1)
            if entry is not None and entry.table_id != names.MERGE_FLOWS:
                entry = None
        self.assertIsNotNone(entry, "no idle-timeout notification for merge_flows entry")
        self.assertEqual(entry["src_port"], 40100)


@group("steering")
class MergeServicesRule(_SteeringTest):
    def runTest(self):
        self.insert(e.merge_service("10.1.0.0/24", 8000, 8099), e.merge_service("fd00:1::/64", 443, 443))
        cases = [
            (pk.tcp_packet(INTERNET_V4, INSTANCE_V4, 1000, dport=8000), Path.MERGE, "low end of range"),
            (pk.tcp_packet(INTERNET_V4, INSTANCE_V4, 1000, dport=8099), Path.MERGE, "high end of range"),
            (pk.tcp_packet(INTERNET_V4, INSTANCE_V4, 1000, dport=8100), Path.BYPASS, "past the range"),
            (pk.tcp_packet(INTERNET_V6, INSTANCE_V6, 1000, dport=443), Path.MERGE, "IPv6 service"),
            (pk.tcp_packet(INTERNET_V6, INSTANCE_V6, 1000, dport=444), Path.BYPASS, "IPv6 other port"),
            # Matches the service, but the instance is not jumbo: not merge-eligible.
            (pk.tcp_packet(INTERNET_V4, OTHER_INSTANCE_V4, 1000, dport=8000), Path.BYPASS, "non-jumbo instance"),
            (pk.udp_packet(INTERNET_V4, INSTANCE_V4, 1000, dport=8000), Path.BYPASS, "udp"),
        ]
        for pkt, path, label in cases:
            self.expect_path(PORT_EXTERNAL, pkt, path, label)
        # Services are opt-in for traffic from outside only.
        self.expect_path(PORT_INTERNAL, pk.tcp_packet(INSTANCE_V4, INTERNET_V4, 1000, sport=5, dport=8000), Path.BYPASS, "outbound to a service port")


@group("steering")
class FleetOffMeansNoSteering(_SteeringTest):
    def runTest(self):
        self.modify(e.fleet_flag(False))
        self.insert(e.merge_flow(FiveTuple(INTERNET_V4, INSTANCE_V4, 40000, 443)))
        self.expect_path(PORT_EXTERNAL, pk.tcp_packet(INTERNET_V4, INSTANCE_V4, 1000, sport=40000, dport=443), Path.BYPASS, "fleet off")
        self.expect_path(PORT_EXTERNAL, pk.tcp_packet(INTERNET_V4, INSTANCE_V4, 60, flags="S"), Path.BYPASS, "SYN with fleet off")


@group("steering")
class HandshakeToNic(_SteeringTest):
    def runTest(self):
        cases = [
            (PORT_EXTERNAL, pk.tcp_packet(INTERNET_V4, INSTANCE_V4, 60, flags="S"), Path.MERGE, "inbound SYN"),
            (PORT_INTERNAL, pk.tcp_packet(INSTANCE_V4, INTERNET_V4, 60, flags="SA"), Path.MERGE, "outbound SYN-ACK"),
            (PORT_INTERNAL, pk.tcp_packet(INSTANCE_V4, INTERNET_V4, 60, flags="S"), Path.MERGE, "outbound SYN"),
            (PORT_EXTERNAL, pk.tcp_packet(INTERNET_V4, INSTANCE_V4, 80, flags="SA"), Path.MERGE, "inbound SYN-ACK"),
            (PORT_EXTERNAL, pk.tcp_packet(INTERNET_V6, INSTANCE_V6, 80, flags="S"), Path.MERGE, "IPv6 SYN"),
            (PORT_EXTERNAL, pk.tcp_packet(INTERNET_V4, INSTANCE_V4, 60, flags="A"), Path.BYPASS, "ACK"),
            (PORT_EXTERNAL, pk.tcp_packet(INTERNET_V4, OTHER_INSTANCE_V4, 60, flags="S"), Path.BYPASS, "SYN to a non-jumbo instance"),
        ]
        for port, pkt, path, label in cases:
            self.expect_path(port, pkt, path, label)


@group("steering")
class OutboundOversizeToNic(_SteeringTest):
    """Outbound TCP over its path MTU goes to the SmartNIC to be split."""

    def runTest(self):
        self.insert(e.path_mtu("198.51.100.128/25", 1400))
        cases = [
            (pk.tcp_packet(INSTANCE_V4, INTERNET_V4, 1500), Path.BYPASS, "at the default path MTU"),
            (pk.tcp_packet(INSTANCE_V4, INTERNET_V4, 1501), Path.MERGE, "over the default path MTU"),
            (pk.tcp_packet(INSTANCE_V4, INTERNET_V4, 8500), Path.MERGE, "jumbo"),
            (pk.tcp_packet(INSTANCE_V6, INTERNET_V6, 8500), Path.MERGE, "IPv6 jumbo"),
            (pk.tcp_packet(INSTANCE_V4, "198.51.100.200", 1401), Path.MERGE, "over a 1400 path MTU"),
            (pk.tcp_packet(INSTANCE_V4, "198.51.100.200", 1400), Path.BYPASS, "at a 1400 path MTU"),
            # Even without DF the NIC splits TCP: no fragmentation anywhere.
            (pk.tcp_packet(INSTANCE_V4, INTERNET_V4, 3000, df=False), Path.MERGE, "no DF"),
        ]
        for pkt, path, label in cases:
            self.expect_path(PORT_INTERNAL, pkt, path, label)


@group("steering")
class NicReturnedNotResteered(_SteeringTest):
    """Packets from the NIC port are routed, whatever steering rules they match."""

    def runTest(self):
        self.insert(e.merge_flow(FiveTuple(INTERNET_V4, INSTANCE_V4, 40000, 443)), e.merge_service("10.1.0.0/24", 0, 65535))
        cases = [
            (pk.tcp_packet(INTERNET_V4, INSTANCE_V4, 8500, sport=40000, dport=443), TO_RACK, "merged jumbo"),
            (pk.tcp_packet(INTERNET_V4, INSTANCE_V4, 60, flags="S"), TO_RACK, "SYN"),
            (pk.tcp_packet(INSTANCE_V4, INTERNET_V4, 1500), TO_INTERNET, "split segment"),
        ]
        for pkt, hop, label in cases:
            before = self.stats()
            self.send(PORT_NIC, pkt)
            self.expect_routed(pkt, hop)
            self.expect_nothing()
            delta = self.stats() - before
            self.assertEqual(list(delta.paths), [Path.NIC_RETURN], label)


PROBE_PORT = 48999  # PMTU_PROBE_PORT (defines.p4), jumbogate-nic's --pmtu-port


def probe(src, dst, size, **kw):
    return pk.udp_packet(src, dst, size, sport=PROBE_PORT, dport=PROBE_PORT, **kw)


def later_fragment(src, dst, size, offset_bytes=1480):
    """An IPv4 fragment past the first: payload bytes, no UDP header."""
    return pk.ether() / IP(src=src, dst=dst, proto=17, id=7, frag=offset_bytes // 8) / Raw(bytes(size - 20))


@group("steering")
class PathProbesToNic(_SteeringTest):
    """Path MTU discovery (docs/pathmtu.md): probes and replies from outside,
    and later IPv4 fragments (a probe's, perhaps), go to the SmartNIC before
    the MTU policy; the SmartNIC's own probes are routed whatever their size."""

    def runTest(self):
        cases = [
            (PORT_EXTERNAL, probe(INTERNET_V4, INSTANCE_V4, 1280), Path.MERGE, "probe"),
            (PORT_EXTERNAL, probe(INTERNET_V4, OTHER_INSTANCE_V4, 9000, df=False), Path.MERGE, "probe larger than its (non-jumbo) instance's MTU"),
            (PORT_EXTERNAL, probe(INTERNET_V6, INSTANCE_V6, 8000), Path.MERGE, "IPv6 probe"),
            (PORT_EXTERNAL, later_fragment(INTERNET_V4, OTHER_INSTANCE_V4, 1000), Path.MERGE, "later fragment"),
            (PORT_EXTERNAL, pk.udp_packet(INTERNET_V4, INSTANCE_V4, 1000, dport=PROBE_PORT - 1), Path.BYPASS, "other UDP port"),
            (PORT_EXTERNAL, pk.tcp_packet(INTERNET_V4, OTHER_INSTANCE_V4, 1000, dport=PROBE_PORT), Path.BYPASS, "TCP to the probe port"),
            (PORT_INTERNAL, probe(INSTANCE_V4, INTERNET_V4, 1200), Path.BYPASS, "from the rack"),
        ]
        for port, pkt, path, label in cases:
            self.expect_path(port, pkt, path, label)
        # From the SmartNIC: a 9000-byte probe toward a 1500-byte path MTU
        # is routed; the same size as any other UDP is dropped and signalled.
        for pkt, hop, label in (
            (probe(INSTANCE_V4, INTERNET_V4, 9000), TO_INTERNET, "the NIC's probe"),
            (probe(INTERNET_V4, INSTANCE_V4, 70), TO_RACK, "the NIC's reply"),
        ):
            before = self.stats()
            self.send(PORT_NIC, pkt)
            self.expect_routed(pkt, hop)
            self.expect_nothing()
            self.assertEqual(list((self.stats() - before).paths), [Path.NIC_RETURN], label)
        big = pk.udp_packet(INSTANCE_V4, INTERNET_V4, 9000, sport=PROBE_PORT, dport=443)
        before = self.stats()
        self.send(PORT_NIC, big)
        testutils.verify_no_packet(self, pk.routed(big, TO_INTERNET.src_mac, TO_INTERNET.dst_mac), TO_INTERNET.port)
        self.dataplane.flush()
        signals = (self.stats() - before).icmp_signals
        self.assertEqual(sum(v.packets for v in signals.values()), 1, "not a probe: over the path MTU, dropped and signalled")


@group("steering")
class NoNicPortNoSteering(JumbogateTest):
    def runTest(self):
        self.add_routes()
        self.jumbo(True, instances=[INSTANCE_V4])
        self.insert(e.merge_flow(FiveTuple(INTERNET_V4, INSTANCE_V4, 40000, 443)))
        pkt = pk.tcp_packet(INTERNET_V4, INSTANCE_V4, 1000, sport=40000, dport=443)
        self.send(PORT_EXTERNAL, pkt)
        self.expect_routed(pkt, TO_RACK)
        self.expect_nothing()
        # Nor path MTU probes: without a SmartNIC they are ordinary UDP.
        pkt = probe(INTERNET_V4, INSTANCE_V4, 1000)
        self.send(PORT_EXTERNAL, pkt)
        self.expect_routed(pkt, TO_RACK)
        self.expect_nothing()
