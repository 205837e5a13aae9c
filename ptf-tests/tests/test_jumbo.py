"""Per-instance jumbo policy, ICMP "too big" signalling, and its meter."""

import itertools
import time

import packets as pk
from base import (
    INSTANCE_V4,
    INSTANCE_V6,
    INTERNET_NET_V4,
    INTERNET_NET_V6,
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
    meter_refills,
)
from ptf.testutils import group

from jumbogate.p4 import DropReason, IcmpSignal
from jumbogate.p4 import entries as e
from jumbogate.p4.stats import PacketsBytes

SIZES = (1500, 1501, 8500, 8501)
# (fleet flag, instance flag) -> effective MTU
CONFIGS = {
    (False, True): 1500,
    (True, False): 1500,
    (True, True): 8500,
}


class _PolicyTest(JumbogateTest):
    def setup_policy(self, fleet: bool, instance: bool):
        self.add_routes()
        # Outbound checks in this file are about the instance MTU: give the
        # Internet a path MTU that never limits.
        self.insert(e.path_mtu(INTERNET_NET_V4, 9000), e.path_mtu(INTERNET_NET_V6, 9000))
        self.modify(e.fleet_flag(fleet))
        self.insert(e.instance_policy(INSTANCE_V4, instance), e.instance_policy(INSTANCE_V6, instance))

    def run_matrix(self, fleet: bool, instance: bool):
        """Both directions, both families, 1500/1501/8500/8501 bytes."""
        self.setup_policy(fleet=fleet, instance=instance)
        for direction, family, size in itertools.product(("inbound", "outbound"), (4, 6), SIZES):
            self.check(direction, family, size, CONFIGS[(fleet, instance)])

    def check(self, direction: str, family: int, size: int, mtu: int):
        """Send one packet; expect it routed, or dropped with the exact ICMP error."""
        if direction == "inbound":
            src, dst = (INTERNET_V4, INSTANCE_V4) if family == 4 else (INTERNET_V6, INSTANCE_V6)
            in_port, hop = PORT_EXTERNAL, TO_RACK
        else:
            src, dst = (INSTANCE_V4, INTERNET_V4) if family == 4 else (INSTANCE_V6, INTERNET_V6)
            in_port, hop = PORT_INTERNAL, TO_INTERNET
        pkt = pk.tcp_packet(src, dst, size, sport=1000 + size % 1000, dport=443)
        before = self.stats()
        self.send(in_port, pkt)
        label = f"{direction} IPv{family} {size} B, MTU {mtu}"
        delta_expect = {}
        if size <= mtu:
            self.expect_routed(pkt, hop)
        else:
            self.expect(pk.expected_icmp(pkt, mtu), in_port)
            delta_expect = {DropReason.MTU_EXCEEDED: PacketsBytes(1, len(pkt))}
        self.expect_nothing()
        delta = self.stats() - before
        self.assertEqual(delta.drops, delta_expect, label)
        signals = delta.icmp_signals
        if size > mtu:
            kind = IcmpSignal.IPV4_FRAG_NEEDED if family == 4 else IcmpSignal.IPV6_PACKET_TOO_BIG
            self.assertEqual(list(signals), [kind], label)
            self.assertEqual(signals[kind].packets, 1, label)
        else:
            self.assertEqual(signals, {}, label)


@group("jumbo")
class FleetOffInstanceOn(_PolicyTest):
    def runTest(self):
        self.run_matrix(fleet=False, instance=True)


@group("jumbo")
class FleetOnInstanceOff(_PolicyTest):
    def runTest(self):
        self.run_matrix(fleet=True, instance=False)


@group("jumbo")
class FleetOnInstanceOn(_PolicyTest):
    def runTest(self):
        self.run_matrix(fleet=True, instance=True)


@group("jumbo")
class OperatorMtusAreEnforced(_PolicyTest):
    """The MTUs come from the controller (rack.yaml), not from the program:
    a guest jumbo MTU of 8000 and a default of 1400 are what the switch
    holds instances to, and what its signals announce."""

    def runTest(self):
        self.setup_policy(fleet=True, instance=True)
        self.modify(e.fleet_flag(True, guest_jumbo_mtu=8000, default_mtu=1400))
        for direction, family, size in itertools.product(("inbound", "outbound"), (4, 6), (8000, 8001)):
            self.check(direction, family, size, 8000)
        self.modify(e.fleet_flag(False, guest_jumbo_mtu=8000, default_mtu=1400))
        for direction, family, size in itertools.product(("inbound", "outbound"), (4, 6), (1400, 1401)):
            self.check(direction, family, size, 1400)


@group("jumbo")
class UnknownInstanceIsStandard(_PolicyTest):
    """An address the controller never listed gets 1500 even with the fleet on."""

    def runTest(self):
        self.add_routes()
        self.modify(e.fleet_flag(True))
        self.check("inbound", 4, 1500, 1500)
        self.check("inbound", 4, 1501, 1500)
        self.check("inbound", 6, 1501, 1500)


@group("jumbo")
class SignalWithVlanAndConfiguredSource(_PolicyTest):
    """The ICMP error keeps the VLAN tag and uses the controller's source addresses."""

    def runTest(self):
        self.setup_policy(fleet=False, instance=False)
        self.modify(e.signal_source("192.0.2.254", "2001:db8:ffff::fe"))
        for src, dst, signal_src in ((INTERNET_V4, INSTANCE_V4, "192.0.2.254"), (INTERNET_V6, INSTANCE_V6, "2001:db8:ffff::fe")):
            pkt = pk.tcp_packet(src, dst, 4000, vlan=42)
            self.send(PORT_EXTERNAL, pkt)
            self.expect(pk.expected_icmp(pkt, 1500, signal_src=signal_src), PORT_EXTERNAL)
        self.expect_nothing()


@group("jumbo")
class NonTcpOverPathMtuSignalled(_PolicyTest):
    """Outbound non-TCP larger than the path MTU is dropped and signalled with the path MTU."""

    def runTest(self):
        self.add_routes()
        self.jumbo(True, instances=[INSTANCE_V4, INSTANCE_V6])
        self.modify(e.nic_port(2))
        self.insert(e.path_mtu("198.51.100.0/25", 1400), e.path_mtu("2001:db8:100::/64", 1280))
        cases = [
            (pk.udp_packet(INSTANCE_V4, INTERNET_V4, 1401), 1400),
            (pk.udp_packet(INSTANCE_V6, INTERNET_V6, 1281), 1280),
            (pk.icmp_echo(INSTANCE_V4, INTERNET_V4, 1401), 1400),
        ]
        for pkt, mtu in cases:
            self.send(PORT_INTERNAL, pkt)
            self.expect(pk.expected_icmp(pkt, mtu), PORT_INTERNAL)
        # At the path MTU it passes; beyond the program's default elsewhere
        # (1500, or IPv6's minimum 1280: no controller wrote a /0 entry) it
        # does not.
        for ok in (pk.udp_packet(INSTANCE_V4, INTERNET_V4, 1400), pk.udp_packet(INSTANCE_V6, "2001:db8:100:1::9", 1280)):
            self.send(PORT_INTERNAL, ok)
            self.expect_routed(ok, TO_INTERNET)
        for other, mtu in ((pk.udp_packet(INSTANCE_V4, "198.51.100.200", 1501), 1500), (pk.udp_packet(INSTANCE_V6, "2001:db8:100:1::9", 1281), 1280)):
            self.send(PORT_INTERNAL, other)
            self.expect(pk.expected_icmp(other, mtu), PORT_INTERNAL)
        self.expect_nothing()


@group("jumbo")
class BackFromTheNicHeldToTheSameMtus(_PolicyTest):
    """What comes back from the SmartNIC is checked like everything else, so
    nothing leaves oversize to die without a signal: an outbound packet it
    did not split is held to the path MTU, a merged one to its instance's
    MTU. The signal leaves by the SmartNIC's port, which hands it back."""

    def runTest(self):
        self.add_routes()
        self.jumbo(True, instances=[INSTANCE_V4, INSTANCE_V6])
        self.modify(e.nic_port(PORT_NIC))
        self.insert(e.path_mtu("198.51.100.0/25", 1400), e.path_mtu("2001:db8:100::/64", 1280))
        fits = [
            (pk.tcp_packet(INSTANCE_V4, INTERNET_V4, 1400), TO_INTERNET),
            (pk.tcp_packet(INSTANCE_V6, INTERNET_V6, 1280), TO_INTERNET),
            (pk.tcp_packet(INTERNET_V4, INSTANCE_V4, 8500), TO_RACK),
            (pk.tcp_packet(INTERNET_V6, INSTANCE_V6, 8500), TO_RACK),
        ]
        for pkt, hop in fits:
            self.send(PORT_NIC, pkt)
            self.expect_routed(pkt, hop)
        too_big = [
            (pk.tcp_packet(INSTANCE_V4, INTERNET_V4, 1401), 1400),
            (pk.tcp_packet(INSTANCE_V6, INTERNET_V6, 1281), 1280),
            (pk.udp_packet(INSTANCE_V4, "198.51.100.200", 1501), 1500),
            (pk.tcp_packet(INTERNET_V4, INSTANCE_V4, 8501), 8500),
            (pk.tcp_packet(INTERNET_V6, INSTANCE_V6, 8501), 8500),
        ]
        before = self.stats()
        for pkt, mtu in too_big:
            self.send(PORT_NIC, pkt)
            self.expect(pk.expected_icmp(pkt, mtu), PORT_NIC)
        # The instance's flag turned off while merged packets were in flight.
        self.modify(e.instance_policy(INSTANCE_V4, False))
        late = pk.tcp_packet(INTERNET_V4, INSTANCE_V4, 3000)
        self.send(PORT_NIC, late)
        self.expect(pk.expected_icmp(late, 1500), PORT_NIC)
        self.expect_nothing()
        delta = self.stats() - before
        self.assertEqual(delta.drops[DropReason.MTU_EXCEEDED].packets, len(too_big) + 1)


@group("jumbo")
class IcmpMeterLimitsSignals(_PolicyTest):
    """A flood of oversized packets yields at most the meter's burst of ICMP errors."""

    def runTest(self):
        self.setup_policy(fleet=False, instance=False)
        burst = 3
        self.set_meter(PORT_EXTERNAL, packets_per_second=1, burst=burst)
        flood = 12
        before = self.stats()
        started = time.monotonic()
        for i in range(flood):
            self.send(PORT_EXTERNAL, pk.tcp_packet(INTERNET_V4, INSTANCE_V4, 2000, sport=7000 + i))
        refills = meter_refills(1, time.monotonic() - started)
        received = 0
        while isinstance(self.dataplane.poll(port_number=PORT_EXTERNAL, timeout=1), self.dataplane.PollSuccess):
            received += 1
        delta = self.stats() - before
        self.assertGreaterEqual(received, burst, f"{received} ICMP errors for {flood} packets")
        self.assertLessEqual(received, burst + refills, f"{received} ICMP errors for {flood} packets")
        self.assertEqual(delta.icmp_signals[IcmpSignal.IPV4_FRAG_NEEDED].packets, received)
        self.assertEqual(delta.drops[DropReason.MTU_EXCEEDED].packets, received)
        self.assertEqual(delta.drops[DropReason.ICMP_RATE_LIMITED].packets, flood - received)
        # Another port's meter is untouched.
        pkt = pk.tcp_packet(INSTANCE_V4, INTERNET_V4, 2000)
        self.send(PORT_INTERNAL, pkt)
        self.expect(pk.expected_icmp(pkt, 1500), PORT_INTERNAL)


@group("jumbo")
class GenevePolicyUsesInnerAddress(_PolicyTest):
    """For Geneve traffic the instance is the inner address; too big is dropped unsignalled."""

    def runTest(self):
        self.setup_policy(fleet=True, instance=True)
        self.insert(e.instance_policy("10.1.0.9", False))
        cases = [
            (INSTANCE_V4, 8500, True),
            (INSTANCE_V4, 8501, False),
            ("10.1.0.9", 1500, True),
            ("10.1.0.9", 1501, False),
        ]
        for inner_src, size, fits in cases:
            inner = pk.tcp_packet(inner_src, INTERNET_V4, size)
            pkt = pk.geneve_packet(VTEP_REMOTE, VTEP_LOCAL, inner, option_words=2)
            before = self.stats()
            self.send(PORT_INTERNAL, pkt)
            if fits:
                self.expect_routed(pkt, TO_RACK)
            self.expect_nothing()
            delta = self.stats() - before
            expected = {} if fits else {DropReason.MTU_EXCEEDED_NO_SIGNAL: PacketsBytes(1, len(pkt))}
            self.assertEqual(delta.drops, expected, f"inner {inner_src} {size} B")
