"""Data-plane constants the controller needs, from p4src/include/defines.p4.

Nothing here is typed twice: the values come from the generated `defines`
module (jumbogate/p4/generate.py, run by make proto), and the enums are made
of its constants by prefix. Only MEMBERS_PER_GROUP is the controller's own.
"""

from __future__ import annotations

import enum

from . import defines


def enum_of(name: str, prefix: str, doc: str) -> type[enum.IntEnum]:
    """An IntEnum of every defines.p4 constant named PREFIX<MEMBER> (sizes, *_SIZE, left out)."""
    members = {key.removeprefix(prefix): value for key, value in vars(defines).items() if key.startswith(prefix) and not key.endswith("_SIZE")}
    if not members:
        raise ImportError(f"defines.p4 has no constant named {prefix}*: regenerate with make proto")
    made = enum.IntEnum(name, members, module=__name__)
    made.__doc__ = doc
    return made


PortRole = enum_of("PortRole", "PORT_ROLE_", "Role of a switch port (the `port_roles` table).")
Path = enum_of("Path", "PATH_", "Indices of the `paths` counter.")
IcmpSignal = enum_of("IcmpSignal", "ICMP_COUNTER_", "Indices of the `icmp_signals` counter.")

MTU_STANDARD = defines.MTU_STANDARD
MTU_JUMBO = defines.MTU_JUMBO
MTU_IPV6_MINIMUM = defines.MTU_IPV6_MINIMUM
ICMPV4_QUOTE_BYTES = defines.ICMPV4_QUOTE_BYTES
ICMPV6_QUOTE_BYTES = defines.ICMPV6_QUOTE_BYTES
PORT_COUNTER_SIZE = defines.PORT_COUNTER_SIZE
ICMP_METER_SIZE = defines.ICMP_METER_SIZE
ICMP_SOURCE_METER_SIZE = defines.ICMP_SOURCE_METER_SIZE
ELEPHANT_EPOCH_LOG2_US = defines.ELEPHANT_EPOCH_LOG2_US
# Members of one ECMP group get ids group_id * MEMBERS_PER_GROUP + i.
MEMBERS_PER_GROUP = 64
