"""`make attack`: cheap attacks on the border's state, end to end through the emulated rack.

Each attack runs for a few seconds while a legitimate transfer (Internet host
ext1 to the jumbo instance, a merge service, paced) crosses the border. For
each: what the attacker sent and at what rate, what the border did (its
counters), and whether legitimate traffic kept merging and signals kept
flowing. Exits 1 when any attack got through. Bounded: loopback, veths and
Mininet namespaces only.

  fake-elephants     60-byte frames claiming 8500-byte IP packets, to a port
                     the elephant detector watches (issue: lying lengths fed
                     the sketch, and a full merge_flows table stopped all
                     switch programming)
  elephant-flood     full-size segments that tell the truth, 25 in a row per
                     spoofed flow: each flow pays for its bytes and becomes an
                     elephant, hundreds a second (issue: the controller
                     onloaded every one; a full merge_flows table stopped all
                     switch programming, and the operator's onloads were
                     refused)
  nic-pinning        a control client onloads and offloads flows on the
                     SmartNIC until its pin budget is full, then keeps asking
                     (issue: pinned entries filled its flow table for good)
  flow-spray         full-size segments of thousands of spoofed flows to a
                     merge service (issue: a blind collision with a real flow
                     moved its sequence state and stopped its merging)
  signal-reflection  frames claiming oversize IP packets, with DF, toward the
                     1500-byte instance from spoofed sources (issue: each made
                     an ICMP error to a victim, and ~100 pps silenced every
                     signal on the port)
  dashboard-certificate
                     the read-only dashboard's certificate, from the rack's
                     own CA, does what the controller does: P4Runtime
                     arbitration for a fresh role and for the default role
                     above the controller, a route written, and the
                     SmartNIC's Configure, SetPathMtu, OnloadFlow and
                     ProbePath (issue: a certificate from the CA was a grant:
                     it wrote routes and deposed the controller)
  probe-amplification
                     spoofed SYNs to an open port of the jumbo instance,
                     whose SYN-ACKs go out through the SmartNIC, with path
                     MTU discovery on (issue: every SYN-ACK to a new
                     destination started a probe round at it: about 1,100
                     bytes of probes per byte the attacker sent)
  primary-batch      a client with the controller's own certificate and a
                     higher election id takes the switch over and writes one
                     batch of 100,000 updates (existing next-hop members
                     rewritten as they are) while pings cross the switch
                     (issue: each batch ran whole under the data plane's
                     lock: 20,000 updates stopped forwarding for 3.3 s)

The rack runs with mutual TLS on every control channel (as make run TLS=1).

Results go to results/attack-<time>/ (report.txt, attack.json).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

from . import measure, plan, procs
from .rack import Rack, cannot_start

RESULTS = procs.REPO / "results"
SCENARIOS = (
    "fake-elephants",
    "elephant-flood",
    "nic-pinning",
    "flow-spray",
    "signal-reflection",
    "dashboard-certificate",
    "probe-amplification",
    "primary-batch",
)
ATTACKER = plan.ROUTERS[1]  # up2: directly connected to external port 2
LEGIT_SENDER = plan.EXTERNAL_HOSTS[0]  # ext1, reaching the border through up1
LEGIT_MBPS = 100
ELEPHANT_WATCHED_PORT = 7000  # not a merge service: only the detector can onload it
# The SmartNIC of this rack pins at most this many onloaded flows, so that
# the pinning attack fills the budget in seconds (the default is a quarter
# of the flow table, 16384).
NIC_PIN_BUDGET = 1024
# The rack's admission limits during make attack, small enough for a flood
# of a few seconds to reach them (rack.yaml keeps the production values).
ATTACK_ELEPHANT_LIMITS = {"threshold_bytes": 30000, "max_flows": 16, "max_onloads_per_epoch": 8}
LEGIT_SIGNALS = 10  # oversize datagrams the jumbo instance sends during signal-reflection
PRIMARY_BATCH_UPDATES = 100_000  # jumbogate-switch's most updates in one WriteRequest
# Forwarding holds during the batch when no two echo replies are further
# apart than this while the Write runs (a batch under one lock stopped it
# for the whole Write: 7 to 15 s here; the rest is this small machine's
# scheduling, a few hundred ms under the emulation's load).
PRIMARY_BATCH_LONGEST_GAP_S = 2.0
# How long the controller may take to be primary again once the batch's
# client left (finsy's promotion, then the reconcile that re-reads the
# switch): a bound on the wait, not a figure asserted; the time is reported.
PRIMARY_BACK_BOUND_S = 30.0


@dataclass
class AttackResult:
    name: str
    attack: str  # what the attacker did, with its rate
    border: dict[str, int] = field(default_factory=dict)  # counters the border moved
    legit: str = ""
    held: bool = False
    failures: list[str] = field(default_factory=list)


# ----- readings -----


def controller_stats(rack: Rack) -> dict:
    return json.loads(rack.ctl("stats", json_output=True).stdout)


class ElephantWatch:
    """The controller's event stream (`jumbogatectl watch`) while an attack runs: the elephants it detected.

    The verdict rests on these, not on the count of digests: a digest may name any flow the sketch counts, and
    the controller leaves alone those it would not merge. An elephant detected is a digest the controller took
    as a flow to merge, which the lying frames' flows would be."""

    def __init__(self, rack: Rack, seconds: float):
        self.proc = subprocess.Popen(
            rack.ctl_argv("watch", "--duration", f"{seconds:.1f}", json_output=True), stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
        )

    def detected(self) -> list[str]:
        """The flows of the ELEPHANT_DETECTED events seen, once the watch has ended (or been stopped)."""
        if self.proc.poll() is None:
            self.proc.terminate()
        out, _ = self.proc.communicate(timeout=10)
        events = [json.loads(line) for line in out.splitlines() if line.strip().startswith("{")]
        return [json.dumps(e.get("flow", {}), sort_keys=True) for e in events if "ELEPHANT_DETECTED" in str(e.get("kind", ""))]


def drops(stats: dict, reason: str) -> int:
    return sum(int(d.get("count", {}).get("packets", 0)) for d in stats.get("drops", []) if d.get("reason") == reason)


def nested(stats: dict, *path: str) -> int:
    for key in path:
        stats = stats.get(key, {}) if isinstance(stats, dict) else {}
    return int(stats or 0)


def nic_stub(tls=None):
    """The SmartNIC's control API as an attacker in the controller's place would reach it (with the rack's TLS when on)."""
    import grpc

    from jumbogate.v1 import nic_pb2_grpc

    channel = grpc.secure_channel(plan.NIC_CONTROL_ADDRESS, tls.credentials()) if tls else grpc.insecure_channel(plan.NIC_CONTROL_ADDRESS)
    return nic_pb2_grpc.NicStub(channel)


def nic_stats(tls=None) -> dict[str, int]:
    from jumbogate.v1 import nic_pb2

    reply = nic_stub(tls).GetStats(nic_pb2.GetNicStatsRequest(), timeout=10)
    stats = {name: int(getattr(reply, name)) for name in ("merged_packets", "flows_active", "flows_evicted", "onloads_refused", "packets_in")}
    for name in ("probe_bytes", "rounds_started", "hello_rounds", "outbound_ignored"):
        stats[f"pmtu_{name}"] = int(reply.path_mtu_discovery.get(name, 0))
    return stats


# ----- the legitimate transfer and the attacker's flood -----


class LegitTransfer:
    """ext1 sends a paced file to the jumbo instance's merge service; started before the attack, checked after."""

    def __init__(self, rack: Rack, workdir: Path, seconds: float, port: int):
        self.rack, self.port = rack, port
        self.infile, self.outfile = workdir / f"legit-{port}.bin", workdir / f"legit-{port}.out"
        with self.infile.open("wb") as out:
            out.write(os.urandom(int(LEGIT_MBPS * 1e6 / 8 * seconds)))
        receiver = rack.host(plan.JUMBO.host)
        self.server = receiver.popen(measure.module_command("transfer", "serve", port, self.outfile), env=measure.MODULE_ENV)
        measure.wait_listening(receiver, (port,))
        self.client = rack.host(LEGIT_SENDER.host).popen(
            measure.module_command("transfer", "send", plan.JUMBO.address.ip4, port, self.infile, LEGIT_MBPS), env=measure.MODULE_ENV
        )

    def finish(self, timeout: float) -> tuple[bool, int]:
        """(arrived whole, bytes sent)."""
        try:
            sent, _ = self.client.communicate(timeout=timeout)
            received, _ = self.server.communicate(timeout=30)
        finally:
            for proc in (self.client, self.server):
                if proc.poll() is None:
                    proc.kill()
        sent_fields, received_fields = sent.decode().split(), received.decode().split()
        whole = bool(sent_fields) and sent_fields[-2:] == received_fields[-2:]
        expected = hashlib.sha256(self.infile.read_bytes()).hexdigest()
        self.infile.unlink(missing_ok=True)
        self.outfile.unlink(missing_ok=True)
        return whole and sent_fields[-1] == expected, int(sent_fields[-2]) if len(sent_fields) >= 2 else 0


def start_flood(rack: Rack, kind: str, dst: str, dport: int, rate: float, seconds: float):
    port = ATTACKER.port
    return rack.host(ATTACKER.host).popen(
        measure.module_command("flood", kind, port.peer_intf, port.peer_mac, port.mac, dst, dport, rate, seconds), env=measure.MODULE_ENV
    )


def flood_result(proc, seconds: float) -> dict:
    out, err = proc.communicate(timeout=seconds + 60)
    if proc.returncode != 0:
        raise RuntimeError(f"flood failed: {err.decode()[-500:]}")
    return json.loads(out.decode().strip().splitlines()[-1])


def with_legit_traffic(rack: Rack, workdir: Path, seconds: float, port: int, attack: Callable[[], dict]) -> tuple[dict, bool, int, int]:
    """Run `attack` while a legitimate transfer crosses the border: (attack's figures, arrived whole, bytes, merged packets)."""
    merged_before = nic_stats(rack.tls)["merged_packets"]
    legit = LegitTransfer(rack, workdir, seconds, port)
    figures = attack()
    whole, sent = legit.finish(timeout=seconds * 4 + 60)
    return figures, whole, sent, nic_stats(rack.tls)["merged_packets"] - merged_before


def legit_verdict(result: AttackResult, whole: bool, sent: int, merged: int) -> None:
    result.legit = f"transfer of {sent / 1e6:.1f} MB at {LEGIT_MBPS} Mbit/s {'arrived whole' if whole else 'DAMAGED'}, {merged} merged packets"
    if not whole:
        result.failures.append("the legitimate transfer did not arrive whole")
    if merged == 0:
        result.failures.append("the legitimate transfer was not merged")


# ----- the attacks -----


def delivered_lies(rack: Rack, workdir: Path, instance: plan.Instance, dport: int) -> measure.Capture:
    """What of the flood reaches the instance: nothing may (the frames lie about their length)."""
    return measure.Capture(rack.host(instance.host), f"{instance.host}-eth0", workdir / f"lies-{instance.host}.pcap", bpf=f"tcp dst port {dport} and less 100")


def fake_elephants(rack: Rack, workdir: Path, seconds: float, rate: float) -> AttackResult:
    before = controller_stats(rack)
    lies = delivered_lies(rack, workdir, plan.JUMBO, ELEPHANT_WATCHED_PORT)
    # Outlives the attack and the legitimate transfer's end; stopped when the attack is judged.
    watch = ElephantWatch(rack, seconds * 4 + 90)

    def attack() -> dict:
        flood = start_flood(rack, "claimed-length", plan.JUMBO.address.ip4, ELEPHANT_WATCHED_PORT, rate, seconds)
        # The operator's own programming must keep working meanwhile.
        time.sleep(seconds / 2)
        round_trip = operator_round_trip(rack, 45000)
        return {**flood_result(flood, seconds), "operator_round_trip": int(round_trip)}

    figures, whole, sent, merged = with_legit_traffic(rack, workdir, seconds, plan.IPERF_PORTS[1], attack)
    delivered = len(lies.stop())
    detected = watch.detected()
    after = controller_stats(rack)
    result = AttackResult("fake-elephants", f"{figures['sent']} frames of 60 B claiming {8500} B, {figures['sent'] / figures['seconds']:.0f}/s")
    result.border = {
        # Fewer than sent when the switch cannot take the rate (BMv2 sheds
        # frames before its pipeline sees them).
        "dropped ip-length-past-frame": drops(after, "IP_LENGTH_PAST_FRAME") - drops(before, "IP_LENGTH_PAST_FRAME"),
        "delivered to the instance": delivered,
        "elephants detected": len(detected),
        # Information: digests of any flow (ElephantWatch).
        "elephant digests": nested(after, "digests_received") - nested(before, "digests_received"),
        "refused switch writes": nested(after, "reconcile", "failed_batches") - nested(before, "reconcile", "failed_batches"),
        "operator onload+offload worked": figures["operator_round_trip"],
    }
    legit_verdict(result, whole, sent, merged)
    if result.border["dropped ip-length-past-frame"] == 0 or delivered != 0:
        result.failures.append("lying frames were not dropped")
    if detected:
        result.failures.append(f"lying frames made elephants: {'; '.join(detected)}")
    if result.border["refused switch writes"] != 0 or not figures["operator_round_trip"]:
        result.failures.append("switch programming failed during the attack")
    return result


def operator_round_trip(rack: Rack, sport: int) -> bool:
    """The operator onloads a flow and takes it off again through the API."""
    flow = (f"203.0.113.11:{sport}", f"{plan.JUMBO.address.ip4}:5209")
    onload = rack.ctl("flows", "onload", *flow, check=False)
    offload = rack.ctl("flows", "offload", *flow, check=False)
    return onload.returncode == 0 and offload.returncode == 0


def elephant_flood(rack: Rack, workdir: Path, seconds: float, rate: float) -> AttackResult:
    before = controller_stats(rack)
    watch = ElephantWatch(rack, seconds * 4 + 90)
    flood_rate = min(rate, 5000)  # full-size frames: 60 Mbit/s on top of the transfer
    limits = ATTACK_ELEPHANT_LIMITS
    peak = 0

    def attack() -> dict:
        nonlocal peak
        flood = start_flood(rack, "elephants", plan.JUMBO.address.ip4, ELEPHANT_WATCHED_PORT, flood_rate, seconds)
        round_trip = None
        # For as long as the flood runs (it builds its frames first).
        while flood.poll() is None:
            flows = nested(controller_stats(rack), "admission", "flows")
            peak = max(peak, flows)
            if round_trip is None and flows >= limits["max_flows"]:
                # The merge path is full of elephants: the operator still gets in.
                round_trip = operator_round_trip(rack, 45001)
            time.sleep(0.2)
        # The last digests of the flood may be onloaded after it ends (the
        # controller lags on a loaded machine); the flows stay until they
        # go idle, so a few more samples see them.
        settle = time.monotonic() + 3
        while peak < limits["max_flows"] and time.monotonic() < settle:
            peak = max(peak, nested(controller_stats(rack), "admission", "flows"))
            time.sleep(0.2)
        if round_trip is None:
            round_trip = operator_round_trip(rack, 45001)
        return {**flood_result(flood, seconds), "operator_round_trip": int(round_trip)}

    figures, whole, sent, merged = with_legit_traffic(rack, workdir, seconds, plan.IPERF_PORTS[5], attack)
    detected = watch.detected()
    after = controller_stats(rack)
    result = AttackResult(
        "elephant-flood",
        f"{figures['sent']} full-size segments, {ELEPHANT_RUN_NOTE}, {figures['sent'] / figures['seconds']:.0f}/s "
        f"(limits: threshold {limits['threshold_bytes']} B, max_flows {limits['max_flows']}, {limits['max_onloads_per_epoch']} per epoch)",
    )
    result.border = {
        "elephant digests": nested(after, "digests_received") - nested(before, "digests_received"),
        "elephants detected": len(detected),
        "rate-limited": nested(after, "admission", "elephants_rate_limited") - nested(before, "admission", "elephants_rate_limited"),
        "evicted": nested(after, "admission", "flows_evicted") - nested(before, "admission", "flows_evicted"),
        "most flows on the merge path": peak,
        "refused switch writes": nested(after, "reconcile", "failed_batches") - nested(before, "reconcile", "failed_batches"),
        "operator onload+offload worked": figures["operator_round_trip"],
    }
    legit_verdict(result, whole, sent, merged)
    if result.border["rate-limited"] == 0 or result.border["evicted"] == 0 or peak < limits["max_flows"]:
        result.failures.append("the flood never reached the admission limits (the attack did not bite)")
    if peak > limits["max_flows"]:
        result.failures.append(f"{peak} flows on the merge path, above max_flows {limits['max_flows']}")
    if result.border["refused switch writes"] != 0 or not figures["operator_round_trip"]:
        result.failures.append("switch programming or the operator's onload failed during the attack")
    return result


ELEPHANT_RUN_NOTE = "25 in a row per spoofed flow"


def nic_pinning(rack: Rack, workdir: Path, seconds: float, rate: float) -> AttackResult:
    from jumbogate.v1 import common_pb2, nic_pb2

    stub = nic_stub(rack.tls)
    before = nic_stats(rack.tls)
    # The client holds what the leading controller holds: its certificate
    # and its election id (the SmartNIC refuses changes without the
    # leader's id). What is tested is the pin budget, not the fence.
    fence = stub.GetStats(nic_pb2.GetNicStatsRequest(), timeout=10).fence
    leader = [("jumbogate-election-id", f"{fence.election_id_high}:{fence.election_id_low}")] if fence.election_id_high else None

    def request(n: int) -> nic_pb2.NicFlowRequest:
        flow = common_pb2.FiveTuple(
            src_ip=f"198.18.{n >> 8 & 255}.{n & 255}", dst_ip=plan.JUMBO.address.ip4, protocol=6, src_port=10000 + n % 50000, dst_port=443
        )
        return nic_pb2.NicFlowRequest(flow=flow)

    def attack() -> dict:
        # Cycles of onload and offload (10x the budget), then onloads only (2x): at most 64 requests in flight.
        calls = []
        for n in range(10 * NIC_PIN_BUDGET):
            calls += [(stub.OnloadFlow.future, n), (stub.OffloadFlow.future, n)]
        calls += [(stub.OnloadFlow.future, 10 * NIC_PIN_BUDGET + n) for n in range(2 * NIC_PIN_BUDGET)]
        start, outcomes, window = time.monotonic(), {}, []
        for method, n in calls:
            window.append(method(request(n), timeout=10, metadata=leader))
            if len(window) == 64:
                for done in window:
                    code = done.code().name if done.exception() else "OK"
                    outcomes[code] = outcomes.get(code, 0) + 1
                window.clear()
        for done in window:
            code = done.code().name if done.exception() else "OK"
            outcomes[code] = outcomes.get(code, 0) + 1
        return {"requests": len(calls), "seconds": time.monotonic() - start, "outcomes": outcomes}

    figures, whole, sent, merged = with_legit_traffic(rack, workdir, seconds, plan.IPERF_PORTS[2], attack)
    after = nic_stats(rack.tls)
    result = AttackResult("nic-pinning", f"{figures['requests']} onload/offload requests, {figures['requests'] / figures['seconds']:.0f}/s")
    result.border = {
        "onloads refused (RESOURCE_EXHAUSTED)": figures["outcomes"].get("RESOURCE_EXHAUSTED", 0),
        "onloads_refused counter": after["onloads_refused"] - before["onloads_refused"],
        "flows on the SmartNIC after": after["flows_active"],
    }
    legit_verdict(result, whole, sent, merged)
    if result.border["onloads refused (RESOURCE_EXHAUSTED)"] == 0:
        result.failures.append("the pin budget never refused an onload")
    return result


def flow_spray(rack: Rack, workdir: Path, seconds: float, rate: float) -> AttackResult:
    before = nic_stats(rack.tls)
    spray_rate = min(rate, 5000)  # full-size frames: 5000/s is 60 Mbit/s on top of the transfer

    def attack() -> dict:
        return flood_result(start_flood(rack, "spray", plan.JUMBO.address.ip4, plan.IPERF_PORTS[3], spray_rate, seconds), seconds)

    figures, whole, sent, merged = with_legit_traffic(rack, workdir, seconds, plan.IPERF_PORTS[3], attack)
    after = nic_stats(rack.tls)
    result = AttackResult("flow-spray", f"{figures['sent']} segments of 2048 spoofed flows to the same service, {figures['sent'] / figures['seconds']:.0f}/s")
    result.border = {
        "SmartNIC packets in": after["packets_in"] - before["packets_in"],
        "flows evicted": after["flows_evicted"] - before["flows_evicted"],
    }
    legit_verdict(result, whole, sent, merged)
    return result


def signal_reflection(rack: Rack, workdir: Path, seconds: float, rate: float) -> AttackResult:
    before = controller_stats(rack)
    lies = delivered_lies(rack, workdir, plan.LEGACY, 80)
    jumbo = rack.host(plan.JUMBO.host)
    capture = measure.Capture(jumbo, f"{plan.JUMBO.host}-eth0", workdir / "signals.pcap", bpf="icmp[icmptype] == 3 and icmp[icmpcode] == 4")
    # The jumbo instance's own oversize datagrams (1600 B, DF, to ext1 behind a
    # 1500-byte path): each must still be answered with a signal.
    sender = (
        "import socket, time\n"
        "s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
        "s.setsockopt(socket.IPPROTO_IP, 10, 3)  # IP_MTU_DISCOVER = IP_PMTUDISC_PROBE: DF, ignore learned MTUs\n"
        f"for i in range({LEGIT_SIGNALS}):\n"
        f"    s.sendto(bytes(1572), ('{LEGIT_SENDER.address.ip4}', 9))\n"
        f"    time.sleep({seconds / (LEGIT_SIGNALS + 1):.3f})\n"
    )

    def attack() -> dict:
        flood = start_flood(rack, "claimed-length", plan.LEGACY.address.ip4, 80, rate, seconds)
        time.sleep(0.2)
        jumbo.cmd(f"{sys.executable} -c {shlex.quote(sender)}")
        return flood_result(flood, seconds)

    figures, whole, sent, merged = with_legit_traffic(rack, workdir, seconds, plan.IPERF_PORTS[4], attack)
    received = len(capture.stop())
    # The signals taught the jumbo instance's kernel a 1500-byte path to ext1
    # (kept ten minutes): its next connections from ext1 would announce an
    # MSS of 1460, and the attacks after this one would see nothing merged.
    jumbo.cmd("ip route flush cache")
    delivered = len(lies.stop())
    after = controller_stats(rack)
    result = AttackResult(
        "signal-reflection",
        f"{figures['sent']} frames of 60 B with DF claiming 8500 B toward the 1500-byte instance, {figures['sent'] / figures['seconds']:.0f}/s",
    )
    result.border = {
        "dropped ip-length-past-frame": drops(after, "IP_LENGTH_PAST_FRAME") - drops(before, "IP_LENGTH_PAST_FRAME"),
        "delivered to the instance": delivered,
        "ICMP errors generated": nested(after, "icmp_generated") - nested(before, "icmp_generated"),
        "legitimate signals received": received,
    }
    legit_verdict(result, whole, sent, merged)
    if result.border["dropped ip-length-past-frame"] == 0 or delivered != 0:
        result.failures.append("lying frames were not dropped")
    if result.border["ICMP errors generated"] != LEGIT_SIGNALS:
        result.failures.append(f"{result.border['ICMP errors generated']} ICMP errors generated where the instance's {LEGIT_SIGNALS} alone needed one each")
    if received != LEGIT_SIGNALS:
        result.failures.append(f"the jumbo instance got {received} of {LEGIT_SIGNALS} signals")
    return result


def p4runtime_as(credentials, role: str, election_high: int) -> str:
    """Arbitrate for `role` with an election id above any controller's and write one route: the first refusal's code, or OK."""
    import grpc
    from finsy.proto import p4r, p4r_grpc

    update = p4r.MasterArbitrationUpdate(device_id=1, election_id=p4r.Uint128(high=election_high))
    update.role.name = role
    with grpc.secure_channel(plan.P4RUNTIME_ADDRESS, credentials) as channel:
        stub = p4r_grpc.P4RuntimeStub(channel)
        stream = stub.StreamChannel(iter([p4r.StreamMessageRequest(arbitration=update)]), timeout=5)
        try:
            for _answer in stream:
                break
            write = p4r.WriteRequest(device_id=1, role=role, election_id=update.election_id)
            entry = write.updates.add(type=p4r.Update.INSERT).entity.table_entry
            entry.table_id = 1  # any id: a switch that checked nothing would answer for the table, not the caller
            stub.Write(write, timeout=5)
        except grpc.RpcError as err:
            return err.code().name
        finally:
            stream.cancel()
    return "OK"


def smartnic_as(credentials) -> dict[str, str]:
    """The SmartNIC calls that change it, each as the given certificate: method -> code."""
    import grpc

    from jumbogate.v1 import common_pb2, nic_pb2, nic_pb2_grpc

    flow = common_pb2.FiveTuple(src_ip="198.18.0.1", dst_ip=plan.JUMBO.address.ip4, protocol=6, src_port=40000, dst_port=443)
    calls = {
        "Configure": lambda stub: stub.Configure(nic_pb2.NicConfig(), timeout=5),
        "SetPathMtu": lambda stub: stub.SetPathMtu(nic_pb2.SetPathMtuRequest(), timeout=5),
        "OnloadFlow": lambda stub: stub.OnloadFlow(nic_pb2.NicFlowRequest(flow=flow), timeout=5),
        "ProbePath": lambda stub: stub.ProbePath(common_pb2.ProbePathRequest(), timeout=5),
    }
    codes = {}
    with grpc.secure_channel(plan.NIC_CONTROL_ADDRESS, credentials) as channel:
        stub = nic_pb2_grpc.NicStub(channel)
        for name, call in calls.items():
            try:
                call(stub)
                codes[name] = "OK"
            except grpc.RpcError as err:
                codes[name] = err.code().name
    return codes


def dashboard_certificate(rack: Rack, workdir: Path, seconds: float, rate: float) -> AttackResult:
    from .tls import VIEWER

    result = AttackResult("dashboard-certificate", "the read-only dashboard's certificate calls the switch and the SmartNIC as the controller does")
    if rack.tls is None:
        result.failures.append("the rack runs without TLS: there is no certificate to steal")
        return result
    before = controller_stats(rack)

    def attack() -> dict:
        dashboard = rack.tls.credentials(VIEWER)
        started = time.monotonic()
        codes = {f"smartnic {name}": code for name, code in smartnic_as(dashboard).items()}
        if rack.target == "soft":
            codes["switch role mallory"] = p4runtime_as(dashboard, "mallory", 1 << 62)
            codes["switch default role"] = p4runtime_as(dashboard, "", 1 << 62)
        time.sleep(max(0.0, seconds / 2 - (time.monotonic() - started)))
        return {"codes": codes, "operator_round_trip": int(operator_round_trip(rack, 45010))}

    figures, whole, sent, merged = with_legit_traffic(rack, workdir, seconds, plan.IPERF_PORTS[6], attack)
    after = controller_stats(rack)
    codes = figures["codes"]
    result.border = {
        "calls refused (PERMISSION_DENIED)": sum(code == "PERMISSION_DENIED" for code in codes.values()),
        "calls answered otherwise": sum(code != "PERMISSION_DENIED" for code in codes.values()),
        "controller still primary": int(bool(after.get("switch_connected"))),
        "refused switch writes": nested(after, "reconcile", "failed_batches") - nested(before, "reconcile", "failed_batches"),
        "operator onload+offload worked": figures["operator_round_trip"],
    }
    if rack.target != "soft":
        result.border["switch calls"] = "not tried: BMv2 checks no client identity"
    legit_verdict(result, whole, sent, merged)
    let_through = sorted(name for name, code in codes.items() if code != "PERMISSION_DENIED")
    if let_through:
        result.failures.append("answered the dashboard: " + ", ".join(f"{name} ({codes[name]})" for name in let_through))
    if not result.border["controller still primary"] or result.border["refused switch writes"] or not figures["operator_round_trip"]:
        result.failures.append("the controller lost the switch or its writes failed")
    return result


PROBED_PORT = 8443  # an open port of the jumbo instance, for probe-amplification


def probe_amplification(rack: Rack, workdir: Path, seconds: float, rate: float) -> AttackResult:
    syn_rate = min(rate, 2000)  # SYN-ACKs the instance answers: its backlog and syncookies, not the border, bound them
    jumbo = rack.host(plan.JUMBO.host)
    listener = jumbo.popen(
        [sys.executable, "-c", f"import socket, time\ns = socket.socket()\ns.bind(('0.0.0.0', {PROBED_PORT}))\ns.listen(4096)\ntime.sleep({seconds + 30})"]
    )
    time.sleep(0.3)
    before = nic_stats(rack.tls)

    def attack() -> dict:
        return flood_result(start_flood(rack, "syns", plan.JUMBO.address.ip4, PROBED_PORT, syn_rate, seconds), seconds)

    try:
        figures, whole, sent, merged = with_legit_traffic(rack, workdir, seconds, plan.IPERF_PORTS[8], attack)
    finally:
        listener.kill()
        listener.wait(timeout=10)
    after = nic_stats(rack.tls)
    probe_bytes = after["pmtu_probe_bytes"] - before["pmtu_probe_bytes"]
    result = AttackResult(
        "probe-amplification",
        f"{figures['sent']} spoofed SYNs ({figures['bytes']} bytes) to an open port of the jumbo instance, {figures['sent'] / figures['seconds']:.0f}/s",
    )
    result.border = {
        "bytes of probes sent": probe_bytes,
        "probe bytes per attacker byte": round(probe_bytes / max(1, figures["bytes"]), 3),
        "rounds started": after["pmtu_rounds_started"] - before["pmtu_rounds_started"],
        "outbound packets that started nothing": after["pmtu_outbound_ignored"] - before["pmtu_outbound_ignored"],
    }
    legit_verdict(result, whole, sent, merged)
    if probe_bytes > figures["bytes"]:
        result.failures.append(f"the border sent {probe_bytes} bytes of probes for {figures['bytes']} bytes of SYNs")
    # The instance answers each SYN (with a cookie past its backlog), and each
    # SYN-ACK passes the SmartNIC: unless most of them were seen there, the
    # attack did not test discovery at all.
    if result.border["outbound packets that started nothing"] < figures["sent"] // 2:
        result.failures.append("too few SYN-ACKs reached the SmartNIC's path MTU discovery: the attack did not test it")
    return result


def batch_as_primary(credentials, updates: int) -> dict:
    """Arbitrate above the controller, rewrite the switch's next-hop members as they are, `updates` times in all, in one Write; then leave."""
    import queue

    import grpc
    from finsy.proto import p4r, p4r_grpc

    options = [("grpc.max_send_message_length", 64 << 20), ("grpc.max_receive_message_length", 64 << 20)]
    channel = grpc.secure_channel(plan.P4RUNTIME_ADDRESS, credentials, options) if credentials else grpc.insecure_channel(plan.P4RUNTIME_ADDRESS, options)
    election = p4r.Uint128(high=1 << 62)
    with channel:
        stub = p4r_grpc.P4RuntimeStub(channel)
        outgoing: queue.Queue = queue.Queue()
        outgoing.put(p4r.StreamMessageRequest(arbitration=p4r.MasterArbitrationUpdate(device_id=1, election_id=election)))
        stream = stub.StreamChannel(iter(outgoing.get, None))
        answer = next(stream)
        if answer.arbitration.status.code != 0:
            outgoing.put(None)
            return {"primary": 0, "codes": {}, "started": 0.0, "ended": 0.0, "seconds": 0.0}
        members = [
            entity.action_profile_member
            for reply in stub.Read(p4r.ReadRequest(device_id=1, entities=[p4r.Entity(action_profile_member=p4r.ActionProfileMember())]), timeout=10)
            for entity in reply.entities
        ]
        write = p4r.WriteRequest(device_id=1, election_id=election)
        for n in range(updates):
            write.updates.add(type=p4r.Update.MODIFY).entity.action_profile_member.CopyFrom(members[n % len(members)])
        started = time.time()
        try:
            stub.Write(write, timeout=120)
            codes = {"OK": updates}
        except grpc.RpcError as err:
            codes = {err.code().name: updates}
        ended = time.time()
        outgoing.put(None)
        stream.cancel()
    return {"primary": 1, "codes": codes, "started": started, "ended": ended, "seconds": ended - started, "members": len(members)}


def reply_gaps(ping_output: str, start: float, end: float) -> tuple[int, float]:
    """From `ping -D` output: replies between start and end (unix time) and the longest gap between two of them there."""
    times = [float(line[1 : line.index("]")]) for line in ping_output.splitlines() if line.startswith("[") and "bytes from" in line]
    inside = [t for t in times if start <= t <= end]
    edges = [start, *inside, end]
    return len(inside), max(b - a for a, b in zip(edges, edges[1:], strict=False))


def primary_batch(rack: Rack, workdir: Path, seconds: float, rate: float) -> AttackResult:
    result = AttackResult("primary-batch", f"one Write of {PRIMARY_BATCH_UPDATES:,} updates from a primary above the controller")
    before = controller_stats(rack)
    credentials = rack.tls.credentials("controller") if rack.tls else None

    def attack() -> dict:
        # To a file: a pipe read only at the end would fill and stop ping.
        log = workdir / "primary-batch-ping.txt"
        with open(log, "w") as out:
            pinger = rack.host(LEGIT_SENDER.host).popen(
                ["ping", "-D", "-n", "-i", "0.005", "-w", str(int(seconds) + 60), plan.JUMBO.address.ip4], stdout=out, stderr=subprocess.STDOUT
            )
        time.sleep(0.5)
        figures = batch_as_primary(credentials, PRIMARY_BATCH_UPDATES)
        # SIGINT: ping ends with its summary (SIGTERM could lose what it buffered).
        pinger.send_signal(signal.SIGINT)
        pinger.wait(timeout=10)
        out = log.read_text()
        figures["replies"], figures["longest_gap"] = reply_gaps(out, figures["started"], figures["ended"])
        # The controller takes the switch back once the batch's client left.
        figures["operator_round_trip"] = int(operator_round_trip(rack, 45020))
        return figures

    figures, whole, sent, merged = with_legit_traffic(rack, workdir, seconds, plan.IPERF_PORTS[9], attack)
    # Polled, not read once: the switch promotes the controller when the batch's
    # client leaves, and the controller says so after its reconcile.
    left = time.monotonic()
    after = controller_stats(rack)
    while not after.get("switch_connected") and time.monotonic() - left < PRIMARY_BACK_BOUND_S:
        time.sleep(0.2)
        after = controller_stats(rack)
    result.border = {
        "became primary": figures["primary"],
        "updates applied": figures["codes"].get("OK", 0),
        "batch seconds": round(figures["seconds"], 2),
        "echo replies during the Write": figures["replies"],
        "longest gap between replies (ms)": round(figures["longest_gap"] * 1e3, 1),
        "controller primary again": int(bool(after.get("switch_connected"))),
        "seconds until it was": round(time.monotonic() - left, 1),
        "operator onload+offload worked": figures["operator_round_trip"],
        "refused switch writes": nested(after, "reconcile", "failed_batches") - nested(before, "reconcile", "failed_batches"),
    }
    legit_verdict(result, whole, sent, merged)
    if not figures["primary"] or result.border["updates applied"] != PRIMARY_BATCH_UPDATES:
        result.failures.append(f"the batch did not run whole: {figures['codes']}")
    if figures["replies"] == 0 or figures["longest_gap"] > PRIMARY_BATCH_LONGEST_GAP_S:
        result.failures.append(f"forwarding stopped during the batch (longest gap {figures['longest_gap']:.2f} s)")
    if not result.border["controller primary again"] or not figures["operator_round_trip"]:
        result.failures.append("the controller did not get the switch back")
    return result


ATTACKS = {
    "fake-elephants": fake_elephants,
    "elephant-flood": elephant_flood,
    "nic-pinning": nic_pinning,
    "flow-spray": flow_spray,
    "signal-reflection": signal_reflection,
    "dashboard-certificate": dashboard_certificate,
    "probe-amplification": probe_amplification,
    "primary-batch": primary_batch,
}


# ----- report -----


def render(results: list[AttackResult], target: str, seconds: float) -> str:
    lines = [f"jumbogate emulated rack under attack: {target} switch, {seconds:g} s per attack, legitimate transfer at {LEGIT_MBPS} Mbit/s", ""]
    for r in results:
        lines.append(f"{r.name}: {'HELD' if r.held else 'FAILED'}")
        lines.append(f"  attack:  {r.attack}")
        lines.append("  border:  " + ", ".join(f"{k} {v}" for k, v in r.border.items()))
        lines.append(f"  legit:   {r.legit}")
        lines.extend(f"  failure: {f}" for f in r.failures)
    held = sum(r.held for r in results)
    lines.append("")
    lines.append(f"{held} of {len(results)} attacks held")
    return "\n".join(lines)


def run_attacks(rack: Rack, outdir: Path, names: list[str], seconds: float, rate: float) -> list[AttackResult]:
    results = []
    for i, name in enumerate(names, start=1):
        print(f"attack: {i}/{len(names)} {name} ({seconds:g} s) ...", flush=True)
        result = ATTACKS[name](rack, outdir, seconds, rate)
        result.held = not result.failures
        results.append(result)
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="make attack", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=10.0, help="length of each attack (default %(default)s)")
    parser.add_argument("--rate", type=float, default=20000, help="frames per second of the floods (default %(default)s; the spray is held to 5000)")
    parser.add_argument("--only", choices=SCENARIOS, action="append", help="run only this attack (repeatable)")
    parser.add_argument("--out", type=Path, default=None, help="results directory (default results/attack-<time>)")
    parser.add_argument("--switch", choices=("soft", "bmv2"), help="the switch target (default: $SWITCH, else soft: jumbogate-switch)")
    args = parser.parse_args(argv)
    if args.seconds <= 0 or args.rate <= 0:
        parser.error("--seconds and --rate must be positive")
    refusal = cannot_start("make attack", args.switch)
    if refusal:
        print(refusal, file=sys.stderr)
        return 1
    outdir = args.out or RESULTS / time.strftime("attack-%Y%m%d-%H%M%S")
    outdir.mkdir(parents=True, exist_ok=True)
    print("attack: bringing up the emulated rack ...", flush=True)
    try:
        with Rack(
            switch_target=args.switch,
            nic_options=("--max-onloaded-flows", str(NIC_PIN_BUDGET), "--pmtu-discovery", "on"),
            config_overrides={"elephant": ATTACK_ELEPHANT_LIMITS},
            workdir=outdir,
            tls=True,
        ) as rack:
            results = run_attacks(rack, outdir, args.only or list(SCENARIOS), args.seconds, args.rate)
            target = rack.target
    except (procs.StartError, RuntimeError, OSError) as err:
        print(f"make attack: {err}", file=sys.stderr)
        return 1
    text = render(results, target, args.seconds)
    (outdir / "report.txt").write_text(text + "\n")
    (outdir / "attack.json").write_text(json.dumps([asdict(r) for r in results], indent=1))
    print(text)
    print(f"\nreport: {outdir}/report.txt")
    return 0 if all(r.held for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
