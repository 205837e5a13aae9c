"""A WAN for the lab: jumbogate-wanlink on veths, and a rack behind a border across it.

The lab's kernels have no netem, so jumbogate-wanlink (testlab/wanlink/)
delays, loses and paces what crosses it. WanPath builds, in network
namespaces,

    instance ns --veth-- [jumbogate-nic] --veth-- [jumbogate-wanlink] --veth-- Internet host ns
    (rack MTU)            border ns                  border ns                   (MTU 1500)

with jumbogate-nic merging toward the instance and splitting toward the
Internet when the rack is a jumbo rack (`border=True`), or passing every
packet untouched for a plain 1500-byte rack. Flows use cubic (CONGESTION), with
checksum, segmentation and receive offloads off as everywhere in the lab.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from .lab import AF_PACKET_FANOUT_CLASH, BUILD, DPDK_START_ATTEMPTS, telemetry_query
from .nic_harness import FRAME_SIZE, Netns, NicProcess, remove_runtime_dir, start_nic, unique, veth

WANLINK = BUILD / "native" / "testlab" / "wanlink" / "jumbogate-wanlink"
# The WAN carries 1500-byte packets: small ring frames keep the link's
# buffer pools small although it may hold thousands of packets.
WAN_FRAME_SIZE = 2048
INSTANCE = "10.89.0.1"
INTERNET = "10.89.0.2"
WAN_MTU = 1500
JUMBO_MTU = 8500


def floating_lcores(count: int) -> str:
    """EAL --lcores with every lcore free to run on any CPU: a thread pinned to
    one CPU of a busy machine waits for that CPU while another idles, which
    adds delays of hundreds of milliseconds (spurious retransmission
    timeouts) that no WAN has."""
    cpus = f"(0-{max(0, (os.cpu_count() or 1) - 1)})"
    return ",".join(f"{lcore}@{cpus}" for lcore in range(count))


def wan_vdev(index: int, iface: str, frame_size: int = WAN_FRAME_SIZE) -> str:
    # 4096 frames a ring: a program the busy machine does not run for a
    # few milliseconds must not lose what arrived meanwhile (af_packet
    # drops what its full ring cannot take, which a WAN's loss would not
    # explain). A block of one page holds two 2048-byte frames.
    block = max(4096, frame_size)
    return f"--vdev=net_af_packet{index},iface={iface},blocksz={block},framesz={frame_size},framecnt=4096,qpairs=1"


@dataclass
class WanLink:
    """A running jumbogate-wanlink."""

    proc: subprocess.Popen
    file_prefix: str
    log_path: Path
    ready_line: str = ""
    exit_totals: dict = field(default_factory=dict)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def counters(self) -> dict:
        """Both directions' counters (a_to_b, b_to_a) and the configuration, from its telemetry."""
        return telemetry_query(self.file_prefix, "/jumbogate/wanlink")

    def buffers(self) -> dict:
        return telemetry_query(self.file_prefix, "/jumbogate/buffers")

    def stop(self, timeout: float = 15) -> dict:
        """Stop it and return the counters it printed at exit."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=5)
        for line in self.log().splitlines():
            if line.startswith('{"event": "exit"'):
                self.exit_totals = json.loads(line)
        remove_runtime_dir(self.file_prefix)
        return self.exit_totals


def start_wanlink(
    netns: Netns,
    iface_a: str,
    iface_b: str,
    log_dir: Path,
    *,
    delay_us: float = 0,
    loss: float = 0,
    seed: int = 1,
    rate_mbit: float = 0,
    limit: int = 10000,
    frame_size: int = WAN_FRAME_SIZE,
    options: tuple[str, ...] = (),
    timeout: float = 30,
) -> WanLink:
    """jumbogate-wanlink between two interfaces of `netns`; returns once it forwards."""
    if not WANLINK.exists():
        raise FileNotFoundError(f"{WANLINK} is missing; run 'make native'")
    prefix = unique("jgwl")
    log_path = log_dir / f"{prefix}.log"
    mtu = frame_size - 64 if frame_size < 9600 else 9000
    command = [
        "ip", "netns", "exec", netns.name, str(WANLINK),
        "--no-huge", "-m", "256", "--no-pci", "--file-prefix", prefix, "--lcores", floating_lcores(1),
        "--log-level=lib.eal:error",
        wan_vdev(0, iface_a, frame_size), wan_vdev(1, iface_b, frame_size),
        "--",
        "--port-a", "net_af_packet0", "--port-b", "net_af_packet1",
        "--delay-us", str(delay_us), "--loss", repr(loss), "--seed", str(seed),
        "--rate-mbit", str(rate_mbit), "--limit", str(limit), "--port-mtu", str(mtu),
        *options,
    ]  # fmt: skip
    log_dir.mkdir(parents=True, exist_ok=True)
    for attempt in range(1, DPDK_START_ATTEMPTS + 1):
        with open(log_path, "w") as log:
            proc = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
        link = WanLink(proc=proc, file_prefix=prefix, log_path=log_path)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            match = re.search(r"^jumbogate-wanlink ready: .*$", link.log(), re.M)
            if match:
                link.ready_line = match.group(0)
                return link
            if proc.poll() is not None:
                break
            time.sleep(0.05)
        link.stop()
        # A new process draws a new af_packet fanout id (lab.py).
        if attempt == DPDK_START_ATTEMPTS or AF_PACKET_FANOUT_CLASH not in link.log():
            break
    raise RuntimeError(f"jumbogate-wanlink did not start (exit {proc.returncode}):\n{link.log()}")


# Every flow's congestion control, set on its sockets (iperf3 -C, the
# transfers' TCP_CONGESTION): a namespace's default can only be one of the
# host's tcp_allowed_congestion_control, which need not list cubic, while
# root may give a socket any available one.
CONGESTION = "cubic"


def check_congestion_control() -> None:
    available = Path("/proc/sys/net/ipv4/tcp_available_congestion_control").read_text().split()
    if CONGESTION not in available:
        raise RuntimeError(f"{CONGESTION} is not among the kernel's congestion controls ({' '.join(available)}): modprobe tcp_{CONGESTION}")


@dataclass
class WanPath:
    """A rack's instance and an Internet host with a border and a WAN between them (the module's picture)."""

    log_dir: Path
    border: bool  # True: a jumbo rack whose border merges and splits; False: a plain 1500-byte rack
    delay_us: float = 5000  # one way
    loss: float = 0.0001
    seed: int = 1
    rate_mbit: float = 0
    instance_mtu: int = 0  # 0: JUMBO_MTU with the border, WAN_MTU without
    instance: Netns | None = None
    middle: Netns | None = None
    internet: Netns | None = None
    nic: NicProcess | None = None
    link: WanLink | None = None
    names: dict = field(default_factory=dict)

    def __enter__(self) -> WanPath:
        try:
            self.start()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def start(self) -> None:
        check_congestion_control()
        mtu = self.instance_mtu or (JUMBO_MTU if self.border else WAN_MTU)
        self.instance, self.middle, self.internet = Netns("jgwi"), Netns("jgwb"), Netns("jgwh")
        n = self.names = {key: unique(key) for key in ("jgwi", "jgna", "jgnb", "jgla", "jglb", "jgwh")}
        veth(self.instance, n["jgwi"], self.middle, n["jgna"], mtu_a=mtu)
        veth(self.middle, n["jgnb"], self.middle, n["jgla"])
        veth(self.middle, n["jglb"], self.internet, n["jgwh"], mtu_b=WAN_MTU)
        self.instance.exec("ip", "addr", "add", f"{INSTANCE}/24", "dev", n["jgwi"])
        self.internet.exec("ip", "addr", "add", f"{INTERNET}/24", "dev", n["jgwh"])
        # Without --internal-prefix jumbogate-nic passes every packet as
        # it came: the plain rack keeps the same hops and copies.
        rack = ["--internal-prefix", f"{INSTANCE}/32"] if self.border else []
        self.nic = start_nic(
            [wan_vdev(0, n["jgna"], FRAME_SIZE), wan_vdev(1, n["jgnb"], FRAME_SIZE), "--lcores", floating_lcores(2)],
            [
                "--mbuf-size", "12288", "--mbufs", "4096",
                "--return-port", "net_af_packet0=net_af_packet1",
                "--return-port", "net_af_packet1=net_af_packet0",
                "--internal-mtu", str(JUMBO_MTU), "--default-path-mtu-v4", str(WAN_MTU),
                *rack,
            ],
            self.middle,
            self.log_dir,
            memory_mb=512,
        )  # fmt: skip
        self.link = start_wanlink(
            self.middle, n["jgla"], n["jglb"], self.log_dir,
            delay_us=self.delay_us, loss=self.loss, seed=self.seed, rate_mbit=self.rate_mbit,
        )  # fmt: skip

    @property
    def wan_iface(self) -> str:
        """The border-side end of the WAN: what jumbogate-nic sends toward the Internet passes it."""
        return self.names["jgla"]

    def rtt_ms(self, count: int = 5) -> float:
        """The smallest ping round trip from the instance to the Internet host, in ms."""
        out = self.instance.exec("ping", "-c", str(count), "-i", "0.2", "-W", "2", INTERNET, check=False, timeout=30).stdout
        match = re.search(r"= ([\d.]+)/", out)
        if not match:
            raise RuntimeError(f"no ping reply across the WAN:\n{out}")
        return float(match.group(1))

    def close(self) -> None:
        if self.link:
            self.link.stop()
        if self.nic:
            self.nic.stop()
        for ns in (self.instance, self.middle, self.internet):
            if ns:
                ns.delete()
