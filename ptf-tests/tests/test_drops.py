"""Every drop reason: the packet is dropped and its reason counted once."""

import struct

import finsy as fy
import packets as pk
from base import (
    INSTANCE_V4,
    INSTANCE_V6,
    INTERNET_V4,
    INTERNET_V6,
    PORT_EXTERNAL,
    PORT_INTERNAL,
    PORT_UNASSIGNED,
    TO_RACK,
    VTEP_LOCAL,
    VTEP_REMOTE,
    JumbogateTest,
)
from ptf.testutils import group
from scapy.layers.l2 import ARP, Ether

from jumbogate.p4 import DropReason, names
from jumbogate.p4 import entries as e
from jumbogate.p4.constants import MEMBERS_PER_GROUP


@group("drops")
class MalformedPackets(JumbogateTest):
    def runTest(self):
        self.add_routes()
        good_v4 = pk.tcp_packet(INTERNET_V4, INSTANCE_V4, 200)
        good_v6 = pk.tcp_packet(INTERNET_V6, INSTANCE_V6, 200)

        # TCP header cut after 10 bytes (IPv6 so the frame is above 60 bytes
        # and nothing pads it).
        truncated = Ether(bytes(good_v6)[: 14 + 40 + 10])
        self.expect_drop(PORT_EXTERNAL, truncated, DropReason.TRUNCATED)

        # IPv4 header claiming 60 bytes of which 46 arrive.
        cut_options = Ether(bytes(pk.tcp_packet(INTERNET_V4, INSTANCE_V4, 200, ip_options=b"\x01" * 40))[: 14 + 46])
        self.expect_drop(PORT_EXTERNAL, cut_options, DropReason.TRUNCATED)

        raw = bytearray(bytes(good_v4))
        raw[14] = 0x44  # version 4, IHL 4
        self.expect_drop(PORT_EXTERNAL, Ether(bytes(raw)), DropReason.IPV4_IHL_INVALID)

        raw = bytearray(bytes(good_v4))
        raw[14] = 0x65  # version 6 under EtherType IPv4
        self.expect_drop(PORT_EXTERNAL, Ether(bytes(raw)), DropReason.IP_VERSION_MISMATCH)

        raw = bytearray(bytes(good_v4))
        raw[14 + 20 + 12] = 0x40  # TCP data offset 4
        self.expect_drop(PORT_EXTERNAL, Ether(bytes(raw)), DropReason.TCP_DATA_OFFSET_INVALID)

        # Geneve announcing 10 option words (40 bytes) with 8 bytes left.
        geneve = struct.pack("!BBHI", 10, 0, 0x6558, 0x123400) + bytes(8)
        past = pk.geneve_packet(VTEP_REMOTE, VTEP_LOCAL, Ether(), geneve_bytes=geneve)
        past = Ether(bytes(past)[: 14 + 40 + 8 + len(geneve)])
        self.expect_drop(PORT_INTERNAL, past, DropReason.GENEVE_OPTIONS_PAST_PACKET)

        self.expect_drop(PORT_EXTERNAL, Ether(dst="ff:ff:ff:ff:ff:ff") / ARP(pdst=INSTANCE_V4), DropReason.NOT_IP)


@group("drops")
class ForwardingDrops(JumbogateTest):
    def runTest(self):
        self.add_routes()
        self.expect_drop(PORT_EXTERNAL, pk.tcp_packet(INTERNET_V4, INSTANCE_V4, 100, ttl=1), DropReason.TTL_EXPIRED)
        self.expect_drop(PORT_EXTERNAL, pk.tcp_packet(INTERNET_V4, INSTANCE_V4, 100, ttl=0), DropReason.TTL_EXPIRED)
        self.expect_drop(PORT_EXTERNAL, pk.tcp_packet(INTERNET_V6, INSTANCE_V6, 100, ttl=1), DropReason.HOP_LIMIT_EXPIRED)
        self.expect_drop(PORT_EXTERNAL, pk.tcp_packet(INTERNET_V4, "192.0.2.1", 100), DropReason.NO_ROUTE)
        self.expect_drop(PORT_EXTERNAL, pk.tcp_packet(INTERNET_V6, "2001:db8:ffff::1", 100), DropReason.NO_ROUTE)
        self.expect_drop(PORT_UNASSIGNED, pk.tcp_packet(INTERNET_V4, INSTANCE_V4, 100), DropReason.PORT_ROLE_UNASSIGNED)
        # A TTL of 2 still goes through, leaving with 1.
        pkt = pk.tcp_packet(INTERNET_V4, INSTANCE_V4, 100, ttl=2)
        self.send(PORT_EXTERNAL, pkt)
        self.expect_routed(pkt, TO_RACK)


@group("drops")
class EmptyNextHopGroup(JumbogateTest):
    """A route to a next-hop group whose members are all gone is no route:
    the packet is dropped and counted, not sent to some port. (BMv2 refuses
    an entry that points at a group while it is empty, so the group is
    emptied under an entry that already uses it, as a controller removing
    its last next hop would.)"""

    def runTest(self):
        self.add_routes()
        group_id = 9
        filled = e.ecmp_group(group_id, [TO_RACK])
        self.insert(filled, e.route("192.0.2.0/24", group_id))
        pkt = pk.tcp_packet(INTERNET_V4, "192.0.2.1", 100)
        self.send(PORT_EXTERNAL, pkt)
        self.expect_routed(pkt, TO_RACK)
        self.modify(fy.P4ActionProfileGroup(names.ECMP_SELECTOR, group_id=group_id, max_size=MEMBERS_PER_GROUP, members=[]))
        if self.target == "bmv2":
            # BMv2 stops the pipeline at the empty group (see the v1model
            # top): the packet is dropped, but nothing after the lookup runs,
            # the drop counter included.
            self.send(PORT_EXTERNAL, pkt)
            self.expect_nothing()
        else:
            self.expect_drop(PORT_EXTERNAL, pkt, DropReason.NO_ROUTE)


@group("drops")
class MtuDrops(JumbogateTest):
    """MTU reasons that produce no ICMP (the signalled ones are in test_jumbo)."""

    def runTest(self):
        self.add_routes()
        self.jumbo(False)
        # IPv4 without DF: never fragmented, dropped.
        self.expect_drop(PORT_EXTERNAL, pk.tcp_packet(INTERNET_V4, INSTANCE_V4, 1501, df=False), DropReason.MTU_EXCEEDED_NO_DF)
        # Geneve traffic: the signal would belong inside the tunnel.
        inner = pk.tcp_packet(INSTANCE_V4, INTERNET_V4, 1600)
        self.expect_drop(PORT_INTERNAL, pk.geneve_packet(VTEP_REMOTE, VTEP_LOCAL, inner), DropReason.MTU_EXCEEDED_NO_SIGNAL)
        # Rate-limited signals are covered by test_jumbo.IcmpMeterLimitsSignals.
