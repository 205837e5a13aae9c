"""The controller: keeps the switch and the SmartNIC in step with the policy.

Three loops run side by side:
- the switch programmer (per P4Runtime connection): reconciles the switch's
  tables with the desired state on connect and after every policy change;
- the digest and idle-timeout listeners: elephants reported by the switch's
  sketch are onloaded, merge flows the switch reports idle (and, read back,
  holds idle) are removed;
- the SmartNIC link (`nic.NicLink`): configuration, flow mirroring, outages.
The operator API (`server.PolicyService`) changes the policy state; the loops
wake on every change.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from pathlib import Path

import finsy as fy
import finsy.p4client
from finsy.grpcutil import GRPCArg, GRPCOptions
from finsy.proto import p4r

from . import learned, metrics, metrics_server, p4, service_notify, tofino, translate
from .config import ConfigError, RackConfig, config_changes, load_config
from .election import Election
from .fleet import DEFAULT_RACK, FleetPolicy
from .flow import TCP, UDP, FiveTuple
from .nic import RECONNECT_OPTIONS, NicLink, NicStatus
from .p4 import names
from .reconcile import plan
from .server import PolicyService, serve, shutting_down
from .state import EventKind, FlowOrigin, MergeFlow, PolicyError, PolicyState
from .store import EtcdStore, MemoryStore, Store, StoreError, StoreUnavailable
from .tls import ReloadableCredentials, is_loopback, listener_refusals
from .v1 import policy_pb2

LOG = logging.getLogger("jumbogate.controller")


class _SwitchChannelOptions(GRPCOptions):
    """finsy 0.30 opens its P4Runtime channel with gRPC's reconnect backoff (1 s,
    growing to 15 s) and no way to change it: a switch restarted after a
    one-second outage waited up to 2.7 s more before the controller reconnected
    and programmed it (the soak measured it). The SmartNIC link's bounds
    (retry every 0.1 to 0.5 s) apply to the switch too."""

    def to_native(self):
        kept = [(key, value) for key, value in super().to_native() if key != GRPCArg.MAX_RECONNECT_BACKOFF_MS]
        return kept + RECONNECT_OPTIONS


finsy.p4client.GRPCOptions = _SwitchChannelOptions

# Elephant digests are batched through a bounded queue: a storm of digests
# must not grow the controller's memory or starve the API. What does not fit
# is counted as shed (the flow will be reported again next epoch).
DIGEST_QUEUE_SIZE = 4096
DIGEST_BATCH = 256
# Even without changes, re-read the switch now and then: it catches entries
# someone else changed behind our back.
RESYNC_INTERVAL_S = 5.0
# The longest the first switch programming waits to learn whether the
# SmartNIC is up.
NIC_FIRST_POLL_WAIT_S = 5.0
# After a campaign failed for want of etcd, the next one waits this long.
LEAD_RETRY_S = 0.5
# How long a lost term's tasks get to end once cancelled. Past it the
# controller campaigns anyway, saying which did not end: a stuck task must
# not keep a standby out of the line, and the switch fences whatever the old
# term's session still sends by its lower election id.
TERM_TEARDOWN_S = 5.0


class SwitchIdentityError(RuntimeError):
    """The switch made this leader primary under an election id other than its own."""


class Controller:
    def __init__(self, config: RackConfig, pipeline: Path, *, listen: str | None = None, store: Store | None = None, rack: str = DEFAULT_RACK):
        self.config = config
        # The controller's own file: its connection settings, and the policy
        # that seeds a new store (or, for the lab's memory store, is the policy).
        self.config_path = config.source
        self.pipeline = pipeline
        self.listen = listen or config.controller_listen
        self.state = PolicyState.from_config(config)
        self.nic = NicLink(config, self.state)
        self.fleet = FleetPolicy(store or MemoryStore(config.source), config, rack, self._on_store_change, self._on_epoch)
        # With etcd, the rack's controllers elect the one that programs the switch and the SmartNIC.
        self.election = Election(self.fleet.store, self.fleet.rack, self.listen) if isinstance(self.fleet.store, EtcdStore) else None
        self.nic.fenced = self.election is not None
        # Set when the store's fencing epoch rises above the one this term leads with.
        self._epoch_raised = asyncio.Event()
        self.digests_received = 0
        self.digests_shed = 0
        self.digests_refused = 0
        # Entries of idle-timeout notifications not acted on (not ours, no timeout, not idle when read back).
        self.idle_timeouts_refused = 0
        self.reconcile_totals = policy_pb2.ReconcileTotals()
        self._digest_queue: asyncio.Queue = asyncio.Queue(DIGEST_QUEUE_SIZE)
        self._switch: fy.Switch | None = None
        self._switch_ready = False
        # The operator API's TLS files, read again on every reload (set when it serves with TLS).
        self.credentials: ReloadableCredentials | None = None
        # The metrics endpoint while it serves (its TLS context is replaced on a reload too).
        self._metrics_http = None
        self.service = PolicyService(self.state, self.stats, self.nic.has_flow, self.nic, self.fleet, self.status, self.reload)

    # ----- top level -----

    def make_switch(self, election_id: int | None = None) -> fy.Switch:
        """The P4Runtime client: with the election's id when it leads the rack, else switch.election_id."""
        target = self.config.switch.target
        # The blob each target's P4Runtime server takes: BMv2's JSON, or Stratum's BfPipelineConfig (tofino.py).
        blob = self.pipeline / "jumbogate.json" if target == "v1model" else tofino.device_config(self.pipeline, target)
        options = fy.SwitchOptions(
            p4info=self.pipeline / "jumbogate.p4info.txtpb",
            p4blob=blob,
            device_id=self.config.switch.device_id,
            initial_election_id=election_id or self.config.switch.election_id,
            ready_handler=self._on_ready,
            channel_credentials=self._switch_credentials(),
        )
        switch = fy.Switch("border", self.config.switch.p4runtime, options)
        switch.ee.on(fy.SwitchEvent.CHANNEL_DOWN, self._on_down)
        return switch

    def reload(self) -> tuple[bool, str]:
        """Read rack.yaml again and apply it (SIGHUP, or the ReloadConfig call); a file that fails to load, or a
        change that needs a restart, is refused whole: nothing changes. The operator API's certificate, key and
        CA are read again too (new connections get them), and so are the store's (--store-ca, --store-cert,
        --store-key: calls to etcd made after the reload go over a new connection that uses them). Returns
        whether it was applied, and what changed or why not.

        With etcd the file's policy only ever seeds a new store: a reload
        leaves the store's policy (and every change made through the API) in force."""
        try:
            new = load_config(self.config_path)
        except ConfigError as err:
            return self._refuse_reload(str(err))
        changed, restart = config_changes(self.config, new)
        if restart:
            return self._refuse_reload(f"{self.config_path}: {', '.join(restart)} changed, which needs a restart (nothing was applied)")
        store = self.fleet.store
        store_credentials = None
        if isinstance(store, EtcdStore) and store.tls is not None:
            try:
                store_credentials = store.read_tls()
            except (OSError, ValueError) as err:
                why = f"cannot read {err.filename}: {err.strerror}" if isinstance(err, OSError) and err.filename else str(err)
                return self._refuse_reload(f"the store's TLS files cannot be used: {why} (nothing was applied; the old ones stay in force)")
        if self.credentials is not None:
            try:
                # Every endpoint's new TLS is made before any is put in place: all take the new files or none.
                self.credentials.reload(commit=False)
                metrics_context = metrics_server.tls_context(self.config.tls) if self._metrics_http is not None else None
                self.credentials.reload()
            except (OSError, ValueError) as err:
                return self._refuse_reload(f"{self.config_path}: the TLS files cannot be used: {err} (nothing was applied)")
            if metrics_context is not None:
                self._metrics_http.context = metrics_context
        if store_credentials is not None:
            store.use_tls(store_credentials)
            LOG.info("the store's TLS files read again: calls to %s from now on use them", store.url)
        if not isinstance(self.fleet.store, MemoryStore):
            self.state.config_reloads += 1
            why = f"{self.config_path}: the policy is kept from {self.fleet.store.url} (revision {self.fleet.revision}); jumbogatectl config import replaces it"
            self.state.note(EventKind.CONFIG_RELOADED, detail=why)
            LOG.info("configuration reloaded: %s", why)
            return True, why
        self.fleet.replace_now(new)
        self.config = new
        self.nic.reconfigure(new)
        self.state.reload(new, changed)
        detail = f"{new.source}: {', '.join(changed) or 'nothing changed'}"
        LOG.info("configuration reloaded from %s", detail)
        return True, detail

    def _on_store_change(self, config: RackConfig, changed: list[str]) -> None:
        """A new valid policy from the store: it reaches the switch and the SmartNIC like a reload."""
        self.config = config
        # The flags are the switch's alone: a flip pushes nothing to the SmartNIC.
        if set(changed) - {"fleet.jumbo", "instances"}:
            self.nic.reconfigure(config)
        else:
            self.nic.config = config
        self.state.apply_store(config, changed)
        LOG.info("policy from %s at revision %d: %s", self.fleet.store.url, self.fleet.revision, ", ".join(changed))

    def _on_epoch(self, epoch: int) -> None:
        """A raised fencing epoch ends this leader's term: it leads again (or another does) under the new one."""
        leadership = self.election.leadership if self.election is not None else None
        if leadership is not None and epoch > leadership.epoch:
            LOG.warning("fencing epoch raised to %d: leading again under it (election id %s until then)", epoch, leadership.shown())
            self._epoch_raised.set()

    def _refuse_reload(self, why: str) -> tuple[bool, str]:
        LOG.error("configuration reload refused: %s", why)
        self.state.refuse_reload(why)
        return False, why

    def _switch_credentials(self) -> fy.GRPCCredentialsTLS | None:
        """The controller's certificate for P4Runtime, and the CA the switch's must chain to."""
        tls = self.config.tls
        if tls is None:
            return None
        return fy.GRPCCredentialsTLS(cacert=tls.ca, cert=tls.cert, private_key=tls.key)

    def plaintext_refusals(self) -> list[str]:
        """Why a listener would serve plaintext where it must not (empty: all is well)."""
        return listener_refusals(self.config.tls, self.listen, self.config.controller_metrics, self.config.controller_insecure)

    async def run(self) -> None:
        refusals = self.plaintext_refusals()
        if refusals:
            raise OSError("; ".join(refusals))
        if self.config.tls is None and not all(is_loopback(a) for a in (self.listen, self.config.controller_metrics or "127.0.0.1:0")):
            LOG.warning(
                "WARNING: plaintext operator API or metrics on a non-loopback address (controller.insecure): anyone who reaches it can change the policy"
            )
        # Before serving: a controller without its store has no policy to serve.
        await self.fleet.start()
        if self.config.tls is not None:
            try:
                self.credentials = ReloadableCredentials(self.config.tls)
            except ValueError as err:
                raise OSError(f"the operator API's TLS files cannot be used: {err}") from None
        server = await serve(self.service, self.listen, self.config.tls, self.credentials)
        LOG.info("operator API on %s; switch %s; SmartNIC %s", self.listen, self.config.switch.p4runtime, self.config.smartnic_control)
        metrics_server = None
        try:
            metrics_server = self._metrics_http = self.serve_metrics()
            service_notify.notify(f"READY=1\nSTATUS=operator API on {self.listen}")
            async with asyncio.TaskGroup() as tasks:
                tasks.create_task(self.fleet.run())
                tasks.create_task(self._digest_worker())
                if self.election is None:
                    self._switch = self.make_switch()
                    tasks.create_task(self.nic.run())
                    tasks.create_task(self._switch.run())
                else:
                    tasks.create_task(self._lead())
        finally:
            service_notify.notify("STOPPING=1")
            # First of all: health checkers (a load balancer, a supervisor) stop sending callers here.
            await shutting_down(server)
            if metrics_server is not None:
                metrics_server.shutdown()
            if self.election is not None:
                # A clean stop hands the rack over at once, not after the lease.
                await self.election.resign()
            await server.stop(grace=0.5)
            await self.fleet.store.close()

    async def _lead(self) -> None:
        """Campaign; while leading, program the switch (as its primary, with the election's id) and drive the SmartNIC;
        when the lead is lost, stop both and campaign again. A standby only keeps its view of the store warm."""
        while True:
            try:
                leadership = await self.election.campaign()
            except StoreUnavailable as err:
                LOG.warning("campaign for rack %s failed, trying again: %s", self.fleet.rack, err)
                await asyncio.sleep(LEAD_RETRY_S)
                continue
            self._epoch_raised = asyncio.Event()
            if self.fleet.epoch > leadership.epoch:
                # Raised between the win and now: this id is fenced already.
                self._epoch_raised.set()
            self.state.note(EventKind.LEADING, detail=f"leading rack {self.fleet.rack} with election id {leadership.shown()}")
            self._switch = self.make_switch(leadership.election_id)
            # What the SmartNIC holds is found again by this term's first poll;
            # every change it makes carries this term's election id.
            self.nic.status = NicStatus()
            self.nic.election_id = leadership.election_id
            term = [
                asyncio.create_task(self._switch.run()),
                asyncio.create_task(self.nic.run()),
                # Under the term's lease: the rack's paths leave the store with this leader.
                asyncio.create_task(learned.publish_while_leading(self.fleet.store, self.fleet.rack, leadership.lease, self.state)),
            ]
            ending = [asyncio.create_task(self.election.lost.wait()), asyncio.create_task(self._epoch_raised.wait())]
            done, _ = await asyncio.wait([*term, *ending], return_when=asyncio.FIRST_COMPLETED)
            for task in (*term, *ending):
                task.cancel()
            ended, stuck = await asyncio.wait([*term, *ending], timeout=TERM_TEARDOWN_S)
            for task in ended:
                # Retrieved (so asyncio does not report them as lost): the first failure is raised below.
                _ = task.cancelled() or task.exception()
            if stuck:
                LOG.error(
                    "the ended term's tasks did not stop within %g s of being cancelled: %s; campaigning anyway",
                    TERM_TEARDOWN_S, ", ".join(task.get_coro().__qualname__ for task in stuck),
                )  # fmt: skip
            # Only now: the link's tasks are gone, and a standby changes nothing.
            self.nic.election_id = None
            failed = [task.exception() for task in done if task in term and not task.cancelled() and task.exception()]
            if not self.election.lost.is_set():
                # The term ended from within (the switch session failed, or the epoch was
                # raised): give the lead up before campaigning again.
                await self.election.resign()
            self.nic.status = NicStatus()
            self._switch_ready = False
            self.state.note(EventKind.SWITCH_DISCONNECTED, detail=f"no longer leading rack {self.fleet.rack}: stopped programming the switch")
            if failed:
                raise failed[0]

    def serve_metrics(self):
        """Start the Prometheus endpoint when controller.metrics is set; its HTTP server runs in a thread."""
        address = self.config.controller_metrics
        if address is None:
            return None
        registry = metrics.registry_for(self.metrics_snapshot, asyncio.get_running_loop())
        tls = self.config.tls
        try:
            http = metrics_server.start(address, registry, tls)
        except OSError as err:
            raise OSError(f"cannot serve metrics on {address}: {err.strerror or err}") from None
        LOG.info("metrics on %s://%s/metrics%s", "https" if tls else "http", address, " (client certificates named in tls.roles)" if tls else "")
        return http

    async def metrics_snapshot(self) -> metrics.Snapshot:
        return metrics.Snapshot(
            stats=await self.stats(),
            nic=await self.nic.stats(),
            flows_onloaded=self.state.flows_onloaded,
            flows_expired=self.state.flows_expired,
            flows_offloaded=self.state.flows_offloaded,
            tables=await metrics.read_table_fill(self._switch) if self._switch is not None and self._switch_ready else (),
        )

    # ----- switch connection -----

    def _on_down(self, switch: fy.Switch) -> None:
        if self._switch_ready:
            self._switch_ready = False
            self.state.note(EventKind.SWITCH_DISCONNECTED, detail=f"lost P4Runtime connection to {switch.address}")

    async def _on_ready(self, switch: fy.Switch) -> None:
        """Called by finsy on every (re)connect and role change, once the pipeline is in place."""
        leadership = self.election.leadership if self.election is not None else None
        if switch.is_primary and leadership is not None and switch.election_id != leadership.election_id:
            # finsy takes the last primary's id when it is promoted after a
            # higher client left (or told none is left): that id is not this
            # leader's, and writing with it would get round the switch's fence.
            # Failing this task makes finsy reconnect and arbitrate with the
            # leader's own id, which the switch makes primary if it may.
            raise SwitchIdentityError(
                f"made primary of {switch.address} with election id {switch.election_id >> 64}:{switch.election_id & ((1 << 64) - 1)},"
                f" not this leader's {leadership.shown()}: reconnecting with its own"
            )
        if not switch.is_primary:
            # Another controller with a higher election id owns the switch: a
            # backup reads nothing and writes nothing until it is promoted.
            LOG.warning("connected to %s as backup (primary election id %s); waiting", switch.address, switch.primary_id)
            # finsy calls this on a demotion too (and cancels the primary's
            # tasks): say so instead of reporting a switch it cannot program.
            if self._switch_ready:
                self._switch_ready = False
                self.state.note(EventKind.SWITCH_DISCONNECTED, detail=f"another client (election id {switch.primary_id}) took {switch.address} over")
            return
        self._switch_ready = True
        self.state.note(EventKind.SWITCH_CONNECTED, detail=f"connected to {switch.address}")
        await self._adopt_merge_flows(switch)
        switch.create_task(self._program_loop(switch))
        switch.create_task(self._read_digests(switch))
        switch.create_task(self._read_idle_timeouts(switch))

    async def _adopt_merge_flows(self, switch: fy.Switch) -> None:
        """After a controller restart, keep the merge flows the switch still holds instead of cutting them."""
        async for entry in switch.read(fy.P4TableEntry(names.MERGE_FLOWS)):
            try:
                flow = translate.merge_flow_tuple(entry)
            except (ValueError, KeyError) as err:
                # Not one this controller writes: reconciliation deletes it.
                LOG.warning("merge_flows entry not adopted: %s", err)
                continue
            if flow not in self.state.flows and self.state.merge_eligible(flow):
                # Only an operator lists UDP: adopted as the operator's, it is
                # not evicted for an elephant, which it would never come back as.
                origin = FlowOrigin.OPERATOR if flow.protocol == UDP else FlowOrigin.ADOPTED
                with contextlib.suppress(PolicyError):
                    self.state.onload(flow, origin, entry.idle_timeout_ns // 1_000_000_000)

    async def _program_loop(self, switch: fy.Switch) -> None:
        # A restarted controller that programmed the switch before it knew
        # the SmartNIC was up would take the merge path off the switch and
        # put it back a moment later: wait for the link's first word (a
        # poll answers or fails within its 1 s timeout).
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.nic.first_poll_done.wait(), timeout=NIC_FIRST_POLL_WAIT_S)
        seen = -1
        while True:
            if seen != self.state.version:
                seen = self.state.version
            await self.reconcile(switch)
            await self.state.wait_for_change(seen, timeout=RESYNC_INTERVAL_S)

    async def reconcile(self, switch: fy.Switch) -> None:
        schema = switch.p4info
        version = self.state.version
        desired = translate.desired_entities(self.state, nic_up=self.nic.up)
        encoded = [entity.encode(schema) for entity in desired]
        result = plan(encoded, await read_managed(switch, self.state))
        totals = self.reconcile_totals
        if not result.empty:
            LOG.info("reconcile: %s", result.summary())
            for batch in result.batches():
                try:
                    await switch._write_request(batch, strict=True, warn_only=False)  # finsy has no public write of ready-made Update protobufs
                except fy.P4ClientError as error:
                    # A refused write must not end the switch session (an
                    # error escaping this task makes finsy reconnect, and
                    # the next run would fail the same way): count it, and
                    # let the next run read the switch and retry.
                    totals.failed_batches += 1
                    LOG.warning("reconcile: the switch refused a batch of %d writes: %s", len(batch), error)
                    continue
                for update in batch:
                    if update.type == p4r.Update.INSERT:
                        totals.inserted += 1
                    elif update.type == p4r.Update.MODIFY:
                        totals.modified += 1
                    else:
                        totals.deleted += 1
        # A run counts once its writes are done: whoever sees runs go up
        # also sees every write of that run in the totals.
        totals.unchanged_last = result.unchanged
        totals.policy_version = version
        totals.runs += 1

    # ----- digests and idle timeouts -----

    async def _read_digests(self, switch: fy.Switch) -> None:
        try:
            await switch.insert([translate.digest_config()])
        except fy.P4ClientError:
            # Already enabled (we reconnected to a switch that kept its state).
            await switch.modify([translate.digest_config()])
        async for digest_list in switch.read_digests(names.ELEPHANT_DIGEST):
            # Ack first: the switch suppresses repeats of an unacked list.
            await switch.write([digest_list.ack()])
            self.enqueue_digests(digest_list)

    def enqueue_digests(self, items) -> None:
        """Queue digest items for onloading; what does not fit is counted as shed, never waited for."""
        for item in items:
            self.digests_received += 1
            try:
                self._digest_queue.put_nowait(item)
            except asyncio.QueueFull:
                self.digests_shed += 1

    def onload_digest_batch(self, first=None) -> int:
        """Onload `first` and up to DIGEST_BATCH queued elephants in one go; return how many items were taken."""
        batch = [] if first is None else [first]
        while len(batch) < DIGEST_BATCH and not self._digest_queue.empty():
            batch.append(self._digest_queue.get_nowait())
        for item in batch:
            try:
                report = p4.entries.decode_elephant_digest(item)
            except (ValueError, KeyError) as err:
                # A forged flow (port 0, say) still fills the sketch: one
                # such digest must not end the worker that onloads the rest.
                self.digests_refused += 1
                LOG.debug("digest refused: %s", err)
                continue
            flow, estimate = report.flow, report.estimated_bytes
            if flow.protocol != TCP:
                # The switch counts no UDP: a digest naming one is forged.
                self.digests_refused += 1
                continue
            if flow in self.state.flows or not self.state.elephant_eligible(flow):
                continue
            self.state.note(EventKind.ELEPHANT_DETECTED, flow=flow, estimated_bytes=estimate)
            with contextlib.suppress(PolicyError):
                self.state.onload(flow, FlowOrigin.ELEPHANT)
        return len(batch)

    async def _digest_worker(self) -> None:
        while True:
            self.onload_digest_batch(await self._digest_queue.get())
            # Let the switch programmer write this batch before the next one.
            await asyncio.sleep(0)

    async def _read_idle_timeouts(self, switch: fy.Switch) -> None:
        async for notification in switch.read_idle_timeouts():
            for flow in await self.idle_flows(switch, list(notification)):
                self.state.offload(flow, expired=True)

    async def idle_flows(self, switch: fy.Switch, entries: list[fy.P4TableEntry]) -> list[FiveTuple]:
        """The flows of an idle-timeout notification's entries that are idle indeed, to be forgotten.

        A notification is the switch's word alone: a hostile or buggy switch would take an operator's
        flows off the merge path with it. Only a merge flow this controller holds, notified with an idle
        timeout, is looked at, and it is forgotten only if the switch, read back, holds it and has not
        seen it hit for the timeout this controller gave it (P4Runtime's time_since_last_hit). A switch
        that cannot say when an entry was last hit is believed for flows it holds, but never for the
        operator's own. The other entries are counted (idle_timeouts_refused) and logged."""
        refused: list[str] = []
        candidates: dict[FiveTuple, MergeFlow] = {}
        for entry in entries:
            if entry.table_id != names.MERGE_FLOWS:
                refused.append(f"an entry of {entry.table_id}, which has no idle timeout")
                continue
            try:
                flow = translate.merge_flow_tuple(entry)
            except (ValueError, KeyError) as err:
                refused.append(f"a merge_flows entry of no flow ({err})")  # not ours: reconciliation deletes it
                continue
            record = self.state.flows.get(flow)
            if record is None:
                refused.append(f"{flow}, not on the merge path")
            elif not entry.idle_timeout_ns:
                refused.append(f"{flow}, notified without an idle timeout")
            else:
                candidates[flow] = record
        idle = []
        try:
            held, since_hit = await self._read_back_merge_flows(switch, list(candidates)) if candidates else (set(), None)
        except fy.P4ClientError as err:
            # Kept on the merge path, and the session goes on: the switch notifies again while the entries stay idle.
            refused += [f"{flow}, which the switch did not read back ({err})" for flow in candidates]
            candidates = {}
        for flow, record in candidates.items():
            timeout_ns = record.idle_timeout_s * 1_000_000_000
            if self.state.flows.get(flow) is not record:
                # Onloaded anew (by the operator, say) while the switch was read: judged on what it was.
                refused.append(f"{flow}, onloaded again while the switch was read back")
            elif flow not in held:
                refused.append(f"{flow}, which the switch does not hold")
            elif since_hit is None and record.origin == FlowOrigin.OPERATOR:
                refused.append(f"{flow}, the operator's, which the switch cannot say was idle (no time_since_last_hit)")
            elif since_hit is not None and since_hit.get(flow, 0) < timeout_ns:
                refused.append(f"{flow}, hit {since_hit.get(flow, 0) / 1e9:.1f} s ago by the switch's own count (idle timeout {record.idle_timeout_s} s)")
            else:
                idle.append(flow)
        if refused:
            self.idle_timeouts_refused += len(refused)
            LOG.warning(
                "idle-timeout notification from %s: %d of %d entries not acted on (%d so far): %s",
                switch.address, len(refused), len(entries), self.idle_timeouts_refused, "; ".join(refused[:4]) + ("; ..." if len(refused) > 4 else ""),
            )  # fmt: skip
        return idle

    async def _read_back_merge_flows(self, switch: fy.Switch, flows: list[FiveTuple]) -> tuple[set[FiveTuple], dict[FiveTuple, int] | None]:
        """The flows the switch holds with an idle timeout, and the nanoseconds since each was last hit
        (None: the switch does not say, P4Runtime's time_since_last_hit being optional)."""

        async def read(with_hits: bool) -> list[fy.P4TableEntry]:
            # A read with a match names one entry each: only these flows are looked at.
            hits = 0 if with_hits else None
            queries = [fy.P4TableEntry(names.MERGE_FLOWS, match=p4.entries.merge_flow(flow).match, time_since_last_hit=hits) for flow in flows]
            return [entity async for entity in switch.read(queries) if isinstance(entity, fy.P4TableEntry)]

        try:
            entries, with_hits = await read(True), True
        except fy.P4ClientError as err:
            LOG.debug("the switch does not read time_since_last_hit: %s", err)
            entries, with_hits = await read(False), False
        held, since_hit = set(), {}
        for entry in entries:
            try:
                flow = translate.merge_flow_tuple(entry)
            except (ValueError, KeyError):
                continue
            if entry.idle_timeout_ns:
                held.add(flow)
                if entry.time_since_last_hit is not None:
                    since_hit[flow] = entry.time_since_last_hit
        return held, since_hit if with_hits else None

    # ----- statistics -----

    async def status(self) -> policy_pb2.BorderStatus:
        return await border_status(self)

    async def stats(self) -> policy_pb2.Stats:
        stats = policy_pb2.Stats(
            digests_received=self.digests_received,
            digests_shed=self.digests_shed,
            digests_refused=self.digests_refused,
            idle_timeouts_refused=self.idle_timeouts_refused,
            switch_connected=self._switch_ready,
            reconcile=self.reconcile_totals,
            policy_version=self.state.version,
            store=policy_pb2.StoreStatus(
                endpoint=self.fleet.store.url,
                revision=self.fleet.revision,
                revision_applied=self.fleet.revision_applied,
                refused_revisions=self.fleet.refused_revisions,
                last_refusal=self.fleet.last_refusal,
                rack=self.fleet.rack,
                fencing_epoch=self.fleet.epoch,
            ),
            admission=policy_pb2.MergeAdmission(
                flows=len(self.state.flows),
                max_flows=self.config.elephant.max_flows,
                elephants_rate_limited=self.state.elephants_rate_limited,
                flows_evicted=self.state.flows_evicted,
                operator_onloads_refused=self.state.operator_onloads_refused,
                max_onloads_per_epoch=self.config.elephant.max_onloads_per_epoch,
            ),
            config_reloads=policy_pb2.ConfigReloads(
                applied=self.state.config_reloads, refused=self.state.config_reload_refusals, last_refusal=self.state.last_reload_refusal
            ),
            watch_streams=policy_pb2.WatchStreams(
                open=self.state.events.watchers,
                max=self.state.events.max_watchers,
                max_per_caller=self.state.events.max_per_caller,
                refused=self.state.events.refused,
            ),
        )
        if self.election is not None:
            stats.election.SetInParent()
            leadership = self.election.leadership
            if leadership is not None:
                stats.election.leading = True
                stats.election.election_id_high = leadership.election_id >> 64
                stats.election.election_id_low = leadership.revision
        switch = self._switch
        if switch is not None and self._switch_ready:
            fill_switch_stats(stats, await p4.stats.read_stats(switch), self.config, len(self.state.flows))
        nic = await self.nic.stats()
        # Always present, so that "reachable: false" is said rather than left out.
        stats.nic.SetInParent()
        if nic is not None:
            stats.nic.CopyFrom(
                policy_pb2.NicSummary(
                    reachable=True,
                    packets_in=nic.packets_in,
                    packets_out=nic.packets_out,
                    merged_packets=nic.merged_packets,
                    conversion_yield=nic.conversion_yield,
                    segments_out=nic.split_segments_out,
                    fence_election_id_high=nic.fence.election_id_high,
                    fence_election_id_low=nic.fence.election_id_low,
                    fence_changes_refused=nic.fence.changes_refused,
                )
            )
        stats.nic.fenced_calls = self.nic.fenced_calls
        stats.nic.last_fenced = self.nic.last_fenced
        return stats


async def border_status(controller: Controller) -> policy_pb2.BorderStatus:
    """`jumbogatectl status`: the store asked now, the election, the switch's primary as the switch last said, the SmartNIC asked now."""
    fleet, out = controller.fleet, policy_pb2.BorderStatus()
    store = out.store
    store.endpoint, store.rack, store.fencing_epoch = fleet.store.url, fleet.rack, fleet.epoch
    store.revision, store.revision_applied, store.refused_revisions = fleet.revision, fleet.revision_applied, fleet.refused_revisions
    try:
        health = await fleet.store.health()
        store.healthy, store.revision, store.version, store.db_size_bytes = True, health.revision, health.version, health.db_size_bytes
    except StoreError as err:
        store.error = str(err)
    election = controller.election
    if election is not None:
        out.election.SetInParent()
        if election.leadership is not None:
            out.election.leading = True
            out.election.election_id_high, out.election.election_id_low = election.leadership.epoch, election.leadership.revision
        if store.healthy:
            with contextlib.suppress(StoreError):
                leader = await election.leader()
                if leader is not None:
                    out.election.leader, out.election.leader_revision = leader
    out.switch.address = controller.config.switch.p4runtime
    switch = controller._switch
    if switch is not None and controller._switch_ready:
        out.switch.connected = True
        primary = switch.primary_id
        out.switch.primary_election_id_high, out.switch.primary_election_id_low = primary >> 64, primary & ((1 << 64) - 1)
    nic, link = out.smartnic, controller.nic
    nic.address, nic.reachable, nic.boot_id = link.address, link.up, link.status.boot_id
    nic.fenced_calls, nic.last_fenced = link.fenced_calls, link.last_fenced
    answered = await link.stats()
    if answered is not None:
        fence = answered.fence
        nic.fence_election_id_high, nic.fence_election_id_low, nic.fence_changes_refused = fence.election_id_high, fence.election_id_low, fence.changes_refused
    return out


async def read_managed(switch: fy.Switch, state: PolicyState) -> list[p4r.Entity]:
    """Everything reconciliation manages, as the switch holds it now."""
    schema = switch.p4info
    queries: list = [fy.P4TableEntry(), fy.P4ActionProfileMember(), fy.P4ActionProfileGroup()]
    queries += [fy.P4TableEntry(name, is_default_action=True) for name in translate.MANAGED_DEFAULTS]
    queries += translate.meter_queries(state)
    if state.config.switch.target != "v1model":
        queries.append(fy.P4CloneSessionEntry())  # the signal's mirror sessions
    return [entity.encode(schema) async for entity in switch.read(queries)]


def _count(value: p4.stats.PacketsBytes) -> policy_pb2.PacketByteCount:
    return policy_pb2.PacketByteCount(packets=value.packets, bytes=value.bytes)


def fill_switch_stats(out: policy_pb2.Stats, dp: p4.stats.DataplaneStats, config: RackConfig, merge_flows: int) -> None:
    """Copy data-plane counters into the API's statistics message."""
    zero = p4.stats.PacketsBytes()
    for port in config.ports:
        out.ports.append(
            policy_pb2.PortStats(
                port=port.port,
                role=port.role,
                name=port.name,
                ingress=_count(dp.port_rx.get(port.port, zero)),
                egress=_count(dp.port_tx.get(port.port, zero)),
            )
        )
    for reason in p4.DropReason:
        if reason.value == 0:
            continue
        out.drops.append(policy_pb2.DropReasonStats(reason=reason.name, code=reason.value, count=_count(dp.drops.get(reason, zero))))
    out.merge_path.CopyFrom(_count(dp.paths.get(p4.Path.MERGE, zero)))
    out.bypass.CopyFrom(_count(dp.paths.get(p4.Path.BYPASS, zero)))
    out.icmp_generated = sum(v.packets for v in dp.icmp_signals.values())
    out.tables.append(policy_pb2.TableStats(table=names.MERGE_FLOWS, entries=merge_flows))
