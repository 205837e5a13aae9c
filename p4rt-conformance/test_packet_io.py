"""Packet I/O (P4Runtime "Packet I/O"), the scenarios of p4lang PI's server packet I/O tests: a packet-out is
injected into the pipeline, a packet sent to the CPU port reaches the primary byte for byte, and only the
primary sends and receives packets."""

from __future__ import annotations

import queue

import pytest
from p4.v1 import p4runtime_pb2
from target import CPU_PORT, OK, PERMISSION_DENIED, checksum, insert, udp_frame

SRC_MAC, DST_MAC = b"\x02\0\0\0\0\x01", b"\x02\0\0\0\0\x02"


def forwarded(frame: bytes) -> bytes:
    """The frame as routing leaves it: TTL one less, the IPv4 checksum again."""
    out = bytearray(frame)
    out[22] -= 1
    out[24:26] = b"\0\0"
    out[24:26] = checksum(bytes(out[14:34])).to_bytes(2, "big")
    return bytes(out)


def routed(primary, program, port: int) -> None:
    assert primary.write(program.route_to(port, SRC_MAC, DST_MAC)) == [OK] * 4


def test_a_packet_out_is_forwarded_by_the_pipeline(target, primary, program):
    routed(primary, program, 0)
    # A packet-out enters the pipeline at the CPU port, which needs a role like any port.
    assert primary.write([insert(program.port_role(CPU_PORT))]) == [OK]
    frame = udp_frame(b"packet-out " + bytes(range(50)))
    primary.send(p4runtime_pb2.StreamMessageRequest(packet=p4runtime_pb2.PacketOut(payload=frame)))
    seen = target.veth.receive(lambda f: f[12:14] == b"\x08\x00" and b"packet-out " in f)
    assert seen is not None
    assert seen[: len(frame)] == forwarded(frame)


def test_a_packet_to_the_cpu_port_reaches_the_primary_byte_for_byte(target, primary, program):
    routed(primary, program, CPU_PORT)
    for size in (64, 1000):
        frame = udp_frame(bytes((i * 7 + 3) % 256 for i in range(size - 42)))
        target.veth.send(frame)
        packet = primary.next("packet")
        assert packet.payload == forwarded(frame)


@pytest.mark.bmv2_deviates("no StreamError for a backup's packet-out")
def test_a_packet_out_from_a_backup_is_refused_with_the_packet(primary, controllers, program):
    backup = controllers((0, 1))
    assert backup.arbitrate().status.code != OK
    frame = udp_frame(b"from a backup")
    backup.send(p4runtime_pb2.StreamMessageRequest(packet=p4runtime_pb2.PacketOut(payload=frame)))
    error = backup.next("error")
    assert error.canonical_code == PERMISSION_DENIED
    assert error.packet_out.packet_out.payload == frame


def test_packet_in_goes_to_the_primary_only(target, primary, controllers, program):
    backup = controllers((0, 1))
    assert backup.arbitrate().status.code != OK
    routed(primary, program, CPU_PORT)
    target.veth.send(udp_frame(b"for the primary"))
    assert b"for the primary" in primary.next("packet").payload
    try:
        message = backup.next("packet", timeout=0.5)
    except queue.Empty:
        message = None
    assert message is None


@pytest.mark.jumbogate_switch_only
def test_a_packet_out_that_is_not_a_frame_is_refused(primary):
    """jumbogate-switch refuses a payload shorter than an Ethernet header with a StreamError; the specification
    asks nothing of the payload, so this has no BMv2 run."""
    primary.send(p4runtime_pb2.StreamMessageRequest(packet=p4runtime_pb2.PacketOut(payload=b"short")))
    assert primary.next("error").canonical_code != OK
