"""`make stop`: end everything the emulation started, also after a crash, and say what was left."""

from __future__ import annotations

import sys

from . import cleanup, procs


def main() -> int:
    if not procs.is_root():
        print("make stop: run as root (the emulation's namespaces and interfaces belong to root)", file=sys.stderr)
        return 1
    found = cleanup.sweep()
    left = cleanup.find_leftovers()
    if left:
        print(f"make stop: could not remove {left.describe()}", file=sys.stderr)
        return 1
    print(f"make stop: removed {found.describe()}" if found else "make stop: nothing of the emulation was running")
    return 0


if __name__ == "__main__":
    sys.exit(main())
