"""make fleet-scale, small: the benchmark's figures hold together on a real etcd (the full run is in docs/fleet.md)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from testlab.etcd_process import missing_etcd

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
import fleet_scale  # noqa: E402

pytestmark = [
    pytest.mark.timeout(180),
    pytest.mark.skipif(bool(missing_etcd()), reason=f"needs {', '.join(missing_etcd())} on PATH (make setup installs etcd)"),
]


def test_every_watcher_sees_every_flip_and_the_store_holds_the_fleet(tmp_path, capsys):
    out = tmp_path / "figures.json"
    assert fleet_scale.main(["--racks", "12", "--instances", "600", "--watchers", "24", "--flips", "20", "--json", str(out)]) == 0
    figures = json.loads(out.read_text())
    expected_keys = len(fleet_scale.fleet_keys(12, 600))
    assert figures["keys"] == expected_keys > 600 + 12 * 4
    assert figures["one_flip_watch_events"] == 24
    assert figures["every_watcher_saw_every_flip"] is True
    assert figures["controller_snapshot"].startswith("ok")
    # More keys than etcd takes in one transaction: importing a fleet must batch.
    assert figures["whole_fleet_in_one_txn"].startswith("refused: INVALID_ARGUMENT") and "too many operations" in figures["whole_fleet_in_one_txn"]
    assert figures["db_size_bytes"] > figures["key_and_value_bytes"] > 0
    printed = capsys.readouterr().out
    assert "12 racks, 600 instances, 24 watchers" in printed
