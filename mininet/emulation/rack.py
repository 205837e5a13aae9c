"""Bring the emulated rack up and down: Mininet, the switch (jumbogate-switch or BMv2), jumbogate-nic, jumbogate-controller.

    with Rack() as rack:          # or rack.up() ... rack.down()
        rack.host("ext1").cmd(...)

up() fails with a StartError that names the part and its log; down() always
runs the crash-proof sweep after Mininet's own stop, so a failed start
leaves nothing behind either.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from mininet.log import setLogLevel
from mininet.net import Mininet
from mininet.node import Host, Switch

from testlab import lab
from testlab.etcd_process import etcd_argv, etcdctl, missing_etcd

from . import cleanup, plan, procs
from .switches import Bmv2Switch, QuietBridge, SoftSwitch, missing_switch, resolve_target
from .tls import RackTls

RACK_CONFIG = procs.REPO / "mininet" / "rack.yaml"
PIPELINE = procs.REPO / "p4src" / "compiled" / "depth512"
NIC_BINARY = lab.NIC
VENV_BIN = procs.REPO / ".venv" / "bin"
CONTROLLER = VENV_BIN / "jumbogate-controller"
JUMBOGATECTL = VENV_BIN / "jumbogatectl"

# The emulation's etcd keeps its data here, wiped at every start: each run
# seeds its store from mininet/rack.yaml, as the file store did.
ETCD_DATA = procs.STATE_DIR / "etcd"
ETCD_START_TIMEOUT_S = 30.0
NIC_START_TIMEOUT_S = 30.0
CONTROLLER_START_TIMEOUT_S = 30.0
# From the controller answering to the first packet forwarded end to end:
# pipeline push, table writes, SmartNIC configuration.
FORWARDING_TIMEOUT_S = 60.0

# Software switching hands the kernel packets whose checksums were left to a
# NIC that does not exist, and segmentation offloads would hide the packet
# sizes the demo is about: every interface on the path gets them all off.
OFFLOADS_OFF = ("rx", "tx", "sg", "tso", "gso", "gro")


# Only on BMv2, which forwards a few thousand packets a second (the border in
# slow motion, docs/emulation.md): the SmartNIC lets every flow wait up to
# 8 ms, and senders send 64 KB trains. On jumbogate-switch the SmartNIC runs
# with its default delay model and senders as Linux sends by default.
NIC_MAX_DELAY_US = 8000
SENDER_MIN_TSO_SEGS = 44
SENDER_INITIAL_WINDOW = 64  # segments; Linux's application-limited window never falls below it


@dataclass(frozen=True)
class Parts:
    """Which parts to start; the smoke test brings up the topology alone."""

    switch: bool = True
    nic: bool = True
    controller: bool = True


class PassiveSwitch(Switch):
    """Holds the border's interfaces without forwarding: for bringing up the topology without BMv2."""

    def start(self, _controllers) -> None:
        pass


def missing_prerequisites(parts: Parts = Parts(), target: str | None = None) -> list[str]:
    """What `make run` needs that is not there, as sentences saying how to get it."""
    missing = []
    if not procs.is_root():
        missing.append("run as root (Mininet creates namespaces and veths)")
    if parts.switch:
        try:
            problem = missing_switch(resolve_target(target))
        except procs.StartError as err:
            problem = str(err)
        if problem:
            missing.append(problem)
    if parts.controller and not (PIPELINE / "jumbogate.json").exists():
        missing.append(f"no compiled P4 program in {PIPELINE.relative_to(procs.REPO)} (run 'make p4')")
    if parts.nic and not NIC_BINARY.exists():
        missing.append(f"no {NIC_BINARY} (run 'make smartnic')")
    if parts.controller and not CONTROLLER.exists():
        missing.append("no .venv/bin/jumbogate-controller (run 'make setup')")
    if parts.controller and missing_etcd():
        missing.append(f"no {' and '.join(missing_etcd())} on PATH, the controller's store (Debian's etcd-server and etcd-client; run 'make setup')")
    for tool in ("ethtool", "iperf3", "tcpdump"):
        if shutil.which(tool) is None:
            missing.append(f"{tool} is not installed (run 'make setup')")
    return missing


def cannot_start(command: str, target: str | None = None) -> str | None:
    """The one refusal `make run`, `demo`, `attack` and `soak` print when the rack cannot start here, or None."""
    missing = missing_prerequisites(Parts(), target)
    if not missing:
        return None
    return f"{command}: cannot start the emulated rack:\n  " + "\n  ".join(missing)


class Emulation:
    """up() and down() as a context manager: down() runs even when up() fails.
    Subclasses set began, net, and stop their own processes in stop_processes()."""

    began = False
    net: Mininet | None = None

    def stop_processes(self) -> None:
        raise NotImplementedError

    def down(self) -> None:
        if not self.began:
            return  # up() refused before touching anything (another rack runs)
        self.stop_processes()
        if self.net is not None:
            try:
                self.net.stop()
            except Exception as err:  # noqa: BLE001 - the sweep below still has to run
                print(f"emulation: Mininet stop failed ({err}); sweeping")
            self.net = None
        cleanup.sweep()

    def __enter__(self):
        try:
            self.up()
        except BaseException:
            self.down()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.down()


def claim_the_machine(verbose: bool) -> None:
    """Refuse to start next to another emulation (one machine holds one)."""
    setLogLevel("info" if verbose else "warning")
    running = cleanup.running_rack()
    if running:
        # Sweeping would end the other one, and down() after this refusal must not either.
        raise procs.StartError(f"another emulated rack is running ({running}): use it, or end it with 'make stop'")


def begin_run(addresses: dict[str, str]) -> None:
    """What a previous run left is swept, the fixed addresses must be free, and the state file starts anew."""
    left = cleanup.find_leftovers()
    if left:
        print(f"emulation: a previous run left {left.describe()}; cleaning up first")
        cleanup.sweep()
    procs.require_free_addresses(addresses)
    procs.update_state(started_at=time.time(), owner={"pid": os.getpid(), "cmdline": cleanup.own_cmdline()}, processes={}, namespaces={})


class Rack(Emulation):
    def __init__(
        self,
        parts: Parts = Parts(),
        *,
        verbose: bool = False,
        nic_options: tuple[str, ...] = (),
        switch_target: str | None = None,
        config_overrides: dict | None = None,
        workdir: Path | None = None,
        tls: bool | None = None,
    ):
        self.parts = parts
        # Mutual TLS on every control channel (make run TLS=1): argument, else $TLS.
        self.tls_on = os.environ.get("TLS", "") == "1" if tls is None else tls
        self.tls: RackTls | None = None
        self.config_overrides = dict(config_overrides or {})
        self.workdir = workdir
        # Sections of rack.yaml to replace for this run (e.g. tighter
        # admission limits for make attack), written under workdir.
        self.config_path = RACK_CONFIG
        # 'soft' (jumbogate-switch) or 'bmv2'; $SWITCH or the default when not given.
        self.target = resolve_target(switch_target)
        # BMv2 is too slow for the SmartNIC's default delay model and for
        # senders as Linux configures them (see NIC_MAX_DELAY_US).
        self.slow_motion = self.target == "bmv2"
        self.nic_options = tuple(nic_options)  # extra jumbogate-nic options (after the defaults)
        self.verbose = verbose
        self.began = False  # up() got past its checks; down() has something to end
        self.net: Mininet | None = None
        self.nic_process: subprocess.Popen | None = None
        self.controller_process: subprocess.Popen | None = None
        self.etcd_process: subprocess.Popen | None = None

    # ----- access -----

    def host(self, name: str) -> Host:
        assert self.net is not None, "the rack is not up"
        return self.net.get(name)

    @property
    def switch(self) -> Switch:
        return self.host(plan.SWITCH)

    def ctl_argv(self, *args: str, json_output: bool = False) -> list[str]:
        """The jumbogatectl command line for the emulation's controller."""
        tls = self.tls.ctl_args() if self.tls else []
        return [str(JUMBOGATECTL), "--controller", plan.CONTROLLER_ADDRESS, *tls] + (["--json"] if json_output else []) + list(args)

    def ctl(self, *args: str, json_output: bool = False, check: bool = True, timeout: float = 20.0) -> subprocess.CompletedProcess:
        """Run jumbogatectl against the emulation's controller."""
        return subprocess.run(self.ctl_argv(*args, json_output=json_output), capture_output=True, text=True, check=check, timeout=timeout)

    # ----- up -----

    def up(self) -> None:
        claim_the_machine(self.verbose)
        self.began = True
        begin_run(self.fixed_addresses())
        self._write_config()
        self.net = self._build()
        self.net.build()
        self._record_namespaces()
        self._configure_links()
        self._configure_hosts()
        # Starts the switch (its start() waits for its gRPC server) and the bridge.
        self.net.start()
        if self.parts.nic:
            self._start_nic()
        if self.parts.controller:
            self._start_store()
            self._start_controller()
            self.wait_forwarding()

    def _build(self) -> Mininet:
        net = Mininet(controller=None, build=False, autoSetMacs=False, autoStaticArp=False)
        if self.parts.switch and self.target == "bmv2":
            border = net.addSwitch(
                plan.SWITCH,
                cls=Bmv2Switch,
                dpid="1",
                grpc_address=plan.P4RUNTIME_ADDRESS,
                thrift_port=plan.THRIFT_PORT,
                device_id=plan.DEVICE_ID,
                cpu_port=plan.CPU_PORT,
                tls=self.tls,
            )
        elif self.parts.switch:
            border = net.addSwitch(
                plan.SWITCH,
                cls=SoftSwitch,
                dpid="1",
                grpc_address=plan.P4RUNTIME_ADDRESS,
                device_id=plan.DEVICE_ID,
                cpu_port=plan.CPU_PORT,
                file_prefix=plan.SWITCH_FILE_PREFIX,
                tls=self.tls,
            )
        else:
            border = net.addSwitch(plan.SWITCH, cls=PassiveSwitch, dpid="1")
        lan = net.addSwitch(plan.BRIDGE, cls=QuietBridge, dpid="2")
        for port in plan.SWITCH_PORTS:
            peer = net.addHost(port.peer, ip=None)
            net.addLink(border, peer, port1=port.number, port2=0, addr1=port.mac, addr2=port.peer_mac)
        for number, router in enumerate(plan.ROUTERS, start=1):
            net.addLink(net.get(router.host), lan, port1=1, port2=number)
        for number, ext in enumerate(plan.EXTERNAL_HOSTS, start=len(plan.ROUTERS) + 1):
            net.addLink(net.addHost(ext.host, ip=None), lan, port1=0, port2=number, addr1=ext.mac)
        mgmt = net.addHost(plan.MGMT_NODE, ip=None, inNamespace=False)
        net.addLink(net.get(plan.NIC_HOST), mgmt, port1=1, port2=0)
        return net

    def _record_namespaces(self) -> None:
        namespaces = {h.name: cleanup.netns_of(h.pid) for h in self.net.hosts if h.inNamespace}
        procs.update_state(namespaces=namespaces)

    def _configure_links(self) -> None:
        """MTUs and offloads on both ends of every link, the switch's and bridge's ends in the root namespace."""
        root = self.host(plan.MGMT_NODE)
        for port in plan.SWITCH_PORTS:
            set_link(root, port.intf, plan.MTU_SWITCH_SIDE, ipv6=False)
            set_link(self.host(port.peer), port.peer_intf, port.mtu)
        for node in [r.host for r in plan.ROUTERS] + [e.host for e in plan.EXTERNAL_HOSTS]:
            for intf in self.host(node).intfList():
                if intf.link is not None and plan.BRIDGE in (intf.link.intf1.node.name, intf.link.intf2.node.name):
                    set_link(self.host(node), intf.name, plan.MTU_EXTERNAL)
                    other = intf.link.intf2 if intf.link.intf1 is intf else intf.link.intf1
                    set_link(root, other.name, plan.MTU_EXTERNAL, ipv6=False)
        set_link(self.host(plan.NIC_HOST), f"{plan.NIC_HOST}-eth1", plan.MTU_EXTERNAL)
        set_link(root, f"{plan.MGMT_NODE}-eth0", plan.MTU_EXTERNAL)

    def _configure_hosts(self) -> None:
        for router in plan.ROUTERS:
            configure_router(self.host(router.host), router)
        for ext in plan.EXTERNAL_HOSTS:
            configure_external(self.host(ext.host), ext, fast_sender_trains=self.slow_motion)
        for instance in plan.INSTANCES:
            configure_instance(self.host(instance.host), instance)
        self._pin_lan_neighbours()
        nic = self.host(plan.NIC_HOST)
        host_sysctls(nic)
        # The SmartNIC's data port carries no IP of its own: DPDK reads it raw.
        nic.cmd(f"ip addr flush dev {plan.NIC_INTF}; sysctl -qw net.ipv6.conf.{plan.NIC_INTF}.disable_ipv6=1")
        add_addresses(nic, f"{plan.NIC_HOST}-eth1", plan.MGMT_NIC)
        add_addresses(self.host(plan.MGMT_NODE), f"{plan.MGMT_NODE}-eth0", plan.MGMT_ROOT)

    def _pin_lan_neighbours(self) -> None:
        """Permanent neighbour entries between the routers and the external hosts on extlan.

        Measured on BMv2 runs: IPv6 neighbour discovery across the Linux bridge
        failed intermittently (the routers' entries for the external hosts went
        FAILED, so replies from the rack were answered with 'address
        unreachable'). The LAN is static; nothing needs discovering on it.
        """
        for router in plan.ROUTERS:
            node = self.host(router.host)
            router_mac = node.intf(f"{router.host}-eth1").MAC()
            for ext in plan.EXTERNAL_HOSTS:
                permanent_neighbour(node, f"{router.host}-eth1", ext.address, ext.mac)
                permanent_neighbour(self.host(ext.host), f"{ext.host}-eth0", router.lan, router_mac)

    # ----- processes -----

    def nic_command(self) -> list[str]:
        eal = [
            "--no-huge",
            "--no-pci",
            "-m",
            "512",
            f"--file-prefix={plan.NIC_FILE_PREFIX}",
            f"--vdev=net_af_packet0,iface={plan.NIC_INTF},blocksz=12288,framesz=12288,framecnt=2048",
        ]
        # Inbound and outbound both arrive on the one NIC port; the program
        # tells them apart by whether the destination is inside the rack.
        options = [
            "--grpc",
            plan.NIC_CONTROL_ADDRESS,
            "--port-mtu",
            str(plan.MTU_UNDERLAY),
            "--internal-prefix",
            plan.RACK_PREFIX.v4,
            "--internal-prefix",
            plan.RACK_PREFIX.v6,
        ]
        if self.slow_motion:
            # BMv2 carries a few thousand packets a second, so a flow's next
            # segment is hundreds of microseconds to milliseconds away: far
            # below the 0.1 Gbit/s under which flows merge only within one
            # receive burst, and beyond the 300 us a line-rate port waits.
            # Every flow may wait, up to 8 ms.
            options += ["--delay-rate-threshold-gbps", "0", "--delay-max-us", str(NIC_MAX_DELAY_US)]
        # Its control address is on the management link, not loopback:
        # plaintext there needs --insecure (only the controller's namespace
        # reaches that link here).
        options += self.tls.server("smartnic").soft_args() if self.tls else ["--insecure"]
        return [str(NIC_BINARY), *eal, "--", *options, *self.nic_options]

    def start_nic(self) -> None:
        """(Re)start jumbogate-nic; the controller notices and configures it."""
        self._start_nic()

    def wait_nic_down(self, timeout: float = 10.0) -> None:
        """Until the controller reports the SmartNIC unreachable (it then steers nothing to it)."""

        def down() -> bool:
            done = self.ctl("stats", json_output=True, check=False)
            return done.returncode == 0 and not json.loads(done.stdout).get("nic", {}).get("reachable", False)

        procs.wait_until("the controller to see the SmartNIC down", down, timeout=timeout, proc=self.controller_process, role="controller")

    def start_controller(self) -> None:
        """(Re)start jumbogate-controller and wait until it serves."""
        self._start_controller()

    def _start_nic(self) -> None:
        nic = self.host(plan.NIC_HOST)
        marker = f"--file-prefix={plan.NIC_FILE_PREFIX}"
        self.nic_process = procs.start_grpc_service(
            "nic",
            "jumbogate-nic",
            self.nic_command(),
            marker,
            plan.NIC_CONTROL_ADDRESS,
            timeout=NIC_START_TIMEOUT_S,
            popen=nic.popen,
            credentials=self.tls.credentials() if self.tls else None,
        )

    def _start_store(self) -> None:
        """The policy's store: a single-member etcd of the emulation's own, empty, so that the controller seeds it from its file."""
        shutil.rmtree(ETCD_DATA, ignore_errors=True)
        client_url = f"http://{plan.ETCD_CLIENT_ADDRESS}"
        argv = etcd_argv("jumbogate-emulation", ETCD_DATA, client_url, f"http://{plan.ETCD_PEER_ADDRESS}")
        self.etcd_process = procs.start_process("etcd", argv, plan.ETCD_CLIENT_ADDRESS)
        procs.wait_until(
            "etcd to answer",
            lambda: etcdctl(client_url, "endpoint", "health").returncode == 0,
            timeout=ETCD_START_TIMEOUT_S,
            proc=self.etcd_process,
            role="etcd",
        )

    def _start_controller(self) -> None:
        config = self.config_path.relative_to(procs.REPO) if self.config_path.is_relative_to(procs.REPO) else self.config_path
        argv = [str(CONTROLLER), "--config", str(config), "--pipeline", str(PIPELINE.relative_to(procs.REPO))]
        argv += ["--store", f"etcd://{plan.ETCD_CLIENT_ADDRESS}"]
        self.controller_process = procs.start_grpc_service(
            "controller",
            "jumbogate-controller operator API",
            argv,
            str(config),
            plan.CONTROLLER_ADDRESS,
            timeout=CONTROLLER_START_TIMEOUT_S,
            credentials=self.tls.credentials("viewer") if self.tls else None,
        )

    def wait_forwarding(self) -> None:
        """Until every external host reaches every instance over IPv4 and IPv6 (the switch is programmed)."""
        pairs = [(ext.host, inst.address.ip4) for ext in plan.EXTERNAL_HOSTS for inst in plan.INSTANCES]
        pairs += [(ext.host, inst.address.ip6) for ext in plan.EXTERNAL_HOSTS for inst in plan.INSTANCES]
        wait_reachable(self, pairs, "forwarding through the border", FORWARDING_TIMEOUT_S, proc=self.controller_process, role="controller")

    # ----- down -----

    def _write_config(self) -> None:
        """The config the controller reads: mininet/rack.yaml, with the overrides and the TLS section when asked."""
        overrides = dict(self.config_overrides)
        if self.tls_on:
            self.tls = RackTls.make()
            overrides["tls"] = self.tls.config_section()
        if overrides:
            self.config_path = overridden_config(overrides, self.workdir or Path(tempfile.mkdtemp(prefix="jumbogate-rack-")))

    def fixed_addresses(self) -> dict[str, str]:
        """The root namespace's TCP addresses the parts of this rack listen on (the SmartNIC's is in its own namespace)."""
        addresses = {}
        if self.parts.switch:
            addresses["the switch's P4Runtime"] = plan.P4RUNTIME_ADDRESS
            if self.target == "bmv2":
                addresses["BMv2's thrift"] = f"127.0.0.1:{plan.THRIFT_PORT}"
        if self.parts.controller:
            addresses["the controller's operator API"] = plan.CONTROLLER_ADDRESS
            addresses["etcd's client URL"] = plan.ETCD_CLIENT_ADDRESS
            addresses["etcd's peer URL"] = plan.ETCD_PEER_ADDRESS
        return addresses

    def stop_processes(self) -> None:
        procs.stop_process(self.controller_process)
        procs.stop_process(self.nic_process)
        # After the controller: a clean stop revokes its election lease in etcd.
        procs.stop_process(self.etcd_process)
        if self.etcd_process is not None:
            shutil.rmtree(ETCD_DATA, ignore_errors=True)


def wait_reachable(emulation, pairs: list[tuple[str, str]], what: str, timeout: float, *, proc: subprocess.Popen | None = None, role: str = "") -> None:
    """Until every (host, address) pair answers a ping; each round pings only those that have not yet."""
    pending = list(pairs)

    def reached() -> bool:
        pending[:] = [(src, dst) for src, dst in pending if emulation.host(src).cmd(f"ping -c1 -W1 {dst} >/dev/null 2>&1; echo $?").strip() != "0"]
        return not pending

    procs.wait_until(what, reached, timeout=timeout, proc=proc, role=role)


# ----- host configuration, shared by every kind of node -----


def set_link(node: Host, intf: str, mtu: int, *, ipv6: bool = True) -> None:
    node.cmd(f"ip link set {intf} mtu {mtu}")
    node.cmd(f"ethtool -K {intf} {' '.join(f'{o} off' for o in OFFLOADS_OFF)} >/dev/null 2>&1")
    if not ipv6:
        # The switch's and bridge's ends carry no addresses: without IPv6 the
        # root namespace does not send router solicitations and MLD reports into the rack.
        node.cmd(f"sysctl -qw net.ipv6.conf.{intf}.disable_ipv6=1")


def host_sysctls(node: Host, *, forwarding: bool = False) -> None:
    settings = {
        # Addresses are static: no duplicate address detection delaying them, no autoconfiguration.
        "net.ipv6.conf.all.accept_dad": 0,
        "net.ipv6.conf.default.accept_dad": 0,
        "net.ipv6.conf.all.accept_ra": 0,
        "net.ipv6.conf.default.accept_ra": 0,
        "net.ipv4.conf.all.rp_filter": 0,
        "net.ipv4.conf.default.rp_filter": 0,
        "net.ipv4.ip_forward": int(forwarding),
        "net.ipv6.conf.all.forwarding": int(forwarding),
        # Hash multipath routes on the 5-tuple, as the switch's ECMP does.
        "net.ipv4.fib_multipath_hash_policy": 1,
        "net.ipv6.fib_multipath_hash_policy": 1,
    }
    node.cmd("; ".join(f"sysctl -qw {key}={value}" for key, value in settings.items()))


def instance_behind_switch(node: Host, intf: str, mtu: int, addresses: list[tuple[str, str]], gateways: tuple[str, str], gateway_mac: str) -> None:
    """An instance of a rack (the multi-rack topologies): its (IPv4, IPv6) addresses in a /24 and a /64, and its
    default routes through the switch's port, whose MAC is pinned (the switch answers no neighbour discovery)."""
    host_sysctls(node)
    set_link(node, intf, mtu)
    for a4, a6 in addresses:
        node.cmd(f"ip addr add {a4}/24 dev {intf}; ip -6 addr add {a6}/64 dev {intf} nodad")
    gateway4, gateway6 = gateways
    node.cmd(f"ip neigh replace {gateway4} lladdr {gateway_mac} dev {intf} nud permanent")
    node.cmd(f"ip -6 neigh replace {gateway6} lladdr {gateway_mac} dev {intf} nud permanent")
    node.cmd(f"ip route add default via {gateway4}; ip -6 route add default via {gateway6}")


def add_addresses(node: Host, intf: str, address: plan.Address) -> None:
    node.cmd(f"ip addr flush dev {intf}")
    node.cmd(f"ip addr add {address.v4} dev {intf}")
    node.cmd(f"ip -6 addr add {address.v6} dev {intf} nodad")


def permanent_neighbour(node: Host, intf: str, address: plan.Address, mac: str) -> None:
    node.cmd(f"ip neigh replace {address.ip4} lladdr {mac} dev {intf} nud permanent")
    node.cmd(f"ip -6 neigh replace {address.ip6} lladdr {mac} dev {intf} nud permanent")


def configure_router(node: Host, router: plan.Router) -> None:
    host_sysctls(node, forwarding=True)
    uplink, lan = f"{router.host}-eth0", f"{router.host}-eth1"
    add_addresses(node, uplink, router.uplink)
    add_addresses(node, lan, router.lan)
    permanent_neighbour(node, uplink, router.border, router.port.mac)
    node.cmd(f"ip route add {plan.RACK_PREFIX.v4} via {router.border.ip4} dev {uplink}")
    node.cmd(f"ip -6 route add {plan.RACK_PREFIX.v6} via {router.border.ip6} dev {uplink}")


def configure_external(node: Host, ext: plan.ExternalHost, *, fast_sender_trains: bool) -> None:
    host_sysctls(node)
    intf = f"{ext.host}-eth0"
    add_addresses(node, intf, ext.address)
    routers = " ".join(f"nexthop via {r.lan.ip4} dev {intf}" for r in plan.ROUTERS)
    routers6 = " ".join(f"nexthop via {r.lan.ip6} dev {intf}" for r in plan.ROUTERS)
    if not fast_sender_trains:
        # Both routers, hashed per flow: inbound traffic uses both uplinks too.
        node.cmd(f"ip route add default {routers}")
        node.cmd(f"ip -6 route add default {routers6}")
        return
    # A Linux sender sends one GSO packet per ~1 ms of its pacing rate, with
    # PSH on its last segment and one timestamp, and a merge ends there as
    # Linux GRO's does. At the emulation's few Mbit/s per flow that is 2-4
    # segments; on the Internet links the border is built for it is 64 KB.
    # External hosts send GSO packets of 44 segments at least, and start (and
    # never shrink below) a congestion window that lets a 64 KB write leave
    # as one burst, as fast senders do (docs/emulation.md, "slow motion").
    node.cmd(f"sysctl -qw net.ipv4.tcp_min_tso_segs={SENDER_MIN_TSO_SEGS}")
    window = f"initcwnd {SENDER_INITIAL_WINDOW}"
    node.cmd(f"ip route add default {window} {routers}")
    node.cmd(f"ip -6 route add default {window} {routers6}")


def configure_instance(node: Host, instance: plan.Instance) -> None:
    host_sysctls(node)
    intf = f"{instance.host}-eth0"
    add_addresses(node, intf, instance.address)
    permanent_neighbour(node, intf, instance.gateway, plan.switch_port(instance.host).mac)
    node.cmd(f"ip route add default via {instance.gateway.ip4} dev {intf}")
    node.cmd(f"ip -6 route add default via {instance.gateway.ip6} dev {intf}")


def overridden_config(overrides: dict, workdir: Path) -> Path:
    """mininet/rack.yaml with some keys of its sections replaced, written to workdir/mininet/rack.yaml
    (the path keeps the fragment cleanup sweeps leftover controllers by)."""
    import yaml

    config = yaml.safe_load(RACK_CONFIG.read_text())
    for section, values in overrides.items():
        config.setdefault(section, {}).update(values)
    path = workdir / "mininet" / "rack.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path
