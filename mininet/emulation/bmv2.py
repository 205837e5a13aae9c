"""A Mininet switch that is a BMv2 simple_switch_grpc process.

The switch starts without a program (--no-p4): the controller pushes the
compiled pipeline over P4Runtime, exactly as it would to a hardware switch.
start() returns only once the gRPC server answers, so whoever comes next
(the controller) never races the switch.
"""

from __future__ import annotations

import shutil
import subprocess

from mininet.node import Switch

from . import procs

GRPC_START_TIMEOUT_S = 30.0


class Bmv2Switch(Switch):
    """simple_switch_grpc with one `-i N@intf` per Mininet port and an explicit CPU port."""

    def __init__(self, name: str, *, grpc_address: str, thrift_port: int, device_id: int, cpu_port: int, **params):
        super().__init__(name, **params)
        self.grpc_address = grpc_address
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
        for port, intf in sorted(self.intfs.items()):
            if port > 0:  # port 0 is the root namespace's lo, which Mininet lists for every switch
                argv += ["-i", f"{port}@{intf.name}"]
        argv += ["--", "--grpc-server-addr", self.grpc_address, "--cpu-port", str(self.cpu_port)]
        return argv

    def start(self, _controllers) -> None:
        # Marker for teardown sweeps: no other BMv2 on the machine uses our interfaces.
        marker = f"@{self.name}-eth"
        self.process = procs.start_grpc_service("bmv2", "BMv2", self.command(), marker, self.grpc_address, timeout=GRPC_START_TIMEOUT_S)

    def stop(self, deleteIntfs: bool = True) -> None:  # noqa: N803 - Mininet's signature
        procs.stop_process(self.process)
        self.process = None
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
