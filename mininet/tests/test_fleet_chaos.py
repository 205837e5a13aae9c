"""The fleet under faults, the short form of `make fleet-chaos` (emulation/fleet_chaos.py), and its checker.

The checker's tests run everywhere; the run needs the emulation (root,
Mininet, the built programs, etcd, nft) and takes about three minutes:
FLEET_CHAOS_SECONDS (75) of faults, every kind at least once.
"""

from __future__ import annotations

import os
import random
import shutil
import time

import pytest
from emulation import cleanup
from emulation.fleet import Fleet
from emulation.fleet_chaos import FAULTS, Call, Chaos, PolicyClient, explain, inject_faults, render, run_chaos
from emulation.rack import Parts, missing_prerequisites

SECONDS = float(os.environ.get("FLEET_CHAOS_SECONDS", "75"))


def call(n: int, value: bool, outcome: str) -> Call:
    return Call(n, "fleet/jumbo", value, "127.0.0.1:1", float(n), float(n) + 0.1, outcome, {"ok": "OK", "refused": "ABORTED"}.get(outcome, "UNAVAILABLE"))


def test_a_history_of_acknowledged_changes_in_etcd_is_explained():
    calls = [call(0, False, "ok"), call(1, False, "ok"), call(2, True, "ok")]
    # The second asked for the value already there: no revision of its own.
    why, matched = explain(True, [(10, False), (12, True)], calls)
    assert why == "" and matched == {0: 10, 2: 12}


def test_an_acknowledged_change_missing_from_etcd_is_found():
    why, _ = explain(True, [(10, False)], [call(0, False, "ok"), call(1, True, "ok")])
    assert "call #1" in why


def test_a_refused_change_found_in_etcd_is_found():
    why, _ = explain(True, [(10, False)], [call(0, False, "refused")])
    assert "revision 10" in why and "no call" in why


def test_an_unknown_outcome_may_have_taken_effect_or_not():
    assert explain(True, [(10, False)], [call(0, False, "unknown")])[0] == ""
    assert explain(True, [], [call(0, False, "unknown")])[0] == ""
    # ... but not out of order: the acknowledged call after it wrote last.
    why, _ = explain(True, [(10, True), (11, False)], [call(0, False, "unknown"), call(1, True, "ok")])
    assert why


def test_a_fault_that_fails_stops_the_policy_client_before_it_is_raised():
    """The client calls controllers from a thread of its own: left running after a failed run, it
    flipped the policy of the next module's fleet, started on the same addresses."""

    class FailingChaos(Chaos):
        def inject(self, kind):
            raise AssertionError(f"no takeover after {kind}")

    began = time.monotonic()
    client = PolicyClient(random.Random(1), began)
    client.start()
    with pytest.raises(AssertionError, match="no takeover after kill-leader"):
        inject_faults(FailingChaos(None, random.Random(1), began), client, ["kill-leader"], gap=2.0, began=began - 2.0)
    assert not client._thread.is_alive()


@pytest.fixture(scope="module")
def fleet():
    missing = missing_prerequisites(Parts(), "soft")
    if shutil.which("nft") is None:
        missing.append("nft (Debian's nftables) for cutting a controller off from etcd")
    if missing:
        pytest.skip("emulation prerequisites missing: " + "; ".join(missing))
    with Fleet() as fleet:
        yield fleet


@pytest.mark.timeout(900)
def test_faults_lose_no_acknowledged_change_and_no_byte(fleet):
    result = run_chaos(fleet, SECONDS, seed=7)
    print("\n" + render(result))
    assert {fault.kind for fault in result.faults} == set(FAULTS)
    assert result.outcomes["ok"] > 0 and all(q["unavailable"] > 0 for q in result.quorum_windows)
    assert not result.failures, result.failures


def test_teardown_leaves_nothing(fleet):
    fleet.down()
    left = cleanup.find_leftovers()
    assert not left, left.describe()
