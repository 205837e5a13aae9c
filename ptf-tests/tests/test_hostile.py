"""Hostile packets: lengths that lie, signals that must not be sent, and
fragments whose payload looks like an L4 header."""

import ipaddress
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
    PORT_NIC,
    TO_RACK,
    JumbogateTest,
    meter_refills,
)
from ptf.testutils import group
from scapy.layers.inet import ICMP, IP, TCP
from scapy.layers.inet6 import ICMPv6DestUnreach, IPv6
from scapy.packet import Raw

from jumbogate.p4 import DropReason, IcmpSignal, Path, names
from jumbogate.p4 import entries as e
from jumbogate.p4.constants import ICMP_SOURCE_METER_SIZE
from jumbogate.p4.hashes import crc16_arc


class _HostileTest(JumbogateTest):
    def setUp(self):
        super().setUp()
        self.add_routes()
        self.insert(e.path_mtu(INTERNET_NET_V4, 9000), e.path_mtu(INTERNET_NET_V6, 9000))
        # Both instances at the standard 1500: 1600-byte packets to them are
        # oversized and, with DF, signalled.
        self.jumbo(False)


def claiming(pkt, claimed_ip_length: int):
    """The packet with its IP length field set to a lie (checksums recomputed
    over the lie, as a forger would)."""
    forged = pkt.copy()
    if IP in forged:
        forged[IP].len = claimed_ip_length
        del forged[IP].chksum
    else:
        forged[IPv6].plen = claimed_ip_length - 40
    return forged.__class__(bytes(forged))


@group("hostile")
class ClaimedLengthPastFrameDropped(_HostileTest):
    """A 100-byte packet claiming 8500 bytes with DF: before, it drew an ICMP
    error (and counted 8500 bytes to the elephant sketch); now it is dropped
    with its own reason and signals nothing."""

    def runTest(self):
        for src, dst in ((INTERNET_V4, INSTANCE_V4), (INTERNET_V6, INSTANCE_V6)):
            small = pk.tcp_packet(src, dst, 100, sport=41000, dport=443)
            before = self.stats()
            self.expect_drop(PORT_EXTERNAL, claiming(small, 8500), DropReason.IP_LENGTH_PAST_FRAME)
            self.assertEqual(dict((self.stats() - before).icmp_signals), {}, "no signal for a lie")
        # Ethernet padding (a frame longer than its IP packet) is normal.
        padded = pk.tcp_packet(INTERNET_V4, INSTANCE_V4, 100, sport=41001, dport=443) / Raw(b"\0" * 40)
        self.send(PORT_EXTERNAL, padded)
        self.expect_routed(padded, TO_RACK)
        self.expect_nothing()


@group("hostile")
class NoSignalAboutIcmpErrorsOrGroups(_HostileTest):
    """RFC 1812 4.3.2.7: no ICMP error about an ICMP error, or to a source
    that is not one host. An oversized echo request still gets its signal."""

    def runTest(self):
        quote = Raw(b"\x45" + b"\0" * 1599)
        unreachable_v4 = pk.ether() / IP(src=INTERNET_V4, dst=INSTANCE_V4, flags="DF") / ICMP(type=3, code=1) / quote
        unreachable_v6 = pk.ether() / IPv6(src=INTERNET_V6, dst=INSTANCE_V6) / ICMPv6DestUnreach() / quote
        multicast_v4 = pk.tcp_packet("224.0.0.9", INSTANCE_V4, 1600)
        broadcast_v4 = pk.tcp_packet("255.255.255.255", INSTANCE_V4, 1600)
        unspecified_v4 = pk.tcp_packet("0.0.0.0", INSTANCE_V4, 1600)
        multicast_v6 = pk.tcp_packet("ff02::1", INSTANCE_V6, 1600)
        for pkt in (unreachable_v4, unreachable_v6, multicast_v4, broadcast_v4, unspecified_v4, multicast_v6):
            before = self.stats()
            self.expect_drop(PORT_EXTERNAL, pkt, DropReason.MTU_EXCEEDED_NO_SIGNAL)
            self.assertEqual(dict((self.stats() - before).icmp_signals), {}, pkt.summary())
        echo = pk.icmp_echo(INTERNET_V4, INSTANCE_V4, 1600)
        before = self.stats()
        self.send(PORT_EXTERNAL, echo)
        self.expect(pk.expected_icmp(echo, 1500), PORT_EXTERNAL)
        self.assertEqual((self.stats() - before).icmp_signals[IcmpSignal.IPV4_FRAG_NEEDED].packets, 1)


def fragment(offset_words: int, more: bool, payload: bytes):
    """An IPv4 fragment of a TCP packet to the instance, port 443 flow."""
    ip = IP(src=INTERNET_V4, dst=INSTANCE_V4, proto=6, id=77, frag=offset_words, flags="MF" if more else 0)
    return pk.ether() / ip / Raw(payload)


@group("hostile")
class LaterFragmentsAreNotParsedAsL4(_HostileTest):
    """Only a first fragment starts with the TCP header. A middle or last
    fragment whose payload would read as a TCP header with data offset 0
    (malformed) and a merge-service port is not dropped, and not matched as
    TCP: it goes to the SmartNIC as every later IPv4 fragment from outside
    does (it may be a path MTU probe's, PathProbes in steering.p4), which
    hands what is not a probe's back to be routed. Without a SmartNIC port
    it is routed."""

    def runTest(self):
        self.jumbo(True, instances=[INSTANCE_V4])
        self.insert(e.merge_service("10.1.0.0/24", 5201, 5201))
        # Bytes that, read as TCP, say: ports 40000 -> 5201, data offset 0.
        looks_like_tcp = bytes(TCP(sport=40000, dport=5201, dataofs=0))[:20] + b"\0" * 180
        first = pk.ether() / IP(src=INTERNET_V4, dst=INSTANCE_V4, id=77, flags="MF") / TCP(sport=40000, dport=5201) / Raw(b"\0" * 180)
        later = (fragment(25, True, looks_like_tcp), fragment(50, False, looks_like_tcp))
        for pkt in later:
            self.send(PORT_EXTERNAL, pkt)
            self.expect_routed(pkt, TO_RACK)
        self.expect_nothing()

        self.modify(e.nic_port(PORT_NIC))
        before = self.stats()
        # The first fragment is TCP to a merge service: the merge path.
        self.send(PORT_EXTERNAL, first)
        self.expect(first, PORT_NIC)
        for pkt in later:
            self.send(PORT_EXTERNAL, pkt)
            self.expect(pkt, PORT_NIC)
        self.expect_nothing()
        delta = self.stats() - before
        self.assertEqual(dict(delta.drops), {}, "no fragment dropped")
        self.assertEqual(delta.paths[Path.MERGE].packets, 3)
        self.assertNotIn(Path.BYPASS, delta.paths)


@group("hostile")
class SketchCountsBytesOnTheWire(_HostileTest):
    """The elephant sketch adds each frame's length as received, not the
    length its IP header claims: 15 frames of 1400 bytes carrying 100-byte
    IP packets (the rest padding) cross a 20,000-byte threshold. Counting
    claimed lengths, they would add up to 1,500 bytes; counting them let a
    small frame that claimed a large length weigh as much as a real one."""

    def runTest(self):
        threshold = 20_000
        self.modify(e.nic_port(PORT_NIC), e.elephant_threshold(threshold))
        self.jumbo(True, instances=[INSTANCE_V4])
        self.sw.start_digests(names.ELEPHANT_DIGEST)
        self.insert(e.elephant_digest(max_timeout_ns=0, max_list_size=1))
        self.sw.drain_digests(wait_s=0.2)
        # The 15 frames must fall in one sketch epoch (2^20 us); on a slow
        # target a burst may straddle a boundary, so a fresh flow tries again.
        for attempt in range(3):
            sport = 42000 + attempt
            frame = pk.tcp_packet(INTERNET_V4, INSTANCE_V4, 100, sport=sport, dport=443) / Raw(b"\0" * 1286)
            self.assertEqual(len(frame), 1400)
            for _ in range(15):
                self.send(PORT_EXTERNAL, frame)
            for _ in range(15):
                self.expect_routed(frame, TO_RACK)
            got = self.sw.drain_digests(wait_s=1.0)
            if got:
                break
        self.assertEqual(len(got), 1, got)
        report = e.decode_elephant_digest(got[0])
        self.assertEqual(report.flow.src_port, sport)
        self.assertGreaterEqual(report.estimated_bytes, threshold)


def source_cell(address: str) -> int:
    """The icmp_source_meter cell of an IPv4 source: its /24, as 16 bytes."""
    prefix = ipaddress.ip_network(f"{address}/24", strict=False).network_address.packed
    return crc16_arc(bytes(12) + prefix) % ICMP_SOURCE_METER_SIZE


@group("hostile")
class OneSenderCannotSilenceAPort(_HostileTest):
    """A flood of oversized packets from one source prefix spends that
    prefix's budget (icmp_source_meter), not the port's: another sender on
    the same port still gets its signal. Before, the one per-port meter went
    red for everyone, a path-MTU black hole for ~100 packets a second."""

    def runTest(self):
        self.set_meter(PORT_EXTERNAL, packets_per_second=100, burst=25)
        self.set_source_meters(packets_per_second=1, burst=2)
        flooder, other = "198.51.100.10", "203.0.113.77"
        self.assertNotEqual(source_cell(flooder), source_cell(other), "the test needs two cells")
        before = self.stats()
        flood = 12
        started = time.monotonic()
        for i in range(flood):
            self.send(PORT_EXTERNAL, pk.tcp_packet(flooder, INSTANCE_V4, 1600, sport=7100 + i))
        refills = meter_refills(1, time.monotonic() - started)
        signals = 0
        while isinstance(self.dataplane.poll(port_number=PORT_EXTERNAL, timeout=1), self.dataplane.PollSuccess):
            signals += 1
        # The burst of 2, and what refilled while flooding.
        self.assertGreaterEqual(signals, 2, f"{signals} ICMP errors for {flood} packets from one prefix")
        self.assertLessEqual(signals, 2 + refills, f"{signals} ICMP errors for {flood} packets from one prefix")
        delta = self.stats() - before
        self.assertEqual(delta.drops[DropReason.ICMP_RATE_LIMITED].packets, flood - signals)
        victim = pk.tcp_packet(other, INSTANCE_V4, 1600, sport=7200)
        self.send(PORT_EXTERNAL, victim)
        self.expect(pk.expected_icmp(victim, 1500), PORT_EXTERNAL)
        self.expect_nothing()
