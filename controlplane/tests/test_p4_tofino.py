"""The TNA top level (p4src/tna/) gives the controller the same P4Runtime face as v1model.

The controller drives both targets with the same code, finding every object
by name. Where bf-p4c (the open-source Tofino backend of p4c) is on PATH,
each chip and profile is compiled through bf-p4c's frontend and midend
(`--skip-compilation pipe`: the P4Info is complete before the backend
runs) and its P4Info compared with the committed v1model one; every
difference must be one that jumbogate.p4.p4info_compare explains. The
comparison itself is checked everywhere, bf-p4c or not.

The whole compile, through the backend to the chip's binary, runs for
both chips and both profiles (p4src/compile-tofino.sh, as `make p4-tofino`
runs it), each within the stage budget tofino_resources.py holds it to
(docs/dataplane.md, "On Tofino").
"""

import re
import shutil
import subprocess
from pathlib import Path

import pytest
from finsy.proto import p4i
from google.protobuf import text_format

from jumbogate.p4 import p4info_compare

REPO = Path(__file__).resolve().parents[2]
V1MODEL = REPO / "p4src" / "compiled"
NEEDS_BF_P4C = pytest.mark.skipif(shutil.which("bf-p4c") is None, reason="needs bf-p4c on PATH to compile p4src/tna/ (see README, 'Getting p4c and BMv2')")


def v1model_p4info(depth: int) -> p4i.P4Info:
    info = p4i.P4Info()
    text_format.Parse((V1MODEL / f"depth{depth}" / "jumbogate.p4info.txtpb").read_text(), info)
    return info


@NEEDS_BF_P4C
@pytest.mark.parametrize("chip, arch", [("tofino", "tna"), ("tofino2", "t2na")])
@pytest.mark.parametrize("depth", (256, 512))
def test_tna_names_every_object_as_v1model_does(chip, arch, depth, tmp_path):
    p4info = tmp_path / "jumbogate.p4info.txtpb"
    result = subprocess.run(
        [
            "bf-p4c",
            "--target",
            chip,
            "--arch",
            arch,
            "--std",
            "p4-16",
            f"-DPARSE_DEPTH_BYTES={depth}",
            "--p4runtime-force-std-externs",
            "--p4runtime-files",
            str(p4info),
            "--skip-compilation",
            "pipe",
            "-o",
            str(tmp_path / "out"),
            "tna/jumbogate.p4",
        ],
        cwd=REPO / "p4src",
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    tna = p4i.P4Info()
    text_format.Parse(p4info.read_text(), tna)
    lines, problems = p4info_compare.report(p4info_compare.compare(v1model_p4info(depth), tna))
    assert problems == 0, "\n".join(lines)
    # The tables the controller writes are all there, under the same names.
    assert {p4info_compare.local_name(t.preamble.name) for t in tna.tables} == {
        p4info_compare.local_name(t.preamble.name) for t in v1model_p4info(depth).tables
    }


# The stages each chip has, and the most the program may take of them
# (tofino_resources.STAGE_BUDGET), so that the border leaves room for an
# operator's own tables.
STAGES = {"tofino": 12, "tofino2": 20}
STAGE_BUDGET = {"tofino": 10, "tofino2": 18}


@NEEDS_BF_P4C
@pytest.mark.parametrize("chip", ("tofino", "tofino2"))
def test_compiles_for_the_chip_in_both_profiles(chip, tmp_path):
    # Both profiles side by side: each compile keeps one core busy for one
    # to four minutes.
    compiles = {
        depth: subprocess.Popen(
            ["bash", "p4src/compile-tofino.sh", chip, str(depth), str(tmp_path / f"{chip}-{depth}")],
            cwd=REPO,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for depth in (256, 512)
    }
    for depth, compile_ in compiles.items():
        _, stderr = compile_.communicate(timeout=1200)
        assert compile_.returncode == 0, f"{chip}, {depth}-byte profile:\n{stderr[-6000:]}"
        out = tmp_path / f"{chip}-{depth}"
        assert (out / "pipe" / f"{chip}.bin").stat().st_size > 0
        resources = (out / "resources.md").read_text()
        ingress = int(re.search(rf"^\| stages \(ingress\) \| (\d+) \| {STAGES[chip]} \|$", resources, re.M).group(1))
        egress = int(re.search(rf"^\| stages \(egress\) \| (\d+) \| {STAGES[chip]} \|$", resources, re.M).group(1))
        assert ingress <= STAGE_BUDGET[chip] and egress <= STAGE_BUDGET[chip], resources
        assert "within (" in resources, resources
        # The stage map names the tables the controller writes.
        for table in ("port_roles", "instances_v4", "merge_flows", "routes_v4", "next_hops"):
            assert re.search(rf"^\| \d+ \| TnaIngress\.\w+\.{table} \|$", resources, re.M), (depth, table)


def test_a_renamed_table_is_an_unexplained_difference():
    original = v1model_p4info(512)
    renamed = p4i.P4Info()
    renamed.CopyFrom(original)
    renamed.tables[0].preamble.name += "_renamed"
    lines, problems = p4info_compare.report(p4info_compare.compare(original, renamed))
    unexplained = [line for line in lines if line.startswith("UNEXPLAINED")]
    assert len(unexplained) == 2, lines  # only in v1model, only in tna
    # Every expected difference is missing here (both sides are v1model): stale.
    assert problems == 2 + len(p4info_compare.EXPECTED_DIFFERENCES)


def test_a_changed_match_field_width_differs():
    original = v1model_p4info(256)
    changed = p4i.P4Info()
    changed.CopyFrom(original)
    table = next(t for t in changed.tables if t.preamble.name.endswith("steering.merge_flows"))
    table.match_fields[1].bitwidth = 32
    differences = p4info_compare.compare(original, changed)
    assert [d.what for d in differences if d.kind == "differs"] == ["table steering.merge_flows"]


def test_top_level_controls_are_not_part_of_the_name():
    assert p4info_compare.local_name("V1ModelIngress.routing.next_hops") == "routing.next_hops"
    assert p4info_compare.local_name("pipe.TnaIngress.routing.next_hops") == "routing.next_hops"
    assert p4info_compare.local_name("pipe.TnaEgress.signal_builder.signal_source") == "signal_builder.signal_source"


def test_the_command_line_exits_1_on_an_unexplained_difference(tmp_path, capsys):
    committed = V1MODEL / "depth512" / "jumbogate.p4info.txtpb"
    assert p4info_compare.main([str(committed), str(committed)]) == 1
    assert "STALE" in capsys.readouterr().out
    assert p4info_compare.main([str(committed), str(tmp_path / "missing.txtpb")]) == 2
