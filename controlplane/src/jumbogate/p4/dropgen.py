"""Generate drop_reasons.py from p4src/include/drop_reasons.p4.

drop_reasons.p4 is the single source of the drop-reason numbers. This module
parses it and writes the Python enum the controller imports, so that the
installed package does not need the P4 sources at run time:

    python -m jumbogate.p4.dropgen p4src/include/drop_reasons.p4 \
        controlplane/src/jumbogate/p4/drop_reasons.py

A unit test (controlplane/tests/test_p4_drop_reasons.py) fails when the two
files disagree.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

_CONST = re.compile(r"^\s*const\s+drop_reason_t\s+DROP_([A-Z0-9_]+)\s*=\s*(\d+)\s*;")


def parse_drop_reasons(p4_text: str) -> dict[str, int]:
    """Return {NAME: value} for every `const drop_reason_t DROP_NAME = N;`."""
    reasons: dict[str, int] = {}
    for line in p4_text.splitlines():
        match = _CONST.match(line)
        if match:
            name, value = match.group(1), int(match.group(2))
            if name in reasons:
                raise ValueError(f"drop reason {name} defined twice")
            if value in reasons.values():
                raise ValueError(f"drop reason value {value} used twice")
            reasons[name] = value
    if not reasons:
        raise ValueError("no drop reasons found")
    return reasons


def render_module(reasons: dict[str, int]) -> str:
    lines = [
        '"""Drop reasons of the jumbogate data plane.',
        "",
        "Generated from p4src/include/drop_reasons.p4 by jumbogate.p4.dropgen;",
        "do not edit by hand. Values index the `drop_reasons` counter.",
        '"""',
        "",
        "import enum",
        "",
        "",
        "class DropReason(enum.IntEnum):",
    ]
    lines += [f"    {name} = {value}" for name, value in sorted(reasons.items(), key=lambda kv: kv[1])]
    return "\n".join(lines) + "\n"


def main(argv: list[str]) -> int:
    if len(argv) != 3:
        print(f"usage: {argv[0]} DROP_REASONS_P4 OUTPUT_PY", file=sys.stderr)
        return 2
    reasons = parse_drop_reasons(Path(argv[1]).read_text())
    Path(argv[2]).write_text(render_module(reasons))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
