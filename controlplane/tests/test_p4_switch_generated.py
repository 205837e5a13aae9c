"""The switch's view of the P4 (switch/gen_p4_tables.py) and the lint that keeps it the only one
(scripts/lint_p4_literals.py, in make lint)."""

from __future__ import annotations

import importlib.util
import json
import shutil
import sys
from pathlib import Path

import pytest

from jumbogate.p4 import defines

ROOT = Path(__file__).resolve().parents[2]
COMPILED = ROOT / "p4src" / "compiled"
pytestmark = pytest.mark.skipif(not (COMPILED / "depth512").exists(), reason="the committed compile is not in this checkout")


def load(path: Path):
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


GEN = load(ROOT / "switch" / "gen_p4_tables.py")
LINT = load(ROOT / "scripts" / "lint_p4_literals.py")


def profiles(root: Path = COMPILED) -> list[tuple[Path, Path]]:
    return [(d / "jumbogate.p4info.txtpb", d / "jumbogate.json") for d in sorted(root.glob("depth*"))]


def test_the_shapes_are_the_compile_s():
    data = GEN.profile_shapes(profiles())
    fleet = data["tables"]["fleet_policy"]
    assert (fleet["default_action"], fleet["const_default"]) == ("set_fleet_jumbo", False)
    assert [v for _, _, v in fleet["default_args"]] == [0, defines.MTU_JUMBO, defines.MTU_STANDARD]
    flows = data["tables"]["merge_flows"]
    assert [(f["name"], f["offset"], f["bytes"]) for f in flows["fields"]] == [
        ("ip_version", 0, 1),
        ("src_addr", 1, 16),
        ("dst_addr", 17, 16),
        ("protocol", 33, 1),
        ("src_port", 34, 2),
        ("dst_port", 36, 2),
    ]
    assert flows["key_bytes"] == 38
    assert data["tables"]["next_hops"]["default_action"] is None  # an action selector has no default entry
    selector = data["selectors"]["ecmp_selector"]
    assert [(f["name"], f["offset"], f["bits"]) for f in selector["inputs"]] == [
        ("flow_src_addr", 0, 128),
        ("flow_dst_addr", 16, 128),
        ("flow_protocol", 32, 8),
        ("flow_src_port", 33, 16),
        ("flow_dst_port", 35, 16),
    ]


def test_profiles_that_differ_in_a_table_stop_the_build(tmp_path):
    """The switch holds one set of tables whatever the profile: a size that differs between the compiles is an error
    naming the table, never one profile's size silently."""
    for d in ("depth256", "depth512"):
        shutil.copytree(COMPILED / d, tmp_path / d)
    compiled = tmp_path / "depth512" / "jumbogate.json"
    program = json.loads(compiled.read_text())
    for pipeline in program["pipelines"]:
        for t in pipeline["tables"]:
            if t["name"].endswith(".routes_v4"):
                t["max_size"] = 8192
    compiled.write_text(json.dumps(program))
    info = tmp_path / "depth512" / "jumbogate.p4info.txtpb"
    text = info.read_text()
    at = text.index('alias: "routes_v4"')
    info.write_text(text[:at] + text[at:].replace("size: 4096", "size: 8192", 1))
    with pytest.raises(SystemExit, match="routes_v4"):
        GEN.profile_shapes(profiles(tmp_path))


def test_a_size_the_json_and_the_p4info_disagree_on_stops_the_build(tmp_path):
    shutil.copytree(COMPILED / "depth512", tmp_path / "depth512")
    info = tmp_path / "depth512" / "jumbogate.p4info.txtpb"
    text = info.read_text()
    at = text.index('alias: "merge_flows"')
    info.write_text(text[:at] + text[at:].replace("size: 16384", "size: 100", 1))
    with pytest.raises(SystemExit, match="merge_flows: size 16384 in the BMv2 JSON, 100 in the P4Info"):
        GEN.profile_shapes(profiles(tmp_path))


PLANTED = """
static const std::map<std::string, int> kSomething = {
    {"fleet_policy", 1},                       /* a table's name */
};
int set_up(struct sw_tables *tables, uint32_t seed)
{
    int result = sw_hash_init(&tables->merge_flows, 38,
                              16384, seed);    /* size and key length */
    tables->guest_jumbo_mtu = 8500;            /* a default argument */
    if (info.params[i].name == "mtu")          /* a parameter's name */
        return 1;
    return result;
}
"""

CLEAN = """
/* Comments may say fleet_policy holds 16384 or "fleet_policy". */
int set_up(struct sw_tables *tables, uint32_t seed, const struct flow *flow)
{
    int result = sw_hash_init(&tables->merge_flows,
                              P4_TABLE_MERGE_FLOWS_KEY_BYTES,
                              P4_TABLE_MERGE_FLOWS_SIZE, seed);
    const char *usage = "--port N";             /* a string, not a compared name */
    uint8_t key[40];
    if (flow->ip_version == 4)                  /* numbers that are no table's */
        key[0] = 4;
    printf("%d flows\\n", 1024);
    tables->guest_jumbo_mtu = P4_TABLE_FLEET_POLICY_DEFAULT_GUEST_JUMBO_MTU;
    return result + (usage != NULL) + key[0];
}
"""


def lint(tmp_path: Path, text: str) -> tuple[int, list[str]]:
    source = tmp_path / "planted.cc"
    source.write_text(text)
    from io import StringIO

    out, saved = StringIO(), sys.stdout
    sys.stdout = out
    try:
        code = LINT.main([str(tmp_path)])
    finally:
        sys.stdout = saved
    return code, out.getvalue().splitlines()


def test_the_lint_finds_planted_p4_values(tmp_path):
    code, lines = lint(tmp_path, PLANTED)
    assert code == 1
    found = {(int(line.split(":")[1]), line.split(": ", 1)[1].split(" ")[0]) for line in lines}
    assert found == {(3, "P4"), (7, "38"), (8, "16384"), (9, "8500"), (10, "P4")}, lines
    assert any('"mtu"' in line for line in lines)


def test_the_lint_leaves_other_numbers_and_strings_alone(tmp_path):
    assert lint(tmp_path, CLEAN) == (0, [])


def test_the_switch_types_nothing_the_p4_defines():
    assert LINT.main([str(ROOT / "switch"), str(ROOT / "runtime")]) == 0
