"""The operator's view of path MTUs: learned by the SmartNIC, configured in
rack.yaml, or the default, and which one the border applies to an address.

The SmartNIC's answer is the truth for learned paths (it learns, forgets and
evicts on its own); the policy state says which of them reached the switch.
"""

from __future__ import annotations

import ipaddress
import time

from . import learned
from .nic import NicLink, learned_address
from .state import PolicyError, PolicyState, invalid
from .store import EtcdStore, StoreError
from .v1 import common_pb2, nic_pb2, policy_pb2


def _address(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
    try:
        return ipaddress.ip_address(text)
    except ValueError:
        raise invalid(f"'{text}' is not an IPv4 or IPv6 address") from None


def configured(state: PolicyState, address) -> tuple[int, str]:
    """(mtu, source) from rack.yaml alone: the longest path_mtus prefix, else the default."""
    best = None
    for entry in state.config.path_mtus:
        if entry.prefix.version == address.version and address in entry.prefix and (best is None or entry.prefix.prefixlen > best.prefix.prefixlen):
            best = entry
    if best is not None:
        return best.mtu, "configured"
    return state.config.mtu.default_path_mtu(address.version), "default"


def path_of(state: PolicyState, address, learned: nic_pb2.LearnedPath | None) -> policy_pb2.Path:
    mtu, source = configured(state, address)
    path = policy_pb2.Path(address=str(address), mtu=mtu, source=source)
    if learned is not None:
        path.probing = learned.probing
        path.age_s = learned.age_s
        path.rtt_ms = learned.rtt_ms
        if learned.mtu:
            path.mtu = min(learned.mtu, state.config.mtu.internal)
            path.source = "learned"
            path.method = learned.method
            path.exact = learned.exact
            path.on_switch = address in state.learned_paths
    return path


async def list_paths(nic: NicLink, state: PolicyState, address_text: str) -> policy_pb2.ListPathsResponse:
    wanted = _address(address_text) if address_text else None
    reply = policy_pb2.ListPathsResponse(learned_left_out=state.learned_paths_evicted)
    learned: dict = {}
    if nic.up:
        listed = await nic.ask("ListLearnedPaths", nic_pb2.ListLearnedPathsRequest())
        reply.discovery = listed.enabled
        learned = {address: p for p in listed.paths if (address := learned_address(p.address)) is not None}
    if wanted is not None:
        reply.paths.append(path_of(state, wanted, learned.get(wanted)))
    else:
        for address in sorted(learned, key=lambda a: (a.version, a)):
            reply.paths.append(path_of(state, address, learned[address]))
    return reply


# Refinement rounds the SmartNIC may add for an exact value (each at most its
# --pmtu-timeout-ms, 1 s by default; a few round trips in practice).
MAX_REFINE_ROUNDS = 6


async def probe_path(nic: NicLink, state: PolicyState, address_text: str, exact: bool = False) -> policy_pb2.Path:
    address = _address(address_text)
    # The round lasts up to the SmartNIC's --pmtu-timeout-ms (1 s by default).
    timeout = nic.rpc_timeout + 5.0 + (MAX_REFINE_ROUNDS if exact else 0)
    learned = await nic.ask("ProbePath", common_pb2.ProbePathRequest(address=str(address), exact=exact), timeout=timeout)
    return path_of(state, address, learned)


async def fleet_paths(store, state: PolicyState, address_text: str) -> policy_pb2.ListPathsResponse:
    """What every rack's leader published in the store, rack by rack (from any controller of the fleet)."""
    wanted = str(_address(address_text)) if address_text else None
    if not isinstance(store, EtcdStore):
        raise PolicyError("FAILED_PRECONDITION", "this controller keeps no fleet store (a lab store is one rack's memory): leave out --fleet")
    try:
        racks = await learned.read_fleet(store)
    except StoreError as err:
        raise PolicyError("UNAVAILABLE", str(err)) from None
    now = time.time()
    reply = policy_pb2.ListPathsResponse()
    for rack in sorted(racks):
        out = reply.racks.add(rack=rack)
        for p in racks[rack]:
            if wanted is None or p.address == wanted:
                out.paths.append(policy_pb2.Path(address=p.address, mtu=p.mtu, source="learned", method=p.method, age_s=max(0.0, now - p.learned_at)))
    return reply
