"""Data-plane constants the controller needs, mirrored from p4src/include/defines.p4.

controlplane/tests/test_p4_constants.py checks every value here against
defines.p4, so the two cannot drift apart silently.
"""

import enum


class PortRole(enum.IntEnum):
    """Role of a switch port (the `port_roles` table)."""

    UNASSIGNED = 0
    EXTERNAL = 1  # the 1500-byte Internet side
    INTERNAL = 2  # the rack
    NIC = 3  # the SmartNIC that merges and splits
    CPU = 4  # the switch CPU port


class Path(enum.IntEnum):
    """Indices of the `paths` counter."""

    BYPASS = 0  # routed straight
    MERGE = 1  # steered to the SmartNIC
    NIC_RETURN = 2  # came back from the SmartNIC and was routed
    DEPTH_FORWARDED = 3  # too deep to parse, routed on its outer headers


class IcmpSignal(enum.IntEnum):
    """Indices of the `icmp_signals` counter."""

    IPV4_FRAG_NEEDED = 0
    IPV6_PACKET_TOO_BIG = 1


MTU_STANDARD = 1500
MTU_JUMBO = 8500
MTU_IPV6_MINIMUM = 1280
ICMPV4_QUOTE_BYTES = 548
ICMPV6_QUOTE_BYTES = 1232
PORT_COUNTER_SIZE = 512
ICMP_METER_SIZE = 512
ICMP_SOURCE_METER_SIZE = 256
ELEPHANT_EPOCH_LOG2_US = 20
# Members of one ECMP group get ids group_id * MEMBERS_PER_GROUP + i.
MEMBERS_PER_GROUP = 64
