"""`make fleet-chaos`: the fleet of three racks under faults, checked the way Jepsen checks (#32, item 5).

On the fleet of emulation/fleet.py (three racks, two controllers each, a
three-member etcd), for the length of the run:

  - a bulk TCP transfer through each rack (a1 -> b1, b1 -> c1, c1 -> a1);
  - a client that keeps changing the policy through the operator API of a
    random controller, one call at a time (the fleet flag anywhere, an
    instance's flag through its own rack), and keeps the history of every
    call: what it asked, where, when, and how it ended;
  - faults, one at a time:
      kill-leader     SIGKILL a rack's leading controller, restart it
      pause-leader    SIGSTOP it past its lease (2 s), then SIGCONT
      cut-controller  drop its traffic to etcd with nftables, then heal
      etcd-quorum     SIGKILL one etcd member, then a second (no quorum),
                      then restart both from their data directories

Then, with every fault healed, it checks:

  - history: for every key the run wrote, etcd's own history of the key
    (each revision's value, read back revision by revision) is explained by
    the calls: every acknowledged change is there, in order; no refused one
    is; a call whose outcome is unknown (timed out, its controller paused or
    unreachable) either took effect or did not, whole. No instance was
    turned on at a revision where the fleet flag was off.
  - the switches: read by independent P4Runtime clients, every switch holds
    the fleet flag etcd holds, and exactly its rack's instances with their
    flags (the last write of every key, on every switch it concerns);
  - fencing: each switch's record of accepted writes by election id
    (/jumbogate_switch/writes) shows no id that wrote after a higher id had;
  - without a quorum, no change was acknowledged, changes were refused with
    UNAVAILABLE, and every transfer kept moving (the last policy in force);
  - every transfer arrived whole (SHA-256 and length).

And it prints the time each rack took to have a new primary on its switch
after each leader fault (issue target: 3 s), and writes the whole result,
history included, as JSON.

    python3 -m emulation.fleet_chaos [--seconds S | --minutes M] [--seed N] [--json FILE]
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import grpc
from aetcd import rpc

from jumbogate.fleet import FLEET_JUMBO, PREFIX, instance_key
from jumbogate.p4 import names
from testlab import lab

from . import partition, procs
from .fleet import CONTROLLERS_PER_RACK, ETCD_CLIENT_PORTS, ETCD_MEMBERS, RACKS, Fleet, FleetRack, controller_role, switch_policy
from .rack import cannot_start
from .soak import TCP_RTO_MAX_MS, Flow, Transfer

FAULTS = ("kill-leader", "pause-leader", "cut-controller", "etcd-quorum")
# A paused or cut-off leader stays so this long: past its 2 s lease.
OUTLAST_LEASE_S = 5.0
# Between the second etcd member's death and the restart of both: long
# enough for calls whose whole store deadline (3 s) falls inside it.
QUORUM_LOSS_S = 8.0
STORE_DEADLINE_S = 3.0
# Between the first member's death and the second's: the cluster of two still serves.
ONE_MEMBER_DOWN_S = 3.0
# Between two API calls of the history's client. Its timeout is above the
# controller's own to etcd (3 s), so that the controller's answer is seen.
CALL_INTERVAL_S = 0.25
CALL_TIMEOUT_S = 6.0
# Bounds on waits, never figures asserted.
BOUND_S = 60.0
SETTLE_S = 60.0
# Codes that say a call did not take effect: the controller judged it and
# refused it. Any other failure leaves its outcome unknown.
REFUSALS = {"ABORTED", "INVALID_ARGUMENT", "FAILED_PRECONDITION", "NOT_FOUND", "PERMISSION_DENIED", "UNAUTHENTICATED"}

FLOWS = tuple(
    Flow(f"{a.instance}-to-{b.instance}", a.instance, b.instance, b.address4, 5400 + a.number) for a, b in zip(RACKS, RACKS[1:] + RACKS[:1], strict=True)
)


# ----- the history -----


@dataclass
class Call:
    n: int
    key: str  # under /jumbogate/v1/: fleet/jumbo or instances/<id>
    value: bool
    controller: str
    started: float  # seconds since the run began
    ended: float = 0.0
    outcome: str = ""  # ok | refused | unknown
    code: str = ""
    message: str = ""


class PolicyClient:
    """One call at a time, to a random controller, for as long as the run lasts; every call kept."""

    def __init__(self, rng: random.Random, began: float):
        from jumbogate.v1 import policy_pb2_grpc

        self.rng = rng
        self.began = began
        self.calls: list[Call] = []
        self.channels = {rack.controller(i): grpc.insecure_channel(rack.controller(i)) for rack in RACKS for i in range(CONTROLLERS_PER_RACK)}
        self.stubs = {address: policy_pb2_grpc.PolicyStub(channel) for address, channel in self.channels.items()}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> list[Call]:
        self._stop.set()
        self._thread.join(CALL_TIMEOUT_S + 5)
        for channel in self.channels.values():
            channel.close()
        return self.calls

    def _run(self) -> None:
        from jumbogate.v1 import policy_pb2

        while not self._stop.wait(CALL_INTERVAL_S):
            rack = self.rng.choice(RACKS)
            controller = rack.controller(self.rng.randrange(CONTROLLERS_PER_RACK))
            value = self.rng.random() < 0.5
            stub = self.stubs[controller]
            if self.rng.random() < 0.4:
                key, method, request = FLEET_JUMBO, stub.SetFleet, policy_pb2.SetFleetRequest(jumbo=value)
            else:
                key = instance_key(rack.instance)
                method, request = stub.SetInstanceJumbo, policy_pb2.SetInstanceJumboRequest(id=rack.instance, jumbo=value)
            call = Call(len(self.calls), key, value, controller, time.monotonic() - self.began)
            try:
                method(request, timeout=CALL_TIMEOUT_S)
                call.outcome, call.code = "ok", "OK"
            except grpc.RpcError as err:
                call.code, call.message = err.code().name, (err.details() or "")[:300]
                # A controller that was not there to take the call (killed) refused nothing, but did nothing either.
                never_reached = err.code() == grpc.StatusCode.UNAVAILABLE and "connect" in call.message.lower()
                call.outcome = "refused" if call.code in REFUSALS or never_reached else "unknown"
            call.ended = time.monotonic() - self.began
            self.calls.append(call)


# ----- what etcd holds, revision by revision -----


class Etcd:
    """Reads of the fleet's etcd through one member that is up (127.0.0.1)."""

    def __init__(self):
        self.channel = grpc.insecure_channel("ipv4:" + ",".join(f"127.0.0.1:{port}" for port in ETCD_CLIENT_PORTS))
        self.kv = rpc.KVStub(self.channel)

    def close(self) -> None:
        self.channel.close()

    def revision(self) -> int:
        return self.kv.Range(rpc.RangeRequest(key=PREFIX.encode(), limit=1), timeout=5).header.revision

    def at(self, key: str, revision: int = 0) -> tuple[int, bytes] | None:
        """(mod revision, value) of a key as of `revision` (0: now)."""
        reply = self.kv.Range(rpc.RangeRequest(key=(PREFIX + key).encode(), revision=revision), timeout=5)
        return (reply.kvs[0].mod_revision, reply.kvs[0].value) if reply.kvs else None

    def history(self, key: str, since: int) -> tuple[bytes | None, list[tuple[int, bytes]]]:
        """The key's value at revision `since`, and each later (revision, value), oldest first:
        walked back from now, one read per revision (the run compacts nothing)."""
        changes: list[tuple[int, bytes]] = []
        found = self.at(key)
        while found is not None and found[0] > since:
            changes.append(found)
            found = self.at(key, found[0] - 1)
        return (found[1] if found else None), changes[::-1]


def jumbo_of(value: bytes | None) -> bool | None:
    if value is None:
        return None
    decoded = json.loads(value)
    return bool(decoded["jumbo"] if isinstance(decoded, dict) else decoded)


def explain(initial: bool | None, changes: list[tuple[int, bool]], calls: list[Call]) -> tuple[str, dict[int, int]]:
    """Whether one key's etcd history is explained by the calls to it, in the order they were made
    (one call at a time, so in real time too). Each call that took effect and changed the value is
    one revision; one that asked for the value already there is none. An acknowledged call took
    effect, a refused one did not, an unknown one either. Returns ("", call -> revision) for one
    explanation, or why there is none."""
    # Breadth-first over "how many of the key's revisions the calls so far explain".
    reachable: dict[int, dict[int, int]] = {0: {}}
    for call in calls:
        after: dict[int, dict[int, int]] = {}
        for explained, matched in reachable.items():
            current = changes[explained - 1][1] if explained else initial
            options = []
            if call.outcome in ("refused", "unknown"):
                options.append((explained, matched))
            if call.outcome in ("ok", "unknown"):
                if call.value == current:
                    options.append((explained, matched))
                elif explained < len(changes) and changes[explained][1] == call.value:
                    options.append((explained + 1, {**matched, call.n: changes[explained][0]}))
            for count, how in options:
                after.setdefault(count, how)
        if not after:
            return (f"call #{call.n} ({call.outcome} {call.code}: {call.key} := {call.value} via {call.controller} at t={call.started:.1f}s) "
                    f"cannot follow the calls before it in etcd's history"), {}  # fmt: skip
        reachable = after
    if len(changes) not in reachable:
        explained = max(reachable)
        revision, value = changes[explained]
        return f"revision {revision} ({value}) and {len(changes) - explained - 1} after it were written by no call of the history", {}
    return "", reachable[len(changes)]


# ----- faults -----


@dataclass
class Fault:
    kind: str
    at: float  # seconds since the run began
    target: str  # rack and controller, or etcd members
    takeover_s: float | None = None  # leader faults: until the other controller leads and its switch took its id
    stepped_down_s: float | None = None  # until the old leader said it no longer leads: from the cut, or from resuming
    healed_at: float = 0.0
    notes: list[str] = field(default_factory=list)


def status(address: str, timeout: float = 1.0) -> dict | None:
    from google.protobuf.json_format import MessageToDict

    from jumbogate.v1 import policy_pb2, policy_pb2_grpc

    try:
        with grpc.insecure_channel(address) as channel:
            reply = policy_pb2_grpc.PolicyStub(channel).GetStatus(policy_pb2.GetStatusRequest(), timeout=timeout)
    except grpc.RpcError:
        return None
    return MessageToDict(reply, preserving_proto_field_name=True)


def leads_and_programs(shown: dict | None) -> bool:
    """The controller leads and its switch has taken its election id as primary."""
    if not shown:
        return False
    election, switch = shown.get("election", {}), shown.get("switch", {})
    own = (election.get("election_id_high", "0"), election.get("election_id_low", "0"))
    return (
        bool(election.get("leading"))
        and bool(switch.get("connected"))
        and own
        == (
            switch.get("primary_election_id_high", "0"),
            switch.get("primary_election_id_low", "0"),
        )
    )


def leader_index(rack: FleetRack) -> int:
    def find():
        for index in range(CONTROLLERS_PER_RACK):
            if leads_and_programs(status(rack.controller(index))):
                return index + 1
        return 0

    return lab.wait_until(find, f"a controller of {rack.rack} to lead and program its switch", BOUND_S, interval=0.1) - 1


def wait_takeover(rack: FleetRack, index: int, since: float) -> float:
    """Seconds from `since` until controller `index` leads and its switch took its id."""
    try:
        lab.wait_until(lambda: leads_and_programs(status(rack.controller(index))), f"{rack.controller(index)} to take {rack.rack} over", BOUND_S, interval=0.05)
    except AssertionError as err:
        raise AssertionError(f"{err}\n{both_controllers(rack)}") from None
    return time.monotonic() - since


def both_controllers(rack: FleetRack) -> str:
    """What a rack's two controllers say of themselves and the end of their logs: why a takeover did not happen."""
    shown = []
    for index in range(CONTROLLERS_PER_RACK):
        log = procs.log_path(controller_role(rack, index))
        shown.append(f"--- {rack.controller(index)}: status {status(rack.controller(index), timeout=5.0)}\n{procs.tail(log, 25)}")
    return "\n".join(shown)


def wait_standing_by(rack: FleetRack, index: int, since: float) -> float:
    def standing_by():
        # Its status asks the store's health too, which a controller cut off from etcd waits 3 s for.
        shown = status(rack.controller(index), timeout=5.0)
        return shown is not None and not shown.get("election", {}).get("leading")

    lab.wait_until(standing_by, f"{rack.controller(index)} to say it no longer leads {rack.rack}", BOUND_S, interval=0.05)
    return time.monotonic() - since


class Chaos:
    def __init__(self, fleet: Fleet, rng: random.Random, began: float, log=print):
        self.fleet = fleet
        self.rng = rng
        self.began = began
        self.log = log
        self.paused: set[int] = set()
        self.cut: set[str] = set()

    def now(self) -> float:
        return time.monotonic() - self.began

    def inject(self, kind: str) -> Fault:
        if kind == "etcd-quorum":
            return self._quorum()
        rack = self.rng.choice(RACKS)
        index = leader_index(rack)
        other = 1 - index
        fault = Fault(kind, self.now(), f"{rack.rack} controller {index} ({rack.controller(index)})")
        self.log(f"fleet-chaos: t={fault.at:5.1f}s {kind} {fault.target}")
        proc = self.fleet.controllers[(rack.name, index)]
        since = time.monotonic()
        if kind == "kill-leader":
            proc.kill()
            proc.wait(10)
            fault.takeover_s = wait_takeover(rack, other, since)
            self.fleet.start_controller(rack, index)
        elif kind == "pause-leader":
            os.kill(proc.pid, signal.SIGSTOP)
            self.paused.add(proc.pid)
            try:
                fault.takeover_s = wait_takeover(rack, other, since)
                time.sleep(max(0.0, since + OUTLAST_LEASE_S - time.monotonic()))
            finally:
                os.kill(proc.pid, signal.SIGCONT)
                self.paused.discard(proc.pid)
            fault.stepped_down_s = wait_standing_by(rack, index, time.monotonic())
        elif kind == "cut-controller":
            address = rack.etcd_address(index)
            partition.cut(address, ETCD_CLIENT_PORTS)
            self.cut.add(address)
            try:
                fault.takeover_s = wait_takeover(rack, other, since)
                # From the cut: it must see for itself that its lease is gone (its status answers
                # only after the store's health check gave up, 3 s: the figure is coarse).
                fault.stepped_down_s = wait_standing_by(rack, index, since)
                time.sleep(max(0.0, since + OUTLAST_LEASE_S - time.monotonic()))
            finally:
                partition.heal(address)
                self.cut.discard(address)
        fault.healed_at = self.now()
        return fault

    def _quorum(self) -> Fault:
        first, second = self.rng.sample(range(len(ETCD_MEMBERS)), 2)
        names = f"{ETCD_MEMBERS[first][0]}, then {ETCD_MEMBERS[second][0]}"
        fault = Fault("etcd-quorum", self.now(), names)
        self.log(f"fleet-chaos: t={fault.at:5.1f}s etcd-quorum: {names}")
        try:
            self.fleet.kill_etcd_member(first)
            time.sleep(ONE_MEMBER_DOWN_S)
            self.fleet.kill_etcd_member(second)
            fault.notes.append(f"quorum lost at t={self.now():.1f}s")
            time.sleep(QUORUM_LOSS_S)
        finally:
            fault.notes.append(f"members restarted at t={self.now():.1f}s")
            for member in (first, second):
                if self.fleet.etcd[member] is None:
                    self.fleet.start_etcd_member(member, wait=False)
            for member in (first, second):
                self.fleet.wait_etcd_member(member)
        fault.healed_at = self.now()
        return fault

    def heal_all(self) -> None:
        for pid in list(self.paused):
            os.kill(pid, signal.SIGCONT)
        self.paused.clear()
        for address in list(self.cut):
            partition.heal(address)
        self.cut.clear()


# ----- the run -----


@dataclass
class ChaosResult:
    seconds: float
    seed: int
    faults: list[Fault] = field(default_factory=list)
    calls: list[Call] = field(default_factory=list)
    outcomes: dict[str, int] = field(default_factory=dict)  # ok / refused / unknown
    unknown_took_effect: int = 0
    keys_checked: dict[str, int] = field(default_factory=dict)  # key -> revisions in the run
    transfers: dict[str, dict] = field(default_factory=dict)
    writes_by_id: dict[str, list[dict]] = field(default_factory=dict)  # rack -> the switch's record, oldest id first
    quorum_windows: list[dict] = field(default_factory=list)  # one per etcd-quorum fault
    failures: list[str] = field(default_factory=list)


def quorum_window(fault: Fault) -> tuple[float, float]:
    lost = float(fault.notes[0].split("t=")[1].rstrip("s"))
    restarted = float(fault.notes[1].split("t=")[1].rstrip("s"))
    return lost, restarted


def check_history(result: ChaosResult, etcd: Etcd, since: int) -> None:
    by_key: dict[str, list[Call]] = {}
    for call in result.calls:
        by_key.setdefault(call.key, []).append(call)
    histories: dict[str, list[tuple[int, bool]]] = {}
    for key, calls in sorted(by_key.items()):
        initial, changes = etcd.history(key, since)
        changes_flag = [(revision, jumbo_of(value)) for revision, value in changes]
        histories[key] = changes_flag
        result.keys_checked[key] = len(changes)
        why, matched = explain(jumbo_of(initial), changes_flag, calls)
        if why:
            result.failures.append(f"history of {PREFIX}{key}: {why}")
        result.unknown_took_effect += sum(1 for call in calls if call.outcome == "unknown" and call.n in matched)
    # An instance turned on while the fleet flag was off: the API refuses it, and the
    # transaction depends on the flag's key, so not even two racing writers may do it.
    fleet_initial, _ = etcd.history(FLEET_JUMBO, since)
    fleet_changes = histories.get(FLEET_JUMBO, [])
    for key, changes in histories.items():
        if key == FLEET_JUMBO:
            continue
        for revision, on in changes:
            flag = next((v for r, v in reversed(fleet_changes) if r <= revision), jumbo_of(fleet_initial))
            if on and not flag:
                result.failures.append(f"{PREFIX}{key} turned on at revision {revision}, when the fleet flag was off")


def check_switches(result: ChaosResult, etcd: Etcd) -> None:
    """Every switch, read by its own backup client, holds what etcd holds (waits for the leaders' reconciles)."""

    def wanted(rack: FleetRack) -> dict:
        found = etcd.at(FLEET_JUMBO)
        fleet_on = jumbo_of(found[1] if found else None)
        instances = {}
        for other in RACKS:
            found = etcd.at(instance_key(other.instance))
            value = json.loads(found[1]) if found else {}
            if value.get("rack") == rack.rack:
                instances[other.address4] = int(bool(value.get("jumbo")))
        return {"fleet": {int(bool(fleet_on))}, names.INSTANCES_V4: instances}

    def differences() -> list[str]:
        out = []
        for rack in RACKS:
            want, have = wanted(rack), switch_policy(rack.p4runtime)
            have = {"fleet": have["fleet"], names.INSTANCES_V4: have[names.INSTANCES_V4]}
            if want != have:
                out.append(f"{rack.rack}'s switch holds {have}, etcd says {want}")
        return out

    deadline = time.monotonic() + SETTLE_S
    while (left := differences()) and time.monotonic() < deadline:
        time.sleep(0.5)
    result.failures += left


def check_fencing(result: ChaosResult) -> None:
    """No election id wrote to a switch after a higher one had (the switch's own record)."""
    for rack in RACKS:
        record = lab.telemetry_query(f"jgf-switch-{rack.name}", "/jumbogate_switch/writes")
        older = record.pop("older", {})
        ids = sorted(record.values(), key=lambda v: (v["high"], v["low"]))
        result.writes_by_id[rack.rack] = ids
        if older.get("ids") and ids and older["last_unix_ns"] > ids[0]["first_unix_ns"]:
            result.failures.append(f"{rack.rack}: an id older than the 64 recorded wrote after {ids[0]['high']}:{ids[0]['low']} had")
        for before, after in itertools.pairwise(ids):
            if before["last_unix_ns"] > after["first_unix_ns"]:
                late_ms = (before["last_unix_ns"] - after["first_unix_ns"]) / 1e6
                result.failures.append(
                    f"{rack.rack}: {before['high']}:{before['low']} wrote {late_ms:.0f} ms after {after['high']}:{after['low']} had (a fenced controller's write)"
                )


def progress_at(transfer: Transfer, when: float) -> int:
    return max((b for t, b in transfer.progress if t <= when), default=0)


def check_quorum_loss(result: ChaosResult, faults: list[Fault], transfers: list[Transfer], began: float) -> None:
    for fault in faults:
        if fault.kind != "etcd-quorum":
            continue
        lost, restarted = quorum_window(fault)
        # Calls whose store deadline ran out before the members were restarted (from half a
        # second after the loss: the cluster of one has to notice it is alone).
        inside = [c for c in result.calls if c.started >= lost + 0.5 and c.started + STORE_DEADLINE_S <= restarted]
        acknowledged = [c for c in inside if c.outcome == "ok"]
        unavailable = [c for c in inside if c.code == "UNAVAILABLE"]
        moved = {t.flow.name: progress_at(t, began + restarted) - progress_at(t, began + lost) for t in transfers}
        result.quorum_windows.append(
            {"lost_at_s": lost, "restarted_at_s": restarted, "calls": len(inside), "unavailable": len(unavailable), "bytes_moved": moved}
        )
        if acknowledged:
            result.failures.append(f"without a quorum, {len(acknowledged)} changes were acknowledged (first: call #{acknowledged[0].n})")
        if inside and not unavailable:
            result.failures.append(f"without a quorum, none of {len(inside)} changes was refused with UNAVAILABLE: {sorted({c.code for c in inside})}")
        for name, count in moved.items():
            if count <= 0:
                result.failures.append(f"without a quorum, transfer {name} stopped (the data plane must forward with the last policy)")


def schedule(seconds: float, rng: random.Random) -> list[str]:
    """Every fault kind once, then shuffled rounds of them, as many as fit in the run's first three quarters."""
    kinds = list(FAULTS)
    rng.shuffle(kinds)
    # A fault with its recovery takes about 15 s.
    rounds = max(1, int(seconds * 0.75 / (15 * len(FAULTS))))
    for _ in range(rounds - 1):
        more = list(FAULTS)
        rng.shuffle(more)
        kinds += more
    return kinds


def inject_faults(chaos: Chaos, client: PolicyClient, kinds: list[str], gap: float, began: float) -> list[Fault]:
    """Each fault in turn, the first 2 s after `began` and each next `gap` later, healed at the end.
    A fault that fails (a takeover that never came) stops the client before it is raised: the
    client's thread would otherwise go on flipping the policy of whatever fleet is started next on
    the same addresses."""
    faults = []
    try:
        for n, kind in enumerate(kinds):
            time.sleep(max(0.0, began + 2.0 + n * gap - time.monotonic()))
            faults.append(chaos.inject(kind))
    except BaseException:
        client.stop()
        raise
    finally:
        chaos.heal_all()
    return faults


def run_chaos(fleet: Fleet, seconds: float, seed: int, log=print) -> ChaosResult:
    result = ChaosResult(seconds=seconds, seed=seed)
    rng = random.Random(seed)
    for rack in RACKS:
        leader_index(rack)
        fleet.host(rack.instance).cmd(f"sysctl -qw net.ipv4.tcp_rto_max_ms={TCP_RTO_MAX_MS}")
    etcd = Etcd()
    since = etcd.revision()
    began = time.monotonic()
    transfers = [Transfer(fleet, flow, seconds, seed + i) for i, flow in enumerate(FLOWS)]
    client = PolicyClient(random.Random(seed + 100), began)
    chaos = Chaos(fleet, rng, began, log)
    client.start()
    kinds = schedule(seconds, rng)
    result.faults = inject_faults(chaos, client, kinds, gap=max(2.0, seconds * 0.75 / len(kinds)), began=began)
    # Quiet until the transfers end; then the checks.
    time.sleep(max(0.0, began + seconds - time.monotonic()))
    result.calls = client.stop()
    for transfer in transfers:
        outcome = transfer.finish(timeout=seconds + 180)
        outcome["longest_stall_s"] = round(transfer.longest_stall(), 2)
        result.transfers[transfer.flow.name] = outcome
        if outcome["sha256_sent"] != outcome["sha256_received"] or outcome["bytes_sent"] != outcome["bytes_received"]:
            result.failures.append(f"{transfer.flow.name}: received {outcome['bytes_received']} of {outcome['bytes_sent']} bytes, or other bytes")
    for outcome in ("ok", "refused", "unknown"):
        result.outcomes[outcome] = sum(1 for c in result.calls if c.outcome == outcome)
    for rack in RACKS:
        leader_index(rack)
    try:
        check_history(result, etcd, since)
        check_switches(result, etcd)
    finally:
        etcd.close()
    check_fencing(result)
    check_quorum_loss(result, result.faults, transfers, began)
    for fault in result.faults:
        if fault.kind != "etcd-quorum" and fault.takeover_s is None:
            result.failures.append(f"{fault.kind} at t={fault.at:.1f}s: no takeover")
    return result


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(share * (len(ordered) - 1)))]


def render(result: ChaosResult) -> str:
    lines = [f"jumbogate fleet chaos: {result.seconds:g} s, seed {result.seed}", "", "faults:"]
    for fault in result.faults:
        parts = [f"  t={fault.at:5.1f}s {fault.kind:<15} {fault.target}"]
        if fault.takeover_s is not None:
            parts.append(f"new primary in {fault.takeover_s:.2f} s")
        if fault.stepped_down_s is not None:
            since = "the cut" if fault.kind == "cut-controller" else "it resumed"
            parts.append(f"old leader stood down {fault.stepped_down_s:.2f} s after {since}")
        parts += fault.notes
        lines.append("; ".join(parts))
    takeovers = {}
    for fault in result.faults:
        if fault.takeover_s is not None:
            takeovers.setdefault(fault.kind, []).append(fault.takeover_s)
    lines += ["", "time to a new primary on the switch (target 3 s):"]
    for kind, values in takeovers.items():
        lines.append(f"  {kind:<15} n={len(values)} p50 {percentile(values, 0.5):.2f} s, max {max(values):.2f} s")
    lines += [
        "",
        f"history: {len(result.calls)} calls: {result.outcomes.get('ok', 0)} acknowledged, {result.outcomes.get('refused', 0)} refused, "
        f"{result.outcomes.get('unknown', 0)} unknown ({result.unknown_took_effect} of them took effect)",
        "  revisions checked: " + ", ".join(f"{key} {count}" for key, count in sorted(result.keys_checked.items())),
    ]
    for q in result.quorum_windows:
        lines.append(
            f"  without a quorum (t={q['lost_at_s']:.1f}..{q['restarted_at_s']:.1f}s): {q['calls']} calls, {q['unavailable']} UNAVAILABLE; "
            "transfers moved " + ", ".join(f"{name} {count / 1e6:.1f} MB" for name, count in q["bytes_moved"].items())
        )
    lines += ["", "writes accepted by election id (oldest first):"]
    for rack, ids in result.writes_by_id.items():
        lines.append(f"  {rack}: " + ", ".join(f"{i['high']}:{i['low']} {i['updates']}" for i in ids))
    lines += ["", "transfers:"]
    for name, t in result.transfers.items():
        verdict = "whole" if t["sha256_sent"] == t["sha256_received"] and t["bytes_sent"] == t["bytes_received"] else "DIFFERENT"
        lines.append(f"  {name:<10} {t['bytes_received'] / 1e6:7.1f} MB {verdict}, longest stall {t['longest_stall_s']:.2f} s")
    lines += ["", "verdict: " + ("consistent, nothing lost" if not result.failures else "FAILED\n  " + "\n  ".join(result.failures))]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="make fleet-chaos", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    length = parser.add_mutually_exclusive_group()
    length.add_argument("--minutes", type=float, help="length of the run (default 5)")
    length.add_argument("--seconds", type=float, help="length of the run in seconds")
    parser.add_argument("--seed", type=int, default=1, help="seed of the faults and of the calls (default %(default)s)")
    parser.add_argument("--json", type=Path, default=procs.REPO / "results" / "fleet-chaos.json", help="the result, history included (default %(default)s)")
    args = parser.parse_args(argv)
    seconds = args.seconds if args.seconds is not None else 60 * (args.minutes if args.minutes is not None else 5.0)
    if seconds < 30:
        parser.error("the run needs at least 30 s (one fault of each kind takes about that)")
    refusal = cannot_start("make fleet-chaos", "soft")
    if refusal:
        print(refusal, file=sys.stderr)
        return 1
    print(f"fleet-chaos: bringing up three racks on etcd for {seconds:g} s of faults ...", flush=True)
    try:
        with Fleet() as fleet:
            result = run_chaos(fleet, seconds, args.seed, log=lambda line: print(line, flush=True))
    except (procs.StartError, RuntimeError, subprocess.SubprocessError, partition.PartitionError) as err:
        print(f"make fleet-chaos: {err}", file=sys.stderr)
        return 1
    print(render(result))
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(asdict(result), indent=1))
    print(f"\nresult and history: {args.json}")
    return 0 if not result.failures else 1


if __name__ == "__main__":
    sys.exit(main())
