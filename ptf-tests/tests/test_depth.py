"""The parse-depth budget, at its exact boundary, for the compiled profile.

Header ends in the rack's encapsulation are multiples of 4 bytes from the
frame start (outer and inner Ethernet are 14 bytes each, everything else is
4-byte aligned), so the closest packets to a budget are the one whose last
header ends exactly at the budget (parsed) and the one whose last header ends
4 bytes past it (not parsed). Growing Geneve options move that end 4 bytes
at a time.
"""

import packets as pk
from base import (
    INSTANCE_V4,
    INSTANCE_V6,
    INTERNET_V4,
    INTERNET_V6,
    PORT_INTERNAL,
    PORT_NIC,
    TO_RACK,
    VTEP_LOCAL,
    VTEP_REMOTE,
    JumbogateTest,
    depth_profile,
)
from ptf.testutils import group

from jumbogate.p4 import DropReason, FiveTuple, Path
from jumbogate.p4 import entries as e
from jumbogate.p4.stats import PacketsBytes

OUTER = 14 + 40 + 8 + 8  # Ethernet, IPv6, UDP, Geneve base
SPORT, DPORT = 45000, 443
MAX_OPTION_WORDS = 63


def inner_frame(family: int, ip_options=b"", tcp_options=None):
    src, dst = (INSTANCE_V4, INTERNET_V4) if family == 4 else (INSTANCE_V6, INTERNET_V6)
    return pk.tcp_packet(src, dst, 200 + len(ip_options) + 40, sport=SPORT, dport=DPORT, ip_options=ip_options, tcp_options=tcp_options)


def headers_end(option_words: int, family: int, vlan=False, ip_options=0, tcp_options=0) -> int:
    """Where the inner TCP header ends, in bytes from the frame start."""
    inner_ip = 20 + ip_options if family == 4 else 40
    return (4 if vlan else 0) + OUTER + 4 * option_words + 14 + inner_ip + 20 + tcp_options


class _DepthTest(JumbogateTest):
    def setUp(self):
        super().setUp()
        self.budget = depth_profile()
        self.add_routes()
        # Fully parsed inner TCP of this flow goes to the NIC (merge_flows):
        # reaching the NIC proves the parser read the inner 5-tuple.
        self.modify(e.nic_port(PORT_NIC))
        self.jumbo(True, instances=[INSTANCE_V4, INSTANCE_V6])
        self.insert(e.merge_flow(FiveTuple(INSTANCE_V4, INTERNET_V4, SPORT, DPORT)), e.merge_flow(FiveTuple(INSTANCE_V6, INTERNET_V6, SPORT, DPORT)))

    def outcome(self, pkt) -> str:
        """'parsed' (went to the NIC), 'dropped-too-deep' or 'forwarded-too-deep'."""
        before = self.stats()
        self.send(PORT_INTERNAL, pkt)
        result = self.dataplane.poll(port_number=None, timeout=1)
        delta = self.stats() - before
        if not isinstance(result, self.dataplane.PollSuccess):
            self.assertEqual(delta.drops, {DropReason.PARSE_DEPTH_EXCEEDED: PacketsBytes(1, len(pkt))})
            return "dropped-too-deep"
        if result.port == PORT_NIC:
            self.assertEqual(bytes(result.packet), bytes(pkt))
            self.assertEqual(list(delta.paths), [Path.MERGE])
            return "parsed"
        self.assertEqual(result.port, TO_RACK.port)
        self.assertEqual(bytes(result.packet), bytes(pk.routed(pkt, TO_RACK.src_mac, TO_RACK.dst_mac)))
        self.assertEqual(list(delta.paths), [Path.DEPTH_FORWARDED])
        return "forwarded-too-deep"


@group("depth")
class GrowingGeneveOptions(_DepthTest):
    """Grow the options one word at a time across the budget, both families."""

    def runTest(self):
        for family in (4, 6):
            fitting = [n for n in range(MAX_OPTION_WORDS + 1) if headers_end(n, family) <= self.budget]
            last_fit = max(fitting)
            words = sorted({max(0, last_fit - 2), last_fit - 1, last_fit, last_fit + 1, last_fit + 2} & set(range(64)))
            for n in words:
                end = headers_end(n, family)
                pkt = pk.geneve_packet(VTEP_REMOTE, VTEP_LOCAL, inner_frame(family), option_words=n)
                expected = "parsed" if end <= self.budget else "dropped-too-deep"
                self.assertEqual(self.outcome(pkt), expected, f"IPv{family}, {n} option words, headers end at {end}")
        self.expect_nothing()


@group("depth")
class ExactBoundary(_DepthTest):
    """A header ending exactly at the budget is parsed; 4 bytes more is not."""

    def runTest(self):
        if self.budget != 256:
            # 512: no legal stack reaches it (see DeepestStackFits).
            self.skipTest(f"no legal header stack ends near {self.budget} bytes")
        # Inner IPv4 + TCP end at 124 + 4n: n = 33 ends at exactly 256.
        exact = pk.geneve_packet(VTEP_REMOTE, VTEP_LOCAL, inner_frame(4), option_words=33)
        self.assertEqual(headers_end(33, 4), 256)
        self.assertEqual(self.outcome(exact), "parsed")
        over = pk.geneve_packet(VTEP_REMOTE, VTEP_LOCAL, inner_frame(4), option_words=34)
        self.assertEqual(self.outcome(over), "dropped-too-deep")
        # The same boundary reached with TCP options instead of Geneve options.
        mss = [("MSS", 8460)]  # 4 bytes of TCP options
        exact = pk.geneve_packet(VTEP_REMOTE, VTEP_LOCAL, inner_frame(4, tcp_options=mss), option_words=32)
        self.assertEqual(headers_end(32, 4, tcp_options=4), 256)
        self.assertEqual(self.outcome(exact), "parsed")
        over = pk.geneve_packet(VTEP_REMOTE, VTEP_LOCAL, inner_frame(4, tcp_options=mss), option_words=33)
        self.assertEqual(self.outcome(over), "dropped-too-deep")
        # Options so long that the option walk itself crosses the budget.
        walk = pk.geneve_packet(VTEP_REMOTE, VTEP_LOCAL, inner_frame(4), option_words=MAX_OPTION_WORDS)
        self.assertEqual(self.outcome(walk), "dropped-too-deep")


@group("depth")
class TooDeepForwardedOnOuterHeaders(_DepthTest):
    """With the forward policy, too-deep packets are routed intact and never merged."""

    def runTest(self):
        self.modify(e.depth_policy(forward=True))
        n = min(MAX_OPTION_WORDS, (self.budget - headers_end(0, 4)) // 4 + 1)
        pkt = pk.geneve_packet(VTEP_REMOTE, VTEP_LOCAL, inner_frame(4), option_words=n)
        expected = "forwarded-too-deep" if headers_end(n, 4) > self.budget else "parsed"
        self.assertEqual(self.outcome(pkt), expected)
        if expected == "parsed":
            self.skipTest(f"no legal Geneve packet exceeds {self.budget} bytes")


@group("depth")
class DeepestStackFits(_DepthTest):
    """The deepest legal stack: what the 512 profile must, and 256 cannot, parse."""

    def runTest(self):
        inner = inner_frame(4, ip_options=b"\x01" * 40, tcp_options=[("NOP", None)] * 40)
        pkt = pk.geneve_packet(VTEP_REMOTE, VTEP_LOCAL, inner, option_words=MAX_OPTION_WORDS, vlan=5)
        end = headers_end(MAX_OPTION_WORDS, 4, vlan=True, ip_options=40, tcp_options=40)
        self.assertEqual(end, 460)
        self.assertEqual(self.outcome(pkt), "parsed" if end <= self.budget else "dropped-too-deep")
