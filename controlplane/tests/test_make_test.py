"""make test's closing line is honest: every suite's tests are counted where they ran.

scripts/test_summary.py adds up what each suite left in build/test-results;
a suite that exits 0 but leaves nothing to count must not vanish from the
total, and the conformance suite must leave its line where its caller asks.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SUMMARY = REPO / "scripts" / "test_summary.py"


def summarize(results: Path, suites: dict[str, int], cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(SUMMARY), str(results), *suites, "--", *map(str, suites.values())], capture_output=True, text=True, cwd=cwd, timeout=30
    )


def test_a_suite_that_reports_nothing_is_a_failure_not_zero_tests(tmp_path):
    results = tmp_path / "results"
    results.mkdir()
    (results / "ptf-soft.txt").write_text("PTF: 44 passed, 0 failed, 2 skipped\n")
    done = summarize(results, {"ptf-soft": 0, "p4rt-conformance": 0}, tmp_path)
    assert done.returncode == 1, done.stdout
    assert "p4rt-conformance" in done.stdout and "FAILED (reported no result)" in done.stdout
    assert "total: 44 passed, 1 failed, 2 skipped" in done.stdout


def test_every_suite_counted_when_each_left_its_result(tmp_path):
    results = tmp_path / "results"
    results.mkdir()
    (results / "ptf-soft.txt").write_text("PTF: 44 passed, 0 failed, 2 skipped\n")
    (results / "p4rt-conformance.txt").write_text("P4RT-CONFORMANCE: 46 passed, 0 failed, 46 skipped\n")
    done = summarize(results, {"ptf-soft": 0, "p4rt-conformance": 0}, tmp_path)
    assert done.returncode == 0, done.stdout
    assert "total: 90 passed, 0 failed, 48 skipped" in done.stdout


def test_the_conformance_suite_writes_its_line_where_the_caller_asks(tmp_path):
    """Given a path relative to where make test stands, not to the suite's own folder."""
    env = dict(os.environ, JUMBOGATE_SWITCH=str(tmp_path / "no-such-switch"))
    done = subprocess.run(
        ["bash", str(REPO / "p4rt-conformance" / "run.sh"), "results/line.txt"], capture_output=True, text=True, cwd=tmp_path, env=env, timeout=60
    )
    assert done.returncode == 0, done.stdout + done.stderr
    line = (tmp_path / "results" / "line.txt").read_text()
    assert line.startswith("P4RT-CONFORMANCE: 0 passed, 0 failed, ") and "skipped" in line
    assert "no-such-switch" in done.stdout
