"""The controller's side of the SmartNIC: keeps jumbogate-nic configured and in step.

A `NicLink` polls the SmartNIC's identity. When it appears, or reappears with
a new boot id (it restarted and starts empty), the link pushes the MTUs, the
delay model and the path MTUs, then mirrors the onloaded flows. When it stops
answering, the link reports it down so the switch programmer removes the
merge-path entries: traffic bypasses the SmartNIC instead of black-holing.

With an election (an etcd store), only the rack's leader runs the link, and
each change it makes carries its election id in the jumbogate-election-id
metadata: the SmartNIC refuses a change whose id is below the highest it has
seen, so a leader deposed while it was paused or cut off cannot change it
once its successor has, even before it learns that it lost. A standby
changes nothing (`election_id` is None while it does not lead).
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import time
from dataclasses import dataclass

import grpc

from .config import RackConfig
from .flow import FiveTuple, IPAddress
from .state import MAX_METHOD_CHARS, EventKind, LearnedPath, PolicyError, PolicyState
from .tls import channel_credentials
from .v1 import common_pb2, nic_pb2, nic_pb2_grpc

LOG = logging.getLogger("jumbogate.nic")
# The SmartNIC's calls that change it: these carry the leader's election id.
# Reads are never fenced (docs/smartnic.md).
CHANGES = frozenset({"Configure", "SetPathMtu", "DeletePathMtu", "OnloadFlow", "OffloadFlow", "ProbePath"})
ELECTION_ID_METADATA = "jumbogate-election-id"
# Polls in a row that may time out before a SmartNIC that still holds its
# connection is reported down.
SLOW_POLLS_BEFORE_DOWN = 2

# gRPC waits longer and longer (up to two minutes) before reconnecting to an
# address that refused it, and fails calls at once meanwhile: a SmartNIC
# restarted after a long outage stayed unseen, its flows on the bypass, for
# as long. Retrying at least every half second costs one refused connect.
# Not grpc.min_reconnect_backoff_ms: gRPC also takes it as the least time a
# connection attempt may last, and at 100 ms a peer slow to answer on a
# loaded machine was given up on ("timed out before receiving SETTINGS
# frame"; test_reconnect_options.py).
RECONNECT_OPTIONS = [
    ("grpc.initial_reconnect_backoff_ms", 100),
    ("grpc.max_reconnect_backoff_ms", 500),
]


def _flow_pb(flow: FiveTuple) -> nic_pb2.NicFlowRequest:
    return nic_pb2.NicFlowRequest(
        flow=common_pb2.FiveTuple(src_ip=str(flow.src_ip), dst_ip=str(flow.dst_ip), protocol=flow.protocol, src_port=flow.src_port, dst_port=flow.dst_port)
    )


def nic_config(config: RackConfig) -> nic_pb2.NicConfig:
    """What the rack config says the SmartNIC should run with (zero fields keep the SmartNIC's defaults)."""
    message = nic_pb2.NicConfig(
        internal_mtu=config.mtu.guest_jumbo, default_path_mtu_v4=config.mtu.default_external, default_path_mtu_v6=config.mtu.default_external_v6
    )
    if config.smartnic_internal_prefixes:
        message.internal_prefixes.extend(common_pb2.Prefix(cidr=str(p)) for p in config.smartnic_internal_prefixes)
        message.set_internal_prefixes = True
    return message


@dataclass
class NicStatus:
    reachable: bool = False
    boot_id: int = 0
    # Flows the SmartNIC has been told about since its current boot.
    flows: frozenset[FiveTuple] = frozenset()


def learned_address(text: str) -> IPAddress | None:
    """A learned path's address as the SmartNIC lists it; None (logged) when it is not a plain address.
    A zone id (fe80::1%eth0) is refused too: two of them for one address made two paths of one /128
    on the switch, and every reconciliation failed from then on."""
    try:
        address = ipaddress.ip_address(text)
    except ValueError:
        address = None
    if address is None or getattr(address, "scope_id", None):
        LOG.warning("SmartNIC listed a learned path to %r, not a plain address; ignored", text[:80])
        return None
    return address


class NicLink:
    def __init__(self, config: RackConfig, state: PolicyState, *, poll_interval: float = 0.25, rpc_timeout: float = 1.0):
        self.config = config
        self.state = state
        self.address = config.smartnic_control
        self.tls = config.tls
        self.poll_interval = poll_interval
        self.rpc_timeout = rpc_timeout
        self.status = NicStatus()
        self._channel: grpc.aio.Channel | None = None
        self._slow_polls = 0
        self._stub: nic_pb2_grpc.NicStub | None = None
        # Set once the first poll has said whether the SmartNIC is there.
        self.first_poll_done = asyncio.Event()
        # Set by a reload: the SmartNIC's configuration is pushed again.
        self._config_changed = False
        # Fenced: this controller is one of a rack's elected controllers, and
        # changes the SmartNIC only while it leads, with the id it leads with.
        self.fenced = False
        self.election_id: int | None = None
        # Changes the SmartNIC refused for a higher leader's id, and the last one's words.
        self.fenced_calls = 0
        self.last_fenced = ""

    def reconfigure(self, config: RackConfig) -> None:
        """A reloaded config: pushed to the SmartNIC at the next poll (its address and TLS need a restart)."""
        self.config = config
        self._config_changed = True

    @property
    def up(self) -> bool:
        return self.status.reachable

    def has_flow(self, flow: FiveTuple) -> bool:
        return self.status.reachable and flow in self.status.flows

    def _metadata(self, method: str) -> list[tuple[str, str]] | None:
        """The leader's election id for a change (HIGH:LOW); PolicyError for a change by a controller that does not lead."""
        if not self.fenced or method not in CHANGES:
            return None
        if self.election_id is None:
            raise PolicyError("FAILED_PRECONDITION", "this controller is a standby: the rack's leading controller drives the SmartNIC")
        return [(ELECTION_ID_METADATA, f"{self.election_id >> 64}:{self.election_id & ((1 << 64) - 1)}")]

    async def _invoke(self, method: str, request, timeout: float):
        assert self._stub is not None
        try:
            return await getattr(self._stub, method)(request, timeout=timeout, metadata=self._metadata(method))
        except grpc.aio.AioRpcError as err:
            if err.code() == grpc.StatusCode.PERMISSION_DENIED and method in CHANGES:
                self.fenced_calls += 1
                if err.details() != self.last_fenced:
                    LOG.error("SmartNIC at %s refused %s from this controller: %s", self.address, method, err.details())
                self.last_fenced = err.details()
            raise

    async def _call(self, method: str, request):
        return await self._invoke(method, request, self.rpc_timeout)

    async def run(self) -> None:
        """Poll forever: notice (re)starts and outages, keep flows mirrored."""
        if self.tls is not None:
            self._channel = grpc.aio.secure_channel(self.address, channel_credentials(self.tls), options=RECONNECT_OPTIONS)
        else:
            self._channel = grpc.aio.insecure_channel(self.address, options=RECONNECT_OPTIONS)
        self._stub = nic_pb2_grpc.NicStub(self._channel)
        seen_version = -1
        try:
            while True:
                await self._poll_once()
                self.first_poll_done.set()
                if self.status.reachable:
                    await self._sync_learned_paths()
                if self.status.reachable and seen_version != self.state.version:
                    seen_version = self.state.version
                    await self._sync_flows()
                await self.state.wait_for_change(seen_version, timeout=self.poll_interval)
        finally:
            await self._channel.close()

    async def _poll_once(self) -> None:
        try:
            info = await self._call("GetInfo", nic_pb2.GetInfoRequest())
        except grpc.aio.AioRpcError as err:
            # A SmartNIC that is gone refuses the connection at once: report
            # it down now, so traffic bypasses it within a poll. One that is
            # only slow to answer (a loaded machine) gets a second poll first.
            self._slow_polls = self._slow_polls + 1 if err.code() == grpc.StatusCode.DEADLINE_EXCEEDED else SLOW_POLLS_BEFORE_DOWN
            if self.status.reachable and self._slow_polls < SLOW_POLLS_BEFORE_DOWN:
                LOG.info("SmartNIC at %s was slow to answer (%s); asking again", self.address, err.code().name)
                return
            if self.status.reachable:
                LOG.warning("SmartNIC at %s stopped answering (%s): flows bypass the merge path", self.address, err.code().name)
                self.status = NicStatus()
                self.state.note(EventKind.NIC_DOWN, detail=f"SmartNIC {self.address} unreachable")
                self.state.touch()
            return
        self._slow_polls = 0
        if self.status.reachable and info.boot_id == self.status.boot_id:
            if self._config_changed:
                try:
                    await self._push_configuration()
                except grpc.aio.AioRpcError as err:
                    LOG.warning("SmartNIC at %s refused its reloaded configuration: %s", self.address, err.details())
            return
        restarted = self.status.boot_id != 0
        try:
            await self._push_configuration()
        except grpc.aio.AioRpcError as err:
            LOG.warning("SmartNIC at %s answered but refused its configuration: %s", self.address, err.details())
            return
        self.status = NicStatus(reachable=True, boot_id=info.boot_id)
        LOG.info("SmartNIC at %s is up (boot %x%s)", self.address, info.boot_id, ", restarted" if restarted else "")
        self.state.note(EventKind.NIC_UP, detail=f"SmartNIC {self.address} up{' after restart' if restarted else ''}")
        await self._sync_flows()
        self.state.touch()

    async def _push_configuration(self) -> None:
        # Cleared before the calls, so that a reload while they run is pushed again after; set
        # again when one fails, so that a refused or timed-out push is tried on the next poll.
        self._config_changed = False
        try:
            await self._push_configuration_calls()
        except grpc.aio.AioRpcError:
            self._config_changed = True
            raise

    async def _push_configuration_calls(self) -> None:
        await self._call("Configure", nic_config(self.config))
        wanted = {str(p.prefix): p.mtu for p in self.config.path_mtus}
        present = await self._call("ListPathMtus", nic_pb2.ListPathMtusRequest())
        for entry in present.entries:
            if entry.prefix.cidr not in wanted:
                await self._call("DeletePathMtu", nic_pb2.DeletePathMtuRequest(prefix=entry.prefix))
        for cidr, mtu in wanted.items():
            await self._call("SetPathMtu", nic_pb2.SetPathMtuRequest(prefix=common_pb2.Prefix(cidr=cidr), mtu=mtu))

    async def _sync_flows(self) -> None:
        """Make the SmartNIC's flow set equal the policy's merge flows."""
        wanted = frozenset(self.state.flows)
        have = self.status.flows
        try:
            for flow in sorted(wanted - have):
                await self._call("OnloadFlow", _flow_pb(flow))
            for flow in sorted(have - wanted):
                await self._call("OffloadFlow", _flow_pb(flow))
        except grpc.aio.AioRpcError as err:
            LOG.warning("SmartNIC flow sync failed: %s", err.details())
            return
        self.status.flows = wanted

    async def _sync_learned_paths(self) -> None:
        """Bring what the SmartNIC's path MTU discovery learned into the policy (and so to the switch)."""
        try:
            reply = await self._call("ListLearnedPaths", nic_pb2.ListLearnedPathsRequest())
        except grpc.aio.AioRpcError as err:
            # An older SmartNIC without discovery answers UNIMPLEMENTED.
            if err.code() != grpc.StatusCode.UNIMPLEMENTED:
                LOG.debug("SmartNIC learned paths unreadable: %s", err.details())
            return
        now = time.time()
        paths = []
        for path in reply.paths:
            if path.mtu == 0:
                continue
            address = learned_address(path.address)
            if address is None:
                continue
            if path.mtu < (576 if address.version == 4 else 1280) or path.mtu > 0xFFFF:
                LOG.warning("SmartNIC listed path MTU %d to %s, outside what IP allows; ignored", path.mtu, address)
                continue
            paths.append(LearnedPath(address=address, mtu=path.mtu, method=path.method[:MAX_METHOD_CHARS], learned_at=now - path.age_s, rtt_ms=path.rtt_ms))
        self.state.update_learned_paths(paths)

    async def ask(self, method: str, request, timeout: float | None = None):
        """One call on behalf of the operator API: PolicyError (with the SmartNIC's status and words) when it fails."""
        self._metadata(method)  # a standby is told so before anything else
        if self._stub is None or not self.status.reachable:
            raise PolicyError("UNAVAILABLE", f"the SmartNIC at {self.address} is not reachable")
        try:
            return await self._invoke(method, request, timeout or self.rpc_timeout)
        except grpc.aio.AioRpcError as err:
            raise PolicyError(err.code().name, f"SmartNIC: {err.details()}") from None

    async def stats(self) -> nic_pb2.NicStats | None:
        if not self.status.reachable:
            return None
        try:
            return await self._call("GetStats", nic_pb2.GetNicStatsRequest())
        except grpc.aio.AioRpcError:
            return None
