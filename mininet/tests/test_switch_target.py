"""Choosing the emulation's switch target: SWITCH=soft|bmv2, the default, and clear errors."""

import pytest
from emulation import procs, switches
from emulation.rack import Parts, missing_prerequisites


def test_an_unknown_target_is_refused_with_the_choices(monkeypatch):
    monkeypatch.setenv("SWITCH", "tofino")
    with pytest.raises(procs.StartError, match=r"SWITCH=tofino is not a switch target: use SWITCH=soft .* or SWITCH=bmv2"):
        switches.resolve_target()
    assert any("SWITCH=tofino is not a switch target" in line for line in missing_prerequisites(Parts(nic=False, controller=False)))


def test_an_argument_wins_over_the_environment(monkeypatch):
    monkeypatch.setenv("SWITCH", "bmv2")
    assert switches.resolve_target("soft") == "soft"
    assert switches.resolve_target() == "bmv2"


def test_the_default_is_jumbogate_switch_whether_or_not_bmv2_is_installed(monkeypatch):
    monkeypatch.delenv("SWITCH", raising=False)
    for found in (None, "/usr/bin/simple_switch_grpc"):
        monkeypatch.setattr(switches.shutil, "which", lambda name, found=found: found)
        assert switches.resolve_target() == "soft"


def test_a_missing_binary_names_the_fix(monkeypatch, tmp_path):
    monkeypatch.setattr(switches.shutil, "which", lambda name: None)
    assert "needs simple_switch_grpc on PATH" in switches.missing_switch("bmv2")
    monkeypatch.setattr(switches, "SOFT_SWITCH", procs.REPO / "build" / "no-such-switch")
    assert "run 'make setup'" in switches.missing_switch("soft")
