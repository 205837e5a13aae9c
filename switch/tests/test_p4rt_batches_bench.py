"""The P4Runtime batch benchmark (switch/bench/p4rt_batches.py) runs on every target present: a short run here
keeps it working; the figures themselves are for docs/switch.md, "Conformance"."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
BENCH = REPO / "switch" / "bench" / "p4rt_batches.py"


def test_a_short_run_measures_every_operation_on_each_target_present():
    done = subprocess.run([sys.executable, str(BENCH), "--entries", "300", "--runs", "1"], capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    table = done.stdout.split("median of 1 runs, 300 entries per batch")[1].splitlines()
    measured = {line.split()[0] for line in table[2:] if line.strip()}
    bmv2_present = shutil.which("simple_switch_grpc") is not None
    assert measured == ({"soft", "bmv2"} if bmv2_present else {"soft"})
    if not bmv2_present:
        assert "BMv2 skipped: simple_switch_grpc is not on PATH" in done.stderr
    for line in table[2:]:
        assert line.count("/s") == 4, line


def test_an_oversized_batch_is_refused_before_any_switch_starts():
    done = subprocess.run([sys.executable, str(BENCH), "--entries", "20000"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "--entries is 1 to 16,384" in done.stderr
