"""The controller's Python package builds as a wheel that carries its generated modules (#37).

The stubs of proto/ and the P4 program's names and constants are generated
(make proto), never committed; a wheel built after make proto must carry
them, and run on its own, without the checkout's source tree.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

CONTROLPLANE = Path(__file__).resolve().parents[1]
GENERATED = ("jumbogate/v1/policy_pb2.py", "jumbogate/v1/policy_pb2_grpc.py", "jumbogate/v1/nic_pb2.py", "jumbogate/p4/names.py", "jumbogate/p4/defines.py")


def test_the_wheel_carries_the_generated_modules_and_runs_without_the_checkout(tmp_path):
    source = tmp_path / "controlplane"
    shutil.copytree(CONTROLPLANE, source, ignore=shutil.ignore_patterns("tests", "build", "*.egg-info", "__pycache__"))
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(tmp_path / "dist"), str(source)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert built.returncode == 0, built.stderr
    (wheel,) = (tmp_path / "dist").glob("jumbogate-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    assert set(GENERATED) <= names, sorted(set(GENERATED) - names)
    installed = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target", str(tmp_path / "site"), str(wheel)], capture_output=True, text=True, timeout=300
    )
    assert installed.returncode == 0, installed.stderr
    probe = "import jumbogate, jumbogate.v1.policy_pb2, jumbogate.p4; print(jumbogate.__file__); print(jumbogate.p4.DropReason.MTU_EXCEEDED.name)"
    ran = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, env={"PYTHONPATH": str(tmp_path / "site")}, cwd=tmp_path)
    assert ran.returncode == 0, ran.stderr
    where, reason = ran.stdout.split()
    assert Path(where).is_relative_to(tmp_path / "site") and reason == "MTU_EXCEEDED"
