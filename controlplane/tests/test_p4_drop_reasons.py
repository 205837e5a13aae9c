"""The drop-reason enum is made of drop_reasons.p4's constants, through the generated defines module."""

import importlib.util
import re
import sys
from pathlib import Path

import pytest

from jumbogate.p4 import DropReason

REPO = Path(__file__).resolve().parents[2]
P4_INCLUDE = REPO / "p4src" / "include"
GENERATOR = REPO / "controlplane" / "src" / "jumbogate" / "p4" / "generate.py"
P4INFO = REPO / "p4src" / "compiled" / "depth512" / "jumbogate.p4info.txtpb"
pytestmark = pytest.mark.skipif(not P4_INCLUDE.exists(), reason="P4 sources not in this checkout")

REQUIRED = {
    "PARSE_DEPTH_EXCEEDED",
    "TRUNCATED",
    "IPV4_IHL_INVALID",
    "TCP_DATA_OFFSET_INVALID",
    "GENEVE_OPTIONS_PAST_PACKET",
    "TTL_EXPIRED",
    "HOP_LIMIT_EXPIRED",
    "NO_ROUTE",
    "MTU_EXCEEDED",
    "MTU_EXCEEDED_NO_DF",
    "ICMP_RATE_LIMITED",
}


def load(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def test_the_enum_is_every_drop_reason_of_the_p4():
    source = (P4_INCLUDE / "drop_reasons.p4").read_text()
    reasons = {name: int(value) for name, value in re.findall(r"^\s*const\s+drop_reason_t\s+DROP_(\w+)\s*=\s*(\d+)\s*;", source, re.M)}
    assert {r.name: r.value for r in DropReason} == reasons


def test_required_reasons_present():
    assert REQUIRED <= {r.name for r in DropReason}
    assert DropReason.NONE == 0
    assert max(DropReason) < 256  # counter size and bit<8>


def test_a_reason_added_to_the_p4_is_generated(tmp_path):
    edited = tmp_path / "drop_reasons.p4"
    edited.write_text((P4_INCLUDE / "drop_reasons.p4").read_text() + "\nconst drop_reason_t DROP_ADDED_FOR_A_TEST = 200;\n")
    generator = load(GENERATOR, "jumbogate_p4_generate_under_test")
    assert generator.main([str(P4INFO), str(P4_INCLUDE / "defines.p4"), str(edited), str(tmp_path)]) == 0
    defines = load(tmp_path / "defines.py", "jumbogate_p4_defines_under_test")
    assert defines.DROP_ADDED_FOR_A_TEST == 200 and defines.DROP_MTU_EXCEEDED == DropReason.MTU_EXCEEDED


def test_a_constant_defined_twice_with_two_values_is_refused(tmp_path):
    clash = tmp_path / "clash.p4"
    clash.write_text("const bit<16> MTU_STANDARD = 1400;\n")
    generator = load(GENERATOR, "jumbogate_p4_generate_under_test")
    with pytest.raises(SystemExit, match="MTU_STANDARD defined twice"):
        generator.main([str(P4INFO), str(P4_INCLUDE / "defines.p4"), str(clash), str(tmp_path)])
