"""The operator API (proto/jumbogate/v1/policy.proto), served over gRPC.

Answers come from the controller's policy state; changes are applied to the
switch and the SmartNIC by the controller's programmers, which wake on every
change (well within a second). While the switch is disconnected, changes are
kept and applied on reconnect.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import replace

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection

from . import paths
from .fleet import FleetPolicy
from .flow import FiveTuple
from .nic import NicLink
from .state import Event, EventKind, FlowOrigin, MergeFlow, PolicyError, PolicyState, invalid
from .store import MemoryStore, StoreError
from .tls import ReloadableCredentials, RoleInterceptor, TlsConfig, peer_names
from .v1 import common_pb2, nic_pb2, policy_pb2, policy_pb2_grpc

StatsProvider = Callable[[], Awaitable[policy_pb2.Stats]]
# Reads rack.yaml again and applies it: (applied, what changed or why it was refused).
Reloader = Callable[[], tuple[bool, str]]
POLICY_SERVICE = policy_pb2.DESCRIPTOR.services_by_name["Policy"].full_name

_EVENT_KINDS = {kind: getattr(policy_pb2, f"EVENT_KIND_{kind.name}") for kind in EventKind}
_ORIGINS = {
    FlowOrigin.ELEPHANT: policy_pb2.FLOW_ORIGIN_ELEPHANT,
    FlowOrigin.OPERATOR: policy_pb2.FLOW_ORIGIN_OPERATOR,
    FlowOrigin.ADOPTED: policy_pb2.FLOW_ORIGIN_ADOPTED,
}


def five_tuple_to_pb(flow: FiveTuple) -> common_pb2.FiveTuple:
    return common_pb2.FiveTuple(src_ip=str(flow.src_ip), dst_ip=str(flow.dst_ip), protocol=flow.protocol, src_port=flow.src_port, dst_port=flow.dst_port)


def five_tuple_from_pb(msg: common_pb2.FiveTuple) -> FiveTuple:
    try:
        return FiveTuple.parse(msg.src_ip, msg.dst_ip, msg.protocol, msg.src_port, msg.dst_port)
    except ValueError as err:
        raise invalid(str(err)) from None


class PolicyService(policy_pb2_grpc.PolicyServicer):
    def __init__(
        self,
        state: PolicyState,
        stats: StatsProvider,
        nic_has_flow: Callable[[FiveTuple], bool] = lambda _flow: False,
        nic: NicLink | None = None,
        fleet: FleetPolicy | None = None,
        status: Callable[[], Awaitable[policy_pb2.BorderStatus]] | None = None,
        reload: Reloader | None = None,
    ):
        self.state = state
        self._reload = reload
        self._status = status
        self._stats = stats
        self._nic_has_flow = nic_has_flow
        self._nic = nic
        # Where flag changes and imports are committed (the store); the
        # state follows once the store has them.
        self.fleet = fleet

    # ----- helpers -----

    def _fleet(self, jumbo: bool | None = None, revision: int | None = None) -> policy_pb2.Fleet:
        """The fleet now, or with the flag an event recorded (or a change wrote, at its revision)."""
        mtu = self.state.config.mtu
        return policy_pb2.Fleet(
            jumbo=self.state.fleet_jumbo if jumbo is None else jumbo,
            guest_jumbo_mtu=mtu.guest_jumbo,
            default_mtu=mtu.default_external,
            revision=self._revision() if revision is None else revision,
        )

    def _revision(self) -> int:
        return self.fleet.revision if self.fleet else 0

    def _instance(self, instance_id: str, jumbo: bool | None = None, effective_mtu: int | None = None, revision: int | None = None) -> policy_pb2.Instance:
        """The instance now, or with the flag and MTU an event recorded (or a change wrote, at its revision)."""
        instance = self.state.require_instance(instance_id)
        return policy_pb2.Instance(
            id=instance.id,
            addresses=[str(a) for a in instance.addresses],
            jumbo=self.state.instance_jumbo[instance.id] if jumbo is None else jumbo,
            effective_mtu=self.state.effective_mtu(instance.id) if effective_mtu is None else effective_mtu,
            revision=self._revision() if revision is None else revision,
        )

    def _flow(self, record: MergeFlow) -> policy_pb2.MergeFlow:
        return policy_pb2.MergeFlow(
            flow=five_tuple_to_pb(record.flow),
            origin=_ORIGINS[record.origin],
            idle_timeout_s=record.idle_timeout_s,
            onloaded_at=record.onloaded_at,
            on_nic=self._nic_has_flow(record.flow),
        )

    def event_to_pb(self, event: Event) -> policy_pb2.Event:
        msg = policy_pb2.Event(kind=_EVENT_KINDS[event.kind], time=event.time, estimated_bytes=event.estimated_bytes, detail=event.detail)
        if event.flow is not None:
            msg.flow.CopyFrom(five_tuple_to_pb(event.flow))
        # What the event recorded, not what holds now: a watcher may read it
        # after the flags changed again.
        if event.instance_id is not None:
            msg.instance.CopyFrom(self._instance(event.instance_id, event.instance_jumbo, event.instance_mtu))
        if event.fleet_jumbo is not None:
            msg.fleet.CopyFrom(self._fleet(event.fleet_jumbo))
        return msg

    @staticmethod
    async def _abort(context: grpc.aio.ServicerContext, err: PolicyError | StoreError):
        message = err.message if isinstance(err, PolicyError) else str(err)
        await context.abort(getattr(grpc.StatusCode, err.code), message)

    # ----- RPCs -----

    async def GetFleet(self, request, context):
        return self._fleet()

    async def SetFleet(self, request, context):
        try:
            if self.fleet is None:
                self.state.set_fleet(request.jumbo)
                return self._fleet()
            # What was written, at the revision it was written at: the policy in force may lag it
            # (its read-back failed; a newer revision of the store is refused).
            revision = await self.fleet.set_fleet(request.jumbo, request.revision)
            return self._fleet(request.jumbo, revision)
        except (PolicyError, StoreError) as err:
            await self._abort(context, err)

    async def ListInstances(self, request, context):
        return policy_pb2.ListInstancesResponse(instances=[self._instance(i) for i in self.state.instance_ids()])

    async def GetInstance(self, request, context):
        try:
            return self._instance(request.id)
        except PolicyError as err:
            await self._abort(context, err)

    async def SetInstanceJumbo(self, request, context):
        try:
            if self.fleet is None:
                self.state.set_instance_jumbo(request.id, request.jumbo)
                return self._instance(request.id)
            # What was written, as for SetFleet.
            revision, fleet_on = await self.fleet.set_instance_jumbo(request.id, request.jumbo, request.revision)
            instance = replace(self.state.require_instance(request.id), jumbo=request.jumbo)
            return self._instance(request.id, request.jumbo, self.state.config.effective_mtu(instance, fleet_on), revision)
        except (PolicyError, StoreError) as err:
            await self._abort(context, err)

    async def ImportConfig(self, request, context):
        try:
            if self.fleet is None:
                raise PolicyError("UNAVAILABLE", "this controller has no store")
            revision = await self.fleet.import_yaml(request.yaml, request.source or "<import>", request.revision)
            return policy_pb2.ImportConfigResponse(revision=revision)
        except (PolicyError, StoreError) as err:
            await self._abort(context, err)

    async def ExportConfig(self, request, context):
        if self.fleet is None:
            await self._abort(context, PolicyError("UNAVAILABLE", "this controller has no store"))
        return policy_pb2.ExportConfigResponse(yaml=self.fleet.export_yaml(), revision=self.fleet.revision_applied)

    async def RaiseFencingEpoch(self, request, context):
        try:
            if self.fleet is None or isinstance(self.fleet.store, MemoryStore):
                raise PolicyError("FAILED_PRECONDITION", "this controller has no etcd store: nothing is elected, nothing fenced")
            epoch, revision = await self.fleet.raise_epoch(request.to)
            return policy_pb2.FencingEpoch(epoch=epoch, revision=revision)
        except (PolicyError, StoreError) as err:
            await self._abort(context, err)

    async def ReloadConfig(self, request, context):
        if self._reload is None:
            await self._abort(context, PolicyError("UNIMPLEMENTED", "this server has no configuration file to reload"))
        applied, detail = self._reload()
        if not applied:
            await self._abort(context, PolicyError("FAILED_PRECONDITION", detail))
        return policy_pb2.ReloadConfigResponse(detail=detail)

    async def _ask_nic(self, context, method: str, request):
        try:
            if self._nic is None:
                raise PolicyError("UNAVAILABLE", "this controller has no SmartNIC link")
            return await self._nic.ask(method, request)
        except PolicyError as err:
            await self._abort(context, err)

    async def GetNicStats(self, request, context):
        return await self._ask_nic(context, "GetStats", nic_pb2.GetNicStatsRequest())

    async def GetNicConfig(self, request, context):
        return await self._ask_nic(context, "GetConfig", nic_pb2.GetConfigRequest())

    async def ListNicFlows(self, request, context):
        return await self._ask_nic(context, "ListFlows", nic_pb2.ListNicFlowsRequest())

    async def OnloadFlow(self, request, context):
        try:
            if not request.HasField("flow"):
                raise PolicyError("INVALID_ARGUMENT", "flow is required")
            record = self.state.onload(five_tuple_from_pb(request.flow), FlowOrigin.OPERATOR, request.idle_timeout_s)
            return self._flow(record)
        except PolicyError as err:
            await self._abort(context, err)

    async def OffloadFlow(self, request, context):
        try:
            if not request.HasField("flow"):
                raise PolicyError("INVALID_ARGUMENT", "flow is required")
            self.state.offload(five_tuple_from_pb(request.flow))
            return policy_pb2.OffloadFlowResponse()
        except PolicyError as err:
            await self._abort(context, err)

    async def ListFlows(self, request, context):
        return policy_pb2.ListFlowsResponse(flows=[self._flow(r) for r in sorted(self.state.flows.values(), key=lambda r: r.flow)])

    async def GetStats(self, request, context):
        return await self._stats()

    async def GetStatus(self, request, context):
        if self._status is None:
            await self._abort(context, PolicyError("UNIMPLEMENTED", "this server has no border to report on"))
        return await self._status()

    async def ListPaths(self, request, context):
        try:
            if request.fleet:
                return await paths.fleet_paths(self.fleet.store if self.fleet else None, self.state, request.address)
            if self._nic is None:
                raise PolicyError("UNAVAILABLE", "this controller has no SmartNIC link")
            return await paths.list_paths(self._nic, self.state, request.address)
        except PolicyError as err:
            await self._abort(context, err)

    async def ProbePath(self, request, context):
        try:
            if self._nic is None:
                raise PolicyError("UNAVAILABLE", "this controller has no SmartNIC link")
            return await paths.probe_path(self._nic, self.state, request.address, request.exact)
        except PolicyError as err:
            await self._abort(context, err)

    async def Watch(self, request, context):
        try:
            queue = self.state.events.subscribe(",".join(peer_names(context)))
        except PolicyError as err:
            await self._abort(context, err)
        try:
            while True:
                event = await queue.get()
                yield self.event_to_pb(event)
        finally:
            self.state.events.unsubscribe(queue)


async def serve(service: PolicyService, address: str, tls: TlsConfig | None = None, credentials: ReloadableCredentials | None = None) -> grpc.aio.Server:
    """Start serving on `address` (mutual TLS and roles when `tls`, with `credentials` to reload its files);
    fail with a clear message if it is taken.

    Beside the Policy service: gRPC health (grpc.health.v1, SERVING for ""
    and jumbogate.v1.Policy while the API serves) and server reflection (for
    grpcurl), both open to every role."""
    # gRPC sets SO_REUSEPORT by default, so a second controller on the same
    # address would bind too and silently take half of the operator's calls.
    server = grpc.aio.server(options=[("grpc.so_reuseport", 0)], interceptors=[RoleInterceptor(tls)] if tls else None)
    policy_pb2_grpc.add_PolicyServicer_to_server(service, server)
    checker = health.aio.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(checker, server)
    for name in ("", POLICY_SERVICE):
        await checker.set(name, health_pb2.HealthCheckResponse.SERVING)
    server.jumbogate_health = checker
    reflection.enable_server_reflection([POLICY_SERVICE, health.SERVICE_NAME, reflection.SERVICE_NAME], server)
    if tls and credentials is None:
        credentials = ReloadableCredentials(tls)
    try:
        port = server.add_secure_port(address, credentials.credentials()) if tls else server.add_insecure_port(address)
    except RuntimeError as err:
        raise OSError(f"cannot listen on {address}: {err}") from None
    if port == 0:
        raise OSError(f"cannot listen on {address}: address in use or not available")
    await server.start()
    return server


async def shutting_down(server: grpc.aio.Server) -> None:
    """Health says NOT_SERVING from now on, to checks and to every Watch open on it (the server still answers)."""
    checker = getattr(server, "jumbogate_health", None)
    if checker is not None:
        await checker.enter_graceful_shutdown()


async def stop(server: grpc.aio.Server) -> None:
    await shutting_down(server)
    await server.stop(grace=0.5)
    await asyncio.sleep(0)
