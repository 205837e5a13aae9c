"""Building blocks for running jumbogate's real parts on one machine.

Veth pairs, network namespaces, a BMv2 switch and helper processes, each as
a context manager that cleans up after itself even when a test fails. Used by
the integration tests and the emulated rack; needs root.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
BUILD = REPO / "build"
# The compiled P4 program, committed (`make p4` refreshes it).
PIPELINE_512 = REPO / "p4src" / "compiled" / "depth512"


class LabError(RuntimeError):
    pass


def sh(*args: str, check: bool = True, netns: str | None = None, capture: bool = True) -> str:
    """Run a command (inside `netns` if given); raise LabError with its output on failure."""
    cmd = (["ip", "netns", "exec", netns] if netns else []) + list(args)
    proc = subprocess.run(cmd, capture_output=capture, text=True)
    if check and proc.returncode != 0:
        raise LabError(f"{' '.join(cmd)} failed ({proc.returncode}): {(proc.stderr or proc.stdout or '').strip()}")
    return proc.stdout if capture else ""


def free_tcp_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_until(predicate, what: str, timeout: float, interval: float = 0.1):
    """Poll until predicate() is truthy and return its value; AssertionError naming `what` past `timeout`
    (tests poll instead of sleeping a fixed time: the machine may be loaded)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")


def wait_for_tcp(address: str, timeout: float, *, process: subprocess.Popen | None = None) -> None:
    """Poll until something accepts TCP connections on host:port (no fixed sleeps)."""
    host, _, port = address.rpartition(":")
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process is not None and process.poll() is not None:
            raise LabError(f"process {process.args[0]} exited with {process.returncode} before {address} answered")
        with contextlib.suppress(OSError), socket.create_connection((host, int(port)), timeout=0.2):
            return
        time.sleep(0.05)
    raise LabError(f"nothing answered on {address} within {timeout:.0f}s")


# DPDK's net_af_packet names its fanout group after (pid ^ ifindex): two DPDK
# programs on one machine can draw the same id, and the second then fails
# to open its port with this message. A new process draws a new pid.
AF_PACKET_FANOUT_CLASH = "could not set PACKET_FANOUT"
DPDK_START_ATTEMPTS = 3


def start_dpdk_service(args: Sequence, log: Path, address: str, *, timeout: float = 30.0) -> Process:
    """Start a DPDK program that serves on address; start it again (bounded) if its af_packet fanout id clashed."""
    for attempt in range(1, DPDK_START_ATTEMPTS + 1):
        process = Process(args, log).start()
        try:
            wait_for_tcp(address, timeout, process=process.popen)
            return process
        except LabError:
            process.stop()
            if attempt == DPDK_START_ATTEMPTS or AF_PACKET_FANOUT_CLASH not in process.output():
                raise
    raise AssertionError("unreachable")


def quiet_interface(dev: str, mtu: int, netns: str | None = None) -> None:
    """Set the MTU, turn offloads off and IPv6 autoconfiguration chatter off, bring it up.

    Offloads must be off on every interface a software switch forwards TCP
    through: with TSO/GSO/checksum offload the kernel hands out packets with
    partial checksums or oversized segments that BMv2 then forwards as-is.
    """
    sh("sysctl", "-qw", f"net.ipv6.conf.{dev}.disable_ipv6=1", netns=netns, check=False)
    sh("ip", "link", "set", dev, "mtu", str(mtu), netns=netns)
    sh("ethtool", "-K", dev, "tx", "off", "rx", "off", "tso", "off", "gso", "off", "gro", "off", netns=netns, check=False)
    sh("ip", "link", "set", dev, "up", netns=netns)


@dataclass
class VethPair:
    a: str
    b: str
    mtu: int = 9500

    def create(self) -> VethPair:
        sh("ip", "link", "add", self.a, "type", "veth", "peer", "name", self.b)
        for dev in (self.a, self.b):
            quiet_interface(dev, self.mtu)
        return self

    def delete(self) -> None:
        sh("ip", "link", "del", self.a, check=False)

    def mac(self, side: str) -> str:
        return Path(f"/sys/class/net/{side}/address").read_text().strip()


@contextlib.contextmanager
def veth_pairs(prefix: str, count: int, mtu: int = 9500) -> Iterator[list[VethPair]]:
    """`count` pairs named {prefix}s{i} (switch side) and {prefix}h{i} (host side), removed on exit."""
    pairs: list[VethPair] = []
    try:
        for i in range(count):
            pairs.append(VethPair(f"{prefix}s{i}", f"{prefix}h{i}", mtu).create())
        yield pairs
    finally:
        for pair in pairs:
            pair.delete()


@contextlib.contextmanager
def netns(name: str) -> Iterator[str]:
    sh("ip", "netns", "add", name)
    try:
        sh("ip", "link", "set", "lo", "up", netns=name)
        yield name
    finally:
        sh("ip", "netns", "pids", name, check=False)
        for pid in sh("ip", "netns", "pids", name, check=False).split():
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(pid), signal.SIGKILL)
        sh("ip", "netns", "del", name, check=False)


@dataclass
class Process:
    """A helper process with its log in a file; stopped with SIGTERM, then SIGKILL."""

    args: Sequence[str]
    log: Path
    netns: str | None = None
    popen: subprocess.Popen | None = field(default=None, repr=False)

    def start(self) -> Process:
        cmd = (["ip", "netns", "exec", self.netns] if self.netns else []) + [str(a) for a in self.args]
        self.log.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log, "ab") as out:
            self.popen = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        return self

    @property
    def running(self) -> bool:
        return self.popen is not None and self.popen.poll() is None

    def stop(self, timeout: float = 10.0, sig: int = signal.SIGTERM) -> int | None:
        if self.popen is None:
            return None
        if self.popen.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.popen.pid, sig)
            try:
                self.popen.wait(timeout)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.popen.pid, signal.SIGKILL)
                self.popen.wait(5)
        return self.popen.returncode

    def output(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""


@dataclass(frozen=True)
class ServerTls:
    """A server's mutual TLS: its certificate and key, the CA its clients' certificates chain to, and who may call.

    `allow`: the DNS names a client certificate must carry one of
    (jumbogate-switch's and jumbogate-nic's --tls-allow). BMv2 has no such
    check: any certificate from the CA may call it.
    """

    cert: Path
    key: Path
    client_ca: Path
    allow: tuple[str, ...] = ("controller",)

    def soft_args(self) -> list[str]:
        args = ["--tls-cert", str(self.cert), "--tls-key", str(self.key), "--tls-client-ca", str(self.client_ca)]
        for name in self.allow:
            args += ["--tls-allow", name]
        return args

    def bmv2_args(self) -> list[str]:
        return [
            "--grpc-server-ssl",
            "--grpc-server-cert", str(self.cert),
            "--grpc-server-key", str(self.key),
            "--grpc-server-cacert", str(self.client_ca),
            "--grpc-server-with-client-auth",
        ]  # fmt: skip


def telemetry_query(file_prefix: str, command: str, timeout: float = 5) -> dict:
    """Ask a DPDK program's telemetry socket (the v2 protocol of dpdk-telemetry.py)."""
    path = f"/var/run/dpdk/{file_prefix}/dpdk_telemetry.v2"
    with socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET) as sock:
        sock.settimeout(timeout)
        sock.connect(path)
        json.loads(sock.recv(16384).decode())  # the greeting
        sock.send(command.encode())
        reply = json.loads(sock.recv(65536).decode())
    # The reply is keyed by the command without its parameters.
    return reply[command.split(",")[0]]


@dataclass
class Bmv2:
    """simple_switch_grpc with no program loaded (the controller pushes it), on the given ports."""

    ports: dict[int, str]
    log: Path
    grpc_address: str = ""
    cpu_port: int = 255
    device_id: int = 1
    tls: ServerTls | None = None
    process: Process | None = None

    def start(self, timeout: float = 30.0) -> Bmv2:
        if not self.grpc_address:
            self.grpc_address = f"127.0.0.1:{free_tcp_port()}"
        # --log-level off: with no log sink BMv2 still formats every trace line of every packet.
        args = ["simple_switch_grpc", "--no-p4", "--device-id", str(self.device_id), "--log-level", "off"]
        for number, dev in sorted(self.ports.items()):
            args += ["-i", f"{number}@{dev}"]
        # --cpu-port must be given explicitly or packet-in/out is disabled.
        args += ["--", "--grpc-server-addr", self.grpc_address, "--cpu-port", str(self.cpu_port)]
        if self.tls:
            args += self.tls.bmv2_args()
        self.process = Process(args, self.log).start()
        wait_for_tcp(self.grpc_address, timeout, process=self.process.popen)
        return self

    def stop(self) -> None:
        if self.process is not None:
            self.process.stop()


# The programs as make setup builds them, named here and nowhere else (the
# suites' shell runners ask this module); JUMBOGATE_SWITCH and JUMBOGATE_NIC
# point every suite at another build (the sanitized one, say).
SOFT_SWITCH = Path(os.environ.get("JUMBOGATE_SWITCH", BUILD / "native" / "switch" / "jumbogate-switch"))
NIC = Path(os.environ.get("JUMBOGATE_NIC", BUILD / "native" / "smartnic" / "app" / "jumbogate-nic"))
# The port benchmarks' load generator (testlab/loadgen.c).
LOADGEN = BUILD / "native" / "testlab" / "jumbogate-loadgen"
SWITCH_TARGETS = ("soft", "bmv2")


@dataclass
class SoftSwitch:
    """jumbogate-switch on the given ports, serving P4Runtime like BMv2 does (the controller pushes the pipeline)."""

    ports: dict[int, str]
    log: Path
    grpc_address: str = ""
    cpu_port: int = 255
    device_id: int = 1
    depth: int = 512
    tls: ServerTls | None = None
    # DPDK devices instead of Linux interfaces: P4 port number -> device
    # name (`--port N=DEVICE`), each made by one of `vdevs` (EAL --vdev
    # arguments, e.g. net_memif shared-memory ports).
    devices: dict[int, str] = field(default_factory=dict)
    vdevs: tuple[str, ...] = ()
    # More of jumbogate-switch's options (--fence-election-ids, say).
    options: tuple[str, ...] = ()
    process: Process | None = None
    _starts: int = 0

    def start(self, timeout: float = 30.0) -> SoftSwitch:
        if not SOFT_SWITCH.exists():
            raise LabError(f"{SOFT_SWITCH} is not built; run 'make setup'")
        if not self.grpc_address:
            self.grpc_address = f"127.0.0.1:{free_tcp_port()}"
        self._starts += 1
        # A DPDK file prefix of its own per start, so that a restart never
        # meets the runtime files of the process it replaces.
        self.prefix = f"jgsw{os.getpid()}-{self._starts}"
        args = [SOFT_SWITCH, "--no-huge", "-m", "1024", "--no-pci", "--file-prefix", self.prefix, "-l", "0-1", "--log-level=lib.eal:error"]
        for vdev in self.vdevs:
            args += ["--vdev", vdev]
        args.append("--")
        for number, dev in sorted(self.ports.items()):
            args += ["--port", f"{number}@{dev}"]
        for number, device in sorted(self.devices.items()):
            args += ["--port", f"{number}={device}"]
        args += ["--grpc", self.grpc_address, "--cpu-port", str(self.cpu_port), "--device-id", str(self.device_id), "--depth", str(self.depth)]
        if self.tls:
            args += self.tls.soft_args()
        args += self.options
        self.process = start_dpdk_service(args, self.log, self.grpc_address, timeout=timeout)
        return self

    def stop(self) -> None:
        if self.process is not None:
            self.process.stop()
            shutil.rmtree(f"/var/run/dpdk/{self.prefix}", ignore_errors=True)


def make_switch(target: str, ports: dict[int, str], log: Path, tls: ServerTls | None = None) -> SoftSwitch | Bmv2:
    """A switch of the given target ('soft' or 'bmv2') on these ports, not started."""
    if target == "soft":
        return SoftSwitch(ports, log, tls=tls)
    if target == "bmv2":
        return Bmv2(ports, log, tls=tls)
    raise LabError(f"unknown switch target '{target}': use one of {', '.join(SWITCH_TARGETS)}")
