"""The hash algorithms of v1model as BMv2 computes them.

For whoever must know which register cell a key lands in on BMv2: the PTF
suite aims packets at a meter's cell, and test_p4_flow_hash.py checks that
the elephant sketch's hashes collide independently. crc32 is zlib's.
"""

import zlib

crc32 = zlib.crc32


def crc16_arc(data: bytes) -> int:
    """HashAlgorithm.crc16: CRC-16/ARC (reflected polynomial 0x8005, initial value 0)."""
    crc = 0
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ 0xA001 if crc & 1 else crc >> 1
    return crc
