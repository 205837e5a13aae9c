"""The elephant sketch's hashes, as BMv2 runs them, collide independently.

A count-min sketch is as good as its rows are independent: a flow's
estimate is its smallest counter, so a mouse that shares one row's cell with
an elephant is saved by the other rows. A CRC is affine in its message, so
salting one field list (as the program once did) moves every flow's hash by
the same constant: two flows that share one row's cell share them all, and a
mouse beside an elephant is reported as one (switch/tests/test_sketch.c
shows it through jumbogate-switch's pipeline; p4src/include/flow_hash.p4
says what each hash is now).

This test reads each hash the sketch and the Bloom filter use from the
committed BMv2 JSON (the calculation's algorithm, and which flow field each
of its inputs is, in order), computes them the way a CRC over those fields
does, and counts how often random flows that share row 0's cell also share
another row's, or both Bloom cells.
"""

import itertools
import json
import random
from pathlib import Path

import pytest

from jumbogate.p4.hashes import crc16_arc, crc32

REPO = Path(__file__).resolve().parents[2]
COMPILED = REPO / "p4src" / "compiled"
FLOWS = 40_000
FIELD_BITS = {"ip_version": 4, "src_addr": 128, "dst_addr": 128, "protocol": 8, "src_port": 16, "dst_port": 16}


ALGORITHMS = {"crc32": crc32, "crc16": crc16_arc}


def flow_field(name: str) -> str:
    """'local_metadata_t._flow_src_addr14' -> 'src_addr'."""
    matches = [field for field in FIELD_BITS if f"_flow_{field}" in name]
    assert len(matches) == 1, f"hash input {name} is not one flow field"
    return matches[0]


def sketch_hashes(program: dict) -> dict[str, tuple[str, list, int]]:
    """Each hash of count_flow and mark_reported: output -> (algorithm, inputs, size).

    An input is a flow field's name, or (value, bits) for a constant; p4c copies
    the fields (and constants) into temporaries just before the hash, in the
    actions themselves."""
    calculations = {c["name"]: c for c in program["calculations"]}
    scalar_bits = {name: bits for header in program["header_types"] if header["name"].startswith("scalars") for name, bits, *_ in header["fields"]}
    hashes = {}
    for action in program["actions"]:
        if not action["name"].endswith(("flow_sketch.count_flow", "reported_filter.mark_reported")):
            continue
        copied = {}
        for primitive in action["primitives"]:
            params = primitive["parameters"]
            if primitive["op"] == "assign":
                target, source = params[0]["value"][1], params[1]
                if source["type"] == "field" and target.startswith("tmp"):
                    copied[target] = flow_field(source["value"][1])
                elif source["type"] == "hexstr":  # a constant, such as a salt
                    copied[target] = (int(source["value"], 16), scalar_bits[target])
            elif primitive["op"] == "modify_field_with_hash_based_offset":
                calculation = calculations[params[2]["value"]]
                inputs = []
                for item in calculation["input"]:
                    if item["type"] == "field":
                        name = item["value"][1]
                        inputs.append(copied[name] if name in copied else flow_field(name))
                    else:
                        value = item["value"]
                        inputs.append((int(value, 16), item.get("bitwidth", 4 * (len(value) - 2))))
                hashes[params[0]["value"][1]] = (calculation["algo"], inputs, int(params[3]["value"], 16))
    return hashes


def cell(hash_spec: tuple[str, list, int], flow: dict[str, int]) -> int:
    """The fields packed bit after bit, most significant first, padded to whole bytes."""
    algorithm, inputs, size = hash_spec
    bits = width = 0
    for item in inputs:
        value, item_bits = (flow[item], FIELD_BITS[item]) if isinstance(item, str) else item
        bits, width = bits << item_bits | value, width + item_bits
    pad = -width % 8
    return ALGORITHMS[algorithm]((bits << pad).to_bytes((width + pad) // 8, "big")) % size


def shared_beyond_row0(program: dict) -> tuple[int, dict[str, int]]:
    """Pairs of random flows that share row 0's cell, and how many of them share each other cell."""
    hashes = sketch_hashes(program)
    rows = sorted(name for name in hashes if "index" in name)
    blooms = sorted(name for name in hashes if "bloom" in name)
    assert len(rows) == 3 and len(blooms) == 2, f"the sketch's hashes are not 3 rows and 2 Bloom cells: {sorted(hashes)}"
    rng = random.Random(7)
    by_row0: dict[int, list] = {}
    for _ in range(FLOWS):
        version = rng.choice((4, 6))
        flow = {
            "ip_version": version,
            "src_addr": rng.getrandbits(32 if version == 4 else 128),
            "dst_addr": rng.getrandbits(32 if version == 4 else 128),
            "protocol": 6,
            "src_port": rng.getrandbits(16),
            "dst_port": rng.choice((80, 443, rng.getrandbits(16))),
        }
        by_row0.setdefault(cell(hashes[rows[0]], flow), []).append(flow)
    pairs = 0
    shared = {name: 0 for name in rows[1:]} | {"both Bloom cells": 0}
    for flows in by_row0.values():
        for a, b in itertools.pairwise(flows):
            pairs += 1
            for name in rows[1:]:
                shared[name] += cell(hashes[name], a) == cell(hashes[name], b)
            shared["both Bloom cells"] += all(cell(hashes[name], a) == cell(hashes[name], b) for name in blooms)
    return pairs, shared


@pytest.mark.parametrize("depth", (256, 512))
def test_sketch_rows_and_bloom_cells_collide_independently(depth):
    program = json.loads((COMPILED / f"depth{depth}" / "jumbogate.json").read_text())
    pairs, shared = shared_beyond_row0(program)
    # 40,000 flows in 4,096 columns: about 36,000 pairs, and about 9 of them
    # sharing another row by chance (one in 4,096).
    assert pairs > 30_000
    for name, count in shared.items():
        assert count < pairs // 400, f"{count} of {pairs} flow pairs that share row 0's cell also share {name}"
