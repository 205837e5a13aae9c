#!/usr/bin/env python3
"""make lint: no P4 name typed where the generated one belongs.

Every table, action, counter, meter, register, digest and action profile the
P4 program defines is in jumbogate/p4/names.py, generated from the committed
P4Info (make proto). This finds, in the project's Python, a string literal
equal to one of those names given to a finsy P4 entity (P4TableEntry,
P4TableAction, P4CounterEntry, ...): it should be names.<NAME>, so that a
rename in the P4 is a rename here, or an import error, never a silent miss.

    scripts/lint_p4_names.py DIR...     exit 1 and one line per literal found
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

GENERATED = {"names.py", "defines.py"}


def p4_names() -> set[str]:
    from jumbogate.p4 import names

    return {value for key, value in vars(names).items() if key.isupper() and isinstance(value, str)}


def entity_call(node: ast.Call) -> bool:
    func = node.func
    name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
    return name.startswith("P4") and name[2:3].isupper()


def literals(path: Path, known: set[str]):
    tree = ast.parse(path.read_text(), str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and entity_call(node):
            for arg in [*node.args, *(kw.value for kw in node.keywords)]:
                if isinstance(arg, ast.Constant) and arg.value in known:
                    yield arg.lineno, arg.value


def main(argv: list[str]) -> int:
    known = p4_names()
    found = 0
    for root in map(Path, argv):
        for path in sorted(root.rglob("*.py")):
            if path.name in GENERATED or ".venv" in path.parts:
                continue
            for line, value in literals(path, known):
                print(f"{path}:{line}: P4 name {value!r} typed: use jumbogate.p4.names.{value.upper()}")
                found += 1
    if found:
        print(f"lint: {found} P4 names typed instead of taken from jumbogate.p4.names", file=sys.stderr)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
