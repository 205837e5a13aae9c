"""`make value` on one rack: a real NF behind the border, and receivers (#38, items 1 and 3).

Both compare the same traffic with the border merging (deliveries of up to
8500 bytes to the jumbo instance) against the border passing it (1500-byte
deliveries to the 1500 instance, or the same instance without the merge
path), in one run on one rack, with the part under test held to one CPU
(cpu.py says how, and how its time is read).

1. The NF: each instance host becomes a Linux router running nftables
   with conntrack, destination NAT of its public address to an application
   host behind it (`nfapp1` behind jumbo1 at MTU 8500, `nfapp2` behind
   legacy1 at 1500), source NAT (masquerade) towards it, and a stateful
   forward filter. External hosts send TCP to the instance's public address;
   the NF's forwarding is its softirq time on the measured CPU.

2. Receivers: the instance itself receives, its receive processing and the
   receiving process (iperf3) on the measured CPU, with GRO off (a receiver
   without offloads) and on; 8500-byte deliveries (jumbo1) against 1500
   (legacy1).

3. UDP: a receiver that unpacks caravans (caravan_udp.py) on the jumbo
   instance, on the measured CPU, fed by the same sender through the
   merge path (the flow onloaded with `jumbogatectl flows onload --proto
   udp`; the SmartNIC run with --caravan-pack on) and past it (plain
   datagrams). Should the controller refuse the onload, the report says
   why.

The goodput through the rack is the border's (about 1 Gbit/s on two cores),
far below what one CPU forwards or receives, so each run reports the CPU it
spent per gigabyte and, from it, the goodput one whole CPU would carry at
that cost.
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from dataclasses import asdict, dataclass, field

from . import cleanup, cpu, measure, plan, procs
from .rack import Rack, host_sysctls, set_link

MEASURED_CPU = 1  # the NF's (or receiver's) CPU; everything else is steered to the other
NF_PORTS = (5201, 5205)  # merge services of jumbo1 (rack.yaml) that the NF translates
RECEIVER_PORT = 5206  # a merge service the NF leaves alone: the instance itself receives
UDP_PORT = 6000
UDP_SPORTS = {"caravans": 40000, "datagrams": 40001}
UDP_SIZE = 1400
UDP_BURST = 16
UDP_MBIT_S = 400.0
STREAMS = 2
GB = 1e9


@dataclass(frozen=True)
class Nf:
    """An instance host turned router, and the application host behind it."""

    router: str
    app: str
    subnet: str  # the /24 between them; .1 the router, .2 the application
    mtu: int
    merging: bool

    @property
    def outer(self) -> str:
        return f"{self.router}-eth0"

    @property
    def inner(self) -> str:
        return f"{self.router}-eth1"

    @property
    def app_intf(self) -> str:
        return f"{self.app}-eth0"

    @property
    def router_inner_ip(self) -> str:
        return f"{self.subnet}.1"

    @property
    def app_ip(self) -> str:
        return f"{self.subnet}.2"

    @property
    def public_ip(self) -> str:
        return next(i for i in plan.INSTANCES if i.host == self.router).address.ip4


NFS = (
    Nf(plan.JUMBO.host, plan.NF_APPS[0], "192.168.31", plan.MTU_JUMBO_GUEST, True),
    Nf(plan.LEGACY.host, plan.NF_APPS[1], "192.168.32", plan.MTU_EXTERNAL, False),
)


@dataclass
class Cost:
    """One run: what was carried, in how many packets, for how much CPU on the measured CPU."""

    label: str
    seconds: float = 0.0
    goodput_bytes: int = 0
    packets: int = 0  # data-direction packets at the measured part's receiving interface
    packet_bytes: int = 0
    softirq_s: float = 0.0  # background subtracted
    process_s: float = 0.0  # the receiving process, when it is on the measured CPU
    retransmits: int = 0
    extra: dict = field(default_factory=dict)

    @property
    def goodput_mbps(self) -> float:
        return 8 * self.goodput_bytes / self.seconds / 1e6 if self.seconds else 0.0

    @property
    def cpu_s(self) -> float:
        return max(self.softirq_s, 0.0) + self.process_s

    @property
    def cpu_s_per_gb(self) -> float:
        return self.cpu_s / (self.goodput_bytes / GB) if self.goodput_bytes else 0.0

    @property
    def packets_per_gb(self) -> float:
        return self.packets / (self.goodput_bytes / GB) if self.goodput_bytes else 0.0

    @property
    def mean_packet(self) -> float:
        return self.packet_bytes / self.packets if self.packets else 0.0

    @property
    def cpu_share(self) -> float:
        return self.cpu_s / self.seconds if self.seconds else 0.0

    @property
    def one_cpu_gbps(self) -> float:
        """The goodput one whole CPU would carry at this run's cost per gigabyte."""
        return 8 / self.cpu_s_per_gb if self.cpu_s_per_gb else 0.0


def ratio(passing: Cost, merging: Cost, attr: str) -> float:
    a, b = getattr(passing, attr), getattr(merging, attr)
    return a / b if b else 0.0


# ----- setting the rack up for these measurements -----


def add_nf(rack: Rack, nf: Nf) -> None:
    """The application host behind the router, the link between them, and the router's ruleset."""
    router = rack.host(nf.router)
    app = rack.net.addHost(nf.app, ip=None)
    rack.net.addLink(router, app, port1=1, port2=0)
    # Recorded with the rack's namespaces: a crash's sweep ends what runs in it.
    procs.update_state(namespaces={nf.app: cleanup.netns_of(app.pid)})
    host_sysctls(app)
    app.cmd("ip link set lo up")
    set_link(router, nf.inner, nf.mtu)
    set_link(app, nf.app_intf, nf.mtu)
    router.cmd(f"ip addr add {nf.router_inner_ip}/24 dev {nf.inner}; sysctl -qw net.ipv4.ip_forward=1")
    app.cmd(f"ip addr add {nf.app_ip}/24 dev {nf.app_intf}; ip route add default via {nf.router_inner_ip}")
    low, high = NF_PORTS
    ruleset = f"""
table ip jumbogate_nf {{
    chain prerouting {{
        type nat hook prerouting priority dstnat; policy accept;
        iifname "{nf.outer}" tcp dport {low}-{high} counter dnat to {nf.app_ip}
    }}
    chain postrouting {{
        type nat hook postrouting priority srcnat; policy accept;
        oifname "{nf.inner}" counter masquerade
    }}
    chain forward {{
        type filter hook forward priority filter; policy drop;
        ct state invalid counter drop
        ct state established,related counter accept
        ct state new iifname "{nf.outer}" oifname "{nf.inner}" tcp dport {low}-{high} counter accept
    }}
}}
"""
    # Through a file: the node's shell is interactive, and a here-document would wait at its prompt.
    with tempfile.NamedTemporaryFile("w", suffix=".nft", delete=False) as f:
        f.write(ruleset)
    out = router.cmd(f"nft -f {f.name}; echo rc=$?")
    os.unlink(f.name)
    if "rc=0" not in out:
        raise RuntimeError(f"{nf.router}: nftables refused the NF's ruleset: {out.strip()}")


def prepare(rack: Rack) -> None:
    """The NFs, and every interface steered away from the measured CPU but those of the part under test."""
    for nf in NFS:
        add_nf(rack, nf)
    measured = {nf.outer for nf in NFS} | {nf.inner for nf in NFS}
    cpu.steer_everything(rack.net, 1 - MEASURED_CPU, exclude=measured)
    for nf in NFS:
        cpu.steer(rack.host(nf.router), nf.outer, MEASURED_CPU)
        cpu.steer(rack.host(nf.router), nf.inner, MEASURED_CPU)


def pinned(cpu_number: int, argv: list[str]) -> list[str]:
    return ["taskset", "-c", str(cpu_number), *argv]


def iperf_argv(address: str, port: int, seconds: float) -> list[str]:
    return ["iperf3", "-c", address, "-p", str(port), "-t", str(seconds), "-P", str(STREAMS), "-J", "--connect-timeout", "3000"]


def start_pinned_iperf_server(node, port: int, cpu_number: int):
    proc = node.popen(pinned(cpu_number, ["iperf3", "-s", "-p", str(port)]), stdout=open("/dev/null", "wb"), stderr=open("/dev/null", "wb"))  # noqa: SIM115 - the child owns them
    measure.wait_listening(node, (port,))
    return proc


def run_tcp(
    rack: Rack,
    server_host: str,
    address: str,
    port: int,
    seconds: float,
    *,
    receiving: tuple[str, str],
    server_cpu: int,
    label: str,
    process_counted: bool,
    background: float,
    during=None,
) -> Cost:
    """One iperf3 run from ext1: receiving = (host, interface) whose rx counts the data packets."""
    server = start_pinned_iperf_server(rack.host(server_host), port, server_cpu)
    sender = rack.host(plan.EXTERNAL_HOSTS[0].host)
    node, intf = receiving
    try:
        before = measure.counters(rack.host(node), intf)
        cpu_before, proc_before = cpu.cpu_times(MEASURED_CPU), cpu.process_seconds(server.pid)
        started = time.monotonic()
        client = sender.popen(pinned(1 - MEASURED_CPU, iperf_argv(address, port, seconds)))
        extra = {}
        if during is not None:
            time.sleep(seconds / 2)
            extra = during()
        result = measure.iperf_result(client, timeout=seconds + 30)
        elapsed = time.monotonic() - started
        cpu_after, proc_after = cpu.cpu_times(MEASURED_CPU), cpu.process_seconds(server.pid)
        delta = measure.counters(rack.host(node), intf) - before
    finally:
        server.terminate()
        server.wait(10)
    return Cost(
        label,
        seconds=result.seconds,
        goodput_bytes=result.bytes_received,
        packets=delta.rx_packets,
        packet_bytes=delta.rx_bytes,
        softirq_s=(cpu_after - cpu_before).softirq - background * elapsed,
        process_s=(proc_after - proc_before) if process_counted else 0.0,
        retransmits=result.retransmits,
        extra=extra,
    )


# ----- the measurements -----


def nf_runs(rack: Rack, seconds: float, background: float) -> list[Cost]:
    runs = []
    for nf in NFS:
        app = rack.host(nf.app)

        def during(nf=nf, app=app) -> dict:
            lines = app.cmd(f"ss -Htn state established '( sport = :{NF_PORTS[0]} )'").splitlines()
            # iperf3 listens on both families: IPv4 peers show as [::ffff:a.b.c.d]:port.
            peers = {line.split()[-1].rsplit(":", 1)[0].strip("[]").removeprefix("::ffff:") for line in lines if line.strip()}
            return {"app_saw_sources": sorted(peers)}

        cost = run_tcp(
            rack,
            nf.app,
            nf.public_ip,
            NF_PORTS[0],
            seconds,
            receiving=(nf.router, nf.outer),
            server_cpu=1 - MEASURED_CPU,
            label="merging to 8500" if nf.merging else "passing (1500)",
            process_counted=False,
            background=background,
            during=during,
        )
        router = rack.host(nf.router)
        cost.extra["conntrack_entries"] = int(router.cmd("cat /proc/sys/net/netfilter/nf_conntrack_count").strip() or 0)
        cost.extra["dnat_packets"] = nat_counter(router, "prerouting")
        cost.extra["invalid_dropped"] = nat_counter(router, "forward")  # its first rule counts what conntrack found invalid
        cost.extra["inner_mtu"] = nf.mtu
        runs.append(cost)
    return runs


def nat_counter(router, chain: str) -> int:
    """Packets counted by the NF's rule in a chain (for NAT chains: connections translated, each seen once)."""
    data = json.loads(router.cmd(f"nft -j list chain ip jumbogate_nf {chain}") or "{}")
    for item in data.get("nftables", []):
        for expr in item.get("rule", {}).get("expr", []):
            if "counter" in expr:
                return int(expr["counter"]["packets"])
    return 0


def receiver_runs(rack: Rack, seconds: float, background: float) -> list[Cost]:
    runs = []
    for gro in (False, True):
        for instance in (plan.JUMBO, plan.LEGACY):
            node, intf = instance.host, f"{instance.host}-eth0"
            cpu.set_gro(rack.host(node), intf, gro)
            label = f"{'8500' if instance.jumbo else '1500'} deliveries, GRO {'on' if gro else 'off'}"
            try:
                cost = run_tcp(
                    rack,
                    node,
                    instance.address.ip4,
                    RECEIVER_PORT,
                    seconds,
                    receiving=(node, intf),
                    server_cpu=MEASURED_CPU,
                    label=label,
                    process_counted=True,
                    background=background,
                )
            finally:
                cpu.set_gro(rack.host(node), intf, False)
            cost.extra.update(gro=gro, mtu=instance.mtu)
            runs.append(cost)
    return runs


def udp_runs(rack: Rack, seconds: float, background: float) -> tuple[list[Cost], str]:
    """The same UDP sender, its flow onloaded (caravans) and not (datagrams), to the unpacking receiver on jumbo1;
    and why the caravan run could not be made, if it could not."""
    instance, ext = plan.JUMBO, plan.EXTERNAL_HOSTS[0]
    node, intf = rack.host(instance.host), f"{instance.host}-eth0"
    sender = rack.host(ext.host)
    runs = []
    for label, sport in UDP_SPORTS.items():
        if label == "caravans":
            done = rack.ctl(
                "flows", "onload", f"{ext.address.ip4}:{sport}", f"{instance.address.ip4}:{UDP_PORT}", "--proto", "udp", "--idle", "60", check=False
            )
            if done.returncode:
                # Refused (a rack whose instance is not jumbo, say): no caravans to measure.
                return runs, (done.stderr or done.stdout).strip()
        receiver = node.popen(pinned(MEASURED_CPU, measure.module_command("caravan_udp", "receive", UDP_PORT, seconds + 3)), env=measure.MODULE_ENV)
        line = receiver.stdout.readline()
        if b"listening" not in line:
            raise RuntimeError(f"the caravan receiver did not start: {line!r}")
        before = measure.counters(node, intf)
        cpu_before, proc_before = cpu.cpu_times(MEASURED_CPU), cpu.process_seconds(receiver.pid)
        started = time.monotonic()
        argv = measure.module_command("caravan_udp", "send", instance.address.ip4, UDP_PORT, sport, seconds, UDP_MBIT_S, UDP_SIZE, UDP_BURST)
        sent = json.loads(sender.popen(pinned(1 - MEASURED_CPU, argv), env=measure.MODULE_ENV).communicate(timeout=seconds + 30)[0])
        time.sleep(0.5)
        elapsed = time.monotonic() - started
        cpu_after, proc_after = cpu.cpu_times(MEASURED_CPU), cpu.process_seconds(receiver.pid)
        delta = measure.counters(node, intf) - before
        got = json.loads(receiver.communicate(timeout=30)[0].decode().splitlines()[-1])
        runs.append(
            Cost(
                f"UDP {label}",
                seconds=sent["seconds"],
                goodput_bytes=got["bytes"],
                packets=delta.rx_packets,
                packet_bytes=delta.rx_bytes,
                softirq_s=(cpu_after - cpu_before).softirq - background * elapsed,
                process_s=proc_after - proc_before,
                extra={"sent_bytes": sent["bytes"], "sent": sent["sent"], **got},
            )
        )
    return runs, ""


@dataclass
class RackValue:
    background_softirq: float  # seconds per second on the measured CPU without test traffic
    switch_lcores: dict
    nf: list[Cost]
    receivers: list[Cost]
    udp: list[Cost]
    udp_refused: str = ""  # why UDP could not take the merge path, when it could not


def as_json(v: RackValue) -> dict:
    """The raw numbers and, per run, the figures the report prints."""
    out = asdict(v)
    for section in ("nf", "receivers", "udp"):
        for raw, run in zip(out[section], getattr(v, section), strict=True):
            raw.update({k: getattr(run, k) for k in ("goodput_mbps", "cpu_s", "cpu_s_per_gb", "packets_per_gb", "mean_packet", "cpu_share", "one_cpu_gbps")})
    return out


def measure_all(rack: Rack, seconds: float, log=print) -> RackValue:
    prepare(rack)
    lcores = {}
    switch_process = getattr(rack.switch, "process", None)
    if switch_process is not None:
        lcores = {name: sorted(cpus) for name, cpus in cpu.thread_cpus(switch_process.pid).items() if "lcore" in name or "worker" in name}
    background = cpu.background_softirq(MEASURED_CPU)
    log(f"value: the NF behind the border, {seconds:.0f} s each way ...")
    nf = nf_runs(rack, seconds, background)
    log("value: receivers, GRO off and on ...")
    receivers = receiver_runs(rack, seconds, background)
    log("value: UDP with caravans ...")
    udp, refused = udp_runs(rack, seconds, background)
    return RackValue(background, lcores, nf, receivers, udp, refused)


# ----- report -----

PAPER = {"nf": "4.3-5.1x (Fig. 12)", "receivers": "1.3-1.6x (Fig. 13)", "udp": "1.7x (Fig. 13)"}


def _row(c: Cost) -> str:
    return (
        f"  {c.label:<26} {c.goodput_mbps:>6.0f} Mbit/s {c.packets_per_gb:>9.0f} {c.mean_packet:>6.0f} B {c.cpu_s:>6.2f} s"
        f" {c.cpu_s_per_gb:>7.2f} {100 * c.cpu_share:>5.1f}% {c.one_cpu_gbps:>7.1f} Gbit/s"
    )


HEADER = f"  {'':<26} {'goodput':>13} {'pkts/GB':>9} {'mean':>8} {'CPU':>8} {'CPU s/GB':>7} {'share':>6} {'one CPU':>14}"


def render_nf(nf: list[Cost], background: float) -> list[str]:
    lines = [
        "A real NF behind the border: nftables (conntrack, DNAT, masquerade, stateful filter) on a Linux router between the switch and the"
        f" instance; its forwarding held to CPU {MEASURED_CPU} and read as that CPU's softirq time ({background * 1000:.0f} ms/s background subtracted)",
        HEADER,
    ]
    lines += [_row(c) for c in nf]
    if len(nf) == 2:
        merging, passing = nf
        lines.append(
            f"  merging: {ratio(passing, merging, 'packets_per_gb'):.1f}x fewer packets per GB through the NF, {ratio(passing, merging, 'cpu_s_per_gb'):.1f}x less CPU per GB,"
            f" {ratio(merging, passing, 'one_cpu_gbps'):.1f}x the goodput one CPU forwards (the paper: {PAPER['nf']})"
        )
    for c in nf:
        lines.append(
            f"  NAT ({c.label}): {c.extra.get('dnat_packets', 0)} connections translated, {c.extra.get('conntrack_entries', 0)} conntrack entries,"
            f" {c.extra.get('invalid_dropped', 0)} packets dropped as invalid, the application saw the sources {', '.join(c.extra.get('app_saw_sources', [])) or '-'}"
        )
    return lines


def render_receivers(v: RackValue) -> list[str]:
    lines = [f"Receivers: the instance's receive processing and iperf3 on CPU {MEASURED_CPU} (softirq plus the process's time)", HEADER]
    lines += [_row(c) for c in v.receivers]
    for gro in (False, True):
        pair = [c for c in v.receivers if c.extra.get("gro") == gro]
        if len(pair) == 2:
            lines.append(
                f"  GRO {'on ' if gro else 'off'}: 8500-byte deliveries let one CPU receive {ratio(pair[0], pair[1], 'one_cpu_gbps'):.2f}x what 1500-byte ones do"
                f" (the paper: {PAPER['receivers']})"
            )
    lines += [f"  UDP, {UDP_SIZE}-byte datagrams in bursts of {UDP_BURST} at {UDP_MBIT_S:.0f} Mbit/s, the receiver unpacking caravans:"]
    lines += [_row(c) for c in v.udp]
    for c in v.udp:
        e = c.extra
        lines.append(
            f"    {c.label}: sent {e.get('sent', 0)} datagrams, received {e.get('packets', 0)} packets ({e.get('caravans', 0)} caravans, largest {e.get('largest', 0)} B)"
            f" carrying {e.get('messages', 0)} datagrams"
        )
    if v.udp_refused:
        lines.append(f"  no caravans: the controller refused to onload the UDP flow ({v.udp_refused})")
    if len(v.udp) == 2:
        lines.append(f"  caravans let one CPU receive {ratio(v.udp[0], v.udp[1], 'one_cpu_gbps'):.2f}x what plain datagrams do (the paper: {PAPER['udp']})")
    return lines


LEGEND = (
    "  (pkts/GB: data-direction packets at the measured interface per GB of goodput; CPU: seconds on the measured CPU; share: of the run's time;"
    " one CPU: the goodput a whole CPU would carry at this cost per GB)"
)


def render(v: RackValue) -> str:
    lines = ["1. " + line if i == 0 else line for i, line in enumerate(render_nf(v.nf, v.background_softirq))]
    lines += [""] + ["3. " + line if i == 0 else line for i, line in enumerate(render_receivers(v))]
    lines.append(LEGEND)
    if v.switch_lcores:
        lines.append(f"  the switch's lcores ran on CPUs {v.switch_lcores} (GRO on a veth runs on the CPU that sends into it)")
    return "\n".join(lines)


def nf_short(rack: Rack, seconds: float) -> tuple[list[Cost], float]:
    """The NF section alone (make demo's short form): (runs, background softirq)."""
    prepare(rack)
    background = cpu.background_softirq(MEASURED_CPU, 1.0)
    return nf_runs(rack, seconds, background), background


def plot(v: RackValue, path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(13, 3.8))
    colours = ["tab:blue", "tab:orange"]
    ax = axes[0]
    ax.bar([c.label for c in v.nf], [c.cpu_s_per_gb for c in v.nf], color=colours[: len(v.nf)])
    ax.set_ylabel("NF CPU seconds per GB")
    ax.set_title("nftables NAT behind the border")
    for i, c in enumerate(v.nf):
        ax.annotate(f"{c.packets_per_gb / 1000:.0f}k pkts/GB", (i, c.cpu_s_per_gb), ha="center", va="bottom", fontsize=8)
    ax = axes[1]
    groups = [("GRO off", False), ("GRO on", True)]
    for k, jumbo in enumerate((8500, 1500)):
        values = [next((c.one_cpu_gbps for c in v.receivers if c.extra.get("gro") == gro and c.extra.get("mtu") == jumbo), 0) for _, gro in groups]
        ax.bar([i + 0.38 * k for i in range(len(groups))], values, width=0.38, label=f"{jumbo}-byte deliveries", color=colours[k])
    ax.set_xticks([i + 0.19 for i in range(len(groups))], [g for g, _ in groups])
    ax.set_ylabel("Gbit/s one CPU receives (from CPU per GB)")
    ax.set_title("TCP receiver on one CPU")
    ax.legend(fontsize=8)
    ax = axes[2]
    if not v.udp:
        ax.text(0.5, 0.5, "no caravans through the rack:\nthe controller refused the onload", ha="center", va="center", transform=ax.transAxes)
        ax.set_xticks([])
        ax.set_yticks([])
    ax.bar([c.label.replace("UDP ", "") for c in v.udp], [c.one_cpu_gbps for c in v.udp], color=colours[: len(v.udp)])
    ax.set_ylabel("Gbit/s one CPU receives")
    ax.set_title("UDP receiver unpacking caravans")
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
