"""lab.start_dpdk_service starts a DPDK program again when its af_packet fanout id clashed, and only then."""

import sys
from pathlib import Path

import pytest

from testlab import lab

# Fails like net_af_packet with a clashing fanout id the first `clashes`
# times it runs, then serves TCP on the port until killed.
PROGRAM = """
import socket, sys, time
from pathlib import Path
count = Path(sys.argv[1])
runs = int(count.read_text()) if count.exists() else 0
count.write_text(str(runs + 1))
if runs < int(sys.argv[3]):
    print(sys.argv[4], flush=True)
    sys.exit(1)
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", int(sys.argv[2])))
s.listen()
time.sleep(60)
"""


def start(tmp_path: Path, clashes: int, message: str = lab.AF_PACKET_FANOUT_CLASH + " on AF_PACKET socket for veth0:Invalid argument"):
    port = lab.free_tcp_port()
    script = tmp_path / "program.py"
    script.write_text(PROGRAM)
    args = [sys.executable, script, tmp_path / "runs", port, clashes, message]
    return lab.start_dpdk_service(args, tmp_path / "program.log", f"127.0.0.1:{port}", timeout=10), tmp_path / "runs"


def test_a_fanout_clash_is_retried(tmp_path):
    process, runs = start(tmp_path, clashes=lab.DPDK_START_ATTEMPTS - 1)
    try:
        assert runs.read_text() == str(lab.DPDK_START_ATTEMPTS)
    finally:
        process.stop()


def test_retries_are_bounded(tmp_path):
    with pytest.raises(lab.LabError):
        start(tmp_path, clashes=lab.DPDK_START_ATTEMPTS)
    assert (tmp_path / "runs").read_text() == str(lab.DPDK_START_ATTEMPTS)


def test_other_failures_are_not_retried(tmp_path):
    with pytest.raises(lab.LabError):
        start(tmp_path, clashes=1, message="EAL: no memory")
    assert (tmp_path / "runs").read_text() == "1"
