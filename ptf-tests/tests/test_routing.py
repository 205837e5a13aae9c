"""IPv4/IPv6 LPM routing and ECMP through the action selector."""

import random
from collections import Counter

import packets as pk
from base import (
    GROUP_TO_INTERNET,
    INSTANCE_V4,
    INSTANCE_V6,
    INTERNET_NET_V4,
    INTERNET_NET_V6,
    INTERNET_V4,
    INTERNET_V6,
    PORT_EXTERNAL,
    PORT_EXTERNAL_2,
    PORT_EXTERNAL_3,
    PORT_INTERNAL,
    PORT_NIC,
    TO_RACK,
    JumbogateTest,
)
from ptf.testutils import group

from jumbogate.p4 import NextHop
from jumbogate.p4 import entries as e

UPLINKS = [
    NextHop(PORT_EXTERNAL, "00:00:00:00:e0:00", "00:00:00:00:e0:01"),
    NextHop(PORT_EXTERNAL_2, "00:00:00:00:e2:00", "00:00:00:00:e2:01"),
    NextHop(PORT_EXTERNAL_3, "00:00:00:00:e3:00", "00:00:00:00:e3:01"),
]
MAX_FLOWS = 200


@group("routing")
class LongestPrefixMatch(JumbogateTest):
    def runTest(self):
        wide = NextHop(PORT_EXTERNAL_2, "00:00:00:00:e2:00", "00:00:00:00:e2:01")
        narrow = NextHop(PORT_EXTERNAL_3, "00:00:00:00:e3:00", "00:00:00:00:e3:01")
        self.insert(
            e.ecmp_group(10, [wide]),
            e.ecmp_group(11, [narrow]),
            e.route("198.51.0.0/16", 10),
            e.route("198.51.100.0/24", 11),
            e.route("2001:db8::/32", 10),
            e.route("2001:db8:100::/48", 11),
        )
        cases = [
            (pk.tcp_packet(INSTANCE_V4, "198.51.100.77", 100), narrow),
            (pk.tcp_packet(INSTANCE_V4, "198.51.7.7", 100), wide),
            (pk.udp_packet(INSTANCE_V4, "198.51.100.1", 1400, df=False), narrow),
            (pk.tcp_packet(INSTANCE_V6, "2001:db8:100::9", 100), narrow),
            (pk.tcp_packet(INSTANCE_V6, "2001:db8:5::9", 100), wide),
            # IPv4 options survive and the incremental checksum is right.
            (pk.tcp_packet(INSTANCE_V4, "198.51.100.2", 200, ip_options=b"\x94\x04\x00\x00"), narrow),
        ]
        for pkt, hop in cases:
            self.send(PORT_INTERNAL, pkt)
            self.expect_routed(pkt, hop)
        self.expect_nothing()


class _EcmpTest(JumbogateTest):
    def flow(self, sport, v6=False, size=200):
        src, dst = (INSTANCE_V6, INTERNET_V6) if v6 else (INSTANCE_V4, INTERNET_V4)
        return lambda: pk.tcp_packet(src, dst, size, sport=sport, dport=443)

    def egress_port(self, pkt, in_port=PORT_INTERNAL):
        self.send(in_port, pkt)
        result = self.dataplane.poll(port_number=None, timeout=2)
        self.assertIsInstance(result, self.dataplane.PollSuccess, "packet lost")
        return result.port, result.packet


@group("routing")
class EcmpSpreadAndStability(_EcmpTest):
    """Every member is hit, and each flow keeps its member."""

    def runTest(self):
        self.insert(
            e.ecmp_group(GROUP_TO_INTERNET, UPLINKS),
            e.route(INTERNET_NET_V4, GROUP_TO_INTERNET),
            e.route(INTERNET_NET_V6, GROUP_TO_INTERNET),
        )
        by_port = {hop.port: hop for hop in UPLINKS}
        for v6 in (False, True):
            first_choice = {}
            for sport in range(10000, 10000 + MAX_FLOWS):
                pkt = self.flow(sport, v6)()
                port, received = self.egress_port(pkt)
                hop = by_port[port]
                self.assertEqual(bytes(received), bytes(pk.routed(pkt, hop.src_mac, hop.dst_mac)))
                first_choice[sport] = port
                if len(set(first_choice.values())) == len(UPLINKS) and len(first_choice) >= 12:
                    break
            self.assertEqual(set(first_choice.values()), {h.port for h in UPLINKS}, f"not every member used (v6={v6})")
            for sport, port in first_choice.items():
                for size in (120, 1280):  # within both families' default path MTU
                    again, _ = self.egress_port(self.flow(sport, v6, size)())
                    self.assertEqual(again, port, f"flow {sport} moved (v6={v6})")
        self.expect_nothing()


@group("routing")
class EcmpSameMemberAfterSmartNic(_EcmpTest):
    """A flow's packets returned by the SmartNIC (merged or split sizes) take its member."""

    def runTest(self):
        self.insert(e.ecmp_group(GROUP_TO_INTERNET, UPLINKS), e.route(INTERNET_NET_V4, GROUP_TO_INTERNET))
        # A jumbo instance whose path allows 8000-byte packets, so the direct
        # packet is routed rather than split or refused.
        self.jumbo(True, instances=[INSTANCE_V4])
        self.insert(e.path_mtu(INTERNET_NET_V4, 9000))
        for sport in range(20000, 20016):
            direct, _ = self.egress_port(self.flow(sport, size=8000)())
            for size in (1500, 576):
                returned, _ = self.egress_port(self.flow(sport, size=size)(), in_port=PORT_NIC)
                self.assertEqual(returned, direct, f"flow {sport}: NIC-returned packet changed member")


@group("routing")
class EcmpWeightedGroup(_EcmpTest):
    """A next hop listed with weight 3 gets about three times the flows of one with weight 1."""

    def runTest(self):
        heavy, light = UPLINKS[0], UPLINKS[1]
        self.insert(e.ecmp_group(GROUP_TO_INTERNET, [heavy, light], weights=[3, 1]), e.route(INTERNET_NET_V4, GROUP_TO_INTERNET))
        # Spread-out ports: consecutive ones hit only some CRC residues.
        ports = random.Random(3).sample(range(1024, 65536), MAX_FLOWS)
        counts = Counter(self.egress_port(self.flow(sport)())[0] for sport in ports)
        self.assertEqual(set(counts), {heavy.port, light.port})
        ratio = counts[heavy.port] / counts[light.port]
        self.assertTrue(2.0 <= ratio <= 4.5, f"weight 3:1 gave {dict(counts)}")


@group("routing")
class RouteToRack(JumbogateTest):
    def runTest(self):
        self.add_routes()
        for pkt in (pk.tcp_packet(INTERNET_V4, INSTANCE_V4, 1000), pk.tcp_packet(INTERNET_V6, INSTANCE_V6, 1000)):
            self.send(PORT_EXTERNAL, pkt)
            self.expect_routed(pkt, TO_RACK)
        self.expect_nothing()
