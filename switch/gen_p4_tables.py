#!/usr/bin/env python3
"""Generate the software switch's view of the P4 program's tables and names.

    gen_p4_tables.py OUT.h OUT.c P4INFO JSON [P4INFO JSON ...]

from the committed compile (p4src/compiled/depth*/: the P4Info and the BMv2
JSON of each parse-depth profile). Writes

  OUT.h  the name of every table, action, counter, meter, digest and action
         profile (P4_TABLE_<ALIAS>, P4_ACTION_<ALIAS>, ...: a rename in the
         P4 is a compile error here, never a silent miss), every action
         parameter and match field name (P4_PARAM_<ACTION>_<PARAM>,
         P4_KEY_<TABLE>_<FIELD>), each table's size
         (P4_TABLE_<ALIAS>_SIZE), its key packed byte-aligned in the P4's
         key order (P4_TABLE_<ALIAS>_KEY_BYTES, _KEY_<FIELD>_OFFSET, _BYTES,
         _BITS), its default action and arguments (_DEFAULT_ACTION,
         _DEFAULT_<PARAM>), and the shapes of meters and digests;
  OUT.c  the same tables as data (p4_table_shapes), for the P4Runtime
         server, which restores a default entry from it.

The profiles differ in the parser only: a table, action or object that is
not the same in all of them stops the build, since the switch holds one set
of tables whatever the profile. Run by meson at build time; the outputs are
never committed. scripts/lint_p4_literals.py imports it to know what must
not be typed in C or C++.
"""

from __future__ import annotations

import importlib.util
import json
import re
import sys
from pathlib import Path

# The controller's generator names P4 objects (names.py); the switch's
# macros take the same names.
_PY_GENERATOR = Path(__file__).resolve().parents[1] / "controlplane" / "src" / "jumbogate" / "p4" / "generate.py"


def _python_generator():
    spec = importlib.util.spec_from_file_location("jumbogate_p4_generate", _PY_GENERATOR)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


constant_name = _python_generator().constant_name

# -- P4Info's text format, as p4c writes it (no protobuf needed at build time)

_TOKEN = re.compile(r'\s*(?:(\{)|(\})|(\w+)\s*:?\s*(?=\{)|(\w+)\s*:\s*("(?:[^"\\]|\\.)*"|[^\s{}]+))')


def parse_text_proto(text: str) -> dict:
    """A message as {field: [values]}; a nested message is a dict."""
    root: dict = {}
    stack = [root]
    pos = 0
    text = re.sub(r"#[^\n]*", "", text)
    while text[pos:].strip():
        m = _TOKEN.match(text, pos)
        if m is None:
            raise SystemExit(f"P4Info text does not parse at {text[pos : pos + 40]!r}")
        pos = m.end()
        opened, closed, message, field, value = m.groups()
        if message is not None:
            child: dict = {}
            stack[-1].setdefault(message, []).append(child)
            stack.append(child)
            m = re.compile(r"\s*\{").match(text, pos)
            pos = m.end()
        elif closed:
            stack.pop()
        elif opened:
            raise SystemExit("P4Info text: a brace without a field")
        else:
            if value.startswith('"'):
                value = bytes(value[1:-1], "utf-8").decode("unicode_escape")
            elif re.fullmatch(r"-?\d+", value):
                value = int(value)
            stack[-1].setdefault(field, []).append(value)
    return root


def one(message: dict, field: str, default=None):
    values = message.get(field)
    return values[0] if values else default


# -- the shapes ---------------------------------------------------------------


def shapes(p4info_path: Path, json_path: Path) -> dict:
    """Everything generated, as plain data, from one profile's compile."""
    info = parse_text_proto(p4info_path.read_text())
    bmv2 = json.loads(json_path.read_text())

    def alias(obj):
        preamble = one(obj, "preamble")
        return one(preamble, "alias") or one(preamble, "name")

    actions_by_name = {one(one(a, "preamble"), "name"): a for a in info.get("actions", [])}
    actions_by_id = {one(one(a, "preamble"), "id"): a for a in info.get("actions", [])}
    json_actions = {a["id"]: a for a in bmv2["actions"]}
    json_tables = {t["name"]: t for p in bmv2["pipelines"] for t in p["tables"]}

    out = {"names": {}, "actions": {}, "tables": {}, "meters": {}, "digests": {}}
    for kind in ("tables", "actions", "action_profiles", "counters", "meters", "registers", "digests"):
        out["names"][kind] = {constant_name(kind, alias(o)): alias(o) for o in info.get(kind, [])}
    for action in info.get("actions", []):
        out["actions"][alias(action)] = [(one(p, "name"), one(p, "bitwidth")) for p in action.get("params", [])]

    for table in info.get("tables", []):
        name, table_alias = one(one(table, "preamble"), "name"), alias(table)
        size = one(table, "size", 0)
        where = f"{json_path}: table {table_alias}"
        compiled = json_tables.get(name)
        if compiled is None:
            raise SystemExit(f"{where}: not in the BMv2 JSON")
        if compiled["max_size"] != size:
            raise SystemExit(f"{where}: size {compiled['max_size']} in the BMv2 JSON, {size} in the P4Info")
        fields, offset = [], 0
        for f in sorted(table.get("match_fields", []), key=lambda f: one(f, "id")):
            bits = one(f, "bitwidth")
            nbytes = (bits + 7) // 8
            fields.append({"name": one(f, "name"), "bits": bits, "match": one(f, "match_type"), "offset": offset, "bytes": nbytes})
            offset += nbytes
        default = compiled.get("default_entry")
        const_id = one(table, "const_default_action_id", 0)
        default_action, default_args = None, []
        if default is not None and one(table, "implementation_id", 0) == 0:
            action = actions_by_name.get(json_actions[default["action_id"]]["name"])
            if action is None:
                raise SystemExit(f"{where}: default action {json_actions[default['action_id']]['name']} is not in the P4Info")
            default_action = alias(action)
            params = out["actions"][default_action]
            if len(params) != len(default["action_data"]):
                raise SystemExit(f"{where}: the default action's arguments do not match its parameters")
            default_args = [(p, bits, int(v, 16)) for (p, bits), v in zip(params, default["action_data"], strict=True)]
            if bool(default["action_const"]) != (const_id != 0) or (const_id and alias(actions_by_id[const_id]) != default_action):
                raise SystemExit(f"{where}: the BMv2 JSON and the P4Info disagree on its const default action")
        out["tables"][table_alias] = {
            "size": size,
            "fields": fields,
            "key_bytes": offset,
            "const_default": const_id != 0,
            "default_action": default_action,
            "default_args": default_args,
        }
    # An action selector's hash input (the BMv2 JSON only has it), packed
    # byte-aligned as the C hashes it.
    headers = {h["name"]: h["header_type"] for h in bmv2["headers"]}
    widths = {(t["name"], f[0]): f[1] for t in bmv2["header_types"] for f in t["fields"]}
    out["selectors"] = {}
    for profile in (a for p in bmv2["pipelines"] for a in p.get("action_profiles", [])):
        if "selector" not in profile:
            continue
        inputs, offset = [], 0
        for item in profile["selector"]["input"]:
            header, field = item["value"]
            bits = widths[(headers[header], field)]
            # local_metadata_t._flow_src_addr14: meta.flow.src_addr.
            name = re.sub(r"^\w*?\._|\d+$", "", field)
            inputs.append({"name": name, "bits": bits, "offset": offset, "bytes": (bits + 7) // 8})
            offset += (bits + 7) // 8
        out["selectors"][profile["name"].rsplit(".", 1)[-1]] = {"algo": profile["selector"]["algo"], "inputs": inputs, "bytes": offset}
    for meter in info.get("meters", []):
        out["meters"][alias(meter)] = one(meter, "size", 0)
    structs = {one(s, "key"): one(s, "value") for s in one(info, "type_info", {}).get("structs", [])}
    for digest in info.get("digests", []):
        struct = one(one(one(digest, "type_spec"), "struct"), "name")
        members = structs.get(struct, {}).get("members", [])
        out["digests"][alias(digest)] = [(one(m, "name"), one(one(one(one(m, "type_spec"), "bitstring"), "bit"), "bitwidth")) for m in members]
    return out


def profile_shapes(pairs: list[tuple[Path, Path]]) -> dict:
    """The shapes of every profile, which must be one and the same."""
    first = shapes(*pairs[0])
    for pair in pairs[1:]:
        other = shapes(*pair)
        if other != first:
            for part in first:
                for key in sorted(set(first[part]) | set(other[part])):
                    if first[part].get(key) != other[part].get(key):
                        raise SystemExit(
                            f"{pair[0].parent.name} and {pairs[0][0].parent.name} differ in {part} {key}: "
                            f"{other[part].get(key)} against {first[part].get(key)}; the switch holds one set of tables"
                        )
    return first


# -- output -------------------------------------------------------------------

KIND_PREFIX = {
    "tables": "TABLE",
    "actions": "ACTION",
    "action_profiles": "ACTION_PROFILE",
    "counters": "COUNTER",
    "meters": "METER",
    "registers": "REGISTER",
    "digests": "DIGEST",
}


def macro(*parts: str) -> str:
    return "P4_" + "_".join(re.sub(r"\W", "_", p).upper() for p in parts)


def render_header(data: dict, sources: str) -> str:
    lines = [
        f"/* Generated from {sources} by gen_p4_tables.py; do not edit. */",
        "#ifndef JUMBOGATE_SWITCH_P4_TABLES_H",
        "#define JUMBOGATE_SWITCH_P4_TABLES_H",
        "",
        "#include <stdbool.h>",
        "#include <stdint.h>",
        "",
        "/* Names (P4Info aliases). */",
    ]
    for kind, names in data["names"].items():
        lines += [f'#define P4_{KIND_PREFIX[kind]}_{name} "{alias}"' for name, alias in names.items()]
    lines += ["", "/* Action parameters. */"]
    for action, params in data["actions"].items():
        for param, bits in params:
            lines.append(f'#define {macro("PARAM", action, param)} "{param}"')
            lines.append(f"#define {macro('PARAM', action, param, 'BITS')} {bits}")
    for table, shape in data["tables"].items():
        t = macro("TABLE", table)
        lines += ["", f"/* table {table} */", f"#define {t}_SIZE {shape['size']}", f"#define {t}_KEY_BYTES {shape['key_bytes']}"]
        for f in shape["fields"]:
            lines.append(f'#define {macro("KEY", table, f["name"])} "{f["name"]}"')
            lines += [f"#define {t}_KEY_{macro(f['name'])[3:]}_{what.upper()} {f[what]}" for what in ("offset", "bytes", "bits")]
        if shape["default_action"] is not None:
            lines.append(f"#define {t}_DEFAULT_ACTION P4_ACTION_{constant_name('actions', shape['default_action'])}")
            lines += [f"#define {t}_DEFAULT_{macro(p)[3:]} {v}" for p, bits, v in shape["default_args"] if bits <= 64]
    for selector, shape in data["selectors"].items():
        lines += ["", f"/* action selector {selector}: {shape['algo']} over its input */", f"#define {macro('SELECTOR', selector, 'BYTES')} {shape['bytes']}"]
        for f in shape["inputs"]:
            lines += [f"#define {macro('SELECTOR', selector, f['name'], what)} {f[what]}" for what in ("offset", "bytes", "bits")]
    lines += ["", "/* Meters and digests. */", f"#define P4_METER_COUNT {len(data['meters'])}"]
    lines += [f"#define {macro('METER', m, 'SIZE')} {size}" for m, size in data["meters"].items()]
    lines.append(f"#define P4_DIGEST_COUNT {len(data['digests'])}")
    for digest, members in data["digests"].items():
        lines.append(f"#define {macro('DIGEST', constant_name('digests', digest), 'MEMBERS')} {len(members)}")
        for index, (member, bits) in enumerate(members):
            lines.append(f"#define {macro('DIGEST', constant_name('digests', digest), member, 'INDEX')} {index}")
            lines.append(f"#define {macro('DIGEST', constant_name('digests', digest), member, 'BITS')} {bits}")
    lines += [
        "",
        "#ifdef __cplusplus",
        'extern "C" {',
        "#endif",
        "",
        "struct p4_key_field {",
        "\tconst char *name;",
        "\tuint32_t bits, offset, bytes;",
        '\tconst char *match; /* "EXACT", "LPM", "TERNARY", ... */',
        "};",
        "",
        "/* A default argument, right-aligned big-endian in 16 bytes. */",
        "struct p4_default_arg {",
        "\tconst char *param;",
        "\tuint8_t value[16];",
        "};",
        "",
        "struct p4_table_shape {",
        "\tconst char *alias;",
        "\tuint32_t size;",
        "\tuint32_t key_count, key_bytes;",
        "\tconst struct p4_key_field *key;",
        "\tbool const_default;",
        "\tconst char *default_action; /* NULL: none (an action selector) */",
        "\tuint32_t default_arg_count;",
        "\tconst struct p4_default_arg *default_args;",
        "};",
        "",
        f"#define P4_TABLE_COUNT {len(data['tables'])}",
        "extern const struct p4_table_shape p4_table_shapes[P4_TABLE_COUNT];",
        "/* The shape of a table by alias, or NULL. */",
        "const struct p4_table_shape *p4_table_shape_of(const char *alias);",
        "",
        "#ifdef __cplusplus",
        "}",
        "#endif",
        "",
        "#endif",
        "",
    ]
    return "\n".join(lines)


def render_source(data: dict, sources: str) -> str:
    lines = [
        f"/* Generated from {sources} by gen_p4_tables.py; do not edit. */",
        '#include "p4_tables.h"',
        "",
        "#include <string.h>",
        "",
    ]
    for table, shape in data["tables"].items():
        c = re.sub(r"\W", "_", table)
        if shape["fields"]:
            lines.append(f"static const struct p4_key_field key_{c}[] = {{")
            lines += [f'\t{{"{f["name"]}", {f["bits"]}, {f["offset"]}, {f["bytes"]}, "{f["match"]}"}},' for f in shape["fields"]]
            lines.append("};")
        if shape["default_args"]:
            lines.append(f"static const struct p4_default_arg default_{c}[] = {{")
            for p, _, v in shape["default_args"]:
                value = ", ".join(str(b) for b in v.to_bytes(16, "big"))
                lines.append(f'\t{{"{p}", {{{value}}}}},')
            lines.append("};")
    lines.append("const struct p4_table_shape p4_table_shapes[P4_TABLE_COUNT] = {")
    for table, shape in data["tables"].items():
        c = re.sub(r"\W", "_", table)
        action = f'"{shape["default_action"]}"' if shape["default_action"] else "NULL"
        lines.append(
            f'\t{{"{table}", {shape["size"]}, {len(shape["fields"])}, {shape["key_bytes"]}, '
            f"{'key_' + c if shape['fields'] else 'NULL'}, {'true' if shape['const_default'] else 'false'}, {action}, "
            f"{len(shape['default_args'])}, {'default_' + c if shape['default_args'] else 'NULL'}}},"
        )
    lines += [
        "};",
        "",
        "const struct p4_table_shape *p4_table_shape_of(const char *alias)",
        "{",
        "\tfor (int i = 0; i < P4_TABLE_COUNT; i++)",
        "\t\tif (strcmp(p4_table_shapes[i].alias, alias) == 0)",
        "\t\t\treturn &p4_table_shapes[i];",
        "\treturn NULL;",
        "}",
        "",
    ]
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    if len(argv) < 5 or len(argv) % 2 == 0:
        print(__doc__, file=sys.stderr)
        return 2
    out_h, out_c = Path(argv[1]), Path(argv[2])
    pairs = [(Path(argv[i]), Path(argv[i + 1])) for i in range(3, len(argv), 2)]
    data = profile_shapes(pairs)
    sources = ", ".join(f"{p.parent.name}/{p.name}" for pair in pairs for p in pair)
    out_h.write_text(render_header(data, sources))
    out_c.write_text(render_source(data, sources))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
