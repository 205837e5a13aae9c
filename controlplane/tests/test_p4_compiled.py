"""The committed compile of p4src/ (p4src/compiled/) is what p4c makes today.

jumbogate-switch, the controller and the PTF suite use the committed P4Info
and BMv2 JSON, so that no machine needs p4c. Where p4c is on PATH this test
compiles both profiles afresh and fails on any difference: a P4 change
without `make p4` cannot land unnoticed.
"""

import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
COMPILED = REPO / "p4src" / "compiled"
PROFILES = (256, 512)
FILES = ("jumbogate.json", "jumbogate.p4info.txtpb")


@pytest.mark.parametrize("depth", PROFILES)
def test_committed_files_exist(depth):
    for name in FILES:
        assert (COMPILED / f"depth{depth}" / name).stat().st_size > 0, f"{name} of profile {depth} is missing; run 'make p4'"


@pytest.mark.skipif(shutil.which("p4c") is None, reason="needs p4c on PATH to recompile p4src/ (see README, 'Getting p4c and BMv2')")
@pytest.mark.parametrize("depth", PROFILES)
def test_committed_files_equal_a_fresh_compile(depth, tmp_path):
    result = subprocess.run(["bash", str(REPO / "p4src" / "compile.sh"), str(depth), str(tmp_path)], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    for name in FILES:
        fresh = (tmp_path / name).read_text()
        committed = (COMPILED / f"depth{depth}" / name).read_text()
        assert fresh == committed, f"p4src/compiled/depth{depth}/{name} differs from a fresh compile: run 'make p4' and commit"


def test_no_machine_paths_in_committed_files():
    for path in COMPILED.rglob("*"):
        if path.is_file():
            assert str(REPO) not in path.read_text(), f"{path.relative_to(REPO)} names this checkout's location"


def test_both_compile_scripts_refuse_a_profile_that_is_not_a_number(tmp_path):
    # The check comes before the compiler is looked for, so it holds with or
    # without p4c and bf-p4c (compile-common.sh serves both scripts).
    for script, args in (("compile.sh", ["25x"]), ("compile-tofino.sh", ["tofino", "25x"])):
        result = subprocess.run(["bash", str(REPO / "p4src" / script), *args, str(tmp_path / "out")], capture_output=True, text=True)
        assert result.returncode == 2, (script, result.stderr)
        assert f"{script}: PROFILE_BYTES must be a number, got '25x'" in result.stderr
