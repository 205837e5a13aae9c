"""The emulated rack's address plan: every name, port, MAC, address and MTU.

One place for all of it, because four things must agree on it: the Mininet
topology, `mininet/rack.yaml` (checked against this plan by the tests), the
demo and the end-to-end test. Change a number here and in rack.yaml together.

    ext1  ext2            external hosts, 1500-byte LAN "extlan" (a Linux bridge)
      \\   /
      extlan
      /    \\
    up1    up2            upstream routers (Linux forwarding), 1500-byte uplinks
      |      |
    port1  port2          external ports
    [ border: jumbogate-switch or BMv2, CPU port 255 ]
    port3  port4  port5
      |      |      |
    jumbo1 legacy1  nic   instances (MTU 8500 / 1500); the SmartNIC namespace
                     |
                    ctl   management link from the root namespace (gRPC to the NIC)
"""

from __future__ import annotations

from dataclasses import dataclass, field

# Ports of the processes. Not the tools' defaults (9559, 9090, 50051, 50061),
# so that the emulation can run next to a PTF run or a developer's own
# controller on the same machine.
P4RUNTIME_ADDRESS = "127.0.0.1:59559"
THRIFT_PORT = 59090
CONTROLLER_ADDRESS = "127.0.0.1:50151"
# The emulation's own single-member etcd (the policy's store), beside the
# controller in the root namespace; not etcd's 2379/2380, which Debian's
# package serves.
ETCD_CLIENT_ADDRESS = "127.0.0.1:50179"
ETCD_PEER_ADDRESS = "127.0.0.1:50180"
NIC_CONTROL_PORT = 50161
DEVICE_ID = 1
CPU_PORT = 255

# MTUs (IP bytes). The switch's veth ends get headroom above the underlay:
# BMv2 hands frames to the kernel as they are, and a frame one byte above the
# receiving veth's MTU is dropped silently.
MTU_EXTERNAL = 1500
MTU_JUMBO_GUEST = 8500
MTU_UNDERLAY = 9000
MTU_SWITCH_SIDE = 9500

SWITCH = "border"
BRIDGE = "extlan"
NIC_HOST = "nic"
# A node in the root namespace: the controller reaches the SmartNIC's gRPC
# server in the nic namespace over this link.
MGMT_NODE = "ctl"


@dataclass(frozen=True)
class SwitchPort:
    number: int
    name: str  # as in rack.yaml switch.ports
    role: str
    mac: str  # MAC of the switch's own veth end
    peer: str  # the node on the other end
    peer_mac: str
    mtu: int  # MTU of the peer's interface

    @property
    def intf(self) -> str:
        return f"{SWITCH}-eth{self.number}"

    @property
    def peer_intf(self) -> str:
        return f"{self.peer}-eth0"


SWITCH_PORTS: tuple[SwitchPort, ...] = (
    SwitchPort(1, "uplink-up1", "external", "02:4a:47:00:01:01", "up1", "02:4a:47:00:a1:01", MTU_EXTERNAL),
    SwitchPort(2, "uplink-up2", "external", "02:4a:47:00:01:02", "up2", "02:4a:47:00:a2:01", MTU_EXTERNAL),
    SwitchPort(3, "jumbo1", "internal", "02:4a:47:00:01:03", "jumbo1", "02:4a:47:00:10:0a", MTU_JUMBO_GUEST),
    SwitchPort(4, "legacy1", "internal", "02:4a:47:00:01:04", "legacy1", "02:4a:47:00:10:14", MTU_EXTERNAL),
    SwitchPort(5, "smartnic", "nic", "02:4a:47:00:01:05", NIC_HOST, "02:4a:47:00:0e:01", MTU_SWITCH_SIDE),
)


def switch_port(name: str) -> SwitchPort:
    return next(p for p in SWITCH_PORTS if p.name == name or p.peer == name)


@dataclass(frozen=True)
class Address:
    v4: str  # with prefix length
    v6: str

    @property
    def ip4(self) -> str:
        return self.v4.split("/")[0]

    @property
    def ip6(self) -> str:
        return self.v6.split("/")[0]


@dataclass(frozen=True)
class Instance:
    host: str  # Mininet host name, also the instance id in rack.yaml
    address: Address
    jumbo: bool
    # The switch has no IP address: the instance's gateway is a fixed address
    # with a permanent neighbour entry pointing at the switch port's MAC.
    gateway: Address = Address("10.10.0.1/24", "fd00:10::1/64")

    @property
    def mtu(self) -> int:
        return MTU_JUMBO_GUEST if self.jumbo else MTU_EXTERNAL


INSTANCES: tuple[Instance, ...] = (
    Instance("jumbo1", Address("10.10.0.10/24", "fd00:10::10/64"), jumbo=True),
    Instance("legacy1", Address("10.10.0.20/24", "fd00:10::20/64"), jumbo=False),
)
JUMBO = INSTANCES[0]
LEGACY = INSTANCES[1]
# Application hosts that make value (rack_value.py) adds behind each
# instance when it turns the instance into a router running an NF.
NF_APPS = ("nfapp1", "nfapp2")
RACK_PREFIX = Address("10.10.0.0/24", "fd00:10::/64")


@dataclass(frozen=True)
class Router:
    host: str
    uplink: Address  # on eth0, toward the switch
    # The switch as this router's next hop toward the rack (no real IP; a
    # permanent neighbour entry to the switch port's MAC).
    border: Address
    lan: Address  # on eth1, the external LAN

    @property
    def port(self) -> SwitchPort:
        return switch_port(self.host)


ROUTERS: tuple[Router, ...] = (
    Router("up1", Address("100.64.1.1/24", "fd00:64:1::1/64"), Address("100.64.1.254/24", "fd00:64:1::fe/64"), Address("203.0.113.1/24", "2001:db8:113::1/64")),
    Router("up2", Address("100.64.2.1/24", "fd00:64:2::1/64"), Address("100.64.2.254/24", "fd00:64:2::fe/64"), Address("203.0.113.2/24", "2001:db8:113::2/64")),
)


@dataclass(frozen=True)
class ExternalHost:
    host: str
    address: Address
    mac: str


EXTERNAL_HOSTS: tuple[ExternalHost, ...] = (
    ExternalHost("ext1", Address("203.0.113.11/24", "2001:db8:113::11/64"), "02:4a:47:00:e0:0b"),
    ExternalHost("ext2", Address("203.0.113.12/24", "2001:db8:113::12/64"), "02:4a:47:00:e0:0c"),
)

# Management link between the root namespace and the SmartNIC's namespace.
MGMT_ROOT = Address("10.254.0.1/30", "fd00:254::1/64")
MGMT_NIC = Address("10.254.0.2/30", "fd00:254::2/64")
NIC_CONTROL_ADDRESS = f"{MGMT_NIC.ip4}:{NIC_CONTROL_PORT}"
NIC_INTF = f"{NIC_HOST}-eth0"
# DPDK's --file-prefix: keeps the SmartNIC's runtime files apart from any
# other DPDK process on the machine, and names what to sweep.
NIC_FILE_PREFIX = "jumbogate-emu"
SWITCH_FILE_PREFIX = "jumbogate-emu-switch"

# TCP ports the demo uses; 5201-5210 are merge services in rack.yaml for the
# jumbo instance, so bulk transfers take the merge path from their first packet.
IPERF_PORTS = tuple(range(5201, 5211))


@dataclass(frozen=True)
class Names:
    """What belongs to the emulation, for teardown sweeps."""

    nodes: tuple[str, ...] = field(
        default_factory=lambda: tuple(
            [SWITCH, BRIDGE, NIC_HOST, MGMT_NODE] + [r.host for r in ROUTERS] + [h.host for h in EXTERNAL_HOSTS] + [i.host for i in INSTANCES] + list(NF_APPS)
        )
    )

    def owns_interface(self, name: str) -> bool:
        return name == BRIDGE or any(name.startswith(f"{node}-eth") for node in self.nodes)


NAMES = Names()
