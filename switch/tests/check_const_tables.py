#!/usr/bin/env python3
"""Every key combination of each constant table, through the switch and the JSON.

    check_const_tables.py PROBE JSON...

For each table of the ingress pipeline with const entries, in each compile
given: every key field takes its whole domain when it is at most 4 bits
wide (valid bits, flags, port roles, IP versions), else the values the
entries name, each with the bits they leave to a wildcard all set, with the
lowest and the highest bit they match flipped, 0, all ones and a value no
entry names. Each combination goes through the switch's generated lookup
of the table (const_table_probe, the same p4_apply_<table> the pipeline
inlines) and through this file's own reading of the JSON: BMv2 takes the
matching entry of the smallest priority, else the const default action. A
difference fails, naming the table, the key and both answers; the count of
combinations per table is printed. Run by `meson test` (suite switch).
"""

import itertools
import json
import subprocess
import sys
from pathlib import Path

FULL_DOMAIN_BITS = 4


def widths(program):
    types = {t["name"]: t for t in program["header_types"]}
    found = {}
    for header in program["headers"]:
        for field in types[header["header_type"]]["fields"]:
            found[(header["name"], field[0])] = field[1]
        found[(header["name"], "$valid$")] = 1
    return found


def parse_entry_key(field, width):
    """(value, mask) of one field of an entry, as BMv2 reads it."""
    full = (1 << width) - 1
    value = int(field["key"], 16)
    kind = field["match_type"]
    if kind == "ternary":
        return value, int(field["mask"], 16)
    if kind == "lpm":
        return value, full ^ ((1 << (width - field["prefix_length"])) - 1)
    if kind in ("exact", "valid"):
        return value, full
    raise SystemExit(f"match kind {kind} is not one this test reads")


def reference(entries, default, key):
    """The action and data BMv2 would run for key: smallest priority first."""
    for _priority, match, action, data in entries:
        if all((k & m) == (v & m) for k, (v, m) in zip(key, match, strict=True)):
            return action, data
    return default


def domain(width, matches):
    full = (1 << width) - 1
    if width <= FULL_DOMAIN_BITS:
        return list(range(full + 1))
    values = {0, full}
    for value, mask in matches:
        if mask == 0:
            continue
        values.add(value)
        values.add(value | (full & ~mask))
        values.add(value ^ (mask & -mask))
        values.add(value ^ (1 << (mask.bit_length() - 1)))
    named = {v for v, m in matches if m}
    unnamed = 0x5A5A5A5A5A5A5A5A5A5A5A5A5A5A5A5A & full
    while unnamed in named:
        unnamed = (unnamed + 1) & full
    values.add(unnamed)
    return sorted(values)


def check(probe, path):
    program = json.loads(Path(path).read_text())
    field_widths = widths(program)
    actions = {a["id"]: a["name"].split(".")[-1] for a in program["actions"]}
    failures = 0
    for pipeline in program["pipelines"]:
        if pipeline["name"] != "ingress":
            continue
        for table in pipeline["tables"]:
            if not table.get("entries"):
                continue
            name = table["name"].removeprefix("V1ModelIngress.")
            key_widths = [field_widths[tuple(k["target"])] for k in table["key"]]
            entries = []
            for entry in sorted(table["entries"], key=lambda e: e["priority"]):
                match = [parse_entry_key(f, w) for f, w in zip(entry["match_key"], key_widths, strict=True)]
                call = entry["action_entry"]
                entries.append((entry["priority"], match, actions[call["action_id"]], [int(d, 16) for d in call["action_data"]]))
            default_entry = table["default_entry"]
            default = (actions[default_entry["action_id"]], [int(d, 16) for d in default_entry["action_data"]])
            domains = [domain(w, [e[1][i] for e in entries]) for i, w in enumerate(key_widths)]
            keys = list(itertools.product(*domains))
            lines = "".join(name + "".join(f" {k >> 64:x}:{k & (2**64 - 1):x}" for k in key) + "\n" for key in keys)
            result = subprocess.run([probe], input=lines, capture_output=True, text=True, check=False)
            if result.returncode != 0:
                print(f"{path}: {name}: the probe failed: {result.stderr.strip()}")
                failures += 1
                continue
            answers = result.stdout.splitlines()
            if len(answers) != len(keys):
                print(f"{path}: {name}: {len(answers)} answers to {len(keys)} keys")
                failures += 1
                continue
            wrong = 0
            for key, answer in zip(keys, answers, strict=True):
                action, *data = answer.split()
                got = (action, [int(d, 16) for d in data])
                want_action, want_data = reference(entries, default, key)
                want = (want_action, want_data + [0] * (len(data) - len(want_data)))
                if got != want:
                    wrong += 1
                    if wrong <= 5:
                        fields = ", ".join(f"{k['name']}={v:#x}" for k, v in zip(table["key"], key, strict=True))
                        print(f"{path}: {name}: ({fields}): switch {got}, JSON {want}")
            failures += wrong
            print(f"{Path(path).parent.name}: {name}: {len(keys)} combinations, {len(entries)} entries, {wrong} differ")
    return failures


def main(argv):
    if len(argv) < 3:
        print(f"usage: {argv[0]} PROBE JSON...", file=sys.stderr)
        return 2
    failures = sum(check(argv[1], path) for path in argv[2:])
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
