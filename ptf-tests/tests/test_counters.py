"""Counters read over P4Runtime: per port and direction, bypass vs merge, ICMP."""

import packets as pk
from base import INSTANCE_V4, INTERNET_V4, PORT_EXTERNAL, PORT_INTERNAL, PORT_NIC, TO_RACK, JumbogateTest
from ptf.testutils import group

from jumbogate.p4 import FiveTuple, IcmpSignal, Path
from jumbogate.p4 import entries as e
from jumbogate.p4.stats import PacketsBytes


@group("counters")
class PortPathAndIcmpCounters(JumbogateTest):
    def runTest(self):
        self.add_routes()
        self.modify(e.nic_port(PORT_NIC))
        self.jumbo(True, instances=[INSTANCE_V4])
        self.insert(e.merge_flow(FiveTuple(INTERNET_V4, INSTANCE_V4, 41000, 443)))
        bypass = pk.tcp_packet(INTERNET_V4, INSTANCE_V4, 1000, sport=41001, dport=443)
        merge = pk.tcp_packet(INTERNET_V4, INSTANCE_V4, 1200, sport=41000, dport=443)
        merged_back = pk.tcp_packet(INTERNET_V4, INSTANCE_V4, 8500, sport=41000, dport=443)
        too_big = pk.tcp_packet(INTERNET_V4, INSTANCE_V4, 8501, sport=41000, dport=443)

        before = self.stats()
        for _ in range(2):
            self.send(PORT_EXTERNAL, bypass)
            self.expect_routed(bypass, TO_RACK)
        self.send(PORT_EXTERNAL, merge)
        self.expect(merge, PORT_NIC)
        self.send(PORT_NIC, merged_back)
        self.expect_routed(merged_back, TO_RACK)
        self.send(PORT_EXTERNAL, too_big)
        icmp = pk.expected_icmp(too_big, 8500)
        self.expect(icmp, PORT_EXTERNAL)
        self.expect_nothing()
        delta = self.stats() - before

        self.assertEqual(
            delta.paths,
            {
                Path.BYPASS: PacketsBytes(2, 2 * len(bypass)),
                Path.MERGE: PacketsBytes(1, len(merge)),
                Path.NIC_RETURN: PacketsBytes(1, len(merged_back)),
            },
        )
        self.assertEqual(
            delta.port_rx,
            {
                PORT_EXTERNAL: PacketsBytes(4, 2 * len(bypass) + len(merge) + len(too_big)),
                PORT_NIC: PacketsBytes(1, len(merged_back)),
            },
        )
        self.assertEqual(delta.port_tx[PORT_INTERNAL], PacketsBytes(3, 2 * len(bypass) + len(merged_back)))
        self.assertEqual(delta.port_tx[PORT_NIC], PacketsBytes(1, len(merge)))
        # BMv2 counts a truncated packet at the length it entered with, so only
        # the packet count of the ICMP error is checked.
        self.assertEqual(delta.port_tx[PORT_EXTERNAL].packets, 1)
        self.assertEqual(set(delta.port_tx), {PORT_INTERNAL, PORT_NIC, PORT_EXTERNAL})
        self.assertEqual(list(delta.icmp_signals), [IcmpSignal.IPV4_FRAG_NEEDED])
        self.assertEqual(delta.icmp_signals[IcmpSignal.IPV4_FRAG_NEEDED].packets, 1)
