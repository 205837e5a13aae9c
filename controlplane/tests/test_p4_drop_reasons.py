"""The Python drop-reason enum is generated from drop_reasons.p4 and matches it."""

from pathlib import Path

import pytest

from jumbogate.p4 import DropReason
from jumbogate.p4.dropgen import parse_drop_reasons, render_module

REPO = Path(__file__).resolve().parents[2]
DROP_REASONS_P4 = REPO / "p4src" / "include" / "drop_reasons.p4"
GENERATED = REPO / "controlplane" / "src" / "jumbogate" / "p4" / "drop_reasons.py"

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


@pytest.mark.skipif(not DROP_REASONS_P4.exists(), reason="P4 sources not in this checkout")
def test_generated_module_is_up_to_date():
    reasons = parse_drop_reasons(DROP_REASONS_P4.read_text())
    assert GENERATED.read_text() == render_module(reasons), (
        "regenerate: python -m jumbogate.p4.dropgen p4src/include/drop_reasons.p4 controlplane/src/jumbogate/p4/drop_reasons.py"
    )
    assert {r.name: r.value for r in DropReason} == reasons


def test_required_reasons_present():
    assert REQUIRED <= {r.name for r in DropReason}
    assert DropReason.NONE == 0
    assert max(DropReason) < 256  # counter size and bit<8>


def test_parser_rejects_duplicates():
    text = "const drop_reason_t DROP_A = 1;\nconst drop_reason_t DROP_B = 1;\n"
    with pytest.raises(ValueError, match="used twice"):
        parse_drop_reasons(text)
    with pytest.raises(ValueError, match="no drop reasons"):
        parse_drop_reasons("// nothing\n")


def test_parser_ignores_comments_and_other_constants():
    text = "// const drop_reason_t DROP_X = 3;\nconst bit<8> OTHER = 2;\nconst drop_reason_t DROP_Y = 4;\n"
    assert parse_drop_reasons(text) == {"Y": 4}
