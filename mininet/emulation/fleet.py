"""A fleet of three racks on one etcd cluster (#32, item 4): `make run TOPO=fleet`, mininet/tests/test_fleet_topology.py.

          a1 --3[sa]1--\\            /--1[sc]3-- c1
             na 5|      up (router)      |5 nc
                        |
                   b1 --3[sb]1
                      nb 5|

Each rack is a whole border on jumbogate-switch: the switch, jumbogate-nic
and two jumbogate-controllers of its own (`--rack rack-a`, ...), which elect
the rack's leader. All six controllers keep the fleet's policy in one etcd
cluster of three members (in the root namespace, beside the controllers),
so a fleet flag flipped through any controller reaches all three switches.
`up` is the small upstream: a Linux router joining the racks.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

import yaml
from mininet.net import Mininet
from mininet.node import Host

from jumbogate.p4 import names
from testlab.etcd_process import etcd_argv, etcdctl

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
from .two_racks import MTU_GUEST, MTU_SWITCH_SIDE, MTU_UNDERLAY, border_config

START_TIMEOUT_S = 60.0
FORWARDING_TIMEOUT_S = 90.0
UPSTREAM = "up"
CONTROLLERS_PER_RACK = 2
# The etcd cluster's members: client and peer ports on loopback.
ETCD_MEMBERS = tuple((f"etcd{i}", 50370 + 2 * i, 50371 + 2 * i) for i in range(1, 4))
ETCD_DATA = procs.STATE_DIR / "fleet-etcd"
ETCD_CLIENT_PORTS = tuple(client for _, client, _ in ETCD_MEMBERS)


@dataclass(frozen=True)
class FleetRack:
    name: str  # "a", "b", "c"
    number: int

    @property
    def rack(self) -> str:
        return f"rack-{self.name}"

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
    def prefix4(self) -> str:
        return f"10.{self.number}.0.0/24"

    @property
    def prefix6(self) -> str:
        return f"fd0{self.number}::/64"

    @property
    def address4(self) -> str:
        return f"10.{self.number}.0.10"

    @property
    def address6(self) -> str:
        return f"fd0{self.number}::10"

    @property
    def p4runtime(self) -> str:
        return f"127.0.0.1:{59760 + self.number}"

    def controller(self, index: int) -> str:
        """The operator API of the rack's controller `index` (0 or 1)."""
        return f"127.0.0.1:{50350 + 10 * self.number + index}"

    def etcd_address(self, index: int) -> str:
        """The loopback address through which controller `index` reaches etcd: one of its own, so
        that one nftables rule can cut exactly that controller off from the store (fleet_chaos.py)."""
        return f"127.1.{self.number}.{index + 1}"

    def store_url(self, index: int) -> str:
        return "etcd://" + ",".join(f"{self.etcd_address(index)}:{client}" for client in ETCD_CLIENT_PORTS)

    def mac(self, role: int, port: int = 0) -> str:
        """Switch ports (role 1), the instance (2), the SmartNIC (3), the upstream router's port (4)."""
        return f"02:4a:46:{self.number:02x}:{role:02x}:{port:02x}"

    @property
    def link4(self) -> str:  # the upstream's side of its link to this rack; .2 is the switch's name
        return f"10.{self.number}.255.1"

    @property
    def link6(self) -> str:
        return f"fd0{self.number}:ff::1"


RACKS = (FleetRack("a", 1), FleetRack("b", 2), FleetRack("c", 3))
# Every member serves clients on 127.0.0.1 (etcdctl, tests) and on each controller's own address.
ETCD_CLIENT_ADDRESSES = ("127.0.0.1", *(rack.etcd_address(i) for rack in RACKS for i in range(CONTROLLERS_PER_RACK)))


def rack_config(rack: FleetRack, nic_socket: str, listen: str) -> dict:
    """One controller's file: its rack's ports and routes, the fleet's keys (the same in every file: the first seeds them)."""
    return border_config(
        p4runtime=rack.p4runtime,
        uplink=(rack.mac(1, 1), rack.mac(4)),
        instance=(rack.instance, rack.mac(1, 3), rack.mac(2)),
        addresses=((rack.address4,), (rack.address6,)),
        internal_prefixes=[rack.prefix4, rack.prefix6],
        merge_services=[f"{r.address4}/32" for r in RACKS] + [f"{r.address6}/128" for r in RACKS],
        nic_socket=nic_socket,
        listen=listen,
    )


def controller_role(rack: FleetRack, index: int) -> str:
    """The name of a rack's controller `index` among the emulation's processes (its log is logs/<role>.log)."""
    return f"controller-{rack.name}{index}"


class Fleet(Emulation):
    def __init__(self, *, verbose: bool = False, workdir: Path | None = None):
        self.verbose = verbose
        self.workdir = workdir or Path(tempfile.mkdtemp(prefix="jumbogate-fleet-"))
        self.net: Mininet | None = None
        self.began = False
        self.processes: list[subprocess.Popen] = []
        self.etcd: list[subprocess.Popen | None] = []
        self.etcd_argv: list[list[str]] = []
        # (rack, index) -> the controller's process, restartable.
        self.controllers: dict[tuple[str, int], subprocess.Popen] = {}

    def host(self, name: str) -> Host:
        assert self.net is not None, "the fleet is not up"
        return self.net.get(name)

    def nic_socket(self, rack: FleetRack) -> str:
        return f"unix:{self.workdir / f'nic-{rack.name}.sock'}"

    def config_path(self, rack: FleetRack, index: int) -> Path:
        # Under a "mininet/" folder: the sweep finds leftover controllers by it.
        return self.workdir / f"mininet-{rack.name}{index}" / "mininet" / "rack.yaml"

    def ctl(self, rack: FleetRack, *args: str, index: int = 0, check: bool = True, timeout: float = 30.0) -> subprocess.CompletedProcess:
        argv = [str(JUMBOGATECTL), "--controller", rack.controller(index), *args]
        return subprocess.run(argv, capture_output=True, text=True, check=check, timeout=timeout)

    # ----- up -----

    def up(self) -> None:
        claim_the_machine(self.verbose)
        self.began = True
        addresses = {f"{r.rack}'s P4Runtime": r.p4runtime for r in RACKS}
        addresses |= {f"{r.rack}'s controller {i}": r.controller(i) for r in RACKS for i in range(CONTROLLERS_PER_RACK)}
        addresses |= {f"{name}'s {what}": f"127.0.0.1:{port}" for name, client, peer in ETCD_MEMBERS for what, port in (("client", client), ("peer", peer))}
        begin_run(addresses)
        for rack in RACKS:
            for index in range(CONTROLLERS_PER_RACK):
                path = self.config_path(rack, index)
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(yaml.safe_dump(rack_config(rack, self.nic_socket(rack), rack.controller(index)), sort_keys=False))
        self._start_etcd()
        self.net = self._build()
        self.net.build()
        procs.update_state(namespaces={h.name: cleanup.netns_of(h.pid) for h in self.net.hosts})
        self._configure()
        self.net.start()
        for rack in RACKS:
            self._start_nic(rack)
        for rack in RACKS:
            for index in range(CONTROLLERS_PER_RACK):
                self.start_controller(rack, index)
        self.wait_forwarding()

    def _start_etcd(self) -> None:
        """Three members on loopback, a new cluster (its data emptied first): the controllers seed it from their files."""
        shutil.rmtree(ETCD_DATA, ignore_errors=True)
        cluster = ",".join(f"{name}=http://127.0.0.1:{peer}" for name, _, peer in ETCD_MEMBERS)
        for name, client, peer in ETCD_MEMBERS:
            argv = etcd_argv(name, ETCD_DATA / name, f"http://127.0.0.1:{client}", f"http://127.0.0.1:{peer}")
            argv[argv.index("--initial-cluster") + 1] = cluster
            argv[argv.index("--listen-client-urls") + 1] = ",".join(f"http://{address}:{client}" for address in ETCD_CLIENT_ADDRESSES)
            # (A member restarted from its data directory ignores the initial-cluster flags.)
            argv += ["--initial-cluster-token", "jumbogate-fleet", "--initial-cluster-state", "new"]
            self.etcd_argv.append(argv)
            self.etcd.append(None)
        for member in range(len(ETCD_MEMBERS)):
            self.start_etcd_member(member, wait=False)
        for member in range(len(ETCD_MEMBERS)):
            self.wait_etcd_member(member)

    def start_etcd_member(self, member: int, *, wait: bool = True) -> None:
        """(Re)start one member from its data directory."""
        name, client, _ = ETCD_MEMBERS[member]
        self.etcd[member] = procs.start_process(f"etcd-{name}", self.etcd_argv[member], f"127.0.0.1:{client}")
        if wait:
            self.wait_etcd_member(member)

    def wait_etcd_member(self, member: int) -> None:
        name, client, _ = ETCD_MEMBERS[member]
        procs.wait_until(
            f"etcd member {name} to answer",
            lambda: etcdctl(f"http://127.0.0.1:{client}", "endpoint", "health").returncode == 0,
            timeout=START_TIMEOUT_S,
            proc=self.etcd[member],
            role=f"etcd-{name}",
        )

    def kill_etcd_member(self, member: int) -> None:
        proc, self.etcd[member] = self.etcd[member], None
        if proc is not None:
            proc.kill()
            proc.wait(10)

    def _build(self) -> Mininet:
        net = Mininet(controller=None, build=False, autoSetMacs=False, autoStaticArp=False)
        upstream = net.addHost(UPSTREAM, ip=None)
        for rack in RACKS:
            switch = net.addSwitch(
                rack.switch,
                cls=SoftSwitch,
                dpid=str(rack.number),
                grpc_address=rack.p4runtime,
                device_id=1,
                cpu_port=255,
                file_prefix=f"jgf-switch-{rack.name}",
                role=f"switch-{rack.name}",
                fence_election_ids=True,
            )
            net.addLink(switch, upstream, port1=1, port2=rack.number, addr1=rack.mac(1, 1), addr2=rack.mac(4))
            net.addLink(switch, net.addHost(rack.instance, ip=None), port1=3, port2=0, addr1=rack.mac(1, 3), addr2=rack.mac(2))
            net.addLink(switch, net.addHost(rack.nic, ip=None), port1=5, port2=0, addr1=rack.mac(1, 5), addr2=rack.mac(3))
        return net

    def _configure(self) -> None:
        from .plan import Address

        root = self.net.get(RACKS[0].switch)  # the switches' ends are in the root namespace
        upstream = self.host(UPSTREAM)
        host_sysctls(upstream, forwarding=True)
        for rack in RACKS:
            for port in (1, 3, 5):
                set_link(root, f"{rack.switch}-eth{port}", MTU_SWITCH_SIDE, ipv6=False)
            instance, nic = self.host(rack.instance), self.host(rack.nic)
            gateways = (rack.prefix4.replace("0/24", "1"), rack.prefix6.replace("/64", "1"))
            instance_behind_switch(instance, f"{rack.instance}-eth0", MTU_GUEST, [(rack.address4, rack.address6)], gateways, rack.mac(1, 3))
            host_sysctls(nic)
            set_link(nic, f"{rack.nic}-eth0", MTU_SWITCH_SIDE, ipv6=False)
            intf = f"{UPSTREAM}-eth{rack.number}"
            set_link(upstream, intf, MTU_UNDERLAY)
            add_addresses(upstream, intf, Address(f"{rack.link4}/24", f"{rack.link6}/64"))
            switch4, switch6 = rack.link4[:-1] + "2", rack.link6[:-1] + "2"
            permanent_neighbour(upstream, intf, Address(f"{switch4}/24", f"{switch6}/64"), rack.mac(1, 1))
            upstream.cmd(f"ip route add {rack.prefix4} via {switch4}; ip -6 route add {rack.prefix6} via {switch6}")

    # ----- processes -----

    def _start_nic(self, rack: FleetRack) -> None:
        intf = f"{rack.nic}-eth0"
        argv = [
            str(NIC_BINARY), "--no-huge", "--no-pci", "-m", "512", f"--file-prefix=jgf-nic-{rack.name}", "-l", "0-1",
            f"--vdev=net_af_packet0,iface={intf},blocksz=12288,framesz=12288,framecnt=512,qpairs=1",
            "--", "--grpc", self.nic_socket(rack), "--port-mtu", str(MTU_UNDERLAY),
            "--internal-prefix", rack.prefix4, "--internal-prefix", rack.prefix6,
            # Six DPDK programs share the machine's cores: let every flow wait for its neighbours.
            "--delay-rate-threshold-gbps", "0", "--delay-max-us", str(NIC_MAX_DELAY_US),
        ]  # fmt: skip
        self.processes.append(
            procs.start_grpc_service(
                f"nic-{rack.name}",
                "jumbogate-nic",
                argv,
                f"--file-prefix=jgf-nic-{rack.name}",
                self.nic_socket(rack),
                timeout=START_TIMEOUT_S,
                popen=self.host(rack.nic).popen,
            )
        )

    def start_controller(self, rack: FleetRack, index: int) -> subprocess.Popen:
        """(Re)start one of a rack's two controllers; returns once its operator API serves (leading or not)."""
        config = self.config_path(rack, index)
        argv = [
            str(CONTROLLER), "--config", str(config), "--pipeline", str(PIPELINE.relative_to(procs.REPO)),
            "--store", rack.store_url(index), "--rack", rack.rack,
        ]  # fmt: skip
        proc = procs.start_grpc_service(
            controller_role(rack, index), "jumbogate-controller", argv, str(config), rack.controller(index), timeout=START_TIMEOUT_S
        )
        self.controllers[(rack.name, index)] = proc
        return proc

    def wait_forwarding(self) -> None:
        wait_reachable(self, [(a.instance, b.address4) for a in RACKS for b in RACKS if a != b], "forwarding between the racks", FORWARDING_TIMEOUT_S)

    # ----- down -----

    def stop_processes(self) -> None:
        # Controllers first (a clean stop revokes their leases), then the SmartNICs, then etcd.
        for proc in self.controllers.values():
            procs.stop_process(proc)
        self.controllers.clear()
        for proc in reversed(self.processes):
            procs.stop_process(proc)
        self.processes.clear()
        for proc in self.etcd:
            procs.stop_process(proc)
        if self.etcd:
            shutil.rmtree(ETCD_DATA, ignore_errors=True)
        self.etcd.clear()
        self.etcd_argv.clear()


def switch_policy(address: str) -> dict:
    """What one switch holds of the fleet's policy, read by an independent backup P4Runtime client
    (never through a controller): the fleet_policy entry's `enabled` (a set: one value when the
    switch is whole), and instances_v4 and instances_v6 as {address: enabled}."""
    import asyncio
    import ipaddress
    import logging

    import finsy as fy

    # finsy warns once per connection that the switch serves no gNMI.
    logging.getLogger("finsy").setLevel(logging.ERROR)

    async def read() -> dict:
        options = fy.SwitchOptions(p4info=PIPELINE / "jumbogate.p4info.txtpb", initial_election_id=1)
        async with fy.Switch("fleet-reader", address, options) as reader:
            fleet = {e.action.args["enabled"] async for e in reader.read(fy.P4TableEntry(names.FLEET_POLICY, is_default_action=True))}
            instances = {}
            for table, family in ((names.INSTANCES_V4, ipaddress.IPv4Address), (names.INSTANCES_V6, ipaddress.IPv6Address)):
                entries = reader.read(fy.P4TableEntry(table))
                instances[table] = {str(family(e.match["instance_addr"])): e.action.args["enabled"] async for e in entries}
            return {"fleet": fleet, **instances}

    return asyncio.run(read())


def banner(fleet: Fleet) -> str:
    lines = ["", "jumbogate: a fleet of three racks is up (jumbogate-switch, jumbogate-nic and two jumbogate-controllers each, one etcd cluster)"]
    members = ",".join(f"127.0.0.1:{client}" for client in ETCD_CLIENT_PORTS)
    lines.append(
        f"  store   etcd, three members: {members} (each controller through an address of its own); logs in {procs.LOG_DIR.relative_to(procs.REPO)}/etcd-*.log"
    )
    for rack in RACKS:
        controllers = " and ".join(rack.controller(i) for i in range(CONTROLLERS_PER_RACK))
        lines.append(f"  {rack.rack}  instance {rack.instance} {rack.address4} / {rack.address6}; switch P4Runtime {rack.p4runtime}; controllers {controllers}")
    ctl = f"{JUMBOGATECTL.relative_to(procs.REPO)} --controller {RACKS[0].controller(0)}"
    lines += [
        "",
        "In this CLI:",
        f"  c1 iperf3 -s -D && a1 iperf3 -c {RACKS[2].address4} -t 5",
        "From another shell (repository root):",
        f"  {ctl} status             # which of rack-a's controllers leads, the store, the switch, the SmartNIC",
        f"  {ctl} fleet jumbo off    # reaches all three switches",
        "Leave with 'exit' or Ctrl-D: everything is torn down.",
        "",
    ]
    return "\n".join(lines)
