"""The committed P4Testgen corpus (ptf-tests/p4testgen/) is what P4Testgen
makes from today's P4.

The corpus runs in `make test` on every target (ptf-tests/run.sh --suite
p4testgen), so it must follow the P4: a P4 change that is not followed by
`make p4testgen` fails here, where p4testgen is on PATH.
"""

import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
CORPUS = REPO / "ptf-tests" / "p4testgen"
PROFILES = (256, 512)


def corpus_files(root: Path) -> list[Path]:
    return [root / f"depth{depth}" / "p4testgen_paths.py" for depth in PROFILES] + [root / "coverage.md"]


def test_the_corpus_covers_every_profile_the_p4_is_compiled_for():
    compiled = sorted(int(p.name.removeprefix("depth")) for p in (REPO / "p4src" / "compiled").glob("depth*"))
    assert compiled == list(PROFILES)
    for path in corpus_files(CORPUS):
        assert path.is_file(), f"{path.relative_to(REPO)} is missing; run 'make p4testgen'"
    for depth in PROFILES:
        text = (CORPUS / f"depth{depth}" / "p4testgen_paths.py").read_text()
        assert text.count("\nclass Test") > 0, f"the depth-{depth} corpus has no test"
        assert "import base_test as bt" in text


@pytest.mark.skipif(shutil.which("p4testgen") is None, reason="needs p4testgen on PATH to regenerate the corpus (see README, 'Getting p4c and BMv2')")
def test_a_fresh_generation_equals_the_committed_corpus(tmp_path):
    subprocess.run(["bash", str(CORPUS / "generate.sh"), str(tmp_path)], check=True, capture_output=True, text=True, timeout=1800)
    for committed, fresh in zip(corpus_files(CORPUS), corpus_files(tmp_path), strict=True):
        assert fresh.read_text() == committed.read_text(), f"{committed.relative_to(REPO)} differs from a fresh generation; run 'make p4testgen'"
