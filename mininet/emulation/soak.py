"""`make soak`: the emulated rack under chaos, with nothing lost.

Four TCP transfers run for the whole soak (into the jumbo instance over IPv4
and IPv6 on the merge path, out of it over IPv4 and IPv6 through the
SmartNIC's split) while a seeded scheduler, every few seconds:

  kill-smartnic    SIGKILL jumbogate-nic, restart it (the bypass carries the flows meanwhile)
  kill-controller  SIGKILL the controller, restart it (the switch keeps forwarding)
  kill-switch      SIGKILL the switch, restart it (the controller programs it again)
  flip-fleet       fleet jumbo off, then on
  flip-instance    the jumbo instance's flag off, then on
  flood-elephants  new 5-tuples of honest full-size segments: elephant digests
  flood-malformed  frames whose IPv4 header claims more than the frame holds

Then it checks: every transfer's SHA-256 matches; after each restart every
flow moved again within RECOVERY_LIMIT_S of the part serving again; the
switch holds exactly what the controller wants (read by an independent
P4Runtime client); the SmartNIC's buffer pool is back where it started; and
it reports the peak memory of each process.

The hosts' TCP retransmission timer is capped at one second
(net.ipv4.tcp_rto_max_ms) for the soak: Linux backs off to 2, 4, 8 s after a
loss, which would hide how fast the border recovered behind how long a
sender waits to try again.

    python3 -m emulation.soak [--minutes M] [--seed N] [--switch soft|bmv2] [--json FILE]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import random
import subprocess
import sys
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from testlab import lab

from . import measure, plan, procs
from .attack import start_flood
from .rack import Rack, cannot_start

RECOVERY_LIMIT_S = 2.0
FLOW_MBIT_S = 40.0
TCP_RTO_MAX_MS = 1000
EVENTS = ("kill-smartnic", "kill-controller", "kill-switch", "flip-fleet", "flip-instance", "flood-elephants", "flood-malformed")
KILLS = {"kill-smartnic": "nic", "kill-controller": "controller", "kill-switch": "switch"}
# Memory each process may reach (it is started with these: the DPDK programs'
# -m, the controller's Python heap), and peak RSS is held to.
RSS_LIMIT_MB = {"switch": 1400, "nic": 800, "controller": 600}


@dataclass(frozen=True)
class Flow:
    name: str
    sender: str
    receiver: str
    address: str
    port: int


EXT1, EXT2 = plan.EXTERNAL_HOSTS[0], plan.EXTERNAL_HOSTS[1]
FLOWS = (
    # Merge-service ports (rack.yaml): on the merge path from the first packet.
    Flow("in-ipv4", EXT1.host, plan.JUMBO.host, plan.JUMBO.address.ip4, 5201),
    Flow("in-ipv6", EXT2.host, plan.JUMBO.host, plan.JUMBO.address.ip6, 5202),
    # Out of the jumbo instance: 8500-byte segments, split by the SmartNIC.
    Flow("out-ipv4", plan.JUMBO.host, EXT1.host, EXT1.address.ip4, 5301),
    Flow("out-ipv6", plan.JUMBO.host, EXT2.host, EXT2.address.ip6, 5302),
)


@dataclass
class Event:
    kind: str
    started: float
    ready: float = 0.0  # when the killed part served again (kills only)
    recovery_s: dict[str, float] = field(default_factory=dict)  # per flow, after `ready`


@dataclass
class SoakResult:
    target: str
    minutes: float
    seed: int
    events: list[Event] = field(default_factory=list)
    transfers: dict[str, dict] = field(default_factory=dict)  # bytes, sha256 sent/received, longest stall
    switch_matches_controller: bool = False
    switch_differences: str = ""
    nic_buffers_before: dict = field(default_factory=dict)
    nic_buffers_after: dict = field(default_factory=dict)
    peak_rss_mb: dict[str, float] = field(default_factory=dict)
    failures: list[str] = field(default_factory=list)


class Transfer:
    """One stream-send / stream-serve pair, its progress read as it comes."""

    def __init__(self, rack: Rack, flow: Flow, seconds: float, seed: int):
        self.flow = flow
        receiver = rack.host(flow.receiver)
        self.server = receiver.popen(measure.module_command("transfer", "stream-serve", flow.port), env=measure.MODULE_ENV)
        measure.wait_listening(receiver, (flow.port,))
        self.client = rack.host(flow.sender).popen(
            measure.module_command("transfer", "stream-send", flow.address, flow.port, seconds, FLOW_MBIT_S, seed), env=measure.MODULE_ENV
        )
        self.progress: list[tuple[float, int]] = []
        self.server_result = ""
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        for raw in self.server.stdout:
            words = raw.decode().split()
            if len(words) == 3 and words[0] == "progress":
                self.progress.append((float(words[1]), int(words[2])))
            elif len(words) == 2:
                self.server_result = raw.decode().strip()

    def moved_after(self, when: float) -> float | None:
        """The first time after `when` that more bytes had arrived than at `when`."""
        at = max((b for t, b in self.progress if t <= when), default=0)
        return next((t for t, b in self.progress if t > when and b > at), None)

    def longest_stall(self) -> float:
        longest, last_time, last_bytes = 0.0, None, -1
        for t, b in self.progress:
            if b > last_bytes:
                if last_time is not None:
                    longest = max(longest, t - last_time)
                last_time, last_bytes = t, b
        return longest

    def finish(self, timeout: float) -> dict:
        sent, err = self.client.communicate(timeout=timeout)
        if self.client.returncode != 0:
            raise RuntimeError(f"{self.flow.name}: sender failed: {err.decode()[-500:]}")
        self.server.wait(timeout=60)
        self._reader.join(10)
        sent_bytes, sent_sha = sent.decode().split()[-2:]
        got_bytes, got_sha = self.server_result.split() if self.server_result else ("0", "")
        return {"bytes_sent": int(sent_bytes), "bytes_received": int(got_bytes), "sha256_sent": sent_sha, "sha256_received": got_sha}


class MemoryWatch:
    """Peak resident memory of the switch, SmartNIC and controller processes, across restarts."""

    def __init__(self, rack: Rack):
        self.rack = rack
        self.peak_mb: dict[str, float] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _pids(self) -> dict[str, int]:
        switch = getattr(self.rack.switch, "process", None)
        parts = {"switch": switch, "nic": self.rack.nic_process, "controller": self.rack.controller_process}
        return {name: p.pid for name, p in parts.items() if p is not None and p.poll() is None}

    def _run(self) -> None:
        while not self._stop.wait(0.5):
            for name, pid in self._pids().items():
                try:
                    status = Path(f"/proc/{pid}/status").read_text()
                except OSError:
                    continue
                for line in status.splitlines():
                    if line.startswith("VmRSS:"):
                        self.peak_mb[name] = max(self.peak_mb.get(name, 0.0), int(line.split()[1]) / 1024)

    def stop(self) -> dict[str, float]:
        self._stop.set()
        self._thread.join(5)
        return {name: round(mb, 1) for name, mb in self.peak_mb.items()}


def nic_buffers() -> dict:
    return lab.telemetry_query(plan.NIC_FILE_PREFIX, "/jumbogate/buffers")


def inject(rack: Rack, kind: str, rng: random.Random) -> Event:
    event = Event(kind, time.monotonic())
    down_s = rng.uniform(0.3, 1.5)
    if kind in KILLS:
        # SIGKILL, a pause while the part is down, a restart that returns once it serves.
        part = {"kill-smartnic": rack.nic_process, "kill-controller": rack.controller_process, "kill-switch": rack.switch.process}[kind]
        restart = {"kill-smartnic": rack.start_nic, "kill-controller": rack.start_controller, "kill-switch": lambda: rack.switch.start([])}[kind]
        part.kill()
        part.wait(10)
        time.sleep(down_s)
        restart()
        event.ready = time.monotonic()
    elif kind == "flip-fleet":
        rack.ctl("fleet", "jumbo", "off")
        time.sleep(2)
        rack.ctl("fleet", "jumbo", "on")
        rack.ctl("instance", "jumbo", plan.JUMBO.host, "on")
    elif kind == "flip-instance":
        rack.ctl("instance", "jumbo", plan.JUMBO.host, "off")
        time.sleep(2)
        rack.ctl("instance", "jumbo", plan.JUMBO.host, "on")
    elif kind in ("flood-elephants", "flood-malformed"):
        flood = start_flood(rack, "elephants" if kind == "flood-elephants" else "claimed-length", plan.JUMBO.address.ip4, 8080, 3000, 3)
        flood.communicate(timeout=60)
    return event


def switch_matches_controller(rack: Rack) -> tuple[bool, str]:
    """Read the switch with an independent backup client and compare it with what the controller's policy wants."""
    import finsy as fy

    from jumbogate.config import load_config
    from jumbogate.controller import read_managed
    from jumbogate.flow import FiveTuple
    from jumbogate.reconcile import plan as reconcile_plan
    from jumbogate.state import FlowOrigin, MergeFlow, PolicyState
    from jumbogate.translate import desired_entities

    from .rack import PIPELINE

    stats = json.loads(rack.ctl("stats", json_output=True).stdout)
    flows = json.loads(rack.ctl("flows", "list", json_output=True).stdout).get("flows", [])
    fleet = json.loads(rack.ctl("fleet", "show", json_output=True).stdout)
    config = load_config(rack.config_path)
    state = PolicyState.from_config(config)
    state.fleet_jumbo = bool(fleet.get("jumbo"))
    for inst in json.loads(rack.ctl("instance", "list", json_output=True).stdout).get("instances", []):
        state.instance_jumbo[inst["id"]] = bool(inst.get("jumbo"))
    for entry in flows:
        f = entry["flow"]
        flow = FiveTuple(f["src_ip"], f["dst_ip"], int(f["src_port"]), int(f["dst_port"]), int(f["protocol"]))
        state.flows[flow] = MergeFlow(flow, FlowOrigin.ELEPHANT, int(entry["idle_timeout_s"]), float(entry["onloaded_at"]))

    # finsy warns once per connection that the switch serves no gNMI.
    logging.getLogger("finsy").setLevel(logging.ERROR)

    async def read():
        options = fy.SwitchOptions(p4info=PIPELINE / "jumbogate.p4info.txtpb", initial_election_id=1)
        async with fy.Switch("soak-reader", plan.P4RUNTIME_ADDRESS, options) as reader:
            actual = await read_managed(reader, state)
            desired = [e.encode(reader.p4info) for e in desired_entities(state, nic_up=stats["nic"]["reachable"])]
            return reconcile_plan(desired, actual)

    result = asyncio.run(read())
    return result.empty, "" if result.empty else result.summary()


def run_soak(rack: Rack, minutes: float, seed: int, target: str, log=print) -> SoakResult:
    result = SoakResult(target=target, minutes=minutes, seed=seed)
    rng = random.Random(seed)
    seconds = minutes * 60
    for host in {f.sender for f in FLOWS} | {f.receiver for f in FLOWS}:
        rack.host(host).cmd(f"sysctl -qw net.ipv4.tcp_rto_max_ms={TCP_RTO_MAX_MS}")
    result.nic_buffers_before = nic_buffers()
    memory = MemoryWatch(rack)
    transfers = [Transfer(rack, flow, seconds, seed + i) for i, flow in enumerate(FLOWS)]
    start = time.monotonic()
    # Events every few seconds, in a shuffled order that covers every kind,
    # none in the last quarter (the transfers end on a quiet border).
    gap = max(4.0, seconds * 0.75 / (2 * len(EVENTS)))
    kinds: list[str] = []
    next_at = start + gap
    while next_at < start + seconds * 0.75:
        if not kinds:
            kinds = list(EVENTS)
            rng.shuffle(kinds)
        time.sleep(max(0.0, next_at - time.monotonic()))
        kind = kinds.pop()
        log(f"soak: t={time.monotonic() - start:5.1f}s {kind}")
        result.events.append(inject(rack, kind, rng))
        next_at = max(next_at + gap, time.monotonic() + 2.0)
    for transfer in transfers:
        outcome = transfer.finish(timeout=seconds + 180)
        outcome["longest_stall_s"] = round(transfer.longest_stall(), 2)
        result.transfers[transfer.flow.name] = outcome
        if outcome["sha256_sent"] != outcome["sha256_received"] or outcome["bytes_sent"] != outcome["bytes_received"]:
            result.failures.append(f"{transfer.flow.name}: received {outcome['bytes_received']} of {outcome['bytes_sent']} bytes, or other bytes")
    for event in result.events:
        if event.kind not in KILLS:
            continue
        for transfer in transfers:
            moved = transfer.moved_after(event.ready)
            event.recovery_s[transfer.flow.name] = round(moved - event.ready, 2) if moved is not None else -1.0
            if moved is None or moved - event.ready > RECOVERY_LIMIT_S:
                result.failures.append(
                    f"{event.kind} at t={event.started - start:.1f}s: {transfer.flow.name} did not move within {RECOVERY_LIMIT_S} s of the restart"
                )
    result.peak_rss_mb = memory.stop()
    for name, peak in result.peak_rss_mb.items():
        if peak > RSS_LIMIT_MB[name]:
            result.failures.append(f"{name} peaked at {peak:.0f} MB, above {RSS_LIMIT_MB[name]} MB")
    # Quiet now: held segments flushed, every buffer back in the pool.
    time.sleep(1.0)
    result.nic_buffers_after = nic_buffers()
    if result.nic_buffers_after != result.nic_buffers_before:
        result.failures.append(f"SmartNIC buffers {result.nic_buffers_after} after, {result.nic_buffers_before} before")
    procs.wait_until(
        "the controller to reconcile after the soak", lambda: json.loads(rack.ctl("stats", json_output=True).stdout)["switch_connected"], timeout=30
    )
    result.switch_matches_controller, result.switch_differences = switch_matches_controller(rack)
    if not result.switch_matches_controller:
        result.failures.append(f"the switch differs from the controller's policy: {result.switch_differences}")
    return result


def render(result: SoakResult) -> str:
    lines = [f"jumbogate soak: {result.minutes:g} min on {result.target}, seed {result.seed}", "", "events:"]
    counts: dict[str, int] = {}
    for event in result.events:
        counts[event.kind] = counts.get(event.kind, 0) + 1
    lines += [f"  {kind:<16} {counts.get(kind, 0)}" for kind in EVENTS]
    lines += ["", f"recovery after each restart (s until every flow moved again; limit {RECOVERY_LIMIT_S:.0f} s):"]
    for event in result.events:
        if event.recovery_s:
            lines.append(f"  {event.kind:<16} " + "  ".join(f"{name} {value:.2f}" for name, value in event.recovery_s.items()))
    lines += ["", "transfers:"]
    for name, t in result.transfers.items():
        verdict = "whole" if t["sha256_sent"] == t["sha256_received"] and t["bytes_sent"] == t["bytes_received"] else "DIFFERENT"
        lines.append(
            f"  {name:<9} {t['bytes_received'] / 1e6:8.1f} MB {verdict}, sha256 {t['sha256_received'][:16]}..., longest stall {t['longest_stall_s']:.2f} s"
        )
    lines += [
        "",
        f"switch equals the controller's policy: {'yes' if result.switch_matches_controller else 'NO: ' + result.switch_differences}",
        f"SmartNIC buffers before/after: {result.nic_buffers_before} / {result.nic_buffers_after}",
        "peak RSS: " + ", ".join(f"{name} {mb:.0f} MB" for name, mb in sorted(result.peak_rss_mb.items())),
        "",
        "verdict: " + ("nothing lost" if not result.failures else "FAILED\n  " + "\n  ".join(result.failures)),
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="make soak", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--minutes", type=float, default=10.0, help="length of the soak (default %(default)s)")
    parser.add_argument("--seed", type=int, default=1, help="seed of the event schedule (default %(default)s)")
    parser.add_argument("--switch", choices=("soft", "bmv2"), help="the switch target (default: $SWITCH, else soft: jumbogate-switch)")
    parser.add_argument("--json", type=Path, help="write the result here")
    args = parser.parse_args(argv)
    if args.minutes <= 0:
        parser.error("--minutes must be positive")
    refusal = cannot_start("make soak", args.switch)
    if refusal:
        print(refusal, file=sys.stderr)
        return 1
    print(f"soak: bringing up the emulated rack for {args.minutes:g} min ...", flush=True)
    try:
        with Rack(switch_target=args.switch) as rack:
            result = run_soak(rack, args.minutes, args.seed, rack.target, log=lambda line: print(line, flush=True))
    except (procs.StartError, RuntimeError, subprocess.SubprocessError) as err:
        print(f"make soak: {err}", file=sys.stderr)
        return 1
    print(render(result))
    if args.json:
        args.json.write_text(json.dumps(asdict(result), indent=1))
    return 0 if not result.failures else 1


if __name__ == "__main__":
    sys.exit(main())
