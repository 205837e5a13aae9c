"""The soak's two-minute version (`make soak` runs ten): the rack under kills, flag flips and floods, with nothing lost."""

import os

import pytest
from emulation import cleanup, soak
from emulation.rack import Rack

pytestmark = [
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root (Mininet creates namespaces and veths)"),
    pytest.mark.timeout(600),
]


def test_two_minutes_of_chaos_lose_nothing():
    with Rack(switch_target="soft") as rack:
        result = soak.run_soak(rack, minutes=2, seed=7, target=rack.target)
    print(soak.render(result))
    assert not result.failures, soak.render(result)
    assert {event.kind for event in result.events} == set(soak.EVENTS), "every kind of event was injected"
    assert all(t["bytes_received"] > 0 for t in result.transfers.values())
    assert result.switch_matches_controller
    assert not cleanup.find_leftovers(), cleanup.find_leftovers().describe()
