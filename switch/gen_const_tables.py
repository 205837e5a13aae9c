#!/usr/bin/env python3
"""Generate the switch's constant decision tables from the committed compile.

    gen_const_tables.py OUTPUT.h OUTPUT.c JSON_256 JSON_512 -- C_FILE...

Every table of the BMv2 JSON's ingress pipeline that has `const entries`
becomes a C lookup of its entries, p4_apply_<table>(key), with the key's
fields in the JSON's key order: BMv2 tries const entries in the order p4c
numbers their priorities (1, 2, ... in source order) and takes the first
that matches (value and mask per field), else the const default action.
This file does that trying, for every value a key field can take, and
writes down the answers: an array indexed by the key's bits for a table of
few key bits, else per field bitsets of the entries each value matches
(the wide fields' value/mask pairs compared once each), whose lowest
common bit is the entry. Each entry's action and data and the default
become an array of calls. The C looks the entries' answers up instead of
restating them as if statements, so it cannot drift from the P4's entries.

Fails when the two profiles' compiles disagree on a table (the C has one
copy), when a match kind or action data is one the C does not take, when
a table too wide for an index has more entries than a bitset holds, and
when an action of the tables has no `case P4_CONST_ACTION_<NAME>:` in the given
C files (the pipeline would not run it). Run by meson at build time; the
output is never committed.
"""

import json
import re
import sys
from pathlib import Path

CONTROL = "V1ModelIngress."
# Key fields wider than this do not exist in the program; 128 is an IPv6
# address (struct p4_const_key_field holds two 64-bit words).
MAX_KEY_BITS = 128


def snake(name):
    """NoAction -> no_action; from_ipv4 stays."""
    return re.sub(r"(?<=[a-z0-9])([A-Z])", r"_\1", name).lower()


def field_widths(program):
    """(header instance, field) -> bit width, `$valid$` being one bit."""
    types = {t["name"]: t for t in program["header_types"]}
    widths = {}
    for header in program["headers"]:
        for field in types[header["header_type"]]["fields"]:
            widths[(header["name"], field[0])] = field[1]
        widths[(header["name"], "$valid$")] = 1
    return widths


def hex_int(text):
    return int(text, 16) if text else 0


def const_tables(path):
    """Table name (without the control's prefix) -> what the C needs of it."""
    program = json.loads(Path(path).read_text())
    widths = field_widths(program)
    actions = {a["id"]: a for a in program["actions"]}
    tables = {}
    for pipeline in program["pipelines"]:
        if pipeline["name"] != "ingress":
            continue
        for table in pipeline["tables"]:
            if not table.get("entries"):
                continue
            name = table["name"].removeprefix(CONTROL)
            keys = []
            for key in table["key"]:
                width = widths[tuple(key["target"])]
                if key["match_type"] not in ("exact", "ternary", "lpm", "valid"):
                    raise SystemExit(f"{path}: {name}: match kind {key['match_type']} is not one the switch takes")
                if width > MAX_KEY_BITS:
                    raise SystemExit(f"{path}: {name}: key {key['name']} is {width} bits, more than {MAX_KEY_BITS}")
                keys.append({"name": key["name"], "match": key["match_type"], "width": width})
            entries = []
            for entry in sorted(table["entries"], key=lambda e: e["priority"]):
                match = []
                for key, field in zip(keys, entry["match_key"], strict=True):
                    full = (1 << key["width"]) - 1
                    value = hex_int(field["key"])
                    if field["match_type"] == "ternary":
                        mask = hex_int(field["mask"])
                    elif field["match_type"] == "lpm":
                        length = field["prefix_length"]
                        mask = full ^ ((1 << (key["width"] - length)) - 1)
                    else:
                        mask = full
                    if value & ~mask & full or value > full:
                        raise SystemExit(f"{path}: {name}: key {key['name']} value {value:#x} outside mask {mask:#x}")
                    match.append((value, mask))
                action = actions[entry["action_entry"]["action_id"]]
                data = [hex_int(d) for d in entry["action_entry"]["action_data"]]
                entries.append({"priority": entry["priority"], "match": match, "action": action["name"].split(".")[-1], "data": data})
            priorities = [e["priority"] for e in entries]
            if len(set(priorities)) != len(priorities):
                raise SystemExit(f"{path}: {name}: two entries share a priority, so the first match is not defined")
            default = table["default_entry"]
            if not default.get("action_const"):
                raise SystemExit(f"{path}: {name}: the default action is not const")
            tables[name] = {
                "keys": keys,
                "entries": [{k: v for k, v in e.items() if k != "priority"} for e in entries],
                "default": {
                    "action": actions[default["action_id"]]["name"].split(".")[-1],
                    "data": [hex_int(d) for d in default["action_data"]],
                },
            }
    if not tables:
        raise SystemExit(f"{path}: no table with const entries in the ingress pipeline")
    return tables


# Each table becomes a C function that looks its entries up instead of
# trying them one by one (the generator tries them, for every value it can):
# p4_apply_<table>(key) in p4_const_tables.h, inline, so the pipeline's
# constant key fields and unused words fold away.
#
# A table whose key fields add up to at most this many bits is an array
# indexed by the key's bits (the fields concatenated in key order), each
# element the entry BMv2 would take (the table's size for none: its default).
DENSE_MAX_BITS = 10

# The other tables are matched by bitsets (bit i: entry i), one per key
# field, ANDed: the lowest bit left is the first matching entry. A field of
# at most this many bits has its bitset per value it can take (2^8 values
# of 64 bits: 2 KiB); a wider one (an address, a 16-bit excess) compares
# each value/mask pair its entries name once, adding the pair's entries to
# those that leave the field to a wildcard.
NARROW_MAX_BITS = 8
BITSET_ENTRIES = 64


def first_match(entries, key):
    """The index of the entry BMv2 takes for key, len(entries) for none."""
    for index, entry in enumerate(entries):
        if all((k & m) == (v & m) for k, (v, m) in zip(key, entry["match"], strict=True)):
            return index
    return len(entries)


def dense_index(table):
    widths = [k["width"] for k in table["keys"]]
    if sum(widths) > DENSE_MAX_BITS:
        return None
    index = []
    for packed in range(1 << sum(widths)):
        key, shift = [], sum(widths)
        for width in widths:
            shift -= width
            key.append((packed >> shift) & ((1 << width) - 1))
        index.append(first_match(table["entries"], key))
    return index


def bitsets(name, table):
    """The narrow fields' [(key field, bitset per value)] and the wide
    fields' [(key field, wildcard bitset, [(value, mask, bitset)])].

    A field no entry names matches every entry and needs neither."""
    entries = table["entries"]
    if len(entries) > BITSET_ENTRIES:
        raise SystemExit(f"{name}: {len(entries)} entries, more than the {BITSET_ENTRIES} a bitset of its lookup holds")
    narrow, wide = [], []
    for i, key in enumerate(table["keys"]):
        matches = [e["match"][i] for e in entries]
        if not any(mask for _, mask in matches):
            continue
        if key["width"] <= NARROW_MAX_BITS:
            by_value = [sum(1 << n for n, (v, m) in enumerate(matches) if value & m == v) for value in range(1 << key["width"])]
            narrow.append((i, by_value))
            continue
        pairs = {}
        for n, (value, mask) in enumerate(matches):
            if mask:
                pairs[(value, mask)] = pairs.get((value, mask), 0) | 1 << n
        wildcards = sum(1 << n for n, (_, m) in enumerate(matches) if not m)
        wide.append((i, wildcards, [(v, m, b) for (v, m), b in pairs.items()]))
    return narrow, wide


def ident(table_name):
    return table_name.replace(".", "_")


def field_ident(key_name):
    return re.sub(r"\W", "_", key_name.split(".")[-1]).upper()


def call(entry):
    return f"{{P4_CONST_ACTION_{snake(entry['action']).upper()}, {{{', '.join(str(d) for d in entry['data']) or '0'}}}}}"


def pair_test(i, value, mask):
    """C that is true if key field i matches value/mask."""
    parts = []
    for word, shift in (("hi", 64), ("lo", 0)):
        v, m = (value >> shift) & (2**64 - 1), (mask >> shift) & (2**64 - 1)
        if m:
            parts.append(f"(key[{i}].{word} & {m:#x}ull)" if v == 0 else f"((key[{i}].{word} ^ {v:#x}ull) & {m:#x}ull)")
    return f"({' | '.join(parts)}) == 0" if len(parts) > 1 else f"{parts[0]} == 0"


def apply_function(c, table):
    """The table's p4_apply_ function, and the arrays it reads: ([header
    declarations], [header function lines], [source definitions])."""
    keys, size = table["keys"], len(table["entries"])
    declarations = [f"extern const struct p4_action_call p4_calls_{c}[{size + 1}];"]
    definitions = []
    body = []
    dense = dense_index(table)
    if dense is not None:
        kind = "uint8_t" if size < 256 else "uint16_t"
        declarations.append(f"extern const {kind} p4_dense_{c}[{len(dense)}];")
        definitions.append(f"const {kind} p4_dense_{c}[{len(dense)}] = {{")
        definitions += [f"\t{', '.join(str(i) for i in dense[row : row + 16])}," for row in range(0, len(dense), 16)]
        definitions.append("};")
        shift, terms = sum(k["width"] for k in keys), []
        for i, key in enumerate(keys):
            shift -= key["width"]
            term = f"(unsigned int)(key[{i}].lo & {(1 << key['width']) - 1:#x})"
            terms.append(f"{term} << {shift}" if shift else term)
        body.append(f"\tunsigned int index = {terms[0]}")
        body += [f"\t\t\t     | {term}" for term in terms[1:]]
        body[-1] += ";"
        body += ["", f"\treturn &p4_calls_{c}[p4_dense_{c}[index]];"]
        return declarations, body, definitions
    narrow, wide = bitsets(c, table)
    body.append(f"\tuint64_t entries = {(1 << size) - 1:#x}ull;")
    body.append("")
    for i, by_value in narrow:
        declarations.append(f"extern const uint64_t p4_bitsets_{c}_{i}[{len(by_value)}];")
        definitions.append(f"const uint64_t p4_bitsets_{c}_{i}[{len(by_value)}] = {{")
        definitions += [f"\t{', '.join(f'{b:#x}' for b in by_value[row : row + 4])}," for row in range(0, len(by_value), 4)]
        definitions.append("};")
        body.append(f"\tentries &= p4_bitsets_{c}_{i}[key[{i}].lo & {len(by_value) - 1:#x}];")
    for i, wildcards, pairs in wide:
        body.append(f"\t/* {keys[i]['name']}: entries {wildcards:#x} match any value */")
        body.append(f"\tentries &= {wildcards:#x}ull")
        body += [f"\t\t   | ({pair_test(i, v, m)} ? {b:#x}ull : 0)" for v, m, b in pairs]
        body[-1] += ";"
    body.append("\t/* The first entry left, else the default (the last call). */")
    body.append(f"\treturn &p4_calls_{c}[entries != 0 ? __builtin_ctzll(entries) : {size}];")
    return declarations, body, definitions


def generate(tables, implemented):
    action_names = sorted({e["action"] for t in tables.values() for e in t["entries"]} | {t["default"]["action"] for t in tables.values()})
    missing = [a for a in action_names if f"case P4_CONST_ACTION_{snake(a).upper()}:" not in implemented]
    if missing:
        raise SystemExit(f"the JSON names actions the switch does not implement: {', '.join(missing)}")
    max_keys = max(len(t["keys"]) for t in tables.values())
    max_data = max([1] + [len(e["data"]) for t in tables.values() for e in t["entries"] + [t["default"]]])

    header = [
        "/* Generated from p4src/compiled/depth{256,512}/jumbogate.json by gen_const_tables.py; do not edit. */",
        "#ifndef JUMBOGATE_SWITCH_P4_CONST_TABLES_H",
        "#define JUMBOGATE_SWITCH_P4_CONST_TABLES_H",
        "",
        "#include <stdint.h>",
        "",
        f"#define P4_CONST_KEY_MAX {max_keys}",
        f"#define P4_CONST_DATA_MAX {max_data}",
        "",
        "/* One key field, at most 128 bits: hi holds bits 127..64. */",
        "struct p4_const_key_field {",
        "\tuint64_t hi, lo;",
        "};",
        "",
        "/* The actions of the constant tables, named after the P4's. */",
        "enum p4_action {",
    ]
    header += [f"\tP4_CONST_ACTION_{snake(a).upper()}," for a in action_names]
    header += [
        "};",
        "",
        "struct p4_action_call {",
        "\tenum p4_action action;",
        "\tuint64_t data[P4_CONST_DATA_MAX];",
        "};",
        "",
        "struct p4_const_table {",
        "\tconst char *name;",
        "\tunsigned int keys;",
        "\tconst char *const *key_names;",
        "\tunsigned int size;",
        "\t/* size + 1: each entry's action and data, in the order BMv2 tries",
        "\t * them, then the const default action. */",
        "\tconst struct p4_action_call *calls;",
        "\t/* The table's p4_apply_ function, for callers that take any table. */",
        "\tconst struct p4_action_call *(*apply)(const struct p4_const_key_field *key);",
        "};",
        "",
        "extern const char *const p4_action_names[];",
        "",
    ]
    source = [
        "/* Generated from p4src/compiled/depth{256,512}/jumbogate.json by gen_const_tables.py; do not edit. */",
        '#include "p4_const_tables.h"',
        "",
        "const char *const p4_action_names[] = {",
    ]
    source += [f'\t[P4_CONST_ACTION_{snake(a).upper()}] = "{a}",' for a in action_names]
    source += ["};", ""]
    for name, table in tables.items():
        c = ident(name)
        upper = c.upper()
        declarations, body, definitions = apply_function(c, table)
        header.append(f"/* {name}: key {', '.join(k['name'] + ' (' + k['match'] + ')' for k in table['keys'])} */")
        header.append(f"#define P4_KEYS_{upper} {len(table['keys'])}")
        header += [f"#define P4_KEY_{upper}_{field_ident(k['name'])} {i}" for i, k in enumerate(table["keys"])]
        header += declarations
        header.append(f"extern const struct p4_const_table p4_table_{c};")
        header.append("")
        header.append(f"/* The call of the entry of {name} that BMv2 takes for key, else its default. */")
        header.append(f"static inline const struct p4_action_call *p4_apply_{c}(const struct p4_const_key_field *key)")
        header.append("{")
        header += body
        header += ["}", ""]
        source.append(f"static const char *const {c}_key_names[] = {{{', '.join(chr(34) + k['name'] + chr(34) for k in table['keys'])}}};")
        source.append(f"const struct p4_action_call p4_calls_{c}[{len(table['entries']) + 1}] = {{")
        for n, entry in enumerate(table["entries"]):
            named = [f"{k['name']} {v:#x}/{m:#x}" for k, (v, m) in zip(table["keys"], entry["match"], strict=True) if m]
            source.append(f"\t/* {n}: {', '.join(named) or 'any key'} */")
            source.append(f"\t{call(entry)},")
        source.append("\t/* the default */")
        source.append(f"\t{call(table['default'])},")
        source.append("};")
        source += definitions
        source += [
            f"const struct p4_const_table p4_table_{c} = {{",
            f'\t.name = "{name}",',
            f"\t.keys = {len(table['keys'])},",
            f"\t.key_names = {c}_key_names,",
            f"\t.size = {len(table['entries'])},",
            f"\t.calls = p4_calls_{c},",
            f"\t.apply = p4_apply_{c},",
            "};",
            "",
        ]
    header.append("/* Every table above, for tests that name them. */")
    header.append(f"#define P4_CONST_TABLES {{{', '.join('&p4_table_' + ident(n) for n in tables)}}}")
    header += ["", "#endif", ""]
    return "\n".join(header), "\n".join(source)


def main(argv):
    if len(argv) < 6 or argv[5] != "--":
        print(f"usage: {argv[0]} OUTPUT.h OUTPUT.c JSON_256 JSON_512 -- C_FILE...", file=sys.stderr)
        return 2
    first, second = const_tables(argv[3]), const_tables(argv[4])
    if first != second:
        differ = sorted(n for n in first.keys() | second.keys() if first.get(n) != second.get(n))
        raise SystemExit(f"{argv[3]} and {argv[4]} disagree on the const tables {', '.join(differ)}: the switch has one copy of each")
    implemented = "".join(Path(p).read_text() for p in argv[6:])
    header, source = generate(first, implemented)
    Path(argv[1]).write_text(header)
    Path(argv[2]).write_text(source)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
