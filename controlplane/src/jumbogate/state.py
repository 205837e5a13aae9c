"""The controller's runtime policy: fleet and instance flags, merge flows, events.

The rack config gives the starting point; the operator API changes it at run
time. This module holds the rules (Oxide's fleet rule, merge eligibility) so
that the API, the CLI and the switch programming all see one truth. It knows
nothing about P4Runtime or gRPC transport.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field, replace
from enum import Enum

from .config import MAX_IDLE_TIMEOUT_S, IPAddress, RackConfig
from .flow import TCP, UDP, FiveTuple
from .p4.constants import ELEPHANT_EPOCH_LOG2_US

# The switch's sketch epoch (fixed in the P4 program): the window of
# elephant.max_onloads_per_epoch.
SKETCH_EPOCH_S = (1 << ELEPHANT_EPOCH_LOG2_US) / 1e6


class PolicyError(Exception):
    """A request the policy refuses; `code` names the gRPC status it maps to."""

    def __init__(self, code: str, message: str):
        super().__init__(message)
        self.code = code
        self.message = message


def invalid(message: str) -> PolicyError:
    return PolicyError("INVALID_ARGUMENT", message)


class FlowOrigin(Enum):
    ELEPHANT = "elephant"
    OPERATOR = "operator"
    # Found on the switch after a controller restart and kept.
    ADOPTED = "adopted"


@dataclass(frozen=True)
class MergeFlow:
    flow: FiveTuple
    origin: FlowOrigin
    idle_timeout_s: int
    onloaded_at: float


class EventKind(Enum):
    ELEPHANT_DETECTED = "elephant_detected"
    FLOW_ONLOADED = "flow_onloaded"
    FLOW_EXPIRED = "flow_expired"
    FLOW_OFFLOADED = "flow_offloaded"
    SWITCH_CONNECTED = "switch_connected"
    SWITCH_DISCONNECTED = "switch_disconnected"
    NIC_UP = "nic_up"
    NIC_DOWN = "nic_down"
    FLEET_CHANGED = "fleet_changed"
    INSTANCE_CHANGED = "instance_changed"
    CONFIG_RELOADED = "config_reloaded"
    CONFIG_REFUSED = "config_refused"
    LEADING = "leading"


@dataclass(frozen=True)
class Event:
    kind: EventKind
    time: float
    flow: FiveTuple | None = None
    instance_id: str | None = None
    fleet_jumbo: bool | None = None
    # The instance's flag and effective MTU when the event happened (a
    # watcher reads the event later, when they may have changed again).
    instance_jumbo: bool | None = None
    instance_mtu: int | None = None
    estimated_bytes: int = 0
    detail: str = ""


# Watch streams served at once, in all and per caller (a certificate's names;
# plaintext callers on loopback count as one): each holds a queue of up to
# 1024 events and costs every event a copy on the controller's one event loop,
# so a read-only client opening thousands slowed every change a hundredfold.
MAX_WATCHERS = 64
MAX_WATCHERS_PER_CALLER = 16


class EventBus:
    """Fan-out of events to watchers; a slow watcher loses its oldest events, never blocks the controller.
    Watchers are bounded (MAX_WATCHERS, MAX_WATCHERS_PER_CALLER); one past a bound is refused and counted."""

    def __init__(self, queue_size: int = 1024, max_watchers: int = MAX_WATCHERS, max_per_caller: int = MAX_WATCHERS_PER_CALLER):
        self._queues: dict[asyncio.Queue[Event], str] = {}
        self._per_caller: dict[str, int] = {}
        self._queue_size = queue_size
        self.max_watchers = max_watchers
        self.max_per_caller = max_per_caller
        self.refused = 0
        self.history: list[Event] = []

    @property
    def watchers(self) -> int:
        return len(self._queues)

    def publish(self, event: Event) -> None:
        self.history.append(event)
        del self.history[:-256]
        for queue in self._queues:
            if queue.full():
                queue.get_nowait()
            queue.put_nowait(event)

    def subscribe(self, caller: str = "") -> asyncio.Queue[Event]:
        """A queue of the events from now on; PolicyError RESOURCE_EXHAUSTED past a bound."""
        if len(self._queues) >= self.max_watchers or self._per_caller.get(caller, 0) >= self.max_per_caller:
            self.refused += 1
            mine = self._per_caller.get(caller, 0)
            raise PolicyError(
                "RESOURCE_EXHAUSTED",
                f"{len(self._queues)} Watch streams are open ({mine} of them this caller's): this controller serves at most "
                f"{self.max_watchers}, {self.max_per_caller} per caller; close one first",
            )
        queue: asyncio.Queue[Event] = asyncio.Queue(self._queue_size)
        self._queues[queue] = caller
        self._per_caller[caller] = self._per_caller.get(caller, 0) + 1
        return queue

    def unsubscribe(self, queue: asyncio.Queue[Event]) -> None:
        caller = self._queues.pop(queue, None)
        if caller is not None:
            self._per_caller[caller] -= 1
            if not self._per_caller[caller]:
                del self._per_caller[caller]


# Path MTUs the SmartNIC learned (path MTU discovery) that the switch's
# path-MTU tables hold at most, beside the configured ones (each table has
# 1024 entries): past it the least recently learned are left out, counted.
MAX_LEARNED_PATHS = 512
# A learned path's method as the SmartNIC names it (a word or two): kept and
# published to every rack cut to this length, whatever the SmartNIC sent.
MAX_METHOD_CHARS = 32
# What an IP path's MTU can be (IPv4's least to IPv4's and IPv6's largest).
MIN_PATH_MTU, MAX_PATH_MTU = 576, 0xFFFF


@dataclass(frozen=True)
class LearnedPath:
    address: IPAddress
    mtu: int
    method: str
    # When it was learned (time.time()), from the SmartNIC's age.
    learned_at: float
    rtt_ms: float = 0.0


@dataclass
class PolicyState:
    """Fleet flag, instance flags and merge flows, with the rules that bind them."""

    config: RackConfig
    events: EventBus = field(default_factory=EventBus)
    fleet_jumbo: bool = False
    instance_jumbo: dict[str, bool] = field(default_factory=dict)
    flows: dict[FiveTuple, MergeFlow] = field(default_factory=dict)
    # Bumped on every change; waiters (the switch and SmartNIC programmers) wake on it.
    version: int = 0
    _waiters: set[asyncio.Future] = field(default_factory=set)
    # Admission control of the merge path: elephant.max_flows and
    # elephant.max_onloads_per_epoch, and what they turned away.
    elephants_rate_limited: int = 0
    flows_evicted: int = 0
    operator_onloads_refused: int = 0
    # Flows that came onto or left the merge path since start (metrics).
    flows_onloaded: int = 0
    flows_expired: int = 0
    flows_offloaded: int = 0
    # rack.yaml reloads applied and refused (reload(), refuse_reload()).
    config_reloads: int = 0
    config_reload_refusals: int = 0
    last_reload_refusal: str = ""
    # Path MTUs the SmartNIC learned, on their way to the switch, and how
    # many were left out for want of room (update_learned_paths).
    learned_paths: dict[IPAddress, LearnedPath] = field(default_factory=dict)
    learned_paths_evicted: int = 0
    _learned_left_out: set = field(default_factory=set)
    _epoch_started: float = 0.0
    _epoch_onloads: int = 0

    @classmethod
    def from_config(cls, config: RackConfig) -> PolicyState:
        return cls(
            config=config,
            fleet_jumbo=config.fleet_jumbo,
            instance_jumbo={inst.id: inst.jumbo for inst in config.instances},
        )

    # ----- queries -----

    def instance_ids(self) -> list[str]:
        return [inst.id for inst in self.config.instances]

    def require_instance(self, instance_id: str):
        instance = self.config.instance(instance_id)
        if instance is None:
            raise PolicyError("NOT_FOUND", f"no instance {instance_id!r} (known: {', '.join(self.instance_ids()) or 'none'})")
        return instance

    def effective_mtu(self, instance_id: str) -> int:
        instance = self.require_instance(instance_id)
        return self.config.effective_mtu(replace(instance, jumbo=self.instance_jumbo[instance_id]), self.fleet_jumbo)

    def instance_for_address(self, address: IPAddress):
        return next((inst for inst in self.config.instances if address in inst.addresses), None)

    def jumbo_enabled(self, address: IPAddress) -> bool:
        instance = self.instance_for_address(address)
        return instance is not None and self.fleet_jumbo and self.instance_jumbo[instance.id]

    def merge_eligible(self, flow: FiveTuple) -> bool:
        """Only TCP or UDP toward a jumbo-enabled instance may take the merge path.

        The SmartNIC merges TCP and packs UDP into caravans (when it runs
        with caravan packing on); the switch steers a UDP flow only while
        it is listed, as it does TCP (docs/dataplane.md, "Steering").
        """
        return flow.protocol in (TCP, UDP) and self.jumbo_enabled(flow.dst_ip)

    def elephant_eligible(self, flow: FiveTuple) -> bool:
        """Only TCP is onloaded on an elephant digest.

        A caravan reaches only a receiver that unpacks it, so a UDP flow
        takes the merge path only when an operator lists it; the switch
        counts no UDP in its sketch, and a digest naming one is forged.
        """
        return flow.protocol == TCP and self.merge_eligible(flow)

    # ----- changes -----

    def _bump(self) -> None:
        self.version += 1
        for waiter in self._waiters:
            if not waiter.done():
                waiter.set_result(self.version)
        self._waiters.clear()

    async def wait_for_change(self, seen_version: int, timeout: float | None = None) -> int:
        """Wait until the version moves past `seen_version` (or the timeout passes); return the version."""
        if self.version != seen_version:
            return self.version
        waiter = asyncio.get_running_loop().create_future()
        self._waiters.add(waiter)
        try:
            await asyncio.wait_for(asyncio.shield(waiter), timeout)
        except TimeoutError:
            self._waiters.discard(waiter)
        return self.version

    def _publish(self, kind: EventKind, **fields) -> None:
        self.events.publish(Event(kind=kind, time=time.time(), **fields))

    def set_fleet(self, on: bool) -> None:
        if on == self.fleet_jumbo:
            return
        self.fleet_jumbo = on
        self._publish(EventKind.FLEET_CHANGED, fleet_jumbo=on, detail=f"fleet jumbo {'on' if on else 'off'}")
        self._drop_ineligible_flows("fleet jumbo turned off")
        self._bump()

    def set_instance_jumbo(self, instance_id: str, on: bool) -> None:
        self.require_instance(instance_id)
        if on and not self.fleet_jumbo:
            # Oxide's rule: the fleet flag gates every instance flag.
            raise PolicyError("FAILED_PRECONDITION", f"cannot enable jumbo on instance {instance_id!r} while the fleet jumbo flag is off")
        if self.instance_jumbo[instance_id] == on:
            return
        self.instance_jumbo[instance_id] = on
        self._publish_instance(instance_id)
        self._drop_ineligible_flows(f"instance {instance_id} jumbo turned off")
        self._bump()

    def _publish_instance(self, instance_id: str) -> None:
        on = self.instance_jumbo[instance_id]
        self._publish(
            EventKind.INSTANCE_CHANGED,
            instance_id=instance_id,
            instance_jumbo=on,
            instance_mtu=self.effective_mtu(instance_id),
            detail=f"instance {instance_id} jumbo {'on' if on else 'off'}",
        )

    def reload(self, config: RackConfig, changed: list[str]) -> None:
        """Take a reloaded config: its values replace the old ones, flags included.

        The file is the operator's intent at the time of the reload: an API
        change to a flag that should outlast it belongs in the file too.
        Flows that are no longer eligible leave the merge path; the rest stay.
        """
        self.config = config
        self.fleet_jumbo = config.fleet_jumbo
        self.instance_jumbo = {inst.id: inst.jumbo for inst in config.instances}
        self.config_reloads += 1
        self._drop_ineligible_flows("configuration reloaded")
        self._publish(EventKind.CONFIG_RELOADED, detail=f"{config.source}: {', '.join(changed) or 'nothing changed'}")
        self._bump()

    def apply_store(self, config: RackConfig, changed: list[str]) -> None:
        """Take the policy as the store holds it now (an operator's change through
        any controller, an import, a key edited by hand): flags included, with the
        events a watcher would have seen had the change been made here."""
        old_fleet, old_flags = self.fleet_jumbo, self.instance_jumbo
        self.config = config
        self.fleet_jumbo = config.fleet_jumbo
        self.instance_jumbo = {inst.id: inst.jumbo for inst in config.instances}
        if old_fleet != self.fleet_jumbo:
            self._publish(EventKind.FLEET_CHANGED, fleet_jumbo=self.fleet_jumbo, detail=f"fleet jumbo {'on' if self.fleet_jumbo else 'off'}")
        for instance_id, on in self.instance_jumbo.items():
            if old_flags.get(instance_id, on) != on:
                self._publish_instance(instance_id)
        others = [name for name in changed if name not in ("fleet.jumbo", "instances")]
        if others:
            self._publish(EventKind.CONFIG_RELOADED, detail=f"{config.source}: {', '.join(others)}")
        self._drop_ineligible_flows("policy changed in the store")
        self._bump()

    def refuse_reload(self, why: str) -> None:
        self.config_reload_refusals += 1
        self.last_reload_refusal = why
        self._publish(EventKind.CONFIG_REFUSED, detail=why)

    def _drop_ineligible_flows(self, why: str) -> None:
        for flow in [f for f in self.flows if not self.merge_eligible(f)]:
            del self.flows[flow]
            self._publish(EventKind.FLOW_OFFLOADED, flow=flow, detail=why)

    def onload(self, flow: FiveTuple, origin: FlowOrigin, idle_timeout_s: int = 0, now: float | None = None) -> MergeFlow:
        """Put a flow on the merge path, within the admission limits.

        The merge path holds at most elephant.max_flows flows. An elephant
        arriving when it is full takes the place of the oldest flow that an
        elephant or an adoption put there (operator flows stay); an operator
        onload is refused. Elephants beyond elephant.max_onloads_per_epoch
        in one sketch epoch are refused, so that a flood of reported flows
        cannot churn the switch's table faster than that.
        """
        if not self.merge_eligible(flow):
            raise PolicyError(
                "FAILED_PRECONDITION",
                f"{flow} is not merge-eligible: only TCP or UDP toward a jumbo-enabled instance may take the merge path",
            )
        if not 0 <= idle_timeout_s <= MAX_IDLE_TIMEOUT_S:
            raise invalid(f"idle_timeout_s {idle_timeout_s} is outside 0..{MAX_IDLE_TIMEOUT_S} (0: the rack's default)")
        existing = self.flows.get(flow)
        if existing is not None:
            return existing
        now = time.monotonic() if now is None else now
        limits = self.config.elephant
        if origin == FlowOrigin.ELEPHANT:
            if now - self._epoch_started >= SKETCH_EPOCH_S:
                self._epoch_started, self._epoch_onloads = now, 0
            if self._epoch_onloads >= limits.max_onloads_per_epoch:
                self.elephants_rate_limited += 1
                raise PolicyError("RESOURCE_EXHAUSTED", f"more than {limits.max_onloads_per_epoch} elephants in one epoch")
        if len(self.flows) >= limits.max_flows:
            self._make_room(origin, limits.max_flows)
        if origin == FlowOrigin.ELEPHANT:
            self._epoch_onloads += 1
        record = MergeFlow(flow, origin, idle_timeout_s or limits.idle_timeout_s, time.time())
        self.flows[flow] = record
        self.flows_onloaded += 1
        self._publish(EventKind.FLOW_ONLOADED, flow=flow, detail=f"onloaded ({origin.value})")
        self._bump()
        return record

    def _make_room(self, origin: FlowOrigin, max_flows: int) -> None:
        full = f"the merge path is full ({max_flows} flows, elephant.max_flows)"
        if origin == FlowOrigin.ADOPTED:
            raise PolicyError("RESOURCE_EXHAUSTED", full)
        # Dicts keep insertion order: the first non-operator flow is the
        # oldest one an elephant or an adoption brought. The operator's own
        # onload takes its place too, so that a flood of elephants (real
        # bytes from forged flows) cannot lock the operator out.
        victim = next((f for f, record in self.flows.items() if record.origin != FlowOrigin.OPERATOR), None)
        if victim is None:
            if origin == FlowOrigin.OPERATOR:
                self.operator_onloads_refused += 1
            raise PolicyError("RESOURCE_EXHAUSTED", f"{full}, all of them onloaded by the operator")
        del self.flows[victim]
        self.flows_evicted += 1
        newer = "an operator's onload" if origin == FlowOrigin.OPERATOR else "a newer elephant"
        self._publish(EventKind.FLOW_OFFLOADED, flow=victim, detail=f"evicted for {newer}: {full}")

    def offload(self, flow: FiveTuple, *, expired: bool = False) -> None:
        if flow not in self.flows:
            if expired:
                return
            raise PolicyError("NOT_FOUND", f"{flow} is not on the merge path")
        del self.flows[flow]
        if expired:
            self.flows_expired += 1
        else:
            self.flows_offloaded += 1
        self._publish(EventKind.FLOW_EXPIRED if expired else EventKind.FLOW_OFFLOADED, flow=flow)
        self._bump()

    def update_learned_paths(self, paths: list[LearnedPath], limit: int = MAX_LEARNED_PATHS) -> None:
        """The SmartNIC's learned path MTUs now (it forgets, re-learns and
        evicts on its own): the `limit` most recently learned are kept."""
        ranked = sorted(paths, key=lambda p: p.learned_at, reverse=True)
        kept = {p.address: p for p in ranked[:limit]}
        dropped = {p.address for p in ranked[limit:]}
        # Counted once per path that loses its place, not at every poll.
        self.learned_paths_evicted += len(dropped - self._learned_left_out)
        self._learned_left_out = dropped
        if {a: p.mtu for a, p in kept.items()} != {a: p.mtu for a, p in self.learned_paths.items()}:
            self.learned_paths = kept
            self._bump()
        else:
            self.learned_paths = kept

    def note(self, kind: EventKind, **fields) -> None:
        """Publish an event that changes no policy (connections, detections)."""
        self._publish(kind, **fields)

    def touch(self) -> None:
        """Mark the desired state changed without a policy change (e.g. the SmartNIC came or went)."""
        self._bump()
