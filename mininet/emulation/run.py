"""`make run`: bring up the emulated rack, say where everything listens, leave a Mininet CLI."""

from __future__ import annotations

import argparse
import os
import sys

from mininet.cli import CLI

from testlab.portbench import XDP_MTU

from . import plan, procs
from .rack import JUMBOGATECTL, Rack, cannot_start
from .tls import RackTls


def switch_line(target: str, logs) -> str:
    if target == "bmv2":
        return (
            f"  switch      BMv2 simple_switch_grpc '{plan.SWITCH}': P4Runtime {plan.P4RUNTIME_ADDRESS} (device {plan.DEVICE_ID}),"
            f" thrift {plan.THRIFT_PORT}, CPU port {plan.CPU_PORT}; log {logs}/bmv2.log"
        )
    return f"  switch      jumbogate-switch '{plan.SWITCH}': P4Runtime {plan.P4RUNTIME_ADDRESS} (device {plan.DEVICE_ID}), CPU port {plan.CPU_PORT}; log {logs}/switch.log"


def banner(target: str, tls: RackTls | None = None) -> str:
    ctl = f"{JUMBOGATECTL.relative_to(procs.REPO)} --controller {plan.CONTROLLER_ADDRESS}"
    if tls:
        # The certificate paths relative to the repository root, where the banner says to run it.
        ctl += " " + " ".join(os.path.relpath(a, procs.REPO) if a.startswith("/") else a for a in tls.ctl_args())
    logs = procs.LOG_DIR.relative_to(procs.REPO)
    lines = [
        "",
        f"jumbogate: the emulated rack is up on {'BMv2' if target == 'bmv2' else 'jumbogate-switch'} (SWITCH={target})",
        switch_line(target, logs),
    ]
    for port in plan.SWITCH_PORTS:
        lines.append(f"              port {port.number} {port.intf:<12} {port.role:<8} -> {port.peer} ({port.peer_intf}, MTU {port.mtu})")
    lines += [
        f"  ports       net_af_packet, not AF_XDP: on veth AF_XDP carries an MTU of {XDP_MTU} here (DPDK 22.11), below the rack's jumbo links",
        f"  SmartNIC    jumbogate-nic in namespace '{plan.NIC_HOST}' on {plan.NIC_INTF} (af_packet), control {plan.NIC_CONTROL_ADDRESS}; log {logs}/nic.log",
        f"  controller  jumbogate-controller, operator API {plan.CONTROLLER_ADDRESS}, config mininet/rack.yaml; log {logs}/controller.log",
        f"  store       etcd, one member, client URL http://{plan.ETCD_CLIENT_ADDRESS}, seeded from mininet/rack.yaml at start; log {logs}/etcd.log",
        (
            f"  TLS         mutual TLS on P4Runtime, the SmartNIC's API and the operator API; throwaway CA and certificates in {tls.pki.directory.relative_to(procs.REPO)}"
            " (admin: admin.pem, read-only: viewer.pem)"
            if tls
            else "  TLS         off: plaintext control channels (TLS=1 turns mutual TLS on)"
        ),
        "  hosts",
    ]
    for router in plan.ROUTERS:
        lines.append(f"              {router.host:<8} upstream router   {router.lan.ip4:<14} {router.lan.ip6} (uplink {router.uplink.ip4})")
    for ext in plan.EXTERNAL_HOSTS:
        lines.append(f"              {ext.host:<8} external host     {ext.address.ip4:<14} {ext.address.ip6} (MTU {plan.MTU_EXTERNAL})")
    for inst in plan.INSTANCES:
        kind = "jumbo instance" if inst.jumbo else "1500 instance"
        lines.append(f"              {inst.host:<8} {kind:<17} {inst.address.ip4:<14} {inst.address.ip6} (MTU {inst.mtu})")
    lines += [
        "",
        "From another shell (repository root):",
        f"  {ctl} status             # the store, the leader, the switch's primary, the SmartNIC and its fence",
        f"  {ctl} stats",
        f"  {ctl} instance list",
        f"  {ctl} fleet jumbo off        # and 'on'; 'instance jumbo jumbo1 off'",
        f"  {ctl} flows list             # flows on the merge path; 'watch' follows events",
        "In this CLI:",
        f"  jumbo1 iperf3 -s -D && ext1 iperf3 -c {plan.JUMBO.address.ip4} -P 4 -t 5",
        f"  jumbo1 ip route get {plan.EXTERNAL_HOSTS[0].address.ip4}   # shows a learned path MTU after an ICMP signal",
        "Leave with 'exit' or Ctrl-D: everything is torn down. 'make stop' does the same from another shell, also after a crash.",
        "",
    ]
    return "\n".join(lines)


def serve(emulation, starting: str, banner_text) -> int:
    """Bring the emulation up, print its banner, leave a Mininet CLI; tear down whatever happens."""
    try:
        print(f"make run: starting {starting} ...", flush=True)
        emulation.up()
        print(banner_text(), flush=True)
        CLI(emulation.net)
    except procs.StartError as err:
        print(f"make run: {err}", file=sys.stderr)
        return 1
    finally:
        print("make run: tearing down ...", flush=True)
        emulation.down()
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="make run", description=__doc__)
    parser.add_argument("--verbose", action="store_true", help="Mininet's own progress lines")
    parser.add_argument("--switch", choices=("soft", "bmv2"), help="the switch target (default: $SWITCH, else soft: jumbogate-switch)")
    parser.add_argument(
        "--topo",
        choices=("rack", "two-racks", "fleet"),
        default=os.environ.get("TOPO") or "rack",
        help="one rack; two racks across a small WAN for path MTU discovery; or a fleet of three racks on one etcd cluster"
        " (both jumbogate-switch only; default: $TOPO, else rack)",
    )
    args = parser.parse_args(argv)
    two_racks, fleet = args.topo == "two-racks", args.topo == "fleet"
    refusal = cannot_start(f"make run TOPO={args.topo}" if two_racks or fleet else "make run", "soft" if two_racks or fleet else args.switch)
    if refusal:
        print(refusal, file=sys.stderr)
        return 1
    if fleet:
        from .fleet import Fleet
        from .fleet import banner as fleet_banner

        racks = Fleet(verbose=args.verbose)
        return serve(
            racks,
            "three racks (jumbogate-switch, jumbogate-nic, two jumbogate-controllers each), a three-member etcd and an upstream",
            lambda: fleet_banner(racks),
        )
    if two_racks:
        from .two_racks import TwoRacks
        from .two_racks import banner as two_racks_banner

        racks = TwoRacks(verbose=args.verbose)
        return serve(racks, "two racks (jumbogate-switch, jumbogate-nic, jumbogate-controller each) and their WAN", lambda: two_racks_banner(racks))
    rack = Rack(verbose=args.verbose, switch_target=args.switch)
    return serve(rack, f"Mininet, the switch (SWITCH={rack.target}), jumbogate-nic and jumbogate-controller", lambda: banner(rack.target, rack.tls))


if __name__ == "__main__":
    sys.exit(main())
