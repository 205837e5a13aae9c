"""Elephant detection: one digest per flow per epoch, counters reset by epoch."""

import ipaddress
import time

import packets as pk
from base import INSTANCE_V4, INSTANCE_V6, INTERNET_V4, INTERNET_V6, PORT_EXTERNAL, PORT_INTERNAL, PORT_NIC, TO_INTERNET, TO_RACK, JumbogateTest
from ptf.testutils import group

from jumbogate.p4 import FiveTuple, names
from jumbogate.p4 import entries as e
from jumbogate.p4.constants import ELEPHANT_EPOCH_LOG2_US

EPOCH_S = (1 << ELEPHANT_EPOCH_LOG2_US) / 1e6
THRESHOLD = 20_000
SEGMENT = 8000  # three segments cross the threshold


def arm_digests(test: JumbogateTest, instances: list[str]) -> None:
    """Routes, the SmartNIC's port, the test threshold, jumbo on for `instances`, and every digest list sent at
    once (one digest a list), with nothing left over from before."""
    test.add_routes()
    test.modify(e.nic_port(PORT_NIC), e.elephant_threshold(THRESHOLD))
    test.jumbo(True, instances=instances)
    test.sw.start_digests(names.ELEPHANT_DIGEST)
    test.insert(e.elephant_digest(max_timeout_ns=0, max_list_size=1))
    test.sw.drain_digests(wait_s=0.2)


@group("elephant")
class ElephantDigestOncePerEpoch(JumbogateTest):
    def runTest(self):
        arm_digests(self, [INSTANCE_V4, INSTANCE_V6])

        # A mouse: below the threshold, no digest.
        mouse = pk.tcp_packet(INTERNET_V4, INSTANCE_V4, 1400, sport=50001, dport=443)
        for _ in range(3):
            self.send(PORT_EXTERNAL, mouse)
            self.expect_routed(mouse, TO_RACK)
        self.assertEqual(self.sw.drain_digests(wait_s=0.5), [], "mouse reported")

        for family, (src, dst) in ((4, (INTERNET_V4, INSTANCE_V4)), (6, (INTERNET_V6, INSTANCE_V6))):
            sport = 50100 + family
            segment = pk.tcp_packet(src, dst, SEGMENT, sport=sport, dport=443)
            reports = []
            for epoch in range(2):
                # Three segments in quick succession cross the threshold once,
                # and three more in the same epoch do not report again. A
                # burst that an epoch boundary cuts 3 + 3 rightly reports
                # twice; the switch's clock is not visible, so such a burst
                # is sent again, a whole epoch later.
                for _attempt in range(2):
                    for _ in range(6):
                        self.send(PORT_EXTERNAL, segment)
                        self.expect_routed(segment, TO_RACK)
                    got = self.sw.drain_digests(wait_s=1.0)
                    if len(got) != 2:
                        break
                    time.sleep(EPOCH_S + 0.1)
                self.assertEqual(len(got), 1, f"IPv{family} epoch {epoch}: {got}")
                reports.append(e.decode_elephant_digest(got[0]))
                if epoch == 0:
                    time.sleep(EPOCH_S + 0.1)  # a new epoch: counters start from zero
            for report in reports:
                self.assertEqual(report.flow, FiveTuple(ipaddress.ip_address(src), ipaddress.ip_address(dst), sport, 443))
                self.assertGreaterEqual(report.estimated_bytes, THRESHOLD)
                self.assertLess(report.estimated_bytes, THRESHOLD + SEGMENT)


@group("elephant")
class SteeredFlowsNotCounted(JumbogateTest):
    """Flows already on the merge path are not reported."""

    def runTest(self):
        arm_digests(self, [INSTANCE_V4])
        self.insert(e.merge_flow(FiveTuple(INTERNET_V4, INSTANCE_V4, 50200, 443)))
        segment = pk.tcp_packet(INTERNET_V4, INSTANCE_V4, SEGMENT, sport=50200, dport=443)
        for _ in range(4):
            self.send(PORT_EXTERNAL, segment)
            self.expect(segment, PORT_NIC)
        self.assertEqual(self.sw.drain_digests(wait_s=0.5), [])


@group("elephant")
class OutboundFlowsNotCounted(JumbogateTest):
    """A jumbo instance's outbound TCP is never reported: the controller puts only flows toward an instance on the
    merge path, so a digest of an outbound flow (an instance's ACKs to a fast transfer, say) would be work for
    nothing, once an epoch for as long as the flow runs."""

    def runTest(self):
        arm_digests(self, [INSTANCE_V4])
        segment = pk.tcp_packet(INSTANCE_V4, INTERNET_V4, 1000, sport=443, dport=50300)
        for _ in range(2 * THRESHOLD // 1000):
            self.send(PORT_INTERNAL, segment)
            self.expect_routed(segment, TO_INTERNET)
        self.assertEqual(self.sw.drain_digests(wait_s=0.5), [])


@group("elephant")
class UdpNotCounted(JumbogateTest):
    """UDP toward a jumbo instance is merge-eligible (as caravans) but only when an operator lists it: a
    caravan reaches only a receiver that unpacks it, so the sketch counts no UDP and reports none."""

    def runTest(self):
        arm_digests(self, [INSTANCE_V4])
        datagram = pk.udp_packet(INTERNET_V4, INSTANCE_V4, SEGMENT, sport=50400, dport=443)
        for _ in range(6):
            self.send(PORT_EXTERNAL, datagram)
            self.expect_routed(datagram, TO_RACK)
        self.assertEqual(self.sw.drain_digests(wait_s=0.5), [])
