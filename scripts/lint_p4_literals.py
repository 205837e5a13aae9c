#!/usr/bin/env python3
"""make lint: nothing the P4 program defines typed in the switch's C and C++.

switch/gen_p4_tables.py generates from the committed compile the names,
table sizes, key layouts and default actions the switch uses (p4_tables.h);
gen_p4_constants.py the constants of p4src/include (p4_constants.h). This
finds, in C and C++ files, what should have come from them:

  - a string literal that is the name of a table, action, action profile,
    counter, meter, register or digest: use its P4_<KIND>_<NAME> macro;
  - a string literal compared with a name (`params[i].name == "mtu"`) that
    is an action parameter or match field of the P4: P4_PARAM_* or P4_KEY_*;
  - in a statement that names a table (`tables->merge_flows`, `routes_v4`)
    or a parameter of a table's default action (`guest_jumbo_mtu`), a number
    that is that table's size or a default argument of its:
    P4_TABLE_<NAME>_SIZE, P4_TABLE_<NAME>_DEFAULT_<PARAM>. 0 and 1 are left
    alone: they are everywhere;
  - any number but 0 and 1 in a table's set-up (sw_hash_init, sw_lpm_init,
    sw_ternary_init): sizes and key lengths are P4_TABLE_<NAME>_SIZE and
    _KEY_BYTES.

Comments are not read. Exit 1 with one line per literal found.

    scripts/lint_p4_literals.py DIR...
"""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
COMPILED = ROOT / "p4src" / "compiled"
SUFFIXES = {".c", ".cc", ".h"}
SKIP_PARTS = {"proto", "tests", "build"}

COMMENT = re.compile(r"//[^\n]*|/\*.*?\*/", re.S)
STRING = re.compile(r'"(?:[^"\\\n]|\\.)*"')
NUMBER = re.compile(r"(?<![\w.])(0[xX][0-9a-fA-F]+|\d+)[uUlL]*(?![\w.])")
IDENT = re.compile(r"[A-Za-z_]\w*")
SET_UP = {"sw_hash_init", "sw_lpm_init", "sw_ternary_init"}
NAME_COMPARE = re.compile(r'(\w*name\w*(?:\(\))?\s*[!=]=\s*"(\w+)")|("(\w+)"\s*[!=]=\s*\w*name)')


def _generator():
    spec = importlib.util.spec_from_file_location("gen_p4_tables", ROOT / "switch" / "gen_p4_tables.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def generated() -> dict:
    """What the generator makes of the committed compile of every profile."""
    gen = _generator()
    pairs = [(d / "jumbogate.p4info.txtpb", d / "jumbogate.json") for d in sorted(COMPILED.glob("depth*"))]
    return gen.profile_shapes(pairs)


def rules(data: dict):
    """(object names, parameter and field names, {identifier: {number: what}})."""
    objects = {alias for names in data["names"].values() for alias in names.values()}
    params = {p for ps in data["actions"].values() for p, _ in ps}
    params |= {f["name"] for t in data["tables"].values() for f in t["fields"]}
    numbers: dict[str, dict[int, str]] = {}
    for alias, t in data["tables"].items():
        own = numbers.setdefault(alias, {})
        own[t["size"]] = f"the size of table {alias}"
        for param, _, value in t["default_args"]:
            what = f"the default {param} of table {alias}"
            own.setdefault(value, what)
            numbers.setdefault(param, {}).setdefault(value, what)
    for table in numbers.values():
        for trivial in (0, 1):
            table.pop(trivial, None)
    return objects, params, numbers


def findings(text: str, objects: set[str], params: set[str], numbers: dict[str, dict[int, str]]):
    """(line, message) for every literal that should be generated."""
    # Comments become blanks of the same lines, so line numbers hold.
    code = COMMENT.sub(lambda m: re.sub(r"[^\n]", " ", m.group()), text)

    def line_of(offset: int) -> int:
        return code.count("\n", 0, offset) + 1

    for m in STRING.finditer(code):
        value = m.group()[1:-1]
        if value in objects:
            yield line_of(m.start()), f'P4 name "{value}" typed: use its P4_* macro (p4_tables.h)'
    for m in NAME_COMPARE.finditer(code):
        value = m.group(2) or m.group(4)
        if value in params and value not in objects:
            yield line_of(m.start()), f'P4 parameter or field name "{value}" typed: use its P4_PARAM_* or P4_KEY_* macro'
    bare = STRING.sub(lambda m: re.sub(r"[^\n]", " ", m.group()), code)
    start = 0
    for statement in re.split(r"[;{}]", bare):
        begin, start = start, start + len(statement) + 1
        identifiers = set(IDENT.findall(statement))
        if identifiers & SET_UP:
            # A table's set-up takes its size and key length from the
            # compile: no number there but 0 and 1.
            for m in NUMBER.finditer(statement):
                if int(m.group(1), 0) > 1:
                    yield line_of(begin + m.start()), f"{m.group(1)} typed in a table's set-up: use its P4_TABLE_*_SIZE or _KEY_BYTES (p4_tables.h)"
            continue
        names = identifiers & numbers.keys()
        if not names:
            continue
        for m in NUMBER.finditer(statement):
            value = int(m.group(1), 0)
            for name in sorted(names):
                if value in numbers[name]:
                    yield line_of(begin + m.start()), f"{m.group(1)} is {numbers[name][value]}: use its P4_TABLE_* macro (p4_tables.h)"
                    break


def main(argv: list[str]) -> int:
    objects, params, numbers = rules(generated())
    found = 0
    for root in map(Path, argv):
        paths = [root] if root.is_file() else sorted(p for p in root.rglob("*") if p.suffix in SUFFIXES)
        for path in paths:
            if SKIP_PARTS & set(path.relative_to(root).parts[:-1]) if root.is_dir() else False:
                continue
            for line, message in findings(path.read_text(), objects, params, numbers):
                print(f"{path}:{line}: {message}")
                found += 1
    if found:
        print(f"lint: {found} values of the P4 typed in C or C++ instead of taken from the generated headers", file=sys.stderr)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
