# PYTHON_ARGCOMPLETE_OK
"""jumbogatectl: the operator's command line for a running jumbogate-controller.

Human output by default, `--json` for scripts (`watch --json`: one object a
line). Exit codes: EXIT_CODES below, also shown by --help.
"""

from __future__ import annotations

import argparse
import ipaddress
import json
import os
import re
import sys
import time
from collections.abc import Callable
from pathlib import Path

import grpc
from google.protobuf import json_format

from . import audit
from .tls import TlsConfig, check_key_pair
from .v1 import common_pb2, nic_pb2, policy_pb2, policy_pb2_grpc

DEFAULT_CONTROLLER = "127.0.0.1:50051"
_NUMBER = re.compile(r"-?\d+(\.\d+)?%?")

EXIT_OK, EXIT_REFUSED, EXIT_USAGE, EXIT_NOT_FOUND, EXIT_UNREACHABLE, EXIT_ERROR, EXIT_DENIED, EXIT_CONFLICT = range(8)
EXIT_INTERRUPTED = 128 + 2  # the shell's code for SIGINT
EXIT_CODES = """exit codes:
  0  ok
  1  refused: a policy rule, a refused reload, a standby asked for what only the leader has
  2  bad input: usage, a malformed address, an unreadable file, a config that does not validate
  3  not found: no such instance, flow or destination
  4  controller unreachable, or it did not answer in time
  5  other error
  6  permission denied: the client certificate's role does not allow the call
  7  conflict: the store moved on since the revision the change was based on
  130  interrupted (Ctrl-C) before the answer: a change may or may not have been made"""

_STATUS_EXIT = {
    grpc.StatusCode.FAILED_PRECONDITION: (EXIT_REFUSED, "refused"),
    grpc.StatusCode.INVALID_ARGUMENT: (EXIT_USAGE, "invalid request"),
    grpc.StatusCode.NOT_FOUND: (EXIT_NOT_FOUND, "not found"),
    grpc.StatusCode.UNAVAILABLE: (EXIT_UNREACHABLE, "controller unreachable"),
    grpc.StatusCode.DEADLINE_EXCEEDED: (EXIT_UNREACHABLE, "controller did not answer in time"),
    grpc.StatusCode.PERMISSION_DENIED: (EXIT_DENIED, "permission denied"),
    grpc.StatusCode.ABORTED: (EXIT_CONFLICT, "conflict"),
}


class UsageError(Exception):
    pass


def parse_endpoint(text: str) -> tuple[str, int]:
    """'10.0.0.1:80' or '[fd00::1]:80' -> (address, port)."""
    if text.startswith("["):
        host, _, rest = text[1:].partition("]")
        port = rest.removeprefix(":")
    else:
        host, _, port = text.rpartition(":")
    # isdigit() alone takes "²" and other digits int() refuses.
    if not host or not (port.isascii() and port.isdigit()) or int(port) > 65535:
        raise UsageError(f"{text!r} is not ADDRESS:PORT (IPv6 as [ADDRESS]:PORT, the port at most 65535)")
    return host, int(port)


def unsigned(bits: int):
    """An argparse type: a whole number from 0 to 2^bits-1, what the API's unsigned field holds
    (a negative or larger one failed deep in protobuf, with a traceback)."""

    def whole_number(text: str) -> int:
        if not (text.isascii() and text.isdigit()) or int(text) >= 1 << bits:
            raise argparse.ArgumentTypeError(f"{text!r} is not a whole number from 0 to 2^{bits}-1")
        return int(text)

    return whole_number


def clock(seconds: float) -> str:
    """HH:MM:SS of a time the controller sent, or "-" for one no clock shows."""
    try:
        return time.strftime("%H:%M:%S", time.localtime(seconds))
    except (OverflowError, OSError, ValueError):
        return "-"


def flow_from_args(args) -> common_pb2.FiveTuple:
    src, sport = parse_endpoint(args.src)
    dst, dport = parse_endpoint(args.dst)
    proto = {"tcp": 6, "udp": 17}[args.proto]
    return common_pb2.FiveTuple(src_ip=src, dst_ip=dst, protocol=proto, src_port=sport, dst_port=dport)


def format_flow(flow: common_pb2.FiveTuple) -> str:
    def ep(addr: str, port: int) -> str:
        return f"[{addr}]:{port}" if ":" in addr else f"{addr}:{port}"

    proto = {6: "tcp", 17: "udp"}.get(flow.protocol, str(flow.protocol))
    return f"{proto} {ep(flow.src_ip, flow.src_port)} -> {ep(flow.dst_ip, flow.dst_port)}"


def table(headers: list[str], rows: list[list]) -> str:
    cells = [[str(c) for c in row] for row in rows]
    widths = [max([len(h)] + [len(r[i]) for r in cells]) for i, h in enumerate(headers)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True))]
    lines.append("  ".join("-" * w for w in widths))
    # Numbers right-aligned; addresses (10.2.0.1) are words.
    lines += ["  ".join(c.rjust(w) if _NUMBER.fullmatch(c) else c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in cells]
    return "\n".join(lines)


def to_json(msg) -> str:
    return json_format.MessageToJson(msg, preserving_proto_field_name=True, always_print_fields_with_no_presence=True, indent=2)


def human_count(n: int) -> str:
    for unit in ("", "K", "M", "G", "T"):
        if abs(n) < 1000:
            return f"{n}{unit}" if unit == "" else f"{n:.1f}{unit}"
        n /= 1000
    return f"{n:.1f}P"


# ----- output of each command -----


def port_label(number: int, name: str) -> str:
    """A switch port as rack.yaml names it: '1 (uplink-a)', or the number alone when unnamed."""
    return f"{number} ({name})" if name else str(number)


def show_nic_stats(stats) -> str:
    lines = [
        f"packets   {human_count(stats.packets_in)} in ({human_count(stats.bytes_in)}B), {human_count(stats.packets_out)} out ({human_count(stats.bytes_out)}B), {stats.packets_held} held",
        f"merge     {human_count(stats.merged_packets)} merged packets from {human_count(stats.segments_merged)} segments, yield {100 * stats.conversion_yield:.1f}%",
        f"split     {human_count(stats.split_packets)} packets into {human_count(stats.split_segments_out)} segments",
        f"caravans  {stats.caravans_packed} packed, {stats.caravans_unpacked} unpacked",
        f"flows     {stats.flows_active} active, {stats.flows_evicted} evicted, {stats.onloads_refused} onloads refused, {stats.pins_expired} pins expired",
        f"fence     highest leader id {stats.fence.election_id_high}:{stats.fence.election_id_low}, {stats.fence.changes_refused} changes refused",
    ]
    drops = [[d.reason, d.packets] for d in stats.drops if d.packets]
    lines += ["", table(["drop reason", "packets"], drops) if drops else "no drops"]
    if stats.path_mtu_discovery:
        lines += ["", "path MTU discovery: " + ", ".join(f"{k} {v}" for k, v in sorted(stats.path_mtu_discovery.items()))]
    return "\n".join(lines)


def show_nic_config(config) -> str:
    delay = config.delay
    return "\n".join(
        [
            f"internal MTU         {config.internal_mtu}",
            f"default path MTU     {config.default_path_mtu_v4} (IPv4), {config.default_path_mtu_v6} (IPv6)",
            f"flow table           {config.max_flows} flows, chains of {config.max_segments} segments at most",
            f"merge unknown flows  {'yes' if config.merge_unknown_flows else 'no'}",
            f"internal prefixes    {', '.join(p.cidr for p in config.internal_prefixes) or '-'}",
            f"delay model          below {human_count(delay.rate_threshold_bps)}bit/s merged within a burst; yield above {delay.yield_threshold:g} not delayed;"
            f" quantile {delay.quantile:g}; at most {delay.max_delay_us} us",
        ]
    )


def show_nic_flows(reply) -> str:
    if not reply.flows:
        return "the SmartNIC holds no flows"
    rows = [[format_flow(f.flow), human_count(f.packets_in), human_count(f.merged_packets)] for f in reply.flows]
    return table(["flow", "packets in", "merged"], rows)


def show_fleet(fleet: policy_pb2.Fleet) -> str:
    mtu = fleet.guest_jumbo_mtu if fleet.jumbo else fleet.default_mtu
    return f"fleet jumbo: {'on' if fleet.jumbo else 'off'} (jumbo instances get MTU {mtu}; store revision {fleet.revision})"


def show_instances(instances) -> str:
    rows = [[i.id, "on" if i.jumbo else "off", i.effective_mtu, ", ".join(i.addresses)] for i in instances]
    return table(["instance", "jumbo", "mtu", "addresses"], rows)


def show_flows(flows) -> str:
    if not flows:
        return "no flows on the merge path"
    origin = {policy_pb2.FLOW_ORIGIN_ELEPHANT: "elephant", policy_pb2.FLOW_ORIGIN_OPERATOR: "operator", policy_pb2.FLOW_ORIGIN_ADOPTED: "adopted"}
    rows = [
        [
            format_flow(f.flow),
            origin.get(f.origin, "?"),
            f"{f.idle_timeout_s}s",
            "yes" if f.on_nic else "no",
            clock(f.onloaded_at),
        ]
        for f in flows
    ]
    return table(["flow", "origin", "idle", "on nic", "since"], rows)


def show_stats(stats: policy_pb2.Stats) -> str:
    out = []
    ports = [
        [
            port_label(p.port, p.name),
            p.role,
            human_count(p.ingress.packets),
            human_count(p.ingress.bytes),
            human_count(p.egress.packets),
            human_count(p.egress.bytes),
        ]
        for p in stats.ports
    ]
    out.append(table(["port", "role", "rx pkts", "rx bytes", "tx pkts", "tx bytes"], ports))
    total = stats.merge_path.packets + stats.bypass.packets
    share = 100.0 * stats.merge_path.packets / total if total else 0.0
    out.append("")
    out.append(f"merge path: {human_count(stats.merge_path.packets)} packets ({share:.1f}% of steerable), bypass: {human_count(stats.bypass.packets)} packets")
    out.append(
        f"ICMP errors generated: {stats.icmp_generated}   digests: {stats.digests_received} received, {stats.digests_shed} shed, {stats.digests_refused} refused"
        f"   idle-timeout notices refused: {stats.idle_timeouts_refused}"
    )
    drops = [[d.reason, d.code, d.count.packets] for d in stats.drops if d.count.packets]
    out.append("")
    out.append(table(["drop reason", "code", "packets"], drops) if drops else "no drops")
    admission, reconcile, reloads = stats.admission, stats.reconcile, stats.config_reloads
    out.append("")
    out.append(
        f"merge path admission: {admission.flows} of {admission.max_flows} flows; {admission.elephants_rate_limited} elephants past the budget"
        f" of {admission.max_onloads_per_epoch} an epoch, {admission.flows_evicted} flows evicted, {admission.operator_onloads_refused} operator onloads refused"
    )
    switch_at = "" if reconcile.policy_version == stats.policy_version else f" (the switch at {reconcile.policy_version})"
    out.append(
        f"reconcile: {reconcile.runs} runs, {reconcile.inserted} inserted, {reconcile.modified} modified, {reconcile.deleted} deleted,"
        f" {reconcile.failed_batches} batches refused; policy version {stats.policy_version}{switch_at}"
    )
    out.append(f"config reloads: {reloads.applied} applied, {reloads.refused} refused" + (f"; last refusal: {reloads.last_refusal}" if reloads.refused else ""))
    nic = stats.nic
    out.append("")
    if nic.reachable:
        out.append(
            f"SmartNIC: {human_count(nic.packets_in)} in, {human_count(nic.packets_out)} out, "
            f"{human_count(nic.merged_packets)} merged, yield {100 * nic.conversion_yield:.1f}%, {human_count(nic.segments_out)} split segments"
        )
        if nic.fence_election_id_high or nic.fence_election_id_low or nic.fence_changes_refused:
            out.append(f"  fence: highest leader id {nic.fence_election_id_high}:{nic.fence_election_id_low}, {nic.fence_changes_refused} changes refused")
    elif stats.HasField("election") and not stats.election.leading:
        # A standby neither programs the switch nor calls the SmartNIC: their figures are the leader's to show.
        out.append("SmartNIC and switch: driven by the rack's leading controller (this one is a standby)")
    else:
        out.append("SmartNIC: unreachable (flows bypass the merge path)")
    if nic.fenced_calls:
        out.append(f"  {nic.fenced_calls} changes of this controller refused by the SmartNIC's fence; last: {nic.last_fenced}")
    out.append("")
    out.append(show_store(stats.store, stats.election if stats.HasField("election") else None))
    return "\n".join(out)


def show_store(store: policy_pb2.StoreStatus, election: policy_pb2.ElectionStatus | None = None) -> str:
    line = f"store: {store.endpoint}, rack {store.rack}, revision {store.revision}"
    if election is not None:
        line += f", fencing epoch {store.fencing_epoch}"
    if election is not None:
        line += (
            f"; leading the rack (election id {election.election_id_high}:{election.election_id_low})"
            if election.leading
            else "; standby (another controller leads the rack)"
        )
    if store.revision_applied != store.revision:
        line += f" (revision {store.revision_applied} in force)"
    if store.refused_revisions:
        line += f"\n  {store.refused_revisions} revisions refused; last: {store.last_refusal}"
    return line


def show_status(status: policy_pb2.BorderStatus) -> str:
    store, switch, nic = status.store, status.switch, status.smartnic
    if store.healthy:
        health = f"healthy ({store.version}" + (f", {human_count(store.db_size_bytes)}B" if store.db_size_bytes else "") + ")"
    else:
        health = f"NOT ANSWERING: {store.error}"
    in_force = "" if store.revision_applied == store.revision else f" ({store.revision_applied} in force)"
    lines = [f"store     {store.endpoint}: {health}; revision {store.revision}{in_force}, rack {store.rack}"]
    if store.refused_revisions:
        lines.append(f"          {store.refused_revisions} revisions refused (jumbogatectl stats says which)")
    if status.HasField("election"):
        election = status.election
        leader = f"{election.leader} won at revision {election.leader_revision}" if election.leader else "no controller of the rack campaigns"
        role = f"this controller leads (election id {election.election_id_high}:{election.election_id_low})" if election.leading else "standby"
        lines.append(f"election  {role}; leader: {leader}; fencing epoch {store.fencing_epoch}")
    if switch.connected:
        lines.append(
            f"switch    {switch.address}: programmed by this controller, primary election id {switch.primary_election_id_high}:{switch.primary_election_id_low}"
        )
    elif status.HasField("election") and not status.election.leading:
        lines.append(f"switch    {switch.address}: programmed by the leader (a standby opens no P4Runtime session)")
    else:
        lines.append(f"switch    {switch.address}: not connected")
    if nic.reachable:
        fence = f"fence {nic.fence_election_id_high}:{nic.fence_election_id_low}, {nic.fence_changes_refused} changes refused"
        lines.append(f"smartnic  {nic.address}: up (boot {nic.boot_id:x}), {fence}")
    elif status.HasField("election") and not status.election.leading:
        lines.append(f"smartnic  {nic.address}: driven by the leader")
    else:
        lines.append(f"smartnic  {nic.address}: unreachable (flows bypass the merge path)")
    if nic.fenced_calls:
        lines.append(f"          {nic.fenced_calls} changes of this controller refused by its fence; last: {nic.last_fenced}")
    return "\n".join(lines)


def show_event(event: policy_pb2.Event) -> str:
    stamp = clock(event.time)
    # A newer controller may send kinds this jumbogatectl does not know.
    known = event.kind in policy_pb2.EventKind.values()
    kind = policy_pb2.EventKind.Name(event.kind).removeprefix("EVENT_KIND_").lower() if known else f"kind {event.kind}"
    parts = [stamp, kind]
    if event.HasField("flow"):
        parts.append(format_flow(event.flow))
    if event.estimated_bytes:
        parts.append(f"~{human_count(event.estimated_bytes)}B")
    if event.detail:
        parts.append(event.detail)
    return "  ".join(parts)


def show_paths(reply: policy_pb2.ListPathsResponse) -> str:
    if not reply.paths:
        return "no external destinations tracked yet" + ("" if reply.discovery else " (path MTU discovery is off or the SmartNIC unreachable)")
    rows = [
        [
            p.address,
            p.mtu,
            p.source + (f" ({p.method}{', exact' if p.exact else ''})" if p.method else ""),
            "probing" if p.probing else (f"{p.age_s:.0f}s" if p.source == "learned" else "-"),
            f"{p.rtt_ms:.2f}" if p.rtt_ms else "-",
            ("yes" if p.on_switch else "no") if p.source == "learned" else "-",
        ]
        for p in reply.paths
    ]
    text = table(["destination", "mtu", "source", "age", "rtt ms", "on switch"], rows)
    if reply.learned_left_out:
        text += f"\n{reply.learned_left_out} learned paths left off the switch for want of room since start"
    return text


def show_fleet_paths(reply: policy_pb2.ListPathsResponse) -> str:
    """One row per destination, one column per rack: the MTU that rack learned and its age."""
    racks = [r.rack for r in reply.racks]
    learned: dict[str, dict[str, policy_pb2.Path]] = {}
    for r in reply.racks:
        for p in r.paths:
            learned.setdefault(p.address, {})[r.rack] = p
    if not learned:
        return "no rack publishes learned paths" + (f" (racks with a leader: {', '.join(racks)})" if racks else " (no rack has a leader)")

    def cell(p: policy_pb2.Path | None) -> str:
        return f"{p.mtu} ({p.age_s:.0f}s)" if p is not None else "-"

    rows = [[address, *(cell(learned[address].get(rack)) for rack in racks)] for address in sorted(learned, key=_address_order)]
    return table(["destination", *racks], rows) + "\neach rack applies only the paths it learned"


def _address_order(text: str):
    """IPv4, then IPv6, in address order; what does not read as an address last, as text."""
    try:
        address = ipaddress.ip_address(text)
    except ValueError:
        return (7, 0, text)
    return (address.version, int(address), text)


def show_probe(path: policy_pb2.Path) -> str:
    if path.source != "learned":
        return f"{path.address}: no answer to the probes; the border applies {path.mtu} ({path.source})"
    if path.exact:
        return f"{path.address}: path MTU {path.mtu}, exact (from {path.method}, first round trip {path.rtt_ms:.2f} ms)"
    return f"{path.address}: path MTU {path.mtu}, found from {path.method} in one round of {path.rtt_ms:.2f} ms"


def show_audit(result: dict, border: policy_pb2.Path | None, border_error: str) -> str:
    lines = [f"DF sweep to {result['address']} ({result['low']}..{result['high']} bytes, {len(result['attempts'])} pings):"]
    for a in result["attempts"]:
        lines.append(f"  {a['size']:5d}  {a['outcome']}" + (f" (mtu {a['mtu']})" if a["mtu"] else ""))
    if result["largest_passed"]:
        lines.append(f"largest packet that got through: {result['largest_passed']}")
    lines.append(result["verdict"])
    if border is not None:
        lines.append(f"the border applies {border.mtu} ({border.source}{', ' + border.method if border.method else ''})")
    else:
        lines.append(f"the border's view: {border_error}")
    return "\n".join(lines)


def run_audit(args, stub: policy_pb2_grpc.PolicyStub, emit) -> None:
    try:
        result = audit.df_sweep(args.destination, args.low, args.high, args.wait).as_dict()
    except (ValueError, FileNotFoundError) as err:
        raise UsageError(str(err)) from None
    border, error = None, ""
    try:
        reply = stub.ListPaths(policy_pb2.ListPathsRequest(address=args.destination), timeout=args.timeout)
        border = reply.paths[0] if reply.paths else None
    except grpc.RpcError as err:
        error = f"controller {args.controller}: {err.code().name.lower()}"
    result["border"] = json_format.MessageToDict(border, preserving_proto_field_name=True) if border is not None else {"error": error}
    emit(result, show_audit(result, border, error))


# ----- commands -----


def run_command(args, stub: policy_pb2_grpc.PolicyStub, emit: Callable[[object, str], None]) -> None:
    t = args.timeout
    if args.area == "fleet":
        if args.action == "show":
            fleet = stub.GetFleet(policy_pb2.GetFleetRequest(), timeout=t)
        elif args.action == "raise-epoch":
            raised = stub.RaiseFencingEpoch(policy_pb2.RaiseFencingEpochRequest(to=args.to), timeout=t)
            emit(raised, f"fencing epoch {raised.epoch} (store revision {raised.revision}): each rack's leader leads again under it")
            return
        else:
            fleet = stub.SetFleet(policy_pb2.SetFleetRequest(jumbo=args.state == "on", revision=args.revision), timeout=t)
        emit(fleet, show_fleet(fleet))
    elif args.area == "instance":
        if args.action == "list":
            resp = stub.ListInstances(policy_pb2.ListInstancesRequest(), timeout=t)
            emit(resp, show_instances(resp.instances))
        elif args.action == "show":
            inst = stub.GetInstance(policy_pb2.GetInstanceRequest(id=args.id), timeout=t)
            emit(inst, show_instances([inst]))
        else:
            inst = stub.SetInstanceJumbo(policy_pb2.SetInstanceJumboRequest(id=args.id, jumbo=args.state == "on", revision=args.revision), timeout=t)
            emit(inst, f"instance {inst.id}: jumbo {'on' if inst.jumbo else 'off'}, effective MTU {inst.effective_mtu}")
    elif args.area == "flows":
        if args.action == "list":
            resp = stub.ListFlows(policy_pb2.ListFlowsRequest(), timeout=t)
            emit(resp, show_flows(resp.flows))
        elif args.action == "onload":
            flow = stub.OnloadFlow(policy_pb2.OnloadFlowRequest(flow=flow_from_args(args), idle_timeout_s=args.idle), timeout=t)
            emit(flow, f"onloaded {format_flow(flow.flow)} (idle timeout {flow.idle_timeout_s}s)")
        else:
            resp = stub.OffloadFlow(policy_pb2.OffloadFlowRequest(flow=flow_from_args(args)), timeout=t)
            emit(resp, f"offloaded {format_flow(flow_from_args(args))}")
    elif args.area == "nic":
        if args.action == "stats":
            reply = stub.GetNicStats(nic_pb2.GetNicStatsRequest(), timeout=t)
            emit(reply, show_nic_stats(reply))
        elif args.action == "config":
            reply = stub.GetNicConfig(nic_pb2.GetConfigRequest(), timeout=t)
            emit(reply, show_nic_config(reply))
        else:
            reply = stub.ListNicFlows(nic_pb2.ListNicFlowsRequest(), timeout=t)
            emit(reply, show_nic_flows(reply))
    elif args.area == "config":
        if args.action == "reload":
            reply = stub.ReloadConfig(policy_pb2.ReloadConfigRequest(), timeout=t)
            emit(reply, f"reloaded {reply.detail}")
        elif args.action == "export":
            reply = stub.ExportConfig(policy_pb2.ExportConfigRequest(), timeout=t)
            if args.output:
                try:
                    args.output.write_text(reply.yaml)
                except OSError as err:
                    raise UsageError(f"cannot write {args.output}: {err.strerror}") from None
                emit(reply, f"exported store revision {reply.revision} to {args.output}")
            else:
                emit(reply, reply.yaml.rstrip("\n"))
        else:
            try:
                text = args.file.read_text()
            except OSError as err:
                raise UsageError(f"cannot read {args.file}: {err.strerror}") from None
            reply = stub.ImportConfig(policy_pb2.ImportConfigRequest(yaml=text, source=str(args.file), revision=args.revision), timeout=t)
            emit(reply, f"imported {args.file}: store revision {reply.revision}")
    elif args.area == "status":
        status = stub.GetStatus(policy_pb2.GetStatusRequest(), timeout=t)
        emit(status, show_status(status))
    elif args.area == "stats":
        stats = stub.GetStats(policy_pb2.GetStatsRequest(), timeout=t)
        emit(stats, show_stats(stats))
    elif args.area == "path":
        if args.action == "show":
            reply = stub.ListPaths(policy_pb2.ListPathsRequest(address=args.destination or "", fleet=args.fleet), timeout=t)
            emit(reply, show_fleet_paths(reply) if args.fleet else show_paths(reply))
        elif args.action == "probe":
            # Refinement rounds for --exact take a few round trips each, at most 6 s.
            path = stub.ProbePath(common_pb2.ProbePathRequest(address=args.destination, exact=args.exact), timeout=t + 5 + (6 if args.exact else 0))
            emit(path, show_probe(path))
        else:
            run_audit(args, stub, emit)
    elif args.area == "watch":
        deadline = None if args.duration is None else args.duration
        seen = 0
        stream = stub.Watch(policy_pb2.WatchRequest(), timeout=deadline)
        try:
            for event in stream:
                emit(event, show_event(event), lines=True)
                seen += 1
                if args.count and seen >= args.count:
                    stream.cancel()
                    break
        except grpc.RpcError as err:
            if err.code() not in (grpc.StatusCode.DEADLINE_EXCEEDED, grpc.StatusCode.CANCELLED):
                raise


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="jumbogatectl",
        description="Operate a jumbogate border through its controller.",
        epilog=EXIT_CODES + '\n\nshell completion: eval "$(jumbogatectl completion bash)" (argcomplete)',
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {package_version()}")
    parser.add_argument(
        "--controller",
        default=os.environ.get("JUMBOGATE_CONTROLLER", DEFAULT_CONTROLLER),
        help="controller API address (default: %(default)s, or $JUMBOGATE_CONTROLLER)",
    )
    for option, env, what in (
        ("--tls-ca", "JUMBOGATE_TLS_CA", "CA the controller's certificate must chain to (PEM)"),
        ("--tls-cert", "JUMBOGATE_TLS_CERT", "this client's certificate (PEM); its name decides the role"),
        ("--tls-key", "JUMBOGATE_TLS_KEY", "its private key (PEM)"),
    ):
        parser.add_argument(option, type=Path, default=os.environ.get(env) or None, help=f"{what}; mutual TLS (default: ${env})")
    parser.add_argument("--json", action="store_true", help="print JSON instead of tables")
    parser.add_argument("--timeout", type=float, default=5.0, help="seconds to wait for an answer (default: %(default)s)")
    areas = parser.add_subparsers(dest="area", required=True, metavar="{fleet,instance,flows,path,nic,config,status,stats,watch,completion}")
    revision_help = "the store revision this change is based on (from show or --json): refused with exit 7 if it moved since (default: the controller's view)"

    fleet = areas.add_parser("fleet", help="the fleet jumbo flag").add_subparsers(dest="action", required=True)
    fleet.add_parser("show", help="show the fleet flag")
    jumbo = fleet.add_parser("jumbo", help="turn the fleet flag on or off")
    jumbo.add_argument("state", choices=["on", "off"])
    jumbo.add_argument("--revision", type=unsigned(64), default=0, help=revision_help)
    epoch = fleet.add_parser(
        "raise-epoch", help="raise the fencing epoch of the leaders' election ids (after restoring or rebuilding the store; docs/fleet.md)"
    )
    epoch.add_argument("--to", type=unsigned(64), default=0, help="the new epoch, above the current one (default: the current one plus one)")

    inst = areas.add_parser("instance", help="instances and their jumbo flags").add_subparsers(dest="action", required=True)
    inst.add_parser("list", help="all instances with their effective MTU")
    show = inst.add_parser("show", help="one instance")
    show.add_argument("id")
    ijumbo = inst.add_parser("jumbo", help="turn an instance's jumbo flag on or off")
    ijumbo.add_argument("id")
    ijumbo.add_argument("state", choices=["on", "off"])
    ijumbo.add_argument("--revision", type=unsigned(64), default=0, help=revision_help)

    flows = areas.add_parser("flows", help="flows on the merge path").add_subparsers(dest="action", required=True)
    flows.add_parser("list", help="flows on the merge path")
    for name, helptext in (("onload", "put a flow on the merge path"), ("offload", "take a flow off the merge path")):
        p = flows.add_parser(name, help=helptext)
        p.add_argument("src", help="source ADDRESS:PORT ([ADDRESS]:PORT for IPv6)")
        p.add_argument("dst", help="destination ADDRESS:PORT")
        p.add_argument("--proto", choices=["tcp", "udp"], default="tcp")
        if name == "onload":
            p.add_argument("--idle", type=unsigned(32), default=0, help="idle timeout in seconds (default: the controller's)")

    path = areas.add_parser("path", help="path MTUs to external destinations").add_subparsers(dest="action", required=True)
    pshow = path.add_parser("show", help="learned and configured path MTUs, and which applies")
    pshow.add_argument("destination", nargs="?", help="one address (default: every destination the SmartNIC tracks)")
    pshow.add_argument("--fleet", action="store_true", help="every rack's learned paths side by side, as their leaders published them in the store")
    probe = path.add_parser("probe", help="probe a destination now; print the answer and the round trip")
    probe.add_argument("destination")
    probe.add_argument("--exact", action="store_true", help="narrow the answer to the byte with more rounds of sizes (a few round trips each)")
    paudit = path.add_parser("audit", help="the classic check from this host: a DF ping sweep, and whether ICMP errors come back")
    paudit.add_argument("destination")
    paudit.add_argument("--low", type=int, default=1280, help="smallest IP packet to try (default: %(default)s)")
    paudit.add_argument("--high", type=int, default=9000, help="largest IP packet to try (default: %(default)s)")
    paudit.add_argument("--wait", type=float, default=1.0, help="seconds to wait for each answer (default: %(default)s)")

    config = areas.add_parser("config", help="the policy in the store, as a rack.yaml").add_subparsers(dest="action", required=True)
    cimport = config.add_parser("import", help="replace the fleet's and this rack's policy with a rack.yaml's (one transaction)")
    cimport.add_argument("file", type=Path)
    cimport.add_argument("--revision", type=unsigned(64), default=0, help=revision_help)
    cexport = config.add_parser("export", help="this rack's policy as a rack.yaml (importing it changes nothing)")
    cexport.add_argument("--output", "-o", type=Path, help="write to this file (default: print)")
    cvalidate = config.add_parser(
        "validate", help="check a rack.yaml as the controller does at start (no controller needed): exit 0 if it would start, 2 if not, each problem on a line"
    )
    cvalidate.add_argument("file", type=Path)
    cvalidate.add_argument("--pipeline", type=Path, help="the pipeline directory the controller would get with --pipeline (default: switch.pipeline)")
    cvalidate.add_argument("--listen", help="the operator API address the controller would get with --listen (default: controller.listen)")
    # The controller's store options, checked as its start checks them (its files read here, as this user).
    cvalidate.add_argument("--store", help="the store the controller would get with --store (etcd://HOST:PORT[,...]; not contacted)")
    cvalidate.add_argument("--store-ca", type=Path, help="the controller's --store-ca: the store's TLS files are read and checked")
    cvalidate.add_argument("--store-cert", type=Path, help="the controller's --store-cert")
    cvalidate.add_argument("--store-key", type=Path, help="the controller's --store-key")
    cvalidate.add_argument("--store-server-name", help="the controller's --store-server-name")
    config.add_parser("reload", help="have the controller read its rack.yaml and TLS files again and apply them, as SIGHUP does (admin role)")

    nic = areas.add_parser("nic", help="the SmartNIC, through the controller that drives it").add_subparsers(dest="action", required=True)
    nic.add_parser("stats", help="its counters: packets, merges, splits, flows, drops, fence")
    nic.add_parser("config", help="the configuration it runs")
    nic.add_parser("flows", help="the flows it holds, with their packets")

    areas.add_parser("status", help="the store and its health, the rack's leader, the switch's primary, the SmartNIC and its fence")
    areas.add_parser("stats", help="ports, drop reasons, merge-path share, SmartNIC yield, the store")
    watch = areas.add_parser("watch", help="stream events as they happen")
    watch.add_argument("--count", type=int, default=0, help="stop after this many events")
    watch.add_argument("--duration", type=float, default=None, help="stop after this many seconds")
    completion = areas.add_parser("completion", help="print the shell code that completes jumbogatectl's arguments (argcomplete)")
    completion.add_argument("shell", choices=["bash", "zsh", "fish", "tcsh"], help='e.g. eval "$(jumbogatectl completion bash)" in ~/.bashrc')
    return parser


def open_channel(args) -> grpc.Channel:
    """Mutual TLS when the three TLS files are given, plaintext when none is."""
    files = (args.tls_ca, args.tls_cert, args.tls_key)
    if not any(files):
        return grpc.insecure_channel(args.controller)
    if not all(files):
        raise UsageError("--tls-ca, --tls-cert and --tls-key go together (mutual TLS)")
    tls = TlsConfig(*(Path(f) for f in files))
    try:
        ca, cert, key = tls.files()
        # gRPC takes any bytes and fails only at the handshake, which then read as "controller unreachable".
        check_key_pair(tls, ca, cert, key, signed_by_ca=False)
    except OSError as err:
        raise UsageError(f"cannot read {err.filename}: {err.strerror}") from None
    except ValueError as err:
        raise UsageError(f"the TLS files cannot be used: {err}") from None
    return grpc.secure_channel(args.controller, grpc.ssl_channel_credentials(root_certificates=ca, private_key=key, certificate_chain=cert))


def validate_config(args, emit) -> int:
    """config validate: the file's own checks, then what would stop a controller from starting with it."""
    from .config import ConfigError, load_config
    from .daemon import start_problems, store_problem

    problems = []
    try:
        config = load_config(args.file)
    except ConfigError as err:
        problems.append(str(err))
    else:
        problems += [f"{args.file}: {why}" for why in start_problems(config, args.pipeline, args.listen)]
    why = store_problem(args.store, args.store_ca, args.store_cert, args.store_key, args.store_server_name)
    if why:
        problems.append(why)
    if args.json:
        emit({"file": str(args.file), "valid": not problems, "problems": problems}, "")
    elif problems:
        for why in problems:
            print(f"jumbogatectl: {why}", file=sys.stderr)
    else:
        emit(None, f"{args.file}: valid ({len(config.ports)} ports, {len(config.instances)} instances, {len(config.routes)} routes)")
    return EXIT_USAGE if problems else EXIT_OK


def completion_code(shell: str) -> str:
    import argcomplete

    return argcomplete.shellcode(["jumbogatectl"], shell=shell)


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    try:
        import argcomplete
    except ImportError:  # completion is a convenience: the tool works without it
        pass
    else:
        argcomplete.autocomplete(parser)
    args = parser.parse_args(argv)

    def emit(msg, text: str, lines: bool = False) -> None:
        if args.json:
            # A stream (watch) prints one object a line: JSON lines, for jq and friends.
            indent = None if lines else 2
            text = (
                json.dumps(msg, indent=indent)
                if isinstance(msg, dict)
                else json_format.MessageToJson(msg, preserving_proto_field_name=True, always_print_fields_with_no_presence=True, indent=indent)
            )
        print(text, flush=True)

    if args.area == "completion":
        print(completion_code(args.shell), end="")
        return EXIT_OK
    if args.area == "config" and args.action == "validate":
        return validate_config(args, emit)
    try:
        with open_channel(args) as channel:
            run_command(args, policy_pb2_grpc.PolicyStub(channel), emit)
    except UsageError as err:
        print(f"jumbogatectl: {err}", file=sys.stderr)
        return EXIT_USAGE
    except grpc.RpcError as err:
        code, what = _STATUS_EXIT.get(err.code(), (EXIT_ERROR, err.code().name.lower()))
        detail = err.details() or ""
        # The controller's own answer that its store is unreachable says so itself.
        if code == EXIT_UNREACHABLE and not detail.startswith(("etcd at ", "the SmartNIC", "SmartNIC: ", "this controller")):
            detail = f"no answer from {args.controller} (is jumbogate-controller running? set --controller or $JUMBOGATE_CONTROLLER)"
        print(f"jumbogatectl: {what}: {detail}", file=sys.stderr)
        return code
    except KeyboardInterrupt:
        # Ctrl-C is how a watch ends; any other call it cuts short has no answer, and a change
        # (an import, say) may have been made or not: exit 0 said it was.
        if args.area == "watch":
            return EXIT_OK
        print("jumbogatectl: interrupted before the controller answered: a change may or may not have been made", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        # The reader went away (watch | head): nothing more to print, and nothing for Python to
        # complain of when it flushes stdout at exit.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_OK
    return EXIT_OK


def package_version() -> str:
    from .daemon import package_version as version

    return version()


if __name__ == "__main__":
    sys.exit(main())
