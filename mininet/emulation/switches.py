"""The border as a Mininet switch: jumbogate-switch or BMv2 simple_switch_grpc.

Either starts without a program: the controller pushes the compiled pipeline
over P4Runtime, exactly as it would to a hardware switch. start() returns
only once the gRPC server answers, so whoever comes next (the controller)
never races the switch.
"""

from __future__ import annotations

import os
import shutil
import subprocess

from mininet.node import Switch

from testlab import lab

from . import procs

GRPC_START_TIMEOUT_S = 30.0
SOFT_SWITCH = lab.SOFT_SWITCH
# The targets `SWITCH=` takes, and what each needs.
TARGETS = {
    "soft": f"jumbogate-switch ({SOFT_SWITCH}, made by 'make setup')",
    "bmv2": "BMv2 simple_switch_grpc on PATH (README, 'Getting p4c and BMv2')",
}


DEFAULT_TARGET = "soft"
"""jumbogate-switch on every machine, BMv2 or not: what runs by default must
not change with what happens to be installed, and BMv2 is asked for by name."""


def resolve_target(value: str | None = None) -> str:
    """The target asked for (argument, else $SWITCH), else the default; a clear error for anything else."""
    target = value or os.environ.get("SWITCH") or DEFAULT_TARGET
    if target not in TARGETS:
        raise procs.StartError(f"SWITCH={target} is not a switch target: use SWITCH=soft (jumbogate-switch) or SWITCH=bmv2 (BMv2)")
    return target


def missing_switch(target: str) -> str | None:
    """Why the target cannot start here, as a sentence with the fix, or None."""
    if target == "bmv2" and shutil.which("simple_switch_grpc") is None:
        return "SWITCH=bmv2 needs simple_switch_grpc on PATH (see README, 'Getting p4c and BMv2'); SWITCH=soft needs nothing more"
    if target == "soft" and not SOFT_SWITCH.exists():
        return f"SWITCH=soft needs {SOFT_SWITCH} (run 'make setup')"
    return None


def mininet_ports(switch: Switch) -> list[tuple[int, str]]:
    """(P4 port, interface) of a switch; port 0 is the root namespace's lo, which Mininet lists for every switch."""
    return [(port, intf.name) for port, intf in sorted(switch.intfs.items()) if port > 0]


class Bmv2Switch(Switch):
    """simple_switch_grpc with one `-i N@intf` per Mininet port and an explicit CPU port."""

    def __init__(self, name: str, *, grpc_address: str, thrift_port: int, device_id: int, cpu_port: int, tls=None, **params):
        super().__init__(name, **params)
        self.grpc_address = grpc_address
        self.tls = tls  # emulation.tls.RackTls: P4Runtime over mutual TLS
        self.thrift_port = thrift_port
        self.device_id = device_id
        self.cpu_port = cpu_port
        self.process: subprocess.Popen | None = None

    def command(self) -> list[str]:
        binary = shutil.which("simple_switch_grpc")
        if binary is None:
            raise procs.StartError("simple_switch_grpc is not on PATH; see README, 'Getting p4c and BMv2'")
        argv = [binary, "--no-p4", "--device-id", str(self.device_id), "--thrift-port", str(self.thrift_port)]
        # BMv2's log level defaults to trace, and with no log sink it still
        # formats every message of every packet: that alone costs about a
        # millisecond of CPU per packet and caps TCP at a few Mbit/s.
        argv += ["--log-level", "off"]
        for port, intf in mininet_ports(self):
            argv += ["-i", f"{port}@{intf}"]
        argv += ["--", "--grpc-server-addr", self.grpc_address, "--cpu-port", str(self.cpu_port)]
        if self.tls:
            argv += self.tls.server("switch").bmv2_args()
        return argv

    def start(self, _controllers) -> None:
        # Marker for teardown sweeps: no other BMv2 on the machine uses our interfaces.
        marker = f"@{self.name}-eth"
        self.process = procs.start_grpc_service(
            "bmv2", "BMv2", self.command(), marker, self.grpc_address, timeout=GRPC_START_TIMEOUT_S, credentials=self.tls.credentials() if self.tls else None
        )

    def stop(self, deleteIntfs: bool = True) -> None:  # noqa: N803 - Mininet's signature
        procs.stop_process(self.process)
        self.process = None
        super().stop(deleteIntfs)


class SoftSwitch(Switch):
    """jumbogate-switch with one `--port N@intf` per Mininet port, in the root namespace.

    One worker lcore polls every port; it sleeps when idle, so it shares a
    core with the SmartNIC program on a small machine.
    """

    def __init__(
        self,
        name: str,
        *,
        grpc_address: str,
        device_id: int,
        cpu_port: int,
        file_prefix: str,
        tls=None,
        role: str = "switch",
        pcap_ports: tuple[int, ...] = (),
        fence_election_ids: bool = False,
        **params,
    ):
        super().__init__(name, **params)
        self.grpc_address = grpc_address
        self.tls = tls  # emulation.tls.RackTls: P4Runtime over mutual TLS
        self.device_id = device_id
        self.cpu_port = cpu_port
        self.file_prefix = file_prefix
        # Names its log (logs/<role>.log): several switches need several.
        self.role = role
        # Ports read with libpcap (net_pcap) instead of af_packet, whose
        # packet fanout reassembles IPv4 fragments before the switch sees
        # them (the two-rack emulation needs to see how the WAN cut a probe).
        self.pcap_ports = pcap_ports
        # A fleet's switches refuse an election id below the highest they
        # made primary (--fence-election-ids): a deposed leader that wakes up
        # is never primary again, even after its successor's stream is gone.
        self.fence_election_ids = fence_election_ids
        self.process: subprocess.Popen | None = None

    def command(self) -> list[str]:
        if not SOFT_SWITCH.exists():
            raise procs.StartError(missing_switch("soft"))
        ports = mininet_ports(self)
        pcap = [f"--vdev=net_pcap{port},rx_iface_in={intf},tx_iface={intf}" for port, intf in ports if port in self.pcap_ports]
        argv = [
            str(SOFT_SWITCH),
            "--no-huge",
            "--no-pci",
            "-m",
            "1024",
            f"--file-prefix={self.file_prefix}",
            "-l",
            "0-1",
            "--log-level=lib.eal:error",
            *pcap,
            "--",
        ]
        for port, intf in ports:
            argv += ["--port", f"{port}=net_pcap{port}" if port in self.pcap_ports else f"{port}@{intf}"]
        argv += ["--grpc", self.grpc_address, "--device-id", str(self.device_id), "--cpu-port", str(self.cpu_port), "--depth", "512"]
        if self.fence_election_ids:
            argv.append("--fence-election-ids")
        if self.tls:
            argv += self.tls.server("switch").soft_args()
        return argv

    def start(self, _controllers) -> None:
        marker = f"--file-prefix={self.file_prefix}"
        self.process = procs.start_grpc_service(
            self.role,
            "jumbogate-switch",
            self.command(),
            marker,
            self.grpc_address,
            timeout=GRPC_START_TIMEOUT_S,
            credentials=self.tls.credentials() if self.tls else None,
        )

    def stop(self, deleteIntfs: bool = True) -> None:  # noqa: N803 - Mininet's signature
        procs.stop_process(self.process)
        self.process = None
        shutil.rmtree(f"/var/run/dpdk/{self.file_prefix}", ignore_errors=True)
        super().stop(deleteIntfs)


class QuietBridge(Switch):
    """A plain Linux bridge (ip link), without multicast snooping.

    Snooping would keep IPv6 neighbour solicitations from hosts that have not
    joined the solicited-node group yet; a LAN of four hosts needs none of it.
    """

    def start(self, _controllers) -> None:
        self.cmd(f"ip link del {self.name} 2>/dev/null; ip link add {self.name} type bridge stp_state 0 mcast_snooping 0")
        self.cmd(f"sysctl -qw net.ipv6.conf.{self.name}.disable_ipv6=1")
        for intf in self.intfList():
            if intf.name.startswith(f"{self.name}-eth"):
                self.cmd(f"ip link set {intf.name} master {self.name}")
        self.cmd(f"ip link set {self.name} up")

    def stop(self, deleteIntfs: bool = True) -> None:  # noqa: N803 - Mininet's signature
        self.cmd(f"ip link del {self.name} 2>/dev/null")
        super().stop(deleteIntfs)
