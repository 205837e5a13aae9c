"""Running the real jumbogate-nic on veth pairs in network namespaces.

Everything here creates what it uses under unique names and removes it
again: namespaces, veths, DPDK file prefixes, sockets. Traffic stays on
the veths; gRPC is on loopback or a unix socket.
"""

from __future__ import annotations

import ctypes
import json
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from .lab import NIC, telemetry_query, wait_until

REPO = Path(__file__).resolve().parents[1]
# JUMBOGATE_NIC points the tests at another build of the program.
NIC_BINARY = NIC
# Set by scripts/sanitized.sh: the program is an AddressSanitizer/UBSan
# build, and a report in its log fails the test that stops it.
SANITIZED = os.environ.get("JUMBOGATE_SANITIZED") == "1"
SANITIZER_REPORT = re.compile(r"ERROR: (AddressSanitizer|LeakSanitizer)|runtime error: |SUMMARY: UndefinedBehaviorSanitizer")
# net_af_packet copies each frame into one buffer, which must hold its
# whole ring frame; 12288 leaves room for 9000-byte frames and more.
FRAME_SIZE = 12288
EAL_MEMORY_MB = 512
CLONE_NEWNET = 0x40000000
ETH_P_ALL = 0x0003
PACKET_OUTGOING = 4

_libc = ctypes.CDLL(None, use_errno=True)


def run(*args: str, check: bool = True, timeout: float = 20) -> subprocess.CompletedProcess:
    return subprocess.run(args, check=check, timeout=timeout, capture_output=True, text=True)


def unique(prefix: str) -> str:
    """A short unique name (interface names have at most 15 characters)."""
    return f"{prefix}{secrets.token_hex(3)}"


@contextmanager
def in_netns(name: str):
    """Run the block in a network namespace (this thread only)."""
    original = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
    target = os.open(f"/run/netns/{name}", os.O_RDONLY)
    try:
        if _libc.setns(target, CLONE_NEWNET) != 0:
            raise OSError(ctypes.get_errno(), f"setns into {name} failed")
        try:
            yield
        finally:
            if _libc.setns(original, CLONE_NEWNET) != 0:
                raise OSError(ctypes.get_errno(), "setns back failed")
    finally:
        os.close(target)
        os.close(original)


class Netns:
    """A network namespace, deleted with everything in it on cleanup."""

    def __init__(self, prefix: str = "jgn"):
        self.name = unique(prefix)
        run("ip", "netns", "add", self.name)
        self.exec("ip", "link", "set", "lo", "up")

    def exec(self, *args: str, check: bool = True, timeout: float = 20) -> subprocess.CompletedProcess:
        return run("ip", "netns", "exec", self.name, *args, check=check, timeout=timeout)

    def popen(self, *args: str, **kwargs) -> subprocess.Popen:
        return subprocess.Popen(["ip", "netns", "exec", self.name, *args], **kwargs)

    def mac(self, iface: str) -> str:
        return json.loads(self.exec("ip", "-j", "link", "show", iface).stdout)[0]["address"]

    def delete(self) -> None:
        run("ip", "netns", "delete", self.name, check=False)


def veth(ns_a: Netns, name_a: str, ns_b: Netns, name_b: str, mtu_a: int = 9500, mtu_b: int = 9500) -> None:
    """A veth pair with offloads off (so frames are what they look like) and no IPv6 chatter."""
    run("ip", "link", "add", name_a, "netns", ns_a.name, "type", "veth", "peer", "name", name_b, "netns", ns_b.name)
    for ns, name, mtu in ((ns_a, name_a, mtu_a), (ns_b, name_b, mtu_b)):
        ns.exec("sysctl", "-q", "-w", f"net.ipv6.conf.{name}.disable_ipv6=1")
        ns.exec("ip", "link", "set", name, "mtu", str(mtu), "up")
        ns.exec("ethtool", "-K", name, "rx", "off", "tx", "off", "tso", "off", "gso", "off", "gro", "off", check=False)


def af_packet_vdev(index: int, iface: str, queues: int = 1) -> str:
    return f"--vdev=net_af_packet{index},iface={iface},blocksz={FRAME_SIZE},framesz={FRAME_SIZE},framecnt=1024,qpairs={queues}"


def free_tcp_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class NicProcess:
    """A running jumbogate-nic and how to reach it."""

    proc: subprocess.Popen
    file_prefix: str
    grpc_address: str
    log_path: Path
    ready_line: str = ""
    exit_totals: dict = field(default_factory=dict)

    @property
    def pid(self) -> int:
        return self.proc.pid

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def stub(self):
        import grpc

        from jumbogate.v1 import nic_pb2_grpc

        channel = grpc.insecure_channel(self.grpc_address)
        grpc.channel_ready_future(channel).result(timeout=10)
        return nic_pb2_grpc.NicStub(channel)

    def telemetry(self, command: str) -> dict:
        return telemetry_query(self.file_prefix, command)

    @contextmanager
    def paused(self):
        """Stop the program while packets queue in its receive ring, so
        that they arrive in one burst when it continues."""
        os.kill(self.pid, signal.SIGSTOP)
        try:
            yield
        finally:
            os.kill(self.pid, signal.SIGCONT)

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 15) -> int:
        if self.proc.poll() is None:
            os.kill(self.pid, sig)
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=5)
        log = self.log()
        for line in log.splitlines():
            if line.startswith('{"event": "exit"'):
                self.exit_totals = json.loads(line)
        remove_runtime_dir(self.file_prefix)
        if SANITIZED and SANITIZER_REPORT.search(log):
            raise AssertionError(f"sanitizer report in {self.log_path}:\n{log[-6000:]}")
        return self.proc.returncode


def wait_for(predicate, what: str, timeout: float = 10.0):
    """Poll until predicate() is truthy and return its value."""
    return wait_until(predicate, what, timeout)


def remove_runtime_dir(file_prefix: str) -> None:
    """DPDK leaves its runtime directory behind; the prefixes here are ours."""
    shutil.rmtree(f"/var/run/dpdk/{file_prefix}", ignore_errors=True)


def start_nic(
    eal: list[str],
    options: list[str],
    netns: Netns | None,
    log_dir: Path,
    grpc_address: str | None = None,
    wait_ready: bool = True,
    timeout: float = 30,
    memory_mb: int = EAL_MEMORY_MB,
) -> NicProcess:
    """Start jumbogate-nic; with wait_ready, return once it serves."""
    if not NIC_BINARY.exists():
        raise FileNotFoundError(f"{NIC_BINARY} is missing; run 'make setup' (or 'make smartnic')")
    prefix = unique("jgnic")
    if grpc_address is None:
        grpc_address = f"unix:{log_dir / (prefix + '.sock')}"
    log_path = log_dir / f"{prefix}.log"
    command = [
        str(NIC_BINARY),
        "--no-huge",
        "-m",
        str(memory_mb),
        "--no-pci",
        "--file-prefix",
        prefix,
        *eal,
        "--",
        "--grpc",
        grpc_address,
        *options,
    ]
    if netns is not None:
        command = ["ip", "netns", "exec", netns.name, *command]
    log = open(log_path, "w")
    # ip netns exec execs the program, so the pid is the program's.
    proc = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, cwd=log_dir)
    log.close()
    nic = NicProcess(proc=proc, file_prefix=prefix, grpc_address=grpc_address, log_path=log_path)
    if not wait_ready:
        return nic
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        text = nic.log()
        match = re.search(r"^jumbogate-nic ready: .*$", text, re.M)
        if match:
            nic.ready_line = match.group(0)
            return nic
        if proc.poll() is not None:
            raise RuntimeError(f"jumbogate-nic exited with {proc.returncode}:\n{text}")
        time.sleep(0.05)
    nic.stop(signal.SIGKILL)
    raise TimeoutError(f"jumbogate-nic not ready within {timeout}s:\n{nic.log()}")


# A port that receives nothing and takes everything: for the control API.
NULL_PORT = ["--vdev=net_null0,no-rx=1", "-l", "0-1"]


def start_null_nic(log_dir: Path, options: list[str]) -> NicProcess:
    """jumbogate-nic on NULL_PORT, its gRPC API on a free loopback port."""
    return start_nic(NULL_PORT, options, None, log_dir, grpc_address=f"127.0.0.1:{free_tcp_port()}")


class PacketPort:
    """A raw socket on an interface of a namespace: send frames, and
    collect the frames that arrive (not those sent from here)."""

    def __init__(self, netns: Netns, iface: str):
        with in_netns(netns.name):
            self.sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16 << 20)
            self.sock.bind((iface, 0))
        self.sock.setblocking(False)

    def send(self, frames: list[bytes]) -> None:
        for frame in frames:
            self.sock.send(frame)

    def drain(self) -> None:
        self.receive(quiet=0.05, timeout=0.5)

    def receive(self, count: int | None = None, quiet: float = 0.3, timeout: float = 5.0) -> list[bytes]:
        """Frames that arrived, until count of them did or none came for `quiet` seconds."""
        frames: list[bytes] = []
        deadline = time.monotonic() + timeout
        last = time.monotonic()
        while time.monotonic() < deadline:
            try:
                data, address = self.sock.recvfrom(65535)
            except BlockingIOError:
                if count is None and time.monotonic() - last > quiet:
                    break
                if count is not None and len(frames) >= count and time.monotonic() - last > quiet:
                    break
                time.sleep(0.002)
                continue
            if address[2] == PACKET_OUTGOING:
                continue
            frames.append(data)
            last = time.monotonic()
        return frames

    def close(self) -> None:
        self.sock.close()


def write_pcap(path: Path, frames: list[bytes]) -> None:
    from scapy.layers.l2 import Ether
    from scapy.utils import wrpcap

    wrpcap(str(path), [Ether(frame) for frame in frames])


def tshark_checksums(path: Path) -> list[tuple[str, str, str]]:
    """(IP length, IP checksum status, L4 checksum status) per frame, as
    tshark's own dissectors judge them."""
    result = run(
        "tshark",
        "-r",
        str(path),
        "-o",
        "ip.check_checksum:TRUE",
        "-o",
        "tcp.check_checksum:TRUE",
        "-o",
        "udp.check_checksum:TRUE",
        "-T",
        "fields",
        "-e",
        "ip.len",
        "-e",
        "ip.checksum.status",
        "-e",
        "tcp.checksum.status",
        "-e",
        "udp.checksum.status",
        timeout=60,
    )
    rows = []
    for line in result.stdout.splitlines():
        ip_len, ip_status, tcp_status, udp_status = (line.split("\t") + ["", "", "", ""])[:4]
        rows.append((ip_len, ip_status, tcp_status or udp_status))
    return rows


def lcores(workers: int) -> str:
    """The main lcore on CPU 0, workers on CPU 1 (and beyond, if present)."""
    cpus = max(1, (os.cpu_count() or 2) - 1)
    return ",".join(["0@0"] + [f"{w + 1}@{1 + w % cpus}" for w in range(workers)])


class SinglePort:
    """jumbogate-nic on one af_packet port facing a 'switch' namespace."""

    def __init__(self, log_dir: Path, options: list[str], workers: int = 1):
        self.nic_ns = Netns("jgn")
        self.switch_ns = Netns("jgs")
        self.nic_if = unique("jgn")
        self.switch_if = unique("jgs")
        self.nic = None
        self.port = None
        try:
            veth(self.nic_ns, self.nic_if, self.switch_ns, self.switch_if)
            self.nic = start_nic(
                # Worker lcores may share a CPU: --lcores maps them.
                [af_packet_vdev(0, self.nic_if, queues=workers), "--lcores", lcores(workers)],
                # Each worker's cache and bursts take 448 buffers of the
                # pool (af_packet's queues keep none); the rest is for
                # holding segments (see --mbufs).
                ["--mbuf-size", "12288", "--mbufs", str(4096 * workers), *options],
                self.nic_ns,
                log_dir,
            )
            self.port = PacketPort(self.switch_ns, self.switch_if)
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        if self.port:
            self.port.close()
        if self.nic:
            self.nic.stop()
        self.nic_ns.delete()
        self.switch_ns.delete()


class TapPort(SinglePort):
    """jumbogate-nic on a net_tap port in its own namespace, the tap's kernel
    side playing the switch. net_tap sums what it sends (TX checksum
    offload), unlike net_af_packet: the port for the offload path. It
    carries no frame above 1522 bytes (DPDK 22.11 reports that limit and
    ethdev then refuses a larger MTU)."""

    def __init__(self, log_dir: Path, options: list[str]):
        self.nic_ns = self.switch_ns = Netns("jgt")
        self.nic_if = self.switch_if = unique("jgt")
        self.nic = None
        self.port = None
        try:
            self.nic = start_nic(
                [f"--vdev=net_tap0,iface={self.nic_if}", "--lcores", lcores(1)],
                ["--mbuf-size", "12288", "--mbufs", "4096", *options],
                self.nic_ns,
                log_dir,
            )
            self.port = PacketPort(self.switch_ns, self.switch_if)
        except BaseException:
            self.close()
            raise
