"""jumbogate.p4.constants mirrors p4src/include/defines.p4."""

import re
from pathlib import Path

import pytest

from jumbogate.p4 import IcmpSignal, PortRole, constants
from jumbogate.p4 import Path as DataPath

DEFINES = Path(__file__).resolve().parents[2] / "p4src" / "include" / "defines.p4"
pytestmark = pytest.mark.skipif(not DEFINES.exists(), reason="P4 sources not in this checkout")


def p4_values() -> dict[str, int]:
    values = {}
    for match in re.finditer(r"^\s*const\s+\S+\s+(\w+)\s*=\s*(\w+)\s*;", DEFINES.read_text(), re.M):
        values[match.group(1)] = int(match.group(2), 0)
    for match in re.finditer(r"^#define\s+(\w+)\s+(\d+)\s*$", DEFINES.read_text(), re.M):
        values[match.group(1)] = int(match.group(2))
    return values


def test_port_roles_match():
    values = p4_values()
    for role in PortRole:
        assert values[f"PORT_ROLE_{role.name}"] == role.value


def test_counter_indices_match():
    values = p4_values()
    for path in DataPath:
        assert values[f"PATH_{path.name}"] == path.value
    for signal in IcmpSignal:
        assert values[f"ICMP_COUNTER_{signal.name}"] == signal.value


def test_sizes_match():
    values = p4_values()
    assert values["MTU_STANDARD"] == constants.MTU_STANDARD
    assert values["MTU_JUMBO"] == constants.MTU_JUMBO
    assert values["MTU_IPV6_MINIMUM"] == constants.MTU_IPV6_MINIMUM
    assert values["ICMPV4_QUOTE_BYTES"] == constants.ICMPV4_QUOTE_BYTES
    assert values["ICMPV6_QUOTE_BYTES"] == constants.ICMPV6_QUOTE_BYTES
    assert values["PORT_COUNTER_SIZE"] == constants.PORT_COUNTER_SIZE
    assert values["ICMP_METER_SIZE"] == constants.ICMP_METER_SIZE
    assert values["ICMP_SOURCE_METER_SIZE"] == constants.ICMP_SOURCE_METER_SIZE
    assert values["ELEPHANT_EPOCH_LOG2_US"] == constants.ELEPHANT_EPOCH_LOG2_US
    # An ICMP error is at most 576 (IPv4) / 1280 (IPv6) bytes.
    assert 20 + 8 + constants.ICMPV4_QUOTE_BYTES == 576
    assert 40 + 8 + constants.ICMPV6_QUOTE_BYTES == 1280


def test_the_generated_names_are_every_object_of_both_profiles_p4info():
    """names.py (make proto) holds each table, action, counter, meter, register, digest and action profile by alias,
    and both parse-depth profiles name the same objects."""
    from finsy.proto import p4i
    from google.protobuf import text_format

    from jumbogate.p4 import names

    compiled = DEFINES.parents[1] / "compiled"
    for profile in ("depth256", "depth512"):
        info = text_format.Parse((compiled / profile / "jumbogate.p4info.txtpb").read_text(), p4i.P4Info())
        for kind, listed in (("tables", names.TABLES), ("actions", names.ACTIONS), ("counters", names.COUNTERS), ("meters", names.METERS),
                             ("registers", names.REGISTERS), ("digests", names.DIGESTS), ("action_profiles", names.ACTION_PROFILES)):  # fmt: skip
            assert sorted(listed) == sorted(obj.preamble.alias for obj in getattr(info, kind)), (profile, kind)
    assert names.ELEPHANT_DIGEST == "elephant_digest_t" and names.NO_ACTION == "NoAction" and names.PORT_ROLES == "port_roles"


def test_every_defines_p4_constant_is_generated():
    from jumbogate.p4 import defines

    assert {name: getattr(defines, name) for name in p4_values()} == p4_values()
