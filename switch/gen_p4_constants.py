#!/usr/bin/env python3
"""Generate a C header of the constants that the P4 source defines.

    gen_p4_constants.py OUTPUT.h p4src/include/defines.p4 p4src/include/drop_reasons.p4

Every `const <type> NAME = VALUE;` and every `#define NAME NUMBER` of the
given files becomes `#define P4_NAME VALUE` (the prefix keeps them apart from
DPDK's and libc's names), and the drop reasons (DROP_*) also become
P4_DROP_REASON_NAMES, their lower-case names by number (for telemetry;
DROP_REASON_COUNTER_SIZE is a size, not a reason). The software switch includes only this header, so
a number the P4 program defines is never typed twice. Run by meson at build
time; the output is never committed.
"""

import re
import sys
from pathlib import Path

CONST = re.compile(r"^\s*const\s+[\w<>]+\s+(\w+)\s*=\s*(\w+)\s*;", re.M)
DEFINE = re.compile(r"^\s*#define\s+(\w+)\s+(\d+|0x[0-9a-fA-F]+)\s*$", re.M)


def constants(paths):
    values = {}
    for path in paths:
        text = Path(path).read_text()
        for name, value in CONST.findall(text) + DEFINE.findall(text):
            number = int(value, 0)
            if name in values and values[name] != number:
                raise SystemExit(f"{path}: {name} defined twice with different values")
            values[name] = number
    if not values:
        raise SystemExit("no constants found")
    return values


def main(argv):
    if len(argv) < 3:
        print(f"usage: {argv[0]} OUTPUT.h P4_FILE...", file=sys.stderr)
        return 2
    values = constants(argv[2:])
    sources = ", ".join(Path(p).name for p in argv[2:])
    lines = [
        f"/* Generated from {sources} by gen_p4_constants.py; do not edit. */",
        "#ifndef JUMBOGATE_SWITCH_P4_CONSTANTS_H",
        "#define JUMBOGATE_SWITCH_P4_CONSTANTS_H",
        "",
    ]
    lines += [f"#define P4_{name} {value}" for name, value in values.items()]
    reasons = {value: name.removeprefix("DROP_").lower() for name, value in values.items() if name.startswith("DROP_") and not name.startswith("DROP_REASON_")}
    lines += ["", "/* Drop reason -> name, for DROP_* numbers (NULL: none). */", "#define P4_DROP_REASON_NAMES \\", "\t{ \\"]
    lines += [f'\t\t[{value}] = "{name}", \\' for value, name in sorted(reasons.items())]
    lines += ["\t}"]
    lines += ["", "#endif", ""]
    Path(argv[1]).write_text("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
