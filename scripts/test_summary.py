"""Adds up what every suite of `make test` ran into one closing line."""

import json
import re
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

# (passed, failed, skipped), or None when the suite left no result to read.
Counts = tuple[int, int, int] | None


def pytest_counts(path: Path) -> Counts:
    if not path.exists():
        return None
    root = ET.parse(path).getroot()
    suites = root.iter("testsuite")
    tests = failed = skipped = 0
    for s in suites:
        tests += int(s.get("tests", 0))
        failed += int(s.get("failures", 0)) + int(s.get("errors", 0))
        skipped += int(s.get("skipped", 0))
    return tests - failed - skipped, failed, skipped


def meson_counts(log: Path) -> Counts:
    if not log.exists():
        return None
    passed = failed = skipped = 0
    for line in log.read_text().splitlines():
        result = json.loads(line).get("result")
        if result in ("OK", "EXPECTEDFAIL"):
            passed += 1
        elif result == "SKIP":
            skipped += 1
        else:
            failed += 1
    return passed, failed, skipped


def ptf_counts(path: Path) -> Counts:
    if not path.exists():
        return None
    match = re.search(r"(\d+) passed, (\d+) failed(?:, (\d+) skipped)?", path.read_text())
    if not match:
        return None
    return int(match[1]), int(match[2]), int(match[3] or 0)


def main() -> int:
    results = Path(sys.argv[1])
    split = sys.argv.index("--")
    names, statuses = sys.argv[2:split], [int(s) for s in sys.argv[split + 1 :]]
    counts = {
        "python": pytest_counts(results / "python.xml"),
        "c": meson_counts(Path("build/native/meson-logs/testlog.json")),
        "c-asan": meson_counts(Path("build/asan/meson-logs/testlog.json")),
        "nic-asan": pytest_counts(results / "nic-asan.xml"),
    }
    # The PTF-style suites leave their closing line in <name>.txt.
    for name in ("ptf-soft", "ptf-bmv2", "p4testgen-soft", "p4testgen-bmv2", "p4rt-conformance"):
        counts[name] = ptf_counts(results / f"{name}.txt")
    print("\n===== summary =====")
    total = [0, 0, 0]
    for name, status in zip(names, statuses, strict=True):
        found = counts.get(name)
        p, f, s = found if found is not None else (0, 0, 0)
        # A suite that crashed before reporting still counts as a failure,
        # and so does one that exited 0 but left nothing to count: its
        # tests would otherwise vanish from the total.
        if (status != 0 or found is None) and f == 0:
            f = 1
        verdict = "ok" if status == 0 and found is not None else "FAILED" if status != 0 else "FAILED (reported no result)"
        total = [total[0] + p, total[1] + f, total[2] + s]
        print(f"{name:16} {p:5} passed {f:4} failed {s:4} skipped   {verdict}")
    print(f"total: {total[0]} passed, {total[1]} failed, {total[2]} skipped")
    return 0 if total[1] == 0 and all(s == 0 for s in statuses) else 1


if __name__ == "__main__":
    sys.exit(main())
