"""Two racks across a small WAN, for path MTU discovery between borders
(docs/pathmtu.md): `make run TOPO=two-racks`, mininet/tests/test_two_racks.py.

    a1 --3[sa]1-- wa ==== m1 (9000) ==== wb --1[sb]3-- b1
           5|        \\== m2 (4200) ==//          |5
           na        \\== m3 (4000, sends no ICMP) nb
                      \\= m4 (4200) - f4 (drops IPv4 fragments)

Each rack is a whole border: jumbogate-switch, jumbogate-nic (with path MTU
discovery on) and jumbogate-controller. Rack B's instance b1 has one address
per WAN path (10.2.0.11 over m1, .12 over m2, .13 over m3, .14 over m4;
fd02::11..14):
rack A's router picks the path by destination, rack B's by source. m2 has a
4200-byte link towards rack B, m3 a 4000-byte one; m2 fragments IPv4
without DF and answers with ICMP, m3 sends no ICMP at all (a black hole for
classic PMTUD); m4 is m2 with a wire behind it that drops every IPv4
fragment (fragment_filter.py).

The SmartNICs' ports and the switches' WAN ports are net_pcap, not
net_af_packet: an af_packet port reassembles IPv4 fragments before the
program sees them (docs/pathmtu.md), which would hide how the WAN cut a
probe.
"""

from __future__ import annotations

import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import yaml
from mininet.net import Mininet
from mininet.node import Host

from . import cleanup, procs
from .rack import (
    CONTROLLER,
    JUMBOGATECTL,
    NIC_BINARY,
    NIC_MAX_DELAY_US,
    PIPELINE,
    Emulation,
    add_addresses,
    begin_run,
    claim_the_machine,
    host_sysctls,
    instance_behind_switch,
    permanent_neighbour,
    set_link,
    wait_reachable,
)
from .switches import SoftSwitch

MTU_UNDERLAY = 9000
MTU_GUEST = 8500
MTU_SWITCH_SIDE = 9500
PROBE_TIMEOUT_MS = 500
START_TIMEOUT_S = 30.0
FORWARDING_TIMEOUT_S = 60.0


@dataclass(frozen=True)
class WanPath:
    router: str
    index: int
    mtu: int  # of its link towards rack B
    sends_icmp: bool
    # A wire on its link towards rack B drops IPv4 fragments (fragment_filter.py).
    drops_fragments: bool = False

    @property
    def filter(self) -> str:
        return f"f{self.index}"

    @property
    def dest4(self) -> str:
        return f"10.2.0.1{self.index}"

    @property
    def dest6(self) -> str:
        return f"fd02::1{self.index}"


# m2's 4200 is no probe size: what it fragments to (4196) beats the largest
# sized probe that fits (4000), which shows the fragment method at work.
# m4 is m2 again, but what m4 fragments never arrives.
PATHS = (
    WanPath("m1", 1, 9000, True),
    WanPath("m2", 2, 4200, True),
    WanPath("m3", 3, 4000, False),
    WanPath("m4", 4, 4200, True, drops_fragments=True),
)


@dataclass(frozen=True)
class Side:
    name: str  # "a" or "b"
    number: int
    prefix4: str
    prefix6: str
    addresses4: tuple[str, ...]
    addresses6: tuple[str, ...]

    @property
    def switch(self) -> str:
        return f"s{self.name}"

    @property
    def instance(self) -> str:
        return f"{self.name}1"

    @property
    def nic(self) -> str:
        return f"n{self.name}"

    @property
    def router(self) -> str:
        return f"w{self.name}"

    @property
    def p4runtime(self) -> str:
        return f"127.0.0.1:{59660 + self.number}"

    @property
    def controller(self) -> str:
        return f"127.0.0.1:{50250 + self.number}"

    def mac(self, role: int, port: int = 0) -> str:
        """Switch ports (role 1), the instance (2), the SmartNIC (3), the router (4)."""
        return f"02:4a:48:{self.number:02x}:{role:02x}:{port:02x}"

    @property
    def gateway4(self) -> str:
        return self.prefix4.replace("0/24", "1")

    @property
    def gateway6(self) -> str:
        return self.prefix6.replace("/64", "1")

    @property
    def link4(self) -> str:  # the router's side of its link to the switch; .2 is the switch's name
        return f"10.{self.number}.255.1"

    @property
    def link6(self) -> str:
        return f"fd0{self.number}:ff::1"


A = Side("a", 1, "10.1.0.0/24", "fd01::/64", ("10.1.0.10",), ("fd01::10",))
B = Side("b", 2, "10.2.0.0/24", "fd02::/64", tuple(p.dest4 for p in PATHS), tuple(p.dest6 for p in PATHS))
SIDES = (A, B)


def rack_config(side: Side, nic_socket: str) -> dict:
    services = [f"{a}/32" for a in side.addresses4] + [f"{a}/128" for a in side.addresses6]
    return border_config(
        p4runtime=side.p4runtime,
        uplink=(side.mac(1, 1), side.mac(4)),
        instance=(side.instance, side.mac(1, 3), side.mac(2)),
        addresses=(side.addresses4, side.addresses6),
        internal_prefixes=[side.prefix4, side.prefix6],
        merge_services=services,
        nic_socket=nic_socket,
        listen=side.controller,
    )


def border_config(
    *,
    p4runtime: str,
    uplink: tuple[str, str],
    instance: tuple[str, str, str],
    addresses: tuple[tuple[str, ...], tuple[str, ...]],
    internal_prefixes: list[str],
    merge_services: list[str],
    nic_socket: str,
    listen: str,
) -> dict:
    """The rack.yaml of a border with one uplink (port 1: `uplink` is the switch's MAC and its
    neighbour's) and one instance (port 3: its name, the switch's MAC, the instance's), the SmartNIC on 5."""
    (switch_mac, neighbour_mac), (name, towards_instance, instance_mac) = uplink, instance
    addresses4, addresses6 = addresses
    wan = {"port": 1, "src_mac": switch_mac, "dst_mac": neighbour_mac}
    routes = [{"prefix": "0.0.0.0/0", "next_hops": [wan]}, {"prefix": "::/0", "next_hops": [wan]}]
    to_instance = {"port": 3, "src_mac": towards_instance, "dst_mac": instance_mac}
    routes += [{"prefix": f"{a}/32", "next_hops": [to_instance]} for a in addresses4]
    routes += [{"prefix": f"{a}/128", "next_hops": [to_instance]} for a in addresses6]
    return {
        "fleet": {"jumbo": True},
        "mtu": {"internal": MTU_UNDERLAY, "guest_jumbo": MTU_GUEST, "default_external": 1500},
        "switch": {
            "p4runtime": p4runtime,
            "device_id": 1,
            "election_id": 10,
            "pipeline": str(PIPELINE),
            "ports": [
                {"port": 1, "name": "wan", "role": "external"},
                {"port": 3, "name": name, "role": "internal"},
                {"port": 5, "name": "smartnic", "role": "nic"},
                {"port": 255, "name": "cpu", "role": "cpu"},
            ],
        },
        "routes": routes,
        "instances": [{"id": name, "addresses": [*addresses4, *addresses6], "jumbo": True}],
        "merge_services": [{"prefix": prefix, "ports": "5201-5210"} for prefix in merge_services],
        "elephant": {"threshold_bytes": 1000000, "idle_timeout_s": 10},
        "smartnic": {"control": nic_socket, "internal_prefixes": internal_prefixes},
        "controller": {"listen": listen},
    }


class TwoRacks(Emulation):
    def __init__(self, *, verbose: bool = False, workdir: Path | None = None):
        self.verbose = verbose
        self.workdir = workdir or Path(tempfile.mkdtemp(prefix="jumbogate-two-racks-"))
        self.net: Mininet | None = None
        self.began = False
        self.processes = []

    def host(self, name: str) -> Host:
        assert self.net is not None, "the racks are not up"
        return self.net.get(name)

    def nic_socket(self, side: Side) -> str:
        return f"unix:{self.workdir / f'nic-{side.name}.sock'}"

    def config_path(self, side: Side) -> Path:
        # Under a "mininet/" folder: the sweep finds leftover controllers by it.
        return self.workdir / f"mininet-{side.name}" / "mininet" / "rack.yaml"

    def ctl(self, side: Side, *args: str, check: bool = True, timeout: float = 30.0):
        import subprocess

        argv = [str(JUMBOGATECTL), "--controller", side.controller, *args]
        return subprocess.run(argv, capture_output=True, text=True, check=check, timeout=timeout)

    # ----- up -----

    def up(self) -> None:
        claim_the_machine(self.verbose)
        self.began = True
        begin_run({f"rack {s.name}'s {what}": address for s in SIDES for what, address in (("P4Runtime", s.p4runtime), ("controller", s.controller))})
        for side in SIDES:
            path = self.config_path(side)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(yaml.safe_dump(rack_config(side, self.nic_socket(side)), sort_keys=False))
        self.net = self._build()
        self.net.build()
        procs.update_state(namespaces={h.name: cleanup.netns_of(h.pid) for h in self.net.hosts})
        self._configure()
        self.net.start()
        for path in PATHS:
            if path.drops_fragments:
                script = Path(__file__).with_name("fragment_filter.py")
                argv = [sys.executable, str(script), f"{path.filter}-eth0", f"{path.filter}-eth1"]
                self.processes.append(procs.start_process(f"filter-{path.filter}", argv, str(script), popen=self.host(path.filter).popen))
        for side in SIDES:
            self._start_nic(side)
        for side in SIDES:
            self._start_controller(side)
        self.wait_forwarding()

    def _build(self) -> Mininet:
        net = Mininet(controller=None, build=False, autoSetMacs=False, autoStaticArp=False)
        for side in SIDES:
            switch = net.addSwitch(
                side.switch,
                cls=SoftSwitch,
                dpid=str(side.number),
                grpc_address=side.p4runtime,
                device_id=1,
                cpu_port=255,
                file_prefix=f"jg2-switch-{side.name}",
                role=f"switch-{side.name}",
                pcap_ports=(1,),
            )
            router = net.addHost(side.router, ip=None)
            net.addLink(switch, router, port1=1, port2=0, addr1=side.mac(1, 1), addr2=side.mac(4))
            net.addLink(switch, net.addHost(side.instance, ip=None), port1=3, port2=0, addr1=side.mac(1, 3), addr2=side.mac(2))
            net.addLink(switch, net.addHost(side.nic, ip=None), port1=5, port2=0, addr1=side.mac(1, 5), addr2=side.mac(3))
        for path in PATHS:
            middle = net.addHost(path.router, ip=None)
            net.addLink(net.get(A.router), middle, port1=path.index, port2=0)
            if path.drops_fragments:
                wire = net.addHost(path.filter, ip=None)
                net.addLink(middle, wire, port1=1, port2=0)
                net.addLink(wire, net.get(B.router), port1=1, port2=path.index)
            else:
                net.addLink(middle, net.get(B.router), port1=1, port2=path.index)
        return net

    def _configure(self) -> None:
        root = self.net.get(A.switch)  # the switches' ends are in the root namespace
        for side in SIDES:
            for port in (1, 3, 5):
                set_link(root, f"{side.switch}-eth{port}", MTU_SWITCH_SIDE, ipv6=False)
            instance, nic, router = self.host(side.instance), self.host(side.nic), self.host(side.router)
            addresses = list(zip(side.addresses4, side.addresses6, strict=True))
            instance_behind_switch(instance, f"{side.instance}-eth0", MTU_GUEST, addresses, (side.gateway4, side.gateway6), side.mac(1, 3))
            host_sysctls(nic)
            set_link(nic, f"{side.nic}-eth0", MTU_SWITCH_SIDE, ipv6=False)
            host_sysctls(router, forwarding=True)
            set_link(router, f"{side.router}-eth0", MTU_UNDERLAY)
            add_addresses(router, f"{side.router}-eth0", _address(f"{side.link4}/24", f"{side.link6}/64"))
            switch4, switch6 = side.link4[:-1] + "2", side.link6[:-1] + "2"
            permanent_neighbour(router, f"{side.router}-eth0", _address(f"{switch4}/24", f"{switch6}/64"), side.mac(1, 1))
            router.cmd(f"ip route add {side.prefix4} via {switch4}; ip -6 route add {side.prefix6} via {switch6}")
        wa, wb = self.host(A.router), self.host(B.router)
        for path in PATHS:
            i = path.index
            middle = self.host(path.router)
            host_sysctls(middle, forwarding=True)
            set_link(wa, f"{A.router}-eth{i}", MTU_UNDERLAY)
            set_link(middle, f"{path.router}-eth0", MTU_UNDERLAY)
            set_link(middle, f"{path.router}-eth1", path.mtu)
            set_link(wb, f"{B.router}-eth{i}", path.mtu)
            if path.drops_fragments:
                wire = self.host(path.filter)
                for end in (0, 1):
                    set_link(wire, f"{path.filter}-eth{end}", path.mtu, ipv6=False)
            ends = (
                (
                    wa,
                    f"{A.router}-eth{i}",
                    _address(f"10.12.{i}.1/24", f"fd12:{i}::1/64"),
                    middle,
                    f"{path.router}-eth0",
                    _address(f"10.12.{i}.2/24", f"fd12:{i}::2/64"),
                ),
                (
                    middle,
                    f"{path.router}-eth1",
                    _address(f"10.21.{i}.1/24", f"fd21:{i}::1/64"),
                    wb,
                    f"{B.router}-eth{i}",
                    _address(f"10.21.{i}.2/24", f"fd21:{i}::2/64"),
                ),
            )
            for node, intf, address, peer, peer_intf, peer_address in ends:
                add_addresses(node, intf, address)
                add_addresses(peer, peer_intf, peer_address)
                # The WAN is static: nothing needs discovering on it (and
                # IPv6 neighbour discovery on these veths is not reliable
                # at start-up, as on the one-rack emulation's LAN).
                permanent_neighbour(node, intf, peer_address, peer.intf(peer_intf).MAC())
                permanent_neighbour(peer, peer_intf, address, node.intf(intf).MAC())
            # Rack A's router picks the path by destination ...
            wa.cmd(f"ip route add {path.dest4}/32 via 10.12.{i}.2; ip -6 route add {path.dest6}/128 via fd12:{i}::2")
            middle.cmd(f"ip route add {B.prefix4} via 10.21.{i}.2; ip -6 route add {B.prefix6} via fd21:{i}::2")
            middle.cmd(f"ip route add default via 10.12.{i}.1; ip -6 route add default via fd12:{i}::1")
            # ... rack B's by source, so that both directions take the same one.
            wb.cmd(f"ip rule add from {path.dest4} table {100 + i}; ip route add default via 10.21.{i}.1 table {100 + i}")
            wb.cmd(f"ip -6 rule add from {path.dest6} table {100 + i}; ip -6 route add default via fd21:{i}::1 table {100 + i}")
            if not path.sends_icmp:
                # Nothing this router makes itself (its ICMP errors) leaves it;
                # IPv6 only towards the racks, so neighbour discovery still works.
                middle.cmd("ip rule add iif lo ipproto icmp blackhole")
                for prefix in (A.prefix6, B.prefix6):
                    middle.cmd(f"ip -6 rule add iif lo ipproto ipv6-icmp to {prefix} blackhole")

    # ----- processes -----

    def _start_nic(self, side: Side) -> None:
        intf = f"{side.nic}-eth0"
        argv = [
            str(NIC_BINARY),
            "--no-huge",
            "--no-pci",
            "-m",
            "512",
            f"--file-prefix=jg2-nic-{side.name}",
            "-l",
            "0-1",
            f"--vdev=net_pcap0,rx_iface_in={intf},tx_iface={intf}",
            "--",
            "--grpc",
            self.nic_socket(side),
            "--port-mtu",
            str(MTU_UNDERLAY),
            "--internal-prefix",
            side.prefix4,
            "--internal-prefix",
            side.prefix6,
            "--pmtu-discovery",
            "on",
            "--pmtu-timeout-ms",
            str(PROBE_TIMEOUT_MS),
            # Four DPDK programs and six namespaces share two cores, and
            # net_pcap reads a packet at a time: flows run at tens of
            # Mbit/s, each segment far from the next, as on BMv2 in the
            # one-rack emulation. Every flow may wait, up to 8 ms.
            "--delay-rate-threshold-gbps",
            "0",
            "--delay-max-us",
            str(NIC_MAX_DELAY_US),
        ]
        self.processes.append(
            procs.start_grpc_service(
                f"nic-{side.name}",
                "jumbogate-nic",
                argv,
                f"--file-prefix=jg2-nic-{side.name}",
                self.nic_socket(side),
                timeout=START_TIMEOUT_S,
                popen=self.host(side.nic).popen,
            )
        )

    def _start_controller(self, side: Side) -> None:
        config = self.config_path(side)
        argv = [str(CONTROLLER), "--config", str(config), "--pipeline", str(PIPELINE.relative_to(procs.REPO))]
        self.processes.append(
            procs.start_grpc_service(f"controller-{side.name}", "jumbogate-controller", argv, str(config), side.controller, timeout=START_TIMEOUT_S)
        )

    def wait_forwarding(self) -> None:
        wait_reachable(self, [(A.instance, dest) for dest in (*B.addresses4, *B.addresses6)], "forwarding from rack A to rack B", FORWARDING_TIMEOUT_S)

    # ----- down -----

    def stop_processes(self) -> None:
        for proc in reversed(self.processes):
            procs.stop_process(proc)
        self.processes.clear()


# One SYN from a host towards `dest` (port 9, from the source address given
# as a second argument): what starts the border's path MTU discovery.
KNOCK = """
import socket, sys
family = socket.AF_INET6 if ":" in sys.argv[1] else socket.AF_INET
with socket.socket(family, socket.SOCK_STREAM) as s:
    if len(sys.argv) > 2:
        s.bind((sys.argv[2], 0))
    s.settimeout(1)
    try:
        s.connect((sys.argv[1], 9))
    except OSError:
        pass
"""


def nic_paths(side: Side) -> dict[str, dict]:
    """The paths a rack's SmartNIC tracks, by destination (its telemetry)."""
    from testlab.lab import telemetry_query

    return {p["address"]: p for p in telemetry_query(f"jg2-nic-{side.name}", "/jumbogate/paths").values()}


def learn(racks: TwoRacks, side: Side, host: str, dest: str, source: str | None = None, timeout: float = 5.0) -> tuple[dict, float]:
    """Knock from host to dest (one SYN) and wait for side's SmartNIC to learn the path and end its round:
    (its view then, seconds to the first learned value)."""
    start = time.monotonic()
    racks.host(host).popen(["python3", "-c", KNOCK, dest, *([source] if source else [])]).wait(timeout=10)
    first = None
    while time.monotonic() - start < timeout:
        path = nic_paths(side).get(dest)
        if path and path["mtu"] and first is None:
            first = time.monotonic() - start
        if first is not None and not path["probing"]:
            return path, first
        time.sleep(0.01)
    raise AssertionError(f"rack {side.name.upper()} learned nothing about {dest} in {timeout}s: {nic_paths(side)}")


def _address(v4: str, v6: str):
    from .plan import Address

    return Address(v4, v6)


def banner(racks: TwoRacks) -> str:
    lines = ["", "jumbogate: two racks across a small WAN are up (jumbogate-switch, jumbogate-nic with path MTU discovery, jumbogate-controller each)"]
    for side in SIDES:
        lines.append(
            f"  rack {side.name.upper()}: instance {side.instance} {', '.join(side.addresses4)} / {', '.join(side.addresses6)};"
            f" controller {side.controller}; logs in {procs.LOG_DIR.relative_to(procs.REPO)}/*-{side.name}.log"
        )
    for path in PATHS:
        what = "fragments IPv4 and answers with ICMP" if path.sends_icmp else "sends no ICMP (a black hole for classic PMTUD)"
        if path.drops_fragments:
            what += f"; a wire after it ({path.filter}) drops every IPv4 fragment"
        lines.append(f"  path {path.router}: to {path.dest4} / {path.dest6}, link towards rack B of MTU {path.mtu}; {what}")
    ctl = f"{JUMBOGATECTL.relative_to(procs.REPO)} --controller {A.controller}"
    lines += [
        "",
        "In this CLI:",
        f"  b1 iperf3 -s -D && a1 iperf3 -c {PATHS[1].dest4} -t 5",
        "From another shell (repository root):",
        f"  {ctl} path show            # what rack A learned, and whether its switch holds it",
        f"  {ctl} path probe {PATHS[1].dest4}",
        "Leave with 'exit' or Ctrl-D: everything is torn down.",
        "",
    ]
    return "\n".join(lines)
