"""The lock files are complete, hashed, apart, and what the tests run on; make setup
says which platform it supports.

Every package the run time needs (pyproject's dependencies, and everything
they pull in) is pinned in requirements.lock; every package the extras
(tests, plots, stubs, lint) pull in beyond it is in requirements-dev.lock;
each pin carries at least one sha256 (pip --require-hashes) and equals the
version installed here. Debian's packages that the venv sees (cryptography,
Mininet) are not pinned: they come with the distribution.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tomllib
from importlib.metadata import PackageNotFoundError, distribution
from pathlib import Path

import pytest
from packaging.requirements import Requirement

REPO = Path(__file__).resolve().parents[2]
CONTROLPLANE = REPO / "controlplane"
RUNTIME_LOCK = CONTROLPLANE / "requirements.lock"
DEV_LOCK = CONTROLPLANE / "requirements-dev.lock"
PIN = re.compile(r"^([A-Za-z0-9_.-]+)==(\S+)((?:\s*\\\s*\n\s*--hash=sha256:[0-9a-f]{64})+)", re.M)
# Taken from Debian 12 (python3-cryptography), never from PyPI: pinned by the distribution.
FROM_DEBIAN = {"cryptography"}


def normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def pins(lock: Path) -> dict[str, str]:
    text = lock.read_text()
    found = {normal(name): version for name, version, _hashes in PIN.findall(text)}
    requirement_lines = [line for line in text.splitlines() if line and not line.startswith(("#", " "))]
    assert len(found) == len(requirement_lines), f"{lock.name}: a requirement without an exact pin or a sha256: {requirement_lines}"
    return found


def closure(roots: list[str]) -> set[str]:
    """The installed distributions `roots` need, transitively (not into Debian's own)."""
    seen: set[str] = set()
    stack = [Requirement(root) for root in roots]
    while stack:
        requirement = stack.pop()
        name = normal(requirement.name)
        if name in seen or (requirement.marker and not requirement.marker.evaluate({"extra": ""})):
            continue
        seen.add(name)
        if name in FROM_DEBIAN:
            continue
        try:
            dist = distribution(name)
        except PackageNotFoundError:
            pytest.fail(f"{name} is needed but not installed")
        stack += [Requirement(r) for r in dist.requires or []]
    return seen


def project() -> dict:
    return tomllib.loads((CONTROLPLANE / "pyproject.toml").read_text())["project"]


def test_the_runtime_lock_pins_everything_the_runtime_needs_and_nothing_else():
    needed = closure(project()["dependencies"]) - FROM_DEBIAN
    assert needed == set(pins(RUNTIME_LOCK)), "requirements.lock differs from what pyproject's dependencies need"


def test_the_dev_lock_pins_what_the_extras_need_beyond_the_runtime():
    extras = [r for group in project()["optional-dependencies"].values() for r in group]
    needed = closure(extras) - set(pins(RUNTIME_LOCK)) - FROM_DEBIAN
    assert needed == set(pins(DEV_LOCK)), "requirements-dev.lock differs from what the extras need beyond the run time"
    assert not set(pins(RUNTIME_LOCK)) & set(pins(DEV_LOCK)), "a package is pinned in both locks"


def test_every_pin_is_the_version_the_tests_run_on():
    for lock in (RUNTIME_LOCK, DEV_LOCK):
        for name, version in pins(lock).items():
            assert distribution(name).version == version, f"{lock.name} pins {name}=={version}, the venv has {distribution(name).version}"


def test_the_stub_generator_matches_the_protobuf_runtime():
    """grpcio-tools' stubs must load under the locked protobuf (they check the runtime at import)."""
    locked = {**pins(RUNTIME_LOCK), **pins(DEV_LOCK)}
    tools = Requirement(next(r for r in distribution("grpcio-tools").requires if Requirement(r).name == "protobuf"))
    assert tools.specifier.contains(locked["protobuf"]), f"grpcio-tools {locked['grpcio-tools']} wants protobuf{tools.specifier}"


def fake_platform(tmp_path: Path, arch: str) -> tuple[Path, dict]:
    """A copy of setup.sh in an empty tree (it works where it stands), and a PATH whose dpkg says `arch` and whose dpkg-query finds every package."""
    (tmp_path / "scripts").mkdir()
    shutil.copy(REPO / "scripts" / "setup.sh", tmp_path / "scripts" / "setup.sh")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    dpkg = bin_dir / "dpkg"
    dpkg.write_text(f'#!/bin/sh\n[ "$1" = --print-architecture ] && echo {arch}\n')
    dpkg.chmod(0o755)
    # Every Debian package present: the copy never installs any.
    query = bin_dir / "dpkg-query"
    query.write_text("#!/bin/sh\necho 'install ok installed'\n")
    query.chmod(0o755)
    return tmp_path / "scripts" / "setup.sh", dict(os.environ, PATH=f"{bin_dir}:{os.environ['PATH']}")


def test_setup_says_what_it_supports_and_stops_elsewhere(tmp_path):
    script, env = fake_platform(tmp_path, "arm64")
    done = subprocess.run(["bash", script], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=60)
    assert done.returncode == 1
    assert "make setup supports Debian 12 (bookworm) on amd64 only" in done.stderr and "on arm64" in done.stderr
    assert "JUMBOGATE_ANY_DISTRO=1" in done.stderr
    assert not (tmp_path / ".venv").exists(), "it stopped before doing anything"


def test_setup_goes_on_elsewhere_when_told_and_warns(tmp_path):
    script, env = fake_platform(tmp_path, "arm64")
    env["JUMBOGATE_ANY_DISTRO"] = "1"
    # Its checks go on; this empty tree has no lock files, so it stops at the Python packages.
    done = subprocess.run(["bash", script], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300)
    assert "WARNING:" in done.stdout and "not what this script supports (Debian 12 on amd64)" in done.stdout, done.stdout + done.stderr
