"""What the port benchmarks share (switch_ports.py, nic_ports.py): the two
kinds of port that join the load generator to the forwarder under test, the
load generator itself (jumbogate-loadgen), and the pass-through forwarder
both compare with (dpdk-testpmd in io mode).

The generator sends a capture's frames out of one port as fast as it takes
them and counts what comes back on the others. The forwarder under test owns
the far ends of the same ports:

- veth: af_packet devices on veth pairs; what comes back is counted by the
  kernel, so the generator's core only sends;
- memif: shared-memory DPDK ports, the forwarder the server of each (it
  starts first, and a memif client does not start without its server), the
  generator the client, which receives what comes back itself;
- xdp: the same veth pairs at MTU 1500 (XDP_MTU), the forwarder's ends and
  the generator's sending end opened as AF_XDP sockets (net_af_xdp) instead
  of af_packet; the kernel still counts what comes back. A port that must
  carry jumbo frames (Ports.jumbo_ports: the SmartNIC's merged output) stays
  on af_packet.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from . import lab

REPO = Path(__file__).resolve().parents[1]
LOADGEN = lab.LOADGEN
PORT_KINDS = ("veth", "memif", "xdp")
# The MTU of both ends of a veth pair whose forwarder side is an AF_XDP
# socket. Native XDP on veth takes a program that does not handle frames
# in several buffers only up to about 3.5 KB of MTU (the kernel refuses it
# with "Peer MTU is too large to set XDP"), and DPDK 22.11's net_af_xdp
# loads no other (nor can its buffers, one page each, hold more). So AF_XDP
# carries 1500-byte frames here, never the rack's jumbo ones.
XDP_MTU = 1500
# The af_packet rings jumbogate-switch and jumbogate-nic open on their ports
# (jumbo frames whole: framesz = blocksz, buffers at least as large).
AF_PACKET_RING = "blocksz=12288,framesz=12288,framecnt=1024"

# The rack's addresses in the benchmarks' frames: senders on the Internet,
# an instance inside the rack.
INTERNET = {4: "198.51.100.10", 6: "2001:db8:100::10"}
INTERNET_NET = {4: "198.51.100.0/24", 6: "2001:db8:100::/48"}
INSTANCE = {4: "10.1.0.5", 6: "fd00:1::5"}
INSTANCE_NET = {4: "10.1.0.0/16", 6: "fd00:1::/32"}


class BenchError(RuntimeError):
    pass


AF_XDP = 44  # linux/socket.h; Python's socket module does not name it


def xdp_unavailable() -> str:
    """Why this kernel opens no AF_XDP socket, or "" when it does."""
    try:
        socket.socket(AF_XDP, socket.SOCK_RAW).close()
    except OSError as err:
        return f"this kernel opens no AF_XDP socket ({err.strerror})"
    return ""


@contextlib.contextmanager
def veth_mtu(names: list[str], mtu: int, restore: int) -> Iterator[None]:
    """Both ends of the named veths at `mtu` while the body runs, then at `restore`."""
    try:
        for name in names:
            lab.sh("ip", "link", "set", name, "mtu", str(mtu))
        yield
    finally:
        for name in names:
            lab.sh("ip", "link", "set", name, "mtu", str(restore), check=False)


def port_kinds(parser: argparse.ArgumentParser, value: str, known: tuple[str, ...] = PORT_KINDS) -> list[str]:
    """The kinds of --ports, or the parser's error (exit 2) naming the known ones."""
    kinds = [k for k in value.split(",") if k]
    if not kinds or any(k not in known for k in kinds):
        parser.error(f"--ports takes {', '.join(known)}, got '{value}'")
    return kinds


@dataclass(frozen=True)
class Ports:
    """How the generator and the forwarder under test are joined.

    `forwarder_side` and `host_side` name the veth ends of each port number
    (the forwarder's and the generator's); memif ports are numbered the
    same. The generator sends out of port `tx` and counts the others.

    `memif_buffer`: the size of memif's ring buffers on both sides (0:
    the driver's 2048). A larger frame is carried in several buffers, and
    with DPDK 22.11 such frames did not come through intact: with the
    default buffers the generator counted more frames and bytes coming back
    from jumbogate-nic than it had sent. Benchmarks that send jumbo frames
    over memif give buffers that hold one whole.

    `jumbo_ports`: on xdp, the ports that stay af_packet veths at their
    jumbo MTU, since AF_XDP carries at most XDP_MTU here.
    """

    kind: str
    socket: str
    forwarder_side: dict[int, str]
    host_side: dict[int, str]
    tx: int
    memif_buffer: int = 0
    jumbo_ports: tuple[int, ...] = ()

    @property
    def _memif_options(self) -> str:
        return f",bsize={self.memif_buffer}" if self.memif_buffer else ""

    @property
    def driver(self) -> str:
        """The DPDK driver, which a vdev's name must start with."""
        return {"veth": "net_af_packet", "memif": "net_memif", "xdp": "net_af_xdp"}[self.kind]

    def driver_of(self, port: int) -> str:
        """The DPDK driver of one forwarder port."""
        return "net_af_packet" if self.kind == "xdp" and port in self.jumbo_ports else self.driver

    @property
    def xdp_veths(self) -> list[str]:
        """Both ends of every veth pair whose forwarder end is an AF_XDP socket (to be at XDP_MTU)."""
        if self.kind != "xdp":
            return []
        return [end for port in self.forwarder_side if port not in self.jumbo_ports for end in (self.forwarder_side[port], self.host_side[port])]

    @property
    def on_veth(self) -> bool:
        """Whether the ports are veth pairs (the generator's ends af_packet, counted by the kernel)."""
        return self.kind in ("veth", "xdp")

    @property
    def forwarder_mbuf_size(self) -> int:
        """Buffer size for a pass-through on these ports: af_packet copies a whole ring frame into one,
        AF_XDP's buffers are one page each (and its frames at most XDP_MTU)."""
        return 2176 if self.kind == "xdp" else 12416

    @property
    def counted(self) -> list[int]:
        return [port for port in self.forwarder_side if port != self.tx]

    def generator_args(self) -> list[str]:
        if self.on_veth:
            # On xdp ports the generator sends through an AF_XDP socket too: af_packet's
            # send would otherwise be the ceiling measured.
            device = f"{self.driver}_gen"
            options = "" if self.kind == "xdp" else f",{AF_PACKET_RING}"
            return [
                "--vdev",
                f"{device},iface={self.host_side[self.tx]}{options}",
                "--",
                "--tx",
                device,
                "--count-iface",
                ",".join(self.host_side[port] for port in self.counted),
            ]
        args = []
        for port in self.forwarder_side:
            args += ["--vdev", f"net_memif_gen{port},role=client,id={port},socket={self.socket}{self._memif_options}"]
        return args + ["--", "--tx", f"net_memif_gen{self.tx}", "--rx", ",".join(f"net_memif_gen{port}" for port in self.counted)]

    def port_of(self, received: str) -> int:
        """The port number whose frames the generator counted under this name."""
        if self.on_veth:
            return {dev: port for port, dev in self.host_side.items()}[received]
        return int(received.removeprefix("net_memif_gen"))

    def forwarder_vdev(self, port: int, name: str, whole_jumbo_frames: bool = True) -> str:
        """The vdev of a forwarder's port. Without whole_jumbo_frames a jumbo port next to AF_XDP ones keeps
        af_packet's default ring, whose frames fit the page-sized buffers of a forwarder with one pool (testpmd)."""
        if self.kind == "veth":
            return f"{name},iface={self.forwarder_side[port]},{AF_PACKET_RING}"
        if self.kind == "xdp" and port in self.jumbo_ports:
            return f"{name},iface={self.forwarder_side[port]}" + (f",{AF_PACKET_RING}" if whole_jumbo_frames else "")
        if self.kind == "xdp":
            return f"{name},iface={self.forwarder_side[port]}"
        return f"{name},role=server,id={port},socket={self.socket}{self._memif_options}"


class Testpmd:
    """dpdk-testpmd forwarding between two of the bench ports (io mode)."""

    def __init__(self, ports: Ports, numbers: tuple[int, int], log: Path):
        self.ports, self.numbers, self.log = ports, numbers, log
        self.prefix = f"jgbpass{os.getpid()}"
        self.popen: subprocess.Popen | None = None

    def start(self, timeout: float = 30.0) -> Testpmd:
        testpmd = shutil.which("dpdk-testpmd")
        if testpmd is None:
            raise BenchError("dpdk-testpmd is not on PATH (Debian package dpdk; make setup installs it)")
        # Line-buffered: testpmd says it forwards on stdout, which is a file here.
        args = ["stdbuf", "-oL", testpmd, "--no-huge", "-m", "512", "--no-pci", "--file-prefix", self.prefix, "-l", "0-1", "--log-level=lib.eal:error"]
        for i, number in enumerate(self.numbers):
            args += ["--vdev", self.ports.forwarder_vdev(number, f"{self.ports.driver_of(number)}_pass{i}", whole_jumbo_frames=False)]
        args += ["--", "--forward-mode=io", "--auto-start", f"--mbuf-size={self.ports.forwarder_mbuf_size}", "--total-num-mbufs=8192", "--burst=32"]
        out = open(self.log, "wb")  # noqa: SIM115 (kept open for the process)
        self.popen = subprocess.Popen(args, stdin=subprocess.PIPE, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + timeout
        while "Press enter to exit" not in self.log.read_text(errors="replace"):
            if self.popen.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise BenchError(f"dpdk-testpmd did not start forwarding; see {self.log}")
            time.sleep(0.1)
        return self

    def stop(self) -> None:
        if self.popen and self.popen.poll() is None:
            with contextlib.suppress(BrokenPipeError):
                self.popen.communicate(b"\n", timeout=10)
        shutil.rmtree(f"/var/run/dpdk/{self.prefix}", ignore_errors=True)


def run_loadgen(ports: Ports, capture: Path, seconds: float, log: Path, extra: tuple[str, ...] = (), on_line: Callable[[str], None] | None = None) -> dict:
    """One run of the generator; its JSON line (the counts of the measured window).

    `on_line` sees each line the generator writes on stderr as it comes,
    among them WINDOW_START and WINDOW_END at the edges of the measured
    window (to read a forwarder's counters there).
    """
    prefix = f"jgbgen{os.getpid()}"
    args = [LOADGEN, "--no-huge", "-m", "512", "--no-pci", "--file-prefix", prefix, "-l", "0", "--log-level=lib.eal:error"]
    args += ports.generator_args() + ["--pcap", str(capture), "--seconds", str(seconds), *extra]
    if ports.kind == "memif":
        # The generator's client ports connect to the forwarder's servers
        # as it starts; the warm-up covers the links coming up.
        args += ["--warmup", "1.5"]
    for attempt in range(1, lab.DPDK_START_ATTEMPTS + 1):
        try:
            returncode, stdout, stderr = _run([str(a) for a in args], seconds + 60, on_line)
        finally:
            shutil.rmtree(f"/var/run/dpdk/{prefix}", ignore_errors=True)
        log.write_text(stdout + stderr)
        # af_packet's fanout group is named after pid ^ ifindex: the
        # generator's can clash with the forwarder's, and then it opens no
        # port and sends nothing. A new process draws a new pid.
        if returncode == 0 or lab.AF_PACKET_FANOUT_CLASH not in stderr or attempt == lab.DPDK_START_ATTEMPTS:
            break
    if returncode != 0:
        raise BenchError(f"jumbogate-loadgen failed ({returncode}): {stderr.strip()[-400:]}")
    return json.loads(stdout.strip().splitlines()[-1])


# What jumbogate-loadgen says on stderr as its measured window opens and closes.
WINDOW_START = "jumbogate-loadgen: measuring"
WINDOW_END = "jumbogate-loadgen: measured"


def _run(args: list[str], timeout: float, on_line: Callable[[str], None] | None) -> tuple[int, str, str]:
    """Run a program, handing each stderr line to on_line as it comes (what on_line raises fails the run)."""
    out: list[str] = []
    err: list[str] = []
    failed: list[Exception] = []
    with subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, bufsize=1) as process:

        def read_out() -> None:
            out.append(process.stdout.read())

        def read_err() -> None:
            for line in process.stderr:
                err.append(line)
                if on_line is not None and not failed:
                    try:
                        on_line(line)
                    except Exception as error:  # noqa: BLE001 (raised again below)
                        failed.append(error)

        readers = [threading.Thread(target=read_out, daemon=True), threading.Thread(target=read_err, daemon=True)]
        for reader in readers:
            reader.start()
        try:
            process.wait(timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            raise BenchError(f"{Path(args[0]).name} did not finish within {timeout:.0f} s") from None
        for reader in readers:
            reader.join()
    if failed:
        raise BenchError(f"while {Path(args[0]).name} ran: {failed[0]!r}") from failed[0]
    return process.returncode, "".join(out), "".join(err)


def print_logs(workdir: Path) -> None:
    """The tail of every log of a failed run, on stderr."""
    for log in sorted(workdir.glob("*.log")):
        print(f"--- {log.name}\n{log.read_text(errors='replace')[-1500:]}", file=sys.stderr)
