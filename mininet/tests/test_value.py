"""`make value`'s path MTU section (emulation/value.py), short: the border next to Scamper over the plain path,
the fragmenting one and the black hole, IPv4 (about 90 s with the bring-up)."""

from __future__ import annotations

import shutil

import pytest
from emulation import value
from emulation.rack import Parts, missing_prerequisites
from emulation.two_racks import TwoRacks

pytestmark = [pytest.mark.timeout(900)]


def test_the_border_is_right_on_every_path_and_where_scamper_is_right_it_agrees():
    missing = missing_prerequisites(Parts(), "soft")
    if shutil.which("scamper") is None:
        missing.append("scamper (Debian's scamper)")
    if missing:
        pytest.skip("emulation prerequisites missing: " + "; ".join(missing))
    with TwoRacks() as racks:
        answers = value.compare(racks, ["m1", "m2", "m3"], [4])
    print("\n" + value.render(answers))
    assert [a.path for a in answers] == ["m1", "m2", "m3"]
    assert all(a.exact_mtu == a.real_mtu and a.border_mtu <= a.real_mtu for a in answers), answers
    # Scamper answered over the paths that signal: the same MTU.
    assert [a.scamper_mtu for a in answers[:2]] == [9000, 4200]
    assert value.failures(answers) == []


def test_the_border_above_a_paths_mtu_is_a_failure_whatever_scamper_says():
    wrong = value.PathAnswer("m3", "10.2.0.13", 4000, border_mtu=9000, exact_mtu=9000, scamper_mtu=9000)
    missed = value.PathAnswer("m2", "10.2.0.12", 4200, border_mtu=4196, exact_mtu=4196, scamper_mtu=4200)
    assert len(value.failures([wrong, missed])) == 2
    assert "above the path's 4000" in value.explain(value.PathAnswer("m3", "10.2.0.13", 4000, exact_mtu=4000, scamper_mtu=9000))
