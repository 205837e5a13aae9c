"""make bench, the switch on real ports: packets per second of jumbogate-switch
through veth ports, next to a pass-through forwarder (dpdk-testpmd, io mode)
on the same ports at the same offered load, and next to BMv2 where it is
installed; then jumbogate-switch and the pass-through again on shared-memory
ports (DPDK net_memif), where no kernel copies frames.

One load generator (jumbogate-loadgen) sends 1500-byte TCP frames of 64 flows
out of one veth as fast as it takes them and counts what comes back on the
others. Each forwarder in turn owns the far ends of the same veth pairs:

    loadgen jgbh0 ── jgbs0  switch port 1 (external)
    loadgen jgbh1 ── jgbs1  switch port 2 (internal: the bypass path's way out)
    loadgen jgbh2 ── jgbs2  switch port 3 (the SmartNIC: the steering path's)

The switch is programmed over P4Runtime with the entries the controller would
write (jumbogate.p4.entries): routes, the jumbo policy, and merge_flows
entries for the steering captures' flows. The pass-through forwards port 1 to
the path's way out and does nothing else.

Why xdp: the same veth pairs, the switch's (and the pass-through's) ends
opened as AF_XDP sockets (net_af_xdp) instead of af_packet, at MTU 1500, the
most that AF_XDP carries on veth with DPDK 22.11 (testlab/portbench.py,
XDP_MTU); where the kernel opens no AF_XDP socket they are left out with one
line saying so.

Why memif too: on veth every frame crosses the kernel through af_packet,
which tops out near 0.45 M frames/s here, so the switch and the pass-through
both measure that ceiling. Over memif the generator and the forwarder share
rings in memory: what is left is the forwarder's own cost. BMv2 cannot open
memif ports; its figure stays the veth one, far below that ceiling.

    switch_ports.py [--seconds S] [--targets soft,pass,bmv2] [--ports veth,memif,xdp] [--json FILE]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import shutil
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import finsy as fy
from scapy.layers.inet import IP, TCP
from scapy.layers.inet6 import IPv6
from scapy.layers.l2 import Ether
from scapy.utils import wrpcap

from jumbogate.flow import FiveTuple
from jumbogate.p4 import entries as e
from jumbogate.p4.constants import PortRole

# The test lab (testlab/) lives at the top of the repository.
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from testlab import lab  # noqa: E402
from testlab.portbench import (  # noqa: E402
    INSTANCE,
    INSTANCE_NET,
    INTERNET,
    INTERNET_NET,
    LOADGEN,
    REPO,
    XDP_MTU,
    BenchError,
    Ports,
    Testpmd,
    port_kinds,
    print_logs,
    run_loadgen,
    veth_mtu,
    xdp_unavailable,
)

COMPILED = REPO / "p4src" / "compiled" / "depth512"
FLOWS = 64
FRAME_IP_BYTES = 1500

PORT_EXTERNAL, PORT_INTERNAL, PORT_NIC = 1, 2, 3
SWITCH_PORTS = {PORT_EXTERNAL: "jgbs0", PORT_INTERNAL: "jgbs1", PORT_NIC: "jgbs2"}
HOST_SIDE = {PORT_EXTERNAL: "jgbh0", PORT_INTERNAL: "jgbh1", PORT_NIC: "jgbh2"}
SWITCH_MAC, PEER_MAC = "00:00:00:00:e0:00", "00:00:00:00:e0:01"
# Source ports of the steered flows; bypassed flows use the ones above.
STEERED_SPORT, BYPASS_SPORT = 41000, 40000
TARGET_NAMES = {"soft": "jumbogate-switch", "pass": "pass-through (testpmd io)", "bmv2": "BMv2"}


@dataclass(frozen=True)
class BenchPath:
    name: str
    ip_version: int
    steered: bool

    @property
    def out_port(self) -> int:
        return PORT_NIC if self.steered else PORT_INTERNAL

    def flows(self) -> list[FiveTuple]:
        first = STEERED_SPORT if self.steered else BYPASS_SPORT
        return [FiveTuple(INTERNET[self.ip_version], INSTANCE[self.ip_version], first + i, 443) for i in range(FLOWS)]

    def frames(self) -> list:
        frames = []
        for flow in self.flows():
            ip = (IP if self.ip_version == 4 else IPv6)(src=str(flow.src_ip), dst=str(flow.dst_ip))
            header = Ether(src=PEER_MAC, dst=SWITCH_MAC) / ip / TCP(sport=flow.src_port, dport=flow.dst_port, flags="A")
            pad = FRAME_IP_BYTES - (len(header) - 14)
            frames.append(Ether(bytes(header / (b"\x00" * pad))))
        return frames


PATHS = (
    BenchPath("bypass-ipv4", 4, False),
    BenchPath("bypass-ipv6", 6, False),
    BenchPath("steering-ipv4", 4, True),
    BenchPath("steering-ipv6", 6, True),
)


def switch_entries() -> list:
    """What the controller would write for this rack of three ports."""
    writes = [e.port_role(PORT_EXTERNAL, PortRole.EXTERNAL), e.port_role(PORT_INTERNAL, PortRole.INTERNAL), e.port_role(PORT_NIC, PortRole.NIC)]
    writes += [
        e.ecmp_group(1, [e.NextHop(PORT_EXTERNAL, SWITCH_MAC, PEER_MAC)]),
        e.ecmp_group(2, [e.NextHop(PORT_INTERNAL, SWITCH_MAC, PEER_MAC)]),
    ]
    for version in (4, 6):
        writes += [e.route(INTERNET_NET[version], 1), e.route(INSTANCE_NET[version], 2), e.instance_policy(INSTANCE[version], True)]
    writes += [e.merge_flow(flow) for path in PATHS if path.steered for flow in path.flows()]
    return writes


async def program(address: str) -> None:
    # finsy warns once per connection that the switch serves no gNMI.
    logging.getLogger("finsy").setLevel(logging.ERROR)
    options = fy.SwitchOptions(p4info=COMPILED / "jumbogate.p4info.txtpb", p4blob=COMPILED / "jumbogate.json", p4force=True, device_id=1)
    async with fy.Switch("bench", address, options) as switch:
        await switch.modify([e.nic_port(PORT_NIC), e.fleet_flag(True)])
        await switch.insert(switch_entries())


def result_of(ports: Ports, path: BenchPath, counts: dict) -> dict:
    seconds = counts["seconds"]
    received = {str(ports.port_of(name)): value["packets"] for name, value in counts["received"].items()}
    forwarded = received[str(path.out_port)]
    return {
        "offered_pps": counts["sent"] / seconds,
        "forwarded_pps": forwarded / seconds,
        "received": received,
        "sent": counts["sent"],
    }


def make_forwarder(target: str, ports: Ports, log: Path) -> lab.SoftSwitch | lab.Bmv2:
    if ports.kind == "veth":
        return lab.make_switch(target, SWITCH_PORTS, log)
    if target != "soft":
        raise BenchError(f"{TARGET_NAMES[target]} cannot open {ports.kind} ports")
    devices = {port: f"{ports.driver}_sw{port}" for port in SWITCH_PORTS}
    # AF_XDP's frames are at most XDP_MTU: the switch's ports say so.
    options = ("--port-mtu", str(XDP_MTU)) if ports.kind == "xdp" else ()
    return lab.SoftSwitch({}, log, devices=devices, vdevs=tuple(ports.forwarder_vdev(port, name) for port, name in devices.items()), options=options)


def measure(target: str, ports: Ports, seconds: float, workdir: Path) -> dict[str, dict]:
    results: dict[str, dict] = {}
    tag = f"{target}-{ports.kind}"
    if target == "pass":
        for path in PATHS:
            forwarder = Testpmd(ports, (PORT_EXTERNAL, path.out_port), workdir / f"testpmd-{ports.kind}-{path.name}.log").start()
            try:
                counts = run_loadgen(ports, workdir / f"{path.name}.pcap", seconds, workdir / f"loadgen-{tag}-{path.name}.log")
                results[path.name] = result_of(ports, path, counts)
            finally:
                forwarder.stop()
        return results
    switch = make_forwarder(target, ports, workdir / f"{tag}.log").start()
    try:
        asyncio.run(program(switch.grpc_address))
        for path in PATHS:
            counts = run_loadgen(ports, workdir / f"{path.name}.pcap", seconds, workdir / f"loadgen-{tag}-{path.name}.log")
            results[path.name] = result_of(ports, path, counts)
    finally:
        switch.stop()
    return results


def report(results: dict[str, dict[str, dict]], kind: str = "veth", bmv2: dict[str, dict] | None = None) -> str:
    """Forwarded packets per second per path and target, and the ratios.

    `bmv2`: BMv2's veth figures, set beside a memif or xdp table (BMv2 opens neither).
    """
    targets = list(results)
    ratios = [other for other in ("pass", "bmv2") if "soft" in results and other in results]
    bases = {other: results[other] for other in ratios}
    if bmv2 is not None and "soft" in results and "bmv2" not in results:
        ratios.append("bmv2")
        bases["bmv2"] = bmv2
    lines = [f"The switch on {kind} ports: 1500-byte TCP frames of {FLOWS} flows, packets per second forwarded", ""]
    lines.append(f"{'path':<15}" + "".join(f"{t:>12}" for t in targets) + "".join(f"{'soft/' + o:>12}" for o in ratios))
    for path in PATHS:
        row = f"{path.name:<15}" + "".join(f"{results[t][path.name]['forwarded_pps'] / 1e6:>10.3f} M" for t in targets)
        soft = results["soft"][path.name]["forwarded_pps"] if ratios else 0.0
        for other in ratios:
            base = bases[other][path.name]["forwarded_pps"]
            row += f"{soft / base:>11.2f}x" if base else f"{'-':>12}"
        lines.append(row)
    # The generator sends as fast as its port takes frames; what that is
    # depends on the forwarder sharing the machine, so it is given per target.
    offered = ", ".join(
        f"{t} {min(r['offered_pps'] for r in results[t].values()) / 1e6:.3f}-{max(r['offered_pps'] for r in results[t].values()) / 1e6:.3f} M" for t in targets
    )
    lines += ["", f"offered (frames/s the generator sent while each ran): {offered}"]
    lines.append("targets: " + "; ".join(f"{t} = {TARGET_NAMES[t]}" for t in targets))
    if bmv2 is not None and "bmv2" in ratios and "bmv2" not in results:
        lines.append(f"soft/bmv2 here: jumbogate-switch on {kind} against BMv2 on veth (BMv2 opens no {kind} port; veth is not what limits it)")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=2.0, help="measured seconds per path and target")
    parser.add_argument("--targets", default="soft,pass,bmv2", help="comma-separated: soft, pass, bmv2")
    parser.add_argument("--ports", default="veth,memif,xdp", help="comma-separated: veth, memif, xdp (memif and xdp: soft and pass only)")
    parser.add_argument("--json", type=Path, help="write the figures here")
    args = parser.parse_args(argv)
    targets = [t for t in args.targets.split(",") if t]
    unknown = [t for t in targets if t not in TARGET_NAMES]
    if unknown:
        parser.error(f"unknown target {', '.join(unknown)}: use {', '.join(TARGET_NAMES)}")
    kinds = port_kinds(parser, args.ports)
    if "xdp" in kinds and (why := xdp_unavailable()):
        print(f"switch ports: AF_XDP left out: {why}; veth ports stay on net_af_packet", file=sys.stderr)
        kinds.remove("xdp")
    if "bmv2" in targets and shutil.which("simple_switch_grpc") is None:
        print("switch ports: BMv2 skipped: simple_switch_grpc is not on PATH (README, 'Getting p4c and BMv2')", file=sys.stderr)
        targets.remove("bmv2")
    if not LOADGEN.exists():
        print(f"switch ports: {LOADGEN.relative_to(REPO)} is not built; run 'make setup'", file=sys.stderr)
        return 1
    results: dict[str, dict[str, dict[str, dict]]] = {kind: {} for kind in kinds}
    with tempfile.TemporaryDirectory(prefix="jgbench-") as tmp, lab.veth_pairs("jgb", len(SWITCH_PORTS)):
        workdir = Path(tmp)
        for path in PATHS:
            wrpcap(str(workdir / f"{path.name}.pcap"), path.frames())
        try:
            for kind in kinds:
                ports = Ports(kind, f"/run/jgbench-{os.getpid()}.sock", SWITCH_PORTS, HOST_SIDE, PORT_EXTERNAL)
                veths = [*SWITCH_PORTS.values(), *HOST_SIDE.values()] if kind == "xdp" else []
                with veth_mtu(veths, XDP_MTU, restore=lab.VethPair.mtu):
                    for target in targets:
                        if kind != "veth" and target == "bmv2":
                            continue
                        print(f"switch ports: {TARGET_NAMES[target]} on {kind} ...", file=sys.stderr, flush=True)
                        results[kind][target] = measure(target, ports, args.seconds, workdir)
        except (BenchError, lab.LabError) as error:
            print(f"switch ports: {error}", file=sys.stderr)
            print_logs(workdir)
            return 1
    bmv2 = results.get("veth", {}).get("bmv2")
    print("\n\n".join(report(results[kind], kind, bmv2 if kind != "veth" else None) for kind in kinds))
    if args.json:
        args.json.write_text(json.dumps({"seconds": args.seconds, "results": results}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
