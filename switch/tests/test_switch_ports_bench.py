"""The switch's port benchmark (make bench) runs and measures what it says:
jumbogate-switch, programmed as the controller would, sends the bypass
captures to the rack port and the steering captures to the SmartNIC port,
through real veth ports (af_packet, and AF_XDP sockets where the kernel
opens them) and through shared-memory (memif) ports, and the
pass-through forwards the same frames. The figures themselves are for
`make bench`; a short run here keeps the benchmark working."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from testlab.portbench import xdp_unavailable

REPO = Path(__file__).resolve().parents[2]
BENCH = REPO / "switch" / "bench" / "switch_ports.py"
RACK_PORT, NIC_PORT = "2", "3"


def run_bench(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(BENCH), *args], capture_output=True, text=True, timeout=240)


def test_every_path_leaves_by_its_own_port_on_the_switch_and_the_pass_through(tmp_path):
    figures = tmp_path / "switch_ports.json"
    done = run_bench("--targets", "soft,pass", "--seconds", "0.3", "--json", str(figures))
    assert done.returncode == 0, done.stderr[-3000:]
    by_kind = json.loads(figures.read_text())["results"]
    # AF_XDP where this kernel opens its sockets; where it does not, one line says so.
    xdp_missing = xdp_unavailable()
    assert set(by_kind) == ({"veth", "memif"} if xdp_missing else {"veth", "memif", "xdp"})
    for kind, results in by_kind.items():
        assert set(results) == {"soft", "pass"}, kind
        check_paths(kind, results)
    assert "soft/pass" in done.stdout and "bypass-ipv6" in done.stdout
    assert "on veth ports" in done.stdout and "on memif ports" in done.stdout
    if xdp_missing:
        assert f"AF_XDP left out: {xdp_missing}" in done.stderr
    else:
        assert "on xdp ports" in done.stdout


# runtime/port.h: JG_PORT_RX_DESCRIPTORS + JG_PORT_TX_DESCRIPTORS.
IN_FLIGHT_AT_WINDOW_START = 1024 + 1024


def check_paths(kind: str, results: dict) -> None:
    for target, paths in results.items():
        assert set(paths) == {"bypass-ipv4", "bypass-ipv6", "steering-ipv4", "steering-ipv6"}
        for name, figures_of_path in paths.items():
            way_out, other = (NIC_PORT, RACK_PORT) if name.startswith("steering") else (RACK_PORT, NIC_PORT)
            received = figures_of_path["received"]
            assert received[other] == 0, (kind, target, name, received)
            # Forwarded frames: a real share of what was sent, and at most
            # that plus the warm-up's stragglers: the frames in flight as the
            # window opens, at most the forwarder's receive and transmit
            # rings (a loaded machine once brought one whole ring, 1,024
            # frames, into a 0.3 s window of 15,328).
            assert 0.25 * figures_of_path["sent"] < received[way_out] <= figures_of_path["sent"] + IN_FLIGHT_AT_WINDOW_START, (
                kind,
                target,
                name,
                figures_of_path,
            )


def test_an_unknown_target_is_refused_with_the_known_ones():
    done = run_bench("--targets", "soft,tofino")
    assert done.returncode == 2
    assert "unknown target tofino: use soft, pass, bmv2" in done.stderr


def test_an_unknown_port_kind_is_refused_with_the_known_ones():
    done = run_bench("--ports", "veth,ring")
    assert done.returncode == 2
    assert "--ports takes veth, memif, xdp, got 'veth,ring'" in done.stderr
