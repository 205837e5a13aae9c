"""Byte strings (P4Runtime "Bytestrings"), as p4lang PI's server bytestring tests check them: a value may come
with leading zeros, is read back in its shortest form, and a value wider than its field is refused."""

from __future__ import annotations

import pytest
from p4.v1 import p4runtime_pb2
from target import ALREADY_EXISTS, INVALID_ARGUMENT, OK, insert


def roles(primary, program):
    query = p4runtime_pb2.TableEntry(table_id=program.tables["port_roles"].preamble.id)
    return [e.table_entry for e in primary.read([p4runtime_pb2.Entity(table_entry=query)])]


def test_leading_zeros_are_accepted_and_read_back_canonical(primary, program):
    padded = program.port_role(4)
    padded.table_entry.match[0].exact.value = b"\x00\x00\x00\x04"
    padded.table_entry.action.action.params[0].value = b"\x00\x01"
    assert primary.write([insert(padded)]) == [OK]
    (entry,) = roles(primary, program)
    assert entry.match[0].exact.value == b"\x04"
    assert entry.action.action.params[0].value == b"\x01"


def test_the_same_value_in_another_spelling_is_the_same_key(primary, program):
    assert primary.write([insert(program.port_role(4))]) == [OK]
    padded = program.port_role(4)
    padded.table_entry.match[0].exact.value = b"\x00\x04"
    assert primary.write([insert(padded)]) == [ALREADY_EXISTS]


def test_a_value_wider_than_its_field_is_refused(primary, program):
    wide_key = program.port_role(4)
    wide_key.table_entry.match[0].exact.value = (512).to_bytes(2, "big")  # port is bit<9>
    wide_param = program.port_role(5, role=8)  # role is bit<3>
    assert primary.write([insert(wide_key), insert(wide_param)]) == [INVALID_ARGUMENT, INVALID_ARGUMENT]
    assert roles(primary, program) == []


def test_the_widest_value_of_a_field_fits(primary, program):
    assert primary.write([insert(program.port_role(511, role=7))]) == [OK]
    (entry,) = roles(primary, program)
    assert entry.match[0].exact.value == b"\x01\xff"


@pytest.mark.bmv2_deviates("an empty exact value is taken as 0 and the entry inserted")
def test_an_empty_value_is_refused(primary, program):
    empty = program.port_role(4)
    empty.table_entry.match[0].exact.value = b""
    assert primary.write([insert(empty)]) == [INVALID_ARGUMENT]


def test_an_lpm_value_with_host_bits_is_refused(primary, program):
    route = program.entry(
        "routes_v4",
        [
            p4runtime_pb2.FieldMatch(
                field_id=program.field("routes_v4", "dst_addr"), lpm=p4runtime_pb2.FieldMatch.LPM(value=bytes([10, 1, 2, 3]), prefix_len=16)
            )
        ],
        program.action("set_next_hop_group", group_id=b"\x01"),
    )
    assert primary.write([insert(route)]) == [INVALID_ARGUMENT]
