"""Base class and topology of the jumbogate PTF suite.

Every test starts from a clean switch (fabric-tna's auto-cleanup idea, done
bluntly): all table entries, groups and members are deleted, keyless tables
go back to their default actions, meters a test configured are reset, and
port roles are written again. Entries are built with jumbogate.p4.entries,
the code the controller uses.

Test parameters (ptf --test-params): grpc_addr, p4info, p4blob, depth.
"""

from __future__ import annotations

from pathlib import Path

import packets as pk
import ptf
from p4rt import SyncSwitch
from ptf import testutils
from ptf.base_tests import BaseTest

from jumbogate.p4 import entries as e
from jumbogate.p4 import stats as p4stats
from jumbogate.p4.constants import ICMP_SOURCE_METER_SIZE, PortRole

# Test ports (PTF port n is switch port n).
PORT_EXTERNAL = 0
PORT_INTERNAL = 1
PORT_NIC = 2
PORT_EXTERNAL_2 = 3
PORT_EXTERNAL_3 = 4
PORT_UNASSIGNED = 5
ALL_PORTS = (0, 1, 2, 3, 4, 5)
ROLES = {
    PORT_EXTERNAL: PortRole.EXTERNAL,
    PORT_INTERNAL: PortRole.INTERNAL,
    PORT_NIC: PortRole.NIC,
    PORT_EXTERNAL_2: PortRole.EXTERNAL,
    PORT_EXTERNAL_3: PortRole.EXTERNAL,
}

# Addresses. Instances live in the rack behind PORT_INTERNAL; the Internet
# is behind PORT_EXTERNAL.
INTERNET_V4 = "198.51.100.10"
INTERNET_NET_V4 = "198.51.100.0/24"
INSTANCE_V4 = "10.1.0.5"
INSTANCE_NET_V4 = "10.1.0.0/16"
INTERNET_V6 = "2001:db8:100::10"
INTERNET_NET_V6 = "2001:db8:100::/48"
INSTANCE_V6 = "fd00:1::5"
INSTANCE_NET_V6 = "fd00:1::/32"
# Rack underlay (Geneve tunnel endpoints).
VTEP_REMOTE = "fd99::2"
VTEP_NET = "fd99::/64"
VTEP_LOCAL = "fd99::1"

GROUP_TO_INTERNET = 1
GROUP_TO_RACK = 2
GROUP_TO_UNDERLAY = 3

SWITCH_MAC_EXTERNAL = "00:00:00:00:e0:00"
SWITCH_MAC_INTERNAL = "00:00:00:00:10:00"
PEER_MAC_EXTERNAL = "00:00:00:00:e0:01"
PEER_MAC_INTERNAL = "00:00:00:00:10:01"
TO_INTERNET = e.NextHop(PORT_EXTERNAL, SWITCH_MAC_EXTERNAL, PEER_MAC_EXTERNAL)
TO_RACK = e.NextHop(PORT_INTERNAL, SWITCH_MAC_INTERNAL, PEER_MAC_INTERNAL)

_switch: SyncSwitch | None = None
_configured_meters: set[int] = set()
_configured_source_meters = False


def meter_refills(packets_per_second: int, flood_seconds: float) -> int:
    """Tokens a meter may regain while a flood is sent: one for the token in
    progress, one more per whole period the sending took (a loaded machine
    sends slowly; the bound follows the clock instead of guessing)."""
    return 1 + int(flood_seconds * packets_per_second)


def shared_switch() -> SyncSwitch:
    """One P4Runtime connection per PTF run; the pipeline is pushed once."""
    global _switch
    if _switch is None:
        _switch = SyncSwitch(
            testutils.test_param_get("grpc_addr"),
            Path(testutils.test_param_get("p4info")),
            Path(testutils.test_param_get("p4blob")),
        )
    return _switch


def depth_profile() -> int:
    return int(testutils.test_param_get("depth"))


class JumbogateTest(BaseTest):
    """A clean switch with port roles set; helpers for entries and packets."""

    def setUp(self):
        super().setUp()
        self.dataplane = ptf.dataplane_instance
        self.sw = shared_switch()
        self.sw.delete_all()
        global _configured_source_meters
        if _configured_meters:
            self.sw.modify([e.icmp_meter_reset(port) for port in _configured_meters])
            _configured_meters.clear()
        if _configured_source_meters:
            self.sw.modify([e.icmp_source_meter_reset(cell) for cell in range(ICMP_SOURCE_METER_SIZE)])
            _configured_source_meters = False
        self.sw.insert([e.port_role(port, role) for port, role in ROLES.items()])
        self.dataplane.flush()

    @property
    def target(self) -> str:
        """'soft' (jumbogate-switch) or 'bmv2'."""
        return testutils.test_param_get("target")

    def tearDown(self):
        self.dataplane.flush()
        super().tearDown()

    # -- programming ---------------------------------------------------------------

    def insert(self, *entities):
        self.sw.insert(_flatten(entities))

    def modify(self, *entities):
        self.sw.modify(_flatten(entities))

    def set_meter(self, port: int, packets_per_second: int, burst: int):
        _configured_meters.add(port)
        self.sw.modify([e.icmp_meter(port, packets_per_second, burst)])

    def set_source_meters(self, packets_per_second: int, burst: int):
        """The same budget for every source cell of icmp_source_meter."""
        global _configured_source_meters
        _configured_source_meters = True
        self.sw.modify([e.icmp_source_meter(cell, packets_per_second, burst) for cell in range(ICMP_SOURCE_METER_SIZE)])

    def add_routes(self):
        """Internet behind PORT_EXTERNAL, instances behind PORT_INTERNAL, underlay too."""
        self.insert(
            e.ecmp_group(GROUP_TO_INTERNET, [TO_INTERNET]),
            e.ecmp_group(GROUP_TO_RACK, [TO_RACK]),
            e.route(INTERNET_NET_V4, GROUP_TO_INTERNET),
            e.route(INTERNET_NET_V6, GROUP_TO_INTERNET),
            e.route(INSTANCE_NET_V4, GROUP_TO_RACK),
            e.route(INSTANCE_NET_V6, GROUP_TO_RACK),
            e.route(VTEP_NET, GROUP_TO_RACK),
        )

    def jumbo(self, fleet: bool, instances=(), off_instances=()):
        self.modify(e.fleet_flag(fleet))
        entries = [e.instance_policy(a, True) for a in instances]
        entries += [e.instance_policy(a, False) for a in off_instances]
        if entries:
            self.insert(entries)

    def stats(self) -> p4stats.DataplaneStats:
        return p4stats.stats_from_entries(self.sw.read(p4stats.counter_requests()))

    # -- packets ---------------------------------------------------------------------

    def send(self, port: int, pkt):
        testutils.send_packet(self, port, pkt)

    def expect(self, pkt, port: int):
        testutils.verify_packet(self, pkt, port)

    def expect_nothing(self):
        testutils.verify_no_other_packets(self)

    def expect_routed(self, pkt, hop: e.NextHop):
        self.expect(pk.routed(pkt, hop.src_mac, hop.dst_mac), hop.port)

    def expect_drop(self, pkt_port, pkt, reason):
        """Send, see nothing come out, and see the drop reason counted once."""
        before = self.stats()
        self.send(pkt_port, pkt)
        self.expect_nothing()
        delta = self.stats() - before
        self.assertEqual(delta.drops.get(reason, p4stats.PacketsBytes()).packets, 1, f"drop reason {reason.name} not counted: {delta.drops}")
        self.assertEqual(set(delta.drops), {reason}, f"unexpected drop reasons {delta.drops}")


def _flatten(items):
    out = []
    for item in items:
        if isinstance(item, (list, tuple)):
            out.extend(_flatten(item))
        else:
            out.append(item)
    return out
